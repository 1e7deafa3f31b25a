/* Reference glue of the MoE build (spec/moe-lowering.md 7.1-7.2,
 * spec/traces-and-replay.md 5.3): fills the reference model's inputs from
 * the STAGED bytes of a build (MX weights decoded from the HBM regions, the
 * BF16 VRAM preload, fp16 constants and route weights converted to BF16),
 * runs the emulator in-process on the same images, reads the output, ids,
 * route weights and gate values back from machine state, and compares bit
 * for bit plus the float64 bound. It does not time or profile (run/ does). */
#ifndef PLENA_GEN_CHECK_H
#define PLENA_GEN_CHECK_H

#include <stdint.h>

#include "../gen/build.h"
#include "../ref/ref.h"
#include "../settings/settings.h"

struct plena_moe_refdata {
    struct plena_moe_ref_cfg cfg;
    struct plena_moe_ref_in in;
    /* owned storage behind `in` */
    float *h, *gamma, *router_w, *router_b, *ws[3], *w_sg, *fixed_w;
    float **w[3], **bias[3];
    uint32_t *fixed_ids;
};
int plena_moe_refdata_from_build(const struct plena_moe_build *b, struct plena_moe_refdata *rd,
                                 struct plena_err *err);
void plena_moe_refdata_free(struct plena_moe_refdata *rd);

/* Machine state read back after a run. Arrays hold the pairs / tokens of
 * the LAST token block only when T_blk < T (the SRAM regions are reused per
 * block); p0/t0 say where they start. */
struct plena_moe_device {
    int trapped;
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
int plena_moe_emulate(const struct plena_moe_build *b, const struct plena_settings *s,
                      const char *dir, struct plena_moe_device *d, struct plena_err *err);
void plena_moe_device_free(struct plena_moe_device *d);

/* Executed counts per (stage, opcode) from per-pc counts and the builder's
 * per-instruction stage (test C1, bench/moe_costs). */
void plena_moe_count_stage_op(const struct plena_moe_build *b, const uint64_t *pc_count,
                              uint64_t out[PLENA_STAGE_COUNT][64]);

struct plena_moe_check_result {
    uint64_t elements, mismatches, nan_count;
    int64_t first_mismatch; /* element index t*H + c, -1 when none */
    uint16_t first_dev, first_ref;
    uint32_t id_mismatches, w_mismatches, gate_mismatches;
    double rel_rms;      /* float64 bound on the MoE output (plena_moe_rel_rms_moe) */
    double rel_rms_full; /* whole output incl. residual (plena_moe_rel_rms_full) */
    double rel_rms_norm; /* RMSNorm output (plena_moe_rel_rms_norm); 0 without PRE_NORM */
    int bound_ok;        /* both <= PLENA_MOE_REL_RMS_BOUND */
    int numerical;       /* 0 for zero weights / zero input (bound not applied) */
    int ids_f64_ok;      /* device ids equal the float64 ids (DEVICE routing) */
    float gate_min, gate_max;
    int gate_distinct, gate_saturated; /* sigmoid gate only */
    int ref_all_zero;
    int bit_exact; /* output, ids, weights and gate values all equal, no NaN */
    int passed;    /* bit_exact && bound_ok && ids_f64_ok */
};
int plena_moe_check(const struct plena_moe_build *b, const struct plena_moe_device *d,
                    struct plena_moe_check_result *r, struct plena_err *err);

/* One row of the cost tables of moe-lowering 8.2 (test C1, bench/moe_costs):
 * builds `preset` at T tokens with zero weights and no residual (balanced
 * fixed routing when `routed`), runs it on the emulator, and counts M_MM billed
 * to expert_projection/shared_expert_projection and H_PREFETCH_M billed to
 * expert_weight_prefetch/shared_expert_projection. */
struct plena_moe_cost_row {
    uint64_t m_mm, h_prefetch_m;
    uint32_t useful_rows, tile_rows; /* rows per M_MM tile: useful / BLEN-padded */
    int predicted_equals_executed;   /* builder's per-opcode prediction == emulator */
};
int plena_moe_cost_row(const struct plena_settings *s, const char *preset, uint32_t T, int routed,
                       struct plena_moe_cost_row *row, struct plena_err *err);

#endif
