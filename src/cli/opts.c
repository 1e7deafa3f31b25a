/* The option-table parser and help renderer of cli/opts.h. One pass over
 * argv in order; the first problem found is the one message (later ones are
 * not looked for). Cross-option rules (excludes, needs, required, positional
 * counts) are checked after the last argument, in that order. Nothing here
 * prints: cli.c turns a result into output and an exit code. */
#include "cli/opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

/* ---- rows ---- */

/* Rows of a group: n_rows, or up to the {NULL} row that ends a table shared
 * through an extern array (whose length is no constant expression). */
static size_t group_rows(const struct plena_opt_group *g)
{
    if (g->n_rows) return g->n_rows;
    size_t n = 0;
    while (g->rows && g->rows[n].names)
        n++;
    return n;
}

/* The row with global index k (groups flattened in order), its group in *g. */
static const struct plena_opt *row_at(const struct plena_cmd_spec *s, size_t k,
                                      const struct plena_opt_group **g)
{
    for (size_t i = 0; i < s->n_groups; i++) {
        if (k < group_rows(&s->groups[i])) {
            if (g) *g = &s->groups[i];
            return &s->groups[i].rows[k];
        }
        k -= group_rows(&s->groups[i]);
    }
    return NULL;
}

static size_t n_rows(const struct plena_cmd_spec *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_groups; i++)
        n += group_rows(&s->groups[i]);
    return n;
}

/* The i-th '|'-separated spelling of names into buf; 0 when there is none. */
static int spelling_at(const char *names, unsigned i, char *buf, size_t n)
{
    const char *p = names;
    for (unsigned k = 0; k < i; k++) {
        p = strchr(p, '|');
        if (!p) return 0;
        p++;
    }
    size_t len = strcspn(p, "|");
    if (len + 1 > n) len = n - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    return 1;
}

/* The spelling of names equal to s[0..len-1] (NULL when none). */
static const char *names_match(const char *names, const char *s, size_t len)
{
    for (const char *p = names; p && *p;) {
        size_t l = strcspn(p, "|");
        if (l == len && !strncmp(p, s, len)) return p;
        p = p[l] ? p + l + 1 : NULL;
    }
    return NULL;
}

static long find_row(const struct plena_cmd_spec *s, const char *name, size_t len)
{
    size_t n = n_rows(s);
    for (size_t k = 0; k < n; k++)
        if (names_match(row_at(s, k, NULL)->names, name, len)) return (long)k;
    return -1;
}

static void *field(void *opts, const struct plena_opt_group *g, const struct plena_opt *o)
{
    return (char *)opts + g->base + o->off;
}

static void store_uint(void *p, size_t size, uint64_t v)
{
    switch (size) {
    case 1: *(uint8_t *)p = (uint8_t)v; break;
    case 2: *(uint16_t *)p = (uint16_t)v; break;
    case 4: *(uint32_t *)p = (uint32_t)v; break;
    default: *(uint64_t *)p = v; break;
    }
}

/* Integer fields are read as signed when they are int-sized (flags, enums
 * that use -1 for "not given"). */
static int64_t load_int(const void *p, size_t size)
{
    switch (size) {
    case 1: return *(const uint8_t *)p;
    case 2: return *(const uint16_t *)p;
    case 4: return *(const int32_t *)p;
    default: return (int64_t) * (const uint64_t *)p;
    }
}

static uint64_t load_uint(const void *p, size_t size)
{
    switch (size) {
    case 1: return *(const uint8_t *)p;
    case 2: return *(const uint16_t *)p;
    case 4: return *(const uint32_t *)p;
    default: return *(const uint64_t *)p;
    }
}

static uint64_t type_max(size_t size)
{
    return size >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
}

/* ---- enum spellings ---- */

/* The i-th spelling, or NULL past the last: the names list, else the
 * library's name function (which answers "?" outside its enum). */
static const char *enum_at(const struct plena_opt_enum *e, int i)
{
    if (e->names) {
        for (int k = 0; k < i; k++)
            if (!e->names[k]) return NULL;
        return e->names[i];
    }
    const char *s = i < 256 ? e->name(i) : NULL;
    return s && strcmp(s, "?") ? s : NULL;
}

