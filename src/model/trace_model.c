/* model <-> route-trace `model` object (trace_model.h). */
#include "model/trace_model.h"

#include <stdio.h>
#include <string.h>

json_t *plena_model_to_trace(const struct plena_moe_model *m, uint32_t layer)
{
    json_t *mo = json_object();
    if (!mo) return NULL;
    const int shared = m->shared_inter && m->n_shared;
    json_object_set_new(mo, "name", json_string(m->name));
    json_object_set_new(mo, "layer_index", json_integer(layer));
    json_object_set_new(mo, "hidden_size", json_integer(m->hidden));
    json_object_set_new(mo, "intermediate_size", json_integer(m->moe_inter));
    json_object_set_new(mo, "num_experts", json_integer(m->num_experts));
    json_object_set_new(mo, "top_k", json_integer(m->top_k));
    json_object_set_new(mo, "shared_experts", json_integer(m->shared_inter ? m->n_shared : 0));
    if (shared) {
        json_object_set_new(mo, "shared_intermediate_size", json_integer(m->shared_inter));
        json_object_set_new(mo, "shared_gate", json_string(plena_shared_gate_name(m->shared_gate)));
    }
    json_object_set_new(mo, "activation_policy", json_string(plena_act_policy_name(m->activation)));
    json_object_set_new(mo, "route_weight_placement",
                        json_string(plena_route_placement_name(m->route_placement)));
    if (m->policy_name) json_object_set_new(mo, "policy_name", json_string(m->policy_name));
    json_object_set_new(mo, "norm_topk_prob", json_boolean(m->norm_topk_prob));
    return mo;
}

static int get_u32(const json_t *mo, const char *key, int required, uint32_t *out,
                   const char *where, struct plena_err *err)
{
    const json_t *v = json_object_get(mo, key);
    if (!v && !required) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > (json_int_t)UINT32_MAX) {
        char w[300];
        snprintf(w, sizeof w, "%s.%s", where, key);
        return PLENA_FAIL(err, PLENA_E_INPUT, w, "expected a non-negative 32-bit integer");
    }
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

int plena_model_from_trace(const json_t *mo, const char *where, struct plena_moe_model *m,
                           struct plena_err *err)
{
    if (!where) where = "model";
    const char *name = json_string_value(json_object_get(mo, "name"));
    const struct plena_moe_model *pre = name ? plena_model_preset_find(name) : NULL;
    memset(m, 0, sizeof *m);
    if (pre) {
        *m = *pre;
    } else {
        m->rms_eps = 1e-6f;
        m->norm_topk_prob = 1;
        m->router_form = PLENA_ROUTER_GEMM;
    }
    snprintf(m->name, sizeof m->name, "%s", name ? name : "trace");
    int rc = get_u32(mo, "hidden_size", 1, &m->hidden, where, err);
    if (!rc) rc = get_u32(mo, "intermediate_size", 1, &m->moe_inter, where, err);
    if (!rc) rc = get_u32(mo, "num_experts", 1, &m->num_experts, where, err);
    if (!rc) rc = get_u32(mo, "top_k", 1, &m->top_k, where, err);
    if (!rc) rc = get_u32(mo, "shared_experts", 0, &m->n_shared, where, err);
    if (!rc) rc = get_u32(mo, "shared_intermediate_size", 0, &m->shared_inter, where, err);
    if (rc) return rc;
    if (!m->n_shared) m->shared_inter = 0;
    /* schema v1 wrote the gate as a boolean */
    const json_t *g = json_object_get(mo, "shared_gate");
    enum plena_shared_gate gate = PLENA_SHARED_GATE_NONE;
    if (json_is_true(g) ||
        (json_is_string(g) && !plena_shared_gate_parse(json_string_value(g), &gate) &&
         gate == PLENA_SHARED_GATE_SIGMOID))
        m->shared_gate = PLENA_SHARED_GATE_SIGMOID;
    else
        m->shared_gate = PLENA_SHARED_GATE_NONE;
    if (plena_act_policy_parse(json_string_value(json_object_get(mo, "activation_policy")),
                               &m->activation))
        m->activation = PLENA_ACT_STANDARD_SWIGLU;
    if (plena_route_placement_parse(
            json_string_value(json_object_get(mo, "route_weight_placement")), &m->route_placement))
        m->route_placement = PLENA_ROUTE_OUTPUT;
    m->routing = PLENA_ROUTING_FIXED;
    m->router_bias = 0; /* no router under fixed routing */
    return 0;
}
