/* `plena gates repeat|functional BUILD_DIR` (docs/replay.md "Gates"): a small
 * replay (the hand-written e8k2 example, --keep-dumps) is gated by $PLENA_BIN
 * and through the library; each gate is shown to fail on an injected defect
 * (nondeterminism behind the test-only switch, one flipped output byte, a
 * deleted dump: no fallback) with exit 1, and a missing build directory exits
 * 3. The pure repeat decision is tested on hand-made series. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "gen/build.h"
#include "model/model.h"
#include "replay/gates.h"
#include "replay/jsonw.h"
#include "replay/test_replay_util.h"
#include "settings/settings.h"
#include "common/test_support.h"

static char g_tmp[64];
static const char *g_bin;
static char g_bd[256]; /* the build directory of the kept-dumps replay */

/* runs plena with args (NULL-terminated), stdout/stderr to files in g_tmp */
static int run(const char *const *args)
{
    return replay_test_run(g_bin, g_tmp, args);
}

static char *read_stdout(void)
{
    char p[128], *s = NULL;
    size_t len;
    snprintf(p, sizeof p, "%s/stdout.txt", g_tmp);
    assert_int_equal(plena_file_read_all(p, &s, &len, NULL), 0);
    return s;
}

/* the standard output of the last run starts with prefix */
static void expect_stdout(const char *prefix)
{
    char *so = read_stdout();
    assert_true(!strncmp(so, prefix, strlen(prefix)));
    plena_free(so);
}

/* The library's decision on the kept build: the repeat gate with `repeats`
 * runs, or the functional gate for 0. */
static int library_gate_passes(unsigned repeats)
{
    struct plena_replay_gate_opts o = {.build_dir = g_bd, .repeats = repeats};
    struct plena_replay_gate_report r;
    struct plena_err err = {0};
    assert_int_equal(repeats ? plena_replay_gate_repeat(&o, &r, &err)
                             : plena_replay_gate_functional(&o, &r, &err),
                     0);
    return r.passed;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static json_t *read_json_in(const char *dir, const char *name)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    json_t *j = NULL;
    assert_int_equal(plena_replay_json_read_file(p, &j, NULL), 0);
    return j;
}

