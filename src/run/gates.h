/* `plena gates timing` as a library (docs/timing.md "Timing gates"):
 * the cases built in-process, run through the run session, and the
 * gates. plena_gates_timing_evaluate is pure (case results in, gate
 * results out) so each check can be unit-tested with synthetic inputs. */
#ifndef PLENA_RUN_GATES_H
#define PLENA_RUN_GATES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/fileio.h"

#define PLENA_GATE_CASE_COUNT 10
#define PLENA_GATE_COUNT      5
#define PLENA_GATE_MAX_CHECKS 12
#define PLENA_GATE_MAX_VALUES 24

/* Result of one case run, with the figures read back from its profile. */
struct plena_gate_case {
    char name[64];
    int ran;         /* completed and its run-stats and profile were read */
    char error[512]; /* why not, when !ran */
    int overlap;
    uint32_t mlen;
    uint64_t sim_cycles, serial_cycles, bytes_read, bytes_written; /* run-stats */
    uint64_t instructions_executed;                                /* run-stats */
    /* profile */
    uint64_t prof_simulation_cycles, prof_profiled_cycles;
    uint64_t prof_simulation_picos, prof_profiled_picos;
    uint64_t prof_bytes_read, prof_bytes_written;
    uint64_t prof_stage_picos_sum, prof_stage_instructions_sum;
    uint64_t prof_instructions_executed;
    size_t prof_unresolved;
    char profile_sha256[65];
    char run_stats_path[4096], stage_profile_path[4096];
};

/* One extra run of repeat_determinism (threads 1 and 4). */
struct plena_gate_repeat {
    char name[64]; /* the case repeated */
    unsigned threads;
    int ran;
    uint64_t sim_cycles, serial_cycles, bytes_read, bytes_written;
    char profile_sha256[65];
    int profile_identical; /* profile bytes equal to the base case's, byte for byte */
};

enum plena_gate_value_kind { PLENA_GV_INT, PLENA_GV_BOOL, PLENA_GV_STR };
struct plena_gate_value {
    char key[64];
    enum plena_gate_value_kind kind;
    uint64_t u;
    char s[80];
};
struct plena_gate_check {
    char name[64];
    int passed;
};
struct plena_gate_result {
    const char *name;
    int passed;
    size_t n_checks;
    struct plena_gate_check checks[PLENA_GATE_MAX_CHECKS];
    size_t n_values;
    struct plena_gate_value values[PLENA_GATE_MAX_VALUES];
};

/* Gate names in report order. */
extern const char *const plena_gate_names[PLENA_GATE_COUNT];

/* Pure: evaluates the five gates. A case missing from `cases` (by
 * name) or not `ran` fails every gate that needs it (check "case_ran"). */
void plena_gates_timing_evaluate(const struct plena_gate_case *cases, size_t n_cases,
                                 const struct plena_gate_repeat *reps, size_t n_reps,
                                 struct plena_gate_result out[PLENA_GATE_COUNT]);

/* "PASS <gate> k=v ..." / "FAIL <gate> <failed,checks> k=v ..." + LF. */
void plena_gates_format_line(const struct plena_gate_result *g, struct plena_buf *b);

struct plena_gates_opts {
    const char *out_dir;          /* default ./plena_timing_gates */
    const char *const *overrides; /* "TABLE.KEY=VALUE" */
    size_t n_overrides;
    unsigned threads;
    /* set by a signal handler (may be NULL): the case runs stop as a trap and
     * the call returns PLENA_E_INTERRUPTED without writing the summary */
    const volatile sig_atomic_t *stop;
};

struct plena_gates_report {
    struct plena_gate_case cases[PLENA_GATE_CASE_COUNT];
    struct plena_gate_repeat reps[4];
    size_t n_reps;
    struct plena_gate_result gates[PLENA_GATE_COUNT];
    size_t n_passed;
    int passed;
    int case_failed; /* a case could not be built or run (exit 3) */
    char summary_path[4096];
};

/* Builds and runs every case under out_dir/cases/<case>/, evaluates the
 * gates and writes out_dir/timing_gates_summary.json. Returns 0 when the
 * gates were evaluated (see report->passed / case_failed), else an error
 * status (bad override: PLENA_E_USAGE; output not writable: PLENA_E_OUTPUT). */
int plena_gates_timing_run(const struct plena_gates_opts *o, struct plena_gates_report *r,
                           struct plena_err *err);

/* The verdict: PLENA_OK all pass, PLENA_E_INPUT a case failed to build or run,
 * PLENA_E_FAILED otherwise. */
enum plena_status plena_gates_status(const struct plena_gates_report *r);

#endif
