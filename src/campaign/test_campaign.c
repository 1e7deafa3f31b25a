/* Campaign tests (docs/replay.md "Campaigns"), with the upstream defects
 * plena must not repeat: failing gates or replays that exit 0, a determinism
 * result that does not block the run, determinism passes that reuse existing
 * results, all surplus seats to one stratum, a width probe on the first trace
 * and a manifest rewritten in place. Hamilton worked examples, width
 * formula, quantiles in-process; selection, determinism gate, blocking,
 * kill-and-resume, manifest tails and error exits through $PLENA_BIN with
 * testdata/fake_worker.sh standing in for replay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "campaign/campaign.h"
#include "common/test_support.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "profile/profile.h"
#include "replay/jsonw.h"

static char g_tmp[64];
static const char *g_bin;
static char g_worker[1024];
static char g_set[256];

static int setup(void **state)
{
    (void)state;
    g_bin = plena_test_bin();
    if (!g_bin) g_bin = PLENA_BINARY_DIR "/plena";
    if (plena_test_mkdtemp(g_tmp, sizeof g_tmp, "campaign")) return -1;
    snprintf(g_worker, sizeof g_worker,
             "/bin/sh %s/src/campaign/testdata/fake_worker.sh {trace} {out} {trace_id} {dir} "
             "{fingerprint}",
             PLENA_SOURCE_DIR);
    /* 8 traces: two models x 4 samples */
    plena_test_path(g_set, sizeof g_set, g_tmp, "in");
    return plena_test_sh("mkdir -p %s && %s trace gen --model tiny-route-16x1 --tokens 4 --dist "
                         "uniform --seed 1 --samples 4 --out %s/a.jsonl && %s trace gen --model "
                         "tiny-route-32x4 --tokens 8 --dist uniform --seed 2 --samples 4 --out "
                         "%s/b.jsonl",
                         g_set, g_bin, g_set, g_bin, g_set) == 0
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    return plena_test_rmtree(g_tmp);
}

/* Starts plena with args (NULL-terminated) and env assignments "K=V"
 * (NULL-terminated); output to g_tmp/out.txt, err.txt. Returns the pid. */
static pid_t start(const char *const *args, const char *const *env)
{
    char o[128], e[128];
    return plena_test_spawn(g_bin, args, env, plena_test_path(o, sizeof o, g_tmp, "out.txt"),
                            plena_test_path(e, sizeof e, g_tmp, "err.txt"));
}

static int run(const char *const *args, const char *const *env)
{
    return plena_test_wait(start(args, env));
}

static int file_contains(const char *name, const char *needle)
{
    return plena_test_file_contains(g_tmp, name, needle);
}

/* The `campaign run` most tests start: every trace of g_set into out with
 * the fake worker, `--jobs jobs`, no progress lines, then the arguments of
 * extra (NULL-terminated, may be NULL). Fills v (MAX_ARGS) and returns it. */
