/* Route traces: schema v2 field table, validator, trace sets and routing
 * statistics (docs/trace-schema.md).
 * The field table (fields.def) drives presence/type/range/enum checks, the JSON
 * Schema and the docs; semantic rules live only in validate.c. This module does
 * not run replays (replay/) and does not read files: callers pass bytes. */
#ifndef PLENA_TRACE_TRACE_H
#define PLENA_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/json.h"

/* ---- the field table (fields.def) ---- */
enum plena_trace_field {
#define PLENA_TRACE_FIELD(id, parent, key, type, req, lo, hi, en, pat, code, flags, desc)          \
    PLENA_TF_##id,
#include "trace/fields.def"
#undef PLENA_TRACE_FIELD
    PLENA_TF_COUNT
};

enum plena_trace_ftype {
    PLENA_TRACE_T_OBJECT,
    PLENA_TRACE_T_FREE_OBJECT,
    PLENA_TRACE_T_STRING,
    PLENA_TRACE_T_INTEGER,
    PLENA_TRACE_T_INT_OR_NULL,
    PLENA_TRACE_T_NUMBER,
    PLENA_TRACE_T_BOOLEAN,
    PLENA_TRACE_T_GATE,
    PLENA_TRACE_T_STR_OR_NULL,
    PLENA_TRACE_T_ARRAY,
    PLENA_TRACE_T_ANY
};

enum plena_trace_freq {
    PLENA_TRACE_REQ_YES,   /* required in v1 and v2 */
    PLENA_TRACE_REQ_V1,    /* required in v1, optional in v2 */
    PLENA_TRACE_REQ_NO,    /* optional */
    PLENA_TRACE_REQ_V2ONLY /* optional, and only allowed in v2 (V027) */
};

#define PLENA_TRACE_FLAG_UPSTREAM 1u /* accepted and ignored: W002 */

struct plena_trace_field_info {
    enum plena_trace_field id;
    enum plena_trace_field parent;
    const char *key;  /* "" root, "[]" array items, "*" any member */
    const char *name; /* enum suffix, e.g. "MODEL_TOP_K" */
    enum plena_trace_ftype type;
    enum plena_trace_freq req;
    double lo, hi;           /* -inf/+inf when unbounded */
    const char *enum_values; /* '|'-separated or NULL */
    const char *pattern;     /* JSON Schema regex or NULL */
    const char *code;        /* "V010" */
    unsigned flags;
    const char *desc;
};

const struct plena_trace_field_info *plena_trace_field_at(enum plena_trace_field id);
const char *plena_trace_ftype_name(enum plena_trace_ftype t);
/* Dotted path of a table row ("routing.topk_indices[][]"), into buf. */
const char *plena_trace_field_path(enum plena_trace_field id, char *buf, size_t n);
/* 1 when `s` (length n) is one of the row's '|'-separated enum values. */
int plena_trace_field_enum_has(const struct plena_trace_field_info *f, const char *s, size_t n);
/* A JSON value as messages name it: "boolean true", "real 2", "string \"2\"",
 * "array", ... (buf, capacity n, holds the text when it is not a constant).
 * Strings are quoted to 40 bytes; mark_cut appends "..." when one was longer. */
const char *plena_trace_describe_value(const json_t *v, int mark_cut, char *buf, size_t n);

struct plena_trace_rule_info {
    const char *code, *path, *rule;
};
unsigned plena_trace_rule_count(void);
const struct plena_trace_rule_info *plena_trace_rule_at(unsigned i);

/* ---- validator ---- */
#define PLENA_TRACE_MAX_ERRORS_DEFAULT 100
#define PLENA_TRACE_MAX_BYTES_DEFAULT  ((size_t)1 << 30)
/* Layer positions one vLLM capture may hold: a capture with more is refused
 * before any trace is built (the largest published MoE has 94 layers; 70,000
 * positions used to spend minutes building traces before failing). */
#define PLENA_TRACE_MAX_LAYER_POSITIONS 1024
#define PLENA_TRACE_MAX_DEPTH           64

struct plena_trace_validate_options {
    int strict;        /* warnings become errors */
    size_t max_errors; /* per document; 0 = PLENA_TRACE_MAX_ERRORS_DEFAULT */
    size_t max_bytes;  /* per document; 0 = PLENA_TRACE_MAX_BYTES_DEFAULT */
};

struct plena_trace_finding {
    char code[8];   /* "V045", "W001" */
    char path[256]; /* "routing.topk_indices[1][1]", "(document)" */
    char message[512];
    long line; /* V001: parse line; in a set: the set line; else 0 */
    long column;
};

struct plena_trace_report {
    int valid;
    int schema_version; /* 0 when not a valid 1 or 2 */
    char trace_id[129]; /* "" when not a valid string */
    struct plena_trace_finding *errors;
    size_t n_errors, cap_errors;
    struct plena_trace_finding *warnings;
    size_t n_warnings, cap_warnings;
    size_t n_errors_truncated;   /* errors counted but not listed */
    size_t n_warnings_truncated; /* warnings counted but not listed */
};

void plena_trace_report_init(struct plena_trace_report *r);
void plena_trace_report_free(struct plena_trace_report *r);
/* Total errors including truncated ones. */
size_t plena_trace_report_error_total(const struct plena_trace_report *r);

