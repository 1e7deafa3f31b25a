/* The route-trace validator (docs/trace-schema.md).
 * Pass 1 walks fields.def: presence, JSON type, range and enum of every field,
 * unknown (W001) and upstream-only (W002) members. Pass 2 holds the semantic
 * rules (shared combinations, token_count, rows, histogram, statistics, sums),
 * each skipped when a field it depends on was already reported (no cascades).
 * Never aborts on input; does not read files and does not run the replay tier. */
#include "trace/trace.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "model/model.h"
#include "model/trace_model.h"

enum { ST_ABSENT = 0, ST_OK, ST_BAD };

struct ctx {
    struct plena_trace_report *r;
    int strict;
    size_t max_errors;
    int nomem;
    int version; /* 1 or 2; 2 when schema_version is unusable */
    json_t *val[PLENA_TF_COUNT];
    unsigned char st[PLENA_TF_COUNT];
    int has_router; /* 1: model.router parsed and fits E and k (the V091-V094 rules);
                     * -1: it did not (V090), and no sum rule judges the rows */
    struct plena_router router;
};

/* ---- report ---- */

void plena_trace_report_init(struct plena_trace_report *r)
{
    memset(r, 0, sizeof *r);
}

void plena_trace_report_free(struct plena_trace_report *r)
{
    if (!r) return;
    plena_free(r->errors);
    plena_free(r->warnings);
    plena_trace_report_init(r);
}

size_t plena_trace_report_error_total(const struct plena_trace_report *r)
{
    return r->n_errors + r->n_errors_truncated;
}

/* Appends one finding; warnings become errors under --strict. Returns -1 only
 * when the report could not grow. */
static int report_vadd(struct plena_trace_report *r, int strict, size_t max, int warning,
                       const char *code, const char *path, long line, long col, const char *fmt,
                       va_list ap)
{
    int as_error = !warning || strict;
    struct plena_trace_finding **arr = as_error ? &r->errors : &r->warnings;
    size_t *n = as_error ? &r->n_errors : &r->n_warnings;
    size_t *cap = as_error ? &r->cap_errors : &r->cap_warnings;
    if (as_error) r->valid = 0;
    if (*n >= max) {
        if (as_error)
            r->n_errors_truncated++;
        else
            r->n_warnings_truncated++;
        return 0;
    }
    if (plena_grow((void **)arr, cap, *n + 1, sizeof **arr)) return -1;
    struct plena_trace_finding *f = &(*arr)[(*n)++];
    memset(f, 0, sizeof *f);
    snprintf(f->code, sizeof f->code, "%s", code);
    snprintf(f->path, sizeof f->path, "%s", path);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    f->line = line;
    f->column = col;
    return 0;
}

