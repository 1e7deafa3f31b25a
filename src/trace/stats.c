/* Routing statistics (docs/trace-schema.md "Semantic rules (validator only)"),
 * computed exactly from expert counts: duplicate factor, Gini (the documented
 * formula and evaluation order, model/model.h's plena_routing_gini),
 * active/cold/hot lists and the extra numbers of `trace stats`.
 * Does not read traces; callers pass the counts. */
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "model/model.h"

double plena_trace_duplicate_factor(const int64_t *counts, size_t n)
{
    int64_t total = 0;
    size_t active = 0;
    for (size_t i = 0; i < n; i++) {
        total += counts[i];
        active += counts[i] > 0;
    }
    return active ? (double)total / (double)active : 0.0;
}

size_t plena_trace_active_experts(const int64_t *counts, size_t n, int64_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (counts[i] > 0) out[k++] = (int64_t)i;
    return k;
}

size_t plena_trace_cold_experts(const int64_t *counts, size_t n, int64_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (counts[i] == 0) out[k++] = (int64_t)i;
    return k;
}

struct count_id {
    int64_t count, id;
};

static int cmp_hot(const void *a, const void *b)
{
    const struct count_id *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

size_t plena_trace_hot_experts(const int64_t *counts, size_t n, int64_t *out)
{
    size_t k = 0;
    struct count_id *p = plena_malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        /* Out of memory: a stable insertion sort needs no scratch space. */
        for (size_t i = 0; i < n; i++) {
            if (counts[i] <= 0) continue;
            size_t j = k;
            while (j > 0 && counts[out[j - 1]] < counts[i]) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = (int64_t)i;
            k++;
        }
        return k;
    }
    for (size_t i = 0; i < n; i++)
        if (counts[i] > 0) p[k++] = (struct count_id){counts[i], (int64_t)i};
    plena_qsort(p, k, sizeof *p, cmp_hot);
    for (size_t i = 0; i < k; i++)
        out[i] = p[i].id;
    plena_free(p);
    return k;
}

int plena_trace_stats_compute(const int64_t *counts, size_t n, struct plena_trace_stats *st,
                              struct plena_err *err)
{
    memset(st, 0, sizeof *st);
    st->n_experts = n;
    if (plena_routing_count_sum(counts, n, &st->total, err)) return PLENA_E_INPUT;
    for (size_t i = 0; i < n; i++) {
        int64_t c = counts[i];
        st->n_active += c > 0;
        st->n_zero += c == 0;
        st->n_tail += c > 0 && c < 4;
        st->n_hot += c >= 16;
        if (c > st->max_count) st->max_count = c;
    }
    st->duplicate_factor = plena_trace_duplicate_factor(counts, n);
    int rc = plena_routing_gini(counts, n, &st->gini, err);
    if (rc) return rc;
    if (st->total > 0) st->max_mean_ratio = (double)st->max_count / ((double)st->total / (double)n);
    return 0;
}
