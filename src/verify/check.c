/* The check of a build (verify.h): reference inputs decoded from the staged
 * bytes, an in-process emulator run on the same images, the read-back of
 * output/ids/weights/gate values with the VRAM address formula of
 * docs/lowering.md "Memory ABI", and the bit-exact + float64 comparison. No
 * timing, no files written. */
#include "verify/verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/pool.h"
#include "emu/emu.h"
#include "isa/program.h"

static uint64_t vaddr(const struct plena_tensor *t, uint32_t r, uint32_t col, uint32_t V)
{
    return t->base + (uint64_t)(col / V) * t->prow * V + (uint64_t)r * V + col % V;
}

static int nomem(struct plena_err *err)
{
    return PLENA_FAIL(err, PLENA_E_NOMEM, "moe check", "out of memory");
}

/* Logical [K][N] into out from the staged MXFP8 [K_p, N_p] at base, one
 * padded row at a time through row[N_p]. */
static int decode_mx_into(const struct plena_moe_build *b, uint64_t base, uint32_t K, uint32_t N,
                          uint32_t K_p, uint32_t N_p, float *out, float *row,
                          struct plena_moe_scratch *scratch, struct plena_err *err)
{
    const struct plena_hbm_region *r = plena_moe_build_region(b, base);
    if (!r)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "moe check", "no staged HBM tensor at byte %llu",
                          (unsigned long long)base);
    /* a lazy routed-expert matrix is generated (or read) here, one at a
     * time, into the caller's scratch when it keeps one (a provider slot:
     * no allocation and fresh pages per matrix) */
    struct plena_moe_scratch own = {0}, *sc = scratch ? scratch : &own;
    const uint8_t *bytes;
    int rc = plena_moe_build_region_bytes(b, r, sc, &bytes, err);
    if (rc) {
        plena_moe_scratch_free(&own);
        return rc;
    }
    const uint64_t ne = (uint64_t)K_p * N_p;
    struct plena_mx_lut lut;
    plena_num_mx_lut_init(&lut, b->mx_mode);
    for (uint32_t k = 0; k < K; k++) {
        float *dst = N == N_p ? out + (size_t)k * N : row; /* unpadded: decoded in place */
        plena_num_mx_decode_row_lut(&lut, bytes + (uint64_t)k * N_p,
                                    bytes + ne + (uint64_t)k * (N_p / 8), N_p, 8, dst);
        if (dst == row) memcpy(out + (size_t)k * N, row, (size_t)N * sizeof *row);
    }
    plena_moe_scratch_free(&own);
    return 0;
}

/* Logical [K][N] from the staged MXFP8 [K_p, N_p] at base (a new array). */
static float *decode_mx(const struct plena_moe_build *b, uint64_t base, uint32_t K, uint32_t N,
                        uint32_t K_p, uint32_t N_p, struct plena_err *err)
{
    float *out = plena_malloc(((size_t)K * N + 1) * sizeof *out);
    float *row = plena_malloc((size_t)N_p * sizeof *row);
    if (!out || !row) {
        plena_free(out);
        plena_free(row);
        nomem(err);
        return NULL;
    }
    if (decode_mx_into(b, base, K, N, K_p, N_p, out, row, NULL, err)) {
        plena_free(out);
        out = NULL;
    }
    plena_free(row);
    return out;
}

/* Logical [rows][cols] from the staged VRAM preload of tensor name. */
static float *from_vram(const struct plena_moe_build *b, const char *name, uint32_t rows,
                        uint32_t cols, struct plena_err *err)
{
    const struct plena_tensor *t = plena_moe_abi_find(&b->info, name);
    const uint32_t V = b->cfg.m.vlen;
    if (!t) {
        PLENA_FAIL(err, PLENA_E_INTERNAL, "moe check", "no ABI tensor %s", name);
        return NULL;
    }
    float *o = plena_malloc(((size_t)rows * cols + 1) * sizeof *o);
    if (!o) {
        nomem(err);
        return NULL;
    }
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            uint64_t a = vaddr(t, r, c, V);
            o[(size_t)r * cols + c] = a < b->n_vram ? plena_num_bf16_to_f32(b->vram[a]) : 0.0f;
        }
    return o;
}

/* fp16 image entry as the machine holds it: bf16(f32(fp16)). */
static float fp_entry(const struct plena_moe_build *b, uint32_t i)
{
    float f = i < b->n_fp ? plena_num_fp16_to_f32(b->fp16[i]) : 0.0f;
    return plena_num_round_bf16(f);
}

/* plena_moe_ref_expert_fn over a build: expert e's three matrices (and
 * biases) decoded from the staged bytes into the refdata's one-expert
 * buffers. An expert the build did not materialise has no weights. */
