/* Scalar reference implementations of PLENA's numeric formats
 * (docs/numerics.md): BF16, FP16, PLENA-e4m3,
 * e8m0, the hardware element quantizer Q(y), the device (H_STORE_V) and host
 * (HBM image writer) MX block encoders and the optional OCP MXFP8 mode.
 * These functions *are* the definition: anything faster is tested against
 * them. Nothing here allocates, and nothing depends on the FP rounding mode
 * beyond the IEEE default (RNE); -ffp-contract=off keeps fl32() honest. */
#include "num/num.h"

#include <math.h>
#include <string.h>

#include "common/cpu.h"

/* EPS of the element quantizer (docs/numerics.md "Element quantizer"):
 * fl32(1e-9) = 0x3089705F. Written as bits so no decimal-to-binary conversion
 * can disagree. */
#define EPS_BITS 0x3089705Fu

/* The external definitions of num.h's inline helpers (C11 6.7.4p7). */
extern inline uint32_t plena_num_f32_bits(float x);
extern inline float plena_num_f32_from_bits(uint32_t b);
extern inline uint16_t plena_num_bf16_from_f32(float x);
extern inline float plena_num_bf16_to_f32(uint16_t h);
extern inline float plena_num_round_bf16(float x);

void plena_num_bf16_row_from_f32(const float *x, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = plena_num_bf16_from_f32(x[i]);
}

void plena_num_bf16_row_to_f32(const uint16_t *h, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = plena_num_bf16_to_f32(h[i]);
}

/* ---- FP16 (docs/numerics.md "FP16") ---- */

float plena_num_fp16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    if (e == 0x1F) return plena_num_f32_from_bits(s | 0x7F800000u | (m << 13));
    if (e != 0) return plena_num_f32_from_bits(s | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return plena_num_f32_from_bits(s);
    /* Subnormal: m * 2^-24, exact in f32 (m < 2^10, 2^-24 is a power of two). */
    float v = (float)m * 0x1p-24f;
    return s ? -v : v;
}

uint16_t plena_num_fp16_from_f32(float x)
{
    uint32_t b = plena_num_f32_bits(x);
    uint16_t s = (uint16_t)((b >> 16) & 0x8000u);
    uint32_t ex = (b >> 23) & 0xFFu;
    uint32_t man = b & 0x7FFFFFu;
    if (ex == 0xFF) return man ? 0x7E00 : (uint16_t)(s | 0x7C00); /* NaN drops sign */
    /* f32 exponent of the value; values below 2^-25 all round to +-0 (the
     * halfway point 2^-25 itself ties to even = 0), including f32 subnormals. */
    int e = (int)ex - 127;
    if (ex == 0 || e < -25) return s;
    uint32_t sig = man | 0x800000u; /* 24-bit significand, value sig * 2^(e-23) */
    /* Target quantum: 2^(e-10) for normal fp16 (e >= -14), 2^-24 below. */
    int shift = (e >= -14) ? 13 : 13 + (-14 - e); /* bits of sig to drop: 13..24 */
    uint32_t kept = sig >> shift;
    uint32_t rest = sig & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u))) kept++;
    if (e >= -14) {
        /* kept is 1.m with 11 bits; a carry to 2^11 bumps the exponent. */
        uint32_t fe = (uint32_t)(e + 15);
        if (kept == 0x800u) {
            kept = 0x400u;
            fe++;
        }
        if (fe >= 31) return (uint16_t)(s | 0x7C00); /* >= 65520 rounds to Inf */
        return (uint16_t)(s | (fe << 10) | (kept & 0x3FFu));
    }
    /* Subnormal result: kept counts quanta of 2^-24; kept == 0x400 is exactly
     * the smallest normal, whose encoding is the same bit pattern. */
    return (uint16_t)(s | kept);
}

/* ---- exp32 and exact floor(log2) ---- */

float plena_expf(float x)
{
    return (float)exp((double)x);
}

int plena_num_floor_log2(float t)
{
    uint32_t b = plena_num_f32_bits(t) & 0x7FFFFFFFu;
    uint32_t ex = b >> 23;
    if (ex != 0) return (int)ex - 127;
    /* Subnormal: value = m * 2^-149, so floor(log2) = (index of m's top set
     * bit) - 149. */
    int top = -1;
    for (uint32_t m = b; m != 0; m >>= 1)
        top++;
    return top - 149; /* t must be > 0; t == 0 yields -150 (never used) */
}

/* 2^e as an f32 for -149 <= e <= 127, built from bits (exact). */
static float pow2f(int e)
{
    if (e >= -126) return plena_num_f32_from_bits((uint32_t)(e + 127) << 23);
    return plena_num_f32_from_bits(1u << (e + 149));
}

/* ---- PLENA-e4m3 and e8m0 (docs/numerics.md "PLENA e4m3") ---- */

float plena_num_e4m3_decode_ref(uint8_t code)
{
    int s = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
    float v;
    if (e == 15) {
        if (m != 0) return plena_num_f32_from_bits(0x7FC00000u);
        v = INFINITY;
    } else if (e == 0) {
        v = (float)m * 0x1p-10f; /* m/8 * 2^-7: PLENA's subnormals, not OCP's 2^-9 */
    } else {
        v = (1.0f + (float)m / 8.0f) * pow2f(e - 7);
    }
    return s ? -v : v;
}

