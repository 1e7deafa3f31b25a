/* `plena replay` as a command (docs/cli.md "Exit codes", docs/replay.md "Pipeline",
 * docs/replay.md "Exports"): usage errors exit 2, a missing file 3, an invalid trace 1 with
 * nothing written (no directory created), an unwritable output 4; a replay
 * always ends in a decided results.json and exports with headers; a result
 * that is not a pass is rerun by --skip-existing. Runs $PLENA_BIN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "replay/test_replay_util.h"
#include "replay/jsonw.h"
#include "settings/settings.h"
#include "replay/result.h"

static const char *g_bin;
static char g_example[512];
static char g_settings[128];

static int setup(void **state)
{
    g_bin = getenv("PLENA_BIN");
    if (!g_bin) g_bin = PLENA_BINARY_DIR "/plena";
    snprintf(g_example, sizeof g_example, "%s/src/trace/testdata/example_v2.json",
             PLENA_SOURCE_DIR);
    if (plena_test_tmp_setup(state)) return -1;
    snprintf(g_settings, sizeof g_settings, "%s/small.toml", plena_test_tmp);
    replay_test_write_small_settings(g_settings);
    return 0;
}

/* runs plena with args (NULL-terminated), stdout/stderr to files in plena_test_tmp */
static int run(const char *const *args)
{
    return replay_test_run(g_bin, plena_test_tmp, args);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_usage_and_input_errors(void **state)
{
    (void)state;
    char out[256], bad[256];
    snprintf(out, sizeof out, "%s/out", plena_test_tmp);
    assert_int_equal(run((const char *[]){"replay", "--help", NULL}), 0);
    assert_int_equal(run((const char *[]){"replay", "--bogus", g_example, "--out", out, NULL}), 2);
    assert_int_equal(run((const char *[]){"replay", g_example, NULL}), 2); /* no --out */
    assert_int_equal(
        run((const char *[]){"replay", g_example, "--out", out, "--weights", "pink", NULL}), 2);
    assert_int_equal(
        run((const char *[]){"replay", g_example, "--out", out, "--routing", "sideways", NULL}), 2);
    assert_int_equal(
        run((const char *[]){"replay", g_example, "--out", out, "--repeat", "1", NULL}), 2);
    assert_false(exists(out));

    /* missing file: 3 */
    snprintf(bad, sizeof bad, "%s/nope.json", plena_test_tmp);
    assert_int_equal(run((const char *[]){"replay", bad, "--out", out, NULL}), 3);
    assert_false(exists(out));

    /* invalid JSON and an invalid trace: 1, nothing written */
    snprintf(bad, sizeof bad, "%s/bad.json", plena_test_tmp);
    assert_int_equal(plena_file_write_atomic(bad, "{\"a\":", 5, NULL), 0);
    assert_int_equal(run((const char *[]){"replay", bad, "--out", out, NULL}), 1);
    assert_false(exists(out));
    char *text;
    size_t len;
    assert_int_equal(plena_file_read_all(g_example, &text, &len, NULL), 0);
    char *k = strstr(text, "\"top_k\": 2");
    assert_non_null(k);
    k[9] = '9'; /* top_k 9 > num_experts 8: V014 */
    assert_int_equal(plena_file_write_atomic(bad, text, len, NULL), 0);
    plena_free(text);
    assert_int_equal(run((const char *[]){"replay", bad, "--out", out, NULL}), 1);
    assert_false(exists(out));
    char *err;
    char ep[256];
    snprintf(ep, sizeof ep, "%s/stderr.txt", plena_test_tmp);
    assert_int_equal(plena_file_read_all(ep, &err, &len, NULL), 0);
    assert_non_null(strstr(err, "V014"));
    plena_free(err);

    /* unwritable output: a directory below a regular file */
    char file_out[256];
    snprintf(file_out, sizeof file_out, "%s/bad.json/sub", plena_test_tmp);
    assert_int_equal(run((const char *[]){"replay", g_example, "--out", file_out, NULL}), 4);
}

static void test_decided_result_and_rerun(void **state)
{
    (void)state;
    char out[256], res[300], sum[300];
    snprintf(out, sizeof out, "%s/out", plena_test_tmp);
    snprintf(res, sizeof res, "%s/example_e8k2_t4_l0/results.json", out);
    snprintf(sum, sizeof sum, "%s/summary.csv", out);
    int rc =
        run((const char *[]){"replay", g_example, "--out", out, "--settings", g_settings, NULL});
    json_t *r;
    assert_int_equal(plena_replay_json_read_file(res, &r, NULL), 0);
    json_t *gate = json_object_get(r, "gate");
    assert_true(json_is_boolean(json_object_get(gate, "passed")));
    int passed = json_is_true(json_object_get(gate, "passed"));
    /* exit code agrees with the decided gate; never 0 for a failed gate */
    if (passed)
        assert_int_equal(rc, 0);
    else
        assert_int_not_equal(rc, 0);
    assert_string_equal(json_string_value(json_object_get(r, "result_kind")), "plena.replay");
    const char *fp =
        json_string_value(json_object_get(json_object_get(r, "inputs"), "fingerprint"));
    assert_non_null(fp);
    assert_int_equal(strlen(fp), 64);
    assert_true(exists(sum));
    char tj[300];
    snprintf(tj, sizeof tj, "%s/example_e8k2_t4_l0/trace.json", out);
    assert_true(exists(tj));

    /* the same fingerprint again, --skip-existing: skipped iff passed */
    rc = run((const char *[]){"replay", g_example, "--out", out, "--skip-existing", "--settings",
                              g_settings, NULL});
    char *so;
    size_t len;
    char sp[256];
    snprintf(sp, sizeof sp, "%s/stdout.txt", plena_test_tmp);
    assert_int_equal(plena_file_read_all(sp, &so, &len, NULL), 0);
    assert_int_equal(strstr(so, "SKIP replay example_e8k2_t4_l0") != NULL, passed);
    plena_free(so);

    /* a result without gate.passed is rerun (defect 4): strip it and retry */
    json_object_del(gate, "passed");
    assert_int_equal(plena_replay_json_write_file(r, res, NULL), 0);
    run((const char *[]){"replay", g_example, "--out", out, "--skip-existing", "--settings",
                         g_settings, NULL});
    assert_int_equal(plena_file_read_all(sp, &so, &len, NULL), 0);
    assert_null(strstr(so, "SKIP replay"));
    plena_free(so);
    json_t *r2;
    assert_int_equal(plena_replay_json_read_file(res, &r2, NULL), 0);
    assert_true(json_is_boolean(json_object_get(json_object_get(r2, "gate"), "passed")));
    json_decref(r2);
    json_decref(r);

    /* export --root regenerates the same summary */
    char *s1, *s2;
    assert_int_equal(plena_file_read_all(sum, &s1, &len, NULL), 0);
    unlink(sum);
    run((const char *[]){"replay", "export", "--root", out, NULL});
    assert_int_equal(plena_file_read_all(sum, &s2, &len, NULL), 0);
    assert_string_equal(s1, s2);
    plena_free(s1);
    plena_free(s2);
}

/* writes a trace set of n copies of the example with ids kill_0..kill_{n-1} */
static void write_set(const char *path, int n)
{
    json_t *t;
    assert_int_equal(plena_replay_json_read_file(g_example, &t, NULL), 0);
    struct plena_buf b;
    plena_buf_init(&b);
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "kill_%d", i);
        json_object_set_new(t, "trace_id", json_string(id));
        char *line = json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS);
        plena_buf_puts(&b, line);
        plena_buf_puts(&b, "\n");
        free(line);
    }
    assert_int_equal(plena_file_write_atomic(path, b.data, b.len, NULL), 0);
    plena_buf_free(&b);
    json_decref(t);
}

