/* Accuracy of the deterministic math module
 * (docs/numerics.md "Deterministic math"): within 4 ulp of libm (the oracle
 * here, itself < 1 ulp) over random and adversarial points of each domain,
 * and errors outside them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "num/detmath.h"
#include "num/prng.h"
#include "common/test_support.h"

#define MAX_ULP 4

/* Map doubles to integers that are monotone in value, so a difference is a
 * distance in ulps (across zero as well). */
static int64_t ordered(double x)
{
    int64_t i;
    memcpy(&i, &x, 8);
    return i < 0 ? INT64_MIN - i : i;
}

static uint64_t ulp_dist(double a, double b)
{
    int64_t ia = ordered(a), ib = ordered(b);
    return ia > ib ? (uint64_t)ia - (uint64_t)ib : (uint64_t)ib - (uint64_t)ia;
}

static uint64_t worst_exp, worst_log, worst_sin, worst_cos;

/* det (returned rc) computed got for x; libm says want. Within MAX_ULP, and
 * *worst keeps the largest distance seen for the report. */
static void check_ulp(const char *name, double x, int rc, double got, double want, uint64_t *worst)
{
    assert_int_equal(rc, 0);
    uint64_t d = ulp_dist(got, want);
    if (d > *worst) *worst = d;
    if (d > MAX_ULP)
        fail_msg("det_%s(%a) = %a, libm %a (%llu ulp)", name, x, got, want, (unsigned long long)d);
}

static void check_exp(double x)
{
    double got;
    int rc = plena_det_exp(x, &got);
    check_ulp("exp", x, rc, got, exp(x), &worst_exp);
}

static void check_log(double x)
{
    double got;
    int rc = plena_det_log(x, &got);
    check_ulp("log", x, rc, got, log(x), &worst_log);
}

static void check_sincos(double x)
{
    double s, c;
    assert_int_equal(plena_det_sincos(x, &s, &c), 0);
    uint64_t ds = ulp_dist(s, sin(x)), dc = ulp_dist(c, cos(x));
    if (ds > worst_sin) worst_sin = ds;
    if (dc > worst_cos) worst_cos = dc;
    if (ds > MAX_ULP || dc > MAX_ULP)
        fail_msg("det_sincos(%a) = %a, %a; libm %a, %a", x, s, c, sin(x), cos(x));
}

static void test_exp(void **state)
{
    (void)state;
    struct plena_prng g;
    plena_prng_derive(&g, 11, NULL, 0);
    for (int i = 0; i < 200000; i++)
        check_exp(-700.0 + 1400.0 * plena_prng_uniform(&g));
    for (int i = 0; i < 50000; i++) { /* small arguments, both signs, all scales */
        double x = ldexp(plena_prng_uniform(&g), -(int)plena_prng_bounded(&g, 60));
        check_exp(x);
        check_exp(-x);
    }
    for (int k = -1009; k <= 1009; k++) { /* around every reduction boundary */
        double x = (k + 0.5) * 0.69314718055994530942;
        check_exp(x);
        check_exp(nextafter(x, 0));
        check_exp(k * 0.69314718055994530942);
    }
    check_exp(700.0);
    check_exp(-700.0);
    check_exp(0x1p-1074);
    double y;
    assert_int_equal(plena_det_exp(0.0, &y), 0);
    assert_true(y == 1.0);
    assert_int_equal(plena_det_exp(1.0, &y), 0);
    assert_true(ulp_dist(y, 2.718281828459045) <= MAX_ULP); /* e, correctly rounded */
    y = 123.0;
    assert_int_not_equal(plena_det_exp(nextafter(700.0, 1000.0), &y), 0);
    assert_int_not_equal(plena_det_exp(-701.0, &y), 0);
    assert_int_not_equal(plena_det_exp(NAN, &y), 0);
    assert_int_not_equal(plena_det_exp(INFINITY, &y), 0);
    assert_int_not_equal(plena_det_exp(-INFINITY, &y), 0);
    assert_true(y == 123.0); /* untouched on error */
}

