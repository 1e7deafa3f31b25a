/* Private machine layout of the functional emulator, shared by machine.c
 * (allocation, sparse memories, loaders, dumps) and exec.c (the one switch).
 * docs/machine.md "Machine state" is the state this mirrors. Not a public
 * header: other modules use emu.h only. Tests include it for the matrix-kernel
 * cross check. */
#ifndef PLENA_EMU_EMU_INTERNAL_H
#define PLENA_EMU_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "emu/emu.h"
#include "num/num.h"

#define EMU_LOOP_MAX   1024
#define EMU_PAGE_BYTES 65536u /* VRAM and HBM page size */
#define EMU_HOST_PAGE  4096u  /* the host page a mapped image is resident in */
#define HBM_PAGE_SHIFT 16
#define HBM_L2_BITS    16 /* pages per second-level HBM table: 2^16 (4 GiB) */

/* Deferred M_MMs (AVX2 or AVX-512F, BLEN 4, MLEN a multiple of 16): an M_MM is
 * validated when it issues but computed in groups of up to EMU_MM_BATCH, so
 * the kernel runs several independent 63-add chains at once instead of
 * waiting on one chain's latency. The operands stay valid because every
 * instruction that could change them (writes VRAM or MRAM) or observe m_acc
 * flushes the group first (exec.c, emu_mm_batch_safe); so does the end of a run. */
#define EMU_MM_BATCH 4
/* Opcode -> 1 when it may run with M_MMs pending (derived from isa.def). */
extern const uint8_t emu_mm_batch_safe[PLENA_OP_COUNT + 1];
struct emu_mm_pending {
    const float *q; /* X as quads: an X-quad cache entry (below) */
    const float *t; /* T(base) + column start: row r at t + r*MLEN */
};

/* X-quad cache of the same path: an X block (the 4 consecutive VRAM rows an
 * M_MM reads) decoded to f32 and rearranged into MLEN/4 "quads" of 16 floats,
 * lane 4i+s = x_i[r+s]. A GEMM reads each activation block once per column
 * group, so the decode and the cross-lane shuffles are done once per block,
 * not once per M_MM. Validity: emu_vram_row_rw (every VRAM write during a
 * run) drops the entries holding the row it returns; runs start empty; an
 * entry is replaced only when no M_MM is pending (so pending ones never
 * lose their operand). */
