/* Shared helpers of the CLI. The CLI is the only code that prints to the
 * terminal or chooses exit codes (docs/cli.md "Exit codes"); every exit
 * code it returns is plena_status_exit_code() of a status (common/status.def).
 * Options are parsed by the table parser of cli/opts.h. */
#ifndef PLENA_CLI_CLI_H
#define PLENA_CLI_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/opts.h"
#include "common/err.h"
#include "settings/settings.h"

/* What a command body gets besides its options: its spec, the parse result
 * (plena_opts_given, plena_opts_spelling) and argv as given (argv[0] is the
 * command's or subcommand's name). */
struct plena_cli_args {
    const struct plena_cmd_spec *spec;
    const struct plena_opts_result *r;
    int argc;
    char **argv;
};
/* A command body. The dispatcher parses argv with the spec into opts (a
 * fresh struct of spec->opts_size bytes), answers --help and usage errors
 * itself, calls the body, and frees opts (plena_opts_free) after it returns,
 * so a body may return from anywhere. Returns the exit code. */
typedef int (*plena_cli_run_fn)(void *opts, const struct plena_cli_args *a);

/* A subcommand of a command (`plena trace validate`). */
struct plena_cli_sub {
    const char *name;
    plena_cli_run_fn run;
    const struct plena_cmd_spec *spec;
};

/* What cmd_<name>.c exports as plena_cli_cmd_<name>: a command with options
 * of its own (spec, fn), subcommands, or both (`plena replay` and `plena
 * replay export`). Name and one-line help are the row of commands.def. */
struct plena_cli_cmd {
    const struct plena_cmd_spec *spec;
    plena_cli_run_fn run;
    /* instead of run: a function that parses argv[1..] with spec itself
     * (plena_cli_parse); argv[0] is the command's name */
    int (*fn)(int argc, char **argv);
    const struct plena_cli_sub *subs;
    size_t n_subs;
    const char *const *not_built; /* subcommand names listed but not built (NULL-terminated) */
    const char *description;      /* the group help's paragraph (subcommands only) */
    void (*notes_fn)(struct plena_buf *b);
};

#define PLENA_CMD(name, help) extern const struct plena_cli_cmd plena_cli_cmd_##name;
#include "cli/commands.def"
#undef PLENA_CMD

/* The rows of commands.def, in order. */
struct plena_cli_entry {
    const char *name, *help;
    const struct plena_cli_cmd *cmd;
};
extern const struct plena_cli_entry plena_cli_commands[];
extern const size_t plena_cli_n_commands;

/* Runs a command: picks the subcommand or the command's own function, and
 * answers --help / a missing or unknown subcommand. Returns the exit code. */
int plena_cli_run(const struct plena_cli_entry *e, int argc, char **argv);
/* `plena help`: every command and subcommand with its one-line help. */
int plena_cli_overview(struct plena_buf *b);
/* The --help of a command with subcommands (its own options, if any, are in
 * spec's help). */
int plena_cli_group_help(const struct plena_cli_entry *e, struct plena_buf *b);

/* Parses argv with spec into opts. Returns 0 to go on; otherwise the caller
 * returns *exit_code at once: --help was printed (0), the one usage message
 * was printed (2), out of memory (6). */
int plena_cli_parse(const struct plena_cmd_spec *spec, int argc, char **argv, void *opts,
                    struct plena_opts_result *r, int *exit_code);

/* --timeline-detail of plena run, moe and replay (docs/timeline.md): one
 * spelling table (timeline.h) and one row, placed into a command's own struct. */
extern const struct plena_opt_enum plena_cli_timeline_details;
#define PLENA_CLI_TIMELINE_DETAIL_HELP                                                             \
    "below the stage regions: stage (nothing), group (consecutive instructions of one opcode "     \
    "merged) or instruction; merged further automatically to bound the file (docs/timeline.md)"
#define PLENA_CLI_TIMELINE_DETAIL_ROW(T, f, need)                                                  \
    PLENA_OPT_ENUM_ROW("--timeline-detail", "D", T, f, &plena_cli_timeline_details,                \
                       PLENA_CLI_TIMELINE_DETAIL_HELP, .def = "group", .needs = (need))

/* Prints "plena <cmd>: <where>: <msg>" to stderr and returns the exit code of
 * the error's status. */
int plena_cli_report(const char *cmd, const struct plena_err *err);
/* SIGINT/SIGTERM set plena_cli_stop (the library polls it and stops with
 * what was complete kept, exit 5); every long-running command installs it.
 * No SA_RESTART, so blocking calls return EINTR. */
#include <signal.h>
extern volatile sig_atomic_t plena_cli_stop;
void plena_cli_catch_stop_signals(void);
/* The default for every command (installed before it runs; a long-running
 * command replaces it with plena_cli_catch_stop_signals): SIGINT/SIGTERM
 * unlink the temporaries in flight and exit 5 at once, so a short command
 * (asm, disasm, trace validate, ...) is interrupted with nothing half-written. */
void plena_cli_exit_on_stop_signals(void);
/* Prints "plena <cmd>: <msg>\nTry 'plena <cmd> --help'." and returns the exit
 * code of PLENA_E_USAGE. */
int plena_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* --weight-cache DIR (NULL: not given) naming something other than a
 * directory: the usage error, once, before any build (each build would
 * refuse it as an output error); else 0. */
int plena_cli_check_weight_cache(const char *dir, const char *cmd);
/* Prints the settings' warnings (clamped values, unknown keys) to stderr as
 * "plena <cmd>: warning: <text>", then how many were not kept; the same
 * lines also go to `copy` when it is not NULL (a --log-file). */
void plena_cli_settings_warnings(const char *cmd, const struct plena_settings *s, FILE *copy);
/* Prints "plena <cmd>: out of memory" and returns the exit code of
 * PLENA_E_NOMEM. */
int plena_cli_nomem(const char *cmd);
/* A command that is listed but not built in this version: message, exit 2. */
int plena_cli_not_built(const char *cmd);
/* Writes b to stdout; PLENA_E_OUTPUT when that fails. */
enum plena_status plena_cli_print(const struct plena_buf *b);

#endif
