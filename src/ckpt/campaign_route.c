/* `plena campaign route` (docs/traces.md "Inside a campaign"): trace route
 * sharded by sample over worker processes (one shard file each, no two
 * writers on a file), the coverage check as sets, then trace build into
 * OUT/traces/. Every stage resumes: shards with --resume (and every shard
 * file already there as --resume-from), the build rewrites identical
 * traces. */
#include <jansson.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/route.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/proc.h"
#include "model/model.h"
#include "trace/build.h"

struct croute {
    const struct plena_campaign_route_opts *o;
    char routing[4096], bench[256];
    char **files; /* every shard file of OUT/routing (old and new) */
    size_t n_files, cap;
};

static void shard_path(const struct croute *C, unsigned i, char *buf, size_t n, const char *kind)
{
    snprintf(buf, n, "%s/%s.%s-%u-of-%u.jsonl", C->routing, C->bench, kind, i, C->o->shards);
}

static int shard_child(void *ctx, size_t i)
{
    struct croute *C = ctx;
    struct plena_route_opts o = C->o->route;
    char out[4400], fails[4400];
    shard_path(C, (unsigned)i, out, sizeof out, "shard");
    shard_path(C, (unsigned)i, fails, sizeof fails, "failures");
    o.out = out;
    o.failure_log = fails;
    o.shard_i = (uint32_t)i, o.shard_n = C->o->shards;
    o.resume = 1;
    o.keep_going = 1;
    o.quiet = 1;
    o.stop = NULL; /* the pool sends SIGTERM; the default action ends the child */
    struct plena_route_summary s;
    struct plena_err err = {0};
    int rc = plena_route_run(&o, &s, &err);
    if (rc) {
        char msg[1100];
        fprintf(stderr, "plena campaign route: shard %zu: %s\n", i,
                plena_err_format(&err, msg, sizeof msg));
    }
    return plena_status_exit_code(rc);
}

struct shard_result {
    int worst;
};

static void shard_done(void *ctx, size_t i, const struct plena_proc_exit *e)
{
    (void)i;
    struct shard_result *r = ctx;
    int code = e->exit_code < 0 ? 5 : e->exit_code;
    if (code > r->worst) r->worst = code;
}

struct pool_ctx {
    struct croute *C;
    struct shard_result r;
};

static int child_tr(void *ctx, size_t i)
{
    return shard_child(((struct pool_ctx *)ctx)->C, i);
}

static void done_tr(void *ctx, size_t i, const struct plena_proc_exit *e)
{
    shard_done(&((struct pool_ctx *)ctx)->r, i, e);
}

static int list_shards(struct croute *C, struct plena_err *err)
{
    DIR *d = opendir(C->routing);
    if (!d) return PLENA_FAIL(err, PLENA_E_OUTPUT, C->routing, "cannot open");
    struct dirent *e;
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s.shard-", C->bench);
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) || n < 6 ||
            strcmp(e->d_name + n - 6, ".jsonl"))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", C->routing, e->d_name);
        char *p = plena_strdup(path);
        if (!p || plena_grow((void **)&C->files, &C->cap, C->n_files + 1, sizeof *C->files)) {
            plena_free(p);
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, C->routing, "out of memory");
        } else {
            C->files[C->n_files++] = p;
        }
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Coverage as sets: every expected key of the selection against the rows
 * of every shard file; OUT/routing/coverage.json. */
static int coverage(struct croute *C, struct plena_campaign_route_summary *sum,
                    struct plena_err *err)
{
    struct plena_route_opts o = C->o->route;
    o.check_only = 1;
    o.shard_n = 0;
    o.resume_from = (const char *const *)C->files;
    o.n_resume_from = C->n_files;
    o.quiet = 1;
    struct plena_route_summary s;
    if (plena_route_run(&o, &s, err)) return err->code;
    sum->expected_keys = s.expected_keys;
    sum->missing_keys = s.missing_keys;
    json_t *first = json_array();
    for (uint64_t i = 0; i < s.missing_keys && i < 20; i++)
        json_array_append_new(first, json_string(s.missing_first[i]));
    json_t *cov = json_pack("{s:I,s:I,s:o,s:s}", "expected_keys", (json_int_t)s.expected_keys,
                            "missing_keys", (json_int_t)s.missing_keys, "first_missing", first,
                            "checkpoint_fingerprint", s.fingerprint);
    char path[4400];
    snprintf(path, sizeof path, "%s/coverage.json", C->routing);
    int rc = cov ? plena_json_write_file(cov, PLENA_JSON_PRETTY, path, err)
                 : PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    json_decref(cov);
    return rc;
}

