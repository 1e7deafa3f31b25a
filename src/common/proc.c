/* The process pool of common/proc.h. The parent polls with WNOHANG and a
 * 10 ms sleep instead of blocking in wait: the stop flag (set by a signal
 * handler) and the tick callback are then seen within one turn whether or
 * not a child ends, and no EINTR bookkeeping is needed. */
#define _GNU_SOURCE
#include "common/proc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"

double plena_proc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct slot {
    size_t job;
    pid_t pid;
    unsigned slot;
    double t0;
};

static int spawn(const struct plena_proc_pool *p, size_t i, unsigned n_running, struct slot *s,
                 struct plena_err *err)
{
    if (p->prepare) {
        int rc = p->prepare(p->ctx, i, err);
        if (rc) return rc;
    }
    /* nothing buffered may be written twice (by the parent and the child) */
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* a worker orphaned by a killed coordinator stops too: no stray
         * writer survives into a resumed run */
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
        /* the parent died before prctl took effect: no signal will come */
        if (getppid() != parent) _exit(127);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int code = p->child(p->ctx, i);
        fflush(stdout);
        fflush(stderr);
        _exit(code);
    }
    int fork_errno = errno;
    if (p->forked) p->forked(p->ctx, i, pid);
    if (pid < 0) return PLENA_FAIL(err, PLENA_E_NOMEM, "fork", "%s", strerror(fork_errno));
    s->job = i;
    s->pid = pid;
    s->slot = n_running;
    s->t0 = plena_proc_now();
    return 0;
}

int plena_proc_pool_run(const struct plena_proc_pool *p, int *interrupted, struct plena_err *err)
{
    const unsigned width = p->width ? p->width : 1;
    struct slot *run = plena_calloc(width, sizeof *run);
    if (!run) return PLENA_FAIL(err, PLENA_E_NOMEM, "pool", "out of memory");
    size_t n_running = 0, next = 0;
    int rc = 0, stopping = 0;
    if (interrupted) *interrupted = 0;
    while (next < p->n_jobs || n_running) {
        if (!stopping && p->stop && *p->stop) {
            stopping = 1;
            if (interrupted) *interrupted = 1;
            for (size_t s = 0; s < n_running; s++)
                kill(run[s].pid, SIGTERM);
        }
        while (!stopping && !rc && n_running < width && next < p->n_jobs) {
            if ((rc = spawn(p, next, (unsigned)n_running, &run[n_running], err))) break;
            n_running++;
            next++;
        }
        if (rc) stopping = 1;
        if (stopping && !n_running) break;
        int reaped = 0;
        for (size_t s = 0; s < n_running;) {
            int st = 0;
            struct rusage ru;
            memset(&ru, 0, sizeof ru);
            pid_t r = wait4(run[s].pid, &st, WNOHANG, &ru);
            if (r == run[s].pid || (r < 0 && errno == ECHILD)) {
                struct plena_proc_exit e = {
                    .pid = run[s].pid,
                    .slot = run[s].slot,
                    .seconds = plena_proc_now() - run[s].t0,
                    .max_rss_kb = r == run[s].pid ? ru.ru_maxrss : 0,
                    .exit_code = r == run[s].pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                    .signal = r == run[s].pid && WIFSIGNALED(st) ? WTERMSIG(st) : 0,
                    /* the flag too: a job stopped by the same signal (a
                     * terminal's SIGINT reaches the whole process group)
                     * can end before this turn looked at it */
                    .interrupted = stopping || (p->stop && *p->stop),
                };
                size_t job = run[s].job;
                run[s] = run[--n_running];
                reaped = 1;
                if (p->done) p->done(p->ctx, job, &e);
            } else
                s++;
        }
        if (p->tick) p->tick(p->ctx, n_running, next);
        if (!reaped) sleep_ms(10);
    }
    plena_free(run);
    return rc;
}
