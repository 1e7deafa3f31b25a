/* The progress line (cli/progress.h) end to end: shown on a terminal (a
 * pseudo-terminal made by script(1)) once the work has run for a second,
 * never when standard error is a file (so test and golden outputs stay
 * clean), never with --progress none, and with --progress always also into a
 * file, each line rewritten in place ("\r...\033[K") and erased at the end;
 * for plena moe (instructions) and plena trace route (tokens). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/proc.h"
#include "common/test_support.h"

static const char *MOE = "moe --model deepseek-v2-lite-mini --tokens %s --out %s/b";

static int moe(const char *tokens, const char *extra, const char *redirect)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, MOE, tokens, plena_test_tmp);
    return plena_test_sh("cd '%s' && '%s' %s %s %s", plena_test_tmp, plena_test_bin(), cmd, extra,
                         redirect);
}

static char *slurp(const char *name)
{
    char *t = plena_test_read_file(plena_test_tmp, name, NULL);
    assert_non_null(t);
    return t;
}

static void test_quiet_when_not_a_terminal(void **state)
{
    (void)state;
    if (!plena_test_bin()) skip();
    assert_int_equal(moe("4", "", ">q.out 2>q.err"), 0);
    char *e = slurp("q.err");
    assert_null(strstr(e, "plena moe: run"));
    assert_null(strchr(e, '\r'));
    plena_free(e);
}

static void test_always_into_a_file(void **state)
{
    (void)state;
    if (!plena_test_bin()) skip();
    assert_int_equal(moe("4", "--progress always", ">a.out 2>a.err"), 0);
    char *e = slurp("a.err");
    /* the first update: 65536 instructions of the predicted count */
    const char *l = strstr(e, "\rplena moe: run 65536/");
    assert_non_null(l);
    assert_non_null(strstr(l, " instructions ("));
    assert_non_null(strstr(l, "| ETA "));
    assert_non_null(strstr(l, "\033[K"));
    /* erased at the end, before the results */
    size_t n = strlen(e);
    assert_true(n >= 4 && !strcmp(e + n - 4, "\r\033[K"));
    plena_free(e);
    /* standard output is untouched */
    char *o = slurp("a.out");
    assert_null(strchr(o, '\r'));
    plena_free(o);
}

/* On a pseudo-terminal: `inner --progress none` never shows `line`; `inner`
 * (auto) shows "\r<line>" when it took over must_s seconds and nothing when
 * it took under 0.9 s. */
static void pty_check(const char *inner, const char *line, double must_s)
{
    assert_int_equal(plena_test_sh("cd '%s' && script -qec \"%s --progress none\" /dev/null >n.pty",
                                   plena_test_tmp, inner),
                     0);
    char *t = slurp("n.pty");
    assert_null(strstr(t, line));
    plena_free(t);
    double t0 = plena_proc_now();
    assert_int_equal(
        plena_test_sh("cd '%s' && script -qec \"%s\" /dev/null >y.pty", plena_test_tmp, inner), 0);
    double took = plena_proc_now() - t0;
    t = slurp("y.pty");
    char want[128];
    snprintf(want, sizeof want, "\r%s", line);
    if (took > must_s) assert_non_null(strstr(t, want));
    if (took < 0.9) assert_null(strstr(t, line));
    plena_free(t);
}

/* On a pseudo-terminal: none is quiet; auto shows the line when the work
 * took long enough (beyond 2 s it must have). */
static void test_terminal(void **state)
{
    (void)state;
    if (!plena_test_bin() || plena_test_sh("command -v script >/dev/null") != 0) skip();
    char cmd[1024], inner[1200];
    snprintf(cmd, sizeof cmd, MOE, "16", plena_test_tmp);
    snprintf(inner, sizeof inner, "'%s' %s", plena_test_bin(), cmd);
    pty_check(inner, "plena moe: run ", 2.0);
}

/* plena trace route over the tiny checkpoint: tokens = every sample's
 * prompt plus its decode steps, counted here from inputs.jsonl */
static int route(const char *steps, const char *extra, const char *redirect)
{
    return plena_test_sh("cd '%s' && '%s' trace route --checkpoint ck --inputs ck/inputs.jsonl "
                         "--out rows.jsonl --overwrite --phases both --decode-steps %s %s %s",
                         plena_test_tmp, plena_test_bin(), steps, extra, redirect);
}

static unsigned long long prompt_tokens(size_t *samples)
{
    char *t = slurp("ck/inputs.jsonl");
    unsigned long long n = 0;
    *samples = 0;
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        n += json_array_size(json_object_get(o, "input_ids"));
        (*samples)++;
        json_decref(o);
    }
    plena_free(t);
    return n;
}

static void test_route(void **state)
{
    (void)state;
    if (!plena_test_bin()) skip();
    assert_int_equal(plena_test_sh("cd '%s' && '%s' trace tiny-checkpoint --out ck >ck.out 2>&1",
                                   plena_test_tmp, plena_test_bin()),
                     0);
    size_t samples;
    unsigned long long total = prompt_tokens(&samples) + 3 * samples;
    assert_true(samples >= 2);
    /* not a terminal: quiet */
    assert_int_equal(route("3", "", ">rq.out 2>rq.err"), 0);
    char *e = slurp("rq.err");
    assert_null(strchr(e, '\r'));
    plena_free(e);
    /* always: the first update announces the total, the line is erased before the summary */
    assert_int_equal(route("3", "--progress always", ">ra.out 2>ra.err"), 0);
    e = slurp("ra.err");
    char want[128];
    snprintf(want, sizeof want, "\rplena trace route: route 0/%llu tokens (0.0%%) | ", total);
    const char *l = strstr(e, want);
    assert_non_null(l);
    assert_non_null(strstr(l, "| ETA "));
    assert_non_null(strstr(l, "\r\033[Kplena trace route: "));
    plena_free(e);
    /* a pseudo-terminal: none is quiet; auto shows the line once the run takes over a
     * second (one prompt of 4000 tokens: about 1.5 CPU s, prefill blocks of 32) */
    if (plena_test_sh("command -v script >/dev/null") != 0) return;
    char *ids = plena_malloc(4000 * 4 + 128);
    assert_non_null(ids);
    size_t n =
        (size_t)sprintf(ids, "{\"benchmark\":\"tiny\",\"sample_id\":\"long\",\"input_ids\":[");
    for (unsigned i = 0; i < 4000; i++)
        n += (size_t)sprintf(ids + n, "%s%u", i ? "," : "", i * 7 % 100);
    sprintf(ids + n, "]}\n");
    plena_test_write_text(plena_test_tmp, "long.jsonl", ids);
    plena_free(ids);
    char inner[1200];
    snprintf(inner, sizeof inner,
             "'%s' trace route --checkpoint ck --inputs long.jsonl --out rows.jsonl --overwrite",
             plena_test_bin());
    pty_check(inner, "plena trace route: route ", 1.5);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_quiet_when_not_a_terminal),
    cmocka_unit_test(test_always_into_a_file),
    cmocka_unit_test(test_terminal),
    cmocka_unit_test(test_route),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), plena_test_tmp_setup,
                           plena_test_tmp_teardown);
}
