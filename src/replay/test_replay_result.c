/* Gate decision and skip-existing (docs/replay.md "results.json", "Gates" and "Pipeline";
 * upstream defects 4 and 5): every skip case of docs/replay.md "Pipeline", the decision as a pure
 * function, and publication only with a decided gate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "replay/jsonw.h"
#include "replay/result.h"
#include "common/test_support.h"

static char g_dir[64];
static char g_path[256];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/plena_result_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/results.json", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_path);
    rmdir(g_dir);
    return 0;
}

static void put(const char *text)
{
    assert_int_equal(plena_file_write_atomic(g_path, text, strlen(text), NULL), 0);
}

#define FP "ab12"
#define GOOD                                                                                       \
    "{\"schema_version\":1,\"inputs\":{\"fingerprint\":\"" FP "\"},\"gate\":{\"passed\":true}}"

static void test_skip_existing_cases(void **state)
{
    (void)state;
    /* no file */
    unlink(g_path);
    assert_false(plena_replay_can_skip(g_path, FP));
    /* the one case that skips */
    put(GOOD);
    assert_true(plena_replay_can_skip(g_path, FP));
    /* torn file: the same text cut short */
    char torn[sizeof GOOD];
    memcpy(torn, GOOD, sizeof GOOD);
    torn[sizeof GOOD - 6] = 0;
    /* every other result is rerun */
    const char *const rerun[] = {
        torn,
        /* passed false */
        "{\"schema_version\":1,\"inputs\":{\"fingerprint\":\"" FP
        "\"},\"gate\":{\"passed\":false}}",
        /* passed absent (defect 4: never defaults to passed) */
        "{\"schema_version\":1,\"inputs\":{\"fingerprint\":\"" FP "\"},\"gate\":{\"kind\":\"x\"}}",
        /* gate absent */
        "{\"schema_version\":1,\"inputs\":{\"fingerprint\":\"" FP "\"}}",
        /* passed "true" as a string, and 1 as an integer */
        "{\"schema_version\":1,\"inputs\":{\"fingerprint\":\"" FP
        "\"},\"gate\":{\"passed\":\"true\"}}",
        "{\"schema_version\":1,\"inputs\":{\"fingerprint\":\"" FP "\"},\"gate\":{\"passed\":1}}",
        /* missing fingerprint */
        "{\"schema_version\":1,\"inputs\":{},\"gate\":{\"passed\":true}}",
        /* other schema version */
        "{\"schema_version\":2,\"inputs\":{\"fingerprint\":\"" FP "\"},\"gate\":{\"passed\":true}}",
        /* not an object / empty file */
        "[]",
        "",
    };
    for (size_t i = 0; i < sizeof rerun / sizeof rerun[0]; i++) {
        put(rerun[i]);
        if (plena_replay_can_skip(g_path, FP)) fail_msg("skipped: '%s'", rerun[i]);
    }
    /* other fingerprint */
    put(GOOD);
    assert_false(plena_replay_can_skip(g_path, "ab13"));
}

static void all_checks(struct plena_replay_checks *c)
{
    memset(c, 0, sizeof *c);
    const char *names[] = {"validate", "generate", "emulate", "routing_integrity", "functional"};
    for (size_t i = 0; i < 5; i++)
        plena_replay_check_set(c, names[i], 1, "ok");
}

static void test_gate_decision(void **state)
{
    (void)state;
    struct plena_replay_checks c;
    struct plena_replay_gate g;
    struct plena_replay_gate_req req = {0, 0, PLENA_GATE_NUMERICAL};
    all_checks(&c);
    plena_replay_gate_decide(&c, &req, &g);
    assert_true(g.passed);
    assert_int_equal(g.n_failed, 0);

    /* one failed check fails the gate and is named */
    plena_replay_check_set(&c, "functional", 0, "1 mismatch");
    plena_replay_gate_decide(&c, &req, &g);
    assert_false(g.passed);
    assert_int_equal(g.n_failed, 1);
    assert_string_equal(g.failed[0], "functional");

    /* a required check that was never evaluated fails */
    all_checks(&c);
    req.profiling = 1;
    plena_replay_gate_decide(&c, &req, &g);
    assert_false(g.passed);
    assert_string_equal(g.failed[0], "profile_accounting");
    plena_replay_check_set(&c, "profile_accounting", 1, "ok");
    req.repeat = 1;
    plena_replay_gate_decide(&c, &req, &g);
    assert_false(g.passed);
    assert_string_equal(g.failed[0], "repeat");
    plena_replay_check_set(&c, "repeat", 1, "ok");
    plena_replay_gate_decide(&c, &req, &g);
    assert_true(g.passed);

    /* no checks at all: every required one is missing */
    memset(&c, 0, sizeof c);
    req.profiling = req.repeat = 0;
    plena_replay_gate_decide(&c, &req, &g);
    assert_false(g.passed);
    assert_int_equal(g.n_failed, 5);

    /* JSON form */
    all_checks(&c);
    req.kind = PLENA_GATE_ZERO_INPUT_SMOKE;
    plena_replay_gate_decide(&c, &req, &g);
    json_t *j = plena_replay_gate_json(&c, &g, "2026-01-01T00:00:00Z");
    assert_true(json_is_true(json_object_get(j, "passed")));
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "zero_input_smoke");
    assert_int_equal(json_array_size(json_object_get(j, "checks")), 5);
    assert_int_equal(json_array_size(json_object_get(j, "failed")), 0);
    json_decref(j);
}

static void test_publish_needs_decision(void **state)
{
    (void)state;
    unlink(g_path);
    json_t *r = json_pack("{s:i,s:{}}", "schema_version", 1, "gate");
    assert_int_not_equal(plena_replay_result_publish(g_dir, r, NULL), 0);
    assert_int_not_equal(access(g_path, F_OK), 0);
    json_object_set_new(json_object_get(r, "gate"), "passed", json_false());
    json_object_set_new(r, "inputs", json_pack("{s:s}", "fingerprint", FP));
    assert_int_equal(plena_replay_result_publish(g_dir, r, NULL), 0);
    assert_false(plena_replay_can_skip(g_path, FP)); /* defect 5: a failed result reruns */
    json_object_set_new(json_object_get(r, "gate"), "passed", json_true());
    assert_int_equal(plena_replay_result_publish(g_dir, r, NULL), 0);
    assert_true(plena_replay_can_skip(g_path, FP));
    assert_int_equal(plena_replay_result_remove(g_dir, NULL), 0);
    assert_int_not_equal(access(g_path, F_OK), 0);
    assert_int_equal(plena_replay_result_remove(g_dir, NULL), 0); /* absent is fine */
    json_decref(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_skip_existing_cases, setup, teardown),
    cmocka_unit_test(test_gate_decision),
    cmocka_unit_test_setup_teardown(test_publish_needs_decision, setup, teardown),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
