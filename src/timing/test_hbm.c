/* HBM model conformance (docs/timing.md "HBM model"): the G2 command
 * timeline via the trace hook, every reference value ("Reference values")
 * including the whole G1 programs, the ideal model, skip-ahead equal to the
 * tick-by-tick definition on randomized request lists, and determinism.
 * Expected values are the reference figures; nothing here is derived from the
 * code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "timing/test_hbm_util.h"
#include "timing/test_refsettings.h"
#include "timing/timing.h"

/* ---- trace recorder ---- */

/* PF(o) of the timing gates: 4 rows, STRIDE 64, SCALE 65536; per row element
 * block then scale block (docs/machine.md "HBM DMA"). */
static void pf_txns(uint64_t o, struct plena_hbm_txn *t)
{
    for (uint64_t i = 0; i < 4; i++) {
        t[2 * i].addr = o + 64 * i;
        t[2 * i].is_write = 0;
        t[2 * i + 1].addr = (65536 + o / 8 + (64 * i) / 8) / 64 * 64;
        t[2 * i + 1].is_write = 0;
    }
}

/* H_PREFETCH_M of 64 rows at offset 0, base 0, rstride 1 (docs/machine.md "HBM DMA"). */
static void pm_txns(uint64_t stride, uint64_t scale, struct plena_hbm_txn *t)
{
    for (uint64_t i = 0; i < 64; i++) {
        t[2 * i].addr = i * stride;
        t[2 * i].is_write = 0;
        t[2 * i + 1].addr = (scale + (i * stride) / 8) / 64 * 64;
        t[2 * i + 1].is_write = 0;
    }
}

/* plena_hbm_map(h, addr) is channel / pseudo channel / bank group / bank / row. */
static void expect_loc(struct plena_hbm *h, uint64_t addr, unsigned ch, unsigned pc, unsigned bg,
                       unsigned bank, uint64_t row)
{
    struct plena_hbm_loc l;
    plena_hbm_map(h, addr, &l);
    assert_int_equal(l.channel, ch);
    assert_int_equal(l.pseudo_channel, pc);
    assert_int_equal(l.bank_group, bg);
    assert_int_equal(l.bank, bank);
    assert_int_equal(l.row, row);
}

static void test_address_mapping(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    struct plena_hbm *h = new_hbm(&p);
    expect_loc(h, 0, 0, 0, 0, 0, 0);     /* channel 0 / pc 0 / bank group 0 / bank 0 */
    expect_loc(h, 65536, 0, 1, 0, 1, 0); /* channel 0 / pc 1 / bank group 0 / bank 1 */
    /* without hashing, b bits: 0..3 = 0x5, 4 = 1, 5..7 = 0b101, 8..9 = 0b11, 10..11 = 0b10, 12.. =
     * 0x1A */
    uint64_t b = 0x5 | (1u << 4) | (5u << 5) | (3u << 8) | (2u << 10) | ((uint64_t)0x1A << 12);
    plena_hbm_free(h);
    p.address_hash_bit = 0;
    h = new_hbm(&p);
    expect_loc(h, b << 6, 5, 1, 3, 2, 0x1A);
    plena_hbm_free(h);
    /* with hashing at bit 16: key = a >> 16 = b >> 10 = 0x1A*4 + 2 = 106 = 0b1101010:
     * pc ^= 0 -> 1; key >>= 1 (53 = 0b110101): ch ^= 0b101 -> 0; key >>= 3 (6): bg ^= 0b10 -> 1;
     * key >>= 2 (1): bank ^= 1 -> 3. Row unchanged. */
    p.address_hash_bit = 16;
    h = new_hbm(&p);
    expect_loc(h, b << 6, 0, 1, 1, 3, 0x1A);
    plena_hbm_free(h);
}