static int report_add(struct plena_trace_report *r, int strict, size_t max, int warning,
                      const char *code, const char *path, long line, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
static int report_add(struct plena_trace_report *r, int strict, size_t max, int warning,
                      const char *code, const char *path, long line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = report_vadd(r, strict, max, warning, code, path, line, 0, fmt, ap);
    va_end(ap);
    return rc;
}

static void fail(struct ctx *c, const char *code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(struct ctx *c, const char *code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (report_vadd(c->r, c->strict, c->max_errors, 0, code, path, 0, 0, fmt, ap)) c->nomem = 1;
    va_end(ap);
}

static void warn(struct ctx *c, const char *code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void warn(struct ctx *c, const char *code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (report_vadd(c->r, c->strict, c->max_errors, 1, code, path, 0, 0, fmt, ap)) c->nomem = 1;
    va_end(ap);
}

/* ---- paths and value descriptions ---- */

static int is_ident(const char *k)
{
    if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_')) return 0;
    for (k++; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return 0;
    return 1;
}

/* parent path + member: `a.b`, or `a["odd key"]` with JSON escaping. */
static void member_path(char *buf, size_t n, const char *parent, const char *key)
{
    if (is_ident(key)) {
        snprintf(buf, n, "%s%s%s", parent, parent[0] ? "." : "", key);
        return;
    }
    size_t len = (size_t)snprintf(buf, n, "%s[\"", parent);
    for (const unsigned char *p = (const unsigned char *)key; *p && len + 8 < n; p++) {
        if (*p == '"' || *p == '\\')
            len += (size_t)snprintf(buf + len, n - len, "\\%c", *p);
        else if (*p < 0x20)
            len += (size_t)snprintf(buf + len, n - len, "\\u%04x", *p);
        else
            buf[len++] = (char)*p;
    }
    if (len + 3 > n) len = n - 3;
    snprintf(buf + len, n - len, "\"]");
}

static const char *kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

const char *plena_trace_describe_value(const json_t *v, int mark_cut, char *buf, size_t n)
{
    char num[40];
    switch (json_typeof(v)) {
    case JSON_TRUE: return "boolean true";
    case JSON_FALSE: return "boolean false";
    case JSON_NULL: return "null";
    case JSON_INTEGER: snprintf(buf, n, "integer %lld", (long long)json_integer_value(v)); break;
    case JSON_REAL:
        plena_json_fmt_double(num, sizeof num, json_real_value(v));
        snprintf(buf, n, "real %s", num);
        break;
    case JSON_STRING: {
        const int cut = mark_cut && json_string_length(v) > 40;
        snprintf(buf, n, "string \"%.40s%s\"", json_string_value(v), cut ? "..." : "");
        break;
    }
    default: return kind(v);
    }
    return buf;
}

static const char *describe(const json_t *v, char *buf, size_t n)
{
    return plena_trace_describe_value(v, 1, buf, n);
}

static const char *fpath(enum plena_trace_field id, char *buf, size_t n)
{
    return plena_trace_field_path(id, buf, n);
}

static void enum_list(const struct plena_trace_field_info *f, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (const char *p = f->enum_values; *p && len + 4 < n; p++) {
        if (*p == '|') {
            len += (size_t)snprintf(buf + len, n - len, ", ");
        } else {
            buf[len++] = *p;
            buf[len] = 0;
        }
    }
}

/* ---- pass 1: the table ---- */

static int required_here(const struct ctx *c, const struct plena_trace_field_info *f)
{
    return f->req == PLENA_TRACE_REQ_YES || (f->req == PLENA_TRACE_REQ_V1 && c->version == 1);
}

static void check_object(struct ctx *c, enum plena_trace_field obj_id, json_t *obj,
                         const char *path);

/* The table types whose only type rule is one JSON type, with the same
 * "expected <type>" message under the row's code: the name of that type when
 * v is not of it, else NULL (also for every other table type, checked in
 * check_value's own cases). */
static const char *plain_type_mismatch(enum plena_trace_ftype t, const json_t *v)
{
    switch (t) {
    case PLENA_TRACE_T_OBJECT:
    case PLENA_TRACE_T_FREE_OBJECT: return json_is_object(v) ? NULL : "object";
    case PLENA_TRACE_T_ARRAY: return json_is_array(v) ? NULL : "array";
    case PLENA_TRACE_T_BOOLEAN: return json_is_boolean(v) ? NULL : "boolean";
    /* jansson keeps booleans apart from numbers, so true is never 1 here. */
    case PLENA_TRACE_T_NUMBER: return json_is_number(v) ? NULL : "number";
    default: return NULL;
    }
}

static void check_value(struct ctx *c, const struct plena_trace_field_info *f, json_t *v,
                        const char *path)
{
    char d[96], lst[256];
    enum plena_trace_field id = f->id;
    c->st[id] = ST_BAD;
    c->val[id] = v;
    const char *want = plain_type_mismatch(f->type, v);
    if (want) {
        fail(c, f->code, path, "expected %s, got %s", want, describe(v, d, sizeof d));
        return;
    }
    switch (f->type) {
    case PLENA_TRACE_T_OBJECT:
    case PLENA_TRACE_T_FREE_OBJECT:
    case PLENA_TRACE_T_ARRAY:
    case PLENA_TRACE_T_BOOLEAN: break;
    case PLENA_TRACE_T_NUMBER:
        if (json_number_value(v) < f->lo || json_number_value(v) > f->hi) {
            fail(c, f->code, path, "is %s, outside %g..%g", describe(v, d, sizeof d), f->lo, f->hi);
            return;
        }
        break;
    case PLENA_TRACE_T_INT_OR_NULL:
        if (json_is_null(v)) break;
        /* fall through */
    case PLENA_TRACE_T_INTEGER: {
        if (!json_is_integer(v)) {
            fail(c, "V008", path, "expected integer%s, got %s",
                 f->type == PLENA_TRACE_T_INT_OR_NULL ? " or null" : "", describe(v, d, sizeof d));
            return;
        }
        json_int_t x = json_integer_value(v);
        if ((double)x < f->lo || (double)x > f->hi) {
            if (isinf(f->hi))
                fail(c, f->code, path, "is %lld, expected >= %.0f", (long long)x, f->lo);
            else
                fail(c, f->code, path, "is %lld, expected %.0f..%.0f", (long long)x, f->lo, f->hi);
            return;
        }
        break;
    }
    case PLENA_TRACE_T_GATE:
        if (json_is_boolean(v)) {
            warn(c, "W021", path, "boolean shared_gate %s accepted as legacy spelling of \"%s\"",
                 json_is_true(v) ? "true" : "false", json_is_true(v) ? "sigmoid" : "none");
            break;
        }
        /* fall through */
    case PLENA_TRACE_T_STR_OR_NULL:
        if (f->type == PLENA_TRACE_T_STR_OR_NULL && json_is_null(v)) break;
        /* fall through */
    case PLENA_TRACE_T_STRING: {
        if (!json_is_string(v)) {
            fail(c, f->code, path, "expected string%s, got %s",
                 f->type == PLENA_TRACE_T_STR_OR_NULL ? " or null" : "", describe(v, d, sizeof d));
            return;
        }
        size_t len = json_string_length(v);
        if (f->lo >= 1 && len == 0) {
            fail(c, f->code, path, "is an empty string, expected a non-empty string");
            return;
        }
        if ((double)len > f->hi) {
            fail(c, f->code, path, "is %zu bytes long, expected at most %.0f bytes", len, f->hi);
            return;
        }
        if (f->enum_values && !plena_trace_field_enum_has(f, json_string_value(v), len)) {
            enum_list(f, lst, sizeof lst);
            fail(c, f->code, path, "is %s, expected one of: %s", describe(v, d, sizeof d), lst);
            return;
        }
        break;
    }
    case PLENA_TRACE_T_ANY: break;
    }
    c->st[id] = ST_OK;
    if (f->flags & PLENA_TRACE_FLAG_UPSTREAM)
        warn(c, "W002", path, "upstream-only member accepted and ignored");
    if (id == PLENA_TF_SCHEMA_VERSION) c->version = (int)json_integer_value(v);
    if (f->type == PLENA_TRACE_T_OBJECT) check_object(c, id, v, path);
}

static void check_object(struct ctx *c, enum plena_trace_field obj_id, json_t *obj,
                         const char *path)
{
    char sub[256];
    const struct plena_trace_field_info *star = NULL;
    for (unsigned i = 0; i < PLENA_TF_COUNT; i++) {
        const struct plena_trace_field_info *f = plena_trace_field_at(i);
        if (f->parent != obj_id || f->id == PLENA_TF_ROOT) continue;
        if (!strcmp(f->key, "*")) {
            star = f;
            continue;
        }
        member_path(sub, sizeof sub, path, f->key);
        json_t *v = json_object_get(obj, f->key);
        if (!v) {
            c->st[i] = ST_ABSENT;
            if (required_here(c, f))
                fail(c, f->code, sub, "required member missing (expected %s%s)",
                     plena_trace_ftype_name(f->type),
                     f->req == PLENA_TRACE_REQ_V1 ? " in schema v1" : "");
            continue;
        }
        check_value(c, f, v, sub);
    }
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        int known = 0;
        for (unsigned i = 0; i < PLENA_TF_COUNT && !known; i++) {
            const struct plena_trace_field_info *f = plena_trace_field_at(i);
            if (f->parent == obj_id && i != PLENA_TF_ROOT && !strcmp(f->key, key)) known = 1;
        }
        if (known) continue;
        member_path(sub, sizeof sub, path, key);
        if (star)
            check_value(c, star, v, sub);
        else
            warn(c, "W001", sub, "unknown member ignored");
    }
}

/* ---- pass 2: semantic rules ---- */

static int ok(const struct ctx *c, enum plena_trace_field id)
{
    return c->st[id] == ST_OK;
}

static int64_t ival(const struct ctx *c, enum plena_trace_field id)
{
    return (int64_t)json_integer_value(c->val[id]);
}

static int trace_id_matches_v2(const char *s)
{
    /* ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ */
    for (size_t i = 0; s[i]; i++) {
        char ch = s[i];
        int alnum = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '_';
        if (!alnum && (i == 0 || (ch != '.' && ch != '-'))) return 0;
    }
    return s[0] != 0;
}

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

/* YYYY-MM-DDTHH:MM:SS[.f+]Z with a real calendar date (proleptic Gregorian). */
static const char *timestamp_problem(const char *s, size_t len)
{
    int y, mo, d, h, mi, se;
    if (len < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || s[10] != 'T' || !digits(s + 11, 2, &h) || s[13] != ':' ||
        !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &se))
        return "expected format YYYY-MM-DDTHH:MM:SS[.fraction]Z";
    size_t i = 19;
    if (s[i] == '.') {
        size_t start = ++i;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == start) return "expected digits after '.'";
    }
    if (i + 1 != len || s[i] != 'Z') return "expected format YYYY-MM-DDTHH:MM:SS[.fraction]Z";
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo < 1 || mo > 12) return "month outside 01..12";
    if (d < 1 || d > mdays[mo - 1] + (mo == 2 && leap)) return "day does not exist in that month";
    if (h > 23 || mi > 59 || se > 59) return "time of day out of range";
    return NULL;
}

