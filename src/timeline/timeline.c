/* timeline.c — the Perfetto timeline (docs/timeline.md): stage regions kept
 * exactly (their durations sum to the profile's per-stage picoseconds), instruction
 * groups per resource track merged automatically within a bound, counter buckets
 * for HBM bytes and outstanding prefetches, and the trace-event JSON text.
 *
 * Times are integer picoseconds until the JSON, which states them in
 * microseconds with six fractional digits (1 ps resolution, printed from the
 * integers, never through a double). Execution is serial, so a track's slices
 * never overlap and a stage region lasts exactly the sum of its instructions. */
#include "timeline/timeline.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "isa/isa.h"
#include "isa/stages.h"

const char *const plena_timeline_detail_names[] = {"stage", "group", "instruction", NULL};

const char *plena_timeline_detail_name(enum plena_timeline_detail d)
{
    return (unsigned)d <= PLENA_TIMELINE_INSTRUCTION ? plena_timeline_detail_names[d] : "?";
}

int plena_timeline_detail_parse(const char *s, enum plena_timeline_detail *d)
{
    for (unsigned i = 0; s && plena_timeline_detail_names[i]; i++)
        if (!strcmp(s, plena_timeline_detail_names[i])) {
            *d = (enum plena_timeline_detail)i;
            return 0;
        }
    return -1;
}

static const char *const track_names[PLENA_TL_TRACK_COUNT] = {
    "stages",
    "matrix",
    "vector",
    "scalar",
    "HBM prefetch (HBM->SRAM)",
    "HBM store (SRAM->HBM)",
    "other",
    "hidden prefetch (overlap)",
};

const char *plena_timeline_track_name(enum plena_timeline_track t)
{
    return (unsigned)t < PLENA_TL_TRACK_COUNT ? track_names[t] : "?";
}

enum plena_timeline_track plena_timeline_track_of(unsigned opcode)
{
    switch (plena_resource_of(opcode & 63)) {
    case PLENA_RESOURCE_MATRIX: return PLENA_TL_TRACK_MATRIX;
    case PLENA_RESOURCE_VECTOR: return PLENA_TL_TRACK_VECTOR;
    case PLENA_RESOURCE_SCALAR: return PLENA_TL_TRACK_SCALAR;
    case PLENA_RESOURCE_DMA:
        /* the direction from the WRITES column: H_STORE_V writes HBM */
        return plena_isa_info(opcode & 63)->writes & PLENA_MASK_HBM ? PLENA_TL_TRACK_HBM_WRITE
                                                                    : PLENA_TL_TRACK_HBM_READ;
    default: return PLENA_TL_TRACK_OTHER;
    }
}

/* A stage-track slice: one stage region, or (merged) consecutive regions with
 * each stage's picoseconds kept in ps[] so the per-stage sums stay exact (ps[]
 * is filled when regions join; an unjoined region's time is all its stage's). */
struct region {
    uint64_t start, dur;
    uint64_t count;
    uint64_t ps[PLENA_STAGE_COUNT];
    uint8_t stage;  /* the region's stage; merged: the stage with the most time */
    uint8_t merged; /* more than one region */
};

struct slice {
    uint64_t start, end;  /* end - start = busy unless merged */
    uint64_t busy, bytes; /* instruction time and HBM bytes inside */
    uint64_t count;       /* instructions */
    uint64_t win_end;     /* end of the merge window it started in (0: no merging yet) */
    uint32_t region;      /* sequence number of the stage region it started in */
    uint8_t stage;        /* that region's stage */
    uint8_t track, op, mixed;
};

#define NO_SLICE SIZE_MAX
#define SEG_SHUT 31 /* add_segment's track of an op above 63: never open */
/* A segment's per-track sums pack the busy time (below bit 42) and the
 * step count (above it) into one word, so a step costs one store instead
 * of two: a segment spans less than SEG_SPAN ps and takes steps of less
 * than SEG_SPAN ps each, so a track's time stays below 2 * SEG_SPAN =
 * 2^41, and at most SEG_MAX_STEPS steps, whose count fits the 22 bits above. */
#define SEG_SPAN      (UINT64_C(1) << 40)
#define SEG_COUNT_ONE (UINT64_C(1) << 42)
#define SEG_MAX_STEPS ((size_t)1 << 21)

/* What a segment of steps adds to the last slice of each track: kept in
 * the timeline and zero between segments (a segment resets the tracks it
 * touched), so a segment does not clear it first -- segments are often
 * short, and clearing cost more than their steps. Its loop writes these
 * sums through a pointer into *tl (locals would be the same: they are
 * indexed by track). The slices' ends are not summed: add_segment finds
 * them after the loop. */
struct segment {
    /* per track: busy time + SEG_COUNT_ONE per step */
    uint64_t sums[PLENA_TL_TRACK_COUNT];
    uint64_t txn[PLENA_TL_TRACK_COUNT];
    /* which tracks' last slices take steps and where the first of their
     * merge windows or the counter bucket ends: they change only on the
     * exact path (which clears `valid`) or when the clock passes `stop`
     * (where the segment ends) */
    int valid;
    unsigned open;
    uint64_t stop;
    uint64_t n_steps;  /* the steps taken (plena_timeline_stats) */
    uint64_t ops_seen; /* opcodes whose slice (of their track) add_segment checked */
};

