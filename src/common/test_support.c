/* Test support (see test_support.h). Deliberately plain: system() and the
 * shell for running the CLI and removing trees, so a test's command line can
 * be pasted into a terminal when it fails. */
#include "common/test_support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"

int plena_test_mkdtemp(char *dir, size_t n, const char *tag)
{
    int w = snprintf(dir, n, "/tmp/plena_%s_XXXXXX", tag);
    if (w < 0 || (size_t)w >= n) return -1;
    return mkdtemp(dir) ? 0 : -1;
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

const char *plena_test_bin(void)
{
    const char *bin = getenv("PLENA_BIN");
    return bin && !access(bin, X_OK) ? bin : NULL;
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
    if (st == -1) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}
