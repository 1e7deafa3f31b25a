/* The expert-major routed section of one token block (docs/lowering.md
 * "Expert-major"): the block's pairs, sorted by expert (on the host for fixed
 * routing, route_plan.h; on the device after V_TOPK for device routing, the
 * sort below), are gathered into BLEN-row tiles of one buffer; each
 * projection then runs, per column block and K chunk, a loop over the active
 * segments that fetches the segment's expert weights once and sweeps all of
 * its tiles; the down outputs are weighted and combined into the
 * accumulator in the canonical pair order. Every row's arithmetic is the
 * pair-major lowering's (same M_MM chains, K chunks, activation, bias and
 * route-weight ops), so the output is bit-identical to it.
 *
 * Fixed routing: the routing tables live in HBM and are streamed with
 * H_PREFETCH_S, one 64-byte record at a time, so no SRAM holds more than a
 * record and the token count is bounded by VRAM, not by the 1024-entry SRAMs;
 * every count but the segments' tile counts is known when the program is
 * generated. Device routing: the ids V_TOPK wrote are sorted in INT SRAM
 * (histogram, prefix sums through count tables, scatter: the scalar ISA has
 * no shift, divide or compare, docs/design.md), so a block is as small as the
 * SRAM allows and the segment, slot and tile counts are live. Live counts are
 * read from INT SRAM; the static size never depends on T. */
#include <string.h>

#include "common/alloc.h"
#include "gen/emit.h"
#include "gen/moe.h"
#include "gen/route_plan.h"

struct em {
    const struct plena_moe_cfg *cfg;
    const struct plena_route_plan *plan; /* fixed routing only */
    const struct plena_route_block *bk;  /* fixed routing only */
    const struct plena_tensor *x, *acc;  /* block views */
    const struct plena_tensor *b[3];     /* expert bias tables (expert_bias only) */
    const struct plena_moe_em_scratch *buf;
    const struct plena_tensor *lg; /* device routing: the block's router logits */
    unsigned aT;    /* A register: base of the routing region (tables; the count table) */
    unsigned rmask; /* device routing: V_TOPK's rmask operand */
    int dev;        /* device routing: the sort's state in INT SRAM */
    uint32_t T, r0, n;
    /* device routers beyond V_TOPK alone (router.c): the router, and the
     * distance from a token's logits rows to its weights row */
    const struct gen_router *R;
    uint32_t wrow_off;
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
 * address `sram` (kind 0: INT SRAM, 16 words; 1: FP SRAM, 32 halves).
 * Leaves gtmp = sram. */
static void dma_rec(struct plena_ctx *c, enum plena_stage stage, const struct em *em, unsigned gtmp,
                    unsigned gOff, uint32_t sram, int kind)
{
    plena_emit_li(c, stage, gtmp, sram);
    plena_emit(c, stage, PLENA_OP_H_PREFETCH_S, gtmp, gOff, em->aT, 0, (unsigned)kind, 0);
}

/* Figures for the dynamic-count prediction: exact with fixed routing (the
 * plan), nominal with device routing (the ids are the device's). */
static uint32_t nominal_segs(const struct em *em)
{
    if (!em->dev) return em->bk->n_seg;
    uint32_t P = em->n * em->cfg->k;
    return P < em->cfg->E ? P : em->cfg->E;
}

static uint32_t nominal_slots(struct plena_ctx *c, const struct em *em)
{
    if (!em->dev) return em->bk->n_slots;
    return gen_rup(em->n * em->cfg->k, c->m->blen);
}

/* Loads slots - 1 into rd (device routing: the sort's scalar). */
static void load_slots_m1(struct plena_ctx *c, enum plena_stage s, unsigned rd)
{
    plena_emit(c, s, PLENA_OP_S_LD_INT, rd, 0, 0, 0, 0, int_at(c, c->map->em_scal_off + 1));
}

/* ---- segments: where their records come from ----
 * Fixed: record i of the block is DMA'd from the routing region into the
 * record buffer (static count). Device: records sit in INT SRAM, 4 words
 * each, counted live (segments - 1 at em_scal_off). Words 0..3 mean the same
 * in both (route_plan.h PLENA_SEG_*); fixed records also carry the weight
 * addresses and the bias offset, device code derives them from the id. */
struct segloop {
    unsigned cs;   /* loop counter */
    unsigned gptr; /* HBM offset of the record (fixed), its INT SRAM address (device) */
    unsigned grun; /* device: the segment's row offset (a running sum of its tiles) */
    uint64_t mult; /* predicted executions of the loop body */
};

static void seg_begin(struct plena_ctx *c, enum plena_stage s, const struct em *em,
                      struct segloop *sl, unsigned gtmp)
{
    const uint32_t ns = nominal_segs(em);
    if (!em->dev) {
        plena_emit_li(c, s, sl->gptr, em->bk->seg_off);
        plena_loop_begin_t(c, s, sl->cs, ns);
        dma_rec(c, s, em, gtmp, sl->gptr, int_at(c, c->map->em_seg_off), 0);
    } else {
        plena_emit_li(c, s, sl->gptr, int_at(c, c->map->em_rec_off));
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, sl->grun, 0, 0, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_S_LD_INT, gtmp, 0, 0, 0, 0, int_at(c, c->map->em_scal_off));
        plena_loop_begin_live(c, s, sl->cs, gtmp, c->p->mult * ns);
    }
    sl->mult = c->p->mult;
}

/* rd = tiles x BLEN x scale - 1 + add of the current device record (scratch: tmp) */
static void dev_rows(struct plena_ctx *c, enum plena_stage s, const struct segloop *sl, unsigned rd,
                     unsigned tmp, uint64_t scale, uint32_t add)
{
    plena_emit(c, s, PLENA_OP_S_LD_INT, rd, sl->gptr, 0, 0, 0, PLENA_DEV_TILES_M1);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, rd, rd, 0, 0, 0, 1);
    plena_emit_li(c, s, tmp, c->m->blen * scale);
    plena_emit(c, s, PLENA_OP_S_MUL_INT, rd, rd, tmp, 0, 0, 0);
    if (add) plena_emit(c, s, PLENA_OP_S_ADDI_INT, rd, rd, 0, 0, 0, add);
}

/* rd = word `w` of the current record (route_plan.h PLENA_SEG_*). Device
 * records hold the expert and its tiles - 1; the row offset is the running
 * sum and rows - 1 = tiles x BLEN - 1 (rd must differ from sl's registers). */
