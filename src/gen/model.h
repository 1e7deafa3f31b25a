/* MoE model descriptions: presets (gen/models.def, the one table) and
 * HF-style config JSON files (spec/moe-lowering.md section 6 and 6.1,
 * spec/traces-and-replay.md section 3.4). Shared by `plena moe`,
 * `plena trace gen` and replay. */
#ifndef PLENA_GEN_MODEL_H
#define PLENA_GEN_MODEL_H

#include <stdint.h>

#include "../common/err.h"

enum plena_act_policy { PLENA_ACT_STANDARD_SWIGLU = 0, PLENA_ACT_GPT_OSS_CLAMP_GATED = 1 };
enum plena_route_placement { PLENA_ROUTE_OUTPUT = 0, PLENA_ROUTE_INPUT = 1 };
enum plena_routing_kind {
    PLENA_ROUTING_DEVICE = 0,
    PLENA_ROUTING_FIXED = 1,
    PLENA_ROUTING_NONE = 2
};
enum plena_router_form { PLENA_ROUTER_GEMM = 0, PLENA_ROUTER_DOT = 1 };
enum plena_shared_gate { PLENA_SHARED_GATE_NONE = 0, PLENA_SHARED_GATE_SIGMOID = 1 };

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
const struct plena_moe_model *plena_gen_preset_find(const char *name);
/* Number of presets and the i-th (for --list-models and tests). */
unsigned plena_gen_preset_count(void);
const struct plena_moe_model *plena_gen_preset_at(unsigned i);

/* Resolves `name_or_path`: a preset name, else the path of an HF-style config
 * JSON (fields of moe-lowering.md 6.1). Unknown name / bad file: PLENA_E_INPUT. */
int plena_gen_model_resolve(const char *name_or_path, struct plena_moe_model *out,
                            struct plena_err *err);
/* Shape checks shared by the generator, the CLI and the trace replay tier. */
int plena_gen_model_validate(const struct plena_moe_model *m, uint32_t mlen, struct plena_err *err);
/* n_shared * moe_inter (0 on 0 inputs or overflow). */
uint32_t plena_moe_fused_shared_intermediate(uint32_t n_shared, uint32_t moe_inter);

#endif