#define MAX_ARGS 32
static const char *const *fake_run(const char **v, const char *out, const char *jobs,
                                   const char *const *extra)
{
    const char *const head[] = {"campaign", "run", "--traces",     g_set,    "--out",      out,
                                "--jobs",   jobs,  "--worker-cmd", g_worker, "--progress", "none"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        v[n++] = head[i];
    for (size_t i = 0; extra && extra[i]; i++) {
        assert_true(n + 1 < MAX_ARGS);
        v[n++] = extra[i];
    }
    v[n] = NULL;
    return v;
}
static const char *const no_gate[] = {"--no-determinism-gate", NULL};

/* fake_run without the gate into g_tmp/name (out receives the path). */
static const char *const *named_run(const char **v, char *out, size_t n, const char *name,
                                    const char *jobs)
{
    plena_test_path(out, n, g_tmp, name);
    return fake_run(v, out, jobs, no_gate);
}
/* the trace the exit-code and truncation tests single out */
static const char *const g_id16 = "syn_uniform_tiny-route-16x1_t4_s1_n0_l0";

/* ---- in-process arithmetic ---- */
static void check_hamilton(const uint64_t *n, const char *const *names, size_t k, uint64_t T,
                           const uint64_t *want)
{
    uint64_t q[8], r[8];
    int ex[8];
    assert_int_equal(plena_campaign_hamilton(n, names, k, T, q, r, ex, NULL), 0);
    for (size_t c = 0; c < k; c++)
        assert_int_equal(q[c], want[c]);
}

static void test_hamilton_worked_examples(void **state)
{
    (void)state;
    const char *abc[] = {"a", "b", "c"};
    check_hamilton((uint64_t[]){10, 10, 10}, abc, 3, 5, (uint64_t[]){2, 2, 1});
    check_hamilton((uint64_t[]){7, 5, 3}, abc, 3, 8, (uint64_t[]){4, 3, 1});
    const char *mccm[] = {"math", "code", "chat", "misc"};
    check_hamilton((uint64_t[]){40, 25, 12, 3}, mccm, 4, 20, (uint64_t[]){10, 6, 3, 1});
    /* remainders of the last example: 0/20/0/60 */
    uint64_t q[4], r[4];
    int ex[4];
    plena_campaign_hamilton((uint64_t[]){40, 25, 12, 3}, mccm, 4, 20, q, r, ex, NULL);
    assert_int_equal(r[1], 20);
    assert_int_equal(r[3], 60);
    assert_int_equal(ex[3], 1);
    assert_int_equal(ex[1], 0);
    /* T > N is a usage error */
    struct plena_err e;
    plena_err_clear(&e);
    assert_int_equal(plena_campaign_hamilton((uint64_t[]){1, 1}, abc, 2, 3, q, r, ex, &e),
                     PLENA_E_USAGE);
}

static void test_width_and_quantile(void **state)
{
    (void)state;
    struct plena_campaign_width w;
    /* 16 cores, 10 GB available, 1 GB probe: min(14, floor(7.0), 100) = 7 */
    plena_campaign_width_formula(16, 10000000, 1000000, 0.70, 100, 0, &w);
    assert_int_equal(w.width, 7);
    assert_string_equal(w.reason, "memory");
    plena_campaign_width_formula(4, 10000000, 1000, 0.70, 100, 0, &w);
    assert_int_equal(w.width, 2);
    assert_string_equal(w.reason, "cores");
    plena_campaign_width_formula(64, 10000000, 1000, 0.70, 3, 2, &w);
    assert_int_equal(w.width, 2);
    assert_string_equal(w.reason, "remaining_capped");
    plena_campaign_width_formula(2, 10000000, 1000, 0.70, 3, 0, &w); /* cores - 2 = 0 -> 1 */
    assert_int_equal(w.width, 1);
    plena_campaign_width_formula(8, -1, 1000, 0.70, 3, 0, &w);
    assert_string_equal(w.reason, "memory_unknown");
    plena_campaign_width_formula(8, 1000, 0, 0.70, 3, 0, &w);
    assert_string_equal(w.reason, "rss_probe_failed");
    assert_int_equal(w.width, 1);
    /* meminfo parsing with and without MemAvailable (no host fallback for a file) */
    char p[128];
    plena_test_path(p, sizeof p, g_tmp, "meminfo");
    assert_int_equal(
        plena_test_sh("printf 'MemTotal: 100 kB\\nMemAvailable:   12345 kB\\n' > %s", p), 0);
    assert_int_equal(plena_campaign_mem_available_kb(p), 12345);
    assert_int_equal(plena_test_sh("printf 'MemTotal: 100 kB\\n' > %s", p), 0);
    assert_int_equal(plena_campaign_mem_available_kb(p), -1);
    /* quantiles at rank (n-1)q: [1,2,3,4] median 2.5, p95 = 3 + 0.85 */
    double v[] = {1, 2, 3, 4};
    assert_true(plena_campaign_quantile(v, 4, 0.5) == 2.5);
    assert_true(fabs(plena_campaign_quantile(v, 4, 0.95) - 3.85) < 1e-12);
    assert_true(plena_campaign_quantile(v, 1, 0.95) == 1);
}

/* ---- selection through the CLI ---- */
static void test_select_cli(void **state)
{
    (void)state;
    char out[128], a[160], b[160];
    plena_test_path(out, sizeof out, g_tmp, "sel");
    const char *args[] = {"campaign", "select",   "--traces", g_set,    "--out",
                          out,        "--target", "3",        "--seed", "9",
                          "--by",     "category", "--unit",   "trace",  NULL};
    assert_int_equal(run(args, NULL), 0);
    plena_test_path(a, sizeof a, out, "selection.json");
    plena_test_path(b, sizeof b, g_tmp, "selection.first");
    assert_int_equal(plena_test_sh("cp %s %s", a, b), 0);
    const char *re[] = {"campaign", "select", "--traces",   g_set, "--out", out,
                        "--target", "3",      "--seed",     "9",   "--by",  "category",
                        "--unit",   "trace",  "--reselect", NULL};
    assert_int_equal(run(re, NULL), 0);
    /* byte-identical for the same inputs */
    assert_int_equal(plena_test_sh("cmp -s %s %s", a, b), 0);
    json_t *sel = NULL;
    assert_int_equal(plena_replay_json_read_file(a, &sel, NULL), 0);
    assert_int_equal(json_array_size(json_object_get(sel, "selected_trace_ids")), 3);
    json_decref(sel);

    const char *badby[] = {"campaign", "select",   "--traces",   g_set,    "--out",
                           out,        "--target", "1",          "--seed", "1",
                           "--by",     "colour",   "--reselect", NULL};
    assert_int_equal(run(badby, NULL), 2);
    assert_true(file_contains("err.txt", "unknown field 'colour'"));
    const char *big[] = {"campaign", "select", "--traces", g_set, "--out",      out,
                         "--target", "9",      "--seed",   "1",   "--reselect", NULL};
    assert_int_equal(run(big, NULL), 2);
    assert_true(file_contains("err.txt", "larger than the 4 available"));
    /* duplicate trace ids across inputs */
    char dup[300];
    plena_test_path(dup, sizeof dup, g_set, "a.jsonl");
    const char *dups[] = {"campaign", "select", "--traces", g_set, dup,          "--out", out,
                          "--target", "1",      "--seed",   "1",   "--reselect", NULL};
    assert_int_equal(run(dups, NULL), 3);
    assert_true(file_contains("err.txt", "duplicate trace_id"));
}

/* ---- determinism gate ---- */
static void test_determinism_gate(void **state)
{
    (void)state;
    char out[128];
    plena_test_path(out, sizeof out, g_tmp, "det");
    const char *det[] = {"campaign",  "determinism", "--traces", g_set, "--out",        out,
                         "--samples", "2",           "--jobs",   "1",   "--worker-cmd", g_worker,
                         NULL};
    const char *noisy[] = {"PLENA_TEST_NONDETERMINISM=1", NULL};
    assert_int_equal(run(det, noisy), 1);
    assert_true(file_contains("out.txt", "FAIL determinism"));
    char p[256];
    plena_test_path(p, sizeof p, out, "determinism.json");
    json_t *d = NULL;
    assert_int_equal(plena_replay_json_read_file(p, &d, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(d, "status")), "failed");
    /* --jobs 1 still runs the parallel pass at width 2 (8 row 3) */
    assert_int_equal(json_integer_value(json_object_get(d, "parallel_width")), 2);
    /* first 2 distinct (benchmark, sample_id): samples s0 and s1 of both models */
    assert_int_equal(json_integer_value(json_object_get(d, "trace_count")), 4);
    json_decref(d);
    /* a failed report blocks the run (8 row 2) */
    const char *runa_v[MAX_ARGS];
    const char *const *runa = fake_run(runa_v, out, "2", NULL);
    assert_int_equal(run(runa, NULL), 1);
    assert_true(file_contains("err.txt", "determinism.json"));
    plena_test_path(p, sizeof p, out, "manifest.jsonl");
    struct stat st;
    assert_true(stat(p, &st) != 0); /* nothing ran */
    /* a pre-seeded wrong result in parallel/ is recomputed (fresh dirs) */
    assert_int_equal(run(det, NULL), 0);
    assert_true(file_contains("out.txt", "PASS determinism"));
    /* the bypass is recorded */
    const char *byp_v[MAX_ARGS];
    const char *const *byp = fake_run(byp_v, out, "2", no_gate);
    assert_int_equal(run(byp, NULL), 0);
    const char *rep[] = {"campaign", "report", "--traces", g_set, "--out", out, NULL};
    assert_int_equal(run(rep, NULL), 0);
    plena_test_path(p, sizeof p, out, "report.json");
    assert_int_equal(plena_replay_json_read_file(p, &d, NULL), 0);
    assert_string_equal(json_string_value(json_object_get(d, "determinism")), "bypassed");
    assert_true(json_is_true(json_object_get(d, "passed")));
    json_decref(d);
}

/* ---- kill and resume ---- */
static size_t manifest_lines(const char *out, json_t **arr)
{
    char p[256];
    plena_test_path(p, sizeof p, out, "manifest.jsonl");
    size_t torn = 0;
    assert_int_equal(plena_campaign_manifest_read(p, 0, arr, &torn, NULL), 0);
    return json_array_size(*arr);
}

static size_t passed_lines(json_t *arr, const char *id)
{
    size_t i, n = 0;
    json_t *l;
    json_array_foreach(arr, i, l)
    {
        if (!strcmp(json_string_value(json_object_get(l, "trace_id")), id) &&
            !strcmp(json_string_value(json_object_get(l, "status")), "passed"))
            n++;
    }
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static pid_t first_child(pid_t p)
{
    char path[128], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)p, (int)p);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int c = -1;
    if (fgets(buf, sizeof buf, f)) c = atoi(buf);
    fclose(f);
    return c > 0 ? c : -1;
}