static void check_top(struct ctx *c)
{
    if (ok(c, PLENA_TF_TRACE_ID)) {
        const char *id = json_string_value(c->val[PLENA_TF_TRACE_ID]);
        if (!trace_id_matches_v2(id) ||
            strlen(id) != json_string_length(c->val[PLENA_TF_TRACE_ID])) {
            if (c->version == 1)
                warn(
                    c, "W010", "trace_id",
                    "v1 trace_id \"%.60s\" is outside the v2 pattern ^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
                    id);
            else
                fail(c, "V004", "trace_id",
                     "\"%.60s\" does not match ^[A-Za-z0-9_][A-Za-z0-9_.-]*$", id);
        }
    }
    if (ok(c, PLENA_TF_CREATED_AT_UTC)) {
        json_t *v = c->val[PLENA_TF_CREATED_AT_UTC];
        const char *why = timestamp_problem(json_string_value(v), json_string_length(v));
        if (why) fail(c, "V006", "created_at_utc", "\"%.40s\": %s", json_string_value(v), why);
    }
}

/* model.router (V090): the router description parses and fits E and k;
 * then its invariants are the V091-V094 rules of the routing. */
static void check_router(struct ctx *c)
{
    c->has_router = 0;
    if (!ok(c, PLENA_TF_MODEL_ROUTER) || !ok(c, PLENA_TF_MODEL_NUM_EXPERTS) ||
        !ok(c, PLENA_TF_MODEL_TOP_K))
        return;
    struct plena_err err;
    plena_err_clear(&err);
    if (plena_router_from_json(c->val[PLENA_TF_MODEL_ROUTER], "model.router", &c->router, &err) ||
        plena_router_validate(&c->router, (uint32_t)ival(c, PLENA_TF_MODEL_NUM_EXPERTS),
                              (uint32_t)ival(c, PLENA_TF_MODEL_TOP_K), "model.router", &err)) {
        fail(c, "V090", err.where[0] ? err.where : "model.router", "%s", err.msg);
        c->has_router = -1;
        return;
    }
    c->has_router = 1;
}

static void check_model(struct ctx *c)
{
    if (ok(c, PLENA_TF_MODEL_TOP_K) && ok(c, PLENA_TF_MODEL_NUM_EXPERTS) &&
        ival(c, PLENA_TF_MODEL_TOP_K) > ival(c, PLENA_TF_MODEL_NUM_EXPERTS)) {
        fail(c, "V014", "model.top_k", "top_k %lld exceeds num_experts %lld",
             (long long)ival(c, PLENA_TF_MODEL_TOP_K),
             (long long)ival(c, PLENA_TF_MODEL_NUM_EXPERTS));
        c->st[PLENA_TF_MODEL_TOP_K] = ST_BAD;
    }
    check_router(c);
    /* Shared-expert combinations; skipped when a shared field is mistyped. */
    if (!ok(c, PLENA_TF_MODEL)) return;
    enum plena_trace_field se = PLENA_TF_MODEL_SHARED_EXPERTS,
                           sis = PLENA_TF_MODEL_SHARED_INTERMEDIATE_SIZE,
                           sg = PLENA_TF_MODEL_SHARED_GATE;
    if (c->st[se] == ST_BAD || c->st[sis] == ST_BAD || c->st[sg] == ST_BAD) return;
    int has_se = c->st[se] == ST_OK, has_sis = c->st[sis] == ST_OK, has_sg = c->st[sg] == ST_OK;
    if (c->version == 1) {
        enum plena_trace_field first = has_se ? se : has_sis ? sis : sg;
        char p[128];
        if (has_se || has_sis || has_sg)
            fail(c, "V027", fpath(first, p, sizeof p),
                 "shared-expert fields need schema_version 2, found schema_version 1");
        return;
    }
    int64_t n_se = has_se ? ival(c, se) : 0;
    int sigmoid =
        has_sg && (json_is_true(c->val[sg]) || (json_is_string(c->val[sg]) &&
                                                !strcmp(json_string_value(c->val[sg]), "sigmoid")));
    if (n_se >= 1) {
        if (!has_sis)
            fail(c, "V023", "model.shared_intermediate_size",
                 "missing while shared_experts is %lld: the layer would replay routed-only while "
                 "labelled shared",
                 (long long)n_se);
        else if (!has_sg)
            fail(c, "V024", "model.shared_gate",
                 "missing while shared_experts is %lld: expected \"none\" or \"sigmoid\"",
                 (long long)n_se);
    } else {
        if (has_sis)
            fail(c, "V025", "model.shared_intermediate_size",
                 "is %lld but shared_experts is %s: a shared width needs shared_experts >= 1",
                 (long long)ival(c, sis), has_se ? "0" : "absent");
        if (sigmoid)
            fail(c, "V026", "model.shared_gate",
                 "is sigmoid but shared_experts is %s: a gate needs shared_experts >= 1",
                 has_se ? "0" : "absent");
    }
}

static void check_workload(struct ctx *c)
{
    if (ok(c, PLENA_TF_WORKLOAD_BATCH_SIZE) && ok(c, PLENA_TF_WORKLOAD_SEQ_LEN) &&
        ok(c, PLENA_TF_WORKLOAD_TOKEN_COUNT)) {
        int64_t b = ival(c, PLENA_TF_WORKLOAD_BATCH_SIZE), s = ival(c, PLENA_TF_WORKLOAD_SEQ_LEN);
        int64_t t = ival(c, PLENA_TF_WORKLOAD_TOKEN_COUNT), prod;
        if (__builtin_mul_overflow(b, s, &prod) || prod != t) {
            fail(c, "V033", "workload.token_count",
                 "is %lld, expected batch_size x seq_len = %lld x %lld", (long long)t, (long long)b,
                 (long long)s);
            c->st[PLENA_TF_WORKLOAD_TOKEN_COUNT] = ST_BAD;
        }
    }
    if (ok(c, PLENA_TF_WORKLOAD_DECODE_STEP) && ok(c, PLENA_TF_WORKLOAD_PHASE) &&
        !json_is_null(c->val[PLENA_TF_WORKLOAD_DECODE_STEP]) &&
        strcmp(json_string_value(c->val[PLENA_TF_WORKLOAD_PHASE]), "decode") != 0)
        fail(c, "V034", "workload.decode_step",
             "is %lld but phase is \"%s\": expected null or absent unless phase is decode",
             (long long)ival(c, PLENA_TF_WORKLOAD_DECODE_STEP),
             json_string_value(c->val[PLENA_TF_WORKLOAD_PHASE]));
}

