/* The f32 forward pass of docs/traces.md "What is computed": one token at a
 * time through a pre-norm decoder with a KV cache, every sum in increasing
 * index order, no FMA (-ffp-contract=off on every target), transcendental
 * functions from num/detmath only, so rows are byte-identical on every
 * IEEE-754 machine. Prefill and decode run the same step function, so the KV
 * cache cannot differ from recomputation. */
#include <math.h>
#include <string.h>

#include "ckpt/decoder.h"
#include "common/pool.h"
#include "common/alloc.h"
#include "num/detmath.h"
#include "num/num.h"

/* e^x as float; below -700 the value is 0 and above 700 +Inf, as the f32
 * result would be (det_exp's domain ends there). */
static float exp_f(float x)
{
    if (x < -700.0f) return 0.0f;
    if (x > 700.0f) return INFINITY;
    double e = 0;
    plena_det_exp((double)x, &e);
    return (float)e;
}

static float silu(float z)
{
    return z / (1.0f + exp_f(-z));
}

static float sigmoid(float z)
{
    return 1.0f / (1.0f + exp_f(-z));
}

#define PB 512 /* prefill tokens per block: each expert's weights are read once per block */

/* With --act bf16 every stored activation is rounded to BF16 (RNE). */
static void store(const struct plena_dec_state *s, float *v, size_t n)
{
    if (s->act_bf16)
        for (size_t i = 0; i < n; i++)
            v[i] = plena_num_round_bf16(v[i]);
}

/* Y[t][o] = sum_i W[o][i] X[t][i] (+ b[o]) for T tokens, i increasing
 * (ckpt/matmul.c: register-blocked, exact order, split over the threads). */
static void mm(const struct plena_dec_state *s, const struct plena_mat *W, const float *X,
               size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy)
{
    plena_ckpt_matmul(s->pool, W, X, ldx, b, T, Y, ldy);
}

/* One token's matrix-vector product. */
static void mv(const struct plena_dec_state *s, const struct plena_mat *W, const float *x,
               const float *b, float *y)
{
    mm(s, W, x, W->cols, b, 1, y, W->rows);
}

/* out = x / sqrt(mean(x^2) + eps) * w (sqrt is IEEE). */
static void rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out)
{
    float ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    float r = sqrtf(ss / (float)n + eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] / r * w[i];
}

/* Rotate-half RoPE of one head vector with cos/sin of this position. */
static void rope(float *x, uint32_t D, const float *cs, const float *sn)
{
    for (uint32_t i = 0; i < D / 2; i++) {
        float a = x[i], b = x[i + D / 2];
        x[i] = a * cs[i] - b * sn[i];
        x[i + D / 2] = b * cs[i] + a * sn[i];
    }
}

void plena_dec_mm(const struct plena_dec_state *s, const struct plena_mat *W, const float *X,
                  size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy)
{
    mm(s, W, X, ldx, b, T, Y, ldy);
}

void plena_dec_store(const struct plena_dec_state *s, float *v, size_t n)
{
    store(s, v, n);
}

void plena_dec_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out)
{
    rmsnorm(x, w, n, eps, out);
}

float plena_dec_exp(float x)
{
    return exp_f(x);
}

void plena_dec_softmax_mix(float *scores, uint32_t n, const float *v, size_t ldv, uint32_t V,
                           float *out)
{
    float m = -INFINITY, sum = 0;
    for (uint32_t j = 0; j < n; j++)
        if (scores[j] > m) m = scores[j];
    for (uint32_t j = 0; j < n; j++)
        sum += (scores[j] = exp_f(scores[j] - m));
    for (uint32_t j = 0; j < n; j++)
        scores[j] = scores[j] / sum; /* p_j */
    memset(out, 0, V * sizeof *out);
    plena_ckpt_axpy_rows(out, scores, v, ldv, n, V); /* out[i] += p_j v[j][i], j increasing */
}

/* det_exp in double for model/router.c (its domain ends at +-700). */
static double exp_d(double x)
{
    if (x < -700.0) return 0.0;
    if (x > 700.0) return INFINITY;
    double e = 0;
    plena_det_exp(x, &e);
    return e;
}

/* The router.c router (DeepSeek): float64 from the f32 logits and bias,
 * det_exp, the weights rounded once to binary32. */
