/* `plena trace route` (docs/traces.md "plena trace route"): inputs,
 * selection (model_key, sample ids, limit, shard by cost), the forward pass
 * per sample, one canonical row per (sample, phase, layer, decode step),
 * resume by key with byte-identical output, duplicates, the failure log and
 * the summary. Rows are appended one write + fsync each, so an interrupted
 * run leaves at most one torn line, cut away at the next --resume. */
#include <jansson.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/decoder.h"
#include "common/pool.h"
#include "ckpt/route.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/proc.h"
#include "replay/jsonw.h"
#include "trace/trace.h"

#define ROUTING_SOURCE "true_hidden_state_router_logits_topk_softmax"

int plena_route_parse_layers(const char *text, int64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long long a = strtoll(p, &end, 10), b;
        if (end == p || errno || (*p != '-' && (*p < '0' || *p > '9'))) goto bad;
        b = a;
        if (end[0] == '.' && end[1] == '.') {
            p = end + 2;
            errno = 0;
            b = strtoll(p, &end, 10);
            if (end == p || errno || (*p != '-' && (*p < '0' || *p > '9')) || b < a ||
                b - a > 65536)
                goto bad;
        }
        for (long long v = a; v <= b; v++) {
            if (plena_grow((void **)out, &cap, *n + 1, sizeof **out)) goto bad;
            (*out)[(*n)++] = v;
        }
        if (!*end) return 0;
        if (*end != ',') goto bad;
        p = end + 1;
    }
bad:
    plena_free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

/* ---- inputs ---- */

struct sample {
    char *id, *category, *benchmark, *model_key;
    uint32_t *ids;
    size_t n_ids;        /* after truncation */
    size_t input_tokens; /* before */
    uint64_t index;      /* sample_index */
};

struct inputs {
    struct sample *s;
    size_t n, cap;
};

static void inputs_free(struct inputs *in)
{
    for (size_t i = 0; i < in->n; i++) {
        struct sample *s = &in->s[i];
        plena_free(s->id), plena_free(s->category), plena_free(s->benchmark);
        plena_free(s->model_key), plena_free(s->ids);
    }
    plena_free(in->s);
    memset(in, 0, sizeof *in);
}

static char *opt_string(const json_t *o, const char *key, const char *where, int *bad,
                        struct plena_err *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return NULL;
    if (!json_is_string(v)) {
        *bad = PLENA_FAIL(err, PLENA_E_INPUT, where, "%s must be a string", key);
        return NULL;
    }
    char *s = plena_strdup(json_string_value(v));
    if (!s) *bad = PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    return s;
}

static int parse_sample(const json_t *o, const char *where, uint32_t max_tokens, struct sample *s,
                        struct plena_err *err)
{
    int bad = 0;
    if (!json_is_object(o)) return PLENA_FAIL(err, PLENA_E_INPUT, where, "expected an object");
    if (!json_is_string(json_object_get(o, "sample_id")))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "sample_id (a string) is required");
    s->id = opt_string(o, "sample_id", where, &bad, err);
    s->category = opt_string(o, "category", where, &bad, err);
    s->benchmark = opt_string(o, "benchmark", where, &bad, err);
    s->model_key = opt_string(o, "model_key", where, &bad, err);
    if (bad) return bad;
    const json_t *ids = json_object_get(o, "input_ids");
    if (!json_is_array(ids))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "input_ids (an array) is required");
    s->input_tokens = json_array_size(ids);
    s->n_ids = max_tokens && s->input_tokens > max_tokens ? max_tokens : s->input_tokens;
    s->ids = plena_calloc(s->n_ids ? s->n_ids : 1, sizeof *s->ids);
    if (!s->ids) return PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    for (size_t i = 0; i < s->input_tokens; i++) {
        const json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "input_ids[%zu] must be a non-negative integer", i);
        if (i < s->n_ids) s->ids[i] = (uint32_t)json_integer_value(v);
    }
    return 0;
}

static int cmp_sample_id(const void *a, const void *b)
{
    return strcmp((*(const struct sample *const *)a)->id, (*(const struct sample *const *)b)->id);
}

