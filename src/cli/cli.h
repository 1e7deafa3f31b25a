/* Shared helpers of the CLI. The CLI is the only code that prints to the
 * terminal or chooses exit codes (spec/timing-and-profile.md 8.3). */
#ifndef PLENA_CLI_CLI_H
#define PLENA_CLI_CLI_H

#include <stddef.h>

#include "common/err.h"

#define PLENA_CMD(name, help) int plena_cmd_##name(int argc, char **argv);
#include "cli/commands.def"
#undef PLENA_CMD

/* Prints "plena: <where>: <msg>" to stderr and returns the exit code of the
 * error's status. */
int plena_cli_report(const char *cmd, const struct plena_err *err);
/* Prints "plena <cmd>: <msg>\nTry 'plena <cmd> --help'." and returns 2. */
int plena_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Reads all of standard input into a NUL-terminated buffer (plena_free);
 * -1 when out of memory. Callers word the error for their command. */
int plena_cli_read_stdin(char **data, size_t *len);
/* A command that is listed but not built in this version: message, exit 2. */
int plena_cli_not_built(const char *cmd);

#endif