static int enum_parse(const struct plena_opt_enum *e, const char *s, int *v)
{
    if (!e->names && e->parse) return e->parse(s, v);
    for (int i = 0; enum_at(e, i); i++)
        if (!strcmp(enum_at(e, i), s)) {
            *v = i;
            return 0;
        }
    return -1;
}

static const char *enum_name(const struct plena_opt_enum *e, int v)
{
    const char *s = v >= 0 ? enum_at(e, v) : NULL;
    return s ? s : "?";
}

/* "a, b or c" */
static const char *enum_choices(const struct plena_opt_enum *e, char *buf, size_t n)
{
    if (!e->names && e->choices) return e->choices(", ", " or ", buf, n);
    size_t off = 0;
    int k = 0;
    while (enum_at(e, k))
        k++;
    buf[0] = 0;
    for (int i = 0; i < k && off < n; i++) {
        const char *sep = i == 0 ? "" : i == k - 1 ? " or " : ", ";
        int w = snprintf(buf + off, n - off, "%s%s", sep, enum_at(e, i));
        if (w > 0) off += (size_t)w;
    }
    return buf;
}

/* ---- parsing ---- */

static enum plena_status fail(struct plena_opts_result *r, enum plena_status st, const char *fmt,
                              ...) __attribute__((format(printf, 3, 4)));
static enum plena_status fail(struct plena_opts_result *r, enum plena_status st, const char *fmt,
                              ...)
{
    if (r->status != PLENA_OK) return r->status;
    r->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return st;
}

static int list_append(struct plena_opt_list *l, const char *v, size_t cap)
{
    if (!l->v) {
        l->v = plena_calloc(cap ? cap : 1, sizeof *l->v);
        if (!l->v) return -1;
        l->n = 0;
    }
    l->v[l->n++] = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || *s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *v = x;
    return 0;
}

/* "an integer from 1 to 4096", "an integer >= 1", "an unsigned integer";
 * ZERO_OFF rows prefix "0 (off) or ". */
static void uint_expect(const struct plena_opt *o, char *buf, size_t n)
{
    const char *off = o->flags & PLENA_OPT_ZERO_OFF ? "0 (off) or " : "";
    if (o->max == UINT64_MAX && o->min == 0)
        snprintf(buf, n, "%san unsigned integer", off);
    else if (o->max == UINT64_MAX)
        snprintf(buf, n, "%san integer >= %llu", off, (unsigned long long)o->min);
    else
        snprintf(buf, n, "%san integer from %llu to %llu", off, (unsigned long long)o->min,
                 (unsigned long long)o->max);
}

static void double_expect(const struct plena_opt *o, char *buf, size_t n)
{
    if (isinf(o->dmax))
        snprintf(buf, n, "a number %s %g", o->flags & PLENA_OPT_MIN_OPEN ? ">" : ">=", o->dmin);
    else
        snprintf(buf, n, "a number in %c%g, %g]", o->flags & PLENA_OPT_MIN_OPEN ? '(' : '[',
                 o->dmin, o->dmax);
}

