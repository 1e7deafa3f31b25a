/* File helpers: see fileio.h. */
#include "common/fileio.h"
#include "common/alloc.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* is_stdin: read standard input, `path` only names it in messages. */
static int read_bounded(const char *path, int is_stdin, size_t max, const char *limit_name,
                        char **data, size_t *len, int *over, struct plena_err *err)
{
    *data = NULL;
    *len = 0;
    if (over) *over = 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot open: %s", strerror(errno));
    struct plena_buf b;
    plena_buf_init(&b);
    char chunk[65536];
    size_t n;
    int too_big = 0;
    while (!b.failed && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n > max - b.len) { /* keep max + 1 bytes at most */
            n = max - b.len + 1;
            too_big = 1;
        }
        if (plena_buf_append(&b, chunk, n) || too_big) break;
    }
    int rd_err = ferror(f);
    if (!is_stdin) fclose(f);
    int rc = 0;
    if (b.failed)
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory reading %s",
                        is_stdin ? "standard input" : "file");
    else if (rd_err && !too_big)
        rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "read error");
    else if (too_big && !over)
        rc = PLENA_FAIL(err, PLENA_E_INPUT, path,
                        "larger than the %zu-byte limit (%s); reading stopped there", max,
                        limit_name);
    else if (plena_buf_append(&b, "", 1))
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory reading file");
    if (rc) {
        plena_buf_free(&b);
        return rc;
    }
    if (over) *over = too_big;
    *data = b.data;
    *len = b.len - 1;
    return 0;
}

int plena_file_read_bounded(const char *path, size_t max, const char *limit_name, char **data,
                            size_t *len, int *over, struct plena_err *err)
{
    return read_bounded(path, !strcmp(path, "-"), max, limit_name, data, len, over, err);
}

int plena_file_read_all(const char *path, char **data, size_t *len, struct plena_err *err)
{
    return read_bounded(path, 0, PLENA_FILE_MAX_BYTES, "PLENA_FILE_MAX_BYTES", data, len, NULL,
                        err);
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
    int rc = plena_fd_read_range(fd, path, offset, buf, n, err);
    close(fd);
    return rc;
}

int plena_fd_read_range(int fd, const char *path, uint64_t offset, void *buf, size_t n,
                        struct plena_err *err)
{
    long long got = plena_fd_read_all(fd, buf, n, offset);
    if (got < 0) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot read: %s", strerror(errno));
    if ((size_t)got < n)
        return PLENA_FAIL(err, PLENA_E_INPUT, path,
                          "shorter than %llu bytes (needed %zu bytes at offset %llu)",
                          (unsigned long long)(offset + n), n, (unsigned long long)offset);
    return 0;
}

int plena_file_read_input(const char *path, char **data, size_t *len, struct plena_err *err)
{
    return plena_file_read_bounded(path, PLENA_FILE_MAX_BYTES, "PLENA_FILE_MAX_BYTES", data, len,
                                   NULL, err);
}

size_t plena_file_clean_stale_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *t = strstr(de->d_name, ".tmp.");
        if (!t) continue;
        char *end;
        errno = 0;
        long pid = strtol(t + 5, &end, 10);
        if (errno || end == t + 5 || *end != '.' || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours) */
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) continue;
        struct stat st;
        if (lstat(p, &st) || !S_ISREG(st.st_mode)) continue;
        if (!unlink(p)) n++;
    }
    closedir(d);
    return n;
}

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int plena_file_check_output(const char *path, struct plena_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0; /* absent: created */
    return PLENA_FAIL(err, PLENA_E_OUTPUT, path,
                      "is %s: plena writes outputs only as regular files (use - for standard "
                      "output)",
                      file_kind(st.st_mode));
}

long long plena_fd_read_all(int fd, void *buf, size_t n, uint64_t offset)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (long long)got;
}

int plena_fd_write_all(int fd, const void *data, size_t n, int64_t offset)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = offset < 0 ? write(fd, p, n) : pwrite(fd, p, n, (off_t)offset);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) continue;
            if (w == 0) errno = ENOSPC; /* no progress and no errno */
            return -1;
        }
        p += w;
        n -= (size_t)w;
        if (offset >= 0) offset += w;
    }
    return 0;
}

