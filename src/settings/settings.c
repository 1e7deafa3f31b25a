/* plena_settings.toml: lookup, reading, validation, overrides and writing
 * (docs/formats.md "Settings file", docs/timing.md "Clock" and "HBM model",
 * docs/machine.md "Configuration"). CONFIG and HBM keys are typed rows of one
 * table (Redis config.c style): reading, defaults, overrides, the effective
 * listing and the writer all derive from it. Latency keys come from
 * isa/costs.def. No per-key fallback to the reference file, ever. */
#include "settings/settings.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "settings/toml.h"

extern const unsigned char plena_settings_reference_toml[];
extern const size_t plena_settings_reference_toml_len;

#define BUILTIN_NAME "<built-in plena_settings.toml>"
#define U32          ((int64_t)UINT32_MAX)
#define MIN64        INT64_MIN
#define MAX64        INT64_MAX

/* ---- the key table ---- */

enum kind { K_INT, K_ENUM };
enum rule { R_NONE, R_POW2, R_ROWBYTES, R_HASHBIT };
enum tab { CFG, HBM };

static const char *const mx_mode_names[] = {
#define PLENA_MX_MODE(id, name, elem, scale) name,
#include "num/formats.def"
#undef PLENA_MX_MODE
    NULL};
static const char *const hbm_gen_names[] = {"HBM2", NULL};
static const char *const hbm_model_names[] = {"hbm2", "ideal", NULL};

#define FIELD(f) offsetof(struct plena_settings, f), sizeof(((struct plena_settings *)0)->f)
#define NOFIELD  0, 0

/* X(id, table, "NAME", kind, required, has_default, default, lo, hi, rule, names, storage)
 * CONFIG rows in reference-file order (the order missing keys are reported in),
 * HBM rows in the order of docs/timing.md "HBM model" (the run-stats order). */
#define SETTINGS_KEYS(X)                                                                           \
    X(DC_EN, CFG, "DC_EN", K_INT, 1, 0, 0, MIN64, MAX64, R_NONE, NULL, FIELD(dc_en))               \
    X(MAX_LOOP_INSTRUCTIONS, CFG, "MAX_LOOP_INSTRUCTIONS", K_INT, 1, 0, 0, 1, U32, R_NONE, NULL,   \
      FIELD(max_loop_instructions))                                                                \
    X(BLEN, CFG, "BLEN", K_INT, 1, 0, 0, 1, U32, R_NONE, NULL, FIELD(blen))                        \
    X(HLEN, CFG, "HLEN", K_INT, 1, 0, 0, 1, U32, R_NONE, NULL, FIELD(hlen))                        \
    X(MLEN, CFG, "MLEN", K_INT, 1, 0, 0, 8, 65536, R_NONE, NULL, FIELD(mlen))                      \
    X(VLEN, CFG, "VLEN", K_INT, 1, 0, 0, MIN64, MAX64, R_NONE, NULL, FIELD(vlen))                  \
    X(BROADCAST_AMOUNT, CFG, "BROADCAST_AMOUNT", K_INT, 1, 0, 0, 1, U32, R_NONE, NULL,             \
      FIELD(broadcast_amount))                                                                     \
    X(HBM_SIZE, CFG, "HBM_SIZE", K_INT, 1, 0, 0, MIN64, MAX64, R_NONE, NULL, FIELD(hbm_size))      \
    X(MATRIX_SRAM_SIZE, CFG, "MATRIX_SRAM_SIZE", K_INT, 1, 0, 0, MIN64, MAX64, R_NONE, NULL,       \
      FIELD(matrix_sram_size))                                                                     \
    X(VECTOR_SRAM_SIZE, CFG, "VECTOR_SRAM_SIZE", K_INT, 1, 0, 0, 1, MAX64, R_NONE, NULL,           \
      FIELD(vector_sram_size))                                                                     \
    X(HBM_M_Prefetch_Amount, CFG, "HBM_M_Prefetch_Amount", K_INT, 1, 0, 0, MIN64, MAX64, R_NONE,   \
      NULL, FIELD(hbm_m_prefetch_amount))                                                          \
    X(HBM_V_Prefetch_Amount, CFG, "HBM_V_Prefetch_Amount", K_INT, 1, 0, 0, 1, U32, R_NONE, NULL,   \
      FIELD(hbm_v_prefetch_amount))                                                                \
    X(HBM_V_Writeback_Amount, CFG, "HBM_V_Writeback_Amount", K_INT, 1, 0, 0, 1, U32, R_NONE, NULL, \
      FIELD(hbm_v_writeback_amount))                                                               \
    X(HBM_WIDTH, CFG, "HBM_WIDTH", K_INT, 0, 0, 0, MIN64, MAX64, R_NONE, NULL, NOFIELD)            \
    X(FP_SRAM_DEPTH, CFG, "FP_SRAM_DEPTH", K_INT, 0, 1, 1024, 1, 16777216, R_NONE, NULL,           \
      FIELD(fp_sram_depth))                                                                        \
    X(INT_SRAM_DEPTH, CFG, "INT_SRAM_DEPTH", K_INT, 0, 1, 1024, 1, 16777216, R_NONE, NULL,         \
      FIELD(int_sram_depth))                                                                       \
    X(HBM_GEN, CFG, "HBM_GEN", K_ENUM, 0, 0, 0, 0, 0, R_NONE, hbm_gen_names, NOFIELD)              \
    X(HBM_CHANNELS, CFG, "HBM_CHANNELS", K_INT, 0, 0, 0, MIN64, MAX64, R_NONE, NULL,               \
      FIELD(config_hbm_channels))                                                                  \
    X(MX_MODE, CFG, "MX_MODE", K_ENUM, 0, 1, 0, 0, 1, R_NONE, mx_mode_names, FIELD(mx_mode))       \
    X(CLOCK_PERIOD_PS, CFG, "CLOCK_PERIOD_PS", K_INT, 0, 1, 1000, 1, MAX64, R_NONE, NULL,          \
      FIELD(clock_period_ps))                                                                      \
    X(MODEL, HBM, "MODEL", K_ENUM, 0, 1, 0, 0, 1, R_NONE, hbm_model_names, FIELD(hbm.model))       \
    X(TCK_PS, HBM, "TCK_PS", K_INT, 0, 1, 1000, 1, MAX64, R_NONE, NULL, FIELD(hbm.tck_ps))         \
    X(CHANNELS, HBM, "CHANNELS", K_INT, 0, 1, 8, 0, U32, R_POW2, NULL, FIELD(hbm.channels))        \
    X(PSEUDO_CHANNELS, HBM, "PSEUDO_CHANNELS", K_INT, 0, 1, 2, 0, U32, R_POW2, NULL,               \
      FIELD(hbm.pseudo_channels))                                                                  \
    X(BANK_GROUPS, HBM, "BANK_GROUPS", K_INT, 0, 1, 4, 0, U32, R_POW2, NULL,                       \
      FIELD(hbm.bank_groups))                                                                      \
    X(BANKS_PER_GROUP, HBM, "BANKS_PER_GROUP", K_INT, 0, 1, 4, 0, U32, R_POW2, NULL,               \
      FIELD(hbm.banks_per_group))                                                                  \
    X(ROW_BYTES, HBM, "ROW_BYTES", K_INT, 0, 1, 1024, 0, U32, R_ROWBYTES, NULL,                    \
      FIELD(hbm.row_bytes))                                                                        \
    X(ADDRESS_HASH_BIT, HBM, "ADDRESS_HASH_BIT", K_INT, 0, 1, 16, 0, 63, R_HASHBIT, NULL,          \
      FIELD(hbm.address_hash_bit))                                                                 \
    X(ROW_IDLE_CLOSE, HBM, "ROW_IDLE_CLOSE", K_INT, 0, 1, 64, 0, U32, R_NONE, NULL,                \
      FIELD(hbm.row_idle_close))                                                                   \
    X(nBL, HBM, "nBL", K_INT, 0, 1, 4, 1, U32, R_NONE, NULL, FIELD(hbm.nBL))                       \
    X(nCL, HBM, "nCL", K_INT, 0, 1, 7, 0, U32, R_NONE, NULL, FIELD(hbm.nCL))                       \
    X(nCWL, HBM, "nCWL", K_INT, 0, 1, 2, 0, U32, R_NONE, NULL, FIELD(hbm.nCWL))                    \
    X(nRCD, HBM, "nRCD", K_INT, 0, 1, 7, 0, U32, R_NONE, NULL, FIELD(hbm.nRCD))                    \
    X(nRP, HBM, "nRP", K_INT, 0, 1, 7, 0, U32, R_NONE, NULL, FIELD(hbm.nRP))                       \
    X(nRAS, HBM, "nRAS", K_INT, 0, 1, 17, 0, U32, R_NONE, NULL, FIELD(hbm.nRAS))                   \
    X(nRC, HBM, "nRC", K_INT, 0, 1, 19, 0, U32, R_NONE, NULL, FIELD(hbm.nRC))                      \
    X(nRTP, HBM, "nRTP", K_INT, 0, 1, 2, 0, U32, R_NONE, NULL, FIELD(hbm.nRTP))                    \
    X(nWR, HBM, "nWR", K_INT, 0, 1, 8, 0, U32, R_NONE, NULL, FIELD(hbm.nWR))                       \
    X(nWTR, HBM, "nWTR", K_INT, 0, 1, 4, 0, U32, R_NONE, NULL, FIELD(hbm.nWTR))                    \
    X(nRRDS, HBM, "nRRDS", K_INT, 0, 1, 2, 0, U32, R_NONE, NULL, FIELD(hbm.nRRDS))                 \
    X(nRRDL, HBM, "nRRDL", K_INT, 0, 1, 3, 0, U32, R_NONE, NULL, FIELD(hbm.nRRDL))                 \
    X(nFAW, HBM, "nFAW", K_INT, 0, 1, 15, 0, U32, R_NONE, NULL, FIELD(hbm.nFAW))                   \
    X(nREFI, HBM, "nREFI", K_INT, 0, 1, 3900, 0, U32, R_NONE, NULL, FIELD(hbm.nREFI))              \
    X(nRFC, HBM, "nRFC", K_INT, 0, 1, 350, 0, U32, R_NONE, NULL, FIELD(hbm.nRFC))

