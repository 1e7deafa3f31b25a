/* plena: git-style dispatcher over the subcommands of commands.def
 * (cli/cli.c holds the table, dispatch and the help texts). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/fileio.h"

static int overview(FILE *f, enum plena_status st)
{
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_cli_overview(&b)) {
        plena_buf_free(&b);
        return plena_cli_nomem("help");
    }
    fwrite(b.data, 1, b.len, f);
    plena_buf_free(&b);
    return plena_status_exit_code(st);
}

int main(int argc, char **argv)
{
    if (argc < 2) return overview(stderr, PLENA_E_USAGE);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("plena %s\n", PLENA_VERSION);
        return plena_status_exit_code(PLENA_OK);
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc >= 3 && strcmp(cmd, "help") == 0) {
            for (size_t i = 0; i < plena_cli_n_commands; i++)
                if (!strcmp(plena_cli_commands[i].name, argv[2])) {
                    char *sub[] = {argv[2], "--help", NULL};
                    return plena_cli_run(&plena_cli_commands[i], 2, sub);
                }
            fprintf(stderr, "plena: unknown command '%s'\n", argv[2]);
            return plena_status_exit_code(PLENA_E_USAGE);
        }
        return overview(stdout, PLENA_OK);
    }
    for (size_t i = 0; i < plena_cli_n_commands; i++)
        if (!strcmp(plena_cli_commands[i].name, cmd))
            return plena_cli_run(&plena_cli_commands[i], argc - 1, argv + 1);
    fprintf(stderr, "plena: unknown command '%s'\n", cmd);
    overview(stderr, PLENA_E_USAGE);
    return plena_status_exit_code(PLENA_E_USAGE);
}
