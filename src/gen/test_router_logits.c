/* Preloaded router logits (gen/router_logits.h) per score family on
 * hand-made one- and two-token routings: every expected value is worked out
 * in the comments with libm (independent of det_log), then rounded to BF16;
 * and the routings no device router can select are refused, naming the
 * token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen/router_logits.h"
#include "model/model.h"
#include "num/num.h"
#include "common/test_support.h"

static struct plena_moe_cfg cfg_of(const char *preset, uint32_t E, uint32_t k)
{
    struct plena_moe_cfg c;
    memset(&c, 0, sizeof c);
    const struct plena_moe_model *m = plena_model_preset_find(preset);
    assert_non_null(m);
    c.router = m->router;
    c.E = E;
    c.k = k;
    snprintf(c.name, sizeof c.name, "%s", preset);
    return c;
}

static float bf(double x)
{
    return plena_num_round_bf16((float)x);
}

/* softmax-top-k (V_TOPK alone): ln(w) at the ids, -30 for w = 0, -16384 elsewhere */
static void test_softmax_family(void **state)
{
    (void)state;
    struct plena_moe_cfg c = cfg_of("mixtral-8x7b", 8, 2);
    const uint32_t ids[4] = {3, 1, 0, 7};
    const float w[4] = {0.75f, 0.25f, 1.0f, 0.0f};
    float l[16];
    assert_int_equal(plena_moe_router_logits_for(&c, 2, ids, w, l, NULL), 0);
    assert_true(l[3] == bf(log(0.75))); /* -0.28768 -> -0.2871094 */
    assert_true(l[1] == bf(log(0.25))); /* -1.38629 -> -1.3828125 */
    assert_true(l[8 + 0] == 0.0f);      /* ln 1 */
    assert_true(l[8 + 7] == -30.0f);    /* w = 0 */
    for (uint32_t e = 0; e < 8; e++)
        if (e != 3 && e != 1) assert_true(l[e] == -16384.0f);
    assert_true(l[8 + 2] == -16384.0f);
}

/* sigmoid scores with normalisation (DeepSeek-V3): u = 0.5 w / max w, logit(u) */
static void test_sigmoid_normalised(void **state)
{
    (void)state;
    struct plena_moe_cfg c = cfg_of("deepseek-v3", 8, 2);
    const uint32_t ids[2] = {5, 2};
    const float w[2] = {2.0f, 0.5f};
    float l[8];
    assert_int_equal(plena_moe_router_logits_for(&c, 1, ids, w, l, NULL), 0);
    assert_true(l[5] == 0.0f);                           /* u = 0.5 */
    assert_true(l[2] == bf(log(0.125) - log(0.875)));    /* u = 0.125: -1.94591 */
    assert_true(l[0] == -16384.0f && l[7] == -16384.0f); /* sigmoid exactly 0 on the device */
}

/* sigmoid of the selected logit without normalisation (Llama-4): u = w / scaling */
static void test_sigmoid_selected(void **state)
{
    (void)state;
    struct plena_moe_cfg c = cfg_of("llama4-scout", 16, 1);
    const uint32_t ids[2] = {9, 4};
    const float w[2] = {0.9f, 0.0f};
    float l[32];
    assert_int_equal(plena_moe_router_logits_for(&c, 2, ids, w, l, NULL), 0);
    assert_true(l[9] == bf(log(0.9f) - log(1.0 - 0.9f))); /* ln 9 = 2.19722 */
    assert_true(l[16 + 4] == -30.0f);
    assert_true(l[0] == -16384.0f);
}

/* what no device router can select: a token over more groups than topk_group,
 * a repeated id, an id >= E */
static void test_refusals(void **state)
{
    (void)state;
    struct plena_moe_cfg c = cfg_of("deepseek-v3", 8, 5); /* 8 groups of 1, topk_group 4 */
    const uint32_t five[5] = {0, 1, 2, 3, 4};
    const float w[5] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    float l[8];
    struct plena_err e;
    plena_err_clear(&e);
    assert_int_equal(plena_moe_router_logits_for(&c, 1, five, w, l, &e), PLENA_E_INPUT);
    assert_string_equal(e.where, "routing.topk_indices[0]");
    assert_non_null(strstr(e.msg, "span 5 expert groups"));
    struct plena_moe_cfg m = cfg_of("mixtral-8x7b", 8, 2);
    const uint32_t rep[4] = {0, 1, 6, 6}, big[2] = {8, 0};
    plena_err_clear(&e);
    assert_int_equal(plena_moe_router_logits_for(&m, 2, rep, w, l, &e), PLENA_E_INPUT);
    assert_string_equal(e.where, "routing.topk_indices[1]");
    assert_non_null(strstr(e.msg, "appears twice"));
    plena_err_clear(&e);
    assert_int_equal(plena_moe_router_logits_for(&m, 1, big, w, l, &e), PLENA_E_INPUT);
    assert_non_null(strstr(e.msg, "8 >= num_experts 8"));
    /* a capacity router has no device form */
    m.router.capacity = PLENA_CAPACITY_FACTOR;
    m.router.capacity_factor = 1.0f;
    plena_err_clear(&e);
    const uint32_t ok[2] = {0, 1};
    assert_int_equal(plena_moe_router_logits_for(&m, 1, ok, w, l, &e), PLENA_E_INPUT);
    assert_non_null(strstr(e.msg, "no device form"));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_softmax_family),
    cmocka_unit_test(test_sigmoid_normalised),
    cmocka_unit_test(test_sigmoid_selected),
    cmocka_unit_test(test_refusals),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