float plena_num_e8m0_decode_ref(uint8_t b)
{
    /* Byte 0 is 0.0 here, unlike OCP/ggml's 2^-127: PLENA's compatible mode. */
    if (b == 0) return 0.0f;
    if (b == 255) return INFINITY;
    return pow2f((int)b - 127);
}

/* HR(u) of docs/numerics.md "Element quantizer" for 0 <= u < 8: truncate to
 * two fractional bits, then round half to even. k = floor(4u) splits into
 * integer part k/4 and the quarter k%4; only quarter 2 is a tie. */
static int hr_round(float u)
{
    int k = (int)floorf(4.0f * u); /* 4u is exact */
    int i = k >> 2, r = k & 3;
    if (r == 3 || (r == 2 && (i & 1))) i++;
    return i;
}

uint8_t plena_num_e4m3_quantize_ref(float y)
{
    if (isnan(y)) return 0x7F;
    if (y == 0.0f) return 0x00; /* -0.0 too: the sign is dropped */
    int s = y < 0.0f;
    float a = fabsf(y);
    if (isinf(a)) return (uint8_t)((s << 7) | 0x77);
    float t = a + plena_num_f32_from_bits(EPS_BITS);
    int raw = plena_num_floor_log2(t);
    int ovf = raw > 7;
    int e = raw < -7 ? -7 : (raw > 7 ? 7 : raw);
    int q;
    if (ovf) {
        q = 7; /* u may be huge or inexact; the definition never uses it */
    } else {
        float mant = a / pow2f(e); /* exact: e in [-7, 7] */
        /* mant - 1 may be slightly negative when EPS rounded t up to 2^e. */
        float u = (e != -7) ? (mant - 1.0f) * 8.0f : mant * 8.0f;
        if (u < 0.0f)
            q = 0; /* HR(u) <= 0 there, clamped to 0 */
        else if (u >= 8.0f)
            q = 7; /* HR(u) >= 8: no carry into the exponent */
        else
            q = hr_round(u);
        if (q > 7) q = 7;
    }
    return (uint8_t)((s << 7) | ((e + 7) << 3) | q);
}

/* ---- OCP MXFP8 (docs/numerics.md "OCP mode") ---- */

float plena_num_ocp_e4m3fn_decode_ref(uint8_t code)
{
    int s = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
    float v;
    if (e == 15 && m == 7) return plena_num_f32_from_bits(0x7FC00000u);
    if (e == 0)
        v = (float)m * 0x1p-9f;
    else
        v = (1.0f + (float)m / 8.0f) * pow2f(e - 7);
    return s ? -v : v;
}

float plena_num_ocp_e8m0_decode_ref(uint8_t b)
{
    if (b == 255) return plena_num_f32_from_bits(0x7FC00000u);
    return pow2f((int)b - 127); /* b = 0 is the f32 subnormal 2^-127 */
}

/* RNE to an integer for 0 <= v < 2^22: adding 2^23 leaves no fraction bits,
 * so the IEEE addition itself rounds half to even. */
static int rne_small(float v)
{
    const float big = 0x1p23f; /* IEEE forbids folding (v + big) - big to v */
    float r = (v + big) - big;
    return (int)r;
}

/* Cast a finite f32 already saturated to [-448, 448] to e4m3fn: RNE,
 * subnormal quantum 2^-9, carry into the exponent allowed, -0 -> 0x80. */
static uint8_t ocp_e4m3fn_cast(float y)
{
    int s = signbit(y) ? 1 : 0;
    float a = fabsf(y);
    int code;
    if (a < 0x1p-6f) {
        code = rne_small(a * 512.0f); /* 0..8; 8 is the min normal 0x08 */
    } else {
        int e = plena_num_floor_log2(a); /* -6 .. 8 */
        int m = rne_small((a / pow2f(e) - 1.0f) * 8.0f);
        if (m == 8) {
            m = 0;
            e++;
        }
        code = ((e + 7) << 3) | m; /* a <= 448 keeps this <= 0x7E */
    }
    return (uint8_t)((s << 7) | code);
}

static void ocp_encode_block(const float *x, size_t n, uint8_t *codes, uint8_t *scale)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) {
            *scale = 0xFF;
            for (size_t j = 0; j < n; j++)
                codes[j] = 0x7F;
            return;
        }
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    }
    if (amax == 0.0f) {
        *scale = 0x00;
        for (size_t i = 0; i < n; i++)
            codes[i] = signbit(x[i]) ? 0x80 : 0x00;
        return;
    }
    int p = isinf(amax) ? 128 : plena_num_floor_log2(amax);
    int e = p - 8;
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    *scale = (uint8_t)(e + 127);
    float d = pow2f(e);
    for (size_t i = 0; i < n; i++) {
        float y = x[i] / d;
        if (y > 448.0f) y = 448.0f;
        if (y < -448.0f) y = -448.0f;
        codes[i] = ocp_e4m3fn_cast(y);
    }
}

/* ---- format traits ---- */

