/* The decoders `plena trace route` runs (docs/traces.md "What is computed"):
 * the architecture table, config.json into a checked configuration, the
 * weights of a checkpoint, and the f32 forward pass one token at a time with
 * a KV cache, recording each MoE layer's router choice. */
#ifndef PLENA_CKPT_DECODER_H
#define PLENA_CKPT_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "common/err.h"

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
      "num_experts", "intermediate_size")
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
};

/* config.json text -> configuration. Unknown architecture, a key that
 * changes the computation and is not modelled (rope_scaling set, sliding
 * windows in use, an activation other than silu, an unknown key), heads not
 * a multiple of kv heads, missing or ill-typed keys: PLENA_E_INPUT naming the
 * key. */
int plena_dec_config_parse(const char *text, size_t len, const char *where,
                           struct plena_dec_config *cfg, struct plena_err *err);

struct plena_dec_layer {
    float *in_norm, *post_norm, *q, *k, *v, *o, *bq, *bk, *bv, *q_norm, *k_norm;
    float *router;                     /* [E][H] */
    float **eg, **eu, **ed;            /* per expert: gate [I][H], up [I][H], down [H][I] */
    float *dg, *du, *dd;               /* dense MLP */
    float *sg, *su, *sd, *shared_gate; /* shared expert, its gate [1][H] */
};

struct plena_dec_weights {
    struct plena_dec_config cfg;
    float *embed, *final_norm, *lm_head; /* lm_head aliases embed when tied */
    uint32_t n_loaded;                   /* layers 0..n_loaded-1 have weights */
    struct plena_dec_layer *layers;
    float *inv_freq; /* [head_dim / 2] */
};

/* The tensors of a configuration, in file order of the loader: name, kind,
 * shape [d0, d1] (d1 0 for a norm; for a bias d1 is the fan-in of its
 * projection, the tensor is 1-D [d0]) and the weights' slot (NULL without
 * weights). A non-zero return stops the walk and is returned. */
enum plena_dec_tensor_kind { PLENA_DEC_T_MATRIX, PLENA_DEC_T_NORM, PLENA_DEC_T_BIAS };
typedef int (*plena_dec_tensor_fn)(void *ctx, const char *name, enum plena_dec_tensor_kind kind,
                                   uint64_t d0, uint64_t d1, float **slot);
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
    float *kcache, *vcache;  /* [layer][pos][kv_heads * head_dim] */
    float *h, *x, *q, *att, *scores, *tmp, *gate, *up, *act, *y, *logits, *vocab_logits;
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
int plena_dec_route(const struct plena_dec_config *cfg, const float *logits, uint32_t *ids,
                    float *w, struct plena_err *err);

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
