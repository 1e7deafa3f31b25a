/* plena replay: placeholder until the module behind it lands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int plena_cmd_replay(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: plena replay ...\n(not built in this version)\n");
        return 0;
    }
    return plena_cli_not_built("replay");
}
