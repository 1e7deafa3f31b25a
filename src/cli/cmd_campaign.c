/* plena campaign select|determinism|run|status|report
 * (docs/replay.md "Campaigns"): option parsing, the replay options passed
 * through to every worker (and into the fingerprint), signal handling,
 * progress printing and exit codes. The work itself is src/campaign/. */
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "campaign/campaign.h"
#include "cli/cli.h"
#include "cli/replay_opts.h"
#include "common/alloc.h"
#include "cli/route_cli.h"
#include "common/fileio.h"
#include "common/proc.h"
#include "replay/jsonw.h"

#define MAX_TARGETFS 32

struct copts {
    const char *action;
    struct plena_opt_list traces;
    const char *out;
    struct plena_replay_opts ro;
    struct plena_opt_list pass; /* replay options forwarded to workers, as given */
    int skip_invalid;
    const char *worker_cmd;
    /* select */
    uint64_t target;
    int target_all, have_target;
    const char *by;
    int unit_trace, reselect, have_seed;
    uint64_t seed;
    struct plena_campaign_target_for tf[MAX_TARGETFS];
    char tf_names[MAX_TARGETFS][128];
    size_t n_tf;
    /* run / determinism */
    unsigned jobs, samples, max_attempts, max_jobs;
    int jobs_auto, reset_attempts, no_gate, mpi;
    const char *progress; /* "none" or NULL */
    int shared_fs;        /* --mpi: ranks write straight into --out */
    const char *scratch;  /* --mpi: parent of the rank-local scratch dirs */
    double progress_interval, memory_fraction;
};

static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || *s < '0' || *s > '9') return -1;
    char *e;
    unsigned long long x = strtoull(s, &e, 10);
    if (*e) return -1;
    *v = x;
    return 0;
}

static int parse_target(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row, (void)msg, (void)n;
    struct copts *o = base;
    if (!strcmp(v, "all")) {
        o->target_all = 1;
        return 0;
    }
    return parse_u64(v, &o->target);
}

static int parse_target_for(const struct plena_opt *row, const char *v, void *base, char *msg,
                            size_t n)
{
    (void)row;
    struct copts *o = base;
    const char *eq = strchr(v, '=');
    if (o->n_tf == MAX_TARGETFS) {
        snprintf(msg, n, "at most %d --target-for values", MAX_TARGETFS);
        return -1;
    }
    if (!eq || eq == v || (size_t)(eq - v) >= sizeof o->tf_names[0]) return -1;
    struct plena_campaign_target_for *t = &o->tf[o->n_tf];
    memset(t, 0, sizeof *t);
    if (!strcmp(eq + 1, "all"))
        t->all = 1;
    else if (parse_u64(eq + 1, &t->target))
        return -1;
    memcpy(o->tf_names[o->n_tf], v, (size_t)(eq - v));
    o->tf_names[o->n_tf][eq - v] = 0;
    t->benchmark = o->tf_names[o->n_tf];
    o->n_tf++;
    return 0;
}

static int parse_jobs(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row, (void)msg, (void)n;
    struct copts *o = base;
    uint64_t x;
    if (!strcmp(v, "auto")) {
        o->jobs_auto = 1;
        return 0;
    }
    if (parse_u64(v, &x) || !x || x > 4096) return -1;
    o->jobs = (unsigned)x;
    return 0;
}

static const struct plena_opt_enum progress_modes = {.names = (const char *const[]){"none", NULL}};
static const struct plena_opt_enum units = {.names =
                                                (const char *const[]){"sample", "trace", NULL}};

