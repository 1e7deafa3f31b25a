/* Replay-tier rules (replay/tier.h): R001 and R006 on the schema example,
 * and R005, the generator's
 * capacity check for the trace's shape and token count. Expected numbers are
 * the FP/INT SRAM maps of docs/lowering.md "Memory ABI" counted by hand: with fixed
 * routing the whole routing table must fit (VLEN + 16 constants + T*(k + gate)
 * FP entries, T*k + 16 INT entries). */
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
#include "gen/builder.h"
#include "model/model.h"
#include "replay/tier.h"
#include "trace/build.h"
#include "trace/gen.h"
#include "trace/trace.h"
#include "common/test_support.h"

static char *example;
static size_t example_len;

/* R findings of one trace on machine m (NULL: the default machine). */
static int run(const char *bytes, size_t len, const struct plena_gen_machine *m,
               struct plena_trace_report *r)
{
    plena_trace_report_init(r);
    assert_int_equal(plena_trace_validate_bytes(bytes, len, NULL, r), 0); /* V tier passes */
    struct plena_replay_tier_opts ro = {64, 0};
    return plena_replay_tier_check(bytes, len, &ro, m, r);
}

static void expect_r005(const char *bytes, size_t len, const struct plena_gen_machine *m,
                        const char *const *want)
{
    struct plena_trace_report r;
    int rc = run(bytes, len, m, &r);
    assert_int_equal(rc, PLENA_E_FAILED);
    assert_int_equal(r.n_errors, 1);
    assert_string_equal(r.errors[0].code, "R005");
    assert_string_equal(r.errors[0].path, "(document)");
    for (const char *const *w = want; *w; w++)
        if (!strstr(r.errors[0].message, *w))
            fail_msg("R005 message lacks '%s': %s", *w, r.errors[0].message);
    plena_trace_report_free(&r);
}

static void expect_ok(const char *bytes, size_t len, const struct plena_gen_machine *m)
{
    struct plena_trace_report r;
    int rc = run(bytes, len, m, &r);
    if (rc)
        fail_msg("unexpected %s at %s: %s", r.errors[0].code, r.errors[0].path,
                 r.errors[0].message);
    plena_trace_report_free(&r);
}

static void replay_case(json_t *doc, uint32_t settings_mlen, uint32_t override, const char *code,
                        const char *path, const char *msg)
{
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_trace_json_write(&b, doc, 1), 0);
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    assert_int_equal(plena_trace_validate_bytes(b.data, b.len, NULL, &r), 0); /* V tier passes */
    struct plena_replay_tier_opts ro = {settings_mlen, override};
    int rc = plena_replay_tier_check(b.data, b.len, &ro, NULL, &r);
    if (!code) {
        if (rc)
            fail_msg("unexpected %s at %s: %s", r.errors[0].code, r.errors[0].path,
                     r.errors[0].message);
    } else {
        assert_int_equal(rc, PLENA_E_FAILED);
        assert_int_equal(r.n_errors, 1);
        assert_string_equal(r.errors[0].code, code);
        assert_string_equal(r.errors[0].path, path);
        if (!strstr(r.errors[0].message, msg)) fail_msg("message: %s", r.errors[0].message);
    }
    plena_trace_report_free(&r);
    plena_buf_free(&b);
}

static void test_replay_tier(void **state)
{
    (void)state;
    struct plena_err err = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/src/trace/testdata/example_v2.json", PLENA_SOURCE_DIR);
    char *text = NULL;
    size_t text_len = 0;
    assert_int_equal(plena_file_read_all(path, &text, &text_len, &err), 0);
    json_t *doc = json_loadb(text, text_len, 0, NULL);
    assert_non_null(doc);
    /* the complete example of docs/trace-schema.md: H = 64, replay.mlen 64 */
    replay_case(doc, 64, 0, NULL, NULL, NULL);
    /* settings MLEN 32 and no --mlen: replay.mlen 64 differs -> R006 */
    replay_case(doc, 32, 0, "R006", "replay.mlen", "is 64, but the settings' MLEN is 32");
    /* --mlen 32 overrides: no R006, and 64 % 32 == 0 */
    replay_case(doc, 128, 32, NULL, NULL, NULL);
    /* --mlen 128: H = 64 is not a multiple -> R001 (and R006 is not checked) */
    replay_case(doc, 64, 128, "R001", "model.hidden_size", "hidden_size 64");
    /* H = 96 (logical bytes removed, they depend on H) with MLEN 64 -> R001 */
    json_object_del(doc, "logical_bytes");
    json_object_set_new(json_object_get(doc, "model"), "hidden_size", json_integer(96));
    replay_case(doc, 64, 0, "R001", "model.hidden_size", "hidden_size 96");
    json_decref(doc);
    plena_free(text);
}

