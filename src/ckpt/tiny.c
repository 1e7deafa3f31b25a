/* `plena trace tiny-checkpoint` (docs/traces.md "Tiny checkpoint"): a small
 * deterministic checkpoint per architecture, written by plena itself so no
 * test ever downloads weights. Each tensor is drawn from
 * derive(seed, 5, fnv1a64(name)); the safetensors file is BF16 with tensors
 * in name order, its header padded with spaces to a multiple of 8 bytes. */
#include <jansson.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/decoder.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "num/num.h"
#include "num/prng.h"

void plena_tiny_config(enum plena_dec_arch arch, struct plena_dec_config *c)
{
    memset(c, 0, sizeof *c);
    c->arch = arch;
    c->vocab = 128, c->hidden = 64, c->n_layers = 3;
    c->heads = 4, c->kv_heads = 2, c->head_dim = 16;
    c->n_experts = 8, c->top_k = 2, c->moe_inter = 32, c->inter = 128;
    c->eps = 1e-6f, c->rope_theta = 10000.0, c->sparse_step = 1;
    c->dense[1] = 1;
    c->norm_topk = 1;
    c->qk_norm = 1;
    if (arch == PLENA_DEC_QWEN2_MOE) {
        /* as the published Qwen2-MoE: q/k/v biases, no q/k norms */
        c->shared_inter = 64, c->norm_topk = 0, c->attn_bias = 1, c->qk_norm = 0;
        c->shared_gated = 1;
    }
    if (arch == PLENA_DEC_DEEPSEEK_V2 || arch == PLENA_DEC_DEEPSEEK_V3) {
        /* MLA with nope 16, rope 8, v 16, kv_lora 32 (V3 also q_lora 32);
         * 4 groups of 2 experts, top-2 of 2 groups; ungated shared experts.
         * V2: softmax, group_limited_greedy, not renormalised, x 2 (weights
         * sum to at most 2), 2 shared experts, every layer sparse. V3:
         * sigmoid + correction bias, noaux_tc, renormalised x 2.5, one
         * shared expert, layer 0 dense (first_k_dense_replace 1). */
        const int v3 = arch == PLENA_DEC_DEEPSEEK_V3;
        c->kv_heads = c->heads, c->qk_norm = 0, c->dense[1] = 0, c->dense[0] = v3;
        c->mla = 1, c->q_lora = v3 ? 32 : 0, c->kv_lora = 32, c->nope = 16, c->head_dim = 8;
        c->v_dim = 16, c->shared_inter = (v3 ? 1 : 2) * c->moe_inter, c->norm_topk = v3;
        c->ext_router = 1;
        struct plena_router *r = &c->router;
        memset(r, 0, sizeof *r);
        r->score = v3 ? PLENA_SCORE_SIGMOID : PLENA_SCORE_SOFTMAX;
        r->select_bias = v3 ? PLENA_SELECT_BIAS_SELECTION : PLENA_SELECT_BIAS_NONE;
        r->n_group = 4, r->topk_group = 2;
        r->group_score = v3 ? PLENA_GROUP_TOP2_SUM : PLENA_GROUP_MAX;
        r->norm = v3 ? PLENA_NORM_SUM : PLENA_NORM_NONE;
        r->norm_eps = v3 ? 1e-20f : 0.0f;
        r->scaling = v3 ? 2.5f : 2.0f;
        r->f32_logits = 1;
    }
    if (arch == PLENA_DEC_MIXTRAL || arch == PLENA_DEC_OLMOE) {
        /* every layer sparse; intermediate_size is the expert width */
        c->dense[1] = 0, c->inter = c->moe_inter;
        c->qk_norm = arch == PLENA_DEC_OLMOE ? 2 : 0;
        c->norm_topk = arch == PLENA_DEC_MIXTRAL;
    }
}

