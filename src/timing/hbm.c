/* hbm.c — plena's own HBM2 pseudo-channel controller model (docs/timing.md
 * "HBM model"; the comments below name its subsections in quotes): address
 * mapping with the granule hash, per-bank/pseudo-channel/channel state,
 * command legality, per-tick FR-FCFS with all-bank refresh and the idle-row
 * close timer, batch and sequential issue.
 * Ticks are considered only while an instruction is served (see serve()).
 * Ticks where nothing can happen are skipped (the skip target is the earliest
 * tick at which some command could become legal or a refresh / idle close is
 * due), and each channel looks only at its banks with pending requests, one
 * representative request per bank and command kind (all requests of a bank
 * needing the same command are equally legal, so the oldest one stands for
 * them). The exhaustive mode is the literal definition ("Scheduler"; every tick,
 * every pending request in sequence order) and exists to test that
 * equivalence. It does not move data: it only decides when transactions
 * complete. */
#include <string.h>

#include "common/alloc.h"
#include "timing/timing.h"

#define NONE           UINT64_MAX
#define SEL_TABLE_BITS 12
#define NIL            UINT32_MAX /* no request / no bank */

/* A bank's state in two parts: what the memo's key, replay and the idle
 * scan read (one cache line, struct bank), the rest (struct bank_x, a
 * parallel array). */
struct bank {
    uint64_t row;
    uint64_t next_act, next_pre, next_col, last_use;
    uint32_t n_hits;   /* pending requests targeting the open row */
    uint32_t n_whits;  /* how many of them are writes (fast path: ends update_reps early) */
    uint32_t open_pos; /* position in its channel's open list while open */
    /* Fast path only: the head of this bank's pending requests, ascending
     * sequence number (a doubly linked list through struct req), and their
     * count. */
    uint32_t head;
    uint32_t n_pend;
    uint8_t open;
    uint8_t reps_dirty; /* rep_* must be recomputed (list or open row changed) */
    uint8_t pad_[2];
};
_Static_assert(sizeof(struct bank) == 64, "struct bank: one cache line");

struct bank_x {
    /* Fast path only: the tail of the pending list, and the cached oldest
     * pending read hit, write hit and non-hit. */
    uint32_t tail;
    uint32_t act_pos; /* position in its pseudo channel's active list while n_pend > 0 */
    uint32_t rep_rd, rep_wr, rep_nh;
    /* the memo's record: time of the last idle close and next_act before it */
    uint64_t idle_tc, act_before_close;
    /* the memo's record: the first close in the batch being recorded (NONE:
     * none yet) and whether the idle timer (not a PRE) made it */
    uint64_t first_close;
    uint8_t first_idle;
};

struct pch {
    uint64_t bus_free, next_rd, next_wr;
    uint64_t last_act;
    uint64_t faw[4]; /* ring of the last 4 ACT times; faw[faw_head] is the oldest when full */
    uint32_t n_faw, faw_head;
    uint8_t has_act;
    /* Fast path only. Banks with pending requests (a slice of active_all),
     * and over them the bank-level part of each command's earliest legal
     * time (legality, "Commands", is a max of channel, pseudo-channel, bank-group and
     * bank terms, so the min over banks factors out the shared terms):
     *   col_min[0|1]  min next_col of banks with a read | write hit
     *   act_min       min max(next_act, bank-group nRRDL limit) of closed banks
     *                 with a pending request
     *   pre_min       min next_pre of open banks with a pending non-hit and no hit
     * Only commands on this pseudo channel's banks, queueing and closes change
     * them. col_min is valid unless col_dirty, act_min and pre_min unless
     * row_dirty (a RD or WR, the frequent case, usually leaves them valid). */
    uint32_t *active;
    size_t n_active;
    uint64_t col_min[2], act_min, pre_min;
    uint8_t col_dirty, row_dirty;
    /* pc_col_term(0 | 1) and pc_act_term, kept current by the commands */
    uint64_t col_term[2], act_term;
};

struct chan {
    uint64_t row_bus_free, col_bus_free;
    uint32_t *pend; /* exhaustive mode: request indices, ascending sequence number */
    size_t n_pend, cap_pend;
    size_t n_req; /* fast path: pending requests of this channel */
    /* Skip-ahead cache: earliest time anything in this channel (a command of
     * one of its requests, an idle close of one of its banks) could happen.
     * Legality depends only on the channel's own state and blocked_until, so
     * it stays valid until the channel is marked dirty (a command issued in
     * it, a bank closed, requests queued, a refresh). */
    uint64_t cand;
    uint8_t dirty;
    /* A lower bound of the idle-close time of every open bank without a
     * pending hit (exact after each idle-close scan). Such a bank's time is
     * fixed while it stays in that set (no command can touch it but a PRE,
     * which closes it), so entering the set is the only update needed. */
    uint64_t idle_min;
    /* Fast path, in the tick loop: the same bound over the banks of that set
     * with pending requests. The others' closes change nothing the loop
     * looks at (no request of theirs is pending, a close touches only its
     * bank), so they wait for a full step 2 (docs/timing.md "Idle closes
     * deferred"). */
    uint64_t idle_act;
    uint32_t *open; /* this channel's open banks (a slice of open_all), any order */
    size_t n_open;
    uint64_t last_col, max_done; /* the memo's record: last RD/WR and latest done */
};

struct req {
    uint64_t seq, row, done;
    uint32_t bank; /* flat bank index */
    uint32_t pc;   /* flat pseudo-channel index (ch * P + pc) */
    uint32_t bgi;  /* flat (pc, bank group) index */
    uint32_t ch;
    uint32_t prev, next; /* fast path: neighbours in the bank's pending list */
    uint8_t is_write;
    uint8_t l_pc, l_bg, l_bank; /* local indices, for the trace hook */
};

/* ---- channel memo (docs/timing.md "Channel memo") ----
 *
 * Step 4 of a tick looks at one channel's state only, so a batch is the
 * union of independent channel parts, and a part's outcome depends only on
 * its requests and on the state of the entities they touch, up to a
 * relabelling and a shift in time. The scheduler compares times only with
 * ticks t >= t0 (the batch's first tick) through legality terms of the
 * form "t >= x" (x a state time plus a non-negative constant) and through
 * max(), and every time it writes is >= t0. Two channel parts whose
 * requests have the same equality structure (which share a pseudo channel,
 * bank group, bank, row; read or write) and whose touched state gives the
 * same term values relative to t0 (exactly when >= t0, one class "before
 * t0" otherwise) therefore run the same commands at the same relative
 * ticks. The fast path keys each part that way after steps 1 and 2 of the
 * first tick; on a hit it writes the recorded state (relative times, or
 * "unchanged" for a field still before t0) as of the part's last column
 * command L instead of scheduling it; the parts that miss go through the
 * tick loop together. Conditions: no refresh window at or before L,
 * untraced, read-to-write turnaround >= 0 (every write then is >= t0).
 * Idle closes are independent per bank and fixed by the bank's own state;
 * those due after a part's L (and the untouched banks') are applied by
 * step 2 of the batch's last tick. */
#define MEMO_BELOW     UINT32_MAX /* key: before t0; record: unchanged */
#define MEMO_MAXREQ    255        /* requests per memoised batch (8-bit labels) */
#define MEMO_MAXROWS   16         /* distinct rows per bank */
#define MEMO_CLOSED    0xFEu
#define MEMO_OTHER     0xFFu /* open on a row no request of the batch targets */
#define MEMO_SLOTS0    4096
#define MEMO_MAX_SLOTS ((size_t)1 << 20)
#define MEMO_MAX_BYTES ((size_t)64 << 20)
#define MEMO_CHUNK     ((size_t)1 << 20)

struct memo_slot {
    uint64_t hash;
    uint32_t *data; /* klen key words, then the record */
    uint32_t klen;
};

/* One channel's part of the batch being served. */
struct memo_seg {
    uint32_t ch;
    uint32_t q0, nq;                 /* its requests (nq of them), q0 = the count before it */
    uint32_t b0, nb, g0, ng, p0, np; /* its entities: tb[b0 ..), tg[g0 ..), tp[p0 ..) */
    size_t k0, klen;                 /* its key: key[k0 .. k0 + klen), klen 0 = not keyed */
    int bad;                         /* a bank with too many rows to key */
    uint32_t c0, nc;                 /* its idle conditions: cond[c0 .. c0 + nc) */
    uint64_t hash;
    int miss;
};

struct memo {
    struct memo_slot *slot;
    size_t n_slots, n_used, bytes;
    /* labels while keying (0xFF = not touched): channel -> segment, and
     * bank, bank group, pseudo channel -> label within its channel */
    uint8_t *lab_bank, *lab_bg, *lab_pc, *lab_ch;
    /* the batch's requests: flat bank, row, direction, segment */
    uint32_t qb[MEMO_MAXREQ];
    uint64_t qr[MEMO_MAXREQ];
    uint8_t qw[MEMO_MAXREQ], qs[MEMO_MAXREQ];
    struct memo_seg seg[MEMO_MAXREQ];
    uint32_t tb[MEMO_MAXREQ], tg[MEMO_MAXREQ], tp[MEMO_MAXREQ];
    uint8_t nrows[MEMO_MAXREQ];
    uint8_t bcond[MEMO_MAXREQ]; /* the touched bank has an idle condition */
    uint32_t cond[MEMO_MAXREQ]; /* idle close times (relative to t0) checked, not hashed */
    uint64_t rows[MEMO_MAXREQ][MEMO_MAXROWS];
    /* state of the touched entities before the batch (miss path) */
    struct bank b0[MEMO_MAXREQ];
    struct pch p0[MEMO_MAXREQ];
    uint64_t g0[MEMO_MAXREQ];
    uint8_t g0_has[MEMO_MAXREQ];
    uint64_t c0[MEMO_MAXREQ][2];
    uint32_t *key, *rec;
    size_t cap_key, cap_rec;
    uint64_t hits, misses;
    int full; /* a cap was reached: no more snapshots or records (nothing is stored) */
    /* the slots' data live in chunks (never freed one by one): a list
     * through each chunk's first word, the free room of the newest */
    void **chunks;
    char *room;
    size_t room_left;
};

static void memo_free(struct memo *m);

