/* A replay of many inputs (`plena replay TRACE|SET... --out DIR`, spec
 * docs/replay.md "Pipeline" and "Exports"): reads every input (trace sets split into
 * their lines), prepares and validates every trace before anything is
 * written (step 1), refuses a trace_id given twice, checks the output root,
 * replays the rest in this process or on the process pool of common/proc.h
 * (--jobs N), and rebuilds the run-level exports. Findings, errors and
 * outcomes go to the caller's event callbacks (the CLI prints them); the
 * statuses combine by plena_status_worst ("the highest code wins"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/proc.h"
#include "replay/export.h"
#include "replay/replay.h"

struct input {
    char *bytes;
    size_t len;
    char source[1100];
};

struct inputs {
    struct input *v;
    size_t n, cap;
};

static int add_input(struct inputs *in, const char *data, size_t len, const char *source,
                     struct plena_err *err)
{
    if (plena_grow((void **)&in->v, &in->cap, in->n + 1, sizeof *in->v))
        return PLENA_FAIL(err, PLENA_E_NOMEM, source, "out of memory");
    struct input *x = &in->v[in->n];
    x->bytes = plena_malloc(len + 1);
    if (!x->bytes) return PLENA_FAIL(err, PLENA_E_NOMEM, source, "out of memory");
    memcpy(x->bytes, data, len);
    x->bytes[len] = 0;
    x->len = len;
    snprintf(x->source, sizeof x->source, "%s", source);
    in->n++;
    return 0;
}

static void inputs_free(struct inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        plena_free(in->v[i].bytes);
    plena_free(in->v);
}

static void report(const struct plena_replay_batch_events *ev, const struct plena_err *err)
{
    if (ev->error) ev->error(ev->ctx, err);
}

/* Reads every input; an unreadable one is reported and skipped. */
static enum plena_status read_inputs(const struct plena_replay_batch_opts *b,
                                     const struct plena_replay_batch_events *ev, struct inputs *in)
{
    enum plena_status st = PLENA_OK;
    for (size_t f = 0; f < b->n_inputs; f++) {
        const char *path = b->inputs[f];
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        int rc = plena_file_read_input(path, &data, &len, &err);
        if (!rc && !plena_trace_path_is_set(path, b->as_set)) {
            rc = add_input(in, data, len, path, &err);
        } else if (!rc) {
            struct plena_trace_lines it = {data, len, 0, 0};
            const char *text;
            size_t n;
            while (!rc && plena_trace_lines_next(&it, &text, &n)) {
                char src[1100];
                snprintf(src, sizeof src, "%s:%ld", path, it.line);
                rc = add_input(in, text, n, src, &err);
            }
        }
        plena_free(data);
        if (rc) {
            report(ev, &err);
            st = plena_status_worst(st, err.code);
        }
    }
    return st;
}

/* Step 1 for every input; *n_items prepared, distinct traces. */
static enum plena_status prepare_all(const struct plena_replay_opts *o, const char *settings_sha,
                                     const struct inputs *in,
                                     const struct plena_replay_batch_events *ev,
                                     struct plena_replay_item *items, size_t *n_items)
{
    enum plena_status st = PLENA_OK;
    *n_items = 0;
    for (size_t i = 0; i < in->n; i++) {
        struct plena_trace_report rep;
        plena_trace_report_init(&rep);
        struct plena_err err = {0};
        struct plena_replay_item *it = &items[*n_items];
        int rc = plena_replay_prepare(in->v[i].bytes, in->v[i].len, in->v[i].source, o,
                                      settings_sha, it, &rep, &err);
        if (rc == PLENA_E_FAILED) {
            if (ev->invalid) ev->invalid(ev->ctx, in->v[i].source, &rep);
            st = plena_status_worst(st, PLENA_E_FAILED);
            plena_replay_item_free(it);
        } else if (rc) {
            report(ev, &err);
            st = plena_status_worst(st, err.code);
            plena_replay_item_free(it);
        } else {
            /* trace ids are build directory names: a repeat would share one */
            int dup = 0;
            for (size_t k = 0; k < *n_items; k++)
                if (!strcmp(items[k].dir_name, it->dir_name)) dup = 1;
            if (dup) {
                if (ev->duplicate) ev->duplicate(ev->ctx, in->v[i].source, it->trace_id);
                st = plena_status_worst(st, PLENA_E_FAILED);
                plena_replay_item_free(it);
            } else {
                (*n_items)++;
            }
        }
        plena_trace_report_free(&rep);
    }
    return st;
}

/* The output root exists and takes files; leftovers of interrupted atomic
 * writes are removed. */
