/* Tests for the common module: error records, allocation hook, atomic writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/pool.h"
#include "common/test_support.h"

static void test_first_error_wins(void **state)
{
    (void)state;
    struct plena_err e;
    plena_err_clear(&e);
    PLENA_FAIL(&e, PLENA_E_INPUT, "a.asm:3:1", "first %d", 1);
    PLENA_FAIL(&e, PLENA_E_OUTPUT, "b", "second");
    assert_int_equal(e.code, PLENA_E_INPUT);
    assert_string_equal(e.where, "a.asm:3:1");
    assert_string_equal(e.msg, "first 1");
    assert_int_equal(plena_status_exit_code(e.code), 3);
    assert_non_null(e.src_file);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* plena_qsort sorts, and accepts the empty NULL array an empty growable
 * array is (qsort(NULL, 0) is undefined behaviour: the sanitizer build
 * reported it in the CSV and Megatron importers and the campaign report). */
/* the one look at a stop flag: clear or absent -> 0 and nothing recorded;
 * set -> PLENA_E_INTERRUPTED at `where`, and the first error still wins */
static void test_err_if_stopped(void **state)
{
    (void)state;
    struct plena_err err;
    plena_err_clear(&err);
    volatile sig_atomic_t stop = 0;
    assert_int_equal(plena_err_if_stopped(NULL, "x", &err), 0);
    assert_int_equal(plena_err_if_stopped(&stop, "x", &err), 0);
    assert_false(plena_err_is_set(&err));
    stop = 1;
    assert_int_equal(plena_err_if_stopped(&stop, "build", &err), PLENA_E_INTERRUPTED);
    assert_int_equal(err.code, PLENA_E_INTERRUPTED);
    assert_string_equal(err.where, "build");
    assert_string_equal(err.msg, "interrupted (SIGINT/SIGTERM)");
    assert_int_equal(plena_err_if_stopped(&stop, "later", &err), PLENA_E_INTERRUPTED);
    assert_string_equal(err.where, "build");
    assert_int_equal(plena_err_if_stopped(&stop, "no record", NULL), PLENA_E_INTERRUPTED);
}

static void test_qsort_empty(void **state)
{
    (void)state;
    int v[4] = {3, 1, 2, 0};
    plena_qsort(v, 4, sizeof *v, cmp_int);
    for (int i = 0; i < 4; i++)
        assert_int_equal(v[i], i);
    plena_qsort(NULL, 0, sizeof *v, cmp_int);
    plena_qsort(v, 1, sizeof *v, cmp_int);
    assert_int_equal(v[0], 0);
}

static void test_alloc_fail_hook(void **state)
{
    (void)state;
    plena_alloc_fail_after(1);
    void *a = plena_malloc(10);
    void *b = plena_malloc(10);
    plena_alloc_fail_reset();
    assert_non_null(a);
    assert_null(b);
    plena_free(a);
}

/* A staged temporary is unlinked by plena_file_unlink_pending (what the CLI's
 * default SIGINT handler calls before _exit(5)), a committed one is not
 * pending any more: a forked child stages two files, commits one, raises
 * SIGINT; the parent sees exit 5, the committed file and no temporary. */
static void on_int_unlink_exit(int sig)
{
    (void)sig;
    plena_file_unlink_pending();
    _exit(5);
}

static void test_unlink_pending_on_signal(void **state)
{
    (void)state;
    char dir[] = "/tmp/plena_test_pending_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(b, sizeof b, "%s/b.txt", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGINT, on_int_unlink_exit);
        struct plena_err e;
        plena_err_clear(&e);
        struct plena_file_staged sa, sb;
        if (plena_file_stage(a, "a", 1, &sa, &e) || plena_file_commit(&sa, 1, &e)) _exit(1);
        if (plena_file_stage(b, "b", 1, &sb, &e)) _exit(1);
        raise(SIGINT);
        _exit(0); /* not reached: the handler exits 5 */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 5);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0, saw_a = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            n++;
            if (!strcmp(de->d_name, "a.txt")) saw_a = 1;
        }
    closedir(d);
    assert_int_equal(n, 1); /* only the committed file: b.txt's temporary is gone */
    assert_true(saw_a);
    unlink(a);
    rmdir(dir);
}

