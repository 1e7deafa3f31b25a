/* plena_trace_docgen: writes schemas/route_trace_v2.schema.json (JSON Schema
 * draft 2020-12) and docs/trace-schema.md from fields.def and rules.def, or with
 * --check compares the committed copies and fails when they are stale
 * (CTest trace_docs_fresh). A build tool, not part of libplena: it is
 * allowed to print. Semantic rules appear in the docs as prose only. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "isa/isa.h"
#include "model/model.h"
#include "trace/trace.h"

#define SCHEMA_PATH  "schemas/route_trace_v2.schema.json"
#define DOCS_PATH    "docs/trace-schema.md"
#define EXAMPLE_PATH "src/trace/testdata/example_v2.json"

static json_t *node(enum plena_trace_field id);

static json_t *enum_array(const char *values)
{
    json_t *a = json_array();
    const char *p = values;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        json_array_append_new(a, json_stringn(p, len));
        p = bar ? bar + 1 : p + len;
    }
    return a;
}

/* The JSON Schema "type" of a nullable field: [type, "null"]. */
static json_t *or_null(const char *type)
{
    json_t *t = json_array();
    json_array_append_new(t, json_string(type));
    json_array_append_new(t, json_string("null"));
    return t;
}

static void set_range(json_t *o, const struct plena_trace_field_info *f, int integral)
{
    if (isfinite(f->lo))
        json_object_set_new(o, "minimum",
                            integral ? json_integer((json_int_t)f->lo) : json_real(f->lo));
    if (isfinite(f->hi))
        json_object_set_new(o, "maximum",
                            integral ? json_integer((json_int_t)f->hi) : json_real(f->hi));
}

static enum plena_trace_field child(enum plena_trace_field parent, const char *key)
{
    for (unsigned i = 1; i < PLENA_TF_COUNT; i++) {
        const struct plena_trace_field_info *f = plena_trace_field_at(i);
        if (f->parent == parent && !strcmp(f->key, key)) return (enum plena_trace_field)i;
    }
    return PLENA_TF_COUNT;
}

/* ---- model.router: its members from the model's spelling lists (the ones
 * plena_router_from_json parses), so no list is copied here ---- */

static json_t *spellings_score(void)
{
    json_t *a = json_array();
#define SPELLING(c, str) json_array_append_new(a, json_string(str));
    PLENA_ROUTER_SCORE_LIST(SPELLING)
    return a;
}
static json_t *spellings_bias(void)
{
    json_t *a = json_array();
    PLENA_SELECT_BIAS_LIST(SPELLING)
    return a;
}
static json_t *spellings_method(void)
{
    json_t *a = json_array();
    PLENA_TOPK_METHOD_LIST(SPELLING)
    return a;
}
static json_t *spellings_norm(void)
{
    json_t *a = json_array();
    PLENA_ROUTER_NORM_LIST(SPELLING)
    return a;
}
static json_t *spellings_placement(void)
{
    json_t *a = json_array();
    PLENA_ROUTE_PLACEMENT_LIST(SPELLING)
    return a;
}
static json_t *spellings_capacity(void)
{
    json_t *a = json_array();
    PLENA_CAPACITY_LIST(SPELLING)
#undef SPELLING
    return a;
}

/* {"description": desc, "type": type} or with "enum" when values is set */
static json_t *member(const char *desc, json_t *type, json_t *values)
{
    json_t *o = json_object();
    json_object_set_new(o, "description", json_string(desc));
    if (type) json_object_set_new(o, "type", type);
    if (values) json_object_set_new(o, "enum", values);
    return o;
}