enum key_id {
#define X(id, ...) KEY_##id,
    SETTINGS_KEYS(X)
#undef X
        KEY_COUNT
};

struct key_row {
    enum tab tab;
    const char *name;
    enum kind kind;
    int required, has_default;
    int64_t def, lo, hi;
    enum rule rule;
    const char *const *names; /* K_ENUM: accepted strings; the value is the index */
    size_t off, size;         /* storage in struct plena_settings; size 0: checked, not kept */
};

static const struct key_row rows[KEY_COUNT] = {
#define X(id, tab, name, kind, req, hasdef, def, lo, hi, rule, names, storage)                     \
    {tab, name, kind, req, hasdef, def, lo, hi, rule, names, storage},
    SETTINGS_KEYS(X)
#undef X
};

/* Upstream latency extras: accepted and ignored without a warning. */
static const char *const latency_extras[] = {"VECTOR_LONGEST_OPERATE_CYCLES", "VECTOR_BASIC_CYCLES",
                                             NULL};

static const char *const latency_names[PLENA_LAT_COUNT] = {
#define PLENA_LATENCY(key, en, dis, used) #key,
#include "isa/costs.def"
#undef PLENA_LATENCY
};

/* PRECISION tables in reference-file order. */
enum prec_id {
    P_MATRIX_SRAM,
    P_VECTOR_SRAM,
    P_HBM_M_WEIGHT,
    P_HBM_M_KV,
    P_HBM_V_ACT,
    P_HBM_V_KV,
    P_HBM_V_INT,
    P_SCALAR_FP,
    P_COUNT
};
static const char *const prec_names[P_COUNT] = {
    "MATRIX_SRAM_TYPE", "VECTOR_SRAM_TYPE", "HBM_M_WEIGHT_TYPE", "HBM_M_KV_TYPE",
    "HBM_V_ACT_TYPE",   "HBM_V_KV_TYPE",    "HBM_V_INT_TYPE",    "SCALAR_FP"};

static struct plena_hbm_type *hbm_type_of(struct plena_settings *s, int p)
{
    switch (p) {
    case P_HBM_M_WEIGHT: return &s->hbm_m_weight_type;
    case P_HBM_M_KV: return &s->hbm_m_kv_type;
    case P_HBM_V_ACT: return &s->hbm_v_act_type;
    case P_HBM_V_KV: return &s->hbm_v_kv_type;
    default: return NULL;
    }
}

/* ---- reading context ---- */

