/* plena asm: assemble PLENA assembly into machine code (spec/isa.md 13,
 * spec/timing-and-profile.md 6.2 for --stage-map). Diagnostics go to stderr
 * as "file:line:col: error|warning: text"; exit 0 / 2 usage / 3 input /
 * 4 output. The assembler itself lives in src/isa/asm.c. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "isa/asm.h"
#include "isa/stages.h"

static const char help[] =
    "usage: plena asm IN.asm -o OUT.mem [--strict] [--encoder=plena|upstream]\n"
    "                 [--stage-map OUT.json]\n\n"
    "Assembles PLENA assembly (spec/isa.md section 13) into machine code, one\n"
    "0xXXXXXXXX word per line.\n\n"
    "  -o OUT.mem              output machine code (written atomically)\n"
    "  --strict                unknown stage names, register kind mismatches, markers in\n"
    "                          trailing comments, V_TOPK policy 2..14, rd != 0 on\n"
    "                          M_BMM/M_BTMM and rstride > 1 are errors (default: warnings)\n"
    "  --encoder=plena         place every operand where the decoder reads it (default)\n"
    "  --encoder=upstream      reproduce the upstream assembler's placement of the *_WO\n"
    "                          immediate and the V_EXP_V/V_RECI_V/V_RED_* mask, warning\n"
    "                          on every line where the layouts differ\n"
    "  --stage-map OUT.json    write the label pass: per PC {pc, line, stage, pair}, the\n"
    "                          attribution mode, marker count and unresolved markers\n\n"
    "exit status: 0 success, 2 usage, 3 invalid input, 4 output not writable\n";

static int write_stage_map(const char *path, const struct plena_program *p, struct plena_err *err)
{
    const struct plena_labels *l = &p->labels;
    static const char *const lowering[] = {"unset", "pair_major", "expert_major"};
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_puts(&b, "{\n  \"source\": ");
    const char *src = p->source_path ? p->source_path : "";
    plena_json_put_string(&b, src, strlen(src), 0);
    plena_buf_printf(&b, ",\n  \"mode\": \"%s\",\n  \"stage_marker_count\": %u,\n",
                     l->mode == PLENA_ATTR_MARKERS ? "markers" : "legacy", l->stage_marker_count);
    plena_buf_puts(&b, "  \"unresolved_stage_markers\": [");
    for (size_t i = 0; i < l->n_unresolved; i++) {
        plena_buf_puts(&b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        plena_json_put_string(&b, l->unresolved[i].name, strlen(l->unresolved[i].name), 0);
        plena_buf_printf(&b, ", \"first_line\": %u, \"occurrences\": %u}",
                         l->unresolved[i].first_line, l->unresolved[i].occurrences);
    }
    plena_buf_puts(&b, l->n_unresolved ? "\n  ],\n" : "],\n");
    plena_buf_printf(&b,
                     "  \"routed_lowering\": \"%s\",\n  \"routed_moe_markers_present\": %s,\n"
                     "  \"label_count\": %zu,\n  \"instructions\": [",
                     lowering[l->lowering], l->routed_moe_markers_present ? "true" : "false", l->n);
    for (size_t i = 0; i < l->n && !b.failed; i++) {
        plena_buf_printf(&b, "%s\n    {\"pc\": %zu, \"line\": %u, \"stage\": \"%s\", \"pair\": ",
                         i ? "," : "", i, p->src_line[i], plena_stage_name(l->v[i].stage));
        if (l->v[i].pair == PLENA_PAIR_NONE)
            plena_buf_puts(&b, "null}");
        else
            plena_buf_printf(&b, "%u}", l->v[i].pair);
    }
    plena_buf_puts(&b, l->n ? "\n  ]\n}\n" : "]\n}\n");
    int rc;
    if (b.failed)
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory building stage map");
    else
        rc = plena_file_write_atomic(path, b.data, b.len, err);
    plena_buf_free(&b);
    return rc;
}

int plena_cmd_asm(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *map = NULL;
    struct plena_asm_opts o = {0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--stage-map") || !strcmp(a, "--encoder")) {
            if (i + 1 >= argc) return plena_cli_usage_error("asm", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "-o"))
                out = v;
            else if (!strcmp(a, "--stage-map"))
                map = v;
            else if (!strcmp(v, "plena") || !strcmp(v, "upstream"))
                o.encoder_upstream = v[0] == 'u';
            else
                return plena_cli_usage_error(
                    "asm", "unknown encoder '%s' (expected plena or upstream)", v);
        } else if (!strncmp(a, "--encoder=", 10)) {
            const char *v = a + 10;
            if (strcmp(v, "plena") && strcmp(v, "upstream"))
                return plena_cli_usage_error(
                    "asm", "unknown encoder '%s' (expected plena or upstream)", v);
            o.encoder_upstream = v[0] == 'u';
        } else if (!strncmp(a, "--stage-map=", 12)) {
            map = a + 12;
        } else if (!strcmp(a, "--strict")) {
            o.strict = 1;
        } else if (a[0] == '-' && a[1]) {
            return plena_cli_usage_error("asm", "unknown option '%s'", a);
        } else if (!in) {
            in = a;
        } else {
            return plena_cli_usage_error("asm", "more than one input file ('%s', '%s')", in, a);
        }
    }
    if (!in) return plena_cli_usage_error("asm", "missing input file");
    if (!out) return plena_cli_usage_error("asm", "missing -o OUT.mem");
    o.want_labels = map != NULL;

    struct plena_program p;
    struct plena_asm_diags d;
    struct plena_err err;
    memset(&d, 0, sizeof d);
    plena_err_clear(&err);
    int rc = plena_asm_file(in, &o, &p, &d, &err);
    char line[1200];
    for (size_t i = 0; i < d.n; i++)
        fprintf(stderr, "%s\n", plena_asm_diag_format(&d, i, line, sizeof line));
    if (d.n_total > d.n)
        fprintf(stderr, "%s: %zu further warnings not shown\n", in, d.n_total - d.n);
    plena_asm_diags_free(&d);
    if (rc) {
        if (err.code == PLENA_E_INPUT && strchr(err.where, ':'))
            fprintf(stderr, "%s: error: %s\n", err.where, err.msg);
        else
            return plena_cli_report("asm", &err);
        return plena_status_exit_code(err.code);
    }
    rc = plena_program_write_mem(out, p.words, p.n, &err);
    if (!rc && map) rc = write_stage_map(map, &p, &err);
    plena_program_free(&p);
    if (rc) return plena_cli_report("asm", &err);
    return 0;
}
