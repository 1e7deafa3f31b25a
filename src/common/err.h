/* Error records shared by every plena module.
 *
 * Library code never exits or aborts on bad input: it returns a non-zero
 * status and fills a struct plena_err. `where` is the *user's* position
 * (file:line:col, JSON path, settings key, pc=...), `src_file:src_line` the C
 * location that raised it (captured by PLENA_FAIL, like SQLite's *_BKPT).
 * The first error wins: later failures never overwrite a recorded one. */
#ifndef PLENA_COMMON_ERR_H
#define PLENA_COMMON_ERR_H

#include <signal.h>
#include <stdarg.h>

/* The one status vocabulary of the library (common/status.def). */
enum plena_status {
#define PLENA_STATUS(name, exit_code, meaning) PLENA_##name,
#include "status.def"
#undef PLENA_STATUS
    PLENA_STATUS_COUNT
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

/* The one look at a stop flag a signal handler sets (SIGINT/SIGTERM; may be
 * NULL): 0 while it is clear, else PLENA_E_INTERRUPTED with err set at
 * `where` ("interrupted (SIGINT/SIGTERM)"). */
int plena_err_if_stopped(const volatile sig_atomic_t *stop, const char *where,
                         struct plena_err *err);

/* "where: msg" (or just msg when where is empty), into buf. */
const char *plena_err_format(const struct plena_err *err, char *buf, unsigned long n);

/* The process exit code of a status (status.def); 1 for a value outside it. */
int plena_status_exit_code(enum plena_status code);
/* The first status (status.def order) with this exit code; PLENA_E_FAILED
 * for a code outside the table. For the exit status of a worker process. */
enum plena_status plena_status_from_exit_code(int exit_code);
/* The status's name ("PLENA_E_INPUT") and meaning ("invalid input (...)"). */
const char *plena_status_name(enum plena_status code);
const char *plena_status_meaning(enum plena_status code);
/* Of two statuses, the one with the higher exit code (the first on a tie):
 * "when several apply, the highest code wins". */
enum plena_status plena_status_worst(enum plena_status a, enum plena_status b);
/* The "exit:" lines every --help ends with, from status.def: one line per
 * exit code, "  N  meaning[; meaning]". */
const char *plena_status_help(char *buf, unsigned long n);

#endif
