/* Timing gates (docs/timing.md "Timing gates"): the pure evaluator with
 * synthetic failing inputs, the full run at defaults, and every perturbation
 * that must make a gate fail, through the CLI (named gate false, summary
 * passed false, exit 1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/test_support.h"
#include "run/gates.h"

/* A passing case set with the reference figures (docs/timing.md "Timing gates"). */
static void baseline(struct plena_gate_case c[PLENA_GATE_CASE_COUNT],
                     struct plena_gate_repeat rp[4])
{
    static const struct {
        const char *name;
        uint64_t cycles, serial, rd;
        uint64_t instr;
        int overlap;
    } t[PLENA_GATE_CASE_COUNT] = {
        {"g1_continuous_prefetch_v", 1717, 1717, 32768, 135, 0},
        {"g1_sparse_cross_region_prefetch_v", 1997, 1997, 32768, 135, 0},
        {"g1_random_order_prefetch_v", 1950, 1950, 32768, 135, 0},
        {"g1_row_hit_repeat_prefetch_v", 1615, 1615, 32768, 135, 0},
        {"g2_prefetch_only", 40, 40, 512, 9, 0},
        {"g2_compute_only", 6400, 6400, 0, 100, 0},
        {"g2_prefetch_then_compute", 6440, 6440, 512, 109, 0},
        {"g2_prefetch_then_compute_overlap_on", 6408, 6440, 512, 109, 1},
        {"g5_single_m_mv", 64, 64, 0, 1, 0},
        {"g5_single_m_mm", 64, 64, 0, 1, 0},
    };
    memset(c, 0, sizeof(*c) * PLENA_GATE_CASE_COUNT);
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++) {
        snprintf(c[i].name, sizeof c[i].name, "%s", t[i].name);
        c[i].ran = 1;
        c[i].overlap = t[i].overlap;
        c[i].mlen = 64;
        c[i].sim_cycles = t[i].cycles;
        c[i].serial_cycles = t[i].serial;
        c[i].bytes_read = c[i].prof_bytes_read = t[i].rd;
        c[i].instructions_executed = c[i].prof_instructions_executed =
            c[i].prof_stage_instructions_sum = t[i].instr;
        c[i].prof_simulation_cycles = c[i].prof_profiled_cycles = t[i].serial;
        c[i].prof_simulation_picos = c[i].prof_profiled_picos = c[i].prof_stage_picos_sum =
            t[i].serial * 1000;
        snprintf(c[i].profile_sha256, 65, "%064d", i);
    }
    memset(rp, 0, sizeof(*rp) * 4);
    for (int k = 0; k < 4; k++) {
        int i = k < 2 ? 2 : 7;
        snprintf(rp[k].name, sizeof rp[k].name, "%s", c[i].name);
        rp[k].threads = k % 2 ? 4 : 1;
        rp[k].ran = 1;
        rp[k].profile_identical = 1;
        rp[k].sim_cycles = c[i].sim_cycles;
        rp[k].serial_cycles = c[i].serial_cycles;
        rp[k].bytes_read = c[i].bytes_read;
        memcpy(rp[k].profile_sha256, c[i].profile_sha256, 65);
    }
}

static int check_passed(const struct plena_gate_result *g, const char *check)
{
    for (size_t i = 0; i < g->n_checks; i++)
        if (!strcmp(g->checks[i].name, check)) return g->checks[i].passed;
    fail_msg("check %s missing from %s", check, g->name);
    return -1;
}

static void eval(struct plena_gate_case *c, struct plena_gate_repeat *rp,
                 struct plena_gate_result *g)
{
    plena_gates_timing_evaluate(c, PLENA_GATE_CASE_COUNT, rp, 4, g);
}

static void test_eval_baseline_passes(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    eval(c, rp, g);
    for (int i = 0; i < PLENA_GATE_COUNT; i++) {
        assert_string_equal(g[i].name, plena_gate_names[i]);
        assert_true(g[i].passed);
    }
    struct plena_buf b;
    plena_buf_init(&b);
    plena_gates_format_line(&g[1], &b);
    assert_non_null(strstr(b.data, "PASS g2_prefetch_compute_overlap "));
    assert_non_null(strstr(b.data, " serial_hidden=0"));
    assert_non_null(strstr(b.data, " overlay_hidden=32"));
    plena_buf_free(&b);
}

static void test_eval_unequal_bytes(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    c[1].bytes_read = c[1].prof_bytes_read = 32832;
    eval(c, rp, g);
    assert_false(g[0].passed);
    assert_false(check_passed(&g[0], "same_hbm_read_bytes"));
    assert_true(check_passed(&g[0], "sparse_gt_continuous"));
    /* overlap_on reading other bytes than combined */
    baseline(c, rp);
    c[7].bytes_read = c[7].prof_bytes_read = 576;
    eval(c, rp, g);
    assert_false(check_passed(&g[1], "equal_bytes"));
    struct plena_buf b;
    plena_buf_init(&b);
    plena_gates_format_line(&g[1], &b);
    assert_non_null(strstr(b.data, "FAIL g2_prefetch_compute_overlap equal_bytes "));
    plena_buf_free(&b);
}

