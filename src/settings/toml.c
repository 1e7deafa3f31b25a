/* Strict TOML-subset reader (docs/formats.md "Settings file", Syntax).
 * Recursive descent over the bytes; the current line is tracked as newlines
 * are consumed so every key and value carries its line and column. Errors
 * for constructs outside the subset are explicit ("quoted keys are not
 * supported") so a user learns the rule instead of seeing a generic failure. */
#include "settings/toml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

/* How a table came to exist (TOML 1.0: a table may be defined once). */
enum {
    T_DEFINED = 1u, /* by a [header] */
    T_DOTTED = 2u,  /* by a dotted key inside a key/value line */
    T_INLINE = 4u,  /* an inline table { ... }: closed for extension */
    T_AOT = 8u      /* an array created by [[header]] */
};

#define MAX_KEY_PARTS 32
#define MAX_DEPTH     64

struct parser {
    const char *s;
    size_t n, pos;
    int line;
    size_t line_start;
    const char *name;
    struct plena_err *err;
    int failed;
};

struct keypart {
    char *text;
    int line, col;
    size_t pos; /* byte offset, for messages */
};

static int fail_at(struct parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *p, size_t pos, const char *fmt, ...)
{
    if (p->failed) return -1;
    p->failed = 1;
    /* Errors are rare: recompute line and column by scanning from the start. */
    int line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < pos && i < p->n; i++)
        if (p->s[i] == '\n') {
            line++;
            ls = i + 1;
        }
    char where[256], msg[640];
    snprintf(where, sizeof where, "%s:%d:%d", p->name, line, (int)(pos - ls + 1));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PLENA_FAIL(p->err, PLENA_E_INPUT, where, "syntax: %s", msg);
    return -1;
}

static int oom(struct parser *p)
{
    if (p->failed) return -1;
    p->failed = 1;
    PLENA_FAIL(p->err, PLENA_E_NOMEM, p->name, "out of memory while reading settings");
    return -1;
}

static int col(const struct parser *p)
{
    return (int)(p->pos - p->line_start + 1);
}

static int peek(const struct parser *p, size_t k)
{
    return p->pos + k < p->n ? (unsigned char)p->s[p->pos + k] : -1;
}

static int is_bare(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
        p->pos++;
}

static void skip_comment(struct parser *p)
{
    if (peek(p, 0) != '#') return;
    while (p->pos < p->n && p->s[p->pos] != '\n')
        p->pos++;
}

/* Consumes one newline ("\n" or "\r\n"); returns 1 if one was there. */
static int eat_newline(struct parser *p)
{
    size_t k = 0;
    if (peek(p, 0) == '\r' && peek(p, 1) == '\n') k = 1;
    if (peek(p, k) != '\n') return 0;
    p->pos += k + 1;
    p->line++;
    p->line_start = p->pos;
    return 1;
}

/* Whitespace, comments and newlines (between lines and inside arrays). */
static void skip_all(struct parser *p)
{
    for (;;) {
        skip_ws(p);
        skip_comment(p);
        if (!eat_newline(p)) return;
    }
}

static int expect_eol(struct parser *p)
{
    skip_ws(p);
    skip_comment(p);
    if (p->pos >= p->n || eat_newline(p)) return 0;
    int c = peek(p, 0);
    if (c == '\r') return fail_at(p, p->pos, "carriage return not followed by a newline");
    return fail_at(p, p->pos, "expected end of line, found '%c'", c);
}

static struct plena_toml_value *new_value(struct parser *p, enum plena_toml_type t, int line, int c)
{
    struct plena_toml_value *v = plena_calloc(1, sizeof *v);
    if (!v) {
        oom(p);
        return NULL;
    }
    v->type = t;
    v->line = line;
    v->col = c;
    return v;
}

void plena_toml_value_free(struct plena_toml_value *v)
{
    if (!v) return;
    for (size_t i = 0; i < v->n_entries; i++) {
        plena_free(v->entries[i].key);
        plena_toml_value_free(v->entries[i].value);
    }
    plena_free(v->entries);
    plena_free(v->str);
    plena_free(v);
}

