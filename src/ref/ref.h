/* Reference models of one MoE layer (docs/lowering.md "Checking a build").
 *
 * plena_moe_reference():     the bit-exact reference. Same operations, same
 *   order, same rounding points as the program plena's generator emits
 *   (docs/lowering.md "Layer steps"), computed from logical tensors in
 *   plain C. It shares only numeric atoms with the emulator (num/: BF16 RNE,
 *   plena_expf) and never executes instructions or uses VRAM addresses.
 * plena_moe_reference_f64(): an independent float64 reference written from the
 *   model equations (no intermediate rounding), used to bound the relative RMS
 *   error so that a bug mirrored in the generator and the bit-exact reference
 *   is still caught.
 *
 * Inputs are the *staged* values: weights as decoded from the HBM image,
 * activations and constants as preloaded (effective BF16 values). */
#ifndef PLENA_REF_REF_H
#define PLENA_REF_REF_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../model/model.h"

struct plena_moe_ref_cfg {
    uint32_t T;                         /* tokens */
    uint32_t H;                         /* hidden (multiple of MLEN) */
    uint32_t I;                         /* routed expert width (zero-padded to MLEN internally) */
    uint32_t Is;                        /* fused shared width; 0 = no shared branch */
    uint32_t E, k;                      /* experts, top-k (E = 0: no routed branch) */
    uint32_t mlen;                      /* = VLEN */
    uint32_t chunk_tiles;               /* C: K-split chunk in MLEN tiles */
    enum plena_routing_kind routing;    /* DEVICE, FIXED or NONE */
    enum plena_router_form router_form; /* GEMM or DOT (DEVICE only) */
    int router_bias;
    int expert_bias;
    enum plena_act_policy activation;
    enum plena_route_placement placement;
    enum plena_shared_gate shared_gate;
    enum plena_residual_mode residual;
    /* device routing: the model's router (zeroed: V_TOPK alone, as before
     * routers had a description), lowered as plena_router_plan says */
    struct plena_router router;
    int weight_rows; /* expert-major: the weights pass through a VRAM row (-0 becomes +0) */
};

/* Effective (BF16-exact) constants as they sit in FP SRAM (docs/lowering.md
 * "Memory ABI"). */
struct plena_moe_ref_consts {
    float one;                  /* 1.0 */
    float neg_alpha_routed;     /* -1.0 or GPT-OSS -1.703125 */
    float neg_alpha_shared;     /* -1.0 */
    float limit_pos, limit_neg; /* 7, -7 */
    float eps;                  /* RMSNorm eps as stored */
    float inv_h;                /* 1/H as stored */
    /* the device router's (gen/router.c): -1, -inf, routed scaling, norm epsilon */
    float minus_one, neg_inf, rsf, reps;
};

/* One routed expert's weights: logical [in][out] floats; biases NULL without
 * expert_bias. */
struct plena_moe_ref_expert {
    const float *w_gate, *w_up, *w_down; /* [H][I], [H][I], [I][H] */
    const float *b_gate, *b_up, *b_down; /* [I], [I], [H] */
};

/* Routed expert weights on demand (the streaming check): fills *x with
 * expert e's tensors, valid until the next call with the same slot. The
 * references ask for each expert they need at most once per call, each
 * thread of in->pool in increasing e with its own slot (slot <
 * plena_pool_size(in->pool); calls with different slots may run at the same
 * time), so a provider that decodes into one reused buffer per slot bounds
 * the working set to one expert per thread, whatever the number of experts.
 * Returns 0, or a status with err set. */
typedef int (*plena_moe_ref_expert_fn)(void *ctx, uint32_t e, uint32_t slot,
                                       struct plena_moe_ref_expert *x, struct plena_err *err);

struct plena_pool;

/* Logical tensors, row-major, float values (BF16-exact where the machine holds
 * BF16, exact MX decodes for HBM weights). Weight matrices are [in][out]. */
