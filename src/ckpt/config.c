/* config.json -> struct plena_dec_config (docs/traces.md "config.json"):
 * the architecture table, the keys each decoder reads, the keys that are
 * inert, and refusals of everything that would change the computation
 * without being modelled. Every key of the file is accounted for: an
 * unknown key is refused naming it, so a new model feature cannot be
 * silently ignored. */
#include <jansson.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/decoder.h"

static const struct plena_dec_arch_info arch_rows[] = {
#define X(id, mt, arch, tiny, block, g, u, d, ek, wk)                                              \
    [PLENA_DEC_##id] = {mt, arch, tiny, block, g, u, d, ek, wk},
    PLENA_DEC_ARCH_LIST(X)
#undef X
};

const struct plena_dec_arch_info *plena_dec_arch_info(enum plena_dec_arch a)
{
    return &arch_rows[a];
}

const char *plena_dec_arch_model_type(enum plena_dec_arch a)
{
    return arch_rows[a].model_type;
}

const char *plena_dec_arch_tiny_variant(enum plena_dec_arch a)
{
    return arch_rows[a].tiny;
}

int plena_dec_arch_from_tiny_variant(const char *name, enum plena_dec_arch *a)
{
    for (unsigned i = 0; i < PLENA_DEC_ARCH_COUNT; i++)
        if (!strcmp(name, arch_rows[i].tiny)) {
            *a = (enum plena_dec_arch)i;
            return 0;
        }
    return -1;
}

/* Keys that never change the computation (identification, training-only
 * settings, limits plena does not reach). */
static const char *const inert_keys[] = {"_name_or_path",
                                         "architectures",
                                         "attention_dropout",
                                         "bos_token_id",
                                         "dtype",
                                         "eos_token_id",
                                         "initializer_range",
                                         "max_position_embeddings",
                                         "max_window_layers",
                                         "model_type",
                                         "output_router_logits",
                                         "pad_token_id",
                                         "router_aux_loss_coef",
                                         "torch_dtype",
                                         "transformers_version",
                                         "use_cache",
                                         "tokenizer_class",
                                         "qkv_bias",
                                         "layer_types",
                                         NULL};

/* Keys every decoder reads, then the keys of each architecture. */
static const char *const used_keys[] = {"hidden_size",
                                        "num_hidden_layers",
                                        "num_attention_heads",
                                        "num_key_value_heads",
                                        "head_dim",
                                        "rms_norm_eps",
                                        "rope_theta",
                                        "vocab_size",
                                        "num_experts_per_tok",
                                        "intermediate_size",
                                        "tie_word_embeddings",
                                        "hidden_act",
                                        "rope_scaling",
                                        NULL};
static const char *const qwen_keys[] = {"num_experts",
                                        "moe_intermediate_size",
                                        "norm_topk_prob",
                                        "decoder_sparse_step",
                                        "mlp_only_layers",
                                        "sliding_window",
                                        "use_sliding_window",
                                        "attention_bias",
                                        "shared_expert_intermediate_size",
                                        NULL};
/* router_jitter_noise only acts in training */
static const char *const mixtral_keys[] = {"num_local_experts", "sliding_window",
                                           "router_jitter_noise", NULL};
static const char *const olmoe_keys[] = {"num_experts", "norm_topk_prob", "attention_bias",
                                         "clip_qkv", NULL};

/* DeepSeek-V2/V3: MLA, the router keys model/router.c reads, dense first
 * layers; the training-only and parallelism keys (aux_loss_alpha, seq_aux,
 * ep_size), the multi-token-prediction layers the causal LM does not run
 * (num_nextn_predict_layers) and the remote-code map are inert. */
static const char *const deepseek_keys[] = {"n_routed_experts", "moe_intermediate_size",
                                            "n_shared_experts", "first_k_dense_replace",
                                            "moe_layer_freq",   "kv_lora_rank",
                                            "q_lora_rank",      "qk_nope_head_dim",
                                            "qk_rope_head_dim", "v_head_dim",
                                            "qk_head_dim",      "routed_scaling_factor",
                                            "scoring_func",     "topk_method",
                                            "n_group",          "topk_group",
                                            "norm_topk_prob",   "attention_bias",
                                            "rope_interleave",  "pretraining_tp",
                                            "aux_loss_alpha",   "seq_aux",
                                            "ep_size",          "num_nextn_predict_layers",
                                            "auto_map",         NULL};

static const char *const *arch_keys(enum plena_dec_arch a)
{
    switch (a) {
    case PLENA_DEC_MIXTRAL: return mixtral_keys;
    case PLENA_DEC_OLMOE: return olmoe_keys;
    case PLENA_DEC_DEEPSEEK_V2:
    case PLENA_DEC_DEEPSEEK_V3: return deepseek_keys;
    default: return qwen_keys;
    }
}

static int in_list(const char *const *l, const char *k)
{
    for (; *l; l++)
        if (!strcmp(*l, k)) return 1;
    return 0;
}

static int get_uint(const json_t *root, const char *key, int required, uint32_t def, uint32_t lo,
                    uint32_t hi, uint32_t *out, const char *where, struct plena_err *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required)
            return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key '%s' is required", key);
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key '%s' must be an integer in %u..%u",
                          key, lo, hi);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static int get_bool(const json_t *root, const char *key, int def, int *out, const char *where,
                    struct plena_err *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key '%s' must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

static int get_real(const json_t *root, const char *key, double def, double *out, const char *where,
                    struct plena_err *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key '%s' must be a positive number",
                          key);
    *out = json_number_value(v);
    return 0;
}

