/* report.c — the self-contained HTML report (docs/report.md).
 *
 * Reads stage_profile.json (a build directory) or each trace's results.json
 * and trace.json (replay and campaign directories), and writes one HTML file:
 * inline SVG charts whose elements carry their figures as data-* attributes
 * (tests and scripts read them back), no script, no external resource, so it
 * opens from file:// on an offline machine. Charts can also be written one SVG
 * file each (--svg DIR) for papers. */
#include "report/report.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "gen/build.h"
#include "isa/program.h"
#include "isa/stages.h"
#include "profile/profile.h"

const char *plena_report_kind_name(enum plena_report_kind k)
{
    switch (k) {
    case PLENA_REPORT_BUILD: return "build";
    case PLENA_REPORT_REPLAY: return "replay";
    case PLENA_REPORT_CAMPAIGN: return "campaign";
    }
    return "?";
}

double plena_report_peak_macs_per_cycle(const struct plena_settings *s)
{
    return (double)s->mlen * (double)s->blen;
}

double plena_report_peak_bytes_per_cycle(const struct plena_settings *s)
{
    const struct plena_hbm_params *h = &s->hbm;
    double burst_ps = (double)(h->nBL ? h->nBL : 1) * (double)(h->tck_ps ? h->tck_ps : 1);
    double bytes_per_ps = (double)h->channels * (double)h->pseudo_channels * 64.0 / burst_ps;
    return bytes_per_ps * (double)s->clock_period_ps;
}

/* ---- one layer (a build's profile or a trace's result) ---- */

struct stage_fig {
    uint64_t picos, cycles, bytes_rd, bytes_wr, matrix_cycles, instructions;
};

struct layer {
    char id[200];
    char anchor[220];
    uint64_t clock_ps;
    struct stage_fig st[PLENA_STAGE_COUNT];
    uint64_t total_picos, sim_cycles;
    json_t *doc;           /* owned: the profile or results.json */
    json_t *expert_counts; /* owned reference (trace.json routing.expert_counts) or NULL */
    const json_t *routing_stats;
    const char *caveat;
    const char *benchmark, *phase;
    json_int_t layer_no;
    int gate; /* 1 passed, 0 failed, -1 unknown */
    const char *gate_kind;
};

static uint64_t u64_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    if (json_is_integer(v) && json_integer_value(v) > 0) return (uint64_t)json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) > 0) return (uint64_t)json_real_value(v);
    return 0;
}

static const char *str_of(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int load_json(const char *path, json_t **out, struct plena_err *err)
{
    json_error_t je;
    *out = json_load_file(path, 0, &je);
    if (!*out) return PLENA_FAIL(err, PLENA_E_INPUT, path, "line %d: %s", je.line, je.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "expected a JSON object");
    }
    return 0;
}

static void set_anchor(struct layer *l, const char *id)
{
    snprintf(l->id, sizeof l->id, "%s", id);
    size_t n = 0;
    l->anchor[n++] = 't';
    l->anchor[n++] = '-';
    for (const char *p = id; *p && n + 1 < sizeof l->anchor; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_';
        l->anchor[n++] = ok ? c : '_';
    }
    l->anchor[n] = 0;
}

static int stage_index(const char *name)
{
    return name ? plena_stage_lookup(name, (unsigned)strlen(name)) : -1;
}

/* One stage's figures: the keys a profile stage and a result's stage row share,
 * and the matrix cycles at `mkey` of `mobj`. */
static void read_fig(struct stage_fig *f, const json_t *v, const json_t *mobj, const char *mkey)
{
    f->picos = u64_of(v, "wall_picos");
    f->cycles = u64_of(v, "wall_cycles");
    f->bytes_rd = u64_of(v, "hbm_bytes_read");
    f->bytes_wr = u64_of(v, "hbm_bytes_written");
    f->instructions = u64_of(v, "instructions");
    f->matrix_cycles = u64_of(mobj, mkey);
}

/* stage_profile.json (docs/profile.md "Profile JSON") */
static int layer_from_profile(struct layer *l, const char *path, const char *id,
                              struct plena_err *err)
{
    memset(l, 0, sizeof *l);
    l->gate = -1;
    set_anchor(l, id);
    int rc = load_json(path, &l->doc, err);
    if (rc) return rc;
    const json_t *stages = json_object_get(l->doc, "stages");
    if (!json_is_object(stages))
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "$.stages: expected the profile's stages");
    l->clock_ps = u64_of(l->doc, "clock_period_ps");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)stages, k, v)
    {
        int s = stage_index(k);
        if (s < 0) continue;
        /* the profile keeps resource cycles in an object of their own */
        read_fig(&l->st[s], v, json_object_get(v, "resource_proxy_cycles"), "matrix");
    }
    l->total_picos = u64_of(l->doc, "total_profiled_picos");
    l->sim_cycles = u64_of(l->doc, "total_simulation_cycles");
    l->routing_stats = json_object_get(l->doc, "routing_stats");
    enum plena_lowering low = PLENA_LOWERING_UNSET;
    const char *ls = str_of(l->routing_stats, "lowering");
    if (ls) (void)plena_lowering_parse_marker(ls, &low);
    l->caveat = plena_profile_shared_vs_routed_text(low);
    return 0;
}

