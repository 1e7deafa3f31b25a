/* Run session and `plena run` (docs/cli.md "plena run", docs/timing.md,
 * docs/profile.md "Profile JSON", docs/machine.md "After a trap"): G2 figures
 * end to end, M_MV = M_MM = 64 cycles, the acceptance failures (each a clear
 * message and exit 3 or 1, dumps on traps), profile identities on a trapping
 * program, determinism across runs and thread counts, legacy vs markers
 * attribution, CLI usage rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "isa/stages.h"
#include "run/run.h"

static char tmp[256];
static char settings_path[512];

static void write_text(const char *name, const char *text)
{
    plena_test_write_text(tmp, name, text);
}

static void write_zeros(const char *name, size_t n)
{
    char *z = calloc(1, n ? n : 1);
    plena_test_write_file(tmp, name, z, n);
    free(z);
}

static char *slurp(const char *name, size_t *len)
{
    return plena_test_read_file(tmp, name, len);
}

/* Runs the CLI in tmp; returns the exit status. */
static int run_cli(const char *args, const char *tag)
{
    assert_non_null(getenv("PLENA_BIN"));
    return plena_test_sh("cd '%s' && '%s' run --settings '%s' %s >'%s.out' 2>'%s.err'", tmp,
                         getenv("PLENA_BIN"), settings_path, args, tag, tag);
}

static int contains(const char *name, const char *needle)
{
    return plena_test_file_contains(tmp, name, needle);
}

static json_t *load(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    assert_non_null(j);
    return j;
}

