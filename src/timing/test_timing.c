/* Per-instruction costs and the overlap overlay (docs/timing.md "Clock",
 * "Per-instruction costs" and "Overlap overlay"): every opcode's fixed cost at
 * DC_EN 1 and 0 from a per-opcode cycle table (typed in here), the f0 skip,
 * V_TOPK x E, byte counters, the clock period, the overlay's classes and its
 * accounting on hand-worked cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "timing/test_refsettings.h"
#include "timing/timing.h"

/* Cycles (en/dis) per opcode at MLEN = VLEN = 64; -1 = traps (never charged). */
static const int want_cycles[64][2] = {
    [0x00] = {-1, -1}, [0x01] = {64, 64}, [0x02] = {64, 64},   [0x03] = {64, 64}, [0x04] = {64, 64},
    [0x05] = {1, 1},   [0x06] = {1, 1},   [0x07] = {64, 64},   [0x08] = {64, 64}, [0x09] = {1, 1},
    [0x0A] = {1, 1},   [0x0B] = {1, 1},   [0x0C] = {1, 1},     [0x0D] = {1, 2},   [0x0E] = {1, 2},
    [0x0F] = {1, 2},   [0x10] = {1, 2},   [0x11] = {1, 5},     [0x12] = {1, 5},   [0x13] = {1, 6},
    [0x14] = {2, 7},   [0x15] = {8, 20},  [0x16] = {4, 4},     [0x17] = {1, 1},   [0x18] = {1, 1},
    [0x19] = {1, 1},   [0x1A] = {1, 1},   [0x1B] = {1, 2},     [0x1C] = {1, 2},   [0x1D] = {1, 2},
    [0x1E] = {1, 1},   [0x1F] = {1, 1},   [0x20] = {128, 128}, [0x21] = {1, 1},   [0x22] = {1, 1},
    [0x23] = {1, 1},   [0x24] = {1, 1},   [0x25] = {1, 1},     [0x26] = {1, 1},   [0x27] = {1, 1},
    [0x28] = {-2, -2}, [0x29] = {-2, -2}, [0x2A] = {-2, -2}, /* HBM model */
    [0x2B] = {1, 1},   [0x2C] = {1, 1},   [0x2D] = {1, 1},     [0x2E] = {1, 1},   [0x2F] = {1, 1},
    [0x30] = {1, 1},   [0x31] = {-1, -1}, [0x32] = {1, 5},     [0x33] = {-1, -1}, [0x34] = {1, 1},
    [0x35] = {4, 4},   [0x36] = {4, 4},   [0x37] = {-3, -3}, /* V_TOPK: test_topk */
    [0x38] = {1, 1},   [0x39] = {-1, -1}, [0x3A] = {-1, -1},   [0x3B] = {-1, -1}, [0x3C] = {-1, -1},
    [0x3D] = {-1, -1}, [0x3E] = {-1, -1}, [0x3F] = {-1, -1},
};

/* Ops with the f0 skip (docs/timing.md "Per-instruction costs"). */
static int has_f0_skip(unsigned op)
{
    return (op >= 0x15 && op <= 0x1D);
}

static struct plena_timing *new_timing(const struct plena_settings *s)
{
    struct plena_timing *t = NULL;
    struct plena_err err = {0};
    assert_int_equal(plena_timing_new(s, &t, &err), 0);
    return t;
}

static uint64_t acct_op(struct plena_timing *t, unsigned op, int f0, uint32_t e)
{
    struct plena_emu_event ev;
    memset(&ev, 0, sizeof ev);
    ev.op = (uint8_t)op;
    ev.f0_skip = (uint8_t)f0;
    ev.topk_experts = e;
    return plena_timing_account(t, &ev);
}

