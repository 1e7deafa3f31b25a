/* The expert-major routed section of one token block (docs/lowering.md
 * "Expert-major"), fixed routing: the block's pairs, sorted by expert on the
 * host (route_plan.h), are gathered into BLEN-row tiles of one buffer; each
 * projection then runs, per column block and K chunk, a loop over the active
 * segments that fetches the segment's expert weights once and sweeps all of
 * its tiles; the down outputs are weighted and combined into the
 * accumulator in the canonical pair order. Every row's arithmetic is the
 * pair-major lowering's (same M_MM chains, K chunks, activation, bias and
 * route-weight ops), so the output is bit-identical to it.
 *
 * The routing tables live in HBM and are streamed with H_PREFETCH_S, one
 * 64-byte record at a time, so no SRAM holds more than a record: the token
 * count is bounded by VRAM, not by the 1024-entry SRAMs. Segment tile counts
 * differ per segment and are live loop counts read from the records; all
 * other trip counts are static, so the static size does not depend on T. */
#include <string.h>

#include "gen/emit.h"
#include "gen/moe.h"
#include "gen/route_plan.h"

struct em {
    const struct plena_moe_cfg *cfg;
    const struct plena_route_plan *plan;
    const struct plena_route_block *bk;
    const struct plena_tensor *x, *acc; /* block views */
    const struct plena_tensor *b[3];    /* expert bias tables (expert_bias only) */
    const struct plena_moe_em_scratch *buf;
    unsigned aT; /* A register: base of the routing region */
};

static uint32_t int_at(struct plena_ctx *c, uint32_t off)
{
    return c->map->int_base + off;
}

static uint32_t fp_at(struct plena_ctx *c, uint32_t off)
{
    return c->map->fp_base + off;
}

/* One 64-byte record at HBM offset gOff of the routing region into SRAM
 * address `sram` (kind 0: INT SRAM, 16 words; 1: FP SRAM, 32 halves). */
static void dma_rec(struct plena_ctx *c, enum plena_stage stage, const struct em *em, unsigned gtmp,
                    unsigned gOff, uint32_t sram, int kind)
{
    plena_emit_li(c, stage, gtmp, sram);
    plena_emit(c, stage, PLENA_OP_H_PREFETCH_S, gtmp, gOff, em->aT, 0, (unsigned)kind, 0);
}

/* Rows x one column block op over a segment's rows: V_ADD_VV d, d, a with d
 * and a one pointer each, rows counted live (gnm1 = rows - 1, clobbered). */
static void live_rows_add(struct plena_ctx *c, enum plena_stage stage, unsigned gD, unsigned gA,
                          unsigned cr, unsigned gnm1, uint64_t mult)
{
    plena_loop_begin_live(c, stage, cr, gnm1, mult);
    plena_emit(c, stage, PLENA_OP_V_ADD_VV, gD, gD, gA, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gD, gD, 0, 0, 0, c->m->vlen);
    plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gA, gA, 0, 0, 0, c->m->vlen);
    plena_loop_end(c, stage);
}

/* ---- gather: every slot of the block from its token's row (or the zero row) ---- */

