/* Sequential issue (docs/timing.md "Issue modes") on the HBM model: the
 * closed form that plena_hbm_sequential uses for a request running alone must
 * equal the literal tick-by-tick definition (exhaustive mode) and the
 * general skip-ahead loop (one-transaction batches, which the issue rules
 * make the same instruction), command by command, in durations, and in the state it leaves
 * behind (probed by later batch requests). Random workloads cross refresh
 * windows, revisit banks on other rows and use small and zero idle-close times. */
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

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

enum { MAX_TXN = 16 };
struct op {
    int sequential;
    uint64_t gap_ps;
    size_t n;
    struct plena_hbm_txn txn[MAX_TXN];
};

/* How a plan is served: the path under test, the literal definition, and
 * the general skip-ahead loop fed one transaction at a time. */
enum mode { SEQ_FAST, SEQ_EXHAUSTIVE, SEQ_AS_BATCHES };

struct stats {
    size_t n_ref_inside; /* REF commands issued while a sequential request was pending */
    size_t n_pre, n_wr, n_cmds;
};

static void run(const struct plena_hbm_params *p, const struct op *plan, size_t n_ops,
                enum mode mode, struct recorder *rc, uint64_t *durations, struct stats *st)
{
    struct plena_hbm *h = new_hbm_mode(p, mode == SEQ_EXHAUSTIVE);
    plena_hbm_set_trace(h, record, rc);
    uint64_t now = 0;
    for (size_t i = 0; i < n_ops; i++) {
        const struct op *o = &plan[i];
        now += o->gap_ps;
        uint64_t d;
        size_t before = rc->n;
        if (!o->sequential) {
            d = plena_hbm_batch(h, now, o->txn, o->n);
        } else if (mode == SEQ_AS_BATCHES) {
            /* transaction j enters at e_(j-1) and runs alone */
            uint64_t e = now;
            for (size_t j = 0; j < o->n; j++)
                e += plena_hbm_batch(h, e, &o->txn[j], 1);
            d = e - now;
        } else {
            d = plena_hbm_sequential(h, now, o->txn, o->n);
        }
        if (st && o->sequential) {
            /* a REF between the first and the last command of the instruction */
            size_t first = before, last = rc->n;
            while (first < last && !strcmp(rc->r[first].cmd, "REF"))
                first++;
            for (size_t k = first; k < last; k++)
                if (!strcmp(rc->r[k].cmd, "REF")) st->n_ref_inside++;
            for (size_t k = before; k < last; k++) {
                st->n_pre += !strcmp(rc->r[k].cmd, "PRE");
                st->n_wr += !strcmp(rc->r[k].cmd, "WR");
            }
        }
        durations[i] = d;
        now += d;
    }
    assert_false(plena_hbm_out_of_memory(h));
    plena_hbm_free(h);
}

static void assert_same(const struct recorder *a, const struct recorder *b, const uint64_t *da,
                        const uint64_t *db, size_t n_ops)
{
    for (size_t i = 0; i < n_ops; i++)
        assert_int_equal(da[i], db[i]);
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct rec *x = &a->r[i], *y = &b->r[i];
        assert_int_equal(x->tick, y->tick);
        assert_string_equal(x->cmd, y->cmd);
        assert_int_equal(x->seq, y->seq);
        assert_int_equal(x->ch, y->ch);
        assert_int_equal(x->pc, y->pc);
        assert_int_equal(x->bg, y->bg);
        assert_int_equal(x->bank, y->bank);
        assert_int_equal(x->row, y->row);
    }
}

static void random_params(struct plena_hbm_params *p)
{
    ref_hbm_params(p);
    p->channels = 1u << (rnd() % 2);
    p->pseudo_channels = 1u << (rnd() % 2);
    p->bank_groups = 1u << (rnd() % 2);
    p->banks_per_group = 1u << (rnd() % 2);
    p->row_bytes = 64u << (rnd() % 3);
    p->address_hash_bit = (rnd() % 2) ? 0 : 6 + rnd() % 10;
    /* small and zero idle-close times, sometimes off */
    switch (rnd() % 4) {
    case 0: p->row_idle_close = 0; break;
    case 1: p->row_idle_close = 1; break;
    default: p->row_idle_close = 1 + rnd() % 30; break;
    }
    /* refresh windows short enough to fall inside sequential instructions */
    p->nREFI = (rnd() % 5 == 0) ? 0 : 40 + rnd() % 200;
    p->nRFC = rnd() % 40; /* < nREFI: the controller gets unblocked */
    p->tck_ps = (rnd() % 3 == 0) ? 1000 : 500 + rnd() % 1000;
    p->nBL = 1 + rnd() % 8;
    p->nCL = rnd() % 16;
    p->nCWL = rnd() % 16; /* sometimes > nCL + nBL + 2: negative turnaround */
    p->nRCD = rnd() % 16;
    p->nRP = rnd() % 30; /* may exceed nRFC: an idle close outlives a refresh block */
    p->nRAS = rnd() % 30;
    p->nRC = rnd() % 40;
    p->nRTP = rnd() % 8;
    p->nWR = rnd() % 12;
    p->nWTR = rnd() % 8;
    p->nRRDS = rnd() % 6;
    p->nRRDL = rnd() % 8;
    p->nFAW = rnd() % 30;
}

