/* The PLENA assembler (docs/machine.md "Assembly syntax" to "Upstream encoder").
 * Operands are parsed from the forms.def descriptors (parsed once per call
 * into a small table), mnemonics are found through a hash table built from
 * isa.def; no opcode has its own parsing code. Hand-written scanner, no
 * regex, no per-line allocation. It does not do the label pass (labels.c). */
#include "isa/asm.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "isa/isa.h"
#include "isa/stages.h"

/* ---- operand descriptors (forms.def) ---- */

enum kind {
#define PLENA_FORM_KIND(id, meaning) K_##id,
#include "isa/forms.def"
#undef PLENA_FORM_KIND
};
enum field {
#define PLENA_FORM_FIELD(id, name) F_##id,
#include "isa/forms.def"
#undef PLENA_FORM_FIELD
};

static const char *const kind_names[] = {
#define PLENA_FORM_KIND(id, meaning) #id,
#include "isa/forms.def"
#undef PLENA_FORM_KIND
};
static const char *const field_names[] = {
#define PLENA_FORM_FIELD(id, name) name,
#include "isa/forms.def"
#undef PLENA_FORM_FIELD
};

#define MAX_OPS  6 /* the upstream assembler reads at most six operands */
#define MAX_ALTS 2
struct opnd {
    uint8_t kind, field, optional;
};
struct alt_rt {
    uint8_t n, n_req;
    struct opnd o[MAX_OPS];
};
/* One form: its ' | '-separated alternatives, tried in order by operand count. */
struct form_rt {
    uint8_t n_alt, n_min, n_max;
    struct alt_rt a[MAX_ALTS];
};

/* Per-opcode facts derived from isa.def text columns (so a new row needs no
 * assembler edit): "Z(=0)" in the operand column means rd must be 0,
 * "M(policy)" means the V_TOPK policy rule, a synopsis that assigns or
 * decrements G[rd] means the op writes gp rd (the gp0 warning). */
struct op_rt {
    uint8_t rd_zero, policy, writes_gp;
    int8_t up_pos; /* upstream encoder: position of the deviating field, -1 dropped */
    uint8_t up_field;
    uint8_t has_up;
};

/* The three forms where the upstream assembler places an operand where the
 * decoder does not read it (docs/machine.md "Upstream encoder"). */
static const struct {
    uint8_t op, field;
    int8_t pos;
} upstream_dev[] = {
    {PLENA_OP_M_MV_WO, F_IMM, 10},   {PLENA_OP_M_BMM_WO, F_IMM, 10},
    {PLENA_OP_M_BMV_WO, F_IMM, 10},  {PLENA_OP_V_EXP_V, F_RS3, 14},
    {PLENA_OP_V_RECI_V, F_RS3, 14},  {PLENA_OP_V_RED_MAX, F_RS3, 14},
    {PLENA_OP_V_RED_SUM, F_RS3, -1},
};

#define HASH_SIZE 256
struct ctx {
    const char *name;
    const struct plena_asm_opts *opts;
    struct plena_asm_diags *warn;
    struct plena_err *err;
    struct form_rt forms[PLENA_FORM_COUNT];
    struct op_rt ops[64];
    uint8_t hash[HASH_SIZE]; /* opcode + 1, 0 = empty */
    uint32_t line;
    const char *line_s;
};

/* Parses one alternative of a descriptor, up to '|' or the end; *end gets
 * where it stopped. */
