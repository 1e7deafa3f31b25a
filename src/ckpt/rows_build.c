/* `plena trace build` (docs/traces.md "Building traces from rows"): routing
 * rows of one or more files (shards) merged by key, cross-checked against
 * the model of the checkpoint's config.json, one validated trace per row. */
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/route.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "model/model.h"
#include "trace/build.h"

struct row {
    json_t *o;
    char key[600];
    const char *file; /* base name */
    size_t line;
};

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const struct row *)a)->key, ((const struct row *)b)->key);
}

static int keep_row(const struct plena_rows_build_opts *o, const json_t *r, int64_t layer,
                    int decode)
{
    if (o->phases && !(o->phases & (decode ? PLENA_ROUTE_DECODE : PLENA_ROUTE_PREFILL))) return 0;
    int keep = !o->n_layers;
    for (size_t i = 0; i < o->n_layers && !keep; i++)
        keep = o->layers[i] == layer;
    if (!keep) return 0;
    keep = !o->n_sample_ids;
    const char *sid = json_string_value(json_object_get(r, "sample_id"));
    for (size_t i = 0; i < o->n_sample_ids && !keep; i++)
        keep = !strcmp(o->sample_ids[i], sid);
    return keep;
}

/* Reads a rows file; rows passing the filters are appended to *v. */
static int read_file(const struct plena_rows_build_opts *o, const char *path, struct row **v,
                     size_t *n, size_t *cap, struct plena_err *err)
{
    char *text;
    size_t len;
    if (plena_file_read_input(path, &text, &len, err)) return err->code;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int rc = 0;
    struct plena_lines lines = {text, 0};
    const char *p;
    size_t m;
    while (!rc && plena_lines_next(&lines, &p, &m)) {
        char where[600];
        snprintf(where, sizeof where, "%s:%zu", path, lines.line);
        if (m) {
            json_error_t je;
            json_t *r = json_loadb(p, m, JSON_REJECT_DUPLICATES, &je);
            const char *sid = r ? json_string_value(json_object_get(r, "sample_id")) : NULL;
            const char *phase = r ? json_string_value(json_object_get(r, "phase")) : NULL;
            const json_t *layer = json_object_get(r, "layer");
            if (!r)
                rc = PLENA_FAIL(err, PLENA_E_INPUT, where, "column %d: %s", je.column, je.text);
            else if (!sid || !phase || !json_is_integer(layer) ||
                     (strcmp(phase, "prefill") && strcmp(phase, "decode")))
                rc = PLENA_FAIL(err, PLENA_E_INPUT, where,
                                "not a routing row (sample_id, phase, layer)");
            else if (keep_row(o, r, json_integer_value(layer), !strcmp(phase, "decode"))) {
                if (plena_grow((void **)v, cap, *n + 1, sizeof **v)) {
                    rc = PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
                } else {
                    struct row *w = &(*v)[(*n)++];
                    w->o = json_incref(r);
                    w->file = base;
                    w->line = lines.line;
                    snprintf(w->key, sizeof w->key, "%s\x1f%s\x1f%lld\x1f%lld", sid, phase,
                             (long long)json_integer_value(layer),
                             (long long)json_integer_value(json_object_get(r, "decode_step")));
                }
            }
            json_decref(r);
        }
    }
    plena_free(text);
    return rc;
}

static const char *str(const json_t *r, const char *k)
{
    const char *s = json_string_value(json_object_get(r, k));
    return s ? s : "";
}

/* Routes and weights of a row into ids/w ([tokens][K]), every width and id
 * checked against the model. */
static int row_routing(const struct plena_rows_build_opts *o, const json_t *r, uint32_t E,
                       uint32_t K, const char *where, int64_t **ids, float **w, uint32_t *tokens,
                       struct plena_err *err)
{
    const json_t *counts = json_object_get(r, "counts"), *routes = json_object_get(r, "routes"),
                 *weights = json_object_get(r, "route_weights");
    if (!json_is_array(counts) || json_array_size(counts) != E)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "counts has %zu entries, the model has %u experts",
                          json_array_size(counts), E);
    if (!json_is_array(routes) || !json_array_size(routes))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "routes must be a non-empty array");
    if (!weights && !o->allow_uniform)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "the row has no route_weights (--allow-uniform-weights builds "
                          "timing-only traces)");
    size_t T = json_array_size(routes);
    if (weights && (!json_is_array(weights) || json_array_size(weights) != T))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "route_weights must have %zu rows", T);
    *ids = plena_calloc(T * K, sizeof **ids);
    *w = weights ? plena_calloc(T * K, sizeof **w) : NULL;
    if (!*ids || (weights && !*w)) return PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    for (size_t t = 0; t < T; t++) {
        const json_t *a = json_array_get(routes, t), *b = json_array_get(weights, t);
        if (!json_is_array(a) || json_array_size(a) != K || (weights && json_array_size(b) != K))
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "routes[%zu] must have top_k = %u entries (and its route_weights)", t,
                              K);
        for (uint32_t k = 0; k < K; k++) {
            (*ids)[t * K + k] = json_integer_value(json_array_get(a, k));
            if (weights) (*w)[t * K + k] = (float)json_number_value(json_array_get(b, k));
        }
    }
    *tokens = (uint32_t)T;
    return 0;
}

