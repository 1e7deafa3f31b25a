/* Run-session pieces that reproduce the upstream emulator's command line
 * (docs/upstream.md): its --hbm-size size parser and the part of its
 * RUST_LOG filter (tracing-subscriber EnvFilter) that decides whether the
 * runner's DEBUG level is on, which is what makes upstream write
 * hbm_dump.bin. Facts from upstream's src/cli.rs and src/runner.rs; the
 * code is plena's. Nothing here prints. */
#include <stdint.h>
#include <string.h>

#include "run/run.h"

static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* Upstream parse_size: trim blanks, digits, then a suffix that is upper-
 * cased and stripped of trailing "IB" runs, then 'B' runs, then 'I' runs
 * (so K, KB, KiB, kib, KIBIB all mean 2^10); "", K, M, G, T remain. */
int plena_run_parse_size(const char *s, uint64_t *out)
{
    if (!s) return -1;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    size_t d = 0;
    uint64_t v = 0;
    while (d < n && s[d] >= '0' && s[d] <= '9') {
        unsigned dig = (unsigned)(s[d] - '0');
        if (v > (UINT64_MAX - dig) / 10) return -1;
        v = v * 10 + dig;
        d++;
    }
    if (d == 0) return -1;
    char suf[32];
    size_t k = n - d;
    if (k >= sizeof suf) return -1;
    for (size_t i = 0; i < k; i++)
        suf[i] = upper(s[d + i]);
    while (k >= 2 && suf[k - 2] == 'I' && suf[k - 1] == 'B')
        k -= 2;
    while (k >= 1 && suf[k - 1] == 'B')
        k--;
    while (k >= 1 && suf[k - 1] == 'I')
        k--;
    unsigned shift;
    if (k == 0)
        shift = 0;
    else if (k == 1 && suf[0] == 'K')
        shift = 10;
    else if (k == 1 && suf[0] == 'M')
        shift = 20;
    else if (k == 1 && suf[0] == 'G')
        shift = 30;
    else if (k == 1 && suf[0] == 'T')
        shift = 40;
    else
        return -1;
    if (shift && v > (UINT64_MAX >> shift)) return -1;
    *out = v << shift;
    return 0;
}

/* tracing's LevelFilter spellings: a digit 0..5 or a name (any case);
 * the empty string is ERROR. OFF 0 .. TRACE 5. */
static int parse_level(const char *s, size_t n, int *lvl)
{
    static const char *const names[] = {"off", "error", "warn", "info", "debug", "trace"};
    if (n == 0) {
        *lvl = 1;
        return 0;
    }
    if (n == 1 && s[0] >= '0' && s[0] <= '5') {
        *lvl = s[0] - '0';
        return 0;
    }
    for (int i = 0; i < 6; i++) {
        size_t m = strlen(names[i]);
        if (m != n) continue;
        size_t j = 0;
        while (j < n && (s[j] | 0x20) == names[i][j])
            j++;
        if (j == n) {
            *lvl = i;
            return 0;
        }
    }
    return -1;
}

int plena_run_log_filter_level(const char *filter, const char *target)
{
    int best = -1, best_has_target = -1, n_parsed = 0;
    size_t best_len = 0;
    const char *p = filter ? filter : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *d = p, *de = p + len;
        p = *de ? de + 1 : de;
        while (d < de && (*d == ' ' || *d == '\t'))
            d++;
        while (de > d && (de[-1] == ' ' || de[-1] == '\t'))
            de--;
        if (d == de) continue; /* empty directives are skipped */
        int lvl;
        /* A bare level is the global default. */
        if (!memchr(d, '=', (size_t)(de - d)) && !parse_level(d, (size_t)(de - d), &lvl)) {
            n_parsed++;
            if (best_has_target <= 0) best = lvl, best_has_target = 0, best_len = 0;
            continue;
        }
        const char *eq = memchr(d, '=', (size_t)(de - d));
        const char *te = eq ? eq : de;
        lvl = 5; /* a target without a level enables everything */
        if (eq && parse_level(eq + 1, (size_t)(de - eq - 1), &lvl)) continue; /* lossy: skip */
        n_parsed++;
        /* Span directives ("t[span]=l") filter inside spans only; the
         * runner's check is outside any span, so they never decide it. */
        if (memchr(d, '[', (size_t)(te - d))) continue;
        size_t tl = (size_t)(te - d);
        if (strncmp(target, d, tl)) continue; /* the target must start with it */
        /* The most specific (longest target) wins; an equal one given later
         * replaces the earlier. */
        if (best_has_target < 1 || tl >= best_len) best = lvl, best_has_target = 1, best_len = tl;
    }
    if (!n_parsed) return -2; /* no directive: upstream's default applies */
    return best < 0 ? 0 : best;
}
