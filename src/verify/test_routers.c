/* Device routers (docs/lowering.md "Routers", gen/router.c): every router a
 * preset names, lowered on the device at tiny size (H = I = 64, the preset's
 * E, k and router), bit for bit equal to the bit-exact reference, within the
 * float64 bound, and with every token's expert set the model's float64
 * router's except at near-ties; both lowerings. Expected ids in the
 * targeted cases come from how their inputs are built (router_gaps, zero
 * input), never from the code under test. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "verify/verify.h"
#include "common/test_support.h"

static struct plena_settings g_set;
static struct plena_gen_machine g_m;

static int setup(void **state)
{
    (void)state;
    plena_settings_reference(&g_set);
    g_set.vector_sram_size = 16384; /* 1 M elements: small, fast */
    plena_gen_machine_from_settings(&g_set, &g_m);
    return 0;
}

/* A tiny layer with the router, E and k of `like`: H = I = 64, no shared
 * expert, device routing. */
static struct plena_moe_model tiny_like(const struct plena_moe_model *like)
{
    struct plena_moe_model m = *like;
    m.hidden = 64;
    m.moe_inter = 64;
    m.n_shared = 0;
    m.shared_inter = 0;
    m.shared_gate = PLENA_SHARED_GATE_NONE;
    m.routing = PLENA_ROUTING_DEVICE;
    return m;
}

struct rcase {
    struct plena_moe_build b;
    struct plena_verify_device d;
    struct plena_verify_result r;
};

static void run(const struct plena_moe_model *m, uint32_t T, enum plena_lowering low,
                int router_gaps, enum plena_input_mode input, struct rcase *c)
{
    memset(c, 0, sizeof *c);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, m, &g_m, T);
    o.cfg.routing = PLENA_ROUTING_DEVICE;
    o.cfg.lowering = low;
    o.weight_seed = 7;
    o.input_seed = 11;
    o.router_gaps = router_gaps;
    o.input = input;
    /* only the experts the reference router reaches are staged: a device that
     * routed elsewhere would read zeros and fail the comparison */
    o.reachable_experts = plena_verify_reachable_experts;
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_moe_build_run(&o, &c->b, &err);
    if (rc) fprintf(stderr, "%s: build: %s\n", m->name, err.msg);
    assert_int_equal(rc, 0);
    rc = plena_verify_emulate(&c->b, &g_set, NULL, &c->d, &err);
    if (rc || c->d.trapped) fprintf(stderr, "%s: emulate: %s %s\n", m->name, err.msg, c->d.trap);
    assert_int_equal(rc, 0);
    assert_false(c->d.trapped);
    rc = plena_verify_check(&c->b, &c->d, &c->r, &err);
    if (rc) fprintf(stderr, "%s: check: %s: %s\n", m->name, err.where, err.msg);
    assert_int_equal(rc, 0);
    if (!c->r.passed)
        fprintf(stderr,
                "%s (%s) T=%u %s: mismatches %llu ids %u w %u rel_rms %.5f near-ties %u "
                "different %u\n",
                m->name, plena_router_score_name(m->router.score), T, plena_lowering_marker(low),
                (unsigned long long)c->r.mismatches, c->r.id_mismatches, c->r.w_mismatches,
                c->r.rel_rms, c->r.route_near_ties, c->r.route_different);
}

static void done(struct rcase *c)
{
    plena_verify_device_free(&c->d);
    plena_moe_build_free(&c->b);
}

static void expect_exact(const struct plena_moe_model *m, uint32_t T, enum plena_lowering low)
{
    struct rcase c;
    run(m, T, low, 0, PLENA_INPUT_RANDOM, &c);
    assert_true(c.r.bit_exact);
    assert_true(c.r.bound_ok);
    assert_false(c.r.ref_all_zero);
    assert_int_equal(c.r.route_tokens, T);
    assert_int_equal(c.r.route_different, 0);
    assert_true(c.r.passed);
    /* materialised = the device's selected experts, nothing more */
    uint32_t distinct = 0, present = 0;
    uint8_t seen[PLENA_TOPK_MAX_EXPERTS] = {0};
    assert_non_null(c.b.device_ids); /* the hook's routing, kept for later readers */
    for (uint32_t p = 0; p < c.d.n_pairs; p++) {
        assert_int_equal(c.b.device_ids[c.d.p0 + p], c.d.ids[p]);
        assert_true(c.d.ids[p] < m->num_experts);
        assert_true(c.b.present[c.d.ids[p]]);
        distinct += !seen[c.d.ids[p]];
        seen[c.d.ids[p]] = 1;
    }
    for (uint32_t e = 0; e < m->num_experts; e++)
        present += c.b.present[e];
    if (c.d.n_pairs == (uint64_t)T * m->top_k) assert_int_equal(present, distinct);
    assert_true(present <= (uint64_t)T * m->top_k);
    done(&c);
}

