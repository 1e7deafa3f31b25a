/* MoE layer lowering (docs/lowering.md): configuration,
 * the FP/INT SRAM and HBM maps, every emitter of docs/lowering.md "Layer steps" and
 * plena_moe_emit_layer (docs/lowering.md "Layer steps"). Emitters append to a plena_ctx and
 * pass their stage explicitly to every builder call; polymorphic emitters
 * take it as their second parameter and check it against their allowed mask.
 * Staging host images (HBM, SRAM, VRAM preload) is build.h's job, not this. */
#ifndef PLENA_GEN_MOE_H
#define PLENA_GEN_MOE_H

#include <stdint.h>

#include "../gen/builder.h"
#include "../model/model.h"

/* The generator's MX block: one e8m0 scale per 8 elements (the HBM layout of
 * docs/lowering.md "Memory ABI"; every MX mode plena builds uses it). */
#define PLENA_MOE_MX_BLOCK 8u

/* Tokens of one layer call at most: token loops count in C_LOOP_START's
 * 22-bit immediate (VRAM usually binds first: the message says where). */
#define PLENA_MOE_MAX_TOKENS 4194303u

enum plena_topk_policy { PLENA_TOPK_AUTO = 0, PLENA_TOPK_FORCE_REGISTER = 1 };
enum plena_loop_policy { PLENA_LOOPS_AUTO = 0, PLENA_LOOPS_UNROLL_PAIRS = 1 };
enum plena_topk_encoding {
    PLENA_TOPK_ENC_NONE = 0,
    PLENA_TOPK_ENC_RMASK0,
    PLENA_TOPK_ENC_RMASK1,
    PLENA_TOPK_ENC_REGISTER
};
enum plena_pair_form {
    PLENA_PAIRS_NONE = 0,
    PLENA_PAIRS_LOOPED,
    PLENA_PAIRS_TOKENS_UNROLLED,
    PLENA_PAIRS_UNROLLED,
    PLENA_PAIRS_SORTED /* expert-major: pairs sorted into expert segments */
};
enum plena_moe_fault {
    PLENA_FAULT_NONE = 0,
    PLENA_FAULT_TOPK_SHIFT_7,
    PLENA_FAULT_DROP_GATE_MUL,
    PLENA_FAULT_SHARED_AS_ROUTED,
    PLENA_FAULT_NO_MARKERS
};

struct gen_router; /* gen/emit.h: the device router's tensors */

struct plena_moe_cfg {
    struct plena_gen_machine m;
    char name[128];
    uint32_t H, I, E, k;
    enum plena_routing_kind routing;
    enum plena_router_form router_form;
    struct plena_router router; /* the model's (device routing lowers it: router.c) */
    int router_bias;
    enum plena_topk_policy topk_policy;
    enum plena_act_policy activation;
    int expert_bias;
    enum plena_route_placement placement;
    uint32_t n_shared, Is; /* Is = fused shared width (0 = no shared branch) */
    enum plena_shared_gate gate;
    enum plena_residual_mode residual;
    float eps;
    int zero_centred_norm;
    uint32_t chunk_tiles; /* C */
    enum plena_loop_policy loop_policy;
    uint32_t fp_base, int_base;
    uint32_t force_tblk; /* 0 = largest that fits (tests force 3) */
    /* routed lowering: PAIR_MAJOR (one pair per BLEN-row slot, the upstream
     * compiler's form) or EXPERT_MAJOR (docs/lowering.md "Expert-major") */
    enum plena_lowering lowering;
    /* FIXED routing: the [T*k] expert ids (pair order), which the
     * expert-major plan sorts; NULL sizes the program for a balanced routing
     * (capacity checks) */
    const uint32_t *route_ids;
    /* DEVICE routing (replay): the router logits of all T tokens are
     * preloaded into the VRAM tensor `logits` (T x eb rows) instead of being
     * computed by the router GEMM/dot (and its bias): router_topk then holds
     * only the selection and weights (gen/router_logits.h) */
    int router_logits_preloaded;
    uint64_t hbm_base; /* first HBM byte the layer may use */
    /* Fault injection (docs/lowering.md "Fault injection"): honoured only by
     * the test-only plena_gen_testing library; every other build ignores it.
     * The field always exists so the struct has one layout in every build. */
    enum plena_moe_fault fault;
};