static void test_g2_timeline(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    for (int mode = 0; mode < 2; mode++) {
        struct plena_hbm *h = new_hbm_mode(&p, mode);
        struct recorder rc = {0};
        plena_hbm_set_trace(h, record, &rc);
        struct plena_hbm_txn t[8];
        pf_txns(0, t);
        /* the G2 prefetch: addresses 0, 65536, 64, 65536, 128, 65536, 192, 65536 */
        const uint64_t addrs[8] = {0, 65536, 64, 65536, 128, 65536, 192, 65536};
        for (int i = 0; i < 8; i++)
            assert_int_equal(t[i].addr, addrs[i]);
        assert_int_equal(plena_hbm_batch(h, 8000, t, 8), 32000);
        static const struct {
            uint64_t tick;
            const char *cmd;
            unsigned pc, bank;
            int64_t seq;
        } want[] = {{8000, "ACT", 0, 0, 0}, {10000, "ACT", 1, 1, 1}, {15000, "RD", 0, 0, 0},
                    {17000, "RD", 1, 1, 1}, {19000, "RD", 0, 0, 2},  {21000, "RD", 1, 1, 3},
                    {23000, "RD", 0, 0, 4}, {25000, "RD", 1, 1, 5},  {27000, "RD", 0, 0, 6},
                    {29000, "RD", 1, 1, 7}};
        assert_int_equal(rc.n, 10);
        for (size_t i = 0; i < 10; i++) {
            assert_int_equal(rc.r[i].tick, want[i].tick);
            assert_string_equal(rc.r[i].cmd, want[i].cmd);
            assert_int_equal(rc.r[i].ch, 0);
            assert_int_equal(rc.r[i].pc, want[i].pc);
            assert_int_equal(rc.r[i].bg, 0);
            assert_int_equal(rc.r[i].bank, want[i].bank);
            assert_int_equal(rc.r[i].row, 0);
            assert_int_equal(rc.r[i].seq, want[i].seq);
        }
        /* the same H_PREFETCH_V 1000 ps after it ends (rows still open): 24000 ps */
        assert_int_equal(plena_hbm_batch(h, 41000, t, 8), 24000);
        plena_hbm_free(h);
        free(rc.r);
        /* a start between ticks waits for ceil(t_start / T) x T: starting at 7.5 ns
         * the commands are those of the 8 ns start, so the duration is 40 - 7.5 ns */
        h = new_hbm_mode(&p, mode);
        assert_int_equal(plena_hbm_batch(h, 7500, t, 8), 32500);
        assert_int_equal(plena_hbm_batch(h, 40001, t, 8), 24999); /* first tick 41 ns */
        plena_hbm_free(h);
    }
}

static void test_prefetch_m_reference(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    struct plena_hbm_txn t[128];
    for (int mode = 0; mode < 2; mode++) {
        pm_txns(64, 4096, t);
        assert_int_equal(on_fresh(plena_hbm_batch, &p, mode, 0, t, 128), 270000);
        pm_txns(2048, 131072, t); /* a [64, 2048] MXFP8 weight */
        assert_int_equal(on_fresh(plena_hbm_batch, &p, mode, 0, t, 128), 55000);
    }
}

static void test_store_v_reference(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    /* per row element block read then write, then scale block read then write;
     * SCALE 256, STRIDE 64: scale of row i at 256 + 8i -> block 256. */
    struct plena_hbm_txn t[16];
    for (int i = 0; i < 4; i++) {
        t[4 * i + 0] = (struct plena_hbm_txn){(uint64_t)64 * i, 0};
        t[4 * i + 1] = (struct plena_hbm_txn){(uint64_t)64 * i, 1};
        t[4 * i + 2] = (struct plena_hbm_txn){256, 0};
        t[4 * i + 3] = (struct plena_hbm_txn){256, 1};
    }
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(on_fresh(plena_hbm_sequential, &p, mode, 0, t, 16), 171000);
    }
}

