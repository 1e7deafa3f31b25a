/* The label pass (docs/profile.md "Stage attribution"): one (stage, pair)
 * label per instruction line, found with the assembler's own line
 * scanner (asm.h) so label i is always PC i. Markers mode vs legacy mode, the
 * 13 legacy rules as ONE data table, pair-id extraction, the lowering marker
 * and routed_moe_markers_present. It does not assemble or validate operands. */
#include <string.h>

#include "common/alloc.h"
#include "isa/asm.h"
#include "isa/program.h"
#include "isa/stages.h"

/* ---- legacy rules ----
 * A clause matches when the lowercased comment contains `has` (and `has2`
 * when given), does not contain `lacks` (when given) and the current stage is
 * `cur` (when cur >= 0). A rule matches when any of its clauses does. The
 * last row (rule 13) has one empty clause that always matches and keeps cur. */
#define CUR_ANY    (-1)
#define STAGE_KEEP (-1)
struct clause {
    const char *has, *has2, *lacks;
    int cur;
};
struct legacy_rule {
    int stage;
    struct clause alt[5];
};

#define C1(a)                                                                                      \
    {                                                                                              \
        a, NULL, NULL, CUR_ANY                                                                     \
    }
#define C2(a, b)                                                                                   \
    {                                                                                              \
        a, b, NULL, CUR_ANY                                                                        \
    }
#define CNOT(a, n)                                                                                 \
    {                                                                                              \
        a, NULL, n, CUR_ANY                                                                        \
    }
#define CCUR(a, s)                                                                                 \
    {                                                                                              \
        a, NULL, NULL, PLENA_STAGE_##s                                                             \
    }

static const struct legacy_rule legacy_rules[] = {
    /* 1 */ {PLENA_STAGE_ROUTER_TOPK,
             {C1("gpt-oss router"), C1("router token"), C1("router dot token")}},
    /* 2 */ {PLENA_STAGE_SCATTER_COMBINE, {C1("gpt-oss vram scatter-add"), C1("_scatter")}},
    /* 3 */ {PLENA_STAGE_EXPERT_ROUTE_WEIGHT, {C2("allocate vram matrix step6_pair", "_route")}},
    /* 4 */
    {PLENA_STAGE_EXPERT_ROUTE_WEIGHT,
     {C1("materialize route weight"), C1("vram matrix mul"),
      CCUR("true-zero vram rows", EXPERT_ROUTE_WEIGHT)}},
    /* 5 */
    {PLENA_STAGE_ACCUMULATOR_INIT, {C1("step6_device_routing_acc"), C1("true-zero vram rows")}},
    /* 6 */
    {PLENA_STAGE_GATHER,
     {C1("gpt-oss gather token rows"), C1("gather pair"), C1("clear gather padding"),
      C2("allocate vram matrix step6_pair", "_gather")}},
    /* 7 */ {PLENA_STAGE_EXPERT_BIAS, {C1("dynamic expert bias add")}},
    /* 8 */ {PLENA_STAGE_EXPERT_ACTIVATION, {C2("allocate vram matrix step6_pair", "_sigmoid")}},
    /* 9 */
    {PLENA_STAGE_EXPERT_ACTIVATION,
     {C1("tile row min fp"), C1("tile row max fp"), CCUR("vram fill zero", EXPERT_ACTIVATION),
      CCUR("vram matrix add", EXPERT_ACTIVATION), CCUR("vram matrix mul", EXPERT_ACTIVATION)}},
    /* 10 */
    {PLENA_STAGE_EXPERT_WEIGHT_ADDRESS,
     {C1("dynamic hbm weight prefetch"), C1("expert_id_to_weight_base")}},
    /* 11 */ {PLENA_STAGE_EXPERT_WEIGHT_PREFETCH, {C1("subblock [")}},
    /* 12 */
    {PLENA_STAGE_EXPERT_PROJECTION,
     {C1("sub projection"), C1("vram block add"), C1("vram block"),
      CNOT("allocate vram matrix step6_pair", "_gather")}},
    /* 13 */ {STAGE_KEEP, {C1("")}},
};
_Static_assert(sizeof legacy_rules / sizeof legacy_rules[0] == 13, "6.4 has 13 rules");

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive containment; `needle` is lower case. */
static int ci_contains(const char *h, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    if (m == 0) return 1;
    if (m > n) return 0;
    for (size_t i = 0; i + m <= n; i++) {
        if (lower(h[i]) != needle[0]) continue;
        size_t j = 1;
        while (j < m && lower(h[i + j]) == needle[j])
            j++;
        if (j == m) return 1;
    }
    return 0;
}

