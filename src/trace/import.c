/* Importers (docs/cli.md "plena trace import"). Every record is checked here
 * against the model (row width = top_k, ids in [0, E), integer ids, no id
 * twice per token) with a message naming file, line/record and field, then
 * built and validated by trace/build.c. With keep_going a bad record is logged
 * and skipped. Does not read files; CSV is RFC 4180 (quoted fields, "" for a
 * quote, CR before LF tolerated). */
#include "trace/import.h"

#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

void plena_trace_import_opts_default(struct plena_trace_import_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mlen = 64;
    o->blen = 4;
    o->raw_elem_bytes = 2;
}

/* in enum plena_trace_import_format order */
static const char *const format_names[] = {"vllm", "megatron", "csv", "jsonl"};

int plena_trace_import_format_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, format_names[i])) return i;
    return -1;
}

const char *plena_trace_import_format_name(enum plena_trace_import_format f)
{
    return (unsigned)f < 4 ? format_names[f] : "?";
}

struct mset;
struct imp {
    const struct plena_trace_import_opts *o;
    struct mset *mset; /* megatron: records collected before grouping */
    const char *name;  /* as given */
    const char *base;  /* base name, for provenance */
    struct plena_trace_docs *out;
    struct plena_trace_import_log *log;
    struct plena_err *err;
    uint32_t E, K;
};