static void seg_word(struct plena_ctx *c, enum plena_stage s, const struct em *em,
                     const struct segloop *sl, unsigned rd, uint32_t w)
{
    if (!em->dev) {
        plena_emit(c, s, PLENA_OP_S_LD_INT, rd, 0, 0, 0, 0, int_at(c, c->map->em_seg_off) + w);
        return;
    }
    if (w == PLENA_SEG_EXPERT) {
        plena_emit(c, s, PLENA_OP_S_LD_INT, rd, sl->gptr, 0, 0, 0, PLENA_DEV_EXPERT);
    } else if (w == PLENA_SEG_TILES_M1) {
        plena_emit(c, s, PLENA_OP_S_LD_INT, rd, sl->gptr, 0, 0, 0, PLENA_DEV_TILES_M1);
    } else if (w == PLENA_SEG_ROW_OFF) {
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, rd, sl->grun, 0, 0, 0, 0);
    } else { /* PLENA_SEG_ROWS_M1: (tiles - 1) x BLEN + BLEN - 1 */
        struct plena_regset saved = c->live;
        uint8_t t[1];
        if (plena_regs_take(c, 1, 0, 0, t)) return;
        plena_emit(c, s, PLENA_OP_S_LD_INT, rd, sl->gptr, 0, 0, 0, PLENA_DEV_TILES_M1);
        plena_emit_li(c, s, t[0], c->m->blen);
        plena_emit(c, s, PLENA_OP_S_MUL_INT, rd, rd, t[0], 0, 0, 0);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, rd, rd, 0, 0, 0, c->m->blen - 1);
        c->live = saved;
    }
}

static void seg_end(struct plena_ctx *c, enum plena_stage s, const struct em *em,
                    const struct segloop *sl)
{
    if (em->dev) { /* next record; the row offset moves past this one's tiles */
        struct plena_regset saved = c->live;
        uint8_t t[2];
        if (plena_regs_take(c, 2, 0, 0, t)) return;
        dev_rows(c, s, sl, t[0], t[1], c->m->vlen, 0);
        plena_emit(c, s, PLENA_OP_S_ADD_INT, sl->grun, sl->grun, t[0], 0, 0, 0);
        c->live = saved;
    }
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, sl->gptr, sl->gptr, 0, 0, 0,
               em->dev ? PLENA_DEV_WORDS : PLENA_ROUTE_REC_BYTES);
    plena_loop_end(c, s);
}

/* aW = the HBM base of projection q's table entry of the record's expert:
 * read from the record (fixed), or from the id as pair-major forms it
 * (device; docs/lowering.md "Memory ABI": stride or windowed form). */
static void seg_weight_addr(struct plena_ctx *c, enum plena_stage s, const struct em *em,
                            const struct segloop *sl, enum plena_proj_kind q, unsigned aW)
{
    const struct plena_moe_map *mp = c->map;
    struct plena_regset saved = c->live;
    uint8_t g[5];
    if (plena_regs_take(c, 5, 0, 0, g)) return;
    const unsigned gE = g[0], gS = g[1], gO = g[2], gB = g[3], gH = g[4];
    if (!em->dev) {
        const uint32_t rec = int_at(c, mp->em_seg_off);
        plena_emit(c, s, PLENA_OP_S_LD_INT, gH, 0, 0, 0, 0, rec + PLENA_SEG_ADDR_HI0 + 2 * q);
        plena_emit(c, s, PLENA_OP_S_LD_INT, gB, 0, 0, 0, 0, rec + PLENA_SEG_ADDR_HI0 + 2 * q + 1);
        plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, aW, gH, gB, 0, 0, 0);
    } else if (!mp->windowed) {
        const uint32_t W = (uint32_t)(mp->table[q] >> 32);
        seg_word(c, s, em, sl, gE, PLENA_SEG_EXPERT);
        plena_emit_li(c, s, gS, mp->stride);
        plena_emit(c, s, PLENA_OP_S_MUL_INT, gO, gE, gS, 0, 0, 0);
        plena_emit_li(c, s, gB, mp->table[q] & 0xFFFFFFFFu);
        plena_emit(c, s, PLENA_OP_S_ADD_INT, gB, gB, gO, 0, 0, 0);
        if (W) plena_emit_li(c, s, gH, W);
        plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, aW, W ? gH : 0, gB, 0, 0, 0);
    } else {
        seg_word(c, s, em, sl, gE, PLENA_SEG_EXPERT);
        plena_emit(c, s, PLENA_OP_S_LD_INT, gH, gE, 0, 0, 0, int_at(c, mp->wtab_off));
        plena_emit_li(c, s, gS, mp->epw);
        plena_emit(c, s, PLENA_OP_S_MUL_INT, gO, gH, gS, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_S_SUB_INT, gO, gE, gO, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gH, gH, 0, 0, 0, mp->w0[q]);
        plena_emit_li(c, s, gS, mp->stride);
        plena_emit(c, s, PLENA_OP_S_MUL_INT, gB, gO, gS, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, aW, gH, gB, 0, 0, 0);
    }
    c->live = saved;
}

/* rd = the record's expert x VLEN (its bias row offset); tmp: scratch */
static void seg_bias_off(struct plena_ctx *c, enum plena_stage s, const struct em *em,
                         const struct segloop *sl, unsigned rd, unsigned tmp)
{
    if (!em->dev) {
        plena_emit(c, s, PLENA_OP_S_LD_INT, rd, 0, 0, 0, 0,
                   int_at(c, c->map->em_seg_off) + PLENA_SEG_BIAS_OFF);
        return;
    }
    seg_word(c, s, em, sl, rd, PLENA_SEG_EXPERT);
    plena_emit_li(c, s, tmp, c->m->vlen);
    plena_emit(c, s, PLENA_OP_S_MUL_INT, rd, rd, tmp, 0, 0, 0);
}

/* Rows of one column block: V_ADD_VV d, d, a over rows counted live (gnm1
 * = rows - 1, clobbered). */
static void live_rows_add(struct plena_ctx *c, enum plena_stage stage, unsigned gD, unsigned gA,
                          unsigned cr, unsigned gnm1, uint64_t mult)
{
    plena_loop_begin_live(c, stage, cr, gnm1, mult);
    plena_emit(c, stage, PLENA_OP_V_ADD_VV, gD, gD, gA, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gD, gD, 0, 0, 0, c->m->vlen);
    plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gA, gA, 0, 0, 0, c->m->vlen);
    plena_loop_end(c, stage);
}

/* ---- device routing: V_TOPK token by token, the sort (stage gather) ----
 * The scalar ISA has no divide or compare, and one INT SRAM cannot hold a
 * large block's ids, so the block's top-k runs three times from the logits
 * in VRAM (it is deterministic): pass 1 counts pairs per expert, pass 2
 * scatters each pair's token row into its expert's next slot, pass 3
 * combines in pair order reading each pair's slot the same way. Between
 * passes 1 and 2 a walk over the experts turns counts into start slots and
 * segment records; what depends on a count n (padded slots, how many
 * records, the last one's tiles) is record n of the count table in HBM
 * (route_plan.h PLENA_CNT_*), fetched with H_PREFETCH_S. */