struct plena_hbm {
    struct plena_hbm_params p;
    uint64_t T;
    unsigned c_bits, p_bits, h_bits, g_bits, k_bits;
    /* address mapping constants of plena_hbm_map, precomputed */
    unsigned n_sel;
    uint64_t sel_mask, p_mask, h_mask, g_mask;
    /* sel (map_addr's selection field, hashed) -> flat bank index, for
     * n_sel <= SEL_TABLE_BITS (else NULL) */
    uint32_t *sel_flat;
    struct bank *banks; /* in banks_mem, 64-byte aligned */
    void *banks_mem;
    struct bank_x *bankx; /* bankx[b] goes with banks[b] */
    size_t n_banks;
    struct pch *pcs;
    uint64_t *bg_last;
    uint8_t *bg_has;
    struct chan *chans;
    size_t banks_per_channel; /* a channel's banks are contiguous in banks[] */
    size_t banks_per_pc;      /* and so are a pseudo channel's */
    uint32_t *open_all;
    uint32_t *active_all;
    /* Fast path: the channels that received requests in the instruction being
     * served, ascending (step 4 visits channels in index order); and a lower
     * bound of every channel's idle_min. */
    uint32_t *busy;
    size_t n_busy;
    uint64_t idle_min_all;
    uint64_t idle_act_all; /* fast path, in the tick loop: min of the busy channels' idle_act */
    /* timing constants in ps */
    uint64_t rrds_ps, rrdl_ps, faw_ps, idle_ps, cl_ps, cwl_ps, rd_done_ps, wr_done_ps, rtp_ps,
        wr_ps, wtr_ps, rcd_ps, ras_ps, rc_ps, rp_ps;
    int64_t rd_to_wr;  /* read-to-write turnaround in ticks (may be negative) */
    uint64_t cur;      /* first tick not yet processed */
    uint64_t next_ref; /* next refresh window start W */
    uint64_t blocked_until;
    uint64_t seq; /* global request sequence counter, never reset */
    struct req *reqs;
    size_t n_reqs, cap_reqs;
    size_t n_pending;
    int exhaustive;
    int memo_on;       /* fast path: replay memoised batches (default on) */
    int memo_rec;      /* the tick loop of a batch's missed parts: idle closes are recorded */
    struct memo *memo; /* allocated on first use */
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
    if (p->tck_ps < 1 || p->tck_ps > PLENA_SETTINGS_PERIOD_MAX_PS)
        return PLENA_FAIL(err, PLENA_E_INPUT, "HBM.TCK_PS", "expected 1..%u, found %llu",
                          PLENA_SETTINGS_PERIOD_MAX_PS, (unsigned long long)p->tck_ps);
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
    h->n_sel = h->p_bits + h->h_bits + h->g_bits + h->k_bits;
    h->sel_mask = ((uint64_t)1 << h->n_sel) - 1;
    h->p_mask = ((uint64_t)1 << h->p_bits) - 1;
    h->h_mask = ((uint64_t)1 << h->h_bits) - 1;
    h->g_mask = ((uint64_t)1 << h->g_bits) - 1;
    size_t n_pc = (size_t)p->channels * p->pseudo_channels;
    h->n_banks = n_pc * p->bank_groups * p->banks_per_group;
    h->banks_mem = plena_calloc(h->n_banks + 1, sizeof *h->banks);
    if (h->banks_mem) h->banks = (struct bank *)(((uintptr_t)h->banks_mem + 63) & ~(uintptr_t)63);
    h->bankx = plena_calloc(h->n_banks, sizeof *h->bankx);
    h->pcs = plena_calloc(n_pc, sizeof *h->pcs);
    h->bg_last = plena_calloc(n_pc * p->bank_groups, sizeof *h->bg_last);
    h->bg_has = plena_calloc(n_pc * p->bank_groups, sizeof *h->bg_has);
    h->chans = plena_calloc(p->channels, sizeof *h->chans);
    h->banks_per_channel = h->n_banks / p->channels;
    h->open_all = plena_calloc(h->n_banks, sizeof *h->open_all);
    h->active_all = plena_calloc(h->n_banks, sizeof *h->active_all);
    h->busy = plena_calloc(p->channels, sizeof *h->busy);
    if (h->n_sel <= SEL_TABLE_BITS) {
        h->sel_flat = plena_calloc((size_t)1 << h->n_sel, sizeof *h->sel_flat);
        if (h->sel_flat)
            for (uint64_t sel = 0; sel < ((uint64_t)1 << h->n_sel); sel++) {
                /* sel holds pc, channel, bank group, bank, low bits first;
                 * the flat index channel, pc, bank group, bank, high first */
                uint64_t pc = sel & h->p_mask, ch = (sel >> h->p_bits) & h->h_mask;
                uint64_t bg = (sel >> (h->p_bits + h->h_bits)) & h->g_mask;
                uint64_t bank = sel >> (h->p_bits + h->h_bits + h->g_bits);
                h->sel_flat[sel] =
                    (uint32_t)((((ch << h->p_bits | pc) << h->g_bits | bg) << h->k_bits) | bank);
            }
    }
    if ((h->n_sel <= SEL_TABLE_BITS && !h->sel_flat) || !h->banks || !h->bankx || !h->pcs ||
        !h->bg_last || !h->bg_has || !h->chans || !h->open_all || !h->active_all || !h->busy) {
        size_t n_banks = h->n_banks;
        plena_hbm_free(h);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "hbm", "out of memory (%zu banks)", n_banks);
    }
    for (uint32_t c = 0; c < p->channels; c++) {
        h->chans[c].open = h->open_all + (size_t)c * h->banks_per_channel;
        h->chans[c].idle_min = NONE;
    }
    h->banks_per_pc = h->n_banks / n_pc;
    for (size_t i = 0; i < n_pc; i++)
        h->pcs[i].active = h->active_all + i * h->banks_per_pc;
    for (size_t b = 0; b < h->n_banks; b++)
        h->banks[b].head = h->bankx[b].tail = NIL;
    h->rrds_ps = (uint64_t)p->nRRDS * h->T;
    h->rrdl_ps = (uint64_t)p->nRRDL * h->T;
    h->faw_ps = (uint64_t)p->nFAW * h->T;
    h->idle_ps = (uint64_t)p->row_idle_close * h->T;
    h->cl_ps = (uint64_t)p->nCL * h->T;
    h->cwl_ps = (uint64_t)p->nCWL * h->T;
    h->rd_done_ps = (uint64_t)(p->nCL + p->nBL) * h->T;
    h->wr_done_ps = (uint64_t)(p->nCWL + p->nBL) * h->T;
    h->rtp_ps = (uint64_t)p->nRTP * h->T;
    h->wr_ps = (uint64_t)p->nWR * h->T;
    h->wtr_ps = (uint64_t)p->nWTR * h->T;
    h->rcd_ps = (uint64_t)p->nRCD * h->T;
    h->ras_ps = (uint64_t)p->nRAS * h->T;
    h->rc_ps = (uint64_t)p->nRC * h->T;
    h->rp_ps = (uint64_t)p->nRP * h->T;
    h->rd_to_wr = (int64_t)p->nCL + p->nBL + 2 - (int64_t)p->nCWL;
    h->idle_min_all = NONE;
    h->next_ref = (uint64_t)p->nREFI * h->T;
    h->memo_on = 1;
    *out = h;
    return 0;
}