struct plena_timeline {
    struct plena_timeline_opts o;
    const struct plena_labels *labels;
    size_t n_pc;
    /* per-instruction lookups precomputed (add() runs once per executed
     * instruction, so it touches one byte per pc and one per opcode) */
    uint8_t *pc_stage;
    uint8_t track_of[64];
    /* add_segment's track_of, for every byte (no mask in its loop): an op
     * above 63 is on SEG_SHUT, a track never open, so it takes the exact
     * path */
    uint8_t seg_track[256];
    /* add_segment's stage test: the first and one past the last pc of the
     * run of consecutive pcs of one stage that holds pc (direct path only) */
    struct pc_run {
        uint32_t lo, hi;
    } * pc_run;
    size_t cur_bucket;
    uint64_t bucket_end_ps; /* the current bucket ends here */
    struct region *reg;
    size_t n_reg, cap_reg;
    uint32_t region_seq; /* stage regions seen (the current one's number + 1) */
    int cur_stage;       /* stage of the current region; -1 before the first */
    struct region cur;   /* the open region (not yet in reg[]) */
    uint64_t reg_merge_ps;
    struct slice *sl;
    size_t n_sl, cap_sl;
    size_t last_on[PLENA_TL_TRACK_COUNT];
    struct slice grp, hid; /* the open group and hidden-prefetch slice */
    int grp_open, hid_open, prev_hid;
    int direct;        /* group detail without the overlay: add_direct */
    size_t into;       /* direct path: the slice the open group merged into, or NO_SLICE */
    uint64_t merge_ps; /* 0 until the first automatic merge */
    int cross;         /* merging ignores stage regions (only when regions alone do not fit) */
    uint64_t bucket_ps;
    size_t n_buckets;
    uint64_t now_ps;
    int nomem;
    /* the current bucket's figures, added to rd/wr/pend[cur_bucket] when
     * the bucket changes: per instruction only these (next to the other hot
     * fields) are touched, not three arrays 64 KiB apart, whose entries
     * alias at 4 KiB and stall the loads behind the stores */
    uint64_t acc_rd, acc_wr, acc_pend;
    uint64_t step_clock; /* plena_timeline_add_steps: the end of the last step */
    struct segment seg;  /* add_segment's sums, zero between segments */
    uint64_t rd[PLENA_TIMELINE_MAX_BUCKETS], wr[PLENA_TIMELINE_MAX_BUCKETS];
    uint64_t pend[PLENA_TIMELINE_MAX_BUCKETS];
};

/* tl->pc_run from tl->pc_stage */
static int pc_runs(struct plena_timeline *tl)
{
    tl->pc_run = plena_malloc((tl->n_pc ? tl->n_pc : 1) * sizeof *tl->pc_run);
    if (!tl->pc_run) return -1;
    for (size_t lo = 0, hi; lo < tl->n_pc; lo = hi) {
        for (hi = lo + 1; hi < tl->n_pc && tl->pc_stage[hi] == tl->pc_stage[lo];)
            hi++;
        for (size_t i = lo; i < hi; i++)
            tl->pc_run[i] = (struct pc_run){(uint32_t)lo, (uint32_t)hi};
    }
    return 0;
}

int plena_timeline_new(const struct plena_timeline_opts *o, const struct plena_labels *labels,
                       size_t n_pc, struct plena_timeline **out, struct plena_err *err)
{
    *out = NULL;
    if (labels && labels->n != n_pc)
        return PLENA_FAIL(err, PLENA_E_INPUT, "timeline",
                          "label count %zu does not match instruction count %zu", labels->n, n_pc);
    if (o->clock_period_ps == 0)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "timeline", "clock period 0 ps");
    struct plena_timeline *tl = plena_calloc(1, sizeof *tl);
    if (!tl) return PLENA_FAIL(err, PLENA_E_NOMEM, "timeline", "out of memory");
    tl->o = *o;
    /* fewer than 64 slices could not hold one per track after a full merge */
    if (tl->o.max_slices == 0) tl->o.max_slices = PLENA_TIMELINE_MAX_SLICES;
    if (tl->o.max_slices < 64) tl->o.max_slices = 64;
    tl->labels = labels;
    tl->n_pc = n_pc;
    tl->pc_stage = plena_malloc(n_pc ? n_pc : 1);
    if (!tl->pc_stage) {
        plena_free(tl);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "timeline", "out of memory");
    }
    for (size_t i = 0; i < n_pc; i++) {
        unsigned st = labels ? labels->v[i].stage : PLENA_STAGE_OTHER;
        tl->pc_stage[i] = (uint8_t)(st < PLENA_STAGE_COUNT ? st : PLENA_STAGE_OTHER);
    }
    for (unsigned op = 0; op < 64; op++)
        tl->track_of[op] = (uint8_t)plena_timeline_track_of(op);
    for (unsigned op = 0; op < 256; op++)
        tl->seg_track[op] = op < 64 ? tl->track_of[op] : SEG_SHUT;
    for (unsigned t = 0; t < PLENA_TL_TRACK_COUNT; t++)
        tl->last_on[t] = NO_SLICE;
    tl->bucket_ps = 1000000; /* 1 us; doubles as the run grows */
    tl->bucket_end_ps = tl->bucket_ps;
    tl->n_buckets = 1;
    tl->cur_stage = -1;
    tl->into = NO_SLICE;
    tl->direct = o->detail == PLENA_TIMELINE_GROUP && !o->overlap && !o->general_path;
    /* pcs are 32-bit in steps; a larger program takes the exact path */
    if (tl->direct && n_pc <= UINT32_MAX && pc_runs(tl)) {
        plena_timeline_free(tl);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "timeline", "out of memory");
    }
    *out = tl;
    return 0;
}

void plena_timeline_free(struct plena_timeline *tl)
{
    if (!tl) return;
    plena_free(tl->reg);
    plena_free(tl->sl);
    plena_free(tl->pc_stage);
    plena_free(tl->pc_run);
    plena_free(tl);
}

/* ---- automatic merging (docs/timeline.md "Size") ---- */

/* b starts no earlier than a, so "same window" is "b starts before a's window
 * ends": no division per slice (win_end is set when a slice is kept) */
static int mergeable(const struct plena_timeline *tl, const struct slice *a, const struct slice *b)
{
    return tl->merge_ps && (tl->cross || a->region == b->region) && b->start < a->win_end;
}

static void set_window(const struct plena_timeline *tl, struct slice *s)
{
    s->win_end = tl->merge_ps ? (s->start / tl->merge_ps + 1) * tl->merge_ps : 0;
}

static void merge_into(struct slice *a, const struct slice *b)
{
    a->end = b->end;
    a->busy += b->busy;
    a->bytes += b->bytes;
    a->count += b->count;
    if (a->op != b->op || b->mixed) a->mixed = 1;
}

/* One pass at the current window: each slice joins the previous slice of its
 * track when both start in the same window (and stage region). Slices of one
 * track stay in time order, so the merged ones never overlap. */
