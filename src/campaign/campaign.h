/* Campaigns over many route traces (docs/replay.md "Campaigns"): loading
 * and ordering the inputs, Hamilton selection, cost-ordered sharding, the
 * serial-vs-parallel determinism gate, width, checkpointed replay with a
 * JSONL manifest and resume, status and the report. Workers are child
 * processes running a configurable argv (by default `plena replay`); this
 * module never prints: progress goes to a callback and the CLI
 * (src/cli/cmd_campaign.c) formats it. */
#ifndef PLENA_CAMPAIGN_CAMPAIGN_H
#define PLENA_CAMPAIGN_CAMPAIGN_H

#include <jansson.h>

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "replay/replay.h"

/* ---- inputs ---- */
struct plena_campaign_trace {
    struct plena_replay_item item; /* trace json (owned), ids, hashes, fingerprint */
    char path[1024];               /* trace file a worker reads ("" = from a set line) */
    const char *benchmark, *sample_id, *phase, *category; /* borrowed from item.trace */
    int64_t sample_index;                                 /* -1 when absent (sorts first) */
    int64_t decode_step;                                  /* -1 when absent or null */
    int64_t layer, token_count, top_k;
};

struct plena_campaign_set {
    struct plena_campaign_trace *v;
    size_t n, cap;
    char **invalid; /* "path: first error" of traces skipped by --skip-invalid */
    size_t n_invalid, cap_invalid;
};

void plena_campaign_set_free(struct plena_campaign_set *s);

/* Loads every DIR (non-recursive *.json / *.jsonl, sorted by name), SET
 * (.jsonl), trace (.json) or LIST (paths, one per line, '#' comments,
 * relative to the list's directory). Each trace is validated and
 * fingerprinted with plena_replay_prepare. An invalid trace is PLENA_E_FAILED
 * unless skip_invalid (then listed in s->invalid); a duplicate trace_id is
 * PLENA_E_INPUT naming both sources. The set ends in canonical order. */
int plena_campaign_load(const char *const *inputs, size_t n_inputs,
                        const struct plena_replay_opts *o, const char *settings_sha256,
                        int skip_invalid, struct plena_campaign_set *s, struct plena_err *err);

/* Canonical order: benchmark, sample_index, sample_id, phase (prefill, decode,
 * smoke, unknown), decode_step, layer, trace_id. */
int plena_campaign_cmp_canonical(const struct plena_campaign_trace *a,
                                 const struct plena_campaign_trace *b);
/* Cost order (shards, the run queue): token_count x top_k descending, then trace_id. */
int plena_campaign_cmp_cost(const struct plena_campaign_trace *a,
                            const struct plena_campaign_trace *b);
/* Fills idx[0..n-1] with the set's indices in cost order. */
void plena_campaign_cost_order(const struct plena_campaign_set *s, size_t *idx);

/* What every action starts from: the settings hash, the config_fingerprint
 * (cfp) and the loaded set (plena_campaign_load); with use_selection the
 * set is cut to out_dir/selection.json when that exists (every action but
 * select works on the selection). On error the set is freed. */
int plena_campaign_open(const char *const *inputs, size_t n_inputs,
                        const struct plena_replay_opts *o, int skip_invalid, const char *out_dir,
                        int use_selection, struct plena_campaign_set *s, char cfp[65],
                        struct plena_err *err);

/* config_fingerprint (docs/replay.md "Identity"): hash of the fingerprint object
 * without trace_sha256. */
int plena_campaign_config_fingerprint(const struct plena_replay_opts *o,
                                      const char *settings_sha256, char hex[65],
                                      struct plena_err *err);

/* ---- selection ---- */
/* Hamilton largest remainder in integer arithmetic. n[c] units per stratum,
 * names for the tie-break, target T <= sum n. Fills quota[c], rem[c] =
 * (n_c T) mod N and extra[c] (1 for a surplus seat). */
int plena_campaign_hamilton(const uint64_t *n, const char *const *names, size_t n_strata,
                            uint64_t target, uint64_t *quota, uint64_t *rem, int *extra,
                            struct plena_err *err);

struct plena_campaign_target_for {
    const char *benchmark;
    uint64_t target;
    int all;
};

struct plena_campaign_select_opts {
    uint64_t target;
    int target_all;
    uint64_t seed;
    const char *by; /* category, benchmark, phase, sample_id or layer */
    int unit_trace; /* 0: (benchmark, sample_id) units; 1: trace units */
    const struct plena_campaign_target_for *target_for;
    size_t n_target_for;
};

/* 1 when `by` names a field selection can stratify on. */
int plena_campaign_by_field_known(const char *by);

/* Builds the selection.json object. Errors: unknown field and a target
 * above the available units are PLENA_E_USAGE; a unit lacking a required
 * field is PLENA_E_INPUT. */
int plena_campaign_select(const struct plena_campaign_set *s,
                          const struct plena_campaign_select_opts *so, json_t **selection,
                          struct plena_err *err);

/* Keeps only the traces listed in selection.selected_trace_ids (order kept).
 * A listed id that is not loaded is PLENA_E_INPUT. */