static const struct plena_num_fmt_info fmt_table[] = {
#define PLENA_NUM_FMT(id, name, dec, max_code, max_val)                                            \
    [PLENA_FMT_##id] = {name, dec, max_code, max_val},
#include "num/formats.def"
#undef PLENA_NUM_FMT
};
_Static_assert(sizeof fmt_table / sizeof fmt_table[0] == PLENA_FMT_COUNT,
               "one traits row per formats.def entry");

const struct plena_num_fmt_info *plena_num_fmt_info(enum plena_fmt fmt)
{
    if ((unsigned)fmt >= PLENA_FMT_COUNT) return NULL;
    return &fmt_table[fmt];
}

int plena_num_fmt_decode_table(enum plena_fmt fmt, float table[256])
{
    const struct plena_num_fmt_info *f = plena_num_fmt_info(fmt);
    if (!f) return -1;
    for (int c = 0; c < 256; c++)
        table[c] = f->decode_ref((uint8_t)c);
    return 0;
}

/* ---- MX blocks (docs/numerics.md "MX decode") ---- */

/* formats.def: the element and scale formats of each MX mode. */
static const struct plena_num_mx_mode_info mx_mode_table[] = {
#define PLENA_MX_MODE(id, name, elem, scale)                                                       \
    [PLENA_MX_##id] = {name, PLENA_FMT_##elem, PLENA_FMT_##scale},
#include "num/formats.def"
#undef PLENA_MX_MODE
};
_Static_assert(sizeof mx_mode_table / sizeof mx_mode_table[0] == PLENA_MX_MODE_COUNT,
               "one row per MX mode");

const struct plena_num_mx_mode_info *plena_num_mx_mode_info(enum plena_mx_mode mode)
{
    return (unsigned)mode < PLENA_MX_MODE_COUNT ? &mx_mode_table[mode] : NULL;
}

/* An unknown mode decodes as PLENA mode (as the two-way dispatch did). */
static const struct plena_num_mx_mode_info *mx_mode(enum plena_mx_mode mode)
{
    return &mx_mode_table[(unsigned)mode < PLENA_MX_MODE_COUNT ? mode : PLENA_MX_PLENA];
}

float plena_num_mx_decode(enum plena_mx_mode mode, uint8_t code, uint8_t scale)
{
    /* One IEEE f32 multiplication, nothing else (docs/numerics.md "MX decode"). */
    const struct plena_num_mx_mode_info *m = mx_mode(mode);
    return fmt_table[m->element].decode_ref(code) * fmt_table[m->scale].decode_ref(scale);
}

/* The MX encoders (docs/numerics.md "MX encoders"); `zero_special` selects the
 * device encoder's step 2. */
static void plena_encode_block(const float *x, size_t n, uint8_t *codes, uint8_t *scale,
                               int zero_special)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]) && fabsf(x[i]) > amax) amax = fabsf(x[i]);
    if (zero_special && amax == 0.0f) {
        *scale = 0x00;
        for (size_t i = 0; i < n; i++)
            codes[i] = isnan(x[i]) ? 0x7F : 0x00;
        return;
    }
    int e;
    if (isinf(amax)) {
        e = 127;
    } else {
        e = plena_num_floor_log2(amax + plena_num_f32_from_bits(EPS_BITS));
        if (e < -127) e = -127;
        if (e > 127) e = 127;
    }
    *scale = (uint8_t)(e + 127);
    float d = pow2f(e); /* 2^-127 is the exact f32 subnormal */
    for (size_t i = 0; i < n; i++)
        codes[i] = (x[i] == 0.0f) ? 0x00 : plena_num_e4m3_quantize_ref(x[i] / d);
}

/* OCP mode has one encoder; only PLENA mode tells device from host (docs/numerics.md "MX
 * encoders"). */
static void encode_block(enum plena_mx_mode mode, const float *x, size_t n, uint8_t *codes,
                         uint8_t *scale, int device)
{
    if (mode == PLENA_MX_OCP)
        ocp_encode_block(x, n, codes, scale);
    else
        plena_encode_block(x, n, codes, scale, device);
}

void plena_num_mx_encode_block_device(enum plena_mx_mode mode, const float *x, size_t n,
                                      uint8_t *codes, uint8_t *scale)
{
    encode_block(mode, x, n, codes, scale, 1);
}

void plena_num_mx_encode_block_host(enum plena_mx_mode mode, const float *x, size_t n,
                                    uint8_t *codes, uint8_t *scale)
{
    encode_block(mode, x, n, codes, scale, 0);
}

/* ---- fast PLENA-mode block encoder (tested bit for bit against the _ref
 * block encoders above by test_num_fast.c) ----
 *
 * Why it is exact:
 * - y = x * 2^-e instead of x / 2^e: 2^-e is an exact f32 for every clamped
 *   e in [-127, 127], and both operations return the correctly rounded value
 *   of the same real number x * 2^-e, so they agree bit for bit even when
 *   the result is subnormal or overflows. Still, a subnormal or zero product
 *   is recomputed with the division, the _ref path's exact operation, so the
 *   argument is not needed where it would be subtle.
 * - Q(y) read from the bits: for |y| >= 2^-5, EPS = fl32(1e-9) < 2^-29 is
 *   below half an ulp of |y| (2^(E-24) >= 2^-29), so t = fl32(|y| + EPS) = |y|
 *   and raw = E, the unbiased exponent of y. For E > 7 the code is the
 *   saturated 0x77; for -5 <= E <= 7, mant = |y| / 2^E is exact,
 *   u = (mant - 1) * 8 is exact, floor(4u) is the top five mantissa bits,
 *   and HR() keeps the top three plus the round-half-even rule on the next
 *   two (docs/numerics.md "Element quantizer"). Every other y (|y| < 2^-5,
 *   zero, subnormal, Inf, NaN) goes to plena_num_e4m3_quantize_ref. */
