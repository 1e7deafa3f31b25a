/* End-to-end replays of the complete example trace of docs/trace-schema.md (H = I = 64, 8 experts
 * top-2, shared gated 128) through generator, emulator and reference model (docs/replay.md
 * "Pipeline" and "Gates"; upstream defects 5, 6, 7, 9, 11, 12, 17, 18, 31): the numerical gate
 * passes; zero weights are smoke only; one flipped output element or one altered INT SRAM id fails
 * the gate with gate.passed false in the file; --overlap reports overlap_overlay; the split and the
 * routing tax add up exactly from the stage profile; and a shared-only program has routed_picos =
 * 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/pool.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "replay/test_replay_util.h"
#include "isa/stages.h"
#include "replay/jsonw.h"
#include "settings/settings.h"
#include "replay/replay.h"
#include "replay/result.h"

static char g_settings[128];

/* The default options of a replay of the example into plena_test_tmp with the small
 * settings (written here); a test changes the option it is about. */
static struct plena_replay_opts example_opts(void)
{
    struct plena_replay_opts o;
    plena_replay_opts_default(&o);
    o.out_dir = plena_test_tmp;
    snprintf(g_settings, sizeof g_settings, "%s/small.toml", plena_test_tmp);
    replay_test_write_small_settings(g_settings);
    o.settings_path = g_settings;
    return o;
}

/* the example trace prepared for a replay with o */
static void prepare_example(const struct plena_replay_opts *o, struct plena_replay_item *it)
{
    char path[512];
    snprintf(path, sizeof path, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    char *bytes;
    size_t len;
    assert_int_equal(plena_file_read_all(path, &bytes, &len, NULL), 0);
    char sh[65];
    assert_int_equal(plena_replay_settings_sha256(o->settings_path, sh, NULL), 0);
    struct plena_trace_report rep;
    plena_trace_report_init(&rep);
    assert_int_equal(plena_replay_prepare(bytes, len, path, o, sh, it, &rep, NULL), 0);
    plena_trace_report_free(&rep);
    plena_free(bytes);
}

/* prepares the example and replays it with o; returns the parsed result
 * and, when oc is not NULL, the outcome */
static json_t *replay_example(const struct plena_replay_opts *o, struct plena_replay_outcome *oc)
{
    struct plena_replay_outcome unused;
    if (!oc) oc = &unused;
    struct plena_replay_item it;
    prepare_example(o, &it);
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_replay_run(&it, o, oc, &err);
    if (rc) fprintf(stderr, "replay: %s: %s\n", err.where, err.msg);
    assert_int_equal(rc, 0);
    char res[300];
    snprintf(res, sizeof res, "%s/%s/results.json", plena_test_tmp, it.dir_name);
    plena_replay_item_free(&it);
    json_t *r;
    assert_int_equal(plena_replay_json_read_file(res, &r, NULL), 0);
    return r;
}

static json_t *jget(json_t *r, const char *a, const char *b)
{
    return json_object_get(json_object_get(r, a), b);
}

/* Replays the example with the given lowering (NULL: the default) and
 * hooks (either may be NULL); the replay must fail with gate.passed false
 * in the published result, which is returned. */
static json_t *replay_fails(const char *lowering, void (*after_generate)(void *, const char *),
                            void (*after_run)(void *, const char *))
{
    struct plena_replay_opts o = example_opts();
    if (lowering) o.lowering = lowering;
    o.after_generate = after_generate;
    o.after_run = after_run;
    struct plena_replay_outcome oc;
    json_t *r = replay_example(&o, &oc);
    assert_int_equal(oc.code, PLENA_E_FAILED);
    assert_true(json_is_false(jget(r, "gate", "passed"))); /* decided false, in the file */
    return r;
}

/* A replay whose stop flag is set (SIGINT) before it starts (the build
 * stops), once the build is written (the run stops as a trap: no later
 * step) or after the run (the check runs, no verdict): the status and the
 * outcome say interrupted (not an output error, not a failed trace), and no
 * result is published. */
static volatile sig_atomic_t g_stop;
static void stop_now(void *ctx, const char *dir)
{
    (void)ctx, (void)dir;
    g_stop = 1;
}
static int g_after_run, g_stop_after_run;
static void count_after_run(void *ctx, const char *dir)
{
    (void)ctx, (void)dir;
    g_after_run++;
    if (g_stop_after_run) g_stop = 1;
}

static void test_stopped_replay(void **state)
{
    (void)state;
    /* when: 0 before the build, 1 once it is written, 2 after the run */
    for (int when = 0; when < 3; when++) {
        struct plena_replay_opts o = example_opts();
        g_stop = when == 0;
        o.stop = &g_stop;
        if (when == 1) o.after_generate = stop_now;
        o.after_run = count_after_run; /* a stopped run ends the trace: no later step */
        g_after_run = 0;
        g_stop_after_run = when == 2;
        o.keep_dumps = 1; /* a finished comparison would write reference_output.bin */
        struct plena_replay_item it;
        prepare_example(&o, &it);
        struct plena_replay_outcome oc;
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_replay_run(&it, &o, &oc, &err), PLENA_E_INTERRUPTED);
        assert_int_equal(oc.code, PLENA_E_INTERRUPTED);
        if (when == 0) assert_string_equal(err.where, "build"); /* the build itself stopped */
        char res[300];
        snprintf(res, sizeof res, "%s/%s/results.json", plena_test_tmp, it.dir_name);
        assert_int_not_equal(access(res, F_OK), 0);
        assert_int_equal(g_after_run, when == 2);
        /* after the run, the stop reaches the references: they end early */
        snprintf(res, sizeof res, "%s/%s/reference_output.bin", plena_test_tmp, it.dir_name);
        assert_int_not_equal(access(res, F_OK), 0);
        plena_replay_item_free(&it);
    }
    g_stop = 0;
    g_stop_after_run = 0;
}