/* Stores one value of row o (typed as `as`). cap: list capacity (argc). */
static enum plena_status store(const struct plena_opt *o, const char *as, const char *v, void *opts,
                               const struct plena_opt_group *g, size_t cap,
                               struct plena_opts_result *r)
{
    void *p = field(opts, g, o);
    char exp[256];
    switch (o->kind) {
    case PLENA_OPT_FLAG: store_uint(p, o->size, (uint64_t)o->ival); return PLENA_OK;
    case PLENA_OPT_STR:
    case PLENA_OPT_PATH: memcpy(p, &v, sizeof v); return PLENA_OK;
    case PLENA_OPT_UINT: {
        uint64_t x;
        int ok = !parse_u64(v, &x) &&
                 ((x >= o->min && x <= o->max) || (x == 0 && (o->flags & PLENA_OPT_ZERO_OFF)));
        if (!ok) {
            uint_expect(o, exp, sizeof exp);
            return fail(r, PLENA_E_USAGE, "%s: expected %s, found '%s'", as, exp, v);
        }
        store_uint(p, o->size, x);
        return PLENA_OK;
    }
    case PLENA_OPT_DOUBLE: {
        char *end;
        errno = 0;
        double x = *v ? strtod(v, &end) : NAN;
        int ok = *v && !*end && !errno && !isnan(x) && x <= o->dmax &&
                 (o->flags & PLENA_OPT_MIN_OPEN ? x > o->dmin : x >= o->dmin);
        if (!ok) {
            double_expect(o, exp, sizeof exp);
            return fail(r, PLENA_E_USAGE, "%s: expected %s, found '%s'", as, exp, v);
        }
        memcpy(p, &x, sizeof x);
        return PLENA_OK;
    }
    case PLENA_OPT_ENUM:
    case PLENA_OPT_CHOICE: {
        int x;
        if (enum_parse(o->choices, v, &x))
            return fail(r, PLENA_E_USAGE, "%s: expected %s, found '%s'", as,
                        enum_choices(o->choices, exp, sizeof exp), v);
        if (o->kind == PLENA_OPT_ENUM) {
            store_uint(p, o->size, (uint64_t)(int64_t)x);
        } else {
            const char *name = enum_name(o->choices, x);
            memcpy(p, &name, sizeof name);
        }
        return PLENA_OK;
    }
    case PLENA_OPT_LIST:
        if (list_append(p, v, cap)) return fail(r, PLENA_E_NOMEM, "out of memory");
        return PLENA_OK;
    case PLENA_OPT_CUSTOM: {
        char msg[256] = "";
        if (o->parse(o, v, (char *)opts + g->base, msg, sizeof msg)) {
            if (msg[0]) return fail(r, PLENA_E_USAGE, "%s: %s", as, msg);
            return fail(r, PLENA_E_USAGE, "%s: expected %s, found '%s'", as, o->expect, v);
        }
        return PLENA_OK;
    }
    }
    return fail(r, PLENA_E_INTERNAL, "%s: row of unknown kind", as);
}

/* The first spelling of a row, for messages. */
static const char *first_name(const struct plena_opt *o, char *buf, size_t n)
{
    spelling_at(o->names, 0, buf, n);
    return buf;
}

static enum plena_status apply_defaults(const struct plena_cmd_spec *s, void *opts,
                                        struct plena_opts_result *r)
{
    memset(opts, 0, s->opts_size);
    if (s->init) s->init(opts);
    size_t n = n_rows(s);
    for (size_t k = 0; k < n; k++) {
        const struct plena_opt_group *g;
        const struct plena_opt *o = row_at(s, k, &g);
        char nm[64];
        if (o->def && store(o, first_name(o, nm, sizeof nm), o->def, opts, g, 1, r))
            return r->status;
    }
    return PLENA_OK;
}

static int is_list_pos(const struct plena_opt_pos *p)
{
    return p->max != 1;
}

/* Which positional slot the next argument fills (n_pos when none). */
static size_t pos_slot(const struct plena_cmd_spec *s, const unsigned *count)
{
    for (size_t i = 0; i < s->n_pos; i++)
        if (s->pos[i].max == 0 || count[i] < s->pos[i].max) return i;
    return s->n_pos;
}