static int clause_matches(const struct clause *c, const char *s, size_t n, int cur)
{
    if (!c->has) return 0;
    if (c->cur != CUR_ANY && c->cur != cur) return 0;
    if (!ci_contains(s, n, c->has)) return 0;
    if (c->has2 && !ci_contains(s, n, c->has2)) return 0;
    if (c->lacks && ci_contains(s, n, c->lacks)) return 0;
    return 1;
}

static int legacy_stage(const char *s, size_t n, int cur)
{
    for (size_t r = 0; r < sizeof legacy_rules / sizeof legacy_rules[0]; r++)
        for (size_t a = 0; a < 5; a++)
            if (clause_matches(&legacy_rules[r].alt[a], s, n, cur))
                return legacy_rules[r].stage == STAGE_KEEP ? cur : legacy_rules[r].stage;
    return cur;
}

/* Legacy pair id: first `key` occurrence followed immediately by a
 * digit run that fits in u32. Returns 1 and *id when found. */
static int scan_pair(const char *s, size_t n, const char *key, uint32_t *id)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k <= n; i++) {
        if (memcmp(s + i, key, k)) continue;
        size_t j = i + k;
        uint64_t v = 0;
        size_t d = 0;
        while (j + d < n && s[j + d] >= '0' && s[j + d] <= '9') {
            if (v <= 0xFFFFFFFFull) v = v * 10 + (uint64_t)(s[j + d] - '0');
            d++;
        }
        if (d > 0 && v <= 0xFFFFFFFFull) {
            *id = (uint32_t)v;
            return 1;
        }
    }
    return 0;
}

static int legacy_pair_id(const char *s, size_t n, uint32_t *id)
{
    return scan_pair(s, n, "step6_pair", id) || scan_pair(s, n, "pair=", id);
}

/* ---- markers ---- */

struct state {
    struct plena_labels *l;
    size_t cap_unres;
    int failed;
};

static void record(struct state *st, const char *prefix, const char *v, size_t n, uint32_t line)
{
    char name[128];
    size_t pl = strlen(prefix);
    if (n > sizeof name - 1 - pl) n = sizeof name - 1 - pl;
    memcpy(name, prefix, pl);
    memcpy(name + pl, v, n);
    name[pl + n] = 0;
    struct plena_labels *l = st->l;
    for (size_t i = 0; i < l->n_unresolved; i++)
        if (!strcmp(l->unresolved[i].name, name)) {
            l->unresolved[i].occurrences++;
            return;
        }
    if (plena_grow((void **)&l->unresolved, &st->cap_unres, l->n_unresolved + 1,
                   sizeof *l->unresolved)) {
        st->failed = 1;
        return;
    }
    struct plena_unresolved_marker *u = &l->unresolved[l->n_unresolved++];
    memcpy(u->name, name, pl + n + 1);
    u->first_line = line;
    u->occurrences = 1;
}

/* Text after the leading ';' run and blanks, or NULL when it does not start
 * with `tag`. */
static const char *after_tag(const struct plena_asm_line *ln, const char *tag)
{
    const char *p = ln->s + ln->first, *e = ln->s + ln->end;
    while (p < e && *p == ';')
        p++;
    while (p < e && plena_asm_is_blank(*p))
        p++;
    size_t k = strlen(tag);
    if ((size_t)(e - p) < k || memcmp(p, tag, k)) return NULL;
    return p + k;
}

static const char *word_end(const char *p, const char *e)
{
    while (p < e && !plena_asm_is_blank(*p))
        p++;
    return p;
}

static void lowering_marker(struct state *st, const struct plena_asm_line *ln)
{
    const char *v = after_tag(ln, "@routed_lowering=");
    if (!v) return;
    const char *e = ln->s + ln->end, *ve = word_end(v, e);
    size_t n = (size_t)(ve - v);
    enum plena_lowering got = PLENA_LOWERING_UNSET;
    if (n == 10 && !memcmp(v, "pair_major", 10)) got = PLENA_LOWERING_PAIR_MAJOR;
    if (n == 12 && !memcmp(v, "expert_major", 12)) got = PLENA_LOWERING_EXPERT_MAJOR;
    /* First known value wins; an unknown or conflicting later one is recorded. */
    if (got != PLENA_LOWERING_UNSET && st->l->lowering == PLENA_LOWERING_UNSET)
        st->l->lowering = got;
    else if (got == PLENA_LOWERING_UNSET || got != st->l->lowering)
        record(st, "routed_lowering=", v, n, ln->no);
}

