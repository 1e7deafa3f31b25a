/* timing.c — per-instruction durations and run totals
 * (docs/timing.md "Clock" and "Per-instruction costs"): one precomputed table of
 * picoseconds per opcode from isa.def's COST column, V_TOPK's E factor, the
 * f0 skip, and the HBM model for H_* (batch for prefetches, sequential for
 * H_STORE_V). Time is u64 ps and only ever summed. It never looks at
 * functional state beyond the event record. */
#include "common/alloc.h"
#include "timing/timing.h"

enum kind { K_FIXED = 0, K_TOPK, K_HBM_BATCH, K_HBM_SEQ };

struct plena_timing {
    uint64_t cost_ps[64]; /* fixed-cost opcodes: duration in ps */
    uint8_t kind[64];
    uint64_t topk_ps_per_expert; /* VECTOR_MAX_CYCLES x CLOCK_PERIOD_PS */
    uint64_t now_ps;
    int time_overflow;   /* the total passed 2^64-1 ps: now_ps saturated */
    uint64_t n_rd, n_wr; /* transaction totals */
    struct {
        uint64_t rd, wr;
    } last; /* transactions of the last instruction */
    struct plena_hbm *hbm;
};

/* Cycles of a fixed cost rule, or of a latency key (active column). */
static uint64_t rule_cycles(const struct plena_settings *s, enum plena_cost c)
{
    int lat = plena_cost_latency(c);
    if (lat >= 0) return s->latency[lat];
    uint64_t ovh = s->latency[PLENA_LAT_SYSTOLIC_PROCESSING_OVERHEAD];
    switch (c) {
    case PLENA_COST_TRAP: return 0; /* never charged: trapping instructions are not accounted */
    case PLENA_COST_FIXED1: return 1;
    case PLENA_COST_MLEN: return s->mlen;
    case PLENA_COST_OVH_MLEN: return ovh + s->mlen;
    case PLENA_COST_OVH_1: return ovh + 1;
    case PLENA_COST_TWO_VLEN: return 2 * (uint64_t)s->vlen;
    case PLENA_COST_HBM: return 0;  /* model, not a fixed cost */
    case PLENA_COST_TOPK: return 0; /* needs E */
    default: return 0;              /* latency keys handled above */
    }
}

uint64_t plena_timing_fixed_cycles(const struct plena_settings *s, unsigned op, uint32_t topk_e,
                                   int f0_skip)
{
    if (f0_skip) return 0;
    enum plena_cost c = plena_isa_info(op)->cost;
    if (c == PLENA_COST_TOPK)
        return (uint64_t)s->latency[PLENA_LAT_VECTOR_MAX_CYCLES] * (uint64_t)topk_e;
    return rule_cycles(s, c);
}

int plena_timing_new(const struct plena_settings *s, struct plena_timing **out,
                     struct plena_err *err)
{
    *out = NULL;
    if (s->clock_period_ps < 1 || s->clock_period_ps > PLENA_SETTINGS_PERIOD_MAX_PS)
        return PLENA_FAIL(err, PLENA_E_INPUT, "CONFIG.CLOCK_PERIOD_PS",
                          "expected an integer in 1..%u, found %llu", PLENA_SETTINGS_PERIOD_MAX_PS,
                          (unsigned long long)s->clock_period_ps);
    struct plena_timing *t = plena_calloc(1, sizeof *t);
    if (!t) return PLENA_FAIL(err, PLENA_E_NOMEM, "timing", "out of memory");
    int rc = plena_hbm_new(&s->hbm, &t->hbm, err);
    if (rc != 0) {
        plena_free(t);
        return rc;
    }
    for (unsigned op = 0; op < 64; op++) {
        enum plena_cost c = plena_isa_info(op)->cost;
        t->kind[op] = K_FIXED;
        if (c == PLENA_COST_TOPK)
            t->kind[op] = K_TOPK;
        else if (c == PLENA_COST_HBM)
            /* prefetches issue as a batch, the read-modify-write store one by one */
            t->kind[op] = op == PLENA_OP_H_STORE_V ? K_HBM_SEQ : K_HBM_BATCH;
        t->cost_ps[op] = rule_cycles(s, c) * s->clock_period_ps;
    }
    t->topk_ps_per_expert = (uint64_t)s->latency[PLENA_LAT_VECTOR_MAX_CYCLES] * s->clock_period_ps;
    *out = t;
    return 0;
}

void plena_timing_free(struct plena_timing *t)
{
    if (!t) return;
    plena_hbm_free(t->hbm);
    plena_free(t);
}

