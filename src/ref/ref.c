/* Bit-exact MoE reference (docs/lowering.md "Checking a build"). Every
 * function below mirrors one emitter (docs/lowering.md "Layer steps") and
 * names its rounding points; the comments quote the instruction whose
 * semantics the line reproduces. Tensors are logical row-major arrays; padded
 * widths (I_p, Is_p, E_p) are computed explicitly with zero weights, exactly
 * as the machine sees them. */
#include "ref/ref.h"
#include "ref/experts.h"
#include "ref/tile.h"

#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "isa/isa.h"
#include "num/num.h"

static float bf(float x)
{
    return plena_num_round_bf16(x);
}

static uint32_t roundup(uint32_t v, uint32_t m)
{
    return (v + m - 1) / m * m;
}

/* clamp of V_EXP_V / S_EXP_FP: NaN stays NaN, else min(max(a, -88), 88). */
static float clamp88(float a)
{
    if (a != a) return a;
    if (a < -88.0f) return -88.0f;
    if (a > 88.0f) return 88.0f;
    return a;
}

/* V_MIN_VF / V_MAX_VF lane rules (docs/machine.md "Vector unit"). */
static float min_vf(float a, float f)
{
    if (a != a || f != f) return NAN;
    return (a > f) ? f : a;
}

static float max_vf(float a, float f)
{
    if (a != a || f != f) return NAN;
    return (a < f) ? f : a;
}

/* V_RED_SUM row sum: s = v0, then s = fl32(s + v_i) in lane order. */
static float row_sum(const float *q, uint32_t n)
{
    float s = q[0];
    for (uint32_t i = 1; i < n; i++)
        s = s + q[i];
    return s;
}

/* Rows of a projection evaluated together: the chunk accumulators of this
 * many rows share each K tile's weights while they are in cache. */
#define PROJ_ROWS 64

/* Scratch of the projections: the chunk accumulators of PROJ_ROWS rows,
 * [PROJ_ROWS][np]. */
static size_t proj_scratch_floats(uint32_t np)
{
    return (size_t)PROJ_ROWS * np;
}

/* plena_emit_projection, KSPLIT_BF16: chunks of C tiles; per chunk an
 * f32 accumulator over its M_MMs (acc = 0, then acc = fl32(acc + s)), bf16 at
 * M_MM_WO; Y = bf16(P_0), then Y = bf16(Y + bf16(P_q)) (V_ADD_VV block add).
 * Each M_MM contribution s is one tile's chain, added into acc by
 * plena_ref_tile_rows; rows are independent, taken PROJ_ROWS at a time
 * (sharing each weight load within a kernel's row block). */
static void proj_ksplit(const float *x, uint32_t rows, uint32_t kp, const float *w, uint32_t np,
                        uint32_t mlen, uint32_t chunk, float *y, float *acc)
{
    const uint32_t ktiles = kp / mlen;
    for (uint32_t g0 = 0; g0 < rows; g0 += PROJ_ROWS) {
        const uint32_t G = rows - g0 < PROJ_ROWS ? rows - g0 : PROJ_ROWS;
        const size_t m = (size_t)G * np;
        const float *xg = x + (size_t)g0 * kp;
        float *yg = y + (size_t)g0 * np;
        for (uint32_t q = 0; q * chunk < ktiles; q++) {
            memset(acc, 0, m * sizeof *acc);
            for (uint32_t kt = q * chunk; kt < ktiles && kt < (q + 1) * chunk; kt++)
                plena_ref_tile_rows(xg, kp, G, w, np, kt * mlen, mlen, acc, np, 1);
            for (size_t i = 0; i < m; i++) {
                float p = bf(acc[i]);
                yg[i] = (q == 0) ? p : bf(yg[i] + p);
            }
        }
    }
}

/* STREAM_F32 (router GEMM): one f32 accumulator over all K tiles in
 * increasing tile order, one bf16 at M_MM_WO. */
static void proj_stream(const float *x, uint32_t rows, uint32_t kp, const float *w, uint32_t np,
                        uint32_t mlen, float *y, float *acc)
{
    const uint32_t ktiles = kp / mlen;
    for (uint32_t g0 = 0; g0 < rows; g0 += PROJ_ROWS) {
        const uint32_t G = rows - g0 < PROJ_ROWS ? rows - g0 : PROJ_ROWS;
        const size_t m = (size_t)G * np;
        const float *xg = x + (size_t)g0 * kp;
        memset(acc, 0, m * sizeof *acc);
        for (uint32_t kt = 0; kt < ktiles; kt++)
            plena_ref_tile_rows(xg, kp, G, w, np, kt * mlen, mlen, acc, np, 1);
        for (size_t i = 0; i < m; i++)
            y[(size_t)g0 * np + i] = bf(acc[i]);
    }
}

