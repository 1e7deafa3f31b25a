/* model/: presets as data, enum spellings, model files, the route-trace
 * `model` object both ways, and the top-k limits of the ISA. Expected values
 * are written here by hand (from the published configs and docs/trace-schema.md),
 * never produced by the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/test_support.h"
#include "isa/isa.h"
#include "model/model.h"
#include "model/trace_model.h"

/* ---- presets ---- */

static void test_presets_validate(void **state)
{
    (void)state;
    assert_int_equal(plena_model_preset_count(), 34); /* 19 full-size + 1 demo + 14 tiny */
    for (unsigned i = 0; i < plena_model_preset_count(); i++) {
        const struct plena_moe_model *m = plena_model_preset_at(i);
        struct plena_err err;
        plena_err_clear(&err);
        if (plena_model_validate(m, 64, &err)) fail_msg("%s: %s", m->name, err.msg);
        struct plena_moe_model r;
        assert_int_equal(plena_model_resolve(m->name, &r, NULL), 0);
        assert_string_equal(r.name, m->name);
    }
    const struct plena_moe_model *d = plena_model_preset_find("deepseek-v2-lite");
    assert_non_null(d);
    assert_int_equal(d->shared_inter, plena_model_fused_shared_width(2, 1408));
    assert_int_equal(plena_model_fused_shared_width(2, 1408), 2816);
    assert_int_equal(plena_model_fused_shared_width(0, 1408), 0);
    assert_int_equal(plena_model_fused_shared_width(65536, 65536), 0);
    assert_null(plena_model_preset_find("nope"));
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_moe_model r;
    assert_int_equal(plena_model_resolve("nope", &r, &err), PLENA_E_INPUT);
    struct plena_moe_model bad = *plena_model_preset_find("tiny-fixed");
    bad.top_k = 17;
    assert_int_not_equal(plena_model_validate(&bad, 64, NULL), 0);
    bad = *plena_model_preset_find("tiny-fixed");
    bad.hidden = 96;
    assert_int_not_equal(plena_model_validate(&bad, 64, NULL), 0);
}

static void test_model_file(void **state)
{
    (void)state;
    char dir[64], path[256];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "model"), 0);
    plena_test_path(path, sizeof path, dir, "cfg.json");
    plena_test_write_text(
        dir, "cfg.json",
        "{\"hidden_size\": 2048, \"num_experts\": 60, \"num_experts_per_tok\": 4,"
        " \"moe_intermediate_size\": 1408, \"shared_expert_intermediate_size\": 5632,"
        " \"norm_topk_prob\": false}");
    struct plena_moe_model m;
    assert_int_equal(plena_model_resolve(path, &m, NULL), 0);
    assert_string_equal(m.name, "cfg"); /* base name without ".json" */
    assert_int_equal(m.hidden, 2048);
    assert_int_equal(m.num_experts, 60);
    assert_int_equal(m.top_k, 4);
    assert_int_equal(m.moe_inter, 1408);
    assert_int_equal(m.shared_inter, 5632);
    assert_int_equal(m.shared_gate, PLENA_SHARED_GATE_SIGMOID);
    assert_int_equal(m.router.norm, PLENA_NORM_NONE);
    assert_true(m.rms_eps == 1e-6f);
    plena_test_write_text(
        dir, "cfg.json",
        "{\"hidden_size\": 2048, \"n_routed_experts\": 64, \"num_experts_per_tok\": 6,"
        " \"moe_intermediate_size\": 1408, \"n_shared_experts\": 2}");
    assert_int_equal(plena_model_resolve(path, &m, NULL), 0);
    assert_int_equal(m.shared_inter, 2816);
    assert_int_equal(m.shared_gate, PLENA_SHARED_GATE_NONE);
    /* silently accepted before: a duplicate key (the last one won), a string
     * eps (the default replaced it), a string boolean */
    static const char *const bad[][2] = {
        {"{\"hidden_size\": 64, \"hidden_size\": 128, \"num_experts\": 8,"
         " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 64}",
         "duplicate object key"},
        {"{\"hidden_size\": 64, \"num_experts\": 8, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"rms_norm_eps\": \"1e-6\"}",
         "expected a finite number > 0"},
        {"{\"hidden_size\": 64, \"num_experts\": 8, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"norm_topk_prob\": \"yes\"}",
         "expected true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plena_test_write_text(dir, "cfg.json", bad[i][0]);
        struct plena_err err = {0};
        assert_int_equal(plena_model_resolve(path, &m, &err), PLENA_E_INPUT);
        if (!strstr(err.msg, bad[i][1])) fail_msg("case %zu: '%s'", i, err.msg);
    }
    struct plena_err err = {0};
    plena_test_write_text(dir, "cfg.json", bad[1][0]);
    plena_model_resolve(path, &m, &err);
    assert_non_null(strstr(err.where, "cfg.json:$.rms_norm_eps"));
    assert_int_equal(plena_test_rmtree(dir), 0);
}

