/* Tests of plena_settings (docs/formats.md "Settings file", docs/timing.md
 * "Clock" and "HBM model"): the reference file's values (hand-copied from the
 * documented tables, not from costs.def), every message form, the rejections
 * of a missing latency key, a negative nRCD, MODEL = "ddr4" and CHANNELS = 6,
 * warnings, DC_EN column choice, overrides, the writer round trip and the
 * lookup order. Expected messages are the documented forms, character for
 * character. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "settings/settings.h"
#include "common/test_support.h"

#define NAME "plena_settings.toml"

/* noinline: once inlined into with_config, gcc 12 -O3 reports a false
 * -Wdangling-pointer on pointers derived from `data` (its address escapes). */
__attribute__((noinline)) static char *ref_file(size_t *len)
{
    const char *dir = getenv("PLENA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/configs/plena_settings.toml", dir ? dir : PLENA_SOURCE_DIR);
    char *data;
    size_t n;
    struct plena_err err = {0};
    assert_int_equal(plena_file_read_all(path, &data, &n, &err), 0);
    if (len) *len = n;
    return data;
}

/* Copy of text with the first `old` replaced by `new` (old must occur). */
static char *replace(const char *text, const char *old, const char *new)
{
    const char *at = strstr(text, old);
    if (!at) print_error("not found: %s\n", old);
    assert_non_null(at);
    size_t a = (size_t)(at - text), o = strlen(old), n = strlen(new), t = strlen(text);
    char *r = plena_malloc(t - o + n + 1);
    memcpy(r, text, a);
    memcpy(r + a, new, n);
    memcpy(r + a + n, at + o, t - a - o + 1);
    return r;
}

static char *replace_free(char *text, const char *old, const char *new)
{
    char *r = replace(text, old, new);
    plena_free(text);
    return r;
}

static char *append(const char *text, const char *tail)
{
    size_t t = strlen(text), n = strlen(tail);
    char *r = plena_malloc(t + n + 1);
    memcpy(r, text, t);
    memcpy(r + t, tail, n + 1);
    return r;
}

/* 1-based line of the first occurrence of needle. */
static int line_of(const char *text, const char *needle)
{
    const char *at = strstr(text, needle);
    assert_non_null(at);
    int line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

/* Reference text with CONFIG.<key>'s value replaced; *line gets the value's line. */
static char *with_config(const char *key, const char *value, int *line)
{
    char *ref = ref_file(NULL);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "[TRANSACTIONAL.CONFIG.%s]\nvalue = ", key);
    const char *at = strstr(ref, hdr);
    assert_non_null(at);
    const char *v = at + strlen(hdr);
    const char *eol = strchr(v, '\n');
    char old[256], new[256];
    snprintf(old, sizeof old, "%.*s", (int)(eol - at), at);
    snprintf(new, sizeof new, "%s%s", hdr, value);
    if (line) *line = line_of(ref, hdr) + 1;
    return replace_free(ref, old, new);
}

static void expect_ok(const char *text, struct plena_settings *s)
{
    struct plena_err err = {0};
    int rc = plena_settings_parse(text, strlen(text), NAME, s, &err);
    if (rc) print_error("unexpected: %s: %s\n", err.where, err.msg);
    assert_int_equal(rc, 0);
}

/* Parses expecting failure; compares "where: msg" as the CLI prints it. */
static void expect_msg(const char *text, const char *want)
{
    struct plena_settings *s = plena_malloc(sizeof *s);
    struct plena_err err = {0};
    char buf[1200];
    assert_int_equal(plena_settings_parse(text, strlen(text), NAME, s, &err), PLENA_E_INPUT);
    assert_int_equal(err.code, PLENA_E_INPUT);
    assert_string_equal(plena_err_format(&err, buf, sizeof buf), want);
    plena_free(s);
}

/* ref with its first old replaced by new fails with "<NAME>:<line>: msg",
 * line being that of the first at in the edited text (what the message names). */
static void expect_edit_msg(const char *ref, const char *old, const char *new, const char *at,
                            const char *msg)
{
    char *t = replace(ref, old, new);
    char want[512];
    snprintf(want, sizeof want, NAME ":%d: %s", line_of(t, at), msg);
    expect_msg(t, want);
    plena_free(t);
}

static void expect_config_msg(const char *key, const char *value, const char *fmt_rest)
{
    int line;
    char *t = with_config(key, value, &line);
    char want[512];
    snprintf(want, sizeof want, NAME ":%d: TRANSACTIONAL.CONFIG.%s.value: %s", line, key, fmt_rest);
    expect_msg(t, want);
    plena_free(t);
}

/* The reference latency table (docs/timing.md "Per-instruction costs"), dc_lib_en and
 * dc_lib_dis columns, in costs.def order. */
static const uint32_t spec_en[15] = {0, 1, 1, 1, 2, 4, 8, 9, 1, 4, 1, 1, 1, 1, 1};
static const uint32_t spec_dis[15] = {0, 2, 5, 6, 7, 4, 20, 9, 1, 4, 1, 2, 2, 2, 1};

