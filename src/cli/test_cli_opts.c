/* The option-table parser (cli/opts.c) on its own: every error kind gives
 * its one message and PLENA_E_USAGE, defaults land (the spec's init, then
 * the rows' `def`), aliases and --opt=VALUE reach the same field, lists and
 * forwarding keep argv order, and the --help text lists every row with its
 * argument and default and ends with the exit lines of status.def. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cli/opts.h"
#include "common/alloc.h"
#include "model/model.h"
#include "common/test_support.h"

PLENA_OPT_ENUM_OF(weights_mode);

struct inner {
    uint64_t seed;
    int profile;
};

struct t_opts {
    const char *program, *out, *out_dir, *label, *lowering;
    int strict, mpi, shared_fs, weights;
    unsigned threads, repeat;
    uint8_t small;
    double fraction;
    struct plena_opt_list sets, traces, files, fwd;
    struct inner in;
    const char *pos1;
    int custom;
};

static int parse_even(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row;
    struct t_opts *o = base;
    if (!strcmp(v, "odd")) {
        snprintf(msg, n, "odd is not even");
        return -1;
    }
    if (strcmp(v, "2") && strcmp(v, "4")) return -1;
    o->custom = v[0] - '0';
    return 0;
}

static const struct plena_opt_enum lowerings = {
    .names = (const char *const[]){"pair-major", "expert-major", NULL}};

#define T struct t_opts
static const struct plena_opt rows[] = {
    PLENA_OPT_PATH_ROW("--program|--opcode", "FILE", T, program, "the program",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_PATH_ROW("--out", "DIR", T, out, "output", .def = "outdir", .excludes = "--out-dir"),
    PLENA_OPT_PATH_ROW("--out-dir", "D", T, out_dir, "one file per item"),
    PLENA_OPT_FLAG_ROW("--strict|--pedantic", T, strict, "warnings are errors"),
    PLENA_OPT_UINT_ROW("--threads", "N", T, threads, 1, 4096, "host threads", .def = "1"),
    PLENA_OPT_UINT_ROW("--repeat", "N", T, repeat, 2, 1000, "repeat runs",
                       .flags = PLENA_OPT_ZERO_OFF),
    PLENA_OPT_UINT_ROW("--small", "N", T, small, 0, 255, "one byte"),
    PLENA_OPT_DOUBLE_ROW("--fraction", "F", T, fraction, 0, 1, "a share",
                         .flags = PLENA_OPT_MIN_OPEN, .def = "0.5"),
    PLENA_OPT_ENUM_ROW("--weights", "W", T, weights, &plena_opt_enum_weights_mode,
                       "staged weights"),
    PLENA_OPT_CHOICE_ROW("--lowering", "L", T, lowering, &lowerings, "routed lowering",
                         .def = "pair-major"),
    PLENA_OPT_STR_ROW("--label", "NAME", T, label, "a label"),
    PLENA_OPT_LIST_ROW("--set", "T.K=V", T, sets, "an override"),
    {.names = "--traces",
     .kind = PLENA_OPT_LIST,
     .metavar = "IN...",
     PLENA_OPT_FIELD(T, traces),
     .flags = PLENA_OPT_REPEAT | PLENA_OPT_GREEDY,
     .help = "inputs"},
    PLENA_OPT_CUSTOM_ROW("--even", "E", T, custom, parse_even, "2 or 4", "an even number",
                         .def_text = "none"),
    PLENA_OPT_FLAG_ROW("--mpi", T, mpi, "distribute"),
    PLENA_OPT_FLAG_ROW("--shared-fs", T, shared_fs, "ranks share a file system", .needs = "--mpi"),
};
#undef T
/* a group whose rows live in a struct inside the options, ending in {NULL} */
static const struct plena_opt inner_rows[] = {
    PLENA_OPT_UINT_ROW("--seed", "S", struct inner, seed, 0, UINT64_MAX, "the seed"),
    {.names = "--no-profile",
     .kind = PLENA_OPT_FLAG,
     PLENA_OPT_FIELD(struct inner, profile),
     .ival = 0,
     .help = "no profile"},
    {.names = NULL},
};
static const struct plena_opt_group groups[] = {
    PLENA_OPT_GROUP(NULL, rows),
    {"inner options", inner_rows, 0, offsetof(struct t_opts, in), 1},
};
static const struct plena_opt_pos pos[] = {
    {"FIRST", "the first argument", offsetof(struct t_opts, pos1), 0, 1},
    {"FILE", "more files", offsetof(struct t_opts, files), 0, 0},
};

