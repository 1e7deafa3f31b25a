/* model: the description of one MoE layer that every other module reads
 * (docs/architecture.md "model"). It owns the layer struct, every layer enum
 * with its one spelling table, the preset table (models.def), HF-style config
 * files and the shape rules the generator, the reference and the replay tier
 * share. It does not lower, run or check anything: gen/, ref/ and verify/ do.
 * The mapping to and from a route trace's `model` object is in
 * model/trace_model.h (internal: it works on JSON trees). */
#ifndef PLENA_MODEL_MODEL_H
#define PLENA_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

/* Each enum is written once as a list X(CONSTANT, "spelling"): the enum, its
 * name function and its parser are expanded from the list, so a value and its
 * spelling cannot drift apart. The spelling is the one files and options use
 * (trace `model` objects, layout.json, results.json, command-line values). */
#define PLENA_ACT_POLICY_LIST(X)                                                                   \
    X(PLENA_ACT_STANDARD_SWIGLU, "standard_swiglu")                                                \
    X(PLENA_ACT_GPT_OSS_CLAMP_GATED, "gpt_oss_clamp_gated")
#define PLENA_ROUTE_PLACEMENT_LIST(X)                                                              \
    X(PLENA_ROUTE_OUTPUT, "output")                                                                \
    X(PLENA_ROUTE_INPUT, "input")
#define PLENA_ROUTING_KIND_LIST(X)                                                                 \
    X(PLENA_ROUTING_DEVICE, "device")                                                              \
    X(PLENA_ROUTING_FIXED, "fixed")                                                                \
    X(PLENA_ROUTING_NONE, "none")
#define PLENA_ROUTER_FORM_LIST(X)                                                                  \
    X(PLENA_ROUTER_GEMM, "gemm")                                                                   \
    X(PLENA_ROUTER_DOT, "dot")
#define PLENA_SHARED_GATE_LIST(X)                                                                  \
    X(PLENA_SHARED_GATE_NONE, "none")                                                              \
    X(PLENA_SHARED_GATE_SIGMOID, "sigmoid")
#define PLENA_RESIDUAL_MODE_LIST(X)                                                                \
    X(PLENA_RESIDUAL_NONE, "none")                                                                 \
    X(PLENA_RESIDUAL_PRE_NORM, "pre_norm")
/* What the staged weights and the layer input are made of (a build's data,
 * not the model's shape; here because gen, replay and verify all name it). */
#define PLENA_WEIGHTS_MODE_LIST(X)                                                                 \
    X(PLENA_WEIGHTS_RANDOM, "random")                                                              \
    X(PLENA_WEIGHTS_ZERO, "zero")                                                                  \
    X(PLENA_WEIGHTS_REPRESENTABLE, "representable")
#define PLENA_INPUT_MODE_LIST(X)                                                                   \
    X(PLENA_INPUT_RANDOM, "random")                                                                \
    X(PLENA_INPUT_ZEROS, "zeros")

#define PLENA_MODEL_ENUM_CONST(c, s) c,
#define PLENA_MODEL_ENUM(type, LIST)                                                               \
    enum plena_##type{LIST(PLENA_MODEL_ENUM_CONST)};                                               \
    /* the spelling of v; "?" for a value outside the enum */                                      \
    const char *plena_##type##_name(enum plena_##type v);                                          \
    /* 0 and *out set when s is a spelling of the list, else -1 */                                 \
    int plena_##type##_parse(const char *s, enum plena_##type *out);                               \
    /* the spellings joined by sep, e.g. "random, zero or representable" for (", ", " or ") */     \
    const char *plena_##type##_choices(const char *sep, const char *last_sep, char *buf,           \
                                       unsigned long n);

PLENA_MODEL_ENUM(act_policy, PLENA_ACT_POLICY_LIST)
PLENA_MODEL_ENUM(route_placement, PLENA_ROUTE_PLACEMENT_LIST)
PLENA_MODEL_ENUM(routing_kind, PLENA_ROUTING_KIND_LIST)
PLENA_MODEL_ENUM(router_form, PLENA_ROUTER_FORM_LIST)
PLENA_MODEL_ENUM(shared_gate, PLENA_SHARED_GATE_LIST)
PLENA_MODEL_ENUM(residual_mode, PLENA_RESIDUAL_MODE_LIST)
PLENA_MODEL_ENUM(weights_mode, PLENA_WEIGHTS_MODE_LIST)
PLENA_MODEL_ENUM(input_mode, PLENA_INPUT_MODE_LIST)