static int em_gather(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_GATHER, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const struct plena_moe_map *mp = c->map;
    const struct plena_moe_em_scratch *bf = em->buf;
    const int in_w = em->cfg->placement == PLENA_ROUTE_INPUT;
    const uint32_t V = c->m->vlen, nb = gen_nblk(c, &bf->xs);
    const uint64_t xs_step = (uint64_t)bf->xs.prow * V, x_step = (uint64_t)em->x->prow * V;
    struct plena_regset saved = c->live;
    uint8_t g[12], f[2];
    if (plena_regs_take(c, 12, 0, 0, g) || plena_regs_take(c, 0, in_w ? 2 : 1, 0, f))
        return c->p->status;
    unsigned cg = g[0], ci = g[1], cb = g[2], gOff = g[3], gI = g[4], gT = g[5], gD = g[6],
             gDc = g[7], gS = g[8], scr = g[9], gOffW = g[10], gIW = g[11];
    unsigned fone = f[0], fw = in_w ? f[1] : 0;
    plena_prog_comment(c->p, "expert-major gather: %u slots in %u segments", em->bk->n_slots,
                       em->bk->n_seg);
    gen_ld_const(c, s, fone, scr, mp->off_one);
    plena_emit_li(c, s, gOff, em->bk->gather_off);
    if (in_w) plena_emit_li(c, sw, gOffW, em->bk->in_w_off);
    plena_emit_li(c, s, gD, bf->xs.base);
    plena_loop_begin_t(c, s, cg, em->bk->n_groups);
    dma_rec(c, s, em, gI, gOff, int_at(c, mp->em_gbuf_off), 0); /* leaves gI at the buffer */
    if (in_w) dma_rec(c, sw, em, gIW, gOffW, fp_at(c, mp->em_iw_off), 1);
    plena_loop_begin(c, s, ci, PLENA_ROUTE_REC_INTS);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gT, gI, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gI, gI, 0, 0, 0, 1);
    plena_emit_li(c, s, gS, em->x->base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gS, gS, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gDc, gD, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, cb, nb);
    plena_emit(c, s, PLENA_OP_V_MUL_VF, gDc, gS, fone, 0, 0, 0); /* exact copy */
    if (lb) {
        plena_emit_addi(c, s, gDc, gDc, xs_step, scr);
        plena_emit_addi(c, s, gS, gS, x_step, scr);
    }
    plena_loop_end(c, s);
    if (in_w) { /* Llama-4: the expert input is scaled by the route weight */
        plena_emit(c, sw, PLENA_OP_S_LD_FP, fw, gIW, 0, 0, 0, 0);
        plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gIW, gIW, 0, 0, 0, 1);
        plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gDc, gD, 0, 0, 0, 0);
        int lw = plena_loop_begin(c, sw, cb, nb);
        plena_emit(c, sw, PLENA_OP_V_MUL_VF, gDc, gDc, fw, 0, 0, 0);
        if (lw) plena_emit_addi(c, sw, gDc, gDc, xs_step, scr);
        plena_loop_end(c, sw);
    }
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gD, gD, 0, 0, 0, V);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gOff, gOff, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
    if (in_w) plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gOffW, gOffW, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
    plena_loop_end(c, s);
    c->live = saved;
    return c->p->status;
}

/* ---- one projection over every segment ---- */