/* Appends a member; takes ownership of key and value (frees them on OOM). */
static int add_entry(struct parser *p, struct plena_toml_value *t, char *key, int line, int c,
                     struct plena_toml_value *v)
{
    if (plena_grow((void **)&t->entries, &t->cap_entries, t->n_entries + 1, sizeof *t->entries)) {
        plena_free(key);
        plena_toml_value_free(v);
        return oom(p);
    }
    t->entries[t->n_entries++] = (struct plena_toml_entry){key, line, c, v};
    return 0;
}

static struct plena_toml_entry *find_mut(struct plena_toml_value *t, const char *key)
{
    for (size_t i = 0; i < t->n_entries; i++)
        if (t->entries[i].key && strcmp(t->entries[i].key, key) == 0) return &t->entries[i];
    return NULL;
}

/* ---- keys ---- */

static void free_parts(struct keypart *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        plena_free(k[i].text);
}

/* key = simple-key *( ws '.' ws simple-key ); simple keys are bare only. */
static int parse_key(struct parser *p, struct keypart *parts, size_t *n_parts)
{
    *n_parts = 0;
    for (;;) {
        skip_ws(p);
        int c = peek(p, 0);
        if (c == '"' || c == '\'') {
            fail_at(p, p->pos, "quoted keys are not supported");
            goto bad;
        }
        size_t start = p->pos;
        while (p->pos < p->n && is_bare((unsigned char)p->s[p->pos]))
            p->pos++;
        if (p->pos == start) {
            if (c < 0)
                fail_at(p, p->pos, "expected a key, found end of file");
            else if (c == '\n' || c == '\r')
                fail_at(p, p->pos, "expected a key, found end of line");
            else
                fail_at(p, p->pos, "expected a key, found '%c'", c);
            goto bad;
        }
        if (*n_parts == MAX_KEY_PARTS) {
            fail_at(p, start, "key has more than %d parts", MAX_KEY_PARTS);
            goto bad;
        }
        size_t len = p->pos - start;
        char *t = plena_malloc(len + 1);
        if (!t) {
            oom(p);
            goto bad;
        }
        memcpy(t, p->s + start, len);
        t[len] = 0;
        parts[*n_parts] = (struct keypart){t, p->line, (int)(start - p->line_start + 1), start};
        (*n_parts)++;
        skip_ws(p);
        if (peek(p, 0) != '.') return 0;
        p->pos++;
    }
bad:
    free_parts(parts, *n_parts);
    *n_parts = 0;
    return -1;
}

/* ---- values ---- */

static struct plena_toml_value *parse_value(struct parser *p, int depth);

static int put_utf8(char *out, size_t *o, unsigned long cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xC0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xE0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*o)++] = (char)(0xF0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    }
    return 0;
}

static struct plena_toml_value *parse_string(struct parser *p)
{
    int line = p->line, c0 = col(p);
    size_t open = p->pos;
    char q = p->s[p->pos];
    if (peek(p, 1) == q && peek(p, 2) == q) {
        fail_at(p, open, "multi-line strings are not supported");
        return NULL;
    }
    p->pos++;
    /* The decoded text is never longer than the source (escapes shrink). */
    size_t end = p->pos;
    while (end < p->n && p->s[end] != '\n')
        end++;
    char *out = plena_malloc(end - p->pos + 1);
    if (!out) {
        oom(p);
        return NULL;
    }
    size_t o = 0;
    for (;;) {
        int c = peek(p, 0);
        if (c < 0 || c == '\n' || (c == '\r' && peek(p, 1) == '\n')) {
            fail_at(p, open, "unterminated string");
            goto bad;
        }
        if (c == q) {
            p->pos++;
            break;
        }
        if ((c < 0x20 && c != '\t') || c == 0x7F) {
            fail_at(p, p->pos, "control character 0x%02X in string", c);
            goto bad;
        }
        if (c == '\\' && q == '"') {
            int e = peek(p, 1);
            size_t esc = p->pos;
            p->pos += 2;
            switch (e) {
            case '"': out[o++] = '"'; break;
            case '\\': out[o++] = '\\'; break;
            case 'b': out[o++] = '\b'; break;
            case 't': out[o++] = '\t'; break;
            case 'n': out[o++] = '\n'; break;
            case 'f': out[o++] = '\f'; break;
            case 'r': out[o++] = '\r'; break;
            case 'u':
            case 'U': {
                int nd = e == 'u' ? 4 : 8;
                unsigned long cp = 0;
                for (int k = 0; k < nd; k++) {
                    int h = peek(p, 0);
                    int d = (h >= '0' && h <= '9')   ? h - '0'
                            : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                            : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                     : -1;
                    if (d < 0) {
                        fail_at(p, esc, "\\%c escape needs %d hex digits", e, nd);
                        goto bad;
                    }
                    cp = cp * 16 + (unsigned long)d;
                    p->pos++;
                }
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
                    fail_at(p, esc, "\\%c%0*lX is not a Unicode scalar value", e, nd, cp);
                    goto bad;
                }
                put_utf8(out, &o, cp);
                break;
            }
            default:
                if (e < 0x20 || e > 0x7E)
                    fail_at(p, esc, "invalid escape sequence");
                else
                    fail_at(p, esc, "invalid escape sequence '\\%c'", e);
                goto bad;
            }
            continue;
        }
        out[o++] = (char)c;
        p->pos++;
    }
    out[o] = 0;
    struct plena_toml_value *v = new_value(p, PLENA_TOML_STRING, line, c0);
    if (!v) goto bad;
    v->str = out;
    v->str_len = o;
    return v;
