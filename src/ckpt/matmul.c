/* Exact-order matrix products (ckpt/matmul.h). Two kernels compute the same
 * chains: a portable one, and an AVX2 one chosen at run time. The AVX2
 * kernel decodes a panel of 24 outputs x up to KC inputs of W (BF16: a
 * 16-bit shift; F32: a load) into a small [k][24] f32 buffer with 8x8
 * in-register transposes, so one 256-bit vector holds W[o..o+8)[k] — eight
 * outputs' own chains side by side — and then runs up to four tokens over
 * it, each token's x[k] broadcast: 12 independent accumulators, every
 * product one vmulps, every add one vaddps (no FMA: -ffp-contract=off and
 * no fma intrinsic). Chains cross KC chunks through Y (an f32 store and
 * reload is exact). */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt/matmul.h"
#include "common/pool.h"
#include "common/alloc.h"
#include "common/cpu.h"
#include "num/num.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PLENA_MM_X86 1
#endif

#define PW 24 /* outputs per panel (three vectors of 8) */
#define KC                                                                                         \
    1024 /* inputs per panel chunk: the panel buffer is 64 KiB */ /* inputs per panel chunk: the   \
                                                                     panel buffer is 32 KiB */
#define NT 4                                                      /* tokens per register tile */

struct plena_mat plena_mat_f32(const float *a, uint32_t rows, uint32_t cols, size_t ld)
{
    struct plena_mat m = {a, PLENA_MAT_F32, rows, cols, ld, NULL, 0};
    return m;
}

void plena_mat_free(struct plena_mat *m)
{
    if (!m) return;
    plena_free(m->owned);
    memset(m, 0, sizeof *m);
}

void plena_mat_release(const struct plena_mat *m)
{
    if (!m || !m->mapped || !m->rows) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const size_t es = m->type == PLENA_MAT_BF16 ? 2 : 4;
    const uintptr_t a = (uintptr_t)m->data,
                    end = a + ((size_t)(m->rows - 1) * m->ld + m->cols) * es;
    const uintptr_t lo = (a + page - 1) / page * page, hi = end / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static float get_at(const struct plena_mat *m, size_t i)
{
    const uint8_t *p = m->data;
    if (m->type == PLENA_MAT_BF16)
        return plena_num_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                 (uint32_t)p[4 * i + 3] << 24;
    return plena_num_f32_from_bits(b);
}

float plena_mat_get(const struct plena_mat *m, uint32_t r, uint32_t c)
{
    return get_at(m, (size_t)r * m->ld + c);
}

void plena_mat_row(const struct plena_mat *m, uint32_t r, float *out)
{
    for (uint32_t c = 0; c < m->cols; c++)
        out[c] = get_at(m, (size_t)r * m->ld + c);
}

void plena_ckpt_matmul_ref(const struct plena_mat *W, const float *X, size_t ldx, const float *b,
                           uint32_t T, float *Y, size_t ldy)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t o = 0; o < W->rows; o++) {
            float s = 0;
            for (uint32_t k = 0; k < W->cols; k++)
                s += plena_mat_get(W, o, k) * X[t * ldx + k];
            if (b) s += b[o];
            Y[t * ldy + o] = s;
        }
}

/* ---- portable kernel: a row chunk decoded once, four tokens per pass ---- */

static void rows_scalar(const struct plena_mat *W, uint32_t o_lo, uint32_t o_hi, const float *X,
                        size_t ldx, uint32_t T, float *Y, size_t ldy)
{
    float w[KC];
    for (uint32_t o = o_lo; o < o_hi; o++)
        for (uint32_t k0 = 0; k0 < W->cols; k0 += KC) {
            const uint32_t kc = W->cols - k0 < KC ? W->cols - k0 : KC;
            for (uint32_t k = 0; k < kc; k++)
                w[k] = get_at(W, (size_t)o * W->ld + k0 + k);
            uint32_t t = 0;
            for (; t + 4 <= T; t += 4) {
                float a[4];
                for (int j = 0; j < 4; j++)
                    a[j] = k0 ? Y[(t + j) * ldy + o] : 0.0f;
                for (uint32_t k = 0; k < kc; k++)
                    for (int j = 0; j < 4; j++)
                        a[j] += w[k] * X[(t + j) * ldx + k0 + k];
                for (int j = 0; j < 4; j++)
                    Y[(t + j) * ldy + o] = a[j];
            }
            for (; t < T; t++) {
                float a = k0 ? Y[t * ldy + o] : 0.0f;
                for (uint32_t k = 0; k < kc; k++)
                    a += w[k] * X[t * ldx + k0 + k];
                Y[t * ldy + o] = a;
            }
        }
}

/* ---- AVX2 kernel ---- */

