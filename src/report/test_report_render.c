/* The report as a browser shows it (docs/report.md "Rendering test"): a
 * build directory's report.html is rendered by headless Chromium (Debian's
 * package, installed by scripts/setup.sh) from a file:// URL with every host
 * name unresolvable (offline), into a PNG screenshot and a dump of the DOM it
 * parsed. The test fails on
 *   - a JavaScript error or any console message (the report has no script:
 *     the DOM must hold no <script> either),
 *   - a blank page: the PNG is decoded here (zlib inflate, PNG row filters)
 *     and must have the window's size, many colours and ink on it,
 *   - a chart whose numbers disagree with the profile: the stage bars'
 *     data attributes in the parsed DOM equal stage_profile.json's per-stage
 *     picoseconds, cycles and HBM bytes exactly, and the widest bar segment
 *     is drawn in the screenshot as a run of its colour whose length is its
 *     share of the bar (within 2 pixels).
 * The screenshot is kept as $PLENA_BINARY_DIR/report_render.png (the README's
 * picture, docs/img/report.png, is a copy of it). A second test: the report
 * of a 40-trace campaign is one file under 5 MB that renders the same way
 * (no console message, not blank, 40 sections, every link resolving). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/test_support.h"

enum { WIN_W = 900, WIN_H = 1800 };

static char tmp[256];

/* ---- a minimal PNG reader: 8-bit RGB or RGBA, not interlaced ---- */

struct img {
    uint32_t w, h, ch;
    unsigned char *px; /* h rows of w * ch bytes */
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* 0, or -1 with the reason in why */
static int png_decode(const unsigned char *d, size_t n, struct img *im, const char **why)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memset(im, 0, sizeof *im);
    if (n < 8 || memcmp(d, sig, 8)) return *why = "no PNG signature", -1;
    unsigned char *z = NULL;
    size_t zn = 0, at = 8;
    int ihdr = 0, iend = 0;
    while (!iend && at + 12 <= n) {
        uint32_t len = be32(d + at);
        if (len > n - at - 12) break;
        const unsigned char *type = d + at + 4, *data = d + at + 8;
        if (crc32(crc32(0, NULL, 0), type, len + 4) != be32(data + len)) {
            plena_free(z);
            return *why = "chunk CRC mismatch", -1;
        }
        if (!memcmp(type, "IHDR", 4) && len == 13) {
            im->w = be32(data), im->h = be32(data + 4);
            if (data[8] != 8 || (data[9] != 2 && data[9] != 6) || data[12] != 0) {
                plena_free(z);
                return *why = "not 8-bit RGB/RGBA non-interlaced", -1;
            }
            im->ch = data[9] == 6 ? 4 : 3;
            ihdr = 1;
        } else if (!memcmp(type, "IDAT", 4)) {
            unsigned char *nz = plena_realloc(z, zn + len + 1);
            if (!nz) break;
            z = nz;
            memcpy(z + zn, data, len);
            zn += len;
        } else if (!memcmp(type, "IEND", 4)) {
            iend = 1;
        }
        at += 12 + (size_t)len;
    }
    if (!ihdr || !iend || !zn || !im->w || !im->h || im->w > 16384 || im->h > 16384) {
        plena_free(z);
        return *why = "missing IHDR, IDAT or IEND", -1;
    }
    const size_t stride = (size_t)im->w * im->ch;
    uLongf rawn = (uLongf)((stride + 1) * im->h);
    unsigned char *raw = plena_malloc(rawn);
    im->px = plena_malloc(stride * im->h);
    int zrc = raw && im->px ? uncompress(raw, &rawn, z, (uLong)zn) : Z_MEM_ERROR;
    plena_free(z);
    if (zrc != Z_OK || rawn != (stride + 1) * im->h) {
        plena_free(raw);
        plena_free(im->px);
        im->px = NULL;
        return *why = "IDAT does not inflate to the image size", -1;
    }
    for (uint32_t y = 0; y < im->h; y++) {
        const unsigned char f = raw[y * (stride + 1)], *s = raw + y * (stride + 1) + 1;
        unsigned char *o = im->px + y * stride, *up = y ? o - stride : NULL;
        for (size_t x = 0; x < stride; x++) {
            int a = x >= im->ch ? o[x - im->ch] : 0, b = up ? up[x] : 0;
            int c = up && x >= im->ch ? up[x - im->ch] : 0;
            int p = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : paeth(a, b, c);
            if (f > 4) {
                plena_free(raw);
                return *why = "bad row filter", -1;
            }
            o[x] = (unsigned char)(s[x] + p);
        }
    }
    plena_free(raw);
    return 0;
}