bad:
    plena_free(out);
    return NULL;
}

static int is_digit_in(int c, int base)
{
    if (base == 16)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return c >= '0' && c < '0' + base;
}

/* Digits of `base` in tok[a..b) with single '_' only between digits, copied
 * without underscores to out (which receives a NUL). Returns 0 if well formed. */
static int digits_ok(const char *tok, size_t a, size_t b, int base, char *out, size_t *o)
{
    if (a >= b) return -1;
    for (size_t i = a; i < b; i++) {
        char c = tok[i];
        if (c == '_') {
            if (i == a || i + 1 == b || !is_digit_in((unsigned char)tok[i - 1], base) ||
                !is_digit_in((unsigned char)tok[i + 1], base))
                return -1;
            continue;
        }
        if (!is_digit_in((unsigned char)c, base)) return -1;
        out[(*o)++] = c;
    }
    out[*o] = 0;
    return 0;
}

static int looks_like_date(const char *tok, size_t n)
{
    if (memchr(tok, ':', n)) return 1;
    /* YYYY-MM... */
    if (n >= 5) {
        for (int i = 0; i < 4; i++)
            if (tok[i] < '0' || tok[i] > '9') return 0;
        return tok[4] == '-';
    }
    return 0;
}

static struct plena_toml_value *parse_number(struct parser *p)
{
    int line = p->line, c0 = col(p);
    size_t start = p->pos;
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (is_bare((unsigned char)c) || c == '+' || c == '.' || c == ':') {
            p->pos++;
            continue;
        }
        break;
    }
    const char *tok = p->s + start;
    size_t n = p->pos - start;
    if (n == 0) {
        int c = peek(p, 0);
        if (c < 0)
            fail_at(p, start, "expected a value, found end of file");
        else if (c == '\n' || c == '\r' || c == '#')
            fail_at(p, start, "expected a value, found end of line");
        else
            fail_at(p, start, "expected a value, found '%c'", c);
        return NULL;
    }
    if (looks_like_date(tok, n)) {
        fail_at(p, start, "date/time values are not supported");
        return NULL;
    }
    if (n > 128) {
        fail_at(p, start, "number too long");
        return NULL;
    }
    char buf[160];
    size_t o = 0;
    size_t a = 0;
    int neg = 0;
    if (tok[0] == '+' || tok[0] == '-') {
        neg = tok[0] == '-';
        buf[o++] = tok[0];
        a = 1;
    }
    /* inf / nan */
    if (n - a == 3 && (memcmp(tok + a, "inf", 3) == 0 || memcmp(tok + a, "nan", 3) == 0)) {
        struct plena_toml_value *v = new_value(p, PLENA_TOML_FLOAT, line, c0);
        if (!v) return NULL;
        if (tok[a] == 'i')
            v->f = neg ? -INFINITY : INFINITY;
        else
            v->f = neg ? -NAN : NAN;
        return v;
    }
    /* 0x / 0o / 0b: no sign allowed (TOML 1.0). */
    if (n >= 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'o' || tok[1] == 'b')) {
        int base = tok[1] == 'x' ? 16 : tok[1] == 'o' ? 8 : 2;
        o = 0;
        if (digits_ok(tok, 2, n, base, buf, &o)) {
            fail_at(p, start, "malformed number '%.*s'", (int)n, tok);
            return NULL;
        }
        errno = 0;
        char *endp;
        unsigned long long u = strtoull(buf, &endp, base);
        if (errno || u > (unsigned long long)INT64_MAX) {
            fail_at(p, start, "integer '%.*s' out of range", (int)n, tok);
            return NULL;
        }
        struct plena_toml_value *v = new_value(p, PLENA_TOML_INTEGER, line, c0);
        if (v) v->i = (int64_t)u;
        return v;
    }
    /* Split decimal into int part, optional fraction, optional exponent. */
    size_t i = a;
    while (i < n && ((tok[i] >= '0' && tok[i] <= '9') || tok[i] == '_'))
        i++;
    size_t int_end = i;
    int is_float = 0;
    if (int_end == a) goto malformed;
    /* leading zeros are not allowed ("0", "0.5" and "0e1" are fine) */
    if (tok[a] == '0' && int_end - a > 1) goto malformed;
    if (digits_ok(tok, a, int_end, 10, buf, &o)) goto malformed;
    if (i < n && tok[i] == '.') {
        is_float = 1;
        buf[o++] = '.';
        size_t f0 = ++i;
        while (i < n && ((tok[i] >= '0' && tok[i] <= '9') || tok[i] == '_'))
            i++;
        if (digits_ok(tok, f0, i, 10, buf, &o)) goto malformed;
    }
    if (i < n && (tok[i] == 'e' || tok[i] == 'E')) {
        is_float = 1;
        buf[o++] = 'e';
        i++;
        if (i < n && (tok[i] == '+' || tok[i] == '-')) buf[o++] = tok[i++];
        size_t e0 = i;
        while (i < n && ((tok[i] >= '0' && tok[i] <= '9') || tok[i] == '_'))
            i++;
        if (digits_ok(tok, e0, i, 10, buf, &o)) goto malformed;
    }
    if (i != n) goto malformed;
    buf[o] = 0;
    errno = 0;
    if (is_float) {
        struct plena_toml_value *v = new_value(p, PLENA_TOML_FLOAT, line, c0);
        if (v) v->f = strtod(buf, NULL);
        return v;
    }
    long long ll = strtoll(buf, NULL, 10);
    if (errno == ERANGE) {
        fail_at(p, start, "integer '%.*s' out of range", (int)n, tok);
        return NULL;
    }
    struct plena_toml_value *v = new_value(p, PLENA_TOML_INTEGER, line, c0);
    if (v) v->i = (int64_t)ll;
    return v;
