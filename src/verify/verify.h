/* verify: the one place that runs a MoE build and checks it (docs/architecture.md
 * "verify"; the check itself is docs/lowering.md "Checking a build").
 *  - reference inputs from the STAGED bytes of a build (MX weights decoded
 *    from the HBM regions, the BF16 VRAM preload, fp16 constants and route
 *    weights converted to BF16);
 *  - the functional run: the emulator in-process on the same images, with the
 *    output, ids, route weights and gate values read back from machine state;
 *  - the comparison (bit for bit, plus the float64 bound) and its verdict;
 *  - the wiring of a build directory into a timed run session (run/), and the
 *    whole `plena moe` job (run, stage table, check) for the CLI to print.
 * Above gen, ref and run; it never prints and never picks exit codes. */
#ifndef PLENA_VERIFY_VERIFY_H
#define PLENA_VERIFY_VERIFY_H

#include <stdint.h>

#include "../emu/emu.h"
#include "../gen/build.h"
#include "../isa/stages.h"
#include "../ref/ref.h"
#include "../run/run.h"
#include "../settings/settings.h"

struct plena_verify_refdata {
    struct plena_moe_ref_cfg cfg;
    struct plena_moe_ref_in in;
    /* owned storage behind `in` */
    float *h, *gamma, *router_w, *router_b, *router_sel_bias, *ws[3], *w_sg, *fixed_w;
    float *logits; /* preloaded router logits [T][E] */
    uint32_t *fixed_ids;
    /* behind in.expert (the streaming check): the build, and per slot (one
     * per thread of in.pool) one expert's decoded matrices, biases and a
     * padded-row scratch, reused per expert, allocated on first use */
    const struct plena_moe_build *build;
    struct plena_verify_slot {
        float *ew[3], *eb[3], *erow;
        struct plena_moe_scratch mx; /* a lazy matrix's MX bytes, reused */
    } * slots;
    uint32_t n_slots;
};
int plena_verify_refdata_from_build(const struct plena_moe_build *b,
                                    struct plena_verify_refdata *rd, struct plena_err *err);
/* The references on rd run on pool's threads (NULL: one thread): one
 * provider slot per thread. No figure depends on the pool. */
int plena_verify_refdata_use_pool(struct plena_verify_refdata *rd, struct plena_pool *pool,
                                  struct plena_err *err);
void plena_verify_refdata_free(struct plena_verify_refdata *rd);

/* The bit-exact reference and both float64 layers (from h, and from the
 * x_norm given) with one decode per routed expert (docs/design.md "One
 * decode for both references"), in steps: after a routing-only pass of the
 * bit-exact reference gave xn, plena_verify_fuse begins the float64 layers
 * on xn and f64_ids (NULL: their own routing) and hands every expert the
 * bit-exact reference decodes on rd to them as well; plena_verify_unfuse
 * restores rd's provider once that reference ran; plena_verify_fused_end
 * writes the layers o64 (from h) and o64x (from xn), the experts not handed
 * over decoded there. Without routed experts or a streaming provider
 * nothing is fused and end is plena_moe_reference_f64_pair(xn, f64_ids);
 * either way end uses the xn and f64_ids pointers given to fuse (read
 * there and again at end: unfused, the caller may fill them in between).
 * The doubles are those of that one call either way. fused_free always. */
struct plena_verify_fused {
    struct plena_verify_refdata *rd;
    plena_moe_ref_expert_fn inner; /* rd's provider while fused, else NULL */
    void *inner_ctx;
    struct plena_moe_f64_pair *f64;
    const float *xn;         /* given to fuse: end's layers use these, */
    const uint32_t *f64_ids; /* fused or not */
};
int plena_verify_fuse(struct plena_verify_refdata *rd, const float *xn, const uint32_t *f64_ids,
                      struct plena_verify_fused *f, struct plena_err *err);
void plena_verify_unfuse(struct plena_verify_fused *f);
int plena_verify_fused_end(struct plena_verify_fused *f, double *o64, double *o64x,
                           struct plena_err *err);
void plena_verify_fused_free(struct plena_verify_fused *f);

