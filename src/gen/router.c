/* The device routers (docs/lowering.md "Routers"): one token's routing from
 * its eb logits rows to k expert ids (INT SRAM) and k weights (FP SRAM), for
 * every router of model.h that has a device plan (plena_router_plan),
 * composed of existing instructions:
 *
 *   VTOPK             V_TOPK alone: its softmax over the selected logits is
 *                     gpt-oss's weight and the renormalised softmax over E
 *   SOFTMAX           softmax over E on the vector unit (max, exp, sum,
 *                     1/sum; lanes beyond E masked with -inf), weights p[id]
 *   SIGMOID           sigmoid on the vector unit, weights s[id]
 *   SIGMOID_SELECTED  V_TOPK on the logits, weight sigmoid(l[id]) in scalar
 *
 * with, where the router has them, the selection bias (a VRAM row add),
 * group-limited selection (per group its lanes under a 0 / -inf mask row,
 * its score by V_RED_MAX or V_TOPK(E, 2) and two lane reads, the groups by
 * V_TOPK(G, topk_group) of the score row, the chosen groups' 0 / 1 rows
 * summed and turned into 0 / -inf by 1/x, x -1, +1), then normalisation
 * (sum + eps, max(sum, eps), L1) and routed scaling in scalar.
 *
 * A lane x of a VRAM row reaches a scalar register exactly as V_RED_SUM of
 * the row times a one-hot row (x x 1 and zeros): the ISA has no lane read,
 * and composition expresses one, so no instruction is added (docs/design.md
 * "Device routers"). ref/ref.c mirrors every step bit for bit; every
 * instruction is billed to router_topk. */
#include <string.h>

#include "gen/emit.h"
#include "gen/moe.h"

static const enum plena_stage S = PLENA_STAGE_ROUTER_TOPK;

int plena_moe_router_on_device(const struct plena_router *r)
{
    struct plena_router_plan pl;
    plena_router_plan(r, &pl);
    return pl.lowering != PLENA_RLOWER_NONE;
}

int gen_router_custom(const struct plena_moe_cfg *cfg)
{
    struct plena_router_plan pl;
    plena_router_plan(&cfg->router, &pl);
    return cfg->routing == PLENA_ROUTING_DEVICE && pl.lowering != PLENA_RLOWER_VTOPK;
}

int gen_router_scratch(struct plena_ctx *c, struct gen_router *R)
{
    const uint32_t eb = c->map->eb, V = c->m->vlen;
    if (R->plan.scores && gen_valloc(c, eb, V, "router_s", &R->s)) return c->p->status;
    if (R->plan.select == PLENA_RROWS_BIASED || R->plan.value == PLENA_RROWS_BIASED)
        if (gen_valloc(c, eb, V, "router_q", &R->q)) return c->p->status;
    if (gen_valloc(c, 1, V, "router_t", &R->t) || gen_valloc(c, eb, V, "router_t2", &R->t2))
        return c->p->status;
    if (R->plan.groups && (gen_valloc(c, eb, V, "router_sel", &R->sel) ||
                           gen_valloc(c, 1, V, "router_grow", &R->grow)))
        return c->p->status;
    return 0;
}

uint64_t gen_router_sel_rows(const struct gen_router *R)
{
    if (R->plan.groups) return R->sel.base;
    if (R->plan.select == PLENA_RROWS_BIASED) return R->q.base;
    if (R->plan.select == PLENA_RROWS_SCORE) return R->s.base;
    return 0;
}

/* ---- helpers: the register roles of one token's routing ---- */

struct rregs {
    unsigned gL, gW, gI;         /* the caller's: logits rows, weights, ids */
    unsigned gA, gB, gD, gT, gE; /* address scratch */
    unsigned gG, c1;             /* a walking pointer, a loop counter */
    unsigned gX;                 /* the selection rows */
    unsigned fA, fB, fV, fC;     /* FP scratch */
};

/* gX = the base of rows `which` (the logits are at gL). */
static void rows_base(struct plena_ctx *c, const struct gen_router *R, const struct rregs *g,
                      enum plena_router_rows which, unsigned gX)
{
    if (which == PLENA_RROWS_LOGITS)
        plena_emit(c, S, PLENA_OP_S_ADDI_INT, gX, g->gL, 0, 0, 0, 0);
    else
        plena_emit_li(c, S, gX, (which == PLENA_RROWS_SCORE ? R->s.base : R->q.base));
}