/* Token loop head: V_TOPK of token t's logits into the id buffer (weights at
 * w_off). gL walks the logits; the caller's body follows, then topk_next. */
static void topk_begin(struct plena_ctx *c, enum plena_stage s, const struct em *em, unsigned ct,
                       unsigned gW, unsigned gL, unsigned gI)
{
    const enum plena_stage sk = PLENA_STAGE_ROUTER_TOPK;
    plena_emit_li(c, sk, gW, fp_at(c, c->map->w_off));
    plena_emit_li(c, sk, gL, em->lg->base);
    plena_emit_li(c, sk, gI, int_at(c, c->map->ids_off));
    plena_loop_begin_t(c, s, ct, em->n);
    plena_emit(c, sk, PLENA_OP_V_TOPK, gW, gL, gI, em->rmask, 0, 0);
}

static void topk_next(struct plena_ctx *c, enum plena_stage s, unsigned gL);

/* After topk_begin, with a router beyond V_TOPK: V_TOPK's weights at gW are
 * replaced by the router's, lanes 0..k-1 of the token's weights row (gL +
 * wrow_off), each read exactly as V_RED_SUM of the row times a one-hot row
 * (router_eye of expert j). sc: three GP and f one FP scratch register. */
static void dev_reload_weights(struct plena_ctx *c, const struct em *em, unsigned gW, unsigned gL,
                               const unsigned sc[3], unsigned f)
{
    const enum plena_stage sk = PLENA_STAGE_ROUTER_TOPK;
    const uint32_t V = c->m->vlen, eb = c->map->eb;
    plena_emit_li(c, sk, sc[0], em->wrow_off);
    plena_emit(c, sk, PLENA_OP_S_ADD_INT, sc[0], gL, sc[0], 0, 0, 0);
    plena_emit_li(c, sk, sc[1], em->R->eye.base);
    plena_emit_li(c, sk, sc[2], em->R->t.base);
    for (uint32_t j = 0; j < em->cfg->k; j++) {
        plena_emit(c, sk, PLENA_OP_S_ADD_FP, f, 0, 0, 0, 0, 0);
        plena_emit(c, sk, PLENA_OP_V_MUL_VV, sc[2], sc[0], sc[1], 0, 0, 0);
        plena_emit(c, sk, PLENA_OP_V_RED_SUM, f, sc[2], 0, 0, 0, 0);
        plena_emit(c, sk, PLENA_OP_S_ST_FP, f, gW, 0, 0, 0, j);
        if (j + 1 < em->cfg->k) plena_emit_addi_geom(c, sk, sc[1], sc[1], (uint64_t)eb * V, sc[2]);
    }
}

/* Before the passes, with a router beyond V_TOPK: per token of the block
 * the router's sequence (router.c) once; its selection rows replace the
 * token's logits rows (x 1, exact), so the passes' V_TOPK ranks the same
 * rows and selects the same ids, and its k weights become the token's
 * weights row (S_MAP_V_FP of a VLEN region that is zero beyond k). */
static int dev_route_prepass(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage sk = PLENA_STAGE_ROUTER_TOPK;
    const struct plena_moe_map *mp = c->map;
    const uint32_t V = c->m->vlen, eb = mp->eb;
    struct plena_regset saved = c->live;
    uint8_t g[6], f[1];
    if (plena_regs_take(c, 6, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    const unsigned ct = g[0], gL = g[1], gW = g[2], gI = g[3], gT = g[4], gD = g[5];
    plena_prog_comment(c->p, "router: %u tokens, selection rows and weights rows", em->n);
    gen_ld_const(c, sk, f[0], gT, mp->off_one);
    plena_emit_li(c, sk, gW, fp_at(c, mp->off_wreg));
    plena_emit_li(c, sk, gI, int_at(c, mp->ids_off));
    plena_emit_li(c, sk, gL, em->lg->base);
    plena_loop_begin_t(c, sk, ct, em->n);
    gen_router_token(c, em->R, em->cfg, gL, gW, gI, 1);
    const uint64_t sel = gen_router_sel_rows(em->R);
    for (uint32_t r = 0; sel && r < eb; r++) {
        plena_emit_li(c, sk, gT, sel + (uint64_t)r * V);
        plena_emit(c, sk, PLENA_OP_S_ADDI_INT, gD, gL, 0, 0, 0, r * V);
        plena_emit(c, sk, PLENA_OP_V_MUL_VF, gD, gT, f[0], 0, 0, 0);
    }
    plena_emit_li(c, sk, gD, em->wrow_off);
    plena_emit(c, sk, PLENA_OP_S_ADD_INT, gD, gL, gD, 0, 0, 0);
    plena_emit(c, sk, PLENA_OP_S_MAP_V_FP, gD, gW, 0, 0, 0, 0);
    topk_next(c, sk, gL);
    c->live = saved;
    return c->p->status;
}

static void topk_next(struct plena_ctx *c, enum plena_stage s, unsigned gL)
{
    plena_emit(c, PLENA_STAGE_ROUTER_TOPK, PLENA_OP_S_ADDI_INT, gL, gL, 0, 0, 0,
               c->map->eb * c->m->vlen);
    plena_loop_end(c, s);
}

/* Pass 1 and the expert walk: counters, start slots, segment records and
 * the two scalars (segments - 1, slots - 1). */
static int dev_sort(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_GATHER;
    const struct plena_moe_map *mp = c->map;
    const uint32_t k = em->cfg->k, E = em->cfg->E;
    const uint32_t ids = int_at(c, mp->ids_off), cnt = int_at(c, mp->em_cnt_off),
                   cbuf = int_at(c, mp->em_cbuf_off), scal = int_at(c, mp->em_scal_off);
    struct plena_regset saved = c->live;
    uint8_t g[15];
    if (plena_regs_take(c, 15, 0, 0, g)) return c->p->status;
    const unsigned cl = g[0], cj = g[1], cr = g[2], gE = g[3], gN = g[4], gX = g[5], gT = g[6],
                   gRun = g[7], gRec = g[8], gA = g[9], gS = g[10], gMT = g[11], gW = g[12],
                   gL = g[13], gJ = g[14];
    plena_prog_comment(c->p, "expert-major sort: count %u tokens x top-%u over %u experts", em->n,
                       k, E);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gE, 0, 0, 0, 0, 0);
    plena_loop_begin(c, s, cl, E);
    plena_emit(c, s, PLENA_OP_S_ST_INT, 0, gE, 0, 0, 0, cnt);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gE, gE, 0, 0, 0, 1);
    plena_loop_end(c, s);
    topk_begin(c, s, em, cl, gW, gL, gX);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gJ, 0, 0, 0, 0, 0);
    plena_loop_begin(c, s, cj, k);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gE, gJ, 0, 0, 0, ids);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gN, gE, 0, 0, 0, cnt);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gN, gN, 0, 0, 0, 1);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gN, gE, 0, 0, 0, cnt);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gJ, gJ, 0, 0, 0, 1);
    plena_loop_end(c, s);
    topk_next(c, s, gL);
    /* experts in id order: counter := start slot; records for n > 0 (a
     * dummy write that the next expert overwrites for n = 0) */
    plena_prog_comment(c->p, "expert-major sort: start slots and segment records");
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gE, 0, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gRun, 0, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gA, 0, 0, 0, 0, 0);
    plena_emit_li(c, s, gRec, int_at(c, mp->em_rec_off));
    plena_emit_li(c, s, gMT, mp->em_max_tiles - 1);
    plena_loop_begin(c, s, cl, E);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gN, gE, 0, 0, 0, cnt);
    plena_emit_li(c, s, gX, PLENA_ROUTE_REC_BYTES);
    plena_emit(c, s, PLENA_OP_S_MUL_INT, gX, gN, gX, 0, 0, 0);
    dma_rec(c, s, em, gT, gX, cbuf, 0);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gRun, gE, 0, 0, 0, cnt);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gX, 0, 0, 0, 0, cbuf + PLENA_CNT_ROWS);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gRun, gRun, gX, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gX, 0, 0, 0, 0, cbuf + PLENA_CNT_NREC);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gA, gA, gX, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gS, 0, 0, 0, 0, cbuf + PLENA_CNT_REC_STEP);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gX, 0, 0, 0, 0, cbuf + PLENA_CNT_NREC_M1);
    plena_loop_begin_live(c, s, cr, gX, c->p->mult);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gE, gRec, 0, 0, 0, PLENA_DEV_EXPERT);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gMT, gRec, 0, 0, 0, PLENA_DEV_TILES_M1);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gRec, gRec, gS, 0, 0, 0);
    plena_loop_end(c, s);
    /* the expert's last record takes the remainder (n = 0: the free slot) */
    plena_emit(c, s, PLENA_OP_S_SUB_INT, gX, gRec, gS, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gT, 0, 0, 0, 0, cbuf + PLENA_CNT_LAST_TM1);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gT, gX, 0, 0, 0, PLENA_DEV_TILES_M1);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gE, gE, 0, 0, 0, 1);
    plena_loop_end(c, s);
    /* live counts: segments - 1, slots - 1 (a block has pairs, so both >= 1) */
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gT, 0, 0, 0, 0, 1);
    plena_emit(c, s, PLENA_OP_S_SUB_INT, gX, gA, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gX, 0, 0, 0, 0, scal);
    plena_emit(c, s, PLENA_OP_S_SUB_INT, gX, gRun, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gX, 0, 0, 0, 0, scal + 1);
    c->live = saved;
    return c->p->status;
}

