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

struct mv_job {
    const float *W, *x, *b;
    uint32_t n_out, n_in;
    float *y;
};

/* Rows [lo, hi) of part `part`: eight-aligned pieces in part order. */
static void mv_part(void *ctx, uint32_t part, uint32_t parts)
{
    const struct mv_job *j = ctx;
    const uint32_t blocks = (j->n_out + 7) / 8, per = (blocks + parts - 1) / parts;
    uint32_t lo = part * per * 8, hi = lo + per * 8;
    if (hi > j->n_out) hi = j->n_out;
    if (lo >= hi) return;
    matvec(j->W + (size_t)lo * j->n_in, j->x, j->b ? j->b + lo : NULL, hi - lo, j->n_in, j->y + lo);
}

/* matvec split over the state's threads when the product is large enough
 * to pay for the hand-off (4096 MACs; the split never changes a value). */
static void mv(const struct plena_dec_state *s, const float *W, const float *x, const float *b,
               uint32_t n_out, uint32_t n_in, float *y)
{
    struct mv_job j = {W, x, b, n_out, n_in, y};
    if (plena_pool_size(s->pool) > 1 && (uint64_t)n_out * n_in >= 4096 && n_out >= 8)
        plena_pool_run(s->pool, mv_part, &j);
    else
        matvec(W, x, b, n_out, n_in, y);
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
static void attend(struct plena_dec_state *s, uint32_t l)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t D = c->head_dim, KD = c->kv_heads * D, group = c->heads / c->kv_heads;
    const float scale = 1.0f / sqrtf((float)D);
    const float *kc = s->kcache + (size_t)l * s->max_pos * KD,
                *vc = s->vcache + (size_t)l * s->max_pos * KD;
    for (uint32_t h = 0; h < c->heads; h++) {
        const float *q = s->q + (size_t)h * D;
        const uint32_t g = h / group;
        float m = -INFINITY;
        for (uint32_t j = 0; j <= s->pos; j++) {
            const float *k = kc + (size_t)j * KD + (size_t)g * D;
            float d = 0;
            for (uint32_t i = 0; i < D; i++)
                d += q[i] * k[i];
            s->scores[j] = d * scale;
            if (s->scores[j] > m) m = s->scores[j];
        }
        float sum = 0;
        for (uint32_t j = 0; j <= s->pos; j++)
            sum += (s->scores[j] = exp_f(s->scores[j] - m));
        float *out = s->att + (size_t)h * D;
        memset(out, 0, D * sizeof *out);
        for (uint32_t j = 0; j <= s->pos; j++) {
            const float p = s->scores[j] / sum, *v = vc + (size_t)j * KD + (size_t)g * D;
            for (uint32_t i = 0; i < D; i++)
                out[i] += p * v[i];
        }
    }
    store(s, s->att, (size_t)c->heads * D);
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
    if (c->qk_norm == 2) { /* OLMoE: over the whole projection, before the head split */
        rmsnorm(s->q, y->q_norm, QD, c->eps, s->q);
        rmsnorm(k, y->k_norm, KD, c->eps, k);
    }
    for (uint32_t h = 0; h < c->heads; h++) {
        if (c->qk_norm == 1)
            rmsnorm(s->q + (size_t)h * D, y->q_norm, D, c->eps, s->q + (size_t)h * D);
        rope(s->q + (size_t)h * D, D, cs, sn);
    }
    for (uint32_t h = 0; h < c->kv_heads; h++) {
        if (c->qk_norm == 1) rmsnorm(k + (size_t)h * D, y->k_norm, D, c->eps, k + (size_t)h * D);
        rope(k + (size_t)h * D, D, cs, sn);
    }
    store(s, s->q, QD);
    store(s, k, KD);
    attend(s, l);
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

int plena_dec_step(struct plena_dec_state *s, uint32_t token, int want_next, uint32_t *next,
                   struct plena_err *err)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t H = c->hidden, D = c->head_dim;
    if (token >= c->vocab)
        return PLENA_FAIL(err, PLENA_E_INPUT, "input_ids", "token id %u is not in [0, %u)", token,
                          c->vocab);
    if (s->pos >= s->max_pos)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "forward", "position %u past the KV cache",
                          s->pos);
    /* cos/sin of this position: angle = (float)pos * inv_freq_i in f32 */
    float cs[2048], sn[2048];
    for (uint32_t i = 0; i < D / 2; i++) {
        double sd = 0, cd = 1;
        if (plena_det_sincos((double)((float)s->pos * s->w->inv_freq[i]), &sd, &cd))
            return PLENA_FAIL(err, PLENA_E_FAILED, "forward", "RoPE angle out of range");
        cs[i] = (float)cd, sn[i] = (float)sd;
    }
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
    if (!want_next) return 0;
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