static json_int_t geti(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static const char *G2_SETUP = "S_ADDI_INT gp4, gp0, 65536\n"
                              "C_SET_SCALE_REG gp4\n"
                              "S_ADDI_INT gp5, gp0, 64\n"
                              "C_SET_STRIDE_REG gp5\n"
                              "S_ADDI_INT gp6, gp0, 4096\n"
                              "S_ADDI_INT gp1, gp0, 0\n"
                              "C_SET_ADDR_REG a3, gp0, gp1\n"
                              "S_ADDI_INT gp2, gp0, 0\n"
                              "H_PREFETCH_V gp6, gp2, a3, 1, 0\n";

static void test_g2_end_to_end(void **state)
{
    (void)state;
    char prog[8192];
    strcpy(prog, G2_SETUP);
    write_text("g2_pf.asm", prog);
    for (int i = 0; i < 100; i++)
        strcat(prog, "M_MV gp0, gp0, gp0\n");
    write_text("g2.asm", prog);
    prog[0] = 0;
    for (int i = 0; i < 100; i++)
        strcat(prog, "M_MV gp0, gp0, gp0\n");
    write_text("g2_co.asm", prog);
    const char *in = "--hbm hbm.bin --fpsram fp.bin --intsram int.bin --dump none";
    char args[1024];
    snprintf(args, sizeof args, "--program g2_pf.asm %s --stats pf.json", in);
    assert_int_equal(run_cli(args, "pf"), 0);
    snprintf(args, sizeof args, "--program g2_co.asm %s --stats co.json", in);
    assert_int_equal(run_cli(args, "co"), 0);
    snprintf(args, sizeof args, "--program g2.asm %s --stats ser.json --profile ser_p.json", in);
    assert_int_equal(run_cli(args, "ser"), 0);
    snprintf(args, sizeof args,
             "--opcode g2.asm %s --stats ov.json --experimental-overlap-prefetch-compute", in);
    assert_int_equal(run_cli(args, "ov"), 0);
    json_t *pf = load("pf.json"), *co = load("co.json"), *ser = load("ser.json"),
           *ov = load("ov.json");
    assert_int_equal(geti(pf, "sim_latency_cycles"), 40);
    assert_int_equal(geti(co, "sim_latency_cycles"), 6400);
    assert_int_equal(geti(ser, "sim_latency_cycles"), 6440);
    assert_int_equal(geti(ov, "sim_latency_cycles"), 6408);
    assert_int_equal(geti(ov, "serial_latency_cycles"), 6440);
    assert_int_equal(geti(ser, "hbm_bytes_read"), 512);
    assert_int_equal(geti(ser, "hbm_bytes_written"), 0);
    assert_int_equal(geti(ov, "hbm_bytes_read"), 512);
    assert_string_equal(json_string_value(json_object_get(ser, "status")), "completed");
    json_decref(pf);
    json_decref(co);
    json_decref(ser);
    json_decref(ov);
    /* summary lines (docs/timing.md "Summary lines"), exact */
    assert_true(contains("ov.out", "Topology mlen=64 vlen=64 hlen=16 blen=4 broadcast_amount=4\n"));
    assert_true(contains("ov.out",
                         "Experimental overlap: serial latency 6440.000ns cycles 6440 | adjusted "
                         "cycles 6408 | hidden prefetch cycles 32 | pending prefetch cycles 0 | "
                         "prefetch ops 1 | compute ops 100 | dependent prefetch stalls 0\n"));
    assert_true(contains("ov.out", "Simulation completed. Latency 6408.000ns cycles 6408\n"));
    assert_true(contains("ov.out", "HBM Statistics - Bytes read: 512 | Bytes written: 0 | "
                                   "Utilization: 7.95e+07 bytes/sec\n"));
    assert_true(contains("pf.out", "Simulation completed. Latency 40.000ns cycles 40\n"));
    /* profile of the serial run: totals agree with run-stats */
    json_t *p = load("ser_p.json");
    assert_int_equal(geti(p, "total_simulation_cycles"), 6440);
    assert_int_equal(geti(p, "total_profiled_picos"), 6440000);
    assert_int_equal(geti(p, "total_hbm_bytes_read"), 512);
    json_decref(p);
}

static void test_single_mv_mm_64(void **state)
{
    (void)state;
    write_text("mv.asm", "M_MV gp0, gp0, gp0\n");
    write_text("mm.asm", "M_MM gp0, gp0, gp0\n");
    assert_int_equal(run_cli("--program mv.asm --dump none --stats mv.json", "mv"), 0);
    assert_int_equal(run_cli("--program mm.asm --dump none --stats mm.json", "mm"), 0);
    json_t *a = load("mv.json"), *b = load("mm.json");
    assert_int_equal(geti(a, "sim_latency_cycles"), 64);
    assert_int_equal(geti(b, "sim_latency_cycles"), 64);
    json_decref(a);
    json_decref(b);
}

static void test_input_errors_exit_3(void **state)
{
    (void)state;
    write_text("bad.mem", "0x00014062\n0xZZ\n");
    assert_int_equal(run_cli("--program bad.mem --dump none --stats bad_stats.json", "bad"), 3);
    assert_true(contains("bad.err", "bad.mem:2"));
    json_t *s = load("bad_stats.json");
    assert_string_equal(json_string_value(json_object_get(s, "status")), "error");
    assert_int_equal(geti(s, "return_code"), 3);
    assert_true(json_is_object(json_object_get(s, "error")));
    json_decref(s);

    write_text("one.asm", "S_ADDI_INT gp1, gp0, 5\n");
    assert_int_equal(run_cli("--program one.asm --hbm missing.bin --dump none", "miss"), 3);
    assert_true(contains("miss.err", "missing.bin"));

    write_zeros("big_hbm.bin", 2048);
    assert_int_equal(
        run_cli("--program one.asm --hbm big_hbm.bin --hbm-size 1K --dump none", "bighbm"), 3);
    assert_true(contains("bighbm.err", "big_hbm.bin"));

    write_zeros("big_fp.bin", 2050);
    assert_int_equal(run_cli("--program one.asm --fpsram big_fp.bin --dump none", "bigfp"), 3);
    assert_true(contains("bigfp.err", "big_fp.bin"));

    /* label count != instruction count: exit 3 naming both counts */
    write_text("three.mem", "0x00014062\n0x00014062\n0x00014062\n");
    write_text("two.asm", "S_ADDI_INT gp1, gp0, 5\nS_ADDI_INT gp1, gp0, 5\n");
    assert_int_equal(
        run_cli("--program three.mem --asm two.asm --profile x.json --dump none", "lbl"), 3);
    assert_true(contains("lbl.err", "2"));
    assert_true(contains("lbl.err", "3"));
}

static void check_trap(const char *asm_text, const char *tag, const char *kind)
{
    char name[64], args[512], err[80];
    snprintf(name, sizeof name, "%s.asm", tag);
    write_text(name, asm_text);
    char dd[80];
    snprintf(dd, sizeof dd, "dumps_%s", tag);
    snprintf(args, sizeof args, "--program %s --dump-dir %s --profile %s_p.json --stats %s_s.json",
             name, dd, tag, tag);
    assert_int_equal(run_cli(args, tag), 1);
    snprintf(err, sizeof err, "%s.err", tag);
    assert_true(contains(err, "trap at pc "));
    assert_true(contains(err, kind));
    char out[80];
    snprintf(out, sizeof out, "%s.out", tag);
    assert_true(contains(out, "Simulation trapped at pc "));
    assert_false(contains(out, "Simulation completed"));
    /* dumps still written */
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/fpsram_dump.bin", tmp, dd);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 2048);
    snprintf(p, sizeof p, "%s/%s/vram_dump.bin", tmp, dd);
    assert_int_equal(stat(p, &st), 0);
    snprintf(name, sizeof name, "%s_s.json", tag);
    json_t *s = load(name);
    assert_string_equal(json_string_value(json_object_get(s, "status")), "trapped");
    assert_int_equal(geti(s, "return_code"), 1);
    assert_true(json_is_object(json_object_get(s, "trap")));
    json_decref(s);
}

static void test_traps_exit_1(void **state)
{
    (void)state;
    check_trap("S_LUI_INT gp1, 4000\nV_ADD_VV gp0, gp1, gp1\n", "vram", "vram_out_of_range");
    check_trap("S_LUI_INT gp1, 4000\nM_MM gp0, gp1, gp0\n", "mram", "mram_out_of_range");
    /* the budget is per iteration (docs/machine.md "Hardware loops"): a
     * 120-instruction body exceeds MAX_LOOP_INSTRUCTIONS = 100 of the test
     * settings */
    char loop[4096] = "C_LOOP_START gp1, 3\n";
    for (int i = 0; i < 120; i++)
        strcat(loop, "S_ADDI_INT gp2, gp2, 1\n");
    strcat(loop, "C_LOOP_END gp1\n");
    check_trap(loop, "loop", "loop_budget");
    /* invalid opcode word from a .mem */
    write_text("inv.mem", "0x00014062\n0x00000000\n");
    assert_int_equal(run_cli("--program inv.mem --dump-dir dumps_inv", "inv"), 1);
    assert_true(contains("inv.err", "trap at pc 1 ("));
    assert_true(contains("inv.err", "invalid_opcode"));
    assert_true(contains("inv.err", "(word 0x00000000)"));
}

/* The profile identities (totals = sums over stages, docs/profile.md
 * "Accumulator") hold on a trapping program; the trapping instruction is
 * neither counted nor timed. */
static void test_trap_profile_identities(void **state)
{
    (void)state;
    write_text("tp.asm", "; @stage=gather @pair=3\n"
                         "S_ADDI_INT gp1, gp0, 5\n"
                         "M_MV gp0, gp0, gp0\n"
                         "; @stage=expert_projection\n"
                         "M_MM gp0, gp0, gp0\n"
                         "S_LUI_INT gp1, 4000\n"
                         "V_ADD_VV gp0, gp1, gp1\n"
                         "M_MM gp0, gp0, gp0\n");
    assert_int_equal(run_cli("--program tp.asm --dump none --profile tp.json", "tp"), 1);
    json_t *p = load("tp.json");
    assert_string_equal(json_string_value(json_object_get(p, "run_status")), "trapped");
    json_t *t = json_object_get(p, "trap");
    assert_int_equal(geti(t, "pc"), 4);
    assert_string_equal(json_string_value(json_object_get(t, "mnemonic")), "V_ADD_VV");
    assert_int_equal(geti(t, "source_line"), 7);
    assert_int_equal(geti(p, "total_instructions_executed"), 4);
    /* 1 + 64 + 64 + 1 cycles */
    assert_int_equal(geti(p, "total_profiled_picos"), 130000);
    assert_int_equal(geti(p, "total_simulation_picos"), 130000);
    json_int_t ps = 0, n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(p, "stages"), k, v)
    {
        ps += geti(v, "wall_picos");
        n += geti(v, "instructions");
    }
    assert_int_equal(ps, 130000);
    assert_int_equal(n, 4);
    json_t *st = json_object_get(p, "stages");
    assert_int_equal(geti(json_object_get(st, "gather"), "instructions"), 2);
    assert_int_equal(geti(json_object_get(st, "expert_projection"), "instructions"), 2);
    json_t *pair = json_object_get(json_object_get(p, "pairs"), "3");
    assert_non_null(pair); /* expert_projection keeps the pair */
    assert_int_equal(geti(pair, "instructions"), 4);
    json_int_t pps = 0;
    json_object_foreach(json_object_get(pair, "stages"), k, v) pps += geti(v, "wall_picos");
    assert_int_equal(pps, geti(pair, "wall_picos"));
    json_decref(p);
}