malformed:
    fail_at(p, start, "malformed value '%.*s'", (int)n, tok);
    return NULL;
}

/* Consumes the next character when it is ch: 1, else 0. */
static int take(struct parser *p, int ch)
{
    if (peek(p, 0) != ch) return 0;
    p->pos++;
    return 1;
}

static struct plena_toml_value *parse_array(struct parser *p, int depth)
{
    size_t open = p->pos;
    struct plena_toml_value *arr = new_value(p, PLENA_TOML_ARRAY, p->line, col(p));
    if (!arr) return NULL;
    p->pos++;
    for (;;) {
        skip_all(p);
        if (take(p, ']')) return arr;
        if (p->pos >= p->n) {
            fail_at(p, open, "unterminated array");
            goto bad;
        }
        int line = p->line, c = col(p);
        struct plena_toml_value *v = parse_value(p, depth + 1);
        if (!v || add_entry(p, arr, NULL, line, c, v)) goto bad;
        skip_all(p);
        if (take(p, ',')) continue;
        if (take(p, ']')) return arr;
        int ch = peek(p, 0);
        if (ch < 0)
            fail_at(p, open, "unterminated array");
        else
            fail_at(p, p->pos, "expected ',' or ']' in array, found '%c'", ch);
        goto bad;
    }
bad:
    plena_toml_value_free(arr);
    return NULL;
}

static int assign(struct parser *p, struct plena_toml_value *table, struct keypart *parts,
                  size_t n_parts, struct plena_toml_value *v);