static void plena_encode_block_fast(const float *x, size_t n, uint8_t *codes, uint8_t *scale,
                                    int zero_special)
{
    uint32_t amax_bits = 0; /* |x| of non-NaN elements compare as integers */
    for (size_t i = 0; i < n; i++) {
        uint32_t a = plena_num_f32_bits(x[i]) & 0x7FFFFFFFu;
        if (a <= 0x7F800000u && a > amax_bits) amax_bits = a;
    }
    if (amax_bits == 0 || amax_bits == 0x7F800000u) {
        /* all zero / NaN, or an Inf: rare, the reference handles them */
        plena_encode_block(x, n, codes, scale, zero_special);
        return;
    }
    float amax = plena_num_f32_from_bits(amax_bits);
    int e = plena_num_floor_log2(amax + plena_num_f32_from_bits(EPS_BITS));
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    *scale = (uint8_t)(e + 127);
    const float d = pow2f(e), inv = pow2f(-e);
    /* Pass 1, branch-free: Q(y) from the bits for 2^-5 <= |y| (finite);
     * `slow` collects the elements outside that range. */
    uint32_t slow = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = plena_num_f32_bits(x[i] * inv);
        uint32_t ex = (b >> 23) & 0xFFu;
        uint32_t m5 = (b >> 18) & 0x1Fu;
        uint32_t q = m5 >> 2, r = m5 & 3u;
        q += (r >> 1) & ((r | q) & 1u); /* r == 3, or r == 2 with q odd */
        q -= q >> 3;                    /* 8 -> 7: no carry into the exponent */
        uint32_t code = ex > 127u + 7u ? 0x77u : (((ex - 120u) << 3) | q) & 0x7Fu;
        codes[i] = (uint8_t)(((b >> 24) & 0x80u) | code);
        slow |= (uint32_t)(ex < 127u - 5u) | (uint32_t)(ex == 0xFFu);
    }
    if (!slow) return;
    /* Pass 2: zero, small, subnormal, NaN or overflowed y take the
     * reference quantizer with the reference division. */
    for (size_t i = 0; i < n; i++) {
        uint32_t ex = (plena_num_f32_bits(x[i] * inv) >> 23) & 0xFFu;
        if (ex < 127u - 5u || ex == 0xFFu)
            codes[i] = x[i] == 0.0f ? 0x00 : plena_num_e4m3_quantize_ref(x[i] / d);
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NUM_X86 1
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

static int has_avx512f(void)
{
    return plena_cpu_has_avx512f();
}

/* Each 32-bit lane of v replaced by the maximum over its aligned group of 8
 * lanes (signed compare: every lane is below 2^31). */
static AVX512 inline __m512i max8(__m512i v)
{
    v = _mm512_max_epi32(v, _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_max_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
    return _mm512_max_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
}

/* plena_num_e4m3_quantize_ref on 16 lanes, step by step the same
 * operations (docs/numerics.md "Element quantizer"); the codes in the low
 * byte of each lane. Infinite lanes are not handled (the caller has none). */
static AVX512 inline __m512i quantize16(__m512 y)
{
    const __m512i yb = _mm512_castps_si512(y);
    const __m512i ab = _mm512_and_si512(yb, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512 a = _mm512_castsi512_ps(ab);
    const __m512i sgn = _mm512_and_si512(_mm512_srli_epi32(yb, 24), _mm512_set1_epi32(0x80));
    /* t = a + EPS >= EPS is normal: floor(log2 t) is its exponent */
    const __m512 t = _mm512_add_ps(a, _mm512_castsi512_ps(_mm512_set1_epi32((int)EPS_BITS)));
    const __m512i raw =
        _mm512_sub_epi32(_mm512_srli_epi32(_mm512_castps_si512(t), 23), _mm512_set1_epi32(127));
    const __mmask16 ovf = _mm512_cmpgt_epi32_mask(raw, _mm512_set1_epi32(7));
    const __m512i e =
        _mm512_min_epi32(_mm512_max_epi32(raw, _mm512_set1_epi32(-7)), _mm512_set1_epi32(7));
    /* mant = a / 2^e, exact: a times 2^-e (e in [-7, 7], a normal power) */
    const __m512 p2 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127), e), 23));
    const __m512 mant = _mm512_mul_ps(a, p2);
    const __mmask16 sub = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(-7));
    const __m512 m1 = _mm512_mask_mov_ps(_mm512_sub_ps(mant, _mm512_set1_ps(1.0f)), sub, mant);
    const __m512 u = _mm512_mul_ps(m1, _mm512_set1_ps(8.0f));
    /* HR(u) for 0 <= u < 8: k = floor(4u) (4u exact, truncation = floor) */
    const __m512i k = _mm512_cvttps_epi32(_mm512_mul_ps(u, _mm512_set1_ps(4.0f)));
    const __m512i one = _mm512_set1_epi32(1);
    __m512i q = _mm512_srai_epi32(k, 2);
    const __m512i r = _mm512_and_si512(k, _mm512_set1_epi32(3));
    q = _mm512_add_epi32(
        q, _mm512_and_si512(_mm512_srli_epi32(r, 1), _mm512_and_si512(_mm512_or_si512(r, q), one)));
    q = _mm512_min_epi32(q, _mm512_set1_epi32(7));
    q = _mm512_mask_mov_epi32(q, _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ),
                              _mm512_setzero_si512());
    q = _mm512_mask_mov_epi32(q, _mm512_cmp_ps_mask(u, _mm512_set1_ps(8.0f), _CMP_GE_OQ) | ovf,
                              _mm512_set1_epi32(7));
    __m512i code = _mm512_or_si512(
        sgn, _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(7)), 3), q));
    /* NaN: 0x7F; +-0 (also a product that underflowed): 0x00 */
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epi32_mask(ab, _mm512_set1_epi32(0x7F800000)),
                                 _mm512_set1_epi32(0x7F));
    return _mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(ab, _mm512_setzero_si512()), code);
}