static int read_inputs(const char *path, uint32_t max_tokens, struct inputs *in,
                       struct plena_err *err)
{
    char *text;
    size_t len;
    if (plena_file_read_input(path, &text, &len, err)) return err->code;
    int rc = 0;
    uint64_t index = 0;
    struct plena_lines lines = {text, 0};
    const char *p;
    size_t n;
    while (!rc && plena_lines_next(&lines, &p, &n)) {
        size_t k = 0;
        while (k < n && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
            k++;
        if (k < n) {
            char where[512];
            snprintf(where, sizeof where, "%s:%zu", path, lines.line);
            json_error_t je;
            json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
            if (!o)
                rc = PLENA_FAIL(err, PLENA_E_INPUT, where, "column %d: %s", je.column, je.text);
            else if (plena_grow((void **)&in->s, &in->cap, in->n + 1, sizeof *in->s))
                rc = PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
            else {
                struct sample *s = &in->s[in->n++];
                memset(s, 0, sizeof *s);
                s->index = index++;
                rc = parse_sample(o, where, max_tokens, s, err);
            }
            json_decref(o);
        }
    }
    plena_free(text);
    if (rc || in->n < 2) return rc;
    /* sample_id unique */
    struct sample **order = plena_calloc(in->n, sizeof *order);
    if (!order) return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    for (size_t i = 0; i < in->n; i++)
        order[i] = &in->s[i];
    qsort(order, in->n, sizeof *order, cmp_sample_id);
    for (size_t i = 1; i < in->n && !rc; i++)
        if (!strcmp(order[i]->id, order[i - 1]->id))
            rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "sample_id '%s' appears twice", order[i]->id);
    plena_free(order);
    return rc;
}

/* ---- selection ---- */

/* §7.3 cost order: input length descending, then sample_id. */
static int by_cost(const void *a, const void *b)
{
    const struct sample *x = *(const struct sample *const *)a,
                        *y = *(const struct sample *const *)b;
    if (x->n_ids != y->n_ids) return x->n_ids > y->n_ids ? -1 : 1;
    return strcmp(x->id, y->id);
}

static int by_index(const void *a, const void *b)
{
    const struct sample *x = *(const struct sample *const *)a,
                        *y = *(const struct sample *const *)b;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int by_length(const void *a, const void *b)
{
    const struct sample *x = *(const struct sample *const *)a,
                        *y = *(const struct sample *const *)b;
    if (x->n_ids != y->n_ids) return x->n_ids < y->n_ids ? -1 : 1;
    return by_index(a, b);
}

struct run {
    const struct plena_route_opts *o;
    struct plena_ckpt ck;
    struct plena_dec_config cfg;
    struct plena_dec_weights w;
    int weights_loaded;
    const char *model, *model_key;
    char model_buf[256];
    uint32_t *layers;
    size_t n_layers;
    uint32_t decode_steps;
    struct sample **sel;
    size_t n_sel;
    /* existing rows: sorted keys with their line text */
    struct row_ref {
        char *key, *line;
    } * have;
    size_t n_have, cap_have;
    int out_fd, fail_fd;
    struct plena_pool *pool;
    struct plena_route_summary *sum;
    uint64_t tokens_done, tokens_total; /* progress */
};

static int select_samples(struct run *R, struct inputs *in, struct plena_err *err)
{
    const struct plena_route_opts *o = R->o;
    /* model_key: the option, else the inputs' one key, else the model */
    const char *key = o->model_key;
    if (!key)
        for (size_t i = 0; i < in->n; i++) {
            const char *k = in->s[i].model_key;
            if (k && key && strcmp(k, key))
                return PLENA_FAIL(err, PLENA_E_INPUT, o->inputs,
                                  "the inputs hold several model_key values ('%s', '%s'): choose "
                                  "one with --model-key",
                                  key, k);
            if (k) key = k;
        }
    R->model_key = key ? key : R->model;
    R->sel = plena_calloc(in->n ? in->n : 1, sizeof *R->sel);
    if (!R->sel) return PLENA_FAIL(err, PLENA_E_NOMEM, o->inputs, "out of memory");
    for (size_t i = 0; i < in->n; i++) {
        struct sample *s = &in->s[i];
        if (s->model_key && strcmp(s->model_key, R->model_key)) continue;
        if (o->n_sample_ids) {
            int keep = 0;
            for (size_t j = 0; j < o->n_sample_ids && !keep; j++)
                keep = !strcmp(o->sample_ids[j], s->id);
            if (!keep) continue;
        }
        if (o->limit && R->n_sel >= o->limit) break;
        R->sel[R->n_sel++] = s;
    }
    if (o->shard_n) {
        qsort(R->sel, R->n_sel, sizeof *R->sel, by_cost);
        size_t m = 0;
        for (size_t p = 0; p < R->n_sel; p++)
            if (p % o->shard_n == o->shard_i) R->sel[m++] = R->sel[p];
        R->n_sel = m;
    }
    qsort(R->sel, R->n_sel, sizeof *R->sel, o->sort_by_length ? by_length : by_index);
    return 0;
}

static int resolve_layers(struct run *R, struct plena_err *err)
{
    const struct plena_route_opts *o = R->o;
    const int64_t zero = 0, *given = o->n_layers ? o->layers : &zero;
    size_t n = o->n_layers ? o->n_layers : 1;
    const int64_t L = R->cfg.n_layers;
    R->layers = plena_calloc(n, sizeof *R->layers);
    if (!R->layers) return PLENA_FAIL(err, PLENA_E_NOMEM, "--layers", "out of memory");
    for (size_t i = 0; i < n; i++) {
        int64_t l = given[i] < 0 ? L + given[i] : given[i];
        if (l < 0 || l >= L)
            return PLENA_FAIL(err, PLENA_E_USAGE, "--layers",
                              "layer %lld is out of range for %lld layers (0..%lld, or -%lld..-1)",
                              (long long)given[i], (long long)L, (long long)L - 1, (long long)L);
        if (R->cfg.dense[l])
            return PLENA_FAIL(err, PLENA_E_USAGE, "--layers",
                              "layer %lld is a dense layer (no router to trace)", (long long)l);
        R->layers[i] = (uint32_t)l;
    }
    /* sorted, each once: rows are written by layer */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && R->layers[j - 1] > R->layers[j]; j--) {
            uint32_t t = R->layers[j];
            R->layers[j] = R->layers[j - 1], R->layers[j - 1] = t;
        }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!m || R->layers[m - 1] != R->layers[i]) R->layers[m++] = R->layers[i];
    R->n_layers = m;
    return 0;
}