struct ctx {
    const char *name; /* file name, or "--set ..." for overrides */
    struct plena_err *err;
    int64_t vals[KEY_COUNT];
    int present[KEY_COUNT];
    int lines[KEY_COUNT]; /* 0: no line (default or override) */
};

static void where_at(char *buf, size_t n, const char *name, int line)
{
    if (line > 0)
        snprintf(buf, n, "%s:%d", name, line);
    else
        snprintf(buf, n, "%s", name);
}

static int failf(struct ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failf(struct ctx *c, int line, const char *fmt, ...)
{
    char where[256];
    where_at(where, sizeof where, c->name, line);
    va_list ap;
    va_start(ap, fmt);
    plena_err_vset(c->err, PLENA_E_INPUT, __FILE__, __LINE__, where, fmt, ap);
    va_end(ap);
    return PLENA_E_INPUT;
}

static void key_path(char *buf, size_t n, int k)
{
    if (rows[k].tab == CFG)
        snprintf(buf, n, "TRANSACTIONAL.CONFIG.%s.value", rows[k].name);
    else
        snprintf(buf, n, "TRANSACTIONAL.HBM.%s", rows[k].name);
}

static void add_warning(struct plena_settings *s, const char *name, int line, const char *path)
{
    if (s->n_warnings < PLENA_SETTINGS_MAX_WARNINGS)
        snprintf(s->warnings[s->n_warnings], sizeof s->warnings[0],
                 "%.100s:%d: %.120s: unknown key ignored", name, line, path);
    s->n_warnings++;
}

/* Walks `dotted` from root. Returns 0 and *out (NULL when a part is absent),
 * or an error if an intermediate part exists but is not a table. */
static int walk(struct ctx *c, const struct plena_toml_value *root, const char *dotted,
                const struct plena_toml_value **out)
{
    char prefix[512];
    const struct plena_toml_value *t = root;
    const char *s = dotted;
    *out = NULL;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        char part[256];
        if (n >= sizeof part) return 0;
        memcpy(part, s, n);
        part[n] = 0;
        const struct plena_toml_entry *e = plena_toml_find(t, part);
        if (!e) return 0;
        if (!dot) {
            *out = e->value;
            return 0;
        }
        if (e->value->type != PLENA_TOML_TABLE) {
            snprintf(prefix, sizeof prefix, "%.*s", (int)(dot - dotted), dotted);
            return failf(c, e->value->line, "%s: expected table, found %s", prefix,
                         plena_toml_type_name(e->value->type));
        }
        t = e->value;
        s = dot + 1;
    }
}

static int type_error(struct ctx *c, const struct plena_toml_value *v, const char *path,
                      const char *expected)
{
    return failf(c, v->line, "%s: expected %s, found %s", path, expected,
                 plena_toml_type_name(v->type));
}

/* A required member of a table: missing -> "required key missing". */
static int need(struct ctx *c, const struct plena_toml_value *root, const char *path,
                enum plena_toml_type type, const struct plena_toml_value **out)
{
    if (walk(c, root, path, out)) return PLENA_E_INPUT;
    if (!*out) return failf(c, 0, "%s: required key missing", path);
    if ((*out)->type != type) return type_error(c, *out, path, plena_toml_type_name(type));
    return 0;
}

static void enum_rule(char *buf, size_t n, const char *const *names)
{
    size_t o = 0, count = 0;
    while (names[count])
        count++;
    o += (size_t)snprintf(buf, n, "must be ");
    if (count > 1) o += (size_t)snprintf(buf + o, n - o, "one of ");
    for (size_t i = 0; i < count && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s\"%s\"", i ? ", " : "", names[i]);
}

/* Type and single-key checks of one CONFIG/HBM value; stores it in c->vals. */
static int read_key(struct ctx *c, int k, const struct plena_toml_value *v, const char *path)
{
    const struct key_row *r = &rows[k];
    if (r->kind == K_ENUM) {
        if (v->type != PLENA_TOML_STRING) return type_error(c, v, path, "string");
        for (int i = 0; r->names[i]; i++)
            if (strcmp(v->str, r->names[i]) == 0 && strlen(r->names[i]) == v->str_len) {
                c->vals[k] = i;
                return 0;
            }
        char rule[160];
        enum_rule(rule, sizeof rule, r->names);
        return failf(c, v->line, "%s: %s, found \"%s\"", path, rule, v->str);
    }
    if (v->type != PLENA_TOML_INTEGER) return type_error(c, v, path, "integer");
    int64_t x = v->i;
    int open_hi = r->hi == MAX64 || r->hi == U32;
    if (x < r->lo || x > r->hi) {
        if (open_hi && x < r->lo)
            return failf(c, v->line, "%s: must be >= %" PRId64 ", found %" PRId64, path, r->lo, x);
        if (r->lo == MIN64 || open_hi)
            return failf(c, v->line, "%s: must be <= %" PRId64 ", found %" PRId64, path, r->hi, x);
        return failf(c, v->line, "%s: must be in %" PRId64 "..%" PRId64 ", found %" PRId64, path,
                     r->lo, r->hi, x);
    }
    int pow2 = x > 0 && (x & (x - 1)) == 0;
    if (r->rule == R_POW2 && !pow2)
        return failf(c, v->line, "%s: must be a power of two, found %" PRId64, path, x);
    if (r->rule == R_ROWBYTES && (!pow2 || x < 64))
        return failf(c, v->line, "%s: must be a power of two >= 64, found %" PRId64, path, x);
    if (r->rule == R_HASHBIT && x != 0 && x < 6)
        return failf(c, v->line, "%s: must be 0 or in 6..63, found %" PRId64, path, x);
    c->vals[k] = x;
    return 0;
}

/* ---- PRECISION ---- */

struct dtype {
    int is_int;
    int sign;
    int64_t exponent, mantissa, width;
};