static void test_eval_serial_hidden_one(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    c[4].sim_cycles = 41; /* prefetch_only + compute_only - combined = 1 */
    eval(c, rp, g);
    assert_false(g[1].passed);
    assert_false(check_passed(&g[1], "serial_hidden_zero"));
    assert_true(check_passed(&g[1], "overlay_hidden_positive"));
}

static void test_eval_overlay_hidden_zero(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    c[7].sim_cycles = 6440;
    rp[2].sim_cycles = rp[3].sim_cycles = 6440;
    eval(c, rp, g);
    assert_false(g[1].passed);
    assert_false(check_passed(&g[1], "overlay_hidden_positive"));
    assert_false(check_passed(&g[1], "overlap_on_lt_combined"));
    assert_true(check_passed(&g[1], "serial_hidden_zero"));
}

static void test_eval_profile_off_by_one_cycle(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    c[5].prof_profiled_cycles = 6401;
    eval(c, rp, g);
    assert_false(g[3].passed);
    assert_false(check_passed(&g[3], "profiled_cycles_eq_simulation_cycles"));
    for (int i = 0; i < PLENA_GATE_COUNT; i++)
        if (i != 3) assert_true(g[i].passed);
}

static void test_eval_profile_bytes_off_by_64(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    c[6].prof_bytes_read = 576;
    eval(c, rp, g);
    assert_false(g[3].passed);
    assert_false(check_passed(&g[3], "profile_bytes_eq_run_stats"));
    assert_true(check_passed(&g[3], "profiled_cycles_eq_simulation_cycles"));
}

static void test_eval_repeat_and_missing(void **state)
{
    (void)state;
    struct plena_gate_case c[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat rp[4];
    struct plena_gate_result g[PLENA_GATE_COUNT];
    baseline(c, rp);
    rp[3].profile_identical = 0;
    eval(c, rp, g);
    assert_false(check_passed(&g[4], "identical_profile_sha256"));
    baseline(c, rp);
    c[8].ran = 0;
    eval(c, rp, g);
    assert_false(g[2].passed);
    assert_false(check_passed(&g[2], "case_ran"));
    assert_false(g[3].passed);
}

static int run_cli(const char *args, const char *out_dir)
{
    const char *bin = getenv("PLENA_BIN");
    assert_non_null(bin);
    return plena_test_sh("'%s' gates timing --out '%s' %s >'%s.stdout' 2>'%s.stderr'", bin, out_dir,
                         args, out_dir, out_dir);
}

static json_t *summary(const char *out_dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/timing_gates_summary.json", out_dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    assert_non_null(j);
    return j;
}

/* SIGINT (the stop flag set): no verdict and no summary, PLENA_E_INTERRUPTED */
static void test_run_stopped(void **state)
{
    (void)state;
    char out[512], sum[600];
    snprintf(out, sizeof out, "%s/stopped", plena_test_tmp);
    volatile sig_atomic_t stop = 1;
    struct plena_gates_opts o = {out, NULL, 0, 1, &stop};
    static struct plena_gates_report r;
    struct plena_err err = {0};
    assert_int_equal(plena_gates_timing_run(&o, &r, &err), PLENA_E_INTERRUPTED);
    assert_int_equal(err.code, PLENA_E_INTERRUPTED);
    snprintf(sum, sizeof sum, "%s/timing_gates_summary.json", out);
    assert_int_not_equal(access(sum, F_OK), 0);
}

static void test_run_defaults_pass(void **state)
{
    (void)state;
    char out[512];
    snprintf(out, sizeof out, "%s/defaults", plena_test_tmp);
    struct plena_gates_opts o = {out, NULL, 0, 1, NULL};
    static struct plena_gates_report r;
    assert_int_equal(plena_gates_timing_run(&o, &r, NULL), 0);
    for (int i = 0; i < PLENA_GATE_COUNT; i++)
        assert_true(r.gates[i].passed);
    assert_true(r.passed);
    assert_int_equal(plena_gates_status(&r), PLENA_OK);
    /* the reference case figures */
    static const uint64_t want[PLENA_GATE_CASE_COUNT] = {1717, 1997, 1950, 1615, 40,
                                                         6400, 6440, 6408, 64,   64};
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++)
        assert_int_equal(r.cases[i].sim_cycles, want[i]);
    json_t *j = summary(out);
    assert_true(json_is_true(json_object_get(j, "passed")));
    const char *keys[] = {"schema_version", "output_root", "hardware", "settings_overrides",
                          "cases",          "gates",       "passed"};
    void *it = json_object_iter(j);
    for (size_t i = 0; i < 7; i++, it = json_object_iter_next(j, it))
        assert_string_equal(json_object_iter_key(it), keys[i]);
    json_decref(j);
    /* the case directory holds every artifact */
    const char *files[] = {"program.asm",    "program.mem",       "plena_settings.toml",
                           "hbm.bin",        "fp_sram.bin",       "int_sram.bin",
                           "run_stats.json", "stage_profile.json"};
    for (size_t i = 0; i < 8; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/cases/g2_prefetch_only/%s", out, files[i]);
        FILE *f = fopen(p, "rb");
        assert_non_null(f);
        fclose(f);
    }
    assert_int_equal(run_cli("", out), 0);
}

