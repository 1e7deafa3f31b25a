/* Replay of route traces (docs/replay.md "Pipeline"): options, the
 * per-trace pipeline into a build directory with a decided results.json
 * (docs/replay.md "results.json"), the fingerprint of
 * docs/replay.md "Identity", and a replay of many inputs with a pool of
 * worker processes (batch.c). This module never prints: the CLI
 * (src/cli/cmd_replay.c) prints the events and picks the exit code. */
#ifndef PLENA_REPLAY_REPLAY_H
#define PLENA_REPLAY_REPLAY_H

#include <jansson.h>

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "model/model.h"
#include "trace/trace.h"

struct plena_replay_opts {
    const char *out_dir;
    const char *lowering; /* "pair-major" */
    enum plena_weights_mode weights;
    uint64_t weight_seed;
    enum plena_input_mode input;
    uint64_t input_seed;
    int routing_device; /* --routing device: preloaded logits (docs/replay.md "Device routing") */
    int profile;
    int overlap;
    unsigned repeat;           /* 0 = no repeat gate, else >= 2 */
    uint32_t mlen, blen;       /* 0 = from the trace */
    const char *settings_path; /* NULL = built-in lookup */
    /* not in the fingerprint */
    int skip_existing;
    int keep_dumps;
    int prune_inputs;
    int timeline;             /* write OUT/<trace>/timeline.json (docs/timeline.md) */
    int timeline_detail;      /* enum plena_timeline_detail */
    unsigned threads;         /* host threads of the functional check's references (0, 1: one) */
    const char *weight_cache; /* plena_moe_build_opts.weight_cache (NULL: none) */
    /* set by a signal handler (may be NULL; `plena gates repeat|functional`,
     * and plena_replay_batch's in-process traces): the build stops at its
     * next poll and each run as a trap; the trace or gate then returns
     * PLENA_E_INTERRUPTED without a verdict (nothing published) */
    const volatile sig_atomic_t *stop;
    /* Test hooks (may be NULL): called with the build directory after step 4
     * (generation) and after step 5 (the run, dumps present). Tests use them
     * to corrupt an image or a dump and watch the gate fail. */
    void (*after_generate)(void *ctx, const char *build_dir);
    void (*after_run)(void *ctx, const char *build_dir);
    /* --routing device: called with the preloaded logits [T*E] before the
     * build (a test makes the device route elsewhere) */
    void (*after_logits)(void *ctx, float *logits, uint32_t T, uint32_t E);
    void *hook_ctx;
};

void plena_replay_opts_default(struct plena_replay_opts *o);

/* The build directory of a device-routed replay is the fixed-route one's
 * name plus this suffix (stable ids never hold a '.'), so both runs of a
 * trace fit one --out root and the exports pair them (device_minus_fixed). */
#define PLENA_REPLAY_DEVICE_DIR_SUFFIX ".device"

/* One trace, validated and identified (step 1). */
struct plena_replay_item {
    json_t *trace; /* owned */
    char trace_id[129];
    char
        dir_name[160]; /* build directory name (v1: stable_id; + ".device" with --routing device) */
    char trace_sha256[65];
    char fingerprint[65];
    int schema_version;
    char source_path[1024];
};
void plena_replay_item_free(struct plena_replay_item *it);

/* Settings hash entering the fingerprint: SHA-256 of the effective settings
 * rendered as TOML (so the built-in copy and an identical file agree). */
int plena_replay_settings_sha256(const char *settings_path, char hex[65], struct plena_err *err);

/* The fingerprint object of docs/replay.md "Identity" (trace_sha256 NULL: a campaign's
 * config_fingerprint, without that member). */
json_t *plena_replay_fingerprint_object(const char *trace_sha256, const struct plena_replay_opts *o,
                                        const char *settings_sha256);
int plena_replay_fingerprint(const char *trace_sha256, const struct plena_replay_opts *o,
                             const char *settings_sha256, char hex[65], struct plena_err *err);

/* Step 1: validates the bytes (V rules, then the replay-tier rules this module
 * can check), computes trace_sha256 and the fingerprint. PLENA_E_FAILED when
 * the trace is invalid (report filled; replay-tier findings are appended to
 * the report as errors R001/R006). Nothing is written. */
