/* plena trace route on the tiny checkpoints (docs/traces.md "Tests"): a
 * hand-computed 1-layer 1-token case (float64, written here independently of
 * the forward pass), the tie rule, decode with the KV cache against
 * recomputation, resume byte-identical after a torn write, shards merged,
 * failures, refusals of configs and shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/decoder.h"
#include "ckpt/route.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "model/model.h"
#include "trace/build.h"
#include "trace/trace.h"

static void tiny(const char *name, enum plena_dec_arch arch, plena_tiny_edit_fn edit, char *dir,
                 size_t n)
{
    plena_test_path(dir, n, plena_test_tmp, name);
    struct plena_err err = {0};
    if (plena_tiny_checkpoint_write(dir, arch, 1, edit, NULL, &err))
        fail_msg("tiny checkpoint: %s: %s", err.where, err.msg);
}

/* The paths of one case: the checkpoint dir, its inputs.jsonl, rows.jsonl. */
struct paths {
    char dir[512], in[600], out[600];
};

static void opts_init(struct plena_route_opts *o, const char *ck, const char *inputs,
                      const char *out);

/* A tiny checkpoint `name` of arch and options running on its inputs. */
static void case_init(struct paths *P, const char *name, enum plena_dec_arch arch,
                      plena_tiny_edit_fn edit, struct plena_route_opts *o)
{
    tiny(name, arch, edit, P->dir, sizeof P->dir);
    plena_test_path(P->in, sizeof P->in, P->dir, "inputs.jsonl");
    plena_test_path(P->out, sizeof P->out, P->dir, "rows.jsonl");
    if (o) opts_init(o, P->dir, P->in, P->out);
}

static void opts_init(struct plena_route_opts *o, const char *ck, const char *inputs,
                      const char *out)
{
    memset(o, 0, sizeof *o);
    o->checkpoint = ck;
    o->inputs = inputs;
    o->out = out;
    o->phases = PLENA_ROUTE_PREFILL;
    o->threads = 1;
    o->quiet = 1;
}

static int route(const struct plena_route_opts *o, struct plena_err *err)
{
    struct plena_route_summary s;
    plena_err_clear(err);
    return plena_route_run(o, &s, err);
}

static char *slurp(const char *path, size_t *len)
{
    return plena_test_read_file(NULL, path, len);
}

/* The n-th line (0-based) of a rows file, parsed. */
static json_t *row_at(const char *path, size_t n)
{
    char *t = slurp(path, NULL);
    assert_non_null(t);
    char *p = t;
    for (size_t i = 0; i < n; i++) {
        p = strchr(p, '\n');
        assert_non_null(p);
        p++;
    }
    json_error_t je;
    json_t *o = json_loadb(p, strcspn(p, "\n"), 0, &je);
    plena_free(t);
    assert_non_null(o);
    return o;
}

/* ---- the hand-computed case: one token through all three layers in
 * float64, written here from the published models' definitions. With one
 * position the attention output is v (per kv group) . Wo, so RoPE and the
 * q/k norms drop out; everything else (norms, biases, routers, experts in
 * rank order, the shared expert and its sigmoid gate, the dense layer) is
 * recomputed. ---- */

enum { H = 64, D = 16, NH = 4, KV = 2, E = 8, K = 2 };

/* The tensor (printf-formatted name) as doubles, or NULL when absent. */
static double *t64(const struct plena_ckpt *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static double *t64(const struct plena_ckpt *c, const char *fmt, ...)
{
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const struct plena_st_tensor *t = plena_ckpt_find(c, name);
    if (!t) return NULL;
    double *v = calloc(t->count, sizeof *v);
    for (uint64_t i = 0; i < t->count; i++)
        v[i] = plena_st_get(t, i);
    return v;
}

static void mv64(const double *W, const double *x, int n_out, int n_in, double *y)
{
    for (int o = 0; o < n_out; o++) {
        y[o] = 0;
        for (int i = 0; i < n_in; i++)
            y[o] += W[o * n_in + i] * x[i];
    }
}

static void rms64(const double *x, const double *w, int n, double *out)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++)
        out[i] = x[i] / r * w[i];
}

