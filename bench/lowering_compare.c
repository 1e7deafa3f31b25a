/* bench/lowering_compare: pair-major against expert-major (docs/lowering.md
 * "Expert-major") on the default settings, random fixed routing (seed 42),
 * zero weights (the timing does not depend on values; zero weights keep the
 * HBM image sparse on disk). Per (model, T, lowering): M_MM and H_PREFETCH_M
 * executed (the generator's prediction, exact for fixed routing:
 * test_expert_major checks it against the emulator), HBM bytes read,
 * simulated cycles (all, and the routed branch), row utilisation and weight
 * bytes over ideal (routing_stats), static instructions, and the host's CPU
 * seconds and maximum RSS of the case (each case runs in its own process, so
 * its rusage is its own). A case over the time limit, or whose expert
 * weights would not fit the host memory limit, is reported as not run.
 *
 * usage: lowering_compare [--quick] [--seconds N] [--mem-gb G] [--dir DIR]
 *   --quick: qwen3-30b-a3b at T = 1 and 16 only (make bench)
 * Prints one table and the expert-major/pair-major ratios of the same run. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "profile/profile.h"
#include "verify/verify.h"

struct result {
    int ok;
    char why[160];
    uint64_t m_mm, prefetch_m, hbm_read, cycles, routed_cycles, n_insns;
    double util, fetch_ratio;
    double cpu_s, rss_mb; /* filled by the parent from the child's rusage */
};

/* The case itself, in the child: build into dir, run it timed, report. */
static void run_case(const char *model, uint32_t T, enum plena_lowering lw, const char *dir,
                     double mem_gb, struct result *r)
{
    struct plena_settings s;
    plena_settings_reference(&s);
    struct plena_gen_machine m;
    plena_gen_machine_from_settings(&s, &m);
    const struct plena_moe_model *mdl = plena_model_preset_find(model);
    if (!mdl) {
        snprintf(r->why, sizeof r->why, "no preset %s", model);
        return;
    }
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, mdl, &m, T);
    o.cfg.routing = PLENA_ROUTING_FIXED;
    o.cfg.lowering = lw;
    o.weights = PLENA_WEIGHTS_ZERO;
    o.out_dir = dir;
    const size_t np = (size_t)T * o.cfg.k;
    uint32_t *ids = plena_malloc(np * sizeof *ids);
    float *w = plena_malloc(np * sizeof *w);
    if (!ids || !w) {
        snprintf(r->why, sizeof r->why, "out of memory");
        return;
    }
    plena_moe_routing_random(T, o.cfg.E, o.cfg.k, 42, ids, w);
    o.fixed_ids = ids;
    o.fixed_w = w;
    { /* the staged image holds every routed expert's weights (twice with the emulator's copy) */
        unsigned char *seen = plena_calloc(o.cfg.E, 1);
        uint64_t a = 0;
        for (size_t p = 0; seen && p < np; p++)
            if (!seen[ids[p]]) seen[ids[p]] = 1, a++;
        plena_free(seen);
        const double per = 3.0 * 1.125 * o.cfg.H * o.cfg.I;
        if (2.0 * a * per > mem_gb * 1e9) {
            snprintf(r->why, sizeof r->why, "host memory: %.1f GB of expert weights (x2)",
                     a * per / 1e9);
            return;
        }
    }
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_moe_build b;
    if (plena_moe_build_run(&o, &b, &err)) {
        snprintf(r->why, sizeof r->why, "build: %.140s", err.msg);
        plena_moe_build_free(&b);
        return;
    }
    struct plena_verify_moe_opts vo = {&s,   dir,  1,    0, 0, 0, NULL, NULL, PLENA_TIMELINE_STAGE,
                                       NULL, NULL, NULL, 1};
    struct plena_verify_moe_report rep;
    if (plena_verify_moe(&b, &vo, &rep, &err) || !rep.ran || !rep.have_stages) {
        snprintf(r->why, sizeof r->why, "run: %.140s", err.msg);
        plena_moe_build_free(&b);
        return;
    }
    uint64_t wall[PLENA_STAGE_COUNT];
    for (int st = 0; st < PLENA_STAGE_COUNT; st++)
        wall[st] = rep.stages[st].picos;
    struct plena_profile_split sp;
    plena_profile_split_compute(wall, rep.clock_ps ? rep.clock_ps : 1, &sp);
    r->m_mm = b.info.dyn_op[PLENA_OP_M_MM];
    r->prefetch_m = b.info.dyn_op[PLENA_OP_H_PREFETCH_M];
    r->hbm_read = rep.run.bytes_read;
    r->cycles = rep.run.reported_cycles;
    r->routed_cycles = sp.routed_cycles;
    r->n_insns = b.n_words;
    r->util = rep.routing.row_utilisation;
    r->fetch_ratio = rep.routing.weight_bytes_ideal ? (double)rep.routing.weight_bytes_fetched /
                                                          (double)rep.routing.weight_bytes_ideal
                                                    : 0;
    r->ok = 1;
    plena_moe_build_free(&b);
    plena_free(ids);
    plena_free(w);
}

