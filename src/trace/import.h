/* Importers of public routing captures (docs/cli.md "plena trace import"):
 * vLLM routed-experts JSON/JSONL and raw int16/int32 arrays, Megatron
 * router-trace JSONL, long-form CSV, and routing rows. Each record
 * becomes traces through trace/build.h (statistics recomputed, validated).
 * Callers pass bytes; nothing here opens files or prints. FLAME-MoE parquet
 * is not read (convert to the jsonl form outside plena). */
#ifndef PLENA_TRACE_IMPORT_H
#define PLENA_TRACE_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/fileio.h"
#include "model/model.h"
#include "trace/build.h"

enum plena_trace_import_format {
    PLENA_TRACE_IMPORT_VLLM,
    PLENA_TRACE_IMPORT_MEGATRON,
    PLENA_TRACE_IMPORT_CSV,
    PLENA_TRACE_IMPORT_JSONL
};

struct plena_trace_import_opts {
    enum plena_trace_import_format from;
    const struct plena_moe_model *model; /* required: these formats carry no shapes */
    const char *benchmark;               /* NULL: the format's name ("vllm", ...) */
    const char *phase;                   /* megatron (default unknown), vllm --raw */
    int allow_uniform_weights;           /* source without weights: 1/k each */
    const uint32_t *layer_map;           /* vllm: position -> model layer; NULL = identity */
    size_t n_layer_map;
    uint32_t layer_offset; /* megatron */
    int merge_ranks;       /* megatron */
    int decode_aggregate;  /* vllm: one decode trace of G tokens */
    int keep_going;        /* skip bad records (logged), continue */
    /* vllm --raw: little-endian row-major [shape0][shape1][shape2] */
    int raw;
    uint32_t raw_shape[3];
    unsigned raw_elem_bytes;    /* 2 (int16) or 4 (int32) */
    uint32_t mlen, blen;        /* replay.mlen / replay.blen (defaults 64 / 4) */
    const char *created_at_utc; /* NULL = absent */
};

void plena_trace_import_opts_default(struct plena_trace_import_opts *o);
/* "vllm" | "megatron" | "csv" | "jsonl"; -1 when unknown. */
int plena_trace_import_format_parse(const char *s);
/* The spelling of f; "?" outside the enum (the CLI lists the choices from it). */
const char *plena_trace_import_format_name(enum plena_trace_import_format f);

/* Records skipped under keep_going: one "WHERE: message\n" line each. */
struct plena_trace_import_log {
    struct plena_buf text;
    size_t n_skipped;
};

/* Imports one input (`name` is used in messages and provenance, its base
 * name only). Traces are appended to `out`. Without keep_going the first bad
 * record stops the import: PLENA_E_INPUT (inconsistent input, message
 * "FILE:LINE: field: what was expected, what was found") or PLENA_E_FAILED (a
 * built trace did not validate). With keep_going bad records are logged and
 * skipped and the call returns 0; log->n_skipped > 0 means exit 1.
 * PLENA_E_USAGE when an option cannot apply (e.g. no weights in the source and
 * no allow_uniform_weights). */
int plena_trace_import(const struct plena_trace_import_opts *o, const char *name, const char *bytes,
                       size_t len, struct plena_trace_docs *out, struct plena_trace_import_log *log,
                       struct plena_err *err);

#endif
