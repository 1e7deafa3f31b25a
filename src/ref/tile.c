/* The bit-exact reference's tile kernel: each output column's chain over one K
 * tile (product rounded, then added, in increasing index), computed for up to
 * four rows and sixteen columns at a time so that one load of a weight row
 * segment serves four chains per lane. Lanes are different outputs, never
 * parts of one sum: no reassociation, no FMA (-ffp-contract=off and no "fma"
 * target), the same bits as the scalar loop. GCC/clang vector extensions; on
 * x86 an AVX2 clone is chosen at run time (the generic one compiles to SSE). */
#include "ref/tile.h"

#include <string.h>

#include "common/cpu.h"

typedef float ref_v8 __attribute__((vector_size(32)));

/* Unaligned vector moves as macros: a function taking or returning a 32-byte
 * vector would change the ABI of the generic (non-AVX) clone. */
#define LOAD8(v, p)  memcpy(&(v), (p), sizeof(ref_v8))
#define STORE8(p, v) memcpy((p), &(v), sizeof(ref_v8))

/* The scalar chain of one output (tails and the reference of the tests). */
static inline float chain(const float *xr, const float *w, uint32_t np, uint32_t n, uint32_t k0,
                          uint32_t mlen)
{
    float s = xr[k0] * w[(size_t)k0 * np + n];
    for (uint32_t r = 1; r < mlen; r++)
        s = s + xr[k0 + r] * w[(size_t)(k0 + r) * np + n];
    return s;
}

/* RR rows (a constant, so the accumulators stay in registers) of x at
 * stride ldx into td. */
#define TILE_BODY(RR)                                                                              \
    uint32_t n = 0;                                                                                \
    for (; n + 16 <= np; n += 16) {                                                                \
        ref_v8 a[RR][2];                                                                           \
        const float *w0 = w + (size_t)k0 * np + n;                                                 \
        ref_v8 wl, wh;                                                                             \
        LOAD8(wl, w0);                                                                             \
        LOAD8(wh, w0 + 8);                                                                         \
        for (uint32_t i = 0; i < RR; i++) {                                                        \
            float xv = x[i * ldx + k0];                                                            \
            a[i][0] = xv * wl;                                                                     \
            a[i][1] = xv * wh;                                                                     \
        }                                                                                          \
        for (uint32_t r = 1; r < mlen; r++) {                                                      \
            const float *wr = w + (size_t)(k0 + r) * np + n;                                       \
            LOAD8(wl, wr);                                                                         \
            LOAD8(wh, wr + 8);                                                                     \
            for (uint32_t i = 0; i < RR; i++) {                                                    \
                float xv = x[i * ldx + k0 + r];                                                    \
                a[i][0] = a[i][0] + xv * wl;                                                       \
                a[i][1] = a[i][1] + xv * wh;                                                       \
            }                                                                                      \
        }                                                                                          \
        for (uint32_t i = 0; i < RR; i++) {                                                        \
            STORE8(td + (size_t)i * np + n, a[i][0]);                                              \
            STORE8(td + (size_t)i * np + n + 8, a[i][1]);                                          \
        }                                                                                          \
    }                                                                                              \
    for (; n < np; n++)                                                                            \
        for (uint32_t i = 0; i < RR; i++)                                                          \
            td[(size_t)i * np + n] = chain(x + i * ldx, w, np, n, k0, mlen);

#define TILE_FN(NAME, RR, ATTR)                                                                    \
    ATTR static void NAME(const float *x, size_t ldx, const float *w, uint32_t np, uint32_t k0,    \
                          uint32_t mlen, float *td)                                                \
    {                                                                                              \
        TILE_BODY(RR)                                                                              \
    }

TILE_FN(tile4_generic, 4, )
TILE_FN(tile1_generic, 1, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define REF_TILE_X86 1
TILE_FN(tile4_avx2, 4, __attribute__((target("avx2"))))
TILE_FN(tile1_avx2, 1, __attribute__((target("avx2"))))
#endif

void plena_ref_tile_rows(const float *x, size_t ldx, uint32_t R, const float *w, uint32_t np,
                         uint32_t k0, uint32_t mlen, float *td)
{
    if (R > PLENA_REF_TILE_ROWS) R = PLENA_REF_TILE_ROWS;
#ifdef REF_TILE_X86
    if (plena_cpu_has_avx2()) {
        if (R == 4) {
            tile4_avx2(x, ldx, w, np, k0, mlen, td);
            return;
        }
        for (uint32_t i = 0; i < R; i++)
            tile1_avx2(x + i * ldx, ldx, w, np, k0, mlen, td + (size_t)i * np);
        return;
    }
#endif
    if (R == 4) {
        tile4_generic(x, ldx, w, np, k0, mlen, td);
        return;
    }
    for (uint32_t i = 0; i < R; i++)
        tile1_generic(x + i * ldx, ldx, w, np, k0, mlen, td + (size_t)i * np);
}