#define C struct copts
static const struct plena_opt common_rows[] = {
    {.names = "--traces",
     .kind = PLENA_OPT_LIST,
     .metavar = "IN...",
     PLENA_OPT_FIELD(C, traces),
     .flags = PLENA_OPT_REQUIRED | PLENA_OPT_REPEAT | PLENA_OPT_GREEDY,
     .help = "directories (*.json, *.jsonl), trace files, sets or lists; takes every following "
             "argument up to the next --option"},
    PLENA_OPT_PATH_ROW("--out", "DIR", C, out, "campaign directory", .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--skip-invalid", C, skip_invalid,
                       "list invalid traces in the report instead of stopping"),
    PLENA_OPT_STR_ROW("--worker-cmd", "'ARGV'", C, worker_cmd,
                      "testing hook: worker argv template with {trace} {out} {trace_id} {dir} "
                      "{fingerprint}",
                      .def_text =
                          "plena replay {trace} --out {out} --no-export and the replay options"),
};
static const struct plena_opt select_rows[] = {
    PLENA_OPT_CUSTOM_ROW("--target", "N|all", C, target, parse_target, "N or all",
                         "units to select",
                         .def_text = "none; required unless selection.json is reused"),
    PLENA_OPT_UINT_ROW("--seed", "S", C, seed, 0, UINT64_MAX, "shuffle seed",
                       .def_text = "none; required unless selection.json is reused"),
    PLENA_OPT_STR_ROW(
        "--by", "FIELD", C, by,
        "stratum field: category (missing = uncategorized), benchmark, phase, sample_id or "
        "layer",
        .def = "category"),
    PLENA_OPT_ENUM_ROW("--unit", "U", C, unit_trace, &units,
                       "sample: (benchmark, sample_id) units; trace: one unit per trace"),
    PLENA_OPT_CUSTOM_ROW("--target-for", "B=N|all", C, tf, parse_target_for, "B=N or B=all",
                         "the target of benchmark B", .def_text = "none",
                         .flags = PLENA_OPT_REPEAT),
    PLENA_OPT_FLAG_ROW("--reselect", C, reselect, "recompute an existing selection.json"),
};
static const struct plena_opt width_rows[] = {
    PLENA_OPT_CUSTOM_ROW(
        "--jobs", "J|auto", C, jobs, parse_jobs, "an integer from 1 to 4096 or auto",
        "worker processes (auto: the width formula of 7.5; the determinism gate then uses "
        "4)",
        .def = "1"),
    PLENA_OPT_UINT_ROW("--samples", "K", C, samples, 1, 1000000,
                       "traces in the determinism gate's subset"),
};
static const struct plena_opt attempts_rows[] = {
    PLENA_OPT_UINT_ROW("--max-attempts", "N", C, max_attempts, 1, 1000,
                       "attempts per trace over all resumes"),
};
static const struct plena_opt run_rows[] = {
    PLENA_OPT_FLAG_ROW("--reset-attempts", C, reset_attempts,
                       "count attempts from zero for this invocation"),
    PLENA_OPT_FLAG_ROW("--no-determinism-gate", C, no_gate,
                       "run without a passed determinism gate (the report records it)"),
    PLENA_OPT_DOUBLE_ROW("--progress-interval", "S", C, progress_interval, 0, INFINITY,
                         "seconds between progress lines when standard error is not a terminal",
                         .flags = PLENA_OPT_MIN_OPEN, .def = "30"),
    PLENA_OPT_CHOICE_ROW("--progress", "none", C, progress, &progress_modes,
                         "none: no progress lines", .def_text = "progress lines on standard error"),
    PLENA_OPT_DOUBLE_ROW("--memory-fraction", "F", C, memory_fraction, 0, 1,
                         "--jobs auto: share of MemAvailable the workers may use",
                         .flags = PLENA_OPT_MIN_OPEN, .def_text = "0.70"),
    PLENA_OPT_UINT_ROW("--max-jobs", "N", C, max_jobs, 1, 4096,
                       "--jobs auto: upper bound of the width", .def_text = "none"),
};
static const struct plena_opt mpi_rows[] = {
    PLENA_OPT_FLAG_ROW("--mpi", C, mpi,
                       "distribute over MPI ranks (mpirun -n R plena campaign run --mpi ...): "
                       "rank 0 writes everything, the others replay into a scratch directory and "
                       "send results.json and stage_profile.json"),
    PLENA_OPT_FLAG_ROW("--shared-fs", C, shared_fs,
                       "ranks write straight into --out (a file system every rank sees)",
                       .needs = "--mpi"),
    PLENA_OPT_PATH_ROW("--scratch", "DIR", C, scratch,
                       "parent of the rank-local scratch directories", .needs = "--mpi",
                       .def_text = "$TMPDIR or /tmp"),
};
#undef C

