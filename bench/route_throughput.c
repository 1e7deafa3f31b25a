/* plena trace route prefill throughput (docs/traces.md; not a test):
 * writes a synthetic 2-layer Qwen3-MoE checkpoint at Qwen3-30B-A3B width
 * (hidden 2048, 32/4 heads of 128, 128 experts of width 768, top-8; about
 * 2.5 GB of BF16, reused while DIR/bench_params matches), then REPEAT rounds
 * of: one sample of S tokens routed at --threads 1 and 2 (the order
 * alternating between rounds), each in a child process (its peak RSS next
 * to the checkpoint's size); the product kernel alone at an expert's shape;
 * single-thread OpenBLAS sgemm. Each route run is a 4-token and an S-token
 * sample; the difference is the prefill (opening and mapping timed apart).
 * Medians of the rounds are printed with the per-round ratios.
 * Usage: route_throughput [DIR=/tmp/plena_route_bench] [S=512] [EXPERTS=128] [REPEAT=3] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef PLENA_HAVE_OPENBLAS

/* Single-thread sgemm 512^3 multiply-adds per wall second; *per_cpu per
 * CPU second of this thread. */
static double blas_gemm(double *per_cpu)
{
    openblas_set_num_threads(1);
    const int G = 512;
    float *A = calloc((size_t)G * G, sizeof *A), *C = calloc((size_t)G * G, sizeof *C);
    for (size_t i = 0; i < (size_t)G * G; i++)
        A[i] = (float)(i % 7) * 0.01f;
    double t0 = now(), c0 = thread_cpu();
    int reps = 0;
    while (now() - t0 < 1.0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, G, G, G, 1.0f, A, G, A, G, 0.0f, C,
                    G);
        reps++;
    }
    double r = (double)reps * G * G * G / (now() - t0);
    *per_cpu = (double)reps * G * G * G / (thread_cpu() - c0);
    free(A), free(C);
    return r;
}
#endif

/* The forward pass's product alone at an expert's shape: 768 x 2048 BF16
 * weights x 32 tokens (512 tokens x top-8 / 128 experts), one thread;
 * multiply-adds per wall second, *per_cpu per CPU second of this thread. */
static double kernel_rate(double *per_cpu)
{
    const uint32_t R = 768, C = 2048, T = 32;
    uint16_t *w = calloc((size_t)R * C, sizeof *w);
    float *X = calloc((size_t)T * C, sizeof *X), *Y = calloc((size_t)T * R, sizeof *Y);
    for (size_t i = 0; i < (size_t)R * C; i++)
        w[i] = (uint16_t)(0x3c00 + i % 251); /* BF16 values near 2^-7 */
    for (size_t i = 0; i < (size_t)T * C; i++)
        X[i] = (float)(i % 7) * 0.1f;
    const struct plena_mat m = {w, PLENA_MAT_BF16, R, C, C, NULL, 0};
    double t0 = now(), c0 = thread_cpu();
    int reps = 0;
    while (now() - t0 < 1.0) {
        plena_ckpt_matmul(NULL, &m, X, C, NULL, T, Y, R);
        reps++;
    }
    double r = (double)reps * R * C * T / (now() - t0);
    *per_cpu = (double)reps * R * C * T / (thread_cpu() - c0);
    free(w), free(X), free(Y);
    return r;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct meas {
    double t_small, t_big; /* seconds: 4-token and S-token runs */
    double c_small, c_big; /* their CPU seconds (all threads) */
    long rss_kb;           /* peak RSS of the child (wait4) */
    long anon_kb, file_kb; /* largest RssAnon and RssFile seen while it ran */
    double cpu;            /* its user + system seconds */
    double par;            /* all threads' CPU / the calling thread's CPU */
};

/* The CPU ticks (utime + stime) of each thread of pid seen so far: the last
 * value read per thread id (threads that ended keep their last value). */
struct ticks {
    int n;
    long tid[64], t[64];
};

static void thread_ticks(pid_t pid, struct ticks *k)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const long tid = atol(e->d_name);
        char sp[128], buf[1024];
        if (tid <= 0) continue;
        snprintf(sp, sizeof sp, "/proc/%d/task/%ld/stat", (int)pid, tid);
        FILE *f = fopen(sp, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *c = strrchr(buf, ')'); /* fields after the command name */
        long ut = 0, st = 0;
        if (!c ||
            sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2)
            continue;
        int i = 0;
        while (i < k->n && k->tid[i] != tid)
            i++;
        if (i == k->n && k->n < 64) k->tid[k->n++] = tid;
        if (i < k->n) k->t[i] = ut + st;
    }
    closedir(d);
}

