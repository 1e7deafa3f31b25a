/* Checkpointed campaign replay and the determinism gate
 * (docs/replay.md "Campaigns"). The per-trace results.json is the
 * checkpoint (replay's own skip-existing predicate); manifest.jsonl is the
 * ordered log of completed attempts, written only here, one fsync'ed line at
 * a time; progress.json, width.json, rss_probe.json and failures.jsonl are
 * the coordinator's too. Deliberately no retries inside one invocation: a
 * failed trace is retried by the next resume, up to --max-attempts. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "campaign/campaign_internal.h"
#include "common/alloc.h"
#include "gen/build.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "replay/export.h"
#include "replay/jsonw.h"
#include "replay/result.h"

#define MANIFEST_SCHEMA 1

/* ---- helpers ---- */
static int jpath(char *buf, size_t n, const char *dir, const char *name, struct plena_err *err)
{
    if (plena_path_join(buf, n, dir, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    return 0;
}

int plena_campaign_job_init(struct plena_campaign_job *j, const struct plena_campaign_trace *t,
                            size_t index, const char *out_dir, const char *replay_root,
                            struct plena_err *err)
{
    memset(j, 0, sizeof *j);
    j->trace = index;
    j->out_root = replay_root;
    j->trace_id = t->item.trace_id;
    j->dir_name = t->item.dir_name;
    j->fingerprint = t->item.fingerprint;
    if (t->path[0]) {
        snprintf(j->trace_path, sizeof j->trace_path, "%s", t->path);
        return 0;
    }
    /* a trace from a set line: the worker gets its own file, written once */
    char dir[4200];
    int rc = jpath(dir, sizeof dir, out_dir, "inputs", err);
    if (!rc) rc = plena_mkdir_p(dir, err);
    if (rc) return rc;
    if (snprintf(j->trace_path, sizeof j->trace_path, "%s/%s.json", dir, t->item.dir_name) >=
        (int)sizeof j->trace_path)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    struct stat st;
    if (!stat(j->trace_path, &st)) return 0;
    return plena_replay_json_write_file(t->item.trace, j->trace_path, err);
}

int plena_campaign_result_state(const char *root, const char *dir, const char *fingerprint,
                                json_t **res)
{
    if (res) *res = NULL;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s/%s", root, dir, plena_build_file_name(PLENA_BUILD_FILE_RESULTS));
    json_t *r = NULL;
    struct plena_err e;
    plena_err_clear(&e);
    if (plena_replay_json_read_file(p, &r, &e) || !json_is_object(r)) {
        json_decref(r);
        return -1;
    }
    int passed = plena_replay_can_skip(p, fingerprint);
    if (res)
        *res = r;
    else
        json_decref(r);
    return passed ? 1 : 0;
}

ptrdiff_t plena_campaign_manifest_trace(const struct plena_campaign_set *s, json_t *line,
                                        const char **status)
{
    const char *id = json_string_value(json_object_get(line, "trace_id"));
    const char *fp = json_string_value(json_object_get(line, "fingerprint"));
    *status = json_string_value(json_object_get(line, "status"));
    /* trace ids are unique in a set: the first match is the trace */
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].item.trace_id, id))
            return fp && !strcmp(fp, s->v[i].item.fingerprint) ? (ptrdiff_t)i : -1;
    return -1;
}

static void utc_now(char out[32])
{
    plena_replay_utc_now(out);
}

/* ---- manifest ---- */
static int truncate_file(const char *path, off_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = ftruncate(fd, len) || fsync(fd);
    close(fd);
    return rc ? -1 : 0;
}