static void compact_pass(struct plena_timeline *tl)
{
    size_t w = 0;
    for (unsigned t = 0; t < PLENA_TL_TRACK_COUNT; t++)
        tl->last_on[t] = NO_SLICE;
    for (size_t i = 0; i < tl->n_sl; i++) {
        const struct slice *s = &tl->sl[i];
        size_t j = tl->last_on[s->track];
        if (j != NO_SLICE && mergeable(tl, &tl->sl[j], s)) {
            merge_into(&tl->sl[j], s);
            continue;
        }
        if (w != i) tl->sl[w] = *s; /* w <= i: the kept slices move down in place */
        set_window(tl, &tl->sl[w]);
        tl->last_on[tl->sl[w].track] = w;
        w++;
    }
    tl->n_sl = w;
}

static void compact(struct plena_timeline *tl)
{
    /* down to a quarter of the bound: the window then absorbs the following
     * slices for a while, so passes over the whole array stay rare */
    while (tl->n_sl > tl->o.max_slices / 4) {
        uint64_t span = tl->now_ps ? tl->now_ps : 1;
        if (!tl->merge_ps) {
            tl->merge_ps = span / tl->o.max_slices;
            if (tl->merge_ps < tl->o.clock_period_ps) tl->merge_ps = tl->o.clock_period_ps;
        } else if (tl->merge_ps <= span) {
            tl->merge_ps *= 2;
        } else if (!tl->cross) {
            /* a window wider than the run and still too many: the stage regions
             * alone are more than the bound, so slices may cross them; the
             * window starts small again */
            tl->cross = 1;
            tl->merge_ps = span / tl->o.max_slices;
            if (tl->merge_ps < tl->o.clock_period_ps) tl->merge_ps = tl->o.clock_period_ps;
        } else {
            tl->merge_ps *= 2;
        }
        compact_pass(tl);
        if (tl->cross && tl->merge_ps > 2 * span) break; /* at most one slice per track left */
    }
}

/* The append (and compaction) path of push_slice, out of line: push_slice
 * itself runs once per instruction group and stays small enough to inline. */
static __attribute__((noinline)) void append_slice(struct plena_timeline *tl, const struct slice *s)
{
    if (plena_grow((void **)&tl->sl, &tl->cap_sl, tl->n_sl + 1, sizeof *tl->sl)) {
        tl->nomem = 1;
        return;
    }
    tl->sl[tl->n_sl] = *s;
    set_window(tl, &tl->sl[tl->n_sl]);
    tl->last_on[s->track] = tl->n_sl++;
    if (tl->n_sl > tl->o.max_slices) compact(tl);
}

static inline void push_slice(struct plena_timeline *tl, const struct slice *s)
{
    size_t j = tl->last_on[s->track];
    if (j != NO_SLICE && mergeable(tl, &tl->sl[j], s)) {
        merge_into(&tl->sl[j], s);
        return;
    }
    append_slice(tl, s);
}

/* Stage regions beyond the bound: consecutive regions starting in the same
 * window join (their time is contiguous, so the joined slice lasts exactly
 * the sum); the window doubles until at most half the bound is left. */
/* The stage track's bound: a quarter of the resource slices' (its slices are
 * longer: a joined one lists every stage's share). */
static size_t max_regions(const struct plena_timeline *tl)
{
    return tl->o.max_slices / 4;
}

static void merge_region(struct region *a, const struct region *b)
{
    if (!a->merged) a->ps[a->stage] = a->dur;
    if (b->merged) {
        for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
            a->ps[s] += b->ps[s];
    } else {
        a->ps[b->stage] += b->dur;
    }
    a->dur += b->dur;
    a->count += b->count;
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        if (a->ps[s] > a->ps[a->stage]) a->stage = (uint8_t)s;
    a->merged = 1;
}

/* One pass at the current window over the closed regions. */
static void regions_pass(struct plena_timeline *tl)
{
    size_t w = 0;
    for (size_t i = 0; i < tl->n_reg; i++) {
        if (w && tl->reg[w - 1].start / tl->reg_merge_ps == tl->reg[i].start / tl->reg_merge_ps)
            merge_region(&tl->reg[w - 1], &tl->reg[i]);
        else
            tl->reg[w++] = tl->reg[i];
    }
    tl->n_reg = w;
}

static void compact_regions(struct plena_timeline *tl)
{
    size_t max = max_regions(tl);
    uint64_t span = tl->now_ps ? tl->now_ps : 1;
    /* the regions since the last compaction first join at the window already reached */
    if (tl->reg_merge_ps) regions_pass(tl);
    while (tl->n_reg > max / 2) {
        if (!tl->reg_merge_ps) {
            tl->reg_merge_ps = span / max;
            if (tl->reg_merge_ps < tl->o.clock_period_ps) tl->reg_merge_ps = tl->o.clock_period_ps;
        } else {
            tl->reg_merge_ps *= 2;
        }
        regions_pass(tl);
        if (tl->reg_merge_ps > 2 * span) break;
    }
}

/* Moves the open region into reg[] (compacting first when full); -1 when out
 * of memory (remembered). */
static int close_region(struct plena_timeline *tl)
{
    if (tl->n_reg >= max_regions(tl)) compact_regions(tl);
    if (plena_grow((void **)&tl->reg, &tl->cap_reg, tl->n_reg + 1, sizeof *tl->reg)) {
        tl->nomem = 1;
        return -1;
    }
    struct region *d = &tl->reg[tl->n_reg++];
    memset(d, 0, sizeof *d);
    d->start = tl->cur.start;
    d->dur = tl->cur.dur;
    d->count = tl->cur.count;
    d->stage = tl->cur.stage;
    return 0;
}

/* ---- counters ---- */

/* The current bucket's accumulated figures into its entry. */
static void flush_bucket(struct plena_timeline *tl)
{
    size_t c = tl->cur_bucket;
    tl->rd[c] += tl->acc_rd;
    tl->wr[c] += tl->acc_wr;
    if (tl->acc_pend > tl->pend[c]) tl->pend[c] = tl->acc_pend;
    tl->acc_rd = tl->acc_wr = tl->acc_pend = 0;
}