static void check_reference_values(const struct plena_settings *s)
{
    /* CONFIG */
    assert_int_equal(s->dc_en, 1);
    assert_int_equal(s->max_loop_instructions, 100000);
    assert_int_equal(s->blen, 4);
    assert_int_equal(s->hlen, 16);
    assert_int_equal(s->mlen, 64);
    assert_int_equal(s->vlen, 64);
    assert_int_equal(s->broadcast_amount, 4);
    assert_true(s->hbm_size == 17179869184ull);
    assert_int_equal(s->matrix_sram_size, 4096);
    assert_int_equal(s->vector_sram_size, 4194304);
    assert_int_equal(s->hbm_m_prefetch_amount, 64);
    assert_int_equal(s->hbm_v_prefetch_amount, 4);
    assert_int_equal(s->hbm_v_writeback_amount, 4);
    assert_int_equal(s->fp_sram_depth, 1024);
    assert_int_equal(s->int_sram_depth, 1024);
    assert_int_equal(s->mx_mode, PLENA_MX_PLENA);
    assert_int_equal(s->clock_period_ps, 1000);
    assert_int_equal(s->config_hbm_channels, 0);
    /* PRECISION */
    const struct plena_hbm_type *t[4] = {&s->hbm_m_weight_type, &s->hbm_m_kv_type,
                                         &s->hbm_v_act_type, &s->hbm_v_kv_type};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t[i]->kind, PLENA_HBM_MX);
        assert_int_equal(t[i]->block, 8);
    }
    /* LATENCY */
    assert_int_equal(PLENA_LAT_COUNT, 15);
    for (int i = 0; i < 15; i++) {
        assert_int_equal(s->latency_en[i], spec_en[i]);
        assert_int_equal(s->latency_dis[i], spec_dis[i]);
        assert_int_equal(s->latency[i], spec_en[i]);
    }
    assert_int_equal(s->latency[PLENA_LAT_VECTOR_SUM_CYCLES], 8);
    /* HBM defaults (docs/timing.md "HBM model") */
    const struct plena_hbm_params *h = &s->hbm;
    assert_int_equal(h->model, PLENA_HBM_MODEL_HBM2);
    assert_int_equal(h->tck_ps, 1000);
    assert_int_equal(h->channels, 8);
    assert_int_equal(h->pseudo_channels, 2);
    assert_int_equal(h->bank_groups, 4);
    assert_int_equal(h->banks_per_group, 4);
    assert_int_equal(h->row_bytes, 1024);
    assert_int_equal(h->address_hash_bit, 16);
    assert_int_equal(h->row_idle_close, 64);
    assert_int_equal(h->nBL, 4);
    assert_int_equal(h->nCL, 7);
    assert_int_equal(h->nCWL, 2);
    assert_int_equal(h->nRCD, 7);
    assert_int_equal(h->nRP, 7);
    assert_int_equal(h->nRAS, 17);
    assert_int_equal(h->nRC, 19);
    assert_int_equal(h->nRTP, 2);
    assert_int_equal(h->nWR, 8);
    assert_int_equal(h->nWTR, 4);
    assert_int_equal(h->nRRDS, 2);
    assert_int_equal(h->nRRDL, 3);
    assert_int_equal(h->nFAW, 15);
    assert_int_equal(h->nREFI, 3900);
    assert_int_equal(h->nRFC, 350);
    /* derived (docs/machine.md "Configuration") */
    assert_int_equal(plena_settings_vram_elems(s), 268435456);
    assert_int_equal(plena_settings_mram_tiles(s), 64);
}

static void test_reference_file(void **state)
{
    (void)state;
    size_t len;
    char *text = ref_file(&len);
    struct plena_settings s;
    expect_ok(text, &s);
    check_reference_values(&s);
    assert_int_equal(s.n_warnings, 0);
    /* optional keys absent from the file are listed with their defaults */
    assert_non_null(strstr(s.defaults_used, "MX_MODE = \"plena\""));
    assert_non_null(strstr(s.defaults_used, "CLOCK_PERIOD_PS = 1000"));
    assert_non_null(strstr(s.defaults_used, "FP_SRAM_DEPTH = 1024"));
    assert_non_null(strstr(s.defaults_used, "HBM.MODEL = \"hbm2\""));
    assert_non_null(strstr(s.defaults_used, "HBM.nCL = 7"));
    assert_null(strstr(s.defaults_used, "MLEN"));
    /* the built-in copy is the same file, byte for byte */
    assert_int_equal(strlen(plena_settings_reference_text()), len);
    assert_memory_equal(plena_settings_reference_text(), text, len);
    struct plena_settings r;
    plena_settings_reference(&r);
    check_reference_values(&r);
    assert_string_equal(r.config_path, "");
    assert_true(plena_settings_equal(&r, &s));
    plena_free(text);
}

static void test_spec_example_messages(void **state)
{
    (void)state;
    char *ref = ref_file(NULL);
    /* 1: missing latency key */
    char *t =
        replace(ref, "[TRANSACTIONAL.LATENCY.VECTOR_SUM_CYCLES]\ndc_lib_en = 8\ndc_lib_dis = 20\n",
                "[TRANSACTIONAL.LATENCY.VECTOR_SUM_CYCLES]\ndc_lib_en = 8\n");
    expect_msg(t, "plena_settings.toml: TRANSACTIONAL.LATENCY.VECTOR_SUM_CYCLES.dc_lib_dis: "
                  "required key missing");
    plena_free(t);
    /* 2..4 */
    expect_config_msg("MLEN", "\"64\"", "expected integer, found string");
    expect_config_msg("VLEN", "32", "must equal MLEN (64), found 32");
    expect_config_msg("VLEN", "48", "must equal MLEN (64), found 48");
    /* 5: unsupported precision, reported at the table's header line */
    expect_edit_msg(ref,
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]\nformat = \"Mx\"\nblock = 8\n\n"
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE.ELEM]",
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]\nformat = \"Plain\"\n\n"
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE.DATA_TYPE]",
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]",
                    "TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE: Plain Fp(sign=true, exponent=4, "
                    "mantissa=3) is not supported");
    plena_free(ref);
}

static const char fragment[] = "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]\n"
                               "format = \"Mx\"\n"
                               "block = 8\n"
                               "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE.ELEM]\n"
                               "type = \"Fp\"\n"
                               "sign = true\n"
                               "exponent = 4\n"
                               "mantissa = 3\n"
                               "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE.SCALE]\n"
                               "type = \"Fp\"\n"
                               "sign = false\n"
                               "exponent = 8\n"
                               "mantissa = 0\n";

