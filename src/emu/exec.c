/* Instruction semantics of the functional emulator: one switch on enum
 * plena_op (no default, so -Wswitch flags a missing opcode), with the rules of
 * docs/machine.md and the accumulation order of docs/numerics.md
 * "Matrix accumulation order". Every instruction validates all addresses
 * before its first write (precise traps).
 * Timing is not computed here: an event record goes to the observer.
 * Speed: BF16 rows convert inline, matrix kernels keep each output's chain in
 * a register lane (generic GCC vectors, AVX2 or AVX-512F chosen at run time),
 * BLEN 4 M_MMs on AVX2 and AVX-512F hosts are computed in deferred groups
 * from a cache of decoded X blocks (op_mm_deferred, mm_flush, xq_get; mm44_*
 * AVX-512F kernels, mm42_* AVX2 twins), and every fast path
 * has a scalar reference twin selected by e->ref_paths, which
 * test_emu_perfpaths compares bit for bit. */
#include "emu/emu_internal.h"

#include "common/alloc.h"
#include "common/cpu.h"
#include "num/num.h"

#include <math.h>
#include <stdarg.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EMU_X86 1
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T_OOM (-1) /* helper result: host out of memory (not a trap) */

static int trapf(struct plena_emu *e, enum plena_trap_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int trapf(struct plena_emu *e, enum plena_trap_kind k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->trap.detail, sizeof e->trap.detail, fmt, ap);
    va_end(ap);
    return (int)k;
}

/* Single-value BF16 conversions, inline (same formulas as num; the perfpaths
 * test checks them against plena_num_bf16_* on every pattern). */
static inline float bf(uint16_t h)
{
    uint32_t w = (uint32_t)h << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

static inline uint16_t tobf(float x)
{
    uint32_t w;
    memcpy(&w, &x, 4);
    return emu_bf16_enc(w);
}

/* Row conversions: num's reference helpers under ref_paths, else the inline
 * vectorisable ones of emu_internal.h. */
static inline void row_in(const struct plena_emu *e, const uint16_t *h, float *out, size_t n)
{
    if (e->ref_paths)
        plena_num_bf16_row_to_f32(h, out, n);
    else
        emu_bf16_row_to_f32(h, out, n);
}

static inline void row_out(const struct plena_emu *e, const float *x, uint16_t *out, size_t n)
{
    if (e->ref_paths)
        plena_num_bf16_row_from_f32(x, out, n);
    else
        emu_bf16_row_from_f32(x, out, n);
}

/* u64 sum that saturates: every HBM address >= HBM_SIZE (<= 2^48) behaves the
 * same (reads 0, writes trap), so saturation keeps "exact, never wraps". */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t s = a + b;
    return s < a ? UINT64_MAX : s;
}

/* ------------------------------------------------------ operand checks */

/* V(a) for n consecutive rows a, a+VLEN, ... (row step `step` rows). */
static int check_vrows(struct plena_emu *e, uint64_t a, uint64_t n, uint64_t step, uint64_t *row0)
{
    uint64_t row, rem;
    if (e->vlen_shift >= 0) {
        rem = a & (e->vlen - 1);
        row = a >> e->vlen_shift;
    } else {
        rem = a % e->vlen;
        row = a / e->vlen;
    }
    if (rem)
        return trapf(e, PLENA_TRAP_VRAM_MISALIGNED,
                     "VRAM address %llu is not a multiple of VLEN %u", (unsigned long long)a,
                     e->vlen);
    uint64_t last = row + (n - 1) * step; /* n, step < 2^32 and row < 2^32: no overflow */
    if (last >= e->vram_rows) {
        /* report the first offending row */
        uint64_t bad = row;
        if (row < e->vram_rows) bad = row + ((e->vram_rows - row + step - 1) / step) * step;
        return trapf(e, PLENA_TRAP_VRAM_OUT_OF_RANGE, "VRAM row %llu >= depth %llu",
                     (unsigned long long)bad, (unsigned long long)e->vram_rows);
    }
    *row0 = row;
    return 0;
}

static int check_tile(struct plena_emu *e, uint64_t base, uint64_t n_tiles, uint64_t *tile0)
{
    uint64_t t = e->mlen2_shift >= 0 ? base >> e->mlen2_shift : base / e->mlen2;
    if (t + n_tiles - 1 >= e->tiles)
        return trapf(e, PLENA_TRAP_MRAM_OUT_OF_RANGE, "MRAM tile %llu >= %u tiles",
                     (unsigned long long)(t + n_tiles - 1), e->tiles);
    *tile0 = t;
    return 0;
}

static int check_fpreg(struct plena_emu *e, unsigned r)
{
    if (r >= 8) return trapf(e, PLENA_TRAP_BAD_OPERAND, "FP register field %u >= 8", r);
    return 0;
}

static int check_sram(struct plena_emu *e, uint64_t i, uint64_t n, uint32_t depth, const char *nm)
{
    if (i + n > depth)
        return trapf(e, PLENA_TRAP_SRAM_OUT_OF_RANGE, "%s index %llu >= depth %u", nm,
                     (unsigned long long)(i + n - 1), depth);
    return 0;
}

static inline uint64_t mod_mlen2(const struct plena_emu *e, uint64_t m)
{
    return e->mlen2_shift >= 0 ? (m & (e->mlen2 - 1)) : m % e->mlen2;
}

/* ------------------------------------------------------- matrix kernels */

void emu_dot_block_ref(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                       size_t cols, float *out)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            float s = x[i * n] * t[j];
            for (size_t r = 1; r < n; r++) {
                float p = x[i * n + r] * t[r * ts + j];
                s = s + p;
            }
            out[i * cols + j] = s;
        }
}

/* Portable fallback for any shape: the same chains as _ref, r outermost, with
 * the partial sums in `out` (two roundings per step; -ffp-contract=off forbids
 * fusing them). Used when cols is not a multiple of 4. */
static void dot_block_scalar(const float *restrict x, size_t rows, size_t n,
                             const float *restrict t, size_t ts, size_t cols, float *restrict out)
{
    for (size_t i = 0; i < rows; i++) {
        float xv = x[i * n];
        for (size_t j = 0; j < cols; j++)
            out[i * cols + j] = xv * t[j];
    }
    for (size_t r = 1; r < n; r++) {
        const float *tr = t + r * ts;
        for (size_t i = 0; i < rows; i++) {
            float xv = x[i * n + r];
            float *o = out + i * cols;
            for (size_t j = 0; j < cols; j++) {
                float p = xv * tr[j];
                o[j] = o[j] + p;
            }
        }
    }
}

/* Register-blocked kernels. Each output (i, j) is one lane of one vector
 * accumulator; a block of rb rows x nv vectors keeps all its chains in
 * registers for the whole reduction, so the r loop costs one multiply and
 * one add per vector and the rb*nv independent chains hide the add latency.
 * Lanes never mix: the arithmetic per output is exactly _ref's sequence. */
typedef float v4f __attribute__((vector_size(16)));