static json_t *router_properties(void)
{
    json_t *p = json_object(), *cap = json_object(), *cp = json_object(), *v;
    json_object_set_new(
        p, "family",
        member("the model family (the preset's policy_name), or null", or_null("string"), NULL));
    json_object_set_new(p, "scoring_func",
                        member("softmax over E, softmax_topk (over the selected logits: "
                               "gpt-oss), sigmoid, sigmoid_topk (of the selected logit: Llama-4)",
                               json_string("string"), spellings_score()));
    json_object_set_new(p, "selection_bias",
                        member("a per-expert bias added for the choice only (selection: "
                               "e_score_correction_bias) or to the weight too (score)",
                               json_string("string"), spellings_bias()));
    json_object_set_new(p, "topk_method",
                        member("greedy (no groups), group_limited_greedy (group max), noaux_tc "
                               "(group top-2 sum)",
                               json_string("string"), spellings_method()));
    v = member("groups of E / n_group experts (1: none)", json_string("integer"), NULL);
    json_object_set_new(v, "minimum", json_integer(1));
    json_object_set_new(v, "maximum", json_integer(PLENA_TOPK_MAX_EXPERTS));
    json_object_set_new(p, "n_group", v);
    v = member("groups the choice may use (<= n_group)", json_string("integer"), NULL);
    json_object_set_new(v, "minimum", json_integer(1));
    json_object_set_new(v, "maximum", json_integer(PLENA_TOPK_MAX_EXPERTS));
    json_object_set_new(p, "topk_group", v);
    json_object_set_new(
        p, "norm_topk_prob",
        member("false exactly when normalization is none", json_string("boolean"), NULL));
    json_object_set_new(p, "normalization",
                        member("none, sum (w / (sum + norm_eps)), sum_clamped (w / max(sum, "
                               "norm_eps): ERNIE, Hunyuan), l1 (DBRX)",
                               json_string("string"), spellings_norm()));
    v = member("the normalisation epsilon", json_string("number"), NULL);
    json_object_set_new(v, "minimum", json_integer(0));
    json_object_set_new(p, "norm_eps", v);
    json_t *l1 = json_array();
    json_array_append_new(l1, json_integer(1));
    json_array_append_new(l1, json_null());
    json_object_set_new(p, "moe_normalize_expert_weights",
                        member("1 with normalization l1, else null", NULL, l1));
    v = member("norm_eps with normalization sum_clamped, else null", or_null("number"), NULL);
    json_object_set_new(v, "minimum", json_integer(0));
    json_object_set_new(p, "moe_norm_min", v);
    v = member("weights x this after normalisation (V091)", json_string("number"), NULL);
    json_object_set_new(v, "exclusiveMinimum", json_integer(0));
    json_object_set_new(p, "routed_scaling_factor", v);
    json_object_set_new(
        p, "router_bias",
        member("a per-expert bias on the logits (gpt-oss)", json_string("boolean"), NULL));
    json_object_set_new(p, "route_weight_placement",
                        member("weights on the expert output or input (Llama-4)",
                               json_string("string"), spellings_placement()));
    json_object_set_new(cp, "rule",
                        member("none, factor (ceil(factor x T x k / E)), hunyuan (max(k, k x T "
                               "/ E)); over-capacity pairs weigh 0 (V094)",
                               json_string("string"), spellings_capacity()));
    v = member("the capacity factor with rule factor, else null", or_null("number"), NULL);
    json_object_set_new(v, "exclusiveMinimum", json_integer(0));
    json_object_set_new(cp, "factor", v);
    json_object_set_new(cap, "description", json_string("the capacity rule"));
    json_object_set_new(cap, "type", json_string("object"));
    json_object_set_new(cap, "properties", cp);
    json_object_set_new(cap, "additionalProperties", json_false());
    json_object_set_new(p, "capacity", cap);
    json_t *prec = json_array();
    json_array_append_new(prec, json_string("f32"));
    json_array_append_new(prec, json_string("bf16"));
    json_object_set_new(p, "router_precision",
                        member("the precision of the router logits", json_string("string"), prec));
    return p;
}