static int expert_from_build(void *ctx, uint32_t e, uint32_t slot, struct plena_moe_ref_expert *x,
                             struct plena_err *err)
{
    struct plena_verify_refdata *rd = ctx;
    const struct plena_moe_build *b = rd->build;
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_map *mp = &b->info.map;
    const uint32_t H = cfg->H, I = cfg->I, V = cfg->m.vlen;
    if (e >= cfg->E || !b->present || !b->present[e])
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "expert %u has no weights (not staged)", e);
    if (slot >= rd->n_slots)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "ref", "provider slot %u of %u", slot,
                          rd->n_slots);
    struct plena_verify_slot *sl = &rd->slots[slot];
    if (!sl->erow) { /* first use of this slot (only its thread touches it) */
        const size_t wn = (size_t)H * I;
        const uint32_t rowmax = mp->I_p > mp->H_p ? mp->I_p : mp->H_p;
        for (int q = 0; q < 3; q++) {
            if (!sl->ew[q]) sl->ew[q] = plena_malloc((wn + 1) * sizeof(float));
            if (cfg->expert_bias && !sl->eb[q])
                sl->eb[q] = plena_malloc(((q < 2 ? I : H) + 1) * sizeof(float));
            if (!sl->ew[q] || (cfg->expert_bias && !sl->eb[q])) return nomem(err);
        }
        if (!(sl->erow = plena_malloc((rowmax + 1) * sizeof(float)))) return nomem(err);
    }
    static const char *bn[3] = {"b_gate", "b_up", "b_down"};
    for (int q = 0; q < 3; q++) {
        uint32_t K = q < 2 ? H : I, N = q < 2 ? I : H;
        uint32_t Kp = q < 2 ? mp->H_p : mp->I_p, Np = q < 2 ? mp->I_p : mp->H_p;
        int rc = decode_mx_into(b, plena_moe_expert_base(mp, q, e), K, N, Kp, Np, sl->ew[q],
                                sl->erow, &sl->mx, err);
        if (rc) return rc;
        if (cfg->expert_bias) {
            const struct plena_tensor *t = plena_moe_abi_find(&b->info, bn[q]);
            if (!t)
                return PLENA_FAIL(err, PLENA_E_INTERNAL, "moe check", "no ABI tensor %s", bn[q]);
            for (uint32_t i = 0; i < N; i++)
                sl->eb[q][i] = plena_num_bf16_to_f32(b->vram[vaddr(t, e, i, V)]);
        }
    }
    x->w_gate = sl->ew[0];
    x->w_up = sl->ew[1];
    x->w_down = sl->ew[2];
    x->b_gate = sl->eb[0];
    x->b_up = sl->eb[1];
    x->b_down = sl->eb[2];
    return 0;
}

