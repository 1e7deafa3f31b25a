/* The skip-ahead path's channel memo (docs/timing.md "Channel memo") against the
 * literal tick-by-tick definition: long random sequences of batches built
 * from a few request templates shifted to other banks and rows (so that
 * keys repeat under relabelling), at random gaps (back to back, inside the
 * idle-close window, across refresh windows), on random geometries and
 * timings. Every instruction's duration must equal the definition's; a
 * wrong replayed state shows up in the later durations. The memo must
 * really have replayed batches, and turning it off must change nothing.
 * Some trials use a geometry whose selection field is too wide for the
 * address table (map_addr's general path). test_memo_idle_conditions
 * replays batches whose banks are open on another row at varying idle
 * times (a record's idle conditions, docs/timing.md "Channel memo").
 * test_idle_deferred_equals_ticks checks the tick loop's deferred idle
 * closes on sequential, strided and random streams. */
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

/* templates of up to TPL_TXN requests; test_idle_deferred's batches up to MAX_TXN */
enum { N_TPL = 5, TPL_TXN = 64, MAX_TXN = 300, N_OPS = 400 };

struct op {
    int sequential;
    uint64_t gap_ps;
    size_t n;
    struct plena_hbm_txn txn[MAX_TXN];
};

/* A random small geometry: 1-8 channels, 1-2 pseudo channels, 1-4 bank
 * groups of 1-4 banks, rows of 64 B - 1 KiB, the granule hash off or at
 * bit 6-19. */
static void small_geometry(struct plena_hbm_params *p)
{
    p->channels = 1u << (rnd() % 4);
    p->pseudo_channels = 1u << (rnd() % 2);
    p->bank_groups = 1u << (rnd() % 3);
    p->banks_per_group = 1u << (rnd() % 3);
    p->row_bytes = 64u << (rnd() % 5);
    p->address_hash_bit = (rnd() % 2) ? 0 : 6 + rnd() % 14;
}

/* mode 0: literal; 1: skip-ahead without memo; 2: skip-ahead with memo;
 * 3: skip-ahead with memo, traced (which turns the memo off); ops[0 .. n_ops) */
static uint64_t run_ops(const struct plena_hbm_params *p, const struct op *ops, size_t n_ops,
                        int mode, uint64_t *d)
{
    struct plena_hbm *h = new_hbm_mode(p, mode == 0);
    plena_hbm_set_memo(h, mode >= 2);
    struct recorder rc = {0};
    if (mode == 3) plena_hbm_set_trace(h, record, &rc);
    uint64_t now = 0;
    for (size_t i = 0; i < n_ops; i++) {
        now += ops[i].gap_ps;
        d[i] = ops[i].sequential ? plena_hbm_sequential(h, now, ops[i].txn, ops[i].n)
                                 : plena_hbm_batch(h, now, ops[i].txn, ops[i].n);
        now += d[i];
    }
    assert_false(plena_hbm_out_of_memory(h));
    uint64_t hits = plena_hbm_memo_hits(h);
    plena_hbm_free(h);
    free(rc.r);
    return hits;
}

