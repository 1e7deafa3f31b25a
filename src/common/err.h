/* Error records shared by every plena module.
 *
 * Library code never exits or aborts on bad input: it returns a non-zero
 * status and fills a struct plena_err. `where` is the *user's* position
 * (file:line:col, JSON path, settings key, pc=...), `src_file:src_line` the C
 * location that raised it (captured by PLENA_FAIL, like SQLite's *_BKPT).
 * The first error wins: later failures never overwrite a recorded one. */
#ifndef PLENA_COMMON_ERR_H
#define PLENA_COMMON_ERR_H

#include <stdarg.h>

/* Status codes double as the CLI exit-code classes of
 * spec/timing-and-profile.md section 8.3 via plena_status_exit_code(). */
enum plena_status {
    PLENA_OK = 0,
    PLENA_E_FAILED,  /* the job ran and failed (trap, failed gate/check): exit 1 */
    PLENA_E_USAGE,   /* command-line usage error: exit 2 */
    PLENA_E_INPUT,   /* malformed or unreadable input file or settings: exit 3 */
    PLENA_E_OUTPUT,  /* an output could not be written: exit 4 */
    PLENA_E_NOMEM,   /* out of memory / resource: exit 5 */
    PLENA_E_INTERNAL /* invariant broken inside plena (a bug): exit 1 */
};

struct plena_err {
    enum plena_status code;
    const char *src_file;
    int src_line;
    char where[256];
    char msg[768];
};

/* Records an error unless `err` is NULL or already holds one. Returns `code`
 * so callers can write `return PLENA_FAIL(err, PLENA_E_INPUT, path, "...")`. */
#define PLENA_FAIL(err, code, where, ...)                                                          \
    plena_err_set((err), (code), __FILE__, __LINE__, (where), __VA_ARGS__)

int plena_err_set(struct plena_err *err, enum plena_status code, const char *src_file, int src_line,
                  const char *where, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int plena_err_vset(struct plena_err *err, enum plena_status code, const char *src_file,
                   int src_line, const char *where, const char *fmt, va_list ap);

void plena_err_clear(struct plena_err *err);
int plena_err_is_set(const struct plena_err *err);

/* "where: msg" (or just msg when where is empty), into buf. */
const char *plena_err_format(const struct plena_err *err, char *buf, unsigned long n);

/* Exit status for a status code (spec/timing-and-profile.md section 8.3). */
int plena_status_exit_code(enum plena_status code);

#endif
