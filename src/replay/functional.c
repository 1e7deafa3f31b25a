/* Functional gate of docs/replay.md "Gates": every element of the
 * T x H region bit-identical (+0 = -0, any NaN fails, no match-rate
 * threshold: upstream defect 7), the float64 bound, a non-zero reference, and
 * an unsaturated sigmoid gate (defect 8). zero_input_smoke never counts as
 * numerical (defect 6). Routing integrity and the weight chain (defects 9,
 * 10) live here too. */
#include "replay/functional.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/sha256.h"
#include "num/num.h"
#include "replay/result.h"

float plena_replay_route_weight_chain(double w, uint16_t *fp16_bits)
{
    float f32 = (float)w;
    uint16_t h = plena_num_fp16_from_f32(f32);
    if (fp16_bits) *fp16_bits = h;
    return plena_num_round_bf16(plena_num_fp16_to_f32(h));
}

double plena_replay_route_weight_max_error(const double *w, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)plena_replay_route_weight_chain(w[i], NULL) - w[i]);
        if (e > m) m = e;
    }
    return m;
}

int plena_replay_routing_integrity(const uint32_t *image_ids, const int64_t *trace_ids, size_t n,
                                   char *detail, size_t detail_n)
{
    for (size_t i = 0; i < n; i++)
        if (trace_ids[i] < 0 || (int64_t)image_ids[i] != trace_ids[i]) {
            snprintf(detail, detail_n,
                     "INT SRAM id at pair %zu is %u but the trace routes expert %lld there", i,
                     image_ids[i], (long long)trace_ids[i]);
            return 0;
        }
    snprintf(detail, detail_n, "%zu ids equal the trace in (token, slot) order", n);
    return 1;
}

static int has_id(const uint32_t *v, uint32_t k, uint32_t id)
{
    for (uint32_t j = 0; j < k; j++)
        if (v[j] == id) return 1;
    return 0;
}

int plena_replay_routing_integrity_sets(const uint32_t *dev_ids, const uint32_t *trace_ids,
                                        uint32_t T, uint32_t k, uint32_t t_base, char *detail,
                                        size_t detail_n)
{
    for (uint32_t t = 0; t < T; t++) {
        const uint32_t *d = dev_ids + (size_t)t * k, *r = trace_ids + (size_t)t * k;
        for (uint32_t j = 0; j < k; j++)
            if (!has_id(r, k, d[j])) {
                uint32_t miss = 0;
                for (uint32_t q = 0; q < k; q++)
                    if (!has_id(d, k, r[q])) {
                        miss = r[q];
                        break;
                    }
                snprintf(detail, detail_n,
                         "token %u: the device selected expert %u, which the trace does not "
                         "route there (the trace's expert %u was not selected)",
                         t_base + t, d[j], miss);
                return 0;
            }
    }
    snprintf(detail, detail_n,
             "the device selected the trace's experts for all %u tokens (as sets of %u)", T, k);
    return 1;
}

void plena_replay_bf16_sha256(const uint16_t *v, size_t n, char hex[65])
{
    struct plena_sha256 s;
    plena_sha256_init(&s);
    for (size_t i = 0; i < n; i++) {
        uint8_t b[2] = {(uint8_t)(v[i] & 0xff), (uint8_t)(v[i] >> 8)};
        plena_sha256_update(&s, b, 2);
    }
    uint8_t d[32];
    plena_sha256_final(&s, d);
    plena_sha256_to_hex(d, hex);
}

static int is_zero_bits(uint16_t b)
{
    return (b & 0x7fff) == 0;
}

