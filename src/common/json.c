/* The JSON text writer and number spellings of docs/formats.md
 * "Conventions": pretty, canonical and result-file forms (see json.h).
 * Strings escape only '"', '\\' and control bytes (as \u00XX, or the
 * two-character forms in the result-file form); other bytes, UTF-8
 * included, are copied raw. */
#include "common/json.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

void plena_json_fmt_double(char *buf, size_t n, double v)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void plena_json_fmt_float(char *buf, size_t n, float v)
{
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, n, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

void plena_json_fmt_real17(char *buf, size_t n, double v)
{
    if (!isfinite(v)) {
        snprintf(buf, n, "null"); /* JSON has no NaN/Inf; never produced by plena's figures */
        return;
    }
    snprintf(buf, n, "%.17g", v);
    if (!strpbrk(buf, ".eE")) {
        size_t l = strlen(buf);
        if (l + 2 < n) memcpy(buf + l, ".0", 3);
    }
}

/* The two-character escape of a control byte in the result-file form, or 0. */
static char short_escape(unsigned char c)
{
    switch (c) {
    case '\b': return 'b';
    case '\f': return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
    }
}

int plena_json_put_string(struct plena_buf *b, const char *s, size_t len, unsigned flags)
{
    const int short_esc = (flags & PLENA_JSON_PROFILE_FORM) != 0;
    if (plena_buf_append(b, "\"", 1)) return -1;
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '"' && c != '\\' && c >= 0x20) continue;
        if (plena_buf_append(b, s + start, i - start)) return -1;
        char e = c == '"' || c == '\\' ? (char)c : short_esc ? short_escape(c) : 0;
        if (e) {
            char esc[2] = {'\\', e};
            if (plena_buf_append(b, esc, 2)) return -1;
        } else if (plena_buf_printf(b, "\\u%04x", c)) {
            return -1;
        }
        start = i + 1;
    }
    if (plena_buf_append(b, s + start, len - start)) return -1;
    return plena_buf_append(b, "\"", 1);
}

static int is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

static int newline_indent(struct plena_buf *b, int level)
{
    if (plena_buf_append(b, "\n", 1)) return -1;
    for (int i = 0; i < level; i++)
        if (plena_buf_append(b, "  ", 2)) return -1;
    return 0;
}

