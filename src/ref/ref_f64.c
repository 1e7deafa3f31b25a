/* Independent float64 MoE reference (docs/lowering.md "Checking a build"):
 * written from the model equations, not from the instruction sequence — no
 * tiles, no chunks, no intermediate rounding. Its only job is to bound the
 * error of the bit-exact path so a mistake mirrored in generator and
 * reference is caught. */
#include "ref/ref.h"

#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cpu.h"
#include "ref/experts.h"

static double silu(double z)
{
    return z / (1.0 + exp(-z));
}

static double sigmoid(double z)
{
    return 1.0 / (1.0 + exp(-z));
}

/* y[n] = sum_k x[k] * w[k][n] */
static void matvec(const double *x, uint32_t K, const float *w, uint32_t N, double *y)
{
    for (uint32_t n = 0; n < N; n++)
        y[n] = 0.0;
    for (uint32_t kk = 0; kk < K; kk++) {
        double xv = x[kk];
        const float *row = w + (size_t)kk * N;
        for (uint32_t n = 0; n < N; n++)
            y[n] += xv * (double)row[n];
    }
}

/* matvec_rows' kernel, register-blocked: RR rows of x (stride ldx) times an
 * 8 * NV-column block of weights packed as doubles (pk[j][8 * NV], weight
 * rows k0 + j for j < kb), added into y (stride ldy) in increasing k -- y =
 * 0.0 + x * w at k0 = 0, else y + x * w, each product and each add rounded:
 * matvec's chain, carried in y between calls. The RR x NV accumulators stay
 * in registers for the whole pass (at most 6 x 2 of the 16 vector
 * registers, with two weight vectors and one broadcast); lanes are different
 * outputs, so no sum is reassociated. */
typedef double f64_v4 __attribute__((vector_size(32)));
#define F64_KC 128 /* weight rows per pass: the packed block (128 x 8 doubles) stays in L1 */
#define F64_RB 6   /* rows per kernel call */

#define F64_FN(NAME, RR, NV, ATTR)                                                                 \
    ATTR static void NAME(const double *x, size_t ldx, uint32_t k0, uint32_t kb, const double *pk, \
                          double *y, size_t ldy)                                                   \
    {                                                                                              \
        f64_v4 acc[RR][NV];                                                                        \
        _Pragma("GCC unroll 8") for (uint32_t i = 0; i < RR; i++)                                  \
            _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++)                              \
        {                                                                                          \
            acc[i][v] = (f64_v4){0.0, 0.0, 0.0, 0.0};                                              \
            if (k0) memcpy(&acc[i][v], y + i * ldy + 4 * v, sizeof acc[i][v]);                     \
        }                                                                                          \
        const double *xk = x + k0;                                                                 \
        for (uint32_t j = 0; j < kb; j++) {                                                        \
            f64_v4 wv[NV];                                                                         \
            _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++)                              \
                memcpy(&wv[v], pk + (size_t)j * 4 * NV + 4 * v, sizeof wv[v]);                     \
            _Pragma("GCC unroll 8") for (uint32_t i = 0; i < RR; i++)                              \
            {                                                                                      \
                const double s = xk[i * ldx + j];                                                  \
                const f64_v4 b = {s, s, s, s};                                                     \
                _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++) acc[i][v] =              \
                    acc[i][v] + b * wv[v];                                                         \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (uint32_t i = 0; i < RR; i++)                                  \
            _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++)                              \
                memcpy(y + i * ldy + 4 * v, &acc[i][v], sizeof acc[i][v]);                         \
    }

typedef void (*f64_fn)(const double *x, size_t ldx, uint32_t k0, uint32_t kb, const double *pk,
                       double *y, size_t ldy);
