/* Emulator throughput benchmark (not a test).
 * (a) matrix-bound: M_MM in hardware loops at MLEN 64 and BLEN 4 (default),
 *     16 and 64, simulated MACs per host second, next to a plain triple-loop
 *     f32 GEMM and (when built with OpenBLAS) single-threaded sgemm, as ratios;
 *     plus M_BMM (broadcast attention scores) and M_MV;
 * (b) dispatch-bound: scalar ops, a vector mix and each vector op alone in a
 *     hardware loop, instructions/s.
 * Every figure is the best of `reps` runs, timed in process CPU time
 * (CLOCK_PROCESS_CPUTIME_ID: on a shared, oversubscribed host wall time
 * measures the other tenants; CPU time counts only cycles spent here). The
 * contenders of (a) run in interleaved rounds, so each ratio compares the
 * same stretch of time. Only the public emu API is used, so the same file
 * measures older emulators. Usage: emu_throughput [scale] [reps]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/emu.h"
#include "num/num.h"

#ifdef PLENA_HAVE_OPENBLAS
#include <cblas.h>
void openblas_set_num_threads(int n);
#endif

static unsigned g_scale = 1, g_reps = 5;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void settings(struct plena_settings *s, uint32_t blen)
{
    memset(s, 0, sizeof *s);
    s->dc_en = 1;
    s->max_loop_instructions = 100000;
    s->mlen = s->vlen = 64;
    s->blen = blen;
    s->hlen = 16;
    s->broadcast_amount = 4;
    s->hbm_size = 1ull << 34;
    s->matrix_sram_size = 4096;
    s->vector_sram_size = 4194304;
    s->hbm_m_prefetch_amount = 64;
    s->hbm_v_prefetch_amount = 4;
    s->hbm_v_writeback_amount = 4;
    s->fp_sram_depth = 1024;
    s->int_sram_depth = 1024;
    struct plena_hbm_type mx = {PLENA_HBM_MX, 8};
    s->hbm_m_weight_type = s->hbm_m_kv_type = s->hbm_v_act_type = s->hbm_v_kv_type = mx;
}

static uint32_t enc(enum plena_op op, unsigned rd, unsigned rs1, unsigned rs2, unsigned rs3,
                    uint32_t imm)
{
    struct plena_insn in = {(uint8_t)op,  (uint8_t)rd, (uint8_t)rs1, (uint8_t)rs2,
                            (uint8_t)rs3, 0,           imm};
    return plena_isa_encode(&in);
}

static float frand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((int)(*s >> 9) % 2001 - 1000) / 1000.0f;
}

static struct plena_emu *new_emu(uint32_t blen)
{
    struct plena_settings s;
    settings(&s, blen);
    struct plena_emu *e = NULL;
    if (plena_emu_new(&s, 0, &e, NULL)) exit(1);
    uint32_t seed = 1;
    for (uint64_t i = 0; i < 64 * 64 * 4; i++)
        plena_emu_mram_set(e, i, frand(&seed));
    for (uint64_t i = 0; i < 64 * 64 * 2; i++)
        plena_emu_vram_set(e, i, plena_num_bf16_from_f32(frand(&seed)));
    for (uint32_t i = 0; i < 8; i++)
        plena_emu_fpsram_set(e, i, plena_num_bf16_from_f32(0.5f + 0.125f * (float)i));
    return e;
}

/* Seconds of one run of the program (CPU time); *executed from it. */
static double run_once(struct plena_emu *e, const uint32_t *w, size_t n, uint64_t *executed)
{
    struct plena_program prog;
    memset(&prog, 0, sizeof prog);
    prog.words = (uint32_t *)w;
    prog.n = n;
    struct plena_emu_result res;
    struct plena_err err = {0};
    double t0 = now();
    if (plena_emu_run(e, &prog, NULL, NULL, &res, &err) || res.status != PLENA_RUN_COMPLETED) {
        fprintf(stderr, "run failed: %s\n", res.trap.detail);
        exit(1);
    }
    double t = now() - t0;
    *executed = res.instructions_executed;
    return t;
}