enum wmode { W_ENFORCE, W_UNNORM, W_WARN, W_NONE };

struct routing_dims {
    int64_t T, K, E; /* -1 when unknown */
};

/* V092: a group-limited router's row uses at most topk_group groups. */
static void check_row_groups(struct ctx *c, size_t t, const json_t *row, int64_t E)
{
    const struct plena_router *r = &c->router;
    if (c->has_router != 1 || r->n_group < 2 || E <= 0 || E % r->n_group) return;
    const int64_t per = E / r->n_group;
    int64_t used[256];
    size_t n = 0;
    for (size_t j = 0; j < json_array_size(row); j++) {
        const json_t *v = json_array_get(row, j);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= E)
            continue;
        const int64_t g = json_integer_value(v) / per;
        int seen = 0;
        for (size_t q = 0; q < n && !seen; q++)
            seen = used[q] == g;
        if (!seen && n < 256) used[n++] = g;
    }
    if (n <= r->topk_group) return;
    char p[96];
    snprintf(p, sizeof p, "routing.topk_indices[%zu]", t);
    fail(c, "V092", p,
         "uses %zu expert groups, expected at most topk_group %u of n_group %u (groups of %lld "
         "experts)",
         n, r->topk_group, r->n_group, (long long)per);
}

/* Walks topk_indices; fills hist (E entries) and returns 1 when every id was
 * a valid id of a correctly shaped matrix (so the histogram is defined). */
static int walk_indices(struct ctx *c, const struct routing_dims *dm, int64_t *hist, int64_t *seen)
{
    char p[128], d[96];
    json_t *rows = c->val[PLENA_TF_ROUTING_TOPK_INDICES];
    size_t n = json_array_size(rows);
    int all = dm->T >= 0 && dm->K >= 0 && dm->E >= 0;
    if (dm->T >= 0 && (int64_t)n != dm->T) {
        fail(c, "V042", "routing.topk_indices", "has %zu rows, expected token_count %lld", n,
             (long long)dm->T);
        all = 0;
    }
    for (size_t t = 0; t < n && !c->nomem; t++) {
        json_t *row = json_array_get(rows, t);
        if (!json_is_array(row)) {
            snprintf(p, sizeof p, "routing.topk_indices[%zu]", t);
            fail(c, "V042", p, "expected an array of top_k expert ids, got %s",
                 describe(row, d, sizeof d));
            all = 0;
            continue;
        }
        size_t m = json_array_size(row);
        if (dm->K >= 0 && (int64_t)m != dm->K) {
            snprintf(p, sizeof p, "routing.topk_indices[%zu]", t);
            fail(c, "V042", p, "has %zu entries, expected top_k %lld", m, (long long)dm->K);
            all = 0;
        }
        for (size_t j = 0; j < m; j++) {
            json_t *v = json_array_get(row, j);
            if (!json_is_integer(v)) {
                snprintf(p, sizeof p, "routing.topk_indices[%zu][%zu]", t, j);
                fail(c, "V008", p, "expected integer expert id, got %s", describe(v, d, sizeof d));
                all = 0;
                continue;
            }
            json_int_t id = json_integer_value(v);
            if (dm->E < 0) continue;
            if (id < 0 || id >= dm->E) {
                snprintf(p, sizeof p, "routing.topk_indices[%zu][%zu]", t, j);
                fail(c, "V044", p,
                     "expert id %lld out of range, expected 0..%lld (num_experts %lld)",
                     (long long)id, (long long)dm->E - 1, (long long)dm->E);
                all = 0;
                continue;
            }
            /* seen[2*id] = row + 1 of the last use, seen[2*id+1] = its slot */
            if (seen[2 * id] == (int64_t)t + 1) {
                snprintf(p, sizeof p, "routing.topk_indices[%zu][%zu]", t, j);
                fail(c, "V045", p, "expert %lld repeated in this token (first at [%zu][%lld])",
                     (long long)id, t, (long long)seen[2 * id + 1]);
                all = 0; /* the histogram would only restate this defect */
            } else {
                seen[2 * id] = (int64_t)t + 1;
                seen[2 * id + 1] = (int64_t)j;
            }
            hist[id]++;
        }
        check_row_groups(c, t, row, dm->E);
    }
    return all;
}

/* The relative tolerance of the router sum rules: a weight rounded to BF16
 * carries 2^-9 relative error, so a row's sum is within 2^-9 x sum of the
 * exact one; 4e-3 (twice that, the V049 tolerance for sums of 1) leaves
 * room for the normalisation epsilons of the published routers. */
#define ROUTER_SUM_TOL 4e-3

/* V091: a normalising router's weights sum to routed_scaling_factor (none
 * dropped); otherwise they do not exceed it (softmax scores, at most 1 in
 * all) or k times it (sigmoid scores, each at most 1). */
static void check_row_sum(struct ctx *c, size_t t, size_t k, double sum, int dropped)
{
    const struct plena_router *r = &c->router;
    const double S = (double)r->scaling, tol = ROUTER_SUM_TOL * S;
    const int normalised = r->norm != PLENA_NORM_NONE || r->score == PLENA_SCORE_SOFTMAX_SELECTED;
    const int sigmoid = r->score == PLENA_SCORE_SIGMOID || r->score == PLENA_SCORE_SIGMOID_SELECTED;
    char p[96], a[40], b[40];
    snprintf(p, sizeof p, "routing.topk_weights[%zu]", t);
    plena_json_fmt_double(a, sizeof a, sum);
    plena_json_fmt_double(b, sizeof b, S);
    if (normalised && !dropped) {
        if (!(fabs(sum - S) <= tol))
            fail(c, "V091", p,
                 "weights sum to %s, expected routed_scaling_factor %s within %g relative "
                 "(model.router normalises: %s)",
                 a, b, ROUTER_SUM_TOL, plena_router_norm_name(r->norm));
        return;
    }
    const double cap = normalised || !sigmoid ? S : S * (double)k;
    if (!(sum <= cap + ROUTER_SUM_TOL * cap)) {
        plena_json_fmt_double(b, sizeof b, cap);
        fail(c, "V091", p, "weights sum to %s, expected at most %s (model.router: %s%s)", a, b,
             dropped ? "pairs dropped over capacity" : "not normalised",
             !dropped && sigmoid ? ", k sigmoid scores" : "");
    }
}

