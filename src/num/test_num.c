/* Exhaustive and worked-example tests of the numerics library
 * (docs/numerics.md, docs/formats.md "HBM image"). Expected values come from
 * worked tables or from the documented formulas re-derived here independently
 * (in double, through frexp/ldexp), never from the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "num/num.h"
#include "common/test_support.h"

static uint32_t bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

static float fbits(uint32_t b)
{
    float x;
    memcpy(&x, &b, 4);
    return x;
}

/* Same value and, for zeros, same sign; NaN matches NaN. */
static int same_value(float got, double want)
{
    if (isnan(want)) return isnan(got);
    if ((double)got != want) return 0;
    return !signbit(got) == !signbit(want);
}

#define assert_value(got, want)                                                                    \
    do {                                                                                           \
        float g_ = (got);                                                                          \
        double w_ = (want);                                                                        \
        if (!same_value(g_, w_)) fail_msg("%s = %a, expected %a", #got, (double)g_, w_);           \
    } while (0)

/* Independent RNE of a finite double to `sig` significant bits with minimum
 * quantum 2^min_q_exp; returns +-Inf when the rounded magnitude reaches
 * 2^ovf_exp. */
static double round_sig(double v, int sig, int min_q_exp, int ovf_exp)
{
    if (v == 0.0) return v;
    int E;
    frexp(v, &E); /* |v| in [2^(E-1), 2^E) */
    int qe = E - sig;
    if (qe < min_q_exp) qe = min_q_exp;
    double r = nearbyint(ldexp(v, -qe)); /* default rounding mode: ties to even */
    r = ldexp(r, qe);
    if (fabs(r) >= ldexp(1.0, ovf_exp)) return v < 0 ? -INFINITY : INFINITY;
    if (r == 0.0) return v < 0 ? -0.0 : 0.0;
    return r;
}

/* An encode of a decoded pattern h: h itself, or qnan (the canonical NaN)
 * when h is a NaN. */
static void expect_back(uint16_t back, uint16_t h, int is_nan, uint16_t qnan)
{
    assert_int_equal(back, is_nan ? qnan : h);
}

/* ---- BF16 ---- */

static void test_bf16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = plena_num_bf16_to_f32((uint16_t)h);
        assert_int_equal(bits(f), h << 16);
        /* value from the fields, written independently of the bit shift */
        int s = (int)(h >> 15), e = (int)((h >> 7) & 0xFF), m = (int)(h & 0x7F);
        double v;
        if (e == 255)
            v = m ? NAN : INFINITY;
        else if (e == 0)
            v = ldexp((double)m, -133);
        else
            v = ldexp(1.0 + m / 128.0, e - 127);
        if (s) v = -v;
        assert_value(f, v);
        expect_back(plena_num_bf16_from_f32(f), (uint16_t)h, e == 255 && m != 0, 0x7FC0);
    }
}

static void test_bf16_from_f32_sweep(void **state)
{
    (void)state;
    /* Every 251st f32 pattern plus the neighbourhood of every BF16 tie. */
    for (uint64_t i = 0; i < (1ull << 32); i += 251) {
        uint32_t b = (uint32_t)i;
        float x = fbits(b);
        uint16_t got = plena_num_bf16_from_f32(x);
        if (isnan(x)) {
            assert_int_equal(got, 0x7FC0);
            continue;
        }
        double want = round_sig((double)x, 8, -133, 128);
        assert_value(plena_num_bf16_to_f32(got), want);
    }
    for (uint32_t hi = 0; hi < 65536; hi += 7) {
        for (int d = -1; d <= 1; d++) {
            uint32_t b = (hi << 16) + 0x8000u + (uint32_t)d;
            float x = fbits(b);
            if (isnan(x)) continue;
            double want = round_sig((double)x, 8, -133, 128);
            assert_value(plena_num_bf16_to_f32(plena_num_bf16_from_f32(x)), want);
        }
    }
}