static void t_init(void *p)
{
    struct t_opts *o = p;
    o->in.seed = 42;
    o->in.profile = 1;
    o->weights = PLENA_WEIGHTS_ZERO;
}

static const struct plena_cmd_spec spec = {
    .name = "test",
    .summary = "a test command",
    .description = "Tests the parser.",
    PLENA_CMD_POS(pos),
    PLENA_CMD_GROUPS(groups),
    .notes = "A note.",
    .init = t_init,
    .opts_size = sizeof(struct t_opts),
    .has_forward = 1,
    .forward_off = offsetof(struct t_opts, fwd),
};

/* a spec with one positional that takes exactly one value */
static const struct plena_opt_pos one_pos[] = {
    {"IN", "the input", offsetof(struct t_opts, pos1), 1, 1}};
static const struct plena_cmd_spec one_spec = {
    .name = "one",
    .summary = "one input",
    PLENA_CMD_POS(one_pos),
    .groups = groups,
    .n_groups = 1,
    .opts_size = sizeof(struct t_opts),
};

static struct t_opts o;
static struct plena_opts_result r;

/* Parses the NULL-terminated words (argv[0] = "test") with s. */
static enum plena_status parse_with(const struct plena_cmd_spec *s, const char *const *words)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "test";
    for (; *words; words++)
        argv[argc++] = (char *)*words;
    plena_opts_free(&spec, &o); /* spec's rows include one_spec's */
    return plena_opts_parse(s, argc, argv, &o, &r);
}

#define PARSE(...) parse_with(&spec, (const char *const[]){__VA_ARGS__, NULL})

/* The one message of a usage error. */
static void expect_usage(enum plena_status st, const char *msg)
{
    assert_int_equal(st, PLENA_E_USAGE);
    assert_int_equal(r.status, PLENA_E_USAGE);
    assert_string_equal(r.msg, msg);
}

static void test_defaults_land(void **state)
{
    (void)state;
    assert_int_equal(PARSE("--program", "p.mem"), PLENA_OK);
    assert_false(r.help);
    assert_string_equal(o.program, "p.mem");
    assert_string_equal(o.out, "outdir"); /* row def */
    assert_int_equal(o.threads, 1);       /* row def */
    assert_true(fabs(o.fraction - 0.5) < 1e-12);
    assert_string_equal(o.lowering, "pair-major");
    assert_int_equal(o.weights, PLENA_WEIGHTS_ZERO); /* init */
    assert_int_equal(o.in.seed, 42);                 /* init, in the inner struct */
    assert_int_equal(o.in.profile, 1);
    assert_int_equal(o.strict, 0);
    assert_int_equal(o.repeat, 0);
    assert_null(o.label);
    assert_null(o.out_dir);
    assert_int_equal(o.sets.n, 0);
    assert_null(o.pos1);
    assert_int_equal(o.fwd.n, 0);
    assert_int_equal(plena_opts_given(&spec, &r, "--program"), 1);
    assert_int_equal(plena_opts_given(&spec, &r, "--out"), 0);
}

