/* The common JSON writer (common/json.h, docs/formats.md "Conventions"):
 * shortest binary64 and binary32 spellings (hand-checked values), the pretty
 * and canonical forms (sorted keys, scalar arrays on one line, escapes), the
 * binary32 rule for route-weight arrays and the depth limit. Merged from the
 * former writer tests of trace/ (test_trace_stats, test_trace_set) and
 * replay/ (test_replay_jsonw), whose expected texts are kept as they were. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/test_support.h"

static void expect_double(double v, const char *want)
{
    char b[64];
    plena_json_fmt_double(b, sizeof b, v);
    assert_string_equal(b, want);
}

static void expect_float(float v, const char *want)
{
    char b[64];
    plena_json_fmt_float(b, sizeof b, v);
    assert_string_equal(b, want);
}

static void test_fmt_double(void **state)
{
    (void)state;
    expect_double(0.1, "0.1");
    expect_double(1e21, "1e+21");
    expect_double(1.5, "1.5");
    expect_double(1.6, "1.6");
    expect_double(2.0, "2");
    expect_double(0.53125, "0.53125");
    expect_double(0.1 + 0.2, "0.30000000000000004"); /* needs all 17 digits */
    expect_double(1.0 / 3.0, "0.3333333333333333");  /* 16 digits read back */
    /* the literal shortest-spelling rule: p = 1 already reads back, so 100.0 is "1e+02" */
    expect_double(100.0, "1e+02");
    expect_double(1e300, "1e+300");
    expect_double(-0.0, "-0");
    /* 0.1f as a double needs 17 digits; as binary32 "0.1" (below) */
    expect_double((double)0.1f, "0.10000000149011612");
}

static void test_fmt_float(void **state)
{
    (void)state;
    /* 0.1f = 0.100000001490116..., shortest binary32 spelling "0.1" */
    expect_float(0.1f, "0.1");
    /* (float)(1/3) = 0.3333333432674408; float spacing there is 2^-25 =
     * 3.0e-8, so 8 digits "0.33333334" read back to it, 7 ("0.3333333") do
     * not (numpy repr of float32(1/3)) */
    expect_float((float)(1.0 / 3.0), "0.33333334");
    expect_float(1.0f / 3.0f, "0.33333334");
    /* 16777217 is not a float: (float) rounds to 16777216 */
    expect_float(16777216.0f, "16777216");
    expect_float(1.0f, "1");
    expect_float(3.0f, "3");
    expect_float(0.125f, "0.125");
    expect_float(0.375f, "0.375");
    expect_float(3.4028234663852886e38f, "3.4028235e+38"); /* FLT_MAX */
    expect_float(1.4e-45f, "1e-45");                       /* smallest subnormal */
}

/* Renders v with flags; returns a NUL-terminated copy (plena_free). */
static char *render(const json_t *v, unsigned flags)
{
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_json_dump(&b, v, flags), 0);
    plena_buf_append(&b, "", 1);
    return b.data;
}

static void expect_text(const json_t *v, unsigned flags, const char *want)
{
    char *s = render(v, flags);
    assert_string_equal(s, want);
    plena_free(s);
}

