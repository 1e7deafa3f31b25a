/* The exact-order matrix products (ckpt/matmul.h) against the plain scalar
 * loop, bit for bit: awkward sizes (panel and 8-lane tails, one token,
 * token counts around the 4-token tile, widths around the 1024-input chunk,
 * odd row strides), BF16 and F32 weights at odd byte addresses (as in an
 * mmap), with and without bias, the portable and the AVX2 kernel, and pools
 * of 1..3 threads. The data make every reordering or fused multiply-add
 * visible: products of mixed magnitudes, so the rounding of each partial
 * sum matters (the FMA check below proves the data can tell). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ckpt/matmul.h"
#include "common/pool.h"
#include "common/alloc.h"
#include "common/test_support.h"
#include "num/num.h"

static uint64_t rng = 88172645463325252ull;

static uint32_t next32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Mixed magnitudes and signs, some exact zeros and negative zeros. */
static float value(void)
{
    const uint32_t r = next32();
    if (r % 53 == 0) return r & 64 ? -0.0f : 0.0f;
    const float m = (float)(r % 100003) / 100003.0f + 0.1f;
    return (r & 1 ? -m : m) * ldexpf(1.0f, (int)((r >> 8) % 24) - 12);
}

struct wbuf {
    uint8_t *raw;
    struct plena_mat m;
};

/* rows x cols at row stride ld, stored as `type` from byte offset `skew`. */
static void make_w(struct wbuf *w, enum plena_mat_type type, uint32_t rows, uint32_t cols,
                   size_t ld, size_t skew)
{
    const size_t es = type == PLENA_MAT_BF16 ? 2 : 4, n = (size_t)rows * ld;
    w->raw = plena_calloc(n * es + skew + 1, 1);
    assert_non_null(w->raw);
    uint8_t *p = w->raw + skew;
    for (size_t i = 0; i < n; i++) {
        const float v = value();
        if (type == PLENA_MAT_BF16) {
            const uint16_t h = plena_num_bf16_from_f32(v);
            p[2 * i] = (uint8_t)h, p[2 * i + 1] = (uint8_t)(h >> 8);
        } else {
            memcpy(p + 4 * i, &v, 4);
        }
    }
    w->m.data = p, w->m.type = type, w->m.rows = rows, w->m.cols = cols, w->m.ld = ld;
    w->m.owned = NULL, w->m.mapped = 0;
}

/* One case: ref, then every kernel x pool, each compared bitwise. */
static void one_case(enum plena_mat_type type, uint32_t rows, uint32_t cols, uint32_t T, int bias,
                     struct plena_pool **pools, int n_pools)
{
    struct wbuf w;
    const size_t ld = cols + (cols % 3), ldx = cols + 5, ldy = rows + 3;
    make_w(&w, type, rows, cols, ld, 1 + (rows + cols) % 3);
    float *X = plena_calloc((size_t)T * ldx + 1, sizeof *X), *b = plena_calloc(rows, sizeof *b);
    float *ref = plena_calloc((size_t)T * ldy, sizeof *ref),
          *got = plena_calloc((size_t)T * ldy, sizeof *got);
    assert_true(X && b && ref && got);
    for (size_t i = 0; i < (size_t)T * ldx; i++)
        X[i] = value();
    for (uint32_t o = 0; o < rows; o++)
        b[o] = value();
    plena_ckpt_matmul_ref(&w.m, X, ldx, bias ? b : NULL, T, ref, ldy);
    for (int scalar = 0; scalar < 2; scalar++) {
        plena_ckpt_matmul_force_scalar(scalar);
        for (int p = 0; p < n_pools; p++) {
            memset(got, 0xA5, (size_t)T * ldy * sizeof *got);
            plena_ckpt_matmul(pools[p], &w.m, X, ldx, bias ? b : NULL, T, got, ldy);
            for (uint32_t t = 0; t < T; t++)
                if (memcmp(ref + t * ldy, got + t * ldy, rows * sizeof *got)) {
                    for (uint32_t o = 0; o < rows; o++)
                        if (memcmp(&ref[t * ldy + o], &got[t * ldy + o], sizeof *got))
                            fail_msg("%s %s %ux%u T=%u bias %d pool %d: Y[%u][%u] = %a, the "
                                     "scalar loop gives %a",
                                     plena_ckpt_matmul_kernel(),
                                     type == PLENA_MAT_BF16 ? "BF16" : "F32", rows, cols, T, bias,
                                     p, t, o, (double)got[t * ldy + o], (double)ref[t * ldy + o]);
                }
        }
    }
    plena_ckpt_matmul_force_scalar(0);
    plena_free(X), plena_free(b), plena_free(ref), plena_free(got), plena_free(w.raw);
}

