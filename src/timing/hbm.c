/* hbm.c — plena's own HBM2 pseudo-channel controller model
 * (spec/timing-and-profile.md 3.3-3.8): address mapping with the granule hash,
 * per-bank/pseudo-channel/channel state, command legality, per-tick FR-FCFS
 * with all-bank refresh and the idle-row close timer, batch and sequential issue.
 * Ticks are considered only while an instruction is served (see serve()).
 * Ticks where nothing can happen are skipped (the skip target is the earliest
 * tick at which some command could become legal or a refresh / idle close is
 * due); an exhaustive tick-by-tick mode exists only to test that equivalence.
 * It does not move data: it only decides when transactions complete. */
#include <string.h>

#include "common/alloc.h"
#include "timing/timing.h"

#define NONE UINT64_MAX

struct bank {
    uint64_t row;
    uint64_t next_act, next_pre, next_col, last_use;
    uint32_t n_hits; /* pending requests targeting the open row */
    uint8_t open;
    uint32_t open_pos; /* position in its channel's open list while open */
};

struct pch {
    uint64_t bus_free, next_rd, next_wr;
    uint64_t last_act;
    uint64_t faw[4]; /* ring of the last 4 ACT times; faw[faw_head] is the oldest when full */
    uint32_t n_faw, faw_head;
    uint8_t has_act;
};

struct chan {
    uint64_t row_bus_free, col_bus_free;
    uint32_t *pend; /* request indices of this channel, ascending sequence number */
    size_t n_pend, cap_pend;
    /* Skip-ahead cache: earliest time anything in this channel (a command of
     * one of its requests, an idle close of one of its banks) could happen.
     * Legality depends only on the channel's own state and blocked_until, so
     * it stays valid until the channel is marked dirty (a command issued in
     * it, a bank closed, requests queued, a refresh). */
    uint64_t cand;
    uint8_t dirty;
    uint32_t *open; /* this channel's open banks (a slice of open_all), any order */
    size_t n_open;
};

struct req {
    uint64_t seq, row, done;
    uint32_t bank; /* flat bank index */
    uint32_t pc;   /* flat pseudo-channel index (ch * P + pc) */
    uint32_t bgi;  /* flat (pc, bank group) index */
    uint32_t ch;
    uint8_t is_write;
    uint8_t l_pc, l_bg, l_bank; /* local indices, for the trace hook */
};

struct plena_hbm {
    struct plena_hbm_params p;
    uint64_t T;
    unsigned c_bits, p_bits, h_bits, g_bits, k_bits;
    struct bank *banks;
    size_t n_banks;
    struct pch *pcs;
    uint64_t *bg_last;
    uint8_t *bg_has;
    struct chan *chans;
    size_t banks_per_channel; /* a channel's banks are contiguous in banks[] */
    uint32_t *open_all;
    uint64_t cur;      /* first tick not yet processed */
    uint64_t next_ref; /* next refresh window start W */
    uint64_t blocked_until;
    uint64_t seq; /* global request sequence counter, never reset */
    struct req *reqs;
    size_t n_reqs, cap_reqs;
    size_t n_pending;
    int exhaustive;
    int oom;
    plena_hbm_trace_fn trace;
    void *trace_ctx;
};

static uint64_t max64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* t + n*T for a possibly negative tick count n, saturating at 0 (the
 * read-to-write turnaround nCL+nBL+2-nCWL can be negative for odd settings). */
static uint64_t add_ticks(uint64_t t, int64_t n, uint64_t T)
{
    if (n >= 0) return t + (uint64_t)n * T;
    uint64_t d = (uint64_t)(-n) * T;
    return t >= d ? t - d : 0;
}

static uint64_t ceil_tick(uint64_t x, uint64_t T)
{
    uint64_t q = x / T + (x % T != 0);
    return q * T;
}

static int is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

static unsigned log2u(uint64_t x)
{
    unsigned n = 0;
    while (x > 1) {
        x >>= 1;
        n++;
    }
    return n;
}