#define REPLAY_GROUP                                                                               \
    {                                                                                              \
        "replay options (enter the fingerprint; passed to every worker)", plena_cli_replay_rows,   \
            0, offsetof(struct copts, ro), 1                                                       \
    }
#define WORKER_GROUP                                                                               \
    {                                                                                              \
        "weight cache (outside the fingerprint; passed to every worker)",                          \
            plena_cli_replay_worker_rows, 0, offsetof(struct copts, ro), 1                         \
    }
static const struct plena_opt_group select_groups[] = {
    PLENA_OPT_GROUP(NULL, common_rows), REPLAY_GROUP, PLENA_OPT_GROUP("select", select_rows)};
static const struct plena_opt_group det_groups[] = {
    PLENA_OPT_GROUP(NULL, common_rows), REPLAY_GROUP, WORKER_GROUP,
    PLENA_OPT_GROUP("determinism", width_rows), PLENA_OPT_GROUP("mpi", mpi_rows)};
static const struct plena_opt_group run_groups[] = {PLENA_OPT_GROUP(NULL, common_rows),
                                                    REPLAY_GROUP,
                                                    WORKER_GROUP,
                                                    PLENA_OPT_GROUP("width", width_rows),
                                                    PLENA_OPT_GROUP("attempts", attempts_rows),
                                                    PLENA_OPT_GROUP("run", run_rows),
                                                    PLENA_OPT_GROUP("mpi", mpi_rows)};
static const struct plena_opt_group status_groups[] = {
    PLENA_OPT_GROUP(NULL, common_rows), REPLAY_GROUP, PLENA_OPT_GROUP("attempts", attempts_rows)};
#undef REPLAY_GROUP
#undef WORKER_GROUP

static void copts_init(void *p)
{
    struct copts *o = p;
    plena_cli_replay_init(&o->ro);
    o->max_attempts = 3;
    o->samples = 20;
}

#define CAMPAIGN_SPEC(act, sum, desc, grp)                                                         \
    {                                                                                              \
        .name = "campaign " act, .summary = sum, .description = desc, PLENA_CMD_GROUPS(grp),       \
        .init = copts_init, .opts_size = sizeof(struct copts), .has_forward = 1,                   \
        .forward_off = offsetof(struct copts, pass)                                                \
    }
static const struct plena_cmd_spec select_spec = CAMPAIGN_SPEC(
    "select", "stratified selection -> selection.json",
    "Selects --target units (Hamilton largest remainder over the --by strata, seeded shuffle) "
    "and writes OUT/selection.json; every other action then works on the selection.",
    select_groups);
static const struct plena_cmd_spec det_spec = CAMPAIGN_SPEC(
    "determinism", "serial vs parallel gate -> determinism.json",
    "Replays --samples traces serially and with J workers and compares the results with the "
    "volatile keys removed; `campaign run` refuses to run without a passed gate.",
    det_groups);
static const struct plena_cmd_spec run_spec = CAMPAIGN_SPEC(
    "run", "checkpointed parallel replay with resume",
    "Replays every (selected) trace into OUT/replay/ with a manifest; a rerun resumes. Runs the "
    "determinism gate first when none passed for this configuration.",
    run_groups);
static const struct plena_cmd_spec status_spec = CAMPAIGN_SPEC(
    "status", "counts from the manifest and results (writes nothing)",
    "Prints the counts of passed, failed, given-up and not-run traces.", status_groups);
static const struct plena_cmd_spec report_spec =
    CAMPAIGN_SPEC("report", "report.json, report.csv, report.md",
                  "Writes the campaign report from the manifest and results.", status_groups);
#undef CAMPAIGN_SPEC

/* argv template: the self binary running `replay` with the replay options
 * as given, or the test hook; *owned (one block: the argv array, then a copy
 * of --worker-cmd) is freed by the caller */