/* y += scale * down(silu(gate x) * up x) */
static void mlp64(const double *g, const double *u, const double *d, int I, const double *x,
                  double scale, double *y)
{
    double a[128], b[128], t[H];
    mv64(g, x, I, H, a);
    mv64(u, x, I, H, b);
    for (int i = 0; i < I; i++)
        a[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
    mv64(d, a, H, I, t);
    for (int i = 0; i < H; i++)
        y[i] += scale * t[i];
}

static void attention64(const struct plena_ckpt *c, int l, double *h)
{
    double x[H], v[KV * D], att[NH * D], t[H];
    double *win = t64(c, "model.layers.%d.input_layernorm.weight", l),
           *wv = t64(c, "model.layers.%d.self_attn.v_proj.weight", l),
           *bv = t64(c, "model.layers.%d.self_attn.v_proj.bias", l),
           *wo = t64(c, "model.layers.%d.self_attn.o_proj.weight", l);
    rms64(h, win, H, x);
    mv64(wv, x, KV * D, H, v);
    for (int i = 0; bv && i < KV * D; i++)
        v[i] += bv[i];
    for (int hh = 0; hh < NH; hh++)
        for (int i = 0; i < D; i++)
            att[hh * D + i] = v[(hh / (NH / KV)) * D + i];
    mv64(wo, att, H, NH * D, t);
    for (int i = 0; i < H; i++)
        h[i] += t[i];
    free(win), free(wv), free(bv), free(wo);
}

/* The MoE block of layer l on h; the router's ids and weights out. */
static void moe64(const struct plena_ckpt *c, const char *blk, const char *const names[3], int l,
                  int norm_topk, double *h, int ids[K], double w[K])
{
    double x[H], logits[E], y[H] = {0};
    double *wpost = t64(c, "model.layers.%d.post_attention_layernorm.weight", l),
           *wg = t64(c, "model.layers.%d.%s.gate.weight", l, blk);
    rms64(h, wpost, H, x);
    mv64(wg, x, E, H, logits);
    ids[0] = 0;
    for (int e = 1; e < E; e++)
        if (logits[e] > logits[ids[0]]) ids[0] = e;
    ids[1] = ids[0] ? 0 : 1;
    for (int e = 0; e < E; e++)
        if (e != ids[0] && logits[e] > logits[ids[1]]) ids[1] = e;
    double sum = 0;
    for (int e = 0; e < E; e++)
        if (!norm_topk || e == ids[0] || e == ids[1]) sum += exp(logits[e] - logits[ids[0]]);
    for (int k = 0; k < K; k++)
        w[k] = exp(logits[ids[k]] - logits[ids[0]]) / sum;
    for (int k = 0; k < K; k++) {
        double *m[3];
        for (int j = 0; j < 3; j++)
            m[j] = t64(c, "model.layers.%d.%s.experts.%d.%s.weight", l, blk, ids[k], names[j]);
        /* the model multiplies by the binary32 weight it records */
        mlp64(m[0], m[1], m[2], 32, x, (double)(float)w[k], y);
        free(m[0]), free(m[1]), free(m[2]);
    }
    double *sg = t64(c, "model.layers.%d.mlp.shared_expert_gate.weight", l);
    if (sg) {
        double z = 0, *m[3];
        for (int i = 0; i < H; i++)
            z += sg[i] * x[i];
        const char *sn[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int j = 0; j < 3; j++)
            m[j] = t64(c, "model.layers.%d.mlp.shared_expert.%s.weight", l, sn[j]);
        mlp64(m[0], m[1], m[2], 64, x, 1.0 / (1.0 + exp(-z)), y);
        free(m[0]), free(m[1]), free(m[2]), free(sg);
    }
    for (int i = 0; i < H; i++)
        h[i] += y[i];
    free(wpost), free(wg);
}

static void dense64(const struct plena_ckpt *c, int l, double *h)
{
    double x[H], y[H] = {0};
    double *wpost = t64(c, "model.layers.%d.post_attention_layernorm.weight", l),
           *g = t64(c, "model.layers.%d.mlp.gate_proj.weight", l),
           *u = t64(c, "model.layers.%d.mlp.up_proj.weight", l),
           *d = t64(c, "model.layers.%d.mlp.down_proj.weight", l);
    rms64(h, wpost, H, x);
    mlp64(g, u, d, 128, x, 1.0, y);
    for (int i = 0; i < H; i++)
        h[i] += y[i];
    free(wpost), free(g), free(u), free(d);
}

static void expect_route(const json_t *row, const int ids[K], const double w[K], double tol)
{
    json_t *r0 = json_array_get(json_object_get(row, "routes"), 0),
           *w0 = json_array_get(json_object_get(row, "route_weights"), 0);
    for (int k = 0; k < K; k++) {
        assert_int_equal(json_integer_value(json_array_get(r0, k)), ids[k]);
        double got = json_real_value(json_array_get(w0, k));
        if (fabs(got - w[k]) > tol) fail_msg("weight %d: %.9g, expected %.9g", k, got, w[k]);
    }
}

static void hand_computed(enum plena_dec_arch arch)
{
    struct paths P;
    struct plena_route_opts o;
    case_init(&P, plena_dec_arch_tiny_variant(arch), arch, NULL, &o);
    const struct plena_dec_arch_info *ai = plena_dec_arch_info(arch);
    const char *only[] = {"tiny-0"};
    o.sample_ids = only;
    o.n_sample_ids = 1;
    const int64_t layers[2] = {0, 2};
    o.layers = layers;
    o.n_layers = 2;
    struct plena_err err;
    assert_int_equal(route(&o, &err), 0);
    /* the token of tiny-0 from inputs.jsonl */
    char *inputs = slurp(P.in, NULL);
    json_t *first = json_loadb(inputs, strcspn(inputs, "\n"), 0, NULL);
    const int token =
        (int)json_integer_value(json_array_get(json_object_get(first, "input_ids"), 0));
    json_decref(first);
    plena_free(inputs);

    struct plena_ckpt c;
    assert_int_equal(plena_ckpt_open(P.dir, &c, &err), 0);
    const int norm_topk = arch == PLENA_DEC_QWEN3_MOE || arch == PLENA_DEC_MIXTRAL;
    const int dense1 = arch == PLENA_DEC_QWEN3_MOE || arch == PLENA_DEC_QWEN2_MOE;
    const char *const names[3] = {ai->gate, ai->up, ai->down};
    double *embed = t64(&c, "model.embed_tokens.weight"), h[H], w[3][K];
    int ids[3][K];
    for (int i = 0; i < H; i++)
        h[i] = embed[token * H + i];
    for (int l = 0; l < 3; l++) {
        attention64(&c, l, h);
        if (l == 1 && dense1)
            dense64(&c, l, h);
        else
            moe64(&c, ai->block, names, l, norm_topk, h, ids[l], w[l]);
    }
    json_t *r0 = row_at(P.out, 0), *r2 = row_at(P.out, 1);
    expect_route(r0, ids[0], w[0], 1e-5);
    /* layer 2 sits behind two layers of f32 rounding */
    expect_route(r2, ids[2], w[2], 1e-4);
    json_decref(r0), json_decref(r2);
    free(embed);
    plena_ckpt_close(&c);
}

static void test_hand_computed(void **state)
{
    (void)state;
    for (int a = 0; a <= PLENA_DEC_OLMOE; a++) /* the GQA architectures */
        hand_computed((enum plena_dec_arch)a);
}

/* ---- the hand-computed MLA case (DeepSeek-V2/V3): the two tokens of
 * tiny-1 through all three layers in float64, from the published modelling
 * code: q (direct or through q_a, its norm, q_b), the compressed kv and its
 * norm, kv_b into per-head k_nope and v, interleaved RoPE on q_pe and the
 * shared k_pe, scale 1/sqrt(nope + rope); then the group-limited routers
 * and ungated shared experts. Two tokens, so q and RoPE matter. ---- */

enum { NOPE = 16, ROPE = 8, QH = NOPE + ROPE, VD = 16, CL = 32, QL = 32 };

/* Interleaved pairs (2i, 2i+1) rotated by pos x theta^(-2i/ROPE). */
static void rope64(double *x, int pos)
{
    for (int i = 0; i < ROPE / 2; i++) {
        const double f = pow(10000.0, -2.0 * i / ROPE), cs = cos(pos * f), sn = sin(pos * f);
        const double a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * cs - b * sn;
        x[2 * i + 1] = b * cs + a * sn;
    }
}

static void mla64(const struct plena_ckpt *c, int l, int T, double h[][H])
{
    double *win = t64(c, "model.layers.%d.input_layernorm.weight", l),
           *wq = t64(c, "model.layers.%d.self_attn.q_proj.weight", l),
           *wqa = t64(c, "model.layers.%d.self_attn.q_a_proj.weight", l),
           *wqan = t64(c, "model.layers.%d.self_attn.q_a_layernorm.weight", l),
           *wqb = t64(c, "model.layers.%d.self_attn.q_b_proj.weight", l),
           *wkva = t64(c, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", l),
           *wkvn = t64(c, "model.layers.%d.self_attn.kv_a_layernorm.weight", l),
           *wkvb = t64(c, "model.layers.%d.self_attn.kv_b_proj.weight", l),
           *wo = t64(c, "model.layers.%d.self_attn.o_proj.weight", l);
    double q[2][NH * QH], kpe[2][ROPE], kv[2][NH * (NOPE + VD)];
    for (int t = 0; t < T; t++) {
        double x[H], a[QL], kva[CL + ROPE], cn[CL];
        rms64(h[t], win, H, x);
        if (wqa) {
            mv64(wqa, x, QL, H, a);
            rms64(a, wqan, QL, a);
            mv64(wqb, a, NH * QH, QL, q[t]);
        } else {
            mv64(wq, x, NH * QH, H, q[t]);
        }
        mv64(wkva, x, CL + ROPE, H, kva);
        rms64(kva, wkvn, CL, cn);
        mv64(wkvb, cn, NH * (NOPE + VD), CL, kv[t]);
        memcpy(kpe[t], kva + CL, sizeof kpe[t]);
        rope64(kpe[t], t);
        for (int hh = 0; hh < NH; hh++)
            rope64(q[t] + hh * QH + NOPE, t);
    }
    for (int t = 0; t < T; t++) {
        double out[NH * VD] = {0}, o[H];
        for (int hh = 0; hh < NH; hh++) {
            double sc[2], m = -INFINITY, z = 0;
            for (int j = 0; j <= t; j++) {
                double d = 0;
                for (int i = 0; i < NOPE; i++)
                    d += q[t][hh * QH + i] * kv[j][hh * (NOPE + VD) + i];
                for (int i = 0; i < ROPE; i++)
                    d += q[t][hh * QH + NOPE + i] * kpe[j][i];
                sc[j] = d / sqrt((double)QH);
                if (sc[j] > m) m = sc[j];
            }
            for (int j = 0; j <= t; j++)
                z += (sc[j] = exp(sc[j] - m));
            for (int j = 0; j <= t; j++)
                for (int i = 0; i < VD; i++)
                    out[hh * VD + i] += sc[j] / z * kv[j][hh * (NOPE + VD) + NOPE + i];
        }
        mv64(wo, out, H, NH * VD, o);
        for (int i = 0; i < H; i++)
            h[t][i] += o[i];
    }
    free(win), free(wq), free(wqa), free(wqan), free(wqb), free(wkva), free(wkvn), free(wkvb);
    free(wo);
}

/* The DeepSeek router of 4 groups of 2 experts, top-2 groups, top-2
 * experts: V2 softmax, group score its max, weights x 2; V3 sigmoid, the
 * correction bias for choosing, group score the sum of its (two) biased
 * scores, weights normalised x 2.5. Then the experts and the shared ones. */
static void moe64_ds(const struct plena_ckpt *c, int l, int v3, double *h, int ids[K], double w[K])
{
    double x[H], lg[E], sc[E], sel[E], gs[4], y[H] = {0};
    double *wpost = t64(c, "model.layers.%d.post_attention_layernorm.weight", l),
           *wg = t64(c, "model.layers.%d.mlp.gate.weight", l),
           *bias = t64(c, "model.layers.%d.mlp.gate.e_score_correction_bias", l);
    assert_true(!bias == !v3);
    rms64(h, wpost, H, x);
    mv64(wg, x, E, H, lg);
    double z = 0;
    for (int e = 0; e < E; e++)
        z += exp(lg[e]);
    for (int e = 0; e < E; e++) {
        sc[e] = v3 ? 1.0 / (1.0 + exp(-lg[e])) : exp(lg[e]) / z;
        sel[e] = sc[e] + (v3 ? bias[e] : 0.0);
    }
    for (int g = 0; g < 4; g++)
        gs[g] = v3 ? sel[2 * g] + sel[2 * g + 1] : fmax(sel[2 * g], sel[2 * g + 1]);
    int g0 = 0, g1 = -1;
    for (int g = 1; g < 4; g++)
        if (gs[g] > gs[g0]) g0 = g;
    for (int g = 0; g < 4; g++)
        if (g != g0 && (g1 < 0 || gs[g] > gs[g1])) g1 = g;
    ids[0] = ids[1] = -1;
    for (int e = 0; e < E; e++)
        if ((e / 2 == g0 || e / 2 == g1) && (ids[0] < 0 || sel[e] > sel[ids[0]])) ids[0] = e;
    for (int e = 0; e < E; e++)
        if ((e / 2 == g0 || e / 2 == g1) && e != ids[0] && (ids[1] < 0 || sel[e] > sel[ids[1]]))
            ids[1] = e;
    for (int k = 0; k < K; k++)
        w[k] = v3 ? sc[ids[k]] / (sc[ids[0]] + sc[ids[1]]) * 2.5 : sc[ids[k]] * 2.0;
    const char *sn[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int k = 0; k < K; k++) {
        double *m[3];
        for (int j = 0; j < 3; j++)
            m[j] = t64(c, "model.layers.%d.mlp.experts.%d.%s.weight", l, ids[k], sn[j]);
        mlp64(m[0], m[1], m[2], 32, x, (double)(float)w[k], y);
        free(m[0]), free(m[1]), free(m[2]);
    }
    double *m[3];
    for (int j = 0; j < 3; j++)
        m[j] = t64(c, "model.layers.%d.mlp.shared_experts.%s.weight", l, sn[j]);
    mlp64(m[0], m[1], m[2], v3 ? 32 : 64, x, 1.0, y);
    free(m[0]), free(m[1]), free(m[2]);
    for (int i = 0; i < H; i++)
        h[i] += y[i];
    free(wpost), free(wg), free(bias);
}

static void hand_computed_mla(enum plena_dec_arch arch)
{
    const int v3 = arch == PLENA_DEC_DEEPSEEK_V3;
    struct paths P;
    struct plena_route_opts o;
    case_init(&P, plena_dec_arch_tiny_variant(arch), arch, NULL, &o);
    const char *only[] = {"tiny-1"};
    o.sample_ids = only;
    o.n_sample_ids = 1;
    const int64_t layers[2] = {v3 ? 1 : 0, 2};
    o.layers = layers;
    o.n_layers = 2;
    struct plena_err err;
    assert_int_equal(route(&o, &err), 0);
    char *inputs = slurp(P.in, NULL), *second = strchr(inputs, '\n') + 1;
    json_t *line = json_loadb(second, strcspn(second, "\n"), 0, NULL),
           *tok = json_object_get(line, "input_ids");
    assert_int_equal(json_array_size(tok), 2);
    struct plena_ckpt c;
    assert_int_equal(plena_ckpt_open(P.dir, &c, &err), 0);
    double *embed = t64(&c, "model.embed_tokens.weight"), h[2][H], w[3][2][K];
    int ids[3][2][K];
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < H; i++)
            h[t][i] = embed[json_integer_value(json_array_get(tok, t)) * H + i];
    for (int l = 0; l < 3; l++) {
        mla64(&c, l, 2, h);
        for (int t = 0; t < 2; t++)
            if (l == 0 && v3)
                dense64(&c, l, h[t]);
            else
                moe64_ds(&c, l, v3, h[t], ids[l][t], w[l][t]);
    }
    for (int r = 0; r < 2; r++) {
        json_t *row = row_at(P.out, (size_t)r);
        const int l = (int)layers[r];
        for (int t = 0; t < 2; t++) {
            json_t *rt = json_array_get(json_object_get(row, "routes"), t),
                   *wt = json_array_get(json_object_get(row, "route_weights"), t);
            for (int k = 0; k < K; k++) {
                assert_int_equal(json_integer_value(json_array_get(rt, k)), ids[l][t][k]);
                const double got = json_real_value(json_array_get(wt, k));
                if (fabs(got - w[l][t][k]) > (l < 2 ? 2e-5 : 1e-4))
                    fail_msg("%s layer %d token %d weight %d: %.9g, expected %.9g",
                             plena_dec_arch_tiny_variant(arch), l, t, k, got, w[l][t][k]);
            }
        }
        assert_string_equal(json_string_value(json_object_get(row, "weight_source")),
                            v3 ? "true_router_sigmoid_weights"
                               : "true_router_scaled_softmax_weights");
        json_decref(row);
    }
    json_decref(line);
    plena_free(inputs);
    free(embed);
    plena_ckpt_close(&c);
}

static void test_hand_computed_mla(void **state)
{
    (void)state;
    hand_computed_mla(PLENA_DEC_DEEPSEEK_V2);
    hand_computed_mla(PLENA_DEC_DEEPSEEK_V3);
}

/* ---- ties go to the lower id ---- */

static void equal_router_rows(const char *name, float *v, uint64_t n, void *ctx)
{
    (void)ctx;
    if (strcmp(name, "model.layers.0.mlp.gate.weight")) return;
    for (uint64_t i = 64; i < n; i++)
        v[i] = v[i % 64]; /* every expert's row = row 0 */
}

/* Equal logits: experts 0 and 1 with weight w each (Qwen3: the softmax of
 * two equal logits; DeepSeek-V2: every group's maximum ties, so groups 0 and
 * 1, then their experts 0 and 1, each 1/8 x routed_scaling_factor 2). */
static void tie_case(const char *name, enum plena_dec_arch arch, double w_want)
{
    struct paths P;
    struct plena_route_opts o;
    case_init(&P, name, arch, equal_router_rows, &o);
    const char *out = P.out;
    struct plena_err err;
    assert_int_equal(route(&o, &err), 0);
    for (size_t s = 0; s < 5; s++) {
        json_t *row = row_at(out, s);
        json_t *routes = json_object_get(row, "routes");
        for (size_t t = 0; t < json_array_size(routes); t++) {
            json_t *r = json_array_get(routes, t),
                   *w = json_array_get(json_object_get(row, "route_weights"), t);
            assert_int_equal(json_integer_value(json_array_get(r, 0)), 0);
            assert_int_equal(json_integer_value(json_array_get(r, 1)), 1);
            assert_true(json_real_value(json_array_get(w, 0)) == w_want);
            assert_true(json_real_value(json_array_get(w, 1)) == w_want);
        }
        json_decref(row);
    }
}

static void test_tie(void **state)
{
    (void)state;
    tie_case("tie", PLENA_DEC_QWEN3_MOE, 0.5);
    tie_case("tie-ds2", PLENA_DEC_DEEPSEEK_V2, 0.25);
}

/* ---- decode through the KV cache equals recomputing the longer prompt ---- */

static void check_decode_act(enum plena_dec_arch arch, const char *name, int bf16)
{
    struct plena_dec_config cfg;
    plena_tiny_config(arch, &cfg);
    struct paths P;
    struct plena_route_opts o;
    case_init(&P, name, arch, NULL, &o);
    const char *dir = P.dir, *out = P.out;
    char in2[600], out2[600];
    const char *only[] = {"tiny-2"};
    o.sample_ids = only;
    o.n_sample_ids = 1;
    o.phases = PLENA_ROUTE_BOTH;
    o.decode_steps = 2;
    o.act_bf16 = bf16;
    const int64_t layers[2] = {cfg.dense[0], -1}; /* the first MoE layer and the last */
    o.layers = layers;
    o.n_layers = 2;
    struct plena_err err;
    assert_int_equal(route(&o, &err), 0);
    /* rows: prefill l0, l2, then step 1 l0, l2, step 2 l0, l2 */
    json_t *d1 = row_at(out, 2), *d2 = row_at(out, 4), *d2b = row_at(out, 5);
    const json_int_t t1 = json_integer_value(json_object_get(d1, "step_token_id")),
                     t2 = json_integer_value(json_object_get(d2, "step_token_id"));
    assert_int_equal(json_integer_value(json_object_get(d2b, "layer")), 2);
    char line[512];
    snprintf(line, sizeof line, "{\"sample_id\":\"x\",\"input_ids\":[22,45,103,59,56,%lld,%lld]}\n",
             (long long)t1, (long long)t2);
    plena_test_path(in2, sizeof in2, dir, "inputs2.jsonl");
    plena_test_path(out2, sizeof out2, dir, "rows2.jsonl");
    plena_test_write_text(dir, "inputs2.jsonl", line);
    opts_init(&o, dir, in2, out2);
    o.act_bf16 = bf16;
    o.layers = layers;
    o.n_layers = 2;
    assert_int_equal(route(&o, &err), 0);
    json_t *p0 = row_at(out2, 0), *p2 = row_at(out2, 1);
    /* the prompt's token 5 (0-based) was fed at decode step 1, token 6 at step 2 */
    json_t *pr[2] = {p0, p2}, *dec[2][2] = {{d1, row_at(out, 3)}, {d2, d2b}};
    for (int li = 0; li < 2; li++)
        for (int st = 0; st < 2; st++) {
            json_t *a = json_array_get(json_object_get(pr[li], "routes"), 5 + st),
                   *aw = json_array_get(json_object_get(pr[li], "route_weights"), 5 + st);
            json_t *b = json_array_get(json_object_get(dec[st][li], "routes"), 0),
                   *bw = json_array_get(json_object_get(dec[st][li], "route_weights"), 0);
            assert_true(json_equal(a, b));
            assert_true(json_equal(aw, bw)); /* bit for bit: the same shortest spelling */
        }
    json_decref(p0), json_decref(p2), json_decref(d1), json_decref(d2), json_decref(d2b);
    json_decref(dec[0][1]);
}

/* decode (token by token, KV cache) against the batched prefill of the
 * longer prompt, in f32 and with --act bf16 */
static void check_decode(enum plena_dec_arch arch, const char *name)
{
    char n2[64];
    check_decode_act(arch, name, 0);
    snprintf(n2, sizeof n2, "%s-bf16", name);
    check_decode_act(arch, n2, 1);
}

static void test_decode_qwen3(void **state)
{
    (void)state;
    check_decode(PLENA_DEC_QWEN3_MOE, "dec3");
}

static void test_decode_qwen2(void **state)
{
    (void)state;
    check_decode(PLENA_DEC_QWEN2_MOE, "dec2");
}

static void test_decode_mixtral_olmoe(void **state)
{
    (void)state;
    check_decode(PLENA_DEC_MIXTRAL, "decm");
    check_decode(PLENA_DEC_OLMOE, "deco");
}

/* MLA: the cached K/V rows of the prefill serve the decode steps */
static void test_decode_deepseek(void **state)
{
    (void)state;
    check_decode(PLENA_DEC_DEEPSEEK_V2, "decd2");
    check_decode(PLENA_DEC_DEEPSEEK_V3, "decd3");
}

/* ---- resume, overwrite, shards ---- */

/* Layers first and 2, prefill and two decode steps. */
static void full_run_threads(const char *dir, const char *out, uint32_t shard_i, uint32_t shard_n,
                             uint32_t threads, int64_t first)
{
    char in[600];
    plena_test_path(in, sizeof in, dir, "inputs.jsonl");
    struct plena_route_opts o;
    opts_init(&o, dir, in, out);
    o.phases = PLENA_ROUTE_BOTH;
    o.decode_steps = 2;
    const int64_t layers[2] = {first, 2};
    o.layers = layers;
    o.n_layers = 2;
    o.shard_i = shard_i, o.shard_n = shard_n;
    o.threads = threads;
    struct plena_err err;
    assert_int_equal(route(&o, &err), 0);
}

static void full_run(const char *dir, const char *out, uint32_t shard_i, uint32_t shard_n)
{
    full_run_threads(dir, out, shard_i, shard_n, 1, 0);
}

/* ---- identical rows for every thread count ---- */

static void test_threads(void **state)
{
    (void)state;
    for (int a = 0; a < PLENA_DEC_ARCH_COUNT; a++) {
        struct paths P;
        char name[32];
        snprintf(name, sizeof name, "thr%d", a);
        case_init(&P, name, (enum plena_dec_arch)a, NULL, NULL);
        char t4[600];
        plena_test_path(t4, sizeof t4, P.dir, "t4.jsonl");
        struct plena_dec_config c;
        plena_tiny_config((enum plena_dec_arch)a, &c);
        const int64_t first = c.dense[0]; /* DeepSeek-V3: layer 0 is dense */
        full_run_threads(P.dir, P.out, 0, 0, 1, first);
        full_run_threads(P.dir, t4, 0, 0, 4, first);
        size_t n1, n4;
        char *b1 = slurp(P.out, &n1), *b4 = slurp(t4, &n4);
        assert_int_equal(n1, n4);
        assert_memory_equal(b1, b4, n1);
        plena_free(b1), plena_free(b4);
    }
}

static void test_resume(void **state)
{
    (void)state;
    struct paths P;
    case_init(&P, "resume", PLENA_DEC_QWEN2_MOE, NULL, NULL);
    const char *dir = P.dir, *in = P.in, *out = P.out;
    char ref[600];
    plena_test_path(ref, sizeof ref, dir, "ref.jsonl");
    full_run(dir, ref, 0, 0);
    size_t len;
    char *want = slurp(ref, &len);
    /* 5 samples x (2 prefill + 2 steps x 2 layers) rows */
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += want[i] == '\n';
    assert_int_equal(lines, 30);
    /* killed mid-row 13: the torn line is cut, sample 2's missing rows appended */
    const char *p = want;
    for (int i = 0; i < 13; i++)
        p = strchr(p, '\n') + 1;
    size_t cut = (size_t)(p - want) + 100;
    plena_test_write_file(dir, "rows.jsonl", want, cut);
    struct plena_route_opts o;
    opts_init(&o, dir, in, out);
    o.phases = PLENA_ROUTE_BOTH;
    o.decode_steps = 2;
    const int64_t layers[2] = {0, 2};
    o.layers = layers;
    o.n_layers = 2;
    struct plena_err err;
    /* a non-empty output without --resume or --overwrite */
    assert_int_equal(route(&o, &err), PLENA_E_USAGE);
    assert_non_null(strstr(err.msg, "--resume"));
    o.resume = 1;
    struct plena_route_summary s;
    plena_err_clear(&err);
    assert_int_equal(plena_route_run(&o, &s, &err), 0);
    assert_int_equal(s.samples_already_complete, 2);
    assert_int_equal(s.samples_processed, 3);
    assert_int_equal(s.rows_written, 17);
    size_t got_len;
    char *got = slurp(out, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, want, len);
    plena_free(got);
    /* resuming a complete file writes nothing */
    plena_err_clear(&err);
    assert_int_equal(plena_route_run(&o, &s, &err), 0);
    assert_int_equal(s.rows_written, 0);
    assert_int_equal(s.samples_already_complete, 5);
    /* a row of another checkpoint is never mixed in */
    char other[512];
    tiny("resume-other", PLENA_DEC_QWEN3_MOE, NULL, other, sizeof other);
    o.checkpoint = other;
    assert_int_equal(route(&o, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "checkpoint_fingerprint"));
    o.checkpoint = dir;
    /* a duplicated key with different content is a determinism violation */
    const char *second = strchr(want, '\n') + 1;
    size_t n1 = (size_t)(second - want);
    char *bad = plena_malloc(len + n1 + 1);
    memcpy(bad, want, len);
    bad[len + n1] = 0;
    memcpy(bad + len, want, n1);
    char *at = strstr(bad + len, "\"gini\":");
    assert_non_null(at);
    at[7] = at[7] == '0' ? '1' : '0';
    plena_test_write_file(dir, "rows.jsonl", bad, len + n1);
    assert_int_equal(route(&o, &err), PLENA_E_FAILED);
    assert_non_null(strstr(err.msg, "determinism"));
    plena_free(bad);
    /* --overwrite replaces the file */
    o.resume = 0;
    o.overwrite = 1;
    assert_int_equal(route(&o, &err), 0);
    got = slurp(out, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, want, len);
    plena_free(got);
    plena_free(want);
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of files, sorted. */
static size_t sorted_lines(const char *const *paths, size_t n_paths, char **lines, size_t cap,
                           char **texts)
{
    size_t n = 0;
    for (size_t f = 0; f < n_paths; f++) {
        texts[f] = slurp(paths[f], NULL);
        assert_non_null(texts[f]);
        for (char *p = strtok(texts[f], "\n"); p; p = strtok(NULL, "\n")) {
            assert_true(n < cap);
            lines[n++] = p;
        }
    }
    qsort(lines, n, sizeof *lines, cmp_line);
    return n;
}

/* DIR/s0.jsonl and DIR/s1.jsonl (buffers of 600): shards 0/2 and 1/2 of
 * full_run_threads with layers first and 2. */
static void shard_runs(const char *dir, char *s0, char *s1, int64_t first)
{
    plena_test_path(s0, 600, dir, "s0.jsonl");
    plena_test_path(s1, 600, dir, "s1.jsonl");
    full_run_threads(dir, s0, 0, 2, 1, first);
    full_run_threads(dir, s1, 1, 2, 1, first);
}

/* The 30 lines of `all` are those of shards s0 and s1 together. */
static void expect_merged(const char *all, const char *s0, const char *s1)
{
    char *a[64], *b[64], *ta[1], *tb[2];
    const char *pa[1] = {all}, *pb[2] = {s0, s1};
    size_t na = sorted_lines(pa, 1, a, 64, ta), nb = sorted_lines(pb, 2, b, 64, tb);
    assert_int_equal(na, 30);
    assert_int_equal(nb, na);
    for (size_t i = 0; i < na; i++)
        assert_string_equal(a[i], b[i]);
    plena_free(ta[0]), plena_free(tb[0]), plena_free(tb[1]);
}

static void test_shards(void **state)
{
    (void)state;
    char dir[512], all[600], s0[600], s1[600];
    tiny("shards", PLENA_DEC_QWEN3_MOE, NULL, dir, sizeof dir);
    plena_test_path(all, sizeof all, dir, "all.jsonl");
    plena_test_path(s0, sizeof s0, dir, "s0.jsonl");
    plena_test_path(s1, sizeof s1, dir, "s1.jsonl");
    full_run(dir, all, 0, 0);
    full_run(dir, s0, 0, 2);
    full_run(dir, s1, 1, 2);
    /* cost order 17, 9, 5, 2, 1 tokens: shard 0 has tiny-4, tiny-2, tiny-0 */
    json_t *r = row_at(s0, 0);
    assert_string_equal(json_string_value(json_object_get(r, "sample_id")), "tiny-0");
    json_decref(r);
    expect_merged(all, s0, s1);
}

/* DeepSeek-V3 (MLA, its router, layer 0 dense): killed mid-row then resumed
 * gives the same bytes, and two shards hold the unsharded run's rows. */
static void test_resume_shards_deepseek(void **state)
{
    (void)state;
    struct paths P;
    case_init(&P, "resume-ds", PLENA_DEC_DEEPSEEK_V3, NULL, NULL);
    full_run_threads(P.dir, P.out, 0, 0, 1, 1);
    size_t len;
    char *want = slurp(P.out, &len), torn[600], s0[600], s1[600];
    const char *p = want;
    for (int i = 0; i < 13; i++)
        p = strchr(p, '\n') + 1;
    plena_test_write_file(P.dir, "torn.jsonl", want, (size_t)(p - want) + 100);
    plena_test_path(torn, sizeof torn, P.dir, "torn.jsonl");
    struct plena_route_opts o;
    opts_init(&o, P.dir, P.in, torn);
    o.phases = PLENA_ROUTE_BOTH;
    o.decode_steps = 2;
    const int64_t layers[2] = {1, 2};
    o.layers = layers;
    o.n_layers = 2;
    o.resume = 1;
    struct plena_err err;
    assert_int_equal(route(&o, &err), 0);
    size_t got_len;
    char *got = slurp(torn, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, want, len);
    plena_free(got), plena_free(want);
    shard_runs(P.dir, s0, s1, 1);
    expect_merged(P.out, s0, s1);
}

/* ---- interruption and the coverage check ---- */

static void test_interrupt_and_check(void **state)
{
    (void)state;
    struct paths P;
    case_init(&P, "intr", PLENA_DEC_QWEN3_MOE, NULL, NULL);
    char s0[600];
    plena_test_path(s0, sizeof s0, P.dir, "s0.jsonl");
    full_run(P.dir, s0, 0, 2);
    struct plena_route_opts o;
    opts_init(&o, P.dir, P.in, P.out);
    o.phases = PLENA_ROUTE_BOTH;
    o.decode_steps = 2;
    const int64_t layers[2] = {0, 2};
    o.layers = layers;
    o.n_layers = 2;
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    struct plena_err err;
    assert_int_equal(route(&o, &err), PLENA_E_INTERRUPTED);
    /* coverage of shard 0 alone: 3 of 5 samples, 12 keys missing */
    o.stop = NULL;
    o.check_only = 1;
    const char *from[1] = {s0};
    o.resume_from = from;
    o.n_resume_from = 1;
    struct plena_route_summary sm;
    plena_err_clear(&err);
    assert_int_equal(plena_route_run(&o, &sm, &err), 0);
    assert_int_equal(sm.expected_keys, 30);
    assert_int_equal(sm.missing_keys, 12);
    assert_string_equal(sm.missing_first[0], "tiny-1 prefill 0 null");
    assert_string_equal(sm.missing_first[11], "tiny-3 decode 2 2");
}

/* ---- the campaign step: shards in worker processes, coverage, traces ---- */

static void test_campaign_route(void **state)
{
    (void)state;
    struct paths P;
    case_init(&P, "camp", PLENA_DEC_QWEN3_MOE, NULL, NULL);
    char out[600], all[600];
    plena_test_path(out, sizeof out, P.dir, "camp");
    plena_test_path(all, sizeof all, P.dir, "all.jsonl");
    full_run(P.dir, all, 0, 0);
    struct plena_campaign_route_opts o = {.out = out, .shards = 2, .jobs = 2};
    opts_init(&o.route, P.dir, P.in, NULL);
    o.route.phases = PLENA_ROUTE_BOTH;
    o.route.decode_steps = 2;
    const int64_t layers[2] = {0, 2};
    o.route.layers = layers;
    o.route.n_layers = 2;
    o.route.benchmark = "b";
    struct plena_campaign_route_summary s;
    struct plena_err err = {0};
    assert_int_equal(plena_campaign_route(&o, &s, &err), 0);
    assert_int_equal(s.expected_keys, 30);
    assert_int_equal(s.missing_keys, 0);
    assert_int_equal(s.traces, 30);
    char shard1[700];
    plena_test_path(shard1, sizeof shard1, out, "routing/b.shard-1-of-2.jsonl");
    size_t len;
    char *want = slurp(shard1, &len);
    assert_non_null(want);
    assert_true(plena_test_file_contains(out, "routing/coverage.json", "\"missing_keys\": 0"));
    assert_true(plena_test_file_contains(out, "traces/camp_b_tiny-4_l2_decode_d2.json",
                                         "\"format\": \"routing_rows\""));
    /* a worker killed mid-row: the rerun resumes to the same bytes */
    plena_test_write_file(out, "routing/b.shard-1-of-2.jsonl", want, len / 2);
    assert_int_equal(plena_campaign_route(&o, &s, &err), 0);
    size_t len2;
    char *got = slurp(shard1, &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(got, want, len);
    plena_free(got), plena_free(want);
}

/* ---- failures and refusals ---- */

static void test_failures(void **state)
{
    (void)state;
    struct paths P;
    case_init(&P, "fail", PLENA_DEC_QWEN3_MOE, NULL, NULL);
    char *dir = P.dir, in[600], *out = P.out, log[600];
    plena_test_write_text(dir, "bad.jsonl",
                          "{\"sample_id\":\"a\",\"input_ids\":[1,2]}\n"
                          "{\"sample_id\":\"b\",\"input_ids\":[1,128]}\n"
                          "{\"sample_id\":\"c\",\"input_ids\":[3]}\n");
    plena_test_path(in, sizeof in, dir, "bad.jsonl");
    plena_test_path(log, sizeof log, dir, "failures.jsonl");
    struct plena_route_opts o;
    opts_init(&o, dir, in, out);
    o.failure_log = log;
    struct plena_route_summary s;
    struct plena_err err = {0};
    assert_int_equal(plena_route_run(&o, &s, &err), PLENA_E_FAILED);
    assert_string_equal(err.msg, "token id 128 is not in [0, 128)");
    assert_int_equal(s.samples_processed, 1);
    assert_true(plena_test_file_contains(dir, "failures.jsonl", "\"sample_id\":\"b\""));
    assert_true(plena_test_file_contains(dir, "failures.jsonl", "PLENA_E_INPUT"));
    /* --keep-going: c is processed too, the exit is still FAILED */
    o.keep_going = 1;
    o.overwrite = 1;
    plena_err_clear(&err);
    assert_int_equal(plena_route_run(&o, &s, &err), PLENA_E_FAILED);
    assert_int_equal(s.samples_processed, 2);
    assert_int_equal(s.samples_failed, 1);
    /* a dense layer and an out-of-range layer are usage errors */
    const int64_t dense[1] = {1}, far[1] = {-4};
    o.layers = dense;
    o.n_layers = 1;
    assert_int_equal(route(&o, &err), PLENA_E_USAGE);
    assert_non_null(strstr(err.msg, "dense layer"));
    o.layers = far;
    assert_int_equal(route(&o, &err), PLENA_E_USAGE);
    assert_non_null(strstr(err.msg, "out of range"));
}

struct cfg_case {
    const char *from, *to, *msg;
};

static void test_config_refusals(void **state)
{
    (void)state;
    struct paths P;
    struct plena_route_opts o;
    case_init(&P, "cfg", PLENA_DEC_QWEN3_MOE, NULL, &o);
    const char *dir = P.dir;
    char *text = plena_test_read_file(dir, "config.json", NULL);
    assert_non_null(text);
    static const struct cfg_case cases[] = {
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\"}", "'rope_scaling'"},
        {"\"use_sliding_window\": false", "\"use_sliding_window\": true", "'use_sliding_window'"},
        {"\"model_type\": \"qwen3_moe\"", "\"model_type\": \"llama\"",
         "model_type 'llama' is not a supported architecture"},
        {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "'hidden_act'"},
        {"\"torch_dtype\"", "\"clip_qkv\": 8, \"torch_dtype\"", "'clip_qkv' is not modelled"},
        {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "not a multiple"},
        {"\"hidden_size\": 64", "\"hidden_size\": \"64\"", "'hidden_size' must be an integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = strstr(text, cases[i].from);
        if (!p) fail_msg("case %zu: '%s' not in config.json", i, cases[i].from);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - text), text, cases[i].to,
                 p + strlen(cases[i].from));
        struct plena_dec_config c;
        struct plena_err err = {0};
        int rc = plena_dec_config_parse(buf, strlen(buf), "config.json", &c, &err);
        if (rc != PLENA_E_INPUT || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: rc %d '%s', expected '%s'", i, rc, err.msg, cases[i].msg);
    }
    /* inert keys are accepted: sliding_window with use_sliding_window false */
    char *p = strstr(text, "\"sliding_window\": null");
    assert_non_null(p);
    char buf[4096];
    snprintf(buf, sizeof buf, "%.*s\"sliding_window\": 4096%s", (int)(p - text), text,
             p + strlen("\"sliding_window\": null"));
    struct plena_dec_config c;
    struct plena_err err = {0};
    assert_int_equal(plena_dec_config_parse(buf, strlen(buf), "config.json", &c, &err), 0);
    /* a config whose sizes do not match the tensors */
    p = strstr(text, "\"moe_intermediate_size\": 32");
    assert_non_null(p);
    snprintf(buf, sizeof buf, "%.*s\"moe_intermediate_size\": 48%s", (int)(p - text), text,
             p + strlen("\"moe_intermediate_size\": 32"));
    plena_test_write_text(dir, "config.json", buf);
    assert_int_equal(route(&o, &err), PLENA_E_INPUT);
    assert_string_equal(err.msg, "tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' has "
                                 "shape [32, 64], config.json implies [48, 64]");
    plena_free(text);
}

/* ---- trace build: rows -> validated traces, shards merged, cross-checks ---- */

static void test_build(void **state)
{
    (void)state;
    struct paths P;
    case_init(&P, "build", PLENA_DEC_QWEN2_MOE, NULL, NULL);
    char s0[600], s1[600], cfg[600];
    plena_test_path(cfg, sizeof cfg, P.dir, "config.json");
    shard_runs(P.dir, s0, s1, 0);
    struct plena_moe_model m;
    struct plena_err err = {0};
    assert_int_equal(plena_model_resolve(cfg, &m, &err), 0);
    /* s0 twice: identical keys merge */
    const char *files[3] = {s0, s1, s0};
    struct plena_rows_build_opts o = {
        .rows = files, .n_rows = 3, .mlen = 64, .blen = 4, .created_by = "test"};
    struct plena_trace_docs docs = {0};
    assert_int_equal(plena_rows_build(&o, &m, &docs, &err), 0);
    assert_int_equal(docs.n, 30);
    int found = 0;
    for (size_t i = 0; i < docs.n; i++)
        found += !strcmp(docs.v[i].trace_id, "build_tiny_tiny-3_l2_decode_d2");
    assert_int_equal(found, 1);
    plena_trace_docs_free(&docs);
    /* filters */
    const int64_t l2[1] = {2};
    o.layers = l2, o.n_layers = 1, o.phases = PLENA_ROUTE_PREFILL;
    assert_int_equal(plena_rows_build(&o, &m, &docs, &err), 0);
    assert_int_equal(docs.n, 5);
    plena_trace_docs_free(&docs);
    /* a model with other experts is refused naming file:line */
    struct plena_moe_model m4 = m;
    m4.num_experts = 16;
    assert_int_equal(plena_rows_build(&o, &m4, &docs, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.where, "s0.jsonl:"));
    assert_non_null(strstr(err.msg, "the model has 16 experts"));
    plena_trace_docs_free(&docs);
    /* a conflicting copy of a key */
    size_t len;
    char *t = slurp(s1, &len);
    char *at = strstr(t, "\"gini\":");
    at[7] = at[7] == '0' ? '1' : '0';
    plena_test_write_file(P.dir, "s1bad.jsonl", t, len);
    plena_free(t);
    char bad[600];
    plena_test_path(bad, sizeof bad, P.dir, "s1bad.jsonl");
    const char *files2[2] = {s1, bad};
    o.rows = files2, o.n_rows = 2;
    o.layers = NULL, o.n_layers = 0, o.phases = 0;
    plena_err_clear(&err);
    assert_int_equal(plena_rows_build(&o, &m, &docs, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "same key with different rows"));
    plena_trace_docs_free(&docs);
}

/* DeepSeek rows -> traces with the config's router: every trace validates
 * in strict mode (its weight_source names and model.router's sum rule), and
 * two of them replay when the CLI is at hand. */
static void test_build_deepseek(void **state)
{
    (void)state;
    for (int a = PLENA_DEC_DEEPSEEK_V2; a <= PLENA_DEC_DEEPSEEK_V3; a++) {
        const int v3 = a == PLENA_DEC_DEEPSEEK_V3;
        struct paths P;
        char cfg[600], name[32];
        snprintf(name, sizeof name, "bds%d", a);
        case_init(&P, name, (enum plena_dec_arch)a, NULL, NULL);
        plena_test_path(cfg, sizeof cfg, P.dir, "config.json");
        full_run_threads(P.dir, P.out, 0, 0, 1, v3);
        struct plena_moe_model m;
        struct plena_err err = {0};
        assert_int_equal(plena_model_resolve(cfg, &m, &err), 0);
        const char *files[1] = {P.out};
        struct plena_rows_build_opts o = {
            .rows = files, .n_rows = 1, .mlen = 64, .blen = 4, .created_by = "test"};
        struct plena_trace_docs docs = {0};
        if (plena_rows_build(&o, &m, &docs, &err)) fail_msg("%s: %s", err.where, err.msg);
        assert_int_equal(docs.n, 30);
        struct plena_buf set;
        plena_buf_init(&set);
        assert_int_equal(plena_trace_docs_write_set(&docs, &set), 0);
        struct plena_trace_validate_options vo = {.strict = 1};
        struct plena_trace_set_report rep = {0};
        assert_int_equal(plena_trace_validate_set_bytes(set.data, set.len, &vo, &rep), 0);
        assert_true(rep.valid);
        assert_non_null(strstr(set.data, v3 ? "\"weight_source\":\"true_router_sigmoid_weights\""
                                            : "\"weight_source\":"
                                              "\"true_router_scaled_softmax_weights\""));
        plena_trace_set_report_free(&rep);
        /* the first two traces (a prefill of one token, one of two) replay */
        const char *two = strchr(strchr(set.data, '\n') + 1, '\n') + 1;
        plena_test_write_file(P.dir, "set.jsonl", set.data, (size_t)(two - set.data));
        plena_buf_free(&set);
        plena_trace_docs_free(&docs);
        const char *bin = plena_test_bin();
        if (bin)
            assert_int_equal(plena_test_sh("'%s' replay '%s/set.jsonl' --out '%s/rep' >/dev/null",
                                           bin, P.dir, P.dir),
                             0);
    }
}

/* Keys refused only by some architectures (msg NULL: the edit is accepted) */
static void refuse_in(enum plena_dec_arch arch, const char *from, const char *to, const char *msg)
{
    struct plena_dec_config want;
    plena_tiny_config(arch, &want);
    char name[64];
    snprintf(name, sizeof name, "ref-%s", plena_dec_arch_tiny_variant(arch));
    struct paths P;
    case_init(&P, name, arch, NULL, NULL);
    size_t len;
    char *text = plena_test_read_file(P.dir, "config.json", &len);
    struct plena_dec_config c;
    struct plena_err err = {0};
    assert_int_equal(plena_dec_config_parse(text, len, "config.json", &c, &err), 0);
    assert_int_equal(c.arch, arch);
    assert_int_equal(c.n_experts, want.n_experts);
    assert_int_equal(c.moe_inter, want.moe_inter);
    assert_int_equal(c.norm_topk, want.norm_topk);
    assert_int_equal(c.qk_norm, want.qk_norm);
    char *p = strstr(text, from);
    assert_non_null(p);
    char buf[4096];
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    const int rc = plena_dec_config_parse(buf, strlen(buf), "config.json", &c, &err);
    if (!msg && rc) fail_msg("'%s' refused: %s", to, err.msg);
    if (msg && rc != PLENA_E_INPUT) fail_msg("'%s' accepted", to);
    if (msg && !strstr(err.msg, msg)) fail_msg("'%s' does not contain '%s'", err.msg, msg);
    plena_free(text);
}

static void test_arch_refusals(void **state)
{
    (void)state;
    refuse_in(PLENA_DEC_MIXTRAL, "\"sliding_window\": null", "\"sliding_window\": 4096",
              "'sliding_window' is set");
    refuse_in(PLENA_DEC_MIXTRAL, "\"torch_dtype\"", "\"mlp_only_layers\": [], \"torch_dtype\"",
              "'mlp_only_layers' is not modelled by plena's forward pass for mixtral");
    refuse_in(PLENA_DEC_OLMOE, "\"clip_qkv\": null", "\"clip_qkv\": 8", "'clip_qkv' is set");
    refuse_in(PLENA_DEC_QWEN2_MOE, "\"torch_dtype\"", "\"attention_bias\": true, \"torch_dtype\"",
              "'attention_bias' is not part of qwen2_moe");
    const enum plena_dec_arch v2 = PLENA_DEC_DEEPSEEK_V2, v3 = PLENA_DEC_DEEPSEEK_V3;
    refuse_in(v3, "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2", "'moe_layer_freq' must be 1");
    /* no silent 0 shared experts: the key is required (the tensors would go unused) */
    refuse_in(v3, "\"n_shared_experts\": 1", "\"ep_size\": 1", "'n_shared_experts'");
    refuse_in(v3, "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\"}",
              "'rope_scaling' is set");
    refuse_in(v2, "\"attention_bias\": false", "\"attention_bias\": true",
              "'attention_bias' must be false");
    refuse_in(v3, "\"torch_dtype\"", "\"quantization_config\": {}, \"torch_dtype\"",
              "'quantization_config' is not modelled by plena's forward pass for deepseek_v3");
    refuse_in(v3, "\"topk_method\": \"noaux_tc\"", "\"topk_method\": \"greedy\"", "noaux_tc");
    refuse_in(v2, "\"n_group\": 4", "\"n_group\": 3", "n_group 3 does not divide");
    /* present but inert: the MTP layers, the expert-parallel size, the
     * remote-code map, no q_lora (V2-Lite) */
    refuse_in(v3, "\"torch_dtype\"",
              "\"num_nextn_predict_layers\": 1, \"ep_size\": 1, \"auto_map\": {}, "
              "\"rope_interleave\": true, \"qk_head_dim\": 24, \"head_dim\": 8, \"torch_dtype\"",
              NULL);
    refuse_in(v3, "\"torch_dtype\"", "\"qk_head_dim\": 16, \"torch_dtype\"",
              "'qk_head_dim' (16) must equal");
    refuse_in(v2, "\"torch_dtype\"", "\"rope_interleave\": false, \"torch_dtype\"",
              "'rope_interleave' must be true");
}

/* ---- the CLI: each bad input of the spec, its message and exit code ---- */

static void test_cli_exit_codes(void **state)
{
    (void)state;
    const char *bin = plena_test_bin();
    if (!bin) skip();
    struct paths P;
    case_init(&P, "cli", PLENA_DEC_QWEN3_MOE, NULL, NULL);
    const char *d = P.dir;
    plena_test_write_text(d, "bad.jsonl", "{\"sample_id\":\"a\",\"input_ids\":[1,999]}\n");
    /* unknown token id: 1, logged */
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s/bad.jsonl' "
                                   "--out '%s/r1.jsonl' --failure-log '%s/f.jsonl' 2>'%s/e1'",
                                   bin, d, d, d, d, d),
                     1);
    assert_true(plena_test_file_contains(d, "e1", "token id 999 is not in [0, 128)"));
    /* the good run, then a non-empty output without --resume/--overwrite: 2 */
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s' --out "
                                   "'%s/r.jsonl' 2>/dev/null",
                                   bin, d, P.in, d),
                     0);
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s' --out "
                                   "'%s/r.jsonl' 2>'%s/e2'",
                                   bin, d, P.in, d, d),
                     2);
    assert_true(plena_test_file_contains(d, "e2", "--resume"));
    /* mixed fingerprints on resume: 3 */
    char other[512];
    tiny("cli-other", PLENA_DEC_MIXTRAL, NULL, other, sizeof other);
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s' --out "
                                   "'%s/r.jsonl' --resume 2>'%s/e3'",
                                   bin, other, P.in, d, d),
                     3);
    assert_true(plena_test_file_contains(d, "e3", "checkpoint_fingerprint"));
    /* unknown architecture and a mismatched tensor shape: 3 */
    char *cfg = plena_test_read_file(d, "config.json", NULL);
    plena_test_write_replaced(d, "config.json", cfg, "\"qwen3_moe\"", "\"gpt2\"");
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s' --out "
                                   "'%s/r4.jsonl' 2>'%s/e4'",
                                   bin, d, P.in, d, d),
                     3);
    assert_true(plena_test_file_contains(d, "e4", "model_type 'gpt2' is not a supported"));
    plena_test_write_replaced(d, "config.json", cfg, "\"vocab_size\": 128", "\"vocab_size\": 100");
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s' --out "
                                   "'%s/r5.jsonl' 2>'%s/e5'",
                                   bin, d, P.in, d, d),
                     3);
    assert_true(plena_test_file_contains(d, "e5",
                                         "has shape [128, 64], config.json implies "
                                         "[100, 64]"));
    /* a bad --layers list: 2 */
    assert_int_equal(plena_test_sh("'%s' trace route --checkpoint '%s' --inputs '%s' --out "
                                   "'%s/r6.jsonl' --layers 1-2 2>/dev/null",
                                   bin, other, P.in, d),
                     2);
    plena_free(cfg);
}