/* <dir>/results.json and trace.json of a replayed trace (docs/replay.md "results.json") */
static int layer_from_result(struct layer *l, const char *dir, const char *name,
                             struct plena_err *err)
{
    memset(l, 0, sizeof *l);
    l->gate = -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s/results.json", dir, name);
    int rc = load_json(p, &l->doc, err);
    if (rc) return rc;
    const json_t *sum = json_object_get(l->doc, "summary");
    const char *id = str_of(sum, "trace_id");
    set_anchor(l, id ? id : name);
    const json_t *stages = json_object_get(l->doc, "stages");
    size_t i;
    const json_t *v;
    json_array_foreach(stages, i, v)
    {
        int s = stage_index(str_of(v, "stage"));
        if (s < 0) continue;
        read_fig(&l->st[s], v, v, "matrix_cycles");
        l->total_picos += l->st[s].picos;
    }
    const json_t *run = json_object_get(l->doc, "run");
    l->sim_cycles = u64_of(run, "sim_latency_cycles");
    /* the clock: picos over cycles of the serial total (results.json carries both) */
    uint64_t sp = u64_of(run, "serial_latency_picos"), sc = u64_of(run, "serial_latency_cycles");
    l->clock_ps = sc ? (sp + sc - 1) / sc : 1;
    if (l->clock_ps == 0) l->clock_ps = 1;
    l->routing_stats = json_object_get(l->doc, "routing_stats");
    l->caveat = str_of(json_object_get(l->doc, "shared_vs_routed"), "note");
    l->benchmark = str_of(sum, "benchmark");
    l->phase = str_of(sum, "phase");
    l->layer_no = json_integer_value(json_object_get(sum, "layer"));
    const json_t *g = json_object_get(l->doc, "gate");
    if (json_is_boolean(json_object_get(g, "passed")))
        l->gate = json_is_true(json_object_get(g, "passed"));
    l->gate_kind = str_of(g, "kind");
    snprintf(p, sizeof p, "%s/%s/trace.json", dir, name);
    json_t *t = json_load_file(p, 0, NULL); /* optional: only the histogram needs it */
    if (t) {
        json_t *c = json_object_get(json_object_get(t, "routing"), "expert_counts");
        if (json_is_array(c)) l->expert_counts = json_incref(c);
        json_decref(t);
    }
    return 0;
}

static void layer_free(struct layer *l)
{
    json_decref(l->doc);
    json_decref(l->expert_counts);
}

/* ---- HTML and SVG text ---- */

static void esc(struct plena_buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': plena_buf_puts(b, "&lt;"); break;
        case '>': plena_buf_puts(b, "&gt;"); break;
        case '&': plena_buf_puts(b, "&amp;"); break;
        case '"': plena_buf_puts(b, "&quot;"); break;
        default: plena_buf_append(b, s, 1);
        }
    }
}

/* a fixed colour per stage, spread over the hue circle in stages.def order */
static void stage_colour(unsigned s, char *buf, size_t n)
{
    snprintf(buf, n, "hsl(%u,60%%,55%%)", (s * 360u / PLENA_STAGE_COUNT + 200u) % 360u);
}

struct ctx {
    const struct plena_report_opts *o;
    struct plena_buf html;
    size_t n_svg;
    int failed_svg;
    struct plena_err svg_err;
};

/* Appends the chart in `svg` (starting "<svg ") to the HTML and, with --svg,
 * writes it as DIR/<name>.svg with the namespace a standalone file needs. */
static void emit_chart(struct ctx *c, struct plena_buf *svg, const char *name)
{
    plena_buf_append(&c->html, svg->data, svg->len);
    plena_buf_puts(&c->html, "\n");
    if (!c->o->svg_dir || c->failed_svg) return;
    struct plena_buf f;
    plena_buf_init(&f);
    plena_buf_puts(&f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/"
                       "2000/svg\" ");
    plena_buf_append(&f, svg->data + 5, svg->len - 5);
    plena_buf_puts(&f, "\n");
    char p[4400];
    snprintf(p, sizeof p, "%s/%s.svg", c->o->svg_dir, name);
    if (f.failed || plena_file_write_atomic(p, f.data, f.len, &c->svg_err))
        c->failed_svg = 1;
    else
        c->n_svg++;
    plena_buf_free(&f);
}