static int read_dtype(struct ctx *c, const struct plena_toml_value *root, const char *path,
                      struct dtype *d)
{
    char p[512];
    const struct plena_toml_value *v;
    memset(d, 0, sizeof *d);
    if (need(c, root, path, PLENA_TOML_TABLE, &v)) return PLENA_E_INPUT;
    snprintf(p, sizeof p, "%s.type", path);
    if (need(c, root, p, PLENA_TOML_STRING, &v)) return PLENA_E_INPUT;
    if (strcmp(v->str, "Int") == 0) {
        d->is_int = 1;
        snprintf(p, sizeof p, "%s.width", path);
        if (need(c, root, p, PLENA_TOML_INTEGER, &v)) return PLENA_E_INPUT;
        d->width = v->i;
        return 0;
    }
    if (strcmp(v->str, "Fp") != 0)
        return failf(c, v->line, "%s: must be \"Fp\" or \"Int\", found \"%s\"", p, v->str);
    snprintf(p, sizeof p, "%s.sign", path);
    if (need(c, root, p, PLENA_TOML_BOOLEAN, &v)) return PLENA_E_INPUT;
    d->sign = v->b;
    snprintf(p, sizeof p, "%s.exponent", path);
    if (need(c, root, p, PLENA_TOML_INTEGER, &v)) return PLENA_E_INPUT;
    d->exponent = v->i;
    snprintf(p, sizeof p, "%s.mantissa", path);
    if (need(c, root, p, PLENA_TOML_INTEGER, &v)) return PLENA_E_INPUT;
    d->mantissa = v->i;
    return 0;
}

static int is_fp(const struct dtype *d, int sign, int e, int m)
{
    return !d->is_int && d->sign == sign && d->exponent == e && d->mantissa == m;
}

static void describe(char *buf, size_t n, const struct dtype *d)
{
    if (d->is_int)
        snprintf(buf, n, "Int(width=%" PRId64 ")", d->width);
    else
        snprintf(buf, n, "Fp(sign=%s, exponent=%" PRId64 ", mantissa=%" PRId64 ")",
                 d->sign ? "true" : "false", d->exponent, d->mantissa);
}

static int read_precision(struct ctx *c, const struct plena_toml_value *root, int id,
                          struct plena_settings *s)
{
    char path[256], p[320], desc[400], a[128], b[128];
    snprintf(path, sizeof path, "TRANSACTIONAL.PRECISION.%s", prec_names[id]);
    const struct plena_toml_value *t, *v;
    if (need(c, root, path, PLENA_TOML_TABLE, &t)) return PLENA_E_INPUT;
    struct dtype d;
    if (id == P_SCALAR_FP) {
        /* SCALAR_FP is a data-type table itself */
        if (read_dtype(c, root, path, &d)) return PLENA_E_INPUT;
        if (is_fp(&d, 1, 8, 7)) return 0;
        describe(desc, sizeof desc, &d);
        return failf(c, t->line, "%s: %s is not supported", path, desc);
    }
    snprintf(p, sizeof p, "%s.format", path);
    if (need(c, root, p, PLENA_TOML_STRING, &v)) return PLENA_E_INPUT;
    struct plena_hbm_type *ht = hbm_type_of(s, id);
    int is_hbm = ht != NULL;
    if (strcmp(v->str, "Plain") == 0) {
        snprintf(p, sizeof p, "%s.DATA_TYPE", path);
        if (read_dtype(c, root, p, &d)) return PLENA_E_INPUT;
        if (id == P_HBM_V_INT) {
            if (d.is_int && d.width == 32) return 0;
        } else if (is_fp(&d, 1, 8, 7)) {
            if (is_hbm) *ht = (struct plena_hbm_type){PLENA_HBM_BF16, 0};
            return 0;
        } else if (is_hbm && is_fp(&d, 1, 5, 10)) {
            *ht = (struct plena_hbm_type){PLENA_HBM_FP16, 0};
            return 0;
        }
        describe(a, sizeof a, &d);
        snprintf(desc, sizeof desc, "Plain %s", a);
        return failf(c, t->line, "%s: %s is not supported", path, desc);
    }
    if (strcmp(v->str, "Mx") != 0)
        return failf(c, v->line, "%s: must be \"Plain\" or \"Mx\", found \"%s\"", p, v->str);
    snprintf(p, sizeof p, "%s.block", path);
    if (need(c, root, p, PLENA_TOML_INTEGER, &v)) return PLENA_E_INPUT;
    int64_t block = v->i;
    struct dtype e, sc;
    snprintf(p, sizeof p, "%s.ELEM", path);
    if (read_dtype(c, root, p, &e)) return PLENA_E_INPUT;
    snprintf(p, sizeof p, "%s.SCALE", path);
    if (read_dtype(c, root, p, &sc)) return PLENA_E_INPUT;
    if (is_hbm && (block == 8 || block == 32) && is_fp(&e, 1, 4, 3) && is_fp(&sc, 0, 8, 0)) {
        *ht = (struct plena_hbm_type){PLENA_HBM_MX, (uint32_t)block};
        return 0;
    }
    describe(a, sizeof a, &e);
    describe(b, sizeof b, &sc);
    snprintf(desc, sizeof desc, "Mx(block=%" PRId64 ", ELEM=%s, SCALE=%s)", block, a, b);
    return failf(c, t->line, "%s: %s is not supported", path, desc);
}

/* ---- cross-key validation (on c->vals) ---- */

static int bad(struct ctx *c, int k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(struct ctx *c, int k, const char *fmt, ...)
{
    char path[256], rule[512];
    key_path(path, sizeof path, k);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof rule, fmt, ap);
    va_end(ap);
    return failf(c, c->lines[k], "%s: %s, found %" PRId64, path, rule, c->vals[k]);
}

/* A value plena adjusts as the upstream emulator does, recorded as a
 * warning naming the key, the value and the value used. */
static void clamp_warning(struct ctx *c, struct plena_settings *s, int k, int64_t to,
                          const char *why)
{
    char path[256], at[112];
    key_path(path, sizeof path, k);
    if (c->lines[k])
        snprintf(at, sizeof at, "%.80s:%d", c->name, c->lines[k]);
    else
        snprintf(at, sizeof at, "%.100s", c->name);
    if (s->n_warnings < PLENA_SETTINGS_MAX_WARNINGS)
        snprintf(s->warnings[s->n_warnings], sizeof s->warnings[0],
                 "%s: %.64s: %" PRId64 " %s; clamped to %" PRId64
                 " (as the upstream emulator does)",
                 at, path, c->vals[k], why, to);
    s->n_warnings++;
    c->vals[k] = to;
}

