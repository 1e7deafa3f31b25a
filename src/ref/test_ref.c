/* Tests of the reference models: hand-computed single-lane layers, a V_TOPK
 * worked example (docs/machine.md "C_SET_TOPK_REG and V_TOPK"), and agreement
 * of the bit-exact reference with the independent float64 reference on
 * MX-representable data (docs/lowering.md "Checking a build"). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "num/num.h"
#include "common/pool.h"
#include "ref/ref.h"
#include "ref/tile.h"
#include "common/test_support.h"

static const struct plena_moe_ref_consts consts = {
    1.0f, -1.0f, -1.0f, 7.0f, -7.0f, 9.98377800e-07f, 0.015625f, -1.0f, -INFINITY, 1.0f, 0.0f};

/* T = 1, H = I = 64, one expert, fixed routing: x = e0, Wg[0][0] = 1,
 * Wu[0][0] = 2, Wd[0][0] = 1. By hand (bf16 after every op):
 *   s = -1; exp(-1) = 0.36787945 -> 0.3671875; +1 -> 1.3671875;
 *   1/1.3671875 = 0.7314286 -> 0.73046875; g = 0.73046875; u = 2 * g = 1.4609375;
 *   down: 1.4609375; times route weight w. */
static void run_single_lane(float w, float expect0)
{
    enum { H = 64, I = 64 };
    static float h[H], wg[H * I], wu[H * I], wd[I * H];
    memset(h, 0, sizeof h);
    memset(wg, 0, sizeof wg);
    memset(wu, 0, sizeof wu);
    memset(wd, 0, sizeof wd);
    h[0] = 1.0f;
    wg[0] = 1.0f;
    wu[0] = 2.0f;
    wd[0] = 1.0f;
    const float *pg[1] = {wg}, *pu[1] = {wu}, *pd[1] = {wd};
    uint32_t ids[1] = {0};
    float fw[1] = {w};
    struct plena_moe_ref_cfg cfg = {.T = 1,
                                    .H = H,
                                    .I = I,
                                    .E = 1,
                                    .k = 1,
                                    .mlen = 64,
                                    .chunk_tiles = 4,
                                    .routing = PLENA_ROUTING_FIXED};
    struct plena_moe_ref_in in = {.h = h,
                                  .w_gate = pg,
                                  .w_up = pu,
                                  .w_down = pd,
                                  .fixed_ids = ids,
                                  .fixed_w = fw,
                                  .c = consts};
    float out[H];
    uint32_t oid[1];
    float ow[1];
    struct plena_moe_ref_out o = {.out = out, .ids = oid, .weights = ow};
    assert_int_equal(plena_moe_reference(&cfg, &in, &o, NULL), 0);
    assert_true(out[0] == expect0);
    for (int i = 1; i < H; i++)
        assert_true(out[i] == 0.0f);
}

static void test_single_lane_by_hand(void **state)
{
    (void)state;
    run_single_lane(1.0f, 1.4609375f);
    run_single_lane(0.5f, 0.73046875f);
}

static void test_topk_worked_example(void **state)
{
    (void)state;
    float lg[8] = {0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.0f, -0.0f, 0.0f};
    uint32_t ids[3];
    float w[3];
    plena_moe_ref_topk(lg, 8, 3, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 5);
    assert_int_equal(plena_num_bf16_from_f32(w[0]), 0x3ED8);
    assert_int_equal(plena_num_bf16_from_f32(w[1]), 0x3ED8);
    assert_int_equal(plena_num_bf16_from_f32(w[2]), 0x3E1F);
    /* Full ranking 1, 3, 5, 0, 7, 6, 2, 4: +0 above -0, NaN last. */
    uint32_t all[8];
    float wa[8];
    plena_moe_ref_topk(lg, 8, 8, all, wa);
    const uint32_t rank[8] = {1, 3, 5, 0, 7, 6, 2, 4};
    for (int i = 0; i < 8; i++)
        assert_int_equal(all[i], rank[i]);
}

/* Deterministic representable test data: {-1,-0.5,-0.25,0,0.25,0.5,1} x 2^s. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rep(float scale)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    static const float v[7] = {-1.0f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 1.0f};
    return v[rng % 7] * scale;
}

static float *fill(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = rep(scale);
    return p;
}

/* E experts' gate, up and down weights ([H][I], [H][I], [I][H]) from fill,
 * expert by expert in that order (the fill sequence is part of the inputs). */
static void fill_experts(const float **pg, const float **pu, const float **pd, uint32_t E,
                         uint32_t H, uint32_t I, float scale)
{
    for (uint32_t e = 0; e < E; e++) {
        pg[e] = fill((size_t)H * I, scale);
        pu[e] = fill((size_t)H * I, scale);
        pd[e] = fill((size_t)I * H, scale);
    }
}