void plena_hbm_free(struct plena_hbm *h)
{
    if (!h) return;
    if (h->chans)
        for (uint32_t c = 0; c < h->p.channels; c++)
            plena_free(h->chans[c].pend);
    plena_free(h->banks_mem);
    plena_free(h->bankx);
    plena_free(h->pcs);
    plena_free(h->bg_last);
    plena_free(h->bg_has);
    plena_free(h->chans);
    plena_free(h->open_all);
    plena_free(h->active_all);
    plena_free(h->busy);
    plena_free(h->sel_flat);
    plena_free(h->reqs);
    memo_free(h->memo);
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

void plena_hbm_set_memo(struct plena_hbm *h, int on)
{
    h->memo_on = on != 0;
}

uint64_t plena_hbm_memo_hits(const struct plena_hbm *h)
{
    return h->memo ? h->memo->hits : 0;
}

int plena_hbm_out_of_memory(const struct plena_hbm *h)
{
    return h->oom;
}

static inline void map_addr(const struct plena_hbm *h, uint64_t addr, struct plena_hbm_loc *loc)
{
    /* Above the column, b holds pc, channel, bank group and bank in that
     * order, low bits first: one field "sel" of p+h+g+k bits. */
    uint64_t b = addr >> (6 + h->c_bits);
    uint64_t sel = b & h->sel_mask;
    /* Hash the granule number into the selection bits ("Address mapping"): moves an MX
     * tensor's scale stream off its element stream's bank. The key's fields
     * are XORed in the same order, so one XOR of the whole field does it. */
    if (h->p.address_hash_bit > 0) sel ^= (addr >> h->p.address_hash_bit) & h->sel_mask;
    loc->pseudo_channel = (unsigned)(sel & h->p_mask);
    sel >>= h->p_bits;
    loc->channel = (unsigned)(sel & h->h_mask);
    sel >>= h->h_bits;
    loc->bank_group = (unsigned)(sel & h->g_mask);
    sel >>= h->g_bits;
    loc->bank = (unsigned)sel;
    loc->row = b >> h->n_sel;
}

void plena_hbm_map(const struct plena_hbm *h, uint64_t addr, struct plena_hbm_loc *loc)
{
    map_addr(h, addr, loc);
}

/* ---- state helpers ---- */

static void emit_call(struct plena_hbm *h, uint64_t t, const char *cmd, const struct req *r)
{
    if (r)
        h->trace(h->trace_ctx, t, cmd, r->ch, r->l_pc, r->l_bg, r->l_bank, r->row, (int64_t)r->seq);
    else
        h->trace(h->trace_ctx, t, cmd, 0, 0, 0, 0, 0, -1);
}

/* the test for a hook inline: a call per command costs when tracing is off */
static inline void emit(struct plena_hbm *h, uint64_t t, const char *cmd, const struct req *r)
{
    if (h->trace) emit_call(h, t, cmd, r);
}

/* The bank's cached representatives and its pseudo channel's aggregates are stale. */
static void bank_changed(struct plena_hbm *h, uint32_t b)
{
    struct pch *pc = &h->pcs[b >> (h->g_bits + h->k_bits)];
    h->banks[b].reps_dirty = 1;
    pc->col_dirty = 1;
    pc->row_dirty = 1;
}

static void close_bank(struct plena_hbm *h, uint32_t b)
{
    struct bank *bk = &h->banks[b];
    struct chan *c = &h->chans[b >> (h->p_bits + h->g_bits + h->k_bits)];
    uint32_t last = c->open[--c->n_open];
    c->open[bk->open_pos] = last;
    h->banks[last].open_pos = bk->open_pos;
    bk->open = 0;
    bk->n_hits = 0;
    bk->n_whits = 0;
    bank_changed(h, b);
    c->dirty = 1;
}

static int is_hit(const struct plena_hbm *h, const struct req *r)
{
    const struct bank *bk = &h->banks[r->bank];
    return bk->open && bk->row == r->row;
}

/* Pseudo-channel terms of the legality rules of "Commands" (the rest is the
 * channel's command bus and the bank's own limits). */
static uint64_t pc_col_term(const struct plena_hbm *h, const struct pch *pc, int is_write)
{
    uint64_t lead = is_write ? h->cwl_ps : h->cl_ps; /* t + lead >= bus_free */
    uint64_t x = pc->bus_free >= lead ? pc->bus_free - lead : 0;
    return max64(x, is_write ? pc->next_wr : pc->next_rd);
}

static uint64_t pc_act_term(const struct plena_hbm *h, const struct pch *pc)
{
    uint64_t x = 0;
    if (pc->has_act) x = pc->last_act + h->rrds_ps;
    if (pc->n_faw == 4) x = max64(x, pc->faw[pc->faw_head] + h->faw_ps);
    return x;
}

static uint64_t bg_term(const struct plena_hbm *h, uint32_t bgi)
{
    return h->bg_has[bgi] ? h->bg_last[bgi] + h->rrdl_ps : 0;
}

/* Earliest time at which the column command of hit r is legal, state unchanged. */
static uint64_t col_ready(const struct plena_hbm *h, const struct req *r)
{
    uint64_t x = max64(h->chans[r->ch].col_bus_free, h->banks[r->bank].next_col);
    return max64(x, pc_col_term(h, &h->pcs[r->pc], r->is_write));
}

static uint64_t act_ready(const struct plena_hbm *h, const struct req *r)
{
    uint64_t x = max64(h->chans[r->ch].row_bus_free, h->banks[r->bank].next_act);
    x = max64(x, pc_act_term(h, &h->pcs[r->pc]));
    return max64(x, bg_term(h, r->bgi));
}

/* PRE for non-hit r on an open bank: NONE while a pending request targets the open row. */
static uint64_t pre_ready(const struct plena_hbm *h, const struct req *r)
{
    const struct bank *bk = &h->banks[r->bank];
    if (bk->n_hits > 0) return NONE;
    return max64(h->chans[r->ch].row_bus_free, bk->next_pre);
}

/* Fast path: remove a request whose column command issued from its bank's list. */
static void unlink_req(struct plena_hbm *h, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    if (r->prev != NIL)
        h->reqs[r->prev].next = r->next;
    else
        bk->head = r->next;
    if (r->next != NIL)
        h->reqs[r->next].prev = r->prev;
    else
        h->bankx[r->bank].tail = r->prev;
    bk->n_pend--;
    if (bk->n_pend == 0) {
        struct pch *pc = &h->pcs[r->pc];
        uint32_t last = pc->active[--pc->n_active];
        pc->active[h->bankx[r->bank].act_pos] = last;
        h->bankx[last].act_pos = h->bankx[r->bank].act_pos;
    }
}

static void issue_col(struct plena_hbm *h, uint64_t t, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    struct pch *pc = &h->pcs[r->pc];
    struct chan *c = &h->chans[r->ch];
    if (r->is_write) {
        r->done = t + h->wr_done_ps;
        pc->bus_free = r->done;
        bk->next_pre = max64(bk->next_pre, r->done + h->wr_ps);
        pc->next_rd = max64(pc->next_rd, r->done + h->wtr_ps);
        emit(h, t, "WR", r);
    } else {
        r->done = t + h->rd_done_ps;
        pc->bus_free = r->done;
        bk->next_pre = max64(bk->next_pre, t + h->rtp_ps);
        pc->next_wr = max64(pc->next_wr, add_ticks(t, h->rd_to_wr, h->T));
        emit(h, t, "RD", r);
    }
    pc->col_term[0] = pc_col_term(h, pc, 0);
    pc->col_term[1] = pc_col_term(h, pc, 1);
    c->col_bus_free = t + h->T;
    c->dirty = 1;
    c->last_col = t;
    c->max_done = max64(c->max_done, r->done);
    bk->last_use = t;
    bk->n_hits--;
    bk->n_whits -= r->is_write;
    h->n_pending--;
    if (bk->n_hits == 0) {
        /* the bank (still open) now waits for its idle close */
        uint64_t tc = max64(t + h->idle_ps, bk->next_pre);
        c->idle_min = min64(c->idle_min, tc);
        h->idle_min_all = min64(h->idle_min_all, tc);
        /* the batch caller has unlinked r: requests of the bank still pending */
        if (bk->n_pend > 0) {
            c->idle_act = min64(c->idle_act, tc);
            h->idle_act_all = min64(h->idle_act_all, tc);
        }
    }
    if (!h->exhaustive) {
        /* the batch caller has unlinked r already, serve_one never linked it */
        bk->reps_dirty = 1;
        pc->col_dirty = 1;
        /* the row aggregates see this bank only as a PRE candidate (a
         * pending non-hit and no hit left); next_pre and n_hits changed */
        if (bk->n_hits == 0 && bk->n_pend > 0) pc->row_dirty = 1;
    }
}

static void issue_act(struct plena_hbm *h, uint64_t t, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    struct pch *pc = &h->pcs[r->pc];
    struct chan *c = &h->chans[r->ch];
    bk->row = r->row;
    bk->open = 1;
    bk->open_pos = (uint32_t)c->n_open;
    c->open[c->n_open++] = r->bank;
    c->dirty = 1;
    bank_changed(h, r->bank);
    bk->next_col = t + h->rcd_ps;
    bk->next_pre = max64(bk->next_pre, t + h->ras_ps);
    bk->next_act = t + h->rc_ps;
    pc->last_act = t;
    pc->has_act = 1;
    h->bg_last[r->bgi] = t;
    h->bg_has[r->bgi] = 1;
    pc->faw[pc->faw_head] = t;
    pc->faw_head = (pc->faw_head + 1) & 3;
    if (pc->n_faw < 4) pc->n_faw++;
    pc->act_term = pc_act_term(h, pc);
    c->row_bus_free = t + 2 * h->T;
    bk->last_use = t;
    uint32_t n = 0, nw = 0;
    if (h->exhaustive) {
        for (size_t j = 0; j < c->n_pend; j++) {
            const struct req *q = &h->reqs[c->pend[j]];
            if (q->bank == r->bank && q->row == r->row) {
                n++;
                nw += q->is_write;
            }
        }
    } else {
        for (uint32_t q = bk->head; q != NIL; q = h->reqs[q].next)
            if (h->reqs[q].row == r->row) {
                n++;
                nw += h->reqs[q].is_write;
            }
    }
    /* >= 1 (r itself), but 0 for serve_one()'s unlisted request: it sets the count */
    bk->n_hits = n;
    bk->n_whits = nw;
    emit(h, t, "ACT", r);
}

static void issue_pre(struct plena_hbm *h, uint64_t t, struct req *r)
{
    struct bank *bk = &h->banks[r->bank];
    struct bank_x *bx = &h->bankx[r->bank];
    if (bx->first_close == NONE) {
        bx->first_close = t;
        bx->first_idle = 0;
    }
    close_bank(h, r->bank);
    bk->next_act = max64(bk->next_act, t + h->rp_ps);
    h->chans[r->ch].row_bus_free = t + h->T;
    emit(h, t, "PRE", r);
}

/* Scheduler step 4 for one channel, literally (exhaustive mode): every pending
 * request in sequence order. */
static void channel_step_literal(struct plena_hbm *h, struct chan *c, uint64_t t)
{
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

/* ---- fast path: representatives and pseudo-channel aggregates ---- */

/* The oldest pending read hit, write hit and non-hit of a bank. Every
 * request of a bank that needs the same command (RD, WR, or the ACT / PRE of
 * a non-hit) has the same earliest legal time, so in step 4 (a) and (b) the
 * oldest one of each kind is the only one of them that can be chosen. */
static void update_reps(struct plena_hbm *h, struct bank *bk)
{
    uint32_t rd = NIL, wr = NIL, nh = NIL;
    /* each kind still to find exists in the list: stop once all are found */
    int need_nh = bk->n_pend > bk->n_hits;
    int need_rd = bk->n_hits > bk->n_whits;
    int need_wr = bk->n_whits > 0;
    for (uint32_t q = bk->head; q != NIL; q = h->reqs[q].next) {
        const struct req *r = &h->reqs[q];
        if (bk->open && r->row == bk->row) {
            if (r->is_write) {
                if (wr == NIL) wr = q;
            } else if (rd == NIL) {
                rd = q;
            }
        } else if (nh == NIL) {
            nh = q;
            need_nh = 0;
        }
        if (!need_nh && (rd != NIL || !need_rd) && (wr != NIL || !need_wr)) break;
    }
    struct bank_x *bx = &h->bankx[bk - h->banks];
    bx->rep_rd = rd;
    bx->rep_wr = wr;
    bx->rep_nh = nh;
    bk->reps_dirty = 0;
}

/* Within one serve() request indices grow with sequence numbers, so the
 * oldest candidate is the smallest index (NIL, the largest, is "none"). */
static uint32_t take(uint32_t best, uint32_t q)
{
    return q < best ? q : best;
}

/* Recomputes the pseudo channel's column aggregates and returns its oldest
 * column candidate legal at t, given which directions pass the channel and
 * pseudo-channel terms (both 0: aggregates only). */
static uint32_t scan_col(struct plena_hbm *h, struct pch *pc, uint64_t t, int ok_rd, int ok_wr)
{
    uint64_t m_rd = NONE, m_wr = NONE;
    uint32_t best = NIL;
    for (size_t k = 0; k < pc->n_active; k++) {
        struct bank *bk = &h->banks[pc->active[k]];
        struct bank_x *bx = &h->bankx[pc->active[k]];
        if (bk->n_hits == 0) continue;
        if (bk->reps_dirty) {
            if (bk->n_pend == bk->n_hits && (bk->n_whits == 0 || bk->n_whits == bk->n_hits)) {
                /* the frequent case of update_reps: every pending request
                 * is a hit of one direction, the oldest is the head */
                bx->rep_rd = bk->n_whits == 0 ? bk->head : NIL;
                bx->rep_wr = bk->n_whits == 0 ? NIL : bk->head;
                bx->rep_nh = NIL;
                bk->reps_dirty = 0;
            } else {
                update_reps(h, bk);
            }
        }
        uint64_t nc = bk->next_col;
        uint32_t rd = bx->rep_rd, wr = bx->rep_wr;
        if (rd != NIL && nc < m_rd) m_rd = nc;
        if (wr != NIL && nc < m_wr) m_wr = nc;
        if (nc <= t) {
            /* NIL never beats best */
            if (ok_rd && rd < best) best = rd;
            if (ok_wr && wr < best) best = wr;
        }
    }
    pc->col_min[0] = m_rd;
    pc->col_min[1] = m_wr;
    pc->col_dirty = 0;
    return best;
}

/* The same for row commands (ACT passes the pseudo-channel terms iff ok_act). */
static uint32_t scan_row(struct plena_hbm *h, struct pch *pc, uint64_t t, int ok_act)
{
    uint64_t m_act = NONE, m_pre = NONE;
    uint32_t best = NIL;
    for (size_t k = 0; k < pc->n_active; k++) {
        uint32_t b = pc->active[k];
        struct bank *bk = &h->banks[b];
        if (bk->n_pend == bk->n_hits) continue; /* no non-hit */
        if (bk->reps_dirty) update_reps(h, bk);
        if (!bk->open) {
            uint64_t x = max64(bk->next_act, bg_term(h, b >> h->k_bits));
            m_act = min64(m_act, x);
            if (ok_act && x <= t) best = take(best, h->bankx[b].rep_nh);
        } else if (bk->n_hits == 0) {
            m_pre = min64(m_pre, bk->next_pre);
            if (bk->next_pre <= t) best = take(best, h->bankx[b].rep_nh);
        }
    }
    pc->act_min = m_act;
    pc->pre_min = m_pre;
    pc->row_dirty = 0;
    return best;
}

/* Scheduler step 4 for one channel over its pseudo channels' aggregates and
 * banks' representatives: the same choice as the literal scan (the legal
 * candidate with the smallest sequence number). A pseudo channel whose
 * shared terms or clean aggregates show nothing legal at t is not scanned. */
static void channel_step_fast(struct plena_hbm *h, uint32_t ch, uint64_t t)
{
    struct chan *c = &h->chans[ch];
    size_t P = h->p.pseudo_channels;
    struct pch *pcs = &h->pcs[(size_t)ch * P];
    uint32_t best = NIL;
    /* the cached candidate time was due (or stale): recompute it after this tick */
    c->dirty = 1;
    /* (a) column */
    if (c->col_bus_free <= t) {
        for (size_t i = 0; i < P; i++) {
            struct pch *pc = &pcs[i];
            if (pc->n_active == 0) continue;
            int ok_rd = pc->col_term[0] <= t;
            int ok_wr = pc->col_term[1] <= t;
            if (!ok_rd && !ok_wr) continue;
            if (!pc->col_dirty && !(ok_rd && pc->col_min[0] <= t) &&
                !(ok_wr && pc->col_min[1] <= t))
                continue;
            best = take(best, scan_col(h, pc, t, ok_rd, ok_wr));
        }
        if (best != NIL) {
            struct req *r = &h->reqs[best];
            unlink_req(h, r);
            c->n_req--;
            issue_col(h, t, r);
        }
    }
    /* (b) row, on the state left by (a) */
    if (c->row_bus_free > t) return;
    best = NIL;
    for (size_t i = 0; i < P; i++) {
        struct pch *pc = &pcs[i];
        if (pc->n_active == 0) continue;
        int ok_act = pc->act_term <= t;
        if (!pc->row_dirty && !(ok_act && pc->act_min <= t) && pc->pre_min > t) continue;
        best = take(best, scan_row(h, pc, t, ok_act));
    }
    if (best != NIL) {
        struct req *r = &h->reqs[best];
        if (h->banks[r->bank].open)
            issue_pre(h, t, r);
        else
            issue_act(h, t, r);
    }
}

/* Earliest time anything in channel ch could happen, its state unchanged, or
 * a lower bound of it (a stale column aggregate is replaced by its pseudo
 * channel's terms: the tick reached that way rescans it). Processing a tick
 * at which nothing happens changes nothing, so a lower bound is safe. */
static uint64_t channel_cand(struct plena_hbm *h, uint32_t ch)
{
    const struct chan *c = &h->chans[ch];
    size_t P = h->p.pseudo_channels;
    struct pch *pcs = &h->pcs[(size_t)ch * P];
    uint64_t col = NONE, row = NONE;
    for (size_t i = 0; i < P; i++) {
        struct pch *pc = &pcs[i];
        if (pc->n_active == 0) continue;
        uint64_t t_rd = pc->col_term[0], t_wr = pc->col_term[1];
        if (pc->col_dirty) {
            col = min64(col, min64(t_rd, t_wr));
        } else {
            /* max(x, NONE) = NONE: an empty aggregate stays "never" */
            col = min64(col, max64(t_rd, pc->col_min[0]));
            col = min64(col, max64(t_wr, pc->col_min[1]));
        }
        if (pc->row_dirty) scan_row(h, pc, 0, 0);
        row = min64(row, max64(pc->act_term, pc->act_min));
        row = min64(row, pc->pre_min);
    }
    uint64_t req = min64(max64(c->col_bus_free, col), max64(c->row_bus_free, row));
    uint64_t cand = h->p.row_idle_close > 0 ? c->idle_act : NONE;
    /* no request command issues before a refresh block ends */
    if (req != NONE) cand = min64(cand, max64(req, h->blocked_until));
    return cand;
}

/* ---- the controller ---- */

/* Scheduler step 1 at tick t: every refresh window at or before t. */
static void refresh_step(struct plena_hbm *h, uint64_t t)
{
    const struct plena_hbm_params *p = &h->p;
    if (p->nREFI == 0 || t < h->next_ref) return;
    do {
        /* close_bank of every open bank, the open lists emptied at once */
        for (uint32_t ch = 0; ch < p->channels; ch++) {
            struct chan *c = &h->chans[ch];
            for (size_t i = 0; i < c->n_open; i++) {
                uint32_t b = c->open[i];
                struct bank *bk = &h->banks[b];
                bk->open = 0;
                bk->n_hits = 0;
                bk->n_whits = 0;
                bank_changed(h, b);
            }
            c->n_open = 0;
        }
        h->blocked_until = h->next_ref + (uint64_t)p->nRFC * h->T;
        emit(h, t, "REF", NULL);
        const uint64_t step = (uint64_t)p->nREFI * h->T;
        h->next_ref += step;
        /* untraced, the windows between only move the block (no bank is
         * open after the first): jump to the last one, so a long compute
         * gap costs O(1) rather than one iteration per window */
        if (!h->trace && h->next_ref <= t) h->next_ref += (t - h->next_ref) / step * step;
    } while (h->next_ref <= t);
    for (uint32_t ch = 0; ch < p->channels; ch++) {
        h->chans[ch].dirty = 1;
        h->chans[ch].idle_min = NONE;
        h->chans[ch].idle_act = NONE;
    }
    h->idle_min_all = NONE;
    h->idle_act_all = NONE;
}

/* Step 2's close of bank b, due at tc (with the memo's records while the
 * memo records: memo_record reads them only of the closes in the tick loop
 * of a batch's missed parts, and memo_save resets first_close before it). */
static inline __attribute__((always_inline)) void idle_close(struct plena_hbm *h, uint32_t b,
                                                             uint64_t tc)
{
    struct bank *bk = &h->banks[b];
    if (h->memo_rec) {
        struct bank_x *bx = &h->bankx[b];
        bx->idle_tc = tc;
        if (bx->first_close == NONE) {
            bx->first_close = tc;
            bx->first_idle = 1;
        }
        bx->act_before_close = bk->next_act;
    }
    close_bank(h, b);
    bk->next_act = max64(bk->next_act, tc + h->rp_ps);
}

/* Scheduler step 2 at tick t (no bus used); each bank's effect is independent
 * of the others. The fast path scans a channel only once its lower bound is
 * due, and makes the bound exact again. */
static void idle_step(struct plena_hbm *h, uint64_t t)
{
    const struct plena_hbm_params *p = &h->p;
    if (p->row_idle_close == 0 || (!h->exhaustive && h->idle_min_all > t)) return;
    uint64_t all = NONE;
    for (uint32_t ch = 0; ch < p->channels; ch++) {
        struct chan *c = &h->chans[ch];
        if (!h->exhaustive && c->idle_min > t) {
            all = min64(all, c->idle_min);
            continue;
        }
        uint64_t next = NONE, next_act = NONE;
        for (size_t i = 0; i < c->n_open;) {
            uint32_t b = c->open[i];
            struct bank *bk = &h->banks[b];
            if (bk->n_hits == 0) {
                uint64_t tc = max64(bk->last_use + h->idle_ps, bk->next_pre);
                if (tc <= t) {
                    idle_close(h, b, tc); /* moves another open bank into slot i */
                    continue;
                }
                next = min64(next, tc);
                if (bk->n_pend > 0) next_act = min64(next_act, tc);
            }
            i++;
        }
        c->idle_min = next;
        c->idle_act = next_act;
        c->dirty = 1;
        all = min64(all, next);
    }
    h->idle_min_all = all;
    /* idle_act_all stays a lower bound: the scanned channels' idle_act only rose */
}

/* Step 2 in the fast tick loop: only the banks of the busy channels with
 * requests pending (their active lists), the others' closes deferred to
 * a full idle_step. */
static void idle_step_act(struct plena_hbm *h, uint64_t t)
{
    uint64_t all = NONE;
    for (size_t k = 0; k < h->n_busy; k++) {
        uint32_t ch = h->busy[k];
        struct chan *c = &h->chans[ch];
        if (c->idle_act > t) {
            all = min64(all, c->idle_act);
            continue;
        }
        size_t P = h->p.pseudo_channels;
        uint64_t next = NONE;
        for (size_t i = 0; i < P; i++) {
            const struct pch *pc = &h->pcs[(size_t)ch * P + i];
            for (size_t j = 0; j < pc->n_active; j++) {
                uint32_t b = pc->active[j];
                const struct bank *bk = &h->banks[b];
                if (!bk->open || bk->n_hits > 0) continue;
                uint64_t tc = max64(bk->last_use + h->idle_ps, bk->next_pre);
                if (tc <= t)
                    idle_close(h, b, tc);
                else
                    next = min64(next, tc);
            }
        }
        c->idle_act = next;
        c->dirty = 1;
        all = min64(all, next);
    }
    h->idle_act_all = all;
}

/* One controller tick (the four steps of "Scheduler"). The fast path's
 * ticks after the first (full 0) take step 2 for the banks with pending
 * requests only; the deferred closes are applied, each as of its own
 * time, before a refresh window and after the loop (run_ticks). */
static void tick(struct plena_hbm *h, uint64_t t, int full)
{
    const struct plena_hbm_params *p = &h->p;
    /* the guards of steps 1 and 2 inline: most ticks need neither */
    if (p->nREFI > 0 && t >= h->next_ref) {
        /* the closes due before this tick came before its refresh */
        if (!full && !h->exhaustive && p->row_idle_close > 0 && h->idle_min_all <= t - h->T)
            idle_step(h, t - h->T); /* (the literal model took step 2 at every tick) */
        refresh_step(h, t);
    }
    if (p->row_idle_close > 0) {
        if (full || h->exhaustive) {
            if (h->exhaustive || h->idle_min_all <= t) idle_step(h, t);
        } else if (h->idle_act_all <= t) {
            idle_step_act(h, t);
        }
    }
    /* 3 blocked */
    if (t < h->blocked_until) return;
    /* 4 per channel, ascending index */
    if (!h->exhaustive) {
        for (size_t k = 0; k < h->n_busy; k++) {
            struct chan *c = &h->chans[h->busy[k]];
            if (c->n_req > 0 && (c->dirty || c->cand <= t)) channel_step_fast(h, h->busy[k], t);
        }
        return;
    }
    for (uint32_t ch = 0; ch < p->channels; ch++)
        if (h->chans[ch].n_pend > 0) channel_step_literal(h, &h->chans[ch], t);
}

/* Earliest tick after t at which tick() could do anything, given that the
 * state stays as tick(t) left it until then: every pending request's
 * earliest legal command time (never before blocked_until), the next refresh
 * window and every due idle close. Equal results to stepping every tick. */
static uint64_t next_tick(struct plena_hbm *h, uint64_t t)
{
    uint64_t c = h->p.nREFI > 0 ? h->next_ref : NONE;
    /* channels without requests can only have idle closes due */
    if (h->p.row_idle_close > 0) c = min64(c, h->idle_act_all);
    for (size_t k = 0; k < h->n_busy; k++) {
        uint32_t ch = h->busy[k];
        struct chan *cn = &h->chans[ch];
        if (cn->n_req == 0) continue;
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

/* Drops every queued request (out of memory while queueing). */
static void drop_queue(struct plena_hbm *h)
{
    size_t n_pc = (size_t)h->p.channels * h->p.pseudo_channels;
    for (size_t i = 0; i < n_pc; i++) {
        struct pch *pc = &h->pcs[i];
        for (size_t k = 0; k < pc->n_active; k++) {
            struct bank *bk = &h->banks[pc->active[k]];
            bk->head = h->bankx[pc->active[k]].tail = NIL;
            bk->n_pend = 0;
        }
        pc->n_active = 0;
        pc->col_dirty = pc->row_dirty = 1;
    }
    for (uint32_t ch = 0; ch < h->p.channels; ch++) {
        struct chan *c = &h->chans[ch];
        c->n_pend = 0;
        c->dirty = 1;
        c->idle_min = 0; /* open banks may have lost their hits: rescan */
        c->n_req = 0;
    }
    h->idle_min_all = 0;
    h->n_busy = 0;
    for (size_t i = 0; i < h->n_banks; i++) {
        h->banks[i].n_hits = 0;
        h->banks[i].n_whits = 0;
        h->banks[i].reps_dirty = 1;
    }
    h->n_pending = 0;
}

/* A new request for txn: its sequence number and the flat channel,
 * pseudo-channel, bank-group and bank indices of its address. */
static void fill_req(struct plena_hbm *h, struct req *r, const struct plena_hbm_txn *txn)
{
    struct plena_hbm_loc loc;
    map_addr(h, txn->addr, &loc);
    r->seq = h->seq++;
    r->row = loc.row;
    r->done = 0;
    r->ch = loc.channel;
    r->pc = loc.channel * h->p.pseudo_channels + loc.pseudo_channel;
    r->bgi = r->pc * h->p.bank_groups + loc.bank_group;
    r->bank = r->bgi * h->p.banks_per_group + loc.bank;
    r->is_write = txn->is_write != 0;
    r->l_pc = (uint8_t)loc.pseudo_channel;
    r->l_bg = (uint8_t)loc.bank_group;
    r->l_bank = (uint8_t)loc.bank;
}

/* A request to the open row is a hit; a hit takes the bank out of the
 * idle-close set (idle_min stays a lower bound). */
static void count_hit(struct bank *bk, const struct req *r)
{
    if (bk->open && bk->row == r->row) {
        bk->n_hits++;
        bk->n_whits += r->is_write;
    }
}

/* Fast path: appends request i to its bank's pending list and the bank to
 * its pseudo channel's active list, the channel to the busy list. */
static void link_req(struct plena_hbm *h, uint32_t i)
{
    struct req *r = &h->reqs[i];
    struct chan *c = &h->chans[r->ch];
    struct bank *bk = &h->banks[r->bank];
    /* sequence numbers grow with i: appending keeps the list in order */
    struct bank_x *bx = &h->bankx[r->bank];
    r->prev = bx->tail;
    r->next = NIL;
    if (bx->tail != NIL)
        h->reqs[bx->tail].next = i;
    else
        bk->head = i;
    bx->tail = i;
    if (bk->n_pend++ == 0) {
        struct pch *pc = &h->pcs[r->pc];
        bx->act_pos = (uint32_t)pc->n_active;
        pc->active[pc->n_active++] = r->bank;
    }
    bank_changed(h, r->bank);
    c->dirty = 1;
    if (c->n_req++ == 0) {
        /* insert into the ascending busy list (a handful of channels) */
        size_t k = h->n_busy++;
        while (k > 0 && h->busy[k - 1] > r->ch) {
            h->busy[k] = h->busy[k - 1];
            k--;
        }
        h->busy[k] = r->ch;
    }
}

static int enqueue(struct plena_hbm *h, const struct plena_hbm_txn *txn, size_t n)
{
    if (n > h->cap_reqs && plena_grow((void **)&h->reqs, &h->cap_reqs, n, sizeof *h->reqs) != 0)
        return -1;
    /* Fast path: only the channels receiving requests change; the others'
     * cached candidate times stay valid (nothing changed their state). */
    if (h->exhaustive)
        for (uint32_t ch = 0; ch < h->p.channels; ch++) {
            struct chan *c = &h->chans[ch];
            c->n_pend = 0;
            c->dirty = 1;
        }
    h->n_reqs = n;
    h->n_busy = 0;
    for (size_t i = 0; i < n; i++) {
        struct req *r = &h->reqs[i];
        fill_req(h, r, &txn[i]);
        struct chan *c = &h->chans[r->ch];
        struct bank *bk = &h->banks[r->bank];
        if (h->exhaustive) {
            if (plena_grow((void **)&c->pend, &c->cap_pend, c->n_pend + 1, sizeof c->pend[0]) != 0)
                return -1;
            c->pend[c->n_pend++] = (uint32_t)i;
        } else {
            link_req(h, (uint32_t)i);
        }
        count_hit(bk, r);
    }
    h->n_pending = n;
    return 0;
}

/* enqueue(h, txn, 1) for serve_one(), which issues every command of its
 * one request itself and never ticks: the request is kept out of the bank,
 * pseudo-channel and channel lists (with every queue empty, as after any
 * serve, they would hold it alone), and only what they would leave behind
 * once it completes is set: the dirty flags and the hit count. */
static void enqueue_one(struct plena_hbm *h, const struct plena_hbm_txn *txn)
{
    struct req *r = &h->reqs[0];
    fill_req(h, r, txn);
    r->prev = r->next = NIL;
    struct bank *bk = &h->banks[r->bank];
    bank_changed(h, r->bank);
    h->chans[r->ch].dirty = 1;
    h->n_reqs = 1;
    h->n_busy = 0;
    count_hit(bk, r);
    h->n_pending = 1;
}

/* The tick loop of serve() from h->cur until every queued request has
 * issued; returns the latest done time (at least t_start). */
static uint64_t run_ticks(struct plena_hbm *h, uint64_t t_start)
{
    if (!h->exhaustive) {
        /* the banks with requests pending now are among the idle set's */
        uint64_t all = NONE;
        for (size_t k = 0; k < h->n_busy; k++) {
            struct chan *c = &h->chans[h->busy[k]];
            c->idle_act = c->idle_min;
            all = min64(all, c->idle_act);
        }
        h->idle_act_all = all;
    }
    int full = 1;
    uint64_t last = h->cur;
    while (h->n_pending > 0) {
        tick(h, h->cur, full);
        full = 0;
        last = h->cur;
        if (h->n_pending == 0) {
            h->cur += h->T;
            break;
        }
        h->cur = h->exhaustive ? h->cur + h->T : next_tick(h, h->cur);
    }
    /* step 2 of the last tick for the deferred closes */
    if (!h->exhaustive && h->p.row_idle_close > 0 && h->idle_min_all <= last) idle_step(h, last);
    uint64_t latest = t_start;
    for (size_t i = 0; i < h->n_reqs; i++)
        latest = max64(latest, h->reqs[i].done);
    return latest;
}

/* ---- channel memo: key, record, replay ---- */

/* A time in the key: its offset from t0, or "before t0". */
static uint32_t enc_key(uint64_t x, uint64_t t0, int *ok)
{
    if (x < t0) return MEMO_BELOW;
    if (x - t0 >= MEMO_BELOW) {
        *ok = 0;
        return 0;
    }
    return (uint32_t)(x - t0);
}

/* A time in the record: its offset from t0, or "unchanged" for a field the
 * batch left before t0 (every write is >= t0, so it was not written). */
static uint32_t enc_rec(uint64_t after, uint64_t before, uint64_t t0, int *ok)
{
    if (after < t0) {
        if (after != before) *ok = 0;
        return MEMO_BELOW;
    }
    return enc_key(after, t0, ok);
}

/* Appends time x to a key unless it is before t0; returns whether it did. */
static uint32_t key_time(uint32_t *k, size_t *w, uint64_t x, uint64_t t0, int *ok)
{
    uint32_t v = enc_key(x, t0, ok);
    if (v == MEMO_BELOW) return 0;
    k[(*w)++] = v;
    return 1;
}

static uint64_t dec_rec(uint32_t w, uint64_t cur, uint64_t t0)
{
    return w == MEMO_BELOW ? cur : t0 + w;
}

static struct memo *memo_get(struct plena_hbm *h)
{
    if (h->memo) return h->memo;
    struct memo *m = plena_calloc(1, sizeof *m);
    if (!m) return NULL;
    size_t n_pc = (size_t)h->p.channels * h->p.pseudo_channels;
    m->lab_bank = plena_calloc(h->n_banks, 1);
    m->lab_bg = plena_calloc(n_pc * h->p.bank_groups, 1);
    m->lab_pc = plena_calloc(n_pc, 1);
    m->lab_ch = plena_calloc(h->p.channels, 1);
    m->n_slots = MEMO_SLOTS0;
    m->slot = plena_calloc(m->n_slots, sizeof *m->slot);
    if (!m->lab_bank || !m->lab_bg || !m->lab_pc || !m->lab_ch || !m->slot) {
        memo_free(m);
        h->memo_on = 0; /* serve without it */
        return NULL;
    }
    memset(m->lab_bank, 0xFF, h->n_banks);
    memset(m->lab_bg, 0xFF, n_pc * h->p.bank_groups);
    memset(m->lab_pc, 0xFF, n_pc);
    memset(m->lab_ch, 0xFF, h->p.channels);
    h->memo = m;
    return m;
}

static void memo_free(struct memo *m)
{
    if (!m) return;
    while (m->chunks) {
        void **next = *m->chunks;
        plena_free(m->chunks);
        m->chunks = next;
    }
    plena_free(m->slot);
    plena_free(m->lab_bank);
    plena_free(m->lab_bg);
    plena_free(m->lab_pc);
    plena_free(m->lab_ch);
    plena_free(m->key);
    plena_free(m->rec);
    plena_free(m);
}

/* Request q's key word in its channel's key: bank, bank group and pseudo
 * channel labelled in order of first use within the channel (appended to
 * the touched-entity lists tb/tg/tp) and its row's class among its bank's
 * distinct rows; 0 when the bank has too many rows to key. */
static int memo_label(const struct plena_hbm *h, struct memo *m, struct memo_seg *sg, uint32_t q,
                      uint32_t *word)
{
    uint32_t b = m->qb[q];
    uint32_t lb = m->lab_bank[b];
    if (lb == 0xFF) {
        /* the flat indices nest: parents by shifts */
        uint32_t bgi = b >> h->k_bits, pc = bgi >> h->g_bits;
        if (m->lab_pc[pc] == 0xFF) {
            m->lab_pc[pc] = (uint8_t)sg->np;
            m->tp[sg->p0 + sg->np++] = pc;
        }
        if (m->lab_bg[bgi] == 0xFF) {
            m->lab_bg[bgi] = (uint8_t)sg->ng;
            m->tg[sg->g0 + sg->ng++] = bgi;
        }
        lb = sg->nb++;
        m->lab_bank[b] = (uint8_t)lb;
        m->tb[sg->b0 + lb] = b;
        m->nrows[sg->b0 + lb] = 0;
    }
    uint32_t gb = sg->b0 + lb, rc = 0;
    while (rc < m->nrows[gb] && m->rows[gb][rc] != m->qr[q])
        rc++;
    if (rc == m->nrows[gb]) {
        if (rc == MEMO_MAXROWS) return 0;
        m->rows[gb][rc] = m->qr[q];
        m->nrows[gb]++;
    }
    *word = lb | rc << 8 | (uint32_t)m->qw[q] << 16;
    return 1;
}

/* The most words a key of a segment of nq requests can take (memo_key):
 * 3 + nq + 4 nb + 2 ng + 9 np + 3 with nb, ng, np <= nq. */
#define MEMO_KEY_WORDS(nq) (3 + 16 * (size_t)(nq) + 3)

/* Channel segment sg's key (after steps 1 and 2 of the batch's first tick
 * t0) at m->key + sg->k0: its requests (words 3 .. 3 + nq, written by
 * serve_memo through memo_label), then the state of the entities they
 * touch; sets sg->klen (0 when it cannot be memoised). Clears the labels. */
static void memo_key(struct plena_hbm *h, struct memo *m, struct memo_seg *sg, uint64_t t0)
{
    uint32_t *k = m->key + sg->k0;
    size_t w = 3 + (size_t)sg->nq;
    int ok = !sg->bad;
    for (uint32_t i = 0; ok && i < sg->nb; i++) {
        uint32_t gi = sg->b0 + i;
        const struct bank *bk = &h->banks[m->tb[gi]];
        uint32_t st = MEMO_CLOSED;
        if (bk->open) {
            st = MEMO_OTHER;
            for (uint32_t rc = 0; rc < m->nrows[gi]; rc++)
                if (m->rows[gi][rc] == bk->row) st = rc;
        }
        /* a state word with a mask of the times that are >= t0, then those
         * (most are before t0 after a compute gap: short keys) */
        size_t w0 = w++;
        uint32_t mask = 0;
        mask |= key_time(k, &w, bk->next_act, t0, &ok) << 0;
        mask |= key_time(k, &w, bk->next_pre, t0, &ok) << 1;
        mask |= key_time(k, &w, bk->next_col, t0, &ok) << 2;
        /* last_use matters only to an open bank's idle close while it has
         * no hit (a closed bank's ACT, a hit's RD overwrite it first). Such
         * a bank's close time tc (> t0: step 2 of t0 ran) is not part of
         * the hashed key but a condition checked against the record (see
         * memo_record): the key only says that the bank has one. */
        m->bcond[gi] = 0;
        if (bk->open && bk->n_hits == 0 && h->idle_ps > 0) {
            uint64_t tc = max64(bk->last_use + h->idle_ps, bk->next_pre);
            if (tc <= t0 || tc - t0 >= MEMO_BELOW) ok = 0;
            m->cond[sg->c0 + sg->nc++] = (uint32_t)(tc - t0);
            m->bcond[gi] = 1;
            mask |= 1u << 3;
        }
        k[w0] = m->lab_bg[m->tb[gi] >> h->k_bits] | st << 8 | mask << 16;
    }
    for (uint32_t i = 0; ok && i < sg->ng; i++) {
        uint32_t g = m->tg[sg->g0 + i];
        size_t w0 = w++;
        uint32_t mask = key_time(k, &w, bg_term(h, g), t0, &ok);
        k[w0] = m->lab_pc[g >> h->g_bits] | mask << 8;
    }
    for (uint32_t i = 0; ok && i < sg->np; i++) {
        const struct pch *pc = &h->pcs[m->tp[sg->p0 + i]];
        size_t w0 = w++;
        uint32_t mask = 0;
        mask |= key_time(k, &w, pc->bus_free, t0, &ok) << 0;
        mask |= key_time(k, &w, pc->next_rd, t0, &ok) << 1;
        mask |= key_time(k, &w, pc->next_wr, t0, &ok) << 2;
        mask |= key_time(k, &w, pc->has_act ? pc->last_act + h->rrds_ps : 0, t0, &ok) << 3;
        for (uint32_t j = 0; j < pc->n_faw; j++) {
            uint64_t x = pc->faw[(pc->faw_head - pc->n_faw + j) & 3] + h->faw_ps;
            mask |= key_time(k, &w, x, t0, &ok) << (4 + j);
        }
        k[w0] = pc->n_faw | mask << 8;
    }
    if (ok) {
        const struct chan *c = &h->chans[sg->ch];
        size_t w0 = w++;
        uint32_t mask = key_time(k, &w, c->row_bus_free, t0, &ok);
        mask |= key_time(k, &w, c->col_bus_free, t0, &ok) << 1;
        k[w0] = mask;
        k[0] = sg->nq;
        k[1] = sg->nb | sg->ng << 8 | sg->np << 16;
        k[2] = enc_key(h->blocked_until, t0, &ok);
    }
    /* the labels are only needed while keying */
    for (uint32_t i = 0; i < sg->nb; i++)
        m->lab_bank[m->tb[sg->b0 + i]] = 0xFF;
    for (uint32_t i = 0; i < sg->ng; i++)
        m->lab_bg[m->tg[sg->g0 + i]] = 0xFF;
    for (uint32_t i = 0; i < sg->np; i++)
        m->lab_pc[m->tp[sg->p0 + i]] = 0xFF;
    sg->klen = ok ? w : 0;
}

/* Word pairs times odd constants, summed (independent products), then
 * mixed; equal keys are confirmed by comparison. */
static uint64_t memo_hash(const uint32_t *k, size_t n)
{
    uint64_t a = n, b = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += ((uint64_t)k[i] << 32 | k[i + 1]) * 0x9E3779B97F4A7C15ull + i;
        b += ((uint64_t)k[i + 2] << 32 | k[i + 3]) * 0xC2B2AE3D27D4EB4Full;
        a = a << 7 | a >> 57;
        b = b << 11 | b >> 53;
    }
    for (; i < n; i++)
        a += (k[i] + (uint64_t)i) * 0xFF51AFD7ED558CCDull;
    uint64_t x = a ^ (b * 0x165667B19E3779F9ull);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
}

/* Whether a record's idle conditions (after its first two words) hold for
 * the close times cond[0 .. nc): "tc > v" (the bank was closed by a PRE at
 * t0 + v, before its idle timer: any later tc gives the same schedule) or
 * "tc == v" (the idle timer closed it). */
static int memo_conds_hold(const uint32_t *o, const uint32_t *cond, uint32_t nc)
{
    for (uint32_t j = 0; j < nc; j++) {
        uint32_t kind = o[2 + 2 * j], v = o[3 + 2 * j];
        if (kind ? cond[j] != v : cond[j] <= v) return 0;
    }
    return 1;
}

/* The slot whose key equals key and whose record's conditions hold, or the
 * empty slot ending the probe (one key may have several records). */
static struct memo_slot *memo_find(struct memo *m, uint64_t hash, const uint32_t *key, size_t klen,
                                   const uint32_t *cond, uint32_t nc)
{
    size_t mask = m->n_slots - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        struct memo_slot *s = &m->slot[i];
        if (!s->data) return s;
        if (s->hash == hash && s->klen == klen && !memcmp(s->data, key, klen * sizeof *key) &&
            memo_conds_hold(s->data + klen, cond, nc))
            return s;
    }
}

/* Snapshot of a segment's entities before the tick loop (miss path). */
static void memo_save(struct plena_hbm *h, struct memo *m, const struct memo_seg *sg, uint32_t s)
{
    for (uint32_t i = sg->b0; i < sg->b0 + sg->nb; i++) {
        m->b0[i] = h->banks[m->tb[i]];
        h->bankx[m->tb[i]].first_close = NONE;
    }
    for (uint32_t i = sg->g0; i < sg->g0 + sg->ng; i++) {
        m->g0[i] = h->bg_last[m->tg[i]];
        m->g0_has[i] = h->bg_has[m->tg[i]];
    }
    for (uint32_t i = sg->p0; i < sg->p0 + sg->np; i++)
        m->p0[i] = h->pcs[m->tp[i]];
    m->c0[s][0] = h->chans[sg->ch].row_bus_free;
    m->c0[s][1] = h->chans[sg->ch].col_bus_free;
}

/* The record of a channel segment after the tick loop: its latest done
 * and last column command L, then its entities' state as of tick L (a bank
 * the idle timer closed after L is recorded open, with its next_act from
 * before the close: that close belongs to the batch's last tick, applied
 * on replay); 0 if it cannot be recorded. */
static size_t memo_record(struct plena_hbm *h, struct memo *m, const struct memo_seg *sg,
                          uint32_t s, uint64_t t0)
{
    size_t need = 2 + 2 * sg->nc + 5 * sg->nb + sg->ng + 9 * sg->np + 2;
    if (need > m->cap_rec && plena_grow((void **)&m->rec, &m->cap_rec, need, sizeof *m->rec) != 0)
        return 0;
    const struct chan *c = &h->chans[sg->ch];
    const uint64_t L = c->last_col;
    uint32_t *o = m->rec;
    size_t w = 0;
    int ok = 1;
    o[w++] = enc_key(c->max_done, t0, &ok);
    o[w++] = enc_key(L, t0, &ok);
    /* the idle conditions: a bank open on another row without a hit is
     * closed once, by a PRE at tp or by its idle timer at tc, whichever is
     * first (nothing else changes it before: step 2 closes it at the
     * first tick >= tc, step 4 only by that PRE). With tc > tp (tp a
     * tick) the PRE came first and tc was never looked at, so every
     * tc' > tp gives the same run; an idle close at tc needs tc itself. */
    for (uint32_t i = sg->b0, j = sg->c0; i < sg->b0 + sg->nb; i++) {
        if (!m->bcond[i]) continue;
        const struct bank_x *bx = &h->bankx[m->tb[i]];
        if (bx->first_close == NONE || bx->first_close < t0) ok = 0;
        o[w++] = bx->first_idle;
        o[w++] = bx->first_idle ? m->cond[j] : enc_key(bx->first_close, t0, &ok);
        j++;
    }
    for (uint32_t i = sg->b0; i < sg->b0 + sg->nb; i++) {
        const struct bank *bk = &h->banks[m->tb[i]], *b0 = &m->b0[i];
        const struct bank_x *bx = &h->bankx[m->tb[i]];
        int open = bk->open, late = !open && bx->idle_tc > L && bx->idle_tc != NONE;
        uint64_t next_act = late ? bx->act_before_close : bk->next_act;
        uint32_t st = MEMO_CLOSED;
        if (open || late) {
            st = MEMO_OTHER;
            for (uint32_t rc = 0; rc < m->nrows[i]; rc++)
                if (m->rows[i][rc] == bk->row) st = rc;
            /* open on a row no request targets: it was never re-opened */
            if (st == MEMO_OTHER && !(b0->open && b0->row == bk->row)) ok = 0;
        }
        o[w++] = st;
        o[w++] = enc_rec(next_act, b0->next_act, t0, &ok);
        o[w++] = enc_rec(bk->next_pre, b0->next_pre, t0, &ok);
        o[w++] = enc_rec(bk->next_col, b0->next_col, t0, &ok);
        o[w++] = enc_rec(bk->last_use, b0->last_use, t0, &ok);
    }
    /* the last ACT of a bank group / pseudo channel: "unchanged" unless the
     * batch issued one (a first ACT at 0 equals the initial time) */
    for (uint32_t i = sg->g0; i < sg->g0 + sg->ng; i++) {
        uint32_t g = m->tg[i];
        int acted = h->bg_has[g] && (!m->g0_has[i] || h->bg_last[g] != m->g0[i]);
        o[w++] = acted ? enc_key(h->bg_last[g], t0, &ok) : MEMO_BELOW;
    }
    for (uint32_t i = sg->p0; i < sg->p0 + sg->np; i++) {
        const struct pch *pc = &h->pcs[m->tp[i]], *p0 = &m->p0[i];
        o[w++] = enc_rec(pc->bus_free, p0->bus_free, t0, &ok);
        o[w++] = enc_rec(pc->next_rd, p0->next_rd, t0, &ok);
        o[w++] = enc_rec(pc->next_wr, p0->next_wr, t0, &ok);
        int acted = pc->has_act && (!p0->has_act || pc->last_act != p0->last_act);
        o[w++] = acted ? enc_key(pc->last_act, t0, &ok) : MEMO_BELOW;
        /* the ACTs of this batch are the ring's entries >= t0 (earlier
         * ones happened before t0), the most recent ones */
        uint32_t n_new = 0;
        for (uint32_t j = 0; j < pc->n_faw; j++)
            n_new += pc->faw[(pc->faw_head - pc->n_faw + j) & 3] >= t0;
        o[w++] = n_new;
        for (uint32_t j = 0; j < 4; j++)
            o[w++] = j < n_new ? enc_key(pc->faw[(pc->faw_head - n_new + j) & 3], t0, &ok) : 0;
    }
    o[w++] = enc_rec(c->row_bus_free, m->c0[s][0], t0, &ok);
    o[w++] = enc_rec(c->col_bus_free, m->c0[s][1], t0, &ok);
    return ok ? w : 0;
}

/* n bytes (a multiple of 4) for a slot's data from the memo's chunks; NULL
 * when out of memory. */
static uint32_t *memo_alloc(struct memo *m, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n > m->room_left) {
        size_t head = sizeof(void *), size = max64(MEMO_CHUNK, head + n);
        void **c = plena_malloc(size);
        if (!c) return NULL;
        *c = m->chunks;
        m->chunks = c;
        m->room = (char *)c + head;
        m->room_left = size - head;
    }
    uint32_t *p = (uint32_t *)(void *)m->room;
    m->room += n;
    m->room_left -= n;
    return p;
}

/* Stores key + record; silently does nothing once the memo is full. */
static void memo_store(struct memo *m, uint64_t hash, const uint32_t *key, size_t klen,
                       const uint32_t *cond, uint32_t nc, size_t rlen)
{
    size_t bytes = (klen + rlen) * sizeof(uint32_t);
    if (m->bytes + bytes > MEMO_MAX_BYTES) {
        m->full = 1;
        return;
    }
    if (2 * (m->n_used + 1) > m->n_slots) {
        if (m->n_slots >= MEMO_MAX_SLOTS) {
            m->full = 1;
            return;
        }
        struct memo_slot *ns = plena_calloc(2 * m->n_slots, sizeof *ns);
        if (!ns) return;
        size_t mask = 2 * m->n_slots - 1;
        for (size_t i = 0; i < m->n_slots; i++) {
            if (!m->slot[i].data) continue;
            size_t j = m->slot[i].hash & mask;
            while (ns[j].data)
                j = (j + 1) & mask;
            ns[j] = m->slot[i];
        }
        plena_free(m->slot);
        m->slot = ns;
        m->n_slots *= 2;
    }
    struct memo_slot *s = memo_find(m, hash, key, klen, cond, nc);
    if (s->data) return;
    s->data = memo_alloc(m, bytes);
    if (!s->data) return;
    memcpy(s->data, key, klen * sizeof(uint32_t));
    memcpy(s->data + klen, m->rec, rlen * sizeof(uint32_t));
    s->hash = hash;
    s->klen = (uint32_t)klen;
    m->n_used++;
    m->bytes += bytes;
}

/* A hit: the segment's entities take the recorded state (as of its last
 * column command). */
static void memo_apply(struct plena_hbm *h, struct memo *m, const struct memo_seg *sg,
                       const uint32_t *o, uint64_t t0)
{
    size_t w = 2 + 2 * (size_t)sg->nc;
    struct chan *c = &h->chans[sg->ch];
    for (uint32_t i = sg->b0; i < sg->b0 + sg->nb; i++) {
        uint32_t b = m->tb[i];
        struct bank *bk = &h->banks[b];
        uint32_t st = o[w++];
        if (st == MEMO_CLOSED) {
            if (bk->open) close_bank(h, b);
        } else {
            if (!bk->open) {
                bk->open = 1;
                bk->open_pos = (uint32_t)c->n_open;
                c->open[c->n_open++] = b;
            }
            if (st != MEMO_OTHER) bk->row = m->rows[i][st];
        }
        bk->next_act = dec_rec(o[w++], bk->next_act, t0);
        bk->next_pre = dec_rec(o[w++], bk->next_pre, t0);
        bk->next_col = dec_rec(o[w++], bk->next_col, t0);
        bk->last_use = dec_rec(o[w++], bk->last_use, t0);
        bk->n_hits = 0;
        bk->n_whits = 0;
        bk->reps_dirty = 1;
        if (bk->open && h->idle_ps > 0) {
            uint64_t tc = max64(bk->last_use + h->idle_ps, bk->next_pre);
            c->idle_min = min64(c->idle_min, tc);
            h->idle_min_all = min64(h->idle_min_all, tc);
        }
    }
    for (uint32_t i = sg->g0; i < sg->g0 + sg->ng; i++) {
        uint32_t v = o[w++];
        if (v == MEMO_BELOW) continue;
        h->bg_last[m->tg[i]] = t0 + v;
        h->bg_has[m->tg[i]] = 1;
    }
    for (uint32_t i = sg->p0; i < sg->p0 + sg->np; i++) {
        struct pch *pc = &h->pcs[m->tp[i]];
        pc->bus_free = dec_rec(o[w++], pc->bus_free, t0);
        pc->next_rd = dec_rec(o[w++], pc->next_rd, t0);
        pc->next_wr = dec_rec(o[w++], pc->next_wr, t0);
        uint32_t la = o[w++];
        if (la != MEMO_BELOW) {
            pc->last_act = t0 + la;
            pc->has_act = 1;
        }
        uint32_t n_new = o[w++];
        for (uint32_t j = 0; j < n_new; j++) {
            pc->faw[pc->faw_head] = t0 + o[w + j];
            pc->faw_head = (pc->faw_head + 1) & 3;
            if (pc->n_faw < 4) pc->n_faw++;
        }
        w += 4;
        pc->col_term[0] = pc_col_term(h, pc, 0);
        pc->col_term[1] = pc_col_term(h, pc, 1);
        pc->act_term = pc_act_term(h, pc);
        pc->col_dirty = pc->row_dirty = 1;
    }
    c->row_bus_free = dec_rec(o[w++], c->row_bus_free, t0);
    c->col_bus_free = dec_rec(o[w++], c->col_bus_free, t0);
    c->dirty = 1;
}

/* serve() on the fast path with the channel memo: each channel's part of
 * the batch is replayed when its key is known, the rest scheduled by the
 * tick loop (channels do not interact in step 4). */
static uint64_t serve_memo(struct plena_hbm *h, uint64_t t_start, const struct plena_hbm_txn *txn,
                           size_t n)
{
    struct memo *m = h->memo;
    if (n > h->cap_reqs && plena_grow((void **)&h->reqs, &h->cap_reqs, n, sizeof *h->reqs) != 0) {
        h->oom = 1;
        drop_queue(h);
        return t_start;
    }
    h->n_busy = 0;
    size_t need = n * MEMO_KEY_WORDS(1); /* the longest keys (nseg <= n) */
    int can_key =
        need <= m->cap_key || plena_grow((void **)&m->key, &m->cap_key, need, sizeof *m->key) == 0;
    /* the requests themselves (fill_req) are only needed on a miss */
    const unsigned kb = h->k_bits, gb = h->g_bits, pb = h->p_bits;
    const unsigned col_shift = 6 + h->c_bits, hash_bit = h->p.address_hash_bit, n_sel = h->n_sel;
    const unsigned ch_shift = pb + gb + kb;
    const uint64_t sel_mask = h->sel_mask;
    const uint32_t *sel_flat = h->sel_flat;
    uint32_t nseg = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        uint64_t row;
        if (sel_flat) {
            /* map_addr through the table */
            uint64_t a = txn[i].addr, above = a >> col_shift, sel = above & sel_mask;
            if (hash_bit > 0) sel ^= (a >> hash_bit) & sel_mask;
            b = sel_flat[sel];
            row = above >> n_sel;
        } else {
            struct plena_hbm_loc loc;
            map_addr(h, txn[i].addr, &loc);
            b = ((((uint32_t)loc.channel << pb | loc.pseudo_channel) << gb | loc.bank_group)
                 << kb) |
                loc.bank;
            row = loc.row;
        }
        uint32_t ch = b >> ch_shift;
        struct bank *bk = &h->banks[b];
        uint32_t wr = txn[i].is_write != 0;
        /* count_hit without a branch: the bank loads of successive
         * requests overlap (the bank array is rarely in cache here) */
        uint32_t hit = bk->open & (bk->row == row);
        bk->n_hits += hit;
        bk->n_whits += hit & wr;
        m->qb[i] = b;
        m->qr[i] = row;
        m->qw[i] = (uint8_t)wr;
        uint32_t s = m->lab_ch[ch];
        if (s == 0xFF) {
            s = nseg++;
            m->lab_ch[ch] = (uint8_t)s;
            memset(&m->seg[s], 0, sizeof m->seg[s]);
            m->seg[s].ch = ch;
        }
        m->qs[i] = (uint8_t)s;
        m->seg[s].nq++;
    }
    /* each segment's key and entity lists at the offsets their bounds
     * give (a segment touches at most nq banks, bank groups, pseudo
     * channels and idle conditions) */
    for (uint32_t s = 0, q0 = 0; s < nseg; s++) {
        struct memo_seg *sg = &m->seg[s];
        sg->q0 = sg->b0 = sg->g0 = sg->p0 = sg->c0 = q0;
        sg->k0 = (size_t)q0 * MEMO_KEY_WORDS(1) - 6 * (size_t)q0 + 6 * (size_t)s;
        q0 += sg->nq;
        sg->nq = 0;
        m->lab_ch[sg->ch] = 0xFF;
    }
    /* the request words of the keys, in sequence order (labels in order
     * of first use within each channel) */
    if (can_key) {
        /* H_PREFETCH_M interleaves two streams (elements, scales) that stay
         * on one bank and row for a while: a request like the one two
         * before it (bank, so segment; row; direction) has its word, and
         * memo_label would find both labels and change nothing */
        uint32_t w1 = 0, w2 = 0;
        for (size_t i = 0; i < n; i++) {
            struct memo_seg *sg = &m->seg[m->qs[i]];
            uint32_t *word = &m->key[sg->k0 + 3 + sg->nq];
            if (i >= 2 && m->qb[i] == m->qb[i - 2] && m->qr[i] == m->qr[i - 2] &&
                m->qw[i] == m->qw[i - 2])
                *word = w2;
            else if (!memo_label(h, m, sg, (uint32_t)i, word))
                sg->bad = 1;
            sg->nq++;
            w2 = w1;
            w1 = *word;
        }
    } else
        for (size_t i = 0; i < n; i++)
            m->seg[m->qs[i]].nq++;
    h->n_pending = n;
    const uint64_t seq0 = h->seq;
    h->seq += n;
    /* steps 1 and 2 of the first tick (tick() finds nothing more to do
     * for them); they see the hit counts, not the lists */
    uint64_t t0 = max64(h->cur, ceil_tick(t_start, h->T));
    h->cur = t0;
    if (h->p.nREFI > 0 && t0 >= h->next_ref) refresh_step(h, t0);
    if (h->p.row_idle_close > 0 && h->idle_min_all <= t0) idle_step(h, t0);
    uint64_t latest = t_start, end = t0;
    int any_miss = 0;
    /* every part's key first (each reads only its own channel's state),
     * their slots fetched while the next is keyed */
    for (uint32_t s = 0; s < nseg; s++) {
        struct memo_seg *sg = &m->seg[s];
        if (can_key) memo_key(h, m, sg, t0);
        if (sg->klen) {
            sg->hash = memo_hash(m->key + sg->k0, sg->klen);
            __builtin_prefetch(&m->slot[sg->hash & (m->n_slots - 1)]);
        }
    }
    /* then the records of the slots the keys hash to (a large memo is
     * mostly out of cache: the segments' misses overlap) */
    for (uint32_t s = 0; s < nseg; s++) {
        const struct memo_seg *sg = &m->seg[s];
        if (!sg->klen) continue;
        const struct memo_slot *sl = &m->slot[sg->hash & (m->n_slots - 1)];
        if (!sl->data || sl->hash != sg->hash) continue;
        const char *d = (const char *)sl->data;
        for (size_t off = 0; off < 4 * (sg->klen + 2 + 2 * (size_t)sg->nc + 5 * (size_t)sg->nb);
             off += 64)
            __builtin_prefetch(d + off);
    }
    for (uint32_t s = 0; s < nseg; s++) {
        struct memo_seg *sg = &m->seg[s];
        if (sg->klen) {
            const uint32_t *key = m->key + sg->k0;
            struct memo_slot *sl = memo_find(m, sg->hash, key, sg->klen, m->cond + sg->c0, sg->nc);
            const uint32_t *o = sl->data ? sl->data + sg->klen : NULL;
            if (o && (h->p.nREFI == 0 || h->next_ref > t0 + o[1])) {
                m->hits++;
                memo_apply(h, m, sg, o, t0);
                latest = max64(latest, t0 + o[0]);
                end = max64(end, t0 + o[1] + h->T);
                continue;
            }
            if (!m->full) memo_save(h, m, sg, s);
        }
        m->misses++;
        sg->miss = 1;
        any_miss = 1;
        h->chans[sg->ch].last_col = 0;
        h->chans[sg->ch].max_done = 0;
    }
    if (any_miss) {
        /* the other channels' requests, in sequence order */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!m->seg[m->qs[i]].miss) continue;
            /* fill_req from the mapped bank and row (the flat indices nest) */
            struct req *r = &h->reqs[k];
            uint32_t b = m->qb[i];
            r->seq = seq0 + i;
            r->row = m->qr[i];
            r->done = 0;
            r->bank = b;
            r->bgi = b >> kb;
            r->pc = r->bgi >> gb;
            r->ch = r->pc >> pb;
            r->is_write = m->qw[i];
            r->l_pc = (uint8_t)(r->pc & h->p_mask);
            r->l_bg = (uint8_t)(r->bgi & h->g_mask);
            r->l_bank = (uint8_t)(b & (((uint32_t)1 << kb) - 1));
            link_req(h, (uint32_t)k++);
        }
        h->seq = seq0 + n;
        h->n_reqs = k;
        h->n_pending = k;
        uint64_t ref0 = h->next_ref;
        h->memo_rec = 1;
        latest = max64(latest, run_ticks(h, t_start));
        h->memo_rec = 0;
        for (uint32_t s = 0; s < nseg && h->next_ref == ref0 && !m->full; s++) {
            const struct memo_seg *sg = &m->seg[s];
            if (!sg->miss || !sg->klen) continue;
            size_t rlen = memo_record(h, m, sg, s, t0);
            if (rlen)
                memo_store(m, sg->hash, m->key + sg->k0, sg->klen, m->cond + sg->c0, sg->nc, rlen);
        }
    }
    h->n_pending = 0;
    h->n_busy = 0;
    /* the batch's last tick is the latest of every channel's; the idle
     * closes due by then (no refresh window comes first: checked) */
    h->cur = max64(h->cur, end);
    uint64_t last = h->cur - h->T;
    if (h->p.row_idle_close > 0 && h->idle_min_all <= last) idle_step(h, last);
    return latest;
}

