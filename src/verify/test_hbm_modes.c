/* Whole programs through the HBM model paths (docs/timing.md "HBM model"):
 * the default skip-ahead controller with its channel memo, the same without
 * the memo, and the literal tick-by-tick definition
 * (plena_run_opts.hbm_exhaustive) must give the same run totals, HBM bytes
 * and per-stage figures on sequential (H_STORE_V), strided (H_PREFETCH_M)
 * and random-offset (H_PREFETCH_V) programs and on the MoE layers of three
 * tiny presets; the stage profiles are compared byte for byte. The
 * expected values are the literal model's, never the fast path's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/test_support.h"
#include "gen/build.h"
#include "run/run.h"

static char g_tmp[256];
static struct plena_settings g_set;

static int setup(void **state)
{
    (void)state;
    plena_settings_reference(&g_set);
    assert_int_equal(plena_test_mkdtemp(g_tmp, sizeof g_tmp, "hbm_modes"), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    plena_test_rmtree(g_tmp);
    return 0;
}

/* One timed, profiled run of dir/name (with dir/<name>.asm labels for a
 * .mem program); the profile goes to dir/<tag>.json. */
/* mode 0: literal, 1: skip-ahead without memo, 2: the default */
static void run_once(const char *dir, const char *prog, int mode, const char *tag,
                     struct plena_run_outcome *out)
{
    char p_prog[512], p_asm[512], p_prof[512], p_hbm[512], p_fp[512], p_int[512], p_vram[512];
    snprintf(p_prog, sizeof p_prog, "%s/%s", dir, prog);
    snprintf(p_prof, sizeof p_prof, "%s/%s.json", dir, tag);
    struct plena_run_opts o;
    memset(&o, 0, sizeof o);
    o.program_path = p_prog;
    o.settings = &g_set;
    o.hbm_model = -1;
    o.threads = 1;
    o.profile_path = p_prof;
    o.hbm_exhaustive = mode == 0;
    o.hbm_memo_off = mode == 1;
    size_t n = strlen(prog);
    if (n > 4 && !strcmp(prog + n - 4, ".mem")) {
        snprintf(p_asm, sizeof p_asm, "%s/program.asm", dir);
        snprintf(p_hbm, sizeof p_hbm, "%s/hbm.bin", dir);
        snprintf(p_fp, sizeof p_fp, "%s/fp_sram.bin", dir);
        snprintf(p_int, sizeof p_int, "%s/int_sram.bin", dir);
        snprintf(p_vram, sizeof p_vram, "%s/vram_preload.bin", dir);
        o.asm_path = p_asm;
        o.hbm_path = p_hbm;
        o.fpsram_path = p_fp;
        o.intsram_path = p_int;
        o.vram_path = p_vram;
    }
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_run_execute(&o, out, &err);
    if (rc) fprintf(stderr, "%s: %s: %s\n", prog, err.where, err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(out->status, PLENA_RUN_OUT_COMPLETED);
    assert_true(out->profile_written);
}

/* Runs prog the three ways and requires every figure equal; returns the
 * totals and the default run's memo hits. */
static void same_figures(const char *dir, const char *prog, uint64_t *cycles, uint64_t *bytes,
                         uint64_t *memo_hits)
{
    static const char *const tags[3] = {"literal", "nomemo", "fast"};
    struct plena_run_outcome *o = plena_calloc(3, sizeof *o), *a = o;
    assert_non_null(o);
    for (int mode = 0; mode < 3; mode++)
        run_once(dir, prog, mode, tags[mode], &o[mode]);
    size_t la;
    char pa[512];
    snprintf(pa, sizeof pa, "%s.json", tags[0]);
    char *ja = plena_test_read_file(dir, pa, &la);
    for (int mode = 1; mode < 3; mode++) {
        const struct plena_run_outcome *b = &o[mode];
        assert_int_equal(a->instructions_executed, b->instructions_executed);
        assert_int_equal(a->serial_picos, b->serial_picos);
        assert_int_equal(a->reported_cycles, b->reported_cycles);
        assert_int_equal(a->bytes_read, b->bytes_read);
        assert_int_equal(a->bytes_written, b->bytes_written);
        assert_memory_equal(a->stage_wall_picos, b->stage_wall_picos, sizeof a->stage_wall_picos);
        /* the profile holds the per-stage picoseconds, cycles and bytes */
        size_t lb;
        char pb[512];
        snprintf(pb, sizeof pb, "%s.json", tags[mode]);
        char *jb = plena_test_read_file(dir, pb, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ja, jb, la);
        free(jb);
    }
    free(ja);
    assert_int_equal(o[0].hbm_memo_hits, 0);
    assert_int_equal(o[1].hbm_memo_hits, 0);
    print_message(
        "%s/%s: %llu cycles, %llu B read, %llu B written, %llu channel parts from the memo\n",
        strrchr(dir, '/') + 1, prog, (unsigned long long)a->reported_cycles,
        (unsigned long long)a->bytes_read, (unsigned long long)a->bytes_written,
        (unsigned long long)o[2].hbm_memo_hits);
    *cycles = a->reported_cycles;
    *bytes = a->bytes_read + a->bytes_written;
    *memo_hits = o[2].hbm_memo_hits;
    plena_free(o);
}

static uint64_t g_rng = 99;
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

/* Appends to a growing program text. */
static void add(char **buf, size_t *len, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof line);
    char *p = realloc(*buf, *len + (size_t)n + 1);
    assert_non_null(p);
    memcpy(p + *len, line, (size_t)n + 1);
    *buf = p;
    *len += (size_t)n;
}

