/* The MoE layer description (model.h): presets (models.def), the enums'
 * spellings, HF-style config files (docs/lowering.md "Model files") and the
 * shape rules. Resolution and validation only; lowering lives in gen/. */
#include "model/model.h"

#include <jansson.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

#include "isa/isa.h"

/* Presets: models.def rows with named fields (struct plena_moe_model). */
static const struct plena_moe_model presets[] = {
#define PLENA_MODEL(nm, ...) {.name = nm, __VA_ARGS__},
#include "model/models.def"
#undef PLENA_MODEL
};

/* ---- spellings: one function triple per enum, expanded from its list ---- */
#define SPELLING_ROW(c, s) {c, s},
#define ENUM_FUNCTIONS(type, LIST)                                                                 \
    static const struct {                                                                          \
        enum plena_##type v;                                                                       \
        const char *s;                                                                             \
    } type##_spellings[] = {LIST(SPELLING_ROW)};                                                   \
    const char *plena_##type##_name(enum plena_##type v)                                           \
    {                                                                                              \
        for (size_t i = 0; i < sizeof type##_spellings / sizeof type##_spellings[0]; i++)          \
            if (type##_spellings[i].v == v) return type##_spellings[i].s;                          \
        return "?";                                                                                \
    }                                                                                              \
    int plena_##type##_parse(const char *s, enum plena_##type *out)                                \
    {                                                                                              \
        for (size_t i = 0; s && i < sizeof type##_spellings / sizeof type##_spellings[0]; i++)     \
            if (!strcmp(type##_spellings[i].s, s)) {                                               \
                *out = type##_spellings[i].v;                                                      \
                return 0;                                                                          \
            }                                                                                      \
        return -1;                                                                                 \
    }                                                                                              \
    const char *plena_##type##_choices(const char *sep, const char *last_sep, char *buf,           \
                                       unsigned long n)                                            \
    {                                                                                              \
        const size_t k = sizeof type##_spellings / sizeof type##_spellings[0];                     \
        size_t off = 0;                                                                            \
        buf[0] = 0;                                                                                \
        for (size_t i = 0; i < k && off < n; i++)                                                  \
            off += (size_t)snprintf(buf + off, n - off, "%s%s",                                    \
                                    i == 0       ? ""                                              \
                                    : i + 1 == k ? last_sep                                        \
                                                 : sep,                                            \
                                    type##_spellings[i].s);                                        \
        return buf;                                                                                \
    }

ENUM_FUNCTIONS(act_policy, PLENA_ACT_POLICY_LIST)
ENUM_FUNCTIONS(route_placement, PLENA_ROUTE_PLACEMENT_LIST)
ENUM_FUNCTIONS(routing_kind, PLENA_ROUTING_KIND_LIST)
ENUM_FUNCTIONS(router_form, PLENA_ROUTER_FORM_LIST)
ENUM_FUNCTIONS(shared_gate, PLENA_SHARED_GATE_LIST)
ENUM_FUNCTIONS(residual_mode, PLENA_RESIDUAL_MODE_LIST)
ENUM_FUNCTIONS(router_score, PLENA_ROUTER_SCORE_LIST)
ENUM_FUNCTIONS(select_bias, PLENA_SELECT_BIAS_LIST)
ENUM_FUNCTIONS(group_score, PLENA_GROUP_SCORE_LIST)
ENUM_FUNCTIONS(topk_method, PLENA_TOPK_METHOD_LIST)
ENUM_FUNCTIONS(router_norm, PLENA_ROUTER_NORM_LIST)

enum plena_group_score plena_topk_method_group(enum plena_topk_method m)
{
    return m == PLENA_TOPK_NOAUX_TC               ? PLENA_GROUP_TOP2_SUM
           : m == PLENA_TOPK_GROUP_LIMITED_GREEDY ? PLENA_GROUP_MAX
                                                  : PLENA_GROUP_NONE;
}

enum plena_topk_method plena_group_topk_method(enum plena_group_score g)
{
    return g == PLENA_GROUP_TOP2_SUM ? PLENA_TOPK_NOAUX_TC
           : g == PLENA_GROUP_MAX    ? PLENA_TOPK_GROUP_LIMITED_GREEDY
                                     : PLENA_TOPK_GREEDY;
}
ENUM_FUNCTIONS(capacity_rule, PLENA_CAPACITY_LIST)
ENUM_FUNCTIONS(router_lowering, PLENA_ROUTER_LOWERING_LIST)
ENUM_FUNCTIONS(weights_mode, PLENA_WEIGHTS_MODE_LIST)

int plena_router_is_set(const struct plena_router *r)
{
    return r->n_group >= 1;
}

void plena_router_default(struct plena_router *r)
{
    memset(r, 0, sizeof *r);
    r->score = PLENA_SCORE_SOFTMAX;
    r->norm = PLENA_NORM_SUM;
    r->n_group = r->topk_group = 1;
    r->scaling = 1.0f;
}

int plena_router_validate(const struct plena_router *r, uint32_t E, uint32_t k, const char *where,
                          struct plena_err *err)
{
    if (r->n_group < 1 || r->topk_group < 1 || r->topk_group > r->n_group)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: topk_group %u and n_group %u: expected 1 <= topk_group <= "
                          "n_group",
                          r->topk_group, r->n_group);
    if (E && E % r->n_group)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: n_group %u does not divide num_experts %u", r->n_group, E);
    if (E && (uint64_t)r->topk_group * (E / r->n_group) < k)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: topk_group %u groups of %u experts hold fewer than top_k %u",
                          r->topk_group, E / r->n_group, k);
    if ((r->n_group > 1) != (r->group_score != PLENA_GROUP_NONE))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: n_group %u with group score '%s' (groups need a group score, "
                          "one group none)",
                          r->n_group, plena_group_score_name(r->group_score));
    if (!(r->scaling > 0.0f) || r->scaling > 1e30f)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: routed_scaling_factor %g: expected a finite value > 0",
                          (double)r->scaling);
    if (!(r->norm_eps >= 0.0f) || r->norm_eps > 1e30f)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: normalisation epsilon %g: expected a finite value >= 0",
                          (double)r->norm_eps);
    if (r->capacity == PLENA_CAPACITY_FACTOR &&
        !(r->capacity_factor > 0.0f && r->capacity_factor < 1e30f))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: capacity factor %g: expected a finite value > 0",
                          (double)r->capacity_factor);
    if ((r->score == PLENA_SCORE_SOFTMAX_SELECTED || r->score == PLENA_SCORE_SIGMOID_SELECTED) &&
        r->n_group > 1)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "router: score '%s' selects on the logits, group-limited selection on "
                          "scores over all experts",
                          plena_router_score_name(r->score));
    return 0;
}
ENUM_FUNCTIONS(input_mode, PLENA_INPUT_MODE_LIST)