/* plena_encode_block_fast on two consecutive blocks of 8 (16 elements) in
 * the lanes of one register: the same amax and scale per block and
 * the same single f32 multiply x * 2^-e, and Q(y) on every element as
 * quantize16, so the same codes and scale bytes. A pair holding a block that
 * plena_encode_block_fast hands to the reference (all zero / NaN, or an
 * Inf) goes through it block by block. */
static AVX512 void encode_pair8(const float *x, uint8_t *codes, uint8_t *scales, int zero_special)
{
    const __m512i v = _mm512_loadu_si512((const void *)x);
    __m512i a = _mm512_and_si512(v, _mm512_set1_epi32(0x7FFFFFFF));
    /* NaNs do not count towards amax */
    a = _mm512_maskz_mov_epi32(_mm512_cmple_epi32_mask(a, _mm512_set1_epi32(0x7F800000)), a);
    const __m512i amax = max8(a);
    const uint32_t am0 = (uint32_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(amax));
    const uint32_t am1 = (uint32_t)_mm_cvtsi128_si32(_mm512_extracti32x4_epi32(amax, 2));
    if (am0 == 0 || am0 == 0x7F800000u || am1 == 0 || am1 == 0x7F800000u) {
        plena_encode_block_fast(x, 8, codes, &scales[0], zero_special);
        plena_encode_block_fast(x + 8, 8, codes + 8, &scales[1], zero_special);
        return;
    }
    /* t = amax + EPS is normal (>= EPS) and finite: floor(log2 t) is its
     * exponent, e + 127 its biased exponent (-30 <= e <= 127, no clamp) */
    const __m512 t = _mm512_add_ps(_mm512_castsi512_ps(amax),
                                   _mm512_castsi512_ps(_mm512_set1_epi32((int)EPS_BITS)));
    const __m512i sb = _mm512_srli_epi32(_mm512_castps_si512(t), 23); /* scale byte e + 127 */
    /* 2^-e: biased exponent 254 - sb, or the subnormal 2^-127 when e = 127 */
    __m512i inv = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), sb), 23);
    inv = _mm512_mask_mov_epi32(inv, _mm512_cmpeq_epi32_mask(sb, _mm512_set1_epi32(254)),
                                _mm512_set1_epi32(0x00400000));
    /* y = x / 2^e, as the reference divides (a power of two: the same
     * correctly rounded value); then Q(y) on every lane */
    const __m512 y = _mm512_mul_ps(_mm512_castsi512_ps(v), _mm512_castsi512_ps(inv));
    _mm_storeu_si128((__m128i *)codes, _mm512_cvtepi32_epi8(quantize16(y)));
    scales[0] = (uint8_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(sb));
    scales[1] = (uint8_t)_mm_cvtsi128_si32(_mm512_extracti32x4_epi32(sb, 2));
}

/* Whole pairs of blocks of 8 through encode_pair8; returns how many
 * elements it encoded (0 without AVX-512F). */
static size_t encode_row8_avx512(const float *x, size_t n, uint8_t *codes, uint8_t *scales,
                                 int zero_special)
{
    if (!has_avx512f()) return 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        encode_pair8(x + i, codes + i, scales + i / 8, zero_special);
    return i;
}

/* ---- the same on AVX2 hosts: one block of 8 per register ---- */
#define AVX2 __attribute__((target("avx2")))

/* quantize16's steps on 8 lanes (AVX2 has no mask registers: compares give
 * all-ones lanes, blends pick) */
static AVX2 inline __m256i quantize8(__m256 y)
{
    const __m256i yb = _mm256_castps_si256(y);
    const __m256i ab = _mm256_and_si256(yb, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256 a = _mm256_castsi256_ps(ab);
    const __m256i sgn = _mm256_and_si256(_mm256_srli_epi32(yb, 24), _mm256_set1_epi32(0x80));
    const __m256 t = _mm256_add_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32((int)EPS_BITS)));
    const __m256i raw =
        _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(t), 23), _mm256_set1_epi32(127));
    const __m256i ovf = _mm256_cmpgt_epi32(raw, _mm256_set1_epi32(7));
    const __m256i e =
        _mm256_min_epi32(_mm256_max_epi32(raw, _mm256_set1_epi32(-7)), _mm256_set1_epi32(7));
    const __m256 p2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), e), 23));
    const __m256 mant = _mm256_mul_ps(a, p2);
    const __m256 sub = _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(-7)));
    const __m256 m1 = _mm256_blendv_ps(_mm256_sub_ps(mant, _mm256_set1_ps(1.0f)), mant, sub);
    const __m256 u = _mm256_mul_ps(m1, _mm256_set1_ps(8.0f));
    const __m256i k = _mm256_cvttps_epi32(_mm256_mul_ps(u, _mm256_set1_ps(4.0f)));
    const __m256i one = _mm256_set1_epi32(1);
    __m256i q = _mm256_srai_epi32(k, 2);
    const __m256i r = _mm256_and_si256(k, _mm256_set1_epi32(3));
    q = _mm256_add_epi32(
        q, _mm256_and_si256(_mm256_srli_epi32(r, 1), _mm256_and_si256(_mm256_or_si256(r, q), one)));
    q = _mm256_min_epi32(q, _mm256_set1_epi32(7));
    const __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_LT_OQ));
    q = _mm256_andnot_si256(neg, q);
    const __m256i big = _mm256_or_si256(
        _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_set1_ps(8.0f), _CMP_GE_OQ)), ovf);
    q = _mm256_blendv_epi8(q, _mm256_set1_epi32(7), big);
    __m256i code = _mm256_or_si256(
        sgn, _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(7)), 3), q));
    const __m256i nan = _mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x7F800000));
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7F), nan);
    return _mm256_andnot_si256(_mm256_cmpeq_epi32(ab, _mm256_setzero_si256()), code);
}