/* pattern 0: H_STORE_V, sequential rows (sequential issue, read-modify-write);
 * 1: H_PREFETCH_M of a [64, 2048] MXFP8 weight, column blocks (strided);
 * 2: H_PREFETCH_V at random offsets over 16 MiB with compute in between. */
static void write_program(int pattern, const char *name)
{
    char *t = NULL;
    size_t n = 0;
    add(&t, &n, "; @stage=expert_weight_prefetch\n");
    add(&t, &n, "S_LUI_INT gp4, %u\n", pattern == 1 ? 32u : 4096u); /* SCALE 128 KiB | 16 MiB */
    add(&t, &n, "C_SET_SCALE_REG gp4\n");
    add(&t, &n, "S_ADDI_INT gp5, gp0, %u\n", pattern == 1 ? 2048u : 64u);
    add(&t, &n, "C_SET_STRIDE_REG gp5\n");
    add(&t, &n, "C_SET_ADDR_REG a1, gp0, gp0\n");
    add(&t, &n, "S_ADDI_INT gp6, gp0, 4096\n");
    for (int i = 0; i < 120; i++) {
        uint32_t off = pattern == 0   ? 256u * (uint32_t)i
                       : pattern == 1 ? 64u * (uint32_t)(i % 32)
                                      : 64u * (rnd() % 4096u);
        add(&t, &n, "S_ADDI_INT gp1, gp0, %u\n", off);
        if (pattern == 0) {
            add(&t, &n, "H_STORE_V gp6, gp1, a1, 1, 0\n");
        } else if (pattern == 1) {
            add(&t, &n, "H_PREFETCH_M gp0, gp1, a1, 1, 0\n");
        } else {
            add(&t, &n, "H_PREFETCH_V gp6, gp1, a1, 1, 0\n");
        }
        if (i % 7 == 3) {
            add(&t, &n, "; @stage=expert_projection\n");
            for (unsigned k = 0; k < rnd() % 40u; k++)
                add(&t, &n, "S_ADD_INT gp3, gp3, gp3\n");
            add(&t, &n, "; @stage=expert_weight_prefetch\n");
        }
    }
    plena_test_write_text(g_tmp, name, t);
    free(t);
}

static void test_programs(void **state)
{
    (void)state;
    static const char *const names[] = {"sequential.asm", "strided.asm", "random.asm"};
    for (int pat = 0; pat < 3; pat++) {
        write_program(pat, names[pat]);
        uint64_t cycles, bytes, hits;
        same_figures(g_tmp, names[pat], &cycles, &bytes, &hits);
        /* 120 instructions of 4 + 4 (+ 4 + 4 written) or 64 + 64 transactions */
        assert_int_equal(bytes, pat == 1 ? 120u * 128 * 64 : 120u * 512 * (pat == 0 ? 2 : 1));
        assert_true(cycles > 1000);
        /* the strided program repeats its 32 column blocks: replayed */
        if (pat == 1) assert_true(hits > 0);
    }
}

static void moe_layer(const char *preset, uint32_t T)
{
    const struct plena_moe_model *mdl = plena_model_preset_find(preset);
    assert_non_null(mdl);
    struct plena_gen_machine m;
    plena_gen_machine_from_settings(&g_set, &m);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, preset);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, mdl, &m, T);
    o.out_dir = dir;
    struct plena_moe_build b;
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_moe_build_run(&o, &b, &err);
    if (rc) fprintf(stderr, "build %s: %s\n", preset, err.msg);
    assert_int_equal(rc, 0);
    uint64_t cycles, bytes, hits;
    same_figures(dir, "program.mem", &cycles, &bytes, &hits);
    assert_true(bytes > 0);
    assert_true(hits > 0); /* the expert weight tiles repeat their shape */
    plena_moe_build_free(&b);
}

static void test_moe_layers(void **state)
{
    (void)state;
    moe_layer("tiny-route-32x4", 8);
    moe_layer("tiny-ds-fused", 4);
    moe_layer("tiny-ksplit", 5);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_programs),
    cmocka_unit_test(test_moe_layers),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