static void test_layer_list(void **state)
{
    (void)state;
    int64_t *v;
    size_t n;
    assert_int_equal(plena_route_parse_layers("0,2..4,-1,-3..-2", &v, &n), 0);
    const int64_t want[] = {0, 2, 3, 4, -1, -3, -2};
    assert_int_equal(n, 7);
    assert_memory_equal(v, want, sizeof want);
    plena_free(v);
    const char *bad[] = {"", "1,", "a", "3..1", "1-2", "1..", "..2", "1,,2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!plena_route_parse_layers(bad[i], &v, &n)) fail_msg("'%s' accepted", bad[i]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hand_computed),
    cmocka_unit_test(test_hand_computed_mla),
    cmocka_unit_test(test_tie),
    cmocka_unit_test(test_decode_qwen3),
    cmocka_unit_test(test_decode_qwen2),
    cmocka_unit_test(test_resume),
    cmocka_unit_test(test_shards),
    cmocka_unit_test(test_resume_shards_deepseek),
    cmocka_unit_test(test_failures),
    cmocka_unit_test(test_config_refusals),
    cmocka_unit_test(test_layer_list),
    cmocka_unit_test(test_cli_exit_codes),
    cmocka_unit_test(test_build),
    cmocka_unit_test(test_build_deepseek),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_decode_mixtral_olmoe),
    cmocka_unit_test(test_decode_deepseek),
    cmocka_unit_test(test_arch_refusals),
    cmocka_unit_test(test_interrupt_and_check),
    cmocka_unit_test(test_campaign_route),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), plena_test_tmp_setup,
                           plena_test_tmp_teardown);
}
