/* The decoders `plena trace route` runs (docs/traces.md "What is computed"):
 * the architecture table, config.json into a checked configuration, the
 * weights of a checkpoint, and the f32 forward pass one token at a time with
 * a KV cache, recording each MoE layer's router choice. */
#ifndef PLENA_CKPT_DECODER_H
#define PLENA_CKPT_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "ckpt/matmul.h"
#include "common/err.h"
#include "model/model.h"

/* X(ID, model_type, architectures[0], tiny variant, MoE block, expert gate,
 * up, down, expert count key, expert width key) — the one table of
 * supported architectures; config.json's `model_type` (or else its
 * `architectures[0]`) selects the row. Tensors of an MoE layer are
 * model.layers.L.<block>.gate.weight and
 * model.layers.L.<block>.experts.E.<gate|up|down>.weight. */
#define PLENA_DEC_ARCH_LIST(X)                                                                     \
    X(QWEN3_MOE, "qwen3_moe", "Qwen3MoeForCausalLM", "qwen3", "mlp", "gate_proj", "up_proj",       \
      "down_proj", "num_experts", "moe_intermediate_size")                                         \
    X(QWEN2_MOE, "qwen2_moe", "Qwen2MoeForCausalLM", "qwen2-shared", "mlp", "gate_proj",           \
      "up_proj", "down_proj", "num_experts", "moe_intermediate_size")                              \
    X(MIXTRAL, "mixtral", "MixtralForCausalLM", "mixtral", "block_sparse_moe", "w1", "w3", "w2",   \
      "num_local_experts", "intermediate_size")                                                    \
    X(OLMOE, "olmoe", "OlmoeForCausalLM", "olmoe", "mlp", "gate_proj", "up_proj", "down_proj",     \
      "num_experts", "intermediate_size")                                                          \
    X(DEEPSEEK_V2, "deepseek_v2", "DeepseekV2ForCausalLM", "deepseek-v2", "mlp", "gate_proj",      \
      "up_proj", "down_proj", "n_routed_experts", "moe_intermediate_size")                         \
    X(DEEPSEEK_V3, "deepseek_v3", "DeepseekV3ForCausalLM", "deepseek-v3", "mlp", "gate_proj",      \
      "up_proj", "down_proj", "n_routed_experts", "moe_intermediate_size")
enum plena_dec_arch {
#define X(id, ...) PLENA_DEC_##id,
    PLENA_DEC_ARCH_LIST(X)
#undef X
        PLENA_DEC_ARCH_COUNT
};
struct plena_dec_arch_info {
    const char *model_type, *arch, *tiny, *block, *gate, *up, *down, *experts_key, *width_key;
};
const struct plena_dec_arch_info *plena_dec_arch_info(enum plena_dec_arch a);
const char *plena_dec_arch_model_type(enum plena_dec_arch a);
const char *plena_dec_arch_tiny_variant(enum plena_dec_arch a);
/* "qwen3|qwen2-shared" style list of tiny variants; 0 or -1 for unknown. */
int plena_dec_arch_from_tiny_variant(const char *name, enum plena_dec_arch *a);

#define PLENA_DEC_MAX_LAYERS 1024

struct plena_dec_config {
    enum plena_dec_arch arch;
    uint32_t hidden, n_layers, heads, kv_heads, head_dim, vocab;
    uint32_t n_experts, top_k, moe_inter, inter, shared_inter; /* shared_inter 0: none */
    float eps;
    double rope_theta;
    int norm_topk, tie_embeddings, attn_bias;
    int qk_norm; /* 0 none; 1 per head over D (Qwen3); 2 over the whole projection (OLMoE) */
    uint32_t sparse_step;
    uint8_t dense[PLENA_DEC_MAX_LAYERS]; /* 1: layer l uses the dense MLP */
    int shared_gated;                    /* the shared expert has its sigmoid gate (Qwen2-MoE) */
    /* multi-head latent attention (DeepSeek; src/ckpt/mla.c): head_dim is
     * qk_rope_head_dim; q_lora 0: q_proj directly */
    int mla;
    uint32_t q_lora, kv_lora, nope, v_dim;
    /* with ext_router the router is model/router.c's `router` (DeepSeek),
     * else the spec's softmax top-k (plena_dec_route) */
    int ext_router;
    struct plena_router router;
};

/* The widths of one token's q, K-cache row, V-cache row and attention
 * output (GQA: heads x D, kv x D, kv x D, heads x D). */