enum plena_status plena_opts_parse(const struct plena_cmd_spec *s, int argc, char **argv,
                                   void *opts, struct plena_opts_result *r)
{
    memset(r, 0, sizeof *r);
    r->n_rows = n_rows(s);
    if (r->n_rows > PLENA_OPTS_MAX_ROWS)
        return fail(r, PLENA_E_INTERNAL, "more than %d option rows", PLENA_OPTS_MAX_ROWS);
    if (apply_defaults(s, opts, r)) return r->status;
    const size_t cap = argc > 0 ? (size_t)argc * 2 : 1;
    unsigned pos_count[16] = {0};
    const char *first_pos[16] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            r->help = 1;
            return PLENA_OK;
        }
        if (a[0] != '-' || !a[1]) {
            size_t slot = pos_slot(s, pos_count);
            if (slot == s->n_pos) {
                if (s->n_pos && s->pos[s->n_pos - 1].max == 1 && first_pos[s->n_pos - 1])
                    return fail(r, PLENA_E_USAGE, "more than one %s ('%s', '%s')",
                                s->pos[s->n_pos - 1].metavar, first_pos[s->n_pos - 1], a);
                return fail(r, PLENA_E_USAGE, "unexpected argument '%s'", a);
            }
            const struct plena_opt_pos *p = &s->pos[slot];
            void *dst = (char *)opts + p->off;
            if (is_list_pos(p)) {
                if (list_append(dst, a, cap)) return fail(r, PLENA_E_NOMEM, "out of memory");
            } else {
                memcpy(dst, &a, sizeof a);
            }
            if (!pos_count[slot]++) first_pos[slot] = a;
            continue;
        }
        size_t len = strcspn(a, "=");
        const char *inline_v = a[len] == '=' ? a + len + 1 : NULL;
        long k = find_row(s, a, len);
        if (k < 0) return fail(r, PLENA_E_USAGE, "unknown option '%s'", a);
        const struct plena_opt_group *g;
        const struct plena_opt *o = row_at(s, (size_t)k, &g);
        char typed[48];
        snprintf(typed, sizeof typed, "%.*s", (int)len, a);
        if (r->given[k] && !(o->flags & PLENA_OPT_REPEAT)) {
            if (strcmp(typed, r->spelling[k]))
                return fail(r, PLENA_E_USAGE, "option '%s' given twice (first as '%s')", typed,
                            r->spelling[k]);
            return fail(r, PLENA_E_USAGE, "option '%s' given twice", typed);
        }
        const char *v = NULL;
        int separate = 0; /* the value is the next argument */
        if (o->kind == PLENA_OPT_FLAG) {
            if (inline_v) return fail(r, PLENA_E_USAGE, "option '%s' takes no value", typed);
        } else if (inline_v) {
            v = inline_v;
        } else if (i + 1 < argc &&
                   !((o->flags & PLENA_OPT_GREEDY) && !strncmp(argv[i + 1], "--", 2))) {
            v = argv[i + 1];
            separate = 1;
        } else {
            return fail(r, PLENA_E_USAGE, "option '%s' needs a value (%s)", typed,
                        o->metavar ? o->metavar : "VALUE");
        }
        r->given[k]++;
        snprintf(r->spelling[k], sizeof r->spelling[k], "%s", typed);
        if (store(o, typed, v, opts, g, cap, r)) return r->status;
        if (g->forward && s->has_forward) {
            /* verbatim: "--opt=V" stays one argument, "--opt V" two */
            struct plena_opt_list *fw = (void *)((char *)opts + s->forward_off);
            if (list_append(fw, a, cap) || (separate && list_append(fw, v, cap)))
                return fail(r, PLENA_E_NOMEM, "out of memory");
        }
        i += separate;
        if (o->flags & PLENA_OPT_GREEDY)
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                if (store(o, typed, argv[++i], opts, g, cap, r)) return r->status;
    }
    /* cross-option rules, in table order */
    for (size_t k = 0; k < r->n_rows; k++) {
        const struct plena_opt *o = row_at(s, k, NULL);
        if (!r->given[k]) continue;
        char nm[64];
        for (unsigned j = 0; o->excludes && spelling_at(o->excludes, j, nm, sizeof nm); j++) {
            long x = find_row(s, nm, strlen(nm));
            if (x >= 0 && r->given[x])
                return fail(r, PLENA_E_USAGE, "%s cannot be combined with %s", r->spelling[k],
                            r->spelling[x]);
        }
        if (o->needs) {
            long x = find_row(s, o->needs, strlen(o->needs));
            if (x >= 0 && !r->given[x])
                return fail(r, PLENA_E_USAGE, "%s needs %s", r->spelling[k], o->needs);
        }
    }
    for (size_t k = 0; k < r->n_rows; k++) {
        const struct plena_opt *o = row_at(s, k, NULL);
        char nm[64];
        if ((o->flags & PLENA_OPT_REQUIRED) && !r->given[k])
            return fail(r, PLENA_E_USAGE, "%s%s%s is required", first_name(o, nm, sizeof nm),
                        o->metavar ? " " : "", o->metavar ? o->metavar : "");
    }
    for (size_t i = 0; i < s->n_pos; i++)
        if (pos_count[i] < s->pos[i].min)
            return fail(r, PLENA_E_USAGE, "missing %s", s->pos[i].metavar);
    return PLENA_OK;
}