static void test_atomic_write_and_read(void **state)
{
    (void)state;
    char path[] = "/tmp/plena_test_common_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct plena_err e;
    plena_err_clear(&e);
    assert_int_equal(plena_file_write_atomic(path, "hello\n", 6, &e), 0);
    char *data;
    size_t len;
    assert_int_equal(plena_file_read_all(path, &data, &len, &e), 0);
    assert_int_equal(len, 6);
    assert_string_equal(data, "hello\n");
    plena_free(data);
    unlink(path);
    assert_int_not_equal(plena_file_write_atomic("/nonexistent-dir/x", "a", 1, &e), 0);
    assert_int_equal(e.code, PLENA_E_OUTPUT);
}

/* plena_pool_for: every item once, on the pool's threads (their parts run
 * first: plena_pool_test_workers_first) and alone; with failures, the
 * lowest failing item's status and message, and every item below it done. */
struct for_ctx {
    _Atomic unsigned done[1000];
    uint32_t fail_a, fail_b;
};

static int for_item(void *c, uint32_t i, uint32_t part, struct plena_err *err)
{
    struct for_ctx *x = c;
    (void)part;
    atomic_fetch_add(&x->done[i], 1);
    if (i == x->fail_a) {
        usleep(200); /* the next item fails first, on another thread */
        return PLENA_FAIL(err, PLENA_E_INPUT, "item", "failed at %u", i);
    }
    if (i == x->fail_b) return PLENA_FAIL(err, PLENA_E_NOMEM, "item", "failed at %u", i);
    return 0;
}

static void test_pool_for(void **state)
{
    (void)state;
    static struct for_ctx x;
    struct plena_pool *pool = plena_pool_new(3);
    assert_non_null(pool);
    plena_pool_test_workers_first(1);
    for (int with_pool = 0; with_pool < 2; with_pool++) {
        memset(&x, 0, sizeof x);
        x.fail_a = x.fail_b = UINT32_MAX;
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_pool_for(with_pool ? pool : NULL, 1000, for_item, &x, &err), 0);
        for (unsigned i = 0; i < 1000; i++)
            assert_int_equal(atomic_load(&x.done[i]), 1);
        for (int round = 0; round < 100; round++) {
            memset(&x, 0, sizeof x);
            x.fail_a = 300 + (uint32_t)round * 5, x.fail_b = x.fail_a + 1; /* two threads fail */
            plena_err_clear(&err);
            assert_int_equal(plena_pool_for(with_pool ? pool : NULL, 1000, for_item, &x, &err),
                             PLENA_E_INPUT);
            char want[32];
            snprintf(want, sizeof want, "failed at %u", x.fail_a);
            assert_string_equal(err.msg, want);
            for (unsigned i = 0; i <= x.fail_a; i++)
                assert_int_equal(atomic_load(&x.done[i]), 1);
        }
    }
    plena_pool_test_workers_first(0);
    plena_pool_free(pool);
}

/* plena_fd_write_all: at an offset (pwrite: the file position does not
 * move) and at the position (write), and a failure reported with errno
 * (a read-only descriptor; /dev/full: ENOSPC); plena_fd_read_all and
 * plena_file_read_range over the file written, short at its end. */
