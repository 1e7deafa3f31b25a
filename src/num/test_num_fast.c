/* The fast MX row encoder (plena_num_mx_encode_row) against the scalar
 * reference block encoders (plena_num_mx_encode_block_host/_device, the
 * definition of docs/numerics.md "MX encoders" and "OCP mode"): both
 * encoders, both MX modes, block 8 and 32, random blocks over the whole f32
 * range plus the special values that decide the edge cases (NaN, +-Inf, -0,
 * subnormals, rounding ties, all-zero blocks, exact powers of two, values
 * just below powers of two), and a strided sweep of every f32 bit pattern;
 * rows of whole block pairs for the vector path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "num/num.h"
#include "num/prng.h"
#include "common/test_support.h"

static float fbits(uint32_t b)
{
    float x;
    memcpy(&x, &b, 4);
    return x;
}

/* One value of kind `kind` near binade `eb` (biased f32 exponent). */
static uint32_t pick(struct plena_prng *g, int eb)
{
    uint32_t s = (uint32_t)(plena_prng_next(g) & 1u) << 31;
    int d = (int)plena_prng_bounded(g, 40); /* spread below the block's top binade */
    int ex = eb - d;
    uint32_t man = (uint32_t)plena_prng_next(g) & 0x7FFFFFu;
    switch (plena_prng_bounded(g, 16)) {
    case 0: return s | 0x7FC00000u | (man & 0x3FFFFFu);    /* NaN, any sign/payload */
    case 1: return s | 0x7F800000u;                        /* +-Inf */
    case 2: return s;                                      /* +-0 */
    case 3: return s | (man >> plena_prng_bounded(g, 23)); /* subnormal */
    case 4: man = 0; break;                                /* exact power of two */
    case 5: man = 0x7FFFFFu; break;                        /* just below a power of two */
    case 6: man = (man & 0x700000u) | 0x080000u; break;    /* HR tie: fraction .10 exactly */
    case 7: man = (man & 0x700000u) | 0x0C0000u; break;    /* fraction .11: rounds up */
    case 8: man = (man & 0x7C0000u) | 0x03FFFFu; break;    /* bits below the top five set */
    default: break;
    }
    if (ex < 1) return s | (man >> 9); /* keep it finite: subnormal instead */
    if (ex > 254) ex = 254;
    return s | ((uint32_t)ex << 23) | man;
}

struct mismatch {
    unsigned n;
    char first[256];
};

static void compare_row(enum plena_mx_mode mode, enum plena_mx_encoder enc, const float *x,
                        size_t n, size_t block, struct mismatch *mm)
{
    uint8_t codes[64], scales[8], rc[64], rs[8];
    plena_num_mx_encode_row(mode, enc, x, n, block, codes, scales);
    for (size_t b = 0; b * block < n; b++) {
        size_t len = n - b * block < block ? n - b * block : block;
        if (enc == PLENA_MX_HOST)
            plena_num_mx_encode_block_host(mode, x + b * block, len, rc + b * block, &rs[b]);
        else
            plena_num_mx_encode_block_device(mode, x + b * block, len, rc + b * block, &rs[b]);
        int bad = rs[b] != scales[b] || memcmp(rc + b * block, codes + b * block, len) != 0;
        if (bad && mm->n++ == 0) {
            size_t i = 0;
            while (i < len && rc[b * block + i] == codes[b * block + i])
                i++;
            if (i == len) i = 0;
            uint32_t xb;
            memcpy(&xb, &x[b * block + i], 4);
            snprintf(mm->first, sizeof mm->first,
                     "mode %d enc %d block %zu: scale ref 0x%02x fast 0x%02x; element %zu (0x%08x) "
                     "ref 0x%02x fast 0x%02x",
                     (int)mode, (int)enc, block, rs[b], scales[b], i, xb, rc[b * block + i],
                     codes[b * block + i]);
        }
    }
}

