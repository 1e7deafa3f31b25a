/* Serial-vs-parallel determinism gate (docs/replay.md "Campaigns"): the
 * first K distinct (benchmark, sample_id) of the ordered list, replayed into
 * freshly recreated determinism/serial/ (width 1) and determinism/parallel/
 * (width max(2, min(J, 4)) capped by the trace count), compared by canonical
 * hashes without volatile keys; determinism.json records the verdict and the
 * config_fingerprint that `campaign run` checks before starting. Skip-existing
 * is never used here (upstream's determinism passes reused existing results). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "campaign/campaign_internal.h"
#include "common/alloc.h"
#include "gen/build.h"
#include "common/fileio.h"
#include "replay/jsonw.h"
#include "replay/result.h"

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int fresh_dir(const char *path, struct plena_err *err)
{
    struct stat st;
    if (!lstat(path, &st) && nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot delete: %s", strerror(errno));
    return plena_mkdir_p(path, err);
}

/* hash of root/dir/file without volatile keys; 1 when present */
static int file_hash(const char *root, const char *dir, const char *file, char hex[65])
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s/%s", root, dir, file);
    json_t *v = NULL;
    struct plena_err e;
    plena_err_clear(&e);
    hex[0] = 0;
    if (plena_replay_json_read_file(p, &v, &e)) return 0;
    int ok = !plena_replay_json_sha256(v, 1, hex, &e);
    json_decref(v);
    return ok;
}

static void det_done(void *ctx, struct plena_campaign_job *j)
{
    (void)ctx;
    (void)j;
}

void plena_campaign_det_plan_free(struct plena_campaign_det_plan *pl)
{
    plena_free(pl->pick);
    pl->pick = NULL;
    plena_campaign_unlock(&pl->lock_fd);
}

int plena_campaign_det_begin(const struct plena_campaign_set *s,
                             const struct plena_campaign_det_opts *o,
                             struct plena_campaign_det_plan *pl, struct plena_err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->lock_fd = -1;
    unsigned K = o->samples ? o->samples : 20;
    /* subset: first K distinct (benchmark, sample_id), all their traces */
    pl->pick = plena_calloc(s->n ? s->n : 1, sizeof *pl->pick);
    size_t *firsts = plena_calloc(s->n ? s->n : 1, sizeof *firsts);
    int rc = 0;
    if (!pl->pick || !firsts) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "determinism", "out of memory");
        goto out;
    }
    size_t n_units = 0, n = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t u = 0;
        for (; u < n_units; u++) {
            const struct plena_campaign_trace *f = &s->v[firsts[u]];
            if (!strcmp(f->benchmark, s->v[i].benchmark) &&
                !strcmp(f->sample_id, s->v[i].sample_id))
                break;
        }
        if (u == n_units) {
            if (n_units == K) continue;
            firsts[n_units++] = i;
        }
        pl->pick[n++] = i;
    }
    pl->n = n;
    unsigned J = o->jobs && o->jobs < 4 ? o->jobs : 4; /* 0: --jobs auto */
    if (J < 2) J = 2;
    if (J > n) J = (unsigned)(n ? n : 1);
    pl->width = J;
    /* the gate empties determinism/: never under another coordinator */
    if ((rc = plena_mkdir_p(o->out_dir, err)) ||
        (rc = plena_campaign_lock(o->out_dir, &pl->lock_fd, err)))
        goto out;
    char base[4200];
    snprintf(base, sizeof base, "%s/determinism", o->out_dir);
    snprintf(pl->serial, sizeof pl->serial, "%s/serial", base);
    snprintf(pl->parallel, sizeof pl->parallel, "%s/parallel", base);
    if ((rc = fresh_dir(pl->serial, err)) || (rc = fresh_dir(pl->parallel, err))) goto out;
out:
    plena_free(firsts);
    if (rc) plena_campaign_det_plan_free(pl);
    return rc;
}

/* Jobs of the subset rooted at `root`, in canonical order. */
static int det_jobs(const struct plena_campaign_set *s, const struct plena_campaign_det_opts *o,
                    const struct plena_campaign_det_plan *pl, const char *root,
                    struct plena_campaign_job **jobs, struct plena_err *err)
{
    *jobs = plena_calloc(pl->n ? pl->n : 1, sizeof **jobs);
    if (!*jobs) return PLENA_FAIL(err, PLENA_E_NOMEM, "determinism", "out of memory");
    int rc = 0;
    for (size_t k = 0; k < pl->n && !rc; k++)
        rc = plena_campaign_job_init(&(*jobs)[k], &s->v[pl->pick[k]], pl->pick[k], o->out_dir, root,
                                     err);
    return rc;
}

int plena_campaign_det_serial(const struct plena_campaign_set *s,
                              const struct plena_campaign_det_opts *o,
                              const struct plena_campaign_det_plan *pl, int *interrupted,
                              struct plena_err *err)
{
    struct plena_campaign_job *jobs = NULL;
    int rc = det_jobs(s, o, pl, pl->serial, &jobs, err);
    if (!rc)
        rc = plena_campaign_pool(&o->worker, jobs, pl->n, 1, o->stop, det_done, NULL, NULL,
                                 interrupted, err);
    plena_free(jobs);
    return rc;
}