static void test_fixed_costs_both_columns(void **state)
{
    (void)state;
    for (int col = 0; col < 2; col++) {
        struct plena_settings s;
        ref_settings(&s, col == 0 ? 1 : 0);
        struct plena_timing *t = new_timing(&s);
        uint64_t sum = 0;
        for (unsigned op = 0; op < 64; op++) {
            int w = want_cycles[op][col];
            if (w < 0) continue;
            uint64_t d = acct_op(t, op, 0, 0);
            if (d != (uint64_t)w * 1000)
                fail_msg("op 0x%02X (%s) DC_EN=%d: %llu ps, want %d cycles", op,
                         plena_isa_info(op)->name, col == 0, (unsigned long long)d, w);
            assert_int_equal(plena_timing_fixed_cycles(&s, op, 0, 0), (uint64_t)w);
            sum += d;
            uint64_t rd = 1, wr = 1;
            plena_timing_last_bytes(t, &rd, &wr);
            assert_int_equal(rd, 0);
            assert_int_equal(wr, 0);
        }
        /* serial execution: time is the sum of durations */
        assert_int_equal(plena_timing_now_ps(t), sum);
        assert_int_equal(plena_timing_bytes_read(t), 0);
        plena_timing_free(t);
    }
}

static void test_f0_skip(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 0);
    struct plena_timing *t = new_timing(&s);
    for (unsigned op = 0; op < 64; op++) {
        if (!has_f0_skip(op)) continue;
        assert_int_equal(acct_op(t, op, 1, 0), 0);
        assert_int_equal(plena_timing_fixed_cycles(&s, op, 0, 1), 0);
    }
    assert_int_equal(plena_timing_now_ps(t), 0);
    /* S_LD_FP writes f0 normally: the emulator never flags it; charged 1 */
    assert_int_equal(acct_op(t, PLENA_OP_S_LD_FP, 0, 0), 1000);
    plena_timing_free(t);
}

static void test_topk(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    struct plena_timing *t = new_timing(&s);
    /* rmask 0: E = 32 -> 128; rmask 1: E = 128 -> 512; TOPK register (256, 8) -> 1024 */
    assert_int_equal(acct_op(t, PLENA_OP_V_TOPK, 0, 32), 128000);
    assert_int_equal(acct_op(t, PLENA_OP_V_TOPK, 0, 128), 512000);
    assert_int_equal(acct_op(t, PLENA_OP_V_TOPK, 0, 256), 1024000);
    assert_int_equal(plena_timing_fixed_cycles(&s, PLENA_OP_V_TOPK, 256, 0), 1024);
    plena_timing_free(t);
}

static void test_clock_and_parameters(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    s.clock_period_ps = 2500;
    s.mlen = 32;
    s.vlen = 16;
    s.latency[PLENA_LAT_SYSTOLIC_PROCESSING_OVERHEAD] = 1;
    struct plena_timing *t = new_timing(&s);
    assert_int_equal(acct_op(t, PLENA_OP_M_MM, 0, 0), 33 * 2500);       /* OVH + MLEN */
    assert_int_equal(acct_op(t, PLENA_OP_M_MV, 0, 0), 32 * 2500);       /* MLEN, no overhead */
    assert_int_equal(acct_op(t, PLENA_OP_M_BMV, 0, 0), 2 * 2500);       /* OVH + 1 */
    assert_int_equal(acct_op(t, PLENA_OP_M_MM_WO, 0, 0), 2500);         /* fixed 1 */
    assert_int_equal(acct_op(t, PLENA_OP_S_MAP_V_FP, 0, 0), 32 * 2500); /* 2 x VLEN */
    assert_int_equal(acct_op(t, PLENA_OP_V_TOPK, 0, 10), 40 * 2500);
    /* latency keys come from the active column (latency[]), not a built-in value */
    s.latency[PLENA_LAT_VECTOR_MUL_CYCLES] = 9;
    plena_timing_free(t);
    t = new_timing(&s);
    assert_int_equal(acct_op(t, PLENA_OP_V_SHFT_V, 0, 0), 9 * 2500);
    plena_timing_free(t);
    struct plena_err err = {0};
    s.clock_period_ps = 0;
    t = NULL;
    assert_int_equal(plena_timing_new(&s, &t, &err), PLENA_E_INPUT);
    assert_null(t);
    assert_string_equal(err.where, "CONFIG.CLOCK_PERIOD_PS");
}

