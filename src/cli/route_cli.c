/* plena trace route and plena trace tiny-checkpoint (docs/traces.md): the
 * option tables and thin bodies over ckpt/route.h and ckpt/decoder.h. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ckpt/decoder.h"
#include "ckpt/route.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/route_cli.h"
#include "common/alloc.h"

/* ---- route ---- */

struct route_cli {
    struct plena_route_opts o;
    int64_t *layers;
    int phases;
    int act;
    struct plena_opt_list sample_ids, resume_from;
    char *shard_text;
    int progress; /* enum plena_cli_progress_mode (trace route only) */
};

static int parse_layers(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row;
    struct route_cli *c = base;
    plena_free(c->layers);
    if (!plena_route_parse_layers(v, &c->layers, &c->o.n_layers)) return 0;
    snprintf(msg, n,
             "expected a LIST of layers like 0,2 or 0..3,-1 (ranges A..B inclusive, "
             "negative numbers count from the end), found '%s'",
             v);
    return -1;
}

static int parse_shard(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row;
    struct route_cli *c = base;
    unsigned i, N;
    char tail;
    if (sscanf(v, "%u/%u%c", &i, &N, &tail) == 2 && N >= 1 && i < N) {
        c->o.shard_i = i, c->o.shard_n = N;
        return 0;
    }
    snprintf(msg, n, "expected i/N with 0 <= i < N, found '%s'", v);
    return -1;
}

static const struct plena_opt_enum route_phases = {
    .names = (const char *const[]){"prefill", "decode", "both", NULL}};
static const struct plena_opt_enum route_acts = {.names =
                                                     (const char *const[]){"f32", "bf16", NULL}};

#define R struct route_cli
/* What is computed and for which samples: shared by trace route and
 * campaign route. */
