/* The emission vocabulary the MoE emitters share (internal to gen/): VRAM
 * allocation that fails the program, tensor views, the stage-mask check of
 * the polymorphic emitters, the generic rows x column-blocks loop, constant
 * loads and the projection chunk kernels. moe.c defines them; moe.c (pair-
 * major and the layer) and expert_major.c use them. Not a public header. */
#ifndef PLENA_GEN_EMIT_H
#define PLENA_GEN_EMIT_H

#include <stdint.h>

#include "gen/moe.h"

static inline uint32_t gen_rup(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a * a;
}
static inline uint32_t gen_cdiv(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a;
}

/* Stage-mask bit of stage s (the polymorphic emitters' allowed masks). */
#define M(s) (1u << PLENA_STAGE_##s)

/* A VRAM allocator failure (message already in the error record) becomes
 * the program's sticky status. */
void gen_vram_failed(struct plena_prog *p, int rc);
int gen_valloc(struct plena_ctx *c, uint32_t rows, uint32_t cols, const char *name,
               struct plena_tensor *t);
/* The tensor seen from row row0 on (same column blocks). */
struct plena_tensor gen_view(const struct plena_tensor *x, uint32_t row0, uint32_t vlen);
int gen_stage_ok(struct plena_ctx *c, enum plena_stage stage, unsigned mask, const char *who);

/* One operand of the rows x column-blocks loop. */
struct opnd {
    const struct plena_tensor *t; /* NULL = unused */
    uint64_t base;                /* address of (row0, block 0) */
    uint32_t rstride;             /* element distance between rows */
    int fixed;                    /* same row for every iteration (one-row weight) */
    unsigned dyn;                 /* GP register added to the base at run time (0 none) */
};
enum rb_kind { RB_VV, RB_VF, RB_MAP };
struct opnd gen_od(const struct plena_tensor *t, uint32_t row0, uint32_t vlen);
struct opnd gen_none_od(void);
/* op over nrows rows x nblocks column blocks (column blocks outer); tloop: a
 * hardware row loop even for one row (token loops keep static size). */
int gen_rows_blocks(struct plena_ctx *c, enum plena_stage stage, enum plena_op op,
                    enum rb_kind kind, struct opnd d, struct opnd a, struct opnd b, unsigned freg,
                    uint32_t nrows, uint32_t nblocks, int tloop);
uint32_t gen_nblk(struct plena_ctx *c, const struct plena_tensor *t);
/* FP SRAM constant at fp_base + off into freg (gtmp: scratch GP). */
void gen_ld_const(struct plena_ctx *c, enum plena_stage stage, unsigned freg, unsigned gtmp,
                  uint32_t off);

/* The FP registers of the activation of docs/lowering.md "Layer steps":
 * 1.0, -alpha and, for gpt_oss_clamp_gated, the clamp limits +7 and -7. */
struct gen_act {
    int clamp;
    unsigned fone, fna, flp, fln;
};
/* Takes the activation's FP registers (four clamp-gated, else two) and
 * loads them from FP SRAM; na_off selects the routed or the shared -alpha
 * (gtmp: scratch GP). Returns the program status. */
int gen_act_setup(struct plena_ctx *c, enum plena_stage stage, int clamp, unsigned gtmp,
                  uint32_t na_off, struct gen_act *a);
/* The activation of one VLEN block: gate gG, up gU, scratch gS (VRAM
 * addresses), gU = act(gG, gU). The one op sequence, so pair-major and
 * expert-major round at the same points. */
void gen_act_block(struct plena_ctx *c, enum plena_stage stage, const struct gen_act *a,
                   unsigned gG, unsigned gU, unsigned gS);

/* Prefetch of ns K tiles (kt0..) of column block cb into MRAM slots 0..ns-1. */
void gen_prefetch_chunk(struct plena_ctx *c, enum plena_stage stage, const struct plena_proj *pj,
                        unsigned aw, uint32_t cb, uint32_t kt0, uint32_t ns, uint32_t bytes);

/* Row groups whose count and first row are known only at run time: grow
 * holds the row offset (rows x VLEN) added to the activation and result
 * bases, gnm1 the number of BLEN-row groups minus one (clobbered), body_mult
 * the predicted number of group iterations in the whole program. */
struct gen_live_rows {
    unsigned grow, gnm1;
    uint64_t body_mult;
};
/* The compute part of one K chunk (M_MMs and M_MM_WO of every row group and
 * micro-column) with the tile level unrolled; live NULL: ngroups static.
 * Returns 0, emitting nothing, when registers or immediates do not fit. */
int gen_fast_chunk(struct plena_ctx *c, const struct plena_tensor *x, const struct plena_tensor *d,
                   uint32_t dc, uint32_t kt0, uint32_t ns, uint32_t ngroups, enum plena_stage cs,
                   const struct gen_live_rows *live);

/* The V_TOPK encoding of cfg's (E, k) (docs/lowering.md "Routing"): rmask 0 or 1 for
 * the two upstream shapes, else the top-k register, set here with
 * C_SET_TOPK_REG from gK (clobbered). Returns the rmask operand. */
unsigned gen_topk_setup(struct plena_ctx *c, const struct plena_moe_cfg *cfg, unsigned gK,
                        enum plena_topk_encoding *enc);

/* ---- device routers (router.c, docs/lowering.md "Routers") ---- */

/* The router's VRAM tensors: the ABI constants build.c stages (rows 0:
 * absent) and one token's scratch rows, all allocated once per layer. */
struct gen_router {
    struct plena_router_plan plan;
    unsigned rmask;                /* the main V_TOPK's policy operand */
    uint32_t E, k;                 /* the main top-k shape */
    struct plena_tensor pad;       /* eb rows: 0 below E, -inf beyond (softmax, E % VLEN) */
    struct plena_tensor bias;      /* eb rows: the selection bias */
    struct plena_tensor eye;       /* E x eb rows: expert e's one-hot rows */
    struct plena_tensor gin, gind; /* G x eb rows: 0 / -inf and 1 / 0 on group g's lanes */
    struct plena_tensor s, q, t, t2,
        sel;                  /* scratch: scores, biased, lane product, temp, selection */
    struct plena_tensor grow; /* scratch: the group-score row */
};
/* Allocates the scratch rows (the ABI constants are the layer's). */
int gen_router_scratch(struct plena_ctx *c, struct gen_router *R);
/* Whether cfg's router needs router.c's sequence beyond V_TOPK alone. */
int gen_router_custom(const struct plena_moe_cfg *cfg);
/* One token's routing: from the eb logits rows at gL to k ids at INT gI and,
 * with want_weights, k weights at FP gW (V_TOPK's softmax weights
 * otherwise), every instruction billed to router_topk. gL, gW, gI are kept;
 * the TOPK register holds (E, k) again on return. */
int gen_router_token(struct plena_ctx *c, const struct gen_router *R,
                     const struct plena_moe_cfg *cfg, unsigned gL, unsigned gW, unsigned gI,
                     int want_weights);
/* The VRAM address of the rows the main V_TOPK ranks (0: the logits). */
uint64_t gen_router_sel_rows(const struct gen_router *R);

#endif