static void test_bf16_worked_values(void **state)
{
    (void)state;
    static const struct {
        uint32_t in;
        uint16_t out;
    } rows[] = {
        {0x3F800000, 0x3F80}, {0x40490FDB, 0x4049}, {0x3F808000, 0x3F80}, {0x3F818000, 0x3F82},
        {0x3F808001, 0x3F81}, {0x3F7FFFFF, 0x3F80}, {0x7F7FFFFF, 0x7F80}, {0x00000001, 0x0000},
        {0x80000000, 0x8000}, {0xFFC00000, 0x7FC0}, {0x7F800001, 0x7FC0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(plena_num_bf16_from_f32(fbits(rows[i].in)), rows[i].out);
    assert_value(plena_num_bf16_to_f32(0x4049), 3.140625);
    assert_value(plena_num_bf16_to_f32(0x3F82), 1.015625);
    assert_value(plena_num_bf16_to_f32(0x3F81), 1.0078125);
    assert_value(plena_num_round_bf16(fbits(0x40490FDB)), 3.140625);
    /* fp16 rows: fp16 -> f32 -> BF16 */
    static const struct {
        uint16_t fp16, bf16;
        double value;
    } h[] = {
        {0x7BFF, 0x4780, 65536.0},  {0x0001, 0x3380, 5.9604644775390625e-8},
        {0x3C0C, 0x3F82, 1.015625}, {0xFB53, 0xC76A, -59904.0},
        {0x7C00, 0x7F80, INFINITY}, {0x7E00, 0x7FC0, NAN},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        uint16_t b = plena_num_bf16_from_f32(plena_num_fp16_to_f32(h[i].fp16));
        assert_int_equal(b, h[i].bf16);
        assert_value(plena_num_bf16_to_f32(b), h[i].value);
    }
    assert_value(plena_num_fp16_to_f32(0x7BFF), 65504.0);
    assert_value(plena_num_fp16_to_f32(0x3C0C), 1.01171875);
    assert_value(plena_num_fp16_to_f32(0xFB53), -60000.0);
}

static void test_bf16_rows(void **state)
{
    (void)state;
    float x[5] = {1.0f, fbits(0x40490FDB), -0.0f, fbits(0x7F800001), fbits(0x3F818000)};
    uint16_t h[5];
    float back[5];
    plena_num_bf16_row_from_f32(x, h, 5);
    const uint16_t want[5] = {0x3F80, 0x4049, 0x8000, 0x7FC0, 0x3F82};
    for (int i = 0; i < 5; i++)
        assert_int_equal(h[i], want[i]);
    plena_num_bf16_row_to_f32(h, back, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(bits(back[i]), (uint32_t)want[i] << 16);
}

/* ---- FP16 ---- */

static double fp16_formula(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = m * ldexp(1.0, -24);
    else
        v = (1.0 + m / 1024.0) * ldexp(1.0, e - 15);
    return s ? -v : v;
}

static void test_fp16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        double v = fp16_formula(h);
        float f = plena_num_fp16_to_f32(h);
        assert_value(f, v);
        /* the fp16 -> bf16 chain: every fp16 value is a normal BF16 range value */
        uint16_t b = plena_num_bf16_from_f32(f);
        if (isnan(v))
            assert_int_equal(b, 0x7FC0);
        else
            assert_value(plena_num_bf16_to_f32(b), round_sig(v, 8, -133, 128));
        /* and back: fp16 encode of an fp16 value is the identity (NaN -> 0x7E00) */
        expect_back(plena_num_fp16_from_f32(f), h, isnan(v), 0x7E00);
    }
}

static void test_fp16_encode(void **state)
{
    (void)state;
    for (uint64_t i = 0; i < (1ull << 32); i += 509) {
        float x = fbits((uint32_t)i);
        uint16_t h = plena_num_fp16_from_f32(x);
        if (isnan(x)) {
            assert_int_equal(h, 0x7E00);
            continue;
        }
        /* 11 significant bits, quantum >= 2^-24, Inf from 2^16 (65520 rounds there) */
        assert_value(plena_num_fp16_to_f32(h), round_sig((double)x, 11, -24, 16));
    }
    assert_int_equal(plena_num_fp16_from_f32(65519.99f), 0x7BFF);
    assert_int_equal(plena_num_fp16_from_f32(65520.0f), 0x7C00);
    assert_int_equal(plena_num_fp16_from_f32(-65520.0f), 0xFC00);
    assert_int_equal(plena_num_fp16_from_f32(0x1p-25f), 0x0000);          /* tie to even 0 */
    assert_int_equal(plena_num_fp16_from_f32(fbits(0x33000001)), 0x0001); /* just above */
    assert_int_equal(plena_num_fp16_from_f32(0x1.8p-24f), 0x0002);        /* tie, odd below */
    assert_int_equal(plena_num_fp16_from_f32(0x1.ffcp-15f), 0x0400);      /* carry to normal */
    assert_int_equal(plena_num_fp16_from_f32(-0.0f), 0x8000);
    assert_int_equal(plena_num_fp16_from_f32(fbits(0xFFC00000)), 0x7E00);
    assert_int_equal(plena_num_fp16_from_f32(1.0f), 0x3C00);
    assert_int_equal(plena_num_fp16_from_f32(-2.0f), 0xC000);
    assert_int_equal(plena_num_fp16_from_f32(-60000.0f), 0xFB53);
}

/* ---- exp32, floor(log2) ---- */

static void test_floor_log2_and_exp(void **state)
{
    (void)state;
    assert_int_equal(plena_num_floor_log2(1.0f), 0);
    assert_int_equal(plena_num_floor_log2(fbits(0x407FFFFF)), 1);
    assert_int_equal(plena_num_floor_log2(4.0f), 2);
    assert_int_equal(plena_num_floor_log2(fbits(0x7F7FFFFF)), 127);
    assert_int_equal(plena_num_floor_log2(fbits(0x00000001)), -149);
    assert_int_equal(plena_num_floor_log2(fbits(0x007FFFFF)), -127);
    assert_int_equal(plena_num_floor_log2(fbits(0x00800000)), -126);
    assert_int_equal(plena_num_floor_log2(fbits(0x3089705F)), -30); /* EPS */
    for (uint64_t i = 1; i < 0x7F800000ull; i += 4099) {
        int e;
        frexp((double)fbits((uint32_t)i), &e);
        assert_int_equal(plena_num_floor_log2(fbits((uint32_t)i)), e - 1);
    }
    assert_int_equal(bits(plena_expf(0.0f)), 0x3F800000);
    assert_int_equal(bits(plena_expf(1.0f)), 0x402DF854); /* e rounded to f32 */
    assert_int_equal(bits(plena_expf(-INFINITY)), 0);
    assert_int_equal(bits(plena_expf(100.0f)), 0x7F800000);
}

/* ---- e4m3 / e8m0 ---- */

static double e4m3_formula(uint8_t c)
{
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    double v;
    if (e == 15)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = (m / 8.0) * ldexp(1.0, -7);
    else
        v = (1.0 + m / 8.0) * ldexp(1.0, e - 7);
    return s ? -v : v;
}

static void test_e4m3_all_codes(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++)
        assert_value(plena_num_e4m3_decode_ref((uint8_t)c), e4m3_formula((uint8_t)c));
    assert_value(plena_num_e4m3_decode_ref(0x38), 1.0);
    assert_value(plena_num_e4m3_decode_ref(0x3F), 1.875);
    assert_value(plena_num_e4m3_decode_ref(0x77), 240.0);
    assert_value(plena_num_e4m3_decode_ref(0x08), 0.015625);
    assert_value(plena_num_e4m3_decode_ref(0x07), 0.0068359375);
    assert_value(plena_num_e4m3_decode_ref(0x01), 0.0009765625);
    assert_value(plena_num_e4m3_decode_ref(0x00), 0.0);
    assert_value(plena_num_e4m3_decode_ref(0x80), -0.0);
    assert_value(plena_num_e4m3_decode_ref(0x78), INFINITY);
    assert_value(plena_num_e4m3_decode_ref(0xF8), -INFINITY);
    assert_value(plena_num_e4m3_decode_ref(0x7F), NAN);
    assert_value(plena_num_e4m3_decode_ref(0xF9), NAN);
    /* No code lies strictly between 0.0068359375 and 0.015625. */
    for (int c = 0; c < 256; c++) {
        double v = fabs(e4m3_formula((uint8_t)c));
        assert_false(v > 0.0068359375 && v < 0.015625);
    }
}

