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
/* The router (docs/lowering.md "Routers"): how a token's expert ids and the
 * weights that multiply the expert outputs (or inputs) come from its router
 * logits. Each list is one orthogonal choice; the HF field names they come
 * from are in model.c (plena_model_resolve) and docs/lowering.md. */
/* score function: softmax over all E; softmax over the selected k logits
 * (gpt-oss, and what V_TOPK computes); sigmoid of every logit (DeepSeek-V3);
 * sigmoid of the selected logit (Llama-4) */
#define PLENA_ROUTER_SCORE_LIST(X)                                                                 \
    X(PLENA_SCORE_SOFTMAX, "softmax")                                                              \
    X(PLENA_SCORE_SOFTMAX_SELECTED, "softmax_topk")                                                \
    X(PLENA_SCORE_SIGMOID, "sigmoid")                                                              \
    X(PLENA_SCORE_SIGMOID_SELECTED, "sigmoid_topk")
/* a per-expert bias: none; added to the scores for choosing only (DeepSeek-V3
 * e_score_correction_bias, ERNIE moe_statics); added to the scores, weights too */
#define PLENA_SELECT_BIAS_LIST(X)                                                                  \
    X(PLENA_SELECT_BIAS_NONE, "none")                                                              \
    X(PLENA_SELECT_BIAS_SELECTION, "selection")                                                    \
    X(PLENA_SELECT_BIAS_SCORE, "score")
/* group-limited selection: a group's score is the sum of its top-2 (biased)
 * scores (DeepSeek-V3 noaux_tc) or its maximum (DeepSeek-V2 group_limited_greedy) */
#define PLENA_GROUP_SCORE_LIST(X)                                                                  \
    X(PLENA_GROUP_NONE, "none")                                                                    \
    X(PLENA_GROUP_TOP2_SUM, "top2_sum")                                                            \
    X(PLENA_GROUP_MAX, "max")
/* HF's topk_method, how the configs and the router objects spell the group
 * score: greedy (no groups), group_limited_greedy (max), noaux_tc (top2_sum,
 * with DeepSeek-V3's e_score_correction_bias) */
#define PLENA_TOPK_METHOD_LIST(X)                                                                  \
    X(PLENA_TOPK_GREEDY, "greedy")                                                                 \
    X(PLENA_TOPK_GROUP_LIMITED_GREEDY, "group_limited_greedy")                                     \
    X(PLENA_TOPK_NOAUX_TC, "noaux_tc")
/* normalisation of the selected weights: none; w / (sum + norm_eps); w /
 * max(sum, norm_eps) (ERNIE moe_norm_min); w / L1 norm (DBRX p = 1) */
#define PLENA_ROUTER_NORM_LIST(X)                                                                  \
    X(PLENA_NORM_NONE, "none")                                                                     \
    X(PLENA_NORM_SUM, "sum")                                                                       \
    X(PLENA_NORM_SUM_CLAMPED, "sum_clamped")                                                       \
    X(PLENA_NORM_L1, "l1")
/* capacity: none; ceil(capacity_factor x T x k / E) pairs per expert; Hunyuan's
 * max(k, k x T / E); pairs over capacity (token order) are dropped (weight 0) */
#define PLENA_CAPACITY_LIST(X)                                                                     \
    X(PLENA_CAPACITY_NONE, "none")                                                                 \
    X(PLENA_CAPACITY_FACTOR, "factor")                                                             \
    X(PLENA_CAPACITY_HUNYUAN, "hunyuan")
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
PLENA_MODEL_ENUM(router_score, PLENA_ROUTER_SCORE_LIST)
PLENA_MODEL_ENUM(select_bias, PLENA_SELECT_BIAS_LIST)
PLENA_MODEL_ENUM(group_score, PLENA_GROUP_SCORE_LIST)
PLENA_MODEL_ENUM(topk_method, PLENA_TOPK_METHOD_LIST)
PLENA_MODEL_ENUM(router_norm, PLENA_ROUTER_NORM_LIST)
/* The group score of a topk_method and the topk_method of a group score. */
enum plena_group_score plena_topk_method_group(enum plena_topk_method m);
enum plena_topk_method plena_group_topk_method(enum plena_group_score g);
PLENA_MODEL_ENUM(capacity_rule, PLENA_CAPACITY_LIST)
PLENA_MODEL_ENUM(weights_mode, PLENA_WEIGHTS_MODE_LIST)
PLENA_MODEL_ENUM(input_mode, PLENA_INPUT_MODE_LIST)