/* Refresh (scheduler step 1), hand-computed from "Commands" and "Scheduler". */
static void test_refresh(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    struct plena_hbm_txn t[8];
    pf_txns(0, t);
    for (int mode = 0; mode < 2; mode++) {
        /* defaults: G2 prefetch at 3895 ns. ACTs at 3895/3897; the window at 3900 closes
         * both banks before any RD (next_col 3902) and blocks until 4250; ACTs again at
         * 4250/4252, RDs 4257..4271, last done 4282: 387 ns. */
        assert_int_equal(on_fresh(plena_hbm_batch, &p, mode, 3895000, t, 8), 387000);

        /* nREFI 100, nRFC 10, no idle close */
        struct plena_hbm_params q = p;
        q.nREFI = 100;
        q.nRFC = 10;
        q.row_idle_close = 0;
        struct plena_hbm *h = new_hbm_mode(&q, mode);
        struct recorder rc = {0};
        plena_hbm_set_trace(h, record, &rc);
        assert_int_equal(plena_hbm_batch(h, 0, t, 8), 32000);
        /* at 95 ns all hits: RD 95 (pc0, done 106), 96 (pc1, 107), 99 (pc0, 110); the
         * window at 100 closes both banks, blocked until 110; ACT pc1 110, ACT pc0 112;
         * RDs 117, 119, 121, 123, 125 -> last done 136: 41 ns */
        assert_int_equal(plena_hbm_batch(h, 95000, t, 8), 41000);
        /* at 405 ns the first tick catches up windows 200, 300 and 400: banks closed,
         * blocked until 400 + 10 = 410; ACTs 410/412, last RD 431 done 442: 37 ns */
        assert_int_equal(plena_hbm_batch(h, 405000, t, 8), 37000);
        size_t n_ref = 0;
        uint64_t ref_ticks[4] = {0};
        for (size_t i = 0; i < rc.n; i++)
            if (!strcmp(rc.r[i].cmd, "REF")) {
                assert_int_equal(rc.r[i].seq, -1);
                if (n_ref < 4) ref_ticks[n_ref] = rc.r[i].tick;
                n_ref++;
            }
        assert_int_equal(n_ref, 4); /* one REF record per window, at the tick that applies it */
        assert_int_equal(ref_ticks[0], 100000);
        assert_int_equal(ref_ticks[1], 405000);
        assert_int_equal(ref_ticks[3], 405000);
        free(rc.r);
        plena_hbm_free(h);
    }
}

/* Idle close (scheduler step 2) is applied at the next instruction's first tick, with
 * its requests already queued: a row the instruction targets stays open. */
static void test_idle_close(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    struct plena_hbm_txn t[8];
    pf_txns(0, t);
    struct plena_hbm *h = new_hbm(&p);
    assert_int_equal(plena_hbm_batch(h, 8000, t, 8), 32000);
    /* last uses 27 (bank 0) and 29 (bank 1): due to close at 91/93, but both rows are
     * targeted at 100 -> hits, as in the warm case: 24 ns */
    assert_int_equal(plena_hbm_batch(h, 100000, t, 8), 24000);
    /* a transaction on another bank of pc0 (address 16384: bank group 1, column 0) at
     * 200 ns: banks 0 and 1 (last uses 100..110) are idle-closed, not in the way; cold ACT at
     * 200, RD 207, done 218 */
    struct plena_hbm_txn one = {16384, 0};
    struct plena_hbm_loc l;
    plena_hbm_map(h, 16384, &l);
    assert_int_equal(l.channel, 0);
    assert_int_equal(l.pseudo_channel, 0);
    assert_int_equal(l.bank_group, 1);
    assert_int_equal(plena_hbm_batch(h, 200000, &one, 1), 18000);
    /* now G2 again at 300: banks 0 and 1 were closed (tc ~ 164..177 + nRP): cold, 32 ns */
    assert_int_equal(plena_hbm_batch(h, 300000, t, 8), 32000);
    plena_hbm_free(h);
    /* ROW_IDLE_CLOSE = 0: rows stay open forever; the same G2 at 300 is warm */
    p.row_idle_close = 0;
    h = new_hbm(&p);
    assert_int_equal(plena_hbm_batch(h, 8000, t, 8), 32000);
    assert_int_equal(plena_hbm_batch(h, 300000, t, 8), 24000);
    plena_hbm_free(h);
}

