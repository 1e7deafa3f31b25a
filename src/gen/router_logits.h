/* Preloaded router logits (docs/replay.md "Device routing"): the router
 * logits a replay with `--routing device` preloads into VRAM instead of the
 * router GEMM, chosen per router form so that the device router of the
 * trace's model (gen/router.c) selects exactly the trace's ids per token
 * (as a set) and weighs them like the trace (up to the normalisation the
 * router applies). */
#ifndef PLENA_GEN_ROUTER_LOGITS_H
#define PLENA_GEN_ROUTER_LOGITS_H

#include <stdint.h>

#include "../common/err.h"
#include "../gen/moe.h"

/* The logit of an expert a token does not select, and of a selected one whose
 * weight is 0 (docs/replay.md: -16384 and -30, both exact in BF16). */
#define PLENA_PRELOAD_LOGIT_UNSELECTED (-16384.0f)
#define PLENA_PRELOAD_LOGIT_MIN        (-30.0f)

/* logits[T*E] (BF16 values) for the device router of cfg from the routing
 * ids/w ([T*k], pair order):
 *  - softmax scores (V_TOPK alone, softmax over E): ln(w_j) at the selected
 *    ids (det_log; at least -30, w_j <= 0 gives -30);
 *  - sigmoid scores (sigmoid, sigmoid of the selected logit): the logit of
 *    u_j = c x w_j, c = 0.5 / max_j w_j when the router normalises (only the
 *    ratios survive), else 1 / routed_scaling_factor (the weight is the
 *    sigmoid itself), u_j clamped to [e^-30, 1 - 2^-8];
 *  - -16384 at every other expert: its softmax probability and its sigmoid
 *    are exactly 0 on the device, below every selected score, so a
 *    group-limited router's best groups are those holding the selected ids
 *    and the selection bias (staged as zeros with preloaded logits) cannot
 *    move a selection.
 * PLENA_E_INPUT (where "routing.topk_indices[t]") for an id >= E, a repeated
 * id, a token whose ids span more than topk_group groups, or a router with
 * no device form. */
int plena_moe_router_logits_for(const struct plena_moe_cfg *cfg, uint32_t T, const uint32_t *ids,
                                const float *w, float *logits, struct plena_err *err);

#endif
