/* Validator tests (docs/trace-schema.md "Validator findings"): the
 * unmodified complete example passes; one mutation of it per rule fails with
 * exactly that code and path; parser robustness (bool-as-int, 2.0, duplicate
 * key, 1e400, int64 overflow, deep nesting, empty, garbage, [], null, "x");
 * trace sets (V100).
 * Expected codes and paths come from the documented tables, not from the code.
 * With PLENA_TRACE_DUMP_FIXTURES=DIR set, every mutated document is also
 * written there (used once to seed fuzz/corpus/trace_validate). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "trace/trace.h"
#include "common/test_support.h"

static char *example_text;
static size_t example_len;

static int setup(void **state)
{
    (void)state;
    struct plena_err err = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    if (plena_file_read_all(path, &example_text, &example_len, &err)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    plena_free(example_text);
    return 0;
}

/* Navigates "a.b[2][0]" to the parent container and the last key/index. */
static json_t *resolve_parent(json_t *root, const char *path, char *last_key, size_t *last_idx,
                              int *is_index)
{
    json_t *cur = root;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *p = buf;
    json_t *parent = NULL;
    while (*p) {
        parent = cur;
        if (*p == '[') {
            size_t i = strtoul(p + 1, &p, 10);
            p++; /* ']' */
            *is_index = 1;
            *last_idx = i;
            cur = json_array_get(cur, i);
        } else {
            if (*p == '.') p++;
            size_t n = strcspn(p, ".[");
            memcpy(last_key, p, n);
            last_key[n] = 0;
            p += n;
            *is_index = 0;
            cur = json_object_get(cur, last_key);
        }
        if (*p && !cur) return NULL;
    }
    return parent;
}

struct edit {
    const char *path;
    const char *json; /* NULL: delete */
};

static void apply(json_t *root, const struct edit *e)
{
    char key[128];
    size_t idx = 0;
    int is_index = 0;
    json_t *parent = resolve_parent(root, e->path, key, &idx, &is_index);
    assert_non_null(parent);
    if (!e->json) {
        if (is_index)
            json_array_remove(parent, idx);
        else
            json_object_del(parent, key);
        return;
    }
    json_error_t je;
    json_t *v = json_loads(e->json, JSON_DECODE_ANY, &je);
    assert_non_null(v);
    if (is_index)
        assert_int_equal(json_array_set_new(parent, idx, v), 0);
    else
        assert_int_equal(json_object_set_new(parent, key, v), 0);
}

static char *mutate(const struct edit *edits, size_t n_edits)
{
    json_error_t je;
    json_t *root = json_loadb(example_text, example_len, 0, &je);
    assert_non_null(root);
    for (size_t i = 0; i < n_edits; i++)
        apply(root, &edits[i]);
    char *s = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(root);
    return s;
}

static void dump_fixture(const char *name, const char *text, size_t len)
{
    const char *dir = getenv("PLENA_TRACE_DUMP_FIXTURES");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(text, 1, len, f);
        fclose(f);
    }
}

static void print_report(const struct plena_trace_report *r)
{
    for (size_t i = 0; i < r->n_errors; i++)
        fprintf(stderr, "  error %s at %s: %s\n", r->errors[i].code, r->errors[i].path,
                r->errors[i].message);
    for (size_t i = 0; i < r->n_warnings; i++)
        fprintf(stderr, "  warning %s at %s: %s\n", r->warnings[i].code, r->warnings[i].path,
                r->warnings[i].message);
}

/* A rule case: edits to the example, the one code expected and the path of
 * its first finding. `warning` cases expect a valid document with exactly
 * that warning (and, with --strict, that error). */
struct rule_case {
    const char *name;
    struct edit edits[6];
    const char *code;
    const char *path;
    int warning;
};