/* ACT spacing: nFAW and nRRDL, hand-computed, no address hashing. */
static void test_act_windows(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.address_hash_bit = 0;
    p.nFAW = 40;
    /* pc 0 of channel 0: bank groups 0..3 (bank 0), then bank group 0 bank 1 */
    struct plena_hbm_txn t[5] = {{0, 0}, {16384, 0}, {32768, 0}, {49152, 0}, {65536, 0}};
    for (int mode = 0; mode < 2; mode++) {
        /* ACTs 0, 2, 4, 6 (nRRDS); the fifth waits for 0 + nFAW = 40; RDs 7, 11, 15, 19
         * (data bus), then 47 -> done 58 */
        assert_int_equal(on_fresh(plena_hbm_batch, &p, mode, 0, t, 5), 58000);
        /* same bank group: ACT 0, then 0 + nRRDL = 10; RD 7 (done 18), RD 17 -> 28 */
        struct plena_hbm_params q = p;
        q.nRRDL = 10;
        struct plena_hbm_txn u[2] = {{0, 0}, {65536, 0}};
        assert_int_equal(on_fresh(plena_hbm_batch, &q, mode, 0, u, 2), 28000);
    }
}

/* Row conflict in one bank (PRE legality, FR-FCFS), no hashing: seq 1 wants
 * row 1 of the bank that seq 0 and 2..5 want on row 0. */
static void test_row_conflict(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.address_hash_bit = 0;
    struct plena_hbm_txn t[6] = {{0, 0}, {262144, 0}, {64, 0}, {128, 0}, {192, 0}, {256, 0}};
    /* ACT row 0 at 0; row-0 hits first (FR): RDs 7, 11, 15, 19, 23 (data bus); no PRE
     * while a row-0 request is pending; PRE at max(nRAS 17, 23 + nRTP) = 25; ACT at
     * max(nRC 19, 25 + nRP) = 32; RD 39 -> done 50 */
    static const struct {
        uint64_t tick;
        const char *cmd;
        uint64_t row;
        int64_t seq;
    } want[] = {{0, "ACT", 0, 0},     {7000, "RD", 0, 0},   {11000, "RD", 0, 2},
                {15000, "RD", 0, 3},  {19000, "RD", 0, 4},  {23000, "RD", 0, 5},
                {25000, "PRE", 1, 1}, {32000, "ACT", 1, 1}, {39000, "RD", 1, 1}};
    for (int mode = 0; mode < 2; mode++) {
        struct plena_hbm *h = new_hbm_mode(&p, mode);
        struct recorder rc = {0};
        plena_hbm_set_trace(h, record, &rc);
        assert_int_equal(plena_hbm_batch(h, 0, t, 6), 50000);
        assert_int_equal(rc.n, 9);
        for (size_t i = 0; i < 9; i++) {
            assert_int_equal(rc.r[i].tick, want[i].tick);
            assert_string_equal(rc.r[i].cmd, want[i].cmd);
            assert_int_equal(rc.r[i].row, want[i].row);
            assert_int_equal(rc.r[i].seq, want[i].seq);
            assert_int_equal(rc.r[i].bank, 0);
        }
        free(rc.r);
        plena_hbm_free(h);
    }
}

static void test_ideal_and_empty(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    struct plena_hbm_txn t[8];
    pf_txns(0, t);
    struct plena_hbm *h = new_hbm(&p);
    assert_int_equal(plena_hbm_batch(h, 8000, t, 0), 0);
    assert_int_equal(plena_hbm_sequential(h, 8000, t, 0), 0);
    plena_hbm_free(h);
    p.model = PLENA_HBM_MODEL_IDEAL;
    h = new_hbm(&p);
    assert_int_equal(plena_hbm_batch(h, 8000, t, 8), 0);
    assert_int_equal(plena_hbm_sequential(h, 8000, t, 8), 0);
    plena_hbm_free(h);
}

