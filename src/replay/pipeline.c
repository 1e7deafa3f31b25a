/* Steps 2-8 of the replay pipeline (docs/replay.md "Pipeline") for one
 * prepared trace, and the results.json assembly. Stage rows, the
 * shared-vs-routed split and the routing tax come from the run's
 * stage_profile.json / stage picoseconds, summed in picoseconds and rounded
 * once. The build is gen's (plena_moe_build_run); the run session and the
 * reference inputs are verify's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/pool.h"
#include "common/fileio.h"
#include "gen/build.h"
#include "gen/router_logits.h"
#include "model/routing_json.h"
#include "model/trace_model.h"
#include "num/num.h"
#include "ref/ref.h"
#include "replay/functional.h"
#include "replay/gates.h"
#include "settings/settings.h"
#include "isa/stages.h"
#include "profile/profile.h"
#include "replay/export.h"
#include "replay/jsonw.h"
#include "replay/replay.h"
#include "model/routing_json.h"
#include "replay/result.h"
#include "run/run.h"
#include "verify/verify.h"

#ifndef PLENA_VERSION
#define PLENA_VERSION "0.0.0"
#endif

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return b ? a / b + (a % b != 0) : a;
}

/* The shared_vs_routed object (docs/profile.md "Shared-vs-routed split") from per-stage
 * picoseconds; routed_lowering from the profile */
json_t *plena_replay_split_json(const uint64_t *pic, uint64_t clock_ps, const char *routed_lowering)
{
    struct plena_profile_split sp;
    plena_profile_split_compute(pic, clock_ps, &sp);
    json_t *o = json_object();
    json_object_set_new(o, "shared_picos", json_integer((json_int_t)sp.shared_picos));
    json_object_set_new(o, "routed_picos", json_integer((json_int_t)sp.routed_picos));
    json_object_set_new(o, "excluded_picos", json_integer((json_int_t)sp.excluded_picos));
    json_object_set_new(o, "combine_picos",
                        json_integer((json_int_t)sp.branch_picos[PLENA_BRANCH_COMBINE]));
    json_object_set_new(o, "residual_picos",
                        json_integer((json_int_t)sp.branch_picos[PLENA_BRANCH_RESIDUAL]));
    json_object_set_new(o, "other_picos",
                        json_integer((json_int_t)sp.branch_picos[PLENA_BRANCH_OTHER]));
    json_object_set_new(o, "total_profiled_picos", json_integer((json_int_t)sp.total_picos));
    json_object_set_new(o, "shared_cycles", json_integer((json_int_t)sp.shared_cycles));
    json_object_set_new(o, "routed_cycles", json_integer((json_int_t)sp.routed_cycles));
    json_object_set_new(o, "shared_fraction",
                        sp.has_shared_fraction ? json_real(sp.shared_fraction) : json_null());
    json_object_set_new(o, "routed_fraction",
                        sp.has_shared_fraction ? json_real(sp.routed_fraction) : json_null());
    json_object_set_new(o, "shared_to_routed_ratio",
                        sp.has_ratio ? json_real(sp.shared_to_routed_ratio) : json_null());
    json_object_set_new(o, "routed_lowering", json_string(routed_lowering));
    enum plena_lowering lw = PLENA_LOWERING_UNSET;
    if (plena_lowering_parse_marker(routed_lowering, &lw)) lw = PLENA_LOWERING_UNSET;
    json_object_set_new(o, "note", json_string(plena_profile_shared_vs_routed_text(lw)));
    return o;
}

/* the routing tax, stage_derived (docs/profile.md "Routing tax") */
json_t *plena_replay_tax_json(const uint64_t *pic, uint64_t clock_ps)
{
    struct plena_profile_split sp;
    plena_profile_split_compute(pic, clock_ps, &sp);
    return json_pack("{s:s,s:I,s:I,s:o,s:n,s:n,s:n}", "method", "stage_derived",
                     "routing_tax_picos", (json_int_t)sp.routing_tax_picos, "routing_tax_cycles",
                     (json_int_t)sp.routing_tax_cycles, "routing_tax_fraction",
                     sp.total_picos
                         ? json_real((double)sp.routing_tax_picos / (double)sp.total_picos)
                         : json_integer(0),
                     "delta_cycles", "delta_hbm_bytes_read", "delta_hbm_bytes_written");
}

/* 15 stage rows (the stages.csv columns of docs/replay.md "Exports" without trace_id) from a
 * profile v4 */
static json_t *stage_rows(const json_t *profile, uint64_t clock_ps)
{
    json_t *rows = json_array();
    json_t *st = json_object_get(profile, "stages");
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++) {
        const char *name = plena_stage_name((enum plena_stage)s);
        json_t *e = json_object_get(st, name);
        json_t *rp = json_object_get(e, "resource_proxy_picos");
        json_t *r = json_object();
        json_object_set_new(r, "stage", json_string(name));
        json_object_set_new(
            r, "branch",
            json_string(plena_stage_branch_name(plena_stage_branch((enum plena_stage)s))));
        const char *copy[] = {"instructions",     "wall_picos",           "wall_cycles",
                              "time_fraction",    "instruction_fraction", "hbm_bytes_read",
                              "hbm_bytes_written"};
        for (size_t i = 0; i < 7; i++) {
            json_t *v = json_object_get(e, copy[i]);
            json_object_set_new(r, copy[i], v ? json_incref(v) : json_null());
        }
        for (unsigned i = 0; i < PLENA_RESOURCE_COUNT; i++) {
            const char *res = plena_resource_name((enum plena_resource)i);
            char k[32];
            snprintf(k, sizeof k, "%s_cycles", res);
            json_t *v = json_object_get(rp, res);
            json_object_set_new(r, k,
                                json_is_integer(v) ? json_integer((json_int_t)ceil_div(
                                                         (uint64_t)json_integer_value(v), clock_ps))
                                                   : json_null());
        }
        json_array_append_new(rows, r);
    }
    return rows;
}

struct ctx {
    const struct plena_replay_item *it;
    const struct plena_replay_opts *o;
    char dir[4096];
    struct plena_replay_checks checks;
    int generated;
    int ran;
    struct plena_run_outcome run;
    json_t *run_stats;  /* parsed run_stats.json or NULL */
    json_t *profile;    /* parsed stage_profile.json or NULL */
    json_t *functional; /* the `functional` object */
    json_t *repeat;     /* the repeat object or NULL */
    int smoke;
    struct plena_settings settings;
    int settings_ok;
    struct plena_moe_build build;
    int have_build;
    uint32_t *ids;     /* [T*k] trace ids */
    float *logits;     /* --routing device: the preloaded logits [T*E] */
    uint32_t *dev_ids; /* --routing device: the ids the device selects [T*k] */
    double *w64;       /* [T*k] trace weights as numbers */
    float *w32;        /* [T*k] binary32 */
    uint32_t T, K;
    int in_memory; /* stand-alone gates: stage in memory, never write the build */
    struct plena_routing_stats routing; /* of the build (valid once generated) */
};

static int path_in(const struct ctx *c, const char *name, char *buf, size_t n)
{
    return plena_path_join(buf, n, c->dir, name);
}

