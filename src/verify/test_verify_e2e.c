/* End-to-end MoE tests through the emulator
 * (docs/lowering.md "Checking a build" and "Fault injection"): build (staged
 * images), in-process emulator run, bit-exact comparison with the reference
 * model and the float64 bound. Expected values are the reference model's,
 * which is written from the spec (src/ref/), never the generator's;
 * structural assertions (encodings, packed values, stage sets) come from the
 * spec tables. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/pool.h"
#include "gen/build.h"
#include "verify/verify.h"
#include "isa/encoding.h"
#include "isa/isa.h"
#include "num/num.h"
#include "common/test_support.h"

static struct plena_settings g_set;
static struct plena_gen_machine g_m;
static char g_tmp[256];

static int setup(void **state)
{
    (void)state;
    plena_settings_reference(&g_set);
    g_set.vector_sram_size = 16384; /* 1 M elements: small, fast */
    plena_gen_machine_from_settings(&g_set, &g_m);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/plena_gen_e2e_XXXXXX");
    assert_non_null(mkdtemp(g_tmp));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

struct tcase {
    const char *preset;
    uint32_t T;
    enum plena_weights_mode weights;
    int router_gaps;
    void (*tweak)(struct plena_moe_build_opts *o);
    int to_files;
};

static void opts_for(const struct tcase *tc, struct plena_moe_build_opts *o, uint32_t **ids,
                     float **w)
{
    const struct plena_moe_model *mdl = plena_model_preset_find(tc->preset);
    assert_non_null(mdl);
    plena_moe_build_opts_init(o, mdl, &g_m, tc->T);
    o->weights = tc->weights;
    o->weight_seed = 7;
    o->input_seed = 11;
    o->input_scale_log2 = -4;
    o->router_gaps = tc->router_gaps;
    *ids = NULL;
    *w = NULL;
    if (o->cfg.routing == PLENA_ROUTING_FIXED) {
        *ids = plena_malloc((size_t)tc->T * o->cfg.k * sizeof **ids);
        *w = plena_malloc((size_t)tc->T * o->cfg.k * sizeof **w);
        plena_moe_routing_random(tc->T, o->cfg.E, o->cfg.k, 5, *ids, *w);
        o->fixed_ids = *ids;
        o->fixed_w = *w;
    }
    if (tc->tweak) tc->tweak(o);
}

/* One case: its build, the emulator run and the check's verdict. */
struct ecase {
    struct plena_moe_build b;
    struct plena_verify_device d;
    struct plena_verify_result r;
};

/* Builds, runs and checks; build, run and result stay in *e. */
static void run_case(const struct tcase *tc, struct ecase *e)
{
    struct plena_moe_build *b = &e->b;
    struct plena_verify_device *d = &e->d;
    struct plena_verify_result *r = &e->r;
    struct plena_moe_build_opts o;
    uint32_t *ids;
    float *w;
    opts_for(tc, &o, &ids, &w);
    char dir[400];
    static int seq;
    snprintf(dir, sizeof dir, "%s/b%d", g_tmp, seq++);
    if (tc->to_files) o.out_dir = dir;
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_moe_build_run(&o, b, &err);
    if (rc) fprintf(stderr, "build %s: %s\n", tc->preset, err.msg);
    assert_int_equal(rc, 0);
    rc = plena_verify_emulate(b, &g_set, tc->to_files ? dir : NULL, d, &err);
    if (rc) fprintf(stderr, "emulate %s: %s\n", tc->preset, err.msg);
    assert_int_equal(rc, 0);
    if (d->trapped) fprintf(stderr, "%s: %s\n", tc->preset, d->trap);
    assert_false(d->trapped);
    rc = plena_verify_check(b, d, r, &err);
    if (rc) fprintf(stderr, "check %s: %s\n", tc->preset, err.msg);
    assert_int_equal(rc, 0);
    if (!r->passed || getenv("PLENA_E2E_VERBOSE"))
        fprintf(stderr,
                "%s T=%u: mismatches %llu/%llu (first %lld dev 0x%04x ref 0x%04x) ids %u w %u "
                "gate %u nan %llu rel_rms %.5f ids64 %d\n",
                tc->preset, tc->T, (unsigned long long)r->mismatches,
                (unsigned long long)r->elements, (long long)r->first_mismatch, r->first_dev,
                r->first_ref, r->id_mismatches, r->w_mismatches, r->gate_mismatches,
                (unsigned long long)r->nan_count, r->rel_rms, r->ids_f64_ok);
    plena_free(ids);
    plena_free(w);
}

static void expect_pass(const struct tcase *tc, struct ecase *e)
{
    run_case(tc, e);
    assert_true(e->r.bit_exact);
    assert_true(e->r.bound_ok);
    assert_true(e->r.ids_f64_ok);
    assert_false(e->r.ref_all_zero);
    assert_true(e->r.passed); /* the verdict `plena moe --check` prints */
}

/* ---- program inspection helpers ---- */

static const struct plena_insn *insn_at(const struct plena_moe_build *b, size_t i, int *stage)
{
    const struct plena_item *it = &b->prog.items[i];
    if (it->kind != PLENA_ITEM_INSN) return NULL;
    if (stage) *stage = it->stage;
    return &it->insn;
}

static uint64_t count_static(const struct plena_moe_build *b, int op, int stage)
{
    uint64_t n = 0;
    for (size_t i = 0; i < b->prog.n_items; i++) {
        int st;
        const struct plena_insn *in = insn_at(b, i, &st);
        if (in && (op < 0 || in->op == op) && (stage < 0 || st == stage)) n++;
    }
    return n;
}

/* Executed instructions per stage, attributed by the assembler's label pass
 * over the rendered program.asm (the markers), plus the attribution mode. */
static void stage_exec_from_labels(const struct plena_moe_build *b,
                                   const struct plena_verify_device *d, uint64_t *per_stage,
                                   enum plena_attribution *mode)
{
    struct plena_buf t;
    plena_buf_init(&t);
    assert_int_equal(plena_prog_render_asm(&b->prog, &t), 0);
    struct plena_labels l;
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_labels_from_asm(t.data, t.len, "program.asm", &l, &err), 0);
    assert_int_equal(l.n, b->n_words);
    memset(per_stage, 0, PLENA_STAGE_COUNT * sizeof *per_stage);
    for (size_t pc = 0; pc < l.n; pc++)
        per_stage[l.v[pc].stage] += d->pc_count[pc];
    *mode = l.mode;
    assert_int_equal(l.n_unresolved, 0);
    plena_labels_free(&l);
    plena_buf_free(&t);
}

/* A-series cross-check: markers mode, per-stage executed counts (from the
 * labels) equal the builder's predicted dynamic counts, per-opcode predicted
 * counts equal the executed ones, nothing executed in `other`. Returns 0 when
 * everything holds (so fault tests can assert failure). */