static void test_e8m0_all_codes(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        double want = b == 0 ? 0.0 : (b == 255 ? INFINITY : ldexp(1.0, b - 127));
        assert_value(plena_num_e8m0_decode_ref((uint8_t)b), want);
        double ocp = b == 255 ? NAN : ldexp(1.0, b - 127);
        assert_value(plena_num_ocp_e8m0_decode_ref((uint8_t)b), ocp);
    }
    assert_value(plena_num_e8m0_decode_ref(0x7F), 1.0);
    assert_value(plena_num_e8m0_decode_ref(0x81), 4.0);
    assert_value(plena_num_e8m0_decode_ref(0x86), 128.0);
    assert_value(plena_num_e8m0_decode_ref(0x61), 0x1p-30);
    assert_value(plena_num_e8m0_decode_ref(0xFE), 0x1p127);
    assert_value(plena_num_e8m0_decode_ref(0x00), 0.0);
    assert_value(plena_num_ocp_e8m0_decode_ref(0x00), 0x1p-127);
}

static void test_ocp_e4m3fn_all_codes(void **state)
{
    (void)state;
    for (int c = 0; c < 256; c++) {
        int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
        double v;
        if (e == 15 && m == 7)
            v = NAN;
        else if (e == 0)
            v = m * ldexp(1.0, -9);
        else
            v = (1.0 + m / 8.0) * ldexp(1.0, e - 7);
        if (s) v = -v;
        assert_value(plena_num_ocp_e4m3fn_decode_ref((uint8_t)c), v);
    }
    assert_value(plena_num_ocp_e4m3fn_decode_ref(0x7E), 448.0);
    assert_value(plena_num_ocp_e4m3fn_decode_ref(0x78), 256.0); /* no Inf in e4m3fn */
    assert_value(plena_num_ocp_e4m3fn_decode_ref(0x08), 0x1p-6);
    assert_value(plena_num_ocp_e4m3fn_decode_ref(0x07), 0.013671875);
    assert_value(plena_num_ocp_e4m3fn_decode_ref(0xFF), NAN);
    assert_value(plena_num_ocp_e4m3fn_decode_ref(0x80), -0.0);
}

/* ---- MX decode (docs/numerics.md "MX decode") ---- */

