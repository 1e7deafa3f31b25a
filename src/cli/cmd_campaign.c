/* plena campaign select|determinism|run|status|report
 * (spec/traces-and-replay.md 7): option parsing, the replay options passed
 * through to every worker (and into the fingerprint), signal handling,
 * progress printing and exit codes. The work itself is src/campaign/. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "campaign/campaign.h"
#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "replay/jsonw.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

#define MAX_INPUTS   256
#define MAX_PASS     64
#define MAX_TARGETFS 32

struct copts {
    const char *action;
    const char *traces[MAX_INPUTS];
    size_t n_traces;
    const char *out;
    struct plena_replay_opts ro;
    const char *pass[MAX_PASS]; /* replay options forwarded to workers */
    size_t n_pass;
    int skip_invalid;
    const char *worker_cmd;
    /* select */
    const char *target, *by, *unit;
    uint64_t seed;
    int have_seed, reselect;
    struct plena_campaign_target_for tf[MAX_TARGETFS];
    size_t n_tf;
    /* run / determinism */
    unsigned jobs, samples, max_attempts, max_jobs;
    int jobs_auto, reset_attempts, no_gate, mpi, progress_none;
    int shared_fs;       /* --mpi: ranks write straight into --out */
    const char *scratch; /* --mpi: parent of the rank-local scratch dirs */
    double progress_interval, memory_fraction;
};

static const char usage_text[] =
    "usage: plena campaign ACTION --traces DIR|SET|LIST... --out DIR [options]\n"
    "actions:\n"
    "  select       --target N|all --seed S --by FIELD [--unit sample|trace]\n"
    "               [--target-for B=N|all]... [--reselect]          -> selection.json\n"
    "  determinism  --samples K [--jobs J]   serial vs parallel gate -> determinism.json\n"
    "  run          --jobs J|auto [--max-attempts 3] [--reset-attempts]\n"
    "               [--no-determinism-gate] [--progress-interval S] [--progress none]\n"
    "               [--memory-fraction F] [--max-jobs N]\n"
    "               [--mpi [--shared-fs] [--scratch DIR]]  under mpirun, 7.7\n"
    "  status       counts from the manifest and results (writes nothing)\n"
    "  report       report.json, report.csv, report.md\n"
    "common options:\n"
    "  --traces IN...        directories (*.json, *.jsonl), trace files, sets or lists\n"
    "  --out DIR             campaign directory\n"
    "  --skip-invalid        list invalid traces in the report instead of stopping\n"
    "  replay options (enter the fingerprint, passed to every worker):\n"
    "  --lowering L --weights W --weight-seed N --input I --input-seed N --routing R\n"
    "  --profile|--no-profile --overlap --repeat N --mlen N --blen N --settings FILE\n"
    "  --mpi                 run/determinism over MPI ranks: mpirun -n R plena campaign run\n"
    "                        --mpi ...; rank 0 writes everything, the others replay into\n"
    "                        a scratch dir under --scratch DIR [$TMPDIR or /tmp] and send\n"
    "                        results.json/stage_profile.json, or with --shared-fs write\n"
    "                        straight into --out (a file system every rank sees)\n"
    "  --worker-cmd 'ARGV'   testing hook: worker argv template with {trace} {out}\n"
    "                        {trace_id} {dir} {fingerprint} [plena replay {trace} --out {out}]\n"
    "--by fields: category (missing = uncategorized), benchmark, phase, sample_id, layer.\n"
    "volatile keys removed before comparing results (spec 0.4):\n";