static const struct plena_opt route_common_rows[] = {
    PLENA_OPT_PATH_ROW("--checkpoint", "DIR", R, o.checkpoint,
                       "config.json and *.safetensors (or model.safetensors.index.json)",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_PATH_ROW("--inputs", "FILE", R, o.inputs,
                       "JSONL of {sample_id, input_ids, [model_key, category, benchmark]}",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_STR_ROW("--benchmark", "NAME", R, o.benchmark, "benchmark of every row",
                      .def_text = "the input's benchmark, else the inputs file name without "
                                  "extension"),
    PLENA_OPT_STR_ROW("--model-key", "KEY", R, o.model_key,
                      "keep the inputs of this model_key; the rows' model_key",
                      .def_text = "the inputs' one model_key, else the model name"),
    PLENA_OPT_STR_ROW("--model-name", "NAME", R, o.model_name, "the rows' model",
                      .def_text = "the checkpoint directory's name"),
    PLENA_OPT_CUSTOM_ROW("--layers", "LIST", R, layers, parse_layers, "layers like 0,2 or 0..3,-1",
                         "MoE layers to record: INT or A..B items separated by ',' "
                         "(negative counts from the end)",
                         .def = "0"),
    PLENA_OPT_ENUM_ROW("--phases", "P", R, phases, &route_phases, "rows of these phases"),
    PLENA_OPT_UINT_ROW("--decode-steps", "N", R, o.decode_steps, 1, 1000000,
                       "greedy decode steps after the prefill", .def = "1"),
    PLENA_OPT_UINT_ROW("--max-input-tokens", "N", R, o.max_input_tokens, 1, 16777216,
                       "keep the first N input tokens", .def_text = "all",
                       .flags = PLENA_OPT_ZERO_OFF),
    PLENA_OPT_UINT_ROW("--limit", "N", R, o.limit, 1, UINT64_MAX,
                       "the first N samples (after --model-key and --sample-ids)",
                       .def_text = "all", .flags = PLENA_OPT_ZERO_OFF),
    {.names = "--sample-ids",
     .kind = PLENA_OPT_LIST,
     .metavar = "ID...",
     PLENA_OPT_FIELD(R, sample_ids),
     .flags = PLENA_OPT_REPEAT | PLENA_OPT_GREEDY,
     .help = "only these samples"},
    PLENA_OPT_FLAG_ROW("--sort-by-length", R, o.sort_by_length,
                       "rows by (input length, sample_index) instead of sample_index"),
    PLENA_OPT_UINT_ROW("--threads", "N", R, o.threads, 1, 256, "worker threads", .def = "1"),
    PLENA_OPT_ENUM_ROW("--act", "A", R, act, &route_acts,
                       "f32, or bf16: every stored activation rounded to BF16"),
};
/* The output file of one trace route run. */
static const struct plena_opt route_file_rows[] = {
    PLENA_OPT_PATH_ROW("--out", "ROWS", R, o.out, "routing rows (JSONL, appended)",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--resume", R, o.resume,
                       "continue ROWS: complete samples skipped, missing rows appended",
                       .excludes = "--overwrite"),
    {.names = "--resume-from",
     .kind = PLENA_OPT_LIST,
     .metavar = "FILE...",
     PLENA_OPT_FIELD(R, resume_from),
     .flags = PLENA_OPT_REPEAT | PLENA_OPT_GREEDY,
     .needs = "--resume",
     .help = "rows of these files count as present too"},
    PLENA_OPT_FLAG_ROW("--overwrite", R, o.overwrite, "truncate a non-empty ROWS first"),
    PLENA_OPT_CUSTOM_ROW("--shard", "i/N", R, shard_text, parse_shard, "i/N with 0 <= i < N",
                         "the samples at positions i mod N of the cost order", .def_text = "all"),
    PLENA_OPT_FLAG_ROW("--keep-going", R, o.keep_going,
                       "continue after a failed sample (the exit code is still 1)"),
    PLENA_OPT_PATH_ROW("--failure-log", "FILE", R, o.failure_log,
                       "append {sample_id, sample_index, code, message, seconds} per failure"),
    PLENA_OPT_PATH_ROW("--summary-out", "FILE", R, o.summary_out, "write the run summary JSON"),
    PLENA_CLI_PROGRESS_ROW(R, progress),
};
#undef R

static void route_fini(void *p)
{
    struct route_cli *c = p;
    plena_free(c->layers);
    c->layers = NULL;
}

const struct plena_cmd_spec plena_cli_trace_route_spec = {
    .name = "trace route",
    .summary = "routing rows from token ids and local safetensors weights",
    .description =
        "Runs the checkpoint's decoder (f32, sums in index order, no FMA, deterministic math) "
        "token by token over each sample's input_ids and records each requested MoE layer's "
        "router: one JSONL row per (sample, phase, layer, decode step), ids in rank order and "
        "the weights the model multiplies by. Decode steps feed the greedy token (an "
        "end-of-sequence token does not stop decoding). Nothing is downloaded. Supported: "
        "qwen3_moe, qwen2_moe, mixtral, olmoe.",
    .groups = (const struct plena_opt_group[]){PLENA_OPT_GROUP(NULL, route_common_rows),
                                               PLENA_OPT_GROUP("output", route_file_rows)},
    .n_groups = 2,
    .fini = route_fini,
    .opts_size = sizeof(struct route_cli),
};

/* The parsed values that need translating into struct plena_route_opts. */
static void route_opts_finish(struct route_cli *c)
{
    c->o.layers = c->layers;
    c->o.phases = c->phases + 1;
    c->o.act_bf16 = c->act == 1;
    c->o.sample_ids = c->sample_ids.v;
    c->o.n_sample_ids = c->sample_ids.n;
    c->o.resume_from = c->resume_from.v;
    c->o.n_resume_from = c->resume_from.n;
}

/* the progress line: prompt tokens and decode steps run, of those to run */
static void route_progress(void *ctx, uint64_t done, uint64_t total)
{
    plena_cli_progress_update(ctx, "route", done, total, "tokens");
}

int plena_cli_trace_route(void *opts, const struct plena_cli_args *a)
{
    (void)a;
    struct route_cli *c = opts;
    plena_cli_catch_stop_signals();
    c->o.stop = &plena_cli_stop;
    route_opts_finish(c);
    struct plena_cli_progress pg;
    plena_cli_progress_init(&pg, "trace route", c->progress);
    c->o.on_progress = route_progress;
    c->o.on_progress_ctx = &pg;
    struct plena_route_summary s;
    struct plena_err err = {0};
    int rc = plena_route_run(&c->o, &s, &err);
    plena_cli_progress_end(&pg);
    if (rc) return plena_cli_report("trace route", &err);
    fprintf(stderr,
            "plena trace route: %llu samples selected, %llu already complete, %llu processed, "
            "%llu rows written\n",
            (unsigned long long)s.samples_selected, (unsigned long long)s.samples_already_complete,
            (unsigned long long)s.samples_processed, (unsigned long long)s.rows_written);
    return 0;
}

/* ---- campaign route ---- */

struct campaign_route_cli {
    struct route_cli r;
    const char *out;
    unsigned shards, jobs;
    uint32_t mlen, blen;
};

#define CR struct campaign_route_cli
static const struct plena_opt campaign_route_rows[] = {
    PLENA_OPT_PATH_ROW("--out", "DIR", CR, out,
                       "campaign directory: routing/ (shard rows, coverage.json), traces/",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_UINT_ROW("--shards", "N", CR, shards, 1, 4096,
                       "route shards, one worker process and one rows file each", .def = "2"),
    PLENA_OPT_UINT_ROW("--jobs", "J", CR, jobs, 1, 4096, "shards running at once", .def = "2"),
    PLENA_OPT_UINT_ROW("--mlen", "M", CR, mlen, 1, 4096, "replay.mlen of the traces", .def = "64"),
    PLENA_OPT_UINT_ROW("--blen", "B", CR, blen, 1, 4096, "replay.blen of the traces", .def = "4"),
};
#undef CR

static void campaign_route_fini(void *p)
{
    route_fini(&((struct campaign_route_cli *)p)->r);
}

const struct plena_cmd_spec plena_cli_campaign_route_spec = {
    .name = "campaign route",
    .summary = "routing rows from a checkpoint, sharded, then traces for campaign run",
    .description =
        "Runs plena trace route sharded by sample (cost order) over worker processes, each "
        "resuming its own OUT/routing/<benchmark>.shard-I-of-N.jsonl; checks the coverage as "
        "sets (OUT/routing/coverage.json: expected and missing keys, the first 20 missing); "
        "builds one trace per row into OUT/traces/. A rerun resumes every stage. Then: plena "
        "campaign run --traces OUT/traces --out OUT.",
    .groups =
        (const struct plena_opt_group[]){PLENA_OPT_GROUP(NULL, campaign_route_rows),
                                         {"route options", route_common_rows,
                                          sizeof route_common_rows / sizeof route_common_rows[0],
                                          offsetof(struct campaign_route_cli, r), 0}},
    .n_groups = 2,
    .fini = campaign_route_fini,
    .opts_size = sizeof(struct campaign_route_cli),
};

int plena_cli_campaign_route(void *opts, const struct plena_cli_args *a)
{
    (void)a;
    struct campaign_route_cli *c = opts;
    plena_cli_catch_stop_signals();
    route_opts_finish(&c->r);
    struct plena_campaign_route_opts o = {
        .route = c->r.o,
        .out = c->out,
        .shards = c->shards,
        .jobs = c->jobs,
        .mlen = c->mlen,
        .blen = c->blen,
        .stop = &plena_cli_stop,
    };
    struct plena_campaign_route_summary s;
    struct plena_err err = {0};
    int rc = plena_campaign_route(&o, &s, &err);
    if (rc && rc != PLENA_E_FAILED) return plena_cli_report("campaign route", &err);
    printf("%s campaign route: expected_keys=%llu missing_keys=%llu traces=%zu out=%s/traces\n",
           rc ? "FAIL" : "PASS", (unsigned long long)s.expected_keys,
           (unsigned long long)s.missing_keys, s.traces, c->out);
    return rc ? plena_cli_report("campaign route", &err) : 0;
}

/* ---- tiny-checkpoint ---- */

struct tiny_cli {
    const char *out, *variant;
    uint64_t seed;
};

static const char *tiny_variant_name(int v)
{
    return v >= 0 && v < PLENA_DEC_ARCH_COUNT ? plena_dec_arch_tiny_variant((enum plena_dec_arch)v)
                                              : "?";
}
static const struct plena_opt_enum tiny_variants = {.name = tiny_variant_name};

struct tiny_cli_v {
    struct tiny_cli t;
    int variant;
};

#define T struct tiny_cli_v
static const struct plena_opt tiny_rows[] = {
    PLENA_OPT_PATH_ROW("--out", "DIR", T, t.out, "the checkpoint directory (created)",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_ENUM_ROW("--variant", "V", T, variant, &tiny_variants, "architecture variant"),
    PLENA_OPT_UINT_ROW("--seed", "S", T, t.seed, 0, UINT64_MAX, "64-bit seed", .def = "1"),
};
#undef T

const struct plena_cmd_spec plena_cli_trace_tiny_spec = {
    .name = "trace tiny-checkpoint",
    .summary = "a tiny deterministic checkpoint and inputs for tests",
    .description = "Writes DIR/config.json, DIR/model.safetensors (BF16) and DIR/inputs.jsonl "
                   "(5 samples of 1, 2, 5, 9 and 17 tokens). Each tensor is drawn from "
                   "derive(seed, 5, fnv1a64(name)). Written by plena, never downloaded.",
    PLENA_CMD_ROWS(tiny_rows),
    .opts_size = sizeof(struct tiny_cli_v),
};

int plena_cli_trace_tiny(void *opts, const struct plena_cli_args *a)
{
    (void)a;
    struct tiny_cli_v *c = opts;
    struct plena_err err = {0};
    if (plena_tiny_checkpoint_write(c->t.out, (enum plena_dec_arch)c->variant, c->t.seed, NULL,
                                    NULL, &err))
        return plena_cli_report("trace tiny-checkpoint", &err);
    return 0;
}