/* plena_emit_rmsnorm_rows + plena_emit_mul_rows_by_row, one row. */
static void rmsnorm_row(float *x, const float *gamma, uint32_t H, uint32_t vlen,
                        const struct plena_moe_ref_consts *c, float *q)
{
    float fs = bf(0.0f + 0.0f); /* S_ADD_FP f_s, f0, f0 */
    for (uint32_t b = 0; b < H / vlen; b++) {
        for (uint32_t i = 0; i < vlen; i++)
            q[i] = bf(x[b * vlen + i] * x[b * vlen + i]);
        fs = bf(fs + row_sum(q, vlen)); /* V_RED_SUM f_s, q */
    }
    float fm = bf(fs * c->inv_h); /* S_MUL_FP */
    fm = bf(fm + c->eps);         /* S_ADD_FP */
    fm = bf(sqrtf(fm));           /* S_SQRT_FP */
    fm = bf(1.0f / fm);           /* S_RECI_FP */
    for (uint32_t i = 0; i < H; i++)
        x[i] = bf(x[i] * fm); /* V_MUL_VF */
    for (uint32_t i = 0; i < H; i++)
        x[i] = bf(x[i] * gamma[i]); /* V_MUL_VV */
}

/* plena_moe_expert_activation on one row of `width` lanes; result in u. */
static void activation_row(float *g, float *u, uint32_t width, enum plena_act_policy pol,
                           float neg_alpha, const struct plena_moe_ref_consts *c)
{
    for (uint32_t i = 0; i < width; i++) {
        float gv = g[i], uv = u[i];
        if (pol == PLENA_ACT_GPT_OSS_CLAMP_GATED) {
            gv = min_vf(gv, c->limit_pos); /* V_MIN_VF g, g, f_lp */
            uv = min_vf(uv, c->limit_pos); /* V_MIN_VF u, u, f_lp */
            uv = max_vf(uv, c->limit_neg); /* V_MAX_VF u, u, f_ln */
        }
        float s = bf(gv * neg_alpha);                                   /* V_MUL_VF s, g, f_na */
        s = bf(plena_expf(clamp88(s)));                                 /* V_EXP_V s, s */
        s = bf(s + c->one);                                             /* V_ADD_VF s, s, f_one */
        s = bf(1.0f / s);                                               /* V_RECI_V s, s */
        gv = bf(gv * s);                                                /* V_MUL_VV g, g, s */
        if (pol == PLENA_ACT_GPT_OSS_CLAMP_GATED) uv = bf(uv + c->one); /* V_ADD_VF u, u, f_one */
        uv = bf(uv * gv);                                               /* V_MUL_VV u, u, g */
        g[i] = gv;
        u[i] = uv;
    }
}

/* Sortable key of IEEE total order; NaN sorts below -Inf
 * (docs/machine.md "C_SET_TOPK_REG and V_TOPK" step 2). */
