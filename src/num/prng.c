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

/* x^(2^k) mod P(x) for k = 8 .. 63, bit i of word i / 64 the coefficient of
 * x^i, where P is the characteristic polynomial of xoshiro256's transition,
 * x^256 + 0x0003c03c3f3ecb19 04b4edcf26259f85 0280002bcefd1a5e
 * 9d116f2bb0f0f001 (Berlekamp-Massey on a state bit's sequence; squaring
 * the k = 63 row 65 times gives the published JUMP constant of 2^128). A
 * row is the jump polynomial of 2^k draws. test_prng checks the rows by
 * stepping (k <= 20) and by each row being the previous one applied twice. */
static const uint64_t pow2_jump[56][4] = {
    {0x9d116f2bb0f0f001ull, 0x0280002bcefd1a5eull, 0x04b4edcf26259f85ull, 0x0003c03c3f3ecb19ull},
    {0xc7327d130e34b489ull, 0x81f675e7a4ef7d84ull, 0x6dd49b656055c9daull, 0xbe7976372e930435ull},
    {0x060106bbbe4ff028ull, 0x1be1d76854ddda93ull, 0x8456faeb6230d984ull, 0x65507439cf43f0e2ull},
    {0x876c2301125a85c0ull, 0x15fe822628b16f04ull, 0x3c8ca36ec9a74fa7ull, 0x51edef31819e01ffull},
    {0xd7f4e8da7e228b85ull, 0xd638d47ec5bcf595ull, 0xaa6eb691cbf9ce10ull, 0x0f41cce3698fad39ull},
    {0x669da12373880674ull, 0xb1df898a4a6f1548ull, 0x32104b94fe2534d3ull, 0xda66e09e52b341d1ull},
    {0x4f20eb915e780231ull, 0x3886af219b885248ull, 0x023ecbee3f717fceull, 0x3cec2c375bef249cull},
    {0x449b3ae793888c8cull, 0xc3ce2f061f077568ull, 0xa69393ac0d837e54ull, 0x1a9dcf944ae47603ull},
    {0x7e89ac5ca2fbf2c7ull, 0x92ae7ca370c0bf6bull, 0xef43beaa06f02fb8ull, 0xd87f8ce230817a21ull},
    {0x6c4adbe18e29df8aull, 0x54adade3697d477full, 0xf0c168649cdba61full, 0xbd53027696368bbbull},
    {0x1a673fecf40e36b8ull, 0xf2c602feb5ed002bull, 0x1ea49b5067452594ull, 0xf78a97c0d882cd37ull},
    {0xef4606da56224c47ull, 0x770323eab8d437bdull, 0x590923d02ec52531ull, 0x1639a36e0968e3c5ull},
    {0x31d9d05c5d95f3cdull, 0x7cde241817a3ce0full, 0x2f679f694a74c76aull, 0x8b3919a9d298a415ull},
    {0x6b6622ae9590047aull, 0xeace6d3840b79fefull, 0xd9b36372fd70ec83ull, 0x624eb7b63c322e71ull},
    {0x1b91fd9ba98d9e23ull, 0xeb2c7e29d3c33d2eull, 0xcebbfd2ef4e9aff4ull, 0x2bac5517c9469796ull},
    {0x01f356e6083fe109ull, 0xba0ffb6562a3a28aull, 0x657a6b736317866bull, 0xfb678bd3e5dac186ull},
    {0xc5461100f197a7e8ull, 0xe46916a1426b676dull, 0xf3469dbb4fe25d26ull, 0xf5c010059e83bc3full},
    {0x22dc028cb8c259dcull, 0x3eec4eb6495ce5aaull, 0x5de3e273dc7b84dcull, 0xe677849e207f6afdull},
    {0x832d418900fd3b0full, 0x114e10c3b7c36788ull, 0xdf2332a778d9c8dcull, 0x0d19a1bdceb7522cull},
    {0xe2d0c9c10e8d7157ull, 0x8b3ed7c37e947e38ull, 0x98273f4d18ad073eull, 0xf38f7e750d5f4f2aull},
    {0xe7109518f3510d70ull, 0x34f30137eadb90b9ull, 0x6d48dd206d56754dull, 0xafa9e3fe5fea15c3ull},
    {0x8ee774f507ec9f39ull, 0xd7c26ebd51ecf6c4ull, 0xc76a456d998ddc4cull, 0x1ca234ff511bcb05ull},
    {0x4905d8261158a7bcull, 0x352f8b5d2137de83ull, 0xe0e9fa345826626dull, 0x3e667662caa54d16ull},
    {0x272a32be4bac7912ull, 0xe1185a166bb38173ull, 0x82b9aa358fe2ed58ull, 0xa43d37468704d536ull},
    {0x58120d583c112f69ull, 0x7d8d0632bd08e6acull, 0x214fafc0fbdbc208ull, 0x0e055d3520fdb9d7ull},
    {0xd9eb3e225a9ebb7dull, 0x5d33a22177777716ull, 0xffed2ffbcf857b42ull, 0xa1b7ebf581a90f09ull},
    {0x3a433a5cff8501f4ull, 0x0c2e65cfa3a44f3bull, 0xa59f09ab33f1c8f4ull, 0x0afe97309a7881b0ull},
    {0x635e9c6882ce5c6aull, 0x53a34398808ef457ull, 0x94295f82142a68bdull, 0xc1cdf918a717c897ull},
    {0x1a2c804af78e2ed4ull, 0x306c4d371040af1eull, 0x63d3f9df102dfa7eull, 0xac7fe0806aecd6c8ull},
    {0x7743a154e17a5e9bull, 0x7823a1cd9453899bull, 0x976589eefbb1c7f5ull, 0x702cf168260fa29eull},
    {0x2edfce1b0667bf3full, 0x68ef5242f2d9c5b2ull, 0x03803bdb9ea7d7e8ull, 0xc4671ec91b902baeull},
    {0x4d2c07a0b0f7980full, 0x0af3e6140fcff185ull, 0xaf03bea7ea7109fdull, 0x755b16e231d1e7c9ull},
    {0xd24b31ab16542ea0ull, 0x13a31dc36460a3b0ull, 0xeece73d85df18361ull, 0x51fc9b8eb1974e73ull},
    {0xec9c79ebd62a4a91ull, 0xa374bf9822d660aaull, 0xde49d57f23fdecb5ull, 0xfb43cf1f4658ae1bull},
    {0x7602414a37bf1c08ull, 0x48b8b0570f008a91ull, 0x3aa3d49368a9c562ull, 0x9b48db8907d00f97ull},
    {0xf7569be74f972355ull, 0x9e11e129fcced20eull, 0xa6994477ec2d6d85ull, 0x8ec1a9dd27957370ull},
    {0xc223943200d6e8a0ull, 0x82f1f8d3ebd9baffull, 0xf6c987b8eb4f76dbull, 0xba8b1a7be4521854ull},
    {0xe226bff99e7f9d4full, 0xf6faaff592dc08c7ull, 0xbad2e3487a438d37ull, 0xa8f7de3ed772d2d2ull},
    {0x6322f95d362137f1ull, 0xb006241469247fbdull, 0x181d6c749bfc7e7bull, 0x3c63f6f95954e65eull},
    {0xaa878816402dab5full, 0x69811136f33b48faull, 0x0df6566ff12f17f4ull, 0x81f450881b843692ull},
    {0xf11fb4faea62c7f1ull, 0xf825539dee5e4763ull, 0x474579292f705634ull, 0x5f728be2c97e9066ull},
    {0xf18ac1f5eac5120eull, 0x36d6c9bc4bcb56f5ull, 0xec104b9942b386beull, 0x5ff98760441a364cull},
    {0x12b825906ddc86afull, 0x168b84ac131ea856ull, 0xd1c440c801f3cddfull, 0xb01e1ff4eb0b05f6ull},
    {0x5696a9ed59ffcbe3ull, 0xb5bb35fe03c3158aull, 0xf1ab1bce1577ad4eull, 0x140bd5e4e00ffdaaull},
    {0x61507225f9f0e0faull, 0x8eadd052a304405full, 0x49c2df736ebe9c68ull, 0x5177664e86d5e31bull},
    {0x87aac36cc0c1abaeull, 0xca120d886e8fdf33ull, 0x5b8d5f58ce3357a7ull, 0xa93a7aadeced9cd7ull},
    {0xd4eb47064a9ac499ull, 0x2b95939579346af1ull, 0xa6f4a2ea423cc2f6ull, 0xd5372758d87157efull},
    {0x549bf83ef12aebc3ull, 0x56df3905d6712eedull, 0xb86994c9cb3059a5ull, 0x7e0b8abe53e950f8ull},
    {0x0b32b0dbe851dd9dull, 0x27cc40c1479b95dfull, 0xc405c1164a3a6d49ull, 0x0888f2c33969763bull},
    {0x920a67ed72aa1155ull, 0x7e5cbd2047cefb5eull, 0x31acd0e23e87d9d3ull, 0xfecb2b39fb96f078ull},
    {0x9841d4c5510c4700ull, 0x97a6c4a0d2cdf9acull, 0x82f88d9e6b9b17c0ull, 0xf643cc9255f06741ull},
    {0x30ac848541c0b04full, 0x55756dedb136961full, 0x65ba2fdf5fe59ed1ull, 0xe8e07ed05188af0full},
    {0xadcede280bb92b99ull, 0x6d885bb5321527a7ull, 0x04ad0ecd62544db2ull, 0x679b88958f3bbdcbull},
    {0x84db0e338a94ce16ull, 0xaaee46b89b106201ull, 0xbbf25302a56d6131ull, 0xd10d621b74213644ull},
    {0xed3c94e03147ca9bull, 0x31fbe8b0a2035587ull, 0x5083dee093b632b7ull, 0x6ff477672ddf72b1ull},
    {0x936ece877e64cc97ull, 0x22a36cdc0fda409full, 0xbae4d9a25a3928b9ull, 0xa9559a2368719526ull},
};

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