/* Moves to the bucket of time ps (halving the buckets as needed). */
static __attribute__((noinline)) void bucket_of(struct plena_timeline *tl, uint64_t ps)
{
    flush_bucket(tl);
    uint64_t i = ps / tl->bucket_ps;
    while (i >= PLENA_TIMELINE_MAX_BUCKETS) {
        /* halve: neighbours merge, the width doubles */
        size_t n = (tl->n_buckets + 1) / 2;
        for (size_t k = 0; k < n; k++) {
            size_t a = 2 * k, b = 2 * k + 1;
            uint64_t r = tl->rd[a], w = tl->wr[a], p = tl->pend[a];
            if (b < tl->n_buckets) {
                r += tl->rd[b];
                w += tl->wr[b];
                if (tl->pend[b] > p) p = tl->pend[b];
            }
            tl->rd[k] = r, tl->wr[k] = w, tl->pend[k] = p;
        }
        for (size_t k = n; k < tl->n_buckets; k++)
            tl->rd[k] = tl->wr[k] = tl->pend[k] = 0;
        tl->n_buckets = n;
        tl->bucket_ps *= 2;
        i = ps / tl->bucket_ps;
    }
    if (i >= tl->n_buckets) tl->n_buckets = (size_t)i + 1;
    tl->cur_bucket = (size_t)i;
    tl->bucket_end_ps = (i + 1) * tl->bucket_ps;
}

/* ---- feeding ---- */

static void open_slice(struct slice *s, const struct plena_timing_record *r, uint64_t start,
                       uint64_t dur, uint32_t region, unsigned stage, unsigned track)
{
    memset(s, 0, sizeof *s);
    s->start = start;
    s->end = start + dur;
    s->busy = dur;
    s->bytes = r->bytes_read + r->bytes_written;
    s->count = 1;
    s->region = region;
    s->stage = (uint8_t)stage;
    s->track = (uint8_t)track;
    s->op = r->op;
}

/* A new stage region starts at r; -1 when out of memory (remembered). */
static int open_region(struct plena_timeline *tl, const struct plena_timing_record *r,
                       unsigned stage)
{
    if (tl->cur_stage >= 0 && close_region(tl)) return -1;
    tl->cur.start = r->start_ps;
    tl->cur.dur = tl->cur.count = 0;
    tl->cur.stage = (uint8_t)stage;
    tl->cur_stage = (int)stage;
    tl->region_seq++;
    return 0;
}

/* The general group path: any detail, the overlay's hidden track. An open
 * group (and hidden slice) is pushed when the next one opens. */
static void add_general(struct plena_timeline *tl, const struct plena_timing_record *r,
                        unsigned stage, unsigned track)
{
    uint32_t region = tl->region_seq;
    /* zero-cost instructions (f0 skips) take no time: no slice, and they do
     * not split a group */
    if (r->dur_ps > 0) {
        if (tl->grp_open && tl->o.detail == PLENA_TIMELINE_GROUP && tl->grp.op == r->op &&
            tl->grp.region == region && tl->grp.end == r->start_ps) {
            tl->grp.end += r->dur_ps;
            tl->grp.busy += r->dur_ps;
            tl->grp.bytes += r->bytes_read + r->bytes_written;
            tl->grp.count++;
        } else {
            if (tl->grp_open) push_slice(tl, &tl->grp);
            open_slice(&tl->grp, r, r->start_ps, r->dur_ps, region, stage, track);
            tl->grp_open = 1;
        }
    }
    if (tl->o.overlap && r->hidden_ps > 0) {
        if (tl->hid_open && tl->prev_hid && tl->hid.region == region &&
            tl->o.detail == PLENA_TIMELINE_GROUP) {
            tl->hid.end = r->start_ps + r->hidden_ps;
            tl->hid.busy += r->hidden_ps;
            tl->hid.count++;
        } else {
            if (tl->hid_open) push_slice(tl, &tl->hid);
            open_slice(&tl->hid, r, r->start_ps, r->hidden_ps, region, stage,
                       PLENA_TL_TRACK_HIDDEN);
            tl->hid.bytes = 0;
            tl->hid_open = 1;
        }
        tl->prev_hid = 1;
    } else if (r->dur_ps > 0) {
        tl->prev_hid = 0;
    }
}

/* Opens a group for r on the direct path: when it would merge into the last
 * slice of its track at its close, it merges now (tl->into) and later
 * instructions of the group go straight there. Deciding at the open is
 * deciding at the close: on this path nothing else is pushed in between, so
 * that slice, the window and the group's start are the same then. */
static __attribute__((noinline)) void open_direct(struct plena_timeline *tl,
                                                  const struct plena_timing_record *r,
                                                  unsigned stage, unsigned track)
{
    if (tl->grp_open && tl->into == NO_SLICE) append_slice(tl, &tl->grp);
    open_slice(&tl->grp, r, r->start_ps, r->dur_ps, tl->region_seq, stage, track);
    tl->grp_open = 1;
    size_t j = tl->last_on[track];
    if (j != NO_SLICE && mergeable(tl, &tl->sl[j], &tl->grp)) {
        merge_into(&tl->sl[j], &tl->grp);
        tl->into = j;
    } else {
        tl->into = NO_SLICE;
    }
}

/* The direct path of the default (group detail, no overlay). Once merging
 * has begun, nearly every instruction lands in the last slice of its track,
 * whether it continues the open group or opens a new one (opcodes alternate:
 * most groups are one instruction long): that is decided by one
 * well-predicted test, without asking which of the two it is. Everything
 * else goes through the group logic. The output is the general path's, byte
 * for byte (test_timeline test_direct_path_identical). */