static uint32_t total_order_key(float v)
{
    uint32_t b = plena_num_f32_bits(v);
    if (v != v) return 0;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/* V_TOPK semantics (docs/machine.md "C_SET_TOPK_REG and V_TOPK"), written
 * independently of the emulator. */
void plena_moe_ref_topk(const float *logits, uint32_t E, uint32_t k, uint32_t *ids, float *w)
{
    uint32_t sel_count = 0;
    uint8_t used_small[512];
    uint8_t *used = E <= sizeof used_small ? used_small : plena_calloc(E, 1);
    if (!used) return;
    memset(used, 0, E <= sizeof used_small ? E : 0);
    float vals[256];
    for (uint32_t j = 0; j < k; j++) {
        int best = -1;
        uint32_t bestkey = 0;
        for (uint32_t e = 0; e < E; e++) {
            if (used[e]) continue;
            uint32_t key = total_order_key(logits[e]);
            if (best < 0 || key > bestkey) {
                best = (int)e;
                bestkey = key;
            }
        }
        used[best] = 1;
        ids[j] = (uint32_t)best;
        float v = logits[best];
        vals[j] = (v != v) ? -INFINITY : v;
        sel_count++;
    }
    float mx = vals[0];
    for (uint32_t j = 1; j < sel_count; j++)
        if (vals[j] > mx) mx = vals[j];
    float e[256];
    for (uint32_t j = 0; j < k; j++)
        e[j] = plena_expf(vals[j] - mx);
    float D = e[0];
    for (uint32_t j = 1; j < k; j++)
        D = D + e[j];
    int ok = isfinite(D) && D > 0.0f;
    for (uint32_t j = 0; j < k; j++)
        w[j] = bf(ok ? e[j] / D : 0.0f);
    if (used != used_small) plena_free(used);
}

/* ---- the device routers (gen/router.c), mirrored lane by lane ---- */

/* V_RED_MAX of one row into acc (docs/machine.md "Vector unit"): a NaN lane
 * leaves acc; else acc = m when acc is NaN or m > acc. */
static float red_max(float acc, const float *a, uint32_t n)
{
    float m = a[0];
    for (uint32_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return acc;
        if (a[i] > m) m = a[i];
    }
    return (acc != acc || m > acc) ? bf(m) : acc;
}

/* S_MAX_FP: NaN x yields y. */
static float s_max(float x, float y)
{
    return bf(x != x ? y : (y > x ? y : x));
}

struct route_scratch {
    uint32_t E, V, eb, n; /* n = eb x V lanes */
    float *s, *q, *t2, *sel, *tmp, *grow;
};

/* Lane e of the n-lane rows x as the device reads it: F = 0, then per row
 * F = bf(F + sum(row x one-hot(e))) (V_MUL_VV, V_RED_SUM). */
static float lane_read(const struct route_scratch *rs, const float *x, uint32_t e)
{
    float f = bf(0.0f + 0.0f);
    for (uint32_t r = 0; r < rs->eb; r++) {
        for (uint32_t i = 0; i < rs->V; i++) {
            const uint32_t id = r * rs->V + i;
            rs->tmp[i] = bf(x[id] * (id == e ? 1.0f : 0.0f));
        }
        f = bf(f + row_sum(rs->tmp, rs->V));
    }
    return f;
}

/* The scores: sigmoid 1/(1 + exp(-1 x l)), or the softmax over E (lanes
 * beyond E -inf first, then max, exp(x - max), 1/sum, x 1/sum). */
static void route_scores(const struct route_scratch *rs, const struct plena_router_plan *pl,
                         const struct plena_moe_ref_consts *c, const float *l)
{
    const uint32_t n = rs->n, V = rs->V;
    if (pl->lowering == PLENA_RLOWER_SIGMOID) {
        for (uint32_t i = 0; i < n; i++) {
            float v = bf(l[i] * c->minus_one); /* V_MUL_VF */
            v = bf(plena_expf(clamp88(v)));    /* V_EXP_V */
            v = bf(v + c->one);                /* V_ADD_VF */
            rs->s[i] = bf(1.0f / v);           /* V_RECI_V */
        }
        return;
    }
    const float *src = l;
    if (rs->E % V) { /* router_pad: 0 below E, -inf beyond (V_ADD_VV) */
        for (uint32_t i = 0; i < n; i++)
            rs->s[i] = bf(l[i] + (i < rs->E ? 0.0f : -INFINITY));
        src = rs->s;
    }
    float m = c->neg_inf;
    for (uint32_t r = 0; r < rs->eb; r++)
        m = red_max(m, src + (size_t)r * V, V); /* V_RED_MAX */
    for (uint32_t i = 0; i < n; i++)
        rs->t2[i] = bf(plena_expf(clamp88(bf(src[i] - m)))); /* V_SUB_VF, V_EXP_V */
    float z = bf(0.0f + 0.0f);
    for (uint32_t r = 0; r < rs->eb; r++)
        z = bf(z + row_sum(rs->t2 + (size_t)r * V, V)); /* V_RED_SUM */
    z = bf(1.0f / z);                                   /* S_RECI_FP */
    for (uint32_t i = 0; i < n; i++)
        rs->s[i] = bf(rs->t2[i] * z); /* V_MUL_VF */
}

/* Group-limited selection into rs->sel: x in the topk_group best groups,
 * -inf elsewhere (router.c groups()). */
static void route_groups(const struct route_scratch *rs, const struct plena_router *r, uint32_t E,
                         const struct plena_moe_ref_consts *c, const float *x)
{
    const uint32_t n = rs->n, G = r->n_group, per = E / G;
    const int top2 = r->group_score == PLENA_GROUP_TOP2_SUM && per >= 2;
    for (uint32_t g = 0; g < G; g++) {
        for (uint32_t i = 0; i < n; i++) /* V_ADD_VV x, router_group_mask[g] */
            rs->t2[i] = bf(x[i] + (i < E && i / per == g ? 0.0f : -INFINITY));
        float f;
        if (top2) { /* V_TOPK(E, 2), then the two lanes of x */
            uint32_t id2[2];
            float w2[2];
            plena_moe_ref_topk(rs->t2, E, 2, id2, w2);
            f = bf(0.0f + 0.0f);
            for (int q = 0; q < 2; q++)
                f = bf(f + lane_read(rs, x, id2[q]));
        } else { /* -inf + 0, then V_RED_MAX row by row */
            f = bf(c->neg_inf + 0.0f);
            for (uint32_t row = 0; row < rs->eb; row++)
                f = red_max(f, rs->t2 + (size_t)row * rs->V, rs->V);
        }
        rs->grow[g] = f; /* S_ST_FP, then S_MAP_V_FP: the group-score row */
    }
    uint32_t gid[PLENA_TOPK_MAX_K];
    float gw[PLENA_TOPK_MAX_K];
    plena_moe_ref_topk(rs->grow, G, r->topk_group, gid, gw); /* V_TOPK(G, topk_group) */
    for (uint32_t i = 0; i < n; i++)                         /* S_MAP_V_FP of the FP zero row */
        rs->t2[i] = 0.0f;
    for (uint32_t j = 0; j < r->topk_group; j++) /* + router_group_ind[gid] (V_ADD_VV) */
        for (uint32_t i = 0; i < n; i++)
            rs->t2[i] = bf(rs->t2[i] + (i < E && i / per == gid[j] ? 1.0f : 0.0f));
    for (uint32_t i = 0; i < n; i++) {
        float v = bf(1.0f / rs->t2[i]); /* V_RECI_V: 1 or +inf */
        v = bf(v * c->minus_one);       /* V_MUL_VF: -1 or -inf */
        v = bf(v + c->one);             /* V_ADD_VF: 0 or -inf */
        rs->sel[i] = bf(x[i] + v);      /* V_ADD_VV */
    }
}

/* The weights (router.c weights()): lane ids[j] of the value rows
 * (SIGMOID_SELECTED: its scalar sigmoid), the sum in rank order, x 1/den,
 * x scaling. */
static void route_weights(const struct route_scratch *rs, const struct plena_router *r,
                          const struct plena_router_plan *pl, const struct plena_moe_ref_consts *c,
                          const float *y, uint32_t k, const uint32_t *ids, float *w)
{
    float sum = bf(0.0f + 0.0f);
    for (uint32_t j = 0; j < k; j++) {
        float v = lane_read(rs, y, ids[j]);
        if (pl->lowering == PLENA_RLOWER_SIGMOID_SELECTED) {
            v = bf(0.0f - v);               /* S_SUB_FP */
            v = bf(plena_expf(clamp88(v))); /* S_EXP_FP */
            v = bf(v + c->one);             /* S_ADD_FP */
            v = bf(1.0f / v);               /* S_RECI_FP */
        }
        sum = bf(sum + v);
        w[j] = v;
    }
    const int norm = r->norm != PLENA_NORM_NONE, scale = c->rsf != 1.0f;
    if (!norm && !scale) return;
    if (norm) {
        if (r->norm == PLENA_NORM_SUM && c->reps != 0.0f)
            sum = bf(sum + c->reps);
        else if (r->norm == PLENA_NORM_SUM_CLAMPED)
            sum = s_max(sum, c->reps);
        sum = bf(1.0f / sum);
    }
    for (uint32_t j = 0; j < k; j++) {
        if (norm) w[j] = bf(w[j] * sum);
        if (scale) w[j] = bf(w[j] * c->rsf);
    }
}

/* One token's device routing from its logits l (eb x VLEN lanes, 0 beyond
 * E): router.c gen_router_token, step by step. */
static void route_token(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                        const struct route_scratch *rs, const float *l, uint32_t *ids, float *w)
{
    struct plena_router_plan pl;
    const struct plena_router *r = &cfg->router;
    if (!plena_router_is_set(r)) {
        plena_moe_ref_topk(l, cfg->E, cfg->k, ids, w);
        return;
    }
    plena_router_plan(r, &pl);
    if (pl.lowering == PLENA_RLOWER_VTOPK) {
        plena_moe_ref_topk(l, cfg->E, cfg->k, ids, w);
        return;
    }
    const struct plena_moe_ref_consts *c = &in->c;
    if (pl.scores) route_scores(rs, &pl, c, l);
    if (pl.select == PLENA_RROWS_BIASED || pl.value == PLENA_RROWS_BIASED)
        for (uint32_t i = 0; i < rs->n; i++) /* V_ADD_VV s, router_sel_bias */
            rs->q[i] = bf(rs->s[i] + (i < cfg->E ? in->router_sel_bias[i] : 0.0f));
    const float *rows[3] = {l, rs->s, rs->q};
    const float *x = rows[pl.select];
    if (pl.groups) {
        route_groups(rs, r, cfg->E, c, x);
        x = rs->sel;
    }
    plena_moe_ref_topk(x, cfg->E, cfg->k, ids, w); /* the main V_TOPK */
    route_weights(rs, r, &pl, c, rows[pl.value], cfg->k, ids, w);
    if (cfg->weight_rows) /* S_MAP_V_FP into a row, read back as V_RED_SUM(row x one-hot) */
        for (uint32_t j = 0; j < cfg->k; j++)
            w[j] = bf(w[j] + 0.0f);
}

struct ref_scratch {
    float *x, *res, *acc, *logits, *q;
    float *sg, *su, *ss;
    float *wpad;   /* padded weight scratch */
    float *tile;   /* projection scratch (proj_scratch_floats) */
    uint32_t *ids; /* the routing when the caller asks for no ids/weights */
    float *wts;
};

/* Copies w[K][N] into a zero-padded [Kp][Np] array. */
static void pad_matrix(const float *w, uint32_t K, uint32_t N, uint32_t Kp, uint32_t Np, float *out)
{
    memset(out, 0, sizeof(float) * (size_t)Kp * Np);
    for (uint32_t k = 0; k < K; k++)
        memcpy(out + (size_t)k * Np, w + (size_t)k * N, sizeof(float) * N);
}

/* Step 7 for every token: the scratch once, then route_token. */
static int route_all(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                     const struct ref_scratch *sc, uint32_t *ids, float *w, struct plena_err *err)
{
    const uint32_t V = cfg->mlen, E = cfg->E, Ep = roundup(E, V);
    struct route_scratch rs = {E, V, Ep / V, Ep, NULL, NULL, NULL, NULL, NULL, NULL};
    if (cfg->router.select_bias != PLENA_SELECT_BIAS_NONE && plena_router_is_set(&cfg->router) &&
        !in->router_sel_bias)
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "the router's selection bias is missing");
    float *buf = plena_calloc((size_t)4 * Ep + 2 * (size_t)V, sizeof *buf);
    if (!buf) return PLENA_FAIL(err, PLENA_E_NOMEM, "ref", "out of memory");
    rs.s = buf;
    rs.q = buf + Ep;
    rs.t2 = buf + 2 * (size_t)Ep;
    rs.sel = buf + 3 * (size_t)Ep;
    rs.tmp = buf + 4 * (size_t)Ep;
    rs.grow = rs.tmp + V;
    for (uint32_t t = 0; t < cfg->T; t++)
        route_token(cfg, in, &rs, sc->logits + (size_t)t * Ep, ids + (size_t)t * cfg->k,
                    w + (size_t)t * cfg->k);
    plena_free(buf);
    return 0;
}

