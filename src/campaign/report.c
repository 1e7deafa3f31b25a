/* Campaign status and report (docs/replay.md "Campaigns" status, 7.9):
 * counts per trace from the results (the checkpoint) and the manifest
 * (attempts), grouped cycle statistics with linearly interpolated median and
 * p95, and report.json / report.csv / report.md written atomically. The
 * verdict: determinism passed or bypassed, every selected trace passed, no
 * invalid trace skipped. Status writes nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "campaign/campaign_internal.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/json.h"
#include "replay/export.h"
#include "replay/jsonw.h"
#include "replay/result.h"

static const char decode_note[] =
    "decode traces are one generated token's MoE layer each (decode_step 1 = first generated "
    "token); prefill traces cover the whole prompt of one sample";

double plena_campaign_quantile(const double *v, size_t n, double q)
{
    double r = (double)(n - 1) * q;
    size_t lo = (size_t)floor(r);
    if (lo + 1 >= n) return v[n - 1];
    double f = r - (double)lo;
    return v[lo] + (v[lo + 1] - v[lo]) * f;
}

/* per trace: attempts that failed for its fingerprint, from the manifest */
static int attempts(const struct plena_campaign_set *s, const char *out_dir, unsigned *att,
                    size_t *n_lines, size_t *torn, struct plena_err *err)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/manifest.jsonl", out_dir);
    json_t *lines = NULL;
    int rc = plena_campaign_manifest_read(p, 0, &lines, torn, err);
    if (rc) return rc;
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        const char *st;
        ptrdiff_t k = plena_campaign_manifest_trace(s, l, &st);
        if (k >= 0 && st && strcmp(st, "passed")) att[k]++;
    }
    if (n_lines) *n_lines = json_array_size(lines);
    json_decref(lines);
    return 0;
}

int plena_campaign_status_read(const struct plena_campaign_set *s, const char *out_dir,
                               unsigned max_attempts, struct plena_campaign_status *st,
                               struct plena_err *err)
{
    memset(st, 0, sizeof *st);
    unsigned *att = plena_calloc(s->n ? s->n : 1, sizeof *att);
    if (!att) return PLENA_FAIL(err, PLENA_E_NOMEM, "status", "out of memory");
    int rc = attempts(s, out_dir, att, &st->manifest_lines, &st->torn_bytes, err);
    char root[4300];
    snprintf(root, sizeof root, "%s/replay", out_dir);
    st->total = s->n;
    for (size_t k = 0; k < s->n && !rc; k++) {
        const struct plena_campaign_trace *t = &s->v[k];
        int r = plena_campaign_result_state(root, t->item.dir_name, t->item.fingerprint, NULL);
        if (r > 0)
            st->passed++;
        else if (att[k] >= (max_attempts ? max_attempts : 3))
            st->given_up++;
        else if (r == 0 || att[k])
            st->failed++;
        else
            st->not_run++;
    }
    plena_free(att);
    return rc;
}

struct group {
    char bench[160], phase[16];
    int64_t layer; /* -1: the (benchmark, phase) row */
    double *cyc;
    size_t n_cyc, cap_cyc;
    size_t runs, pn, ps, failed, n_tax, n_shared, n_bytes, n_rs;
    double tax, shared, rd, wr;
    /* device_minus_fixed (docs/replay.md "Routing tax"): pairs and delta sums */
    size_t n_dmf;
    double d_cyc, d_rd, d_wr;
    /* routing_stats sums (docs/profile.md "routing_stats") */
    double active, gini, padding, util, fetched, ideal;
};

static struct group *group_get(struct group **g, size_t *n, size_t *cap, const char *b,
                               const char *ph, int64_t layer)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*g)[i].bench, b) && !strcmp((*g)[i].phase, ph) && (*g)[i].layer == layer)
            return &(*g)[i];
    if (plena_grow((void **)g, cap, *n + 1, sizeof **g)) return NULL;
    struct group *x = &(*g)[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->bench, sizeof x->bench, "%s", b);
    snprintf(x->phase, sizeof x->phase, "%s", ph);
    x->layer = layer;
    return x;
}