/* V093: sigmoid of the selected logit (Llama-4), not normalised: each weight
 * is scaling x sigmoid, in (0, scaling). */
static void check_weight_range(struct ctx *c, size_t t, size_t j, const json_t *v, float w)
{
    const struct plena_router *r = &c->router;
    if (r->score != PLENA_SCORE_SIGMOID_SELECTED || r->norm != PLENA_NORM_NONE) return;
    if (w > 0.0f && (double)w < (double)r->scaling) return;
    char p[96], d[96], b[40];
    snprintf(p, sizeof p, "routing.topk_weights[%zu][%zu]", t, j);
    plena_json_fmt_double(b, sizeof b, (double)r->scaling);
    fail(c, "V093", p,
         "weight %s is outside (0, %s): model.router weights are sigmoid_topk x "
         "routed_scaling_factor",
         describe(v, d, sizeof d), b);
}

static void walk_weights(struct ctx *c, const struct routing_dims *dm)
{
    char p[128], d[96], a[40], b[40];
    json_t *rows = c->val[PLENA_TF_ROUTING_TOPK_WEIGHTS];
    size_t n = json_array_size(rows);
    const char *ws = "unspecified";
    int have_ws = c->st[PLENA_TF_ROUTING_WEIGHT_SOURCE] != ST_BAD;
    if (ok(c, PLENA_TF_ROUTING_WEIGHT_SOURCE))
        ws = json_string_value(c->val[PLENA_TF_ROUTING_WEIGHT_SOURCE]);
    enum wmode sum_mode = W_ENFORCE, order_mode = W_ENFORCE;
    if (!strcmp(ws, "true_router_softmax_unnormalized_weights")) sum_mode = W_UNNORM;
    if (!strcmp(ws, "imported") || !strcmp(ws, "unspecified")) sum_mode = order_mode = W_WARN;
    /* DeepSeek: scaled weights (model.router bounds the sum, V091); sigmoid
     * weights ranked by the bias-corrected scores, so not in weight order */
    if (!strcmp(ws, "true_router_scaled_softmax_weights")) sum_mode = W_NONE;
    if (!strcmp(ws, "true_router_sigmoid_weights")) sum_mode = order_mode = W_NONE;
    /* a router description replaces the weight source's sum rule (V091),
     * except for weights declared uniform for timing only */
    const int rt = c->has_router == 1 && strcmp(ws, "uniform_weights_timing_only") != 0;
    const int drops = rt && c->router.capacity != PLENA_CAPACITY_NONE;
    if (dm->T >= 0 && (int64_t)n != dm->T)
        fail(c, "V046", "routing.topk_weights", "has %zu rows, expected token_count %lld", n,
             (long long)dm->T);
    for (size_t t = 0; t < n && !c->nomem; t++) {
        json_t *row = json_array_get(rows, t);
        snprintf(p, sizeof p, "routing.topk_weights[%zu]", t);
        if (!json_is_array(row)) {
            fail(c, "V046", p, "expected an array of top_k weights, got %s",
                 describe(row, d, sizeof d));
            continue;
        }
        size_t m = json_array_size(row);
        int row_ok = 1;
        if (dm->K >= 0 && (int64_t)m != dm->K) {
            fail(c, "V046", p, "has %zu entries, expected top_k %lld", m, (long long)dm->K);
            row_ok = 0;
        }
        double sum = 0.0;
        float prev = 0.0f;
        size_t order_bad = m, n_zero = 0;
        int ranked = 0; /* a weight of the row's order precedes */
        for (size_t j = 0; j < m; j++) {
            json_t *v = json_array_get(row, j);
            snprintf(p, sizeof p, "routing.topk_weights[%zu][%zu]", t, j);
            if (!json_is_number(v)) {
                fail(c, "V047", p, "expected a number, got %s", describe(v, d, sizeof d));
                row_ok = 0;
                continue;
            }
            double w = json_number_value(v);
            if (!(fabs(w) <= FLT_MAX)) {
                fail(c, "V047", p, "%s is outside the binary32 range (|w| <= 3.4028235e38)",
                     describe(v, d, sizeof d));
                row_ok = 0;
                continue;
            }
            if (w < 0) {
                fail(c, "V048", p, "weight %s is negative, expected >= 0",
                     describe(v, d, sizeof d));
                row_ok = 0;
                continue;
            }
            /* Sums and order are judged on the binary32 values. */
            float fw = (float)w;
            sum += (double)fw;
            if (drops && fw == 0.0f) { /* a pair dropped over capacity: weight 0, no rank */
                n_zero++;
                continue;
            }
            if (rt) check_weight_range(c, t, j, v, fw);
            if (ranked && fw > prev && order_bad == m) order_bad = j;
            prev = fw;
            ranked = 1;
        }
        if (!row_ok || c->has_router < 0) continue; /* a bad router: V090 said it */
        if (rt) {
            check_row_sum(c, t, (size_t)(dm->K >= 0 ? dm->K : 0), sum, n_zero > 0);
        } else if (!have_ws) {
            continue;
        }
        snprintf(p, sizeof p, "routing.topk_weights[%zu]", t);
        plena_json_fmt_double(a, sizeof a, sum);
        if (!rt && sum_mode == W_ENFORCE && !(fabs(sum - 1.0) <= 4e-3))
            fail(c, "V049", p, "weights sum to %s, expected 1 within 4e-3 for weight_source %s", a,
                 ws);
        else if (!rt && sum_mode == W_UNNORM && !(sum <= 1.0 + 4e-3))
            fail(c, "V049", p, "weights sum to %s, expected at most 1 + 4e-3 for weight_source %s",
                 a, ws);
        else if (!rt && sum_mode == W_WARN && !(fabs(sum - 1.0) <= 4e-3))
            warn(c, "W030", p, "weights sum to %s, not 1 within 4e-3 (weight_source %s)", a, ws);
        if (order_bad < m && order_mode != W_NONE) {
            snprintf(p, sizeof p, "routing.topk_weights[%zu][%zu]", t, order_bad);
            plena_json_fmt_double(a, sizeof a, json_number_value(json_array_get(row, order_bad)));
            plena_json_fmt_double(b, sizeof b,
                                  json_number_value(json_array_get(row, order_bad - 1)));
            if (order_mode == W_ENFORCE)
                fail(c, "V050", p,
                     "weight %s is greater than the previous weight %s: weight_source %s requires "
                     "non-increasing order",
                     a, b, ws);
            else
                warn(c, "W031", p, "weight %s is greater than the previous weight %s (not sorted)",
                     a, b);
        }
    }
}