/* Row r of the rows at gX into gY (gY = gX + r x VLEN). */
static void row_at(struct plena_ctx *c, unsigned gY, unsigned gX, uint32_t r)
{
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, gY, gX, 0, 0, 0, r * c->m->vlen);
}

/* For every row r: d_r = op(a_r, b_r) (VV, b != NULL) or op(a_r, F[f]) (VF,
 * unary): a's rows from gX (kept), d and b static tensors. Uses gB, gD, gT. */
static void rows_op(struct plena_ctx *c, const struct rregs *g, enum plena_op op,
                    const struct plena_tensor *d, unsigned gX, const struct plena_tensor *b,
                    unsigned f)
{
    const uint32_t V = c->m->vlen;
    for (uint32_t r = 0; r < c->map->eb; r++) {
        plena_emit_li(c, S, g->gD, d->base + (uint64_t)r * V);
        row_at(c, g->gT, gX, r);
        if (b) plena_emit_li(c, S, g->gB, b->base + (uint64_t)r * V);
        plena_emit(c, S, op, g->gD, g->gT, b ? g->gB : f, 0, 0, 0);
    }
}

/* F[f] = lane e of the rows at gX, e = the expert id in gE (clobbered):
 * F = 0, then per row F += sum(row x eye[e] row). Uses gB, gT. */
static void extract(struct plena_ctx *c, const struct gen_router *R, const struct rregs *g,
                    unsigned f, unsigned gX)
{
    const uint32_t V = c->m->vlen, eb = c->map->eb;
    plena_emit(c, S, PLENA_OP_S_ADD_FP, f, 0, 0, 0, 0, 0);
    plena_emit_li(c, S, g->gT, (uint64_t)eb * V);
    plena_emit(c, S, PLENA_OP_S_MUL_INT, g->gE, g->gE, g->gT, 0, 0, 0);
    plena_emit_li(c, S, g->gT, R->eye.base);
    plena_emit(c, S, PLENA_OP_S_ADD_INT, g->gE, g->gE, g->gT, 0, 0, 0);
    plena_emit_li(c, S, g->gT, R->t.base);
    for (uint32_t r = 0; r < eb; r++) {
        row_at(c, g->gB, gX, r);
        plena_emit(c, S, PLENA_OP_V_MUL_VV, g->gT, g->gB, g->gE, 0, 0, 0);
        plena_emit(c, S, PLENA_OP_V_RED_SUM, f, g->gT, 0, 0, 0, 0);
        if (r + 1 < eb) plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gE, g->gE, 0, 0, 0, V);
    }
}

/* TOPK := (n << 8) | m (gT scratch). */
static void set_topk(struct plena_ctx *c, unsigned gT, uint32_t n, uint32_t m)
{
    plena_emit_li(c, S, gT, ((uint64_t)n << 8) | m);
    plena_emit(c, S, PLENA_OP_C_SET_TOPK_REG, gT, 0, 0, 0, 0, 0);
}

/* ---- the steps ---- */

/* Scores into R->s: softmax over E (pad lanes -inf first) or sigmoid. */
static void scores(struct plena_ctx *c, const struct gen_router *R, const struct rregs *g)
{
    const struct plena_moe_map *mp = c->map;
    const uint32_t eb = mp->eb;
    if (R->plan.lowering == PLENA_RLOWER_SIGMOID) { /* s = 1 / (1 + exp(-1 x l)) */
        gen_ld_const(c, S, g->fC, g->gT, mp->off_minus_one);
        rows_op(c, g, PLENA_OP_V_MUL_VF, &R->s, g->gL, NULL, g->fC);
        plena_emit_li(c, S, g->gA, R->s.base);
        rows_op(c, g, PLENA_OP_V_EXP_V, &R->s, g->gA, NULL, 0);
        gen_ld_const(c, S, g->fC, g->gT, mp->off_one);
        rows_op(c, g, PLENA_OP_V_ADD_VF, &R->s, g->gA, NULL, g->fC);
        rows_op(c, g, PLENA_OP_V_RECI_V, &R->s, g->gA, NULL, 0);
        return;
    }
    /* softmax: src = l (+ pad), m = max, t2 = exp(src - m), p = t2 x 1/sum */
    unsigned gSrc = g->gL;
    if (R->pad.rows) {
        rows_op(c, g, PLENA_OP_V_ADD_VV, &R->s, g->gL, &R->pad, 0);
        plena_emit_li(c, S, g->gA, R->s.base);
        gSrc = g->gA;
    }
    gen_ld_const(c, S, g->fA, g->gT, mp->off_neg_inf);
    for (uint32_t r = 0; r < eb; r++) {
        row_at(c, g->gT, gSrc, r);
        plena_emit(c, S, PLENA_OP_V_RED_MAX, g->fA, g->gT, 0, 0, 0, 0);
    }
    rows_op(c, g, PLENA_OP_V_SUB_VF, &R->t2, gSrc, NULL, g->fA);
    plena_emit_li(c, S, g->gA, R->t2.base);
    rows_op(c, g, PLENA_OP_V_EXP_V, &R->t2, g->gA, NULL, 0);
    plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fB, 0, 0, 0, 0, 0);
    for (uint32_t r = 0; r < eb; r++) {
        row_at(c, g->gT, g->gA, r);
        plena_emit(c, S, PLENA_OP_V_RED_SUM, g->fB, g->gT, 0, 0, 0, 0);
    }
    plena_emit(c, S, PLENA_OP_S_RECI_FP, g->fB, g->fB, 0, 0, 0, 0);
    rows_op(c, g, PLENA_OP_V_MUL_VF, &R->s, g->gA, NULL, g->fB);
}