static int build_worker(const struct copts *o, struct plena_campaign_worker *w, char ***owned,
                        struct plena_err *err)
{
    const size_t cap = o->pass.n + 64;
    const size_t cmd_len = o->worker_cmd ? strlen(o->worker_cmd) + 1 : 0;
    const char **argv = plena_malloc(cap * sizeof *argv + cmd_len);
    size_t n = 0;
    *owned = (char **)argv;
    if (!argv) return PLENA_FAIL(err, PLENA_E_NOMEM, "worker", "out of memory");
    if (o->worker_cmd) {
        char *copy = (char *)(argv + cap);
        memcpy(copy, o->worker_cmd, cmd_len);
        char *save = NULL;
        for (char *t = strtok_r(copy, " ", &save); t && n < 60; t = strtok_r(NULL, " ", &save))
            argv[n++] = t;
    } else {
        static char self[4096];
        int rc = plena_campaign_self_exe(self, sizeof self, err);
        if (rc) return rc;
        argv[n++] = self;
        argv[n++] = "replay";
        argv[n++] = "{trace}";
        argv[n++] = "--out";
        argv[n++] = "{out}";
        /* workers share the replay root: only the coordinator exports */
        argv[n++] = "--no-export";
        for (size_t i = 0; i < o->pass.n; i++)
            argv[n++] = o->pass.v[i];
    }
    if (!n) return PLENA_FAIL(err, PLENA_E_USAGE, "--worker-cmd", "empty worker command");
    w->argv = argv;
    w->argc = n;
    return 0;
}

struct pctx {
    int tty, none;
    double interval, last_print;
    size_t last_done;
    int printed_inline;
};

static void print_progress(void *ctx, const struct plena_campaign_progress *p)
{
    struct pctx *c = ctx;
    if (c->none) return;
    char line[400];
    plena_campaign_progress_line(p, line, sizeof line);
    double now = plena_proc_now();
    if (c->tty) {
        if (!p->final && now - c->last_print < 0.25) return; /* at most 4 per second */
        fprintf(stderr, "\r%s\033[K%s", line, p->final ? "\n" : "");
        c->printed_inline = !p->final;
    } else {
        int completion = p->done != c->last_done;
        if (!completion && !p->final && now - c->last_print < c->interval) return;
        if (p->final && !completion && c->last_print > 0) return;
        fprintf(stderr, "plena campaign: %s\n", line);
    }
    fflush(stderr);
    c->last_done = p->done;
    c->last_print = now;
}

static int write_json(const json_t *v, const char *dir, const char *name, struct plena_err *err)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return plena_replay_json_write_file(v, p, err);
}

static int do_select(const struct copts *o, struct plena_campaign_set *set, struct plena_err *err)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/selection.json", o->out);
    struct stat st;
    if (!o->reselect && !stat(p, &st)) {
        printf("selection: reusing %s (use --reselect to recompute)\n", p);
        return plena_status_exit_code(PLENA_OK);
    }
    if (!o->have_target)
        return plena_cli_usage_error("campaign select", "--target N|all is required");
    if (!o->have_seed) return plena_cli_usage_error("campaign select", "--seed S is required");
    struct plena_campaign_select_opts so;
    memset(&so, 0, sizeof so);
    so.target_all = o->target_all;
    so.target = o->target;
    so.seed = o->seed;
    so.by = o->by;
    so.unit_trace = o->unit_trace;
    so.target_for = o->tf;
    so.n_target_for = o->n_tf;
    json_t *sel = NULL;
    int rc = plena_campaign_select(set, &so, &sel, err);
    if (!rc) rc = plena_mkdir_p(o->out, err);
    if (!rc) rc = write_json(sel, o->out, "selection.json", err);
    if (!rc)
        printf("selection: %zu of %zu traces selected -> %s\n",
               json_array_size(json_object_get(sel, "selected_trace_ids")), set->n, p);
    json_decref(sel);
    return rc ? plena_cli_report("campaign select", err) : plena_status_exit_code(PLENA_OK);
}

static void det_opts(const struct copts *o, const struct plena_campaign_worker *w, const char *cfp,
                     struct plena_campaign_det_opts *d)
{
    memset(d, 0, sizeof *d);
    d->out_dir = o->out;
    d->samples = o->samples;
    d->jobs = o->jobs_auto ? 0 : o->jobs;
    d->config_fingerprint = cfp;
    d->worker = *w;
    d->stop = &plena_cli_stop;
}