static void print_usage(void)
{
    fputs(usage_text, stdout);
    for (size_t i = 0; i < plena_replay_n_volatile_keys; i++)
        printf("%s%s", i ? ", " : "  ", plena_replay_volatile_keys[i]);
    printf("\nmpi: %s\n", plena_campaign_have_mpi() ? "built with MPI" : "built without MPI");
    printf("exit: 0 success, 1 a trace or gate failed, 2 usage (also --mpi without MPI),\n"
           "      3 input (corrupt manifest, invalid input file), 4 output, 5 interrupted\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || !*s) return -1;
    char *e;
    unsigned long long x = strtoull(s, &e, 10);
    if (*e || s[0] == '-') return -1;
    *v = x;
    return 0;
}

static int parse_args(int argc, char **argv, struct copts *o)
{
    memset(o, 0, sizeof *o);
    plena_replay_opts_default(&o->ro);
    o->max_attempts = 3;
    o->samples = 20;
    o->jobs = 1;
    o->progress_interval = 30;
    o->by = "category";
    o->unit = "sample";
    if (argc < 2) return plena_cli_usage_error("campaign", "an action is required");
    o->action = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                     \
    do {                                                                                           \
        if (!v) return plena_cli_usage_error("campaign", "%s needs a value", a);                   \
        i++;                                                                                       \
    } while (0)
        uint64_t x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage();
            return -1;
        } else if (!strcmp(a, "--traces")) {
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                if (o->n_traces == MAX_INPUTS)
                    return plena_cli_usage_error("campaign", "too many --traces inputs");
                o->traces[o->n_traces++] = argv[++i];
            }
        } else if (!strcmp(a, "--out")) {
            NEED();
            o->out = v;
        } else if (!strcmp(a, "--skip-invalid")) {
            o->skip_invalid = 1;
        } else if (!strcmp(a, "--worker-cmd")) {
            NEED();
            o->worker_cmd = v;
        } else if (!strcmp(a, "--target")) {
            NEED();
            o->target = v;
        } else if (!strcmp(a, "--seed")) {
            NEED();
            if (parse_u64(v, &o->seed))
                return plena_cli_usage_error("campaign", "--seed: expected an integer, got '%s'",
                                             v);
            o->have_seed = 1;
        } else if (!strcmp(a, "--by")) {
            NEED();
            o->by = v;
        } else if (!strcmp(a, "--unit")) {
            NEED();
            if (strcmp(v, "sample") && strcmp(v, "trace"))
                return plena_cli_usage_error("campaign", "--unit: expected sample or trace");
            o->unit = v;
        } else if (!strcmp(a, "--target-for")) {
            NEED();
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || o->n_tf == MAX_TARGETFS)
                return plena_cli_usage_error("campaign", "--target-for: expected B=N|all");
            struct plena_campaign_target_for *t = &o->tf[o->n_tf++];
            char *b = plena_malloc((size_t)(eq - v) + 1);
            if (!b) return 5;
            memcpy(b, v, (size_t)(eq - v));
            b[eq - v] = 0;
            t->benchmark = b; /* lives until exit */
            if (!strcmp(eq + 1, "all"))
                t->all = 1;
            else if (parse_u64(eq + 1, &t->target))
                return plena_cli_usage_error("campaign", "--target-for: expected B=N|all");
        } else if (!strcmp(a, "--reselect")) {
            o->reselect = 1;
        } else if (!strcmp(a, "--jobs")) {
            NEED();
            if (!strcmp(v, "auto"))
                o->jobs_auto = 1;
            else if (parse_u64(v, &x) || !x || x > 4096)
                return plena_cli_usage_error("campaign", "--jobs: expected 1..4096 or auto");
            else
                o->jobs = (unsigned)x;
        } else if (!strcmp(a, "--samples")) {
            NEED();
            if (parse_u64(v, &x) || !x || x > 1000000)
                return plena_cli_usage_error("campaign", "--samples: expected a positive count");
            o->samples = (unsigned)x;
        } else if (!strcmp(a, "--max-attempts")) {
            NEED();
            if (parse_u64(v, &x) || !x || x > 1000)
                return plena_cli_usage_error("campaign", "--max-attempts: expected 1..1000");
            o->max_attempts = (unsigned)x;
        } else if (!strcmp(a, "--max-jobs")) {
            NEED();
            if (parse_u64(v, &x) || !x || x > 4096)
                return plena_cli_usage_error("campaign", "--max-jobs: expected 1..4096");
            o->max_jobs = (unsigned)x;
        } else if (!strcmp(a, "--memory-fraction")) {
            NEED();
            char *e;
            o->memory_fraction = strtod(v, &e);
            if (*e || !(o->memory_fraction > 0 && o->memory_fraction <= 1))
                return plena_cli_usage_error("campaign", "--memory-fraction: expected (0, 1]");
        } else if (!strcmp(a, "--reset-attempts")) {
            o->reset_attempts = 1;
        } else if (!strcmp(a, "--no-determinism-gate")) {
            o->no_gate = 1;
        } else if (!strcmp(a, "--mpi")) {
            o->mpi = 1;
        } else if (!strcmp(a, "--shared-fs")) {
            o->shared_fs = 1;
        } else if (!strcmp(a, "--scratch")) {
            NEED();
            o->scratch = v;
        } else if (!strcmp(a, "--progress")) {
            NEED();
            if (strcmp(v, "none"))
                return plena_cli_usage_error("campaign", "--progress: only 'none' is accepted");
            o->progress_none = 1;
        } else if (!strcmp(a, "--progress-interval")) {
            NEED();
            char *e;
            o->progress_interval = strtod(v, &e);
            if (*e || !(o->progress_interval > 0))
                return plena_cli_usage_error("campaign", "--progress-interval: expected seconds");
        } else if (!strcmp(a, "--profile") || !strcmp(a, "--no-profile") ||
                   !strcmp(a, "--overlap")) {
            if (!strcmp(a, "--overlap"))
                o->ro.overlap = 1;
            else
                o->ro.profile = !strcmp(a, "--profile");
            if (o->n_pass + 1 > MAX_PASS) return plena_cli_usage_error("campaign", "too many");
            o->pass[o->n_pass++] = a;
        } else if (!strcmp(a, "--lowering") || !strcmp(a, "--weights") ||
                   !strcmp(a, "--weight-seed") || !strcmp(a, "--input") ||
                   !strcmp(a, "--input-seed") || !strcmp(a, "--routing") ||
                   !strcmp(a, "--repeat") || !strcmp(a, "--mlen") || !strcmp(a, "--blen") ||
                   !strcmp(a, "--settings")) {
            NEED();
            if (!strcmp(a, "--lowering")) {
                if (strcmp(v, "pair-major"))
                    return plena_cli_usage_error("campaign",
                                                 "--lowering: only pair-major is built");
                o->ro.lowering = v;
            } else if (!strcmp(a, "--weights")) {
                if (!strcmp(v, "random"))
                    o->ro.weights = PLENA_WEIGHTS_RANDOM;
                else if (!strcmp(v, "representable"))
                    o->ro.weights = PLENA_WEIGHTS_REPRESENTABLE;
                else if (!strcmp(v, "zero"))
                    o->ro.weights = PLENA_WEIGHTS_ZERO;
                else
                    return plena_cli_usage_error("campaign", "--weights: unknown '%s'", v);
            } else if (!strcmp(a, "--input")) {
                if (!strcmp(v, "random"))
                    o->ro.input = PLENA_INPUT_RANDOM;
                else if (!strcmp(v, "zeros"))
                    o->ro.input = PLENA_INPUT_ZEROS;
                else
                    return plena_cli_usage_error("campaign", "--input: unknown '%s'", v);
            } else if (!strcmp(a, "--routing")) {
                if (!strcmp(v, "device"))
                    o->ro.routing_device = 1;
                else if (strcmp(v, "fixed"))
                    return plena_cli_usage_error("campaign", "--routing: unknown '%s'", v);
            } else if (!strcmp(a, "--settings")) {
                o->ro.settings_path = v;
            } else {
                if (parse_u64(v, &x))
                    return plena_cli_usage_error("campaign", "%s: expected an integer", a);
                if (!strcmp(a, "--weight-seed"))
                    o->ro.weight_seed = x;
                else if (!strcmp(a, "--input-seed"))
                    o->ro.input_seed = x;
                else if (!strcmp(a, "--repeat"))
                    o->ro.repeat = (unsigned)x;
                else if (!strcmp(a, "--mlen"))
                    o->ro.mlen = (uint32_t)x;
                else
                    o->ro.blen = (uint32_t)x;
            }
            if (o->n_pass + 2 > MAX_PASS) return plena_cli_usage_error("campaign", "too many");
            o->pass[o->n_pass++] = a;
            o->pass[o->n_pass++] = v;
        } else
            return plena_cli_usage_error("campaign", "unknown option '%s'", a);