/* A total past 2^64-1 ps is reported, never wrapped (V_TOPK x E at the
 * largest period and VECTOR_MAX_CYCLES overflows on the fifth expert). */
static void test_time_overflow_reported(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    s.clock_period_ps = PLENA_SETTINGS_PERIOD_MAX_PS;
    s.latency[PLENA_LAT_VECTOR_MAX_CYCLES] = UINT32_MAX;
    struct plena_timing *t = new_timing(&s);
    struct plena_err err = {0};
    acct_op(t, PLENA_OP_V_TOPK, 0, 4); /* 4 x (2^32-1) x 10^9 < 2^64 */
    assert_int_equal(plena_timing_status(t, &err), 0);
    acct_op(t, PLENA_OP_V_TOPK, 0, 4);
    assert_int_equal(plena_timing_now_ps(t), UINT64_MAX);
    assert_int_equal(plena_timing_status(t, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, "CONFIG.CLOCK_PERIOD_PS");
    assert_non_null(strstr(err.msg, "exceeds 2^64-1 ps"));
    plena_timing_free(t);
    s.clock_period_ps = (uint64_t)PLENA_SETTINGS_PERIOD_MAX_PS + 1;
    t = NULL;
    assert_int_equal(plena_timing_new(&s, &t, &err), PLENA_E_INPUT);
    assert_null(t);
}

static void test_hbm_bytes_and_ideal(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    s.hbm.model = PLENA_HBM_MODEL_IDEAL;
    struct plena_timing *t = new_timing(&s);
    struct plena_hbm_txn x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (struct plena_hbm_txn){(uint64_t)64 * (i / 2), i % 2};
    struct plena_emu_event ev;
    memset(&ev, 0, sizeof ev);
    ev.op = PLENA_OP_H_STORE_V;
    ev.txn = x;
    ev.n_txn = 16;
    assert_int_equal(plena_timing_account(t, &ev), 0); /* ideal: 0 ps, bytes still counted */
    uint64_t rd, wr;
    plena_timing_last_bytes(t, &rd, &wr);
    assert_int_equal(rd, 512);
    assert_int_equal(wr, 512);
    ev.op = PLENA_OP_H_PREFETCH_M;
    ev.n_txn = 8;
    for (int i = 0; i < 8; i++)
        x[i].is_write = 0;
    assert_int_equal(plena_timing_account(t, &ev), 0);
    plena_timing_last_bytes(t, &rd, &wr);
    assert_int_equal(rd, 512);
    assert_int_equal(wr, 0);
    assert_int_equal(plena_timing_bytes_read(t), 1024);
    assert_int_equal(plena_timing_bytes_written(t), 512);
    assert_int_equal(acct_op(t, PLENA_OP_S_ADD_INT, 0, 0), 1000);
    plena_timing_last_bytes(t, &rd, &wr);
    assert_int_equal(rd + wr, 0);
    assert_int_equal(plena_timing_status(t, NULL), 0);
    plena_timing_free(t);

    /* hbm2: H_STORE_V is issued sequentially: the 171000 ps reference case
     * (4 rows, SCALE 256, STRIDE 64: element block RMW, then scale block 256 RMW) */
    s.hbm.model = PLENA_HBM_MODEL_HBM2;
    t = new_timing(&s);
    for (int i = 0; i < 4; i++) {
        x[4 * i + 0] = (struct plena_hbm_txn){(uint64_t)64 * i, 0};
        x[4 * i + 1] = (struct plena_hbm_txn){(uint64_t)64 * i, 1};
        x[4 * i + 2] = (struct plena_hbm_txn){256, 0};
        x[4 * i + 3] = (struct plena_hbm_txn){256, 1};
    }
    ev.op = PLENA_OP_H_STORE_V;
    ev.n_txn = 16;
    assert_int_equal(plena_timing_account(t, &ev), 171000);
    assert_int_equal(plena_timing_now_ps(t), 171000);
    assert_int_equal(plena_timing_bytes_read(t), 512);
    assert_int_equal(plena_timing_bytes_written(t), 512);
    plena_timing_free(t);
}

/* ---- overlay ---- */

static struct plena_overlap *new_ov(void)
{
    struct plena_settings s;
    ref_settings(&s, 1);
    struct plena_overlap *o = NULL;
    assert_int_equal(plena_overlap_new(&s, &o, NULL), 0);
    return o;
}

static const struct plena_overlap_range VPF = {PLENA_OVERLAP_VECTOR, 4096, 4352};

static void report(struct plena_overlap *o, uint64_t serial, struct plena_overlap_report *r)
{
    plena_overlap_report(o, serial, 1000, r);
}

/* The four figures every overlay case of docs/timing.md "Overlap overlay" states: serial and
 * adjusted cycles, hidden prefetch cycles, dependent-prefetch stalls. */
static void expect_cycles(const struct plena_overlap_report *r, uint64_t serial, uint64_t adjusted,
                          uint64_t hidden, uint64_t stalls)
{
    assert_int_equal(r->serial_cycles, serial);
    assert_int_equal(r->adjusted_cycles, adjusted);
    assert_int_equal(r->hidden_prefetch_cycles, hidden);
    assert_int_equal(r->dependent_prefetch_stalls, stalls);
}

static void test_overlay_unit_vectors(void **state)
{
    (void)state;
    struct plena_overlap_report r;
    struct plena_overlap_range rd0 = {PLENA_OVERLAP_VECTOR, 0, 64};
    struct plena_overlap_range rd1 = {PLENA_OVERLAP_VECTOR, 4096, 4160};
    /* 1: prefetch 40000 writing V[4096, 4352), compute 6400000 reading V[0, 64) */
    struct plena_overlap *o = new_ov();
    assert_int_equal(plena_overlap_prefetch(o, 40000, &VPF), 0);
    plena_overlap_compute(o, 6400000, &rd0, 1);
    report(o, 6440000, &r);
    expect_cycles(&r, 6440, 6400, 40, 0);
    assert_int_equal(r.prefetch_ops, 1);
    assert_int_equal(r.compute_ops, 1);
    plena_overlap_free(o);
    /* 2: the compute reads V[4096, 4160): dependent, nothing hidden */
    o = new_ov();
    plena_overlap_prefetch(o, 40000, &VPF);
    plena_overlap_compute(o, 6400000, &rd1, 1);
    report(o, 6440000, &r);
    expect_cycles(&r, 6440, 6440, 0, 1);
    assert_int_equal(r.pending_prefetch_picos, 0);
    plena_overlap_free(o);
    /* 3: prefetch 500, prefetch 500, compute 2000 (no overlap of ranges) */
    o = new_ov();
    plena_overlap_prefetch(o, 500, &VPF);
    plena_overlap_prefetch(o, 500, &VPF);
    plena_overlap_compute(o, 2000, &rd0, 1);
    report(o, 3000, &r);
    expect_cycles(&r, 3, 2, 1, 0);
    assert_int_equal(r.hidden_prefetch_picos, 1000);
    plena_overlap_free(o);
    /* 4: prefetch 100000, compute 64000, end: 36 pending */
    o = new_ov();
    plena_overlap_prefetch(o, 100000, &VPF);
    plena_overlap_compute(o, 64000, &rd0, 1);
    report(o, 164000, &r);
    expect_cycles(&r, 164, 100, 64, 0);
    assert_int_equal(r.pending_prefetch_picos, 36000);
    assert_int_equal(r.pending_prefetch_cycles, 36);
    plena_overlap_free(o);
    /* 5: prefetch 32000, H_STORE_V 1000 (barrier), compute 64000 */
    o = new_ov();
    plena_overlap_prefetch(o, 32000, &VPF);
    plena_overlap_barrier(o);
    plena_overlap_compute(o, 64000, &rd0, 1);
    report(o, 97000, &r);
    expect_cycles(&r, 97, 97, 0, 0);
    assert_int_equal(r.barrier_ops, 1);
    assert_int_equal(r.pending_prefetch_picos, 0);
    plena_overlap_free(o);
}

static void test_overlay_fifo_and_partial(void **state)
{
    (void)state;
    struct plena_overlap_report r;
    struct plena_overlap *o = new_ov();
    struct plena_overlap_range a = {PLENA_OVERLAP_VECTOR, 0, 256};
    struct plena_overlap_range b = {PLENA_OVERLAP_MATRIX, 0, 256}; /* other space */
    struct plena_overlap_range rd = {PLENA_OVERLAP_VECTOR, 255, 256};
    plena_overlap_prefetch(o, 3000, &a);
    plena_overlap_prefetch(o, 0, &b); /* d = 0: counted, not queued */
    plena_overlap_prefetch(o, 5000, &b);
    plena_overlap_compute(o, 4000, &rd, 1); /* drops a (stall), hides 4000 of b */
    plena_overlap_compute(o, 500, NULL, 0);
    report(o, 20000, &r);
    assert_int_equal(r.prefetch_ops, 3);
    assert_int_equal(r.dependent_prefetch_stalls, 1);
    assert_int_equal(r.hidden_prefetch_picos, 4500);
    assert_int_equal(r.pending_prefetch_picos, 500);
    assert_int_equal(r.adjusted_picos, 15500);
    assert_int_equal(r.adjusted_cycles, 16); /* ceil(15.5) */
    assert_int_equal(r.hidden_prefetch_cycles, 4);
    /* hidden larger than serial clamps to 0 */
    report(o, 3000, &r);
    assert_int_equal(r.adjusted_picos, 0);
    plena_overlap_free(o);
}

static struct plena_emu_event evt(unsigned op, uint32_t rd, uint32_t rs1, uint32_t rs2, uint32_t e)
{
    struct plena_emu_event ev;
    memset(&ev, 0, sizeof ev);
    ev.op = (uint8_t)op;
    ev.g_rd = rd;
    ev.g_rs1 = rs1;
    ev.g_rs2 = rs2;
    ev.topk_experts = e;
    return ev;
}

static void expect_range(const struct plena_overlap_range *r, enum plena_overlap_space sp,
                         uint64_t lo, uint64_t hi)
{
    assert_int_equal(r->space, sp);
    assert_int_equal(r->lo, lo);
    assert_int_equal(r->hi, hi);
}

/* Classifies the event of op with those register values (evt). */
static void classify(const struct plena_settings *s, unsigned op, uint32_t rd, uint32_t rs1,
                     uint32_t rs2, uint32_t e, struct plena_overlap_class_info *ci)
{
    struct plena_emu_event ev = evt(op, rd, rs1, rs2, e);
    plena_overlap_classify(s, &ev, ci);
}

static void test_classification(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1); /* MLEN = VLEN = 64, BLEN 4, rows_M 64, rows_V 4 */
    const enum plena_overlap_space M = PLENA_OVERLAP_MATRIX, V = PLENA_OVERLAP_VECTOR;
    struct plena_overlap_class_info ci;

    classify(&s, PLENA_OP_H_PREFETCH_M, 8192, 0, 0, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_PREFETCH);
    expect_range(&ci.write, M, 8192, 8192 + 64 * 64);
    classify(&s, PLENA_OP_H_PREFETCH_V, 4096, 0, 0, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_PREFETCH);
    expect_range(&ci.write, V, 4096, 4352);
    classify(&s, PLENA_OP_H_STORE_V, 0, 0, 0, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_BARRIER);
    classify(&s, PLENA_OP_C_BREAK, 0, 0, 0, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_BARRIER);

    /* matrix ranges start at the tile base tile(x) = x - x mod 4096 */
    classify(&s, PLENA_OP_M_MM, 0, 4096 + 130, 512, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_COMPUTE);
    assert_int_equal(ci.n_reads, 2);
    expect_range(&ci.reads[0], M, 4096, 8192);
    expect_range(&ci.reads[1], V, 512, 512 + 256);
    classify(&s, PLENA_OP_M_BTMM, 0, 100, 512, 0, &ci);
    expect_range(&ci.reads[0], M, 0, 4096);
    expect_range(&ci.reads[1], V, 512, 512 + 4096);
    classify(&s, PLENA_OP_M_TMM, 0, 512, 8200, 0, &ci);
    expect_range(&ci.reads[0], V, 512, 768);
    expect_range(&ci.reads[1], M, 8192, 12288);
    classify(&s, PLENA_OP_M_TMV, 0, 5000, 64, 0, &ci);
    expect_range(&ci.reads[0], M, 4096, 8192);
    expect_range(&ci.reads[1], V, 64, 128);
    classify(&s, PLENA_OP_M_BTMV, 4000, 200, 64, 0, &ci); /* tile(4200) = 4096 */
    expect_range(&ci.reads[0], M, 4096, 8192);
    expect_range(&ci.reads[1], V, 64, 128);
    classify(&s, PLENA_OP_M_MV_WO, 64, 0, 0, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_COMPUTE);
    assert_int_equal(ci.n_reads, 0);
    classify(&s, PLENA_OP_V_MUL_VV, 0, 128, 256, 0, &ci);
    assert_int_equal(ci.n_reads, 2);
    expect_range(&ci.reads[0], V, 128, 192);
    expect_range(&ci.reads[1], V, 256, 320);
    classify(&s, PLENA_OP_V_TOPK, 0, 1024, 0, 130, &ci); /* ceil(130/64) x 64 = 192 */
    assert_int_equal(ci.n_reads, 1);
    expect_range(&ci.reads[0], V, 1024, 1216);
    classify(&s, PLENA_OP_V_RED_SUM, 0, 320, 0, 0, &ci);
    assert_int_equal(ci.cls, PLENA_OVERLAP_COMPUTE);
    expect_range(&ci.reads[0], V, 320, 384);
    static const unsigned other[] = {
        PLENA_OP_S_ADD_FP,   PLENA_OP_S_LD_INT,       PLENA_OP_S_MAP_V_FP,  PLENA_OP_C_SET_ADDR_REG,
        PLENA_OP_C_LOOP_END, PLENA_OP_C_SET_TOPK_REG, PLENA_OP_C_LOOP_START};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        classify(&s, other[i], 0, 0, 0, 0, &ci);
        assert_int_equal(ci.cls, PLENA_OVERLAP_OTHER);
    }
}