static void test_worked_fragment(void **state)
{
    (void)state;
    /* alone: the first missing key in CONFIG order */
    expect_msg(fragment, NAME ": TRANSACTIONAL.CONFIG.DC_EN.value: required key missing");
    char *ref = ref_file(NULL);
    const char *act = "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]\nformat = \"Mx\"\nblock = 8\n";
    /* block 32 is accepted */
    char *t = replace(ref, act,
                      "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]\nformat = \"Mx\"\nblock = 32\n");
    struct plena_settings s;
    expect_ok(t, &s);
    assert_int_equal(s.hbm_v_act_type.kind, PLENA_HBM_MX);
    assert_int_equal(s.hbm_v_act_type.block, 32);
    assert_int_equal(s.hbm_m_weight_type.block, 8);
    /* ... but MLEN must then be a multiple of 32 */
    char *t2 = replace(t, "[TRANSACTIONAL.CONFIG.MLEN]\nvalue = 64",
                       "[TRANSACTIONAL.CONFIG.MLEN]\nvalue = 16");
    t2 = replace_free(t2, "[TRANSACTIONAL.CONFIG.VLEN]\nvalue = 64",
                      "[TRANSACTIONAL.CONFIG.VLEN]\nvalue = 16");
    char want[512];
    snprintf(want, sizeof want,
             NAME ":%d: TRANSACTIONAL.CONFIG.MLEN.value: must be a multiple of the MX block size "
                  "(32) of TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE, found 16",
             line_of(t2, "[TRANSACTIONAL.CONFIG.MLEN]") + 1);
    expect_msg(t2, want);
    plena_free(t2);
    plena_free(t);
    /* ELEM e5m2 is rejected */
    const char *elem = "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE.ELEM]\ntype = \"Fp\"\nsign = true\n"
                       "exponent = 4\nmantissa = 3\n";
    expect_edit_msg(ref, elem,
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE.ELEM]\ntype = \"Fp\"\nsign = true\n"
                    "exponent = 5\nmantissa = 2\n",
                    "[TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE]",
                    "TRANSACTIONAL.PRECISION.HBM_V_ACT_TYPE: Mx(block=8, ELEM=Fp(sign=true, "
                    "exponent=5, mantissa=2), SCALE=Fp(sign=false, exponent=8, mantissa=0)) is not "
                    "supported");
    plena_free(ref);
}

static void test_missing_key_order(void **state)
{
    (void)state;
    char *ref = ref_file(NULL);
    /* PRECISION before LATENCY */
    char *t = replace(ref, "[TRANSACTIONAL.LATENCY.VECTOR_ADD_CYCLES]\ndc_lib_en = 1\n",
                      "[TRANSACTIONAL.LATENCY.VECTOR_ADD_CYCLES]\n");
    t = replace_free(t, "[TRANSACTIONAL.PRECISION.SCALAR_FP]", "[TRANSACTIONAL.PRECISION.OTHER]");
    expect_msg(t, NAME ": TRANSACTIONAL.PRECISION.SCALAR_FP: required key missing");
    /* CONFIG before PRECISION, in reference-file order (MLEN before HBM_SIZE) */
    t = replace_free(t, "[TRANSACTIONAL.CONFIG.HBM_SIZE]\nvalue = 17179869184\n", "");
    t = replace_free(t, "[TRANSACTIONAL.CONFIG.MLEN]\nvalue = 64\n", "");
    expect_msg(t, NAME ": TRANSACTIONAL.CONFIG.MLEN.value: required key missing");
    plena_free(t);
    /* a key table without its value is a missing key */
    t = replace(ref, "[TRANSACTIONAL.CONFIG.BLEN]\nvalue = 4\n", "[TRANSACTIONAL.CONFIG.BLEN]\n");
    expect_msg(t, NAME ": TRANSACTIONAL.CONFIG.BLEN.value: required key missing");
    plena_free(t);
    /* missing pieces inside a PRECISION table */
    t = replace(ref, "[TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE]\nformat = \"Mx\"\nblock = 8\n",
                "[TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE]\nformat = \"Mx\"\n");
    expect_msg(t, NAME ": TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE.block: required key missing");
    plena_free(t);
    /* a syntax error comes first of all */
    t = append(ref, "\nbroken = \n");
    char want[256];
    snprintf(want, sizeof want, NAME ":%d:10: syntax: expected a value, found end of line",
             line_of(t, "broken"));
    expect_msg(t, want);
    plena_free(t);
    plena_free(ref);
}

