/* Internals shared by the campaign's files: one worker job, the pool loop
 * (pool.c) and small helpers. Not part of the public API. */
#ifndef PLENA_CAMPAIGN_INTERNAL_H
#define PLENA_CAMPAIGN_INTERNAL_H

#include <sys/types.h>

#include "campaign/campaign.h"

struct plena_campaign_job {
    size_t trace; /* index into the set */
    char trace_path[1100];
    const char *out_root, *trace_id, *dir_name, *fingerprint;
    char log_path[4300];
    pid_t pid;
    int worker; /* slot number at dispatch */
    double t0, host_seconds;
    long max_rss_kb;
    int exit_code; /* -1 when killed by a signal */
    int signal;
    int interrupted; /* finished after a stop request */
    int finished;
};

typedef void (*plena_campaign_done_fn)(void *ctx, struct plena_campaign_job *j);
typedef void (*plena_campaign_tick_fn)(void *ctx, size_t n_running, size_t n_dispatched);

double plena_campaign_now(void);
/* Runs jobs[0..n-1] in order with at most `width` at once on the process
 * pool of common/proc.h (each job: the worker template expanded, exec'ed
 * with its output in the build dir's worker log); `done` after each exit,
 * `tick` every loop turn. On *stop: no more dispatch, SIGTERM to the running
 * ones, wait for them (they are reported with interrupted = 1). */
int plena_campaign_pool(const struct plena_campaign_worker *w, struct plena_campaign_job *jobs,
                        size_t n_jobs, unsigned width, volatile sig_atomic_t *stop,
                        plena_campaign_done_fn done, plena_campaign_tick_fn tick, void *ctx,
                        int *interrupted, struct plena_err *err);

/* Fills a job for trace t: the worker input path (a set line is written once
 * to out_dir/inputs/<dir>.json), out root and ids. */
int plena_campaign_job_init(struct plena_campaign_job *j, const struct plena_campaign_trace *t,
                            size_t index, const char *out_dir, const char *replay_root,
                            struct plena_err *err);

/* Reads root/<dir>/results.json: 1 passed for `fingerprint`, 0 decided but
 * not passed (or another fingerprint), -1 absent/unreadable. *res (may be
 * NULL) receives the parsed object. */
int plena_campaign_result_state(const char *root, const char *dir, const char *fingerprint,
                                json_t **res);

/* The trace of s a manifest line is an attempt of under that trace's
 * current fingerprint: its index into the set, or -1 when the line names
 * no trace of s or carries another (or no) fingerprint. *status (may be
 * NULL in the line) is the line's status. */
ptrdiff_t plena_campaign_manifest_trace(const struct plena_campaign_set *s, json_t *line,
                                        const char **status);

/* ---- the run's coordinator state (run.c), shared with mpi.c so rank 0
 * logs remote completions through the same code as local ones ---- */
struct plena_campaign_run_ctx {
    const struct plena_campaign_set *s;
    const struct plena_campaign_run_opts *o;
    struct plena_campaign_run_summary *sum;
    char replay_root[4200];
    char manifest_path[4200], failures_path[4200], progress_path[4200];
    int manifest_fd, failures_fd;
    int lock_fd;               /* the directory's lock (plena_campaign_lock) */
    unsigned *prior_attempts;  /* per set index: failed/errored attempts counted */
    unsigned char *has_passed; /* per set index: the manifest holds its `passed` line */
    char run_id[64], started[32];
    struct plena_campaign_progress p;
    double t_first; /* first dispatch, 0 before */
    double t_tick;  /* last periodic progress callback */
    struct plena_err *err;
    int io_failed;
    enum plena_status worst_worker; /* of the failing workers' exit codes (plena_status_worst) */
    size_t last_done;
    struct plena_campaign_job *jobs; /* the queue: unfinished traces in cost order */
    size_t n_queue;
};

/* Setup, resume state and the queue; on error everything is freed. */
int plena_campaign_run_begin(struct plena_campaign_run_ctx *c, const struct plena_campaign_set *s,
                             const struct plena_campaign_run_opts *o,
                             struct plena_campaign_run_summary *sum, struct plena_err *err);
/* Pool callbacks: `done` judges the result in c->replay_root and logs the
 * attempt (manifest, failures); `tick` updates progress. ctx is the run ctx. */
void plena_campaign_run_done(void *ctx, struct plena_campaign_job *j);
void plena_campaign_run_tick(void *ctx, size_t n_running, size_t n_dispatched);
int plena_campaign_run_probe_record(struct plena_campaign_run_ctx *c,
                                    const struct plena_campaign_job *pj, struct plena_err *err);
/* Final progress, exports, status and the summary's exit code. */
int plena_campaign_run_end(struct plena_campaign_run_ctx *c, int interrupted,
                           struct plena_err *err);
void plena_campaign_run_free(struct plena_campaign_run_ctx *c);
/* width.json; extra (may be NULL) is merged in (the MPI fields). */
int plena_campaign_write_width(const char *out_dir, const struct plena_campaign_width *w,
                               const json_t *extra, struct plena_err *err);

/* ---- determinism gate pieces (determinism.c), shared with mpi.c ---- */
struct plena_campaign_det_plan {
    size_t *pick; /* set indices of the subset, canonical order */
    size_t n;
    unsigned width; /* the parallel pass's width, max(2, min(J, 4)) */
    char serial[4300], parallel[4300];
    int lock_fd; /* the campaign directory's lock */
};
/* Subset, J, fresh serial/ and parallel/ directories. */
int plena_campaign_det_begin(const struct plena_campaign_set *s,
                             const struct plena_campaign_det_opts *o,
                             struct plena_campaign_det_plan *pl, struct plena_err *err);
/* The serial pass (width 1) into pl->serial. */
int plena_campaign_det_serial(const struct plena_campaign_set *s,
                              const struct plena_campaign_det_opts *o,
                              const struct plena_campaign_det_plan *pl, int *interrupted,
                              struct plena_err *err);
/* Compares serial/ with parallel/ and writes determinism.json (extra, may be
 * NULL, merged in). */
int plena_campaign_det_verdict(const struct plena_campaign_set *s,
                               const struct plena_campaign_det_opts *o,
                               const struct plena_campaign_det_plan *pl, const json_t *extra,
                               struct plena_campaign_det_summary *sum, struct plena_err *err);
void plena_campaign_det_plan_free(struct plena_campaign_det_plan *pl);

#endif