/* plena_hbm_new refuses p as an input error at where; returns what it left in
 * its model pointer. */
static struct plena_hbm *expect_rejected(const struct plena_hbm_params *p, const char *where)
{
    struct plena_hbm *h = NULL;
    struct plena_err err = {0};
    assert_int_equal(plena_hbm_new(p, &h, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, where);
    return h;
}

static void test_rejects_bad_params(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.channels = 6;
    assert_null(expect_rejected(&p, "HBM.CHANNELS"));
    ref_hbm_params(&p);
    p.address_hash_bit = 3;
    expect_rejected(&p, "HBM.ADDRESS_HASH_BIT");
    ref_hbm_params(&p);
    p.tck_ps = 0;
    expect_rejected(&p, "HBM.TCK_PS");
    ref_hbm_params(&p);
    p.row_bytes = 32;
    expect_rejected(&p, "HBM.ROW_BYTES");
}

/* ---- whole G1/G2 programs through plena_timing (docs/timing.md "Timing gates") ---- */

static uint64_t acct(struct plena_timing *t, unsigned op, const struct plena_hbm_txn *txn, size_t n)
{
    struct plena_emu_event ev;
    memset(&ev, 0, sizeof ev);
    ev.op = (uint8_t)op;
    ev.txn = txn;
    ev.n_txn = n;
    return plena_timing_account(t, &ev);
}

static void setup_block(struct plena_timing *t)
{
    static const unsigned ops[7] = {PLENA_OP_S_ADDI_INT,    PLENA_OP_C_SET_SCALE_REG,
                                    PLENA_OP_S_ADDI_INT,    PLENA_OP_C_SET_STRIDE_REG,
                                    PLENA_OP_S_ADDI_INT,    PLENA_OP_S_ADDI_INT,
                                    PLENA_OP_C_SET_ADDR_REG};
    for (int i = 0; i < 7; i++)
        assert_int_equal(acct(t, ops[i], NULL, 0), 1000);
}

static const uint32_t g1_random[64] = {
    28, 24, 42, 46, 18, 52, 6,  3,  38, 13, 11, 27, 41, 44, 47, 17, 21, 59, 19, 22, 57, 49,
    35, 58, 51, 5,  1,  43, 20, 23, 63, 40, 61, 54, 29, 62, 45, 30, 14, 32, 26, 37, 12, 31,
    8,  10, 53, 34, 16, 25, 56, 2,  50, 15, 48, 4,  36, 7,  9,  0,  55, 60, 39, 33};

static uint64_t g1_offset(int pattern, int i)
{
    switch (pattern) {
    case 0: return 256u * (uint64_t)i;
    case 1: return 4096u * (uint64_t)i;
    case 2: return 256u * (uint64_t)g1_random[i];
    default: return 0;
    }
}

/* Runs a G1 program; returns total ps. Optional trace recorder; exhaustive mode. */
static uint64_t run_g1(int pattern, int exhaustive, struct recorder *rc, uint64_t *bytes)
{
    struct plena_settings s;
    ref_settings(&s, 1);
    struct plena_timing *t = NULL;
    struct plena_err err = {0};
    assert_int_equal(plena_timing_new(&s, &t, &err), 0);
    plena_hbm_set_exhaustive(plena_timing_hbm(t), exhaustive);
    if (rc) plena_hbm_set_trace(plena_timing_hbm(t), record, rc);
    setup_block(t);
    for (int i = 0; i < 64; i++) {
        struct plena_hbm_txn x[8];
        pf_txns(g1_offset(pattern, i), x);
        assert_int_equal(acct(t, PLENA_OP_S_ADDI_INT, NULL, 0), 1000);
        acct(t, PLENA_OP_H_PREFETCH_V, x, 8);
        uint64_t rd, wr;
        plena_timing_last_bytes(t, &rd, &wr);
        assert_int_equal(rd, 512);
        assert_int_equal(wr, 0);
    }
    uint64_t total = plena_timing_now_ps(t);
    bytes[0] = plena_timing_bytes_read(t);
    bytes[1] = plena_timing_bytes_written(t);
    plena_timing_free(t);
    return total;
}

static void test_g1_totals(void **state)
{
    (void)state;
    static const uint64_t want[4] = {1717, 1997, 1950, 1615}; /* the G1 reference totals */
    for (int mode = 0; mode < 2; mode++)
        for (int pat = 0; pat < 4; pat++) {
            uint64_t bytes[2];
            uint64_t ps = run_g1(pat, mode, NULL, bytes);
            print_message("G1 pattern %d mode %d: %llu ps\n", pat, mode, (unsigned long long)ps);
            assert_int_equal(plena_ps_to_cycles(ps, 1000), want[pat]);
            assert_int_equal(bytes[0], 32768);
            assert_int_equal(bytes[1], 0);
        }
}

static void test_g1_deterministic(void **state)
{
    (void)state;
    struct recorder a = {0}, b = {0};
    uint64_t ba[2], bb[2];
    uint64_t ta = run_g1(2, 0, &a, ba), tb = run_g1(2, 0, &b, bb);
    assert_int_equal(ta, tb);
    assert_memory_equal(ba, bb, sizeof ba);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.r, b.r, a.n * sizeof *a.r);
    free(a.r);
    free(b.r);
}

