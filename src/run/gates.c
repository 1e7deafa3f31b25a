/* `plena gates timing` (docs/timing.md "Timing gates"): the ten cases are
 * assembled in-process (no fixture files), written with their settings and
 * inputs under DIR/cases/<case>/, run through plena_run_execute with the
 * profile on, and judged by the pure evaluator of the five gates. Printing
 * and the exit status belong to src/cli/cmd_gates.c. */
#include "run/gates.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/sha256.h"
#include "isa/asm.h"
#include "common/json.h"
#include "run/run.h"

const char *const plena_gate_names[PLENA_GATE_COUNT] = {
    "g1_hbm_address_sensitivity", "g2_prefetch_compute_overlap",
    "g5_matrix_formula_self_consistency", "stage_profile_accounting", "repeat_determinism"};

/* ---- pure evaluation ---- */

static const struct plena_gate_case *find(const struct plena_gate_case *c, size_t n,
                                          const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].name, name)) return &c[i];
    return NULL;
}

static void check(struct plena_gate_result *g, const char *name, int ok)
{
    if (g->n_checks >= PLENA_GATE_MAX_CHECKS) return;
    struct plena_gate_check *c = &g->checks[g->n_checks++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->passed = ok != 0;
    if (!ok) g->passed = 0;
}

static void val_int(struct plena_gate_result *g, const char *key, uint64_t v)
{
    if (g->n_values >= PLENA_GATE_MAX_VALUES) return;
    struct plena_gate_value *x = &g->values[g->n_values++];
    snprintf(x->key, sizeof x->key, "%s", key);
    x->kind = PLENA_GV_INT;
    x->u = v;
}

static void val_bool(struct plena_gate_result *g, const char *key, int v)
{
    val_int(g, key, v != 0);
    g->values[g->n_values - 1].kind = PLENA_GV_BOOL;
}

static void val_str(struct plena_gate_result *g, const char *key, const char *s)
{
    if (g->n_values >= PLENA_GATE_MAX_VALUES) return;
    struct plena_gate_value *x = &g->values[g->n_values++];
    snprintf(x->key, sizeof x->key, "%s", key);
    x->kind = PLENA_GV_STR;
    snprintf(x->s, sizeof x->s, "%s", s);
}

/* All named cases present and ran; else one failed "case_ran" check. */
static int need(struct plena_gate_result *g, const struct plena_gate_case *cs, size_t n,
                const char *const *names, size_t k, const struct plena_gate_case **got)
{
    int ok = 1;
    for (size_t i = 0; i < k; i++) {
        got[i] = find(cs, n, names[i]);
        if (!got[i] || !got[i]->ran) ok = 0;
    }
    if (!ok) check(g, "case_ran", 0);
    return ok;
}

static void gate_g1(struct plena_gate_result *g, const struct plena_gate_case *cs, size_t n)
{
    static const char *const names[] = {
        "g1_continuous_prefetch_v", "g1_sparse_cross_region_prefetch_v",
        "g1_random_order_prefetch_v", "g1_row_hit_repeat_prefetch_v"};
    const struct plena_gate_case *c[4];
    if (!need(g, cs, n, names, 4, c)) return;
    int same = 1;
    for (int i = 0; i < 4; i++)
        if (c[i]->bytes_read != c[0]->bytes_read || c[i]->bytes_written != 0) same = 0;
    check(g, "same_hbm_read_bytes", same);
    check(g, "sparse_gt_continuous", c[1]->sim_cycles > c[0]->sim_cycles);
    check(g, "random_gt_continuous", c[2]->sim_cycles > c[0]->sim_cycles);
    val_int(g, "continuous_cycles", c[0]->sim_cycles);
    val_int(g, "sparse_cycles", c[1]->sim_cycles);
    val_int(g, "random_cycles", c[2]->sim_cycles);
    val_int(g, "row_hit_cycles", c[3]->sim_cycles);
    val_int(g, "hbm_bytes_read", c[0]->bytes_read);
    int distinct = 0;
    for (int i = 1; i < 4; i++)
        if (c[i]->sim_cycles != c[0]->sim_cycles) distinct = 1;
    val_bool(g, "address_sensitive", distinct);
    int fastest = 1;
    for (int i = 0; i < 3; i++)
        if (c[3]->sim_cycles > c[i]->sim_cycles) fastest = 0;
    val_bool(g, "row_hit_fastest", fastest);
}

static void gate_g2(struct plena_gate_result *g, const struct plena_gate_case *cs, size_t n)
{
    static const char *const names[] = {"g2_prefetch_only", "g2_compute_only",
                                        "g2_prefetch_then_compute",
                                        "g2_prefetch_then_compute_overlap_on"};
    const struct plena_gate_case *c[4];
    if (!need(g, cs, n, names, 4, c)) return;
    uint64_t pf = c[0]->sim_cycles, co = c[1]->sim_cycles, comb = c[2]->sim_cycles,
             on = c[3]->sim_cycles;
    /* signed: a negative serial_hidden is a failure too */
    int64_t serial_hidden = (int64_t)(pf + co) - (int64_t)comb;
    int64_t overlay_hidden = (int64_t)comb - (int64_t)on;
    check(g, "serial_hidden_zero", serial_hidden == 0);
    check(g, "overlay_hidden_positive", overlay_hidden > 0);
    check(g, "overlap_on_lt_combined", on < comb);
    check(g, "equal_bytes",
          c[2]->bytes_read == c[3]->bytes_read && c[2]->bytes_written == c[3]->bytes_written);
    check(g, "prefetch_only_40", pf == 40);
    check(g, "compute_only_6400", co == 6400);
    check(g, "combined_6440", comb == 6440);
    check(g, "overlap_on_6408", on == 6408);
    check(g, "bytes_512_read_0_written", c[2]->bytes_read == 512 && c[2]->bytes_written == 0);
    val_int(g, "prefetch_only_cycles", pf);
    val_int(g, "compute_only_cycles", co);
    val_int(g, "combined_cycles", comb);
    val_int(g, "overlap_on_cycles", on);
    val_int(g, "overlap_on_serial_cycles", c[3]->serial_cycles);
    val_int(g, "hbm_bytes_read", c[2]->bytes_read);
    val_int(g, "hbm_bytes_written", c[2]->bytes_written);
    val_int(g, "serial_hidden", (uint64_t)serial_hidden);
    val_int(g, "overlay_hidden", (uint64_t)overlay_hidden);
    if (serial_hidden < 0)
        g->values[g->n_values - 2].kind = PLENA_GV_STR, snprintf(g->values[g->n_values - 2].s, 80,
                                                                 "%lld", (long long)serial_hidden);
    if (overlay_hidden < 0)
        g->values[g->n_values - 1].kind = PLENA_GV_STR, snprintf(g->values[g->n_values - 1].s, 80,
                                                                 "%lld", (long long)overlay_hidden);
}

static void gate_g5(struct plena_gate_result *g, const struct plena_gate_case *cs, size_t n)
{
    static const char *const names[] = {"g5_single_m_mv", "g5_single_m_mm"};
    const struct plena_gate_case *c[2];
    if (!need(g, cs, n, names, 2, c)) return;
    check(g, "m_mv_eq_mlen", c[0]->sim_cycles == c[0]->mlen);
    check(g, "m_mv_64", c[0]->sim_cycles == 64);
    check(g, "m_mm_64", c[1]->sim_cycles == 64);
    val_int(g, "m_mv_cycles", c[0]->sim_cycles);
    val_int(g, "m_mm_cycles", c[1]->sim_cycles);
    val_int(g, "mlen", c[0]->mlen);
}

static void gate_accounting(struct plena_gate_result *g, const struct plena_gate_case *cs, size_t n)
{
    int ran = n == PLENA_GATE_CASE_COUNT, cyc = 1, sim = 1, ps = 1, bytes = 1, stps = 1, stn = 1,
        unres = 1;
    char bad[80] = "";
    for (size_t i = 0; i < n; i++) {
        const struct plena_gate_case *c = &cs[i];
        if (!c->ran) {
            ran = 0;
            continue;
        }
        int ok = 1;
#define ACC(flag, cond)                                                                            \
    if (!(cond)) flag = ok = 0
        ACC(cyc, c->prof_profiled_cycles == c->prof_simulation_cycles);
        ACC(sim, c->prof_simulation_cycles == c->serial_cycles);
        ACC(ps, c->prof_profiled_picos == c->prof_simulation_picos);
        ACC(bytes,
            c->prof_bytes_read == c->bytes_read && c->prof_bytes_written == c->bytes_written);
        ACC(stps, c->prof_stage_picos_sum == c->prof_profiled_picos);
        ACC(stn, c->prof_stage_instructions_sum == c->prof_instructions_executed &&
                     c->prof_instructions_executed == c->instructions_executed);
        ACC(unres, c->prof_unresolved == 0);
#undef ACC
        if (!ok && !bad[0]) snprintf(bad, sizeof bad, "%s", c->name);
        char key[80];
        snprintf(key, sizeof key, "%.56s_cycles", c->name);
        val_int(g, key, c->prof_profiled_cycles);
    }
    if (!ran) check(g, "case_ran", 0);
    check(g, "profiled_cycles_eq_simulation_cycles", cyc);
    check(g, "simulation_cycles_eq_run_stats_serial", sim);
    check(g, "profiled_picos_eq_simulation_picos", ps);
    check(g, "profile_bytes_eq_run_stats", bytes);
    check(g, "stage_picos_sum_eq_total", stps);
    check(g, "stage_instructions_sum_eq_total", stn);
    check(g, "no_unresolved_stage_markers", unres);
    if (bad[0]) val_str(g, "first_failing_case", bad);
}

static void gate_repeat(struct plena_gate_result *g, const struct plena_gate_case *cs, size_t n,
                        const struct plena_gate_repeat *reps, size_t n_reps)
{
    static const char *const names[] = {"g1_random_order_prefetch_v",
                                        "g2_prefetch_then_compute_overlap_on"};
    const struct plena_gate_case *c[2];
    if (!need(g, cs, n, names, 2, c)) return;
    int cyc = 1, ser = 1, by = 1, sha = 1, all = n_reps > 0;
    for (size_t i = 0; i < n_reps; i++) {
        const struct plena_gate_repeat *r = &reps[i];
        const struct plena_gate_case *b = find(cs, n, r->name);
        if (!r->ran || !b) {
            all = 0;
            continue;
        }
        if (r->sim_cycles != b->sim_cycles) cyc = 0;
        if (r->serial_cycles != b->serial_cycles) ser = 0;
        if (r->bytes_read != b->bytes_read || r->bytes_written != b->bytes_written) by = 0;
        if (!r->profile_identical || strcmp(r->profile_sha256, b->profile_sha256)) sha = 0;
    }
    check(g, "repeats_ran", all);
    check(g, "identical_cycles", cyc);
    check(g, "identical_serial_cycles", ser);
    check(g, "identical_bytes", by);
    check(g, "identical_profile_sha256", sha);
    val_str(g, "random_order_profile_sha256", c[0]->profile_sha256);
    val_str(g, "overlap_on_profile_sha256", c[1]->profile_sha256);
    val_int(g, "repeat_runs", n_reps);
}

void plena_gates_timing_evaluate(const struct plena_gate_case *cases, size_t n_cases,
                                 const struct plena_gate_repeat *reps, size_t n_reps,
                                 struct plena_gate_result out[PLENA_GATE_COUNT])
{
    memset(out, 0, sizeof(struct plena_gate_result) * PLENA_GATE_COUNT);
    for (int i = 0; i < PLENA_GATE_COUNT; i++) {
        out[i].name = plena_gate_names[i];
        out[i].passed = 1;
    }
    gate_g1(&out[0], cases, n_cases);
    gate_g2(&out[1], cases, n_cases);
    gate_g5(&out[2], cases, n_cases);
    gate_accounting(&out[3], cases, n_cases);
    gate_repeat(&out[4], cases, n_cases, reps, n_reps);
}

void plena_gates_format_line(const struct plena_gate_result *g, struct plena_buf *b)
{
    plena_buf_printf(b, "%s %s", g->passed ? "PASS" : "FAIL", g->name);
    if (!g->passed) {
        plena_buf_puts(b, " ");
        int first = 1;
        for (size_t i = 0; i < g->n_checks; i++)
            if (!g->checks[i].passed) {
                plena_buf_printf(b, "%s%s", first ? "" : ",", g->checks[i].name);
                first = 0;
            }
    }
    for (size_t i = 0; i < g->n_values; i++) {
        const struct plena_gate_value *v = &g->values[i];
        if (v->kind == PLENA_GV_INT)
            plena_buf_printf(b, " %s=%llu", v->key, (unsigned long long)v->u);
        else if (v->kind == PLENA_GV_BOOL)
            plena_buf_printf(b, " %s=%s", v->key, v->u ? "true" : "false");
        else
            plena_buf_printf(b, " %s=%s", v->key, v->s);
    }
    plena_buf_puts(b, "\n");
}

enum plena_status plena_gates_status(const struct plena_gates_report *r)
{
    if (r->case_failed) return PLENA_E_INPUT;
    return r->passed ? PLENA_OK : PLENA_E_FAILED;
}

/* ---- cases ---- */

static const unsigned random_order[64] = {
    28, 24, 42, 46, 18, 52, 6,  3,  38, 13, 11, 27, 41, 44, 47, 17, 21, 59, 19, 22, 57, 49,
    35, 58, 51, 5,  1,  43, 20, 23, 63, 40, 61, 54, 29, 62, 45, 30, 14, 32, 26, 37, 12, 31,
    8,  10, 53, 34, 16, 25, 56, 2,  50, 15, 48, 4,  36, 7,  9,  0,  55, 60, 39, 33};

enum case_kind { K_CONT, K_SPARSE, K_RANDOM, K_ROWHIT, K_PF, K_COMPUTE, K_PF_COMPUTE, K_MV, K_MM };

static const struct {
    const char *name;
    enum case_kind kind;
    int overlap;
} case_table[PLENA_GATE_CASE_COUNT] = {
    {"g1_continuous_prefetch_v", K_CONT, 0},
    {"g1_sparse_cross_region_prefetch_v", K_SPARSE, 0},
    {"g1_random_order_prefetch_v", K_RANDOM, 0},
    {"g1_row_hit_repeat_prefetch_v", K_ROWHIT, 0},
    {"g2_prefetch_only", K_PF, 0},
    {"g2_compute_only", K_COMPUTE, 0},
    {"g2_prefetch_then_compute", K_PF_COMPUTE, 0},
    {"g2_prefetch_then_compute_overlap_on", K_PF_COMPUTE, 1},
    {"g5_single_m_mv", K_MV, 0},
    {"g5_single_m_mm", K_MM, 0},
};

static void setup_block(struct plena_buf *b)
{
    plena_buf_puts(b, "S_ADDI_INT gp4, gp0, 65536\n"
                      "C_SET_SCALE_REG gp4\n"
                      "S_ADDI_INT gp5, gp0, 64\n"
                      "C_SET_STRIDE_REG gp5\n"
                      "S_ADDI_INT gp6, gp0, 4096\n"
                      "S_ADDI_INT gp1, gp0, 0\n"
                      "C_SET_ADDR_REG a3, gp0, gp1\n");
}

static void pf(struct plena_buf *b, unsigned off)
{
    plena_buf_printf(b, "S_ADDI_INT gp2, gp0, %u\nH_PREFETCH_V gp6, gp2, a3, 1, 0\n", off);
}

/* The case program as assembly text. */
void plena_gates_case_program(int idx, struct plena_buf *b);
void plena_gates_case_program(int idx, struct plena_buf *b)
{
    enum case_kind k = case_table[idx].kind;
    switch (k) {
    case K_CONT:
    case K_SPARSE:
    case K_RANDOM:
    case K_ROWHIT:
        setup_block(b);
        for (unsigned i = 0; i < 64; i++)
            pf(b, k == K_CONT     ? 256 * i
                  : k == K_SPARSE ? 4096 * i
                  : k == K_RANDOM ? 256 * random_order[i]
                                  : 0);
        break;
    case K_PF:
        setup_block(b);
        pf(b, 0);
        break;
    case K_PF_COMPUTE:
        setup_block(b);
        pf(b, 0);
        /* fall through */
    case K_COMPUTE:
        for (int i = 0; i < 100; i++)
            plena_buf_puts(b, "M_MV gp0, gp0, gp0\n");
        break;
    case K_MV: plena_buf_puts(b, "M_MV gp0, gp0, gp0\n"); break;
    case K_MM: plena_buf_puts(b, "M_MM gp0, gp0, gp0\n"); break;
    }
}

/* Gate defaults on top of the reference settings. */
static const char *const gate_defaults[] = {
    "CONFIG.MLEN=64",
    "CONFIG.VLEN=64",
    "CONFIG.BLEN=4",
    "CONFIG.HLEN=16",
    "CONFIG.BROADCAST_AMOUNT=4",
    "CONFIG.HBM_M_Prefetch_Amount=64",
    "CONFIG.HBM_V_Prefetch_Amount=4",
    "CONFIG.HBM_V_Writeback_Amount=4",
    "CONFIG.MATRIX_SRAM_SIZE=4096",
    "CONFIG.VECTOR_SRAM_SIZE=8192",
    "CONFIG.HBM_SIZE=1048576",
    "CONFIG.DC_EN=1",
    "CONFIG.MAX_LOOP_INSTRUCTIONS=100000",
    "CONFIG.CLOCK_PERIOD_PS=1000",
};

static int write_zeros(const char *path, size_t n, struct plena_err *err)
{
    void *z = plena_calloc(n ? n : 1, 1);
    if (!z) return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    int rc = plena_file_write_atomic(path, z, n, err);
    plena_free(z);
    return rc;
}

static uint64_t jget(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (uint64_t)json_integer_value(v) : UINT64_MAX;
}

/* SHA-256 of the profile bytes (repeat_determinism). */
static void digest(const char *text, size_t len, char out[65])
{
    plena_sha256_hex(text, len, out);
}

/* Reads back the run-stats and profile of a case. */
static int read_back(struct plena_gate_case *c, char **profile_text, size_t *profile_len,
                     struct plena_err *err)
{
    char *text = NULL;
    size_t len = 0;
    json_error_t je;
    if (plena_file_read_all(c->run_stats_path, &text, &len, err)) return -1;
    json_t *rs = json_loadb(text, len, 0, &je);
    plena_free(text);
    if (!rs) return PLENA_FAIL(err, PLENA_E_INPUT, c->run_stats_path, "%s", je.text);
    c->sim_cycles = jget(rs, "sim_latency_cycles");
    c->serial_cycles = jget(rs, "serial_latency_cycles");
    c->bytes_read = jget(rs, "hbm_bytes_read");
    c->bytes_written = jget(rs, "hbm_bytes_written");
    c->instructions_executed = jget(rs, "instructions_executed");
    c->mlen = (uint32_t)jget(rs, "emu_mlen");
    json_decref(rs);
    if (plena_file_read_all(c->stage_profile_path, &text, &len, err)) return -1;
    json_t *p = json_loadb(text, len, 0, &je);
    if (!p) {
        plena_free(text);
        return PLENA_FAIL(err, PLENA_E_INPUT, c->stage_profile_path, "%s", je.text);
    }
    digest(text, len, c->profile_sha256);
    *profile_text = text;
    *profile_len = len;
    c->prof_simulation_cycles = jget(p, "total_simulation_cycles");
    c->prof_profiled_cycles = jget(p, "total_profiled_cycles");
    c->prof_simulation_picos = jget(p, "total_simulation_picos");
    c->prof_profiled_picos = jget(p, "total_profiled_picos");
    c->prof_bytes_read = jget(p, "total_hbm_bytes_read");
    c->prof_bytes_written = jget(p, "total_hbm_bytes_written");
    c->prof_instructions_executed = jget(p, "total_instructions_executed");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(p, "stages"), k, v)
    {
        c->prof_stage_picos_sum += jget(v, "wall_picos");
        c->prof_stage_instructions_sum += jget(v, "instructions");
    }
    c->prof_unresolved = json_array_size(
        json_object_get(json_object_get(p, "classification"), "unresolved_stage_markers"));
    json_decref(p);
    return 0;
}

