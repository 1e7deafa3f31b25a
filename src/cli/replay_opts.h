/* The replay option rows shared by `plena replay` and `plena campaign`
 * (cli/replay_opts.c). Their offsets are relative to a struct
 * plena_replay_opts: a command puts that struct in its options and names its
 * offset as the group's base. */
#ifndef PLENA_CLI_REPLAY_OPTS_H
#define PLENA_CLI_REPLAY_OPTS_H

#include "cli/opts.h"
#include "replay/replay.h"

/* Ends with a {NULL} row: groups over it give n_rows 0. */
extern const struct plena_opt plena_cli_replay_rows[];
/* The same for the rows outside the fingerprint that campaign workers also
 * get (the weight cache). */
extern const struct plena_opt plena_cli_replay_worker_rows[];

/* plena_replay_opts_default. */
void plena_cli_replay_init(struct plena_replay_opts *o);

#endif