static void test_values_and_forms(void **state)
{
    (void)state;
    assert_int_equal(PARSE("--opcode=a.mem", "--threads=8", "--weights", "representable", "--small",
                           "255", "--fraction", "1", "--repeat", "0", "--lowering", "expert-major",
                           "--even", "4", "--pedantic", "first", "f2", "f3"),
                     PLENA_OK);
    assert_string_equal(o.program, "a.mem"); /* alias, = form */
    assert_string_equal(plena_opts_spelling(&spec, &r, "--program"), "--opcode");
    assert_int_equal(o.threads, 8);
    assert_int_equal(o.weights, PLENA_WEIGHTS_REPRESENTABLE);
    assert_int_equal(o.small, 255);
    assert_true(o.fraction == 1.0);
    assert_int_equal(o.repeat, 0); /* ZERO_OFF */
    assert_string_equal(o.lowering, "expert-major");
    assert_int_equal(o.custom, 4);
    assert_int_equal(o.strict, 1); /* flag alias */
    assert_string_equal(o.pos1, "first");
    assert_int_equal(o.files.n, 2);
    assert_string_equal(o.files.v[1], "f3");
    /* aliases parse to the same field */
    assert_int_equal(PARSE("--program", "x"), PLENA_OK);
    const char *a = o.program;
    assert_int_equal(PARSE("--opcode", "x"), PLENA_OK);
    assert_string_equal(o.program, a);
    assert_int_equal(PARSE("--program", "x", "--strict"), PLENA_OK);
    assert_int_equal(o.strict, 1);
    /* "-" is a positional, not an option */
    assert_int_equal(PARSE("--program", "x", "-"), PLENA_OK);
    assert_string_equal(o.pos1, "-");
}

static void test_lists_greedy_forward(void **state)
{
    (void)state;
    assert_int_equal(PARSE("--set", "A.B=1", "--program", "p", "--set=C.D=2", "--traces", "t1",
                           "t2", "-", "--seed", "7", "--no-profile", "--traces", "t3"),
                     PLENA_OK);
    assert_int_equal(o.sets.n, 2);
    assert_string_equal(o.sets.v[0], "A.B=1");
    assert_string_equal(o.sets.v[1], "C.D=2");
    assert_int_equal(o.traces.n, 4);
    assert_string_equal(o.traces.v[2], "-");
    assert_string_equal(o.traces.v[3], "t3");
    assert_int_equal(o.in.seed, 7);
    assert_int_equal(o.in.profile, 0);
    /* the forwarded group, verbatim and in argv order */
    assert_int_equal(o.fwd.n, 3);
    assert_string_equal(o.fwd.v[0], "--seed");
    assert_string_equal(o.fwd.v[1], "7");
    assert_string_equal(o.fwd.v[2], "--no-profile");
    assert_int_equal(PARSE("--program", "p", "--seed=9"), PLENA_OK);
    assert_int_equal(o.fwd.n, 1);
    assert_string_equal(o.fwd.v[0], "--seed=9");
    /* a greedy list needs one value that is not an option */
    expect_usage(PARSE("--program", "p", "--traces", "--seed", "1"),
                 "option '--traces' needs a value (IN...)");
}

