/* The check's reference kernels (issue 14 item 2; not a test): the bit-exact
 * M_MM tile kernel alone (ref/tile.h, 1 and 4 rows, one 64-deep K tile of a
 * 768-wide output) and the two whole references on a routed layer at
 * Qwen3-30B-A3B width (H 2048, I 768, top-8; E experts, T tokens, random
 * fixed routing: about T * 8 / E pairs per expert), in multiply-adds per CPU
 * second of this thread. THREADS > 1 also times the references on that many
 * threads (wall seconds) and checks their outputs equal the one-thread ones.
 * Usage: ref_check [T=64] [E=128] [THREADS=2] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/pool.h"
#include "common/proc.h"
#include "ref/ref.h"
#include "ref/tile.h"

#define now plena_proc_now

/* CPU seconds of this thread */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    /* BF16-exact values in [-1, 1) */
    return (float)((int)(rng >> 40 & 0xFF) - 128) / 128.0f;
}

static float *fill(size_t n, float scale)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

/* tile kernel: GMAC per CPU second for R rows (R <= 16: 12 and more take
 * the register-blocked kernel, PLENA_REF_TILE_BLOCK_ROWS) */
static double tile_rate(uint32_t R)
{
    enum { K = 64, N = 768, RMAX = 16 };
    if (R > RMAX) return 0.0;
    float *x = fill((size_t)RMAX * K, 1.0f), *w = fill((size_t)K * N, 1.0f),
          *td = malloc((size_t)RMAX * N * sizeof(float));
    double c0 = thread_cpu(), macs = 0;
    while (thread_cpu() - c0 < 0.5) {
        for (int rep = 0; rep < 200; rep++)
            plena_ref_tile_rows(x, K, R, w, N, 0, K, td, N, 1);
        macs += 200.0 * R * K * N;
    }
    double r = macs / (thread_cpu() - c0) * 1e-9;
    free(x), free(w), free(td);
    return r;
}

int main(int argc, char **argv)
{
    const long T_arg = argc > 1 ? atol(argv[1]) : 64, E_arg = argc > 2 ? atol(argv[2]) : 128;
    const long threads_arg = argc > 3 ? atol(argv[3]) : 2;
    if (argc > 4 || T_arg < 1 || T_arg > 65536 || E_arg < 8 || E_arg > 1024 || threads_arg < 1 ||
        threads_arg > 256) {
        fprintf(stderr, "usage: ref_check [T 1..65536 [E 8..1024 [THREADS 1..256]]]\n");
        return 2;
    }
    const uint32_t T = (uint32_t)T_arg, E = (uint32_t)E_arg, threads = (uint32_t)threads_arg;
    enum { H = 2048, I = 768, K = 8 };
    printf(
        "tile kernel: R=1 %.2f GMAC/s, R=4 %.2f GMAC/s, R=16 %.2f GMAC/s (one thread, CPU time)\n",
        tile_rate(1), tile_rate(4), tile_rate(16));
    struct plena_moe_ref_cfg cfg = {.T = T,
                                    .H = H,
                                    .I = I,
                                    .E = E,
                                    .k = K,
                                    .mlen = 64,
                                    .chunk_tiles = 4,
                                    .routing = PLENA_ROUTING_FIXED,
                                    .activation = PLENA_ACT_STANDARD_SWIGLU,
                                    .placement = PLENA_ROUTE_OUTPUT};
    const float **wg = malloc(E * sizeof *wg), **wu = malloc(E * sizeof *wu);
    const float **wd = malloc(E * sizeof *wd);
    for (uint32_t e = 0; e < E; e++) {
        if (e && getenv("SAMEW")) {
            wg[e] = wg[0], wu[e] = wu[0], wd[e] = wd[0];
            continue;
        }
        wg[e] = fill((size_t)H * I, 1.0f / 45.25f);
        wu[e] = fill((size_t)H * I, 1.0f / 45.25f);
        wd[e] = fill((size_t)I * H, 1.0f / 27.75f);
    }
    uint32_t *ids = malloc((size_t)T * K * sizeof *ids);
    float *fw = malloc((size_t)T * K * sizeof *fw);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t j = 0; j < K; j++) {
            uint32_t e;
            int again;
            do { /* k distinct experts per token */
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                e = (uint32_t)(rng % E);
                again = 0;
                for (uint32_t q = 0; q < j; q++)
                    again |= ids[t * K + q] == e;
            } while (again);
            ids[t * K + j] = e;
            fw[t * K + j] = 0.125f;
        }
    float *h = fill((size_t)T * H, 1.0f);
    struct plena_moe_ref_in in = {
        .h = h,
        .w_gate = wg,
        .w_up = wu,
        .w_down = wd,
        .fixed_ids = ids,
        .fixed_w = fw,
        .c = {1.0f, -1.0f, -1.0f, 7.0f, -7.0f, 1e-6f, 1.0f / H, -1.0f, -1.0f / 0.0f, 1.0f, 0.0f}};
    const double macs = (double)T * K * 3.0 * H * I;
    float *out = malloc((size_t)T * H * sizeof *out), *out2 = malloc((size_t)T * H * 4);
    double *o64 = malloc((size_t)T * H * sizeof *o64), *o64b = malloc((size_t)T * H * 8);
    struct plena_moe_ref_out ro = {.out = out};
    struct plena_err err;
    double c0 = thread_cpu(), w0 = now();
    if (plena_moe_reference(&cfg, &in, &ro, &err)) return 1;
    double c1 = thread_cpu(), w1 = now();
    if (plena_moe_reference_f64(&cfg, &in, NULL, o64, NULL, &err)) return 1;
    double c2 = thread_cpu(), w2 = now();
    printf("T=%u E=%u: %.2f GMAC (%u pairs): bit-exact %.3f s CPU = %.2f GMAC/s (%.3f s wall), "
           "float64 %.3f s CPU = %.2f GMAC/s (%.3f s wall); one thread\n",
           T, E, macs * 1e-9, T * K, c1 - c0, macs / (c1 - c0) * 1e-9, w1 - w0, c2 - c1,
           macs / (c2 - c1) * 1e-9, w2 - w1);
    int differ = 0;
    if (threads > 1) {
        struct plena_pool *pool = plena_pool_new(threads);
        in.pool = pool;
        ro.out = out2;
        double t0 = now();
        if (plena_moe_reference(&cfg, &in, &ro, &err)) return 1;
        double t1 = now();
        if (plena_moe_reference_f64(&cfg, &in, NULL, o64b, NULL, &err)) return 1;
        double t2 = now();
        differ = memcmp(out, out2, (size_t)T * H * 4) || memcmp(o64, o64b, (size_t)T * H * 8);
        printf("threads %u (pool of %u): bit-exact %.3f s wall, float64 %.3f s wall; outputs %s\n",
               threads, plena_pool_size(pool), t1 - t0, t2 - t1, differ ? "DIFFER" : "identical");
        plena_pool_free(pool);
    }
    return differ; /* a thread-dependent output fails the bench */
}
