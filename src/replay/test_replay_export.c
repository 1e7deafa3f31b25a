/* Run-level exports (docs/replay.md "Exports"; upstream defects 19, 31):
 * zero-row exports keep their headers, a result missing a field is an error
 * naming the file, rows are sorted by the key of docs/replay.md "Exports", directories without a
 * result are listed as skipped, --passed-only filters failures, and a run
 * without routing-tax figures gives an empty (null) cell, never a crash. */
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
#include "common/test_support.h"
#include "replay/export.h"
#include "replay/jsonw.h"
#include "replay/result.h"

static char *slurp(const char *name)
{
    return plena_test_read_file(plena_test_tmp, name, NULL);
}

/* a minimal complete result: every summary column present */
static json_t *make_result(const char *id, const char *bench, int sample_index, int layer,
                           int passed, const char *kind)
{
    json_t *s = json_object();
    for (size_t i = 0; i < plena_replay_n_summary_cols; i++)
        json_object_set_new(s, plena_replay_summary_cols[i], json_null());
    json_object_set_new(s, "trace_id", json_string(id));
    json_object_set_new(s, "benchmark", json_string(bench));
    json_object_set_new(s, "sample_index", json_integer(sample_index));
    json_object_set_new(s, "sample_id", json_string("s"));
    json_object_set_new(s, "phase", json_string("prefill"));
    json_object_set_new(s, "layer", json_integer(layer));
    json_object_set_new(s, "gate_passed", json_boolean(passed));
    json_object_set_new(s, "issue_model", json_string("serial"));
    json_object_del(s, "result_path");
    json_t *st = json_object();
    for (size_t i = 1; i < plena_replay_n_stage_cols; i++)
        json_object_set_new(st, plena_replay_stage_cols[i], json_integer(0));
    json_object_set_new(st, "stage", json_string("gather"));
    json_object_set_new(st, "branch", json_string("combine"));
    json_t *tax = json_pack("{s:s,s:I,s:I,s:f}", "method", "stage_derived", "routing_tax_picos",
                            (json_int_t)1500, "routing_tax_cycles", (json_int_t)2,
                            "routing_tax_fraction", 0.25);
    return json_pack("{s:i,s:s,s:o,s:[o],s:n,s:o,s:{s:b,s:s}}", "schema_version", 1, "result_kind",
                     "plena.replay", "summary", s, "stages", st, "shared_vs_routed", "routing_tax",
                     tax, "gate", "passed", passed, "kind", kind);
}

static void put_result(const char *dir, json_t *r)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", plena_test_tmp, dir);
    mkdir(p, 0755);
    assert_int_equal(plena_replay_result_publish(p, r, NULL), 0);
    json_decref(r);
}

static void test_zero_rows_have_headers(void **state)
{
    (void)state;
    struct plena_replay_export_counts c;
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, &c, NULL), 0);
    char *s = slurp("summary.csv");
    assert_non_null(s);
    assert_true(!strncmp(s, "trace_id,benchmark,model,sample_id,", 35));
    assert_non_null(strstr(s, ",gate_passed,fingerprint,result_path\n"));
    assert_int_equal(strchr(s, '\n')[1], 0); /* exactly one line */
    plena_free(s);
    s = slurp("routing_tax.csv");
    assert_string_equal(s, "trace_id,method,routing_tax_picos,routing_tax_cycles,"
                           "routing_tax_fraction,delta_cycles,delta_hbm_bytes_read,"
                           "delta_hbm_bytes_written\n");
    plena_free(s);
    s = slurp("stages.csv");
    assert_non_null(s);
    plena_free(s);
    s = slurp("shared_vs_routed.csv");
    assert_true(!strncmp(s, "trace_id,benchmark,phase,layer,token_count,shared_picos,", 56));
    plena_free(s);
    json_t *j;
    char p[256];
    snprintf(p, sizeof p, "%s/replay_summary.json", plena_test_tmp);
    assert_int_equal(plena_replay_json_read_file(p, &j, NULL), 0);
    assert_int_equal(json_array_size(json_object_get(j, "runs")), 0);
    json_decref(j);
}