/* The routing of one call of build b, ids[T*k] in pair order: the fixed
 * ids, or for device routing the bit-exact reference's RMSNorm, router and
 * top-k (no expert weight is decoded) -- the device's own ids whenever
 * `--check` passes, the same ids a replay compares. */
int plena_verify_routing_ids(const struct plena_moe_build *b, uint32_t *ids, struct plena_err *err);
/* The build options' reachable_experts hook (gen/build.h): present[e] = 1
 * for every expert plena_verify_routing_ids selects, so a device-routed build
 * materialises only those. A device that routed elsewhere would read an
 * expert of zeros, which the check's comparison with the reference catches. */
int plena_verify_reachable_experts(const struct plena_moe_build *b, uint8_t *present, uint32_t *ids,
                                   struct plena_err *err);
/* The routing statistics of build b (plena_moe_routing_stats on those ids);
 * st->valid = 0 for a layer without routed experts. */
int plena_verify_routing_stats(const struct plena_moe_build *b, struct plena_routing_stats *st,
                               struct plena_err *err);

/* Machine state read back after a run. Arrays hold the pairs / tokens of
 * the LAST token block only when T_blk < T (the SRAM regions are reused per
 * block), the ids and weights of the last token only in the expert-major
 * device form (V_TOPK runs token by token); p0/t0 say where they start. */
struct plena_verify_device {
    int trapped;
    int interrupted; /* the trap was the stop flag (plena_verify_emulate_stop) */
    char trap[640];
    uint64_t executed;
    uint16_t *out;  /* [T*H] BF16 bits */
    uint32_t *ids;  /* [n_pairs] */
    uint16_t *w;    /* [n_pairs] BF16 bits */
    uint16_t *gate; /* [n_gate] BF16 bits */
    uint32_t p0, n_pairs, t0, n_gate;
    uint64_t *pc_count;    /* [n_words] executions per instruction */
    uint64_t op_count[64]; /* executions per opcode */
};
/* Runs the build's program on a fresh emulator with settings s. dir != NULL
 * loads the images from the build directory files (the file writer is then
 * part of what is checked); dir == NULL loads the in-memory images. */
int plena_verify_emulate(const struct plena_moe_build *b, const struct plena_settings *s,
                         const char *dir, struct plena_verify_device *d, struct plena_err *err);
/* The same with a stop flag a signal handler sets (may be NULL): a set flag
 * ends the run as a trap with d->interrupted. */
int plena_verify_emulate_stop(const struct plena_moe_build *b, const struct plena_settings *s,
                              const char *dir, const volatile sig_atomic_t *stop,
                              struct plena_verify_device *d, struct plena_err *err);
/* The read-back of plena_verify_emulate from a machine that has run build
 * b's program (res its result): output rows, the last block's ids, weights
 * and gate values, the trap. d must be zeroed; pc_count stays NULL. Lets a
 * timed run hand its final state to the check instead of a second run. */
int plena_verify_device_read(const struct plena_moe_build *b, const struct plena_emu *emu,
                             const struct plena_emu_result *res, const struct plena_program *prog,
                             struct plena_verify_device *d, struct plena_err *err);
void plena_verify_device_free(struct plena_verify_device *d);

/* Executed counts per (stage, opcode) from per-pc counts and the builder's
 * per-instruction stage (test C1, bench/moe_costs). */
void plena_verify_count_stage_op(const struct plena_moe_build *b, const uint64_t *pc_count,
                                 uint64_t out[PLENA_STAGE_COUNT][64]);