#define V1_EDITS                                                                                   \
    {"schema_version", "1"},                                                                       \
        {"artifacts", "{\"reference_pt\": \"r.pt\", \"l1_golden_pt\": \"g.pt\"}"},                 \
        {"replay.stage", "\"full_vram\""},                                                         \
    {                                                                                              \
        "replay.harness_module", "\"h\""                                                           \
    }

static const struct rule_case cases[] = {
    {"v003_version3", {{"schema_version", "3"}}, "V003", "schema_version", 0},
    {"v003_missing", {{"schema_version", NULL}}, "V003", "schema_version", 0},
    {"v004_pattern", {{"trace_id", "\"bad id!\""}}, "V004", "trace_id", 0},
    {"v004_empty", {{"trace_id", "\"\""}}, "V004", "trace_id", 0},
    {"v004_long",
     {{"trace_id",
       "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""}},
     "V004",
     "trace_id",
     0},
    {"v005_empty", {{"created_by", "\"\""}}, "V005", "created_by", 0},
    {"v005_missing", {{"created_by", NULL}}, "V005", "created_by", 0},
    {"v006_feb30", {{"created_at_utc", "\"2026-02-30T10:00:00Z\""}}, "V006", "created_at_utc", 0},
    {"v006_format", {{"created_at_utc", "\"2026-01-05 10:00:00\""}}, "V006", "created_at_utc", 0},
    {"v007_no_replay", {{"replay", NULL}}, "V007", "replay", 0},
    {"v007_model_string", {{"model", "\"x\""}}, "V007", "model", 0},
    {"v007_routing_array", {{"routing", "[]"}}, "V007", "routing", 0},
    {"v008_bool", {{"model.hidden_size", "true"}}, "V008", "model.hidden_size", 0},
    {"v008_real", {{"model.layer_index", "2.0"}}, "V008", "model.layer_index", 0},
    {"v008_string", {{"replay.emu_threads", "\"2\""}}, "V008", "replay.emu_threads", 0},
    {"v008_id_bool",
     {{"routing.topk_indices[0][1]", "true"}},
     "V008",
     "routing.topk_indices[0][1]",
     0},
    {"v010_layer", {{"model.layer_index", "65536"}}, "V010", "model.layer_index", 0},
    {"v010_name", {{"model.name", "\"\""}}, "V010", "model.name", 0},
    {"v010_inter", {{"model.intermediate_size", "0"}}, "V010", "model.intermediate_size", 0},
    {"v013_zero", {{"model.num_experts", "0"}}, "V013", "model.num_experts", 0},
    {"v013_big", {{"model.num_experts", "16384"}}, "V013", "model.num_experts", 0},
    {"v014_gt_e", {{"model.top_k", "9"}}, "V014", "model.top_k", 0},
    {"v015_act", {{"model.activation_policy", "\"relu\""}}, "V015", "model.activation_policy", 0},
    {"v015_norm", {{"model.norm_topk_prob", "1"}}, "V015", "model.norm_topk_prob", 0},
    {"v015_placement",
     {{"model.route_weight_placement", "\"middle\""}},
     "V015",
     "model.route_weight_placement",
     0},
    {"v020_range", {{"model.shared_experts", "65"}}, "V020", "model.shared_experts", 0},
    {"v020_gate", {{"model.shared_gate", "\"relu\""}}, "V020", "model.shared_gate", 0},
    {"v023",
     {{"model.shared_intermediate_size", NULL}},
     "V023",
     "model.shared_intermediate_size",
     0},
    {"v023_no_gate_either",
     {{"model.shared_intermediate_size", NULL}, {"model.shared_gate", NULL}},
     "V023",
     "model.shared_intermediate_size",
     0},
    {"v024", {{"model.shared_gate", NULL}}, "V024", "model.shared_gate", 0},
    {"v025_zero",
     {{"model.shared_experts", "0"}, {"model.shared_gate", "\"none\""}},
     "V025",
     "model.shared_intermediate_size",
     0},
    {"v025_absent",
     {{"model.shared_experts", NULL}, {"model.shared_gate", NULL}},
     "V025",
     "model.shared_intermediate_size",
     0},
    {"v026",
     {{"model.shared_experts", "0"}, {"model.shared_intermediate_size", NULL}},
     "V026",
     "model.shared_gate",
     0},
    {"v026_absent",
     {{"model.shared_experts", NULL}, {"model.shared_intermediate_size", NULL}},
     "V026",
     "model.shared_gate",
     0},
    {"v027", {V1_EDITS}, "V027", "model.shared_experts", 0},
    {"v030_phase", {{"workload.phase", "\"train\""}}, "V030", "workload.phase", 0},
    {"v030_bench", {{"workload.benchmark", "\"\""}}, "V030", "workload.benchmark", 0},
    {"v032_batch", {{"workload.batch_size", "0"}}, "V032", "workload.batch_size", 0},
    {"v032_tokens", {{"workload.token_count", "16777217"}}, "V032", "workload.token_count", 0},
    {"v033", {{"workload.batch_size", "2"}}, "V033", "workload.token_count", 0},
    {"v034_prefill", {{"workload.decode_step", "3"}}, "V034", "workload.decode_step", 0},
    {"v034_range",
     {{"workload.phase", "\"decode\""}, {"workload.decode_step", "0"}},
     "V034",
     "workload.decode_step",
     0},
    {"v035_input", {{"workload.input_tokens", "-1"}}, "V035", "workload.input_tokens", 0},
    {"v035_category", {{"workload.category", "5"}}, "V035", "workload.category", 0},
    {"v040_source", {{"routing.source", "\"\""}}, "V040", "routing.source", 0},
    {"v040_ws", {{"routing.weight_source", "\"magic\""}}, "V040", "routing.weight_source", 0},
    {"v042_rows",
     {{"routing.topk_indices", "[[3, 1], [3, 5], [0, 3]]"}},
     "V042",
     "routing.topk_indices",
     0},
    {"v042_row", {{"routing.topk_indices[3]", "[6, 1, 2]"}}, "V042", "routing.topk_indices[3]", 0},
    {"v042_row_type", {{"routing.topk_indices[2]", "5"}}, "V042", "routing.topk_indices[2]", 0},
    {"v044", {{"routing.topk_indices[3][1]", "8"}}, "V044", "routing.topk_indices[3][1]", 0},
    {"v044_neg", {{"routing.topk_indices[0][0]", "-1"}}, "V044", "routing.topk_indices[0][0]", 0},
    {"v045", {{"routing.topk_indices[1][1]", "3"}}, "V045", "routing.topk_indices[1][1]", 0},
    {"v046_rows", {{"routing.topk_weights[3]", NULL}}, "V046", "routing.topk_weights", 0},
    {"v046_row", {{"routing.topk_weights[2]", "[1.0]"}}, "V046", "routing.topk_weights[2]", 0},
    {"v047_string",
     {{"routing.topk_weights[0][0]", "\"x\""}},
     "V047",
     "routing.topk_weights[0][0]",
     0},
    {"v047_range",
     {{"routing.topk_weights[0][1]", "1e39"}},
     "V047",
     "routing.topk_weights[0][1]",
     0},
    {"v048", {{"routing.topk_weights[0][1]", "-0.25"}}, "V048", "routing.topk_weights[0][1]", 0},
    {"v049", {{"routing.topk_weights[0]", "[0.75, 0.5]"}}, "V049", "routing.topk_weights[0]", 0},
    {"v049_unnorm",
     {{"routing.weight_source", "\"true_router_softmax_unnormalized_weights\""},
      {"routing.topk_weights[1]", "[0.625, 0.38]"}},
     "V049",
     "routing.topk_weights[1]",
     0},
    {"v050",
     {{"routing.topk_weights[0]", "[0.25, 0.75]"}},
     "V050",
     "routing.topk_weights[0][1]",
     0},
    {"v051_neg", {{"routing.expert_counts[2]", "-1"}}, "V051", "routing.expert_counts[2]", 0},
    {"v051_len",
     {{"routing.expert_counts", "[1, 2, 0, 3, 0, 1, 1]"}},
     "V051",
     "routing.expert_counts",
     0},
    {"v052", {{"routing.expert_counts[7]", "1"}}, "V052", "routing.expert_counts", 0},
    {"v053",
     {{"routing.expert_counts", "[2, 1, 0, 3, 0, 1, 1, 0]"}},
     "V053",
     "routing.expert_counts[0]",
     0},
    {"v054_gini", {{"routing.gini", "0.5"}}, "V054", "routing.gini", 0},
    {"v054_df", {{"routing.duplicate_factor", "1.7"}}, "V054", "routing.duplicate_factor", 0},
    {"v054_missing", {{"routing.gini", NULL}}, "V054", "routing.gini", 0},
    {"v054_type", {{"routing.duplicate_factor", "\"1.6\""}}, "V054", "routing.duplicate_factor", 0},
    {"v056_hot", {{"routing.hot_experts", "[1, 3, 0, 5, 6]"}}, "V056", "routing.hot_experts", 0},
    {"v056_active",
     {{"routing.active_experts", "[0, 1, 3, 5]"}},
     "V056",
     "routing.active_experts",
     0},
    {"v056_cold", {{"routing.cold_experts", "[2, 4, 7, 8]"}}, "V056", "routing.cold_experts", 0},
    {"v060_mlen", {{"replay.mlen", "8192"}}, "V060", "replay.mlen", 0},
    {"v060_blen", {{"replay.blen", "128"}}, "V060", "replay.blen", 0},
    {"v060_threads", {{"replay.emu_threads", "0"}}, "V060", "replay.emu_threads", 0},
    {"v061", {{"replay.blen", "3"}}, "V061", "replay.blen", 0},
    {"v062_stage", {{"replay.stage", "\"partial\""}}, "V062", "replay.stage", 0},
    {"v070_type", {{"artifacts", "{\"reference_pt\": 5}"}}, "V070", "artifacts.reference_pt", 0},
    {"v070_obj", {{"artifacts", "\"x\""}}, "V070", "artifacts", 0},
    {"v071_lb",
     {{"logical_bytes.input_hidden_bf16_bytes", "511"}},
     "V071",
     "logical_bytes.input_hidden_bf16_bytes",
     0},
    {"v071_prov", {{"provenance", "5"}}, "V071", "provenance", 0},
    {"v071_note", {{"measurement_note", "5"}}, "V071", "measurement_note", 0},
    {"v080",
     {{"model.num_experts", "32"},
      {"model.top_k", "17"},
      {"workload.seq_len", "16777216"},
      {"workload.token_count", "16777216"},
      {"logical_bytes", NULL}},
     "V080",
     "(document)",
     0},
    {"w001", {{"zzz_unknown", "1"}}, "W001", "zzz_unknown", 1},
    {"w001_odd_key", {{"routing.odd key", "1"}}, "W001", "routing[\"odd key\"]", 1},
    {"w002", {{"replay.harness_module", "\"mod\""}}, "W002", "replay.harness_module", 1},
    {"w002_direct_runs", {{"direct_runs", "[]"}}, "W002", "direct_runs", 1},
    {"w021_true", {{"model.shared_gate", "true"}}, "W021", "model.shared_gate", 1},
    {"w030",
     {{"routing.weight_source", "\"imported\""}, {"routing.topk_weights[0]", "[0.75, 0.5]"}},
     "W030",
     "routing.topk_weights[0]",
     1},
    {"w031",
     {{"routing.weight_source", "\"unspecified\""}, {"routing.topk_weights[0]", "[0.25, 0.75]"}},
     "W031",
     "routing.topk_weights[0][1]",
     1},
};

static size_t n_edits_of(const struct rule_case *rc)
{
    size_t n = 0;
    while (n < 6 && rc->edits[n].path)
        n++;
    return n;
}

static void run_case(const struct rule_case *rc)
{
    char *doc = mutate(rc->edits, n_edits_of(rc));
    dump_fixture(rc->name, doc, strlen(doc));
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    struct plena_trace_validate_options opt = {0};
    int rc_v = plena_trace_validate_bytes(doc, strlen(doc), &opt, &r);
    int good;
    if (!rc->warning) {
        good = rc_v == PLENA_E_FAILED && !r.valid && r.n_errors >= 1 &&
               !strcmp(r.errors[0].path, rc->path);
        for (size_t i = 0; i < r.n_errors; i++)
            good &= !strcmp(r.errors[i].code, rc->code);
    } else {
        good = rc_v == 0 && r.valid && r.n_errors == 0 && r.n_warnings >= 1 &&
               !strcmp(r.warnings[r.n_warnings - 1].path, rc->path);
        for (size_t i = 0; i < r.n_warnings; i++)
            good &= !strcmp(r.warnings[i].code, rc->code) || !strcmp(r.warnings[i].code, "W002");
        /* --strict: the same finding becomes an error */
        struct plena_trace_report s;
        plena_trace_report_init(&s);
        opt.strict = 1;
        good &= plena_trace_validate_bytes(doc, strlen(doc), &opt, &s) == PLENA_E_FAILED;
        good &= s.n_warnings == 0 && s.n_errors >= 1;
        plena_trace_report_free(&s);
    }
    if (!good) {
        fprintf(stderr, "case %s: expected %s at %s, got:\n", rc->name, rc->code, rc->path);
        print_report(&r);
    }
    plena_trace_report_free(&r);
    free(doc);
    assert_true(good);
}

static void test_example_valid(void **state)
{
    (void)state;
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    int rc = plena_trace_validate_bytes(example_text, example_len, NULL, &r);
    print_report(&r);
    assert_int_equal(rc, 0);
    assert_true(r.valid);
    assert_int_equal(r.n_errors, 0);
    assert_int_equal(r.n_warnings, 0);
    assert_int_equal(r.schema_version, 2);
    assert_string_equal(r.trace_id, "example_e8k2_t4_l0");
    plena_trace_report_free(&r);
    dump_fixture("example_v2", example_text, example_len);
}

static void test_rule_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

/* The DeepSeek weight sources: scaled softmax weights keep the order rule
 * but no sum of 1; sigmoid weights (ranked by the bias-corrected scores)
 * have neither rule. */
static void test_deepseek_weight_sources(void **state)
{
    (void)state;
    static const struct {
        const char *ws, *row;
        int valid;
    } c[] = {
        {"\"true_router_scaled_softmax_weights\"", "[1.5, 0.5]", 1},
        {"\"true_router_scaled_softmax_weights\"", "[0.5, 1.5]", 0},
        {"\"true_router_sigmoid_weights\"", "[0.5, 1.5]", 1},
        {"\"true_router_topk_softmax_weights\"", "[1.5, 0.5]", 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        struct edit e[] = {{"routing.weight_source", c[i].ws},
                           {"routing.topk_weights[0]", c[i].row}};
        char *doc = mutate(e, 2);
        struct plena_trace_report r;
        plena_trace_report_init(&r);
        struct plena_trace_validate_options opt = {.strict = 1};
        const int rc = plena_trace_validate_bytes(doc, strlen(doc), &opt, &r);
        if ((rc == 0) != c[i].valid) {
            fprintf(stderr, "case %zu: %s %s\n", i, c[i].ws, c[i].row);
            print_report(&r);
        }
        assert_int_equal(rc == 0, c[i].valid);
        plena_trace_report_free(&r);
        free(doc);
    }
}

/* Message texts, word for word */
static void test_messages(void **state)
{
    (void)state;
    struct edit e[] = {{"model.top_k", "9"}};
    char *doc = mutate(e, 1);
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    plena_trace_validate_bytes(doc, strlen(doc), NULL, &r);
    assert_int_equal(r.n_errors, 1);
    assert_non_null(strstr(r.errors[0].message, "top_k 9 exceeds num_experts 8"));
    plena_trace_report_free(&r);
    free(doc);

    struct edit b[] = {{"model.hidden_size", "true"}};
    doc = mutate(b, 1);
    plena_trace_validate_bytes(doc, strlen(doc), NULL, &r);
    assert_int_equal(r.n_errors, 1);
    assert_non_null(strstr(r.errors[0].message, "expected integer, got boolean"));
    plena_trace_report_free(&r);
    free(doc);

    struct edit c[] = {{"routing.expert_counts", "[1, 2, 0, 2, 0, 2, 1, 0]"}};
    doc = mutate(c, 1);
    plena_trace_validate_bytes(doc, strlen(doc), NULL, &r);
    assert_int_equal(r.n_errors, 2);
    assert_string_equal(r.errors[0].path, "routing.expert_counts[3]");
    assert_non_null(strstr(r.errors[0].message, "is 2 but topk_indices route 3 slots to expert 3"));
    plena_trace_report_free(&r);
    free(doc);

    struct edit d[] = {{"routing.topk_indices[1][1]", "3"}};
    doc = mutate(d, 1);
    plena_trace_validate_bytes(doc, strlen(doc), NULL, &r);
    assert_int_equal(r.n_errors, 1);
    assert_non_null(
        strstr(r.errors[0].message, "expert 3 repeated in this token (first at [1][0])"));
    plena_trace_report_free(&r);
    free(doc);
}

/* Raw documents that must fail with V001 or V002 at (document), never crash. */
static void expect_doc(const char *name, const char *bytes, size_t len, const char *code)
{
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    dump_fixture(name, bytes, len);
    int rc = plena_trace_validate_bytes(bytes, len, NULL, &r);
    if (r.n_errors != 1 || strcmp(r.errors[0].code, code)) {
        fprintf(stderr, "raw case %s: expected %s\n", name, code);
        print_report(&r);
    }
    assert_int_equal(rc, PLENA_E_FAILED);
    assert_int_equal(r.n_errors, 1);
    assert_string_equal(r.errors[0].code, code);
    assert_string_equal(r.errors[0].path, "(document)");
    plena_trace_report_free(&r);
}

static void test_parser_robustness(void **state)
{
    (void)state;
    expect_doc("raw_empty", "", 0, "V001");
    expect_doc("raw_space", "  \n", 3, "V001");
    expect_doc("raw_garbage", "\x00\xff\xfe\x80garbage\x01", 12, "V001");
    expect_doc("raw_bad_utf8", "{\"a\": \"\xc3\x28\"}", 13, "V001");
    expect_doc("raw_trailing", "{} {}", 5, "V001");
    expect_doc("raw_dup_key", "{\"trace_id\": \"a\", \"trace_id\": \"b\"}", 34, "V001");
    expect_doc("raw_1e400", "{\"gini\": 1e400}", 15, "V001");
    expect_doc("raw_int_overflow", "{\"schema_version\": 9223372036854775808}", 39, "V001");
    expect_doc("raw_array", "[]", 2, "V002");
    expect_doc("raw_null", "null", 4, "V002");
    expect_doc("raw_string", "\"x\"", 3, "V002");
    expect_doc("raw_number", "42", 2, "V002");
    /* depth: 64 nested containers pass the depth rule (other rules fail),
     * 65 are V001; 5000 exceed the parser's own limit, also V001. */
    char deep[10100];
    for (int depth = 64; depth <= 65; depth++) {
        size_t n = 0;
        n += (size_t)sprintf(deep + n, "{\"x\":");
        for (int i = 1; i < depth - 1; i++)
            deep[n++] = '[';
        deep[n++] = '{';
        deep[n++] = '}';
        for (int i = 1; i < depth - 1; i++)
            deep[n++] = ']';
        deep[n++] = '}';
        struct plena_trace_report r;
        plena_trace_report_init(&r);
        plena_trace_validate_bytes(deep, n, NULL, &r);
        int has_v001 = 0;
        for (size_t i = 0; i < r.n_errors; i++)
            has_v001 |= !strcmp(r.errors[i].code, "V001");
        assert_int_equal(has_v001, depth == 65);
        if (depth == 65) dump_fixture("raw_deep65", deep, n);
        plena_trace_report_free(&r);
    }
    memset(deep, '[', 5000);
    memset(deep + 5000, ']', 5000);
    expect_doc("raw_deep5000", deep, 10000, "V001");
    /* V001 carries line and column */
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    plena_trace_validate_bytes("{\n  \"a\": tru\n}", 14, NULL, &r);
    assert_int_equal(r.n_errors, 1);
    assert_int_equal(r.errors[0].line, 2);
    assert_non_null(strstr(r.errors[0].message, "line 2"));
    plena_trace_report_free(&r);
    /* --max-bytes */
    struct plena_trace_validate_options opt = {.max_bytes = 100};
    plena_trace_validate_bytes(example_text, example_len, &opt, &r);
    assert_int_equal(r.n_errors, 1);
    assert_string_equal(r.errors[0].code, "V001");
    plena_trace_report_free(&r);
}

static void test_truncated_and_flipped(void **state)
{
    (void)state;
    /* Every prefix and every single-bit flip of the example: no crash, and
     * every proper prefix is invalid. */
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    for (size_t n = 0; n + 2 < example_len; n++) {
        plena_trace_validate_bytes(example_text, n, NULL, &r);
        assert_false(r.valid);
    }
    char *copy = plena_malloc(example_len);
    for (size_t i = 0; i < example_len; i += 7) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, example_text, example_len);
            copy[i] = (char)(copy[i] ^ (1 << bit));
            plena_trace_validate_bytes(copy, example_len, NULL, &r);
        }
    }
    plena_free(copy);
    plena_trace_report_free(&r);
}

