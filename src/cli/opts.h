/* cli/opts.h — the one option parser of every `plena` subcommand
 * (STYLE.md "Redis config.c: one table for every option"). A command is a
 * `struct plena_cmd_spec`: its positional arguments and groups of typed
 * option rows (spelling and aliases, argument kind, bounds or choices,
 * default, help, where the value goes). From the same rows come parsing
 * (`--opt VALUE`, `--opt=VALUE`, `-h`/`--help`), every usage message (one per
 * bad option), the --help text ending in the exit lines of common/status.def,
 * and docs/cli.md (cli/docgen.c). The parser never prints and never exits:
 * it fills a result; cli.c prints it. No getopt: see docs/design.md. */
#ifndef PLENA_CLI_OPTS_H
#define PLENA_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/fileio.h"

enum plena_opt_kind {
    PLENA_OPT_FLAG,   /* no value: stores `ival` into an integer field */
    PLENA_OPT_STR,    /* a string: the argv text, stored as const char * */
    PLENA_OPT_PATH,   /* the same, naming a file or directory ("-": a standard stream) */
    PLENA_OPT_UINT,   /* an unsigned integer in [min, max], in a field of 1, 2, 4 or 8 bytes */
    PLENA_OPT_DOUBLE, /* a real in [dmin, dmax] ((dmin, ...] with PLENA_OPT_MIN_OPEN) */
    PLENA_OPT_ENUM,   /* one spelling of `choices`, stored as its value in an integer field */
    PLENA_OPT_CHOICE, /* one spelling of `choices`, stored as that (static) spelling */
    PLENA_OPT_LIST,   /* repeatable: every value appended to a struct plena_opt_list */
    PLENA_OPT_CUSTOM  /* the row's `parse` callback stores the value */
};

/* Row flags. */
#define PLENA_OPT_REQUIRED (1u << 0) /* must be given */
#define PLENA_OPT_REPEAT   (1u << 1) /* may be given more than once (LIST rows always) */
#define PLENA_OPT_GREEDY                                                                           \
    (1u << 2)                        /* LIST: also takes the following arguments up to one         \
                                        starting with "--" (`--traces A B C`) */
#define PLENA_OPT_ZERO_OFF (1u << 3) /* UINT: 0 is accepted too and means "off" */
#define PLENA_OPT_MIN_OPEN (1u << 4) /* DOUBLE: dmin itself is not accepted */

/* Values of a LIST row, a variadic positional or a spec's forwarded options:
 * pointers into argv, allocated by the parser (plena_opts_free). */
struct plena_opt_list {
    const char **v;
    size_t n;
};

/* The spellings of an ENUM or CHOICE row: a NULL-terminated list (value =
 * index), or the parse/name/choices functions of a library enum (the model.h
 * spelling tables; PLENA_OPT_ENUM_OF below). With only `name` (values 0, 1,
 * ... until it answers "?"), parsing and the choices are derived from it. */
struct plena_opt_enum {
    const char *const *names;
    int (*parse)(const char *s, int *value);
    const char *(*name)(int value);
    const char *(*choices)(const char *sep, const char *last_sep, char *buf, unsigned long n);
};

struct plena_opt;
/* CUSTOM rows: store `value` into the group's struct at `base`. 0, or -1:
 * the message is "<option>: <msg>" when the callback wrote one into `msg`
 * (capacity n), else "<option>: expected <row's expect>, found '<value>'". */
typedef int (*plena_opt_parse_fn)(const struct plena_opt *row, const char *value, void *base,
                                  char *msg, size_t n);

struct plena_opt {
    const char *names; /* "--program|--opcode": the spelling help shows first, then aliases */
    enum plena_opt_kind kind;
    const char *metavar;                  /* "FILE", "N" (NULL for flags) */
    size_t off, size;                     /* the field: offset in the group's struct and its size */
    uint64_t min, max;                    /* UINT bounds */
    double dmin, dmax;                    /* DOUBLE bounds */
    const struct plena_opt_enum *choices; /* ENUM, CHOICE */
    plena_opt_parse_fn parse;             /* CUSTOM */
    const char *expect;                   /* CUSTOM: "bytes with optional K, M or G suffix" */
    long ival;                            /* FLAG: the value stored */
    const char *def;      /* default, parsed into the field before argv (NULL: the spec's init) */
    const char *def_text; /* how --help words the default when it is not a plain value */
    const char *excludes; /* "--a|--b": options that cannot be given together with this one */
    const char *needs;    /* an option this one needs */
    unsigned flags;
    const char *help;
};

