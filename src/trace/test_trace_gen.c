/* plena trace gen (docs/cli.md "plena trace gen"): same seed -> identical
 * bytes, different seed -> different routing; round-robin/balanced counts
 * differ by at most 1; no duplicate id per row at K = E and K = 1; every
 * generated trace validates (plena_trace_gen validates; the test re-checks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>

#include "trace/gen.h"
#include "trace/trace.h"

static struct plena_moe_model model_of(uint32_t E, uint32_t K)
{
    struct plena_moe_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "tiny-e%uk%u", E, K);
    m.hidden = 64;
    m.moe_inter = 64;
    m.num_experts = E;
    m.top_k = K;
    return m;
}

static void gen(const struct plena_moe_model *m, const char *dist, uint64_t seed, uint32_t T,
                int random_w, struct plena_buf *b)
{
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    o.model = m;
    o.seed = seed;
    o.tokens = T;
    o.random_weights = random_w;
    struct plena_err err = {0};
    assert_int_equal(plena_trace_gen_parse_dist(dist, &o, &err), 0);
    plena_buf_init(b);
    int rc = plena_trace_gen(&o, b, &err);
    if (rc) fprintf(stderr, "%s: %s\n", err.where, err.msg);
    assert_int_equal(rc, 0);
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    assert_int_equal(plena_trace_validate_bytes(b->data, b->len, NULL, &r), 0);
    assert_int_equal(r.n_warnings, 0);
    plena_trace_report_free(&r);
}

static json_t *counts_of(const struct plena_buf *b)
{
    json_t *root = json_loadb(b->data, b->len, 0, NULL);
    assert_non_null(root);
    return root;
}

static void test_determinism(void **state)
{
    (void)state;
    static const char *dists[] = {"uniform", "balanced", "round-robin", "zipf:1.2",
                                  "zipf:2",  "hot:2",    "hot:3:0.5"};
    struct plena_moe_model m = model_of(8, 2);
    for (size_t i = 0; i < sizeof dists / sizeof dists[0]; i++) {
        for (int rw = 0; rw < 2; rw++) {
            struct plena_buf a, b;
            gen(&m, dists[i], 7, 64, rw, &a);
            gen(&m, dists[i], 7, 64, rw, &b);
            assert_int_equal(a.len, b.len);
            assert_memory_equal(a.data, b.data, a.len);
            plena_buf_free(&a);
            plena_buf_free(&b);
        }
    }
    struct plena_buf a, b;
    gen(&m, "uniform", 1, 64, 0, &a);
    gen(&m, "uniform", 2, 64, 0, &b);
    assert_true(a.len != b.len || memcmp(a.data, b.data, a.len) != 0);
    plena_buf_free(&a);
    plena_buf_free(&b);
}

static void test_balanced_counts(void **state)
{
    (void)state;
    static const char *dists[] = {"balanced", "round-robin"};
    struct plena_moe_model m = model_of(7, 3);
    for (size_t i = 0; i < 2; i++) {
        struct plena_buf b;
        gen(&m, dists[i], 3, 10, 0, &b); /* 30 slots over 7 experts: 4 or 5 each */
        json_t *root = counts_of(&b);
        json_t *c = json_object_get(json_object_get(root, "routing"), "expert_counts");
        for (size_t e = 0; e < 7; e++) {
            json_int_t v = json_integer_value(json_array_get(c, e));
            assert_true(v == 4 || v == 5);
        }
        json_decref(root);
        plena_buf_free(&b);
    }
}

static void test_edges(void **state)
{
    (void)state;
    /* K = E: every row is a permutation; K = 1. Validation (V045) checks rows. */
    static const char *dists[] = {"uniform", "balanced", "round-robin", "zipf:1.5", "hot:1"};
    struct plena_moe_model full = model_of(6, 6), one = model_of(5, 1);
    for (size_t i = 0; i < sizeof dists / sizeof dists[0]; i++) {
        struct plena_buf b;
        gen(&full, dists[i], 11, 20, 1, &b);
        plena_buf_free(&b);
        gen(&one, dists[i], 11, 20, 0, &b);
        plena_buf_free(&b);
    }
    struct plena_moe_model big = model_of(16383, 4);
    struct plena_buf b;
    gen(&big, "uniform", 5, 8, 0, &b);
    plena_buf_free(&b);
    /* refused shapes and options */
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    struct plena_err err = {0};
    assert_int_equal(plena_trace_gen_parse_dist("zipf:17", &o, &err), PLENA_E_USAGE);
    assert_int_equal(plena_trace_gen_parse_dist("poisson", &o, NULL), PLENA_E_USAGE);
    assert_int_equal(plena_trace_gen_parse_dist("hot:8", &o, NULL), 0);
    struct plena_moe_model m = model_of(8, 2);
    o.model = &m;
    plena_buf_init(&b);
    assert_int_equal(plena_trace_gen(&o, &b, NULL), PLENA_E_INPUT); /* hot:8 with E = 8 */
    plena_buf_free(&b);
    /* sizes are refused before anything is allocated: 16M tokens x 8 (it took
     * 16 GB before validation refused the document) and many small traces */
    struct plena_moe_model q = model_of(128, 8);
    plena_trace_gen_opts_default(&o);
    o.model = &q;
    o.tokens = 16777216;
    plena_buf_init(&b);
    plena_err_clear(&err);
    assert_int_equal(plena_trace_gen(&o, &b, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "more than the 8388608 routing slots"));
    plena_buf_free(&b);
    assert_int_equal(plena_trace_gen_check_size(1024, 1024, 8, NULL), 0); /* exactly 2^23 */
    assert_int_equal(plena_trace_gen_check_size(1025, 1024, 8, NULL), PLENA_E_INPUT);
    assert_int_equal(plena_trace_gen_check_size(UINT64_MAX, 16777216, 8, NULL), PLENA_E_INPUT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_balanced_counts),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