static void test_g2_prefetch_only(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    struct plena_timing *t = NULL;
    assert_int_equal(plena_timing_new(&s, &t, NULL), 0);
    setup_block(t);
    struct plena_hbm_txn x[8];
    pf_txns(0, x);
    assert_int_equal(acct(t, PLENA_OP_S_ADDI_INT, NULL, 0), 1000);
    assert_int_equal(acct(t, PLENA_OP_H_PREFETCH_V, x, 8), 32000);
    assert_int_equal(plena_timing_now_ps(t), 40000);
    assert_int_equal(plena_ps_to_cycles(plena_timing_now_ps(t), 1000), 40);
    for (int i = 0; i < 100; i++)
        assert_int_equal(acct(t, PLENA_OP_M_MV, NULL, 0), 64000);
    assert_int_equal(plena_ps_to_cycles(plena_timing_now_ps(t), 1000), 6440);
    assert_int_equal(plena_timing_bytes_read(t), 512);
    assert_int_equal(plena_timing_bytes_written(t), 0);
    plena_timing_free(t);
}

/* ---- skip-ahead == tick-by-tick on randomized request lists ---- */

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

struct op_plan {
    int sequential;
    uint64_t gap_ps;
    size_t n;
    struct plena_hbm_txn txn[48];
};

static void run_plan(const struct plena_hbm_params *p, const struct op_plan *plan, size_t n_ops,
                     int exhaustive, struct recorder *rc, uint64_t *durations)
{
    struct plena_hbm *h = new_hbm_mode(p, exhaustive);
    plena_hbm_set_trace(h, record, rc);
    uint64_t now = 0;
    for (size_t i = 0; i < n_ops; i++) {
        now += plan[i].gap_ps;
        uint64_t d = plan[i].sequential ? plena_hbm_sequential(h, now, plan[i].txn, plan[i].n)
                                        : plena_hbm_batch(h, now, plan[i].txn, plan[i].n);
        durations[i] = d;
        now += d;
    }
    assert_false(plena_hbm_out_of_memory(h));
    plena_hbm_free(h);
}

/* A crafted skip-ahead corner: bank B's idle close falls due (tc = 17 ns) one tick
 * before a refresh window (18 ns) while other requests keep the controller busy; the
 * close raises B's next_act to tc + nRP = 57 ns, which outlives the refresh block.
 * Skipping straight to the refresh tick would lose that and ACT B early in the next
 * instruction. Skip-ahead must equal the tick-by-tick definition here too. */
