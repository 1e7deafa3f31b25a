/* HF-style model config files (docs/lowering.md "Model files"): the layer's
 * shape and every router field the published families' configs carry. The
 * family comes from `model_type` (else `architectures[0]`) and names the
 * preset whose router, activation and router form the file starts from; a
 * router key then overrides that router field by field. A key the family's
 * code reads with a value plena does not model is an error naming
 * file:$.key and the value, never ignored. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa/isa.h"
#include "model/model.h"

/* One row per family: HF model_type, its architectures[0], the preset it
 * starts from, the topk_method values its code accepts, whether it reads
 * scoring_func, and the epsilon of its renormalisation. */
#define M_GREEDY    (1u << PLENA_TOPK_GREEDY)
#define M_GROUP_MAX (1u << PLENA_TOPK_GROUP_LIMITED_GREEDY)
#define M_NOAUX     (1u << PLENA_TOPK_NOAUX_TC)
#define M_ANY       (M_GREEDY | M_GROUP_MAX | M_NOAUX)
static const struct family {
    const char *model_type, *arch, *preset;
    unsigned methods;
    float norm_eps; /* w / (sum + eps) where norm_topk_prob is true */
} families[] = {
    {"qwen2_moe", "Qwen2MoeForCausalLM", "qwen1.5-moe-a2.7b", M_GREEDY, 0.0f},
    {"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3-30b-a3b", M_GREEDY, 0.0f},
    {"qwen3_next", "Qwen3NextForCausalLM", "qwen3-next-80b-a3b", M_GREEDY, 0.0f},
    {"mixtral", "MixtralForCausalLM", "mixtral-8x7b", M_GREEDY, 0.0f},
    {"gpt_oss", "GptOssForCausalLM", "gpt-oss-20b", M_GREEDY, 0.0f},
    {"deepseek_v2", "DeepseekV2ForCausalLM", "deepseek-v2-lite", M_GREEDY | M_GROUP_MAX, 1e-20f},
    {"deepseek_v3", "DeepseekV3ForCausalLM", "deepseek-v3", M_NOAUX, 1e-20f},
    {"kimi_k2", NULL, "kimi-k2", M_NOAUX, 1e-20f},
    {"glm4_moe", "Glm4MoeForCausalLM", "glm-4.5", M_NOAUX, 1e-20f},
    {"llama4", "Llama4ForConditionalGeneration", "llama4-scout", M_GREEDY, 0.0f},
    {"llama4_text", "Llama4ForCausalLM", "llama4-scout", M_GREEDY, 0.0f},
    {"dbrx", "DbrxForCausalLM", "dbrx-instruct", M_GREEDY, 0.0f},
    {"minimax_m2", "MiniMaxM2ForCausalLM", "minimax-m2", M_GREEDY, 0.0f},
    {"hunyuan_v1_moe", "HunYuanMoEV1ForCausalLM", "hunyuan-a13b", M_GREEDY, 0.0f},
    {"hunyuan", "HunYuanForCausalLM", "hunyuan-a13b", M_GREEDY, 0.0f},
    {"ernie4_5_moe", "Ernie4_5_MoeForCausalLM", "ernie-4.5-21b-a3b", M_GREEDY, 0.0f},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

struct cfg {
    json_t *root;
    json_t *sub;      /* text_config (Llama-4) or ffn_config (DBRX): searched first */
    const char *subk; /* its key */
    const char *path;
    const struct family *fam; /* NULL: a config without a family */
    struct plena_err *err;
};

/* The value of key (sub-object first) and its position "file:$.key". */
static json_t *get(const struct cfg *c, const char *key, char *where, size_t n)
{
    json_t *v = c->sub ? json_object_get(c->sub, key) : NULL;
    if (v) {
        snprintf(where, n, "%s:$.%s.%s", c->path, c->subk, key);
        return v;
    }
    snprintf(where, n, "%s:$.%s", c->path, key);
    return json_object_get(c->root, key);
}

static int fail_value(const struct cfg *c, const char *where, const json_t *v, const char *what)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    int rc = PLENA_FAIL(c->err, PLENA_E_INPUT, where, "%s is not modelled: expected %s",
                        text ? text : "the value", what);
    free(text);
    return rc;
}