#ifdef PLENA_MM_X86
#define AVX2 __attribute__((target("avx2")))

/* Eight BF16 at p (any alignment) as f32: each 16-bit pattern shifted into
 * the high half of a 32-bit lane, exactly. */
static inline AVX2 __m256 bf16x8(const uint8_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Columns of the 8x8 block v0..v7 (rows) into v0..v7, in place. */
#define TRANSPOSE8(v0, v1, v2, v3, v4, v5, v6, v7)                                                 \
    do {                                                                                           \
        const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1),             \
                     t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3),             \
                     t4 = _mm256_unpacklo_ps(v4, v5), t5 = _mm256_unpackhi_ps(v4, v5),             \
                     t6 = _mm256_unpacklo_ps(v6, v7), t7 = _mm256_unpackhi_ps(v6, v7);             \
        const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE),   \
                     s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE),   \
                     s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE),   \
                     s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);   \
        v0 = _mm256_permute2f128_ps(s0, s4, 0x20), v1 = _mm256_permute2f128_ps(s1, s5, 0x20);      \
        v2 = _mm256_permute2f128_ps(s2, s6, 0x20), v3 = _mm256_permute2f128_ps(s3, s7, 0x20);      \
        v4 = _mm256_permute2f128_ps(s0, s4, 0x31), v5 = _mm256_permute2f128_ps(s1, s5, 0x31);      \
        v6 = _mm256_permute2f128_ps(s2, s6, 0x31), v7 = _mm256_permute2f128_ps(s3, s7, 0x31);      \
    } while (0)

#define STORE8(P, v0, v1, v2, v3, v4, v5, v6, v7)                                                  \
    do {                                                                                           \
        _mm256_store_ps((P), v0), _mm256_store_ps((P) + PW, v1);                                   \
        _mm256_store_ps((P) + 2 * PW, v2), _mm256_store_ps((P) + 3 * PW, v3);                      \
        _mm256_store_ps((P) + 4 * PW, v4), _mm256_store_ps((P) + 5 * PW, v5);                      \
        _mm256_store_ps((P) + 6 * PW, v6), _mm256_store_ps((P) + 7 * PW, v7);                      \
    } while (0)

/* P[k][0..8) = rows r..r+8 of W at columns k0 + k, k in [0, kc8), kc8 a
 * multiple of 8: eight rows decoded, transposed, stored. */
static AVX2 void pack8_bf16(const struct plena_mat *W, size_t r, size_t k0, uint32_t kc8, float *P)
{
    const size_t ld = 2 * W->ld; /* bytes */
    const uint8_t *p = (const uint8_t *)W->data + r * ld + 2 * k0;
    for (uint32_t k = 0; k < kc8; k += 8, p += 16) {
        __m256 v0 = bf16x8(p), v1 = bf16x8(p + ld), v2 = bf16x8(p + 2 * ld),
               v3 = bf16x8(p + 3 * ld), v4 = bf16x8(p + 4 * ld), v5 = bf16x8(p + 5 * ld),
               v6 = bf16x8(p + 6 * ld), v7 = bf16x8(p + 7 * ld);
        TRANSPOSE8(v0, v1, v2, v3, v4, v5, v6, v7);
        STORE8(P + (size_t)k * PW, v0, v1, v2, v3, v4, v5, v6, v7);
    }
}

static AVX2 void pack8_f32(const struct plena_mat *W, size_t r, size_t k0, uint32_t kc8, float *P)
{
    const size_t ld = 4 * W->ld; /* bytes */
    const uint8_t *p = (const uint8_t *)W->data + r * ld + 4 * k0;
#define F32X8(q) _mm256_loadu_ps((const float *)(const void *)(q))
    for (uint32_t k = 0; k < kc8; k += 8, p += 32) {
        __m256 v0 = F32X8(p), v1 = F32X8(p + ld), v2 = F32X8(p + 2 * ld), v3 = F32X8(p + 3 * ld),
               v4 = F32X8(p + 4 * ld), v5 = F32X8(p + 5 * ld), v6 = F32X8(p + 6 * ld),
               v7 = F32X8(p + 7 * ld);
        TRANSPOSE8(v0, v1, v2, v3, v4, v5, v6, v7);
        STORE8(P + (size_t)k * PW, v0, v1, v2, v3, v4, v5, v6, v7);
    }
}