/* The DeepSeek keys (as the published configs spell them). */
static void deepseek_json(json_t *o, const struct plena_dec_config *c)
{
    const struct plena_router *r = &c->router;
    uint32_t first_dense = 0;
    while (first_dense < c->n_layers && c->dense[first_dense])
        first_dense++;
    json_object_del(o, "head_dim");
    json_object_set_new(o, "q_lora_rank", c->q_lora ? json_integer(c->q_lora) : json_null());
    json_object_set_new(o, "kv_lora_rank", json_integer(c->kv_lora));
    json_object_set_new(o, "qk_nope_head_dim", json_integer(c->nope));
    json_object_set_new(o, "qk_rope_head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "v_head_dim", json_integer(c->v_dim));
    json_object_set_new(o, "first_k_dense_replace", json_integer(first_dense));
    json_object_set_new(o, "moe_layer_freq", json_integer(1));
    json_object_set_new(o, "n_shared_experts",
                        json_integer(c->moe_inter ? c->shared_inter / c->moe_inter : 0));
    json_object_set_new(o, "scoring_func",
                        json_string(r->score == PLENA_SCORE_SIGMOID ? "sigmoid" : "softmax"));
    json_object_set_new(o, "topk_method",
                        json_string(plena_topk_method_name(
                            r->select_bias != PLENA_SELECT_BIAS_NONE ? PLENA_TOPK_NOAUX_TC
                            : r->n_group > 1 ? PLENA_TOPK_GROUP_LIMITED_GREEDY
                                             : PLENA_TOPK_GREEDY)));
    json_object_set_new(o, "n_group", json_integer(r->n_group));
    json_object_set_new(o, "topk_group", json_integer(r->topk_group));
    json_object_set_new(o, "routed_scaling_factor", json_real(r->scaling));
    json_object_set_new(o, "attention_bias", json_false());
    json_object_set_new(o, "aux_loss_alpha", json_real(0.001));
    json_object_set_new(o, "seq_aux", json_true());
}

/* config.json of a tiny variant: the keys its architecture's published
 * configs carry. */
static json_t *config_json(const struct plena_dec_config *c)
{
    const struct plena_dec_arch_info *a = plena_dec_arch_info(c->arch);
    const int qwen = c->arch == PLENA_DEC_QWEN3_MOE || c->arch == PLENA_DEC_QWEN2_MOE;
    json_t *o = json_object();
    json_object_set_new(o, "architectures", json_pack("[s]", a->arch));
    json_object_set_new(o, "model_type", json_string(a->model_type));
    json_object_set_new(o, "hidden_size", json_integer(c->hidden));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layers));
    json_object_set_new(o, "num_attention_heads", json_integer(c->heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->kv_heads));
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "vocab_size", json_integer(c->vocab));
    json_object_set_new(o, a->experts_key, json_integer(c->n_experts));
    json_object_set_new(o, "num_experts_per_tok", json_integer(c->top_k));
    json_object_set_new(o, a->width_key, json_integer(c->moe_inter));
    json_object_set_new(o, "intermediate_size", json_integer(c->inter));
    json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(o, "rms_norm_eps", json_real(1e-6));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_embeddings));
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "rope_scaling", json_null());
    json_object_set_new(o, "torch_dtype", json_string("bfloat16"));
    if (c->arch != PLENA_DEC_MIXTRAL)
        json_object_set_new(o, "norm_topk_prob", json_boolean(c->norm_topk));
    if (c->arch == PLENA_DEC_MIXTRAL || qwen) json_object_set_new(o, "sliding_window", json_null());
    if (c->arch == PLENA_DEC_QWEN3_MOE || c->arch == PLENA_DEC_OLMOE)
        json_object_set_new(o, "attention_bias", json_false());
    if (c->arch == PLENA_DEC_OLMOE) json_object_set_new(o, "clip_qkv", json_null());
    if (qwen) {
        json_t *mlp_only = json_array();
        for (uint32_t l = 0; l < c->n_layers; l++)
            if (c->dense[l]) json_array_append_new(mlp_only, json_integer(l));
        json_object_set_new(o, "mlp_only_layers", mlp_only);
        json_object_set_new(o, "decoder_sparse_step", json_integer(c->sparse_step));
        json_object_set_new(o, "use_sliding_window", json_false());
    }
    if (c->shared_inter && c->shared_gated)
        json_object_set_new(o, "shared_expert_intermediate_size", json_integer(c->shared_inter));
    if (c->mla) deepseek_json(o, c);
    return o;
}