static void compare_results(const char *ref, const char *got, json_t *ids)
{
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        char pa[512], pb[512], ha[65], hb[65];
        snprintf(pa, sizeof pa, "%s/replay/%s/results.json", ref, json_string_value(v));
        snprintf(pb, sizeof pb, "%s/replay/%s/results.json", got, json_string_value(v));
        json_t *a = NULL, *b = NULL;
        assert_int_equal(plena_replay_json_read_file(pa, &a, NULL), 0);
        assert_int_equal(plena_replay_json_read_file(pb, &b, NULL), 0);
        assert_int_equal(plena_replay_json_sha256(a, 1, ha, NULL), 0);
        assert_int_equal(plena_replay_json_sha256(b, 1, hb, NULL), 0);
        assert_string_equal(ha, hb);
        json_decref(a);
        json_decref(b);
    }
}

static void test_kill_and_resume(void **state)
{
    (void)state;
    char ref[128], out[128], mark[128];
    plena_test_path(ref, sizeof ref, g_tmp, "ref");
    plena_test_path(out, sizeof out, g_tmp, "killed");
    plena_test_path(mark, sizeof mark, g_tmp, "marks");
    assert_int_equal(plena_test_sh("mkdir -p %s", mark), 0);
    const char *r1_v[MAX_ARGS];
    const char *const *r1 = fake_run(r1_v, ref, "1", no_gate);
    assert_int_equal(run(r1, NULL), 0);
    json_t *refl = NULL;
    assert_int_equal(manifest_lines(ref, &refl), 8);
    json_t *ids = json_array();
    size_t i;
    json_t *l;
    json_array_foreach(refl, i, l) json_array_append(ids, json_object_get(l, "trace_id"));

    const char *rk_v[MAX_ARGS];
    const char *const *rk = fake_run(rk_v, out, "2", no_gate);
    char markenv[200];
    snprintf(markenv, sizeof markenv, "FAKE_MARK=%s", mark);
    const char *slow[] = {"FAKE_SLEEP=0.2", markenv, NULL};
    /* 1: SIGKILL the coordinator after two traces are logged */
    pid_t p = start(rk, slow);
    json_t *arr = NULL;
    for (int t = 0; t < 400; t++) {
        sleep_ms(10);
        size_t n = manifest_lines(out, &arr);
        json_decref(arr);
        if (n >= 2) break;
    }
    kill(p, SIGKILL);
    assert_int_equal(plena_test_wait(p), 128 + SIGKILL);
    sleep_ms(300); /* orphaned workers get SIGTERM from PR_SET_PDEATHSIG */
    size_t after_kill = manifest_lines(out, &arr);
    json_decref(arr);
    assert_true(after_kill >= 2 && after_kill < 8);
    /* 2: resume, and SIGKILL one worker mid-trace */
    p = start(rk, slow);
    pid_t w = -1;
    for (int t = 0; t < 400 && w < 0; t++) {
        sleep_ms(10);
        w = first_child(p);
    }
    assert_true(w > 0);
    sleep_ms(50);
    kill(w, SIGKILL);
    assert_int_equal(plena_test_wait(p), 1); /* one trace errored: not every trace passed */
    manifest_lines(out, &arr);
    int saw_error = 0;
    json_array_foreach(arr, i, l) if (!strcmp(json_string_value(json_object_get(l, "status")),
                                              "error")) saw_error = 1;
    assert_true(saw_error);
    json_decref(arr);
    /* 3: resume to completion */
    assert_int_equal(run(rk, NULL), 0);
    manifest_lines(out, &arr);
    json_array_foreach(ids, i, l) assert_int_equal(passed_lines(arr, json_string_value(l)), 1);
    json_decref(arr);
    compare_results(ref, out, ids);
    /* status agrees */
    const char *stt[] = {"campaign", "status", "--traces", g_set, "--out", out, NULL};
    assert_int_equal(run(stt, NULL), 0);
    assert_true(file_contains("out.txt", "passed 8, failed 0"));

    /* a torn last line is tolerated and that trace rerun */
    char mp[256];
    plena_test_path(mp, sizeof mp, out, "manifest.jsonl");
    manifest_lines(out, &arr);
    const char *last = json_string_value(
        json_object_get(json_array_get(arr, json_array_size(arr) - 1), "trace_id"));
    char lastid[160];
    snprintf(lastid, sizeof lastid, "%s", last);
    json_decref(arr);
    assert_int_equal(
        plena_test_sh("rm %s/replay/%s/results.json && truncate -s -20 %s", out, lastid, mp), 0);
    assert_int_equal(run(rk, NULL), 0);
    assert_true(file_contains("err.txt", "torn last line"));
    manifest_lines(out, &arr);
    json_array_foreach(ids, i, l) assert_int_equal(passed_lines(arr, json_string_value(l)), 1);
    json_decref(arr);
    /* a corrupt middle line is an input error */
    assert_int_equal(plena_test_sh("sed -i '2s/.*/{garbage/' %s", mp), 0);
    assert_int_equal(run(rk, NULL), 3);
    assert_true(file_contains("err.txt", "manifest.jsonl:2"));
    json_decref(refl);
    json_decref(ids);
}

