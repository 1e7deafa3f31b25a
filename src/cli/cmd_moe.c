/* plena moe: build a MoE layer (docs/lowering.md "Model presets"), run it through the
 * run session (src/run/) and print the stage table with the shared-vs-routed
 * split (docs/profile.md "Shared-vs-routed split"); --check compares the emulator with
 * the bit-exact reference and the float64 bound (docs/lowering.md "Checking a build").
 * The model checks and the --routing choice live in gen/build.c, reading a
 * routing trace in trace/routing.c, running and checking in verify/; this
 * file only parses options, prints and picks exit codes. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "common/alloc.h"
#include "gen/build.h"
#include "profile/profile.h"
#include "trace/trace.h"
#include "verify/verify.h"

static void print_stage_table(const struct plena_verify_moe_report *r,
                              const struct plena_moe_emit_info *info, int has_shared)
{
    printf("%-26s %14s %8s %14s\n", "stage", "cycles", "share", "hbm_bytes");
    uint64_t wall[PLENA_STAGE_COUNT];
    for (int s = 0; s < PLENA_STAGE_COUNT; s++) {
        const struct plena_verify_stage_row *row = &r->stages[s];
        printf("%-26s %14llu %7.2f%% %14llu\n", plena_stage_name((enum plena_stage)s),
               (unsigned long long)row->cycles, 100.0 * row->share, (unsigned long long)row->bytes);
        wall[s] = row->picos;
    }
    struct plena_profile_split sp;
    plena_profile_split_compute(wall, r->clock_ps ? r->clock_ps : 1, &sp);
    printf("shared_vs_routed: shared_cycles %llu routed_cycles %llu",
           (unsigned long long)sp.shared_cycles, (unsigned long long)sp.routed_cycles);
    if (sp.has_shared_fraction)
        printf(" shared_fraction %.4f", sp.shared_fraction);
    else
        printf(" shared_fraction null");
    if (sp.has_ratio)
        printf(" shared_to_routed_ratio %.4f", sp.shared_to_routed_ratio);
    else
        printf(" shared_to_routed_ratio null");
    printf(" routed_lowering %s\n", plena_lowering_marker(info->routed_lowering));
    /* the caveat is about comparing shared with routed cycles: a model
     * without shared experts has nothing to compare */
    if (has_shared)
        printf("note: %s\n", plena_profile_shared_vs_routed_text(info->routed_lowering));
}

/* routing_stats (docs/profile.md "routing_stats") under the stage table */
static void print_routing_stats(const struct plena_routing_stats *st)
{
    printf("routing_stats: lowering %s active_experts %u tokens_per_expert min %.0f max %.0f "
           "mean %.2f cv %.4f gini %.4f\n",
           plena_lowering_marker((enum plena_lowering)st->lowering), st->active_experts,
           st->tpe_min, st->tpe_max, st->tpe_mean, st->tpe_cv, st->tpe_gini);
    printf("routing_stats: routed_rows issued %llu useful %llu padding %llu row_utilisation %.4f "
           "shared_row_utilisation ",
           (unsigned long long)st->routed_rows_issued, (unsigned long long)st->routed_rows_useful,
           (unsigned long long)st->padding_rows, st->row_utilisation);
    if (st->shared_row_utilisation < 0)
        printf("null\n");
    else
        printf("%.4f\n", st->shared_row_utilisation);
    printf("routing_stats: weight_bytes fetched %llu ideal %llu (%.3fx)\n",
           (unsigned long long)st->weight_bytes_fetched, (unsigned long long)st->weight_bytes_ideal,
           st->weight_bytes_ideal
               ? (double)st->weight_bytes_fetched / (double)st->weight_bytes_ideal
               : 0.0);
}

