/* The weights of a decoder from a checkpoint: every tensor named and shaped
 * as config.json implies (docs/traces.md "Tensors"). Matrices stay in the
 * checkpoint's mmap (BF16 and F32 read in place by ckpt/matmul.c, F16
 * widened into an owned F32 copy); norms and biases are converted to f32. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ckpt/decoder.h"
#include "common/alloc.h"
#include "num/detmath.h"

/* Every tensor of the configuration, in one place: the loader fills the
 * slots, the tiny-checkpoint writer draws the values (tiny.c). */
struct walk {
    plena_dec_tensor_fn fn;
    void *ctx;
    int rc;
};

static void visit(struct walk *W, void *slot, enum plena_dec_tensor_kind kind, uint64_t d0,
                  uint64_t d1, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void visit(struct walk *W, void *slot, enum plena_dec_tensor_kind kind, uint64_t d0,
                  uint64_t d1, const char *fmt, ...)
{
    if (W->rc) return;
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    W->rc = W->fn(W->ctx, name, kind, d0, d1, slot);
}

static struct plena_mat *slot_array(struct walk *W, struct plena_mat **p, uint32_t n, int have)
{
    if (!have || W->rc) return NULL;
    if (!*p && !(*p = plena_calloc(n, sizeof **p))) W->rc = PLENA_E_NOMEM;
    return *p;
}

#define SLOT(y, f)  ((y) ? &(y)->f : NULL)
#define SLOTI(a, e) ((a) ? &(a)[e] : NULL)

static void walk_moe(struct walk *W, const struct plena_dec_config *c, uint32_t l,
                     struct plena_dec_layer *y)
{
    const uint32_t H = c->hidden, I = c->moe_inter, E = c->n_experts;
    const struct plena_dec_arch_info *a = plena_dec_arch_info(c->arch);
    visit(W, SLOT(y, router), PLENA_DEC_T_MATRIX, E, H, "model.layers.%u.%s.gate.weight", l,
          a->block);
    if (c->ext_router && c->router.select_bias != PLENA_SELECT_BIAS_NONE)
        /* drawn as a bias of fan-in H */
        visit(W, SLOT(y, e_bias), PLENA_DEC_T_BIAS, E, H,
              "model.layers.%u.%s.gate.e_score_correction_bias", l, a->block);
    struct plena_mat *eg = slot_array(W, y ? &y->eg : NULL, E, y != NULL),
                     *eu = slot_array(W, y ? &y->eu : NULL, E, y != NULL),
                     *ed = slot_array(W, y ? &y->ed : NULL, E, y != NULL);
    for (uint32_t e = 0; e < E && !W->rc; e++) {
        visit(W, SLOTI(eg, e), PLENA_DEC_T_MATRIX, I, H, "model.layers.%u.%s.experts.%u.%s.weight",
              l, a->block, e, a->gate);
        visit(W, SLOTI(eu, e), PLENA_DEC_T_MATRIX, I, H, "model.layers.%u.%s.experts.%u.%s.weight",
              l, a->block, e, a->up);
        visit(W, SLOTI(ed, e), PLENA_DEC_T_MATRIX, H, I, "model.layers.%u.%s.experts.%u.%s.weight",
              l, a->block, e, a->down);
    }
    if (c->shared_inter) {
        /* Qwen2-MoE: shared_expert and its gate; DeepSeek: shared_experts
         * (n_shared fused to one MLP), no gate */
        const uint32_t S = c->shared_inter;
        const char *sh = c->shared_gated ? "shared_expert" : "shared_experts";
        visit(W, SLOT(y, sg), PLENA_DEC_T_MATRIX, S, H, "model.layers.%u.mlp.%s.gate_proj.weight",
              l, sh);
        visit(W, SLOT(y, su), PLENA_DEC_T_MATRIX, S, H, "model.layers.%u.mlp.%s.up_proj.weight", l,
              sh);
        visit(W, SLOT(y, sd), PLENA_DEC_T_MATRIX, H, S, "model.layers.%u.mlp.%s.down_proj.weight",
              l, sh);
        if (c->shared_gated)
            visit(W, SLOT(y, shared_gate), PLENA_DEC_T_VECTOR, 1, H,
                  "model.layers.%u.mlp.shared_expert_gate.weight", l);
    }
}

/* MLA projections (mla.c) */
static void walk_mla(struct walk *W, const struct plena_dec_config *c, uint32_t l,
                     struct plena_dec_layer *y)
{
    const uint32_t H = c->hidden, QD = plena_dec_qdim(c), R = c->head_dim, CL = c->kv_lora;
    const enum plena_dec_tensor_kind M = PLENA_DEC_T_MATRIX, N = PLENA_DEC_T_NORM;
    if (c->q_lora) {
        visit(W, SLOT(y, q_a), M, c->q_lora, H, "model.layers.%u.self_attn.q_a_proj.weight", l);
        visit(W, SLOT(y, q_a_norm), N, c->q_lora, 0,
              "model.layers.%u.self_attn.q_a_layernorm.weight", l);
        visit(W, SLOT(y, q_b), M, QD, c->q_lora, "model.layers.%u.self_attn.q_b_proj.weight", l);
    } else {
        visit(W, SLOT(y, q), M, QD, H, "model.layers.%u.self_attn.q_proj.weight", l);
    }
    visit(W, SLOT(y, kv_a), M, CL + R, H, "model.layers.%u.self_attn.kv_a_proj_with_mqa.weight", l);
    visit(W, SLOT(y, kv_a_norm), N, CL, 0, "model.layers.%u.self_attn.kv_a_layernorm.weight", l);
    visit(W, SLOT(y, kv_b), M, (uint64_t)c->heads * (c->nope + c->v_dim), CL,
          "model.layers.%u.self_attn.kv_b_proj.weight", l);
    visit(W, SLOT(y, o), M, H, plena_dec_attdim(c), "model.layers.%u.self_attn.o_proj.weight", l);
}

static void walk_layer(struct walk *W, const struct plena_dec_config *c, uint32_t l,
                       struct plena_dec_layer *y)
{
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D;
    const enum plena_dec_tensor_kind M = PLENA_DEC_T_MATRIX, N = PLENA_DEC_T_NORM,
                                     B = PLENA_DEC_T_BIAS;
    visit(W, SLOT(y, in_norm), N, H, 0, "model.layers.%u.input_layernorm.weight", l);
    if (c->mla) {
        walk_mla(W, c, l, y);
        goto mlp;
    }
    visit(W, SLOT(y, q), M, QD, H, "model.layers.%u.self_attn.q_proj.weight", l);
    visit(W, SLOT(y, k), M, KD, H, "model.layers.%u.self_attn.k_proj.weight", l);
    visit(W, SLOT(y, v), M, KD, H, "model.layers.%u.self_attn.v_proj.weight", l);
    visit(W, SLOT(y, o), M, H, QD, "model.layers.%u.self_attn.o_proj.weight", l);
    if (c->attn_bias) {
        /* a bias is drawn like its projection's weights (fan-in H) */
        visit(W, SLOT(y, bq), B, QD, H, "model.layers.%u.self_attn.q_proj.bias", l);
        visit(W, SLOT(y, bk), B, KD, H, "model.layers.%u.self_attn.k_proj.bias", l);
        visit(W, SLOT(y, bv), B, KD, H, "model.layers.%u.self_attn.v_proj.bias", l);
    }
    if (c->qk_norm) {
        /* per head [D] (Qwen3) or over the whole projection (OLMoE) */
        const uint32_t qn = c->qk_norm == 2 ? QD : D, kn = c->qk_norm == 2 ? KD : D;
        visit(W, SLOT(y, q_norm), N, qn, 0, "model.layers.%u.self_attn.q_norm.weight", l);
        visit(W, SLOT(y, k_norm), N, kn, 0, "model.layers.%u.self_attn.k_norm.weight", l);
    }
mlp:
    visit(W, SLOT(y, post_norm), N, H, 0, "model.layers.%u.post_attention_layernorm.weight", l);
    if (c->dense[l]) {
        visit(W, SLOT(y, dg), M, c->inter, H, "model.layers.%u.mlp.gate_proj.weight", l);
        visit(W, SLOT(y, du), M, c->inter, H, "model.layers.%u.mlp.up_proj.weight", l);
        visit(W, SLOT(y, dd), M, H, c->inter, "model.layers.%u.mlp.down_proj.weight", l);
    } else {
        walk_moe(W, c, l, y);
    }
}

int plena_dec_walk(const struct plena_dec_config *c, uint32_t n_layers, int need_head,
                   struct plena_dec_weights *w, plena_dec_tensor_fn fn, void *ctx)
{
    struct walk W = {fn, ctx, 0};
    visit(&W, w ? &w->embed : NULL, PLENA_DEC_T_MATRIX, c->vocab, c->hidden,
          "model.embed_tokens.weight");
    for (uint32_t l = 0; l < n_layers && !W.rc; l++) {
        if (w) w->n_loaded = l + 1; /* freed as loaded so far, also on failure */
        walk_layer(&W, c, l, w ? &w->layers[l] : NULL);
    }
    if (need_head) {
        visit(&W, w ? &w->final_norm : NULL, PLENA_DEC_T_NORM, c->hidden, 0, "model.norm.weight");
        if (!c->tie_embeddings)
            visit(&W, w ? &w->lm_head : NULL, PLENA_DEC_T_MATRIX, c->vocab, c->hidden,
                  "lm_head.weight");
    }
    return W.rc;
}

struct loader {
    const struct plena_ckpt *c;
    struct plena_err *err;
};

static int load_one(void *ctx, const char *name, enum plena_dec_tensor_kind kind, uint64_t d0,
                    uint64_t d1, void *slot)
{
    struct loader *L = ctx;
    const uint64_t shape[2] = {d0, d1};
    if (kind != PLENA_DEC_T_MATRIX) /* biases and norms are 1-D; d1 of a bias is its fan-in */
        return plena_ckpt_load(L->c, name, kind == PLENA_DEC_T_VECTOR ? 2 : 1, shape, slot, L->err);
    const struct plena_st_tensor *t;
    int rc = plena_ckpt_tensor(L->c, name, 2, shape, &t, L->err);
    if (rc) return rc;
    struct plena_mat *m = slot;
    if (t->dtype == PLENA_ST_F16) { /* no in-register F16 decode: an exact F32 copy */
        float *f;
        if ((rc = plena_ckpt_load(L->c, name, 2, shape, &f, L->err))) return rc;
        *m = plena_mat_f32(f, (uint32_t)d0, (uint32_t)d1, (size_t)d1);
        m->owned = f;
        return 0;
    }
    m->data = t->data, m->rows = (uint32_t)d0, m->cols = (uint32_t)d1, m->ld = (size_t)d1;
    m->type = t->dtype == PLENA_ST_BF16 ? PLENA_MAT_BF16 : PLENA_MAT_F32;
    m->owned = NULL, m->mapped = 1;
    return 0;
}

/* inv_freq_i = (float)det_exp(-(2i/D) det_log(theta)), in double, rounded once. */
static int rope_freqs(struct plena_dec_weights *w, struct plena_err *err)
{
    const uint32_t D = w->cfg.head_dim;
    w->inv_freq = plena_calloc(D / 2, sizeof *w->inv_freq);
    if (!w->inv_freq) return PLENA_FAIL(err, PLENA_E_NOMEM, "weights", "out of memory");
    double lt;
    if (plena_det_log(w->cfg.rope_theta, &lt))
        return PLENA_FAIL(err, PLENA_E_INPUT, "config.json", "rope_theta out of range");
    for (uint32_t i = 0; i < D / 2; i++) {
        double e;
        if (plena_det_exp(-((double)(2 * i) / (double)D) * lt, &e))
            return PLENA_FAIL(err, PLENA_E_INPUT, "config.json", "rope_theta out of range");
        w->inv_freq[i] = (float)e;
    }
    return 0;
}

int plena_dec_weights_load(const struct plena_ckpt *c, const struct plena_dec_config *cfg,
                           uint32_t n_layers, int need_head, struct plena_dec_weights *w,
                           struct plena_err *err)
{
    memset(w, 0, sizeof *w);
    w->cfg = *cfg;
    w->layers = plena_calloc(n_layers ? n_layers : 1, sizeof *w->layers);
    if (!w->layers) return PLENA_FAIL(err, PLENA_E_NOMEM, "weights", "out of memory");
    struct loader L = {c, err};
    int rc = plena_dec_walk(cfg, n_layers, need_head, w, load_one, &L);
    if (rc == PLENA_E_NOMEM && !plena_err_is_set(err))
        PLENA_FAIL(err, PLENA_E_NOMEM, "weights", "out of memory");
    if (!rc && need_head && cfg->tie_embeddings) w->lm_head = w->embed;
    if (!rc) rc = rope_freqs(w, err);
    return rc;
}

static void free_experts(struct plena_mat *p, uint32_t n)
{
    for (uint32_t e = 0; p && e < n; e++)
        plena_mat_free(&p[e]);
    plena_free(p);
}

void plena_dec_weights_free(struct plena_dec_weights *w)
{
    if (!w) return;
    for (uint32_t l = 0; w->layers && l < w->n_loaded; l++) {
        struct plena_dec_layer *y = &w->layers[l];
        float *one[] = {y->in_norm, y->post_norm,   y->bq,       y->bk,        y->bv,    y->q_norm,
                        y->k_norm,  y->shared_gate, y->q_a_norm, y->kv_a_norm, y->e_bias};
        for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
            plena_free(one[i]);
        struct plena_mat *mats[] = {&y->q,  &y->k,   &y->v,   &y->o,    &y->router,
                                    &y->dg, &y->du,  &y->dd,  &y->sg,   &y->su,
                                    &y->sd, &y->q_a, &y->q_b, &y->kv_a, &y->kv_b};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            plena_mat_free(mats[i]);
        free_experts(y->eg, w->cfg.n_experts);
        free_experts(y->eu, w->cfg.n_experts);
        free_experts(y->ed, w->cfg.n_experts);
    }
    plena_free(w->layers);
    if (w->lm_head.data != w->embed.data) plena_mat_free(&w->lm_head);
    plena_mat_free(&w->embed);
    plena_free(w->final_norm);
    plena_free(w->inv_freq);
    memset(w, 0, sizeof *w);
}