static int cmp_keys(const void *a, const void *b)
{
    /* strcmp compares as unsigned char: byte order, as both forms ask */
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* f32: v lies inside a route-weight array (PLENA_JSON_ROUTE_WEIGHTS_F32). */
static int put_real(struct plena_buf *b, double d, unsigned flags, int f32)
{
    char num[64];
    if (flags & PLENA_JSON_PROFILE_FORM) {
        plena_json_fmt_real17(num, sizeof num, d);
        return plena_buf_puts(b, num);
    }
    if (!isfinite(d)) return -1;
    if (f32 && fabs(d) <= FLT_MAX)
        plena_json_fmt_float(num, sizeof num, (float)d);
    else
        plena_json_fmt_double(num, sizeof num, d);
    return plena_buf_puts(b, num);
}

static int is_weight_array(unsigned flags, const char *key, const json_t *m)
{
    return (flags & PLENA_JSON_ROUTE_WEIGHTS_F32) && json_is_array(m) &&
           (!strcmp(key, "topk_weights") || !strcmp(key, "route_weights"));
}

static int write_value(struct plena_buf *b, const json_t *v, unsigned flags, int level, int f32);

static int write_array(struct plena_buf *b, const json_t *v, unsigned flags, int level, int f32)
{
    int pretty = (flags & (PLENA_JSON_PRETTY | PLENA_JSON_PROFILE_FORM)) != 0;
    size_t n = json_array_size(v);
    if (n == 0) return plena_buf_puts(b, "[]");
    int flat = !(flags & PLENA_JSON_PROFILE_FORM);
    for (size_t i = 0; i < n; i++)
        if (!is_scalar(json_array_get(v, i))) flat = 0;
    if (plena_buf_puts(b, "[")) return -1;
    for (size_t i = 0; i < n; i++) {
        if (i && plena_buf_puts(b, pretty && flat ? ", " : ",")) return -1;
        if (pretty && !flat && newline_indent(b, level + 1)) return -1;
        if (write_value(b, json_array_get(v, i), flags, level + 1, f32)) return -1;
    }
    if (pretty && !flat && newline_indent(b, level)) return -1;
    return plena_buf_puts(b, "]");
}

static int write_member(struct plena_buf *b, const char *key, const json_t *m, unsigned flags,
                        int level, int first)
{
    int pretty = (flags & (PLENA_JSON_PRETTY | PLENA_JSON_PROFILE_FORM)) != 0;
    int rc = first ? 0 : plena_buf_puts(b, ",");
    if (!rc && pretty) rc = newline_indent(b, level + 1);
    if (!rc) rc = plena_json_put_string(b, key, strlen(key), flags);
    if (!rc) rc = plena_buf_puts(b, pretty ? ": " : ":");
    if (!rc) rc = write_value(b, m, flags, level + 1, is_weight_array(flags, key, m));
    return rc;
}

static int write_object(struct plena_buf *b, const json_t *v, unsigned flags, int level)
{
    int pretty = (flags & (PLENA_JSON_PRETTY | PLENA_JSON_PROFILE_FORM)) != 0;
    size_t n = json_object_size(v);
    if (n == 0) return plena_buf_puts(b, "{}");
    const char *key;
    json_t *val;
    int rc = plena_buf_puts(b, "{");
    if (flags & PLENA_JSON_PROFILE_FORM) { /* insertion order: the documented key order */
        int first = 1;
        json_object_foreach((json_t *)v, key, val)
        {
            if (!rc) rc = write_member(b, key, val, flags, level, first);
            first = 0;
        }
    } else {
        const char **keys = plena_calloc(n, sizeof *keys);
        if (!keys) {
            b->failed = 1;
            return -1;
        }
        size_t k = 0;
        json_object_foreach((json_t *)v, key, val)
        {
            if (k < n) keys[k++] = key;
        }
        plena_qsort(keys, k, sizeof *keys, cmp_keys);
        for (size_t i = 0; i < k && !rc; i++)
            rc = write_member(b, keys[i], json_object_get(v, keys[i]), flags, level, i == 0);
        plena_free(keys);
    }
    if (!rc && pretty) rc = newline_indent(b, level);
    if (!rc) rc = plena_buf_puts(b, "}");
    return rc;
}

static int write_value(struct plena_buf *b, const json_t *v, unsigned flags, int level, int f32)
{
    if ((flags & PLENA_JSON_SHALLOW) && level > PLENA_JSON_SHALLOW_DEPTH) return -1;
    switch (json_typeof(v)) {
    case JSON_NULL: return plena_buf_puts(b, "null");
    case JSON_TRUE: return plena_buf_puts(b, "true");
    case JSON_FALSE: return plena_buf_puts(b, "false");
    case JSON_INTEGER: return plena_buf_printf(b, "%lld", (long long)json_integer_value(v));
    case JSON_REAL: return put_real(b, json_real_value(v), flags, f32);
    case JSON_STRING:
        return plena_json_put_string(b, json_string_value(v), json_string_length(v), flags);
    case JSON_ARRAY: return write_array(b, v, flags, level, f32);
    case JSON_OBJECT: return write_object(b, v, flags, level);
    }
    return -1;
}

int plena_json_dump(struct plena_buf *b, const json_t *v, unsigned flags)
{
    if (write_value(b, v, flags, 0, 0)) return -1;
    if ((flags & (PLENA_JSON_PRETTY | PLENA_JSON_PROFILE_FORM)) && plena_buf_puts(b, "\n"))
        return -1;
    return b->failed ? -1 : 0;
}

int plena_json_render(const json_t *v, unsigned flags, char **text, size_t *len,
                      struct plena_err *err)
{
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = plena_json_dump(&b, v, flags);
    if (rc) {
        int oom = b.failed;
        plena_buf_free(&b);
        return oom ? PLENA_FAIL(err, PLENA_E_NOMEM, "json", "out of memory rendering JSON")
                   : PLENA_FAIL(err, PLENA_E_INTERNAL, "json",
                                "JSON not serialisable (non-finite number or too deep)");
    }
    *text = b.data;
    *len = b.len; /* plena_buf keeps a NUL after the content */
    return 0;
}

int plena_json_write_file(const json_t *v, unsigned flags, const char *path, struct plena_err *err)
{
    char *text = NULL; /* gcc -O3 cannot see that render sets both on success */
    size_t len = 0;
    int rc = plena_json_render(v, flags, &text, &len, err);
    if (rc) return rc;
    rc = plena_file_write_atomic(path, text, len, err);
    plena_free(text);
    return rc;
}