static const unsigned char *pixel(const struct img *im, uint32_t x, uint32_t y)
{
    return im->px + ((size_t)y * im->w + x) * im->ch;
}

/* CSS hsl(h, s%, l%) -> 8-bit RGB (CSS Color 3's formula, written here) */
static void hsl_rgb(double h, double s, double l, int rgb[3])
{
    double c = (1 - fabs(2 * l - 1)) * s, hp = fmod(h, 360) / 60;
    double x = c * (1 - fabs(fmod(hp, 2) - 1)), m = l - c / 2, r = 0, g = 0, b = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, b = x;
    else if (hp < 4)
        g = x, b = c;
    else if (hp < 5)
        r = x, b = c;
    else
        r = c, b = x;
    rgb[0] = (int)lround((r + m) * 255), rgb[1] = (int)lround((g + m) * 255);
    rgb[2] = (int)lround((b + m) * 255);
}

/* the longest horizontal run of pixels within 3 of rgb, over all rows */
static uint32_t longest_run(const struct img *im, const int rgb[3])
{
    uint32_t best = 0;
    for (uint32_t y = 0; y < im->h; y++) {
        uint32_t run = 0;
        for (uint32_t x = 0; x < im->w; x++) {
            const unsigned char *p = pixel(im, x, y);
            int near =
                abs(p[0] - rgb[0]) <= 3 && abs(p[1] - rgb[1]) <= 3 && abs(p[2] - rgb[2]) <= 3;
            run = near ? run + 1 : 0;
            if (run > best) best = run;
        }
    }
    return best;
}

/* ---- the DOM Chromium parsed ---- */

static const char *chart(const char *dom, const char *kind)
{
    char pat[96];
    snprintf(pat, sizeof pat, "<svg class=\"chart\" data-chart=\"%s\"", kind);
    return strstr(dom, pat);
}

/* Renders tmp/page (relative) in headless Chromium into tmp/TAG.png and the
 * parsed DOM (returned; plena_free); fails on a non-zero exit, any console
 * message (an uncaught JavaScript error is one) or a <script> in the DOM.
 * A fresh profile directory and HOME: works where chromium never ran; every
 * host name unresolvable: the page must not need the network. */