static int em_projection(struct plena_ctx *c, const struct em *em, enum plena_proj_kind which)
{
    const enum plena_stage sa = PLENA_STAGE_EXPERT_WEIGHT_ADDRESS,
                           sp = PLENA_STAGE_EXPERT_WEIGHT_PREFETCH,
                           sc = PLENA_STAGE_EXPERT_PROJECTION;
    const struct plena_moe_map *mp = c->map;
    const struct plena_moe_em_scratch *bf = em->buf;
    const struct plena_route_block *bk = em->bk;
    const int down = which == PLENA_PROJ_DOWN;
    const struct plena_tensor *x = down ? &bf->yu : &bf->xs;
    const struct plena_tensor *y = down ? &bf->xs : which == PLENA_PROJ_GATE ? &bf->yg : &bf->yu;
    const uint32_t K_p = down ? mp->I_p : mp->H_p, N_p = down ? mp->H_p : mp->I_p;
    const uint32_t nct = K_p / c->m->mlen;
    uint32_t chunk = em->cfg->chunk_tiles ? em->cfg->chunk_tiles : 4;
    if (chunk > nct) chunk = nct;
    const uint32_t nch = gen_cdiv(nct, chunk), seg_tiles = bk->n_slots / c->m->blen;
    struct plena_proj pj = {.x = x, .rows = 1, .dynamic = 1, .K_p = K_p, .N_p = N_p, .y = y};
    struct plena_regset saved = c->live;
    uint8_t a[1], g[4];
    if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 4, 0, 0, g)) return c->p->status;
    const unsigned aW = a[0], cs = g[0], gOff = g[1], gRow = g[2], gN = g[3];
    plena_prog_comment(c->p, "expert-major %s projection over %u segments",
                       which == PLENA_PROJ_GATE ? "gate"
                       : which == PLENA_PROJ_UP ? "up"
                                                : "down",
                       bk->n_seg);
    /* SCALE and STRIDE once for the projection (every segment's entry has
     * the same [K_p, N_p] shape) */
    plena_emit_li(c, sp, gN, (uint64_t)K_p * N_p);
    plena_emit(c, sp, PLENA_OP_C_SET_SCALE_REG, gN, 0, 0, 0, 0, 0);
    plena_emit_li(c, sp, gN, N_p);
    plena_emit(c, sp, PLENA_OP_C_SET_STRIDE_REG, gN, 0, 0, 0, 0, 0);
    const uint64_t blk_mult = c->p->mult;
    for (uint32_t cb = 0; cb < N_p / c->m->mlen && !c->p->status; cb++)
        for (uint32_t q = 0; q < nch && !c->p->status; q++) {
            const uint32_t kt0 = q * chunk, ns = nct - kt0 < chunk ? nct - kt0 : chunk;
            const struct plena_tensor *d = q == 0 ? y : &bf->ytmp;
            plena_emit_li(c, sa, gOff, bk->seg_off);
            plena_loop_begin_t(c, sa, cs, bk->n_seg);
            dma_rec(c, sa, em, gN, gOff, int_at(c, mp->em_seg_off), 0);
            const uint32_t rec = int_at(c, mp->em_seg_off);
            plena_emit(c, sa, PLENA_OP_S_LD_INT, gRow, 0, 0, 0, 0,
                       rec + PLENA_SEG_ADDR_HI0 + 2 * (uint32_t)which);
            plena_emit(c, sa, PLENA_OP_S_LD_INT, gN, 0, 0, 0, 0,
                       rec + PLENA_SEG_ADDR_HI0 + 2 * (uint32_t)which + 1);
            plena_emit(c, sa, PLENA_OP_C_SET_ADDR_REG, aW, gRow, gN, 0, 0, 0);
            gen_prefetch_chunk(c, sp, &pj, aW, cb, kt0, ns, 1);
            plena_emit(c, sc, PLENA_OP_S_LD_INT, gRow, 0, 0, 0, 0, rec + PLENA_SEG_ROW_OFF);
            plena_emit(c, sc, PLENA_OP_S_LD_INT, gN, 0, 0, 0, 0, rec + PLENA_SEG_TILES_M1);
            struct gen_live_rows lr = {gRow, gN, blk_mult * seg_tiles};
            if (!gen_fast_chunk(c, x, d, q == 0 ? cb : 0, kt0, ns, 0, sc, &lr) && !c->p->status)
                plena_prog_fail(c->p, PLENA_GEN_SHAPE,
                                "expert-major projection: the chunk kernel does not fit "
                                "(MLEN %u, BLEN %u, chunk %u tiles)",
                                c->m->mlen, c->m->blen, ns);
            if (q >= 1) { /* Y = bf16(Y + bf16(P_q)) over the segment's rows */
                struct plena_regset in = c->live;
                uint8_t r[3];
                if (plena_regs_take(c, 3, 0, 0, r)) return c->p->status;
                plena_emit(c, sc, PLENA_OP_S_LD_INT, gN, 0, 0, 0, 0, rec + PLENA_SEG_ROWS_M1);
                plena_emit_li(c, sc, r[0], plena_row(y, 0, cb, c->m->vlen));
                plena_emit(c, sc, PLENA_OP_S_ADD_INT, r[0], r[0], gRow, 0, 0, 0);
                plena_emit_li(c, sc, r[1], bf->ytmp.base);
                plena_emit(c, sc, PLENA_OP_S_ADD_INT, r[1], r[1], gRow, 0, 0, 0);
                live_rows_add(c, sc, r[0], r[1], r[2], gN, blk_mult * bk->n_slots);
                c->live = in;
            }
            plena_emit(c, sa, PLENA_OP_S_ADDI_INT, gOff, gOff, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
            plena_loop_end(c, sa);
        }
    c->live = saved;
    return c->p->status;
}

/* ---- expert biases (GPT-OSS): each segment's rows += its expert's bias row ---- */

