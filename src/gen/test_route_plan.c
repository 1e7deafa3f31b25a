/* The expert-major routing plan (gen/route_plan.h) on hand-made routings:
 * the counting sort, padding, segment splits and the table bytes, every
 * expected value worked out by hand in the comments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "gen/route_plan.h"
#include "common/test_support.h"

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t fake_addr(const void *ctx, int q, uint32_t e)
{
    (void)ctx;
    return ((uint64_t)(q + 1) << 32) | (e * 1000u);
}

/* T = 3, k = 2, E = 4, BLEN 4, VLEN 64: tokens route to (2, 0), (0, 3), (2, 0).
 * Expert 0 has pairs 1, 2, 5 (slots 0..2, slot 3 padding), expert 2 pairs 0, 4
 * (slots 4, 5), expert 3 pair 3 (slot 8); expert 1 is idle. */
static void test_sort_and_tables(void **state)
{
    (void)state;
    const uint32_t ids[6] = {2, 0, 0, 3, 2, 0};
    struct plena_route_plan p;
    assert_int_equal(plena_route_plan_build(&p, 3, 2, 4, 3, 4, 64, 100, ids, NULL), 0);
    assert_int_equal(p.n_blocks, 1);
    assert_int_equal(p.n_seg, 3);
    assert_int_equal(p.active_experts, 3);
    assert_int_equal(p.seg[0].expert, 0);
    assert_int_equal(p.seg[0].slot0, 0);
    assert_int_equal(p.seg[0].tiles, 1);
    assert_int_equal(p.seg[1].expert, 2);
    assert_int_equal(p.seg[1].slot0, 4);
    assert_int_equal(p.seg[2].expert, 3);
    assert_int_equal(p.seg[2].slot0, 8);
    assert_int_equal(p.blk[0].n_slots, 12);
    assert_int_equal(p.padding_rows, 6);
    static const uint32_t want_slot[6] = {4, 0, 1, 8, 5, 2};
    for (int i = 0; i < 6; i++)
        assert_int_equal(p.slot_of_pair[i], want_slot[i]);
    static const uint32_t want_pair[12] = {
        1, 2, 5, UINT32_MAX, 0, 4, UINT32_MAX, UINT32_MAX, 3, UINT32_MAX, UINT32_MAX, UINT32_MAX};
    for (int i = 0; i < 12; i++)
        assert_int_equal(p.pair_of_slot[i], want_pair[i]);
    /* region: 3 segment records, 1 gather record, 3 tokens x 1 INT record,
     * 3 tokens x 1 FP record, 1 input-weight record = 11 x 64 bytes */
    assert_int_equal(p.region_bytes, 11 * 64);
    uint16_t w16[6] = {0x3800, 0x3400, 0x3C00, 0x3000, 0x2C00, 0x2800};
    uint8_t *t = plena_malloc(p.region_bytes);
    assert_non_null(t);
    plena_route_plan_tables(&p, w16, 1, 7, fake_addr, NULL, t);
    const uint8_t *s1 = t + p.blk[0].seg_off + 64; /* expert 2's record */
    assert_int_equal(get32(s1 + 4 * PLENA_SEG_EXPERT), 2);
    assert_int_equal(get32(s1 + 4 * PLENA_SEG_TILES_M1), 0);
    assert_int_equal(get32(s1 + 4 * PLENA_SEG_ROW_OFF), 4 * 64);
    assert_int_equal(get32(s1 + 4 * PLENA_SEG_ROWS_M1), 3);
    assert_int_equal(get32(s1 + 4 * (PLENA_SEG_ADDR_HI0 + 2)), 2);    /* up (q 1): hi 2 */
    assert_int_equal(get32(s1 + 4 * (PLENA_SEG_ADDR_HI0 + 3)), 2000); /* lo 2 x 1000 */
    assert_int_equal(get32(s1 + 4 * PLENA_SEG_BIAS_OFF), 2 * 64);
    /* gather: slot 0 <- token 0 (pair 1), slot 3 <- the zero row 7, slot 8 <- token 1 */
    const uint8_t *g = t + p.blk[0].gather_off;
    assert_int_equal(get32(g + 0), 0);
    assert_int_equal(get32(g + 4 * 2), 2 * 64);
    assert_int_equal(get32(g + 4 * 3), 7 * 64);
    assert_int_equal(get32(g + 4 * 8), 1 * 64);
    assert_int_equal(get32(g + 4 * 15), 7 * 64);
    /* combine: token 1 reads slots 1 (pair 2) and 8 (pair 3), weights 0x3C00, 0x3000 */
    const uint8_t *cb = t + p.blk[0].comb_off + 64;
    assert_int_equal(get32(cb), 1 * 64);
    assert_int_equal(get32(cb + 4), 8 * 64);
    const uint8_t *cw = t + p.blk[0].comb_w_off + 64;
    assert_int_equal(cw[0] | cw[1] << 8, 0x3C00);
    assert_int_equal(cw[2] | cw[3] << 8, 0x3000);
    /* input weights: slot 4 holds pair 0's weight, padding slot 3 weight 0 */
    const uint8_t *iw = t + p.blk[0].in_w_off;
    assert_int_equal(iw[8] | iw[9] << 8, 0x3800);
    assert_int_equal(iw[6] | iw[7] << 8, 0);
    plena_free(t);
    plena_route_plan_free(&p);
}