static json_t *normalised_stats(const char *name)
{
    static const char *vol[] = {
        "started_at_utc", "ended_at_utc", "host_wall_time_seconds", "build_dir",  "command", "cwd",
        "config_path",    "log_path",     "stage_profile_path",     "stats_path", "threads"};
    json_t *j = load(name);
    for (size_t i = 0; i < sizeof vol / sizeof vol[0]; i++) {
        assert_non_null(json_object_get(j, vol[i]));
        json_object_del(j, vol[i]);
    }
    return j;
}

/* Determinism (docs/timing.md "Determinism"): three runs and threads 1/4
 * give identical profile bytes and normalised run-stats. */
static void test_determinism(void **state)
{
    (void)state;
    char prog[8192];
    strcpy(prog, "; @stage=expert_weight_prefetch\n");
    strcat(prog, G2_SETUP);
    strcat(prog, "; @stage=expert_projection\n");
    for (int i = 0; i < 20; i++)
        strcat(prog, "M_MV gp0, gp0, gp0\n");
    write_text("det.asm", prog);
    const char *runs[][2] = {
        {"--threads 1", "d1"}, {"--threads 1", "d2"}, {"--threads 1", "d3"}, {"--threads 4", "d4"}};
    for (int i = 0; i < 4; i++) {
        char args[512];
        snprintf(args, sizeof args,
                 "--program det.asm --hbm hbm.bin --dump all --dump-dir %s_dumps --overlap %s "
                 "--profile %s_p.json --stats %s_s.json",
                 runs[i][1], runs[i][0], runs[i][1], runs[i][1]);
        assert_int_equal(run_cli(args, runs[i][1]), 0);
    }
    size_t l0, l;
    char *p0 = slurp("d1_p.json", &l0);
    json_t *s0 = normalised_stats("d1_s.json");
    for (int i = 1; i < 4; i++) {
        char n[64];
        snprintf(n, sizeof n, "%s_p.json", runs[i][1]);
        char *p = slurp(n, &l);
        assert_int_equal(l, l0);
        assert_memory_equal(p, p0, l);
        plena_free(p);
        snprintf(n, sizeof n, "%s_s.json", runs[i][1]);
        json_t *s = normalised_stats(n);
        assert_true(json_equal(s, s0));
        json_decref(s);
        /* the dumps, written on their own thread with --threads 4 */
        static const char *const dumps[] = {"vram_dump.bin", "mram_dump.bin", "fpsram_dump.bin",
                                            "intsram_dump.bin", "hbm_dump.bin"};
        for (size_t d = 0; d < sizeof dumps / sizeof dumps[0]; d++) {
            char a[128], b[128];
            snprintf(a, sizeof a, "d1_dumps/%s", dumps[d]);
            snprintf(b, sizeof b, "%s_dumps/%s", runs[i][1], dumps[d]);
            size_t la, lb;
            char *da = slurp(a, &la), *db = slurp(b, &lb);
            assert_int_equal(la, lb);
            assert_memory_equal(da, db, la);
            plena_free(da);
            plena_free(db);
        }
    }
    plena_free(p0);
    json_decref(s0);
}