static int route_ext(const struct plena_dec_config *cfg, const float *logits, const float *bias,
                     uint32_t *ids, float *w, struct plena_err *err)
{
    const uint32_t E = cfg->n_experts, K = cfg->top_k;
    double *ld = plena_malloc((size_t)(2 * E + K) * sizeof *ld);
    if (!ld) return PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
    double *bd = ld + E, *wd = bd + E;
    for (uint32_t e = 0; e < E; e++)
        ld[e] = (double)logits[e], bd[e] = bias ? (double)bias[e] : 0.0;
    int rc = plena_router_select_exp(&cfg->router, exp_d, E, K, ld, bias ? bd : NULL, ids, wd, err);
    for (uint32_t j = 0; !rc && j < K; j++)
        w[j] = (float)wd[j];
    plena_free(ld);
    return rc;
}

int plena_dec_route(const struct plena_dec_config *cfg, const float *logits, const float *bias,
                    uint32_t *ids, float *w, struct plena_err *err)
{
    const uint32_t E = cfg->n_experts, K = cfg->top_k;
    for (uint32_t e = 0; e < E; e++)
        if (!isfinite(logits[e]))
            return PLENA_FAIL(err, PLENA_E_FAILED, "router", "logit of expert %u is not finite", e);
    if (cfg->ext_router) return route_ext(cfg, logits, bias, ids, w, err);
    plena_top_n_f32(logits, E, K, ids); /* on equal logits the lower id first */
    float m = logits[ids[0]], sum = 0;
    if (cfg->norm_topk) {
        for (uint32_t j = 0; j < K; j++)
            sum += (w[j] = exp_f(logits[ids[j]] - m));
        for (uint32_t j = 0; j < K; j++)
            w[j] /= sum;
        return 0;
    }
    for (uint32_t e = 0; e < E; e++)
        sum += exp_f(logits[e] - m);
    for (uint32_t j = 0; j < K; j++)
        w[j] = exp_f(logits[ids[j]] - m) / sum;
    return 0;
}

/* y = down(silu(gate x) * up x) of one MLP of width I. */
static void mlp(struct plena_dec_state *s, const struct plena_mat *g, const struct plena_mat *u,
                const struct plena_mat *d, uint32_t I, const float *x, float *y)
{
    mv(s, g, x, NULL, s->gate);
    mv(s, u, x, NULL, s->up);
    store(s, s->gate, I);
    store(s, s->up, I);
    for (uint32_t i = 0; i < I; i++)
        s->act[i] = silu(s->gate[i]) * s->up[i];
    store(s, s->act, I);
    mv(s, d, s->act, NULL, y);
    store(s, y, d->rows);
}

static int moe(struct plena_dec_state *s, uint32_t l, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, K = c->top_k;
    uint32_t *ids = s->ids + (size_t)l * K;
    float *rw = s->rw + (size_t)l * K;
    memset(s->y, 0, H * sizeof *s->y);
    if (c->dense[l]) {
        mlp(s, &y->dg, &y->du, &y->dd, c->inter, s->x, s->y);
        return 0;
    }
    mv(s, &y->router, s->x, NULL, s->logits);
    store(s, s->logits, c->n_experts);
    if (plena_dec_route(c, s->logits, y->e_bias, ids, rw, err)) return err->code;
    for (uint32_t j = 0; j < K; j++) {
        mlp(s, &y->eg[ids[j]], &y->eu[ids[j]], &y->ed[ids[j]], c->moe_inter, s->x, s->tmp);
        plena_ckpt_axpy(s->y, rw[j], s->tmp, H);
    }
    if (c->shared_inter) {
        float z = 0, gate = 1.0f; /* DeepSeek's shared experts have no gate */
        for (uint32_t i = 0; y->shared_gate && i < H; i++)
            z += s->x[i] * y->shared_gate[i];
        if (y->shared_gate) gate = sigmoid(z);
        mlp(s, &y->sg, &y->su, &y->sd, c->shared_inter, s->x, s->tmp);
        for (uint32_t i = 0; i < H; i++)
            s->y[i] += gate * s->tmp[i];
    }
    store(s, s->y, H);
    return 0;
}

/* Attention of the query heads of kv group g at position pos over 0..pos
 * (GQA), into att. The group's scores are one exact-order product (the
 * cached keys as the matrix, the group's query heads as its tokens: each
 * score is q.k summed over i increasing); sc holds group x (pos + 1). */
