/* xoshiro256** with SplitMix64 derivation, bounded draws, shuffle and
 * fnv1a64 exactly as docs/numerics.md "Pseudo-random numbers" defines them; the
 * known answers of that section are the unit tests. Jump-ahead by any
 * distance and a four-stream generator of the weight values (the same
 * draws, several streams per vector step) make generation cheap without
 * changing one value. Deliberately no floating point except uniform()'s
 * exact scaling and the weight values' (2u - 1) a. */
#include "num/prng.h"

#include "common/cpu.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

uint64_t plena_splitmix_mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

void plena_prng_set_state(struct plena_prng *g, const uint64_t s[4])
{
    for (int i = 0; i < 4; i++)
        g->s[i] = s[i];
    /* xoshiro never leaves the all-zero state, so it must never enter it. */
    if ((g->s[0] | g->s[1] | g->s[2] | g->s[3]) == 0) g->s[0] = 1;
}

void plena_prng_derive(struct plena_prng *g, uint64_t seed, const uint64_t *words, size_t n)
{
    uint64_t h = seed;
    for (size_t i = 0; i < n; i++)
        h = plena_splitmix_mix((h ^ words[i]) + GOLDEN);
    uint64_t s = h, st[4];
    for (int i = 0; i < 4; i++) {
        s += GOLDEN;
        st[i] = plena_splitmix_mix(s);
    }
    plena_prng_set_state(g, st);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t plena_prng_next(struct plena_prng *g)
{
    uint64_t *s = g->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double plena_prng_uniform(struct plena_prng *g)
{
    return (double)(plena_prng_next(g) >> 11) * 0x1p-53;
}

uint64_t plena_prng_bounded(struct plena_prng *g, uint64_t n)
{
    if (n == 0) return 0;
    uint64_t rem = (0 - n) % n; /* (2^64 - n) mod n */
    uint64_t limit = UINT64_MAX - rem;
    uint64_t r;
    do {
        r = plena_prng_next(g);
    } while (r > limit);
    return r % n;
}

/* ---- jump-ahead (docs/design.md "Weight generation: jumped streams") ---- */

/* The characteristic polynomial P(x) of xoshiro256's transition without its
 * x^256 term (Berlekamp-Massey on a state bit's sequence; test_prng checks
 * that x^(2^128) mod P is the published JUMP constant). */
static const uint64_t char_poly[4] = {0x9d116f2bb0f0f001ull, 0x0280002bcefd1a5eull,
                                      0x04b4edcf26259f85ull, 0x0003c03c3f3ecb19ull};

/* a = a x mod P */
static void poly_mulx(uint64_t a[4])
{
    const uint64_t top = a[3] >> 63;
    for (int i = 3; i > 0; i--)
        a[i] = (a[i] << 1) | (a[i - 1] >> 63);
    a[0] <<= 1;
    for (int i = 0; i < 4; i++)
        a[i] ^= char_poly[i] & (0 - top);
}

/* r = a b mod P (r may alias a or b) */
static void poly_mulmod(const uint64_t a[4], const uint64_t b[4], uint64_t r[4])
{
    uint64_t t[4], acc[4] = {0, 0, 0, 0}, bb[4];
    for (int i = 0; i < 4; i++) {
        t[i] = a[i];
        bb[i] = b[i];
    }
    for (int i = 0; i < 256; i++) {
        const uint64_t m = 0 - ((bb[i / 64] >> (i % 64)) & 1u);
        for (int w = 0; w < 4; w++)
            acc[w] ^= t[w] & m;
        poly_mulx(t);
    }
    for (int i = 0; i < 4; i++)
        r[i] = acc[i];
}

void plena_prng_jump_poly(uint64_t d, uint64_t poly[4])
{
    uint64_t r[4] = {1, 0, 0, 0};
    int top = 63;
    while (top >= 0 && !((d >> top) & 1u))
        top--;
    for (int bit = top; bit >= 0; bit--) {
        poly_mulmod(r, r, r);
        if ((d >> bit) & 1u) poly_mulx(r);
    }
    for (int i = 0; i < 4; i++)
        poly[i] = r[i];
}

void plena_prng_jump(struct plena_prng *g, const uint64_t poly[4])
{
    uint64_t s[4] = {0, 0, 0, 0};
    for (int i = 0; i < 256; i++) {
        if ((poly[i / 64] >> (i % 64)) & 1u)
            for (int w = 0; w < 4; w++)
                s[w] ^= g->s[w];
        plena_prng_next(g);
    }
    for (int w = 0; w < 4; w++)
        g->s[w] = s[w];
}

/* ---- the weight values ---- */

void plena_prng_sym_f32(struct plena_prng *g, double a, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)((2.0 * plena_prng_uniform(g) - 1.0) * a);
}

void plena_prng_x4_sym_f32_ref(struct plena_prng_x4 *x, double a, size_t n, float *const out[4])
{
    for (int j = 0; j < 4; j++)
        plena_prng_sym_f32(&x->lane[j], a, n, out[j]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PRNG_X86    1
#define AVX2        __attribute__((target("avx2")))
#define ROTL4(x, k) _mm256_or_si256(_mm256_slli_epi64((x), (k)), _mm256_srli_epi64((x), 64 - (k)))

/* One draw of each lane, as plena_prng_next then the value of
 * plena_prng_sym_f32: result = rotl(s1 * 5, 7) * 9 (the products as shifts
 * and adds, mod 2^64); u = (result >> 11) 2^-53 built exactly as
 * (1.m - 1) + b 2^-53 from the top 52 bits m and bit 11 b (the exact sum is
 * a 53-bit multiple of 2^-53, so the add does not round); then the same
 * double operations and the same rounding to f32 as the scalar loop. */
static AVX2 inline __m128 x4_step(__m256i s[4], __m256d a)
{
    const __m256i s1 = s[1];
    __m256i r = _mm256_add_epi64(s1, _mm256_slli_epi64(s1, 2));
    r = ROTL4(r, 7);
    r = _mm256_add_epi64(r, _mm256_slli_epi64(r, 3));
    const __m256i t = _mm256_slli_epi64(s1, 17);
    s[2] = _mm256_xor_si256(s[2], s[0]);
    s[3] = _mm256_xor_si256(s[3], s[1]);
    s[1] = _mm256_xor_si256(s[1], s[2]);
    s[0] = _mm256_xor_si256(s[0], s[3]);
    s[2] = _mm256_xor_si256(s[2], t);
    s[3] = ROTL4(s[3], 45);
    const __m256i bit11 = _mm256_set1_epi64x(1 << 11);
    const __m256d one = _mm256_set1_pd(1.0);
    const __m256d hi =
        _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(
                          _mm256_srli_epi64(r, 12), _mm256_set1_epi64x(0x3FF0000000000000ll))),
                      one);
    const __m256i b = _mm256_cmpeq_epi64(_mm256_and_si256(r, bit11), bit11);
    const __m256d lo =
        _mm256_castsi256_pd(_mm256_and_si256(b, _mm256_set1_epi64x(0x3CA0000000000000ll)));
    const __m256d u = _mm256_add_pd(hi, lo);
    const __m256d v = _mm256_mul_pd(_mm256_sub_pd(_mm256_mul_pd(_mm256_set1_pd(2.0), u), one), a);
    return _mm256_cvtpd_ps(v);
}

static AVX2 void x4_sym_avx2(struct plena_prng_x4 *x, double a, size_t n, float *const out[4])
{
    __m256i s[4];
    for (int w = 0; w < 4; w++)
        s[w] = _mm256_set_epi64x((long long)x->lane[3].s[w], (long long)x->lane[2].s[w],
                                 (long long)x->lane[1].s[w], (long long)x->lane[0].s[w]);
    const __m256d va = _mm256_set1_pd(a);
    float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        /* four draws of four lanes, transposed to four values of each lane */
        __m128 v0 = x4_step(s, va), v1 = x4_step(s, va);
        __m128 v2 = x4_step(s, va), v3 = x4_step(s, va);
        _MM_TRANSPOSE4_PS(v0, v1, v2, v3);
        _mm_storeu_ps(o0 + i, v0);
        _mm_storeu_ps(o1 + i, v1);
        _mm_storeu_ps(o2 + i, v2);
        _mm_storeu_ps(o3 + i, v3);
    }
    for (; i < n; i++) {
        float f[4];
        _mm_storeu_ps(f, x4_step(s, va));
        o0[i] = f[0];
        o1[i] = f[1];
        o2[i] = f[2];
        o3[i] = f[3];
    }
    for (int w = 0; w < 4; w++) {
        uint64_t l[4];
        _mm256_storeu_si256((__m256i *)l, s[w]);
        for (int j = 0; j < 4; j++)
            x->lane[j].s[w] = l[j];
    }
}
#endif

void plena_prng_x4_sym_f32(struct plena_prng_x4 *x, double a, size_t n, float *const out[4])
{
#ifdef PRNG_X86
    if (plena_cpu_has_avx2()) {
        x4_sym_avx2(x, a, n, out);
        return;
    }
#endif
    plena_prng_x4_sym_f32_ref(x, a, n, out);
}

void plena_prng_shuffle_u32(struct plena_prng *g, uint32_t *a, size_t n)
{
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)plena_prng_bounded(g, (uint64_t)i + 1);
        uint32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

uint64_t plena_fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