/* Every family's published config (src/model/testdata, the HF config.json
 * values) resolves to the router its modelling code defines; expectations
 * written by hand from the configs and the models' router code. */
struct family_case {
    const char *file;
    uint32_t shape[6]; /* hidden, moe_inter, E, k, n_shared, shared_inter */
    struct plena_router r;
    enum plena_routing_kind routing;
    const char *policy;
};

static void test_family_configs(void **state)
{
    (void)state;
    static const struct family_case want[] = {
        {"deepseek_v3",
         {7168, 2048, 256, 8, 1, 2048},
         {.score = PLENA_SCORE_SIGMOID,
          .select_bias = PLENA_SELECT_BIAS_SELECTION,
          .n_group = 8,
          .topk_group = 4,
          .group_score = PLENA_GROUP_TOP2_SUM,
          .norm = PLENA_NORM_SUM,
          .norm_eps = 1e-20f,
          .scaling = 2.5f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "deepseek_v3"},
        {"deepseek_v2",
         {5120, 1536, 160, 6, 2, 3072},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 8,
          .topk_group = 3,
          .group_score = PLENA_GROUP_MAX,
          .norm = PLENA_NORM_NONE,
          .norm_eps = 0.0f,
          .scaling = 16.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "deepseek_v2"},
        {"deepseek_v2_lite",
         {2048, 1408, 64, 6, 2, 2816},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_NONE,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "deepseek_v2"},
        {"kimi_k2",
         {7168, 2048, 384, 8, 1, 2048},
         {.score = PLENA_SCORE_SIGMOID,
          .select_bias = PLENA_SELECT_BIAS_SELECTION,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM,
          .norm_eps = 1e-20f,
          .scaling = 2.827f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "deepseek_v3"},
        {"glm4_moe",
         {5120, 1536, 160, 8, 1, 1536},
         {.score = PLENA_SCORE_SIGMOID,
          .select_bias = PLENA_SELECT_BIAS_SELECTION,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM,
          .norm_eps = 1e-20f,
          .scaling = 2.5f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "glm4_moe"},
        {"qwen2_moe",
         {2048, 1408, 60, 4, 1, 5632},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_NONE,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "qwen2_moe"},
        {"qwen3_moe",
         {2048, 768, 128, 8, 0, 0},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_DEVICE,
         "qwen3_moe"},
        {"gpt_oss",
         {2880, 2880, 32, 4, 0, 0},
         {.score = PLENA_SCORE_SOFTMAX_SELECTED,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_NONE,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 1,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_DEVICE,
         "gpt_oss"},
        {"mixtral",
         {4096, 14336, 8, 2, 0, 0},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_DEVICE,
         "mixtral"},
        {"llama4",
         {5120, 8192, 16, 1, 1, 8192},
         {.score = PLENA_SCORE_SIGMOID_SELECTED,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_NONE,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_INPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "llama4"},
        {"dbrx",
         {6144, 10752, 16, 4, 0, 0},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_L1,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "dbrx"},
        {"minimax_m2",
         {3072, 1536, 256, 8, 0, 0},
         {.score = PLENA_SCORE_SIGMOID,
          .select_bias = PLENA_SELECT_BIAS_SELECTION,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM,
          .norm_eps = 0.0f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "minimax_m2"},
        {"hunyuan",
         {4096, 3072, 64, 8, 1, 3072},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_NONE,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM_CLAMPED,
          .norm_eps = 1.1920929e-07f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_HUNYUAN},
         PLENA_ROUTING_FIXED,
         "hunyuan"},
        {"ernie4_5_moe",
         {2560, 1536, 64, 6, 2, 3072},
         {.score = PLENA_SCORE_SOFTMAX,
          .select_bias = PLENA_SELECT_BIAS_SELECTION,
          .n_group = 1,
          .topk_group = 1,
          .group_score = PLENA_GROUP_NONE,
          .norm = PLENA_NORM_SUM_CLAMPED,
          .norm_eps = 1e-12f,
          .scaling = 1.0f,
          .logit_bias = 0,
          .placement = PLENA_ROUTE_OUTPUT,
          .capacity = PLENA_CAPACITY_NONE},
         PLENA_ROUTING_FIXED,
         "ernie4_5_moe"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct family_case *w = &want[i];
        char path[512];
        snprintf(path, sizeof path, "%s/src/model/testdata/%s.json", PLENA_SOURCE_DIR, w->file);
        struct plena_moe_model m;
        struct plena_err err;
        plena_err_clear(&err);
        if (plena_model_resolve(path, &m, &err))
            fail_msg("%s: %s: %s", w->file, err.where, err.msg);
        assert_string_equal(m.name, w->file);
        const uint32_t got[6] = {m.hidden, m.moe_inter, m.num_experts,
                                 m.top_k,  m.n_shared,  m.shared_inter};
        assert_memory_equal(got, w->shape, sizeof got);
        const struct plena_router *r = &m.router;
        assert_int_equal(r->score, w->r.score);
        assert_int_equal(r->select_bias, w->r.select_bias);
        assert_int_equal(r->n_group, w->r.n_group);
        assert_int_equal(r->topk_group, w->r.topk_group);
        assert_int_equal(r->group_score, w->r.group_score);
        assert_int_equal(r->norm, w->r.norm);
        assert_true(r->norm_eps == w->r.norm_eps);
        assert_true(r->scaling == w->r.scaling);
        assert_int_equal(r->logit_bias, w->r.logit_bias);
        assert_int_equal(r->placement, w->r.placement);
        assert_int_equal(r->capacity, w->r.capacity);
        assert_int_equal(m.routing, w->routing);
        assert_string_equal(m.policy_name, w->policy);
    }
}

/* Bad router input: one clear error naming file:$.key and what was expected. */
static void test_config_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *where, *msg;
    } bad[] = {
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"scoring_func\": \"tanh\"}",
         "$.scoring_func", "\"tanh\" is not modelled: expected \"softmax\" or \"sigmoid\""},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"topk_method\": \"gready\"}",
         "$.topk_method", "\"gready\" is not modelled"},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"topk_method\": \"noaux_tc\", \"n_group\": 4,"
         " \"topk_group\": 5}",
         "$.topk_group", "topk_group 5 exceeds n_group 4"},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"topk_method\": \"group_limited_greedy\","
         " \"n_group\": 3, \"topk_group\": 2}",
         "$.n_group", "n_group 3 does not divide the 16 experts"},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"capacity_factor\": 0}",
         "$.capacity_factor", "0 is not modelled: expected a finite number > 0"},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"capacity_factor\": -1.5}",
         "$.capacity_factor", "-1.5 is not modelled"},
        {"{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"n_routed_experts\": 16,"
         " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 64, \"scoring_func\": "
         "\"softmax\"}",
         "$.scoring_func", "expected \"sigmoid\" (the deepseek_v3 router)"},
        {"{\"model_type\": \"deepseek_v2\", \"hidden_size\": 64, \"n_routed_experts\": 16,"
         " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 64, \"topk_method\": "
         "\"noaux_tc\"}",
         "$.topk_method", "expected \"greedy\" or \"group_limited_greedy\""},
        {"{\"model_type\": \"phimoe\", \"hidden_size\": 64}", "$.model_type",
         "\"phimoe\" is not modelled: expected qwen2_moe"},
        {"{\"model_type\": \"dbrx\", \"d_model\": 64, \"ffn_config\": {\"ffn_hidden_size\": 64,"
         " \"moe_num_experts\": 16, \"moe_top_k\": 4, \"moe_normalize_expert_weights\": 2}}",
         "$.ffn_config.moe_normalize_expert_weights", "2 is not modelled: expected 1"},
        {"{\"model_type\": \"hunyuan_v1_moe\", \"hidden_size\": 64, \"num_experts\": 16,"
         " \"moe_topk\": [2, 4], \"moe_intermediate_size\": 64}",
         "$.moe_topk", "expected one value for every MoE layer"},
        {"{\"model_type\": \"hunyuan_v1_moe\", \"hidden_size\": 64, \"num_experts\": 16,"
         " \"moe_topk\": 2, \"moe_intermediate_size\": 64,"
         " \"moe_random_routing_dropped_token\": true}",
         "$.moe_random_routing_dropped_token", "true is not modelled"},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"n_group\": 4, \"topk_group\": 2}",
         "$.topk_method", "missing while n_group is 4"},
        {"{\"hidden_size\": 64, \"num_experts\": 16, \"num_experts_per_tok\": 2,"
         " \"moe_intermediate_size\": 64, \"norm_topk_prob\": 1}",
         "$.norm_topk_prob", "expected true or false"},
    };
    char dir[64], path[256];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "modelbad"), 0);
    plena_test_path(path, sizeof path, dir, "bad.json");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plena_test_write_text(dir, "bad.json", bad[i].text);
        struct plena_moe_model m;
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_model_resolve(path, &m, &err), PLENA_E_INPUT);
        char want[300];
        snprintf(want, sizeof want, "%s:%s", path, bad[i].where);
        if (strcmp(err.where, want) || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: got %s: %s", i, err.where, err.msg);
    }
    assert_int_equal(plena_test_rmtree(dir), 0);
}