static int manifest_read(const char *path, int truncate, json_t **lines, size_t *torn_bytes,
                         struct plena_err *err)
{
    *lines = json_array();
    *torn_bytes = 0;
    if (!*lines) return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    struct stat st;
    if (stat(path, &st)) return 0;
    char *data = NULL;
    size_t len = 0;
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    size_t pos = 0, good = 0;
    long line = 0;
    while (pos < len) {
        size_t e = pos;
        while (e < len && data[e] != '\n')
            e++;
        if (e == len) break; /* no '\n': a torn tail */
        line++;
        json_error_t je;
        json_t *v = e > pos ? json_loadb(data + pos, e - pos, JSON_REJECT_DUPLICATES, &je) : NULL;
        int ok = json_is_object(v) && json_is_string(json_object_get(v, "trace_id"));
        if (!ok) {
            json_decref(v);
            if (e + 1 < len) { /* a complete line with more after it: corrupt */
                plena_free(data);
                char where[4200];
                snprintf(where, sizeof where, "%s:%ld", path, line);
                return PLENA_FAIL(err, PLENA_E_INPUT, where,
                                  "corrupt manifest line (expected one JSON object with a "
                                  "trace_id); fix or remove it by hand");
            }
            break; /* the last line is corrupt: treated as torn */
        }
        json_array_append_new(*lines, v);
        pos = good = e + 1;
    }
    plena_free(data);
    *torn_bytes = len - good;
    if (*torn_bytes && truncate && truncate_file(path, (off_t)good))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot truncate the torn tail: %s",
                          strerror(errno));
    return 0;
}

int plena_campaign_manifest_read(const char *path, int truncate, json_t **lines, size_t *torn_bytes,
                                 struct plena_err *err)
{
    int rc = manifest_read(path, truncate, lines, torn_bytes, err);
    if (rc) { /* the lines read before the failure are not the caller's (they leaked) */
        json_decref(*lines);
        *lines = NULL;
    }
    return rc;
}

/* ---- run ---- */
static void progress_fill(struct plena_campaign_run_ctx *c, size_t running)
{
    struct plena_campaign_progress *p = &c->p;
    p->running = running;
    p->done = p->passed + p->failed + p->given_up;
    p->remaining = p->total > p->done + running ? p->total - p->done - running : 0;
    p->width = c->sum->width.width;
    p->elapsed = c->t_first > 0 ? plena_campaign_now() - c->t_first : 0;
    p->rate = p->elapsed > 0 ? (double)p->completed_here / p->elapsed : 0;
    p->eta = p->rate > 0 ? (double)p->remaining / p->rate : -1;
}

static void write_progress(struct plena_campaign_run_ctx *c)
{
    char now[32];
    utc_now(now);
    const struct plena_campaign_progress *p = &c->p;
    json_t *j = json_pack(
        "{s:i,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "schema_version", 1, "run_id",
        c->run_id, "started_at_utc", c->started, "updated_at_utc", now, "total",
        (json_int_t)p->total, "done", (json_int_t)p->done, "passed", (json_int_t)p->passed,
        "failed", (json_int_t)p->failed, "given_up", (json_int_t)p->given_up, "skipped_existing",
        (json_int_t)p->skipped_existing, "running", (json_int_t)p->running, "remaining",
        (json_int_t)p->remaining, "width", (json_int_t)p->width, "rate_per_second", p->rate);
    if (!j) return;
    json_object_set_new(j, "eta_seconds", p->eta >= 0 ? json_real(p->eta) : json_null());
    if (plena_replay_json_write_file(j, c->progress_path, c->err)) c->io_failed = 1;
    json_decref(j);
}

static int manifest_line(struct plena_campaign_run_ctx *c, const struct plena_campaign_trace *t,
                         unsigned attempt, const char *status, const json_t *res, int exit_code,
                         int recovered, const char *error, double host_seconds, int worker)
{
    const json_t *gp = json_object_get(json_object_get(res, "gate"), "passed");
    const json_t *cyc = json_object_get(json_object_get(res, "run"), "sim_latency_cycles");
    json_t *l = json_object();
    json_object_set_new(l, "schema_version", json_integer(MANIFEST_SCHEMA));
    json_object_set_new(l, "trace_id", json_string(t->item.trace_id));
    json_object_set_new(l, "trace_sha256", json_string(t->item.trace_sha256));
    json_object_set_new(l, "fingerprint", json_string(t->item.fingerprint));
    json_object_set_new(l, "attempt", json_integer(attempt));
    json_object_set_new(l, "status", json_string(status));
    json_object_set_new(l, "gate_passed",
                        json_is_boolean(gp) ? json_boolean(json_is_true(gp)) : json_null());
    json_object_set_new(l, "exit_code", json_integer(exit_code));
    json_object_set_new(l, "sim_latency_cycles",
                        json_is_integer(cyc) ? json_copy((json_t *)cyc) : json_null());
    json_object_set_new(l, "recovered", json_boolean(recovered));
    json_object_set_new(l, "error", error ? json_string(error) : json_null());
    json_object_set_new(l, "host_seconds", json_real(host_seconds));
    json_object_set_new(l, "worker", json_integer(worker));
    json_object_set_new(l, "run_id", json_string(c->run_id));
    int rc = plena_jsonl_append(c->manifest_fd, l, c->manifest_path, c->err);
    json_decref(l);
    if (rc) c->io_failed = 1;
    return rc;
}