/* failing traces: exit 1, failures.jsonl, attempts and given_up */
static void test_failures_and_attempts(void **state)
{
    (void)state;
    char out[128], p[256];
    plena_test_path(out, sizeof out, g_tmp, "fail");
    const char *const r_extra[] = {"--no-determinism-gate", "--max-attempts", "2", NULL};
    const char *r_v[MAX_ARGS];
    const char *const *r = fake_run(r_v, out, "2", r_extra);
    const char *failenv[] = {"FAKE_FAIL=syn_uniform_tiny-route-16x1_t4_s1_n0_l0", NULL};
    assert_int_equal(run(r, failenv), 1);
    assert_int_equal(run(r, failenv), 1);
    assert_int_equal(run(r, NULL), 1); /* given up: not retried though it would pass now */
    assert_true(file_contains("out.txt", "given_up=1"));
    plena_test_path(p, sizeof p, out, "failures.jsonl");
    char *d = NULL;
    size_t n;
    assert_int_equal(plena_file_read_all(p, &d, &n, NULL), 0);
    assert_non_null(strstr(d, "\"failed_checks\":[\"functional\"]"));
    plena_free(d);
    const char *const reset_extra[] = {"--no-determinism-gate", "--reset-attempts", NULL};
    const char *reset_v[MAX_ARGS];
    const char *const *reset = fake_run(reset_v, out, "2", reset_extra);
    assert_int_equal(run(reset, NULL), 0);
}

static void test_error_exits(void **state)
{
    (void)state;
    char out[128];
    plena_test_path(out, sizeof out, g_tmp, "afile/sub");
    assert_int_equal(plena_test_sh("touch %s/afile", g_tmp), 0);
    const char *r_v[MAX_ARGS];
    const char *const *r = fake_run(r_v, out, "1", no_gate);
    assert_int_equal(run(r, NULL), 4);
    assert_true(file_contains("err.txt", "afile"));
    const char *mpi[] = {"campaign", "run", "--traces", g_set, "--out", out, "--mpi", NULL};
    int rc = run(mpi, NULL);
    if (!plena_campaign_have_mpi()) {
        assert_int_equal(rc, 2);
        assert_true(file_contains("err.txt", "built without MPI"));
    }
    const char *missing[] = {"campaign", "status", "--traces", "/nonexistent/x.jsonl",
                             "--out",    out,      NULL};
    assert_int_equal(run(missing, NULL), 3);
}

/* The manifest's status agrees with the exit code: a worker that wrote a
 * passing result and exited 4 is an error line with exit_code 4 (it was
 * "exit_code": 4, "status": "passed"), one that exited 5 (interrupted)
 * leaves no terminal line and is dispatched again. */