/* All of txn[0..n) enter at t_start; returns the latest done time. */
static uint64_t serve(struct plena_hbm *h, uint64_t t_start, const struct plena_hbm_txn *txn,
                      size_t n)
{
    /* Ticks are considered only while an instruction is being served ("Issue
     * modes": the first tick considered is ceil(t_start / T) x T). What happened
     * in between (refresh windows, idle closes) is applied lazily by steps 1
     * and 2 of that first tick, with this instruction's requests already
     * queued, so an idle close never takes a row this instruction is about to
     * hit. This reading reproduces the G1 reference totals; stepping
     * idle ticks with an empty queue instead gives 2003 rather than 1950
     * cycles for the random-order case. */
    uint64_t t0 = ceil_tick(t_start, h->T);
    if (!h->exhaustive && h->memo_on && !h->trace && n <= MEMO_MAXREQ && h->rd_to_wr >= 0 &&
        memo_get(h))
        return serve_memo(h, t_start, txn, n);
    if (n >= NIL || enqueue(h, txn, n) != 0) {
        /* Out of memory: drop the request (no state change beyond the
         * sequence numbers) and report it through plena_hbm_out_of_memory. */
        h->oom = 1;
        drop_queue(h);
        return t_start;
    }
    h->cur = max64(h->cur, t0);
    return run_ticks(h, t_start);
}

