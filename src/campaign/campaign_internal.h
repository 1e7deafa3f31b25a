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
int plena_campaign_spawn(const struct plena_campaign_worker *w, struct plena_campaign_job *j,
                         struct plena_err *err);
/* Runs jobs[0..n-1] in order with at most `width` at once; `done` after each
 * exit, `tick` every loop turn. On *stop: no more dispatch, SIGTERM to the
 * running ones, wait for them (they are reported with interrupted = 1). */
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

#endif
