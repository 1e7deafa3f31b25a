/* plena trace route prefill throughput (docs/traces.md; not a test):
 * writes a synthetic 2-layer Qwen3-MoE checkpoint at Qwen3-30B-A3B width
 * (hidden 2048, 32/4 heads of 128, experts of width 768; the expert count is
 * an argument, default 16 instead of 128 because the forward pass holds the
 * weights as f32: 128 experts would need ~10 GB), routes one sample of S
 * tokens at --threads 1 and 2 (the load timed apart), and prints tokens/s and the multiply-add rate
 * next to single-thread OpenBLAS sgemv and sgemm measured in the same run.
 * Usage: route_throughput [DIR=/tmp/plena_route_bench] [S=32] [EXPERTS=16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/decoder.h"
#include "ckpt/route.h"
#include "common/alloc.h"

#ifdef PLENA_HAVE_OPENBLAS
#include <cblas.h>
void openblas_set_num_threads(int n);
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef PLENA_HAVE_OPENBLAS
static void blas_rates(double *gemv, double *gemm)
{
    openblas_set_num_threads(1);
    const int M = 2048, N = 2048, G = 512;
    float *A = calloc((size_t)M * N, sizeof *A), *x = calloc(N, sizeof *x),
          *y = calloc(M, sizeof *y);
    for (size_t i = 0; i < (size_t)M * N; i++)
        A[i] = (float)(i % 7) * 0.01f;
    for (int i = 0; i < N; i++)
        x[i] = 0.5f;
    double t0 = now();
    int reps = 0;
    while (now() - t0 < 0.5) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, M, N, 1.0f, A, N, x, 1, 0.0f, y, 1);
        reps++;
    }
    *gemv = (double)reps * M * N / (now() - t0);
    float *C = calloc((size_t)G * G, sizeof *C);
    t0 = now();
    reps = 0;
    while (now() - t0 < 0.5) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, G, G, G, 1.0f, A, G, A, G, 0.0f, C,
                    G);
        reps++;
    }
    *gemm = (double)reps * G * G * G / (now() - t0);
    free(A), free(x), free(y), free(C);
}
#endif

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp/plena_route_bench";
    const unsigned S = argc > 2 ? (unsigned)atoi(argv[2]) : 32;
    const unsigned E = argc > 3 ? (unsigned)atoi(argv[3]) : 16;
    struct plena_dec_config c;
    plena_tiny_config(PLENA_DEC_QWEN3_MOE, &c);
    c.vocab = 1024, c.hidden = 2048, c.n_layers = 2, c.heads = 32, c.kv_heads = 4;
    c.head_dim = 128, c.n_experts = E, c.top_k = 8, c.moe_inter = 768, c.inter = 6144;
    c.rope_theta = 1000000.0;
    memset(c.dense, 0, sizeof c.dense);
    struct plena_err err = {0};
    double t0 = now();
    if (plena_dec_checkpoint_write(dir, &c, 1, NULL, NULL, &err)) {
        fprintf(stderr, "route_throughput: %s: %s\n", err.where, err.msg);
        return 1;
    }
    printf("checkpoint: %s, 2 layers, hidden 2048, %u experts of 768, top-8 (%.1f s to write)\n",
           dir, E, now() - t0);
    /* multiply-adds per token: q, k, v, o, router, top-8 experts x 3, both layers (the
     * attention scores add about pos x heads x head_dim x 2) */
    const double H = 2048, QD = 32 * 128, KD = 4 * 128;
    const double per_token = 2 * (H * QD * 2 + H * KD * 2 + E * H + 8.0 * 3 * 768 * H);
    /* the load (BF16 -> f32 of every tensor) is timed apart: each thread count
     * runs a 4-token and an S-token sample, the difference is the prefill */
    double tps[3] = {0}, gmac[3] = {0};
    for (unsigned threads = 1; threads <= 2; threads++) {
        double t[2];
        for (int run = 0; run < 2; run++) {
            const unsigned n = run ? S : 4;
            char in[4200], out[4200];
            snprintf(in, sizeof in, "%s/bench_inputs_%u.jsonl", dir, n);
            FILE *f = fopen(in, "w");
            fprintf(f, "{\"sample_id\":\"b\",\"input_ids\":[");
            for (unsigned i = 0; i < n; i++)
                fprintf(f, "%s%u", i ? "," : "", (i * 37 + 11) % c.vocab);
            fprintf(f, "]}\n");
            fclose(f);
            snprintf(out, sizeof out, "%s/rows_t%u_%u.jsonl", dir, threads, n);
            struct plena_route_opts o = {.checkpoint = dir,
                                         .inputs = in,
                                         .out = out,
                                         .phases = PLENA_ROUTE_PREFILL,
                                         .threads = threads,
                                         .overwrite = 1,
                                         .quiet = 1};
            const int64_t layer[1] = {1};
            o.layers = layer, o.n_layers = 1;
            struct plena_route_summary s;
            t0 = now();
            if (plena_route_run(&o, &s, &err)) {
                fprintf(stderr, "route_throughput: %s: %s\n", err.where, err.msg);
                return 1;
            }
            t[run] = now() - t0;
        }
        const double sec = t[1] - t[0], attn = (double)(S - 4) * (S + 4) / 2 * 32 * 128 * 2 * 2;
        tps[threads] = (S - 4) / sec;
        gmac[threads] = ((S - 4) * per_token + attn) / sec * 1e-9;
        printf("--threads %u: load+4 tokens %.2f s, load+%u tokens %.2f s: prefill %.2f tokens/s, "
               "%.2f GMAC/s\n",
               threads, t[0], S, t[1], tps[threads], gmac[threads]);
    }
    printf("threads 2 / threads 1 = %.2f\n", tps[2] / tps[1]);
#ifdef PLENA_HAVE_OPENBLAS
    double gemv, gemm;
    blas_rates(&gemv, &gemm);
    printf("OpenBLAS 1 thread: sgemv 2048x2048 %.2f GMAC/s, sgemm 512^3 %.2f GMAC/s; "
           "forward (--threads 1) / sgemv = %.2f, / sgemm = %.2f\n",
           gemv * 1e-9, gemm * 1e-9, gmac[1] * 1e9 / gemv, gmac[1] * 1e9 / gemm);
#else
    printf("OpenBLAS not found at configure time: comparison skipped\n");
#endif
    return 0;
}