void plena_opts_free(const struct plena_cmd_spec *s, void *opts)
{
    size_t n = n_rows(s);
    for (size_t k = 0; k < n; k++) {
        const struct plena_opt_group *g;
        const struct plena_opt *o = row_at(s, k, &g);
        if (o->kind == PLENA_OPT_LIST) {
            struct plena_opt_list *l = field(opts, g, o);
            plena_free(l->v);
            l->v = NULL;
            l->n = 0;
        }
    }
    for (size_t i = 0; i < s->n_pos; i++)
        if (is_list_pos(&s->pos[i])) {
            struct plena_opt_list *l = (void *)((char *)opts + s->pos[i].off);
            plena_free(l->v);
            l->v = NULL;
            l->n = 0;
        }
    if (s->has_forward) {
        struct plena_opt_list *l = (void *)((char *)opts + s->forward_off);
        plena_free(l->v);
        l->v = NULL;
        l->n = 0;
    }
    if (s->fini) s->fini(opts);
}

unsigned plena_opts_given(const struct plena_cmd_spec *s, const struct plena_opts_result *r,
                          const char *name)
{
    long k = find_row(s, name, strlen(name));
    return k < 0 ? 0 : r->given[k];
}

const char *plena_opts_spelling(const struct plena_cmd_spec *s, const struct plena_opts_result *r,
                                const char *name)
{
    long k = find_row(s, name, strlen(name));
    return k < 0 || !r->given[k] ? NULL : r->spelling[k];
}

/* ---- help ---- */

#define HELP_WIDTH 79
#define HELP_COL   26

void plena_opts_row_left(const struct plena_opt *o, char *buf, size_t n)
{
    char nm[64];
    first_name(o, nm, sizeof nm);
    if (o->metavar && o->kind != PLENA_OPT_FLAG)
        snprintf(buf, n, "%s %s", nm, o->metavar);
    else
        snprintf(buf, n, "%s", nm);
}

static void format_default(const struct plena_opt *o, const void *p, char *buf, size_t n)
{
    switch (o->kind) {
    case PLENA_OPT_FLAG:
        snprintf(buf, n, "%s", load_int(p, o->size) == o->ival ? "on" : "off");
        return;
    case PLENA_OPT_STR:
    case PLENA_OPT_PATH:
    case PLENA_OPT_CHOICE: {
        const char *s;
        memcpy(&s, p, sizeof s);
        snprintf(buf, n, "%s", s ? s : "none");
        return;
    }
    case PLENA_OPT_UINT: {
        uint64_t v = load_uint(p, o->size);
        if (v == 0 && (o->flags & PLENA_OPT_ZERO_OFF))
            snprintf(buf, n, "off");
        else
            snprintf(buf, n, "%llu", (unsigned long long)v);
        return;
    }
    case PLENA_OPT_DOUBLE: {
        double d;
        memcpy(&d, p, sizeof d);
        snprintf(buf, n, "%g", d);
        return;
    }
    case PLENA_OPT_ENUM: {
        int64_t v = load_int(p, o->size);
        const char *s = enum_name(o->choices, (int)v);
        snprintf(buf, n, "%s", v < 0 || !strcmp(s, "?") ? "none" : s);
        return;
    }
    case PLENA_OPT_LIST: snprintf(buf, n, "none"); return;
    case PLENA_OPT_CUSTOM: snprintf(buf, n, "%s", o->def ? o->def : "none"); return;
    }
    snprintf(buf, n, "?");
}

