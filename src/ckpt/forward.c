/* The f32 forward pass of docs/traces.md "What is computed": one token at a
 * time through a pre-norm decoder with a KV cache, every sum in increasing
 * index order, no FMA (-ffp-contract=off on every target), transcendental
 * functions from num/detmath only, so rows are byte-identical on every
 * IEEE-754 machine. Prefill and decode run the same step function, so the KV
 * cache cannot differ from recomputation. */
#include <math.h>
#include <string.h>

#include "ckpt/decoder.h"
#include "ckpt/pool.h"
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

/* With --act bf16 every stored activation is rounded to BF16 (RNE). */
static void store(const struct plena_dec_state *s, float *v, size_t n)
{
    if (s->act_bf16)
        for (size_t i = 0; i < n; i++)
            v[i] = plena_num_round_bf16(v[i]);
}

/* y[o] = sum_i W[o][i] x[i] (+ b[o]), i increasing. Eight outputs share each
 * pass over x (eight independent add chains hide the add latency); each
 * output's own sum keeps its order, so the result is that of the plain
 * loop. */
static void matvec(const float *W, const float *x, const float *b, uint32_t n_out, uint32_t n_in,
                   float *y)
{
    uint32_t o = 0;
    for (; o + 8 <= n_out; o += 8) {
        const float *w = W + (size_t)o * n_in;
        float a[8] = {0};
        for (uint32_t i = 0; i < n_in; i++) {
            const float xi = x[i];
            for (int r = 0; r < 8; r++)
                a[r] += w[(size_t)r * n_in + i] * xi;
        }
        for (int r = 0; r < 8; r++)
            y[o + r] = a[r];
    }
    for (; o < n_out; o++) {
        const float *w = W + (size_t)o * n_in;
        float s = 0;
        for (uint32_t i = 0; i < n_in; i++)
            s += w[i] * x[i];
        y[o] = s;
    }
    if (b)
        for (o = 0; o < n_out; o++)
            y[o] += b[o];
}

/* Y[t][o] = sum_i W[o][i] X[t][i] (+ b[o]) for T tokens (row strides ldx,
 * ldy): four outputs by four tokens share each pass over i, and each output's
 * sum is the same sequence of operations as matvec's, so a batched prefill
 * gives the values of the token-by-token one. */
static void matmul(const float *W, const float *X, size_t ldx, const float *b, uint32_t n_out,
                   uint32_t n_in, uint32_t T, float *Y, size_t ldy)
{
    uint32_t t = 0;
    for (; t + 4 <= T; t += 4) {
        const float *x0 = X + t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        uint32_t o = 0;
        for (; o + 4 <= n_out; o += 4) {
            const float *w = W + (size_t)o * n_in;
            float a[4][4] = {{0}};
            for (uint32_t i = 0; i < n_in; i++) {
                const float xv[4] = {x0[i], x1[i], x2[i], x3[i]};
                for (int r = 0; r < 4; r++) {
                    const float wv = w[(size_t)r * n_in + i];
                    for (int j = 0; j < 4; j++)
                        a[r][j] += wv * xv[j];
                }
            }
            for (int r = 0; r < 4; r++)
                for (int j = 0; j < 4; j++)
                    Y[(t + j) * ldy + o + r] = a[r][j];
        }
        for (; o < n_out; o++)
            for (int j = 0; j < 4; j++)
                matvec(W + (size_t)o * n_in, X + (t + j) * ldx, NULL, 1, n_in,
                       Y + (t + j) * ldy + o);
    }
    for (; t < T; t++)
        matvec(W, X + t * ldx, NULL, n_out, n_in, Y + t * ldy);
    if (b)
        for (t = 0; t < T; t++)
            for (uint32_t o = 0; o < n_out; o++)
                Y[t * ldy + o] += b[o];
}

struct mm_job {
    const float *W, *X, *b;
    size_t ldx, ldy;
    uint32_t n_out, n_in, T;
    float *Y;
};

static void mm_part(void *ctx, uint32_t part, uint32_t parts)
{
    const struct mm_job *j = ctx;
    const uint32_t blocks = (j->n_out + 3) / 4, per = (blocks + parts - 1) / parts;
    uint32_t lo = part * per * 4, hi = lo + per * 4;
    if (hi > j->n_out) hi = j->n_out;
    if (lo >= hi) return;
    matmul(j->W + (size_t)lo * j->n_in, j->X, j->ldx, j->b ? j->b + lo : NULL, hi - lo, j->n_in,
           j->T, j->Y + lo, j->ldy);
}