static void test_each_error_one_message(void **state)
{
    (void)state;
    expect_usage(PARSE("--program", "p", "--bogus"), "unknown option '--bogus'");
    expect_usage(PARSE("--program", "p", "--bogus=1"), "unknown option '--bogus=1'");
    expect_usage(PARSE("--program"), "option '--program' needs a value (FILE)");
    expect_usage(PARSE("--program", "p", "--strict=yes"), "option '--strict' takes no value");
    /* range, naming the allowed range: --program p OPTION VALUE */
    static const struct {
        const char *opt, *value, *msg;
    } range[] = {
        {"--threads", "0", "--threads: expected an integer from 1 to 4096, found '0'"},
        {"--threads", "4097", "--threads: expected an integer from 1 to 4096, found '4097'"},
        {"--threads", "-1", "--threads: expected an integer from 1 to 4096, found '-1'"},
        {"--threads", "12x", "--threads: expected an integer from 1 to 4096, found '12x'"},
        {"--repeat", "1", "--repeat: expected 0 (off) or an integer from 2 to 1000, found '1'"},
        {"--small", "256", "--small: expected an integer from 0 to 255, found '256'"},
        {"--seed", "18446744073709551616",
         "--seed: expected an unsigned integer, found '18446744073709551616'"},
        {"--fraction", "0", "--fraction: expected a number in (0, 1], found '0'"},
        {"--fraction", "nan", "--fraction: expected a number in (0, 1], found 'nan'"},
    };
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++)
        expect_usage(PARSE("--program", "p", range[i].opt, range[i].value), range[i].msg);
    /* enum: the choices come from model.h's spelling table */
    char choices[128], want[256];
    plena_weights_mode_choices(", ", " or ", choices, sizeof choices);
    snprintf(want, sizeof want, "--weights: expected %s, found 'pink'", choices);
    expect_usage(PARSE("--program", "p", "--weights", "pink"), want);
    assert_string_equal(choices, "random, zero or representable");
    expect_usage(PARSE("--program", "p", "--lowering", "x"),
                 "--lowering: expected pair-major or expert-major, found 'x'");
    expect_usage(PARSE("--program", "p", "--even", "3"), "--even: expected 2 or 4, found '3'");
    expect_usage(PARSE("--program", "p", "--even", "odd"), "--even: odd is not even");
    /* given twice, also through an alias */
    expect_usage(PARSE("--program", "A", "--program", "B"), "option '--program' given twice");
    expect_usage(PARSE("--program", "A", "--opcode", "B"),
                 "option '--opcode' given twice (first as '--program')");
    expect_usage(PARSE("--program", "A", "--strict", "--strict"), "option '--strict' given twice");
    /* conflicting and dependent options */
    expect_usage(PARSE("--program", "p", "--out-dir", "d", "--out", "o"),
                 "--out cannot be combined with --out-dir");
    expect_usage(PARSE("--program", "p", "--shared-fs"), "--shared-fs needs --mpi");
    assert_int_equal(PARSE("--program", "p", "--shared-fs", "--mpi"), PLENA_OK);
    /* required options and positionals */
    expect_usage(PARSE("--strict"), "--program FILE is required");
    expect_usage(parse_with(&one_spec, (const char *const[]){"--program", "p", NULL}),
                 "missing IN");
    expect_usage(parse_with(&one_spec, (const char *const[]){"a", "b", "--program", "p", NULL}),
                 "more than one IN ('a', 'b')");
    /* the first problem is the one reported */
    expect_usage(PARSE("--bogus", "--threads", "0"), "unknown option '--bogus'");
}

static void test_help_flag(void **state)
{
    (void)state;
    assert_int_equal(PARSE("-h"), PLENA_OK);
    assert_true(r.help);
    assert_int_equal(PARSE("--strict", "--help", "--bogus"), PLENA_OK);
    assert_true(r.help);
    /* before the bad option, the error wins */
    expect_usage(PARSE("--bogus", "--help"), "unknown option '--bogus'");
}

