/* Emulator throughput benchmark (not a test).
 * (a) matrix-bound: M_MM in a hardware loop, simulated MACs per host second,
 *     next to a plain triple-loop f32 GEMM and (when built with OpenBLAS)
 *     single-threaded sgemm, as ratios;
 * (b) dispatch-bound: scalar/vector ops in a hardware loop, instructions/s.
 * Programs are built in memory with plena_isa_encode. */
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void settings(struct plena_settings *s)
{
    memset(s, 0, sizeof *s);
    s->dc_en = 1;
    s->max_loop_instructions = 100000;
    s->mlen = s->vlen = 64;
    s->blen = 4;
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

static double run_prog(struct plena_emu *e, uint32_t *w, size_t n, uint64_t *executed)
{
    struct plena_program prog;
    memset(&prog, 0, sizeof prog);
    prog.words = w;
    prog.n = n;
    struct plena_emu_result res;
    struct plena_err err = {0};
    double t0 = now();
    if (plena_emu_run(e, &prog, NULL, NULL, &res, &err) || res.status != PLENA_RUN_COMPLETED) {
        fprintf(stderr, "run failed: %s\n", res.trap.detail);
        exit(1);
    }
    *executed = res.instructions_executed;
    return now() - t0;
}

static float frand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((int)(*s >> 9) % 2001 - 1000) / 1000.0f;
}

int main(int argc, char **argv)
{
    unsigned scale = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    if (scale == 0) scale = 1;
    struct plena_settings s;
    settings(&s);
    struct plena_emu *e = NULL;
    if (plena_emu_new(&s, 0, &e, NULL)) return 1;
    uint32_t seed = 1;
    for (uint64_t i = 0; i < 64 * 64 * 4; i++)
        plena_emu_mram_set(e, i, frand(&seed));
    for (uint64_t i = 0; i < 64 * 64; i++)
        plena_emu_vram_set(e, i, plena_num_bf16_from_f32(frand(&seed)));

    /* (a) matrix-bound: 16 column groups x 16 row groups per outer iteration */
    uint32_t w[64];
    size_t n = 0;
    uint32_t outer = 200 * scale;
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, outer);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 0, 0, 0, 0); /* vram pointer */
    w[n++] = enc(PLENA_OP_C_LOOP_START, 4, 0, 0, 0, 16);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 2, 0, 0, 0, 0); /* mram pointer */
    w[n++] = enc(PLENA_OP_C_LOOP_START, 5, 0, 0, 0, 16);
    w[n++] = enc(PLENA_OP_M_MM, 0, 2, 3, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 2, 2, 0, 0, 4 * 64); /* next BLEN columns */
    w[n++] = enc(PLENA_OP_C_LOOP_END, 5, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_M_MM_WO, 6, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 3, 0, 0, 4 * 64); /* next BLEN rows */
    w[n++] = enc(PLENA_OP_C_LOOP_END, 4, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    uint64_t executed;
    double t = run_prog(e, w, n, &executed);
    double n_mm = (double)outer * 256.0;
    double macs = n_mm * 4 * 4 * 64;
    double emu_rate = macs / t;
    printf("matrix-bound: %.0f M_MM, %.3g simulated MACs in %.3f s = %.3g MAC/s\n", n_mm, macs, t,
           emu_rate);

    /* plain triple loop f32 GEMM, 256^3 */
    enum { G = 256 };
    float *A = malloc(sizeof(float) * G * G), *Bm = malloc(sizeof(float) * G * G),
          *C = calloc(G * G, sizeof(float));
    for (int i = 0; i < G * G; i++) {
        A[i] = frand(&seed);
        Bm[i] = frand(&seed);
    }
    int reps = 4 * (int)scale;
    double t0 = now();
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < G; i++)
            for (int k = 0; k < G; k++) {
                float a = A[i * G + k];
                for (int j = 0; j < G; j++)
                    C[i * G + j] += a * Bm[k * G + j];
            }
    double tl = now() - t0;
    double loop_rate = (double)reps * G * G * G / tl;
    printf("triple-loop f32 GEMM %dx%dx%d: %.3g MAC/s (checksum %g); emulator/loop = %.3f\n", G, G,
           G, loop_rate, (double)C[G + 1], emu_rate / loop_rate);
#ifdef PLENA_HAVE_OPENBLAS
    openblas_set_num_threads(1);
    reps = 40 * (int)scale;
    t0 = now();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, G, G, G, 1.0f, A, G, Bm, G, 0.0f, C,
                    G);
    double tb = now() - t0;
    double blas_rate = (double)reps * G * G * G / tb;
    printf("OpenBLAS sgemm (1 thread) %dx%dx%d: %.3g MAC/s; emulator/OpenBLAS = %.4f\n", G, G, G,
           blas_rate, emu_rate / blas_rate);
#else
    printf("OpenBLAS not found at configure time: sgemm comparison skipped\n");
#endif
    free(A);
    free(Bm);
    free(C);

    /* (b) dispatch-bound: scalar int + FP ops in a hardware loop */
    n = 0;
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, 20000 * scale);
    w[n++] = enc(PLENA_OP_C_LOOP_START, 2, 0, 0, 0, 100);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 3, 0, 0, 1);
    w[n++] = enc(PLENA_OP_S_ADD_INT, 4, 4, 3, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADD_FP, 1, 1, 2, 0, 0);
    w[n++] = enc(PLENA_OP_S_MUL_INT, 5, 3, 4, 0, 0);
    w[n++] = enc(PLENA_OP_S_MAX_FP, 2, 1, 3, 0, 0);
    w[n++] = enc(PLENA_OP_S_SUB_INT, 6, 5, 3, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 2, 0, 0, 0, 0);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    t = run_prog(e, w, n, &executed);
    printf("dispatch-bound scalar: %llu instructions in %.3f s = %.1f M instructions/s\n",
           (unsigned long long)executed, t, (double)executed / t / 1e6);

    /* (b') vector ops in a hardware loop */
    n = 0;
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 7, 0, 0, 0, 64);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 8, 0, 0, 0, 128);
    w[n++] = enc(PLENA_OP_C_LOOP_START, 1, 0, 0, 0, 200000 * scale);
    w[n++] = enc(PLENA_OP_V_ADD_VV, 8, 7, 8, 0, 0);
    w[n++] = enc(PLENA_OP_V_MUL_VF, 8, 8, 1, 0, 0);
    w[n++] = enc(PLENA_OP_S_ADDI_INT, 3, 3, 0, 0, 1);
    w[n++] = enc(PLENA_OP_C_LOOP_END, 1, 0, 0, 0, 0);
    t = run_prog(e, w, n, &executed);
    printf("dispatch-bound vector mix: %llu instructions in %.3f s = %.1f M instructions/s\n",
           (unsigned long long)executed, t, (double)executed / t / 1e6);
    plena_emu_free(e);
    return 0;
}
