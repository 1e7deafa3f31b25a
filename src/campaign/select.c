/* Stratified selection (docs/replay.md "Campaigns"): Hamilton largest
 * remainder quotas in integer arithmetic only, surplus seats one per stratum
 * ordered by (remainder desc, n_c desc, name asc), then a seeded shuffle per
 * stratum with derive(seed, 4, fnv1a64(benchmark 0x1F stratum)). Builds the
 * selection.json object; writing it is the caller's job. Upstream gave all
 * surplus seats to one stratum; this file is the fix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "campaign/campaign.h"
#include "common/alloc.h"
#include "num/prng.h"

int plena_campaign_hamilton(const uint64_t *n, const char *const *names, size_t n_strata,
                            uint64_t target, uint64_t *quota, uint64_t *rem, int *extra,
                            struct plena_err *err)
{
    uint64_t total = 0;
    for (size_t c = 0; c < n_strata; c++)
        total += n[c];
    if (target > total)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--target",
                          "target %llu is larger than the %llu available units",
                          (unsigned long long)target, (unsigned long long)total);
    uint64_t given = 0;
    for (size_t c = 0; c < n_strata; c++) {
        extra[c] = 0;
        if (!total) {
            quota[c] = rem[c] = 0;
            continue;
        }
        quota[c] = n[c] * target / total;
        rem[c] = n[c] * target % total;
        given += quota[c];
    }
    uint64_t surplus = target - given;
    size_t *ord = plena_malloc((n_strata ? n_strata : 1) * sizeof *ord);
    if (!ord) return PLENA_FAIL(err, PLENA_E_NOMEM, "selection", "out of memory");
    for (size_t c = 0; c < n_strata; c++)
        ord[c] = c;
    /* insertion sort by (rem desc, n desc, name asc): strata counts are small */
    for (size_t i = 1; i < n_strata; i++) {
        size_t x = ord[i], j = i;
        while (j > 0) {
            size_t y = ord[j - 1];
            int before = rem[x] != rem[y] ? rem[x] > rem[y]
                         : n[x] != n[y]   ? n[x] > n[y]
                                          : strcmp(names[x], names[y]) < 0;
            if (!before) break;
            ord[j] = y;
            j--;
        }
        ord[j] = x;
    }
    for (size_t i = 0; i < n_strata && surplus; i++, surplus--) {
        quota[ord[i]]++;
        extra[ord[i]] = 1;
    }
    plena_free(ord);
    return 0;
}

static const char *const by_fields[] = {"category", "benchmark", "phase", "sample_id", "layer"};

int plena_campaign_by_field_known(const char *by)
{
    for (size_t i = 0; i < sizeof by_fields / sizeof by_fields[0]; i++)
        if (by && !strcmp(by, by_fields[i])) return 1;
    return 0;
}

/* One selection unit: a (benchmark, sample_id) or a single trace. */
struct unit {
    const char *benchmark, *name; /* name: sample_id or trace_id */
    int64_t sample_index;
    char stratum[160];
    size_t first; /* index of its first trace in the canonical set */
};

static int unit_cmp(const struct unit *a, const struct unit *b, int by_trace)
{
    if (!by_trace && a->sample_index != b->sample_index)
        return a->sample_index < b->sample_index ? -1 : 1;
    return strcmp(a->name, b->name);
}

static void sort_units(struct unit **u, size_t n, int by_trace)
{
    for (size_t i = 1; i < n; i++) {
        struct unit *x = u[i];
        size_t j = i;
        while (j > 0 && unit_cmp(u[j - 1], x, by_trace) > 0) {
            u[j] = u[j - 1];
            j--;
        }
        u[j] = x;
    }
}

static int stratum_of(const struct plena_campaign_trace *t, const char *by, char *out, size_t n,
                      struct plena_err *err)
{
    if (!strcmp(by, "layer")) {
        snprintf(out, n, "%lld", (long long)t->layer);
        return 0;
    }
    const char *v = !strcmp(by, "category")    ? t->category
                    : !strcmp(by, "benchmark") ? t->benchmark
                    : !strcmp(by, "phase")     ? t->phase
                                               : t->sample_id;
    if (!v) {
        if (!strcmp(by, "category"))
            v = "uncategorized";
        else
            return PLENA_FAIL(err, PLENA_E_INPUT, t->item.source_path,
                              "trace '%s' lacks workload.%s used by --by", t->item.trace_id, by);
    }
    snprintf(out, n, "%s", v);
    return 0;
}