/* P[k][PW] = W[o0 + lane][k0 + k] for k < kc; lanes past nr are 0. */
static AVX2 void pack(const struct plena_mat *W, uint32_t o0, uint32_t nr, uint32_t k0, uint32_t kc,
                      float *P)
{
    for (uint32_t half = 0; half < PW / 8; half++) {
        const uint32_t r0 = o0 + 8 * half, n = nr > 8 * half ? nr - 8 * half : 0;
        const uint32_t rows = n > 8 ? 8 : n;
        uint32_t k = 0;
        if (rows == 8) {
            k = kc / 8 * 8;
            if (W->type == PLENA_MAT_BF16)
                pack8_bf16(W, r0, k0, k, P + 8 * half);
            else
                pack8_f32(W, r0, k0, k, P + 8 * half);
        }
        for (; k < kc; k++)
            for (uint32_t r = 0; r < 8; r++)
                P[(size_t)k * PW + 8 * half + r] =
                    r < rows ? get_at(W, (size_t)(r0 + r) * W->ld + k0 + k) : 0.0f;
    }
}

/* A[j][0..PW) = (zero ? 0 : A[j][0..PW)) + sum over k < kc of P[k][.] *
 * X[j][k], k increasing, for j < nt (a compile-time constant at every
 * call); A rows at stride lda (Y itself, or a PW-wide buffer for a partial
 * panel). */
static inline __attribute__((always_inline)) AVX2 void tile(const float *P, uint32_t kc,
                                                            const float *X, size_t ldx, int nt,
                                                            float *A, size_t lda, int zero)
{
    __m256 a0[NT], a1[NT], a2[NT];
#pragma GCC unroll 6
    for (int j = 0; j < nt; j++) {
        a0[j] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(A + j * lda);
        a1[j] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(A + j * lda + 8);
        a2[j] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(A + j * lda + 16);
    }
    for (uint32_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(P + (size_t)k * PW),
                     w1 = _mm256_load_ps(P + (size_t)k * PW + 8),
                     w2 = _mm256_load_ps(P + (size_t)k * PW + 16);
#pragma GCC unroll 6
        for (int j = 0; j < nt; j++) {
            const __m256 x = _mm256_broadcast_ss(X + j * ldx + k);
            a0[j] = _mm256_add_ps(a0[j], _mm256_mul_ps(w0, x));
            a1[j] = _mm256_add_ps(a1[j], _mm256_mul_ps(w1, x));
            a2[j] = _mm256_add_ps(a2[j], _mm256_mul_ps(w2, x));
        }
    }
#pragma GCC unroll 6
    for (int j = 0; j < nt; j++) {
        _mm256_storeu_ps(A + j * lda, a0[j]);
        _mm256_storeu_ps(A + j * lda + 8, a1[j]);
        _mm256_storeu_ps(A + j * lda + 16, a2[j]);
    }
}

static AVX2 void tile_n(const float *P, uint32_t kc, const float *X, size_t ldx, uint32_t nt,
                        float *A, size_t lda, int zero)
{
#define TILE_CASE(n)                                                                               \
    case n:                                                                                        \
        if (zero)                                                                                  \
            tile(P, kc, X, ldx, n, A, lda, 1);                                                     \
        else                                                                                       \
            tile(P, kc, X, ldx, n, A, lda, 0);                                                     \
        break;
    switch (nt) {
        TILE_CASE(1)
        TILE_CASE(2)
        TILE_CASE(3)
        TILE_CASE(4)
    }
#undef TILE_CASE
}

static AVX2 void rows_avx2(const struct plena_mat *W, uint32_t o_lo, uint32_t o_hi, const float *X,
                           size_t ldx, uint32_t T, float *Y, size_t ldy)
{
    _Alignas(32) float P[KC * PW];
    _Alignas(32) float acc[NT][PW];
    for (uint32_t o0 = o_lo; o0 < o_hi; o0 += PW) {
        const uint32_t nr = o_hi - o0 < PW ? o_hi - o0 : PW;
        for (uint32_t k0 = 0; k0 < W->cols; k0 += KC) {
            const uint32_t kc = W->cols - k0 < KC ? W->cols - k0 : KC;
            pack(W, o0, nr, k0, kc, P);
            for (uint32_t t = 0; t < T; t += NT) {
                const uint32_t nt = T - t < NT ? T - t : NT;
                const float *x = X + t * ldx + k0;
                if (nr == PW) { /* a full panel accumulates in Y itself */
                    tile_n(P, kc, x, ldx, nt, Y + t * ldy + o0, ldy, !k0);
                    continue;
                }
                for (uint32_t j = 0; j < nt && k0; j++)
                    memcpy(acc[j], Y + (t + j) * ldy + o0, nr * sizeof(float));
                tile_n(P, kc, x, ldx, nt, &acc[0][0], PW, !k0);
                for (uint32_t j = 0; j < nt; j++)
                    memcpy(Y + (t + j) * ldy + o0, acc[j], nr * sizeof(float));
            }
        }
    }
}