static int validate(struct ctx *c, struct plena_settings *s)
{
    const int64_t *v = c->vals;
    int64_t mlen = v[KEY_MLEN];
    if (mlen % v[KEY_BLEN])
        return bad(c, KEY_MLEN, "must be a multiple of BLEN (%" PRId64 ")", v[KEY_BLEN]);
    if (v[KEY_VLEN] != mlen) return bad(c, KEY_VLEN, "must equal MLEN (%" PRId64 ")", mlen);
    if (v[KEY_VLEN] % v[KEY_HLEN])
        return bad(c, KEY_HLEN, "must divide VLEN (%" PRId64 ")", v[KEY_VLEN]);
    const struct plena_hbm_type *t[4] = {&s->hbm_m_weight_type, &s->hbm_m_kv_type,
                                         &s->hbm_v_act_type, &s->hbm_v_kv_type};
    for (int i = 0; i < 4; i++)
        if (t[i]->kind == PLENA_HBM_MX && t[i]->block && mlen % t[i]->block)
            return bad(c, KEY_MLEN,
                       "must be a multiple of the MX block size (%u) of "
                       "TRANSACTIONAL.PRECISION.%s",
                       (unsigned)t[i]->block, prec_names[P_HBM_M_WEIGHT + i]);
    int64_t hs = v[KEY_HBM_SIZE];
    if (hs <= 0 || hs % 64 || hs > ((int64_t)1 << 48))
        return bad(c, KEY_HBM_SIZE, "must be > 0, a multiple of 64 and <= 2^48");
    int64_t ms = v[KEY_MATRIX_SRAM_SIZE];
    if (ms < mlen || ms % mlen || ms > U32)
        return bad(c, KEY_MATRIX_SRAM_SIZE,
                   "must be a multiple of MLEN (%" PRId64 "), >= MLEN and <= %" PRId64, mlen, U32);
    /* VRAM bytes (rows x VLEN x 2) must be representable; allocation is the
     * emulator's check. */
    if (v[KEY_VECTOR_SRAM_SIZE] > (MAX64 / 2) / mlen)
        return bad(c, KEY_VECTOR_SRAM_SIZE, "must be <= %" PRId64 " at VLEN %" PRId64,
                   (MAX64 / 2) / mlen, mlen);
    /* Upstream (runtime_config.rs PREFETCH_M_AMOUNT) reads a u32 and clamps
     * a value below MLEN to MLEN and rounds any other up to a multiple of
     * MLEN, each with a warning; plena does the same. */
    int64_t pm = v[KEY_HBM_M_Prefetch_Amount];
    if (pm < 0 || pm > U32) return bad(c, KEY_HBM_M_Prefetch_Amount, "must be in 0..%" PRId64, U32);
    char why[96];
    if (pm < mlen) {
        snprintf(why, sizeof why, "is below MLEN (%" PRId64 ")", mlen);
        clamp_warning(c, s, KEY_HBM_M_Prefetch_Amount, mlen, why);
    } else if (pm % mlen) {
        int64_t up = (pm + mlen - 1) / mlen * mlen;
        if (up > U32)
            return bad(c, KEY_HBM_M_Prefetch_Amount,
                       "rounded up to a multiple of MLEN (%" PRId64 ") exceeds %" PRId64, mlen,
                       U32);
        snprintf(why, sizeof why, "is not a multiple of MLEN (%" PRId64 "), rounded up", mlen);
        clamp_warning(c, s, KEY_HBM_M_Prefetch_Amount, up, why);
    }
    if (c->present[KEY_HBM_CHANNELS] && v[KEY_HBM_CHANNELS] != v[KEY_CHANNELS])
        return bad(c, KEY_HBM_CHANNELS, "must equal TRANSACTIONAL.HBM.CHANNELS (%" PRId64 ")",
                   v[KEY_CHANNELS]);
    return 0;
}

/* ---- struct <-> values ---- */

static void store(struct plena_settings *s, int k, int64_t x)
{
    const struct key_row *r = &rows[k];
    unsigned char *p = (unsigned char *)s + r->off;
    switch (r->size) {
    case 1: {
        uint8_t u = (uint8_t)x;
        memcpy(p, &u, 1);
        break;
    }
    case 2: {
        uint16_t u = (uint16_t)x;
        memcpy(p, &u, 2);
        break;
    }
    case 4: {
        uint32_t u = (uint32_t)x;
        memcpy(p, &u, 4);
        break;
    }
    case 8: memcpy(p, &x, 8); break;
    default: break;
    }
}

static int64_t load(const struct plena_settings *s, int k)
{
    const struct key_row *r = &rows[k];
    const unsigned char *p = (const unsigned char *)s + r->off;
    switch (r->size) {
    case 1: return *p;
    case 2: {
        uint16_t u;
        memcpy(&u, p, 2);
        return u;
    }
    case 4: {
        uint32_t u;
        memcpy(&u, p, 4);
        return u;
    }
    case 8: {
        int64_t x;
        memcpy(&x, p, 8);
        return x;
    }
    default: return 0;
    }
}

static void vals_from_settings(struct ctx *c, const struct plena_settings *s)
{
    for (int k = 0; k < KEY_COUNT; k++) {
        c->vals[k] = load(s, k);
        c->present[k] = rows[k].size != 0;
        c->lines[k] = 0;
    }
    c->present[KEY_HBM_CHANNELS] = s->config_hbm_channels != 0;
}

static void settings_from_vals(struct plena_settings *s, const struct ctx *c)
{
    for (int k = 0; k < KEY_COUNT; k++) {
        if (!rows[k].size) continue;
        store(s, k, c->present[k] || rows[k].has_default ? c->vals[k] : 0);
    }
    for (int i = 0; i < PLENA_LAT_COUNT; i++)
        s->latency[i] = s->dc_en ? s->latency_en[i] : s->latency_dis[i];
}

/* ---- parse ---- */

static void note_default(struct plena_settings *s, int k)
{
    char line[96];
    const struct key_row *r = &rows[k];
    const char *pre = r->tab == HBM ? "HBM." : "";
    if (r->kind == K_ENUM)
        snprintf(line, sizeof line, "%s%s = \"%s\"", pre, r->name, r->names[r->def]);
    else
        snprintf(line, sizeof line, "%s%s = %" PRId64, pre, r->name, r->def);
    size_t n = strlen(s->defaults_used);
    snprintf(s->defaults_used + n, sizeof s->defaults_used - n, "%s%s", n ? "\n" : "", line);
}

static int is_config_key(const char *name, enum tab tab)
{
    for (int k = 0; k < KEY_COUNT; k++)
        if (rows[k].tab == tab && strcmp(rows[k].name, name) == 0) return 1;
    return 0;
}