/* One router, every field orthogonal (docs/lowering.md "Routers"). The zero
 * value is softmax over all E, no bias, no groups, no normalisation, which
 * is not what any preset uses: presets and model files name every field;
 * plena_router_default gives the softmax-top-k-renormalise router. */
struct plena_router {
    enum plena_router_score score;
    enum plena_select_bias select_bias;
    uint32_t n_group, topk_group; /* 1, 1: no group-limited selection */
    enum plena_group_score group_score;
    enum plena_router_norm norm;
    float norm_eps; /* SUM: added to the denominator; SUM_CLAMPED: its minimum */
    float scaling;  /* routed_scaling_factor (1 = none), after normalisation */
    int logit_bias; /* a per-expert bias added to the logits (gpt-oss router.bias) */
    enum plena_route_placement placement; /* weights multiply the outputs or the inputs */
    enum plena_capacity_rule capacity;
    float capacity_factor; /* CAPACITY_FACTOR */
    int f32_logits;        /* the model computes its router logits in f32 */
};
/* Whether r describes a router (n_group >= 1); a zeroed struct does not: a
 * model built from a capture's shape alone (an importer) has no router, and
 * its traces carry no `router` object. */
int plena_router_is_set(const struct plena_router *r);
/* softmax over E, top-k, renormalised (Qwen3, Mixtral): scaling 1, groups 1. */
void plena_router_default(struct plena_router *r);
/* The router's rules: 1 <= topk_group <= n_group, n_group divides E (and k <=
 * topk_group x E / n_group), scaling > 0 and finite, norm_eps >= 0, capacity
 * factor > 0 with CAPACITY_FACTOR; the message names the field. */
int plena_router_validate(const struct plena_router *r, uint32_t E, uint32_t k, const char *where,
                          struct plena_err *err);

/* The n largest of v[m] into idx[n] in rank order; on equal values the
 * lower index ranks first (a value displaces the best so far only when
 * strictly greater). The selection rule of every router here and of the
 * checkpoint decoder (ckpt/forward.c); v holds no NaN. */
void plena_top_n_f32(const float *v, uint32_t m, uint32_t n, uint32_t *idx);

/* The router of one token in float64, as the published model defines it:
 * scores, the selection bias (bias[E] or NULL), group-limited selection, the
 * top k (ties to the lower index) into ids[k] in rank order, and the weights
 * w[k] the model multiplies by (normalisation and scaling included). */
int plena_router_select_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                            const double *logits, const double *bias, uint32_t *ids, double *w,
                            struct plena_err *err);
/* The same with the exponential ex (plena_router_select_f64 passes libm's
 * exp): `plena trace route` passes det_exp, so its rows are byte-identical on
 * every IEEE-754 machine. */
typedef double (*plena_router_exp_fn)(double);
int plena_router_select_exp(const struct plena_router *r, plena_router_exp_fn ex, uint32_t E,
                            uint32_t k, const double *logits, const double *bias, uint32_t *ids,
                            double *w, struct plena_err *err);
/* The weights of given ids (rank order) as plena_router_select_f64 weights
 * its own: the float64 check of a device that selected them. */
int plena_router_weights_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                             const double *logits, const double *bias, const uint32_t *ids,
                             double *w, struct plena_err *err);
/* How a device's selection ids[k] of one token compares with the float64
 * router's: the same set, a near-tie (every group the device used scores
 * within tol x the largest |group score| of the topk_group-th best, and
 * every expert within tol x the largest |selection value| of the k-th best
 * of the groups either chose), or different. -1 on error. */
enum plena_route_agreement { PLENA_ROUTE_SAME, PLENA_ROUTE_NEAR_TIE, PLENA_ROUTE_DIFFERENT };
/* The near-tie tolerance of the device checks (docs/lowering.md "Routers"):
 * BF16 logits and scores carry 2^-9 relative rounding each, and the device
 * sees the BF16 RMSNorm's output; 2^-6 of the scale covers a few of them. */
#define PLENA_ROUTE_NEAR_TIE_TOL (1.0 / 64.0)
int plena_router_agree_f64(const struct plena_router *r, uint32_t E, uint32_t k,
                           const double *logits, const double *bias, const uint32_t *ids,
                           double tol, struct plena_err *err);
/* Pairs one expert may take among T tokens' T x k (T x k without capacity). */
uint64_t plena_router_capacity(const struct plena_router *r, uint32_t T, uint32_t E, uint32_t k);
/* Drops every pair beyond its expert's capacity, slots given by choice rank
 * first and token order second: its weight becomes 0 (the pair stays, so
 * shapes do not change). count[E] is scratch
 * (then each expert's kept pairs). Returns the pairs dropped. */