/* The reference constants with INV_H for hidden size H (BF16-rounded 1/H). */
static struct plena_moe_ref_consts consts_for(uint32_t H)
{
    struct plena_moe_ref_consts c = consts;
    c.inv_h = plena_num_round_bf16(1.0f / (float)H);
    return c;
}

/* A fixed-routing layer of T tokens (MLEN 64, chunks of 4 tiles). */
static struct plena_moe_ref_cfg fixed_cfg(uint32_t T, uint32_t H, uint32_t I, uint32_t E,
                                          uint32_t k)
{
    struct plena_moe_ref_cfg c = {.T = T,
                                  .H = H,
                                  .I = I,
                                  .E = E,
                                  .k = k,
                                  .mlen = 64,
                                  .chunk_tiles = 4,
                                  .routing = PLENA_ROUTING_FIXED};
    return c;
}

/* The inputs of a fixed-routing layer with per-expert weight arrays. */
static struct plena_moe_ref_in fixed_in(const float *h, const float *const *pg,
                                        const float *const *pu, const float *const *pd,
                                        const uint32_t *ids, const float *fw, uint32_t H)
{
    struct plena_moe_ref_in in = {.h = h,
                                  .w_gate = pg,
                                  .w_up = pu,
                                  .w_down = pd,
                                  .fixed_ids = ids,
                                  .fixed_w = fw,
                                  .c = consts_for(H)};
    return in;
}

/* Bit-exact vs float64: relative RMS within the documented bound, for a
 * routed + gated-shared PRE_NORM layer with device (GEMM) routing. */
static void check_against_f64(uint32_t H, uint32_t I, uint32_t Is, uint32_t E, uint32_t k,
                              uint32_t T, enum plena_act_policy act, enum plena_shared_gate gate)
{
    struct plena_moe_ref_cfg cfg = {.T = T,
                                    .H = H,
                                    .I = I,
                                    .Is = Is,
                                    .E = E,
                                    .k = k,
                                    .mlen = 64,
                                    .chunk_tiles = 4,
                                    .routing = PLENA_ROUTING_DEVICE,
                                    .router_form = PLENA_ROUTER_GEMM,
                                    .activation = act,
                                    .shared_gate = gate,
                                    .residual = PLENA_RESIDUAL_PRE_NORM};
    float *h = fill((size_t)T * H, 0.03125f);
    float *gamma = malloc(H * sizeof(float));
    for (uint32_t i = 0; i < H; i++)
        gamma[i] = 1.0f;
    float *wr = fill((size_t)H * E, 1.0f);
    const float **pg = calloc(E, sizeof *pg), **pu = calloc(E, sizeof *pu),
                **pd = calloc(E, sizeof *pd);
    fill_experts(pg, pu, pd, E, H, I, 0.125f);
    float *sg = Is ? fill((size_t)H * Is, 0.125f) : NULL;
    float *su = Is ? fill((size_t)H * Is, 0.125f) : NULL;
    float *sd = Is ? fill((size_t)Is * H, 0.125f) : NULL;
    float *wsg = fill(H, 0.0625f);
    struct plena_moe_ref_consts c = consts_for(H);
    struct plena_moe_ref_in in = {.h = h,
                                  .gamma = gamma,
                                  .router_w = wr,
                                  .w_gate = pg,
                                  .w_up = pu,
                                  .w_down = pd,
                                  .ws_gate = sg,
                                  .ws_up = su,
                                  .ws_down = sd,
                                  .w_sg = wsg,
                                  .c = c};
    float *out = calloc((size_t)T * H, sizeof(float));
    uint32_t *ids = calloc((size_t)T * k, sizeof(uint32_t));
    float *w = calloc((size_t)T * k, sizeof(float));
    float *g = calloc(T, sizeof(float));
    struct plena_moe_ref_out o = {.out = out, .ids = ids, .weights = w, .gate = g};
    assert_int_equal(plena_moe_reference(&cfg, &in, &o, NULL), 0);
    double *o64 = calloc((size_t)T * H, sizeof(double));
    assert_int_equal(plena_moe_reference_f64(&cfg, &in, ids, o64, NULL, NULL), 0);
    double r = plena_moe_rel_rms(&cfg, &in, out, o64);
    assert_true(r >= 0.0);
    assert_true(r <= PLENA_MOE_REL_RMS_BOUND);
    for (size_t i = 0; i < (size_t)T * H; i++)
        assert_false(isnan(out[i]));
    if (gate == PLENA_SHARED_GATE_SIGMOID)
        for (uint32_t t = 0; t < T; t++)
            assert_true(g[t] > 0.0f && g[t] < 1.0f);
    free(h), free(gamma), free(wr), free(sg), free(su), free(sd), free(wsg), free(out);
    free(ids), free(w), free(g), free(o64);
    for (uint32_t e = 0; e < E; e++)
        free((void *)pg[e]), free((void *)pu[e]), free((void *)pd[e]);
    free(pg), free(pu), free(pd);
}

