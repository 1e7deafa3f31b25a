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

/* matvec for m rows of x (stride ldx) into y (stride ldy), each output the
 * same sum in the same order as matvec; the rows share each weight row load. */
static void matvec_rows_generic(const double *x, size_t ldx, uint32_t m, uint32_t K, const float *w,
                                uint32_t N, double *y, size_t ldy, uint32_t n0)
{
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t n = n0; n < N; n++)
            y[i * ldy + n] = 0.0;
    for (uint32_t kk = 0; kk < K; kk++) {
        const float *row = w + (size_t)kk * N;
        for (uint32_t i = 0; i < m; i++) {
            double xv = x[i * ldx + kk];
            double *yi = y + i * ldy;
            for (uint32_t n = n0; n < N; n++)
                yi[n] += xv * (double)row[n];
        }
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* Columns [0, N & ~7) of matvec_rows for exactly four rows: per block of 8
 * columns, 4 x 2 accumulators over all K (lanes are different outputs, each
 * 0.0 then += x * w in increasing k: matvec's sum). Returns the columns done. */
__attribute__((target("avx2"))) static uint32_t matvec4_avx2(const double *x, size_t ldx,
                                                             uint32_t K, const float *w, uint32_t N,
                                                             double *y, size_t ldy)
{
    uint32_t n = 0;
    for (; n + 8 <= N; n += 8) {
        __m256d a[4][2];
        for (int i = 0; i < 4; i++)
            a[i][0] = a[i][1] = _mm256_setzero_pd();
        for (uint32_t kk = 0; kk < K; kk++) {
            const float *wr = w + (size_t)kk * N + n;
            const __m256d w0 = _mm256_cvtps_pd(_mm_loadu_ps(wr));
            const __m256d w1 = _mm256_cvtps_pd(_mm_loadu_ps(wr + 4));
            for (int i = 0; i < 4; i++) {
                const __m256d xv = _mm256_set1_pd(x[i * ldx + kk]);
                a[i][0] = _mm256_add_pd(a[i][0], _mm256_mul_pd(xv, w0));
                a[i][1] = _mm256_add_pd(a[i][1], _mm256_mul_pd(xv, w1));
            }
        }
        for (int i = 0; i < 4; i++) {
            _mm256_storeu_pd(y + i * ldy + n, a[i][0]);
            _mm256_storeu_pd(y + i * ldy + n + 4, a[i][1]);
        }
    }
    return n;
}
#define F64_HAVE_AVX2 1
#endif

static void matvec_rows(const double *x, size_t ldx, uint32_t m, uint32_t K, const float *w,
                        uint32_t N, double *y, size_t ldy)
{
    uint32_t n0 = 0;
#ifdef F64_HAVE_AVX2
    if (m == 4 && plena_cpu_has_avx2()) n0 = matvec4_avx2(x, ldx, K, w, N, y, ldy);
#endif
    if (n0 < N) matvec_rows_generic(x, ldx, m, K, w, N, y, ldy, n0);
}

/* The FFN gate-up nonlinearity of one element (expert_ffn's). */
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

/* One expert FFN on input xin: out = act(xin.Wg + bg, xin.Wu + bu) . Wd + bd */
static void expert_ffn(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                       const float *wg, const float *wu, const float *wd, const float *bg,
                       const float *bu, const float *bd, uint32_t width, enum plena_act_policy pol,
                       const double *xin, double *g, double *u, double *out)
{
    matvec(xin, cfg->H, wg, width, g);
    matvec(xin, cfg->H, wu, width, u);
    for (uint32_t i = 0; i < width; i++) {
        if (bg) g[i] += bg[i];
        if (bu) u[i] += bu[i];
        u[i] = ffn_act(in, pol, g[i], u[i]);
    }
    matvec(u, width, wd, cfg->H, out);
    if (bd)
        for (uint32_t i = 0; i < cfg->H; i++)
            out[i] += bd[i];
}

/* expert_ffn for m <= F64_ROWS input rows xin[m][H] at once: g, u [m][width],
 * out [m][H]; every figure the one-row function's. */
#define F64_ROWS 4
static void expert_ffn_rows(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                            const struct plena_moe_ref_expert *x, uint32_t m, const double *xin,
                            double *g, double *u, double *out)
{
    const uint32_t H = cfg->H, width = cfg->I;
    matvec_rows(xin, H, m, H, x->w_gate, width, g, width);
    matvec_rows(xin, H, m, H, x->w_up, width, u, width);
    for (uint32_t r = 0; r < m; r++)
        for (uint32_t i = 0; i < width; i++) {
            double gv = g[(size_t)r * width + i], uv = u[(size_t)r * width + i];
            if (x->b_gate) gv += x->b_gate[i];
            if (x->b_up) uv += x->b_up[i];
            u[(size_t)r * width + i] = ffn_act(in, cfg->activation, gv, uv);
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

/* The routed pairs' float64 outputs, scale_out x FFN(scale_in x x), into
 * po[p][H]: expert by expert, so a streaming weight provider holds one expert
 * at a time; the sums over a token's pairs happen afterwards in pair order,
 * so the figures equal those of a pair-order loop. */
static int routed_pairs_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                            const double *xs, const uint32_t *sel, const double *wsel, double *po,
                            struct plena_err *err)
{
    const uint32_t H = cfg->H, E = cfg->E, k = cfg->k;
    const size_t np = (size_t)cfg->T * k;
    size_t *order = plena_malloc((np + 1) * sizeof *order);
    size_t *start = plena_malloc(((size_t)E + 1) * sizeof *start);
    const size_t R = F64_ROWS, I = cfg->I;
    double *g = plena_malloc((R * I + 1) * sizeof *g), *u = plena_malloc((R * I + 1) * sizeof *u);
    double *o = plena_malloc(R * H * sizeof *o), *xin = plena_malloc(R * H * sizeof *xin);
    int rc = 0;
    if (!order || !start || !g || !u || !o || !xin) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
        goto done;
    }
    size_t bad = plena_moe_ref_pairs_by_expert(sel, np, E, order, start);
    if (bad < np) {
        rc = PLENA_FAIL(err, PLENA_E_INPUT, "ref_f64", "expert %u has no weights", sel[bad]);
        goto done;
    }
    for (uint32_t e = 0; e < E && !rc; e++) {
        if (start[e] == start[e + 1]) continue;
        struct plena_moe_ref_expert x;
        if ((rc = plena_moe_ref_expert_get(cfg, in, e, order[start[e]], &x, err))) break;
        for (size_t i0 = start[e]; i0 < start[e + 1]; i0 += R) {
            const uint32_t m = (uint32_t)(start[e + 1] - i0 < R ? start[e + 1] - i0 : R);
            for (uint32_t r = 0; r < m; r++) {
                const size_t p = order[i0 + r];
                const double *xt = xs + (p / k) * H;
                double scale_in = cfg->placement == PLENA_ROUTE_INPUT ? wsel[p] : 1.0;
                for (uint32_t c = 0; c < H; c++)
                    xin[(size_t)r * H + c] = xt[c] * scale_in;
            }
            expert_ffn_rows(cfg, in, &x, m, xin, g, u, o);
            for (uint32_t r = 0; r < m; r++) {
                const size_t p = order[i0 + r];
                double scale_out = cfg->placement == PLENA_ROUTE_OUTPUT ? wsel[p] : 1.0;
                for (uint32_t c = 0; c < H; c++)
                    po[p * H + c] = scale_out * o[(size_t)r * H + c];
            }
        }
    }
done:
    plena_free(order);
    plena_free(start);
    plena_free(g), plena_free(u), plena_free(o), plena_free(xin);
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

int plena_moe_reference_f64_x(const struct plena_moe_ref_cfg *cfg,
                              const struct plena_moe_ref_in *in, const float *x_norm,
                              const uint32_t *ids, double *out, uint32_t *ids_out,
                              struct plena_err *err)
{
    const uint32_t T = cfg->T, H = cfg->H;
    int routed = cfg->routing != PLENA_ROUTING_NONE && cfg->E > 0;
    int shared = cfg->Is > 0;
    const uint32_t k = routed ? cfg->k : 0;
    const size_t np = (size_t)T * k;
    uint32_t wmax = cfg->I > cfg->Is ? cfg->I : cfg->Is;
    if (cfg->E > wmax) wmax = cfg->E;
    double *xs = plena_calloc((size_t)T * H, sizeof(double));
    double *g = plena_calloc(wmax + 1, sizeof(double));
    double *u = plena_calloc(wmax + 1, sizeof(double));
    double *o = plena_calloc(H, sizeof(double));
    double *lg = plena_calloc(cfg->E + 1, sizeof(double));
    double *sbias = plena_calloc(cfg->E + 1, sizeof(double));
    uint32_t *sel = plena_malloc((np + 1) * sizeof *sel);
    double *wsel = plena_malloc((np + 1) * sizeof *wsel);
    double *po = out && routed ? plena_malloc((np * H + 1) * sizeof *po) : NULL;
    int rc = 0;
    struct plena_router router;
    layer_router(cfg, &router);
    if (sbias && in->router_sel_bias)
        for (uint32_t e = 0; e < cfg->E; e++)
            sbias[e] = in->router_sel_bias[e];
    if (!xs || !g || !u || !o || !lg || !sbias || !sel || !wsel || (out && routed && !po)) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref_f64", "out of memory");
        goto done;
    }
    /* every token's input and routing */
    for (uint32_t t = 0; t < T; t++) {
        double *x = xs + (size_t)t * H;
        token_input(cfg, in, x_norm, t, x);
        if (routed && (rc = route_token_f64(cfg, in, &router, ids, t, x, sbias, lg,
                                            sel + (size_t)t * k, wsel + (size_t)t * k, err)))
            goto done;
    }
    if (ids_out && routed) memcpy(ids_out, sel, np * sizeof *sel);
    if (!out) goto done; /* routing only: no expert weight is read */
    if (routed && (rc = routed_pairs_f64(cfg, in, xs, sel, wsel, po, err))) goto done;
    for (uint32_t t = 0; t < T; t++) {
        const float *h = in->h + (size_t)t * H;
        const double *x = xs + (size_t)t * H;
        double *y = out + (size_t)t * H;
        for (uint32_t i = 0; i < H; i++)
            y[i] = 0.0;
        for (uint32_t j = 0; j < k; j++) {
            const double *pj = po + ((size_t)t * k + j) * H;
            for (uint32_t i = 0; i < H; i++)
                y[i] += pj[i];
        }
        if (shared) {
            expert_ffn(cfg, in, in->ws_gate, in->ws_up, in->ws_down, NULL, NULL, NULL, cfg->Is,
                       PLENA_ACT_STANDARD_SWIGLU, x, g, u, o);
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
done:
    plena_free(xs), plena_free(g), plena_free(u), plena_free(o), plena_free(lg);
    plena_free(sbias), plena_free(sel), plena_free(wsel), plena_free(po);
    return rc;
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