static void test_log(void **state)
{
    (void)state;
    struct plena_prng g;
    plena_prng_derive(&g, 12, NULL, 0);
    for (int i = 0; i < 200000; i++) { /* random positive finite bit patterns */
        uint64_t b = plena_prng_next(&g) >> 1;
        double x;
        memcpy(&x, &b, 8);
        if (!(x > 0.0) || isinf(x) || isnan(x)) continue;
        check_log(x);
    }
    for (int i = 0; i < 100000; i++) { /* near 1, where cancellation bites */
        double d = ldexp(plena_prng_uniform(&g), -(int)plena_prng_bounded(&g, 50));
        check_log(1.0 + d);
        check_log(1.0 - d / 2);
    }
    for (int i = 0; i < 100000; i++)
        check_log(0.5 + 1.5 * plena_prng_uniform(&g));
    for (int e = -1074; e <= 1023; e++) {
        check_log(ldexp(1.0, e));
        check_log(ldexp(0.70710678118654752440, e + 1)); /* normalisation switch */
        double below = nextafter(ldexp(0.70710678118654752440, e + 1), 0);
        if (below > 0.0) check_log(below);
    }
    check_log(0x1p-1074);
    check_log(1.7976931348623157e308);
    double y;
    assert_int_equal(plena_det_log(1.0, &y), 0);
    assert_true(y == 0.0);
    assert_int_equal(plena_det_log(2.0, &y), 0);
    assert_true(y == 0.6931471805599453); /* ln 2, correctly rounded */
    assert_int_not_equal(plena_det_log(0.0, &y), 0);
    assert_int_not_equal(plena_det_log(-0.0, &y), 0);
    assert_int_not_equal(plena_det_log(-1.0, &y), 0);
    assert_int_not_equal(plena_det_log(INFINITY, &y), 0);
    assert_int_not_equal(plena_det_log(NAN, &y), 0);
}

static void test_sincos(void **state)
{
    (void)state;
    struct plena_prng g;
    plena_prng_derive(&g, 13, NULL, 0);
    for (int i = 0; i < 200000; i++)
        check_sincos(-0x1p20 + 0x1p21 * plena_prng_uniform(&g));
    for (int i = 0; i < 50000; i++) {
        double x = ldexp(plena_prng_uniform(&g), -(int)plena_prng_bounded(&g, 40) + 3);
        check_sincos(x);
        check_sincos(-x);
    }
    /* nearest doubles to multiples of pi/2 (maximal cancellation) and their
     * neighbours, over the whole domain */
    for (long k = -667544; k <= 667544; k += 97) {
        double x = (double)k * 1.57079632679489661923;
        check_sincos(x);
        check_sincos(nextafter(x, 0));
    }
    for (long k = 1; k < 64; k++)
        check_sincos((double)k * 0.78539816339744830962);
    check_sincos(0x1p20);
    check_sincos(-0x1p20);
    check_sincos(3.14159265358979323846); /* sin near 1.2e-16 */
    double s, c;
    assert_int_equal(plena_det_sincos(0.0, &s, &c), 0);
    assert_true(s == 0.0 && c == 1.0);
    assert_int_not_equal(plena_det_sincos(nextafter(0x1p20, 0x1p21), &s, &c), 0);
    assert_int_not_equal(plena_det_sincos(-0x1p21, &s, &c), 0);
    assert_int_not_equal(plena_det_sincos(NAN, &s, &c), 0);
    assert_int_not_equal(plena_det_sincos(INFINITY, &s, &c), 0);
}

static void test_report(void **state)
{
    (void)state;
    print_message("worst ulp: exp %llu, log %llu, sin %llu, cos %llu\n",
                  (unsigned long long)worst_exp, (unsigned long long)worst_log,
                  (unsigned long long)worst_sin, (unsigned long long)worst_cos);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exp),
    cmocka_unit_test(test_log),
    cmocka_unit_test(test_sincos),
    cmocka_unit_test(test_report),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
