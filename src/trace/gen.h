/* Synthetic route traces (`plena trace gen`, docs/cli.md "plena trace gen";
 * model fields per docs/lowering.md "Model files"). Deterministic: xoshiro256**
 * streams from num/prng.h, derive(seed, 1, layer_index, sample); zipf weights
 * via num/detmath.h, never libm. Importers are in trace/import.h. */
#ifndef PLENA_TRACE_GEN_H
#define PLENA_TRACE_GEN_H

#include <stdint.h>

#include "common/err.h"
#include "common/fileio.h"
#include "model/model.h"

enum plena_trace_dist {
    PLENA_TRACE_DIST_ROUND_ROBIN,
    PLENA_TRACE_DIST_BALANCED,
    PLENA_TRACE_DIST_UNIFORM,
    PLENA_TRACE_DIST_ZIPF,
    PLENA_TRACE_DIST_HOT
};

struct plena_trace_gen_opts {
    const struct plena_moe_model *model; /* resolved (plena_model_resolve) */
    uint64_t seed;
    uint32_t tokens; /* T */
    uint32_t layer;
    uint32_t sample;
    enum plena_trace_dist dist;
    double zipf_s;  /* zipf:S, S in [0, 16] */
    uint32_t hot_n; /* hot:N[:F], 1 <= N < E */
    double hot_f;   /* default 0.8 */
    int permute;    /* zipf: rank order shuffled by derive(seed, 6, layer) */
    int random_weights;
    int decode; /* phase decode: T single-token decodes, batch T, seq_len 1 */
    uint32_t mlen, blen;
    char dist_text[64];         /* as given, e.g. "zipf:1.2" (for ids and provenance) */
    const uint32_t *hot_ids;    /* --hot-ids: the hot set instead of the shuffle */
    size_t n_hot_ids;           /* 0 = shuffle; else must equal hot_n */
    const char *created_at_utc; /* --timestamp; NULL = absent (byte-identical output) */
};

/* The most routing slots (tokens x top_k, summed over every trace) one
 * generation holds: the JSON trees cost about 220 bytes of host memory per
 * slot, so 2^23 slots stay under 2 GB; checked before anything is allocated. */
#define PLENA_TRACE_GEN_MAX_SLOTS ((uint64_t)1 << 23)
/* PLENA_E_INPUT unless n_traces traces of `tokens` x top_k fit in
 * PLENA_TRACE_GEN_MAX_SLOTS (the message names the product and the limit). */
int plena_trace_gen_check_size(uint64_t n_traces, uint32_t tokens, uint32_t top_k,
                               struct plena_err *err);

void plena_trace_gen_opts_default(struct plena_trace_gen_opts *o);
/* Parses balanced|round-robin|uniform|zipf:S|hot:N[:F] into o. PLENA_E_USAGE on error. */
int plena_trace_gen_parse_dist(const char *s, struct plena_trace_gen_opts *o,
                               struct plena_err *err);
/* Generates one trace, validates it and appends its pretty JSON to out.
 * PLENA_E_INPUT when the shape is refused, PLENA_E_FAILED when the generated
 * trace does not validate (a bug; nothing is appended). */
int plena_trace_gen(const struct plena_trace_gen_opts *o, struct plena_buf *out,
                    struct plena_err *err);
/* The same trace as a tree (validated); *tree is the caller's (json_decref). */
struct json_t;
int plena_trace_gen_tree(const struct plena_trace_gen_opts *o, struct json_t **tree,
                         struct plena_err *err);

#endif