/* Group-limited selection: R->sel = the selection rows at gX in the
 * topk_group best groups, -inf elsewhere. */
static void groups(struct plena_ctx *c, const struct gen_router *R, const struct plena_moe_cfg *cfg,
                   const struct rregs *g, unsigned gX)
{
    const struct plena_router *r = &cfg->router;
    const struct plena_moe_map *mp = c->map;
    const uint32_t V = c->m->vlen, eb = mp->eb, G = r->n_group, per = cfg->E / G;
    const uint32_t grow = mp->fp_base + mp->off_grow, gw = mp->fp_base + mp->off_gw;
    const uint32_t gsel = mp->int_base + mp->gsel_off;
    const int top2 = r->group_score == PLENA_GROUP_TOP2_SUM && per >= 2;
    /* per group g: t2 = x + gin[g] (its lanes kept, the others -inf), then
     * its score (the max, or the sum of its top two) into FP grow[g] */
    if (top2)
        set_topk(c, g->gT, cfg->E, 2);
    else
        gen_ld_const(c, S, g->fC, g->gT, mp->off_neg_inf);
    plena_emit_li(c, S, g->gA, R->gin.base);
    plena_emit_li(c, S, g->gG, grow);
    plena_loop_begin(c, S, g->c1, G);
    for (uint32_t row = 0; row < eb; row++) {
        plena_emit_li(c, S, g->gD, R->t2.base + (uint64_t)row * V);
        row_at(c, g->gB, gX, row);
        row_at(c, g->gT, g->gA, row);
        plena_emit(c, S, PLENA_OP_V_ADD_VV, g->gD, g->gB, g->gT, 0, 0, 0);
    }
    if (top2) {
        plena_emit_li(c, S, g->gD, gw);
        plena_emit_li(c, S, g->gB, R->t2.base);
        plena_emit_li(c, S, g->gT, gsel);
        plena_emit(c, S, PLENA_OP_V_TOPK, g->gD, g->gB, g->gT, 15, 0, 0);
        plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fA, 0, 0, 0, 0, 0);
        for (uint32_t q = 0; q < 2; q++) {
            plena_emit(c, S, PLENA_OP_S_LD_INT, g->gE, 0, 0, 0, 0, gsel + q);
            extract(c, R, g, g->fV, gX);
            plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fA, g->fA, g->fV, 0, 0, 0);
        }
    } else {
        plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fA, g->fC, 0, 0, 0, 0); /* -inf */
        for (uint32_t row = 0; row < eb; row++) {
            plena_emit_li(c, S, g->gT, R->t2.base + (uint64_t)row * V);
            plena_emit(c, S, PLENA_OP_V_RED_MAX, g->fA, g->gT, 0, 0, 0, 0);
        }
    }
    plena_emit(c, S, PLENA_OP_S_ST_FP, g->fA, g->gG, 0, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gG, g->gG, 0, 0, 0, 1);
    plena_emit_addi(c, S, g->gA, g->gA, (uint64_t)eb * V, g->gT);
    plena_loop_end(c, S);
    /* the groups: V_TOPK(G, topk_group) of the score row */
    plena_emit_li(c, S, g->gA, grow);
    plena_emit_li(c, S, g->gB, R->grow.base);
    plena_emit(c, S, PLENA_OP_S_MAP_V_FP, g->gB, g->gA, 0, 0, 0, 0);
    set_topk(c, g->gT, G, r->topk_group);
    plena_emit_li(c, S, g->gD, gw);
    plena_emit_li(c, S, g->gT, gsel);
    plena_emit(c, S, PLENA_OP_V_TOPK, g->gD, g->gB, g->gT, 15, 0, 0);
    /* t2 = the sum of the chosen groups' 0 / 1 rows (t2 = 0 first: the FP zero row) */
    plena_emit_li(c, S, g->gA, mp->fp_base);
    for (uint32_t row = 0; row < eb; row++) {
        plena_emit_li(c, S, g->gB, R->t2.base + (uint64_t)row * V);
        plena_emit(c, S, PLENA_OP_S_MAP_V_FP, g->gB, g->gA, 0, 0, 0, 0);
    }
    plena_emit_li(c, S, g->gG, gsel);
    plena_loop_begin(c, S, g->c1, r->topk_group);
    plena_emit(c, S, PLENA_OP_S_LD_INT, g->gE, g->gG, 0, 0, 0, 0);
    plena_emit_li(c, S, g->gT, (uint64_t)eb * V);
    plena_emit(c, S, PLENA_OP_S_MUL_INT, g->gE, g->gE, g->gT, 0, 0, 0);
    plena_emit_li(c, S, g->gT, R->gind.base);
    plena_emit(c, S, PLENA_OP_S_ADD_INT, g->gE, g->gE, g->gT, 0, 0, 0);
    for (uint32_t row = 0; row < eb; row++) {
        plena_emit_li(c, S, g->gD, R->t2.base + (uint64_t)row * V);
        row_at(c, g->gT, g->gE, row);
        plena_emit(c, S, PLENA_OP_V_ADD_VV, g->gD, g->gD, g->gT, 0, 0, 0);
    }
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gG, g->gG, 0, 0, 0, 1);
    plena_loop_end(c, S);
    /* 0 / 1 -> 0 / -inf: 1/x (1, +inf), x -1 (-1, -inf), +1 (0, -inf); sel = x + it */
    plena_emit_li(c, S, g->gA, R->t2.base);
    rows_op(c, g, PLENA_OP_V_RECI_V, &R->t2, g->gA, NULL, 0);
    gen_ld_const(c, S, g->fC, g->gT, mp->off_minus_one);
    rows_op(c, g, PLENA_OP_V_MUL_VF, &R->t2, g->gA, NULL, g->fC);
    gen_ld_const(c, S, g->fC, g->gT, mp->off_one);
    rows_op(c, g, PLENA_OP_V_ADD_VF, &R->t2, g->gA, NULL, g->fC);
    rows_op(c, g, PLENA_OP_V_ADD_VV, &R->sel, gX, &R->t2, 0);
    set_topk(c, g->gT, cfg->E, cfg->k); /* the main shape again */
}