const struct plena_moe_model *plena_model_preset_find(const char *name)
{
    if (!name) return NULL;
    for (unsigned i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

unsigned plena_model_preset_count(void)
{
    return (unsigned)(sizeof presets / sizeof presets[0]);
}

const struct plena_moe_model *plena_model_preset_at(unsigned i)
{
    return i < plena_model_preset_count() ? &presets[i] : NULL;
}

uint32_t plena_model_fused_shared_width(uint32_t n_shared, uint32_t moe_inter)
{
    uint64_t v = (uint64_t)n_shared * moe_inter;
    return v > UINT32_MAX ? 0 : (uint32_t)v;
}

int plena_model_resolve(const char *name_or_path, struct plena_moe_model *out,
                        struct plena_err *err)
{
    if (!name_or_path || !*name_or_path)
        return PLENA_FAIL(err, PLENA_E_INPUT, "--model", "empty model name");
    const struct plena_moe_model *p = plena_model_preset_find(name_or_path);
    if (p) {
        *out = *p;
        return 0;
    }
    if (!strchr(name_or_path, '/') && !strstr(name_or_path, ".json"))
        return PLENA_FAIL(err, PLENA_E_INPUT, name_or_path,
                          "unknown model preset '%s' (see plena moe --list-models)", name_or_path);
    return plena_model_read_config(name_or_path, out, err);
}

int plena_model_validate(const struct plena_moe_model *m, uint32_t mlen, struct plena_err *err)
{
    const char *w = m->name;
    const struct {
        const char *key;
        uint32_t v;
    } widths[] = {{"hidden_size", m->hidden},
                  {"moe_intermediate_size", m->moe_inter},
                  {"shared_expert_intermediate_size", m->shared_inter}};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i].v > PLENA_MODEL_MAX_WIDTH)
            return PLENA_FAIL(err, PLENA_E_INPUT, w, "%s %u: expected at most %u", widths[i].key,
                              widths[i].v, PLENA_MODEL_MAX_WIDTH);
    if (m->hidden == 0 || mlen == 0 || m->hidden % mlen)
        return PLENA_FAIL(err, PLENA_E_INPUT, w,
                          "hidden size %u must be a positive multiple of MLEN %u", m->hidden, mlen);
    if (m->routing != PLENA_ROUTING_NONE) {
        if (m->num_experts < 1 || m->num_experts > PLENA_TOPK_MAX_EXPERTS)
            return PLENA_FAIL(err, PLENA_E_INPUT, w, "num_experts %u: expected 1..%d",
                              m->num_experts, PLENA_TOPK_MAX_EXPERTS);
        if (m->top_k < 1 || m->top_k > m->num_experts || m->top_k > PLENA_TOPK_MAX_K)
            return PLENA_FAIL(err, PLENA_E_INPUT, w,
                              "top_k %u: expected 1 <= top_k <= min(num_experts %u, %d)", m->top_k,
                              m->num_experts, PLENA_TOPK_MAX_K);
        if (m->moe_inter == 0)
            return PLENA_FAIL(err, PLENA_E_INPUT, w, "moe_intermediate_size must be > 0");
    } else if (m->shared_inter == 0) {
        return PLENA_FAIL(err, PLENA_E_INPUT, w,
                          "a layer without routing needs a shared expert (width 0)");
    }
    if (m->n_shared > 0 && m->shared_inter == 0)
        return PLENA_FAIL(err, PLENA_E_INPUT, w, "n_shared %u with shared width 0", m->n_shared);
    if (m->shared_gate != PLENA_SHARED_GATE_NONE && m->shared_inter == 0)
        return PLENA_FAIL(err, PLENA_E_INPUT, w, "shared gate without a shared branch");
    if (!(m->rms_eps > 0.0f)) return PLENA_FAIL(err, PLENA_E_INPUT, w, "rms_norm_eps must be > 0");
    return 0;
}