static inline v4f v4_ld(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void v4_st(float *p, v4f v)
{
    memcpy(p, &v, sizeof v);
}

static inline __attribute__((always_inline)) void
gen_tile(const float *restrict x, size_t n, const float *restrict t, size_t ts, size_t cols,
         float *restrict out, size_t i0, size_t j0, const int rb, const int nv)
{
    v4f acc[4][2];
    const float *xr = x + i0 * n, *tr = t + j0;
#pragma GCC unroll 4
    for (int i = 0; i < rb; i++) {
        float s = xr[(size_t)i * n];
        v4f xv = {s, s, s, s};
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[i][v] = xv * v4_ld(tr + 4 * v);
    }
    for (size_t r = 1; r < n; r++) {
        tr += ts;
        v4f tv[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            tv[v] = v4_ld(tr + 4 * v);
#pragma GCC unroll 4
        for (int i = 0; i < rb; i++) {
            float s = xr[(size_t)i * n + r];
            v4f xv = {s, s, s, s};
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++) {
                v4f p = xv * tv[v];
                acc[i][v] = acc[i][v] + p;
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < rb; i++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            v4_st(out + (i0 + (size_t)i) * cols + j0 + 4 * (size_t)v, acc[i][v]);
}

/* Calls tile (gen_tile or avx_tile) with the row count rb as a literal, so
 * every instance is specialised for its rb and the accumulators stay in
 * registers; one switch serves both kernels. */
#define TILE_RB(tile, rb, nv)                                                                      \
    do {                                                                                           \
        switch (rb) {                                                                              \
        case 1: tile(x, n, t, ts, cols, out, i0, j0, 1, nv); break;                                \
        case 2: tile(x, n, t, ts, cols, out, i0, j0, 2, nv); break;                                \
        case 3: tile(x, n, t, ts, cols, out, i0, j0, 3, nv); break;                                \
        default: tile(x, n, t, ts, cols, out, i0, j0, 4, nv); break;                               \
        }                                                                                          \
    } while (0)
/* All of out: bands of 4 rows (fewer at the end), each in tiles of two
 * vectors of vw columns and then one vector, by TILE_RB. */
#define TILE_ALL(tile, vw)                                                                         \
    for (size_t i0 = 0; i0 < rows; i0 += 4) {                                                      \
        size_t rb = rows - i0 < 4 ? rows - i0 : 4, j0 = 0;                                         \
        for (; j0 + 2 * (vw) <= cols; j0 += 2 * (vw))                                              \
            TILE_RB(tile, rb, 2);                                                                  \
        if (j0 < cols) TILE_RB(tile, rb, 1);                                                       \
    }

static void dot_block_generic(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                              size_t cols, float *out)
{
    if (cols % 4) {
        dot_block_scalar(x, rows, n, t, ts, cols, out);
        return;
    }
    TILE_ALL(gen_tile, 4);
}

#ifdef EMU_X86
/* AVX2 (mul and add as separate instructions: no FMA, exactly like _ref).
 * cols a multiple of 8: blocks of up to 4 rows x 16 columns (8 chains of 8
 * lanes). cols == 4 (BLEN 4, the default M_MM shape): two rows share one
 * vector, lanes [x_i t_0..3 | x_i+1 t_0..3], up to 4 such pairs per block. */
#define AVX2 __attribute__((target("avx2"), always_inline)) inline

static AVX2 void avx_tile(const float *restrict x, size_t n, const float *restrict t, size_t ts,
                          size_t cols, float *restrict out, size_t i0, size_t j0, const int rb,
                          const int nv)
{
    __m256 acc[4][2];
    const float *xr = x + i0 * n, *tr = t + j0;
#pragma GCC unroll 4
    for (int i = 0; i < rb; i++) {
        __m256 xv = _mm256_broadcast_ss(xr + (size_t)i * n);
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[i][v] = _mm256_mul_ps(xv, _mm256_loadu_ps(tr + 8 * v));
    }
    for (size_t r = 1; r < n; r++) {
        tr += ts;
        __m256 tv[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            tv[v] = _mm256_loadu_ps(tr + 8 * v);
#pragma GCC unroll 4
        for (int i = 0; i < rb; i++) {
            __m256 xv = _mm256_broadcast_ss(xr + (size_t)i * n + r);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[i][v] = _mm256_add_ps(acc[i][v], _mm256_mul_ps(xv, tv[v]));
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < rb; i++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            _mm256_storeu_ps(out + (i0 + (size_t)i) * cols + j0 + 8 * (size_t)v, acc[i][v]);
}

static AVX2 __m256 avx_pair_x(const float *p, size_t n)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_broadcast_ss(p)),
                                _mm_broadcast_ss(p + n), 1);
}

static AVX2 __m256 avx_dup4(const float *p)
{
    __m128 q = _mm_loadu_ps(p);
    return _mm256_insertf128_ps(_mm256_castps128_ps256(q), q, 1);
}

/* cols == 4: np pairs of rows starting at i0; out rows i0+2p, i0+2p+1 are
 * adjacent (8 floats). */
static AVX2 void avx_pairs4(const float *restrict x, size_t n, const float *restrict t, size_t ts,
                            float *restrict out, size_t i0, const int np)
{
    __m256 acc[4];
    const float *xr = x + i0 * n;
    __m256 tv = avx_dup4(t);
#pragma GCC unroll 4
    for (int p = 0; p < np; p++)
        acc[p] = _mm256_mul_ps(avx_pair_x(xr + (size_t)(2 * p) * n, n), tv);
    for (size_t r = 1; r < n; r++) {
        tv = avx_dup4(t + r * ts);
#pragma GCC unroll 4
        for (int p = 0; p < np; p++)
            acc[p] = _mm256_add_ps(acc[p],
                                   _mm256_mul_ps(avx_pair_x(xr + (size_t)(2 * p) * n + r, n), tv));
    }
#pragma GCC unroll 4
    for (int p = 0; p < np; p++)
        _mm256_storeu_ps(out + (i0 + 2 * (size_t)p) * 4, acc[p]);
}

__attribute__((target("avx2"))) static void dot_block_avx2(const float *x, size_t rows, size_t n,
                                                           const float *t, size_t ts, size_t cols,
                                                           float *out)
{
    if (cols == 4) {
        size_t i0 = 0;
        for (; i0 + 8 <= rows; i0 += 8)
            avx_pairs4(x, n, t, ts, out, i0, 4);
        switch ((rows - i0) / 2) {
        case 3: avx_pairs4(x, n, t, ts, out, i0, 3); break;
        case 2: avx_pairs4(x, n, t, ts, out, i0, 2); break;
        case 1: avx_pairs4(x, n, t, ts, out, i0, 1); break;
        default: break;
        }
        i0 += (rows - i0) & ~(size_t)1;
        if (i0 < rows) {
            size_t j0 = 0;
            gen_tile(x, n, t, ts, cols, out, i0, j0, 1, 1);
        }
        return;
    }
    if (cols % 8) {
        dot_block_generic(x, rows, n, t, ts, cols, out);
        return;
    }
    TILE_ALL(avx_tile, 8);
}

/* AVX-512F, cols == 4 and rows a multiple of 4 (BLEN 4 M_MM): the 16 chains
 * of a 4x4 block are the 16 lanes of one zmm, lane 4i+j = x_i[r] * t[r][j].
 * Per r: t[r][0..3] is broadcast to the four 128-bit lanes, and x is taken
 * four r at a time as q = {x0[r..r+3] | x1[r..r+3] | x2[r..r+3] | x3[r..r+3]},
 * from which vpermps picks {x0[r+k] x4, x1[r+k] x4, ...}. Multiply then add
 * (no FMA), r increasing, step 0 a bare product: exactly _ref per lane. An
 * M_MM is bound by the latency of its MLEN-1 dependent adds whatever the
 * width; one zmm (vs two ymm pairs) just cuts the uops around that chain. */
#define AVX512 __attribute__((target("avx512f"), always_inline)) inline

static AVX512 __m512 x4_quads(const float *x, size_t n, size_t r)
{
    __m512 q = _mm512_castps128_ps512(_mm_loadu_ps(x + r));
    q = _mm512_insertf32x4(q, _mm_loadu_ps(x + n + r), 1);
    q = _mm512_insertf32x4(q, _mm_loadu_ps(x + 2 * n + r), 2);
    return _mm512_insertf32x4(q, _mm_loadu_ps(x + 3 * n + r), 3);
}

static AVX512 __m512 x4_single(const float *x, size_t n, size_t r)
{
    __m512 q = _mm512_castps128_ps512(_mm_set1_ps(x[r]));
    q = _mm512_insertf32x4(q, _mm_set1_ps(x[n + r]), 1);
    q = _mm512_insertf32x4(q, _mm_set1_ps(x[2 * n + r]), 2);
    return _mm512_insertf32x4(q, _mm_set1_ps(x[3 * n + r]), 3);
}

static AVX512 __m512 t4_bcast(const float *p)
{
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
}

/* The 4x4 block of rows x[0..3]: returns the 16 chain results. */
static AVX512 __m512 avx512_block44(const float *restrict x, size_t n, const float *restrict t,
                                    size_t ts)
{
    const __m512i k0 = _mm512_set_epi32(12, 12, 12, 12, 8, 8, 8, 8, 4, 4, 4, 4, 0, 0, 0, 0);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i k1 = _mm512_add_epi32(k0, one), k2 = _mm512_add_epi32(k1, one),
                  k3 = _mm512_add_epi32(k2, one);
    __m512 acc;
    size_t r = 0;
    if (n >= 4) {
        __m512 q = x4_quads(x, n, 0);
        acc = _mm512_mul_ps(_mm512_permutexvar_ps(k0, q), t4_bcast(t));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_permutexvar_ps(k1, q), t4_bcast(t + ts)));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_permutexvar_ps(k2, q), t4_bcast(t + 2 * ts)));
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_permutexvar_ps(k3, q), t4_bcast(t + 3 * ts)));
        for (r = 4; r + 4 <= n; r += 4) {
            const float *tr = t + r * ts;
            q = x4_quads(x, n, r);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_permutexvar_ps(k0, q), t4_bcast(tr)));
            acc =
                _mm512_add_ps(acc, _mm512_mul_ps(_mm512_permutexvar_ps(k1, q), t4_bcast(tr + ts)));
            acc = _mm512_add_ps(acc,
                                _mm512_mul_ps(_mm512_permutexvar_ps(k2, q), t4_bcast(tr + 2 * ts)));
            acc = _mm512_add_ps(acc,
                                _mm512_mul_ps(_mm512_permutexvar_ps(k3, q), t4_bcast(tr + 3 * ts)));
        }
    } else {
        acc = _mm512_mul_ps(x4_single(x, n, 0), t4_bcast(t));
        r = 1;
    }
    for (; r < n; r++)
        acc = _mm512_add_ps(acc, _mm512_mul_ps(x4_single(x, n, r), t4_bcast(t + r * ts)));
    return acc;
}

__attribute__((target("avx512f"))) static void dot_block_avx512(const float *x, size_t rows,
                                                                size_t n, const float *t, size_t ts,
                                                                size_t cols, float *out)
{
    if (cols != 4 || rows % 4 || n == 0) {
        dot_block_avx2(x, rows, n, t, ts, cols, out);
        return;
    }
    for (size_t i0 = 0; i0 < rows; i0 += 4)
        _mm512_storeu_ps(out + i0 * 4, avx512_block44(x + i0 * n, n, t, ts));
}

/* 4x4 transpose of 128-bit lanes: lane block b of out[k] = lane block k of
 * a[b]. Moves whole floats, no arithmetic. */
static AVX512 void x4_transpose128(const __m512 a[4], __m512 out[4])
{
    __m512 u0 = _mm512_shuffle_f32x4(a[0], a[1], 0x44);
    __m512 u1 = _mm512_shuffle_f32x4(a[0], a[1], 0xEE);
    __m512 u2 = _mm512_shuffle_f32x4(a[2], a[3], 0x44);
    __m512 u3 = _mm512_shuffle_f32x4(a[2], a[3], 0xEE);
    out[0] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    out[1] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    out[2] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    out[3] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
}

/* Fills an X-quad cache entry from the four BF16 rows x[0..3] (n a multiple
 * of 16): quad r/4 has lane 4i+s = x_i[r+s], decoded as load_rows does
 * (bits << 16, docs/numerics.md "BF16"). Per 16 r: the four rows' 16-element
 * runs, then a 4x4 transpose of their 128-bit lanes. */
__attribute__((target("avx512f"))) static void mm44_fill_quads(const uint16_t *const x[4], size_t n,
                                                               float *q)
{
    for (size_t r0 = 0; r0 < n; r0 += 16) {
        __m512 a[4], o[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            a[i] = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x[i] + r0))), 16));
        x4_transpose128(a, o);
        float *d = q + r0 * 4;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            _mm512_store_ps(d + 16 * k, o[k]);
    }
}

/* Product of step r + s for group member k: lane 4i+j = x_i[r+s] *
 * t[r+s][j], x_i[r+s] being element s of 128-bit lane i of quad q[k] (an
 * in-lane broadcast, cheaper than a cross-lane permute). */
#define MM44_PROD(k, s) _mm512_mul_ps(_mm512_permute_ps(q[k], (s)*0x55), t4_bcast(t[k] + (s)*ts))

/* The step schedule of mm44_group and mm42_group (step 0 done by the
 * caller): steps 1..3 of the first quad, then per further quad r = 4, 8, ...
 * next4(r) moves the operands on and steps 0..3 follow. */
#define MM_GROUP_STEPS(step, next4)                                                                \
    do {                                                                                           \
        step(1);                                                                                   \
        step(2);                                                                                   \
        step(3);                                                                                   \
        _Pragma("GCC unroll 1") for (size_t r = 4; r < n; r += 4)                                  \
        {                                                                                          \
            next4(r);                                                                              \
            step(0);                                                                               \
            step(1);                                                                               \
            step(2);                                                                               \
            step(3);                                                                               \
        }                                                                                          \
    } while (0)

/* The K pending M_MMs of p computed together: K independent sets of 16
 * chains, interleaved step by step so the core overlaps their add latencies
 * (one M_MM alone waits on 63 dependent adds). Per chain the arithmetic is
 * avx512_block44's (product rounded, added in increasing r, step 0 a bare
 * product), so each acc[k] is exactly _ref's. n is a multiple of 4. */
static AVX512 void mm44_group(const struct emu_mm_pending *p, const int K, size_t n, size_t ts,
                              __m512 acc[EMU_MM_BATCH])
{
    __m512 q[EMU_MM_BATCH];
    const float *t[EMU_MM_BATCH];
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        t[k] = p[k].t;
        q[k] = _mm512_load_ps(p[k].q);
        acc[k] = MM44_PROD(k, 0); /* step 0: the bare product, as the reference order has it */
    }
#define MM44_STEP(s)                                                                               \
    do {                                                                                           \
        _Pragma("GCC unroll 4") for (int k = 0; k < K; k++) acc[k] =                               \
            _mm512_add_ps(acc[k], MM44_PROD(k, s));                                                \
    } while (0)
#define MM44_NEXT4(r)                                                                              \
    _Pragma("GCC unroll 4") for (int k = 0; k < K; k++)                                            \
    {                                                                                              \
        t[k] += 4 * ts;                                                                            \
        q[k] = _mm512_load_ps(p[k].q + (r)*4);                                                     \
    }
    MM_GROUP_STEPS(MM44_STEP, MM44_NEXT4);
#undef MM44_NEXT4
#undef MM44_STEP
}

/* m_acc += s_k for the pending M_MMs in issue order: the same single rounding
 * per M_MM, in the same order, as executing them one by one. */
static AVX512 void mm44_apply(float *m_acc, const int K, const __m512 acc[EMU_MM_BATCH])
{
    __m512 m = _mm512_loadu_ps(m_acc);
#pragma GCC unroll 4
    for (int k = 0; k < K; k++)
        m = _mm512_add_ps(m, acc[k]);
    _mm512_storeu_ps(m_acc, m);
}