static void print_check(const struct plena_moe_build *b, const struct plena_verify_moe_report *rep)
{
    if (rep->check_trapped) {
        printf("check: FAILED: %s\n", rep->check_trap);
        return;
    }
    const struct plena_verify_result *r = &rep->check;
    printf("check: output %llu/%llu BF16 elements bit-identical, nan %llu, ids %s, weights %s, "
           "gate %s\n",
           (unsigned long long)(r->elements - r->mismatches), (unsigned long long)r->elements,
           (unsigned long long)r->nan_count, r->id_mismatches ? "DIFFER" : "equal",
           r->w_mismatches ? "DIFFER" : "equal", r->gate_mismatches ? "DIFFER" : "equal");
    if (r->first_mismatch >= 0)
        printf("check: first mismatch at row %llu col %llu: emulator 0x%04X reference 0x%04X\n",
               (unsigned long long)(r->first_mismatch / b->cfg.H),
               (unsigned long long)(r->first_mismatch % b->cfg.H), r->first_dev, r->first_ref);
    if (r->numerical)
        printf("check: float64 rel_rms %.6f (MoE output), %.6f (RMSNorm), %.6f (full output), "
               "bound %.2f %s; device ids %s float64 ids\n",
               r->rel_rms, r->rel_rms_norm, r->rel_rms_full, PLENA_MOE_REL_RMS_BOUND,
               r->bound_ok ? "ok" : "EXCEEDED", r->ids_f64_ok ? "equal" : "DIFFER from");
    else
        printf("check: zero weights or input: float64 bound not applicable (smoke only)\n");
    if (r->route_tokens)
        printf("check: routing against the model's float64 router: %u tokens, %u same expert "
               "set, %u near-ties, %u different%s\n",
               r->route_tokens, r->route_tokens - r->route_near_ties - r->route_different,
               r->route_near_ties, r->route_different,
               r->route_different && r->numerical ? " (FAILED)" : "");
    printf("check: %s\n", r->passed ? "PASSED" : "FAILED");
}

/* the progress line of the timed run, against the build's predicted count */
struct moe_progress_ctx {
    struct plena_cli_progress pg;
    uint64_t predicted;
};
static void moe_progress(void *ctx, uint64_t executed)
{
    struct moe_progress_ctx *m = ctx;
    plena_cli_progress_update(&m->pg, "run", executed, m->predicted, "instructions");
}

struct moe_cli {
    const char *model, *out, *routing, *settings, *lowering;
    uint32_t tokens;
    uint64_t seed;
    int weights; /* enum plena_weights_mode */
    int no_run, check, profile, program_only, list, all_experts;
    const char *timeline;
    int timeline_detail;
    int progress; /* enum plena_cli_progress_mode */
    unsigned threads;
    const char *weight_cache;
};

PLENA_OPT_ENUM_OF(weights_mode);
static const struct plena_opt_enum lowerings = {.names = plena_lowering_options};

#define M struct moe_cli
static const struct plena_opt moe_rows[] = {
    {.names = "--model",
     .kind = PLENA_OPT_STR,
     .metavar = "NAME|FILE",
     PLENA_OPT_FIELD(M, model),
     .def_text = "none; required unless --list-models",
     .help = "model preset (--list-models) or HF-style config JSON"},
    {.names = "--tokens",
     .kind = PLENA_OPT_UINT,
     .metavar = "T",
     PLENA_OPT_FIELD(M, tokens),
     .min = 1,
     .max = UINT32_MAX,
     .def_text = "none; required unless --list-models",
     .help = "tokens of the layer"},
    {.names = "--routing",
     .kind = PLENA_OPT_STR,
     .metavar = "device|balanced|random|FILE",
     PLENA_OPT_FIELD(M, routing),
     .def_text = "device for a preset with device routing, else balanced",
     .help = "device: the model's router computed on the device (every router but a capacity "
             "limit); balanced, random (seeded by --seed) or a route trace FILE: fixed routing"},
    {.names = "--lowering",
     .kind = PLENA_OPT_CHOICE,
     .metavar = "L",
     PLENA_OPT_FIELD(M, lowering),
     .choices = &lowerings,
     .def = PLENA_LOWERING_DEFAULT_OPTION,
     .help = "routed lowering: expert-major (each active expert's weights fetched once, its "
             "tokens in full BLEN-row tiles) or pair-major (one pair per tile, the upstream "
             "compiler's form)"},
    {.names = "--seed",
     .kind = PLENA_OPT_UINT,
     .metavar = "S",
     PLENA_OPT_FIELD(M, seed),
     .max = UINT64_MAX,
     .def = "42",
     .help = "weight, input and --routing random seed"},
    PLENA_OPT_ENUM_ROW("--weights", "MODE", M, weights, &plena_opt_enum_weights_mode,
                       "staged expert and shared weights"),
    {.names = "--out",
     .kind = PLENA_OPT_PATH,
     .metavar = "DIR",
     PLENA_OPT_FIELD(M, out),
     .def = "moe_build",
     .help = "build directory (program, images, layout, dumps, profile)"},
    {.names = "--settings",
     .kind = PLENA_OPT_PATH,
     .metavar = "FILE",
     PLENA_OPT_FIELD(M, settings),
     .def_text = "the built-in lookup",
     .help = "settings file"},
    PLENA_OPT_FLAG_ROW("--no-run", M, no_run, "build only (with --check: the check still runs)"),
    PLENA_OPT_FLAG_ROW("--check", M, check,
                       "compare the emulator with the bit-exact reference and the float64 bound"),
    PLENA_OPT_FLAG_ROW("--profile", M, profile,
                       "write the stage profile and print the stage table"),
    PLENA_OPT_UINT_ROW("--threads", "N", M, threads, 1, 4096,
                       "host threads: the build's expert weights (with --check), the check's "
                       "references split over experts and rows, the "
                       "timed run's dumps written aside (never changes outputs)",
                       .def = "1"),
    PLENA_OPT_PATH_ROW("--weight-cache", "DIR", M, weight_cache,
                       "read generated random weight matrices from DIR and store the missing "
                       "ones there (created when missing; the same bytes either way: "
                       "docs/design.md \"Weight cache\")"),
    {.names = "--program-only",
     .kind = PLENA_OPT_FLAG,
     PLENA_OPT_FIELD(M, program_only),
     .ival = 1,
     .excludes = "--check|--profile",
     .help = "write the program only (no images, no run)"},
    PLENA_OPT_PATH_ROW("--timeline", "FILE", M, timeline,
                       "write the timed run's Perfetto / chrome://tracing timeline JSON "
                       "(docs/timeline.md)"),
    PLENA_CLI_TIMELINE_DETAIL_ROW(M, timeline_detail, "--timeline"),
    PLENA_CLI_PROGRESS_ROW(M, progress),
    PLENA_OPT_FLAG_ROW("--all-experts", M, all_experts,
                       "device routing: stage every expert's weights, not only the experts the "
                       "router reaches with this build's inputs"),
    PLENA_OPT_FLAG_ROW("--list-models", M, list, "list the model presets and exit"),
};
#undef M
static const struct plena_opt_group moe_groups[] = {
    {NULL, moe_rows, sizeof moe_rows / sizeof moe_rows[0], 0, 0}};