static int build_traces(struct croute *C, struct plena_campaign_route_summary *sum,
                        struct plena_err *err)
{
    char cfg[4200], dir[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", C->o->route.checkpoint);
    snprintf(dir, sizeof dir, "%s/traces", C->o->out);
    struct plena_moe_model m;
    if (plena_model_resolve(cfg, &m, err)) return err->code;
    struct plena_rows_build_opts b = {
        .rows = (const char *const *)C->files,
        .n_rows = C->n_files,
        .layers = NULL,
        .mlen = C->o->mlen ? C->o->mlen : 64,
        .blen = C->o->blen ? C->o->blen : 4,
        .created_by = "plena campaign route",
    };
    struct plena_trace_docs docs = {0};
    int rc = plena_rows_build(&b, &m, &docs, err);
    if (!rc) rc = plena_mkdir_p(dir, err);
    if (!rc) rc = plena_trace_docs_write_dir(&docs, dir, 0, err);
    sum->traces = docs.n;
    plena_trace_docs_free(&docs);
    return rc;
}

int plena_campaign_route(const struct plena_campaign_route_opts *o,
                         struct plena_campaign_route_summary *sum, struct plena_err *err)
{
    memset(sum, 0, sizeof *sum);
    if (!o->shards) return PLENA_FAIL(err, PLENA_E_USAGE, "--shards", "must be at least 1");
    struct croute C = {.o = o};
    snprintf(C.routing, sizeof C.routing, "%s/routing", o->out);
    if (o->route.benchmark) {
        snprintf(C.bench, sizeof C.bench, "%s", o->route.benchmark);
    } else {
        const char *base = strrchr(o->route.inputs, '/');
        snprintf(C.bench, sizeof C.bench, "%s", base ? base + 1 : o->route.inputs);
        char *dot = strrchr(C.bench, '.');
        if (dot && dot != C.bench) *dot = 0;
    }
    plena_trace_stable_id(C.bench);
    int rc = plena_mkdir_p(C.routing, err);
    struct pool_ctx P = {.C = &C};
    if (!rc) {
        struct plena_proc_pool pool = {
            .n_jobs = o->shards,
            .width = o->jobs ? o->jobs : 1,
            .stop = o->stop,
            .child = child_tr,
            .done = done_tr,
            .ctx = &P,
        };
        int interrupted = 0;
        rc = plena_proc_pool_run(&pool, &interrupted, err);
        if (!rc && interrupted) rc = PLENA_FAIL(err, PLENA_E_INTERRUPTED, o->out, "interrupted");
        /* 1 (a sample failed) still builds what is there; worse stops */
        if (!rc && P.r.worst > 1)
            rc = PLENA_FAIL(err, plena_status_from_exit_code(P.r.worst), o->out,
                            "a route shard exited with %d (see its message above)", P.r.worst);
    }
    if (!rc) rc = list_shards(&C, err);
    if (!rc && C.n_files) qsort(C.files, C.n_files, sizeof *C.files, cmp_str);
    if (!rc) rc = coverage(&C, sum, err);
    if (!rc) rc = build_traces(&C, sum, err);
    if (!rc && (P.r.worst == 1 || sum->missing_keys))
        rc = PLENA_FAIL(err, PLENA_E_FAILED, o->out,
                        "%llu of %llu expected routing rows are missing (routing/coverage.json; "
                        "failed samples in routing/*.failures-*.jsonl)",
                        (unsigned long long)sum->missing_keys,
                        (unsigned long long)sum->expected_keys);
    for (size_t i = 0; i < C.n_files; i++)
        plena_free(C.files[i]);
    plena_free(C.files);
    return rc;
}