/* Every preset's router with a device form, both lowerings. */
static void test_every_preset_router(void **state)
{
    (void)state;
    unsigned n = 0;
    for (unsigned i = 0; i < plena_model_preset_count(); i++) {
        const struct plena_moe_model *p = plena_model_preset_at(i);
        if (p->routing == PLENA_ROUTING_NONE || !plena_moe_router_on_device(&p->router)) continue;
        const struct plena_moe_model m = tiny_like(p);
        expect_exact(&m, 12, PLENA_LOWERING_PAIR_MAJOR);
        expect_exact(&m, 12, PLENA_LOWERING_EXPERT_MAJOR);
        n++;
    }
    assert_true(n >= 8); /* the families of docs/lowering.md "Routers" */
}

/* Router combinations no preset has: every field is orthogonal. */
static void test_router_combinations(void **state)
{
    (void)state;
    const struct plena_moe_model *base = plena_model_preset_find("tiny-route-64x6");
    assert_non_null(base);
    struct plena_router rs[6];
    for (int i = 0; i < 6; i++)
        plena_router_default(&rs[i]);
    rs[0].score = PLENA_SCORE_SIGMOID; /* sigmoid, no bias, no normalisation */
    rs[0].norm = PLENA_NORM_NONE;
    rs[1].select_bias = PLENA_SELECT_BIAS_SCORE; /* softmax, bias in the weight too */
    rs[1].norm = PLENA_NORM_L1;
    rs[1].scaling = 3.0f;
    rs[2].score = PLENA_SCORE_SIGMOID; /* sigmoid, groups by their max */
    rs[2].n_group = 4;
    rs[2].topk_group = 2;
    rs[2].group_score = PLENA_GROUP_MAX;
    rs[3].n_group = 8; /* softmax, groups by their top-2 sum, clamped sum */
    rs[3].topk_group = 3;
    rs[3].group_score = PLENA_GROUP_TOP2_SUM;
    rs[3].norm = PLENA_NORM_SUM_CLAMPED;
    rs[3].norm_eps = 0.5f;
    rs[4].score = PLENA_SCORE_SIGMOID_SELECTED; /* Llama-4's, output side, top-6 */
    rs[4].norm = PLENA_NORM_SUM;
    rs[5].score = PLENA_SCORE_SOFTMAX; /* plain softmax, scaled (DeepSeek-V2-style x 16) */
    rs[5].norm = PLENA_NORM_NONE;
    rs[5].scaling = 16.0f;
    for (int i = 0; i < 6; i++) {
        struct plena_moe_model m = *base;
        m.router = rs[i];
        expect_exact(&m, 9, PLENA_LOWERING_PAIR_MAJOR);
        expect_exact(&m, 9, PLENA_LOWERING_EXPERT_MAJOR);
    }
}

/* 256 experts, 8 groups, top-4 groups (DeepSeek-V3's router): router_gaps
 * makes token 0's logits highest at expert E - 1 (its first gap), so the
 * device must reach the last group and select expert 255. */
static void test_v3_selects_expert_255(void **state)
{
    (void)state;
    const struct plena_moe_model *v3 = plena_model_preset_find("deepseek-v3");
    assert_non_null(v3);
    assert_int_equal(v3->num_experts, 256);
    assert_int_equal(v3->router.n_group, 8);
    assert_int_equal(v3->router.topk_group, 4);
    const struct plena_moe_model m = tiny_like(v3);
    for (int low = 0; low < 2; low++) {
        struct rcase c;
        run(&m, 4, low ? PLENA_LOWERING_EXPERT_MAJOR : PLENA_LOWERING_PAIR_MAJOR, 1,
            PLENA_INPUT_RANDOM, &c);
        assert_true(c.r.passed);
        uint32_t ids[4 * 8];
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_verify_routing_ids(&c.b, ids, &err), 0);
        assert_int_equal(ids[0], 255); /* token 0's rank 0 */
        done(&c);
    }
}

/* Exact ties (zero input: every logit 0): the device keeps the lower id,
 * groups included, so every token selects experts 0..k-1 in order; with a
 * selection bias the bias alone ranks. */
static void test_ties_to_lower_id(void **state)
{
    (void)state;
    const struct plena_moe_model *base = plena_model_preset_find("tiny-route-64x6");
    struct plena_router rs[3];
    for (int i = 0; i < 3; i++)
        plena_router_default(&rs[i]);
    rs[0].score = PLENA_SCORE_SIGMOID;
    rs[1].norm = PLENA_NORM_NONE; /* softmax plain */
    rs[2].score = PLENA_SCORE_SIGMOID;
    rs[2].n_group = 8;
    rs[2].topk_group = 2;
    rs[2].group_score = PLENA_GROUP_TOP2_SUM;
    for (int i = 0; i < 3; i++) {
        struct plena_moe_model m = *base;
        m.router = rs[i];
        struct rcase c;
        run(&m, 4, PLENA_LOWERING_PAIR_MAJOR, 0, PLENA_INPUT_ZEROS, &c);
        assert_true(c.r.bit_exact);
        assert_int_equal(c.d.n_pairs, 4 * 6);
        for (uint32_t p = 0; p < c.d.n_pairs; p++)
            assert_int_equal(c.d.ids[p], p % 6);
        done(&c);
    }
}