static void test_config_constraints(void **state)
{
    (void)state;
    expect_config_msg("DC_EN", "true", "expected integer, found boolean");
    expect_config_msg("MAX_LOOP_INSTRUCTIONS", "0", "must be >= 1, found 0");
    expect_config_msg("MLEN", "4", "must be in 8..65536, found 4");
    expect_config_msg("MLEN", "131072", "must be in 8..65536, found 131072");
    {
        char *t = with_config("BLEN", "5", NULL), want[256];
        snprintf(want, sizeof want,
                 NAME ":%d: TRANSACTIONAL.CONFIG.MLEN.value: must be a multiple of BLEN (5), "
                      "found 64",
                 line_of(t, "[TRANSACTIONAL.CONFIG.MLEN]") + 1);
        expect_msg(t, want);
        plena_free(t);
    }
    expect_config_msg("HLEN", "0", "must be >= 1, found 0");
    expect_config_msg("HLEN", "48", "must divide VLEN (64), found 48");
    expect_config_msg("HBM_SIZE", "100", "must be > 0, a multiple of 64 and <= 2^48, found 100");
    expect_config_msg("HBM_SIZE", "0", "must be > 0, a multiple of 64 and <= 2^48, found 0");
    expect_config_msg("HBM_SIZE", "281474976710720",
                      "must be > 0, a multiple of 64 and <= 2^48, found 281474976710720");
    expect_config_msg("MATRIX_SRAM_SIZE", "100",
                      "must be a multiple of MLEN (64), >= MLEN and <= 4294967295, found 100");
    expect_config_msg("VECTOR_SRAM_SIZE", "0", "must be >= 1, found 0");
    expect_config_msg("HBM_M_Prefetch_Amount", "-1", "must be in 0..4294967295, found -1");
    expect_config_msg("HBM_M_Prefetch_Amount", "4294967295",
                      "rounded up to a multiple of MLEN (64) exceeds 4294967295, found 4294967295");
    expect_config_msg("HBM_V_Prefetch_Amount", "-4", "must be >= 1, found -4");
    expect_config_msg("HBM_V_Writeback_Amount", "4294967296",
                      "must be <= 4294967295, found 4294967296");
    expect_config_msg("HBM_WIDTH", "\"wide\"", "expected integer, found string");
    /* optional keys, present */
    char *ref = ref_file(NULL);
    const char *opt[][3] = {
        {"FP_SRAM_DEPTH", "0", "must be in 1..16777216, found 0"},
        {"INT_SRAM_DEPTH", "16777217", "must be in 1..16777216, found 16777217"},
        {"HBM_GEN", "\"HBM3\"", "must be \"HBM2\", found \"HBM3\""},
        {"HBM_CHANNELS", "4", "must equal TRANSACTIONAL.HBM.CHANNELS (8), found 4"},
        {"MX_MODE", "\"mx\"", "must be one of \"plena\", \"ocp\", found \"mx\""},
        {"MX_MODE", "1", "expected string, found integer"},
        {"CLOCK_PERIOD_PS", "0", "must be in 1..1000000000, found 0"},
        /* a period near 2^62 hung in the HBM refresh loop and wrapped the total */
        {"CLOCK_PERIOD_PS", "4611686018427387904",
         "must be in 1..1000000000, found 4611686018427387904"},
    };
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        char tail[256], want[512];
        snprintf(tail, sizeof tail, "\n[TRANSACTIONAL.CONFIG.%s]\nvalue = %s\n", opt[i][0],
                 opt[i][1]);
        char *t = append(ref, tail);
        snprintf(want, sizeof want, NAME ":%d: TRANSACTIONAL.CONFIG.%s.value: %s",
                 line_of(t, tail + 1) + 1, opt[i][0], opt[i][2]);
        expect_msg(t, want);
        plena_free(t);
    }
    /* accepted optional values */
    char *t = append(ref, "\n[TRANSACTIONAL.CONFIG.MX_MODE]\nvalue = \"ocp\"\n"
                          "[TRANSACTIONAL.CONFIG.HBM_GEN]\nvalue = \"HBM2\"\n"
                          "[TRANSACTIONAL.CONFIG.HBM_CHANNELS]\nvalue = 8\n"
                          "[TRANSACTIONAL.CONFIG.CLOCK_PERIOD_PS]\nvalue = 500\n"
                          "[TRANSACTIONAL.CONFIG.FP_SRAM_DEPTH]\nvalue = 16777216\n");
    struct plena_settings s;
    expect_ok(t, &s);
    assert_int_equal(s.mx_mode, PLENA_MX_OCP);
    assert_int_equal(s.config_hbm_channels, 8);
    assert_int_equal(s.clock_period_ps, 500);
    assert_int_equal(s.fp_sram_depth, 16777216);
    assert_null(strstr(s.defaults_used, "MX_MODE"));
    assert_null(strstr(s.defaults_used, "CLOCK_PERIOD_PS"));
    assert_non_null(strstr(s.defaults_used, "INT_SRAM_DEPTH = 1024"));
    plena_free(t);
    /* a CONFIG key written as a plain value instead of a table */
    t = replace(ref, "[TRANSACTIONAL.CONFIG.DC_EN]\nvalue = 1\n", "");
    t = replace_free(
        t, "[TRANSACTIONAL.CONFIG.MAX_LOOP_INSTRUCTIONS]",
        "[TRANSACTIONAL.CONFIG]\nDC_EN = 1\n[TRANSACTIONAL.CONFIG.MAX_LOOP_INSTRUCTIONS]");
    char want[256];
    snprintf(want, sizeof want,
             NAME ":%d: TRANSACTIONAL.CONFIG.DC_EN: expected table, found integer",
             line_of(t, "DC_EN = 1"));
    expect_msg(t, want);
    plena_free(t);
    plena_free(ref);
}

static void test_precision_rules(void **state)
{
    (void)state;
    char *ref = ref_file(NULL);
    const char *w = "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE]\nformat = \"Mx\"\nblock = 8\n\n"
                    "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE.ELEM]\ntype = \"Fp\"\nsign = true\n"
                    "exponent = 4\nmantissa = 3\n";
    /* Plain BF16 and FP16 are accepted for HBM types */
    char *t = replace(ref, w,
                      "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE]\nformat = \"Plain\"\n"
                      "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE.DATA_TYPE]\ntype = \"Fp\"\n"
                      "sign = true\nexponent = 5\nmantissa = 10\n");
    struct plena_settings s;
    expect_ok(t, &s);
    assert_int_equal(s.hbm_m_weight_type.kind, PLENA_HBM_FP16);
    plena_free(t);
    t = replace(ref, w,
                "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE]\nformat = \"Plain\"\n"
                "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE.DATA_TYPE]\ntype = \"Fp\"\n"
                "sign = true\nexponent = 8\nmantissa = 7\n");
    expect_ok(t, &s);
    assert_int_equal(s.hbm_m_weight_type.kind, PLENA_HBM_BF16);
    plena_free(t);
    /* other plain types are not */
    expect_edit_msg(ref, w,
                    "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE]\nformat = \"Plain\"\n"
                    "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE.DATA_TYPE]\ntype = \"Int\"\n"
                    "width = 8\n",
                    "[TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE]",
                    "TRANSACTIONAL.PRECISION.HBM_M_WEIGHT_TYPE: Plain Int(width=8) is not "
                    "supported");
    /* MRAM type must be BF16 */
    expect_edit_msg(ref,
                    "[TRANSACTIONAL.PRECISION.MATRIX_SRAM_TYPE.DATA_TYPE]\ntype = \"Fp\"\nsign = "
                    "true\nexponent = 8\nmantissa = 7\n",
                    "[TRANSACTIONAL.PRECISION.MATRIX_SRAM_TYPE.DATA_TYPE]\ntype = \"Fp\"\nsign = "
                    "true\nexponent = 5\nmantissa = 10\n",
                    "[TRANSACTIONAL.PRECISION.MATRIX_SRAM_TYPE]",
                    "TRANSACTIONAL.PRECISION.MATRIX_SRAM_TYPE: Plain Fp(sign=true, exponent=5, "
                    "mantissa=10) is not supported");
    /* bad format string and wrong sign type */
    expect_edit_msg(ref, "[TRANSACTIONAL.PRECISION.HBM_V_KV_TYPE]\nformat = \"Mx\"",
                    "[TRANSACTIONAL.PRECISION.HBM_V_KV_TYPE]\nformat = \"Block\"",
                    "format = \"Block\"",
                    "TRANSACTIONAL.PRECISION.HBM_V_KV_TYPE.format: must be \"Plain\" or \"Mx\", "
                    "found \"Block\"");
    expect_edit_msg(ref, "[TRANSACTIONAL.PRECISION.SCALAR_FP]\ntype = \"Fp\"\nsign = true",
                    "[TRANSACTIONAL.PRECISION.SCALAR_FP]\ntype = \"Fp\"\nsign = 1", "sign = 1",
                    "TRANSACTIONAL.PRECISION.SCALAR_FP.sign: expected boolean, found integer");
    plena_free(ref);
}