static void attend_group(const struct plena_dec_state *s, uint32_t l, uint32_t pos, const float *qv,
                         float *att, uint32_t g, float *sc)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t D = c->head_dim, KD = c->kv_heads * D, group = c->heads / c->kv_heads;
    const uint32_t n = pos + 1;
    const float scale = 1.0f / sqrtf((float)D);
    const float *kc = s->kcache + (size_t)l * s->max_pos * KD,
                *vc = s->vcache + (size_t)l * s->max_pos * KD;
    const struct plena_mat keys = plena_mat_f32(kc + (size_t)g * D, n, D, KD);
    plena_ckpt_matmul_rows(&keys, 0, n, qv + (size_t)g * group * D, D, NULL, group, sc, n);
    for (uint32_t h = g * group; h < (g + 1) * group; h++) {
        float *scores = sc + (size_t)(h - g * group) * n;
        float m = -INFINITY;
        for (uint32_t j = 0; j < n; j++) {
            scores[j] = scores[j] * scale;
            if (scores[j] > m) m = scores[j];
        }
        float sum = 0;
        for (uint32_t j = 0; j < n; j++)
            sum += (scores[j] = exp_f(scores[j] - m));
        for (uint32_t j = 0; j < n; j++)
            scores[j] = scores[j] / sum;
        float *out = att + (size_t)h * D;
        memset(out, 0, D * sizeof *out);
        plena_ckpt_axpy_rows(out, scores, vc + (size_t)g * D, KD, n, D);
    }
}

struct att_job {
    const struct plena_dec_state *s;
    uint32_t l, pos0, nb, stride; /* token t at position pos0 + t; q/att rows of stride */
    const float *q;
    float *att, *scr; /* scr: per part group x max_pos */
};

/* One (token, kv group) pair, taken by whichever thread is free
 * (plena_pool_for); later tokens first (they attend over more positions). */
static int att_item(void *ctx, uint32_t k, uint32_t part, struct plena_err *err)
{
    (void)err;
    const struct att_job *j = ctx;
    const struct plena_dec_config *c = &j->s->w->cfg;
    const size_t per = (size_t)(c->heads / c->kv_heads) * j->s->max_pos;
    const uint32_t n = j->nb * c->kv_heads, i = n - 1 - k;
    const uint32_t t = i / c->kv_heads, g = i % c->kv_heads;
    attend_group(j->s, j->l, j->pos0 + t, j->q + (size_t)t * j->stride,
                 j->att + (size_t)t * j->stride, g, j->scr + part * per);
    return 0;
}

/* Attention of nb tokens at positions pos0.. over the cache, split by
 * (token, group) over the threads; every value is computed by the same
 * code whatever the split. */
static int attend(struct plena_dec_state *s, uint32_t l, uint32_t pos0, uint32_t nb, const float *q,
                  float *att, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t parts = plena_pool_size(s->pool);
    const size_t need = (size_t)parts * (c->heads / c->kv_heads) * s->max_pos;
    if (need > s->scr_n) {
        plena_free(s->scr);
        if (!(s->scr = plena_calloc(need, sizeof *s->scr))) {
            s->scr_n = 0;
            return PLENA_FAIL(err, PLENA_E_NOMEM, "forward", "out of memory");
        }
        s->scr_n = need;
    }
    struct att_job j = {s, l, pos0, nb, c->heads * c->head_dim, q, att, s->scr};
    int rc = plena_pool_for(s->pool, nb * c->kv_heads, att_item, &j, err);
    if (rc) return rc;
    store(s, att, (size_t)nb * c->heads * c->head_dim);
    return 0;
}

/* q/k norms (per head, or over the whole projection) and RoPE of one
 * token's q[QD] and k[KD] with this position's cos/sin. */
static void qk_norm_rope(const struct plena_dec_state *s, uint32_t l, float *q, float *k,
                         const float *cs, const float *sn)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D;
    if (c->qk_norm == 2) { /* OLMoE: over the whole projection, before the head split */
        rmsnorm(q, y->q_norm, QD, c->eps, q);
        rmsnorm(k, y->k_norm, KD, c->eps, k);
    }
    for (uint32_t h = 0; h < c->heads; h++) {
        if (c->qk_norm == 1) rmsnorm(q + (size_t)h * D, y->q_norm, D, c->eps, q + (size_t)h * D);
        rope(q + (size_t)h * D, D, cs, sn);
    }
    for (uint32_t h = 0; h < c->kv_heads; h++) {
        if (c->qk_norm == 1) rmsnorm(k + (size_t)h * D, y->k_norm, D, c->eps, k + (size_t)h * D);
        rope(k + (size_t)h * D, D, cs, sn);
    }
}

