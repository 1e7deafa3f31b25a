/* Known answers of docs/numerics.md "Pseudo-random numbers" for the PRNG,
 * derive, shuffle and fnv1a64, plus the rejection rule of bounded(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "num/prng.h"
#include "common/test_support.h"

static void test_raw_state(void **state)
{
    (void)state;
    struct plena_prng g;
    const uint64_t s[4] = {1, 2, 3, 4};
    plena_prng_set_state(&g, s);
    assert_int_equal(plena_prng_next(&g), 11520);
    assert_int_equal(plena_prng_next(&g), 0);
    assert_int_equal(plena_prng_next(&g), 1509978240);
    const uint64_t z[4] = {0, 0, 0, 0};
    plena_prng_set_state(&g, z);
    assert_int_equal(g.s[0], 1);
}

static void test_derive(void **state)
{
    (void)state;
    struct plena_prng g;
    plena_prng_derive(&g, 42, NULL, 0);
    assert_int_equal(plena_prng_next(&g), 0x15780b2e0c2ec716ull);
    assert_int_equal(plena_prng_next(&g), 0x6104d9866d113a7eull);
    assert_int_equal(plena_prng_next(&g), 0xae17533239e499a1ull);
    const uint64_t w[3] = {1, 0, 0};
    plena_prng_derive(&g, 42, w, 3);
    assert_int_equal(plena_prng_next(&g), 0x002a2f3ddec46c9bull);
    assert_int_equal(plena_prng_next(&g), 0xe523108f6138eb13ull);
    /* the mixer alone: SplitMix64's published first output for seed 0 */
    assert_int_equal(plena_splitmix_mix(0x9E3779B97F4A7C15ull), 0xe220a8397b1dcdafull);
}

static void test_shuffle(void **state)
{
    (void)state;
    struct plena_prng g;
    plena_prng_derive(&g, 7, NULL, 0);
    uint32_t a[10];
    for (uint32_t i = 0; i < 10; i++)
        a[i] = i;
    plena_prng_shuffle_u32(&g, a, 10);
    const uint32_t want[10] = {8, 3, 9, 0, 7, 2, 1, 6, 5, 4};
    for (int i = 0; i < 10; i++)
        assert_int_equal(a[i], want[i]);
    plena_prng_shuffle_u32(&g, a, 0); /* no draws, no access */
    plena_prng_shuffle_u32(&g, a, 1);
}

static void test_fnv(void **state)
{
    (void)state;
    assert_int_equal(plena_fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
    assert_int_equal(plena_fnv1a64("", 0), 0xcbf29ce484222325ull);
    assert_int_equal(plena_fnv1a64("foobar", 6), 0x85944171f73967e8ull); /* FNV reference */
}

/* Multiplicative inverse of an odd number mod 2^64 (Newton iteration). */
static uint64_t inverse(uint64_t a)
{
    uint64_t x = a;
    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

/* A state whose first next() is r: result = rotl(s1 * 5, 7) * 9. */
static void state_yielding(struct plena_prng *g, uint64_t r)
{
    uint64_t v = r * inverse(9);
    v = (v >> 7) | (v << 57);
    const uint64_t s[4] = {0x1234, v * inverse(5), 0x5678, 0x9abc};
    plena_prng_set_state(g, s);
}

static void test_bounded_limit(void **state)
{
    (void)state;
    /* n = 3: rem = (2^64 - 3) mod 3 = 1, accept r <= 2^64 - 2. */
    struct plena_prng g, k;
    state_yielding(&g, UINT64_MAX - 1);
    k = g;
    assert_int_equal(plena_prng_next(&k), UINT64_MAX - 1);
    assert_int_equal(plena_prng_bounded(&g, 3), (UINT64_MAX - 1) % 3); /* accepted */
    assert_memory_equal(&g, &k, sizeof g);                             /* one draw */
    state_yielding(&g, UINT64_MAX);
    k = g;
    assert_int_equal(plena_prng_next(&k), UINT64_MAX); /* rejected: draw again */
    uint64_t r2 = plena_prng_next(&k);
    assert_int_equal(plena_prng_bounded(&g, 3), r2 % 3);
    assert_memory_equal(&g, &k, sizeof g);
}

static void test_uniform_and_bounded(void **state)
{
    (void)state;
    struct plena_prng g, h;
    plena_prng_derive(&g, 42, NULL, 0);
    /* uniform = (next >> 11) * 2^-53 of the known first output */
    assert_true(plena_prng_uniform(&g) == (double)(0x15780b2e0c2ec716ull >> 11) * 0x1p-53);
    plena_prng_derive(&g, 3, NULL, 0);
    h = g;
    struct plena_prng k0 = g;
    for (int i = 0; i < 100; i++)
        assert_true(plena_prng_uniform(&g) == (double)(plena_prng_next(&k0) >> 11) * 0x1p-53);
    g = h;
    for (int i = 0; i < 1000; i++) {
        double u = plena_prng_uniform(&g);
        assert_true(u >= 0.0 && u < 1.0);
    }
    /* bounded(n) for a small n is next() mod n (rejection only near 2^64) */
    g = h;
    struct plena_prng k = h;
    for (int i = 0; i < 100; i++)
        assert_int_equal(plena_prng_bounded(&g, 10), plena_prng_next(&k) % 10);
    assert_int_equal(plena_prng_bounded(&g, 1), 0);
    assert_int_equal(plena_prng_bounded(&g, 0), 0);
    /* n = 2^63 + 1: rem = 2^63 - 1, so draws above 2^64 - 1 - rem = 2^63 are
     * rejected; the first accepted draw must be <= 2^63. */
    uint64_t n = (1ull << 63) + 1;
    g = h;
    k = h;
    uint64_t r;
    do {
        r = plena_prng_next(&k);
    } while (r > (1ull << 63));
    assert_int_equal(plena_prng_bounded(&g, n), r % n);
    assert_memory_equal(&g, &k, sizeof g); /* same number of draws */
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_raw_state),
    cmocka_unit_test(test_derive),
    cmocka_unit_test(test_shuffle),
    cmocka_unit_test(test_fnv),
    cmocka_unit_test(test_uniform_and_bounded),
    cmocka_unit_test(test_bounded_limit),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