static inline void add_direct(struct plena_timeline *tl, const struct plena_timing_record *r,
                              unsigned stage, unsigned track)
{
    if (r->dur_ps == 0) return;
    uint64_t end = r->start_ps + r->dur_ps, bytes = r->bytes_read + r->bytes_written;
    size_t j = tl->last_on[track];
    /* the open group is already in place (so nothing is appended before the
     * new one's fate is decided) and this instruction, as a group of its
     * own, would merge into that slice: it goes there either way, since a
     * continued group merged there too (last_on has not moved since) */
    if (tl->into != NO_SLICE && j != NO_SLICE) {
        struct slice *a = &tl->sl[j];
        if ((a->region == tl->region_seq || tl->cross) && r->start_ps < a->win_end) {
            a->end = end;
            a->busy += r->dur_ps;
            a->bytes += bytes;
            a->count++;
            a->mixed |= a->op != r->op;
            tl->grp.op = r->op;
            tl->grp.region = tl->region_seq;
            tl->grp.end = end;
            tl->into = j;
            return;
        }
    }
    if (tl->grp_open && tl->grp.op == r->op && tl->grp.region == tl->region_seq &&
        tl->grp.end == r->start_ps) {
        /* the open group continues */
        tl->grp.end = end;
        struct slice *a = tl->into != NO_SLICE ? &tl->sl[tl->into] : &tl->grp;
        a->end = end;
        a->busy += r->dur_ps;
        a->bytes += bytes;
        a->count++;
        return;
    }
    open_direct(tl, r, stage, track);
}

static inline void add_one(struct plena_timeline *tl, const struct plena_timing_record *r)
{
    unsigned stage = r->pc < tl->n_pc ? tl->pc_stage[r->pc] : PLENA_STAGE_OTHER;
    if (tl->cur_stage != (int)stage && open_region(tl, r, stage)) return;
    tl->cur.dur += r->dur_ps;
    tl->cur.count++;
    tl->now_ps = r->start_ps + r->dur_ps;
    unsigned track = tl->track_of[r->op & 63];

    /* time only grows: the bucket changes rarely, so no division per
     * instruction; and no branch on the opcode's kind below (the opcodes
     * alternate in patterns a branch predictor misses) */
    if (r->start_ps >= tl->bucket_end_ps) bucket_of(tl, r->start_ps);
    tl->acc_rd += r->bytes_read;
    tl->acc_wr += r->bytes_written;
    if (tl->o.overlap) {
        if (r->pending_prefetches > tl->acc_pend) tl->acc_pend = r->pending_prefetches;
    } else {
        /* serial model without the overlay: the prefetch in flight is the
         * only one, so the maximum of 0s and 1s is their or */
        tl->acc_pend |= (uint64_t)((track == PLENA_TL_TRACK_HBM_READ) & (r->dur_ps > 0));
    }

    if (tl->direct)
        add_direct(tl, r, stage, track);
    else if (tl->o.detail != PLENA_TIMELINE_STAGE)
        add_general(tl, r, stage, track);
}

void plena_timeline_add(struct plena_timeline *tl, const struct plena_timing_record *r)
{
    add_one(tl, r);
}

/* One step through the exact path (add_one), on the timing model's clock:
 * the same saturating sum of the same durations. */
static void add_step_exact(struct plena_timeline *tl, const struct plena_timing_step *s)
{
    tl->seg.valid = 0;
    struct plena_timing_record r = {
        s->pc, s->op, tl->step_clock, s->dur_ps, 64 * s->rd_txn, 64 * s->wr_txn, 0, 0};
    if (__builtin_add_overflow(tl->step_clock, s->dur_ps, &tl->step_clock)) {
        tl->step_clock = UINT64_MAX;
        r.start_ps = UINT64_MAX - s->dur_ps;
    }
    add_one(tl, &r);
}

/* add_segment's open tracks and stop, from the timeline's state */
static void seg_open(struct plena_timeline *tl)
{
    struct segment *g = &tl->seg;
    uint64_t stop = tl->bucket_end_ps;
    unsigned open = 0;
    _Static_assert(PLENA_TL_TRACK_COUNT <= SEG_SHUT, "add_segment's track mask is 32 bits");
    for (unsigned t = 0; t < PLENA_TL_TRACK_COUNT; t++) {
        size_t j = tl->last_on[t];
        if (j == NO_SLICE) continue;
        const struct slice *a = &tl->sl[j];
        if ((a->region != tl->region_seq && !tl->cross) || tl->step_clock >= a->win_end) continue;
        open |= 1u << t;
        if (a->win_end < stop) stop = a->win_end;
    }
    /* a clock below 2^63 and a duration below SEG_SPAN cannot overflow:
     * the loop tests the duration with one unsigned compare (0 and SEG_SPAN
     * or more take the exact path) instead of adding with a carry test */
    if (stop > UINT64_C(1) << 63) stop = UINT64_C(1) << 63;
    g->open = open;
    g->stop = stop;
    g->valid = 1;
    g->ops_seen = 0;
}

/* The steady state of the direct path, a segment at a time: while the stage
 * region, the counter bucket and every track's merge window stay the same,
 * add_direct's first branch takes every instruction (into the last slice of
 * its track), so the segment's sums go there at its end, and the
 * per-instruction work is a few adds. Returns the steps consumed (0: the
 * next one needs the exact path). A segment may stop earlier than it must
 * -- the exact path takes any step -- so it stops at the first of the
 * bucket's end, the merge windows' ends and SEG_SPAN past its start
 * (`stop`, one compare per step), at a step on a track whose last slice
 * cannot take it (`open`, a bit test: the window of a track that has no
 * step in the segment costs one early stop when it passes, after which that
 * track is not open), at a step that took no time or SEG_SPAN ps or more (a
 * run has next to none), at an opcode byte above 63, and at a pc outside
 * the run of pcs of the region's stage that holds the first step's pc (one
 * compare; a jump to another run of the stage stops it early).
 *
 * The loop is kept to what every step needs (from GCC 12 at -O2, 24
 * instructions per step without the transactions' or and 28 with it; 31
 * with a count and an end stored per track, and 46 before that): which
 * opcodes the segment had is one bit per step, which tracks had another
 * opcode than their slice's is worked out from it at the end (once per
 * opcode while the slices stay: ops_seen), a track's busy time and step
 * count are one word (SEG_COUNT_ONE), its slice's end is found walking
 * back from the segment's end, the transactions (in all and per track) are summed in a
 * second loop only when the segment moved any (few do: the loop only ors
 * the counts, and not even that for a batch the caller knows moved none:
 * plena_timeline_add_steps_no_txn), and the open tracks and `stop` are kept
 * between segments (seg_open). Tried and not kept (figures in
 * docs/timeline.md "Cost"): two passes (find the end, then sum each track
 * in registers), no faster; copies of the per-track sums written in turn
 * against store-to-load waits, slower; a run of steps on one track summed
 * in a register (with a branch, or storing to scratch words in turn),
 * slower; eight steps at a time in AVX-512 registers, slower. */
