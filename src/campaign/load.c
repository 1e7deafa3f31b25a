/* Campaign inputs (docs/replay.md "Campaigns"): directories,
 * trace files, trace sets and lists are read, every trace validated and
 * fingerprinted through replay's own step 1 (plena_replay_prepare), duplicate
 * trace ids refused, and the set put in canonical order. Cost order and the
 * config fingerprint live here too. It does not run anything. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "campaign/campaign.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "replay/jsonw.h"
#include "replay/jsonw.h"

void plena_campaign_set_free(struct plena_campaign_set *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++)
        plena_replay_item_free(&s->v[i].item);
    plena_free(s->v);
    for (size_t i = 0; i < s->n_invalid; i++)
        plena_free(s->invalid[i]);
    plena_free(s->invalid);
    memset(s, 0, sizeof *s);
}

static const char *wstr(const json_t *t, const char *obj, const char *key)
{
    const json_t *v = json_object_get(json_object_get(t, obj), key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t wint(const json_t *t, const char *obj, const char *key, int64_t dflt)
{
    const json_t *v = json_object_get(json_object_get(t, obj), key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static int add_invalid(struct plena_campaign_set *s, const char *src,
                       const struct plena_trace_report *r, struct plena_err *err)
{
    if (plena_grow((void **)&s->invalid, &s->cap_invalid, s->n_invalid + 1, sizeof *s->invalid))
        return PLENA_FAIL(err, PLENA_E_NOMEM, src, "out of memory");
    char line[1024];
    if (r->n_errors)
        snprintf(line, sizeof line, "%s: %s at %s: %s", src, r->errors[0].code, r->errors[0].path,
                 r->errors[0].message);
    else
        snprintf(line, sizeof line, "%s: invalid", src);
    s->invalid[s->n_invalid] = plena_strdup(line);
    if (!s->invalid[s->n_invalid]) return PLENA_FAIL(err, PLENA_E_NOMEM, src, "out of memory");
    s->n_invalid++;
    return 0;
}

/* One trace document from `src` (a file path or "SET:LINE"). */
static int add_trace(struct plena_campaign_set *s, const char *bytes, size_t len, const char *src,
                     const char *file_path, const struct plena_replay_opts *o,
                     const char *settings_sha256, int skip_invalid, struct plena_err *err)
{
    struct plena_trace_report rep;
    plena_trace_report_init(&rep);
    struct plena_replay_item it;
    int rc = plena_replay_prepare(bytes, len, src, o, settings_sha256, &it, &rep, err);
    if (rc == PLENA_E_FAILED) {
        plena_replay_item_free(&it);
        if (skip_invalid) {
            rc = add_invalid(s, src, &rep, err);
            plena_trace_report_free(&rep);
            return rc;
        }
        if (rep.n_errors)
            PLENA_FAIL(err, PLENA_E_FAILED, src, "invalid trace: %s at %s: %s (use --skip-invalid)",
                       rep.errors[0].code, rep.errors[0].path, rep.errors[0].message);
        else
            PLENA_FAIL(err, PLENA_E_FAILED, src, "invalid trace");
        plena_trace_report_free(&rep);
        return PLENA_E_FAILED;
    }
    plena_trace_report_free(&rep);
    if (rc) {
        plena_replay_item_free(&it);
        return rc;
    }
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].item.trace_id, it.trace_id)) {
            PLENA_FAIL(err, PLENA_E_INPUT, src, "duplicate trace_id '%s' (also in %s)", it.trace_id,
                       s->v[i].item.source_path);
            plena_replay_item_free(&it);
            return PLENA_E_INPUT;
        }
    if (plena_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
        plena_replay_item_free(&it);
        return PLENA_FAIL(err, PLENA_E_NOMEM, src, "out of memory");
    }
    struct plena_campaign_trace *t = &s->v[s->n++];
    memset(t, 0, sizeof *t);
    t->item = it;
    snprintf(t->path, sizeof t->path, "%s", file_path ? file_path : "");
    const json_t *j = it.trace;
    t->benchmark = wstr(j, "workload", "benchmark");
    t->sample_id = wstr(j, "workload", "sample_id");
    t->phase = wstr(j, "workload", "phase");
    t->category = wstr(j, "workload", "category");
    t->sample_index = wint(j, "workload", "sample_index", -1);
    t->decode_step = wint(j, "workload", "decode_step", -1);
    t->layer = wint(j, "model", "layer_index", 0);
    t->token_count = wint(j, "workload", "token_count", 0);
    t->top_k = wint(j, "model", "top_k", 0);
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int load_path(struct plena_campaign_set *s, const char *path, int depth,
                     const struct plena_replay_opts *o, const char *sha, int skip_invalid,
                     struct plena_err *err);