static int attribution_ok(const struct plena_moe_build *b, const struct plena_verify_device *d)
{
    uint64_t st[PLENA_STAGE_COUNT];
    enum plena_attribution mode;
    stage_exec_from_labels(b, d, st, &mode);
    if (mode != PLENA_ATTR_MARKERS) return 1;
    for (int s = 0; s < PLENA_STAGE_COUNT; s++)
        if (st[s] != b->info.dyn_count[s]) {
            fprintf(stderr, "stage %s: executed %llu predicted %llu\n",
                    plena_stage_name((enum plena_stage)s), (unsigned long long)st[s],
                    (unsigned long long)b->info.dyn_count[s]);
            return 2;
        }
    for (int op = 0; op < 64; op++)
        if (d->op_count[op] != b->info.dyn_op[op]) {
            fprintf(stderr, "opcode 0x%02x: executed %llu predicted %llu\n", op,
                    (unsigned long long)d->op_count[op], (unsigned long long)b->info.dyn_op[op]);
            return 3;
        }
    if (st[PLENA_STAGE_OTHER]) return 4;
    return 0;
}

static const int routed_stages[] = {PLENA_STAGE_ROUTER_TOPK,
                                    PLENA_STAGE_ACCUMULATOR_INIT,
                                    PLENA_STAGE_GATHER,
                                    PLENA_STAGE_EXPERT_WEIGHT_ADDRESS,
                                    PLENA_STAGE_EXPERT_WEIGHT_PREFETCH,
                                    PLENA_STAGE_EXPERT_PROJECTION,
                                    PLENA_STAGE_EXPERT_ACTIVATION,
                                    PLENA_STAGE_EXPERT_BIAS,
                                    PLENA_STAGE_EXPERT_ROUTE_WEIGHT,
                                    PLENA_STAGE_SCATTER_COMBINE};

/* A1: an unrouted program bills nothing to the routed stages. */
static int a1_ok(const struct plena_moe_build *b, const struct plena_verify_device *d)
{
    uint64_t st[PLENA_STAGE_COUNT];
    enum plena_attribution mode;
    stage_exec_from_labels(b, d, st, &mode);
    for (size_t i = 0; i < sizeof routed_stages / sizeof *routed_stages; i++)
        if (st[routed_stages[i]]) return 0;
    return 1;
}

/* A2: in an unrouted program every instruction outside residual_setup is a
 * shared_expert_* instruction (the shared emitters' only stages). */
static int a2_ok(const struct plena_moe_build *b)
{
    for (size_t i = 0; i < b->prog.n_items; i++) {
        int st;
        if (!insn_at(b, i, &st)) continue;
        if (st != PLENA_STAGE_RESIDUAL_SETUP && st != PLENA_STAGE_SHARED_EXPERT_PROJECTION &&
            st != PLENA_STAGE_SHARED_EXPERT_ACTIVATION && st != PLENA_STAGE_SHARED_EXPERT_GATE)
            return 0;
    }
    return 1;
}

static uint64_t g_union[PLENA_STAGE_COUNT]; /* A6: stages billed across the matrix */

static void note_union(const struct plena_moe_build *b)
{
    for (int s = 0; s < PLENA_STAGE_COUNT; s++)
        g_union[s] += b->info.dyn_count[s];
}

static void free_case(struct ecase *e)
{
    plena_verify_device_free(&e->d);
    plena_moe_build_free(&e->b);
}

/* The A-series on a build that passed: the billing cross-checks
 * (attribution_ok) and its stages count toward the union of A6. */
static void expect_billed(struct ecase *e)
{
    assert_int_equal(attribution_ok(&e->b, &e->d), 0);
    note_union(&e->b);
}

/* S1 + A1 + A2: tiny-ds-shared T=8 */
static void test_s1(void **state)
{
    (void)state;
    struct tcase tc = {"tiny-ds-shared", 8, PLENA_WEIGHTS_RANDOM, 0, NULL, 1};
    struct ecase e;
    expect_pass(&tc, &e);
    expect_billed(&e);
    assert_true(a1_ok(&e.b, &e.d));
    assert_true(a2_ok(&e.b));
    /* the comparison itself: a sign flip (also +0 vs -0) is one mismatch,
     * a NaN fails */
    struct plena_verify_result r;
    struct plena_err err;
    e.d.out[5] ^= 0x8000;
    assert_int_equal(plena_verify_check(&e.b, &e.d, &r, &err), 0);
    assert_int_equal(r.mismatches, 1);
    assert_false(r.bit_exact);
    assert_false(r.passed);
    e.d.out[5] ^= 0x8000;
    /* one element off by one ULP stays far inside the float64 bound: only
     * the bit-exact half of the verdict can fail the check */
    e.d.out[5] ^= 0x0001;
    assert_int_equal(plena_verify_check(&e.b, &e.d, &r, &err), 0);
    assert_true(r.bound_ok);
    assert_false(r.passed);
    e.d.out[5] ^= 0x0001;
    uint16_t keep = e.d.out[7];
    e.d.out[7] = 0x7FC1;
    assert_int_equal(plena_verify_check(&e.b, &e.d, &r, &err), 0);
    assert_int_equal(r.nan_count, 1);
    assert_false(r.bit_exact);
    e.d.out[7] = keep;
    assert_int_equal(plena_verify_check(&e.b, &e.d, &r, &err), 0);
    assert_true(r.bit_exact);
    assert_true(r.passed);
    free_case(&e);
}

/* The check's three float64 bounds measure what docs/design.md says (the
 * bit-exact MoE output against the float64 MoE from the machine's x_norm;
 * the whole output against the float64 layer from h; x_norm against the
 * float64 RMSNorm): recomputed here from the references with that pairing,
 * they equal the check's figures exactly, and the swapped pairings give
 * other values (so a swap in plena_verify_bounds_measure or its callers
 * fails this test). */
