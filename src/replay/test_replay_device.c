/* `--routing device` end to end (docs/replay.md "Device routing"): the example trace of
 * docs/trace-schema.md (H = I = 64, 8 experts top-2, shared gated) replayed as each router
 * family's preset (the trace's shape, the preset's router) on both lowerings: the device, over
 * the preloaded logits, selects exactly the trace's experts, the output is bit-exact with the
 * reference, router_topk holds the router's cost (0 under fixed routing), and the exports pair
 * the two runs into a device_minus_fixed row whose deltas are the two results' differences.
 * A device that routes elsewhere (a logit raised by a test hook) fails routing integrity, and
 * so does an emulator whose INT SRAM dump holds other ids. */
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
#include "replay/export.h"
#include "replay/jsonw.h"
#include "replay/replay.h"
#include "replay/test_replay_util.h"

static char g_settings[128];

static int setup(void **state)
{
    if (plena_test_tmp_setup(state)) return -1;
    snprintf(g_settings, sizeof g_settings, "%s/small.toml", plena_test_tmp);
    replay_test_write_small_settings(g_settings);
    return 0;
}

/* The example trace as model `name` (NULL: its own name, softmax-top-k). */
static char *example_as(const char *name, size_t *len)
{
    char path[512], *bytes;
    snprintf(path, sizeof path, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    assert_int_equal(plena_file_read_all(path, &bytes, len, NULL), 0);
    json_t *t = json_loadb(bytes, *len, 0, NULL);
    assert_non_null(t);
    plena_free(bytes);
    if (name) json_object_set_new(json_object_get(t, "model"), "name", json_string(name));
    char *out = json_dumps(t, JSON_SORT_KEYS);
    json_decref(t);
    assert_non_null(out);
    *len = strlen(out);
    return out;
}

/* Replays `bytes` into root with the routing and lowering given; the parsed
 * results.json, and the outcome code in *code. */
static json_t *replay(const char *bytes, size_t len, const char *root, int device,
                      const char *lowering, void (*hook)(void *, float *, uint32_t, uint32_t),
                      void (*after_run)(void *, const char *), int *code)
{
    struct plena_replay_opts o;
    plena_replay_opts_default(&o);
    o.out_dir = root;
    o.settings_path = g_settings;
    o.routing_device = device;
    o.lowering = lowering;
    o.after_logits = hook;
    o.after_run = after_run;
    char sh[65];
    assert_int_equal(plena_replay_settings_sha256(o.settings_path, sh, NULL), 0);
    struct plena_replay_item it;
    struct plena_trace_report rep;
    plena_trace_report_init(&rep);
    assert_int_equal(plena_replay_prepare(bytes, len, "example", &o, sh, &it, &rep, NULL), 0);
    plena_trace_report_free(&rep);
    struct plena_replay_outcome oc;
    assert_int_equal(plena_replay_run(&it, &o, &oc, NULL), 0);
    *code = oc.code;
    char p[512];
    snprintf(p, sizeof p, "%s/%s/results.json", root, it.dir_name);
    plena_replay_item_free(&it);
    json_t *r = NULL;
    assert_int_equal(plena_replay_json_read_file(p, &r, NULL), 0);
    return r;
}

static json_t *check_of(const json_t *r, const char *name)
{
    const json_t *cs = json_object_get(json_object_get(r, "gate"), "checks");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *c = json_array_get(cs, i);
        if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    }
    fail_msg("no check %s", name);
    return NULL;
}

static json_int_t router_picos(const json_t *r)
{
    const json_t *st = json_object_get(r, "stages");
    for (size_t i = 0; i < json_array_size(st); i++) {
        const json_t *row = json_array_get(st, i);
        if (!strcmp(json_string_value(json_object_get(row, "stage")), "router_topk"))
            return json_integer_value(json_object_get(row, "wall_picos"));
    }
    fail_msg("no router_topk row");
    return -1;
}

static json_int_t run_of(const json_t *r, const char *k)
{
    return json_integer_value(json_object_get(json_object_get(r, "run"), k));
}

