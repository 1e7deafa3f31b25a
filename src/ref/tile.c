/* The bit-exact reference's tile kernel: each output column's chain over one K
 * tile (product rounded, then added, in increasing index), computed for up to
 * four rows and 16 or 32 columns at a time so that one load of a weight row
 * segment serves every row's chain in the block, and enough independent chains
 * are in flight to hide the add latency (one row: 32 columns, four vector
 * chains). Lanes are different outputs, never parts of one sum: no
 * reassociation, no FMA (-ffp-contract=off and no "fma" target), the same bits
 * as the scalar loop. GCC/clang vector extensions; on x86 an AVX2 clone is
 * chosen at run time (the generic one compiles to SSE). */
#include "ref/tile.h"

#include <string.h>

#include "common/cpu.h"

typedef float ref_v8 __attribute__((vector_size(32)));

/* Unaligned vector moves as macros: a function taking or returning a 32-byte
 * vector would change the ABI of the generic (non-AVX) clone. */
#define LOAD8(v, p)  memcpy(&(v), (p), sizeof(ref_v8))
#define STORE8(p, v) memcpy((p), &(v), sizeof(ref_v8))

/* Columns of one panel: the chains of RR rows over a panel sit in an L1
 * buffer (RR x 1 KB), and the weight rows of a K tile are read in order,
 * TILE_RB of them per pass (sequential streams the hardware prefetches). */
#define TILE_PANEL 256
#define TILE_RB    4

/* One pass of NR (a constant, 1..TILE_RB) weight rows r0.. over the panel's
 * vector columns: ch = (first pass ? p_0 : ch + p_0) + p_1 + ..., each add
 * rounded, in increasing K: the chain of the scalar loop. */