/* exit code of a finished gate, printing its line */
static int det_verdict(const struct copts *o, const struct plena_campaign_det_summary *s)
{
    if (s->interrupted) {
        fprintf(stderr, "plena campaign determinism: interrupted; no verdict written\n");
        return plena_status_exit_code(PLENA_E_INTERRUPTED);
    }
    int ok = !strcmp(s->status, "passed") || !strcmp(s->status, "skipped");
    printf("%s determinism status=%s traces=%zu parallel_width=%u mismatches=%zu report=%s/"
           "determinism.json\n",
           ok ? "PASS" : "FAIL", s->status, s->trace_count, s->parallel_width, s->mismatches,
           o->out);
    return plena_status_exit_code(!strcmp(s->status, "passed") ? PLENA_OK : PLENA_E_FAILED);
}

static int run_determinism(const struct copts *o, const struct plena_campaign_set *set,
                           const struct plena_campaign_worker *w, const char *cfp,
                           struct plena_err *err)
{
    struct plena_campaign_det_opts d;
    det_opts(o, w, cfp, &d);
    struct plena_campaign_det_summary s;
    int rc = plena_mkdir_p(o->out, err);
    if (!rc) rc = plena_campaign_determinism(set, &d, &s, err);
    if (rc) return plena_cli_report("campaign determinism", err);
    return det_verdict(o, &s);
}

/* The gate decision of `campaign run` (plena_campaign_gate_decision) with
 * its note; on a refusal (printed) *code is its exit code. */
static enum plena_campaign_gate gate_decision(const struct copts *o, const char *cfp,
                                              const char **dstate, int *code, struct plena_err *err)
{
    enum plena_campaign_gate g = plena_campaign_gate_decision(o->out, cfp, o->no_gate, dstate, err);
    if (g == PLENA_CAMPAIGN_GATE_BYPASSED)
        fprintf(stderr, "plena campaign run: determinism gate bypassed (--no-determinism-gate); "
                        "the report records it\n");
    else if (g == PLENA_CAMPAIGN_GATE_REFUSED)
        *code = plena_cli_report("campaign run", err);
    else if (g == PLENA_CAMPAIGN_GATE_RUN_FIRST)
        fprintf(stderr, "plena campaign run: no determinism report for this configuration: "
                        "running the determinism gate first\n");
    return g;
}

static void refuse_note(const struct copts *o)
{
    fprintf(stderr, "plena campaign run: refusing to run: %s/determinism.json is not passed\n",
            o->out);
}

static struct pctx g_pc;

static void run_opts(const struct copts *o, const struct plena_campaign_worker *w,
                     const char *dstate, int with_progress, struct plena_campaign_run_opts *ro)
{
    g_pc = (struct pctx){isatty(2), o->progress != NULL, o->progress_interval, 0, (size_t)-1, 0};
    memset(ro, 0, sizeof *ro);
    ro->out_dir = o->out;
    ro->jobs = o->jobs_auto ? 0 : o->jobs;
    ro->max_attempts = o->max_attempts;
    ro->reset_attempts = o->reset_attempts;
    ro->memory_fraction = o->memory_fraction;
    ro->max_jobs = o->max_jobs;
    ro->worker = *w;
    ro->stop = &plena_cli_stop;
    ro->progress = with_progress ? print_progress : NULL;
    ro->progress_ctx = &g_pc;
    ro->determinism_state = dstate;
}

/* prints the summary of a finished run; returns its exit code */
static int run_summary(const struct plena_campaign_run_summary *s, int rc, const char *extra,
                       struct plena_err *err)
{
    if (s->torn_manifest_bytes)
        fprintf(stderr,
                "plena campaign run: manifest.jsonl: dropped a torn last line (%zu bytes); that "
                "trace is rerun unless its result passed\n",
                s->torn_manifest_bytes);
    if (rc) return plena_cli_report("campaign run", err);
    if (s->export_error[0])
        fprintf(stderr, "plena campaign run: warning: exports not rebuilt: %s\n", s->export_error);
    printf("%s campaign traces=%zu passed=%zu failed=%zu errors=%zu given_up=%zu "
           "skipped_existing=%zu recovered=%zu width=%u reason=%s%s%s\n",
           s->code == PLENA_OK ? "PASS" : "FAIL", s->total, s->passed, s->failed, s->errored,
           s->given_up, s->skipped_existing, s->recovered, s->width.width, s->width.reason, extra,
           s->interrupted ? " interrupted=true" : "");
    if (s->interrupted) fprintf(stderr, "plena campaign run: interrupted; rerun to resume\n");
    return plena_status_exit_code(s->code);
}