/* ---- row keys and existing rows ---- */

static void row_key(char *buf, size_t n, const char *sample_id, int decode, uint32_t layer,
                    uint32_t step)
{
    if (decode)
        snprintf(buf, n,
                 "%s\x1f"
                 "decode\x1f%u\x1f%u",
                 sample_id, layer, step);
    else
        snprintf(buf, n,
                 "%s\x1f"
                 "prefill\x1f%u\x1fnull",
                 sample_id, layer);
}

static int cmp_ref(const void *a, const void *b)
{
    return strcmp(((const struct row_ref *)a)->key, ((const struct row_ref *)b)->key);
}

static const struct row_ref *find_row(const struct run *R, const char *key)
{
    struct row_ref k = {.key = (char *)key};
    return R->n_have ? bsearch(&k, R->have, R->n_have, sizeof k, cmp_ref) : NULL;
}

static int add_existing(struct run *R, const char *line, size_t n, const char *where,
                        struct plena_err *err)
{
    json_error_t je;
    json_t *o = json_loadb(line, n, 0, &je);
    if (!o) return PLENA_FAIL(err, PLENA_E_INPUT, where, "column %d: %s", je.column, je.text);
    const char *sid = json_string_value(json_object_get(o, "sample_id"));
    const char *phase = json_string_value(json_object_get(o, "phase"));
    const char *fp = json_string_value(json_object_get(o, "checkpoint_fingerprint"));
    const char *act = json_string_value(json_object_get(o, "act"));
    const json_t *layer = json_object_get(o, "layer"), *step = json_object_get(o, "decode_step");
    int rc = 0;
    const char *want_act = R->o->act_bf16 ? "bf16" : "f32";
    if (!sid || !phase || !json_is_integer(layer) ||
        (strcmp(phase, "prefill") && strcmp(phase, "decode")))
        rc = PLENA_FAIL(err, PLENA_E_INPUT, where, "not a routing row (sample_id, phase, layer)");
    else if (!fp || strcmp(fp, R->ck.fingerprint))
        rc = PLENA_FAIL(err, PLENA_E_INPUT, where,
                        "row of checkpoint_fingerprint %s, this run's checkpoint is %s (rows "
                        "of different checkpoints are never mixed)",
                        fp ? fp : "(none)", R->ck.fingerprint);
    else if (!act || strcmp(act, want_act))
        rc = PLENA_FAIL(err, PLENA_E_INPUT, where,
                        "row of act %s, this run uses --act %s (never mixed)", act ? act : "(none)",
                        want_act);
    char key[600];
    if (!rc) {
        int decode = !strcmp(phase, "decode");
        row_key(key, sizeof key, sid, decode, (uint32_t)json_integer_value(layer),
                (uint32_t)(decode ? json_integer_value(step) : 0));
        if (plena_grow((void **)&R->have, &R->cap_have, R->n_have + 1, sizeof *R->have))
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    }
    if (!rc) {
        struct row_ref *r = &R->have[R->n_have];
        r->key = plena_strdup(key);
        r->line = plena_malloc(n + 1);
        if (!r->key || !r->line) {
            plena_free(r->key), plena_free(r->line);
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
        } else {
            memcpy(r->line, line, n);
            r->line[n] = 0;
            R->n_have++;
        }
    }
    json_decref(o);
    return rc;
}

