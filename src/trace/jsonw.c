/* JSON writing in the two forms of spec/traces-and-replay.md 0.3/0.4: pretty
 * (keys sorted by byte order, 2-space indent, arrays of scalars on one line,
 * final newline) and canonical (no whitespace, for hashing). Numbers use the
 * shortest round-tripping %.{p}g; every real inside a `topk_weights` or
 * `route_weights` array is a binary32 route weight and gets the binary32 rule
 * of 0.3 (p = 1..9, read back with strtof). Does not write NaN/Inf (callers reject them
 * earlier; a non-finite value is written as null as a last resort). */
#include "trace/trace.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

void plena_trace_format_double(char *buf, size_t n, double v)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void plena_trace_format_float(char *buf, size_t n, float v)
{
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, n, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

static int put_string(struct plena_buf *b, const char *s, size_t len)
{
    if (plena_buf_append(b, "\"", 1)) return -1;
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20) {
            if (plena_buf_append(b, s + start, i - start)) return -1;
            if (c == '"' || c == '\\') {
                char esc[2] = {'\\', (char)c};
                if (plena_buf_append(b, esc, 2)) return -1;
            } else if (plena_buf_printf(b, "\\u%04x", c)) {
                return -1;
            }
            start = i + 1;
        }
    }
    if (plena_buf_append(b, s + start, len - start)) return -1;
    return plena_buf_append(b, "\"", 1);
}

static int is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

static int indent(struct plena_buf *b, int level)
{
    if (plena_buf_append(b, "\n", 1)) return -1;
    for (int i = 0; i < level; i++)
        if (plena_buf_append(b, "  ", 2)) return -1;
    return 0;
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* f32: v lies inside a route-weight array (binary32 values). */
static int write_value(struct plena_buf *b, const json_t *v, int pretty, int level, int f32)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_NULL: return plena_buf_puts(b, "null");
    case JSON_TRUE: return plena_buf_puts(b, "true");
    case JSON_FALSE: return plena_buf_puts(b, "false");
    case JSON_INTEGER: return plena_buf_printf(b, "%lld", (long long)json_integer_value(v));
    case JSON_REAL: {
        double d = json_real_value(v);
        if (!isfinite(d)) return plena_buf_puts(b, "null");
        if (f32 && fabs(d) <= FLT_MAX)
            plena_trace_format_float(num, sizeof num, (float)d);
        else
            plena_trace_format_double(num, sizeof num, d);
        return plena_buf_puts(b, num);
    }
    case JSON_STRING: return put_string(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (n == 0) return plena_buf_puts(b, "[]");
        int flat = 1;
        for (size_t i = 0; i < n; i++)
            if (!is_scalar(json_array_get(v, i))) flat = 0;
        if (plena_buf_puts(b, "[")) return -1;
        for (size_t i = 0; i < n; i++) {
            if (i && plena_buf_puts(b, pretty && flat ? ", " : ",")) return -1;
            if (pretty && !flat && indent(b, level + 1)) return -1;
            if (write_value(b, json_array_get(v, i), pretty, level + 1, f32)) return -1;
        }
        if (pretty && !flat && indent(b, level)) return -1;
        return plena_buf_puts(b, "]");
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        if (n == 0) return plena_buf_puts(b, "{}");
        const char **keys = plena_calloc(n, sizeof *keys);
        if (!keys) return -1;
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) if (k < n) keys[k++] = key;
        qsort(keys, k, sizeof *keys, cmp_keys);
        int rc = plena_buf_puts(b, "{");
        for (size_t i = 0; i < k && !rc; i++) {
            if (i) rc = plena_buf_puts(b, ",");
            if (!rc && pretty) rc = indent(b, level + 1);
            if (!rc) rc = put_string(b, keys[i], strlen(keys[i]));
            if (!rc) rc = plena_buf_puts(b, pretty ? ": " : ":");
            /* The binary32 rule covers the weight arrays only, not a member
             * of that name holding an object (the JSON Schema has one). */
            const json_t *m = json_object_get(v, keys[i]);
            int w = json_is_array(m) &&
                    (!strcmp(keys[i], "topk_weights") || !strcmp(keys[i], "route_weights"));
            if (!rc) rc = write_value(b, m, pretty, level + 1, w);
        }
        plena_free(keys);
        if (!rc && pretty) rc = indent(b, level);
        if (!rc) rc = plena_buf_puts(b, "}");
        return rc;
    }
    }
    return -1;
}

int plena_trace_json_write(struct plena_buf *b, const struct json_t *v, int pretty)
{
    if (write_value(b, v, pretty, 0, 0)) return -1;
    if (pretty && plena_buf_puts(b, "\n")) return -1;
    return b->failed ? -1 : 0;
}
