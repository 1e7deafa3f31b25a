/* Expert-major routing plan (route_plan.h): a counting sort of each token
 * block's pairs by expert, O(T*k + E), stable in pair order, and the table
 * image the program streams with H_PREFETCH_S. */
#include "gen/route_plan.h"

#include <string.h>

#include "common/alloc.h"

static uint32_t cdiv(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a;
}

uint64_t plena_route_max_segments(uint32_t t_blk, uint32_t k, uint32_t E, uint32_t blen,
                                  uint32_t max_tiles)
{
    const uint64_t pairs = (uint64_t)t_blk * k;
    uint64_t segs = pairs < E ? pairs : E;
    if (max_tiles) segs += pairs / ((uint64_t)max_tiles * blen);
    return segs;
}

uint64_t plena_route_max_slots(uint32_t t_blk, uint32_t k, uint32_t E, uint32_t blen,
                               uint32_t max_tiles)
{
    return (uint64_t)t_blk * k +
           plena_route_max_segments(t_blk, k, E, blen, max_tiles) * (blen - 1);
}

uint64_t plena_route_count_table_bytes(uint32_t n_max)
{
    return ((uint64_t)n_max + 1) * PLENA_ROUTE_REC_BYTES;
}

static void put32(uint8_t *o, uint32_t v)
{
    o[0] = (uint8_t)v;
    o[1] = (uint8_t)(v >> 8);
    o[2] = (uint8_t)(v >> 16);
    o[3] = (uint8_t)(v >> 24);
}

void plena_route_count_table(uint32_t n_max, uint32_t blen, uint32_t max_tiles, uint8_t *out)
{
    memset(out, 0, plena_route_count_table_bytes(n_max));
    for (uint32_t n = 1; n <= n_max; n++) {
        uint8_t *r = out + (uint64_t)n * PLENA_ROUTE_REC_BYTES;
        const uint32_t tiles = cdiv(n, blen), nrec = cdiv(tiles, max_tiles);
        put32(r + 4 * PLENA_CNT_ROWS, tiles * blen);
        put32(r + 4 * PLENA_CNT_NREC_M1, nrec - 1);
        put32(r + 4 * PLENA_CNT_REC_STEP, PLENA_DEV_WORDS);
        put32(r + 4 * PLENA_CNT_LAST_TM1, tiles - (nrec - 1) * max_tiles - 1);
        put32(r + 4 * PLENA_CNT_NREC, nrec);
    }
}

void plena_route_plan_free(struct plena_route_plan *p)
{
    if (!p) return;
    plena_free(p->blk);
    plena_free(p->seg);
    plena_free(p->slot_of_pair);
    plena_free(p->pair_of_slot);
    memset(p, 0, sizeof *p);
}

static int nomem(struct plena_route_plan *p, struct plena_err *err)
{
    plena_route_plan_free(p);
    return PLENA_FAIL(err, PLENA_E_NOMEM, "routing plan", "out of memory");
}

