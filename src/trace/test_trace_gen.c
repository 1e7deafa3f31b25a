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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace/gen.h"
#include "trace/trace.h"
#include "common/test_support.h"

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

/* ---- synthetic traces with the family's router (V091-V094) ---- */

static json_t *family_trace(const char *preset, uint32_t T, const char *dist, int random_w)
{
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    o.model = plena_model_preset_find(preset);
    assert_non_null(o.model);
    o.tokens = T;
    o.seed = 5;
    o.random_weights = random_w;
    assert_int_equal(plena_trace_gen_parse_dist(dist, &o, NULL), 0);
    json_t *tree = NULL;
    struct plena_err err;
    plena_err_clear(&err);
    if (plena_trace_gen_tree(&o, &tree, &err)) fail_msg("%s: %s", preset, err.msg);
    return tree;
}

/* The codes the validator reports for tree; "" when valid. */
static void codes_of(json_t *tree, char *out, size_t n)
{
    char *text = json_dumps(tree, JSON_COMPACT);
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    plena_trace_validate_bytes(text, strlen(text), NULL, &r);
    out[0] = 0;
    for (size_t i = 0; i < r.n_errors; i++)
        if (!strstr(out, r.errors[i].code) && strlen(out) + 6 < n) {
            strcat(out, r.errors[i].code);
            strcat(out, " ");
        }
    plena_trace_report_free(&r);
    free(text);
}

static json_t *weights_row(json_t *tree, size_t t)
{
    return json_array_get(json_object_get(json_object_get(tree, "routing"), "topk_weights"), t);
}

static double row_sum(json_t *tree, size_t t)
{
    double s = 0;
    for (size_t j = 0; j < json_array_size(weights_row(tree, t)); j++)
        s += json_number_value(json_array_get(weights_row(tree, t), j));
    return s;
}

/* DeepSeek-V3: weights sum to 2.5, at most 4 of the 8 groups; a row summing
 * to 1 is V091, a row over 8 groups is V092. */
static void test_family_deepseek_v3(void **state)
{
    (void)state;
    char codes[128];
    for (int rw = 0; rw < 2; rw++) {
        json_t *t = family_trace("deepseek-v3", 6, "uniform", rw);
        codes_of(t, codes, sizeof codes);
        assert_string_equal(codes, "");
        for (size_t i = 0; i < 6; i++) {
            assert_true(fabs(row_sum(t, i) - 2.5) < 1e-5);
            json_t *ids =
                json_array_get(json_object_get(json_object_get(t, "routing"), "topk_indices"), i);
            unsigned groups = 0;
            for (size_t j = 0; j < 8; j++)
                groups |= 1u << (json_integer_value(json_array_get(ids, j)) / 32);
            assert_true(__builtin_popcount(groups) <= 4);
        }
        /* defect: the weights of row 0 renormalised to 1 */
        json_t *row = weights_row(t, 0);
        for (size_t j = 0; j < 8; j++)
            json_array_set_new(row, j, json_real(json_number_value(json_array_get(row, j)) / 2.5));
        codes_of(t, codes, sizeof codes);
        assert_string_equal(codes, "V091 ");
        json_decref(t);
    }
    json_t *t = family_trace("deepseek-v3", 2, "uniform", 0);
    json_t *ids = json_array_get(json_object_get(json_object_get(t, "routing"), "topk_indices"), 0);
    for (size_t j = 0; j < 8; j++) /* one expert in each of the 8 groups */
        json_array_set_new(ids, j, json_integer((json_int_t)(32 * j + 1)));
    json_object_del(json_object_get(t, "routing"), "expert_counts");
    codes_of(t, codes, sizeof codes);
    assert_non_null(strstr(codes, "V092"));
    json_decref(t);
}

/* Qwen1.5-MoE (norm_topk_prob false): weights below 1, not renormalised; a
 * row above 1 is V091. */
static void test_family_unnormalised(void **state)
{
    (void)state;
    char codes[128];
    json_t *t = family_trace("qwen1.5-moe-a2.7b", 4, "zipf:1.2", 1);
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "");
    for (size_t i = 0; i < 4; i++)
        assert_true(row_sum(t, i) < 0.99);
    json_array_set_new(weights_row(t, 1), 0, json_real(1.5));
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "V091 ");
    json_decref(t);
}

/* Llama-4: sigmoid of the selected logit, in (0, 1); 1.0 is V093. */
static void test_family_llama4(void **state)
{
    (void)state;
    char codes[128];
    json_t *t = family_trace("llama4-scout", 5, "uniform", 1);
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "");
    for (size_t i = 0; i < 5; i++) {
        const double w = json_number_value(json_array_get(weights_row(t, i), 0));
        assert_true(w > 0 && w < 1);
    }
    json_array_set_new(weights_row(t, 2), 0, json_real(1.0));
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "V093 ");
    json_decref(t);
}

/* Hunyuan: capacity max(k, k T / E) = 8 pairs per expert at T = 16; a hot
 * expert's pairs beyond it weigh 0; giving them weight back is V094. */
static void test_family_capacity(void **state)
{
    (void)state;
    char codes[128];
    json_t *t = family_trace("hunyuan-a13b", 16, "hot:1:0.9", 0);
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "");
    size_t zeros = 0;
    for (size_t i = 0; i < 16; i++)
        for (size_t j = 0; j < 8; j++)
            if (json_number_value(json_array_get(weights_row(t, i), j)) == 0.0) {
                zeros++;
                json_array_set_new(weights_row(t, i), j, json_real(0.01));
            }
    assert_true(zeros > 0);
    codes_of(t, codes, sizeof codes);
    assert_non_null(strstr(codes, "V094"));
    json_decref(t);
}

/* V090: a router description that does not fit the model (topk_group above
 * n_group, an unknown scoring_func) is one error naming model.router. */
static void test_router_description(void **state)
{
    (void)state;
    char codes[128];
    json_t *t = family_trace("deepseek-v3", 2, "uniform", 0);
    json_t *ro = json_object_get(json_object_get(t, "model"), "router");
    json_object_set_new(ro, "topk_group", json_integer(9));
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "V090 ");
    json_object_set_new(ro, "topk_group", json_integer(4));
    json_object_set_new(ro, "scoring_func", json_string("tanh"));
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "V090 ");
    json_object_set_new(ro, "scoring_func", json_string("sigmoid"));
    codes_of(t, codes, sizeof codes);
    assert_string_equal(codes, "");
    json_decref(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_determinism),
    cmocka_unit_test(test_balanced_counts),
    cmocka_unit_test(test_edges),
    cmocka_unit_test(test_family_deepseek_v3),
    cmocka_unit_test(test_family_unnormalised),
    cmocka_unit_test(test_family_llama4),
    cmocka_unit_test(test_family_capacity),
    cmocka_unit_test(test_router_description),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
