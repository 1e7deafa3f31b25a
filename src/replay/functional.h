/* Functional gate pieces of a replay (docs/replay.md "Pipeline" and "Gates")
 * as pure functions over arrays: the bit-exact output comparison with its
 * metrics, the zero_input_smoke rules, the sigmoid-gate saturation check,
 * routing integrity (INT SRAM ids equal the trace) and the route-weight
 * conversion chain. No files, no emulator: the pipeline reads dumps and
 * images and hands the values in, so every rule is testable on its own. */
#ifndef PLENA_REPLAY_FUNCTIONAL_H
#define PLENA_REPLAY_FUNCTIONAL_H

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Route weight through the chain trace number -> binary32 -> IEEE fp16 (RNE,
 * the fp_sram.bin image) -> BF16 (the FP SRAM preload). *fp16_bits is the
 * image value, the return value the effective BF16 weight as a float. */
float plena_replay_route_weight_chain(double w, uint16_t *fp16_bits);
/* Largest |effective - w| over n trace weights. */
double plena_replay_route_weight_max_error(const double *w, size_t n);

/* Routing integrity: the INT SRAM image holds exactly the trace's ids in
 * (token, slot) order. Returns 1 when equal; else 0 with the first
 * difference described in detail. */
/* Device routing: per token, the device's k ids equal the trace's as a set
 * (order may differ; the tokens are numbered from t_base in the detail). 1
 * when they do; detail names the first token that
 * differs and both sets' first differing id otherwise. */
int plena_replay_routing_integrity_sets(const uint32_t *dev_ids, const uint32_t *trace_ids,
                                        uint32_t T, uint32_t k, uint32_t t_base, char *detail,
                                        size_t detail_n);
int plena_replay_routing_integrity(const uint32_t *image_ids, const int64_t *trace_ids, size_t n,
                                   char *detail, size_t detail_n);

/* SHA-256 (lowercase hex) of n BF16 values as little-endian bytes, row-major:
 * output_sha256 and reference_sha256 of docs/replay.md "Gates", also the
 * repeat gate's output_sha256 series. */
void plena_replay_bf16_sha256(const uint16_t *v, size_t n, char hex[65]);

struct plena_replay_cmp_in {
    const uint16_t *out;     /* [T][H] BF16 bits read from the emulator dump */
    const float *ref;        /* [T][H] bit-exact reference (BF16-exact floats) */
    const double *ref64;     /* [T][H] float64 reference, or NULL */
    double rel_rms_f64;      /* MoE-level bound, plena_moe_rel_rms_moe; < 0 when undefined */
    double rel_rms_f64_full; /* whole output, plena_moe_rel_rms_full; < 0 when undefined */
    double rel_rms_f64_norm; /* RMSNorm output, plena_moe_rel_rms_norm; 0 without PRE_NORM */
    double rel_rms_bound;    /* PLENA_MOE_REL_RMS_BOUND */
    size_t T, H;
    int smoke; /* weights zero or input zeros: zero_input_smoke kind */
    int has_sigmoid_gate;
    const float *gate; /* [T] emulator-side gate values (sigmoid only) */
    double route_weight_max_conversion_error;
};

/* The `functional` object (docs/replay.md "Gates") ({kind, numerical, elements, mismatches, ...,
 * checks, passed}); *passed says whether the functional check passes.
 * NULL on out of memory. */
json_t *plena_replay_functional_compare(const struct plena_replay_cmp_in *in, int *passed);

#endif
