/* The one trace builder (model fields as docs/lowering.md "Model files" gives
 * them, statistics and logical bytes as docs/trace-schema.md defines them) and
 * trace lists in canonical set order. Statistics are always recomputed here
 * from the ids; the finished trace is written and validated before it is
 * returned, so no producer can hand out an invalid trace.
 * Route weights are binary32 values (stored as doubles in the tree). */
#include "trace/build.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "isa/isa.h"
#include "model/trace_model.h"

void plena_trace_stable_id(char *s)
{
    size_t n = strlen(s);
    if (n > 128) s[128] = 0;
    for (char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            *p = '_';
}

static json_t *int_array(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

int plena_trace_build(const struct plena_trace_spec *s, json_t **out, struct plena_err *err)
{
    const struct plena_moe_model *m = s->model;
    uint32_t E = m->num_experts, K = m->top_k, T = s->tokens;
    json_t *prov = s->provenance;
    *out = NULL;
    char id[192];
    snprintf(id, sizeof id, "%s", s->trace_id);
    plena_trace_stable_id(id);
    if (E < 1 || E > PLENA_TOPK_MAX_EXPERTS || K < 1 || K > E || K > PLENA_TOPK_MAX_K || T < 1 ||
        (uint64_t)T * K > ((uint64_t)1 << 28)) {
        json_decref(prov);
        return PLENA_FAIL(err, PLENA_E_INPUT, id,
                          "shape refused: num_experts %u, top_k %u, %u tokens (expected 1..%d, "
                          "1..min(E, %d), at most 2^28 slots)",
                          E, K, T, PLENA_TOPK_MAX_EXPERTS, PLENA_TOPK_MAX_K);
    }
    int64_t *counts = plena_calloc(E, sizeof *counts), *lst = plena_calloc(E, sizeof *lst);
    if (!counts || !lst) {
        plena_free(counts);
        plena_free(lst);
        json_decref(prov);
        return PLENA_FAIL(err, PLENA_E_NOMEM, id, "out of memory");
    }
    for (size_t i = 0; i < (size_t)T * K; i++)
        if (s->ids[i] >= 0 && s->ids[i] < (int64_t)E) counts[s->ids[i]]++;
    struct plena_trace_stats st;
    int rc = plena_trace_stats_compute(counts, E, &st, err);
    json_t *root = NULL;
    if (rc) {
        json_decref(prov);
        goto out;
    }
    root = json_object();
    json_object_set_new(root, "schema_version", json_integer(2));
    json_object_set_new(root, "trace_id", json_string(id));
    json_object_set_new(root, "created_by", json_string(s->created_by));
    if (s->created_at_utc)
        json_object_set_new(root, "created_at_utc", json_string(s->created_at_utc));
    json_object_set_new(root, "model", plena_model_to_trace(m, s->layer));
    json_t *wo = json_object();
    json_object_set_new(wo, "benchmark", json_string(s->benchmark));
    json_object_set_new(wo, "sample_id", json_string(s->sample_id));
    json_object_set_new(wo, "phase", json_string(s->phase));
    json_object_set_new(wo, "batch_size", json_integer(s->batch_size));
    json_object_set_new(wo, "seq_len", json_integer(s->seq_len));
    json_object_set_new(wo, "token_count", json_integer(T));
    if (s->decode_step > 0) json_object_set_new(wo, "decode_step", json_integer(s->decode_step));
    if (s->sample_index >= 0)
        json_object_set_new(wo, "sample_index", json_integer(s->sample_index));
    if (s->input_tokens >= 0)
        json_object_set_new(wo, "input_tokens", json_integer(s->input_tokens));
    if (s->category) json_object_set_new(wo, "category", json_string(s->category));
    json_object_set_new(root, "workload", wo);
    json_t *ro = json_object(), *ti = json_array(), *tw = json_array();
    float uni = (float)(1.0 / K);
    for (uint32_t t = 0; t < T; t++) {
        json_array_append_new(ti, int_array(s->ids + (size_t)t * K, K));
        json_t *r = json_array();
        for (uint32_t j = 0; j < K; j++)
            json_array_append_new(
                r, json_real(s->weights ? (double)s->weights[(size_t)t * K + j] : (double)uni));
        json_array_append_new(tw, r);
    }
    json_object_set_new(ro, "source", json_string(s->source));
    json_object_set_new(ro, "weight_source", json_string(s->weight_source));
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
    json_object_set_new(rp, "mlen", json_integer(s->mlen));
    json_object_set_new(rp, "blen", json_integer(s->blen));
    json_object_set_new(rp, "emu_threads", json_integer(1));
    json_object_set_new(root, "replay", rp);
    json_t *lb = json_object();
    json_object_set_new(lb, "input_hidden_bf16_bytes", json_integer((json_int_t)T * m->hidden * 2));
    json_object_set_new(lb, "routed_hidden_bf16_bytes",
                        json_integer((json_int_t)T * K * m->hidden * 2));
    json_object_set_new(lb, "route_weight_bf16_bytes", json_integer((json_int_t)T * K * 2));
    json_object_set_new(root, "logical_bytes", lb);
    if (prov) json_object_set_new(root, "provenance", prov);

    /* Validate exactly the bytes a writer would produce. */
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_trace_json_write(&b, root, 1)) {
        rc = PLENA_FAIL(err, PLENA_E_NOMEM, id, "out of memory");
    } else {
        struct plena_trace_report rep;
        plena_trace_report_init(&rep);
        int vr = plena_trace_validate_bytes(b.data, b.len, NULL, &rep);
        if (vr == PLENA_E_NOMEM)
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, id, "out of memory");
        else if (vr) /* warnings (W030/W031 for imported weights) are allowed */
            rc = PLENA_FAIL(err, PLENA_E_FAILED, id, "trace does not validate: %s at %s: %s",
                            rep.n_errors ? rep.errors[0].code : "?",
                            rep.n_errors ? rep.errors[0].path : "?",
                            rep.n_errors ? rep.errors[0].message : "?");
        plena_trace_report_free(&rep);
    }
    plena_buf_free(&b);
out:
    plena_free(counts);
    plena_free(lst);
    if (rc) {
        json_decref(root);
        return rc;
    }
    *out = root;
    return 0;
}