static int parse_alt(const char *d, struct alt_rt *f, const char **end)
{
    memset(f, 0, sizeof *f);
    const char *p = d;
    while (*p && *p != '|') {
        while (*p == ' ')
            p++;
        if (!*p || *p == '|') break;
        if (f->n >= MAX_OPS) return -1;
        struct opnd *o = &f->o[f->n];
        if (*p == '?') {
            o->optional = 1;
            p++;
        }
        const char *ks = p;
        while (*p && *p != ':')
            p++;
        if (*p != ':') return -1;
        size_t kl = (size_t)(p - ks);
        int k = -1;
        for (unsigned i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
            if (strlen(kind_names[i]) == kl && !memcmp(kind_names[i], ks, kl)) k = (int)i;
        if (k < 0) return -1;
        const char *fs = ++p;
        while (*p && *p != ' ')
            p++;
        size_t fl = (size_t)(p - fs);
        int fi = -1;
        for (unsigned i = 0; i < sizeof field_names / sizeof field_names[0]; i++)
            if (strlen(field_names[i]) == fl && !memcmp(field_names[i], fs, fl)) fi = (int)i;
        if (fi < 0) return -1;
        o->kind = (uint8_t)k;
        o->field = (uint8_t)fi;
        if (!o->optional) f->n_req = (uint8_t)(f->n + 1);
        f->n++;
    }
    *end = p;
    return 0;
}

static int parse_descriptor(const char *d, struct form_rt *f)
{
    memset(f, 0, sizeof *f);
    const char *p = d;
    for (;;) {
        if (f->n_alt >= MAX_ALTS) return -1;
        struct alt_rt *a = &f->a[f->n_alt];
        if (parse_alt(p, a, &p)) return -1;
        if (!f->n_alt || a->n_req < f->n_min) f->n_min = a->n_req;
        if (a->n > f->n_max) f->n_max = a->n;
        f->n_alt++;
        if (*p != '|') return 0;
        p++;
    }
}

static unsigned hash_name(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return (h ^ (h >> 11)) & (HASH_SIZE - 1);
}

static int lookup(const struct ctx *c, const char *s, size_t n)
{
    unsigned h = hash_name(s, n);
    for (;;) {
        unsigned e = c->hash[h];
        if (!e) return -1;
        const char *nm = plena_isa_info(e - 1)->name;
        if (!strncmp(nm, s, n) && nm[n] == 0) return (int)(e - 1);
        h = (h + 1) & (HASH_SIZE - 1);
    }
}

static int ctx_init(struct ctx *c)
{
    for (int f = 0; f < PLENA_FORM_COUNT; f++)
        if (parse_descriptor(plena_form_descriptor((enum plena_form)f), &c->forms[f]))
            return PLENA_FAIL(c->err, PLENA_E_INTERNAL, "forms.def", "bad descriptor '%s'",
                              plena_form_descriptor((enum plena_form)f));
    memset(c->ops, 0, sizeof c->ops);
    memset(c->hash, 0, sizeof c->hash);
    for (unsigned op = 0; op < PLENA_OP_COUNT; op++) {
        const struct plena_op_info *r = plena_isa_info(op);
        struct op_rt *o = &c->ops[op];
        o->up_pos = -1;
        if (!r->valid) continue;
        o->rd_zero = strstr(r->operands, "Z(=0)") != NULL;
        o->policy = strstr(r->operands, "M(policy)") != NULL;
        o->writes_gp =
            !strncmp(r->synopsis, "G[rd] =", 7) || !strncmp(r->synopsis, "decrement G[rd]", 15);
        unsigned h = hash_name(r->name, strlen(r->name));
        while (c->hash[h])
            h = (h + 1) & (HASH_SIZE - 1);
        c->hash[h] = (uint8_t)(op + 1);
    }
    for (unsigned i = 0; i < sizeof upstream_dev / sizeof upstream_dev[0]; i++) {
        struct op_rt *o = &c->ops[upstream_dev[i].op];
        o->has_up = 1;
        o->up_field = upstream_dev[i].field;
        o->up_pos = upstream_dev[i].pos;
    }
    return 0;
}

/* ---- diagnostics ---- */

static size_t col_of(const struct ctx *c, const char *p)
{
    return (size_t)(p - c->line_s) + 1;
}

static int fail(struct ctx *c, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct ctx *c, const char *at, const char *fmt, ...)
{
    char where[256];
    snprintf(where, sizeof where, "%s:%u:%zu", c->name, c->line, col_of(c, at));
    va_list ap;
    va_start(ap, fmt);
    plena_err_vset(c->err, PLENA_E_INPUT, __FILE__, __LINE__, where, fmt, ap);
    va_end(ap);
    return PLENA_E_INPUT;
}

static void warn(struct ctx *c, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warn(struct ctx *c, const char *at, const char *fmt, ...)
{
    struct plena_asm_diags *d = c->warn;
    if (!d) return;
    d->n_total++;
    if (d->n >= PLENA_ASM_MAX_DIAGS) return;
    if (plena_grow((void **)&d->v, &d->cap, d->n + 1, sizeof *d->v)) return;
    struct plena_asm_diag *g = &d->v[d->n++];
    g->line = c->line;
    g->col = (uint32_t)col_of(c, at);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->text, sizeof g->text, fmt, ap);
    va_end(ap);
}

void plena_asm_diags_free(struct plena_asm_diags *d)
{
    if (!d) return;
    plena_free(d->v);
    plena_free(d->name);
    memset(d, 0, sizeof *d);
}

const char *plena_asm_diag_format(const struct plena_asm_diags *d, size_t i, char *buf, size_t n)
{
    if (!d || i >= d->n) {
        if (n) buf[0] = 0;
        return buf;
    }
    snprintf(buf, n, "%s:%u:%u: warning: %s", d->name ? d->name : "<input>", d->v[i].line,
             d->v[i].col, d->v[i].text);
    return buf;
}

/* ---- tokens ---- */

struct tok {
    const char *s;
    size_t n;
};

/* Unsigned decimal or 0x hex. Returns 0 and *v, 1 when not a number, 2 on
 * overflow of 32 bits. */
static int parse_uint(const char *s, size_t n, uint32_t *v)
{
    uint64_t x = 0;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        for (size_t i = 2; i < n; i++) {
            unsigned char ch = (unsigned char)s[i];
            unsigned d;
            if (ch >= '0' && ch <= '9')
                d = ch - '0';
            else if (ch >= 'a' && ch <= 'f')
                d = ch - 'a' + 10;
            else if (ch >= 'A' && ch <= 'F')
                d = ch - 'A' + 10;
            else
                return 1;
            x = x * 16 + d;
            if (x > 0xFFFFFFFFu) return 2;
        }
    } else {
        if (n == 0) return 1;
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (ch < '0' || ch > '9') return 1;
            x = x * 10 + (ch - '0');
            if (x > 0xFFFFFFFFu) return 2;
        }
    }
    *v = (uint32_t)x;
    return 0;
}

