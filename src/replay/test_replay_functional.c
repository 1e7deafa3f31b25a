/* Functional gate rules of docs/replay.md "Gates" and the routing and
 * weight-chain rules of docs/replay.md "Pipeline" (upstream defects 6, 7, 8, 9, 10): one flipped
 * element fails, +0 = -0, NaN fails, zero data is smoke and never numerical,
 * a saturated gate fails, the float64 bound is enforced, one altered id fails
 * routing integrity, and 0.1 goes through fp16 and BF16 as computed by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "replay/functional.h"
#include "common/test_support.h"

#define NT 2
#define NH 3

static uint16_t g_out[NT * NH];
static float g_ref[NT * NH];
static double g_ref64[NT * NH];

static void fill(void)
{
    /* BF16 bits of 1.0, -2.0, 0.5, 0.25, 3.0, -0.125 */
    const uint16_t bits[NT * NH] = {0x3f80, 0xc000, 0x3f00, 0x3e80, 0x4040, 0xbe00};
    const float vals[NT * NH] = {1.0f, -2.0f, 0.5f, 0.25f, 3.0f, -0.125f};
    for (int i = 0; i < NT * NH; i++) {
        g_out[i] = bits[i];
        g_ref[i] = vals[i];
        g_ref64[i] = vals[i];
    }
}

/* A comparison of out with ref and ref64 ([T][H]) inside the float64 bound. */
static struct plena_replay_cmp_in base_on(const uint16_t *out, const float *ref,
                                          const double *ref64, size_t T, size_t H)
{
    struct plena_replay_cmp_in in;
    memset(&in, 0, sizeof in);
    in.out = out;
    in.ref = ref;
    in.ref64 = ref64;
    in.rel_rms_f64 = 0.001;
    in.rel_rms_bound = 0.02;
    in.T = T;
    in.H = H;
    return in;
}

/* the same on the arrays fill() sets */
static struct plena_replay_cmp_in base(void)
{
    return base_on(g_out, g_ref, g_ref64, NT, NH);
}

static int check_passed(json_t *f, const char *name)
{
    json_t *c = json_object_get(f, "checks");
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_t *k = json_array_get(c, i);
        if (!strcmp(json_string_value(json_object_get(k, "name")), name))
            return json_is_true(json_object_get(k, "passed"));
    }
    return -1;
}

static void test_exact_passes_and_one_flip_fails(void **state)
{
    (void)state;
    fill();
    struct plena_replay_cmp_in in = base();
    int passed;
    json_t *f = plena_replay_functional_compare(&in, &passed);
    assert_true(passed);
    assert_true(json_is_true(json_object_get(f, "numerical")));
    assert_string_equal(json_string_value(json_object_get(f, "kind")), "reference");
    assert_int_equal(json_integer_value(json_object_get(f, "elements")), 6);
    json_decref(f);

    g_out[4] ^= 1; /* one element, lowest mantissa bit */
    f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_int_equal(json_integer_value(json_object_get(f, "mismatches")), 1);
    assert_int_equal(check_passed(f, "bit_exact"), 0);
    assert_false(json_is_true(json_object_get(f, "numerical")));
    json_decref(f);
}

/* no match-rate threshold: 1 wrong element in 20 (95 % match) fails */
static void test_no_match_rate_threshold(void **state)
{
    (void)state;
    uint16_t out[20];
    float ref[20];
    double ref64[20];
    for (int i = 0; i < 20; i++) {
        out[i] = 0x3f80; /* 1.0 */
        ref[i] = 1.0f;
        ref64[i] = 1.0;
    }
    out[7] = 0x3f81;
    struct plena_replay_cmp_in in = base_on(out, ref, ref64, 4, 5);
    int passed;
    json_t *f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_int_equal(check_passed(f, "bit_exact"), 0);
    json_decref(f);
}

static void test_signed_zero_nan_and_hash(void **state)
{
    (void)state;
    /* output_sha256 of a 1 x 2 region {1.0, +0}: bytes 80 3f 00 00
     * (printf '\x80\x3f\x00\x00' | sha256sum) */
    uint16_t out[2] = {0x3f80, 0x8000}; /* -0 where the reference has +0 */
    float ref[2] = {1.0f, 0.0f};
    double ref64[2] = {1.0, 0.0};
    struct plena_replay_cmp_in in = base_on(out, ref, ref64, 1, 2);
    int passed;
    json_t *f = plena_replay_functional_compare(&in, &passed);
    assert_true(passed); /* +0 = -0 */
    assert_string_equal(json_string_value(json_object_get(f, "reference_sha256")),
                        "8a35e022834c66c1bb63cd3cfa093bc95c91f2d7d5f701535471005f0ef8a4d2");
    json_decref(f);

    out[1] = 0x7fc0; /* NaN */
    ref[1] = NAN;    /* even against a NaN reference */
    f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_int_equal(json_integer_value(json_object_get(f, "nan_count")), 1);
    assert_int_equal(json_integer_value(json_object_get(f, "mismatches")), 1); /* NaN != NaN */
    assert_int_equal(check_passed(f, "finite"), 0);
    json_decref(f);
}

