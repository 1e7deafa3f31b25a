/* Error records: see err.h. */
#include "common/err.h"

#include <stdio.h>
#include <string.h>

int plena_err_vset(struct plena_err *err, enum plena_status code, const char *src_file,
                   int src_line, const char *where, const char *fmt, va_list ap)
{
    if (!err || err->code != PLENA_OK) return (int)code;
    err->code = code;
    err->src_file = src_file;
    err->src_line = src_line;
    snprintf(err->where, sizeof err->where, "%s", where ? where : "");
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return (int)code;
}

int plena_err_set(struct plena_err *err, enum plena_status code, const char *src_file, int src_line,
                  const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = plena_err_vset(err, code, src_file, src_line, where, fmt, ap);
    va_end(ap);
    return rc;
}

void plena_err_clear(struct plena_err *err)
{
    if (err) memset(err, 0, sizeof *err);
}

int plena_err_is_set(const struct plena_err *err)
{
    return err && err->code != PLENA_OK;
}

const char *plena_err_format(const struct plena_err *err, char *buf, unsigned long n)
{
    if (!err || err->code == PLENA_OK) {
        snprintf(buf, n, "no error");
    } else if (err->where[0]) {
        snprintf(buf, n, "%s: %s", err->where, err->msg);
    } else {
        snprintf(buf, n, "%s", err->msg);
    }
    return buf;
}

static const struct {
    const char *name, *meaning;
    int exit_code;
} statuses[] = {
#define PLENA_STATUS(name, exit_code, meaning) {"PLENA_" #name, meaning, exit_code},
#include "common/status.def"
#undef PLENA_STATUS
};
_Static_assert(sizeof statuses / sizeof statuses[0] == PLENA_STATUS_COUNT, "one row per status");

int plena_status_exit_code(enum plena_status code)
{
    return (unsigned)code < PLENA_STATUS_COUNT ? statuses[code].exit_code : 1;
}

const char *plena_status_name(enum plena_status code)
{
    return (unsigned)code < PLENA_STATUS_COUNT ? statuses[code].name : "PLENA_E_?";
}

const char *plena_status_meaning(enum plena_status code)
{
    return (unsigned)code < PLENA_STATUS_COUNT ? statuses[code].meaning : "unknown status";
}

enum plena_status plena_status_from_exit_code(int exit_code)
{
    for (size_t i = 0; i < PLENA_STATUS_COUNT; i++)
        if (statuses[i].exit_code == exit_code) return (enum plena_status)i;
    return PLENA_E_FAILED;
}

int plena_err_if_stopped(const volatile sig_atomic_t *stop, const char *where,
                         struct plena_err *err)
{
    if (!stop || !*stop) return 0;
    return PLENA_FAIL(err, PLENA_E_INTERRUPTED, where, "interrupted (SIGINT/SIGTERM)");
}

enum plena_status plena_status_worst(enum plena_status a, enum plena_status b)
{
    return plena_status_exit_code(b) > plena_status_exit_code(a) ? b : a;
}

/* Appends to buf at *off without overrunning n (output truncated, never past). */
static void put(char *buf, unsigned long n, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, unsigned long n, size_t *off, const char *fmt, ...)
{
    if (*off >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *off, n - *off, fmt, ap);
    va_end(ap);
    if (w > 0) *off += (size_t)w;
}

const char *plena_status_help(char *buf, unsigned long n)
{
    size_t off = 0;
    buf[0] = 0;
    put(buf, n, &off, "exit:\n");
    for (int code = 0; code <= 255; code++) {
        int any = 0;
        for (size_t i = 0; i < PLENA_STATUS_COUNT; i++) {
            if (statuses[i].exit_code != code) continue;
            if (any)
                put(buf, n, &off, "; %s", statuses[i].meaning);
            else
                put(buf, n, &off, "  %d  %s", code, statuses[i].meaning);
            any = 1;
        }
        if (any) put(buf, n, &off, "\n");
    }
    return buf;
}
