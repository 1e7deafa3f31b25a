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

/* The scalar chain of one output (tails). */
static inline float chain(const float *xr, const float *w, uint32_t np, uint32_t n, uint32_t k0,
                          uint32_t mlen)
{
    float s = xr[k0] * w[(size_t)k0 * np + n];
    for (uint32_t r = 1; r < mlen; r++)
        s = s + xr[k0 + r] * w[(size_t)(k0 + r) * np + n];
    return s;
}

/* One block of RR rows (x at stride ldx) by NV x 8 columns from column n:
 * the chains in registers, then td = chain or, with add, td = td + chain. */
#define BLOCK(RR, NV)                                                                              \
    do {                                                                                           \
        ref_v8 a[RR][NV], wv[NV];                                                                  \
        const float *w0 = w + (size_t)k0 * np + n;                                                 \
        _Pragma("GCC unroll 4") for (uint32_t v = 0; v < NV; v++) LOAD8(wv[v], w0 + 8 * v);        \
        _Pragma("GCC unroll 4") for (uint32_t i = 0; i < RR; i++)                                  \
        {                                                                                          \
            const float xv = x[i * ldx + k0];                                                      \
            _Pragma("GCC unroll 4") for (uint32_t v = 0; v < NV; v++) a[i][v] = xv * wv[v];        \
        }                                                                                          \
        for (uint32_t r = 1; r < mlen; r++) {                                                      \
            const float *wr = w + (size_t)(k0 + r) * np + n;                                       \
            __builtin_prefetch(wr + 128);                                                          \
            _Pragma("GCC unroll 4") for (uint32_t v = 0; v < NV; v++) LOAD8(wv[v], wr + 8 * v);    \
            _Pragma("GCC unroll 4") for (uint32_t i = 0; i < RR; i++)                              \
            {                                                                                      \
                const float xv = x[i * ldx + k0 + r];                                              \
                _Pragma("GCC unroll 4") for (uint32_t v = 0; v < NV; v++) a[i][v] =                \
                    a[i][v] + xv * wv[v];                                                          \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 4") for (uint32_t i = 0; i < RR; i++)                                  \
            _Pragma("GCC unroll 4") for (uint32_t v = 0; v < NV; v++)                              \
        {                                                                                          \
            float *o = td + (size_t)i * ldt + n + 8 * v;                                           \
            if (add) {                                                                             \
                ref_v8 t;                                                                          \
                LOAD8(t, o);                                                                       \
                a[i][v] = t + a[i][v];                                                             \
            }                                                                                      \
            STORE8(o, a[i][v]);                                                                    \
        }                                                                                          \
    } while (0)

/* RR rows: blocks of NV vectors, then single vectors, then scalar columns. */
#define TILE_FN(NAME, RR, NV, ATTR)                                                                \
    ATTR static void NAME(const float *x, size_t ldx, const float *w, uint32_t np, uint32_t k0,    \
                          uint32_t mlen, float *td, size_t ldt, int add)                           \
    {                                                                                              \
        uint32_t n = 0;                                                                            \
        for (; n + 8 * NV <= np; n += 8 * NV)                                                      \
            BLOCK(RR, NV);                                                                         \
        for (; n + 8 <= np; n += 8)                                                                \
            BLOCK(RR, 1);                                                                          \
        for (; n < np; n++)                                                                        \
            for (uint32_t i = 0; i < RR; i++) {                                                    \
                const float s = chain(x + i * ldx, w, np, n, k0, mlen);                            \
                float *o = td + (size_t)i * ldt + n;                                               \
                *o = add ? *o + s : s;                                                             \
            }                                                                                      \
    }

typedef void (*tile_fn)(const float *x, size_t ldx, const float *w, uint32_t np, uint32_t k0,
                        uint32_t mlen, float *td, size_t ldt, int add);

#define TILE_SET(SUFFIX, ATTR)                                                                     \
    TILE_FN(tile1_##SUFFIX, 1, 4, ATTR)                                                            \
    TILE_FN(tile2_##SUFFIX, 2, 4, ATTR)                                                            \
    TILE_FN(tile3_##SUFFIX, 3, 2, ATTR)                                                            \
    TILE_FN(tile4_##SUFFIX, 4, 2, ATTR)                                                            \
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