int plena_replay_prepare(const char *bytes, size_t len, const char *source_path,
                         const struct plena_replay_opts *o, const char *settings_sha256,
                         struct plena_replay_item *it, struct plena_trace_report *report,
                         struct plena_err *err);

struct plena_replay_outcome {
    int skipped; /* --skip-existing found a passed result */
    int gate_passed;
    enum plena_status code; /* OK passed, E_FAILED gate failed, E_INPUT generator refused,
                             * E_OUTPUT, E_NOMEM (docs/replay.md "Exit status") */
    char kind[24];          /* numerical / zero_input_smoke */
    char failed[512];       /* comma-separated failed checks */
    char reason[600];       /* the first failed check that ran: "name: detail" ("" if none) */
    uint64_t sim_latency_cycles;
};

/* Steps 2-8 for one prepared trace. Returns 0 when a decided result was
 * written (or the trace was skipped); out->code says pass (OK), gate
 * failed (E_FAILED), generator refused (E_INPUT), output error (E_OUTPUT). Non-zero return:
 * nothing decided (err filled). */
int plena_replay_run(const struct plena_replay_item *it, const struct plena_replay_opts *o,
                     struct plena_replay_outcome *out, struct plena_err *err);

/* docs/profile.md "Shared-vs-routed split" shared_vs_routed object and the routing tax
 * (docs/profile.md "Routing tax") stage_derived routing tax from per-stage picoseconds
 * (PLENA_STAGE_COUNT entries), summed in picoseconds and rounded once. */
json_t *plena_replay_split_json(const uint64_t *stage_picos, uint64_t clock_ps,
                                const char *routed_lowering);
json_t *plena_replay_tax_json(const uint64_t *stage_picos, uint64_t clock_ps);

/* ---- a replay of many inputs (plena replay TRACE|SET...) ---- */
struct plena_replay_batch_opts {
    const char *const *inputs; /* trace files and sets; "-" = standard input */
    size_t n_inputs;
    int as_set;                  /* every input is a trace set (else: names ending in .jsonl) */
    unsigned jobs;               /* > 1: that many worker processes */
    volatile sig_atomic_t *stop; /* set by the caller's signal handler; may be NULL */
    int no_export; /* do not rebuild the run-level exports (a campaign worker: its root is
                    * shared, the coordinator exports once) */
};

/* What happens, for the caller to print. Every callback may be NULL;
 * `outcome` and the errors of a replayed trace are called in the worker
 * process when jobs > 1. */
struct plena_replay_batch_events {
    /* an unreadable input, a trace that could not be prepared, an output or
     * export failure, an error while replaying one trace */
    void (*error)(void *ctx, const struct plena_err *err);
    /* an invalid trace (V rules or replay tier): not replayed */
    void (*invalid)(void *ctx, const char *source, const struct plena_trace_report *r);
    /* a trace_id already given (V100): the later trace is not replayed */
    void (*duplicate)(void *ctx, const char *source, const char *trace_id);
    /* one trace decided (or skipped) */
    void (*outcome)(void *ctx, const struct plena_replay_item *it,
                    const struct plena_replay_outcome *oc);
    /* every input read and checked: n_traces will be replayed (may be NULL) */
    void (*begin)(void *ctx, size_t n_traces);
    void *ctx;
};

/* Reads every input, prepares every trace (nothing is written before all
 * are checked), replays the valid ones into o->out_dir (in this process, or
 * with b->jobs workers) and rebuilds the exports of docs/replay.md "Exports" (unless
 * b->no_export). Returns the worst
 * status of everything (E_FAILED for an invalid or repeated trace or a
 * failed gate, E_INPUT, E_OUTPUT, E_NOMEM, E_INTERRUPTED when *b->stop was
 * set: *interrupted then says so and the exports are not rebuilt). */
enum plena_status plena_replay_batch(const struct plena_replay_opts *o,
                                     const struct plena_replay_batch_opts *b,
                                     const struct plena_replay_batch_events *ev, int *interrupted);

/* Deletes leftover "*.tmp.*" files of an interrupted atomic write in dir
 * (docs/formats.md "Conventions"). */
void plena_replay_clean_tmp(const char *dir);

#endif