/* Fills cfg from a model and the machine (docs/lowering.md "Model presets": PRE_NORM, C = 4). */
/* Whether the generator lowers this router on the device (docs/lowering.md
 * "Routers"); others need fixed routing. */
int plena_moe_router_on_device(const struct plena_router *r);

void plena_moe_cfg_from_model(const struct plena_moe_model *mdl, const struct plena_gen_machine *m,
                              struct plena_moe_cfg *cfg);

enum plena_proj_kind { PLENA_PROJ_GATE = 0, PLENA_PROJ_UP = 1, PLENA_PROJ_DOWN = 2 };

/* SRAM maps (docs/lowering.md "Memory ABI"), HBM placement and effective constants. */
struct plena_moe_map {
    uint32_t H_p, I_p, Is_p, E_p, eb;
    uint32_t t_blk, n_blocks, phys_rows;
    uint32_t em_max_tiles; /* expert-major: tiles per segment at most */
    /* pair-major fixed routing beyond the SRAMs: each block's ids and
     * weights stream from HBM (route_hbm) with H_PREFETCH_S; offsets of the
     * weights part and the per-block strides of both parts */
    int pm_refill;
    uint64_t pm_ids_stride, pm_w_base, pm_w_stride;
    /* FP SRAM offsets from fp_base */
    uint32_t fp_base, off_one, off_na_routed, off_na_shared, off_lp, off_ln, off_eps, off_invh;
    uint32_t off_dot, w_off, gate_off, fp_used;
    /* device routers beyond V_TOPK alone (router.c, docs/lowering.md
     * "Routers"): constants -1, -inf, routed scaling and the normalisation
     * epsilon in the constants block; FP regions: the group scores (VLEN),
     * the group V_TOPKs' weight scratch (VLEN) and, expert-major, one token's
     * weights (VLEN, zero beyond k); in INT SRAM the groups' V_TOPK ids */
    int dev_router;
    uint32_t off_minus_one, off_neg_inf, off_rsf, off_reps;
    uint32_t off_grow, off_gw, off_wreg, gsel_off;
    float c_minus_one, c_neg_inf, c_rsf, c_reps;
    uint16_t h_minus_one, h_neg_inf, h_rsf, h_reps;
    /* effective BF16 constants and their fp16 image bits */
    float c_one, c_na_routed, c_na_shared, c_lp, c_ln, c_eps, c_invh;
    uint16_t h_one, h_na_routed, h_na_shared, h_lp, h_ln, h_eps, h_invh;
    /* INT SRAM offsets from int_base */
    uint32_t int_base, ids_off, wtab_off, spill_off, int_used;
    /* expert-major record buffers: INT (segment, gather, combine) and FP
     * (combine weights, input weights), offsets from int_base / fp_base */
    uint32_t em_seg_off, em_gbuf_off, em_cbuf_off, em_cw_off, em_iw_off;
    /* expert-major device routing: the sort's state in INT SRAM (docs/lowering.md
     * "Expert-major"): one token's ids at ids_off [k], the per-expert counters
     * (counts, then slot cursors) [E], segment records [2 x (segments + 1)],
     * the count-record buffer em_cbuf_off [16] and two scalars (segments - 1,
     * slots - 1); the count table is the HBM routing region */
    int em_dev;
    uint32_t em_cnt_off, em_rec_off, em_scal_off;
    uint32_t em_max_slots;
    /* HBM */
    int has_router_hbm, windowed;
    uint64_t router_hbm, table[3], table_bytes, stride; /* stride S */
    uint32_t epw, w0[3];                                /* windowed form */
    uint64_t shared[3];
    uint64_t route_hbm, route_bytes; /* expert-major routing tables (0 bytes: none) */
    uint64_t expert_weight_bytes;    /* HBM bytes one expert's three projections prefetch */
    uint64_t hbm_end;
};

