/* HTML report of a build/run directory, a replay output directory or a
 * campaign directory (docs/report.md): one self-contained file (inline SVG, no
 * script, no network reference) with stacked stage bars, the shared-vs-routed
 * split, routing_stats and a tokens-per-expert histogram, a roofline per stage,
 * and for replays and campaigns the aggregated views and the slowest traces
 * linked to their sections. It only reads what the runs wrote and never runs
 * anything; the CLI (cli/cmd_report.c) prints. */
#ifndef PLENA_REPORT_REPORT_H
#define PLENA_REPORT_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../settings/settings.h"

enum plena_report_kind {
    PLENA_REPORT_BUILD = 0, /* a directory with stage_profile.json */
    PLENA_REPORT_REPLAY,    /* a replay --out directory: <trace>/results.json */
    PLENA_REPORT_CAMPAIGN,  /* a campaign --out directory: replay/<trace>/results.json */
};
/* "build", "replay", "campaign" */
const char *plena_report_kind_name(enum plena_report_kind k);

struct plena_report_opts {
    const char *path;     /* the directory to report on */
    const char *out_html; /* NULL = PATH/report.html */
    const char *svg_dir;  /* NULL = no separate SVG files */
    /* the machine's roofs: MLEN, BLEN, clock and the HBM data-bus peak */
    const struct plena_settings *settings;
};

struct plena_report_summary {
    enum plena_report_kind kind;
    size_t n_layers; /* layers/traces with figures */
    size_t n_svg_files;
    uint64_t html_bytes;
    char out_html[4200];
};

/* Reads PATH, writes the HTML (and SVG files) atomically. PLENA_E_INPUT when
 * PATH is none of the three kinds or a file in it is not what it should be,
 * PLENA_E_OUTPUT when an output cannot be written. */
int plena_report_write(const struct plena_report_opts *o, struct plena_report_summary *sum,
                       struct plena_err *err);

/* The machine's roofs (docs/report.md "Roofline"): peak MACs per cycle of the
 * matrix unit (MLEN x BLEN) and HBM bytes per cycle of the data bus
 * (channels x pseudo-channels x 64 bytes per nBL x tCK, in clock cycles). */
double plena_report_peak_macs_per_cycle(const struct plena_settings *s);
double plena_report_peak_bytes_per_cycle(const struct plena_settings *s);

#endif
