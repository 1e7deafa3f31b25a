/* Timing model (docs/timing.md).
 *
 * Observes executed-instruction events from the emulator and never changes
 * functional results. All time is u64 picoseconds; cycles are derived once
 * per reported quantity with ceil; execution is serial (docs/timing.md
 * "Clock").
 *
 * Three parts:
 *   - plena_hbm_*      the in-house HBM2 command-level model ("HBM model")
 *   - plena_timing_*   per-instruction durations and run totals ("Per-instruction costs")
 *   - plena_overlap_*  the opt-in overlap overlay ("Overlap overlay") */
#ifndef PLENA_TIMING_TIMING_H
#define PLENA_TIMING_TIMING_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../emu/emu.h"
#include "../settings/settings.h"

/* cycles = ceil(ps / period) */
static inline uint64_t plena_ps_to_cycles(uint64_t ps, uint64_t period_ps)
{
    return ps / period_ps + (ps % period_ps != 0);
}

/* ---- HBM model ---- */
struct plena_hbm;

/* Optional debug hook (conformance tests): called for every DRAM command.
 * cmd is "ACT", "PRE", "RD", "WR" or "REF"; seq is the request sequence
 * number (-1 for REF). */
typedef void (*plena_hbm_trace_fn)(void *ctx, uint64_t tick_ps, const char *cmd, unsigned channel,
                                   unsigned pseudo_channel, unsigned bank_group, unsigned bank,
                                   uint64_t row, int64_t seq);

int plena_hbm_new(const struct plena_hbm_params *p, struct plena_hbm **out, struct plena_err *err);
void plena_hbm_free(struct plena_hbm *h);
void plena_hbm_set_trace(struct plena_hbm *h, plena_hbm_trace_fn fn, void *ctx);
/* Batch issue (H_PREFETCH_M/V): all transactions enter at t_start; returns
 * the duration in ps (latest done - t_start; 0 for n = 0 or the ideal model). */
uint64_t plena_hbm_batch(struct plena_hbm *h, uint64_t t_start_ps, const struct plena_hbm_txn *txn,
                         size_t n);
/* Sequential issue (H_STORE_V): transaction j enters when j-1 is done. */
uint64_t plena_hbm_sequential(struct plena_hbm *h, uint64_t t_start_ps,
                              const struct plena_hbm_txn *txn, size_t n);

/* Address mapping (docs/timing.md "Address mapping"; with the granule hash when
 * ADDRESS_HASH_BIT > 0). */
struct plena_hbm_loc {
    unsigned channel, pseudo_channel, bank_group, bank;
    uint64_t row;
};
void plena_hbm_map(const struct plena_hbm *h, uint64_t addr, struct plena_hbm_loc *loc);
/* Test aid: 1 = step every tick (the definition, docs/timing.md "Scheduler"),
 * 0 = skip ticks where nothing can happen (default; results are identical by
 * construction). */
void plena_hbm_set_exhaustive(struct plena_hbm *h, int on);
/* Test aid: 0 turns off the skip-ahead path's channel memo (docs/timing.md
 * "Channel memo"; on by default, results identical by construction). */
void plena_hbm_set_memo(struct plena_hbm *h, int on);
/* Channel parts of batches replayed from the memo so far (0 in exhaustive
 * mode or traced). */
uint64_t plena_hbm_memo_hits(const struct plena_hbm *h);
/* Non-zero once a request could not be queued for lack of memory (its
 * instruction was then charged as if it had no transactions). */
int plena_hbm_out_of_memory(const struct plena_hbm *h);

/* ---- per-instruction timing ---- */
struct plena_timing;

int plena_timing_new(const struct plena_settings *s, struct plena_timing **out,
                     struct plena_err *err);
void plena_timing_free(struct plena_timing *t);
/* Charges one executed instruction starting at the current clock; returns its
 * duration in ps and advances the clock by it. */
uint64_t plena_timing_account(struct plena_timing *t, const struct plena_emu_event *ev);
uint64_t plena_timing_now_ps(const struct plena_timing *t);
uint64_t plena_timing_bytes_read(const struct plena_timing *t);    /* 64 x read transactions */
uint64_t plena_timing_bytes_written(const struct plena_timing *t); /* 64 x write transactions */
/* Bytes of the last accounted instruction (64 x its read / write transactions;
 * 0 for non-HBM instructions), for per-stage byte billing. */
void plena_timing_last_bytes(const struct plena_timing *t, uint64_t *bytes_read,
                             uint64_t *bytes_written);
/* 0, or PLENA_E_NOMEM (filled into err) when the HBM model ran out of memory
 * during some instruction, or PLENA_E_INPUT when the total passed 2^64-1 ps:
 * the run's timing is then not trustworthy. */
int plena_timing_status(const struct plena_timing *t, struct plena_err *err);
struct plena_hbm *plena_timing_hbm(struct plena_timing *t);
/* Fixed (non-HBM) cost in cycles of an opcode per the cost table, for
 * conformance tests (V_TOPK with E experts; f0_skip gives 0). */