#define PLENA_MOE_MAX_ABI 24
struct plena_moe_emit_info {
    enum plena_topk_encoding topk_encoding;
    uint32_t topk_packed;                /* (E << 8) | k for REGISTER, else 0 */
    int topk_rmask;                      /* 0, 1, 15, or -1 when no V_TOPK is emitted */
    enum plena_lowering routed_lowering; /* UNSET = none */
    enum plena_pair_form pair_form;
    uint32_t n_pair_insns; /* executed instructions of one pair body */
    struct plena_moe_map map;
    struct plena_tensor abi[PLENA_MOE_MAX_ABI];
    unsigned n_abi;
    uint64_t abi_elems, vram_peak;
    uint64_t static_count[PLENA_STAGE_COUNT], dyn_count[PLENA_STAGE_COUNT], dyn_op[64];
    uint64_t routed_static; /* static instructions of the pair sections */
    uint64_t gate_static;   /* static instructions of the shared gate */
};

/* HBM byte address of expert e's entry in projection table q (docs/lowering.md "Memory ABI"; both
 * the stride and the windowed form). */
uint64_t plena_moe_expert_base(const struct plena_moe_map *mp, int q, uint32_t e);

/* Finds an ABI tensor by name (NULL when absent). */
const struct plena_tensor *plena_moe_abi_find(const struct plena_moe_emit_info *info,
                                              const char *name);

/* The layer: steps of docs/lowering.md "Layer steps" for T tokens. The caller owns c->p and c->va;
 * c->m must point at cfg->m; c->map is set to &info->map. */
int plena_moe_emit_layer(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                         struct plena_moe_emit_info *info);

/* Convenience: builds prog + allocator for cfg and emits. prog must be freed
 * with plena_prog_free. */
int plena_moe_generate(const struct plena_moe_cfg *cfg, uint32_t T, struct plena_prog *prog,
                       struct plena_moe_emit_info *info, struct plena_err *err);

/* ---- expert-major routed section (expert_major.c; docs/lowering.md "Expert-major") ---- */
struct plena_route_plan;
/* Scratch VRAM of the expert-major section, allocated once for all blocks. */
struct plena_moe_em_scratch {
    struct plena_tensor xs;         /* [slots, H_p]: gathered rows, then down outputs */
    struct plena_tensor yg, yu, ys; /* [slots, I_p]: gate, up (then activation), scratch */
    struct plena_tensor ytmp;       /* [slots, VLEN]: K-split partials */
    struct plena_tensor trow;       /* [1, VLEN]: a weighted row block of the combine */
};
/* Largest number of BLEN-row tiles one segment may have so that every loop
 * iteration of the section stays within MAX_LOOP_INSTRUCTIONS. */
uint32_t plena_moe_em_max_tiles(const struct plena_moe_cfg *cfg, const struct plena_moe_map *mp);
/* VRAM elements the scratch takes for max_slots slots (allocator granules). */
uint64_t plena_moe_em_scratch_elems(const struct plena_gen_machine *m,
                                    const struct plena_moe_map *mp, uint32_t max_slots);
int plena_moe_em_alloc(struct plena_ctx *c, uint32_t max_slots, struct plena_moe_em_scratch *sc);
/* The routed section of token block b (x and acc: the block's views). */
int plena_moe_em_block(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                       const struct plena_route_plan *plan, uint32_t b,
                       const struct plena_tensor *x, const struct plena_tensor *acc,
                       const struct plena_tensor *const bias[3],
                       const struct plena_moe_em_scratch *sc);

/* Device routing: the section of the block of n tokens from r0 whose router
 * logits are in lg: V_TOPK token by token in three passes (count, gather,
 * combine) around the sort and the experts. enc: the top-k encoding used. */
/* R: the device router (router.c); routers beyond V_TOPK alone run once per
 * token first, their weights into the rows of wrow (the logits' shape). */
int plena_moe_em_dev_block(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                           uint32_t r0, uint32_t n, const struct plena_tensor *x,
                           const struct plena_tensor *acc, const struct plena_tensor *lg,
                           const struct plena_tensor *const bias[3],
                           const struct plena_moe_em_scratch *sc, struct gen_router *R,
                           const struct plena_tensor *wrow, enum plena_topk_encoding *enc);