/* Out of line: the common instructions' path through account() then calls
 * nothing and saves two registers, not five. */
static __attribute__((noinline)) uint64_t account_hbm(struct plena_timing *t,
                                                      const struct plena_emu_event *ev, int seq)
{
    uint64_t nw = 0;
    for (size_t i = 0; i < ev->n_txn; i++)
        nw += ev->txn[i].is_write != 0;
    t->last.rd = ev->n_txn - nw;
    t->last.wr = nw;
    t->n_rd += t->last.rd;
    t->n_wr += nw;
    return seq ? plena_hbm_sequential(t->hbm, t->now_ps, ev->txn, ev->n_txn)
               : plena_hbm_batch(t->hbm, t->now_ps, ev->txn, ev->n_txn);
}

/* The instruction's duration; its transaction counts also into *rd and *wr
 * (locals of the caller: for any instruction but the HBM ones they are 0
 * without reading t->last back right after storing it, and a caller that
 * does not want them lets them fold away) */
static inline uint64_t account(struct plena_timing *t, const struct plena_emu_event *ev,
                               uint64_t *rd, uint64_t *wr)
{
    unsigned op = ev->op & 63;
    uint64_t d;
    t->last.rd = t->last.wr = 0;
    *rd = *wr = 0;
    switch ((enum kind)t->kind[op]) {
    case K_FIXED: d = ev->f0_skip ? 0 : t->cost_ps[op]; break;
    case K_TOPK:
        if (__builtin_mul_overflow(t->topk_ps_per_expert, (uint64_t)ev->topk_experts, &d))
            d = UINT64_MAX;
        break;
    /* once the total saturated the HBM model is not asked again: its tick
     * arithmetic needs representable times */
    case K_HBM_BATCH:
    case K_HBM_SEQ:
        if (t->time_overflow) {
            d = 0;
            break;
        }
        d = account_hbm(t, ev, t->kind[op] == K_HBM_SEQ);
        *rd = t->last.rd;
        *wr = t->last.wr;
        break;
    default: d = 0; break;
    }
    if (__builtin_add_overflow(t->now_ps, d, &t->now_ps)) {
        t->now_ps = UINT64_MAX;
        t->time_overflow = 1;
    }
    return d;
}

uint64_t plena_timing_account(struct plena_timing *t, const struct plena_emu_event *ev)
{
    uint64_t rd, wr;
    return account(t, ev, &rd, &wr);
}

uint64_t plena_timing_account_step(struct plena_timing *t, const struct plena_emu_event *ev,
                                   struct plena_timing_step *s)
{
    uint64_t rd, wr;
    uint64_t d = account(t, ev, &rd, &wr);
    s->dur_ps = d;
    s->rd_txn = rd;
    s->wr_txn = wr;
    s->pc = ev->pc;
    s->op = ev->op;
    return d;
}

uint64_t plena_timing_now_ps(const struct plena_timing *t)
{
    return t->now_ps;
}

uint64_t plena_timing_bytes_read(const struct plena_timing *t)
{
    return 64 * t->n_rd;
}

uint64_t plena_timing_bytes_written(const struct plena_timing *t)
{
    return 64 * t->n_wr;
}

void plena_timing_last_bytes(const struct plena_timing *t, uint64_t *bytes_read,
                             uint64_t *bytes_written)
{
    if (bytes_read) *bytes_read = 64 * t->last.rd;
    if (bytes_written) *bytes_written = 64 * t->last.wr;
}

struct plena_hbm *plena_timing_hbm(struct plena_timing *t)
{
    return t->hbm;
}

int plena_timing_status(const struct plena_timing *t, struct plena_err *err)
{
    if (t->time_overflow)
        return PLENA_FAIL(err, PLENA_E_INPUT, "CONFIG.CLOCK_PERIOD_PS",
                          "the simulated time exceeds 2^64-1 ps, the largest total plena "
                          "represents: lower CLOCK_PERIOD_PS / HBM.TCK_PS or the program's length");
    if (plena_hbm_out_of_memory(t->hbm))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "timing",
                          "the HBM model ran out of memory queueing a transaction list");
    return 0;
}

void plena_timing_record_last(const struct plena_timing *t, const struct plena_emu_event *ev,
                              uint64_t dur_ps, struct plena_timing_record *r)
{
    r->pc = ev->pc;
    r->op = ev->op;
    r->start_ps = t->now_ps - dur_ps;
    r->dur_ps = dur_ps;
    r->bytes_read = 64 * t->last.rd;
    r->bytes_written = 64 * t->last.wr;
    r->hidden_ps = 0;
    r->pending_prefetches = 0;
}