#define PASS(RR, NR, FIRST)                                                                        \
    for (uint32_t n = 0; n + 8 <= pn; n += 8) {                                                    \
        ref_v8 wv[NR];                                                                             \
        _Pragma("GCC unroll 4") for (uint32_t j = 0; j < NR; j++)                                  \
            LOAD8(wv[j], wr + (size_t)j * np + n);                                                 \
        _Pragma("GCC unroll 4") for (uint32_t i = 0; i < RR; i++)                                  \
        {                                                                                          \
            ref_v8 a;                                                                              \
            if (FIRST) {                                                                           \
                a = xs[i][0] * wv[0];                                                              \
            } else {                                                                               \
                LOAD8(a, &ch[i][n]);                                                               \
                a = a + xs[i][0] * wv[0];                                                          \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (uint32_t j = 1; j < NR; j++) a = a + xs[i][j] * wv[j];    \
            STORE8(&ch[i][n], a);                                                                  \
        }                                                                                          \
    }

/* RR rows: per panel, passes of up to TILE_RB weight rows (vector columns,
 * then the scalar tail in the same order), then td = chain or td + chain. */
#define TILE_FN(NAME, RR, ATTR)                                                                    \
    ATTR static void NAME(const float *x, size_t ldx, const float *w, uint32_t np, uint32_t k0,    \
                          uint32_t mlen, float *td, size_t ldt, int add)                           \
    {                                                                                              \
        float ch[RR][TILE_PANEL];                                                                  \
        for (uint32_t p0 = 0; p0 < np; p0 += TILE_PANEL) {                                         \
            const uint32_t pn = np - p0 < TILE_PANEL ? np - p0 : TILE_PANEL;                       \
            for (uint32_t r0 = 0; r0 < mlen; r0 += TILE_RB) {                                      \
                const uint32_t rb = mlen - r0 < TILE_RB ? mlen - r0 : TILE_RB;                     \
                const float *wr = w + (size_t)(k0 + r0) * np + p0;                                 \
                float xs[RR][TILE_RB];                                                             \
                for (uint32_t i = 0; i < RR; i++)                                                  \
                    for (uint32_t j = 0; j < rb; j++)                                              \
                        xs[i][j] = x[i * ldx + k0 + r0 + j];                                       \
                if (rb == TILE_RB && r0 == 0) {                                                    \
                    PASS(RR, TILE_RB, 1)                                                           \
                } else if (rb == TILE_RB) {                                                        \
                    PASS(RR, TILE_RB, 0)                                                           \
                } else {                                                                           \
                    for (uint32_t j = 0; j < rb; j++) {                                            \
                        const float *wj = wr + (size_t)j * np;                                     \
                        float xj[RR][1];                                                           \
                        for (uint32_t i = 0; i < RR; i++)                                          \
                            xj[i][0] = xs[i][j];                                                   \
                        if (r0 + j == 0) {                                                         \
                            SINGLE(RR, 1)                                                          \
                        } else {                                                                   \
                            SINGLE(RR, 0)                                                          \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
                for (uint32_t n = pn / 8 * 8; n < pn; n++) /* scalar tail */                       \
                    for (uint32_t i = 0; i < RR; i++)                                              \
                        for (uint32_t j = 0; j < rb; j++) {                                        \
                            const float p = xs[i][j] * wr[(size_t)j * np + n];                     \
                            ch[i][n] = r0 + j == 0 ? p : ch[i][n] + p;                             \
                        }                                                                          \
            }                                                                                      \
            for (uint32_t i = 0; i < RR; i++) {                                                    \
                float *o = td + (size_t)i * ldt + p0;                                              \
                for (uint32_t n = 0; n < pn; n++)                                                  \
                    o[n] = add ? o[n] + ch[i][n] : ch[i][n];                                       \
            }                                                                                      \
        }                                                                                          \
    }

/* One weight row j of a short pass (mlen not a multiple of TILE_RB). */
#define SINGLE(RR, FIRST)                                                                          \
    for (uint32_t n = 0; n + 8 <= pn; n += 8) {                                                    \
        ref_v8 wv;                                                                                 \
        LOAD8(wv, wj + n);                                                                         \
        for (uint32_t i = 0; i < RR; i++) {                                                        \
            ref_v8 a;                                                                              \
            if (FIRST) {                                                                           \
                a = xj[i][0] * wv;                                                                 \
            } else {                                                                               \
                LOAD8(a, &ch[i][n]);                                                               \
                a = a + xj[i][0] * wv;                                                             \
            }                                                                                      \
            STORE8(&ch[i][n], a);                                                                  \
        }                                                                                          \
    }

typedef void (*tile_fn)(const float *x, size_t ldx, const float *w, uint32_t np, uint32_t k0,
                        uint32_t mlen, float *td, size_t ldt, int add);

#define TILE_SET(SUFFIX, ATTR)                                                                     \
    TILE_FN(tile1_##SUFFIX, 1, ATTR)                                                               \
    TILE_FN(tile2_##SUFFIX, 2, ATTR)                                                               \
    TILE_FN(tile3_##SUFFIX, 3, ATTR)                                                               \
    TILE_FN(tile4_##SUFFIX, 4, ATTR)                                                               \
    static const tile_fn tiles_##SUFFIX[4] = {tile1_##SUFFIX, tile2_##SUFFIX, tile3_##SUFFIX,      \
                                              tile4_##SUFFIX};

TILE_SET(generic, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define REF_TILE_X86 1
TILE_SET(avx2, __attribute__((target("avx2"))))
#endif

/* ---- many rows: register blocks over a packed K tile ----
 * With a dozen rows or more a weight segment serves enough chains that the
 * chains are better kept in registers for the whole K tile: blocks of up to
 * 6 rows x 16 columns (12 of the 16 vector registers, two weight vectors and
 * a broadcast), over weight columns packed 64 at a time (the K tile's rows
 * are np floats apart: walking a 16-column block down K reads one line per
 * row, dozens of interleaved streams; the pack reads each row's 256 bytes
 * in order once and the row blocks read the packed block from L1). Fewer
 * rows keep the streaming kernel above, whose pack-free passes cost less
 * there. The same chain per output either way. */
#define BLK_RB    6
#define BLK_GROUP 64

#define BLK_FN(NAME, RR, NV, ATTR)                                                                 \
    ATTR static void NAME(const float *x, size_t ldx, const float *pk, uint32_t k0, uint32_t mlen, \
                          float *td, size_t ldt, int add)                                          \
    {                                                                                              \
        ref_v8 acc[RR][NV], wv[NV];                                                                \
        _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++) LOAD8(wv[v], pk + 8 * v);        \
        _Pragma("GCC unroll 8") for (uint32_t i = 0; i < RR; i++)                                  \
        {                                                                                          \
            const float s = x[i * ldx + k0];                                                       \
            const ref_v8 b = {s, s, s, s, s, s, s, s};                                             \
            _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++) acc[i][v] = b * wv[v];       \
        }                                                                                          \
        for (uint32_t j = 1; j < mlen; j++) {                                                      \
            _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++)                              \
                LOAD8(wv[v], pk + (size_t)j * 8 * NV + 8 * v);                                     \
            _Pragma("GCC unroll 8") for (uint32_t i = 0; i < RR; i++)                              \
            {                                                                                      \
                const float s = x[i * ldx + k0 + j];                                               \
                const ref_v8 b = {s, s, s, s, s, s, s, s};                                         \
                _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++) acc[i][v] =              \
                    acc[i][v] + b * wv[v];                                                         \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (uint32_t i = 0; i < RR; i++)                                  \
            _Pragma("GCC unroll 2") for (uint32_t v = 0; v < NV; v++)                              \
        {                                                                                          \
            ref_v8 o = acc[i][v];                                                                  \
            if (add) {                                                                             \
                LOAD8(o, td + i * ldt + 8 * v);                                                    \
                o = o + acc[i][v];                                                                 \
            }                                                                                      \
            STORE8(td + i * ldt + 8 * v, o);                                                       \
        }                                                                                          \
    }

typedef void (*blk_fn)(const float *x, size_t ldx, const float *pk, uint32_t k0, uint32_t mlen,
                       float *td, size_t ldt, int add);
#define BLK_ROWS_SET(SUFFIX, NV, ATTR)                                                             \
    BLK_FN(blk1x##NV##_##SUFFIX, 1, NV, ATTR)                                                      \
    BLK_FN(blk2x##NV##_##SUFFIX, 2, NV, ATTR)                                                      \
    BLK_FN(blk3x##NV##_##SUFFIX, 3, NV, ATTR)                                                      \
    BLK_FN(blk4x##NV##_##SUFFIX, 4, NV, ATTR)                                                      \
    BLK_FN(blk5x##NV##_##SUFFIX, 5, NV, ATTR)                                                      \
    BLK_FN(blk6x##NV##_##SUFFIX, 6, NV, ATTR)                                                      \
    static const blk_fn blks##NV##_##SUFFIX[BLK_RB] = {                                            \
        blk1x##NV##_##SUFFIX, blk2x##NV##_##SUFFIX, blk3x##NV##_##SUFFIX,                          \
        blk4x##NV##_##SUFFIX, blk5x##NV##_##SUFFIX, blk6x##NV##_##SUFFIX};
#define BLK_SET(SUFFIX, ATTR)                                                                      \
    BLK_ROWS_SET(SUFFIX, 1, ATTR)                                                                  \
    BLK_ROWS_SET(SUFFIX, 2, ATTR)

BLK_SET(generic, )
#ifdef REF_TILE_X86
BLK_SET(avx2, __attribute__((target("avx2"))))
#endif

/* Rows [k0, k0 + mlen) of columns [n0, n0 + gw) of w (gw a multiple of 8, at
 * most BLK_GROUP) in blocks of 16 columns (the last of 8 when gw % 16 == 8):
 * block c0 / 16 at pk + c0 * mlen, row after row. */
static void blk_pack(const float *w, uint32_t np, uint32_t k0, uint32_t mlen, uint32_t n0,
                     uint32_t gw, float *pk)
{
    for (uint32_t j = 0; j < mlen; j++) {
        const float *row = w + (size_t)(k0 + j) * np + n0;
        uint32_t c0 = 0;
        for (; gw - c0 >= 16; c0 += 16)
            memcpy(pk + (size_t)c0 * mlen + j * 16, row + c0, 16 * sizeof *row);
        if (gw - c0 == 8) memcpy(pk + (size_t)c0 * mlen + j * 8, row + c0, 8 * sizeof *row);
    }
}

static void tile_blocks(const float *x, size_t ldx, uint32_t R, const float *w, uint32_t np,
                        uint32_t k0, uint32_t mlen, float *td, size_t ldt, int add)
{
    const blk_fn *f16 = blks2_generic, *f8 = blks1_generic;
#ifdef REF_TILE_X86
    if (plena_cpu_has_avx2()) f16 = blks2_avx2, f8 = blks1_avx2;
#endif
    float pk[BLK_GROUP * PLENA_REF_TILE_BLOCK_MLEN];
    uint32_t n = 0;
    while (np - n >= 8) {
        const uint32_t gw = np - n >= BLK_GROUP ? BLK_GROUP : (np - n) / 8 * 8;
        blk_pack(w, np, k0, mlen, n, gw, pk);
        for (uint32_t c0 = 0; c0 < gw; c0 += 16) {
            const blk_fn *f = gw - c0 >= 16 ? f16 : f8;
            for (uint32_t i0 = 0; i0 < R; i0 += BLK_RB) {
                const uint32_t rb = R - i0 < BLK_RB ? R - i0 : BLK_RB;
                f[rb - 1](x + i0 * ldx, ldx, pk + (size_t)c0 * mlen, k0, mlen,
                          td + i0 * ldt + n + c0, ldt, add);
            }
        }
        n += gw;
    }
    for (uint32_t i = 0; i < R; i++) /* tail columns, the scalar chain */
        for (uint32_t c = n; c < np; c++) {
            float ch = x[i * ldx + k0] * w[(size_t)k0 * np + c];
            for (uint32_t j = 1; j < mlen; j++)
                ch = ch + x[i * ldx + k0 + j] * w[(size_t)(k0 + j) * np + c];
            float *o = td + (size_t)i * ldt + c;
            *o = add ? *o + ch : ch;
        }
}

void plena_ref_tile_rows(const float *x, size_t ldx, uint32_t R, const float *w, uint32_t np,
                         uint32_t k0, uint32_t mlen, float *td, size_t ldt, int add)
{
    if (!R || !mlen) return;
    if (R >= PLENA_REF_TILE_BLOCK_ROWS && mlen <= PLENA_REF_TILE_BLOCK_MLEN) {
        tile_blocks(x, ldx, R, w, np, k0, mlen, td, ldt, add);
        return;
    }
    const tile_fn *t = tiles_generic;
#ifdef REF_TILE_X86
    if (plena_cpu_has_avx2()) t = tiles_avx2;
#endif
    for (uint32_t r0 = 0; r0 < R; r0 += PLENA_REF_TILE_ROWS) {
        const uint32_t rr = R - r0 < PLENA_REF_TILE_ROWS ? R - r0 : PLENA_REF_TILE_ROWS;
        t[rr - 1](x + (size_t)r0 * ldx, ldx, w, np, k0, mlen, td + (size_t)r0 * ldt, ldt, add);
    }
}