/* legacy vs markers (docs/profile.md "Stage attribution"): substrings
 * ignored inside marked regions */
static void test_legacy_and_markers(void **state)
{
    (void)state;
    write_text("leg.asm", "; gpt-oss router token\nS_ADDI_INT gp1, gp0, 1\n"
                          "; sub projection\nS_ADDI_INT gp1, gp0, 1\n");
    write_text("mk.asm", "; @stage=expert_bias\nS_ADDI_INT gp1, gp0, 1\n"
                         "; sub projection\nS_ADDI_INT gp1, gp0, 1\n");
    assert_int_equal(run_cli("--program leg.asm --dump none --profile leg.json", "leg"), 0);
    assert_int_equal(run_cli("--program mk.asm --dump none --profile mk.json", "mk"), 0);
    json_t *a = load("leg.json"), *b = load("mk.json");
    json_t *ca = json_object_get(a, "classification"), *cb = json_object_get(b, "classification");
    assert_string_equal(json_string_value(json_object_get(ca, "stage_attribution")), "legacy");
    assert_string_equal(json_string_value(json_object_get(cb, "stage_attribution")), "markers");
    assert_true(json_is_boolean(json_object_get(ca, "vocabulary_drift_warning")));
    assert_true(json_is_null(json_object_get(cb, "vocabulary_drift_warning")));
    json_t *sa = json_object_get(a, "stages"), *sb = json_object_get(b, "stages");
    assert_int_equal(geti(json_object_get(sa, "router_topk"), "instructions"), 1);
    assert_int_equal(geti(json_object_get(sa, "expert_projection"), "instructions"), 1);
    assert_int_equal(geti(json_object_get(sb, "expert_bias"), "instructions"), 2);
    assert_int_equal(geti(json_object_get(sb, "expert_projection"), "instructions"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(cb, "attribution_notes"),
                                                          "routed_lowering")),
                        "pair_major");
    json_decref(a);
    json_decref(b);
}

