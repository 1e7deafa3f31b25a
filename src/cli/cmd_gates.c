/* plena gates timing (spec/timing-and-profile.md 9.1): parses the flags,
 * runs the library (src/run/gates.h), prints one PASS/FAIL line per gate and
 * the tally, and returns 0 / 1 / 2 / 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "run/gates.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: plena gates timing [--out DIR] [--set TABLE.KEY=VALUE]... [--threads N]\n\n"
               "  --out DIR        output root (default ./plena_timing_gates)\n"
               "  --set T.K=V      settings override applied to every case (repeatable)\n"
               "  --threads N      host threads (>= 1)\n");
}

int plena_cmd_gates(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "timing"))
        return plena_cli_usage_error("gates", "expected 'timing' (the only gate family)");
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
    int code = plena_gates_exit_code(r);
    plena_free(r);
    return code;
}
