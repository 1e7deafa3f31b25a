/* The routers in float64 (model/router.c plena_router_select_f64, the
 * reference every device router is checked against), one token of 8
 * experts per case, expected ids and weights computed by hand in the
 * comments. Logits are ln of small ratios so softmax and sigmoid values are
 * exact fractions: sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model/model.h"
#include "common/test_support.h"

#define L3 1.0986122886681098 /* ln 3 */
#define L2 0.6931471805599453 /* ln 2 */

static void expect(const struct plena_router *r, uint32_t k, const double *l, const double *bias,
                   const uint32_t *want_ids, const double *want_w)
{
    uint32_t ids[8];
    double w[8];
    assert_int_equal(plena_router_select_f64(r, 8, k, l, bias, ids, w, NULL), 0);
    for (uint32_t j = 0; j < k; j++) {
        assert_int_equal(ids[j], want_ids[j]);
        assert_true(fabs(w[j] - want_w[j]) < 1e-12);
    }
    /* the weights of given ids are the same function */
    double w2[8];
    assert_int_equal(plena_router_weights_f64(r, 8, k, l, bias, ids, w2, NULL), 0);
    for (uint32_t j = 0; j < k; j++)
        assert_true(fabs(w2[j] - w[j]) < 1e-15);
}

static struct plena_router base(enum plena_router_score s, enum plena_router_norm n)
{
    struct plena_router r;
    plena_router_default(&r);
    r.score = s;
    r.norm = n;
    return r;
}

/* p = [1, 3, 1, 1, 2, 1, 1, 1] / 11: top-2 experts 1 and 4 */
static const double softmax_l[8] = {0, L3, 0, 0, L2, 0, 0, 0};

/* Rank order, ties to the lower index (expected ids written by hand). */
static void test_top_n_f32(void **state)
{
    (void)state;
    const float v[] = {1, 3, 3, -2, 3, 2};
    uint32_t idx[6];
    plena_top_n_f32(v, 6, 3, idx);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 2);
    assert_int_equal(idx[2], 4);
    plena_top_n_f32(v, 6, 6, idx);
    const uint32_t all[] = {1, 2, 4, 5, 0, 3};
    assert_memory_equal(idx, all, sizeof all);
}

static void test_softmax_family(void **state)
{
    (void)state;
    const uint32_t ids[2] = {1, 4};
    struct plena_router r = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_SUM);
    expect(&r, 2, softmax_l, NULL, ids, (const double[]){3.0 / 5, 2.0 / 5}); /* renormalised */
    r.norm = PLENA_NORM_NONE;
    expect(&r, 2, softmax_l, NULL, ids, (const double[]){3.0 / 11, 2.0 / 11}); /* Qwen2, V2-Lite */
    r.scaling = 16.0f;
    expect(&r, 2, softmax_l, NULL, ids, (const double[]){48.0 / 11, 32.0 / 11}); /* x 16 */
    r = base(PLENA_SCORE_SOFTMAX_SELECTED, PLENA_NORM_NONE);                     /* gpt-oss */
    expect(&r, 2, softmax_l, NULL, ids, (const double[]){3.0 / 5, 2.0 / 5});
    /* clamped sum (ERNIE moe_norm_min): 5/11 < 0.5, so / 0.5 */
    r = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_SUM_CLAMPED);
    r.norm_eps = 0.5f;
    expect(&r, 2, softmax_l, NULL, ids, (const double[]){6.0 / 11, 4.0 / 11});
    /* a selection bias of +0.5 on expert 6 (p = 1/11) ranks it first; its
     * weight stays p (selection only) */
    const double bias[8] = {0, 0, 0, 0, 0, 0, 0.5, 0};
    r = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_NONE);
    r.select_bias = PLENA_SELECT_BIAS_SELECTION;
    expect(&r, 2, softmax_l, bias, (const uint32_t[]){6, 1}, (const double[]){1.0 / 11, 3.0 / 11});
}

static void test_sigmoid_family(void **state)
{
    (void)state;
    /* s = [1/2, 3/4, 1/4, 1/2, ...]; bias +0.6 on expert 2: selection
     * values 0.5, 0.75, 0.85, 0.5: experts 2 then 1, weights s = 1/4, 3/4,
     * sum 1 (+ 1e-20), x 2.5 (DeepSeek-V3 without its groups, GLM-4.5) */
    const double l[8] = {0, L3, -L3, 0, 0, 0, 0, 0};
    const double bias[8] = {0, 0, 0.6, 0, 0, 0, 0, 0};
    struct plena_router r = base(PLENA_SCORE_SIGMOID, PLENA_NORM_SUM);
    r.select_bias = PLENA_SELECT_BIAS_SELECTION;
    r.norm_eps = 1e-20f;
    r.scaling = 2.5f;
    expect(&r, 2, l, bias, (const uint32_t[]){2, 1}, (const double[]){0.625, 1.875});
    /* Llama-4: top-1 of the logits, sigmoid of it */
    r = base(PLENA_SCORE_SIGMOID_SELECTED, PLENA_NORM_NONE);
    expect(&r, 1, l, NULL, (const uint32_t[]){1}, (const double[]){0.75});
}

