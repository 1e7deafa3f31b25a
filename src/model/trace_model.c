/* model <-> route-trace `model` object (trace_model.h). */
#include "model/trace_model.h"

#include "isa/isa.h"

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
                        json_string(plena_route_placement_name(m->router.placement)));
    if (m->policy_name) json_object_set_new(mo, "policy_name", json_string(m->policy_name));
    json_object_set_new(mo, "norm_topk_prob", json_boolean(m->router.norm != PLENA_NORM_NONE));
    if (m->num_experts && plena_router_is_set(&m->router)) { /* the router behind the routing */
        json_t *ro = plena_router_to_json(&m->router, m->policy_name);
        if (!ro) {
            json_decref(mo);
            return NULL;
        }
        json_object_set_new(mo, "router", ro);
    }
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
        plena_router_default(&m->router);
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
    /* a trace's router description wins over the preset's (schema v2
     * traces without one mean what they always meant: the preset's, else
     * softmax-top-k) */
    const json_t *ro = json_object_get(mo, "router");
    if (ro) {
        char w[300];
        snprintf(w, sizeof w, "%s.router", where);
        if ((rc = plena_router_from_json(ro, w, &m->router, err))) return rc;
    }
    if (plena_route_placement_parse(
            json_string_value(json_object_get(mo, "route_weight_placement")), &m->router.placement))
        m->router.placement = PLENA_ROUTE_OUTPUT;
    m->routing = PLENA_ROUTING_FIXED;
    return 0;
}

/* ---- the router description ---- */

json_t *plena_router_to_json(const struct plena_router *r, const char *family)
{
    json_t *o = json_object(), *cap = json_object();
    if (!o || !cap) {
        json_decref(o);
        json_decref(cap);
        return NULL;
    }
    int bad = 0;
#define PUT(obj, k, v) bad |= json_object_set_new(obj, k, v)
    PUT(o, "family", family ? json_string(family) : json_null());
    PUT(o, "scoring_func", json_string(plena_router_score_name(r->score)));
    PUT(o, "selection_bias", json_string(plena_select_bias_name(r->select_bias)));
    PUT(o, "topk_method",
        json_string(plena_topk_method_name(plena_group_topk_method(r->group_score))));
    PUT(o, "n_group", json_integer(r->n_group));
    PUT(o, "topk_group", json_integer(r->topk_group));
    PUT(o, "norm_topk_prob", json_boolean(r->norm != PLENA_NORM_NONE));
    PUT(o, "normalization", json_string(plena_router_norm_name(r->norm)));
    PUT(o, "norm_eps", json_real(r->norm_eps));
    PUT(o, "moe_normalize_expert_weights",
        r->norm == PLENA_NORM_L1 ? json_integer(1) : json_null());
    PUT(o, "moe_norm_min",
        r->norm == PLENA_NORM_SUM_CLAMPED ? json_real(r->norm_eps) : json_null());
    PUT(o, "routed_scaling_factor", json_real(r->scaling));
    PUT(o, "router_bias", json_boolean(r->logit_bias));
    PUT(o, "route_weight_placement", json_string(plena_route_placement_name(r->placement)));
    PUT(cap, "rule", json_string(plena_capacity_rule_name(r->capacity)));
    PUT(cap, "factor",
        r->capacity == PLENA_CAPACITY_FACTOR ? json_real(r->capacity_factor) : json_null());
    PUT(o, "capacity", cap);
    PUT(o, "router_precision", json_string(r->f32_logits ? "f32" : "bf16"));
#undef PUT
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int key_fail(const char *where, const char *key, const char *what, struct plena_err *err)
{
    char w[300];
    snprintf(w, sizeof w, "%s.%s", where, key);
    return PLENA_FAIL(err, PLENA_E_INPUT, w, "%s", what);
}

/* a finite number >= 0 into *out */
static int get_num(const json_t *v, const char *where, const char *key, float *out,
                   struct plena_err *err)
{
    if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > 1e30)
        return key_fail(where, key, "expected a finite number >= 0", err);
    *out = (float)json_number_value(v);
    return 0;
}

