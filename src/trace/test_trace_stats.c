/* Routing statistics against hand-computed values: the complete example of
 * docs/trace-schema.md (gini 0.53125, duplicate factor 1.6, lists), edge cases
 * (all zero, one hot expert, perfectly balanced). The JSON writer is tested in
 * common/test_json.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "trace/trace.h"
#include "common/test_support.h"

static void test_example_stats(void **state)
{
    (void)state;
    const int64_t counts[8] = {1, 2, 0, 3, 0, 1, 1, 0};
    struct plena_trace_stats st;
    assert_int_equal(plena_trace_stats_compute(counts, 8, &st, NULL), 0);
    /* sorted [0,0,0,1,1,1,2,3]: S = 4+5+6+14+24 = 53; 106/64 - 9/8 = 0.53125 */
    assert_true(st.gini == 0.53125);
    assert_true(st.duplicate_factor == 1.6);
    assert_int_equal(st.total, 8);
    assert_int_equal(st.n_active, 5);
    assert_int_equal(st.n_zero, 3);
    assert_int_equal(st.n_tail, 5);
    assert_int_equal(st.n_hot, 0);
    assert_int_equal(st.max_count, 3);
    assert_true(st.max_mean_ratio == 3.0);
    int64_t out[8];
    const int64_t active[5] = {0, 1, 3, 5, 6}, hot[5] = {3, 1, 0, 5, 6}, cold[3] = {2, 4, 7};
    assert_int_equal(plena_trace_active_experts(counts, 8, out), 5);
    assert_memory_equal(out, active, sizeof active);
    assert_int_equal(plena_trace_hot_experts(counts, 8, out), 5);
    assert_memory_equal(out, hot, sizeof hot);
    assert_int_equal(plena_trace_cold_experts(counts, 8, out), 3);
    assert_memory_equal(out, cold, sizeof cold);
}

static void test_edges(void **state)
{
    (void)state;
    struct plena_trace_stats st;
    const int64_t zero[4] = {0, 0, 0, 0};
    assert_int_equal(plena_trace_stats_compute(zero, 4, &st, NULL), 0);
    assert_true(st.gini == 0.0);
    assert_true(st.duplicate_factor == 0.0);
    assert_true(st.max_mean_ratio == 0.0);
    /* one expert takes everything: gini = (n-1)/n = 0.75; S = 4*20 = 80,
     * 160/80 - 5/4 = 0.75 */
    const int64_t one[4] = {0, 20, 0, 0};
    assert_int_equal(plena_trace_stats_compute(one, 4, &st, NULL), 0);
    assert_true(st.gini == 0.75);
    assert_true(st.duplicate_factor == 20.0);
    assert_int_equal(st.n_hot, 1);
    assert_true(st.max_mean_ratio == 4.0);
    /* balanced: gini 0 (S = 3*(1+2+3+4) = 30, 60/48 - 5/4 = 0) */
    const int64_t bal[4] = {3, 3, 3, 3};
    assert_int_equal(plena_trace_stats_compute(bal, 4, &st, NULL), 0);
    assert_true(st.gini == 0.0);
    assert_int_equal(st.n_tail, 4);
    const int64_t neg[2] = {1, -1};
    struct plena_err err = {0};
    assert_int_not_equal(plena_trace_stats_compute(neg, 2, &st, &err), 0);
    const int64_t big[2] = {INT64_MAX, 1};
    assert_int_not_equal(plena_trace_stats_compute(big, 2, &st, NULL), 0);
    /* hot order ties: by id ascending */
    const int64_t ties[5] = {2, 5, 2, 0, 5};
    const int64_t want[4] = {1, 4, 0, 2};
    int64_t out[5];
    assert_int_equal(plena_trace_hot_experts(ties, 5, out), 4);
    assert_memory_equal(out, want, sizeof want);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_example_stats),
    cmocka_unit_test(test_edges),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