static int find_arch(const json_t *root, const char *where, enum plena_dec_arch *a,
                     struct plena_err *err)
{
    const json_t *mt = json_object_get(root, "model_type");
    const json_t *ar = json_array_get(json_object_get(root, "architectures"), 0);
    for (unsigned i = 0; i < PLENA_DEC_ARCH_COUNT; i++)
        if ((json_is_string(mt) && !strcmp(json_string_value(mt), arch_rows[i].model_type)) ||
            (!mt && json_is_string(ar) && !strcmp(json_string_value(ar), arch_rows[i].arch))) {
            *a = (enum plena_dec_arch)i;
            return 0;
        }
    char list[256] = "";
    for (unsigned i = 0; i < PLENA_DEC_ARCH_COUNT; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, arch_rows[i].model_type, sizeof list - strlen(list) - 1);
    }
    return PLENA_FAIL(err, PLENA_E_INPUT, where,
                      "model_type '%s' is not a supported architecture (supported: %s)",
                      json_is_string(mt)   ? json_string_value(mt)
                      : json_is_string(ar) ? json_string_value(ar)
                                           : "(none)",
                      list);
}

/* Keys that would change the computation: refused unless inert. */
static int refusals(const json_t *root, enum plena_dec_arch arch, const char *where,
                    struct plena_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v)
    {
        if (!in_list(inert_keys, key) && !in_list(used_keys, key) && !in_list(arch_keys(arch), key))
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "config key '%s' is not modelled by plena's forward pass for %s "
                              "(it may change the computation)",
                              key, arch_rows[arch].model_type);
    }
    const json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'rope_scaling' is set: RoPE scaling is not modelled");
    int sliding = 0;
    if (get_bool(root, "use_sliding_window", 0, &sliding, where, err)) return err->code;
    if (sliding)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'use_sliding_window' is true: sliding-window attention is "
                          "not modelled");
    /* Mixtral applies a sliding window whenever sliding_window is set; Qwen
     * only with use_sliding_window */
    const json_t *sw = json_object_get(root, "sliding_window");
    if (arch == PLENA_DEC_MIXTRAL && sw && !json_is_null(sw))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'sliding_window' is set: sliding-window attention is not "
                          "modelled");
    const json_t *clip = json_object_get(root, "clip_qkv");
    if (clip && !json_is_null(clip))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'clip_qkv' is set: clipping q/k/v is not modelled");
    const json_t *act = json_object_get(root, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key 'hidden_act' must be \"silu\"");
    return 0;
}