struct plena_moe_model {
    char name[128];        /* preset name or the config file's base name without ".json" */
    uint32_t hidden;       /* H */
    uint32_t moe_inter;    /* I: width of one routed expert */
    uint32_t num_experts;  /* E (0 with routing NONE) */
    uint32_t top_k;        /* k */
    uint32_t n_shared;     /* shared experts folded into the fused branch */
    uint32_t shared_inter; /* fused shared width I_s (0 = no shared branch) */
    enum plena_shared_gate shared_gate;
    enum plena_act_policy activation;
    enum plena_route_placement route_placement;
    enum plena_routing_kind routing; /* the preset's default routing path */
    enum plena_router_form router_form;
    int router_bias;       /* GPT-OSS router bias */
    int expert_bias;       /* GPT-OSS expert biases */
    int norm_topk_prob;    /* informational */
    int approx_routing_ok; /* DEVICE routing only approximates HF weights */
    float rms_eps;
    int zero_centred_norm;   /* Qwen3-Next: gamma' = bf16(1 + gamma) */
    int is_tiny;             /* a fast test preset */
    const char *policy_name; /* "qwen3_moe", "gpt_oss", ... */
};

/* Preset by name; NULL when unknown. */
const struct plena_moe_model *plena_model_preset_find(const char *name);
/* Number of presets and the i-th (for --list-models and tests). */
unsigned plena_model_preset_count(void);
const struct plena_moe_model *plena_model_preset_at(unsigned i);

/* Resolves `name_or_path`: a preset name, else the path of an HF-style config
 * JSON (docs/lowering.md "Model files"). Unknown name / bad file: PLENA_E_INPUT. */
int plena_model_resolve(const char *name_or_path, struct plena_moe_model *out,
                        struct plena_err *err);
/* Shape checks shared by the generator, the CLI and the trace replay tier. */
int plena_model_validate(const struct plena_moe_model *m, uint32_t mlen, struct plena_err *err);
/* n_shared * moe_inter (0 on 0 inputs or overflow). */
uint32_t plena_model_fused_shared_width(uint32_t n_shared, uint32_t moe_inter);

/* ---- routing statistics (docs/profile.md "routing_stats") ---- */

/* How one layer call's routing used the machine: profile JSON, replay
 * results and `plena moe` report it. Expert counts come from the ids
 * (plena_routing_counts); the rest from the lowering (gen/route_plan.h). */
struct plena_routing_stats {
    int valid;
    int lowering;                                        /* enum plena_lowering (isa/program.h) */
    uint32_t active_experts;                             /* experts with at least one pair */
    double tpe_min, tpe_max, tpe_mean, tpe_cv, tpe_gini; /* pairs per expert over all E */
    uint64_t padding_rows;                               /* BLEN-tile rows without a pair */
    uint64_t routed_rows_issued;   /* rows through the routed experts' M_MMs */
    uint64_t routed_rows_useful;   /* pairs */
    double row_utilisation;        /* useful / issued */
    double shared_row_utilisation; /* shared rows / rows issued; < 0: no shared branch */
    uint64_t weight_bytes_fetched; /* routed expert weights the program fetches from HBM */
    uint64_t weight_bytes_ideal;   /* each active expert's weights once */
};
/* Counts per expert of ids[n_pairs]: active experts and the
 * tokens_per_expert figures (min, max, mean, coefficient of variation, Gini).
 * PLENA_E_INPUT naming the pair for an id >= E. */
int plena_routing_counts(const uint32_t *ids, size_t n_pairs, uint32_t E,
                         struct plena_routing_stats *st, struct plena_err *err);
/* Gini of expert counts (docs/trace-schema.md): counts sorted ascending
 * v(1..n), S = sum i*v(i), gini = (double)(2S)/(double)(n*sum) - (n+1)/n;
 * 0 when the sum is 0. */
int plena_routing_gini(const int64_t *counts, size_t n, double *gini, struct plena_err *err);
/* Sum of counts: PLENA_E_INPUT for a negative count or an int64 overflow. */
int plena_routing_count_sum(const int64_t *counts, size_t n, int64_t *sum, struct plena_err *err);

#endif
