/* The progress line of cli/progress.h. Presentation only: the numbers come
 * from the library's callbacks (run session, replay batch). */
#include "cli/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "common/proc.h"

const struct plena_opt_enum plena_cli_progress_modes = {
    .names = (const char *const[]){"auto", "none", "always", NULL}};

void plena_cli_progress_init(struct plena_cli_progress *p, const char *cmd, int mode)
{
    p->cmd = cmd;
    p->on = mode == PLENA_CLI_PROGRESS_ALWAYS || (mode == PLENA_CLI_PROGRESS_AUTO && isatty(2));
    p->immediate = mode == PLENA_CLI_PROGRESS_ALWAYS;
    p->t0 = plena_proc_now();
    p->last = 0;
    p->shown = 0;
}

static void hms(double s, char *buf, size_t n)
{
    unsigned long t = s > 0 ? (unsigned long)(s + 0.5) : 0;
    snprintf(buf, n, "%02lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
}

void plena_cli_progress_update(struct plena_cli_progress *p, const char *phase, uint64_t done,
                               uint64_t total, const char *unit)
{
    if (!p || !p->on) return;
    double t = plena_proc_now(), el = t - p->t0;
    if (!p->immediate && el < 1.0) return;      /* short work shows nothing */
    if (p->shown && t - p->last < 0.25) return; /* at most 4 lines a second */
    p->last = t;
    double rate = el > 0 ? (double)done / el : 0;
    char line[320], eta[16];
    int n =
        snprintf(line, sizeof line, "plena %s: %s %llu", p->cmd, phase, (unsigned long long)done);
    if (total && n > 0 && (size_t)n < sizeof line) {
        hms(rate > 0 && total > done ? (double)(total - done) / rate : 0, eta, sizeof eta);
        snprintf(line + n, sizeof line - (size_t)n, "/%llu %s (%.1f%%) | %.3g %s/s | ETA %s",
                 (unsigned long long)total, unit, 100.0 * (double)done / (double)total, rate, unit,
                 eta);
    } else if (n > 0 && (size_t)n < sizeof line) {
        snprintf(line + n, sizeof line - (size_t)n, " %s | %.3g %s/s", unit, rate, unit);
    }
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    p->shown = 1;
}

void plena_cli_progress_end(struct plena_cli_progress *p)
{
    if (!p || !p->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->shown = 0;
}