static void test_mx_decode_rules(void **state)
{
    (void)state;
    /* Every (code, scale) pair equals the one exact product in double rounded
     * once to f32 (which is what a single f32 multiply gives). */
    for (int c = 0; c < 256; c++)
        for (int s = 0; s < 256; s++) {
            double ec = e4m3_formula((uint8_t)c);
            double sc = s == 0 ? 0.0 : (s == 255 ? INFINITY : ldexp(1.0, s - 127));
            assert_value(plena_num_mx_decode(PLENA_MX_PLENA, (uint8_t)c, (uint8_t)s),
                         (double)(float)(ec * sc));
        }
    for (int c = 0; c < 256; c++)
        for (int s = 0; s < 256; s++) {
            double ec = plena_num_ocp_e4m3fn_decode_ref((uint8_t)c); /* checked above */
            double sc = s == 255 ? NAN : ldexp(1.0, s - 127);
            assert_value(plena_num_mx_decode(PLENA_MX_OCP, (uint8_t)c, (uint8_t)s),
                         (double)(float)(ec * sc));
        }
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0xB8, 0x00), -0.0); /* sign kept */
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x78, 0x00), NAN);  /* Inf * 0 */
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x7F, 0x7F), NAN);
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x01, 0xFF), INFINITY);
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x81, 0xFF), -INFINITY);
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x00, 0xFF), NAN);
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x77, 0xFE), INFINITY); /* f32 overflow */
    assert_value(plena_num_mx_decode(PLENA_MX_PLENA, 0x01, 0x01), 0x1p-136); /* f32 subnormal */
    assert_value(plena_num_mx_decode(PLENA_MX_OCP, 0x38, 0xFF), NAN);
    assert_value(plena_num_mx_decode(PLENA_MX_OCP, 0x38, 0x00), 0x1p-127);
    assert_value(plena_num_mx_decode(PLENA_MX_OCP, 0x7E, 0x81), 1792.0);
}

/* ---- Q(y) (docs/numerics.md "Element quantizer" and "MX encoders") ---- */

/* Q(y) restated in double from its definition
 * (docs/numerics.md "Element quantizer"), sharing nothing with num.c. */
static uint8_t q_model(float y)
{
    if (isnan(y)) return 0x7F;
    if (y == 0.0f) return 0;
    int s = y < 0;
    float a = fabsf(y);
    if (isinf(a)) return (uint8_t)(s << 7 | 0x77);
    float t = a + 1e-9f; /* fl32 addition */
    int E;
    frexp((double)t, &E);
    int raw = E - 1;
    int ovf = raw > 7;
    int e = raw < -7 ? -7 : raw > 7 ? 7 : raw;
    double mant = ldexp((double)a, -e);
    double u = e != -7 ? (mant - 1.0) * 8.0 : mant * 8.0;
    double q = nearbyint(floor(4.0 * u) / 4.0);
    if (q < 0) q = 0;
    if (q > 7) q = 7;
    if (ovf) q = 7;
    return (uint8_t)(s << 7 | (e + 7) << 3 | (int)q);
}

static void test_quantizer_model_sweep(void **state)
{
    (void)state;
    assert_int_equal(bits(1e-9f), 0x3089705F);
    for (uint32_t h = 0; h < 65536; h++) { /* every BF16 value (what VRAM holds) */
        float y = plena_num_bf16_to_f32((uint16_t)h);
        assert_int_equal(plena_num_e4m3_quantize_ref(y), q_model(y));
    }
    for (uint64_t i = 0; i < (1ull << 32); i += 1021) {
        float y = fbits((uint32_t)i);
        assert_int_equal(plena_num_e4m3_quantize_ref(y), q_model(y));
    }
    /* every quarter step of u in every binade of the element range */
    for (int e = -7; e <= 7; e++)
        for (int k = 0; k < 32; k++)
            for (int d = -1; d <= 1; d++) {
                float base = (float)ldexp(e == -7 ? k / 32.0 : 1.0 + k / 32.0, e);
                uint32_t b = bits(base) + (uint32_t)d;
                if (base == 0.0f) continue;
                assert_int_equal(plena_num_e4m3_quantize_ref(fbits(b)), q_model(fbits(b)));
            }
}

