/* A small, strict reader for the TOML subset of
 * docs/formats.md "Settings file" (Syntax), internal to the settings module.
 * It builds a tree of tables, arrays and scalars, each with the line and
 * column where it was written. It deliberately rejects what plena does not
 * need (quoted keys, multi-line strings, date/times) instead of
 * half-supporting it, and it has no writer. */
#ifndef PLENA_SETTINGS_TOML_H
#define PLENA_SETTINGS_TOML_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum plena_toml_type {
    PLENA_TOML_TABLE,
    PLENA_TOML_ARRAY,
    PLENA_TOML_STRING,
    PLENA_TOML_INTEGER,
    PLENA_TOML_FLOAT,
    PLENA_TOML_BOOLEAN
};

struct plena_toml_value;

/* One member of a table (key set) or an array (key NULL). line/col is where
 * the key was written (for array items: where the item starts). */
struct plena_toml_entry {
    char *key;
    int line, col;
    struct plena_toml_value *value;
};

struct plena_toml_value {
    enum plena_toml_type type;
    int line, col; /* the value's first character; a table's defining header */
    int64_t i;     /* INTEGER */
    double f;      /* FLOAT */
    int b;         /* BOOLEAN */
    char *str;     /* STRING: NUL-terminated (may also contain NULs from \u0000) */
    size_t str_len;
    struct plena_toml_entry *entries; /* TABLE and ARRAY members, in file order */
    size_t n_entries, cap_entries;
    unsigned flags; /* parser bookkeeping (how a table was defined) */
};

struct plena_toml_doc {
    struct plena_toml_value *root; /* a TABLE */
};

/* Parses `len` bytes of text. `name` prefixes messages. Syntax errors are
 * PLENA_E_INPUT with where "<name>:<line>:<col>" and msg "syntax: <text>";
 * out of memory is PLENA_E_NOMEM. On failure doc->root is NULL. */
int plena_toml_parse(const char *text, size_t len, const char *name, struct plena_toml_doc *doc,
                     struct plena_err *err);
void plena_toml_free(struct plena_toml_doc *doc);

/* Parses one value written alone (e.g. "64", "\"ocp\"", "[1, 2]"). The
 * caller frees it with plena_toml_value_free. */
int plena_toml_parse_value(const char *text, size_t len, const char *name,
                           struct plena_toml_value **out, struct plena_err *err);
void plena_toml_value_free(struct plena_toml_value *v);

/* Member `key` (one bare key, no dots) of a table; NULL if absent or if
 * `table` is not a table. */
const struct plena_toml_entry *plena_toml_find(const struct plena_toml_value *table,
                                               const char *key);
/* Value at a dotted path ("TRANSACTIONAL.CONFIG.MLEN.value") below `table`;
 * NULL if any part is absent or an intermediate is not a table. */
const struct plena_toml_value *plena_toml_get(const struct plena_toml_value *table,
                                              const char *dotted);

/* "table", "array", "string", "integer", "float", "boolean". */
const char *plena_toml_type_name(enum plena_toml_type t);

#endif