static void test_hbm_table(void **state)
{
    (void)state;
    char *ref = ref_file(NULL);
    const char *bad[][3] = {
        {"nRCD = -1", "nRCD", "must be >= 0, found -1"},
        {"MODEL = \"ddr4\"", "MODEL", "must be one of \"hbm2\", \"ideal\", found \"ddr4\""},
        {"CHANNELS = 6", "CHANNELS", "must be a power of two, found 6"},
        {"CHANNELS = 0", "CHANNELS", "must be a power of two, found 0"},
        {"PSEUDO_CHANNELS = 3", "PSEUDO_CHANNELS", "must be a power of two, found 3"},
        {"BANK_GROUPS = -4", "BANK_GROUPS", "must be >= 0, found -4"},
        {"BANKS_PER_GROUP = 12", "BANKS_PER_GROUP", "must be a power of two, found 12"},
        {"ROW_BYTES = 32", "ROW_BYTES", "must be a power of two >= 64, found 32"},
        {"ROW_BYTES = 1000", "ROW_BYTES", "must be a power of two >= 64, found 1000"},
        {"ADDRESS_HASH_BIT = 3", "ADDRESS_HASH_BIT", "must be 0 or in 6..63, found 3"},
        {"ADDRESS_HASH_BIT = 64", "ADDRESS_HASH_BIT", "must be in 0..63, found 64"},
        {"TCK_PS = 0", "TCK_PS", "must be in 1..1000000000, found 0"},
        {"TCK_PS = 1000000001", "TCK_PS", "must be in 1..1000000000, found 1000000001"},
        {"nBL = 0", "nBL", "must be >= 1, found 0"},
        {"nCL = 7.0", "nCL", "expected integer, found float"},
        {"MODEL = 1", "MODEL", "expected string, found integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char tail[256], want[512];
        snprintf(tail, sizeof tail, "\n[TRANSACTIONAL.HBM]\nnWR = 8\n%s\n", bad[i][0]);
        char *t = append(ref, tail);
        snprintf(want, sizeof want, NAME ":%d: TRANSACTIONAL.HBM.%s: %s", line_of(t, bad[i][0]),
                 bad[i][1], bad[i][2]);
        expect_msg(t, want);
        plena_free(t);
    }
    char *t = append(ref, "\n[TRANSACTIONAL.HBM]\nMODEL = \"ideal\"\nCHANNELS = 16\nnCL = 0\n"
                          "ADDRESS_HASH_BIT = 0\nROW_BYTES = 64\nnREFI = 0\nTCK_PS = 1250\n");
    struct plena_settings s;
    expect_ok(t, &s);
    assert_int_equal(s.hbm.model, PLENA_HBM_MODEL_IDEAL);
    assert_int_equal(s.hbm.channels, 16);
    assert_int_equal(s.hbm.nCL, 0);
    assert_int_equal(s.hbm.address_hash_bit, 0);
    assert_int_equal(s.hbm.row_bytes, 64);
    assert_int_equal(s.hbm.nREFI, 0);
    assert_int_equal(s.hbm.tck_ps, 1250);
    assert_int_equal(s.hbm.nRCD, 7);
    assert_null(strstr(s.defaults_used, "HBM.MODEL"));
    assert_non_null(strstr(s.defaults_used, "HBM.nRCD = 7"));
    /* the listing for run-stats */
    const char *names[32];
    uint64_t values[32];
    size_t n = plena_settings_hbm_params(&s, names, values, 32);
    assert_int_equal(n, 23); /* the HBM keys minus MODEL */
    assert_string_equal(names[0], "TCK_PS");
    assert_int_equal(values[0], 1250);
    assert_string_equal(names[1], "CHANNELS");
    assert_int_equal(values[1], 16);
    assert_string_equal(names[22], "nRFC");
    assert_int_equal(values[22], 350);
    assert_int_equal(plena_settings_hbm_params(&s, NULL, NULL, 0), 23);
    assert_string_equal(plena_settings_hbm_model_name(s.hbm.model), "ideal");
    plena_free(t);
    /* CONFIG.HBM_CHANNELS follows HBM.CHANNELS */
    t = append(ref, "\n[TRANSACTIONAL.CONFIG.HBM_CHANNELS]\nvalue = 16\n"
                    "[TRANSACTIONAL.HBM]\nCHANNELS = 16\n");
    expect_ok(t, &s);
    assert_int_equal(s.config_hbm_channels, 16);
    plena_free(t);
    plena_free(ref);
}

static void test_unknown_key_warnings(void **state)
{
    (void)state;
    char *ref = ref_file(NULL);
    char *t = append(ref, "\n[TRANSACTIONAL.CONFIG.FOO]\nvalue = 1\n"
                          "[TRANSACTIONAL.LATENCY.VECTOR_DIV_CYCLES]\ndc_lib_en = 3\n"
                          "[TRANSACTIONAL.HBM]\nnCl = 8\n"
                          "[TRANSACTIONAL.PRECISION.MATRIX_SEMANTICS]\nx = 1\n");
    struct plena_settings s;
    expect_ok(t, &s);
    assert_int_equal(s.n_warnings, 3);
    char want[256];
    snprintf(want, sizeof want, NAME ":%d: TRANSACTIONAL.CONFIG.FOO: unknown key ignored",
             line_of(t, "[TRANSACTIONAL.CONFIG.FOO]"));
    assert_string_equal(s.warnings[0], want);
    snprintf(want, sizeof want, NAME ":%d: TRANSACTIONAL.HBM.nCl: unknown key ignored",
             line_of(t, "nCl = 8"));
    assert_string_equal(s.warnings[1], want);
    snprintf(want, sizeof want,
             NAME ":%d: TRANSACTIONAL.LATENCY.VECTOR_DIV_CYCLES: unknown key ignored",
             line_of(t, "[TRANSACTIONAL.LATENCY.VECTOR_DIV_CYCLES]"));
    assert_string_equal(s.warnings[2], want);
    assert_int_equal(s.hbm.nCL, 7);
    plena_free(t);
    plena_free(ref);
}

/* HBM_M_Prefetch_Amount as upstream's runtime_config.rs: below MLEN ->
 * MLEN, not a multiple -> rounded up, each with a warning naming the key,
 * the value and the clamped value; multiples of MLEN unchanged. */
static void test_prefetch_m_clamped_as_upstream(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        uint32_t used;
        const char *why; /* NULL: no warning */
    } cases[] = {
        {"16", 64, "16 is below MLEN (64); clamped to 64"},
        {"0", 64, "0 is below MLEN (64); clamped to 64"},
        {"100", 128, "100 is not a multiple of MLEN (64), rounded up; clamped to 128"},
        {"192", 192, NULL},
    };
    struct plena_settings *s = plena_malloc(sizeof *s);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int line;
        char *t = with_config("HBM_M_Prefetch_Amount", cases[i].value, &line);
        expect_ok(t, s);
        assert_int_equal(s->hbm_m_prefetch_amount, cases[i].used);
        if (!cases[i].why) {
            assert_int_equal(s->n_warnings, 0);
        } else {
            char want[400];
            snprintf(want, sizeof want,
                     NAME ":%d: TRANSACTIONAL.CONFIG.HBM_M_Prefetch_Amount.value: %s (as the "
                          "upstream emulator does)",
                     line, cases[i].why);
            assert_int_equal(s->n_warnings, 1);
            assert_string_equal(s->warnings[0], want);
        }
        plena_free(t);
    }
    /* --set goes through the same rule */
    plena_settings_reference(s);
    assert_int_equal(plena_settings_override(s, "CONFIG.HBM_M_Prefetch_Amount=65", NULL), 0);
    assert_int_equal(s->hbm_m_prefetch_amount, 128);
    assert_int_equal(s->n_warnings, 1);
    assert_non_null(strstr(s->warnings[0], "--set CONFIG.HBM_M_Prefetch_Amount=65: "));
    plena_free(s);
}