int plena_route_plan_build(struct plena_route_plan *p, uint32_t T, uint32_t k, uint32_t E,
                           uint32_t t_blk, uint32_t blen, uint32_t vlen, uint32_t max_tiles,
                           const uint32_t *ids, struct plena_err *err)
{
    memset(p, 0, sizeof *p);
    if (!ids || T == 0 || k == 0 || E == 0 || t_blk == 0 || blen == 0 || max_tiles == 0)
        return PLENA_FAIL(err, PLENA_E_INPUT, "routing plan",
                          "needs ids, T, k, E, a token block, BLEN and a tile limit (got T %u, k "
                          "%u, E %u, T_blk %u, BLEN %u, tiles %u)",
                          T, k, E, t_blk, blen, max_tiles);
    p->T = T;
    p->k = k;
    p->E = E;
    p->blen = blen;
    p->vlen = vlen;
    p->t_blk = t_blk;
    p->max_tiles = max_tiles;
    p->n_blocks = cdiv(T, t_blk);
    p->comb_int_recs = cdiv(k, PLENA_ROUTE_REC_INTS);
    p->comb_fp_recs = cdiv(k, PLENA_ROUTE_REC_HALFS);
    const size_t n_pairs = (size_t)T * k;
    p->blk = plena_calloc(p->n_blocks, sizeof *p->blk);
    p->slot_of_pair = plena_calloc(n_pairs, sizeof *p->slot_of_pair);
    uint32_t *count = plena_calloc(E, sizeof *count), *fill = plena_calloc(E, sizeof *fill);
    unsigned char *seen = plena_calloc(E, 1);
    if (!p->blk || !p->slot_of_pair || !count || !fill || !seen) {
        plena_free(count);
        plena_free(fill);
        plena_free(seen);
        return nomem(p, err);
    }
    for (size_t i = 0; i < n_pairs; i++) {
        if (ids[i] >= E) {
            plena_free(count);
            plena_free(fill);
            plena_free(seen);
            plena_route_plan_free(p);
            return PLENA_FAIL(err, PLENA_E_INPUT, "fixed routing",
                              "pair %zu (token %zu, rank %zu): expert id %u >= E = %u", i, i / k,
                              i % k, ids[i], E);
        }
        if (!seen[ids[i]]) p->active_experts++;
        seen[ids[i]] = 1;
    }
    /* pass 1: segments and slots per block */
    size_t cap_seg = 0;
    uint64_t slot_total = 0;
    int rc = 0;
    for (uint32_t b = 0; b < p->n_blocks && !rc; b++) {
        struct plena_route_block *bk = &p->blk[b];
        bk->r0 = b * t_blk;
        bk->n = T - bk->r0 < t_blk ? T - bk->r0 : t_blk;
        bk->n_pairs = bk->n * k;
        bk->seg0 = p->n_seg;
        memset(count, 0, E * sizeof *count);
        const uint32_t *bid = ids + (size_t)bk->r0 * k;
        for (uint32_t i = 0; i < bk->n_pairs; i++)
            count[bid[i]]++;
        uint32_t slot = 0;
        for (uint32_t e = 0; e < E; e++) {
            fill[e] = slot; /* the expert's first slot: pairs land in pair order */
            uint32_t left = count[e];
            while (left) {
                uint32_t rows = left < max_tiles * blen ? left : max_tiles * blen;
                if (plena_grow((void **)&p->seg, &cap_seg, p->n_seg + 1, sizeof *p->seg)) {
                    rc = 1;
                    break;
                }
                struct plena_route_segment *s = &p->seg[p->n_seg++];
                s->expert = e;
                s->slot0 = slot;
                s->tiles = cdiv(rows, blen);
                slot += s->tiles * blen;
                left -= rows;
            }
        }
        bk->n_seg = p->n_seg - bk->seg0;
        bk->n_slots = slot;
        bk->n_groups = cdiv(slot ? slot : 1, PLENA_ROUTE_REC_INTS);
        if (slot > p->max_slots) p->max_slots = slot;
        /* pairs in pair order into their expert's slots; a split expert's
         * segments are consecutive, so its slots are fill[e], fill[e] + 1, ...
         * except that a split leaves no padding inside (full tiles) */
        for (uint32_t i = 0; i < bk->n_pairs; i++)
            p->slot_of_pair[(size_t)bk->r0 * k + i] = fill[bid[i]]++;
        slot_total += slot;
    }
    plena_free(count);
    plena_free(fill);
    plena_free(seen);
    if (rc) return nomem(p, err);
    /* pass 2: slot -> pair, padding slots and offsets of the tables */
    p->slot_base_total = slot_total;
    p->pair_of_slot = plena_malloc((slot_total ? slot_total : 1) * sizeof *p->pair_of_slot);
    if (!p->pair_of_slot) return nomem(p, err);
    memset(p->pair_of_slot, 0xFF, (slot_total ? slot_total : 1) * sizeof *p->pair_of_slot);
    uint64_t sbase = 0, off = 0;
    for (uint32_t b = 0; b < p->n_blocks; b++) {
        struct plena_route_block *bk = &p->blk[b];
        for (uint32_t i = 0; i < bk->n_pairs; i++) {
            uint32_t pr = bk->r0 * k + i;
            p->pair_of_slot[sbase + p->slot_of_pair[pr]] = pr;
        }
        p->padding_rows += bk->n_slots - bk->n_pairs;
        sbase += bk->n_slots;
        bk->seg_off = off;
        off += (uint64_t)bk->n_seg * PLENA_ROUTE_REC_BYTES;
        bk->gather_off = off;
        off += (uint64_t)bk->n_groups * PLENA_ROUTE_REC_BYTES;
        bk->comb_off = off;
        off += (uint64_t)bk->n * p->comb_int_recs * PLENA_ROUTE_REC_BYTES;
        bk->comb_w_off = off;
        off += (uint64_t)bk->n * p->comb_fp_recs * PLENA_ROUTE_REC_BYTES;
        bk->in_w_off = off;
        off += (uint64_t)bk->n_groups * PLENA_ROUTE_REC_BYTES;
    }
    p->region_bytes = off;
    return 0;
}