/* Residual-dominated layer (x uniform-like in [-1, 1], small weights, as replay
 * stages them): the MoE-level bound and the full-output bound hold, and an
 * output that forgot the residual add-back fails the full-output bound. */
static void test_bound_with_large_residual(void **state)
{
    (void)state;
    enum { T = 4, H = 128, I = 64, E = 8, K = 2 };
    struct plena_moe_ref_cfg cfg = fixed_cfg(T, H, I, E, K);
    cfg.residual = PLENA_RESIDUAL_PRE_NORM;
    float *h = fill((size_t)T * H, 1.0f);
    float gamma[H];
    for (int i = 0; i < H; i++)
        gamma[i] = 1.0f;
    const float *pg[E], *pu[E], *pd[E];
    fill_experts(pg, pu, pd, E, H, I, 0.0625f);
    uint32_t ids[T * K];
    float fw[T * K];
    for (int i = 0; i < T * K; i++) {
        ids[i] = (uint32_t)((i * 3) % E);
        fw[i] = 0.5f;
    }
    struct plena_moe_ref_in in = fixed_in(h, pg, pu, pd, ids, fw, H);
    in.gamma = gamma;
    float out[T * H], moe[T * H], xn[T * H];
    double o64[T * H], o64x[T * H], x64[T * H];
    struct plena_moe_ref_out o = {.out = out, .moe_out = moe, .x_norm = xn};
    assert_int_equal(plena_moe_reference(&cfg, &in, &o, NULL), 0);
    assert_int_equal(plena_moe_reference_f64(&cfg, &in, NULL, o64, NULL, NULL), 0);
    assert_int_equal(plena_moe_reference_f64_x(&cfg, &in, xn, NULL, o64x, NULL, NULL), 0);
    assert_int_equal(plena_moe_rmsnorm_f64(&cfg, &in, x64), 0);
    /* both float64 layers in one pass: the very doubles of the two calls */
    double p64[T * H], p64x[T * H];
    assert_int_equal(plena_moe_reference_f64_pair(&cfg, &in, xn, NULL, p64, p64x, NULL), 0);
    assert_memory_equal(p64, o64, sizeof o64);
    assert_memory_equal(p64x, o64x, sizeof o64x);
    double norm_rel = plena_moe_rel_rms_norm(&cfg, xn, x64);
    assert_true(norm_rel >= 0.0 && norm_rel <= PLENA_MOE_REL_RMS_BOUND);
    /* a mirrored RMSNorm bug (e.g. dividing by H - 1 or a wrong eps) shows
     * up as a scale error of the normalised input: 3% fails the bound */
    for (int i = 0; i < T * H; i++)
        xn[i] *= 1.03f;
    assert_true(plena_moe_rel_rms_norm(&cfg, xn, x64) > PLENA_MOE_REL_RMS_BOUND);
    for (int i = 0; i < T * H; i++)
        xn[i] /= 1.03f;
    assert_true(plena_moe_rel_rms_moe(&cfg, &in, moe, o64x) <= PLENA_MOE_REL_RMS_BOUND);
    double moe_rel = plena_moe_rel_rms_moe(&cfg, &in, moe, o64);
    double full_rel = plena_moe_rel_rms_full(&cfg, out, o64);
    assert_true(moe_rel >= 0.0 && moe_rel <= PLENA_MOE_REL_RMS_BOUND);
    assert_true(full_rel >= 0.0 && full_rel <= PLENA_MOE_REL_RMS_BOUND);
    /* A mirrored "no residual add-back" bug: the output is the MoE output. */
    assert_true(plena_moe_rel_rms_full(&cfg, moe, o64) > PLENA_MOE_REL_RMS_BOUND);
    free(h);
    for (int e = 0; e < E; e++)
        free((void *)pg[e]), free((void *)pu[e]), free((void *)pd[e]);
}

static void test_matches_f64_routed_shared(void **state)
{
    (void)state;
    check_against_f64(128, 64, 128, 16, 2, 4, PLENA_ACT_STANDARD_SWIGLU, PLENA_SHARED_GATE_SIGMOID);
}