static void test_skip_idle_before_refresh(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.address_hash_bit = 0;
    p.row_idle_close = 4;
    p.nRP = 40;
    p.nRFC = 0;
    p.nREFI = 18;
    struct plena_hbm_txn a[5] = {{16384, 0}, {0, 0}, {64, 0}, {128, 0}, {192, 0}};
    struct plena_hbm_txn b[1] = {{16384 + 262144, 0}}; /* bank B, row 1 */
    uint64_t d[2][2];
    struct recorder rc[2] = {{0}, {0}};
    for (int mode = 0; mode < 2; mode++) {
        struct plena_hbm *h = new_hbm_mode(&p, mode);
        plena_hbm_set_trace(h, record, &rc[mode]);
        d[mode][0] = plena_hbm_batch(h, 0, a, 5);
        d[mode][1] = plena_hbm_batch(h, d[mode][0] + 1000, b, 1);
        plena_hbm_free(h);
    }
    assert_memory_equal(d[0], d[1], sizeof d[0]);
    assert_int_equal(rc[0].n, rc[1].n);
    for (size_t i = 0; i < rc[0].n; i++) {
        assert_int_equal(rc[0].r[i].tick, rc[1].r[i].tick);
        assert_string_equal(rc[0].r[i].cmd, rc[1].r[i].cmd);
    }
    free(rc[0].r);
    free(rc[1].r);
}

static void test_skip_equals_ticks(void **state)
{
    (void)state;
    rng_state = 12345;
    enum { N_OPS = 24 };
    struct op_plan *plan = calloc(N_OPS, sizeof *plan);
    assert_non_null(plan);
    size_t n_cmds = 0, n_ref = 0, n_pre = 0, n_wr = 0;
    for (int trial = 0; trial < 120; trial++) {
        struct plena_hbm_params p;
        ref_hbm_params(&p);
        /* shrink geometry and refresh so conflicts, FAW, refresh and idle close all occur */
        p.channels = 1u << (rnd() % 3);
        p.pseudo_channels = 1u << (rnd() % 2);
        p.bank_groups = 1u << (rnd() % 3);
        p.banks_per_group = 1u << (rnd() % 2);
        p.row_bytes = 64u << (rnd() % 5);
        p.address_hash_bit = (rnd() % 2) ? 0 : 6 + rnd() % 14;
        p.row_idle_close = (rnd() % 3 == 0) ? 0 : 1 + rnd() % 40;
        p.nREFI = (rnd() % 3 == 0) ? 0 : 60 + rnd() % 300;
        p.nRFC = rnd() % 40;
        p.nRP = rnd() % 20; /* nRP > nRFC: an idle close's nRP outlives a refresh block */
        p.nRAS = rnd() % 30;
        p.nFAW = rnd() % 30;
        p.nCWL = rnd() % 14; /* sometimes > nCL + nBL + 2: negative turnaround */
        p.nWR = rnd() % 10;
        p.tck_ps = (rnd() % 2) ? 1000 : 750;
        for (int i = 0; i < N_OPS; i++) {
            struct op_plan *o = &plan[i];
            o->sequential = rnd() % 4 == 0;
            o->gap_ps = (rnd() % 4 == 0) ? 0 : (uint64_t)(rnd() % 60000);
            o->n = rnd() % 49;
            for (size_t j = 0; j < o->n; j++) {
                /* few rows over a few banks: hits, misses and conflicts */
                o->txn[j].addr = (uint64_t)(rnd() % 2048) * 64;
                o->txn[j].is_write = o->sequential ? (uint8_t)(rnd() % 2) : 0;
            }
            if (rnd() % 5 == 0)
                for (size_t j = 0; j < o->n; j++)
                    o->txn[j].is_write = (uint8_t)(rnd() % 2);
        }
        struct recorder a = {0}, b = {0};
        uint64_t da[N_OPS], db[N_OPS];
        run_plan(&p, plan, N_OPS, 0, &a, da);
        run_plan(&p, plan, N_OPS, 1, &b, db);
        assert_memory_equal(da, db, sizeof da);
        assert_int_equal(a.n, b.n);
        for (size_t i = 0; i < a.n; i++) {
            assert_int_equal(a.r[i].tick, b.r[i].tick);
            assert_string_equal(a.r[i].cmd, b.r[i].cmd);
            assert_int_equal(a.r[i].seq, b.r[i].seq);
            if (!strcmp(a.r[i].cmd, "REF")) n_ref++;
            if (!strcmp(a.r[i].cmd, "PRE")) n_pre++;
            if (!strcmp(a.r[i].cmd, "WR")) n_wr++;
        }
        n_cmds += a.n;
        free(a.r);
        free(b.r);
    }
    /* the random plans really exercised refresh, precharge and writes */
    assert_true(n_ref > 10);
    assert_true(n_pre > 100);
    assert_true(n_wr > 100);
    print_message("compared %zu commands (%zu REF, %zu PRE, %zu WR)\n", n_cmds, n_ref, n_pre, n_wr);
    free(plan);
}