/* A full group that reads one X block and four adjacent column blocks of one
 * tile (t[k] = t[0] + 4k; since every column start is below MLEN, this also
 * means one tile and columns c..c+15): a GEMM that sweeps the columns of a
 * tile with the same activations. */
static inline int mm44_shared_x(const struct emu_mm_pending *p, uint32_t k_pend)
{
    if (k_pend != 4) return 0;
    int same = 1;
    for (int k = 1; k < 4; k++)
        same &= p[k].q == p[0].q && p[k].t == p[0].t + 4 * k;
    return same;
}

/* That group as one 4 x 16 register tile: acc[i] lane m = output (i, m) of
 * columns c..c+15, so per step r one T row segment (16 contiguous floats)
 * is loaded and each x_i[r] is a scalar broadcast from the quads (element
 * x_i[r] sits at quad r/4, lane 4i + r%4). No permute per chain-step, which
 * is what bounds mm44_group. Per lane the arithmetic is _ref's: product
 * rounded, added in increasing r, step 0 a bare product; the transpose at
 * the end only moves floats, giving acc[k] lane 4i+j = member k's (i, j). */
static AVX512 void mm44_wide(const float *q, const float *t, size_t n, size_t ts,
                             __m512 acc[EMU_MM_BATCH])
{
    __m512 a[4];
    __m512 tr = _mm512_loadu_ps(t);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        a[i] = _mm512_mul_ps(_mm512_set1_ps(q[4 * i]), tr);
#pragma GCC unroll 1
    for (size_t r = 1; r < n; r++) {
        tr = _mm512_loadu_ps(t + r * ts);
        const float *qr = q + (r & ~(size_t)3) * 4 + (r & 3);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            a[i] = _mm512_add_ps(a[i], _mm512_mul_ps(_mm512_set1_ps(qr[4 * i]), tr));
    }
    x4_transpose128(a, acc);
}

/* The body of mm44_flush_avx512 and mm44_flush_avx2 (`acc` declared by the
 * caller): the shared-X group as one wide tile, else the per-member kernel,
 * K a literal in each case, so each group unrolls into registers. */
#define MM_FLUSH_CASE(group, apply, K)                                                             \
    case K:                                                                                        \
        group(p, K, n, n, acc);                                                                    \
        apply(e->m_acc, K, acc);                                                                   \
        break
#define MM_FLUSH_BODY(wide, group, apply)                                                          \
    const struct emu_mm_pending *p = e->mm_pend;                                                   \
    size_t n = e->mlen;                                                                            \
    if (mm44_shared_x(p, e->n_mm_pend)) {                                                          \
        wide(p[0].q, p[0].t, n, n, acc);                                                           \
        apply(e->m_acc, 4, acc);                                                                   \
        e->mm_wide_groups++;                                                                       \
        return;                                                                                    \
    }                                                                                              \
    switch (e->n_mm_pend) {                                                                        \
        MM_FLUSH_CASE(group, apply, 1);                                                            \
        MM_FLUSH_CASE(group, apply, 2);                                                            \
        MM_FLUSH_CASE(group, apply, 3);                                                            \
        MM_FLUSH_CASE(group, apply, 4);                                                            \
    default: break;                                                                                \
    }

__attribute__((target("avx512f"))) static void mm44_flush_avx512(struct plena_emu *e)
{
    __m512 acc[EMU_MM_BATCH];
    MM_FLUSH_BODY(mm44_wide, mm44_group, mm44_apply)
}
_Static_assert(EMU_MM_BATCH == 4, "MM_FLUSH_BODY has one case per group size");
/* M_MM at BLEN 4: the block straight into m_acc (acc = acc + s per lane, the
 * same single rounding as the scalar accumulate loop in op_mm). */
__attribute__((target("avx512f"))) static void
mm44_acc_avx512(const float *x, size_t n, const float *t, size_t ts, float *m_acc)
{
    __m512 s = avx512_block44(x, n, t, ts);
    _mm512_storeu_ps(m_acc, _mm512_add_ps(_mm512_loadu_ps(m_acc), s));
}

/* ------------------------------- deferred M_MM groups on AVX2 (no AVX-512F) */

/* AVX2 twin of mm44_fill_quads: the same quads (lane 4i+s = x_i[r+s], BF16
 * bits << 16), written 128 bits at a time. n is a multiple of 16. */
__attribute__((target("avx2"))) static void mm42_fill_quads(const uint16_t *const x[4], size_t n,
                                                            float *q)
{
    for (size_t r0 = 0; r0 < n; r0 += 8)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x[i] + r0))), 16));
            _mm_store_ps(q + r0 * 4 + 4 * (size_t)i, _mm256_castps256_ps128(a));
            _mm_store_ps(q + (r0 + 4) * 4 + 4 * (size_t)i, _mm256_extractf128_ps(a, 1));
        }
}

/* Product of step r + s for group member k, half h (rows 2h and 2h+1): lane
 * 4i'+j = x_{2h+i'}[r+s] * t[r+s][j]. The x factor is an in-lane broadcast of
 * element s of the quad's 128-bit lanes (vpermilps, straight from the cache
 * entry), the t factor T row r+s's four columns in both 128-bit lanes. */
#define MM42_PROD(k, h, s)                                                                         \
    _mm256_mul_ps(_mm256_permute_ps(_mm256_load_ps(qr[k] + 8 * (h)), (s)*0x55), tb)

/* mm44_group on 256-bit registers: member k's 16 chains are acc[k][0]
 * (outputs 0..7, rows 0 and 1) and acc[k][1] (outputs 8..15), interleaved
 * with the other members' step by step. Per chain: product rounded, added in
 * increasing r, step 0 the bare product; exactly _ref's. n a multiple of 4. */
/* An empty asm that takes both accumulators of a member as operands and
 * clobbers memory: the adds before it complete first and no later load moves
 * above it. Without it GCC hoists a whole step's loads and permutes of all
 * members to the top of the loop body and spills the accumulators (16 ymm
 * registers); the out-of-order core does the overlapping instead. Emits no
 * instruction. */
#define MM42_PIN(a) __asm__ volatile("" : "+x"((a)[0]), "+x"((a)[1])::"memory")

static AVX2 void mm42_group(const struct emu_mm_pending *p, const int K, size_t n, size_t ts,
                            __m256 acc[EMU_MM_BATCH][2])
{
    const float *t[EMU_MM_BATCH], *qr[EMU_MM_BATCH];
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        t[k] = p[k].t;
        qr[k] = p[k].q;
        __m256 tb = _mm256_broadcast_ps((const __m128 *)t[k]);
        acc[k][0] = MM42_PROD(k, 0, 0); /* step 0: the bare product */
        acc[k][1] = MM42_PROD(k, 1, 0);
    }
#define MM42_STEP(s)                                                                               \
    do {                                                                                           \
        _Pragma("GCC unroll 4") for (int k = 0; k < K; k++)                                        \
        {                                                                                          \
            __m256 tb = _mm256_broadcast_ps((const __m128 *)(t[k] + (s)*ts));                      \
            acc[k][0] = _mm256_add_ps(acc[k][0], MM42_PROD(k, 0, s));                              \
            acc[k][1] = _mm256_add_ps(acc[k][1], MM42_PROD(k, 1, s));                              \
            MM42_PIN(acc[k]);                                                                      \
        }                                                                                          \
    } while (0)
#define MM42_NEXT4(r)                                                                              \
    _Pragma("GCC unroll 4") for (int k = 0; k < K; k++)                                            \
    {                                                                                              \
        t[k] += 4 * ts;                                                                            \
        qr[k] += 16;                                                                               \
    }
    MM_GROUP_STEPS(MM42_STEP, MM42_NEXT4);
#undef MM42_NEXT4
#undef MM42_STEP
}
#undef MM42_PROD

/* mm44_apply on 256-bit registers: m_acc += s_k in issue order. */
static AVX2 void mm42_apply(float *m_acc, const int K, const __m256 acc[EMU_MM_BATCH][2])
{
    __m256 m0 = _mm256_loadu_ps(m_acc), m1 = _mm256_loadu_ps(m_acc + 8);
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        m0 = _mm256_add_ps(m0, acc[k][0]);
        m1 = _mm256_add_ps(m1, acc[k][1]);
    }
    _mm256_storeu_ps(m_acc, m0);
    _mm256_storeu_ps(m_acc + 8, m1);
}

/* mm44_wide on 256-bit registers: the shared-X group as one 4 x 16 tile in
 * eight accumulators, a[i][h] lane m = output (i, c + 8h + m). Per step r:
 * T row r's 16 columns (two loads) and four scalar broadcasts x_i[r] from the
 * quads (quad r/4, lane 4i + r%4); 8 multiplies and 8 adds, no permute. Per
 * lane _ref's arithmetic: product rounded, added in increasing r, step 0 the
 * bare product. The 128-bit lane moves at the end only move floats: member
 * k (columns 4k..4k+3) is lane k%2 of a[i][k/2], so acc[k][0] = {a[0] | a[1]}
 * and acc[k][1] = {a[2] | a[3]} at that lane, mm42_group's layout. */
static AVX2 void mm42_wide(const float *q, const float *t, size_t n, size_t ts,
                           __m256 acc[EMU_MM_BATCH][2])
{
    __m256 a[4][2];
    __m256 t0 = _mm256_loadu_ps(t), t1 = _mm256_loadu_ps(t + 8);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m256 x = _mm256_broadcast_ss(q + 4 * i);
        a[i][0] = _mm256_mul_ps(x, t0); /* step 0: the bare product */
        a[i][1] = _mm256_mul_ps(x, t1);
    }
#pragma GCC unroll 1
    for (size_t r = 1; r < n; r++) {
        const float *tr = t + r * ts, *qr = q + (r & ~(size_t)3) * 4 + (r & 3);
        t0 = _mm256_loadu_ps(tr);
        t1 = _mm256_loadu_ps(tr + 8);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256 x = _mm256_broadcast_ss(qr + 4 * i);
            a[i][0] = _mm256_add_ps(a[i][0], _mm256_mul_ps(x, t0));
            a[i][1] = _mm256_add_ps(a[i][1], _mm256_mul_ps(x, t1));
        }
    }
    for (int h = 0; h < 2; h++) {
        acc[2 * h][0] = _mm256_permute2f128_ps(a[0][h], a[1][h], 0x20);
        acc[2 * h + 1][0] = _mm256_permute2f128_ps(a[0][h], a[1][h], 0x31);
        acc[2 * h][1] = _mm256_permute2f128_ps(a[2][h], a[3][h], 0x20);
        acc[2 * h + 1][1] = _mm256_permute2f128_ps(a[2][h], a[3][h], 0x31);
    }
}

__attribute__((target("avx2"))) static void mm44_flush_avx2(struct plena_emu *e)
{
    __m256 acc[EMU_MM_BATCH][2];
    MM_FLUSH_BODY(mm42_wide, mm42_group, mm42_apply)
}
#endif

int emu_host_isa(void)
{
#ifdef EMU_X86
    if (plena_cpu_has_avx512f() && plena_cpu_has_avx2()) return EMU_ISA_AVX512;
    if (plena_cpu_has_avx2()) return EMU_ISA_AVX2;
#endif
    return EMU_ISA_GENERIC;
}

void emu_dot_block_isa(int isa, const float *x, size_t rows, size_t n, const float *t, size_t ts,
                       size_t cols, float *out)
{
#ifdef EMU_X86
    int host = emu_host_isa();
    if (isa == EMU_ISA_AVX512 && host >= EMU_ISA_AVX512) {
        dot_block_avx512(x, rows, n, t, ts, cols, out);
        return;
    }
    if (isa >= EMU_ISA_AVX2 && host >= EMU_ISA_AVX2) {
        dot_block_avx2(x, rows, n, t, ts, cols, out);
        return;
    }
#endif
    (void)isa;
    dot_block_generic(x, rows, n, t, ts, cols, out);
}