/* plena_replay_batch in this process (jobs 1): a stop while a trace runs
 * ends that trace without a verdict, not after it (the batch's flag reaches
 * the trace), and the batch says interrupted. */
static void test_batch_stops_running_trace(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    o.after_generate = stop_now;
    char path[512];
    snprintf(path, sizeof path, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    const char *inputs[] = {path};
    g_stop = 0;
    struct plena_replay_batch_opts b = {
        .inputs = inputs, .n_inputs = 1, .jobs = 1, .stop = &g_stop, .no_export = 1};
    struct plena_replay_batch_events ev = {0};
    int interrupted = 0;
    assert_int_equal(plena_replay_batch(&o, &b, &ev, &interrupted), PLENA_E_INTERRUPTED);
    assert_true(interrupted);
    struct plena_replay_item it;
    prepare_example(&o, &it);
    char res[300];
    snprintf(res, sizeof res, "%s/%s/results.json", plena_test_tmp, it.dir_name);
    assert_int_not_equal(access(res, F_OK), 0);
    plena_replay_item_free(&it);
    g_stop = 0;
}

static void test_example_passes_numerical_gate(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    struct plena_replay_outcome oc;
    json_t *r = replay_example(&o, &oc);
    assert_int_equal(oc.code, PLENA_OK);
    assert_true(json_is_true(jget(r, "gate", "passed")));
    assert_string_equal(json_string_value(jget(r, "gate", "kind")), "numerical");
    assert_true(json_is_true(jget(r, "functional", "numerical")));
    assert_int_equal(json_integer_value(jget(r, "functional", "mismatches")), 0);
    assert_int_equal(json_integer_value(jget(r, "functional", "elements")), 4 * 64);
    assert_true(json_is_true(jget(r, "summary", "functional_numerical_pass")));
    assert_string_equal(json_string_value(jget(r, "summary", "issue_model")), "serial");
    /* the example's weights are exact in fp16 and BF16 */
    assert_true(json_number_value(jget(r, "functional", "route_weight_max_conversion_error")) ==
                0.0);
    /* 5 selected experts (0, 1, 3, 5, 6), 8 pairs */
    assert_int_equal(json_integer_value(jget(r, "shape", "selected_expert_count")), 5);
    assert_int_equal(json_integer_value(jget(r, "shape", "pair_count")), 8);
    /* every `passed` in a passing result is true */
    json_t *checks = jget(r, "gate", "checks");
    for (size_t i = 0; i < json_array_size(checks); i++)
        assert_true(json_is_true(json_object_get(json_array_get(checks, i), "passed")));

    /* split and tax add up exactly from the stage profile (defect 18) */
    char pp[300];
    snprintf(pp, sizeof pp, "%s/example_e8k2_t4_l0/stage_profile.json", plena_test_tmp);
    json_t *prof;
    assert_int_equal(plena_replay_json_read_file(pp, &prof, NULL), 0);
    json_int_t total = json_integer_value(json_object_get(prof, "total_profiled_picos"));
    json_t *sv = json_object_get(r, "shared_vs_routed");
    assert_int_equal(json_integer_value(json_object_get(sv, "shared_picos")) +
                         json_integer_value(json_object_get(sv, "routed_picos")) +
                         json_integer_value(json_object_get(sv, "excluded_picos")),
                     total);
    const char *tax_stages[] = {"accumulator_init", "gather", "expert_weight_address",
                                "expert_route_weight", "scatter_combine"};
    json_int_t tax = 0;
    for (size_t i = 0; i < 5; i++)
        tax += json_integer_value(json_object_get(
            json_object_get(json_object_get(prof, "stages"), tax_stages[i]), "wall_picos"));
    assert_int_equal(json_integer_value(jget(r, "routing_tax", "routing_tax_picos")), tax);
    assert_int_equal(json_array_size(json_object_get(r, "stages")), PLENA_STAGE_COUNT);
    json_decref(prof);
    /* dumps are gone without --keep-dumps; the decided result stays */
    char vd[300];
    snprintf(vd, sizeof vd, "%s/example_e8k2_t4_l0/vram_dump.bin", plena_test_tmp);
    assert_int_not_equal(access(vd, F_OK), 0);
    json_decref(r);
}

static void test_zero_weights_are_smoke(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    o.weights = PLENA_WEIGHTS_ZERO;
    json_t *r = replay_example(&o, NULL);
    assert_string_equal(json_string_value(jget(r, "gate", "kind")), "zero_input_smoke");
    assert_string_equal(json_string_value(jget(r, "functional", "kind")), "zero_input_smoke");
    assert_true(json_is_false(jget(r, "functional", "numerical")));
    assert_true(json_is_null(jget(r, "summary", "functional_numerical_pass")));
    json_decref(r);
}

/* The base of layout.json tensor `name` in build directory dir (fails the
 * test when absent). */
static long long layout_base(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/layout.json", dir);
    json_t *l;
    assert_int_equal(plena_replay_json_read_file(p, &l, NULL), 0);
    json_t *ts = json_object_get(l, "tensors");
    long long base = -1;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *t = json_array_get(ts, i);
        if (!strcmp(json_string_value(json_object_get(t, "name")), name))
            base = json_integer_value(json_object_get(t, "base"));
    }
    json_decref(l);
    assert_true(base >= 0);
    return base;
}