/* Named fields of models.def land in the right struct members: two rows
 * checked field by field against the published configs. */
struct preset_fields {
    const char *name;
    uint32_t hidden, moe_inter, num_experts, top_k, n_shared, shared_inter;
    enum plena_act_policy activation;
    enum plena_routing_kind routing;
    enum plena_router_form router_form;
};

static const struct plena_moe_model *preset_with(const struct preset_fields *w)
{
    const struct plena_moe_model *m = plena_model_preset_find(w->name);
    assert_non_null(m);
    assert_int_equal(m->hidden, w->hidden);
    assert_int_equal(m->moe_inter, w->moe_inter);
    assert_int_equal(m->num_experts, w->num_experts);
    assert_int_equal(m->top_k, w->top_k);
    assert_int_equal(m->n_shared, w->n_shared);
    assert_int_equal(m->shared_inter, w->shared_inter);
    assert_int_equal(m->activation, w->activation);
    assert_int_equal(m->routing, w->routing);
    assert_int_equal(m->router_form, w->router_form);
    return m;
}

static void test_preset_fields(void **state)
{
    (void)state;
    /* name, hidden, moe_inter, num_experts, top_k, n_shared, shared_inter,
     * activation, routing, router_form */
    static const struct preset_fields want[2] = {
        {"gpt-oss-20b", 2880, 2880, 32, 4, 0, 0, PLENA_ACT_GPT_OSS_CLAMP_GATED,
         PLENA_ROUTING_DEVICE, PLENA_ROUTER_DOT},
        {"qwen1.5-moe-a2.7b", 2048, 1408, 60, 4, 1, 5632, PLENA_ACT_STANDARD_SWIGLU,
         PLENA_ROUTING_FIXED, PLENA_ROUTER_GEMM}};
    const struct plena_moe_model *g = preset_with(&want[0]);
    assert_int_equal(g->router.logit_bias, 1);
    assert_int_equal(g->router.score, PLENA_SCORE_SOFTMAX_SELECTED);
    assert_int_equal(g->expert_bias, 1);
    assert_true(g->rms_eps == 1e-5f);
    assert_string_equal(g->policy_name, "gpt_oss");
    const struct plena_moe_model *q = preset_with(&want[1]);
    assert_int_equal(q->shared_gate, PLENA_SHARED_GATE_SIGMOID);
    assert_int_equal(q->router.placement, PLENA_ROUTE_OUTPUT);
    assert_int_equal(q->router.norm, PLENA_NORM_NONE); /* norm_topk_prob false */
    assert_int_equal(q->is_tiny, 0);
    const struct plena_moe_model *l = plena_model_preset_find("tiny-llama4");
    assert_non_null(l);
    assert_int_equal(l->router.placement, PLENA_ROUTE_INPUT);
    assert_int_equal(l->router.score, PLENA_SCORE_SIGMOID_SELECTED);
    assert_int_equal(l->is_tiny, 1);
}