static void test_matches_f64_ksplit_gpt_oss(void **state)
{
    (void)state;
    /* H = 320: five K tiles, chunk 4 -> one block add per projection. */
    check_against_f64(320, 96, 0, 8, 2, 3, PLENA_ACT_GPT_OSS_CLAMP_GATED, PLENA_SHARED_GATE_NONE);
}

/* A streaming provider over arrays: copies expert e into one reused buffer
 * (poisoning the previous copy, so a stale pointer shows) and records the
 * order of the requests. */
struct stream_ctx {
    const float *const *w[3];
    float *buf[3];
    size_t n[3];
    uint32_t calls, last;
};

static int stream_expert(void *ctx, uint32_t e, uint32_t slot, struct plena_moe_ref_expert *x,
                         struct plena_err *err)
{
    (void)err;
    assert_int_equal(slot, 0); /* no pool: one slot */
    struct stream_ctx *c = ctx;
    if (c->calls) assert_true(e > c->last); /* each expert once, in increasing order */
    c->calls++;
    c->last = e;
    for (int q = 0; q < 3; q++) {
        for (size_t i = 0; i < c->n[q]; i++)
            c->buf[q][i] = NAN;
        if (c->w[q]) memcpy(c->buf[q], c->w[q][e], c->n[q] * sizeof(float));
    }
    x->w_gate = c->buf[0];
    x->w_up = c->buf[1];
    x->w_down = c->w[2] ? c->buf[2] : NULL;
    return 0;
}

/* The streaming check's contract: weights from a provider (one expert at a
 * time) give the same bits as the arrays, for both references, each used
 * expert is asked for once; and T*k > 4096 pairs need no ids/weights output
 * (it used to be refused). The pairs of a token are in descending expert
 * order, so expert-major evaluation must scatter back in pair order. */
static void test_streaming_provider(void **state)
{
    (void)state;
    enum { H = 64, I = 64, E = 8, K = 2, T = 2100 };
    struct plena_moe_ref_cfg cfg = fixed_cfg(T, H, I, E, K);
    float *h = fill((size_t)T * H, 0.5f);
    const float *pg[E], *pu[E], *pd[E];
    fill_experts(pg, pu, pd, E, H, I, 0.125f);
    static uint32_t ids[T * K];
    static float fw[T * K];
    for (uint32_t t = 0; t < T; t++) {
        ids[t * K] = 6 - t % 6 + (t % 7 == 0); /* 1..7; the second 0..6, below it */
        ids[t * K + 1] = ids[t * K] - 1 - t % 2 * (ids[t * K] > 1);
        fw[t * K] = 0.75f;
        fw[t * K + 1] = 0.25f;
    }
    uint32_t used = 0;
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t p = 0; p < T * K; p++)
            if (ids[p] == e) {
                used++;
                break;
            }
    assert_true(used >= 6);
    struct plena_moe_ref_in in = fixed_in(h, pg, pu, pd, ids, fw, H);
    float *out_a = calloc((size_t)T * H, sizeof(float)), *out_s = calloc((size_t)T * H, 4);
    struct plena_moe_ref_out oa = {.out = out_a};
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_moe_reference(&cfg, &in, &oa, &err), 0);
    double *f_a = calloc((size_t)T * H, sizeof(double)), *f_s = calloc((size_t)T * H, 8);
    assert_int_equal(plena_moe_reference_f64(&cfg, &in, NULL, f_a, NULL, &err), 0);

    struct stream_ctx sc = {.w = {pg, pu, pd}, .n = {H * I, H * I, I * H}};
    for (int q = 0; q < 3; q++)
        sc.buf[q] = malloc(sc.n[q] * sizeof(float));
    struct plena_moe_ref_in ins = in;
    ins.w_gate = ins.w_up = ins.w_down = NULL;
    ins.expert = stream_expert;
    ins.expert_ctx = &sc;
    static uint32_t oid[T * K];
    static float ow[T * K];
    struct plena_moe_ref_out os = {.out = out_s, .ids = oid, .weights = ow};
    assert_int_equal(plena_moe_reference(&cfg, &ins, &os, &err), 0);
    assert_int_equal(sc.calls, used);
    assert_memory_equal(out_a, out_s, (size_t)T * H * sizeof(float));
    sc.calls = 0;
    assert_int_equal(plena_moe_reference_f64(&cfg, &ins, NULL, f_s, NULL, &err), 0);
    assert_int_equal(sc.calls, used);
    assert_memory_equal(f_a, f_s, (size_t)T * H * sizeof(double));
    /* an unknown expert is an input error, not a crash */
    ids[5] = E;
    assert_int_equal(plena_moe_reference(&cfg, &in, &oa, &err), PLENA_E_INPUT);
    assert_int_not_equal(plena_moe_reference_f64(&cfg, &in, NULL, f_a, NULL, &err), 0);
    ids[5] = 1;
    /* missing tensors are input errors too: no arrays at all, biases asked
     * for but not given, a provider that leaves a matrix out */
    struct plena_moe_ref_in none = in;
    none.w_gate = none.w_up = none.w_down = NULL;
    assert_int_equal(plena_moe_reference(&cfg, &none, &oa, &err), PLENA_E_INPUT);
    struct plena_moe_ref_cfg biased = cfg;
    biased.expert_bias = 1;
    assert_int_equal(plena_moe_reference(&biased, &in, &oa, &err), PLENA_E_INPUT);
    assert_int_equal(plena_moe_reference_f64(&biased, &in, NULL, f_a, NULL, &err), PLENA_E_INPUT);
    sc.w[2] = NULL; /* stream_expert then hands out no down matrix */
    sc.calls = 0;
    assert_int_equal(plena_moe_reference(&cfg, &ins, &oa, &err), PLENA_E_INPUT);
    for (int q = 0; q < 3; q++)
        free(sc.buf[q]);
    for (uint32_t e = 0; e < E; e++)
        free((void *)pg[e]), free((void *)pu[e]), free((void *)pd[e]);
    free(h), free(out_a), free(out_s), free(f_a), free(f_s);
}