static void test_memo_equals_ticks(void **state)
{
    (void)state;
    rng_state = 777;
    struct op *ops = calloc(N_OPS, sizeof *ops);
    struct plena_hbm_txn(*tpl)[TPL_TXN] = calloc(N_TPL, sizeof *tpl);
    size_t tpl_n[N_TPL];
    uint64_t *d = calloc(3 * N_OPS, sizeof *d);
    assert_non_null(ops);
    assert_non_null(tpl);
    assert_non_null(d);
    uint64_t hits = 0, batches = 0;
    for (int trial = 0; trial < 40; trial++) {
        struct plena_hbm_params p;
        ref_hbm_params(&p);
        if (trial % 4) {
            /* small geometries and short timings: conflicts, FAW, refresh */
            small_geometry(&p);
            p.row_idle_close = (rnd() % 4 == 0) ? 0 : 1 + rnd() % 80;
            p.nREFI = (rnd() % 3 == 0) ? 0 : 200 + rnd() % 2000;
            p.nRFC = rnd() % 60;
            p.nRP = rnd() % 20;
            p.nRAS = rnd() % 30;
            p.nFAW = rnd() % 80; /* long windows: the ring outlives a batch */
            /* ACT spacing longer than a read: a batch's ACT history
             * still binds the next one */
            p.nRRDS = rnd() % 12;
            p.nRRDL = rnd() % 40;
            p.nRCD = rnd() % 8;
            p.nCL = rnd() % 8;
            p.nRC = rnd() % 60;
            p.nWR = rnd() % 10;
            p.nWTR = rnd() % 6;
            p.tck_ps = (rnd() % 2) ? 1000 : 750;
        }
        if (trial % 8 == 5) {
            /* 6 + 1 + 2 + 4 = 13 selection bits: no address table */
            p.channels = 64;
            p.pseudo_channels = 2;
            p.bank_groups = 4;
            p.banks_per_group = 16;
        }
        for (int t = 0; t < N_TPL; t++) {
            tpl_n[t] = 1 + rnd() % TPL_TXN;
            int kind = rnd() % 3, wr = rnd() % 4 == 0;
            uint64_t stride = 64u << (rnd() % 6);
            for (size_t j = 0; j < tpl_n[t]; j++) {
                /* strided element rows interleaved with repeated scale blocks
                 * (the H_PREFETCH_M shape), or random blocks */
                uint64_t a = kind == 0   ? (j % 2 ? 65536 + 64 * (j / 16) : stride * (j / 2))
                             : kind == 1 ? stride * j
                                         : 64 * (uint64_t)(rnd() % 4096);
                tpl[t][j].addr = a;
                tpl[t][j].is_write = (uint8_t)(wr && rnd() % 2);
            }
        }
        for (int i = 0; i < N_OPS; i++) {
            struct op *o = &ops[i];
            int t = rnd() % N_TPL;
            /* shifts that keep the structure: whole rows, hash granules */
            uint64_t shift = (uint64_t)(rnd() % 8) << (16 + rnd() % 6);
            o->sequential = rnd() % 10 == 0;
            uint32_t g = rnd() % 6;
            o->gap_ps = g < 2   ? 0
                        : g < 4 ? (uint64_t)(rnd() % 40) * 1000
                                : (rnd() % 9000) * 1000ull;
            o->n = o->sequential ? 1 + tpl_n[t] % 8 : tpl_n[t];
            for (size_t j = 0; j < o->n; j++) {
                o->txn[j] = tpl[t][j];
                o->txn[j].addr += shift;
            }
            batches += !o->sequential;
        }
        assert_int_equal(run_ops(&p, ops, N_OPS, 0, d), 0);         /* literal: no memo */
        assert_int_equal(run_ops(&p, ops, N_OPS, 1, d + N_OPS), 0); /* memo off */
        hits += run_ops(&p, ops, N_OPS, 2, d + 2 * N_OPS);
        if (trial == 0) {
            uint64_t *dt = calloc(N_OPS, sizeof *dt);
            assert_non_null(dt);
            assert_int_equal(run_ops(&p, ops, N_OPS, 3, dt), 0);
            assert_memory_equal(dt, d, N_OPS * sizeof *dt);
            free(dt);
        }
        for (int i = 0; i < N_OPS; i++) {
            if (d[i] != d[N_OPS + i] || d[i] != d[2 * N_OPS + i])
                fail_msg("trial %d op %d: literal %llu, skip-ahead %llu, memo %llu ps", trial, i,
                         (unsigned long long)d[i], (unsigned long long)d[N_OPS + i],
                         (unsigned long long)d[2 * N_OPS + i]);
        }
    }
    print_message("%llu channel parts of %llu batches replayed from the memo\n",
                  (unsigned long long)hits, (unsigned long long)batches);
    /* the memo really was used, on a good share of the batches */
    assert_true(hits > batches);
    free(ops);
    free(tpl);
    free(d);
}

/* Two batches A and B of 64 reads over the same 64 banks (8 per channel),
 * on different rows, alternating at gaps within the idle-close window:
 * every batch finds its banks open on the other row, with idle-close times
 * that vary with the gap. For some banks the PRE comes first, for others
 * (a long gap, a bank late in its channel's row-command queue) the idle
 * timer: a record's conditions of both kinds are needed (dropping either
 * check fails here). Durations equal the literal model's, and most
 * channel parts are replayed. */