static char *render(const char *page, const char *tag)
{
    if (plena_test_sh("command -v chromium >/dev/null") != 0)
        fail_msg("chromium not found: scripts/setup.sh installs it (run it as root)");
    int rc = plena_test_sh(
        "cd '%s' && mkdir -p home && HOME='%s/home' XDG_CONFIG_HOME='%s/home' "
        "XDG_CACHE_HOME='%s/home' timeout -k 5 60 chromium --headless --no-sandbox "
        "--disable-gpu --user-data-dir='%s/profile-%s' --no-first-run --hide-scrollbars "
        "--force-device-scale-factor=1 --host-resolver-rules='MAP * ~NOTFOUND' "
        "--enable-logging=stderr --v=0 --window-size=%d,%d --screenshot='%s/%s.png' "
        "--dump-dom 'file://%s/%s' >%s.dom 2>%s.err",
        tmp, tmp, tmp, tmp, tmp, tag, WIN_W, WIN_H, tmp, tag, tmp, page, tag, tag);
    char name[64];
    snprintf(name, sizeof name, "%s.err", tag);
    char *err = plena_test_read_file(tmp, name, NULL);
    assert_non_null(err);
    if (rc) {
        fprintf(stderr, "%s", err);
        fail_msg("chromium exited with %d", rc);
    }
    if (strstr(err, ":CONSOLE") || strstr(err, "Uncaught")) {
        fprintf(stderr, "%s", err);
        fail_msg("%s: the page wrote to the JavaScript console", page);
    }
    plena_free(err);
    snprintf(name, sizeof name, "%s.dom", tag);
    char *dom = plena_test_read_file(tmp, name, NULL);
    assert_non_null(dom);
    assert_null(strstr(dom, "<script"));
    assert_non_null(strstr(dom, "</html>"));
    return dom;
}

/* Decodes tmp/TAG.png into im (free im->px) and fails unless it has the
 * window's size and is not blank: many colours, and ink on more than 2 % of
 * the page. Returns the number of colours. */
static size_t shot(const char *tag, struct img *im)
{
    char name[64];
    snprintf(name, sizeof name, "%s.png", tag);
    size_t pn = 0;
    unsigned char *png = (unsigned char *)plena_test_read_file(tmp, name, &pn);
    assert_non_null(png);
    const char *why = "";
    if (png_decode(png, pn, im, &why)) fail_msg("%s: %s", name, why);
    plena_free(png);
    assert_int_equal(im->w, WIN_W);
    assert_int_equal(im->h, WIN_H);
    unsigned char *seen = plena_calloc((size_t)1 << 21, 1);
    assert_non_null(seen);
    size_t colours = 0, ink = 0;
    const unsigned char *bg = pixel(im, 0, 0);
    for (uint32_t y = 0; y < im->h; y++)
        for (uint32_t x = 0; x < im->w; x++) {
            const unsigned char *q = pixel(im, x, y);
            uint32_t c = (uint32_t)q[0] << 16 | (uint32_t)q[1] << 8 | q[2];
            if (!(seen[c >> 3] & (1u << (c & 7))))
                seen[c >> 3] |= (unsigned char)(1u << (c & 7)), colours++;
            ink += q[0] != bg[0] || q[1] != bg[1] || q[2] != bg[2];
        }
    plena_free(seen);
    if (colours < 32 || ink * 50 < (size_t)im->w * im->h)
        fail_msg("%s: blank page: %zu colours, %zu of %u pixels differ from the background", name,
                 colours, ink, im->w * im->h);
    return colours;
}

/* Every stage bar segment of the chart at svg: its stage is in the profile
 * with data-value == want(stage), each stage with a non-zero value has
 * exactly one segment; returns the number of segments. */
static size_t check_segments(const char *svg, json_t *stages, int bytes, json_int_t clock_ps)
{
    const char *end = strstr(svg, "</svg>");
    assert_non_null(end);
    size_t n = 0, nonzero = 0;
    char st[128], v[64];
    const char *k;
    json_t *s;
    json_object_foreach(stages, k, s)
    {
        json_int_t want = bytes ? json_integer_value(json_object_get(s, "hbm_bytes_read")) +
                                      json_integer_value(json_object_get(s, "hbm_bytes_written"))
                                : json_integer_value(json_object_get(s, "wall_picos"));
        nonzero += want != 0;
    }
    for (const char *p = strstr(svg, "<rect class=\"seg\""); p && p < end;
         p = strstr(p + 1, "<rect class=\"seg\"")) {
        assert_non_null(plena_test_attr(p, "data-stage", st, sizeof st));
        assert_non_null(plena_test_attr(p, "data-value", v, sizeof v));
        json_t *s = json_object_get(stages, st);
        if (!s) fail_msg("segment of a stage not in the profile: %s", st);
        unsigned long long got = strtoull(v, NULL, 10);
        if (bytes) {
            json_int_t want = json_integer_value(json_object_get(s, "hbm_bytes_read")) +
                              json_integer_value(json_object_get(s, "hbm_bytes_written"));
            if (got != (unsigned long long)want)
                fail_msg("%s: HBM bytes %llu in the chart, %lld in the profile", st, got,
                         (long long)want);
        } else {
            json_int_t ps = json_integer_value(json_object_get(s, "wall_picos"));
            json_int_t cy = json_integer_value(json_object_get(s, "wall_cycles"));
            if (got != (unsigned long long)ps ||
                got / (unsigned long long)clock_ps != (unsigned long long)cy)
                fail_msg("%s: %llu picos in the chart, %lld picos (%lld cycles) in the profile", st,
                         got, (long long)ps, (long long)cy);
        }
        n++;
    }
    if (n != nonzero) fail_msg("%zu segments, %zu stages with a non-zero value", n, nonzero);
    return n;
}