/* The float64 reference on a two-expert layer of hidden width H and expert
 * width I
 * and T <= 128 tokens, every token on both experts: evaluated for all
 * tokens at once (pairs of one expert batched) and one token alone, the
 * same doubles; and both equal plain loops written here (each product sum
 * 0.0, then += x * w in increasing k; pair outputs summed in pair order)
 * bit for bit. H = 70 gives the kernels' single tail columns; H = 300 sums
 * over more than one pass of weight rows (128 each), packs column groups of
 * 64 with a 4-wide last block (300 = 4 x 64 + 5 x 8 + 4), and T = 100 rows
 * per expert two row batches (96 + 4) and row blocks of 6 with a rest;
 * I = 262 gives tail columns in the gate/up products and, in the down
 * product, more than one pass with tail columns carried between passes; T
 * <= 3 (and every single token) take the few-rows kernel. */
static void f64_two_experts(uint32_t H, uint32_t I, uint32_t T)
{
    enum { E = 2, K = 2, TMAX = 128, IMAX = 300 };
    assert_true(T <= TMAX && I <= IMAX);
    struct plena_moe_ref_cfg cfg = fixed_cfg(T, H, I, E, K);
    cfg.placement = PLENA_ROUTE_OUTPUT;
    float *h = fill((size_t)T * H, 0.5f);
    const float *pg[E], *pu[E], *pd[E];
    fill_experts(pg, pu, pd, E, H, I, 0.125f);
    uint32_t ids[TMAX * K];
    float fw[TMAX * K];
    for (uint32_t t = 0; t < T; t++) {
        ids[t * K] = t % 2;
        ids[t * K + 1] = 1 - t % 2;
        fw[t * K] = 0.625f;
        fw[t * K + 1] = 0.375f;
    }
    struct plena_moe_ref_in in = fixed_in(h, pg, pu, pd, ids, fw, H);
    double *all = calloc((size_t)T * H, sizeof *all), *one = calloc(H, sizeof *one);
    double *want = calloc((size_t)T * H, sizeof *want), *o = calloc(H, sizeof *o);
    assert_int_equal(plena_moe_reference_f64(&cfg, &in, NULL, all, NULL, NULL), 0);
    for (uint32_t t = 0; t < T; t++) {
        struct plena_moe_ref_cfg c1 = cfg;
        c1.T = 1;
        struct plena_moe_ref_in i1 = in;
        i1.h = h + (size_t)t * H;
        i1.fixed_ids = ids + t * K;
        i1.fixed_w = fw + t * K;
        assert_int_equal(plena_moe_reference_f64(&c1, &i1, NULL, one, NULL, NULL), 0);
        assert_memory_equal(one, all + (size_t)t * H, H * sizeof *one);
        double *y = want + (size_t)t * H;
        for (uint32_t j = 0; j < K; j++) {
            const uint32_t e = ids[t * K + j];
            double g[IMAX], u[IMAX];
            for (uint32_t n = 0; n < I; n++) {
                g[n] = u[n] = 0.0;
                for (uint32_t k = 0; k < H; k++) {
                    g[n] += (double)h[t * H + k] * (double)pg[e][k * I + n];
                    u[n] += (double)h[t * H + k] * (double)pu[e][k * I + n];
                }
                u[n] = g[n] / (1.0 + exp(-g[n])) * u[n];
            }
            for (uint32_t n = 0; n < H; n++) {
                o[n] = 0.0;
                for (uint32_t k = 0; k < I; k++)
                    o[n] += u[k] * (double)pd[e][k * H + n];
                y[n] += (double)fw[t * K + j] * o[n];
            }
        }
    }
    assert_memory_equal(all, want, (size_t)T * H * sizeof *all);
    for (uint32_t e = 0; e < E; e++)
        free((void *)pg[e]), free((void *)pu[e]), free((void *)pd[e]);
    free(h), free(all), free(one), free(want), free(o);
}