struct plena_verify_result {
    uint64_t elements, mismatches, nan_count;
    int64_t first_mismatch; /* element index t*H + c, -1 when none */
    uint16_t first_dev, first_ref;
    uint32_t id_mismatches, w_mismatches, gate_mismatches;
    double rel_rms;      /* float64 bound on the MoE output (plena_moe_rel_rms_moe) */
    double rel_rms_full; /* whole output incl. residual (plena_moe_rel_rms_full) */
    double rel_rms_norm; /* RMSNorm output (plena_moe_rel_rms_norm); 0 without PRE_NORM */
    int bound_ok;        /* all three <= PLENA_MOE_REL_RMS_BOUND */
    int numerical;       /* 0 for zero weights / zero input (bound not applied) */
    int ids_f64_ok;      /* device ids equal the float64 ids (DEVICE routing) */
    /* DEVICE routing: tokens whose expert set differs from the model's
     * float64 router's at a near-tie, and beyond one (plena_router_agree_f64) */
    uint32_t route_tokens, route_near_ties, route_different;
    float gate_min, gate_max;
    int gate_distinct, gate_saturated; /* sigmoid gate only */
    int ref_all_zero;
    int bit_exact; /* output, ids, weights and gate values all equal, no NaN */
    /* THE verdict of a check (`plena moe --check`): bit_exact && bound_ok, a
     * sigmoid shared gate is not saturated, and (device routing) no token's
     * expert set differs from the float64 router's beyond a near-tie, on
     * numerical data. ids_f64_ok (rank order too) is reported, not required:
     * with random router weights a near-tie may legitimately differ, and the
     * ids are compared bit-exactly with the bit-exact reference's. */
    int passed;
};
int plena_verify_check(const struct plena_moe_build *b, const struct plena_verify_device *d,
                       struct plena_verify_result *r, struct plena_err *err);

/* plena_verify_check with the references on `threads` host threads
 * (common/pool.h; 0 or 1: the caller alone): every figure of r is the same
 * for every count. */
int plena_verify_check_threads(const struct plena_moe_build *b, const struct plena_verify_device *d,
                               unsigned threads, struct plena_verify_result *r,
                               struct plena_err *err);
/* The same with a stop flag a signal handler sets (may be NULL): the
 * references look at it before each routed expert and shared-expert block
 * (struct plena_moe_ref_in.stop), and the check once more before its
 * verdict; once set the check returns PLENA_E_INTERRUPTED (no verdict). */
int plena_verify_check_stop(const struct plena_moe_build *b, const struct plena_verify_device *d,
                            unsigned threads, const volatile sig_atomic_t *stop,
                            struct plena_verify_result *r, struct plena_err *err);
#ifdef PLENA_TESTING
/* tests: when not NULL, set to 1 by plena_verify_check_stop after the
 * references, as a stop that arrives after their last look at the flag */
extern volatile sig_atomic_t *plena_verify_test_stop_after_refs;
#endif

/* The three float64 bounds of one call (docs/design.md "Float64 bound in
 * three parts"), the one place that says which output is measured against
 * which layer: moe, the bit-exact MoE output before the add-back, against
 * o64x (the float64 MoE from the bit-exact reference's x_norm, equal to the
 * machine's whenever the check is bit-exact); full, the machine's whole
 * output out (the add-back included) against o64 (the float64 layer from h);
 * norm, for a PRE_NORM layer, that x_norm (xn) against the float64 RMSNorm
 * (0 otherwise). Each is -1 where the float64 side is all zero. Returns 0, or
 * PLENA_E_NOMEM with err set. */
struct plena_verify_bounds {
    double moe, full, norm;
};
int plena_verify_bounds_measure(const struct plena_verify_refdata *rd, const float *moe,
                                const double *o64x, const float *out, const double *o64,
                                const float *xn, struct plena_verify_bounds *bd,
                                struct plena_err *err);

/* One row of the cost tables of docs/lowering.md "Cost accounting" (test C1, bench/moe_costs):
 * builds `preset` at T tokens with zero weights and no residual (balanced
 * fixed routing when `routed`), runs it on the emulator, and counts M_MM billed
 * to expert_projection/shared_expert_projection and H_PREFETCH_M billed to
 * expert_weight_prefetch/shared_expert_projection. */
struct plena_verify_cost_row {
    uint64_t m_mm, h_prefetch_m;
    uint32_t useful_rows, tile_rows; /* rows per M_MM tile: useful / BLEN-padded */
    int predicted_equals_executed;   /* builder's per-opcode prediction == emulator */
};
int plena_verify_cost_row_measure(const struct plena_settings *s, const char *preset, uint32_t T,
                                  int routed, struct plena_verify_cost_row *row,
                                  struct plena_err *err);

