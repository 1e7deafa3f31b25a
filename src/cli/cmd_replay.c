/* plena replay TRACE|SET... --out DIR [...] and plena replay export --root DIR
 * (docs/replay.md "Pipeline", "Exports" and "Exit status"): the option tables,
 * the signal handler, and the printing of what plena_replay_batch
 * (replay/batch.c) reports: findings of invalid traces, errors, one
 * PASS/FAIL/SKIP line per trace. The highest exit code wins
 * (plena_status_worst). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "cli/replay_opts.h"
#include "replay/export.h"
#include "replay/replay.h"
#include "trace/trace.h"

struct export_cli {
    const char *root;
    int passed_only;
};

static const struct plena_opt export_rows[] = {
    PLENA_OPT_PATH_ROW("--root", "DIR", struct export_cli, root, "the --out directory of a replay",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--passed-only", struct export_cli, passed_only,
                       "export only results whose gate passed"),
};
static const struct plena_cmd_spec export_spec = {
    .name = "replay export",
    .summary = "rebuild the run-level exports of a replay directory",
    .description = "Rebuilds summary.csv and the other run-level exports (docs/replay.md "
                   "\"Exports\") from every results.json under DIR.",
    PLENA_CMD_ROWS(export_rows),
    .opts_size = sizeof(struct export_cli),
};

static int cmd_export(void *opts, const struct plena_cli_args *a)
{
    struct export_cli *x = opts;
    (void)a;
    const char *root = x->root;
    const int passed_only = x->passed_only;
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_replay_export_counts c;
    if (plena_replay_export(root, passed_only, &c, &err)) return plena_cli_report("replay", &err);
    printf("exported %zu results (passed numerical %zu, passed smoke %zu, failed %zu, skipped "
           "%zu)\n",
           c.exported, c.passed_numerical, c.passed_smoke, c.failed, c.skipped);
    return plena_status_exit_code(c.failed ? PLENA_E_FAILED : PLENA_OK);
}

static void print_outcome(const struct plena_replay_item *it, const struct plena_replay_outcome *oc)
{
    if (oc->skipped)
        printf("SKIP replay %s (passed result with this fingerprint exists)\n", it->trace_id);
    else if (oc->gate_passed)
        printf("PASS replay %s kind=%s cycles=%llu\n", it->trace_id, oc->kind,
               (unsigned long long)oc->sim_latency_cycles);
    else {
        printf("FAIL replay %s %s kind=%s exit=%d\n", it->trace_id, oc->failed, oc->kind,
               plena_status_exit_code(oc->code));
        /* the reason, not only in results.json (e.g. --blen 3: MLEN not a multiple) */
        if (oc->reason[0]) fprintf(stderr, "plena replay: %s: %s\n", it->trace_id, oc->reason);
    }
    fflush(stdout);
}

/* the progress line: traces decided of those to replay */
struct replay_progress {
    struct plena_cli_progress pg;
    size_t total, done;
};

static void on_error(void *ctx, const struct plena_err *err)
{
    plena_cli_progress_end(&((struct replay_progress *)ctx)->pg);
    plena_cli_report("replay", err);
}

static void on_invalid(void *ctx, const char *source, const struct plena_trace_report *r)
{
    plena_cli_progress_end(&((struct replay_progress *)ctx)->pg);
    for (size_t k = 0; k < r->n_errors; k++)
        fprintf(stderr, "%s: error %s at %s: %s\n", source, r->errors[k].code, r->errors[k].path,
                r->errors[k].message);
    fprintf(stderr, "%s: invalid trace, not replayed\n", source);
}

static void on_duplicate(void *ctx, const char *source, const char *trace_id)
{
    plena_cli_progress_end(&((struct replay_progress *)ctx)->pg);
    fprintf(stderr, "%s: trace_id '%s' repeated (V100), not replayed twice\n", source, trace_id);
}

static void on_begin(void *ctx, size_t n_traces)
{
    struct replay_progress *r = ctx;
    r->total = n_traces;
    plena_cli_progress_update(&r->pg, "replay", 0, n_traces, "traces");
}

static void on_outcome(void *ctx, const struct plena_replay_item *it,
                       const struct plena_replay_outcome *oc)
{
    struct replay_progress *r = ctx;
    plena_cli_progress_end(&r->pg); /* the outcome line replaces it */
    print_outcome(it, oc);
    r->done++;
    plena_cli_progress_update(&r->pg, "replay", r->done, r->total, "traces");
}