json_t *plena_replay_functional_compare(const struct plena_replay_cmp_in *in, int *passed)
{
    size_t n = in->T * in->H;
    uint16_t *refb = plena_calloc(n ? n : 1, sizeof *refb);
    if (!refb) return NULL;
    size_t mismatches = 0, nan = 0, inf = 0, first_bad = (size_t)-1;
    double max_abs = 0, se = 0, ae = 0, ref_sq = 0;
    int ref_nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        refb[i] = plena_num_bf16_from_f32(in->ref[i]);
        uint16_t g = in->out[i];
        float gf = plena_num_bf16_to_f32(g);
        if (isnan(gf)) nan++;
        if (isinf(gf)) inf++;
        int same = g == refb[i] || (is_zero_bits(g) && is_zero_bits(refb[i]));
        if (isnan(gf)) same = 0; /* a NaN never matches, not even a NaN */
        if (!same) {
            mismatches++;
            if (first_bad == (size_t)-1) first_bad = i;
        }
        if (!is_zero_bits(refb[i])) ref_nonzero = 1;
        double r = (double)plena_num_bf16_to_f32(refb[i]);
        if (isfinite(gf) && isfinite(r)) {
            double d = fabs((double)gf - r);
            if (d > max_abs) max_abs = d;
            se += d * d;
            ae += d;
            ref_sq += r * r;
        }
    }
    char out_hex[65], ref_hex[65];
    plena_replay_bf16_sha256(in->out, n, out_hex);
    plena_replay_bf16_sha256(refb, n, ref_hex);
    plena_free(refb);

    struct plena_replay_checks ck;
    memset(&ck, 0, sizeof ck);
    if (mismatches)
        plena_replay_check_set(&ck, "bit_exact", 0,
                               "%zu of %zu elements differ from the reference (first at row %zu "
                               "column %zu)",
                               mismatches, n, first_bad / (in->H ? in->H : 1),
                               first_bad % (in->H ? in->H : 1));
    else
        plena_replay_check_set(&ck, "bit_exact", 1, "all %zu elements bit-identical", n);
    plena_replay_check_set(&ck, "finite", nan == 0 && inf == 0, "%zu NaN, %zu Inf", nan, inf);
    double gmin = 0, gmax = 0;
    int saturated = 0;
    if (in->has_sigmoid_gate && in->gate) {
        gmin = gmax = in->gate[0];
        for (size_t t = 0; t < in->T; t++) {
            double g = in->gate[t];
            if (g < gmin) gmin = g;
            if (g > gmax) gmax = g;
            if (g == 0.0 || g == 1.0 || isnan(g)) saturated = 1;
        }
    }
    if (!in->smoke) {
        /* Both float64 checks of docs/design.md: the MoE output before the
         * residual add-back, and the whole output (catches add-back bugs). */
        int ok64 = in->ref64 && in->rel_rms_f64 >= 0 && in->rel_rms_f64 <= in->rel_rms_bound &&
                   in->rel_rms_f64_full >= 0 && in->rel_rms_f64_full <= in->rel_rms_bound &&
                   in->rel_rms_f64_norm >= 0 && in->rel_rms_f64_norm <= in->rel_rms_bound;
        plena_replay_check_set(
            &ck, "f64_bound", ok64,
            "rel_rms_f64 %.6g (MoE output), %.6g (RMSNorm), %.6g (full output), bound %g",
            in->rel_rms_f64, in->rel_rms_f64_norm, in->rel_rms_f64_full, in->rel_rms_bound);
        plena_replay_check_set(&ck, "reference_nonzero", ref_nonzero,
                               ref_nonzero ? "reference output has non-zero elements"
                                           : "reference output is all zero");
        if (in->has_sigmoid_gate)
            plena_replay_check_set(&ck, "gate_saturated", !saturated,
                                   saturated ? "a sigmoid gate value is exactly 0 or 1"
                                             : "every gate value strictly inside (0, 1)");
    }
    int ok = 1;
    for (size_t i = 0; i < ck.n; i++)
        ok &= ck.v[i].passed;
    *passed = ok;

    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(in->smoke ? "zero_input_smoke" : "reference"));
    json_object_set_new(o, "numerical", json_boolean(ok && !in->smoke));
    json_object_set_new(o, "elements", json_integer((json_int_t)n));
    json_object_set_new(o, "mismatches", json_integer((json_int_t)mismatches));
    json_object_set_new(o, "max_abs_error", json_real(max_abs));
    json_object_set_new(o, "mse", json_real(n ? se / (double)n : 0.0));
    json_object_set_new(o, "mae", json_real(n ? ae / (double)n : 0.0));
    json_object_set_new(o, "rel_rms", ref_sq > 0 ? json_real(sqrt(se / ref_sq)) : json_null());
    json_object_set_new(o, "rel_rms_f64",
                        in->ref64 && in->rel_rms_f64 >= 0 ? json_real(in->rel_rms_f64)
                                                          : json_null());
    json_object_set_new(o, "rel_rms_f64_full",
                        in->ref64 && in->rel_rms_f64_full >= 0 ? json_real(in->rel_rms_f64_full)
                                                               : json_null());
    json_object_set_new(o, "rel_rms_f64_norm",
                        in->ref64 && in->rel_rms_f64_norm >= 0 ? json_real(in->rel_rms_f64_norm)
                                                               : json_null());
    json_object_set_new(o, "rel_rms_f64_bound", json_real(in->rel_rms_bound));
    json_object_set_new(o, "nan_count", json_integer((json_int_t)nan));
    json_object_set_new(o, "inf_count", json_integer((json_int_t)inf));
    json_object_set_new(o, "output_sha256", json_string(out_hex));
    json_object_set_new(o, "reference_sha256", json_string(ref_hex));
    json_object_set_new(o, "gate_min", in->has_sigmoid_gate ? json_real(gmin) : json_null());
    json_object_set_new(o, "gate_max", in->has_sigmoid_gate ? json_real(gmax) : json_null());
    json_object_set_new(o, "gate_saturated",
                        in->has_sigmoid_gate ? json_boolean(saturated) : json_null());
    json_object_set_new(o, "route_weight_max_conversion_error",
                        json_real(in->route_weight_max_conversion_error));
    json_object_set_new(o, "checks", plena_replay_checks_json(&ck));
    json_object_set_new(o, "passed", json_boolean(ok));
    return o;
}