uint64_t plena_timing_fixed_cycles(const struct plena_settings *s, unsigned op, uint32_t topk_e,
                                   int f0_skip);

/* ---- per-instruction record: the timeline's hook (docs/timeline.md) ----
 * What one accounted instruction cost and when, for observers that want every
 * instruction (the Perfetto timeline). The run session fills one only when such
 * an observer was asked for, right after plena_timing_account (and the overlay's
 * observe), so a run without a timeline does no extra work per instruction. */
struct plena_timing_record {
    uint32_t pc;
    uint8_t op;
    uint64_t start_ps, dur_ps;          /* serial clock: start + dur = next start */
    uint64_t bytes_read, bytes_written; /* 64 x transactions */
    uint64_t hidden_ps;                 /* overlay on: queued prefetch time hidden behind it */
    uint64_t pending_prefetches;        /* overlay on: prefetches still queued after it */
};
/* One executed instruction of a serial run as the run session buffers it
 * for the consumers that take instructions in batches (the profile, the
 * timeline without the overlay): the start is implied (the previous step's
 * end, the first one's at 0), bytes are 64 x the transaction counts. A batch
 * loop runs away from the emulator's branches, so per instruction the run
 * pays a few stores (docs/timeline.md "Cost"). */
struct plena_timing_step {
    uint64_t dur_ps;
    uint64_t rd_txn, wr_txn;
    uint32_t pc;
    uint8_t op;
};
/* plena_timing_account, also writing the instruction as a step into *s
 * (its duration, its read and write transaction counts -- what
 * plena_timing_last_bytes gives / 64 -- its pc and opcode): the run's
 * observer makes one call per instruction for its batches. */
uint64_t plena_timing_account_step(struct plena_timing *t, const struct plena_emu_event *ev,
                                   struct plena_timing_step *s);
/* Fills r for the instruction `ev` just accounted with duration `dur_ps`
 * (start = the clock before it); hidden/pending stay 0 (see plena_overlap_last). */
void plena_timing_record_last(const struct plena_timing *t, const struct plena_emu_event *ev,
                              uint64_t dur_ps, struct plena_timing_record *r);

/* ---- overlap overlay ---- */
struct plena_overlap_report {
    uint64_t serial_picos, serial_cycles;
    uint64_t adjusted_picos, adjusted_cycles;
    uint64_t hidden_prefetch_picos, hidden_prefetch_cycles;
    uint64_t pending_prefetch_picos, pending_prefetch_cycles;
    uint64_t prefetch_ops, compute_ops, barrier_ops, dependent_prefetch_stalls;
};

struct plena_overlap;
int plena_overlap_new(const struct plena_settings *s, struct plena_overlap **out,
                      struct plena_err *err);
void plena_overlap_free(struct plena_overlap *o);
/* Feed every executed instruction in order with its serial duration. */
void plena_overlap_observe(struct plena_overlap *o, const struct plena_emu_event *ev,
                           uint64_t duration_ps);
/* The last observed instruction's share of the overlay: prefetch time it hid
 * (ps) and the prefetches still queued after it (for plena_timing_record). */
void plena_overlap_last(const struct plena_overlap *o, uint64_t *hidden_ps, uint64_t *pending);
void plena_overlap_report(const struct plena_overlap *o, uint64_t serial_total_ps,
                          uint64_t clock_period_ps, struct plena_overlap_report *r);

/* Classification and the low-level accounting of the overlay (what
 * plena_overlap_observe does after classifying; used directly by tests).
 * Ranges are half-open element intervals. */
enum plena_overlap_space { PLENA_OVERLAP_MATRIX = 0, PLENA_OVERLAP_VECTOR = 1 };
enum plena_overlap_class {
    PLENA_OVERLAP_OTHER = 0,
    PLENA_OVERLAP_PREFETCH,
    PLENA_OVERLAP_BARRIER,
    PLENA_OVERLAP_COMPUTE
};
struct plena_overlap_range {
    enum plena_overlap_space space;
    uint64_t lo, hi;
};
struct plena_overlap_class_info {
    enum plena_overlap_class cls;
    struct plena_overlap_range write;    /* prefetch only */
    struct plena_overlap_range reads[2]; /* compute only */
    size_t n_reads;
};
void plena_overlap_classify(const struct plena_settings *s, const struct plena_emu_event *ev,
                            struct plena_overlap_class_info *ci);
/* Returns 0, or PLENA_E_NOMEM when the queue could not grow (the entry is
 * then treated as exposed, which only under-reports hidden time). */
int plena_overlap_prefetch(struct plena_overlap *o, uint64_t duration_ps,
                           const struct plena_overlap_range *write);
void plena_overlap_barrier(struct plena_overlap *o);
void plena_overlap_compute(struct plena_overlap *o, uint64_t duration_ps,
                           const struct plena_overlap_range *reads, size_t n_reads);

#endif