/* Flips bit 0 of byte `at` of dir/file. */
static void flip_byte(const char *dir, const char *file, long long at)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    fseek(f, (long)at, SEEK_SET);
    int b = fgetc(f);
    fseek(f, (long)at, SEEK_SET);
    fputc(b ^ 1, f);
    fclose(f);
}

/* flips the lowest mantissa bit of output row 0, column 0 in vram_dump.bin */
static void flip_output(void *ctx, const char *dir)
{
    (void)ctx;
    flip_byte(dir, "vram_dump.bin", layout_base(dir, "acc") * 2);
}

static void test_flipped_output_element_fails(void **state)
{
    (void)state;
    json_t *r = replay_fails(NULL, NULL, flip_output);
    assert_int_equal(json_integer_value(jget(r, "functional", "mismatches")), 1);
    assert_true(json_is_false(jget(r, "summary", "functional_numerical_pass")));
    json_decref(r);
}

/* changes pair 5's expert id in int_sram.bin after generation */
static void alter_id(void *ctx, const char *dir)
{
    (void)ctx;
    char p[4200];
    snprintf(p, sizeof p, "%s/layout.json", dir);
    json_t *l;
    assert_int_equal(plena_replay_json_read_file(p, &l, NULL), 0);
    json_t *is = json_object_get(l, "int_sram");
    long long at = json_integer_value(json_object_get(is, "int_base")) +
                   json_integer_value(json_object_get(is, "ids_off")) + 5;
    json_decref(l);
    snprintf(p, sizeof p, "%s/int_sram.bin", dir);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    fseek(f, (long)(at * 4), SEEK_SET);
    fputc(4, f); /* the trace routes pair 5 (token 2, slot 1) to expert 3 */
    fclose(f);
}

/* changes the first word of the expert-major routing tables in hbm.bin (the
 * first segment record's expert id) */
static void alter_table(void *ctx, const char *dir)
{
    (void)ctx;
    flip_byte(dir, "hbm.bin", layout_base(dir, "routing_tables"));
}