static void test_memo_idle_conditions(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    enum { N = 64, OPS = 240 };
    struct op *ops = calloc(OPS, sizeof *ops);
    uint64_t *d = calloc(3 * OPS, sizeof *d);
    assert_non_null(ops);
    assert_non_null(d);
    rng_state = 4242;
    for (int i = 0; i < OPS; i++) {
        struct op *o = &ops[i];
        /* row stride 256 KiB (8 channels x 32 banks x 1 KiB): A on row 0,
         * B on row 1 of the same banks (the hash permutes them) */
        uint64_t row = (uint64_t)(i % 2) << 18;
        o->n = N;
        for (size_t j = 0; j < N; j++) {
            o->txn[j].addr = row + 1024 * (uint64_t)j + 64 * (j % 3);
            o->txn[j].is_write = 0;
        }
        /* short gaps (the PREs come first), and gaps that bring the idle
         * closes to around the batch's first row commands */
        o->gap_ps = (rnd() % 4 == 0 ? rnd() % 6 : 30 + rnd() % 40) * p.tck_ps;
    }
    uint64_t hits[3];
    for (int mode = 0; mode < 3; mode++) {
        struct plena_hbm *h = new_hbm_mode(&p, mode == 0);
        plena_hbm_set_memo(h, mode == 2);
        uint64_t now = 0;
        for (int i = 0; i < OPS; i++) {
            now += ops[i].gap_ps;
            d[mode * OPS + i] = plena_hbm_batch(h, now, ops[i].txn, ops[i].n);
            now += d[mode * OPS + i];
        }
        hits[mode] = plena_hbm_memo_hits(h);
        plena_hbm_free(h);
    }
    for (int i = 0; i < OPS; i++)
        if (d[i] != d[OPS + i] || d[i] != d[2 * OPS + i])
            fail_msg("op %d: literal %llu, skip-ahead %llu, memo %llu ps", i,
                     (unsigned long long)d[i], (unsigned long long)d[OPS + i],
                     (unsigned long long)d[2 * OPS + i]);
    assert_int_equal(hits[0], 0);
    assert_int_equal(hits[1], 0);
    print_message("%llu channel parts of %d batches replayed\n", (unsigned long long)hits[2], OPS);
    assert_true(hits[2] >= OPS);
    free(ops);
    free(d);
}

/* A channel part's request words are copied from the request two before
 * when it has the same bank, row and direction (serve_memo's shortcut for
 * the interleaved H_PREFETCH_M streams). Batches A (reads) and B (A with one
 * such request a write) must key apart: alternating them after long gaps
 * (so every state time is before t0 and the keys differ only in the
 * request words) gives the literal model's durations, and the memo is
 * used. */
static void test_memo_label_repeats(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.nREFI = 0; /* no refresh block in the keys */
    enum { N = 32, OPS = 12 };
    struct op *ops = calloc(OPS, sizeof *ops);
    uint64_t d[2][OPS];
    assert_non_null(ops);
    for (int i = 0; i < OPS; i++) {
        struct op *o = &ops[i];
        o->n = N;
        /* two interleaved streams: blocks 0, 1, ... of one row, and of
         * another bank's row (address 8 << 18) */
        for (size_t j = 0; j < N; j++) {
            o->txn[j].addr = (j % 2 ? (uint64_t)8 << 18 : 0) + 64 * (j / 2);
            o->txn[j].is_write = 0;
        }
        if (i % 2) o->txn[4].is_write = 1; /* like txn[2] but for its direction */
        o->gap_ps = 100000 * p.tck_ps;
    }
    (void)run_ops(&p, ops, OPS, 0, d[0]); /* the literal model */
    const uint64_t hits = run_ops(&p, ops, OPS, 2, d[1]);
    for (int i = 0; i < OPS; i++)
        if (d[0][i] != d[1][i])
            fail_msg("op %d: literal %llu, memo %llu ps", i, (unsigned long long)d[0][i],
                     (unsigned long long)d[1][i]);
    assert_true(d[0][0] != d[0][1]); /* the write shows */
    /* misses: the first read-only op (banks closed), the first with the
     * write (banks left open by a read-only op) and the second read-only op
     * (banks as the write op left them); every later op meets a state seen
     * before */
    assert_int_equal(hits, OPS - 3);
    free(ops);
}

/* The fast path's deferred idle closes (docs/timing.md "Idle closes
 * deferred") against the literal definition: inside the tick loop only the
 * banks with requests pending take their idle closes; the others' wait for
 * a full step 2 before a refresh window and after the loop. Sequential,
 * strided and random streams of batches (one in eight longer than the memo
 * takes, so the plain tick loop serves it) on small random geometries with
 * short idle-close windows and frequent refresh windows, so that banks left
 * idle by one batch fall due while the next is served and refresh windows
 * land inside batches. Every duration equals the definition's, with the
 * memo off, on, and traced. */
