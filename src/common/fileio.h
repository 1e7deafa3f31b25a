/* File helpers: whole-file reads and atomic writes.
 *
 * Atomic write (docs/formats.md "Conventions"): the data go to
 * NAME.tmp.<pid>.<n> created O_EXCL in the target directory, are fsync'ed, then
 * renamed onto NAME and the directory is fsync'ed. A crash leaves either the
 * old file or the complete new one, never half a file. */
#ifndef PLENA_COMMON_FILEIO_H
#define PLENA_COMMON_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

/* The default bound of every whole-file read (docs/formats.md "Conventions"):
 * no reader of plena needs more, and /dev/zero or an endless pipe must fail
 * instead of exhausting memory. */
#define PLENA_FILE_MAX_BYTES ((size_t)1 << 30)

/* Reads the whole file into a NUL-terminated buffer (caller frees with
 * plena_free), at most PLENA_FILE_MAX_BYTES. Errors are PLENA_E_INPUT naming
 * the path. */
int plena_file_read_all(const char *path, char **data, size_t *len, struct plena_err *err);
/* The same, with "-" meaning standard input (read to its end). */
int plena_file_read_input(const char *path, char **data, size_t *len, struct plena_err *err);
/* The same ("-" is standard input) with the bound `max` checked while
 * reading: an input longer than max is PLENA_E_INPUT "larger than the max-byte
 * limit (limit_name)" as soon as byte max + 1 arrives, or, with `over`
 * non-NULL, the first max + 1 bytes are returned and *over set to 1 (the
 * caller reports it, e.g. as finding V001). */
int plena_file_read_bounded(const char *path, size_t max, const char *limit_name, char **data,
                            size_t *len, int *over, struct plena_err *err);

/* Reads exactly n bytes at byte `offset` into buf (a region of a large,
 * possibly sparse file such as hbm.bin). PLENA_E_INPUT naming the path when
 * it cannot be opened or is shorter than offset + n. */
int plena_file_read_range(const char *path, uint64_t offset, void *buf, size_t n,
                          struct plena_err *err);

/* 0 when `path` may be replaced by an output: it does not exist or is a
 * regular file (a symlink is judged by its target). A device, FIFO,
 * directory or socket is PLENA_E_OUTPUT naming the path: plena never
 * replaces what is not a regular file (`-o /dev/full` once replaced it). */
int plena_file_check_output(const char *path, struct plena_err *err);

/* Reads n bytes of fd at byte `offset` (pread, EINTR retried): the count
 * read, fewer than n only at the end of the file, or -1 with errno set. */
long long plena_fd_read_all(int fd, void *buf, size_t n, uint64_t offset);
/* plena_file_read_range on an open descriptor (path names it in errors). */
int plena_fd_read_range(int fd, const char *path, uint64_t offset, void *buf, size_t n,
                        struct plena_err *err);
/* Writes all n bytes to fd, at byte `offset` (pwrite) or, with offset < 0,
 * at the file position (write); EINTR retried. 0, or -1 with errno set
 * (ENOSPC when the system call made no progress). */
int plena_fd_write_all(int fd, const void *data, size_t n, int64_t offset);
/* Writes `len` bytes atomically; "-" writes them to standard output. Errors
 * are PLENA_E_OUTPUT naming the path (plena_file_check_output first). */
int plena_file_write_atomic(const char *path, const void *data, size_t len, struct plena_err *err);

/* Removes the leftovers of interrupted atomic writes in `dir`: regular
 * files named NAME.tmp.<pid>.<n> whose process <pid> no longer exists.
 * Temporaries of live processes (a concurrent writer into the same
 * directory) are kept; nothing that is not a regular file is unlinked.
 * Returns the number removed. */
size_t plena_file_clean_stale_tmp(const char *dir);

/* Several outputs written all or none: each is staged (written to its
 * temporary file and fsync'ed, checked as above), then all are committed
 * (renamed into place) only when every one was staged; on a failure the
 * staged ones are discarded and no target changes. */
struct plena_file_staged {
    char path[4096];
    char tmp[4200];
    int to_stdout; /* path "-": the data are kept and written at commit */
    const void *data;
    size_t len;
};
int plena_file_stage(const char *path, const void *data, size_t len, struct plena_file_staged *st,
                     struct plena_err *err);
/* Commits n staged outputs (all were staged successfully). */
int plena_file_commit(struct plena_file_staged *st, size_t n, struct plena_err *err);
void plena_file_discard(struct plena_file_staged *st, size_t n);
/* Async-signal-safe: unlinks every temporary staged and not yet committed or
 * discarded by this process (a signal handler calls it before _exit, so an
 * interrupted command leaves no *.tmp.* behind). */
void plena_file_unlink_pending(void);

/* Growable byte buffer for building text and binary outputs. */
struct plena_buf {
    char *data;
    size_t len;
    size_t cap;
    int failed; /* an append ran out of memory; the content is incomplete */
};

void plena_buf_init(struct plena_buf *b);
void plena_buf_free(struct plena_buf *b);
int plena_buf_append(struct plena_buf *b, const void *p, size_t n);
int plena_buf_puts(struct plena_buf *b, const char *s);
int plena_buf_printf(struct plena_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as the text of a Markdown table cell: every '|' escaped as "\|"
 * (the one character that would end the cell; the generated docs rely on it). */
int plena_buf_put_md_cell(struct plena_buf *b, const char *s);

/* Reads a NUL-terminated text line by line: {text, 0}, then
 * plena_lines_next until it returns 0. */
struct plena_lines {
    const char *p; /* the rest of the text */
    size_t line;   /* the 1-based number of the line last returned */
};
/* The next line into *s and *n (its length, without the '\n'); 0 at the end
 * of the text. A final '\n' ends the last line, it starts no empty one. */
int plena_lines_next(struct plena_lines *it, const char **s, size_t *n);

/* The most decimal digits a uint64_t has. */
#define PLENA_U64_DIGITS 20
/* The decimal digits of v, most significant first, without sign or NUL,
 * into out (room for PLENA_U64_DIGITS); returns how many. The fast integer
 * formatting of the assembly writer and the timeline (no printf). */
size_t plena_u64_digits(char *out, uint64_t v);

/* mkdir -p; PLENA_E_OUTPUT on failure. */
int plena_mkdir_p(const char *path, struct plena_err *err);

/* Joins dir and name with '/', into buf (truncation is an error: returns -1). */
int plena_path_join(char *buf, size_t n, const char *dir, const char *name);

#endif
