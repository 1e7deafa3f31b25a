/* plena replay TRACE|SET... --out DIR [...] and plena replay export --root DIR
 * (spec/traces-and-replay.md 5, 5.8, 0.2). Reads and validates every input
 * first (an invalid trace: its findings, exit 1, nothing written for it),
 * then replays the valid ones with a local pool of forked workers (--jobs N),
 * then writes the run-level exports. Exit: highest code of 0.2 wins. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "replay/export.h"
#include "replay/replay.h"
#include "replay/result.h"
#include "trace/trace.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: plena replay TRACE|SET... --out DIR [options]\n"
            "       plena replay export --root DIR [--passed-only]\n"
            "options (default in brackets; all but the last three enter the fingerprint):\n"
            "  --lowering pair-major           routed lowering [pair-major]\n"
            "  --weights random|representable|zero   expert and shared weights [random]\n"
            "  --weight-seed N                 [1]\n"
            "  --input random|zeros            MoE input x [random]\n"
            "  --input-seed N                  [42]\n"
            "  --routing fixed|device          [fixed]; device is not built yet (exit 2)\n"
            "  --profile | --no-profile        stage profile [on]\n"
            "  --overlap                       overlap overlay [off]\n"
            "  --repeat N                      repeat gate with N >= 2 runs [0: off]\n"
            "  --mlen N, --blen N              override the trace's replay shape\n"
            "  --settings FILE                 settings file [built-in lookup]\n"
            "  --set                           read inputs (also '-') as trace sets\n"
            "  --jobs N                        worker processes [1]\n"
            "  --skip-existing                 skip traces with a passed result (6.5) [off]\n"
            "  --keep-dumps                    keep emulator dumps and the reference [off]\n"
            "  --prune-inputs                  delete regenerable binaries after the gate [off]\n"
            "exit: 0 all passed, 1 a gate failed or a trace is invalid, 2 usage, 3 input,\n"
            "      4 output not writable, 5 interrupted\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-') return -1;
    *out = v;
    return 0;
}

static int max_code(int a, int b)
{
    return a > b ? a : b;
}

static int cmd_export(int argc, char **argv)
{
    const char *root = NULL;
    int passed_only = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--root") && i + 1 < argc) {
            root = argv[++i];
        } else if (!strcmp(argv[i], "--passed-only")) {
            passed_only = 1;
        } else {
            return plena_cli_usage_error("replay export", "unknown or incomplete option '%s'",
                                         argv[i]);
        }
    }
    if (!root) return plena_cli_usage_error("replay export", "--root DIR is required");
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_replay_export_counts c;
    if (plena_replay_export(root, passed_only, &c, &err)) return plena_cli_report("replay", &err);
    printf("exported %zu results (passed numerical %zu, passed smoke %zu, failed %zu, skipped "
           "%zu)\n",
           c.exported, c.passed_numerical, c.passed_smoke, c.failed, c.skipped);
    return c.failed ? 1 : 0;
}

struct input {
    char *bytes;
    size_t len;
    char source[1024];
};

static int add_input(struct input **v, size_t *n, size_t *cap, const char *data, size_t len,
                     const char *source)
{
    if (plena_grow((void **)v, cap, *n + 1, sizeof **v)) return -1;
    struct input *in = &(*v)[(*n)++];
    in->bytes = plena_malloc(len + 1);
    if (!in->bytes) return -1;
    memcpy(in->bytes, data, len);
    in->bytes[len] = 0;
    in->len = len;
    snprintf(in->source, sizeof in->source, "%s", source);
    return 0;
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void print_outcome(const struct plena_replay_item *it, const struct plena_replay_outcome *oc)
{
    if (oc->skipped)
        printf("SKIP replay %s (passed result with this fingerprint exists)\n", it->trace_id);
    else if (oc->gate_passed)
        printf("PASS replay %s kind=%s cycles=%llu\n", it->trace_id, oc->kind,
               (unsigned long long)oc->sim_latency_cycles);
    else
        printf("FAIL replay %s %s kind=%s exit=%d\n", it->trace_id, oc->failed, oc->kind,
               plena_status_exit_code(oc->code));
    fflush(stdout);
}

/* One trace in this process; returns its exit code. */
static int run_one(const struct plena_replay_item *it, const struct plena_replay_opts *o)
{
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_replay_outcome oc;
    if (plena_replay_run(it, o, &oc, &err)) {
        int code = plena_cli_report("replay", &err);
        return max_code(code, plena_status_exit_code(oc.code));
    }
    print_outcome(it, &oc);
    return plena_status_exit_code(oc.code);
}

int plena_cmd_replay(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "export")) return cmd_export(argc, argv);
    struct plena_replay_opts o;
    plena_replay_opts_default(&o);
    const char **files = plena_calloc((size_t)argc, sizeof *files);
    size_t n_files = 0;
    int as_set = 0;
    uint64_t jobs = 1;
    if (!files) return 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
#define NEED_VALUE                                                                                 \
    do {                                                                                           \
        if (!v) {                                                                                  \
            plena_free(files);                                                                     \
            return plena_cli_usage_error("replay", "option %s needs a value", a);                  \
        }                                                                                          \
        i++;                                                                                       \
    } while (0)