/* A bad record: logged (keep_going) or recorded in err. Returns code. */
static int bad(struct imp *st, int code, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(struct imp *st, int code, const char *where, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (st->o->keep_going && code != PLENA_E_NOMEM) {
        plena_buf_printf(&st->log->text, "%s: %s\n", where, msg);
        st->log->n_skipped++;
        return code;
    }
    return PLENA_FAIL(st->err, code, where, "%s", msg);
}

/* Strings are quoted to 40 bytes without a mark where they were cut (the
 * importer's messages predate the validator's "..."). */
static const char *describe(const json_t *v, char *buf, size_t n)
{
    return plena_trace_describe_value(v, 0, buf, n);
}

/* One token's ids: an array of exactly K integer ids in [0, E), none twice. */
static int id_row(struct imp *st, const char *where, const char *path, const json_t *row,
                  int64_t *out)
{
    char d[96];
    if (!json_is_array(row))
        return bad(st, PLENA_E_INPUT, where, "%s: expected an array of %u expert ids, got %s", path,
                   st->K, describe(row, d, sizeof d));
    if (json_array_size(row) != st->K)
        return bad(st, PLENA_E_INPUT, where,
                   "%s: expected top_k %u expert ids per token (model %s), got %zu", path, st->K,
                   st->o->model->name, json_array_size(row));
    for (uint32_t j = 0; j < st->K; j++) {
        const json_t *v = json_array_get(row, j);
        if (!json_is_integer(v))
            return bad(st, PLENA_E_INPUT, where, "%s[%u]: expected an integer expert id, got %s",
                       path, j, describe(v, d, sizeof d));
        int64_t id = json_integer_value(v);
        if (id < 0 || id >= (int64_t)st->E)
            return bad(st, PLENA_E_INPUT, where,
                       "%s[%u]: expert id %lld outside 0..%u (num_experts %u)", path, j,
                       (long long)id, st->E - 1, st->E);
        for (uint32_t i = 0; i < j; i++)
            if (out[i] == id)
                return bad(st, PLENA_E_INPUT, where,
                           "%s[%u]: expert %lld repeated in this token (first at [%u])", path, j,
                           (long long)id, i);
        out[j] = id;
    }
    return 0;
}

/* One token's weights: K finite numbers >= 0 in binary32 range. */
static int weight_row(struct imp *st, const char *where, const char *path, const json_t *row,
                      float *out)
{
    char d[96];
    if (!json_is_array(row) || json_array_size(row) != st->K)
        return bad(st, PLENA_E_INPUT, where, "%s: expected an array of top_k %u weights, got %s",
                   path, st->K,
                   json_is_array(row) ? "an array of another length" : describe(row, d, sizeof d));
    for (uint32_t j = 0; j < st->K; j++) {
        const json_t *v = json_array_get(row, j);
        double w = json_number_value(v);
        if (!json_is_number(v) || !isfinite(w) || w < 0 || w > 3.4028234663852886e38)
            return bad(st, PLENA_E_INPUT, where,
                       "%s[%u]: expected a finite weight >= 0 in binary32 range, got %s", path, j,
                       describe(v, d, sizeof d));
        out[j] = (float)w;
    }
    return 0;
}

/* Builds one trace and adds it; a repeated trace_id is a record error. */
static int emit(struct imp *st, const char *where, struct plena_trace_spec *sp)
{
    sp->model = st->o->model;
    if (!sp->created_by) sp->created_by = "plena trace import " PLENA_VERSION;
    sp->created_at_utc = st->o->created_at_utc;
    sp->mlen = st->o->mlen;
    sp->blen = st->o->blen;
    json_t *tree;
    struct plena_err e = {0};
    int rc = plena_trace_build(sp, &tree, &e);
    if (rc) return bad(st, rc, where, "%s: %s", e.where, e.msg);
    const char *id = json_string_value(json_object_get(tree, "trace_id"));
    for (size_t i = 0; i < st->out->n; i++)
        if (!strcmp(st->out->v[i].trace_id, id)) {
            rc = bad(st, PLENA_E_INPUT, where,
                     "trace_id \"%s\" already produced by %s (duplicate record)", id,
                     st->out->v[i].origin);
            json_decref(tree);
            return rc;
        }
    if (plena_trace_docs_add(st->out, tree, where))
        return bad(st, PLENA_E_NOMEM, where, "out of memory");
    return 0;
}

static json_t *prov(struct imp *st, const char *format, long line)
{
    json_t *p = json_object();
    json_object_set_new(p, "format", json_string(format));
    json_object_set_new(p, "file", json_string(st->base));
    if (line > 0) json_object_set_new(p, "line", json_integer(line));
    return p;
}

static const char *benchmark(struct imp *st, const char *fallback)
{
    return st->o->benchmark ? st->o->benchmark : fallback;
}

static int weights_missing(struct imp *st, const char *where, const char *what)
{
    return bad(st, PLENA_E_INPUT, where,
               "%s: no weights in this record; pass --allow-uniform-weights to import it with "
               "uniform 1/k weights (timing only)",
               what);
}

static json_t *parse_line(struct imp *st, const char *where, const char *s, size_t n, int *rc);

/* Iterates the records of a JSONL input, one per non-blank line, in order:
 * each must be a JSON object; fn gets it with its line number, its index
 * among the lines and where = "<file>:<line>" for messages, and the record
 * is freed after fn. A line that is not an object fails like a bad record. */
typedef int (*record_fn)(struct imp *st, long line, long index, const char *where, json_t *rec);
static int each_record(struct imp *st, const char *bytes, size_t len, record_fn fn)
{
    struct plena_trace_lines it = {bytes, len, 0, 0};
    const char *s;
    size_t n;
    long index = 0;
    while (plena_trace_lines_next(&it, &s, &n)) {
        char where[320];
        snprintf(where, sizeof where, "%s:%ld", st->name, it.line);
        int rc;
        json_t *rec = parse_line(st, where, s, n, &rc);
        if (rec) {
            rc = fn(st, it.line, index, where, rec);
            json_decref(rec);
        }
        index++;
        if (rc && (!st->o->keep_going || rc == PLENA_E_NOMEM)) return rc;
    }
    return 0;
}

static json_t *parse_line(struct imp *st, const char *where, const char *s, size_t n, int *rc)
{
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        *rc = bad(st, PLENA_E_INPUT, where, "invalid JSON at column %d: %s", je.column, je.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        *rc = bad(st, PLENA_E_INPUT, where, "expected a JSON object per record");
        return NULL;
    }
    *rc = 0;
    return v;
}

/* ---- vllm ---- */

/* ids: [N][L][K] row-major. decode selects the trace kind (prefill or decode). */
static int vllm_emit(struct imp *st, const char *where, const char *rid, long index, int decode,
                     const int64_t *ids, size_t N, size_t L)
{
    const struct plena_trace_import_opts *o = st->o;
    uint32_t K = st->K;
    if (o->n_layer_map && o->n_layer_map != L)
        return bad(st, PLENA_E_INPUT, where,
                   "%s: %zu layer positions, but --layer-map has %zu entries",
                   decode ? "routed_experts" : "prompt_routed_experts", L, o->n_layer_map);
    if (N == 0) return 0;
    int64_t *buf = plena_calloc(N * K, sizeof *buf);
    if (!buf) return bad(st, PLENA_E_NOMEM, where, "out of memory");
    int rc = 0;
    const char *bench = benchmark(st, "vllm");
    for (size_t l = 0; l < L && !rc; l++) {
        uint32_t layer = o->n_layer_map ? o->layer_map[l] : (uint32_t)l;
        for (size_t t = 0; t < N; t++)
            memcpy(buf + t * K, ids + (t * L + l) * K, K * sizeof *buf);
        /* prefill: one trace; decode: one per generated token, or aggregated */
        size_t n_traces = !decode || o->decode_aggregate ? 1 : N;
        for (size_t g = 0; g < n_traces && !rc; g++) {
            size_t T = n_traces == 1 ? N : 1;
            char id[512];
            if (!decode)
                snprintf(id, sizeof id, "%s_%s_l%u_prefill", bench, rid, layer);
            else if (o->decode_aggregate)
                snprintf(id, sizeof id, "%s_%s_l%u_decode", bench, rid, layer);
            else
                snprintf(id, sizeof id, "%s_%s_l%u_decode_d%zu", bench, rid, layer, g + 1);
            json_t *p = prov(st, "vllm", 0);
            json_object_set_new(p, "record", json_integer(index));
            json_object_set_new(p, "layer_position", json_integer((json_int_t)l));
            struct plena_trace_spec sp = {
                .layer = layer,
                .trace_id = id,
                .benchmark = bench,
                .sample_id = rid,
                .phase = decode ? "decode" : "prefill",
                .batch_size = 1,
                .seq_len = (uint32_t)T,
                .tokens = (uint32_t)T,
                .decode_step = decode && !o->decode_aggregate ? (int64_t)g + 1 : 0,
                .sample_index = index,
                .input_tokens = -1,
                .source = "vllm_routed_experts",
                .weight_source = "uniform_weights_timing_only",
                .ids = n_traces == 1 ? buf : buf + g * K,
                .provenance = p,
            };
            rc = emit(st, where, &sp);
        }
    }
    plena_free(buf);
    return rc;
}

/* [N][L][K] JSON array -> ids; *L_io = 0 means "take L from the data". */
static int vllm_array(struct imp *st, const char *where, const char *field, const json_t *a,
                      size_t *N, size_t *L_io, int64_t **ids)
{
    char d[96], path[160];
    *ids = NULL;
    if (!json_is_array(a))
        return bad(st, PLENA_E_INPUT, where,
                   "%s: expected an array [tokens][layers][top_k], got %s", field,
                   describe(a, d, sizeof d));
    size_t n = json_array_size(a), L = *L_io;
    for (size_t t = 0; t < n; t++) {
        const json_t *r = json_array_get(a, t);
        snprintf(path, sizeof path, "%s[%zu]", field, t);
        if (!json_is_array(r) || json_array_size(r) == 0)
            return bad(st, PLENA_E_INPUT, where, "%s: expected a non-empty array of layers, got %s",
                       path, json_is_array(r) ? "an empty array" : describe(r, d, sizeof d));
        if (!L) L = json_array_size(r);
        if (L > PLENA_TRACE_MAX_LAYER_POSITIONS)
            return bad(st, PLENA_E_INPUT, where,
                       "%s: %zu layer positions, more than the limit %d of a vLLM capture", path, L,
                       PLENA_TRACE_MAX_LAYER_POSITIONS);
        if (json_array_size(r) != L)
            return bad(st, PLENA_E_INPUT, where, "%s: %zu layer positions, expected %zu", path,
                       json_array_size(r), L);
    }
    int64_t *v = plena_calloc(n * (L ? L : 1) * st->K + 1, sizeof *v);
    if (!v) return bad(st, PLENA_E_NOMEM, where, "out of memory");
    for (size_t t = 0; t < n; t++)
        for (size_t l = 0; l < L; l++) {
            snprintf(path, sizeof path, "%s[%zu][%zu]", field, t, l);
            int rc = id_row(st, where, path, json_array_get(json_array_get(a, t), l),
                            v + (t * L + l) * st->K);
            if (rc) {
                plena_free(v);
                return rc;
            }
        }
    *N = n;
    *L_io = L;
    *ids = v;
    return 0;
}

static int vllm_record(struct imp *st, const char *where, long index, json_t *rec)
{
    char rid[160], d[96];
    const json_t *r = json_object_get(rec, "request_id");
    if (!r || json_is_null(r))
        snprintf(rid, sizeof rid, "req%ld", index);
    else if (json_is_string(r) && json_string_length(r) > 0)
        snprintf(rid, sizeof rid, "%s", json_string_value(r));
    else if (json_is_integer(r))
        snprintf(rid, sizeof rid, "%lld", (long long)json_integer_value(r));
    else
        return bad(st, PLENA_E_INPUT, where, "request_id: expected a string or integer, got %s",
                   describe(r, d, sizeof d));
    const json_t *pre = json_object_get(rec, "prompt_routed_experts"),
                 *dec = json_object_get(rec, "routed_experts");
    if (!pre && !dec)
        return bad(st, PLENA_E_INPUT, where,
                   "request %s: expected prompt_routed_experts and/or routed_experts", rid);
    size_t L = 0, Np = 0, Nd = 0;
    int64_t *ip = NULL, *id = NULL;
    int rc = 0;
    if (pre) rc = vllm_array(st, where, "prompt_routed_experts", pre, &Np, &L, &ip);
    if (!rc && dec) rc = vllm_array(st, where, "routed_experts", dec, &Nd, &L, &id);
    if (!rc && ip) rc = vllm_emit(st, where, rid, index, 0, ip, Np, L);
    if (!rc && id) rc = vllm_emit(st, where, rid, index, 1, id, Nd, L);
    plena_free(ip);
    plena_free(id);
    return rc;
}

static int vllm_line(struct imp *st, long line, long index, const char *where, json_t *rec)
{
    (void)line;
    return vllm_record(st, where, index, rec);
}

static int import_vllm_raw(struct imp *st, const char *bytes, size_t len)
{
    const struct plena_trace_import_opts *o = st->o;
    uint64_t P = o->raw_shape[0], L = o->raw_shape[1], K = o->raw_shape[2];
    uint64_t need = P * L * K * o->raw_elem_bytes;
    if (P == 0 || L == 0 || K == 0 || need / o->raw_elem_bytes / K / L != P)
        return bad(st, PLENA_E_USAGE, "--shape", "expected P,L,K >= 1");
    if (L > PLENA_TRACE_MAX_LAYER_POSITIONS)
        return bad(st, PLENA_E_USAGE, "--shape", "L = %llu layer positions, expected at most %d",
                   (unsigned long long)L, PLENA_TRACE_MAX_LAYER_POSITIONS);
    if (K != st->K)
        return bad(st, PLENA_E_INPUT, st->name, "--shape: K = %llu, but model %s has top_k %u",
                   (unsigned long long)K, o->model->name, st->K);
    if (len != need)
        return bad(st, PLENA_E_INPUT, st->name,
                   "file is %zu bytes, expected %llu (shape %llu,%llu,%llu of int%u)", len,
                   (unsigned long long)need, (unsigned long long)P, (unsigned long long)L,
                   (unsigned long long)K, o->raw_elem_bytes * 8);
    int64_t *ids = plena_calloc(P * L * K, sizeof *ids);
    if (!ids) return bad(st, PLENA_E_NOMEM, st->name, "out of memory");
    int rc = 0;
    for (uint64_t i = 0; i < P * L * K && !rc; i++) {
        const unsigned char *b = (const unsigned char *)bytes + i * o->raw_elem_bytes;
        int64_t v = o->raw_elem_bytes == 2
                        ? (int64_t)(int16_t)(uint16_t)(b[0] | b[1] << 8)
                        : (int64_t)(int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 |
                                             (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
        uint64_t t = i / (L * K), l = i / K % L, j = i % K;
        if (v < 0 || v >= (int64_t)st->E)
            rc = bad(st, PLENA_E_INPUT, st->name,
                     "element [%llu][%llu][%llu] (byte %llu): expert id %lld outside 0..%u "
                     "(num_experts %u)",
                     (unsigned long long)t, (unsigned long long)l, (unsigned long long)j,
                     (unsigned long long)(i * o->raw_elem_bytes), (long long)v, st->E - 1, st->E);
        for (uint64_t k = i - j; k < i && !rc; k++)
            if (ids[k] == v)
                rc = bad(st, PLENA_E_INPUT, st->name,
                         "element [%llu][%llu][%llu]: expert %lld repeated in this token",
                         (unsigned long long)t, (unsigned long long)l, (unsigned long long)j,
                         (long long)v);
        ids[i] = v;
    }
    int decode = o->phase && !strcmp(o->phase, "decode");
    if (!rc) rc = vllm_emit(st, st->name, "req0", 0, decode, ids, P, L);
    plena_free(ids);
    return rc;
}

static int import_vllm(struct imp *st, const char *bytes, size_t len)
{
    if (!st->o->allow_uniform_weights)
        return PLENA_FAIL(st->err, PLENA_E_USAGE, "--from vllm",
                          "vLLM routed experts carry no weights: --allow-uniform-weights is "
                          "required (weight_source uniform_weights_timing_only)");
    if (st->o->raw) return import_vllm_raw(st, bytes, len);
    /* One JSON object (any layout), else JSONL. */
    json_t *whole = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, NULL);
    if (whole && json_is_object(whole)) {
        int rc = vllm_record(st, st->name, 0, whole);
        json_decref(whole);
        return rc;
    }
    json_decref(whole);
    return each_record(st, bytes, len, vllm_line);
}

/* ---- megatron ---- */

struct mrec {
    long line;
    int64_t step, block, rank, layer;
    int has_step, has_block, has_rank;
    char stage[64];
    uint32_t T;
    int64_t *ids;
    float *w; /* NULL without top_probs */
};

struct mset {
    struct mrec *v;
    size_t n, cap;
};

static int int_field(struct imp *st, const char *where, const json_t *rec, const char *key,
                     int required, int64_t lo, int64_t *out, int *present)
{
    char d[96];
    const json_t *v = json_object_get(rec, key);
    if (present) *present = v != NULL;
    if (!v) {
        if (required) return bad(st, PLENA_E_INPUT, where, "%s: missing (required)", key);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo)
        return bad(st, PLENA_E_INPUT, where, "%s: expected an integer >= %lld, got %s", key,
                   (long long)lo, describe(v, d, sizeof d));
    *out = json_integer_value(v);
    return 0;
}

/* Row t of an id matrix (into ids) or, when ids is NULL, of a weight matrix
 * (into w); K entries per row. */
static int matrix_row(struct imp *st, const char *where, const char *path, const json_t *row,
                      size_t t, int64_t *ids, float *w)
{
    return ids ? id_row(st, where, path, row, ids + t * st->K)
               : weight_row(st, where, path, row, w + t * st->K);
}

/* The first T rows of the nested array a ([T][K], length checked by the
 * caller), row t named "key[t]" in messages; ids or w as for matrix_row. */
static int nested_rows(struct imp *st, const char *where, const char *key, const json_t *a,
                       size_t T, int64_t *ids, float *w)
{
    char path[96];
    for (size_t t = 0; t < T; t++) {
        snprintf(path, sizeof path, "%s[%zu]", key, t);
        int rc = matrix_row(st, where, path, json_array_get(a, t), t, ids, w);
        if (rc) return rc;
    }
    return 0;
}

/* nested [T][K] or flat T*K, row-major: ids, or weights when ids is NULL. */
static int megatron_matrix(struct imp *st, const char *where, const char *key, const json_t *a,
                           uint32_t T, int64_t *ids, float *w)
{
    char path[96];
    if (!json_is_array(a)) return bad(st, PLENA_E_INPUT, where, "%s: expected an array", key);
    size_t n = json_array_size(a);
    int nested = n > 0 && json_is_array(json_array_get(a, 0));
    if (nested) {
        if (n != T)
            return bad(st, PLENA_E_INPUT, where, "%s: %zu rows, expected num_tokens %u", key, n, T);
        return nested_rows(st, where, key, a, T, ids, w);
    }
    if (n != (size_t)T * st->K)
        return bad(st, PLENA_E_INPUT, where,
                   "%s: flat array of %zu entries, expected num_tokens x topk = %u x %u", key, n, T,
                   st->K);
    /* view the flat array row by row */
    json_t *row = json_array();
    int rc = 0;
    for (uint32_t t = 0; t < T && !rc; t++) {
        json_array_clear(row);
        for (uint32_t j = 0; j < st->K; j++)
            json_array_append(row, json_array_get(a, (size_t)t * st->K + j));
        snprintf(path, sizeof path, "%s[%zu..%zu]", key, (size_t)t * st->K,
                 (size_t)t * st->K + st->K - 1);
        rc = matrix_row(st, where, path, row, t, ids, w);
    }
    json_decref(row);
    return rc;
}

static int megatron_line(struct imp *st, long line, long index, const char *where, json_t *rec)
{
    (void)index;
    char d[96];
    int rc;
    struct mrec m = {.line = line};
    int64_t T = 0, topk = 0;
    snprintf(m.stage, sizeof m.stage, "na");
    if ((rc = int_field(st, where, rec, "layer", 1, 0, &m.layer, NULL)) ||
        (rc = int_field(st, where, rec, "num_tokens", 1, 1, &T, NULL)) ||
        (rc = int_field(st, where, rec, "topk", 1, 1, &topk, NULL)) ||
        (rc = int_field(st, where, rec, "step", 0, 0, &m.step, &m.has_step)) ||
        (rc = int_field(st, where, rec, "block", 0, 0, &m.block, &m.has_block)) ||
        (rc = int_field(st, where, rec, "rank", 0, 0, &m.rank, &m.has_rank)))
        goto out;
    const json_t *sg = json_object_get(rec, "stage");
    if (sg) {
        if (!json_is_string(sg) || !json_string_length(sg) || json_string_length(sg) >= 64) {
            rc = bad(st, PLENA_E_INPUT, where, "stage: expected a non-empty string, got %s",
                     describe(sg, d, sizeof d));
            goto out;
        }
        snprintf(m.stage, sizeof m.stage, "%s", json_string_value(sg));
    }
    if (topk != st->K) {
        rc = bad(st, PLENA_E_INPUT, where, "topk: %lld, but model %s has top_k %u", (long long)topk,
                 st->o->model->name, st->K);
        goto out;
    }
    if (T > 16777216) {
        rc = bad(st, PLENA_E_INPUT, where, "num_tokens: %lld exceeds 16777216", (long long)T);
        goto out;
    }
    m.T = (uint32_t)T;
    m.layer += st->o->layer_offset;
    if (m.layer > 65535) {
        rc = bad(st, PLENA_E_INPUT, where, "layer: %lld (+ --layer-offset) exceeds 65535",
                 (long long)m.layer);
        goto out;
    }
    m.ids = plena_calloc((size_t)m.T * st->K, sizeof *m.ids);
    if (!m.ids) {
        rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
        goto out;
    }
    if ((rc = megatron_matrix(st, where, "top_indices", json_object_get(rec, "top_indices"), m.T,
                              m.ids, NULL)))
        goto out;
    const json_t *probs = json_object_get(rec, "top_probs");
    if (probs) {
        m.w = plena_calloc((size_t)m.T * st->K, sizeof *m.w);
        if (!m.w) {
            rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
            goto out;
        }
        if ((rc = megatron_matrix(st, where, "top_probs", probs, m.T, NULL, m.w))) goto out;
    } else if (!st->o->allow_uniform_weights) {
        rc = weights_missing(st, where, "top_probs");
        goto out;
    }
    if (plena_grow((void **)&st->mset->v, &st->mset->cap, st->mset->n + 1, sizeof m)) {
        rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
        goto out;
    }
    st->mset->v[st->mset->n++] = m;
    return 0;
out:
    plena_free(m.ids);
    plena_free(m.w);
    return rc;
}

static int cmp_mrec(const void *pa, const void *pb)
{
    const struct mrec *a = pa, *b = pb;
#define CMP(x, y)                                                                                  \
    if ((x) != (y)) return (x) < (y) ? -1 : 1
    CMP(a->step, b->step);
    int d = strcmp(a->stage, b->stage);
    if (d) return d;
    CMP(a->block, b->block);
    CMP(a->layer, b->layer);
    CMP(a->rank, b->rank);
    CMP(a->line, b->line);
#undef CMP
    return 0;
}

static int same_group(const struct mrec *a, const struct mrec *b)
{
    return a->step == b->step && !strcmp(a->stage, b->stage) && a->block == b->block &&
           a->layer == b->layer;
}

/* One trace from records r[0..n-1] (n > 1 only with --merge-ranks). */
static int megatron_emit(struct imp *st, const struct mrec *r, size_t n)
{
    char where[320], id[512], sid[96];
    snprintf(where, sizeof where, "%s:%ld", st->name, r[0].line);
    uint64_t T = 0;
    for (size_t i = 0; i < n; i++) {
        T += r[i].T;
        if (i && r[i].rank == r[i - 1].rank)
            return bad(st, PLENA_E_INPUT, where,
                       "rank %lld appears twice for step %lld stage %s block %lld layer %lld "
                       "(lines %ld and %ld)",
                       (long long)r[i].rank, (long long)r[i].step, r[i].stage,
                       (long long)r[i].block, (long long)r[i].layer, r[i - 1].line, r[i].line);
        if ((r[i].w != NULL) != (r[0].w != NULL))
            return bad(st, PLENA_E_INPUT, where,
                       "top_probs: present in some merged ranks but not in line %ld", r[i].line);
    }
    if (T > 16777216)
        return bad(st, PLENA_E_INPUT, where, "merged num_tokens %llu exceeds 16777216",
                   (unsigned long long)T);
    int64_t *ids = plena_calloc(T * st->K, sizeof *ids);
    float *w = r[0].w ? plena_calloc(T * st->K, sizeof *w) : NULL;
    if (!ids || (r[0].w && !w)) {
        plena_free(ids);
        plena_free(w);
        return bad(st, PLENA_E_NOMEM, where, "out of memory");
    }
    size_t at = 0;
    json_t *p = prov(st, "megatron", n == 1 ? r[0].line : 0);
    json_t *lines = json_array(), *ranks = json_array();
    for (size_t i = 0; i < n; i++) {
        memcpy(ids + at, r[i].ids, (size_t)r[i].T * st->K * sizeof *ids);
        if (w) memcpy(w + at, r[i].w, (size_t)r[i].T * st->K * sizeof *w);
        at += (size_t)r[i].T * st->K;
        json_array_append_new(lines, json_integer(r[i].line));
        json_array_append_new(ranks, json_integer(r[i].rank));
    }
    if (n > 1) {
        json_object_set_new(p, "lines", lines);
        json_object_set_new(p, "ranks", ranks);
    } else {
        json_decref(lines);
        json_decref(ranks);
        if (r[0].has_rank) json_object_set_new(p, "rank", json_integer(r[0].rank));
    }
    if (r[0].has_step) json_object_set_new(p, "step", json_integer(r[0].step));
    if (strcmp(r[0].stage, "na") || n > 1) json_object_set_new(p, "stage", json_string(r[0].stage));
    if (r[0].has_block) json_object_set_new(p, "block", json_integer(r[0].block));
    if (n > 1)
        snprintf(id, sizeof id, "mcore_%s_s%lld_b%lld_l%lld_rall", r[0].stage, (long long)r[0].step,
                 (long long)r[0].block, (long long)r[0].layer);
    else
        snprintf(id, sizeof id, "mcore_%s_s%lld_b%lld_l%lld_r%lld", r[0].stage,
                 (long long)r[0].step, (long long)r[0].block, (long long)r[0].layer,
                 (long long)r[0].rank);
    snprintf(sid, sizeof sid, "s%lld_b%lld", (long long)r[0].step, (long long)r[0].block);
    struct plena_trace_spec sp = {
        .layer = (uint32_t)r[0].layer,
        .trace_id = id,
        .benchmark = benchmark(st, "megatron"),
        .sample_id = sid,
        .phase = st->o->phase ? st->o->phase : "unknown",
        .batch_size = 1,
        .seq_len = (uint32_t)T,
        .tokens = (uint32_t)T,
        .sample_index = -1,
        .input_tokens = -1,
        .source = "megatron_router_trace",
        .weight_source = w ? "imported" : "uniform_weights_timing_only",
        .ids = ids,
        .weights = w,
        .provenance = p,
    };
    int rc = emit(st, where, &sp);
    plena_free(ids);
    plena_free(w);
    return rc;
}

static int import_megatron(struct imp *st, const char *bytes, size_t len)
{
    struct mset set = {0};
    st->mset = &set;
    int rc = each_record(st, bytes, len, megatron_line);
    st->mset = NULL;
    if (!rc && st->o->merge_ranks) {
        plena_qsort(set.v, set.n, sizeof *set.v, cmp_mrec);
        for (size_t i = 0; i < set.n && (!rc || (st->o->keep_going && rc != PLENA_E_NOMEM));) {
            size_t j = i + 1;
            while (j < set.n && same_group(&set.v[i], &set.v[j]))
                j++;
            rc = megatron_emit(st, set.v + i, j - i);
            i = j;
        }
    } else {
        for (size_t i = 0; i < set.n && (!rc || (st->o->keep_going && rc != PLENA_E_NOMEM)); i++)
            rc = megatron_emit(st, set.v + i, 1);
    }
    for (size_t i = 0; i < set.n; i++) {
        plena_free(set.v[i].ids);
        plena_free(set.v[i].w);
    }
    plena_free(set.v);
    return st->o->keep_going && rc != PLENA_E_NOMEM ? 0 : rc;
}

/* ---- csv ---- */

enum csv_col {
    C_SAMPLE,
    C_LAYER,
    C_PHASE,
    C_STEP,
    C_TOKEN,
    C_SLOT,
    C_EXPERT,
    C_WEIGHT,
    C_BENCH,
    C_CAT,
    C_COUNT
};
static const char *const csv_names[C_COUNT] = {"sample_id", "layer",   "phase",  "decode_step",
                                               "token",     "slot",    "expert", "weight",
                                               "benchmark", "category"};
#define CSV_N_REQUIRED 7

struct crow {
    long line;
    char *key; /* "benchmark\x1fsample\x1fphase\x1flayer\x1fstep" (owned) */
    char *bench, *sample, *phase, *cat; /* point into key / owned cat */
    int64_t layer, step;                /* step 0 = empty */
    int64_t token, slot, expert;
    int has_weight;
    float weight;
};

/* Splits one CSV record starting at *pos into fields (unescaped, NUL-ended,
 * stored in b; offsets in off). Returns the field count, or -1 on an
 * unterminated quote. Advances *pos past the record and counts newlines. */
static int csv_record(const char *s, size_t len, size_t *pos, long *line, struct plena_buf *b,
                      size_t *off, int max_fields)
{
    size_t p = *pos;
    int n = 0;
    b->len = 0;
    for (;;) {
        if (n < max_fields) off[n] = b->len;
        n++;
        if (p < len && s[p] == '"') {
            p++;
            for (;;) {
                if (p >= len) return -1;
                if (s[p] == '"') {
                    if (p + 1 < len && s[p + 1] == '"') {
                        plena_buf_append(b, "\"", 1);
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                if (s[p] == '\n') (*line)++;
                plena_buf_append(b, s + p, 1);
                p++;
            }
        }
        while (p < len && s[p] != ',' && s[p] != '\n') {
            if (!(s[p] == '\r' && (p + 1 == len || s[p + 1] == '\n')))
                plena_buf_append(b, s + p, 1);
            p++;
        }
        plena_buf_append(b, "", 1);
        if (p < len && s[p] == ',') {
            p++;
            continue;
        }
        break;
    }
    if (p < len) p++; /* the '\n' */
    *pos = p;
    return n;
}

static int csv_int(struct imp *st, const char *where, const char *col, const char *v, int64_t lo,
                   int64_t hi, int64_t *out)
{
    char *end;
    if (!*v) return bad(st, PLENA_E_INPUT, where, "column %s: empty, expected an integer", col);
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || (v[0] == '+') || errno == ERANGE || !(x >= lo && x <= hi))
        return bad(st, PLENA_E_INPUT, where,
                   "column %s: expected an integer %lld..%lld, got \"%.40s\"", col, (long long)lo,
                   (long long)hi, v);
    *out = x;
    return 0;
}

static int cmp_crow(const void *pa, const void *pb)
{
    const struct crow *a = pa, *b = pb;
    int d = strcmp(a->key, b->key);
    if (d) return d;
    if (a->token != b->token) return a->token < b->token ? -1 : 1;
    if (a->slot != b->slot) return a->slot < b->slot ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

static int csv_group(struct imp *st, const struct crow *r, size_t n)
{
    char where[320];
    snprintf(where, sizeof where, "%s:%ld", st->name, r[0].line);
    const char *what_fmt = "sample \"%s\" layer %lld %s";
    char what[256];
    snprintf(what, sizeof what, what_fmt, r[0].sample, (long long)r[0].layer, r[0].phase);
    if (r[0].step) {
        size_t l = strlen(what);
        snprintf(what + l, sizeof what - l, " step %lld", (long long)r[0].step);
    }
    uint32_t K = st->K;
    int64_t T = r[n - 1].token + 1;
    for (size_t i = 0; i < n; i++) {
        snprintf(where, sizeof where, "%s:%ld", st->name, r[i].line);
        if (i && r[i].token == r[i - 1].token && r[i].slot == r[i - 1].slot)
            return bad(st, PLENA_E_INPUT, where,
                       "token %lld slot %lld of %s already given at line %ld",
                       (long long)r[i].token, (long long)r[i].slot, what, r[i - 1].line);
        if (r[i].has_weight != r[0].has_weight)
            return bad(st, PLENA_E_INPUT, where,
                       "column weight: empty here but not at line %ld (%s): give all weights of a "
                       "trace or none",
                       r[0].line, what);
        const char *ca = r[i].cat ? r[i].cat : "", *c0 = r[0].cat ? r[0].cat : "";
        if (strcmp(ca, c0))
            return bad(st, PLENA_E_INPUT, where,
                       "column category: \"%s\" differs from \"%s\" at line %ld (%s)", ca, c0,
                       r[0].line, what);
    }
    snprintf(where, sizeof where, "%s:%ld", st->name, r[0].line);
    if ((uint64_t)T * K != n || T > 16777216) {
        /* find the first missing (token, slot) */
        int64_t want = 0;
        for (size_t i = 0; i < n; i++, want++)
            if (r[i].token * K + r[i].slot != want) break;
        return bad(st, PLENA_E_INPUT, where,
                   "%s: token %lld slot %lld missing (tokens must be 0..%lld, slots 0..%u, each "
                   "pair exactly once)",
                   what, (long long)(want / K), (long long)(want % K), (long long)(T - 1), K - 1);
    }
    int64_t *ids = plena_calloc(n, sizeof *ids);
    float *w = r[0].has_weight ? plena_calloc(n, sizeof *w) : NULL;
    if (!ids || (r[0].has_weight && !w)) {
        plena_free(ids);
        plena_free(w);
        return bad(st, PLENA_E_NOMEM, where, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        ids[i] = r[i].expert;
        if (w) w[i] = r[i].weight;
        for (size_t k = i - (size_t)r[i].slot; k < i && !rc; k++)
            if (ids[k] == ids[i]) {
                snprintf(where, sizeof where, "%s:%ld", st->name, r[i].line);
                rc = bad(st, PLENA_E_INPUT, where,
                         "column expert: expert %lld repeated in token %lld of %s (also at line "
                         "%ld)",
                         (long long)ids[i], (long long)r[i].token, what, r[k].line);
            }
    }
    if (!rc && !w && !st->o->allow_uniform_weights) rc = weights_missing(st, where, what);
    if (!rc) {
        char id[512];
        if (r[0].step)
            snprintf(id, sizeof id, "%s_%s_l%lld_%s_d%lld", r[0].bench, r[0].sample,
                     (long long)r[0].layer, r[0].phase, (long long)r[0].step);
        else
            snprintf(id, sizeof id, "%s_%s_l%lld_%s", r[0].bench, r[0].sample,
                     (long long)r[0].layer, r[0].phase);
        json_t *p = prov(st, "csv", r[0].line);
        struct plena_trace_spec sp = {
            .layer = (uint32_t)r[0].layer,
            .trace_id = id,
            .benchmark = r[0].bench,
            .sample_id = r[0].sample,
            .phase = r[0].phase,
            .batch_size = 1,
            .seq_len = (uint32_t)T,
            .tokens = (uint32_t)T,
            .decode_step = r[0].step,
            .sample_index = -1,
            .input_tokens = -1,
            .category = r[0].cat,
            .source = "csv_import",
            .weight_source = w ? "imported" : "uniform_weights_timing_only",
            .ids = ids,
            .weights = w,
            .provenance = p,
        };
        rc = emit(st, where, &sp);
    }
    plena_free(ids);
    plena_free(w);
    return rc;
}

static int import_csv(struct imp *st, const char *bytes, size_t len)
{
    struct plena_buf b;
    plena_buf_init(&b);
    size_t off[64], pos = 0;
    long line = 1, rec_line;
    int col_of[C_COUNT], rc = 0;
    for (int c = 0; c < C_COUNT; c++)
        col_of[c] = -1;
    char where[320];
    /* a NUL byte would end a field early ("0.6<NUL>junk" read as 0.6) */
    const char *nul = memchr(bytes, 0, len);
    if (nul) {
        long nl = 1;
        const char *ls = bytes;
        for (const char *q = bytes; q < nul; q++)
            if (*q == '\n') nl++, ls = q + 1;
        snprintf(where, sizeof where, "%s:%ld:%ld", st->name, nl, (long)(nul - ls) + 1);
        plena_buf_free(&b);
        return PLENA_FAIL(st->err, PLENA_E_INPUT, where, "NUL byte (0x00) in CSV text");
    }
    snprintf(where, sizeof where, "%s:1", st->name);
    int nh = csv_record(bytes, len, &pos, &line, &b, off, 64);
    if (len == 0 || nh < 0 || nh > 64) {
        plena_buf_free(&b);
        return PLENA_FAIL(st->err, PLENA_E_INPUT, where, "header: expected a header row%s",
                          nh > 64 ? " of at most 64 columns" : "");
    }
    for (int i = 0; i < nh; i++) {
        const char *h = b.data + off[i];
        int found = -1;
        for (int c = 0; c < C_COUNT; c++)
            if (!strcmp(h, csv_names[c])) found = c;
        if (found < 0) {
            rc = PLENA_FAIL(st->err, PLENA_E_INPUT, where,
                            "header: unknown column \"%.60s\" (columns: sample_id, layer, phase, "
                            "decode_step, token, slot, expert, weight, benchmark, category)",
                            h);
            break;
        }
        if (col_of[found] >= 0) {
            rc = PLENA_FAIL(st->err, PLENA_E_INPUT, where, "header: column %s given twice", h);
            break;
        }
        col_of[found] = i;
    }
    for (int c = 0; c < CSV_N_REQUIRED && !rc; c++)
        if (col_of[c] < 0)
            rc = PLENA_FAIL(st->err, PLENA_E_INPUT, where, "header: missing required column %s",
                            csv_names[c]);
    struct crow *rows = NULL;
    size_t n_rows = 0, cap = 0;
    line++;
    while (!rc && pos < len) {
        rec_line = line;
        int nf = csv_record(bytes, len, &pos, &line, &b, off, 64);
        line++;
        snprintf(where, sizeof where, "%s:%ld", st->name, rec_line);
        if (nf == 1 && b.data[0] == 0) continue; /* blank line */
        if (b.failed) {
            rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
            break;
        }
        if (nf < 0) {
            rc = bad(st, PLENA_E_INPUT, where, "unterminated quoted field (no closing '\"')");
            break;
        }
        if (nf != nh) {
            rc = bad(st, PLENA_E_INPUT, where, "%d fields, expected %d (the header's)", nf, nh);
            goto next;
        }
        {
            const char *f[C_COUNT];
            for (int c = 0; c < C_COUNT; c++)
                f[c] = col_of[c] >= 0 ? b.data + off[col_of[c]] : "";
            struct crow r = {.line = rec_line};
            const char *bench = *f[C_BENCH] ? f[C_BENCH] : benchmark(st, "csv");
            static const char *const phases[] = {"prefill", "decode", "smoke", "unknown"};
            int ph = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(f[C_PHASE], phases[k])) ph = k;
            int e;
            if (!*f[C_SAMPLE]) {
                e = bad(st, PLENA_E_INPUT, where, "column sample_id: empty");
            } else if (ph < 0) {
                e = bad(st, PLENA_E_INPUT, where,
                        "column phase: expected prefill, decode, smoke or unknown, got \"%.40s\"",
                        f[C_PHASE]);
            } else if ((e = csv_int(st, where, "layer", f[C_LAYER], 0, 65535, &r.layer)) ||
                       (*f[C_STEP] &&
                        (e = csv_int(st, where, "decode_step", f[C_STEP], 1, 1048576, &r.step))) ||
                       (e = csv_int(st, where, "token", f[C_TOKEN], 0, 16777215, &r.token)) ||
                       (e = csv_int(st, where, "slot", f[C_SLOT], 0, INT64_MAX, &r.slot)) ||
                       (e = csv_int(st, where, "expert", f[C_EXPERT], INT64_MIN, INT64_MAX,
                                    &r.expert))) {
            } else if (r.slot >= st->K) {
                e = bad(st, PLENA_E_INPUT, where,
                        "column slot: %lld outside 0..%u (model %s has top_k %u)",
                        (long long)r.slot, st->K - 1, st->o->model->name, st->K);
            } else if (r.expert < 0 || r.expert >= st->E) {
                e = bad(st, PLENA_E_INPUT, where,
                        "column expert: expert id %lld outside 0..%u (num_experts %u)",
                        (long long)r.expert, st->E - 1, st->E);
            } else if (r.step && ph != 1) {
                e = bad(st, PLENA_E_INPUT, where,
                        "column decode_step: %lld given for phase %s (empty unless decode)",
                        (long long)r.step, phases[ph]);
            } else if (*f[C_WEIGHT]) {
                char *end;
                /* decimal only: strtod also takes hex floats, inf and nan */
                const char *wt = f[C_WEIGHT];
                int dec = strspn(wt, "0123456789.eE+-") == strlen(wt);
                double w = strtod(wt, &end);
                if (!dec || *end || !isfinite(w) || w < 0 || w > 3.4028234663852886e38)
                    e = bad(st, PLENA_E_INPUT, where,
                            "column weight: expected a finite number >= 0, got \"%.40s\"",
                            f[C_WEIGHT]);
                r.has_weight = 1;
                r.weight = (float)w;
            }
            if (e) {
                rc = e;
                goto next;
            }
            struct plena_buf k;
            plena_buf_init(&k);
            plena_buf_printf(&k, "%s%c%s%c%d%c%05lld%c%08lld", bench, 0x1f, f[C_SAMPLE], 0x1f, ph,
                             0x1f, (long long)r.layer, 0x1f, (long long)r.step);
            plena_buf_append(&k, "", 1);
            plena_buf_puts(&k, bench);
            plena_buf_append(&k, "", 1);
            plena_buf_puts(&k, f[C_SAMPLE]);
            plena_buf_append(&k, "", 1);
            plena_buf_puts(&k, phases[ph]);
            plena_buf_append(&k, "", 1);
            plena_buf_puts(&k, f[C_CAT]);
            plena_buf_append(&k, "", 1);
            if (k.failed || plena_grow((void **)&rows, &cap, n_rows + 1, sizeof *rows)) {
                plena_buf_free(&k);
                rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
                break;
            }
            /* key, then bench, sample, phase, category, each NUL-terminated */
            r.key = k.data;
            r.bench = r.key + strlen(r.key) + 1;
            r.sample = r.bench + strlen(r.bench) + 1;
            r.phase = r.sample + strlen(r.sample) + 1;
            r.cat = r.phase + strlen(r.phase) + 1;
            if (!*r.cat) r.cat = NULL; /* empty cell = null */
            rows[n_rows++] = r;
        }
    next:
        if (rc && (!st->o->keep_going || rc == PLENA_E_NOMEM)) break;
        rc = 0;
    }
    if (!rc) {
        plena_qsort(rows, n_rows, sizeof *rows, cmp_crow);
        for (size_t i = 0; i < n_rows;) {
            size_t j = i + 1;
            while (j < n_rows && !strcmp(rows[i].key, rows[j].key))
                j++;
            rc = csv_group(st, rows + i, j - i);
            if (rc && (!st->o->keep_going || rc == PLENA_E_NOMEM)) break;
            rc = 0;
            i = j;
        }
    }
    for (size_t i = 0; i < n_rows; i++)
        plena_free(rows[i].key);
    plena_free(rows);
    plena_buf_free(&b);
    return rc;
}

/* ---- jsonl routing rows ---- */

static int str_field(struct imp *st, const char *where, const json_t *rec, const char *key,
                     int required, const char **out)
{
    char d[96];
    const json_t *v = json_object_get(rec, key);
    if (!v || json_is_null(v)) {
        if (required) return bad(st, PLENA_E_INPUT, where, "%s: missing (required)", key);
        return 0;
    }
    if (!json_is_string(v) || !json_string_length(v))
        return bad(st, PLENA_E_INPUT, where, "%s: expected a non-empty string, got %s", key,
                   describe(v, d, sizeof d));
    *out = json_string_value(v);
    return 0;
}

static int rows_line(struct imp *st, long line, long index, const char *where, json_t *rec)
{
    (void)index;
    char d[96];
    int rc;
    const char *sample = NULL, *phase = NULL, *bench = benchmark(st, "jsonl"), *cat = NULL,
               *wsrc = NULL, *rsrc = "routing_rows", *mkey = st->o->model->name;
    int64_t layer = 0, step = 0, sidx = -1, itok = -1;
    int64_t *ids = NULL;
    float *w = NULL;
    const json_t *routes = json_object_get(rec, "routes"),
                 *rw = json_object_get(rec, "route_weights");
    const json_t *ds = json_object_get(rec, "decode_step"),
                 *counts = json_object_get(rec, "counts");
    if ((rc = str_field(st, where, rec, "sample_id", 1, &sample)) ||
        (rc = str_field(st, where, rec, "phase", 1, &phase)) ||
        (rc = int_field(st, where, rec, "layer", 1, 0, &layer, NULL)) ||
        (rc = str_field(st, where, rec, "benchmark", 0, &bench)) ||
        (rc = str_field(st, where, rec, "category", 0, &cat)) ||
        (rc = str_field(st, where, rec, "weight_source", 0, &wsrc)) ||
        (rc = str_field(st, where, rec, "routing_source", 0, &rsrc)) ||
        (rc = str_field(st, where, rec, "model_key", 0, &mkey)) ||
        (rc = int_field(st, where, rec, "sample_index", 0, 0, &sidx, NULL)) ||
        (rc = int_field(st, where, rec, "input_tokens", 0, 0, &itok, NULL)))
        goto out;
    if (ds && !json_is_null(ds) &&
        (rc = int_field(st, where, rec, "decode_step", 0, 1, &step, NULL)))
        goto out;
    if (counts && json_array_size(counts) != st->E) {
        rc = bad(st, PLENA_E_INPUT, where, "counts: %zu entries, but model %s has num_experts %u",
                 json_array_size(counts), st->o->model->name, st->E);
        goto out;
    }
    if (!json_is_array(routes) || json_array_size(routes) == 0 ||
        json_array_size(routes) > 16777216) {
        rc = bad(st, PLENA_E_INPUT, where,
                 "routes: expected a non-empty array [tokens][top_k], got %s",
                 routes ? describe(routes, d, sizeof d) : "nothing (missing)");
        goto out;
    }
    size_t T = json_array_size(routes);
    ids = plena_calloc(T * st->K, sizeof *ids);
    if (!ids) {
        rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
        goto out;
    }
    if ((rc = nested_rows(st, where, "routes", routes, T, ids, NULL))) goto out;
    if (rw && !json_is_null(rw)) {
        if (!json_is_array(rw) || json_array_size(rw) != T) {
            rc = bad(st, PLENA_E_INPUT, where, "route_weights: expected %zu rows like routes", T);
            goto out;
        }
        w = plena_calloc(T * st->K, sizeof *w);
        if (!w) {
            rc = bad(st, PLENA_E_NOMEM, where, "out of memory");
            goto out;
        }
        if ((rc = nested_rows(st, where, "route_weights", rw, T, NULL, w))) goto out;
        if (!wsrc) wsrc = "imported";
    } else {
        if (!st->o->allow_uniform_weights) {
            rc = weights_missing(st, where, "route_weights");
            goto out;
        }
        wsrc = "uniform_weights_timing_only";
    }
    char id[768];
    if (step)
        snprintf(id, sizeof id, "%s_%s_%s_l%lld_%s_d%lld", mkey, bench, sample, (long long)layer,
                 phase, (long long)step);
    else
        snprintf(id, sizeof id, "%s_%s_%s_l%lld_%s", mkey, bench, sample, (long long)layer, phase);
    struct plena_trace_spec sp = {
        .layer = (uint32_t)layer,
        .trace_id = id,
        .benchmark = bench,
        .sample_id = sample,
        .phase = phase,
        .batch_size = 1,
        .seq_len = (uint32_t)T,
        .tokens = (uint32_t)T,
        .decode_step = step,
        .sample_index = sidx,
        .input_tokens = itok,
        .category = cat,
        .source = rsrc,
        .weight_source = wsrc,
        .ids = ids,
        .weights = w,
        .provenance = prov(st, "routing_rows", line),
    };
    rc = emit(st, where, &sp);
out:
    plena_free(ids);
    plena_free(w);
    return rc;
}

int plena_trace_import(const struct plena_trace_import_opts *o, const char *name, const char *bytes,
                       size_t len, struct plena_trace_docs *out, struct plena_trace_import_log *log,
                       struct plena_err *err)
{
    const char *slash = strrchr(name, '/');
    struct imp st = {
        .o = o,
        .name = name,
        .base = slash ? slash + 1 : name,
        .out = out,
        .log = log,
        .err = err,
        .E = o->model->num_experts,
        .K = o->model->top_k,
    };
    if (st.E < 1 || st.K < 1 || st.K > st.E)
        return PLENA_FAIL(err, PLENA_E_INPUT, "--model",
                          "model %s has no routed experts (num_experts %u, top_k %u)",
                          o->model->name, st.E, st.K);
    if (!bytes) bytes = "";
    int rc = 0;
    switch (o->from) {
    case PLENA_TRACE_IMPORT_VLLM: rc = import_vllm(&st, bytes, len); break;
    case PLENA_TRACE_IMPORT_MEGATRON: rc = import_megatron(&st, bytes, len); break;
    case PLENA_TRACE_IMPORT_CSV: rc = import_csv(&st, bytes, len); break;
    case PLENA_TRACE_IMPORT_JSONL: rc = each_record(&st, bytes, len, rows_line); break;
    }
    if (rc == PLENA_E_NOMEM) return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory");
    if (o->keep_going && rc != PLENA_E_USAGE && !plena_err_is_set(err)) return 0;
    return rc;
}
