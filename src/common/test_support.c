/* Test support (see test_support.h). Deliberately plain: system() and the
 * shell for running the CLI and removing trees, so a test's command line can
 * be pasted into a terminal when it fails. */
#include "common/test_support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"

int plena_test_main(const struct CMUnitTest *tests, size_t n, int (*setup)(void **),
                    int (*teardown)(void **))
{
    const char *filter = getenv("PLENA_TEST_FILTER");
    if (filter) cmocka_set_test_filter(filter);
    return _cmocka_run_group_tests("tests", tests, n, setup, teardown);
}

char plena_test_tmp[64];

int plena_test_tmp_setup(void **state)
{
    (void)state;
    return plena_test_mkdtemp(plena_test_tmp, sizeof plena_test_tmp, "test");
}

int plena_test_tmp_teardown(void **state)
{
    (void)state;
    return plena_test_rmtree(plena_test_tmp);
}

int plena_test_mkdtemp(char *dir, size_t n, const char *tag)
{
    int w = snprintf(dir, n, "/tmp/plena_%s_XXXXXX", tag);
    if (w < 0 || (size_t)w >= n) return -1;
    return mkdtemp(dir) ? 0 : -1;
}

int plena_test_dir_count(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strstr(de->d_name, needle);
    closedir(d);
    return n;
}

int plena_test_rmtree(const char *dir)
{
    return plena_test_sh("rm -rf '%s'", dir) == 0 ? 0 : -1;
}

char *plena_test_path(char *buf, size_t n, const char *dir, const char *name)
{
    int w = dir ? snprintf(buf, n, "%s/%s", dir, name) : snprintf(buf, n, "%s", name);
    assert_true(w >= 0 && (size_t)w < n);
    return buf;
}

void plena_test_write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[4096];
    struct plena_err err = {0};
    plena_test_path(path, sizeof path, dir, name);
    if (plena_file_write_atomic(path, data, len, &err))
        fail_msg("cannot write %s: %s", path, err.msg);
}

void plena_test_write_text(const char *dir, const char *name, const char *text)
{
    plena_test_write_file(dir, name, text, strlen(text));
}

void plena_test_write_replaced(const char *dir, const char *name, const char *text,
                               const char *from, const char *to)
{
    const char *hit = strstr(text, from);
    assert_non_null(hit);
    struct plena_buf b;
    plena_buf_init(&b);
    plena_buf_append(&b, text, (size_t)(hit - text));
    plena_buf_puts(&b, to);
    plena_buf_puts(&b, hit + strlen(from));
    assert_false(b.failed);
    plena_test_write_file(dir, name, b.data, b.len);
    plena_buf_free(&b);
}

char *plena_test_read_file(const char *dir, const char *name, size_t *len)
{
    char path[4096], *data = NULL;
    size_t n = 0;
    plena_test_path(path, sizeof path, dir, name);
    if (plena_file_read_all(path, &data, &n, NULL)) return NULL;
    if (len) *len = n;
    return data;
}

int plena_test_file_contains(const char *dir, const char *name, const char *needle)
{
    char *t = plena_test_read_file(dir, name, NULL);
    int r = t && strstr(t, needle) != NULL;
    plena_free(t);
    return r;
}

void plena_test_assert_same_files(const char *a, const char *b)
{
    char *da = NULL, *db = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(plena_file_read_all(a, &da, &na, NULL), 0);
    assert_int_equal(plena_file_read_all(b, &db, &nb, NULL), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    plena_free(da);
    plena_free(db);
}

const char *plena_test_attr(const char *tag, const char *name, char *out, size_t n)
{
    const char *end = strchr(tag, '>');
    char pat[64];
    snprintf(pat, sizeof pat, " %s=\"", name);
    const char *p = strstr(tag, pat);
    if (!p || !end || p > end || !n) return NULL;
    p += strlen(pat);
    size_t len = strcspn(p, "\"");
    if (len >= n) len = n - 1;
    memcpy(out, p, len);
    out[len] = 0;
    return out;
}

const char *plena_test_bin(void)
{
    const char *bin = getenv("PLENA_BIN");
    return bin && !access(bin, X_OK) ? bin : NULL;
}

/* A wait status as a shell reports it: the exit code, or 128 + the signal. */
static int exit_code_of(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

int plena_test_sh(const char *fmt, ...)
{
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof cmd) return -1;
    int st = system(cmd);
    return st == -1 ? -1 : exit_code_of(st);
}

extern char **environ;

/* 1 when the environment entry e ("K=V") names the variable that the
 * assignment a ("K=V") sets. */
static int same_name(const char *e, const char *a)
{
    size_t k = strcspn(a, "=");
    return strncmp(e, a, k) == 0 && e[k] == '=';
}

pid_t plena_test_spawn(const char *bin, const char *const *args, const char *const *env,
                       const char *out, const char *err)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = bin;
    for (size_t i = 0; args[i]; i++) {
        assert_true(n < 63);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    /* this environment, an entry that env sets again replaced by env's */
    size_t n_env = 0, n_add = 0;
    while (environ[n_env])
        n_env++;
    while (env && env[n_add])
        n_add++;
    const char **envp = plena_calloc(n_env + n_add + 1, sizeof *envp);
    assert_non_null(envp);
    size_t m = 0;
    for (size_t i = 0; i < n_env; i++) {
        int replaced = 0;
        for (size_t k = 0; k < n_add && !replaced; k++)
            replaced = same_name(environ[i], env[k]);
        if (!replaced) envp[m++] = environ[i];
    }
    for (size_t k = 0; k < n_add; k++)
        envp[m++] = env[k];
    envp[m] = NULL;
    posix_spawn_file_actions_t fa;
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    assert_int_equal(posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out,
                                                      O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    assert_int_equal(posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err,
                                                      O_WRONLY | O_CREAT | O_TRUNC, 0644),
                     0);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    plena_free(envp);
    if (rc) fail_msg("cannot start %s: %s", bin, strerror(rc));
    return pid;
}

int plena_test_wait(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return exit_code_of(st);
}