static int parse_keyval(struct parser *p, struct plena_toml_value *table, int depth);

static struct plena_toml_value *parse_inline_table(struct parser *p, int depth)
{
    size_t open = p->pos;
    struct plena_toml_value *t = new_value(p, PLENA_TOML_TABLE, p->line, col(p));
    if (!t) return NULL;
    p->pos++;
    skip_ws(p);
    if (take(p, '}')) {
        t->flags = T_INLINE;
        return t;
    }
    for (;;) {
        skip_ws(p);
        if (peek(p, 0) == '}') {
            fail_at(p, p->pos, "trailing comma in inline table");
            goto bad;
        }
        if (parse_keyval(p, t, depth + 1)) goto bad;
        skip_ws(p);
        if (take(p, ',')) continue;
        if (take(p, '}')) {
            t->flags = T_INLINE;
            return t;
        }
        int ch = peek(p, 0);
        if (ch < 0 || ch == '\n' || ch == '\r')
            fail_at(p, open, "inline table must be closed on the same line");
        else
            fail_at(p, p->pos, "expected ',' or '}' in inline table, found '%c'", ch);
        goto bad;
    }
bad:
    plena_toml_value_free(t);
    return NULL;
}

static int match_word(const struct parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->pos + n > p->n || memcmp(p->s + p->pos, w, n) != 0) return 0;
    int after = peek(p, n);
    return !(is_bare(after) || after == '.' || after == '+');
}

static struct plena_toml_value *parse_value(struct parser *p, int depth)
{
    if (depth > MAX_DEPTH) {
        fail_at(p, p->pos, "values nested more than %d deep", MAX_DEPTH);
        return NULL;
    }
    int c = peek(p, 0);
    if (c == '"' || c == '\'') return parse_string(p);
    if (c == '[') return parse_array(p, depth);
    if (c == '{') return parse_inline_table(p, depth);
    if (c == 't' || c == 'f') {
        int is_true = match_word(p, "true");
        if (is_true || match_word(p, "false")) {
            struct plena_toml_value *v = new_value(p, PLENA_TOML_BOOLEAN, p->line, col(p));
            if (!v) return NULL;
            v->b = is_true;
            p->pos += is_true ? 4 : 5;
            return v;
        }
    }
    return parse_number(p);
}

/* Stores v at parts (relative to table); dotted keys create or extend tables
 * that were themselves created by dotted keys. Takes ownership of v. */
static int assign(struct parser *p, struct plena_toml_value *table, struct keypart *parts,
                  size_t n_parts, struct plena_toml_value *v)
{
    struct plena_toml_value *t = table;
    for (size_t k = 0; k + 1 < n_parts; k++) {
        struct plena_toml_entry *e = find_mut(t, parts[k].text);
        if (!e) {
            struct plena_toml_value *nt =
                new_value(p, PLENA_TOML_TABLE, parts[k].line, parts[k].col);
            if (!nt) goto bad;
            nt->flags = T_DOTTED;
            char *key = plena_strdup(parts[k].text);
            if (!key) {
                plena_toml_value_free(nt);
                oom(p);
                goto bad;
            }
            if (add_entry(p, t, key, parts[k].line, parts[k].col, nt)) goto bad;
            e = &t->entries[t->n_entries - 1];
        } else if (e->value->type != PLENA_TOML_TABLE || !(e->value->flags & T_DOTTED)) {
            fail_at(p, parts[k].pos, "key '%s' is already defined", parts[k].text);
            goto bad;
        }
        t = e->value;
    }
    const struct keypart *last = &parts[n_parts - 1];
    if (find_mut(t, last->text)) {
        fail_at(p, last->pos, "duplicate key '%s'", last->text);
        goto bad;
    }
    char *key = plena_strdup(last->text);
    if (!key) {
        oom(p);
        goto bad;
    }
    return add_entry(p, t, key, last->line, last->col, v);
bad:
    plena_toml_value_free(v);
    return -1;
}