int plena_moe_ref_expert_get(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                             uint32_t e, uint32_t slot, size_t p, struct plena_moe_ref_expert *x,
                             struct plena_err *err)
{
    memset(x, 0, sizeof *x);
    if (e < cfg->E && in->expert) {
        int rc = in->expert(in->expert_ctx, e, slot, x, err);
        if (rc) return rc;
    } else if (e < cfg->E && in->w_gate && in->w_up && in->w_down) {
        x->w_gate = in->w_gate[e];
        x->w_up = in->w_up[e];
        x->w_down = in->w_down[e];
        if (cfg->expert_bias && in->b_gate && in->b_up && in->b_down) {
            x->b_gate = in->b_gate[e];
            x->b_up = in->b_up[e];
            x->b_down = in->b_down[e];
        }
    }
    /* whichever source: every tensor the layer uses is there, or one message */
    if (!x->w_gate || !x->w_up || !x->w_down)
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "expert %u of pair %zu has no weights", e, p);
    if (cfg->expert_bias && (!x->b_gate || !x->b_up || !x->b_down))
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "expert %u of pair %zu has no biases", e, p);
    return 0;
}

size_t plena_moe_ref_pairs_by_expert(const uint32_t *ids, size_t np, uint32_t E, size_t *order,
                                     size_t *start)
{
    memset(start, 0, ((size_t)E + 1) * sizeof *start);
    for (size_t p = 0; p < np; p++) {
        if (ids[p] >= E) return p;
        start[ids[p] + 1]++;
    }
    for (uint32_t e = 0; e < E; e++)
        start[e + 1] += start[e];
    for (size_t p = 0; p < np; p++)
        order[start[ids[p]]++] = p;
    /* the fill advanced start[e] to the end of group e: shift back */
    for (uint32_t e = E; e > 0; e--)
        start[e] = start[e - 1];
    start[0] = 0;
    return np;
}

