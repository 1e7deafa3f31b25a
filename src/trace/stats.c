/* Routing statistics of spec/traces-and-replay.md 1.6, computed exactly from
 * expert counts: duplicate factor, Gini (the formula and evaluation order of
 * 1.6), active/cold/hot lists and the extra numbers of `trace stats`.
 * Does not read traces; callers pass the counts. */
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int sum_counts(const int64_t *counts, size_t n, int64_t *sum, struct plena_err *err)
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

int plena_trace_gini(const int64_t *counts, size_t n, double *gini, struct plena_err *err)
{
    int64_t total = 0;
    *gini = 0.0;
    if (sum_counts(counts, n, &total, err)) return PLENA_E_INPUT;
    if (total == 0 || n == 0) return 0;
    int64_t *v = plena_malloc(n * sizeof *v);
    if (!v) return PLENA_FAIL(err, PLENA_E_NOMEM, "expert_counts", "out of memory");
    memcpy(v, counts, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_i64);
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
    /* S now holds 2S; evaluated in exactly the order of 1.6. */
    *gini = (double)S / ((double)n * (double)total) - (double)(n + 1) / (double)n;
    return 0;
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
    qsort(p, k, sizeof *p, cmp_hot);
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
    if (sum_counts(counts, n, &st->total, err)) return PLENA_E_INPUT;
    for (size_t i = 0; i < n; i++) {
        int64_t c = counts[i];
        st->n_active += c > 0;
        st->n_zero += c == 0;
        st->n_tail += c > 0 && c < 4;
        st->n_hot += c >= 16;
        if (c > st->max_count) st->max_count = c;
    }
    st->duplicate_factor = plena_trace_duplicate_factor(counts, n);
    int rc = plena_trace_gini(counts, n, &st->gini, err);
    if (rc) return rc;
    if (st->total > 0) st->max_mean_ratio = (double)st->max_count / ((double)st->total / (double)n);
    return 0;
}