/* copy of the build directory, so each defect is injected in its own */
static void copy_build(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", g_tmp, name);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", out, g_bd, out);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
    (void)state;
    g_bin = getenv("PLENA_BIN");
    if (!g_bin) g_bin = PLENA_BINARY_DIR "/plena";
    snprintf(g_tmp, sizeof g_tmp, "/tmp/plena_replay_gates_XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    char settings[128], out[128], example[512];
    snprintf(settings, sizeof settings, "%s/small.toml", g_tmp);
    snprintf(out, sizeof out, "%s/out", g_tmp);
    snprintf(example, sizeof example, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    replay_test_write_small_settings(settings);
    int rc = run((const char *[]){"replay", example, "--out", out, "--settings", settings,
                                  "--keep-dumps", NULL});
    snprintf(g_bd, sizeof g_bd, "%s/example_e8k2_t4_l0", out);
    /* the gates below judge a replay that passed */
    return rc == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* SIGINT during `gates repeat` (the stop flag set): no verdict, no gate file;
 * the regeneration of the build is the first step to stop (its status names
 * the build), not the whole build regenerated and its first run trapped */
static void test_repeat_stopped(void **state)
{
    (void)state;
    char bd[300], p[400];
    copy_build("stopped", bd, sizeof bd);
    volatile sig_atomic_t stop = 1;
    struct plena_replay_gate_opts o = {.build_dir = bd, .repeats = 2, .stop = &stop};
    struct plena_replay_gate_report r;
    struct plena_err err = {0};
    assert_int_equal(plena_replay_gate_repeat(&o, &r, &err), PLENA_E_INTERRUPTED);
    assert_string_equal(err.where, "build");
    snprintf(p, sizeof p, "%s/repeat_gate.json", bd);
    assert_false(exists(p));
}

/* SIGINT once the build is regenerated: both gates end without a verdict
 * (PLENA_E_INTERRUPTED naming the build directory) and write no gate file;
 * the functional gate's references stop early and leave a failed
 * comparison, which only the check before its decision keeps from
 * becoming a verdict. */
static volatile sig_atomic_t g_gate_stop;
static void stop_gate(void *ctx)
{
    (void)ctx;
    g_gate_stop = 1;
}

static void test_gates_stopped_after_regeneration(void **state)
{
    (void)state;
    for (unsigned repeats = 0; repeats <= 2; repeats += 2) {
        char bd[300], p[400];
        copy_build(repeats ? "stopped_repeat" : "stopped_functional", bd, sizeof bd);
        g_gate_stop = 0;
        struct plena_replay_gate_opts o = {
            .build_dir = bd, .repeats = repeats, .stop = &g_gate_stop, .after_open = stop_gate};
        struct plena_replay_gate_report r;
        struct plena_err err = {0};
        assert_int_equal(repeats ? plena_replay_gate_repeat(&o, &r, &err)
                                 : plena_replay_gate_functional(&o, &r, &err),
                         PLENA_E_INTERRUPTED);
        assert_string_equal(err.where, bd);
        snprintf(p, sizeof p, "%s/%s", bd, repeats ? "repeat_gate.json" : "functional_gate.json");
        assert_false(exists(p));
    }
    g_gate_stop = 0;
}

/* docs/replay.md "Gates" decision on hand-made series */
static void test_repeat_decision(void **state)
{
    (void)state;
    const char *const m[] = {"a", "b", "c", "d", "e", "f", "g"};
    json_t *s = json_pack("{s:[i,i,i],s:[s,s,s],s:[i,n,i],s:[i,i,i],s:[n,n,n],s:[]}", "a", 5, 5, 5,
                          "b", "x", "x", "x", "c", 7, 7, "d", 1, 2, 1, "f", "g");
    /* e is absent: a metric no run produced fails too */
    json_t *mm = plena_replay_repeat_mismatched(s, m, 7);
    assert_int_equal(json_array_size(mm), 5);
    assert_string_equal(json_string_value(json_array_get(mm, 0)), "c"); /* null = missing */
    assert_string_equal(json_string_value(json_array_get(mm, 1)), "d"); /* two values */
    assert_string_equal(json_string_value(json_array_get(mm, 2)), "e"); /* absent */
    assert_string_equal(json_string_value(json_array_get(mm, 3)), "f"); /* never produced */
    assert_string_equal(json_string_value(json_array_get(mm, 4)), "g"); /* no runs */
    json_decref(mm);
    mm = plena_replay_repeat_mismatched(s, m, 2);
    assert_int_equal(json_array_size(mm), 0);
    json_decref(mm);
    json_decref(s);
}

static void test_repeat_passes(void **state)
{
    (void)state;
    /* no --settings: the file recorded in run_stats.json is used */
    assert_int_equal(run((const char *[]){"gates", "repeat", g_bd, "--repeats", "2", NULL}), 0);
    expect_stdout("PASS repeat ");
    json_t *j = read_json_in(g_bd, "repeat_gate.json");
    assert_true(json_is_true(json_object_get(j, "passed")));
    assert_int_equal(json_integer_value(json_object_get(j, "repeats")), 2);
    assert_int_equal(json_array_size(json_object_get(j, "mismatched")), 0);
    json_t *series = json_object_get(j, "series");
    /* profiling is on by default: 7 metrics + the stage profile hash */
    assert_int_equal(json_object_size(series), 8);
    const char *key;
    json_t *v;
    json_object_foreach(series, key, v)
    {
        assert_int_equal(json_array_size(v), 2);
        assert_false(json_is_null(json_array_get(v, 0)));
    }
    json_decref(j);
    char p[400];
    snprintf(p, sizeof p, "%s/repeat/01/run_stats.json", g_bd);
    assert_true(exists(p));
    snprintf(p, sizeof p, "%s/repeat/02/run_stats.json", g_bd);
    assert_true(exists(p));

    /* the library gives the same decision */
    assert_true(library_gate_passes(3));
}

static void test_repeat_nondeterminism_fails(void **state)
{
    (void)state;
    char bd[300];
    copy_build("nondet", bd, sizeof bd);
    setenv("PLENA_TEST_NONDETERMINISM", "1", 1);
    int rc = run((const char *[]){"gates", "repeat", bd, NULL});
    unsetenv("PLENA_TEST_NONDETERMINISM");
    assert_int_equal(rc, 1);
    expect_stdout("FAIL repeat sim_latency_picos ");
    json_t *j = read_json_in(bd, "repeat_gate.json");
    assert_true(json_is_false(json_object_get(j, "passed")));
    assert_int_equal(json_integer_value(json_object_get(j, "repeats")), 3);
    json_t *mm = json_object_get(j, "mismatched");
    assert_int_equal(json_array_size(mm), 1);
    assert_string_equal(json_string_value(json_array_get(mm, 0)), "sim_latency_picos");
    json_decref(j);
}

static void test_functional_passes(void **state)
{
    (void)state;
    assert_int_equal(run((const char *[]){"gates", "functional", g_bd, NULL}), 0);
    expect_stdout("PASS functional kind=reference numerical=true ");
    json_t *j = read_json_in(g_bd, "functional_gate.json");
    assert_true(json_is_true(json_object_get(j, "passed")));
    assert_int_equal(json_integer_value(json_object_get(j, "mismatches")), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "elements")), 4 * 64);
    /* the same output hash as the replay recorded */
    json_t *res = read_json_in(g_bd, "results.json");
    assert_string_equal(
        json_string_value(json_object_get(j, "output_sha256")),
        json_string_value(json_object_get(json_object_get(res, "functional"), "output_sha256")));
    json_decref(res);
    json_t *ck = json_object_get(j, "checks");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ck, 0), "name")),
                        "routing_integrity");
    json_decref(j);
    /* the library gives the same decision */
    assert_true(library_gate_passes(0));
}