/* Every segment's last BLEN - 1 slots read the zero row before pass 2
 * fills the slots that have a pair: padding rows are true zeros. */
static int dev_zero_padding(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_GATHER;
    const struct plena_moe_map *mp = c->map;
    const struct plena_moe_em_scratch *bf = em->buf;
    const uint32_t B = c->m->blen, V = c->m->vlen, nb = gen_nblk(c, &bf->xs);
    if (B < 2) return c->p->status;
    struct plena_regset saved = c->live;
    uint8_t g[11], f[1];
    if (plena_regs_take(c, 11, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    const unsigned cl = g[0], cr = g[1], cb = g[2], gX = g[3], gZ = g[5], gD = g[6], gS = g[7],
                   fone = f[0];
    struct segloop sl = {cl, g[4], g[8], 0};
    struct plena_step xs_step, x_step;
    plena_prog_comment(c->p, "expert-major padding slots: the zero row");
    gen_ld_const(c, s, fone, gX, mp->off_one);
    plena_step_init(c, s, &xs_step, (uint64_t)bf->xs.prow * V, g[9]);
    plena_step_init(c, s, &x_step, (uint64_t)em->x->prow * V, g[10]);
    seg_begin(c, s, em, &sl, gX);
    /* gZ = the segment's end row - (BLEN - 1) */
    dev_rows(c, s, &sl, gZ, gX, V, 0);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gZ, gZ, sl.grun, 0, 0, 0);
    plena_emit_li(c, s, gX, bf->xs.base - (uint64_t)(B - 1) * V);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gZ, gZ, gX, 0, 0, 0);
    plena_loop_begin(c, s, cr, B - 1);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gD, gZ, 0, 0, 0, 0);
    plena_emit_li(c, s, gS, em->x->base + (uint64_t)(em->T - em->r0) * V);
    plena_loop_begin(c, s, cb, nb);
    plena_emit(c, s, PLENA_OP_V_MUL_VF, gD, gS, fone, 0, 0, 0); /* exact copy */
    plena_step_emit(c, s, gD, &xs_step);
    plena_step_emit(c, s, gS, &x_step);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gZ, gZ, 0, 0, 0, V);
    plena_loop_end(c, s);
    seg_end(c, s, em, &sl);
    c->live = saved;
    return c->p->status;
}

/* Before pass 3: every expert's counter back to its start slot, walking
 * the records last to first so an expert's first segment writes last. */
static int dev_cursor_reset(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_SCATTER_COMBINE;
    const struct plena_moe_map *mp = c->map;
    const uint32_t scal = int_at(c, mp->em_scal_off);
    struct plena_regset saved = c->live;
    uint8_t g[7];
    if (plena_regs_take(c, 7, 0, 0, g)) return c->p->status;
    const unsigned cl = g[0], gP = g[1], gRun = g[2], gX = g[3], gT = g[4], gE = g[5], gTwo = g[6];
    plena_prog_comment(c->p, "expert-major: counters back to the start slots");
    plena_emit(c, s, PLENA_OP_S_LD_INT, gX, 0, 0, 0, 0, scal);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gP, gX, gX, 0, 0, 0);
    plena_emit_li(c, s, gT, int_at(c, mp->em_rec_off));
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gP, gP, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gRun, 0, 0, 0, 0, scal + 1);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gRun, gRun, 0, 0, 0, 1);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gTwo, 0, 0, 0, 0, PLENA_DEV_WORDS);
    plena_loop_begin_live(c, s, cl, gX, c->p->mult * nominal_segs(em));
    plena_emit(c, s, PLENA_OP_S_LD_INT, gT, gP, 0, 0, 0, PLENA_DEV_TILES_M1);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gT, gT, 0, 0, 0, 1);
    plena_emit_li(c, s, gE, c->m->blen);
    plena_emit(c, s, PLENA_OP_S_MUL_INT, gT, gT, gE, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_SUB_INT, gRun, gRun, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gE, gP, 0, 0, 0, PLENA_DEV_EXPERT);
    plena_emit(c, s, PLENA_OP_S_ST_INT, gRun, gE, 0, 0, 0, int_at(c, mp->em_cnt_off));
    plena_emit(c, s, PLENA_OP_S_SUB_INT, gP, gP, gTwo, 0, 0, 0);
    plena_loop_end(c, s);
    c->live = saved;
    return c->p->status;
}