static int refdata_from_build(const struct plena_moe_build *b, struct plena_verify_refdata *rd,
                              int routing_only, struct plena_err *err)
{
    memset(rd, 0, sizeof *rd);
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_map *mp = &b->info.map;
    const int routed = cfg->routing != PLENA_ROUTING_NONE;
    const uint32_t H = cfg->H, I = cfg->I, E = cfg->E, k = cfg->k, T = b->T, V = cfg->m.vlen;
    if (!b->vram || !b->fp16)
        return PLENA_FAIL(err, PLENA_E_INPUT, "moe check", "build has no staged images");
    struct plena_moe_ref_cfg *c = &rd->cfg;
    c->T = T;
    c->H = H;
    c->I = routed ? I : 0;
    c->Is = cfg->Is;
    c->E = routed ? E : 0;
    c->k = routed ? k : 0;
    c->mlen = cfg->m.mlen;
    c->chunk_tiles = cfg->chunk_tiles ? cfg->chunk_tiles : 4;
    c->routing = cfg->routing;
    c->router_form = cfg->router_form;
    c->router_bias = cfg->router_bias;
    c->expert_bias = cfg->expert_bias;
    c->activation = cfg->activation;
    c->placement = cfg->placement;
    c->shared_gate = cfg->Is ? cfg->gate : PLENA_SHARED_GATE_NONE;
    c->residual =
        cfg->residual == PLENA_RESIDUAL_PRE_NORM ? PLENA_RESIDUAL_PRE_NORM : PLENA_RESIDUAL_NONE;
    struct plena_moe_ref_in *in = &rd->in;
    const uint32_t fb = mp->fp_base;
    in->c.one = fp_entry(b, fb + mp->off_one);
    in->c.neg_alpha_routed = fp_entry(b, fb + mp->off_na_routed);
    in->c.neg_alpha_shared = fp_entry(b, fb + mp->off_na_shared);
    in->c.limit_pos = fp_entry(b, fb + mp->off_lp);
    in->c.limit_neg = fp_entry(b, fb + mp->off_ln);
    in->c.eps = fp_entry(b, fb + mp->off_eps);
    in->c.inv_h = fp_entry(b, fb + mp->off_invh);
    /* the device router's constants (defaults: a router that needs none) */
    in->c.minus_one = mp->dev_router ? fp_entry(b, fb + mp->off_minus_one) : -1.0f;
    in->c.neg_inf = mp->dev_router ? fp_entry(b, fb + mp->off_neg_inf) : -INFINITY;
    in->c.rsf = mp->dev_router ? fp_entry(b, fb + mp->off_rsf) : 1.0f;
    in->c.reps = mp->dev_router ? fp_entry(b, fb + mp->off_reps) : 0.0f;

    if (!(rd->h = from_vram(b, "h", T, H, err))) return err ? err->code : PLENA_E_INTERNAL;
    in->h = rd->h;
    if (c->residual == PLENA_RESIDUAL_PRE_NORM) {
        if (!(rd->gamma = from_vram(b, "gamma", 1, H, err))) return PLENA_E_INTERNAL;
        in->gamma = rd->gamma;
    }
    if (cfg->routing == PLENA_ROUTING_DEVICE && cfg->router_logits_preloaded) {
        /* the staged logits rows, token t's eb rows flat: expert e at t*eb*V + e */
        float *rows = from_vram(b, "logits", T * mp->eb, V, err);
        if (!rows) return PLENA_E_INTERNAL;
        for (uint32_t t = 0; t < T; t++)
            memmove(rows + (size_t)t * E, rows + (size_t)t * mp->eb * V, E * sizeof *rows);
        rd->logits = rows;
        in->logits = rd->logits;
    } else if (cfg->routing == PLENA_ROUTING_DEVICE) {
        if (cfg->router_form == PLENA_ROUTER_GEMM)
            rd->router_w = decode_mx(b, mp->router_hbm, H, E, mp->H_p, mp->E_p, err);
        else
            rd->router_w = from_vram(b, "router_w", E, H, err);
        if (!rd->router_w) return PLENA_E_INTERNAL;
        in->router_w = rd->router_w;
        if (cfg->router_bias) {
            float *rows = from_vram(b, "router_b", mp->eb, V, err);
            if (!rows) return PLENA_E_INTERNAL;
            rd->router_b = rows; /* [eb][V] flat = bias[e] at e */
            in->router_b = rd->router_b;
        }
    }
    if (cfg->routing == PLENA_ROUTING_DEVICE) {
        c->router = cfg->router;
        c->weight_rows = mp->dev_router && b->info.routed_lowering == PLENA_LOWERING_EXPERT_MAJOR;
        if (plena_moe_abi_find(&b->info, "router_sel_bias")) {
            if (!(rd->router_sel_bias = from_vram(b, "router_sel_bias", mp->eb, V, err)))
                return PLENA_E_INTERNAL;
            in->router_sel_bias = rd->router_sel_bias; /* [eb][V] flat = bias[e] at e */
        }
    }
    if (routing_only) return 0;
    if (routed) {
        /* the streaming check: routed weights decoded one expert at a time
         * per thread, when the reference asks for them (expert_from_build) */
        rd->build = b;
        if (!(rd->slots = plena_calloc(1, sizeof *rd->slots))) return nomem(err);
        rd->n_slots = 1;
        in->expert = expert_from_build;
        in->expert_ctx = rd;
    }
    if (cfg->Is) {
        const uint32_t Is = cfg->Is;
        rd->ws[0] = decode_mx(b, mp->shared[0], H, Is, mp->H_p, mp->Is_p, err);
        rd->ws[1] = decode_mx(b, mp->shared[1], H, Is, mp->H_p, mp->Is_p, err);
        rd->ws[2] = decode_mx(b, mp->shared[2], Is, H, mp->Is_p, mp->H_p, err);
        if (!rd->ws[0] || !rd->ws[1] || !rd->ws[2]) return PLENA_E_INTERNAL;
        in->ws_gate = rd->ws[0];
        in->ws_up = rd->ws[1];
        in->ws_down = rd->ws[2];
        if (cfg->gate == PLENA_SHARED_GATE_SIGMOID) {
            if (!(rd->w_sg = from_vram(b, "w_g", 1, H, err))) return PLENA_E_INTERNAL;
            in->w_sg = rd->w_sg;
        }
    }
    if (cfg->routing == PLENA_ROUTING_FIXED) {
        size_t n = (size_t)T * k;
        rd->fixed_ids = plena_malloc(n * sizeof *rd->fixed_ids);
        rd->fixed_w = plena_malloc(n * sizeof *rd->fixed_w);
        if (!rd->fixed_ids || !rd->fixed_w) return nomem(err);
        /* pair-major: the INT/FP SRAM images (so their writer is checked);
         * expert-major: the routing the HBM tables were built from, weights
         * as the same fp16 halves the tables hold, read as BF16 */
        const int em =
            b->info.routed_lowering == PLENA_LOWERING_EXPERT_MAJOR || b->info.map.pm_refill;
        for (size_t p = 0; p < n; p++) {
            rd->fixed_ids[p] = em ? b->fixed_ids[p] : b->ints[mp->int_base + mp->ids_off + p];
            rd->fixed_w[p] = em ? plena_num_round_bf16(plena_num_fp16_to_f32(
                                      plena_num_fp16_from_f32(b->fixed_w32[p])))
                                : fp_entry(b, fb + mp->w_off + (uint32_t)p);
        }
        in->fixed_ids = rd->fixed_ids;
        in->fixed_w = rd->fixed_w;
    }
    return 0;
}

int plena_verify_refdata_from_build(const struct plena_moe_build *b,
                                    struct plena_verify_refdata *rd, struct plena_err *err)
{
    return refdata_from_build(b, rd, 0, err);
}

