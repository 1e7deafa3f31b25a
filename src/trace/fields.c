/* The field and rule tables expanded from fields.def and rules.def
 * (docs/trace-schema.md "Fields" and "Validator findings"), plus small lookups over them.
 * Nothing here knows about JSON values; validate.c and docgen.c consume the rows. */
#include "isa/isa.h"
#include "trace/trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NOLO     (-INFINITY)
#define NOHI     INFINITY
#define UPSTREAM PLENA_TRACE_FLAG_UPSTREAM

static const struct plena_trace_field_info fields[] = {
#define PLENA_TRACE_FIELD(id, parent, key, type, req, lo, hi, en, pat, code, flags, desc)          \
    {PLENA_TF_##id,                                                                                \
     PLENA_TF_##parent,                                                                            \
     key,                                                                                          \
     #id,                                                                                          \
     PLENA_TRACE_T_##type,                                                                         \
     PLENA_TRACE_REQ_##req,                                                                        \
     lo,                                                                                           \
     hi,                                                                                           \
     en,                                                                                           \
     pat,                                                                                          \
     code,                                                                                         \
     flags,                                                                                        \
     desc},
#include "trace/fields.def"
#undef PLENA_TRACE_FIELD
};
_Static_assert(sizeof fields / sizeof fields[0] == PLENA_TF_COUNT, "one row per field");

static const struct plena_trace_rule_info rules[] = {
#define PLENA_TRACE_RULE(code, path, rule) {#code, path, rule},
#include "trace/rules.def"
#undef PLENA_TRACE_RULE
};

const struct plena_trace_field_info *plena_trace_field_at(enum plena_trace_field id)
{
    if ((unsigned)id >= PLENA_TF_COUNT) return NULL;
    return &fields[id];
}

const char *plena_trace_ftype_name(enum plena_trace_ftype t)
{
    switch (t) {
    case PLENA_TRACE_T_OBJECT: return "object";
    case PLENA_TRACE_T_FREE_OBJECT: return "object";
    case PLENA_TRACE_T_STRING: return "string";
    case PLENA_TRACE_T_INTEGER: return "integer";
    case PLENA_TRACE_T_INT_OR_NULL: return "integer or null";
    case PLENA_TRACE_T_NUMBER: return "number";
    case PLENA_TRACE_T_BOOLEAN: return "boolean";
    case PLENA_TRACE_T_GATE: return "string";
    case PLENA_TRACE_T_STR_OR_NULL: return "string or null";
    case PLENA_TRACE_T_ARRAY: return "array";
    case PLENA_TRACE_T_ANY: return "any";
    }
    return "?";
}

const char *plena_trace_field_path(enum plena_trace_field id, char *buf, size_t n)
{
    /* Walk up to the root collecting keys, then print root-first. */
    enum plena_trace_field chain[16];
    size_t depth = 0;
    if (n == 0) return buf;
    buf[0] = 0;
    while (id != PLENA_TF_ROOT && depth < 16) {
        chain[depth++] = id;
        id = fields[id].parent;
    }
    size_t len = 0;
    for (size_t i = depth; i-- > 0;) {
        const char *k = fields[chain[i]].key;
        int w;
        if (!strcmp(k, "[]"))
            w = snprintf(buf + len, n - len, "[]");
        else
            w = snprintf(buf + len, n - len, "%s%s", len ? "." : "", k);
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
    return buf;
}

int plena_trace_field_enum_has(const struct plena_trace_field_info *f, const char *s, size_t n)
{
    const char *p = f->enum_values;
    if (!p) return 0;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, s, n) == 0) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

unsigned plena_trace_rule_count(void)
{
    return (unsigned)(sizeof rules / sizeof rules[0]);
}

const struct plena_trace_rule_info *plena_trace_rule_at(unsigned i)
{
    return i < plena_trace_rule_count() ? &rules[i] : NULL;
}