static void failure_line(struct plena_campaign_run_ctx *c, const struct plena_campaign_job *j,
                         unsigned attempt, const json_t *res)
{
    json_t *failed = json_array();
    const json_t *f = json_object_get(json_object_get(res, "gate"), "failed");
    size_t i;
    json_t *v;
    if (json_is_array(f)) json_array_foreach(f, i, v) json_array_append(failed, v);
    char rel[4400];
    snprintf(rel, sizeof rel, "replay/%s/%s", j->dir_name,
             plena_build_file_name(PLENA_BUILD_FILE_WORKER_LOG));
    json_t *l = json_pack("{s:s,s:I,s:i,s:i,s:o,s:s}", "trace_id", j->trace_id, "attempt",
                          (json_int_t)attempt, "exit_code", j->exit_code, "signal", j->signal,
                          "failed_checks", failed, "log_path", rel);
    if (l && plena_jsonl_append(c->failures_fd, l, c->failures_path, c->err)) c->io_failed = 1;
    json_decref(l);
}

void plena_campaign_run_done(void *ctx, struct plena_campaign_job *j)
{
    struct plena_campaign_run_ctx *c = ctx;
    const struct plena_campaign_trace *t = &c->s->v[j->trace];
    json_t *res = NULL;
    int st = plena_campaign_result_state(c->replay_root, j->dir_name, j->fingerprint, &res);
    if (j->interrupted && st < 0) { /* stopped before deciding: no line, resumable */
        json_decref(res);
        return;
    }
    /* a worker exit of 0 without a pass is a failure, whatever it says */
    int code = j->exit_code < 0 ? 128 + j->signal : j->exit_code;
    char emsg[160] = "";
    /* and a pass whose worker did not exit 0 is no pass: the status always
     * agrees with the exit code (an interrupted worker, exit 5, leaves no
     * terminal line: the trace is resumed) */
    if (st > 0 && code != 0) {
        if (code == plena_status_exit_code(PLENA_E_INTERRUPTED)) {
            json_decref(res);
            return;
        }
        st = -1;
        snprintf(emsg, sizeof emsg, "worker exited %d after writing a passing result", code);
    }
    unsigned attempt = ++c->prior_attempts[j->trace];
    const char *status = st > 0 ? "passed" : st == 0 ? "failed" : "error";
    if (st < 0 && !emsg[0]) {
        if (j->signal)
            snprintf(emsg, sizeof emsg, "worker killed by signal %d, no result", j->signal);
        else
            snprintf(emsg, sizeof emsg, "worker exited %d without a result", j->exit_code);
    }
    /* one `passed` line per trace: a rerun after its results.json was lost
     * (truncated, removed) re-creates the result but logs no second pass */
    if (!(st > 0 && c->has_passed[j->trace]))
        manifest_line(c, t, attempt, status, res, code, 0, st < 0 ? emsg : NULL, j->host_seconds,
                      j->worker);
    if (st > 0) {
        c->has_passed[j->trace] = 1;
        c->p.passed++;
        c->sum->passed++;
    } else {
        c->p.failed++;
        /* an exit code of the status table (not a signal, not an interrupt)
         * raises the campaign's code: a worker's ENOSPC (4) is reported as 4 */
        enum plena_status ws = plena_status_from_exit_code(code);
        if (ws != PLENA_E_INTERRUPTED) c->worst_worker = plena_status_worst(c->worst_worker, ws);
        if (st == 0)
            c->sum->failed++;
        else
            c->sum->errored++;
        failure_line(c, j, attempt, res);
    }
    c->p.completed_here++;
    json_decref(res);
}