static int is_deepseek(enum plena_dec_arch a)
{
    return a == PLENA_DEC_DEEPSEEK_V2 || a == PLENA_DEC_DEEPSEEK_V3;
}

static int parse_dense(const json_t *root, struct plena_dec_config *c, const char *where,
                       struct plena_err *err)
{
    if (is_deepseek(c->arch)) return 0; /* first_k_dense_replace: parse_deepseek */
    memset(c->dense, 0, sizeof c->dense);
    const json_t *m = json_object_get(root, "mlp_only_layers");
    if (m && !json_is_null(m)) {
        if (!json_is_array(m))
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "config key 'mlp_only_layers' must be an array");
        size_t i;
        json_t *e;
        json_array_foreach(m, i, e)
        {
            if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                json_integer_value(e) >= c->n_layers)
                return PLENA_FAIL(err, PLENA_E_INPUT, where,
                                  "config key 'mlp_only_layers[%zu]' must be a layer in 0..%u", i,
                                  c->n_layers - 1);
            c->dense[json_integer_value(e)] = 1;
        }
    }
    for (uint32_t l = 0; l < c->n_layers; l++)
        if ((l + 1) % c->sparse_step) c->dense[l] = 1;
    return 0;
}

static int parse_sizes(const json_t *root, struct plena_dec_config *c, const char *where,
                       struct plena_err *err)
{
    const uint32_t big = 1u << 20;
    if (get_uint(root, "hidden_size", 1, 0, 1, big, &c->hidden, where, err) ||
        get_uint(root, "num_hidden_layers", 1, 0, 1, PLENA_DEC_MAX_LAYERS, &c->n_layers, where,
                 err) ||
        get_uint(root, "num_attention_heads", 1, 0, 1, 4096, &c->heads, where, err) ||
        get_uint(root, "num_key_value_heads", 0, c->heads, 1, 4096, &c->kv_heads, where, err) ||
        get_uint(root, "head_dim", 0, c->hidden / c->heads, 2, 4096, &c->head_dim, where, err) ||
        get_uint(root, "vocab_size", 1, 0, 1, 1u << 24, &c->vocab, where, err) ||
        get_uint(root, arch_rows[c->arch].experts_key, 1, 0, 1, 65536, &c->n_experts, where, err) ||
        get_uint(root, "num_experts_per_tok", 1, 0, 1, 65536, &c->top_k, where, err) ||
        get_uint(root, arch_rows[c->arch].width_key, 1, 0, 1, big, &c->moe_inter, where, err) ||
        get_uint(root, "intermediate_size", 1, 0, 1, big, &c->inter, where, err) ||
        get_uint(root, "decoder_sparse_step", 0, 1, 1, PLENA_DEC_MAX_LAYERS, &c->sparse_step, where,
                 err))
        return err->code;
    if (c->heads % c->kv_heads)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'num_attention_heads' (%u) is not a multiple of "
                          "'num_key_value_heads' (%u)",
                          c->heads, c->kv_heads);
    if (c->head_dim % 2)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key 'head_dim' (%u) must be even",
                          c->head_dim);
    if (c->top_k > c->n_experts)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'num_experts_per_tok' (%u) exceeds 'num_experts' (%u)",
                          c->top_k, c->n_experts);
    return 0;
}

/* A key that must have one value when present (else refused naming it). */
static int must_be(const json_t *root, const char *key, const json_t *want, const char *what,
                   const char *where, struct plena_err *err)
{
    const json_t *v = json_object_get(root, key);
    if (v && !json_is_null(v) && !json_equal(v, want))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "config key '%s' must be %s: %s", key, what,
                          "anything else is not modelled");
    return 0;
}