static void test_pretty_and_canonical(void **state)
{
    (void)state;
    json_t *v = json_loads("{\"b\":1,\"a\":[1,2.0,\"x\"],\"c\":{\"z\":null,\"B\":true},"
                           "\"d\":[{\"q\":1}],\"e\":[],\"f\":{}}",
                           0, NULL);
    assert_non_null(v);
    expect_text(v, PLENA_JSON_PRETTY,
                "{\n"
                "  \"a\": [1, 2, \"x\"],\n"
                "  \"b\": 1,\n"
                "  \"c\": {\n"
                "    \"B\": true,\n"
                "    \"z\": null\n"
                "  },\n"
                "  \"d\": [\n"
                "    {\n"
                "      \"q\": 1\n"
                "    }\n"
                "  ],\n"
                "  \"e\": [],\n"
                "  \"f\": {}\n"
                "}\n");
    expect_text(v, 0,
                "{\"a\":[1,2,\"x\"],\"b\":1,\"c\":{\"B\":true,\"z\":null},\"d\":[{\"q\":1}],"
                "\"e\":[],\"f\":{}}");
    json_decref(v);

    /* nested arrays: an array holding arrays is not flat */
    v = json_loads("{\"b\": [1, 2.5, 0.1], \"a\": {\"z\": [[1], []], \"y\": 1.0}, "
                   "\"c\": \"q\\\"\\u0001\"}",
                   0, NULL);
    assert_non_null(v);
    expect_text(v, PLENA_JSON_PRETTY,
                "{\n"
                "  \"a\": {\n"
                "    \"y\": 1,\n"
                "    \"z\": [\n"
                "      [1],\n"
                "      []\n"
                "    ]\n"
                "  },\n"
                "  \"b\": [1, 2.5, 0.1],\n"
                "  \"c\": \"q\\\"\\u0001\"\n"
                "}\n");
    expect_text(v, 0, "{\"a\":{\"y\":1,\"z\":[[1],[]]},\"b\":[1,2.5,0.1],\"c\":\"q\\\"\\u0001\"}");
    json_decref(v);
}

static void test_escapes_and_numbers(void **state)
{
    (void)state;
    /* only " \ and control characters are escaped; numbers shortest */
    json_t *v = json_pack("{s:s,s:[f,f,f,f,i]}", "k", "a\"b\\c\x01", "n", 0.1, 1e21, 1.5, 2.0, -3);
    expect_text(v, 0, "{\"k\":\"a\\\"b\\\\c\\u0001\",\"n\":[0.1,1e+21,1.5,2,-3]}");
    json_decref(v);
    /* non-ASCII stays raw UTF-8 */
    v = json_pack("{s:s}", "u", "\xc3\xa9");
    expect_text(v, 0, "{\"u\":\"\xc3\xa9\"}");
    json_decref(v);
}

static void test_route_weights_f32(void **state)
{
    (void)state;
    /* binary32 inside topk_weights/route_weights arrays only, nested included */
    json_t *v = json_pack("{s:{s:[[f]]},s:f}", "routing", "topk_weights", (double)0.1f, "other",
                          (double)0.1f);
    expect_text(v, PLENA_JSON_ROUTE_WEIGHTS_F32,
                "{\"other\":0.10000000149011612,\"routing\":{\"topk_weights\":[[0.1]]}}");
    /* without the flag every real is binary64 */
    expect_text(v, 0,
                "{\"other\":0.10000000149011612,\"routing\":{\"topk_weights\":[["
                "0.10000000149011612]]}}");
    json_decref(v);
    /* a member of that name holding an object is not a weight array, and the
     * rule does not reach into objects inside the array */
    v = json_pack("{s:{s:f},s:[{s:f}]}", "route_weights", "x", (double)0.1f, "topk_weights", "y",
                  (double)0.1f);
    expect_text(v, PLENA_JSON_ROUTE_WEIGHTS_F32,
                "{\"route_weights\":{\"x\":0.10000000149011612},"
                "\"topk_weights\":[{\"y\":0.10000000149011612}]}");
    json_decref(v);
}

static json_t *nest(int depth)
{
    json_t *v = json_integer(1);
    for (int i = 0; i < depth; i++) {
        json_t *a = json_array();
        json_array_append_new(a, v);
        v = a;
    }
    return v;
}

static void test_shallow_limit(void **state)
{
    (void)state;
    /* levels 0..256 are written; a scalar at level 257 is refused */
    json_t *ok = nest(256), *deep = nest(257);
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_json_dump(&b, ok, PLENA_JSON_SHALLOW), 0);
    assert_int_equal(b.len, 256 * 2 + 1);
    plena_buf_free(&b);
    plena_buf_init(&b);
    assert_int_equal(plena_json_dump(&b, deep, PLENA_JSON_SHALLOW), -1);
    plena_buf_free(&b);
    /* without the flag there is no limit */
    plena_buf_init(&b);
    assert_int_equal(plena_json_dump(&b, deep, 0), 0);
    assert_int_equal(b.len, 257 * 2 + 1);
    plena_buf_free(&b);
    json_decref(ok);
    json_decref(deep);
}