static void test_no_cascade_missing_objects(void **state)
{
    (void)state;
    /* A missing object is one error; rules about its members are skipped. */
    struct edit e[] = {{"model", NULL}, {"workload", NULL}};
    char *doc = mutate(e, 2);
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    plena_trace_validate_bytes(doc, strlen(doc), NULL, &r);
    print_report(&r);
    assert_int_equal(r.n_errors, 2);
    assert_string_equal(r.errors[0].path, "model");
    assert_string_equal(r.errors[1].path, "workload");
    plena_trace_report_free(&r);
    free(doc);
}

static void test_max_errors(void **state)
{
    (void)state;
    /* 4 bad ids -> 4 V044; with max_errors 2 two are listed, two counted. */
    struct edit e[] = {{"routing.topk_indices", "[[30, 31], [32, 33], [34, 35], [36, 37]]"}};
    char *doc = mutate(e, 1);
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    struct plena_trace_validate_options opt = {.max_errors = 2};
    plena_trace_validate_bytes(doc, strlen(doc), &opt, &r);
    assert_int_equal(r.n_errors, 2);
    assert_int_equal(r.n_errors_truncated, 6);
    assert_int_equal(plena_trace_report_error_total(&r), 8);
    plena_trace_report_free(&r);
    free(doc);
}