int plena_hbm_new(const struct plena_hbm_params *p, struct plena_hbm **out, struct plena_err *err)
{
    *out = NULL;
    if (p->model != PLENA_HBM_MODEL_HBM2 && p->model != PLENA_HBM_MODEL_IDEAL)
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.MODEL",
                          "expected one of: hbm2, ideal; found model %d", (int)p->model);
    if (p->tck_ps < 1)
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.TCK_PS", "expected >= 1, found %llu",
                          (unsigned long long)p->tck_ps);
    const struct {
        const char *key;
        uint64_t v;
    } pw[] = {{"HBM.CHANNELS", p->channels},
              {"HBM.PSEUDO_CHANNELS", p->pseudo_channels},
              {"HBM.BANK_GROUPS", p->bank_groups},
              {"HBM.BANKS_PER_GROUP", p->banks_per_group},
              {"HBM.ROW_BYTES", p->row_bytes}};
    for (size_t i = 0; i < sizeof pw / sizeof pw[0]; i++)
        if (!is_pow2(pw[i].v))
            return PLENA_FAIL(err, PLENA_E_INPUT, pw[i].key, "expected a power of two, found %llu",
                              (unsigned long long)pw[i].v);
    if (p->row_bytes < 64)
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.ROW_BYTES", "expected >= 64, found %u",
                          p->row_bytes);
    if (p->address_hash_bit != 0 && (p->address_hash_bit < 6 || p->address_hash_bit > 63))
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.ADDRESS_HASH_BIT",
                          "expected 0 or 6..63, found %u", p->address_hash_bit);
    if (p->nBL < 1)
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.nBL", "expected >= 1, found %u", p->nBL);

    struct plena_hbm *h = plena_calloc(1, sizeof *h);
    if (!h) return PLENA_FAIL(err, PLENA_E_NOMEM, "hbm", "out of memory");
    h->p = *p;
    h->T = p->tck_ps;
    h->c_bits = log2u(p->row_bytes / 64);
    h->p_bits = log2u(p->pseudo_channels);
    h->h_bits = log2u(p->channels);
    h->g_bits = log2u(p->bank_groups);
    h->k_bits = log2u(p->banks_per_group);
    /* a >> 6 leaves 58 bits; every field must fit (and the shifts stay defined). */
    if (h->c_bits + h->p_bits + h->h_bits + h->g_bits + h->k_bits > 40) {
        plena_free(h);
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.CHANNELS",
                          "geometry too large: %u address bits for column, pseudo channel, "
                          "channel, bank group and bank (at most 40)",
                          h->c_bits + h->p_bits + h->h_bits + h->g_bits + h->k_bits);
    }
    size_t n_pc = (size_t)p->channels * p->pseudo_channels;
    h->n_banks = n_pc * p->bank_groups * p->banks_per_group;
    h->banks = plena_calloc(h->n_banks, sizeof *h->banks);
    h->pcs = plena_calloc(n_pc, sizeof *h->pcs);
    h->bg_last = plena_calloc(n_pc * p->bank_groups, sizeof *h->bg_last);
    h->bg_has = plena_calloc(n_pc * p->bank_groups, sizeof *h->bg_has);
    h->chans = plena_calloc(p->channels, sizeof *h->chans);
    h->banks_per_channel = h->n_banks / p->channels;
    h->open_all = plena_calloc(h->n_banks, sizeof *h->open_all);
    if (!h->banks || !h->pcs || !h->bg_last || !h->bg_has || !h->chans || !h->open_all) {
        size_t n_banks = h->n_banks;
        plena_hbm_free(h);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "hbm", "out of memory (%zu banks)", n_banks);
    }
    for (uint32_t c = 0; c < p->channels; c++)
        h->chans[c].open = h->open_all + (size_t)c * h->banks_per_channel;
    h->next_ref = (uint64_t)p->nREFI * h->T;
    *out = h;
    return 0;
}

void plena_hbm_free(struct plena_hbm *h)
{
    if (!h) return;
    if (h->chans)
        for (uint32_t c = 0; c < h->p.channels; c++)
            plena_free(h->chans[c].pend);
    plena_free(h->banks);
    plena_free(h->pcs);
    plena_free(h->bg_last);
    plena_free(h->bg_has);
    plena_free(h->chans);
    plena_free(h->open_all);
    plena_free(h->reqs);
    plena_free(h);
}

void plena_hbm_set_trace(struct plena_hbm *h, plena_hbm_trace_fn fn, void *ctx)
{
    h->trace = fn;
    h->trace_ctx = ctx;
}