int plena_verify_routing_ids(const struct plena_moe_build *b, uint32_t *ids, struct plena_err *err)
{
    const struct plena_moe_cfg *cfg = &b->cfg;
    const size_t np = (size_t)b->T * cfg->k;
    if (cfg->routing == PLENA_ROUTING_NONE)
        return PLENA_FAIL(err, PLENA_E_INPUT, "routing", "the layer has no routed experts");
    if (cfg->routing == PLENA_ROUTING_FIXED) {
        if (!b->fixed_ids) return PLENA_FAIL(err, PLENA_E_INPUT, "routing", "no fixed ids");
        memcpy(ids, b->fixed_ids, np * sizeof *ids);
        return 0;
    }
    if (b->device_ids) { /* computed once, by the reachable_experts hook */
        memcpy(ids, b->device_ids, np * sizeof *ids);
        return 0;
    }
    struct plena_verify_refdata rd;
    float *w = plena_malloc((np ? np : 1) * sizeof *w);
    int rc = w ? refdata_from_build(b, &rd, 1, err) : nomem(err);
    if (!rc) {
        struct plena_moe_ref_out ro = {.ids = ids, .weights = w, .route_only = 1};
        rc = plena_moe_reference(&rd.cfg, &rd.in, &ro, err);
    }
    if (w) plena_verify_refdata_free(&rd);
    plena_free(w);
    return rc;
}

int plena_verify_reachable_experts(const struct plena_moe_build *b, uint8_t *present, uint32_t *ids,
                                   struct plena_err *err)
{
    const size_t np = (size_t)b->T * b->cfg.k;
    int rc = plena_verify_routing_ids(b, ids, err);
    for (size_t p = 0; !rc && p < np; p++)
        if (ids[p] < b->cfg.E) present[ids[p]] = 1;
    return rc;
}

int plena_verify_routing_stats(const struct plena_moe_build *b, struct plena_routing_stats *st,
                               struct plena_err *err)
{
    memset(st, 0, sizeof *st);
    st->shared_row_utilisation = -1.0;
    if (b->cfg.routing == PLENA_ROUTING_NONE) return 0; /* valid = 0: nothing to report */
    const size_t np = (size_t)b->T * b->cfg.k;
    uint32_t *ids = plena_malloc((np ? np : 1) * sizeof *ids);
    if (!ids) return nomem(err);
    int rc = plena_verify_routing_ids(b, ids, err);
    if (!rc) rc = plena_moe_routing_stats(&b->cfg, b->T, &b->info, ids, st, err);
    plena_free(ids);
    return rc;
}

int plena_verify_refdata_use_pool(struct plena_verify_refdata *rd, struct plena_pool *pool,
                                  struct plena_err *err)
{
    const uint32_t n = plena_pool_size(pool);
    if (rd->slots && n > rd->n_slots) {
        struct plena_verify_slot *s = plena_realloc(rd->slots, n * sizeof *s);
        if (!s) return nomem(err);
        memset(s + rd->n_slots, 0, (n - rd->n_slots) * sizeof *s);
        rd->slots = s;
        rd->n_slots = n;
    }
    rd->in.pool = pool;
    return 0;
}

void plena_verify_refdata_free(struct plena_verify_refdata *rd)
{
    plena_free(rd->h);
    plena_free(rd->gamma);
    plena_free(rd->router_w);
    plena_free(rd->router_b);
    plena_free(rd->router_sel_bias);
    plena_free(rd->logits);
    for (int q = 0; q < 3; q++)
        plena_free(rd->ws[q]);
    for (uint32_t i = 0; rd->slots && i < rd->n_slots; i++) {
        for (int q = 0; q < 3; q++) {
            plena_free(rd->slots[i].ew[q]);
            plena_free(rd->slots[i].eb[q]);
        }
        plena_free(rd->slots[i].erow);
        plena_moe_scratch_free(&rd->slots[i].mx);
    }
    plena_free(rd->slots);
    plena_free(rd->w_sg);
    plena_free(rd->fixed_w);
    plena_free(rd->fixed_ids);
    memset(rd, 0, sizeof *rd);
}

/* ---- emulator run ---- */

static int load_memory(struct plena_emu *emu, const struct plena_moe_build *b,
                       struct plena_err *err)
{
    struct plena_moe_scratch sc = {0};
    for (size_t i = 0; i < b->n_hbm; i++) {
        const uint8_t *bytes;
        int rc = plena_moe_build_region_bytes(b, &b->hbm[i], &sc, &bytes, err);
        if (rc) {
            plena_moe_scratch_free(&sc);
            return rc;
        }
        if (plena_emu_hbm_write(emu, b->hbm[i].base, bytes, (size_t)b->hbm[i].n, err)) {
            plena_moe_scratch_free(&sc);
            return PLENA_E_INPUT;
        }
    }
    plena_moe_scratch_free(&sc);
    for (uint64_t a = 0; a < b->n_vram; a++)
        if (b->vram[a]) plena_emu_vram_set(emu, a, b->vram[a]);
    for (uint32_t i = 0; i < b->n_fp; i++)
        plena_emu_fpsram_set(emu, i, plena_num_bf16_from_f32(plena_num_fp16_to_f32(b->fp16[i])));
    for (uint32_t i = 0; i < b->n_int; i++)
        plena_emu_intsram_set(emu, i, b->ints[i]);
    return 0;
}

static int load_files(struct plena_emu *emu, const char *dir, struct plena_err *err)
{
    char p[4096];
    static const enum plena_build_file files[4] = {
        PLENA_BUILD_FILE_HBM, PLENA_BUILD_FILE_VRAM_PRELOAD, PLENA_BUILD_FILE_FP_SRAM,
        PLENA_BUILD_FILE_INT_SRAM};
    for (int i = 0; i < 4; i++) {
        if (plena_build_file_path(dir, files[i], p, sizeof p, NULL))
            return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
        int rc = i == 0   ? plena_emu_load_hbm_file(emu, p, err)
                 : i == 1 ? plena_emu_load_vram_file(emu, p, err)
                 : i == 2 ? plena_emu_load_fpsram_file(emu, p, err)
                          : plena_emu_load_intsram_file(emu, p, err);
        if (rc) return rc;
    }
    return 0;
}