void emu_dot_block_fast(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                        size_t cols, float *out)
{
    emu_dot_block_isa(emu_host_isa(), x, rows, n, t, ts, cols, out);
}

/* The kernel an instruction uses: reference under ref_paths, else the host's
 * best (kernel_isa was checked against the host in plena_emu_new). */
static inline void dot(const struct plena_emu *e, const float *x, size_t rows, size_t n,
                       const float *t, size_t ts, size_t cols, float *out)
{
    if (e->ref_paths) {
        emu_dot_block_ref(x, rows, n, t, ts, cols, out);
        return;
    }
#ifdef EMU_X86
    if (e->kernel_isa == EMU_ISA_AVX512) {
        dot_block_avx512(x, rows, n, t, ts, cols, out);
        return;
    }
    if (e->kernel_isa == EMU_ISA_AVX2) {
        dot_block_avx2(x, rows, n, t, ts, cols, out);
        return;
    }
#endif
    dot_block_generic(x, rows, n, t, ts, cols, out);
}

/* Loads `n` VRAM rows starting at row0 (row step `step`) as f32 into dst. */
static void load_rows(struct plena_emu *e, uint64_t row0, uint64_t n, uint64_t step, float *dst)
{
    for (uint64_t i = 0; i < n; i++)
        row_in(e, emu_vram_row_ro(e, row0 + i * step), dst + i * e->vlen, e->vlen);
}

/* Computes the deferred M_MMs (see struct emu_mm_pending) into m_acc. */
static void mm_flush(struct plena_emu *e)
{
#ifdef EMU_X86
    /* pending M_MMs exist only on the hosts mm_deferred allows; an empty
     * flush must not enter a target function, whose unoptimised code uses
     * its registers before it looks at the count (SIGILL elsewhere) */
    if (e->n_mm_pend && e->kernel_isa == EMU_ISA_AVX512)
        mm44_flush_avx512(e);
    else if (e->n_mm_pend)
        mm44_flush_avx2(e);
#endif
    e->n_mm_pend = 0;
}

/* ------------------------------------------------------ X-quad cache */

void emu_xq_reset(struct plena_emu *e)
{
    for (unsigned i = 0; i < EMU_XQ_ENTRIES; i++)
        e->xq[i].valid = 0;
    e->xq_lo = e->xq_span = 0;
}

void emu_xq_drop_row(struct plena_emu *e, uint64_t row)
{
    int any = 0;
    for (unsigned i = 0; i < EMU_XQ_ENTRIES; i++) {
        struct emu_xq_entry *x = &e->xq[i];
        if (x->valid && row - x->row0 < 4) x->valid = 0;
        any |= x->valid;
    }
    if (!any) e->xq_lo = e->xq_span = 0;
}

#ifdef EMU_X86
/* The quads of the X block at VRAM row row0, decoded on a miss. */
static const float *xq_get(struct plena_emu *e, uint64_t row0)
{
    for (unsigned i = 0; i < EMU_XQ_ENTRIES; i++)
        if (e->xq[i].valid && e->xq[i].row0 == row0) {
            e->xq_mru = i;
            return e->xq[i].q;
        }
    /* Round-robin victim, passing over the entries that pending M_MMs read
     * (at most EMU_MM_BATCH - 1 of the EMU_XQ_ENTRIES), so a miss need not
     * flush: a GEMM whose X blocks outnumber the entries still computes its
     * M_MMs in groups. */
    for (unsigned tries = 0; tries < EMU_XQ_ENTRIES; tries++) {
        const float *vq = e->xq[e->xq_victim].q;
        int used = 0;
        for (uint32_t k = 0; k < e->n_mm_pend; k++)
            used |= e->mm_pend[k].q == vq;
        if (!used) break;
        e->xq_victim = (e->xq_victim + 1) % EMU_XQ_ENTRIES;
    }
    struct emu_xq_entry *x = &e->xq[e->xq_victim];
    e->xq_mru = e->xq_victim;
    e->xq_victim = (e->xq_victim + 1) % EMU_XQ_ENTRIES;
    const uint16_t *rows[4];
    for (int i = 0; i < 4; i++)
        rows[i] = emu_vram_row_ro(e, row0 + (uint64_t)i);
    if (e->kernel_isa == EMU_ISA_AVX512)
        mm44_fill_quads(rows, e->mlen, x->q);
    else
        mm42_fill_quads(rows, e->mlen, x->q);
    x->row0 = row0;
    x->valid = 1;
    /* widen the covered range (it only shrinks when the cache empties) */
    uint64_t lo = e->xq_span ? e->xq_lo : row0, hi = e->xq_span ? e->xq_lo + e->xq_span : row0 + 4;
    if (row0 < lo) lo = row0;
    if (row0 + 4 > hi) hi = row0 + 4;
    e->xq_lo = lo;
    e->xq_span = hi - lo;
    return x->q;
}
#endif

/* Instructions that may run while M_MMs are pending: they write neither VRAM
 * nor MRAM and do not touch m_acc, so computing the M_MMs later gives the
 * same m_acc. (Pending M_MMs hold a decoded copy of X, but read T from MRAM
 * and add into m_acc at flush.) Every other instruction flushes first; a
 * missing entry costs speed, never correctness, so the set is only what GEMM
 * loops issue between their M_MMs, derived from isa.def's READS/WRITES/FLOW
 * columns: M_MM itself (it joins the group), and every opcode that touches
 * nothing but gp registers and the loop stack and stays in its loop (integer
 * ALU ops, C_LOOP_START, C_LOOP_END; C_BREAK leaves the loop, and so the
 * GEMM, and flushes). test_emu_perfpaths checks the derived set and that
 * every member satisfies the condition above. */