static void test_bounds_pairing(void **state)
{
    (void)state;
    struct tcase tc = {"tiny-ds-shared", 8, PLENA_WEIGHTS_RANDOM, 0, NULL, 0};
    struct ecase e;
    run_case(&tc, &e);
    assert_true(e.r.passed);
    struct plena_verify_refdata rd;
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_verify_refdata_from_build(&e.b, &rd, &err), 0);
    assert_int_equal(rd.cfg.residual, PLENA_RESIDUAL_PRE_NORM);
    const size_t n = (size_t)rd.cfg.T * rd.cfg.H;
    float *out = plena_malloc(n * sizeof *out), *moe = plena_malloc(n * sizeof *moe);
    float *xn = plena_malloc(n * sizeof *xn), *dev = plena_malloc(n * sizeof *dev);
    double *o64 = plena_malloc(n * sizeof *o64), *o64x = plena_malloc(n * sizeof *o64x);
    double *x64 = plena_malloc(n * sizeof *x64);
    assert_true(out && moe && xn && dev && o64 && o64x && x64);
    struct plena_moe_ref_out ro = {out, NULL, NULL, NULL, moe, xn, 0};
    assert_int_equal(plena_moe_reference(&rd.cfg, &rd.in, &ro, &err), 0);
    assert_int_equal(
        plena_moe_reference_f64_pair(&rd.cfg, &rd.in, xn, rd.in.fixed_ids, o64, o64x, &err), 0);
    assert_int_equal(plena_moe_rmsnorm_f64(&rd.cfg, &rd.in, x64), 0);
    for (size_t i = 0; i < n; i++)
        dev[i] = plena_num_bf16_to_f32(e.d.out[i]);
    const double want_moe = plena_moe_rel_rms_moe(&rd.cfg, &rd.in, moe, o64x);
    const double want_full = plena_moe_rel_rms_full(&rd.cfg, dev, o64);
    const double want_norm = plena_moe_rel_rms_norm(&rd.cfg, xn, x64);
    assert_true(want_moe > 0 && want_full > 0 && want_norm > 0);
    assert_true(e.r.rel_rms == want_moe);
    assert_true(e.r.rel_rms_full == want_full);
    assert_true(e.r.rel_rms_norm == want_norm);
    assert_true(plena_moe_rel_rms_moe(&rd.cfg, &rd.in, moe, o64) != want_moe);
    assert_true(plena_moe_rel_rms_full(&rd.cfg, dev, o64x) != want_full);
    /* a set stop flag reaches the references: no verdict, interrupted */
    volatile sig_atomic_t stop = 1;
    struct plena_verify_result rs;
    plena_err_clear(&err);
    assert_int_equal(plena_verify_check_stop(&e.b, &e.d, 1, &stop, &rs, &err), PLENA_E_INTERRUPTED);
    stop = 0;
    assert_int_equal(plena_verify_check_stop(&e.b, &e.d, 1, &stop, &rs, &err), 0);
    assert_true(rs.passed);
#ifdef PLENA_TESTING
    /* a stop after the references' last look: the check's own look */
    plena_verify_test_stop_after_refs = &stop;
    plena_err_clear(&err);
    assert_int_equal(plena_verify_check_stop(&e.b, &e.d, 1, &stop, &rs, &err), PLENA_E_INTERRUPTED);
    plena_verify_test_stop_after_refs = NULL;
    stop = 0;
#endif
    plena_free(out);
    plena_free(moe);
    plena_free(xn);
    plena_free(dev);
    plena_free(o64);
    plena_free(o64x);
    plena_free(x64);
    plena_verify_refdata_free(&rd);
    free_case(&e);
}

/* S2 + G1 + A1/A2: tiny-qwen2-gated T=8 */
/* A2 exact: shared_expert_gate holds exactly the gate loop of docs/lowering.md "Layer steps" plus
 * the broadcast of docs/lowering.md "Layer steps", counted by hand for H_p = VLEN (one column
 * block, so neither column loop is a hardware loop) and T = T_blk tokens; every address below
 * 2^18 makes each `li` one S_ADDI_INT.
 *   gate prologue: li gpG, li gpX, S_LD_FP f_one, li (q row)          4
 *   C_LOOP_START (token loop, T)                                       1
 *   per token: S_ADD_FP f_z=0, S_ADDI gpXc, li gpWc, V_MUL_VV,
 *     V_RED_SUM, S_SUB_FP, S_EXP_FP, S_ADD_FP, S_RECI_FP, S_ST_FP,
 *     S_ADDI gpG, S_ADDI gpX, C_LOOP_END                               13
 *   broadcast prologue: S_ADDI gF, li gR, C_LOOP_START                 3
 *   per token: S_LD_FP, V_MUL_VF, S_ADDI gF, S_ADDI gR, C_LOOP_END     5
 * static = 4 + 1 + 13 + 3 + 5 = 26; executed = 4 + 1 + 13 T + 3 + 5 T. */
static void a2_gate_exact(const struct plena_moe_build *b, const struct plena_verify_device *d,
                          uint32_t T)
{
    assert_int_equal(b->info.map.n_blocks, 1);
    const int G = PLENA_STAGE_SHARED_EXPERT_GATE;
    assert_int_equal(count_static(b, -1, G), 26);
    assert_int_equal(b->info.gate_static, 26);
    uint64_t st[PLENA_STAGE_COUNT];
    enum plena_attribution mode;
    stage_exec_from_labels(b, d, st, &mode);
    assert_int_equal(st[G], 4 + 1 + 13 * (uint64_t)T + 3 + 5 * (uint64_t)T);
    /* per opcode, executed in the gate stage */
    uint64_t(*so)[64] = plena_calloc(PLENA_STAGE_COUNT, sizeof *so);
    assert_non_null(so);
    plena_verify_count_stage_op(b, d->pc_count, so);
    assert_int_equal(so[G][PLENA_OP_V_MUL_VV], T);
    assert_int_equal(so[G][PLENA_OP_V_RED_SUM], T);
    assert_int_equal(so[G][PLENA_OP_S_EXP_FP], T);
    assert_int_equal(so[G][PLENA_OP_S_RECI_FP], T);
    assert_int_equal(so[G][PLENA_OP_S_ST_FP], T);
    assert_int_equal(so[G][PLENA_OP_V_MUL_VF], T);
    assert_int_equal(so[G][PLENA_OP_S_LD_FP], 1 + (uint64_t)T);
    assert_int_equal(so[G][PLENA_OP_C_LOOP_START], 2);
    assert_int_equal(so[G][PLENA_OP_C_LOOP_END], 2 * (uint64_t)T);
    plena_free(so);
}

static void test_s2(void **state)
{
    (void)state;
    struct tcase tc = {"tiny-qwen2-gated", 8, PLENA_WEIGHTS_RANDOM, 0, NULL, 0};
    struct ecase e;
    run_case(&tc, &e);
    assert_true(e.r.bit_exact);
    assert_true(e.r.bound_ok);
    assert_int_equal(e.d.n_gate, 8);
    /* G1: every gate value strictly inside (0, 1), at least two distinct */
    int distinct = 0;
    for (uint32_t t = 0; t < e.d.n_gate; t++) {
        float g = plena_num_bf16_to_f32(e.d.gate[t]);
        assert_true(g > 0.0f && g < 1.0f);
        if (e.d.gate[t] != e.d.gate[0]) distinct = 1;
    }
    assert_true(distinct);
    assert_false(e.r.gate_saturated);
    assert_true(e.r.gate_distinct);
    assert_true(e.b.info.dyn_count[PLENA_STAGE_SHARED_EXPERT_GATE] > 0);
    expect_billed(&e);
    assert_true(a1_ok(&e.b, &e.d));
    assert_true(a2_ok(&e.b));
    a2_gate_exact(&e.b, &e.d, 8);
    free_case(&e);
}