struct counter {
    uint64_t *pc, *op;
    size_t n;
};

static void count_obs(void *ctx, const struct plena_emu_event *ev)
{
    struct counter *c = ctx;
    if (ev->pc < c->n) c->pc[ev->pc]++;
    c->op[ev->op & 63]++;
}

int plena_verify_emulate(const struct plena_moe_build *b, const struct plena_settings *s,
                         const char *dir, struct plena_verify_device *d, struct plena_err *err)
{
    return plena_verify_emulate_stop(b, s, dir, NULL, d, err);
}

int plena_verify_emulate_stop(const struct plena_moe_build *b, const struct plena_settings *s,
                              const char *dir, const volatile sig_atomic_t *stop,
                              struct plena_verify_device *d, struct plena_err *err)
{
    memset(d, 0, sizeof *d);
    const struct plena_moe_cfg *cfg = &b->cfg;
    if (s->mlen != cfg->m.mlen || s->vlen != cfg->m.vlen || s->blen != cfg->m.blen)
        return PLENA_FAIL(err, PLENA_E_INPUT, "moe check",
                          "settings geometry (MLEN %u, VLEN %u, BLEN %u) differs from the build's "
                          "(%u, %u, %u)",
                          s->mlen, s->vlen, s->blen, cfg->m.mlen, cfg->m.vlen, cfg->m.blen);
    struct plena_emu *emu = NULL;
    uint64_t hsz = s->hbm_size > b->hbm_size ? 0 : (b->hbm_size + 4095) / 4096 * 4096;
    int rc = plena_emu_new(s, hsz, &emu, err);
    if (rc) return rc;
    plena_emu_set_limits(emu, 0, 0, stop);
    rc = dir ? load_files(emu, dir, err) : load_memory(emu, b, err);
    if (rc) {
        plena_emu_free(emu);
        return rc;
    }
    struct plena_program prog;
    memset(&prog, 0, sizeof prog);
    prog.words = b->words;
    prog.n = b->n_words;
    struct plena_emu_result res;
    d->pc_count = plena_calloc(b->n_words + 1, sizeof *d->pc_count);
    if (!d->pc_count) {
        plena_emu_free(emu);
        return nomem(err);
    }
    struct counter cnt = {d->pc_count, d->op_count, b->n_words};
    rc = plena_emu_run(emu, &prog, count_obs, &cnt, &res, err);
    if (!rc) rc = plena_verify_device_read(b, emu, &res, &prog, d, err);
    plena_emu_free(emu);
    return rc;
}

int plena_verify_device_read(const struct plena_moe_build *b, const struct plena_emu *emu,
                             const struct plena_emu_result *res, const struct plena_program *prog,
                             struct plena_verify_device *d, struct plena_err *err)
{
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_map *mp = &b->info.map;
    const uint32_t T = b->T, H = cfg->H, V = cfg->m.vlen;
    d->executed = res->instructions_executed;
    if (res->status == PLENA_RUN_TRAPPED) {
        d->trapped = 1;
        d->interrupted = res->trap.kind == PLENA_TRAP_INTERRUPTED;
        plena_emu_format_trap(&res->trap, prog, d->trap, sizeof d->trap);
    }
    const struct plena_tensor *ot =
        plena_moe_abi_find(&b->info, cfg->routing != PLENA_ROUTING_NONE ? "acc" : "S");
    /* the last block's ids and weights sit in SRAM, except in the expert-major
     * fixed form, where they stream from HBM records (none to read back) */
    const int em = cfg->routing == PLENA_ROUTING_FIXED &&
                   b->info.routed_lowering == PLENA_LOWERING_EXPERT_MAJOR;
    const uint32_t k = cfg->routing != PLENA_ROUTING_NONE && !em ? cfg->k : 0;
    const uint32_t r0 = (mp->n_blocks - 1) * mp->t_blk;
    /* the expert-major device form runs V_TOPK token by token into one
     * token's buffer: the last token's pairs are what is left */
    const uint32_t id_t0 = mp->em_dev ? T - 1 : r0;
    d->t0 = r0;
    d->p0 = id_t0 * k;
    d->n_pairs = (T - id_t0) * k;
    const int gate = cfg->Is && cfg->gate == PLENA_SHARED_GATE_SIGMOID;
    d->n_gate = gate ? T - r0 : 0;
    d->out = plena_malloc((size_t)T * H * sizeof *d->out);
    d->ids = plena_malloc((d->n_pairs + 1) * sizeof *d->ids);
    d->w = plena_malloc((d->n_pairs + 1) * sizeof *d->w);
    d->gate = plena_malloc((d->n_gate + 1) * sizeof *d->gate);
    if (!ot || !d->out || !d->ids || !d->w || !d->gate) return nomem(err);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t c = 0; c < H; c++)
            d->out[(size_t)t * H + c] = plena_emu_vram_get(emu, vaddr(ot, t, c, V));
    for (uint32_t i = 0; i < d->n_pairs; i++) {
        d->ids[i] = plena_emu_intsram_get(emu, mp->int_base + mp->ids_off + i);
        d->w[i] = plena_emu_fpsram_get(emu, mp->fp_base + mp->w_off + i);
    }
    for (uint32_t i = 0; i < d->n_gate; i++)
        d->gate[i] = plena_emu_fpsram_get(emu, mp->fp_base + mp->gate_off + i);
    return 0;
}

