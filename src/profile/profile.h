/* Stage profiling and profile JSON schema v4
 * (docs/profile.md "Routed lowering" and "Profile JSON").
 *
 * The accumulator is fed once per executed instruction with its static pc,
 * serial duration in ps, HBM transaction counts and opcode; it sums
 * picoseconds per stage, per pair, per pair-stage and per resource class and
 * rounds to cycles only when a figure is reported (I2). It does not run the
 * emulator or the timing model (src/run/ wires them together). */
#ifndef PLENA_PROFILE_PROFILE_H
#define PLENA_PROFILE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../isa/isa.h"
#include "../isa/program.h"
#include "../isa/stages.h"
#include "../model/model.h"
#include "../timing/timing.h"

/* Constant strings of docs/profile.md "Constant texts": the one definition of
 * each (constants.c). */
extern const char plena_profile_text_logical[];          /* L */
extern const char plena_profile_text_physical[];         /* P */
extern const char plena_profile_text_resource[];         /* R */
extern const char plena_profile_text_caveat[];           /* C */
extern const char plena_profile_text_shared_vs_routed[]; /* S: pair-major */
extern const char plena_profile_text_shared_vs_routed_expert_major[];
/* The shared-vs-routed caveat of a lowering: one constant string each (S for
 * pair-major and for UNSET, when no routed expert ran and the ratio is null). */
const char *plena_profile_shared_vs_routed_text(enum plena_lowering l);

/* Resource classes of docs/profile.md "Accumulator" (enum plena_resource, plena_resource_name
 * and plena_resource_of) come from the unit table of isa/columns.def. */

/* One accumulated figure set (a stage, a pair, a pair-stage or the total). */
struct plena_profile_figures {
    uint64_t instructions;
    uint64_t picos;
    uint64_t bytes_read, bytes_written; /* 64 x transactions */
    uint64_t res_picos[PLENA_RESOURCE_COUNT];
};

struct plena_profile_pair {
    uint32_t id;
    struct plena_profile_figures total;
    struct plena_profile_figures stage[PLENA_STAGE_COUNT];
};

/* One static instruction's executions not yet folded into the figures. */
struct plena_profile_pc {
    uint64_t n, picos, rd_txn, wr_txn;
};

struct plena_profile {
    uint64_t clock_period_ps;
    size_t n_pc;       /* static instructions of the program */
    uint8_t *pc_stage; /* per static pc */
    int32_t *pc_pair;  /* per static pc: index into pairs, or -1 */
    /* plena_profile_add sums per static pc (the opcode seen first there:
     * pc_op, PROFILE_OP_UNSET before) and plena_profile_flush folds those
     * sums into the figures below: four adds per executed instruction
     * instead of two to four figure sets of eight fields. `pending` counts
     * the executions not yet folded; readers refuse a profile with any. */
    struct plena_profile_pc *pcs;
    uint8_t *pc_op;
    uint64_t pending;
    uint8_t res_of_op[64];             /* opcode -> enum plena_resource */
    const struct plena_labels *labels; /* borrowed; NULL when the program has none */
    struct plena_profile_figures total;
    struct plena_profile_figures stage[PLENA_STAGE_COUNT];
    struct plena_profile_pair *pairs; /* ascending id */
    size_t n_pairs;
};

/* `labels` may be NULL (everything is billed to 'other'); when given, its
 * count must equal `n_instructions` (PLENA_E_INPUT naming both counts).
 * `labels` is borrowed and must outlive the profile. */
int plena_profile_init(struct plena_profile *p, const struct plena_labels *labels,
                       size_t n_instructions, uint64_t clock_period_ps, struct plena_err *err);
void plena_profile_free(struct plena_profile *p);

/* Bills one executed instruction (summed per pc until plena_profile_flush;
 * read the figures only after it). pc >= n_pc is billed to 'other' (no pair). */
void plena_profile_add(struct plena_profile *p, uint32_t pc, unsigned opcode, uint64_t picos,
                       uint64_t n_read_txn, uint64_t n_write_txn);
/* Bills n executed instructions in order, each as plena_profile_add would
 * (the same sums): the run session's batches of steps (timing.h). */
void plena_profile_add_steps(struct plena_profile *p, const struct plena_timing_step *s, size_t n);
/* Folds what plena_profile_add summed per pc into the figures (the same
 * integers as adding each instruction to them). Call it before reading the
 * figures or rendering; plena_profile_render and _write refuse an unflushed
 * profile (PLENA_E_INTERNAL). */
void plena_profile_flush(struct plena_profile *p);

/* What the profile JSON needs beyond the accumulator. */
struct plena_profile_trap {
    uint32_t pc;
    unsigned opcode;
    const char *mnemonic;
    const char *source_file; /* NULL when unknown */
    uint32_t source_line;    /* 0 when unknown */
    const char *message;     /* the trap line of docs/machine.md "After a trap" */
};

struct plena_profile_run {
    const struct plena_profile_trap *trap; /* NULL: run_status completed */
    uint64_t instructions_executed;
    uint64_t total_simulation_picos;            /* serial total of the run */
    const struct plena_overlap_report *overlap; /* NULL: overlay off */
    /* the MoE layer's routing (docs/profile.md "routing_stats"); NULL or not
     * valid: the run is not a layer plena built, and the key is absent */
    const struct plena_routing_stats *routing;
};

/* Renders the profile JSON v4, NUL-terminated, caller frees with
 * plena_free. */
int plena_profile_render(const struct plena_profile *p, const struct plena_profile_run *run,
                         char **text, size_t *len, struct plena_err *err);
/* Renders and writes atomically. */
int plena_profile_write(const struct plena_profile *p, const struct plena_profile_run *run,
                        const char *path, struct plena_err *err);

/* Shared-vs-routed split of docs/profile.md "Shared-vs-routed split"
 * (docs/profile.md "Shared-vs-routed split") and the routing tax of
 * docs/profile.md "Routing tax", from per-stage wall_picos and the stages.def
 * BRANCH/TAX columns: the one place the split is computed (the CLI's stage table
 * and replay's results both read it). Picoseconds are summed first and each cycle
 * figure is rounded up once; a clock period of 0 counts as 1 ps. */
struct plena_profile_split {
    uint64_t branch_picos[PLENA_BRANCH_COUNT]; /* per stages.def branch */
    uint64_t shared_picos, routed_picos;
    uint64_t excluded_picos; /* combine + residual + other */
    uint64_t total_picos;    /* every stage */
    uint64_t shared_cycles, routed_cycles;
    uint64_t routing_tax_picos, routing_tax_cycles;
    int has_shared_fraction; /* 0: shared + routed is 0 (JSON null) */
    double shared_fraction, routed_fraction;
    int has_ratio; /* 0: routed is 0 (JSON null) */
    double shared_to_routed_ratio;
};
void plena_profile_split_compute(const uint64_t stage_wall_picos[PLENA_STAGE_COUNT],
                                 uint64_t clock_period_ps, struct plena_profile_split *out);

/* "pair_major", "expert_major" or "none". */
const char *plena_profile_routed_lowering(const struct plena_profile *p);
/* The same as an enum: UNSET when no executed instruction was billed to a
 * routed-expert stage. */
enum plena_lowering plena_profile_lowering(const struct plena_profile *p);

#endif