#define F64_ROWS_SET(SUFFIX, NV, ATTR)                                                             \
    F64_FN(mv1x##NV##_##SUFFIX, 1, NV, ATTR)                                                       \
    F64_FN(mv2x##NV##_##SUFFIX, 2, NV, ATTR)                                                       \
    F64_FN(mv3x##NV##_##SUFFIX, 3, NV, ATTR)                                                       \
    F64_FN(mv4x##NV##_##SUFFIX, 4, NV, ATTR)                                                       \
    F64_FN(mv5x##NV##_##SUFFIX, 5, NV, ATTR)                                                       \
    F64_FN(mv6x##NV##_##SUFFIX, 6, NV, ATTR)                                                       \
    static const f64_fn mv##NV##_##SUFFIX[F64_RB] = {mv1x##NV##_##SUFFIX, mv2x##NV##_##SUFFIX,     \
                                                     mv3x##NV##_##SUFFIX, mv4x##NV##_##SUFFIX,     \
                                                     mv5x##NV##_##SUFFIX, mv6x##NV##_##SUFFIX};
#define F64_SET(SUFFIX, ATTR)                                                                      \
    F64_ROWS_SET(SUFFIX, 1, ATTR)                                                                  \
    F64_ROWS_SET(SUFFIX, 2, ATTR)
F64_SET(generic, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define F64_HAVE_AVX2 1
F64_SET(avx2, __attribute__((target("avx2"))))
#endif

/* The kernel for a few rows (fewer than F64_FEW_ROWS): the packing above
 * converts each weight once per pass for all the rows, which a row or two
 * does not repay (a few pairs per expert: a check at small T), so these read
 * the floats and convert them as they go. RR rows of x, the columns [0, nc)
 * of w (row stride ldw), weight rows [k0, k0 + kb) added into y in
 * increasing k, F64_FEW_KB rows per step: the same chain. */
typedef float f32_v4 __attribute__((vector_size(16)));
#define F64_FEW_ROWS  4
#define F64_FEW_KB    8
#define F64_FEW_PANEL 128 /* columns per panel: its outputs stay in L1 */

#define F64_FEW_PASS(RR, NK)                                                                       \
    double xv[RR][NK]; /* hoisted: y may alias x as far as the compiler knows */                   \
    for (uint32_t i = 0; i < RR; i++)                                                              \
        for (uint32_t j = 0; j < NK; j++)                                                          \
            xv[i][j] = x[i * ldx + k0 + j];                                                        \
    for (uint32_t n = 0; n + 4 <= nc; n += 4) {                                                    \
        f64_v4 wv[NK];                                                                             \
        _Pragma("GCC unroll 8") for (uint32_t j = 0; j < NK; j++)                                  \
        {                                                                                          \
            f32_v4 t;                                                                              \
            memcpy(&t, w + (size_t)(k0 + j) * ldw + n, sizeof t);                                  \
            wv[j] = __builtin_convertvector(t, f64_v4);                                            \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (uint32_t i = 0; i < RR; i++)                                  \
        {                                                                                          \
            f64_v4 a = {0.0, 0.0, 0.0, 0.0};                                                       \
            if (k0) memcpy(&a, y + i * ldy + n, sizeof a);                                         \
            _Pragma("GCC unroll 8") for (uint32_t j = 0; j < NK; j++) a = a + xv[i][j] * wv[j];    \
            memcpy(y + i * ldy + n, &a, sizeof a);                                                 \
        }                                                                                          \
    }

#define F64_FEW_FN(NAME, RR, ATTR)                                                                 \
    ATTR static void NAME(const double *x, size_t ldx, uint32_t k0, uint32_t kb, const float *w,   \
                          size_t ldw, uint32_t nc, double *y, size_t ldy)                          \
    {                                                                                              \
        if (kb == F64_FEW_KB) {                                                                    \
            F64_FEW_PASS(RR, F64_FEW_KB)                                                           \
        } else {                                                                                   \
            for (uint32_t j = 0; j < kb; j++, k0++) {                                              \
                F64_FEW_PASS(RR, 1)                                                                \
            }                                                                                      \
            k0 -= kb;                                                                              \
        }                                                                                          \
        for (uint32_t i = 0; i < RR; i++) /* scalar tail columns */                                \
            for (uint32_t n = nc / 4 * 4; n < nc; n++) {                                           \
                double acc = k0 ? y[i * ldy + n] : 0.0;                                            \
                for (uint32_t j = 0; j < kb; j++)                                                  \
                    acc += x[i * ldx + k0 + j] * (double)w[(size_t)(k0 + j) * ldw + n];            \
                y[i * ldy + n] = acc;                                                              \
            }                                                                                      \
    }

typedef void (*f64_few_fn)(const double *x, size_t ldx, uint32_t k0, uint32_t kb, const float *w,
                           size_t ldw, uint32_t nc, double *y, size_t ldy);
#define F64_FEW_SET(SUFFIX, ATTR)                                                                  \
    F64_FEW_FN(few1_##SUFFIX, 1, ATTR)                                                             \
    F64_FEW_FN(few2_##SUFFIX, 2, ATTR)                                                             \
    F64_FEW_FN(few3_##SUFFIX, 3, ATTR)                                                             \
    static const f64_few_fn few_##SUFFIX[F64_FEW_ROWS - 1] = {few1_##SUFFIX, few2_##SUFFIX,        \
                                                              few3_##SUFFIX};
F64_FEW_SET(generic, )
#ifdef F64_HAVE_AVX2
F64_FEW_SET(avx2, __attribute__((target("avx2"))))
#endif

/* matvec_rows for m < F64_FEW_ROWS rows: panels of columns, F64_FEW_KB
 * weight rows per step. */
static void matvec_few_rows(const double *x, size_t ldx, uint32_t m, uint32_t K, const float *w,
                            uint32_t N, double *y, size_t ldy)
{
    const f64_few_fn *f = few_generic;
#ifdef F64_HAVE_AVX2
    if (plena_cpu_has_avx2()) f = few_avx2;
#endif
    if (!m) return;
    for (uint32_t c0 = 0; c0 < N; c0 += F64_FEW_PANEL) {
        const uint32_t nc = N - c0 < F64_FEW_PANEL ? N - c0 : F64_FEW_PANEL;
        for (uint32_t k0 = 0; k0 < K; k0 += F64_FEW_KB) {
            const uint32_t kb = K - k0 < F64_FEW_KB ? K - k0 : F64_FEW_KB;
            f[m - 1](x, ldx, k0, kb, w + c0, N, nc, y + c0, ldy);
        }
    }
}

/* Columns per packed group: KC x 64 doubles (64 KiB, in L2) read from w a
 * row segment of 256 bytes at a time -- the rows of w are a page or more
 * apart in wide layers, so reading them in 32-byte pieces block by block
 * left the weight stream to the latency of strided misses. */
#define F64_GROUP 64
#define F64_AHEAD 8 /* rows the weight prefetch runs ahead */

/* Weight rows [k0, k0 + kb) of columns [n0, n0 + gw) of w (row stride ldw;
 * gw a multiple of 4, at most F64_GROUP) as doubles, in blocks of 8 columns
 * (the last of 4 when gw % 8 == 4): block b at pk + b * 8 * kb, row after
 * row (pk[b * 8 * kb + j * width + c]). */
static void f64_pack(const float *w, size_t ldw, uint32_t k0, uint32_t kb, uint32_t n0, uint32_t gw,
                     double *pk)
{
    for (uint32_t j = 0; j < kb; j++) {
        const float *row = w + (size_t)(k0 + j) * ldw + n0;
        if (j + F64_AHEAD < kb) /* the row segment F64_AHEAD rows on: a miss per row otherwise */
            for (uint32_t c = 0; c < gw; c += 16)
                __builtin_prefetch(row + F64_AHEAD * ldw + c);
        uint32_t c0 = 0;
        for (; gw - c0 >= 8; c0 += 8)
            for (uint32_t c = 0; c < 8; c++)
                pk[(size_t)c0 * kb + j * 8 + c] = (double)row[c0 + c];
        for (uint32_t c = 0; c < gw - c0; c++)
            pk[(size_t)c0 * kb + j * 4 + c] = (double)row[c0 + c];
    }
}

/* matvec for m rows of x (stride ldx) into y (stride ldy), each output the
 * same sum in the same order as matvec (a few rows: matvec_few_rows); else
 * passes of F64_KC weight rows; in a
 * pass, groups of F64_GROUP columns packed, each 8-column block (the last
 * one of 4) run over every row block, then the last columns one at a time. */
static void matvec_rows(const double *x, size_t ldx, uint32_t m, uint32_t K, const float *w,
                        uint32_t N, double *y, size_t ldy)
{
    const f64_fn *f8 = mv2_generic, *f4 = mv1_generic;
#ifdef F64_HAVE_AVX2
    if (plena_cpu_has_avx2()) f8 = mv2_avx2, f4 = mv1_avx2;
#endif
    if (!K) {
        for (uint32_t i = 0; i < m; i++)
            for (uint32_t n = 0; n < N; n++)
                y[i * ldy + n] = 0.0;
        return;
    }
    if (m < F64_FEW_ROWS) {
        matvec_few_rows(x, ldx, m, K, w, N, y, ldy);
        return;
    }
    double pk[F64_KC * F64_GROUP]; /* 64 KiB */
    for (uint32_t k0 = 0; k0 < K; k0 += F64_KC) {
        const uint32_t kb = K - k0 < F64_KC ? K - k0 : F64_KC;
        uint32_t n = 0;
        while (N - n >= 4) {
            const uint32_t gw = N - n >= F64_GROUP ? F64_GROUP : (N - n) / 4 * 4;
            f64_pack(w, N, k0, kb, n, gw, pk);
            for (uint32_t c0 = 0; c0 < gw; c0 += 8) {
                const f64_fn *f = gw - c0 >= 8 ? f8 : f4;
                for (uint32_t i0 = 0; i0 < m; i0 += F64_RB) {
                    const uint32_t R = m - i0 < F64_RB ? m - i0 : F64_RB;
                    f[R - 1](x + i0 * ldx, ldx, k0, kb, pk + (size_t)c0 * kb, y + i0 * ldy + n + c0,
                             ldy);
                }
            }
            n += gw;
        }
        for (uint32_t i = 0; i < m; i++) /* tail columns, one at a time */
            for (uint32_t c = n; c < N; c++) {
                double acc = k0 ? y[i * ldy + c] : 0.0;
                for (uint32_t j = 0; j < kb; j++)
                    acc += x[i * ldx + k0 + j] * (double)w[(size_t)(k0 + j) * N + c];
                y[i * ldy + c] = acc;
            }
    }
}

/* The FFN gate-up nonlinearity of one element. */
static double ffn_act(const struct plena_moe_ref_in *in, enum plena_act_policy pol, double g,
                      double u)
{
    if (pol == PLENA_ACT_GPT_OSS_CLAMP_GATED) {
        double alpha = -(double)in->c.neg_alpha_routed;
        double lim = in->c.limit_pos;
        double gv = g < lim ? g : lim;
        double uv = u < -lim ? -lim : (u > lim ? lim : u);
        return (uv + 1.0) * gv * sigmoid(alpha * gv);
    }
    return silu(g) * u;
}

/* One FFN for m input rows xin[m][H] at once, out = act(xin.Wg + bg, xin.Wu +
 * bu) . Wd + bd (weights and biases of x, biases may be NULL): g, u
 * [m][width], out [m][H]; each row's figures do not depend on m. */
static void expert_ffn_rows(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                            const struct plena_moe_ref_expert *x, uint32_t width,
                            enum plena_act_policy pol, uint32_t m, const double *xin, double *g,
                            double *u, double *out)
{
    const uint32_t H = cfg->H;
    matvec_rows(xin, H, m, H, x->w_gate, width, g, width);
    matvec_rows(xin, H, m, H, x->w_up, width, u, width);
    for (uint32_t r = 0; r < m; r++)
        for (uint32_t i = 0; i < width; i++) {
            double gv = g[(size_t)r * width + i], uv = u[(size_t)r * width + i];
            if (x->b_gate) gv += x->b_gate[i];
            if (x->b_up) uv += x->b_up[i];
            u[(size_t)r * width + i] = ffn_act(in, pol, gv, uv);
        }
    matvec_rows(u, width, m, width, x->w_down, H, out, H);
    if (x->b_down)
        for (uint32_t r = 0; r < m; r++)
            for (uint32_t i = 0; i < H; i++)
                out[(size_t)r * H + i] += x->b_down[i];
}

/* Token t's MoE input: x_norm's row, or RMSNorm(h) x gamma (PRE_NORM), or h. */
static void token_input(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                        const float *x_norm, uint32_t t, double *x)
{
    const uint32_t H = cfg->H;
    const float *h = in->h + (size_t)t * H;
    for (uint32_t i = 0; i < H; i++)
        x[i] = x_norm ? x_norm[(size_t)t * H + i] : h[i];
    if (!x_norm && cfg->residual == PLENA_RESIDUAL_PRE_NORM) {
        double ms = 0.0;
        for (uint32_t i = 0; i < H; i++)
            ms += x[i] * x[i];
        ms /= (double)H;
        double r = 1.0 / sqrt(ms + (double)in->c.eps);
        for (uint32_t i = 0; i < H; i++)
            x[i] = x[i] * r * (double)in->gamma[i];
    }
}

/* The router logits of input x (and the router bias). */
static void token_logits(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                         uint32_t t, const double *x, double *lg)
{
    const uint32_t H = cfg->H, E = cfg->E;
    if (in->logits) { /* preloaded: the logits are the input */
        for (uint32_t e = 0; e < E; e++)
            lg[e] = in->logits[(size_t)t * E + e];
        return;
    }
    if (cfg->router_form == PLENA_ROUTER_GEMM) {
        matvec(x, H, in->router_w, E, lg);
    } else {
        for (uint32_t e = 0; e < E; e++) {
            double a = 0.0;
            for (uint32_t i = 0; i < H; i++)
                a += x[i] * in->router_w[(size_t)e * H + i];
            lg[e] = a;
        }
    }
    if (cfg->router_bias)
        for (uint32_t e = 0; e < E; e++)
            lg[e] += in->router_b[e];
}

/* The router of cfg, or for a layer without a router description V_TOPK's
 * softmax over the selected. */
static void layer_router(const struct plena_moe_ref_cfg *cfg, struct plena_router *r)
{
    *r = cfg->router;
    if (!plena_router_is_set(r)) {
        plena_router_default(r);
        r->score = PLENA_SCORE_SOFTMAX_SELECTED;
        r->norm = PLENA_NORM_NONE;
    }
}

int plena_moe_route_agreement_f64(const struct plena_moe_ref_cfg *cfg,
                                  const struct plena_moe_ref_in *in, const uint32_t *ids,
                                  uint32_t *near_ties, uint32_t *different, struct plena_err *err)
{
    *near_ties = *different = 0;
    if (cfg->routing != PLENA_ROUTING_DEVICE || !cfg->E) return 0;
    struct plena_router router;
    layer_router(cfg, &router);
    double *x = plena_calloc(cfg->H, sizeof *x), *lg = plena_calloc(cfg->E, sizeof *lg);
    double *sbias = plena_calloc(cfg->E, sizeof *sbias);
    int rc = 0;
    if (!x || !lg || !sbias) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
        goto done;
    }
    if (in->router_sel_bias)
        for (uint32_t e = 0; e < cfg->E; e++)
            sbias[e] = in->router_sel_bias[e];
    for (uint32_t t = 0; t < cfg->T; t++) {
        token_input(cfg, in, NULL, t, x);
        token_logits(cfg, in, t, x, lg);
        const int a =
            plena_router_agree_f64(&router, cfg->E, cfg->k, lg, sbias, ids + (size_t)t * cfg->k,
                                   PLENA_ROUTE_NEAR_TIE_TOL, err);
        if (a < 0) {
            rc = err ? err->code : PLENA_E_INTERNAL;
            goto done;
        }
        *near_ties += a == PLENA_ROUTE_NEAR_TIE;
        *different += a == PLENA_ROUTE_DIFFERENT;
    }
done:
    plena_free(x);
    plena_free(lg);
    plena_free(sbias);
    return rc;
}

int plena_moe_reference_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                            const uint32_t *ids, double *out, uint32_t *ids_out,
                            struct plena_err *err)
{
    return plena_moe_reference_f64_x(cfg, in, NULL, ids, out, ids_out, err);
}

int plena_moe_rmsnorm_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                          double *x64)
{
    const uint32_t H = cfg->H;
    for (uint32_t t = 0; t < cfg->T; t++) {
        const float *h = in->h + (size_t)t * H;
        double *x = x64 + (size_t)t * H;
        double ms = 0.0;
        for (uint32_t i = 0; i < H; i++)
            ms += (double)h[i] * (double)h[i];
        ms /= (double)H;
        double r = 1.0 / sqrt(ms + (double)in->c.eps);
        for (uint32_t i = 0; i < H; i++)
            x[i] = (double)h[i] * r * (double)in->gamma[i];
    }
    return 0;
}

/* Rows of one expert (or of the shared expert) evaluated together. */
#define F64_BATCH 96

/* One part's buffers of the float64 FFNs, for `rows` rows (at most
 * F64_BATCH): g and u always, the routed experts' input and output rows
 * (o, xin) only when asked for (the shared expert reads and writes its
 * caller's arrays). Grown to what a call needs, not F64_BATCH rows of every
 * one up front: about 14 MB per thread for deepseek-v3's shape. */
struct f64_bufs {
    double *g, *u, *o, *xin;
    size_t rows, rows_io;
};

static int f64_grow(double **p, size_t n)
{
    double *q = plena_realloc(*p, (n + 1) * sizeof *q);
    if (!q) return 0;
    *p = q;
    return 1;
}

static int f64_bufs_get(struct f64_bufs *b, uint32_t H, uint32_t width, size_t rows, int io)
{
    if (b->rows < rows) {
        if (!f64_grow(&b->g, rows * width) || !f64_grow(&b->u, rows * width)) return 0;
        b->rows = rows;
    }
    if (io && b->rows_io < rows) {
        if (!f64_grow(&b->o, rows * H) || !f64_grow(&b->xin, rows * H)) return 0;
        b->rows_io = rows;
    }
    return 1;
}

static void f64_bufs_free(struct f64_bufs *b, uint32_t parts)
{
    for (uint32_t q = 0; b && q < parts; q++)
        plena_free(b[q].g), plena_free(b[q].u), plena_free(b[q].o), plena_free(b[q].xin);
    plena_free(b);
}

/* The routed pairs of the float64 layer: pair c of the list (input c / np,
 * token c / k of the stacked inputs xs), grouped by expert (order, start);
 * done[e]: expert e's pairs are computed. Expert by expert, so a streaming
 * weight provider holds one expert per thread at a time; the sums over a
 * token's pairs happen afterwards in pair order, so the figures equal those
 * of a pair-order loop, whatever the number of threads or inputs. */
struct pairs_f64_job {
    const struct plena_moe_ref_cfg *cfg;
    const struct plena_moe_ref_in *in;
    const double *xs, *wsel;
    size_t *order, *start;
    double *po;
    struct f64_bufs *bufs; /* [parts] */
    uint8_t *done;         /* [E] */
};

/* Expert e's pairs with its weights x on part `part`'s buffers. */
static int pairs_f64_compute(struct pairs_f64_job *j, uint32_t e, uint32_t part,
                             const struct plena_moe_ref_expert *x, struct plena_err *err)
{
    const struct plena_moe_ref_cfg *cfg = j->cfg;
    const uint32_t H = cfg->H, k = cfg->k;
    const size_t *order = j->order, *start = j->start;
    struct f64_bufs *b = &j->bufs[part];
    const size_t pairs = start[e + 1] - start[e];
    if (!f64_bufs_get(b, H, cfg->I, pairs < F64_BATCH ? pairs : F64_BATCH, 1))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
    for (size_t i0 = start[e]; i0 < start[e + 1]; i0 += F64_BATCH) {
        const uint32_t m =
            (uint32_t)(start[e + 1] - i0 < F64_BATCH ? start[e + 1] - i0 : F64_BATCH);
        for (uint32_t r = 0; r < m; r++) {
            const size_t c = order[i0 + r];
            const double *xt = j->xs + (c / k) * H;
            double scale_in = cfg->placement == PLENA_ROUTE_INPUT ? j->wsel[c] : 1.0;
            for (uint32_t q = 0; q < H; q++)
                b->xin[(size_t)r * H + q] = xt[q] * scale_in;
        }
        expert_ffn_rows(cfg, j->in, x, cfg->I, cfg->activation, m, b->xin, b->g, b->u, b->o);
        for (uint32_t r = 0; r < m; r++) {
            const size_t c = order[i0 + r];
            double scale_out = cfg->placement == PLENA_ROUTE_OUTPUT ? j->wsel[c] : 1.0;
            for (uint32_t q = 0; q < H; q++)
                j->po[c * H + q] = scale_out * b->o[(size_t)r * H + q];
        }
    }
    j->done[e] = 1;
    return 0;
}

/* plena_ref_experts_run's job: the experts not yet done, weights from the
 * provider or the arrays. */
static int pairs_f64_expert(void *ctx, uint32_t e, uint32_t part, struct plena_err *err)
{
    struct pairs_f64_job *j = ctx;
    if (j->done[e]) return 0;
    struct plena_moe_ref_expert x;
    int rc = plena_moe_ref_expert_get(j->cfg, j->in, e, part, j->order[j->start[e]], &x, err);
    return rc ? rc : pairs_f64_compute(j, e, part, &x, err);
}

/* The shared expert's float64 output of every row of xs[n][H] into so[n][H],
 * F64_BATCH rows per piece of the pool's job. */
struct shared_f64_job {
    const struct plena_moe_ref_cfg *cfg;
    const struct plena_moe_ref_in *in;
    const double *xs;
    uint32_t n;
    double *so;
    struct f64_bufs *bufs;
};

static int shared_f64_rows(void *ctx, uint32_t grp, uint32_t part, struct plena_err *err)
{
    struct shared_f64_job *j = ctx;
    const uint32_t H = j->cfg->H, r0 = grp * F64_BATCH;
    const uint32_t m = j->n - r0 < F64_BATCH ? j->n - r0 : F64_BATCH;
    struct f64_bufs *b = &j->bufs[part];
    if (!f64_bufs_get(b, H, j->cfg->Is, m, 0))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
    const struct plena_moe_ref_expert x = {j->in->ws_gate, j->in->ws_up, j->in->ws_down,
                                           NULL,           NULL,         NULL};
    expert_ffn_rows(j->cfg, j->in, &x, j->cfg->Is, PLENA_ACT_STANDARD_SWIGLU, m,
                    j->xs + (size_t)r0 * H, b->g, b->u, j->so + (size_t)r0 * H);
    return 0;
}

static int shared_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                      const double *xs, uint32_t n, double *so, struct plena_err *err)
{
    const uint32_t parts = plena_pool_size(in->pool);
    struct f64_bufs *bufs = plena_calloc(parts, sizeof *bufs);
    if (!bufs) return PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
    struct shared_f64_job j = {cfg, in, xs, n, so, bufs};
    int rc = plena_ref_experts_run(in->pool, NULL, (n + F64_BATCH - 1) / F64_BATCH, shared_f64_rows,
                                   &j, in->stop, err);
    f64_bufs_free(bufs, parts);
    return rc;
}

/* Token t's routing: the model's router on its float64 logits (the given
 * ids' weights when ids is non-NULL), or the fixed routing. */
static int route_token_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                           const struct plena_router *router, const uint32_t *ids, uint32_t t,
                           const double *x, const double *sbias, double *lg, uint32_t *sel,
                           double *w, struct plena_err *err)
{
    const uint32_t E = cfg->E, k = cfg->k;
    if (cfg->routing != PLENA_ROUTING_DEVICE) {
        for (uint32_t j = 0; j < k; j++) {
            sel[j] = in->fixed_ids[(size_t)t * k + j];
            w[j] = in->fixed_w[(size_t)t * k + j];
        }
        return 0;
    }
    token_logits(cfg, in, t, x, lg);
    /* the router as the model defines it (model/router.c) */
    if (ids) memcpy(sel, ids + (size_t)t * k, k * sizeof *sel);
    return ids ? plena_router_weights_f64(router, E, k, lg, sbias, sel, w, err)
               : plena_router_select_f64(router, E, k, lg, sbias, sel, w, err);
}

/* The float64 layer for nin inputs at once (x_norm[q], NULL: from h), one
 * pass over the weights, in three steps: begin (inputs and routing, no
 * weight read), the routed experts (plena_moe_f64_pair_expert as a provider
 * hands them out, the rest in end), end (shared expert and the per-token
 * sums). out[q] and ids_out (input 0's routing) are the figures of nin
 * separate calls. */
struct plena_moe_f64_pair {
    struct plena_moe_ref_cfg cfg;
    struct plena_moe_ref_in in;
    uint32_t nin, k, parts;
    int routed, shared, want;
    size_t np, th;
    double *xs, *wsel, *po, *so;
    uint32_t *sel;
    struct pairs_f64_job pj;
};

void plena_moe_f64_pair_free(struct plena_moe_f64_pair *f)
{
    if (!f) return;
    plena_free(f->xs), plena_free(f->wsel), plena_free(f->po), plena_free(f->so);
    plena_free(f->sel), plena_free(f->pj.order), plena_free(f->pj.start), plena_free(f->pj.done);
    f64_bufs_free(f->pj.bufs, f->parts);
    plena_free(f);
}

static int f64_begin(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                     uint32_t nin, const float *const *x_norm, const uint32_t *ids, int want,
                     uint32_t *ids_out, struct plena_moe_f64_pair **out, struct plena_err *err)
{
    *out = NULL;
    struct plena_moe_f64_pair *f = plena_calloc(1, sizeof *f);
    if (!f) return PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
    const uint32_t T = cfg->T, H = cfg->H, E = cfg->E;
    f->cfg = *cfg;
    f->in = *in;
    f->nin = nin;
    f->want = want;
    f->routed = cfg->routing != PLENA_ROUTING_NONE && cfg->E > 0;
    f->shared = cfg->Is > 0;
    f->k = f->routed ? cfg->k : 0;
    f->parts = plena_pool_size(in->pool);
    const uint32_t k = f->k;
    const size_t np = f->np = (size_t)T * k, th = f->th = (size_t)T * H;
    f->xs = plena_calloc(nin * th, sizeof(double));
    double *lg = plena_calloc(E + 1, sizeof(double));
    double *sbias = plena_calloc(E + 1, sizeof(double));
    f->sel = plena_malloc((nin * np + 1) * sizeof *f->sel);
    f->wsel = plena_malloc((nin * np + 1) * sizeof *f->wsel);
    const int rw = want && f->routed;
    if (rw) {
        f->po = plena_malloc((nin * np * H + 1) * sizeof *f->po);
        f->pj.order = plena_malloc((nin * np + 1) * sizeof *f->pj.order);
        f->pj.start = plena_malloc(((size_t)E + 1) * sizeof *f->pj.start);
        f->pj.bufs = plena_calloc(f->parts, sizeof *f->pj.bufs);
        f->pj.done = plena_calloc(E + 1, 1);
    }
    if (want && f->shared) f->so = plena_malloc((nin * th + 1) * sizeof *f->so);
    int rc = 0;
    struct plena_router router;
    layer_router(cfg, &router);
    if (sbias && in->router_sel_bias)
        for (uint32_t e = 0; e < E; e++)
            sbias[e] = in->router_sel_bias[e];
    if (!f->xs || !lg || !sbias || !f->sel || !f->wsel ||
        (rw && (!f->po || !f->pj.order || !f->pj.start || !f->pj.bufs || !f->pj.done)) ||
        (want && f->shared && !f->so)) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
        goto done;
    }
    /* every token's input and routing, input by input */
    for (uint32_t q = 0; q < nin; q++)
        for (uint32_t t = 0; t < T; t++) {
            double *x = f->xs + q * th + (size_t)t * H;
            token_input(cfg, in, x_norm[q], t, x);
            const size_t c = q * np + (size_t)t * k;
            if (f->routed && (rc = route_token_f64(cfg, in, &router, ids, t, x, sbias, lg,
                                                   f->sel + c, f->wsel + c, err)))
                goto done;
        }
    if (ids_out && f->routed) memcpy(ids_out, f->sel, np * sizeof *f->sel);
    if (rw) {
        size_t bad = plena_moe_ref_pairs_by_expert(f->sel, nin * np, E, f->pj.order, f->pj.start);
        if (bad < nin * np) {
            rc = PLENA_FAIL(err, PLENA_E_INPUT, "ref_f64", "expert %u has no weights", f->sel[bad]);
            goto done;
        }
        f->pj.cfg = &f->cfg;
        f->pj.in = &f->in;
        f->pj.xs = f->xs;
        f->pj.wsel = f->wsel;
        f->pj.po = f->po;
    }
done:
    plena_free(lg), plena_free(sbias);
    if (rc)
        plena_moe_f64_pair_free(f);
    else
        *out = f;
    return rc;
}

int plena_moe_f64_pair_expert(struct plena_moe_f64_pair *f, uint32_t e, uint32_t slot,
                              const struct plena_moe_ref_expert *x, struct plena_err *err)
{
    if (!f->want || !f->routed || e >= f->cfg.E || f->pj.done[e] ||
        f->pj.start[e] == f->pj.start[e + 1])
        return 0;
    if (slot >= f->parts)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "ref_f64", "slot %u of %u", slot, f->parts);
    return pairs_f64_compute(&f->pj, e, slot, x, err);
}

static int f64_end(struct plena_moe_f64_pair *f, double *const *out, struct plena_err *err)
{
    const struct plena_moe_ref_cfg *cfg = &f->cfg;
    const struct plena_moe_ref_in *in = &f->in;
    const uint32_t T = cfg->T, H = cfg->H, k = f->k;
    const size_t np = f->np, th = f->th;
    int rc = 0;
    if (!f->want) return 0; /* routing only: no expert weight is read */
    if (f->routed && (rc = plena_ref_experts_run(in->pool, f->pj.start, cfg->E, pairs_f64_expert,
                                                 &f->pj, in->stop, err)))
        return rc;
    if (f->shared && (rc = shared_f64(cfg, in, f->xs, f->nin * T, f->so, err))) return rc;
    for (uint32_t q = 0; q < f->nin; q++)
        for (uint32_t t = 0; t < T; t++) {
            const float *h = in->h + (size_t)t * H;
            const double *x = f->xs + q * th + (size_t)t * H;
            double *y = out[q] + (size_t)t * H;
            for (uint32_t i = 0; i < H; i++)
                y[i] = 0.0;
            for (uint32_t j = 0; j < k; j++) {
                const double *pj = f->po + (q * np + (size_t)t * k + j) * H;
                for (uint32_t i = 0; i < H; i++)
                    y[i] += pj[i];
            }
            if (f->shared) {
                const double *o = f->so + q * th + (size_t)t * H;
                double gate = 1.0;
                if (cfg->shared_gate == PLENA_SHARED_GATE_SIGMOID) {
                    double z = 0.0;
                    for (uint32_t i = 0; i < H; i++)
                        z += x[i] * in->w_sg[i];
                    gate = sigmoid(z);
                }
                for (uint32_t i = 0; i < H; i++)
                    y[i] += gate * o[i];
            }
            if (cfg->residual == PLENA_RESIDUAL_PRE_NORM)
                for (uint32_t i = 0; i < H; i++)
                    y[i] += h[i];
        }
    return 0;
}

static int reference_f64_n(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                           uint32_t nin, const float *const *x_norm, const uint32_t *ids,
                           double *const *out, uint32_t *ids_out, struct plena_err *err)
{
    struct plena_moe_f64_pair *f;
    int rc = f64_begin(cfg, in, nin, x_norm, ids, out[0] != NULL, ids_out, &f, err);
    if (!rc) rc = f64_end(f, out, err);
    plena_moe_f64_pair_free(f);
    return rc;
}

int plena_moe_f64_pair_begin(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                             const float *x_norm, const uint32_t *ids,
                             struct plena_moe_f64_pair **f, struct plena_err *err)
{
    const float *xn[2] = {NULL, x_norm};
    return f64_begin(cfg, in, 2, xn, ids, 1, NULL, f, err);
}

int plena_moe_f64_pair_end(struct plena_moe_f64_pair *f, double *out, double *out_x,
                           struct plena_err *err)
{
    double *o[2] = {out, out_x};
    return f64_end(f, o, err);
}

int plena_moe_reference_f64_x(const struct plena_moe_ref_cfg *cfg,
                              const struct plena_moe_ref_in *in, const float *x_norm,
                              const uint32_t *ids, double *out, uint32_t *ids_out,
                              struct plena_err *err)
{
    const float *xn[1] = {x_norm};
    double *o[1] = {out};
    return reference_f64_n(cfg, in, 1, xn, ids, o, ids_out, err);
}

int plena_moe_reference_f64_pair(const struct plena_moe_ref_cfg *cfg,
                                 const struct plena_moe_ref_in *in, const float *x_norm,
                                 const uint32_t *ids, double *out, double *out_x,
                                 struct plena_err *err)
{
    const float *xn[2] = {NULL, x_norm};
    double *o[2] = {out, out_x};
    return reference_f64_n(cfg, in, 2, xn, ids, o, NULL, err);
}

/* ||(a - a_off) - (b - b_off)|| / ||b - b_off|| over n elements; an offset
 * pointer may be NULL (zero). -1 when the denominator is 0. Every relative-RMS
 * figure of the float64 checks is an instance of this one formula. */
static double rel_err(size_t n, const float *a, const float *a_off, const double *b,
                      const float *b_off)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double ref = b[i] - (b_off ? (double)b_off[i] : 0.0);
        double d = ((double)a[i] - (a_off ? (double)a_off[i] : 0.0)) - ref;
        num += d * d;
        den += ref * ref;
    }
    return den == 0.0 ? -1.0 : sqrt(num / den);
}

static const float *residual_of(const struct plena_moe_ref_cfg *cfg,
                                const struct plena_moe_ref_in *in)
{
    return cfg->residual == PLENA_RESIDUAL_PRE_NORM ? in->h : NULL;
}

double plena_moe_rel_rms(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                         const float *out, const double *out64)
{
    const float *r = residual_of(cfg, in);
    return rel_err((size_t)cfg->T * cfg->H, out, r, out64, r);
}

double plena_moe_rel_rms_moe(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                             const float *moe_out, const double *out64)
{
    return rel_err((size_t)cfg->T * cfg->H, moe_out, NULL, out64, residual_of(cfg, in));
}

double plena_moe_rel_rms_full(const struct plena_moe_ref_cfg *cfg, const float *out,
                              const double *out64)
{
    return rel_err((size_t)cfg->T * cfg->H, out, NULL, out64, NULL);
}

double plena_moe_rel_rms_norm(const struct plena_moe_ref_cfg *cfg, const float *x_norm,
                              const double *x64)
{
    return rel_err((size_t)cfg->T * cfg->H, x_norm, NULL, x64, NULL);
}