#define BAD_VALUE()                                                                                \
    do {                                                                                           \
        plena_free(files);                                                                         \
        return plena_cli_usage_error("replay", "bad value '%s' for %s", v, a);                     \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            plena_free(files);
            return 0;
        } else if (!strcmp(a, "--out")) {
            NEED_VALUE;
            o.out_dir = v;
        } else if (!strcmp(a, "--lowering")) {
            NEED_VALUE;
            if (strcmp(v, "pair-major")) {
                if (!strcmp(v, "expert-major")) {
                    plena_free(files);
                    return plena_cli_usage_error("replay",
                                                 "--lowering expert-major is not built yet");
                }
                BAD_VALUE();
            }
        } else if (!strcmp(a, "--weights")) {
            NEED_VALUE;
            if (!strcmp(v, "random"))
                o.weights = PLENA_WEIGHTS_RANDOM;
            else if (!strcmp(v, "representable"))
                o.weights = PLENA_WEIGHTS_REPRESENTABLE;
            else if (!strcmp(v, "zero"))
                o.weights = PLENA_WEIGHTS_ZERO;
            else
                BAD_VALUE();
        } else if (!strcmp(a, "--input")) {
            NEED_VALUE;
            if (!strcmp(v, "random"))
                o.input = PLENA_INPUT_RANDOM;
            else if (!strcmp(v, "zeros"))
                o.input = PLENA_INPUT_ZEROS;
            else
                BAD_VALUE();
        } else if (!strcmp(a, "--weight-seed")) {
            NEED_VALUE;
            if (parse_u64(v, &o.weight_seed)) BAD_VALUE();
        } else if (!strcmp(a, "--input-seed")) {
            NEED_VALUE;
            if (parse_u64(v, &o.input_seed)) BAD_VALUE();
        } else if (!strcmp(a, "--routing")) {
            NEED_VALUE;
            if (!strcmp(v, "device")) {
                plena_free(files);
                return plena_cli_usage_error(
                    "replay", "--routing device needs preloaded router logits in the "
                              "generator, which is not built yet");
            }
            if (strcmp(v, "fixed")) BAD_VALUE();
        } else if (!strcmp(a, "--profile")) {
            o.profile = 1;
        } else if (!strcmp(a, "--no-profile")) {
            o.profile = 0;
        } else if (!strcmp(a, "--overlap")) {
            o.overlap = 1;
        } else if (!strcmp(a, "--repeat")) {
            NEED_VALUE;
            if (parse_u64(v, &u) || u == 1 || u > 1000) BAD_VALUE();
            o.repeat = (unsigned)u;
        } else if (!strcmp(a, "--mlen") || !strcmp(a, "--blen")) {
            NEED_VALUE;
            if (parse_u64(v, &u) || u == 0 || u > 4096) BAD_VALUE();
            if (a[2] == 'm')
                o.mlen = (uint32_t)u;
            else
                o.blen = (uint32_t)u;
        } else if (!strcmp(a, "--settings")) {
            NEED_VALUE;
            o.settings_path = v;
        } else if (!strcmp(a, "--jobs")) {
            NEED_VALUE;
            if (parse_u64(v, &jobs) || jobs == 0 || jobs > 4096) BAD_VALUE();
        } else if (!strcmp(a, "--set")) {
            as_set = 1;
        } else if (!strcmp(a, "--skip-existing")) {
            o.skip_existing = 1;
        } else if (!strcmp(a, "--keep-dumps")) {
            o.keep_dumps = 1;
        } else if (!strcmp(a, "--prune-inputs")) {
            o.prune_inputs = 1;
        } else if (a[0] == '-' && a[1]) {
            plena_free(files);
            return plena_cli_usage_error("replay", "unknown option '%s'", a);
        } else {
            files[n_files++] = a;
        }