/* Horizontal stacked bar of one figure per stage; each segment carries
 * data-stage and data-value (picos or bytes: exact integers). */
static void chart_stage_bar(struct ctx *c, const char *name, const char *title, const char *unit,
                            const uint64_t v[PLENA_STAGE_COUNT], uint64_t clock_ps)
{
    uint64_t total = 0;
    unsigned n_nz = 0;
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++) {
        total += v[s];
        n_nz += v[s] > 0;
    }
    const double W = 740.0;
    unsigned h = 60 + 16 * n_nz;
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_printf(&b,
                     "<svg class=\"chart\" data-chart=\"%s\" data-unit=\"%s\" data-total=\"%llu\" "
                     "width=\"760\" height=\"%u\" viewBox=\"0 0 760 %u\" role=\"img\">",
                     strcmp(unit, "picos") ? "stage-hbm-bytes" : "stage-cycles", unit,
                     (unsigned long long)total, h, h);
    plena_buf_puts(&b, "<text x=\"10\" y=\"14\" font-size=\"13\" font-weight=\"bold\">");
    esc(&b, title);
    plena_buf_puts(&b, "</text>");
    double x = 10.0;
    unsigned row = 0;
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++) {
        if (!v[s]) continue;
        double w = total ? W * (double)v[s] / (double)total : 0;
        char col[32];
        stage_colour(s, col, sizeof col);
        const char *sn = plena_stage_name((enum plena_stage)s);
        plena_buf_printf(&b,
                         "<rect class=\"seg\" data-stage=\"%s\" data-value=\"%llu\" x=\"%.2f\" "
                         "y=\"22\" width=\"%.2f\" height=\"22\" fill=\"%s\"><title>%s: %llu %s"
                         "</title></rect>",
                         sn, (unsigned long long)v[s], x, w, col, sn, (unsigned long long)v[s],
                         unit);
        x += w;
        double pct = total ? 100.0 * (double)v[s] / (double)total : 0;
        unsigned y = 62 + 16 * row++;
        char fig[64];
        if (!strcmp(unit, "picos"))
            snprintf(fig, sizeof fig, "%llu cycles",
                     (unsigned long long)plena_ps_to_cycles(v[s], clock_ps ? clock_ps : 1));
        else
            snprintf(fig, sizeof fig, "%llu bytes", (unsigned long long)v[s]);
        plena_buf_printf(&b,
                         "<rect x=\"10\" y=\"%u\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                         "<text x=\"26\" y=\"%u\" font-size=\"11\">%s: %s (%.1f%%)</text>",
                         y - 9, col, y, sn, fig, pct);
    }
    if (!total)
        plena_buf_puts(&b, "<text x=\"10\" y=\"38\" font-size=\"11\">(nothing recorded)</text>");
    plena_buf_puts(&b, "</svg>");
    emit_chart(c, &b, name);
    plena_buf_free(&b);
}

static void chart_histogram(struct ctx *c, const char *name, const json_t *counts)
{
    size_t n = json_array_size(counts);
    json_int_t mx = 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(counts, i)) > mx)
            mx = json_integer_value(json_array_get(counts, i));
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_printf(&b,
                     "<svg class=\"chart\" data-chart=\"tokens-per-expert\" data-experts=\"%zu\" "
                     "width=\"760\" height=\"200\" viewBox=\"0 0 760 200\" role=\"img\">"
                     "<text x=\"10\" y=\"14\" font-size=\"13\" font-weight=\"bold\">Tokens per "
                     "expert</text><text x=\"10\" y=\"30\" font-size=\"10\">max %lld</text>"
                     "<line x1=\"40\" y1=\"170\" x2=\"750\" y2=\"170\" stroke=\"#444\"/>",
                     n, (long long)mx);
    double bw = n ? 710.0 / (double)n : 0;
    for (size_t i = 0; i < n; i++) {
        json_int_t t = json_integer_value(json_array_get(counts, i));
        double hgt = mx ? 130.0 * (double)t / (double)mx : 0;
        plena_buf_printf(&b,
                         "<rect class=\"bar\" data-expert=\"%zu\" data-tokens=\"%lld\" x=\"%.2f\" "
                         "y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#4a7fb5\"><title>expert "
                         "%zu: %lld tokens</title></rect>",
                         i, (long long)t, 40 + bw * (double)i, 170 - hgt, bw > 1.5 ? bw - 1 : bw,
                         hgt, i, (long long)t);
    }
    plena_buf_printf(&b,
                     "<text x=\"40\" y=\"186\" font-size=\"10\">expert 0</text><text x=\"690\" "
                     "y=\"186\" font-size=\"10\">expert %zu</text></svg>",
                     n ? n - 1 : 0);
    emit_chart(c, &b, name);
    plena_buf_free(&b);
}

