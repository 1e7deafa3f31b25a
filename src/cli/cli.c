/* The CLI's shared helpers: the command table (commands.def), dispatch to
 * subcommands, `plena help`, the group --help texts, printing a parse result
 * of cli/opts.h, and the report/usage-error printers. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "settings/settings.h"
#include "timeline/timeline.h"

const struct plena_opt_enum plena_cli_timeline_details = {.names = plena_timeline_detail_names};

const struct plena_cli_entry plena_cli_commands[] = {
#define PLENA_CMD(name, help) {#name, help, &plena_cli_cmd_##name},
#include "cli/commands.def"
#undef PLENA_CMD
};
const size_t plena_cli_n_commands = sizeof plena_cli_commands / sizeof plena_cli_commands[0];

int plena_cli_report(const char *cmd, const struct plena_err *err)
{
    char buf[1200];
    fprintf(stderr, "plena %s: %s\n", cmd, plena_err_format(err, buf, sizeof buf));
    return plena_status_exit_code(err->code);
}

volatile sig_atomic_t plena_cli_stop;

static void on_stop_signal(int sig)
{
    (void)sig;
    plena_cli_stop = 1;
}

/* SIGINT and SIGTERM to `handler`, no SA_RESTART. */
static void on_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void plena_cli_catch_stop_signals(void)
{
    on_stop_signals(on_stop_signal);
}

static int stop_exit_code;

static void on_stop_signal_exit(int sig)
{
    (void)sig;
    plena_file_unlink_pending();
    _exit(stop_exit_code);
}

void plena_cli_exit_on_stop_signals(void)
{
    stop_exit_code = plena_status_exit_code(PLENA_E_INTERRUPTED);
    on_stop_signals(on_stop_signal_exit);
}

void plena_cli_settings_warnings(const char *cmd, const struct plena_settings *s, FILE *copy)
{
    unsigned kept =
        s->n_warnings < PLENA_SETTINGS_MAX_WARNINGS ? s->n_warnings : PLENA_SETTINGS_MAX_WARNINGS;
    for (int k = 0; k < 2; k++) {
        FILE *f = k ? copy : stderr;
        if (!f) continue;
        for (unsigned i = 0; i < kept; i++)
            fprintf(f, "plena %s: warning: %s\n", cmd, s->warnings[i]);
        if (s->n_warnings > kept)
            fprintf(f, "plena %s: %u more settings warnings not shown\n", cmd,
                    s->n_warnings - kept);
    }
}

int plena_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "plena %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'plena %s --help'.\n", cmd);
    va_end(ap);
    return plena_status_exit_code(PLENA_E_USAGE);
}

int plena_cli_nomem(const char *cmd)
{
    fprintf(stderr, "plena %s: out of memory\n", cmd);
    return plena_status_exit_code(PLENA_E_NOMEM);
}

int plena_cli_not_built(const char *cmd)
{
    fprintf(stderr, "plena %s: not built in this version of plena\n", cmd);
    return plena_status_exit_code(PLENA_E_USAGE);
}

enum plena_status plena_cli_print(const struct plena_buf *b)
{
    if (b->failed) return PLENA_E_NOMEM;
    if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len) return PLENA_E_OUTPUT;
    return fflush(stdout) ? PLENA_E_OUTPUT : PLENA_OK;
}

int plena_cli_parse(const struct plena_cmd_spec *spec, int argc, char **argv, void *opts,
                    struct plena_opts_result *r, int *exit_code)
{
    enum plena_status st = plena_opts_parse(spec, argc, argv, opts, r);
    if (st == PLENA_OK && !r->help) return 0;
    if (st == PLENA_OK) {
        struct plena_buf b;
        plena_buf_init(&b);
        st = plena_opts_help(spec, &b) ? PLENA_E_NOMEM : plena_cli_print(&b);
        plena_buf_free(&b);
        *exit_code = st == PLENA_E_NOMEM ? plena_cli_nomem(spec->name) : plena_status_exit_code(st);
    } else if (st == PLENA_E_USAGE) {
        *exit_code = plena_cli_usage_error(spec->name, "%s", r->msg);
    } else if (st == PLENA_E_NOMEM) {
        *exit_code = plena_cli_nomem(spec->name);
    } else {
        fprintf(stderr, "plena %s: %s\n", spec->name, r->msg);
        *exit_code = plena_status_exit_code(st);
    }
    plena_opts_free(spec, opts);
    return 1;
}

/* Parses argv with spec into a fresh options struct, runs the body, frees. */
static int run_parsed(const struct plena_cmd_spec *spec, plena_cli_run_fn run, int argc,
                      char **argv)
{
    void *opts = plena_calloc(1, spec->opts_size ? spec->opts_size : 1);
    struct plena_opts_result *r = plena_calloc(1, sizeof *r);
    int code;
    if (!opts || !r) {
        code = plena_cli_nomem(spec->name);
    } else if (!plena_cli_parse(spec, argc, argv, opts, r, &code)) {
        const struct plena_cli_args a = {spec, r, argc, argv};
        code = run(opts, &a);
        plena_opts_free(spec, opts);
    }
    plena_free(r);
    plena_free(opts);
    return code;
}