/* ---- routing statistics (docs/profile.md "routing_stats") ---- */
/* HBM bytes the prefetches of a whole MXFP8 [K_p, N_p] matrix at `base`
 * read, MLEN x MLEN tile by tile, by the machine's transaction rule (per row
 * its element run, then its scale run, each in 64-byte blocks): what the
 * profile's counters show for fetching it once. */
uint64_t plena_moe_prefetch_bytes(uint64_t base, uint32_t K_p, uint32_t N_p, uint32_t mlen,
                                  uint32_t mx_block);
/* The lowering's figures of one layer call whose routing was ids[T*k]
 * (pair order; the device's, for device routing): the expert counts
 * (plena_routing_counts) and what the generated program issues for them --
 * BLEN-row tiles, padding rows, expert weight bytes prefetched -- from the
 * lowering's own rules (one tile and one weight fetch per pair in
 * pair-major; per token block, per expert its pairs in tiles and its
 * weights once per segment in expert-major). PLENA_E_INPUT for an id >= E. */
int plena_moe_routing_stats(const struct plena_moe_cfg *cfg, uint32_t T,
                            const struct plena_moe_emit_info *info, const uint32_t *ids,
                            struct plena_routing_stats *st, struct plena_err *err);

/* ---- capacity (docs/lowering.md "Token blocks"; docs/replay.md "Replay tier" R005) ---- */
/* What a layer needs of each machine resource and what the machine has. */
struct plena_gen_capacity {
    uint32_t t_blk;                 /* token block size the generator chose */
    uint64_t fp_need, fp_limit;     /* FP SRAM entries from fp_base */
    uint64_t int_need, int_limit;   /* INT SRAM entries from int_base */
    uint64_t vram_need, vram_limit; /* VRAM elements: the allocator's peak */
    uint64_t hbm_need, hbm_limit;   /* HBM bytes (over the limit: warning only, 2.3) */
    uint64_t n_insns, insn_limit;   /* static instructions; the PC is 32 bits */
    enum plena_gen_reason reason;   /* the rule that refused (PLENA_GEN_NO_REASON when it fits) */
};
/* Would the generator lower `mdl` (with the routing in mdl->routing) for T
 * tokens on machine m? Runs the generator itself (plena_moe_generate), so the
 * rules are its own: T_blk of docs/lowering.md "Token blocks" (FP SRAM, INT
 * SRAM; fixed routing needs the whole routing table), the VRAM allocator, the
 * MRAM chunk, and the instruction count. On failure err names the resource,
 * the requirement, the limit and the model fields behind it, the return is
 * PLENA_E_INPUT (or PLENA_E_NOMEM) and cap->reason names the rule:
 * PLENA_GEN_SRAM, _VRAM, _SHAPE (MRAM, shape, instruction count) or _NOMEM. An
 * HBM image beyond HBM_SIZE is not a failure (reads past the capacity return
 * zeros); cap->hbm_need > cap->hbm_limit tells the caller to warn. cap may be
 * NULL. */
int plena_gen_capacity_check(const struct plena_moe_model *mdl, const struct plena_gen_machine *m,
                             uint32_t T, struct plena_gen_capacity *cap, struct plena_err *err);

/* ---- emitters ---- */
int plena_moe_fp_zero_row_init(struct plena_ctx *c, enum plena_stage stage);
int plena_moe_true_zero_rows(struct plena_ctx *c, enum plena_stage stage,
                             const struct plena_tensor *x, uint32_t row0, uint32_t nrows);
int plena_emit_copy_rows(struct plena_ctx *c, enum plena_stage stage,
                         const struct plena_tensor *dst, uint32_t dst_row0,
                         const struct plena_tensor *src, uint32_t src_row0, uint32_t nrows);
int plena_emit_rmsnorm_rows(struct plena_ctx *c, enum plena_stage stage,
                            const struct plena_tensor *x, uint32_t nrows, uint32_t eps_off,
                            uint32_t invh_off);
int plena_emit_mul_rows_by_row(struct plena_ctx *c, enum plena_stage stage,
                               const struct plena_tensor *x, uint32_t nrows,
                               const struct plena_tensor *w);