/* Validates one trace document. Never aborts: any input gives findings.
 * Returns 0 when valid, PLENA_E_FAILED when invalid (the report says why),
 * PLENA_E_NOMEM only when the report itself could not be grown. */
int plena_trace_validate_bytes(const char *bytes, size_t len,
                               const struct plena_trace_validate_options *opt,
                               struct plena_trace_report *report);

/* A trace set (.jsonl): one report per non-blank line, each
 * line validated alone, plus V100 for a repeated trace_id. */
struct plena_trace_set_entry {
    long line; /* 1-based line number in the set */
    struct plena_trace_report report;
};
struct plena_trace_set_report {
    int valid;
    struct plena_trace_set_entry *entries;
    size_t n_entries, cap_entries;
};
void plena_trace_set_report_free(struct plena_trace_set_report *r);
int plena_trace_validate_set_bytes(const char *bytes, size_t len,
                                   const struct plena_trace_validate_options *opt,
                                   struct plena_trace_set_report *report);

/* ---- fixed routing from a trace (plena moe --routing FILE) ---- */
/* The layer a trace's routing must fit. */
struct plena_trace_routing_shape {
    const char *model_name;
    uint32_t hidden, experts, top_k, tokens;
};
/* Reads and validates the trace at `path`; when it is valid and its model
 * and token count are `want`'s, *ids and *w (plena_free) hold its
 * [tokens][top_k] routing. Errors name `where` (e.g. "--routing t.json"):
 * E_INPUT unreadable, E_FAILED "not a valid route trace" (report holds the
 * findings) or a shape mismatch, E_NOMEM. */
int plena_trace_read_fixed_routing(const char *path, const char *where,
                                   const struct plena_trace_routing_shape *want, uint32_t **ids,
                                   float **w, struct plena_trace_report *report,
                                   struct plena_err *err);

/* ---- statistics ---- */
struct plena_trace_stats {
    size_t n_experts;
    int64_t total;   /* sum of counts */
    size_t n_active; /* count > 0 ("unique experts") */
    size_t n_zero;   /* count == 0 */
    size_t n_tail;   /* 0 < count < 4 */
    size_t n_hot;    /* count >= 16 */
    int64_t max_count;
    double duplicate_factor; /* total / n_active, 0 when none active */
    double gini;             /* the documented exact formula, 0 when total is 0 */
    double max_mean_ratio;   /* max_count / (total / n_experts), 0 when total is 0 */
};

/* Counts must be >= 0 and their sum must fit int64 (else PLENA_E_INPUT). */
int plena_trace_stats_compute(const int64_t *counts, size_t n, struct plena_trace_stats *st,
                              struct plena_err *err);
double plena_trace_duplicate_factor(const int64_t *counts, size_t n);
/* Fill `out` (capacity n) with the active/cold/hot lists; return the number written. */
size_t plena_trace_active_experts(const int64_t *counts, size_t n, int64_t *out);
size_t plena_trace_cold_experts(const int64_t *counts, size_t n, int64_t *out);
size_t plena_trace_hot_experts(const int64_t *counts, size_t n, int64_t *out);

/* The statistics `plena trace stats` prints for one document. */
struct plena_trace_summary {
    char trace_id[129];
    long long token_count, top_k;
    int64_t *counts; /* expert_counts, n entries (plena_trace_summary_free) */
    size_t n;
    struct plena_trace_stats stats;
};
/* Validates doc (the report holds the findings: PLENA_E_FAILED when
 * invalid) and computes its statistics from expert_counts. PLENA_E_NOMEM. */
int plena_trace_summary_doc(const char *doc, size_t len, struct plena_trace_summary *s,
                            struct plena_trace_report *report);
void plena_trace_summary_free(struct plena_trace_summary *s);

/* ---- trace sets: JSON Lines ---- */
/* Cursor over the lines of a set: '\n' ends a line (a last line without one
 * counts), lines of only spaces, tabs and CR are blank and skipped, but every
 * line is numbered. Start with {bytes, len} (pos and line 0). */
struct plena_trace_lines {
    const char *bytes;
    size_t len;
    size_t pos;
    long line; /* 1-based number of the line last returned */
};
/* Next non-blank line into *s, *n (without its '\n'): 1, or 0 at the end. */
int plena_trace_lines_next(struct plena_trace_lines *it, const char **s, size_t *n);
/* 1 when the file `path` is read as a trace set: its name ends in ".jsonl",
 * or force_set (a --set option). */
int plena_trace_path_is_set(const char *path, int force_set);

/* ---- JSON writing (pretty and canonical forms, docs/formats.md "Conventions") ---- */
/* Appends `v` to `b` with the common writer (common/json.h): pretty (keys
 * sorted, 2-space indent, scalar arrays on one line, final newline) or
 * canonical (no whitespace). Reals inside a `topk_weights` or `route_weights`
 * array are binary32 route weights (plena_json_fmt_float). 0 or -1. */
static inline int plena_trace_json_write(struct plena_buf *b, const json_t *v, int pretty)
{
    return plena_json_dump(b, v, PLENA_JSON_ROUTE_WEIGHTS_F32 | (pretty ? PLENA_JSON_PRETTY : 0u));
}

#endif