static void perturb(const char *set, const char *gate)
{
    char out[512], args[256];
    snprintf(out, sizeof out, "%s/%s", plena_test_tmp, gate);
    snprintf(args, sizeof args, "--set %s", set);
    assert_int_equal(run_cli(args, out), 1);
    json_t *j = summary(out);
    assert_true(json_is_false(json_object_get(j, "passed")));
    json_t *g = json_object_get(json_object_get(j, "gates"), gate);
    assert_true(json_is_false(json_object_get(g, "passed")));
    json_decref(j);
    char p[600];
    snprintf(p, sizeof p, "%s.stdout", out);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char line[2048], want[128];
    snprintf(want, sizeof want, "FAIL %s ", gate);
    int seen = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, want, strlen(want))) seen = 1;
    fclose(f);
    assert_true(seen);
}

/* --threads 3: the cases run on three threads, and the report (every case
 * figure, every profile hash, the repeats in case order) and the profiles
 * written are those of a serial run, byte for byte. */
static void test_threads_identical(void **state)
{
    (void)state;
    char out1[512], out3[512];
    snprintf(out1, sizeof out1, "%s/threads1", plena_test_tmp);
    snprintf(out3, sizeof out3, "%s/threads3", plena_test_tmp);
    struct plena_gates_opts o1 = {out1, NULL, 0, 1, NULL}, o3 = {out3, NULL, 0, 3, NULL};
    static struct plena_gates_report r1, r3;
    assert_int_equal(plena_gates_timing_run(&o1, &r1, NULL), 0);
    assert_int_equal(plena_gates_timing_run(&o3, &r3, NULL), 0);
    assert_int_equal(r1.n_reps, 4);
    assert_int_equal(r3.n_reps, r1.n_reps);
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++) {
        assert_string_equal(r3.cases[i].name, r1.cases[i].name);
        assert_int_equal(r3.cases[i].sim_cycles, r1.cases[i].sim_cycles);
        assert_int_equal(r3.cases[i].bytes_read, r1.cases[i].bytes_read);
        assert_string_equal(r3.cases[i].profile_sha256, r1.cases[i].profile_sha256);
        char p1[700], p3[700];
        snprintf(p1, sizeof p1, "%s/cases/%s/stage_profile.json", out1, r1.cases[i].name);
        snprintf(p3, sizeof p3, "%s/cases/%s/stage_profile.json", out3, r3.cases[i].name);
        plena_test_assert_same_files(p1, p3);
    }
    for (size_t k = 0; k < r1.n_reps; k++) {
        assert_string_equal(r3.reps[k].name, r1.reps[k].name);
        assert_int_equal(r3.reps[k].threads, r1.reps[k].threads);
        assert_string_equal(r3.reps[k].profile_sha256, r1.reps[k].profile_sha256);
    }
    for (int g = 0; g < PLENA_GATE_COUNT; g++)
        assert_int_equal(r3.gates[g].passed, r1.gates[g].passed);
}

static void test_perturb_g5(void **state)
{
    (void)state;
    perturb("LATENCY.SYSTOLIC_PROCESSING_OVERHEAD=1", "g5_matrix_formula_self_consistency");
}
static void test_perturb_g2_ncl(void **state)
{
    (void)state;
    perturb("HBM.nCL=8", "g2_prefetch_compute_overlap");
}
static void test_perturb_g1(void **state)
{
    (void)state;
    perturb("HBM.ROW_IDLE_CLOSE=0", "g1_hbm_address_sensitivity");
}
static void test_perturb_g2_ideal(void **state)
{
    (void)state;
    perturb("HBM.MODEL=ideal", "g2_prefetch_compute_overlap");
}

static void test_usage_errors(void **state)
{
    (void)state;
    char out[512];
    snprintf(out, sizeof out, "%s/usage", plena_test_tmp);
    assert_int_equal(run_cli("--set NOPE.X=1", out), 2);
    assert_int_equal(run_cli("--frobnicate", out), 2);
    assert_int_equal(run_cli("--threads 0", out), 2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_eval_baseline_passes),
    cmocka_unit_test(test_eval_unequal_bytes),
    cmocka_unit_test(test_eval_serial_hidden_one),
    cmocka_unit_test(test_eval_overlay_hidden_zero),
    cmocka_unit_test(test_eval_profile_off_by_one_cycle),
    cmocka_unit_test(test_eval_profile_bytes_off_by_64),
    cmocka_unit_test(test_eval_repeat_and_missing),
    cmocka_unit_test(test_run_defaults_pass),
    cmocka_unit_test(test_run_stopped),
    cmocka_unit_test(test_threads_identical),
    cmocka_unit_test(test_perturb_g5),
    cmocka_unit_test(test_perturb_g2_ncl),
    cmocka_unit_test(test_perturb_g1),
    cmocka_unit_test(test_perturb_g2_ideal),
    cmocka_unit_test(test_usage_errors),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), plena_test_tmp_setup,
                           plena_test_tmp_teardown);
}
