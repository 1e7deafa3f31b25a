/* The routers of the published MoE families in float64 (model.h
 * plena_router_select_f64; docs/lowering.md "Routers"): the computation the
 * models define, used by the float64 reference and by the synthetic trace
 * generators, so a trace's ids and weights have the family's properties.
 * Ties in any selection keep the lower index first (the device's rule). */
#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "model/model.h"

static int greater_f64(const void *v, uint32_t a, uint32_t b)
{
    return ((const double *)v)[a] > ((const double *)v)[b];
}

static int greater_f32(const void *v, uint32_t a, uint32_t b)
{
    return ((const float *)v)[a] > ((const float *)v)[b];
}

/* The top n of m values by greater(v, a, b), ties to the lower index, into
 * idx (rank order): plena_top_n_f32 and top_n (float64). */
static void top_n_by(const void *v, int (*greater)(const void *, uint32_t, uint32_t), uint32_t m,
                     uint32_t n, uint32_t *idx)
{
    for (uint32_t j = 0; j < n; j++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t e = 0; e < m; e++) {
            int taken = 0;
            for (uint32_t q = 0; q < j && !taken; q++)
                taken = idx[q] == e;
            if (taken) continue;
            if (best == UINT32_MAX || greater(v, e, best)) best = e;
        }
        idx[j] = best;
    }
}

static void top_n(const double *v, uint32_t m, uint32_t n, uint32_t *idx)
{
    top_n_by(v, greater_f64, m, n, idx);
}

void plena_top_n_f32(const float *v, uint32_t m, uint32_t n, uint32_t *idx)
{
    top_n_by(v, greater_f32, m, n, idx);
}

static double libm_exp(double x)
{
    return exp(x);
}

static double sigmoid(plena_router_exp_fn ex, double x)
{
    return 1.0 / (1.0 + ex(-x));
}

/* score[e]: the softmax over all E, the sigmoid, or (scores of the
 * selected kinds) the logit itself, which the selection ranks. */
static void router_scores(const struct plena_router *r, plena_router_exp_fn ex, uint32_t E,
                          const double *logits, double *score)
{
    double mx = logits[0];
    for (uint32_t e = 1; e < E; e++)
        if (logits[e] > mx) mx = logits[e];
    double z = 0;
    for (uint32_t e = 0; e < E; e++) {
        switch (r->score) {
        case PLENA_SCORE_SOFTMAX:
            score[e] = ex(logits[e] - mx);
            z += score[e];
            break;
        case PLENA_SCORE_SIGMOID: score[e] = sigmoid(ex, logits[e]); break;
        case PLENA_SCORE_SOFTMAX_SELECTED:
        case PLENA_SCORE_SIGMOID_SELECTED: score[e] = logits[e]; break; /* select on logits */
        }
    }
    if (r->score == PLENA_SCORE_SOFTMAX)
        for (uint32_t e = 0; e < E; e++)
            score[e] /= z;
}

/* The weights of the selected ids (rank order): the score (+ the bias
 * where it is part of it), the softmax over the selected, or the sigmoid of
 * the selected logit; normalised; scaled. */