void plena_verify_device_free(struct plena_verify_device *d)
{
    plena_free(d->out);
    plena_free(d->ids);
    plena_free(d->w);
    plena_free(d->gate);
    plena_free(d->pc_count);
    memset(d, 0, sizeof *d);
}

void plena_verify_count_stage_op(const struct plena_moe_build *b, const uint64_t *pc_count,
                                 uint64_t out[PLENA_STAGE_COUNT][64])
{
    memset(out, 0, sizeof(uint64_t) * PLENA_STAGE_COUNT * 64);
    size_t pc = 0;
    for (size_t i = 0; i < b->prog.n_items; i++) {
        const struct plena_item *it = &b->prog.items[i];
        if (it->kind != PLENA_ITEM_INSN) continue;
        out[it->stage % PLENA_STAGE_COUNT][it->insn.op & 63] += pc_count[pc++];
    }
}

/* ---- comparison ---- */

/* The fused provider: an expert decoded for the bit-exact reference goes
 * to the float64 layers as well (plena_moe_f64_pair_expert). */
static int expert_both(void *ctx, uint32_t e, uint32_t slot, struct plena_moe_ref_expert *x,
                       struct plena_err *err)
{
    struct plena_verify_fused *f = ctx;
    int rc = f->inner(f->inner_ctx, e, slot, x, err);
    return rc ? rc : plena_moe_f64_pair_expert(f->f64, e, slot, x, err);
}

int plena_verify_fuse(struct plena_verify_refdata *rd, const float *xn, const uint32_t *f64_ids,
                      struct plena_verify_fused *f, struct plena_err *err)
{
    memset(f, 0, sizeof *f);
    f->rd = rd;
    f->xn = xn;
    f->f64_ids = f64_ids;
    if (!rd->cfg.k || !rd->in.expert) return 0;
    int rc = plena_moe_f64_pair_begin(&rd->cfg, &rd->in, xn, f64_ids, &f->f64, err);
    if (rc) return rc;
    f->inner = rd->in.expert;
    f->inner_ctx = rd->in.expert_ctx;
    rd->in.expert = expert_both;
    rd->in.expert_ctx = f;
    return 0;
}

void plena_verify_unfuse(struct plena_verify_fused *f)
{
    if (!f->inner) return;
    f->rd->in.expert = f->inner;
    f->rd->in.expert_ctx = f->inner_ctx;
    f->inner = NULL;
}

int plena_verify_fused_end(struct plena_verify_fused *f, double *o64, double *o64x,
                           struct plena_err *err)
{
    plena_verify_unfuse(f);
    const struct plena_verify_refdata *rd = f->rd;
    return f->f64
               ? plena_moe_f64_pair_end(f->f64, o64, o64x, err)
               : plena_moe_reference_f64_pair(&rd->cfg, &rd->in, f->xn, f->f64_ids, o64, o64x, err);
}

void plena_verify_fused_free(struct plena_verify_fused *f)
{
    plena_verify_unfuse(f);
    plena_moe_f64_pair_free(f->f64);
    f->f64 = NULL;
}

int plena_verify_bounds_measure(const struct plena_verify_refdata *rd, const float *moe,
                                const double *o64x, const float *out, const double *o64,
                                const float *xn, struct plena_verify_bounds *bd,
                                struct plena_err *err)
{
    bd->moe = plena_moe_rel_rms_moe(&rd->cfg, &rd->in, moe, o64x);
    bd->full = plena_moe_rel_rms_full(&rd->cfg, out, o64);
    bd->norm = 0.0;
    if (rd->cfg.residual != PLENA_RESIDUAL_PRE_NORM) return 0;
    size_t n = (size_t)rd->cfg.T * rd->cfg.H;
    double *x64 = plena_malloc((n + 1) * sizeof *x64);
    if (!x64) return PLENA_FAIL(err, PLENA_E_NOMEM, "float64 bounds", "out of memory");
    int rc = plena_moe_rmsnorm_f64(&rd->cfg, &rd->in, x64);
    if (!rc) bd->norm = plena_moe_rel_rms_norm(&rd->cfg, xn, x64);
    plena_free(x64);
    return rc;
}

int plena_verify_check(const struct plena_moe_build *b, const struct plena_verify_device *d,
                       struct plena_verify_result *r, struct plena_err *err)
{
    return plena_verify_check_threads(b, d, 1, r, err);
}

int plena_verify_check_threads(const struct plena_moe_build *b, const struct plena_verify_device *d,
                               unsigned threads, struct plena_verify_result *r,
                               struct plena_err *err)
{
    return plena_verify_check_stop(b, d, threads, NULL, r, err);
}

#ifdef PLENA_TESTING
volatile sig_atomic_t *plena_verify_test_stop_after_refs;
#endif

