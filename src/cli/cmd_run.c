/* plena run: flags (docs/cli.md "plena run", with the upstream aliases, one
 * table row each), summary lines (docs/timing.md "Summary lines"), exit codes
 * (docs/cli.md "Exit codes"). All work happens in the run session
 * (src/run/run.h); this file parses, prints and picks the exit status. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

struct run_cli {
    struct plena_run_opts o;
    const char *log_level; /* upstream --log-level: only its HBM-dump effect is reproduced */
};

/* upstream's --log-level values (clap ValueEnum, lower case) */
static const char *const log_level_names[] = {"trace", "debug", "info", "warn",
                                              "error", "off",   NULL};
static const struct plena_opt_enum log_levels = {.names = log_level_names};

static int parse_hbm_size(const struct plena_opt *row, const char *v, void *base, char *msg,
                          size_t n)
{
    (void)row, (void)msg, (void)n;
    struct run_cli *c = base;
    return plena_run_parse_size(v, &c->o.hbm_size) || c->o.hbm_size == 0 ? -1 : 0;
}

static int parse_dump(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row, (void)msg, (void)n;
    struct run_cli *c = base;
    return plena_run_parse_dump_list(v, &c->o.dump_mask);
}

static const char *hbm_model_name(int v)
{
    return plena_settings_hbm_model_name((enum plena_hbm_model_kind)v);
}
static const struct plena_opt_enum hbm_models = {.name = hbm_model_name};