#undef NEED
    }
    if (!o->n_traces) return plena_cli_usage_error("campaign", "--traces is required");
    if (!o->out) return plena_cli_usage_error("campaign", "--out DIR is required");
    return 0;
}

/* argv template: the self binary running `replay`, or the test hook */
static int build_worker(const struct copts *o, struct plena_campaign_worker *w, char ***owned,
                        struct plena_err *err)
{
    static const char *argv[MAX_PASS + 64];
    size_t n = 0;
    *owned = NULL;
    if (o->worker_cmd) {
        char *copy = plena_strdup(o->worker_cmd);
        if (!copy) return PLENA_FAIL(err, PLENA_E_NOMEM, "worker", "out of memory");
        char *save = NULL;
        for (char *t = strtok_r(copy, " ", &save); t && n < 60; t = strtok_r(NULL, " ", &save))
            argv[n++] = t;
        *owned = (char **)copy; /* freed by the caller as one block */
    } else {
        static char self[4096];
        int rc = plena_campaign_self_exe(self, sizeof self, err);
        if (rc) return rc;
        argv[n++] = self;
        argv[n++] = "replay";
        argv[n++] = "{trace}";
        argv[n++] = "--out";
        argv[n++] = "{out}";
        for (size_t i = 0; i < o->n_pass; i++)
            argv[n++] = o->pass[i];
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
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
        return 0;
    }
    if (!o->target) return plena_cli_usage_error("campaign select", "--target N|all is required");
    if (!o->have_seed) return plena_cli_usage_error("campaign select", "--seed S is required");
    struct plena_campaign_select_opts so;
    memset(&so, 0, sizeof so);
    if (!strcmp(o->target, "all"))
        so.target_all = 1;
    else if (parse_u64(o->target, &so.target))
        return plena_cli_usage_error("campaign select", "--target: expected N or all");
    so.seed = o->seed;
    so.by = o->by;
    so.unit_trace = !strcmp(o->unit, "trace");
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
    return rc ? plena_cli_report("campaign select", err) : 0;
}