static void test_quantizer_edges(void **state)
{
    (void)state;
    assert_int_equal(plena_num_e4m3_quantize_ref(NAN), 0x7F);
    assert_int_equal(plena_num_e4m3_quantize_ref(-NAN), 0x7F);
    assert_int_equal(plena_num_e4m3_quantize_ref(0.0f), 0x00);
    assert_int_equal(plena_num_e4m3_quantize_ref(-0.0f), 0x00); /* sign dropped */
    assert_int_equal(plena_num_e4m3_quantize_ref(INFINITY), 0x77);
    assert_int_equal(plena_num_e4m3_quantize_ref(-INFINITY), 0xF7);
    assert_int_equal(plena_num_e4m3_quantize_ref(1000.0f), 0x77); /* ovf: q = 7 */
    assert_int_equal(plena_num_e4m3_quantize_ref(-3e38f), 0xF7);
    assert_int_equal(plena_num_e4m3_quantize_ref(-1e-12f), 0x80); /* negative too small */
    assert_int_equal(plena_num_e4m3_quantize_ref(1e-12f), 0x00);
    /* scaled magnitude in [2^-7, 2^-6): the subnormal path saturates at 0x07 */
    assert_int_equal(plena_num_e4m3_quantize_ref(0x1p-7f), 0x07);
    assert_int_equal(plena_num_e4m3_quantize_ref(0x1.fp-7f), 0x07);
    assert_int_equal(plena_num_e4m3_quantize_ref(0x1p-6f), 0x08);
    /* HR: u = 2.6 truncates to 2.5, a tie, so 2 (plain RNE: 3) */
    assert_int_equal(plena_num_e4m3_quantize_ref(1.325f), 0x3A);
    /* u = 3.6 gives 4 either way */
    assert_int_equal(plena_num_e4m3_quantize_ref(1.45f), 0x3C);
    /* no carry into the exponent: 1.99 codes as 1.875 */
    assert_int_equal(plena_num_e4m3_quantize_ref(1.99f), 0x3F);
    assert_int_equal(plena_num_e4m3_quantize_ref(1.953125f), 0x3F); /* u = 7.625 */
    assert_int_equal(plena_num_e4m3_quantize_ref(0.75f), 0x34);     /* hand check, row A */
    assert_int_equal(plena_num_e4m3_quantize_ref(0.001f), 0x01);
    assert_int_equal(plena_num_e4m3_quantize_ref(240.0f), 0x77);
    assert_int_equal(plena_num_e4m3_quantize_ref(255.9f), 0x77); /* raw 7, u 7.99 -> 7 */
}

/* ---- worked blocks (docs/numerics.md "MX encoders") ---- */

struct block {
    float x[8];
    uint8_t scale, host_scale;
    uint8_t codes[8];
    double decoded[8];
};

static void check_block(enum plena_mx_mode mode, const struct block *b, int host)
{
    uint8_t codes[8], scale;
    if (host)
        plena_num_mx_encode_block_host(mode, b->x, 8, codes, &scale);
    else
        plena_num_mx_encode_block_device(mode, b->x, 8, codes, &scale);
    assert_int_equal(scale, host ? b->host_scale : b->scale);
    for (int i = 0; i < 8; i++) {
        if (codes[i] != b->codes[i])
            fail_msg("element %d: code 0x%02X, expected 0x%02X", i, codes[i], b->codes[i]);
        assert_value(plena_num_mx_decode(mode, codes[i], scale), b->decoded[i]);
    }
}

static void test_worked_blocks_plena(void **state)
{
    (void)state;
    static const struct block rows[] = {
        /* A */ {{1, 2, 3, 4, 0.5f, -1, 0, 6},
                 0x81,
                 0x81,
                 {0x28, 0x30, 0x34, 0x38, 0x20, 0xA8, 0x00, 0x3C},
                 {1, 2, 3, 4, 0.5, -1, 0, 6}},
        /* B */
        {{1.325f, 1.99f, -1.875f, 0.0068359375f, 0.001f, -0.0f, 1.5f, 1.0f},
         0x7F,
         0x7F,
         {0x3A, 0x3F, 0xBF, 0x07, 0x01, 0x00, 0x3C, 0x38},
         {1.25, 1.875, -1.875, 0.0068359375, 0.0009765625, 0, 1.5, 1.0}},
        /* C */
        {{240, 1, 1.99f, 100, -7, 0.3f, 200, 250},
         0x86,
         0x86,
         {0x3F, 0x07, 0x07, 0x34, 0x96, 0x02, 0x3C, 0x3F},
         {240, 0.875, 0.875, 96, -7, 0.25, 192, 240}},
        /* D */
        {{NAN, 1, -3, 0, 0, 0, 0, 0},
         0x80,
         0x80,
         {0x7F, 0x30, 0xBC, 0, 0, 0, 0, 0},
         {NAN, 1, -3, 0, 0, 0, 0, 0}},
        /* E */
        {{INFINITY, 1, -3, 0, 0, 0, 0, 0},
         0xFE,
         0xFE,
         {0x77, 0x00, 0x80, 0, 0, 0, 0, 0},
         {INFINITY, 0, -0.0, 0, 0, 0, 0, 0}},
        /* F: 3.9999998 = 0x407FFFFF */
        {{0x1.fffffep1f, 0, 0, 0, 0, 0, 0, 0},
         0x80,
         0x80,
         {0x3F, 0, 0, 0, 0, 0, 0, 0},
         {3.75, 0, 0, 0, 0, 0, 0, 0}},
        /* G */ {{0, 0, 0, 0, 0, 0, 0, 0}, 0x00, 0x61, {0}, {0, 0, 0, 0, 0, 0, 0, 0}},
    };
    assert_int_equal(bits(rows[5].x[0]), 0x407FFFFF);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        check_block(PLENA_MX_PLENA, &rows[r], 0);
        check_block(PLENA_MX_PLENA, &rows[r], 1);
    }
    /* H_STORE_V sees BF16 roundings: B and C keep their bytes, F becomes 4.0. */
    for (size_t r = 1; r <= 5; r += 1) {
        if (r != 1 && r != 2 && r != 5) continue;
        struct block b = rows[r];
        for (int i = 0; i < 8; i++)
            b.x[i] = plena_num_round_bf16(b.x[i]);
        uint8_t codes[8], scale;
        plena_num_mx_encode_block_device(PLENA_MX_PLENA, b.x, 8, codes, &scale);
        if (r == 5) {
            assert_int_equal(scale, 0x81);
            assert_int_equal(codes[0], 0x38);
        } else {
            assert_int_equal(scale, rows[r].scale);
            assert_memory_equal(codes, rows[r].codes, 8);
        }
    }
    /* all-NaN block: device scale 0, codes 0x7F; host uses e = -30 */
    float nan8[8] = {NAN, NAN, 0, -0.0f, NAN, 0, 0, 0};
    uint8_t codes[8], scale;
    plena_num_mx_encode_block_device(PLENA_MX_PLENA, nan8, 8, codes, &scale);
    assert_int_equal(scale, 0x00);
    assert_int_equal(codes[0], 0x7F);
    assert_int_equal(codes[2], 0x00);
    assert_int_equal(codes[3], 0x00);
    plena_num_mx_encode_block_host(PLENA_MX_PLENA, nan8, 8, codes, &scale);
    assert_int_equal(scale, 0x61);
    assert_int_equal(codes[0], 0x7F);
    assert_int_equal(codes[3], 0x00);
}