struct plena_moe_ref_in {
    const float *h;                 /* [T][H] layer input (residual stream) */
    const float *gamma;             /* [H] RMSNorm weight as staged (PRE_NORM only) */
    const float *router_w;          /* GEMM: [H][E] decoded; DOT: [E][H] BF16 */
    const float *router_b;          /* [E] (router_bias only) */
    const float *router_sel_bias;   /* [E] the router's selection bias (router.select_bias) */
    const float *logits;            /* [T][E] preloaded router logits (BF16), or NULL: the
                                     * router GEMM/dot and bias are replaced by them */
    const float *const *w_gate;     /* [E] -> [H][I] (NULL for experts never reached) */
    const float *const *w_up;       /* [E] -> [H][I] */
    const float *const *w_down;     /* [E] -> [I][H] */
    const float *const *b_gate;     /* [E] -> [I] (expert_bias only) */
    const float *const *b_up;       /* [E] -> [I] */
    const float *const *b_down;     /* [E] -> [H] */
    plena_moe_ref_expert_fn expert; /* non-NULL: routed weights from it (the arrays above unused) */
    void *expert_ctx;
    struct plena_pool *pool; /* NULL: one thread; else the routed experts (and, in the
                              * float64 reference, the rows of the shared expert) are split
                              * over its threads -- no output depends on the number
                              * (common/pool.h) */
    /* set by a signal handler (may be NULL): looked at before each routed
     * expert, before the bit-exact reference's shared expert and before each
     * block of the float64 reference's shared-expert rows; once set they end
     * with PLENA_E_INTERRUPTED (a check of a large layer takes seconds) */
    const volatile sig_atomic_t *stop;
    const float *ws_gate;      /* [H][Is] */
    const float *ws_up;        /* [H][Is] */
    const float *ws_down;      /* [Is][H] */
    const float *w_sg;         /* [H] shared gate vector (BF16) */
    const uint32_t *fixed_ids; /* [T*k] FIXED routing */
    const float *fixed_w;      /* [T*k] FIXED routing, effective BF16 */
    struct plena_moe_ref_consts c;
};

struct plena_moe_ref_out {
    float *out;     /* [T][H] caller-allocated */
    uint32_t *ids;  /* [T*k] or NULL */
    float *weights; /* [T*k] or NULL */
    float *gate;    /* [T] or NULL (sigmoid gate values) */
    float *moe_out; /* [T][H] or NULL: the MoE output before the residual add-back
                     * (checkpoint for the float64 bound, see plena_moe_rel_rms_moe) */
    float *x_norm;  /* [T][H] or NULL: the normalised MoE input after RMSNorm and the
                     * norm-weight multiply (h itself without PRE_NORM) */
    int route_only; /* stop once ids and weights (both required) are known: the
                     * routing of a build without its experts (out may be NULL) */
};

/* Expert e's weights from in->expert (its slot `slot`), or from the arrays:
 * an expert without weights (e >= E, a NULL array entry) is an input error
 * naming pair p. */
int plena_moe_ref_expert_get(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                             uint32_t e, uint32_t slot, size_t p, struct plena_moe_ref_expert *x,
                             struct plena_err *err);

/* The pairs of ids[np] grouped by expert, each group in pair order (a stable
 * counting sort): order[start[e] .. start[e+1]) are expert e's pairs; start has
 * E + 1 entries. Returns the first pair whose id is >= E, or np when none is. */
size_t plena_moe_ref_pairs_by_expert(const uint32_t *ids, size_t np, uint32_t E, size_t *order,
                                     size_t *start);

int plena_moe_reference(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                        struct plena_moe_ref_out *out, struct plena_err *err);

/* Float64 model of the same layer; ids_used (device or fixed ids) are taken
 * from `ids` when non-NULL (so routing ties cannot diverge), else computed.
 * out: [T][H] doubles, or NULL for the routing alone (ids_out then
 * required; no expert weight is read). Weights under DEVICE routing are the
 * model's router's (plena_router_select_f64 / plena_router_weights_f64). */
int plena_moe_reference_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                            const uint32_t *ids, double *out, uint32_t *ids_out,
                            struct plena_err *err);

/* The float64 layer started from a given normalised input x_norm (the bit-exact
 * reference's checkpoint) instead of computing RMSNorm from h; the residual
 * add-back still uses h. Checking the MoE math on the machine's own input keeps
 * the RMSNorm's systematic BF16 scale error (it enters the roughly quadratic
 * SwiGLU twice) out of the MoE bound; plena_moe_rel_rms_norm bounds the norm
 * itself. x_norm NULL = plena_moe_reference_f64. */
int plena_moe_reference_f64_x(const struct plena_moe_ref_cfg *cfg,
                              const struct plena_moe_ref_in *in, const float *x_norm,
                              const uint32_t *ids, double *out, uint32_t *ids_out,
                              struct plena_err *err);
/* plena_moe_reference_f64 into out and plena_moe_reference_f64_x (from
 * x_norm) into out_x with one pass over the weights: both arrays hold the
 * very doubles of the two separate calls (the check's float64 figures). */