static int read_rows(struct run *R, const char *path, struct plena_err *err)
{
    char *text;
    size_t len;
    if (plena_file_read_all(path, &text, &len, err)) return err->code;
    size_t line = 0;
    int rc = 0;
    for (char *p = text; *p && !rc;) {
        char *nl = strchr(p, '\n');
        if (!nl) break; /* a torn tail (of a --resume-from file) is not a row */
        line++;
        char where[512];
        snprintf(where, sizeof where, "%s:%zu", path, line);
        if (nl > p) rc = add_existing(R, p, (size_t)(nl - p), where, err);
        p = nl + 1;
    }
    plena_free(text);
    return rc;
}

/* Sorts the existing rows; a key twice: identical -> one kept (a warning),
 * different -> a determinism violation. */
static int dedup_rows(struct run *R, struct plena_err *err)
{
    if (R->n_have) qsort(R->have, R->n_have, sizeof *R->have, cmp_ref);
    size_t m = 0;
    for (size_t i = 0; i < R->n_have; i++) {
        if (m && !strcmp(R->have[m - 1].key, R->have[i].key)) {
            int same = !strcmp(R->have[m - 1].line, R->have[i].line);
            char k[600];
            snprintf(k, sizeof k, "%s", R->have[i].key);
            for (char *c = k; *c; c++)
                if (*c == '\x1f') *c = ' ';
            plena_free(R->have[i].key), plena_free(R->have[i].line);
            if (!same) {
                for (size_t j = i + 1; j < R->n_have; j++)
                    plena_free(R->have[j].key), plena_free(R->have[j].line);
                R->n_have = m;
                return PLENA_FAIL(err, PLENA_E_FAILED, "--resume",
                                  "row key (%s) present twice with different content (a "
                                  "determinism violation)",
                                  k);
            }
            if (!R->o->quiet)
                fprintf(stderr,
                        "plena trace route: warning: row key (%s) present twice with "
                        "identical content\n",
                        k);
            continue;
        }
        R->have[m++] = R->have[i];
    }
    R->n_have = m;
    return 0;
}

/* ---- rows ---- */

/* check_only: counts the expected keys and records the first missing ones */
static void note_missing(struct run *R, const char *key)
{
    struct plena_route_summary *sm = R->sum;
    sm->expected_keys++;
    if (find_row(R, key)) return;
    if (sm->missing_keys < 20) {
        char *out = sm->missing_first[sm->missing_keys];
        snprintf(out, sizeof sm->missing_first[0], "%s", key);
        for (char *c = out; *c; c++)
            if (*c == '\x1f') *c = ' ';
    }
    sm->missing_keys++;
}

static void count_expected(struct run *R, const struct sample *s)
{
    char key[600];
    for (size_t i = 0; i < R->n_layers; i++) {
        if (R->o->phases & PLENA_ROUTE_PREFILL) {
            row_key(key, sizeof key, s->id, 0, R->layers[i], 0);
            note_missing(R, key);
        }
        for (uint32_t st = 1; (R->o->phases & PLENA_ROUTE_DECODE) && st <= R->decode_steps; st++) {
            row_key(key, sizeof key, s->id, 1, R->layers[i], st);
            note_missing(R, key);
        }
    }
}

static int expected_present(const struct run *R, const struct sample *s)
{
    char key[600];
    for (size_t i = 0; i < R->n_layers; i++) {
        if (R->o->phases & PLENA_ROUTE_PREFILL) {
            row_key(key, sizeof key, s->id, 0, R->layers[i], 0);
            if (!find_row(R, key)) return 0;
        }
        for (uint32_t st = 1; (R->o->phases & PLENA_ROUTE_DECODE) && st <= R->decode_steps; st++) {
            row_key(key, sizeof key, s->id, 1, R->layers[i], st);
            if (!find_row(R, key)) return 0;
        }
    }
    return 1;
}