/* every token to expert 1 (T = 9, k = 1), at most 1 tile per segment with
 * BLEN 4: segments of 4, 4 and 1 rows (3 segments, tiles 1 each, slots
 * 0, 4, 8); blocks of 4 tokens split the pairs into 3 blocks. */
static void test_splits_and_blocks(void **state)
{
    (void)state;
    uint32_t ids[9];
    for (int i = 0; i < 9; i++)
        ids[i] = 1;
    struct plena_route_plan p;
    assert_int_equal(plena_route_plan_build(&p, 9, 1, 2, 9, 4, 64, 1, ids, NULL), 0);
    assert_int_equal(p.n_seg, 3);
    assert_int_equal(p.seg[1].slot0, 4);
    assert_int_equal(p.seg[2].slot0, 8);
    assert_int_equal(p.blk[0].n_slots, 12);
    assert_int_equal(p.padding_rows, 3);
    assert_int_equal(p.slot_of_pair[8], 8);
    plena_route_plan_free(&p);
    assert_int_equal(plena_route_plan_build(&p, 9, 1, 2, 4, 4, 64, 1, ids, NULL), 0);
    assert_int_equal(p.n_blocks, 3);
    assert_int_equal(p.blk[2].r0, 8);
    assert_int_equal(p.blk[2].n, 1);
    assert_int_equal(p.blk[1].n_seg, 1);
    assert_int_equal(p.slot_of_pair[5], 1); /* token 5 is block 1's second row */
    /* the bound of plena_route_max_slots holds for every block */
    uint64_t bound = plena_route_max_slots(4, 1, 2, 4, 1);
    for (uint32_t b = 0; b < p.n_blocks; b++)
        assert_true(p.blk[b].n_slots <= bound);
    plena_route_plan_free(&p);
}

static void test_bad_ids(void **state)
{
    (void)state;
    const uint32_t ids[2] = {0, 4};
    struct plena_route_plan p;
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_route_plan_build(&p, 1, 2, 4, 1, 4, 64, 8, ids, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "expert id 4 >= E = 4"));
    assert_int_equal(plena_route_plan_build(&p, 1, 2, 4, 1, 4, 64, 8, NULL, NULL), PLENA_E_INPUT);
}

/* The count table of the device sort, BLEN 4, at most 2 tiles a segment:
 * n = 0 all zero (one dummy record write, pointer step 0); n = 1 and 4 one
 * tile (rows 4); n = 5 two tiles in one segment (rows 8, last tiles-1 = 1);
 * n = 9 three tiles, split 2 + 1 (rows 12, two records, the last 1 tile). */
static void test_count_table(void **state)
{
    (void)state;
    const uint32_t n_max = 10;
    assert_int_equal(plena_route_count_table_bytes(n_max), 11 * 64);
    uint8_t *t = plena_malloc(11 * 64);
    assert_non_null(t);
    memset(t, 0xAB, 11 * 64);
    plena_route_count_table(n_max, 4, 2, t);
    static const struct {
        uint32_t n, rows, nrec_m1, step, last_tm1, nrec;
    } want[] = {{0, 0, 0, 0, 0, 0}, {1, 4, 0, 2, 0, 1},  {4, 4, 0, 2, 0, 1},  {5, 8, 0, 2, 1, 1},
                {8, 8, 0, 2, 1, 1}, {9, 12, 1, 2, 0, 2}, {10, 12, 1, 2, 0, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const uint8_t *r = t + 64 * want[i].n;
        assert_int_equal(get32(r + 4 * PLENA_CNT_ROWS), want[i].rows);
        assert_int_equal(get32(r + 4 * PLENA_CNT_NREC_M1), want[i].nrec_m1);
        assert_int_equal(get32(r + 4 * PLENA_CNT_REC_STEP), want[i].step);
        assert_int_equal(get32(r + 4 * PLENA_CNT_LAST_TM1), want[i].last_tm1);
        assert_int_equal(get32(r + 4 * PLENA_CNT_NREC), want[i].nrec);
        for (uint32_t w = PLENA_CNT_WORDS; w < 16; w++)
            assert_int_equal(get32(r + 4 * w), 0);
    }
    plena_free(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_count_table),
    cmocka_unit_test(test_sort_and_tables),
    cmocka_unit_test(test_splits_and_blocks),
    cmocka_unit_test(test_bad_ids),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