static int target_for(const struct plena_campaign_select_opts *so, const char *bench,
                      uint64_t avail, uint64_t *T, struct plena_err *err)
{
    uint64_t t = so->target;
    int all = so->target_all;
    for (size_t i = 0; i < so->n_target_for; i++)
        if (!strcmp(so->target_for[i].benchmark, bench)) {
            t = so->target_for[i].target;
            all = so->target_for[i].all;
        }
    if (all) t = avail;
    if (t > avail)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--target",
                          "benchmark '%s': target %llu is larger than the %llu available units",
                          bench, (unsigned long long)t, (unsigned long long)avail);
    *T = t;
    return 0;
}

/* Selects within one benchmark's units u[0..nu-1]; marks chosen[] per unit. */
static int select_benchmark(const char *bench, struct unit *u, size_t nu,
                            const struct plena_campaign_select_opts *so, unsigned char *chosen,
                            json_t *jb, struct plena_err *err)
{
    uint64_t T = 0;
    int rc = target_for(so, bench, nu, &T, err);
    if (rc) return rc;
    /* distinct strata, sorted by name so the JSON order is fixed */
    const char **names = plena_calloc(nu ? nu : 1, sizeof *names);
    uint64_t *cnt = plena_calloc(nu ? nu : 1, sizeof *cnt);
    uint64_t *quota = plena_calloc(nu ? nu : 1, sizeof *quota);
    uint64_t *rem = plena_calloc(nu ? nu : 1, sizeof *rem);
    int *extra = plena_calloc(nu ? nu : 1, sizeof *extra);
    struct unit **members = plena_calloc(nu ? nu : 1, sizeof *members);
    size_t ns = 0;
    if (!names || !cnt || !quota || !rem || !extra || !members) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "selection", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nu; i++) {
        size_t c = 0;
        while (c < ns && strcmp(names[c], u[i].stratum))
            c++;
        if (c == ns) names[ns++] = u[i].stratum;
        cnt[c]++;
    }
    for (size_t i = 1; i < ns; i++) { /* by name; counts move with them */
        const char *x = names[i];
        uint64_t xc = cnt[i];
        size_t j = i;
        while (j > 0 && strcmp(names[j - 1], x) > 0) {
            names[j] = names[j - 1];
            cnt[j] = cnt[j - 1];
            j--;
        }
        names[j] = x;
        cnt[j] = xc;
    }
    if ((rc = plena_campaign_hamilton(cnt, names, ns, T, quota, rem, extra, err))) goto out;
    json_t *strata = json_array();
    uint64_t selected = 0;
    for (size_t c = 0; c < ns; c++) {
        size_t nm = 0;
        for (size_t i = 0; i < nu; i++)
            if (!strcmp(u[i].stratum, names[c])) members[nm++] = &u[i];
        sort_units(members, nm, so->unit_trace);
        /* the shuffle runs over positions so members keep their identity */
        uint32_t *perm = plena_malloc((nm ? nm : 1) * sizeof *perm);
        if (!perm) {
            json_decref(strata);
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, "selection", "out of memory");
            goto out;
        }
        for (size_t i = 0; i < nm; i++)
            perm[i] = (uint32_t)i;
        struct plena_buf key;
        plena_buf_init(&key);
        plena_buf_puts(&key, bench);
        plena_buf_append(&key, "\x1f", 1);
        plena_buf_puts(&key, names[c]);
        uint64_t words[2] = {PLENA_PRNG_TAG_SELECTION, plena_fnv1a64(key.data, key.len)};
        plena_buf_free(&key);
        struct plena_prng g;
        plena_prng_derive(&g, so->seed, words, 2);
        plena_prng_shuffle_u32(&g, perm, nm);
        json_t *su = json_array();
        for (uint64_t k = 0; k < quota[c] && k < nm; k++) {
            struct unit *m = members[perm[k]];
            chosen[m - u] = 1;
        }
        /* selected_units in unit order, not draw order, so the file reads well */
        for (size_t i = 0; i < nm; i++)
            if (chosen[members[i] - u]) json_array_append_new(su, json_string(members[i]->name));
        plena_free(perm);
        selected += quota[c];
        json_array_append_new(strata,
                              json_pack("{s:s,s:I,s:I,s:I,s:b,s:o}", "name", names[c], "available",
                                        (json_int_t)cnt[c], "quota", (json_int_t)quota[c],
                                        "remainder_numerator", (json_int_t)rem[c], "surplus_seat",
                                        extra[c], "selected_units", su));
    }
    json_object_set_new(jb, "available", json_integer((json_int_t)nu));
    json_object_set_new(jb, "target", json_integer((json_int_t)T));
    json_object_set_new(jb, "selected", json_integer((json_int_t)selected));
    json_object_set_new(jb, "strata", strata);
out:
    plena_free(names);
    plena_free(cnt);
    plena_free(quota);
    plena_free(rem);
    plena_free(extra);
    plena_free(members);
    return rc;
}