int plena_router_from_json(const json_t *o, const char *where, struct plena_router *r,
                           struct plena_err *err)
{
    plena_router_default(r);
    if (!json_is_object(o)) return key_fail(where, "router", "expected an object", err);
    const char *k;
    const json_t *v;
    enum plena_group_score method = PLENA_GROUP_NONE;
    int have_method = 0, norm_flag = -1;
    char choices[160];
    json_object_foreach((json_t *)o, k, v)
    {
        const char *sv = json_string_value(v);
        int rc = 0;
        if (!strcmp(k, "family")) {
            if (!json_is_string(v) && !json_is_null(v))
                rc = key_fail(where, k, "expected a string or null", err);
        } else if (!strcmp(k, "scoring_func")) {
            if (plena_router_score_parse(sv, &r->score)) {
                char list[120];
                snprintf(choices, sizeof choices, "expected %s",
                         plena_router_score_choices(", ", " or ", list, sizeof list));
                rc = key_fail(where, k, choices, err);
            }
        } else if (!strcmp(k, "selection_bias")) {
            if (plena_select_bias_parse(sv, &r->select_bias))
                rc = key_fail(where, k, "expected none, selection or score", err);
        } else if (!strcmp(k, "topk_method")) {
            have_method = 1;
            enum plena_topk_method tm;
            if (!plena_topk_method_parse(sv, &tm)) {
                method = plena_topk_method_group(tm);
            } else {
                char list[120];
                snprintf(choices, sizeof choices, "expected %s",
                         plena_topk_method_choices(", ", " or ", list, sizeof list));
                rc = key_fail(where, k, choices, err);
            }
        } else if (!strcmp(k, "n_group") || !strcmp(k, "topk_group")) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > PLENA_TOPK_MAX_EXPERTS)
                rc = key_fail(where, k, "expected an integer from 1 to 16383", err);
            else if (!strcmp(k, "n_group"))
                r->n_group = (uint32_t)json_integer_value(v);
            else
                r->topk_group = (uint32_t)json_integer_value(v);
        } else if (!strcmp(k, "norm_topk_prob")) {
            if (!json_is_boolean(v))
                rc = key_fail(where, k, "expected true or false", err);
            else
                norm_flag = json_is_true(v);
        } else if (!strcmp(k, "normalization")) {
            if (plena_router_norm_parse(sv, &r->norm))
                rc = key_fail(where, k, "expected none, sum, sum_clamped or l1", err);
        } else if (!strcmp(k, "norm_eps")) {
            rc = get_num(v, where, k, &r->norm_eps, err);
        } else if (!strcmp(k, "moe_normalize_expert_weights")) {
            if (!json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1))
                rc = key_fail(where, k, "expected null or 1 (the L1 norm)", err);
        } else if (!strcmp(k, "moe_norm_min")) {
            if (!json_is_null(v)) rc = get_num(v, where, k, &r->norm_eps, err);
        } else if (!strcmp(k, "routed_scaling_factor")) {
            rc = get_num(v, where, k, &r->scaling, err);
        } else if (!strcmp(k, "router_bias")) {
            if (!json_is_boolean(v))
                rc = key_fail(where, k, "expected true or false", err);
            else
                r->logit_bias = json_is_true(v);
        } else if (!strcmp(k, "route_weight_placement")) {
            if (plena_route_placement_parse(sv, &r->placement))
                rc = key_fail(where, k, "expected output or input", err);
        } else if (!strcmp(k, "capacity")) {
            const json_t *rule = json_object_get(v, "rule"), *f = json_object_get(v, "factor");
            if (!json_is_object(v) ||
                plena_capacity_rule_parse(json_string_value(rule), &r->capacity))
                rc = key_fail(where, k, "expected {\"rule\": none|factor|hunyuan, \"factor\": ...}",
                              err);
            else if (r->capacity == PLENA_CAPACITY_FACTOR)
                rc = get_num(f, where, "capacity.factor", &r->capacity_factor, err);
        } else if (!strcmp(k, "router_precision")) {
            if (!sv || (strcmp(sv, "f32") && strcmp(sv, "bf16")))
                rc = key_fail(where, k, "expected f32 or bf16", err);
            else
                r->f32_logits = !strcmp(sv, "f32");
        } else {
            rc = key_fail(where, k, "not a router field (docs/lowering.md \"Routers\")", err);
        }
        if (rc) return rc;
    }
    if (have_method) r->group_score = method;
    if (norm_flag == 0 && r->norm != PLENA_NORM_NONE && !json_object_get(o, "normalization"))
        r->norm = PLENA_NORM_NONE;
    if (norm_flag >= 0 && (norm_flag != 0) != (r->norm != PLENA_NORM_NONE))
        return key_fail(where, "norm_topk_prob", "disagrees with normalization", err);
    return 0;
}