void plena_campaign_run_tick(void *ctx, size_t n_running, size_t n_dispatched)
{
    struct plena_campaign_run_ctx *c = ctx;
    (void)n_dispatched;
    if (c->t_first <= 0) c->t_first = plena_campaign_now();
    progress_fill(c, n_running);
    double now = plena_campaign_now();
    if (c->p.done != c->last_done) { /* progress.json after every completion */
        c->last_done = c->p.done;
        write_progress(c);
        if (c->o->progress) c->o->progress(c->o->progress_ctx, &c->p);
        c->t_tick = now;
    } else if (now - c->t_tick >= 0.25) {
        if (c->o->progress) c->o->progress(c->o->progress_ctx, &c->p);
        c->t_tick = now;
    }
}

static int write_status(const char *out_dir, const char *action, const char *state,
                        const char *determinism, struct plena_err *err)
{
    char p[4200], now[32];
    utc_now(now);
    int rc = jpath(p, sizeof p, out_dir, "campaign_status.json", err);
    if (rc) return rc;
    json_t *j = json_pack("{s:i,s:s,s:s,s:s}", "schema_version", 1, "action", action, "state",
                          state, "updated_at_utc", now);
    if (determinism) json_object_set_new(j, "determinism", json_string(determinism));
    rc = plena_replay_json_write_file(j, p, err);
    json_decref(j);
    return rc;
}

int plena_campaign_write_width(const char *out_dir, const struct plena_campaign_width *w,
                               const json_t *extra, struct plena_err *err)
{
    char p[4200];
    int rc = jpath(p, sizeof p, out_dir, "width.json", err);
    if (rc) return rc;
    json_t *j = json_pack(
        "{s:I,s:s,s:I,s:o,s:o,s:f}", "width", (json_int_t)w->width, "reason", w->reason, "cores",
        (json_int_t)w->cores, "mem_available_kb",
        w->mem_available_kb >= 0 ? json_integer(w->mem_available_kb) : json_null(), "rss_probe_kb",
        w->rss_probe_kb >= 0 ? json_integer(w->rss_probe_kb) : json_null(), "memory_fraction",
        w->memory_fraction);
    if (!j) return PLENA_FAIL(err, PLENA_E_NOMEM, p, "out of memory");
    if (extra) json_object_update(j, (json_t *)extra);
    rc = plena_replay_json_write_file(j, p, err);
    json_decref(j);
    return rc;
}

void plena_campaign_run_free(struct plena_campaign_run_ctx *c)
{
    if (c->manifest_fd >= 0) close(c->manifest_fd);
    if (c->failures_fd >= 0) close(c->failures_fd);
    c->manifest_fd = c->failures_fd = -1;
    plena_campaign_unlock(&c->lock_fd);
    plena_free(c->prior_attempts);
    plena_free(c->has_passed);
    plena_free(c->jobs);
    c->prior_attempts = NULL;
    c->has_passed = NULL;
    c->jobs = NULL;
}