static int load_dir(struct plena_campaign_set *s, const char *dir,
                    const struct plena_replay_opts *o, const char *sha, int skip_invalid,
                    struct plena_err *err)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) return PLENA_FAIL(err, PLENA_E_INPUT, dir, "cannot read directory");
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        if (!rc && nm[0] != '.' && (ends_with(nm, ".json") || ends_with(nm, ".jsonl"))) {
            char p[4096];
            if (plena_path_join(p, sizeof p, dir, nm))
                rc = PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
            else
                rc = load_path(s, p, 1, o, sha, skip_invalid, err);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

static int load_path(struct plena_campaign_set *s, const char *path, int depth,
                     const struct plena_replay_opts *o, const char *sha, int skip_invalid,
                     struct plena_err *err)
{
    struct stat st;
    if (stat(path, &st)) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot open: no such file");
    if (S_ISDIR(st.st_mode)) {
        if (depth > 0) return 0; /* directories are scanned non-recursively */
        return load_dir(s, path, o, sha, skip_invalid, err);
    }
    char *data = NULL;
    size_t len = 0;
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    if (ends_with(path, ".json")) {
        char abs[PATH_MAX];
        const char *fp = realpath(path, abs) ? abs : path;
        rc = add_trace(s, data, len, path, fp, o, sha, skip_invalid, err);
    } else if (plena_trace_path_is_set(path, 0)) {
        size_t pos = 0;
        long line = 0;
        while (!rc && pos < len) {
            size_t e = pos;
            while (e < len && data[e] != '\n')
                e++;
            line++;
            size_t a = pos;
            while (a < e && (data[a] == ' ' || data[a] == '\t' || data[a] == '\r'))
                a++;
            if (a < e) {
                char src[1100];
                snprintf(src, sizeof src, "%s:%ld", path, line);
                rc = add_trace(s, data + pos, e - pos, src, NULL, o, sha, skip_invalid, err);
            }
            pos = e + 1;
        }
    } else {
        /* a LIST of paths, relative to the list's directory */
        char base[4096];
        snprintf(base, sizeof base, "%s", path);
        char *sl = strrchr(base, '/');
        if (sl)
            *sl = 0;
        else
            snprintf(base, sizeof base, ".");
        char *save = NULL;
        for (char *ln = strtok_r(data, "\n", &save); !rc && ln; ln = strtok_r(NULL, "\n", &save)) {
            while (*ln == ' ' || *ln == '\t')
                ln++;
            size_t l = strlen(ln);
            while (l && (ln[l - 1] == ' ' || ln[l - 1] == '\r' || ln[l - 1] == '\t'))
                ln[--l] = 0;
            if (!l || ln[0] == '#') continue;
            char p[8192];
            if (ln[0] == '/')
                snprintf(p, sizeof p, "%s", ln);
            else
                snprintf(p, sizeof p, "%s/%s", base, ln);
            if (depth > 2) {
                rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "lists nested too deeply");
                break;
            }
            rc = load_path(s, p, depth + 1, o, sha, skip_invalid, err);
        }
    }
    plena_free(data);
    return rc;
}

