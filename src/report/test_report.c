/* HTML report (docs/report.md): self-contained (no http:// or https://
 * reference, no script, no external source), the charts' data attributes equal
 * the profile's and the trace's figures exactly, every in-file link resolves,
 * the slowest-traces table is ordered, --svg writes standalone files, and a
 * directory of the wrong kind is rejected naming what was expected. The
 * expected figures come from the profile and trace JSON, read with jansson. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/test_support.h"
#include "report/report.h"

static char tmp[256];
static struct plena_settings g_settings;

/* The first <svg> with data-chart=kind at or after `from`; NULL if none. */
static const char *find_chart(const char *from, const char *kind)
{
    char pat[96];
    snprintf(pat, sizeof pat, "<svg class=\"chart\" data-chart=\"%s\"", kind);
    return strstr(from, pat);
}

/* Sums data-<key> of the elements inside the svg at `svg` carrying data-stage; with
 * a non-NULL stage, only that stage's. */
static unsigned long long sum_in_svg(const char *svg, const char *elem, const char *key,
                                     const char *stage)
{
    const char *end = strstr(svg, "</svg>");
    assert_non_null(end);
    unsigned long long s = 0;
    char pat[32], v[64], st[64];
    snprintf(pat, sizeof pat, "<%s class=", elem);
    for (const char *p = strstr(svg, pat); p && p < end; p = strstr(p + 1, pat)) {
        if (stage && (!plena_test_attr(p, "data-stage", st, sizeof st) || strcmp(st, stage)))
            continue;
        if (plena_test_attr(p, key, v, sizeof v)) s += strtoull(v, NULL, 10);
    }
    return s;
}

static void assert_self_contained(const char *html)
{
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, " src="));
    assert_null(strstr(html, "url("));
    assert_null(strstr(html, "@import"));
    assert_null(strstr(html, "<link"));
}

/* Every href="#x" has an element with id="x". */
static void assert_links_resolve(const char *html, size_t min_links)
{
    size_t n = 0;
    for (const char *p = strstr(html, "href=\"#"); p; p = strstr(p + 1, "href=\"#")) {
        const char *a = p + 7;
        size_t len = strcspn(a, "\"");
        char id[300];
        snprintf(id, sizeof id, " id=\"%.*s\"", (int)len, a);
        assert_non_null(strstr(html, id));
        n++;
    }
    assert_true(n >= min_links);
}

static char *read_rel(const char *name)
{
    char *t = plena_test_read_file(tmp, name, NULL);
    assert_non_null(t);
    return t;
}

static json_t *load_rel(const char *name)
{
    char p[512];
    json_t *j = json_load_file(plena_test_path(p, sizeof p, tmp, name), 0, NULL);
    assert_non_null(j);
    return j;
}

static void report(const char *dir, const char *svg, struct plena_report_summary *sum)
{
    char p[512], s[512];
    struct plena_report_opts o = {plena_test_path(p, sizeof p, tmp, dir), NULL,
                                  svg ? plena_test_path(s, sizeof s, tmp, svg) : NULL, &g_settings};
    struct plena_err err = {0};
    int rc = plena_report_write(&o, sum, &err);
    if (rc) fprintf(stderr, "%s: %s\n", err.where, err.msg);
    assert_int_equal(rc, 0);
}