/* RssAnon and RssFile of a process in KiB (0 when unreadable). */
static void rss_parts(pid_t pid, long *anon, long *file)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    *anon = *file = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "RssAnon:", 8)) *anon = atol(line + 8);
        if (!strncmp(line, "RssFile:", 8)) *file = atol(line + 8);
    }
    fclose(f);
}

static int write_inputs(const char *dir, unsigned n, unsigned vocab, char *path, size_t len)
{
    snprintf(path, len, "%s/bench_inputs_%u.jsonl", dir, n);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"sample_id\":\"b\",\"input_ids\":[");
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", (i * 37 + 11) % vocab);
    fprintf(f, "]}\n");
    return fclose(f);
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int route_once(const char *dir, const char *in, unsigned threads, double *sec, double *cpu)
{
    char out[4200];
    snprintf(out, sizeof out, "%s/rows_t%u.jsonl", dir, threads);
    const int64_t layer[1] = {1};
    struct plena_route_opts o = {.checkpoint = dir, .inputs = in, .out = out};
    o.phases = PLENA_ROUTE_PREFILL, o.threads = threads, o.overwrite = 1, o.quiet = 1;
    o.layers = layer, o.n_layers = 1;
    struct plena_route_summary s;
    struct plena_err err = {0};
    double t0 = now(), c0 = cpu_now();
    if (plena_route_run(&o, &s, &err)) {
        fprintf(stderr, "route_throughput: %s: %s\n", err.where, err.msg);
        return -1;
    }
    *sec = now() - t0;
    *cpu = cpu_now() - c0;
    return 0;
}

