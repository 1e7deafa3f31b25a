/* Preloaded router logits (router_logits.h). One rule per score family; the
 * selection bias, groups and normalisation of the router need no rule of
 * their own because every unselected score is exactly 0 (see the header). */
#include <math.h>
#include <stdio.h>

#include "gen/router_logits.h"
#include "num/detmath.h"
#include "num/num.h"

static float det_ln(double x)
{
    double y = 0.0;
    if (x <= 0.0 || plena_det_log(x, &y)) return PLENA_PRELOAD_LOGIT_MIN;
    return (float)y;
}

/* The preloaded logit of weight w: ln(w) for softmax scores, logit(c w) for
 * sigmoid ones; never below -30 (so exp and sigmoid stay > 0 in BF16). */
static float logit_of(int sigmoid, double c, double w)
{
    double l;
    if (!(w > 0.0)) return PLENA_PRELOAD_LOGIT_MIN;
    if (sigmoid) {
        double u = c * w;
        const double hi = 1.0 - 1.0 / 256.0;
        if (u > hi) u = hi;
        l = (double)det_ln(u) - (double)det_ln(1.0 - u);
    } else {
        l = det_ln(w);
    }
    if (l < PLENA_PRELOAD_LOGIT_MIN) l = PLENA_PRELOAD_LOGIT_MIN;
    return plena_num_round_bf16((float)l);
}

static int check_token(const struct plena_moe_cfg *cfg, uint32_t t, const uint32_t *id,
                       struct plena_err *err)
{
    const struct plena_router *r = &cfg->router;
    const uint32_t E = cfg->E, k = cfg->k, G = r->n_group > 1 ? r->n_group : 1;
    char where[64];
    snprintf(where, sizeof where, "routing.topk_indices[%u]", t);
    uint32_t groups[256], n_groups = 0;
    for (uint32_t j = 0; j < k; j++) {
        if (id[j] >= E)
            return PLENA_FAIL(err, PLENA_E_INPUT, where, "expert id %u >= num_experts %u", id[j],
                              E);
        for (uint32_t q = 0; q < j; q++)
            if (id[q] == id[j])
                return PLENA_FAIL(err, PLENA_E_INPUT, where, "expert id %u appears twice", id[j]);
        const uint32_t g = id[j] / (E / G);
        uint32_t q = 0;
        while (q < n_groups && groups[q] != g)
            q++;
        if (q == n_groups && n_groups < 256) groups[n_groups++] = g;
    }
    if (G > 1 && n_groups > r->topk_group)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "the ids span %u expert groups, the router selects from topk_group = %u "
                          "of its n_group = %u: no device routing selects them",
                          n_groups, r->topk_group, G);
    return 0;
}

int plena_moe_router_logits_for(const struct plena_moe_cfg *cfg, uint32_t T, const uint32_t *ids,
                                const float *w, float *logits, struct plena_err *err)
{
    const struct plena_router *r = &cfg->router;
    const uint32_t E = cfg->E, k = cfg->k;
    struct plena_router_plan pl;
    plena_router_plan(r, &pl);
    if (pl.lowering == PLENA_RLOWER_NONE)
        return PLENA_FAIL(err, PLENA_E_INPUT, "model.router",
                          "%s: the router (%s scores%s%s) has no device form (docs/lowering.md "
                          "\"Routers\"); replay it with --routing fixed",
                          cfg->name, plena_router_score_name(r->score),
                          r->n_group > 1 ? ", group-limited" : "",
                          r->capacity != PLENA_CAPACITY_NONE ? ", capacity" : "");
    const int sigmoid = r->score == PLENA_SCORE_SIGMOID || r->score == PLENA_SCORE_SIGMOID_SELECTED;
    for (uint32_t t = 0; t < T; t++) {
        const uint32_t *id = ids + (size_t)t * k;
        const float *wt = w + (size_t)t * k;
        int rc = check_token(cfg, t, id, err);
        if (rc) return rc;
        double wmax = 0.0;
        for (uint32_t j = 0; j < k; j++)
            if (wt[j] > wmax) wmax = wt[j];
        const double c = r->norm != PLENA_NORM_NONE
                             ? (wmax > 0.0 ? 0.5 / wmax : 1.0)
                             : 1.0 / (double)(r->scaling > 0 ? r->scaling : 1.0f);
        float *l = logits + (size_t)t * E;
        for (uint32_t e = 0; e < E; e++)
            l[e] = PLENA_PRELOAD_LOGIT_UNSELECTED;
        for (uint32_t j = 0; j < k; j++)
            l[id[j]] = logit_of(sigmoid, c, wt[j]);
    }
    return 0;
}