struct case_env {
    char dir[4096];
    struct plena_program prog;
    struct plena_settings s;
    const volatile sig_atomic_t *stop;
};

/* Builds case `idx` in DIR/cases/<name>/ (program, settings, inputs). */
static int build_case(const char *root, int idx, const struct plena_settings *s,
                      struct case_env *env, struct plena_err *err)
{
    char path[4200];
    memset(&env->prog, 0, sizeof env->prog);
    env->s = *s;
    snprintf(env->dir, sizeof env->dir, "%s/cases/%s", root, case_table[idx].name);
    if (plena_mkdir_p(env->dir, err)) return -1;
    struct plena_buf b;
    plena_buf_init(&b);
    plena_gates_case_program(idx, &b);
    if (b.failed) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, case_table[idx].name, "out of memory");
    }
    snprintf(path, sizeof path, "%s/program.asm", env->dir);
    int rc = plena_file_write_atomic(path, b.data, b.len, err);
    struct plena_asm_opts ao = {0, 0, 1};
    if (!rc) rc = plena_asm_text(b.data, b.len, path, &ao, &env->prog, NULL, err);
    plena_buf_free(&b);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/program.mem", env->dir);
    if ((rc = plena_program_write_mem(path, env->prog.words, env->prog.n, err))) return rc;
    plena_buf_init(&b);
    rc = plena_settings_to_toml(s, &b);
    snprintf(path, sizeof path, "%s/plena_settings.toml", env->dir);
    if (rc || b.failed)
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    else
        rc = plena_file_write_atomic(path, b.data, b.len, err);
    plena_buf_free(&b);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/hbm.bin", env->dir);
    if ((rc = write_zeros(path, 1048576, err))) return rc;
    snprintf(path, sizeof path, "%s/fp_sram.bin", env->dir);
    if ((rc = write_zeros(path, 2048, err))) return rc;
    snprintf(path, sizeof path, "%s/int_sram.bin", env->dir);
    return write_zeros(path, 4096, err);
}