static void test_status_follows_exit_code(void **state)
{
    (void)state;
    char out[128];
    const char *r_v[MAX_ARGS];
    const char *const *r = named_run(r_v, out, sizeof out, "exitcodes", "1");
    const char *id = g_id16;
    const char *e4[] = {"FAKE_EXIT=syn_uniform_tiny-route-16x1_t4_s1_n0_l0:4", NULL};
    assert_int_equal(run(r, e4), 4); /* the worst worker code wins */
    json_t *arr = NULL;
    manifest_lines(out, &arr);
    size_t i, n_err = 0;
    json_t *l;
    json_array_foreach(arr, i, l)
    {
        if (strcmp(json_string_value(json_object_get(l, "trace_id")), id)) continue;
        assert_string_equal(json_string_value(json_object_get(l, "status")), "error");
        assert_int_equal(json_integer_value(json_object_get(l, "exit_code")), 4);
        n_err++;
    }
    assert_int_equal(n_err, 1);
    assert_int_equal(passed_lines(arr, id), 0);
    json_decref(arr);
    char out5[128];
    plena_test_path(out5, sizeof out5, g_tmp, "exitcode5");
    const char *r5_v[MAX_ARGS];
    const char *const *r5 = fake_run(r5_v, out5, "1", no_gate);
    const char *e5[] = {"FAKE_EXIT=syn_uniform_tiny-route-16x1_t4_s1_n0_l0:5", NULL};
    run(r5, e5);
    manifest_lines(out5, &arr);
    json_array_foreach(arr, i, l)
        assert_string_not_equal(json_string_value(json_object_get(l, "trace_id")), id);
    json_decref(arr);
}

/* Manifest invariant (issue 16 item 12): one `passed` line per trace, and
 * every line's status agrees with its exit code, even after a truncated
 * results.json and a resume (the rerun's pass logged a second `passed`). */
static void test_truncated_result_one_pass(void **state)
{
    (void)state;
    char out[128];
    const char *r_v[MAX_ARGS];
    const char *const *r = named_run(r_v, out, sizeof out, "truncres", "2");
    assert_int_equal(run(r, NULL), 0);
    const char *id = g_id16;
    assert_int_equal(plena_test_sh("truncate -s 10 %s/replay/%s/results.json", out, id), 0);
    assert_int_equal(run(r, NULL), 0);
    json_t *arr = NULL;
    assert_int_equal(manifest_lines(out, &arr), 8);
    size_t i;
    json_t *l;
    json_array_foreach(arr, i, l)
    {
        assert_int_equal(passed_lines(arr, json_string_value(json_object_get(l, "trace_id"))), 1);
        assert_int_equal(json_integer_value(json_object_get(l, "exit_code")), 0);
    }
    json_decref(arr);
    char rp[256];
    snprintf(rp, sizeof rp, "%s/replay/%s/results.json", out, id);
    json_t *res = NULL;
    assert_int_equal(plena_replay_json_read_file(rp, &res, NULL), 0); /* rewritten */
    json_decref(res);
    const char *stt[] = {"campaign", "status", "--traces", g_set, "--out", out, NULL};
    assert_int_equal(run(stt, NULL), 0);
    assert_true(file_contains("out.txt", "passed 8, failed 0"));
}

/* One coordinator per --out (issue 16 item 12): a second one is refused,
 * exit 2, naming the holder's pid; the lock dies with its holder (kill -9
 * leaves none behind), so the next run proceeds. */
static void test_directory_lock(void **state)
{
    (void)state;
    char out[128], want[64];
    plena_test_path(out, sizeof out, g_tmp, "locked");
    assert_int_equal(plena_test_sh("mkdir -p %s", out), 0);
    /* held by this process: the CLI coordinator (another process) is refused */
    int fd = -1;
    assert_int_equal(plena_campaign_lock(out, &fd, NULL), 0);
    const char *r_v[MAX_ARGS];
    const char *const *r = fake_run(r_v, out, "1", no_gate);
    assert_int_equal(run(r, NULL), 2);
    snprintf(want, sizeof want, "(pid %ld)", (long)getpid());
    assert_true(file_contains("err.txt", want));
    assert_true(file_contains("err.txt", "in use by another coordinator"));
    char mp[256];
    struct stat st;
    assert_int_not_equal(stat(plena_test_path(mp, sizeof mp, out, "manifest.jsonl"), &st), 0);
    plena_campaign_unlock(&fd);
    assert_int_equal(fd, -1);
    /* held by a child: the library refuses with its pid; after kill -9 the
     * lock is gone */
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t holder = fork();
    assert_true(holder >= 0);
    if (holder == 0) {
        int cfd = -1;
        char c = plena_campaign_lock(out, &cfd, NULL) ? 'n' : 'y';
        if (write(ready[1], &c, 1) != 1) _exit(1);
        for (;;)
            pause();
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    close(ready[1]);
    assert_int_equal(c, 'y');
    struct plena_err e;
    plena_err_clear(&e);
    assert_int_equal(plena_campaign_lock(out, &fd, &e), PLENA_E_USAGE);
    assert_int_equal(fd, -1);
    snprintf(want, sizeof want, "(pid %ld)", (long)holder);
    assert_non_null(strstr(e.msg, want));
    kill(holder, SIGKILL);
    assert_int_equal(plena_test_wait(holder), 128 + SIGKILL);
    assert_int_equal(run(r, NULL), 0);
}

/* A corrupt manifest line before good ones: PLENA_E_INPUT naming the line,
 * and the lines read before it are released (they leaked: a fuzzing
 * finding; *lines is NULL on failure). */
static void test_corrupt_manifest(void **state)
{
    (void)state;
    char p[256];
    plena_test_write_text(g_tmp, "corrupt.jsonl",
                          "{\"trace_id\":\"a\",\"status\":\"passed\"}\n[1,2]\n"
                          "{\"trace_id\":\"b\"}\n");
    plena_test_path(p, sizeof p, g_tmp, "corrupt.jsonl");
    json_t *lines = NULL;
    size_t torn = 0;
    struct plena_err err = {0};
    assert_int_equal(plena_campaign_manifest_read(p, 0, &lines, &torn, &err), PLENA_E_INPUT);
    assert_null(lines);
    assert_non_null(strstr(err.where, "corrupt.jsonl:2"));
    assert_non_null(strstr(err.msg, "corrupt manifest line"));
}

/* sim_latency_cycles of replay root/dir/results.json */
static double result_cycles(const char *root, const char *dir)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s/results.json", root, dir);
    json_t *res = NULL;
    assert_int_equal(plena_replay_json_read_file(p, &res, NULL), 0);
    double c =
        json_number_value(json_object_get(json_object_get(res, "run"), "sim_latency_cycles"));
    json_decref(res);
    return c;
}