/* rd = VRAM row address of the pair's slot in xs, the expert's counter
 * moved on: e = ids[gJ]; slot = cnt[e]++ (scratch gE, gN) */
static void dev_next_slot(struct plena_ctx *c, enum plena_stage s, const struct em *em, unsigned rd,
                          unsigned gJ, unsigned gE, unsigned gN)
{
    const struct plena_moe_map *mp = c->map;
    const uint32_t cnt = int_at(c, mp->em_cnt_off);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gE, gJ, 0, 0, 0, int_at(c, mp->ids_off));
    plena_emit(c, s, PLENA_OP_S_LD_INT, gN, gE, 0, 0, 0, cnt);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, rd, gN, 0, 0, 0, 1);
    plena_emit(c, s, PLENA_OP_S_ST_INT, rd, gE, 0, 0, 0, cnt);
    plena_emit_li(c, s, rd, c->m->vlen);
    plena_emit(c, s, PLENA_OP_S_MUL_INT, gN, gN, rd, 0, 0, 0);
    plena_emit_li(c, s, rd, em->buf->xs.base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, rd, rd, gN, 0, 0, 0);
}

/* ---- gather: every slot of the block from its token's row (or the zero row) ---- */

/* Steps of the gather's column-block loop (xs and the block's rows). */
struct gather_steps {
    struct plena_step xs, x;
};

/* one slot: gD = its row in xs; gT = the source row offset; copies, and with
 * input placement scales by f_w (loaded by the caller) */
static void gather_slot(struct plena_ctx *c, const struct em *em, unsigned gT, unsigned gD,
                        unsigned gDc, unsigned gS, unsigned cb, const struct gather_steps *st,
                        unsigned fone, unsigned fw)
{
    const enum plena_stage s = PLENA_STAGE_GATHER, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const uint32_t nb = gen_nblk(c, &em->buf->xs);
    plena_emit_li(c, s, gS, em->x->base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gS, gS, gT, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gDc, gD, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, cb, nb);
    plena_emit(c, s, PLENA_OP_V_MUL_VF, gDc, gS, fone, 0, 0, 0); /* exact copy */
    if (lb) {
        plena_step_emit(c, s, gDc, &st->xs);
        plena_step_emit(c, s, gS, &st->x);
    }
    plena_loop_end(c, s);
    if (fw) { /* Llama-4: the expert input is scaled by the route weight */
        plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gDc, gD, 0, 0, 0, 0);
        int lw = plena_loop_begin(c, sw, cb, nb);
        plena_emit(c, sw, PLENA_OP_V_MUL_VF, gDc, gDc, fw, 0, 0, 0);
        if (lw) plena_step_emit(c, sw, gDc, &st->xs);
        plena_loop_end(c, sw);
    }
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gD, gD, 0, 0, 0, c->m->vlen);
}

/* Device pass 2: each pair's token row into its expert's next slot. */
static int dev_gather(struct plena_ctx *c, const struct em *em, const struct gather_steps *st,
                      unsigned fone)
{
    const enum plena_stage s = PLENA_STAGE_GATHER, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const int in_w = em->cfg->placement == PLENA_ROUTE_INPUT;
    struct plena_regset saved = c->live;
    uint8_t g[11], f[1];
    if (plena_regs_take(c, 11, 0, 0, g) || (in_w && plena_regs_take(c, 0, 1, 0, f)))
        return c->p->status;
    const unsigned ct = g[0], cj = g[1], cb = g[2], gW = g[3], gL = g[4], gI = g[5], gJ = g[6],
                   gE = g[7], gN = g[8], gD = g[9], gTr = g[10], fw = in_w ? f[0] : 0;
    plena_prog_comment(c->p, "expert-major gather: each pair's row into its expert's next slot");
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gTr, 0, 0, 0, 0, 0); /* token row offset t x VLEN */
    topk_begin(c, s, em, ct, gW, gL, gI);
    if (in_w && em->R) dev_reload_weights(c, em, gW, gL, (const unsigned[3]){gJ, gE, gN}, fw);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gJ, 0, 0, 0, 0, 0);
    plena_loop_begin(c, s, cj, em->cfg->k);
    dev_next_slot(c, s, em, gD, gJ, gE, gN);
    if (in_w) plena_emit(c, sw, PLENA_OP_S_LD_FP, fw, gJ, 0, 0, 0, fp_at(c, c->map->w_off));
    /* gE, gN are free again: the copy's source and column pointers */
    gather_slot(c, em, gTr, gD, gE, gN, cb, st, fone, fw);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gJ, gJ, 0, 0, 0, 1);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gTr, gTr, 0, 0, 0, c->m->vlen);
    topk_next(c, s, gL);
    c->live = saved;
    return c->p->status;
}