struct tensor {
    char *name;
    uint64_t d0, d1;
    int two_d;
    uint16_t *bf16;
};

struct tiny {
    uint64_t seed;
    plena_tiny_edit_fn edit;
    void *ctx;
    struct tensor *t;
    size_t n, cap;
};

/* Draws one tensor: uniform in [-a, a], a = 1/sqrt(fan_in), or 1 +
 * uniform in [-0.1, 0.1] for norms; the edit hook; BF16 (RNE). */
static int draw(void *ctx, const char *name, enum plena_dec_tensor_kind kind, uint64_t d0,
                uint64_t d1, void *slot)
{
    (void)slot;
    struct tiny *T = ctx;
    if (plena_grow((void **)&T->t, &T->cap, T->n + 1, sizeof *T->t)) return PLENA_E_NOMEM;
    struct tensor *t = &T->t[T->n];
    const int two_d = kind == PLENA_DEC_T_MATRIX || kind == PLENA_DEC_T_VECTOR;
    const uint64_t count = two_d ? d0 * d1 : d0;
    float *v = plena_calloc(count, sizeof *v);
    t->name = plena_strdup(name);
    t->bf16 = plena_calloc(count, sizeof *t->bf16);
    if (!v || !t->name || !t->bf16) {
        plena_free(v), plena_free(t->name), plena_free(t->bf16);
        return PLENA_E_NOMEM;
    }
    T->n++;
    t->d0 = d0, t->d1 = d1, t->two_d = two_d;
    const uint64_t words[2] = {PLENA_PRNG_TAG_TINY_CHECKPOINT, plena_fnv1a64(name, strlen(name))};
    struct plena_prng g;
    plena_prng_derive(&g, T->seed, words, 2);
    const double a = 1.0 / sqrt((double)d1);
    for (uint64_t i = 0; i < count; i++) {
        double u = 2.0 * plena_prng_uniform(&g) - 1.0;
        v[i] = (float)(kind == PLENA_DEC_T_NORM ? 1.0 + 0.1 * u : a * u);
    }
    if (T->edit) T->edit(name, v, count, T->ctx);
    plena_num_bf16_row_from_f32(v, t->bf16, count);
    plena_free(v);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct tensor *)a)->name, ((const struct tensor *)b)->name);
}

/* The safetensors bytes of T's tensors (sorted by name). */
static int render_safetensors(struct tiny *T, struct plena_buf *b)
{
    qsort(T->t, T->n, sizeof *T->t, by_name);
    json_t *h = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < T->n; i++) {
        const struct tensor *t = &T->t[i];
        uint64_t bytes = 2 * (t->two_d ? t->d0 * t->d1 : t->d0);
        json_t *shape = t->two_d ? json_pack("[II]", (json_int_t)t->d0, (json_int_t)t->d1)
                                 : json_pack("[I]", (json_int_t)t->d0);
        json_object_set_new(h, t->name,
                            json_pack("{s:s,s:o,s:[II]}", "dtype", "BF16", "shape", shape,
                                      "data_offsets", (json_int_t)off, (json_int_t)(off + bytes)));
        off += bytes;
    }
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(h);
    if (!text) return PLENA_E_NOMEM;
    uint64_t n = strlen(text), padded = (n + 7) / 8 * 8;
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(padded >> (8 * i));
    plena_buf_append(b, len, 8);
    plena_buf_append(b, text, n);
    for (uint64_t i = n; i < padded; i++)
        plena_buf_append(b, " ", 1);
    free(text);
    for (size_t i = 0; i < T->n; i++) {
        struct tensor *t = &T->t[i];
        uint64_t count = t->two_d ? t->d0 * t->d1 : t->d0;
        /* little-endian in place (a no-op on x86), appended whole */
        uint8_t *le = (uint8_t *)t->bf16;
        for (uint64_t j = 0; j < count; j++) {
            const uint16_t v = t->bf16[j];
            le[2 * j] = (uint8_t)v, le[2 * j + 1] = (uint8_t)(v >> 8);
        }
        plena_buf_append(b, le, 2 * count);
        plena_free(t->bf16); /* bounds the peak at about one copy of the weights */
        t->bf16 = NULL;
    }
    return b->failed ? PLENA_E_NOMEM : 0;
}