static void test_sorted_skipped_and_filtered(void **state)
{
    (void)state;
    put_result("b_dir", make_result("t_b", "bench", 2, 0, 1, "numerical"));
    put_result("a_dir", make_result("t_a", "bench", 10, 0, 0, "numerical"));
    put_result("c_dir", make_result("t_c", "bench", 2, 1, 1, "zero_input_smoke"));
    put_result("d_dir", make_result("t_d", "alpha", 99, 0, 1, "numerical"));
    char p[256];
    snprintf(p, sizeof p, "%s/empty_dir", plena_test_tmp);
    mkdir(p, 0755);
    struct plena_replay_export_counts c;
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, &c, NULL), 0);
    assert_int_equal(c.passed_numerical, 2);
    assert_int_equal(c.passed_smoke, 1);
    assert_int_equal(c.failed, 1);
    assert_int_equal(c.skipped, 1);
    assert_int_equal(c.exported, 4);
    char *s = slurp("summary.csv");
    /* order: alpha first (benchmark), then sample_index 2 (layer 0, 1), then 10 */
    char *a = strstr(s, "\nt_d,"), *b = strstr(s, "\nt_b,"), *cc = strstr(s, "\nt_c,"),
         *d = strstr(s, "\nt_a,");
    assert_true(a && b && cc && d && a < b && b < cc && cc < d);
    assert_non_null(strstr(s, ",b_dir/results.json\n"));
    plena_free(s);
    s = slurp("routing_tax.csv");
    assert_non_null(strstr(s, "\nt_b,stage_derived,1500,2,0.25,,,\n"));
    plena_free(s);
    s = slurp("replay_summary.json");
    assert_non_null(strstr(s, "\"build_dir\": \"empty_dir\""));
    plena_free(s);

    assert_int_equal(plena_replay_export(plena_test_tmp, 1, &c, NULL), 0);
    assert_int_equal(c.exported, 3);
    s = slurp("summary.csv");
    assert_null(strstr(s, "\nt_a,"));
    plena_free(s);
}

/* export file `name` contains needle */
static void file_has(const char *name, const char *needle)
{
    char *s = slurp(name);
    assert_non_null(s);
    assert_non_null(strstr(s, needle));
    plena_free(s);
}

/* a result of trace t_r with routing `mode` and run figures (cycles, read, written) */
static json_t *routed_result(const char *mode, int cycles, int rd, int wr, const char *seed)
{
    json_t *r = make_result("t_r", "bench", 0, 0, 1, "numerical");
    json_object_set_new(r, "trace", json_pack("{s:s}", "trace_sha256", "abc"));
    json_object_set_new(r, "inputs",
                        json_pack("{s:s,s:s,s:s,s:b}", "fingerprint", mode, "routing_mode", mode,
                                  "weight_seed", seed, "pruned_inputs", 0));
    json_object_set_new(r, "run",
                        json_pack("{s:i,s:i,s:i}", "sim_latency_cycles", cycles, "hbm_bytes_read",
                                  rd, "hbm_bytes_written", wr));
    json_object_set_new(json_object_get(r, "summary"), "routing_mode", json_string(mode));
    return r;
}

/* device_minus_fixed (docs/replay.md "Routing tax"): TRACE_ID.device minus TRACE_ID of the same
 * trace and options, row after the device run's stage_derived one; null deltas
 * when the fixed result is missing or was run with other options */
static void test_device_minus_fixed(void **state)
{
    (void)state;
    put_result("t_r", routed_result("fixed", 1000, 500, 64, "1"));
    put_result("t_r.device", routed_result("device", 1234, 400, 96, "1"));
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, NULL, NULL), 0);
    file_has("routing_tax.csv", "\nt_r,stage_derived,1500,2,0.25,,,\n"
                                "t_r,stage_derived,1500,2,0.25,,,\n"
                                "t_r,device_minus_fixed,,,,234,-100,32\n");
    file_has("replay_summary.json", "\"fixed_result\": \"t_r\"");

    /* the fixed run with another weight seed is not the pair: null, no crash */
    put_result("t_r", routed_result("fixed", 1000, 500, 64, "2"));
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, NULL, NULL), 0);
    file_has("routing_tax.csv", "\nt_r,device_minus_fixed,,,,,,\n");

    /* only the device run: null deltas */
    char p[256];
    snprintf(p, sizeof p, "%s/t_r", plena_test_tmp);
    assert_int_equal(plena_test_rmtree(p), 0);
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, NULL, NULL), 0);
    file_has("routing_tax.csv", "\nt_r,device_minus_fixed,,,,,,\n");
    file_has("replay_summary.json", "\"fixed_result\": null");
}

static void test_missing_field_names_file(void **state)
{
    (void)state;
    json_t *r = make_result("t_x", "bench", 0, 0, 1, "numerical");
    json_object_del(json_object_get(r, "summary"), "sim_latency_cycles");
    put_result("x_dir", r);
    struct plena_err e;
    plena_err_clear(&e);
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, NULL, &e), PLENA_E_INPUT);
    assert_non_null(strstr(e.where, "x_dir/results.json"));
    assert_non_null(strstr(e.msg, "summary.sim_latency_cycles"));

    /* unknown schema version is an error too */
    r = make_result("t_x", "bench", 0, 0, 1, "numerical");
    json_object_set_new(r, "schema_version", json_integer(7));
    put_result("x_dir", r);
    plena_err_clear(&e);
    assert_int_equal(plena_replay_export(plena_test_tmp, 0, NULL, &e), PLENA_E_INPUT);
    assert_non_null(strstr(e.msg, "schema_version"));
}

static const struct CMUnitTest tests[] = {
    PLENA_TEST_IN_TMP(test_zero_rows_have_headers),
    PLENA_TEST_IN_TMP(test_sorted_skipped_and_filtered),
    PLENA_TEST_IN_TMP(test_missing_field_names_file),
    PLENA_TEST_IN_TMP(test_device_minus_fixed),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