/* Runs one case in a child process with a time limit; the parent reads its
 * result from a pipe and its CPU time and maximum RSS from wait4. */
static void fork_case(const char *model, uint32_t T, enum plena_lowering lw, const char *root,
                      unsigned seconds, double mem_gb, struct result *r)
{
    memset(r, 0, sizeof *r);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s_%u_%s", root, model, T, plena_lowering_option(lw));
    int fd[2];
    if (pipe(fd)) {
        snprintf(r->why, sizeof r->why, "pipe failed");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(seconds);
        struct result cr;
        memset(&cr, 0, sizeof cr);
        run_case(model, T, lw, dir, mem_gb, &cr);
        if (write(fd[1], &cr, sizeof cr) != (ssize_t)sizeof cr) _exit(2);
        _exit(0);
    }
    close(fd[1]);
    struct result cr;
    ssize_t got = pid > 0 ? read(fd[0], &cr, sizeof cr) : -1;
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid > 0) wait4(pid, &status, 0, &ru);
    if (got == (ssize_t)sizeof cr)
        *r = cr;
    else if (pid > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        snprintf(r->why, sizeof r->why, "not run in time (%u s)", seconds);
    else
        snprintf(r->why, sizeof r->why, "case failed (status %d)", status);
    r->cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
    r->rss_mb = ru.ru_maxrss / 1024.0;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* a leftover directory only costs disk */
    }
}

static void print_row(const char *model, uint32_t T, enum plena_lowering lw, const struct result *r)
{
    printf("%-14s %5u %-12s ", model, T, plena_lowering_option(lw));
    if (!r->ok) {
        printf("%s\n", r->why);
        return;
    }
    printf("%12llu %11llu %14llu %13llu %13llu %6.1f%% %6.3fx %9llu %8.1f %8.0f\n",
           (unsigned long long)r->m_mm, (unsigned long long)r->prefetch_m,
           (unsigned long long)r->hbm_read, (unsigned long long)r->cycles,
           (unsigned long long)r->routed_cycles, 100.0 * r->util, r->fetch_ratio,
           (unsigned long long)r->n_insns, r->cpu_s, r->rss_mb);
}

int main(int argc, char **argv)
{
    int quick = 0;
    unsigned seconds = 1800;
    double mem_gb = 8;
    const char *root = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mem-gb") && i + 1 < argc)
            mem_gb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            root = argv[++i];
        else {
            fprintf(stderr, "usage: lowering_compare [--quick] [--seconds N] [--mem-gb G] "
                            "[--dir DIR]\n");
            return 2;
        }
    }
    static const char *const models[] = {"qwen3-30b-a3b", "gpt-oss-20b", "mixtral-8x7b",
                                         "deepseek-v3", "kimi-k2"};
    static const uint32_t Ts[] = {1, 16, 256, 2048};
    const size_t n_models = quick ? 1 : 5, n_T = quick ? 2 : 4;
    printf("%-14s %5s %-12s %12s %11s %14s %13s %13s %7s %7s %9s %8s %8s\n", "model", "T",
           "lowering", "M_MM", "H_PREFETCH_M", "hbm_bytes_read", "sim_cycles", "routed_cycles",
           "rows", "weights", "static", "cpu_s", "rss_MB");
    for (size_t mi = 0; mi < n_models; mi++)
        for (size_t ti = 0; ti < n_T; ti++) {
            struct result pm, em;
            fork_case(models[mi], Ts[ti], PLENA_LOWERING_PAIR_MAJOR, root, seconds, mem_gb, &pm);
            print_row(models[mi], Ts[ti], PLENA_LOWERING_PAIR_MAJOR, &pm);
            fork_case(models[mi], Ts[ti], PLENA_LOWERING_EXPERT_MAJOR, root, seconds, mem_gb, &em);
            print_row(models[mi], Ts[ti], PLENA_LOWERING_EXPERT_MAJOR, &em);
            if (pm.ok && em.ok)
                printf("%-14s %5u %-12s routed cycles %.3fx, H_PREFETCH_M %.3fx, HBM bytes "
                       "%.3fx, cpu %.2fx\n",
                       "", Ts[ti], "em / pm", (double)em.routed_cycles / (double)pm.routed_cycles,
                       (double)em.prefetch_m / (double)pm.prefetch_m,
                       (double)em.hbm_read / (double)pm.hbm_read, em.cpu_s / pm.cpu_s);
            fflush(stdout);
        }
    return 0;
}