/* Five samples of lengths 1, 2, 5, 9, 17 in two categories; token ids from
 * derive(seed, 5, fnv1a64("inputs.jsonl")). */
static int render_inputs(uint64_t seed, uint32_t vocab, struct plena_buf *b)
{
    static const unsigned lens[5] = {1, 2, 5, 9, 17};
    const uint64_t words[2] = {PLENA_PRNG_TAG_TINY_CHECKPOINT, plena_fnv1a64("inputs.jsonl", 12)};
    struct plena_prng g;
    plena_prng_derive(&g, seed, words, 2);
    for (unsigned s = 0; s < 5; s++) {
        plena_buf_printf(b, "{\"benchmark\":\"tiny\",\"category\":\"%s\",\"input_ids\":[",
                         s % 2 ? "code" : "math");
        for (unsigned i = 0; i < lens[s]; i++)
            plena_buf_printf(b, "%s%llu", i ? "," : "",
                             (unsigned long long)plena_prng_bounded(&g, vocab));
        plena_buf_printf(b, "],\"sample_id\":\"tiny-%u\"}\n", s);
    }
    return b->failed ? PLENA_E_NOMEM : 0;
}

static int write_buf(const char *dir, const char *name, const struct plena_buf *b,
                     struct plena_err *err)
{
    char path[4096];
    if (plena_path_join(path, sizeof path, dir, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    return plena_file_write_atomic(path, b->data, b->len, err);
}

int plena_tiny_checkpoint_write(const char *dir, enum plena_dec_arch arch, uint64_t seed,
                                plena_tiny_edit_fn edit, void *ctx, struct plena_err *err)
{
    struct plena_dec_config c;
    plena_tiny_config(arch, &c);
    return plena_dec_checkpoint_write(dir, &c, seed, edit, ctx, err);
}

int plena_dec_checkpoint_write(const char *dir, const struct plena_dec_config *conf, uint64_t seed,
                               plena_tiny_edit_fn edit, void *ctx, struct plena_err *err)
{
    const struct plena_dec_config c = *conf;
    if (plena_mkdir_p(dir, err)) return err->code;
    struct tiny T = {.seed = seed, .edit = edit, .ctx = ctx};
    struct plena_buf cfg, st, in;
    plena_buf_init(&cfg), plena_buf_init(&st), plena_buf_init(&in);
    json_t *cj = config_json(&c);
    int rc = cj && !plena_json_dump(&cfg, cj, PLENA_JSON_PRETTY) ? 0 : PLENA_E_NOMEM;
    json_decref(cj);
    if (!rc) rc = plena_dec_walk(&c, c.n_layers, 1, NULL, draw, &T);
    if (!rc) rc = render_safetensors(&T, &st);
    if (!rc) rc = render_inputs(seed, c.vocab, &in);
    if (rc) PLENA_FAIL(err, PLENA_E_NOMEM, dir, "out of memory");
    if (!rc) rc = write_buf(dir, "config.json", &cfg, err);
    if (!rc) rc = write_buf(dir, "model.safetensors", &st, err);
    if (!rc) rc = write_buf(dir, "inputs.jsonl", &in, err);
    for (size_t i = 0; i < T.n; i++)
        plena_free(T.t[i].name), plena_free(T.t[i].bf16);
    plena_free(T.t);
    plena_buf_free(&cfg), plena_buf_free(&st), plena_buf_free(&in);
    return rc;
}