/* matmul split by output rows over the state's threads. */
static void mm(const struct plena_dec_state *s, const float *W, const float *X, size_t ldx,
               const float *b, uint32_t n_out, uint32_t n_in, uint32_t T, float *Y, size_t ldy)
{
    struct mm_job j = {W, X, b, ldx, ldy, n_out, n_in, T, Y};
    if (plena_pool_size(s->pool) > 1 && (uint64_t)n_out * n_in * T >= 4096 && n_out >= 8)
        plena_pool_run(s->pool, mm_part, &j);
    else
        matmul(W, X, ldx, b, n_out, n_in, T, Y, ldy);
}

/* One token's matrix-vector product (matmul of one row: matvec). */
static void mv(const struct plena_dec_state *s, const float *W, const float *x, const float *b,
               uint32_t n_out, uint32_t n_in, float *y)
{
    mm(s, W, x, n_in, b, n_out, n_in, 1, y, n_out);
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

int plena_dec_route(const struct plena_dec_config *cfg, const float *logits, uint32_t *ids,
                    float *w, struct plena_err *err)
{
    const uint32_t E = cfg->n_experts, K = cfg->top_k;
    for (uint32_t e = 0; e < E; e++)
        if (!isfinite(logits[e]))
            return PLENA_FAIL(err, PLENA_E_FAILED, "router", "logit of expert %u is not finite", e);
    for (uint32_t j = 0; j < K; j++) {
        uint32_t best = E;
        for (uint32_t e = 0; e < E; e++) {
            int taken = 0;
            for (uint32_t i = 0; i < j && !taken; i++)
                taken = ids[i] == e;
            /* strictly greater: on equal logits the lower id stays */
            if (!taken && (best == E || logits[e] > logits[best])) best = e;
        }
        ids[j] = best;
    }
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
static void mlp(struct plena_dec_state *s, const float *g, const float *u, const float *d,
                uint32_t I, const float *x, float *y)
{
    const uint32_t H = s->w->cfg.hidden;
    mv(s, g, x, NULL, I, H, s->gate);
    mv(s, u, x, NULL, I, H, s->up);
    store(s, s->gate, I);
    store(s, s->up, I);
    for (uint32_t i = 0; i < I; i++)
        s->act[i] = silu(s->gate[i]) * s->up[i];
    store(s, s->act, I);
    mv(s, d, s->act, NULL, H, I, y);
    store(s, y, H);
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
        mlp(s, y->dg, y->du, y->dd, c->inter, s->x, s->y);
        return 0;
    }
    mv(s, y->router, s->x, NULL, c->n_experts, H, s->logits);
    store(s, s->logits, c->n_experts);
    if (plena_dec_route(c, s->logits, ids, rw, err)) return err->code;
    for (uint32_t j = 0; j < K; j++) {
        mlp(s, y->eg[ids[j]], y->eu[ids[j]], y->ed[ids[j]], c->moe_inter, s->x, s->tmp);
        for (uint32_t i = 0; i < H; i++)
            s->y[i] += rw[j] * s->tmp[i];
    }
    if (c->shared_inter) {
        float z = 0;
        for (uint32_t i = 0; i < H; i++)
            z += s->x[i] * y->shared_gate[i];
        float gate = sigmoid(z);
        mlp(s, y->sg, y->su, y->sd, c->shared_inter, s->x, s->tmp);
        for (uint32_t i = 0; i < H; i++)
            s->y[i] += gate * s->tmp[i];
    }
    store(s, s->y, H);
    return 0;
}

/* Attention of the current position over 0..pos (GQA), into s->att. */
static void attend_at(const struct plena_dec_state *s, uint32_t l, uint32_t pos, const float *qv,
                      float *att, float *scores)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t D = c->head_dim, KD = c->kv_heads * D, group = c->heads / c->kv_heads;
    const float scale = 1.0f / sqrtf((float)D);
    const float *kc = s->kcache + (size_t)l * s->max_pos * KD,
                *vc = s->vcache + (size_t)l * s->max_pos * KD;
    for (uint32_t h = 0; h < c->heads; h++) {
        const float *q = qv + (size_t)h * D;
        const uint32_t g = h / group;
        float m = -INFINITY;
        for (uint32_t j = 0; j <= pos; j++) {
            const float *k = kc + (size_t)j * KD + (size_t)g * D;
            float d = 0;
            for (uint32_t i = 0; i < D; i++)
                d += q[i] * k[i];
            scores[j] = d * scale;
            if (scores[j] > m) m = scores[j];
        }
        float sum = 0;
        for (uint32_t j = 0; j <= pos; j++)
            sum += (scores[j] = exp_f(scores[j] - m));
        float *out = att + (size_t)h * D;
        memset(out, 0, D * sizeof *out);
        for (uint32_t j = 0; j <= pos; j++) {
            const float p = scores[j] / sum, *v = vc + (size_t)j * KD + (size_t)g * D;
            for (uint32_t i = 0; i < D; i++)
                out[i] += p * v[i];
        }
    }
    store(s, att, (size_t)c->heads * D);
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

static void attention(struct plena_dec_state *s, uint32_t l, const float *cs, const float *sn)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D;
    rmsnorm(s->h, y->in_norm, H, c->eps, s->x);
    store(s, s->x, H);
    float *k = s->kcache + ((size_t)l * s->max_pos + s->pos) * KD;
    float *v = s->vcache + ((size_t)l * s->max_pos + s->pos) * KD;
    mv(s, y->q, s->x, y->bq, QD, H, s->q);
    mv(s, y->k, s->x, y->bk, KD, H, k);
    mv(s, y->v, s->x, y->bv, KD, H, v);
    store(s, s->q, QD);
    store(s, k, KD);
    store(s, v, KD);
    qk_norm_rope(s, l, s->q, k, cs, sn);
    store(s, s->q, QD);
    store(s, k, KD);
    attend_at(s, l, s->pos, s->q, s->att, s->scores);
    mv(s, y->o, s->att, NULL, H, QD, s->tmp);
    store(s, s->tmp, H);
    for (uint32_t i = 0; i < H; i++)
        s->h[i] += s->tmp[i];
    store(s, s->h, H);
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
    mv(s, s->w->lm_head, s->x, NULL, c->vocab, H, s->vocab_logits);
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
    memcpy(s->h, s->w->embed + (size_t)token * H, H * sizeof *s->h);
    store(s, s->h, H);
    for (uint32_t l = 0; l < s->n_run; l++) {
        attention(s, l, cs, sn);
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
    const size_t KD = (size_t)c->kv_heads * c->head_dim, QD = (size_t)c->heads * c->head_dim;
    size_t I = c->inter > c->moe_inter ? c->inter : c->moe_inter;
    if (c->shared_inter > I) I = c->shared_inter;
    const size_t cache = (size_t)(n_run ? n_run : 1) * s->max_pos * KD;
    s->kcache = plena_calloc(cache, sizeof(float));
    s->vcache = plena_calloc(cache, sizeof(float));
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
                    s->logits, s->vocab_logits, s->rw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        plena_free(all[i]);
    plena_free(s->ids);
    memset(s, 0, sizeof *s);
}

/* ---- batched prefill: layer by layer over blocks of tokens ---- */

#define PB 32 /* tokens per block: bounds the scratch (PB x K expert outputs) */

struct pf {
    float *h, *x, *q, *att, *tmp, *y, *logits, *cs, *sn, *xg, *g, *u, *eo, *out;
    uint32_t *slot; /* per expert: the (token, rank) slots, token order */
};

static void pf_free(struct pf *b)
{
    float *all[] = {b->h,  b->x,  b->q,  b->att, b->tmp, b->y,  b->logits,
                    b->cs, b->sn, b->xg, b->g,   b->u,   b->eo, b->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        plena_free(all[i]);
    plena_free(b->slot);
}

static int pf_alloc(struct pf *b, const struct plena_dec_config *c)
{
    const size_t H = c->hidden, QD = (size_t)c->heads * c->head_dim, K = c->top_k;
    size_t I = c->inter > c->moe_inter ? c->inter : c->moe_inter;
    memset(b, 0, sizeof *b);
    b->h = plena_calloc(PB * H, sizeof(float));
    b->x = plena_calloc(PB * H, sizeof(float));
    b->q = plena_calloc(PB * QD, sizeof(float));
    b->att = plena_calloc(PB * QD, sizeof(float));
    b->tmp = plena_calloc(PB * H, sizeof(float));
    b->y = plena_calloc(PB * H, sizeof(float));
    b->logits = plena_calloc(PB * (size_t)c->n_experts, sizeof(float));
    b->cs = plena_calloc(PB * (size_t)c->head_dim / 2, sizeof(float));
    b->sn = plena_calloc(PB * (size_t)c->head_dim / 2, sizeof(float));
    b->xg = plena_calloc(PB * H, sizeof(float));
    b->g = plena_calloc(PB * I, sizeof(float));
    b->u = plena_calloc(PB * I, sizeof(float));
    b->eo = plena_calloc(PB * H, sizeof(float));
    b->out = plena_calloc(PB * K * H, sizeof(float));
    b->slot = plena_calloc(PB, sizeof *b->slot);
    return b->h && b->x && b->q && b->att && b->tmp && b->y && b->logits && b->cs && b->sn &&
                   b->xg && b->g && b->u && b->eo && b->out && b->slot
               ? 0
               : -1;
}

/* The routed experts of layer l for nb tokens: each expert's tokens in one
 * batch, outputs into their (token, rank) slot, then summed in rank order. */
static void pf_experts(struct plena_dec_state *s, struct pf *b, uint32_t l, uint32_t nb,
                       const uint32_t *ids, const float *rw)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, K = c->top_k, I = c->moe_inter;
    for (uint32_t e = 0; e < c->n_experts; e++) {
        uint32_t m = 0;
        for (uint32_t t = 0; t < nb; t++)
            for (uint32_t k = 0; k < K; k++)
                if (ids[t * K + k] == e) {
                    b->slot[m] = t * K + k;
                    memcpy(b->xg + (size_t)m * H, b->x + (size_t)t * H, H * sizeof(float));
                    m++;
                }
        if (!m) continue;
        mm(s, y->eg[e], b->xg, H, NULL, I, H, m, b->g, I);
        mm(s, y->eu[e], b->xg, H, NULL, I, H, m, b->u, I);
        store(s, b->g, (size_t)m * I);
        store(s, b->u, (size_t)m * I);
        for (size_t i = 0; i < (size_t)m * I; i++)
            b->g[i] = silu(b->g[i]) * b->u[i];
        store(s, b->g, (size_t)m * I);
        mm(s, y->ed[e], b->g, I, NULL, H, I, m, b->eo, H);
        store(s, b->eo, (size_t)m * H);
        for (uint32_t j = 0; j < m; j++)
            memcpy(b->out + (size_t)b->slot[j] * H, b->eo + (size_t)j * H, H * sizeof(float));
    }
    for (uint32_t t = 0; t < nb; t++) {
        float *yt = b->y + (size_t)t * H;
        memset(yt, 0, H * sizeof *yt);
        for (uint32_t k = 0; k < K; k++) {
            const float *o = b->out + ((size_t)t * K + k) * H;
            for (uint32_t i = 0; i < H; i++)
                yt[i] += rw[t * K + k] * o[i];
        }
    }
}

static int pf_moe(struct plena_dec_state *s, struct pf *b, uint32_t l, uint32_t nb, uint32_t *ids,
                  float *rw, struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, E = c->n_experts, K = c->top_k;
    if (c->dense[l]) {
        for (uint32_t t = 0; t < nb; t++)
            mlp(s, y->dg, y->du, y->dd, c->inter, b->x + (size_t)t * H, b->y + (size_t)t * H);
        return 0;
    }
    mm(s, y->router, b->x, H, NULL, E, H, nb, b->logits, E);
    store(s, b->logits, (size_t)nb * E);
    for (uint32_t t = 0; t < nb; t++)
        if (plena_dec_route(c, b->logits + (size_t)t * E, ids + t * K, rw + t * K, err))
            return err->code;
    pf_experts(s, b, l, nb, ids, rw);
    for (uint32_t t = 0; c->shared_inter && t < nb; t++) {
        const float *x = b->x + (size_t)t * H;
        float z = 0, *yt = b->y + (size_t)t * H;
        for (uint32_t i = 0; i < H; i++)
            z += x[i] * y->shared_gate[i];
        float gate = sigmoid(z);
        mlp(s, y->sg, y->su, y->sd, c->shared_inter, x, s->tmp);
        for (uint32_t i = 0; i < H; i++)
            yt[i] += gate * s->tmp[i];
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
    float *k = s->kcache + ((size_t)l * s->max_pos + s->pos) * KD;
    float *v = s->vcache + ((size_t)l * s->max_pos + s->pos) * KD;
    mm(s, y->q, b->x, H, y->bq, QD, H, nb, b->q, QD);
    mm(s, y->k, b->x, H, y->bk, KD, H, nb, k, KD);
    mm(s, y->v, b->x, H, y->bv, KD, H, nb, v, KD);
    store(s, b->q, (size_t)nb * QD);
    store(s, k, (size_t)nb * KD);
    store(s, v, (size_t)nb * KD);
    for (uint32_t t = 0; t < nb; t++)
        qk_norm_rope(s, l, b->q + (size_t)t * QD, k + (size_t)t * KD, b->cs + (size_t)t * D / 2,
                     b->sn + (size_t)t * D / 2);
    store(s, b->q, (size_t)nb * QD);
    store(s, k, (size_t)nb * KD);
    for (uint32_t t = 0; t < nb; t++)
        attend_at(s, l, s->pos + t, b->q + (size_t)t * QD, b->att + (size_t)t * QD, s->scores);
    mm(s, y->o, b->att, QD, NULL, H, QD, nb, b->tmp, H);
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
        memcpy(b->h + (size_t)t * H, s->w->embed + (size_t)tokens[t] * H, H * sizeof(float));
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
    if (pf_alloc(&b, c)) {
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