int plena_campaign_apply_selection(struct plena_campaign_set *s, const json_t *selection,
                                   struct plena_err *err);

/* ---- workers ---- */
/* argv template of one worker: placeholders "{trace}" (trace file), "{out}"
 * (replay root), "{trace_id}", "{dir}" (build dir name) and "{fingerprint}"
 * are replaced in every argument. */
struct plena_campaign_worker {
    const char *const *argv;
    size_t argc;
};

/* Absolute path of the running executable (/proc/self/exe). */
int plena_campaign_self_exe(char *buf, size_t n, struct plena_err *err);

/* ---- width ---- */
struct plena_campaign_width {
    unsigned width;
    char reason[48];
    long cores;
    int64_t mem_available_kb; /* -1 unknown */
    int64_t rss_probe_kb;     /* -1 no probe */
    double memory_fraction;
};
/* The width formula: max(1, min(cores - 2, floor(fraction * mem / rss),
 * remaining)), max_jobs (0 = none) caps with reason suffix "_capped".
 * mem_kb < 0 gives width 1 "memory_unknown"; rss_kb <= 0 width 1
 * "rss_probe_failed". */
void plena_campaign_width_formula(long cores, int64_t mem_kb, int64_t rss_kb, double fraction,
                                  size_t remaining, unsigned max_jobs,
                                  struct plena_campaign_width *w);
/* MemAvailable (kB) from a meminfo-format file; falls back to available
 * physical pages x page size when the file lacks it; -1 when unknown. */
int64_t plena_campaign_mem_available_kb(const char *meminfo_path);
/* Online processors usable by this process (affinity mask count, >= 1). */
long plena_campaign_cores(void);

/* ---- progress ---- */
struct plena_campaign_progress {
    size_t total, done, passed, failed, given_up, skipped_existing, running, remaining;
    size_t completed_here; /* completed by this invocation, skipped excluded */
    unsigned width;
    double elapsed; /* seconds since the first dispatch (0 before) */
    double rate;    /* completed_here / elapsed */
    double eta;     /* remaining / rate; < 0 unknown */
    int final;
};
/* "done 123/500 (passed 120, failed 3, skipped 40) running 8 remaining 369 |
 * 0.21 traces/s | elapsed 00:12:31 | ETA 00:29:17" */
void plena_campaign_progress_line(const struct plena_campaign_progress *p, char *buf, size_t n);

typedef void (*plena_campaign_progress_fn)(void *ctx, const struct plena_campaign_progress *p);

/* ---- run ---- */
struct plena_campaign_run_opts {
    const char *out_dir;
    unsigned jobs; /* 0 = auto */
    unsigned max_attempts;
    int reset_attempts;
    double memory_fraction; /* 0 = 0.70 */
    unsigned max_jobs;
    const char *meminfo_path; /* NULL = /proc/meminfo */
    struct plena_campaign_worker worker;
    volatile sig_atomic_t *stop; /* set by the CLI's signal handler */
    plena_campaign_progress_fn progress;
    void *progress_ctx;
    int skip_exports;              /* do not rebuild the run-level exports in replay/ */
    const char *determinism_state; /* "passed" or "bypassed", recorded for the report */
};

struct plena_campaign_run_summary {
    size_t total, passed, failed, errored, given_up, skipped_existing, recovered;
    size_t torn_manifest_bytes;
    struct plena_campaign_width width;
    int interrupted;
    enum plena_status code; /* OK every trace passed, E_FAILED otherwise, E_INTERRUPTED */
    char export_error[512];
};

/* Takes the lock of a campaign directory (<out_dir>/campaign.lock, an fcntl
 * record lock the kernel drops when the holder dies): *fd is then held
 * until plena_campaign_unlock. Held by another process: PLENA_E_USAGE
 * naming the holder's pid. plena_campaign_run and the determinism gate take
 * it themselves. */
int plena_campaign_lock(const char *out_dir, int *fd, struct plena_err *err);
void plena_campaign_unlock(int *fd);

/* Runs (resumes) the campaign over the set, in cost order. A corrupt
 * manifest line before the last is PLENA_E_INPUT naming the line. */
int plena_campaign_run(const struct plena_campaign_set *s, const struct plena_campaign_run_opts *o,
                       struct plena_campaign_run_summary *sum, struct plena_err *err);

/* Reads manifest.jsonl: complete lines parsed; a torn or corrupt last line
 * is cut off (truncate != 0: the file too) and its size returned; a corrupt
 * earlier line is PLENA_E_INPUT "manifest.jsonl:LINE". *lines is a JSON
 * array (new reference); NULL on failure. A missing file gives an empty array. */
int plena_campaign_manifest_read(const char *path, int truncate, json_t **lines, size_t *torn_bytes,
                                 struct plena_err *err);

