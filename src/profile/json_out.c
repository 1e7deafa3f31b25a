/* Deterministic JSON text for plena's result files (profile v4, run-stats
 * v2, gate summaries): 2-space indent, keys in insertion order, reals with
 * C "%.17g" exactly as spec/timing-and-profile.md 7 says (jansson's own
 * dumper trims exponent digits, "e-8" instead of "e-08"), a ".0" appended
 * when %.17g yields an integer-looking text so readers still see a real.
 * Reads jansson trees; does not parse. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "profile/profile_json.h"

static void indent(struct plena_buf *b, int depth)
{
    for (int i = 0; i < depth; i++)
        plena_buf_append(b, "  ", 2);
}

static void put_string(struct plena_buf *b, const char *s, size_t n)
{
    plena_buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': plena_buf_append(b, "\\\"", 2); break;
        case '\\': plena_buf_append(b, "\\\\", 2); break;
        case '\n': plena_buf_append(b, "\\n", 2); break;
        case '\r': plena_buf_append(b, "\\r", 2); break;
        case '\t': plena_buf_append(b, "\\t", 2); break;
        case '\b': plena_buf_append(b, "\\b", 2); break;
        case '\f': plena_buf_append(b, "\\f", 2); break;
        default:
            if (c < 0x20)
                plena_buf_printf(b, "\\u%04x", c);
            else
                plena_buf_append(b, &s[i], 1);
        }
    }
    plena_buf_append(b, "\"", 1);
}

void plena_json_format_real(double v, char *out, size_t n)
{
    if (!isfinite(v)) {
        snprintf(out, n, "null"); /* JSON has no NaN/Inf; never produced by plena's figures */
        return;
    }
    snprintf(out, n, "%.17g", v);
    if (!strpbrk(out, ".eE")) {
        size_t l = strlen(out);
        if (l + 2 < n) memcpy(out + l, ".0", 3);
    }
}

static void dump(struct plena_buf *b, json_t *v, int depth)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (json_object_size(v) == 0) {
            plena_buf_append(b, "{}", 2);
            return;
        }
        plena_buf_append(b, "{\n", 2);
        size_t i = 0, n = json_object_size(v);
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            indent(b, depth + 1);
            put_string(b, k, strlen(k));
            plena_buf_append(b, ": ", 2);
            dump(b, x, depth + 1);
            i++;
            if (i < n)
                plena_buf_append(b, ",\n", 2);
            else
                plena_buf_append(b, "\n", 1);
        }
        indent(b, depth);
        plena_buf_append(b, "}", 1);
        return;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (n == 0) {
            plena_buf_append(b, "[]", 2);
            return;
        }
        plena_buf_append(b, "[\n", 2);
        for (size_t i = 0; i < n; i++) {
            indent(b, depth + 1);
            dump(b, json_array_get(v, i), depth + 1);
            if (i + 1 < n)
                plena_buf_append(b, ",\n", 2);
            else
                plena_buf_append(b, "\n", 1);
        }
        indent(b, depth);
        plena_buf_append(b, "]", 1);
        return;
    }
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); return;
    case JSON_INTEGER: plena_buf_printf(b, "%lld", (long long)json_integer_value(v)); return;
    case JSON_REAL:
        plena_json_format_real(json_real_value(v), num, sizeof num);
        plena_buf_puts(b, num);
        return;
    case JSON_TRUE: plena_buf_append(b, "true", 4); return;
    case JSON_FALSE: plena_buf_append(b, "false", 5); return;
    case JSON_NULL: plena_buf_append(b, "null", 4); return;
    }
}

int plena_json_render(json_t *root, char **text, size_t *len, struct plena_err *err)
{
    struct plena_buf b;
    plena_buf_init(&b);
    dump(&b, root, 0);
    plena_buf_append(&b, "\n", 1);
    if (b.failed) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "json", "out of memory rendering JSON");
    }
    *text = b.data;
    *len = b.len; /* plena_buf keeps a NUL after the content */
    return 0;
}

int plena_json_write(json_t *root, const char *path, struct plena_err *err)
{
    char *text;
    size_t len;
    int rc = plena_json_render(root, &text, &len, err);
    if (rc) return rc;
    rc = plena_file_write_atomic(path, text, len, err);
    plena_free(text);
    return rc;
}