static int parse_doc(struct ctx *c, const struct plena_toml_value *root, struct plena_settings *s)
{
    char path[512];
    const struct plena_toml_value *v;

    /* 1. presence of every required key, in the documented validation order */
    for (int k = 0; k < KEY_COUNT; k++) {
        if (!rows[k].required) continue;
        key_path(path, sizeof path, k);
        if (walk(c, root, path, &v)) return PLENA_E_INPUT;
        if (!v) return failf(c, 0, "%s: required key missing", path);
    }
    for (int p = 0; p < P_COUNT; p++) {
        snprintf(path, sizeof path, "TRANSACTIONAL.PRECISION.%s", prec_names[p]);
        if (walk(c, root, path, &v)) return PLENA_E_INPUT;
        if (!v) return failf(c, 0, "%s: required key missing", path);
    }
    for (int i = 0; i < PLENA_LAT_COUNT; i++)
        for (int col = 0; col < 2; col++) {
            snprintf(path, sizeof path, "TRANSACTIONAL.LATENCY.%s.%s", latency_names[i],
                     col ? "dc_lib_dis" : "dc_lib_en");
            if (walk(c, root, path, &v)) return PLENA_E_INPUT;
            if (!v) return failf(c, 0, "%s: required key missing", path);
        }

    /* 2. CONFIG and HBM rows: type, range, defaults */
    for (int k = 0; k < KEY_COUNT; k++) {
        key_path(path, sizeof path, k);
        if (walk(c, root, path, &v)) return PLENA_E_INPUT;
        if (!v && rows[k].tab == CFG) {
            /* [CONFIG.KEY] present without 'value' is a missing key too */
            char tpath[256];
            snprintf(tpath, sizeof tpath, "TRANSACTIONAL.CONFIG.%s", rows[k].name);
            const struct plena_toml_value *t;
            if (walk(c, root, tpath, &t)) return PLENA_E_INPUT;
            if (t && t->type != PLENA_TOML_TABLE) return type_error(c, t, tpath, "table");
            if (t) return failf(c, 0, "%s: required key missing", path);
        }
        if (!v) {
            c->present[k] = 0;
            c->vals[k] = rows[k].def;
            if (rows[k].has_default) note_default(s, k);
            continue;
        }
        c->present[k] = 1;
        c->lines[k] = v->line;
        if (read_key(c, k, v, path)) return PLENA_E_INPUT;
    }
    const struct plena_toml_value *cfg = plena_toml_get(root, "TRANSACTIONAL.CONFIG");
    for (size_t i = 0; cfg && cfg->type == PLENA_TOML_TABLE && i < cfg->n_entries; i++)
        if (!is_config_key(cfg->entries[i].key, CFG)) {
            snprintf(path, sizeof path, "TRANSACTIONAL.CONFIG.%s", cfg->entries[i].key);
            add_warning(s, c->name, cfg->entries[i].line, path);
        }
    const struct plena_toml_value *hbm;
    if (walk(c, root, "TRANSACTIONAL.HBM", &hbm)) return PLENA_E_INPUT;
    if (hbm && hbm->type != PLENA_TOML_TABLE)
        return type_error(c, hbm, "TRANSACTIONAL.HBM", "table");
    for (size_t i = 0; hbm && i < hbm->n_entries; i++)
        if (!is_config_key(hbm->entries[i].key, HBM)) {
            snprintf(path, sizeof path, "TRANSACTIONAL.HBM.%s", hbm->entries[i].key);
            add_warning(s, c->name, hbm->entries[i].line, path);
        }

    /* 3. PRECISION */
    for (int p = 0; p < P_COUNT; p++)
        if (read_precision(c, root, p, s)) return PLENA_E_INPUT;

    /* 4. LATENCY */
    for (int i = 0; i < PLENA_LAT_COUNT; i++)
        for (int col = 0; col < 2; col++) {
            snprintf(path, sizeof path, "TRANSACTIONAL.LATENCY.%s.%s", latency_names[i],
                     col ? "dc_lib_dis" : "dc_lib_en");
            if (need(c, root, path, PLENA_TOML_INTEGER, &v)) return PLENA_E_INPUT;
            if (v->i < 0 || v->i > U32)
                return failf(c, v->line, "%s: must be in 0..%" PRId64 ", found %" PRId64, path, U32,
                             v->i);
            (col ? s->latency_dis : s->latency_en)[i] = (uint32_t)v->i;
        }
    const struct plena_toml_value *lat = plena_toml_get(root, "TRANSACTIONAL.LATENCY");
    for (size_t i = 0; lat && lat->type == PLENA_TOML_TABLE && i < lat->n_entries; i++) {
        const char *key = lat->entries[i].key;
        int known = 0;
        for (int j = 0; j < PLENA_LAT_COUNT && !known; j++)
            known = !strcmp(key, latency_names[j]);
        for (int j = 0; latency_extras[j] && !known; j++)
            known = !strcmp(key, latency_extras[j]);
        if (!known) {
            snprintf(path, sizeof path, "TRANSACTIONAL.LATENCY.%s", key);
            add_warning(s, c->name, lat->entries[i].line, path);
        }
    }

    /* 5. relations between keys */
    if (validate(c, s)) return PLENA_E_INPUT;
    settings_from_vals(s, c);
    return 0;
}

int plena_settings_parse(const char *text, size_t len, const char *name, struct plena_settings *s,
                         struct plena_err *err)
{
    struct plena_toml_doc doc;
    if (!name) name = "plena_settings.toml";
    int rc = plena_toml_parse(text, len, name, &doc, err);
    if (rc) return rc;
    struct plena_settings *tmp = plena_calloc(1, sizeof *tmp);
    struct ctx *c = plena_calloc(1, sizeof *c);
    if (!tmp || !c) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory while reading settings");
    } else {
        c->name = name;
        c->err = err;
        rc = parse_doc(c, doc.root, tmp);
        if (!rc) *s = *tmp;
    }
    plena_free(tmp);
    plena_free(c);
    plena_toml_free(&doc);
    return rc;
}

/* ---- lookup ---- */

static int load_file(const char *path, struct plena_settings *s, struct plena_err *err)
{
    char *data;
    size_t len;
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    rc = plena_settings_parse(data, len, path, s, err);
    plena_free(data);
    if (rc) return rc;
    snprintf(s->config_path, sizeof s->config_path, "%s", path);
    return 0;
}

