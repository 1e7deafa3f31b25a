/* `plena trace` CLI contract (spec/traces-and-replay.md 0.2, 2.1): exit codes
 * 0 valid / 1 invalid / 2 usage / 3 unreadable, the text line forms, --json,
 * FILE:LINE: prefixes for sets and the stats numbers of the 1.9 example.
 * Runs $PLENA_BIN; writes only under a fresh mkdtemp() directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"

static char dir[64];
static char example[4096];

static int run(const char *args, char **out)
{
    char cmd[8192], path[128];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "cd %s && '%s' %s >out.txt 2>&1", dir, getenv("PLENA_BIN"), args);
    int st = system(cmd);
    size_t len;
    struct plena_err err = {0};
    if (out && plena_file_read_all(path, out, &len, &err)) *out = NULL;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_cli(void **state)
{
    (void)state;
    if (!getenv("PLENA_BIN") || access(getenv("PLENA_BIN"), X_OK)) skip();
    snprintf(dir, sizeof dir, "/tmp/plena_trace_cli_XXXXXX");
    assert_non_null(mkdtemp(dir));
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

    write_file("bad.json", "{\"schema_version\": true}");
    assert_int_equal(run("trace validate bad.json", &out), 1);
    assert_non_null(strstr(out, "bad.json: error V008 at schema_version: expected integer, got "
                                "boolean true"));
    plena_free(out);

    assert_int_equal(run("trace validate --json bad.json", &out), 1);
    assert_non_null(strstr(out, "\"code\": \"V008\""));
    assert_non_null(strstr(out, "\"valid\": false"));
    plena_free(out);

    write_file("set.jsonl", "{}\n\n[]\n");
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
        char p1[128], p2[128], *d1, *d2;
        size_t n1, n2;
        snprintf(p1, sizeof p1, "%s/g1.json", dir);
        snprintf(p2, sizeof p2, "%s/g2.json", dir);
        assert_int_equal(plena_file_read_all(p1, &d1, &n1, NULL), 0);
        assert_int_equal(plena_file_read_all(p2, &d2, &n2, NULL), 0);
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

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cli)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
