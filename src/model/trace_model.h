/* A model and a route trace's `model` object (docs/trace-schema.md, the
 * `model` fields): written in one place for every trace producer (trace gen,
 * importers, the checkpoint tracer) and read in one place for everything that
 * lowers a trace (replay, the replay tier's capacity rule). Not a public
 * header: it speaks jansson. */
#ifndef PLENA_MODEL_TRACE_MODEL_H
#define PLENA_MODEL_TRACE_MODEL_H

#include <jansson.h>
#include <stdint.h>

#include "common/err.h"
#include "model/model.h"

/* The `model` object of a trace of layer `layer` of m, members in schema
 * order; NULL when out of memory. */
json_t *plena_model_to_trace(const struct plena_moe_model *m, uint32_t layer);

/* The layer a trace describes, as replay lowers it: shape, shared branch,
 * shared gate, activation and route-weight placement from `mo`; everything a
 * trace does not carry (RMSNorm eps, expert biases, zero-centred norm, router
 * form, policy name) from the preset named by mo.name, else the defaults of
 * docs/lowering.md "Model files". Routing is FIXED (a replay feeds the
 * trace's ids) and there is no router bias. `where` names the object in
 * messages. PLENA_E_INPUT when a shape member is missing or not a
 * non-negative 32-bit integer (validated traces always have them). */
int plena_model_from_trace(const json_t *mo, const char *where, struct plena_moe_model *out,
                           struct plena_err *err);

/* The router description as JSON (docs/lowering.md "Routers"): the `router`
 * object of layout.json and of a trace's `model`, keys named as the HF
 * configs name them where they exist (family, scoring_func, topk_method,
 * n_group, topk_group, norm_topk_prob, routed_scaling_factor,
 * moe_normalize_expert_weights, moe_norm_min, capacity, route_weight_placement,
 * router_precision) plus plena's selection_bias, router_bias and norm_eps.
 * NULL when out of memory. */
json_t *plena_router_to_json(const struct plena_router *r, const char *family);
/* The router of a `router` object; every key checked (type, spelling, range),
 * unknown keys refused, the message naming where.key and what was expected. */
int plena_router_from_json(const json_t *o, const char *where, struct plena_router *r,
                           struct plena_err *err);

#endif