int plena_moe_reference_f64_pair(const struct plena_moe_ref_cfg *cfg,
                                 const struct plena_moe_ref_in *in, const float *x_norm,
                                 const uint32_t *ids, double *out, double *out_x,
                                 struct plena_err *err);
/* plena_moe_reference_f64_pair in steps, so that a caller decoding each
 * routed expert once can hand it to both references: begin (the inputs and
 * routing of both layers; no weight is read), then for any expert e the
 * caller has at hand plena_moe_f64_pair_expert (its pairs, on the thread's
 * slot < plena_pool_size(in->pool); an expert already computed is skipped),
 * then end (the experts not handed over, through in->expert or the arrays;
 * the shared expert; the sums) into out and out_x: the very doubles of
 * plena_moe_reference_f64_pair, whichever experts were handed over. What in
 * points to must stay valid until end. */
struct plena_moe_f64_pair;
int plena_moe_f64_pair_begin(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                             const float *x_norm, const uint32_t *ids,
                             struct plena_moe_f64_pair **f, struct plena_err *err);
int plena_moe_f64_pair_expert(struct plena_moe_f64_pair *f, uint32_t e, uint32_t slot,
                              const struct plena_moe_ref_expert *x, struct plena_err *err);
int plena_moe_f64_pair_end(struct plena_moe_f64_pair *f, double *out, double *out_x,
                           struct plena_err *err);
void plena_moe_f64_pair_free(struct plena_moe_f64_pair *f);
/* The device-routed ids[T*k] against the float64 router of the model
 * (plena_router_agree_f64 per token, from the float64 RMSNorm and logits):
 * tokens whose expert set is a near-tie, and tokens whose set differs
 * beyond one (docs/lowering.md "Routers"). */
int plena_moe_route_agreement_f64(const struct plena_moe_ref_cfg *cfg,
                                  const struct plena_moe_ref_in *in, const uint32_t *ids,
                                  uint32_t *near_ties, uint32_t *different, struct plena_err *err);
/* Float64 RMSNorm of h times gamma: x64 [T][H] (PRE_NORM layers). */
int plena_moe_rmsnorm_f64(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                          double *x64);
/* ||x_norm - x64|| / ||x64||; -1 when ||x64|| is 0. */
double plena_moe_rel_rms_norm(const struct plena_moe_ref_cfg *cfg, const float *x_norm,
                              const double *x64);

/* rel_rms = ||(out - residual) - y64|| / ||y64|| where residual is the layer
 * input h for PRE_NORM layers (0 otherwise) and y64 = out64 - residual.
 * Returns -1 when ||y64|| is 0. */
double plena_moe_rel_rms(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                         const float *out, const double *out64);

/* The float64 bound measured where it is meaningful: rel = ||moe_out - y64|| /
 * ||y64|| with y64 = out64 - residual and moe_out the bit-exact reference's
 * MoE output before the residual add-back (plena_moe_ref_out.moe_out).
 * Why not ||(out - residual) - y64||, as the specification has it (a deviation,
 * docs/design.md): out = bf16(moe + residual) is rounded at the residual's
 * magnitude, so with random inputs (docs/replay.md "Pipeline": x uniform in
 * [-1, 1], weights 1/sqrt(fan_in)) ||residual|| is 5-10x ||y64||
 * and that one final rounding alone uses most of the 0.02 budget. Since the
 * bit-exact check already proves the emulator equals the reference, this
 * checkpoint is the emulator's value too; plena_moe_rel_rms_full guards the
 * add-back itself. Returns -1 when ||y64|| is 0. */
double plena_moe_rel_rms_moe(const struct plena_moe_ref_cfg *cfg, const struct plena_moe_ref_in *in,
                             const float *moe_out, const double *out64);
/* ||out - out64|| / ||out64|| over the whole layer output (residual included):
 * catches a missing or wrong residual add-back mirrored in generator and
 * reference. Returns -1 when ||out64|| is 0. */
double plena_moe_rel_rms_full(const struct plena_moe_ref_cfg *cfg, const float *out,
                              const double *out64);

/* V_TOPK semantics of docs/machine.md "C_SET_TOPK_REG and V_TOPK"
 * (stable total-order ranking, NaN last, softmax over the selected in
 * rank order, weights rounded to BF16), implemented independently of
 * the emulator. */
void plena_moe_ref_topk(const float *logits, uint32_t E, uint32_t k, uint32_t *ids, float *w);

/* The documented bound of docs/lowering.md "Checking a build". */
#define PLENA_MOE_REL_RMS_BOUND 0.02

#endif
