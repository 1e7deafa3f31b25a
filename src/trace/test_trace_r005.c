/* Replay-tier rule R005 (spec/traces-and-replay.md 2.3): the generator's
 * capacity check for the trace's shape and token count. Expected numbers are
 * the FP/INT SRAM maps of moe-lowering.md 2.4/2.5 counted by hand: with fixed
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
#include "gen/model.h"
#include "trace/build.h"
#include "trace/gen.h"
#include "trace/trace.h"

static char *example;
static size_t example_len;

/* R findings of one trace on machine m (NULL: the default machine). */
static int run(const char *bytes, size_t len, const struct plena_gen_machine *m,
               struct plena_trace_report *r)
{
    plena_trace_report_init(r);
    assert_int_equal(plena_trace_validate_bytes(bytes, len, NULL, r), 0); /* V tier passes */
    struct plena_trace_replay_options ro = {64, 0};
    return plena_trace_validate_replay_machine(bytes, len, &ro, m, r);
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

/* example_v2.json: T = 4, E = 8, k = 2, shared 128 with a sigmoid gate.
 * FP: 64 + 16 + 4 * (2 + 1) = 92 entries; INT: 4 * 2 + 16 = 24 entries. */
static void test_example_sram_boundaries(void **state)
{
    (void)state;
    struct plena_gen_machine m;
    expect_ok(example, example_len, NULL);
    plena_gen_machine_default(&m);
    m.fp_depth = 92;
    expect_ok(example, example_len, &m);
    m.fp_depth = 91;
    static const char *const fp[] = {"FP SRAM",           "fixed routing of 4 token(s)",
                                     "needs 92 entries",  "limit 91",
                                     "FP_SRAM_DEPTH 91",  "model.top_k",
                                     "model.shared_gate", NULL};
    expect_r005(example, example_len, &m, fp);
    plena_gen_machine_default(&m);
    m.int_depth = 24;
    expect_ok(example, example_len, &m);
    m.int_depth = 23;
    static const char *const in[] = {"INT SRAM", "needs 24 entries", "limit 23", "model.top_k",
                                     NULL};
    expect_r005(example, example_len, &m, in);
    /* VRAM: h, residual, acc, S (4 tokens padded to BLEN 4 rows x 64) and
     * more; 512 elements cannot hold even the ABI tensors */
    plena_gen_machine_default(&m);
    m.vram_elems = 512;
    static const char *const vr[] = {"VRAM", "limit 512", "model.hidden_size", NULL};
    expect_r005(example, example_len, &m, vr);
}

/* A huge top_k: tiny-route-256x8 reshaped to k = 200 over 8 tokens. FP:
 * 64 + 16 + 8 * 200 = 1680 entries > 1024 of the default FP SRAM. */
static void test_huge_top_k(void **state)
{
    (void)state;
    struct plena_moe_model mdl = *plena_gen_preset_find("tiny-route-256x8");
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
    static const char *const fp[] = {"FP SRAM", "needs 1680 entries", "limit 1024", "model.top_k",
                                     NULL};
    expect_r005(b.data, b.len, NULL, fp);
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    m.fp_depth = 1680;
    m.int_depth = 1616; /* 8 * 200 + 16 */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_sram_boundaries),
        cmocka_unit_test(test_huge_top_k),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