/* Best-of-reps seconds for one run of the program; *executed from the last. */
static double run_prog(struct plena_emu *e, const uint32_t *w, size_t n, uint64_t *executed)
{
    double best = 1e30;
    for (unsigned r = 0; r < g_reps; r++) {
        double t = run_once(e, w, n, executed);
        if (t < best) best = t;
    }
    return best;
}

/* M_MM over a whole 64x64 tile: (64/BLEN)^2 M_MM per outer iteration. */
struct mm_case {
    uint32_t blen;
    struct plena_emu *e;
    uint32_t w[16];
    size_t n;
    double n_mm, macs, best;
};

static void mm_case_init(struct mm_case *c, uint32_t blen, uint64_t target_macs)
{
    memset(c, 0, sizeof *c);
    c->blen = blen;
    c->e = new_emu(blen);
    c->best = 1e30;
    uint32_t groups = 64 / blen;
    double macs_per_outer = (double)groups * groups * blen * blen * 64;
    uint32_t outer = (uint32_t)((double)target_macs * g_scale / macs_per_outer);
    if (outer < 1) outer = 1;
    uint32_t *w = c->w;
    size_t n = 0;
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, outer);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 0, 0, 0, 0); /* vram pointer */
    w[n++] = enc(PLENA_OP_C_LOOP_START, 4, 0, 0, 0, groups);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 2, 0, 0, 0, 0); /* mram pointer */
    w[n++] = enc(PLENA_OP_C_LOOP_START, 5, 0, 0, 0, groups);
    w[n++] = enc(PLENA_OP_M_MM, 0, 2, 3, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 2, 2, 0, 0, blen * 64); /* next BLEN columns */
    w[n++] = enc(PLENA_OP_C_LOOP_END, 5, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_M_MM_WO, 6, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 3, 0, 0, blen * 64); /* next BLEN rows */
    w[n++] = enc(PLENA_OP_C_LOOP_END, 4, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    c->n = n;
    c->n_mm = (double)outer * groups * groups;
    c->macs = (double)outer * macs_per_outer;
}

static void mm_case_round(struct mm_case *c)
{
    uint64_t executed;
    double t = run_once(c->e, c->w, c->n, &executed);
    if (t < c->best) c->best = t;
}

/* MAC/s of the best round; prints the line and frees the machine. */
static double mm_case_report(struct mm_case *c)
{
    double rate = c->macs / c->best;
    printf("matrix-bound M_MM MLEN 64 BLEN %2u: %.0f M_MM in %.4f s = %.3g MAC/s\n", c->blen,
           c->n_mm, c->best, rate);
    plena_emu_free(c->e);
    return rate;
}

/* One matrix op (M_BMM or M_MV) in a loop with its write-out every `per_wo`. */
static void matrix_op(const char *name, enum plena_op op, enum plena_op wo, uint32_t per_wo,
                      double macs_per_op, uint32_t outer)
{
    struct plena_emu *e = new_emu(4);
    uint32_t w[16];
    size_t n = 0;
    outer *= g_scale;
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 2, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_S_LUI_INT, 6, 0, 0, 0, 64); /* 64 << 12: write-out rows */
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, outer);
    w[n++] = enc(PLENA_OP_C_LOOP_START, 4, 0, 0, 0, per_wo);
    w[n++] = enc(op, 0, 2, 3, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 4, 0, 0, 0, 0);
    w[n++] = enc(wo, 6, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    uint64_t executed;
    double t = run_prog(e, w, n, &executed);
    double n_op = (double)outer * per_wo;
    printf("matrix-bound %-6s: %.0f ops in %.4f s = %.3g MAC/s (%.2f us/op)\n", name, n_op, t,
           n_op * macs_per_op / t, t / n_op * 1e6);
    plena_emu_free(e);
}