static void force_register(struct plena_moe_build_opts *o)
{
    o->cfg.topk_policy = PLENA_TOPK_FORCE_REGISTER;
}
static void dot_bias(struct plena_moe_build_opts *o)
{
    o->cfg.router_form = PLENA_ROUTER_DOT;
    o->cfg.router_bias = 1;
}
static void unroll_pairs(struct plena_moe_build_opts *o)
{
    o->cfg.loop_policy = PLENA_LOOPS_UNROLL_PAIRS;
}
static void tblk3(struct plena_moe_build_opts *o)
{
    o->cfg.force_tblk = 3;
}

/* V_TOPK rmask fields and C_SET_TOPK_REG words of a build */
static void topk_shape(const struct plena_moe_build *b, int *rmask, unsigned *n_set,
                       uint32_t *packed_loaded)
{
    *rmask = -1;
    *n_set = 0;
    *packed_loaded = 0;
    const struct plena_insn *prev = NULL;
    for (size_t i = 0; i < b->prog.n_items; i++) {
        const struct plena_insn *in = insn_at(b, i, NULL);
        if (!in) continue;
        if (in->op == PLENA_OP_V_TOPK) {
            if (*rmask >= 0) assert_int_equal(*rmask, in->rs3);
            *rmask = in->rs3;
        }
        if (in->op == PLENA_OP_C_SET_TOPK_REG) {
            (*n_set)++;
            /* preceded by the load of the packed value into the same register */
            assert_non_null(prev);
            assert_int_equal(prev->op, PLENA_OP_S_ADDI_INT);
            assert_int_equal(prev->rd, in->rd);
            assert_int_equal(prev->rs1, 0);
            *packed_loaded = prev->imm;
        }
        prev = in;
    }
    /* machine words: C_SET_TOPK_REG encodes as rd<<6 | 0x38 */
    unsigned nw = 0;
    for (size_t i = 0; i < b->n_words; i++)
        if ((b->words[i] & 0x3F) == 0x38) {
            assert_int_equal(b->words[i] & ~(uint32_t)(0xF << 6), 0x38);
            nw++;
        }
    assert_int_equal(nw, *n_set);
}

struct rcase {
    const char *preset;
    uint32_t T;
    enum plena_topk_encoding enc;
    int rmask;
    uint32_t packed; /* 0 = none */
};

static void routing_case(const struct rcase *rc, void (*tweak)(struct plena_moe_build_opts *),
                         struct ecase *e)
{
    struct tcase tc = {rc->preset, rc->T, PLENA_WEIGHTS_RANDOM, 1, tweak, 0};
    expect_pass(&tc, e);
    assert_int_equal(e->b.info.topk_encoding, rc->enc);
    int rmask;
    unsigned nset;
    uint32_t loaded;
    topk_shape(&e->b, &rmask, &nset, &loaded);
    assert_int_equal(rmask, rc->rmask);
    if (rc->packed) {
        assert_int_equal(nset, e->b.info.map.n_blocks);
        assert_int_equal(loaded, rc->packed);
        assert_int_equal(e->b.info.topk_packed, rc->packed);
    } else {
        assert_int_equal(nset, 0);
    }
    expect_billed(e);
}

/* R7: the preset forced to the register encoding (top-k register value
 * `packed`) gives the same output, ids and weights bits as the case e. */
static void expect_forced_register_same(const struct ecase *e, const char *preset, uint32_t packed)
{
    struct rcase rf = {preset, 4, PLENA_TOPK_ENC_REGISTER, 15, packed};
    struct ecase f;
    routing_case(&rf, force_register, &f);
    assert_memory_equal(e->d.out, f.d.out, (size_t)4 * 64 * 2);
    assert_memory_equal(e->d.ids, f.d.ids, e->d.n_pairs * 4);
    assert_memory_equal(e->d.w, f.d.w, e->d.n_pairs * 2);
    free_case(&f);
}

/* R1: (32, 4) GEMM and DOT + bias: RMASK0, no C_SET_TOPK_REG */
static void test_r1(void **state)
{
    (void)state;
    struct rcase rc = {"tiny-route-32x4", 4, PLENA_TOPK_ENC_RMASK0, 0, 0};
    struct ecase e, e2;
    routing_case(&rc, NULL, &e);
    routing_case(&rc, dot_bias, &e2);
    assert_int_equal(count_static(&e2.b, PLENA_OP_M_MM, PLENA_STAGE_ROUTER_TOPK), 0);
    assert_true(count_static(&e.b, PLENA_OP_M_MM, PLENA_STAGE_ROUTER_TOPK) > 0); /* A4 */
    assert_int_equal(count_static(&e.b, PLENA_OP_M_MM, PLENA_STAGE_RESIDUAL_SETUP), 0);
    assert_int_equal(count_static(&e.b, PLENA_OP_M_MM, PLENA_STAGE_OTHER), 0);
    expect_forced_register_same(&e, "tiny-route-32x4", 8196);
    free_case(&e);
    free_case(&e2);
}

/* R2 (+R7): (128, 8) RMASK1, eb = 2 */
static void test_r2(void **state)
{
    (void)state;
    struct rcase rc = {"tiny-route-128x8", 4, PLENA_TOPK_ENC_RMASK1, 1, 0};
    struct ecase e;
    routing_case(&rc, NULL, &e);
    assert_int_equal(e.b.info.map.eb, 2);
    expect_forced_register_same(&e, "tiny-route-128x8", 32776);
    free_case(&e);
}

/* R3-R5: REGISTER shapes */
static void test_r3_r5(void **state)
{
    (void)state;
    const struct rcase rcs[3] = {{"tiny-route-16x1", 4, PLENA_TOPK_ENC_REGISTER, 15, 4097},
                                 {"tiny-route-60x4", 4, PLENA_TOPK_ENC_REGISTER, 15, 15364},
                                 {"tiny-route-64x6", 4, PLENA_TOPK_ENC_REGISTER, 15, 16390}};
    for (int i = 0; i < 3; i++) {
        struct ecase e;
        routing_case(&rcs[i], NULL, &e);
        if (i == 0)
            for (uint32_t p = 0; p < e.d.n_pairs; p++)
                assert_int_equal(e.d.w[p], 0x3F80); /* (16, 1): weight exactly 1.0 */
        int high = 0;
        for (uint32_t p = 0; p < e.d.n_pairs; p++)
            if (e.d.ids[p] >= e.b.cfg.E / 2) high = 1;
        assert_true(high);
        free_case(&e);
    }
}