/* axpy_rows with y held in eight registers per 64-element block. */
static AVX2 void axpy_rows_avx2(float *y, const float *a, const float *X, size_t ldx, uint32_t m,
                                uint32_t n)
{
    uint32_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256 v[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++)
            v[r] = _mm256_loadu_ps(y + i + 8 * r);
        for (uint32_t j = 0; j < m; j++) {
            const __m256 p = _mm256_broadcast_ss(a + j);
            const float *x = X + j * ldx + i;
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++)
                v[r] = _mm256_add_ps(v[r], _mm256_mul_ps(p, _mm256_loadu_ps(x + 8 * r)));
        }
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++)
            _mm256_storeu_ps(y + i + 8 * r, v[r]);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(y + i);
        for (uint32_t j = 0; j < m; j++)
            v = _mm256_add_ps(
                v, _mm256_mul_ps(_mm256_broadcast_ss(a + j), _mm256_loadu_ps(X + j * ldx + i)));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++)
        for (uint32_t j = 0; j < m; j++)
            y[i] += a[j] * X[j * ldx + i];
}

static AVX2 void axpy_avx2(float *y, float a, const float *x, uint32_t n)
{
    const __m256 av = _mm256_set1_ps(a);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                              _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
    for (; i < n; i++)
        y[i] += a * x[i];
}
#endif

static int force_scalar;

static int use_avx2(void)
{
#ifdef PLENA_MM_X86
    return !force_scalar && plena_cpu_has_avx2();
#else
    return 0;
#endif
}

const char *plena_ckpt_matmul_kernel(void)
{
    return use_avx2() ? "avx2" : "scalar";
}

void plena_ckpt_matmul_force_scalar(int on)
{
    force_scalar = on;
}

void plena_ckpt_matmul_rows(const struct plena_mat *W, uint32_t o_lo, uint32_t o_hi, const float *X,
                            size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy)
{
    if (o_lo >= o_hi || !T) return;
    if (!W->cols) {
        for (uint32_t t = 0; t < T; t++)
            memset(Y + t * ldy + o_lo, 0, (o_hi - o_lo) * sizeof(float));
    }
#ifdef PLENA_MM_X86
    else if (use_avx2())
        rows_avx2(W, o_lo, o_hi, X, ldx, T, Y, ldy);
#endif
    else
        rows_scalar(W, o_lo, o_hi, X, ldx, T, Y, ldy);
    if (b)
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t o = o_lo; o < o_hi; o++)
                Y[t * ldy + o] += b[o];
}

struct job {
    const struct plena_mat *W;
    const float *X, *b;
    size_t ldx, ldy;
    uint32_t T;
    float *Y;
    atomic_uint next; /* the next panel to take */
};

/* Panels of PW outputs, taken one at a time by whichever thread is free (a
 * thread the machine delays does less, the others more). */
static void part_run(void *ctx, uint32_t part, uint32_t parts)
{
    (void)part, (void)parts;
    struct job *j = ctx;
    const uint32_t panels = (j->W->rows + PW - 1) / PW;
    for (uint32_t p; (p = atomic_fetch_add(&j->next, 1)) < panels;) {
        const uint32_t lo = p * PW, hi = lo + PW < j->W->rows ? lo + PW : j->W->rows;
        plena_ckpt_matmul_rows(j->W, lo, hi, j->X, j->ldx, j->b, j->T, j->Y, j->ldy);
    }
}

void plena_ckpt_matmul(struct plena_pool *pool, const struct plena_mat *W, const float *X,
                       size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy)
{
    if (plena_pool_size(pool) > 1 && W->rows > PW &&
        (uint64_t)W->rows * W->cols * T >= (1u << 16)) {
        struct job j = {W, X, b, ldx, ldy, T, Y, 0};
        atomic_init(&j.next, 0);
        plena_pool_run(pool, part_run, &j);
    } else {
        plena_ckpt_matmul_rows(W, 0, W->rows, X, ldx, b, T, Y, ldy);
    }
}

void plena_ckpt_axpy(float *y, float a, const float *x, uint32_t n)
{
#ifdef PLENA_MM_X86
    if (use_avx2()) {
        axpy_avx2(y, a, x, n);
        return;
    }
#endif
    for (uint32_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

void plena_ckpt_axpy_rows(float *y, const float *a, const float *X, size_t ldx, uint32_t m,
                          uint32_t n)
{
#ifdef PLENA_MM_X86
    if (use_avx2()) {
        axpy_rows_avx2(y, a, X, ldx, m, n);
        return;
    }
#endif
    for (uint32_t j = 0; j < m; j++)
        for (uint32_t i = 0; i < n; i++)
            y[i] += a[j] * X[j * ldx + i];
}