static void test_render(void **state)
{
    (void)state;
    const char *bin = plena_test_bin();
    if (!bin) skip();
    if (plena_test_sh("command -v chromium >/dev/null") != 0)
        fail_msg("chromium not found: scripts/setup.sh installs it (run it as root)");
    assert_int_equal(
        plena_test_sh("cd '%s' && '%s' moe --model deepseek-v2-lite-mini --tokens 4 "
                      "--profile --out demo >moe.out 2>&1 && '%s' report demo >rep.out 2>&1",
                      tmp, bin, bin),
        0);
    char *dom = render("demo/report.html", "demo");

    /* the numbers the browser parsed are the profile's */
    char p[512];
    json_t *prof =
        json_load_file(plena_test_path(p, sizeof p, tmp, "demo/stage_profile.json"), 0, NULL);
    assert_non_null(prof);
    json_t *stages = json_object_get(prof, "stages");
    json_int_t clock_ps = json_integer_value(json_object_get(prof, "clock_period_ps"));
    json_int_t total = json_integer_value(json_object_get(prof, "total_profiled_picos"));
    assert_true(clock_ps > 0 && total > 0);
    const char *cyc = chart(dom, "stage-cycles"), *by = chart(dom, "stage-hbm-bytes");
    assert_non_null(cyc);
    assert_non_null(by);
    char v[128];
    assert_non_null(plena_test_attr(cyc, "data-total", v, sizeof v));
    assert_int_equal(strtoull(v, NULL, 10), total);
    assert_true(check_segments(cyc, stages, 0, clock_ps) >= 5);
    assert_true(check_segments(by, stages, 1, clock_ps) >= 2);

    /* the bar's geometry: every segment's width is its share of the profile's
     * total (to the 0.01 of the printed widths), and the widest one is drawn
     * in the screenshot as a run of its colour that long */
    const char *end = strstr(cyc, "</svg>");
    double bar = 0, widths[64], top_w = 0;
    json_int_t vals[64], top = -1;
    size_t nseg = 0;
    char fill[64] = "";
    for (const char *q = strstr(cyc, "<rect class=\"seg\""); q && q < end && nseg < 64;
         q = strstr(q + 1, "<rect class=\"seg\"")) {
        char st[128], w[64];
        assert_non_null(plena_test_attr(q, "data-stage", st, sizeof st));
        assert_non_null(plena_test_attr(q, "width", w, sizeof w));
        widths[nseg] = strtod(w, NULL);
        bar += widths[nseg];
        vals[nseg] = json_integer_value(json_object_get(json_object_get(stages, st), "wall_picos"));
        if (vals[nseg] > top) {
            top = vals[nseg], top_w = widths[nseg];
            assert_non_null(plena_test_attr(q, "fill", fill, sizeof fill));
        }
        nseg++;
    }
    for (size_t i = 0; i < nseg; i++) {
        double want = bar * (double)vals[i] / (double)total;
        if (fabs(widths[i] - want) > 0.05)
            fail_msg("segment %zu: width %.2f, its share of the bar is %.2f", i, widths[i], want);
    }
    double h, s, l;
    if (sscanf(fill, "hsl(%lf,%lf%%,%lf%%)", &h, &s, &l) != 3)
        fail_msg("segment fill '%s' is not hsl(h,s%%,l%%)", fill);
    int rgb[3];
    hsl_rgb(h, s / 100, l / 100, rgb);

    struct img im;
    size_t colours = shot("demo", &im);
    double want = bar * (double)top / (double)total;
    uint32_t run = longest_run(&im, rgb);
    if (getenv("PLENA_TEST_VERBOSE"))
        fprintf(stderr, "widest segment: %u pixels drawn, width %.2f, share %.2f; %zu colours\n",
                run, top_w, want, colours);
    if (fabs((double)run - top_w) > 2.0)
        fail_msg("widest stage segment (%s, rgb %d,%d,%d): %u pixels drawn, width %.2f", fill,
                 rgb[0], rgb[1], rgb[2], run, top_w);
    plena_free(im.px);
    plena_free(dom);
    json_decref(prof);
    /* keep the picture (the README's docs/img/report.png is a copy) */
    plena_test_sh("cp '%s/demo.png' '%s/report_render.png'", tmp, PLENA_BINARY_DIR);
}

