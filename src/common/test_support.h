/* Helpers shared by the cmocka tests of every module: a test file's main and
 * temporary-directory fixtures, a fresh mkdtemp directory, whole-file writes
 * and reads inside it, removing it again, running the `plena` CLI
 * ($PLENA_BIN) through the shell for its exit code, or as a process of its
 * own that the test can signal.
 * Built as the static library plena_test_support (tests only, never part of
 * libplena; plena_test() links it into every test); the write helpers fail
 * the calling test through cmocka. */
#ifndef PLENA_COMMON_TEST_SUPPORT_H
#define PLENA_COMMON_TEST_SUPPORT_H

#include <stddef.h>
#include <sys/types.h>

struct CMUnitTest;

/* The number of entries of an array in scope (a test file's tests[]). */
#define PLENA_TEST_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A test file's main: runs tests[n] as one cmocka group with the group
 * fixtures setup and teardown (NULL for none), as cmocka_run_group_tests
 * does; with $PLENA_TEST_FILTER set, only the tests whose names match it
 * (cmocka_set_test_filter). Returns the number of tests that failed. */
int plena_test_main(const struct CMUnitTest *tests, size_t n, int (*setup)(void **),
                    int (*teardown)(void **));

/* The directory of the fixtures below: "/tmp/plena_test_XXXXXX". */
extern char plena_test_tmp[64];
/* cmocka fixtures, per group or per test: setup makes a fresh plena_test_tmp
 * (plena_test_mkdtemp), teardown removes it. 0, or -1 on failure. */
int plena_test_tmp_setup(void **state);
int plena_test_tmp_teardown(void **state);
/* A tests[] entry: test f in a fresh plena_test_tmp of its own. */
#define PLENA_TEST_IN_TMP(f)                                                                       \
    cmocka_unit_test_setup_teardown(f, plena_test_tmp_setup, plena_test_tmp_teardown)

/* Creates a fresh directory "/tmp/plena_<tag>_XXXXXX" (mkdtemp) into dir
 * (capacity n). Returns 0, or -1 when it does not fit or mkdtemp fails. */
int plena_test_mkdtemp(char *dir, size_t n, const char *tag);
/* Removes dir and everything below it (rm -rf). Returns 0 or -1. */
int plena_test_rmtree(const char *dir);

/* "dir/name" into buf (capacity n); name alone when dir is NULL. Fails the
 * test when it does not fit. Returns buf. */
char *plena_test_path(char *buf, size_t n, const char *dir, const char *name);
/* Writes len bytes (atomically) to dir/name; fails the test on error. */
void plena_test_write_file(const char *dir, const char *name, const void *data, size_t len);
/* Same for a NUL-terminated text. */
void plena_test_write_text(const char *dir, const char *name, const char *text);
/* Writes text with its first occurrence of `from` replaced by `to` to
 * dir/name; fails the test when `from` does not occur. */
void plena_test_write_replaced(const char *dir, const char *name, const char *text,
                               const char *from, const char *to);
/* Reads dir/name whole, NUL-terminated (free with plena_free); *len (may be
 * NULL) gets its size. NULL when the file cannot be read. */
char *plena_test_read_file(const char *dir, const char *name, size_t *len);
/* The entries of directory dir (not . and ..) whose names contain needle;
 * fails the test when dir cannot be opened. */
int plena_test_dir_count(const char *dir, const char *needle);
/* 1 when dir/name contains needle, else 0 (also when unreadable). */
int plena_test_file_contains(const char *dir, const char *name, const char *needle);
/* Fails the calling test unless the files at paths a and b both read and
 * hold the same bytes. */
void plena_test_assert_same_files(const char *a, const char *b);
/* The value of attribute name="..." inside the HTML/SVG tag that starts at
 * tag (up to its '>'), copied into out (capacity n, truncated); NULL when
 * the tag has no such attribute. */
const char *plena_test_attr(const char *tag, const char *name, char *out, size_t n);

/* $PLENA_BIN when it is set and executable, else NULL (callers skip). */
const char *plena_test_bin(void);
/* Formats a shell command (at most 16 KiB) and runs it with system().
 * Returns its exit code, 128 + the signal when it was killed, or -1 when it
 * could not be run or the command did not fit. */
int plena_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Starts bin with the arguments args (NULL-terminated, at most 62) and this
 * process's environment with the "K=V" assignments of env (NULL-terminated,
 * may be NULL) set; its standard output and error go to the files out and
 * err (created or truncated). Returns the pid; fails the test when the
 * process cannot be started. For a test that must signal or time the process
 * (plena_test_sh waits for it). */
pid_t plena_test_spawn(const char *bin, const char *const *args, const char *const *env,
                       const char *out, const char *err);
/* Waits for pid: its exit code, 128 + the signal when it was killed, or -1
 * when waitpid fails. */
int plena_test_wait(pid_t pid);

#endif