static int out_dir_ready(const char *dir, struct plena_err *err)
{
    if (plena_mkdir_p(dir, err)) return err->code;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.plena_write_probe.%ld", dir, (long)getpid());
    FILE *pf = fopen(probe, "w");
    if (!pf)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "output directory not writable: %s",
                          strerror(errno));
    fclose(pf);
    unlink(probe);
    plena_replay_clean_tmp(dir);
    return 0;
}

/* One trace (in this process or a worker): its status. */
static enum plena_status run_one(const struct plena_replay_item *it,
                                 const struct plena_replay_opts *o,
                                 const struct plena_replay_batch_events *ev)
{
    struct plena_err err = {0};
    struct plena_replay_outcome oc;
    if (plena_replay_run(it, o, &oc, &err)) {
        report(ev, &err);
        return plena_status_worst(err.code, oc.code);
    }
    if (ev->outcome) ev->outcome(ev->ctx, it, &oc);
    return oc.code;
}

struct pool_ctx {
    const struct plena_replay_item *items;
    const struct plena_replay_opts *o;
    const struct plena_replay_batch_events *ev;
    enum plena_status st;
};

static int pool_child(void *ctx, size_t i)
{
    struct pool_ctx *c = ctx;
    return plena_status_exit_code(run_one(&c->items[i], c->o, c->ev));
}

static void pool_done(void *ctx, size_t i, const struct plena_proc_exit *e)
{
    struct pool_ctx *c = ctx;
    (void)i;
    /* a worker killed by a signal has no decided result */
    c->st = plena_status_worst(c->st, e->exit_code < 0 ? PLENA_E_FAILED
                                                       : plena_status_from_exit_code(e->exit_code));
}

enum plena_status plena_replay_batch(const struct plena_replay_opts *o,
                                     const struct plena_replay_batch_opts *b,
                                     const struct plena_replay_batch_events *ev, int *interrupted)
{
    *interrupted = 0;
    struct plena_err err = {0};
    char settings_sha[65];
    if (plena_replay_settings_sha256(o->settings_path, settings_sha, &err)) {
        report(ev, &err);
        return err.code;
    }
    struct inputs in = {0};
    enum plena_status st = read_inputs(b, ev, &in);
    struct plena_replay_item *items = plena_calloc(in.n ? in.n : 1, sizeof *items);
    size_t n_items = 0;
    if (!items) {
        PLENA_FAIL(&err, PLENA_E_NOMEM, "replay", "out of memory");
        report(ev, &err);
        inputs_free(&in);
        return plena_status_worst(st, PLENA_E_NOMEM);
    }
    st = plena_status_worst(st, prepare_all(o, settings_sha, &in, ev, items, &n_items));
    inputs_free(&in);
    if (ev->begin) ev->begin(ev->ctx, n_items);
    if (n_items && out_dir_ready(o->out_dir, &err)) {
        report(ev, &err);
        st = plena_status_worst(st, err.code);
        goto done;
    }
    if (b->jobs <= 1) {
        /* the trace in progress stops at its next poll too (its build
         * between phases, its run as a trap), without a verdict; a worker
         * process of jobs > 1 ends on the forwarded SIGTERM instead */
        struct plena_replay_opts oi = *o;
        if (!oi.stop) oi.stop = b->stop;
        for (size_t i = 0; i < n_items && !(oi.stop && *oi.stop) && !(b->stop && *b->stop); i++)
            st = plena_status_worst(st, run_one(&items[i], &oi, ev));
        *interrupted = (oi.stop && *oi.stop) || (b->stop && *b->stop);
    } else if (n_items) {
        struct pool_ctx c = {items, o, ev, PLENA_OK};
        const struct plena_proc_pool p = {.n_jobs = n_items,
                                          .width = b->jobs,
                                          .stop = b->stop,
                                          .child = pool_child,
                                          .done = pool_done,
                                          .ctx = &c};
        if (plena_proc_pool_run(&p, interrupted, &err)) {
            report(ev, &err);
            st = plena_status_worst(st, err.code);
            *interrupted = 1; /* not every trace ran: resumable like a stop */
        }
        st = plena_status_worst(st, c.st);
    }
    if (*interrupted) {
        st = plena_status_worst(st, PLENA_E_INTERRUPTED);
        goto done;
    }
    if (n_items && !b->no_export) {
        struct plena_replay_export_counts cnt;
        if (plena_replay_export(o->out_dir, 0, &cnt, &err)) {
            report(ev, &err);
            st = plena_status_worst(st, err.code);
        }
    }
done:
    for (size_t i = 0; i < n_items; i++)
        plena_replay_item_free(&items[i]);
    plena_free(items);
    return st;
}
