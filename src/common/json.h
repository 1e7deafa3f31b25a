/* The one JSON text writer of plena (docs/formats.md "Conventions"): the
 * pretty form and the canonical form with the shortest round-trip number
 * spellings (binary64 p <= 17, binary32 p <= 9), and the result-file form
 * (profile, run-stats and gate summaries: PLENA_JSON_PROFILE_FORM). Trace
 * documents and replay results both go through it, so their bytes and hashes
 * agree. It only formats: it never decides what goes into a document, never
 * reads JSON and never prints. */
#ifndef PLENA_COMMON_JSON_H
#define PLENA_COMMON_JSON_H

#include <jansson.h>

#include <stddef.h>

#include "common/err.h"
#include "common/fileio.h"

/* Shortest "%.{p}g", p = 1..17, that strtod reads back to v. Integral values
 * print without ".0" ("2"), 100.0 as "1e+02", 1e21 as "1e+21". v must be finite. */
void plena_json_fmt_double(char *buf, size_t n, double v);
/* Same for a binary32 value: p = 1..9, read back with strtof. */
void plena_json_fmt_float(char *buf, size_t n, float v);

/* Flags of plena_json_dump. */
enum {
    /* The pretty form: keys sorted by byte order, 2-space indent, one member
     * per line, all-scalar arrays on one line with ", ", final newline.
     * Without it, the canonical form: sorted keys, no whitespace. */
    PLENA_JSON_PRETTY = 1u << 0,
    /* Route-trace documents: every real inside an array held by a member named
     * `topk_weights` or `route_weights` (at any depth, nested arrays included)
     * is a binary32 route weight and gets plena_json_fmt_float. A member of
     * that name holding an object is not affected (the JSON Schema has one). */
    PLENA_JSON_ROUTE_WEIGHTS_F32 = 1u << 1,
    /* Refuse (-1) values nested deeper than PLENA_JSON_SHALLOW_DEPTH: replay
     * results are shallow, so deeper input is a runaway, not a result. */
    PLENA_JSON_SHALLOW = 1u << 2,
    /* The result-file form (profile v4, docs/profile.md "Profile JSON";
     * run-stats v2, gate summaries); implies PLENA_JSON_PRETTY's indenting
     * and final newline, with these differences: keys in insertion order
     * (the documented key order), every array one element per line, reals as C
     * "%.17g" with ".0" appended when that prints like an integer (jansson
     * would print "e-8" for "e-08"), a non-finite real as null, and \b \f
     * \n \r \t as two-character escapes. */
    PLENA_JSON_PROFILE_FORM = 1u << 3,
};
#define PLENA_JSON_SHALLOW_DEPTH 256

/* Appends the text of v to b. Returns 0, or -1 on out of memory (b->failed),
 * a non-finite real (jansson cannot hold one, so only defensive) or, with
 * PLENA_JSON_SHALLOW, too deep a value. */
int plena_json_dump(struct plena_buf *b, const json_t *v, unsigned flags);

/* One JSON string literal of s[0..len) with the escapes of flags (only
 * PLENA_JSON_PROFILE_FORM matters): for hand-laid-out JSON text. */
int plena_json_put_string(struct plena_buf *b, const char *s, size_t len, unsigned flags);

/* A real the way PLENA_JSON_PROFILE_FORM writes it ("%.17g", ".0" added when
 * needed, "null" when not finite). */
void plena_json_fmt_real17(char *buf, size_t n, double v);

/* plena_json_dump into a NUL-terminated text freed with plena_free:
 * 0, PLENA_E_NOMEM, or PLENA_E_INTERNAL when v cannot be written (a
 * non-finite real outside PLENA_JSON_PROFILE_FORM, or too deep). */
int plena_json_render(const json_t *v, unsigned flags, char **text, size_t *len,
                      struct plena_err *err);
/* Renders and writes atomically to path. */
int plena_json_write_file(const json_t *v, unsigned flags, const char *path, struct plena_err *err);

#endif