static void test_group_limited(void **state)
{
    (void)state;
    /* 4 groups of 2, sigmoid scores [1/2 1/4 | 3/4 1/4 | 3/4 1/2 | 1/4 1/4]:
     * top-2 sums 0.75, 1.0, 1.25, 0.5 -> groups 2 and 1; their experts 2
     * (3/4), 3, 4 (3/4), 5: experts 2 and 4 (equal: the lower id first),
     * although expert 0's 1/2 beats expert 3's 1/4 it is not reachable */
    const double l[8] = {0, -L3, L3, -L3, L3, 0, -L3, -L3};
    struct plena_router r = base(PLENA_SCORE_SIGMOID, PLENA_NORM_NONE);
    r.n_group = 4;
    r.topk_group = 2;
    r.group_score = PLENA_GROUP_TOP2_SUM;
    expect(&r, 3, l, NULL, (const uint32_t[]){2, 4, 5}, (const double[]){0.75, 0.75, 0.5});
    /* scored by their max (DeepSeek-V2): maxima 1/2, 3/4, 3/4, 1/4 -> groups
     * 1 and 2 again, the same experts */
    r.group_score = PLENA_GROUP_MAX;
    expect(&r, 3, l, NULL, (const uint32_t[]){2, 4, 5}, (const double[]){0.75, 0.75, 0.5});
    /* one group (topk_group 1): group 2 alone (sum 1.25): experts 4, 5 */
    r.group_score = PLENA_GROUP_TOP2_SUM;
    r.topk_group = 1;
    expect(&r, 2, l, NULL, (const uint32_t[]){4, 5}, (const double[]){0.75, 0.5});
}

/* plena_router_agree_f64: the same set in another order is SAME; a swap
 * of two experts whose selection values are within the tolerance is a
 * near-tie; an expert far below the k-th is DIFFERENT; a group the router
 * did not choose is DIFFERENT. */
static void test_agreement(void **state)
{
    (void)state;
    const double l[8] = {0, L3, 0.001, 0, L2, -3, 0, 0};
    struct plena_router r = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_SUM);
    /* ranked 1, 4, 2 (p 3/11, 2/11, ~1/11 + 0.1%), then 0, 3, 6, 7 at 1/11 */
    assert_int_equal(
        plena_router_agree_f64(&r, 8, 3, l, NULL, (const uint32_t[]){4, 1, 2}, 1e-2, NULL),
        PLENA_ROUTE_SAME);
    assert_int_equal(
        plena_router_agree_f64(&r, 8, 3, l, NULL, (const uint32_t[]){1, 4, 0}, 1e-2, NULL),
        PLENA_ROUTE_NEAR_TIE);
    assert_int_equal(
        plena_router_agree_f64(&r, 8, 3, l, NULL, (const uint32_t[]){1, 4, 5}, 1e-2, NULL),
        PLENA_ROUTE_DIFFERENT);
    const double g[8] = {0, -L3, L3, -L3, L3, 0, -L3, -L3};
    struct plena_router rg = base(PLENA_SCORE_SIGMOID, PLENA_NORM_NONE);
    rg.n_group = 4;
    rg.topk_group = 2;
    rg.group_score = PLENA_GROUP_TOP2_SUM;
    /* expert 0 lies in group 0 (sum 0.75 against the 2nd best 1.0) */
    assert_int_equal(
        plena_router_agree_f64(&rg, 8, 3, g, NULL, (const uint32_t[]){2, 4, 0}, 1e-2, NULL),
        PLENA_ROUTE_DIFFERENT);
}