/* Reads expert_counts into counts (E entries). 1 when usable for statistics. */
static int read_counts(struct ctx *c, const struct routing_dims *dm, int64_t *counts)
{
    char p[128], d[96];
    json_t *arr = c->val[PLENA_TF_ROUTING_EXPERT_COUNTS];
    size_t n = json_array_size(arr);
    int usable = dm->E >= 0;
    if (dm->E >= 0 && (int64_t)n != dm->E) {
        fail(c, "V051", "routing.expert_counts", "has %zu entries, expected num_experts %lld", n,
             (long long)dm->E);
        usable = 0;
    }
    for (size_t e = 0; e < n; e++) {
        json_t *v = json_array_get(arr, e);
        snprintf(p, sizeof p, "routing.expert_counts[%zu]", e);
        if (!json_is_integer(v)) {
            fail(c, "V008", p, "expected integer count, got %s", describe(v, d, sizeof d));
            usable = 0;
        } else if (json_integer_value(v) < 0) {
            fail(c, "V051", p, "count %lld is negative, expected >= 0",
                 (long long)json_integer_value(v));
            usable = 0;
        } else if (usable) {
            counts[e] = (int64_t)json_integer_value(v);
        }
    }
    return usable;
}

static void check_list(struct ctx *c, enum plena_trace_field id, const int64_t *want, size_t n_want)
{
    char p[128], d[96], fp[64];
    if (!ok(c, id)) return;
    json_t *arr = c->val[id];
    fpath(id, fp, sizeof fp);
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v)) {
            snprintf(p, sizeof p, "%s[%zu]", fp, i);
            fail(c, "V008", p, "expected integer expert id, got %s", describe(v, d, sizeof d));
            return;
        }
    }
    for (size_t i = 0; i < n && i < n_want; i++) {
        if ((int64_t)json_integer_value(json_array_get(arr, i)) != want[i]) {
            fail(c, "V056", fp,
                 "differs from the recomputation at [%zu]: found %lld, expected %lld", i,
                 (long long)json_integer_value(json_array_get(arr, i)), (long long)want[i]);
            return;
        }
    }
    if (n != n_want)
        fail(c, "V056", fp, "has %zu entries, expected %zu (recomputed from expert_counts)", n,
             n_want);
}

static void check_stats(struct ctx *c, const int64_t *counts, size_t E)
{
    struct plena_trace_stats st;
    char a[40], b[40];
    if (plena_trace_stats_compute(counts, E, &st, NULL)) return;
    if (ok(c, PLENA_TF_ROUTING_DUPLICATE_FACTOR)) {
        double v = json_number_value(c->val[PLENA_TF_ROUTING_DUPLICATE_FACTOR]);
        double want = st.duplicate_factor;
        if (!(fabs(v - want) <= 1e-9 * fabs(want))) {
            plena_json_fmt_double(a, sizeof a, v);
            plena_json_fmt_double(b, sizeof b, want);
            fail(c, "V054", "routing.duplicate_factor",
                 "is %s, expected %s (sum of counts / active experts, relative tolerance 1e-9)", a,
                 b);
        }
    }
    if (ok(c, PLENA_TF_ROUTING_GINI)) {
        double v = json_number_value(c->val[PLENA_TF_ROUTING_GINI]);
        if (!(fabs(v - st.gini) <= 1e-9)) {
            plena_json_fmt_double(a, sizeof a, v);
            plena_json_fmt_double(b, sizeof b, st.gini);
            fail(c, "V054", "routing.gini",
                 "is %s, expected %s (recomputed from expert_counts, tolerance 1e-9)", a, b);
        }
    }
    int64_t *list = plena_calloc(E ? E : 1, sizeof *list);
    if (!list) {
        c->nomem = 1;
        return;
    }
    check_list(c, PLENA_TF_ROUTING_ACTIVE_EXPERTS, list,
               plena_trace_active_experts(counts, E, list));
    check_list(c, PLENA_TF_ROUTING_HOT_EXPERTS, list, plena_trace_hot_experts(counts, E, list));
    check_list(c, PLENA_TF_ROUTING_COLD_EXPERTS, list, plena_trace_cold_experts(counts, E, list));
    plena_free(list);
}

/* V094: with a capacity rule, an expert keeps (weight > 0) at most
 * plena_router_capacity pairs; kept is scratch of E entries. */
static void check_capacity(struct ctx *c, const struct routing_dims *dm, int64_t *kept)
{
    const struct plena_router *r = &c->router;
    if (c->has_router != 1 || r->capacity == PLENA_CAPACITY_NONE || dm->T < 0 || dm->K < 0 ||
        dm->E <= 0)
        return;
    json_t *ids = c->val[PLENA_TF_ROUTING_TOPK_INDICES],
           *ws = c->val[PLENA_TF_ROUTING_TOPK_WEIGHTS];
    memset(kept, 0, (size_t)dm->E * sizeof *kept);
    for (size_t t = 0; t < json_array_size(ids); t++)
        for (size_t j = 0; j < json_array_size(json_array_get(ids, t)); j++) {
            const json_t *w = json_array_get(json_array_get(ws, t), j);
            if (json_is_number(w) && json_number_value(w) > 0)
                kept[json_integer_value(json_array_get(json_array_get(ids, t), j))]++;
        }
    const uint64_t cap =
        plena_router_capacity(r, (uint32_t)dm->T, (uint32_t)dm->E, (uint32_t)dm->K);
    size_t n_bad = 0;
    for (int64_t e = 0; e < dm->E; e++) {
        if ((uint64_t)kept[e] <= cap) continue;
        if (n_bad++ >= 10) {
            c->r->valid = 0;
            c->r->n_errors_truncated++;
            continue;
        }
        fail(c, "V094", "routing.topk_weights",
             "expert %lld keeps %lld pairs with weight > 0, expected at most its capacity %llu "
             "(model.router capacity %s: over-capacity pairs have weight 0)",
             (long long)e, (long long)kept[e], (unsigned long long)cap,
             plena_capacity_rule_name(r->capacity));
    }
}

