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

/* The state after d next() calls, by stepping. */
static void stepped(struct plena_prng *g, uint64_t d)
{
    for (uint64_t i = 0; i < d; i++)
        plena_prng_next(g);
}

static void test_jump(void **state)
{
    (void)state;
    /* below 256 only steps; from 256 on the table rows of 2^8 .. */
    static const uint64_t ds[] = {0, 1, 2, 255, 256, 257, 511, 512, 1000, 12345, 393216, 393217};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        struct plena_prng g, h;
        const uint64_t w[1] = {k};
        plena_prng_derive(&g, 9, w, 1);
        h = g;
        plena_prng_advance(&g, ds[k]);
        stepped(&h, ds[k]);
        assert_memory_equal(g.s, h.s, sizeof g.s);
    }
    /* each row 2^k against stepping up to 2^20, then row k + 1 against
     * row k twice (a wrong row moves a random state elsewhere) */
    struct plena_prng g, h;
    plena_prng_derive(&g, 5, NULL, 0);
    h = g;
    uint64_t done = 0; /* draws h has stepped */
    for (int k = 8; k <= 20; k++) {
        struct plena_prng j = g;
        plena_prng_advance(&j, 1ull << k);
        stepped(&h, (1ull << k) - done);
        done = 1ull << k;
        assert_memory_equal(j.s, h.s, sizeof j.s);
    }
    for (int k = 20; k < 63; k++) {
        struct plena_prng one = g, two = g;
        plena_prng_advance(&one, 1ull << (k + 1));
        plena_prng_advance(&two, 1ull << k);
        plena_prng_advance(&two, 1ull << k);
        assert_memory_equal(one.s, two.s, sizeof one.s);
    }
    /* the published xoshiro256 jump() (2^128 draws, its JUMP constant) is
     * plena_prng_jump with that polynomial: its result from {1, 2, 3, 4}
     * by the reference code's loop */
    static const uint64_t jump128[4] = {0x180ec6d33cfd0abaull, 0xd5a61266f0c9392cull,
                                        0xa9582618e03fc9aaull, 0x39abdc4529b1661cull};
    static const uint64_t want[4] = {0x8c7a153956b5f3d1ull, 0x701f1a713401d85eull,
                                     0x6527f66a65469085ull, 0x8386b786c4408050ull};
    const uint64_t s0[4] = {1, 2, 3, 4};
    plena_prng_set_state(&g, s0);
    plena_prng_jump(&g, jump128);
    assert_memory_equal(g.s, want, sizeof want);
}

static void test_sym_x4(void **state)
{
    (void)state;
    static const size_t ns[] = {0, 1, 3, 4, 5, 17, 768, 1001};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const size_t n = ns[k];
        struct plena_prng_x4 x, y;
        for (int j = 0; j < 4; j++) {
            const uint64_t w[2] = {k, (uint64_t)j};
            plena_prng_derive(&x.lane[j], 11, w, 2);
        }
        y = x;
        float a[4][1001], b[4][1001];
        float *const pa[4] = {a[0], a[1], a[2], a[3]}, *const pb[4] = {b[0], b[1], b[2], b[3]};
        const double scale = 1.0 / 45.254833995939045; /* 1 / sqrt(2048) */
        plena_prng_x4_sym_f32(&x, scale, n, pa);
        plena_prng_x4_sym_f32_ref(&y, scale, n, pb);
        for (int j = 0; n && j < 4; j++) /* n = 0: only the states below */
            assert_memory_equal(a[j], b[j], n * sizeof a[j][0]);
        assert_memory_equal(&x, &y, sizeof x);
    }
    /* draws whose 2u - 1 is a few 2^-52: every bit of u reaches the f32
     * (bit 11 of the draw included), in the 4-step loop and the tail */
    for (size_t n = 1; n <= 5; n += 4) {
        struct plena_prng_x4 x, y;
        for (int j = 0; j < 4; j++)
            state_yielding(&x.lane[j], (((1ull << 52) + 2 * (uint64_t)j + 1) << 11) | 0x5a5);
        y = x;
        float a[4][5], b[4][5];
        float *const pa[4] = {a[0], a[1], a[2], a[3]}, *const pb[4] = {b[0], b[1], b[2], b[3]};
        plena_prng_x4_sym_f32(&x, 1.0, n, pa);
        plena_prng_x4_sym_f32_ref(&y, 1.0, n, pb);
        for (int j = 0; j < 4; j++) {
            assert_true(a[j][0] == (float)((2 * j + 1) * 0x1p-52));
            assert_memory_equal(a[j], b[j], n * sizeof a[j][0]);
        }
    }
    /* the reference is the expression of the weight generator */
    struct plena_prng g, h;
    plena_prng_derive(&g, 42, NULL, 0);
    h = g;
    float v[64];
    plena_prng_sym_f32(&g, 0.125, 64, v);
    for (int i = 0; i < 64; i++)
        assert_true(v[i] == (float)((2.0 * plena_prng_uniform(&h) - 1.0) * 0.125));
}

/* The eight-lane path against the scalar loop: loop lengths around its
 * steps of 8 and tails, each lane's values and end state; draws whose
 * 2u - 1 is a few 2^-52 in the loop and the tail. */
static void test_sym_x8(void **state)
{
    (void)state;
    static const size_t ns[] = {0, 1, 7, 8, 9, 17, 768, 1001};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const size_t n = ns[k];
        struct plena_prng_x8 x, y;
        for (int j = 0; j < 8; j++) {
            const uint64_t w[2] = {k, (uint64_t)j};
            plena_prng_derive(&x.half[j / 4].lane[j % 4], 13, w, 2);
        }
        y = x;
        static float a[8][1001], b[8][1001];
        float *pa[8], *pb[8];
        for (int j = 0; j < 8; j++)
            pa[j] = a[j], pb[j] = b[j];
        const double scale = 1.0 / 27.712812921102035; /* 1 / sqrt(768) */
        plena_prng_x8_sym_f32(&x, scale, n, pa);
        plena_prng_x8_sym_f32_ref(&y, scale, n, pb);
        for (int j = 0; n && j < 8; j++)
            assert_memory_equal(a[j], b[j], n * sizeof a[j][0]);
        assert_memory_equal(&x, &y, sizeof x);
    }
    for (size_t n = 1; n <= 9; n += 8) {
        struct plena_prng_x8 x, y;
        for (int j = 0; j < 8; j++)
            state_yielding(&x.half[j / 4].lane[j % 4],
                           (((1ull << 52) + 2 * (uint64_t)j + 1) << 11) | 0x5a5);
        y = x;
        float a[8][9], b[8][9];
        float *pa[8], *pb[8];
        for (int j = 0; j < 8; j++)
            pa[j] = a[j], pb[j] = b[j];
        plena_prng_x8_sym_f32(&x, 1.0, n, pa);
        plena_prng_x8_sym_f32_ref(&y, 1.0, n, pb);
        for (int j = 0; j < 8; j++) {
            assert_true(a[j][0] == (float)((2 * j + 1) * 0x1p-52));
            assert_memory_equal(a[j], b[j], n * sizeof a[j][0]);
        }
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_jump),          cmocka_unit_test(test_sym_x4),
    cmocka_unit_test(test_sym_x8),        cmocka_unit_test(test_raw_state),
    cmocka_unit_test(test_derive),        cmocka_unit_test(test_shuffle),
    cmocka_unit_test(test_fnv),           cmocka_unit_test(test_uniform_and_bounded),
    cmocka_unit_test(test_bounded_limit),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