static double num(const json_t *o, const char *a, const char *b, int *ok)
{
    const json_t *v = json_object_get(json_object_get(o, a), b);
    *ok = json_is_number(v);
    return *ok ? json_number_value(v) : 0;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int group_cmp(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    int c = strcmp(x->bench, y->bench);
    if (c) return c;
    if ((c = strcmp(x->phase, y->phase))) return c;
    return (x->layer > y->layer) - (x->layer < y->layer);
}

static const char *const report_cols[] = {"benchmark",
                                          "phase",
                                          "layer",
                                          "runs",
                                          "passed_numerical",
                                          "passed_smoke",
                                          "failed",
                                          "cycles_min",
                                          "cycles_median",
                                          "cycles_mean",
                                          "cycles_p95",
                                          "cycles_max",
                                          "routing_tax_fraction_mean",
                                          "shared_fraction_mean",
                                          "hbm_bytes_read_mean",
                                          "hbm_bytes_written_mean",
                                          "active_experts_mean",
                                          "tokens_per_expert_gini_mean",
                                          "padding_rows_mean",
                                          "row_utilisation_mean",
                                          "weight_bytes_fetched_mean",
                                          "weight_bytes_ideal_mean",
                                          "weight_fetch_ratio",
                                          "device_minus_fixed_runs",
                                          "delta_cycles_mean",
                                          "delta_hbm_bytes_read_mean",
                                          "delta_hbm_bytes_written_mean"};
#define N_REPORT_COLS (sizeof report_cols / sizeof report_cols[0])

static json_t *mean_or_null(double sum, size_t n)
{
    return n ? json_real(sum / (double)n) : json_null();
}

static json_t *group_row(const struct group *g)
{
    json_t *r = json_object();
    json_object_set_new(r, "benchmark", json_string(g->bench));
    json_object_set_new(r, "phase", json_string(g->phase));
    json_object_set_new(r, "layer", g->layer >= 0 ? json_integer(g->layer) : json_null());
    json_object_set_new(r, "runs", json_integer((json_int_t)g->runs));
    json_object_set_new(r, "passed_numerical", json_integer((json_int_t)g->pn));
    json_object_set_new(r, "passed_smoke", json_integer((json_int_t)g->ps));
    json_object_set_new(r, "failed", json_integer((json_int_t)g->failed));
    if (g->n_cyc) {
        double sum = 0;
        for (size_t i = 0; i < g->n_cyc; i++)
            sum += g->cyc[i];
        json_object_set_new(r, "cycles_min", json_real(g->cyc[0]));
        json_object_set_new(r, "cycles_median",
                            json_real(plena_campaign_quantile(g->cyc, g->n_cyc, 0.5)));
        json_object_set_new(r, "cycles_mean", json_real(sum / (double)g->n_cyc));
        json_object_set_new(r, "cycles_p95",
                            json_real(plena_campaign_quantile(g->cyc, g->n_cyc, 0.95)));
        json_object_set_new(r, "cycles_max", json_real(g->cyc[g->n_cyc - 1]));
    } else {
        const char *k[] = {"cycles_min", "cycles_median", "cycles_mean", "cycles_p95",
                           "cycles_max"};
        for (size_t i = 0; i < 5; i++)
            json_object_set_new(r, k[i], json_null());
    }
    json_object_set_new(r, "routing_tax_fraction_mean", mean_or_null(g->tax, g->n_tax));
    json_object_set_new(r, "shared_fraction_mean", mean_or_null(g->shared, g->n_shared));
    json_object_set_new(r, "hbm_bytes_read_mean", mean_or_null(g->rd, g->n_bytes));
    json_object_set_new(r, "hbm_bytes_written_mean", mean_or_null(g->wr, g->n_bytes));
    json_object_set_new(r, "active_experts_mean", mean_or_null(g->active, g->n_rs));
    json_object_set_new(r, "tokens_per_expert_gini_mean", mean_or_null(g->gini, g->n_rs));
    json_object_set_new(r, "padding_rows_mean", mean_or_null(g->padding, g->n_rs));
    json_object_set_new(r, "row_utilisation_mean", mean_or_null(g->util, g->n_rs));
    json_object_set_new(r, "weight_bytes_fetched_mean", mean_or_null(g->fetched, g->n_rs));
    json_object_set_new(r, "weight_bytes_ideal_mean", mean_or_null(g->ideal, g->n_rs));
    /* the group's weight traffic over its ideal: sums, not a mean of ratios */
    json_object_set_new(r, "weight_fetch_ratio",
                        g->n_rs && g->ideal > 0 ? json_real(g->fetched / g->ideal) : json_null());
    json_object_set_new(r, "device_minus_fixed_runs", json_integer((json_int_t)g->n_dmf));
    json_object_set_new(r, "delta_cycles_mean", mean_or_null(g->d_cyc, g->n_dmf));
    json_object_set_new(r, "delta_hbm_bytes_read_mean", mean_or_null(g->d_rd, g->n_dmf));
    json_object_set_new(r, "delta_hbm_bytes_written_mean", mean_or_null(g->d_wr, g->n_dmf));
    return r;
}

static json_t *read_json(const char *dir, const char *name);

/* The device_minus_fixed row of a device-routed result res at replay root
 * root (build dir `dir`) against its fixed-route sibling; NULL when res is
 * fixed-routed or the pair is incomplete (no fixed result, a run missing). */
static json_t *dmf_row(const char *root, const char *dir, const json_t *res)
{
    char fixed[200], p[4300];
    if (!plena_replay_device_dir_pair(dir, fixed, sizeof fixed)) return NULL;
    snprintf(p, sizeof p, "%s/%s", root, fixed);
    json_t *fr = read_json(p, "results.json");
    json_t *o = fr ? plena_replay_device_minus_fixed(res, fr) : NULL;
    json_decref(fr);
    if (o && !json_is_integer(json_object_get(o, "delta_cycles"))) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static void dmf_add(struct group *x, const json_t *o)
{
    x->n_dmf++;
    x->d_cyc += (double)json_integer_value(json_object_get(o, "delta_cycles"));
    x->d_rd += (double)json_integer_value(json_object_get(o, "delta_hbm_bytes_read"));
    x->d_wr += (double)json_integer_value(json_object_get(o, "delta_hbm_bytes_written"));
}

static json_t *read_json(const char *dir, const char *name)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    json_t *v = NULL;
    struct plena_err e;
    plena_err_clear(&e);
    if (plena_replay_json_read_file(p, &v, &e)) return NULL;
    return v;
}

static void md_cell(struct plena_buf *b, const json_t *v)
{
    char tmp[64];
    if (json_is_string(v))
        plena_buf_puts(b, json_string_value(v));
    else if (json_is_integer(v))
        plena_buf_printf(b, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) {
        plena_json_fmt_double(tmp, sizeof tmp, json_real_value(v));
        plena_buf_puts(b, tmp);
    } else
        plena_buf_puts(b, "");
}

int plena_campaign_report(const struct plena_campaign_set *s, const char *out_dir,
                          const char *config_fingerprint, unsigned max_attempts, int *passed,
                          struct plena_err *err)
{
    *passed = 0;
    unsigned *att = plena_calloc(s->n ? s->n : 1, sizeof *att);
    struct group *g = NULL;
    size_t ng = 0, capg = 0;
    json_t *rep = json_object(), *fails = json_object(), *notes = json_array();
    json_t *sel = NULL, *det = NULL, *width = NULL, *cst = NULL;
    char *svr_note = NULL, *lowering = NULL;
    struct plena_csv csv;
    plena_csv_init(&csv);
    struct plena_buf md;
    plena_buf_init(&md);
    int rc = 0;
    if (!att || !rep) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "report", "out of memory");
        goto out;
    }
    size_t n_lines, torn;
    if ((rc = attempts(s, out_dir, att, &n_lines, &torn, err))) goto out;
    char root[4300];
    snprintf(root, sizeof root, "%s/replay", out_dir);
    size_t pn = 0, ps = 0, failed = 0, given_up = 0, not_run = 0;
    for (size_t k = 0; k < s->n; k++) {
        const struct plena_campaign_trace *t = &s->v[k];
        json_t *res = NULL;
        int r = plena_campaign_result_state(root, t->item.dir_name, t->item.fingerprint, &res);
        int smoke = 0;
        if (res) {
            const char *kind =
                json_string_value(json_object_get(json_object_get(res, "gate"), "kind"));
            smoke = kind && !strcmp(kind, "zero_input_smoke");
            const char *sn = json_string_value(
                json_object_get(json_object_get(res, "notes"), "shared_vs_routed"));
            if (sn && !svr_note) svr_note = plena_strdup(sn);
            const char *lw =
                json_string_value(json_object_get(json_object_get(res, "inputs"), "lowering"));
            if (lw && !lowering) lowering = plena_strdup(lw);
        }
        if (r > 0) {
            if (smoke)
                ps++;
            else
                pn++;
        } else if (att[k] >= (max_attempts ? max_attempts : 3))
            given_up++;
        else if (r == 0 || att[k])
            failed++;
        else
            not_run++;
        if (r == 0) {
            const json_t *f = json_object_get(json_object_get(res, "gate"), "failed");
            size_t i;
            json_t *v;
            json_array_foreach(f, i, v) if (json_is_string(v))
            {
                const char *nm = json_string_value(v);
                json_int_t c = json_integer_value(json_object_get(fails, nm));
                json_object_set_new(fails, nm, json_integer(c + 1));
            }
        }
        json_t *dmf = res ? dmf_row(root, t->item.dir_name, res) : NULL;
        if (res) {
            for (int lvl = 0; lvl < 2; lvl++) {
                struct group *x =
                    group_get(&g, &ng, &capg, t->benchmark, t->phase, lvl ? t->layer : -1);
                if (!x) {
                    json_decref(res);
                    json_decref(dmf);
                    rc = PLENA_FAIL(err, PLENA_E_NOMEM, "report", "out of memory");
                    goto out;
                }
                x->runs++;
                if (dmf) dmf_add(x, dmf);
                if (r > 0) {
                    if (smoke)
                        x->ps++;
                    else
                        x->pn++;
                } else
                    x->failed++;
                int ok;
                double c = num(res, "run", "sim_latency_cycles", &ok);
                if (ok && !plena_grow((void **)&x->cyc, &x->cap_cyc, x->n_cyc + 1, sizeof(double)))
                    x->cyc[x->n_cyc++] = c;
                double tx = num(res, "routing_tax", "routing_tax_fraction", &ok);
                if (ok) x->tax += tx, x->n_tax++;
                double sh = num(res, "shared_vs_routed", "shared_fraction", &ok);
                if (ok) x->shared += sh, x->n_shared++;
                double rd = num(res, "run", "hbm_bytes_read", &ok);
                int ok2;
                double wr = num(res, "run", "hbm_bytes_written", &ok2);
                if (ok && ok2) x->rd += rd, x->wr += wr, x->n_bytes++;
                const json_t *rs = json_object_get(res, "routing_stats");
                if (json_is_object(rs)) {
                    int o1, o2, o3, o4, o5, o6;
                    const double a = num(res, "routing_stats", "active_experts", &o1),
                                 pd = num(res, "routing_stats", "padding_rows", &o2),
                                 u = num(res, "routing_stats", "row_utilisation", &o3),
                                 fe = num(res, "routing_stats", "weight_bytes_fetched", &o4),
                                 id = num(res, "routing_stats", "weight_bytes_ideal", &o5),
                                 gi = json_number_value(json_object_get(
                                     json_object_get(rs, "tokens_per_expert"), "gini"));
                    o6 = json_is_number(
                        json_object_get(json_object_get(rs, "tokens_per_expert"), "gini"));
                    if (o1 && o2 && o3 && o4 && o5 && o6) {
                        x->active += a, x->padding += pd, x->util += u;
                        x->fetched += fe, x->ideal += id, x->gini += gi;
                        x->n_rs++;
                    }
                }
            }
        }
        json_decref(res);
        json_decref(dmf);
    }
    if (ng) qsort(g, ng, sizeof *g, group_cmp);
    json_t *groups = json_array();
    plena_csv_header(&csv, report_cols, N_REPORT_COLS);
    for (size_t i = 0; i < ng; i++) {
        qsort(g[i].cyc, g[i].n_cyc, sizeof(double), dcmp);
        json_t *row = group_row(&g[i]);
        for (size_t c = 0; c < N_REPORT_COLS; c++)
            plena_csv_cell_json(&csv, json_object_get(row, report_cols[c]));
        plena_csv_end_row(&csv);
        json_array_append_new(groups, row);
    }

    /* determinism: bypassed (recorded by run), else the report for this config */
    sel = read_json(out_dir, "selection.json");
    det = read_json(out_dir, "determinism.json");
    width = read_json(out_dir, "width.json");
    cst = read_json(out_dir, "campaign_status.json");
    const char *dstate = "not_run";
    const char *cs = json_string_value(json_object_get(cst, "determinism"));
    const char *dfp = json_string_value(json_object_get(det, "config_fingerprint"));
    if (cs && !strcmp(cs, "bypassed"))
        dstate = "bypassed";
    else if (det && dfp && !strcmp(dfp, config_fingerprint))
        dstate = json_string_value(json_object_get(det, "status"));
    if (!dstate) dstate = "failed";
    int det_ok = !strcmp(dstate, "passed") || !strcmp(dstate, "bypassed");
    *passed = det_ok && pn + ps == s->n && s->n_invalid == 0;

    json_array_append_new(notes, json_string(plena_replay_measurement_note));
    if (svr_note) json_array_append_new(notes, json_string(svr_note));
    {
        char ln[64];
        snprintf(ln, sizeof ln, "routed lowering: %s", lowering ? lowering : "none");
        json_array_append_new(notes, json_string(ln));
    }
    json_array_append_new(notes, json_string(plena_replay_routing_tax_scope));
    json_array_append_new(notes, json_string(decode_note));
    if (!strcmp(dstate, "bypassed"))
        json_array_append_new(notes, json_string("determinism: bypassed (--no-determinism-gate)"));

    json_t *selj = json_object();
    if (sel) {
        const json_t *b = json_object_get(sel, "benchmarks");
        const char *bn;
        json_t *bv;
        json_object_foreach((json_t *)b, bn, bv)
        {
            json_t *strata = json_array();
            size_t i;
            json_t *st;
            json_array_foreach(json_object_get(bv, "strata"), i, st) json_array_append_new(
                strata,
                json_pack("{s:O,s:O,s:O}", "name", json_object_get(st, "name"), "available",
                          json_object_get(st, "available"), "quota", json_object_get(st, "quota")));
            json_object_set_new(selj, bn,
                                json_pack("{s:O,s:O,s:o}", "available",
                                          json_object_get(bv, "available"), "selected",
                                          json_object_get(bv, "selected"), "strata", strata));
        }
    }
    json_t *invalid = json_array();
    for (size_t i = 0; i < s->n_invalid; i++)
        json_array_append_new(invalid, json_string(s->invalid[i]));
    json_object_set_new(rep, "schema_version", json_integer(1));
    json_object_set_new(rep, "plena_version", json_string(PLENA_VERSION));
    json_object_set_new(rep, "config_fingerprint", json_string(config_fingerprint));
    json_object_set_new(rep, "selection", selj);
    json_object_set_new(rep, "coverage", json_null());
    json_object_set_new(rep, "traces",
                        json_pack("{s:I,s:I,s:o}", "total", (json_int_t)s->n, "invalid_skipped",
                                  (json_int_t)s->n_invalid, "invalid", invalid));
    json_object_set_new(rep, "width", width ? json_incref(width) : json_null());
    json_object_set_new(rep, "determinism", json_string(dstate));
    json_object_set_new(rep, "replay",
                        json_pack("{s:I,s:I,s:I,s:I,s:I}", "passed_numerical", (json_int_t)pn,
                                  "passed_smoke", (json_int_t)ps, "failed", (json_int_t)failed,
                                  "given_up", (json_int_t)given_up, "not_run",
                                  (json_int_t)not_run));
    json_object_set_new(rep, "groups", groups);
    json_object_set_new(rep, "failures", json_incref(fails));
    json_object_set_new(rep, "notes", json_incref(notes));
    json_object_set_new(rep, "artifacts",
                        json_pack("{s:s,s:s,s:s,s:s,s:s}", "manifest", "manifest.jsonl", "replay",
                                  "replay/", "determinism", "determinism.json", "report_csv",
                                  "report.csv", "report_md", "report.md"));
    json_object_set_new(rep, "passed", json_boolean(*passed));

    /* report.md: notes verbatim at the top, then the same tables */
    plena_buf_puts(&md, "# plena campaign report\n\n");
    size_t i;
    json_t *v;
    json_array_foreach(notes, i, v) plena_buf_printf(&md, "> %s\n>\n", json_string_value(v));
    plena_buf_printf(&md,
                     "\n**%s**: determinism %s; %zu traces: %zu passed (numerical), %zu passed "
                     "(smoke), %zu failed, %zu given up, %zu not run, %zu invalid skipped.\n\n",
                     *passed ? "PASSED" : "NOT PASSED", dstate, s->n, pn, ps, failed, given_up,
                     not_run, s->n_invalid);
    plena_buf_puts(&md, "|");
    for (size_t c = 0; c < N_REPORT_COLS; c++)
        plena_buf_printf(&md, " %s |", report_cols[c]);
    plena_buf_puts(&md, "\n|");
    for (size_t c = 0; c < N_REPORT_COLS; c++)
        plena_buf_puts(&md, "---|");
    plena_buf_puts(&md, "\n");
    json_array_foreach(groups, i, v)
    {
        plena_buf_puts(&md, "|");
        for (size_t c = 0; c < N_REPORT_COLS; c++) {
            plena_buf_puts(&md, " ");
            md_cell(&md, json_object_get(v, report_cols[c]));
            plena_buf_puts(&md, " |");
        }
        plena_buf_puts(&md, "\n");
    }
    if (json_object_size(fails)) {
        plena_buf_puts(&md, "\n## Failures by check\n\n| check | traces |\n|---|---|\n");
        const char *k;
        json_object_foreach(fails, k, v)
            plena_buf_printf(&md, "| %s | %lld |\n", k, (long long)json_integer_value(v));
    }
    if (md.failed || csv.buf.failed) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "report", "out of memory");
        goto out;
    }
    char p[4300];
    snprintf(p, sizeof p, "%s/report.json", out_dir);
    if ((rc = plena_replay_json_write_file(rep, p, err))) goto out;
    snprintf(p, sizeof p, "%s/report.csv", out_dir);
    if ((rc = plena_file_write_atomic(p, csv.buf.data ? csv.buf.data : "", csv.buf.len, err)))
        goto out;
    snprintf(p, sizeof p, "%s/report.md", out_dir);
    rc = plena_file_write_atomic(p, md.data, md.len, err);
out:
    for (size_t k = 0; k < ng; k++)
        plena_free(g[k].cyc);
    plena_free(g);
    plena_free(att);
    plena_free(svr_note);
    plena_free(lowering);
    json_decref(rep);
    json_decref(fails);
    json_decref(notes);
    json_decref(sel);
    json_decref(det);
    json_decref(width);
    json_decref(cst);
    plena_csv_free(&csv);
    plena_buf_free(&md);
    return rc;
}