static int load_routing(struct ctx *c, struct plena_err *err)
{
    const json_t *t = c->it->trace;
    const json_t *r = json_object_get(t, "routing");
    c->T = (uint32_t)json_integer_value(
        json_object_get(json_object_get(t, "workload"), "token_count"));
    c->K = (uint32_t)json_integer_value(json_object_get(json_object_get(t, "model"), "top_k"));
    size_t n = (size_t)c->T * c->K;
    c->ids = plena_calloc(n ? n : 1, sizeof *c->ids);
    c->w64 = plena_calloc(n ? n : 1, sizeof *c->w64);
    c->w32 = plena_calloc(n ? n : 1, sizeof *c->w32);
    if (!c->ids || !c->w64 || !c->w32)
        return PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
    const json_t *ids = json_object_get(r, "topk_indices"),
                 *ws = json_object_get(r, "topk_weights");
    for (uint32_t i = 0; i < c->T; i++)
        for (uint32_t j = 0; j < c->K; j++) {
            size_t p = (size_t)i * c->K + j;
            c->ids[p] = (uint32_t)json_integer_value(json_array_get(json_array_get(ids, i), j));
            c->w64[p] = json_number_value(json_array_get(json_array_get(ws, i), j));
            c->w32[p] =
                (float)c->w64[p]; /* first link of the weight chain of docs/replay.md "Pipeline" */
        }
    return 0;
}

/* Step 4: the same library entry point as `plena moe` (gen/build.h). */
static int generate(struct ctx *c, struct plena_err *err)
{
    struct plena_err gerr;
    plena_err_clear(&gerr);
    char m[1100];
    int rc = plena_settings_load(c->o->settings_path, &c->settings, &gerr);
    if (!rc && (c->o->mlen || c->o->blen)) {
        char a1[64], a2[64], a3[64];
        const char *as[3];
        size_t na = 0;
        if (c->o->mlen) {
            snprintf(a1, sizeof a1, "CONFIG.MLEN=%u", c->o->mlen);
            snprintf(a2, sizeof a2, "CONFIG.VLEN=%u", c->o->mlen);
            as[na++] = a1;
            as[na++] = a2;
        }
        if (c->o->blen) {
            snprintf(a3, sizeof a3, "CONFIG.BLEN=%u", c->o->blen);
            as[na++] = a3;
        }
        rc = plena_settings_override_many(&c->settings, as, na, &gerr);
    }
    if (rc) {
        plena_replay_check_set(&c->checks, "generate", 0, "settings: %s",
                               plena_err_format(&gerr, m, sizeof m));
        return 0;
    }
    c->settings_ok = 1;
    if ((rc = load_routing(c, err))) return rc;
    struct plena_moe_model mdl;
    if ((rc = plena_model_from_trace(json_object_get(c->it->trace, "model"), "model", &mdl,
                                     &gerr))) {
        plena_replay_check_set(&c->checks, "generate", 0, "trace model: %s",
                               plena_err_format(&gerr, m, sizeof m));
        return 0;
    }
    struct plena_gen_machine mach;
    plena_gen_machine_from_settings(&c->settings, &mach);
    struct plena_moe_build_opts bo;
    plena_moe_build_opts_init(&bo, &mdl, &mach, c->T);
    if (plena_lowering_parse_option(c->o->lowering, &bo.cfg.lowering)) {
        plena_replay_check_set(&c->checks, "generate", 0, "lowering '%s': expected %s or %s",
                               c->o->lowering ? c->o->lowering : "(none)",
                               plena_lowering_options[0], plena_lowering_options[1]);
        return 0;
    }
    bo.fixed_ids = c->ids;
    bo.fixed_w = c->w32;
    if (c->o->routing_device) { /* preloaded logits reproducing the trace (gen/router_logits.h) */
        c->logits = plena_malloc(((size_t)c->T * bo.cfg.E + 1) * sizeof *c->logits);
        if (!c->logits) return PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
        if (plena_moe_router_logits_for(&bo.cfg, c->T, c->ids, c->w32, c->logits, &gerr)) {
            plena_replay_check_set(&c->checks, "generate", 0, "--routing device: %s",
                                   plena_err_format(&gerr, m, sizeof m));
            return 0;
        }
        if (c->o->after_logits) c->o->after_logits(c->o->hook_ctx, c->logits, c->T, bo.cfg.E);
        bo.cfg.routing = PLENA_ROUTING_DEVICE;
        bo.router_logits = c->logits;
    }
    bo.weights = c->o->weights == PLENA_WEIGHTS_ZERO            ? PLENA_WEIGHTS_ZERO
                 : c->o->weights == PLENA_WEIGHTS_REPRESENTABLE ? PLENA_WEIGHTS_REPRESENTABLE
                                                                : PLENA_WEIGHTS_RANDOM;
    bo.weight_seed = c->o->weight_seed;
    bo.weight_cache = c->o->weight_cache;
    bo.input = c->o->input == PLENA_INPUT_ZEROS ? PLENA_INPUT_ZEROS : PLENA_INPUT_RANDOM;
    bo.input_seed = c->o->input_seed;
    bo.mx_mode = c->settings.mx_mode;
    bo.out_dir = c->in_memory ? NULL : c->dir;
    bo.stop = c->o->stop; /* a stopped regeneration is no verdict on the generator */
    c->have_build = 1;
    rc = plena_moe_build_run(&bo, &c->build, &gerr);
    if (rc == PLENA_E_OUTPUT || rc == PLENA_E_NOMEM || rc == PLENA_E_INTERRUPTED) {
        if (err) *err = gerr;
        return rc;
    }
    if (rc) {
        plena_replay_check_set(&c->checks, "generate", 0, "generator refused: %s",
                               plena_err_format(&gerr, m, sizeof m));
        return 0;
    }
    c->generated = 1;
    plena_replay_check_set(&c->checks, "generate", 1, "%zu instructions, %u pairs",
                           c->build.n_words, c->T * c->K);
    /* the routing the program runs: the trace's ids (fixed), or the ids the
     * device selects (the bit-exact reference's, equal to the emulator's
     * whenever the functional gate passes) */
    const uint32_t *run_ids = c->ids;
    if (c->o->routing_device) {
        c->dev_ids = plena_malloc(((size_t)c->T * c->K + 1) * sizeof *c->dev_ids);
        if (!c->dev_ids) return PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
        if (plena_verify_routing_ids(&c->build, c->dev_ids, &gerr)) {
            plena_free(c->dev_ids);
            c->dev_ids = NULL;
        } else {
            run_ids = c->dev_ids;
        }
    }
    return plena_moe_routing_stats(&c->build.cfg, c->T, &c->build.info, run_ids, &c->routing, err);
}

/* Routing integrity (docs/replay.md "Pipeline"): the build as written holds the trace's routing,
 * wherever the lowering keeps it (gen plena_moe_build_route_image): the ids
 * in int_sram.bin, or the routing region of hbm.bin (pair-major refill
 * records, expert-major tables: compared byte for byte with the tables of
 * the trace's ids and weights). */