#define MM_BATCH_SAFE(code, rd, wr, flow)                                                          \
    ((code) == PLENA_OP_M_MM ||                                                                    \
     (((PLENA_STATE_SET rd | PLENA_STATE_SET wr) & ~(PLENA_MASK_GP | PLENA_MASK_LOOP)) == 0 &&     \
      (PLENA_FLOW_##flow == PLENA_FLOW_SEQ || PLENA_FLOW_##flow == PLENA_FLOW_BACK)))
const uint8_t emu_mm_batch_safe[PLENA_OP_COUNT + 1] = {
#define PLENA_OP(name, code, cls, form, unit, cost, rd, wr, flow, ops, syn)                        \
    [code] = MM_BATCH_SAFE(code, rd, wr, flow),
#include "isa/isa.def"
#undef PLENA_OP
};
#undef MM_BATCH_SAFE

static int op_mm(struct plena_emu *e, const struct plena_insn *in, int transposed)
{
    uint64_t m = transposed ? e->g[in->rs2] : e->g[in->rs1];
    uint64_t v = transposed ? e->g[in->rs1] : e->g[in->rs2];
    uint64_t off = mod_mlen2(e, m), base = m - off, tile = 0, row0 = 0;
    int t;
    if ((t = check_tile(e, base, 1, &tile))) return t;
    /* shifts instead of divisions when the geometry is a power of two (always
     * in practice): M_MM is issued millions of times */
    uint64_t c = e->mlen_shift >= 0 ? off >> e->mlen_shift : off / e->mlen;
    if (off - c * e->mlen)
        return trapf(
            e, PLENA_TRAP_MATRIX_OFFSET,
            "tile offset %llu is not a multiple of MLEN %u (M_MM offsets are row-granular)",
            (unsigned long long)off, e->mlen);
    if (e->blen_shift >= 0 ? (c & (e->blen - 1)) : c % e->blen)
        return trapf(e, PLENA_TRAP_MATRIX_OFFSET, "column start %llu is not a multiple of BLEN %u",
                     (unsigned long long)c, e->blen);
    if ((t = check_vrows(e, v, e->blen, 1, &row0))) return t;
    const float *T = e->mram + tile * e->mlen2;
    const float *tp;
    size_t ts;
    if (!transposed) {
        tp = T + c;
        ts = e->mlen;
    } else { /* tbuf[r][j] = T[c+j][r] */
        for (uint32_t j = 0; j < e->blen; j++)
            for (uint32_t r = 0; r < e->mlen; r++)
                e->tbuf[(size_t)r * e->blen + j] = T[(c + j) * e->mlen + r];
        tp = e->tbuf;
        ts = e->blen;
    }
#ifdef EMU_X86
    if (e->blen == 4 && e->kernel_isa == EMU_ISA_AVX512 && !e->ref_paths) {
        load_rows(e, row0, e->blen, 1, e->xbuf);
        mm44_acc_avx512(e->xbuf, e->mlen, tp, ts, e->m_acc);
        return 0;
    }
#endif
    load_rows(e, row0, e->blen, 1, e->xbuf);
    dot(e, e->xbuf, e->blen, e->mlen, tp, ts, e->blen, e->obuf);
    for (size_t q = 0; q < (size_t)e->blen * e->blen; q++)
        e->m_acc[q] = e->m_acc[q] + e->obuf[q];
    return 0;
}

/* M_MM on the deferred path (e->mm_deferred: BLEN 4, AVX2 or AVX-512F, VLEN == MLEN
 * a power of two and a multiple of 16). The checks of op_mm written
 * with shifts and masks; any operand they reject goes to op_mm, which raises
 * the trap with its message, so both paths trap alike. */
static inline __attribute__((always_inline)) int op_mm_deferred(struct plena_emu *e,
                                                                const struct plena_insn *in)
{
#ifdef EMU_X86
    uint64_t m = e->g[in->rs1], v = e->g[in->rs2];
    uint64_t tile = m >> e->mlen2_shift, off = m & (e->mlen2 - 1), row0 = v >> e->vlen_shift;
    /* off: a multiple of MLEN whose column start off/MLEN is a multiple of 4 */
    if (tile >= e->tiles || (off & (4 * (uint64_t)e->mlen - 1)) || (v & (e->vlen - 1)) ||
        row0 + 4 > e->vram_rows)
        return op_mm(e, in, 0);
    const struct emu_xq_entry *mru = &e->xq[e->xq_mru];
    const float *q = mru->valid && mru->row0 == row0 ? mru->q : xq_get(e, row0); /* may flush */
    struct emu_mm_pending *pm = &e->mm_pend[e->n_mm_pend]; /* the slot after that flush */
    pm->q = q;
    pm->t = e->mram + tile * e->mlen2 + (off >> e->mlen_shift);
    if (++e->n_mm_pend == EMU_MM_BATCH) mm_flush(e);
    return 0;
#else
    return op_mm(e, in, 0); /* mm_deferred is never set off x86 */
#endif
}

static int op_mv(struct plena_emu *e, const struct plena_insn *in, int transposed)
{
    uint64_t m = e->g[in->rs1], v = e->g[in->rs2];
    uint64_t off = mod_mlen2(e, m), base = m - off, tile = 0, row0 = 0;
    int t;
    if (transposed && off)
        return trapf(e, PLENA_TRAP_MRAM_MISALIGNED,
                     "MRAM address %llu is not a multiple of MLEN^2 %llu", (unsigned long long)m,
                     (unsigned long long)e->mlen2);
    if ((t = check_tile(e, base, 1, &tile))) return t;
    if (!transposed && (off >= e->mlen || off % e->blen))
        return trapf(e, PLENA_TRAP_MATRIX_OFFSET,
                     "column offset %llu: expected < MLEN %u and a multiple of BLEN %u",
                     (unsigned long long)off, e->mlen, e->blen);
    if ((t = check_vrows(e, v, 1, 1, &row0))) return t;
    const float *T = e->mram + tile * e->mlen2;
    load_rows(e, row0, 1, 1, e->xbuf);
    const float *tp = T + off;
    size_t ts = e->mlen;
    if (transposed) {
        for (uint32_t j = 0; j < e->blen; j++)
            for (uint32_t r = 0; r < e->mlen; r++)
                e->tbuf[(size_t)r * e->blen + j] = T[(size_t)j * e->mlen + r];
        tp = e->tbuf;
        ts = e->blen;
    }
    dot(e, e->xbuf, 1, e->mlen, tp, ts, e->blen, e->obuf);
    for (uint32_t j = 0; j < e->blen; j++)
        e->v_acc[j] = e->v_acc[j] + e->obuf[j];
    return 0;
}

static int check_geometry(struct plena_emu *e)
{
    if ((uint64_t)e->ba * e->hlen != e->mlen)
        return trapf(e, PLENA_TRAP_GEOMETRY, "BROADCAST_AMOUNT %u x HLEN %u != MLEN %u", e->ba,
                     e->hlen, e->mlen);
    return 0;
}

/* M_BMM / M_BTMM (vec = 0: MLEN query rows) and M_BMV / M_BTMV (vec = 1). */
static int op_broadcast(struct plena_emu *e, const struct plena_insn *in, int contiguous, int vec)
{
    int t;
    if (!vec && in->rd != 0)
        return trapf(e, PLENA_TRAP_BAD_OPERAND, "rd field %u: expected 0", in->rd);
    if ((t = check_geometry(e))) return t;
    uint64_t m = vec ? (uint32_t)(e->g[in->rs1] + e->g[in->rd]) : e->g[in->rs1];
    uint64_t v = e->g[in->rs2];
    uint64_t off = mod_mlen2(e, m), base = m - off, tile = 0, row0 = 0;
    if ((t = check_tile(e, base, 1, &tile))) return t;
    if (off >= e->mlen || off % e->hlen)
        return trapf(e, PLENA_TRAP_MATRIX_OFFSET,
                     "head offset %llu: expected < MLEN %u and a multiple of HLEN %u",
                     (unsigned long long)off, e->mlen, e->hlen);
    uint64_t n_rows = vec ? 1 : e->mlen;
    if ((t = check_vrows(e, v, n_rows, 1, &row0))) return t;
    const float *T = e->mram + tile * e->mlen2;
    uint32_t H = e->hlen, B = e->ba, L = e->mlen;
    const float *tp;
    if (!contiguous) {
        tp = T + off * L; /* rows h0..h0+HLEN-1 of the tile: T[h0+h][k] */
    } else {              /* tbuf[h][k] = T[k][h0+h] */
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t k = 0; k < L; k++)
                e->tbuf[(size_t)h * L + k] = T[(size_t)k * L + off + h];
        tp = e->tbuf;
    }
    float *acc = vec ? e->hv_acc : e->hm_acc;
    for (uint64_t s = 0; s < n_rows; s++) {
        row_in(e, emu_vram_row_ro(e, row0 + s), e->row_a, L);
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t h = 0; h < H; h++)
                e->xbuf[(size_t)b * H + h] = contiguous ? e->row_a[b * H + h] : e->row_a[h * B + b];
        dot(e, e->xbuf, B, H, tp, L, L, e->obuf);
        for (uint32_t b = 0; b < B; b++) {
            float *dst = acc + ((size_t)b * n_rows + s) * L;
            const float *src = e->obuf + (size_t)b * L;
            uint32_t k = 0;
            if (!e->ref_paths) /* fixed-size chunks so gcc vectorises; same lane formula */
                for (; k + EMU_CHUNK <= L; k += EMU_CHUNK)
                    for (uint32_t q = k; q < k + EMU_CHUNK; q++) {
                        float x = 0.25f * src[q];
                        dst[q] = dst[q] + x;
                    }
            for (; k < L; k++) {
                float x = 0.25f * src[k];
                dst[k] = dst[k] + x;
            }
        }
    }
    return 0;
}

static int op_wo(struct plena_emu *e, const struct plena_insn *in, enum plena_op op)
{
    uint64_t a = (uint32_t)(e->g[in->rd] + in->imm);
    uint64_t vo = a % e->mlen, vb = a - vo, row0 = 0;
    int t;
    switch (op) {
    case PLENA_OP_M_MM_WO: {
        if (vo % e->blen)
            return trapf(e, PLENA_TRAP_MATRIX_OFFSET,
                         "output column %llu is not a multiple of BLEN %u", (unsigned long long)vo,
                         e->blen);
        uint64_t st = in->rs1 == 0 ? 1 : e->g[in->rs1];
        if ((t = check_vrows(e, vb, e->blen, st, &row0))) return t;
        for (uint32_t i = 0; i < e->blen; i++) {
            uint16_t *r = emu_vram_row_rw(e, row0 + i * st);
            if (!r) return T_OOM;
            for (uint32_t j = 0; j < e->blen; j++)
                r[vo + j] = tobf(e->m_acc[i * e->blen + j]);
        }
        memset(e->m_acc, 0, sizeof(float) * e->blen * e->blen);
        return 0;
    }
    case PLENA_OP_M_MV_WO: {
        if (vo % e->blen)
            return trapf(e, PLENA_TRAP_MATRIX_OFFSET,
                         "output column %llu is not a multiple of BLEN %u", (unsigned long long)vo,
                         e->blen);
        if ((t = check_vrows(e, vb, 1, 1, &row0))) return t;
        uint16_t *r = emu_vram_row_rw(e, row0);
        if (!r) return T_OOM;
        for (uint32_t j = 0; j < e->blen; j++)
            r[vo + j] = tobf(e->v_acc[j]);
        memset(e->v_acc, 0, sizeof(float) * e->blen);
        return 0;
    }
    default: { /* M_BMM_WO, M_BMV_WO */
        int vec = op == PLENA_OP_M_BMV_WO;
        if ((t = check_geometry(e))) return t;
        if (vo)
            return trapf(e, PLENA_TRAP_MATRIX_OFFSET, "output address %llu is not row-aligned",
                         (unsigned long long)a);
        uint64_t n = vec ? e->ba : (uint64_t)e->ba * e->mlen;
        if ((t = check_vrows(e, a, n, 1, &row0))) return t;
        float *acc = vec ? e->hv_acc : e->hm_acc;
        for (uint64_t i = 0; i < n; i++) {
            uint16_t *r = emu_vram_row_rw(e, row0 + i);
            if (!r) return T_OOM;
            row_out(e, acc + i * e->mlen, r, e->mlen);
        }
        memset(acc, 0, sizeof(float) * n * e->mlen);
        return 0;
    }
    }
}

/* --------------------------------------------------------- vector unit */

static float clamp88(float a)
{
    if (isnan(a)) return a;
    return a < -88.0f ? -88.0f : (a > 88.0f ? 88.0f : a);
}

/* Lane semantics of the element-wise vector ops over lanes [lo, hi): the
 * reference definition (docs/machine.md "Vector unit"), one plain loop per op. */
static void vec_lanes_ref(enum plena_op op, int neg, const float *a, const float *b, float f,
                          float *o, uint32_t lo, uint32_t hi)
{
    switch (op) {
    case PLENA_OP_V_ADD_VV:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = a[i] + b[i];
        break;
    case PLENA_OP_V_SUB_VV:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = a[i] - b[i];
        break;
    case PLENA_OP_V_MUL_VV:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = a[i] * b[i];
        break;
    case PLENA_OP_V_ADD_VF:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = a[i] + f;
        break;
    case PLENA_OP_V_SUB_VF:
        for (uint32_t i = lo; i < hi; i++) {
            float d = a[i] - f;
            o[i] = neg ? -d : d;
        }
        break;
    case PLENA_OP_V_MUL_VF:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = a[i] * f;
        break;
    case PLENA_OP_V_MAX_VF:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = (isnan(a[i]) || isnan(f)) ? NAN : (a[i] < f ? f : a[i]);
        break;
    case PLENA_OP_V_MIN_VF:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = (isnan(a[i]) || isnan(f)) ? NAN : (a[i] > f ? f : a[i]);
        break;
    case PLENA_OP_V_EXP_V:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = plena_expf(clamp88(a[i]));
        break;
    case PLENA_OP_V_RECI_V:
        for (uint32_t i = lo; i < hi; i++)
            o[i] = 1.0f / a[i];
        break;
    default: break;
    }
}

/* Chunked form of the same lanes: fixed EMU_CHUNK-lane inner loops that gcc
 * -O2 vectorises, the remainder through vec_lanes_ref. Results are the
 * reference's except for NaN payloads, which the BF16 write erases (every NaN
 * -> 0x7FC0): for MAX/MIN with a non-NaN f, `a < f ? f : a` already yields a
 * NaN when a is NaN (the compare is false), so the explicit isnan(a) test is
 * dropped; a NaN f makes the whole row NaN. */
#define LANE_CHUNKS(stmt)                                                                          \
    for (; i + EMU_CHUNK <= L; i += EMU_CHUNK) {                                                   \
        const float *restrict A_ = a + i, *restrict B_ = b + i;                                    \
        float *restrict O_ = o + i;                                                                \
        (void)B_;                                                                                  \
        for (size_t k = 0; k < EMU_CHUNK; k++) {                                                   \
            stmt;                                                                                  \
        }                                                                                          \
    }

static void vec_lanes_fast(enum plena_op op, int neg, const float *restrict a,
                           const float *restrict b, float f, float *restrict o, uint32_t L)
{
    uint32_t i = 0;
    switch (op) {
    case PLENA_OP_V_ADD_VV: LANE_CHUNKS(O_[k] = A_[k] + B_[k]); break;
    case PLENA_OP_V_SUB_VV: LANE_CHUNKS(O_[k] = A_[k] - B_[k]); break;
    case PLENA_OP_V_MUL_VV: LANE_CHUNKS(O_[k] = A_[k] * B_[k]); break;
    case PLENA_OP_V_ADD_VF: LANE_CHUNKS(O_[k] = A_[k] + f); break;
    case PLENA_OP_V_SUB_VF:
        if (neg)
            LANE_CHUNKS(O_[k] = -(A_[k] - f)) /* not f - a: that is +0, not -0, at a == f */
        else
            LANE_CHUNKS(O_[k] = A_[k] - f)
        break;
    case PLENA_OP_V_MUL_VF: LANE_CHUNKS(O_[k] = A_[k] * f); break;
    case PLENA_OP_V_MAX_VF:
        if (isnan(f)) break; /* whole row through the reference: all NaN */
        LANE_CHUNKS(O_[k] = A_[k] < f ? f : A_[k]);
        break;
    case PLENA_OP_V_MIN_VF:
        if (isnan(f)) break;
        LANE_CHUNKS(O_[k] = A_[k] > f ? f : A_[k]);
        break;
    case PLENA_OP_V_RECI_V: LANE_CHUNKS(O_[k] = 1.0f / A_[k]); break;
    default: break; /* V_EXP_V: a libm-free call per lane, no vector form */
    }
    vec_lanes_ref(op, neg, a, b, f, o, i, L);
}

static int op_vec(struct plena_emu *e, const struct plena_insn *in, enum plena_op op)
{
    int t, vf = 0, vv = 0;
    switch (op) {
    case PLENA_OP_V_ADD_VF:
    case PLENA_OP_V_SUB_VF:
    case PLENA_OP_V_MUL_VF:
    case PLENA_OP_V_MAX_VF:
    case PLENA_OP_V_MIN_VF: vf = 1; break;
    case PLENA_OP_V_ADD_VV:
    case PLENA_OP_V_SUB_VV:
    case PLENA_OP_V_MUL_VV: vv = 1; break;
    default: break;
    }
    if (vf && (t = check_fpreg(e, in->rs2))) return t;
    uint64_t ra = 0, rb = 0, rd = 0;
    if ((t = check_vrows(e, e->g[in->rs1], 1, 1, &ra))) return t;
    if (vv && (t = check_vrows(e, e->g[in->rs2], 1, 1, &rb))) return t;
    if ((t = check_vrows(e, e->g[in->rd], 1, 1, &rd))) return t;
    uint32_t L = e->vlen;
    float *a = e->row_a, *b = e->row_b, *o = e->row_c;
    row_in(e, emu_vram_row_ro(e, ra), a, L);
    if (vv) row_in(e, emu_vram_row_ro(e, rb), b, L);
    float f = vf ? bf(e->f[in->rs2]) : 0.0f;
    if (e->ref_paths)
        vec_lanes_ref(op, in->funct1, a, b, f, o, 0, L);
    else
        vec_lanes_fast(op, in->funct1, a, b, f, o, L);
    if (in->rs3 != 0) { /* masked: inactive heads keep a (V_EXP_V: clamp(a), deviation 6) */
        uint32_t heads = L / e->hlen;
        for (uint32_t h = 0; h < heads; h++) {
            if (h < 32 && ((e->vmask >> h) & 1u)) continue;
            for (uint32_t i = h * e->hlen; i < (h + 1) * e->hlen; i++)
                o[i] = op == PLENA_OP_V_EXP_V ? clamp88(a[i]) : a[i];
        }
    }
    uint16_t *dst = emu_vram_row_rw(e, rd);
    if (!dst) return T_OOM;
    row_out(e, o, dst, L);
    return 0;
}

static int op_shift(struct plena_emu *e, const struct plena_insn *in)
{
    uint64_t ra = 0, rd = 0;
    int t;
    if ((t = check_vrows(e, e->g[in->rs1], 1, 1, &ra))) return t;
    if ((t = check_vrows(e, e->g[in->rd], 1, 1, &rd))) return t;
    uint32_t s = e->g[in->rs2], L = e->vlen;
    row_in(e, emu_vram_row_ro(e, ra), e->row_a, L);
    for (uint32_t i = 0; i < L; i++)
        e->row_c[i] = i >= s ? e->row_a[i - s] : 0.0f;
    uint16_t *dst = emu_vram_row_rw(e, rd);
    if (!dst) return T_OOM;
    row_out(e, e->row_c, dst, L);
    return 0;
}

/* V_RED_SUM / V_RED_MAX with rd != 0 (rd == 0 is handled as a no-op by the caller). */
static int op_reduce(struct plena_emu *e, const struct plena_insn *in, int is_max)
{
    int t;
    uint64_t ra = 0;
    if ((t = check_fpreg(e, in->rd))) return t;
    if ((t = check_vrows(e, e->g[in->rs1], 1, 1, &ra))) return t;
    float *a = e->row_a;
    row_in(e, emu_vram_row_ro(e, ra), a, e->vlen);
    float acc = bf(e->f[in->rd]);
    if (!is_max) {
        float s = a[0];
        for (uint32_t i = 1; i < e->vlen; i++)
            s = s + a[i];
        e->f[in->rd] = tobf(acc + s);
        return 0;
    }
    float m = a[0];
    int any_nan = 0;
    for (uint32_t i = 0; i < e->vlen; i++) {
        if (isnan(a[i])) any_nan = 1;
        if (a[i] > m) m = a[i];
    }
    if (any_nan) return 0; /* m is NaN: F[rd] unchanged */
    if (isnan(acc) || m > acc) e->f[in->rd] = tobf(m);
    return 0;
}

/* ---------------------------------------------------------------- V_TOPK */

static int cmp_desc_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a < b) - (a > b);
}