static json_t *node(enum plena_trace_field id)
{
    const struct plena_trace_field_info *f = plena_trace_field_at(id);
    json_t *o = json_object();
    json_object_set_new(o, "description", json_string(f->desc));
    switch (f->type) {
    case PLENA_TRACE_T_OBJECT: {
        json_t *props = json_object(), *req = json_array();
        json_object_set_new(o, "type", json_string("object"));
        for (unsigned i = 1; i < PLENA_TF_COUNT; i++) {
            const struct plena_trace_field_info *c = plena_trace_field_at(i);
            if (c->parent != id) continue;
            if (!strcmp(c->key, "*")) {
                json_object_set_new(o, "additionalProperties", node(c->id));
                continue;
            }
            json_object_set_new(props, c->key, node(c->id));
            if (c->req == PLENA_TRACE_REQ_YES) json_array_append_new(req, json_string(c->key));
        }
        json_object_set_new(o, "properties", props);
        if (json_array_size(req))
            json_object_set_new(o, "required", req);
        else
            json_decref(req);
        break;
    }
    case PLENA_TRACE_T_FREE_OBJECT:
        json_object_set_new(o, "type", json_string("object"));
        if (id == PLENA_TF_MODEL_ROUTER) {
            json_object_set_new(o, "properties", router_properties());
            json_object_set_new(o, "additionalProperties", json_false());
        }
        break;
    case PLENA_TRACE_T_STRING:
        json_object_set_new(o, "type", json_string("string"));
        if (isfinite(f->lo) && f->lo > 0)
            json_object_set_new(o, "minLength", json_integer((json_int_t)f->lo));
        if (isfinite(f->hi)) json_object_set_new(o, "maxLength", json_integer((json_int_t)f->hi));
        if (f->pattern) json_object_set_new(o, "pattern", json_string(f->pattern));
        if (f->enum_values) json_object_set_new(o, "enum", enum_array(f->enum_values));
        break;
    case PLENA_TRACE_T_GATE: {
        json_t *any = json_array(), *s = json_object(), *b = json_object();
        json_object_set_new(s, "type", json_string("string"));
        json_object_set_new(s, "enum", enum_array(f->enum_values));
        json_object_set_new(b, "type", json_string("boolean"));
        json_object_set_new(b, "deprecated", json_true());
        json_object_set_new(b, "description",
                            json_string("legacy spelling: true = sigmoid, false = none (W021)"));
        json_array_append_new(any, s);
        json_array_append_new(any, b);
        json_object_set_new(o, "anyOf", any);
        break;
    }
    case PLENA_TRACE_T_STR_OR_NULL: json_object_set_new(o, "type", or_null("string")); break;
    case PLENA_TRACE_T_INTEGER:
        json_object_set_new(o, "type", json_string("integer"));
        set_range(o, f, 1);
        break;
    case PLENA_TRACE_T_INT_OR_NULL:
        json_object_set_new(o, "type", or_null("integer"));
        set_range(o, f, 1);
        break;
    case PLENA_TRACE_T_NUMBER:
        json_object_set_new(o, "type", json_string("number"));
        set_range(o, f, 0);
        break;
    case PLENA_TRACE_T_BOOLEAN: json_object_set_new(o, "type", json_string("boolean")); break;
    case PLENA_TRACE_T_ARRAY: {
        json_object_set_new(o, "type", json_string("array"));
        enum plena_trace_field it = child(id, "[]");
        if (it != PLENA_TF_COUNT) json_object_set_new(o, "items", node(it));
        break;
    }
    case PLENA_TRACE_T_ANY: break;
    }
    return o;
}

/* The v1 requirements and the v2-only fields, as the `then` of an if/then on
 * schema_version 1. NULL when nothing under `id` differs for v1. */