static void check_routing_integrity(struct ctx *c)
{
    char p[4200], detail[512];
    const size_t n = (size_t)c->T * c->K;
    if (c->o->routing_device) { /* device routing: the selected ids, as a set per token */
        int ok = c->dev_ids && plena_replay_routing_integrity_sets(c->dev_ids, c->ids, c->T, c->K,
                                                                   0, detail, sizeof detail);
        if (!c->dev_ids) snprintf(detail, sizeof detail, "the device routing could not be read");
        plena_replay_check_set(&c->checks, "routing_integrity", ok, "%s", detail);
        return;
    }
    struct plena_moe_route_image img;
    struct plena_err e;
    plena_err_clear(&e);
    int ok = 0;
    if (plena_moe_build_route_image(&c->build, c->ids, c->w32, &img, &e)) {
        plena_replay_check_set(&c->checks, "routing_integrity", 0, "%s", e.msg);
        return;
    }
    const char *name = plena_build_file_name(img.file);
    uint8_t *got = plena_malloc(img.n ? img.n : 1);
    if (!got) {
        snprintf(detail, sizeof detail, "out of memory");
    } else if (path_in(c, name, p, sizeof p) ||
               plena_file_read_range(p, img.offset, got, img.n, &e)) {
        snprintf(detail, sizeof detail, "%s: %s", name, e.msg[0] ? e.msg : "path too long");
    } else if (img.file == PLENA_BUILD_FILE_INT_SRAM) { /* id by id, as the pipeline words it */
        uint32_t *ids = plena_calloc(n ? n : 1, sizeof *ids);
        int64_t *tr = plena_calloc(n ? n : 1, sizeof *tr);
        if (ids && tr) {
            for (size_t i = 0; i < n; i++) {
                const uint8_t *q = got + 4 * i;
                ids[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                         (uint32_t)q[3] << 24;
                tr[i] = c->ids[i];
            }
            ok = plena_replay_routing_integrity(ids, tr, n, detail, sizeof detail);
        } else {
            snprintf(detail, sizeof detail, "out of memory");
        }
        plena_free(ids);
        plena_free(tr);
    } else {
        size_t i = 0;
        while (i < img.n && got[i] == img.bytes[i])
            i++;
        ok = i == img.n;
        if (ok)
            snprintf(detail, sizeof detail,
                     "%s routing region (%zu bytes at %llu) encodes the trace's %zu pairs", name,
                     img.n, (unsigned long long)img.offset, n);
        else
            snprintf(detail, sizeof detail,
                     "%s routing region at %llu: byte %zu is 0x%02X, the trace's routing needs "
                     "0x%02X",
                     name, (unsigned long long)img.offset, i, got[i], img.bytes[i]);
    }
    plena_free(got);
    plena_free(img.bytes);
    plena_replay_check_set(&c->checks, "routing_integrity", ok, "%s", detail);
}

/* Device routing, after the run: the ids the emulator selected, decoded from
 * its INT SRAM dump (docs/replay.md "Device routing"): the last token block's
 * pairs at int_base + ids_off (the last token's in the expert-major device
 * form, which routes token by token), as sets per token against the trace's. */
static void check_device_dump(struct ctx *c)
{
    const struct plena_replay_check *pre = plena_replay_check_find(&c->checks, "routing_integrity");
    if (!pre || !pre->passed) return; /* the first failure stands */
    char before[sizeof pre->detail], detail[512], p[4200];
    snprintf(before, sizeof before, "%s", pre->detail);
    const struct plena_moe_map *mp = &c->build.info.map;
    const uint32_t t0 = mp->em_dev ? c->T - 1 : (mp->n_blocks - 1) * mp->t_blk, n = c->T - t0;
    const size_t np = (size_t)n * c->K;
    uint8_t *raw = plena_malloc(np * 4 + 1);
    uint32_t *ids = plena_malloc((np + 1) * sizeof *ids);
    struct plena_err e;
    plena_err_clear(&e);
    const char *dump = plena_emu_dump_file(PLENA_DUMP_INTSRAM);
    int ok = 0;
    if (!raw || !ids)
        snprintf(detail, sizeof detail, "out of memory");
    else if (path_in(c, dump, p, sizeof p) ||
             plena_file_read_range(p, (uint64_t)(mp->int_base + mp->ids_off) * 4, raw, np * 4, &e))
        snprintf(detail, sizeof detail, "%s: %s", dump, e.msg[0] ? e.msg : "path too long");
    else {
        for (size_t i = 0; i < np; i++)
            ids[i] = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                     (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        char why[400];
        ok = plena_replay_routing_integrity_sets(ids, c->ids + (size_t)t0 * c->K, n, c->K, t0, why,
                                                 sizeof why);
        if (ok)
            snprintf(detail, sizeof detail, "%s; %s holds them for tokens %u..%u", before, dump, t0,
                     c->T - 1);
        else
            snprintf(detail, sizeof detail, "%s: %s", dump, why);
    }
    plena_free(raw);
    plena_free(ids);
    plena_replay_check_set(&c->checks, "routing_integrity", ok, "%s", detail);
}

/* Output region (T x H) from vram_dump.bin of the timed run, with the
 * column-block formula of docs/lowering.md "Memory ABI". A missing dump fails: there is
 * no fallback to any other dump (upstream defect 24). */
static int read_output(struct ctx *c, const char *dir, uint16_t *out, char *why, size_t why_n)
{
    const struct plena_tensor *t = plena_moe_abi_find(&c->build.info, c->build.cfg.E ? "acc" : "S");
    if (!t) {
        snprintf(why, why_n, "layout has no output tensor");
        return -1;
    }
    char p[4200];
    const char *dump = plena_emu_dump_file(PLENA_DUMP_VRAM);
    if (plena_path_join(p, sizeof p, dir, dump)) {
        snprintf(why, why_n, "path too long");
        return -1;
    }
    FILE *f = fopen(p, "rb");
    if (!f) {
        snprintf(why, why_n, "no %s in the build directory", dump);
        return -1;
    }
    uint32_t H = c->build.cfg.H, vlen = c->settings.vlen;
    int rc = 0;
    for (uint32_t r = 0; r < c->T && !rc; r++)
        for (uint32_t col = 0; col < H && !rc; col++) {
            uint64_t a =
                t->base + (uint64_t)(col / vlen) * t->prow * vlen + (uint64_t)r * vlen + col % vlen;
            unsigned char b2[2];
            if (fseek(f, (long)(a * 2), SEEK_SET) || fread(b2, 1, 2, f) != 2) {
                snprintf(why, why_n, "%s too short for the output region", dump);
                rc = -1;
            } else {
                out[(size_t)r * H + col] = (uint16_t)(b2[0] | b2[1] << 8);
            }
        }
    fclose(f);
    return rc;
}

/* The bit-exact reference into ro (x_norm included) and the float64 layers
 * from h (o64) and from that x_norm (o64x) on the trace's ids, each routed
 * expert decoded once for all of them (plena_verify_fuse: a routing-only
 * pass gives x_norm first), on --threads host threads. */
static int references(const struct ctx *c, struct plena_verify_refdata *rd,
                      struct plena_moe_ref_out *ro, double *o64, double *o64x,
                      struct plena_err *err)
{
    const size_t np = (size_t)rd->cfg.T * rd->cfg.k;
    struct plena_pool *pool = c->o->threads > 1 ? plena_pool_new(c->o->threads) : NULL;
    uint32_t *ids = plena_malloc((np + 1) * sizeof *ids);
    float *w = plena_malloc((np + 1) * sizeof *w);
    struct plena_verify_fused fu = {rd, NULL, NULL, NULL, NULL, NULL};
    int rc = !ids || !w || (c->o->threads > 1 && !pool)
                 ? PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory")
                 : plena_verify_refdata_use_pool(rd, pool, err);
    if (!rc && rd->cfg.k && rd->in.expert) {
        struct plena_moe_ref_out rr = {NULL, ids, w, NULL, NULL, ro->x_norm, 1};
        rc = plena_moe_reference(&rd->cfg, &rd->in, &rr, err);
    }
    if (!rc) rc = plena_verify_fuse(rd, ro->x_norm, rd->in.fixed_ids, &fu, err);
    if (!rc) rc = plena_moe_reference(&rd->cfg, &rd->in, ro, err);
    plena_verify_unfuse(&fu);
    if (!rc) rc = plena_verify_fused_end(&fu, o64, o64x, err);
    plena_verify_fused_free(&fu);
    (void)plena_verify_refdata_use_pool(rd, NULL, NULL); /* the pool goes before rd */
    plena_pool_free(pool);
    plena_free(ids);
    plena_free(w);
    return rc;
}

/* Step 6: reference on the staged data + comparison (docs/replay.md "Gates"). */
static int functional_step(struct ctx *c, struct plena_err *err)
{
    double conv = plena_replay_route_weight_max_error(c->w64, (size_t)c->T * c->K);
    size_t n = (size_t)c->T * c->build.cfg.H;
    uint16_t *out = plena_calloc(n ? n : 1, sizeof *out);
    float *ref = plena_calloc(n ? n : 1, sizeof *ref);
    double *ref64 = plena_calloc(n ? n : 1, sizeof *ref64);
    float *gate = plena_calloc(c->T ? c->T : 1, sizeof *gate);
    float *moe = plena_calloc(n ? n : 1, sizeof *moe);
    float *xn = plena_calloc(n ? n : 1, sizeof *xn);
    double *ref64x = plena_calloc(n ? n : 1, sizeof *ref64x);
    struct plena_verify_refdata rd;
    memset(&rd, 0, sizeof rd);
    char why[256] = "";
    int rc = 0;
    if (!out || !ref || !ref64 || !gate || !moe || !xn || !ref64x) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
        goto done;
    }
    if (read_output(c, c->dir, out, why, sizeof why)) {
        plena_replay_check_set(&c->checks, "functional", 0, "%s", why);
        goto done;
    }
    struct plena_err rerr;
    plena_err_clear(&rerr);
    char m[1100];
    if (plena_verify_refdata_from_build(&c->build, &rd, &rerr)) {
        plena_replay_check_set(&c->checks, "functional", 0, "reference inputs: %s",
                               plena_err_format(&rerr, m, sizeof m));
        goto done;
    }
    /* a stop ends the references early and this step records a failed
     * comparison; both callers look at the flag before deciding, so that is
     * never a verdict (plena_replay_run's fail_if_stopped, the functional
     * gate's gate_stopped) */
    rd.in.stop = c->o->stop;
    struct plena_moe_ref_out ro = {.out = ref, .gate = gate, .moe_out = moe, .x_norm = xn};
    /* float64: the whole layer from h (full-output check), the MoE from the
     * machine's normalised input (both in one pass over the weights, each
     * routed expert decoded once for all three layers), and the RMSNorm
     * itself (docs/design.md) */
    if (references(c, &rd, &ro, ref64, ref64x, &rerr)) {
        plena_replay_check_set(&c->checks, "functional", 0, "reference model: %s",
                               plena_err_format(&rerr, m, sizeof m));
        goto done;
    }
    /* the gate values are read from the reference (the same BF16 values the
     * program computes; the bit-exact output comparison covers their use) */
    struct plena_replay_cmp_in ci;
    memset(&ci, 0, sizeof ci);
    ci.out = out;
    ci.ref = ref;
    ci.ref64 = ref64;
    float *outf = plena_calloc(n ? n : 1, sizeof *outf);
    if (!outf) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        outf[i] = plena_num_bf16_to_f32(out[i]);
    struct plena_verify_bounds bd;
    int brc = plena_verify_bounds_measure(&rd, moe, ref64x, outf, ref64, xn, &bd, err);
    plena_free(outf);
    if (brc) {
        rc = brc;
        goto done;
    }
    ci.rel_rms_f64 = bd.moe;
    ci.rel_rms_f64_full = bd.full;
    ci.rel_rms_f64_norm = bd.norm;
    ci.rel_rms_bound = PLENA_MOE_REL_RMS_BOUND;
    ci.T = c->T;
    ci.H = c->build.cfg.H;
    ci.smoke = c->smoke;
    ci.has_sigmoid_gate = c->build.cfg.gate == PLENA_SHARED_GATE_SIGMOID && c->build.cfg.Is;
    ci.gate = gate;
    ci.route_weight_max_conversion_error = conv;
    int passed = 0;
    c->functional = plena_replay_functional_compare(&ci, &passed);
    if (!c->functional) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
        goto done;
    }
    plena_replay_check_set(
        &c->checks, "functional", passed, "%s %s: %lld mismatches",
        c->smoke ? "zero_input_smoke" : "reference", passed ? "passed" : "failed",
        (long long)json_integer_value(json_object_get(c->functional, "mismatches")));
    if (c->o->keep_dumps) {
        uint16_t *rb = (uint16_t *)ref64; /* reuse: n BF16 values fit in n doubles */
        for (size_t i = 0; i < n; i++)
            rb[i] = plena_num_bf16_from_f32(ref[i]);
        char p[4200];
        if (!path_in(c, plena_build_file_name(PLENA_BUILD_FILE_REFERENCE_OUTPUT), p, sizeof p))
            (void)plena_file_write_atomic(p, rb, n * 2, NULL);
    }
done:
    plena_verify_refdata_free(&rd);
    plena_free(out);
    plena_free(ref);
    plena_free(ref64);
    plena_free(gate);
    plena_free(moe);
    plena_free(xn);
    plena_free(ref64x);
    return rc;
}

