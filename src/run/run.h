/* Run session: one emulator run with timing, overlay, stage profile, dumps
 * and run-stats wired together (docs/timing.md, docs/profile.md
 * "Profile JSON", docs/machine.md "After a trap", docs/formats.md "Dumps" and
 * "Run-stats JSON"). Used by `plena run`, the timing gates, and later
 * `plena moe` and replay.
 *
 * The session never prints: summary lines (docs/timing.md "Summary lines")
 * are produced into a buffer by plena_run_format_summary and printed by the
 * CLI. */
#ifndef PLENA_RUN_RUN_H
#define PLENA_RUN_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../emu/emu.h"
#include "../isa/asm.h"
#include "../isa/program.h"
#include "../settings/settings.h"
#include "../timeline/timeline.h"
#include "../timing/timing.h"

struct plena_routing_stats; /* model/model.h */

struct plena_run_opts {
    /* program: `program` (borrowed, in memory) wins over `program_path` */
    const char *program_path;
    const struct plena_program *program;
    const char *asm_path;                 /* labels for a .mem program (--asm) */
    int asm_count_mismatch_ok;            /* upstream --stage-profile-asm: a label count that
                                           * differs from the program's is reported in
                                           * out->asm_label_count (pcs past the labels count as
                                           * 'other', extra labels are dropped) instead of
                                           * failing with PLENA_E_INPUT */
    struct plena_asm_diags *asm_warnings; /* assembler warnings of a .asm program are
                                           * appended here (the CLI prints them); may be NULL */
    /* inputs (NULL = none) */
    const char *hbm_path, *fpsram_path, *intsram_path, *vram_path;
    /* settings: `settings` (copied) wins over `settings_path`; both NULL =
     * the lookup of docs/formats.md "Settings file" */
    const char *settings_path;
    const struct plena_settings *settings;
    uint64_t hbm_size;  /* 0 = CONFIG.HBM_SIZE */
    int hbm_model;      /* -1 = settings; else enum plena_hbm_model_kind */
    int hbm_exhaustive; /* the HBM model steps every tick, the literal definition of
                         * docs/timing.md "Scheduler" (reference path of the
                         * equivalence tests; same results, much slower) */
    int hbm_memo_off;   /* the skip-ahead HBM path without its channel memo (tests) */
    /* outputs (NULL = not written) */
    const char *dump_dir;
    unsigned dump_mask; /* enum plena_dump_mask bits; 0 = no dumps */
    const char *stats_path;
    const char *profile_path;
    const char *log_path; /* copied into run-stats only */
    /* the Perfetto timeline (docs/timeline.md), written atomically on completion
     * and on a trap; NULL = none (the run then does no per-instruction timeline work) */
    const char *timeline_path;
    enum plena_timeline_detail timeline_detail; /* 0 = stage; callers set the default */
    /* the MoE layer's routing, written into the profile (NULL: none) */
    const struct plena_routing_stats *routing;
    /* run limits (0 = none) and a stop flag a signal handler sets (may be
     * NULL): each ends the run as a trap, outputs still written; the
     * interrupted run's code is PLENA_E_INTERRUPTED */
    uint64_t max_instructions;
    double max_seconds;
    const volatile sig_atomic_t *stop;
    /* behaviour */
    int overlap;
    unsigned threads; /* >= 1; never changes any output (docs/timing.md "Determinism") */
    const char *label;
    /* provenance for run-stats (may be 0/NULL) */
    int argc;
    char **argv;
    /* Called after settings and inputs are ready, just before execution
     * (the CLI prints the Topology line here). May be NULL. */
    void (*on_start)(void *ctx, const struct plena_settings *s);
    void *on_start_ctx;
    /* Called every 65536 executed instructions with the count so far (the
     * CLI's progress line). May be NULL: the run then does no counting. */
    void (*on_progress)(void *ctx, uint64_t executed);
    void *on_progress_ctx;
    /* Called once the program has run (completed or trapped), before any
     * output is written, with the machine in its final state (the MoE check
     * reads it back instead of running the program a second time). May be
     * NULL. Errors are the callback's to record in its ctx. */
    void (*on_finish)(void *ctx, const struct plena_emu *emu, const struct plena_emu_result *res,
                      const struct plena_program *prog);
    void *on_finish_ctx;
};