static void test_v1_trace(void **state)
{
    (void)state;
    /* A v1 trace without shared fields, with artifacts, stage, harness:
     * valid with W002 warnings; bad trace_id is W010. */
    struct edit e[] = {V1_EDITS, {"model.shared_experts", NULL}, {"model.shared_gate", NULL}};
    char *doc = mutate(e, 6);
    json_error_t je;
    json_t *root = json_loads(doc, 0, &je);
    json_object_del(json_object_get(root, "model"), "shared_intermediate_size");
    json_object_set_new(root, "trace_id", json_string("v1 id with spaces"));
    char *doc2 = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    dump_fixture("v1_w010", doc2, strlen(doc2));
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    int rc = plena_trace_validate_bytes(doc2, strlen(doc2), NULL, &r);
    print_report(&r);
    assert_int_equal(rc, 0);
    assert_int_equal(r.schema_version, 1);
    int w010 = 0, w002 = 0;
    for (size_t i = 0; i < r.n_warnings; i++) {
        w010 += !strcmp(r.warnings[i].code, "W010");
        w002 += !strcmp(r.warnings[i].code, "W002");
    }
    assert_int_equal(w010, 1);
    assert_int_equal(w002, 3); /* harness_module, reference_pt, l1_golden_pt */
    plena_trace_report_free(&r);
    /* v1 without artifacts: V070 */
    root = json_loads(doc2, 0, &je);
    json_object_del(root, "artifacts");
    char *doc3 = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    plena_trace_validate_bytes(doc3, strlen(doc3), NULL, &r);
    assert_int_equal(r.n_errors, 1);
    assert_string_equal(r.errors[0].code, "V070");
    assert_string_equal(r.errors[0].path, "artifacts");
    plena_trace_report_free(&r);
    /* v1 with a null artifact path: V070 */
    root = json_loads(doc2, 0, &je);
    json_object_set_new(json_object_get(root, "artifacts"), "reference_pt", json_null());
    char *doc4 = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    plena_trace_validate_bytes(doc4, strlen(doc4), NULL, &r);
    assert_int_equal(r.n_errors, 1);
    assert_string_equal(r.errors[0].code, "V070");
    assert_string_equal(r.errors[0].path, "artifacts.reference_pt");
    plena_trace_report_free(&r);
    free(doc);
    free(doc2);
    free(doc3);
    free(doc4);
}