static int em_gather(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_GATHER, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const struct plena_moe_map *mp = c->map;
    const int in_w = em->cfg->placement == PLENA_ROUTE_INPUT;
    if (em->dev && (dev_sort(c, em) || dev_zero_padding(c, em))) return c->p->status;
    struct plena_regset saved = c->live;
    uint8_t g[13], f[2];
    if (plena_regs_take(c, 3, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    const unsigned fone = f[0];
    struct gather_steps st;
    gen_ld_const(c, s, fone, g[0], mp->off_one);
    plena_step_init(c, s, &st.xs, (uint64_t)em->buf->xs.prow * c->m->vlen, g[1]);
    plena_step_init(c, s, &st.x, (uint64_t)em->x->prow * c->m->vlen, g[2]);
    if (em->dev) {
        dev_gather(c, em, &st, fone);
        c->live = saved;
        return c->p->status;
    }
    if (plena_regs_take(c, 10, 0, 0, &g[3]) || (in_w && plena_regs_take(c, 0, 1, 0, &f[1])))
        return c->p->status;
    unsigned cg = g[3], ci = g[4], cb = g[5], gOff = g[6], gI = g[7], gT = g[8], gD = g[9],
             gDc = g[10], gS = g[11], gOffW = g[12], gIW = g[0];
    unsigned fw = in_w ? f[1] : 0;
    plena_emit_li(c, s, gD, em->buf->xs.base);
    plena_prog_comment(c->p, "expert-major gather: %u slots in %u segments", em->bk->n_slots,
                       em->bk->n_seg);
    plena_emit_li(c, s, gOff, em->bk->gather_off);
    if (in_w) plena_emit_li(c, sw, gOffW, em->bk->in_w_off);
    plena_loop_begin_t(c, s, cg, em->bk->n_groups);
    dma_rec(c, s, em, gI, gOff, int_at(c, mp->em_gbuf_off), 0); /* leaves gI at the buffer */
    if (in_w) dma_rec(c, sw, em, gIW, gOffW, fp_at(c, mp->em_iw_off), 1);
    plena_loop_begin(c, s, ci, PLENA_ROUTE_REC_INTS);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gT, gI, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gI, gI, 0, 0, 0, 1);
    if (in_w) {
        plena_emit(c, sw, PLENA_OP_S_LD_FP, fw, gIW, 0, 0, 0, 0);
        plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gIW, gIW, 0, 0, 0, 1);
    }
    gather_slot(c, em, gT, gD, gDc, gS, cb, &st, fone, fw);
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
    const int down = which == PLENA_PROJ_DOWN;
    const struct plena_tensor *x = down ? &bf->yu : &bf->xs;
    const struct plena_tensor *y = down ? &bf->xs : which == PLENA_PROJ_GATE ? &bf->yg : &bf->yu;
    const uint32_t K_p = down ? mp->I_p : mp->H_p, N_p = down ? mp->H_p : mp->I_p;
    const uint32_t nct = K_p / c->m->mlen;
    uint32_t chunk = em->cfg->chunk_tiles ? em->cfg->chunk_tiles : 4;
    if (chunk > nct) chunk = nct;
    const uint32_t nch = gen_cdiv(nct, chunk);
    const uint64_t slots = nominal_slots(c, em), tiles = slots / c->m->blen;
    struct plena_proj pj = {.x = x, .rows = 1, .dynamic = 1, .K_p = K_p, .N_p = N_p, .y = y};
    struct plena_regset saved = c->live;
    uint8_t a[1], g[5];
    if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 5, 0, 0, g)) return c->p->status;
    const unsigned aW = a[0], gRow = g[2], gN = g[3];
    struct segloop sl = {g[0], g[1], g[4], 0};
    plena_prog_comment(c->p, "expert-major %s projection over the segments",
                       which == PLENA_PROJ_GATE ? "gate"
                       : which == PLENA_PROJ_UP ? "up"
                                                : "down");
    /* SCALE and STRIDE once for the projection (every expert's entry has
     * the same [K_p, N_p] shape) */
    plena_emit_li(c, sp, gN, (uint64_t)K_p * N_p);
    plena_emit(c, sp, PLENA_OP_C_SET_SCALE_REG, gN, 0, 0, 0, 0, 0);
    plena_emit_li(c, sp, gN, N_p);
    plena_emit(c, sp, PLENA_OP_C_SET_STRIDE_REG, gN, 0, 0, 0, 0, 0);
    for (uint32_t cb = 0; cb < N_p / c->m->mlen && !c->p->status; cb++)
        for (uint32_t q = 0; q < nch && !c->p->status; q++) {
            const uint32_t kt0 = q * chunk, ns = nct - kt0 < chunk ? nct - kt0 : chunk;
            const struct plena_tensor *d = q == 0 ? y : &bf->ytmp;
            seg_begin(c, sa, em, &sl, gN);
            const uint64_t outer = sl.mult / nominal_segs(em);
            seg_weight_addr(c, sa, em, &sl, which, aW);
            gen_prefetch_chunk(c, sp, &pj, aW, cb, kt0, ns, 1);
            seg_word(c, sc, em, &sl, gRow, PLENA_SEG_ROW_OFF);
            seg_word(c, sc, em, &sl, gN, PLENA_SEG_TILES_M1);
            struct gen_live_rows lr = {gRow, gN, outer * tiles};
            if (!gen_fast_chunk(c, x, d, q == 0 ? cb : 0, kt0, ns, 0, sc, &lr) && !c->p->status)
                plena_prog_fail(c->p, PLENA_GEN_SHAPE,
                                "expert-major projection: the chunk kernel does not fit "
                                "(MLEN %u, BLEN %u, chunk %u tiles)",
                                c->m->mlen, c->m->blen, ns);
            if (q >= 1) { /* Y = bf16(Y + bf16(P_q)) over the segment's rows */
                struct plena_regset in = c->live;
                uint8_t r[3];
                if (plena_regs_take(c, 3, 0, 0, r)) return c->p->status;
                seg_word(c, sc, em, &sl, gN, PLENA_SEG_ROWS_M1);
                plena_emit_li(c, sc, r[0], plena_row(y, 0, cb, c->m->vlen));
                plena_emit(c, sc, PLENA_OP_S_ADD_INT, r[0], r[0], gRow, 0, 0, 0);
                plena_emit_li(c, sc, r[1], bf->ytmp.base);
                plena_emit(c, sc, PLENA_OP_S_ADD_INT, r[1], r[1], gRow, 0, 0, 0);
                live_rows_add(c, sc, r[0], r[1], r[2], gN, outer * slots);
                c->live = in;
            }
            seg_end(c, sa, em, &sl);
        }
    c->live = saved;
    return c->p->status;
}

/* ---- expert biases (GPT-OSS): each segment's rows += its expert's bias row ---- */

static int em_bias(struct plena_ctx *c, const struct em *em, enum plena_proj_kind which)
{
    const enum plena_stage s = PLENA_STAGE_EXPERT_BIAS;
    const struct plena_moe_em_scratch *bf = em->buf;
    const struct plena_tensor *y = which == PLENA_PROJ_DOWN   ? &bf->xs
                                   : which == PLENA_PROJ_GATE ? &bf->yg
                                                              : &bf->yu;
    const struct plena_tensor *b = em->b[which];
    const uint32_t V = c->m->vlen, nb = gen_nblk(c, y);
    struct plena_regset saved = c->live;
    uint8_t g[13];
    if (plena_regs_take(c, 13, 0, 0, g)) return c->p->status;
    unsigned cr = g[1], cb = g[2], gRow = g[4], gB = g[5], gN = g[6], gY = g[7], gBc = g[8],
             scr = g[9];
    struct segloop sl = {g[0], g[3], g[10], 0};
    struct plena_step ystep, bstep;
    plena_prog_comment(c->p, "expert-major bias");
    plena_step_init(c, s, &ystep, (uint64_t)y->prow * V, g[11]);
    plena_step_init(c, s, &bstep, (uint64_t)b->prow * V, g[12]);
    seg_begin(c, s, em, &sl, gN);
    const uint64_t outer = sl.mult / nominal_segs(em);
    seg_word(c, s, em, &sl, gRow, PLENA_SEG_ROW_OFF);
    seg_bias_off(c, s, em, &sl, gB, scr);
    seg_word(c, s, em, &sl, gN, PLENA_SEG_ROWS_M1);
    plena_emit_li(c, s, scr, y->base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gRow, gRow, scr, 0, 0, 0);
    plena_emit_li(c, s, scr, b->base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, gB, gB, scr, 0, 0, 0);
    plena_loop_begin_live(c, s, cr, gN, outer * nominal_slots(c, em));
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gY, gRow, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gBc, gB, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, cb, nb);
    plena_emit(c, s, PLENA_OP_V_ADD_VV, gY, gY, gBc, 0, 0, 0);
    if (lb) {
        plena_step_emit(c, s, gY, &ystep);
        plena_step_emit(c, s, gBc, &bstep);
    }
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gRow, gRow, 0, 0, 0, V);
    plena_loop_end(c, s);
    seg_end(c, s, em, &sl);
    c->live = saved;
    return c->p->status;
}

