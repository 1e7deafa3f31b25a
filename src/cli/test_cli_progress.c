/* The progress line (cli/progress.h) end to end: shown on a terminal (a
 * pseudo-terminal made by script(1)) once the work has run for a second,
 * never when standard error is a file (so test and golden outputs stay
 * clean), never with --progress none, and with --progress always also into a
 * file, each line rewritten in place ("\r...\033[K") and erased at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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

/* On a pseudo-terminal: none is quiet; auto shows the line when the work
 * took long enough (beyond 2 s it must have). */
static void test_terminal(void **state)
{
    (void)state;
    if (!plena_test_bin() || plena_test_sh("command -v script >/dev/null") != 0) skip();
    char cmd[1024], inner[1200];
    snprintf(cmd, sizeof cmd, MOE, "16", plena_test_tmp);
    snprintf(inner, sizeof inner, "'%s' %s --progress none", plena_test_bin(), cmd);
    assert_int_equal(
        plena_test_sh("cd '%s' && script -qec \"%s\" /dev/null >n.pty", plena_test_tmp, inner), 0);
    char *t = slurp("n.pty");
    assert_null(strstr(t, "plena moe: run"));
    plena_free(t);
    snprintf(inner, sizeof inner, "'%s' %s", plena_test_bin(), cmd);
    double t0 = plena_proc_now();
    assert_int_equal(
        plena_test_sh("cd '%s' && script -qec \"%s\" /dev/null >y.pty", plena_test_tmp, inner), 0);
    double took = plena_proc_now() - t0;
    t = slurp("y.pty");
    if (took > 2.0) assert_non_null(strstr(t, "\rplena moe: run "));
    if (took < 0.9) assert_null(strstr(t, "plena moe: run"));
    plena_free(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_quiet_when_not_a_terminal),
    cmocka_unit_test(test_always_into_a_file),
    cmocka_unit_test(test_terminal),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), plena_test_tmp_setup,
                           plena_test_tmp_teardown);
}
