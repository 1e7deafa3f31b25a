/* plena trace gen (docs/cli.md "plena trace gen"): synthetic routing and the
 * model fields of docs/lowering.md "Model files". Every trace is built as a
 * jansson tree, written in the pretty form and validated before it is handed
 * back (trace/build.c). Route weights are binary32 values, printed with the
 * binary32 rule of docs/formats.md "Conventions". */
#include "trace/gen.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "num/detmath.h"
#include "num/prng.h"
#include "trace/build.h"
#include "isa/isa.h"
#include "trace/trace.h"

void plena_trace_gen_opts_default(struct plena_trace_gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->tokens = 1;
    o->dist = PLENA_TRACE_DIST_UNIFORM;
    o->hot_f = 0.8;
    o->mlen = 64;
    o->blen = 4;
    snprintf(o->dist_text, sizeof o->dist_text, "uniform");
}

int plena_trace_gen_parse_dist(const char *s, struct plena_trace_gen_opts *o, struct plena_err *err)
{
    char *end;
    if (strlen(s) >= sizeof o->dist_text)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--dist", "value too long");
    snprintf(o->dist_text, sizeof o->dist_text, "%s", s);
    if (!strcmp(s, "balanced")) {
        o->dist = PLENA_TRACE_DIST_BALANCED;
    } else if (!strcmp(s, "round-robin")) {
        o->dist = PLENA_TRACE_DIST_ROUND_ROBIN;
    } else if (!strcmp(s, "uniform")) {
        o->dist = PLENA_TRACE_DIST_UNIFORM;
    } else if (!strncmp(s, "zipf:", 5)) {
        o->dist = PLENA_TRACE_DIST_ZIPF;
        o->zipf_s = strtod(s + 5, &end);
        if (end == s + 5 || *end || !(o->zipf_s >= 0 && o->zipf_s <= 16))
            return PLENA_FAIL(err, PLENA_E_USAGE, "--dist", "zipf:S needs S in [0, 16], got '%s'",
                              s + 5);
    } else if (!strncmp(s, "hot:", 4)) {
        o->dist = PLENA_TRACE_DIST_HOT;
        unsigned long n = strtoul(s + 4, &end, 10);
        if (end == s + 4 || n == 0 || n > PLENA_TOPK_MAX_EXPERTS || (*end && *end != ':'))
            return PLENA_FAIL(err, PLENA_E_USAGE, "--dist", "hot:N[:F] needs N >= 1, got '%s'", s);
        o->hot_n = (uint32_t)n;
        o->hot_f = 0.8;
        if (*end == ':') {
            const char *f = end + 1;
            o->hot_f = strtod(f, &end);
            if (end == f || *end || !(o->hot_f >= 0 && o->hot_f <= 1))
                return PLENA_FAIL(err, PLENA_E_USAGE, "--dist", "hot:N:F needs F in [0, 1]");
        }
    } else {
        return PLENA_FAIL(err, PLENA_E_USAGE, "--dist",
                          "unknown distribution '%s' (balanced, round-robin, uniform, zipf:S, "
                          "hot:N[:F])",
                          s);
    }
    return 0;
}