static int run_case(struct case_env *env, int overlap, unsigned threads, const char *stats_name,
                    const char *profile_name, char *stats_out, char *profile_out,
                    struct plena_run_outcome *outc, struct plena_err *err)
{
    char hbm[4200], fp[4200], in[4200];
    snprintf(hbm, sizeof hbm, "%s/hbm.bin", env->dir);
    snprintf(fp, sizeof fp, "%s/fp_sram.bin", env->dir);
    snprintf(in, sizeof in, "%s/int_sram.bin", env->dir);
    if (plena_path_join(stats_out, 4096, env->dir, stats_name) ||
        plena_path_join(profile_out, 4096, env->dir, profile_name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, env->dir, "path too long");
    struct plena_run_opts o;
    memset(&o, 0, sizeof o);
    o.program = &env->prog;
    o.settings = &env->s;
    o.hbm_model = -1;
    o.hbm_path = hbm;
    o.fpsram_path = fp;
    o.intsram_path = in;
    o.stats_path = stats_out;
    o.profile_path = profile_out;
    o.overlap = overlap;
    o.threads = threads ? threads : 1;
    o.stop = env->stop;
    int rc = plena_run_execute(&o, outc, err);
    if (!rc && outc->status != PLENA_RUN_OUT_COMPLETED)
        rc = PLENA_FAIL(err, PLENA_E_FAILED, env->dir, "%s", outc->trap_message);
    return rc;
}

static int write_summary(const struct plena_gates_opts *o, const char *root,
                         const struct plena_settings *s, struct plena_gates_report *r,
                         struct plena_err *err)
{
    int failed = 0;
    json_t *j = json_object();
    if (!j) return PLENA_FAIL(err, PLENA_E_NOMEM, "gates", "out of memory");
#define SET(obj, k, v)                                                                             \
    do {                                                                                           \
        json_t *v_ = (v);                                                                          \
        if (!v_ || json_object_set_new(obj, k, v_)) failed = 1;                                    \
    } while (0)
    SET(j, "schema_version", json_integer(2));
    SET(j, "output_root", json_string(root));
    json_t *h = json_object();
    if (h) {
        SET(h, "mlen", json_integer(s->mlen));
        SET(h, "vlen", json_integer(s->vlen));
        SET(h, "blen", json_integer(s->blen));
        SET(h, "hlen", json_integer(s->hlen));
        SET(h, "broadcast_amount", json_integer(s->broadcast_amount));
        SET(h, "hbm_size", json_integer((json_int_t)s->hbm_size));
        SET(h, "prefetch_count", json_integer(64));
        SET(h, "compute_reps", json_integer(100));
    }
    SET(j, "hardware", h);
    json_t *ov = json_array();
    for (size_t i = 0; ov && i < o->n_overrides; i++)
        if (json_array_append_new(ov, json_string(o->overrides[i]))) failed = 1;
    SET(j, "settings_overrides", ov);
    json_t *cases = json_array();
    for (int i = 0; cases && i < PLENA_GATE_CASE_COUNT; i++) {
        const struct plena_gate_case *c = &r->cases[i];
        json_t *x = json_object();
        if (!x) {
            failed = 1;
            break;
        }
        SET(x, "name", json_string(c->name));
        SET(x, "sim_latency_cycles",
            c->ran ? json_integer((json_int_t)c->sim_cycles) : json_null());
        SET(x, "serial_latency_cycles",
            c->ran ? json_integer((json_int_t)c->serial_cycles) : json_null());
        SET(x, "hbm_bytes_read", c->ran ? json_integer((json_int_t)c->bytes_read) : json_null());
        SET(x, "hbm_bytes_written",
            c->ran ? json_integer((json_int_t)c->bytes_written) : json_null());
        SET(x, "overlap_prefetch_compute", json_boolean(c->overlap));
        SET(x, "run_stats_path", json_string(c->run_stats_path));
        SET(x, "stage_profile_path", json_string(c->stage_profile_path));
        if (!c->ran) SET(x, "error", json_string(c->error));
        if (json_array_append_new(cases, x)) failed = 1;
    }
    SET(j, "cases", cases);
    json_t *gates = json_object();
    for (int i = 0; gates && i < PLENA_GATE_COUNT; i++) {
        const struct plena_gate_result *g = &r->gates[i];
        json_t *x = json_object(), *ch = json_object(), *va = json_object();
        if (!x || !ch || !va) {
            failed = 1;
            json_decref(x);
            json_decref(ch);
            json_decref(va);
            break;
        }
        SET(x, "passed", json_boolean(g->passed));
        for (size_t k = 0; k < g->n_checks; k++)
            SET(ch, g->checks[k].name, json_boolean(g->checks[k].passed));
        for (size_t k = 0; k < g->n_values; k++) {
            const struct plena_gate_value *v = &g->values[k];
            SET(va, v->key,
                v->kind == PLENA_GV_INT    ? json_integer((json_int_t)v->u)
                : v->kind == PLENA_GV_BOOL ? json_boolean(v->u)
                                           : json_string(v->s));
        }
        SET(x, "checks", ch);
        SET(x, "values", va);
        SET(gates, g->name, x);
    }
    SET(j, "gates", gates);
    SET(j, "passed", json_boolean(r->passed));
#undef SET
    int rc;
    if (failed)
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "gates", "out of memory building the summary");
    else
        rc = plena_json_write_file(j, PLENA_JSON_PROFILE_FORM, r->summary_path, err);
    json_decref(j);
    return rc;
}