/* ---- lists and the canonical order ---- */

void plena_trace_docs_free(struct plena_trace_docs *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n; i++)
        json_decref(d->v[i].tree);
    plena_free(d->v);
    memset(d, 0, sizeof *d);
}

static const char *str_at(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

int plena_trace_docs_add(struct plena_trace_docs *d, json_t *tree, const char *origin)
{
    if (plena_grow((void **)&d->v, &d->cap, d->n + 1, sizeof *d->v)) {
        json_decref(tree);
        return PLENA_E_NOMEM;
    }
    struct plena_trace_doc *x = &d->v[d->n++];
    memset(x, 0, sizeof *x);
    x->tree = tree;
    snprintf(x->trace_id, sizeof x->trace_id, "%s", str_at(tree, "trace_id"));
    snprintf(x->origin, sizeof x->origin, "%s", origin ? origin : "");
    return 0;
}

/* -1 for absent/null so that it sorts first. */
static long long int_at(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static int phase_rank(const char *p)
{
    static const char *const order[] = {"prefill", "decode", "smoke", "unknown"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(p, order[i])) return i;
    return 4;
}

static int cmp_ll(long long a, long long b)
{
    return a < b ? -1 : a > b;
}

static int cmp_docs(const void *pa, const void *pb)
{
    const struct plena_trace_doc *a = pa, *b = pb;
    const json_t *wa = json_object_get(a->tree, "workload"),
                 *wb = json_object_get(b->tree, "workload");
    int d;
    if ((d = strcmp(str_at(wa, "benchmark"), str_at(wb, "benchmark")))) return d;
    if ((d = cmp_ll(int_at(wa, "sample_index"), int_at(wb, "sample_index")))) return d;
    if ((d = strcmp(str_at(wa, "sample_id"), str_at(wb, "sample_id")))) return d;
    if ((d = phase_rank(str_at(wa, "phase")) - phase_rank(str_at(wb, "phase")))) return d;
    if ((d = cmp_ll(int_at(wa, "decode_step"), int_at(wb, "decode_step")))) return d;
    if ((d = cmp_ll(int_at(json_object_get(a->tree, "model"), "layer_index"),
                    int_at(json_object_get(b->tree, "model"), "layer_index"))))
        return d;
    return strcmp(a->trace_id, b->trace_id);
}

struct keyed {
    struct plena_trace_doc doc;
    size_t pos;
};

static int cmp_keyed(const void *pa, const void *pb)
{
    const struct keyed *a = pa, *b = pb;
    int d = cmp_docs(&a->doc, &b->doc);
    if (d) return d;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

void plena_trace_docs_sort(struct plena_trace_docs *d)
{
    /* qsort is not stable: carry the input position as the last key. */
    struct keyed *k = plena_calloc(d->n + 1, sizeof *k);
    if (!k) {
        plena_qsort(d->v, d->n, sizeof *d->v, cmp_docs);
        return;
    }
    for (size_t i = 0; i < d->n; i++)
        k[i] = (struct keyed){d->v[i], i};
    plena_qsort(k, d->n, sizeof *k, cmp_keyed);
    for (size_t i = 0; i < d->n; i++)
        d->v[i] = k[i].doc;
    plena_free(k);
}

int plena_trace_docs_write_set(const struct plena_trace_docs *d, struct plena_buf *out)
{
    for (size_t i = 0; i < d->n; i++)
        if (plena_trace_json_write(out, d->v[i].tree, 0) || plena_buf_append(out, "\n", 1))
            return PLENA_E_NOMEM;
    return out->failed ? PLENA_E_NOMEM : 0;
}

static int add_one(struct plena_trace_docs *d, const char *origin, const char *bytes, size_t len,
                   const struct plena_trace_validate_options *opt, struct plena_err *err)
{
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    int rc = plena_trace_validate_bytes(bytes, len, opt, &r);
    if (rc) {
        if (rc == PLENA_E_NOMEM)
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, origin, "out of memory");
        else
            rc =
                PLENA_FAIL(err, PLENA_E_FAILED, origin, "invalid trace: %s at %s: %s",
                           r.n_errors ? r.errors[0].code : "?", r.n_errors ? r.errors[0].path : "?",
                           r.n_errors ? r.errors[0].message : "?");
        plena_trace_report_free(&r);
        return rc;
    }
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].trace_id, r.trace_id)) {
            rc = PLENA_FAIL(err, PLENA_E_FAILED, origin,
                            "V100 at trace_id: trace_id \"%s\" already used by %s", r.trace_id,
                            d->v[i].origin);
            plena_trace_report_free(&r);
            return rc;
        }
    plena_trace_report_free(&r);
    json_t *t = json_loadb(bytes, len, 0, NULL);
    if (!t) return PLENA_FAIL(err, PLENA_E_NOMEM, origin, "out of memory");
    if (plena_trace_docs_add(d, t, origin))
        return PLENA_FAIL(err, PLENA_E_NOMEM, origin, "out of memory");
    return 0;
}

int plena_trace_docs_read(struct plena_trace_docs *d, const char *name, const char *bytes,
                          size_t len, int is_set, const struct plena_trace_validate_options *opt,
                          struct plena_err *err)
{
    if (!is_set) return add_one(d, name, bytes, len, opt, err);
    struct plena_trace_lines it = {bytes, len, 0, 0};
    const char *s;
    size_t n;
    while (plena_trace_lines_next(&it, &s, &n)) {
        char origin[320];
        snprintf(origin, sizeof origin, "%s:%ld", name, it.line);
        int rc = add_one(d, origin, s, n, opt, err);
        if (rc) return rc;
    }
    return 0;
}
