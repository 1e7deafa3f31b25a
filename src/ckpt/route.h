/* `plena trace route` as a library call (docs/traces.md "plena trace
 * route"): token-id inputs and a local checkpoint in, routing rows out, with
 * resume, shards, a failure log and a summary. */
#ifndef PLENA_CKPT_ROUTE_H
#define PLENA_CKPT_ROUTE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum { PLENA_ROUTE_PREFILL = 1, PLENA_ROUTE_DECODE = 2, PLENA_ROUTE_BOTH = 3 };

struct plena_route_opts {
    const char *checkpoint, *inputs, *out;
    const char *benchmark, *model_key, *model_name; /* NULL: the documented defaults */
    const int64_t *layers; /* as given (negative: from the end); NULL: layer 0 */
    size_t n_layers;
    int phases;                /* PLENA_ROUTE_* */
    uint32_t decode_steps;     /* with decode; 0 means 1 */
    uint32_t max_input_tokens; /* 0: no truncation */
    uint64_t limit;            /* 0: all */
    const char *const *sample_ids;
    size_t n_sample_ids;
    int sort_by_length, act_bf16, resume, overwrite, keep_going;
    const char *const *resume_from;
    size_t n_resume_from;
    uint32_t threads;
    uint32_t shard_i, shard_n; /* shard_n 0: no sharding */
    const char *failure_log, *summary_out;
    int quiet; /* no warnings on stderr (tests) */
    /* set by the caller's signal handler (may be NULL): the run stops after
     * the current token with PLENA_E_INTERRUPTED; every written row is kept */
    volatile sig_atomic_t *stop;
    /* only check: no forward pass, nothing written; the summary's missing_*
     * fields list the expected keys absent from --resume-from files */
    int check_only;
    /* progress (may be NULL), on the calling thread: the tokens run so far
     * and in all (the prompt tokens plus decode steps of the samples still to
     * run; complete ones under --resume are not counted), after each block of
     * prefill tokens and each decode step */
    void (*on_progress)(void *ctx, uint64_t done, uint64_t total);
    void *on_progress_ctx;
};

struct plena_route_summary {
    uint64_t samples_selected, samples_already_complete, samples_processed, samples_failed;
    uint64_t rows_written, prefill_tokens;
    char fingerprint[65];
    uint64_t expected_keys, missing_keys; /* check_only */
    char missing_first[20][300];          /* the first 20 missing keys "sample phase layer step" */
};

/* Parses a layer LIST: items separated by ',', each INT or INT..INT
 * (inclusive), INT = -?[0-9]+; so "-3..-1" is a range and "-1" a layer.
 * *out (plena_free) gets the values in order. -1 on a syntax error. */
int plena_route_parse_layers(const char *text, int64_t **out, size_t *n);

/* Runs the command. Returns the status whose exit code the command exits
 * with: OK, E_FAILED (a sample failed; err names the first), E_USAGE,
 * E_INPUT, E_OUTPUT, E_INTERRUPTED, E_NOMEM. */
int plena_route_run(const struct plena_route_opts *o, struct plena_route_summary *sum,
                    struct plena_err *err);

/* ---- plena campaign route (docs/traces.md "Inside a campaign") ---- */

struct plena_campaign_route_opts {
    struct plena_route_opts route; /* checkpoint, inputs, layers, phases, ... (out, shard unused) */
    const char *out;               /* the campaign directory */
    unsigned shards;               /* route shards (worker processes in all) */
    unsigned jobs;                 /* at most this many at once */
    uint32_t mlen, blen;           /* of the built traces (0: 64, 4) */
    volatile sig_atomic_t *stop;
};

struct plena_campaign_route_summary {
    uint64_t expected_keys, missing_keys;
    size_t traces;
};

/* OUT/routing/<benchmark>.shard-I-of-N.jsonl from N worker processes
 * (--resume each), OUT/routing/coverage.json, OUT/traces/<trace_id>.json.
 * PLENA_E_FAILED when a key is missing (a sample failed); the traces of
 * the rows present are built anyway. */
int plena_campaign_route(const struct plena_campaign_route_opts *o,
                         struct plena_campaign_route_summary *sum, struct plena_err *err);

/* ---- plena trace build (docs/traces.md "Building traces from rows") ---- */

struct plena_moe_model;
struct plena_trace_docs;

struct plena_rows_build_opts {
    const char *const *rows; /* row files (shards are merged by key) */
    size_t n_rows;
    const int64_t *layers; /* NULL: every layer */
    size_t n_layers;
    int phases; /* PLENA_ROUTE_* mask; 0: both */
    const char *const *sample_ids;
    size_t n_sample_ids;
    uint32_t mlen, blen;
    int allow_uniform; /* rows without route_weights become uniform timing-only traces */
    const char *created_by;
};

/* One validated trace per row (merged by key; equal keys must be identical
 * rows) into docs, the model m (from the checkpoint's config.json) checked
 * against every row: len(counts) = E and route widths = K, else
 * PLENA_E_INPUT naming file:line. */
int plena_rows_build(const struct plena_rows_build_opts *o, const struct plena_moe_model *m,
                     struct plena_trace_docs *docs, struct plena_err *err);

#endif