/* The same campaign again with --routing device into the same --out: the
 * report pairs each TRACE_ID.device result with its fixed sibling, and the
 * group's delta_cycles_mean is the mean of the 8 differences read here. */
static void report_device_minus_fixed(const char *const *run_fixed, const char *const *rep_fixed,
                                      const char *out, const char *rroot)
{
    const char *r[MAX_ARGS], *rep[MAX_ARGS];
    size_t n = 0, m = 0;
    while (run_fixed[n])
        r[n] = run_fixed[n], n++;
    while (rep_fixed[m])
        rep[m] = rep_fixed[m], m++;
    r[n++] = "--routing", r[n++] = "device", r[n] = NULL;
    rep[m++] = "--routing", rep[m++] = "device", rep[m] = NULL;
    assert_int_equal(run(r, NULL), 0);
    assert_int_equal(run(rep, NULL), 0);
    double sum = 0;
    size_t pairs = 0;
    DIR *dd = opendir(rroot);
    assert_non_null(dd);
    struct dirent *de;
    while ((de = readdir(dd))) {
        const size_t l = strlen(de->d_name);
        if (l < 8 || strcmp(de->d_name + l - 7, ".device")) continue;
        char fixed[256];
        snprintf(fixed, sizeof fixed, "%.*s", (int)(l - 7), de->d_name);
        sum += result_cycles(rroot, de->d_name) - result_cycles(rroot, fixed);
        pairs++;
    }
    closedir(dd);
    assert_int_equal(pairs, 8);
    char p[256];
    plena_test_path(p, sizeof p, out, "report.json");
    json_t *d = NULL;
    assert_int_equal(plena_replay_json_read_file(p, &d, NULL), 0);
    const json_t *g0 = json_array_get(json_object_get(d, "groups"), 0);
    assert_int_equal(json_integer_value(json_object_get(g0, "device_minus_fixed_runs")), 8);
    assert_true(json_number_value(json_object_get(g0, "delta_cycles_mean")) == sum / 8);
    assert_true(json_is_true(json_object_get(d, "passed")));
    json_decref(d);
}

/* ---- report from a campaign of real `plena replay` workers ---- */
/* The shipped settings with a small VRAM so each dump stays 8 MiB, in
 * g_tmp/small.toml (path into settings). */
static void small_settings(char *settings, size_t n)
{
    plena_test_path(settings, n, g_tmp, "small.toml");
    assert_int_equal(
        plena_test_sh(
            "sed '/^\\[TRANSACTIONAL.CONFIG.VECTOR_SRAM_SIZE\\]/{n;s/value = .*/value = 65536/}' "
            "%s/configs/plena_settings.toml > %s",
            PLENA_SOURCE_DIR, settings),
        0);
}

/* The `campaign run` of traces into out with the real replay worker, 2
 * jobs, no gate, the given settings. Fills v (MAX_ARGS) and returns it. */
static const char *const *real_run(const char **v, const char *traces, const char *out,
                                   const char *settings)
{
    const char *const a[] = {"campaign",
                             "run",
                             "--traces",
                             traces,
                             "--out",
                             out,
                             "--jobs",
                             "2",
                             "--progress",
                             "none",
                             "--settings",
                             settings,
                             "--no-determinism-gate",
                             NULL};
    memcpy(v, a, sizeof a);
    return v;
}

/* Workers do not export (issue 16 item 12): the replay root is shared, so
 * a worker rebuilding summary.csv and the other exports read every other
 * worker's results — an unreadable one (here a stray truncated file) made
 * the worker fail (exit 3) and its passed trace an error. Only the
 * coordinator exports, once, and its export failure is a warning. */