/* One emulator run of the build directory (step 5, and each repeat of step 7):
 * dumps, stats and profile go into `dir` only, never a shared directory
 * (upstream defect 24). */
static int run_build(struct ctx *c, const char *dir, struct plena_run_outcome *ro_out,
                     unsigned dump_mask, struct plena_err *err)
{
    char stats[4200], prof[4200], tl[4200];
    if (plena_build_file_path(dir, PLENA_BUILD_FILE_RUN_STATS, stats, sizeof stats, err) ||
        plena_build_file_path(dir, PLENA_BUILD_FILE_STAGE_PROFILE, prof, sizeof prof, err) ||
        plena_build_file_path(dir, PLENA_BUILD_FILE_TIMELINE, tl, sizeof tl, err))
        return PLENA_E_OUTPUT;
    struct plena_verify_paths paths;
    struct plena_run_opts ro;
    int rc =
        plena_verify_run_opts(c->dir, PLENA_VERIFY_PROGRAM_ASM, 1, NULL, NULL, &paths, &ro, err);
    if (rc) return rc;
    ro.settings = c->settings_ok ? &c->settings : NULL;
    ro.settings_path = c->o->settings_path;
    ro.dump_dir = dir;
    ro.dump_mask = dump_mask;
    ro.stats_path = stats;
    ro.profile_path = c->o->profile ? prof : NULL;
    ro.overlap = c->o->overlap;
    ro.routing = &c->routing;
    ro.label = c->it->trace_id;
    /* the timeline of the gated run only, not of the repeat gate's runs */
    ro.timeline_path = c->o->timeline && dir == c->dir ? tl : NULL;
    ro.timeline_detail = (enum plena_timeline_detail)c->o->timeline_detail;
    ro.stop = c->o->stop;
    return plena_run_execute(&ro, ro_out, err);
}