static json_t *v1_node(enum plena_trace_field id)
{
    json_t *o = json_object(), *props = json_object(), *req = json_array();
    for (unsigned i = 1; i < PLENA_TF_COUNT; i++) {
        const struct plena_trace_field_info *c = plena_trace_field_at(i);
        if (c->parent != id || !strcmp(c->key, "*")) continue;
        if (c->req == PLENA_TRACE_REQ_V1) {
            json_array_append_new(req, json_string(c->key));
            if (c->type == PLENA_TRACE_T_STR_OR_NULL) {
                json_t *s = json_object();
                json_object_set_new(s, "type", json_string("string"));
                json_object_set_new(props, c->key, s);
            }
        }
        if (c->req == PLENA_TRACE_REQ_V2ONLY) json_object_set_new(props, c->key, json_false());
        if (c->type == PLENA_TRACE_T_OBJECT) {
            json_t *sub = v1_node(c->id);
            if (sub) json_object_set_new(props, c->key, sub);
        }
    }
    if (json_array_size(req)) json_object_set(o, "required", req);
    if (json_object_size(props)) json_object_set(o, "properties", props);
    json_decref(req);
    json_decref(props);
    if (!json_object_size(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int build_schema(struct plena_buf *b)
{
    json_t *root = node(PLENA_TF_ROOT);
    json_object_set_new(root, "$schema",
                        json_string("https://json-schema.org/draft/2020-12/schema"));
    json_object_set_new(root, "$id", json_string("route_trace_v2.schema.json"));
    json_object_set_new(root, "title", json_string("plena route trace, schema v2"));
    json_object_set_new(
        root, "$comment",
        json_string("Generated by plena_trace_docgen from src/trace/fields.def; do not edit. "
                    "Semantic rules (histogram, statistics, sums, shared-expert combinations, "
                    "token_count = batch_size x seq_len) are checked only by `plena trace "
                    "validate`. Unknown members are allowed here; the validator warns (W001)."));
    json_t *cond = json_object(), *ifs = json_object(), *ifp = json_object(), *sv = json_object();
    json_object_set_new(sv, "const", json_integer(1));
    json_object_set_new(ifp, "schema_version", sv);
    json_object_set_new(ifs, "properties", ifp);
    json_t *ifr = json_array();
    json_array_append_new(ifr, json_string("schema_version"));
    json_object_set_new(ifs, "required", ifr);
    json_object_set_new(cond, "if", ifs);
    json_object_set_new(cond, "then", v1_node(PLENA_TF_ROOT));
    json_t *all = json_array();
    json_array_append_new(all, cond);
    json_object_set_new(root, "allOf", all);
    int rc = plena_trace_json_write(b, root, 1);
    json_decref(root);
    return rc;
}

/* ---- markdown ---- */

static void type_text(struct plena_buf *b, enum plena_trace_field id)
{
    const struct plena_trace_field_info *f = plena_trace_field_at(id);
    if (f->type == PLENA_TRACE_T_ARRAY) {
        plena_buf_puts(b, "array of ");
        enum plena_trace_field it = child(id, "[]");
        if (it != PLENA_TF_COUNT) type_text(b, it);
        return;
    }
    if (f->type == PLENA_TRACE_T_GATE) {
        plena_buf_puts(b, "string (legacy: boolean)");
        return;
    }
    plena_buf_puts(b, plena_trace_ftype_name(f->type));
}

static void constraint_text(struct plena_buf *b, enum plena_trace_field id)
{
    const struct plena_trace_field_info *f = plena_trace_field_at(id);
    char lo[48], hi[48];
    int any = 0;
    while (f->type == PLENA_TRACE_T_ARRAY && child(f->id, "[]") != PLENA_TF_COUNT)
        f = plena_trace_field_at(child(f->id, "[]"));
    plena_json_fmt_double(lo, sizeof lo, f->lo);
    plena_json_fmt_double(hi, sizeof hi, f->hi);
    int is_str = f->type == PLENA_TRACE_T_STRING || f->type == PLENA_TRACE_T_STR_OR_NULL;
    if (is_str && isfinite(f->hi)) {
        plena_buf_printf(b, "%s..%s bytes", lo, hi);
        any = 1;
    } else if (is_str && f->lo >= 1) {
        plena_buf_puts(b, "non-empty");
        any = 1;
    } else if (!is_str && f->type != PLENA_TRACE_T_GATE) {
        if (isfinite(f->lo) && isfinite(f->hi)) {
            plena_buf_printf(b, "%s..%s", lo, hi);
            any = 1;
        } else if (isfinite(f->lo)) {
            plena_buf_printf(b, ">= %s", lo);
            any = 1;
        }
    }
    if (f->enum_values) {
        plena_buf_printf(b, "%sone of ", any ? "; " : "");
        const char *p = f->enum_values;
        while (*p) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            plena_buf_printf(b, "`%.*s`%s", (int)len, p, bar ? ", " : "");
            p = bar ? bar + 1 : p + len;
        }
        any = 1;
    }
    if (f->pattern) {
        plena_buf_printf(b, "%spattern `%s`", any ? "; " : "", f->pattern);
        any = 1;
    }
    if (!any) plena_buf_puts(b, "-");
}

static const char *req_text(enum plena_trace_freq r)
{
    switch (r) {
    case PLENA_TRACE_REQ_YES: return "yes";
    case PLENA_TRACE_REQ_V1: return "v1 yes, v2 no";
    case PLENA_TRACE_REQ_NO: return "no";
    case PLENA_TRACE_REQ_V2ONLY: return "no (v2 only)";
    }
    return "?";
}

static void md_object(struct plena_buf *b, enum plena_trace_field obj)
{
    char path[128];
    const struct plena_trace_field_info *o = plena_trace_field_at(obj);
    if (obj == PLENA_TF_ROOT)
        plena_buf_puts(b, "### Top level\n\n");
    else
        plena_buf_printf(b, "### `%s`\n\n", plena_trace_field_path(obj, path, sizeof path));
    plena_buf_put_md_cell(b, o->desc);
    plena_buf_puts(b, ".\n\n| field | type | required | constraint | rule | description |\n"
                      "|---|---|---|---|---|---|\n");
    for (unsigned i = 1; i < PLENA_TF_COUNT; i++) {
        const struct plena_trace_field_info *f = plena_trace_field_at(i);
        if (f->parent != obj) continue;
        plena_buf_printf(b, "| `%s` | ", plena_trace_field_path(f->id, path, sizeof path));
        type_text(b, f->id);
        plena_buf_printf(b, " | %s | ", req_text(f->req));
        constraint_text(b, f->id);
        plena_buf_printf(
            b, " | %s%s | ", f->code,
            (f->flags & PLENA_TRACE_FLAG_UPSTREAM) && strcmp(f->code, "W002") ? ", W002" : "");
        plena_buf_put_md_cell(b, f->desc);
        plena_buf_puts(b, " |\n");
    }
    plena_buf_puts(b, "\n");
}

/* The members of model.router as a table (type or values, description). */
static void md_props(struct plena_buf *b, const char *prefix, json_t *props)
{
    const char *k;
    json_t *v;
    json_object_foreach(props, k, v)
    {
        json_t *en = json_object_get(v, "enum"), *ty = json_object_get(v, "type");
        plena_buf_printf(b, "| `%s.%s` | ", prefix, k);
        if (en) {
            for (size_t i = 0; i < json_array_size(en); i++) {
                json_t *e = json_array_get(en, i);
                char *t = json_dumps(e, JSON_ENCODE_ANY);
                plena_buf_printf(b, "%s`%s`", i ? ", " : "", t ? t : "?");
                free(t);
            }
        } else if (json_is_array(ty)) {
            plena_buf_printf(b, "%s or null", json_string_value(json_array_get(ty, 0)));
        } else {
            plena_buf_puts(b, json_string_value(ty));
        }
        plena_buf_puts(b, " | ");
        plena_buf_put_md_cell(b, json_string_value(json_object_get(v, "description")));
        plena_buf_puts(b, " |\n");
        json_t *sub = json_object_get(v, "properties");
        if (sub) {
            char pre[128];
            snprintf(pre, sizeof pre, "%s.%s", prefix, k);
            md_props(b, pre, sub);
        }
    }
}

static void md_router(struct plena_buf *b)
{
    json_t *props = router_properties();
    plena_buf_puts(b, "### `model.router`\n\n"
                      "The router that produced the routing (docs/lowering.md \"Routers\"); every "
                      "member is checked by V090 (unknown members refused), the invariants of "
                      "the routing by V091-V094. A trace without it means what it always meant "
                      "(the weight source's V049 sum rule).\n\n"
                      "| member | type or values | description |\n|---|---|---|\n");
    md_props(b, "model.router", props);
    plena_buf_puts(b, "\n");
    json_decref(props);
}

static const char *semantic_rules =
    "## Semantic rules (validator only)\n\n"
    "These are not expressible in the field table and live only in `src/trace/validate.c`; the "
    "JSON "
    "Schema does not check them.\n\n"
    "- `trace_id` pattern applies to v2; a v1 `trace_id` outside it gives W010.\n"
    "- `created_at_utc` must be a real calendar date (V006).\n"
    "- `model.top_k` <= `model.num_experts` (V014).\n"
    "- Shared experts: `shared_experts` >= 1 needs `shared_intermediate_size` (V023) "
    "and "
    "`shared_gate` (V024); a width without experts is V025, a `sigmoid` gate without experts V026; "
    "any shared field with `schema_version` 1 is V027.\n"
    "- `workload.token_count` = `batch_size` x `seq_len` (V033); `decode_step` only with phase "
    "`decode` (V034).\n"
    "- `routing.topk_indices` / `topk_weights`: exactly `token_count` rows of `top_k` entries "
    "(V042/V046); ids < `num_experts` (V044), no id twice in a row (V045); weights finite, >= 0, "
    "binary32 range (V047/V048).\n"
    "- Row sums per `weight_source` (V049, W030) and non-increasing order (V050, W031): "
    "`true_router_topk_softmax_weights`, `uniform_weights_timing_only` and `synthetic` need "
    "\\|sum - 1\\| <= 4e-3; `true_router_softmax_unnormalized_weights` needs sum <= 1 + 4e-3; "
    "`imported` and `unspecified` only warn; `true_router_scaled_softmax_weights` (softmax "
    "scores x routed_scaling_factor, DeepSeek-V2) has no sum rule of its own and "
    "`true_router_sigmoid_weights` (sigmoid scores, normalised or not, x routed_scaling_factor, "
    "ranked by the bias-corrected scores, DeepSeek-V3) neither a sum nor an order rule: "
    "`model.router` gives theirs (V091). Sums are taken in double over the binary32 values.\n"
    "- With `model.router` (V090: it parses and fits num_experts and top_k): a normalising "
    "router's rows sum to `routed_scaling_factor` within 4e-3 relative, unless a pair was "
    "dropped; an unnormalised softmax router's rows sum to at most it, a sigmoid one's to at "
    "most top_k times it (V091, in place of V049; not for `uniform_weights_timing_only`); a "
    "group-limited router's rows use at most `topk_group` groups of num_experts / `n_group` "
    "experts (V092); `sigmoid_topk` without normalisation (Llama-4) keeps every weight in "
    "(0, `routed_scaling_factor`) (V093); with a capacity rule each expert keeps at most its "
    "capacity of pairs with weight > 0 (V094), and V050 skips the dropped (zero) pairs.\n"
    "- `expert_counts`: `num_experts` integers >= 0 (V051), sum = `token_count` x `top_k` (V052), "
    "equal to the histogram of `topk_indices` (V053).\n"
    "- `duplicate_factor` = sum(counts) / #active (0 when none active), relative tolerance 1e-9; "
    "`gini`: counts sorted ascending v(1) <= ... <= v(n), S = sum i*v(i) in 64-bit integers, "
    "gini = (double)(2S) / (double)(n*sum) - (double)(n+1)/(double)n, 0 when the sum is 0, "
    "absolute "
    "tolerance 1e-9 (V054). `active_experts`, `hot_experts`, `cold_experts` must equal the "
    "recomputed lists (V056).\n"
    "- `replay.blen` <= `replay.mlen` (V060) and divides it (V061).\n"
    "- v1: `artifacts.reference_pt` and `artifacts.l1_golden_pt` must be strings (V070).\n"
    "- `logical_bytes`: T x H x 2, T x K x H x 2, T x K x 2 (V071).\n"
    "- `token_count` x `top_k` <= 2^28, checked before any row is walked (V080).\n"
    "- In a trace set, `trace_id` is unique (V100).\n\n";

static int build_docs(struct plena_buf *b, const char *example)
{
    plena_buf_puts(
        b,
        "# Route-trace schema v2\n\n"
        "<!-- Generated by plena_trace_docgen from src/trace/fields.def and src/trace/rules.def. "
        "Do not edit: change the tables and run `ninja trace-docs`; the CTest test "
        "`trace_docs_fresh` fails when this file is stale. -->\n\n"
        "A route trace is one JSON object describing the routing of one MoE layer for one "
        "token group. `plena trace validate` checks it; "
        "the JSON Schema `schemas/route_trace_v2.schema.json` is generated from the same field "
        "table but checks only types, ranges and enums.\n\n"
        "Column *rule* is the validator code for a missing, mistyped or out-of-range value "
        "(any non-integer in an integer field is V008). *required* `v1 yes, v2 no` fields are "
        "required only with `schema_version` 1; `no (v2 only)` fields need `schema_version` 2 "
        "(V027). Unknown members give warning W001 (an error with `--strict`).\n\n"
        "## Fields\n\n");
    md_object(b, PLENA_TF_ROOT);
    for (unsigned i = 1; i < PLENA_TF_COUNT; i++)
        if (plena_trace_field_at(i)->type == PLENA_TRACE_T_OBJECT) md_object(b, i);
    md_router(b);
    plena_buf_puts(b, semantic_rules);
    plena_buf_puts(b, "## Validator findings\n\n| code | path | rule |\n|---|---|---|\n");
    for (unsigned i = 0; i < plena_trace_rule_count(); i++) {
        const struct plena_trace_rule_info *r = plena_trace_rule_at(i);
        plena_buf_printf(b, "| %s | `%s` | ", r->code, r->path);
        plena_buf_put_md_cell(b, r->rule);
        plena_buf_puts(b, " |\n");
    }
    plena_buf_puts(b,
                   "\n## Complete example\n\n"
                   "Valid, v2, with a gated shared branch (shown compacted). Check by hand: counts "
                   "sum 8 = 4 x 2; 5 active experts, so duplicate_factor 8/5 = 1.6; sorted counts "
                   "[0,0,0,1,1,1,2,3] give S = 53 and gini = 106/64 - 9/8 = 0.53125.\n\n```json\n");
    plena_buf_puts(b, example);
    plena_buf_puts(b, "```\n");
    return b->failed ? -1 : 0;
}

static int compare_file(const char *path, const struct plena_buf *want)
{
    char *data;
    size_t len;
    struct plena_err err = {0};
    if (plena_file_read_all(path, &data, &len, &err)) {
        fprintf(stderr, "plena_trace_docgen: %s: missing or unreadable (run `ninja trace-docs`)\n",
                path);
        return 1;
    }
    int same = len == want->len && memcmp(data, want->data, len) == 0;
    plena_free(data);
    if (!same) {
        fprintf(stderr,
                "plena_trace_docgen: %s is stale: regenerate it with `ninja trace-docs` "
                "(fields.def or rules.def changed)\n",
                path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "--write") && strcmp(argv[1], "--check"))) {
        fprintf(stderr, "usage: plena_trace_docgen --write|--check SOURCE_DIR\n"
                        "  writes (or compares) " SCHEMA_PATH " and " DOCS_PATH "\n");
        return 2;
    }
    int check = !strcmp(argv[1], "--check");
    char schema_path[4096], docs_path[4096], example_path[4096];
    if (plena_path_join(schema_path, sizeof schema_path, argv[2], SCHEMA_PATH) ||
        plena_path_join(docs_path, sizeof docs_path, argv[2], DOCS_PATH) ||
        plena_path_join(example_path, sizeof example_path, argv[2], EXAMPLE_PATH)) {
        fprintf(stderr, "plena_trace_docgen: path too long\n");
        return 2;
    }
    struct plena_err err = {0};
    char *example;
    size_t example_len;
    if (plena_file_read_all(example_path, &example, &example_len, &err)) {
        fprintf(stderr, "plena_trace_docgen: %s: %s\n", err.where, err.msg);
        return 3;
    }
    struct plena_buf schema, docs;
    plena_buf_init(&schema);
    plena_buf_init(&docs);
    int rc = 0;
    if (build_schema(&schema) || build_docs(&docs, example)) {
        fprintf(stderr, "plena_trace_docgen: out of memory\n");
        rc = 5;
    } else if (check) {
        rc = compare_file(schema_path, &schema) | compare_file(docs_path, &docs);
    } else if (plena_file_write_atomic(schema_path, schema.data, schema.len, &err) ||
               plena_file_write_atomic(docs_path, docs.data, docs.len, &err)) {
        fprintf(stderr, "plena_trace_docgen: %s: %s\n", err.where, err.msg);
        rc = 4;
    }
    plena_free(example);
    plena_buf_free(&schema);
    plena_buf_free(&docs);
    return rc;
}