/* The weights: w_j = lane ids[j] of the value rows (SIGMOID_SELECTED: its
 * sigmoid), summed in rank order, then x 1/den (den = sum + eps, max(sum,
 * eps) or sum) and x scaling, each rounded to BF16. */
static void weights(struct plena_ctx *c, const struct gen_router *R,
                    const struct plena_moe_cfg *cfg, const struct rregs *g)
{
    const struct plena_router *r = &cfg->router;
    const struct plena_moe_map *mp = c->map;
    const int sig = R->plan.lowering == PLENA_RLOWER_SIGMOID_SELECTED;
    plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fA, 0, 0, 0, 0, 0); /* the sum */
    if (sig) gen_ld_const(c, S, g->fC, g->gT, mp->off_one);
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gG, 0, 0, 0, 0, 0); /* j */
    plena_loop_begin(c, S, g->c1, cfg->k);
    plena_emit(c, S, PLENA_OP_S_ADD_INT, g->gE, g->gI, g->gG, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_LD_INT, g->gE, g->gE, 0, 0, 0, 0);
    rows_base(c, R, g, R->plan.value, g->gD);
    extract(c, R, g, g->fV, g->gD);
    if (sig) { /* 1 / (1 + exp(0 - l)) */
        plena_emit(c, S, PLENA_OP_S_SUB_FP, g->fV, 0, g->fV, 0, 0, 0);
        plena_emit(c, S, PLENA_OP_S_EXP_FP, g->fV, g->fV, 0, 0, 0, 0);
        plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fV, g->fV, g->fC, 0, 0, 0);
        plena_emit(c, S, PLENA_OP_S_RECI_FP, g->fV, g->fV, 0, 0, 0, 0);
    }
    plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fA, g->fA, g->fV, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_ADD_INT, g->gT, g->gW, g->gG, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_ST_FP, g->fV, g->gT, 0, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gG, g->gG, 0, 0, 0, 1);
    plena_loop_end(c, S);
    const int norm = r->norm != PLENA_NORM_NONE, scale = mp->c_rsf != 1.0f;
    if (!norm && !scale) return;
    if (norm) {
        if (r->norm == PLENA_NORM_SUM && mp->c_reps != 0.0f) {
            gen_ld_const(c, S, g->fC, g->gT, mp->off_reps);
            plena_emit(c, S, PLENA_OP_S_ADD_FP, g->fA, g->fA, g->fC, 0, 0, 0);
        } else if (r->norm == PLENA_NORM_SUM_CLAMPED) {
            gen_ld_const(c, S, g->fC, g->gT, mp->off_reps);
            plena_emit(c, S, PLENA_OP_S_MAX_FP, g->fA, g->fA, g->fC, 0, 0, 0);
        }
        plena_emit(c, S, PLENA_OP_S_RECI_FP, g->fA, g->fA, 0, 0, 0, 0);
    }
    if (scale) gen_ld_const(c, S, g->fC, g->gT, mp->off_rsf);
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gT, g->gW, 0, 0, 0, 0);
    plena_loop_begin(c, S, g->c1, cfg->k);
    plena_emit(c, S, PLENA_OP_S_LD_FP, g->fV, g->gT, 0, 0, 0, 0);
    if (norm) plena_emit(c, S, PLENA_OP_S_MUL_FP, g->fV, g->fV, g->fA, 0, 0, 0);
    if (scale) plena_emit(c, S, PLENA_OP_S_MUL_FP, g->fV, g->fV, g->fC, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_ST_FP, g->fV, g->gT, 0, 0, 0, 0);
    plena_emit(c, S, PLENA_OP_S_ADDI_INT, g->gT, g->gT, 0, 0, 0, 1);
    plena_loop_end(c, S);
}