/* Every opcode: the class is the one docs/timing.md "Overlap overlay" lists,
 * and the spaces of the ranges are those the isa.def READS/WRITES columns
 * name (the class and the spaces come from the table, the geometry from a
 * switch). */
static void test_classification_all_opcodes(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    for (unsigned op = 0; op < 256; op++) {
        const struct plena_op_info *r = plena_isa_info(op);
        const char *n = r->name;
        enum plena_overlap_class want = PLENA_OVERLAP_OTHER;
        if (r->valid) {
            if (!strcmp(n, "H_PREFETCH_M") || !strcmp(n, "H_PREFETCH_V"))
                want = PLENA_OVERLAP_PREFETCH;
            else if (!strcmp(n, "H_STORE_V") || !strcmp(n, "C_BREAK"))
                want = PLENA_OVERLAP_BARRIER;
            else if (n[0] == 'M' || n[0] == 'V')
                want = PLENA_OVERLAP_COMPUTE;
        }
        struct plena_overlap_class_info ci;
        classify(&s, op, 64, 128, 192, 64, &ci);
        if (ci.cls != want) fprintf(stderr, "opcode 0x%02X %s\n", op, n);
        assert_int_equal(ci.cls, want);
        unsigned spaces = 0;
        for (size_t i = 0; i < ci.n_reads; i++)
            spaces |= ci.reads[i].space == PLENA_OVERLAP_MATRIX ? PLENA_MASK_MRAM : PLENA_MASK_VRAM;
        if (want == PLENA_OVERLAP_COMPUTE)
            assert_int_equal(spaces, r->reads & (PLENA_MASK_MRAM | PLENA_MASK_VRAM));
        else
            assert_int_equal(ci.n_reads, 0);
        if (want == PLENA_OVERLAP_PREFETCH)
            assert_int_equal(ci.write.space == PLENA_OVERLAP_MATRIX ? PLENA_MASK_MRAM
                                                                    : PLENA_MASK_VRAM,
                             r->writes & (PLENA_MASK_MRAM | PLENA_MASK_VRAM));
    }
}