/* An integer >= 0 that fits 32 bits, or a per-layer list of equal ones
 * (Hunyuan, ERNIE): plena models one MoE layer. */
static int as_u32(const struct cfg *c, const char *where, json_t *v, uint32_t *out)
{
    if (json_is_array(v) && json_array_size(v) > 0) {
        uint32_t first = 0;
        for (size_t i = 0; i < json_array_size(v); i++) {
            uint32_t x;
            if (as_u32(c, where, json_array_get(v, i), &x)) return PLENA_E_INPUT;
            if (i == 0) first = x;
            if (x != first) return fail_value(c, where, v, "one value for every MoE layer");
        }
        *out = first;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (json_int_t)UINT32_MAX)
        return PLENA_FAIL(c->err, PLENA_E_INPUT, where, "expected a non-negative integer");
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* The first present key of keys into *out: 1 found, 0 absent, else the error. */
static int get_u32(const struct cfg *c, const char *const *keys, uint32_t *out)
{
    char w[300];
    for (unsigned i = 0; keys[i]; i++) {
        json_t *v = get(c, keys[i], w, sizeof w);
        if (!v) continue;
        return as_u32(c, w, v, out) ? -1 : 1;
    }
    return 0;
}

/* A finite number > 0 (or >= 0 with zero_ok); 1 found, 0 absent, -1 error. */
static int get_pos(const struct cfg *c, const char *key, int zero_ok, double *out)
{
    char w[300];
    json_t *v = get(c, key, w, sizeof w);
    if (!v || json_is_null(v)) return 0;
    const double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(zero_ok ? x >= 0 : x > 0) || !(x < 1e30)) {
        fail_value(c, w, v, zero_ok ? "a finite number >= 0" : "a finite number > 0");
        return -1;
    }
    *out = x;
    return 1;
}

