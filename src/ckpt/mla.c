/* Multi-head latent attention of DeepSeek-V2 / V3 (docs/traces.md "What is
 * computed"), in the forward pass's rules: f32, sums in increasing index
 * order, no FMA, det_exp / det_sincos only.
 *
 *   q    = q_proj x, or q_b(RMSNorm(q_a x, q_a_layernorm))  [heads][nope + rope]
 *   kv_a = kv_a_proj_with_mqa x = [c (kv_lora), k_pe (rope)]
 *   kv   = kv_b(RMSNorm(c, kv_a_layernorm))                [heads][nope + v]
 *   k_h  = [k_nope_h, RoPE(k_pe)]  (k_pe shared by every head)
 *   q_h  = [q_nope_h, RoPE(q_pe_h)]
 *   out_h = softmax(q_h . k_h / sqrt(nope + rope)) . v_h
 *
 * RoPE rotates interleaved pairs (x_2i, x_2i+1) by pos x inv_freq_i, which
 * is what the published modelling code computes (it de-interleaves, then
 * rotates halves). The cache holds each position's expanded K row [heads x
 * nope, rope] and V row [heads x v], so decode reads what the prefill
 * stored: a position's K/V depend on that position's input only. */
#include <math.h>
#include <string.h>

#include "ckpt/decoder.h"

/* The RMSNorm epsilon of q_a_layernorm and kv_a_layernorm: the modelling
 * code constructs them with its RMSNorm's default, not rms_norm_eps. */
#define MLA_NORM_EPS 1e-6f

size_t plena_mla_scratch(const struct plena_dec_config *c, uint32_t tokens)
{
    const size_t per = (size_t)c->q_lora + (c->kv_lora + c->head_dim) + c->kv_lora +
                       (size_t)c->heads * (c->nope + c->v_dim) + plena_dec_qdim(c);
    return per * tokens;
}

/* Interleaved RoPE of one rope-dim vector with this position's cos/sin. */
static void rope_pairs(float *x, uint32_t R, const float *cs, const float *sn)
{
    for (uint32_t i = 0; i < R / 2; i++) {
        const float a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * cs[i] - b * sn[i];
        x[2 * i + 1] = b * cs[i] + a * sn[i];
    }
}

/* Attention of one token's q (heads x (nope + rope)) at position pos over
 * the cached rows 0..pos of layer l, into out (heads x v). */
static void attend(const struct plena_dec_state *s, uint32_t l, uint32_t pos, const float *q,
                   float *out, float *scores)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const uint32_t NH = c->heads, N = c->nope, R = c->head_dim, V = c->v_dim;
    const uint32_t KD = plena_dec_kdim(c), VD = plena_dec_vdim(c);
    const float scale = 1.0f / sqrtf((float)(N + R));
    const float *kc = s->kcache + (size_t)l * s->max_pos * KD,
                *vc = s->vcache + (size_t)l * s->max_pos * VD;
    for (uint32_t h = 0; h < NH; h++) {
        const float *qh = q + (size_t)h * (N + R);
        for (uint32_t j = 0; j <= pos; j++) {
            const float *kn = kc + (size_t)j * KD + (size_t)h * N,
                        *kp = kc + (size_t)j * KD + NH * N;
            float d = 0; /* one sum over the concatenation [nope, rope] */
            for (uint32_t i = 0; i < N; i++)
                d += qh[i] * kn[i];
            for (uint32_t i = 0; i < R; i++)
                d += qh[N + i] * kp[i];
            scores[j] = d * scale;
        }
        plena_dec_softmax_mix(scores, pos + 1, vc + (size_t)h * V, VD, V, out + (size_t)h * V);
    }
}

/* A low-rank projection of nb tokens: A = Wa X (rows of na), Nm = RMSNorm of
 * each row's first n with w (may be A itself when n = na), Y = Wb Nm (rows
 * of ny); each stored. */
static void lora(const struct plena_dec_state *s, uint32_t nb, const float *X,
                 const struct plena_mat *Wa, uint32_t na, const float *w, uint32_t n, float *A,
                 float *Nm, const struct plena_mat *Wb, uint32_t ny, float *Y)
{
    const uint32_t H = s->w->cfg.hidden;
    plena_dec_mm(s, Wa, X, H, NULL, nb, A, na);
    plena_dec_store(s, A, (size_t)nb * na);
    for (uint32_t t = 0; t < nb; t++)
        plena_dec_rmsnorm(A + (size_t)t * na, w, n, MLA_NORM_EPS, Nm + (size_t)t * n);
    plena_dec_store(s, Nm, (size_t)nb * n);
    plena_dec_mm(s, Wb, Nm, n, NULL, nb, Y, ny);
    plena_dec_store(s, Y, (size_t)nb * ny);
}

void plena_mla_attention(struct plena_dec_state *s, uint32_t l, uint32_t nb, const float *X,
                         float *att, const float *cs, const float *sn)
{
    const struct plena_dec_config *c = &s->w->cfg;
    const struct plena_dec_layer *y = &s->w->layers[l];
    const uint32_t H = c->hidden, NH = c->heads, N = c->nope, R = c->head_dim, V = c->v_dim;
    const uint32_t QL = c->q_lora, CL = c->kv_lora, QH = N + R, QD = plena_dec_qdim(c), KA = CL + R,
                   KV = NH * (N + V), KD = plena_dec_kdim(c), VD = plena_dec_vdim(c);
    float *qa = s->mla, *kva = qa + (size_t)nb * QL, *ckv = kva + (size_t)nb * KA,
          *kv = ckv + (size_t)nb * CL, *q = kv + (size_t)nb * KV;
    if (QL)
        lora(s, nb, X, &y->q_a, QL, y->q_a_norm, QL, qa, qa, &y->q_b, QD, q);
    else
        plena_dec_mm(s, &y->q, X, H, NULL, nb, q, QD);
    plena_dec_store(s, q, (size_t)nb * QD);
    lora(s, nb, X, &y->kv_a, KA, y->kv_a_norm, CL, kva, ckv, &y->kv_b, KV, kv);
    for (uint32_t t = 0; t < nb; t++) {
        const size_t at = (size_t)l * s->max_pos + s->pos + t;
        float *k = s->kcache + at * KD, *v = s->vcache + at * VD, *qt = q + (size_t)t * QD;
        const float *kvt = kv + (size_t)t * KV, *ct = cs + (size_t)t * (R / 2),
                    *st = sn + (size_t)t * (R / 2);
        for (uint32_t h = 0; h < NH; h++) {
            memcpy(k + (size_t)h * N, kvt + (size_t)h * (N + V), N * sizeof *k);
            memcpy(v + (size_t)h * V, kvt + (size_t)h * (N + V) + N, V * sizeof *v);
            rope_pairs(qt + (size_t)h * QH + N, R, ct, st);
        }
        memcpy(k + (size_t)NH * N, kva + (size_t)t * KA + CL, R * sizeof *k);
        rope_pairs(k + (size_t)NH * N, R, ct, st);
        plena_dec_store(s, qt, QD);
        plena_dec_store(s, k + (size_t)NH * N, R);
    }
    for (uint32_t t = 0; t < nb; t++)
        attend(s, l, s->pos + t, q + (size_t)t * QD, att + (size_t)t * plena_dec_attdim(c),
               s->scores);
    plena_dec_store(s, att, (size_t)nb * plena_dec_attdim(c));
}