static void altered_routing_fails(const char *lowering, void (*alter)(void *, const char *))
{
    json_t *r = replay_fails(lowering, alter, NULL);
    json_t *failed = jget(r, "gate", "failed");
    int found = 0;
    for (size_t i = 0; i < json_array_size(failed); i++)
        found |= !strcmp(json_string_value(json_array_get(failed, i)), "routing_integrity");
    assert_true(found);
    json_decref(r);
}

static void test_altered_id_fails_routing_integrity(void **state)
{
    (void)state;
    altered_routing_fails("pair-major", alter_id);      /* ids in int_sram.bin */
    altered_routing_fails("expert-major", alter_table); /* tables in hbm.bin */
}

static void test_overlap_issue_model(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    o.overlap = 1;
    json_t *r = replay_example(&o, NULL);
    assert_string_equal(json_string_value(jget(r, "summary", "issue_model")), "overlap_overlay");
    assert_true(json_is_integer(jget(r, "run", "hidden_prefetch_cycles")));
    assert_true(json_integer_value(jget(r, "run", "sim_latency_cycles")) <=
                json_integer_value(jget(r, "run", "serial_latency_cycles")));
    json_decref(r);
}

/* defects 17 and 18: the split comes from stage names only, and picoseconds
 * are summed before rounding once. A shared-only profile (no routed stage
 * billed) gives routed_picos = 0; 1500 + 2500 + 1 ps of shared work at a
 * 1000 ps clock is 5 cycles, not the 2 + 3 + 1 of per-stage rounding. */
static void test_shared_only_split_and_rounding(void **state)
{
    (void)state;
    uint64_t pic[PLENA_STAGE_COUNT] = {0};
    pic[PLENA_STAGE_SHARED_EXPERT_PROJECTION] = 1500;
    pic[PLENA_STAGE_SHARED_EXPERT_ACTIVATION] = 2500;
    pic[PLENA_STAGE_SHARED_EXPERT_GATE] = 1;
    pic[PLENA_STAGE_RESIDUAL_SETUP] = 700;
    pic[PLENA_STAGE_ACCUMULATOR_INIT] = 300; /* combine: excluded, and routing tax */
    pic[PLENA_STAGE_OTHER] = 10;
    json_t *sv = plena_replay_split_json(pic, 1000, "none");
    assert_int_equal(json_integer_value(json_object_get(sv, "routed_picos")), 0);
    assert_int_equal(json_integer_value(json_object_get(sv, "shared_picos")), 4001);
    assert_int_equal(json_integer_value(json_object_get(sv, "shared_cycles")), 5);
    assert_int_equal(json_integer_value(json_object_get(sv, "excluded_picos")), 1010);
    assert_int_equal(json_integer_value(json_object_get(sv, "combine_picos")), 300);
    assert_int_equal(json_integer_value(json_object_get(sv, "residual_picos")), 700);
    assert_int_equal(json_integer_value(json_object_get(sv, "other_picos")), 10);
    assert_int_equal(json_integer_value(json_object_get(sv, "total_profiled_picos")), 5011);
    assert_true(json_is_null(json_object_get(sv, "shared_to_routed_ratio")));
    assert_true(json_number_value(json_object_get(sv, "shared_fraction")) == 1.0);
    json_decref(sv);
    json_t *tax = plena_replay_tax_json(pic, 1000);
    assert_int_equal(json_integer_value(json_object_get(tax, "routing_tax_picos")), 300);
    assert_int_equal(json_integer_value(json_object_get(tax, "routing_tax_cycles")), 1);
    assert_true(json_is_null(json_object_get(tax, "delta_cycles")));
    json_decref(tax);
}

/* defect 24: no dump in the build dir -> functional fails, no fallback */
static void remove_dump(void *ctx, const char *dir)
{
    (void)ctx;
    char p[4200];
    snprintf(p, sizeof p, "%s/vram_dump.bin", dir);
    assert_int_equal(unlink(p), 0);
}

static void test_missing_dump_fails(void **state)
{
    (void)state;
    json_t *r = replay_fails(NULL, NULL, remove_dump);
    json_t *checks = jget(r, "gate", "checks");
    int seen = 0;
    for (size_t i = 0; i < json_array_size(checks); i++) {
        json_t *k = json_array_get(checks, i);
        if (!strcmp(json_string_value(json_object_get(k, "name")), "functional")) {
            seen = 1;
            assert_true(json_is_false(json_object_get(k, "passed")));
            assert_non_null(strstr(json_string_value(json_object_get(k, "detail")), "vram_dump"));
        }
    }
    assert_true(seen);
    json_decref(r);
}