static void test_f64_batched_equals_single(void **state)
{
    (void)state;
    f64_two_experts(64, 84, 9);
    f64_two_experts(70, 84, 9);
    f64_two_experts(300, 84, 100);
    f64_two_experts(70, 262, 9);
    f64_two_experts(70, 262, 2);
}

/* The tile kernel against the plain chain (written here): every R, widths
 * with and without a 16-column tail, K offsets, and data with -0, infinities,
 * NaN, subnormals and overflow; bit patterns must be equal (NaN: both NaN). */
static void test_tile_kernel_exact(void **state)
{
    (void)state;
    static const uint32_t nps[] = {16, 7, 33, 64, 80, 40, 300, 520};
    static const uint32_t mlens[] = {1, 8, 64, 6};
    /* 1-11 rows: the streaming kernel in blocks of 4; 12-16: register blocks
     * of 6 (two, and rests of 1-4), over packed weights */
    enum { KMAX = 128, NMAX = 520, RMAX = 16 };
    static float x[RMAX * KMAX], w[KMAX * NMAX], td[RMAX * (NMAX + 3)];
    static const float special[] = {-0.0f, INFINITY, -INFINITY, NAN, 1e-40f, 3e38f, -3e38f};
    /* data 0: moderate values (long exact chains); 1: one special in ~40 */
    for (int data = 0; data < 2; data++) {
        for (uint32_t i = 0; i < RMAX * KMAX; i++)
            x[i] =
                data && i % 37 == 0 ? special[i / 37 % 7] : rep(2.0f) + 0.0078125f * (float)(i % 5);
        for (uint32_t i = 0; i < KMAX * NMAX; i++)
            w[i] = data && i % 41 == 0 ? special[i / 41 % 7] : rep(0.5f) * 1.0009765625f;
        for (size_t a = 0; a < sizeof nps / sizeof nps[0]; a++)
            for (size_t b = 0; b < sizeof mlens / sizeof mlens[0]; b++)
                for (uint32_t R = 1; R <= RMAX; R++)
                    for (uint32_t k0 = 0; k0 + mlens[b] <= KMAX; k0 += 64) {
                        const uint32_t np = nps[a], mlen = mlens[b];
                        /* add 0: the contribution; add 1: base + it, base
                         * -0 or a moderate value (row stride np + 3) */
                        for (int add = 0; add < 2; add++) {
                            const size_t ldt = add ? np + 3 : np;
                            for (size_t i = 0; i < RMAX * (NMAX + 3); i++)
                                td[i] = i % 3 ? -0.0f : 0.25f * (float)(i % 7);
                            plena_ref_tile_rows(x, KMAX, R, w, np, k0, mlen, td, ldt, add);
                            for (uint32_t i = 0; i < R; i++)
                                for (uint32_t n = 0; n < np; n++) {
                                    float e = x[i * KMAX + k0] * w[(size_t)k0 * np + n];
                                    for (uint32_t r = 1; r < mlen; r++) {
                                        float p =
                                            x[i * KMAX + k0 + r] * w[(size_t)(k0 + r) * np + n];
                                        e = e + p;
                                    }
                                    const size_t o = i * ldt + n;
                                    if (add) {
                                        float base = o % 3 ? -0.0f : 0.25f * (float)(o % 7);
                                        e = base + e;
                                    }
                                    uint32_t ge, gt;
                                    memcpy(&ge, &e, 4);
                                    memcpy(&gt, &td[o], 4);
                                    /* NaN: any NaN (the payload a compiler's operand order
                                     * picks is not specified; a NaN output fails every check
                                     * anyway) */
                                    if (ge != gt && !(isnan(e) && isnan(td[o])))
                                        fail_msg("np %u mlen %u R %u k0 %u add %d row %u col %u: "
                                                 "%08x vs %08x",
                                                 np, mlen, R, k0, add, i, n, gt, ge);
                                }
                        }
                    }
    }
}