/* one byte of the output region: located by the reference's first 8 bytes
 * (row 0, columns 0-3 lie in one VLEN block), which occur once in the dump */
static void test_functional_flipped_byte_fails(void **state)
{
    (void)state;
    char bd[300], p[400], rp[400];
    copy_build("flip", bd, sizeof bd);
    snprintf(p, sizeof p, "%s/vram_dump.bin", bd);
    snprintf(rp, sizeof rp, "%s/reference_output.bin", bd);
    char *dump, *ref;
    size_t dlen, rlen;
    assert_int_equal(plena_file_read_all(p, &dump, &dlen, NULL), 0);
    assert_int_equal(plena_file_read_all(rp, &ref, &rlen, NULL), 0);
    assert_int_equal(rlen, 4 * 64 * 2);
    size_t hits = 0, at = 0;
    for (size_t i = 0; i + 8 <= dlen; i += 2)
        if (!memcmp(dump + i, ref, 8)) {
            hits++;
            at = i;
        }
    assert_int_equal(hits, 1);
    dump[at + 1] ^= 0x01; /* an exponent bit of element (0, 0) */
    assert_int_equal(plena_file_write_atomic(p, dump, dlen, NULL), 0);
    plena_free(dump);
    plena_free(ref);
    assert_int_equal(run((const char *[]){"gates", "functional", bd, NULL}), 1);
    char *so = read_stdout();
    assert_true(!strncmp(so, "FAIL functional ", 16));
    assert_non_null(strstr(so, "bit_exact"));
    assert_non_null(strstr(so, "mismatches=1"));
    plena_free(so);
    json_t *j = read_json_in(bd, "functional_gate.json");
    assert_true(json_is_false(json_object_get(j, "passed")));
    assert_true(json_is_false(json_object_get(j, "numerical")));
    assert_int_equal(json_integer_value(json_object_get(j, "mismatches")), 1);
    json_decref(j);
}

static void test_functional_without_dump_fails(void **state)
{
    (void)state;
    char bd[300], p[400];
    copy_build("nodump", bd, sizeof bd);
    snprintf(p, sizeof p, "%s/vram_dump.bin", bd);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(run((const char *[]){"gates", "functional", bd, NULL}), 1);
    expect_stdout("FAIL functional functional ");
    /* the line says why nothing was compared, not "elements=0 mismatches=none" */
    char *so = read_stdout();
    assert_non_null(strstr(so, "not compared: "));
    assert_non_null(strstr(so, "vram_dump.bin"));
    assert_null(strstr(so, "elements=0"));
    plena_free(so);
    json_t *j = read_json_in(bd, "functional_gate.json");
    assert_true(json_is_false(json_object_get(j, "passed")));
    json_t *ck = json_object_get(j, "checks");
    json_t *last = json_array_get(ck, json_array_size(ck) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "name")), "functional");
    assert_non_null(strstr(json_string_value(json_object_get(last, "detail")), "vram_dump.bin"));
    json_decref(j);
}

/* A reopened build reads its regions back from hbm.bin; lazy routed expert
 * matrices stay in the file and are read from it, one at a time, when their
 * bytes are needed (a byte changed in the file shows: they are not
 * generated again), and a file that shrank afterwards is an input error
 * naming it. */
