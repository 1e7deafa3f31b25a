/* `plena trace` CLI contract (docs/cli.md "Exit codes" and "plena trace
 * validate"): exit codes 0 valid / 1 invalid / 2 usage / 3 unreadable, the
 * text line forms, --json, FILE:LINE: prefixes for sets and the stats numbers
 * of the complete example of docs/trace-schema.md.
 * Runs $PLENA_BIN; writes only under a fresh mkdtemp() directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"

static char dir[64];
static char example[4096];

/* Runs `plena ARGS` in dir, stdout and stderr both into out.txt; *out (when
 * out is not NULL) gets that text, NULL when unreadable. Returns the exit code. */
static int run(const char *args, char **out)
{
    int rc = plena_test_sh("cd %s && '%s' %s >out.txt 2>&1", dir, getenv("PLENA_BIN"), args);
    if (out) *out = plena_test_read_file(dir, "out.txt", NULL);
    return rc;
}

static void test_cli(void **state)
{
    (void)state;
    if (!plena_test_bin()) skip();
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "trace_cli"), 0);
    snprintf(example, sizeof example, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    char *out = NULL, args[4200];

    snprintf(args, sizeof args, "trace validate '%s'", example);
    assert_int_equal(run(args, &out), 0);
    assert_non_null(strstr(out, ": valid (example_e8k2_t4_l0, schema v2, 0 warnings)"));
    plena_free(out);

    snprintf(args, sizeof args, "trace stats '%s'", example);
    assert_int_equal(run(args, &out), 0);
    assert_non_null(strstr(out, "duplicate_factor 1.6, gini 0.53125"));
    plena_free(out);

    snprintf(args, sizeof args, "trace stats --json '%s'", example);
    assert_int_equal(run(args, &out), 0);
    assert_non_null(strstr(out, "\"gini\": 0.53125"));
    assert_non_null(strstr(out, "\"hot_experts\": [3, 1, 0, 5, 6]"));
    plena_free(out);

    plena_test_write_text(dir, "bad.json", "{\"schema_version\": true}");
    assert_int_equal(run("trace validate bad.json", &out), 1);
    assert_non_null(strstr(out, "bad.json: error V008 at schema_version: expected integer, got "
                                "boolean true"));
    plena_free(out);

    assert_int_equal(run("trace validate --json bad.json", &out), 1);
    assert_non_null(strstr(out, "\"code\": \"V008\""));
    assert_non_null(strstr(out, "\"valid\": false"));
    plena_free(out);

    plena_test_write_text(dir, "set.jsonl", "{}\n\n[]\n");
    assert_int_equal(run("trace validate set.jsonl", &out), 1);
    assert_non_null(strstr(out, "set.jsonl:3: error V002 at (document)"));
    assert_non_null(strstr(out, "set.jsonl:1: error V003"));
    plena_free(out);

    snprintf(args, sizeof args, "trace validate '%s' missing.json", example);
    assert_int_equal(run(args, NULL), 3);
    snprintf(args, sizeof args, "trace validate bad.json missing.json");
    assert_int_equal(run(args, NULL), 3); /* highest code wins */
    assert_int_equal(run("trace validate --max-errors x bad.json", NULL), 2);
    assert_int_equal(run("trace validate --nope bad.json", NULL), 2);
    assert_int_equal(run("trace validate", NULL), 2);
    assert_int_equal(run("trace", NULL), 2);
    assert_int_equal(run("trace frobnicate", NULL), 2);
    assert_int_equal(run("trace --help", NULL), 0);
    assert_int_equal(run("trace validate --help", NULL), 0);
    assert_int_equal(run("trace stats --help", NULL), 0);
    assert_int_equal(run("trace validate --strict --max-errors 1 bad.json", &out), 1);
    assert_non_null(strstr(out, "more errors not listed"));
    plena_free(out);

    /* gen: same seed -> identical bytes; the output validates; bad options are usage errors */
    assert_int_equal(run("trace gen --model qwen3-30b-a3b --tokens 8 --dist zipf:1.2 --seed 7 "
                         "--out g1.json",
                         NULL),
                     0);
    assert_int_equal(run("trace gen --model qwen3-30b-a3b --tokens 8 --dist zipf:1.2 --seed 7 "
                         "--out g2.json",
                         NULL),
                     0);
    {
        size_t n1 = 0, n2 = 0;
        char *d1 = plena_test_read_file(dir, "g1.json", &n1);
        char *d2 = plena_test_read_file(dir, "g2.json", &n2);
        assert_non_null(d1);
        assert_non_null(d2);
        assert_int_equal(n1, n2);
        assert_memory_equal(d1, d2, n1);
        plena_free(d1);
        plena_free(d2);
    }
    assert_int_equal(run("trace validate g1.json", NULL), 0);
    assert_int_equal(run("trace gen --model qwen3-30b-a3b --tokens 4 --dist hot:2 --seed 1 "
                         "--samples 3 --out set.jsonl",
                         NULL),
                     0);
    assert_int_equal(run("trace validate set.jsonl", &out), 0);
    assert_non_null(strstr(out, "valid (set of 3 traces, 0 warnings)"));
    plena_free(out);
    assert_int_equal(run("trace gen --model qwen3-30b-a3b --tokens 4 --dist nope --seed 1", NULL),
                     2);
    assert_int_equal(
        run("trace gen --model no-such-model --tokens 4 --dist uniform --seed 1", NULL), 3);
    assert_int_equal(run("trace gen --help", NULL), 0);

    assert_int_equal(plena_test_rmtree(dir), 0);
}

static const struct CMUnitTest tests[] = {cmocka_unit_test(test_cli)};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