static void test_cli_usage(void **state)
{
    (void)state;
    write_text("u.mem", "0x00014062\n");
    assert_int_equal(run_cli("--program u.mem --profile u.json", "u1"), 2);
    assert_int_equal(run_cli("--bogus", "u2"), 2);
    assert_int_equal(run_cli("--program u.mem --dump nonsense", "u3"), 2);
    assert_int_equal(run_cli("--program u.mem --hbm-size 12Q", "u4"), 2);
    assert_int_equal(run_cli("", "u5"), 2);
    /* --stage-profile-asm alone writes ./stage_profile.json */
    write_text("u.asm", "S_ADDI_INT gp1, gp0, 5\n");
    assert_int_equal(run_cli("--program u.mem --stage-profile-asm u.asm --dump none", "u6"), 0);
    json_t *p = load("stage_profile.json");
    assert_int_equal(geti(p, "label_count"), 1);
    json_decref(p);
    /* default dumps: the four SRAM dumps, no HBM dump */
    assert_int_equal(run_cli("--program u.mem --dump-dir dd", "u7"), 0);
    struct stat st;
    char path[512];
    snprintf(path, sizeof path, "%s/dd/intsram_dump.bin", tmp);
    assert_int_equal(stat(path, &st), 0);
    snprintf(path, sizeof path, "%s/dd/hbm_dump.bin", tmp);
    assert_int_not_equal(stat(path, &st), 0);
}

