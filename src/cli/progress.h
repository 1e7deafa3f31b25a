/* One updating progress line on standard error for long work (plena moe,
 * plena replay; plena campaign has its own, src/cli/cmd_campaign.c):
 * "plena CMD: PHASE done/total UNIT (pct) | rate UNIT/s | ETA hh:mm:ss",
 * rewritten in place at most 4 times a second and erased at the end.
 * --progress auto (the default) shows it only when standard error is a
 * terminal and the work has run for a second; none never; always also
 * when standard error is a file or pipe, from the first update (tests). */
#ifndef PLENA_CLI_PROGRESS_H
#define PLENA_CLI_PROGRESS_H

#include <stdint.h>

#include "cli/opts.h"

enum plena_cli_progress_mode {
    PLENA_CLI_PROGRESS_AUTO = 0,
    PLENA_CLI_PROGRESS_NONE,
    PLENA_CLI_PROGRESS_ALWAYS
};
/* the spellings of --progress: auto, none, always */
extern const struct plena_opt_enum plena_cli_progress_modes;
#define PLENA_CLI_PROGRESS_ROW(T, f)                                                               \
    PLENA_OPT_ENUM_ROW("--progress", "MODE", T, f, &plena_cli_progress_modes,                      \
                       "progress line on standard error: auto (when it is a terminal and the "     \
                       "work takes over a second), none, always",                                  \
                       .def = "auto")

struct plena_cli_progress {
    const char *cmd;
    int on, immediate;
    double t0, last;
    int shown; /* a line is on the terminal */
};

void plena_cli_progress_init(struct plena_cli_progress *p, const char *cmd, int mode);
/* total 0: unknown (no percentage and ETA) */
void plena_cli_progress_update(struct plena_cli_progress *p, const char *phase, uint64_t done,
                               uint64_t total, const char *unit);
/* Erases the line (before the command prints its results). */
void plena_cli_progress_end(struct plena_cli_progress *p);

#endif