/* profile_accounting (docs/replay.md "results.json"): profile totals equal the run's, exactly, and
 * the stages come from markers with none unresolved */
static void check_profile_accounting(struct ctx *c)
{
    const json_t *p = c->profile;
    const struct plena_run_outcome *r = &c->run;
    json_t *cl = json_object_get(p, "classification");
    json_int_t pp = json_integer_value(json_object_get(p, "total_profiled_picos"));
    json_int_t br = json_integer_value(json_object_get(p, "total_hbm_bytes_read"));
    json_int_t bw = json_integer_value(json_object_get(p, "total_hbm_bytes_written"));
    const char *attr = json_string_value(json_object_get(cl, "stage_attribution"));
    size_t unresolved = json_array_size(json_object_get(cl, "unresolved_stage_markers"));
    int ok = p && (uint64_t)pp == r->serial_picos && (uint64_t)br == r->bytes_read &&
             (uint64_t)bw == r->bytes_written && attr && !strcmp(attr, "markers") &&
             unresolved == 0;
    plena_replay_check_set(&c->checks, "profile_accounting", ok,
                           "profile %lld ps / run %llu ps, bytes read %lld/%llu, written "
                           "%lld/%llu, attribution %s, %zu unresolved markers",
                           (long long)pp, (unsigned long long)r->serial_picos, (long long)br,
                           (unsigned long long)r->bytes_read, (long long)bw,
                           (unsigned long long)r->bytes_written, attr ? attr : "(none)",
                           unresolved);
}

static void load_json_in(const char *dir, const char *name, json_t **out)
{
    char p[4200];
    *out = NULL;
    if (!plena_path_join(p, sizeof p, dir, name)) (void)plena_replay_json_read_file(p, out, NULL);
}

/* Step 5. */
static int run_step(struct ctx *c, struct plena_err *err)
{
    struct plena_err rerr;
    plena_err_clear(&rerr);
    int rc = run_build(c, c->dir, &c->run, PLENA_DUMP_DEFAULT, &rerr);
    if (rc) {
        if (rc == PLENA_E_OUTPUT || rc == PLENA_E_NOMEM) {
            if (err) *err = rerr;
            return rc;
        }
        char m[1100];
        plena_replay_check_set(&c->checks, "emulate", 0, "run error: %s",
                               plena_err_format(&rerr, m, sizeof m));
        return 0;
    }
    c->ran = 1;
    plena_replay_check_set(&c->checks, "emulate", c->run.status == PLENA_RUN_OUT_COMPLETED, "%s",
                           c->run.status == PLENA_RUN_OUT_COMPLETED ? "completed"
                                                                    : c->run.trap_message);
    load_json_in(c->dir, plena_build_file_name(PLENA_BUILD_FILE_RUN_STATS), &c->run_stats);
    if (c->o->profile) {
        load_json_in(c->dir, plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE), &c->profile);
        check_profile_accounting(c);
    }
    return 0;
}

/* output_sha256 of a run directory's dump (NULL when it cannot be read) */
static json_t *output_hash(struct ctx *c, const char *dir)
{
    size_t n = (size_t)c->T * c->build.cfg.H;
    uint16_t *out = plena_calloc(n ? n : 1, sizeof *out);
    char why[256];
    json_t *v = NULL;
    if (out && !read_output(c, dir, out, why, sizeof why)) {
        char hex[65];
        plena_replay_bf16_sha256(out, n, hex);
        v = json_string(hex);
    }
    plena_free(out);
    return v;
}

/* Step 7, the repeat gate (docs/replay.md "Gates"): N runs of the same build inputs, each in
 * its own repeat/NN directory; every series must hold exactly one value and
 * every run must produce every metric (a missing one fails, never raises). */
static int repeat_step(struct ctx *c, struct plena_err *err)
{
    static const char *const metrics[] = {"sim_latency_picos",     "sim_latency_cycles",
                                          "serial_latency_cycles", "hbm_bytes_read",
                                          "hbm_bytes_written",     "instructions_executed",
                                          "output_sha256",         "stage_profile_sha256"};
    const size_t n_metrics = c->o->profile ? 8 : 7;
    json_t *series = json_object();
    for (size_t k = 0; k < n_metrics; k++)
        json_object_set_new(series, metrics[k], json_array());
    for (unsigned r = 0; r < c->o->repeat; r++) {
        char sub[64], dir[4200];
        snprintf(sub, sizeof sub, "repeat/%02u", r + 1);
        if (path_in(c, sub, dir, sizeof dir) || plena_mkdir_p(dir, err)) {
            json_decref(series);
            return PLENA_FAIL(err, PLENA_E_OUTPUT, c->dir, "cannot create %s", sub);
        }
        struct plena_run_outcome ro;
        struct plena_err rerr;
        plena_err_clear(&rerr);
        json_t *v[8] = {NULL};
        int brc = run_build(c, dir, &ro, PLENA_DUMP_VRAM, &rerr);
        int src = plena_err_if_stopped(c->o->stop, c->dir, err);
        if (src) { /* no verdict from a stopped series */
            json_decref(series);
            return src;
        }
        if (!brc && ro.status == PLENA_RUN_OUT_COMPLETED) {
            /* TEST-ONLY switch (docs/replay.md "Gates": a gate "can fail"):
             * PLENA_TEST_NONDETERMINISM=1 adds 1 ps to the last repeat's latency so the gate's FAIL
             * path can be exercised end to end. Never set it outside tests. */
            uint64_t skew = r + 1 == c->o->repeat && getenv("PLENA_TEST_NONDETERMINISM") &&
                                    !strcmp(getenv("PLENA_TEST_NONDETERMINISM"), "1")
                                ? 1
                                : 0;
            v[0] = json_integer((json_int_t)(ro.reported_picos + skew));
            v[1] = json_integer((json_int_t)ro.reported_cycles);
            v[2] = json_integer((json_int_t)ro.serial_cycles);
            v[3] = json_integer((json_int_t)ro.bytes_read);
            v[4] = json_integer((json_int_t)ro.bytes_written);
            v[5] = json_integer((json_int_t)ro.instructions_executed);
            v[6] = output_hash(c, dir);
            if (c->o->profile) {
                json_t *pj = NULL;
                char hex[65];
                load_json_in(dir, plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE), &pj);
                if (pj && !plena_replay_json_sha256(pj, 1, hex, NULL)) v[7] = json_string(hex);
                json_decref(pj);
            }
        }
        for (size_t k = 0; k < n_metrics; k++)
            json_array_append_new(json_object_get(series, metrics[k]), v[k] ? v[k] : json_null());
        if (!c->o->keep_dumps) {
            char p[4300];
            if (!plena_path_join(p, sizeof p, dir, plena_emu_dump_file(PLENA_DUMP_VRAM))) unlink(p);
        }
    }
    json_t *mism = plena_replay_repeat_mismatched(series, metrics, n_metrics);
    if (!mism) {
        json_decref(series);
        return PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
    }
    int passed = json_array_size(mism) == 0;
    c->repeat = json_pack("{s:I,s:b,s:o,s:o}", "repeats", (json_int_t)c->o->repeat, "passed",
                          passed, "series", series, "mismatched", mism);
    char p[4200];
    if (c->repeat && !path_in(c, plena_build_file_name(PLENA_BUILD_FILE_REPEAT_GATE), p, sizeof p))
        (void)plena_replay_json_write_file(c->repeat, p, NULL);
    plena_replay_check_set(&c->checks, "repeat", passed, "%u runs, %zu mismatched series",
                           c->o->repeat, json_array_size(mism));
    return 0;
}

