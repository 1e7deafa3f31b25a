/* Exact-order matrix products of the forward pass (docs/traces.md "What is
 * computed", docs/design.md "Exact-order register-blocked kernels"): every
 * output is one sequential chain over k, starting from +0, each product
 * rounded to f32 and then added, k increasing — the value of the plain
 * scalar loop, with no FMA. Speed comes from the chains' independence only:
 * each SIMD lane carries a different output's chain and several tokens share
 * each weight load; BF16 weights are decoded in registers straight from the
 * checkpoint's mmap. The result never depends on the kernel chosen, the
 * blocking or the thread count. */
#ifndef PLENA_CKPT_MATMUL_H
#define PLENA_CKPT_MATMUL_H

#include <stddef.h>
#include <stdint.h>

struct plena_pool;

/* Element types of a weight matrix as stored (little-endian). */
enum plena_mat_type { PLENA_MAT_F32, PLENA_MAT_BF16 };

/* A row-major matrix of `rows` x `cols` elements, row r at byte
 * data + r * ld * elem_size (ld >= cols, in elements). data may point into
 * a read-only mmap at any alignment. owned: data was allocated for this
 * matrix (plena_mat_free releases it); otherwise it is borrowed. */
struct plena_mat {
    const void *data;
    enum plena_mat_type type;
    uint32_t rows, cols;
    size_t ld;
    void *owned;
    int mapped; /* data lies in a read-only file mapping (plena_mat_release may drop it) */
};

/* A borrowed f32 view of a[rows][ld]. */
struct plena_mat plena_mat_f32(const float *a, uint32_t rows, uint32_t cols, size_t ld);
void plena_mat_free(struct plena_mat *m);
/* Drops the whole pages of a mapped matrix from this process's resident set
 * (madvise MADV_DONTNEED; the kernel's page cache keeps them, a later read
 * maps them again). No effect on a matrix that is not mapped. */
void plena_mat_release(const struct plena_mat *m);
/* Element (r, c) and row r as f32 (exact widening). */
float plena_mat_get(const struct plena_mat *m, uint32_t r, uint32_t c);
void plena_mat_row(const struct plena_mat *m, uint32_t r, float *out);

/* Y[t][o] = sum_k W[o][k] X[t][k] for t < T, o < W->rows, k < W->cols
 * (the chain of the header comment), then + b[o] when b is not NULL; X rows
 * at stride ldx, Y rows at stride ldy (floats). With a pool of more than one
 * thread the outputs are split into disjoint ranges; Y is identical for
 * every pool. Y must not overlap X. */
void plena_ckpt_matmul(struct plena_pool *pool, const struct plena_mat *W, const float *X,
                       size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy);
/* The same for outputs [o_lo, o_hi) only, on the calling thread. */
void plena_ckpt_matmul_rows(const struct plena_mat *W, uint32_t o_lo, uint32_t o_hi, const float *X,
                            size_t ldx, const float *b, uint32_t T, float *Y, size_t ldy);
/* The plain scalar loop the kernels must equal bit for bit (tests). */
void plena_ckpt_matmul_ref(const struct plena_mat *W, const float *X, size_t ldx, const float *b,
                           uint32_t T, float *Y, size_t ldy);

/* y[i] = y[i] + a * x[i] for i < n (product rounded, then added). */
void plena_ckpt_axpy(float *y, float a, const float *x, uint32_t n);
/* For j = 0 .. m-1 in order: y[i] = y[i] + a[j] * X[j][i] for i < n (X rows
 * at stride ldx): each y[i] one chain over j, the value of m axpy calls. */
void plena_ckpt_axpy_rows(float *y, const float *a, const float *X, size_t ldx, uint32_t m,
                          uint32_t n);

/* The kernel in use: "avx2" or "scalar". plena_ckpt_matmul_force_scalar(1)
 * selects the portable kernel (tests compare the two); 0 restores the
 * runtime choice. */
const char *plena_ckpt_matmul_kernel(void);
void plena_ckpt_matmul_force_scalar(int on);

#endif
