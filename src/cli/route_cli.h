/* plena trace route / tiny-checkpoint: specs and bodies for cmd_trace.c's
 * subcommand table (cli/route_cli.c). */
#ifndef PLENA_CLI_ROUTE_CLI_H
#define PLENA_CLI_ROUTE_CLI_H

#include "cli/cli.h"
#include "cli/opts.h"

extern const struct plena_cmd_spec plena_cli_trace_route_spec, plena_cli_trace_tiny_spec,
    plena_cli_campaign_route_spec;
int plena_cli_campaign_route(void *opts, const struct plena_cli_args *a);
int plena_cli_trace_route(void *opts, const struct plena_cli_args *a);
int plena_cli_trace_tiny(void *opts, const struct plena_cli_args *a);

#endif