/* log10 axis position of v in [lo, hi] over [a, b] pixels */
static double logpos(double v, double lo, double hi, double a, double b)
{
    double t = (log10(v) - log10(lo)) / (log10(hi) - log10(lo));
    return a + t * (b - a);
}

/* Per-stage roofline: x = MACs per HBM byte, y = MACs per cycle achieved; the
 * roof is min(peak, bandwidth x intensity). MACs = matrix cycles x MLEN x BLEN
 * (docs/report.md "Roofline": the profile counts the matrix unit's busy
 * cycles, not MACs). Stages without HBM bytes sit on the right edge. */
static void chart_roofline(struct ctx *c, const char *name, const struct layer *l)
{
    const struct plena_settings *s = c->o->settings;
    double peak = plena_report_peak_macs_per_cycle(s);
    double bw = plena_report_peak_bytes_per_cycle(s);
    double xlo = 1e-2, xhi = 1e4, ylo = peak / 1e4, yhi = peak * 2;
    double ridge = bw > 0 ? peak / bw : 1;
    while (ridge < xlo * 10)
        xlo /= 10;
    while (ridge > xhi / 10)
        xhi *= 10;
    const double X0 = 60, X1 = 740, Y0 = 290, Y1 = 30;
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_printf(
        &b,
        "<svg class=\"chart\" data-chart=\"roofline\" data-peak-macs-per-cycle=\"%.17g\""
        " data-peak-bytes-per-cycle=\"%.17g\" width=\"760\" height=\"330\" "
        "viewBox=\"0 0 760 330\" role=\"img\"><text x=\"10\" y=\"14\" "
        "font-size=\"13\" font-weight=\"bold\">Roofline per stage (MACs per HBM "
        "byte vs MACs per cycle, log-log)</text>"
        "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
        "stroke=\"#888\"/>",
        peak, bw, X0, Y1, X1 - X0, Y0 - Y1);
    /* decade grid labels */
    for (double d = xlo; d <= xhi * 1.0001; d *= 10)
        plena_buf_printf(&b,
                         "<text x=\"%.1f\" y=\"%g\" font-size=\"9\" "
                         "text-anchor=\"middle\">%g</text>",
                         logpos(d, xlo, xhi, X0, X1), Y0 + 12, d);
    for (double d = ylo; d <= yhi * 1.0001; d *= 10)
        plena_buf_printf(&b, "<text x=\"4\" y=\"%.1f\" font-size=\"9\">%g</text>",
                         logpos(d, ylo, yhi, Y0, Y1) + 3, d);
    /* the roof: bandwidth diagonal up to the ridge, then the compute peak */
    double xa = xlo, ya = bw * xlo;
    if (ya < ylo) {
        xa = ylo / bw;
        ya = ylo;
    }
    plena_buf_printf(&b,
                     "<polyline class=\"roof\" fill=\"none\" stroke=\"#c33\" stroke-width=\"2\" "
                     "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>",
                     logpos(xa, xlo, xhi, X0, X1), logpos(ya, ylo, yhi, Y0, Y1),
                     logpos(ridge, xlo, xhi, X0, X1), logpos(peak, ylo, yhi, Y0, Y1), X1,
                     logpos(peak, ylo, yhi, Y0, Y1));
    plena_buf_printf(&b,
                     "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#c33\">compute roof %g "
                     "MAC/cycle; HBM roof %.4g B/cycle</text>",
                     X0 + 6, logpos(peak, ylo, yhi, Y0, Y1) - 4, peak, bw);
    /* one point per stage with matrix work, then the whole layer (its stages
     * split prefetch bytes from the projections that use them) */
    struct stage_fig all = {0};
    for (unsigned st = 0; st <= PLENA_STAGE_COUNT; st++) {
        const struct stage_fig *f = st < PLENA_STAGE_COUNT ? &l->st[st] : &all;
        if (st < PLENA_STAGE_COUNT) {
            all.matrix_cycles += f->matrix_cycles;
            all.cycles += f->cycles;
            all.bytes_rd += f->bytes_rd;
            all.bytes_wr += f->bytes_wr;
        }
        if (!f->matrix_cycles || !f->cycles) continue;
        double macs = (double)f->matrix_cycles * peak;
        uint64_t bytes = f->bytes_rd + f->bytes_wr;
        double ai = bytes ? macs / (double)bytes : xhi;
        double perf = macs / (double)f->cycles;
        double px = ai < xlo ? xlo : ai > xhi ? xhi : ai;
        double py = perf < ylo ? ylo : perf > yhi ? yhi : perf;
        char col[32] = "#222";
        if (st < PLENA_STAGE_COUNT) stage_colour(st, col, sizeof col);
        const char *sn = st < PLENA_STAGE_COUNT ? plena_stage_name((enum plena_stage)st) : "layer";
        double cx = logpos(px, xlo, xhi, X0, X1), cy = logpos(py, ylo, yhi, Y0, Y1);
        int left = cx > X1 - 160; /* labels near the right edge go to the point's left */
        plena_buf_printf(&b,
                         "<circle class=\"point\" data-stage=\"%s\" data-macs=\"%.17g\" "
                         "data-hbm-bytes=\"%llu\" data-cycles=\"%llu\" data-intensity=\"%.17g\" "
                         "data-macs-per-cycle=\"%.17g\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" "
                         "fill=\"%s\"><title>%s: %.4g MAC/B, %.4g MAC/cycle</title></circle>"
                         "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\"%s>%s</text>",
                         sn, macs, (unsigned long long)bytes, (unsigned long long)f->cycles,
                         bytes ? ai : -1.0, perf, cx, cy, col, sn, bytes ? ai : INFINITY, perf,
                         left ? cx - 7 : cx + 7, cy + (st < PLENA_STAGE_COUNT ? 3 : 14),
                         left ? " text-anchor=\"end\"" : "", sn);
    }
    plena_buf_printf(&b,
                     "<text x=\"%g\" y=\"322\" font-size=\"10\">MACs per HBM byte (stages "
                     "without HBM bytes at the right edge)</text></svg>",
                     X0 + 200);
    emit_chart(c, &b, name);
    plena_buf_free(&b);
}