/* One row's JSON (docs/traces.md "routing rows"); ids/w are [tokens][K]. */
static json_t *row_json(const struct run *R, const struct sample *s, int decode, uint32_t layer,
                        uint32_t step, uint32_t step_token, size_t tokens, const uint32_t *ids,
                        const float *w)
{
    const uint32_t E = R->cfg.n_experts, K = R->cfg.top_k;
    json_t *o = json_object(), *routes = json_array(), *weights = json_array(),
           *counts = json_array();
    int64_t *cnt = plena_calloc(E, sizeof *cnt);
    if (!o || !routes || !weights || !counts || !cnt) goto nomem;
    for (size_t t = 0; t < tokens; t++) {
        json_t *r = json_array(), *rw = json_array();
        for (uint32_t k = 0; k < K; k++) {
            json_array_append_new(r, json_integer(ids[t * K + k]));
            json_array_append_new(rw, json_real((double)w[t * K + k]));
            cnt[ids[t * K + k]]++;
        }
        json_array_append_new(routes, r);
        json_array_append_new(weights, rw);
    }
    for (uint32_t e = 0; e < E; e++)
        json_array_append_new(counts, json_integer(cnt[e]));
    struct plena_trace_stats st;
    plena_trace_stats_compute(cnt, E, &st, NULL);
    plena_free(cnt);
    const char *bench = R->o->benchmark ? R->o->benchmark : s->benchmark;
    char stem[256];
    if (!bench) {
        const char *base = strrchr(R->o->inputs, '/');
        snprintf(stem, sizeof stem, "%s", base ? base + 1 : R->o->inputs);
        char *dot = strrchr(stem, '.');
        if (dot && dot != stem) *dot = 0;
        bench = stem;
    }
    json_object_set_new(o, "row_schema_version", json_integer(1));
    json_object_set_new(o, "benchmark", json_string(bench));
    json_object_set_new(o, "model_key", json_string(R->model_key));
    json_object_set_new(o, "model", json_string(R->model));
    json_object_set_new(o, "sample_id", json_string(s->id));
    json_object_set_new(o, "sample_index", json_integer((json_int_t)s->index));
    json_object_set_new(o, "category", json_string(s->category ? s->category : "uncategorized"));
    json_object_set_new(o, "phase", json_string(decode ? "decode" : "prefill"));
    json_object_set_new(o, "layer", json_integer(layer));
    json_object_set_new(o, "decode_step", decode ? json_integer(step) : json_null());
    json_object_set_new(o, "step_token_id", decode ? json_integer(step_token) : json_null());
    json_object_set_new(o, "input_tokens", json_integer((json_int_t)s->input_tokens));
    json_object_set_new(o, "tokens", json_integer((json_int_t)tokens));
    json_object_set_new(o, "pair_count", json_integer((json_int_t)(tokens * K)));
    json_object_set_new(o, "routing_source",
                        json_string(decode ? ROUTING_SOURCE "_greedy_decode" : ROUTING_SOURCE));
    json_object_set_new(o, "weight_source", json_string(plena_dec_weight_source(&R->cfg)));
    json_object_set_new(o, "act", json_string(R->o->act_bf16 ? "bf16" : "f32"));
    json_object_set_new(o, "checkpoint_fingerprint", json_string(R->ck.fingerprint));
    json_object_set_new(o, "counts", counts);
    json_object_set_new(o, "unique_experts", json_integer((json_int_t)st.n_active));
    json_object_set_new(o, "zero_experts", json_integer((json_int_t)st.n_zero));
    json_object_set_new(o, "tail_lt4_experts", json_integer((json_int_t)st.n_tail));
    json_object_set_new(o, "hot_ge16_experts", json_integer((json_int_t)st.n_hot));
    json_object_set_new(o, "gini", json_real(st.gini));
    json_object_set_new(o, "routes", routes);
    json_object_set_new(o, "route_weights", weights);
    return o;
nomem:
    json_decref(o), json_decref(routes), json_decref(weights), json_decref(counts);
    plena_free(cnt);
    return NULL;
}

static int write_line(int fd, const char *text, size_t n, const char *path, struct plena_err *err)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, text + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "write failed: %s", strerror(errno));
        done += (size_t)w;
    }
    if (fsync(fd))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "fsync failed: %s", strerror(errno));
    return 0;
}

/* Writes a computed row unless its key exists (then it must be identical). */
static int emit(struct run *R, json_t *row, const char *key, struct plena_err *err)
{
    if (!row) return PLENA_FAIL(err, PLENA_E_NOMEM, R->o->out, "out of memory");
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = plena_json_dump(&b, row, PLENA_JSON_ROUTE_WEIGHTS_F32) ? PLENA_E_NOMEM : 0;
    json_decref(row);
    if (rc) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, R->o->out, "out of memory");
    }
    const struct row_ref *have = find_row(R, key);
    if (have) {
        if (strlen(have->line) != b.len || memcmp(have->line, b.data, b.len))
            rc = PLENA_FAIL(err, PLENA_E_FAILED, R->o->out,
                            "an existing row differs from the recomputed one (a determinism "
                            "violation): %.200s",
                            have->line);
    } else {
        plena_buf_append(&b, "\n", 1);
        rc = b.failed ? PLENA_FAIL(err, PLENA_E_NOMEM, R->o->out, "out of memory")
                      : write_line(R->out_fd, b.data, b.len, R->o->out, err);
        if (!rc) R->sum->rows_written++;
    }
    plena_buf_free(&b);
    return rc;
}