struct replay_cli {
    struct plena_replay_opts ro;
    struct plena_opt_list files;
    int as_set;
    unsigned jobs;
    int no_export;
    int progress; /* enum plena_cli_progress_mode */
};

#define C struct replay_cli
static const struct plena_opt replay_local_rows[] = {
    PLENA_OPT_PATH_ROW("--out", "DIR", C, ro.out_dir,
                       "replay root: one build directory per trace, results and exports",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--set", C, as_set, "read every input (also '-') as a trace set"),
    PLENA_OPT_UINT_ROW("--jobs", "N", C, jobs, 1, 4096, "worker processes", .def = "1"),
    PLENA_OPT_UINT_ROW("--threads", "N", C, ro.threads, 1, 4096,
                       "host threads of each trace's functional check (its references split "
                       "over experts and rows; never changes a figure)",
                       .def = "1"),
    PLENA_OPT_FLAG_ROW("--skip-existing", C, ro.skip_existing,
                       "skip traces with a passed result of the same fingerprint"),
    PLENA_OPT_FLAG_ROW("--keep-dumps", C, ro.keep_dumps,
                       "keep the emulator dumps and the reference output"),
    PLENA_OPT_FLAG_ROW("--prune-inputs", C, ro.prune_inputs,
                       "delete the regenerable binaries after the gate"),
    PLENA_OPT_FLAG_ROW("--timeline", C, ro.timeline,
                       "write each trace's Perfetto timeline to OUT/<trace_id>/timeline.json "
                       "(docs/timeline.md)"),
    PLENA_CLI_TIMELINE_DETAIL_ROW(C, ro.timeline_detail, "--timeline"),
    PLENA_OPT_FLAG_ROW("--no-export", C, no_export,
                       "do not rebuild the run-level exports (campaign workers share one root; "
                       "the coordinator exports once)"),
    PLENA_CLI_PROGRESS_ROW(C, progress),
};
static const struct plena_opt_pos replay_pos[] = {
    {"TRACE|SET", "route traces (.json), trace sets (.jsonl) or - for standard input",
     offsetof(C, files), 1, 0}};
#undef C
static const struct plena_opt_group replay_groups[] = {
    {"replay options (enter the fingerprint)", plena_cli_replay_rows, 0,
     offsetof(struct replay_cli, ro), 0},
    PLENA_OPT_GROUP("options (outside the fingerprint)", replay_local_rows),
    {"weight cache (outside the fingerprint)", plena_cli_replay_worker_rows, 0,
     offsetof(struct replay_cli, ro), 0},
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
                   "(docs/replay.md \"Pipeline\").",
    PLENA_CMD_POS(replay_pos),
    PLENA_CMD_GROUPS(replay_groups),
    .notes = "`plena replay export --root DIR` rebuilds the exports of an existing replay.",
    .init = replay_init,
    .opts_size = sizeof(struct replay_cli),
};

static int cmd_replay(void *opts, const struct plena_cli_args *a)
{
    struct replay_cli *rc_ = opts;
    (void)a;
    int bad = plena_cli_check_weight_cache(rc_->ro.weight_cache, "replay");
    if (bad) return bad;
    const struct plena_replay_batch_opts b = {rc_->files.v, rc_->files.n,    rc_->as_set,
                                              rc_->jobs,    &plena_cli_stop, rc_->no_export};
    struct replay_progress rp = {{0}, 0, 0};
    plena_cli_progress_init(&rp.pg, "replay", rc_->progress);
    const struct plena_replay_batch_events ev = {on_error,   on_invalid, on_duplicate,
                                                 on_outcome, on_begin,   &rp};
    plena_cli_catch_stop_signals();
    int interrupted = 0;
    enum plena_status st = plena_replay_batch(&rc_->ro, &b, &ev, &interrupted);
    plena_cli_progress_end(&rp.pg);
    if (interrupted)
        fprintf(stderr, "plena replay: interrupted; rerun with --skip-existing to resume\n");
    return plena_status_exit_code(st);
}

static const struct plena_cli_sub replay_subs[] = {{"export", cmd_export, &export_spec}};

const struct plena_cli_cmd plena_cli_cmd_replay = {
    .spec = &replay_spec,
    .run = cmd_replay,
    .subs = replay_subs,
    .n_subs = 1,
};