int plena_moe_residual_setup(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                             const struct plena_tensor *h, const struct plena_tensor *residual,
                             const struct plena_tensor *gamma, uint32_t t_rows);
int plena_moe_residual_add_back(struct plena_ctx *c, const struct plena_tensor *out,
                                const struct plena_tensor *residual, uint32_t t_rows);

int plena_moe_router_logits_dot(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                const struct plena_tensor *x, const struct plena_tensor *wr,
                                const struct plena_tensor *logits, uint32_t t_rows);
int plena_moe_router_logits_gemm(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                 const struct plena_tensor *x, uint64_t wr_hbm,
                                 const struct plena_tensor *logits, uint32_t t_rows);
int plena_moe_router_bias_add(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                              const struct plena_tensor *logits, const struct plena_tensor *bias,
                              uint32_t t_rows);
/* The routing of t_rows tokens (router.c's R: V_TOPK alone or the router's
 * sequence) into k ids (INT ids_off + t k) and weights (FP w_off + t k). */
int plena_moe_router_select(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                            struct gen_router *R, const struct plena_tensor *logits,
                            uint32_t t_rows, uint32_t w_off, uint32_t ids_off,
                            enum plena_topk_encoding *enc);

struct plena_proj_stages {
    enum plena_stage address, prefetch, compute;
};
struct plena_proj {
    const struct plena_tensor *x;
    uint32_t rows;
    int dynamic;     /* weight base in `areg` (set by the caller) */
    uint64_t w_base; /* static weight base (HBM byte) */
    unsigned areg;   /* A register of a dynamic weight */
    uint32_t K_p, N_p;
    int bf16_plain; /* precision: 0 MXFP8 (weight type), 1 plain BF16 (KV type) */
    const struct plena_tensor *y;
    int stream_f32;       /* STREAM_F32 (router) instead of KSPLIT_BF16 */
    uint32_t chunk_tiles; /* C (KSPLIT_BF16) */
};
int plena_emit_projection(struct plena_ctx *c, const struct plena_proj_stages *st,
                          const struct plena_proj *pj);

int plena_moe_accumulator_init(struct plena_ctx *c, const struct plena_tensor *acc, uint32_t row0,
                               uint32_t nrows);
int plena_moe_gather_pair_row(struct plena_ctx *c, const struct plena_tensor *slot,
                              const struct plena_tensor *x, unsigned gp_t);
int plena_moe_expert_weight_address(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                    unsigned gp_p, const uint8_t a_regs[3]);
int plena_moe_expert_projection(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                enum plena_proj_kind which, const struct plena_tensor *x,
                                const struct plena_tensor *y, unsigned areg);
int plena_moe_expert_bias_add(struct plena_ctx *c, const struct plena_tensor *y,
                              const struct plena_tensor *bias, unsigned gp_p);
int plena_moe_expert_activation(struct plena_ctx *c, enum plena_stage stage,
                                enum plena_act_policy policy, const struct plena_tensor *gate,
                                const struct plena_tensor *up, const struct plena_tensor *scratch,
                                uint32_t rows, uint32_t width);
int plena_moe_broadcast_row_weights(struct plena_ctx *c, enum plena_stage stage,
                                    const struct plena_tensor *dst, uint32_t row0, uint32_t nrows,
                                    unsigned fp_reg, uint32_t fp_imm, uint32_t fp_step);
int plena_moe_scatter_add(struct plena_ctx *c, const struct plena_tensor *acc, unsigned gp_t,
                          const struct plena_tensor *yd);
int plena_moe_shared_expert(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                            const struct plena_tensor *x, uint32_t t_rows,
                            const struct plena_tensor *s);
int plena_moe_shared_gate(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                          const struct plena_tensor *x, uint32_t t_rows,
                          const struct plena_tensor *wg, uint32_t gate_off,
                          const struct plena_tensor *s);
int plena_moe_combine_shared_and_routed(struct plena_ctx *c, const struct plena_tensor *acc,
                                        const struct plena_tensor *s, uint32_t t_rows);

const char *plena_topk_encoding_name(enum plena_topk_encoding e);
const char *plena_pair_form_name(enum plena_pair_form f);

#endif