static const enum plena_mx_mode modes[2] = {PLENA_MX_PLENA, PLENA_MX_OCP};
static const enum plena_mx_encoder encs[2] = {PLENA_MX_DEVICE, PLENA_MX_HOST};
static const size_t blocks[2] = {8, 32};

/* n values near one random binade (plus (i / 8) % 3 with spread: blocks of
 * 8 at different scales), specials in most rows, none in a quarter. */
static void random_values(struct plena_prng *g, float *x, size_t n, int spread)
{
    int eb = (int)plena_prng_bounded(g, 300) - 20;
    int special_rate = (int)plena_prng_bounded(g, 4); /* 0: plain values only */
    for (size_t i = 0; i < n; i++) {
        uint32_t v = pick(g, eb + (spread ? (int)(i / 8) % 3 : 0));
        if (special_rate == 0 && ((v & 0x7F800000u) == 0x7F800000u))
            v = (v & 0x807FFFFFu) | (126u << 23);
        x[i] = fbits(v);
    }
}

static void test_random_blocks(void **state)
{
    (void)state;
    struct plena_prng g;
    const uint64_t w[1] = {77};
    plena_prng_derive(&g, 2024, w, 1);
    struct mismatch mm = {0};
    float x[64];
    for (int it = 0; it < 40000; it++) {
        size_t block = blocks[it & 1];
        size_t n = 2 * block - (size_t)plena_prng_bounded(&g, block); /* short last block too */
        random_values(&g, x, n, 0);
        for (int m = 0; m < 2; m++)
            for (int e = 0; e < 2; e++)
                compare_row(modes[m], encs[e], x, n, block, &mm);
    }
    if (mm.n) fail_msg("%u mismatching blocks; first: %s", mm.n, mm.first);
}

/* Whole rows of 64 (eight blocks of 8: the paired vector path of the row
 * encoder where the host has one) and of 57 (a short last block after
 * whole pairs), random values as above. */
static void test_random_rows(void **state)
{
    (void)state;
    struct plena_prng g;
    const uint64_t w[1] = {78};
    plena_prng_derive(&g, 2024, w, 1);
    struct mismatch mm = {0};
    float x[64];
    for (int it = 0; it < 20000; it++) {
        size_t n = it & 1 ? 64 : 57;
        random_values(&g, x, n, 1);
        for (int e = 0; e < 2; e++)
            compare_row(PLENA_MX_PLENA, encs[e], x, n, 8, &mm);
    }
    if (mm.n) fail_msg("%u mismatching blocks; first: %s", mm.n, mm.first);
}

/* Blocks that take the rare branches: all +0, all -0, mixed signed zeros,
 * all NaN, NaN plus zeros, a lone Inf, the smallest subnormal, amax just
 * below 2^-29 (EPS dominates), amax at the largest finite value. */