/* R6: (256, 8): 65544, 4 logit rows per token, expert 255 rank 0 of token 0 */
static void test_r6(void **state)
{
    (void)state;
    struct rcase rc = {"tiny-route-256x8", 4, PLENA_TOPK_ENC_REGISTER, 15, 65544};
    struct ecase e;
    routing_case(&rc, NULL, &e);
    assert_int_equal(e.b.info.map.eb, 4);
    const struct plena_tensor *lg = plena_moe_abi_find(&e.b.info, "logits");
    assert_non_null(lg);
    assert_int_equal(lg->rows, e.b.info.map.t_blk * 4);
    assert_int_equal(e.d.p0, 0);
    assert_int_equal(e.d.ids[0], 255);
    free_case(&e);
}

/* R8: fixed routing, input placement */
static void test_r8(void **state)
{
    (void)state;
    const char *presets[2] = {"tiny-fixed", "tiny-llama4"};
    for (int i = 0; i < 2; i++) {
        struct tcase tc = {presets[i], 4, PLENA_WEIGHTS_RANDOM, 0, NULL, i == 0};
        struct ecase e;
        expect_pass(&tc, &e);
        assert_int_equal(e.b.info.topk_encoding, PLENA_TOPK_ENC_NONE);
        assert_int_equal(e.b.info.topk_rmask, -1);
        assert_int_equal(count_static(&e.b, -1, PLENA_STAGE_ROUTER_TOPK), 0);
        assert_int_equal(count_static(&e.b, PLENA_OP_V_TOPK, -1), 0);
        assert_int_equal(count_static(&e.b, PLENA_OP_C_SET_TOPK_REG, -1), 0);
        /* the staged ids are exactly the given routing (pair order) */
        for (uint32_t p = 0; p < e.d.n_pairs; p++)
            assert_int_equal(e.d.ids[p], e.b.fixed_ids[p]);
        if (i == 1) assert_true(e.b.info.dyn_count[PLENA_STAGE_EXPERT_ROUTE_WEIGHT] > 0);
        expect_billed(&e);
        free_case(&e);
    }
}

/* S3: tiny-ds-fused T=4 (24 pairs), REGISTER 16390 */
static void test_s3(void **state)
{
    (void)state;
    struct rcase rc = {"tiny-ds-fused", 4, PLENA_TOPK_ENC_REGISTER, 15, 16390};
    struct ecase e;
    routing_case(&rc, NULL, &e);
    assert_int_equal(e.d.n_pairs, 24);
    assert_int_equal(e.b.info.dyn_count[PLENA_STAGE_OTHER], 0); /* A5 */
    free_case(&e);
}

/* K1: tiny-ksplit: block adds in both projection stages */
static void test_k1(void **state)
{
    (void)state;
    struct tcase tc = {"tiny-ksplit", 4, PLENA_WEIGHTS_RANDOM, 1, NULL, 0};
    struct ecase e;
    expect_pass(&tc, &e);
    assert_true(count_static(&e.b, PLENA_OP_V_ADD_VV, PLENA_STAGE_EXPERT_PROJECTION) > 0);
    assert_true(count_static(&e.b, PLENA_OP_V_ADD_VV, PLENA_STAGE_SHARED_EXPERT_PROJECTION) > 0);
    expect_billed(&e);
    free_case(&e);
}

/* L1: loop forms and token blocking are bit-identical */
static void test_l1(void **state)
{
    (void)state;
    const char *presets[2] = {"tiny-ds-fused", "tiny-route-256x8"};
    for (int i = 0; i < 2; i++) {
        struct tcase base = {presets[i], 8, PLENA_WEIGHTS_RANDOM, 1, NULL, 0};
        struct tcase un = base, tb = base;
        un.tweak = unroll_pairs;
        tb.tweak = tblk3;
        struct ecase e0, e1, e2;
        expect_pass(&base, &e0);
        expect_pass(&un, &e1);
        expect_pass(&tb, &e2);
        assert_int_equal(e0.b.info.pair_form, PLENA_PAIRS_LOOPED);
        assert_int_equal(e1.b.info.pair_form, PLENA_PAIRS_UNROLLED);
        assert_int_equal(e2.b.info.map.t_blk, 3);
        assert_int_equal(e2.b.info.map.n_blocks, 3);
        assert_memory_equal(e0.d.out, e1.d.out, (size_t)8 * 64 * 2);
        assert_memory_equal(e0.d.out, e2.d.out, (size_t)8 * 64 * 2);
        assert_memory_equal(e0.d.ids, e1.d.ids, e0.d.n_pairs * 4);
        assert_memory_equal(e0.d.w, e1.d.w, e0.d.n_pairs * 2);
        assert_int_equal(attribution_ok(&e1.b, &e1.d), 0);
        assert_int_equal(attribution_ok(&e2.b, &e2.d), 0);
        free_case(&e0);
        free_case(&e1);
        free_case(&e2);
    }
    /* static routed-section size independent of T in the looped form */
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, plena_model_preset_find("tiny-ds-fused"), &g_m, 2);
    o.program_only = 1;
    struct plena_moe_build a, c;
    struct plena_err err;
    assert_int_equal(plena_moe_build_run(&o, &a, &err), 0);
    o.T = 16;
    assert_int_equal(plena_moe_build_run(&o, &c, &err), 0);
    assert_int_equal(a.info.pair_form, PLENA_PAIRS_LOOPED);
    assert_int_equal(a.info.routed_static, c.info.routed_static);
    plena_moe_build_free(&a);
    plena_moe_build_free(&c);
}

/* A3 / A6 / tiny-gpt-oss coverage and the union of billed stages */
static void test_a6_union(void **state)
{
    (void)state;
    struct tcase tc = {"tiny-gpt-oss", 4, PLENA_WEIGHTS_RANDOM, 1, NULL, 0};
    struct ecase e;
    expect_pass(&tc, &e);
    expect_billed(&e);
    assert_true(e.b.info.dyn_count[PLENA_STAGE_EXPERT_BIAS] > 0);
    /* A3: accumulator_init holds exactly the zeroing of all acc rows:
     * prow x H_p/VLEN S_MAP_V_FP (one per row and column block) */
    const struct plena_tensor *acc = plena_moe_abi_find(&e.b.info, "acc");
    assert_int_equal(e.b.info.dyn_op[PLENA_OP_S_MAP_V_FP] >= (uint64_t)acc->prow, 1);
    assert_int_equal(count_static(&e.b, PLENA_OP_M_MM, PLENA_STAGE_ACCUMULATOR_INIT), 0);
    free_case(&e);
    for (int s = 0; s < PLENA_STAGE_COUNT; s++) {
        if (s == PLENA_STAGE_OTHER)
            assert_int_equal(g_union[s], 0);
        else if (!g_union[s])
            fail_msg("stage %s never billed", plena_stage_name((enum plena_stage)s));
    }
}