static void test_zero_data_is_smoke_never_numerical(void **state)
{
    (void)state;
    uint16_t out[NT * NH] = {0};
    float ref[NT * NH] = {0};
    double ref64[NT * NH] = {0};
    struct plena_replay_cmp_in in = base_on(out, ref, ref64, NT, NH);
    in.rel_rms_f64 = -1; /* ||y64|| = 0 */
    in.smoke = 1;
    int passed;
    json_t *f = plena_replay_functional_compare(&in, &passed);
    assert_true(passed);
    assert_string_equal(json_string_value(json_object_get(f, "kind")), "zero_input_smoke");
    assert_true(json_is_false(json_object_get(f, "numerical")));
    json_decref(f);
    /* the same data claimed as a reference run fails: zero golden, no bound */
    in.smoke = 0;
    f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_int_equal(check_passed(f, "reference_nonzero"), 0);
    assert_int_equal(check_passed(f, "f64_bound"), 0);
    json_decref(f);
}

static void test_gate_saturation_and_bound(void **state)
{
    (void)state;
    fill();
    struct plena_replay_cmp_in in = base();
    float gate[NT] = {0.5f, 0.25f};
    in.has_sigmoid_gate = 1;
    in.gate = gate;
    int passed;
    json_t *f = plena_replay_functional_compare(&in, &passed);
    assert_true(passed);
    assert_true(json_is_false(json_object_get(f, "gate_saturated")));
    json_decref(f);
    gate[1] = 1.0f; /* saturated: an unapplied gate would look applied */
    f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_true(json_is_true(json_object_get(f, "gate_saturated")));
    assert_int_equal(check_passed(f, "gate_saturated"), 0);
    json_decref(f);

    gate[1] = 0.25f;
    in.rel_rms_f64 = 0.03;
    f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_int_equal(check_passed(f, "f64_bound"), 0);
    json_decref(f);

    /* the whole-output check (a residual add-back bug) fails on its own */
    in.rel_rms_f64 = 0.001;
    in.rel_rms_f64_full = 0.5;
    f = plena_replay_functional_compare(&in, &passed);
    assert_false(passed);
    assert_int_equal(check_passed(f, "f64_bound"), 0);
    json_decref(f);
}

static void test_routing_integrity(void **state)
{
    (void)state;
    /* the complete example's ids (docs/trace-schema.md) */
    const int64_t trace[8] = {3, 1, 3, 5, 0, 3, 6, 1};
    uint32_t image[8] = {3, 1, 3, 5, 0, 3, 6, 1};
    char d[256];
    assert_true(plena_replay_routing_integrity(image, trace, 8, d, sizeof d));
    image[5] = 4;
    assert_false(plena_replay_routing_integrity(image, trace, 8, d, sizeof d));
    assert_non_null(strstr(d, "pair 5 is 4"));
}

static void test_weight_chain(void **state)
{
    (void)state;
    /* docs/cli.md "Commands" -> binary32 -> fp16 0x2E66 (= 614/1024 * 2^-4 + 2^-4 =
     * 0.0999755859375) -> BF16: mantissa 1.599609375 * 128 = 204.75 rounds to 205 ->
     * 0.10009765625 */
    uint16_t h;
    float e = plena_replay_route_weight_chain(0.1, &h);
    assert_int_equal(h, 0x2e66);
    assert_true(e == 0.10009765625f);
    /* 1e-6 is an fp16 subnormal: 1e-6 / 2^-24 = 16.78 -> 17 (bits 0x0011), and
     * 17 * 2^-24 = 1.0625 * 2^-20 is exact in BF16; rounding 1e-6 straight to
     * BF16 would give 134/128 * 2^-20 instead */
    e = plena_replay_route_weight_chain(1e-6, &h);
    assert_int_equal(h, 0x0011);
    assert_true(e == 17.0f / 16777216.0f);
    const double ws[3] = {0.75, 0.1, 0.5};
    assert_true(plena_replay_route_weight_max_error(ws, 3) == 0.10009765625 - 0.1);
    assert_true(plena_replay_route_weight_max_error(ws, 1) == 0.0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exact_passes_and_one_flip_fails),
    cmocka_unit_test(test_no_match_rate_threshold),
    cmocka_unit_test(test_signed_zero_nan_and_hash),
    cmocka_unit_test(test_zero_data_is_smoke_never_numerical),
    cmocka_unit_test(test_gate_saturation_and_bound),
    cmocka_unit_test(test_routing_integrity),
    cmocka_unit_test(test_weight_chain),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