void plena_opts_row_default(const struct plena_cmd_spec *s, const struct plena_opt_group *g,
                            const struct plena_opt *o, char *buf, size_t n)
{
    if (o->def_text) {
        snprintf(buf, n, "%s", o->def_text);
        return;
    }
    void *scratch = plena_calloc(1, s->opts_size ? s->opts_size : 1);
    struct plena_opts_result *r = plena_malloc(sizeof *r);
    if (!scratch || !r) {
        snprintf(buf, n, "?");
    } else {
        memset(r, 0, sizeof *r);
        apply_defaults(s, scratch, r);
        format_default(o, field(scratch, g, o), buf, n);
        if (s->fini) s->fini(scratch);
    }
    plena_free(scratch);
    plena_free(r);
}

void plena_opts_row_right(const struct plena_cmd_spec *s, const struct plena_opt_group *g,
                          const struct plena_opt *o, char *buf, size_t n)
{
    char def[256], aliases[256] = "", nm[64];
    for (unsigned j = 1; spelling_at(o->names, j, nm, sizeof nm); j++) {
        size_t l = strlen(aliases);
        snprintf(aliases + l, sizeof aliases - l, "%s%s", j == 1 ? "" : ", ", nm);
    }
    if (o->flags & PLENA_OPT_REQUIRED)
        snprintf(def, sizeof def, "required");
    else {
        char d[200];
        plena_opts_row_default(s, g, o, d, sizeof d);
        snprintf(def, sizeof def, "default: %s", d);
    }
    char choices[300] = "";
    if (o->kind == PLENA_OPT_ENUM || o->kind == PLENA_OPT_CHOICE) {
        char c[256];
        snprintf(choices, sizeof choices, "choices: %s; ", enum_choices(o->choices, c, sizeof c));
    }
    const char *alias_word = !aliases[0] ? "" : strchr(aliases, ',') ? "; aliases " : "; alias ";
    snprintf(buf, n, "%s (%s%s%s%s%s)", o->help ? o->help : "", choices, def,
             o->flags & PLENA_OPT_REPEAT ? "; repeatable" : "", alias_word, aliases);
}

/* Appends `text` wrapped at HELP_WIDTH, continuation lines indented by
 * `indent`; `col` is the column the first word starts at. */