#ifdef PLENA_TESTING
/* docs/lowering.md "Fault injection" negatives */
static void with_fault(struct plena_moe_build_opts *o, enum plena_moe_fault f)
{
    o->cfg.fault = f;
}
static void f_shift(struct plena_moe_build_opts *o)
{
    with_fault(o, PLENA_FAULT_TOPK_SHIFT_7);
}
static void f_drop(struct plena_moe_build_opts *o)
{
    with_fault(o, PLENA_FAULT_DROP_GATE_MUL);
}
static void f_shared(struct plena_moe_build_opts *o)
{
    with_fault(o, PLENA_FAULT_SHARED_AS_ROUTED);
}
static void f_nomark(struct plena_moe_build_opts *o)
{
    with_fault(o, PLENA_FAULT_NO_MARKERS);
}

/* The build of preset (T tokens, random weights) with a fault injected,
 * run and checked into *e. */
static void run_fault(const char *preset, uint32_t T, int router_gaps,
                      void (*fault)(struct plena_moe_build_opts *), struct ecase *e)
{
    struct tcase tc = {preset, T, PLENA_WEIGHTS_RANDOM, router_gaps, fault, 0};
    run_case(&tc, e);
}

static void test_faults(void **state)
{
    (void)state;
    const char *shift_presets[4] = {"tiny-route-16x1", "tiny-route-60x4", "tiny-route-64x6",
                                    "tiny-route-256x8"};
    struct ecase e;
    for (int i = 0; i < 4; i++) {
        run_fault(shift_presets[i], 4, 1, f_shift, &e);
        assert_false(e.r.bit_exact);
        assert_true(e.r.id_mismatches > 0);
        assert_false(e.r.passed);
        free_case(&e);
    }
    run_fault("tiny-qwen2-gated", 8, 0, f_drop, &e);
    assert_false(e.r.bit_exact);
    assert_false(e.r.bound_ok);
    assert_false(e.r.passed);
    free_case(&e);
    run_fault("tiny-qwen2-gated", 8, 0, f_shared, &e);
    assert_false(a1_ok(&e.b, &e.d));
    assert_false(a2_ok(&e.b));
    free_case(&e);
    run_fault("tiny-ds-shared", 8, 0, f_nomark, &e);
    uint64_t st[PLENA_STAGE_COUNT];
    enum plena_attribution mode;
    stage_exec_from_labels(&e.b, &e.d, st, &mode);
    assert_int_equal(mode, PLENA_ATTR_LEGACY);
    assert_int_not_equal(attribution_ok(&e.b, &e.d), 0);
    free_case(&e);
}
#endif

/* --threads: the check's references split over experts and rows give the
 * very same result (every field, doubles bit for bit) at 1 and 4 threads,
 * on passing builds (routed + shared, sigmoid gate, device routing, GPT-OSS
 * biases, a K split) and on a failing comparison. */
static void expect_same_result(const struct plena_verify_result *a,
                               const struct plena_verify_result *b)
{
    assert_int_equal(a->mismatches, b->mismatches);
    assert_int_equal(a->first_mismatch, b->first_mismatch);
    assert_int_equal(a->passed, b->passed);
    assert_int_equal(a->bit_exact, b->bit_exact);
    assert_int_equal(a->bound_ok, b->bound_ok);
    assert_int_equal(a->ids_f64_ok, b->ids_f64_ok);
    assert_int_equal(a->route_near_ties, b->route_near_ties);
    assert_int_equal(a->route_different, b->route_different);
    assert_memory_equal(&a->rel_rms, &b->rel_rms, sizeof a->rel_rms);
    assert_memory_equal(&a->rel_rms_full, &b->rel_rms_full, sizeof a->rel_rms_full);
    assert_memory_equal(&a->rel_rms_norm, &b->rel_rms_norm, sizeof a->rel_rms_norm);
    assert_memory_equal(a, b, sizeof *a); /* and every other field */
}

static void test_check_threads(void **state)
{
    (void)state;
    static const struct tcase cases[] = {
        {"tiny-ds-shared", 8, PLENA_WEIGHTS_RANDOM, 0, NULL, 0},
        {"tiny-qwen2-gated", 8, PLENA_WEIGHTS_RANDOM, 0, NULL, 0},
        {"tiny-route-64x6", 12, PLENA_WEIGHTS_RANDOM, 1, NULL, 0},
        {"tiny-gpt-oss", 8, PLENA_WEIGHTS_RANDOM, 1, NULL, 0},
        {"tiny-ksplit", 8, PLENA_WEIGHTS_RANDOM, 1, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ecase e;
        run_case(&cases[i], &e);
        assert_true(e.r.passed);
        struct plena_verify_result r1, r4;
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_verify_check_threads(&e.b, &e.d, 1, &r1, &err), 0);
        plena_pool_test_workers_first(1); /* the work on the three workers' parts */
        assert_int_equal(plena_verify_check_threads(&e.b, &e.d, 4, &r4, &err), 0);
        plena_pool_test_workers_first(0);
        assert_true(r1.passed);
        expect_same_result(&e.r, &r1);
        expect_same_result(&r1, &r4);
        e.d.out[3] ^= 0x0001; /* a failing comparison fails the same way */
        assert_int_equal(plena_verify_check_threads(&e.b, &e.d, 1, &r1, &err), 0);
        plena_pool_test_workers_first(1); /* the work on the three workers' parts */
        assert_int_equal(plena_verify_check_threads(&e.b, &e.d, 4, &r4, &err), 0);
        plena_pool_test_workers_first(0);
        assert_false(r1.passed);
        expect_same_result(&r1, &r4);
        free_case(&e);
    }
}

/* C1: the M_MM / H_PREFETCH_M tables of
 * docs/lowering.md "Cost accounting" (H = I = I_s = 64, k = 2) */
static void c1_row(const struct plena_settings *s, const char *preset, uint32_t T, int routed,
                   uint64_t want_mm, uint64_t want_pf)
{
    struct plena_verify_cost_row r;
    struct plena_err err;
    assert_int_equal(plena_verify_cost_row_measure(s, preset, T, routed, &r, &err), 0);
    assert_int_equal(r.m_mm, want_mm);
    assert_int_equal(r.h_prefetch_m, want_pf);
    assert_true(r.predicted_equals_executed);
}

static void test_c1(void **state)
{
    (void)state;
    struct plena_settings s = g_set;
    s.blen = 64;
    static const uint32_t rt[4] = {1, 4, 16, 64};
    for (int i = 0; i < 4; i++)
        c1_row(&s, "tiny-fixed", rt[i], 1, 6ull * rt[i], 6ull * rt[i]);
    static const uint32_t st[5] = {1, 4, 8, 16, 64};
    for (int i = 0; i < 5; i++)
        c1_row(&s, "tiny-ds-shared", st[i], 0, 3, 3);
    s.blen = 4;
    c1_row(&s, "tiny-fixed", 1, 1, 96, 6);
    c1_row(&s, "tiny-fixed", 4, 1, 384, 24);
    c1_row(&s, "tiny-fixed", 16, 1, 1536, 96);
    c1_row(&s, "tiny-ds-shared", 1, 0, 48, 3);
    c1_row(&s, "tiny-ds-shared", 8, 0, 96, 3);
    c1_row(&s, "tiny-ds-shared", 64, 0, 768, 3);
}