enum plena_run_outcome_status {
    PLENA_RUN_OUT_COMPLETED,
    PLENA_RUN_OUT_TRAPPED,
    PLENA_RUN_OUT_ERROR
};

struct plena_run_outcome {
    enum plena_run_outcome_status status;
    enum plena_status code;         /* OK; E_FAILED when trapped; else the error (exit code
                                     * via plena_status_exit_code, docs/cli.md) */
    struct plena_trap trap;         /* kind NONE unless trapped */
    char trap_message[640];         /* the trap line; empty unless trapped */
    struct plena_settings settings; /* effective settings (valid once loaded) */
    int settings_loaded;
    uint64_t hbm_size;
    uint64_t instructions_executed;
    uint64_t program_instructions;
    int asm_label_mismatch;   /* asm_count_mismatch_ok and the counts differed */
    uint64_t asm_label_count; /* labels of --asm (when given) */
    uint64_t serial_picos, serial_cycles;
    uint64_t reported_picos, reported_cycles; /* adjusted when the overlay is on */
    uint64_t bytes_read, bytes_written;
    int overlap_on;
    struct plena_overlap_report overlap;
    int profile_written;
    uint64_t profile_bytes;
    int timeline_written;
    uint64_t timeline_bytes;
    uint64_t stage_wall_picos[32]; /* per stage (PLENA_STAGE_COUNT used); 0 without profile */
    double host_wall_seconds;
    uint64_t hbm_memo_hits; /* channel parts of HBM batches replayed from the memo
                             * (docs/timing.md "Channel memo") */
};

/* Runs one session. Returns 0 when the program ran (completed or trapped:
 * see out->status / out->code), else the error status (usage, input,
 * output, nomem), with out->code set accordingly. Outputs: dumps and
 * profile on completion and on a trap; run-stats always when requested
 * (status "error" for failures before execution, when writable). */
int plena_run_execute(const struct plena_run_opts *o, struct plena_run_outcome *out,
                      struct plena_err *err);

/* "Topology mlen=M vlen=V hlen=H blen=B broadcast_amount=A\n" */
void plena_run_format_topology(const struct plena_settings *s, char *buf, size_t n);
/* The end-of-run summary lines (overlay line when on, completed or
 * trapped line, HBM Statistics line), each ending in LF. */
void plena_run_format_summary(const struct plena_run_outcome *out, char *buf, size_t n);
/* "<ps/1000>.<ps%1000, 3 digits>ns" */
void plena_run_format_ns(uint64_t ps, char *buf, size_t n);
/* Utilization of the HBM Statistics line: (R + W) / (ps x 1e-12), 0 when ps is 0. */
double plena_run_utilization(uint64_t bytes_read, uint64_t bytes_written, uint64_t ps);

/* Parses SIZE as the upstream emulator's --hbm-size does (docs/upstream.md):
 * digits, then an optional case-insensitive binary suffix K, M, G or T,
 * also spelled KB/KiB, MB/MiB, GB/GiB, TB/TiB (all powers of 1024);
 * surrounding blanks ignored. 0 on success, -1 on a bad spelling or overflow. */
int plena_run_parse_size(const char *s, uint64_t *out);
/* The level (0 off, 1 error, 2 warn, 3 info, 4 debug, 5 trace) that a
 * RUST_LOG-style filter ("warn,crate=info,crate::mod=debug") gives events
 * of `target`, as tracing-subscriber's EnvFilter decides it outside spans:
 * the directive with the longest target that `target` starts with, else
 * the bare level, else off; unparsable directives are skipped. -2 when
 * the filter has no directive at all (the caller's default applies). */
int plena_run_log_filter_level(const char *filter, const char *target);
/* The tracing target of upstream's HBM dump decision (src/runner.rs). */
#define PLENA_RUN_UPSTREAM_RUNNER_TARGET "transactional_emulator::runner"
/* Parses a --dump LIST: vram,mram,fpsram,intsram,hbm | all | none. */
int plena_run_parse_dump_list(const char *s, unsigned *mask);

#endif