int plena_verify_check_stop(const struct plena_moe_build *b, const struct plena_verify_device *d,
                            unsigned threads, const volatile sig_atomic_t *stop,
                            struct plena_verify_result *r, struct plena_err *err)
{
    memset(r, 0, sizeof *r);
    r->first_mismatch = -1;
    struct plena_verify_refdata rd;
    struct plena_pool *pool = threads > 1 ? plena_pool_new(threads) : NULL;
    int rc = threads > 1 && !pool ? nomem(err) : plena_verify_refdata_from_build(b, &rd, err);
    if (!rc) rd.in.stop = stop;
    if (!rc) rc = plena_verify_refdata_use_pool(&rd, pool, err);
    if (rc) {
        if (!(threads > 1 && !pool)) plena_verify_refdata_free(&rd);
        plena_pool_free(pool);
        return rc;
    }
    const uint32_t T = b->T, H = b->cfg.H, k = rd.cfg.k;
    const size_t n = (size_t)T * H, np = (size_t)T * k;
    float *out = plena_malloc(n * sizeof *out), *dev = plena_malloc(n * sizeof *dev);
    uint32_t *ids = plena_malloc((np + 1) * sizeof *ids), *ids64 = plena_malloc((np + 1) * 4);
    float *w = plena_malloc((np + 1) * sizeof *w), *g = plena_malloc((T + 1) * sizeof *g);
    double *o64 = plena_malloc(n * sizeof *o64);
    float *moe = plena_malloc(n * sizeof *moe), *xn = plena_malloc(n * sizeof *xn);
    double *o64x = plena_malloc(n * sizeof *o64x);
    struct plena_verify_fused fu = {&rd, NULL, NULL, NULL, NULL, NULL};
    if (!out || !dev || !ids || !ids64 || !w || !g || !o64 || !moe || !xn || !o64x) {
        rc = nomem(err);
        goto done;
    }
    /* One decode per routed expert for both references: the routing and
     * x_norm first (no expert weight read), the float64 layers begun on the
     * ids they will use (the device's for the last block, see below), then
     * the bit-exact reference hands each expert it decodes to them too. */
    if (k && rd.in.expert) {
        struct plena_moe_ref_out rr = {NULL, ids, w, NULL, NULL, xn, 1};
        if ((rc = plena_moe_reference(&rd.cfg, &rd.in, &rr, err))) goto done;
        for (uint32_t i = 0; i < d->n_pairs; i++)
            ids[d->p0 + i] = d->ids[i];
    }
    if ((rc = plena_verify_fuse(&rd, xn, k ? ids : NULL, &fu, err))) goto done;
    struct plena_moe_ref_out ro = {out, k ? ids : NULL, k ? w : NULL, g, moe, xn, 0};
    rc = plena_moe_reference(&rd.cfg, &rd.in, &ro, err);
    plena_verify_unfuse(&fu);
    if (rc) goto done;
    /* output bits: every element of rows < T, cols < H; +0 vs -0 counts */
    r->elements = n;
    r->ref_all_zero = 1;
    for (size_t i = 0; i < n; i++) {
        uint16_t ref = plena_num_bf16_from_f32(out[i]);
        dev[i] = plena_num_bf16_to_f32(d->out[i]);
        if (out[i] != 0.0f) r->ref_all_zero = 0;
        if ((d->out[i] & 0x7FFF) > 0x7F80 || isnan(out[i])) r->nan_count++;
        if (ref != d->out[i]) {
            if (r->first_mismatch < 0) {
                r->first_mismatch = (int64_t)i;
                r->first_dev = d->out[i];
                r->first_ref = ref;
            }
            r->mismatches++;
        }
    }
    for (uint32_t i = 0; i < d->n_pairs; i++) {
        if (d->ids[i] != ids[d->p0 + i]) r->id_mismatches++;
        if (d->w[i] != plena_num_bf16_from_f32(w[d->p0 + i])) r->w_mismatches++;
    }
    const int gate = b->cfg.Is && b->cfg.gate == PLENA_SHARED_GATE_SIGMOID;
    if (gate) {
        r->gate_min = INFINITY;
        r->gate_max = -INFINITY;
        for (uint32_t i = 0; i < d->n_gate; i++) {
            if (d->gate[i] != plena_num_bf16_from_f32(g[d->t0 + i])) r->gate_mismatches++;
        }
        for (uint32_t t = 0; t < T; t++) {
            if (g[t] < r->gate_min) r->gate_min = g[t];
            if (g[t] > r->gate_max) r->gate_max = g[t];
            if (!(g[t] > 0.0f && g[t] < 1.0f)) r->gate_saturated = 1;
            if (g[t] != g[0]) r->gate_distinct = 1;
        }
    }
    r->bit_exact = r->mismatches == 0 && r->nan_count == 0 && r->id_mismatches == 0 &&
                   r->w_mismatches == 0 && r->gate_mismatches == 0 && !d->trapped;
    /* float64 bound with the device ids (earlier token blocks: the bit-exact
     * reference's ids, equal to the device's whenever the check passes) */
    for (uint32_t i = 0; i < d->n_pairs; i++)
        ids[d->p0 + i] = d->ids[i];
    r->ids_f64_ok = 1;
    if (k && (rc = plena_moe_reference_f64(&rd.cfg, &rd.in, NULL, NULL, ids64, err))) goto done;
    for (size_t p = 0; k && p < np; p++)
        if (ids64[p] != ids[p]) r->ids_f64_ok = 0;
    if (k && b->cfg.routing == PLENA_ROUTING_DEVICE) {
        r->route_tokens = T;
        if ((rc = plena_moe_route_agreement_f64(&rd.cfg, &rd.in, ids, &r->route_near_ties,
                                                &r->route_different, err)))
            goto done;
    }
    /* the float64 layer on the device's ids: where the float64 router chose
     * otherwise (a near-tie) its expert may not even be materialised */
    /* docs/design.md: the MoE bound is taken on the output before the
     * add-back, computed in float64 from the machine's normalised input (the
     * reference's checkpoints equal the device's when bit_exact holds); the
     * RMSNorm and the whole output (add-back) are bounded separately. Both
     * float64 layers in one pass over the weights. */
    if ((rc = plena_verify_fused_end(&fu, o64, o64x, err))) goto done;
    struct plena_verify_bounds bd;
    if ((rc = plena_verify_bounds_measure(&rd, moe, o64x, dev, o64, xn, &bd, err))) goto done;
    r->rel_rms = bd.moe;
    r->rel_rms_full = bd.full;
    r->rel_rms_norm = bd.norm;
#ifdef PLENA_TESTING
    if (plena_verify_test_stop_after_refs) *plena_verify_test_stop_after_refs = 1;
#endif
    /* a stop after the references' last look at the flag: still no verdict */
    if ((rc = plena_err_if_stopped(stop, "check", err))) goto done;
    /* zero weights or zero input: the maths is not exercised (docs/replay.md
     * "Gates": zero_input_smoke), the bound does not apply */
    r->numerical = b->weights != PLENA_WEIGHTS_ZERO && b->input != PLENA_INPUT_ZEROS;
    r->bound_ok = r->numerical
                      ? r->rel_rms >= 0 && r->rel_rms <= PLENA_MOE_REL_RMS_BOUND &&
                            r->rel_rms_full >= 0 && r->rel_rms_full <= PLENA_MOE_REL_RMS_BOUND &&
                            r->rel_rms_norm >= 0 && r->rel_rms_norm <= PLENA_MOE_REL_RMS_BOUND
                      : 1;
    r->passed = r->bit_exact && r->bound_ok && !(gate && r->numerical && r->gate_saturated) &&
                !(r->numerical && r->route_different);
done:
    plena_free(out);
    plena_free(dev);
    plena_free(ids);
    plena_free(ids64);
    plena_free(w);
    plena_free(g);
    plena_free(o64);
    plena_free(moe);
    plena_free(xn);
    plena_free(o64x);
    plena_verify_fused_free(&fu);
    plena_verify_refdata_free(&rd);
    plena_pool_free(pool);
    return rc;
}