static void put16(uint8_t *o, uint16_t v)
{
    o[0] = (uint8_t)v;
    o[1] = (uint8_t)(v >> 8);
}

void plena_route_plan_tables(const struct plena_route_plan *p, const uint16_t *w16,
                             int input_weights, uint32_t zero_row,
                             uint64_t (*addr)(const void *ctx, int q, uint32_t e),
                             const void *addr_ctx, uint8_t *out)
{
    memset(out, 0, p->region_bytes);
    const uint32_t V = p->vlen, B = p->blen, k = p->k;
    uint64_t sbase = 0;
    for (uint32_t b = 0; b < p->n_blocks; b++) {
        const struct plena_route_block *bk = &p->blk[b];
        for (uint32_t i = 0; i < bk->n_seg; i++) {
            const struct plena_route_segment *s = &p->seg[bk->seg0 + i];
            uint8_t *r = out + bk->seg_off + (uint64_t)i * PLENA_ROUTE_REC_BYTES;
            put32(r + 4 * PLENA_SEG_EXPERT, s->expert);
            put32(r + 4 * PLENA_SEG_TILES_M1, s->tiles - 1);
            put32(r + 4 * PLENA_SEG_ROW_OFF, s->slot0 * V);
            put32(r + 4 * PLENA_SEG_ROWS_M1, s->tiles * B - 1);
            for (int q = 0; q < 3; q++) {
                uint64_t a = addr(addr_ctx, q, s->expert);
                put32(r + 4 * (PLENA_SEG_ADDR_HI0 + 2 * q), (uint32_t)(a >> 32));
                put32(r + 4 * (PLENA_SEG_ADDR_HI0 + 2 * q + 1), (uint32_t)a);
            }
            put32(r + 4 * PLENA_SEG_BIAS_OFF, s->expert * V);
        }
        /* gather: every slot of every record (slots past n_slots read the
         * zero row too, so a record is never half stale) */
        for (uint32_t s = 0; s < bk->n_groups * PLENA_ROUTE_REC_INTS; s++) {
            uint32_t pr = s < bk->n_slots ? p->pair_of_slot[sbase + s] : UINT32_MAX;
            uint32_t row = pr == UINT32_MAX ? zero_row - bk->r0 : pr / k - bk->r0;
            put32(out + bk->gather_off + 4ull * s, row * V);
            if (input_weights)
                put16(out + bk->in_w_off +
                          (uint64_t)(s / PLENA_ROUTE_REC_INTS) * PLENA_ROUTE_REC_BYTES +
                          2ull * (s % PLENA_ROUTE_REC_INTS),
                      pr == UINT32_MAX ? 0 : w16[pr]);
        }
        for (uint32_t t = 0; t < bk->n; t++)
            for (uint32_t j = 0; j < k; j++) {
                uint32_t pr = (bk->r0 + t) * k + j;
                put32(out + bk->comb_off + (uint64_t)t * p->comb_int_recs * PLENA_ROUTE_REC_BYTES +
                          4ull * j,
                      p->slot_of_pair[pr] * V);
                put16(out + bk->comb_w_off + (uint64_t)t * p->comb_fp_recs * PLENA_ROUTE_REC_BYTES +
                          2ull * j,
                      w16[pr]);
            }
        sbase += bk->n_slots;
    }
}