static void test_dc_en_zero(void **state)
{
    (void)state;
    char *t = with_config("DC_EN", "0", NULL);
    struct plena_settings s;
    expect_ok(t, &s);
    assert_int_equal(s.dc_en, 0);
    for (int i = 0; i < 15; i++)
        assert_int_equal(s.latency[i], spec_dis[i]);
    assert_int_equal(s.latency[PLENA_LAT_VECTOR_ADD_CYCLES], 2);
    plena_free(t);
    /* any non-zero value selects dc_lib_en */
    t = with_config("DC_EN", "-7", NULL);
    expect_ok(t, &s);
    for (int i = 0; i < 15; i++)
        assert_int_equal(s.latency[i], spec_en[i]);
    plena_free(t);
    /* latency values: integers >= 0 */
    char *ref = ref_file(NULL);
    expect_edit_msg(ref, "[TRANSACTIONAL.LATENCY.VECTOR_EXP_CYCLES]\ndc_lib_en = 1",
                    "[TRANSACTIONAL.LATENCY.VECTOR_EXP_CYCLES]\ndc_lib_en = -1", "dc_lib_en = -1",
                    "TRANSACTIONAL.LATENCY.VECTOR_EXP_CYCLES.dc_lib_en: must be in "
                    "0..4294967295, found -1");
    expect_edit_msg(ref, "[TRANSACTIONAL.LATENCY.VECTOR_EXP_CYCLES]\ndc_lib_en = 1",
                    "[TRANSACTIONAL.LATENCY.VECTOR_EXP_CYCLES]\ndc_lib_en = \"1\"",
                    "dc_lib_en = \"1\"",
                    "TRANSACTIONAL.LATENCY.VECTOR_EXP_CYCLES.dc_lib_en: expected integer, "
                    "found string");
    plena_free(ref);
}