void plena_hbm_set_exhaustive(struct plena_hbm *h, int on)
{
    h->exhaustive = on != 0;
}

int plena_hbm_out_of_memory(const struct plena_hbm *h)
{
    return h->oom;
}

void plena_hbm_map(const struct plena_hbm *h, uint64_t addr, struct plena_hbm_loc *loc)
{
    uint64_t b = addr >> 6;
    b >>= h->c_bits;
    uint64_t pc = b & (((uint64_t)1 << h->p_bits) - 1);
    b >>= h->p_bits;
    uint64_t ch = b & (((uint64_t)1 << h->h_bits) - 1);
    b >>= h->h_bits;
    uint64_t bg = b & (((uint64_t)1 << h->g_bits) - 1);
    b >>= h->g_bits;
    uint64_t bk = b & (((uint64_t)1 << h->k_bits) - 1);
    b >>= h->k_bits;
    if (h->p.address_hash_bit > 0) {
        /* Hash the granule number into the selection bits (3.3): moves an MX
         * tensor's scale stream off its element stream's bank. */
        uint64_t key = addr >> h->p.address_hash_bit;
        pc ^= key & (((uint64_t)1 << h->p_bits) - 1);
        key >>= h->p_bits;
        ch ^= key & (((uint64_t)1 << h->h_bits) - 1);
        key >>= h->h_bits;
        bg ^= key & (((uint64_t)1 << h->g_bits) - 1);
        key >>= h->g_bits;
        bk ^= key & (((uint64_t)1 << h->k_bits) - 1);
    }
    loc->channel = (unsigned)ch;
    loc->pseudo_channel = (unsigned)pc;
    loc->bank_group = (unsigned)bg;
    loc->bank = (unsigned)bk;
    loc->row = b;
}

/* ---- state helpers ---- */

static void emit(struct plena_hbm *h, uint64_t t, const char *cmd, const struct req *r)
{
    if (!h->trace) return;
    if (r)
        h->trace(h->trace_ctx, t, cmd, r->ch, r->l_pc, r->l_bg, r->l_bank, r->row, (int64_t)r->seq);
    else
        h->trace(h->trace_ctx, t, cmd, 0, 0, 0, 0, 0, -1);
}

static void close_bank(struct plena_hbm *h, uint32_t b)
{
    struct bank *bk = &h->banks[b];
    struct chan *c = &h->chans[b / h->banks_per_channel];
    uint32_t last = c->open[--c->n_open];
    c->open[bk->open_pos] = last;
    h->banks[last].open_pos = bk->open_pos;
    bk->open = 0;
    bk->n_hits = 0;
    c->dirty = 1;
}

static int is_hit(const struct plena_hbm *h, const struct req *r)
{
    const struct bank *bk = &h->banks[r->bank];
    return bk->open && bk->row == r->row;
}

/* Earliest time at which the column command of hit r is legal (3.5), state unchanged. */
static uint64_t col_ready(const struct plena_hbm *h, const struct req *r)
{
    const struct pch *pc = &h->pcs[r->pc];
    uint64_t x = max64(h->chans[r->ch].col_bus_free, h->banks[r->bank].next_col);
    if (r->is_write) {
        x = max64(x, pc->next_wr);
        x = max64(x, add_ticks(pc->bus_free, -(int64_t)h->p.nCWL, h->T));
    } else {
        x = max64(x, pc->next_rd);
        x = max64(x, add_ticks(pc->bus_free, -(int64_t)h->p.nCL, h->T));
    }
    return x;
}

static uint64_t act_ready(const struct plena_hbm *h, const struct req *r)
{
    const struct pch *pc = &h->pcs[r->pc];
    uint64_t x = max64(h->chans[r->ch].row_bus_free, h->banks[r->bank].next_act);
    if (pc->has_act) x = max64(x, pc->last_act + (uint64_t)h->p.nRRDS * h->T);
    if (h->bg_has[r->bgi]) x = max64(x, h->bg_last[r->bgi] + (uint64_t)h->p.nRRDL * h->T);
    if (pc->n_faw == 4) x = max64(x, pc->faw[pc->faw_head] + (uint64_t)h->p.nFAW * h->T);
    return x;
}