static void test_workers_do_not_export(void **state)
{
    (void)state;
    char out[128], settings[256], traces[256];
    plena_test_path(out, sizeof out, g_tmp, "noexport");
    small_settings(settings, sizeof settings);
    plena_test_path(traces, sizeof traces, g_set, "a.jsonl");
    assert_int_equal(plena_test_sh("mkdir -p %s/replay/zz_stray && printf '{\"sch' > "
                                   "%s/replay/zz_stray/results.json",
                                   out, out),
                     0);
    const char *r_v[MAX_ARGS];
    assert_int_equal(run(real_run(r_v, traces, out, settings), NULL), 0);
    json_t *arr = NULL;
    assert_int_equal(manifest_lines(out, &arr), 4);
    size_t i;
    json_t *l;
    json_array_foreach(arr, i, l)
        assert_string_equal(json_string_value(json_object_get(l, "status")), "passed");
    json_decref(arr);
    assert_true(file_contains("err.txt", "zz_stray")); /* the coordinator's export warns */
}

/* --weight-cache reaches the real workers (forwarded like the replay
 * options, outside the fingerprint): after a run through a fresh cache it
 * holds the traces' matrices, and a second campaign through the warm cache
 * publishes every trace's results.json as the first did (volatile keys aside). */
static void test_weight_cache_forwarded(void **state)
{
    (void)state;
    char out[128], out2[128], cache[128], settings[256], traces[256];
    plena_test_path(out, sizeof out, g_tmp, "wcache_run");
    plena_test_path(out2, sizeof out2, g_tmp, "wcache_run2");
    plena_test_path(cache, sizeof cache, g_tmp, "wcache");
    small_settings(settings, sizeof settings);
    plena_test_path(traces, sizeof traces, g_set, "a.jsonl");
    for (int pass = 0; pass < 2; pass++) {
        const char *r_v[MAX_ARGS];
        real_run(r_v, traces, pass ? out2 : out, settings);
        size_t n = 0;
        while (r_v[n])
            n++;
        r_v[n++] = "--weight-cache";
        r_v[n++] = cache;
        r_v[n] = NULL;
        assert_int_equal(run(r_v, NULL), 0);
        assert_true(plena_test_dir_count(cache, ".mx") > 0);
    }
    char rroot[256];
    snprintf(rroot, sizeof rroot, "%s/replay", out);
    DIR *dd = opendir(rroot);
    assert_non_null(dd);
    int compared = 0;
    for (struct dirent *de; (de = readdir(dd));) {
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/%s/results.json", rroot, de->d_name);
        snprintf(b, sizeof b, "%s/replay/%s/results.json", out2, de->d_name);
        json_t *ra = NULL, *rb = NULL;
        if (de->d_name[0] == '.' || plena_replay_json_read_file(a, &ra, NULL)) continue;
        assert_int_equal(plena_replay_json_read_file(b, &rb, NULL), 0);
        plena_replay_strip_volatile(ra);
        plena_replay_strip_volatile(rb);
        /* the paths name the two campaign directories */
        json_t *fa = json_object_get(ra, "functional"), *fb = json_object_get(rb, "functional");
        assert_non_null(fa);
        assert_true(json_equal(fa, fb));
        assert_true(json_equal(json_object_get(ra, "gate"), json_object_get(rb, "gate")));
        static const char *const same[] = {"run", "bytes", "stages", "routing_stats"};
        for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
            assert_non_null(json_object_get(ra, same[k]));
            assert_true(json_equal(json_object_get(ra, same[k]), json_object_get(rb, same[k])));
        }
        compared++;
        json_decref(ra);
        json_decref(rb);
    }
    closedir(dd);
    assert_int_equal(compared, 4);
}