static int em_bias(struct plena_ctx *c, const struct em *em, enum plena_proj_kind which)
{
    const enum plena_stage s = PLENA_STAGE_EXPERT_BIAS;
    const struct plena_moe_map *mp = c->map;
    const struct plena_moe_em_scratch *bf = em->buf;
    const struct plena_tensor *y = which == PLENA_PROJ_DOWN   ? &bf->xs
                                   : which == PLENA_PROJ_GATE ? &bf->yg
                                                              : &bf->yu;
    const struct plena_tensor *b = em->b[which];
    const uint32_t V = c->m->vlen, nb = gen_nblk(c, y);
    const uint32_t rec = int_at(c, mp->em_seg_off);
    struct plena_regset saved = c->live;
    uint8_t g[10];
    if (plena_regs_take(c, 10, 0, 0, g)) return c->p->status;
    unsigned cs = g[0], cr = g[1], cb = g[2], gOff = g[3], gRow = g[4], gB = g[5], gN = g[6],
             gY = g[7], gBc = g[8], scr = g[9];
    plena_prog_comment(c->p, "expert-major bias");
    plena_emit_li(c, s, gOff, em->bk->seg_off);
    plena_loop_begin_t(c, s, cs, em->bk->n_seg);
    dma_rec(c, s, em, gN, gOff, rec, 0);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gRow, 0, 0, 0, 0, rec + PLENA_SEG_ROW_OFF);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gB, 0, 0, 0, 0, rec + PLENA_SEG_BIAS_OFF);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gN, 0, 0, 0, 0, rec + PLENA_SEG_ROWS_M1);
    plena_emit_li(c, s, scr, y->base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gRow, gRow, scr, 0, 0, 0);
    plena_emit_li(c, s, scr, b->base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gB, gB, scr, 0, 0, 0);
    plena_loop_begin_live(c, s, cr, gN, c->p->mult / em->bk->n_seg * em->bk->n_slots);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gY, gRow, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gBc, gB, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, cb, nb);
    plena_emit(c, s, PLENA_OP_V_ADD_VV, gY, gY, gBc, 0, 0, 0);
    if (lb) {
        plena_emit_addi(c, s, gY, gY, (uint64_t)y->prow * V, scr);
        plena_emit_addi(c, s, gBc, gBc, (uint64_t)b->prow * V, scr);
    }
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gRow, gRow, 0, 0, 0, V);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gOff, gOff, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
    plena_loop_end(c, s);
    c->live = saved;
    return c->p->status;
}

/* ---- activation over every slot, rows outer (one row's blocks per
 * iteration, so no loop iteration grows with the slot count) ---- */

static int em_activation(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_EXPERT_ACTIVATION;
    const struct plena_moe_em_scratch *bf = em->buf;
    const int clamp = em->cfg->activation == PLENA_ACT_GPT_OSS_CLAMP_GATED;
    const uint32_t V = c->m->vlen, nb = c->map->I_p / V;
    const uint64_t step = (uint64_t)bf->yg.prow * V;
    struct plena_regset saved = c->live;
    uint8_t g[9], f[4];
    if (plena_regs_take(c, 9, 0, 0, g) || plena_regs_take(c, 0, clamp ? 4 : 2, 0, f))
        return c->p->status;
    unsigned cr = g[0], cb = g[1], gG = g[2], gU = g[3], gS = g[4], gGc = g[5], gUc = g[6],
             gSc = g[7], scr = g[8];
    unsigned fone = f[0], fna = f[1], flp = clamp ? f[2] : 0, fln = clamp ? f[3] : 0;
    gen_ld_const(c, s, fone, scr, c->map->off_one);
    gen_ld_const(c, s, fna, scr, c->map->off_na_routed);
    if (clamp) {
        gen_ld_const(c, s, flp, scr, c->map->off_lp);
        gen_ld_const(c, s, fln, scr, c->map->off_ln);
    }
    plena_emit_li(c, s, gG, bf->yg.base);
    plena_emit_li(c, s, gU, bf->yu.base);
    plena_emit_li(c, s, gS, bf->ys.base);
    plena_loop_begin_t(c, s, cr, em->bk->n_slots);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gGc, gG, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gUc, gU, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gSc, gS, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, cb, nb);
    /* the ops, operands and rounding points of plena_moe_expert_activation */
    if (clamp) {
        plena_emit(c, s, PLENA_OP_V_MIN_VF, gGc, gGc, flp, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_V_MIN_VF, gUc, gUc, flp, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_V_MAX_VF, gUc, gUc, fln, 0, 0, 0);
    }
    plena_emit(c, s, PLENA_OP_V_MUL_VF, gSc, gGc, fna, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_V_EXP_V, gSc, gSc, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_V_ADD_VF, gSc, gSc, fone, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_V_RECI_V, gSc, gSc, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_V_MUL_VV, gGc, gGc, gSc, 0, 0, 0);
    if (clamp) plena_emit(c, s, PLENA_OP_V_ADD_VF, gUc, gUc, fone, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_V_MUL_VV, gUc, gUc, gGc, 0, 0, 0);
    if (lb) {
        plena_emit_addi(c, s, gGc, gGc, step, scr);
        plena_emit_addi(c, s, gUc, gUc, step, scr);
        plena_emit_addi(c, s, gSc, gSc, step, scr);
    }
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gG, gG, 0, 0, 0, V);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gU, gU, 0, 0, 0, V);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gS, gS, 0, 0, 0, V);
    plena_loop_end(c, s);
    c->live = saved;
    return c->p->status;
}