/* A loop of `k` copies of one instruction word (plus C_LOOP_END). */
static void vector_op(struct plena_emu *e, const char *name, uint32_t word)
{
    uint32_t w[32];
    size_t n = 0;
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 7, 0, 0, 0, 64);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 8, 0, 0, 0, 128);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 9, 0, 0, 0, 3);
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, 20000 * g_scale);
    for (int i = 0; i < 16; i++)
        w[n++] = word;
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    uint64_t executed;
    double t = run_prog(e, w, n, &executed);
    printf("  %-10s %7.1f M instructions/s\n", name, (double)executed / t / 1e6);
}

int main(int argc, char **argv)
{
    g_scale = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    if (g_scale == 0) g_scale = 1;
    g_reps = argc > 2 ? (unsigned)atoi(argv[2]) : 5;
    if (g_reps == 0) g_reps = 1;

    /* (a) matrix-bound. The three M_MM programs, the triple loop and sgemm
     * are timed in interleaved rounds (each once per round) and each keeps
     * its best round, so a noisy stretch of this shared host slows all of
     * them instead of skewing one side of a ratio. */
    enum { G = 256 };
    uint32_t seed = 7;
    float *A = malloc(sizeof(float) * G * G), *Bm = malloc(sizeof(float) * G * G),
          *C = calloc(G * G, sizeof(float));
    if (!A || !Bm || !C) return 1;
    for (int i = 0; i < G * G; i++) {
        A[i] = frand(&seed);
        Bm[i] = frand(&seed);
    }
    struct mm_case mm[3];
    mm_case_init(&mm[0], 4, 50000000);
    mm_case_init(&mm[1], 16, 100000000);
    mm_case_init(&mm[2], 64, 100000000);
#ifdef PLENA_HAVE_OPENBLAS
    openblas_set_num_threads(1);
#endif
    double tl = 1e30, tb = 1e30;
    for (unsigned rep = 0; rep < g_reps; rep++) {
        for (int k = 0; k < 3; k++)
            mm_case_round(&mm[k]);
        double t0 = now();
        for (int i = 0; i < G; i++)
            for (int k = 0; k < G; k++) {
                float a = A[i * G + k];
                for (int j = 0; j < G; j++)
                    C[i * G + j] += a * Bm[k * G + j];
            }
        double t = now() - t0;
        if (t < tl) tl = t;
#ifdef PLENA_HAVE_OPENBLAS
        t0 = now();
        for (int r = 0; r < 10; r++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, G, G, G, 1.0f, A, G, Bm, G, 0.0f,
                        C, G);
        t = (now() - t0) / 10;
        if (t < tb) tb = t;
#endif
    }
    double emu_rate = mm_case_report(&mm[0]);
    double emu16 = mm_case_report(&mm[1]);
    double emu64 = mm_case_report(&mm[2]);
    /* M_BMM: BA*MLEN*MLEN*HLEN MACs; M_MV: MLEN*BLEN */
    matrix_op("M_BMM", PLENA_OP_M_BMM, PLENA_OP_M_BMM_WO, 4, 4.0 * 64 * 64 * 16, 200);
    matrix_op("M_MV", PLENA_OP_M_MV, PLENA_OP_M_MV_WO, 16, 64.0 * 4, 20000);
    double loop_rate = (double)G * G * G / tl;
    printf("triple-loop f32 GEMM %dx%dx%d: %.3g MAC/s (checksum %g); emulator(BLEN 4)/loop = "
           "%.3f\n",
           G, G, G, loop_rate, (double)C[G + 1], emu_rate / loop_rate);
#ifdef PLENA_HAVE_OPENBLAS
    double blas_rate = (double)G * G * G / tb;
    printf("OpenBLAS sgemm (1 thread) %dx%dx%d: %.3g MAC/s; emulator/OpenBLAS = %.3f (BLEN 4), "
           "%.3f (BLEN 16), %.3f (BLEN 64)\n",
           G, G, G, blas_rate, emu_rate / blas_rate, emu16 / blas_rate, emu64 / blas_rate);
#else
    (void)tb;
    printf("OpenBLAS not found at configure time: sgemm comparison skipped\n");
    (void)emu16;
    (void)emu64;
#endif
    free(A);
    free(Bm);
    free(C);

    /* (b) dispatch-bound: scalar int + FP ops in a hardware loop */
    struct plena_emu *e = new_emu(4);
    uint32_t w[64];
    size_t n = 0;
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, 20000 * g_scale);
    w[n++] = enc(PLENA_OP_C_LOOP_START, 2, 0, 0, 0, 100);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 3, 0, 0, 1);
    w[n++] = enc(PLENA_OP_S_ADD_INT, 4, 4, 3, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADD_FP, 1, 1, 2, 0, 0);
    w[n++] = enc(PLENA_OP_S_MUL_INT, 5, 3, 4, 0, 0);
    w[n++] = enc(PLENA_OP_S_MAX_FP, 2, 1, 3, 0, 0);
    w[n++] = enc(PLENA_OP_S_SUB_INT, 6, 5, 3, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 2, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    uint64_t executed;
    double t = run_prog(e, w, n, &executed);
    printf("dispatch-bound scalar: %llu instructions in %.3f s = %.1f M instructions/s\n",
           (unsigned long long)executed, t, (double)executed / t / 1e6);

    /* (b') vector ops in a hardware loop (the original mix) */
    n = 0;
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 7, 0, 0, 0, 64);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 8, 0, 0, 0, 128);
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, 200000 * g_scale);
    w[n++] = enc(PLENA_OP_V_ADD_VV, 8, 7, 8, 0, 0);
    w[n++] = enc(PLENA_OP_V_MUL_VF, 8, 8, 1, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 3, 0, 0, 1);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    t = run_prog(e, w, n, &executed);
    printf("dispatch-bound vector mix: %llu instructions in %.3f s = %.1f M instructions/s\n",
           (unsigned long long)executed, t, (double)executed / t / 1e6);

    /* each vector op alone: 16 copies per loop iteration, VLEN 64 */
    printf("vector ops, one kind per loop (VLEN 64):\n");
    vector_op(e, "V_ADD_VV", enc(PLENA_OP_V_ADD_VV, 8, 7, 8, 0, 0));
    vector_op(e, "V_SUB_VV", enc(PLENA_OP_V_SUB_VV, 8, 7, 8, 0, 0));
    vector_op(e, "V_MUL_VV", enc(PLENA_OP_V_MUL_VV, 8, 7, 8, 0, 0));
    vector_op(e, "V_ADD_VF", enc(PLENA_OP_V_ADD_VF, 8, 7, 1, 0, 0));
    vector_op(e, "V_SUB_VF", enc(PLENA_OP_V_SUB_VF, 8, 7, 1, 0, 0));
    vector_op(e, "V_MUL_VF", enc(PLENA_OP_V_MUL_VF, 8, 8, 1, 0, 0));
    vector_op(e, "V_MAX_VF", enc(PLENA_OP_V_MAX_VF, 8, 7, 1, 0, 0));
    vector_op(e, "V_MIN_VF", enc(PLENA_OP_V_MIN_VF, 8, 7, 1, 0, 0));
    vector_op(e, "V_RECI_V", enc(PLENA_OP_V_RECI_V, 8, 7, 0, 0, 0));
    vector_op(e, "V_EXP_V", enc(PLENA_OP_V_EXP_V, 8, 7, 0, 0, 0));
    vector_op(e, "V_SHFT_V", enc(PLENA_OP_V_SHFT_V, 8, 7, 9, 0, 0));
    vector_op(e, "V_RED_SUM", enc(PLENA_OP_V_RED_SUM, 1, 7, 0, 0, 0));
    vector_op(e, "V_RED_MAX", enc(PLENA_OP_V_RED_MAX, 1, 7, 0, 0, 0));
    plena_emu_free(e);
    return 0;
}
