/* The routers of the published MoE families in float64 (model.h
 * plena_router_select_f64; docs/lowering.md "Routers"): the computation the
 * models define, used by the float64 reference and by the synthetic trace
 * generators, so a trace's ids and weights have the family's properties.
 * Ties in any selection keep the lower index first (the device's rule). */
#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "model/model.h"

/* The top n of v[m] by value, ties to the lower index, into idx (rank order). */
static void top_n(const double *v, uint32_t m, uint32_t n, uint32_t *idx)
{
    for (uint32_t j = 0; j < n; j++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t e = 0; e < m; e++) {
            int taken = 0;
            for (uint32_t q = 0; q < j && !taken; q++)
                taken = idx[q] == e;
            if (taken) continue;
            if (best == UINT32_MAX || v[e] > v[best]) best = e;
        }
        idx[j] = best;
    }
}

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

int plena_router_select_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                            const double *logits, const double *bias, uint32_t *ids, double *w,
                            struct plena_err *err)
{
    if (!E || !k || k > E)
        return PLENA_FAIL(err, PLENA_E_INPUT, "router", "top_k %u of %u experts", k, E);
    double *score = plena_malloc(E * sizeof *score), *sel = plena_malloc(E * sizeof *sel);
    if (!score || !sel) {
        plena_free(score);
        plena_free(sel);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
    }
    double mx = logits[0];
    for (uint32_t e = 1; e < E; e++)
        if (logits[e] > mx) mx = logits[e];
    double z = 0;
    for (uint32_t e = 0; e < E; e++) {
        switch (r->score) {
        case PLENA_SCORE_SOFTMAX:
            score[e] = exp(logits[e] - mx);
            z += score[e];
            break;
        case PLENA_SCORE_SIGMOID: score[e] = sigmoid(logits[e]); break;
        case PLENA_SCORE_SOFTMAX_SELECTED:
        case PLENA_SCORE_SIGMOID_SELECTED: score[e] = logits[e]; break; /* select on logits */
        }
    }
    if (r->score == PLENA_SCORE_SOFTMAX)
        for (uint32_t e = 0; e < E; e++)
            score[e] /= z;
    for (uint32_t e = 0; e < E; e++)
        sel[e] = score[e] + (bias && r->select_bias != PLENA_SELECT_BIAS_NONE ? bias[e] : 0.0);
    if (r->n_group > 1) { /* group-limited: experts outside the chosen groups score 0 */
        const uint32_t G = r->n_group, per = E / G;
        double gs[1024];
        uint32_t pick[1024], top2[2];
        if (G > 1024) {
            plena_free(score);
            plena_free(sel);
            return PLENA_FAIL(err, PLENA_E_INPUT, "router", "n_group %u above 1024", G);
        }
        for (uint32_t g = 0; g < G; g++) {
            if (r->group_score == PLENA_GROUP_TOP2_SUM && per >= 2) {
                top_n(sel + (size_t)g * per, per, 2, top2);
                gs[g] = sel[g * per + top2[0]] + sel[g * per + top2[1]];
            } else {
                top_n(sel + (size_t)g * per, per, 1, top2);
                gs[g] = sel[g * per + top2[0]];
            }
        }
        top_n(gs, G, r->topk_group, pick);
        for (uint32_t g = 0; g < G; g++) {
            int chosen = 0;
            for (uint32_t q = 0; q < r->topk_group && !chosen; q++)
                chosen = pick[q] == g;
            if (!chosen)
                for (uint32_t e = g * per; e < (g + 1) * per; e++)
                    sel[e] = 0.0;
        }
    }
    top_n(sel, E, k, ids);
    double sum = 0, l1 = 0;
    for (uint32_t j = 0; j < k; j++) {
        const uint32_t e = ids[j];
        switch (r->score) {
        case PLENA_SCORE_SOFTMAX:
        case PLENA_SCORE_SIGMOID:
            w[j] = score[e] + (bias && r->select_bias == PLENA_SELECT_BIAS_SCORE ? bias[e] : 0.0);
            break;
        case PLENA_SCORE_SOFTMAX_SELECTED: w[j] = exp(logits[e] - logits[ids[0]]); break;
        case PLENA_SCORE_SIGMOID_SELECTED: w[j] = sigmoid(logits[e]); break;
        }
        sum += w[j];
        l1 += fabs(w[j]);
    }
    if (r->score == PLENA_SCORE_SOFTMAX_SELECTED) /* the softmax over the selected */
        for (uint32_t j = 0; j < k; j++)
            w[j] /= sum;
    else if (r->norm == PLENA_NORM_SUM)
        for (uint32_t j = 0; j < k; j++)
            w[j] /= sum + (double)r->norm_eps;
    else if (r->norm == PLENA_NORM_SUM_CLAMPED)
        for (uint32_t j = 0; j < k; j++)
            w[j] /= sum > (double)r->norm_eps ? sum : (double)r->norm_eps;
    else if (r->norm == PLENA_NORM_L1)
        for (uint32_t j = 0; j < k; j++)
            w[j] /= l1;
    for (uint32_t j = 0; j < k; j++)
        w[j] *= (double)r->scaling;
    plena_free(score);
    plena_free(sel);
    return 0;
}

uint64_t plena_router_capacity(const struct plena_router *r, uint32_t T, uint32_t E, uint32_t k)
{
    const uint64_t pairs = (uint64_t)T * k;
    switch (r->capacity) {
    case PLENA_CAPACITY_NONE: return pairs;
    case PLENA_CAPACITY_FACTOR: {
        const double c = ceil((double)r->capacity_factor * (double)pairs / (double)E);
        return c < 1 ? 1 : (uint64_t)c;
    }
    case PLENA_CAPACITY_HUNYUAN: {
        const uint64_t c = pairs / E;
        return c > k ? c : k;
    }
    }
    return pairs;
}

uint64_t plena_router_drop_over_capacity(const struct plena_router *r, uint32_t T, uint32_t E,
                                         uint32_t k, const uint32_t *ids, double *w,
                                         uint32_t *count)
{
    const uint64_t cap = plena_router_capacity(r, T, E, k);
    uint64_t dropped = 0;
    memset(count, 0, E * sizeof *count);
    /* slots are given by choice rank first, then token order (Hunyuan's
     * topkgating, GShard): every token's first choice before any second */
    for (uint32_t j = 0; j < k; j++)
        for (uint32_t t = 0; t < T; t++) {
            const size_t p = (size_t)t * k + j;
            if (ids[p] >= E) continue;
            if (count[ids[p]] >= cap) {
                w[p] = 0.0;
                dropped++;
            } else {
                count[ids[p]]++;
            }
        }
    return dropped;
}