static int attention(struct plena_dec_state *s, uint32_t l, const float *cs, const float *sn,
                     struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D;
    rmsnorm(s->h, y->in_norm, H, c->eps, s->x);
    store(s, s->x, H);
    if (c->mla) {
        plena_mla_attention(s, l, 1, s->x, s->att, cs, sn);
        mv(s, &y->o, s->att, NULL, s->tmp);
        goto residual;
    }
    float *k = s->kcache + ((size_t)l * s->max_pos + s->pos) * KD;
    float *v = s->vcache + ((size_t)l * s->max_pos + s->pos) * KD;
    mv(s, &y->q, s->x, y->bq, s->q);
    mv(s, &y->k, s->x, y->bk, k);
    mv(s, &y->v, s->x, y->bv, v);
    store(s, s->q, QD);
    store(s, k, KD);
    store(s, v, KD);
    qk_norm_rope(s, l, s->q, k, cs, sn);
    store(s, s->q, QD);
    store(s, k, KD);
    if (attend(s, l, s->pos, 1, s->q, s->att, err)) return err->code;
    mv(s, &y->o, s->att, NULL, s->tmp);
residual:
    store(s, s->tmp, H);
    for (uint32_t i = 0; i < H; i++)
        s->h[i] += s->tmp[i];
    store(s, s->h, H);
    return 0;
}

static int finite_row(const float *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* cos/sin of position pos: angle = (float)pos * inv_freq_i in f32. */
static int rope_angles(const struct plena_dec_state *s, uint32_t pos, float *cs, float *sn,
                       struct plena_err *err)
{
    for (uint32_t i = 0; i < s->w->cfg.head_dim / 2; i++) {
        double sd = 0, cd = 1;
        if (plena_det_sincos((double)((float)pos * s->w->inv_freq[i]), &sd, &cd))
            return PLENA_FAIL(err, PLENA_E_FAILED, "forward", "RoPE angle out of range");
        cs[i] = (float)cd, sn[i] = (float)sd;
    }
    return 0;
}

/* The final norm and LM head on s->h: *next = argmax, ties to the lowest id. */
static int lm_head(struct plena_dec_state *s, uint32_t *next, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t H = c->hidden;
    rmsnorm(s->h, s->w->final_norm, H, c->eps, s->x);
    store(s, s->x, H);
    mv(s, &s->w->lm_head, s->x, NULL, s->vocab_logits);
    uint32_t best = 0;
    for (uint32_t t = 1; t < c->vocab; t++)
        if (s->vocab_logits[t] > s->vocab_logits[best]) best = t;
    if (!finite_row(s->vocab_logits, c->vocab))
        return PLENA_FAIL(err, PLENA_E_FAILED, "forward", "LM-head logits are not finite");
    *next = best;
    return 0;
}

int plena_dec_step(struct plena_dec_state *s, uint32_t token, int want_next, uint32_t *next,
                   struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t H = c->hidden;
    if (token >= c->vocab)
        return PLENA_FAIL(err, PLENA_E_INPUT, "input_ids", "token id %u is not in [0, %u)", token,
                          c->vocab);
    if (s->pos >= s->max_pos)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "forward", "position %u past the KV cache",
                          s->pos);
    float cs[2048], sn[2048];
    if (rope_angles(s, s->pos, cs, sn, err)) return err->code;
    plena_mat_row(&s->w->embed, token, s->h);
    store(s, s->h, H);
    for (uint32_t l = 0; l < s->n_run; l++) {
        if (attention(s, l, cs, sn, err)) return err->code;
        rmsnorm(s->h, s->w->layers[l].post_norm, H, c->eps, s->x);
        store(s, s->x, H);
        if (moe(s, l, err)) return err->code;
        for (uint32_t i = 0; i < H; i++)
            s->h[i] += s->y[i];
        store(s, s->h, H);
        if (!finite_row(s->h, H))
            return PLENA_FAIL(err, PLENA_E_FAILED, "forward",
                              "layer %u position %u: the hidden state is not finite", l, s->pos);
    }
    s->pos++;
    return want_next ? lm_head(s, next, err) : 0;
}