uint64_t plena_router_drop_over_capacity(const struct plena_router *r, uint32_t T, uint32_t E,
                                         uint32_t k, const uint32_t *ids, double *w,
                                         uint32_t *count);

/* Synthetic routing of one token with the router's properties (plena trace
 * gen; plena moe --routing random|balanced may call it): ids[k], drawn by a
 * distribution, are repaired to use at most topk_group groups (an id of a
 * further group moves to the next id of the row's groups no rank uses), and
 * w[k] (positive, non-increasing: the softmax over the selected of some
 * logits) become the router's weights of logits log(w[j]) (at least
 * log(w[0]) - 4) at ids[j] and 1 below the least elsewhere (no selection bias): normalised, scaled,
 * sigmoid of the selected as the router defines. Unchanged where the router's weights are the
 * softmax over the selected. A router not set: no change. */
int plena_router_synth_row(const struct plena_router *r, uint32_t E, uint32_t k, uint32_t *ids,
                           double *w, struct plena_err *err);
/* T tokens' ids[T x k] and w[T x k] (binary32, as traces and fixed routing
 * hold them) through plena_router_synth_row, then the pairs over capacity
 * weighted 0 (plena_router_drop_over_capacity): what `plena trace gen` does
 * and `plena moe --routing random|balanced` can call. */
int plena_router_synth(const struct plena_router *r, uint32_t T, uint32_t E, uint32_t k,
                       uint32_t *ids, float *w, struct plena_err *err);

/* How plena routes a router on the device (gen/router.c) and how the
 * bit-exact reference mirrors it (ref/ref.c): one owner of the decision, so
 * the generator and the reference cannot disagree (docs/lowering.md
 * "Routers"). */
#define PLENA_ROUTER_LOWERING_LIST(X)                                                              \
    X(PLENA_RLOWER_NONE, "none")       /* no device form: fixed routing only (capacity) */         \
    X(PLENA_RLOWER_VTOPK, "vtopk")     /* V_TOPK alone: its softmax over the selected */           \
    X(PLENA_RLOWER_SOFTMAX, "softmax") /* softmax over E on the vector unit */                     \
    X(PLENA_RLOWER_SIGMOID, "sigmoid") /* sigmoid over E on the vector unit */                     \
    X(PLENA_RLOWER_SIGMOID_SELECTED, "sigmoid_selected") /* V_TOPK of the logits, scalar sigmoid   \
                                                          */
PLENA_MODEL_ENUM(router_lowering, PLENA_ROUTER_LOWERING_LIST)
/* The rows a step reads: the logits, the scores, the scores + selection bias. */
enum plena_router_rows { PLENA_RROWS_LOGITS, PLENA_RROWS_SCORE, PLENA_RROWS_BIASED };
struct plena_router_plan {
    enum plena_router_lowering lowering;
    enum plena_router_rows select; /* V_TOPK and the group scores rank these */
    enum plena_router_rows value;  /* the weights are these rows' lanes */
    int scores;                    /* the score rows are computed */
    int groups;                    /* group-limited selection (n_group > 1) */
};
/* The device plan of r. Selection reads the logits wherever the order of the
 * scores is the order of the logits (softmax and sigmoid are monotone): the
 * BF16 scores would add ties the model does not have. */
void plena_router_plan(const struct plena_router *r, struct plena_router_plan *pl);

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
    struct plena_router router;
    enum plena_routing_kind routing; /* the preset's default routing path */
    enum plena_router_form router_form;
    int expert_bias; /* GPT-OSS expert biases */
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
/* The HF-style config file at path (model_file.c): the family from
 * model_type / architectures, the shape and every router key; an unmodelled
 * value is PLENA_E_INPUT naming file:$.key and the value. */
int plena_model_read_config(const char *path, struct plena_moe_model *out, struct plena_err *err);
/* The same for config text already in memory; path names it in messages. */
int plena_model_parse_config(const char *text, size_t len, const char *path,
                             struct plena_moe_model *out, struct plena_err *err);
/* The largest hidden / intermediate / shared width a model may have: the
 * generator pads widths to MLEN in 32-bit arithmetic, and 2^24 is far above
 * every published model (the 4 GiB expert window binds much earlier). */
#define PLENA_MODEL_MAX_WIDTH (1u << 24)
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