/* ---- a build directory as a timed run session ---- */

/* Which form of the program a run loads: program.mem with program.asm for
 * its stage labels (so the machine-code writer is part of what runs), or
 * program.asm alone (replay: its run-stats name the assembly). */
enum plena_verify_program { PLENA_VERIFY_PROGRAM_MEM = 0, PLENA_VERIFY_PROGRAM_ASM = 1 };

/* Storage for the paths a run session borrows. */
struct plena_verify_paths {
    char program[4096], asm_path[4096], hbm[4096], fpsram[4096], intsram[4096], vram[4096];
};

/* Fills the input side of a run session for build directory dir (names from
 * gen/build_files.def): program, images and the HBM size a build larger
 * than HBM_SIZE needs (b may be NULL: CONFIG.HBM_SIZE). With optional_preloads
 * an INT SRAM or VRAM preload that is absent is not passed. ro is cleared
 * first; outputs (dumps, stats, profile), settings and the label stay the
 * caller's. PLENA_E_INPUT when a path does not fit. */
int plena_verify_run_opts(const char *dir, enum plena_verify_program form, int optional_preloads,
                          const struct plena_moe_build *b, const struct plena_settings *s,
                          struct plena_verify_paths *paths, struct plena_run_opts *ro,
                          struct plena_err *err);

/* ---- the `plena moe` job: run, stage table, check ---- */

struct plena_verify_stage_row {
    uint64_t picos, cycles, bytes; /* wall picoseconds and cycles, HBM bytes read + written */
    double share;                  /* time_fraction */
};

struct plena_verify_moe_opts {
    const struct plena_settings *settings;
    const char *dir; /* the written build directory: inputs, and where the profile goes */
    int run;         /* the timed run (stage table) */
    int profile;     /* keep stage_profile.json (else the run's profile is temporary) */
    int check;       /* the functional check after a completed run (or alone) */
    int argc;        /* provenance for the run session (may be 0/NULL) */
    char **argv;
    const char *timeline_path; /* the timed run's timeline (docs/timeline.md); NULL = none */
    enum plena_timeline_detail timeline_detail;
    /* the timed run's progress (plena_run_opts.on_progress); may be NULL */
    void (*on_progress)(void *ctx, uint64_t executed);
    void *on_progress_ctx;
    /* set by a signal handler (may be NULL): the timed run and the check's
     * emulator run stop as a trap (the report's status PLENA_E_INTERRUPTED),
     * the check's references at their next look (plena_verify_check_stop:
     * the call returns PLENA_E_INTERRUPTED with err set, no verdict) */
    const volatile sig_atomic_t *stop;
    /* host threads (0 = 1): the check's references split over them, and the
     * timed run's dump writer (plena_run_opts.threads); no output changes */
    unsigned threads;
};

struct plena_verify_moe_report {
    int ran; /* the timed run happened (see run) */
    struct plena_run_outcome run;
    int have_stages; /* stage rows read back from the profile */
    struct plena_verify_stage_row stages[PLENA_STAGE_COUNT];
    uint64_t clock_ps;
    int checked;       /* the functional check ran (see check) */
    int check_trapped; /* its emulator run trapped: check_trap says where */
    char check_trap[640];
    struct plena_verify_result check;
    int check_reused_run; /* the check read the timed run's final state (no second run) */
    /* the layer's routing statistics (valid = 0 without routed experts) */
    struct plena_routing_stats routing;
    /* PLENA_OK, or PLENA_E_FAILED when the run trapped or the check failed */
    enum plena_status status;
};

/* Runs build b, already written to o->dir: the timed run session with a stage
 * profile (o->run), then the check (o->check; skipped after a trapped run).
 * Returns 0 when the job ran (the verdict is r->status), else the error
 * status of what could not be done (input, output, nomem, or interrupted in
 * the check's references) with err filled; r holds what was done before it. */
int plena_verify_moe(const struct plena_moe_build *b, const struct plena_verify_moe_opts *o,
                     struct plena_verify_moe_report *r, struct plena_err *err);

#endif