static void check_routing(struct ctx *c)
{
    struct routing_dims dm = {-1, -1, -1};
    if (!ok(c, PLENA_TF_ROUTING)) return;
    if (ok(c, PLENA_TF_WORKLOAD_TOKEN_COUNT)) dm.T = ival(c, PLENA_TF_WORKLOAD_TOKEN_COUNT);
    if (ok(c, PLENA_TF_MODEL_TOP_K)) dm.K = ival(c, PLENA_TF_MODEL_TOP_K);
    if (ok(c, PLENA_TF_MODEL_NUM_EXPERTS)) dm.E = ival(c, PLENA_TF_MODEL_NUM_EXPERTS);
    if (dm.T >= 0 && dm.K >= 0 && dm.T * dm.K > ((int64_t)1 << 28)) {
        fail(c, "V080", "(document)",
             "token_count x top_k = %lld x %lld = %lld exceeds 2^28 = 268435456 slots",
             (long long)dm.T, (long long)dm.K, (long long)(dm.T * dm.K));
        return;
    }
    size_t E = dm.E >= 0 ? (size_t)dm.E : 0;
    int64_t *hist = plena_calloc(E + 1, sizeof *hist);
    int64_t *seen = plena_calloc(2 * E + 2, sizeof *seen);
    int64_t *counts = plena_calloc(E + 1, sizeof *counts);
    if (!hist || !seen || !counts) {
        c->nomem = 1;
        goto out;
    }
    int hist_ok = 0, counts_ok = 0;
    if (ok(c, PLENA_TF_ROUTING_TOPK_INDICES)) hist_ok = walk_indices(c, &dm, hist, seen);
    if (ok(c, PLENA_TF_ROUTING_TOPK_WEIGHTS)) walk_weights(c, &dm);
    if (ok(c, PLENA_TF_ROUTING_EXPERT_COUNTS)) counts_ok = read_counts(c, &dm, counts);
    if (hist_ok && ok(c, PLENA_TF_ROUTING_TOPK_WEIGHTS)) check_capacity(c, &dm, seen);
    if (counts_ok) {
        int64_t sum = 0;
        int over = 0;
        for (size_t e = 0; e < E; e++)
            over |= __builtin_add_overflow(sum, counts[e], &sum);
        if (over) {
            fail(c, "V052", "routing.expert_counts", "sum of counts overflows int64");
            counts_ok = 0;
        } else if (dm.T >= 0 && dm.K >= 0 && sum != dm.T * dm.K) {
            fail(c, "V052", "routing.expert_counts",
                 "sum is %lld, expected token_count x top_k = %lld x %lld = %lld", (long long)sum,
                 (long long)dm.T, (long long)dm.K, (long long)(dm.T * dm.K));
            counts_ok = 0; /* wrong counts: V053/V054/V056 would restate it */
        }
    }
    if (counts_ok && hist_ok) {
        size_t n_bad = 0;
        char p[64];
        for (size_t e = 0; e < E; e++) {
            if (counts[e] == hist[e]) continue;
            if (n_bad++ >= 10) {
                /* "first 10 reported": the rest are counted as truncated. */
                c->r->valid = 0;
                c->r->n_errors_truncated++;
                continue;
            }
            snprintf(p, sizeof p, "routing.expert_counts[%zu]", e);
            fail(c, "V053", p, "is %lld but topk_indices route %lld slots to expert %zu",
                 (long long)counts[e], (long long)hist[e], e);
        }
        if (n_bad) counts_ok = 0; /* statistics of wrong counts would restate V053 */
    }
    if (counts_ok) check_stats(c, counts, E);
out:
    plena_free(hist);
    plena_free(seen);
    plena_free(counts);
}

static void check_replay(struct ctx *c)
{
    if (ok(c, PLENA_TF_REPLAY_MLEN) && ok(c, PLENA_TF_REPLAY_BLEN)) {
        int64_t m = ival(c, PLENA_TF_REPLAY_MLEN), b = ival(c, PLENA_TF_REPLAY_BLEN);
        if (b > m)
            fail(c, "V060", "replay.blen", "is %lld, expected 1..mlen (%lld)", (long long)b,
                 (long long)m);
        else if (m % b != 0)
            fail(c, "V061", "replay.blen", "%lld does not divide mlen %lld", (long long)b,
                 (long long)m);
    }
}

static void check_artifacts(struct ctx *c)
{
    if (c->version != 1 || !ok(c, PLENA_TF_ARTIFACTS)) return;
    static const enum plena_trace_field v1[] = {PLENA_TF_ARTIFACTS_REFERENCE_PT,
                                                PLENA_TF_ARTIFACTS_L1_GOLDEN_PT};
    char p[64];
    for (unsigned i = 0; i < 2; i++)
        if (ok(c, v1[i]) && json_is_null(c->val[v1[i]]))
            fail(c, "V070", fpath(v1[i], p, sizeof p), "is null, expected a string in schema v1");
}

static void check_logical_bytes(struct ctx *c)
{
    if (!ok(c, PLENA_TF_LOGICAL_BYTES) || !ok(c, PLENA_TF_WORKLOAD_TOKEN_COUNT) ||
        !ok(c, PLENA_TF_MODEL_HIDDEN_SIZE) || !ok(c, PLENA_TF_MODEL_TOP_K))
        return;
    int64_t T = ival(c, PLENA_TF_WORKLOAD_TOKEN_COUNT), H = ival(c, PLENA_TF_MODEL_HIDDEN_SIZE),
            K = ival(c, PLENA_TF_MODEL_TOP_K);
    /* T <= 2^24, H <= 2^16, K <= 255: every product fits int64. */
    const struct {
        enum plena_trace_field id;
        int64_t want;
        const char *formula;
    } lb[] = {{PLENA_TF_LB_INPUT_HIDDEN, T * H * 2, "token_count x hidden_size x 2"},
              {PLENA_TF_LB_ROUTED_HIDDEN, T * K * H * 2, "token_count x top_k x hidden_size x 2"},
              {PLENA_TF_LB_ROUTE_WEIGHT, T * K * 2, "token_count x top_k x 2"}};
    char p[96];
    for (unsigned i = 0; i < 3; i++) {
        if (!ok(c, lb[i].id) || ival(c, lb[i].id) == lb[i].want) continue;
        fail(c, "V071", fpath(lb[i].id, p, sizeof p), "is %lld, expected %s = %lld",
             (long long)ival(c, lb[i].id), lb[i].formula, (long long)lb[i].want);
    }
}

/* ---- parsing ---- */

/* Depth of nested containers, stopping as soon as the limit is passed. */
static int too_deep(const json_t *v, int depth, int limit)
{
    if (!json_is_object(v) && !json_is_array(v)) return 0;
    if (depth > limit) return 1;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (too_deep(json_array_get(v, i), depth + 1, limit)) return 1;
        return 0;
    }
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)v, k, m) if (too_deep(m, depth + 1, limit)) return 1;
    return 0;
}