/* ---- commands with subcommands ---- */

static void sub_names(const struct plena_cli_cmd *c, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < c->n_subs && off < n; i++) {
        const char *sep = i == 0 ? "" : i + 1 == c->n_subs ? " or " : ", ";
        int w = snprintf(buf + off, n - off, "%s%s", sep, c->subs[i].name);
        if (w > 0) off += (size_t)w;
    }
}

int plena_cli_group_help(const struct plena_cli_entry *e, struct plena_buf *b)
{
    const struct plena_cli_cmd *c = e->cmd;
    char exits[1024];
    plena_buf_printf(b, "usage: plena %s <subcommand> [options]\n", e->name);
    plena_buf_puts(b, "\n");
    plena_opts_put_wrapped(b, c->description ? c->description : e->help, 0, 0);
    plena_buf_puts(b, "\nsubcommands:\n");
    for (size_t i = 0; i < c->n_subs; i++)
        plena_buf_printf(b, "  %-14s %s\n", c->subs[i].name, c->subs[i].spec->summary);
    if (c->not_built && c->not_built[0]) {
        plena_buf_puts(b, "  not built in this version:");
        for (size_t i = 0; c->not_built[i]; i++)
            plena_buf_printf(b, "%s %s", i ? "," : "", c->not_built[i]);
        plena_buf_puts(b, "\n");
    }
    plena_buf_printf(b, "\n`plena %s <subcommand> --help` lists its options.\n", e->name);
    if (c->notes_fn) {
        plena_buf_puts(b, "\n");
        c->notes_fn(b);
    }
    plena_buf_printf(b, "\n%s", plena_status_help(exits, sizeof exits));
    return b->failed ? -1 : 0;
}

int plena_cli_run(const struct plena_cli_entry *e, int argc, char **argv)
{
    const struct plena_cli_cmd *c = e->cmd;
    const char *sub = argc >= 2 ? argv[1] : NULL;
    plena_cli_exit_on_stop_signals();
    if (c->n_subs && sub && sub[0] != '-') {
        for (size_t i = 0; i < c->n_subs; i++)
            if (!strcmp(c->subs[i].name, sub))
                return run_parsed(c->subs[i].spec, c->subs[i].run, argc - 1, argv + 1);
        for (size_t i = 0; c->not_built && c->not_built[i]; i++)
            if (!strcmp(c->not_built[i], sub)) {
                char nm[128];
                snprintf(nm, sizeof nm, "%s %s", e->name, sub);
                return plena_cli_not_built(nm);
            }
    }
    if (c->spec) return c->run ? run_parsed(c->spec, c->run, argc, argv) : c->fn(argc, argv);
    char names[512];
    sub_names(c, names, sizeof names);
    if (sub && (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help"))) {
        struct plena_buf b;
        plena_buf_init(&b);
        enum plena_status st = plena_cli_group_help(e, &b) ? PLENA_E_NOMEM : plena_cli_print(&b);
        plena_buf_free(&b);
        return st == PLENA_E_NOMEM ? plena_cli_nomem(e->name) : plena_status_exit_code(st);
    }
    if (!sub) return plena_cli_usage_error(e->name, "expected a subcommand: %s", names);
    if (sub[0] == '-')
        return plena_cli_usage_error(e->name, "expected a subcommand (%s) before '%s'", names, sub);
    return plena_cli_usage_error(e->name, "unknown subcommand '%s' (expected %s)", sub, names);
}

int plena_cli_overview(struct plena_buf *b)
{
    char exits[1024];
    plena_buf_puts(b, "usage: plena <command> [options]\n"
                      "       plena <command> --help\n"
                      "       plena --version\n\n"
                      "commands:\n");
    for (size_t i = 0; i < plena_cli_n_commands; i++) {
        const struct plena_cli_entry *e = &plena_cli_commands[i];
        plena_buf_printf(b, "  %-10s %s\n", e->name, e->help);
        for (size_t k = 0; k < e->cmd->n_subs; k++)
            plena_buf_printf(b, "    %-14s %s\n", e->cmd->subs[k].name,
                             e->cmd->subs[k].spec->summary);
    }
    plena_buf_printf(b, "  %-10s %s\n", "help", "this text, or `plena help <command>`");
    plena_buf_printf(b, "\n%s", plena_status_help(exits, sizeof exits));
    return b->failed ? -1 : 0;
}

int plena_cli_check_weight_cache(const char *dir, const char *cmd)
{
    struct stat st;
    if (dir && !*dir)
        return plena_cli_usage_error(cmd, "--weight-cache: expected a directory, got ''");
    if (dir && !stat(dir, &st) && !S_ISDIR(st.st_mode))
        return plena_cli_usage_error(cmd, "--weight-cache %s: not a directory", dir);
    return 0;
}
