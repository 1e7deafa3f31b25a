/* Worker processes of a campaign (docs/replay.md "Campaigns"): argv
 * template expansion, exec with stdin closed and output to the build dir's
 * log, on the process pool of common/proc.h (dispatch in a given order,
 * SIGTERM forwarding when asked to stop, peak RSS from wait4); width
 * arithmetic and the progress line. It never reads results: callers judge
 * completions. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "campaign/campaign_internal.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/proc.h"
#include "gen/build.h"
#include "replay/jsonw.h"

double plena_campaign_now(void)
{
    return plena_proc_now();
}

int plena_campaign_self_exe(char *buf, size_t n, struct plena_err *err)
{
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0 || (size_t)k >= n - 1)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "/proc/self/exe", "cannot resolve own binary");
    buf[k] = 0;
    return 0;
}

long plena_campaign_cores(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (!sched_getaffinity(0, sizeof set, &set)) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? c : 1;
}

int64_t plena_campaign_mem_available_kb(const char *meminfo_path)
{
    FILE *f = fopen(meminfo_path ? meminfo_path : "/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1 && kb >= 0) {
                fclose(f);
                return kb;
            }
        fclose(f);
    }
    if (meminfo_path) return -1; /* a test's explicit file: no host fallback */
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) return (int64_t)pages * (int64_t)psz / 1024;
    return -1;
}

void plena_campaign_width_formula(long cores, int64_t mem_kb, int64_t rss_kb, double fraction,
                                  size_t remaining, unsigned max_jobs,
                                  struct plena_campaign_width *w)
{
    memset(w, 0, sizeof *w);
    w->cores = cores;
    w->mem_available_kb = mem_kb;
    w->rss_probe_kb = rss_kb;
    w->memory_fraction = fraction;
    if (mem_kb < 0) {
        w->width = 1;
        snprintf(w->reason, sizeof w->reason, "memory_unknown");
        return;
    }
    if (rss_kb <= 0) {
        w->width = 1;
        snprintf(w->reason, sizeof w->reason, "rss_probe_failed");
        return;
    }
    int64_t by_cores = cores - 2;
    int64_t by_mem = (int64_t)(fraction * (double)mem_kb / (double)rss_kb); /* floor, >= 0 */
    int64_t by_rem = (int64_t)remaining;
    int64_t x = by_cores;
    const char *why = "cores";
    if (by_mem < x) x = by_mem, why = "memory";
    if (by_rem < x) x = by_rem, why = "remaining";
    if (x < 1) x = 1;
    if (max_jobs && x > (int64_t)max_jobs) {
        x = max_jobs;
        snprintf(w->reason, sizeof w->reason, "%s_capped", why);
    } else
        snprintf(w->reason, sizeof w->reason, "%s", why);
    w->width = (unsigned)x;
}