int plena_trace_validate_bytes(const char *bytes, size_t len,
                               const struct plena_trace_validate_options *opt,
                               struct plena_trace_report *report)
{
    struct plena_trace_validate_options def = {0};
    if (!opt) opt = &def;
    plena_trace_report_free(report);
    report->valid = 1;
    struct ctx *c = plena_calloc(1, sizeof *c);
    if (!c) return PLENA_E_NOMEM;
    c->r = report;
    c->strict = opt->strict;
    c->max_errors = opt->max_errors ? opt->max_errors : PLENA_TRACE_MAX_ERRORS_DEFAULT;
    c->version = 2;
    size_t max_bytes = opt->max_bytes ? opt->max_bytes : PLENA_TRACE_MAX_BYTES_DEFAULT;
    json_t *root = NULL;
    if (len > max_bytes) {
        fail(c, "V001", "(document)", "document is more than --max-bytes %zu bytes", max_bytes);
        goto done;
    }
    if (!bytes) bytes = "";
    json_error_t je;
    root = json_loadb(bytes, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        if (report_add(report, 0, c->max_errors, 0, "V001", "(document)", je.line,
                       "invalid JSON at line %d, column %d: %s", je.line, je.column, je.text))
            c->nomem = 1;
        else if (report->n_errors)
            report->errors[report->n_errors - 1].column = je.column;
        goto done;
    }
    if (too_deep(root, 1, PLENA_TRACE_MAX_DEPTH)) {
        fail(c, "V001", "(document)", "nesting depth exceeds %d", PLENA_TRACE_MAX_DEPTH);
        goto done;
    }
    if (!json_is_object(root)) {
        char d[96];
        fail(c, "V002", "(document)", "expected a JSON object at the top level, got %s",
             describe(root, d, sizeof d));
        goto done;
    }
    c->st[PLENA_TF_ROOT] = ST_OK;
    c->val[PLENA_TF_ROOT] = root;
    check_object(c, PLENA_TF_ROOT, root, "");
    if (ok(c, PLENA_TF_SCHEMA_VERSION)) report->schema_version = c->version;
    if (ok(c, PLENA_TF_TRACE_ID))
        snprintf(report->trace_id, sizeof report->trace_id, "%s",
                 json_string_value(c->val[PLENA_TF_TRACE_ID]));
    check_top(c);
    check_model(c);
    check_workload(c);
    check_routing(c);
    check_replay(c);
    check_artifacts(c);
    check_logical_bytes(c);
done:
    json_decref(root);
    int nomem = c->nomem;
    plena_free(c);
    if (nomem) {
        report->valid = 0;
        return PLENA_E_NOMEM;
    }
    return report->valid ? 0 : PLENA_E_FAILED;
}

/* ---- trace sets ---- */

void plena_trace_set_report_free(struct plena_trace_set_report *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_entries; i++)
        plena_trace_report_free(&r->entries[i].report);
    plena_free(r->entries);
    memset(r, 0, sizeof *r);
}

struct id_line {
    const char *id;
    long line;
    size_t entry;
};

static int cmp_id_line(const void *a, const void *b)
{
    const struct id_line *x = a, *y = b;
    int d = strcmp(x->id, y->id);
    if (d) return d;
    return x->line < y->line ? -1 : x->line > y->line;
}

int plena_trace_validate_set_bytes(const char *bytes, size_t len,
                                   const struct plena_trace_validate_options *opt,
                                   struct plena_trace_set_report *rep)
{
    struct plena_trace_validate_options def = {0};
    if (!opt) opt = &def;
    size_t max_errors = opt->max_errors ? opt->max_errors : PLENA_TRACE_MAX_ERRORS_DEFAULT;
    plena_trace_set_report_free(rep);
    rep->valid = 1;
    struct plena_trace_lines it = {bytes, len, 0, 0};
    const char *s;
    size_t n;
    while (plena_trace_lines_next(&it, &s, &n)) {
        long line = it.line;
        if (plena_grow((void **)&rep->entries, &rep->cap_entries, rep->n_entries + 1,
                       sizeof *rep->entries))
            return PLENA_E_NOMEM;
        struct plena_trace_set_entry *e = &rep->entries[rep->n_entries++];
        e->line = line;
        plena_trace_report_init(&e->report);
        int rc = plena_trace_validate_bytes(s, n, opt, &e->report);
        if (rc == PLENA_E_NOMEM) return rc;
        for (size_t i = 0; i < e->report.n_errors; i++)
            e->report.errors[i].line = line;
        for (size_t i = 0; i < e->report.n_warnings; i++)
            e->report.warnings[i].line = line;
    }
    /* V100: sort (trace_id, line); every repeat after the first is an error. */
    struct id_line *ids = plena_calloc(rep->n_entries + 1, sizeof *ids);
    if (!ids) return PLENA_E_NOMEM;
    for (size_t i = 0; i < rep->n_entries; i++)
        ids[i] = (struct id_line){rep->entries[i].report.trace_id, rep->entries[i].line, i};
    plena_qsort(ids, rep->n_entries, sizeof *ids, cmp_id_line);
    size_t first = 0;
    for (size_t k = 1; k < rep->n_entries; k++) {
        if (strcmp(ids[k].id, ids[first].id)) {
            first = k;
            continue;
        }
        if (!ids[k].id[0]) continue;
        struct plena_trace_report *r = &rep->entries[ids[k].entry].report;
        if (report_add(r, 0, max_errors, 0, "V100", "trace_id", ids[k].line,
                       "trace_id \"%s\" already used at line %ld of this set", ids[k].id,
                       ids[first].line)) {
            plena_free(ids);
            return PLENA_E_NOMEM;
        }
    }
    plena_free(ids);
    for (size_t i = 0; i < rep->n_entries; i++)
        if (!rep->entries[i].report.valid) rep->valid = 0;
    return rep->valid ? 0 : PLENA_E_FAILED;
}

/* One line iterator for trace sets: skips blank lines, counts every
 * line; shared by the validator, builder, importers and the CLI. */
int plena_trace_lines_next(struct plena_trace_lines *it, const char **s, size_t *n)
{
    while (it->pos < it->len) {
        const char *b = it->bytes, *nl = memchr(b + it->pos, '\n', it->len - it->pos);
        size_t start = it->pos, end = nl ? (size_t)(nl - b) : it->len;
        it->line++;
        it->pos = end + 1;
        for (size_t i = start; i < end; i++)
            if (b[i] != ' ' && b[i] != '\t' && b[i] != '\r') {
                *s = b + start;
                *n = end - start;
                return 1;
            }
    }
    return 0;
}

/* The one rule for "is this file a trace set" (replay, trace validate,
 * stats, pack; campaign's loader asks the same). */
int plena_trace_path_is_set(const char *path, int force_set)
{
    size_t n = strlen(path);
    return force_set || (n >= 6 && !strcmp(path + n - 6, ".jsonl"));
}