/* The device plan of each kind (gen/router.c and ref/ref.c follow it). */
static void test_plan(void **state)
{
    (void)state;
    struct plena_router_plan pl;
    struct plena_router r = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_SUM);
    plena_router_plan(&r, &pl); /* V_TOPK's weights are the renormalised softmax */
    assert_int_equal(pl.lowering, PLENA_RLOWER_VTOPK);
    r.norm = PLENA_NORM_NONE;
    plena_router_plan(&r, &pl);
    assert_int_equal(pl.lowering, PLENA_RLOWER_SOFTMAX);
    assert_int_equal(pl.select, PLENA_RROWS_LOGITS); /* softmax is monotone */
    assert_int_equal(pl.value, PLENA_RROWS_SCORE);
    r.select_bias = PLENA_SELECT_BIAS_SELECTION;
    plena_router_plan(&r, &pl);
    assert_int_equal(pl.select, PLENA_RROWS_BIASED);
    r = base(PLENA_SCORE_SIGMOID, PLENA_NORM_SUM);
    r.n_group = 8;
    r.topk_group = 4;
    r.group_score = PLENA_GROUP_TOP2_SUM;
    plena_router_plan(&r, &pl); /* sums of scores are not monotone in the logits */
    assert_int_equal(pl.lowering, PLENA_RLOWER_SIGMOID);
    assert_int_equal(pl.select, PLENA_RROWS_SCORE);
    assert_true(pl.groups);
    r.capacity = PLENA_CAPACITY_HUNYUAN;
    plena_router_plan(&r, &pl);
    assert_int_equal(pl.lowering, PLENA_RLOWER_NONE);
}

/* Synthetic routing (plena_router_synth): values computed by hand. */
static void test_synth(void **state)
{
    (void)state;
    /* groups of 2 of 8, topk_group 2: id 4 (a third group) moves to the next
     * id of groups {0, 1} no rank uses, 1; equal weights through sigmoid,
     * renormalised, x 2.5: 2.5 / 3 each */
    struct plena_router r = base(PLENA_SCORE_SIGMOID, PLENA_NORM_SUM);
    r.n_group = 4;
    r.topk_group = 2;
    r.group_score = PLENA_GROUP_TOP2_SUM;
    r.scaling = 2.5f;
    uint32_t ids[3] = {0, 2, 4};
    float w[3] = {1.0f / 3, 1.0f / 3, 1.0f / 3};
    assert_int_equal(plena_router_synth(&r, 1, 8, 3, ids, w, NULL), 0);
    assert_int_equal(ids[2], 1);
    for (int j = 0; j < 3; j++)
        assert_true(fabsf(w[j] - 0.8333333f) < 1e-6f);
    /* softmax over E = 4, not renormalised: logits l at the two ids, l - 1 at
     * the others: 1 / (2 + 2/e) = 0.36552929 each */
    struct plena_router q = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_NONE);
    uint32_t qi[2] = {0, 1};
    float qw[2] = {0.5f, 0.5f};
    assert_int_equal(plena_router_synth(&q, 1, 4, 2, qi, qw, NULL), 0);
    assert_true(fabsf(qw[0] - 0.36552929f) < 1e-6f && fabsf(qw[1] - 0.36552929f) < 1e-6f);
    /* Llama-4: the one weight 1 is logit ln 1 = 0, sigmoid 1/2 */
    struct plena_router l = base(PLENA_SCORE_SIGMOID_SELECTED, PLENA_NORM_NONE);
    uint32_t li[1] = {3};
    float lw[1] = {1.0f};
    assert_int_equal(plena_router_synth(&l, 1, 4, 1, li, lw, NULL), 0);
    assert_true(lw[0] == 0.5f);
    /* Hunyuan capacity max(k, k T / E) = max(1, 3 / 2) = 1 with T 3, E 2, k 1:
     * the second token's pair to expert 0 is dropped (weight 0) */
    struct plena_router h = base(PLENA_SCORE_SOFTMAX, PLENA_NORM_SUM_CLAMPED);
    h.norm_eps = 1.1920929e-07f;
    h.capacity = PLENA_CAPACITY_HUNYUAN;
    uint32_t hi[3] = {0, 0, 1};
    float hw[3] = {1.0f, 1.0f, 1.0f};
    assert_int_equal(plena_router_synth(&h, 3, 2, 1, hi, hw, NULL), 0);
    assert_true(hw[0] == 1.0f && hw[1] == 0.0f && hw[2] == 1.0f);
}

static const struct CMUnitTest tests[] = {
    /* the selection rule of every router (and of ckpt/forward.c) */
    cmocka_unit_test(test_top_n_f32),
    /* the float64 routers, the device check, plans and synthetic routing */
    cmocka_unit_test(test_softmax_family),
    cmocka_unit_test(test_sigmoid_family),
    cmocka_unit_test(test_group_limited),
    cmocka_unit_test(test_agreement),
    cmocka_unit_test(test_plan),
    cmocka_unit_test(test_synth),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
