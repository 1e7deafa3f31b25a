/* Test helpers shared by the HBM model tests: a recorder for the command
 * trace hook, checked constructors, and the duration of one instruction on
 * a fresh model. Test-only (static functions; a test may leave some unused). */
#ifndef PLENA_TIMING_TEST_HBM_UTIL_H
#define PLENA_TIMING_TEST_HBM_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "timing/timing.h"

struct rec {
    uint64_t tick;
    char cmd[4];
    unsigned ch, pc, bg, bank;
    uint64_t row;
    int64_t seq;
};
struct recorder {
    struct rec *r;
    size_t n, cap;
};

static void record(void *ctx, uint64_t tick_ps, const char *cmd, unsigned channel,
                   unsigned pseudo_channel, unsigned bank_group, unsigned bank, uint64_t row,
                   int64_t seq)
{
    struct recorder *rc = ctx;
    if (rc->n == rc->cap) {
        rc->cap = rc->cap ? 2 * rc->cap : 256;
        rc->r = realloc(rc->r, rc->cap * sizeof *rc->r);
        assert_non_null(rc->r);
    }
    struct rec *e = &rc->r[rc->n++];
    memset(e, 0, sizeof *e);
    e->tick = tick_ps;
    strncpy(e->cmd, cmd, 3);
    e->ch = channel;
    e->pc = pseudo_channel;
    e->bg = bank_group;
    e->bank = bank;
    e->row = row;
    e->seq = seq;
}

static struct plena_hbm *new_hbm(const struct plena_hbm_params *p)
{
    struct plena_hbm *h = NULL;
    struct plena_err err = {0};
    assert_int_equal(plena_hbm_new(p, &h, &err), 0);
    assert_non_null(h);
    return h;
}

/* new_hbm in exhaustive (tick-by-tick, the definition) or skip-ahead mode. */
static inline struct plena_hbm *new_hbm_mode(const struct plena_hbm_params *p, int exhaustive)
{
    struct plena_hbm *h = new_hbm(p);
    plena_hbm_set_exhaustive(h, exhaustive);
    return h;
}

/* The duration of one instruction's transactions issued at t_start on a
 * fresh model by issue: plena_hbm_batch or plena_hbm_sequential (docs/timing.md
 * "Issue modes"). */
typedef uint64_t (*hbm_issue_fn)(struct plena_hbm *h, uint64_t t_start_ps,
                                 const struct plena_hbm_txn *txn, size_t n);
static inline uint64_t on_fresh(hbm_issue_fn issue, const struct plena_hbm_params *p,
                                int exhaustive, uint64_t t_start, const struct plena_hbm_txn *t,
                                size_t n)
{
    struct plena_hbm *h = new_hbm_mode(p, exhaustive);
    uint64_t d = issue(h, t_start, t, n);
    plena_hbm_free(h);
    return d;
}

#endif