static void test_load_images_lazy(void **state)
{
    (void)state;
    struct plena_settings set;
    plena_settings_reference(&set);
    struct plena_gen_machine m;
    plena_gen_machine_from_settings(&set, &m);
    char dir[128], hbm[200];
    snprintf(dir, sizeof dir, "%s/lazy_build", g_tmp);
    snprintf(hbm, sizeof hbm, "%s/hbm.bin", dir);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, plena_model_preset_find("tiny-route-128x8"), &m, 4);
    o.out_dir = dir;
    o.lazy_experts = 1;
    struct plena_moe_build b;
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_moe_build_run(&o, &b, &err), 0);
    size_t lazy = 0, first_lazy = SIZE_MAX;
    uint8_t **want = plena_calloc(b.n_hbm, sizeof *want);
    struct plena_moe_scratch sc = {0};
    for (size_t i = 0; i < b.n_hbm; i++) {
        if (!b.hbm[i].bytes && first_lazy == SIZE_MAX) first_lazy = i;
        lazy += !b.hbm[i].bytes;
        const uint8_t *p = NULL;
        assert_int_equal(plena_moe_build_region_bytes(&b, &b.hbm[i], &sc, &p, NULL), 0);
        want[i] = plena_malloc((size_t)b.hbm[i].n);
        memcpy(want[i], p, (size_t)b.hbm[i].n);
    }
    assert_true(lazy > 0);
    /* one byte of the first lazy matrix changed in the file */
    const uint64_t at = b.hbm[first_lazy].base + 5;
    want[first_lazy][5] ^= 0x5A;
    FILE *f = fopen(hbm, "r+b");
    assert_non_null(f);
    assert_int_equal(fseeko(f, (off_t)at, SEEK_SET), 0);
    assert_int_equal(fputc(want[first_lazy][5], f), want[first_lazy][5]);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(plena_replay_build_load_images(&b, dir, &err), 0);
    assert_non_null(b.image_path);
    for (size_t i = 0; i < b.n_hbm; i++) {
        const uint8_t *p = NULL;
        assert_int_equal(plena_moe_build_region_bytes(&b, &b.hbm[i], &sc, &p, &err), 0);
        assert_non_null(p);
        assert_memory_equal(p, want[i], (size_t)b.hbm[i].n);
    }
    size_t still_lazy = 0;
    for (size_t i = 0; i < b.n_hbm; i++)
        still_lazy += !b.hbm[i].bytes;
    assert_int_equal(still_lazy, lazy); /* not read into memory */
    /* the file shrinks under the reopened build: an input error naming it */
    assert_int_equal(truncate(hbm, (off_t)b.hbm[first_lazy].base), 0);
    plena_err_clear(&err);
    const uint8_t *p = NULL;
    assert_int_equal(plena_moe_build_region_bytes(&b, &b.hbm[first_lazy], &sc, &p, &err),
                     PLENA_E_INPUT);
    assert_int_equal(err.code, PLENA_E_INPUT);
    assert_non_null(strstr(err.where, "hbm.bin"));
    assert_non_null(strstr(err.msg, "shorter than"));
    plena_moe_scratch_free(&sc);
    for (size_t i = 0; i < b.n_hbm; i++)
        plena_free(want[i]);
    plena_free(want);
    plena_moe_build_free(&b);
}

static void test_missing_inputs_and_usage(void **state)
{
    (void)state;
    char nope[200], bd[300], p[400];
    snprintf(nope, sizeof nope, "%s/no_such_build", g_tmp);
    assert_int_equal(run((const char *[]){"gates", "repeat", nope, NULL}), 3);
    assert_int_equal(run((const char *[]){"gates", "functional", nope, NULL}), 3);
    assert_false(exists(nope));
    /* a pruned build (no hbm.bin) cannot be gated: input error, no result */
    copy_build("pruned", bd, sizeof bd);
    snprintf(p, sizeof p, "%s/hbm.bin", bd);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof p, "%s/functional_gate.json", bd);
    unlink(p);
    assert_int_equal(run((const char *[]){"gates", "functional", bd, NULL}), 3);
    assert_false(exists(p));
    /* usage */
    assert_int_equal(run((const char *[]){"gates", "repeat", g_bd, "--repeats", "1", NULL}), 2);
    assert_int_equal(run((const char *[]){"gates", "repeat", NULL}), 2);
    assert_int_equal(run((const char *[]){"gates", "functional", g_bd, "--repeats", "2", NULL}), 2);
    assert_int_equal(run((const char *[]){"gates", "bogus", NULL}), 2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_repeat_decision),
    cmocka_unit_test(test_repeat_passes),
    cmocka_unit_test(test_repeat_stopped),
    cmocka_unit_test(test_gates_stopped_after_regeneration),
    cmocka_unit_test(test_repeat_nondeterminism_fails),
    cmocka_unit_test(test_functional_passes),
    cmocka_unit_test(test_functional_flipped_byte_fails),
    cmocka_unit_test(test_functional_without_dump_fails),
    cmocka_unit_test(test_missing_inputs_and_usage),
    cmocka_unit_test(test_load_images_lazy),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