static int build_one(const struct plena_rows_build_opts *o, const struct plena_moe_model *m,
                     const struct row *row, struct plena_trace_docs *docs, struct plena_err *err)
{
    char where[700];
    snprintf(where, sizeof where, "%s:%zu", row->file, row->line);
    const json_t *r = row->o;
    int64_t *ids = NULL;
    float *w = NULL;
    uint32_t T = 0;
    int rc = row_routing(o, r, m->num_experts, m->top_k, where, &ids, &w, &T, err);
    const int decode = !strcmp(str(r, "phase"), "decode");
    const json_int_t layer = json_integer_value(json_object_get(r, "layer")),
                     step = json_integer_value(json_object_get(r, "decode_step"));
    char id[700];
    if (decode)
        snprintf(id, sizeof id, "%s_%s_%s_l%lld_decode_d%lld", str(r, "model_key"),
                 str(r, "benchmark"), str(r, "sample_id"), (long long)layer, (long long)step);
    else
        snprintf(id, sizeof id, "%s_%s_%s_l%lld_prefill", str(r, "model_key"), str(r, "benchmark"),
                 str(r, "sample_id"), (long long)layer);
    plena_trace_stable_id(id);
    json_t *prov = json_pack("{s:s,s:s,s:I,s:s}", "format", "routing_rows", "file", row->file,
                             "line", (json_int_t)row->line, "checkpoint_fingerprint",
                             str(r, "checkpoint_fingerprint"));
    const json_t *cat = json_object_get(r, "category");
    struct plena_trace_spec s = {
        .model = m,
        .layer = (uint32_t)layer,
        .trace_id = id,
        .created_by = o->created_by,
        .benchmark = str(r, "benchmark"),
        .sample_id = str(r, "sample_id"),
        .phase = decode ? "decode" : "prefill",
        .batch_size = 1,
        .seq_len = T,
        .tokens = T,
        .decode_step = decode ? step : 0,
        .sample_index = json_integer_value(json_object_get(r, "sample_index")),
        .input_tokens = json_integer_value(json_object_get(r, "input_tokens")),
        .category = json_is_string(cat) ? json_string_value(cat) : NULL,
        .source = str(r, "routing_source"),
        .weight_source = w ? str(r, "weight_source") : "uniform_weights_timing_only",
        .ids = ids,
        .weights = w,
        .provenance = prov,
        .mlen = o->mlen,
        .blen = o->blen,
    };
    json_t *tree = NULL;
    if (!rc) {
        rc = plena_trace_build(&s, &tree, err);
        if (rc) snprintf(err->where, sizeof err->where, "%s", where);
    } else {
        json_decref(prov);
    }
    if (!rc && plena_trace_docs_add(docs, tree, where))
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    plena_free(ids);
    plena_free(w);
    return rc;
}

int plena_rows_build(const struct plena_rows_build_opts *o, const struct plena_moe_model *m,
                     struct plena_trace_docs *docs, struct plena_err *err)
{
    struct row *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < o->n_rows && !rc; i++)
        rc = read_file(o, o->rows[i], &v, &n, &cap, err);
    if (!rc && n) qsort(v, n, sizeof *v, cmp_row);
    /* shards merged by key: equal keys must be identical rows */
    size_t m2 = 0, i = 0;
    for (; i < n && !rc; i++) {
        if (m2 && !strcmp(v[m2 - 1].key, v[i].key)) {
            if (!json_equal(v[m2 - 1].o, v[i].o)) {
                rc = PLENA_FAIL(err, PLENA_E_INPUT, "rows",
                                "%s:%zu and %s:%zu hold the same key with different rows",
                                v[m2 - 1].file, v[m2 - 1].line, v[i].file, v[i].line);
                break;
            }
            json_decref(v[i].o);
            continue;
        }
        v[m2++] = v[i];
    }
    for (; i < n; i++)
        json_decref(v[i].o); /* what an error left unread */
    n = m2;
    for (size_t i = 0; i < n && !rc; i++)
        rc = build_one(o, m, &v[i], docs, err);
    for (size_t i = 0; i < n; i++)
        json_decref(v[i].o);
    plena_free(v);
    return rc;
}