/* Sequential issue, fast path: the one pending request r of serve()
 * with the tick loop replaced by its closed form. With r alone in the queue,
 * step 4 can only issue r's next command (PRE if its bank is open on another
 * row, ACT if closed, then RD / WR), at the earliest tick >= lo where the
 * max() of its legality terms and blocked_until is reached; nothing
 * else changes r's terms before then except two events, which are applied in
 * tick order first:
 *  - a refresh window W at or before that tick: the ticks before W apply their
 *    idle closes (step 2 at W - T covers them all: a bank's close is as of its
 *    own tc), then tick W refreshes and closes idle banks, and r's command is
 *    recomputed from W (its bank closed, blocked_until raised);
 *  - an idle close due by that tick: applied (step 2), then recomputed. It
 *    can only be r's bank when that bank is open on another row; the ACT then
 *    needed is never legal before the PRE would have been (tc + nRP >=
 *    next_pre), so recomputing from the same lo is the tick order.
 * A row command at tick t leaves the column command to tick t + T at the
 * earliest (step 4 (a) precedes (b)), and the ACT after a PRE waits for the
 * row bus anyway. Equal to the tick loop command by command (test_hbm_seq). */
static uint64_t serve_one(struct plena_hbm *h, uint64_t t_start, const struct plena_hbm_txn *txn)
{
    uint64_t T = h->T;
    if (h->cap_reqs < 1 && plena_grow((void **)&h->reqs, &h->cap_reqs, 1, sizeof *h->reqs) != 0) {
        h->oom = 1;
        drop_queue(h);
        return t_start;
    }
    enqueue_one(h, txn);
    struct req *r = &h->reqs[0];
    struct bank *bk = &h->banks[r->bank];
    uint64_t lo = max64(h->cur, ceil_tick(t_start, T));
    /* the guards of refresh_step and idle_step inline, as in tick() */
    if (h->p.nREFI > 0 && lo >= h->next_ref) refresh_step(h, lo);
    if (h->p.row_idle_close > 0 && h->idle_min_all <= lo) idle_step(h, lo);
    for (;;) {
        int hit = bk->open && bk->row == r->row;
        uint64_t x = hit ? col_ready(h, r) : !bk->open ? act_ready(h, r) : pre_ready(h, r);
        uint64_t t = max64(lo, ceil_tick(max64(x, h->blocked_until), T));
        if (h->p.nREFI > 0 && h->next_ref <= t) {
            uint64_t w = h->next_ref; /* > lo: tick lo's refreshes are done */
            idle_step(h, w - T);
            refresh_step(h, w);
            idle_step(h, w);
            lo = w;
            continue;
        }
        if (h->p.row_idle_close > 0 && h->idle_min_all <= t) {
            idle_step(h, t); /* leaves idle_min_all > t */
            continue;
        }
        if (hit) {
            issue_col(h, t, r);
            h->cur = t + T;
            return max64(t_start, r->done);
        }
        if (bk->open) {
            issue_pre(h, t, r);
        } else {
            issue_act(h, t, r);
            /* r is in no bank list (enqueue_one): count its own hit */
            bk->n_hits = 1;
            bk->n_whits = r->is_write;
        }
        lo = t + T;
    }
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
        e = h->exhaustive ? serve(h, e, &txn[j], 1) : serve_one(h, e, &txn[j]);
    return e - t_start_ps;
}