static inline uint32_t plena_dec_qdim(const struct plena_dec_config *c)
{
    return c->heads * (c->mla ? c->nope + c->head_dim : c->head_dim);
}
static inline uint32_t plena_dec_kdim(const struct plena_dec_config *c)
{
    return c->mla ? c->heads * c->nope + c->head_dim : c->kv_heads * c->head_dim;
}
static inline uint32_t plena_dec_vdim(const struct plena_dec_config *c)
{
    return c->mla ? c->heads * c->v_dim : c->kv_heads * c->head_dim;
}
static inline uint32_t plena_dec_attdim(const struct plena_dec_config *c)
{
    return c->heads * (c->mla ? c->v_dim : c->head_dim);
}
/* The weight_source of the rows a configuration's router gives. */
const char *plena_dec_weight_source(const struct plena_dec_config *c);

/* config.json text -> configuration. Unknown architecture, a key that
 * changes the computation and is not modelled (rope_scaling set, sliding
 * windows in use, an activation other than silu, an unknown key), heads not
 * a multiple of kv heads, missing or ill-typed keys: PLENA_E_INPUT naming the
 * key. */
int plena_dec_config_parse(const char *text, size_t len, const char *where,
                           struct plena_dec_config *cfg, struct plena_err *err);

/* Matrices are views of the checkpoint's mmap (BF16 or F32 as stored; an
 * F16 tensor is widened into an owned F32 copy); norms and biases are small
 * f32 arrays. */
struct plena_dec_layer {
    float *in_norm, *post_norm, *bq, *bk, *bv, *q_norm, *k_norm;
    struct plena_mat q, k, v, o;
    struct plena_mat router;        /* [E][H] */
    struct plena_mat *eg, *eu, *ed; /* per expert: gate [I][H], up [I][H], down [H][I] */
    struct plena_mat dg, du, dd;    /* dense MLP */
    struct plena_mat sg, su, sd;    /* shared expert */
    float *shared_gate;             /* its gate [1][H] (NULL: ungated) */
    /* MLA (q is q_proj without q_lora): q_a [q_lora][H], q_b [heads (nope +
     * rope)][q_lora], kv_a [kv_lora + rope][H], kv_b [heads (nope + v)][kv_lora] */
    struct plena_mat q_a, q_b, kv_a, kv_b;
    float *q_a_norm, *kv_a_norm;
    float *e_bias; /* e_score_correction_bias [E] (DeepSeek-V3) */
};

struct plena_dec_weights {
    struct plena_dec_config cfg;
    struct plena_mat embed, lm_head; /* lm_head aliases embed when tied */
    float *final_norm;
    uint32_t n_loaded; /* layers 0..n_loaded-1 have weights */
    struct plena_dec_layer *layers;
    float *inv_freq; /* [head_dim / 2] */
};

/* The tensors of a configuration, in file order of the loader: name, kind,
 * shape [d0, d1] (d1 0 for a norm; for a bias d1 is the fan-in of its
 * projection, the tensor is 1-D [d0]) and the weights' slot (NULL without
 * weights): a struct plena_mat * for PLENA_DEC_T_MATRIX, a float ** for the
 * others (PLENA_DEC_T_VECTOR: a 1 x d1 matrix held as f32, such as the
 * shared-expert gate). A non-zero return stops the walk and is returned. */
enum plena_dec_tensor_kind {
    PLENA_DEC_T_MATRIX,
    PLENA_DEC_T_NORM,
    PLENA_DEC_T_BIAS,
    PLENA_DEC_T_VECTOR
};
typedef int (*plena_dec_tensor_fn)(void *ctx, const char *name, enum plena_dec_tensor_kind kind,
                                   uint64_t d0, uint64_t d1, void *slot);
int plena_dec_walk(const struct plena_dec_config *c, uint32_t n_layers, int need_head,
                   struct plena_dec_weights *w, plena_dec_tensor_fn fn, void *ctx);
/* Loads layers 0..n_layers-1 (every shape checked against cfg) and, with
 * need_head, the final norm and the LM head. */
int plena_dec_weights_load(const struct plena_ckpt *c, const struct plena_dec_config *cfg,
                           uint32_t n_layers, int need_head, struct plena_dec_weights *w,
                           struct plena_err *err);
void plena_dec_weights_free(struct plena_dec_weights *w);

struct plena_pool;
/* One sample's run: KV cache of max_pos positions for layers 0..n_run-1. */
struct plena_dec_state {
    const struct plena_dec_weights *w;
    uint32_t n_run, max_pos, pos;
    int act_bf16;
    struct plena_pool *pool; /* NULL: single-threaded (set by the caller, not owned) */
    float *kcache, *vcache;  /* [layer][pos][plena_dec_kdim / plena_dec_vdim] */
    float *mla;              /* MLA scratch of a block of tokens (mla.c) */
    float *h, *x, *q, *att, *scores, *tmp, *gate, *up, *act, *y, *logits, *vocab_logits;
    float *scr; /* attention scores, per thread (grown on first use) */
    size_t scr_n;
    /* the router choice of the last token per layer: ids/weights [n_run][top_k] */
    uint32_t *ids;
    float *rw;
    /* called (may be NULL; set by the caller) after each block of prefill
     * tokens with the block's size: progress reporting */
    void (*on_tokens)(void *ctx, uint32_t n);
    void *on_tokens_ctx;
};