/* Pairs of one expert evaluated together, at most this many rows at a time. */
#define REF_PAIR_BATCH PROJ_ROWS

/* The one-expert buffers of routed_pairs (one set per thread): padded
 * weights (only when I is not a multiple of MLEN; else the provider's
 * matrices are used as they are) and REF_PAIR_BATCH rows of every
 * intermediate. */
struct expert_bufs {
    float *wg, *wu, *wd; /* [H][Ip], [H][Ip], [Ip][H], or NULL */
    float *slot, *yd;    /* [B][H] */
    float *yg, *yu, *ag; /* [B][Ip] */
    float *tile;         /* projection scratch */
};

/* Steps a-h (docs/lowering.md "Layer steps") for m pairs of one expert with
 * (padded) weights wg, wu, wd: token rows xrow[i] of x, route weights w[i];
 * expert outputs into b->yd. */
static void expert_rows(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_consts *c,
                        const struct plena_moe_ref_expert *x, const float *const wp[3],
                        const float *const *xrow, const float *w, uint32_t m, uint32_t Ip,
                        struct expert_bufs *b)
{
    const uint32_t H = cfg->H, M = cfg->mlen;
    for (uint32_t r = 0; r < m; r++) {
        float *slot = b->slot + (size_t)r * H;
        /* a: gather, exact copy x*1.0 */
        for (uint32_t i = 0; i < H; i++)
            slot[i] = bf(xrow[r][i] * c->one);
        /* c: INPUT placement: bf16(x * w) */
        if (cfg->placement == PLENA_ROUTE_INPUT)
            for (uint32_t i = 0; i < H; i++)
                slot[i] = bf(slot[i] * w[r]);
    }
    /* d: gate and up projections */
    proj_ksplit(b->slot, m, H, wp[0], Ip, M, cfg->chunk_tiles, b->yg, b->tile);
    proj_ksplit(b->slot, m, H, wp[1], Ip, M, cfg->chunk_tiles, b->yu, b->tile);
    for (uint32_t r = 0; r < m; r++) {
        float *yg = b->yg + (size_t)r * Ip, *yu = b->yu + (size_t)r * Ip;
        float *ag = b->ag + (size_t)r * Ip;
        /* e: biases, bf16(y + b) */
        if (cfg->expert_bias) {
            for (uint32_t i = 0; i < cfg->I; i++) {
                yg[i] = bf(yg[i] + x->b_gate[i]);
                yu[i] = bf(yu[i] + x->b_up[i]);
            }
            for (uint32_t i = cfg->I; i < Ip; i++) {
                yg[i] = bf(yg[i] + 0.0f);
                yu[i] = bf(yu[i] + 0.0f);
            }
        }
        /* f: activation, result in up */
        memcpy(ag, yg, sizeof(float) * Ip);
        activation_row(ag, yu, Ip, cfg->activation, c->neg_alpha_routed, c);
    }
    /* g: down projection and bias */
    proj_ksplit(b->yu, m, Ip, wp[2], H, M, cfg->chunk_tiles, b->yd, b->tile);
    for (uint32_t r = 0; r < m; r++) {
        float *yd = b->yd + (size_t)r * H;
        if (cfg->expert_bias)
            for (uint32_t i = 0; i < H; i++)
                yd[i] = bf(yd[i] + x->b_down[i]);
        /* h: OUTPUT placement, bf16(o * w) */
        if (cfg->placement == PLENA_ROUTE_OUTPUT)
            for (uint32_t i = 0; i < H; i++)
                yd[i] = bf(yd[i] * w[r]);
    }
}