static void progress_tokens(void *ctx, uint32_t n)
{
    struct run *R = ctx;
    R->tokens_done += n;
    R->o->on_progress(R->o->on_progress_ctx, R->tokens_done, R->tokens_total);
}

/* The forward pass of one sample and its rows in §4.4 order. */
static int run_sample(struct run *R, const struct sample *s, struct plena_err *err)
{
    const uint32_t K = R->cfg.top_k;
    const int decode = (R->o->phases & PLENA_ROUTE_DECODE) != 0;
    const uint32_t steps = decode ? R->decode_steps : 0;
    const size_t S = s->n_ids;
    struct plena_dec_state st;
    if (plena_dec_state_init(&st, &R->w, R->w.n_loaded, (uint32_t)(S + steps), R->o->act_bf16, err))
        return err->code;
    st.pool = R->pool;
    if (R->o->on_progress) st.on_tokens = progress_tokens, st.on_tokens_ctx = R;
    /* [model layer][token][K] for the prefill, [step][layer][K] for decode */
    const size_t L = R->w.n_loaded;
    uint32_t *pids = plena_calloc((L * S + 1) * K, sizeof *pids);
    float *pw = plena_calloc((L * S + 1) * K, sizeof *pw);
    uint32_t *dids = plena_calloc(((size_t)steps * R->n_layers + 1) * K, sizeof *dids);
    float *dw = plena_calloc(((size_t)steps * R->n_layers + 1) * K, sizeof *dw);
    uint32_t *dtok = plena_calloc(steps + 1, sizeof *dtok);
    int rc = !pids || !pw || !dids || !dw || !dtok
                 ? PLENA_FAIL(err, PLENA_E_NOMEM, s->id, "out of memory")
                 : 0;
    uint32_t next = 0;
    if (!rc && R->o->stop && *R->o->stop)
        rc = PLENA_FAIL(err, PLENA_E_INTERRUPTED, s->id, "interrupted");
    if (!rc) rc = plena_dec_prefill(&st, s->ids, (uint32_t)S, pids, pw, decode, &next, err);
    for (uint32_t d = 0; d < steps && !rc; d++) {
        if (R->o->stop && *R->o->stop) {
            rc = PLENA_FAIL(err, PLENA_E_INTERRUPTED, s->id, "interrupted");
            break;
        }
        dtok[d] = next;
        rc = plena_dec_step(&st, next, 1, &next, err);
        if (!rc && st.on_tokens) st.on_tokens(R, 1);
        for (size_t i = 0; i < R->n_layers && !rc; i++) {
            memcpy(dids + (d * R->n_layers + i) * K, st.ids + (size_t)R->layers[i] * K,
                   K * sizeof *dids);
            memcpy(dw + (d * R->n_layers + i) * K, st.rw + (size_t)R->layers[i] * K,
                   K * sizeof *dw);
        }
    }
    char key[600];
    for (size_t i = 0; i < R->n_layers && !rc && (R->o->phases & PLENA_ROUTE_PREFILL); i++) {
        row_key(key, sizeof key, s->id, 0, R->layers[i], 0);
        const size_t at = (size_t)R->layers[i] * S * K;
        rc = emit(R, row_json(R, s, 0, R->layers[i], 0, 0, S, pids + at, pw + at), key, err);
    }
    for (uint32_t d = 0; d < steps && !rc; d++)
        for (size_t i = 0; i < R->n_layers && !rc; i++) {
            const size_t at = (d * R->n_layers + i) * K;
            row_key(key, sizeof key, s->id, 1, R->layers[i], d + 1);
            rc = emit(R, row_json(R, s, 1, R->layers[i], d + 1, dtok[d], 1, dids + at, dw + at),
                      key, err);
        }
    if (!rc) R->sum->prefill_tokens += S;
    plena_free(pids), plena_free(pw), plena_free(dids), plena_free(dw), plena_free(dtok);
    plena_dec_state_free(&st);
    return rc;
}