static json_t *num_or_null(int have, uint64_t v)
{
    return have ? json_integer((json_int_t)v) : json_null();
}

static json_t *get(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return v ? json_incref(v) : json_null();
}

/* dst[k] = o[k] (null when absent) for every key of keys (NULL-terminated),
 * in order: the summary columns that repeat a section's own value */
static void copy_keys(json_t *dst, const json_t *o, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++)
        json_object_set_new(dst, keys[i], get(o, keys[i]));
}

static json_t *build_result(struct ctx *c, const struct plena_replay_gate *g,
                            const char *decided_at)
{
    const struct plena_replay_item *it = c->it;
    const struct plena_replay_opts *o = c->o;
    json_t *t = it->trace;
    json_t *model = json_object_get(t, "model"), *wl = json_object_get(t, "workload"),
           *routing = json_object_get(t, "routing");
    json_int_t T = json_integer_value(json_object_get(wl, "token_count"));
    json_int_t K = json_integer_value(json_object_get(model, "top_k"));
    json_int_t E = json_integer_value(json_object_get(model, "num_experts"));
    json_int_t H = json_integer_value(json_object_get(model, "hidden_size"));
    json_int_t I = json_integer_value(json_object_get(model, "intermediate_size"));
    json_t *sh_n = json_object_get(model, "shared_experts");
    json_t *sh_is = json_object_get(model, "shared_intermediate_size");
    json_t *sh_g = json_object_get(model, "shared_gate");
    json_int_t Is = json_is_integer(sh_is) ? json_integer_value(sh_is) : 0;
    const char *gate_s = json_is_string(sh_g) ? json_string_value(sh_g)
                         : json_is_true(sh_g) ? "sigmoid"
                                              : "none";

    /* selected experts: ascending ids present in the trace */
    json_t *sel = json_array();
    unsigned char *seen = plena_calloc((size_t)(E > 0 ? E : 1), 1);
    json_t *ids = json_object_get(routing, "topk_indices");
    for (size_t i = 0; seen && i < json_array_size(ids); i++)
        for (size_t j = 0; j < json_array_size(json_array_get(ids, i)); j++) {
            json_int_t e = json_integer_value(json_array_get(json_array_get(ids, i), j));
            if (e >= 0 && e < E) seen[e] = 1;
        }
    json_int_t n_sel = 0;
    for (json_int_t e = 0; seen && e < E; e++)
        if (seen[e]) {
            json_array_append_new(sel, json_integer(e));
            n_sel++;
        }
    plena_free(seen);

    json_t *trace =
        json_pack("{s:s,s:s,s:i,s:s}", "trace_id", it->trace_id, "trace_sha256", it->trace_sha256,
                  "trace_schema_version", it->schema_version, "source_path", it->source_path);
    json_int_t mlen =
        o->mlen ? o->mlen
                : json_integer_value(json_object_get(json_object_get(t, "replay"), "mlen"));
    json_int_t blen =
        o->blen ? o->blen
                : json_integer_value(json_object_get(json_object_get(t, "replay"), "blen"));
    json_t *inputs = json_pack(
        "{s:s,s:s,s:s,s:I,s:s,s:I,s:s,s:b,s:b,s:I,s:I,s:I,s:I,s:s,s:b}", "fingerprint",
        it->fingerprint, "lowering", o->lowering, "weights", plena_weights_mode_name(o->weights),
        "weight_seed", (json_int_t)o->weight_seed, "input", plena_input_mode_name(o->input),
        "input_seed", (json_int_t)o->input_seed, "routing_mode",
        o->routing_device ? "device" : "fixed", "profile", o->profile, "overlap", o->overlap,
        "repeat", (json_int_t)o->repeat, "mlen", mlen, "vlen", mlen, "blen", blen, "plena_version",
        PLENA_VERSION, "pruned_inputs", o->prune_inputs && c->generated);
    json_object_set_new(inputs, "settings_sha256", json_string(""));
    {
        char sh[65];
        if (!plena_replay_settings_sha256(o->settings_path, sh, NULL))
            json_object_set_new(inputs, "settings_sha256", json_string(sh));
    }
    json_t *shape =
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:s,s:n}", "tokens", T, "hidden", H,
                  "intermediate", I, "num_experts", E, "top_k", K, "pair_count", T * K,
                  "selected_experts", sel, "selected_expert_count", n_sel, "shared_experts",
                  json_is_integer(sh_n) ? json_integer_value(sh_n) : 0, "shared_intermediate_size",
                  Is, "shared_gate", gate_s, "topk_encoding");

    int ran = c->ran;
    const struct plena_run_outcome *r = &c->run;
    json_t *run = json_pack(
        "{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:f}", "status",
        !ran                                   ? "not_run"
        : r->status == PLENA_RUN_OUT_COMPLETED ? "completed"
        : r->status == PLENA_RUN_OUT_TRAPPED   ? "trapped"
                                               : "error",
        "sim_latency_picos", num_or_null(ran, r->reported_picos), "sim_latency_cycles",
        num_or_null(ran, r->reported_cycles), "serial_latency_picos",
        num_or_null(ran, r->serial_picos), "serial_latency_cycles",
        num_or_null(ran, r->serial_cycles), "hidden_prefetch_cycles",
        num_or_null(ran && r->overlap_on, r->overlap.hidden_prefetch_cycles), "hbm_bytes_read",
        num_or_null(ran, r->bytes_read), "hbm_bytes_written", num_or_null(ran, r->bytes_written),
        "instructions_executed", num_or_null(ran, r->instructions_executed), "trap",
        ran && r->status == PLENA_RUN_OUT_TRAPPED ? json_string(r->trap_message) : json_null(),
        "host_seconds", ran ? r->host_wall_seconds : 0.0);

    int prof = c->profile != NULL;
    uint64_t clock = ran && r->settings_loaded ? r->settings.clock_period_ps : 1;
    json_t *svr = prof ? plena_replay_split_json(
                             r->stage_wall_picos, clock,
                             json_string_value(json_object_get(
                                 json_object_get(json_object_get(c->profile, "classification"),
                                                 "attribution_notes"),
                                 "routed_lowering")))
                       : json_null();
    json_t *tax = prof ? plena_replay_tax_json(r->stage_wall_picos, clock) : json_null();
    json_t *stages = prof ? stage_rows(c->profile, clock) : json_array();

    json_int_t min_w = (n_sel * 3 * H * I + Is * 3 * H) * 9 / 8;
    json_t *pr = json_object_get(c->profile, "total_hbm_bytes_read");
    json_t *pw = json_object_get(c->profile, "total_hbm_bytes_written");
    json_t *bytes = json_pack(
        "{s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o}", "logical_input_hidden_bf16_bytes", T * H * 2,
        "logical_routed_hidden_bf16_bytes", T * K * H * 2, "logical_route_weight_bf16_bytes",
        T * K * 2, "min_expert_weight_bytes", min_w, "physical_hbm_bytes_read",
        num_or_null(ran, r->bytes_read), "physical_hbm_bytes_written",
        num_or_null(ran, r->bytes_written), "profile_hbm_bytes_read",
        pr ? json_incref(pr) : json_null(), "profile_hbm_bytes_written",
        pw ? json_incref(pw) : json_null(), "physical_read_matches_profile",
        prof && ran ? json_boolean(json_integer_value(pr) == (json_int_t)r->bytes_read)
                    : json_null(),
        "physical_written_matches_profile",
        prof && ran ? json_boolean(json_integer_value(pw) == (json_int_t)r->bytes_written)
                    : json_null());

    const char *fkind = c->smoke ? "zero_input_smoke" : "reference";
    json_t *functional =
        c->functional ? json_incref(c->functional)
                      : json_pack("{s:s,s:b,s:b}", "kind", fkind, "numerical", 0, "passed", 0);
    int fpassed = json_is_true(json_object_get(functional, "passed"));

    json_t *summary = json_object();
