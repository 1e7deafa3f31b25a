/* Trace sets, writer numbers, replay tier and generator statistics
 * (docs/formats.md "Conventions", docs/replay.md "Replay tier", docs/cli.md
 * "plena trace gen"):
 * - the trace writer applies the binary32 rule to route weights;
 * - canonical set order on hand-made keys;
 * - R001 / R006 fixtures made from the complete example of docs/trace-schema.md;
 * - the stored golden of `trace gen --model tiny-route-32x4 --tokens 16
 *   --dist zipf:1.2 --seed 7` (a REGRESSION golden: generated once by the code
 *   after its counts and weights were reviewed by hand; it pins the bytes,
 *   it does not prove them right);
 * - chi-square sanity of uniform and Zipf counts over 10^5 tokens;
 * - CLI: gen --layers/--out-dir, split/pack round trip, split refusing to
 *   overwrite, import exit codes (needs $PLENA_BIN; skipped without it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "trace/build.h"
#include "trace/gen.h"
#include "trace/trace.h"

static void test_route_weights_written_as_binary32(void **state)
{
    (void)state;
    /* the trace writer applies the binary32 rule (spellings are
     * tested in common/test_json.c): inside topk_weights/route_weights only */
    json_t *v = json_pack("{s:{s:[[f]]},s:f}", "routing", "topk_weights", (double)0.1f, "other",
                          (double)0.1f);
    struct plena_buf out;
    plena_buf_init(&out);
    assert_int_equal(plena_trace_json_write(&out, v, 0), 0);
    plena_buf_append(&out, "", 1);
    assert_string_equal(out.data, "{\"other\":0.10000000149011612,\"routing\":{\"topk_weights\":[["
                                  "0.1]]}}");
    plena_buf_free(&out);
    json_decref(v);
}

/* Trace sets: blank lines (spaces, tabs, CR only) are skipped but numbered;
 * the last line needs no '\n'. */
static void test_set_lines(void **state)
{
    (void)state;
    const char *text = "a\n \t\r\n\n{\"x\": 1}\r\nc";
    struct plena_trace_lines it = {text, strlen(text), 0, 0};
    const char *s;
    size_t n;
    assert_true(plena_trace_lines_next(&it, &s, &n));
    assert_int_equal(it.line, 1);
    assert_int_equal(n, 1);
    assert_memory_equal(s, "a", 1);
    assert_true(plena_trace_lines_next(&it, &s, &n));
    assert_int_equal(it.line, 4);
    assert_int_equal(n, 9); /* the CR stays: the JSON parser skips it */
    assert_memory_equal(s, "{\"x\": 1}\r", 9);
    assert_true(plena_trace_lines_next(&it, &s, &n));
    assert_int_equal(it.line, 5);
    assert_int_equal(n, 1);
    assert_memory_equal(s, "c", 1);
    assert_false(plena_trace_lines_next(&it, &s, &n));
    /* only blank lines, and nothing at all */
    struct plena_trace_lines blank = {"\n \n\r\n", 5, 0, 0}, none = {"", 0, 0, 0};
    assert_false(plena_trace_lines_next(&blank, &s, &n));
    assert_int_equal(blank.line, 3);
    assert_false(plena_trace_lines_next(&none, &s, &n));
}

static json_t *key_doc(const char *bench, int sidx, const char *sid, const char *phase, int step,
                       int layer, const char *id)
{
    json_t *w = json_pack("{s:s,s:s,s:s}", "benchmark", bench, "sample_id", sid, "phase", phase);
    if (sidx >= 0) json_object_set_new(w, "sample_index", json_integer(sidx));
    json_object_set_new(w, "decode_step", step > 0 ? json_integer(step) : json_null());
    return json_pack("{s:s,s:o,s:{s:i}}", "trace_id", id, "workload", w, "model", "layer_index",
                     layer);
}

static void test_canonical_order(void **state)
{
    (void)state;
    struct plena_trace_docs d = {0};
    /* Given in scrambled order; expected order by (benchmark, sample_index,
     * sample_id, phase prefill<decode<smoke<unknown, decode_step, layer,
     * trace_id), absent sample_index / null step first. */
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "unknown", 0, 0, "h"), "");
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "decode", 2, 0, "f"), "");
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "decode", 1, 3, "e"), "");
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "prefill", 0, 1, "d"), "");
    plena_trace_docs_add(&d, key_doc("a", 5, "z", "prefill", 0, 0, "c"), "");
    plena_trace_docs_add(&d, key_doc("a", 2, "z", "prefill", 0, 0, "b"), "");
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "decode", 1, 1, "e0"), "");
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "smoke", 0, 0, "g"), "");
    plena_trace_docs_add(&d, key_doc("a", -1, "zz", "decode", 0, 9, "a"), "");
    plena_trace_docs_add(&d, key_doc("b", -1, "s", "prefill", 0, 1, "c2"), "");
    plena_trace_docs_sort(&d);
    static const char *const want[] = {"a", "b", "c", "c2", "d", "e0", "e", "f", "g", "h"};
    assert_int_equal(d.n, 10);
    for (size_t i = 0; i < d.n; i++)
        assert_string_equal(d.v[i].trace_id, want[i]);
    plena_trace_docs_free(&d);
}