static int log_failure(struct run *R, const struct sample *s, const struct plena_err *e,
                       double seconds, struct plena_err *err)
{
    char msg[1100];
    plena_err_format(e, msg, sizeof msg);
    if (!R->o->quiet) fprintf(stderr, "plena trace route: sample %s: %s\n", s->id, msg);
    if (R->fail_fd < 0) return 0;
    json_t *o =
        json_pack("{s:s,s:I,s:s,s:s,s:f}", "sample_id", s->id, "sample_index", (json_int_t)s->index,
                  "code", plena_status_name(e->code), "message", msg, "seconds", seconds);
    if (!o) return PLENA_FAIL(err, PLENA_E_NOMEM, R->o->failure_log, "out of memory");
    int rc = plena_jsonl_append(R->fail_fd, o, R->o->failure_log, err);
    json_decref(o);
    return rc;
}

/* Samples in output order; failures logged; stops at the first unless
 * --keep-going. */
static int run_all(struct run *R, struct plena_err *err)
{
    int failed = 0;
    const uint64_t steps = (R->o->phases & PLENA_ROUTE_DECODE) ? R->decode_steps : 0;
    if (R->o->on_progress && !R->o->check_only) {
        for (size_t i = 0; i < R->n_sel; i++)
            if (R->sel[i]->n_ids && !expected_present(R, R->sel[i]))
                R->tokens_total += R->sel[i]->n_ids + steps;
        R->o->on_progress(R->o->on_progress_ctx, 0, R->tokens_total);
    }
    for (size_t i = 0; i < R->n_sel; i++) {
        const struct sample *s = R->sel[i];
        if (R->o->check_only) {
            if (s->n_ids) count_expected(R, s);
            continue;
        }
        if (R->o->stop && *R->o->stop)
            return PLENA_FAIL(err, PLENA_E_INTERRUPTED, R->o->out, "interrupted");
        if (expected_present(R, s)) {
            R->sum->samples_already_complete++;
            continue;
        }
        double t0 = plena_proc_now();
        struct plena_err e = {0};
        int rc = s->n_ids ? run_sample(R, s, &e) : 0;
        if (!s->n_ids) {
            if (!R->o->quiet)
                fprintf(stderr, "plena trace route: sample %s: no input tokens, skipped\n", s->id);
            continue;
        }
        if (rc == PLENA_E_OUTPUT || rc == PLENA_E_NOMEM || rc == PLENA_E_INTERNAL ||
            rc == PLENA_E_INTERRUPTED || (rc == PLENA_E_FAILED && strstr(e.msg, "determinism"))) {
            *err = e;
            return rc;
        }
        if (rc) {
            R->sum->samples_failed++;
            if (!failed) *err = e;
            failed = 1;
            if (log_failure(R, s, &e, plena_proc_now() - t0, err)) return err->code;
            if (!R->o->keep_going) {
                err->code = PLENA_E_FAILED; /* a failed sample exits 1, whatever its cause */
                return PLENA_E_FAILED;
            }
            continue;
        }
        R->sum->samples_processed++;
    }
    if (failed) {
        err->code = PLENA_E_FAILED;
        return PLENA_E_FAILED;
    }
    return 0;
}

static int write_summary(const struct run *R, double seconds, struct plena_err *err)
{
    const struct plena_route_summary *s = R->sum;
    json_t *layers = json_array();
    for (size_t i = 0; i < R->n_layers; i++)
        json_array_append_new(layers, json_integer(R->layers[i]));
    const int p = R->o->phases;
    json_t *o =
        json_pack("{s:i,s:s,s:s?,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:s,s:I,s:f}",
                  "schema_version", 1, "output", R->o->out, "benchmark", R->o->benchmark,
                  "model_key", R->model_key, "checkpoint_fingerprint", R->ck.fingerprint,
                  "samples_selected", (json_int_t)s->samples_selected, "samples_already_complete",
                  (json_int_t)s->samples_already_complete, "samples_processed",
                  (json_int_t)s->samples_processed, "samples_failed", (json_int_t)s->samples_failed,
                  "rows_written", (json_int_t)s->rows_written, "prefill_tokens",
                  (json_int_t)s->prefill_tokens, "layers", layers, "phases",
                  p == PLENA_ROUTE_BOTH     ? "both"
                  : p == PLENA_ROUTE_DECODE ? "decode"
                                            : "prefill",
                  "decode_steps", (json_int_t)(p & PLENA_ROUTE_DECODE ? R->decode_steps : 0),
                  "host_seconds", seconds);
    if (!o) return PLENA_FAIL(err, PLENA_E_NOMEM, R->o->summary_out, "out of memory");
    int rc = plena_json_write_file(o, PLENA_JSON_PRETTY, R->o->summary_out, err);
    json_decref(o);
    return rc;
}