/* A group of rows, shown under `title` (n_rows 0: the rows end with a row
 * whose names are NULL, for tables shared through an extern array). The rows' offsets are relative
 * to a struct at `base` inside the command's options (so replay's rows serve both `plena replay`
 * and `plena campaign`). `forward`: every value given for a row of this group is also appended,
 * spelling then value, to the spec's forward list (campaign workers receive the replay options
 * verbatim). */
struct plena_opt_group {
    const char *title;
    const struct plena_opt *rows;
    size_t n_rows;
    size_t base;
    int forward;
};

/* A positional argument: max 1 stores a const char *, otherwise a struct
 * plena_opt_list (max 0 = no limit). */
struct plena_opt_pos {
    const char *metavar;
    const char *help;
    size_t off;
    unsigned min, max;
};

struct plena_cmd_spec {
    const char *name;        /* "trace validate" */
    const char *summary;     /* one line: `plena help` and the group's --help */
    const char *description; /* paragraph after the usage line (may be NULL) */
    const struct plena_opt_pos *pos;
    size_t n_pos;
    const struct plena_opt_group *groups;
    size_t n_groups;
    const char *notes;                     /* text after the options (may be NULL) */
    void (*notes_fn)(struct plena_buf *b); /* more text computed at run time (may be NULL) */
    void (*init)(void *opts);              /* library defaults, before the rows' `def` */
    void (*fini)(void *opts);              /* frees what CUSTOM rows allocated (may be NULL) */
    size_t opts_size;                      /* sizeof the options struct (help's scratch copy) */
    int has_forward;
    size_t forward_off; /* the forward list (struct plena_opt_list) when has_forward */
};

#define PLENA_OPTS_MAX_ROWS 96

struct plena_opts_result {
    enum plena_status status; /* OK, E_USAGE (msg says why) or E_NOMEM */
    int help;                 /* -h/--help was given: print the help, exit 0 */
    char msg[640];            /* the one usage message, without the command name */
    size_t n_rows;            /* rows of every group, in order */
    unsigned given[PLENA_OPTS_MAX_ROWS];
    char spelling[PLENA_OPTS_MAX_ROWS][48]; /* as typed (an alias or the first name) */
};

/* Applies the defaults (init, then every row's `def`) and parses
 * argv[1..argc-1] into opts. Returns r->status. Lists point into argv. */
enum plena_status plena_opts_parse(const struct plena_cmd_spec *spec, int argc, char **argv,
                                   void *opts, struct plena_opts_result *r);
/* Frees the lists of opts (LIST rows, variadic positionals, forward list)
 * and calls the spec's fini. */
void plena_opts_free(const struct plena_cmd_spec *spec, void *opts);

/* How often the option with spelling `name` was given (0 = not at all), and
 * the spelling used (NULL when not given). */
unsigned plena_opts_given(const struct plena_cmd_spec *spec, const struct plena_opts_result *r,
                          const char *name);
const char *plena_opts_spelling(const struct plena_cmd_spec *spec,
                                const struct plena_opts_result *r, const char *name);

/* Appends text wrapped at 79 columns as --help does (first word at column
 * col, continuation lines indented by indent), then a newline. */
void plena_opts_put_wrapped(struct plena_buf *b, const char *text, size_t col, size_t indent);
/* The usage synopsis "plena NAME POSITIONALS REQUIRED-OPTIONS [options]". */
void plena_opts_usage(const struct plena_cmd_spec *spec, struct plena_buf *b);
/* The --help text: usage line, description, arguments and options with
 * argument, default and aliases, notes, then the exit lines. */
int plena_opts_help(const struct plena_cmd_spec *spec, struct plena_buf *b);
/* One option's left column ("--program FILE") and help column (help text,
 * then "(default: ...; alias ...)"), for the help and the docs. */
void plena_opts_row_left(const struct plena_opt *o, char *buf, size_t n);
void plena_opts_row_right(const struct plena_cmd_spec *spec, const struct plena_opt_group *g,
                          const struct plena_opt *o, char *buf, size_t n);
/* The default as --help states it ("42", "off", "built-in lookup"), from
 * the row and the field's value after the defaults (a scratch copy). */
void plena_opts_row_default(const struct plena_cmd_spec *spec, const struct plena_opt_group *g,
                            const struct plena_opt *o, char *buf, size_t n);
/* Table checks (each row has a name, a field of the right size, bounds in
 * order, a default the row itself accepts, no spelling twice): 0, or -1 with
 * the first problem in msg. The unit test runs it on every command. */
int plena_opts_check_spec(const struct plena_cmd_spec *spec, char *msg, size_t n);

/* ---- row constructors (designated initialisers; T is the group's struct) ----
 * One per kind. The help text comes last and may be followed by the row's
 * other columns, named: PLENA_OPT_PATH_ROW("--out", "DIR", T, out, "where",
 * .flags = PLENA_OPT_REQUIRED). A column the constructor sets itself is not
 * named again (-Woverride-init); write such a row in full. */