/* The temporaries in flight, for plena_file_unlink_pending. A slot's path is
 * written before it is marked used, so a handler never reads a half path. */
#define PENDING_SLOTS 16
static char pending_path[PENDING_SLOTS][sizeof(((struct plena_file_staged *)0)->tmp)];
static volatile sig_atomic_t pending_used[PENDING_SLOTS];

static void pending_add(const char *tmp)
{
    for (int i = 0; i < PENDING_SLOTS; i++)
        if (!pending_used[i]) {
            memcpy(pending_path[i], tmp, strlen(tmp) + 1);
            pending_used[i] = 1;
            return;
        }
}

static void pending_remove(const char *tmp)
{
    for (int i = 0; i < PENDING_SLOTS; i++)
        if (pending_used[i] && !strcmp(pending_path[i], tmp)) {
            pending_used[i] = 0;
            return;
        }
}

void plena_file_unlink_pending(void)
{
    for (int i = 0; i < PENDING_SLOTS; i++)
        if (pending_used[i]) unlink(pending_path[i]);
}

int plena_file_stage(const char *path, const void *data, size_t len, struct plena_file_staged *st,
                     struct plena_err *err)
{
    static unsigned counter;
    memset(st, 0, sizeof *st);
    st->data = data;
    st->len = len;
    if (snprintf(st->path, sizeof st->path, "%s", path) >= (int)sizeof st->path)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "path too long");
    if (!strcmp(path, "-")) {
        st->to_stdout = 1;
        return 0;
    }
    int rc = plena_file_check_output(path, err);
    if (rc) return rc;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(st->tmp, sizeof st->tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        fd = open(st->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        st->tmp[0] = 0;
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot create: %s", strerror(errno));
    }
    pending_add(st->tmp);
    const char *what = NULL;
    int e = 0;
    if (plena_fd_write_all(fd, data, len, -1))
        what = "write failed", e = errno;
    else if (fsync(fd) != 0 && errno != EINVAL)
        what = "fsync failed", e = errno;
    if (close(fd) != 0 && !what) what = "close failed", e = errno;
    if (what) {
        unlink(st->tmp);
        pending_remove(st->tmp);
        st->tmp[0] = 0;
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "%s: %s", what, strerror(e));
    }
    return 0;
}

void plena_file_discard(struct plena_file_staged *st, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!st[i].to_stdout && st[i].tmp[0]) {
            unlink(st[i].tmp);
            pending_remove(st[i].tmp);
            st[i].tmp[0] = 0;
        }
}

int plena_file_commit(struct plena_file_staged *st, size_t n, struct plena_err *err)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc) { /* an earlier rename failed: the rest are not put in place */
            plena_file_discard(&st[i], 1);
            continue;
        }
        if (st[i].to_stdout) {
            if (fflush(stdout) || plena_fd_write_all(STDOUT_FILENO, st[i].data, st[i].len, -1))
                rc = PLENA_FAIL(err, PLENA_E_OUTPUT, "-", "write to standard output failed: %s",
                                strerror(errno));
            continue;
        }
        if (rename(st[i].tmp, st[i].path) != 0) {
            int e = errno;
            plena_file_discard(&st[i], 1);
            rc = PLENA_FAIL(err, PLENA_E_OUTPUT, st[i].path, "rename failed: %s", strerror(e));
            continue;
        }
        pending_remove(st[i].tmp);
        st[i].tmp[0] = 0;
        fsync_dir_of(st[i].path);
    }
    return rc;
}

int plena_file_write_atomic(const char *path, const void *data, size_t len, struct plena_err *err)
{
    struct plena_file_staged st;
    int rc = plena_file_stage(path, data, len, &st, err);
    return rc ? rc : plena_file_commit(&st, 1, err);
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

int plena_lines_next(struct plena_lines *it, const char **s, size_t *n)
{
    if (!*it->p) return 0;
    const char *nl = strchr(it->p, '\n');
    *s = it->p;
    *n = nl ? (size_t)(nl - it->p) : strlen(it->p);
    it->p = nl ? nl + 1 : it->p + *n;
    it->line++;
    return 1;
}

size_t plena_u64_digits(char *out, uint64_t v)
{
    char t[PLENA_U64_DIGITS];
    size_t n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = t[n - 1 - i];
    return n;
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