static int do_run(const struct copts *o, const struct plena_campaign_set *set,
                  const struct plena_campaign_worker *w, const char *cfp, struct plena_err *err)
{
    const char *dstate;
    int code = plena_status_exit_code(PLENA_OK);
    enum plena_campaign_gate g = gate_decision(o, cfp, &dstate, &code, err);
    if (g == PLENA_CAMPAIGN_GATE_RUN_FIRST) {
        int rc = run_determinism(o, set, w, cfp, err);
        if (rc) {
            refuse_note(o);
            return rc;
        }
    } else if (g == PLENA_CAMPAIGN_GATE_REFUSED)
        return code;
    struct plena_campaign_run_opts ro;
    run_opts(o, w, dstate, 1, &ro);
    struct plena_campaign_run_summary s;
    int rc = plena_campaign_run(set, &ro, &s, err);
    return run_summary(&s, rc, "", err);
}

/* The inputs, cut to selection.json (all actions but select); 0 or the
 * exit code (printed). */
static int load_inputs(struct copts *o, struct plena_campaign_set *set, char cfp[65],
                       struct plena_err *err)
{
    if (plena_campaign_open(o->traces.v, o->traces.n, &o->ro, o->skip_invalid, o->out,
                            strcmp(o->action, "select") != 0, set, cfp, err))
        return plena_cli_report("campaign", err);
    return 0;
}

static void list_invalid(const struct plena_campaign_set *set)
{
    for (size_t i = 0; i < set->n_invalid; i++)
        fprintf(stderr, "plena campaign: skipped invalid trace %s\n", set->invalid[i]);
}

/* `run` and `determinism` under mpirun. Rank 0 loads, decides and
 * prints; every rank takes part in each collective step and exits with the
 * worst code of all ranks. */
static int mpi_main(struct copts *o)
{
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_campaign_mpi *m = NULL;
    if (plena_campaign_mpi_init(&m, &err)) return plena_cli_report("campaign", &err);
    plena_cli_catch_stop_signals(); /* after MPI_Init, which may install handlers of its own */
    int rank = plena_campaign_mpi_rank(m);
    char where[64];
    snprintf(where, sizeof where, "campaign %s (rank %d)", o->action, rank);
    struct plena_campaign_mpi_opts mo = {o->scratch, o->shared_fs};
    struct plena_campaign_set set;
    memset(&set, 0, sizeof set);
    char cfp[65] = "";
    const char *dstate = "passed";
    int is_det = !strcmp(o->action, "determinism");
    int64_t plan[2] = {0, 0}; /* [0] nonzero: every rank stops; [1] run the gate */
    int code = plena_status_exit_code(PLENA_OK);
    struct plena_campaign_worker w;
    char **owned = NULL;
    if (build_worker(o, &w, &owned, &err)) {
        /* readlink of our own binary failed: nothing can run on this rank */
        code = plena_cli_report(where, &err);
        static const char *const none[] = {"/nonexistent/plena"};
        w.argv = none;
        w.argc = 1;
    }
    if (rank == 0) {
        if (!code) code = load_inputs(o, &set, cfp, &err);
        if (!code) {
            list_invalid(&set);
            if (is_det)
                plan[1] = 1;
            else {
                if (gate_decision(o, cfp, &dstate, &code, &err) == PLENA_CAMPAIGN_GATE_RUN_FIRST)
                    plan[1] = 1;
            }
        }
        if (!code && plena_mkdir_p(o->out, &err)) code = plena_cli_report(where, &err);
        plan[0] = code;
    }
    plena_campaign_mpi_bcast_ints(m, plan, 2);
    plena_campaign_mpi_bcast_str(m, cfp, sizeof cfp);
    if (plan[0]) goto out;
    if (plan[1]) {
        struct plena_campaign_det_opts d;
        det_opts(o, &w, cfp, &d);
        struct plena_campaign_det_summary ds;
        int rc = plena_campaign_determinism_mpi(m, rank == 0 ? &set : NULL, &d, &mo, &ds, &err);
        if (rc)
            code = plena_cli_report(where, &err);
        else if (rank == 0)
            code = det_verdict(o, &ds);
        else
            code = plena_status_exit_code(ds.interrupted ? PLENA_E_INTERRUPTED : PLENA_OK);
        int64_t g = code;
        plena_campaign_mpi_bcast_ints(m, &g, 1); /* rank 0's verdict decides for all */
        if (is_det) goto out;
        if (g) {
            if (rank == 0) refuse_note(o);
            goto out;
        }
    }
    struct plena_campaign_run_opts ro;
    run_opts(o, &w, dstate, rank == 0, &ro);
    struct plena_campaign_run_summary s;
    int rc = plena_campaign_run_mpi(m, rank == 0 ? &set : NULL, &ro, &mo, &s, &err);
    if (rank == 0) {
        char extra[96];
        snprintf(extra, sizeof extra, " ranks=%d", plena_campaign_mpi_size(m));
        code = run_summary(&s, rc, extra, &err);
    } else
        code = rc ? plena_cli_report(where, &err) : plena_status_exit_code(s.code);
out:
    plena_free(owned);
    plena_campaign_set_free(&set);
    fflush(stdout);
    return plena_campaign_mpi_finish(m, code);
}