/* the CLI: a checked small run, and the rejections of the brief */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return st == -1 ? -1 : (st >> 8) & 0xFF;
}

/* Exit code of `plena moe --model FILE --tokens 2 --no-run`, FILE the
 * HF-style config json written to g_tmp/name. */
static int moe_config_exit(const char *bin, const char *name, const char *json)
{
    char p[500];
    snprintf(p, sizeof p, "%s/%s", g_tmp, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    return sh("'%s' moe --model '%s' --tokens 2 --no-run --out '%s/x' 2>/dev/null", bin, p, g_tmp);
}

static void test_cli(void **state)
{
    (void)state;
    const char *bin = getenv("PLENA_BIN");
    if (!bin || access(bin, X_OK) != 0) skip();
    assert_int_equal(sh("'%s' moe --model tiny-ds-fused --tokens 2 --check --profile --out "
                        "'%s/cli' >/dev/null",
                        bin, g_tmp),
                     0);
    char p[500];
    snprintf(p, sizeof p, "%s/cli/stage_profile.json", g_tmp);
    assert_int_equal(access(p, R_OK), 0);
    assert_int_not_equal(sh("'%s' moe --model no-such-model --tokens 2 --no-run --out '%s/x' "
                            "2>/dev/null",
                            bin, g_tmp),
                         0);
    assert_int_not_equal(
        sh("'%s' moe --model tiny-fixed --tokens 0 --no-run --out '%s/x' 2>/dev/null", bin, g_tmp),
        0);
    assert_int_not_equal(
        moe_config_exit(bin, "k6.json",
                        "{\"hidden_size\": 64, \"num_experts\": 4, "
                        "\"num_experts_per_tok\": 6, \"moe_intermediate_size\": 64}"),
        0);
    assert_int_not_equal(
        moe_config_exit(bin, "h96.json",
                        "{\"hidden_size\": 96, \"num_experts\": 8, "
                        "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 64}"),
        0);
    /* a route trace of the wrong shape (E = 8 vs tiny-fixed's 16) */
    assert_int_not_equal(sh("'%s' moe --model tiny-fixed --tokens 4 --routing "
                            "'%s/src/trace/testdata/example_v2.json' --no-run --out '%s/x' "
                            "2>/dev/null",
                            bin, PLENA_SOURCE_DIR, g_tmp),
                         0);
}

/* build directory: file set, sparse hbm.bin, --program-only set */
static void test_build_dir(void **state)
{
    (void)state;
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, plena_model_preset_find("tiny-fixed"), &g_m, 2);
    uint32_t ids[4] = {15, 3, 3, 9};
    float w[4] = {0.7f, 0.3f, 0.1f, 0.9f};
    o.fixed_ids = ids;
    o.fixed_w = w;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/dir", g_tmp);
    o.out_dir = dir;
    struct plena_moe_build b;
    struct plena_err err;
    assert_int_equal(plena_moe_build_run(&o, &b, &err), 0);
    static const char *files[7] = {"program.asm",  "program.mem",      "hbm.bin",    "fp_sram.bin",
                                   "int_sram.bin", "vram_preload.bin", "layout.json"};
    for (int i = 0; i < 7; i++) {
        char p[500];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        assert_int_equal(access(p, R_OK), 0);
    }
    /* only experts 3, 9 and 15 are materialised: 3 experts x 3 tables */
    int n = 0;
    for (uint32_t e = 0; e < 16; e++)
        n += b.present[e];
    assert_int_equal(n, 3);
    /* route weight chain: binary32 -> fp16 (RNE) in the image */
    assert_int_equal(b.fp16[b.info.map.fp_base + b.info.map.w_off + 0],
                     plena_num_fp16_from_f32(0.7f));
    assert_int_equal(b.ints[b.info.map.int_base + b.info.map.ids_off + 3], 9);
    plena_moe_build_free(&b);
    /* program-only writes exactly three files */
    snprintf(dir, sizeof dir, "%s/ponly", g_tmp);
    o.program_only = 1;
    assert_int_equal(plena_moe_build_run(&o, &b, &err), 0);
    char p[500];
    snprintf(p, sizeof p, "%s/hbm.bin", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/layout.json", dir);
    assert_int_equal(access(p, F_OK), 0);
    plena_moe_build_free(&b);
}

/* ---- F1: fusion identity (docs/lowering.md "Layer steps" and "Checking a build") ---- */

static double silu64(double g)
{
    return g / (1.0 + exp(-g));
}

/* y[t] = sum over intermediate columns j in [j0, j1) of
 * silu(x.G[:,j]) * (x.U[:,j]) * D[j,:], in double (x = h rows, T x H). */
static void shared64(const float *x, uint32_t T, uint32_t H, uint32_t Is, const float *G,
                     const float *U, const float *D, uint32_t j0, uint32_t j1, double *y)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t j = j0; j < j1; j++) {
            double g = 0, u = 0;
            for (uint32_t r = 0; r < H; r++) {
                g += (double)x[t * H + r] * G[(size_t)r * Is + j];
                u += (double)x[t * H + r] * U[(size_t)r * Is + j];
            }
            double a = silu64(g) * u;
            for (uint32_t c = 0; c < H; c++)
                y[t * H + c] += a * D[(size_t)j * H + c];
        }
}

static double rel_diff(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num) / sqrt(den);
}

static void shared_only(struct plena_moe_build_opts *o)
{
    o->cfg.routing = PLENA_ROUTING_NONE;
    o->cfg.E = o->cfg.k = 0;
    o->cfg.residual = PLENA_RESIDUAL_NONE; /* output = S, x = h */
}

/* Copies rows [r0, r0 + rows) x columns [c0, c0 + cols) of the MXFP8 tensor
 * [K_p, N_p] at src (blocks of 8 along a row, c0 and cols multiples of 8) into
 * the MXFP8 tensor [rows, cols] at dst: element and scale bytes, no
 * re-encoding. */
static void copy_mx(const struct plena_hbm_region *src, uint32_t K_p, uint32_t N_p,
                    struct plena_hbm_region *dst, uint32_t r0, uint32_t rows, uint32_t c0,
                    uint32_t cols)
{
    assert_int_equal(dst->n, (uint64_t)rows * cols * 9 / 8);
    assert_true(src->n >= (uint64_t)K_p * N_p * 9 / 8);
    for (uint32_t r = 0; r < rows; r++) {
        memcpy(dst->bytes + (size_t)r * cols, src->bytes + (size_t)(r0 + r) * N_p + c0, cols);
        memcpy(dst->bytes + (size_t)rows * cols + (size_t)r * (cols / 8),
               src->bytes + (size_t)K_p * N_p + (size_t)(r0 + r) * (N_p / 8) + c0 / 8, cols / 8);
    }
}