/* The output: a non-empty file needs --resume or --overwrite. */
static int open_output(struct run *R, struct plena_err *err)
{
    const struct plena_route_opts *o = R->o;
    struct stat st;
    int exists = !stat(o->out, &st) && st.st_size > 0;
    if (exists && !o->resume && !o->overwrite)
        return PLENA_FAIL(err, PLENA_E_USAGE, o->out,
                          "the output exists and is not empty: give --resume to continue it or "
                          "--overwrite to replace it");
    if (exists && o->overwrite && truncate(o->out, 0))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, o->out, "cannot truncate: %s", strerror(errno));
    size_t torn = 0;
    if (plena_jsonl_open(o->out, &R->out_fd, &torn, err)) return err->code;
    if (torn && !o->quiet)
        fprintf(stderr, "plena trace route: %s: cut a torn last line of %zu bytes\n", o->out, torn);
    int rc = 0;
    if (o->resume) rc = read_rows(R, o->out, err);
    for (size_t i = 0; i < o->n_resume_from && !rc; i++)
        rc = read_rows(R, o->resume_from[i], err);
    if (!rc) rc = dedup_rows(R, err);
    if (!rc && o->failure_log) rc = plena_jsonl_open(o->failure_log, &R->fail_fd, NULL, err);
    return rc;
}

static int prepare(struct run *R, struct inputs *in, struct plena_err *err)
{
    const struct plena_route_opts *o = R->o;
    if (plena_ckpt_open(o->checkpoint, &R->ck, err)) return err->code;
    if (plena_dec_config_parse(R->ck.config_text, R->ck.config_len, "config.json", &R->cfg, err))
        return err->code;
    if (o->model_name) {
        R->model = o->model_name;
    } else {
        char d[4096];
        snprintf(d, sizeof d, "%s", o->checkpoint);
        size_t n = strlen(d);
        while (n > 1 && d[n - 1] == '/')
            d[--n] = 0;
        const char *base = strrchr(d, '/');
        snprintf(R->model_buf, sizeof R->model_buf, "%s", base ? base + 1 : d);
        R->model = R->model_buf;
    }
    R->decode_steps = o->decode_steps ? o->decode_steps : 1;
    if (resolve_layers(R, err)) return err->code;
    if (read_inputs(o->inputs, o->max_input_tokens, in, err)) return err->code;
    if (select_samples(R, in, err)) return err->code;
    R->sum->samples_selected = R->n_sel;
    memcpy(R->sum->fingerprint, R->ck.fingerprint, sizeof R->sum->fingerprint);
    /* layers above the deepest requested one only matter for decode */
    if (o->check_only) {
        int rc = 0;
        for (size_t i = 0; i < o->n_resume_from && !rc; i++)
            rc = read_rows(R, o->resume_from[i], err);
        return rc ? rc : dedup_rows(R, err);
    }
    const int decode = (o->phases & PLENA_ROUTE_DECODE) != 0;
    uint32_t n_run = decode ? R->cfg.n_layers : R->layers[R->n_layers - 1] + 1;
    if (o->threads > 1 && !(R->pool = plena_pool_new(o->threads)))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "--threads", "out of memory");
    R->weights_loaded = 1; /* freed also when the load fails half-way */
    if (plena_dec_weights_load(&R->ck, &R->cfg, n_run, decode, &R->w, err)) return err->code;
    return open_output(R, err);
}

int plena_route_run(const struct plena_route_opts *o, struct plena_route_summary *sum,
                    struct plena_err *err)
{
    double t0 = plena_proc_now();
    memset(sum, 0, sizeof *sum);
    if (o->shard_n && o->shard_i >= o->shard_n)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--shard", "shard %u of %u: expected i < N",
                          o->shard_i, o->shard_n);
    if (o->resume && o->overwrite)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--overwrite", "cannot be combined with --resume");
    struct run R = {.o = o, .out_fd = -1, .fail_fd = -1, .sum = sum};
    struct inputs in = {0};
    int rc = prepare(&R, &in, err);
    if (!rc) rc = run_all(&R, err);
    if ((!rc || rc == PLENA_E_FAILED) && o->summary_out && !o->check_only) {
        struct plena_err e2 = {0};
        int src = write_summary(&R, plena_proc_now() - t0, &e2);
        if (src && !rc) {
            *err = e2;
            rc = src;
        }
    }
    if (R.out_fd >= 0) close(R.out_fd);
    if (R.fail_fd >= 0) close(R.fail_fd);
    for (size_t i = 0; i < R.n_have; i++)
        plena_free(R.have[i].key), plena_free(R.have[i].line);
    plena_free(R.have);
    plena_free(R.sel);
    plena_free(R.layers);
    inputs_free(&in);
    if (R.weights_loaded) plena_dec_weights_free(&R.w);
    plena_pool_free(R.pool);
    plena_ckpt_close(&R.ck);
    return rc;
}