/* Per lane: the scale byte e + 127 of a finite non-zero amax (the
 * exponent of amax + EPS: normal, -30 <= e <= 127, no clamp) and in *inv
 * 2^-e as f32 bits (the subnormal 2^-127 when e = 127). */
static AVX2 inline __m256i scale8(__m256i amax, __m256i *inv)
{
    const __m256 t = _mm256_add_ps(_mm256_castsi256_ps(amax),
                                   _mm256_castsi256_ps(_mm256_set1_epi32((int)EPS_BITS)));
    const __m256i sb = _mm256_srli_epi32(_mm256_castps_si256(t), 23);
    const __m256i p = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), sb), 23);
    *inv = _mm256_blendv_epi8(p, _mm256_set1_epi32(0x00400000),
                              _mm256_cmpeq_epi32(sb, _mm256_set1_epi32(254)));
    return sb;
}

/* encode_pair8 for one block of 8: amax (NaNs excluded) by integer compare,
 * the scale from amax + EPS, y = x * 2^-e, quantize8; blocks the reference
 * takes (all zero / NaN, or an Inf) go to plena_encode_block_fast. */
static AVX2 void encode_block8_avx2(const float *x, uint8_t *codes, uint8_t *scale,
                                    int zero_special)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)x);
    __m256i a = _mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF));
    a = _mm256_andnot_si256(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000)), a);
    __m256i m = _mm256_max_epi32(a, _mm256_permute2x128_si256(a, a, 1));
    m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    const uint32_t am = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(m));
    if (am == 0 || am == 0x7F800000u) {
        plena_encode_block_fast(x, 8, codes, scale, zero_special);
        return;
    }
    __m256i inv;
    const __m256i sb = scale8(m, &inv);
    const __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(v), _mm256_castsi256_ps(inv));
    /* the eight codes (low bytes of the lanes) packed into 8 bytes */
    const __m256i c = quantize8(y);
    const __m128i c16 = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64((__m128i *)codes, _mm_packus_epi16(c16, c16));
    *scale = (uint8_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(sb));
}

/* Q(y) of one block from y's bits, for blocks whose |y| are all in
 * [2^-5, 2) (finite): plena_encode_block_fast's pass 1 with the rounding
 * as one add, q = (k5 + 1 + (q & 1)) >> 2 for the top five mantissa bits
 * k5 = 4q + r (r = 3 up, r = 2 up when q is odd: the same rule), and its
 * 8 -> 7 clamp as min(c, ex 8 + 7) on c = ex 8 + q. |y| < 2 keeps ex <= 127,
 * so the saturated code never arises. */
static AVX2 inline __m256i quantize8_bits(__m256i yb)
{
    const __m256i ab = _mm256_and_si256(yb, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i w = _mm256_srli_epi32(ab, 18); /* ex 32 + k5 */
    const __m256i w2 = _mm256_srli_epi32(w, 2);  /* ex 8 + q */
    const __m256i l = _mm256_and_si256(w2, _mm256_set1_epi32(1));
    const __m256i c =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(w, l), _mm256_set1_epi32(1)), 2);
    const __m256i code = _mm256_sub_epi32(
        _mm256_min_epi32(c, _mm256_or_si256(w2, _mm256_set1_epi32(7))), _mm256_set1_epi32(960));
    const __m256i sgn = _mm256_and_si256(_mm256_srli_epi32(yb, 24), _mm256_set1_epi32(0x80));
    return _mm256_or_si256(code, sgn);
}

/* Eight blocks of 8 (64 elements) at once: the eight amax by one
 * transposing max tree (NaNs excluded as in encode_block8_avx2), the eight
 * scales and 2^-e in one register, then per block y = x * 2^-e and Q(y)
 * from the bits when every |y| >= 2^-5 and none is NaN, else quantize8
 * (the reference's steps). Any block the reference takes (amax 0 or Inf)
 * sends all eight to encode_block8_avx2. */