static void build_shared_only(const char *preset, struct plena_moe_build *b)
{
    struct tcase tc = {preset, 4, PLENA_WEIGHTS_RANDOM, 0, shared_only, 0};
    struct plena_moe_build_opts o;
    uint32_t *ids;
    float *w;
    opts_for(&tc, &o, &ids, &w);
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_moe_build_run(&o, b, &err);
    if (rc) fprintf(stderr, "build %s: %s\n", preset, err.msg);
    assert_int_equal(rc, 0);
}

static void emulate(const struct plena_moe_build *b, struct plena_verify_device *d)
{
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_verify_emulate(b, &g_set, NULL, d, &err), 0);
    assert_false(d->trapped);
}

static void test_f1_fusion_identity(void **state)
{
    (void)state;
    /* fused: tiny-ds-fused's shared branch, 2 x 64 -> 128 */
    struct plena_moe_build fb, sb[2];
    build_shared_only("tiny-ds-fused", &fb);
    const uint32_t T = 4, H = 64, m = 64, Is = 128;
    assert_int_equal(fb.cfg.Is, Is);
    assert_int_equal(fb.cfg.n_shared, 2);
    struct plena_verify_refdata rd;
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_verify_refdata_from_build(&fb, &rd, &err), 0);
    const float *G = rd.in.ws_gate, *U = rd.in.ws_up, *D = rd.in.ws_down, *x = rd.in.h;
    /* float64: fused vs the two experts G_i = G[:, 64i..], D_i = D[64i.., :] */
    double *yf = calloc((size_t)T * H, sizeof *yf), *ys = calloc((size_t)T * H, sizeof *ys);
    shared64(x, T, H, Is, G, U, D, 0, Is, yf);
    double *y2 = calloc((size_t)T * H, sizeof *y2);
    shared64(x, T, H, Is, G, U, D, 0, m, ys); /* expert 1 and expert 2 apart, then summed */
    shared64(x, T, H, Is, G, U, D, m, 2 * m, y2);
    for (size_t e = 0; e < (size_t)T * H; e++)
        ys[e] += y2[e];
    free(y2);
    double rd64 = rel_diff(ys, yf, (size_t)T * H);
    assert_true(rd64 <= 1e-12);
    /* emulated separate: two one-expert shared layers (tiny-ds-shared, width
     * 64) carrying exactly the fused tensors' bytes of expert i */
    for (int i = 0; i < 2; i++) {
        build_shared_only("tiny-ds-shared", &sb[i]);
        const struct plena_moe_map *fm = &fb.info.map, *sm = &sb[i].info.map;
        struct plena_hbm_region *g =
            (struct plena_hbm_region *)plena_moe_build_region(&sb[i], sm->shared[0]);
        struct plena_hbm_region *u =
            (struct plena_hbm_region *)plena_moe_build_region(&sb[i], sm->shared[1]);
        struct plena_hbm_region *dn =
            (struct plena_hbm_region *)plena_moe_build_region(&sb[i], sm->shared[2]);
        assert_non_null(g);
        assert_non_null(u);
        assert_non_null(dn);
        copy_mx(plena_moe_build_region(&fb, fm->shared[0]), H, Is, g, 0, H, i * m, m);
        copy_mx(plena_moe_build_region(&fb, fm->shared[1]), H, Is, u, 0, H, i * m, m);
        copy_mx(plena_moe_build_region(&fb, fm->shared[2]), Is, H, dn, i * m, m, 0, H);
        struct plena_verify_refdata ri;
        assert_int_equal(plena_verify_refdata_from_build(&sb[i], &ri, &err), 0);
        assert_memory_equal(ri.in.h, x, (size_t)T * H * sizeof *x); /* same input */
        for (uint32_t r = 0; r < H; r++)
            for (uint32_t c = 0; c < m; c++) {
                assert_true(ri.in.ws_gate[r * m + c] == G[r * Is + i * m + c]);
                assert_true(ri.in.ws_down[c * H + r] == D[(i * m + c) * H + r]);
            }
        plena_verify_refdata_free(&ri);
    }
    struct plena_verify_device df, d0, d1;
    emulate(&fb, &df);
    emulate(&sb[0], &d0);
    emulate(&sb[1], &d1);
    double *ef = calloc((size_t)T * H, sizeof *ef), *es = calloc((size_t)T * H, sizeof *es);
    int equal = 1;
    for (size_t e = 0; e < (size_t)T * H; e++) {
        float s1 = plena_num_bf16_to_f32(d0.out[e]), s2 = plena_num_bf16_to_f32(d1.out[e]);
        float sum = plena_num_round_bf16(s1 + s2); /* the separate outputs added in BF16 */
        ef[e] = plena_num_bf16_to_f32(df.out[e]);
        es[e] = sum;
        if (ef[e] != es[e]) equal = 0;
    }
    double rf = rel_diff(ef, yf, (size_t)T * H), rs = rel_diff(es, yf, (size_t)T * H);
    if (getenv("PLENA_E2E_VERBOSE"))
        fprintf(stderr, "F1: f64 rel %.3g; emulated fused %.5f separate %.5f (%s)\n", rd64, rf, rs,
                equal ? "equal" : "not equal");
    assert_true(rf <= 0.02); /* not required equal to each other: each within the bound */
    assert_true(rs <= 0.02);
    free(ef);
    free(es);
    free(yf);
    free(ys);
    plena_verify_device_free(&df);
    plena_verify_device_free(&d0);
    plena_verify_device_free(&d1);
    plena_verify_refdata_free(&rd);
    plena_moe_build_free(&fb);
    plena_moe_build_free(&sb[0]);
    plena_moe_build_free(&sb[1]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_s1),
    cmocka_unit_test(test_bounds_pairing),
    cmocka_unit_test(test_check_threads),
    cmocka_unit_test(test_s2),
    cmocka_unit_test(test_f1_fusion_identity),
    cmocka_unit_test(test_s3),
    cmocka_unit_test(test_r1),
    cmocka_unit_test(test_r2),
    cmocka_unit_test(test_r3_r5),
    cmocka_unit_test(test_r6),
    cmocka_unit_test(test_r8),
    cmocka_unit_test(test_k1),
    cmocka_unit_test(test_l1),
    cmocka_unit_test(test_a6_union),
    cmocka_unit_test(test_build_dir),
    cmocka_unit_test(test_c1),
    cmocka_unit_test(test_cli),
#ifdef PLENA_TESTING
    cmocka_unit_test(test_faults),
#endif
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