static void hms(char *b, size_t n, double s)
{
    if (s < 0) {
        snprintf(b, n, "--:--:--");
        return;
    }
    long t = (long)(s + 0.5);
    snprintf(b, n, "%02ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void plena_campaign_progress_line(const struct plena_campaign_progress *p, char *buf, size_t n)
{
    char el[32], eta[32];
    hms(el, sizeof el, p->elapsed);
    hms(eta, sizeof eta, p->completed_here ? p->eta : -1);
    snprintf(buf, n,
             "done %zu/%zu (passed %zu, failed %zu, skipped %zu) running %zu remaining %zu | %.2f "
             "traces/s | elapsed %s | ETA %s",
             p->done, p->total, p->passed, p->failed + p->given_up, p->skipped_existing, p->running,
             p->remaining, p->rate, el, eta);
}

/* Replaces every placeholder of one template argument. */
static char *expand(const char *tmpl, const struct plena_campaign_job *j)
{
    struct plena_buf b;
    plena_buf_init(&b);
    for (const char *p = tmpl; *p;) {
        const char *val = NULL;
        size_t skip = 0;
        static const char *const keys[] = {"{trace}", "{out}", "{trace_id}", "{dir}",
                                           "{fingerprint}"};
        const char *vals[] = {j->trace_path, j->out_root, j->trace_id, j->dir_name, j->fingerprint};
        for (size_t k = 0; k < 5; k++)
            if (!strncmp(p, keys[k], strlen(keys[k]))) {
                val = vals[k];
                skip = strlen(keys[k]);
                break;
            }
        if (val) {
            plena_buf_puts(&b, val);
            p += skip;
        } else
            plena_buf_append(&b, p++, 1);
    }
    plena_buf_append(&b, "", 1);
    if (b.failed) {
        plena_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* One pool turn's state: the worker template, the jobs and the caller's
 * callbacks; per job the expanded argv and the log descriptor between
 * prepare and fork. */
struct pool_ctx {
    const struct plena_campaign_worker *w;
    struct plena_campaign_job *jobs;
    plena_campaign_done_fn done;
    plena_campaign_tick_fn tick;
    void *ctx;
    char **argv; /* of the job being started */
    int fd;
};

static void free_argv(struct pool_ctx *c)
{
    for (size_t i = 0; c->argv && i < c->w->argc; i++)
        plena_free(c->argv[i]);
    plena_free(c->argv);
    c->argv = NULL;
}

/* Expands the template, creates the build dir and opens its worker log. */
static int prepare(void *ctx, size_t i, struct plena_err *err)
{
    struct pool_ctx *c = ctx;
    struct plena_campaign_job *j = &c->jobs[i];
    c->fd = -1;
    c->argv = plena_calloc(c->w->argc + 1, sizeof *c->argv);
    if (!c->argv) return PLENA_FAIL(err, PLENA_E_NOMEM, "worker", "out of memory");
    int rc = 0;
    for (size_t k = 0; k < c->w->argc && !rc; k++)
        if (!(c->argv[k] = expand(c->w->argv[k], j)))
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, "worker", "out of memory");
    char dir[4200];
    if (!rc && snprintf(dir, sizeof dir, "%s/%s", j->out_root, j->dir_name) >= (int)sizeof dir)
        rc = PLENA_FAIL(err, PLENA_E_OUTPUT, j->out_root, "path too long");
    if (!rc) rc = plena_mkdir_p(dir, err);
    if (!rc)
        snprintf(j->log_path, sizeof j->log_path, "%s/%s", dir,
                 plena_build_file_name(PLENA_BUILD_FILE_WORKER_LOG));
    if (!rc && (c->fd = open(j->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
        rc = PLENA_FAIL(err, PLENA_E_OUTPUT, j->log_path, "cannot open worker log: %s",
                        strerror(errno));
    if (rc) free_argv(c);
    return rc;
}

/* In the child: stdin from /dev/null, stdout and stderr into the log, exec. */
static int child(void *ctx, size_t i)
{
    struct pool_ctx *c = ctx;
    (void)i;
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    dup2(c->fd, 1);
    dup2(c->fd, 2);
    execv(c->argv[0], c->argv);
    dprintf(2, "plena campaign: cannot execute %s: %s\n", c->argv[0], strerror(errno));
    return 127;
}

static void forked(void *ctx, size_t i, pid_t pid)
{
    struct pool_ctx *c = ctx;
    struct plena_campaign_job *j = &c->jobs[i];
    if (c->fd >= 0) close(c->fd);
    free_argv(c);
    if (pid > 0) {
        j->pid = pid;
        j->t0 = plena_campaign_now();
    }
}

static void done(void *ctx, size_t i, const struct plena_proc_exit *e)
{
    struct pool_ctx *c = ctx;
    struct plena_campaign_job *j = &c->jobs[i];
    j->worker = (int)e->slot;
    j->host_seconds = e->seconds;
    j->max_rss_kb = e->max_rss_kb;
    j->exit_code = e->exit_code;
    j->signal = e->signal;
    j->interrupted = e->interrupted;
    j->finished = 1;
    if (c->done) c->done(c->ctx, j);
}

static void tick(void *ctx, size_t n_running, size_t n_dispatched)
{
    struct pool_ctx *c = ctx;
    if (c->tick) c->tick(c->ctx, n_running, n_dispatched);
}

int plena_campaign_pool(const struct plena_campaign_worker *w, struct plena_campaign_job *jobs,
                        size_t n_jobs, unsigned width, volatile sig_atomic_t *stop,
                        plena_campaign_done_fn done_fn, plena_campaign_tick_fn tick_fn, void *ctx,
                        int *interrupted, struct plena_err *err)
{
    struct pool_ctx c = {w, jobs, done_fn, tick_fn, ctx, NULL, -1};
    const struct plena_proc_pool p = {
        .n_jobs = n_jobs,
        .width = width,
        .stop = stop,
        .prepare = prepare,
        .child = child,
        .forked = forked,
        .done = done,
        .tick = tick,
        .ctx = &c,
    };
    return plena_proc_pool_run(&p, interrupted, err);
}