static void canonical_hash(const char *out, int i, char hex[65])
{
    char p[300];
    snprintf(p, sizeof p, "%s/kill_%d/results.json", out, i);
    json_t *r;
    assert_int_equal(plena_replay_json_read_file(p, &r, NULL), 0);
    assert_int_equal(plena_replay_json_sha256(r, 1, hex, NULL), 0);
    json_decref(r);
}

/* docs/replay.md "Pipeline" test: a replay SIGKILLed mid-run and rerun with --skip-existing ends
 * with every trace exactly once in the exports and canonical results equal
 * to an uninterrupted run's. */
static void test_killed_replay_resumes(void **state)
{
    (void)state;
    enum { N = 6 };
    char set[256], a[256], b[256];
    snprintf(set, sizeof set, "%s/set.jsonl", plena_test_tmp);
    snprintf(a, sizeof a, "%s/uninterrupted", plena_test_tmp);
    snprintf(b, sizeof b, "%s/killed", plena_test_tmp);
    write_set(set, N);
    run((const char *[]){"replay", set, "--out", a, "--jobs", "2", "--settings", g_settings, NULL});

    pid_t p = plena_test_spawn(
        g_bin,
        (const char *[]){"replay", set, "--out", b, "--jobs", "2", "--settings", g_settings, NULL},
        NULL, "/dev/null", "/dev/null");
    /* kill as soon as the first result exists (or after ~2 s) */
    char first[300];
    snprintf(first, sizeof first, "%s/kill_0/results.json", b);
    for (int i = 0; i < 2000 && !exists(first); i++)
        usleep(1000);
    kill(p, SIGKILL);
    plena_test_wait(p);
    run((const char *[]){"replay", set, "--out", b, "--jobs", "2", "--skip-existing", "--settings",
                         g_settings, NULL});

    for (int i = 0; i < N; i++) {
        char ha[65], hb[65];
        canonical_hash(a, i, ha);
        canonical_hash(b, i, hb);
        assert_string_equal(ha, hb);
    }
    char sum[300];
    snprintf(sum, sizeof sum, "%s/summary.csv", b);
    char *s;
    size_t len;
    assert_int_equal(plena_file_read_all(sum, &s, &len, NULL), 0);
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "\nkill_%d,", i);
        char *hit = strstr(s, key);
        assert_non_null(hit);
        assert_null(strstr(hit + 1, key)); /* exactly once */
    }
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += s[i] == '\n';
    assert_int_equal(lines, N + 1);
    plena_free(s);
}