/* ---- combine: acc[t] = bf16(acc[t] + bf16(o_p * w_p)) for p = t*k + 0..k-1 ---- */

static int em_combine(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_SCATTER_COMBINE, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const struct plena_moe_map *mp = c->map;
    const struct plena_moe_em_scratch *bf = em->buf;
    const struct plena_route_plan *pl = em->plan;
    const int out_w = em->cfg->placement == PLENA_ROUTE_OUTPUT;
    const uint32_t V = c->m->vlen, k = em->cfg->k, nb = gen_nblk(c, em->acc);
    const uint64_t y_step = (uint64_t)bf->xs.prow * V, a_step = (uint64_t)em->acc->prow * V;
    struct plena_regset saved = c->live;
    uint8_t g[13], f[1];
    if (plena_regs_take(c, 13, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    unsigned ct = g[0], cj = g[1], cb = g[2], gOffC = g[3], gOffW = g[4], gI = g[5], gF = g[6],
             gY = g[7], gAc = g[8], gAcc = g[9], gTr = g[10], scr = g[11], gT = g[12];
    unsigned fw = f[0];
    plena_prog_comment(c->p, "expert-major combine: %u tokens x top-%u in pair order", em->bk->n,
                       k);
    plena_emit_li(c, s, gOffC, em->bk->comb_off);
    if (out_w) plena_emit_li(c, sw, gOffW, em->bk->comb_w_off);
    plena_emit_li(c, s, gAcc, em->acc->base);
    plena_emit_li(c, s, gTr, bf->trow.base);
    plena_loop_begin_t(c, s, ct, em->bk->n);
    for (uint32_t r = 0; r < pl->comb_int_recs; r++) {
        dma_rec(c, s, em, gI, gOffC, int_at(c, mp->em_cbuf_off) + r * PLENA_ROUTE_REC_INTS, 0);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gOffC, gOffC, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
    }
    if (out_w)
        for (uint32_t r = 0; r < pl->comb_fp_recs; r++) {
            dma_rec(c, sw, em, gF, gOffW, fp_at(c, mp->em_cw_off) + r * PLENA_ROUTE_REC_HALFS, 1);
            plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gOffW, gOffW, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
        }
    plena_emit_li(c, s, gI, int_at(c, mp->em_cbuf_off));
    if (out_w) plena_emit_li(c, sw, gF, fp_at(c, mp->em_cw_off));
    plena_loop_begin(c, s, cj, k);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gT, gI, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gI, gI, 0, 0, 0, 1);
    plena_emit_li(c, s, gY, bf->xs.base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gY, gY, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gAc, gAcc, 0, 0, 0, 0);
    if (out_w) {
        plena_emit(c, sw, PLENA_OP_S_LD_FP, fw, gF, 0, 0, 0, 0);
        plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gF, gF, 0, 0, 0, 1);
    }
    int lb = plena_loop_begin(c, s, cb, nb);
    if (out_w) {
        plena_emit(c, sw, PLENA_OP_V_MUL_VF, gTr, gY, fw, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_V_ADD_VV, gAc, gAc, gTr, 0, 0, 0);
    } else {
        plena_emit(c, s, PLENA_OP_V_ADD_VV, gAc, gAc, gY, 0, 0, 0);
    }
    if (lb) {
        plena_emit_addi(c, s, gY, gY, y_step, scr);
        plena_emit_addi(c, s, gAc, gAc, a_step, scr);
    }
    plena_loop_end(c, s);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gAcc, gAcc, 0, 0, 0, V);
    plena_loop_end(c, s);
    c->live = saved;
    return c->p->status;
}

/* ---- the section ---- */