static int parse_keyval(struct parser *p, struct plena_toml_value *table, int depth)
{
    struct keypart parts[MAX_KEY_PARTS];
    size_t n_parts;
    if (parse_key(p, parts, &n_parts)) return -1;
    skip_ws(p);
    if (peek(p, 0) != '=') {
        int c = peek(p, 0);
        if (c < 0 || c == '\n' || c == '\r')
            fail_at(p, p->pos, "expected '=' after key '%s'", parts[n_parts - 1].text);
        else
            fail_at(p, p->pos, "expected '=' after key '%s', found '%c'", parts[n_parts - 1].text,
                    c);
        free_parts(parts, n_parts);
        return -1;
    }
    p->pos++;
    skip_ws(p);
    struct plena_toml_value *v = parse_value(p, depth);
    int rc = v ? assign(p, table, parts, n_parts, v) : -1;
    free_parts(parts, n_parts);
    return rc;
}

static void join_key(char *buf, size_t n, const struct keypart *parts, size_t n_parts)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t k = 0; k < n_parts && o < n; k++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", k ? "." : "", parts[k].text);
}

/* A new table or array of tables that a header names: entered in t under the
 * key part kp, positioned at the header, with flags. NULL after an error
 * (out of memory; the key and the value are freed). */
static struct plena_toml_value *add_header_value(struct parser *p, struct plena_toml_value *t,
                                                 const struct keypart *kp,
                                                 enum plena_toml_type type, unsigned flags,
                                                 int hline, int hcol)
{
    struct plena_toml_value *v = new_value(p, type, hline, hcol);
    char *key = v ? plena_strdup(kp->text) : NULL;
    if (!key) {
        plena_toml_value_free(v);
        oom(p);
        return NULL;
    }
    v->flags = flags;
    return add_entry(p, t, key, kp->line, kp->col, v) ? NULL : v;
}

/* [a.b.c] or [[a.b.c]]: returns the table that following key/values fill. */
static struct plena_toml_value *parse_header(struct parser *p, struct plena_toml_value *root)
{
    size_t open = p->pos;
    int hline = p->line, hcol = col(p);
    int aot = peek(p, 1) == '[';
    p->pos += aot ? 2 : 1;
    struct keypart parts[MAX_KEY_PARTS];
    size_t n_parts;
    if (parse_key(p, parts, &n_parts)) return NULL;
    struct plena_toml_value *result = NULL;
    char name[512];
    join_key(name, sizeof name, parts, n_parts);
    if (peek(p, 0) != ']' || (aot && peek(p, 1) != ']')) {
        fail_at(p, p->pos, "expected '%s' to close table header", aot ? "]]" : "]");
        goto done;
    }
    p->pos += aot ? 2 : 1;
    struct plena_toml_value *t = root;
    for (size_t k = 0; k + 1 < n_parts; k++) {
        struct plena_toml_entry *e = find_mut(t, parts[k].text);
        if (!e) {
            if (!add_header_value(p, t, &parts[k], PLENA_TOML_TABLE, 0, hline, hcol)) goto done;
            e = &t->entries[t->n_entries - 1];
        }
        struct plena_toml_value *v = e->value;
        if (v->type == PLENA_TOML_ARRAY && (v->flags & T_AOT)) {
            v = v->entries[v->n_entries - 1].value;
        } else if (v->type != PLENA_TOML_TABLE || (v->flags & T_INLINE)) {
            fail_at(p, open, "[%s]: '%s' is already defined as a value", name, parts[k].text);
            goto done;
        }
        t = v;
    }
    const struct keypart *last = &parts[n_parts - 1];
    struct plena_toml_entry *e = find_mut(t, last->text);
    if (aot) {
        if (!e) {
            if (!add_header_value(p, t, last, PLENA_TOML_ARRAY, T_AOT, hline, hcol)) goto done;
            e = &t->entries[t->n_entries - 1];
        } else if (e->value->type != PLENA_TOML_ARRAY || !(e->value->flags & T_AOT)) {
            fail_at(p, open, "[[%s]]: '%s' is already defined and is not an array of tables", name,
                    last->text);
            goto done;
        }
        struct plena_toml_value *nt = new_value(p, PLENA_TOML_TABLE, hline, hcol);
        if (!nt) goto done;
        nt->flags = T_DEFINED;
        if (add_entry(p, e->value, NULL, hline, hcol, nt)) goto done;
        result = nt;
    } else if (e) {
        struct plena_toml_value *v = e->value;
        if (v->type != PLENA_TOML_TABLE) {
            fail_at(p, open, "[%s]: key '%s' is already defined as a value", name, last->text);
        } else if (v->flags & (T_DEFINED | T_DOTTED | T_INLINE)) {
            fail_at(p, open, "table [%s] defined twice", name);
        } else {
            /* created implicitly by an earlier header: now it is defined here */
            v->flags |= T_DEFINED;
            v->line = hline;
            v->col = hcol;
            result = v;
        }
    } else {
        result = add_header_value(p, t, last, PLENA_TOML_TABLE, T_DEFINED, hline, hcol);
    }
done:
    free_parts(parts, n_parts);
    if (result && expect_eol(p)) result = NULL;
    return result;
}