/* Every enum: each spelling parses back to its value, unknown text and NULL
 * are refused, and the choices text lists the spellings in table order. */
static void test_spellings(void **state)
{
    (void)state;
    enum plena_weights_mode w;
    assert_int_equal(plena_weights_mode_parse("representable", &w), 0);
    assert_int_equal(w, PLENA_WEIGHTS_REPRESENTABLE);
    assert_string_equal(plena_weights_mode_name(PLENA_WEIGHTS_ZERO), "zero");
    assert_int_equal(plena_weights_mode_parse("zeros", &w), -1);
    assert_int_equal(plena_weights_mode_parse(NULL, &w), -1);
    char buf[128];
    assert_string_equal(plena_weights_mode_choices(", ", " or ", buf, sizeof buf),
                        "random, zero or representable");
    enum plena_input_mode in;
    assert_int_equal(plena_input_mode_parse("zeros", &in), 0);
    assert_int_equal(in, PLENA_INPUT_ZEROS);
    assert_string_equal(plena_act_policy_name(PLENA_ACT_GPT_OSS_CLAMP_GATED),
                        "gpt_oss_clamp_gated");
    assert_string_equal(plena_act_policy_name(PLENA_ACT_STANDARD_SWIGLU), "standard_swiglu");
    assert_string_equal(plena_route_placement_name(PLENA_ROUTE_INPUT), "input");
    assert_string_equal(plena_shared_gate_name(PLENA_SHARED_GATE_SIGMOID), "sigmoid");
    assert_string_equal(plena_routing_kind_name(PLENA_ROUTING_FIXED), "fixed");
    assert_string_equal(plena_router_form_name(PLENA_ROUTER_DOT), "dot");
    assert_string_equal(plena_residual_mode_name(PLENA_RESIDUAL_PRE_NORM), "pre_norm");
    assert_string_equal(plena_residual_mode_name((enum plena_residual_mode)7), "?");
    enum plena_residual_mode r;
    assert_int_equal(plena_residual_mode_parse("pre_norm", &r), 0);
    assert_int_equal(r, PLENA_RESIDUAL_PRE_NORM);
}