/* docs/replay.md "Gates": repeats run in distinct repeat/NN directories and agree */
static void test_repeat_gate(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    o.repeat = 2;
    struct plena_replay_outcome oc;
    json_t *r = replay_example(&o, &oc);
    assert_int_equal(oc.code, PLENA_OK);
    assert_true(json_is_true(jget(r, "repeat", "passed")));
    assert_int_equal(json_array_size(json_object_get(jget(r, "repeat", "series"), "output_sha256")),
                     2);
    for (int i = 1; i <= 2; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s/example_e8k2_t4_l0/repeat/%02d/run_stats.json", plena_test_tmp,
                 i);
        assert_int_equal(access(p, F_OK), 0);
    }
    json_decref(r);
}

/* --threads: the functional check's references on 1 and 3 host threads give
 * the same "functional" section (the float64 relative errors to the last
 * bit, the reference's hash, every count) and the same gate, volatile keys
 * (its decision time) aside. */
static void test_threads_same_functional(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    o.threads = 1;
    json_t *one = replay_example(&o, NULL);
    o.threads = 3;
    plena_pool_test_workers_first(1); /* the work on the two workers' parts */
    json_t *three = replay_example(&o, NULL);
    plena_pool_test_workers_first(0);
    assert_true(json_is_true(jget(one, "gate", "passed")));
    assert_true(json_number_value(jget(one, "functional", "rel_rms_f64")) > 0.0);
    plena_replay_strip_volatile(one); /* decided_at_utc and the like */
    plena_replay_strip_volatile(three);
    assert_true(
        json_equal(json_object_get(one, "functional"), json_object_get(three, "functional")));
    assert_true(json_equal(json_object_get(one, "gate"), json_object_get(three, "gate")));
    json_decref(one);
    json_decref(three);
}

/* --weight-cache: a replay through a cold and then a warm cache publishes
 * the results.json and hbm.bin of a replay without one (volatile keys
 * aside), and the cold one filled the cache. */
static void test_weight_cache_same_result(void **state)
{
    (void)state;
    struct plena_replay_opts o = example_opts();
    char hbm[300], cache[300];
    snprintf(hbm, sizeof hbm, "%s/example_e8k2_t4_l0/hbm.bin", plena_test_tmp);
    snprintf(cache, sizeof cache, "%s/wcache", plena_test_tmp);
    json_t *plain = replay_example(&o, NULL);
    plena_replay_strip_volatile(plain);
    char *want = NULL;
    size_t wl = 0;
    struct plena_err err;
    assert_int_equal(plena_file_read_all(hbm, &want, &wl, &err), 0);
    o.weight_cache = cache;
    for (int warm = 0; warm < 2; warm++) {
        json_t *r = replay_example(&o, NULL);
        plena_replay_strip_volatile(r);
        assert_true(json_equal(r, plain));
        json_decref(r);
        char *got = NULL;
        size_t gl = 0;
        assert_int_equal(plena_file_read_all(hbm, &got, &gl, &err), 0);
        assert_int_equal(gl, wl);
        assert_memory_equal(got, want, wl);
        plena_free(got);
        assert_true(plena_test_dir_count(cache, ".mx") > 0);
    }
    plena_free(want);
    json_decref(plain);
}

static const struct CMUnitTest tests[] = {
    PLENA_TEST_IN_TMP(test_example_passes_numerical_gate),
    PLENA_TEST_IN_TMP(test_zero_weights_are_smoke),
    PLENA_TEST_IN_TMP(test_flipped_output_element_fails),
    PLENA_TEST_IN_TMP(test_altered_id_fails_routing_integrity),
    PLENA_TEST_IN_TMP(test_overlap_issue_model),
    cmocka_unit_test(test_shared_only_split_and_rounding),
    PLENA_TEST_IN_TMP(test_stopped_replay),
    PLENA_TEST_IN_TMP(test_batch_stops_running_trace),
    PLENA_TEST_IN_TMP(test_missing_dump_fails),
    PLENA_TEST_IN_TMP(test_repeat_gate),
    PLENA_TEST_IN_TMP(test_threads_same_functional),
    PLENA_TEST_IN_TMP(test_weight_cache_same_result),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