int plena_verify_cost_row_measure(const struct plena_settings *s, const char *preset, uint32_t T,
                                  int routed, struct plena_verify_cost_row *row,
                                  struct plena_err *err)
{
    const struct plena_moe_model *mdl = plena_model_preset_find(preset);
    if (!mdl) return PLENA_FAIL(err, PLENA_E_INPUT, preset, "unknown preset");
    struct plena_gen_machine m;
    plena_gen_machine_from_settings(s, &m);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, mdl, &m, T);
    o.weights = PLENA_WEIGHTS_ZERO;
    o.cfg.residual = PLENA_RESIDUAL_NONE;
    uint32_t ids[256];
    float w[256];
    if (routed) {
        if ((size_t)T * o.cfg.k > 256)
            return PLENA_FAIL(err, PLENA_E_INPUT, preset, "at most 256 pairs");
        plena_moe_routing_balanced(T, o.cfg.E, o.cfg.k, ids, w);
        o.fixed_ids = ids;
        o.fixed_w = w;
    }
    struct plena_moe_build b;
    struct plena_verify_device d;
    memset(&d, 0, sizeof d);
    int rc = plena_moe_build_run(&o, &b, err);
    if (!rc) rc = plena_verify_emulate(&b, s, NULL, &d, err);
    if (!rc) {
        uint64_t(*c)[64] = plena_calloc(PLENA_STAGE_COUNT, sizeof *c);
        if (!c) {
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, preset, "out of memory");
        } else {
            plena_verify_count_stage_op(&b, d.pc_count, c);
            row->m_mm = c[PLENA_STAGE_EXPERT_PROJECTION][PLENA_OP_M_MM] +
                        c[PLENA_STAGE_SHARED_EXPERT_PROJECTION][PLENA_OP_M_MM];
            row->h_prefetch_m = c[PLENA_STAGE_EXPERT_WEIGHT_PREFETCH][PLENA_OP_H_PREFETCH_M] +
                                c[PLENA_STAGE_SHARED_EXPERT_PROJECTION][PLENA_OP_H_PREFETCH_M];
            uint32_t B = s->blen;
            row->useful_rows = routed ? 1 : T;
            row->tile_rows = B * ((row->useful_rows + B - 1) / B);
            row->predicted_equals_executed = 1;
            for (int op = 0; op < 64; op++)
                if (d.op_count[op] != b.info.dyn_op[op]) row->predicted_equals_executed = 0;
            plena_free(c);
        }
        plena_verify_device_free(&d);
    }
    plena_moe_build_free(&b);
    return rc;
}
