/* plena: git-style dispatcher over the subcommands of commands.def. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/fileio.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
#define PLENA_CMD(name, help) {#name, plena_cmd_##name, help},
#include "cli/commands.def"
#undef PLENA_CMD
};

static void usage(FILE *f)
{
    fprintf(f, "usage: plena <command> [options]\n"
               "       plena <command> --help\n"
               "       plena --version\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-10s %s\n", "help", "this text, or `plena help <command>`");
}

int plena_cli_report(const char *cmd, const struct plena_err *err)
{
    char buf[1200];
    fprintf(stderr, "plena %s: %s\n", cmd, plena_err_format(err, buf, sizeof buf));
    return plena_status_exit_code(err->code);
}

int plena_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "plena %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'plena %s --help'.\n", cmd);
    va_end(ap);
    return 2;
}

int plena_cli_read_stdin(char **data, size_t *len)
{
    struct plena_buf b;
    plena_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        plena_buf_append(&b, chunk, n);
    if (b.failed || plena_buf_append(&b, "", 1)) {
        plena_buf_free(&b);
        return -1;
    }
    *data = b.data;
    *len = b.len - 1;
    return 0;
}

int plena_cli_not_built(const char *cmd)
{
    fprintf(stderr, "plena %s: not built in this version of plena\n", cmd);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("plena %s\n", PLENA_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc >= 3 && strcmp(cmd, "help") == 0) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(commands[i].name, argv[2])) {
                    char *sub[] = {argv[2], "--help", NULL};
                    return commands[i].fn(2, sub);
                }
            fprintf(stderr, "plena: unknown command '%s'\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, cmd)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "plena: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