static uint8_t scale_of(float amax)
{
    float x[8] = {amax, 0, 0, 0, 0, 0, 0, 0};
    uint8_t codes[8], scale;
    plena_num_mx_encode_block_device(PLENA_MX_PLENA, x, 8, codes, &scale);
    return scale;
}

static void test_block_scale_edges(void **state)
{
    (void)state;
    /* amax below ~8.6e-10: EPS dominates t, e = -30 */
    assert_int_equal(scale_of(8e-10f), 0x61);
    assert_int_equal(scale_of(fbits(0x00000001)), 0x61);
    /* just below a power of two: exact floor gives p - 1 for p >= -4 ... */
    assert_int_equal(scale_of(fbits(0x407FFFFF)), 0x80); /* p = 2 -> e = 1 */
    assert_int_equal(scale_of(fbits(0x3F7FFFFF)), 0x7E); /* p = 0 -> e = -1 */
    assert_int_equal(scale_of(0x1.fffffep-5f), 0x7A);    /* p = -4 -> e = -5 */
    /* ... and at p = -5 adding EPS rounds t up to 2^p, e = p */
    assert_int_equal(scale_of(0x1.fffffep-6f), 0x7A);
    assert_int_equal(scale_of(0x1p127f), 0xFE);
    assert_int_equal(scale_of(fbits(0x7F7FFFFF)), 0xFE);
    assert_int_equal(scale_of(-INFINITY), 0xFE);
}