int plena_campaign_run_begin(struct plena_campaign_run_ctx *c, const struct plena_campaign_set *s,
                             const struct plena_campaign_run_opts *o,
                             struct plena_campaign_run_summary *sum, struct plena_err *err)
{
    memset(sum, 0, sizeof *sum);
    memset(c, 0, sizeof *c);
    c->s = s;
    c->o = o;
    c->sum = sum;
    c->err = err;
    c->manifest_fd = c->failures_fd = c->lock_fd = -1;
    c->last_done = (size_t)-1;
    sum->total = c->p.total = s->n;
    size_t *order = plena_calloc(s->n ? s->n : 1, sizeof *order);
    c->prior_attempts = plena_calloc(s->n ? s->n : 1, sizeof *c->prior_attempts);
    c->jobs = plena_calloc(s->n ? s->n : 1, sizeof *c->jobs);
    json_t *lines = NULL;
    unsigned char *has_passed = NULL;
    int rc = 0;
    if (!order || !c->prior_attempts || !c->jobs) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "campaign", "out of memory");
        goto out;
    }
    if ((rc = plena_mkdir_p(o->out_dir, err))) goto out;
    /* one coordinator per directory, before anything in it is touched */
    if ((rc = plena_campaign_lock(o->out_dir, &c->lock_fd, err))) goto out;
    if ((rc = jpath(c->replay_root, sizeof c->replay_root, o->out_dir, "replay", err))) goto out;
    if ((rc = plena_mkdir_p(c->replay_root, err))) goto out;
    plena_replay_clean_tmp(o->out_dir);
    plena_replay_clean_tmp(c->replay_root);
    jpath(c->manifest_path, sizeof c->manifest_path, o->out_dir, "manifest.jsonl", err);
    jpath(c->failures_path, sizeof c->failures_path, o->out_dir, "failures.jsonl", err);
    jpath(c->progress_path, sizeof c->progress_path, o->out_dir, "progress.json", err);
    {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        snprintf(c->run_id, sizeof c->run_id, "%04d%02d%02dT%02d%02d%02dZ-%ld", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)getpid());
        utc_now(c->started);
    }
    if ((rc = write_status(o->out_dir, "run", "running", o->determinism_state, err))) goto out;

    /* resume state from the manifest */
    if ((rc = plena_campaign_manifest_read(c->manifest_path, 1, &lines, &sum->torn_manifest_bytes,
                                           err)))
        goto out;
    size_t tf;
    if ((rc = plena_jsonl_open(c->manifest_path, &c->manifest_fd, &tf, err))) goto out;
    if ((rc = plena_jsonl_open(c->failures_path, &c->failures_fd, &tf, err))) goto out;
    has_passed = c->has_passed = plena_calloc(s->n ? s->n : 1, 1);
    if (!has_passed) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "campaign", "out of memory");
        goto out;
    }
    size_t li;
    json_t *l;
    json_array_foreach(lines, li, l)
    {
        const char *stt;
        ptrdiff_t i = plena_campaign_manifest_trace(s, l, &stt);
        if (i < 0) continue;
        if (stt && !strcmp(stt, "passed"))
            has_passed[i] = 1;
        else if (!o->reset_attempts)
            c->prior_attempts[i]++;
    }
    plena_campaign_cost_order(s, order);
    unsigned max_att = o->max_attempts ? o->max_attempts : 3;
    for (size_t k = 0; k < s->n && !rc; k++) {
        size_t i = order[k];
        const struct plena_campaign_trace *t = &s->v[i];
        int stt = plena_campaign_result_state(c->replay_root, t->item.dir_name, t->item.fingerprint,
                                              NULL);
        if (stt > 0) {
            c->p.skipped_existing++;
            c->p.passed++;
            sum->skipped_existing++;
            sum->passed++;
            if (!has_passed[i]) { /* finished before a crash: log it once */
                json_t *res = NULL;
                plena_campaign_result_state(c->replay_root, t->item.dir_name, t->item.fingerprint,
                                            &res);
                rc =
                    manifest_line(c, t, c->prior_attempts[i] + 1, "passed", res, 0, 1, NULL, 0, -1);
                json_decref(res);
                sum->recovered++;
                has_passed[i] = 1;
            }
            continue;
        }
        if (c->prior_attempts[i] >= max_att) {
            c->p.given_up++;
            sum->given_up++;
            continue;
        }
        rc = plena_campaign_job_init(&c->jobs[c->n_queue++], t, i, o->out_dir, c->replay_root, err);
    }
out:
    json_decref(lines);
    plena_free(order);
    if (rc) plena_campaign_run_free(c);
    return rc;
}

int plena_campaign_run_probe_record(struct plena_campaign_run_ctx *c,
                                    const struct plena_campaign_job *pj, struct plena_err *err)
{
    char pp[4200];
    int rc = jpath(pp, sizeof pp, c->o->out_dir, "rss_probe.json", err);
    if (rc) return rc;
    int st = plena_campaign_result_state(c->replay_root, pj->dir_name, pj->fingerprint, NULL);
    json_t *pr =
        json_pack("{s:s,s:I,s:i,s:b}", "trace_id", pj->trace_id, "max_rss_kb",
                  (json_int_t)pj->max_rss_kb, "exit_code", pj->exit_code, "passed", st > 0);
    rc = plena_replay_json_write_file(pr, pp, err);
    json_decref(pr);
    return rc;
}