/* DeepSeek-V2/V3: MLA sizes, first_k_dense_replace dense layers, shared
 * experts without a gate, the router of model/router.c read by the model
 * file reader (one reading of topk_method, n_group, topk_group,
 * norm_topk_prob, routed_scaling_factor, scoring_func). */
static int parse_deepseek(const json_t *root, struct plena_dec_config *c, const char *where,
                          struct plena_err *err)
{
    json_t *one = json_integer(1), *yes = json_true(), *no = json_false();
    int rc = must_be(root, "moe_layer_freq", one,
                     "1 (every layer from first_k_dense_replace on "
                     "is a MoE layer)",
                     where, err);
    if (!rc) rc = must_be(root, "pretraining_tp", one, "1", where, err);
    if (!rc)
        rc = must_be(root, "rope_interleave", yes, "true (interleaved RoPE pairs)", where, err);
    if (!rc) rc = must_be(root, "attention_bias", no, "false (q_a/kv_a/o_proj biases)", where, err);
    json_decref(one), json_decref(yes), json_decref(no);
    if (rc) return rc;
    uint32_t first_dense = 0, n_shared = 0, head_dim = c->head_dim;
    if (get_uint(root, "q_lora_rank", 0, 0, 1, 1u << 20, &c->q_lora, where, err) ||
        get_uint(root, "kv_lora_rank", 1, 0, 1, 1u << 20, &c->kv_lora, where, err) ||
        get_uint(root, "qk_nope_head_dim", 1, 0, 1, 4096, &c->nope, where, err) ||
        get_uint(root, "qk_rope_head_dim", 1, 0, 2, 4096, &c->head_dim, where, err) ||
        get_uint(root, "v_head_dim", 1, 0, 1, 4096, &c->v_dim, where, err) ||
        get_uint(root, "first_k_dense_replace", 0, 0, 0, PLENA_DEC_MAX_LAYERS, &first_dense, where,
                 err) ||
        get_uint(root, "n_shared_experts", 1, 0, 0, 4096, &n_shared, where, err))
        return err->code;
    if (c->head_dim % 2)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'qk_rope_head_dim' (%u) must be even", c->head_dim);
    if (json_object_get(root, "head_dim") && head_dim != c->head_dim)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'head_dim' (%u) must equal 'qk_rope_head_dim' (%u)", head_dim,
                          c->head_dim);
    uint32_t qk = c->nope + c->head_dim; /* transformers' DeepseekV3Config writes it */
    if (get_uint(root, "qk_head_dim", 0, qk, 1, 8192, &qk, where, err)) return err->code;
    if (qk != c->nope + c->head_dim)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'qk_head_dim' (%u) must equal 'qk_nope_head_dim' + "
                          "'qk_rope_head_dim' (%u)",
                          qk, c->nope + c->head_dim);
    if ((uint64_t)n_shared * c->moe_inter > (1u << 20))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "config key 'n_shared_experts' x 'moe_intermediate_size' above 2^20");
    c->mla = 1, c->qk_norm = 0, c->attn_bias = 0;
    c->shared_inter = n_shared * c->moe_inter, c->shared_gated = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        c->dense[l] = l < first_dense;
    /* the router `trace build --checkpoint` and `plena moe --model` read
     * from this file */
    char *text = json_dumps(root, JSON_COMPACT);
    if (!text) return PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    struct plena_moe_model m;
    rc = plena_model_parse_config(text, strlen(text), where, &m, err);
    free(text);
    if (rc) return rc;
    c->ext_router = 1;
    c->router = m.router;
    return 0;
}

/* What differs between the architectures of the table (the published
 * modelling code, not the spec, decides: docs/design.md). */