/* One gate case and its repeat_determinism runs; everything it writes is its
 * own (the case's directory, its report row, its repeats), so cases can run
 * on separate threads and the report is the same as a serial run's. */
struct case_job {
    int i;
    const char *root;
    const struct plena_settings *s;
    unsigned threads;
    const volatile sig_atomic_t *stop;
    struct plena_gate_case *c;
    char **base_profile;
    size_t *base_len;
    struct plena_gate_repeat reps[2];
    size_t n_reps;
};

static void gate_case(struct case_job *j)
{
    struct plena_gate_case *c = j->c;
    struct case_env env;
    struct plena_err ce = {0};
    snprintf(c->name, sizeof c->name, "%s", case_table[j->i].name);
    c->overlap = case_table[j->i].overlap;
    struct plena_run_outcome outc;
    int crc = build_case(j->root, j->i, j->s, &env, &ce);
    env.stop = j->stop;
    if (!crc)
        crc = run_case(&env, c->overlap, j->threads, "run_stats.json", "stage_profile.json",
                       c->run_stats_path, c->stage_profile_path, &outc, &ce);
    if (!crc) crc = read_back(c, j->base_profile, j->base_len, &ce);
    /* repeat_determinism: two more runs, threads 1 and 4 */
    if (!crc && (!strcmp(c->name, "g1_random_order_prefetch_v") ||
                 !strcmp(c->name, "g2_prefetch_then_compute_overlap_on"))) {
        for (unsigned t = 0; t < 2; t++) {
            struct plena_gate_repeat *rp = &j->reps[j->n_reps++];
            struct plena_gate_case tmp;
            memset(&tmp, 0, sizeof tmp);
            snprintf(rp->name, sizeof rp->name, "%s", c->name);
            rp->threads = t ? 4 : 1;
            char sn[96], pn[96];
            snprintf(sn, sizeof sn, "repeat_threads%u_run_stats.json", rp->threads);
            snprintf(pn, sizeof pn, "repeat_threads%u_stage_profile.json", rp->threads);
            struct plena_err re = {0};
            char *ptext = NULL;
            size_t plen = 0;
            if (!run_case(&env, c->overlap, rp->threads, sn, pn, tmp.run_stats_path,
                          tmp.stage_profile_path, &outc, &re) &&
                !read_back(&tmp, &ptext, &plen, &re)) {
                rp->ran = 1;
                rp->sim_cycles = tmp.sim_cycles;
                rp->serial_cycles = tmp.serial_cycles;
                rp->bytes_read = tmp.bytes_read;
                rp->bytes_written = tmp.bytes_written;
                memcpy(rp->profile_sha256, tmp.profile_sha256, 65);
                rp->profile_identical =
                    plen == *j->base_len && !memcmp(ptext, *j->base_profile, plen);
            }
            plena_free(ptext);
        }
    }
    plena_program_free(&env.prog);
    if (crc)
        plena_err_format(&ce, c->error, sizeof c->error);
    else
        c->ran = 1;
}