static void test_fd_write_all(void **state)
{
    (void)state;
    char path[] = "/tmp/plena_test_fdw_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(plena_fd_write_all(fd, "abc", 3, -1), 0);
    assert_int_equal(plena_fd_write_all(fd, "XY", 2, 8), 0);  /* a hole at 3..7 */
    assert_int_equal(plena_fd_write_all(fd, "de", 2, -1), 0); /* after "abc" */
    close(fd);
    char *data;
    size_t len;
    assert_int_equal(plena_file_read_all(path, &data, &len, NULL), 0);
    assert_int_equal(len, 10);
    assert_memory_equal(data, "abcde\0\0\0XY", 10);
    plena_free(data);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    errno = 0;
    assert_int_equal(plena_fd_write_all(fd, "z", 1, 0), -1);
    assert_int_equal(errno, EBADF);
    char rb[20];
    assert_int_equal(plena_fd_read_all(fd, rb, 4, 2), 4);
    assert_memory_equal(rb, "cde\0", 4);
    assert_int_equal(plena_fd_read_all(fd, rb, 20, 8), 2); /* the end of the file */
    assert_memory_equal(rb, "XY", 2);
    close(fd);
    assert_int_equal(plena_fd_read_all(fd, rb, 4, 0), -1); /* closed */
    struct plena_err e;
    plena_err_clear(&e);
    assert_int_equal(plena_file_read_range(path, 6, rb, 4, &e), 0);
    assert_memory_equal(rb, "\0\0XY", 4);
    assert_int_equal(plena_file_read_range(path, 8, rb, 3, &e), PLENA_E_INPUT);
    assert_non_null(strstr(e.msg, "shorter than 11 bytes"));
    unlink(path);
    fd = open("/dev/full", O_WRONLY);
    if (fd >= 0) {
        errno = 0;
        assert_int_equal(plena_fd_write_all(fd, "z", 1, -1), -1);
        assert_int_equal(errno, ENOSPC);
        close(fd);
    }
}

/* Outputs onto what is not a regular file are refused and left alone (as
 * root `plena asm -o /dev/full` replaced /dev/full); staged outputs are
 * committed all together or discarded without a trace. */