static AVX2 void encode_oct8_avx2(const float *x, uint8_t *codes, uint8_t *scales, int zero_special)
{
    const __m256i inf = _mm256_set1_epi32(0x7F800000);
    __m256i v[8], a[8];
    for (int j = 0; j < 8; j++) {
        v[j] = _mm256_loadu_si256((const __m256i *)(x + 8 * j));
        a[j] = _mm256_and_si256(v[j], _mm256_set1_epi32(0x7FFFFFFF));
        a[j] = _mm256_andnot_si256(_mm256_cmpgt_epi32(a[j], inf), a[j]);
    }
    __m256i t[4];
    for (int j = 0; j < 4; j++)
        t[j] = _mm256_max_epi32(_mm256_unpacklo_epi32(a[2 * j], a[2 * j + 1]),
                                _mm256_unpackhi_epi32(a[2 * j], a[2 * j + 1]));
    const __m256i u0 =
        _mm256_max_epi32(_mm256_unpacklo_epi64(t[0], t[1]), _mm256_unpackhi_epi64(t[0], t[1]));
    const __m256i u1 =
        _mm256_max_epi32(_mm256_unpacklo_epi64(t[2], t[3]), _mm256_unpackhi_epi64(t[2], t[3]));
    /* lane j: amax of block j */
    const __m256i m = _mm256_max_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                       _mm256_permute2x128_si256(u0, u1, 0x31));
    const __m256i special =
        _mm256_or_si256(_mm256_cmpeq_epi32(m, _mm256_setzero_si256()), _mm256_cmpeq_epi32(m, inf));
    if (_mm256_movemask_epi8(special)) {
        for (int j = 0; j < 8; j++)
            encode_block8_avx2(x + 8 * j, codes + 8 * j, scales + j, zero_special);
        return;
    }
    __m256i inv;
    const __m256i sb = scale8(m, &inv);
    const __m128i s16 =
        _mm_packus_epi32(_mm256_castsi256_si128(sb), _mm256_extracti128_si256(sb, 1));
    _mm_storel_epi64((__m128i *)scales, _mm_packus_epi16(s16, s16));
    const __m256i small = _mm256_set1_epi32(0x3D000000); /* 2^-5 */
    __m256i c[8];
    for (int j = 0; j < 8; j++) {
        const __m256 y = _mm256_mul_ps(
            _mm256_castsi256_ps(v[j]),
            _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(inv, _mm256_set1_epi32(j))));
        const __m256i yb = _mm256_castps_si256(y);
        const __m256i ab = _mm256_and_si256(yb, _mm256_set1_epi32(0x7FFFFFFF));
        const __m256i slow =
            _mm256_or_si256(_mm256_cmpgt_epi32(small, ab), _mm256_cmpgt_epi32(ab, inf));
        c[j] = _mm256_movemask_epi8(slow) ? quantize8(y) : quantize8_bits(yb);
    }
    /* the codes (low bytes) of blocks 4k .. 4k + 3 into 32 bytes in order */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int k = 0; k < 2; k++) {
        const __m256i p01 = _mm256_packus_epi32(c[4 * k], c[4 * k + 1]);
        const __m256i p23 = _mm256_packus_epi32(c[4 * k + 2], c[4 * k + 3]);
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), order);
        _mm256_storeu_si256((__m256i *)(codes + 32 * k), b);
    }
}

static size_t encode_row8_avx2(const float *x, size_t n, uint8_t *codes, uint8_t *scales,
                               int zero_special)
{
    if (!plena_cpu_has_avx2()) return 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        encode_oct8_avx2(x + i, codes + i, scales + i / 8, zero_special);
    for (; i + 8 <= n; i += 8)
        encode_block8_avx2(x + i, codes + i, scales + i / 8, zero_special);
    return i;
}
#endif

void plena_num_mx_encode_row(enum plena_mx_mode mode, enum plena_mx_encoder enc, const float *x,
                             size_t n, size_t block, uint8_t *codes, uint8_t *scales)
{
    const int zero_special = enc != PLENA_MX_HOST;
    size_t done = 0;
#ifdef NUM_X86
    if (mode == PLENA_MX_PLENA && block == 8)
        done = encode_row8_avx512(x, n, codes, scales, zero_special);
    if (mode == PLENA_MX_PLENA && block == 8 && !done)
        done = encode_row8_avx2(x, n, codes, scales, zero_special);
#endif
    for (size_t b = done / block; b * block < n; b++) {
        size_t len = n - b * block < block ? n - b * block : block;
        if (mode == PLENA_MX_OCP)
            ocp_encode_block(x + b * block, len, codes + b * block, &scales[b]);
        else
            plena_encode_block_fast(x + b * block, len, codes + b * block, &scales[b],
                                    zero_special);
    }
}

void plena_num_mx_decode_row(enum plena_mx_mode mode, const uint8_t *codes, const uint8_t *scales,
                             size_t n, size_t block, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = plena_num_mx_decode(mode, codes[i], scales[i / block]);
}

/* An element code from its bit fields as plena_mx_lut describes (exponent
 * field below 15): the scalar twin of decode_row8_avx2's arithmetic. */
static float code_from_fields(unsigned c, float sub)
{
    const unsigned e = (c >> 3) & 15u, m = c & 7u;
    float v = e ? plena_num_f32_from_bits(((e + 120u) << 23) | (m << 20)) : (float)m * sub;
    return plena_num_f32_from_bits(plena_num_f32_bits(v) | (c >> 7) << 31);
}

void plena_num_mx_lut_init(struct plena_mx_lut *lut, enum plena_mx_mode mode)
{
    const struct plena_num_mx_mode_info *m = mx_mode(mode);
    (void)plena_num_fmt_decode_table(m->element, lut->code);
    (void)plena_num_fmt_decode_table(m->scale, lut->scale);
    /* the subnormal step is code 1's value; then every code must agree */
    lut->sub = lut->code[1];
    lut->arith = 1;
    for (unsigned c = 0; c < 256; c++)
        if (((c >> 3) & 15u) != 15u &&
            plena_num_f32_bits(code_from_fields(c, lut->sub)) != plena_num_f32_bits(lut->code[c]))
            lut->arith = 0;
}

