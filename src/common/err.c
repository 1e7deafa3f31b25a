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

int plena_status_exit_code(enum plena_status code)
{
    switch (code) {
    case PLENA_OK: return 0;
    case PLENA_E_FAILED: return 1;
    case PLENA_E_USAGE: return 2;
    case PLENA_E_INPUT: return 3;
    case PLENA_E_OUTPUT: return 4;
    case PLENA_E_NOMEM: return 5;
    case PLENA_E_INTERNAL: return 1;
    }
    return 1;
}