static void test_special_blocks(void **state)
{
    (void)state;
    static const uint32_t rows[][8] = {
        {0, 0, 0, 0, 0, 0, 0, 0},
        {0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u,
         0x80000000u},
        {0, 0x80000000u, 0, 0x80000000u, 0, 0x80000000u, 0, 0x80000000u},
        {0x7FC00000u, 0xFFC00001u, 0x7FC00000u, 0x7FC00000u, 0x7FC00000u, 0x7FC00000u, 0x7FC00000u,
         0x7FC00000u},
        {0x7FC00000u, 0, 0x80000000u, 0, 0, 0, 0, 0x7FA00000u},
        {0x7F800000u, 0x3F800000u, 0xBF000000u, 0, 0x80000000u, 0x00000001u, 0x7FC00000u,
         0x3E000000u},
        {0x00000001u, 0x80000001u, 0, 0x00000002u, 0x00000003u, 0x007FFFFFu, 0x00400000u, 0},
        {0x3089705Eu, 0x3089705Fu, 0x30000000u, 0x2F7FFFFFu, 0x2F800000u, 0x0, 0xB0800000u,
         0x2E000000u},
        {0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F000000u, 0x3F800000u, 0x00000001u, 0x7E800000u, 0x7EFFFFFFu,
         0},
        {0x407FFFFFu, 0x40800000u, 0x3F7FFFFFu, 0x3C000000u, 0x3BFFFFFFu, 0x3C080000u, 0x3C0C0000u,
         0x3D040000u},
        {0x3D000000u, 0x3D7FFFFFu, 0x3D880000u, 0x3D8C0000u, 0x3CFFFFFFu, 0x3C7FFFFFu, 0x3B800000u,
         0x3F880000u},
    };
    struct mismatch mm = {0};
    float x[64];
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (size_t block_i = 0; block_i < 2; block_i++) {
            size_t block = blocks[block_i];
            for (size_t i = 0; i < 64; i++)
                x[i] = fbits(rows[r][i % 8]);
            for (int m = 0; m < 2; m++)
                for (int e = 0; e < 2; e++)
                    compare_row(modes[m], encs[e], x, 2 * block, block, &mm);
        }
        /* a row of eight blocks of 8 (the eight-block vector step where the
         * host has one): all special, and the special block at position
         * r % 8 among ordinary blocks */
        for (size_t i = 0; i < 64; i++)
            x[i] = fbits(rows[r][i % 8]);
        for (int e = 0; e < 2; e++)
            compare_row(PLENA_MX_PLENA, encs[e], x, 64, 8, &mm);
        for (size_t i = 0; i < 64; i++)
            x[i] = i / 8 == r % 8 ? fbits(rows[r][i % 8]) : (float)((int)i - 31) * 0.03125f;
        for (int e = 0; e < 2; e++)
            compare_row(PLENA_MX_PLENA, encs[e], x, 64, 8, &mm);
    }
    if (mm.n) fail_msg("%u mismatching blocks; first: %s", mm.n, mm.first);
}

/* Every 16411th f32 pattern as the non-max element of a block whose other
 * elements fix the scale at 2^0, 2^-20 and 2^100 (the element itself may
 * raise it): covers every binade and mantissa region of Q(y). */
static void test_pattern_sweep(void **state)
{
    (void)state;
    struct mismatch mm = {0};
    static const uint32_t anchors[3] = {0x3F800000u, 0x35800000u, 0x71800000u};
    float x[64];
    for (int a = 0; a < 3; a++)
        for (uint64_t p = 0; p < 0x100000000ull; p += 16411) {
            for (int i = 0; i < 8; i++) {
                x[i] = fbits(anchors[a]);
                x[8 + i] = fbits(anchors[(a + 1) % 3]);
            }
            x[3] = fbits((uint32_t)p);
            x[5] = fbits((uint32_t)p ^ 0x80000000u);
            x[8 + 6] = fbits((uint32_t)(p * 7));
            /* one block (the scalar path); every third pattern also as a pair
             * (the vector path where there is one) */
            size_t n = p % 3 == 0 ? 16 : 8;
            compare_row(PLENA_MX_PLENA, PLENA_MX_HOST, x, n, 8, &mm);
            compare_row(PLENA_MX_PLENA, PLENA_MX_DEVICE, x, n, 8, &mm);
            /* every fifth also in a row of eight blocks (the eight-block
             * step): the pattern's block at position p % 8 */
            if (p % 5) continue;
            for (int i = 16; i < 64; i++)
                x[i] = x[i % 16];
            const size_t at = (size_t)(p % 8) * 8;
            for (int i = 0; i < 8; i++) {
                const float t = x[at + i];
                x[at + i] = x[i];
                x[i] = t;
            }
            compare_row(PLENA_MX_PLENA, PLENA_MX_HOST, x, 64, 8, &mm);
        }
    if (mm.n) fail_msg("%u mismatching blocks; first: %s", mm.n, mm.first);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_random_blocks),
    cmocka_unit_test(test_random_rows),
    cmocka_unit_test(test_special_blocks),
    cmocka_unit_test(test_pattern_sweep),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