/* One action after parsing: the checks that need the build (MPI), then
 * the action's work and its exit code. */
static int campaign_main(struct copts *op)
{
    struct copts o = *op;
    int rc;
    const char *act = o.action;
    if (o.mpi && !plena_campaign_have_mpi())
        return plena_cli_usage_error("campaign", "--mpi: built without MPI");
    if ((rc = plena_cli_check_weight_cache(o.ro.weight_cache, "campaign"))) return rc;
    if (o.mpi) return mpi_main(&o);
    plena_cli_catch_stop_signals();

    struct plena_err err;
    plena_err_clear(&err);
    char cfp[65];
    struct plena_campaign_set set;
    if ((rc = load_inputs(&o, &set, cfp, &err))) return rc;
    int code = plena_status_exit_code(PLENA_OK);
    if (!strcmp(act, "select")) {
        code = do_select(&o, &set, &err);
        plena_campaign_set_free(&set);
        return code;
    }
    if (!strcmp(act, "status")) {
        struct plena_campaign_status s;
        if ((rc = plena_campaign_status_read(&set, o.out, o.max_attempts, &s, &err)))
            code = plena_cli_report("campaign status", &err);
        else
            printf("traces %zu: passed %zu, failed %zu, given_up %zu, not_run %zu; manifest %zu "
                   "lines%s\n",
                   s.total, s.passed, s.failed, s.given_up, s.not_run, s.manifest_lines,
                   s.torn_bytes ? " (torn last line)" : "");
        plena_campaign_set_free(&set);
        return code;
    }
    if (!strcmp(act, "report")) {
        int passed = 0;
        if ((rc = plena_campaign_report(&set, o.out, cfp, o.max_attempts, &passed, &err)))
            code = plena_cli_report("campaign report", &err);
        else {
            printf("%s campaign report=%s/report.json\n", passed ? "PASS" : "FAIL", o.out);
            code = plena_status_exit_code(passed ? PLENA_OK : PLENA_E_FAILED);
        }
        plena_campaign_set_free(&set);
        return code;
    }
    list_invalid(&set);
    struct plena_campaign_worker w;
    char **owned = NULL;
    if ((rc = build_worker(&o, &w, &owned, &err))) {
        plena_free(owned);
        plena_campaign_set_free(&set);
        return plena_cli_report("campaign", &err);
    }
    if (!strcmp(act, "determinism"))
        code = run_determinism(&o, &set, &w, cfp, &err);
    else
        code = do_run(&o, &set, &w, cfp, &err);
    plena_free(owned);
    plena_campaign_set_free(&set);
    return code;
}

