/* A width-limited pool of child processes: the one copy of fork, reaping
 * (wait4, for the peak RSS), SIGTERM forwarding on a stop request and the
 * child's signal set-up, used by `plena replay --jobs N` (replay/batch.c)
 * and by campaign workers (campaign/pool.c). Jobs are dispatched in index
 * order; what a child does, and what a finished job means, is the caller's:
 * the pool never reads results and never prints. */
#ifndef PLENA_COMMON_PROC_H
#define PLENA_COMMON_PROC_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

/* How one job ended. */
struct plena_proc_exit {
    pid_t pid;
    unsigned slot;   /* number of jobs running when it was dispatched (0..width-1) */
    double seconds;  /* wall time from fork to reap */
    long max_rss_kb; /* peak resident set size (0 when unknown) */
    int exit_code;   /* -1 when killed by a signal */
    int signal;      /* the signal that killed it, else 0 */
    int interrupted; /* reaped after the stop request */
};

struct plena_proc_pool {
    size_t n_jobs;
    unsigned width;              /* at most this many at once (0 = 1) */
    volatile sig_atomic_t *stop; /* may be NULL; once set: no more dispatch, SIGTERM to the
                                  * running jobs, which are still waited for */
    /* Parent, before job i is forked (may be NULL): e.g. open its log. A
     * non-zero return stops dispatching; running jobs are still reaped. */
    int (*prepare)(void *ctx, size_t i, struct plena_err *err);
    /* Child: job i. Returns its exit status (the pool flushes stdio and
     * _exits with it) or does not return (exec). Runs with SIGINT, SIGTERM
     * and SIGPIPE at their defaults and dies with SIGTERM when the parent
     * dies (PR_SET_PDEATHSIG). */
    int (*child)(void *ctx, size_t i);
    /* Parent, after the fork of job i, pid < 0 when it failed (may be NULL):
     * release what prepare took. */
    void (*forked)(void *ctx, size_t i, pid_t pid);
    /* Parent: job i ended (may be NULL). */
    void (*done)(void *ctx, size_t i, const struct plena_proc_exit *e);
    /* Parent: every turn of the wait loop (may be NULL). */
    void (*tick)(void *ctx, size_t n_running, size_t n_dispatched);
    void *ctx;
};

/* Runs the jobs. *interrupted (may be NULL) is set when the stop request
 * was seen. Returns 0, or the first prepare/fork error (fork: PLENA_E_NOMEM);
 * every job that was started has been reaped either way. */
int plena_proc_pool_run(const struct plena_proc_pool *p, int *interrupted, struct plena_err *err);

/* Monotonic seconds (for durations). */
double plena_proc_now(void);

#endif