static void router_weights(const struct plena_router *r, plena_router_exp_fn ex, uint32_t k,
                           const double *logits, const double *score, const double *bias,
                           const uint32_t *ids, double *w)
{
    double sum = 0, l1 = 0;
    for (uint32_t j = 0; j < k; j++) {
        const uint32_t e = ids[j];
        switch (r->score) {
        case PLENA_SCORE_SOFTMAX:
        case PLENA_SCORE_SIGMOID:
            w[j] = score[e] + (bias && r->select_bias == PLENA_SELECT_BIAS_SCORE ? bias[e] : 0.0);
            break;
        case PLENA_SCORE_SOFTMAX_SELECTED: w[j] = ex(logits[e] - logits[ids[0]]); break;
        case PLENA_SCORE_SIGMOID_SELECTED: w[j] = sigmoid(ex, logits[e]); break;
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
}

/* gs[g]: group g's score over the selection values sel (the sum of its
 * top two, or its largest). */
static void group_scores(const struct plena_router *r, uint32_t E, const double *sel, double *gs)
{
    const uint32_t G = r->n_group, per = E / G;
    uint32_t top2[2];
    for (uint32_t g = 0; g < G; g++) {
        if (r->group_score == PLENA_GROUP_TOP2_SUM && per >= 2) {
            top_n(sel + (size_t)g * per, per, 2, top2);
            gs[g] = sel[g * per + top2[0]] + sel[g * per + top2[1]];
        } else {
            top_n(sel + (size_t)g * per, per, 1, top2);
            gs[g] = sel[g * per + top2[0]];
        }
    }
}

int plena_router_select_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                            const double *logits, const double *bias, uint32_t *ids, double *w,
                            struct plena_err *err)
{
    return plena_router_select_exp(r, libm_exp, E, k, logits, bias, ids, w, err);
}

int plena_router_select_exp(const struct plena_router *r, plena_router_exp_fn ex, uint32_t E,
                            uint32_t k, const double *logits, const double *bias, uint32_t *ids,
                            double *w, struct plena_err *err)
{
    if (!E || !k || k > E)
        return PLENA_FAIL(err, PLENA_E_INPUT, "router", "top_k %u of %u experts", k, E);
    double *score = plena_malloc(E * sizeof *score), *sel = plena_malloc(E * sizeof *sel);
    if (!score || !sel) {
        plena_free(score);
        plena_free(sel);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
    }
    router_scores(r, ex, E, logits, score);
    for (uint32_t e = 0; e < E; e++)
        sel[e] = score[e] + (bias && r->select_bias != PLENA_SELECT_BIAS_NONE ? bias[e] : 0.0);
    /* group-limited: experts outside the chosen groups cannot be selected
     * (-inf, as DeepSeek's own inference code masks; HF fills 0.0, the same
     * unless the chosen groups hold fewer than k positive selection scores:
     * docs/design.md "Device routers") */
    if (r->n_group > 1) {
        const uint32_t G = r->n_group, per = E / G;
        double gs[1024];
        uint32_t pick[1024];
        if (G > 1024) {
            plena_free(score);
            plena_free(sel);
            return PLENA_FAIL(err, PLENA_E_INPUT, "router", "n_group %u above 1024", G);
        }
        group_scores(r, E, sel, gs);
        top_n(gs, G, r->topk_group, pick);
        for (uint32_t g = 0; g < G; g++) {
            int chosen = 0;
            for (uint32_t q = 0; q < r->topk_group && !chosen; q++)
                chosen = pick[q] == g;
            if (!chosen)
                for (uint32_t e = g * per; e < (g + 1) * per; e++)
                    sel[e] = -INFINITY;
        }
    }
    top_n(sel, E, k, ids);
    router_weights(r, ex, k, logits, score, bias, ids, w);
    plena_free(score);
    plena_free(sel);
    return 0;
}

int plena_router_weights_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                             const double *logits, const double *bias, const uint32_t *ids,
                             double *w, struct plena_err *err)
{
    if (!E || !k || k > E)
        return PLENA_FAIL(err, PLENA_E_INPUT, "router", "top_k %u of %u experts", k, E);
    for (uint32_t j = 0; j < k; j++)
        if (ids[j] >= E)
            return PLENA_FAIL(err, PLENA_E_INPUT, "router", "rank %u: expert %u of %u", j, ids[j],
                              E);
    double *score = plena_malloc(E * sizeof *score);
    if (!score) return PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
    router_scores(r, libm_exp, E, logits, score);
    router_weights(r, libm_exp, k, logits, score, bias, ids, w);
    plena_free(score);
    return 0;
}