/* ---- activation over every slot, rows outer (one row's blocks per
 * iteration, so no loop iteration grows with the slot count) ---- */

static int em_activation(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_EXPERT_ACTIVATION;
    const struct plena_moe_em_scratch *bf = em->buf;
    const uint32_t V = c->m->vlen, nb = c->map->I_p / V;
    struct plena_regset saved = c->live;
    uint8_t g[10];
    if (plena_regs_take(c, 10, 0, 0, g)) return c->p->status;
    struct plena_step step;
    unsigned cr = g[0], cb = g[1], gG = g[2], gU = g[3], gS = g[4], gGc = g[5], gUc = g[6],
             gSc = g[7], scr = g[8];
    struct gen_act a;
    if (gen_act_setup(c, s, em->cfg->activation == PLENA_ACT_GPT_OSS_CLAMP_GATED, scr,
                      c->map->off_na_routed, &a))
        return c->p->status;
    plena_emit_li(c, s, gG, bf->yg.base);
    plena_emit_li(c, s, gU, bf->yu.base);
    plena_emit_li(c, s, gS, bf->ys.base);
    plena_step_init(c, s, &step, (uint64_t)bf->yg.prow * V, g[9]);
    if (em->dev) {
        load_slots_m1(c, s, scr);
        plena_loop_begin_live(c, s, cr, scr, c->p->mult * nominal_slots(c, em));
    } else {
        plena_loop_begin_t(c, s, cr, em->bk->n_slots);
    }
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gGc, gG, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gUc, gU, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gSc, gS, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, cb, nb);
    /* the ops, operands and rounding points of plena_moe_expert_activation */
    gen_act_block(c, s, &a, gGc, gUc, gSc);
    if (lb) {
        plena_step_emit(c, s, gGc, &step);
        plena_step_emit(c, s, gUc, &step);
        plena_step_emit(c, s, gSc, &step);
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

struct comb_regs {
    unsigned cb, gY, gAc, gAcc, gTr, fw;
    struct plena_step y, a;
};

/* One pair: its down-output row at gY into acc row gAcc (weighted by fw
 * with output placement), the ops and rounding of pair-major's scatter. */
static void comb_pair(struct plena_ctx *c, const struct em *em, const struct comb_regs *r)
{
    const enum plena_stage s = PLENA_STAGE_SCATTER_COMBINE, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const int out_w = em->cfg->placement == PLENA_ROUTE_OUTPUT;
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, r->gAc, r->gAcc, 0, 0, 0, 0);
    int lb = plena_loop_begin(c, s, r->cb, gen_nblk(c, em->acc));
    if (out_w) {
        plena_emit(c, sw, PLENA_OP_V_MUL_VF, r->gTr, r->gY, r->fw, 0, 0, 0);
        plena_emit(c, s, PLENA_OP_V_ADD_VV, r->gAc, r->gAc, r->gTr, 0, 0, 0);
    } else {
        plena_emit(c, s, PLENA_OP_V_ADD_VV, r->gAc, r->gAc, r->gY, 0, 0, 0);
    }
    if (lb) {
        plena_step_emit(c, s, r->gY, &r->y);
        plena_step_emit(c, s, r->gAc, &r->a);
    }
    plena_loop_end(c, s);
}

/* Takes the combine's common registers and initialises them. */
static int comb_setup(struct plena_ctx *c, const struct em *em, struct comb_regs *r)
{
    const enum plena_stage s = PLENA_STAGE_SCATTER_COMBINE;
    uint8_t g[7], f[1];
    if (plena_regs_take(c, 7, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    r->cb = g[0];
    r->gY = g[1];
    r->gAc = g[2];
    r->gAcc = g[3];
    r->gTr = g[4];
    r->fw = f[0];
    plena_step_init(c, s, &r->y, (uint64_t)em->buf->xs.prow * c->m->vlen, g[5]);
    plena_step_init(c, s, &r->a, (uint64_t)em->acc->prow * c->m->vlen, g[6]);
    plena_emit_li(c, s, r->gAcc, em->acc->base);
    plena_emit_li(c, s, r->gTr, em->buf->trow.base);
    return c->p->status;
}

/* Device pass 3: V_TOPK again; each pair's slot is its expert's next one,
 * as in pass 2; the weights are V_TOPK's. */
static int dev_combine(struct plena_ctx *c, const struct em *em)
{
    const enum plena_stage s = PLENA_STAGE_SCATTER_COMBINE, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const int out_w = em->cfg->placement == PLENA_ROUTE_OUTPUT;
    if (dev_cursor_reset(c, em)) return c->p->status;
    struct plena_regset saved = c->live;
    struct comb_regs r;
    uint8_t g[8];
    if (comb_setup(c, em, &r) || plena_regs_take(c, 8, 0, 0, g)) return c->p->status;
    const unsigned ct = g[0], cj = g[1], gW = g[2], gL = g[3], gI = g[4], gJ = g[5], gE = g[6],
                   gN = g[7];
    plena_prog_comment(c->p, "expert-major combine: %u tokens x top-%u in pair order", em->n,
                       em->cfg->k);
    topk_begin(c, s, em, ct, gW, gL, gI);
    /* every placement: the FP SRAM weights after the run are the router's */
    if (em->R) dev_reload_weights(c, em, gW, gL, (const unsigned[3]){gJ, gE, gN}, r.fw);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gJ, 0, 0, 0, 0, 0);
    plena_loop_begin(c, s, cj, em->cfg->k);
    dev_next_slot(c, s, em, r.gY, gJ, gE, gN);
    if (out_w) plena_emit(c, sw, PLENA_OP_S_LD_FP, r.fw, gJ, 0, 0, 0, fp_at(c, c->map->w_off));
    comb_pair(c, em, &r);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gJ, gJ, 0, 0, 0, 1);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, r.gAcc, r.gAcc, 0, 0, 0, c->m->vlen);
    topk_next(c, s, gL);
    c->live = saved;
    return c->p->status;
}