/* G2 combined with the overlay on, fed as events: 6440 serial, 6408 adjusted. */
static void test_g2_overlay_events(void **state)
{
    (void)state;
    struct plena_settings s;
    ref_settings(&s, 1);
    struct plena_timing *t = new_timing(&s);
    struct plena_overlap *o = NULL;
    assert_int_equal(plena_overlap_new(&s, &o, NULL), 0);
    struct plena_emu_event ev;
    static const unsigned setup[8] = {PLENA_OP_S_ADDI_INT,     PLENA_OP_C_SET_SCALE_REG,
                                      PLENA_OP_S_ADDI_INT,     PLENA_OP_C_SET_STRIDE_REG,
                                      PLENA_OP_S_ADDI_INT,     PLENA_OP_S_ADDI_INT,
                                      PLENA_OP_C_SET_ADDR_REG, PLENA_OP_S_ADDI_INT};
    for (int i = 0; i < 8; i++) {
        ev = evt(setup[i], 0, 0, 0, 0);
        plena_overlap_observe(o, &ev, plena_timing_account(t, &ev));
    }
    struct plena_hbm_txn x[8];
    for (int i = 0; i < 4; i++) {
        x[2 * i] = (struct plena_hbm_txn){(uint64_t)64 * i, 0};
        x[2 * i + 1] = (struct plena_hbm_txn){65536, 0};
    }
    ev = evt(PLENA_OP_H_PREFETCH_V, 4096, 0, 0, 0); /* gp6 = 4096, gp2 = 0 */
    ev.txn = x;
    ev.n_txn = 8;
    plena_overlap_observe(o, &ev, plena_timing_account(t, &ev));
    for (int i = 0; i < 100; i++) {
        ev = evt(PLENA_OP_M_MV, 0, 0, 0, 0); /* M_MV gp0, gp0, gp0 */
        plena_overlap_observe(o, &ev, plena_timing_account(t, &ev));
    }
    struct plena_overlap_report r;
    plena_overlap_report(o, plena_timing_now_ps(t), 1000, &r);
    expect_cycles(&r, 6440, 6408, 32, 0);
    assert_int_equal(r.pending_prefetch_cycles, 0);
    assert_int_equal(r.prefetch_ops, 1);
    assert_int_equal(r.compute_ops, 100);
    assert_int_equal(plena_timing_bytes_read(t), 512);
    plena_overlap_free(o);
    plena_timing_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_costs_both_columns),
        cmocka_unit_test(test_f0_skip),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_clock_and_parameters),
        cmocka_unit_test(test_hbm_bytes_and_ideal),
        cmocka_unit_test(test_overlay_unit_vectors),
        cmocka_unit_test(test_overlay_fifo_and_partial),
        cmocka_unit_test(test_classification),
        cmocka_unit_test(test_classification_all_opcodes),
        cmocka_unit_test(test_time_overflow_reported),
        cmocka_unit_test(test_g2_overlay_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
