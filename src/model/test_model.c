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
    assert_int_equal(plena_model_preset_count(), 29); /* 14 full-size + 1 demo + 14 tiny */
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
         "expected a number"},
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_validate), cmocka_unit_test(test_model_file),
        cmocka_unit_test(test_preset_fields),    cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_topk_limits),      cmocka_unit_test(test_trace_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