#define R struct run_cli
/* docs/cli.md "plena run", upstream aliases after the '|' */
static const struct plena_opt run_rows[] = {
    PLENA_OPT_PATH_ROW("--program|--opcode", "FILE", R, o.program_path,
                       "machine code (.mem) or assembly (.asm)", .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_PATH_ROW("--hbm", "FILE", R, o.hbm_path, "HBM image"),
    PLENA_OPT_PATH_ROW("--fpsram", "FILE", R, o.fpsram_path, "FP SRAM preload (fp16)"),
    PLENA_OPT_PATH_ROW("--intsram", "FILE", R, o.intsram_path, "INT SRAM preload (u32)"),
    PLENA_OPT_PATH_ROW("--vram", "FILE", R, o.vram_path, "VRAM preload (bf16)"),
    PLENA_OPT_CUSTOM_ROW(
        "--hbm-size", "SIZE", R, o.hbm_size, parse_hbm_size,
        "a positive multiple of 64 bytes up to 2^48 (256T), with optional suffix K, KiB, KB, M, "
        "MiB, MB, G, GiB, GB, T, TiB or TB",
        "override CONFIG.HBM_SIZE: bytes, optional suffix K/KiB/KB, M/MiB/MB, G/GiB/GB, T/TiB/TB "
        "(any case, all powers of 1024, as upstream)",
        .def_text = "CONFIG.HBM_SIZE"),
    PLENA_OPT_PATH_ROW("--dump-dir", "DIR", R, o.dump_dir, "where dumps go", .def = ".",
                       .def_text = "the current directory"),
    PLENA_OPT_CUSTOM_ROW(
        "--dump", "LIST", R, o.dump_mask, parse_dump,
        "a comma list of vram, mram, fpsram, intsram, hbm, or all or none",
        "dumps to write: a comma list of vram, mram, fpsram, intsram, hbm, or all, or none",
        .def = "vram,mram,fpsram,intsram"),
    PLENA_OPT_PATH_ROW("--asm|--stage-profile-asm", "FILE", R, o.asm_path,
                       "assembly source of a .mem program (labels); a label count that differs "
                       "from the program's is an error, under the upstream spelling "
                       "--stage-profile-asm a warning (unlabelled pcs count as 'other'), and "
                       "--stage-profile-asm without --profile also writes ./stage_profile.json "
                       "(upstream default)"),
    PLENA_OPT_PATH_ROW("--profile|--stage-profile-out", "FILE", R, o.profile_path,
                       "write the stage profile JSON (schema v4); a .mem program without --asm "
                       "is a usage error, except that --stage-profile-out is then ignored with "
                       "a warning, as upstream"),
    PLENA_OPT_PATH_ROW("--stats", "FILE", R, o.stats_path, "write the run-stats JSON (schema v2)"),
    PLENA_OPT_PATH_ROW("--timeline", "FILE", R, o.timeline_path,
                       "write the Perfetto / chrome://tracing timeline JSON (docs/timeline.md)"),
    PLENA_CLI_TIMELINE_DETAIL_ROW(R, o.timeline_detail, "--timeline"),
    PLENA_OPT_FLAG_ROW("--overlap|--experimental-overlap-prefetch-compute", R, o.overlap,
                       "enable the prefetch/compute overlap overlay"),
    PLENA_OPT_ENUM_ROW("--hbm-model", "NAME", R, o.hbm_model, &hbm_models, "override HBM.MODEL",
                       .def_text = "HBM.MODEL of the settings"),
    PLENA_OPT_UINT_ROW("--threads", "N", R, o.threads, 1, 4096,
                       "host threads (never changes outputs)", .def = "1"),
    PLENA_OPT_UINT_ROW("--max-instructions", "N", R, o.max_instructions, 0, UINT64_MAX,
                       "stop (as a trap, outputs written) after N instructions; 0: no limit",
                       .def = "0"),
    PLENA_OPT_DOUBLE_ROW("--max-seconds", "S", R, o.max_seconds, 0, INFINITY,
                         "stop (as a trap, outputs written) after S seconds of wall time; 0: no "
                         "limit",
                         .def = "0"),
    PLENA_OPT_STR_ROW("--label", "NAME", R, o.label, "copied into run-stats run_label"),
    PLENA_OPT_PATH_ROW(
        "--settings", "FILE", R, o.settings_path, "settings file",
        .def_text = "$PLENA_SETTINGS_TOML, ./plena_settings.toml, ../plena_settings.toml, else "
                    "the built-in copy"),
    PLENA_OPT_PATH_ROW("--log-file", "FILE", R, o.log_path,
                       "also write every line plena run prints (warnings, Topology, summary) to "
                       "FILE, appending as upstream; its directory must exist; recorded in "
                       "run-stats log_path"),
    PLENA_OPT_CHOICE_ROW("--log-level", "LEVEL", R, log_level, &log_levels,
                         "upstream log filter: debug or trace also write hbm_dump.bin into the "
                         "dump directory, as RUST_LOG / PLENA_EMULATOR_RUST_LOG enabling "
                         "transactional_emulator::runner=debug do (unless --dump is given)",
                         .def_text = "$RUST_LOG, else $PLENA_EMULATOR_RUST_LOG, else no HBM dump"),
};
#undef R

static void run_init(void *p)
{
    struct run_cli *c = p;
    c->o.hbm_model = -1;
}

static const struct plena_cmd_spec run_spec = {
    .name = "run",
    .summary = "run a program on the emulator (functional, timing, profile)",
    .description = "Runs a program on the emulator with timing: the Topology line, then the "
                   "summary lines (docs/timing.md \"Summary lines\") on standard output; the "
                   "dumps, and the profile and run-stats JSON when asked for.",
    PLENA_CMD_ROWS(run_rows),
    .init = run_init,
    .opts_size = sizeof(struct run_cli),
};

/* What plena run prints also goes to --log-file (upstream's file layer
 * gets every log line the terminal does). */
struct run_ctx {
    FILE *log;
    const struct plena_run_outcome *out;
    const char *asm_path;
};

static void emit(const struct run_ctx *x, FILE *stream, const char *text)
{
    fputs(text, stream);
    fflush(stream);
    if (x->log) fputs(text, x->log);
}

static void print_topology(void *ctx, const struct plena_settings *s)
{
    const struct run_ctx *x = ctx;
    plena_cli_settings_warnings("run", s, x->log); /* upstream warns as settings are first read */
    if (x->out->asm_label_mismatch) {
        /* upstream stage_profile.rs warns and goes on */
        char w[1024];
        snprintf(w, sizeof w,
                 "plena run: warning: %s: stage profile ASM label count %llu differs from the "
                 "decoded opcode count %llu; instructions without a label count as 'other' "
                 "(as upstream)\n",
                 x->asm_path, (unsigned long long)x->out->asm_label_count,
                 (unsigned long long)x->out->program_instructions);
        emit(x, stderr, w);
    }
    char buf[256];
    plena_run_format_topology(s, buf, sizeof buf);
    emit(x, stdout, buf);
}

/* Upstream --log-file: the parent directory must exist; the file is opened
 * for appending (tracing_appender::rolling::never). */
static int open_log(const char *path, FILE **f)
{
    *f = NULL;
    if (!path) return 0;
    char parent[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == path)
        snprintf(parent, sizeof parent, "/");
    else
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    struct plena_err e = {0};
    struct stat st;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        PLENA_FAIL(&e, PLENA_E_USAGE, "--log-file", "must include a file name, found '%s'", path);
        return plena_cli_report("run", &e);
    }
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
        PLENA_FAIL(&e, PLENA_E_OUTPUT, "--log-file", "parent directory does not exist: %s", parent);
        return plena_cli_report("run", &e);
    }
    *f = fopen(path, "a");
    if (!*f) {
        PLENA_FAIL(&e, PLENA_E_OUTPUT, path, "cannot open the log file: %s", strerror(errno));
        return plena_cli_report("run", &e);
    }
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* The upstream emulator writes hbm_dump.bin when DEBUG is enabled for its
 * runner module: --log-level fully overrides RUST_LOG; the harnesses pass
 * PLENA_EMULATOR_RUST_LOG on as RUST_LOG, so plena reads it when RUST_LOG
 * is unset. Unlike upstream (whose unset default is debug, dumping all of
 * HBM_SIZE), no filter at all means no HBM dump. */