/* Sort key of IEEE total order (ascending as unsigned), NaN lowest. */
static inline uint32_t total_key(float x)
{
    if (isnan(x)) return 0;
    uint32_t b = plena_num_f32_bits(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static int op_topk(struct plena_emu *e, const struct plena_insn *in, uint32_t *experts)
{
    uint32_t E, k;
    int t;
    switch (in->rs3) {
    case 0: E = 32, k = 4; break;
    case 1: E = 128, k = 8; break;
    case 15:
        if (!e->topk_set)
            return trapf(e, PLENA_TRAP_TOPK_UNSET, "V_TOPK policy 15 needs C_SET_TOPK_REG first");
        E = e->topk >> 8, k = e->topk & 0xFFu;
        break;
    default:
        return trapf(e, PLENA_TRAP_BAD_OPERAND, "V_TOPK policy %u: expected 0, 1 or 15", in->rs3);
    }
    uint64_t n_rows = (E + e->vlen - 1) / e->vlen, row0 = 0;
    if ((t = check_vrows(e, e->g[in->rs1], n_rows, 1, &row0))) return t;
    uint64_t wbase = e->g[in->rd], ibase = e->g[in->rs2];
    if ((t = check_sram(e, ibase, k, e->int_depth, "INT SRAM"))) return t;
    if ((t = check_sram(e, wbase, k, e->fp_depth, "FP SRAM"))) return t;
    uint64_t *keys = e->topk_keys;
    for (uint32_t q = 0, idx = 0; q < n_rows; q++) {
        const uint16_t *r = emu_vram_row_ro(e, row0 + q);
        for (uint32_t l = 0; l < e->vlen && idx < E; l++, idx++)
            keys[idx] = (uint64_t)total_key(bf(r[l])) << 32 | (0xFFFFFFFFu - idx);
    }
    /* Descending key; equal keys keep the lower expert first (stable ranking). */
    plena_qsort(keys, E, sizeof *keys, cmp_desc_u64);
    float v[PLENA_TOPK_MAX_K], w[PLENA_TOPK_MAX_K];
    uint32_t id[PLENA_TOPK_MAX_K];
    for (uint32_t j = 0; j < k; j++) {
        id[j] = 0xFFFFFFFFu - (uint32_t)keys[j];
        float x = bf(emu_vram_row_ro(e, row0 + id[j] / e->vlen)[id[j] % e->vlen]);
        v[j] = isnan(x) ? -INFINITY : x;
    }
    float mx = v[0], D = 0.0f;
    for (uint32_t j = 0; j < k; j++) {
        float d = v[j] - mx;
        w[j] = plena_expf(d);
        D = j == 0 ? w[0] : D + w[j];
    }
    int ok = isfinite(D) && D > 0.0f;
    for (uint32_t j = 0; j < k; j++) {
        e->intsram[ibase + j] = id[j];
        e->fpsram[wbase + j] = tobf(ok ? w[j] / D : 0.0f);
    }
    *experts = E;
    return 0;
}

static int op_set_topk(struct plena_emu *e, const struct plena_insn *in)
{
    uint32_t x = e->g[in->rd], E = x >> 8, k = x & 0xFFu;
    uint32_t kmax = E < PLENA_TOPK_MAX_K ? E : PLENA_TOPK_MAX_K;
    if (E < 1 || E > PLENA_TOPK_MAX_EXPERTS || k < 1 || k > kmax)
        return trapf(e, PLENA_TRAP_TOPK_VALUE,
                     "C_SET_TOPK_REG value %u gives E = %u, k = %u: expected 1 <= E <= %d and "
                     "1 <= k <= min(E, %d)",
                     x, E, k, PLENA_TOPK_MAX_EXPERTS, PLENA_TOPK_MAX_K);
    e->topk = x;
    e->topk_set = 1;
    return 0;
}

/* ------------------------------------------------------------------ DMA */

/* H_PREFETCH_S (a plena addition, docs/machine.md "H_PREFETCH_S"): the 64
 * HBM bytes at A[rs2] + G[rs1] into scalar SRAM from index G[rd]: funct1 0
 * as 16 little-endian u32 words into INT SRAM, funct1 != 0 as 32
 * little-endian fp16 halves into FP SRAM, each stored as bf16(f32(half))
 * exactly as the FP SRAM image loader does. Bytes at or beyond HBM_SIZE read
 * 0, as for every prefetch; each touched 64-byte block is one transaction. */
static int op_prefetch_sram(struct plena_emu *e, const struct plena_insn *in)
{
    const int fp = in->funct1 != 0;
    const uint32_t n = fp ? 32 : 16;
    const uint64_t dst = e->g[in->rd];
    int t = check_sram(e, dst, n, fp ? e->fp_depth : e->int_depth, fp ? "FP SRAM" : "INT SRAM");
    if (t) return t;
    const uint64_t a = sat_add(e->a[in->rs2], e->g[in->rs1]);
    uint8_t b[64];
    emu_hbm_read(e, a, b, sizeof b);
    size_t nt = 0;
    for (uint64_t blk = a & ~(uint64_t)63; blk < sat_add(a, 64) && nt < e->txn_cap;
         blk = sat_add(blk, 64)) {
        e->txn[nt].addr = blk;
        e->txn[nt++].is_write = 0;
    }
    e->n_txn = nt;
    for (uint32_t i = 0; i < n; i++) {
        if (fp)
            e->fpsram[dst + i] = plena_num_bf16_from_f32(
                plena_num_fp16_to_f32((uint16_t)(b[2 * i] | b[2 * i + 1] << 8)));
        else
            e->intsram[dst + i] = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                                  (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
    }
    return 0;
}

/* How many rows ahead op_dma asks the cache for an HBM row. */
#define DMA_PREFETCH_ROWS 16

static int op_dma(struct plena_emu *e, const struct plena_insn *in, enum plena_op op)
{
    const struct plena_settings *s = &e->s;
    int is_m = op == PLENA_OP_H_PREFETCH_M, is_store = op == PLENA_OP_H_STORE_V;
    const struct plena_hbm_type *ty = is_m
                                          ? (in->funct1 ? &s->hbm_m_kv_type : &s->hbm_m_weight_type)
                                          : (in->funct1 ? &s->hbm_v_kv_type : &s->hbm_v_act_type);
    uint32_t dim = is_m ? e->mlen : e->vlen;
    uint64_t n = is_m ? s->hbm_m_prefetch_amount
                      : (is_store ? s->hbm_v_writeback_amount : s->hbm_v_prefetch_amount);
    int mx = ty->kind == PLENA_HBM_MX;
    uint32_t blk = mx ? ty->block : 0;
    uint64_t row_bytes = (uint64_t)dim * (mx ? 1 : 2);
    uint64_t sbytes = mx ? dim / blk : 0;
    uint64_t off = e->g[in->rs1], base = e->a[in->rs2];
    uint64_t E0 = sat_add(base, off);
    uint64_t st = in->rs3 == 1 ? e->stride : row_bytes;
    uint64_t S0 = mx ? sat_add(sat_add(base, e->scale), off / blk) : 0;
    uint64_t dst = e->g[in->rd], row0 = 0, tile0 = 0;
    int t;
    if (is_m) {
        if (mod_mlen2(e, dst))
            return trapf(e, PLENA_TRAP_MRAM_MISALIGNED,
                         "MRAM address %llu is not a multiple of MLEN^2 %llu",
                         (unsigned long long)dst, (unsigned long long)e->mlen2);
        if ((t = check_tile(e, dst, n / e->mlen, &tile0))) return t;
    } else if ((t = check_vrows(e, dst, n, 1, &row0))) {
        return t;
    }
    if (is_store) {
        for (uint64_t i = 0; i < n; i++) {
            uint64_t ea = sat_add(E0, i * st), sa = sat_add(S0, (i * st) / (blk ? blk : 1));
            if (ea > e->hbm_size || row_bytes > e->hbm_size - ea)
                return trapf(e, PLENA_TRAP_HBM_OUT_OF_RANGE,
                             "row %llu writes HBM bytes [%llu, %llu) beyond HBM_SIZE %llu",
                             (unsigned long long)i, (unsigned long long)ea,
                             (unsigned long long)sat_add(ea, row_bytes),
                             (unsigned long long)e->hbm_size);
            if (mx && (sa > e->hbm_size || sbytes > e->hbm_size - sa))
                return trapf(e, PLENA_TRAP_HBM_OUT_OF_RANGE,
                             "row %llu writes HBM scale bytes [%llu, %llu) beyond HBM_SIZE %llu",
                             (unsigned long long)i, (unsigned long long)sa,
                             (unsigned long long)sat_add(sa, sbytes),
                             (unsigned long long)e->hbm_size);
        }
    }
    /* Transaction list (docs/machine.md "HBM DMA"): per row, element blocks then
     * scale blocks, ascending; a store issues read then write per block. */
    size_t nt = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t runs[2][2] = {{sat_add(E0, i * st), row_bytes},
                               {mx ? sat_add(S0, (i * st) / blk) : 0, sbytes}};
        for (int r = 0; r < (mx ? 2 : 1); r++) {
            uint64_t lo = runs[r][0] & ~(uint64_t)63, end = sat_add(runs[r][0], runs[r][1]);
            for (uint64_t b = lo; b < end && nt + 2 <= e->txn_cap; b = sat_add(b, 64)) {
                e->txn[nt].addr = b;
                e->txn[nt++].is_write = 0;
                if (is_store) {
                    e->txn[nt].addr = b;
                    e->txn[nt++].is_write = 1;
                }
            }
        }
    }
    e->n_txn = nt;
    enum plena_mx_mode mode = s->mx_mode;
    uint8_t *eb = e->dma_bytes, sc[64 * 2];
    uint8_t *sb = sbytes <= sizeof sc ? sc : NULL;
    uint8_t *sbuf = sb ? sb : plena_malloc((size_t)sbytes);
    if (mx && !sbuf) return T_OOM;
    float *x = e->row_a;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ea = sat_add(E0, i * st), sa = mx ? sat_add(S0, (i * st) / blk) : 0;
        if (!is_store) {
            /* strided rows defeat the hardware prefetcher: ask for a later row */
            if (i + DMA_PREFETCH_ROWS < n) {
                uint64_t j = (i + DMA_PREFETCH_ROWS) * st;
                emu_hbm_prefetch(e, sat_add(E0, j), (size_t)row_bytes);
                if (mx) emu_hbm_prefetch(e, sat_add(S0, j / blk), (size_t)sbytes);
            }
            emu_hbm_read(e, ea, eb, (size_t)row_bytes);
            if (mx) emu_hbm_read(e, sa, sbuf, (size_t)sbytes);
            float *out =
                is_m ? e->mram + (tile0 + i / e->mlen) * e->mlen2 + (i % e->mlen) * e->mlen : x;
            if (mx && e->ref_paths) {
                for (uint32_t k = 0; k < dim; k++)
                    out[k] = plena_num_mx_decode(mode, eb[k], sbuf[k / blk]);
            } else if (mx) { /* the same product, operands from tables (num.h) */
                plena_num_mx_decode_row_lut(&e->mx_lut, eb, sbuf, dim, blk, out);
            } else {
                for (uint32_t k = 0; k < dim; k++) {
                    uint16_t h = (uint16_t)(eb[2 * k] | (eb[2 * k + 1] << 8));
                    out[k] = ty->kind == PLENA_HBM_BF16 ? bf(h) : plena_num_fp16_to_f32(h);
                }
            }
            if (!is_m) {
                uint16_t *r = emu_vram_row_rw(e, row0 + i);
                if (!r) goto oom;
                row_out(e, x, r, dim);
            }
        } else {
            row_in(e, emu_vram_row_ro(e, row0 + i), x, dim);
            if (mx) {
                for (uint32_t b = 0; b < dim / blk; b++)
                    plena_num_mx_encode_block_device(mode, x + b * blk, blk, eb + b * blk,
                                                     sbuf + b);
            } else {
                for (uint32_t k = 0; k < dim; k++) {
                    uint16_t h =
                        ty->kind == PLENA_HBM_BF16 ? tobf(x[k]) : plena_num_fp16_from_f32(x[k]);
                    eb[2 * k] = (uint8_t)h;
                    eb[2 * k + 1] = (uint8_t)(h >> 8);
                }
            }
            if (emu_hbm_write(e, ea, eb, (size_t)row_bytes)) goto oom;
            if (mx && emu_hbm_write(e, sa, sbuf, (size_t)sbytes)) goto oom;
        }
    }
    if (sbuf != sc) plena_free(sbuf);
    /* the image pages the rows may have touched: a strided row of 64 bytes
     * maps a whole 4 KiB page (a run of b bytes touches at most b/4096 + 2) */
    if (!is_store)
        emu_hbm_image_tick(e, n * EMU_HOST_PAGE *
                                  ((uint64_t)row_bytes / EMU_HOST_PAGE + 2 +
                                   (mx ? (uint64_t)sbytes / EMU_HOST_PAGE + 2 : 0)));
    return 0;
oom:
    if (sbuf != sc) plena_free(sbuf);
    return T_OOM;
}

/* -------------------------------------------------------------- loops */

#define EMU_CHECK_EVERY ((uint64_t)1 << 16)

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void budget_update(struct plena_emu *e)
{
    e->budget_limit = min_u64(e->loop_limit, min_u64(e->insn_limit, e->check_at));
}

static void loops_changed(struct plena_emu *e)
{
    uint64_t mn = UINT64_MAX;
    for (uint32_t i = 0; i < e->n_loops; i++)
        if (e->loops[i].base < mn) mn = e->loops[i].base;
    e->loop_limit = e->n_loops ? mn + e->s.max_loop_instructions : UINT64_MAX;
    budget_update(e);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void plena_emu_set_limits(struct plena_emu *e, uint64_t max_instructions, double max_seconds,
                          const volatile sig_atomic_t *stop)
{
    e->insn_limit = max_instructions ? max_instructions : UINT64_MAX;
    e->deadline = max_seconds > 0 ? max_seconds : 0; /* made absolute when a run starts */
    e->stop = stop;
}

/* Tick `tick` passed budget_limit: a run limit (trap code), a periodic check
 * that found nothing (0: go on), or the loop budget (its trap). */
static int budget_passed(struct plena_emu *e, uint64_t tick, double deadline)
{
    if (tick > e->insn_limit)
        return trapf(e, PLENA_TRAP_INSTRUCTION_LIMIT,
                     "stopped after %llu instructions: the --max-instructions limit",
                     (unsigned long long)e->insn_limit);
    if (tick > e->check_at) {
        if (e->stop && *e->stop)
            return trapf(e, PLENA_TRAP_INTERRUPTED, "SIGINT/SIGTERM after %llu instructions",
                         (unsigned long long)(tick - 1));
        if (deadline > 0 && mono_now() > deadline)
            return trapf(e, PLENA_TRAP_TIME_LIMIT,
                         "stopped after %llu instructions: the --max-seconds limit of %g s",
                         (unsigned long long)(tick - 1), e->deadline);
        e->check_at = tick + EMU_CHECK_EVERY;
        budget_update(e);
        if (tick <= e->loop_limit) return 0;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < e->n_loops; i++)
        if (tick - e->loops[i].base > e->s.max_loop_instructions) {
            w = i;
            break;
        }
    return trapf(e, PLENA_TRAP_LOOP_BUDGET,
                 "loop on gp%u started at pc %u exceeded MAX_LOOP_INSTRUCTIONS %u "
                 "instructions in one iteration",
                 e->loops[w].reg, e->loops[w].start_pc, e->s.max_loop_instructions);
}

static void loop_remove(struct plena_emu *e, uint32_t idx)
{
    memmove(&e->loops[idx], &e->loops[idx + 1], (e->n_loops - idx - 1) * sizeof e->loops[0]);
    e->n_loops--;
    loops_changed(e);
}

/* Static loop pairing (docs/machine.md "Hardware loops"): pair[p] = pc of the
 * C_LOOP_END paired with the C_LOOP_START at p, or UINT32_MAX. */
static int pair_loops(const struct plena_insn *code, size_t n, uint32_t *pair)
{
    uint32_t *stk = plena_malloc((n ? n : 1) * sizeof *stk);
    if (!stk) return -1;
    size_t depth = 0;
    for (size_t pc = 0; pc < n; pc++) {
        pair[pc] = UINT32_MAX;
        if (code[pc].op == PLENA_OP_C_LOOP_START) {
            stk[depth++] = (uint32_t)pc;
        } else if (code[pc].op == PLENA_OP_C_LOOP_END) {
            for (size_t k = depth; k-- > 0;) {
                if (code[stk[k]].rd != code[pc].rd) continue;
                pair[stk[k]] = (uint32_t)pc;
                memmove(&stk[k], &stk[k + 1], (depth - k - 1) * sizeof *stk);
                depth--;
                break;
            }
        }
    }
    plena_free(stk);
    return 0;
}

/* ------------------------------------------------------------ dispatch */

static inline __attribute__((always_inline)) int
run_loop(struct plena_emu *e, const struct plena_insn *code, const uint32_t *words, size_t n,
         const uint32_t *pair, plena_emu_observer obs, void *ctx, struct plena_emu_result *res,
         const int observe)
{
    uint64_t tick = 0, executed = 0;
    uint32_t pc = 0;
    struct plena_emu_event ev;
    memset(&ev, 0, sizeof ev);
    int t = 0;
    const double deadline = e->deadline > 0 ? mono_now() + e->deadline : 0;
    while (pc < n) {
        const struct plena_insn *in = &code[pc];
        uint32_t next = pc + 1;
        if (++tick > e->budget_limit && (t = budget_passed(e, tick, deadline)) != 0) break;
        if (observe) {
            ev.pc = pc;
            ev.word = words[pc];
            ev.op = in->op;
            ev.f0_skip = 0;
            ev.topk_experts = 0;
            ev.g_rd = e->g[in->rd];
            ev.g_rs1 = e->g[in->rs1];
            ev.g_rs2 = e->g[in->rs2];
            ev.n_txn = 0;
            ev.txn = NULL;
        }
        uint32_t *G = e->g;
        if (e->n_mm_pend && !emu_mm_batch_safe[in->op]) mm_flush(e);
        switch ((enum plena_op)in->op) {
        case PLENA_OP_INVALID_00:
        case PLENA_OP_INVALID_31:
        case PLENA_OP_INVALID_33:
        case PLENA_OP_COUNT:
            t = trapf(e, PLENA_TRAP_INVALID_OPCODE, "opcode 0x%02X is not an instruction",
                      words[pc] & 63u);
            break;
        case PLENA_OP_M_MM: t = e->mm_deferred ? op_mm_deferred(e, in) : op_mm(e, in, 0); break;
        case PLENA_OP_M_TMM: t = op_mm(e, in, 1); break;
        case PLENA_OP_M_BMM: t = op_broadcast(e, in, 0, 0); break;
        case PLENA_OP_M_BTMM: t = op_broadcast(e, in, 1, 0); break;
        case PLENA_OP_M_BMV: t = op_broadcast(e, in, 0, 1); break;
        case PLENA_OP_M_BTMV: t = op_broadcast(e, in, 1, 1); break;
        case PLENA_OP_M_MV: t = op_mv(e, in, 0); break;
        case PLENA_OP_M_TMV: t = op_mv(e, in, 1); break;
        case PLENA_OP_M_MM_WO:
        case PLENA_OP_M_MV_WO:
        case PLENA_OP_M_BMM_WO:
        case PLENA_OP_M_BMV_WO: t = op_wo(e, in, (enum plena_op)in->op); break;
        case PLENA_OP_V_ADD_VV:
        case PLENA_OP_V_ADD_VF:
        case PLENA_OP_V_SUB_VV:
        case PLENA_OP_V_SUB_VF:
        case PLENA_OP_V_MUL_VV:
        case PLENA_OP_V_MUL_VF:
        case PLENA_OP_V_EXP_V:
        case PLENA_OP_V_RECI_V:
        case PLENA_OP_V_MAX_VF:
        case PLENA_OP_V_MIN_VF: t = op_vec(e, in, (enum plena_op)in->op); break;
        case PLENA_OP_V_SHFT_V: t = op_shift(e, in); break;
        case PLENA_OP_V_RED_SUM:
        case PLENA_OP_V_RED_MAX:
            if (in->rd == 0) {
                if (observe) ev.f0_skip = 1;
                break;
            }
            t = op_reduce(e, in, in->op == PLENA_OP_V_RED_MAX);
            break;
        case PLENA_OP_V_TOPK: {
            uint32_t E = 0;
            t = op_topk(e, in, &E);
            if (observe) ev.topk_experts = E;
            break;
        }
        case PLENA_OP_S_ADD_FP:
        case PLENA_OP_S_SUB_FP:
        case PLENA_OP_S_MAX_FP:
        case PLENA_OP_S_MUL_FP: {
            if (in->rd == 0) { /* a write to f0: nothing read, nothing validated */
                if (observe) ev.f0_skip = 1;
                break;
            }
            if ((t = check_fpreg(e, in->rd)) || (t = check_fpreg(e, in->rs1)) ||
                (t = check_fpreg(e, in->rs2)))
                break;
            float x = bf(e->f[in->rs1]), y = bf(e->f[in->rs2]), r;
            if (in->op == PLENA_OP_S_ADD_FP)
                r = x + y;
            else if (in->op == PLENA_OP_S_SUB_FP)
                r = x - y;
            else if (in->op == PLENA_OP_S_MUL_FP)
                r = x * y;
            else
                r = isnan(x) ? y : (y > x ? y : x);
            e->f[in->rd] = tobf(r);
            break;
        }
        case PLENA_OP_S_EXP_FP:
        case PLENA_OP_S_RECI_FP:
        case PLENA_OP_S_SQRT_FP: {
            if (in->rd == 0) {
                if (observe) ev.f0_skip = 1;
                break;
            }
            if ((t = check_fpreg(e, in->rd)) || (t = check_fpreg(e, in->rs1))) break;
            float x = bf(e->f[in->rs1]), r;
            if (in->op == PLENA_OP_S_EXP_FP)
                r = plena_expf(clamp88(x));
            else if (in->op == PLENA_OP_S_RECI_FP)
                r = 1.0f / x;
            else
                r = sqrtf(x);
            e->f[in->rd] = tobf(r);
            break;
        }
        case PLENA_OP_S_LD_FP:
        case PLENA_OP_S_ST_FP: {
            uint32_t p = G[in->rs1] + in->imm;
            if ((t = check_fpreg(e, in->rd)) || (t = check_sram(e, p, 1, e->fp_depth, "FP SRAM")))
                break;
            if (in->op == PLENA_OP_S_LD_FP)
                e->f[in->rd] = e->fpsram[p];
            else
                e->fpsram[p] = e->f[in->rd];
            break;
        }
        case PLENA_OP_S_MAP_V_FP: {
            uint32_t p = G[in->rs1] + in->imm;
            uint64_t row = 0;
            if ((t = check_sram(e, p, e->vlen, e->fp_depth, "FP SRAM")) ||
                (t = check_vrows(e, G[in->rd], 1, 1, &row)))
                break;
            uint16_t *r = emu_vram_row_rw(e, row);
            if (!r) {
                t = T_OOM;
                break;
            }
            for (uint32_t i = 0; i < e->vlen; i++) /* bf16(): NaNs become 0x7FC0 */
                r[i] = tobf(bf(e->fpsram[p + i]));
            break;
        }
        case PLENA_OP_S_ADD_INT: G[in->rd] = G[in->rs1] + G[in->rs2]; break;
        case PLENA_OP_S_ADDI_INT: G[in->rd] = G[in->rs1] + in->imm; break;
        case PLENA_OP_S_SUB_INT: G[in->rd] = G[in->rs1] - G[in->rs2]; break;
        case PLENA_OP_S_MUL_INT: G[in->rd] = G[in->rs1] * G[in->rs2]; break;
        case PLENA_OP_S_LUI_INT: G[in->rd] = in->imm << 12; break;
        case PLENA_OP_S_LD_INT:
        case PLENA_OP_S_ST_INT: {
            uint32_t p = G[in->rs1] + in->imm;
            if ((t = check_sram(e, p, 1, e->int_depth, "INT SRAM"))) break;
            if (in->op == PLENA_OP_S_LD_INT)
                G[in->rd] = e->intsram[p];
            else
                e->intsram[p] = G[in->rd];
            break;
        }
        case PLENA_OP_H_PREFETCH_M:
        case PLENA_OP_H_PREFETCH_V:
        case PLENA_OP_H_STORE_V:
            t = op_dma(e, in, (enum plena_op)in->op);
            if (observe && !t) {
                ev.n_txn = e->n_txn;
                ev.txn = e->txn;
            }
            break;
        case PLENA_OP_H_PREFETCH_S:
            t = op_prefetch_sram(e, in);
            if (observe && !t) {
                ev.n_txn = e->n_txn;
                ev.txn = e->txn;
            }
            break;
        case PLENA_OP_C_SET_ADDR_REG: e->a[in->rd] = (uint64_t)G[in->rs1] << 32 | G[in->rs2]; break;
        case PLENA_OP_C_SET_SCALE_REG: e->scale = G[in->rd]; break;
        case PLENA_OP_C_SET_STRIDE_REG: e->stride = G[in->rd]; break;
        case PLENA_OP_C_SET_V_MASK_REG: e->vmask = G[in->rd]; break;
        case PLENA_OP_C_SET_TOPK_REG: t = op_set_topk(e, in); break;
        case PLENA_OP_C_LOOP_START:
            if (in->imm == 0) {
                t = trapf(e, PLENA_TRAP_LOOP_ZERO_COUNT, "C_LOOP_START count 0");
                break;
            }
            if (e->n_loops >= EMU_LOOP_MAX) {
                t = trapf(e, PLENA_TRAP_LOOP_STACK_OVERFLOW, "loop stack already holds %u entries",
                          EMU_LOOP_MAX);
                break;
            }
            G[in->rd] = in->imm;
            e->loops[e->n_loops].start_pc = pc;
            e->loops[e->n_loops].reg = in->rd;
            e->loops[e->n_loops].base = tick;
            e->n_loops++;
            loops_changed(e);
            break;
        case PLENA_OP_C_LOOP_END: {
            uint32_t i = e->n_loops;
            while (i > 0 && e->loops[i - 1].reg != in->rd)
                i--;
            if (i == 0) {
                t = trapf(e, PLENA_TRAP_LOOP_END_UNMATCHED, "no active loop on gp%u", in->rd);
                break;
            }
            i--;
            if (G[in->rd] > 1) {
                G[in->rd]--;
                uint64_t old = e->loops[i].base;
                e->loops[i].base = tick;
                /* tick >= every base: the minimum moves only if this entry held it */
                if (old + e->s.max_loop_instructions == e->loop_limit) loops_changed(e);
                next = e->loops[i].start_pc + 1;
            } else {
                G[in->rd] = 0;
                loop_remove(e, i);
            }
            break;
        }
        case PLENA_OP_C_BREAK: {
            if (e->n_loops == 0) {
                t = trapf(e, PLENA_TRAP_BREAK_NO_LOOP, "C_BREAK outside any loop");
                break;
            }
            struct emu_loop *L = &e->loops[e->n_loops - 1];
            uint32_t end = pair[L->start_pc];
            if (end == UINT32_MAX) {
                t = trapf(e, PLENA_TRAP_BREAK_NO_END, "loop started at pc %u has no C_LOOP_END",
                          L->start_pc);
                break;
            }
            G[L->reg] = 0;
            loop_remove(e, e->n_loops - 1);
            next = end + 1;
            break;
        }
        }
        if (t) break;
        executed++;
        if (observe) obs(ctx, &ev);
        pc = next;
    }
    mm_flush(e); /* whatever ended the run, the M_MMs before it took effect */
    res->instructions_executed = executed;
    if (t > 0) {
        res->status = PLENA_RUN_TRAPPED;
        e->trap.kind = (enum plena_trap_kind)t;
        e->trap.pc = pc;
        e->trap.word = words[pc];
        e->trap.opcode = (uint8_t)(words[pc] & 63u);
        res->trap = e->trap;
    }
    return t < 0 ? -1 : 0;
}

int plena_emu_run(struct plena_emu *e, const struct plena_program *prog, plena_emu_observer obs,
                  void *obs_ctx, struct plena_emu_result *res, struct plena_err *err)
{
    memset(res, 0, sizeof *res);
    size_t n = prog->n;
    if (n > UINT32_MAX - 1)
        return PLENA_FAIL(err, PLENA_E_INPUT, "program", "%zu instructions: too many", n);
    struct plena_insn *code = plena_malloc((n ? n : 1) * sizeof *code);
    uint32_t *pair = plena_malloc((n ? n : 1) * sizeof *pair);
    if (!code || !pair) {
        plena_free(code);
        plena_free(pair);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "emulator", "out of memory decoding the program");
    }
    for (size_t i = 0; i < n; i++) {
        plena_isa_decode(prog->words[i], &code[i]);
        /* 0x39..0x3F share the single out-of-table case of the switch */
        if (code[i].op > PLENA_OP_COUNT) code[i].op = PLENA_OP_COUNT;
    }
    int rc = pair_loops(code, n, pair);
    if (!rc) {
        memset(&e->trap, 0, sizeof e->trap);
        e->n_loops = 0;  /* a run starts with an empty loop stack */
        emu_xq_reset(e); /* VRAM may have been loaded since the last run */
        /* tests switch ref_paths / kernel_isa after plena_emu_new */
        e->mm_deferred = e->blen == 4 && e->kernel_isa >= EMU_ISA_AVX2 && !e->ref_paths &&
                         e->mlen % 16 == 0 && e->vlen == e->mlen && e->mlen_shift >= 0 &&
                         e->mlen2_shift >= 0 && e->vlen_shift >= 0;
        e->loop_limit = UINT64_MAX;
        e->check_at = e->stop || e->deadline > 0 ? EMU_CHECK_EVERY : UINT64_MAX;
        budget_update(e);
        if (obs)
            rc = run_loop(e, code, prog->words, n, pair, obs, obs_ctx, res, 1);
        else
            rc = run_loop(e, code, prog->words, n, pair, NULL, NULL, res, 0);
    }
    plena_free(code);
    plena_free(pair);
    if (rc) return PLENA_FAIL(err, PLENA_E_NOMEM, "emulator", "out of memory during the run");
    return 0;
}