static void test_set(void **state)
{
    (void)state;
    json_t *tmp = json_loadb(example_text, example_len, 0, NULL);
    char *line = json_dumps(tmp, JSON_COMPACT);
    json_object_set_new(tmp, "trace_id", json_string("other"));
    char *line2 = json_dumps(tmp, JSON_COMPACT);
    json_decref(tmp);
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_printf(&b, "%s\n\n%s\n%s\n{}", line, line2, line);
    dump_fixture("set_v100", b.data, b.len);
    struct plena_trace_set_report s = {0};
    int rc = plena_trace_validate_set_bytes(b.data, b.len, NULL, &s);
    assert_int_equal(rc, PLENA_E_FAILED);
    assert_int_equal(s.n_entries, 4);
    assert_int_equal(s.entries[0].line, 1);
    assert_int_equal(s.entries[1].line, 3);
    assert_int_equal(s.entries[2].line, 4);
    assert_int_equal(s.entries[3].line, 5);
    assert_true(s.entries[0].report.valid);
    assert_true(s.entries[1].report.valid);
    assert_false(s.entries[2].report.valid);
    assert_int_equal(s.entries[2].report.n_errors, 1);
    assert_string_equal(s.entries[2].report.errors[0].code, "V100");
    assert_int_equal(s.entries[2].report.errors[0].line, 4);
    assert_non_null(strstr(s.entries[2].report.errors[0].message, "line 1"));
    assert_false(s.entries[3].report.valid);
    assert_int_equal(s.entries[3].report.errors[0].line, 5);
    plena_trace_set_report_free(&s);
    plena_buf_free(&b);
    free(line);
    free(line2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_example_valid),
    cmocka_unit_test(test_rule_cases),
    cmocka_unit_test(test_deepseek_weight_sources),
    cmocka_unit_test(test_messages),
    cmocka_unit_test(test_parser_robustness),
    cmocka_unit_test(test_truncated_and_flipped),
    cmocka_unit_test(test_no_cascade_missing_objects),
    cmocka_unit_test(test_max_errors),
    cmocka_unit_test(test_v1_trace),
    cmocka_unit_test(test_set),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