#define S(k, v) json_object_set_new(summary, k, v)
    S("trace_id", json_string(it->trace_id));
    S("benchmark", get(wl, "benchmark"));
    S("model", get(model, "name"));
    S("sample_id", get(wl, "sample_id"));
    S("sample_index", get(wl, "sample_index"));
    S("category", get(wl, "category"));
    S("layer", get(model, "layer_index"));
    S("phase", get(wl, "phase"));
    S("decode_step", get(wl, "decode_step"));
    S("token_count", json_integer(T));
    S("top_k", json_integer(K));
    S("num_experts", json_integer(E));
    S("pair_count", json_integer(T * K));
    S("selected_expert_count", json_integer(n_sel));
    S("shared_experts", get(shape, "shared_experts"));
    S("shared_intermediate_size", json_integer(Is));
    S("shared_gate", json_string(gate_s));
    S("routing_source", get(routing, "source"));
    S("weight_source", json_object_get(routing, "weight_source") ? get(routing, "weight_source")
                                                                 : json_string("unspecified"));
    S("lowering", json_string(o->lowering));
    S("weights", json_string(plena_weights_mode_name(o->weights)));
    S("input", json_string(plena_input_mode_name(o->input)));
    S("routing_mode", json_string(o->routing_device ? "device" : "fixed"));
    S("issue_model", json_string(o->overlap ? "overlap_overlay" : "serial"));
    copy_keys(summary, run,
              (const char *const[]){"sim_latency_cycles", "serial_latency_cycles",
                                    "sim_latency_picos", "hbm_bytes_read", "hbm_bytes_written",
                                    "instructions_executed", NULL});
    copy_keys(summary, svr,
              (const char *const[]){"total_profiled_picos", "shared_picos", "routed_picos",
                                    "shared_fraction", NULL});
    copy_keys(summary, tax,
              (const char *const[]){"routing_tax_picos", "routing_tax_cycles",
                                    "routing_tax_fraction", NULL});
    copy_keys(summary, bytes,
              (const char *const[]){
                  "logical_input_hidden_bf16_bytes", "logical_routed_hidden_bf16_bytes",
                  "logical_route_weight_bf16_bytes", "min_expert_weight_bytes",
                  "physical_read_matches_profile", "physical_written_matches_profile", NULL});
    S("functional_kind", json_string(fkind));
    /* a smoke run is never a numerical pass: the cell stays empty */
    S("functional_numerical_pass", c->smoke ? json_null() : json_boolean(fpassed));
    S("gate_passed", json_boolean(g->passed));
    S("fingerprint", json_string(it->fingerprint));
    char rel[300];
    snprintf(rel, sizeof rel, "%s/%s", it->dir_name,
             plena_build_file_name(PLENA_BUILD_FILE_RESULTS));
    S("result_path", json_string(rel));
#undef S

    json_t *notes = json_pack(
        "{s:s,s:s,s:s}", "shared_vs_routed",
        json_is_object(svr) ? json_string_value(json_object_get(svr, "note"))
                            : plena_profile_shared_vs_routed_text(PLENA_LOWERING_UNSET),
        "routed_lowering",
        json_is_object(svr) ? json_string_value(json_object_get(svr, "routed_lowering")) : "none",
        "routing_tax_scope", plena_replay_routing_tax_scope);
    json_t *res = json_pack(
        "{s:i,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:o}", "schema_version",
        PLENA_REPLAY_RESULT_SCHEMA, "result_kind", PLENA_REPLAY_RESULT_KIND, "trace", trace,
        "inputs", inputs, "shape", shape, "run", run, "run_stats",
        c->run_stats ? json_incref(c->run_stats) : json_null(), "summary", summary, "stages",
        stages, "shared_vs_routed", svr, "routing_tax", tax, "bytes", bytes, "functional",
        functional, "repeat", c->repeat ? json_incref(c->repeat) : json_null(), "measurement_note",
        plena_replay_measurement_note, "notes", notes);
    if (res) json_object_set_new(res, "routing_stats", plena_routing_stats_json(&c->routing));
    if (res) json_object_set_new(res, "gate", plena_replay_gate_json(&c->checks, g, decided_at));
    return res;
}

static void ctx_free(struct ctx *c)
{
    json_decref(c->functional);
    json_decref(c->repeat);
    json_decref(c->run_stats);
    json_decref(c->profile);
    if (c->have_build) plena_moe_build_free(&c->build);
    plena_free(c->ids);
    plena_free(c->w64);
    plena_free(c->w32);
    plena_free(c->logits);
    plena_free(c->dev_ids);
}

static void unlink_in(const struct ctx *c, const char *name)
{
    char p[4200];
    if (!path_in(c, name, p, sizeof p)) unlink(p);
}

/* A set stop flag (SIGINT/SIGTERM) ends the trace without a verdict: an
 * interrupted run or a step skipped is not the trace's failure. */
static int fail_if_stopped(const struct ctx *c, struct plena_err *err)
{
    return plena_err_if_stopped(c->o->stop, c->dir, err);
}