static void det_opts(const struct copts *o, const struct plena_campaign_worker *w, const char *cfp,
                     struct plena_campaign_det_opts *d)
{
    memset(d, 0, sizeof *d);
    d->out_dir = o->out;
    d->samples = o->samples;
    d->jobs = o->jobs_auto ? 4 : o->jobs;
    d->config_fingerprint = cfp;
    d->worker = *w;
    d->stop = &g_stop;
}

/* exit code of a finished gate, printing its line */
static int det_verdict(const struct copts *o, const struct plena_campaign_det_summary *s)
{
    if (s->interrupted) {
        fprintf(stderr, "plena campaign determinism: interrupted; no verdict written\n");
        return 5;
    }
    int ok = !strcmp(s->status, "passed") || !strcmp(s->status, "skipped");
    printf("%s determinism status=%s traces=%zu parallel_width=%u mismatches=%zu report=%s/"
           "determinism.json\n",
           ok ? "PASS" : "FAIL", s->status, s->trace_count, s->parallel_width, s->mismatches,
           o->out);
    return !strcmp(s->status, "passed") ? 0 : 1;
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

/* The gate decision of `campaign run`: 0 go, 2 run the gate first, else the
 * exit code of a refusal (printed). *dstate is what the report records. */
static int gate_decision(const struct copts *o, const char *cfp, const char **dstate,
                         struct plena_err *err)
{
    *dstate = "passed";
    if (o->no_gate) {
        *dstate = "bypassed";
        fprintf(stderr, "plena campaign run: determinism gate bypassed (--no-determinism-gate); "
                        "the report records it\n");
        return 0;
    }
    int c = plena_campaign_determinism_check(o->out, cfp, err);
    if (c == 1) {
        int code = plena_cli_report("campaign run", err);
        return code == 2 ? 1 : code; /* never confused with "run the gate" */
    }
    if (c == 2)
        fprintf(stderr, "plena campaign run: no determinism report for this configuration: "
                        "running the determinism gate first\n");
    return c == 2 ? 2 : 0;
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
    g_pc = (struct pctx){isatty(2), o->progress_none, o->progress_interval, 0, (size_t)-1, 0};
    memset(ro, 0, sizeof *ro);
    ro->out_dir = o->out;
    ro->jobs = o->jobs_auto ? 0 : o->jobs;
    ro->max_attempts = o->max_attempts;
    ro->reset_attempts = o->reset_attempts;
    ro->memory_fraction = o->memory_fraction;
    ro->max_jobs = o->max_jobs;
    ro->worker = *w;
    ro->stop = &g_stop;
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
    int g = gate_decision(o, cfp, &dstate, err);
    if (g == 2) {
        int rc = run_determinism(o, set, w, cfp, err);
        if (rc) {
            refuse_note(o);
            return rc;
        }
    } else if (g)
        return g;
    struct plena_campaign_run_opts ro;
    run_opts(o, w, dstate, 1, &ro);
    struct plena_campaign_run_summary s;
    int rc = plena_campaign_run(set, &ro, &s, err);
    return run_summary(&s, rc, "", err);
}

/* Loads the inputs and applies selection.json when one exists; 0 or the
 * exit code (printed). */
static int load_inputs(struct copts *o, struct plena_campaign_set *set, char cfp[65],
                       struct plena_err *err)
{
    char settings_sha[65];
    memset(set, 0, sizeof *set);
    if (plena_replay_settings_sha256(o->ro.settings_path, settings_sha, err) ||
        plena_campaign_config_fingerprint(&o->ro, settings_sha, cfp, err))
        return plena_cli_report("campaign", err);
    if (plena_campaign_load(o->traces, o->n_traces, &o->ro, settings_sha, o->skip_invalid, set,
                            err)) {
        plena_campaign_set_free(set);
        return plena_cli_report("campaign", err);
    }
    if (!strcmp(o->action, "select")) return 0;
    /* every other action works on the selection when one exists */
    char p[4300];
    snprintf(p, sizeof p, "%s/selection.json", o->out);
    struct stat st;
    if (!stat(p, &st)) {
        json_t *sel = NULL;
        if (plena_replay_json_read_file(p, &sel, err) ||
            plena_campaign_apply_selection(set, sel, err)) {
            json_decref(sel);
            plena_campaign_set_free(set);
            return plena_cli_report("campaign", err);
        }
        json_decref(sel);
    }
    return 0;
}

static void list_invalid(const struct plena_campaign_set *set)
{
    for (size_t i = 0; i < set->n_invalid; i++)
        fprintf(stderr, "plena campaign: skipped invalid trace %s\n", set->invalid[i]);
}

/* `run` and `determinism` under mpirun (spec 7.7). Rank 0 loads, decides and
 * prints; every rank takes part in each collective step and exits with the
 * worst code of all ranks. */
static int mpi_main(struct copts *o)
{
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_campaign_mpi *m = NULL;
    if (plena_campaign_mpi_init(&m, &err)) return plena_cli_report("campaign", &err);
    install_signals(); /* after MPI_Init, which may install handlers of its own */
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
    int code = 0;
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
                int g = gate_decision(o, cfp, &dstate, &err);
                if (g == 2)
                    plan[1] = 1;
                else
                    code = g;
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
            code = ds.interrupted ? 5 : 0;
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

/* plena campaign canonical-hash FILE [--drop KEY]...: SHA-256 of the JSON
 * file's canonical form with the volatile keys of 0.4 removed (and top-level
 * KEYs dropped), as the determinism gate compares results; for scripts. */
static int canonical_hash(int argc, char **argv)
{
    if (argc < 3) return plena_cli_usage_error("campaign", "canonical-hash FILE [--drop KEY]...");
    struct plena_err err;
    plena_err_clear(&err);
    json_t *v = NULL;
    if (plena_replay_json_read_file(argv[2], &v, &err))
        return plena_cli_report("campaign canonical-hash", &err);
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--drop") || i + 1 >= argc) {
            json_decref(v);
            return plena_cli_usage_error("campaign", "canonical-hash: unknown option '%s'",
                                         argv[i]);
        }
        json_object_del(v, argv[++i]);
    }
    char hex[65];
    int rc = plena_replay_json_sha256(v, 1, hex, &err);
    json_decref(v);
    if (rc) return plena_cli_report("campaign canonical-hash", &err);
    printf("%s\n", hex);
    return 0;
}