int plena_campaign_run_end(struct plena_campaign_run_ctx *c, int interrupted, struct plena_err *err)
{
    const struct plena_campaign_run_opts *o = c->o;
    struct plena_campaign_run_summary *sum = c->sum;
    progress_fill(c, 0);
    c->p.final = 1;
    write_progress(c);
    if (o->progress) o->progress(o->progress_ctx, &c->p);
    if (c->io_failed) return err && err->code ? (int)err->code : PLENA_E_OUTPUT;
    sum->interrupted = interrupted;
    if (!interrupted && !o->skip_exports) {
        struct plena_replay_export_counts ec;
        struct plena_err e2;
        plena_err_clear(&e2);
        if (plena_replay_export(c->replay_root, 0, &ec, &e2))
            plena_err_format(&e2, sum->export_error, sizeof sum->export_error);
    }
    sum->code = interrupted              ? PLENA_E_INTERRUPTED
                : sum->passed == c->s->n ? PLENA_OK
                                         : plena_status_worst(PLENA_E_FAILED, c->worst_worker);
    return write_status(o->out_dir, "run", interrupted ? "interrupted" : "finished",
                        o->determinism_state, err);
}

int plena_campaign_run(const struct plena_campaign_set *s, const struct plena_campaign_run_opts *o,
                       struct plena_campaign_run_summary *sum, struct plena_err *err)
{
    struct plena_campaign_run_ctx c;
    int rc = plena_campaign_run_begin(&c, s, o, sum, err);
    if (rc) return rc;
    struct plena_campaign_job *jobs = c.jobs;
    size_t n_queue = c.n_queue;

    /* width */
    size_t first = 0;
    int interrupted = 0;
    if (o->jobs) {
        memset(&sum->width, 0, sizeof sum->width);
        sum->width.width = o->jobs;
        snprintf(sum->width.reason, sizeof sum->width.reason, "fixed");
        sum->width.cores = plena_campaign_cores();
        sum->width.mem_available_kb = plena_campaign_mem_available_kb(o->meminfo_path);
        sum->width.rss_probe_kb = -1;
        sum->width.memory_fraction = o->memory_fraction > 0 ? o->memory_fraction : 0.70;
    } else {
        double frac = o->memory_fraction > 0 ? o->memory_fraction : 0.70;
        int64_t mem = plena_campaign_mem_available_kb(o->meminfo_path);
        int64_t rss = -1;
        if (n_queue && mem >= 0) {
            /* the probe is the costliest trace, replayed as an ordinary run */
            sum->width.width = 1;
            rc = plena_campaign_pool(&o->worker, jobs, 1, 1, o->stop, plena_campaign_run_done,
                                     plena_campaign_run_tick, &c, &interrupted, err);
            if (rc) goto out;
            first = 1;
            struct plena_campaign_job *pj = &jobs[0];
            rss = pj->finished && !pj->signal && pj->max_rss_kb > 0 ? pj->max_rss_kb : 0;
            if ((rc = plena_campaign_run_probe_record(&c, pj, err))) goto out;
        }
        plena_campaign_width_formula(plena_campaign_cores(), mem, n_queue ? rss : 1, frac,
                                     n_queue > first ? n_queue - first : 1, o->max_jobs,
                                     &sum->width);
        if (!n_queue) sum->width.rss_probe_kb = -1;
    }
    if ((rc = plena_campaign_write_width(o->out_dir, &sum->width, NULL, err))) goto out;
    if (!interrupted && first < n_queue)
        rc = plena_campaign_pool(&o->worker, jobs + first, n_queue - first, sum->width.width,
                                 o->stop, plena_campaign_run_done, plena_campaign_run_tick, &c,
                                 &interrupted, err);
    if (rc) goto out;
    rc = plena_campaign_run_end(&c, interrupted, err);
out:
    plena_campaign_run_free(&c);
    return rc;
}
