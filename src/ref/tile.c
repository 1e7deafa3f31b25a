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

void plena_ref_tile_rows(const float *x, size_t ldx, uint32_t R, const float *w, uint32_t np,
                         uint32_t k0, uint32_t mlen, float *td, size_t ldt, int add)
{
    if (!R) return;
    if (R > PLENA_REF_TILE_ROWS) R = PLENA_REF_TILE_ROWS;
    const tile_fn *t = tiles_generic;
#ifdef REF_TILE_X86
    if (plena_cpu_has_avx2()) t = tiles_avx2;
#endif
    t[R - 1](x, ldx, w, np, k0, mlen, td, ldt, add);
}