static void test_idle_deferred_equals_ticks(void **state)
{
    (void)state;
    enum { N_TRIALS = 32, N_DEF_OPS = 120 };
    rng_state = 4242;
    struct op *ops = calloc(N_DEF_OPS, sizeof *ops);
    uint64_t *d = calloc(4 * N_DEF_OPS, sizeof *d);
    assert_non_null(ops);
    assert_non_null(d);
    for (int trial = 0; trial < N_TRIALS; trial++) {
        struct plena_hbm_params p;
        ref_hbm_params(&p);
        small_geometry(&p);
        /* short windows: closes fall due inside a batch */
        p.row_idle_close = 1 + rnd() % 40;
        p.nREFI = (rnd() % 4 == 0) ? 0 : 80 + rnd() % 600;
        /* often a long nRP after a short refresh block: a close before the
         * window still binds the next ACT of its bank after it */
        p.nRFC = rnd() % 2 ? rnd() % 8 : rnd() % 40;
        p.nRP = rnd() % 2 ? 40 + rnd() % 60 : rnd() % 30;
        p.nRAS = rnd() % 30;
        p.nRRDS = rnd() % 6;
        p.nRRDL = rnd() % 12;
        p.nRCD = rnd() % 8;
        p.nRC = rnd() % 40;
        p.tck_ps = (rnd() % 2) ? 1000 : 750;
        int kind = trial % 3; /* sequential, strided, random */
        uint64_t stride = 64u << (1 + rnd() % 8);
        uint64_t base = 0;
        for (int i = 0; i < N_DEF_OPS; i++) {
            struct op *o = &ops[i];
            o->sequential = rnd() % 8 == 0;
            /* one batch in eight longer than the memo takes */
            o->n = o->sequential    ? 1 + rnd() % 8
                   : rnd() % 8 == 0 ? 256 + rnd() % (MAX_TXN - 255)
                                    : 1 + rnd() % 128;
            uint32_t g = rnd() % 5;
            /* back to back, within the idle window, or long after */
            o->gap_ps = g < 2   ? 0
                        : g < 4 ? (uint64_t)(rnd() % 50) * p.tck_ps
                                : (uint64_t)(rnd() % 3000) * p.tck_ps;
            int wr = rnd() % 4 == 0;
            if (rnd() % 3 == 0) base = 64 * (uint64_t)(rnd() % 65536);
            for (size_t j = 0; j < o->n; j++) {
                uint64_t a = kind == 0   ? base + 64 * j
                             : kind == 1 ? base + stride * j
                                         : 64 * (uint64_t)(rnd() % 8192);
                o->txn[j].addr = a;
                o->txn[j].is_write = (uint8_t)(wr && rnd() % 2);
            }
            /* the next sequential stream continues, a strided one revisits */
            if (kind == 0) base += 64 * o->n;
        }
        for (int mode = 0; mode < 4; mode++)
            run_ops(&p, ops, N_DEF_OPS, mode, d + mode * N_DEF_OPS);
        for (int i = 0; i < N_DEF_OPS; i++)
            if (d[i] != d[N_DEF_OPS + i] || d[i] != d[2 * N_DEF_OPS + i] ||
                d[i] != d[3 * N_DEF_OPS + i])
                fail_msg("trial %d (kind %d) op %d: literal %llu, fast %llu, memo %llu, traced "
                         "%llu ps",
                         trial, kind, i, (unsigned long long)d[i],
                         (unsigned long long)d[N_DEF_OPS + i],
                         (unsigned long long)d[2 * N_DEF_OPS + i],
                         (unsigned long long)d[3 * N_DEF_OPS + i]);
    }
    free(ops);
    free(d);
}

/* A refresh window inside a batch's tick loop closes a bank whose pending
 * request waits for its PRE (nRAS still running): the request then needs
 * an ACT, legal long before that PRE would have been. The fast path must
 * see it (refresh_step marks the pseudo channel's row aggregates stale, as
 * closing each bank does); durations equal the literal model's. */
static void test_refresh_reopens_pending(void **state)
{
    (void)state;
    struct plena_hbm_params p;
    ref_hbm_params(&p);
    p.address_hash_bit = 0; /* rows of one bank 256 KiB apart */
    p.nREFI = 50;
    p.nRFC = 5;
    p.nRAS = 80;
    p.nRC = 10;
    p.row_idle_close = 200;
    const struct plena_hbm_txn a = {0, 0}, b = {(uint64_t)1 << 18, 0};
    uint64_t d[3][2];
    for (int mode = 0; mode < 3; mode++) {
        struct plena_hbm *h = new_hbm_mode(&p, mode == 0);
        plena_hbm_set_memo(h, mode == 2);
        d[mode][0] = plena_hbm_batch(h, 0, &a, 1);
        d[mode][1] = plena_hbm_batch(h, d[mode][0], &b, 1);
        plena_hbm_free(h);
    }
    for (int mode = 1; mode < 3; mode++)
        if (d[mode][0] != d[0][0] || d[mode][1] != d[0][1])
            fail_msg("mode %d: %llu + %llu ps, literal %llu + %llu ps", mode,
                     (unsigned long long)d[mode][0], (unsigned long long)d[mode][1],
                     (unsigned long long)d[0][0], (unsigned long long)d[0][1]);
    /* the ACT after the refresh, not the PRE at nRAS */
    assert_true(d[0][0] + d[0][1] < 80 * p.tck_ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memo_equals_ticks),
        cmocka_unit_test(test_memo_idle_conditions),
        cmocka_unit_test(test_idle_deferred_equals_ticks),
        cmocka_unit_test(test_memo_label_repeats),
        cmocka_unit_test(test_refresh_reopens_pending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