/* Register token: gpN / fN / aN with decimal N. Returns kind K_G/K_F/K_A,
 * -1 when not a register, -2 when the number does not fit. */
static int parse_reg(const struct tok *t, uint32_t *num)
{
    size_t pre;
    int k;
    if (t->n >= 3 && t->s[0] == 'g' && t->s[1] == 'p') {
        pre = 2;
        k = K_G;
    } else if (t->n >= 2 && t->s[0] == 'f') {
        pre = 1;
        k = K_F;
    } else if (t->n >= 2 && t->s[0] == 'a') {
        pre = 1;
        k = K_A;
    } else {
        return -1;
    }
    uint64_t x = 0;
    for (size_t i = pre; i < t->n; i++) {
        unsigned char ch = (unsigned char)t->s[i];
        if (ch < '0' || ch > '9') return -1;
        x = x * 10 + (ch - '0');
        if (x > 1000000) return -2;
    }
    *num = (uint32_t)x;
    return k;
}

static const char *reg_prefix(int k)
{
    return k == K_G ? "gp" : k == K_F ? "f" : "a";
}
static unsigned reg_max(int k)
{
    return k == K_F ? 7 : 15;
}
static const char *reg_desc(int k)
{
    return k == K_G   ? "a gp register gp0..gp15"
           : k == K_F ? "an fp register f0..f7"
                      : "an address register a0..a15";
}

/* Parses one register operand of expected kind `want` (K_G/K_F/K_A). */
static int get_reg(struct ctx *c, const struct tok *t, int want, uint32_t *v)
{
    uint32_t num = 0;
    int k = parse_reg(t, &num);
    if (k == -2 || (k >= 0 && num > reg_max(k)))
        return fail(c, t->s, "register '%.*s' out of range (expected %s%u..%s%u)", (int)t->n, t->s,
                    reg_prefix(k < 0 ? want : k), 0u, reg_prefix(k < 0 ? want : k),
                    reg_max(k < 0 ? want : k));
    if (k < 0) return fail(c, t->s, "expected %s, found '%.*s'", reg_desc(want), (int)t->n, t->s);
    if (k != want) {
        if (c->opts->strict)
            return fail(c, t->s, "register kind mismatch: '%.*s' (expected %s)", (int)t->n, t->s,
                        reg_desc(want));
        warn(c, t->s, "register kind mismatch: '%.*s' where %s is expected; number %u used",
             (int)t->n, t->s, reg_desc(want), num);
    }
    *v = num;
    return 0;
}

