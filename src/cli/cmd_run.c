/* plena run: flags (docs/cli.md "plena run", with the upstream aliases, one
 * table row each), summary lines (docs/timing.md "Summary lines"), exit codes
 * (docs/cli.md "Exit codes"). All work happens in the run session
 * (src/run/run.h); this file parses, prints and picks the exit status. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

struct run_cli {
    struct plena_run_opts o;
    const char *log_level; /* accepted for compatibility, unused */
};

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
        "--hbm-size", "SIZE", R, o.hbm_size, parse_hbm_size, "bytes with optional K, M or G suffix",
        "override CONFIG.HBM_SIZE: bytes, optional suffix K, M, G", .def_text = "CONFIG.HBM_SIZE"),
    PLENA_OPT_PATH_ROW("--dump-dir", "DIR", R, o.dump_dir, "where dumps go", .def = ".",
                       .def_text = "the current directory"),
    PLENA_OPT_CUSTOM_ROW(
        "--dump", "LIST", R, o.dump_mask, parse_dump,
        "a comma list of vram, mram, fpsram, intsram, hbm, or all or none",
        "dumps to write: a comma list of vram, mram, fpsram, intsram, hbm, or all, or none",
        .def = "vram,mram,fpsram,intsram"),
    PLENA_OPT_PATH_ROW("--asm|--stage-profile-asm", "FILE", R, o.asm_path,
                       "assembly source of a .mem program (labels); --stage-profile-asm without "
                       "--profile also writes ./stage_profile.json (upstream default)"),
    PLENA_OPT_PATH_ROW("--profile|--stage-profile-out", "FILE", R, o.profile_path,
                       "write the stage profile JSON (schema v4)"),
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
    PLENA_OPT_STR_ROW("--label", "NAME", R, o.label, "copied into run-stats run_label"),
    PLENA_OPT_PATH_ROW(
        "--settings", "FILE", R, o.settings_path, "settings file",
        .def_text = "$PLENA_SETTINGS_TOML, ./plena_settings.toml, ../plena_settings.toml, else "
                    "the built-in copy"),
    PLENA_OPT_PATH_ROW("--log-file", "FILE", R, o.log_path, "recorded in run-stats log_path"),
    PLENA_OPT_STR_ROW("--log-level", "LEVEL", R, log_level, "accepted for compatibility, ignored"),
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

static void print_topology(void *ctx, const struct plena_settings *s)
{
    (void)ctx;
    char buf[256];
    plena_run_format_topology(s, buf, sizeof buf);
    fputs(buf, stdout);
    fflush(stdout);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int cmd_run(void *opts, const struct plena_cli_args *a)
{
    struct run_cli *c = opts;
    struct plena_run_opts o = c->o;
    /* upstream default: --stage-profile-asm alone writes ./stage_profile.json */
    const char *asm_as = plena_opts_spelling(&run_spec, a->r, "--asm");
    if (asm_as && !strcmp(asm_as, "--stage-profile-asm") && !o.profile_path)
        o.profile_path = "stage_profile.json";
    if (o.profile_path && !o.asm_path && !ends_with(o.program_path, ".asm"))
        return plena_cli_usage_error(
            "run", "--profile needs stage labels: a .mem program needs --asm FILE");
    o.argc = a->argc + 1;
    char **cmdv = a->argv - 1; /* argv[-1] is the binary name (main passes argv + 1) */
    o.argv = cmdv;
    o.on_start = print_topology;

    struct plena_run_outcome out;
    struct plena_err err = {0};
    struct plena_asm_diags warnings;
    memset(&warnings, 0, sizeof warnings);
    o.asm_warnings = &warnings;
    int rc = plena_run_execute(&o, &out, &err);
    for (size_t i = 0; i < warnings.n; i++) {
        char line[512];
        fprintf(stderr, "%s\n", plena_asm_diag_format(&warnings, i, line, sizeof line));
    }
    if (warnings.n_total > warnings.n)
        fprintf(stderr, "plena run: %zu more assembler warnings not shown\n",
                warnings.n_total - warnings.n);
    plena_asm_diags_free(&warnings);
    if (out.status == PLENA_RUN_OUT_TRAPPED) fprintf(stderr, "%s\n", out.trap_message);
    if (out.status != PLENA_RUN_OUT_ERROR) {
        static char buf[4096];
        plena_run_format_summary(&out, buf, sizeof buf);
        fputs(buf, stdout);
        fflush(stdout);
    }
    if (rc) return plena_cli_report("run", &err);
    return plena_status_exit_code(out.code);
}

const struct plena_cli_cmd plena_cli_cmd_run = {.spec = &run_spec, .run = cmd_run};