/* The upstream emulator's DEBUG decision for its runner (RUST_LOG is a
 * tracing-subscriber EnvFilter); expected levels worked out from the
 * EnvFilter rules: longest matching target, later equal one replaces,
 * bare level as default, bad directives skipped. */
static void test_upstream_log_filter(void **state)
{
    (void)state;
    static const struct {
        const char *filter;
        int level;
    } cases[] = {
        {"warn,transactional_emulator=info,transactional_emulator::runner=debug", 4},
        {"warn,transactional_emulator=info", 3},
        {"debug", 4},
        {"WARN", 2},
        {"4", 4},
        {"", -2},
        {" , ", -2},
        {"transactional_emulator", 5},
        {"transactional_emulator::runner=DEBUG", 4},
        {"other_crate=debug", 0},
        {"transactional_emulator::run=debug", 4}, /* a string prefix, as tracing matches */
        {"info,transactional_emulator::runner=bogus", 3},
        {"transactional_emulator[span]=debug,info", 3},
        {"transactional_emulator::runner=debug,transactional_emulator::runner=warn", 2},
        {"transactional_emulator::runner=debug,trace", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = plena_run_log_filter_level(cases[i].filter, PLENA_RUN_UPSTREAM_RUNNER_TARGET);
        if (got != cases[i].level) fprintf(stderr, "'%s': %d\n", cases[i].filter, got);
        assert_int_equal(got, cases[i].level);
    }
}

static int exists_in(const char *dir, const char *name)
{
    char path[600];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/%s", tmp, dir, name);
    return stat(path, &st) == 0;
}

/* `plena run` in a harness's environment: hbm_dump.bin exactly when the
 * runner's DEBUG is on (RUST_LOG, else PLENA_EMULATOR_RUST_LOG, or
 * --log-level), and never against an explicit --dump. */
static void test_upstream_hbm_dump(void **state)
{
    (void)state;
    write_text("h.mem", "0x00014062\n");
    static const struct {
        const char *env, *args, *dir;
        int hbm, vram;
    } cases[] = {
        {"PLENA_EMULATOR_RUST_LOG=warn,transactional_emulator::runner=debug", "", "h1", 1, 1},
        {"RUST_LOG=warn,transactional_emulator=info", "", "h2", 0, 1},
        {"RUST_LOG=transactional_emulator::runner=debug", "--dump vram", "h3", 0, 1},
        {"", "--log-level debug", "h4", 1, 1},
        {"RUST_LOG=transactional_emulator::runner=debug", "--log-level warn", "h5", 0, 1},
        {"", "--dump hbm", "h6", 1, 0},
        {"RUST_LOG=info PLENA_EMULATOR_RUST_LOG=debug", "", "h7", 0, 1}, /* RUST_LOG first */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = plena_test_sh("cd '%s' && env -u RUST_LOG -u PLENA_EMULATOR_RUST_LOG %s '%s' run "
                               "--settings '%s' --program h.mem --dump-dir %s %s >%s.out 2>%s.err",
                               tmp, cases[i].env, getenv("PLENA_BIN"), settings_path, cases[i].dir,
                               cases[i].args, cases[i].dir, cases[i].dir);
        assert_int_equal(rc, 0);
        if (exists_in(cases[i].dir, "hbm_dump.bin") != cases[i].hbm)
            fprintf(stderr, "case %zu: hbm_dump.bin %s\n", i, cases[i].hbm ? "missing" : "written");
        assert_int_equal(exists_in(cases[i].dir, "hbm_dump.bin"), cases[i].hbm);
        assert_int_equal(exists_in(cases[i].dir, "vram_dump.bin"), cases[i].vram);
    }
    assert_int_equal(run_cli("--program h.mem --log-level loud", "h8"), 2);
}

/* An upstream layer-norm test writes HBM_M_Prefetch_Amount below MLEN:
 * the run goes ahead with MLEN and the warning on stderr. */
static void test_upstream_prefetch_clamp(void **state)
{
    (void)state;
    char *text;
    size_t len;
    assert_int_equal(plena_file_read_all(settings_path, &text, &len, NULL), 0);
    const char *key = "[TRANSACTIONAL.CONFIG.HBM_M_Prefetch_Amount]\nvalue = 64\n";
    char *at = strstr(text, key);
    assert_non_null(at);
    char edited[65536];
    assert_true(len < sizeof edited - 16);
    snprintf(edited, sizeof edited,
             "%.*s[TRANSACTIONAL.CONFIG.HBM_M_Prefetch_Amount]\nvalue = "
             "16\n%s",
             (int)(at - text), text, at + strlen(key));
    plena_free(text);
    write_text("clamp.toml", edited);
    write_text("c.mem", "0x00014062\n");
    int rc = plena_test_sh("cd '%s' && '%s' run --settings clamp.toml --program c.mem --dump none "
                           ">c.out 2>c.err",
                           tmp, getenv("PLENA_BIN"));
    assert_int_equal(rc, 0);
    assert_true(contains("c.err", "plena run: warning: clamp.toml:"));
    assert_true(contains("c.err", ": TRANSACTIONAL.CONFIG.HBM_M_Prefetch_Amount.value: 16 is below "
                                  "MLEN (64); clamped to 64 (as the upstream emulator does)"));
    assert_true(contains("c.out", "Topology"));
}

/* Upstream flags: --hbm-size suffixes, --log-file written, a lone
 * --stage-profile-out ignored with a warning, a label-count mismatch under
 * --stage-profile-asm a warning. */
static void test_upstream_flags(void **state)
{
    (void)state;
    write_text("f.mem", "0x00014062\n0x00014062\n");
    write_text("f1.asm", "S_ADDI_INT gp1, gp0, 5\n");
    /* HBM_SIZE of the test settings is 1 MiB; 1MiB and 1MB both mean it */
    assert_int_equal(run_cli("--program f.mem --dump none --hbm-size 1MiB --stats s1.json", "f1"),
                     0);
    json_t *j = load("s1.json");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "behavior_config"), "HBM_SIZE")),
        1048576);
    json_decref(j);
    assert_int_equal(run_cli("--program f.mem --dump none --hbm-size 2MB", "f2"), 0);
    /* --log-file: what the run printed, appended */
    write_text("run.log", "earlier line\n");
    assert_int_equal(run_cli("--program f.mem --dump none --log-file run.log", "f3"), 0);
    assert_true(contains("run.log", "earlier line\nTopology mlen="));
    assert_true(contains("run.log", "HBM Statistics"));
    assert_int_equal(run_cli("--program f.mem --dump none --log-file nodir/run.log", "f4"), 4);
    assert_true(contains("f4.err", "parent directory does not exist: nodir"));
    /* --stage-profile-out alone: ignored with a warning; --profile alone: usage */
    assert_int_equal(run_cli("--program f.mem --dump none --stage-profile-out p5.json", "f5"), 0);
    assert_true(contains("f5.err", "--stage-profile-out without --stage-profile-asm is ignored"));
    struct stat st;
    char path[600];
    snprintf(path, sizeof path, "%s/p5.json", tmp);
    assert_int_not_equal(stat(path, &st), 0);
    assert_int_equal(run_cli("--program f.mem --dump none --profile p6.json", "f6"), 2);
    /* one label for two instructions: warning and a profile under the upstream
     * spelling, input error under --asm */
    assert_int_equal(run_cli("--program f.mem --dump none --stage-profile-asm f1.asm "
                             "--stage-profile-out p7.json",
                             "f7"),
                     0);
    assert_true(contains("f7.err", "f1.asm: stage profile ASM label count 1 differs from the "
                                   "decoded opcode count 2"));
    j = load("p7.json");
    assert_int_equal(geti(j, "total_instructions_executed"), 2);
    json_decref(j);
    assert_int_equal(run_cli("--program f.mem --dump none --asm f1.asm --profile p8.json", "f8"),
                     3);
}