static int routed_markers_present(const char *t, size_t n)
{
    static const char *const needles[] = {"step6_pair", "gpt-oss", "sub projection", "expert_"};
    for (size_t i = 0; i < n; i++) {
        char c = lower(t[i]);
        if (c != 's' && c != 'g' && c != 'e') continue;
        for (size_t k = 0; k < 4; k++) {
            const char *nd = needles[k];
            if (nd[0] != c) continue;
            size_t m = strlen(nd), j = 1;
            if (i + m > n) continue;
            while (j < m && lower(t[i + j]) == nd[j])
                j++;
            if (j == m) return 1;
        }
    }
    return 0;
}

void plena_labels_free(struct plena_labels *l)
{
    if (!l) return;
    plena_free(l->v);
    plena_free(l->unresolved);
    memset(l, 0, sizeof *l);
}

int plena_labels_from_asm(const char *text, size_t len, const char *name, struct plena_labels *out,
                          struct plena_err *err)
{
    memset(out, 0, sizeof *out);
    if (!name) name = "<input>";
    /* Pass 1: instruction count and mode. */
    size_t pos = 0, n_insn = 0;
    uint32_t lineno = 0;
    int markers = 0;
    struct plena_asm_line ln;
    while (plena_asm_next_line(text, len, &pos, &lineno, &ln)) {
        if (ln.kind == PLENA_ASM_LINE_INSN)
            n_insn++;
        else if (ln.kind == PLENA_ASM_LINE_COMMENT && !markers && after_tag(&ln, "@stage="))
            markers = 1;
    }
    out->mode = markers ? PLENA_ATTR_MARKERS : PLENA_ATTR_LEGACY;
    out->routed_moe_markers_present = routed_markers_present(text, len);
    if (n_insn) {
        out->v = plena_malloc(n_insn * sizeof *out->v);
        if (!out->v) return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory for labels");
    }
    struct state st = {out, 0, 0};
    int stage = PLENA_STAGE_OTHER;
    uint32_t pair = 0;
    int has_pair = 0;
    pos = 0;
    lineno = 0;
    while (plena_asm_next_line(text, len, &pos, &lineno, &ln)) {
        if (ln.kind == PLENA_ASM_LINE_INSN) {
            out->v[out->n].stage = (uint8_t)stage;
            out->v[out->n].has_pair = (uint8_t)has_pair;
            out->v[out->n].pair = has_pair ? pair : 0;
            out->n++;
            continue;
        }
        if (ln.kind != PLENA_ASM_LINE_COMMENT) continue;
        lowering_marker(&st, &ln);
        const char *e = ln.s + ln.end;
        if (markers) {
            const char *nm = after_tag(&ln, "@stage=");
            if (!nm) continue; /* ordinary comments are ignored in markers mode */
            out->stage_marker_count++;
            const char *ne = word_end(nm, e);
            int s = plena_stage_lookup(nm, (unsigned)(ne - nm));
            int have_pair = 0, pv_some = 0;
            uint32_t pv = 0;
            for (const char *p = ne; p < e;) {
                while (p < e && plena_asm_is_blank(*p))
                    p++;
                const char *we = word_end(p, e);
                if (!have_pair && we - p >= 6 && !memcmp(p, "@pair=", 6)) {
                    const char *v = p + 6;
                    size_t vn = (size_t)(we - v);
                    uint64_t x = 0;
                    int ok = vn > 0 && vn <= 10;
                    for (size_t i = 0; ok && i < vn; i++) {
                        if (v[i] < '0' || v[i] > '9')
                            ok = 0;
                        else
                            x = x * 10 + (uint64_t)(v[i] - '0');
                    }
                    if (ok && x <= 0xFFFFFFFFull) {
                        have_pair = pv_some = 1;
                        pv = (uint32_t)x;
                    } else if (vn == 4 && !memcmp(v, "none", 4)) {
                        have_pair = 1;
                        pv_some = 0;
                    } else {
                        record(&st, "pair=", v, vn, ln.no);
                    }
                }
                p = we;
            }
            if (s < 0) {
                record(&st, "", nm, (size_t)(ne - nm), ln.no);
                continue; /* the region keeps the previous stage and pair */
            }
            stage = s;
            if (have_pair) {
                pair = pv;
                has_pair = pv_some;
            } else if (plena_stage_scope((enum plena_stage)s) != PLENA_SCOPE_PAIR) {
                has_pair = 0;
            }
        } else {
            const char *cs = ln.s + ln.first;
            size_t cn = ln.end - ln.first;
            stage = legacy_stage(cs, cn, stage);
            uint32_t id;
            if (legacy_pair_id(cs, cn, &id)) {
                pair = id;
                has_pair = 1;
            } else if (plena_stage_scope((enum plena_stage)stage) == PLENA_SCOPE_SETUP) {
                has_pair = 0;
            }
        }
        if (st.failed) break;
    }
    if (st.failed) {
        plena_labels_free(out);
        return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory for unresolved markers");
    }
    return 0;
}