/* ---- sections ---- */

static void put_kv_row(struct plena_buf *b, const char *k, const char *v)
{
    plena_buf_puts(b, "<tr><th>");
    esc(b, k);
    plena_buf_puts(b, "</th><td>");
    esc(b, v);
    plena_buf_puts(b, "</td></tr>");
}

static void put_json_row(struct plena_buf *b, const char *k, const json_t *v)
{
    char buf[96];
    if (json_is_integer(v))
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, sizeof buf, "%.4f", json_real_value(v));
    else if (json_is_string(v))
        snprintf(buf, sizeof buf, "%s", json_string_value(v));
    else
        snprintf(buf, sizeof buf, "%s", "n/a");
    put_kv_row(b, k, buf);
}

static void routing_section(struct ctx *c, const struct layer *l, const char *chart_prefix)
{
    struct plena_buf *h = &c->html;
    plena_buf_puts(h, "<h3>Routing</h3>");
    const json_t *rs = l->routing_stats;
    if (!json_is_object(rs)) {
        plena_buf_puts(h, "<p>No routing_stats: the run is not a MoE layer plena built.</p>");
    } else {
        plena_buf_puts(h, "<table class=\"kv\" data-table=\"routing-stats\">");
        static const char *const keys[] = {
            "lowering",           "active_experts",  "padding_rows",          "routed_rows_issued",
            "routed_rows_useful", "row_utilisation", "shared_row_utilisation"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            put_json_row(h, keys[i], json_object_get(rs, keys[i]));
        const json_t *tpe = json_object_get(rs, "tokens_per_expert");
        static const char *const tk[] = {"min", "max", "mean", "cv", "gini"};
        for (size_t i = 0; i < sizeof tk / sizeof tk[0]; i++) {
            char k[64];
            snprintf(k, sizeof k, "tokens_per_expert.%s", tk[i]);
            put_json_row(h, k, json_object_get(tpe, tk[i]));
        }
        plena_buf_puts(h, "</table>");
    }
    if (l->expert_counts) {
        char name[300];
        snprintf(name, sizeof name, "%s-tokens-per-expert", chart_prefix);
        chart_histogram(c, name, l->expert_counts);
    } else {
        plena_buf_puts(h, "<p>Tokens per expert: not recorded in a build directory (a replayed "
                          "trace carries routing.expert_counts).</p>");
    }
}

static void split_section(struct plena_buf *h, const struct layer *l)
{
    uint64_t w[PLENA_STAGE_COUNT];
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        w[s] = l->st[s].picos;
    struct plena_profile_split sp;
    plena_profile_split_compute(w, l->clock_ps, &sp);
    plena_buf_printf(h,
                     "<h3>Shared vs routed</h3><table class=\"kv\" data-table=\"split\" "
                     "data-shared-picos=\"%llu\" data-routed-picos=\"%llu\">",
                     (unsigned long long)sp.shared_picos, (unsigned long long)sp.routed_picos);
    char v[64];
    snprintf(v, sizeof v, "%llu", (unsigned long long)sp.shared_cycles);
    put_kv_row(h, "shared cycles", v);
    snprintf(v, sizeof v, "%llu", (unsigned long long)sp.routed_cycles);
    put_kv_row(h, "routed cycles", v);
    if (sp.has_shared_fraction)
        snprintf(v, sizeof v, "%.4f", sp.shared_fraction);
    else
        snprintf(v, sizeof v, "n/a");
    put_kv_row(h, "shared fraction", v);
    if (sp.has_ratio)
        snprintf(v, sizeof v, "%.4f", sp.shared_to_routed_ratio);
    else
        snprintf(v, sizeof v, "n/a");
    put_kv_row(h, "shared / routed", v);
    snprintf(v, sizeof v, "%llu", (unsigned long long)sp.routing_tax_cycles);
    put_kv_row(h, "routing tax cycles", v);
    plena_buf_puts(h, "</table><p class=\"caveat\">");
    esc(h, l->caveat ? l->caveat : plena_profile_shared_vs_routed_text(PLENA_LOWERING_UNSET));
    plena_buf_puts(h, "</p>");
}

static void layer_section(struct ctx *c, const struct layer *l)
{
    struct plena_buf *h = &c->html;
    plena_buf_printf(h, "<section id=\"%s\" data-layer=\"", l->anchor);
    esc(h, l->id);
    plena_buf_printf(h, "\" data-total-picos=\"%llu\"><h2>", (unsigned long long)l->total_picos);
    esc(h, l->id);
    plena_buf_printf(h, "</h2><p>%llu cycles", (unsigned long long)l->sim_cycles);
    if (l->gate >= 0) {
        plena_buf_printf(h, ", gate %s", l->gate ? "passed" : "FAILED");
        if (l->gate_kind) {
            plena_buf_puts(h, " (");
            esc(h, l->gate_kind);
            plena_buf_puts(h, ")");
        }
    }
    plena_buf_puts(h, "</p>");
    uint64_t v[PLENA_STAGE_COUNT];
    char name[300];
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        v[s] = l->st[s].picos;
    snprintf(name, sizeof name, "%s-stage-cycles", l->anchor);
    chart_stage_bar(c, name, "Stage time (cycles)", "picos", v, l->clock_ps);
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        v[s] = l->st[s].bytes_rd + l->st[s].bytes_wr;
    snprintf(name, sizeof name, "%s-stage-hbm-bytes", l->anchor);
    chart_stage_bar(c, name, "Stage HBM bytes (read + written)", "bytes", v, l->clock_ps);
    split_section(h, l);
    routing_section(c, l, l->anchor);
    snprintf(name, sizeof name, "%s-roofline", l->anchor);
    plena_buf_puts(h, "<h3>Roofline</h3>");
    chart_roofline(c, name, l);
    plena_buf_puts(h, "</section>\n");
}

/* ---- replay and campaign views ---- */

static int cmp_slowest(const void *a, const void *b)
{
    const struct layer *x = *(const struct layer *const *)a, *y = *(const struct layer *const *)b;
    if (x->sim_cycles != y->sim_cycles) return x->sim_cycles < y->sim_cycles ? 1 : -1;
    return strcmp(x->id, y->id);
}

static void put_link(struct plena_buf *h, const struct layer *l)
{
    plena_buf_printf(h, "<a href=\"#%s\">", l->anchor);
    esc(h, l->id);
    plena_buf_puts(h, "</a>");
}

static int same_group(const struct layer *a, const struct layer *b)
{
    return !strcmp(a->benchmark ? a->benchmark : "", b->benchmark ? b->benchmark : "") &&
           !strcmp(a->phase ? a->phase : "", b->phase ? b->phase : "") &&
           a->layer_no == b->layer_no;
}

static void aggregate_section(struct ctx *c, struct layer *ls, size_t n, const json_t *creport)
{
    struct plena_buf *h = &c->html;
    plena_buf_puts(h, "<section id=\"aggregate\"><h2>All traces</h2>");
    size_t passed = 0, failed = 0, unknown = 0;
    for (size_t i = 0; i < n; i++) {
        if (ls[i].gate == 1)
            passed++;
        else if (ls[i].gate == 0)
            failed++;
        else
            unknown++;
    }
    plena_buf_printf(h,
                     "<h3>Gate outcomes</h3><table class=\"kv\" data-table=\"gates\"><tr><th>"
                     "passed</th><td data-passed=\"%zu\">%zu</td></tr><tr><th>failed</th><td "
                     "data-failed=\"%zu\">%zu</td></tr><tr><th>undecided</th><td>%zu</td></tr>"
                     "</table>",
                     passed, passed, failed, failed, unknown);
    /* per (benchmark, phase, layer): summed stage time */
    plena_buf_puts(h, "<h3>Per benchmark, phase and layer</h3>");
    char *done = plena_calloc(n ? n : 1, 1);
    if (!done) {
        c->html.failed = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        uint64_t v[PLENA_STAGE_COUNT] = {0}, bytes[PLENA_STAGE_COUNT] = {0};
        size_t k = 0;
        for (size_t j = i; j < n; j++) {
            if (done[j] || !same_group(&ls[i], &ls[j])) continue;
            done[j] = 1;
            k++;
            for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++) {
                v[s] += ls[j].st[s].picos;
                bytes[s] += ls[j].st[s].bytes_rd + ls[j].st[s].bytes_wr;
            }
        }
        char title[400], name[300];
        snprintf(title, sizeof title, "%s / %s / layer %lld: %zu traces, summed stage time",
                 ls[i].benchmark ? ls[i].benchmark : "-", ls[i].phase ? ls[i].phase : "-",
                 (long long)ls[i].layer_no, k);
        snprintf(name, sizeof name, "group-%zu-stage-cycles", i);
        chart_stage_bar(c, name, title, "picos", v, ls[i].clock_ps);
        snprintf(title, sizeof title, "%s / %s / layer %lld: summed HBM bytes",
                 ls[i].benchmark ? ls[i].benchmark : "-", ls[i].phase ? ls[i].phase : "-",
                 (long long)ls[i].layer_no);
        snprintf(name, sizeof name, "group-%zu-stage-hbm-bytes", i);
        chart_stage_bar(c, name, title, "bytes", bytes, ls[i].clock_ps);
    }
    plena_free(done);
    /* the campaign's selection strata (report.json of `plena campaign report`) */
    if (creport && json_is_string(json_object_get(creport, "determinism"))) {
        plena_buf_puts(h, "<p>Determinism gate: <span data-determinism=\"");
        esc(h, str_of(creport, "determinism"));
        plena_buf_puts(h, "\">");
        esc(h, str_of(creport, "determinism"));
        plena_buf_printf(h, "</span>; campaign %s.</p>",
                         json_is_true(json_object_get(creport, "passed")) ? "passed"
                                                                          : "not passed");
    }
    if (creport && !json_object_size(json_object_get(creport, "selection"))) {
        plena_buf_puts(h, "<h3>Selection</h3><p>No selection recorded: every trace of the set "
                          "was replayed.</p>");
    } else if (creport) {
        plena_buf_puts(h, "<h3>Selection</h3><table data-table=\"strata\"><tr><th>benchmark"
                          "</th><th>stratum</th><th>available</th><th>quota</th></tr>");
        const char *bk;
        const json_t *bv;
        json_object_foreach((json_t *)json_object_get(creport, "selection"), bk, bv)
        {
            size_t i;
            const json_t *st;
            json_array_foreach(json_object_get(bv, "strata"), i, st)
            {
                plena_buf_puts(h, "<tr><td>");
                esc(h, bk);
                plena_buf_puts(h, "</td><td>");
                esc(h, str_of(st, "name"));
                plena_buf_printf(h, "</td><td>%llu</td><td>%llu</td></tr>",
                                 (unsigned long long)u64_of(st, "available"),
                                 (unsigned long long)u64_of(st, "quota"));
            }
        }
        plena_buf_puts(h, "</table>");
    } else if (c->o && n) {
        plena_buf_puts(h, "<p>Selection strata: no report.json (run <code>plena campaign "
                          "report</code>) or not a campaign.</p>");
    }
    /* slowest traces, linked to their sections */
    const struct layer **order = plena_calloc(n ? n : 1, sizeof *order);
    if (!order) {
        c->html.failed = 1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &ls[i];
    qsort(order, n, sizeof *order, cmp_slowest);
    plena_buf_puts(h, "<h3>Slowest traces</h3><table data-table=\"slowest\"><tr><th>trace</th>"
                      "<th>cycles</th><th>gate</th></tr>");
    for (size_t i = 0; i < n && i < 10; i++) {
        plena_buf_printf(h, "<tr data-cycles=\"%llu\"><td>",
                         (unsigned long long)order[i]->sim_cycles);
        put_link(h, order[i]);
        plena_buf_printf(h, "</td><td>%llu</td><td>%s</td></tr>",
                         (unsigned long long)order[i]->sim_cycles,
                         order[i]->gate == 1   ? "passed"
                         : order[i]->gate == 0 ? "FAILED"
                                               : "-");
    }
    plena_buf_puts(h, "</table><h3>Every trace</h3><ul class=\"index\">");
    for (size_t i = 0; i < n; i++) {
        plena_buf_puts(h, "<li>");
        put_link(h, &ls[i]);
        plena_buf_puts(h, "</li>");
    }
    plena_buf_puts(h, "</ul></section>\n");
    plena_free(order);
}

/* ---- discovery ---- */

static int is_file(const char *dir, const char *name)
{
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The trace directories under dir (those holding results.json), sorted. */
static int list_traces(const char *dir, char ***names, size_t *n, struct plena_err *err)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (!is_file(sub, "results.json")) continue;
        if (plena_grow((void **)names, &cap, *n + 1, sizeof **names) ||
            !((*names)[*n] = plena_strdup(e->d_name))) {
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, dir, "out of memory listing traces");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(*names, *n, sizeof **names, cmp_str);
    return rc;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        plena_free(names[i]);
    plena_free(names);
}

static void put_head(struct plena_buf *h, const char *path, enum plena_report_kind k)
{
    plena_buf_puts(h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                      "<title>plena report: ");
    esc(h, path);
    plena_buf_puts(h, "</title><style>body{font-family:sans-serif;margin:2em;max-width:820px}"
                      "table{border-collapse:collapse;margin:0.5em 0}th,td{border:1px solid #ccc;"
                      "padding:2px 8px;text-align:left;font-size:13px}.caveat{font-size:12px;"
                      "color:#555}svg.chart{display:block;margin:0.5em 0}section{border-top:2px "
                      "solid #ddd;margin-top:1.5em}</style></head><body>");
    plena_buf_printf(h, "<h1>plena report</h1><p data-kind=\"%s\">%s directory ",
                     plena_report_kind_name(k), plena_report_kind_name(k));
    esc(h, path);
    plena_buf_printf(h, " (plena %s)</p>\n", PLENA_VERSION);
}

int plena_report_write(const struct plena_report_opts *o, struct plena_report_summary *sum,
                       struct plena_err *err)
{
    memset(sum, 0, sizeof sum[0]);
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    plena_buf_init(&c.html);
    char tdir[4200];
    enum plena_report_kind kind;
    char **names = NULL;
    size_t n_names = 0;
    int rc = 0;
    struct layer *ls = NULL;
    size_t n = 0;
    json_t *creport = NULL;
    snprintf(tdir, sizeof tdir, "%s/replay", o->path);
    if ((rc = list_traces(tdir, &names, &n_names, err))) goto done;
    if (n_names) {
        kind = PLENA_REPORT_CAMPAIGN;
        char rp[4200];
        snprintf(rp, sizeof rp, "%s/report.json", o->path);
        creport = json_load_file(rp, 0, NULL); /* optional */
    } else {
        snprintf(tdir, sizeof tdir, "%s", o->path);
        if ((rc = list_traces(tdir, &names, &n_names, err))) goto done;
        kind = n_names ? PLENA_REPORT_REPLAY : PLENA_REPORT_BUILD;
    }
    sum->kind = kind;
    if (kind == PLENA_REPORT_BUILD) {
        char pp[4200];
        snprintf(pp, sizeof pp, "%s/%s", o->path,
                 plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE));
        if (!is_file(o->path, plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE))) {
            rc = PLENA_FAIL(err, PLENA_E_INPUT, o->path,
                            "expected a build directory with %s (plena moe --profile), a replay "
                            "output directory (<trace>/results.json) or a campaign directory "
                            "(replay/<trace>/results.json)",
                            plena_build_file_name(PLENA_BUILD_FILE_STAGE_PROFILE));
            goto done;
        }
        ls = plena_calloc(1, sizeof *ls);
        if (!ls) {
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, o->path, "out of memory");
            goto done;
        }
        const char *base = strrchr(o->path, '/');
        base = base && base[1] ? base + 1 : o->path;
        n = 1;
        if ((rc = layer_from_profile(&ls[0], pp, base, err))) goto done;
    } else {
        ls = plena_calloc(n_names, sizeof *ls);
        if (!ls) {
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, o->path, "out of memory");
            goto done;
        }
        for (; n < n_names; n++)
            if ((rc = layer_from_result(&ls[n], tdir, names[n], err))) {
                layer_free(&ls[n]);
                goto done;
            }
    }
    if (o->svg_dir && (rc = plena_mkdir_p(o->svg_dir, err))) goto done;
    put_head(&c.html, o->path, kind);
    if (kind != PLENA_REPORT_BUILD) aggregate_section(&c, ls, n, creport);
    for (size_t i = 0; i < n; i++)
        layer_section(&c, &ls[i]);
    plena_buf_puts(&c.html, "</body></html>\n");
    if (c.html.failed) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, o->path, "out of memory writing the report");
        goto done;
    }
    if (c.failed_svg) {
        if (err && !plena_err_is_set(err)) *err = c.svg_err;
        rc = PLENA_E_OUTPUT;
        goto done;
    }
    if (o->out_html)
        snprintf(sum->out_html, sizeof sum->out_html, "%s", o->out_html);
    else
        snprintf(sum->out_html, sizeof sum->out_html, "%s/report.html", o->path);
    if ((rc = plena_file_write_atomic(sum->out_html, c.html.data, c.html.len, err))) goto done;
    sum->n_layers = n;
    sum->n_svg_files = c.n_svg;
    sum->html_bytes = c.html.len;
done:
    for (size_t i = 0; i < n; i++)
        layer_free(&ls[i]);
    plena_free(ls);
    free_names(names, n_names);
    json_decref(creport);
    plena_buf_free(&c.html);
    return rc;
}
