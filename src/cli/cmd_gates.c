/* plena gates timing|repeat|functional (docs/timing.md "Timing gates",
 * docs/replay.md "Gates"): the option tables, one PASS/FAIL line per
 * gate, and the exit status of the verdict. The gates themselves are
 * src/run/gates.h and src/replay/gates.h. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "replay/gates.h"
#include "run/gates.h"

/* ---- timing ---- */

struct timing_cli {
    struct plena_gates_opts o;
    struct plena_opt_list sets;
};

static const struct plena_opt timing_rows[] = {
    PLENA_OPT_PATH_ROW("--out", "DIR", struct timing_cli, o.out_dir,
                       "output root: one directory per case", .def_text = "./plena_timing_gates"),
    PLENA_OPT_LIST_ROW("--set", "TABLE.KEY=VALUE", struct timing_cli, sets,
                       "settings override applied to every case, after the 9.2 case values"),
    PLENA_OPT_UINT_ROW("--threads", "N", struct timing_cli, o.threads, 1, 4096,
                       "host threads (never changes outputs)", .def = "1"),
};
static const struct plena_cmd_spec timing_spec = {
    .name = "gates timing",
    .summary = "timing validation gates G1, G2, G5, profile accounting, repeat determinism",
    .description = "Runs the timing gate cases of docs/timing.md \"Timing gates\" and prints one "
                   "PASS/FAIL line per gate, then \"timing gates: N/M passed\".",
    PLENA_CMD_ROWS(timing_rows),
    .opts_size = sizeof(struct timing_cli),
};

static int cmd_timing(void *opts, const struct plena_cli_args *a)
{
    struct timing_cli *c = opts;
    int code;
    (void)a;
    c->o.overrides = c->sets.v;
    c->o.n_overrides = c->sets.n;
    struct plena_gates_report *r = plena_malloc(sizeof *r);
    if (!r) {
        return plena_cli_nomem("gates");
    }
    struct plena_err err = {0};
    c->o.stop = &plena_cli_stop;
    plena_cli_catch_stop_signals();
    int rc = plena_gates_timing_run(&c->o, r, &err);
    if (rc) {
        plena_free(r);
        return plena_cli_report("gates", &err);
    }
    for (int i = 0; i < PLENA_GATE_CASE_COUNT; i++)
        if (!r->cases[i].ran)
            fprintf(stderr, "plena gates: case %s: %s\n", r->cases[i].name, r->cases[i].error);
    struct plena_buf b;
    plena_buf_init(&b);
    for (int i = 0; i < PLENA_GATE_COUNT; i++)
        plena_gates_format_line(&r->gates[i], &b);
    plena_buf_printf(&b, "timing gates: %zu/%d passed\n", r->n_passed, PLENA_GATE_COUNT);
    if (b.data) fputs(b.data, stdout);
    plena_buf_free(&b);
    code = plena_status_exit_code(plena_gates_status(r));
    plena_free(r);
    return code;
}

/* ---- repeat and functional: a reopened replay build directory ---- */

#define G struct plena_replay_gate_opts
/* The --settings row of both gates. A macro, not a const object: an object's
 * value is not a constant initializer in C (gcc folds it, clang refuses). */
#define SETTINGS_ROW                                                                               \
    PLENA_OPT_PATH_ROW("--settings", "FILE", G, settings_path,                                     \
                       "the replay's settings; they must reproduce the recorded fingerprint",      \
                       .def_text =                                                                 \
                           "the file recorded in run_stats.json, else the built-in lookup")
static const struct plena_opt repeat_rows[] = {
    PLENA_OPT_UINT_ROW("--repeats", "N", G, repeats, 2, 99,
                       "emulator runs into BUILD_DIR/repeat/NN", .def = "3"),
    SETTINGS_ROW,
};
static const struct plena_opt functional_rows[] = {SETTINGS_ROW};
#undef SETTINGS_ROW
static const struct plena_opt_pos build_dir_pos[] = {
    {"BUILD_DIR", "a build directory of 'plena replay'", offsetof(G, build_dir), 1, 1}};
#undef G

static const struct plena_cmd_spec repeat_spec = {
    .name = "gates repeat",
    .summary = "repeat gate on a replay build directory",
    .description = "Reruns the emulator on the staged images of BUILD_DIR N times and compares "
                   "every metric; writes BUILD_DIR/repeat_gate.json after the decision.",
    PLENA_CMD_POS(build_dir_pos),
    PLENA_CMD_ROWS(repeat_rows),
    .opts_size = sizeof(struct plena_replay_gate_opts),
};
static const struct plena_cmd_spec functional_spec = {
    .name = "gates functional",
    .summary = "functional gate on a replay build directory",
    .description = "Compares the emulator dumps of BUILD_DIR with the reference (the build must "
                   "have been replayed with --keep-dumps); writes BUILD_DIR/functional_gate.json "
                   "after the decision.",
    PLENA_CMD_POS(build_dir_pos),
    PLENA_CMD_ROWS(functional_rows),
    .opts_size = sizeof(struct plena_replay_gate_opts),
};

/* gates repeat and gates functional: the gate's name is argv[0]. */
static int replay_gate(void *opts, const struct plena_cli_args *a)
{
    struct plena_replay_gate_opts oc = *(const struct plena_replay_gate_opts *)opts;
    const struct plena_replay_gate_opts *o = &oc;
    const char *name = a->argv[0];
    /* SIGINT/SIGTERM: the build's regeneration stops at its next poll, the
     * runs as a trap; no gate file, exit 5 */
    oc.stop = &plena_cli_stop;
    plena_cli_catch_stop_signals();
    struct plena_replay_gate_report r;
    struct plena_err err = {0};
    int rc = a->spec == &repeat_spec ? plena_replay_gate_repeat(o, &r, &err)
                                     : plena_replay_gate_functional(o, &r, &err);
    if (rc) {
        /* not evaluated: not passed either; say so on the gate line (a stop
         * is no verdict: the error line only) */
        plena_cli_report("gates", &err);
        if (err.code != PLENA_E_INTERRUPTED)
            printf("FAIL %s not_evaluated build_dir=%s\n", name, o->build_dir);
        return plena_status_exit_code(plena_status_worst(err.code, PLENA_E_FAILED));
    }
    char line[1200];
    plena_replay_gate_format_line(name, &r, line, sizeof line);
    fputs(line, stdout);
    return plena_status_exit_code(r.passed ? PLENA_OK : PLENA_E_FAILED);
}

static const struct plena_cli_sub gates_subs[] = {
    {"timing", cmd_timing, &timing_spec},
    {"repeat", replay_gate, &repeat_spec},
    {"functional", replay_gate, &functional_spec},
};

const struct plena_cli_cmd plena_cli_cmd_gates = {
    .subs = gates_subs,
    .n_subs = sizeof gates_subs / sizeof gates_subs[0],
};