static void test_sizes(void **state)
{
    (void)state;
    struct plena_pool *pools[3] = {NULL, plena_pool_new(2), plena_pool_new(3)};
    assert_non_null(pools[1]);
    assert_non_null(pools[2]);
    static const uint32_t rows[] = {1, 7, 8, 9, 16, 17, 23, 24, 25, 49, 100};
    static const uint32_t cols[] = {1, 3, 8, 9, 15, 511, 1023, 1024, 1025, 2060};
    static const uint32_t toks[] = {1, 2, 3, 4, 5, 9, 13};
    unsigned n = 0;
    for (int type = 0; type < 2; type++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
                /* every token count on small shapes, two on the large ones */
                for (size_t t = 0; t < sizeof toks / sizeof *toks; t++) {
                    if (rows[r] * cols[c] > 20000 && t % 3) continue;
                    one_case(type ? PLENA_MAT_BF16 : PLENA_MAT_F32, rows[r], cols[c], toks[t],
                             (int)(n % 2), pools, 3);
                    n++;
                }
            }
    /* large enough for the pool to split the outputs */
    one_case(PLENA_MAT_BF16, 200, 700, 9, 1, pools, 3);
    one_case(PLENA_MAT_F32, 77, 2050, 4, 0, pools, 3);
    plena_pool_free(pools[1]);
    plena_pool_free(pools[2]);
}

/* The data can tell: with these values an FMA-contracted or reordered sum
 * differs from the scalar loop in some output (so the equality above is
 * not vacuous). */
static void test_data_sensitive(void **state)
{
    (void)state;
    const uint32_t rows = 64, cols = 600;
    struct wbuf w;
    make_w(&w, PLENA_MAT_BF16, rows, cols, cols, 0);
    float *X = plena_calloc(cols, sizeof *X), *ref = plena_calloc(rows, sizeof *ref);
    assert_true(X && ref);
    for (uint32_t k = 0; k < cols; k++)
        X[k] = value();
    plena_ckpt_matmul_ref(&w.m, X, cols, NULL, 1, ref, rows);
    unsigned fma_diff = 0, rev_diff = 0;
    for (uint32_t o = 0; o < rows; o++) {
        float f = 0, r = 0;
        for (uint32_t k = 0; k < cols; k++)
            f = fmaf(plena_mat_get(&w.m, o, k), X[k], f);
        for (uint32_t k = cols; k-- > 0;)
            r += plena_mat_get(&w.m, o, k) * X[k];
        fma_diff += memcmp(&f, &ref[o], sizeof f) != 0;
        rev_diff += memcmp(&r, &ref[o], sizeof r) != 0;
    }
    assert_true(fma_diff > rows / 4);
    assert_true(rev_diff > rows / 4);
    plena_free(X), plena_free(ref), plena_free(w.raw);
}

/* y + a x, elementwise, equals the scalar expression for every tail. */
static void axpy_rows_cases(void);

static void test_axpy(void **state)
{
    (void)state;
    axpy_rows_cases();
    for (uint32_t n = 0; n < 40; n++) {
        float y[40], z[40], x[40];
        const float a = value();
        for (uint32_t i = 0; i < n; i++)
            x[i] = value(), y[i] = z[i] = value();
        plena_ckpt_axpy(y, a, x, n);
        for (uint32_t i = 0; i < n; i++) {
            const float want = z[i] + a * x[i];
            assert_memory_equal(&y[i], &want, sizeof want);
        }
    }
}

/* axpy_rows equals m axpy calls of the scalar expression, for blocks of 64,
 * 8-lane and scalar tails. */
static void axpy_rows_cases(void)
{
    enum { N = 150, M = 9, LD = 157 };
    static float X[M * LD], a[M], y[N], z[N];
    for (size_t i = 0; i < M * LD; i++)
        X[i] = value();
    for (uint32_t j = 0; j < M; j++)
        a[j] = value();
    for (uint32_t m = 0; m <= M; m++)
        for (uint32_t n = 0; n <= N; n += n < 20 ? 1 : 13) {
            for (uint32_t i = 0; i < n; i++)
                y[i] = z[i] = value();
            plena_ckpt_axpy_rows(y, a, X, LD, m, n);
            for (uint32_t j = 0; j < m; j++)
                for (uint32_t i = 0; i < n; i++)
                    z[i] = z[i] + a[j] * X[j * LD + i];
            for (uint32_t i = 0; i < n; i++)
                if (memcmp(&y[i], &z[i], sizeof y[i]))
                    fail_msg("m=%u n=%u y[%u] = %a, want %a", m, n, i, (double)y[i], (double)z[i]);
        }
}

int main(void)
{
    printf("# kernel: %s\n", plena_ckpt_matmul_kernel());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_data_sensitive),
        cmocka_unit_test(test_axpy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