static void test_overrides(void **state)
{
    (void)state;
    struct plena_settings s, before;
    plena_settings_reference(&s);
    before = s;
    struct plena_err err = {0};
    char buf[1200];
    /* MLEN alone breaks VLEN == MLEN: rejected naming VLEN, s unchanged */
    assert_int_equal(plena_settings_override(&s, "CONFIG.MLEN=32", &err), PLENA_E_INPUT);
    assert_string_equal(plena_err_format(&err, buf, sizeof buf),
                        "--set CONFIG.MLEN=32: TRANSACTIONAL.CONFIG.VLEN.value: must equal MLEN "
                        "(32), found 64");
    assert_true(plena_settings_equal(&s, &before));
    assert_int_equal(s.mlen, 64);
    const char *both[] = {"CONFIG.MLEN=32", "CONFIG.VLEN = 32"};
    assert_int_equal(plena_settings_override_many(&s, both, 2, NULL), 0);
    assert_int_equal(s.mlen, 32);
    assert_int_equal(s.vlen, 32);
    assert_int_equal(plena_settings_override(&s, "LATENCY.SYSTOLIC_PROCESSING_OVERHEAD=1", NULL),
                     0);
    assert_int_equal(s.latency[PLENA_LAT_SYSTOLIC_PROCESSING_OVERHEAD], 1);
    assert_int_equal(s.latency_en[PLENA_LAT_SYSTOLIC_PROCESSING_OVERHEAD], 1);
    assert_int_equal(s.latency_dis[PLENA_LAT_SYSTOLIC_PROCESSING_OVERHEAD], 0);
    assert_int_equal(plena_settings_override(&s, "HBM.nCL=8", NULL), 0);
    assert_int_equal(s.hbm.nCL, 8);
    assert_int_equal(plena_settings_override(&s, "HBM.MODEL=ideal", NULL), 0);
    assert_int_equal(s.hbm.model, PLENA_HBM_MODEL_IDEAL);
    assert_int_equal(plena_settings_override(&s, "TRANSACTIONAL.CONFIG.MX_MODE=\"ocp\"", NULL), 0);
    assert_int_equal(s.mx_mode, PLENA_MX_OCP);
    /* DC_EN switches the active column */
    assert_int_equal(plena_settings_override(&s, "CONFIG.DC_EN=0", NULL), 0);
    assert_int_equal(s.latency[PLENA_LAT_VECTOR_ADD_CYCLES], 2);
    assert_int_equal(s.latency[PLENA_LAT_SYSTOLIC_PROCESSING_OVERHEAD], 0);
    assert_int_equal(plena_settings_override(&s, "LATENCY.VECTOR_ADD_CYCLES=9", NULL), 0);
    assert_int_equal(s.latency_dis[PLENA_LAT_VECTOR_ADD_CYCLES], 9);
    assert_int_equal(s.latency[PLENA_LAT_VECTOR_ADD_CYCLES], 9);
    assert_int_equal(s.latency_en[PLENA_LAT_VECTOR_ADD_CYCLES], 1);
    /* rejections name the key */
    struct {
        const char *a, *msg;
    } bad[] = {
        {"HBM.MODEL=ddr4",
         "--set HBM.MODEL=ddr4: TRANSACTIONAL.HBM.MODEL: must be one of \"hbm2\", \"ideal\", "
         "found \"ddr4\""},
        {"HBM.CHANNELS=6", "--set HBM.CHANNELS=6: TRANSACTIONAL.HBM.CHANNELS: must be a power of "
                           "two, found 6"},
        {"HBM.nRCD=-1", "--set HBM.nRCD=-1: TRANSACTIONAL.HBM.nRCD: must be >= 0, found -1"},
        {"CONFIG.BLEN=x", "--set CONFIG.BLEN=x:1:1: syntax: malformed value 'x'"},
        {"CONFIG.BLEN=\"4\"",
         "--set CONFIG.BLEN=\"4\": TRANSACTIONAL.CONFIG.BLEN.value: expected integer, found "
         "string"},
        {"CONFIG.NOPE=1", "--set CONFIG.NOPE=1: TRANSACTIONAL.CONFIG.NOPE: unknown key"},
        {"LATENCY.NOPE=1", "--set LATENCY.NOPE=1: TRANSACTIONAL.LATENCY.NOPE: unknown latency key"},
        {"LATENCY.VECTOR_ADD_CYCLES=-2",
         "--set LATENCY.VECTOR_ADD_CYCLES=-2: TRANSACTIONAL.LATENCY.VECTOR_ADD_CYCLES: must be in "
         "0..4294967295, found -2"},
        {"PRECISION.X=1",
         "--set PRECISION.X=1: PRECISION.X: expected CONFIG.<KEY>, LATENCY.<KEY> or HBM.<KEY>"},
        {"CONFIG.MLEN", "--set CONFIG.MLEN: expected TABLE.KEY=VALUE"},
        {"CONFIG.HBM_CHANNELS=4",
         "--set CONFIG.HBM_CHANNELS=4: TRANSACTIONAL.CONFIG.HBM_CHANNELS.value: must equal "
         "TRANSACTIONAL.HBM.CHANNELS (8), found 4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        before = s;
        plena_err_clear(&err);
        assert_int_equal(plena_settings_override(&s, bad[i].a, &err), PLENA_E_INPUT);
        assert_string_equal(plena_err_format(&err, buf, sizeof buf), bad[i].msg);
        assert_true(plena_settings_equal(&s, &before));
    }
    assert_int_equal(plena_settings_override(&s, "CONFIG.HBM_CHANNELS=8", NULL), 0);
    assert_int_equal(s.config_hbm_channels, 8);
    /* then changing HBM.CHANNELS alone contradicts it */
    plena_err_clear(&err);
    assert_int_equal(plena_settings_override(&s, "HBM.CHANNELS=16", &err), PLENA_E_INPUT);
    assert_string_equal(plena_err_format(&err, buf, sizeof buf),
                        "--set HBM.CHANNELS=16: TRANSACTIONAL.CONFIG.HBM_CHANNELS.value: must "
                        "equal TRANSACTIONAL.HBM.CHANNELS (16), found 8");
}

static void roundtrip(const struct plena_settings *s)
{
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_settings_to_toml(s, &b), 0);
    assert_int_equal(plena_buf_append(&b, "", 1), 0);
    struct plena_settings r;
    expect_ok(b.data, &r);
    assert_true(plena_settings_equal(s, &r));
    assert_int_equal(r.n_warnings, 0);
    /* every optional key is explicit in the written file */
    assert_string_equal(r.defaults_used, "");
    plena_buf_free(&b);
}

static void test_to_toml_roundtrip(void **state)
{
    (void)state;
    struct plena_settings s;
    plena_settings_reference(&s);
    roundtrip(&s);
    const char *set[] = {"CONFIG.DC_EN=0",
                         "CONFIG.MLEN=32",
                         "CONFIG.VLEN=32",
                         "CONFIG.HBM_SIZE=4096",
                         "CONFIG.MX_MODE=ocp",
                         "CONFIG.CLOCK_PERIOD_PS=750",
                         "CONFIG.FP_SRAM_DEPTH=77",
                         "HBM.MODEL=ideal",
                         "HBM.nRFC=0",
                         "HBM.CHANNELS=2",
                         "CONFIG.HBM_CHANNELS=2",
                         "LATENCY.VECTOR_SUM_CYCLES.dc_lib_en=33"};
    assert_int_equal(plena_settings_override_many(&s, set, sizeof set / sizeof set[0], NULL), 0);
    roundtrip(&s);
    /* precision variants come from a file */
    char *ref = ref_file(NULL);
    char *t = replace(ref, "[TRANSACTIONAL.PRECISION.HBM_V_KV_TYPE]\nformat = \"Mx\"\nblock = 8",
                      "[TRANSACTIONAL.PRECISION.HBM_V_KV_TYPE]\nformat = \"Mx\"\nblock = 32");
    t = replace_free(t,
                     "[TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE]\nformat = \"Mx\"\nblock = 8\n\n"
                     "[TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE.ELEM]\ntype = \"Fp\"\nsign = true\n"
                     "exponent = 4\nmantissa = 3\n",
                     "[TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE]\nformat = \"Plain\"\n"
                     "[TRANSACTIONAL.PRECISION.HBM_M_KV_TYPE.DATA_TYPE]\ntype = \"Fp\"\n"
                     "sign = true\nexponent = 5\nmantissa = 10\n");
    expect_ok(t, &s);
    assert_int_equal(s.hbm_m_kv_type.kind, PLENA_HBM_FP16);
    assert_int_equal(s.hbm_v_kv_type.block, 32);
    roundtrip(&s);
    /* plena_settings_equal notices a difference (negative control) */
    struct plena_settings r;
    plena_settings_reference(&r);
    assert_false(plena_settings_equal(&s, &r));
    r.hbm.nRFC++;
    struct plena_settings r2;
    plena_settings_reference(&r2);
    assert_false(plena_settings_equal(&r, &r2));
    plena_free(t);
    plena_free(ref);
}

