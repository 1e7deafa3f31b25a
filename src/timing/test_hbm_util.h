/* Test helpers shared by the HBM model tests: a recorder for the command
 * trace hook and a checked constructor. Test-only (static functions). */
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

#endif
