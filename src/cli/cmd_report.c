/* plena report PATH [-o OUT.html] [--svg DIR] (docs/report.md): the settings
 * for the roofs, then plena_report_write (src/report/); prints where the
 * report went. */
#include <stddef.h>
#include <stdio.h>

#include "cli/cli.h"
#include "report/report.h"
#include "settings/settings.h"

struct report_cli {
    const char *path, *out, *svg, *settings;
};

#define R struct report_cli
static const struct plena_opt report_rows[] = {
    PLENA_OPT_PATH_ROW("-o|--out", "OUT.html", R, out, "where the HTML goes (written atomically)",
                       .def_text = "PATH/report.html"),
    PLENA_OPT_PATH_ROW("--svg", "DIR", R, svg, "also write every chart as its own SVG file"),
    PLENA_OPT_PATH_ROW("--settings", "FILE", R, settings,
                       "settings of the machine's roofs (MLEN, BLEN, clock, HBM)",
                       .def_text = "the built-in lookup"),
};
static const struct plena_opt_pos report_pos[] = {
    {"PATH",
     "a build/run directory (stage_profile.json), a replay output directory or a campaign "
     "directory",
     offsetof(R, path), 1, 1}};
#undef R

static const struct plena_cmd_spec report_spec = {
    .name = "report",
    .summary = "write a self-contained HTML report of a build, replay or campaign directory",
    .description = "Writes one HTML file with inline SVG charts (no script, no network): "
                   "stacked stage bars (cycles and HBM bytes), the shared-vs-routed split with "
                   "its caveat, routing_stats with a tokens-per-expert histogram and a roofline "
                   "per stage; for replay and campaign directories also the aggregated views, "
                   "gate outcomes and the slowest traces linked to their sections "
                   "(docs/report.md).",
    PLENA_CMD_POS(report_pos),
    PLENA_CMD_ROWS(report_rows),
    .opts_size = sizeof(struct report_cli),
};

static int cmd_report(void *opts, const struct plena_cli_args *a)
{
    struct report_cli *c = opts;
    (void)a;
    struct plena_err err;
    plena_err_clear(&err);
    struct plena_settings s;
    if (plena_settings_load(c->settings, &s, &err)) return plena_cli_report("report", &err);
    struct plena_report_opts o = {c->path, c->out, c->svg, &s};
    struct plena_report_summary sum;
    if (plena_report_write(&o, &sum, &err)) return plena_cli_report("report", &err);
    printf("report: %s directory, %zu layer%s -> %s (%llu bytes", plena_report_kind_name(sum.kind),
           sum.n_layers, sum.n_layers == 1 ? "" : "s", sum.out_html,
           (unsigned long long)sum.html_bytes);
    if (c->svg) printf(", %zu SVG files in %s", sum.n_svg_files, c->svg);
    printf(")\n");
    return plena_status_exit_code(PLENA_OK);
}

const struct plena_cli_cmd plena_cli_cmd_report = {.spec = &report_spec, .run = cmd_report};