static void test_build_dir(void **state)
{
    (void)state;
    const char *bin = plena_test_bin();
    if (!bin) skip();
    assert_int_equal(plena_test_sh("cd '%s' && '%s' moe --model tiny-route-32x4 --tokens 4 "
                                   "--routing balanced --profile --out b >b.out 2>&1",
                                   tmp, bin),
                     0);
    struct plena_report_summary sum;
    report("b", "svg", &sum);
    assert_int_equal(sum.kind, PLENA_REPORT_BUILD);
    assert_int_equal(sum.n_layers, 1);
    assert_int_equal(sum.n_svg_files, 3); /* stage cycles, stage bytes, roofline */
    char *html = read_rel("b/report.html");
    assert_self_contained(html);
    json_t *prof = load_rel("b/stage_profile.json");
    /* stage bar: every segment is the profile's wall_picos, the total its total */
    const char *svg = find_chart(html, "stage-cycles");
    assert_non_null(svg);
    char v[64];
    json_int_t total = json_integer_value(json_object_get(prof, "total_profiled_picos"));
    assert_true(total > 0);
    assert_int_equal(strtoull(plena_test_attr(svg, "data-total", v, sizeof v), NULL, 10), total);
    assert_int_equal(sum_in_svg(svg, "rect", "data-value", NULL), total);
    const char *k;
    json_t *st;
    const char *bytes_svg = find_chart(html, "stage-hbm-bytes");
    const char *roof = find_chart(html, "roofline");
    assert_non_null(bytes_svg);
    assert_non_null(roof);
    json_object_foreach(json_object_get(prof, "stages"), k, st)
    {
        json_int_t ps = json_integer_value(json_object_get(st, "wall_picos"));
        json_int_t by = json_integer_value(json_object_get(st, "hbm_bytes_read")) +
                        json_integer_value(json_object_get(st, "hbm_bytes_written"));
        assert_int_equal(sum_in_svg(svg, "rect", "data-value", k), ps);
        assert_int_equal(sum_in_svg(bytes_svg, "rect", "data-value", k), by);
        /* roofline: MACs = matrix cycles x MLEN x BLEN, cycles = the stage's */
        json_int_t mc = json_integer_value(
            json_object_get(json_object_get(st, "resource_proxy_cycles"), "matrix"));
        json_int_t wc = json_integer_value(json_object_get(st, "wall_cycles"));
        if (mc > 0) {
            assert_int_equal(sum_in_svg(roof, "circle", "data-macs", k),
                             (unsigned long long)mc * g_settings.mlen * g_settings.blen);
            assert_int_equal(sum_in_svg(roof, "circle", "data-cycles", k), wc);
        } else {
            assert_int_equal(sum_in_svg(roof, "circle", "data-cycles", k), 0);
        }
    }
    /* the shared-vs-routed caveat and routing_stats are there */
    assert_non_null(strstr(html, "class=\"caveat\""));
    assert_non_null(strstr(html, "data-table=\"routing-stats\""));
    /* --svg: standalone files with the namespace */
    char name[300];
    snprintf(name, sizeof name, "svg/t-b-roofline.svg");
    char *f = read_rel(name);
    assert_true(!strncmp(f, "<?xml", 5));
    assert_non_null(strstr(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\""));
    plena_free(f);
    json_decref(prof);
    plena_free(html);
}

