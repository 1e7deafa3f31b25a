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
#include "cli/replay_opts.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "replay/export.h"
#include "replay/replay.h"
#include "replay/result.h"
#include "trace/trace.h"

static int max_code(int a, int b)
{
    return a > b ? a : b;
}

struct export_cli {
    const char *root;
    int passed_only;
};

static const struct plena_opt export_rows[] = {
    {.names = "--root",
     .kind = PLENA_OPT_PATH,
     .metavar = "DIR",
     PLENA_OPT_FIELD(struct export_cli, root),
     .flags = PLENA_OPT_REQUIRED,
     .help = "the --out directory of a replay"},
    PLENA_OPT_FLAG_ROW("--passed-only", struct export_cli, passed_only,
                       "export only results whose gate passed"),
};
static const struct plena_opt_group export_groups[] = {{NULL, export_rows, 2, 0, 0}};
static const struct plena_cmd_spec export_spec = {
    .name = "replay export",
    .summary = "rebuild the run-level exports (5.8) of a replay directory",
    .description = "Rebuilds summary.csv and the other run-level exports of spec/traces-and-"
                   "replay.md 5.8 from every results.json under DIR.",
    .groups = export_groups,
    .n_groups = 1,
    .opts_size = sizeof(struct export_cli),
};

static int cmd_export(int argc, char **argv)
{
    struct export_cli x;
    struct plena_opts_result pr;
    int code;
    if (plena_cli_parse(&export_spec, argc, argv, &x, &pr, &code)) return code;
    const char *root = x.root;
    const int passed_only = x.passed_only;
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_replay_export_counts c;
    if (plena_replay_export(root, passed_only, &c, &err)) return plena_cli_report("replay", &err);
    printf("exported %zu results (passed numerical %zu, passed smoke %zu, failed %zu, skipped "
           "%zu)\n",
           c.exported, c.passed_numerical, c.passed_smoke, c.failed, c.skipped);
    return plena_status_exit_code(c.failed ? PLENA_E_FAILED : PLENA_OK);
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

struct replay_cli {
    struct plena_replay_opts ro;
    struct plena_opt_list files;
    int as_set;
    unsigned jobs;
};

#define C struct replay_cli
static const struct plena_opt replay_local_rows[] = {
    {.names = "--out",
     .kind = PLENA_OPT_PATH,
     .metavar = "DIR",
     PLENA_OPT_FIELD(C, ro.out_dir),
     .flags = PLENA_OPT_REQUIRED,
     .help = "replay root: one build directory per trace, results and exports"},
    PLENA_OPT_FLAG_ROW("--set", C, as_set, "read every input (also '-') as a trace set"),
    {.names = "--jobs",
     .kind = PLENA_OPT_UINT,
     .metavar = "N",
     PLENA_OPT_FIELD(C, jobs),
     .min = 1,
     .max = 4096,
     .def = "1",
     .help = "worker processes"},
    PLENA_OPT_FLAG_ROW("--skip-existing", C, ro.skip_existing,
                       "skip traces with a passed result of the same fingerprint (6.5)"),
    PLENA_OPT_FLAG_ROW("--keep-dumps", C, ro.keep_dumps,
                       "keep the emulator dumps and the reference output"),
    PLENA_OPT_FLAG_ROW("--prune-inputs", C, ro.prune_inputs,
                       "delete the regenerable binaries after the gate"),
};
static const struct plena_opt_pos replay_pos[] = {
    {"TRACE|SET", "route traces (.json), trace sets (.jsonl) or - for standard input",
     offsetof(C, files), 1, 0}};
#undef C
static const struct plena_opt_group replay_groups[] = {
    {"replay options (enter the fingerprint)", plena_cli_replay_rows, 0,
     offsetof(struct replay_cli, ro), 0},
    {"options (outside the fingerprint)", replay_local_rows,
     sizeof replay_local_rows / sizeof replay_local_rows[0], 0, 0},
};

static void replay_init(void *p)
{
    plena_cli_replay_init(&((struct replay_cli *)p)->ro);
}

static const struct plena_cmd_spec replay_spec = {
    .name = "replay",
    .summary = "replay route traces through generator + emulator + reference",
    .description = "Reads and validates every input first (an invalid trace: its findings, "
                   "nothing written for it), replays the valid ones into OUT/<trace_id>/ with a "
                   "decided results.json, then writes the run-level exports "
                   "(spec/traces-and-replay.md 5).",
    .pos = replay_pos,
    .n_pos = 1,
    .groups = replay_groups,
    .n_groups = 2,
    .notes = "`plena replay export --root DIR` rebuilds the exports of an existing replay.",
    .init = replay_init,
    .opts_size = sizeof(struct replay_cli),
};

static int cmd_replay(int argc, char **argv)
{
    struct replay_cli rc_;
    struct plena_opts_result pr;
    int pcode;
    if (plena_cli_parse(&replay_spec, argc, argv, &rc_, &pr, &pcode)) return pcode;
    if ((pcode = plena_cli_replay_not_built("replay", &rc_.ro, 0))) {
        plena_opts_free(&replay_spec, &rc_);
        return pcode;
    }
    struct plena_replay_opts o = rc_.ro;
    const char **files = rc_.files.v;
    const size_t n_files = rc_.files.n;
    const int as_set = rc_.as_set;
    const uint64_t jobs = rc_.jobs;
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
        if (plena_file_read_input(files[f], &data, &len, &err)) {
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
                    code = max_code(code, plena_status_exit_code(PLENA_E_NOMEM));
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
        code = max_code(code, plena_status_exit_code(PLENA_E_INTERRUPTED));
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

static const struct plena_cli_sub replay_subs[] = {{"export", cmd_export, &export_spec}};

const struct plena_cli_cmd plena_cli_cmd_replay = {
    .spec = &replay_spec,
    .fn = cmd_replay,
    .subs = replay_subs,
    .n_subs = 1,
};