static void test_parse_helpers(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } sizes[] = {{"1M", 1048576},
                 {"3K", 3072},
                 {"2G", 2147483648ull},
                 {"64", 64},
                 /* the spellings of upstream's --help and parse_size (cli.rs) */
                 {"256MiB", 268435456},
                 {"512KiB", 524288},
                 {"1GiB", 1073741824},
                 {"4KB", 4096},
                 {"2MB", 2097152},
                 {"1GB", 1073741824},
                 {"1T", 1099511627776ull},
                 {"1TiB", 1099511627776ull},
                 {"3tb", 3298534883328ull},
                 {"8kib", 8192},
                 {" 128M ", 134217728},
                 {"5I", 5},
                 {"2KBB", 2048}};
    uint64_t v;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (plena_run_parse_size(sizes[i].text, &v)) fprintf(stderr, "'%s'\n", sizes[i].text);
        assert_int_equal(plena_run_parse_size(sizes[i].text, &v), 0);
        assert_int_equal(v, sizes[i].bytes);
    }
    static const char *const bad[] = {
        "-1", "", "M", "1.5G", "1P", "1 G", "1KM", "18446744073709551616", "16777216T"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(plena_run_parse_size(bad[i], &v), 0);
    unsigned m;
    assert_int_equal(plena_run_parse_dump_list("vram,hbm", &m), 0);
    assert_int_equal(m, PLENA_DUMP_VRAM | PLENA_DUMP_HBM);
    assert_int_equal(plena_run_parse_dump_list("none", &m), 0);
    assert_int_equal(m, 0);
    assert_int_equal(plena_run_parse_dump_list("all", &m), 0);
    assert_int_equal(m, 31);
    assert_int_not_equal(plena_run_parse_dump_list("vram,", &m), 0);
    char b[64];
    plena_run_format_ns(40000, b, sizeof b);
    assert_string_equal(b, "40.000ns");
    plena_run_format_ns(6408001, b, sizeof b);
    assert_string_equal(b, "6408.001ns");
}