static void test_golden(void **state)
{
    (void)state;
    const struct plena_moe_model *m = plena_model_preset_find("tiny-route-32x4");
    assert_non_null(m);
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    o.model = m;
    o.seed = 7;
    o.tokens = 16;
    assert_int_equal(plena_trace_gen_parse_dist("zipf:1.2", &o, NULL), 0);
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_trace_gen(&o, &b, NULL), 0);
    char path[4096], *want;
    size_t n;
    struct plena_err err = {0};
    snprintf(path, sizeof path, "%s/src/trace/testdata/gen_zipf1.2_seed7_router.json",
             PLENA_SOURCE_DIR);
    assert_int_equal(plena_file_read_all(path, &want, &n, &err), 0);
    assert_int_equal(b.len, n);
    assert_memory_equal(b.data, want, n);
    plena_free(want);
    plena_buf_free(&b);
}

/* Counts of one generated trace of T tokens. */
static void gen_counts(uint32_t E, uint32_t K, const char *dist, uint32_t T, int64_t *counts)
{
    struct plena_moe_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "chi");
    m.hidden = 64;
    m.moe_inter = 64;
    m.num_experts = E;
    m.top_k = K;
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    o.model = &m;
    o.seed = 12345;
    o.tokens = T;
    assert_int_equal(plena_trace_gen_parse_dist(dist, &o, NULL), 0);
    json_t *t;
    assert_int_equal(plena_trace_gen_tree(&o, &t, NULL), 0);
    const json_t *c = json_object_get(json_object_get(t, "routing"), "expert_counts");
    for (uint32_t e = 0; e < E; e++)
        counts[e] = json_integer_value(json_array_get(c, e));
    json_decref(t);
}

/* Pearson chi-square against expected shares p (sum 1) of n slots. The
 * bound 60 for 15 degrees of freedom is loose on purpose: P(chi2_15 > 60) is
 * about 2e-7, so only a broken sampler (wrong weights, off-by-one id, a
 * biased bounded()) exceeds it; it is a sanity check, not a test of quality.
 * With a fixed seed the value is deterministic anyway. */
static double chi2(const int64_t *c, const double *p, size_t E, double n)
{
    double x = 0;
    for (size_t e = 0; e < E; e++) {
        double mu = n * p[e];
        x += ((double)c[e] - mu) * ((double)c[e] - mu) / mu;
    }
    return x;
}

static void test_chi_square(void **state)
{
    (void)state;
    enum { E = 16, T = 100000 };
    int64_t c[E];
    double p[E];
    /* uniform, K = 2 without replacement: each expert has share 1/E of the slots */
    gen_counts(E, 2, "uniform", T, c);
    for (int e = 0; e < E; e++)
        p[e] = 1.0 / E;
    double x = chi2(c, p, E, 2.0 * T);
    print_message("uniform chi2 = %g (15 dof)\n", x);
    assert_true(x < 60);
    /* zipf:1.2 with K = 1: one weighted draw per token, p_e = (e+1)^-1.2 / sum */
    gen_counts(E, 1, "zipf:1.2", T, c);
    double z = 0;
    for (int e = 0; e < E; e++)
        z += pow(e + 1, -1.2);
    for (int e = 0; e < E; e++)
        p[e] = pow(e + 1, -1.2) / z;
    x = chi2(c, p, E, T);
    print_message("zipf:1.2 chi2 = %g (15 dof)\n", x);
    assert_true(x < 60);
    /* and it is skewed: expert 0 gets more than expert 15 by far */
    assert_true(c[0] > 10 * c[15]);
}

/* ---- CLI ---- */

static char dir[64];

/* Runs `plena ARGS` in dir (stdout to out.txt, stderr to err.txt). */
static int run(const char *args)
{
    return plena_test_sh("cd %s && '%s' %s >out.txt 2>err.txt", dir, getenv("PLENA_BIN"), args);
}

static char *slurp(const char *name, size_t *n)
{
    return plena_test_read_file(dir, name, n);
}

