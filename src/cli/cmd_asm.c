/* plena asm: assemble PLENA assembly into machine code (docs/machine.md
 * "Assembly syntax"; docs/profile.md "Stage attribution" for --stage-map).
 * Diagnostics go to stderr as "file:line:col: error|warning: text". The
 * assembler itself lives in src/isa/asm.c; this file has the option table and
 * the printing. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "isa/asm.h"
#include "isa/stages.h"

struct asm_cli {
    const char *in, *out, *map;
    struct plena_asm_opts o;
};

static const struct plena_opt_enum encoders = {
    .names = (const char *const[]){"plena", "upstream", NULL}};

static const struct plena_opt asm_rows[] = {
    PLENA_OPT_PATH_ROW("-o", "OUT.mem", struct asm_cli, out,
                       "output machine code (written atomically)", .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--strict", struct asm_cli, o.strict,
                       "unknown stage names, register kind mismatches, markers in trailing "
                       "comments, V_TOPK policy 2..14, rd != 0 on M_BMM/M_BTMM and rstride > 1 "
                       "are errors instead of warnings"),
    PLENA_OPT_ENUM_ROW("--encoder", "NAME", struct asm_cli, o.encoder_upstream, &encoders,
                       "plena places every operand where the decoder reads it; upstream "
                       "reproduces the upstream assembler's placement of the *_WO immediate and "
                       "the V_EXP_V/V_RECI_V/V_RED_* mask, warning on every line where the "
                       "layouts differ"),
    PLENA_OPT_PATH_ROW("--stage-map", "OUT.json", struct asm_cli, map,
                       "write the label pass: per PC {pc, line, stage, pair}, the attribution "
                       "mode, marker count and unresolved markers"),
};
static const struct plena_opt_pos asm_pos[] = {
    {"IN.asm", "PLENA assembly source", offsetof(struct asm_cli, in), 1, 1}};

static const struct plena_cmd_spec plena_asm_spec = {
    .name = "asm",
    .summary = "assemble PLENA assembly into machine code (.mem)",
    .description = "Assembles PLENA assembly (docs/machine.md \"Assembly syntax\") into machine "
                   "code, one 0xXXXXXXXX word per line. Diagnostics go to standard error as "
                   "\"file:line:col: error|warning: text\".",
    PLENA_CMD_POS(asm_pos),
    PLENA_CMD_ROWS(asm_rows),
    .opts_size = sizeof(struct asm_cli),
};

static int write_stage_map(const char *path, const struct plena_program *p, struct plena_err *err)
{
    const struct plena_labels *l = &p->labels;
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
                     /* "unset": no marker in the source (the profile says "none") */
                     l->lowering == PLENA_LOWERING_UNSET ? "unset"
                                                         : plena_lowering_marker(l->lowering),
                     l->routed_moe_markers_present ? "true" : "false", l->n);
    for (size_t i = 0; i < l->n && !b.failed; i++) {
        plena_buf_printf(&b, "%s\n    {\"pc\": %zu, \"line\": %u, \"stage\": \"%s\", \"pair\": ",
                         i ? "," : "", i, p->src_line[i], plena_stage_name(l->v[i].stage));
        if (!l->v[i].has_pair)
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

static int cmd_asm(void *opts, const struct plena_cli_args *a)
{
    struct asm_cli *c = opts;
    (void)a;
    const char *in = c->in, *out = c->out, *map = c->map;
    struct plena_asm_opts o = c->o;
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
    return plena_status_exit_code(PLENA_OK);
}

const struct plena_cli_cmd plena_cli_cmd_asm = {.spec = &plena_asm_spec, .run = cmd_asm};