static int em_combine(struct plena_ctx *c, const struct em *em)
{
    if (em->dev) return dev_combine(c, em);
    const enum plena_stage s = PLENA_STAGE_SCATTER_COMBINE, sw = PLENA_STAGE_EXPERT_ROUTE_WEIGHT;
    const struct plena_moe_map *mp = c->map;
    const struct plena_route_plan *pl = em->plan;
    const int out_w = em->cfg->placement == PLENA_ROUTE_OUTPUT;
    struct plena_regset saved = c->live;
    struct comb_regs r;
    uint8_t g[7];
    if (comb_setup(c, em, &r) || plena_regs_take(c, 7, 0, 0, g)) return c->p->status;
    const unsigned ct = g[0], cj = g[1], gOffC = g[2], gOffW = g[3], gI = g[4], gF = g[5],
                   gT = g[6];
    plena_prog_comment(c->p, "expert-major combine: %u tokens x top-%u in pair order", em->n,
                       em->cfg->k);
    plena_emit_li(c, s, gOffC, em->bk->comb_off);
    if (out_w) plena_emit_li(c, sw, gOffW, em->bk->comb_w_off);
    plena_loop_begin_t(c, s, ct, em->n);
    for (uint32_t q = 0; q < pl->comb_int_recs; q++) {
        dma_rec(c, s, em, gI, gOffC, int_at(c, mp->em_cbuf_off) + q * PLENA_ROUTE_REC_INTS, 0);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gOffC, gOffC, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
    }
    if (out_w)
        for (uint32_t q = 0; q < pl->comb_fp_recs; q++) {
            dma_rec(c, sw, em, gF, gOffW, fp_at(c, mp->em_cw_off) + q * PLENA_ROUTE_REC_HALFS, 1);
            plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gOffW, gOffW, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
        }
    plena_emit_li(c, s, gI, int_at(c, mp->em_cbuf_off));
    if (out_w) plena_emit_li(c, sw, gF, fp_at(c, mp->em_cw_off));
    plena_loop_begin(c, s, cj, em->cfg->k);
    plena_emit(c, s, PLENA_OP_S_LD_INT, gT, gI, 0, 0, 0, 0);
    plena_emit_li(c, s, r.gY, em->buf->xs.base);
    plena_emit(c, s, PLENA_OP_S_ADD_INT, r.gY, r.gY, gT, 0, 0, 0);
    if (out_w) {
        plena_emit(c, sw, PLENA_OP_S_LD_FP, r.fw, gF, 0, 0, 0, 0);
        plena_emit(c, sw, PLENA_OP_S_ADDI_INT, gF, gF, 0, 0, 0, 1);
    }
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gI, gI, 0, 0, 0, 1);
    comb_pair(c, em, &r);
    plena_loop_end(c, s);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, r.gAcc, r.gAcc, 0, 0, 0, c->m->vlen);
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

int plena_moe_em_alloc(struct plena_ctx *c, uint32_t max_slots, struct plena_moe_em_scratch *bf)
{
    const struct plena_moe_map *mp = c->map;
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

static int em_sections(struct plena_ctx *c, const struct em *em)
{
    em_gather(c, em);
    em_projection(c, em, PLENA_PROJ_GATE);
    em_projection(c, em, PLENA_PROJ_UP);
    if (em->cfg->expert_bias) {
        em_bias(c, em, PLENA_PROJ_GATE);
        em_bias(c, em, PLENA_PROJ_UP);
    }
    em_activation(c, em);
    em_projection(c, em, PLENA_PROJ_DOWN);
    if (em->cfg->expert_bias) em_bias(c, em, PLENA_PROJ_DOWN);
    return em_combine(c, em);
}

/* A register em->aT = the routing region's HBM base (g: two scratch GPs). */
static void set_region_base(struct plena_ctx *c, const struct em *em, const uint8_t g[2])
{
    const enum plena_stage s = PLENA_STAGE_GATHER;
    const uint64_t base = c->map->route_hbm;
    plena_emit_li(c, s, g[0], base & 0xFFFFFFFFu);
    if (base >> 32) plena_emit_li(c, s, g[1], base >> 32);
    plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, em->aT, base >> 32 ? g[1] : 0, g[0], 0, 0, 0);
}

int plena_moe_em_block(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                       const struct plena_route_plan *plan, uint32_t b,
                       const struct plena_tensor *x, const struct plena_tensor *acc,
                       const struct plena_tensor *const bias[3],
                       const struct plena_moe_em_scratch *sc)
{
    if (c->p->status) return c->p->status;
    struct em em = {cfg,
                    plan,
                    &plan->blk[b],
                    x,
                    acc,
                    {bias[0], bias[1], bias[2]},
                    sc,
                    NULL,
                    0,
                    0,
                    0,
                    plan->T,
                    plan->blk[b].r0,
                    plan->blk[b].n,
                    NULL,
                    0};
    struct plena_regset saved = c->live;
    uint8_t a[1], g[2];
    if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 2, 0, 0, g)) return c->p->status;
    em.aT = a[0];
    set_region_base(c, &em, g);
    c->live.gp = saved.gp; /* only the table register stays taken */
    em_sections(c, &em);
    c->live = saved;
    return c->p->status;
}

int plena_moe_em_dev_block(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                           uint32_t r0, uint32_t n, const struct plena_tensor *x,
                           const struct plena_tensor *acc, const struct plena_tensor *lg,
                           const struct plena_tensor *const bias[3],
                           const struct plena_moe_em_scratch *sc, struct gen_router *R,
                           const struct plena_tensor *wrow, enum plena_topk_encoding *enc)
{
    if (c->p->status) return c->p->status;
    struct em em = {cfg, NULL, NULL, x,    acc, {bias[0], bias[1], bias[2]}, sc, lg, 0, 0, 1,
                    T,   r0,   n,    NULL, 0};
    struct plena_regset saved = c->live;
    uint8_t a[1], g[2];
    if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 2, 0, 0, g)) return c->p->status;
    em.aT = a[0];
    em.rmask = R->rmask = gen_topk_setup(c, cfg, g[0], enc);
    set_region_base(c, &em, g);
    c->live.gp = saved.gp; /* only the table register stays taken */
    if (R->plan.lowering != PLENA_RLOWER_VTOPK) {
        em.R = R;
        em.wrow_off = (uint32_t)(wrow->base - lg->base);
        dev_route_prepass(c, &em);
    }
    em_sections(c, &em);
    c->live = saved;
    return c->p->status;
}