static int same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    if (plena_file_read_all(a, &x, &nx, NULL)) return 0;
    if (plena_file_read_all(b, &y, &ny, NULL)) {
        plena_free(x);
        return 0;
    }
    int same = nx == ny && !memcmp(x, y, nx);
    plena_free(x);
    plena_free(y);
    return same;
}

/* docs/replay.md "Gates" / defect 11: a replay and a direct `plena moe` run of the same model,
 * tokens, routing, weights and seeds stage byte-identical images and program
 * and give a byte-identical stage profile (cycles, HBM bytes, stage table). */
static void test_replay_equals_moe(void **state)
{
    (void)state;
    plena_test_write_text(
        plena_test_tmp, "tiny-e8k2-shared.json",
        "{\"hidden_size\": 64, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
        "\"moe_intermediate_size\": 64, \"shared_expert_intermediate_size\": 128}");
    char cfg[256], moe[256], rp[256];
    plena_test_path(cfg, sizeof cfg, plena_test_tmp, "tiny-e8k2-shared.json");
    plena_test_path(moe, sizeof moe, plena_test_tmp, "moe");
    plena_test_path(rp, sizeof rp, plena_test_tmp, "rp");
    assert_int_equal(run((const char *[]){"moe", "--model", cfg, "--tokens", "4", "--routing",
                                          g_example, "--seed", "42", "--out", moe, "--profile",
                                          "--settings", g_settings, NULL}),
                     0);
    assert_int_equal(run((const char *[]){"replay", g_example, "--out", rp, "--weight-seed", "42",
                                          "--input-seed", "42", "--settings", g_settings, NULL}),
                     0);
    const char *files[] = {"program.mem",  "hbm.bin",          "fp_sram.bin",
                           "int_sram.bin", "vram_preload.bin", "stage_profile.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[300], b[300];
        snprintf(a, sizeof a, "%s/%s", moe, files[i]);
        snprintf(b, sizeof b, "%s/example_e8k2_t4_l0/%s", rp, files[i]);
        if (!same_file(a, b)) fprintf(stderr, "differs: %s\n", files[i]);
        assert_true(same_file(a, b));
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_usage_and_input_errors, setup, plena_test_tmp_teardown),
    cmocka_unit_test_setup_teardown(test_decided_result_and_rerun, setup, plena_test_tmp_teardown),
    cmocka_unit_test_setup_teardown(test_killed_replay_resumes, setup, plena_test_tmp_teardown),
    cmocka_unit_test_setup_teardown(test_replay_equals_moe, setup, plena_test_tmp_teardown),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
