/* plena run: flags of spec/timing-and-profile.md 8.1 (with the upstream
 * aliases), summary lines of 8.2, exit codes of 8.3. All work happens in
 * the run session (src/run/run.h); this file parses, prints and picks the
 * exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "run/run.h"

enum opt_id {
    O_PROGRAM,
    O_HBM,
    O_FPSRAM,
    O_INTSRAM,
    O_VRAM,
    O_HBM_SIZE,
    O_DUMP_DIR,
    O_DUMP,
    O_ASM,
    O_PROFILE,
    O_STATS,
    O_OVERLAP,
    O_HBM_MODEL,
    O_THREADS,
    O_LABEL,
    O_SETTINGS,
    O_LOG_FILE,
    O_LOG_LEVEL,
    O_HELP
};

/* One row per spelling: the table is the parser and the help text. */
static const struct {
    const char *flag;
    enum opt_id id;
    int has_arg;
    const char *help; /* NULL for aliases */
} opts[] = {
    {"--program", O_PROGRAM, 1, "FILE  machine code (.mem) or assembly (.asm)"},
    {"--opcode", O_PROGRAM, 1, NULL},
    {"--hbm", O_HBM, 1, "FILE  HBM image"},
    {"--fpsram", O_FPSRAM, 1, "FILE  FP SRAM preload (fp16)"},
    {"--intsram", O_INTSRAM, 1, "FILE  INT SRAM preload (u32)"},
    {"--vram", O_VRAM, 1, "FILE  VRAM preload (bf16)"},
    {"--hbm-size", O_HBM_SIZE, 1, "SIZE  override CONFIG.HBM_SIZE (suffix K, M, G)"},
    {"--dump-dir", O_DUMP_DIR, 1, "DIR  where dumps go (default: current directory)"},
    {"--dump", O_DUMP, 1,
     "LIST  vram,mram,fpsram,intsram,hbm | all | none (default: the four SRAM dumps)"},
    {"--asm", O_ASM, 1, "FILE  assembly source of a .mem program (labels)"},
    {"--stage-profile-asm", O_ASM, 1, NULL},
    {"--profile", O_PROFILE, 1, "FILE  write the stage profile JSON (schema v4)"},
    {"--stage-profile-out", O_PROFILE, 1, NULL},
    {"--stats", O_STATS, 1, "FILE  write the run-stats JSON (schema v2)"},
    {"--overlap", O_OVERLAP, 0, "  enable the prefetch/compute overlap overlay"},
    {"--experimental-overlap-prefetch-compute", O_OVERLAP, 0, NULL},
    {"--hbm-model", O_HBM_MODEL, 1, "NAME  hbm2 or ideal (override HBM.MODEL)"},
    {"--threads", O_THREADS, 1, "N  host threads (>= 1; never changes outputs)"},
    {"--label", O_LABEL, 1, "NAME  copied into run-stats run_label"},
    {"--settings", O_SETTINGS, 1, "FILE  settings file"},
    {"--log-file", O_LOG_FILE, 1, "FILE  recorded in run-stats log_path"},
    {"--log-level", O_LOG_LEVEL, 1, "LEVEL  accepted for compatibility"},
    {"--help", O_HELP, 0, "  this text"},
    {"-h", O_HELP, 0, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: plena run --program FILE [options]\n\noptions:\n");
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        if (!opts[i].help) continue;
        fprintf(f, "  %s %s\n", opts[i].flag, opts[i].help);
        for (size_t j = 0; j < sizeof opts / sizeof opts[0]; j++)
            if (!opts[j].help && opts[j].id == opts[i].id && opts[j].flag[1] == '-')
                fprintf(f, "      (alias %s)\n", opts[j].flag);
    }
}

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

int plena_cmd_run(int argc, char **argv)
{
    struct plena_run_opts o;
    memset(&o, 0, sizeof o);
    o.hbm_model = -1;
    o.threads = 1;
    o.dump_mask = PLENA_DUMP_DEFAULT;
    o.dump_dir = ".";
    int asm_alias = 0, profile_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        size_t k, alen = strcspn(a, "=");
        for (k = 0; k < sizeof opts / sizeof opts[0]; k++)
            if (strlen(opts[k].flag) == alen && !strncmp(a, opts[k].flag, alen)) break;
        if (k == sizeof opts / sizeof opts[0])
            return plena_cli_usage_error("run", "unknown option '%s'", a);
        if (opts[k].has_arg) {
            if (a[alen] == '=')
                val = a + alen + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                return plena_cli_usage_error("run", "option '%s' needs a value", opts[k].flag);
        } else if (a[alen] == '=') {
            return plena_cli_usage_error("run", "option '%s' takes no value", opts[k].flag);
        }
        switch (opts[k].id) {
        case O_PROGRAM: o.program_path = val; break;
        case O_HBM: o.hbm_path = val; break;
        case O_FPSRAM: o.fpsram_path = val; break;
        case O_INTSRAM: o.intsram_path = val; break;
        case O_VRAM: o.vram_path = val; break;
        case O_HBM_SIZE:
            if (plena_run_parse_size(val, &o.hbm_size) || o.hbm_size == 0)
                return plena_cli_usage_error(
                    "run", "--hbm-size: expected bytes with optional K, M or G suffix, found '%s'",
                    val);
            break;
        case O_DUMP_DIR: o.dump_dir = val; break;
        case O_DUMP:
            if (plena_run_parse_dump_list(val, &o.dump_mask))
                return plena_cli_usage_error("run",
                                             "--dump: expected a comma list of vram, mram, fpsram, "
                                             "intsram, hbm, or all or none, found '%s'",
                                             val);
            break;
        case O_ASM:
            o.asm_path = val;
            if (!strcmp(opts[k].flag, "--stage-profile-asm")) asm_alias = 1;
            break;
        case O_PROFILE:
            o.profile_path = val;
            profile_given = 1;
            break;
        case O_STATS: o.stats_path = val; break;
        case O_OVERLAP: o.overlap = 1; break;
        case O_HBM_MODEL:
            if (!strcmp(val, "hbm2"))
                o.hbm_model = PLENA_HBM_MODEL_HBM2;
            else if (!strcmp(val, "ideal"))
                o.hbm_model = PLENA_HBM_MODEL_IDEAL;
            else
                return plena_cli_usage_error(
                    "run", "--hbm-model: expected hbm2 or ideal, found '%s'", val);
            break;
        case O_THREADS: {
            char *end;
            long t = strtol(val, &end, 10);
            if (*end || t < 1 || t > 4096)
                return plena_cli_usage_error(
                    "run", "--threads: expected an integer >= 1, found '%s'", val);
            o.threads = (unsigned)t;
            break;
        }
        case O_LABEL: o.label = val; break;
        case O_SETTINGS: o.settings_path = val; break;
        case O_LOG_FILE: o.log_path = val; break;
        case O_LOG_LEVEL: break;
        case O_HELP: usage(stdout); return 0;
        }
    }
    if (!o.program_path) return plena_cli_usage_error("run", "--program FILE is required");
    /* upstream default: --stage-profile-asm alone writes ./stage_profile.json */
    if (asm_alias && !profile_given) o.profile_path = "stage_profile.json";
    if (o.profile_path && !o.asm_path && !ends_with(o.program_path, ".asm"))
        return plena_cli_usage_error(
            "run", "--profile needs stage labels: a .mem program needs --asm FILE");
    o.argc = argc + 1;
    char **cmdv = argv - 1; /* argv[-1] is the binary name (main passes argv + 1) */
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