static int get_int(struct ctx *c, const struct tok *t, uint32_t max, const char *what,
                   const char *hint, uint32_t *v)
{
    uint32_t x = 0;
    int r = parse_uint(t->s, t->n, &x);
    if (r == 1)
        return fail(c, t->s, "expected %s (unsigned decimal or 0x hex), found '%.*s'", what,
                    (int)t->n, t->s);
    if (r == 2 || x > max)
        return fail(c, t->s, "%s '%.*s' out of range (expected 0..%u%s)", what, (int)t->n, t->s,
                    max, hint);
    *v = x;
    return 0;
}

/* Finds "@stage=" in [s, e). */
static const char *find_stage_tag(const char *s, const char *e)
{
    for (const char *p = s; p + 7 <= e; p++)
        if (p[0] == '@' && !memcmp(p, "@stage=", 7)) return p;
    return NULL;
}

static int stage_expected_list(char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int s = 0; s < PLENA_STAGE_COUNT; s++) {
        int w = snprintf(buf + o, n - o, "%s%s", s ? ", " : "", plena_stage_name(s));
        if (w < 0 || (size_t)w >= n - o) break;
        o += (size_t)w;
    }
    return 0;
}

/* An own-line comment: checks a stage marker's name (docs/machine.md
 * "Assembly syntax" and "Strict and lenient assembly"). */
static int check_comment(struct ctx *c, const struct plena_asm_line *ln)
{
    const char *p = ln->s + ln->first, *e = ln->s + ln->end;
    while (p < e && *p == ';')
        p++;
    while (p < e && plena_asm_is_blank(*p))
        p++;
    if ((size_t)(e - p) < 7 || memcmp(p, "@stage=", 7)) return 0;
    const char *nm = p + 7, *ne = nm;
    while (ne < e && !plena_asm_is_blank(*ne))
        ne++;
    if (plena_stage_lookup(nm, (unsigned)(ne - nm)) >= 0) return 0;
    char list[512];
    stage_expected_list(list, sizeof list);
    if (c->opts->strict)
        return fail(c, nm, "unknown stage '%.*s' (expected one of: %s)", (int)(ne - nm), nm, list);
    warn(c, nm, "unknown stage '%.*s' (expected one of: %s); the previous stage continues",
         (int)(ne - nm), nm, list);
    return 0;
}

static int is_mnem_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* ".word V" in [s, ce): V (decimal or 0x hex, up to 0xFFFFFFFF) is the word
 * itself, unchecked. It makes the disassembler an exact inverse: a word whose
 * opcode is undefined or whose unused bits are set prints as ".word". */
static int assemble_word(struct ctx *c, const char *s, const char *ce, uint32_t *word)
{
    const char *v = s + 5;
    while (v < ce && plena_asm_is_blank(*v))
        v++;
    const char *ve = v;
    while (ve < ce && !plena_asm_is_blank(*ve))
        ve++;
    const char *r = ve;
    while (r < ce && plena_asm_is_blank(*r))
        r++;
    if (r < ce)
        return fail(c, r, "expected the end of the line after the .word value, found '%.*s'",
                    (int)(ce - r), r);
    struct tok t = {.s = v, .n = (size_t)(ve - v)};
    return get_int(c, &t, 0xFFFFFFFFu, ".word value", "", word);
}