/* One measurement in a child process, so its peak RSS is the route's own. */
static int measure(const char *dir, const char *small, const char *big, unsigned threads,
                   struct meas *m)
{
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        struct meas r = {0};
        int rc = route_once(dir, small, threads, &r.t_small, &r.c_small) ||
                 route_once(dir, big, threads, &r.t_big, &r.c_big);
        if (!rc && write(fd[1], &r, sizeof r) != (ssize_t)sizeof r) rc = 1;
        _exit(rc ? 1 : 0);
    }
    close(fd[1]);
    int status;
    struct rusage ru;
    long anon_max = 0, file_max = 0;
    pid_t done;
    struct ticks k = {0};
    while ((done = wait4(pid, &status, WNOHANG, &ru)) == 0) {
        long a, f;
        thread_ticks(pid, &k);
        rss_parts(pid, &a, &f);
        if (a > anon_max) anon_max = a;
        if (f > file_max) file_max = f;
        usleep(20000);
    }
    ssize_t got = read(fd[0], m, sizeof *m);
    close(fd[0]);
    if (done != pid || !WIFEXITED(status) || WEXITSTATUS(status) || got != (ssize_t)sizeof *m)
        return -1;
    m->rss_kb = ru.ru_maxrss;
    m->anon_kb = anon_max, m->file_kb = file_max;
    long all = 0, caller = 0;
    for (int i = 0; i < k.n; i++) {
        all += k.t[i];
        if (k.tid[i] == (long)pid) caller = k.t[i];
    }
    m->par = caller > 0 ? (double)all / (double)caller : 0;
    m->cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
             (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp/plena_route_bench";
    const unsigned S = argc > 2 ? (unsigned)atoi(argv[2]) : 512;
    const unsigned E = argc > 3 ? (unsigned)atoi(argv[3]) : 128;
    const int R = argc > 4 ? atoi(argv[4]) : 3;
    if (S < 8 || S > 4096 || !E || R < 1 || R > 15) {
        fprintf(stderr, "usage: route_throughput [DIR] [S 8..4096] [EXPERTS] [REPEAT 1..15]\n");
        return 2;
    }
    struct plena_dec_config c;
    plena_tiny_config(PLENA_DEC_QWEN3_MOE, &c);
    c.vocab = 1024, c.hidden = 2048, c.n_layers = 2, c.heads = 32, c.kv_heads = 4;
    c.head_dim = 128, c.n_experts = E, c.top_k = 8, c.moe_inter = 768, c.inter = 6144;
    c.rope_theta = 1000000.0;
    memset(c.dense, 0, sizeof c.dense);
    struct plena_err err = {0};
    char params[4200], want[64], have[64] = "";
    snprintf(params, sizeof params, "%s/bench_params", dir);
    snprintf(want, sizeof want, "qwen3 2x2048 E%u seed 1\n", E);
    FILE *pf = fopen(params, "r");
    if (pf) {
        if (!fgets(have, sizeof have, pf)) have[0] = 0;
        fclose(pf);
    }
    double t0 = now();
    if (strcmp(have, want)) {
        remove(params);
        if (plena_dec_checkpoint_write(dir, &c, 1, NULL, NULL, &err)) {
            fprintf(stderr, "route_throughput: %s: %s\n", err.where, err.msg);
            return 1;
        }
        pf = fopen(params, "w");
        if (pf) fputs(want, pf), fclose(pf);
    }
    char st_path[4200];
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    struct stat st;
    const double file_mb = stat(st_path, &st) ? 0 : (double)st.st_size / (1 << 20);
    printf("checkpoint: %s, 2 layers, hidden 2048, %u experts of 768, top-8, %.0f MiB "
           "(%.1f s to write or reuse)\n",
           dir, E, file_mb, now() - t0);
    char small[4200], big[4200];
    if (write_inputs(dir, 4, c.vocab, small, sizeof small) ||
        write_inputs(dir, S, c.vocab, big, sizeof big)) {
        fprintf(stderr, "route_throughput: cannot write the inputs in %s\n", dir);
        return 1;
    }
    /* multiply-adds of an n-token prefill: q, k, v, o, router, top-8 experts x 3 per token
     * and layer, and the attention's q.k and p.v over positions 0..p */
    const double H = 2048, QD = 32 * 128, KD = 4 * 128;
    const double per_token = 2 * (H * QD * 2 + H * KD * 2 + E * H + 8.0 * 3 * 768 * H);
#define MACS(n) ((n)*per_token + 2.0 * QD * 2 * (n) * ((n) + 1) / 2)
    const double macs = MACS((double)S) - MACS(4.0);
    double tps[2][15], gm[2][15], ratio[15], blas[15], rss[2][15], gcpu[15], bcpu[15];
    double kw[15], kc[15], kr[15], krc[15], par[2][15];
    for (int r = 0; r < R; r++) {
        for (unsigned i = 0; i < 2; i++) {
            const unsigned th = r % 2 ? 2 - i : 1 + i; /* odd rounds run --threads 2 first */
            struct meas m;
            if (measure(dir, small, big, th, &m)) {
                fprintf(stderr, "route_throughput: the --threads %u run failed\n", th);
                return 1;
            }
            const double sec = m.t_big - m.t_small;
            tps[th - 1][r] = (S - 4) / sec;
            gm[th - 1][r] = macs / sec * 1e-9;
            rss[th - 1][r] = (double)m.rss_kb / 1024;
            if (th == 1) gcpu[r] = macs / (m.c_big - m.c_small) * 1e-9;
            printf("round %d --threads %u: 4 tokens %.2f s, %u tokens %.2f s: prefill %.1f "
                   "tokens/s, %.2f GMAC/s; peak RSS %.0f MiB (largest seen: anon %.0f, file %.0f); "
                   "CPU %.0f%% of wall, all threads' CPU / caller's %.2f\n",
                   r + 1, th, m.t_small, S, m.t_big, tps[th - 1][r], gm[th - 1][r], rss[th - 1][r],
                   (double)m.anon_kb / 1024, (double)m.file_kb / 1024,
                   100 * m.cpu / (m.t_small + m.t_big), m.par);
            par[th - 1][r] = m.par;
        }
        ratio[r] = tps[1][r] / tps[0][r];
        kw[r] = kernel_rate(&kc[r]) * 1e-9;
        kc[r] *= 1e-9;
#ifdef PLENA_HAVE_OPENBLAS
        blas[r] = blas_gemm(&bcpu[r]) * 1e-9;
        bcpu[r] *= 1e-9;
        kr[r] = kw[r] / blas[r], krc[r] = kc[r] / bcpu[r];
        printf("round %d kernel alone (768x2048 BF16 x 32 tokens, %s): %.2f GMAC/s (%.2f per CPU "
               "s) = %.3f x sgemm (per CPU s %.3f)\n",
               r + 1, plena_ckpt_matmul_kernel(), kw[r], kc[r], kr[r], krc[r]);
        printf("round %d OpenBLAS 1 thread sgemm 512^3: %.2f GMAC/s (%.2f per CPU s); forward "
               "--threads 1 / sgemm = %.3f (per CPU s: %.2f / %.2f = %.3f); threads 2 / 1 = %.3f\n",
               r + 1, blas[r], bcpu[r], gm[0][r] / blas[r], gcpu[r], bcpu[r], gcpu[r] / bcpu[r],
               ratio[r]);
#else
        blas[r] = bcpu[r] = kr[r] = krc[r] = 0;
#endif
    }
    double fr[15], frc[15];
    for (int r = 0; r < R; r++) {
        fr[r] = blas[r] > 0 ? gm[0][r] / blas[r] : 0;
        frc[r] = bcpu[r] > 0 ? gcpu[r] / bcpu[r] : 0;
    }
    const double t1 = median(tps[0], R), t2 = median(tps[1], R), g1 = median(gm[0], R),
                 g2 = median(gm[1], R);
    printf("median of %d: --threads 1 %.1f tokens/s %.2f GMAC/s; --threads 2 %.1f tokens/s %.2f "
           "GMAC/s; threads 2 / 1 = %.3f\n",
           R, t1, g1, t2, g2, median(ratio, R));
#ifdef PLENA_HAVE_OPENBLAS
    printf("median: OpenBLAS sgemm %.2f GMAC/s, forward --threads 1 / sgemm = %.3f; per CPU "
           "second: forward %.2f, sgemm %.2f GMAC/s, ratio %.3f\n",
           median(blas, R), median(fr, R), median(gcpu, R), median(bcpu, R), median(frc, R));
    printf("median: kernel alone %.2f GMAC/s = %.3f x sgemm (per CPU second %.3f)\n", median(kw, R),
           median(kr, R), median(krc, R));
#else
    printf("OpenBLAS not found at configure time: comparison skipped\n");
#endif
    printf("median --threads 2 CPU-time parallelism (all threads' CPU / the caller's; the "
           "speedup bound when each thread has a core): %.2f\n",
           median(par[1], R));
    printf("median peak RSS: --threads 1 %.0f MiB, --threads 2 %.0f MiB; checkpoint %.0f MiB\n",
           median(rss[0], R), median(rss[1], R), file_mb);
    return 0;
}