int plena_campaign_det_verdict(const struct plena_campaign_set *s,
                               const struct plena_campaign_det_opts *o,
                               const struct plena_campaign_det_plan *pl, const json_t *extra,
                               struct plena_campaign_det_summary *sum, struct plena_err *err)
{
    const char *serial = pl->serial, *parallel = pl->parallel;
    size_t n = pl->n;
    unsigned J = pl->width;
    sum->trace_count = n;
    sum->parallel_width = J;
    json_t *comps = json_array(), *rep = NULL;
    if (!comps) return PLENA_FAIL(err, PLENA_E_NOMEM, "determinism", "out of memory");
    const char *const files[] = {plena_build_file_name(PLENA_BUILD_FILE_RESULTS),
                                 plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE)};
    for (size_t k = 0; k < n; k++) {
        const struct plena_campaign_trace *t = &s->v[pl->pick[k]];
        json_t *jf = json_array();
        int all = 1;
        for (size_t f = 0; f < 2; f++) {
            char hs[65], hp[65];
            int ps = file_hash(serial, t->item.dir_name, files[f], hs);
            int pp = file_hash(parallel, t->item.dir_name, files[f], hp);
            if (f == 1 && !ps && !pp) continue; /* not profiling */
            int m = ps && pp && !strcmp(hs, hp);
            if (!m) all = 0;
            json_array_append_new(jf,
                                  json_pack("{s:s,s:o,s:o,s:b}", "file", files[f], "serial_sha256",
                                            ps ? json_string(hs) : json_null(), "parallel_sha256",
                                            pp ? json_string(hp) : json_null(), "matches", m));
        }
        /* a trace that failed its own gate in either pass fails the gate */
        int g1 = plena_campaign_result_state(serial, t->item.dir_name, t->item.fingerprint, NULL);
        int g2 = plena_campaign_result_state(parallel, t->item.dir_name, t->item.fingerprint, NULL);
        int passed_both = g1 > 0 && g2 > 0;
        if (!all || !passed_both) sum->mismatches++;
        json_array_append_new(comps,
                              json_pack("{s:s,s:o,s:b,s:b}", "trace_id", t->item.trace_id, "files",
                                        jf, "all_match", all, "gates_passed", passed_both));
    }
    snprintf(sum->status, sizeof sum->status, "%s",
             !n                ? "skipped"
             : sum->mismatches ? "failed"
                               : "passed");
    rep = json_pack("{s:i,s:s,s:s,s:I,s:I,s:O,s:I}", "schema_version", 1, "status", sum->status,
                    "config_fingerprint", o->config_fingerprint, "trace_count", (json_int_t)n,
                    "parallel_width", (json_int_t)J, "comparisons", comps, "mismatches",
                    (json_int_t)sum->mismatches);
    int rc;
    if (!rep)
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "determinism", "out of memory");
    else {
        if (extra) json_object_update(rep, (json_t *)extra);
        char p[4300];
        snprintf(p, sizeof p, "%s/determinism.json", o->out_dir);
        rc = plena_replay_json_write_file(rep, p, err);
    }
    json_decref(rep);
    json_decref(comps);
    return rc;
}

int plena_campaign_determinism(const struct plena_campaign_set *s,
                               const struct plena_campaign_det_opts *o,
                               struct plena_campaign_det_summary *sum, struct plena_err *err)
{
    memset(sum, 0, sizeof *sum);
    struct plena_campaign_det_plan pl;
    int rc = plena_campaign_det_begin(s, o, &pl, err);
    if (rc) return rc;
    sum->trace_count = pl.n;
    sum->parallel_width = pl.width;
    struct plena_campaign_job *jobs = NULL;
    int intr = 0;
    rc = plena_campaign_det_serial(s, o, &pl, &intr, err);
    if (!rc && !intr) rc = det_jobs(s, o, &pl, pl.parallel, &jobs, err);
    if (!rc && !intr)
        rc = plena_campaign_pool(&o->worker, jobs, pl.n, pl.width, o->stop, det_done, NULL, NULL,
                                 &intr, err);
    if (!rc && intr) {
        sum->interrupted = 1;
        snprintf(sum->status, sizeof sum->status, "failed");
    } else if (!rc)
        rc = plena_campaign_det_verdict(s, o, &pl, NULL, sum, err);
    plena_free(jobs);
    plena_campaign_det_plan_free(&pl);
    return rc; /* interrupted: no verdict written, the gate did not complete */
}

int plena_campaign_determinism_check(const char *out_dir, const char *config_fingerprint,
                                     struct plena_err *err)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/determinism.json", out_dir);
    json_t *v = NULL;
    struct plena_err e;
    plena_err_clear(&e);
    if (plena_replay_json_read_file(p, &v, &e)) return 2;
    const char *fp = json_string_value(json_object_get(v, "config_fingerprint"));
    const char *st = json_string_value(json_object_get(v, "status"));
    int r;
    if (!fp || strcmp(fp, config_fingerprint))
        r = 2;
    else if (st && !strcmp(st, "passed"))
        r = 0;
    else {
        PLENA_FAIL(err, PLENA_E_FAILED, p,
                   "determinism gate status is '%s' for this configuration: the campaign will not "
                   "run (rerun `plena campaign determinism` or pass --no-determinism-gate)",
                   st ? st : "(missing)");
        r = 1;
    }
    json_decref(v);
    return r;
}

enum plena_campaign_gate plena_campaign_gate_decision(const char *out_dir,
                                                      const char *config_fingerprint, int bypass,
                                                      const char **state, struct plena_err *err)
{
    *state = "passed";
    if (bypass) {
        *state = "bypassed";
        return PLENA_CAMPAIGN_GATE_BYPASSED;
    }
    switch (plena_campaign_determinism_check(out_dir, config_fingerprint, err)) {
    case 1: return PLENA_CAMPAIGN_GATE_REFUSED;
    case 2: return PLENA_CAMPAIGN_GATE_RUN_FIRST;
    default: return PLENA_CAMPAIGN_GATE_GO;
    }
}
