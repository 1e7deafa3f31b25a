/* plena gates timing|repeat|functional (spec/timing-and-profile.md 9.1,
 * spec/traces-and-replay.md 6): parses the flags, runs the library
 * (src/run/gates.h, src/replay/gates.h), prints one PASS/FAIL line per gate
 * and returns 0 / 1 / 2 / 3 (4 / 5 for output and resource errors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "replay/gates.h"
#include "run/gates.h"

static void usage(FILE *f)
{
    fprintf(
        f, "usage: plena gates timing [--out DIR] [--set TABLE.KEY=VALUE]... [--threads N]\n"
           "       plena gates repeat BUILD_DIR [--repeats N] [--settings FILE]\n"
           "       plena gates functional BUILD_DIR [--settings FILE]\n\n"
           "  --out DIR        timing: output root (default ./plena_timing_gates)\n"
           "  --set T.K=V      timing: settings override applied to every case (repeatable)\n"
           "  --threads N      timing: host threads (>= 1)\n"
           "  BUILD_DIR        repeat/functional: a build directory of 'plena replay'\n"
           "                   (functional needs the dumps of --keep-dumps)\n"
           "  --repeats N      repeat: emulator runs into BUILD_DIR/repeat/NN (N >= 2, default 3)\n"
           "  --settings FILE  repeat/functional: the replay's settings (default: the file\n"
           "                   recorded in run_stats.json, else the built-in lookup)\n");
}

/* plena gates repeat|functional BUILD_DIR [...] (traces-and-replay.md 6.3, 6.4) */
static int replay_gate(int argc, char **argv)
{
    const int is_repeat = !strcmp(argv[1], "repeat");
    struct plena_replay_gate_opts o = {NULL, NULL, 3};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (a[0] != '-' || !a[1]) {
            if (o.build_dir) return plena_cli_usage_error("gates", "unexpected argument '%s'", a);
            o.build_dir = a;
            continue;
        }
        size_t alen = strcspn(a, "=");
        int known = (alen == 10 && !strncmp(a, "--settings", 10)) ||
                    (is_repeat && alen == 9 && !strncmp(a, "--repeats", 9));
        if (!known) return plena_cli_usage_error("gates", "unknown option '%s'", a);
        const char *val = a[alen] == '=' ? a + alen + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val)
            return plena_cli_usage_error("gates", "option '%.*s' needs a value", (int)alen, a);
        if (alen == 10) {
            o.settings_path = val;
        } else {
            char *end;
            long n = strtol(val, &end, 10);
            if (*end || end == val || n < 2 || n > 99)
                return plena_cli_usage_error(
                    "gates", "--repeats: expected an integer from 2 to 99, found '%s'", val);
            o.repeats = (unsigned)n;
        }
    }
    if (!o.build_dir) return plena_cli_usage_error("gates", "%s: BUILD_DIR missing", argv[1]);
    struct plena_replay_gate_report r;
    struct plena_err err = {0};
    int rc = is_repeat ? plena_replay_gate_repeat(&o, &r, &err)
                       : plena_replay_gate_functional(&o, &r, &err);
    if (rc) {
        /* not evaluated: not passed either (6.1); say so on the gate line */
        int code = plena_cli_report("gates", &err);
        printf("FAIL %s not_evaluated build_dir=%s\n", argv[1], o.build_dir);
        return code ? code : 1;
    }
    char line[1200];
    plena_replay_gate_format_line(argv[1], &r, line, sizeof line);
    fputs(line, stdout);
    return r.passed ? 0 : 1;
}

int plena_cmd_gates(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "repeat") || !strcmp(argv[1], "functional")))
        return replay_gate(argc, argv);
    if (argc < 2 || strcmp(argv[1], "timing"))
        return plena_cli_usage_error("gates", "expected 'timing', 'repeat' or 'functional'");
    struct plena_gates_opts o = {NULL, NULL, 0, 1};
    const char **sets = plena_calloc((size_t)argc, sizeof *sets);
    if (!sets) {
        fprintf(stderr, "plena gates: out of memory\n");
        return 5;
    }
    size_t n_sets = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        size_t alen = strcspn(a, "=");
        int has_eq = a[alen] == '=';
        int known = (alen == 5 && !strncmp(a, "--out", 5)) ||
                    (alen == 5 && !strncmp(a, "--set", 5)) ||
                    (alen == 9 && !strncmp(a, "--threads", 9));
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            plena_free(sets);
            return 0;
        }
        if (!known) {
            plena_free(sets);
            return plena_cli_usage_error("gates", "unknown option '%s'", a);
        }
        if (has_eq)
            val = a + alen + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            plena_free(sets);
            return plena_cli_usage_error("gates", "option '%.*s' needs a value", (int)alen, a);
        }
        if (!strncmp(a, "--out", 5))
            o.out_dir = val;
        else if (!strncmp(a, "--set", 5))
            sets[n_sets++] = val;
        else {
            char *end;
            long t = strtol(val, &end, 10);
            if (*end || t < 1 || t > 4096) {
                plena_free(sets);
                return plena_cli_usage_error(
                    "gates", "--threads: expected an integer >= 1, found '%s'", val);
            }
            o.threads = (unsigned)t;
        }
    }
    o.overrides = sets;
    o.n_overrides = n_sets;
    struct plena_gates_report *r = plena_malloc(sizeof *r);
    if (!r) {
        plena_free(sets);
        fprintf(stderr, "plena gates: out of memory\n");
        return 5;
    }
    struct plena_err err = {0};
    int rc = plena_gates_timing_run(&o, r, &err);
    plena_free(sets);
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
    int code = plena_status_exit_code(plena_gates_status(r));
    plena_free(r);
    return code;
}
