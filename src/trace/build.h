/* Building traces and handling trace sets (docs/trace-schema.md,
 * docs/lowering.md "Model files"): one builder that every producer (gen,
 * importers) calls, so model fields, statistics and logical bytes are derived
 * in one place and every trace is validated before anyone writes it; the
 * canonical order of a set;
 * reading a set or single traces into a list. The replay-tier rules
 * R001-R006 live in replay/tier.h (they ask the generator).
 * Only files.c writes files (a directory of traces); the rest takes bytes
 * and gives buffers back. */
#ifndef PLENA_TRACE_BUILD_H
#define PLENA_TRACE_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/fileio.h"
#include "model/model.h"
#include "trace/trace.h"

struct json_t;

/* stable_id, in place: bytes outside [A-Za-z0-9_-] become '_', at most
 * 128 bytes. */
void plena_trace_stable_id(char *s);

/* Everything a trace needs beyond the model. Strings are borrowed. */
struct plena_trace_spec {
    const struct plena_moe_model *model; /* as docs/lowering.md "Model files" */
    uint32_t layer;                      /* model.layer_index */
    const char *trace_id;                /* passed through stable_id */
    const char *created_by;
    const char *created_at_utc; /* NULL = absent (only with --timestamp) */
    const char *benchmark, *sample_id, *phase;
    uint32_t batch_size, seq_len, tokens; /* batch_size x seq_len = tokens */
    int64_t decode_step;                  /* 0 = absent */
    int64_t sample_index;                 /* < 0 = absent */
    int64_t input_tokens;                 /* < 0 = absent */
    const char *category;                 /* NULL = absent */
    const char *source, *weight_source;
    const int64_t *ids;        /* tokens x top_k, row-major */
    const float *weights;      /* tokens x top_k; NULL = (float)(1/K) each */
    struct json_t *provenance; /* stolen (also on error); NULL = absent */
    uint32_t mlen, blen;
};

/* Builds the trace tree, writes it (pretty) and validates it. On success
 * *out owns the tree. PLENA_E_FAILED when it does not validate (the message
 * names the first finding), PLENA_E_NOMEM. */
int plena_trace_build(const struct plena_trace_spec *s, struct json_t **out, struct plena_err *err);

/* ---- lists of traces and trace sets ---- */
struct plena_trace_doc {
    struct json_t *tree; /* owned */
    char trace_id[129];
    char origin[320]; /* "FILE" or "FILE:LINE", for messages */
};
struct plena_trace_docs {
    struct plena_trace_doc *v;
    size_t n, cap;
};
void plena_trace_docs_free(struct plena_trace_docs *d);
/* Takes ownership of tree (also on failure). 0 or PLENA_E_NOMEM. */
int plena_trace_docs_add(struct plena_trace_docs *d, struct json_t *tree, const char *origin);
/* Canonical order: (benchmark, sample_index, sample_id, phase in the
 * order prefill, decode, smoke, unknown, decode_step, layer_index, trace_id).
 * An absent sample_index sorts before every present one, an absent or null
 * decode_step before step 1. Stable for equal keys. */
void plena_trace_docs_sort(struct plena_trace_docs *d);
/* Appends each trace in canonical form plus "\n", in list order. */
int plena_trace_docs_write_set(const struct plena_trace_docs *d, struct plena_buf *out);
/* Reads a set (name for messages) or, with is_set 0, one trace document;
 * every trace is validated (options opt, may be NULL). The first invalid
 * trace fails with PLENA_E_FAILED "name:LINE: CODE at PATH: message"; a
 * repeated trace_id against the list already held is V100. */
int plena_trace_docs_read(struct plena_trace_docs *d, const char *name, const char *bytes,
                          size_t len, int is_set, const struct plena_trace_validate_options *opt,
                          struct plena_err *err);

/* ---- into files (trace/files.c) ---- */
/* One pretty DIR/<stable_id(trace_id)>.json per trace, each written
 * atomically; with no_clobber nothing is written when one of them exists
 * (PLENA_E_OUTPUT naming it). */
int plena_trace_docs_write_dir(const struct plena_trace_docs *d, const char *dir, int no_clobber,
                               struct plena_err *err);
/* One output for d: a single trace in pretty form unless as_set, else a set
 * in canonical order (d is sorted). -1 when out of memory. */
int plena_trace_docs_render(struct plena_trace_docs *d, int as_set, struct plena_buf *b);

#endif