int plena_cmd_campaign(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        print_usage();
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "canonical-hash")) return canonical_hash(argc, argv);
    struct copts o;
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) return 0;
    if (rc) return rc;
    const char *act = o.action;
    if (strcmp(act, "select") && strcmp(act, "determinism") && strcmp(act, "run") &&
        strcmp(act, "status") && strcmp(act, "report"))
        return plena_cli_usage_error("campaign", "unknown action '%s'", act);
    if (o.mpi && !plena_campaign_have_mpi())
        return plena_cli_usage_error("campaign", "--mpi: built without MPI");
    if (o.mpi && strcmp(act, "run") && strcmp(act, "determinism"))
        return plena_cli_usage_error("campaign", "--mpi: only run and determinism are distributed");
    if (!o.mpi && (o.shared_fs || o.scratch))
        return plena_cli_usage_error("campaign", "--shared-fs and --scratch need --mpi");

    if (o.mpi) return mpi_main(&o);
    install_signals();

    struct plena_err err;
    plena_err_clear(&err);
    char cfp[65];
    struct plena_campaign_set set;
    if ((rc = load_inputs(&o, &set, cfp, &err))) return rc;
    int code = 0;
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
            code = passed ? 0 : 1;
        }
        plena_campaign_set_free(&set);
        return code;
    }
    list_invalid(&set);
    struct plena_campaign_worker w;
    char **owned = NULL;
    if ((rc = build_worker(&o, &w, &owned, &err))) {
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