static void test_zero_block_row(void **state)
{
    (void)state;
    /* A worked HBM image (docs/formats.md "HBM image"): a [1, 64] tensor, row A
     * then zeros. */
    float x[64] = {1, 2, 3, 4, 0.5f, -1, 0, 6};
    uint8_t codes[64], scales[8];
    plena_num_mx_encode_row(PLENA_MX_PLENA, PLENA_MX_HOST, x, 64, 8, codes, scales);
    const uint8_t host[8] = {0x81, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61};
    assert_memory_equal(scales, host, 8);
    const uint8_t row_a[8] = {0x28, 0x30, 0x34, 0x38, 0x20, 0xA8, 0x00, 0x3C};
    assert_memory_equal(codes, row_a, 8);
    for (int i = 8; i < 64; i++)
        assert_int_equal(codes[i], 0);
    plena_num_mx_encode_row(PLENA_MX_PLENA, PLENA_MX_DEVICE, x, 64, 8, codes, scales);
    const uint8_t dev[8] = {0x81, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(scales, dev, 8);
    float back[64];
    plena_num_mx_decode_row(PLENA_MX_PLENA, codes, scales, 64, 8, back);
    for (int i = 0; i < 64; i++)
        assert_value(back[i], (double)x[i]);
    /* block 32 and a row helper with the worked HBM image (rows A and B) */
    float ab[16] = {1,      2,     3,    4,   0.5f, -1, 0, 6, 1.325f, 1.99f, -1.875f, 0.0068359375f,
                    0.001f, -0.0f, 1.5f, 1.0f};
    uint8_t img[18];
    plena_num_mx_encode_row(PLENA_MX_PLENA, PLENA_MX_HOST, ab, 16, 8, img, img + 16);
    const uint8_t want[18] = {0x28, 0x30, 0x34, 0x38, 0x20, 0xA8, 0x00, 0x3C, 0x3A,
                              0x3F, 0xBF, 0x07, 0x01, 0x00, 0x3C, 0x38, 0x81, 0x7F};
    assert_memory_equal(img, want, 18);
    plena_num_mx_encode_row(PLENA_MX_PLENA, PLENA_MX_DEVICE, x, 64, 32, codes, scales);
    assert_int_equal(scales[0], 0x81);
    assert_int_equal(scales[1], 0x00);
}

/* ---- OCP (docs/numerics.md "OCP mode") ---- */

static void test_worked_blocks_ocp(void **state)
{
    (void)state;
    static const struct block rows[] = {
        {{1, 2, 3, 4, 0.5f, -1, 0, 6},
         0x79,
         0x79,
         {0x68, 0x70, 0x74, 0x78, 0x60, 0xE8, 0x00, 0x7C},
         {1, 2, 3, 4, 0.5, -1, 0, 6}},
        {{511, 1, 0.3f, -100, 0.004f, 0, 0, 0},
         0x7F,
         0x7F,
         {0x7E, 0x38, 0x2A, 0xEC, 0x02, 0, 0, 0},
         {448, 1, 0.3125, -96, 0.00390625, 0, 0, 0}},
        {{1, 1.9375f, 0x1p-9f, 0x1p-10f, -0.0f, 17, 0.06f, 0},
         0x7B,
         0x7B,
         {0x58, 0x60, 0x10, 0x08, 0x80, 0x78, 0x37, 0x00},
         {1, 2.0, 0x1p-9, 0x1p-10, -0.0, 16, 0.05859375, 0}},
    };
    for (size_t r = 0; r < 3; r++) {
        check_block(PLENA_MX_OCP, &rows[r], 0);
        check_block(PLENA_MX_OCP, &rows[r], 1);
    }
    /* compatible mode: 1.9375 codes as 1.875 (no carry) */
    assert_int_equal(plena_num_e4m3_quantize_ref(1.9375f), 0x3F);
    /* BF16 of block 2 (511 -> 512): scale 0x80, codes 78 30 22 E4 01 00 00 00 */
    float x[8];
    for (int i = 0; i < 8; i++)
        x[i] = plena_num_round_bf16(rows[1].x[i]);
    uint8_t codes[8], scale;
    plena_num_mx_encode_block_device(PLENA_MX_OCP, x, 8, codes, &scale);
    assert_int_equal(scale, 0x80);
    const uint8_t want[8] = {0x78, 0x30, 0x22, 0xE4, 0x01, 0, 0, 0};
    assert_memory_equal(codes, want, 8);
    /* encode rules 1 and 2 */
    float nanb[8] = {1, 2, NAN, 0, 0, 0, 0, 0};
    plena_num_mx_encode_block_host(PLENA_MX_OCP, nanb, 8, codes, &scale);
    assert_int_equal(scale, 0xFF);
    for (int i = 0; i < 8; i++)
        assert_int_equal(codes[i], 0x7F);
    float zb[8] = {0, -0.0f, 0, 0, -0.0f, 0, 0, 0};
    plena_num_mx_encode_block_host(PLENA_MX_OCP, zb, 8, codes, &scale);
    assert_int_equal(scale, 0x00);
    const uint8_t zc[8] = {0, 0x80, 0, 0, 0x80, 0, 0, 0};
    assert_memory_equal(codes, zc, 8);
    /* Inf: p = 128, e = 120, Inf saturates to 448 */
    float ib[8] = {INFINITY, -1, 0, 0, 0, 0, 0, 0};
    plena_num_mx_encode_block_device(PLENA_MX_OCP, ib, 8, codes, &scale);
    assert_int_equal(scale, 247);
    assert_int_equal(codes[0], 0x7E);
    assert_int_equal(codes[1], 0x80);
}

/* ---- traits table (formats.def) treated as data ---- */

static void test_format_traits(void **state)
{
    (void)state;
    static const char *names[] = {"plena_e4m3", "plena_e8m0", "ocp_e4m3fn", "ocp_e8m0"};
    assert_int_equal(PLENA_FMT_COUNT, 4);
    for (int f = 0; f < PLENA_FMT_COUNT; f++) {
        const struct plena_num_fmt_info *info = plena_num_fmt_info((enum plena_fmt)f);
        assert_non_null(info);
        assert_string_equal(info->name, names[f]);
        float table[256];
        assert_int_equal(plena_num_fmt_decode_table((enum plena_fmt)f, table), 0);
        float maxv = 0;
        for (int c = 0; c < 256; c++) {
            float v = info->decode_ref((uint8_t)c);
            assert_int_equal(bits(table[c]), bits(v));
            if (isfinite(v) && v > maxv) maxv = v;
        }
        /* the max code is the largest finite value and there is only one */
        assert_value(info->decode_ref(info->max_code), (double)info->max_finite);
        assert_value(maxv, (double)info->max_finite);
    }
    assert_value(plena_num_fmt_info(PLENA_FMT_E4M3)->max_finite, 240.0);
    assert_value(plena_num_fmt_info(PLENA_FMT_OCP_E4M3FN)->max_finite, 448.0);
    assert_null(plena_num_fmt_info(PLENA_FMT_COUNT));
    float t[256];
    assert_int_not_equal(plena_num_fmt_decode_table(PLENA_FMT_COUNT, t), 0);
}

/* The MX mode rows of formats.def as data: names (the settings values),
 * element and scale formats (docs/numerics.md "MX decode" and "OCP mode"),
 * and the decode they drive against the named _ref decoders on every (code,
 * scale) pair. */
static void test_mx_mode_table(void **state)
{
    (void)state;
    assert_int_equal(PLENA_MX_MODE_COUNT, 2);
    const struct plena_num_mx_mode_info *p = plena_num_mx_mode_info(PLENA_MX_PLENA);
    const struct plena_num_mx_mode_info *o = plena_num_mx_mode_info(PLENA_MX_OCP);
    assert_string_equal(p->name, "plena");
    assert_int_equal(p->element, PLENA_FMT_E4M3);
    assert_int_equal(p->scale, PLENA_FMT_E8M0);
    assert_string_equal(o->name, "ocp");
    assert_int_equal(o->element, PLENA_FMT_OCP_E4M3FN);
    assert_int_equal(o->scale, PLENA_FMT_OCP_E8M0);
    assert_null(plena_num_mx_mode_info(PLENA_MX_MODE_COUNT));
    for (unsigned sc = 0; sc < 256; sc++)
        for (unsigned c = 0; c < 256; c++) {
            float want_p =
                plena_num_e4m3_decode_ref((uint8_t)c) * plena_num_e8m0_decode_ref((uint8_t)sc);
            float want_o = plena_num_ocp_e4m3fn_decode_ref((uint8_t)c) *
                           plena_num_ocp_e8m0_decode_ref((uint8_t)sc);
            assert_int_equal(bits(plena_num_mx_decode(PLENA_MX_PLENA, (uint8_t)c, (uint8_t)sc)),
                             bits(want_p));
            assert_int_equal(bits(plena_num_mx_decode(PLENA_MX_OCP, (uint8_t)c, (uint8_t)sc)),
                             bits(want_o));
        }
}

/* The decode tables against plena_num_mx_decode on every (code, scale) pair
 * of both modes, bit for bit (NaNs included), and the row form with a short
 * last block. */
static void test_mx_lut_all_pairs(void **state)
{
    (void)state;
    static const enum plena_mx_mode modes[] = {PLENA_MX_PLENA, PLENA_MX_OCP};
    for (int mi = 0; mi < 2; mi++) {
        struct plena_mx_lut lut;
        plena_num_mx_lut_init(&lut, modes[mi]);
        static uint8_t codes[256 * 256], scales[256 * 256 / 8];
        static float a[256 * 256], b[256 * 256];
        for (unsigned s = 0; s < 256; s++)
            for (unsigned c = 0; c < 256; c++) {
                float want = plena_num_mx_decode(modes[mi], (uint8_t)c, (uint8_t)s);
                float got = lut.code[c] * lut.scale[s];
                uint32_t wb, gb;
                memcpy(&wb, &want, 4);
                memcpy(&gb, &got, 4);
                if (wb != gb) fprintf(stderr, "mode %d code %u scale %u\n", mi, c, s);
                assert_int_equal(wb, gb);
            }
        /* rows: every code under each scale, blocks of 8, n not a multiple of 8 */
        for (unsigned i = 0; i < 256 * 256; i++)
            codes[i] = (uint8_t)(i * 7u + i / 256u);
        for (unsigned i = 0; i < 256 * 256 / 8; i++)
            scales[i] = (uint8_t)(i * 13u);
        size_t n = 256 * 256 - 3;
        plena_num_mx_decode_row(modes[mi], codes, scales, n, 8, a);
        memset(b, 0x55, sizeof b);
        plena_num_mx_decode_row_lut(&lut, codes, scales, n, 8, b);
        assert_memory_equal(a, b, n * sizeof *a);
        const uint8_t *tail = (const uint8_t *)(b + n); /* nothing written past n */
        for (size_t i = 0; i < (256 * 256 - n) * sizeof *b; i++)
            assert_int_equal(tail[i], 0x55);
    }
}

static const struct CMUnitTest tests[] = {
    /* bf16 and fp16 */
    cmocka_unit_test(test_bf16_all_patterns),
    cmocka_unit_test(test_bf16_from_f32_sweep),
    cmocka_unit_test(test_bf16_worked_values),
    cmocka_unit_test(test_bf16_rows),
    cmocka_unit_test(test_fp16_all_patterns),
    cmocka_unit_test(test_fp16_encode),
    /* MX element and scale codes */
    cmocka_unit_test(test_floor_log2_and_exp),
    cmocka_unit_test(test_e4m3_all_codes),
    cmocka_unit_test(test_e8m0_all_codes),
    cmocka_unit_test(test_ocp_e4m3fn_all_codes),
    cmocka_unit_test(test_mx_decode_rules),
    /* the MX quantizer and worked blocks */
    cmocka_unit_test(test_quantizer_model_sweep),
    cmocka_unit_test(test_quantizer_edges),
    cmocka_unit_test(test_worked_blocks_plena),
    cmocka_unit_test(test_block_scale_edges),
    cmocka_unit_test(test_zero_block_row),
    cmocka_unit_test(test_worked_blocks_ocp),
    /* the format tables */
    cmocka_unit_test(test_format_traits),
    cmocka_unit_test(test_mx_mode_table),
    cmocka_unit_test(test_mx_lut_all_pairs),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