/* A provider for threads: one buffer set per slot; experts from fail_from on
 * have no down matrix (an input error). */
struct slot_ctx {
    const float *const *w[3];
    float *buf[4][3];
    size_t n[3];
    uint32_t fail_from;
};

static int slot_expert(void *ctx, uint32_t e, uint32_t slot, struct plena_moe_ref_expert *x,
                       struct plena_err *err)
{
    (void)err;
    struct slot_ctx *c = ctx;
    if (slot >= 4) return PLENA_E_INTERNAL;
    for (int q = 0; q < 3; q++)
        memcpy(c->buf[slot][q], c->w[q][e], c->n[q] * sizeof(float));
    x->w_gate = c->buf[slot][0];
    x->w_up = c->buf[slot][1];
    x->w_down = e >= c->fail_from ? NULL : c->buf[slot][2];
    return 0;
}

/* The references on a pool of 4 threads: the same floats and doubles as on
 * one (routed pairs split over experts, shared rows over groups), and of two
 * failing experts always the lower one reported. */
static void test_pool_identical(void **state)
{
    (void)state;
    enum { T = 40, H = 128, I = 64, Is = 128, E = 8, K = 2 };
    struct plena_moe_ref_cfg cfg = fixed_cfg(T, H, I, E, K);
    cfg.Is = Is;
    cfg.residual = PLENA_RESIDUAL_PRE_NORM;
    cfg.shared_gate = PLENA_SHARED_GATE_SIGMOID;
    float *h = fill((size_t)T * H, 1.0f), *gamma = fill(H, 1.0f), *wsg = fill(H, 0.125f);
    float *wsg_ = fill((size_t)H * Is, 0.0625f), *wsu = fill((size_t)H * Is, 0.0625f);
    float *wsd = fill((size_t)Is * H, 0.0625f);
    const float *pg[E], *pu[E], *pd[E];
    fill_experts(pg, pu, pd, E, H, I, 0.125f);
    static uint32_t ids[T * K];
    static float fw[T * K];
    for (uint32_t p = 0; p < T * K; p++) {
        ids[p] = (p * 5 + p / 7) % E;
        if (p % K && ids[p] == ids[p - 1]) ids[p] = (ids[p] + 1) % E;
        fw[p] = 0.375f;
    }
    struct slot_ctx sc = {.w = {pg, pu, pd}, .n = {H * I, H * I, I * H}, .fail_from = E};
    for (int t = 0; t < 4; t++)
        for (int q = 0; q < 3; q++)
            sc.buf[t][q] = malloc(sc.n[q] * sizeof(float));
    struct plena_moe_ref_in in = fixed_in(h, NULL, NULL, NULL, ids, fw, H);
    in.gamma = gamma;
    in.w_sg = wsg;
    in.ws_gate = wsg_, in.ws_up = wsu, in.ws_down = wsd;
    in.expert = slot_expert;
    in.expert_ctx = &sc;
    static float out1[T * H], out4[T * H], xn1[T * H], xn4[T * H], g1[T], g4[T];
    static double a1[T * H], b1[T * H], a4[T * H], b4[T * H];
    struct plena_moe_ref_out o1 = {.out = out1, .x_norm = xn1, .gate = g1};
    struct plena_moe_ref_out o4 = {.out = out4, .x_norm = xn4, .gate = g4};
    struct plena_pool *pool = plena_pool_new(4);
    assert_non_null(pool);
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_moe_reference(&cfg, &in, &o1, &err), 0);
    /* in steps, half the experts handed over (as the check's provider does),
     * first (fresh buffers): the same doubles as in one call */
    struct plena_moe_f64_pair *fp;
    assert_int_equal(plena_moe_f64_pair_begin(&cfg, &in, xn1, NULL, &fp, &err), 0);
    for (uint32_t e = 0; e < E; e += 2) {
        struct plena_moe_ref_expert x = {0};
        assert_int_equal(slot_expert(&sc, e, 0, &x, &err), 0);
        assert_int_equal(plena_moe_f64_pair_expert(fp, e, 0, &x, &err), 0);
        assert_int_equal(plena_moe_f64_pair_expert(fp, e, 0, &x, &err), 0); /* again: skipped */
    }
    assert_int_equal(plena_moe_f64_pair_end(fp, a4, b4, &err), 0);
    plena_moe_f64_pair_free(fp);
    assert_int_equal(plena_moe_reference_f64_pair(&cfg, &in, xn1, NULL, a1, b1, &err), 0);
    assert_memory_equal(a1, a4, sizeof a1);
    assert_memory_equal(b1, b4, sizeof b1);
    in.pool = pool;
    for (int rep = 0; rep < 3; rep++) {
        /* rep 0: the workers first, so their parts (and scratch) do the work */
        plena_pool_test_workers_first(rep == 0);
        assert_int_equal(plena_moe_reference(&cfg, &in, &o4, &err), 0);
        assert_int_equal(plena_moe_reference_f64_pair(&cfg, &in, xn4, NULL, a4, b4, &err), 0);
        plena_pool_test_workers_first(0);
        assert_memory_equal(out1, out4, sizeof out1);
        assert_memory_equal(xn1, xn4, sizeof xn1);
        assert_memory_equal(g1, g4, sizeof g1);
        assert_memory_equal(a1, a4, sizeof a1);
        assert_memory_equal(b1, b4, sizeof b1);
    }
    sc.fail_from = 3; /* experts 3..7 fail: expert 3 is named, every time */
    for (int rep = 0; rep < 5; rep++) {
        plena_err_clear(&err);
        assert_int_equal(plena_moe_reference(&cfg, &in, &o4, &err), PLENA_E_INPUT);
        assert_non_null(strstr(err.msg, "expert 3 of pair"));
        plena_err_clear(&err);
        assert_int_not_equal(plena_moe_reference_f64_pair(&cfg, &in, xn4, NULL, a4, b4, &err), 0);
        assert_non_null(strstr(err.msg, "expert 3 of pair"));
    }
    /* a set stop flag (SIGINT): both references end PLENA_E_INTERRUPTED at
     * the first routed expert or shared-expert row block they take, with and
     * without the pool; the layer without routed experts stops in its
     * shared-expert rows */
    sc.fail_from = E;
    volatile sig_atomic_t stop = 1;
    in.stop = &stop;
    struct plena_moe_ref_cfg shared_only = cfg, routed_only = cfg;
    shared_only.routing = PLENA_ROUTING_NONE;
    shared_only.E = shared_only.k = 0;
    routed_only.Is = 0;
    routed_only.shared_gate = PLENA_SHARED_GATE_NONE;
    for (int pooled = 0; pooled < 2; pooled++) {
        in.pool = pooled ? pool : NULL;
        plena_err_clear(&err);
        assert_int_equal(plena_moe_reference(&cfg, &in, &o4, &err), PLENA_E_INTERRUPTED);
        plena_err_clear(&err);
        assert_int_equal(plena_moe_reference_f64_pair(&cfg, &in, xn4, NULL, a4, b4, &err),
                         PLENA_E_INTERRUPTED);
        plena_err_clear(&err);
        assert_int_equal(plena_moe_reference_f64_pair(&routed_only, &in, xn4, NULL, a4, b4, &err),
                         PLENA_E_INTERRUPTED);
        plena_err_clear(&err);
        assert_int_equal(plena_moe_reference_f64_pair(&shared_only, &in, xn4, NULL, a4, b4, &err),
                         PLENA_E_INTERRUPTED);
        plena_err_clear(&err);
        assert_int_equal(plena_moe_reference(&shared_only, &in, &o4, &err), PLENA_E_INTERRUPTED);
        stop = 0; /* the same calls without the flag complete */
        assert_int_equal(plena_moe_reference_f64_pair(&routed_only, &in, xn4, NULL, a4, b4, &err),
                         0);
        assert_int_equal(plena_moe_reference_f64_pair(&shared_only, &in, xn4, NULL, a4, b4, &err),
                         0);
        assert_int_equal(plena_moe_reference(&cfg, &in, &o4, &err), 0);
        assert_int_equal(plena_moe_reference(&shared_only, &in, &o4, &err), 0);
        stop = 1;
    }
    in.stop = NULL;
    plena_pool_free(pool);
    for (int t = 0; t < 4; t++)
        for (int q = 0; q < 3; q++)
            free(sc.buf[t][q]);
    for (uint32_t e = 0; e < E; e++)
        free((void *)pg[e]), free((void *)pu[e]), free((void *)pd[e]);
    free(h), free(gamma), free(wsg), free(wsg_), free(wsu), free(wsd);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_single_lane_by_hand),
    cmocka_unit_test(test_topk_worked_example),
    cmocka_unit_test(test_streaming_provider),
    cmocka_unit_test(test_tile_kernel_exact),
    cmocka_unit_test(test_f64_batched_equals_single),
    cmocka_unit_test(test_matches_f64_routed_shared),
    cmocka_unit_test(test_matches_f64_ksplit_gpt_oss),
    cmocka_unit_test(test_bound_with_large_residual),
    cmocka_unit_test(test_pool_identical),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