#undef NEED_VALUE
#undef BAD_VALUE
    }
    if (!o.out_dir) {
        plena_free(files);
        return plena_cli_usage_error("replay", "--out DIR is required");
    }
    if (!n_files) {
        plena_free(files);
        return plena_cli_usage_error("replay", "no trace given");
    }

    int code = 0;
    struct plena_err err;
    plena_err_clear(&err);
    char settings_sha[65];
    if (plena_replay_settings_sha256(o.settings_path, settings_sha, &err)) {
        plena_free(files);
        return plena_cli_report("replay", &err);
    }

    /* read every input: a missing file is exit 3 */
    struct input *ins = NULL;
    size_t n_ins = 0, cap_ins = 0;
    for (size_t f = 0; f < n_files; f++) {
        char *data = NULL;
        size_t len = 0;
        int std = !strcmp(files[f], "-");
        if (std ? plena_cli_read_stdin(&data, &len)
                : plena_file_read_all(files[f], &data, &len, &err)) {
            if (std) PLENA_FAIL(&err, PLENA_E_INPUT, "-", "cannot read standard input");
            code = max_code(code, plena_cli_report("replay", &err));
            plena_err_clear(&err);
            continue;
        }
        size_t fl = strlen(files[f]);
        int is_set = as_set || (fl > 6 && !strcmp(files[f] + fl - 6, ".jsonl"));
        if (!is_set) {
            add_input(&ins, &n_ins, &cap_ins, data, len, files[f]);
        } else {
            struct plena_trace_lines it = {data, len, 0, 0};
            const char *text;
            size_t n;
            while (plena_trace_lines_next(&it, &text, &n)) {
                char src[1100];
                snprintf(src, sizeof src, "%s:%ld", files[f], it.line);
                add_input(&ins, &n_ins, &cap_ins, text, n, src);
            }
        }
        plena_free(data);
    }
    plena_free(files);

    /* step 1 for every trace before anything is written */
    struct plena_replay_item *items = plena_calloc(n_ins ? n_ins : 1, sizeof *items);
    size_t n_items = 0;
    for (size_t i = 0; items && i < n_ins; i++) {
        struct plena_trace_report rep;
        plena_trace_report_init(&rep);
        int rc = plena_replay_prepare(ins[i].bytes, ins[i].len, ins[i].source, &o, settings_sha,
                                      &items[n_items], &rep, &err);
        if (rc == PLENA_E_FAILED) {
            for (size_t k = 0; k < rep.n_errors; k++)
                fprintf(stderr, "%s: error %s at %s: %s\n", ins[i].source, rep.errors[k].code,
                        rep.errors[k].path, rep.errors[k].message);
            fprintf(stderr, "%s: invalid trace, not replayed\n", ins[i].source);
            code = max_code(code, 1);
            plena_replay_item_free(&items[n_items]);
        } else if (rc) {
            code = max_code(code, plena_cli_report("replay", &err));
            plena_err_clear(&err);
            plena_replay_item_free(&items[n_items]);
        } else {
            /* trace ids are build directory names: a repeat would share one */
            int dup = 0;
            for (size_t k = 0; k < n_items; k++)
                if (!strcmp(items[k].dir_name, items[n_items].dir_name)) dup = 1;
            if (dup) {
                fprintf(stderr, "%s: trace_id '%s' repeated (V100), not replayed twice\n",
                        ins[i].source, items[n_items].trace_id);
                code = max_code(code, 1);
                plena_replay_item_free(&items[n_items]);
            } else {
                n_items++;
            }
        }
        plena_trace_report_free(&rep);
    }
    for (size_t i = 0; i < n_ins; i++)
        plena_free(ins[i].bytes);
    plena_free(ins);

    if (n_items) {
        if (plena_mkdir_p(o.out_dir, &err)) {
            code = max_code(code, plena_cli_report("replay", &err));
            goto done;
        }
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/.plena_write_probe.%ld", o.out_dir, (long)getpid());
        FILE *pf = fopen(probe, "w");
        if (!pf) {
            PLENA_FAIL(&err, PLENA_E_OUTPUT, o.out_dir, "output directory not writable: %s",
                       strerror(errno));
            code = max_code(code, plena_cli_report("replay", &err));
            goto done;
        }
        fclose(pf);
        unlink(probe);
        plena_replay_clean_tmp(o.out_dir);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (jobs <= 1) {
        for (size_t i = 0; i < n_items && !g_stop; i++)
            code = max_code(code, run_one(&items[i], &o));
    } else {
        pid_t *pids = plena_calloc(n_items ? n_items : 1, sizeof *pids);
        size_t next = 0, running = 0;
        while ((next < n_items && !g_stop) || running) {
            while (!g_stop && next < n_items && running < jobs) {
                fflush(stdout);
                fflush(stderr);
                pid_t p = fork();
                if (p == 0) _exit(run_one(&items[next], &o));
                if (p < 0) {
                    code = max_code(code, 5);
                    g_stop = 1;
                    break;
                }
                pids[next++] = p;
                running++;
            }
            if (!running) break;
            int st;
            pid_t w = waitpid(-1, &st, 0);
            if (w < 0) {
                if (errno == EINTR) {
                    if (g_stop)
                        for (size_t k = 0; k < next; k++)
                            if (pids[k] > 0) kill(pids[k], SIGTERM);
                    continue;
                }
                break;
            }
            for (size_t k = 0; k < next; k++)
                if (pids[k] == w) pids[k] = 0;
            running--;
            if (WIFEXITED(st))
                code = max_code(code, WEXITSTATUS(st));
            else
                code = max_code(code, 1); /* a worker killed by a signal: no decided result */
        }
        plena_free(pids);
    }
    if (g_stop) {
        fprintf(stderr, "plena replay: interrupted; rerun with --skip-existing to resume\n");
        code = max_code(code, 5);
        goto done;
    }

    if (n_items) {
        struct plena_replay_export_counts c;
        if (plena_replay_export(o.out_dir, 0, &c, &err))
            code = max_code(code, plena_cli_report("replay", &err));
    }
done:
    for (size_t i = 0; i < n_items; i++)
        plena_replay_item_free(&items[i]);
    plena_free(items);
    return code;
}