int plena_settings_load(const char *path, struct plena_settings *s, struct plena_err *err)
{
    if (path && *path) return load_file(path, s, err);
    const char *env = getenv("PLENA_SETTINGS_TOML");
    if (env && *env) return load_file(env, s, err);
    static const char *const local[] = {"plena_settings.toml", "../plena_settings.toml"};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (stat(local[i], &st) == 0) return load_file(local[i], s, err);
    }
    int rc = plena_settings_parse(plena_settings_reference_text(),
                                  plena_settings_reference_toml_len, BUILTIN_NAME, s, err);
    if (!rc) s->config_path[0] = 0;
    return rc;
}

const char *plena_settings_reference_text(void)
{
    return (const char *)plena_settings_reference_toml;
}

void plena_settings_reference(struct plena_settings *s)
{
    /* The embedded file is checked by test_settings; failing here is a build
     * defect, not an input error, so an empty struct is the only fallback. */
    if (plena_settings_parse(plena_settings_reference_text(), plena_settings_reference_toml_len,
                             BUILTIN_NAME, s, NULL))
        memset(s, 0, sizeof *s);
    s->config_path[0] = 0;
}

/* ---- overrides ---- */

static int apply_one(struct ctx *c, struct plena_settings *s, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq) return failf(c, 0, "expected TABLE.KEY=VALUE");
    char key[256];
    size_t kn = (size_t)(eq - assignment);
    while (kn && (assignment[kn - 1] == ' ' || assignment[kn - 1] == '\t'))
        kn--;
    if (kn >= sizeof key) return failf(c, 0, "key too long");
    memcpy(key, assignment, kn);
    key[kn] = 0;
    const char *k = key;
    if (strncmp(k, "TRANSACTIONAL.", 14) == 0) k += 14;
    const char *val = eq + 1;
    while (*val == ' ' || *val == '\t')
        val++;
    size_t vn = strlen(val);
    while (vn && (val[vn - 1] == ' ' || val[vn - 1] == '\t'))
        vn--;

    enum tab tab;
    const char *name;
    if (strncmp(k, "CONFIG.", 7) == 0) {
        tab = CFG;
        name = k + 7;
    } else if (strncmp(k, "HBM.", 4) == 0) {
        tab = HBM;
        name = k + 4;
    } else if (strncmp(k, "LATENCY.", 8) == 0) {
        char lname[128];
        snprintf(lname, sizeof lname, "%s", k + 8);
        int column = -1; /* -1: the active one */
        char *dot = strchr(lname, '.');
        if (dot) {
            *dot = 0;
            if (!strcmp(dot + 1, "dc_lib_en"))
                column = 0;
            else if (!strcmp(dot + 1, "dc_lib_dis"))
                column = 1;
            else
                return failf(c, 0, "%s: unknown latency column (dc_lib_en or dc_lib_dis)", key);
        }
        int li = -1;
        for (int j = 0; j < PLENA_LAT_COUNT; j++)
            if (!strcmp(lname, latency_names[j])) li = j;
        if (li < 0) return failf(c, 0, "TRANSACTIONAL.LATENCY.%s: unknown latency key", lname);
        struct plena_toml_value *v;
        if (plena_toml_parse_value(val, vn, c->name, &v, c->err)) return PLENA_E_INPUT;
        int rc = 0;
        if (v->type != PLENA_TOML_INTEGER)
            rc = failf(c, 0, "TRANSACTIONAL.LATENCY.%s: expected integer, found %s", lname,
                       plena_toml_type_name(v->type));
        else if (v->i < 0 || v->i > U32)
            rc = failf(c, 0, "TRANSACTIONAL.LATENCY.%s: must be in 0..%" PRId64 ", found %" PRId64,
                       lname, U32, v->i);
        else {
            if (column < 0) column = c->vals[KEY_DC_EN] ? 0 : 1;
            (column ? s->latency_dis : s->latency_en)[li] = (uint32_t)v->i;
        }
        plena_toml_value_free(v);
        return rc;
    } else {
        return failf(c, 0, "%s: expected CONFIG.<KEY>, LATENCY.<KEY> or HBM.<KEY>", key);
    }
    char nm[128];
    snprintf(nm, sizeof nm, "%s", name);
    size_t nl = strlen(nm);
    if (tab == CFG && nl > 6 && !strcmp(nm + nl - 6, ".value")) nm[nl - 6] = 0;
    int id = -1;
    for (int j = 0; j < KEY_COUNT; j++)
        if (rows[j].tab == tab && !strcmp(rows[j].name, nm)) id = j;
    if (id < 0)
        return failf(c, 0, "TRANSACTIONAL.%s.%s: unknown key", tab == CFG ? "CONFIG" : "HBM", nm);
    char path[256];
    key_path(path, sizeof path, id);
    struct plena_toml_value *v = NULL;
    if (rows[id].kind == K_ENUM && vn && val[0] != '"' && val[0] != '\'') {
        /* bare words are accepted for string keys: HBM.MODEL=ideal */
        v = plena_calloc(1, sizeof *v);
        char *str = plena_malloc(vn + 1);
        if (!v || !str) {
            plena_free(v);
            plena_free(str);
            return PLENA_FAIL(c->err, PLENA_E_NOMEM, c->name, "out of memory");
        }
        memcpy(str, val, vn);
        str[vn] = 0;
        v->type = PLENA_TOML_STRING;
        v->str = str;
        v->str_len = vn;
    } else if (plena_toml_parse_value(val, vn, c->name, &v, c->err)) {
        return PLENA_E_INPUT;
    }
    v->line = 0; /* an override has no file line: where is "--set ..." */
    int rc = read_key(c, id, v, path);
    plena_toml_value_free(v);
    if (rc) return rc;
    c->present[id] = 1;
    if (id == KEY_HBM_CHANNELS && c->vals[id] == 0)
        return failf(c, 0, "%s: must equal TRANSACTIONAL.HBM.CHANNELS (%" PRId64 "), found 0", path,
                     c->vals[KEY_CHANNELS]);
    return 0;
}

