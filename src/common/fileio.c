/* File helpers: see fileio.h. */
#include "common/fileio.h"
#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int plena_file_read_all(const char *path, char **data, size_t *len, struct plena_err *err)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot open: %s", strerror(errno));
    struct plena_buf b;
    plena_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (plena_buf_append(&b, chunk, n)) break;
    }
    int rd_err = ferror(f);
    fclose(f);
    if (b.failed) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory reading file");
    }
    if (rd_err) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "read error");
    }
    if (plena_buf_append(&b, "", 1)) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory reading file");
    }
    *data = b.data;
    *len = b.len - 1;
    return 0;
}

static void fsync_dir_of(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) {
        dir[1] = 0;
    } else if (slash) {
        *slash = 0;
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int plena_file_read_range(const char *path, uint64_t offset, void *buf, size_t n,
                          struct plena_err *err)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot open: %s", strerror(errno));
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got < n)
        return PLENA_FAIL(err, PLENA_E_INPUT, path,
                          "shorter than %llu bytes (needed %zu bytes at offset %llu)",
                          (unsigned long long)(offset + n), n, (unsigned long long)offset);
    return 0;
}

int plena_file_read_input(const char *path, char **data, size_t *len, struct plena_err *err)
{
    if (strcmp(path, "-")) return plena_file_read_all(path, data, len, err);
    *data = NULL;
    *len = 0;
    struct plena_buf b;
    plena_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        if (plena_buf_append(&b, chunk, n)) break;
    if (b.failed || plena_buf_append(&b, "", 1)) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "-", "out of memory reading standard input");
    }
    *data = b.data;
    *len = b.len - 1;
    return 0;
}

int plena_file_write_atomic(const char *path, const void *data, size_t len, struct plena_err *err)
{
    static unsigned counter;
    char tmp[4200];
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot create: %s", strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "write failed: %s", strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 && errno != EINVAL) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "fsync failed: %s", strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "close failed: %s", strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "rename failed: %s", strerror(e));
    }
    fsync_dir_of(path);
    return 0;
}

void plena_buf_init(struct plena_buf *b)
{
    memset(b, 0, sizeof *b);
}

void plena_buf_free(struct plena_buf *b)
{
    plena_free(b->data);
    memset(b, 0, sizeof *b);
}

int plena_buf_append(struct plena_buf *b, const void *p, size_t n)
{
    if (b->failed) return -1;
    if (plena_grow((void **)&b->data, &b->cap, b->len + n + 1, 1)) {
        b->failed = 1;
        return -1;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int plena_buf_puts(struct plena_buf *b, const char *s)
{
    return plena_buf_append(b, s, strlen(s));
}

int plena_buf_printf(struct plena_buf *b, const char *fmt, ...)
{
    if (b->failed) return -1;
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof small) return plena_buf_append(b, small, (size_t)n);
    if (plena_grow((void **)&b->data, &b->cap, b->len + (size_t)n + 1, 1)) {
        b->failed = 1;
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int plena_buf_put_md_cell(struct plena_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            plena_buf_puts(b, "\\|");
        else
            plena_buf_append(b, s, 1);
    }
    return b->failed ? -1 : 0;
}

int plena_mkdir_p(const char *path, struct plena_err *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "path too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return PLENA_FAIL(err, PLENA_E_OUTPUT, buf, "cannot create directory: %s",
                              strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, buf, "cannot create directory: %s", strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, buf, "not a directory");
    return 0;
}

int plena_path_join(char *buf, size_t n, const char *dir, const char *name)
{
    int w;
    if (!dir || !dir[0])
        w = snprintf(buf, n, "%s", name);
    else
        w = snprintf(buf, n, "%s/%s", dir, name);
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}