static int phase_rank(const char *p)
{
    if (!p) return 4;
    if (!strcmp(p, "prefill")) return 0;
    if (!strcmp(p, "decode")) return 1;
    if (!strcmp(p, "smoke")) return 2;
    return 3;
}

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}
static int cmp_i64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

int plena_campaign_cmp_canonical(const struct plena_campaign_trace *a,
                                 const struct plena_campaign_trace *b)
{
    int c;
    if ((c = cmp_str(a->benchmark, b->benchmark))) return c;
    if ((c = cmp_i64(a->sample_index, b->sample_index))) return c;
    if ((c = cmp_str(a->sample_id, b->sample_id))) return c;
    if ((c = phase_rank(a->phase) - phase_rank(b->phase))) return c;
    if ((c = cmp_i64(a->decode_step, b->decode_step))) return c;
    if ((c = cmp_i64(a->layer, b->layer))) return c;
    return strcmp(a->item.trace_id, b->item.trace_id);
}

int plena_campaign_cmp_cost(const struct plena_campaign_trace *a,
                            const struct plena_campaign_trace *b)
{
    int64_t ca = a->token_count * a->top_k, cb = b->token_count * b->top_k;
    if (ca != cb) return ca > cb ? -1 : 1;
    return strcmp(a->item.trace_id, b->item.trace_id);
}

static int qcmp_canonical(const void *x, const void *y)
{
    return plena_campaign_cmp_canonical(x, y);
}

void plena_campaign_cost_order(const struct plena_campaign_set *s, size_t *idx)
{
    for (size_t i = 0; i < s->n; i++)
        idx[i] = i;
    /* insertion sort keeps this reentrant and the lists are small */
    for (size_t i = 1; i < s->n; i++) {
        size_t x = idx[i], j = i;
        while (j > 0 && plena_campaign_cmp_cost(&s->v[idx[j - 1]], &s->v[x]) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
}

int plena_campaign_load(const char *const *inputs, size_t n_inputs,
                        const struct plena_replay_opts *o, const char *settings_sha256,
                        int skip_invalid, struct plena_campaign_set *s, struct plena_err *err)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n_inputs; i++) {
        int rc = load_path(s, inputs[i], 0, o, settings_sha256, skip_invalid, err);
        if (rc) return rc;
    }
    plena_qsort(s->v, s->n, sizeof *s->v, qcmp_canonical);
    return 0;
}

int plena_campaign_config_fingerprint(const struct plena_replay_opts *o,
                                      const char *settings_sha256, char hex[65],
                                      struct plena_err *err)
{
    return plena_replay_fingerprint(NULL, o, settings_sha256, hex, err);
}

int plena_campaign_open(const char *const *inputs, size_t n_inputs,
                        const struct plena_replay_opts *o, int skip_invalid, const char *out_dir,
                        int use_selection, struct plena_campaign_set *s, char cfp[65],
                        struct plena_err *err)
{
    char settings_sha[65];
    memset(s, 0, sizeof *s);
    if (plena_replay_settings_sha256(o->settings_path, settings_sha, err) ||
        plena_campaign_config_fingerprint(o, settings_sha, cfp, err))
        return err->code;
    if (plena_campaign_load(inputs, n_inputs, o, settings_sha, skip_invalid, s, err)) {
        plena_campaign_set_free(s);
        return err->code;
    }
    if (!use_selection) return 0;
    char p[4300];
    snprintf(p, sizeof p, "%s/selection.json", out_dir);
    struct stat st;
    if (stat(p, &st)) return 0;
    json_t *sel = NULL;
    int rc = plena_replay_json_read_file(p, &sel, err);
    if (!rc) rc = plena_campaign_apply_selection(s, sel, err);
    json_decref(sel);
    if (rc) plena_campaign_set_free(s);
    return rc;
}
