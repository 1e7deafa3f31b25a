/* Timeline: a run as Chrome trace-event JSON for Perfetto and chrome://tracing
 * (docs/timeline.md).
 *
 * Fed once per executed instruction with the timing model's record
 * (struct plena_timing_record, timing.h), it keeps the stage regions exactly
 * and the instruction groups (consecutive instructions of one opcode) per
 * PLENA resource track, merges groups automatically so the file stays bounded,
 * and renders the JSON (traceEvents, displayTimeUnit, otherData). It never
 * runs the emulator or the timing model; src/run/ wires it to a run. */
#ifndef PLENA_TIMELINE_TIMELINE_H
#define PLENA_TIMELINE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/fileio.h"
#include "../isa/program.h"
#include "../timing/timing.h"

/* --timeline-detail: what goes below the stage regions. */
enum plena_timeline_detail {
    PLENA_TIMELINE_STAGE = 0,       /* stage regions only */
    PLENA_TIMELINE_GROUP = 1,       /* + groups of consecutive instructions of one opcode */
    PLENA_TIMELINE_INSTRUCTION = 2, /* + one slice per instruction */
};
#define PLENA_TIMELINE_DETAIL_DEFAULT PLENA_TIMELINE_GROUP
/* "stage", "group", "instruction" */
const char *plena_timeline_detail_name(enum plena_timeline_detail d);
/* 0 and *d set, or -1 for an unknown name. */
int plena_timeline_detail_parse(const char *s, enum plena_timeline_detail *d);
/* The names for an option's help/choice list: NULL-terminated. */
extern const char *const plena_timeline_detail_names[];

/* Default bound on resource-track slices before automatic merging: at about
 * 200 bytes of JSON each, with the stage track and counters, a file stays
 * well under 100 MB (docs/timeline.md "Size"). */
#define PLENA_TIMELINE_MAX_SLICES ((size_t)300000)
/* Counter buckets kept before two neighbours are merged (the width doubles). */
#define PLENA_TIMELINE_MAX_BUCKETS ((size_t)8192)

/* The tracks (threads) of docs/timeline.md "Tracks", in display order. */
enum plena_timeline_track {
    PLENA_TL_TRACK_STAGE = 0,
    PLENA_TL_TRACK_MATRIX,
    PLENA_TL_TRACK_VECTOR,
    PLENA_TL_TRACK_SCALAR,
    PLENA_TL_TRACK_HBM_READ,
    PLENA_TL_TRACK_HBM_WRITE,
    PLENA_TL_TRACK_OTHER,
    PLENA_TL_TRACK_HIDDEN, /* overlap overlay: prefetch time hidden behind compute */
    PLENA_TL_TRACK_COUNT
};
const char *plena_timeline_track_name(enum plena_timeline_track t);
/* The resource track of an opcode (matrix/vector/scalar/HBM read/HBM write/other). */
enum plena_timeline_track plena_timeline_track_of(unsigned opcode);

struct plena_timeline_opts {
    enum plena_timeline_detail detail;
    size_t max_slices; /* 0 = PLENA_TIMELINE_MAX_SLICES */
    int overlap;       /* the hidden-prefetch track is present */
    uint64_t clock_period_ps;
    const char *label; /* the process name; NULL = "plena" */
    int general_path;  /* tests: the group detail through the general path, not
                        * the direct one (the output is the same, byte for byte) */
};

struct plena_timeline;

/* `labels` (may be NULL: everything is stage 'other') is borrowed and must
 * outlive the timeline; its count must equal n_pc. */
int plena_timeline_new(const struct plena_timeline_opts *o, const struct plena_labels *labels,
                       size_t n_pc, struct plena_timeline **out, struct plena_err *err);
void plena_timeline_free(struct plena_timeline *tl);
/* Adds one executed instruction; records must come in execution order
 * (r->start_ps never decreases). Out of memory is remembered and reported by
 * render. */
void plena_timeline_add(struct plena_timeline *tl, const struct plena_timing_record *r);
/* Adds n steps (struct plena_timing_step, timing.h: one instruction of a
 * serial run without the overlap overlay) in order, as plena_timeline_add would the records they
 * stand for (byte for byte the same file); not to be mixed with plena_timeline_add in one timeline.
 * A run hands its steps over in batches, so this loop runs away from the emulator's branches: the
 * per-instruction cost of a timeline is then a few stores in the run and this loop
 * (docs/timeline.md "Cost"). */
void plena_timeline_add_steps(struct plena_timeline *tl, const struct plena_timing_step *s,
                              size_t n);
/* The same for steps that moved no data (every rd_txn and wr_txn 0; a run's observer knows it
 * from the timing's transaction totals): the same file for such steps, with less work per step.
 * Steps with transactions given here may lose them (the slices' and counters' bytes). */
void plena_timeline_add_steps_no_txn(struct plena_timeline *tl, const struct plena_timing_step *s,
                                     size_t n);

/* What the metadata states about the run beyond the records. */
struct plena_timeline_run {
    const char *status; /* "completed" or "trapped" */
    uint64_t serial_picos, reported_picos;
    uint64_t bytes_read, bytes_written;
    uint64_t instructions_executed;
};
/* Renders the JSON into `out` (appended). */
int plena_timeline_render(struct plena_timeline *tl, const struct plena_timeline_run *run,
                          struct plena_buf *out, struct plena_err *err);
/* Renders and writes atomically; *bytes (may be NULL) gets the file size. */
int plena_timeline_write(struct plena_timeline *tl, const struct plena_timeline_run *run,
                         const char *path, uint64_t *bytes, struct plena_err *err);

/* Figures for tests and the CLI. */
struct plena_timeline_stats {
    size_t n_regions;         /* stage-track slices */
    size_t n_slices;          /* resource-track slices (after merging) */
    uint64_t merge_ps;        /* 0: no merging happened; else the merge window */
    int cross_region;         /* merging had to join slices of different stage regions */
    uint64_t bucket_ps;       /* width of the counter buckets */
    uint64_t n_segment_steps; /* steps plena_timeline_add_steps summed a segment at a
                               * time (the others went one by one) */
};
void plena_timeline_stats(const struct plena_timeline *tl, struct plena_timeline_stats *s);

#endif