int gen_router_token(struct plena_ctx *c, const struct gen_router *R,
                     const struct plena_moe_cfg *cfg, unsigned gL, unsigned gW, unsigned gI,
                     int want_weights)
{
    if (c->p->status) return c->p->status;
    if (R->plan.lowering == PLENA_RLOWER_VTOPK) {
        plena_emit(c, S, PLENA_OP_V_TOPK, gW, gL, gI, R->rmask, 0, 0);
        return c->p->status;
    }
    struct plena_regset saved = c->live;
    uint8_t r[8], f[4];
    if (plena_regs_take(c, 8, 0, 0, r) || plena_regs_take(c, 0, 4, 0, f)) return c->p->status;
    const struct rregs g = {.gL = gL,
                            .gW = gW,
                            .gI = gI,
                            .gA = r[0],
                            .gB = r[1],
                            .gD = r[2],
                            .gT = r[3],
                            .gE = r[4],
                            .gG = r[5],
                            .c1 = r[6],
                            .gX = r[7],
                            .fA = f[0],
                            .fB = f[1],
                            .fV = f[2],
                            .fC = f[3]};
    if (R->plan.scores) scores(c, R, &g);
    if (R->plan.select == PLENA_RROWS_BIASED || R->plan.value == PLENA_RROWS_BIASED) {
        plena_emit_li(c, S, g.gA, R->s.base);
        rows_op(c, &g, PLENA_OP_V_ADD_VV, &R->q, g.gA, &R->bias, 0);
    }
    rows_base(c, R, &g, R->plan.select, g.gX);
    if (R->plan.groups) {
        groups(c, R, cfg, &g, g.gX);
        plena_emit_li(c, S, g.gX, R->sel.base);
    }
    plena_emit(c, S, PLENA_OP_V_TOPK, gW, g.gX, gI, R->rmask, 0, 0);
    if (want_weights) weights(c, R, cfg, &g);
    c->live = saved;
    return c->p->status;
}
