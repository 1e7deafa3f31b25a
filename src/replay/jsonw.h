/* Result writing for the replay layer (docs/formats.md "Conventions", docs/replay.md "Identity"):
 * pretty JSON with sorted keys, canonical JSON and its SHA-256, the ONE table
 * of volatile keys, RFC 4180 CSV and crash-tolerant JSONL append. The JSON
 * text itself is common/json.h's writer. Pure formatting: it never decides
 * what goes into a result (result.h does) and never prints. */
#ifndef PLENA_REPLAY_JSONW_H
#define PLENA_REPLAY_JSONW_H

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/json.h"

/* ---- JSON text ----
 * The writer and the number spellings are common/json.h's (shared with
 * trace/); these two name replay's flags: results refuse values nested deeper
 * than 256 levels (PLENA_JSON_SHALLOW). */
/* Pretty or canonical text; 0, or -1 on out of memory, a
 * non-finite real or too deep a value. */
static inline int plena_replay_json_pretty(struct plena_buf *b, const json_t *v)
{
    return plena_json_dump(b, v, PLENA_JSON_PRETTY | PLENA_JSON_SHALLOW);
}
static inline int plena_replay_json_canonical(struct plena_buf *b, const json_t *v)
{
    return plena_json_dump(b, v, PLENA_JSON_SHALLOW);
}

/* ---- volatile keys (docs/replay.md "Identity",
 * docs/formats.md "Run-stats JSON"): one table ---- */
extern const char *const plena_replay_volatile_keys[];
extern const size_t plena_replay_n_volatile_keys;
int plena_replay_is_volatile_key(const char *key);
/* Deletes every volatile key at every depth of v, in place. */
void plena_replay_strip_volatile(json_t *v);

/* ---- hashing and files ---- */
/* SHA-256 hex of the canonical form; with strip_volatile a deep copy without
 * volatile keys is hashed (v is not changed). */
int plena_replay_json_sha256(const json_t *v, int strip_volatile, char hex[65],
                             struct plena_err *err);
/* Pretty form written atomically to path. */
int plena_replay_json_write_file(const json_t *v, const char *path, struct plena_err *err);
/* Reads and parses a JSON file (duplicate keys rejected). PLENA_E_INPUT names
 * the path and the parse position; a missing file is PLENA_E_INPUT too. */
int plena_replay_json_read_file(const char *path, json_t **out, struct plena_err *err);

/* ---- CSV (docs/formats.md "Conventions": RFC 4180, LF line ends, empty cell = null) ---- */
struct plena_csv {
    struct plena_buf buf;
    size_t n_cols;
    size_t col; /* cells written in the current row */
};
void plena_csv_init(struct plena_csv *c);
void plena_csv_free(struct plena_csv *c);
int plena_csv_header(struct plena_csv *c, const char *const *cols, size_t n_cols);
int plena_csv_cell_str(struct plena_csv *c, const char *s); /* NULL = empty cell */
/* A JSON scalar: null -> empty, booleans true/false, numbers as in JSON,
 * strings quoted when needed. Arrays/objects are written as canonical JSON. */
int plena_csv_cell_json(struct plena_csv *c, const json_t *v);
/* Ends a row; -1 when the row does not have exactly n_cols cells. */
int plena_csv_end_row(struct plena_csv *c);

/* ---- JSONL append ---- */
/* Opens (creating) path for appending; bytes after the last '\n' (a torn line
 * from a crash) are truncated away and their count returned in *torn_bytes so
 * the CLI can report it once. */
int plena_jsonl_open(const char *path, int *fd, size_t *torn_bytes, struct plena_err *err);
/* One write() of the canonical record plus '\n', then fsync. */
int plena_jsonl_append(int fd, const json_t *rec, const char *path, struct plena_err *err);

#endif