static void test_outputs_regular_and_all_or_none(void **state)
{
    (void)state;
    char dir[] = "/tmp/plena_test_out_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[256], a[256], b[256], bad[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(b, sizeof b, "%s/b.txt", dir);
    snprintf(bad, sizeof bad, "%s/no/such/dir.txt", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct plena_err e = {0};
    assert_int_equal(plena_file_write_atomic(fifo, "x", 1, &e), PLENA_E_OUTPUT);
    assert_non_null(strstr(e.msg, "is a FIFO"));
    struct stat st;
    assert_int_equal(stat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* still the FIFO */
    plena_err_clear(&e);
    assert_int_equal(plena_file_check_output("/dev/null", &e), PLENA_E_OUTPUT);
    assert_non_null(strstr(e.msg, "is a character device"));
    assert_int_equal(plena_file_check_output(a, NULL), 0); /* absent: may be created */
    /* a then a bad path: nothing is written */
    struct plena_file_staged sv[2];
    assert_int_equal(plena_file_stage(a, "A", 1, &sv[0], NULL), 0);
    assert_int_not_equal(plena_file_stage(bad, "B", 1, &sv[1], NULL), 0);
    plena_file_discard(sv, 1);
    assert_int_equal(plena_test_sh("test -z \"$(ls -A %s | grep -v '^fifo$')\"", dir), 0);
    /* both good: both in place, no temporary left */
    assert_int_equal(plena_file_stage(a, "A", 1, &sv[0], NULL), 0);
    assert_int_equal(plena_file_stage(b, "B", 1, &sv[1], NULL), 0);
    assert_int_equal(plena_file_commit(sv, 2, NULL), 0);
    char *d;
    size_t n;
    assert_int_equal(plena_file_read_all(b, &d, &n, NULL), 0);
    assert_string_equal(d, "B");
    plena_free(d);
    assert_int_equal(plena_test_sh("test $(ls -A %s | wc -l) -eq 3", dir), 0);
    assert_int_equal(plena_test_rmtree(dir), 0);
}

/* Bounded reads stop at the limit while reading: /dev/zero is refused after
 * max + 1 bytes (it grew without bound), and `over` hands back the prefix. */
static void test_read_bounded(void **state)
{
    (void)state;
    struct plena_err e = {0};
    char *d = NULL;
    size_t n = 0;
    assert_int_equal(plena_file_read_bounded("/dev/zero", 1000, "the test limit", &d, &n, NULL, &e),
                     PLENA_E_INPUT);
    assert_null(d);
    assert_string_equal(e.where, "/dev/zero");
    assert_non_null(strstr(e.msg, "larger than the 1000-byte limit (the test limit)"));
    int over = 0;
    assert_int_equal(plena_file_read_bounded("/dev/zero", 1000, "x", &d, &n, &over, NULL), 0);
    assert_int_equal(over, 1);
    assert_int_equal(n, 1001);
    plena_free(d);
    char path[] = "/tmp/plena_test_bounded_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    assert_int_equal(plena_file_read_bounded(path, 10, "x", &d, &n, &over, NULL), 0); /* exactly */
    assert_int_equal(over, 0);
    assert_int_equal(n, 10);
    assert_string_equal(d, "0123456789");
    plena_free(d);
    assert_int_equal(plena_file_read_bounded(path, 9, "x", &d, &n, NULL, NULL), PLENA_E_INPUT);
    unlink(path);
}

/* Stale temporaries are removed, a live process's are kept (replays into a
 * shared directory deleted each other's and failed with "rename failed";
 * moe left hbm.bin.tmp.* behind for good), and non-regular files are never
 * unlinked. */
static void test_clean_stale_tmp(void **state)
{
    (void)state;
    char dir[] = "/tmp/plena_test_stale_XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) _exit(0);
    assert_int_equal(plena_test_wait(child), 0); /* reaped: its pid names no process */
    char name[96];
    snprintf(name, sizeof name, "hbm.bin.tmp.%ld.abc", (long)child);
    plena_test_write_text(dir, name, "stale");
    snprintf(name, sizeof name, "a.json.tmp.%ld.0", (long)getpid());
    plena_test_write_text(dir, name, "live");
    plena_test_write_text(dir, "plain.tmp.txt", "not a temporary");
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/f.tmp.%ld.1", dir, (long)child);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(plena_file_clean_stale_tmp(dir), 1);
    assert_int_equal(
        plena_test_sh("test $(ls -A %s | wc -l) -eq 3 && ! ls %s | grep -q hbm.bin", dir, dir), 0);
    assert_int_equal(plena_test_rmtree(dir), 0);
}

static void test_buf_printf_long(void **state)
{
    (void)state;
    struct plena_buf b;
    plena_buf_init(&b);
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    plena_buf_printf(&b, "%s-%d", big, 7);
    assert_int_equal(b.len, 1999 + 2);
    assert_int_equal(b.data[b.len - 1], '7');
    plena_buf_free(&b);
}

/* Lines of a text: empty lines kept, a final '\n' starts no empty line, a
 * last line without one is a line. */
static void test_lines(void **state)
{
    (void)state;
    static const char *const want[] = {"a", "", "b c", "d"};
    const char *s;
    size_t n, k = 0;
    struct plena_lines it = {"a\n\nb c\nd", 0};
    while (plena_lines_next(&it, &s, &n)) {
        assert_true(k < PLENA_TEST_COUNT(want));
        assert_int_equal(n, strlen(want[k]));
        assert_memory_equal(s, want[k], n);
        assert_int_equal(it.line, ++k);
    }
    assert_int_equal(k, 4);
    it = (struct plena_lines){"x\n", 0};
    assert_int_equal(plena_lines_next(&it, &s, &n), 1);
    assert_int_equal(n, 1);
    assert_int_equal(plena_lines_next(&it, &s, &n), 0);
    it = (struct plena_lines){"", 0};
    assert_int_equal(plena_lines_next(&it, &s, &n), 0);
    assert_int_equal(it.line, 0);
}

/* Decimal digits, the expected texts written by hand; nothing past them. */
static void test_u64_digits(void **state)
{
    (void)state;
    static const struct {
        uint64_t v;
        const char *text;
    } cases[] = {{0, "0"},
                 {7, "7"},
                 {10, "10"},
                 {1000000, "1000000"},
                 {4294967295u, "4294967295"},
                 {18446744073709551615u, "18446744073709551615"}};
    for (size_t i = 0; i < PLENA_TEST_COUNT(cases); i++) {
        char out[PLENA_U64_DIGITS + 1];
        memset(out, '#', sizeof out);
        size_t n = plena_u64_digits(out, cases[i].v);
        assert_int_equal(n, strlen(cases[i].text));
        assert_memory_equal(out, cases[i].text, n);
        assert_int_equal(out[n], '#');
    }
}

/* The exit codes of docs/cli.md, written here by hand: 0 success, 1 failed,
 * 2 usage, 3 input, 4 output, 5 interrupted, 6 out of memory; the worst of two
 * statuses is the higher exit code; the help text has one line per code. */
static void test_status_table(void **state)
{
    (void)state;
    assert_int_equal(plena_status_exit_code(PLENA_OK), 0);
    assert_int_equal(plena_status_exit_code(PLENA_E_FAILED), 1);
    assert_int_equal(plena_status_exit_code(PLENA_E_INTERNAL), 1);
    assert_int_equal(plena_status_exit_code(PLENA_E_USAGE), 2);
    assert_int_equal(plena_status_exit_code(PLENA_E_INPUT), 3);
    assert_int_equal(plena_status_exit_code(PLENA_E_OUTPUT), 4);
    assert_int_equal(plena_status_exit_code(PLENA_E_INTERRUPTED), 5);
    assert_int_equal(plena_status_exit_code(PLENA_E_NOMEM), 6);
    assert_int_equal(plena_status_exit_code((enum plena_status)99), 1);
    assert_int_equal(PLENA_OK, 0);
    assert_int_equal(plena_status_worst(PLENA_E_FAILED, PLENA_E_OUTPUT), PLENA_E_OUTPUT);
    assert_int_equal(plena_status_worst(PLENA_E_INTERRUPTED, PLENA_E_INPUT), PLENA_E_INTERRUPTED);
    assert_int_equal(plena_status_worst(PLENA_OK, PLENA_OK), PLENA_OK);
    assert_string_equal(plena_status_name(PLENA_E_INPUT), "PLENA_E_INPUT");
    char buf[2048];
    const char *h = plena_status_help(buf, sizeof buf);
    assert_non_null(strstr(h, "exit:\n  0  success\n  1  the job ran and failed"));
    assert_non_null(strstr(h, "; an internal invariant broke"));
    assert_non_null(strstr(h, "\n  5  interrupted"));
    assert_non_null(strstr(h, "\n  6  out of memory\n"));
    size_t lines = 0;
    for (const char *p = h; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 8); /* "exit:" and codes 0..6 */
    /* truncation never writes past the buffer */
    char small[16];
    plena_status_help(small, sizeof small);
    assert_int_equal(strlen(small), 15);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_first_error_wins),
    cmocka_unit_test(test_err_if_stopped),
    cmocka_unit_test(test_alloc_fail_hook),
    cmocka_unit_test(test_atomic_write_and_read),
    cmocka_unit_test(test_fd_write_all),
    cmocka_unit_test(test_pool_for),
    cmocka_unit_test(test_unlink_pending_on_signal),
    cmocka_unit_test(test_buf_printf_long),
    cmocka_unit_test(test_u64_digits),
    cmocka_unit_test(test_lines),
    cmocka_unit_test(test_status_table),
    cmocka_unit_test(test_qsort_empty),
    cmocka_unit_test(test_outputs_regular_and_all_or_none),
    cmocka_unit_test(test_read_bounded),
    cmocka_unit_test(test_clean_stale_tmp),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