static void test_cli_split_pack(void **state)
{
    (void)state;
    if (!plena_test_bin()) skip();
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "trace_set"), 0);
    /* 2 layers x 2 samples -> a set of 4 in canonical order */
    assert_int_equal(run("trace gen --model tiny-route-32x4 --tokens 5 --dist uniform --seed 3 "
                         "--layers 0,2 --samples 2 --route-weights random --out s.jsonl"),
                     0);
    size_t n1, n2;
    char *a = slurp("s.jsonl", &n1);
    assert_non_null(a);
    size_t lines = 0;
    for (size_t i = 0; i < n1; i++)
        lines += a[i] == '\n';
    assert_int_equal(lines, 4);
    assert_int_equal(run("trace split s.jsonl --out-dir parts"), 0);
    assert_int_equal(run("trace pack parts/syn_uniform_tiny-route-32x4_t5_s3_n1_l2.json "
                         "parts/syn_uniform_tiny-route-32x4_t5_s3_n0_l0.json "
                         "parts/syn_uniform_tiny-route-32x4_t5_s3_n1_l0.json "
                         "parts/syn_uniform_tiny-route-32x4_t5_s3_n0_l2.json --out s2.jsonl"),
                     0);
    char *b = slurp("s2.jsonl", &n2);
    assert_non_null(b);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1); /* split then pack is byte-identical */
    plena_free(b);
    /* split refuses to overwrite, --force overwrites */
    assert_int_equal(run("trace split s.jsonl --out-dir parts"), 4);
    assert_int_equal(run("trace split s.jsonl --out-dir parts --force"), 0);
    /* pack of a repeated trace: V100 */
    assert_int_equal(run("trace pack s.jsonl parts/syn_uniform_tiny-route-32x4_t5_s3_n1_l2.json "
                         "--out s3.jsonl"),
                     1);
    /* gen --out-dir: one pretty file per trace, equal to the split files */
    assert_int_equal(run("trace gen --model tiny-route-32x4 --tokens 5 --dist uniform --seed 3 "
                         "--layers 2 --samples 2 --route-weights random --out-dir g"),
                     0);
    char *g = slurp("g/syn_uniform_tiny-route-32x4_t5_s3_n1_l2.json", &n1);
    char *p = slurp("parts/syn_uniform_tiny-route-32x4_t5_s3_n1_l2.json", &n2);
    assert_non_null(g);
    assert_non_null(p);
    assert_int_equal(n1, n2);
    assert_memory_equal(g, p, n1);
    plena_free(g);
    plena_free(p);
    plena_free(a);
    /* --timestamp adds created_at_utc (and the trace still validates) */
    assert_int_equal(run("trace gen --model tiny-route-32x4 --tokens 2 --dist uniform --seed 3 "
                         "--timestamp --out ts.json"),
                     0);
    assert_true(plena_test_file_contains(dir, "ts.json", "\"created_at_utc\": \"20"));
    assert_int_equal(run("trace validate ts.json"), 0);
    /* --hot-ids: the hot set is exactly these experts */
    /* F = 1 puts all mass on the 5 hot experts; K = 4 of them per token */
    assert_int_equal(run("trace gen --model tiny-route-32x4 --tokens 200 --dist hot:5:1 --seed 3 "
                         "--hot-ids 1,7,9,20,30 --out hot.json"),
                     0);
    assert_true(plena_test_file_contains(dir, "hot.json", "\"active_experts\": [1, 7, 9, 20, 30]"));
    assert_int_equal(run("trace gen --model tiny-route-32x4 --tokens 2 --dist hot:5:1 --seed 3 "
                         "--hot-ids 1,7 --out hot.json"),
                     2);
}

static void test_cli_import(void **state)
{
    (void)state;
    if (!plena_test_bin()) skip();
    plena_test_write_text(dir, "e8k2.json",
                          "{\"hidden_size\": 64, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
                          "\"moe_intermediate_size\": 64}");
    plena_test_write_text(dir, "r.csv",
                          "sample_id,layer,phase,decode_step,token,slot,expert\n"
                          "s0,0,prefill,,0,0,1\ns0,0,prefill,,0,1,2\n"
                          "s1,0,prefill,,0,0,1\ns1,0,prefill,,0,1,9\n");
    /* the bad record stops the import: input error */
    assert_int_equal(run("trace import --from csv r.csv --model ./e8k2.json "
                         "--allow-uniform-weights --out x.jsonl"),
                     3);
    char *e = slurp("err.txt", NULL);
    assert_non_null(strstr(e, "r.csv:5: column expert: expert id 9 outside 0..7"));
    plena_free(e);
    /* --keep-going: the good trace is written, exit 1 */
    assert_int_equal(run("trace import --from csv r.csv --model ./e8k2.json "
                         "--allow-uniform-weights --keep-going --out-dir imp"),
                     1);
    char *a = slurp("imp/csv_s0_l0_prefill.json", NULL);
    assert_non_null(a);
    plena_free(a);
    assert_int_equal(run("trace validate imp/csv_s0_l0_prefill.json"), 0);
    /* raw int16 through the CLI; --raw needs --phase */
    static const unsigned char raw[4] = {3, 0, 1, 0};
    plena_test_write_file(dir, "ids.bin", raw, sizeof raw);
    assert_int_equal(run("trace import --from vllm --raw ids.bin --shape 1,1,2 --dtype int16 "
                         "--model ./e8k2.json --allow-uniform-weights"),
                     2);
    assert_int_equal(run("trace import --from vllm --raw ids.bin --shape 1,1,2 --dtype int16 "
                         "--phase decode --model ./e8k2.json --allow-uniform-weights"),
                     0);
    assert_true(
        plena_test_file_contains(dir, "out.txt", "\"trace_id\": \"vllm_req0_l0_decode_d1\""));
    assert_int_equal(plena_test_rmtree(dir), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_route_weights_written_as_binary32),
    cmocka_unit_test(test_set_lines),
    cmocka_unit_test(test_canonical_order),
    cmocka_unit_test(test_golden),
    cmocka_unit_test(test_chi_square),
    cmocka_unit_test(test_cli_split_pack),
    cmocka_unit_test(test_cli_import),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
