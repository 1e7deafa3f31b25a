/* The process pool (common/proc.h): every job runs once with at most
 * `width` at once, exit codes and signals are reported per job, a prepare
 * error stops dispatch after reaping what runs, and a stop request sends
 * SIGTERM to the running jobs (reported as interrupted). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cmocka.h>

#include "common/proc.h"
#include "common/test_support.h"

#define N 6

struct ctx {
    int codes[N], signals[N], done[N], interrupted[N];
    unsigned max_slot;
    size_t max_running;
    int fail_prepare_at; /* -1: never */
    int sleep_forever;
    volatile sig_atomic_t stop;
    int ticks;
};

static int prepare(void *p, size_t i, struct plena_err *err)
{
    struct ctx *c = p;
    if ((int)i == c->fail_prepare_at) return PLENA_FAIL(err, PLENA_E_OUTPUT, "x", "refused");
    return 0;
}

static int child(void *p, size_t i)
{
    struct ctx *c = p;
    if (c->sleep_forever)
        for (;;)
            pause();
    if (i == 3) raise(SIGKILL);
    return (int)i + 10;
}

static void done(void *p, size_t i, const struct plena_proc_exit *e)
{
    struct ctx *c = p;
    c->done[i]++;
    c->codes[i] = e->exit_code;
    c->signals[i] = e->signal;
    c->interrupted[i] = e->interrupted;
    if (e->slot > c->max_slot) c->max_slot = e->slot;
}

static void tick(void *p, size_t n_running, size_t n_dispatched)
{
    struct ctx *c = p;
    (void)n_dispatched;
    if (n_running > c->max_running) c->max_running = n_running;
    if (c->sleep_forever && ++c->ticks == 20) c->stop = 1;
}

static void run(struct ctx *c, unsigned width, int *interrupted, int expect_rc)
{
    struct plena_proc_pool p = {.n_jobs = N,
                                .width = width,
                                .stop = &c->stop,
                                .prepare = prepare,
                                .child = child,
                                .done = done,
                                .tick = tick,
                                .ctx = c};
    struct plena_err err = {0};
    assert_int_equal(plena_proc_pool_run(&p, interrupted, &err), expect_rc);
}

static void test_all_jobs_once(void **state)
{
    (void)state;
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.fail_prepare_at = -1;
    int intr = -1;
    run(&c, 2, &intr, 0);
    assert_int_equal(intr, 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c.done[i], 1);
        if (i == 3) {
            assert_int_equal(c.codes[i], -1);
            assert_int_equal(c.signals[i], SIGKILL);
        } else {
            assert_int_equal(c.codes[i], i + 10);
            assert_int_equal(c.signals[i], 0);
        }
    }
    assert_true(c.max_running <= 2);
    assert_true(c.max_slot <= 1);
}

static void test_prepare_error_stops(void **state)
{
    (void)state;
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.fail_prepare_at = 2;
    run(&c, 1, NULL, PLENA_E_OUTPUT);
    assert_int_equal(c.done[0] + c.done[1], 2);
    for (int i = 2; i < N; i++)
        assert_int_equal(c.done[i], 0);
}

static void test_stop_forwards_sigterm(void **state)
{
    (void)state;
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.fail_prepare_at = -1;
    c.sleep_forever = 1;
    int intr = 0;
    run(&c, 3, &intr, 0);
    assert_int_equal(intr, 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c.done[i], 1);
        assert_int_equal(c.signals[i], SIGTERM);
        assert_int_equal(c.interrupted[i], 1);
    }
    for (int i = 3; i < N; i++)
        assert_int_equal(c.done[i], 0); /* never dispatched after the stop */
}

/* A job that ends because of the stop signal itself (a terminal's SIGINT
 * reaches the workers too) may be reaped in the same turn in which the
 * pool's flag was set, before the turn's stop check: it still counts as
 * interrupted. The forked hook waits for the job's exit without reaping it
 * (WNOWAIT), then sets the flag: the reap that follows sees both. */
static volatile sig_atomic_t g_stop_late;
static int exit_at_once(void *p, size_t i)
{
    (void)p;
    (void)i;
    return 5;
}
static void stop_after_exit(void *p, size_t i, pid_t pid)
{
    (void)p;
    (void)i;
    siginfo_t si;
    if (pid > 0) (void)waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
    g_stop_late = 1;
}

static void test_stop_set_while_reaping(void **state)
{
    (void)state;
    struct ctx c;
    memset(&c, 0, sizeof c);
    g_stop_late = 0;
    struct plena_proc_pool p = {.n_jobs = 1,
                                .width = 1,
                                .stop = &g_stop_late,
                                .child = exit_at_once,
                                .forked = stop_after_exit,
                                .done = done,
                                .ctx = &c};
    struct plena_err err = {0};
    int intr = 0;
    assert_int_equal(plena_proc_pool_run(&p, &intr, &err), 0);
    assert_int_equal(c.done[0], 1);
    assert_int_equal(c.codes[0], 5);
    assert_int_equal(c.interrupted[0], 1);
}

#ifdef __linux__
/* Workers die with their coordinator (issue 16 item 12): a pool whose
 * process is killed with SIGKILL leaves no job running — each gets SIGTERM
 * from PR_SET_PDEATHSIG. This process is the subreaper, so the orphaned job
 * is reparented here and its end can be waited for. */
static int g_pid_pipe = -1;

static int report_pid_and_wait(void *p, size_t i)
{
    (void)p;
    (void)i;
    pid_t me = getpid();
    if (write(g_pid_pipe, &me, sizeof me) != (ssize_t)sizeof me) return 1;
    for (;;)
        pause();
}

static void test_jobs_die_with_parent(void **state)
{
    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t coord = fork();
    assert_true(coord >= 0);
    if (coord == 0) {
        close(fds[0]);
        g_pid_pipe = fds[1];
        struct plena_proc_pool p = {.n_jobs = 1, .width = 1, .child = report_pid_and_wait};
        plena_proc_pool_run(&p, NULL, NULL);
        _exit(0);
    }
    close(fds[1]);
    pid_t worker = -1;
    assert_int_equal(read(fds[0], &worker, sizeof worker), (ssize_t)sizeof worker);
    close(fds[0]);
    kill(coord, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(coord, &st, 0), coord);
    pid_t r = 0;
    for (int t = 0; t < 200 && r == 0; t++) { /* up to 2 s */
        r = waitpid(worker, &st, WNOHANG);
        if (r == 0) usleep(10000);
    }
    if (r == 0) { /* still running: the defect; do not leak it */
        kill(worker, SIGKILL);
        waitpid(worker, &st, 0);
    }
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
    assert_int_equal(r, worker);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGTERM);
}
#endif

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_all_jobs_once),         cmocka_unit_test(test_prepare_error_stops),
    cmocka_unit_test(test_stop_forwards_sigterm), cmocka_unit_test(test_stop_set_while_reaping),
#ifdef __linux__
    cmocka_unit_test(test_jobs_die_with_parent),
#endif
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