#define EMU_XQ_ENTRIES 8
struct emu_xq_entry {
    uint64_t row0; /* first of the 4 rows */
    float *q;      /* MLEN*4 floats, 64-byte aligned */
    int valid;
};

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
    int mlen_shift;  /* log2(MLEN) when a power of two, else -1 */
    int blen_shift;  /* log2(BLEN) when a power of two, else -1 */

    /* Kernel selection. ref_paths != 0 runs every instruction through the
     * scalar reference code (num row helpers, emu_dot_block_ref, plain lane
     * loops); tests set it on one of two machines and compare all state bit
     * for bit. kernel_isa is the best EMU_ISA_* the host supports (chosen
     * once in plena_emu_new; tests may lower it to EMU_ISA_GENERIC). */
    int ref_paths;
    int kernel_isa;

    /* registers */
    uint32_t g[16];
    uint16_t f[16]; /* BF16 bits; only 0..7 are architectural (8..15 trap) */
    uint64_t a[16];
    uint32_t scale, stride, vmask, topk;
    int topk_set;

    /* accumulators */
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
    /* the image's resident pages are dropped (MADV_DONTNEED: a read-only
     * private file mapping, so they are read again from the page cache)
     * once DMA reads may have touched image_drop_every bytes of pages; 0: never */
    uint64_t image_drop_every, image_read, image_drops;
    int image_drop_set; /* plena_emu_set_image_drop was called: no default on load */
    uint64_t hbm_hi;    /* end of the highest 64-byte block written or preloaded */

    /* loop stack (docs/machine.md "Hardware loops") */
    struct emu_loop loops[EMU_LOOP_MAX];
    uint32_t n_loops;
    uint64_t budget_limit; /* min(loop limit, insn_limit, check_at): the next tick to look at */
    uint64_t loop_limit;   /* min(base) + MAX_LOOP_INSTRUCTIONS, or UINT64_MAX */
    /* run limits (plena_emu_set_limits): an instruction count (UINT64_MAX =
     * none), a CLOCK_MONOTONIC deadline (0 = none) and a stop flag, the last
     * two looked at every EMU_CHECK_EVERY instructions (check_at) */
    uint64_t insn_limit, check_at;
    double deadline;
    const volatile sig_atomic_t *stop;

    /* scratch, allocated once */
    float *row_a, *row_b, *row_c; /* VLEN f32 each */
    float *xbuf;                  /* max(BLEN, MLEN) * MLEN f32 (matrix operands) */
    float *tbuf;                  /* MLEN * max(BLEN, MLEN) f32 (transposed tile slice) */
    float *obuf;                  /* MLEN * max(BLEN, MLEN) f32 (kernel outputs) */
    uint8_t *dma_bytes;           /* one row of HBM bytes (elements or scales) */
    struct plena_hbm_txn *txn;    /* transaction list of one H_* instruction */
    size_t txn_cap, n_txn;
    uint64_t *topk_keys;        /* PLENA_TOPK_MAX_EXPERTS sort keys */
    struct plena_mx_lut mx_lut; /* MX decode tables of s.mx_mode (H_PREFETCH_*) */

    struct emu_mm_pending mm_pend[EMU_MM_BATCH];
    uint32_t n_mm_pend;
    struct emu_xq_entry xq[EMU_XQ_ENTRIES];
    void *xq_mem;            /* the entries' storage (unaligned allocation) */
    uint32_t xq_victim;      /* round-robin replacement */
    uint32_t xq_mru;         /* the entry found last (checked first) */
    int mm_deferred;         /* M_MM takes op_mm_deferred (set per run) */
    uint64_t xq_lo, xq_span; /* rows [xq_lo, xq_lo + xq_span) hold every valid entry */
    uint64_t mm_wide_groups; /* groups flushed by mm44_wide / mm42_wide (tests check it) */

    struct plena_trap trap; /* detail of the trap being raised */
};

#define EMU_ISA_GENERIC 0 /* portable C (SSE2-width GCC vectors on x86-64) */
#define EMU_ISA_AVX2    1 /* AVX2 matrix kernels (runtime-detected) */
#define EMU_ISA_AVX512  2 /* AVX-512F 4x4 block kernel, else AVX2 (runtime-detected) */

/* Sparse memory helpers. Row lookup is inline because every vector and matrix
 * instruction does it; only first-touch page allocation is out of line. */
uint16_t *emu_vram_page_alloc(struct plena_emu *e, uint64_t page); /* NULL: out of memory */

static inline uint64_t emu_vpage_of(const struct plena_emu *e, uint64_t row, uint64_t *in_page)
{
    if (e->page_rows_shift >= 0) {
        *in_page = row & (e->page_rows - 1);
        return row >> e->page_rows_shift;
    }
    *in_page = row % e->page_rows;
    return row / e->page_rows;
}

static inline const uint16_t *emu_vram_row_ro(const struct plena_emu *e, uint64_t row)
{
    uint64_t r;
    uint64_t p = emu_vpage_of(e, row, &r);
    const uint16_t *pg = e->vpages[p];
    if (!pg) return e->zero_page;
    return pg + r * e->vlen;
}

void emu_xq_drop_row(struct plena_emu *e, uint64_t row); /* exec.c */
void emu_xq_reset(struct plena_emu *e);

/* NULL: out of memory. Every VRAM write goes through here, which keeps the
 * X-quad cache exact (one compare when the row is outside every entry). */
