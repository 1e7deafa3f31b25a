/* The one JSON text writer of spec/traces-and-replay.md 0.3 (pretty form) and
 * 0.4 (canonical form), and the shortest round-trip number spellings of 0.3
 * (binary64 p <= 17, binary32 p <= 9). Trace documents and replay results both
 * go through it, so their bytes and hashes agree. It only formats: it never
 * decides what goes into a document, never reads JSON and never prints. */
#ifndef PLENA_COMMON_JSON_H
#define PLENA_COMMON_JSON_H

#include <jansson.h>

#include <stddef.h>

#include "common/fileio.h"

/* Shortest "%.{p}g", p = 1..17, that strtod reads back to v. Integral values
 * print without ".0" ("2"), 100.0 as "1e+02", 1e21 as "1e+21". v must be finite. */
void plena_json_fmt_double(char *buf, size_t n, double v);
/* Same for a binary32 value: p = 1..9, read back with strtof. */
void plena_json_fmt_float(char *buf, size_t n, float v);

/* Flags of plena_json_dump. */
enum {
    /* 0.3 pretty form: keys sorted by byte order, 2-space indent, one member
     * per line, all-scalar arrays on one line with ", ", final newline.
     * Without it, the 0.4 canonical form: sorted keys, no whitespace. */
    PLENA_JSON_PRETTY = 1u << 0,
    /* Route-trace documents: every real inside an array held by a member named
     * `topk_weights` or `route_weights` (at any depth, nested arrays included)
     * is a binary32 route weight and gets plena_json_fmt_float. A member of
     * that name holding an object is not affected (the JSON Schema has one). */
    PLENA_JSON_ROUTE_WEIGHTS_F32 = 1u << 1,
    /* Refuse (-1) values nested deeper than PLENA_JSON_SHALLOW_DEPTH: replay
     * results are shallow, so deeper input is a runaway, not a result. */
    PLENA_JSON_SHALLOW = 1u << 2,
};
#define PLENA_JSON_SHALLOW_DEPTH 256

/* Appends the text of v to b. Returns 0, or -1 on out of memory (b->failed),
 * a non-finite real (jansson cannot hold one, so only defensive) or, with
 * PLENA_JSON_SHALLOW, too deep a value. */
int plena_json_dump(struct plena_buf *b, const json_t *v, unsigned flags);

#endif