#ifdef NUM_X86
/* Whole pairs of blocks of 8 of plena_num_mx_decode_row_lut, 16 lanes at a
 * time: the same value per code and the same product per element. The
 * values come from the codes' bit fields (code_from_fields on 16 lanes: the
 * exponent and mantissa shifted into place plus the bias, m * sub for
 * exponent 0, the sign or-ed in) when the table allows it (lut->arith) and
 * no lane has exponent field 15; else from the table by a gather, which on
 * this project's AVX-512 host cost about three quarters of the decode.
 * Returns how many elements it decoded (0 without AVX-512F). */
static AVX512 size_t decode_row8_avx512(const struct plena_mx_lut *lut, const uint8_t *codes,
                                        const uint8_t *scales, size_t n, float *out)
{
    size_t i = 0;
    const __m512i k78 = _mm512_set1_epi32(0x78), k7f = _mm512_set1_epi32(0x7F);
    const __m512i k7 = _mm512_set1_epi32(7), bias = _mm512_set1_epi32(120 << 23);
    const __m512 sub = _mm512_set1_ps(lut->sub);
    const int arith = lut->arith;
    for (; i + 16 <= n; i += 16) {
        const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(codes + i)));
        const __m512 sc = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(lut->scale[scales[i / 8]]),
                                               _mm512_set1_ps(lut->scale[scales[i / 8 + 1]]));
        const __m512i ef = _mm512_and_si512(c, k78); /* exponent field << 3 */
        __m512 v;
        if (!arith || _mm512_cmpeq_epi32_mask(ef, k78)) {
            v = _mm512_i32gather_ps(c, lut->code, 4); /* infinities, NaNs: the table */
        } else {
            /* ((e + 120) << 23) | (m << 20) == ((c & 0x7F) << 20) + (120 << 23) */
            const __m512i nb =
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(c, k7f), 20), bias);
            const __m512 sv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(c, k7)), sub);
            const __m512i mag = _mm512_mask_mov_epi32(
                nb, _mm512_cmpeq_epi32_mask(ef, _mm512_setzero_si512()), _mm512_castps_si512(sv));
            v = _mm512_castsi512_ps(
                _mm512_or_si512(mag, _mm512_slli_epi32(_mm512_srli_epi32(c, 7), 31)));
        }
        _mm512_storeu_ps(out + i, _mm512_mul_ps(v, sc));
    }
    return i;
}

/* The same on AVX2 hosts: one block of 8 per step (one gather, one
 * broadcast scale, one product per element, as the scalar loop). */
__attribute__((target("avx2"))) static size_t decode_row8_avx2(const struct plena_mx_lut *lut,
                                                               const uint8_t *codes,
                                                               const uint8_t *scales, size_t n,
                                                               float *out)
{
    size_t i = 0;
    const __m256i k15 = _mm256_set1_epi32(15), k7 = _mm256_set1_epi32(7);
    const __m256i k120 = _mm256_set1_epi32(120), zero = _mm256_setzero_si256();
    const __m256 sub = _mm256_set1_ps(lut->sub);
    for (; i + 8 <= n; i += 8) {
        const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(codes + i)));
        const __m256i e = _mm256_and_si256(_mm256_srli_epi32(c, 3), k15);
        const __m256i e15 = _mm256_cmpeq_epi32(e, k15);
        __m256 v;
        if (!lut->arith || _mm256_movemask_ps(_mm256_castsi256_ps(e15))) {
            v = _mm256_i32gather_ps(lut->code, c, 4); /* infinities, NaNs: the table */
        } else {                                      /* code_from_fields, eight lanes */
            const __m256i m = _mm256_and_si256(c, k7);
            const __m256i nb = _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, k120), 23),
                                               _mm256_slli_epi32(m, 20));
            const __m256 sb = _mm256_mul_ps(_mm256_cvtepi32_ps(m), sub);
            v = _mm256_blendv_ps(_mm256_castsi256_ps(nb), sb,
                                 _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, zero)));
            v = _mm256_or_ps(v,
                             _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(c, 7), 31)));
        }
        _mm256_storeu_ps(out + i, _mm256_mul_ps(v, _mm256_set1_ps(lut->scale[scales[i / 8]])));
    }
    return i;
}

#endif

void plena_num_mx_decode_row_lut(const struct plena_mx_lut *lut, const uint8_t *codes,
                                 const uint8_t *scales, size_t n, size_t block, float *out)
{
    size_t done = 0;
#ifdef NUM_X86
    if (block == 8 && n >= 16 && has_avx512f())
        done = decode_row8_avx512(lut, codes, scales, n, out);
    else if (block == 8 && n >= 8 && plena_cpu_has_avx2())
        done = decode_row8_avx2(lut, codes, scales, n, out);
#endif
    for (size_t b0 = done, s = done / block; b0 < n; b0 += block, s++) {
        const float sc = lut->scale[scales[s]];
        const size_t end = n - b0 < block ? n : b0 + block;
        for (size_t i = b0; i < end; i++)
            out[i] = lut->code[codes[i]] * sc;
    }
}