/* Assembles one instruction line into *word. */
static int assemble_line(struct ctx *c, const struct plena_asm_line *ln, uint32_t *word)
{
    const char *s = ln->s + ln->first, *e = ln->s + ln->len;
    /* The instruction ends at the first ';' or "//": everything after is comment. */
    const char *ce = s;
    while (ce < e && *ce != ';' && !(*ce == '/' && ce + 1 < e && ce[1] == '/'))
        ce++;
    if (ce < e && find_stage_tag(ce, e)) {
        if (c->opts->strict)
            return fail(c, find_stage_tag(ce, e), "stage marker must be on its own line");
        /* lenient: a marker in a trailing comment is ignored
         * (docs/machine.md "Strict and lenient assembly") */
    }
    while (ce > s && plena_asm_is_blank(ce[-1]))
        ce--;
    if (plena_asm_is_word_directive(s, (size_t)(ce - s))) return assemble_word(c, s, ce, word);

    const char *m = s;
    while (m < ce && !plena_asm_is_blank(*m))
        m++;
    size_t mlen = (size_t)(m - s);
    int op = -1;
    int ok_chars = 1;
    for (size_t i = 0; i < mlen; i++)
        if (!is_mnem_char(s[i])) ok_chars = 0;
    if (ok_chars) op = lookup(c, s, mlen);
    if (op < 0) {
        const char *why = "";
        if (mlen == 6 && !memcmp(s, "V_PS_V", 6))
            why = "; opcode 0x31 is not implemented by any emulator";
        else if (mlen == 20 && !memcmp(s, "C_HADAMARD_TRANSFORM", 20))
            why = "; opcode 0x33 is not implemented by any emulator";
        return fail(c, s, "unknown mnemonic '%.*s' (expected a mnemonic of docs/isa.md%s)",
                    (int)mlen, s, why);
    }
    const struct plena_op_info *info = plena_isa_info((unsigned)op);

    /* Split operands on commas. */
    struct tok t[MAX_OPS + 2];
    size_t nt = 0;
    const char *p = m;
    while (p < ce && plena_asm_is_blank(*p))
        p++;
    if (p < ce) {
        for (;;) {
            while (p < ce && plena_asm_is_blank(*p))
                p++;
            const char *ts = p;
            while (p < ce && *p != ',' && !plena_asm_is_blank(*p))
                p++;
            const char *te = p;
            while (p < ce && plena_asm_is_blank(*p))
                p++;
            if (te == ts) return fail(c, ts, "empty operand (expected %s)", info->operands);
            if (p < ce && *p != ',')
                return fail(c, p, "expected ',' between operands, found '%c'", *p);
            if (nt >= MAX_OPS + 1)
                return fail(c, ts, "%s: too many operands (expected %s)", info->name,
                            info->operands[0] ? info->operands : "none");
            t[nt].s = ts;
            t[nt].n = (size_t)(te - ts);
            nt++;
            if (p >= ce) break;
            p++; /* comma */
            if (p >= ce) return fail(c, p, "empty operand after ',' (expected %s)", info->operands);
        }
    }

    const struct form_rt *fr = &c->forms[info->form];
    const struct alt_rt *f = NULL;
    for (unsigned i = 0; i < fr->n_alt && !f; i++)
        if (nt >= fr->a[i].n_req && nt <= fr->a[i].n) f = &fr->a[i];
    if (!f) {
        const char *at = nt ? t[nt - 1].s : s;
        if (fr->n_min == fr->n_max)
            return fail(c, at, "%s takes %u operand%s, found %zu (expected %s)", info->name,
                        fr->n_max, fr->n_max == 1 ? "" : "s", nt,
                        fr->n_max ? info->operands : "no operands");
        return fail(c, at, "%s takes %u to %u operands, found %zu (expected %s)", info->name,
                    fr->n_min, fr->n_max, nt, info->operands[0] ? info->operands : "none");
    }

    uint32_t fv[6] = {0, 0, 0, 0, 0, 0};
    const char *fat[6] = {s, s, s, s, s, s};
    const struct op_rt *o = &c->ops[op];
    for (size_t i = 0; i < nt; i++) {
        const struct opnd *d = &f->o[i];
        uint32_t v = 0;
        int r = 0;
        switch ((enum kind)d->kind) {
        case K_G:
        case K_F:
        case K_A: r = get_reg(c, &t[i], d->kind, &v); break;
        case K_Z:
            if (t[i].n && t[i].s[0] >= '0' && t[i].s[0] <= '9')
                r = get_int(c, &t[i], 15, "rd value", "", &v);
            else
                r = get_reg(c, &t[i], K_G, &v);
            break;
        case K_I18:
            r = get_int(c, &t[i], PLENA_IMM18_MAX, "imm18",
                        op == PLENA_OP_S_ADDI_INT
                            ? "; build larger constants with S_LUI_INT + S_ADDI_INT"
                            : "",
                        &v);
            break;
        case K_I22: r = get_int(c, &t[i], PLENA_IMM22_MAX, "imm22", "", &v); break;
        case K_M: r = get_int(c, &t[i], 15, o->policy ? "policy" : "rmask", "", &v); break;
        case K_S: r = get_int(c, &t[i], 15, "rstride", "", &v); break;
        case K_P: r = get_int(c, &t[i], 15, "precision", "", &v); break;
        case K_O: r = get_int(c, &t[i], 15, "rorder", "", &v); break;
        case K_X:
            /* The upstream assembler drops these whatever they hold; a
             * register is accepted as well as an integer. */
            if (parse_reg(&t[i], &v) >= 0)
                r = get_reg(c, &t[i], parse_reg(&t[i], &v), &v);
            else
                r = get_int(c, &t[i], 0xFFFFFFFFu, "ignored operand", "", &v);
            if (!r && v)
                warn(c, t[i].s, "operand %zu is ignored by %s; '%.*s' has no effect", i + 1,
                     info->name, (int)t[i].n, t[i].s);
            break;
        case K_XG:
            r = get_reg(c, &t[i], K_G, &v);
            if (!r && v)
                warn(c, t[i].s, "operand %zu (gp%u) is ignored by %s", i + 1, v, info->name);
            break;
        }
        if (r) return r;
        if (d->field != F_NONE) {
            fv[d->field] = v;
            fat[d->field] = t[i].s;
        }
        /* Field-value rules that trap at run time
         * (docs/machine.md "Strict and lenient assembly"): strict error,
         * lenient warning. */
        const char *bad = NULL;
        char msg[160];
        if (d->kind == K_S && v > 1) {
            snprintf(msg, sizeof msg,
                     "rstride %u (expected 0 or 1; other values select the "
                     "row-length stride)",
                     v);
            bad = msg;
        } else if (d->kind == K_M && o->policy && v > 1 && v < 15) {
            snprintf(msg, sizeof msg,
                     "%s policy %u (expected 0, 1 or 15; traps bad_operand "
                     "when executed)",
                     info->name, v);
            bad = msg;
        } else if (d->kind == K_Z && o->rd_zero && v != 0) {
            snprintf(msg, sizeof msg,
                     "%s rd %u (expected 0; a non-zero rd traps bad_operand "
                     "when executed)",
                     info->name, v);
            bad = msg;
        }
        if (bad) {
            if (c->opts->strict) return fail(c, t[i].s, "%s", bad);
            warn(c, t[i].s, "%s", bad);
        }
    }
    if (o->writes_gp && fv[F_RD] == 0 && nt > 0)
        warn(c, fat[F_RD],
             "%s writes gp0 (gp0 is an ordinary register; usually a generator "
             "mistake)",
             info->name);

    struct plena_insn in = {(uint8_t)op,        (uint8_t)fv[F_RD],  (uint8_t)fv[F_RS1],
                            (uint8_t)fv[F_RS2], (uint8_t)fv[F_RS3], (uint8_t)fv[F_FUNCT1],
                            fv[F_IMM]};
    uint32_t w = plena_isa_encode(&in);
    if (c->opts->encoder_upstream && o->has_up && fv[o->up_field] != 0) {
        /* --encoder=upstream: move (or drop) the deviating field to the upstream
         * position. */
        uint32_t v = fv[o->up_field];
        if (o->up_field == F_IMM) {
            w = plena_setfield(w, PLENA_POS_IMM18, PLENA_SIZE_IMM18, 0);
            if (o->up_pos >= 0) w |= v << o->up_pos;
        } else {
            w = plena_setfield(w, PLENA_POS_RS3, PLENA_SIZE_RS3, 0);
            if (o->up_pos >= 0) w |= (v & 15u) << o->up_pos;
        }
        if (o->up_pos >= 0)
            warn(c, fat[o->up_field],
                 "upstream encoder: %s %s placed at bit %d (the decoder "
                 "reads bit %d); the word differs from the plena encoding",
                 info->name, o->up_field == F_IMM ? "imm18" : "rmask", o->up_pos,
                 o->up_field == F_IMM ? PLENA_POS_IMM18 : PLENA_POS_RS3);
        else
            warn(c, fat[o->up_field],
                 "upstream encoder: %s rmask dropped (the decoder reads bit "
                 "%d); the word differs from the plena encoding",
                 info->name, PLENA_POS_RS3);
    }
    *word = w;
    return 0;
}