/* PRE for non-hit r on an open bank: NONE while a pending request targets the open row. */
static uint64_t pre_ready(const struct plena_hbm *h, const struct req *r)
{
    const struct bank *bk = &h->banks[r->bank];
    if (bk->n_hits > 0) return NONE;
    return max64(h->chans[r->ch].row_bus_free, bk->next_pre);
}

static void issue_col(struct plena_hbm *h, uint64_t t, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    struct pch *pc = &h->pcs[r->pc];
    const struct plena_hbm_params *p = &h->p;
    uint64_t T = h->T;
    if (r->is_write) {
        r->done = t + (uint64_t)(p->nCWL + p->nBL) * T;
        pc->bus_free = r->done;
        bk->next_pre = max64(bk->next_pre, r->done + (uint64_t)p->nWR * T);
        pc->next_rd = max64(pc->next_rd, r->done + (uint64_t)p->nWTR * T);
        emit(h, t, "WR", r);
    } else {
        r->done = t + (uint64_t)(p->nCL + p->nBL) * T;
        pc->bus_free = r->done;
        bk->next_pre = max64(bk->next_pre, t + (uint64_t)p->nRTP * T);
        int64_t turn = (int64_t)p->nCL + p->nBL + 2 - (int64_t)p->nCWL;
        pc->next_wr = max64(pc->next_wr, add_ticks(t, turn, T));
        emit(h, t, "RD", r);
    }
    h->chans[r->ch].col_bus_free = t + T;
    h->chans[r->ch].dirty = 1;
    bk->last_use = t;
    bk->n_hits--;
    h->n_pending--;
}

static void issue_act(struct plena_hbm *h, uint64_t t, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    struct pch *pc = &h->pcs[r->pc];
    struct chan *c = &h->chans[r->ch];
    const struct plena_hbm_params *p = &h->p;
    uint64_t T = h->T;
    bk->row = r->row;
    bk->open = 1;
    bk->open_pos = (uint32_t)c->n_open;
    c->open[c->n_open++] = r->bank;
    c->dirty = 1;
    bk->next_col = t + (uint64_t)p->nRCD * T;
    bk->next_pre = max64(bk->next_pre, t + (uint64_t)p->nRAS * T);
    bk->next_act = t + (uint64_t)p->nRC * T;
    pc->last_act = t;
    pc->has_act = 1;
    h->bg_last[r->bgi] = t;
    h->bg_has[r->bgi] = 1;
    pc->faw[pc->faw_head] = t;
    pc->faw_head = (pc->faw_head + 1) & 3;
    if (pc->n_faw < 4) pc->n_faw++;
    c->row_bus_free = t + 2 * T;
    bk->last_use = t;
    uint32_t n = 0;
    for (size_t j = 0; j < c->n_pend; j++) {
        const struct req *q = &h->reqs[c->pend[j]];
        if (q->bank == r->bank && q->row == r->row) n++;
    }
    bk->n_hits = n;
    emit(h, t, "ACT", r);
}

static void issue_pre(struct plena_hbm *h, uint64_t t, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    close_bank(h, r->bank);
    bk->next_act = max64(bk->next_act, t + (uint64_t)h->p.nRP * h->T);
    h->chans[r->ch].row_bus_free = t + h->T;
    emit(h, t, "PRE", r);
}

/* Whether channel ch may have something to do at tick t. The exhaustive mode
 * never trusts the cache: it is the literal definition of 3.6. */
static int channel_active(const struct plena_hbm *h, uint32_t ch, uint64_t t)
{
    const struct chan *c = &h->chans[ch];
    return h->exhaustive || c->dirty || c->cand <= t;
}