static void test_replay_dir(void **state)
{
    (void)state;
    const char *bin = plena_test_bin();
    if (!bin) skip();
    assert_int_equal(
        plena_test_sh("cd '%s' && for s in 7 8 9; do '%s' trace gen --model tiny-route-32x4 "
                      "--tokens $((4 * s)) --dist zipf:1.2 --seed $s > t$s.json || exit 1; done && "
                      "'%s' replay t7.json t8.json t9.json --out r --timeline >r.out 2>&1",
                      tmp, bin, bin),
        0);
    struct plena_report_summary sum;
    report("r", NULL, &sum);
    assert_int_equal(sum.kind, PLENA_REPORT_REPLAY);
    assert_int_equal(sum.n_layers, 3);
    char *html = read_rel("r/report.html");
    assert_self_contained(html);
    assert_links_resolve(html, 6); /* slowest table and index: 3 each */
    /* slowest first */
    const char *t = strstr(html, "data-table=\"slowest\"");
    assert_non_null(t);
    unsigned long long prev = UINT64_MAX;
    int rows = 0;
    char v[64];
    for (const char *p = strstr(t, "<tr data-cycles="); p && rows < 3;
         p = strstr(p + 1, "<tr data-cycles="), rows++) {
        unsigned long long c = strtoull(plena_test_attr(p, "data-cycles", v, sizeof v), NULL, 10);
        assert_true(c > 0 && c <= prev);
        prev = c;
    }
    assert_int_equal(rows, 3);
    /* the histogram of each trace sums to its expert_counts */
    json_t *tr = load_rel("t8.json");
    char id[200];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(tr, "trace_id")));
    json_t *counts = json_object_get(json_object_get(tr, "routing"), "expert_counts");
    unsigned long long want = 0;
    size_t i;
    json_t *c;
    json_array_foreach(counts, i, c) want += (unsigned long long)json_integer_value(c);
    char pat[300];
    snprintf(pat, sizeof pat, "data-layer=\"%s\"", id);
    const char *sec = strstr(html, pat);
    assert_non_null(sec);
    const char *h = find_chart(sec, "tokens-per-expert");
    assert_non_null(h);
    const char *end = strstr(h, "</svg>");
    unsigned long long got = 0;
    for (const char *p = strstr(h, "<rect class=\"bar\""); p && p < end;
         p = strstr(p + 1, "<rect class=\"bar\""))
        got += strtoull(plena_test_attr(p, "data-tokens", v, sizeof v), NULL, 10);
    assert_int_equal(got, want);
    assert_true(want > 0);
    json_decref(tr);
    plena_free(html);

    /* replay --timeline: each trace's timeline, for its gated run */
    char rel[400];
    snprintf(rel, sizeof rel, "r/%s/timeline.json", id);
    json_t *tl = load_rel(rel);
    snprintf(rel, sizeof rel, "r/%s/results.json", id);
    json_t *res = load_rel(rel);
    const json_t *od = json_object_get(tl, "otherData");
    assert_int_equal(
        json_integer_value(json_object_get(od, "serial_picos")),
        json_integer_value(json_object_get(json_object_get(res, "run"), "serial_latency_picos")));
    assert_true(json_array_size(json_object_get(tl, "traceEvents")) > 10);
    json_decref(tl);
    json_decref(res);

    /* the same traces as a campaign directory (replay/ and report.json) */
    assert_int_equal(plena_test_sh("cd '%s' && mkdir -p c && cp -r r c/replay", tmp), 0);
    plena_test_write_text(tmp, "c/report.json",
                          "{\"determinism\": \"passed\", \"passed\": true, \"selection\": "
                          "{\"synthetic\": {\"strata\": [{\"name\": \"zipf-stratum\", "
                          "\"available\": 3, \"quota\": 2}]}}}");
    report("c", NULL, &sum);
    assert_int_equal(sum.kind, PLENA_REPORT_CAMPAIGN);
    assert_int_equal(sum.n_layers, 3);
    html = read_rel("c/report.html");
    assert_self_contained(html);
    assert_links_resolve(html, 6);
    const char *strata = strstr(html, "data-table=\"strata\"");
    assert_non_null(strata);
    assert_non_null(strstr(strata, "<td>zipf-stratum</td><td>3</td><td>2</td>"));
    assert_non_null(strstr(html, "data-determinism=\"passed\""));
    plena_free(html);
}

static void test_rejects_other_dirs(void **state)
{
    (void)state;
    char p[512];
    assert_int_equal(plena_test_sh("mkdir -p '%s/empty'", tmp), 0);
    struct plena_report_opts o = {plena_test_path(p, sizeof p, tmp, "empty"), NULL, NULL,
                                  &g_settings};
    struct plena_report_summary sum;
    struct plena_err err = {0};
    assert_int_equal(plena_report_write(&o, &sum, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "expected a build directory with stage_profile.json"));
    assert_non_null(strstr(err.where, "empty"));
}

static void test_roofs(void **state)
{
    (void)state;
    /* MLEN x BLEN MACs per cycle; 64 B per pseudo-channel per nBL tCK */
    assert_true(plena_report_peak_macs_per_cycle(&g_settings) ==
                (double)g_settings.mlen * g_settings.blen);
    const struct plena_hbm_params *h = &g_settings.hbm;
    double want = (double)h->channels * h->pseudo_channels * 64.0 /
                  ((double)h->nBL * (double)h->tck_ps) * (double)g_settings.clock_period_ps;
    assert_true(plena_report_peak_bytes_per_cycle(&g_settings) == want);
    assert_true(want > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roofs), cmocka_unit_test(test_rejects_other_dirs),
        cmocka_unit_test(test_build_dir), cmocka_unit_test(test_replay_dir)};
    if (plena_test_mkdtemp(tmp, sizeof tmp, "test_report")) return 1;
    plena_settings_reference(&g_settings);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    plena_test_rmtree(tmp);
    return failed;
}