static int setup(void **state)
{
    (void)state;
    if (plena_test_mkdtemp(tmp, sizeof tmp, "test_run")) return -1;
    /* small VRAM keeps dumps tiny; MAX_LOOP_INSTRUCTIONS small for the budget trap */
    struct plena_settings s;
    plena_settings_reference(&s);
    const char *ov[] = {"CONFIG.VECTOR_SRAM_SIZE=8192", "CONFIG.HBM_SIZE=1048576",
                        "CONFIG.MAX_LOOP_INSTRUCTIONS=100"};
    if (plena_settings_override_many(&s, ov, 3, NULL)) return -1;
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_settings_to_toml(&s, &b)) return -1;
    snprintf(settings_path, sizeof settings_path, "%s/plena_settings.toml", tmp);
    if (plena_file_write_atomic(settings_path, b.data, b.len, NULL)) return -1;
    plena_buf_free(&b);
    write_zeros("hbm.bin", 1048576);
    write_zeros("fp.bin", 2048);
    write_zeros("int.bin", 4096);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return plena_test_rmtree(tmp);
}

static const struct CMUnitTest tests[] = {
    /* runs through the library and the CLI */
    cmocka_unit_test(test_parse_helpers),
    cmocka_unit_test(test_g2_end_to_end),
    cmocka_unit_test(test_single_mv_mm_64),
    cmocka_unit_test(test_input_errors_exit_3),
    cmocka_unit_test(test_traps_exit_1),
    cmocka_unit_test(test_trap_profile_identities),
    cmocka_unit_test(test_determinism),
    cmocka_unit_test(test_legacy_and_markers),
    cmocka_unit_test(test_cli_usage),
    /* the upstream emulator's logs, dumps and flags */
    cmocka_unit_test(test_upstream_log_filter),
    cmocka_unit_test(test_upstream_hbm_dump),
    cmocka_unit_test(test_upstream_prefetch_clamp),
    cmocka_unit_test(test_upstream_flags),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
