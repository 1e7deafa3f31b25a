/* plena trace gen: synthetic routing of spec/traces-and-replay.md 3.2 and the
 * model fields of 3.4. Every trace is built as a jansson tree, written in the
 * pretty form of 0.3 and validated before it is handed back. Route weights are
 * binary32 values stored as doubles; they are printed with the double rule of
 * 0.3 (exact, but not the shortest binary32 spelling; see the report). */
#include "trace/gen.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "num/detmath.h"
#include "num/prng.h"
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
        if (end == s + 4 || n == 0 || n > 16383 || (*end && *end != ':'))
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

/* stable_id (1.8): bytes outside [A-Za-z0-9_-] become '_', at most 128 bytes. */
static void stable_id(char *s)
{
    size_t n = strlen(s);
    if (n > 128) s[128] = 0;
    for (char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            *p = '_';
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
            double v;
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
        for (uint32_t i = 0; i < o->hot_n && !rc; i++)
            p[perm[i]] = o->hot_f / (double)o->hot_n;
    }
    plena_free(perm);
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

static json_t *int_array(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

int plena_trace_gen(const struct plena_trace_gen_opts *o, struct plena_buf *out,
                    struct plena_err *err)
{
    const struct plena_moe_model *m = o->model;
    uint32_t E = m->num_experts, K = m->top_k, T = o->tokens;
    if (E < 1 || E > 16383 || K < 1 || K > E || K > 255)
        return PLENA_FAIL(err, PLENA_E_INPUT, "--model",
                          "model %s: num_experts %u / top_k %u outside 1..16383 / 1..min(E, 255)",
                          m->name, E, K);
    if (T < 1 || T > 16777216 || (uint64_t)T * K > ((uint64_t)1 << 28))
        return PLENA_FAIL(
            err, PLENA_E_INPUT, "--tokens",
            "%u tokens x top_k %u: expected 1..16777216 tokens and at most 2^28 slots", T, K);
    int64_t *ids = plena_calloc((size_t)T * K, sizeof *ids);
    double *w = plena_calloc((size_t)T * K, sizeof *w);
    double *p = plena_calloc(E, sizeof *p);
    uint32_t *a = plena_calloc(E, sizeof *a);
    unsigned char *taken = plena_calloc(E, 1);
    int64_t *counts = plena_calloc(E, sizeof *counts), *lst = plena_calloc(E, sizeof *lst);
    json_t *root = NULL;
    int rc = 0;
    if (!ids || !w || !p || !a || !taken || !counts || !lst) {
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
            /* Weighted draw without replacement, sums in id order (3.2). */
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
        double *wr = w + (size_t)t * K;
        if (o->random_weights) {
            double sum = 0.0;
            for (uint32_t j = 0; j < K; j++) {
                wr[j] = 1.0 - plena_prng_uniform(&g);
                sum += wr[j];
            }
            for (uint32_t j = 0; j < K; j++)
                wr[j] /= sum;
            qsort(wr, K, sizeof *wr, cmp_desc);
            for (uint32_t j = 0; j < K; j++)
                wr[j] = (double)(float)wr[j];
        } else {
            for (uint32_t j = 0; j < K; j++)
                wr[j] = (double)(float)(1.0 / K);
        }
        for (uint32_t j = 0; j < K; j++)
            counts[row[j]]++;
    }
    struct plena_trace_stats st;
    if ((rc = plena_trace_stats_compute(counts, E, &st, err))) goto out;

    char id[512], name[160], src[96];
    snprintf(name, sizeof name, "%s", m->name);
    snprintf(id, sizeof id, "syn_%s_%s_t%u_s%llu_n%u_l%u", o->dist_text, m->name, T,
             (unsigned long long)o->seed, o->sample, o->layer);
    stable_id(id);
    snprintf(src, sizeof src, "synthetic_%s", o->dist_text);
    stable_id(src);
    root = json_object();
    json_object_set_new(root, "schema_version", json_integer(2));
    json_object_set_new(root, "trace_id", json_string(id));
    json_object_set_new(root, "created_by", json_string("plena trace gen " PLENA_VERSION));
    json_t *mo = json_object();
    json_object_set_new(mo, "name", json_string(name));
    json_object_set_new(mo, "layer_index", json_integer(o->layer));
    json_object_set_new(mo, "hidden_size", json_integer(m->hidden));
    json_object_set_new(mo, "intermediate_size", json_integer(m->moe_inter));
    json_object_set_new(mo, "num_experts", json_integer(E));
    json_object_set_new(mo, "top_k", json_integer(K));
    json_object_set_new(mo, "shared_experts", json_integer(m->shared_inter ? m->n_shared : 0));
    if (m->shared_inter && m->n_shared) {
        json_object_set_new(mo, "shared_intermediate_size", json_integer(m->shared_inter));
        json_object_set_new(
            mo, "shared_gate",
            json_string(m->shared_gate == PLENA_SHARED_GATE_SIGMOID ? "sigmoid" : "none"));
    }
    json_object_set_new(mo, "activation_policy",
                        json_string(m->activation == PLENA_ACT_GPT_OSS_CLAMP_GATED
                                        ? "gpt_oss_clamp_gated"
                                        : "standard_swiglu"));
    json_object_set_new(mo, "route_weight_placement",
                        json_string(m->route_placement == PLENA_ROUTE_INPUT ? "input" : "output"));
    if (m->policy_name) json_object_set_new(mo, "policy_name", json_string(m->policy_name));
    json_object_set_new(mo, "norm_topk_prob", json_boolean(m->norm_topk_prob));
    json_object_set_new(root, "model", mo);
    json_t *wo = json_object();
    char sid[32];
    snprintf(sid, sizeof sid, "s%u", o->sample);
    json_object_set_new(wo, "benchmark", json_string("synthetic"));
    json_object_set_new(wo, "sample_id", json_string(sid));
    json_object_set_new(wo, "phase", json_string(o->decode ? "decode" : "prefill"));
    json_object_set_new(wo, "batch_size", json_integer(o->decode ? T : 1));
    json_object_set_new(wo, "seq_len", json_integer(o->decode ? 1 : T));
    json_object_set_new(wo, "token_count", json_integer(T));
    json_object_set_new(root, "workload", wo);
    json_t *ro = json_object(), *ti = json_array(), *tw = json_array();
    for (uint32_t t = 0; t < T; t++) {
        json_array_append_new(ti, int_array(ids + (size_t)t * K, K));
        json_t *r = json_array();
        for (uint32_t j = 0; j < K; j++)
            json_array_append_new(r, json_real(w[(size_t)t * K + j]));
        json_array_append_new(tw, r);
    }
    json_object_set_new(ro, "source", json_string(src));
    json_object_set_new(ro, "weight_source", json_string("synthetic"));
    json_object_set_new(ro, "topk_indices", ti);
    json_object_set_new(ro, "topk_weights", tw);
    json_object_set_new(ro, "expert_counts", int_array(counts, E));
    json_object_set_new(ro, "duplicate_factor", json_real(st.duplicate_factor));
    json_object_set_new(ro, "gini", json_real(st.gini));
    json_object_set_new(ro, "active_experts",
                        int_array(lst, plena_trace_active_experts(counts, E, lst)));
    json_object_set_new(ro, "hot_experts", int_array(lst, plena_trace_hot_experts(counts, E, lst)));
    json_object_set_new(ro, "cold_experts",
                        int_array(lst, plena_trace_cold_experts(counts, E, lst)));
    json_object_set_new(root, "routing", ro);
    json_t *rp = json_object();
    json_object_set_new(rp, "mlen", json_integer(o->mlen));
    json_object_set_new(rp, "blen", json_integer(o->blen));
    json_object_set_new(rp, "emu_threads", json_integer(1));
    json_object_set_new(root, "replay", rp);
    json_t *lb = json_object();
    json_object_set_new(lb, "input_hidden_bf16_bytes", json_integer((json_int_t)T * m->hidden * 2));
    json_object_set_new(lb, "routed_hidden_bf16_bytes",
                        json_integer((json_int_t)T * K * m->hidden * 2));
    json_object_set_new(lb, "route_weight_bf16_bytes", json_integer((json_int_t)T * K * 2));
    json_object_set_new(root, "logical_bytes", lb);
    json_t *pv = json_object();
    json_object_set_new(pv, "format", json_string("synthetic"));
    json_object_set_new(pv, "dist", json_string(o->dist_text));
    json_object_set_new(pv, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(pv, "sample", json_integer(o->sample));
    json_object_set_new(pv, "route_weights", json_string(o->random_weights ? "random" : "uniform"));
    if (o->dist == PLENA_TRACE_DIST_ZIPF)
        json_object_set_new(pv, "permute", json_boolean(o->permute));
    json_object_set_new(root, "provenance", pv);

    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_trace_json_write(&b, root, 1)) {
        plena_buf_free(&b);
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "trace gen", "out of memory");
        goto out;
    }
    struct plena_trace_report rep;
    plena_trace_report_init(&rep);
    if (plena_trace_validate_bytes(b.data, b.len, NULL, &rep)) {
        rc = PLENA_FAIL(err, PLENA_E_FAILED, id, "generated trace does not validate: %s at %s: %s",
                        rep.n_errors ? rep.errors[0].code : "?",
                        rep.n_errors ? rep.errors[0].path : "?",
                        rep.n_errors ? rep.errors[0].message : "out of memory");
    } else if (plena_buf_append(out, b.data, b.len)) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, "trace gen", "out of memory");
    }
    plena_trace_report_free(&rep);
    plena_buf_free(&b);
out:
    json_decref(root);
    plena_free(ids);
    plena_free(w);
    plena_free(p);
    plena_free(a);
    plena_free(taken);
    plena_free(counts);
    plena_free(lst);
    return rc;
}