static void test_report_real_replay(void **state)
{
    (void)state;
    char out[128], p[256], settings[256];
    plena_test_path(out, sizeof out, g_tmp, "real");
    small_settings(settings, sizeof settings);
    const char *r_v[MAX_ARGS];
    const char *const *r = real_run(r_v, g_set, out, settings);
    assert_int_equal(run(r, NULL), 0);
    /* the report takes the run's options (they enter the fingerprint) */
    const char *rep[] = {"campaign", "report",     "--traces", g_set, "--out",
                         out,        "--settings", settings,   NULL};
    assert_int_equal(run(rep, NULL), 0);

    /* report.csv: the column list, then the (benchmark, phase) row */
    plena_test_path(p, sizeof p, out, "report.csv");
    char *csv = NULL;
    size_t n;
    assert_int_equal(plena_file_read_all(p, &csv, &n, NULL), 0);
    const char *header =
        "benchmark,phase,layer,runs,passed_numerical,passed_smoke,failed,cycles_min,"
        "cycles_median,cycles_mean,cycles_p95,cycles_max,routing_tax_fraction_mean,"
        "shared_fraction_mean,hbm_bytes_read_mean,hbm_bytes_written_mean,active_experts_mean,"
        "tokens_per_expert_gini_mean,padding_rows_mean,row_utilisation_mean,"
        "weight_bytes_fetched_mean,weight_bytes_ideal_mean,weight_fetch_ratio,"
        "device_minus_fixed_runs,delta_cycles_mean,delta_hbm_bytes_read_mean,"
        "delta_hbm_bytes_written_mean\n";
    assert_memory_equal(csv, header, strlen(header));
    assert_non_null(strstr(csv, "\nsynthetic,prefill,,8,8,0,0,"));
    plena_free(csv);

    /* report.json: 8 numerical passes, min <= median <= max, the caveat
     * notes byte-identical to the profile's constant */
    plena_test_path(p, sizeof p, out, "report.json");
    json_t *d = NULL;
    assert_int_equal(plena_replay_json_read_file(p, &d, NULL), 0);
    assert_true(json_is_true(json_object_get(d, "passed")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(d, "replay"), "passed_numerical")), 8);
    json_t *groups = json_object_get(d, "groups");
    assert_true(json_array_size(groups) >= 1);
    /* routing_stats aggregated over the group's 8 traces: the ratio of the
     * summed fetched and ideal bytes of every results.json, read here */
    const json_t *g0r = json_array_get(groups, 0);
    double fetched = 0, ideal = 0, util = 0;
    size_t n_res = 0;
    char rroot[256];
    snprintf(rroot, sizeof rroot, "%s/replay", out);
    DIR *dd = opendir(rroot);
    assert_non_null(dd);
    struct dirent *de;
    while ((de = readdir(dd))) {
        char rp[600];
        snprintf(rp, sizeof rp, "%s/%s/results.json", rroot, de->d_name);
        json_t *res = NULL;
        if (de->d_name[0] == '.' || plena_replay_json_read_file(rp, &res, NULL)) continue;
        const json_t *rs = json_object_get(res, "routing_stats");
        fetched += json_number_value(json_object_get(rs, "weight_bytes_fetched"));
        ideal += json_number_value(json_object_get(rs, "weight_bytes_ideal"));
        util += json_number_value(json_object_get(rs, "row_utilisation"));
        n_res++;
        json_decref(res);
    }
    closedir(dd);
    assert_int_equal(n_res, 8);
    assert_true(ideal > 0 && fetched >= ideal);
    assert_true(json_number_value(json_object_get(g0r, "weight_fetch_ratio")) == fetched / ideal);
    assert_true(json_number_value(json_object_get(g0r, "row_utilisation_mean")) == util / 8);
    json_t *g0 = json_array_get(groups, 0);
    double mn = json_number_value(json_object_get(g0, "cycles_min"));
    double md = json_number_value(json_object_get(g0, "cycles_median"));
    double mx = json_number_value(json_object_get(g0, "cycles_max"));
    assert_true(mn > 0 && mn <= md && md <= mx);
    json_t *notes = json_object_get(d, "notes");
    int found = 0;
    for (size_t i = 0; i < json_array_size(notes); i++)
        found |= !strcmp(json_string_value(json_array_get(notes, i)),
                         plena_profile_text_shared_vs_routed_expert_major); /* the default */
    assert_true(found);

    /* report.md carries the notes verbatim */
    plena_test_path(p, sizeof p, out, "report.md");
    char *md_text = NULL;
    assert_int_equal(plena_file_read_all(p, &md_text, &n, NULL), 0);
    assert_non_null(strstr(md_text, plena_profile_text_shared_vs_routed_expert_major));
    assert_non_null(strstr(md_text, "routed lowering: expert-major"));
    plena_free(md_text);
    /* fixed routing only: no device_minus_fixed pair, null means (never a crash) */
    assert_int_equal(json_integer_value(json_object_get(g0, "device_minus_fixed_runs")), 0);
    assert_true(json_is_null(json_object_get(g0, "delta_cycles_mean")));
    json_decref(d);
    report_device_minus_fixed(r, rep, out, rroot);
}

/* ---- --jobs auto: probe the costliest trace, record the width ---- */
static void test_jobs_auto(void **state)
{
    (void)state;
    char out[128], p[256];
    plena_test_path(out, sizeof out, g_tmp, "auto");
    const char *r_v[MAX_ARGS];
    const char *const *r = fake_run(r_v, out, "auto", no_gate);
    assert_int_equal(run(r, NULL), 0);
    json_t *w = NULL, *probe = NULL;
    plena_test_path(p, sizeof p, out, "width.json");
    assert_int_equal(plena_replay_json_read_file(p, &w, NULL), 0);
    json_int_t width = json_integer_value(json_object_get(w, "width"));
    json_int_t cores = json_integer_value(json_object_get(w, "cores"));
    assert_true(width >= 1 && width <= 8);
    /* width = max(1, min(cores - 2, floor(0.7 mem / rss), remaining)) */
    assert_true(width <= (cores > 3 ? cores - 2 : 1));
    assert_non_null(json_string_value(json_object_get(w, "reason")));
    plena_test_path(p, sizeof p, out, "rss_probe.json");
    assert_int_equal(plena_replay_json_read_file(p, &probe, NULL), 0);
    assert_true(json_integer_value(json_object_get(probe, "max_rss_kb")) > 0);
    /* the probe is the costliest trace: token_count x top_k, 8 x 4 beats 4 x 1;
     * ties by trace_id, so sample n0 of the 32x4 set */
    assert_string_equal(json_string_value(json_object_get(probe, "trace_id")),
                        "syn_uniform_tiny-route-32x4_t8_s2_n0_l0");
    json_decref(w);
    json_decref(probe);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hamilton_worked_examples),
    cmocka_unit_test(test_width_and_quantile),
    cmocka_unit_test(test_select_cli),
    cmocka_unit_test(test_determinism_gate),
    cmocka_unit_test(test_kill_and_resume),
    cmocka_unit_test(test_failures_and_attempts),
    cmocka_unit_test(test_error_exits),
    cmocka_unit_test(test_corrupt_manifest),
    cmocka_unit_test(test_status_follows_exit_code),
    cmocka_unit_test(test_directory_lock),
    cmocka_unit_test(test_truncated_result_one_pass),
    cmocka_unit_test(test_report_real_replay),
    cmocka_unit_test(test_workers_do_not_export),
    cmocka_unit_test(test_weight_cache_forwarded),
    cmocka_unit_test(test_jobs_auto),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), setup, teardown);
}