/* one family on one lowering: fixed and device into one root, then the export */
static void family(const char *name, const char *lowering)
{
    size_t len;
    char *bytes = example_as(name, &len);
    char root[256];
    snprintf(root, sizeof root, "%s/%s_%s", plena_test_tmp, name ? name : "default", lowering);
    int cf, cd;
    json_t *f = replay(bytes, len, root, 0, lowering, NULL, NULL, &cf);
    json_t *d = replay(bytes, len, root, 1, lowering, NULL, NULL, &cd);
    free(bytes);
    if (cd != PLENA_OK)
        fail_msg("%s %s: device replay failed: %s", name, lowering,
                 json_string_value(json_object_get(check_of(d, "generate"), "detail")));
    assert_int_equal(cf, PLENA_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(d, "gate"), "kind")),
                        "numerical");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(d, "inputs"), "routing_mode")), "device");
    assert_true(json_is_true(json_object_get(check_of(d, "routing_integrity"), "passed")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(d, "functional"), "mismatches")), 0);
    assert_true(router_picos(d) > 0);
    assert_int_equal(router_picos(f), 0);
    assert_int_equal(plena_replay_export(root, 0, NULL, NULL), 0);
    char *csv = plena_test_read_file(root, "routing_tax.csv", NULL), row[256];
    snprintf(row, sizeof row, "\nexample_e8k2_t4_l0,device_minus_fixed,,,,%lld,%lld,%lld\n",
             (long long)(run_of(d, "sim_latency_cycles") - run_of(f, "sim_latency_cycles")),
             (long long)(run_of(d, "hbm_bytes_read") - run_of(f, "hbm_bytes_read")),
             (long long)(run_of(d, "hbm_bytes_written") - run_of(f, "hbm_bytes_written")));
    if (!strstr(csv, row)) fail_msg("%s: no row %s in\n%s", name, row + 1, csv);
    plena_free(csv);
    json_decref(f);
    json_decref(d);
}

static void test_every_router_family(void **state)
{
    (void)state;
    /* softmax-top-k, gpt-oss (logit bias, softmax over the selected), softmax
     * without renormalisation, V2 group-limited greedy, V3 sigmoid + bias +
     * groups, Kimi K2, GLM-4.5, Llama-4 sigmoid of the selected logit */
    static const char *const names[] = {
        NULL,          "gpt-oss-20b", "qwen1.5-moe-a2.7b", "deepseek-v2-lite",
        "deepseek-v3", "kimi-k2",     "glm-4.5",           "llama4-scout"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        family(names[i], "pair-major");
    family("deepseek-v3", "expert-major");
    family("llama4-scout", "expert-major");
    family(NULL, "expert-major");
}

/* expert 0 is not among token 0's experts (3, 1): raised to 8 it wins */
static void raise_expert0(void *ctx, float *logits, uint32_t T, uint32_t E)
{
    (void)ctx;
    (void)T;
    (void)E;
    logits[0] = 8.0f;
}

/* every INT SRAM word of the dump becomes 0xFFFFFFFF: ids no trace routes to */
static void spoil_int_dump(void *ctx, const char *dir)
{
    (void)ctx;
    char p[512];
    snprintf(p, sizeof p, "%s/intsram_dump.bin", dir);
    char *bytes;
    size_t n;
    assert_int_equal(plena_file_read_all(p, &bytes, &n, NULL), 0);
    memset(bytes, 0xff, n);
    assert_int_equal(plena_file_write_atomic(p, bytes, n, NULL), 0);
    plena_free(bytes);
}

static void routes_elsewhere(const char *name, const char *lowering,
                             void (*hook)(void *, float *, uint32_t, uint32_t),
                             void (*after_run)(void *, const char *), const char *expect)
{
    size_t len;
    char *bytes = example_as(name, &len);
    char root[256];
    snprintf(root, sizeof root, "%s/elsewhere_%s_%s", plena_test_tmp, name ? name : "default",
             lowering);
    int code;
    json_t *r = replay(bytes, len, root, 1, lowering, hook, after_run, &code);
    free(bytes);
    assert_int_equal(code, PLENA_E_FAILED);
    assert_true(json_is_false(json_object_get(json_object_get(r, "gate"), "passed")));
    const json_t *ri = check_of(r, "routing_integrity");
    assert_true(json_is_false(json_object_get(ri, "passed")));
    const char *detail = json_string_value(json_object_get(ri, "detail"));
    if (!strstr(detail, expect)) fail_msg("routing_integrity detail: %s", detail);
    json_decref(r);
}

static void test_device_routing_elsewhere_fails_integrity(void **state)
{
    (void)state;
    routes_elsewhere(NULL, "pair-major", raise_expert0, NULL,
                     "token 0: the device selected expert 0");
    routes_elsewhere("deepseek-v3", "pair-major", raise_expert0, NULL,
                     "token 0: the device selected expert 0");
    /* the emulator's own ids, decoded from its INT SRAM dump: the last token
     * block (pair-major: all 4 tokens), the last token (expert-major) */
    routes_elsewhere(NULL, "pair-major", NULL, spoil_int_dump,
                     "intsram_dump.bin: token 0: the device selected expert 4294967295");
    routes_elsewhere("llama4-scout", "expert-major", NULL, spoil_int_dump,
                     "intsram_dump.bin: token 3: the device selected expert 4294967295");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_every_router_family, setup, plena_test_tmp_teardown),
    cmocka_unit_test_setup_teardown(test_device_routing_elsewhere_fails_integrity, setup,
                                    plena_test_tmp_teardown),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