int plena_router_agree_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                           const double *logits, const double *bias, const uint32_t *ids,
                           double tol, struct plena_err *err)
{
    if (!E || !k || k > E || E > 65536) {
        PLENA_FAIL(err, PLENA_E_INPUT, "router", "top_k %u of %u experts", k, E);
        return -1;
    }
    double *score = plena_malloc(E * sizeof *score), *sel = plena_malloc(E * sizeof *sel);
    double *w = plena_malloc(k * sizeof *w);
    uint32_t *own = plena_malloc(k * sizeof *own);
    uint8_t *allowed = plena_calloc(E, 1);
    int res = -1;
    if (!score || !sel || !w || !own || !allowed) {
        PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
        goto done;
    }
    if (plena_router_select_f64(r, E, k, logits, bias, own, w, err)) goto done;
    res = PLENA_ROUTE_SAME;
    for (uint32_t j = 0; j < k && res == PLENA_ROUTE_SAME; j++) {
        int found = 0;
        for (uint32_t q = 0; q < k; q++)
            found |= own[q] == ids[j];
        if (!found) res = PLENA_ROUTE_NEAR_TIE; /* to be confirmed below */
    }
    if (res == PLENA_ROUTE_SAME) goto done;
    router_scores(r, libm_exp, E, logits, score);
    double scale = 0;
    for (uint32_t e = 0; e < E; e++) {
        sel[e] = score[e] + (bias && r->select_bias != PLENA_SELECT_BIAS_NONE ? bias[e] : 0.0);
        if (fabs(sel[e]) > scale) scale = fabs(sel[e]);
    }
    const uint32_t G = r->n_group > 1 ? r->n_group : 1, per = E / G;
    if (G > 1) { /* the device's groups must be near the topk_group best */
        double gs[1024], gscale = 0;
        uint32_t pick[1024];
        group_scores(r, E, sel, gs);
        top_n(gs, G, r->topk_group, pick);
        for (uint32_t g = 0; g < G; g++)
            if (fabs(gs[g]) > gscale) gscale = fabs(gs[g]);
        const double kth = gs[pick[r->topk_group - 1]];
        /* the device's groups: those its ids use, filled up to topk_group in
         * the float64 order (a group it chose without using is invisible) */
        uint8_t chosen[1024] = {0};
        uint32_t n_dev = 0;
        for (uint32_t j = 0; j < k; j++)
            if (ids[j] < E && !chosen[ids[j] / per]) {
                chosen[ids[j] / per] = 1;
                n_dev++;
            }
        for (uint32_t q = 0; q < r->topk_group && n_dev < r->topk_group; q++)
            if (!chosen[pick[q]]) {
                chosen[pick[q]] = 1;
                n_dev++;
            }
        if (n_dev > r->topk_group) res = PLENA_ROUTE_DIFFERENT;
        for (uint32_t g = 0; g < G; g++) {
            if (!chosen[g]) continue;
            if (gs[g] < kth - tol * gscale) res = PLENA_ROUTE_DIFFERENT;
            for (uint32_t e = g * per; e < (g + 1) * per; e++)
                allowed[e] = 1;
        }
    } else {
        memset(allowed, 1, E);
    }
    /* the k-th largest selection value among the allowed experts */
    double kth = -INFINITY;
    {
        uint32_t n = 0;
        for (uint32_t e = 0; e < E; e++)
            n += allowed[e];
        double *v = plena_malloc((n ? n : 1) * sizeof *v);
        uint32_t *top = plena_malloc(k * sizeof *top);
        if (!v || !top) {
            plena_free(v);
            plena_free(top);
            res = -1;
            PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
            goto done;
        }
        n = 0;
        for (uint32_t e = 0; e < E; e++)
            if (allowed[e]) v[n++] = sel[e];
        if (n >= k) {
            top_n(v, n, k, top);
            kth = v[top[k - 1]];
        }
        plena_free(v);
        plena_free(top);
    }
    for (uint32_t j = 0; j < k; j++)
        if (ids[j] >= E || !allowed[ids[j]] || sel[ids[j]] < kth - tol * scale)
            res = PLENA_ROUTE_DIFFERENT;
done:
    plena_free(score);
    plena_free(sel);
    plena_free(w);
    plena_free(own);
    plena_free(allowed);
    return res;
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

void plena_router_plan(const struct plena_router *r, struct plena_router_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    const int bias = r->select_bias != PLENA_SELECT_BIAS_NONE, groups = r->n_group > 1;
    const int plain = !groups && !bias && r->scaling == 1.0f;
    pl->groups = groups;
    pl->select = bias ? PLENA_RROWS_BIASED
                      : (groups && r->group_score == PLENA_GROUP_TOP2_SUM ? PLENA_RROWS_SCORE
                                                                          : PLENA_RROWS_LOGITS);
    pl->value = r->select_bias == PLENA_SELECT_BIAS_SCORE ? PLENA_RROWS_BIASED : PLENA_RROWS_SCORE;
    /* capacity needs every token's choice before any pair is kept (slots go
     * by rank across all tokens): not a per-token device step */
    if (r->capacity != PLENA_CAPACITY_NONE) return;
    switch (r->score) {
    case PLENA_SCORE_SOFTMAX_SELECTED:
        /* V_TOPK's own weights; with groups, a bias or scaling no model has it */
        if (plain) pl->lowering = PLENA_RLOWER_VTOPK;
        break;
    case PLENA_SCORE_SOFTMAX:
        /* renormalised softmax over E = V_TOPK's softmax over the selected */
        if (plain &&
            ((r->norm == PLENA_NORM_SUM && r->norm_eps == 0.0f) || r->norm == PLENA_NORM_L1))
            pl->lowering = PLENA_RLOWER_VTOPK;
        else
            pl->lowering = PLENA_RLOWER_SOFTMAX;
        break;
    case PLENA_SCORE_SIGMOID: pl->lowering = PLENA_RLOWER_SIGMOID; break;
    case PLENA_SCORE_SIGMOID_SELECTED:
        if (!groups && !bias) pl->lowering = PLENA_RLOWER_SIGMOID_SELECTED;
        pl->value = PLENA_RROWS_LOGITS;
        break;
    }
    if (pl->lowering == PLENA_RLOWER_VTOPK) pl->select = pl->value = PLENA_RROWS_LOGITS;
    pl->scores = pl->lowering != PLENA_RLOWER_NONE &&
                 (pl->select != PLENA_RROWS_LOGITS || pl->value != PLENA_RROWS_LOGITS);
}

/* The weights a router gives the softmax over the selected: unchanged. */
static int is_selected_softmax(const struct plena_router *r)
{
    const int renorm =
        r->score == PLENA_SCORE_SOFTMAX_SELECTED ||
        (r->score == PLENA_SCORE_SOFTMAX &&
         ((r->norm == PLENA_NORM_SUM && r->norm_eps == 0.0f) || r->norm == PLENA_NORM_L1));
    return renorm && r->select_bias != PLENA_SELECT_BIAS_SCORE && r->scaling == 1.0f;
}

int plena_router_synth_row(const struct plena_router *r, uint32_t E, uint32_t k, uint32_t *ids,
                           double *w, struct plena_err *err)
{
    if (!plena_router_is_set(r)) return 0;
    if (!E || !k || k > E)
        return PLENA_FAIL(err, PLENA_E_INPUT, "router", "top_k %u of %u experts", k, E);
    if (r->n_group > 1 && E % r->n_group == 0) { /* at most topk_group groups */
        const uint32_t per = E / r->n_group;
        uint32_t groups[256], n = 0;
        for (uint32_t j = 0; j < k; j++) {
            const uint32_t g = ids[j] / per;
            int seen = 0;
            for (uint32_t q = 0; q < n && !seen; q++)
                seen = groups[q] == g;
            if (seen) continue;
            if (n < r->topk_group && n < 256) {
                groups[n++] = g;
                continue;
            }
            /* the next id of the row's groups (in their order) no rank uses */
            for (uint32_t step = 1; step <= E; step++) {
                const uint32_t q = (ids[j] + step) % E;
                int in = 0, used = 0;
                for (uint32_t x = 0; x < n && !in; x++)
                    in = groups[x] == q / per;
                for (uint32_t x = 0; x < k && !used; x++)
                    used = ids[x] == q;
                if (in && !used) {
                    ids[j] = q;
                    break;
                }
            }
        }
    }
    if (is_selected_softmax(r)) return 0;
    /* logits whose softmax over the selected is w, none more than 4 below the
     * first (so the experts not chosen keep a share of a softmax over E, as in
     * the published routers); the others 1 below the least */
    double *logits = plena_malloc((size_t)E * sizeof *logits);
    if (!logits) return PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
    double lo = INFINITY;
    const double floor_l = log(w[0]) - 4.0;
    for (uint32_t j = 0; j < k; j++) {
        const double l = log(w[j]) > floor_l ? log(w[j]) : floor_l;
        if (l < lo) lo = l;
    }
    for (uint32_t e = 0; e < E; e++)
        logits[e] = lo - 1.0;
    for (uint32_t j = 0; j < k; j++)
        logits[ids[j]] = log(w[j]) > floor_l ? log(w[j]) : floor_l;
    int rc = plena_router_weights_f64(r, E, k, logits, NULL, ids, w, err);
    plena_free(logits);
    return rc;
}

int plena_router_synth(const struct plena_router *r, uint32_t T, uint32_t E, uint32_t k,
                       uint32_t *ids, float *w, struct plena_err *err)
{
    if (!plena_router_is_set(r)) return 0;
    if (!E || !k || k > E)
        return PLENA_FAIL(err, PLENA_E_INPUT, "router", "top_k %u of %u experts", k, E);
    const size_t n = (size_t)T * k;
    double *wd = plena_malloc((n ? n : 1) * sizeof *wd);
    uint32_t *cnt = plena_malloc((size_t)E * sizeof *cnt);
    int rc = 0;
    if (!wd || !cnt) rc = PLENA_FAIL(err, PLENA_E_NOMEM, "router", "out of memory");
    for (size_t i = 0; i < n && !rc; i++)
        wd[i] = (double)w[i];
    for (uint32_t t = 0; t < T && !rc; t++)
        rc = plena_router_synth_row(r, E, k, ids + (size_t)t * k, wd + (size_t)t * k, err);
    if (!rc && r->capacity != PLENA_CAPACITY_NONE)
        plena_router_drop_over_capacity(r, T, E, k, ids, wd, cnt);
    for (size_t i = 0; i < n && !rc; i++)
        w[i] = (float)wd[i];
    plena_free(wd);
    plena_free(cnt);
    return rc;
}