int plena_campaign_select(const struct plena_campaign_set *s,
                          const struct plena_campaign_select_opts *so, json_t **selection,
                          struct plena_err *err)
{
    *selection = NULL;
    if (!plena_campaign_by_field_known(so->by))
        return PLENA_FAIL(err, PLENA_E_USAGE, "--by",
                          "unknown field '%s': expected category, benchmark, phase, sample_id or "
                          "layer",
                          so->by ? so->by : "");
    if (so->seed > (uint64_t)INT64_MAX)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--seed", "seed must be <= %lld",
                          (long long)INT64_MAX);
    /* units in canonical order (the set is canonical, so a unit's first trace
     * defines its stratum: documented choice for --by phase/layer) */
    struct unit *u = plena_calloc(s->n ? s->n : 1, sizeof *u);
    unsigned char *chosen = plena_calloc(s->n ? s->n : 1, 1);
    size_t *unit_of = plena_calloc(s->n ? s->n : 1, sizeof *unit_of);
    int rc = 0;
    json_t *root = NULL;
    if (!u || !chosen || !unit_of) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "selection", "out of memory");
        goto out;
    }
    size_t nu = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct plena_campaign_trace *t = &s->v[i];
        size_t k = nu;
        if (!so->unit_trace)
            for (k = 0; k < nu; k++)
                if (!strcmp(u[k].benchmark, t->benchmark) && !strcmp(u[k].name, t->sample_id))
                    break;
        if (k == nu) {
            u[nu].benchmark = t->benchmark;
            u[nu].name = so->unit_trace ? t->item.trace_id : t->sample_id;
            u[nu].sample_index = t->sample_index;
            u[nu].first = i;
            if ((rc = stratum_of(t, so->by, u[nu].stratum, sizeof u[nu].stratum, err))) goto out;
            nu++;
        }
        unit_of[i] = k;
    }
    root = json_object();
    json_t *benches = json_object();
    json_object_set_new(root, "schema_version", json_integer(1));
    json_object_set_new(root, "method", json_string("hamilton_largest_remainder_seeded_shuffle"));
    json_object_set_new(root, "seed", json_integer((json_int_t)so->seed));
    json_object_set_new(root, "by", json_string(so->by));
    json_object_set_new(root, "unit", json_string(so->unit_trace ? "trace" : "sample"));
    json_object_set_new(root, "benchmarks", benches);
    /* units of one benchmark are contiguous because the set is canonical */
    for (size_t a = 0; a < nu && !rc;) {
        size_t b = a;
        while (b < nu && !strcmp(u[b].benchmark, u[a].benchmark))
            b++;
        json_t *jb = json_object();
        json_object_set_new(benches, u[a].benchmark, jb);
        rc = select_benchmark(u[a].benchmark, u + a, b - a, so, chosen + a, jb, err);
        a = b;
    }
    if (rc) goto out;
    json_t *ids = json_array();
    for (size_t i = 0; i < s->n; i++)
        if (chosen[unit_of[i]]) json_array_append_new(ids, json_string(s->v[i].item.trace_id));
    json_object_set_new(root, "selected_trace_ids", ids);
out:
    if (rc) {
        json_decref(root);
        root = NULL;
    }
    *selection = root;
    plena_free(u);
    plena_free(chosen);
    plena_free(unit_of);
    return rc;
}

int plena_campaign_apply_selection(struct plena_campaign_set *s, const json_t *selection,
                                   struct plena_err *err)
{
    const json_t *ids = json_object_get(selection, "selected_trace_ids");
    if (!json_is_array(ids))
        return PLENA_FAIL(err, PLENA_E_INPUT, "selection.json:selected_trace_ids",
                          "expected an array of trace ids");
    unsigned char *keep = plena_calloc(s->n ? s->n : 1, 1);
    if (!keep) return PLENA_FAIL(err, PLENA_E_NOMEM, "selection", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        const char *id = json_string_value(v);
        size_t k = 0;
        while (id && k < s->n && strcmp(s->v[k].item.trace_id, id))
            k++;
        if (!id || k == s->n) {
            plena_free(keep);
            return PLENA_FAIL(err, PLENA_E_INPUT, "selection.json:selected_trace_ids",
                              "trace '%s' is selected but not among the loaded traces (use "
                              "--reselect)",
                              id ? id : "(not a string)");
        }
        keep[k] = 1;
    }
    size_t w = 0;
    for (size_t k = 0; k < s->n; k++) {
        if (keep[k])
            s->v[w++] = s->v[k];
        else
            plena_replay_item_free(&s->v[k].item);
    }
    s->n = w;
    plena_free(keep);
    return 0;
}