static void random_plan(const struct plena_hbm_params *p, struct op *plan, size_t n_ops)
{
    /* addresses over few banks and a few rows each: hits, closed banks and conflicts */
    uint64_t span = (uint64_t)p->row_bytes * p->channels * p->pseudo_channels * p->bank_groups *
                    p->banks_per_group * (1 + rnd() % 4);
    for (size_t i = 0; i < n_ops; i++) {
        struct op *o = &plan[i];
        /* mostly sequential; batches in between and at the end probe the state left behind */
        o->sequential = i + 2 < n_ops && rnd() % 4 != 0;
        switch (rnd() % 4) {
        case 0: o->gap_ps = 0; break;
        case 1: o->gap_ps = rnd() % 3000; break;
        default: o->gap_ps = rnd() % 200000; break;
        }
        o->n = o->sequential ? 1 + rnd() % MAX_TXN : rnd() % (MAX_TXN + 1);
        int writes = rnd() % 3;
        for (size_t j = 0; j < o->n; j++) {
            o->txn[j].addr = (rnd() % (span / 64)) * 64;
            o->txn[j].is_write = writes == 0 ? 0 : writes == 1 ? 1 : (uint8_t)(rnd() % 2);
        }
    }
}

static void test_sequential_equals_ticks(void **state)
{
    (void)state;
    rng_state = 20261129;
    enum { N_OPS = 30, TRIALS = 300 };
    struct op *plan = calloc(N_OPS, sizeof *plan);
    assert_non_null(plan);
    struct stats st = {0};
    for (int trial = 0; trial < TRIALS; trial++) {
        struct plena_hbm_params p;
        random_params(&p);
        random_plan(&p, plan, N_OPS);
        struct recorder rc[3] = {{0}, {0}, {0}};
        uint64_t d[3][N_OPS];
        run(&p, plan, N_OPS, SEQ_FAST, &rc[0], d[0], &st);
        run(&p, plan, N_OPS, SEQ_EXHAUSTIVE, &rc[1], d[1], NULL);
        run(&p, plan, N_OPS, SEQ_AS_BATCHES, &rc[2], d[2], NULL);
        assert_same(&rc[0], &rc[1], d[0], d[1], N_OPS);
        assert_same(&rc[0], &rc[2], d[0], d[2], N_OPS);
        st.n_cmds += rc[0].n;
        for (int m = 0; m < 3; m++)
            free(rc[m].r);
    }
    /* the workloads really exercised refresh inside, precharge and writes */
    assert_true(st.n_ref_inside > 50);
    assert_true(st.n_pre > 500);
    assert_true(st.n_wr > 500);
    print_message("compared %zu commands (%zu REF inside sequential, %zu PRE, %zu WR)\n", st.n_cmds,
                  st.n_ref_inside, st.n_pre, st.n_wr);
    free(plan);
}

/* Hand-computed (docs/timing.md "Commands", "Scheduler" and "Issue modes";
 * reference timings, T = 1000 ps, hash off): nREFI = 40, nRFC = 10,
 * ROW_IDLE_CLOSE = 0. One H_STORE_V of two writes to bank 0, rows 0 and 1
 * (address 0 and one row stride on), from t = 0.
 *   w0: ACT 0, WR 7000 (nRCD), done 7000 + (nCWL+nBL)*T = 13000.
 *   w1 enters at 13000: PRE needs next_pre = max(ACT + nRAS = 17000,
 *       done + nWR = 21000) = 21000; ACT at 21000 + nRP = 28000;
 *       28000 + nRCD = 35000 ... but the refresh window at 40000 comes after:
 *       WR at 35000, done 41000. Duration 41000.
 * Moving the start to 10000 shifts w0 to ACT 10000, WR 17000, done 23000;
 *   w1: PRE 31000, ACT 38000, refresh at 40000 closes the bank and blocks
 *   until 50000: ACT 50000, WR 57000, done 63000. Duration 53000. */
static void test_sequential_refresh_by_hand(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.address_hash_bit = 0;
    p.row_idle_close = 0;
    p.nREFI = 40;
    p.nRFC = 10;
    /* row stride: row_bytes times every channel, pc, bank group and bank */
    uint64_t row =
        (uint64_t)p.row_bytes * p.channels * p.pseudo_channels * p.bank_groups * p.banks_per_group;
    struct plena_hbm_txn t[2] = {{0, 1}, {row, 1}};
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(on_fresh(plena_hbm_sequential, &p, mode, 0, t, 2), 41000);
        assert_int_equal(on_fresh(plena_hbm_sequential, &p, mode, 10000, t, 2), 60000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequential_refresh_by_hand),
        cmocka_unit_test(test_sequential_equals_ticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