/* p_e of zipf:S (expert rank r = e, or the permuted rank) and hot:N[:F]. */
static int dist_weights(const struct plena_trace_gen_opts *o, uint32_t E, double *p,
                        struct plena_err *err)
{
    uint32_t *perm = plena_malloc((size_t)E * sizeof *perm);
    if (!perm) return PLENA_FAIL(err, PLENA_E_NOMEM, "trace gen", "out of memory");
    for (uint32_t i = 0; i < E; i++)
        perm[i] = i;
    struct plena_prng g;
    uint64_t words[2] = {PLENA_PRNG_TAG_HOT_SET, o->layer};
    if (o->dist == PLENA_TRACE_DIST_HOT || o->permute) {
        plena_prng_derive(&g, o->seed, words, 2);
        plena_prng_shuffle_u32(&g, perm, E);
    }
    int rc = 0;
    if (o->dist == PLENA_TRACE_DIST_ZIPF) {
        double s = o->zipf_s;
        int integral = s == (double)(int)s;
        for (uint32_t r = 0; r < E && !rc; r++) {
            double v = 0.0; /* stays 0 when the weight is out of domain (rc is set) */
            if (integral) {
                double pw = 1.0;
                for (int i = 0; i < (int)s; i++)
                    pw *= (double)(r + 1);
                v = 1.0 / pw;
            } else {
                double lg;
                if (plena_det_log((double)(r + 1), &lg) || plena_det_exp(-s * lg, &v))
                    rc = PLENA_FAIL(err, PLENA_E_INPUT, "--dist", "zipf weight out of domain");
            }
            p[o->permute ? perm[r] : r] = v;
        }
    } else {
        if (o->hot_n >= E)
            rc = PLENA_FAIL(err, PLENA_E_INPUT, "--dist",
                            "hot:%u needs fewer hot experts than num_experts %u", o->hot_n, E);
        for (uint32_t e = 0; e < E && !rc; e++)
            p[e] = (1.0 - o->hot_f) / (double)(E - o->hot_n);
        /* --hot-ids replaces the shuffled hot set. */
        if (!rc && o->n_hot_ids && o->n_hot_ids != o->hot_n)
            rc = PLENA_FAIL(err, PLENA_E_USAGE, "--hot-ids", "%zu ids given for hot:%u",
                            o->n_hot_ids, o->hot_n);
        for (size_t i = 0; i < o->n_hot_ids && !rc; i++) {
            if (o->hot_ids[i] >= E)
                rc = PLENA_FAIL(err, PLENA_E_INPUT, "--hot-ids",
                                "expert id %u outside 0..%u (num_experts %u)", o->hot_ids[i], E - 1,
                                E);
            for (size_t k = 0; k < i && !rc; k++)
                if (o->hot_ids[k] == o->hot_ids[i])
                    rc = PLENA_FAIL(err, PLENA_E_USAGE, "--hot-ids", "expert id %u given twice",
                                    o->hot_ids[i]);
        }
        for (uint32_t i = 0; i < o->hot_n && !rc; i++)
            p[o->n_hot_ids ? o->hot_ids[i] : perm[i]] = o->hot_f / (double)o->hot_n;
    }
    plena_free(perm);
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

/* The rows with the model's router properties (plena_router_synth): groups,
 * normalisation, scaling, sigmoid of the selected, capacity drops. */
static int router_rows(const struct plena_moe_model *m, uint32_t T, int64_t *ids, float *w,
                       struct plena_err *err)
{
    const size_t n = (size_t)T * m->top_k;
    uint32_t *id32 = plena_malloc(n * sizeof *id32);
    if (!id32) return PLENA_FAIL(err, PLENA_E_NOMEM, "trace gen", "out of memory");
    for (size_t i = 0; i < n; i++)
        id32[i] = (uint32_t)ids[i];
    int rc = plena_router_synth(&m->router, T, m->num_experts, m->top_k, id32, w, err);
    for (size_t i = 0; i < n && !rc; i++)
        ids[i] = id32[i];
    plena_free(id32);
    return rc;
}

int plena_trace_gen_check_size(uint64_t n_traces, uint32_t tokens, uint32_t top_k,
                               struct plena_err *err)
{
    uint64_t slots;
    if (__builtin_mul_overflow(n_traces, (uint64_t)tokens * top_k, &slots) ||
        slots > PLENA_TRACE_GEN_MAX_SLOTS)
        return PLENA_FAIL(err, PLENA_E_INPUT, "--tokens",
                          "%llu trace(s) x %u tokens x top_k %u: more than the %llu routing slots "
                          "one generation holds (host memory); generate fewer traces or tokens "
                          "per call",
                          (unsigned long long)n_traces, tokens, top_k,
                          (unsigned long long)PLENA_TRACE_GEN_MAX_SLOTS);
    return 0;
}

int plena_trace_gen_tree(const struct plena_trace_gen_opts *o, json_t **tree, struct plena_err *err)
{
    *tree = NULL;
    const struct plena_moe_model *m = o->model;
    uint32_t E = m->num_experts, K = m->top_k, T = o->tokens;
    if (E < 1 || E > PLENA_TOPK_MAX_EXPERTS || K < 1 || K > E || K > PLENA_TOPK_MAX_K)
        return PLENA_FAIL(err, PLENA_E_INPUT, "--model",
                          "model %s: num_experts %u / top_k %u outside 1..%d / 1..min(E, %d)",
                          m->name, E, K, PLENA_TOPK_MAX_EXPERTS, PLENA_TOPK_MAX_K);
    if (T < 1 || T > 16777216)
        return PLENA_FAIL(err, PLENA_E_INPUT, "--tokens", "%u tokens: expected 1..16777216", T);
    int size_rc = plena_trace_gen_check_size(1, T, K, err);
    if (size_rc) return size_rc;
    int64_t *ids = plena_calloc((size_t)T * K, sizeof *ids);
    float *w = plena_calloc((size_t)T * K, sizeof *w);
    double *wd = plena_calloc(K, sizeof *wd);
    double *p = plena_calloc(E, sizeof *p);
    uint32_t *a = plena_calloc(E, sizeof *a);
    unsigned char *taken = plena_calloc(E, 1);
    int rc = 0;
    if (!ids || !w || !wd || !p || !a || !taken) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "trace gen", "out of memory");
        goto out;
    }
    struct plena_prng g;
    uint64_t words[3] = {PLENA_PRNG_TAG_ROUTING, o->layer, o->sample};
    plena_prng_derive(&g, o->seed, words, 3);
    if (o->dist == PLENA_TRACE_DIST_BALANCED) {
        for (uint32_t e = 0; e < E; e++)
            a[e] = e;
        plena_prng_shuffle_u32(&g, a, E);
    }
    if (o->dist == PLENA_TRACE_DIST_ZIPF || o->dist == PLENA_TRACE_DIST_HOT)
        if ((rc = dist_weights(o, E, p, err))) goto out;
    for (uint32_t t = 0; t < T; t++) {
        int64_t *row = ids + (size_t)t * K;
        switch (o->dist) {
        case PLENA_TRACE_DIST_ROUND_ROBIN:
            for (uint32_t j = 0; j < K; j++)
                row[j] = (int64_t)(((uint64_t)t * K + j) % E);
            break;
        case PLENA_TRACE_DIST_BALANCED:
            for (uint32_t j = 0; j < K; j++)
                row[j] = a[((uint64_t)t * K + j) % E];
            break;
        case PLENA_TRACE_DIST_UNIFORM:
            for (uint32_t e = 0; e < E; e++)
                a[e] = e;
            for (uint32_t j = 0; j < K; j++) {
                uint32_t r = j + (uint32_t)plena_prng_bounded(&g, E - j);
                uint32_t tmp = a[j];
                a[j] = a[r];
                a[r] = tmp;
                row[j] = a[j];
            }
            break;
        case PLENA_TRACE_DIST_ZIPF:
        case PLENA_TRACE_DIST_HOT:
            /* Weighted draw without replacement, sums in id order. */
            memset(taken, 0, E);
            for (uint32_t j = 0; j < K; j++) {
                double W = 0.0, c = 0.0;
                for (uint32_t e = 0; e < E; e++)
                    if (!taken[e]) W += p[e];
                double u = plena_prng_uniform(&g) * W;
                int64_t pick = -1, last = -1;
                for (uint32_t e = 0; e < E && pick < 0; e++) {
                    if (taken[e]) continue;
                    c += p[e];
                    last = e;
                    if (u < c) pick = e;
                }
                if (pick < 0) {
                    for (uint32_t e = E; e-- > 0;)
                        if (!taken[e]) {
                            last = e;
                            break;
                        }
                    pick = last;
                }
                taken[pick] = 1;
                row[j] = pick;
            }
            break;
        }
        float *wr = w + (size_t)t * K;
        if (o->random_weights) {
            double sum = 0.0;
            for (uint32_t j = 0; j < K; j++) {
                wd[j] = 1.0 - plena_prng_uniform(&g);
                sum += wd[j];
            }
            for (uint32_t j = 0; j < K; j++)
                wd[j] /= sum;
            plena_qsort(wd, K, sizeof *wd, cmp_desc);
            for (uint32_t j = 0; j < K; j++)
                wr[j] = (float)wd[j];
        } else {
            for (uint32_t j = 0; j < K; j++)
                wr[j] = (float)(1.0 / K);
        }
    }
    if ((rc = router_rows(m, T, ids, w, err))) goto out;
    char id[512], src[96];
    snprintf(id, sizeof id, "syn_%s_%s_t%u_s%llu_n%u_l%u", o->dist_text, m->name, T,
             (unsigned long long)o->seed, o->sample, o->layer);
    snprintf(src, sizeof src, "synthetic_%s", o->dist_text);
    plena_trace_stable_id(src);
    char sid[32];
    snprintf(sid, sizeof sid, "s%u", o->sample);
    json_t *pv = json_object();
    json_object_set_new(pv, "format", json_string("synthetic"));
    json_object_set_new(pv, "dist", json_string(o->dist_text));
    json_object_set_new(pv, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(pv, "sample", json_integer(o->sample));
    json_object_set_new(pv, "route_weights", json_string(o->random_weights ? "random" : "uniform"));
    if (o->dist == PLENA_TRACE_DIST_ZIPF)
        json_object_set_new(pv, "permute", json_boolean(o->permute));
    if (o->dist == PLENA_TRACE_DIST_HOT && o->n_hot_ids) {
        json_t *h = json_array();
        for (size_t i = 0; i < o->n_hot_ids; i++)
            json_array_append_new(h, json_integer(o->hot_ids[i]));
        json_object_set_new(pv, "hot_ids", h);
    }
    struct plena_trace_spec sp = {
        .model = m,
        .layer = o->layer,
        .trace_id = id,
        .created_by = "plena trace gen " PLENA_VERSION,
        .created_at_utc = o->created_at_utc,
        .benchmark = "synthetic",
        .sample_id = sid,
        .phase = o->decode ? "decode" : "prefill",
        .batch_size = o->decode ? T : 1,
        .seq_len = o->decode ? 1 : T,
        .tokens = T,
        .sample_index = -1,
        .input_tokens = -1,
        .source = src,
        .weight_source = "synthetic",
        .ids = ids,
        .weights = w,
        .provenance = pv,
        .mlen = o->mlen,
        .blen = o->blen,
    };
    rc = plena_trace_build(&sp, tree, err);
out:
    plena_free(ids);
    plena_free(w);
    plena_free(wd);
    plena_free(p);
    plena_free(a);
    plena_free(taken);
    return rc;
}

int plena_trace_gen(const struct plena_trace_gen_opts *o, struct plena_buf *out,
                    struct plena_err *err)
{
    json_t *tree;
    int rc = plena_trace_gen_tree(o, &tree, err);
    if (rc) return rc;
    if (plena_trace_json_write(out, tree, 1))
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "trace gen", "out of memory");
    json_decref(tree);
    return rc;
}