static inline __attribute__((always_inline)) size_t
add_segment_body(struct plena_timeline *tl, const struct plena_timing_step *s, size_t n,
                 const int txn)
{
    if (tl->cur_stage < 0 || tl->into == NO_SLICE || !tl->pc_run) return 0;
    /* the stage test as one compare: the pc inside the run of pcs of the
     * region's stage that holds the first step's pc (none: the first step
     * takes the exact path). A jump to another run of the same stage ends
     * the segment early, which is allowed. */
    const uint32_t pc0 = s[0].pc;
    if (pc0 >= tl->n_pc || tl->pc_stage[pc0] != (unsigned)tl->cur_stage) return 0;
    const uint32_t lo = tl->pc_run[pc0].lo, len = tl->pc_run[pc0].hi - lo;
    struct segment *g = &tl->seg;
    const uint64_t clock0 = tl->step_clock;
    if (!g->valid) seg_open(tl);
    const unsigned open = g->open;
    /* below 2^63 (seg_open) and at most SEG_SPAN past the segment's start
     * (a sum that wraps only stops the segment sooner) */
    const uint64_t stop = clock0 + SEG_SPAN < g->stop ? clock0 + SEG_SPAN : g->stop;
    if (n > SEG_MAX_STEPS) n = SEG_MAX_STEPS;
    /* locals: the stores into g (inside *tl) would otherwise reload them */
    const uint8_t *track_of = tl->seg_track;
    uint64_t clock = clock0, moved = 0; /* moved: the or of every transaction count */
    uint64_t ops = 0;                   /* one bit per opcode */
    const struct plena_timing_step *st = s, *const st_end = s + n;
    for (; st < st_end; st++) {
        /* the duration from 1 to SEG_SPAN - 1 ps: 0 wraps to the top */
        if (st->pc - lo >= len || clock >= stop || st->dur_ps - 1 >= SEG_SPAN - 1) break;
        unsigned t = track_of[st->op];
        if (!(open >> t & 1)) break;
        ops |= 1ull << (st->op & 63); /* op is below 64: a higher one is on no open track */
        g->sums[t] += st->dur_ps + SEG_COUNT_ONE;
        clock += st->dur_ps;
        if (txn) moved |= st->rd_txn | st->wr_txn;
    }
    const size_t k = (size_t)(st - s);
    if (k == 0) return 0;
    g->n_steps += k;
    /* the transactions, per track and in all, only when any moved (an or,
     * not a sum, decides: sums could wrap to 0) */
    uint64_t sum_rd = 0, sum_wr = 0;
    if (moved)
        for (size_t i = 0; i < k; i++) {
            g->txn[track_of[s[i].op]] += s[i].rd_txn + s[i].wr_txn;
            sum_rd += s[i].rd_txn;
            sum_wr += s[i].wr_txn;
        }
    /* what add_one summed per instruction, from the segment's totals: the
     * durations are the clock's advance and a prefetch in flight is an HBM
     * read (every step took time) */
    tl->cur.dur += clock - clock0;
    tl->cur.count += k;
    tl->now_ps = clock;
    tl->step_clock = clock;
    tl->acc_rd += 64 * sum_rd;
    tl->acc_wr += 64 * sum_wr;
    tl->acc_pend |= (uint64_t)(g->sums[PLENA_TL_TRACK_HBM_READ] != 0);
    /* an opcode other than its track's slice's makes the slice "merged":
     * looked at once per opcode while the slices stay (seg_open clears
     * ops_seen) */
    for (uint64_t m = ops & ~g->ops_seen; m; m &= m - 1) {
        unsigned op = (unsigned)__builtin_ctzll(m);
        struct slice *a = &tl->sl[tl->last_on[track_of[op]]];
        if (op != a->op) a->mixed = 1;
    }
    g->ops_seen |= ops;
    unsigned present = 0; /* the tracks with steps: open ones whose sum is not 0 */
    for (unsigned m = open; m; m &= m - 1) {
        unsigned t = (unsigned)__builtin_ctz(m);
        if (g->sums[t]) present |= 1u << t;
    }
    /* each track's slice ends where its last step does: found walking back
     * from the segment's end (a store per step in the loop cost more; the
     * tracks of a loop's body all show up within its last pass) */
    uint64_t c = clock;
    for (size_t i = k, need = present; need && i-- > 0;) {
        unsigned t = track_of[s[i].op];
        if (need >> t & 1) {
            tl->sl[tl->last_on[t]].end = c;
            need &= ~((size_t)1 << t);
        }
        c -= s[i].dur_ps;
    }
    for (unsigned m = present; m; m &= m - 1) {
        unsigned t = (unsigned)__builtin_ctz(m);
        struct slice *a = &tl->sl[tl->last_on[t]];
        a->busy += g->sums[t] & (SEG_COUNT_ONE - 1);
        a->count += g->sums[t] >> 42;
        g->sums[t] = 0;
        if (txn) {
            a->bytes += 64 * g->txn[t];
            g->txn[t] = 0;
        }
    }
    /* the last step took time: the open group is its opcode's, ending at the clock */
    tl->grp.op = s[k - 1].op;
    tl->grp.region = tl->region_seq;
    tl->grp.end = clock;
    tl->into = tl->last_on[track_of[s[k - 1].op]];
    return k;
}

/* the loop with and without the or of the transaction counts: a run's
 * batches have none but for about one in fifty (docs/timeline.md "Cost") */
static __attribute__((noinline)) size_t add_segment(struct plena_timeline *tl,
                                                    const struct plena_timing_step *s, size_t n)
{
    return add_segment_body(tl, s, n, 1);
}

static __attribute__((noinline)) size_t
add_segment_no_txn(struct plena_timeline *tl, const struct plena_timing_step *s, size_t n)
{
    return add_segment_body(tl, s, n, 0);
}