/* ---- determinism gate ---- */
struct plena_campaign_det_opts {
    const char *out_dir;
    unsigned samples; /* K, default 20 */
    unsigned jobs;    /* 0 = --jobs auto: J = 4 */
    const char *config_fingerprint;
    struct plena_campaign_worker worker;
    volatile sig_atomic_t *stop;
};
struct plena_campaign_det_summary {
    size_t trace_count, mismatches;
    unsigned parallel_width;
    char status[16]; /* passed, failed, skipped */
    int interrupted;
};
int plena_campaign_determinism(const struct plena_campaign_set *s,
                               const struct plena_campaign_det_opts *o,
                               struct plena_campaign_det_summary *sum, struct plena_err *err);
/* The blocking rule: 0 when out_dir/determinism.json exists for this
 * config_fingerprint with status passed; 1 when it exists for it and is not
 * passed (PLENA_E_FAILED naming the report); 2 when none for this
 * fingerprint exists (the gate must run first). */
int plena_campaign_determinism_check(const char *out_dir, const char *config_fingerprint,
                                     struct plena_err *err);

/* What `campaign run` does about the gate: bypassed (--no-determinism-gate:
 * go, the report records "bypassed"), passed (go), none for this
 * configuration (run the gate first), or not passed (refused: err names the
 * report). *state is what the report records ("passed" or "bypassed"). */
enum plena_campaign_gate {
    PLENA_CAMPAIGN_GATE_GO,
    PLENA_CAMPAIGN_GATE_BYPASSED,
    PLENA_CAMPAIGN_GATE_RUN_FIRST,
    PLENA_CAMPAIGN_GATE_REFUSED
};
enum plena_campaign_gate plena_campaign_gate_decision(const char *out_dir,
                                                      const char *config_fingerprint, int bypass,
                                                      const char **state, struct plena_err *err);

/* ---- status and report ---- */
struct plena_campaign_status {
    size_t total, passed, failed, given_up, not_run, manifest_lines, torn_bytes;
};
int plena_campaign_status_read(const struct plena_campaign_set *s, const char *out_dir,
                               unsigned max_attempts, struct plena_campaign_status *st,
                               struct plena_err *err);

/* Interpolated quantile at rank (n-1) q of ascending values (n >= 1). */
double plena_campaign_quantile(const double *sorted, size_t n, double q);

/* Writes report.json, report.csv and report.md into out_dir. *passed is the
 * campaign verdict. */
int plena_campaign_report(const struct plena_campaign_set *s, const char *out_dir,
                          const char *config_fingerprint, unsigned max_attempts, int *passed,
                          struct plena_err *err);

/* ---- MPI ---- */
/* 1 when built with MPI. Without it every function below returns
 * PLENA_E_USAGE "built without MPI" (plena_campaign_mpi_finish returns code). */
int plena_campaign_have_mpi(void);

struct plena_campaign_mpi; /* opaque: ranks, the node communicator */
struct plena_campaign_mpi_opts {
    const char *scratch; /* parent of the rank-local scratch dirs; NULL = $TMPDIR or /tmp */
    int shared_fs;       /* ranks write straight into out_dir, send only completions */
};

/* MPI_Init (only when asked for: the same binary runs without mpirun) and the
 * shared-memory split that the per-node width needs. */
int plena_campaign_mpi_init(struct plena_campaign_mpi **m, struct plena_err *err);
int plena_campaign_mpi_rank(const struct plena_campaign_mpi *m);
int plena_campaign_mpi_size(const struct plena_campaign_mpi *m);
/* Collective: rank 0's values to every rank (buf[n-1] ends the string). */
void plena_campaign_mpi_bcast_ints(struct plena_campaign_mpi *m, int64_t *v, size_t n);
void plena_campaign_mpi_bcast_str(struct plena_campaign_mpi *m, char *buf, size_t n);
/* Collective: the worst (largest) exit code over the ranks; frees m and
 * finalizes MPI. Every rank exits with the returned code. */
int plena_campaign_mpi_finish(struct plena_campaign_mpi *m, int code);

/* Collective campaign run: rank 0 passes the set (others NULL) and computes
 * the resume state, broadcasts the unfinished traces in cost order, item k
 * runs on rank k mod R with the node's width divided by the ranks on the
 * node; rank 0 writes every result, the manifest and the rest (single
 * writer). On rank 0 *sum is the campaign's; elsewhere only interrupted and
 * code (OK or E_INTERRUPTED) are set. A failure on rank 0 before the broadcast is
 * returned there; the other ranks then return 0. */
int plena_campaign_run_mpi(struct plena_campaign_mpi *m, const struct plena_campaign_set *s,
                           const struct plena_campaign_run_opts *o,
                           const struct plena_campaign_mpi_opts *mo,
                           struct plena_campaign_run_summary *sum, struct plena_err *err);
/* Collective determinism gate: the serial pass on rank 0, the parallel pass
 * (J workers in total) sharded over the ranks and gathered by rank 0, which
 * alone compares and writes determinism.json. *sum is meaningful on rank 0. */
int plena_campaign_determinism_mpi(struct plena_campaign_mpi *m, const struct plena_campaign_set *s,
                                   const struct plena_campaign_det_opts *o,
                                   const struct plena_campaign_mpi_opts *mo,
                                   struct plena_campaign_det_summary *sum, struct plena_err *err);

#endif