/* The result-file form of docs/profile.md "Profile JSON" (profile, run-stats, gate
 * summaries): insertion order, one array element per line, %.17g reals with
 * ".0" when integer-looking, two-character control escapes. */
static void test_profile_form(void **state)
{
    (void)state;
    json_t *v = json_object();
    json_object_set_new(v, "z", json_integer(1));
    json_object_set_new(v, "a", json_pack("[f,f,f,f,[],{},[i]]", 7.03e-8, 1.0, 100.0, 1e21, 3));
    json_object_set_new(v, "m", json_pack("{s:b,s:n}", "y", 1, "b"));
    json_object_set_new(v, "s", json_string("q\"\\\n\t\r\b\f\x01\x7f"));
    expect_text(v, PLENA_JSON_PROFILE_FORM,
                "{\n"
                "  \"z\": 1,\n"
                "  \"a\": [\n"
                "    7.0300000000000001e-08,\n"
                "    1.0,\n"
                "    100.0,\n"
                "    1e+21,\n"
                "    [],\n"
                "    {},\n"
                "    [\n"
                "      3\n"
                "    ]\n"
                "  ],\n"
                "  \"m\": {\n"
                "    \"y\": true,\n"
                "    \"b\": null\n"
                "  },\n"
                "  \"s\": \"q\\\"\\\\\\n\\t\\r\\b\\f\\u0001\x7f\"\n"
                "}\n");
    json_decref(v);
    char num[64];
    plena_json_fmt_real17(num, sizeof num, 0.0 / 0.0);
    assert_string_equal(num, "null");
    plena_json_fmt_real17(num, sizeof num, -2.0);
    assert_string_equal(num, "-2.0");
    /* render: the text with its length, and the errors by kind */
    v = json_pack("{s:i}", "k", 1);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(plena_json_render(v, PLENA_JSON_PROFILE_FORM, &text, &len, NULL), 0);
    assert_int_equal(len, strlen("{\n  \"k\": 1\n}\n"));
    assert_string_equal(text, "{\n  \"k\": 1\n}\n");
    plena_free(text);
    plena_alloc_fail_after(0);
    struct plena_err err = {0};
    assert_int_equal(plena_json_render(v, PLENA_JSON_PROFILE_FORM, &text, &len, &err),
                     PLENA_E_NOMEM);
    plena_alloc_fail_reset();
    json_decref(v);
    json_t *deep = nest(300);
    assert_int_equal(plena_json_render(deep, PLENA_JSON_SHALLOW, &text, &len, NULL),
                     PLENA_E_INTERNAL);
    json_decref(deep);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    json_t *v = json_pack("{s:i,s:i}", "b", 1, "a", 2);
    struct plena_buf b;
    plena_buf_init(&b);
    plena_alloc_fail_after(0);
    int rc = plena_json_dump(&b, v, PLENA_JSON_PRETTY);
    plena_alloc_fail_reset();
    assert_int_equal(rc, -1);
    plena_buf_free(&b);
    json_decref(v);
}

static const struct CMUnitTest tests[] = {
    /* number formatting */
    cmocka_unit_test(test_fmt_double),
    cmocka_unit_test(test_fmt_float),
    /* the writer */
    cmocka_unit_test(test_pretty_and_canonical),
    cmocka_unit_test(test_escapes_and_numbers),
    cmocka_unit_test(test_route_weights_f32),
    cmocka_unit_test(test_shallow_limit),
    cmocka_unit_test(test_out_of_memory),
    cmocka_unit_test(test_profile_form),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