/* A boolean; 1 found, 0 absent, -1 error. */
static int get_bool(const struct cfg *c, const char *key, int *out)
{
    char w[300];
    json_t *v = get(c, key, w, sizeof w);
    if (!v) return 0;
    if (!json_is_boolean(v)) {
        fail_value(c, w, v, "true or false");
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

/* n_group / topk_group: an integer >= 1; null or false (Hunyuan) mean 1. */
static int get_groups(const struct cfg *c, const char *key, uint32_t *out)
{
    char w[300];
    json_t *v = get(c, key, w, sizeof w);
    if (!v || json_is_null(v) || json_is_false(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > PLENA_TOPK_MAX_EXPERTS)
        return fail_value(c, w, v, "an integer from 1 to 16383, null or false");
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static int family_of(struct cfg *c)
{
    char w[300];
    json_t *mt = get(c, "model_type", w, sizeof w);
    c->fam = NULL;
    if (mt) {
        const char *s = json_string_value(mt);
        for (size_t i = 0; s && i < N_FAMILIES; i++)
            if (!strcmp(families[i].model_type, s)) c->fam = &families[i];
        if (!c->fam) {
            char list[600];
            size_t off = 0;
            for (size_t i = 0; i < N_FAMILIES && off < sizeof list; i++)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "",
                                        families[i].model_type);
            return fail_value(c, w, mt, list);
        }
        return 0;
    }
    json_t *ar = json_array_get(json_object_get(c->root, "architectures"), 0);
    const char *s = json_string_value(ar);
    for (size_t i = 0; s && i < N_FAMILIES; i++)
        if (families[i].arch && !strcmp(families[i].arch, s)) c->fam = &families[i];
    return 0;
}

/* scoring_func: the family's own (its code has one) or, without a family,
 * softmax or sigmoid. */
static int read_scoring(const struct cfg *c, struct plena_router *r)
{
    char w[300];
    json_t *v = get(c, "scoring_func", w, sizeof w);
    if (!v) return 0;
    const char *s = json_string_value(v);
    if (c->fam) {
        const int sig = r->score == PLENA_SCORE_SIGMOID || r->score == PLENA_SCORE_SIGMOID_SELECTED;
        const char *own = sig ? "sigmoid" : "softmax";
        if (!s || strcmp(s, own)) {
            char what[160];
            snprintf(what, sizeof what, "\"%s\" (the %s router)", own, c->fam->model_type);
            return fail_value(c, w, v, what);
        }
        return 0;
    }
    if (s && !strcmp(s, "softmax"))
        r->score = PLENA_SCORE_SOFTMAX;
    else if (s && !strcmp(s, "sigmoid"))
        r->score = PLENA_SCORE_SIGMOID;
    else
        return fail_value(c, w, v, "\"softmax\" or \"sigmoid\"");
    return 0;
}

/* topk_method with n_group / topk_group: greedy ignores the groups (DeepSeek-V2's
 * MoEGate), group_limited_greedy scores a group by its maximum, noaux_tc by its
 * top-2 sum and chooses with e_score_correction_bias. */
static int read_groups(const struct cfg *c, const struct plena_moe_model *m, struct plena_router *r)
{
    char w[300];
    uint32_t ng = r->n_group, tg = r->topk_group;
    if (get_groups(c, "n_group", &ng) || get_groups(c, "topk_group", &tg)) return PLENA_E_INPUT;
    json_t *v = get(c, "topk_method", w, sizeof w);
    unsigned method = r->select_bias == PLENA_SELECT_BIAS_SELECTION && c->fam ? M_NOAUX
                      : r->group_score == PLENA_GROUP_MAX                     ? M_GROUP_MAX
                                                                              : M_GREEDY;
    if (v) {
        enum plena_topk_method tm;
        method = plena_topk_method_parse(json_string_value(v), &tm) ? 0 : 1u << tm;
        const unsigned allowed = c->fam ? c->fam->methods : M_ANY;
        if (!(method & allowed)) {
            char what[160];
            size_t off = 0;
            for (unsigned q = PLENA_TOPK_GREEDY; q <= PLENA_TOPK_NOAUX_TC; q++)
                if (allowed & (1u << q) && off < sizeof what)
                    off += (size_t)snprintf(what + off, sizeof what - off, "%s\"%s\"",
                                            off ? " or " : "", plena_topk_method_name(q));
            return fail_value(c, w, v, what);
        }
    }
    char wg[300], wt[300];
    get(c, "n_group", wg, sizeof wg);
    get(c, "topk_group", wt, sizeof wt);
    if (!v && !c->fam && ng > 1)
        return PLENA_FAIL(c->err, PLENA_E_INPUT, w,
                          "missing while n_group is %u: expected greedy, group_limited_greedy or "
                          "noaux_tc",
                          ng);
    if (tg > ng)
        return PLENA_FAIL(c->err, PLENA_E_INPUT, wt,
                          "topk_group %u exceeds n_group %u: expected 1 <= topk_group <= n_group",
                          tg, ng);
    if (m->num_experts && m->num_experts % ng)
        return PLENA_FAIL(c->err, PLENA_E_INPUT, wg,
                          "n_group %u does not divide the %u experts into equal groups", ng,
                          m->num_experts);
    if (method == M_NOAUX) r->select_bias = PLENA_SELECT_BIAS_SELECTION;
    if (method == M_GREEDY || ng == 1) {
        r->n_group = r->topk_group = 1;
        r->group_score = PLENA_GROUP_NONE;
    } else {
        r->n_group = ng;
        r->topk_group = tg;
        r->group_score = method == M_NOAUX ? PLENA_GROUP_TOP2_SUM : PLENA_GROUP_MAX;
    }
    return 0;
}

/* norm_topk_prob, moe_normalize_expert_weights (DBRX), moe_norm_min (ERNIE),
 * routed_scaling_factor. */
static int read_norm(const struct cfg *c, struct plena_router *r)
{
    char w[300];
    int b, rc;
    if ((rc = get_bool(c, "norm_topk_prob", &b)) < 0) return PLENA_E_INPUT;
    if (rc == 1 && !b) r->norm = PLENA_NORM_NONE;
    if (rc == 1 && b && r->norm == PLENA_NORM_NONE) {
        r->norm = PLENA_NORM_SUM;
        r->norm_eps = c->fam ? c->fam->norm_eps : 0.0f;
    }
    json_t *v = get(c, "moe_normalize_expert_weights", w, sizeof w);
    if (v) {
        if (json_is_null(v))
            r->norm = PLENA_NORM_NONE;
        else if (json_is_number(v) && json_number_value(v) == 1.0)
            r->norm = PLENA_NORM_L1;
        else
            return fail_value(c, w, v, "1 (the L1 norm) or null");
    }
    double x;
    if ((rc = get_pos(c, "moe_norm_min", 1, &x)) < 0) return PLENA_E_INPUT;
    if (rc == 1) {
        r->norm = PLENA_NORM_SUM_CLAMPED;
        r->norm_eps = (float)x;
    }
    if ((rc = get_pos(c, "routed_scaling_factor", 0, &x)) < 0) return PLENA_E_INPUT;
    if (rc == 1) r->scaling = (float)x;
    /* DeepSeek-V2's MoEGate scales only weights it does not renormalise */
    if (c->fam && !strcmp(c->fam->model_type, "deepseek_v2") && r->norm != PLENA_NORM_NONE)
        r->scaling = 1.0f;
    return 0;
}

/* The selection bias (MiniMax-M2 use_routing_bias) and capacity (Hunyuan). */
static int read_bias_capacity(const struct cfg *c, struct plena_router *r)
{
    char w[300];
    int b, rc;
    if ((rc = get_bool(c, "use_routing_bias", &b)) < 0) return PLENA_E_INPUT;
    if (rc == 1) r->select_bias = b ? PLENA_SELECT_BIAS_SELECTION : PLENA_SELECT_BIAS_NONE;
    if ((rc = get_bool(c, "moe_random_routing_dropped_token", &b)) < 0) return PLENA_E_INPUT;
    if (rc == 1 && b) {
        json_t *v = get(c, "moe_random_routing_dropped_token", w, sizeof w);
        return fail_value(c, w, v, "false (a dropped pair gets weight 0)");
    }
    if (get_bool(c, "moe_drop_tokens", &b) < 0) return PLENA_E_INPUT;
    double f;
    if ((rc = get_pos(c, "capacity_factor", 0, &f)) < 0) return PLENA_E_INPUT;
    /* Hunyuan's topkgating takes max(k, k x T / E) whatever capacity_factor says */
    if (rc == 1 && !c->fam) {
        r->capacity = PLENA_CAPACITY_FACTOR;
        r->capacity_factor = (float)f;
    }
    return 0;
}

/* Llama-4's MoE-layer placement keys: validated, routing unchanged. */
static int read_llama4(const struct cfg *c)
{
    static const char *const k_step[] = {"interleave_moe_layer_step", NULL};
    uint32_t step = 1;
    char w[300];
    int rc = get_u32(c, k_step, &step);
    if (rc < 0) return PLENA_E_INPUT;
    if (rc == 1 && step < 1) {
        json_t *v = get(c, "interleave_moe_layer_step", w, sizeof w);
        return fail_value(c, w, v, "an integer >= 1 (every step-th layer is a MoE layer)");
    }
    return 0;
}

static int read_shape(const struct cfg *c, struct plena_moe_model *m)
{
    static const char *const k_h[] = {"hidden_size", "d_model", NULL};
    static const char *const k_e[] = {"num_experts", "num_local_experts", "n_routed_experts",
                                      "moe_num_experts", NULL};
    static const char *const k_k[] = {
        "num_experts_per_tok", "experts_per_token", "moe_topk", "moe_k", "moe_top_k", NULL};
    static const char *const k_i[] = {"moe_intermediate_size", "intermediate_size",
                                      "ffn_hidden_size", NULL};
    static const char *const k_si[] = {"shared_expert_intermediate_size", NULL};
    static const char *const k_ns[] = {"n_shared_experts", "moe_num_shared_experts", NULL};
    static const char *const k_hy[] = {"num_shared_expert", NULL};
    static const char *const k_di[] = {"intermediate_size", NULL};
    int r;
    if ((r = get_u32(c, k_h, &m->hidden)) != 1)
        return r ? PLENA_E_INPUT
                 : PLENA_FAIL(c->err, PLENA_E_INPUT, c->path,
                              "model config: missing field 'hidden_size'");
    if (get_u32(c, k_e, &m->num_experts) < 0 || get_u32(c, k_k, &m->top_k) < 0 ||
        get_u32(c, k_i, &m->moe_inter) < 0)
        return PLENA_E_INPUT;
    uint32_t v = 0, di = 0;
    const char *fam = c->fam ? c->fam->model_type : "";
    m->n_shared = m->shared_inter = 0;
    m->shared_gate = PLENA_SHARED_GATE_NONE;
    if ((r = get_u32(c, k_si, &v)) < 0) return PLENA_E_INPUT;
    if (r == 1 && v > 0) { /* Qwen2-MoE, Qwen3-Next: one gated shared expert */
        m->n_shared = 1;
        m->shared_inter = v;
        m->shared_gate = PLENA_SHARED_GATE_SIGMOID;
        return 0;
    }
    if (!strncmp(fam, "llama4", 6)) { /* one ungated shared expert of the experts' width */
        m->n_shared = 1;
        m->shared_inter = m->moe_inter;
        return 0;
    }
    if (!strncmp(fam, "hunyuan", 7)) { /* shared_mlp: intermediate_size x num_shared_expert */
        int mixed = 1;
        if (get_bool(c, "use_mixed_mlp_moe", &mixed) < 0) return PLENA_E_INPUT;
        if ((r = get_u32(c, k_hy, &v)) < 0 || get_u32(c, k_di, &di) < 0) return PLENA_E_INPUT;
        if (mixed && r == 1 && v > 0) {
            m->n_shared = v;
            m->shared_inter = plena_model_fused_shared_width(v, di);
        }
        return 0;
    }
    if ((r = get_u32(c, k_ns, &v)) < 0) return PLENA_E_INPUT;
    if (r == 1 && v > 0) { /* DeepSeek, GLM, ERNIE: n experts fused to n x I, no gate */
        m->n_shared = v;
        m->shared_inter = plena_model_fused_shared_width(v, m->moe_inter);
    }
    return 0;
}

static int read_config(struct cfg *c, struct plena_moe_model *m)
{
    int rc;
    if ((rc = family_of(c))) return rc;
    const struct plena_moe_model *base = c->fam ? plena_model_preset_find(c->fam->preset) : NULL;
    if (base) { /* the family's layer apart from its shape */
        m->activation = base->activation;
        m->router = base->router;
        m->router_form = base->router_form;
        m->expert_bias = base->expert_bias;
        m->zero_centred_norm = base->zero_centred_norm;
        m->rms_eps = base->rms_eps;
        m->policy_name = base->policy_name;
    } else {
        plena_router_default(&m->router);
        m->activation = PLENA_ACT_STANDARD_SWIGLU;
        m->router_form = PLENA_ROUTER_GEMM;
        m->rms_eps = 1e-6f;
        m->policy_name = "config";
    }
    if (c->fam && !strcmp(c->fam->model_type, "llama4")) {
        c->sub = json_object_get(c->root, "text_config");
        c->subk = "text_config";
    } else if (c->fam && !strcmp(c->fam->model_type, "dbrx")) {
        c->sub = json_object_get(c->root, "ffn_config");
        c->subk = "ffn_config";
    }
    if (c->sub && !json_is_object(c->sub)) {
        char w[300];
        snprintf(w, sizeof w, "%s:$.%s", c->path, c->subk);
        return PLENA_FAIL(c->err, PLENA_E_INPUT, w, "expected an object");
    }
    if ((rc = read_shape(c, m))) return rc;
    struct plena_router *r = &m->router;
    if ((rc = read_scoring(c, r)) || (rc = read_groups(c, m, r)) || (rc = read_norm(c, r)) ||
        (rc = read_bias_capacity(c, r)) || (rc = read_llama4(c)))
        return rc;
    double eps;
    if ((rc = get_pos(c, "rms_norm_eps", 0, &eps)) < 0 ||
        (!rc && (rc = get_pos(c, "layer_norm_epsilon", 0, &eps)) < 0))
        return PLENA_E_INPUT;
    if (rc == 1) m->rms_eps = (float)eps;
    if ((rc = plena_router_validate(r, m->num_experts, m->top_k, c->path, c->err))) return rc;
    /* routing: on the device where the family's preset routes there (or no
     * family) and the generator has a device form of the router */
    struct plena_router_plan pl;
    plena_router_plan(r, &pl);
    m->routing =
        !m->num_experts ? PLENA_ROUTING_NONE
        : pl.lowering != PLENA_RLOWER_NONE && (!base || base->routing == PLENA_ROUTING_DEVICE)
            ? PLENA_ROUTING_DEVICE
            : PLENA_ROUTING_FIXED;
    return 0;
}

static int from_root(json_t *root, const char *path, struct plena_moe_model *m,
                     struct plena_err *err);

int plena_model_read_config(const char *path, struct plena_moe_model *m, struct plena_err *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        char w[300];
        snprintf(w, sizeof w, "%s:%d:%d", path, je.line, je.column);
        return PLENA_FAIL(err, PLENA_E_INPUT, w,
                          "not a preset name and not a readable model config JSON: %s", je.text);
    }
    return from_root(root, path, m, err);
}

int plena_model_parse_config(const char *text, size_t len, const char *path,
                             struct plena_moe_model *m, struct plena_err *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        char w[300];
        snprintf(w, sizeof w, "%s:%d:%d", path, je.line, je.column);
        return PLENA_FAIL(err, PLENA_E_INPUT, w, "not a readable model config JSON: %s", je.text);
    }
    return from_root(root, path, m, err);
}

/* Takes root. */
static int from_root(json_t *root, const char *path, struct plena_moe_model *m,
                     struct plena_err *err)
{
    memset(m, 0, sizeof *m);
    /* The model's name is the file's base name without a `.json` suffix
     * ("configs/ds.json" -> "ds"): the same text whether the trace was
     * generated from the file (trace model.name, replay) or `plena moe
     * --model` read it, so their program.asm and layout.json agree. */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t nb = strlen(base);
    if (nb > 5 && !strcmp(base + nb - 5, ".json")) nb -= 5;
    snprintf(m->name, sizeof m->name, "%.*s", (int)(nb < sizeof m->name ? nb : sizeof m->name - 1),
             base);
    struct cfg c = {.root = root, .path = path, .err = err};
    int rc = json_is_object(root)
                 ? read_config(&c, m)
                 : PLENA_FAIL(err, PLENA_E_INPUT, path, "model config: expected a JSON object");
    json_decref(root);
    return rc;
}