void plena_prng_advance(struct plena_prng *g, uint64_t d)
{
    for (uint64_t i = 0; i < (d & 255u); i++)
        plena_prng_next(g);
    for (int k = 8; k < 64; k++)
        if ((d >> k) & 1u) plena_prng_jump(g, pow2_jump[k - 8]);
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

void plena_prng_x8_sym_f32_ref(struct plena_prng_x8 *x, double a, size_t n, float *const out[8])
{
    plena_prng_x4_sym_f32_ref(&x->half[0], a, n, out);
    plena_prng_x4_sym_f32_ref(&x->half[1], a, n, out + 4);
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
#define AVX512 __attribute__((target("avx512f")))

/* x4_step on eight lanes: the same integer and double operations (the
 * rotations native, bit 11 a mask), one f32 per lane. */
static AVX512 inline __m256 x8_step(__m512i s[4], __m512d a)
{
    const __m512i s1 = s[1];
    __m512i r = _mm512_add_epi64(s1, _mm512_slli_epi64(s1, 2));
    r = _mm512_rol_epi64(r, 7);
    r = _mm512_add_epi64(r, _mm512_slli_epi64(r, 3));
    const __m512i t = _mm512_slli_epi64(s1, 17);
    s[2] = _mm512_xor_si512(s[2], s[0]);
    s[3] = _mm512_xor_si512(s[3], s[1]);
    s[1] = _mm512_xor_si512(s[1], s[2]);
    s[0] = _mm512_xor_si512(s[0], s[3]);
    s[2] = _mm512_xor_si512(s[2], t);
    s[3] = _mm512_rol_epi64(s[3], 45);
    const __m512d one = _mm512_set1_pd(1.0);
    const __m512d hi =
        _mm512_sub_pd(_mm512_castsi512_pd(_mm512_or_si512(_mm512_srli_epi64(r, 12),
                                                          _mm512_set1_epi64(0x3FF0000000000000ll))),
                      one);
    const __mmask8 b = _mm512_test_epi64_mask(r, _mm512_set1_epi64(1 << 11));
    const __m512d lo =
        _mm512_castsi512_pd(_mm512_maskz_mov_epi64(b, _mm512_set1_epi64(0x3CA0000000000000ll)));
    const __m512d u = _mm512_add_pd(hi, lo);
    const __m512d v = _mm512_mul_pd(_mm512_sub_pd(_mm512_mul_pd(_mm512_set1_pd(2.0), u), one), a);
    return _mm512_cvtpd_ps(v);
}

/* Rows of v (draw i of lanes 0..7) to columns (eight draws of lane j). */
static AVX512 inline void transpose8(__m256 v[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

static AVX512 void x8_sym_avx512(struct plena_prng_x8 *x, double a, size_t n, float *const out[8])
{
    __m512i s[4];
    for (int w = 0; w < 4; w++) {
        long long l[8];
        for (int j = 0; j < 8; j++)
            l[j] = (long long)x->half[j / 4].lane[j % 4].s[w];
        s[w] = _mm512_loadu_si512((const void *)l);
    }
    const __m512d va = _mm512_set1_pd(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v[8];
        for (int k = 0; k < 8; k++)
            v[k] = x8_step(s, va);
        transpose8(v);
        for (int j = 0; j < 8; j++)
            _mm256_storeu_ps(out[j] + i, v[j]);
    }
    for (; i < n; i++) {
        float f[8];
        _mm256_storeu_ps(f, x8_step(s, va));
        for (int j = 0; j < 8; j++)
            out[j][i] = f[j];
    }
    for (int w = 0; w < 4; w++) {
        uint64_t l[8];
        _mm512_storeu_si512((void *)l, s[w]);
        for (int j = 0; j < 8; j++)
            x->half[j / 4].lane[j % 4].s[w] = l[j];
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

void plena_prng_x8_sym_f32(struct plena_prng_x8 *x, double a, size_t n, float *const out[8])
{
#ifdef PRNG_X86
    if (plena_cpu_has_avx512f()) {
        x8_sym_avx512(x, a, n, out);
        return;
    }
#endif
    plena_prng_x4_sym_f32(&x->half[0], a, n, out);
    plena_prng_x4_sym_f32(&x->half[1], a, n, out + 4);
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