/* One controller tick (3.6). */
static void tick(struct plena_hbm *h, uint64_t t)
{
    const struct plena_hbm_params *p = &h->p;
    uint64_t T = h->T;
    /* 1 refresh */
    if (p->nREFI > 0 && t >= h->next_ref) {
        do {
            for (uint32_t ch = 0; ch < p->channels; ch++)
                while (h->chans[ch].n_open > 0)
                    close_bank(h, h->chans[ch].open[0]);
            h->blocked_until = h->next_ref + (uint64_t)p->nRFC * T;
            emit(h, t, "REF", NULL);
            h->next_ref += (uint64_t)p->nREFI * T;
        } while (h->next_ref <= t);
        for (uint32_t ch = 0; ch < p->channels; ch++)
            h->chans[ch].dirty = 1;
    }
    /* 2 idle close (no bus used); each bank's effect is independent of the others */
    if (p->row_idle_close > 0) {
        for (uint32_t ch = 0; ch < p->channels; ch++) {
            if (!channel_active(h, ch, t)) continue;
            struct chan *c = &h->chans[ch];
            for (size_t i = 0; i < c->n_open;) {
                uint32_t b = c->open[i];
                struct bank *bk = &h->banks[b];
                if (bk->n_hits == 0) {
                    uint64_t tc =
                        max64(bk->last_use + (uint64_t)p->row_idle_close * T, bk->next_pre);
                    if (tc <= t) {
                        close_bank(h, b); /* moves another open bank into slot i */
                        bk->next_act = max64(bk->next_act, tc + (uint64_t)p->nRP * T);
                        continue;
                    }
                }
                i++;
            }
        }
    }
    /* 3 blocked */
    if (t < h->blocked_until) return;
    /* 4 per channel, ascending index */
    for (uint32_t ch = 0; ch < p->channels; ch++) {
        struct chan *c = &h->chans[ch];
        if (c->n_pend == 0 || !channel_active(h, ch, t)) continue;
        /* (a) column: oldest legal hit */
        for (size_t j = 0; j < c->n_pend; j++) {
            struct req *r = &h->reqs[c->pend[j]];
            if (is_hit(h, r) && col_ready(h, r) <= t) {
                issue_col(h, t, r);
                memmove(&c->pend[j], &c->pend[j + 1], (c->n_pend - j - 1) * sizeof c->pend[0]);
                c->n_pend--;
                break;
            }
        }
        /* (b) row, on the state left by (a): first non-hit whose command is legal */
        for (size_t j = 0; j < c->n_pend; j++) {
            struct req *r = &h->reqs[c->pend[j]];
            if (is_hit(h, r)) continue;
            if (!h->banks[r->bank].open) {
                if (act_ready(h, r) <= t) {
                    issue_act(h, t, r);
                    break;
                }
            } else if (pre_ready(h, r) <= t) {
                issue_pre(h, t, r);
                break;
            }
        }
    }
}

/* Earliest time anything in channel ch could happen, its state unchanged. */
static uint64_t channel_cand(const struct plena_hbm *h, uint32_t ch)
{
    const struct plena_hbm_params *p = &h->p;
    uint64_t c = NONE;
    const struct chan *cn = &h->chans[ch];
    if (p->row_idle_close > 0) {
        for (size_t i = 0; i < cn->n_open; i++) {
            const struct bank *bk = &h->banks[cn->open[i]];
            if (bk->n_hits == 0)
                c = min64(c,
                          max64(bk->last_use + (uint64_t)p->row_idle_close * h->T, bk->next_pre));
        }
    }
    for (size_t j = 0; j < cn->n_pend; j++) {
        const struct req *r = &h->reqs[cn->pend[j]];
        uint64_t x;
        if (is_hit(h, r))
            x = col_ready(h, r);
        else if (!h->banks[r->bank].open)
            x = act_ready(h, r);
        else
            x = pre_ready(h, r);
        if (x == NONE) continue;
        c = min64(c, max64(x, h->blocked_until));
    }
    return c;
}

/* Earliest tick after t at which tick() could do anything, given that the
 * state stays as tick(t) left it until then: every pending request's
 * earliest legal command time (never before blocked_until), the next refresh
 * window and every due idle close. Equal results to stepping every tick. */
static uint64_t next_tick(struct plena_hbm *h, uint64_t t)
{
    uint64_t c = h->p.nREFI > 0 ? h->next_ref : NONE;
    for (uint32_t ch = 0; ch < h->p.channels; ch++) {
        struct chan *cn = &h->chans[ch];
        if (cn->dirty) {
            cn->cand = channel_cand(h, ch);
            cn->dirty = 0;
        }
        c = min64(c, cn->cand);
    }
    if (c == NONE) return NONE;
    c = ceil_tick(c, h->T);
    return c > t ? c : t + h->T;
}