/* the steps a segment at a time where one can start, else one by one */
static inline void add_steps(struct plena_timeline *tl, const struct plena_timing_step *s, size_t n,
                             const int txn)
{
    size_t i = 0;
    while (i < n) {
        if (tl->direct)
            i += txn ? add_segment(tl, s + i, n - i) : add_segment_no_txn(tl, s + i, n - i);
        if (i < n) add_step_exact(tl, &s[i++]);
    }
}

void plena_timeline_add_steps(struct plena_timeline *tl, const struct plena_timing_step *s,
                              size_t n)
{
    add_steps(tl, s, n, 1);
}

void plena_timeline_add_steps_no_txn(struct plena_timeline *tl, const struct plena_timing_step *s,
                                     size_t n)
{
    add_steps(tl, s, n, 0);
}

static void close_open(struct plena_timeline *tl)
{
    flush_bucket(tl);
    /* on the direct path a group that merged at its open is already in place */
    if (tl->grp_open && !(tl->direct && tl->into != NO_SLICE)) push_slice(tl, &tl->grp);
    if (tl->hid_open) push_slice(tl, &tl->hid);
    tl->grp_open = tl->hid_open = 0;
    tl->into = NO_SLICE;
    if (tl->cur_stage >= 0) (void)close_region(tl);
    tl->cur_stage = -1;
}

void plena_timeline_stats(const struct plena_timeline *tl, struct plena_timeline_stats *s)
{
    memset(s, 0, sizeof *s);
    s->n_regions = tl->n_reg + (tl->cur_stage >= 0);
    s->n_slices = tl->n_sl + (size_t)tl->grp_open + (size_t)tl->hid_open;
    s->merge_ps = tl->merge_ps;
    s->cross_region = tl->cross;
    s->bucket_ps = tl->bucket_ps;
    s->n_segment_steps = tl->seg.n_steps;
}

/* ---- JSON ---- */

/* ps as microseconds with six fractional digits, from the integer */
static void us(char *buf, size_t n, uint64_t ps)
{
    snprintf(buf, n, "%llu.%06llu", (unsigned long long)(ps / 1000000),
             (unsigned long long)(ps % 1000000));
}

/* One slice event is built in a line buffer with hand-written number
 * formatting: the slices are most of the file, and printf per field was
 * most of the time of writing it. Names are stage and opcode names
 * (identifiers: no JSON escaping needed). */
struct line {
    char s[2048]; /* a merged stage slice lists every stage */
    size_t n;
};

static void ln_str(struct line *l, const char *s)
{
    size_t k = strlen(s);
    if (k > sizeof l->s - 1 - l->n) k = sizeof l->s - 1 - l->n;
    memcpy(l->s + l->n, s, k);
    l->n += k;
}

static void ln_u64(struct line *l, uint64_t v)
{
    char d[PLENA_U64_DIGITS];
    size_t k = plena_u64_digits(d, v);
    for (size_t i = 0; i < k && l->n < sizeof l->s - 1; i++)
        l->s[l->n++] = d[i];
}

static void ln_us(struct line *l, uint64_t ps)
{
    ln_u64(l, ps / 1000000);
    char f[8];
    uint64_t r = ps % 1000000;
    for (int i = 5; i >= 0; i--, r /= 10)
        f[i] = (char)('0' + r % 10);
    f[6] = 0;
    ln_str(l, ".");
    ln_str(l, f);
}

static void ln_slice_head(struct line *l, const char *name, const char *cat, unsigned tid,
                          uint64_t start, uint64_t dur)
{
    l->n = 0;
    ln_str(l, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":");
    ln_u64(l, tid + 1);
    ln_str(l, ",\"ts\":");
    ln_us(l, start);
    ln_str(l, ",\"dur\":");
    ln_us(l, dur);
    ln_str(l, ",\"name\":\"");
    ln_str(l, name);
    ln_str(l, "\",\"cat\":\"");
    ln_str(l, cat);
    ln_str(l, "\",\"args\":{");
}

static void put_meta(struct plena_buf *b, const char *what, int tid, const char *key,
                     const char *value, int quoted)
{
    plena_buf_printf(b, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"ts\":0,\"name\":\"%s\",", tid,
                     what);
    plena_buf_printf(b, "\"args\":{\"%s\":", key);
    if (quoted)
        plena_json_put_string(b, value, strlen(value), 0);
    else
        plena_buf_puts(b, value);
    plena_buf_puts(b, "}}");
}

static void put_other_data(struct plena_buf *b, const struct plena_timeline *tl,
                           const struct plena_timeline_run *run)
{
    const uint64_t p = tl->o.clock_period_ps;
    plena_buf_printf(b,
                     "\"otherData\":{\"producer\":\"plena\",\"producer_version\":\"%s\","
                     "\"schema\":\"plena-timeline\",\"schema_version\":1,"
                     "\"time_unit\":\"us\",\"ps_per_time_unit\":1000000,"
                     "\"clock_period_ps\":%llu,\"clock_mhz\":%.6f,\"detail\":\"%s\","
                     "\"overlap\":%s,\"status\":\"%s\",",
                     PLENA_VERSION, (unsigned long long)p, 1e6 / (double)p,
                     plena_timeline_detail_name(tl->o.detail), tl->o.overlap ? "true" : "false",
                     run && run->status ? run->status : "completed");
    plena_buf_printf(
        b,
        "\"serial_picos\":%llu,\"reported_picos\":%llu,\"hbm_bytes_read\":%llu,"
        "\"hbm_bytes_written\":%llu,\"instructions_executed\":%llu,\"stage_slices\":%zu,"
        "\"resource_slices\":%zu,\"merge_window_ps\":%llu,\"merge_cross_region\":%s,"
        "\"counter_bucket_ps\":%llu},\n",
        (unsigned long long)(run ? run->serial_picos : tl->now_ps),
        (unsigned long long)(run ? run->reported_picos : tl->now_ps),
        (unsigned long long)(run ? run->bytes_read : 0),
        (unsigned long long)(run ? run->bytes_written : 0),
        (unsigned long long)(run ? run->instructions_executed : 0), tl->n_reg, tl->n_sl,
        (unsigned long long)tl->merge_ps, tl->cross ? "true" : "false",
        (unsigned long long)tl->bucket_ps);
}