int plena_settings_override_many(struct plena_settings *s, const char *const *assignments,
                                 size_t n_assignments, struct plena_err *err)
{
    struct plena_settings *tmp = plena_malloc(sizeof *tmp);
    struct ctx *c = plena_calloc(1, sizeof *c);
    int rc = 0;
    if (!tmp || !c) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "--set", "out of memory");
        goto out;
    }
    *tmp = *s;
    vals_from_settings(c, tmp);
    c->err = err;
    char where[256];
    for (size_t i = 0; i < n_assignments && !rc; i++) {
        snprintf(where, sizeof where, "--set %s", assignments[i]);
        c->name = where;
        rc = apply_one(c, tmp, assignments[i]);
    }
    if (!rc) {
        /* relations are checked after all assignments, named by the last */
        rc = validate(c, tmp);
    }
    if (!rc) {
        settings_from_vals(tmp, c);
        *s = *tmp;
    }
out:
    plena_free(tmp);
    plena_free(c);
    return rc;
}

int plena_settings_override(struct plena_settings *s, const char *assignment, struct plena_err *err)
{
    return plena_settings_override_many(s, &assignment, 1, err);
}

/* ---- writer ---- */

static void put_fp(struct plena_buf *b, const char *path, int sign, int e, int m)
{
    plena_buf_printf(b, "\n[%s]\ntype = \"Fp\"\nsign = %s\nexponent = %d\nmantissa = %d\n", path,
                     sign ? "true" : "false", e, m);
}

int plena_settings_to_toml(const struct plena_settings *s, struct plena_buf *out)
{
    char path[256];
    /* These bytes are hashed into settings_sha256 (replay fingerprints, --skip-existing), so
     * the header below keeps its old wording. cite_docs: keep */
    plena_buf_puts(out, "# plena settings written by plena_settings_to_toml\n"
                        "# (spec/numerics-and-files.md section 11).\n\n[MODE]\n"
                        "mode = \"TRANSACTIONAL\"\n");
    for (int k = 0; k < KEY_COUNT; k++) {
        const struct key_row *r = &rows[k];
        if (r->tab != CFG || !r->size) continue;
        if (k == KEY_HBM_CHANNELS && !s->config_hbm_channels) continue;
        int64_t x = load(s, k);
        plena_buf_printf(out, "\n[TRANSACTIONAL.CONFIG.%s]\n", r->name);
        if (r->kind == K_ENUM)
            plena_buf_printf(out, "value = \"%s\"\n", r->names[x]);
        else
            plena_buf_printf(out, "value = %" PRId64 "\n", x);
    }
    for (int p = 0; p < P_COUNT; p++) {
        snprintf(path, sizeof path, "TRANSACTIONAL.PRECISION.%s", prec_names[p]);
        const struct plena_hbm_type *ht = hbm_type_of((struct plena_settings *)s, p);
        char sub[300];
        if (p == P_SCALAR_FP) {
            put_fp(out, path, 1, 8, 7);
        } else if (p == P_HBM_V_INT) {
            plena_buf_printf(out,
                             "\n[%s]\nformat = \"Plain\"\n\n[%s.DATA_TYPE]\ntype = \"Int\"\n"
                             "width = 32\n",
                             path, path);
        } else if (ht && ht->kind == PLENA_HBM_MX) {
            plena_buf_printf(out, "\n[%s]\nformat = \"Mx\"\nblock = %u\n", path,
                             (unsigned)ht->block);
            snprintf(sub, sizeof sub, "%s.ELEM", path);
            put_fp(out, sub, 1, 4, 3);
            snprintf(sub, sizeof sub, "%s.SCALE", path);
            put_fp(out, sub, 0, 8, 0);
        } else {
            plena_buf_printf(out, "\n[%s]\nformat = \"Plain\"\n", path);
            snprintf(sub, sizeof sub, "%s.DATA_TYPE", path);
            if (ht && ht->kind == PLENA_HBM_FP16)
                put_fp(out, sub, 1, 5, 10);
            else
                put_fp(out, sub, 1, 8, 7);
        }
    }
    for (int i = 0; i < PLENA_LAT_COUNT; i++)
        plena_buf_printf(out, "\n[TRANSACTIONAL.LATENCY.%s]\ndc_lib_en = %u\ndc_lib_dis = %u\n",
                         latency_names[i], (unsigned)s->latency_en[i], (unsigned)s->latency_dis[i]);
    plena_buf_puts(out, "\n[TRANSACTIONAL.HBM]\n");
    for (int k = 0; k < KEY_COUNT; k++) {
        const struct key_row *r = &rows[k];
        if (r->tab != HBM) continue;
        int64_t x = load(s, k);
        if (r->kind == K_ENUM)
            plena_buf_printf(out, "%s = \"%s\"\n", r->name, r->names[x]);
        else
            plena_buf_printf(out, "%s = %" PRId64 "\n", r->name, x);
    }
    return out->failed ? PLENA_E_NOMEM : 0;
}

int plena_settings_equal(const struct plena_settings *a, const struct plena_settings *b)
{
    for (int k = 0; k < KEY_COUNT; k++)
        if (rows[k].size && load(a, k) != load(b, k)) return 0;
    const struct plena_hbm_type *ta[4] = {&a->hbm_m_weight_type, &a->hbm_m_kv_type,
                                          &a->hbm_v_act_type, &a->hbm_v_kv_type};
    const struct plena_hbm_type *tb[4] = {&b->hbm_m_weight_type, &b->hbm_m_kv_type,
                                          &b->hbm_v_act_type, &b->hbm_v_kv_type};
    for (int i = 0; i < 4; i++)
        if (ta[i]->kind != tb[i]->kind || ta[i]->block != tb[i]->block) return 0;
    for (int i = 0; i < PLENA_LAT_COUNT; i++)
        if (a->latency_en[i] != b->latency_en[i] || a->latency_dis[i] != b->latency_dis[i] ||
            a->latency[i] != b->latency[i])
            return 0;
    return 1;
}

size_t plena_settings_hbm_params(const struct plena_settings *s, const char **names,
                                 uint64_t *values, size_t max)
{
    size_t n = 0;
    for (int k = 0; k < KEY_COUNT; k++) {
        if (rows[k].tab != HBM || rows[k].kind != K_INT) continue;
        if (n < max) {
            if (names) names[n] = rows[k].name;
            if (values) values[n] = (uint64_t)load(s, k);
        }
        n++;
    }
    return n;
}

const char *plena_settings_hbm_model_name(enum plena_hbm_model_kind m)
{
    return (unsigned)m < 2 ? hbm_model_names[m] : "?";
}

const char *plena_settings_mx_mode_name(enum plena_mx_mode m)
{
    return (unsigned)m < PLENA_MX_MODE_COUNT ? mx_mode_names[m] : "?";
}