static inline uint16_t *emu_vram_row_rw(struct plena_emu *e, uint64_t row)
{
    if (row - e->xq_lo < e->xq_span) emu_xq_drop_row(e, row);
    uint64_t r;
    uint64_t p = emu_vpage_of(e, row, &r);
    uint16_t *pg = e->vpages[p];
    if (!pg && !(pg = emu_vram_page_alloc(e, p))) return NULL;
    return pg + r * e->vlen;
}

/* Inline BF16 row conversions with the exact rules of num (docs/numerics.md "BF16":
 * decode = bits << 16; encode = RNE on the upper half, every NaN -> 0x7FC0).
 * Written as fixed 16-element chunks so gcc -O2 vectorises them (its
 * "very cheap" cost model only takes loops with a known trip count); the tail
 * runs the same formula one element at a time. plena_num_bf16_row_* are the
 * reference; test_emu_perfpaths compares both on all 65536 BF16 patterns and
 * on f32 ties, NaNs, infinities, zeros and subnormals. */
#define EMU_CHUNK 16

static inline uint16_t emu_bf16_enc(uint32_t b)
{
    uint32_t r = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    return (b & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)0x7FC0 : (uint16_t)r;
}

static inline void emu_bf16_row_to_f32(const uint16_t *restrict h, float *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + EMU_CHUNK <= n; i += EMU_CHUNK) {
        uint32_t w[EMU_CHUNK];
        for (size_t k = 0; k < EMU_CHUNK; k++)
            w[k] = (uint32_t)h[i + k] << 16;
        memcpy(out + i, w, sizeof w);
    }
    for (; i < n; i++) {
        uint32_t w = (uint32_t)h[i] << 16;
        memcpy(out + i, &w, 4);
    }
}

static inline void emu_bf16_row_from_f32(const float *restrict x, uint16_t *restrict out, size_t n)
{
    size_t i = 0;
    for (; i + EMU_CHUNK <= n; i += EMU_CHUNK) {
        uint32_t w[EMU_CHUNK];
        memcpy(w, x + i, sizeof w);
        for (size_t k = 0; k < EMU_CHUNK; k++)
            out[i + k] = emu_bf16_enc(w[k]);
    }
    for (; i < n; i++) {
        uint32_t w;
        memcpy(&w, x + i, 4);
        out[i] = emu_bf16_enc(w);
    }
}
void emu_hbm_read(const struct plena_emu *e, uint64_t addr, uint8_t *dst, size_t n);
/* DMA reads may have touched n bytes of image pages: bounds the resident
 * part of a large image. */
void emu_hbm_image_tick(struct plena_emu *e, uint64_t n);
/* Cache hint for the bytes emu_hbm_read(e, addr, ., n) would copy (no effect on state). */
void emu_hbm_prefetch(const struct plena_emu *e, uint64_t addr, size_t n);
int emu_hbm_write(struct plena_emu *e, uint64_t addr, const uint8_t *src, size_t n); /* -1 OOM */

/* Matrix kernels (exec.c). Both compute, for i < rows and j < cols,
 *   out[i*cols + j] = dot(x[i*n + r], t[r*ts + j], r < n)
 * with products rounded to f32 and summed in increasing r
 * (docs/numerics.md "Matrix accumulation order"). _ref is the
 * obviously-correct scalar definition; _fast keeps every output chain
 * sequential but interleaves the independent chains so gcc vectorises across
 * j. Tests compare them bit for bit. */
void emu_dot_block_ref(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                       size_t cols, float *out);
void emu_dot_block_fast(const float *x, size_t rows, size_t n, const float *t, size_t ts,
                        size_t cols, float *out);
/* The same, on an explicit kernel family (EMU_ISA_*); an ISA the host lacks
 * falls back to the best one it has below it. emu_dot_block_fast uses the
 * best one the host has. */
void emu_dot_block_isa(int isa, const float *x, size_t rows, size_t n, const float *t, size_t ts,
                       size_t cols, float *out);
int emu_host_isa(void);

#endif