void plena_opts_put_wrapped(struct plena_buf *b, const char *text, size_t col, size_t indent);
static void put_wrapped(struct plena_buf *b, const char *text, size_t col, size_t indent)
{
    const char *p = text;
    int first = 1;
    while (*p) {
        if (*p == '\n') { /* the text's own line breaks are kept */
            plena_buf_printf(b, "\n%*s", (int)indent, "");
            col = indent;
            first = 1;
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (!first && col + 1 + w > HELP_WIDTH) {
            plena_buf_printf(b, "\n%*s", (int)indent, "");
            col = indent;
            first = 1;
        }
        if (!first) {
            plena_buf_puts(b, " ");
            col++;
        }
        plena_buf_append(b, p, w);
        col += w;
        first = 0;
        p += w;
        while (*p == ' ')
            p++;
    }
    plena_buf_puts(b, "\n");
}

/* "  LEFT                    right..." */
static void put_row(struct plena_buf *b, const char *left, const char *right)
{
    plena_buf_printf(b, "  %s", left);
    size_t col = 2 + strlen(left);
    if (col + 2 > HELP_COL) {
        plena_buf_printf(b, "\n%*s", HELP_COL, "");
    } else {
        plena_buf_printf(b, "%*s", (int)(HELP_COL - col), "");
    }
    put_wrapped(b, right, HELP_COL, HELP_COL);
}

void plena_opts_usage(const struct plena_cmd_spec *s, struct plena_buf *b)
{
    char left[128];
    plena_buf_printf(b, "plena %s", s->name);
    for (size_t i = 0; i < s->n_pos; i++) {
        const struct plena_opt_pos *p = &s->pos[i];
        plena_buf_printf(b, " %s%s%s%s", p->min ? "" : "[", p->metavar, p->max == 1 ? "" : "...",
                         p->min ? "" : "]");
    }
    int optional = 0;
    size_t n = n_rows(s);
    for (size_t k = 0; k < n; k++) {
        const struct plena_opt *o = row_at(s, k, NULL);
        if (o->flags & PLENA_OPT_REQUIRED) {
            plena_opts_row_left(o, left, sizeof left);
            plena_buf_printf(b, " %s", left);
        } else
            optional = 1;
    }
    plena_buf_puts(b, optional ? " [options]" : "");
}

int plena_opts_help(const struct plena_cmd_spec *s, struct plena_buf *b)
{
    char left[128], right[1200], exits[1024];
    plena_buf_puts(b, "usage: ");
    plena_opts_usage(s, b);
    plena_buf_puts(b, "\n");
    if (s->description) {
        plena_buf_puts(b, "\n");
        put_wrapped(b, s->description, 0, 0);
    }
    if (s->n_pos) {
        plena_buf_puts(b, "\narguments:\n");
        for (size_t i = 0; i < s->n_pos; i++) {
            const struct plena_opt_pos *p = &s->pos[i];
            snprintf(right, sizeof right, "%s (%s)", p->help,
                     p->min        ? p->max == 1 ? "required" : "one or more"
                     : p->max == 1 ? "optional"
                                   : "any number");
            put_row(b, p->metavar, right);
        }
    }
    /* -h/--help closes the first untitled group ("options:"), else a group
     * of its own at the end */
    int help_done = 0;
    for (size_t gi = 0; gi < s->n_groups; gi++) {
        const struct plena_opt_group *g = &s->groups[gi];
        if (!group_rows(g)) continue;
        plena_buf_printf(b, "\n%s:\n", g->title ? g->title : "options");
        for (size_t k = 0; k < group_rows(g); k++) {
            plena_opts_row_left(&g->rows[k], left, sizeof left);
            plena_opts_row_right(s, g, &g->rows[k], right, sizeof right);
            put_row(b, left, right);
        }
        if (!g->title && !help_done) {
            put_row(b, "-h, --help", "this text");
            help_done = 1;
        }
    }
    if (!help_done) {
        plena_buf_puts(b, "\noptions:\n");
        put_row(b, "-h, --help", "this text");
    }
    if (s->notes) {
        plena_buf_puts(b, "\n");
        put_wrapped(b, s->notes, 0, 0);
    }
    if (s->notes_fn) {
        plena_buf_puts(b, "\n");
        s->notes_fn(b);
    }
    plena_buf_printf(b, "\n%s", plena_status_help(exits, sizeof exits));
    return b->failed ? -1 : 0;
}

/* ---- table checks ---- */

static int check_fail(char *msg, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int check_fail(char *msg, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return -1;
}

int plena_opts_check_spec(const struct plena_cmd_spec *s, char *msg, size_t n)
{
    size_t nr = n_rows(s);
    if (nr > PLENA_OPTS_MAX_ROWS) return check_fail(msg, n, "%s: too many rows", s->name);
    if (s->n_pos > 16) return check_fail(msg, n, "%s: too many positionals", s->name);
    if (!s->summary) return check_fail(msg, n, "%s: no summary", s->name);
    for (size_t k = 0; k < nr; k++) {
        const struct plena_opt_group *g;
        const struct plena_opt *o = row_at(s, k, &g);
        char nm[64];
        if (!o->names || o->names[0] != '-' || !o->help)
            return check_fail(msg, n, "%s: row %zu lacks a name or help", s->name, k);
        for (unsigned j = 0; spelling_at(o->names, j, nm, sizeof nm); j++) {
            if (nm[0] != '-' || strchr(nm, '=') || !strcmp(nm, "-h") || !strcmp(nm, "--help"))
                return check_fail(msg, n, "%s: bad spelling '%s'", s->name, nm);
            if (find_row(s, nm, strlen(nm)) != (long)k)
                return check_fail(msg, n, "%s: '%s' spelled by two rows", s->name, nm);
        }
        size_t want = 0;
        switch (o->kind) {
        case PLENA_OPT_FLAG:
        case PLENA_OPT_ENUM:
            if (o->size != 1 && o->size != 2 && o->size != 4 && o->size != 8)
                return check_fail(msg, n, "%s %s: integer field of size %zu", s->name, nm, o->size);
            break;
        case PLENA_OPT_UINT:
            if (o->size != 1 && o->size != 2 && o->size != 4 && o->size != 8)
                return check_fail(msg, n, "%s %s: integer field of size %zu", s->name, nm, o->size);
            if (o->min > o->max || o->max > type_max(o->size))
                return check_fail(msg, n, "%s %s: bounds %llu..%llu do not fit the field", s->name,
                                  nm, (unsigned long long)o->min, (unsigned long long)o->max);
            break;
        case PLENA_OPT_STR:
        case PLENA_OPT_PATH:
        case PLENA_OPT_CHOICE: want = sizeof(const char *); break;
        case PLENA_OPT_DOUBLE:
            want = sizeof(double);
            if (!(o->dmin <= o->dmax))
                return check_fail(msg, n, "%s %s: bounds out of order", s->name, nm);
            break;
        case PLENA_OPT_LIST: want = sizeof(struct plena_opt_list); break;
        case PLENA_OPT_CUSTOM:
            if (!o->parse || !o->expect ||
                (!o->def && !o->def_text && !(o->flags & PLENA_OPT_REQUIRED)))
                return check_fail(msg, n, "%s %s: custom row needs parse, expect and a default",
                                  s->name, nm);
            break;
        }
        if (want && o->size != want)
            return check_fail(msg, n, "%s %s: field of size %zu, expected %zu", s->name, nm,
                              o->size, want);
        if ((o->kind == PLENA_OPT_ENUM || o->kind == PLENA_OPT_CHOICE) && !o->choices)
            return check_fail(msg, n, "%s %s: no choices", s->name, nm);
        if (o->kind != PLENA_OPT_FLAG && !o->metavar)
            return check_fail(msg, n, "%s %s: no metavar", s->name, nm);
        if (g->base + o->off + o->size > s->opts_size)
            return check_fail(msg, n, "%s %s: field outside the options struct", s->name, nm);
        for (unsigned j = 0; o->excludes && spelling_at(o->excludes, j, nm, sizeof nm); j++)
            if (find_row(s, nm, strlen(nm)) < 0)
                return check_fail(msg, n, "%s: excludes unknown '%s'", s->name, nm);
        if (o->needs && find_row(s, o->needs, strlen(o->needs)) < 0)
            return check_fail(msg, n, "%s: needs unknown '%s'", s->name, o->needs);
    }
    /* every default is one the row itself accepts */
    void *scratch = plena_calloc(1, s->opts_size ? s->opts_size : 1);
    struct plena_opts_result *r = plena_malloc(sizeof *r);
    int rc = 0;
    if (!scratch || !r)
        rc = check_fail(msg, n, "out of memory");
    else {
        memset(r, 0, sizeof *r);
        if (apply_defaults(s, scratch, r))
            rc = check_fail(msg, n, "%s: a default is refused: %s", s->name, r->msg);
        if (s->fini) s->fini(scratch); /* what the CUSTOM rows' parsers allocated */
    }
    plena_free(scratch);
    plena_free(r);
    for (size_t i = 0; !rc && i < s->n_pos; i++) {
        const struct plena_opt_pos *p = &s->pos[i];
        if (!p->metavar || !p->help || (p->max && p->min > p->max))
            rc = check_fail(msg, n, "%s: positional %zu incomplete", s->name, i);
        if (i + 1 < s->n_pos && p->max != 1)
            rc = check_fail(msg, n, "%s: only the last positional may repeat", s->name);
    }
    return rc;
}

void plena_opts_put_wrapped(struct plena_buf *b, const char *text, size_t col, size_t indent)
{
    put_wrapped(b, text, col, indent);
}
