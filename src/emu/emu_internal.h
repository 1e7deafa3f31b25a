/* Private machine layout of the functional emulator, shared by machine.c
 * (allocation, sparse memories, loaders, dumps) and exec.c (the one switch).
 * spec/isa.md section 2 is the state this mirrors. Not a public header: other
 * modules use emu.h only. Tests include it for the matrix-kernel cross check. */
#ifndef PLENA_EMU_EMU_INTERNAL_H
#define PLENA_EMU_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "emu/emu.h"

#define EMU_LOOP_MAX   1024
#define EMU_PAGE_BYTES 65536u /* VRAM and HBM page size */
#define HBM_PAGE_SHIFT 16
#define HBM_L2_BITS    16 /* pages per second-level HBM table: 2^16 (4 GiB) */
#define EMU_TOPK_MAX_E 16383u
#define EMU_TOPK_MAX_K 255u

struct emu_loop {
    uint32_t start_pc;
    uint8_t reg;
    uint64_t base; /* tick at which this entry's count was 0 (count = tick - base) */
};

struct plena_emu {
    struct plena_settings s;
    /* geometry copied from s, widened once */
    uint32_t mlen, vlen, blen, hlen, ba;
    uint64_t mlen2;     /* MLEN^2: elements per tile */
    uint64_t vram_rows; /* VECTOR_SRAM_SIZE */
    uint32_t tiles;     /* MRAM tiles */
    uint32_t fp_depth, int_depth;
    int vlen_shift;  /* log2(VLEN) when a power of two, else -1 */
    int mlen2_shift; /* log2(MLEN^2) when a power of two, else -1 */

    /* registers (section 2.1/2.2) */
    uint32_t g[16];
    uint16_t f[16]; /* BF16 bits; only 0..7 are architectural (8..15 trap) */
    uint64_t a[16];
    uint32_t scale, stride, vmask, topk;
    int topk_set;

    /* accumulators (section 2.3) */
    float *m_acc;  /* BLEN*BLEN */
    float *v_acc;  /* BLEN */
    float *hm_acc; /* BA*MLEN*MLEN, NULL unless BA*HLEN == MLEN */
    float *hv_acc; /* BA*MLEN, NULL unless BA*HLEN == MLEN */

    /* memories */
    float *mram; /* tiles * MLEN^2 f32, dense (1 MiB at defaults) */
    uint16_t *fpsram;
    uint32_t *intsram;
    /* VRAM: sparse, page_rows rows per page; absent pages read as zeros */
    uint16_t **vpages;
    uint64_t n_vpages, page_rows, page_elems;
    int page_rows_shift;       /* log2(page_rows) when a power of two, else -1 */
    const uint16_t *zero_page; /* page_elems zeros (also EMU_PAGE_BYTES zero bytes) */
    /* HBM: two-level sparse overlay over an optional read-only mapped image */
    uint64_t hbm_size;
    uint8_t ***hbm_l1; /* [n_l1][2^HBM_L2_BITS] page pointers */
    uint64_t n_hbm_l1;
    const uint8_t *image; /* mmap'ed hbm image or NULL */
    uint64_t image_len;
    uint64_t hbm_hi; /* end of the highest 64-byte block written or preloaded */

    /* loop stack (section 12) */
    struct emu_loop loops[EMU_LOOP_MAX];
    uint32_t n_loops;
    uint64_t budget_limit; /* min(base) + MAX_LOOP_INSTRUCTIONS, or UINT64_MAX */

    /* scratch, allocated once */
    float *row_a, *row_b, *row_c; /* VLEN f32 each */
    float *xbuf;                  /* max(BLEN, MLEN) * MLEN f32 (matrix operands) */
    float *tbuf;                  /* MLEN * max(BLEN, MLEN) f32 (transposed tile slice) */
    float *obuf;                  /* MLEN * max(BLEN, MLEN) f32 (kernel outputs) */
    uint8_t *dma_bytes;           /* one row of HBM bytes (elements or scales) */
    struct plena_hbm_txn *txn;    /* transaction list of one H_* instruction */
    size_t txn_cap, n_txn;
    uint64_t *topk_keys; /* EMU_TOPK_MAX_E sort keys */

    struct plena_trap trap; /* detail of the trap being raised */
};

/* Sparse memory helpers (machine.c). */
const uint16_t *emu_vram_row_ro(const struct plena_emu *e, uint64_t row);
uint16_t *emu_vram_row_rw(struct plena_emu *e, uint64_t row); /* NULL: out of memory */
void emu_hbm_read(const struct plena_emu *e, uint64_t addr, uint8_t *dst, size_t n);
int emu_hbm_write(struct plena_emu *e, uint64_t addr, const uint8_t *src, size_t n); /* -1 OOM */

/* Matrix kernels (exec.c). Both compute, for i < rows and j < cols,
 *   out[i*cols + j] = dot(x[i*n + r], t[r*ts + j], r < n)
 * with products rounded to f32 and summed in increasing r (spec/numerics 6).
 * _ref is the obviously-correct scalar definition; _fast keeps every output
 * chain sequential but interleaves the independent chains so gcc vectorises
 * across j. Tests compare them bit for bit. */
void emu_dot_block_ref(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                       size_t cols, float *out);
void emu_dot_block_fast(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                        size_t cols, float *out);

#endif