static void test_help_text(void **state)
{
    (void)state;
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_opts_help(&spec, &b), 0);
    assert_int_equal(plena_buf_append(&b, "", 1), 0);
    const char *h = b.data;
    assert_non_null(strstr(h, "usage: plena test [FIRST] [FILE...] --program FILE [options]\n"));
    assert_non_null(strstr(h, "\nTests the parser.\n"));
    /* every row: its left column, then its default or (required); the help
     * column wraps, so compare with runs of blanks and newlines squeezed */
    char *flat = plena_malloc(strlen(h) + 1);
    assert_non_null(flat);
    size_t fl = 0;
    for (const char *p = h; *p; p++) {
        if (*p == '\n' && !strncmp(p + 1, "          ", 10)) continue; /* a continuation line */
        if (*p == ' ' && fl && flat[fl - 1] == ' ') continue;
        flat[fl++] = *p == '\n' ? '\n' : *p;
    }
    flat[fl] = 0;
    const struct {
        const char *row;
    } want[] = {
        {" --program FILE the program (required; alias --opcode)\n"},
        {" --out DIR output (default: outdir)\n"},
        {" --out-dir D one file per item (default: none)\n"},
        {" --strict warnings are errors (default: off; alias --pedantic)\n"},
        {" --threads N host threads (default: 1)\n"},
        {" --repeat N repeat runs (default: off)\n"},
        {" --small N one byte (default: 0)\n"},
        {" --fraction F a share (default: 0.5)\n"},
        {" --weights W staged weights (choices: random, zero or representable; default: "
         "zero)\n"},
        {" --lowering L routed lowering (choices: pair-major or expert-major; default: "
         "pair-major)\n"},
        {" --label NAME a label (default: none)\n"},
        {" --set T.K=V an override (default: none; repeatable)\n"},
        {" --traces IN... inputs (default: none; repeatable)\n"},
        {" --even E an even number (default: none)\n"},
        {" --mpi distribute (default: off)\n"},
        {" --shared-fs ranks share a file system (default: off)\n"},
        {" --seed S the seed (default: 42)\n"},
        {" --no-profile no profile (default: off)\n"},
        {" -h, --help this text\n"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(flat, want[i].row)) fail_msg("help lacks row '%s':\n%s", want[i].row, flat);
    plena_free(flat);
    assert_non_null(strstr(h, "\ninner options:\n"));
    assert_non_null(strstr(h, "\narguments:\n  FIRST "));
    assert_non_null(strstr(h, "\nA note.\n"));
    /* ends with the exit lines of status.def, which are the only exit lines */
    char exits[1024];
    plena_status_help(exits, sizeof exits);
    size_t hl = strlen(h), el = strlen(exits);
    assert_true(hl > el);
    assert_string_equal(h + hl - el, exits);
    assert_ptr_equal(strstr(h, "exit:"), h + hl - el);
    /* no line is wider than 79 columns except the exit lines */
    for (const char *p = h; p < h + hl - el;) {
        const char *nl = strchr(p, '\n');
        if (nl - p > 79) fail_msg("help line wider than 79: %.*s", (int)(nl - p), p);
        p = nl + 1;
    }
    plena_buf_free(&b);
}

static void test_check_spec(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(plena_opts_check_spec(&spec, msg, sizeof msg), 0);
    assert_int_equal(plena_opts_check_spec(&one_spec, msg, sizeof msg), 0);
    /* a default the row itself refuses */
    static const struct plena_opt bad_def[] = {{.names = "--n",
                                                .kind = PLENA_OPT_UINT,
                                                .metavar = "N",
                                                PLENA_OPT_FIELD(struct t_opts, threads),
                                                .min = 1,
                                                .max = 9,
                                                .def = "10",
                                                .help = "n"}};
    static const struct plena_opt_group g1[] = {PLENA_OPT_GROUP(NULL, bad_def)};
    struct plena_cmd_spec s = {.name = "bad",
                               .summary = "bad",
                               .groups = g1,
                               .n_groups = 1,
                               .opts_size = sizeof(struct t_opts)};
    assert_int_equal(plena_opts_check_spec(&s, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "a default is refused"));
    /* a spelling in two rows */
    static const struct plena_opt twice[] = {
        PLENA_OPT_FLAG_ROW("--a", struct t_opts, strict, "a"),
        PLENA_OPT_FLAG_ROW("--b|--a", struct t_opts, mpi, "b")};
    static const struct plena_opt_group g2[] = {PLENA_OPT_GROUP(NULL, twice)};
    s.groups = g2;
    assert_int_equal(plena_opts_check_spec(&s, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "spelled by two rows"));
    /* a field of the wrong size */
    static const struct plena_opt size[] = {
        PLENA_OPT_STR_ROW("--s", "S", struct t_opts, threads, "s")};
    static const struct plena_opt_group g3[] = {PLENA_OPT_GROUP(NULL, size)};
    s.groups = g3;
    assert_int_equal(plena_opts_check_spec(&s, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "field of size"));
}

static int teardown(void **state)
{
    (void)state;
    plena_opts_free(&spec, &o);
    return 0;
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_defaults_land, teardown),
    cmocka_unit_test_teardown(test_values_and_forms, teardown),
    cmocka_unit_test_teardown(test_lists_greedy_forward, teardown),
    cmocka_unit_test_teardown(test_each_error_one_message, teardown),
    cmocka_unit_test_teardown(test_help_flag, teardown),
    cmocka_unit_test_teardown(test_help_text, teardown),
    cmocka_unit_test_teardown(test_check_spec, teardown),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