#define PLENA_OPT_FIELD(T, f) .off = offsetof(T, f), .size = sizeof(((T *)0)->f)

#define PLENA_OPT_FLAG_ROW(nm, T, f, ...)                                                          \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_FLAG, PLENA_OPT_FIELD(T, f), .ival = 1,                   \
        .help = __VA_ARGS__                                                                        \
    }
#define PLENA_OPT_STR_ROW(nm, mv, T, f, ...)                                                       \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_STR, .metavar = (mv), PLENA_OPT_FIELD(T, f),              \
        .help = __VA_ARGS__                                                                        \
    }
#define PLENA_OPT_PATH_ROW(nm, mv, T, f, ...)                                                      \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_PATH, .metavar = (mv), PLENA_OPT_FIELD(T, f),             \
        .help = __VA_ARGS__                                                                        \
    }
#define PLENA_OPT_UINT_ROW(nm, mv, T, f, lo, hi, ...)                                              \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_UINT, .metavar = (mv), PLENA_OPT_FIELD(T, f),             \
        .min = (lo), .max = (hi), .help = __VA_ARGS__                                              \
    }
#define PLENA_OPT_DOUBLE_ROW(nm, mv, T, f, lo, hi, ...)                                            \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_DOUBLE, .metavar = (mv), PLENA_OPT_FIELD(T, f),           \
        .dmin = (lo), .dmax = (hi), .help = __VA_ARGS__                                            \
    }
#define PLENA_OPT_ENUM_ROW(nm, mv, T, f, ch, ...)                                                  \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_ENUM, .metavar = (mv), PLENA_OPT_FIELD(T, f),             \
        .choices = (ch), .help = __VA_ARGS__                                                       \
    }
#define PLENA_OPT_CHOICE_ROW(nm, mv, T, f, ch, ...)                                                \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_CHOICE, .metavar = (mv), PLENA_OPT_FIELD(T, f),           \
        .choices = (ch), .help = __VA_ARGS__                                                       \
    }
#define PLENA_OPT_LIST_ROW(nm, mv, T, f, ...)                                                      \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_LIST, .metavar = (mv), PLENA_OPT_FIELD(T, f),             \
        .flags = PLENA_OPT_REPEAT, .help = __VA_ARGS__                                             \
    }
#define PLENA_OPT_CUSTOM_ROW(nm, mv, T, f, fn, exp, ...)                                           \
    {                                                                                              \
        .names = (nm), .kind = PLENA_OPT_CUSTOM, .metavar = (mv), PLENA_OPT_FIELD(T, f),           \
        .parse = (fn), .expect = (exp), .help = __VA_ARGS__                                        \
    }

/* A group of rows that are a static array, untitled or titled, at base 0:
 * the row count comes from the array, never from a hand-kept number. */
#define PLENA_OPT_GROUP(title, rows)                                                               \
    {                                                                                              \
        (title), (rows), sizeof(rows) / sizeof((rows)[0]), 0, 0                                    \
    }

/* In a struct plena_cmd_spec: the positionals and the option groups with
 * their counts taken from the arrays, or (PLENA_CMD_ROWS, the common case)
 * one untitled group of rows, its one-element group array a compound literal. */
#define PLENA_CMD_POS(p)    .pos = (p), .n_pos = sizeof(p) / sizeof((p)[0])
#define PLENA_CMD_GROUPS(g) .groups = (g), .n_groups = sizeof(g) / sizeof((g)[0])
#define PLENA_CMD_ROWS(rows)                                                                       \
    .groups = (const struct plena_opt_group[]){PLENA_OPT_GROUP(NULL, rows)}, .n_groups = 1

/* The spelling table of a model.h enum (PLENA_MODEL_ENUM) as a struct
 * plena_opt_enum named plena_opt_enum_<type>: its values, names and
 * "a, b or c" choices come from model.h, never from the CLI. */
#define PLENA_OPT_ENUM_OF(type)                                                                    \
    static int plena_opt_parse_##type(const char *s, int *value)                                   \
    {                                                                                              \
        enum plena_##type v;                                                                       \
        if (plena_##type##_parse(s, &v)) return -1;                                                \
        *value = (int)v;                                                                           \
        return 0;                                                                                  \
    }                                                                                              \
    static const char *plena_opt_name_##type(int value)                                            \
    {                                                                                              \
        return plena_##type##_name((enum plena_##type)value);                                      \
    }                                                                                              \
    static const struct plena_opt_enum plena_opt_enum_##type = {                                   \
        NULL, plena_opt_parse_##type, plena_opt_name_##type, plena_##type##_choices}

#endif