int plena_dec_state_init(struct plena_dec_state *s, const struct plena_dec_weights *w,
                         uint32_t n_run, uint32_t max_pos, int act_bf16, struct plena_err *err)
{
    memset(s, 0, sizeof *s);
    const struct plena_dec_config *c = &w->cfg;
    s->w = w;
    s->n_run = n_run;
    s->max_pos = max_pos ? max_pos : 1;
    s->act_bf16 = act_bf16;
    if (c->head_dim / 2 > 2048)
        return PLENA_FAIL(err, PLENA_E_INPUT, "config.json", "head_dim %u above 4096", c->head_dim);
    const size_t KD = plena_dec_kdim(c), VD = plena_dec_vdim(c);
    const size_t QD =
        plena_dec_qdim(c) > plena_dec_attdim(c) ? plena_dec_qdim(c) : plena_dec_attdim(c);
    size_t I = c->inter > c->moe_inter ? c->inter : c->moe_inter;
    if (c->shared_inter > I) I = c->shared_inter;
    const size_t cache = (size_t)(n_run ? n_run : 1) * s->max_pos * KD;
    s->kcache = plena_calloc(cache, sizeof(float));
    s->vcache = plena_calloc((size_t)(n_run ? n_run : 1) * s->max_pos * VD, sizeof(float));
    /* MLA scratch for a prefill block (no longer than the sample) */
    const uint32_t block = s->max_pos < PB ? s->max_pos : PB;
    if (c->mla && !(s->mla = plena_calloc(plena_mla_scratch(c, block), sizeof(float)))) {
        plena_dec_state_free(s);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "forward", "out of memory");
    }
    s->h = plena_calloc(c->hidden, sizeof(float));
    s->x = plena_calloc(c->hidden, sizeof(float));
    s->tmp = plena_calloc(c->hidden, sizeof(float));
    s->y = plena_calloc(c->hidden, sizeof(float));
    s->q = plena_calloc(QD, sizeof(float));
    s->att = plena_calloc(QD, sizeof(float));
    s->scores = plena_calloc(s->max_pos, sizeof(float));
    s->gate = plena_calloc(I, sizeof(float));
    s->up = plena_calloc(I, sizeof(float));
    s->act = plena_calloc(I, sizeof(float));
    s->logits = plena_calloc(c->n_experts, sizeof(float));
    s->vocab_logits = plena_calloc(c->vocab, sizeof(float));
    s->ids = plena_calloc((size_t)(n_run ? n_run : 1) * c->top_k, sizeof *s->ids);
    s->rw = plena_calloc((size_t)(n_run ? n_run : 1) * c->top_k, sizeof *s->rw);
    if (!s->kcache || !s->vcache || !s->h || !s->x || !s->tmp || !s->y || !s->q || !s->att ||
        !s->scores || !s->gate || !s->up || !s->act || !s->logits || !s->vocab_logits || !s->ids ||
        !s->rw) {
        plena_dec_state_free(s);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "forward", "out of memory (KV cache of %zu floats)",
                          cache);
    }
    return 0;
}

void plena_dec_state_free(struct plena_dec_state *s)
{
    if (!s) return;
    float *all[] = {s->kcache, s->vcache,       s->h,    s->x,  s->q,   s->att,
                    s->scores, s->tmp,          s->gate, s->up, s->act, s->y,
                    s->logits, s->vocab_logits, s->rw,   s->mla};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        plena_free(all[i]);
    plena_free(s->ids);
    plena_free(s->scr);
    memset(s, 0, sizeof *s);
}

/* ---- batched prefill: layer by layer over blocks of tokens ---- */

/* One thread's expert scratch: the gathered tokens, gate, up, output. */
struct pf_ws {
    float *xg, *g, *u, *eo;
};

struct pf {
    float *h, *x, *q, *att, *tmp, *y, *logits, *cs, *sn, *out;
    uint32_t parts;
    struct pf_ws *ws; /* [parts] */
};