static int enqueue(struct plena_hbm *h, const struct plena_hbm_txn *txn, size_t n)
{
    if (plena_grow((void **)&h->reqs, &h->cap_reqs, n, sizeof *h->reqs) != 0) return -1;
    for (uint32_t ch = 0; ch < h->p.channels; ch++) {
        struct chan *c = &h->chans[ch];
        c->n_pend = 0;
        c->dirty = 1;
    }
    h->n_reqs = n;
    for (size_t i = 0; i < n; i++) {
        struct plena_hbm_loc loc;
        plena_hbm_map(h, txn[i].addr, &loc);
        struct req *r = &h->reqs[i];
        r->seq = h->seq++;
        r->row = loc.row;
        r->done = 0;
        r->ch = loc.channel;
        r->pc = loc.channel * h->p.pseudo_channels + loc.pseudo_channel;
        r->bgi = r->pc * h->p.bank_groups + loc.bank_group;
        r->bank = r->bgi * h->p.banks_per_group + loc.bank;
        r->is_write = txn[i].is_write != 0;
        r->l_pc = (uint8_t)loc.pseudo_channel;
        r->l_bg = (uint8_t)loc.bank_group;
        r->l_bank = (uint8_t)loc.bank;
        struct chan *c = &h->chans[r->ch];
        if (plena_grow((void **)&c->pend, &c->cap_pend, c->n_pend + 1, sizeof c->pend[0]) != 0)
            return -1;
        c->pend[c->n_pend++] = (uint32_t)i;
        struct bank *bk = &h->banks[r->bank];
        if (bk->open && bk->row == r->row) bk->n_hits++;
    }
    h->n_pending = n;
    return 0;
}

/* All of txn[0..n) enter at t_start; returns the latest done time. */
static uint64_t serve(struct plena_hbm *h, uint64_t t_start, const struct plena_hbm_txn *txn,
                      size_t n)
{
    /* Ticks are considered only while an instruction is being served (3.8:
     * "the first tick considered is ceil(t_start / T) x T"). What happened
     * in between (refresh windows, idle closes) is applied lazily by steps 1
     * and 2 of that first tick, with this instruction's requests already
     * queued, so an idle close never takes a row this instruction is about to
     * hit. This reading reproduces the G1 reference totals of 3.10; stepping
     * idle ticks with an empty queue instead gives 2003 rather than 1950
     * cycles for the random-order case. */
    uint64_t t0 = ceil_tick(t_start, h->T);
    if (enqueue(h, txn, n) != 0) {
        /* Out of memory: drop the request (no state change beyond the
         * sequence numbers) and report it through plena_hbm_out_of_memory. */
        h->oom = 1;
        for (uint32_t ch = 0; ch < h->p.channels; ch++)
            h->chans[ch].n_pend = 0;
        for (size_t i = 0; i < h->n_banks; i++)
            h->banks[i].n_hits = 0;
        h->n_pending = 0;
        return t_start;
    }
    h->cur = max64(h->cur, t0);
    while (h->n_pending > 0) {
        tick(h, h->cur);
        if (h->n_pending == 0) {
            h->cur += h->T;
            break;
        }
        h->cur = h->exhaustive ? h->cur + h->T : next_tick(h, h->cur);
    }
    uint64_t latest = t_start;
    for (size_t i = 0; i < n; i++)
        latest = max64(latest, h->reqs[i].done);
    return latest;
}

uint64_t plena_hbm_batch(struct plena_hbm *h, uint64_t t_start_ps, const struct plena_hbm_txn *txn,
                         size_t n)
{
    if (h->p.model == PLENA_HBM_MODEL_IDEAL || n == 0) return 0;
    return serve(h, t_start_ps, txn, n) - t_start_ps;
}

uint64_t plena_hbm_sequential(struct plena_hbm *h, uint64_t t_start_ps,
                              const struct plena_hbm_txn *txn, size_t n)
{
    if (h->p.model == PLENA_HBM_MODEL_IDEAL || n == 0) return 0;
    uint64_t e = t_start_ps;
    for (size_t j = 0; j < n; j++)
        e = serve(h, e, &txn[j], 1);
    return e - t_start_ps;
}