static void expert_bufs_free(struct expert_bufs *b)
{
    plena_free(b->wg), plena_free(b->wu), plena_free(b->wd), plena_free(b->slot);
    plena_free(b->yd), plena_free(b->yg), plena_free(b->yu), plena_free(b->ag);
    plena_free(b->tile);
    memset(b, 0, sizeof *b);
}

static int expert_bufs_alloc(struct expert_bufs *b, uint32_t H, uint32_t I, uint32_t Ip)
{
    const size_t B = REF_PAIR_BATCH;
    if (I != Ip) {
        b->wg = plena_calloc((size_t)H * Ip, sizeof(float));
        b->wu = plena_calloc((size_t)H * Ip, sizeof(float));
        b->wd = plena_calloc((size_t)Ip * H, sizeof(float));
        if (!b->wg || !b->wu || !b->wd) return 0;
    }
    b->slot = plena_malloc(B * H * sizeof(float));
    b->yd = plena_malloc(B * H * sizeof(float));
    b->yg = plena_malloc(B * Ip * sizeof(float));
    b->yu = plena_malloc(B * Ip * sizeof(float));
    b->ag = plena_malloc(B * Ip * sizeof(float));
    b->tile = plena_malloc(proj_scratch_floats(H > Ip ? H : Ip) * sizeof(float));
    return b->slot && b->yd && b->yg && b->yu && b->ag && b->tile;
}

/* One job of routed_pairs on the pool: the threads take experts in
 * increasing order (plena_ref_experts_run's counter); a failure stops the taking of new experts,
 * and the reported error is the one of the lowest failing expert (every
 * expert below it has been taken, so the choice does not depend on timing). */
struct pairs_job {
    const struct plena_moe_ref_cfg *cfg;
    const struct plena_moe_ref_in *in;
    const float *x, *wts;
    const size_t *order, *start;
    uint32_t Ip;
    float *po;
    struct expert_bufs *bufs; /* [parts] */
};

static int pairs_expert(void *ctx, uint32_t e, uint32_t part, struct plena_err *err)
{
    struct pairs_job *j = ctx;
    const struct plena_moe_ref_cfg *cfg = j->cfg;
    const uint32_t H = cfg->H, I = cfg->I, Ip = j->Ip, k = cfg->k;
    const size_t *order = j->order, *start = j->start;
    struct expert_bufs *eb = &j->bufs[part];
    if (!eb->slot && !expert_bufs_alloc(eb, H, I, Ip))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "ref", "out of memory");
    struct plena_moe_ref_expert x;
    int rc = plena_moe_ref_expert_get(cfg, j->in, e, part, order[start[e]], &x, err);
    if (rc) return rc;
    const float *wp[3] = {x.w_gate, x.w_up, x.w_down};
    if (I != Ip) {
        pad_matrix(x.w_gate, H, I, H, Ip, eb->wg);
        pad_matrix(x.w_up, H, I, H, Ip, eb->wu);
        pad_matrix(x.w_down, I, H, Ip, H, eb->wd);
        wp[0] = eb->wg, wp[1] = eb->wu, wp[2] = eb->wd;
    }
    for (size_t i0 = start[e]; i0 < start[e + 1]; i0 += REF_PAIR_BATCH) {
        const uint32_t m =
            (uint32_t)(start[e + 1] - i0 < REF_PAIR_BATCH ? start[e + 1] - i0 : REF_PAIR_BATCH);
        const float *xrow[REF_PAIR_BATCH];
        float w[REF_PAIR_BATCH];
        for (uint32_t r = 0; r < m; r++) {
            xrow[r] = j->x + (order[i0 + r] / k) * H;
            w[r] = j->wts[order[i0 + r]];
        }
        expert_rows(cfg, &j->in->c, &x, wp, xrow, w, m, Ip, eb);
        for (uint32_t r = 0; r < m; r++)
            memcpy(j->po + order[i0 + r] * H, eb->yd + (size_t)r * H, H * sizeof(float));
    }
    return 0;
}

/* Step 10 for every pair: expert by expert (each expert's weights fetched and
 * padded once, so a streaming provider holds one expert per thread at a time;
 * its pairs go through the projections together), each pair's output kept,
 * then scattered in pair order p = t*k + j -- the only order-dependent step
 * (bf16(acc + o)), so the result is the pair-order one, whatever the number
 * of threads. */