static void pf_free(struct pf *b)
{
    float *all[] = {b->h, b->x, b->q, b->att, b->tmp, b->y, b->logits, b->cs, b->sn, b->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        plena_free(all[i]);
    for (uint32_t p = 0; b->ws && p < b->parts; p++) {
        plena_free(b->ws[p].xg), plena_free(b->ws[p].g);
        plena_free(b->ws[p].u), plena_free(b->ws[p].eo);
    }
    plena_free(b->ws);
}

/* Scratch for blocks of up to cap tokens and `parts` threads. */
static int pf_alloc(struct pf *b, const struct plena_dec_config *c, size_t cap, uint32_t parts)
{
    const size_t H = c->hidden, K = c->top_k;
    const size_t QD =
        plena_dec_qdim(c) > plena_dec_attdim(c) ? plena_dec_qdim(c) : plena_dec_attdim(c);
    size_t I = c->inter > c->moe_inter ? c->inter : c->moe_inter;
    if (c->shared_inter > I) I = c->shared_inter;
    memset(b, 0, sizeof *b);
    b->h = plena_calloc(cap * H, sizeof(float));
    b->x = plena_calloc(cap * H, sizeof(float));
    b->q = plena_calloc(cap * QD, sizeof(float));
    b->att = plena_calloc(cap * QD, sizeof(float));
    b->tmp = plena_calloc(cap * H, sizeof(float));
    b->y = plena_calloc(cap * H, sizeof(float));
    b->logits = plena_calloc(cap * (size_t)c->n_experts, sizeof(float));
    b->cs = plena_calloc(cap * (size_t)c->head_dim / 2, sizeof(float));
    b->sn = plena_calloc(cap * (size_t)c->head_dim / 2, sizeof(float));
    b->out = plena_calloc(cap * K * H, sizeof(float));
    b->ws = plena_calloc(parts, sizeof *b->ws);
    int ok = b->h && b->x && b->q && b->att && b->tmp && b->y && b->logits && b->cs && b->sn &&
             b->out && b->ws;
    if (b->ws) b->parts = parts;
    for (uint32_t p = 0; ok && p < parts; p++) {
        struct pf_ws *w = &b->ws[p];
        w->xg = plena_calloc(cap * H, sizeof(float));
        w->g = plena_calloc(cap * I, sizeof(float));
        w->u = plena_calloc(cap * I, sizeof(float));
        w->eo = plena_calloc(cap * H, sizeof(float));
        ok = w->xg && w->g && w->u && w->eo;
    }
    return ok ? 0 : -1;
}

/* Y[m][H] = down(silu(gate X) * up X) for m tokens X[m][H] (G, U: [m][I]
 * scratch), every product split over `pool` (NULL: this thread), the
 * stores of the token-by-token mlp(). */
static void mlp_rows(const struct plena_dec_state *s, struct plena_pool *pool,
                     const struct plena_mat *g, const struct plena_mat *u,
                     const struct plena_mat *d, const float *X, uint32_t m, float *G, float *U,
                     float *Y)
{
    const uint32_t H = d->rows, I = g->rows;
    plena_ckpt_matmul(pool, g, X, H, NULL, m, G, I);
    plena_ckpt_matmul(pool, u, X, H, NULL, m, U, I);
    store(s, G, (size_t)m * I);
    store(s, U, (size_t)m * I);
    for (size_t i = 0; i < (size_t)m * I; i++)
        G[i] = silu(G[i]) * U[i];
    store(s, G, (size_t)m * I);
    plena_ckpt_matmul(pool, d, G, I, NULL, m, Y, H);
    store(s, Y, (size_t)m * H);
}

struct ex_job {
    const struct plena_dec_state *s;
    struct pf *b;
    uint32_t l, nb;
    const uint32_t *ids;
};

/* One whole expert, taken by whichever thread is free (plena_pool_for): its
 * tokens in one batch (this thread's scratch), outputs into their
 * (token, rank) slots of b->out. */
static int ex_item(void *ctx, uint32_t e, uint32_t part, struct plena_err *err)
{
    (void)err;
    const struct ex_job *j = ctx;
    const struct plena_dec_config *c = &j->s->w->cfg;
    const struct plena_dec_layer *y = &j->s->w->layers[j->l];
    const uint32_t H = c->hidden, K = c->top_k;
    struct pf_ws *w = &j->b->ws[part];
    uint32_t m = 0;
    for (uint32_t i = 0; i < j->nb * K; i++)
        if (j->ids[i] == e)
            memcpy(w->xg + (size_t)m++ * H, j->b->x + (size_t)(i / K) * H, H * sizeof(float));
    if (!m) return 0;
    mlp_rows(j->s, NULL, &y->eg[e], &y->eu[e], &y->ed[e], w->xg, m, w->g, w->u, w->eo);
    /* the expert is done for this block: its pages leave the resident set
     * (the page cache keeps them), so peak RSS stays near the attention
     * weights plus the experts in flight, not the whole checkpoint */
    plena_mat_release(&y->eg[e]);
    plena_mat_release(&y->eu[e]);
    plena_mat_release(&y->ed[e]);
    m = 0;
    for (uint32_t i = 0; i < j->nb * K; i++)
        if (j->ids[i] == e)
            memcpy(j->b->out + (size_t)i * H, w->eo + (size_t)m++ * H, H * sizeof(float));
    return 0;
}

/* The routed experts of layer l for nb tokens, then each token's sum in
 * rank order. */
static int pf_experts(struct plena_dec_state *s, struct pf *b, uint32_t l, uint32_t nb,
                      const uint32_t *ids, const float *rw, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t H = c->hidden, K = c->top_k;
    struct ex_job j = {.s = s, .b = b, .l = l, .nb = nb, .ids = ids};
    /* b->parts scratches: one per thread of s->pool */
    int rc = plena_pool_for(b->parts > 1 ? s->pool : NULL, c->n_experts, ex_item, &j, err);
    if (rc) return rc;
    for (uint32_t t = 0; t < nb; t++) {
        float *yt = b->y + (size_t)t * H;
        memset(yt, 0, H * sizeof *yt);
        plena_ckpt_axpy_rows(yt, rw + t * K, b->out + (size_t)t * K * H, H, K, H);
    }
    return 0;
}

static int pf_moe(struct plena_dec_state *s, struct pf *b, uint32_t l, uint32_t nb, uint32_t *ids,
                  float *rw, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, E = c->n_experts, K = c->top_k;
    struct pf_ws *w = &b->ws[0];
    if (c->dense[l]) {
        mlp_rows(s, s->pool, &y->dg, &y->du, &y->dd, b->x, nb, w->g, w->u, b->y);
        return 0;
    }
    mm(s, &y->router, b->x, H, NULL, nb, b->logits, E);
    store(s, b->logits, (size_t)nb * E);
    for (uint32_t t = 0; t < nb; t++)
        if (plena_dec_route(c, b->logits + (size_t)t * E, y->e_bias, ids + t * K, rw + t * K, err))
            return err->code;
    int rc = pf_experts(s, b, l, nb, ids, rw, err);
    if (rc) return rc;
    if (c->shared_inter) {
        mlp_rows(s, s->pool, &y->sg, &y->su, &y->sd, b->x, nb, w->g, w->u, w->eo);
        for (uint32_t t = 0; t < nb; t++) {
            const float *x = b->x + (size_t)t * H;
            float z = 0, gate = 1.0f; /* DeepSeek's shared experts have no gate */
            for (uint32_t i = 0; y->shared_gate && i < H; i++)
                z += x[i] * y->shared_gate[i];
            if (y->shared_gate) gate = sigmoid(z);
            plena_ckpt_axpy(b->y + (size_t)t * H, gate, w->eo + (size_t)t * H, H);
        }
    }
    store(s, b->y, (size_t)nb * H);
    return 0;
}

/* Layer l for the block's nb tokens at positions s->pos .. s->pos + nb - 1. */
static int pf_layer(struct plena_dec_state *s, struct pf *b, uint32_t l, uint32_t nb, uint32_t *ids,
                    float *rw, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D;
    for (uint32_t t = 0; t < nb; t++)
        rmsnorm(b->h + (size_t)t * H, y->in_norm, H, c->eps, b->x + (size_t)t * H);
    store(s, b->x, (size_t)nb * H);
    if (c->mla) {
        plena_mla_attention(s, l, nb, b->x, b->att, b->cs, b->sn);
        mm(s, &y->o, b->att, plena_dec_attdim(c), NULL, nb, b->tmp, H);
        goto residual;
    }
    float *k = s->kcache + ((size_t)l * s->max_pos + s->pos) * KD;
    float *v = s->vcache + ((size_t)l * s->max_pos + s->pos) * KD;
    mm(s, &y->q, b->x, H, y->bq, nb, b->q, QD);
    mm(s, &y->k, b->x, H, y->bk, nb, k, KD);
    mm(s, &y->v, b->x, H, y->bv, nb, v, KD);
    store(s, b->q, (size_t)nb * QD);
    store(s, k, (size_t)nb * KD);
    store(s, v, (size_t)nb * KD);
    for (uint32_t t = 0; t < nb; t++)
        qk_norm_rope(s, l, b->q + (size_t)t * QD, k + (size_t)t * KD, b->cs + (size_t)t * D / 2,
                     b->sn + (size_t)t * D / 2);
    store(s, b->q, (size_t)nb * QD);
    store(s, k, (size_t)nb * KD);
    if (attend(s, l, s->pos, nb, b->q, b->att, err)) return err->code;
    mm(s, &y->o, b->att, QD, NULL, nb, b->tmp, H);
residual:
    store(s, b->tmp, (size_t)nb * H);
    for (size_t i = 0; i < (size_t)nb * H; i++)
        b->h[i] += b->tmp[i];
    store(s, b->h, (size_t)nb * H);
    for (uint32_t t = 0; t < nb; t++)
        rmsnorm(b->h + (size_t)t * H, y->post_norm, H, c->eps, b->x + (size_t)t * H);
    store(s, b->x, (size_t)nb * H);
    if (pf_moe(s, b, l, nb, ids, rw, err)) return err->code;
    for (size_t i = 0; i < (size_t)nb * H; i++)
        b->h[i] += b->y[i];
    store(s, b->h, (size_t)nb * H);
    for (uint32_t t = 0; t < nb; t++)
        if (!finite_row(b->h + (size_t)t * H, H))
            return PLENA_FAIL(err, PLENA_E_FAILED, "forward",
                              "layer %u position %u: the hidden state is not finite", l,
                              s->pos + t);
    return 0;
}

static int pf_block(struct plena_dec_state *s, struct pf *b, const uint32_t *tokens, uint32_t nb,
                    uint32_t n, uint32_t t0, uint32_t *ids, float *rw, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t H = c->hidden, D = c->head_dim, K = c->top_k;
    for (uint32_t t = 0; t < nb; t++) {
        if (tokens[t] >= c->vocab)
            return PLENA_FAIL(err, PLENA_E_INPUT, "input_ids", "token id %u is not in [0, %u)",
                              tokens[t], c->vocab);
        if (rope_angles(s, s->pos + t, b->cs + (size_t)t * D / 2, b->sn + (size_t)t * D / 2, err))
            return err->code;
        plena_mat_row(&s->w->embed, tokens[t], b->h + (size_t)t * H);
    }
    store(s, b->h, (size_t)nb * H);
    for (uint32_t l = 0; l < s->n_run; l++)
        if (pf_layer(s, b, l, nb, ids + ((size_t)l * n + t0) * K, rw + ((size_t)l * n + t0) * K,
                     err))
            return err->code;
    return 0;
}

int plena_dec_prefill(struct plena_dec_state *s, const uint32_t *tokens, uint32_t n, uint32_t *ids,
                      float *rw, int want_next, uint32_t *next, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t H = c->hidden;
    if (s->pos + (uint64_t)n > s->max_pos)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "forward", "%u positions past the KV cache",
                          s->pos + n);
    struct pf b;
    if (pf_alloc(&b, c, n < PB ? (n ? n : 1) : PB, plena_pool_size(s->pool))) {
        pf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "forward", "out of memory");
    }
    int rc = 0;
    uint32_t last = 0;
    for (uint32_t t0 = 0; t0 < n && !rc; t0 += PB) {
        const uint32_t nb = n - t0 < PB ? n - t0 : PB;
        rc = pf_block(s, &b, tokens + t0, nb, n, t0, ids, rw, err);
        if (!rc) s->pos += nb, last = nb - 1;
        if (!rc && s->on_tokens) s->on_tokens(s->on_tokens_ctx, nb);
    }
    if (!rc && n) memcpy(s->h, b.h + (size_t)last * H, H * sizeof *s->h);
    pf_free(&b);
    if (!rc && want_next && n) rc = lm_head(s, next, err);
    return rc;
}