uint32_t plena_moe_em_max_tiles(const struct plena_moe_cfg *cfg, const struct plena_moe_map *mp)
{
    const struct plena_gen_machine *m = &cfg->m;
    if (!m->max_loop) return 1u << 20;
    const uint32_t C = cfg->chunk_tiles ? cfg->chunk_tiles : 4;
    /* executed instructions per tile of one segment iteration: the chunk
     * kernel (MLEN/BLEN micro-columns of C M_MMs, C-1 pointer steps, the
     * write-out and 2 steps), the row-group step and loop, the K-split add
     * (BLEN rows of 4) and, with biases, the bias rows (BLEN rows of 3 per
     * column block + 4) */
    uint64_t per = (uint64_t)(m->mlen / m->blen) * (2 * C + 3) + C + 8 + 4ull * m->blen;
    if (cfg->expert_bias) {
        uint64_t nb = (mp->H_p > mp->I_p ? mp->H_p : mp->I_p) / m->vlen;
        uint64_t bias = (uint64_t)m->blen * (3 * nb + 4);
        if (bias > per) per = bias;
    }
    const uint64_t fixed = 1000; /* record load, address, prefetch, loop control */
    if (m->max_loop <= fixed + per) return 1;
    uint64_t t = (m->max_loop - fixed) / per;
    return t > (1u << 20) ? 1u << 20 : (uint32_t)t;
}

int plena_moe_em_alloc(struct plena_ctx *c, uint32_t max_slots, struct plena_moe_em_scratch *sc)
{
    const struct plena_moe_map *mp = c->map;
    struct plena_moe_em_scratch *bf = sc;
    const uint32_t rows = gen_rup(max_slots ? max_slots : 1, PLENA_ROUTE_REC_INTS);
    if (gen_valloc(c, rows, mp->H_p, "em_rows", &bf->xs) ||
        gen_valloc(c, rows, mp->I_p, "em_gate", &bf->yg) ||
        gen_valloc(c, rows, mp->I_p, "em_up", &bf->yu) ||
        gen_valloc(c, rows, mp->I_p, "em_act_scratch", &bf->ys) ||
        gen_valloc(c, rows, c->m->vlen, "em_ksplit", &bf->ytmp) ||
        gen_valloc(c, 1, c->m->vlen, "em_weighted_row", &bf->trow))
        return c->p->status;
    return 0;
}

uint64_t plena_moe_em_scratch_elems(const struct plena_gen_machine *m,
                                    const struct plena_moe_map *mp, uint32_t max_slots)
{
    const uint64_t g = (uint64_t)m->mlen * m->vlen;
    const uint64_t rows = gen_rup(max_slots ? max_slots : 1, PLENA_ROUTE_REC_INTS);
    const uint64_t prow = (rows + m->blen - 1) / m->blen * m->blen;
    uint64_t e = 0, cols[6] = {mp->H_p, mp->I_p, mp->I_p, mp->I_p, m->vlen, m->vlen};
    for (int i = 0; i < 6; i++) {
        uint64_t r = i == 5 ? m->blen : prow;
        uint64_t n = r * ((cols[i] + m->vlen - 1) / m->vlen * m->vlen);
        e += (n + g - 1) / g * g;
    }
    return e;
}

int plena_moe_em_block(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                       const struct plena_route_plan *plan, uint32_t b,
                       const struct plena_tensor *x, const struct plena_tensor *acc,
                       const struct plena_tensor *const bias[3],
                       const struct plena_moe_em_scratch *sc)
{
    if (c->p->status) return c->p->status;
    const struct plena_moe_map *mp = c->map;
    struct em em = {cfg, plan, &plan->blk[b], x, acc, {bias[0], bias[1], bias[2]}, sc, 0};
    struct plena_regset saved = c->live;
    uint8_t a[1], g[2];
    if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 2, 0, 0, g)) return c->p->status;
    em.aT = a[0];
    c->live.gp = saved.gp; /* only the table register stays taken */
    const enum plena_stage s = PLENA_STAGE_GATHER;
    const uint64_t base = mp->route_hbm;
    plena_emit_li(c, s, g[0], base & 0xFFFFFFFFu);
    if (base >> 32) plena_emit_li(c, s, g[1], base >> 32);
    plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, em.aT, base >> 32 ? g[1] : 0, g[0], 0, 0, 0);
    em_gather(c, &em);
    em_projection(c, &em, PLENA_PROJ_GATE);
    em_projection(c, &em, PLENA_PROJ_UP);
    if (cfg->expert_bias) {
        em_bias(c, &em, PLENA_PROJ_GATE);
        em_bias(c, &em, PLENA_PROJ_UP);
    }
    em_activation(c, &em);
    em_projection(c, &em, PLENA_PROJ_DOWN);
    if (cfg->expert_bias) em_bias(c, &em, PLENA_PROJ_DOWN);
    em_combine(c, &em);
    c->live = saved;
    return c->p->status;
}