static int routed_pairs(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                        const uint32_t *ids, const float *wts, uint32_t Ip, struct ref_scratch *s,
                        struct plena_err *err)
{
    const uint32_t H = cfg->H, E = cfg->E, k = cfg->k;
    const size_t np = (size_t)cfg->T * k;
    const uint32_t parts = plena_pool_size(in->pool);
    float *po = plena_malloc(np * H * sizeof(float));
    size_t *order = plena_malloc(np * sizeof *order);
    size_t *start = plena_malloc(((size_t)E + 1) * sizeof *start);
    struct expert_bufs *bufs = plena_calloc(parts, sizeof *bufs);
    int rc = 0;
    if (!po || !order || !start || !bufs) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref", "out of memory");
        goto done;
    }
    size_t bad = plena_moe_ref_pairs_by_expert(ids, np, E, order, start);
    if (bad < np) {
        rc = PLENA_FAIL(err, PLENA_E_INPUT, "ref", "expert %u of pair %zu has no weights", ids[bad],
                        bad);
        goto done;
    }
    struct pairs_job j = {cfg, in, s->x, wts, order, start, Ip, po, bufs};
    if ((rc = plena_ref_experts_run(in->pool, start, E, pairs_expert, &j, in->stop, err)))
        goto done;
    /* i: scatter-add in pair order, bf16(acc + o) */
    for (size_t p = 0; p < np; p++) {
        float *acc = s->acc + (p / k) * H;
        for (uint32_t i = 0; i < H; i++)
            acc[i] = bf(acc[i] + po[p * H + i]);
    }
done:
    for (uint32_t q = 0; bufs && q < parts; q++)
        expert_bufs_free(&bufs[q]);
    plena_free(bufs);
    plena_free(po), plena_free(order), plena_free(start);
    return rc;
}