static void write_file(const char *path, const char *text)
{
    struct plena_err err = {0};
    assert_int_equal(plena_file_write_atomic(path, text, strlen(text), &err), 0);
}

static void test_lookup_order(void **state)
{
    (void)state;
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char tmpl[] = "/tmp/plena_settings_XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char a[64], ab[64], p_env[128], p_explicit[128], p_up[128], p_here[128];
    snprintf(a, sizeof a, "%s/a", tmpl);
    snprintf(ab, sizeof ab, "%s/a/b", tmpl);
    assert_int_equal(mkdir(a, 0700), 0);
    assert_int_equal(mkdir(ab, 0700), 0);
    snprintf(p_env, sizeof p_env, "%s/env.toml", tmpl);
    snprintf(p_explicit, sizeof p_explicit, "%s/explicit.toml", tmpl);
    snprintf(p_up, sizeof p_up, "%s/plena_settings.toml", a);
    snprintf(p_here, sizeof p_here, "%s/plena_settings.toml", ab);
    /* files that differ in one value each, to tell them apart */
    char *t;
    t = with_config("MAX_LOOP_INSTRUCTIONS", "11", NULL);
    write_file(p_env, t);
    plena_free(t);
    t = with_config("MAX_LOOP_INSTRUCTIONS", "22", NULL);
    write_file(p_explicit, t);
    plena_free(t);
    t = with_config("MAX_LOOP_INSTRUCTIONS", "33", NULL);
    write_file(p_up, t);
    plena_free(t);
    t = with_config("MAX_LOOP_INSTRUCTIONS", "44", NULL);
    write_file(p_here, t);
    plena_free(t);

    assert_int_equal(chdir(ab), 0);
    struct plena_settings s;
    struct plena_err err = {0};
    unsetenv("PLENA_SETTINGS_TOML");
    /* explicit path first */
    setenv("PLENA_SETTINGS_TOML", p_env, 1);
    assert_int_equal(plena_settings_load(p_explicit, &s, &err), 0);
    assert_int_equal(s.max_loop_instructions, 22);
    assert_string_equal(s.config_path, p_explicit);
    /* then the environment */
    assert_int_equal(plena_settings_load(NULL, &s, &err), 0);
    assert_int_equal(s.max_loop_instructions, 11);
    assert_string_equal(s.config_path, p_env);
    /* an unreadable named file is invalid input, never a fallback */
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing.toml", tmpl);
    setenv("PLENA_SETTINGS_TOML", missing, 1);
    assert_int_equal(plena_settings_load(NULL, &s, &err), PLENA_E_INPUT);
    plena_err_clear(&err);
    assert_int_equal(plena_settings_load(missing, &s, &err), PLENA_E_INPUT);
    plena_err_clear(&err);
    /* an endless file is refused at the settings limit (it was read without bound) */
    assert_int_equal(plena_settings_load("/dev/zero", &s, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "larger than the 1048576-byte limit (settings files)"));
    plena_err_clear(&err);
    unsetenv("PLENA_SETTINGS_TOML");
    /* ./ then ../ then the built-in copy */
    assert_int_equal(plena_settings_load(NULL, &s, &err), 0);
    assert_int_equal(s.max_loop_instructions, 44);
    assert_string_equal(s.config_path, "plena_settings.toml");
    assert_int_equal(unlink(p_here), 0);
    assert_int_equal(plena_settings_load(NULL, &s, &err), 0);
    assert_int_equal(s.max_loop_instructions, 33);
    assert_string_equal(s.config_path, "../plena_settings.toml");
    assert_int_equal(unlink(p_up), 0);
    assert_int_equal(plena_settings_load(NULL, &s, &err), 0);
    assert_int_equal(s.max_loop_instructions, 100000);
    assert_string_equal(s.config_path, "");
    /* errors in a found file name that file */
    write_file(p_here, fragment);
    assert_int_equal(plena_settings_load(NULL, &s, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, "plena_settings.toml");
    assert_int_equal(chdir(cwd), 0);
    unlink(p_here);
    unlink(p_env);
    unlink(p_explicit);
    rmdir(ab);
    rmdir(a);
    rmdir(tmpl);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    char *ref = ref_file(NULL);
    size_t n = strlen(ref);
    int ok = 0;
    /* a few thousand allocations: sweep with a stride, then the tail exactly */
    for (long k = 0; k < 100000 && !ok; k += k < 64 ? 1 : 37) {
        struct plena_settings *s = malloc(sizeof *s);
        struct plena_err err = {0};
        plena_alloc_fail_after(k);
        int rc = plena_settings_parse(ref, n, NAME, s, &err);
        plena_alloc_fail_reset();
        if (rc == 0)
            ok = 1;
        else
            assert_int_equal(rc, PLENA_E_NOMEM);
        free(s);
    }
    assert_true(ok);
    plena_free(ref);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_reference_file),
    cmocka_unit_test(test_spec_example_messages),
    cmocka_unit_test(test_worked_fragment),
    cmocka_unit_test(test_missing_key_order),
    cmocka_unit_test(test_config_constraints),
    cmocka_unit_test(test_precision_rules),
    cmocka_unit_test(test_hbm_table),
    cmocka_unit_test(test_unknown_key_warnings),
    cmocka_unit_test(test_dc_en_zero),
    cmocka_unit_test(test_prefetch_m_clamped_as_upstream),
    cmocka_unit_test(test_overrides),
    cmocka_unit_test(test_to_toml_roundtrip),
    cmocka_unit_test(test_lookup_order),
    cmocka_unit_test(test_alloc_failures),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