/* The ISA's top-k limits bound the model: E = 16383 and k = 255 pass,
 * one more fails with the limit in the message. */
static void test_topk_limits(void **state)
{
    (void)state;
    assert_int_equal(PLENA_TOPK_MAX_EXPERTS, 16383);
    assert_int_equal(PLENA_TOPK_MAX_K, 255);
    struct plena_moe_model m = *plena_model_preset_find("tiny-route-256x8");
    m.num_experts = 16383;
    m.top_k = 255;
    assert_int_equal(plena_model_validate(&m, 64, NULL), 0);
    struct plena_err err;
    plena_err_clear(&err);
    m.num_experts = 16384;
    assert_int_equal(plena_model_validate(&m, 64, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "expected 1..16383"));
    m.num_experts = 16383;
    m.top_k = 256;
    plena_err_clear(&err);
    assert_int_equal(plena_model_validate(&m, 64, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "min(num_experts 16383, 255)"));
}

/* The `model` object written for a trace and read back by replay: members
 * and values as docs/trace-schema.md lists them, and the round trip gives
 * the layer replay lowers (fixed routing, preset fields kept). */
static void test_trace_object(void **state)
{
    (void)state;
    const struct plena_moe_model *q = plena_model_preset_find("qwen1.5-moe-a2.7b");
    json_t *mo = plena_model_to_trace(q, 3);
    assert_non_null(mo);
    char *text = json_dumps(mo, JSON_COMPACT);
    assert_string_equal(
        text, "{\"name\":\"qwen1.5-moe-a2.7b\",\"layer_index\":3,\"hidden_size\":2048,"
              "\"intermediate_size\":1408,\"num_experts\":60,\"top_k\":4,\"shared_experts\":1,"
              "\"shared_intermediate_size\":5632,\"shared_gate\":\"sigmoid\","
              "\"activation_policy\":\"standard_swiglu\",\"route_weight_placement\":\"output\","
              "\"policy_name\":\"qwen2_moe\",\"norm_topk_prob\":false,\"router\":{"
              "\"family\":\"qwen2_moe\",\"scoring_func\":\"softmax\",\"selection_bias\":\"none\","
              "\"topk_method\":\"greedy\",\"n_group\":1,\"topk_group\":1,\"norm_topk_prob\":false,"
              "\"normalization\":\"none\",\"norm_eps\":0.0,\"moe_normalize_expert_weights\":null,"
              "\"moe_norm_min\":null,\"routed_scaling_factor\":1.0,\"router_bias\":false,"
              "\"route_weight_placement\":\"output\",\"capacity\":{\"rule\":\"none\","
              "\"factor\":null},\"router_precision\":\"f32\"}}");
    free(text);
    struct plena_moe_model back;
    assert_int_equal(plena_model_from_trace(mo, "model", &back, NULL), 0);
    assert_string_equal(back.name, "qwen1.5-moe-a2.7b");
    assert_int_equal(back.hidden, 2048);
    assert_int_equal(back.shared_inter, 5632);
    assert_int_equal(back.shared_gate, PLENA_SHARED_GATE_SIGMOID);
    assert_int_equal(back.routing, PLENA_ROUTING_FIXED);
    assert_true(back.rms_eps == 1e-6f);
    json_decref(mo);

    /* an unknown name: defaults of a model file; a v1 boolean gate; input placement */
    json_t *u =
        json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:s,s:s}", "name", "mine", "hidden_size", 64,
                  "intermediate_size", 32, "num_experts", 8, "top_k", 2, "shared_experts", 1,
                  "shared_intermediate_size", 64, "shared_gate", 1, "activation_policy",
                  "gpt_oss_clamp_gated", "route_weight_placement", "input");
    assert_int_equal(plena_model_from_trace(u, "model", &back, NULL), 0);
    assert_int_equal(back.shared_gate, PLENA_SHARED_GATE_SIGMOID);
    assert_int_equal(back.activation, PLENA_ACT_GPT_OSS_CLAMP_GATED);
    assert_int_equal(back.router.placement, PLENA_ROUTE_INPUT);
    assert_true(back.rms_eps == 1e-6f);
    assert_int_equal(back.router_form, PLENA_ROUTER_GEMM);
    /* no shared experts: the width is ignored */
    json_object_set_new(u, "shared_experts", json_integer(0));
    assert_int_equal(plena_model_from_trace(u, "model", &back, NULL), 0);
    assert_int_equal(back.shared_inter, 0);
    /* a missing shape member is an error naming it */
    json_object_del(u, "top_k");
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_model_from_trace(u, "trace.json:$.model", &back, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, "trace.json:$.model.top_k");
    json_decref(u);
}

static const struct CMUnitTest tests[] = {
    /* presets, model files, spellings and the trace object */
    cmocka_unit_test(test_presets_validate),
    cmocka_unit_test(test_model_file),
    cmocka_unit_test(test_preset_fields),
    cmocka_unit_test(test_spellings),
    cmocka_unit_test(test_topk_limits),
    cmocka_unit_test(test_trace_object),
    /* Hugging Face config.json */
    cmocka_unit_test(test_family_configs),
    cmocka_unit_test(test_config_errors),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