static int upstream_wants_hbm_dump(const char *log_level)
{
    const char *f = log_level;
    if (!f) f = getenv("RUST_LOG");
    if (!f || !*f) f = getenv("PLENA_EMULATOR_RUST_LOG");
    if (!f || !*f) return 0;
    int lvl = plena_run_log_filter_level(f, PLENA_RUN_UPSTREAM_RUNNER_TARGET);
    return lvl == -2 || lvl >= 4; /* -2: no directive, upstream's default debug */
}

static int cmd_run(void *opts, const struct plena_cli_args *a)
{
    struct run_cli *c = opts;
    struct plena_run_opts o = c->o;
    if (!plena_opts_spelling(&run_spec, a->r, "--dump") && upstream_wants_hbm_dump(c->log_level))
        o.dump_mask |= PLENA_DUMP_HBM;
    /* upstream default: --stage-profile-asm alone writes ./stage_profile.json,
     * and a label count that differs from the program is a warning there */
    const char *asm_as = plena_opts_spelling(&run_spec, a->r, "--asm");
    int upstream_asm = asm_as && !strcmp(asm_as, "--stage-profile-asm");
    if (upstream_asm && !o.profile_path) o.profile_path = "stage_profile.json";
    o.asm_count_mismatch_ok = upstream_asm;
    const char *prof_as = plena_opts_spelling(&run_spec, a->r, "--profile");
    if (o.profile_path && !o.asm_path && !ends_with(o.program_path, ".asm")) {
        if (!prof_as || strcmp(prof_as, "--stage-profile-out"))
            return plena_cli_usage_error(
                "run", "--profile needs stage labels: a .mem program needs --asm FILE");
        /* upstream builds a stage profile only from --stage-profile-asm */
        fprintf(stderr, "plena run: warning: --stage-profile-out without --stage-profile-asm is "
                        "ignored (as upstream): no stage profile written\n");
        o.profile_path = NULL;
    }
    struct run_ctx x = {NULL, NULL, o.asm_path};
    int lrc = open_log(o.log_path, &x.log);
    if (lrc) return lrc;
    o.argc = a->argc + 1;
    char **cmdv = a->argv - 1; /* argv[-1] is the binary name (main passes argv + 1) */
    o.argv = cmdv;
    o.on_start = print_topology;
    o.on_start_ctx = &x;
    /* SIGINT/SIGTERM: the emulator stops at its next check, the outputs
     * are written and the exit code is 5 */
    o.stop = &plena_cli_stop;
    plena_cli_catch_stop_signals();

    struct plena_run_outcome out;
    x.out = &out;
    struct plena_err err = {0};
    struct plena_asm_diags warnings;
    memset(&warnings, 0, sizeof warnings);
    o.asm_warnings = &warnings;
    int rc = plena_run_execute(&o, &out, &err);
    char line[1024];
    for (size_t i = 0; i < warnings.n; i++) {
        size_t l = strlen(plena_asm_diag_format(&warnings, i, line, sizeof line - 1));
        line[l] = '\n', line[l + 1] = 0;
        emit(&x, stderr, line);
    }
    if (warnings.n_total > warnings.n) {
        snprintf(line, sizeof line, "plena run: %zu more assembler warnings not shown\n",
                 warnings.n_total - warnings.n);
        emit(&x, stderr, line);
    }
    plena_asm_diags_free(&warnings);
    if (out.status == PLENA_RUN_OUT_TRAPPED) {
        snprintf(line, sizeof line, "%s\n", out.trap_message);
        emit(&x, stderr, line);
    }
    if (out.status != PLENA_RUN_OUT_ERROR) {
        static char buf[4096];
        plena_run_format_summary(&out, buf, sizeof buf);
        emit(&x, stdout, buf);
    }
    if (rc) {
        char eb[1200];
        snprintf(line, sizeof line, "plena run: %s\n", plena_err_format(&err, eb, sizeof eb));
        if (x.log) fputs(line, x.log);
    }
    if (x.log && fclose(x.log) != 0) {
        struct plena_err le = {0};
        PLENA_FAIL(&le, PLENA_E_OUTPUT, o.log_path, "writing the log file failed");
        if (!rc) return plena_cli_report("run", &le);
    }
    if (rc) return plena_cli_report("run", &err);
    return plena_status_exit_code(out.code);
}

const struct plena_cli_cmd plena_cli_cmd_run = {.spec = &run_spec, .run = cmd_run};