/* A read after a long idle gap: the refresh windows in between cost O(1)
 * untraced (2^50 / 100 windows would otherwise never finish), and the
 * result is the traced (window by window) one at a start of the same phase. */
static void count_cmd(void *ctx, uint64_t tick_ps, const char *cmd, unsigned channel,
                      unsigned pseudo_channel, unsigned bank_group, unsigned bank, uint64_t row,
                      int64_t seq)
{
    (void)tick_ps, (void)cmd, (void)channel, (void)pseudo_channel, (void)bank_group, (void)bank,
        (void)row, (void)seq;
    ++*(size_t *)ctx;
}

static void test_refresh_after_long_gap(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.tck_ps = 1;
    p.nREFI = 100;
    p.nRFC = 10;
    const struct plena_hbm_txn rd = {4096, 0};
    struct plena_hbm *traced = NULL, *fast = NULL;
    struct plena_err err = {0};
    assert_int_equal(plena_hbm_new(&p, &traced, &err), 0);
    assert_int_equal(plena_hbm_new(&p, &fast, &err), 0);
    size_t n_cmds = 0;
    plena_hbm_set_trace(traced, count_cmd, &n_cmds);
    /* 2^50 = 1024 (mod 100): the same refresh phase */
    const uint64_t want = plena_hbm_batch(traced, 1024, &rd, 1);
    assert_true(n_cmds >= 10); /* the traced model really refreshed window by window */
    assert_int_equal(plena_hbm_batch(fast, 1ull << 50, &rd, 1), want);
    plena_hbm_free(traced);
    plena_hbm_free(fast);
    /* a period whose cycle counts cannot be represented is refused */
    p.tck_ps = (uint64_t)PLENA_SETTINGS_PERIOD_MAX_PS + 1;
    expect_rejected(&p, "HBM.TCK_PS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_mapping),
        cmocka_unit_test(test_g2_timeline),
        cmocka_unit_test(test_prefetch_m_reference),
        cmocka_unit_test(test_store_v_reference),
        cmocka_unit_test(test_refresh),
        cmocka_unit_test(test_idle_close),
        cmocka_unit_test(test_act_windows),
        cmocka_unit_test(test_row_conflict),
        cmocka_unit_test(test_skip_idle_before_refresh),
        cmocka_unit_test(test_ideal_and_empty),
        cmocka_unit_test(test_rejects_bad_params),
        cmocka_unit_test(test_g1_totals),
        cmocka_unit_test(test_g1_deterministic),
        cmocka_unit_test(test_g2_prefetch_only),
        cmocka_unit_test(test_skip_equals_ticks),
        cmocka_unit_test(test_refresh_after_long_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