/* A campaign of 40 traces (tiny-route-32x4, T = 4..11, no determinism gate:
 * the gate is not what is measured) gives one report file under 5 MB that
 * opens offline: no console message, not blank, a section per trace, every
 * in-page link resolving in the parsed DOM. */
static void test_campaign(void **state)
{
    (void)state;
    const char *bin = plena_test_bin();
    if (!bin) skip();
    assert_int_equal(
        plena_test_sh("cd '%s' && mkdir -p ct && for s in $(seq 1 40); do '%s' trace gen "
                      "--model tiny-route-32x4 --tokens $((4 + s %% 8)) --dist zipf:1.2 --seed $s "
                      ">ct/t$s.json || exit 1; done && '%s' campaign run --traces ct --out camp "
                      "--jobs 2 --no-determinism-gate >camp.out 2>&1 && '%s' campaign report "
                      "--traces ct --out camp >>camp.out 2>&1 && '%s' report camp >>camp.out 2>&1",
                      tmp, bin, bin, bin, bin),
        0);
    size_t n = 0;
    char *html = plena_test_read_file(tmp, "camp/report.html", &n);
    assert_non_null(html);
    plena_free(html);
    if (n >= 5000000) fail_msg("campaign report of 40 traces: %zu bytes (limit 5000000)", n);
    if (getenv("PLENA_TEST_VERBOSE")) fprintf(stderr, "campaign report: %zu bytes\n", n);
    char *dom = render("camp/report.html", "camp");
    size_t sections = 0, links = 0;
    for (const char *q = strstr(dom, "<section id=\"t-"); q; q = strstr(q + 1, "<section id=\"t-"))
        sections++;
    assert_int_equal(sections, 40);
    for (const char *q = strstr(dom, "href=\"#"); q; q = strstr(q + 1, "href=\"#"), links++) {
        char id[300];
        snprintf(id, sizeof id, " id=\"%.*s\"", (int)strcspn(q + 7, "\""), q + 7);
        if (!strstr(dom, id)) fail_msg("link %.60s has no target", q);
    }
    assert_true(links >= 40);
    plena_free(dom);
    struct img im;
    shot("camp", &im);
    plena_free(im.px);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_render),
                                       cmocka_unit_test(test_campaign)};
    if (plena_test_mkdtemp(tmp, sizeof tmp, "test_report_render")) return 1;
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    plena_test_rmtree(tmp);
    return failed;
}