int plena_asm_text(const char *text, size_t len, const char *name,
                   const struct plena_asm_opts *opts, struct plena_program *out,
                   struct plena_asm_diags *warnings, struct plena_err *err)
{
    static const struct plena_asm_opts defaults = {0, 0, 0};
    memset(out, 0, sizeof *out);
    if (!name) name = "<input>";
    struct ctx *c = plena_malloc(sizeof *c);
    if (!c) return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory");
    c->name = name;
    c->opts = opts ? opts : &defaults;
    c->warn = warnings;
    c->err = err;
    int rc = ctx_init(c);
    if (rc) goto done;
    if (warnings && !warnings->name) warnings->name = plena_strdup(name);

    /* Every instruction line takes at least 5 bytes ("M_MM" is the shortest
     * mnemonic, plus LF), so len/5 + 1 bounds the PC count of a valid file;
     * pages that are never touched cost nothing. An invalid short line can
     * exceed the bound before it is rejected, hence the grow check below. */
    size_t cap = len / 5 + 1;
    out->asm_source_bytes = len;
    out->source_path = plena_strdup(name);
    out->words = plena_malloc(cap * sizeof *out->words);
    out->src_line = plena_malloc(cap * sizeof *out->src_line);
    if (!out->source_path || !out->words || !out->src_line) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory for %zu bytes of assembly", len);
        goto done;
    }
    size_t pos = 0, n = 0;
    uint32_t lineno = 0;
    struct plena_asm_line ln;
    while (plena_asm_next_line(text, len, &pos, &lineno, &ln)) {
        c->line = ln.no;
        c->line_s = ln.s;
        switch (ln.kind) {
        case PLENA_ASM_LINE_BLANK:
        case PLENA_ASM_LINE_SLASH: break;
        case PLENA_ASM_LINE_COMMENT: rc = check_comment(c, &ln); break;
        case PLENA_ASM_LINE_INSN:
            if (n == cap) {
                size_t cw = cap, cl = cap;
                if (plena_grow((void **)&out->words, &cw, n + 1, sizeof *out->words) ||
                    plena_grow((void **)&out->src_line, &cl, n + 1, sizeof *out->src_line)) {
                    rc = PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory at line %u", ln.no);
                    goto done;
                }
                cap = cw < cl ? cw : cl;
            }
            rc = assemble_line(c, &ln, &out->words[n]);
            out->src_line[n++] = ln.no;
            break;
        case PLENA_ASM_LINE_OTHER: {
            const char *s = ln.s + ln.first;
            size_t tl = 0;
            while (ln.first + tl < ln.len && !plena_asm_is_blank(s[tl]) && tl < 40)
                tl++;
            rc = fail(c, s,
                      "expected an instruction (upper-case mnemonic) or a comment, found "
                      "'%.*s' (plena assembly has no labels, directives other than .word or "
                      "lower-case mnemonics; '#' is not a comment)",
                      (int)tl, s);
            break;
        }
        }
        if (rc) goto done;
    }
    out->n = n;
    out->asm_source_lines = lineno;
    if (c->opts->want_labels) {
        rc = plena_labels_from_asm(text, len, name, &out->labels, err);
        if (rc) goto done;
        if (out->labels.n != n) {
            rc = PLENA_FAIL(err, PLENA_E_INTERNAL, name,
                            "label pass gave %zu labels for %zu "
                            "instructions",
                            out->labels.n, n);
            goto done;
        }
        out->has_labels = 1;
    }
done:
    plena_free(c);
    if (rc) plena_program_free(out);
    return rc;
}

int plena_asm_file(const char *path, const struct plena_asm_opts *opts, struct plena_program *out,
                   struct plena_asm_diags *warnings, struct plena_err *err)
{
    memset(out, 0, sizeof *out);
    /* A regular file is mapped rather than read: a 5M-line source is ~150 MB
     * and copying it costs as much as assembling it. */
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        size_t len = (size_t)st.st_size;
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m != MAP_FAILED) {
            (void)posix_madvise(m, len, POSIX_MADV_SEQUENTIAL);
            int rc = plena_asm_text(m, len, path, opts, out, warnings, err);
            munmap(m, len);
            return rc;
        }
    } else if (fd >= 0) {
        close(fd);
    }
    char *data = NULL;
    size_t len = 0;
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    rc = plena_asm_text(data, len, path, opts, out, warnings, err);
    plena_free(data);
    return rc;
}
