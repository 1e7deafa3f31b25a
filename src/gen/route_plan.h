/* The expert-major routing plan of a layer (docs/lowering.md "Expert-major"):
 * per token block, the pairs sorted by expert with a counting sort, one
 * segment per active expert (split when it would exceed the loop budget),
 * BLEN-row tiles with padding slots that read a true-zero row, and the byte
 * image of the routing tables the program streams into INT/FP SRAM with
 * H_PREFETCH_S. The generator reads the plan for its loop counts and table
 * offsets, the stager writes its table image into hbm.bin; both compute it
 * with this one function from the same ids, so they cannot disagree. It does
 * not emit instructions. */
#ifndef PLENA_GEN_ROUTE_PLAN_H
#define PLENA_GEN_ROUTE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* One routing-table record is one 64-byte HBM block: 16 u32 words (INT SRAM)
 * or 32 fp16 halves (FP SRAM), what one H_PREFETCH_S moves. */
#define PLENA_ROUTE_REC_BYTES 64u
#define PLENA_ROUTE_REC_INTS  16u
#define PLENA_ROUTE_REC_HALFS 32u

/* Words of a segment record (u32 index in its 64-byte record). */
enum plena_route_seg_word {
    PLENA_SEG_EXPERT = 0,    /* expert id */
    PLENA_SEG_TILES_M1 = 1,  /* BLEN-row tiles - 1 (a live loop count) */
    PLENA_SEG_ROW_OFF = 2,   /* first slot x VLEN: the segment's row offset in a column block */
    PLENA_SEG_ROWS_M1 = 3,   /* tiles x BLEN - 1 */
    PLENA_SEG_ADDR_HI0 = 4,  /* weight base of projection q: hi at 4 + 2q, lo at 5 + 2q */
    PLENA_SEG_BIAS_OFF = 10, /* expert id x VLEN: the expert's bias row in a column block */
    PLENA_SEG_WORDS = 11
};

struct plena_route_segment {
    uint32_t expert;
    uint32_t slot0; /* first slot of the segment, a multiple of BLEN */
    uint32_t tiles; /* >= 1 */
};

struct plena_route_block {
    uint32_t r0, n;       /* first token and token count of the block */
    uint32_t n_pairs;     /* n x k */
    uint32_t seg0, n_seg; /* its segments in plan->seg */
    uint32_t n_slots;     /* rows issued to the expert FFN: sum of tiles x BLEN */
    uint32_t n_groups;    /* gather records: ceil(n_slots / 16) */
    /* byte offsets of the block's tables in the routing region */
    uint64_t seg_off, gather_off, comb_off, comb_w_off, in_w_off;
};

struct plena_route_plan {
    uint32_t T, k, E, blen, vlen, t_blk, max_tiles;
    uint32_t n_blocks;
    struct plena_route_block *blk; /* [n_blocks] */
    struct plena_route_segment *seg;
    uint32_t n_seg;
    uint32_t *slot_of_pair; /* [T*k]: the pair's slot within its block */
    uint32_t
        *pair_of_slot; /* per block, n_slots entries each, concatenated; UINT32_MAX = padding */
    uint64_t slot_base_total; /* entries of pair_of_slot */
    uint32_t comb_int_recs;   /* INT records per token for the combine: ceil(k/16) */
    uint32_t comb_fp_recs;    /* FP records per token: ceil(k/32) */
    uint64_t region_bytes;    /* the routing region's size */
    /* layer-wide figures (routing_stats) */
    uint32_t active_experts; /* experts with at least one pair */
    uint64_t padding_rows;   /* slots without a pair */
    uint32_t max_slots;      /* largest n_slots of any block */
};

/* Segments a block of t_blk tokens can have at most: one per active expert
 * (<= min(E, pairs)) plus one per split, a split happening only after
 * max_tiles full tiles. */
uint64_t plena_route_max_segments(uint32_t t_blk, uint32_t k, uint32_t E, uint32_t blen,
                                  uint32_t max_tiles);
/* Slots a block of t_blk tokens can need at most: every pair, plus BLEN - 1
 * padding for every segment (one per active expert, plus splits). */
uint64_t plena_route_max_slots(uint32_t t_blk, uint32_t k, uint32_t E, uint32_t blen,
                               uint32_t max_tiles);

/* Builds the plan of T tokens in blocks of t_blk for ids[T*k] (pair order
 * t*k+j) on experts < E; segments longer than max_tiles tiles are split.
 * ids NULL: no plan (PLENA_E_INPUT). The plan must be freed. */
int plena_route_plan_build(struct plena_route_plan *p, uint32_t T, uint32_t k, uint32_t E,
                           uint32_t t_blk, uint32_t blen, uint32_t vlen, uint32_t max_tiles,
                           const uint32_t *ids, struct plena_err *err);
void plena_route_plan_free(struct plena_route_plan *p);

/* ---- the count table of the device sort ----
 * Device routing sorts on the device (expert_major.c), which has no divide
 * or compare: what an expert with n pairs in a block needs (its padded
 * slots, how many segment records, the last one's tiles) is record n of a
 * table in HBM, one 64-byte record per n = 0..n_max, fetched with
 * H_PREFETCH_S at offset 64 n. Splits follow the plan's rule: segments of
 * max_tiles tiles, the remainder last. */
enum plena_route_cnt_word {
    PLENA_CNT_ROWS = 0,     /* BLEN x ceil(n / BLEN): the expert's slots */
    PLENA_CNT_NREC_M1 = 1,  /* segment records - 1 (0 for n = 0: one dummy write) */
    PLENA_CNT_REC_STEP = 2, /* words the record pointer moves per record: 2, 0 for n = 0 */
    PLENA_CNT_LAST_TM1 = 3, /* tiles - 1 of the last segment (0 for n = 0) */
    PLENA_CNT_NREC = 4,     /* segment records (0 for n = 0) */
    PLENA_CNT_WORDS = 5
};
/* Words of a device segment record in INT SRAM. */
enum plena_route_dev_word { PLENA_DEV_EXPERT = 0, PLENA_DEV_TILES_M1 = 1, PLENA_DEV_WORDS = 2 };
/* Bytes of the count table for n = 0..n_max. */
uint64_t plena_route_count_table_bytes(uint32_t n_max);
/* Writes the count table (little-endian u32 words, the rest of each record 0). */
void plena_route_count_table(uint32_t n_max, uint32_t blen, uint32_t max_tiles, uint8_t *out);

/* The routing region's bytes (little-endian): per block the segment
 * records, the gather records (source row offsets: token x VLEN, padding =
 * zero_row x VLEN, both relative to the block's first row), the combine
 * records per token (slot x VLEN per rank) and their fp16 route weights, and
 * with input_weights the per-slot fp16 weights of the gather (Llama-4).
 * addr(q, e) gives the HBM weight base of projection q of expert e.
 * w16[T*k] are the route weights as fp16 image halves (the same halves the
 * FP SRAM preload of pair-major holds). out has p->region_bytes bytes. */
void plena_route_plan_tables(const struct plena_route_plan *p, const uint16_t *w16,
                             int input_weights, uint32_t zero_row,
                             uint64_t (*addr)(const void *ctx, int q, uint32_t e),
                             const void *addr_ctx, uint8_t *out);

#endif