static void init_parser(struct parser *p, const char *text, size_t len, const char *name,
                        struct plena_err *err)
{
    memset(p, 0, sizeof *p);
    p->s = text;
    p->n = len;
    p->line = 1;
    p->name = name ? name : "<settings>";
    p->err = err;
}

static int check_nul(struct parser *p)
{
    const char *z = memchr(p->s, 0, p->n);
    if (z) return fail_at(p, (size_t)(z - p->s), "NUL byte in file");
    return 0;
}

int plena_toml_parse(const char *text, size_t len, const char *name, struct plena_toml_doc *doc,
                     struct plena_err *err)
{
    struct parser p;
    init_parser(&p, text, len, name, err);
    doc->root = NULL;
    if (check_nul(&p)) return PLENA_E_INPUT;
    struct plena_toml_value *root = new_value(&p, PLENA_TOML_TABLE, 1, 1);
    if (!root) return PLENA_E_NOMEM;
    /* skip a UTF-8 byte order mark */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.pos = 3;
    struct plena_toml_value *cur = root;
    for (;;) {
        skip_all(&p);
        if (p.pos >= p.n) break;
        if (peek(&p, 0) == '[') {
            cur = parse_header(&p, root);
            if (!cur) goto bad;
            continue;
        }
        if (parse_keyval(&p, cur, 0) || expect_eol(&p)) goto bad;
    }
    doc->root = root;
    return 0;
bad:
    plena_toml_value_free(root);
    return err && err->code ? (int)err->code : PLENA_E_INPUT;
}

void plena_toml_free(struct plena_toml_doc *doc)
{
    if (!doc) return;
    plena_toml_value_free(doc->root);
    doc->root = NULL;
}

int plena_toml_parse_value(const char *text, size_t len, const char *name,
                           struct plena_toml_value **out, struct plena_err *err)
{
    struct parser p;
    init_parser(&p, text, len, name, err);
    *out = NULL;
    if (check_nul(&p)) return PLENA_E_INPUT;
    skip_ws(&p);
    struct plena_toml_value *v = parse_value(&p, 0);
    if (!v) return err && err->code ? (int)err->code : PLENA_E_INPUT;
    skip_ws(&p);
    if (p.pos != p.n) {
        fail_at(&p, p.pos, "unexpected text after the value");
        plena_toml_value_free(v);
        return PLENA_E_INPUT;
    }
    *out = v;
    return 0;
}

const struct plena_toml_entry *plena_toml_find(const struct plena_toml_value *table,
                                               const char *key)
{
    if (!table || table->type != PLENA_TOML_TABLE) return NULL;
    return find_mut((struct plena_toml_value *)table, key);
}

const struct plena_toml_value *plena_toml_get(const struct plena_toml_value *table,
                                              const char *dotted)
{
    const struct plena_toml_value *t = table;
    char part[256];
    const char *s = dotted;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n >= sizeof part) return NULL;
        memcpy(part, s, n);
        part[n] = 0;
        const struct plena_toml_entry *e = plena_toml_find(t, part);
        if (!e) return NULL;
        if (!dot) return e->value;
        t = e->value;
        s = dot + 1;
    }
}

const char *plena_toml_type_name(enum plena_toml_type t)
{
    switch (t) {
    case PLENA_TOML_TABLE: return "table";
    case PLENA_TOML_ARRAY: return "array";
    case PLENA_TOML_STRING: return "string";
    case PLENA_TOML_INTEGER: return "integer";
    case PLENA_TOML_FLOAT: return "float";
    case PLENA_TOML_BOOLEAN: return "boolean";
    }
    return "?";
}