/* example_v2.json: T = 4, E = 8, k = 2, shared 128 with a sigmoid gate.
 * The whole routing table preloaded: FP 64 + 16 + 4 * (2 + 1) = 92 entries,
 * INT 4 * 2 + 16 = 24 entries. Below that, each token block's ids and
 * weights stream from HBM in whole records, and a block of one token needs
 * FP 64 + 16 + 32 + 1 = 113 and INT 16 + 16 = 32. */
static void test_example_sram_boundaries(void **state)
{
    (void)state;
    struct plena_gen_machine m;
    expect_ok(example, example_len, NULL);
    plena_gen_machine_default(&m);
    m.fp_depth = 92;
    expect_ok(example, example_len, &m);
    m.fp_depth = 91; /* the table does not fit: streamed blocks of one token need more */
    static const char *const fp[] = {"FP SRAM",
                                     "a token block of 1 token(s)",
                                     "needs 113 entries",
                                     "in whole 32-entry records",
                                     "limit 91",
                                     "FP_SRAM_DEPTH 91",
                                     "model.top_k",
                                     "model.shared_gate",
                                     NULL};
    expect_r005(example, example_len, &m, fp);
    plena_gen_machine_default(&m);
    m.int_depth = 24;
    expect_ok(example, example_len, &m);
    m.int_depth = 23;
    static const char *const in[] = {"INT SRAM", "needs 32 entries", "limit 23", "model.top_k",
                                     NULL};
    expect_r005(example, example_len, &m, in);
    /* VRAM: h, residual, acc, S (4 tokens padded to BLEN 4 rows x 64) and
     * more; 512 elements cannot hold even the ABI tensors */
    plena_gen_machine_default(&m);
    m.vram_elems = 512;
    static const char *const vr[] = {"VRAM", "limit 512", "model.hidden_size", NULL};
    expect_r005(example, example_len, &m, vr);
}

/* A huge top_k: tiny-route-256x8 reshaped to k = 200 over 8 tokens. The
 * whole table (FP 64 + 16 + 8 * 200 = 1680 entries) exceeds the default 1024,
 * so blocks stream from HBM: one token needs 64 + 16 + 224 = 304 FP entries
 * and 208 + 16 = 224 INT entries, which fit; 303 FP entries do not. */
static void test_huge_top_k(void **state)
{
    (void)state;
    struct plena_moe_model mdl = *plena_model_preset_find("tiny-route-256x8");
    mdl.top_k = 200;
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    o.model = &mdl;
    o.tokens = 8;
    o.mlen = 64;
    o.blen = 4;
    struct plena_err err = {0};
    assert_int_equal(plena_trace_gen_parse_dist("balanced", &o, &err), 0);
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_trace_gen(&o, &b, &err), 0);
    expect_ok(b.data, b.len, NULL);
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    m.fp_depth = 303;
    static const char *const fp[] = {"FP SRAM", "needs 304 entries", "limit 303", "model.top_k",
                                     NULL};
    expect_r005(b.data, b.len, &m, fp);
    m.fp_depth = 1680;
    m.int_depth = 1616; /* 8 * 200 + 16: the whole table, preloaded */
    expect_ok(b.data, b.len, &m);
    plena_buf_free(&b);
}

static int setup(void **state)
{
    (void)state;
    char path[1024];
    const char *src = getenv("PLENA_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/src/trace/testdata/example_v2.json", src ? src : ".");
    return plena_file_read_all(path, &example, &example_len, NULL) ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    plena_free(example);
    return 0;
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_replay_tier),
    cmocka_unit_test(test_example_sram_boundaries),
    cmocka_unit_test(test_huge_top_k),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