/* plena campaign canonical-hash FILE [--drop KEY]...: SHA-256 of the JSON
 * file's canonical form with the volatile keys removed (docs/replay.md
 * "Volatile keys"; top-level KEYs dropped too), as the determinism gate
 * compares results; for scripts. */
struct hash_cli {
    const char *file;
    struct plena_opt_list drop;
};
static const struct plena_opt hash_rows[] = {
    PLENA_OPT_LIST_ROW("--drop", "KEY", struct hash_cli, drop, "also remove this top-level key"),
};
static const struct plena_opt_pos hash_pos[] = {
    {"FILE", "a JSON file (results.json, determinism.json, ...)", offsetof(struct hash_cli, file),
     1, 1}};
static const struct plena_cmd_spec hash_spec = {
    .name = "campaign canonical-hash",
    .summary = "SHA-256 of a JSON file as the determinism gate compares it (for scripts)",
    .description = "Prints the SHA-256 of FILE's canonical form (docs/replay.md \"Identity\") "
                   "with the volatile keys removed, as the determinism gate compares results.",
    PLENA_CMD_POS(hash_pos),
    PLENA_CMD_ROWS(hash_rows),
    .opts_size = sizeof(struct hash_cli),
};

static int canonical_hash(void *opts, const struct plena_cli_args *a)
{
    struct hash_cli *c = opts;
    (void)a;
    struct plena_err err;
    plena_err_clear(&err);
    json_t *v = NULL;
    if (plena_replay_json_read_file(c->file, &v, &err)) {
        return plena_cli_report("campaign canonical-hash", &err);
    }
    for (size_t i = 0; i < c->drop.n; i++)
        json_object_del(v, c->drop.v[i]);
    char hex[65];
    int rc = plena_replay_json_sha256(v, 1, hex, &err);
    json_decref(v);
    if (rc) return plena_cli_report("campaign canonical-hash", &err);
    printf("%s\n", hex);
    return plena_status_exit_code(PLENA_OK);
}

/* Every action but canonical-hash: its name is argv[0]. */
static int campaign_action(void *opts, const struct plena_cli_args *a)
{
    struct copts *o = opts;
    o->action = a->argv[0];
    o->have_target = plena_opts_given(a->spec, a->r, "--target") > 0;
    o->have_seed = plena_opts_given(a->spec, a->r, "--seed") > 0;
    return campaign_main(o);
}

static void campaign_notes(struct plena_buf *b)
{
    struct plena_buf keys;
    plena_buf_init(&keys);
    for (size_t i = 0; i < plena_replay_n_volatile_keys; i++)
        plena_buf_printf(&keys, "%s%s", i ? ", " : "", plena_replay_volatile_keys[i]);
    plena_buf_puts(
        b, "volatile keys removed before comparing (docs/replay.md \"Volatile keys\"):\n  ");
    plena_opts_put_wrapped(b, keys.data ? keys.data : "", 2, 2);
    plena_buf_free(&keys);
    plena_buf_printf(b, "mpi: %s\n",
                     plena_campaign_have_mpi() ? "built with MPI" : "built without MPI");
}

static const struct plena_cli_sub campaign_subs[] = {
    {"select", campaign_action, &select_spec},
    {"determinism", campaign_action, &det_spec},
    {"run", campaign_action, &run_spec},
    {"status", campaign_action, &status_spec},
    {"report", campaign_action, &report_spec},
    {"canonical-hash", canonical_hash, &hash_spec},
    {"route", plena_cli_campaign_route, &plena_cli_campaign_route_spec},
};

const struct plena_cli_cmd plena_cli_cmd_campaign = {
    .subs = campaign_subs,
    .n_subs = sizeof campaign_subs / sizeof campaign_subs[0],
    .description = "Campaigns over many route traces (docs/replay.md \"Campaigns\"): plena "
                   "campaign ACTION --traces DIR|SET|LIST... --out DIR [options]. Every action "
                   "but select works on OUT/selection.json when it exists.",
    .notes_fn = campaign_notes,
};