static void moe_init(void *p)
{
    ((struct moe_cli *)p)->weights = PLENA_WEIGHTS_RANDOM;
}

static const struct plena_cmd_spec moe_spec = {
    .name = "moe",
    .summary = "build (and run and check) a MoE layer program",
    .description =
        "Builds a MoE layer program for a model preset (docs/lowering.md \"Model presets\"), "
        "runs it and prints the summary lines and, with --profile, the stage table "
        "with the shared-vs-routed split; --check compares the output with the "
        "reference models.",
    .groups = moe_groups,
    .n_groups = 1,
    .init = moe_init,
    .opts_size = sizeof(struct moe_cli),
};

static int cmd_moe(int argc, char **argv)
{
    struct moe_cli c;
    struct plena_opts_result pr;
    int code;
    if (plena_cli_parse(&moe_spec, argc, argv, &c, &pr, &code)) return code;
    const char *model = c.model, *out = c.out, *routing = c.routing;
    const char *settings_path = c.settings;
    const uint64_t seed = c.seed;
    const int no_run = c.no_run, check = c.check, profile = c.profile;
    const int program_only = c.program_only;
    if (c.list) {
        for (unsigned i = 0; i < plena_model_preset_count(); i++) {
            const struct plena_moe_model *m = plena_model_preset_at(i);
            printf("%-20s H=%-5u I=%-5u E=%-4u k=%-3u shared=%u x %u%s\n", m->name, m->hidden,
                   m->moe_inter, m->num_experts, m->top_k, m->n_shared, m->shared_inter,
                   m->is_tiny ? " (tiny)" : "");
        }
        return plena_status_exit_code(PLENA_OK);
    }
    if (!model) return plena_cli_usage_error("moe", "--model NAME|FILE is required");
    /* from the start: the build counts towards "work that takes over a second" */
    struct moe_progress_ctx pg;
    plena_cli_progress_init(&pg.pg, "moe", c.progress);
    if (!c.tokens) return plena_cli_usage_error("moe", "--tokens T is required");
    const enum plena_weights_mode wk = (enum plena_weights_mode)c.weights;
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_settings set;
    if (plena_settings_load(settings_path, &set, &err)) return plena_cli_report("moe", &err);
    plena_cli_settings_warnings("moe", &set, NULL);
    struct plena_moe_model mdl;
    if (plena_model_resolve(model, &mdl, &err)) return plena_cli_report("moe", &err);
    struct plena_gen_machine gm;
    plena_gen_machine_from_settings(&set, &gm);
    if (plena_moe_build_check_model(&mdl, &gm, &err)) return plena_cli_report("moe", &err);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, &mdl, &gm, c.tokens);
    if (plena_lowering_parse_option(c.lowering, &o.cfg.lowering))
        return plena_cli_usage_error("moe", "--lowering: expected pair-major or expert-major");
    o.weights = wk;
    o.weight_seed = seed;
    o.input_seed = seed;
    o.mx_mode = set.mx_mode;
    o.out_dir = out;
    o.program_only = program_only;
    /* without --check nothing reads the expert matrices back after
     * hbm.bin is written (the run loads the file): each is generated into
     * one cache-warm scratch and written from there instead of being held
     * (docs/design.md "Weight generation: jumped streams") */
    o.lazy_experts = !check;
    o.threads = c.threads; /* an eager build's expert matrices on the threads */
    o.weight_cache = c.weight_cache;
    int bad = plena_cli_check_weight_cache(c.weight_cache, "moe");
    if (bad) return bad;
    /* SIGINT/SIGTERM: the build stops between phases and before each matrix
     * of the exact HBM fit count (hbm.bin's temporary removed), the run as a
     * trap, the check's references before their next expert; exit 5 */
    o.stop = &plena_cli_stop;
    plena_cli_catch_stop_signals();
    if (!c.all_experts) o.reachable_experts = plena_verify_reachable_experts;
    uint32_t *ids = NULL;
    float *w = NULL;
    const uint32_t T = c.tokens;
    int rc = 0;
    if (o.cfg.routing != PLENA_ROUTING_NONE && routing && !plena_moe_routing_is_keyword(routing)) {
        char where[4200];
        snprintf(where, sizeof where, "--routing %s", routing);
        const struct plena_trace_routing_shape want = {o.cfg.name, o.cfg.H, o.cfg.E, o.cfg.k, T};
        struct plena_trace_report rep;
        plena_trace_report_init(&rep);
        if (plena_trace_read_fixed_routing(routing, where, &want, &ids, &w, &rep, &err)) {
            rc = plena_cli_report("moe", &err);
            for (size_t i = 0; i < rep.n_errors; i++)
                fprintf(stderr, "  %s %s: %s\n", rep.errors[i].code, rep.errors[i].path,
                        rep.errors[i].message);
        }
        plena_trace_report_free(&rep);
        if (rc) goto done;
    }
    if (plena_moe_build_routing(&o, &mdl, routing, seed, &ids, &w, &err)) {
        rc = plena_cli_report("moe", &err);
        goto done;
    }
    struct plena_moe_build b;
    if (plena_moe_build_run(&o, &b, &err)) {
        rc = plena_cli_report("moe", &err);
        plena_moe_build_free(&b);
        goto done;
    }
    printf("moe: %s T=%u: %zu instructions (%llu executed predicted), T_blk %u, pairs %s, "
           "topk %s -> %s\n",
           b.cfg.name, T, b.n_words, (unsigned long long)b.prog.dyn_total, b.info.map.t_blk,
           plena_pair_form_name(b.info.pair_form), plena_topk_encoding_name(b.info.topk_encoding),
           out);
    if (program_only || (no_run && !check)) goto done_build;
    if (b.hbm_size > set.hbm_size)
        fprintf(stderr,
                "plena moe: warning: HBM image of %llu bytes exceeds HBM_SIZE %llu; reads past "
                "the capacity return zeros\n",
                (unsigned long long)b.hbm_size, (unsigned long long)set.hbm_size);
    pg.predicted = b.prog.dyn_total;
    struct plena_verify_moe_opts vo = {
        &set,         out,        !no_run,
        profile,      check,      argc,
        argv,         c.timeline, (enum plena_timeline_detail)c.timeline_detail,
        moe_progress, &pg,        &plena_cli_stop,
        c.threads};
    struct plena_verify_moe_report rep;
    int vrc = plena_verify_moe(&b, &vo, &rep, &err);
    plena_cli_progress_end(&pg.pg);
    if (rep.ran) {
        char sum[2048];
        plena_run_format_summary(&rep.run, sum, sizeof sum);
        fputs(sum, stdout);
        if (rep.have_stages) print_stage_table(&rep, &b.info, b.cfg.Is > 0);
        if (rep.routing.valid) print_routing_stats(&rep.routing);
    }
    if (rep.checked) print_check(&b, &rep);
    if (vrc)
        rc = plena_cli_report("moe", &err);
    else
        rc = plena_status_exit_code(rep.status);
done_build:
    if (b.weight_cache)
        printf("weight cache %s: %llu matrices read, %llu generated and stored, %llu stale "
               "entries replaced\n",
               b.weight_cache, (unsigned long long)b.cache_counts[PLENA_MOE_CACHE_HITS],
               (unsigned long long)b.cache_counts[PLENA_MOE_CACHE_STORED],
               (unsigned long long)b.cache_counts[PLENA_MOE_CACHE_STALE]);
    plena_moe_build_free(&b);
done:
    plena_free(ids);
    plena_free(w);
    return rc;
}

const struct plena_cli_cmd plena_cli_cmd_moe = {.spec = &moe_spec, .fn = cmd_moe};