int plena_moe_reference(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                        struct plena_moe_ref_out *out, struct plena_err *err)
{
    const uint32_t T = cfg->T, H = cfg->H, M = cfg->mlen;
    if (!M || H % M || !T || !cfg->chunk_tiles)
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "bad shape: H %u, MLEN %u, T %u", H, M, T);
    int routed = cfg->routing != PLENA_ROUTING_NONE && cfg->E > 0;
    int shared = cfg->Is > 0;
    if (out->route_only && !routed)
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "route_only on a layer without routing");
    if (routed && (cfg->k == 0 || cfg->k > cfg->E || cfg->k > PLENA_TOPK_MAX_K))
        return PLENA_FAIL(err, PLENA_E_INPUT, "ref", "bad top_k %u for %u experts", cfg->k, cfg->E);
    const uint32_t Ip = roundup(cfg->I ? cfg->I : 1, M), Isp = shared ? roundup(cfg->Is, M) : 0;
    const uint32_t Ep = roundup(cfg->E ? cfg->E : 1, M);
    size_t th = (size_t)T * H;
    size_t maxw = (size_t)H * (Ip > Isp ? Ip : Isp);
    if ((size_t)H * Ep > maxw) maxw = (size_t)H * Ep;
    struct ref_scratch s = {0};
    s.x = plena_calloc(th, sizeof(float));
    s.res = plena_calloc(th, sizeof(float));
    s.acc = plena_calloc(th, sizeof(float));
    s.logits = plena_calloc((size_t)T * Ep, sizeof(float));
    s.q = plena_calloc(M, sizeof(float));
    s.sg = plena_calloc((size_t)T * (Isp ? Isp : 1), sizeof(float));
    s.su = plena_calloc((size_t)T * (Isp ? Isp : 1), sizeof(float));
    s.ss = plena_calloc(th, sizeof(float));
    s.wpad = plena_calloc(maxw, sizeof(float));
    uint32_t npmax = H > Ep ? H : Ep;
    if (Isp > npmax) npmax = Isp;
    s.tile = plena_malloc(proj_scratch_floats(npmax) * sizeof(float));
    int rc = 0;
    if (!s.x || !s.res || !s.acc || !s.logits || !s.q || !s.sg || !s.su || !s.ss || !s.wpad ||
        !s.tile) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref", "out of memory");
        goto done;
    }
    const struct plena_moe_ref_consts *c = &in->c;
    memcpy(s.x, in->h, th * sizeof(float));

    /* Steps 1-4: residual copy (exact x*1.0), RMSNorm in place, gamma multiply. */
    if (cfg->residual == PLENA_RESIDUAL_PRE_NORM) {
        for (size_t i = 0; i < th; i++)
            s.res[i] = bf(s.x[i] * c->one);
        for (uint32_t t = 0; t < T; t++)
            rmsnorm_row(s.x + (size_t)t * H, in->gamma, H, M, c, s.q);
    }

    if (out->x_norm) memcpy(out->x_norm, s.x, th * sizeof(float));

    if (routed) {
        const uint32_t E = cfg->E, k = cfg->k;
        uint32_t *ids = out->ids;
        float *wts = out->weights;
        if (!ids || !wts) {
            if (out->route_only) {
                rc = PLENA_FAIL(err, PLENA_E_INPUT, "ref", "route_only needs ids and weights");
                goto done;
            }
            ids = s.ids = plena_malloc(((size_t)T * k + 1) * sizeof *ids);
            wts = s.wts = plena_malloc(((size_t)T * k + 1) * sizeof *wts);
            if (!ids || !wts) {
                rc = PLENA_FAIL(err, PLENA_E_NOMEM, "ref", "out of memory");
                goto done;
            }
        }
        if (cfg->routing == PLENA_ROUTING_DEVICE) {
            /* Step 5: router logits (preloaded: as staged, 0 beyond E). */
            if (in->logits) {
                for (uint32_t t = 0; t < T; t++)
                    memcpy(s.logits + (size_t)t * Ep, in->logits + (size_t)t * E,
                           E * sizeof(float));
            } else if (cfg->router_form == PLENA_ROUTER_GEMM) {
                pad_matrix(in->router_w, H, E, H, Ep, s.wpad);
                proj_stream(s.x, T, H, s.wpad, Ep, M, s.logits, s.tile);
            } else {
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t e = 0; e < E; e++) {
                        float fa = bf(0.0f + 0.0f); /* S_ADD_FP f_a, f0, f0 */
                        for (uint32_t b = 0; b < H / M; b++) {
                            for (uint32_t i = 0; i < M; i++)
                                s.q[i] = bf(s.x[(size_t)t * H + b * M + i] *
                                            in->router_w[(size_t)e * H + b * M + i]);
                            fa = bf(fa + row_sum(s.q, M)); /* V_RED_SUM */
                        }
                        s.logits[(size_t)t * Ep + e] = fa; /* S_ST_FP, S_MAP_V_FP: BF16 as is */
                    }
            }
            /* Step 6: router bias, bf16(L + b). */
            if (cfg->router_bias && !in->logits)
                for (uint32_t t = 0; t < T; t++)
                    for (uint32_t e = 0; e < E; e++)
                        s.logits[(size_t)t * Ep + e] =
                            bf(s.logits[(size_t)t * Ep + e] + in->router_b[e]);
            /* Step 7: the router per token (V_TOPK alone, or gen/router.c's sequence) */
            if ((rc = route_all(cfg, in, &s, ids, wts, err))) goto done;
        } else {
            memcpy(ids, in->fixed_ids, sizeof(uint32_t) * T * k);
            memcpy(wts, in->fixed_w, sizeof(float) * T * k);
        }
        if (out->route_only) goto done;
        /* Step 9: accumulator init (true zero). */
        memset(s.acc, 0, th * sizeof(float));
        /* Step 10: pairs in order p = t*k + j. */
        if ((rc = routed_pairs(cfg, in, ids, wts, Ip, &s, err))) goto done;
    }

    if (shared) {
        /* the shared expert is one block on one thread: a stop is looked at
         * before it (its three projections take seconds at large T) */
        if ((rc = plena_err_if_stopped(in->stop, "reference", err))) goto done;
        /* Step 11: batched shared SwiGLU over all rows. */
        pad_matrix(in->ws_gate, H, cfg->Is, H, Isp, s.wpad);
        proj_ksplit(s.x, T, H, s.wpad, Isp, M, cfg->chunk_tiles, s.sg, s.tile);
        pad_matrix(in->ws_up, H, cfg->Is, H, Isp, s.wpad);
        proj_ksplit(s.x, T, H, s.wpad, Isp, M, cfg->chunk_tiles, s.su, s.tile);
        for (uint32_t t = 0; t < T; t++)
            activation_row(s.sg + (size_t)t * Isp, s.su + (size_t)t * Isp, Isp,
                           PLENA_ACT_STANDARD_SWIGLU, c->neg_alpha_shared, c);
        pad_matrix(in->ws_down, cfg->Is, H, Isp, H, s.wpad);
        proj_ksplit(s.su, T, Isp, s.wpad, H, M, cfg->chunk_tiles, s.ss, s.tile);
        /* Step 12: sigmoid gate in scalar FP, then the broadcast multiply. */
        if (cfg->shared_gate == PLENA_SHARED_GATE_SIGMOID)
            for (uint32_t t = 0; t < T; t++) {
                float fz = bf(0.0f + 0.0f); /* S_ADD_FP f_z, f0, f0 */
                for (uint32_t b = 0; b < H / M; b++) {
                    for (uint32_t i = 0; i < M; i++)
                        s.q[i] = bf(s.x[(size_t)t * H + b * M + i] * in->w_sg[b * M + i]);
                    fz = bf(fz + row_sum(s.q, M)); /* V_RED_SUM f_z, q */
                }
                fz = bf(0.0f - fz);               /* S_SUB_FP f_z, f0, f_z */
                fz = bf(plena_expf(clamp88(fz))); /* S_EXP_FP */
                fz = bf(fz + c->one);             /* S_ADD_FP f_z, f_z, f_one */
                fz = bf(1.0f / fz);               /* S_RECI_FP */
                if (out->gate) out->gate[t] = fz;
                for (uint32_t i = 0; i < H; i++)
                    s.ss[(size_t)t * H + i] = bf(s.ss[(size_t)t * H + i] * fz); /* V_MUL_VF */
            }
    }

    /* Step 13: combine (unweighted), or the shared output alone. */
    if (routed && shared) {
        for (size_t i = 0; i < th; i++)
            s.acc[i] = bf(s.acc[i] + s.ss[i]);
    } else if (shared) {
        memcpy(s.acc, s.ss, th * sizeof(float));
    }
    if (out->moe_out) memcpy(out->moe_out, s.acc, th * sizeof(float));
    /* Step 14: residual add-back, bf16(out + residual). */
    if (cfg->residual == PLENA_RESIDUAL_PRE_NORM)
        for (size_t i = 0; i < th; i++)
            s.acc[i] = bf(s.acc[i] + s.res[i]);
    memcpy(out->out, s.acc, th * sizeof(float));

done:
    plena_free(s.x), plena_free(s.res), plena_free(s.acc), plena_free(s.logits);
    plena_free(s.q);
    plena_free(s.sg), plena_free(s.su), plena_free(s.ss), plena_free(s.wpad);
    plena_free(s.ids), plena_free(s.wts), plena_free(s.tile);
    return rc;
}