/* ---- routing statistics ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int plena_routing_count_sum(const int64_t *counts, size_t n, int64_t *sum, struct plena_err *err)
{
    int64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        if (counts[i] < 0)
            return PLENA_FAIL(err, PLENA_E_INPUT, "expert_counts",
                              "count of expert %zu is negative", i);
        if (__builtin_add_overflow(s, counts[i], &s))
            return PLENA_FAIL(err, PLENA_E_INPUT, "expert_counts", "sum of counts overflows int64");
    }
    *sum = s;
    return 0;
}

int plena_routing_gini(const int64_t *counts, size_t n, double *gini, struct plena_err *err)
{
    int64_t total = 0;
    *gini = 0.0;
    if (plena_routing_count_sum(counts, n, &total, err)) return PLENA_E_INPUT;
    if (total == 0 || n == 0) return 0;
    int64_t *v = plena_malloc(n * sizeof *v);
    if (!v) return PLENA_FAIL(err, PLENA_E_NOMEM, "expert_counts", "out of memory");
    memcpy(v, counts, n * sizeof *v);
    plena_qsort(v, n, sizeof *v, cmp_i64);
    /* S = sum i*v(i), i from 1, in 64-bit integers: i <= 16383 experts and the
     * sum of counts <= 2^28 slots in a valid trace keep it far from overflow;
     * other callers get an error instead of a wrapped value. */
    int64_t S = 0;
    int over = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t term;
        over |= __builtin_mul_overflow((int64_t)(i + 1), v[i], &term);
        over |= __builtin_add_overflow(S, term, &S);
    }
    plena_free(v);
    over |= __builtin_mul_overflow(S, (int64_t)2, &S);
    if (over) return PLENA_FAIL(err, PLENA_E_INPUT, "expert_counts", "gini sum overflows int64");
    /* S now holds 2S; evaluated in exactly the order of docs/trace-schema.md "Semantic rules
     * (validator only)". */
    *gini = (double)S / ((double)n * (double)total) - (double)(n + 1) / (double)n;
    return 0;
}

int plena_routing_counts(const uint32_t *ids, size_t n_pairs, uint32_t E,
                         struct plena_routing_stats *st, struct plena_err *err)
{
    int64_t *cnt = plena_calloc(E ? E : 1, sizeof *cnt);
    if (!cnt) return PLENA_FAIL(err, PLENA_E_NOMEM, "routing_stats", "out of memory");
    for (size_t i = 0; i < n_pairs; i++) {
        if (ids[i] >= E) {
            plena_free(cnt);
            return PLENA_FAIL(err, PLENA_E_INPUT, "routing_stats",
                              "pair %zu: expert id %u, expected < num_experts %u", i, ids[i], E);
        }
        cnt[ids[i]]++;
    }
    st->active_experts = 0;
    double sum = 0, sq = 0, mn = E ? (double)cnt[0] : 0, mx = 0;
    for (uint32_t e = 0; e < E; e++) {
        const double c = (double)cnt[e];
        st->active_experts += cnt[e] > 0;
        sum += c;
        sq += c * c;
        if (c < mn) mn = c;
        if (c > mx) mx = c;
    }
    const double mean = E ? sum / E : 0, var = E ? sq / E - mean * mean : 0;
    st->tpe_min = mn;
    st->tpe_max = mx;
    st->tpe_mean = mean;
    st->tpe_cv = mean > 0 ? sqrt(var > 0 ? var : 0) / mean : 0;
    int rc = plena_routing_gini(cnt, E, &st->tpe_gini, err);
    plena_free(cnt);
    return rc;
}