static void put_metadata_events(struct plena_buf *b, const struct plena_timeline *tl)
{
    char clock[96];
    snprintf(clock, sizeof clock, "simulated time; clock %llu ps (%.3f MHz)",
             (unsigned long long)tl->o.clock_period_ps, 1e6 / (double)tl->o.clock_period_ps);
    /* the first event has no leading comma */
    plena_buf_puts(b, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"ts\":0,\"name\":\"process_name\","
                      "\"args\":{\"name\":");
    const char *label = tl->o.label ? tl->o.label : "plena";
    plena_json_put_string(b, label, strlen(label), 0);
    plena_buf_puts(b, "}}");
    put_meta(b, "process_labels", 0, "labels", clock, 1);
    for (unsigned t = 0; t < PLENA_TL_TRACK_COUNT; t++) {
        if (t == PLENA_TL_TRACK_HIDDEN && !tl->o.overlap) continue;
        char idx[16];
        snprintf(idx, sizeof idx, "%u", t);
        put_meta(b, "thread_name", (int)t + 1, "name", track_names[t], 1);
        put_meta(b, "thread_sort_index", (int)t + 1, "sort_index", idx, 0);
    }
}

static void put_counters(struct plena_buf *b, const struct plena_timeline *tl)
{
    /* bytes per microsecond of each bucket; a sample only where the value changes */
    double width_us = (double)tl->bucket_ps / 1e6;
    uint64_t last_r = UINT64_MAX, last_w = UINT64_MAX, last_p = UINT64_MAX;
    char ts[32], vr[40], vw[40];
    for (size_t i = 0; i <= tl->n_buckets; i++) {
        uint64_t r = i < tl->n_buckets ? tl->rd[i] : 0, w = i < tl->n_buckets ? tl->wr[i] : 0;
        uint64_t p = i < tl->n_buckets ? tl->pend[i] : 0;
        us(ts, sizeof ts, (uint64_t)i * tl->bucket_ps);
        if (r != last_r || w != last_w) {
            plena_json_fmt_real17(vr, sizeof vr, (double)r / width_us);
            plena_json_fmt_real17(vw, sizeof vw, (double)w / width_us);
            plena_buf_printf(b,
                             ",\n{\"ph\":\"C\",\"pid\":1,\"tid\":0,\"ts\":%s,\"name\":\"HBM "
                             "bytes/us\",\"args\":{\"read\":%s,\"write\":%s}}",
                             ts, vr, vw);
            last_r = r, last_w = w;
        }
        if (p != last_p) {
            plena_buf_printf(b,
                             ",\n{\"ph\":\"C\",\"pid\":1,\"tid\":0,\"ts\":%s,\"name\":"
                             "\"outstanding prefetches\",\"args\":{\"value\":%llu}}",
                             ts, (unsigned long long)p);
            last_p = p;
        }
    }
}

int plena_timeline_render(struct plena_timeline *tl, const struct plena_timeline_run *run,
                          struct plena_buf *b, struct plena_err *err)
{
    close_open(tl);
    if (tl->nomem)
        return PLENA_FAIL(err, PLENA_E_NOMEM, "timeline", "out of memory recording the timeline");
    plena_buf_puts(b, "{\"displayTimeUnit\":\"ns\",\n");
    put_other_data(b, tl, run);
    plena_buf_puts(b, "\"traceEvents\":[\n");
    put_metadata_events(b, tl);
    struct line l;
    for (size_t i = 0; i < tl->n_reg; i++) {
        const struct region *r = &tl->reg[i];
        ln_slice_head(&l, plena_stage_name((enum plena_stage)r->stage), "stage",
                      PLENA_TL_TRACK_STAGE, r->start, r->dur);
        ln_str(&l, "\"dur_ps\":");
        ln_u64(&l, r->dur);
        ln_str(&l, ",\"start_ps\":");
        ln_u64(&l, r->start);
        ln_str(&l, ",\"instructions\":");
        ln_u64(&l, r->count);
        if (r->merged) {
            /* joined regions: the name is the stage with the most time, and
             * every stage's share is here */
            ln_str(&l, ",\"stage_ps\":{");
            int first = 1;
            for (unsigned st = 0; st < PLENA_STAGE_COUNT; st++) {
                if (!r->ps[st]) continue;
                ln_str(&l, first ? "\"" : ",\"");
                ln_str(&l, plena_stage_name((enum plena_stage)st));
                ln_str(&l, "\":");
                ln_u64(&l, r->ps[st]);
                first = 0;
            }
            ln_str(&l, "}");
        }
        ln_str(&l, "}}");
        plena_buf_append(b, l.s, l.n);
    }
    /* busy_ps only where it differs from dur (merged slices), hbm_bytes only
     * where bytes moved: the common slice stays short */
    for (size_t i = 0; i < tl->n_sl; i++) {
        const struct slice *s = &tl->sl[i];
        const char *name = s->track == PLENA_TL_TRACK_HIDDEN ? "hidden prefetch"
                           : s->mixed                        ? "merged"
                                                             : plena_isa_info(s->op)->name;
        const char *stage = plena_stage_name((enum plena_stage)s->stage);
        ln_slice_head(&l, name, stage, s->track, s->start, s->end - s->start);
        ln_str(&l, "\"instructions\":");
        ln_u64(&l, s->count);
        if (s->busy != s->end - s->start) {
            ln_str(&l, ",\"busy_ps\":");
            ln_u64(&l, s->busy);
        }
        if (s->bytes) {
            ln_str(&l, ",\"hbm_bytes\":");
            ln_u64(&l, s->bytes);
        }
        ln_str(&l, "}}");
        plena_buf_append(b, l.s, l.n);
    }
    put_counters(b, tl);
    plena_buf_puts(b, "\n]}\n");
    if (b->failed)
        return PLENA_FAIL(err, PLENA_E_NOMEM, "timeline", "out of memory rendering the timeline");
    return 0;
}

int plena_timeline_write(struct plena_timeline *tl, const struct plena_timeline_run *run,
                         const char *path, uint64_t *bytes, struct plena_err *err)
{
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = plena_timeline_render(tl, run, &b, err);
    if (!rc) rc = plena_file_write_atomic(path, b.data, b.len, err);
    if (!rc && bytes) *bytes = b.len;
    plena_buf_free(&b);
    return rc;
}