int plena_replay_run(const struct plena_replay_item *it, const struct plena_replay_opts *o,
                     struct plena_replay_outcome *out, struct plena_err *err)
{
    memset(out, 0, sizeof *out);
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.it = it;
    c.o = o;
    c.smoke = o->weights == PLENA_WEIGHTS_ZERO || o->input == PLENA_INPUT_ZEROS;
    if (plena_path_join(c.dir, sizeof c.dir, o->out_dir, it->dir_name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, o->out_dir, "path too long");
    char results[4200];
    path_in(&c, plena_build_file_name(PLENA_BUILD_FILE_RESULTS), results, sizeof results);

    /* step 2 */
    if (o->skip_existing && plena_replay_can_skip(results, it->fingerprint)) {
        out->skipped = 1;
        out->gate_passed = 1;
        return 0;
    }
    /* step 3: the old result goes first, its artifacts are about to change */
    int rc = plena_mkdir_p(c.dir, err);
    if (!rc) {
        plena_replay_clean_tmp(c.dir);
        rc = plena_replay_result_remove(c.dir, err);
    }
    char tpath[4200];
    if (!rc) {
        path_in(&c, plena_build_file_name(PLENA_BUILD_FILE_TRACE), tpath, sizeof tpath);
        rc = plena_replay_json_write_file(it->trace, tpath, err);
    }
    if (rc) {
        out->code = PLENA_E_OUTPUT;
        return rc;
    }
    plena_replay_check_set(&c.checks, "validate", 1, "trace valid (V and replay-tier rules)");

    /* step 4 */
    int gen_refused = 0;
    if ((rc = generate(&c, err))) goto fail;
    if (!c.generated) gen_refused = 1;
    if (c.generated && o->after_generate) o->after_generate(o->hook_ctx, c.dir);
    if (c.generated) check_routing_integrity(&c);
    /* steps 5-6 */
    if (c.generated && (rc = run_step(&c, err))) goto fail;
    if ((rc = fail_if_stopped(&c, err))) goto fail; /* the run stopped as a trap */
    if (c.ran && o->after_run) o->after_run(o->hook_ctx, c.dir);
    if (c.ran && o->routing_device) check_device_dump(&c);
    if (c.generated && c.ran && (rc = functional_step(&c, err))) goto fail;
    /* step 7 */
    if (c.generated && c.ran && o->repeat >= 2 && (rc = repeat_step(&c, err))) goto fail;
    if ((rc = fail_if_stopped(&c, err))) goto fail; /* no verdict once stopped */

    /* step 8: decide, then publish */
    struct plena_replay_gate_req req = {
        o->profile, o->repeat >= 2, c.smoke ? PLENA_GATE_ZERO_INPUT_SMOKE : PLENA_GATE_NUMERICAL};
    struct plena_replay_gate g;
    plena_replay_gate_decide(&c.checks, &req, &g);
    char decided[32];
    plena_replay_utc_now(decided);
    json_t *res = build_result(&c, &g, decided);
    if (!res) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, c.dir, "out of memory building the result");
        goto fail;
    }
    rc = plena_replay_result_publish(c.dir, res, err);
    json_decref(res);
    if (rc) goto fail;
    /* after the decision: dumps unless --keep-dumps; regenerable inputs with
     * --prune-inputs (docs/replay.md "Pipeline"; the program, layout and trace.json stay) */
    if (!o->keep_dumps) {
        for (unsigned bit = PLENA_DUMP_VRAM; bit <= PLENA_DUMP_HBM; bit <<= 1)
            unlink_in(&c, plena_emu_dump_file(bit));
        unlink_in(&c, plena_build_file_name(PLENA_BUILD_FILE_REFERENCE_OUTPUT));
    }
    static const enum plena_build_file inputs[] = {PLENA_BUILD_FILE_HBM, PLENA_BUILD_FILE_FP_SRAM,
                                                   PLENA_BUILD_FILE_INT_SRAM,
                                                   PLENA_BUILD_FILE_VRAM_PRELOAD};
    if (o->prune_inputs && c.generated)
        for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
            unlink_in(&c, plena_build_file_name(inputs[i]));
    out->gate_passed = g.passed;
    snprintf(out->kind, sizeof out->kind, "%s", plena_replay_gate_kind_name(g.kind));
    size_t off = 0;
    for (size_t i = 0; i < g.n_failed && off < sizeof out->failed; i++)
        off += (size_t)snprintf(out->failed + off, sizeof out->failed - off, "%s%s", i ? "," : "",
                                g.failed[i]);
    out->reason[0] = 0;
    for (size_t i = 0; i < c.checks.n && !out->reason[0]; i++)
        if (!c.checks.v[i].passed)
            snprintf(out->reason, sizeof out->reason, "%s: %s", c.checks.v[i].name,
                     c.checks.v[i].detail);
    out->sim_latency_cycles = c.ran ? c.run.reported_cycles : 0;
    out->code = g.passed ? PLENA_OK : gen_refused ? PLENA_E_INPUT : PLENA_E_FAILED;
    ctx_free(&c);
    return 0;
fail:
    /* what stopped the trace: memory, a stop (SIGINT), else its output */
    out->code = rc == PLENA_E_NOMEM || rc == PLENA_E_INTERRUPTED ? rc : PLENA_E_OUTPUT;
    ctx_free(&c);
    return rc;
}

/* ---- replay session for the stand-alone gates (gates.h) ---- */
struct plena_replay_session {
    struct ctx c;
    struct plena_replay_opts o;
};

void plena_replay_session_free(struct plena_replay_session *s)
{
    if (!s) return;
    ctx_free(&s->c);
    plena_free(s);
}

int plena_replay_session_open(const struct plena_replay_item *it, const struct plena_replay_opts *o,
                              const char *build_dir, struct plena_replay_session **out,
                              struct plena_err *err)
{
    *out = NULL;
    struct plena_replay_session *s = plena_calloc(1, sizeof *s);
    if (!s) return PLENA_FAIL(err, PLENA_E_NOMEM, build_dir, "out of memory");
    s->o = *o;
    s->o.keep_dumps = 0; /* the gates never write reference_output.bin */
    s->c.it = it;
    s->c.o = &s->o;
    s->c.in_memory = 1;
    s->c.smoke = o->weights == PLENA_WEIGHTS_ZERO || o->input == PLENA_INPUT_ZEROS;
    if (snprintf(s->c.dir, sizeof s->c.dir, "%s", build_dir) >= (int)sizeof s->c.dir) {
        plena_free(s);
        return PLENA_FAIL(err, PLENA_E_INPUT, build_dir, "path too long");
    }
    int rc = generate(&s->c, err);
    if (!rc && !s->c.generated) {
        const struct plena_replay_check *g = plena_replay_check_find(&s->c.checks, "generate");
        rc = PLENA_FAIL(err, PLENA_E_INPUT, build_dir, "cannot regenerate the build: %s",
                        g ? g->detail : "unknown");
    }
    if (!rc) rc = plena_replay_build_load_images(&s->c.build, build_dir, err);
    if (rc) {
        plena_replay_session_free(s);
        return rc;
    }
    memset(&s->c.checks, 0, sizeof s->c.checks);
    *out = s;
    return 0;
}

int plena_replay_session_functional(struct plena_replay_session *s, json_t **functional,
                                    struct plena_replay_checks *checks, struct plena_err *err)
{
    *functional = NULL;
    json_decref(s->c.functional);
    s->c.functional = NULL;
    check_routing_integrity(&s->c);
    int rc = functional_step(&s->c, err);
    if (rc) return rc;
    *functional = s->c.functional ? json_incref(s->c.functional) : NULL;
    *checks = s->c.checks;
    return 0;
}

int plena_replay_session_repeat(struct plena_replay_session *s, unsigned repeats, json_t **repeat,
                                struct plena_err *err)
{
    *repeat = NULL;
    json_decref(s->c.repeat);
    s->c.repeat = NULL;
    s->o.repeat = repeats;
    int rc = repeat_step(&s->c, err);
    if (rc) return rc;
    if (!s->c.repeat) return PLENA_FAIL(err, PLENA_E_NOMEM, s->c.dir, "out of memory");
    *repeat = json_incref(s->c.repeat);
    return 0;
}