struct job_slice {
    struct case_job *jobs;
    size_t n, first, step;
};

static void *run_slice(void *arg)
{
    struct job_slice *sl = arg;
    for (size_t k = sl->first; k < sl->n; k += sl->step)
        gate_case(&sl->jobs[k]);
    return NULL;
}

/* --threads N: case k runs on thread k mod N (at most one thread per case);
 * when a thread cannot be started its cases run on this one. */
static void run_jobs(struct case_job *jobs, size_t n, unsigned threads)
{
    size_t nt = threads > 1 ? (threads < n ? threads : n) : 1;
    pthread_t tid[PLENA_GATE_CASE_COUNT];
    struct job_slice sl[PLENA_GATE_CASE_COUNT];
    int started[PLENA_GATE_CASE_COUNT] = {0};
    for (size_t t = 0; t < nt; t++) {
        sl[t] = (struct job_slice){jobs, n, t, nt};
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, run_slice, &sl[t]) == 0;
    }
    run_slice(&sl[0]);
    for (size_t t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            run_slice(&sl[t]);
    }
}

int plena_gates_timing_run(const struct plena_gates_opts *o, struct plena_gates_report *r,
                           struct plena_err *err)
{
    memset(r, 0, sizeof *r);
    const char *root = o->out_dir ? o->out_dir : "./plena_timing_gates";
    struct plena_settings s;
    plena_settings_reference(&s);
    int rc = plena_settings_override_many(&s, gate_defaults,
                                          sizeof gate_defaults / sizeof gate_defaults[0], err);
    if (rc) return rc;
    if (o->n_overrides &&
        (rc = plena_settings_override_many(&s, o->overrides, o->n_overrides, err)) != 0) {
        if (err) err->code = PLENA_E_USAGE;
        return PLENA_E_USAGE;
    }
    if ((rc = plena_mkdir_p(root, err))) return rc;
    if (plena_path_join(r->summary_path, sizeof r->summary_path, root, "timing_gates_summary.json"))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, root, "path too long");

    char *base_profile[PLENA_GATE_CASE_COUNT] = {0};
    size_t base_len[PLENA_GATE_CASE_COUNT] = {0};
    struct case_job jobs[PLENA_GATE_CASE_COUNT];
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].i = i;
        jobs[i].root = root;
        jobs[i].s = &s;
        jobs[i].threads = o->threads;
        jobs[i].stop = o->stop;
        jobs[i].c = &r->cases[i];
        jobs[i].base_profile = &base_profile[i];
        jobs[i].base_len = &base_len[i];
    }
    run_jobs(jobs, PLENA_GATE_CASE_COUNT, o->threads);
    /* repeats and failures in case order, whatever order the threads ran in */
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++) {
        for (size_t k = 0; k < jobs[i].n_reps && r->n_reps < 4; k++)
            r->reps[r->n_reps++] = jobs[i].reps[k];
        if (!r->cases[i].ran) r->case_failed = 1;
    }
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++)
        plena_free(base_profile[i]);
    /* no verdict from stopped runs: the cases' own files are complete or absent */
    if (o->stop && *o->stop)
        return PLENA_FAIL(err, PLENA_E_INTERRUPTED, root,
                          "interrupted (SIGINT/SIGTERM); no summary written");
    plena_gates_timing_evaluate(r->cases, PLENA_GATE_CASE_COUNT, r->reps, r->n_reps, r->gates);
    r->passed = 1;
    for (int i = 0; i < PLENA_GATE_COUNT; i++) {
        if (r->gates[i].passed)
            r->n_passed++;
        else
            r->passed = 0;
    }
    return write_summary(o, root, &s, r, err);
}