/* A router GEMM wider than MRAM (DeepSeek-V3: 112 K tiles, 64 MRAM tiles)
 * re-streams K tiles per accumulator: at MRAM 4 tiles, H = 320 and 640 (5 and
 * 10 K tiles: resident 2, streamed 2 at a time) are bit-exact against the
 * reference, whose logit is one f32 sum over all K tiles in order. Without
 * re-streaming the build is refused (MRAM). */
static void test_router_wider_than_mram(void **state)
{
    (void)state;
    const struct plena_settings keep_set = g_set;
    const struct plena_gen_machine keep_m = g_m;
    g_set.matrix_sram_size = 4 * g_set.mlen; /* 4 tiles */
    plena_gen_machine_from_settings(&g_set, &g_m);
    assert_int_equal(g_m.mram_tiles, 4);
    static const char *const presets[] = {"deepseek-v3", "qwen3-30b-a3b"};
    for (int i = 0; i < 2; i++) {
        struct plena_moe_model m = tiny_like(plena_model_preset_find(presets[i]));
        assert_int_equal(m.router_form, PLENA_ROUTER_GEMM);
        for (uint32_t h = 320; h <= 640; h += 320) {
            m.hidden = h;
            expect_exact(&m, 9, PLENA_LOWERING_PAIR_MAJOR);
            expect_exact(&m, 9, PLENA_LOWERING_EXPERT_MAJOR);
        }
    }
    g_set = keep_set;
    g_m = keep_m;
}

/* plena moe --routing balanced|random: fixed routing with the model's
 * router properties: DeepSeek-V3's weights sum to routed_scaling_factor 2.5
 * and use at most topk_group = 4 of the 8 groups; Llama-4's lie in (0, 1). */
static void test_synthetic_fixed_routing(void **state)
{
    (void)state;
    static const char *const routings[] = {"balanced", "random"};
    for (int r = 0; r < 2; r++) {
        const struct plena_moe_model *v3 = plena_model_preset_find("deepseek-v3");
        struct plena_moe_build_opts o;
        plena_moe_build_opts_init(&o, v3, &g_m, 5);
        uint32_t *ids = NULL;
        float *w = NULL;
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_moe_build_routing(&o, v3, routings[r], 3, &ids, &w, &err), 0);
        for (uint32_t t = 0; t < 5; t++) {
            double sum = 0;
            uint8_t groups[8] = {0};
            unsigned ng = 0;
            for (uint32_t j = 0; j < 8; j++) {
                sum += w[t * 8 + j];
                uint32_t g = ids[t * 8 + j] / 32;
                ng += !groups[g];
                groups[g] = 1;
            }
            assert_true(fabs(sum - 2.5) < 1e-5);
            assert_true(ng <= 4);
        }
        plena_free(ids);
        plena_free(w);
        const struct plena_moe_model *l4 = plena_model_preset_find("llama4-maverick");
        plena_moe_build_opts_init(&o, l4, &g_m, 5);
        ids = NULL;
        w = NULL;
        assert_int_equal(plena_moe_build_routing(&o, l4, routings[r], 3, &ids, &w, &err), 0);
        for (uint32_t t = 0; t < 5; t++)
            assert_true(w[t] > 0.0f && w[t] < 1.0f);
        plena_free(ids);
        plena_free(w);
    }
}

/* A capacity router has no device form: the layer is refused, naming it. */
static void test_capacity_router_refused(void **state)
{
    (void)state;
    struct plena_moe_model m = *plena_model_preset_find("tiny-route-64x6");
    m.router.capacity = PLENA_CAPACITY_FACTOR;
    m.router.capacity_factor = 1.0f;
    assert_false(plena_moe_router_on_device(&m.router));
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, &m, &g_m, 4);
    o.cfg.routing = PLENA_ROUTING_DEVICE;
    struct plena_moe_build b;
    memset(&b, 0, sizeof b);
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_not_equal(plena_moe_build_run(&o, &b, &err), 0);
    assert_non_null(strstr(err.msg, "capacity"));
    plena_moe_build_free(&b);
}

static const struct CMUnitTest tests[] = {
    /* device routers against the float64 reference */
    cmocka_unit_test(test_every_preset_router),
    cmocka_unit_test(test_router_combinations),
    cmocka_unit_test(test_v3_selects_expert_255),
    cmocka_unit_test(test_ties_to_lower_id),
    /* refusals and fixed routing */
    cmocka_unit_test(test_capacity_router_refused),
    cmocka_unit_test(test_router_wider_than_mram),
    cmocka_unit_test(test_synthetic_fixed_routing),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, NULL);
}