static int parse_arch_keys(const json_t *root, struct plena_dec_config *c, const char *where,
                           struct plena_err *err)
{
    /* HF's Qwen2MoeConfig and Qwen3MoeConfig both default norm_topk_prob to
     * false; published Qwen3 configs say true explicitly. */
    if (get_bool(root, "norm_topk_prob", 0, &c->norm_topk, where, err) ||
        get_bool(root, "tie_word_embeddings", 0, &c->tie_embeddings, where, err))
        return err->code;
    const json_t *shared = json_object_get(root, "shared_expert_intermediate_size");
    switch (c->arch) {
    case PLENA_DEC_QWEN3_MOE:
        c->qk_norm = 1;
        if (get_bool(root, "attention_bias", 0, &c->attn_bias, where, err)) return err->code;
        if (shared)
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "config key 'shared_expert_intermediate_size' is not part of "
                              "qwen3_moe");
        c->shared_inter = 0;
        break;
    case PLENA_DEC_QWEN2_MOE:
        /* Qwen2-MoE always has q/k/v biases (no key announces them), no q/k
         * norms, and always a shared expert with its sigmoid gate. */
        c->qk_norm = 0;
        c->attn_bias = 1;
        c->shared_gated = 1;
        if (json_object_get(root, "attention_bias"))
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "config key 'attention_bias' is not part of qwen2_moe (its q/k/v "
                              "biases are always present)");
        if (get_uint(root, "shared_expert_intermediate_size", 1, 0, 1, 1u << 20, &c->shared_inter,
                     where, err))
            return err->code;
        break;
    case PLENA_DEC_MIXTRAL:
        /* softmax over all experts, top-k, renormalised: the softmax of the
         * selected logits; no biases, no q/k norms, every layer sparse */
        c->norm_topk = 1, c->qk_norm = 0, c->attn_bias = 0, c->shared_inter = 0;
        break;
    case PLENA_DEC_OLMOE:
        /* q/k norms over the whole projection, before the split into heads */
        c->qk_norm = 2, c->shared_inter = 0;
        if (get_bool(root, "attention_bias", 0, &c->attn_bias, where, err)) return err->code;
        break;
    case PLENA_DEC_DEEPSEEK_V2:
    case PLENA_DEC_DEEPSEEK_V3: return parse_deepseek(root, c, where, err);
    case PLENA_DEC_ARCH_COUNT: break;
    }
    return 0;
}

int plena_dec_config_parse(const char *text, size_t len, const char *where,
                           struct plena_dec_config *c, struct plena_err *err)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "line %d column %d: %s", je.line, je.column,
                          je.text);
    double eps = 0;
    int rc = 0;
    if (!json_is_object(root)) rc = PLENA_FAIL(err, PLENA_E_INPUT, where, "expected a JSON object");
    if (!rc) rc = find_arch(root, where, &c->arch, err);
    if (!rc) rc = refusals(root, c->arch, where, err);
    if (!rc) rc = parse_sizes(root, c, where, err);
    if (!rc) rc = get_real(root, "rms_norm_eps", 1e-6, &eps, where, err);
    if (!rc) rc = get_real(root, "rope_theta", 10000.0, &c->rope_theta, where, err);
    if (!rc) rc = parse_arch_keys(root, c, where, err);
    if (!rc) rc = parse_dense(root, c, where, err);
    c->eps = (float)eps;
    json_decref(root);
    return rc;
}

const char *plena_dec_weight_source(const struct plena_dec_config *c)
{
    if (!c->ext_router)
        return c->norm_topk ? "true_router_topk_softmax_weights"
                            : "true_router_softmax_unnormalized_weights";
    const struct plena_router *r = &c->router;
    if (r->score == PLENA_SCORE_SIGMOID || r->score == PLENA_SCORE_SIGMOID_SELECTED)
        return "true_router_sigmoid_weights";
    if (r->norm != PLENA_NORM_NONE && r->scaling == 1.0f) return "true_router_topk_softmax_weights";
    if (r->norm == PLENA_NORM_NONE && r->scaling == 1.0f)
        return "true_router_softmax_unnormalized_weights";
    return "true_router_scaled_softmax_weights";
}