int plena_dec_state_init(struct plena_dec_state *s, const struct plena_dec_weights *w,
                         uint32_t n_run, uint32_t max_pos, int act_bf16, struct plena_err *err);
void plena_dec_state_free(struct plena_dec_state *s);
/* Runs `token` at the next position through layers 0..n_run-1; with
 * want_next, the final norm and LM head too, and *next = argmax (ties to the
 * lowest id). Router choices land in s->ids / s->rw. Token out of range:
 * PLENA_E_INPUT; a non-finite value: PLENA_E_FAILED. */
int plena_dec_step(struct plena_dec_state *s, uint32_t token, int want_next, uint32_t *next,
                   struct plena_err *err);
/* Runs tokens[0..n) at the next n positions, layer by layer over blocks of
 * 32 tokens (each weight matrix read once per block), with exactly the
 * values plena_dec_step would give token by token. Router choices of every
 * layer and token into ids/w [n_run][n][top_k]; with want_next the greedy
 * next token after the last one. */
int plena_dec_prefill(struct plena_dec_state *s, const uint32_t *tokens, uint32_t n, uint32_t *ids,
                      float *w, int want_next, uint32_t *next, struct plena_err *err);
/* The router of one MoE layer on x2[H]: logits, top-k by (logit desc, id
 * asc), weights (softmax over the k selected with norm_topk, else softmax
 * over all E taken at the selected ids), det_exp throughout. */
int plena_dec_route(const struct plena_dec_config *cfg, const float *logits, const float *bias,
                    uint32_t *ids, float *w, struct plena_err *err);

/* ---- what mla.c shares with forward.c ---- */

/* Y[t][o] = sum_i W[o][i] X[t][i] (+ b[o]) for T tokens over the state's
 * threads (ckpt/matmul.h), each output the same sequential sum as for one
 * token. */
void plena_dec_mm(const struct plena_dec_state *s, const struct plena_mat *W, const float *X,
                  size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy);
/* --act bf16 rounding of stored activations (nothing in f32). */
void plena_dec_store(const struct plena_dec_state *s, float *v, size_t n);
void plena_dec_rmsnorm(const float *x, const float *w, uint32_t n, float eps, float *out);
float plena_dec_exp(float x);
/* The softmax (max subtracted, det_exp) of scores[n] in place, then out[V] =
 * sum_j p_j v[j * ldv ..], j increasing: one head's attention output. */
void plena_dec_softmax_mix(float *scores, uint32_t n, const float *v, size_t ldv, uint32_t V,
                           float *out);
/* Floats of MLA scratch for a block of `tokens` tokens. */
size_t plena_mla_scratch(const struct plena_dec_config *c, uint32_t tokens);
/* MLA of layer l for the nb tokens X[nb][H] (normalised) at positions
 * s->pos .. s->pos + nb - 1 (cs/sn: their cos/sin, head_dim/2 each): their
 * K/V rows into the cache, the attention output into att[nb][attdim]. */
void plena_mla_attention(struct plena_dec_state *s, uint32_t l, uint32_t nb, const float *X,
                         float *att, const float *cs, const float *sn);

/* ---- the tiny checkpoint (docs/traces.md "Tiny checkpoint") ---- */

/* Optional edit of a tensor's values before the BF16 rounding (tests build
 * ties and special cases this way). */
typedef void (*plena_tiny_edit_fn)(const char *name, float *v, uint64_t n, void *ctx);
/* Writes DIR/config.json, DIR/model.safetensors (BF16) and DIR/inputs.jsonl
 * of the variant. Files are written atomically. */
int plena_tiny_checkpoint_write(const char *dir, enum plena_dec_arch arch, uint64_t seed,
                                plena_tiny_edit_fn edit, void *ctx, struct plena_err *err);
/* The same for any configuration of the table's architectures (bench/
 * writes its synthetic checkpoint this way): values drawn as the tiny ones. */
int plena_dec_checkpoint_write(const char *dir, const struct plena_dec_config *c, uint64_t seed,
                               plena_tiny_edit_fn edit, void *ctx, struct plena_err *err);
/* The configuration of a variant (what config.json will say). */
void plena_tiny_config(enum plena_dec_arch arch, struct plena_dec_config *cfg);

#endif
