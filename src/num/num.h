/* Numeric formats of PLENA (docs/numerics.md).
 * Scalar *_ref functions define correct; row helpers are tested against them.
 * Rounding: f32->BF16 is RNE with NaN -> 0x7FC0. e8m0 byte 0 decodes to 0.0
 * (unlike ggml's 2^-127). All arithmetic is binary32 with -ffp-contract=off. */
#ifndef PLENA_NUM_NUM_H
#define PLENA_NUM_NUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The f32 bit helpers and BF16 conversions are inline definitions (C11
 * 6.7.4): the reference model and the generator call them per element in
 * their hottest loops, where a call per element cost more than the
 * rounding. num.c holds their one external definition each (the library's
 * symbols). */

/* ---- f32 bit helpers ---- */
inline uint32_t plena_num_f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

inline float plena_num_f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* ---- BF16 (docs/numerics.md "BF16") ---- */
inline uint16_t plena_num_bf16_from_f32(float x)
{
    uint32_t b = plena_num_f32_bits(x);
    /* Every NaN, whatever its sign and payload, becomes the one quiet NaN. */
    if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0) return 0x7FC0;
    /* RNE on the upper half: add 0x7FFF plus the lowest kept bit. Unsigned
     * wrap-around cannot happen for non-NaN inputs (max 0xFF800000 + 0x8000). */
    uint32_t r = b + 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(r >> 16);
}

inline float plena_num_bf16_to_f32(uint16_t h)
{
    return plena_num_f32_from_bits((uint32_t)h << 16);
}

/* bf16(x) as a float: round x through BF16 and back. */
inline float plena_num_round_bf16(float x)
{
    return plena_num_bf16_to_f32(plena_num_bf16_from_f32(x));
}

/* ---- IEEE fp16 (docs/numerics.md "FP16") ---- */
float plena_num_fp16_to_f32(uint16_t h);
uint16_t plena_num_fp16_from_f32(float x); /* RNE, subnormals, >= 65520 -> Inf, NaN -> 0x7E00 */

/* exp32(x) = (float)exp((double)x): the one exponential plena uses
 * (emulator V_EXP_V/S_EXP_FP/V_TOPK and the reference model). */
float plena_expf(float x);
/* floor(log2(t)) for finite t > 0, read exactly from the binary exponent. */
int plena_num_floor_log2(float t);

/* ---- PLENA-e4m3 element and e8m0 scale (docs/numerics.md "PLENA e4m3") ---- */
float plena_num_e4m3_decode_ref(uint8_t code);
float plena_num_e8m0_decode_ref(uint8_t b); /* 0 -> 0.0, 255 -> +Inf */
/* Element quantizer Q(y) (docs/numerics.md "Element quantizer"). */
uint8_t plena_num_e4m3_quantize_ref(float y);

/* ---- OCP MXFP8 (docs/numerics.md "OCP mode") ---- */
float plena_num_ocp_e4m3fn_decode_ref(uint8_t code);
float plena_num_ocp_e8m0_decode_ref(uint8_t b); /* 0 -> 2^-127, 255 -> NaN */

/* MX modes (formats.def PLENA_MX_MODE rows, in settings value order). */
enum plena_mx_mode {
#define PLENA_MX_MODE(id, name, elem, scale) PLENA_MX_##id,
#include "../num/formats.def"
#undef PLENA_MX_MODE
    PLENA_MX_MODE_COUNT
};

/* MX block decode (docs/numerics.md "MX decode"): value = fl32(elem(code) * scale(b)). */
float plena_num_mx_decode(enum plena_mx_mode mode, uint8_t code, uint8_t scale);

/* Encode one block of n values (n = block size).
 * device encoder (H_STORE_V) and host encoder (HBM image writer: no all-zero
 * special case, zero block scale 0x61) of docs/numerics.md "MX encoders".
 * OCP mode follows docs/numerics.md "OCP mode" (host and device identical). */
void plena_num_mx_encode_block_device(enum plena_mx_mode mode, const float *x, size_t n,
                                      uint8_t *codes, uint8_t *scale);
void plena_num_mx_encode_block_host(enum plena_mx_mode mode, const float *x, size_t n,
                                    uint8_t *codes, uint8_t *scale);

/* Row helpers (tested against the scalar refs). */
void plena_num_bf16_row_from_f32(const float *x, uint16_t *out, size_t n);
void plena_num_bf16_row_to_f32(const uint16_t *h, float *out, size_t n);

/* MX rows: n elements, block-size blocks (the last one may be short), codes[n]
 * and scales[ceil(n / block)]; element i uses scales[i / block]. */
enum plena_mx_encoder { PLENA_MX_DEVICE = 0, PLENA_MX_HOST = 1 };
void plena_num_mx_encode_row(enum plena_mx_mode mode, enum plena_mx_encoder enc, const float *x,
                             size_t n, size_t block, uint8_t *codes, uint8_t *scales);
void plena_num_mx_decode_row(enum plena_mx_mode mode, const uint8_t *codes, const uint8_t *scales,
                             size_t n, size_t block, float *out);

/* Decode tables of one MX mode: the f32 value of every element code and of
 * every scale byte, taken from the reference decoders. A table decode is the
 * same single multiplication of the same two operands as
 * plena_num_mx_decode, so it is bit-identical (test_num checks all 65536
 * pairs of both modes); it just skips the per-element decoding work. */
struct plena_mx_lut {
    float code[256];
    float scale[256];
    /* the element codes as bit fields: codes of exponent field 1..14 are
     * (1 + m/8) 2^(e-7), exponent 0 is m * sub; arith = 1 when that matches
     * code[] for every code outside exponent 15 (checked at init), which lets
     * a vector decode build the values instead of gathering them */
    float sub;
    int arith;
};
void plena_num_mx_lut_init(struct plena_mx_lut *lut, enum plena_mx_mode mode);
/* plena_num_mx_decode_row through lut. */
void plena_num_mx_decode_row_lut(const struct plena_mx_lut *lut, const uint8_t *codes,
                                 const uint8_t *scales, size_t n, size_t block, float *out);

/* ---- traits of the 8-bit code formats and MX modes (formats.def) ---- */
enum plena_fmt {
#define PLENA_NUM_FMT(id, name, dec, max_code, max_val) PLENA_FMT_##id,
#include "../num/formats.def"
#undef PLENA_NUM_FMT
    PLENA_FMT_COUNT
};
struct plena_num_fmt_info {
    const char *name;
    float (*decode_ref)(uint8_t code);
    uint8_t max_code; /* largest finite positive code */
    float max_finite;
};
/* NULL for an out-of-range fmt. */
const struct plena_num_fmt_info *plena_num_fmt_info(enum plena_fmt fmt);
/* All 256 decodes of fmt into table[] (for fast paths); 0 on success. */
int plena_num_fmt_decode_table(enum plena_fmt fmt, float table[256]);

struct plena_num_mx_mode_info {
    const char *name; /* the settings MX_MODE value */
    enum plena_fmt element, scale;
};
/* NULL for an out-of-range mode. */
const struct plena_num_mx_mode_info *plena_num_mx_mode_info(enum plena_mx_mode mode);

#endif
