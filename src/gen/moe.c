/* MoE lowering: every emitter of docs/lowering.md "Layer steps" and the
 * layer driver of docs/lowering.md "Layer steps". Each emitter takes its
 * registers with plena_regs_take, restores ctx->live on return, frees every
 * VRAM tensor it allocates and passes its stage explicitly to every append.
 * Host staging is in build.c. */
#include "gen/moe.h"
#include "gen/emit.h"
#include "gen/route_plan.h"
#include "gen/weights.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "num/num.h"

#ifdef PLENA_TESTING
#define FAULT(cfg) ((cfg)->fault)
#else
#define FAULT(cfg) PLENA_FAULT_NONE
#endif

/* A VRAM allocator failure (its message is already in the error record)
 * becomes the program's sticky status. */
void gen_vram_failed(struct plena_prog *p, int rc)
{
    if (p->status) return;
    p->status = rc == PLENA_E_NOMEM ? PLENA_E_NOMEM : PLENA_E_INPUT;
    p->reason = rc == PLENA_E_NOMEM ? PLENA_GEN_NOMEM : PLENA_GEN_VRAM;
}

int gen_valloc(struct plena_ctx *c, uint32_t rows, uint32_t cols, const char *name,
               struct plena_tensor *t)
{
    if (c->p->status) return c->p->status;
    int rc = plena_vram_alloc(c->va, rows, cols, name, t, c->p->err);
    if (rc) gen_vram_failed(c->p, rc);
    return rc;
}

struct plena_tensor gen_view(const struct plena_tensor *x, uint32_t row0, uint32_t vlen)
{
    struct plena_tensor t = *x;
    t.base += (uint64_t)row0 * vlen;
    return t;
}

int gen_stage_ok(struct plena_ctx *c, enum plena_stage stage, unsigned mask, const char *who)
{
    if ((unsigned)stage < PLENA_STAGE_COUNT && (mask >> stage & 1u)) return 0;
    /* appends nothing: a wrong stage is a bug of the calling emitter */
    return plena_prog_fail(c->p, PLENA_GEN_STAGE, "stage %d not allowed for %s", (int)stage, who);
}

/* ---- generic rows x column-blocks elementwise loop ----
 * Column blocks outer, rows inner, so one pointer per operand suffices: after
 * the row loop it is advanced by (prow - nrows) * c->m->vlen to the next block. */
struct opnd gen_od(const struct plena_tensor *t, uint32_t row0, uint32_t vlen)
{
    struct opnd o = {t, t->base + (uint64_t)row0 * vlen, vlen, 0, 0};
    return o;
}

static int same_opnd(const struct opnd *a, const struct opnd *b)
{
    return a->t && b->t && a->base == b->base && a->rstride == b->rstride && a->fixed == b->fixed &&
           a->dyn == b->dyn && a->t->prow == b->t->prow;
}

/* Operands that are the same tensor row share one pointer: alias[i] is
 * operand i's pointer; returns the number of pointers. */
static unsigned opnd_aliases(struct opnd *const o[3], unsigned n_op, int alias[3])
{
    unsigned nptr = 0;
    for (unsigned i = 0; i < 3; i++)
        alias[i] = -1;
    for (unsigned i = 0; i < n_op; i++) {
        for (unsigned j = 0; j < i; j++)
            if (alias[i] < 0 && same_opnd(o[i], o[j])) alias[i] = alias[j];
        if (alias[i] < 0) alias[i] = (int)nptr++;
    }
    return nptr;
}

/* gen_rows_blocks in the stable form (expert-major): rows outer, column
 * blocks inner, so a row loop of thousands of tokens never makes one
 * iteration exceed MAX_LOOP_INSTRUCTIONS, and the column step (a row pitch)
 * is a register; the ops and their order per element are the same. */
static int rows_outer_blocks(struct plena_ctx *c, enum plena_stage stage, enum plena_op op,
                             enum rb_kind kind, struct opnd d, struct opnd a, struct opnd b,
                             unsigned freg, uint32_t nrows, uint32_t nblocks, int tloop)
{
    struct plena_regset saved = c->live;
    struct opnd *o[3] = {&d, &a, &b};
    const unsigned n_op = kind == RB_VV ? 3 : (kind == RB_VF ? 2 : 1);
    int alias[3];
    const unsigned nptr = opnd_aliases(o, n_op, alias);
    uint8_t r[12];
    /* per pointer: row base, column cursor, column step; row and block counters; zero-row base */
    const unsigned need = 3 * nptr + 2 + (kind == RB_MAP);
    if (plena_regs_take(c, need, 0, 0, r)) return c->p->status;
    const unsigned cr = r[3 * nptr], cb = r[3 * nptr + 1];
    const unsigned gz = kind == RB_MAP ? r[3 * nptr + 2] : 0;
    struct plena_step step[3];
    const struct opnd *first[3] = {NULL, NULL, NULL};
    for (unsigned i = 0; i < n_op; i++)
        if (!first[alias[i]]) first[alias[i]] = o[i];
    for (unsigned q = 0; q < nptr; q++) {
        plena_emit_li(c, stage, r[3 * q], first[q]->base);
        if (first[q]->dyn)
            plena_emit(c, stage, PLENA_OP_S_ADD_INT, r[3 * q], r[3 * q], first[q]->dyn, 0, 0, 0);
        plena_step_init(c, stage, &step[q], (uint64_t)first[q]->t->prow * c->m->vlen, r[3 * q + 2]);
    }
    if (kind == RB_MAP) plena_emit_li(c, stage, gz, c->map->fp_base);
    int rl =
        tloop ? plena_loop_begin_t(c, stage, cr, nrows) : plena_loop_begin(c, stage, cr, nrows);
    for (unsigned q = 0; q < nptr; q++)
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, r[3 * q + 1], r[3 * q], 0, 0, 0, 0);
    int bl = plena_loop_begin(c, stage, cb, nblocks);
    const unsigned p0 = r[3 * alias[0] + 1];
    if (kind == RB_VV)
        plena_emit(c, stage, op, p0, r[3 * alias[1] + 1], r[3 * alias[2] + 1], 0, 0, 0);
    else if (kind == RB_VF)
        plena_emit(c, stage, op, p0, r[3 * alias[1] + 1], freg, 0, 0, 0);
    else
        plena_emit(c, stage, PLENA_OP_S_MAP_V_FP, p0, gz, 0, 0, 0, 0);
    if (bl)
        for (unsigned q = 0; q < nptr; q++)
            plena_step_emit(c, stage, r[3 * q + 1], &step[q]);
    plena_loop_end(c, stage);
    if (rl)
        for (unsigned q = 0; q < nptr; q++)
            if (!first[q]->fixed)
                plena_emit_addi_geom(c, stage, r[3 * q], r[3 * q], first[q]->rstride, 0);
    plena_loop_end(c, stage);
    c->live = saved;
    return c->p->status;
}

int gen_rows_blocks(struct plena_ctx *c, enum plena_stage stage, enum plena_op op,
                    enum rb_kind kind, struct opnd d, struct opnd a, struct opnd b, unsigned freg,
                    uint32_t nrows, uint32_t nblocks, int tloop)
{
    if (c->p->status || nrows == 0 || nblocks == 0) return c->p->status;
    if (c->p->stable_form)
        return rows_outer_blocks(c, stage, op, kind, d, a, b, freg, nrows, nblocks, tloop);
    struct plena_regset saved = c->live;
    struct opnd *o[3] = {&d, &a, &b};
    const unsigned n_op = kind == RB_VV ? 3 : (kind == RB_VF ? 2 : 1);
    int alias[3];
    const unsigned nptr = opnd_aliases(o, n_op, alias);
    uint8_t r[8];
    /* pointers, row counter, block counter, scratch, [zero-row base] */
    unsigned need = nptr + 3 + (kind == RB_MAP);
    if (plena_regs_take(c, need, 0, 0, r)) return c->p->status;
    unsigned cr = r[nptr], cb = r[nptr + 1], scr = r[nptr + 2];
    unsigned gz = kind == RB_MAP ? r[nptr + 3] : 0;
    unsigned preg[3];
    for (unsigned i = 0; i < n_op; i++)
        preg[i] = r[alias[i]];
    int init[3] = {0, 0, 0};
    for (unsigned i = 0; i < n_op; i++) {
        if (init[alias[i]]) continue;
        init[alias[i]] = 1;
        plena_emit_li(c, stage, preg[i], o[i]->base);
        if (o[i]->dyn)
            plena_emit(c, stage, PLENA_OP_S_ADD_INT, preg[i], preg[i], o[i]->dyn, 0, 0, 0);
    }
    if (kind == RB_MAP) plena_emit_li(c, stage, gz, c->map->fp_base);
    int bl = plena_loop_begin(c, stage, cb, nblocks);
    int rl =
        tloop ? plena_loop_begin_t(c, stage, cr, nrows) : plena_loop_begin(c, stage, cr, nrows);
    if (kind == RB_VV)
        plena_emit(c, stage, op, preg[0], preg[1], preg[2], 0, 0, 0);
    else if (kind == RB_VF)
        plena_emit(c, stage, op, preg[0], preg[1], freg, 0, 0, 0);
    else
        plena_emit(c, stage, PLENA_OP_S_MAP_V_FP, preg[0], gz, 0, 0, 0, 0);
    int adv[3] = {0, 0, 0};
    if (rl)
        for (unsigned i = 0; i < n_op; i++)
            if (!o[i]->fixed && !adv[alias[i]]) {
                adv[alias[i]] = 1;
                plena_emit_addi_geom(c, stage, preg[i], preg[i], o[i]->rstride, scr);
            }
    plena_loop_end(c, stage);
    if (bl) {
        int adv2[3] = {0, 0, 0};
        for (unsigned i = 0; i < n_op; i++) {
            if (adv2[alias[i]]) continue;
            adv2[alias[i]] = 1;
            uint64_t step = (uint64_t)o[i]->t->prow * c->m->vlen;
            uint64_t done = (rl && !o[i]->fixed) ? (uint64_t)nrows * o[i]->rstride : 0;
            if (step > done) plena_emit_addi(c, stage, preg[i], preg[i], step - done, scr);
        }
    }
    plena_loop_end(c, stage);
    c->live = saved;
    return c->p->status;
}

struct opnd gen_none_od(void)
{
    struct opnd o = {NULL, 0, 0, 0, 0};
    return o;
}

uint32_t gen_nblk(struct plena_ctx *c, const struct plena_tensor *t)
{
    return gen_cdiv(t->pcol, c->m->vlen);
}

/* loads FP SRAM constant at fp_base + off into freg (via gp scratch) */
void gen_ld_const(struct plena_ctx *c, enum plena_stage stage, unsigned freg, unsigned gtmp,
                  uint32_t off)
{
    uint64_t a = (uint64_t)c->map->fp_base + off;
    if (a <= PLENA_IMM18_MAX) {
        plena_emit(c, stage, PLENA_OP_S_LD_FP, freg, 0, 0, 0, 0, (uint32_t)a);
    } else {
        plena_emit_li(c, stage, gtmp, c->map->fp_base);
        plena_emit(c, stage, PLENA_OP_S_LD_FP, freg, gtmp, 0, 0, 0, off);
    }
}

/* ---- 3.3.1 zero, copy, norm ---- */

#define ZERO_MASK                                                                                  \
    (M(RESIDUAL_SETUP) | M(ACCUMULATOR_INIT) | M(GATHER) | M(SHARED_EXPERT_PROJECTION))

int plena_moe_fp_zero_row_init(struct plena_ctx *c, enum plena_stage stage)
{
    int rc = gen_stage_ok(c, stage, ZERO_MASK, "plena_moe_fp_zero_row_init");
    if (rc) return rc;
    struct plena_regset saved = c->live;
    uint8_t r[2];
    if (plena_regs_take(c, 2, 0, 0, r)) return c->p->status;
    plena_emit_li(c, stage, r[0], c->map->fp_base);
    int l = plena_loop_begin(c, stage, r[1], c->m->vlen);
    plena_emit(c, stage, PLENA_OP_S_ST_FP, 0, r[0], 0, 0, 0, 0);
    if (l) plena_emit(c, stage, PLENA_OP_S_ADDI_INT, r[0], r[0], 0, 0, 0, 1);
    plena_loop_end(c, stage);
    c->live = saved;
    return c->p->status;
}

int plena_moe_true_zero_rows(struct plena_ctx *c, enum plena_stage stage,
                             const struct plena_tensor *x, uint32_t row0, uint32_t nrows)
{
    int rc = gen_stage_ok(c, stage, ZERO_MASK, "plena_moe_true_zero_rows");
    if (rc) return rc;
    return gen_rows_blocks(c, stage, PLENA_OP_S_MAP_V_FP, RB_MAP, gen_od(x, row0, c->m->vlen),
                           gen_none_od(), gen_none_od(), 0, nrows, gen_nblk(c, x), 1);
}

int plena_emit_copy_rows(struct plena_ctx *c, enum plena_stage stage,
                         const struct plena_tensor *dst, uint32_t dst_row0,
                         const struct plena_tensor *src, uint32_t src_row0, uint32_t nrows)
{
    int rc = gen_stage_ok(c, stage, M(RESIDUAL_SETUP) | M(GATHER) | M(ROUTER_TOPK),
                          "plena_emit_copy_rows");
    if (rc) return rc;
    struct plena_regset saved = c->live;
    uint8_t f[1];
    if (plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    gen_ld_const(c, stage, f[0], 0, c->map->off_one);
    gen_rows_blocks(c, stage, PLENA_OP_V_MUL_VF, RB_VF, gen_od(dst, dst_row0, c->m->vlen),
                    gen_od(src, src_row0, c->m->vlen), gen_none_od(), f[0], nrows, gen_nblk(c, dst),
                    1);
    c->live = saved;
    return c->p->status;
}

int plena_emit_rmsnorm_rows(struct plena_ctx *c, enum plena_stage stage,
                            const struct plena_tensor *x, uint32_t nrows, uint32_t eps_off,
                            uint32_t invh_off)
{
    int rc = gen_stage_ok(c, stage, M(RESIDUAL_SETUP), "plena_emit_rmsnorm_rows");
    if (rc) return rc;
    if (nrows == 0) return 0;
    struct plena_regset saved = c->live;
    uint32_t mark = plena_vram_mark(c->va);
    struct plena_tensor q;
    if (gen_valloc(c, 1, c->m->vlen, "rms_q", &q)) return c->p->status;
    uint8_t g[6], f[4];
    if (plena_regs_take(c, 6, 0, 0, g) || plena_regs_take(c, 0, 4, 0, f)) return c->p->status;
    unsigned cr = g[0], cb = g[1], gR = g[2], gX = g[3], gQ = g[4], scr = g[5];
    unsigned fs = f[0], fm = f[1], fih = f[2], feps = f[3];
    gen_ld_const(c, stage, fih, gX, invh_off);
    gen_ld_const(c, stage, feps, gX, eps_off);
    plena_emit_li(c, stage, gR, x->base);
    plena_emit_li(c, stage, gQ, q.base);
    uint32_t nb = gen_nblk(c, x);
    struct plena_step bstep;
    plena_step_init(c, stage, &bstep, (uint64_t)x->prow * c->m->vlen, scr);
    int rl = plena_loop_begin_t(c, stage, cr, nrows);
    plena_emit(c, stage, PLENA_OP_S_ADD_FP, fs, 0, 0, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gX, gR, 0, 0, 0, 0);
    int bl = plena_loop_begin(c, stage, cb, nb);
    plena_emit(c, stage, PLENA_OP_V_MUL_VV, gQ, gX, gX, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_RED_SUM, fs, gQ, 0, 0, 0, 0);
    if (bl) plena_step_emit(c, stage, gX, &bstep);
    plena_loop_end(c, stage);
    plena_emit(c, stage, PLENA_OP_S_MUL_FP, fm, fs, fih, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_ADD_FP, fm, fm, feps, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_SQRT_FP, fm, fm, 0, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_RECI_FP, fm, fm, 0, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gX, gR, 0, 0, 0, 0);
    bl = plena_loop_begin(c, stage, cb, nb);
    plena_emit(c, stage, PLENA_OP_V_MUL_VF, gX, gX, fm, 0, 0, 0);
    if (bl) plena_step_emit(c, stage, gX, &bstep);
    plena_loop_end(c, stage);
    if (rl) plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gR, gR, 0, 0, 0, c->m->vlen);
    plena_loop_end(c, stage);
    plena_vram_release(c->va, mark);
    c->live = saved;
    return c->p->status;
}

int plena_emit_mul_rows_by_row(struct plena_ctx *c, enum plena_stage stage,
                               const struct plena_tensor *x, uint32_t nrows,
                               const struct plena_tensor *w)
{
    int rc = gen_stage_ok(c, stage, M(RESIDUAL_SETUP), "plena_emit_mul_rows_by_row");
    if (rc) return rc;
    struct opnd ow = gen_od(w, 0, c->m->vlen);
    ow.fixed = 1;
    return gen_rows_blocks(c, stage, PLENA_OP_V_MUL_VV, RB_VV, gen_od(x, 0, c->m->vlen),
                           gen_od(x, 0, c->m->vlen), ow, 0, nrows, gen_nblk(c, x), 1);
}

/* ---- 3.3.2 residual ---- */

int plena_moe_residual_setup(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                             const struct plena_tensor *h, const struct plena_tensor *residual,
                             const struct plena_tensor *gamma, uint32_t t_rows)
{
    plena_prog_comment(c->p, "residual setup: zero, copy, RMSNorm, norm weight");
    plena_moe_true_zero_rows(c, PLENA_STAGE_RESIDUAL_SETUP, residual, 0, residual->prow);
    if (h->prow > t_rows)
        plena_moe_true_zero_rows(c, PLENA_STAGE_RESIDUAL_SETUP, h, t_rows, h->prow - t_rows);
    plena_emit_copy_rows(c, PLENA_STAGE_RESIDUAL_SETUP, residual, 0, h, 0, t_rows);
    plena_emit_rmsnorm_rows(c, PLENA_STAGE_RESIDUAL_SETUP, h, t_rows, c->map->off_eps,
                            c->map->off_invh);
    plena_emit_mul_rows_by_row(c, PLENA_STAGE_RESIDUAL_SETUP, h, t_rows, gamma);
    (void)cfg;
    return c->p->status;
}

/* dst = bf16(dst + src) over the first t_rows rows and every column block,
 * in a token loop (static size independent of T) */
static int rows_add(struct plena_ctx *c, enum plena_stage stage, const struct plena_tensor *dst,
                    const struct plena_tensor *src, uint32_t t_rows)
{
    return gen_rows_blocks(c, stage, PLENA_OP_V_ADD_VV, RB_VV, gen_od(dst, 0, c->m->vlen),
                           gen_od(dst, 0, c->m->vlen), gen_od(src, 0, c->m->vlen), 0, t_rows,
                           gen_nblk(c, dst), 1);
}

int plena_moe_residual_add_back(struct plena_ctx *c, const struct plena_tensor *out,
                                const struct plena_tensor *residual, uint32_t t_rows)
{
    plena_prog_comment(c->p, "residual add-back");
    return rows_add(c, PLENA_STAGE_RESIDUAL_SETUP, out, residual, t_rows);
}

/* ---- 3.3.5 projection ---- */

/* Prefetch of one K chunk of column block cb into MRAM slots 0..ns-1. The
 * slot and HBM offset pointers are advanced by S_ADDI_INT between tiles
 * (2 instructions per tile instead of up to 3 with two li). */
static void prefetch_tiles(struct plena_ctx *c, enum plena_stage stage, const struct plena_proj *pj,
                           unsigned aw, uint32_t cb, uint32_t kt0, uint32_t ns, uint32_t bytes,
                           uint32_t slot0)
{
    struct plena_regset saved = c->live;
    uint8_t g[3];
    if (plena_regs_take(c, 3, 0, 0, g)) return;
    const uint64_t mlen2 = (uint64_t)c->m->mlen * c->m->mlen;
    const uint64_t tstep = (uint64_t)c->m->mlen * pj->N_p * bytes;
    plena_emit_addi_geom(c, stage, g[0], 0, (uint64_t)slot0 * mlen2, g[2]);
    plena_emit_li(c, stage, g[1],
                  ((uint64_t)kt0 * c->m->mlen * pj->N_p + (uint64_t)cb * c->m->mlen) * bytes);
    for (uint32_t s = 0; s < ns; s++) {
        plena_emit(c, stage, PLENA_OP_H_PREFETCH_M, g[0], g[1], aw, 1, pj->bf16_plain, 0);
        if (s + 1 < ns) {
            plena_emit_addi_geom(c, stage, g[0], g[0], mlen2, g[2]);
            plena_emit_addi_geom(c, stage, g[1], g[1], tstep, g[2]);
        }
    }
    c->live = saved;
}

void gen_prefetch_chunk(struct plena_ctx *c, enum plena_stage stage, const struct plena_proj *pj,
                        unsigned aw, uint32_t cb, uint32_t kt0, uint32_t ns, uint32_t bytes)
{
    prefetch_tiles(c, stage, pj, aw, cb, kt0, ns, bytes, 0);
}

/* STREAM_F32 when the K tiles do not all fit in MRAM (docs/lowering.md
 * "Layer steps", router GEMM of a wide model: DeepSeek-V3's 112 K tiles
 * against 64 MRAM tiles): tiles 0..R-1 stay resident in slots 0..R-1 for the
 * whole column block; the rest are re-streamed, S at a time through slots
 * R..R+S-1, for every (micro-column, row group) accumulator before its one
 * M_MM_WO. Every logit is still one f32 accumulator over all K tiles in
 * increasing order with one BF16 rounding, so the bits equal the all-resident
 * form's. S = 8 keeps the re-streamed bytes near their minimum (S = 1) while
 * leaving the DMA a few tiles to run ahead. */
enum { RESTREAM_SLOTS = 8 };

static void restream_block(struct plena_ctx *c, const struct plena_proj_stages *st,
                           const struct plena_proj *pj, unsigned aw, uint32_t cb, uint32_t bytes)
{
    const uint32_t nct = pj->K_p / c->m->mlen, mram = c->m->mram_tiles;
    const uint32_t S = mram / 2 < RESTREAM_SLOTS ? mram / 2 : RESTREAM_SLOTS, R = mram - S;
    const uint32_t ngroups = gen_cdiv(pj->rows, c->m->blen);
    const uint64_t mlen2 = (uint64_t)c->m->mlen * c->m->mlen;
    const enum plena_stage cs = st->compute;
    struct plena_regset saved = c->live;
    prefetch_tiles(c, st->prefetch, pj, aw, cb, 0, R, bytes, 0);
    uint8_t g[11];
    if (plena_regs_take(c, 11, 0, 0, g)) return;
    const unsigned c1 = g[0], c2 = g[1], c3 = g[2], gMj = g[3], gRj = g[4], gAg = g[5], gRg = g[6],
                   gM = g[7], gA = g[8], scr = g[10];
    struct plena_step xstep;
    plena_step_init(c, cs, &xstep, (uint64_t)pj->x->prow * c->m->vlen, g[9]);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gMj, 0, 0, 0, 0, 0);
    plena_emit_li(c, cs, gRj, plena_row(pj->y, 0, cb, c->m->vlen));
    plena_loop_begin(c, cs, c1, c->m->mlen / c->m->blen);
    plena_emit_li(c, cs, gAg, plena_row(pj->x, 0, 0, c->m->vlen));
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRg, gRj, 0, 0, 0, 0);
    plena_loop_begin(c, cs, c2, ngroups);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, gMj, 0, 0, 0, 0);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gA, gAg, 0, 0, 0, 0);
    for (uint32_t kt0 = 0; kt0 < nct && !c->p->status;) {
        const uint32_t ns = kt0 == 0 ? R : (nct - kt0 < S ? nct - kt0 : S);
        if (kt0) { /* the next S tiles into the streaming slots */
            prefetch_tiles(c, st->prefetch, pj, aw, cb, kt0, ns, bytes, R);
            plena_emit_addi_geom(c, cs, gM, gMj, (uint64_t)R * mlen2, scr);
        }
        plena_loop_begin(c, cs, c3, ns);
        plena_emit(c, cs, PLENA_OP_M_MM, 0, gM, gA, 0, 0, 0);
        plena_emit_addi_geom(c, cs, gM, gM, mlen2, scr);
        plena_step_emit(c, cs, gA, &xstep);
        plena_loop_end(c, cs);
        kt0 += ns;
    }
    plena_emit(c, cs, PLENA_OP_M_MM_WO, gRg, 0, 0, 0, 0, 0);
    plena_emit_addi_geom(c, cs, gAg, gAg, (uint64_t)c->m->blen * c->m->vlen, scr);
    plena_emit_addi_geom(c, cs, gRg, gRg, (uint64_t)c->m->blen * c->m->vlen, scr);
    plena_loop_end(c, cs);
    plena_emit_addi_geom(c, cs, gMj, gMj, (uint64_t)c->m->blen * c->m->mlen, scr);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRj, gRj, 0, 0, 0, c->m->blen);
    plena_loop_end(c, cs);
    c->live = saved;
}

/* Compute part of one K chunk with the tile-in-chunk level unrolled
 * at emit time: one activation register per tile (pre-advanced to its K
 * tile), one MRAM pointer stepped by c->m->mlen^2 between the chunk's M_MMs and
 * stepped back to the next micro-column with one S_SUB_INT, so one M_MM
 * costs about 2 executed instructions instead of 4 (the pair budget of docs/lowering.md "Builder"
 * is what this buys). Row groups are the outer hardware loop and
 * micro-columns the inner one: (g, jj) blocks are independent accumulator
 * lifetimes, so the order changes no bit. Returns 0 (emitting nothing) when
 * the registers or immediates do not fit; the caller then uses the
 * per-tile loop form. */
int gen_fast_chunk(struct plena_ctx *c, const struct plena_tensor *x, const struct plena_tensor *d,
                   uint32_t dc, uint32_t kt0, uint32_t ns, uint32_t ngroups, enum plena_stage cs,
                   const struct gen_live_rows *live)
{
    const uint64_t mlen2 = (uint64_t)c->m->mlen * c->m->mlen,
                   xstep = (uint64_t)x->prow * c->m->vlen;
    const uint64_t jstep = (uint64_t)c->m->blen * c->m->mlen,
                   gstep = (uint64_t)c->m->blen * c->m->vlen;
    const int l2 = live || ngroups >= 2;
    /* gM steps ns-1 times by c->m->mlen^2 per micro-column, then moves to the next
     * micro-column: net back = (ns-1)*c->m->mlen^2 - c->m->blen*c->m->mlen */
    const int64_t back = (int64_t)(ns - 1) * (int64_t)mlen2 - (int64_t)jstep;
    const unsigned fixed = 3 + (unsigned)l2 + (back > 0 ? 1u : 0u);
    if (ns + fixed > 9 || mlen2 > PLENA_IMM18_MAX || jstep > PLENA_IMM18_MAX ||
        gstep > PLENA_IMM18_MAX || (uint64_t)c->m->mlen > PLENA_IMM18_MAX)
        return 0;
    if (c->p->status) return 1;
    struct plena_regset saved = c->live;
    uint8_t g[9];
    if (plena_regs_take(c, fixed + ns, 0, 0, g)) return 1;
    unsigned c1 = g[0], gR = g[1], gM = g[2], k = 3;
    unsigned c2 = l2 ? g[k++] : 0;
    unsigned gK = back > 0 ? g[k++] : 0;
    const uint8_t *ga = &g[k];
    for (uint32_t s = 0; s < ns; s++) {
        uint64_t v = plena_row(x, 0, kt0 + s, c->m->vlen);
        if (s == 0 || xstep > PLENA_IMM18_MAX || c->p->stable_form) {
            plena_emit_li(c, cs, ga[s], v);
            if (live) plena_emit(c, cs, PLENA_OP_S_ADD_INT, ga[s], ga[s], live->grow, 0, 0, 0);
        } else {
            plena_emit(c, cs, PLENA_OP_S_ADDI_INT, ga[s], ga[s - 1], 0, 0, 0, (uint32_t)xstep);
        }
    }
    if (back > 0) plena_emit_li(c, cs, gK, (uint64_t)back);
    plena_emit_li(c, cs, gR, plena_row(d, 0, dc, c->m->vlen));
    if (live) {
        plena_emit(c, cs, PLENA_OP_S_ADD_INT, gR, gR, live->grow, 0, 0, 0);
        plena_loop_begin_live(c, cs, c2, live->gnm1, live->body_mult);
    } else {
        plena_loop_begin(c, cs, c2, ngroups); /* ngroups == 1: no loop instructions */
    }
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, 0, 0, 0, 0, 0);
    plena_loop_begin(c, cs, c1, c->m->mlen / c->m->blen);
    for (uint32_t s = 0; s < ns; s++) {
        plena_emit(c, cs, PLENA_OP_M_MM, 0, gM, ga[s], 0, 0, 0);
        if (s + 1 < ns) plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, gM, 0, 0, 0, (uint32_t)mlen2);
    }
    plena_emit(c, cs, PLENA_OP_M_MM_WO, gR, 0, 0, 0, 0, 0);
    if (c->m->mlen / c->m->blen >= 2) {
        if (back > 0)
            plena_emit(c, cs, PLENA_OP_S_SUB_INT, gM, gM, gK, 0, 0, 0);
        else if (back < 0)
            plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, gM, 0, 0, 0, (uint32_t)-back);
        plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gR, gR, 0, 0, 0, c->m->blen);
    }
    plena_loop_end(c, cs);
    if (l2) {
        /* next row group: activations +c->m->blen rows; result pointer advanced by
         * c->m->mlen (micro-columns) above, so + c->m->blen*c->m->vlen - c->m->mlen here */
        for (uint32_t s = 0; s < ns; s++)
            plena_emit(c, cs, PLENA_OP_S_ADDI_INT, ga[s], ga[s], 0, 0, 0, (uint32_t)gstep);
        uint64_t adv = gstep - (c->m->mlen / c->m->blen >= 2 ? (uint64_t)c->m->mlen : 0);
        if (adv) plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gR, gR, 0, 0, 0, (uint32_t)adv);
    }
    plena_loop_end(c, cs);
    c->live = saved;
    return 1;
}

/* The per-tile form of one K chunk in the stable form (expert-major): row
 * groups outer, micro-columns inner, so no loop iteration grows with the
 * row count (the router's STREAM_F32 chunk of every K tile, with T_blk in
 * the thousands); (g, jj) blocks are independent accumulator lifetimes, so
 * the order changes no bit. The activation step, a row pitch, is held in a
 * register; the other steps are geometry. */
static void groups_outer_chunk(struct plena_ctx *c, const struct plena_proj *pj,
                               const struct plena_tensor *d, uint32_t dc, uint32_t kt0, uint32_t ns,
                               uint32_t ngroups, enum plena_stage cs)
{
    const uint64_t mlen2 = (uint64_t)c->m->mlen * c->m->mlen;
    const uint64_t gstep = (uint64_t)c->m->blen * c->m->vlen,
                   jstep = (uint64_t)c->m->blen * c->m->mlen;
    if (mlen2 > PLENA_IMM18_MAX || gstep > PLENA_IMM18_MAX || jstep > PLENA_IMM18_MAX) {
        plena_prog_fail(c->p, PLENA_GEN_IMM, "projection steps (MLEN %u, BLEN %u) exceed 18 bits",
                        c->m->mlen, c->m->blen);
        return;
    }
    uint8_t g[10];
    if (plena_regs_take(c, 10, 0, 0, g)) return;
    const unsigned c1 = g[0], c2 = g[1], c3 = g[2], gMj = g[3], gRj = g[4], gAg = g[5], gRg = g[6],
                   gM = g[7], gA = g[8];
    struct plena_step xstep;
    plena_step_init(c, cs, &xstep, (uint64_t)pj->x->prow * c->m->vlen, g[9]);
    plena_emit_li(c, cs, gAg, plena_row(pj->x, 0, kt0, c->m->vlen));
    plena_emit_li(c, cs, gRg, plena_row(d, 0, dc, c->m->vlen));
    plena_loop_begin(c, cs, c2, ngroups);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gMj, 0, 0, 0, 0, 0);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRj, gRg, 0, 0, 0, 0);
    plena_loop_begin(c, cs, c1, c->m->mlen / c->m->blen);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, gMj, 0, 0, 0, 0);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gA, gAg, 0, 0, 0, 0);
    plena_loop_begin(c, cs, c3, ns);
    plena_emit(c, cs, PLENA_OP_M_MM, 0, gM, gA, 0, 0, 0);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, gM, 0, 0, 0, (uint32_t)mlen2);
    plena_step_emit(c, cs, gA, &xstep);
    plena_loop_end(c, cs);
    plena_emit(c, cs, PLENA_OP_M_MM_WO, gRj, 0, 0, 0, 0, 0);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gMj, gMj, 0, 0, 0, (uint32_t)jstep);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRj, gRj, 0, 0, 0, c->m->blen);
    plena_loop_end(c, cs);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gAg, gAg, 0, 0, 0, (uint32_t)gstep);
    plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRg, gRg, 0, 0, 0, (uint32_t)gstep);
    plena_loop_end(c, cs);
}

int plena_emit_projection(struct plena_ctx *c, const struct plena_proj_stages *st,
                          const struct plena_proj *pj)
{
    const unsigned allowed = M(ROUTER_TOPK) | M(EXPERT_WEIGHT_PREFETCH) | M(EXPERT_PROJECTION) |
                             M(SHARED_EXPERT_PROJECTION);
    int rc;
    if ((rc = gen_stage_ok(c, st->address, allowed, "plena_emit_projection")) ||
        (rc = gen_stage_ok(c, st->prefetch, allowed, "plena_emit_projection")) ||
        (rc = gen_stage_ok(c, st->compute, allowed, "plena_emit_projection")))
        return rc;
    if (c->p->status) return c->p->status;
    if (pj->K_p % c->m->mlen || pj->N_p % c->m->mlen || pj->K_p == 0 || pj->N_p == 0 ||
        pj->rows == 0)
        return plena_prog_fail(c->p, PLENA_GEN_SHAPE, "projection %ux%u (rows %u) not MLEN-padded",
                               pj->K_p, pj->N_p, pj->rows);
    struct plena_regset saved = c->live;
    const uint32_t bytes = pj->bf16_plain ? 2 : 1;
    const uint32_t nct = pj->K_p / c->m->mlen;
    uint32_t chunk = pj->stream_f32 ? nct : (pj->chunk_tiles ? pj->chunk_tiles : 4);
    if (chunk > nct) chunk = nct;
    const int restream = pj->stream_f32 && chunk > c->m->mram_tiles && c->m->mram_tiles >= 2;
    if (chunk > c->m->mram_tiles && !restream)
        return plena_prog_fail(c->p, PLENA_GEN_SHAPE,
                               "MRAM: a projection chunk needs %u tiles of MLEN x MLEN (%s), limit "
                               "%u tiles (MATRIX_SRAM_SIZE / MLEN); driven by %s",
                               chunk,
                               pj->stream_f32 ? "the router streams all K tiles; re-streaming "
                                                "needs at least 2"
                                              : "C",
                               c->m->mram_tiles,
                               pj->stream_f32 ? "model.hidden_size" : "the chunk size C");
    const uint32_t nch = gen_cdiv(nct, chunk);
    const uint64_t mlen2 = (uint64_t)c->m->mlen * c->m->mlen;
    unsigned aw = pj->areg;
    if (!pj->dynamic) {
        uint8_t a[1], g[2];
        if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 2, 0, 0, g)) return c->p->status;
        aw = a[0];
        uint32_t lo = (uint32_t)pj->w_base, hi = (uint32_t)(pj->w_base >> 32);
        plena_emit_li(c, st->address, g[0], lo);
        if (hi) plena_emit_li(c, st->address, g[1], hi);
        plena_emit(c, st->address, PLENA_OP_C_SET_ADDR_REG, aw, hi ? g[1] : 0, g[0], 0, 0, 0);
        c->live.gp = saved.gp; /* the A register stays taken */
    }
    struct plena_regset with_a = c->live;
    {
        uint8_t g[1];
        if (plena_regs_take(c, 1, 0, 0, g)) return c->p->status;
        if (!pj->bf16_plain) {
            plena_emit_li(c, st->prefetch, g[0], (uint64_t)pj->K_p * pj->N_p);
            plena_emit(c, st->prefetch, PLENA_OP_C_SET_SCALE_REG, g[0], 0, 0, 0, 0, 0);
        }
        plena_emit_li(c, st->prefetch, g[0], (uint64_t)pj->N_p * bytes);
        plena_emit(c, st->prefetch, PLENA_OP_C_SET_STRIDE_REG, g[0], 0, 0, 0, 0, 0);
        c->live = with_a;
    }
    if (restream) {
        for (uint32_t cb = 0; cb < pj->N_p / c->m->mlen && !c->p->status; cb++)
            restream_block(c, st, pj, aw, cb, bytes);
        c->live = saved;
        return c->p->status;
    }
    struct plena_tensor ytmp;
    int have_tmp = 0;
    if (nch > 1) {
        if (gen_valloc(c, pj->rows, c->m->vlen, "ksplit_tmp", &ytmp)) return c->p->status;
        have_tmp = 1;
    }
    const struct plena_tensor *x = pj->x, *y = pj->y;
    const uint32_t ngroups = gen_cdiv(pj->rows, c->m->blen);
    for (uint32_t cb = 0; cb < pj->N_p / c->m->mlen && !c->p->status; cb++) {
        for (uint32_t q = 0; q < nch && !c->p->status; q++) {
            uint32_t kt0 = q * chunk, ns = nct - kt0 < chunk ? nct - kt0 : chunk;
            uint8_t g[10];
            gen_prefetch_chunk(c, st->prefetch, pj, aw, cb, kt0, ns, bytes);
            if (gen_fast_chunk(c, pj->x, q == 0 ? y : &ytmp, q == 0 ? cb : 0, kt0, ns, ngroups,
                               st->compute, NULL)) {
                c->live = with_a;
                goto chunk_add;
            }
            if (c->p->stable_form) {
                groups_outer_chunk(c, pj, q == 0 ? y : &ytmp, q == 0 ? cb : 0, kt0, ns, ngroups,
                                   st->compute);
                c->live = with_a;
                goto chunk_add;
            }
            if (plena_regs_take(c, 9, 0, 0, g)) return c->p->status;
            unsigned c1 = g[0], c2 = g[1], c3 = g[2], gMj = g[3], gRj = g[4], gAg = g[5],
                     gRg = g[6], gM = g[7], gA = g[8];
            unsigned scr = 0;
            uint64_t xstep = (uint64_t)x->prow * c->m->vlen;
            if (xstep > PLENA_IMM18_MAX || (uint64_t)c->m->blen * c->m->vlen > PLENA_IMM18_MAX) {
                uint8_t s1[1];
                if (plena_regs_take(c, 1, 0, 0, s1)) return c->p->status;
                scr = s1[0];
            }
            const struct plena_tensor *d = q == 0 ? y : &ytmp;
            uint32_t dc = q == 0 ? cb : 0;
            const enum plena_stage cs = st->compute;
            plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gMj, 0, 0, 0, 0, 0);
            plena_emit_li(c, cs, gRj, plena_row(d, 0, dc, c->m->vlen));
            int l1 = plena_loop_begin(c, cs, c1, c->m->mlen / c->m->blen);
            plena_emit_li(c, cs, gAg, plena_row(x, 0, kt0, c->m->vlen));
            int l2 = ngroups >= 2;
            unsigned rg = gRj;
            if (l2) {
                plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRg, gRj, 0, 0, 0, 0);
                rg = gRg;
            }
            plena_loop_begin(c, cs, c2, ngroups);
            unsigned m = gMj, a = gAg;
            if (ns >= 2) {
                plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gM, gMj, 0, 0, 0, 0);
                plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gA, gAg, 0, 0, 0, 0);
                m = gM;
                a = gA;
            }
            int l3 = plena_loop_begin(c, cs, c3, ns);
            plena_emit(c, cs, PLENA_OP_M_MM, 0, m, a, 0, 0, 0);
            if (l3) {
                plena_emit_addi_geom(c, cs, gM, gM, mlen2, scr);
                plena_emit_addi(c, cs, gA, gA, xstep, scr);
            }
            plena_loop_end(c, cs);
            plena_emit(c, cs, PLENA_OP_M_MM_WO, rg, 0, 0, 0, 0, 0);
            if (l2) {
                plena_emit_addi_geom(c, cs, gAg, gAg, (uint64_t)c->m->blen * c->m->vlen, scr);
                plena_emit_addi_geom(c, cs, gRg, gRg, (uint64_t)c->m->blen * c->m->vlen, scr);
            }
            plena_loop_end(c, cs);
            if (l1) {
                plena_emit_addi_geom(c, cs, gMj, gMj, (uint64_t)c->m->blen * c->m->mlen, scr);
                plena_emit(c, cs, PLENA_OP_S_ADDI_INT, gRj, gRj, 0, 0, 0, c->m->blen);
            }
            plena_loop_end(c, cs);
            c->live = with_a;
        chunk_add:
            if (q >= 1) {
                struct plena_tensor ycol = *y;
                ycol.base = plena_row(y, 0, cb, c->m->vlen);
                gen_rows_blocks(c, st->compute, PLENA_OP_V_ADD_VV, RB_VV,
                                gen_od(&ycol, 0, c->m->vlen), gen_od(&ycol, 0, c->m->vlen),
                                gen_od(&ytmp, 0, c->m->vlen), 0, gen_rup(pj->rows, c->m->blen), 1,
                                1);
            }
        }
    }
    if (have_tmp) plena_vram_free(c->va, &ytmp);
    c->live = saved;
    return c->p->status;
}

/* ---- 3.3.3 router logits ---- */

/* f += the dot product of the rows at gX and gW (both stepped over the nb
 * column blocks, clobbered): per block a V_MUL_VV into the one-row scratch
 * at gQ and its V_RED_SUM, the block order of the dot router and the
 * shared gate (docs/lowering.md "Layer steps"). */
static void dot_rows(struct plena_ctx *c, enum plena_stage stage, unsigned f, unsigned gQ,
                     unsigned gX, unsigned gW, unsigned cc, uint32_t nb,
                     const struct plena_step *xstep, const struct plena_step *wstep)
{
    int lc = plena_loop_begin(c, stage, cc, nb);
    plena_emit(c, stage, PLENA_OP_V_MUL_VV, gQ, gX, gW, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_RED_SUM, f, gQ, 0, 0, 0, 0);
    if (lc) {
        plena_step_emit(c, stage, gX, xstep);
        plena_step_emit(c, stage, gW, wstep);
    }
    plena_loop_end(c, stage);
}

int plena_moe_router_logits_dot(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                const struct plena_tensor *x, const struct plena_tensor *wr,
                                const struct plena_tensor *logits, uint32_t t_rows)
{
    const enum plena_stage s = PLENA_STAGE_ROUTER_TOPK;
    if (c->p->status) return c->p->status;
    struct plena_regset saved = c->live;
    uint32_t mark = plena_vram_mark(c->va);
    struct plena_tensor q;
    if (gen_valloc(c, 1, c->m->vlen, "router_q", &q)) return c->p->status;
    const uint32_t eb = c->map->eb, nb = gen_nblk(c, x);
    uint8_t g[12], f[1];
    if (plena_regs_take(c, 12, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    unsigned ct = g[0], ce = g[1], cc = g[2], gXt = g[3], gWe = g[4], gXi = g[5], gWi = g[6],
             gQ = g[7], gS = g[8], gL = g[9];
    struct plena_step xstep, wstep;
    unsigned fa = f[0];
    const uint32_t scr_addr = c->map->fp_base + c->map->off_dot;
    plena_prog_comment(c->p, "router logits (dot form)");
    /* clear the scratch once per token block */
    plena_emit_li(c, s, gS, scr_addr);
    int l = plena_loop_begin(c, s, ct, eb * c->m->vlen);
    plena_emit(c, s, PLENA_OP_S_ST_FP, 0, gS, 0, 0, 0, 0);
    if (l) plena_emit(c, s, PLENA_OP_S_ADDI_INT, gS, gS, 0, 0, 0, 1);
    plena_loop_end(c, s);
    plena_emit_li(c, s, gXt, x->base);
    plena_emit_li(c, s, gL, logits->base);
    plena_emit_li(c, s, gQ, q.base);
    plena_step_init(c, s, &xstep, (uint64_t)x->prow * c->m->vlen, g[10]);
    plena_step_init(c, s, &wstep, (uint64_t)wr->prow * c->m->vlen, g[11]);
    int lt = plena_loop_begin_t(c, s, ct, t_rows);
    plena_emit_li(c, s, gWe, wr->base);
    plena_emit_li(c, s, gS, scr_addr);
    int le = plena_loop_begin(c, s, ce, cfg->E);
    plena_emit(c, s, PLENA_OP_S_ADD_FP, fa, 0, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gXi, gXt, 0, 0, 0, 0);
    plena_emit(c, s, PLENA_OP_S_ADDI_INT, gWi, gWe, 0, 0, 0, 0);
    dot_rows(c, s, fa, gQ, gXi, gWi, cc, nb, &xstep, &wstep);
    plena_emit(c, s, PLENA_OP_S_ST_FP, fa, gS, 0, 0, 0, 0);
    if (le) {
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gS, gS, 0, 0, 0, 1);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gWe, gWe, 0, 0, 0, c->m->vlen);
    }
    plena_loop_end(c, s);
    plena_emit_li(c, s, gS, scr_addr);
    for (uint32_t b = 0; b < eb; b++) {
        plena_emit(c, s, PLENA_OP_S_MAP_V_FP, gL, gS, 0, 0, 0, b * c->m->vlen);
        if (b + 1 < eb || lt) plena_emit(c, s, PLENA_OP_S_ADDI_INT, gL, gL, 0, 0, 0, c->m->vlen);
    }
    if (lt) plena_emit(c, s, PLENA_OP_S_ADDI_INT, gXt, gXt, 0, 0, 0, c->m->vlen);
    plena_loop_end(c, s);
    plena_vram_release(c->va, mark);
    c->live = saved;
    return c->p->status;
}

int plena_moe_router_logits_gemm(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                 const struct plena_tensor *x, uint64_t wr_hbm,
                                 const struct plena_tensor *logits, uint32_t t_rows)
{
    const enum plena_stage s = PLENA_STAGE_ROUTER_TOPK;
    if (c->p->status) return c->p->status;
    const uint32_t eb = c->map->eb;
    plena_prog_comment(c->p, "router logits (GEMM form)");
    uint32_t mark = plena_vram_mark(c->va);
    struct plena_tensor y = *logits;
    if (eb > 1 && gen_valloc(c, t_rows, c->map->E_p, "router_y", &y)) return c->p->status;
    struct plena_proj_stages st = {s, s, s};
    struct plena_proj pj = {.x = x,
                            .rows = t_rows,
                            .w_base = wr_hbm,
                            .K_p = c->map->H_p,
                            .N_p = c->map->E_p,
                            .y = &y,
                            .stream_f32 = 1,
                            .chunk_tiles = cfg->chunk_tiles};
    plena_emit_projection(c, &st, &pj);
    if (eb > 1) {
        /* pack: row(Y, t, b) -> row(logits, t*eb + b, 0), exact copies */
        struct plena_regset saved = c->live;
        uint8_t f[1];
        if (plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
        gen_ld_const(c, s, f[0], 0, c->map->off_one);
        for (uint32_t b = 0; b < eb; b++) {
            struct opnd d = gen_od(logits, b, c->m->vlen);
            d.rstride = eb * c->m->vlen;
            struct opnd a = gen_od(&y, 0, c->m->vlen);
            a.base = plena_row(&y, 0, b, c->m->vlen);
            gen_rows_blocks(c, s, PLENA_OP_V_MUL_VF, RB_VF, d, a, gen_none_od(), f[0], t_rows, 1,
                            1);
        }
        c->live = saved;
    }
    plena_vram_release(c->va, mark);
    return c->p->status;
}

int plena_moe_router_bias_add(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                              const struct plena_tensor *logits, const struct plena_tensor *bias,
                              uint32_t t_rows)
{
    (void)cfg;
    const uint32_t eb = c->map->eb;
    for (uint32_t b = 0; b < eb; b++) {
        struct opnd d = gen_od(logits, b, c->m->vlen);
        d.rstride = eb * c->m->vlen;
        struct opnd bb = gen_od(bias, b, c->m->vlen);
        bb.fixed = 1;
        gen_rows_blocks(c, PLENA_STAGE_ROUTER_TOPK, PLENA_OP_V_ADD_VV, RB_VV, d, d, bb, 0, t_rows,
                        1, 1);
    }
    return c->p->status;
}

/* ---- 3.3.4 router select ---- */

unsigned gen_topk_setup(struct plena_ctx *c, const struct plena_moe_cfg *cfg, unsigned gK,
                        enum plena_topk_encoding *enc)
{
    const enum plena_stage s = PLENA_STAGE_ROUTER_TOPK;
    const uint32_t E = cfg->E, k = cfg->k;
    unsigned rmask;
    if (cfg->topk_policy == PLENA_TOPK_AUTO && E == 32 && k == 4) {
        *enc = PLENA_TOPK_ENC_RMASK0;
        rmask = 0;
    } else if (cfg->topk_policy == PLENA_TOPK_AUTO && E == 128 && k == 8) {
        *enc = PLENA_TOPK_ENC_RMASK1;
        rmask = 1;
    } else {
        *enc = PLENA_TOPK_ENC_REGISTER;
        rmask = 15;
        uint64_t packed = ((uint64_t)E << 8) | k;
        if (FAULT(cfg) == PLENA_FAULT_TOPK_SHIFT_7) packed = ((uint64_t)E << 7) | k;
        plena_prog_comment(c->p, "top-k register (E=%u, k=%u)", E, k);
        plena_emit_li(c, s, gK, packed);
        plena_emit(c, s, PLENA_OP_C_SET_TOPK_REG, gK, 0, 0, 0, 0, 0);
    }
    plena_prog_comment(c->p, "top-k encoding %s", plena_topk_encoding_name(*enc));
    return rmask;
}

int plena_moe_router_select(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                            struct gen_router *R, const struct plena_tensor *logits,
                            uint32_t t_rows, uint32_t w_off, uint32_t ids_off,
                            enum plena_topk_encoding *enc)
{
    const enum plena_stage s = PLENA_STAGE_ROUTER_TOPK;
    if (c->p->status) return c->p->status;
    const uint32_t E = cfg->E, k = cfg->k;
    if (!(E >= 1 && E <= PLENA_TOPK_MAX_EXPERTS && k >= 1 && k <= E && k <= PLENA_TOPK_MAX_K))
        return plena_prog_fail(c->p, PLENA_GEN_TOPK,
                               "top-k shape (E=%u, k=%u): expected 1 <= k <= "
                               "min(E, %d), 1 <= E <= %d",
                               E, k, PLENA_TOPK_MAX_K, PLENA_TOPK_MAX_EXPERTS);
    struct plena_regset saved = c->live;
    uint8_t g[5];
    if (plena_regs_take(c, 5, 0, 0, g)) return c->p->status;
    unsigned gK = g[0], gW = g[1], gL = g[2], gI = g[3], ct = g[4];
    R->rmask = gen_topk_setup(c, cfg, gK, enc);
    plena_emit_li(c, s, gW, (uint64_t)c->map->fp_base + w_off);
    plena_emit_li(c, s, gL, logits->base);
    plena_emit_li(c, s, gI, (uint64_t)c->map->int_base + ids_off);
    int l = plena_loop_begin_t(c, s, ct, t_rows);
    gen_router_token(c, R, cfg, gL, gW, gI, 1);
    if (l) {
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gW, gW, 0, 0, 0, k);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gL, gL, 0, 0, 0, c->map->eb * c->m->vlen);
        plena_emit(c, s, PLENA_OP_S_ADDI_INT, gI, gI, 0, 0, 0, k);
    }
    plena_loop_end(c, s);
    c->live = saved;
    return c->p->status;
}

/* ---- 3.3.6 accumulator, gather ---- */

int plena_moe_accumulator_init(struct plena_ctx *c, const struct plena_tensor *acc, uint32_t row0,
                               uint32_t nrows)
{
    plena_prog_comment(c->p, "accumulator init");
    return plena_moe_true_zero_rows(c, PLENA_STAGE_ACCUMULATOR_INIT, acc, row0, nrows);
}

int plena_moe_gather_pair_row(struct plena_ctx *c, const struct plena_tensor *slot,
                              const struct plena_tensor *x, unsigned gp_t)
{
    const enum plena_stage s = PLENA_STAGE_GATHER;
    struct plena_regset saved = c->live;
    uint8_t f[1];
    if (plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    gen_ld_const(c, s, f[0], 0, c->map->off_one);
    struct opnd src = gen_od(x, 0, c->m->vlen);
    src.dyn = gp_t;
    gen_rows_blocks(c, s, PLENA_OP_V_MUL_VF, RB_VF, gen_od(slot, 0, c->m->vlen), src, gen_none_od(),
                    f[0], 1, gen_nblk(c, slot), 0);
    c->live = saved;
    return c->p->status;
}

/* ---- 3.3.7 per-pair expert FFN ---- */

int plena_moe_expert_weight_address(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                    unsigned gp_p, const uint8_t a_regs[3])
{
    const enum plena_stage s = PLENA_STAGE_EXPERT_WEIGHT_ADDRESS;
    struct plena_regset saved = c->live;
    const struct plena_moe_map *mp = c->map;
    const uint64_t ids = (uint64_t)mp->int_base + mp->ids_off;
    if (!mp->windowed) {
        uint8_t g[5];
        if (plena_regs_take(c, 5, 0, 0, g)) return c->p->status;
        unsigned gE = g[0], gS = g[1], gO = g[2], gB = g[3], gH = g[4];
        plena_emit(c, s, PLENA_OP_S_LD_INT, gE, gp_p, 0, 0, 0, (uint32_t)ids);
        for (int q = 0; q < 3; q++) {
            uint32_t W = (uint32_t)(mp->table[q] >> 32);
            plena_emit_li(c, s, gS, mp->stride);
            plena_emit(c, s, PLENA_OP_S_MUL_INT, gO, gE, gS, 0, 0, 0);
            plena_emit_li(c, s, gB, mp->table[q] & 0xFFFFFFFFu);
            plena_emit(c, s, PLENA_OP_S_ADD_INT, gB, gB, gO, 0, 0, 0);
            if (W) plena_emit_li(c, s, gH, W);
            plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, a_regs[q], W ? gH : 0, gB, 0, 0, 0);
        }
    } else {
        uint8_t g[6];
        if (plena_regs_take(c, 6, 0, 0, g)) return c->p->status;
        unsigned gE = g[0], gW = g[1], gH = g[2], gS = g[3], gO = g[4], gB = g[5];
        plena_emit(c, s, PLENA_OP_S_LD_INT, gE, gp_p, 0, 0, 0, (uint32_t)ids);
        plena_emit(c, s, PLENA_OP_S_LD_INT, gW, gE, 0, 0, 0, mp->int_base + mp->wtab_off);
        for (int q = 0; q < 3; q++) {
            plena_emit(c, s, PLENA_OP_S_ADDI_INT, gH, gW, 0, 0, 0, mp->w0[q]);
            plena_emit_li(c, s, gS, mp->epw);
            plena_emit(c, s, PLENA_OP_S_MUL_INT, gO, gW, gS, 0, 0, 0);
            plena_emit(c, s, PLENA_OP_S_SUB_INT, gO, gE, gO, 0, 0, 0);
            plena_emit_li(c, s, gS, mp->stride);
            plena_emit(c, s, PLENA_OP_S_MUL_INT, gB, gO, gS, 0, 0, 0);
            plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, a_regs[q], gH, gB, 0, 0, 0);
        }
    }
    (void)cfg;
    c->live = saved;
    return c->p->status;
}

int plena_moe_expert_projection(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                                enum plena_proj_kind which, const struct plena_tensor *x,
                                const struct plena_tensor *y, unsigned areg)
{
    struct plena_proj_stages st = {PLENA_STAGE_EXPERT_WEIGHT_PREFETCH,
                                   PLENA_STAGE_EXPERT_WEIGHT_PREFETCH,
                                   PLENA_STAGE_EXPERT_PROJECTION};
    struct plena_proj pj = {.x = x,
                            .rows = 1,
                            .dynamic = 1,
                            .areg = areg,
                            .K_p = which == PLENA_PROJ_DOWN ? c->map->I_p : c->map->H_p,
                            .N_p = which == PLENA_PROJ_DOWN ? c->map->H_p : c->map->I_p,
                            .y = y,
                            .chunk_tiles = cfg->chunk_tiles};
    return plena_emit_projection(c, &st, &pj);
}

int plena_moe_expert_bias_add(struct plena_ctx *c, const struct plena_tensor *y,
                              const struct plena_tensor *bias, unsigned gp_p)
{
    const enum plena_stage s = PLENA_STAGE_EXPERT_BIAS;
    struct plena_regset saved = c->live;
    uint8_t g[3];
    if (plena_regs_take(c, 3, 0, 0, g)) return c->p->status;
    unsigned gE = g[0], gV = g[1], gO = g[2];
    plena_emit(c, s, PLENA_OP_S_LD_INT, gE, gp_p, 0, 0, 0,
               (uint32_t)((uint64_t)c->map->int_base + c->map->ids_off));
    plena_emit_li(c, s, gV, c->m->vlen);
    plena_emit(c, s, PLENA_OP_S_MUL_INT, gO, gE, gV, 0, 0, 0);
    struct opnd b = gen_od(bias, 0, c->m->vlen);
    b.dyn = gO;
    gen_rows_blocks(c, s, PLENA_OP_V_ADD_VV, RB_VV, gen_od(y, 0, c->m->vlen),
                    gen_od(y, 0, c->m->vlen), b, 0, 1, gen_nblk(c, y), 0);
    c->live = saved;
    return c->p->status;
}

int gen_act_setup(struct plena_ctx *c, enum plena_stage stage, int clamp, unsigned gtmp,
                  uint32_t na_off, struct gen_act *a)
{
    uint8_t f[4];
    if (plena_regs_take(c, 0, clamp ? 4 : 2, 0, f)) return c->p->status;
    a->clamp = clamp;
    a->fone = f[0];
    a->fna = f[1];
    a->flp = clamp ? f[2] : 0;
    a->fln = clamp ? f[3] : 0;
    gen_ld_const(c, stage, a->fone, gtmp, c->map->off_one);
    gen_ld_const(c, stage, a->fna, gtmp, na_off);
    if (clamp) {
        gen_ld_const(c, stage, a->flp, gtmp, c->map->off_lp);
        gen_ld_const(c, stage, a->fln, gtmp, c->map->off_ln);
    }
    return c->p->status;
}

/* Every op rounds to BF16: six rounding points for SwiGLU, eight clamp-gated
 * (docs/lowering.md "Layer steps"); the reference model follows the same order. */
void gen_act_block(struct plena_ctx *c, enum plena_stage stage, const struct gen_act *a,
                   unsigned gG, unsigned gU, unsigned gS)
{
    if (a->clamp) {
        plena_emit(c, stage, PLENA_OP_V_MIN_VF, gG, gG, a->flp, 0, 0, 0);
        plena_emit(c, stage, PLENA_OP_V_MIN_VF, gU, gU, a->flp, 0, 0, 0);
        plena_emit(c, stage, PLENA_OP_V_MAX_VF, gU, gU, a->fln, 0, 0, 0);
    }
    plena_emit(c, stage, PLENA_OP_V_MUL_VF, gS, gG, a->fna, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_EXP_V, gS, gS, 0, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_ADD_VF, gS, gS, a->fone, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_RECI_V, gS, gS, 0, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_MUL_VV, gG, gG, gS, 0, 0, 0);
    if (a->clamp) plena_emit(c, stage, PLENA_OP_V_ADD_VF, gU, gU, a->fone, 0, 0, 0);
    plena_emit(c, stage, PLENA_OP_V_MUL_VV, gU, gU, gG, 0, 0, 0);
}

int plena_moe_expert_activation(struct plena_ctx *c, enum plena_stage stage,
                                enum plena_act_policy policy, const struct plena_tensor *gate,
                                const struct plena_tensor *up, const struct plena_tensor *scratch,
                                uint32_t rows, uint32_t width)
{
    int rc = gen_stage_ok(c, stage, M(EXPERT_ACTIVATION) | M(SHARED_EXPERT_ACTIVATION),
                          "plena_moe_expert_activation");
    if (rc) return rc;
    if (c->p->status || rows == 0) return c->p->status;
    if (gate->prow != up->prow || gate->prow != scratch->prow)
        return plena_prog_fail(c->p, PLENA_GEN_SHAPE, "activation tensors differ in prow");
    struct plena_regset saved = c->live;
    uint8_t g[6];
    if (plena_regs_take(c, 6, 0, 0, g)) return c->p->status;
    unsigned gG = g[0], gU = g[1], gS = g[2], cr = g[3], cb = g[4], scr = g[5];
    const int shared = stage == PLENA_STAGE_SHARED_EXPERT_ACTIVATION;
    struct gen_act a;
    if (gen_act_setup(c, stage, policy == PLENA_ACT_GPT_OSS_CLAMP_GATED, gG,
                      shared ? c->map->off_na_shared : c->map->off_na_routed, &a))
        return c->p->status;
    plena_emit_li(c, stage, gG, gate->base);
    plena_emit_li(c, stage, gU, up->base);
    plena_emit_li(c, stage, gS, scratch->base);
    int bl = plena_loop_begin(c, stage, cb, gen_cdiv(width, c->m->vlen));
    int rl = plena_loop_begin(c, stage, cr, rows);
    gen_act_block(c, stage, &a, gG, gU, gS);
    if (rl) {
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gG, gG, 0, 0, 0, c->m->vlen);
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gU, gU, 0, 0, 0, c->m->vlen);
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gS, gS, 0, 0, 0, c->m->vlen);
    }
    plena_loop_end(c, stage);
    if (bl) {
        uint64_t step = (uint64_t)gate->prow * c->m->vlen - (rl ? (uint64_t)rows * c->m->vlen : 0);
        if (step) {
            plena_emit_addi(c, stage, gG, gG, step, scr);
            plena_emit_addi(c, stage, gU, gU, step, scr);
            plena_emit_addi(c, stage, gS, gS, step, scr);
        }
    }
    plena_loop_end(c, stage);
    c->live = saved;
    return c->p->status;
}

int plena_moe_broadcast_row_weights(struct plena_ctx *c, enum plena_stage stage,
                                    const struct plena_tensor *dst, uint32_t row0, uint32_t nrows,
                                    unsigned fp_reg, uint32_t fp_imm, uint32_t fp_step)
{
    int rc = gen_stage_ok(c, stage, M(EXPERT_ROUTE_WEIGHT) | M(SHARED_EXPERT_GATE),
                          "plena_moe_broadcast_row_weights");
    if (rc) return rc;
    if (c->p->status || nrows == 0) return c->p->status;
    struct plena_regset saved = c->live;
    uint8_t g[6], f[1];
    if (plena_regs_take(c, 6, 0, 0, g) || plena_regs_take(c, 0, 1, 0, f)) return c->p->status;
    unsigned gF = g[0], gR = g[1], gD = g[2], cr = g[3], cb = g[4], scr = g[5], fw = f[0];
    /* a table addressed from gp0 is a per-token table (the gate): its row
     * loop is a token loop, a hardware loop even for one row; a pair's weight
     * (pair-relative register) is one row without a loop */
    const int tloop = nrows > 1 || fp_reg == 0;
    unsigned fbase = fp_reg;
    if (tloop) {
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gF, fp_reg, 0, 0, 0, 0);
        fbase = gF;
    }
    plena_emit_li(c, stage, gR, plena_row(dst, row0, 0, c->m->vlen));
    struct plena_step dstep;
    plena_step_init(c, stage, &dstep, (uint64_t)dst->prow * c->m->vlen, scr);
    int rl =
        tloop ? plena_loop_begin_t(c, stage, cr, nrows) : plena_loop_begin(c, stage, cr, nrows);
    plena_emit(c, stage, PLENA_OP_S_LD_FP, fw, fbase, 0, 0, 0, fp_imm);
    uint32_t nb = gen_nblk(c, dst);
    if (nb > 1) plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gD, gR, 0, 0, 0, 0);
    unsigned d = nb > 1 ? gD : gR;
    int bl = plena_loop_begin(c, stage, cb, nb);
    plena_emit(c, stage, PLENA_OP_V_MUL_VF, d, d, fw, 0, 0, 0);
    if (bl) plena_step_emit(c, stage, gD, &dstep);
    plena_loop_end(c, stage);
    if (rl) {
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gF, gF, 0, 0, 0, fp_step);
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, gR, gR, 0, 0, 0, c->m->vlen);
    }
    plena_loop_end(c, stage);
    c->live = saved;
    return c->p->status;
}

int plena_moe_scatter_add(struct plena_ctx *c, const struct plena_tensor *acc, unsigned gp_t,
                          const struct plena_tensor *yd)
{
    struct opnd a = gen_od(acc, 0, c->m->vlen);
    a.dyn = gp_t;
    return gen_rows_blocks(c, PLENA_STAGE_SCATTER_COMBINE, PLENA_OP_V_ADD_VV, RB_VV, a, a,
                           gen_od(yd, 0, c->m->vlen), 0, 1, gen_nblk(c, acc), 0);
}

/* ---- 3.3.10 shared expert and gate ---- */

int plena_moe_shared_expert(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                            const struct plena_tensor *x, uint32_t t_rows,
                            const struct plena_tensor *s)
{
    enum plena_stage sp = PLENA_STAGE_SHARED_EXPERT_PROJECTION,
                     sa = PLENA_STAGE_SHARED_EXPERT_ACTIVATION;
    if (FAULT(cfg) == PLENA_FAULT_SHARED_AS_ROUTED) {
        sp = PLENA_STAGE_EXPERT_PROJECTION;
        sa = PLENA_STAGE_EXPERT_ACTIVATION;
    }
    if (c->p->status) return c->p->status;
    plena_prog_comment(c->p, "shared expert (fused width %u), %u rows", cfg->Is, t_rows);
    uint32_t mark = plena_vram_mark(c->va);
    struct plena_tensor G, U, Sc;
    const uint32_t Is_p = c->map->Is_p, H_p = c->map->H_p;
    if (gen_valloc(c, t_rows, Is_p, "shared_gate_proj", &G) ||
        gen_valloc(c, t_rows, Is_p, "shared_up_proj", &U) ||
        gen_valloc(c, t_rows, Is_p, "shared_act_scratch", &Sc))
        return c->p->status;
    struct plena_proj_stages st = {sp, sp, sp};
    struct plena_proj pj = {.x = x,
                            .rows = t_rows,
                            .w_base = c->map->shared[0],
                            .K_p = H_p,
                            .N_p = Is_p,
                            .y = &G,
                            .chunk_tiles = cfg->chunk_tiles};
    plena_emit_projection(c, &st, &pj);
    pj.w_base = c->map->shared[1];
    pj.y = &U;
    plena_emit_projection(c, &st, &pj);
    if (sa == PLENA_STAGE_SHARED_EXPERT_ACTIVATION)
        plena_moe_expert_activation(c, PLENA_STAGE_SHARED_EXPERT_ACTIVATION,
                                    PLENA_ACT_STANDARD_SWIGLU, &G, &U, &Sc, t_rows, Is_p);
    else
        plena_moe_expert_activation(c, PLENA_STAGE_EXPERT_ACTIVATION, PLENA_ACT_STANDARD_SWIGLU, &G,
                                    &U, &Sc, t_rows, Is_p);
    pj.x = &U;
    pj.w_base = c->map->shared[2];
    pj.K_p = Is_p;
    pj.N_p = H_p;
    pj.y = s;
    plena_emit_projection(c, &st, &pj);
    plena_vram_release(c->va, mark);
    return c->p->status;
}

int plena_moe_shared_gate(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                          const struct plena_tensor *x, uint32_t t_rows,
                          const struct plena_tensor *wg, uint32_t gate_off,
                          const struct plena_tensor *s)
{
    const enum plena_stage st = PLENA_STAGE_SHARED_EXPERT_GATE;
    (void)cfg; /* read only by the test-build fault switch */
    if (c->p->status) return c->p->status;
    plena_prog_comment(c->p, "shared gate: sigmoid(x . w_g) per token");
    struct plena_regset saved = c->live;
    uint32_t mark = plena_vram_mark(c->va);
    struct plena_tensor q;
    if (gen_valloc(c, 1, c->m->vlen, "gate_q", &q)) return c->p->status;
    uint8_t g[9], f[2];
    if (plena_regs_take(c, 9, 0, 0, g) || plena_regs_take(c, 0, 2, 0, f)) return c->p->status;
    unsigned gG = g[0], gX = g[1], ct = g[2], cc = g[3], gXc = g[4], gWc = g[5], gQ = g[6];
    struct plena_step xstep, wstep;
    unsigned fone = f[0], fz = f[1];
    plena_emit_li(c, st, gG, (uint64_t)c->map->fp_base + gate_off);
    plena_emit_li(c, st, gX, x->base);
    gen_ld_const(c, st, fone, gQ, c->map->off_one);
    plena_emit_li(c, st, gQ, q.base);
    const uint32_t nb = gen_nblk(c, x);
    plena_step_init(c, st, &xstep, (uint64_t)x->prow * c->m->vlen, g[7]);
    plena_step_init(c, st, &wstep, (uint64_t)wg->prow * c->m->vlen, g[8]);
    int lt = plena_loop_begin_t(c, st, ct, t_rows);
    plena_emit(c, st, PLENA_OP_S_ADD_FP, fz, 0, 0, 0, 0, 0);
    plena_emit(c, st, PLENA_OP_S_ADDI_INT, gXc, gX, 0, 0, 0, 0);
    plena_emit_li(c, st, gWc, wg->base);
    dot_rows(c, st, fz, gQ, gXc, gWc, cc, nb, &xstep, &wstep);
    plena_emit(c, st, PLENA_OP_S_SUB_FP, fz, 0, fz, 0, 0, 0);
    plena_emit(c, st, PLENA_OP_S_EXP_FP, fz, fz, 0, 0, 0, 0);
    plena_emit(c, st, PLENA_OP_S_ADD_FP, fz, fz, fone, 0, 0, 0);
    plena_emit(c, st, PLENA_OP_S_RECI_FP, fz, fz, 0, 0, 0, 0);
    plena_emit(c, st, PLENA_OP_S_ST_FP, fz, gG, 0, 0, 0, 0);
    if (lt) {
        plena_emit(c, st, PLENA_OP_S_ADDI_INT, gG, gG, 0, 0, 0, 1);
        plena_emit(c, st, PLENA_OP_S_ADDI_INT, gX, gX, 0, 0, 0, c->m->vlen);
    }
    plena_loop_end(c, st);
    plena_vram_release(c->va, mark);
    c->live = saved;
    if (FAULT(cfg) != PLENA_FAULT_DROP_GATE_MUL)
        plena_moe_broadcast_row_weights(c, PLENA_STAGE_SHARED_EXPERT_GATE, s, 0, t_rows, 0,
                                        c->map->fp_base + gate_off, 1);
    return c->p->status;
}

int plena_moe_combine_shared_and_routed(struct plena_ctx *c, const struct plena_tensor *acc,
                                        const struct plena_tensor *s, uint32_t t_rows)
{
    plena_prog_comment(c->p, "combine shared + routed");
    return rows_add(c, PLENA_STAGE_SCATTER_COMBINE, acc, s, t_rows);
}

/* ---- names, lookup, configuration ---- */

const char *plena_topk_encoding_name(enum plena_topk_encoding e)
{
    switch (e) {
    case PLENA_TOPK_ENC_RMASK0: return "rmask0";
    case PLENA_TOPK_ENC_RMASK1: return "rmask1";
    case PLENA_TOPK_ENC_REGISTER: return "register";
    case PLENA_TOPK_ENC_NONE: break;
    }
    return "none";
}

const char *plena_pair_form_name(enum plena_pair_form f)
{
    switch (f) {
    case PLENA_PAIRS_LOOPED: return "looped";
    case PLENA_PAIRS_TOKENS_UNROLLED: return "tokens_unrolled";
    case PLENA_PAIRS_UNROLLED: return "unrolled";
    case PLENA_PAIRS_SORTED: return "sorted";
    case PLENA_PAIRS_NONE: break;
    }
    return "none";
}

const struct plena_tensor *plena_moe_abi_find(const struct plena_moe_emit_info *info,
                                              const char *name)
{
    for (unsigned i = 0; i < info->n_abi; i++)
        if (!strcmp(info->abi[i].name, name)) return &info->abi[i];
    return NULL;
}

void plena_moe_cfg_from_model(const struct plena_moe_model *mdl, const struct plena_gen_machine *m,
                              struct plena_moe_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->m = *m;
    snprintf(cfg->name, sizeof cfg->name, "%s", mdl->name);
    cfg->H = mdl->hidden;
    cfg->I = mdl->moe_inter;
    cfg->routing = mdl->routing;
    cfg->E = mdl->routing == PLENA_ROUTING_NONE ? 0 : mdl->num_experts;
    cfg->k = mdl->routing == PLENA_ROUTING_NONE ? 0 : mdl->top_k;
    cfg->router_form = mdl->router_form;
    cfg->router_bias = mdl->router.logit_bias;
    cfg->topk_policy = PLENA_TOPK_AUTO;
    cfg->activation = mdl->activation;
    cfg->expert_bias = mdl->expert_bias;
    cfg->placement = mdl->router.placement;
    cfg->router = mdl->router;
    cfg->n_shared = mdl->n_shared;
    cfg->Is = mdl->shared_inter;
    cfg->gate = mdl->shared_gate;
    cfg->residual = PLENA_RESIDUAL_PRE_NORM;
    cfg->eps = mdl->rms_eps;
    cfg->zero_centred_norm = mdl->zero_centred_norm;
    cfg->chunk_tiles = 4;
    cfg->loop_policy = PLENA_LOOPS_AUTO;
    cfg->lowering = PLENA_LOWERING_PAIR_MAJOR;
}

/* The expert-major form of fixed routing: tables in HBM, T_blk from VRAM. */
static int em_fixed(const struct plena_moe_cfg *cfg)
{
    return cfg->routing == PLENA_ROUTING_FIXED && cfg->lowering == PLENA_LOWERING_EXPERT_MAJOR;
}

static int em_device(const struct plena_moe_cfg *cfg)
{
    return cfg->routing == PLENA_ROUTING_DEVICE && cfg->lowering == PLENA_LOWERING_EXPERT_MAJOR;
}

/* fp16 image value nearest to v, and its effective BF16 value (docs/lowering.md "Memory ABI") */
static void konst(float v, uint16_t *h, float *eff)
{
    *h = plena_num_fp16_from_f32(v);
    *eff = plena_num_round_bf16(plena_num_fp16_to_f32(*h));
}

/* The device router's constants (router.c): -1, -inf, routed scaling and
 * the normalisation epsilon, in the constants block after the seven the
 * layer always has. An epsilon below fp16's range is 0 in FP SRAM (1e-20
 * of DeepSeek: sum + 1e-20 is sum for any sum above 2^-24). */
static void router_consts(const struct plena_moe_cfg *cfg, struct plena_moe_map *mp)
{
    const uint32_t V = cfg->m.vlen;
    mp->dev_router = gen_router_custom(cfg);
    if (!mp->dev_router) return;
    mp->off_minus_one = V + 7;
    mp->off_neg_inf = V + 8;
    mp->off_rsf = V + 9;
    mp->off_reps = V + 10;
    konst(-1.0f, &mp->h_minus_one, &mp->c_minus_one);
    konst(-INFINITY, &mp->h_neg_inf, &mp->c_neg_inf);
    konst(cfg->router.scaling, &mp->h_rsf, &mp->c_rsf);
    konst(cfg->router.norm_eps, &mp->h_reps, &mp->c_reps);
}

/* FP entries of the device router's regions from off on (router_consts):
 * the group scores and the group V_TOPKs' weights (VLEN each, groups only)
 * and, expert-major, one token's weights (VLEN). Returns the entries. */
static uint32_t router_fp_regions(const struct plena_moe_cfg *cfg, struct plena_moe_map *mp,
                                  uint32_t off, int em)
{
    const uint32_t V = cfg->m.vlen;
    if (!mp->dev_router) return 0;
    const int groups = cfg->router.n_group > 1;
    mp->off_grow = off;
    mp->off_gw = off + (groups ? V : 0);
    mp->off_wreg = mp->off_gw + (groups ? V : 0);
    return (groups ? 2 * V : 0) + (em ? V : 0);
}

/* INT entries of the groups' V_TOPK ids (VLEN, groups only). */
static uint32_t router_int_entries(const struct plena_moe_cfg *cfg)
{
    return gen_router_custom(cfg) && cfg->router.n_group > 1 ? cfg->m.vlen : 0;
}

/* INT SRAM entries of the device expert-major sort of blocks of tb tokens
 * (moe.h em_* offsets): one token's V_TOPK ids, the per-expert counters,
 * the segment records (2 words each, one spare for the trailing dummy
 * write), the count-record buffer, two scalars, the window table and 16
 * spill slots. Only the records grow with tb, and only until every expert
 * can be active. */
static uint64_t em_dev_int(const struct plena_moe_cfg *cfg, const struct plena_moe_map *mp,
                           uint64_t tb)
{
    const uint64_t segs =
        plena_route_max_segments((uint32_t)tb, cfg->k, cfg->E, cfg->m.blen, mp->em_max_tiles);
    return cfg->k + cfg->E + PLENA_DEV_WORDS * (segs + 1) + PLENA_ROUTE_REC_INTS + 2 +
           (mp->windowed ? cfg->E : 0) + 16 + router_int_entries(cfg);
}

uint64_t plena_moe_expert_base(const struct plena_moe_map *mp, int q, uint32_t e)
{
    if (mp->windowed)
        return ((uint64_t)(mp->w0[q] + e / mp->epw) << 32) + (uint64_t)(e % mp->epw) * mp->stride;
    return mp->table[q] + (uint64_t)e * mp->stride;
}

/* SRAM maps of the expert-major fixed form: record buffers only (the
 * routing tables stream from HBM), so only the shared gate's values bound
 * T_blk here; VRAM bounds it further once the ABI tensors are placed. */
static int build_map_em(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                        struct plena_moe_map *mp, int gate)
{
    const struct plena_gen_machine *m = &cfg->m;
    const uint32_t V = m->vlen, k = cfg->k;
    const uint32_t cw = gen_cdiv(k, PLENA_ROUTE_REC_HALFS) * PLENA_ROUTE_REC_HALFS;
    const uint32_t iw = cfg->placement == PLENA_ROUTE_INPUT ? PLENA_ROUTE_REC_HALFS : 0;
    const uint64_t fp_fixed = (uint64_t)V + 16 + cw + iw;
    const uint64_t fp_avail = m->fp_depth > cfg->fp_base ? m->fp_depth - cfg->fp_base : 0;
    const uint64_t int_need = 2 * PLENA_ROUTE_REC_INTS +
                              (uint64_t)gen_cdiv(k, PLENA_ROUTE_REC_INTS) * PLENA_ROUTE_REC_INTS +
                              16;
    const uint64_t int_avail = m->int_depth > cfg->int_base ? m->int_depth - cfg->int_base : 0;
    if (fp_fixed + (gate ? 1 : 0) > fp_avail)
        return plena_prog_fail(c->p, PLENA_GEN_SRAM,
                               "FP SRAM: the expert-major record buffers need %llu entries (VLEN "
                               "%u zero row + 16 constants + route-weight records%s), limit %llu "
                               "(FP_SRAM_DEPTH %u - fp_base %u); driven by model.top_k",
                               (unsigned long long)fp_fixed + (gate ? 1 : 0), V,
                               gate ? " + 1 gate value" : "", (unsigned long long)fp_avail,
                               m->fp_depth, cfg->fp_base);
    if (int_need > int_avail)
        return plena_prog_fail(c->p, PLENA_GEN_SRAM,
                               "INT SRAM: the expert-major record buffers need %llu entries, "
                               "limit %llu (INT_SRAM_DEPTH %u - int_base %u); driven by "
                               "model.top_k",
                               (unsigned long long)int_need, (unsigned long long)int_avail,
                               m->int_depth, cfg->int_base);
    uint64_t tb = T;
    if (gate && fp_avail - fp_fixed < tb) tb = fp_avail - fp_fixed;
    if (cfg->force_tblk && cfg->force_tblk < tb) tb = cfg->force_tblk;
    mp->t_blk = (uint32_t)tb;
    mp->n_blocks = gen_cdiv(T, mp->t_blk);
    /* one physical row past T stays zero: the padding slots' source row */
    mp->phys_rows = gen_rup(T + 1, m->blen);
    mp->off_dot = V + 16;
    mp->em_cw_off = V + 16;
    mp->em_iw_off = mp->em_cw_off + cw;
    mp->w_off = mp->em_iw_off + iw;
    mp->gate_off = mp->w_off;
    mp->fp_used = mp->gate_off + (gate ? mp->t_blk : 0);
    mp->em_seg_off = 0;
    mp->em_gbuf_off = PLENA_ROUTE_REC_INTS;
    mp->em_cbuf_off = 2 * PLENA_ROUTE_REC_INTS;
    mp->ids_off = mp->wtab_off = mp->em_cbuf_off;
    mp->spill_off = (uint32_t)(int_need - 16);
    mp->int_used = (uint32_t)int_need;
    mp->em_max_tiles = plena_moe_em_max_tiles(cfg, mp);
    return 0;
}

/* SRAM maps of the expert-major device form (docs/lowering.md
 * "Expert-major"): V_TOPK runs one token at a time into a k-entry id buffer
 * (FP SRAM: k weights), so only the sort's per-expert state is resident and
 * T_blk is bounded by VRAM (em_setup), not by the SRAMs, once every expert's
 * records fit. */
static int build_map_em_dev(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                            struct plena_moe_map *mp, int gate, int dot)
{
    const struct plena_gen_machine *m = &cfg->m;
    const uint32_t V = m->vlen, k = cfg->k;
    const uint32_t r_fp = router_fp_regions(cfg, mp, V + 16 + (dot ? mp->eb * V : 0), 1);
    const uint64_t fp_fixed = (uint64_t)V + 16 + (dot ? (uint64_t)mp->eb * V : 0) + r_fp + k;
    const uint64_t fp_avail = m->fp_depth > cfg->fp_base ? m->fp_depth - cfg->fp_base : 0;
    const uint64_t int_avail = m->int_depth > cfg->int_base ? m->int_depth - cfg->int_base : 0;
    mp->em_max_tiles = plena_moe_em_max_tiles(cfg, mp);
    if (fp_fixed + (gate ? 1 : 0) > fp_avail)
        return plena_prog_fail(
            c->p, PLENA_GEN_SRAM,
            "FP SRAM: a token of the expert-major device form needs %llu "
            "entries (VLEN %u zero row + 16 constants%s + top_k %u route "
            "weights%s), limit %llu (FP_SRAM_DEPTH %u - fp_base %u); driven by "
            "model.top_k",
            (unsigned long long)fp_fixed + (gate ? 1 : 0), V,
            dot ? (r_fp ? " + router dot scratch + router rows" : " + router dot scratch")
                : (r_fp ? " + router rows" : ""),
            k, gate ? " + 1 gate value" : "", (unsigned long long)fp_avail, m->fp_depth,
            cfg->fp_base);
    if (em_dev_int(cfg, mp, 1) > int_avail)
        return plena_prog_fail(
            c->p, PLENA_GEN_SRAM,
            "INT SRAM: the on-device expert-major sort of one token needs %llu entries (top_k %u "
            "ids, num_experts %u counters, segment records, a count record, 2 scalars%s + 16 "
            "spill slots), limit %llu (INT_SRAM_DEPTH %u - int_base %u); driven by "
            "model.num_experts, model.top_k; use --lowering pair-major or fixed routing",
            (unsigned long long)em_dev_int(cfg, mp, 1), k, cfg->E,
            mp->windowed ? " + num_experts window table" : "", (unsigned long long)int_avail,
            m->int_depth, cfg->int_base);
    uint64_t tb = T;
    { /* a first VRAM bound, so the logits of a T_blk block fit beside the
       * token-indexed tensors of all T (em_setup refines it) */
        const uint64_t per_tok = (uint64_t)mp->eb * V +
                                 (uint64_t)k * (mp->H_p + 3ull * mp->I_p + V) +
                                 (cfg->Is ? 3ull * mp->Is_p + V : 0) + (uint64_t)mp->E_p;
        const uint64_t n_tok = 2 + (cfg->residual == PLENA_RESIDUAL_PRE_NORM) + (cfg->Is > 0);
        const uint64_t abi = n_tok * gen_rup(T + 1, m->blen) * mp->H_p; /* h, acc, residual, S */
        const uint64_t room = m->vram_elems > abi ? m->vram_elems - abi : 0;
        if (room / per_tok < tb) tb = room / per_tok > 0 ? room / per_tok : 1;
    }
    if (em_dev_int(cfg, mp, tb) > int_avail) { /* largest tb whose records fit */
        uint64_t lo = 1, hi = tb;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo + 1) / 2;
            if (em_dev_int(cfg, mp, mid) <= int_avail)
                lo = mid;
            else
                hi = mid - 1;
        }
        tb = lo;
    }
    if (gate && fp_avail - fp_fixed < tb) tb = fp_avail - fp_fixed;
    if (cfg->force_tblk && cfg->force_tblk < tb) tb = cfg->force_tblk;
    mp->em_dev = 1;
    mp->t_blk = (uint32_t)tb;
    mp->n_blocks = gen_cdiv(T, mp->t_blk);
    /* one physical row past T stays zero: the padding slots' source row */
    mp->phys_rows = gen_rup(T + 1, m->blen);
    mp->off_dot = V + 16;
    mp->w_off = (uint32_t)(fp_fixed - k);
    mp->gate_off = (uint32_t)fp_fixed;
    mp->fp_used = mp->gate_off + (gate ? mp->t_blk : 0);
    mp->ids_off = 0;
    mp->em_cnt_off = k;
    mp->em_rec_off = mp->em_cnt_off + cfg->E;
    mp->em_cbuf_off =
        (uint32_t)(mp->em_rec_off +
                   PLENA_DEV_WORDS *
                       (plena_route_max_segments(mp->t_blk, k, cfg->E, m->blen, mp->em_max_tiles) +
                        1));
    mp->em_scal_off = mp->em_cbuf_off + PLENA_ROUTE_REC_INTS;
    mp->wtab_off = mp->em_scal_off + 2;
    mp->spill_off = mp->wtab_off + (mp->windowed ? cfg->E : 0);
    mp->gsel_off = mp->spill_off + 16;
    mp->int_used = mp->gsel_off + router_int_entries(cfg);
    return 0;
}

static int build_map(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                     struct plena_moe_map *mp)
{
    const struct plena_gen_machine *m = &cfg->m;
    memset(mp, 0, sizeof *mp);
    const int routed = cfg->routing != PLENA_ROUTING_NONE;
    const int device = cfg->routing == PLENA_ROUTING_DEVICE;
    const int dot = device && cfg->router_form == PLENA_ROUTER_DOT;
    mp->H_p = cfg->H;
    mp->I_p = routed ? gen_rup(cfg->I, m->mlen) : 0;
    mp->Is_p = gen_rup(cfg->Is, m->mlen);
    mp->E_p = routed ? gen_rup(cfg->E, m->mlen) : 0;
    mp->eb = routed ? gen_cdiv(cfg->E, m->vlen) : 0;
    mp->fp_base = cfg->fp_base;
    mp->int_base = cfg->int_base;
    const uint32_t V = m->vlen;
    mp->off_one = V + 0;
    mp->off_na_routed = V + 1;
    mp->off_na_shared = V + 2;
    mp->off_lp = V + 3;
    mp->off_ln = V + 4;
    mp->off_eps = V + 5;
    mp->off_invh = V + 6;
    konst(1.0f, &mp->h_one, &mp->c_one);
    konst(cfg->activation == PLENA_ACT_GPT_OSS_CLAMP_GATED ? -1.702f : -1.0f, &mp->h_na_routed,
          &mp->c_na_routed);
    konst(-1.0f, &mp->h_na_shared, &mp->c_na_shared);
    konst(7.0f, &mp->h_lp, &mp->c_lp);
    konst(-7.0f, &mp->h_ln, &mp->c_ln);
    konst(cfg->eps, &mp->h_eps, &mp->c_eps);
    konst(1.0f / (float)cfg->H, &mp->h_invh, &mp->c_invh);
    router_consts(cfg, mp);

    /* HBM placement first: the windowed form changes the INT map */
    struct plena_hbm_alloc ha = {cfg->hbm_base, m->mlen > 64 ? m->mlen : 64};
    if (device && !dot && !cfg->router_logits_preloaded) {
        mp->has_router_hbm = 1;
        mp->router_hbm = plena_hbm_place(&ha, plena_moe_mx_bytes(mp->H_p, mp->E_p), 0);
    }
    if (routed) {
        uint64_t S = plena_moe_mx_bytes(mp->H_p, mp->I_p);
        S = (S + 63) / 64 * 64;
        mp->stride = S;
        const uint64_t win = 1ull << 32;
        /* an expert's projection is addressed inside one 4 GiB HBM window
         * (32-bit prefetch offsets): a larger one cannot be represented */
        if (S > win)
            return plena_prog_fail(
                c->p, PLENA_GEN_SHAPE,
                "one expert's projection (hidden %u x intermediate %u, MX) needs %llu bytes, more "
                "than the 4 GiB HBM window (%llu bytes) a prefetch can address; driven by "
                "model.hidden_size, model.moe_intermediate_size",
                mp->H_p, mp->I_p, (unsigned long long)S, (unsigned long long)win);
        if ((uint64_t)cfg->E * S > win) {
            mp->windowed = 1;
            mp->epw = (uint32_t)(win / S);
            uint64_t nwin = gen_cdiv(cfg->E, mp->epw);
            mp->table_bytes = nwin * win;
            for (int q = 0; q < 3; q++) {
                mp->table[q] = plena_hbm_place(&ha, mp->table_bytes, 1);
                mp->w0[q] = (uint32_t)(mp->table[q] >> 32);
            }
        } else {
            mp->table_bytes = (uint64_t)cfg->E * S;
            for (int q = 0; q < 3; q++)
                mp->table[q] = plena_hbm_place(&ha, mp->table_bytes, 1);
        }
    }
    if (cfg->Is) {
        uint64_t b = plena_moe_mx_bytes(mp->H_p, mp->Is_p);
        for (int q = 0; q < 3; q++)
            mp->shared[q] = plena_hbm_place(&ha, b, 0);
    }
    mp->hbm_end = ha.top;
    if (routed) /* expert 0's three projections; every expert's entry is laid out alike */
        for (int q = 0; q < 3; q++)
            mp->expert_weight_bytes +=
                plena_moe_prefetch_bytes(plena_moe_expert_base(mp, q, 0), q < 2 ? mp->H_p : mp->I_p,
                                         q < 2 ? mp->I_p : mp->H_p, m->mlen, PLENA_MOE_MX_BLOCK);

    /* token block size (docs/lowering.md "Token blocks") */
    const uint32_t k = routed ? cfg->k : 0;
    const int gate = cfg->Is && cfg->gate == PLENA_SHARED_GATE_SIGMOID;
    if (em_fixed(cfg)) return build_map_em(c, cfg, T, mp, gate);
    if (em_device(cfg)) return build_map_em_dev(c, cfg, T, mp, gate, dot);
    const uint32_t r_fp = router_fp_regions(cfg, mp, V + 16 + (dot ? mp->eb * V : 0), 0);
    uint64_t fp_fixed = (uint64_t)V + 16 + (dot ? (uint64_t)mp->eb * V : 0) + r_fp;
    uint64_t fp_avail = m->fp_depth > cfg->fp_base ? m->fp_depth - cfg->fp_base : 0;
    uint64_t int_fixed = (mp->windowed ? cfg->E : 0) + 16 + router_int_entries(cfg);
    uint64_t int_avail = m->int_depth > cfg->int_base ? m->int_depth - cfg->int_base : 0;
    /* Failures name the resource, the requirement, the limit and the model
     * fields behind it (docs/replay.md "Replay tier" R005 quotes these). */
    const uint32_t per_fp = k + (gate ? 1 : 0);
    uint32_t tok_need = cfg->routing == PLENA_ROUTING_FIXED ? T : 1;
    uint64_t fp_need = fp_fixed + (uint64_t)tok_need * per_fp;
    uint64_t int_need = int_fixed + (uint64_t)tok_need * k;
    /* fixed routing whose whole table does not fit streams each block's part
     * from HBM instead (H_PREFETCH_S records: 16 ids, 32 weights) */
    if (tok_need > 1 && (fp_need > fp_avail || int_need > int_avail)) {
        mp->pm_refill = 1;
        tok_need = 1;
        fp_need = fp_fixed + gen_rup(k, PLENA_ROUTE_REC_HALFS) + (gate ? 1 : 0);
        int_need = int_fixed + gen_rup(k, PLENA_ROUTE_REC_INTS);
    }
    if (fp_need > fp_avail)
        return plena_prog_fail(
            c->p, PLENA_GEN_SRAM,
            "FP SRAM: %s %u token(s) needs %llu entries (VLEN %u zero row + 16 constants%s + "
            "top_k %u route weights%s%s per token), limit %llu (FP_SRAM_DEPTH %u - fp_base %u); "
            "driven by model.top_k%s%s",
            tok_need > 1 ? "fixed routing of" : "a token block of", tok_need,
            (unsigned long long)fp_need, V,
            dot ? (r_fp ? " + router dot scratch + router rows" : " + router dot scratch")
                : (r_fp ? " + router rows" : ""),
            k, mp->pm_refill ? " in whole 32-entry records" : "", gate ? " + 1 gate value" : "",
            (unsigned long long)fp_avail, m->fp_depth, cfg->fp_base,
            dot ? ", model.num_experts" : "", gate ? ", model.shared_gate" : "");
    if (int_need > int_avail)
        return plena_prog_fail(
            c->p, PLENA_GEN_SRAM,
            "INT SRAM: %s %u token(s) needs %llu entries (top_k %u expert ids per token%s%s + 16 "
            "spill slots), limit %llu (INT_SRAM_DEPTH %u - int_base %u); driven by "
            "model.top_k%s",
            tok_need > 1 ? "fixed routing of" : "a token block of", tok_need,
            (unsigned long long)int_need, k, mp->pm_refill ? " in whole 16-entry records" : "",
            mp->windowed ? " + num_experts window table" : "", (unsigned long long)int_avail,
            m->int_depth, cfg->int_base,
            mp->windowed ? ", model.num_experts, model.intermediate_size" : "");
    uint64_t tb = T;
    if (per_fp && (fp_avail - fp_fixed) / per_fp < tb) tb = (fp_avail - fp_fixed) / per_fp;
    if (k && (int_avail - int_fixed) / k < tb) tb = (int_avail - int_fixed) / k;
    if (mp->pm_refill) /* the regions are whole records */
        while (tb > 1 &&
               (fp_fixed + gen_rup((uint32_t)tb * k, PLENA_ROUTE_REC_HALFS) + (gate ? tb : 0) >
                    fp_avail ||
                int_fixed + gen_rup((uint32_t)tb * k, PLENA_ROUTE_REC_INTS) > int_avail))
            tb--;
    if (cfg->force_tblk && cfg->force_tblk < tb) tb = cfg->force_tblk;
    if (tb < 1) /* impossible after the two checks above */
        return plena_prog_fail(c->p, PLENA_GEN_SRAM, "SRAM: T_blk < 1");
    mp->t_blk = (uint32_t)tb;
    mp->n_blocks = gen_cdiv(T, mp->t_blk);
    uint32_t pr = 0;
    for (uint32_t b = 0; b < mp->n_blocks; b++) {
        uint32_t r0 = b * mp->t_blk, n = T - r0 < mp->t_blk ? T - r0 : mp->t_blk;
        uint32_t end = r0 + gen_rup(n, m->blen);
        if (end > pr) pr = end;
    }
    mp->phys_rows = gen_rup(pr, m->blen);
    mp->off_dot = V + 16;
    mp->w_off = (uint32_t)fp_fixed;
    const uint32_t w_region =
        mp->pm_refill ? gen_rup(mp->t_blk * k, PLENA_ROUTE_REC_HALFS) : mp->t_blk * k;
    const uint32_t id_region =
        mp->pm_refill ? gen_rup(mp->t_blk * k, PLENA_ROUTE_REC_INTS) : mp->t_blk * k;
    mp->gate_off = mp->w_off + w_region;
    mp->fp_used = mp->gate_off + (gate ? mp->t_blk : 0);
    mp->ids_off = 0;
    mp->wtab_off = id_region;
    if (mp->pm_refill) { /* the routing region: every block's ids, then every block's weights */
        mp->pm_ids_stride = (uint64_t)id_region * 4;
        mp->pm_w_stride = (uint64_t)w_region * 2;
        mp->pm_w_base = mp->n_blocks * mp->pm_ids_stride;
        mp->route_hbm = (mp->hbm_end + 63) / 64 * 64;
        mp->route_bytes = mp->pm_w_base + mp->n_blocks * mp->pm_w_stride;
        mp->hbm_end = mp->route_hbm + mp->route_bytes;
    }
    mp->spill_off = mp->wtab_off + (mp->windowed ? cfg->E : 0);
    mp->gsel_off = mp->spill_off + 16;
    mp->int_used = mp->gsel_off + router_int_entries(cfg);
    return 0;
}

struct pair_tensors {
    struct plena_tensor slot, yg, yu, ys, yd, x, acc;
    const struct plena_tensor *b_gate, *b_up, *b_down;
};

static int pair_body(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                     const struct pair_tensors *pt, unsigned gpP, unsigned gpT, const uint8_t a[3])
{
    const uint32_t w = c->map->fp_base + c->map->w_off;
    plena_moe_gather_pair_row(c, &pt->slot, &pt->x, gpT);
    plena_moe_expert_weight_address(c, cfg, gpP, a);
    if (cfg->placement == PLENA_ROUTE_INPUT)
        plena_moe_broadcast_row_weights(c, PLENA_STAGE_EXPERT_ROUTE_WEIGHT, &pt->slot, 0, 1, gpP, w,
                                        1);
    plena_moe_expert_projection(c, cfg, PLENA_PROJ_GATE, &pt->slot, &pt->yg, a[0]);
    plena_moe_expert_projection(c, cfg, PLENA_PROJ_UP, &pt->slot, &pt->yu, a[1]);
    if (cfg->expert_bias) {
        plena_moe_expert_bias_add(c, &pt->yg, pt->b_gate, gpP);
        plena_moe_expert_bias_add(c, &pt->yu, pt->b_up, gpP);
    }
    plena_moe_expert_activation(c, PLENA_STAGE_EXPERT_ACTIVATION, cfg->activation, &pt->yg, &pt->yu,
                                &pt->ys, 1, c->map->I_p);
    plena_moe_expert_projection(c, cfg, PLENA_PROJ_DOWN, &pt->yu, &pt->yd, a[2]);
    if (cfg->expert_bias) plena_moe_expert_bias_add(c, &pt->yd, pt->b_down, gpP);
    if (cfg->placement == PLENA_ROUTE_OUTPUT)
        plena_moe_broadcast_row_weights(c, PLENA_STAGE_EXPERT_ROUTE_WEIGHT, &pt->yd, 0, 1, gpP, w,
                                        1);
    plena_moe_scatter_add(c, &pt->acc, gpT, &pt->yd);
    return c->p->status;
}

static int pair_section(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                        struct pair_tensors *pt, uint32_t n, uint32_t r0,
                        struct plena_moe_emit_info *info)
{
    const enum plena_stage sg = PLENA_STAGE_GATHER, ss = PLENA_STAGE_SCATTER_COMBINE;
    const uint32_t k = cfg->k, V = c->m->vlen;
    uint32_t mark = plena_vram_mark(c->va);
    if (gen_valloc(c, 1, c->map->H_p, "pair_slot", &pt->slot) ||
        gen_valloc(c, 1, c->map->I_p, "pair_gate", &pt->yg) ||
        gen_valloc(c, 1, c->map->I_p, "pair_up", &pt->yu) ||
        gen_valloc(c, 1, c->map->I_p, "pair_act_scratch", &pt->ys) ||
        gen_valloc(c, 1, c->map->H_p, "pair_down", &pt->yd))
        return c->p->status;
    plena_prog_comment(c->p, "routed pairs: %u tokens x top-%u", n, k);
    if (c->m->blen > 1)
        plena_moe_true_zero_rows(c, PLENA_STAGE_GATHER, &pt->slot, 1, c->m->blen - 1);
    struct plena_regset saved = c->live;
    uint8_t g[4], a[3];
    if (plena_regs_take(c, 4, 0, 0, g) || plena_regs_take(c, 0, 0, 3, a)) return c->p->status;
    unsigned ct = g[0], cj = g[1], gP = g[2], gT = g[3];
    /* executed instructions of one pair: dry run into a scratch program */
    struct plena_prog tmp;
    plena_prog_init(&tmp, 0, NULL);
    struct plena_ctx dc = *c;
    dc.p = &tmp;
    uint64_t peak = c->va->peak;
    pair_body(&dc, cfg, pt, gP, gT, a);
    uint64_t n_pair = tmp.dyn_total + 2; /* + pointer increment + C_LOOP_END */
    plena_prog_free(&tmp);
    c->va->peak = peak;
    info->n_pair_insns = (uint32_t)n_pair;
    const uint64_t budget = c->m->max_loop ? c->m->max_loop : UINT64_MAX;
    enum plena_pair_form form;
    if (cfg->loop_policy == PLENA_LOOPS_UNROLL_PAIRS)
        form = PLENA_PAIRS_UNROLLED;
    else if ((uint64_t)k * n_pair + 2 <= budget)
        form = PLENA_PAIRS_LOOPED;
    else if (n_pair <= budget)
        form = PLENA_PAIRS_TOKENS_UNROLLED;
    else
        form = PLENA_PAIRS_UNROLLED;
    info->pair_form = form;
    if (form == PLENA_PAIRS_LOOPED) {
        plena_emit(c, sg, PLENA_OP_S_ADDI_INT, gP, 0, 0, 0, 0, 0);
        plena_emit(c, sg, PLENA_OP_S_ADDI_INT, gT, 0, 0, 0, 0, 0);
        int lt = plena_loop_begin_t(c, sg, ct, n);
        int lj = plena_loop_begin(c, sg, cj, k);
        pair_body(c, cfg, pt, gP, gT, a);
        if (lj || lt) plena_emit(c, ss, PLENA_OP_S_ADDI_INT, gP, gP, 0, 0, 0, 1);
        plena_loop_end(c, ss);
        if (lt) plena_emit(c, ss, PLENA_OP_S_ADDI_INT, gT, gT, 0, 0, 0, V);
        plena_loop_end(c, ss);
    } else if (form == PLENA_PAIRS_TOKENS_UNROLLED) {
        for (uint32_t t = 0; t < n && !c->p->status; t++) {
            plena_emit_li(c, sg, gP, (uint64_t)t * k);
            plena_emit_li(c, sg, gT, (uint64_t)t * V);
            int lj = plena_loop_begin(c, sg, cj, k);
            pair_body(c, cfg, pt, gP, gT, a);
            if (lj) plena_emit(c, ss, PLENA_OP_S_ADDI_INT, gP, gP, 0, 0, 0, 1);
            plena_loop_end(c, ss);
        }
    } else {
        for (uint32_t t = 0; t < n && !c->p->status; t++)
            for (uint32_t j = 0; j < k && !c->p->status; j++) {
                c->pair = (r0 + t) * k + j;
                plena_emit_li(c, sg, gP, (uint64_t)t * k + j);
                plena_emit_li(c, sg, gT, (uint64_t)t * V);
                pair_body(c, cfg, pt, gP, gT, a);
                c->pair = PLENA_GEN_PAIR_NONE;
            }
    }
    c->live = saved;
    plena_vram_release(c->va, mark);
    return c->p->status;
}

/* Pair-major fixed routing beyond the SRAMs: block b's n*k ids and weights
 * from the routing region into the INT/FP SRAM regions the pair loop reads
 * (stage router_topk: it is the fixed-routing load). */
static int pm_refill_block(struct plena_ctx *c, uint32_t b, uint32_t n, uint32_t k)
{
    const enum plena_stage s = PLENA_STAGE_ROUTER_TOPK;
    const struct plena_moe_map *mp = c->map;
    struct plena_regset saved = c->live;
    uint8_t a[1], g[4];
    if (plena_regs_take(c, 0, 0, 1, a) || plena_regs_take(c, 4, 0, 0, g)) return c->p->status;
    const unsigned aT = a[0], cr = g[0], gOff = g[1], gS = g[2], gH = g[3];
    plena_prog_comment(c->p, "fixed routing of block %u: %u ids and weights from HBM", b, n * k);
    plena_emit_li(c, s, gS, mp->route_hbm & 0xFFFFFFFFu);
    if (mp->route_hbm >> 32) plena_emit_li(c, s, gH, mp->route_hbm >> 32);
    plena_emit(c, s, PLENA_OP_C_SET_ADDR_REG, aT, mp->route_hbm >> 32 ? gH : 0, gS, 0, 0, 0);
    for (int fp = 0; fp < 2; fp++) {
        const uint32_t per = fp ? PLENA_ROUTE_REC_HALFS : PLENA_ROUTE_REC_INTS;
        plena_emit_li(c, s, gOff, fp ? mp->pm_w_base + b * mp->pm_w_stride : b * mp->pm_ids_stride);
        plena_emit_li(c, s, gS,
                      fp ? (uint64_t)mp->fp_base + mp->w_off
                         : (uint64_t)mp->int_base + mp->ids_off);
        int l = plena_loop_begin(c, s, cr, gen_cdiv(n * k, per));
        plena_emit(c, s, PLENA_OP_H_PREFETCH_S, gS, gOff, aT, 0, (unsigned)fp, 0);
        if (l) {
            plena_emit(c, s, PLENA_OP_S_ADDI_INT, gS, gS, 0, 0, 0, per);
            plena_emit(c, s, PLENA_OP_S_ADDI_INT, gOff, gOff, 0, 0, 0, PLENA_ROUTE_REC_BYTES);
        }
        plena_loop_end(c, s);
    }
    c->live = saved;
    return c->p->status;
}

static void add_abi(struct plena_moe_emit_info *info, const struct plena_tensor *t)
{
    if (info->n_abi < PLENA_MOE_MAX_ABI) info->abi[info->n_abi++] = *t;
}

static void add_hbm(struct plena_moe_emit_info *info, const char *name, uint64_t base,
                    uint32_t rows, uint32_t cols)
{
    struct plena_tensor t;
    memset(&t, 0, sizeof t);
    t.base = base;
    t.rows = t.prow = rows;
    t.cols = t.pcol = cols;
    t.space = PLENA_SPACE_HBM;
    snprintf(t.name, sizeof t.name, "%s", name);
    add_abi(info, &t);
}

/* The expert-major fixed form, once the ABI tensors are placed: T_blk from
 * the VRAM left (the section's scratch and the shared branch's temporaries of
 * one block), the routing plan, the routing region at the end of the HBM
 * image, and the scratch itself (above `mark`). */
static int em_setup(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                    struct plena_moe_emit_info *info, struct plena_route_plan *plan,
                    struct plena_moe_em_scratch *sc)
{
    struct plena_moe_map *mp = &info->map;
    const struct plena_gen_machine *m = &cfg->m;
    const uint64_t g = (uint64_t)m->mlen * m->vlen;
    const uint64_t avail = c->va->capacity > c->va->top ? c->va->capacity - c->va->top : 0;
    uint32_t hi = mp->t_blk, best = 0;
    /* the shared activation's row loop runs T_blk rows of ~10 instructions */
    if (m->max_loop && hi > (m->max_loop - 100) / 10) hi = (m->max_loop - 100) / 10;
    for (uint32_t lo = 1; lo <= hi;) {
        uint32_t tb = lo + (hi - lo) / 2;
        uint64_t prow = gen_rup(tb, m->blen);
        uint64_t need =
            plena_moe_em_scratch_elems(
                m, mp,
                (uint32_t)plena_route_max_slots(tb, cfg->k, cfg->E, m->blen, mp->em_max_tiles)) +
            (cfg->Is ? 3 * prow * mp->Is_p + prow * m->vlen : 0) +
            (mp->em_dev && mp->eb > 1 ? prow * mp->E_p : 0) /* the router's product */ + 8 * g;
        if (need <= avail) {
            best = tb;
            lo = tb + 1;
        } else {
            hi = tb - 1;
        }
    }
    if (best == 0)
        return plena_prog_fail(c->p, PLENA_GEN_VRAM,
                               "VRAM: the expert-major section of one token needs more than the "
                               "%llu elements left after the layer's tensors (VECTOR_SRAM_SIZE x "
                               "VLEN %llu); driven by model.hidden_size %u, "
                               "model.intermediate_size %u and the token count",
                               (unsigned long long)avail, (unsigned long long)c->va->capacity,
                               cfg->H, cfg->I);
    /* blocks of a handful of tokens would unroll the layer T/T_blk times:
     * refuse, saying how many tokens leave room for a useful block */
    const uint32_t min_blk = 16;
    if (best < T && best < min_blk) {
        uint64_t tok = 0; /* token-indexed ABI elements per token */
        for (unsigned i = 0; i < info->n_abi; i++)
            if (info->abi[i].rows == T && info->abi[i].prow) tok += info->abi[i].pcol;
        const uint64_t blk_need =
            plena_moe_em_scratch_elems(m, mp,
                                       (uint32_t)plena_route_max_slots(min_blk, cfg->k, cfg->E,
                                                                       m->blen, mp->em_max_tiles)) +
            (cfg->Is ? 3ull * min_blk * mp->Is_p : 0) +
            (mp->em_dev ? (uint64_t)min_blk * (mp->eb * m->vlen + mp->E_p) : 0) + 8 * g;
        const uint64_t cap = c->va->capacity;
        const uint64_t tmax = tok && cap > blk_need ? (cap - blk_need) / tok : 0;
        return plena_prog_fail(c->p, PLENA_GEN_VRAM,
                               "VRAM: the token-indexed tensors of %u tokens leave room for "
                               "expert-major token blocks of %u token(s) only (VECTOR_SRAM_SIZE x "
                               "VLEN %llu elements); at most about %llu tokens for %s on these "
                               "settings (blocks of %u)",
                               T, best, (unsigned long long)cap, (unsigned long long)tmax,
                               cfg->name, min_blk);
    }
    if (best < T && best > m->blen) best -= best % m->blen; /* blocks keep BLEN-row tiles */
    mp->t_blk = best;
    mp->n_blocks = gen_cdiv(T, best);
    if (mp->em_dev) { /* the count table of n = 0..T_blk pairs per expert */
        mp->em_max_slots =
            (uint32_t)plena_route_max_slots(best, cfg->k, cfg->E, m->blen, mp->em_max_tiles);
        mp->route_hbm = (mp->hbm_end + 63) / 64 * 64;
        mp->route_bytes = plena_route_count_table_bytes(best);
        mp->hbm_end = mp->route_hbm + mp->route_bytes;
        return plena_moe_em_alloc(c, mp->em_max_slots, sc);
    }
    const size_t np = (size_t)T * cfg->k;
    uint32_t *dummy = NULL;
    const uint32_t *ids = cfg->route_ids;
    if (!ids) { /* sizing only: a balanced routing */
        dummy = plena_malloc((np ? np : 1) * sizeof *dummy);
        if (!dummy) return plena_prog_fail(c->p, PLENA_GEN_NOMEM, "out of memory");
        for (size_t i = 0; i < np; i++)
            dummy[i] = (uint32_t)(i % cfg->E);
        ids = dummy;
    }
    int rc = plena_route_plan_build(plan, T, cfg->k, cfg->E, best, m->blen, m->vlen,
                                    mp->em_max_tiles, ids, c->p->err);
    plena_free(dummy);
    if (rc) {
        c->p->status = rc;
        c->p->reason = rc == PLENA_E_NOMEM ? PLENA_GEN_NOMEM : PLENA_GEN_SHAPE;
        return rc;
    }
    mp->route_hbm = (mp->hbm_end + 63) / 64 * 64;
    mp->route_bytes = plan->region_bytes;
    mp->hbm_end = mp->route_hbm + mp->route_bytes;
    return plena_moe_em_alloc(c, plan->max_slots, sc);
}

/* The shapes router.c lowers (docs/lowering.md "Routers"). */
static int router_check(struct plena_ctx *c, const struct plena_moe_cfg *cfg,
                        const struct plena_router_plan *pl)
{
    const struct plena_router *r = &cfg->router;
    if (pl->lowering == PLENA_RLOWER_NONE)
        return plena_prog_fail(c->p, PLENA_GEN_SHAPE,
                               "device routing: the %s router%s has no device form "
                               "(docs/lowering.md \"Routers\"); use fixed routing",
                               plena_router_score_name(r->score),
                               r->capacity != PLENA_CAPACITY_NONE ? " with a capacity" : "");
    if (pl->groups && (r->n_group > c->m->vlen || cfg->E % r->n_group ||
                       r->topk_group > r->n_group || r->topk_group > PLENA_TOPK_MAX_K))
        return plena_prog_fail(c->p, PLENA_GEN_SHAPE,
                               "device routing: %u groups (top %u) of %u experts: expected "
                               "n_group dividing num_experts, at most VLEN %u groups and "
                               "topk_group <= min(n_group, %d)",
                               r->n_group, r->topk_group, cfg->E, c->m->vlen, PLENA_TOPK_MAX_K);
    return 0;
}

int plena_moe_emit_layer(struct plena_ctx *c, const struct plena_moe_cfg *cfg, uint32_t T,
                         struct plena_moe_emit_info *info)
{
    memset(info, 0, sizeof *info);
    info->topk_rmask = -1;
    c->map = &info->map;
    struct plena_prog *p = c->p;
    if (p->status) return p->status;
    if (T == 0) return plena_prog_fail(p, PLENA_GEN_SHAPE, "token count must be > 0");
    /* token loops are hardware loops: their count is C_LOOP_START's imm22 */
    if (T > PLENA_MOE_MAX_TOKENS)
        return plena_prog_fail(p, PLENA_GEN_SHAPE,
                               "token count %u exceeds %u, the largest hardware loop count "
                               "(C_LOOP_START imm22)",
                               T, PLENA_MOE_MAX_TOKENS);
    if (cfg->m.vlen != cfg->m.mlen || cfg->m.blen == 0 || cfg->m.mlen % cfg->m.blen)
        return plena_prog_fail(p, PLENA_GEN_SHAPE, "geometry: VLEN must equal MLEN, BLEN | MLEN");
    if (cfg->H == 0 || cfg->H % cfg->m.mlen)
        return plena_prog_fail(p, PLENA_GEN_SHAPE, "hidden %u is not a multiple of MLEN %u", cfg->H,
                               cfg->m.mlen);
    const int routed = cfg->routing != PLENA_ROUTING_NONE;
    const int device = cfg->routing == PLENA_ROUTING_DEVICE;
    const int pre = device && cfg->router_logits_preloaded;
    const int shared = cfg->Is > 0;
    const int gate = shared && cfg->gate == PLENA_SHARED_GATE_SIGMOID;
    const int prenorm = cfg->residual == PLENA_RESIDUAL_PRE_NORM;
    if (!routed && !shared)
        return plena_prog_fail(p, PLENA_GEN_SHAPE, "layer has neither routed nor shared experts");
    if (routed && (cfg->E < 1 || cfg->E > PLENA_TOPK_MAX_EXPERTS || cfg->k < 1 || cfg->k > cfg->E ||
                   cfg->k > PLENA_TOPK_MAX_K))
        return plena_prog_fail(p, PLENA_GEN_TOPK, "top-k shape (E=%u, k=%u) invalid", cfg->E,
                               cfg->k);
#ifdef PLENA_TESTING
    if (cfg->fault == PLENA_FAULT_NO_MARKERS) p->no_markers = 1;
#endif
    if (build_map(c, cfg, T, &info->map)) return p->status;
    const struct plena_moe_map *mp = &info->map;
    struct gen_router R;
    memset(&R, 0, sizeof R);
    plena_router_plan(&cfg->router, &R.plan);
    if (device && router_check(c, cfg, &R.plan)) return p->status;
    const int rcustom = mp->dev_router;
    const int em = routed && (em_fixed(cfg) || mp->em_dev);
    p->stable_form = em; /* the static size of expert-major does not depend on T */
    const uint32_t V = cfg->m.vlen, PR = mp->phys_rows;

    /* ABI tensors (docs/lowering.md "Memory ABI"), allocated first so they
     * sit at the bottom of VRAM */
    struct plena_tensor h, res, gam, wr, rb, bg, bu, bd, wg, acc, S, lg;
    memset(&res, 0, sizeof res);
    memset(&acc, 0, sizeof acc);
    memset(&S, 0, sizeof S);
    memset(&lg, 0, sizeof lg);
    memset(&wr, 0, sizeof wr);
    memset(&rb, 0, sizeof rb);
    memset(&wg, 0, sizeof wg);
    memset(&bg, 0, sizeof bg);
    memset(&bu, 0, sizeof bu);
    memset(&bd, 0, sizeof bd);
    memset(&gam, 0, sizeof gam);
    /* the ABI tensors of layout.json, in this order; PR rows for the
     * token-indexed ones (a block's last M_MM_WO cannot spill) */
    const struct {
        int want;
        struct plena_tensor *t;
        uint32_t rows, prow, cols;
        const char *name;
    } abi[] = {
        {1, &h, T, PR, mp->H_p, "h"},
        {prenorm, &res, T, PR, mp->H_p, "residual"},
        {prenorm, &gam, 1, 0, mp->H_p, "gamma"},
        {device && !pre && cfg->router_form == PLENA_ROUTER_DOT, &wr, cfg->E, 0, mp->H_p,
         "router_w"},
        {device && !pre && cfg->router_bias, &rb, mp->eb, 0, V, "router_b"},
        {rcustom && R.plan.lowering == PLENA_RLOWER_SOFTMAX && cfg->E % V, &R.pad, mp->eb, 0, V,
         "router_pad"},
        {rcustom && cfg->router.select_bias != PLENA_SELECT_BIAS_NONE, &R.bias, mp->eb, 0, V,
         "router_sel_bias"},
        {rcustom, &R.eye, cfg->E * mp->eb, 0, V, "router_eye"},
        {rcustom && R.plan.groups, &R.gin, cfg->router.n_group * mp->eb, 0, V, "router_group_mask"},
        {rcustom && R.plan.groups, &R.gind, cfg->router.n_group * mp->eb, 0, V, "router_group_ind"},
        {routed && cfg->expert_bias, &bg, cfg->E, 0, mp->I_p, "b_gate"},
        {routed && cfg->expert_bias, &bu, cfg->E, 0, mp->I_p, "b_up"},
        {routed && cfg->expert_bias, &bd, cfg->E, 0, mp->H_p, "b_down"},
        {gate, &wg, 1, 0, mp->H_p, "w_g"},
        {routed, &acc, T, PR, mp->H_p, "acc"},
        {shared, &S, T, PR, mp->H_p, "S"},
        {device, &lg, (pre ? T : mp->t_blk) * mp->eb, 0, V, "logits"},
    };
    for (size_t i = 0; i < sizeof abi / sizeof abi[0]; i++) {
        if (!abi[i].want) continue;
        int rc = abi[i].prow ? plena_vram_alloc_prow(c->va, abi[i].rows, abi[i].prow, abi[i].cols,
                                                     abi[i].name, abi[i].t, p->err)
                             : gen_valloc(c, abi[i].rows, abi[i].cols, abi[i].name, abi[i].t);
        if (rc && rc != PLENA_E_NOMEM && abi[i].prow) { /* a token-indexed tensor: T is too big */
            unsigned n_tok = 0;
            for (size_t j = 0; j < sizeof abi / sizeof abi[0]; j++)
                n_tok += abi[j].want && abi[j].prow;
            const uint64_t per = (uint64_t)n_tok * mp->H_p;
            const uint64_t tmax =
                c->va->capacity / per > cfg->m.blen ? c->va->capacity / per - cfg->m.blen : 0;
            plena_err_clear(p->err); /* this message replaces the allocator's */
            return plena_prog_fail(p, PLENA_GEN_VRAM,
                                   "token count %u: the layer's %u token-indexed tensors (h, "
                                   "residual, acc, S: %u rows x hidden %u each) need more than "
                                   "the %llu VRAM elements (VECTOR_SRAM_SIZE x VLEN); at most "
                                   "about %llu tokens for %s on these settings",
                                   T, n_tok, PR, mp->H_p, (unsigned long long)c->va->capacity,
                                   (unsigned long long)tmax, cfg->name);
        }
        if (rc) {
            gen_vram_failed(p, rc);
            return p->status;
        }
        add_abi(info, abi[i].t);
    }
    info->abi_elems = plena_vram_live_elems(c->va);
    /* the router's scratch rows, and expert-major its weights rows (the logits' shape) */
    struct plena_tensor wrow;
    memset(&wrow, 0, sizeof wrow);
    if (rcustom && (gen_router_scratch(c, &R) ||
                    (mp->em_dev && gen_valloc(c, mp->t_blk * mp->eb, V, "router_wrows", &wrow))))
        return p->status;
    if (mp->has_router_hbm) add_hbm(info, "router_w_hbm", mp->router_hbm, mp->H_p, mp->E_p);
    if (routed) {
        add_hbm(info, "w_gate_table", mp->table[0], mp->H_p, mp->I_p);
        add_hbm(info, "w_up_table", mp->table[1], mp->H_p, mp->I_p);
        add_hbm(info, "w_down_table", mp->table[2], mp->I_p, mp->H_p);
    }
    if (shared) {
        add_hbm(info, "ws_gate", mp->shared[0], mp->H_p, mp->Is_p);
        add_hbm(info, "ws_up", mp->shared[1], mp->H_p, mp->Is_p);
        add_hbm(info, "ws_down", mp->shared[2], mp->Is_p, mp->H_p);
    }

    struct plena_route_plan plan;
    struct plena_moe_em_scratch ems;
    memset(&plan, 0, sizeof plan);
    memset(&ems, 0, sizeof ems);
    const uint32_t em_mark = plena_vram_mark(c->va);
    if (em && em_setup(c, cfg, T, info, &plan, &ems)) {
        plena_route_plan_free(&plan);
        return p->status;
    }
    if (em || mp->pm_refill)
        add_hbm(info, mp->em_dev ? "count_table" : "routing_tables", mp->route_hbm,
                (uint32_t)(mp->route_bytes / PLENA_ROUTE_REC_BYTES), PLENA_ROUTE_REC_BYTES);

    plena_prog_header(p, "plena moe preset=%s T=%u E=%u k=%u", cfg->name, T, cfg->E, cfg->k);
    if (routed) {
        info->routed_lowering = em ? PLENA_LOWERING_EXPERT_MAJOR : PLENA_LOWERING_PAIR_MAJOR;
        plena_prog_header(p, "@routed_lowering=%s", plena_lowering_marker(info->routed_lowering));
    }

    /* step 0: zero row, billed to the first true-zero that follows */
    if (prenorm)
        plena_moe_fp_zero_row_init(c, PLENA_STAGE_RESIDUAL_SETUP);
    else if (routed)
        plena_moe_fp_zero_row_init(c, PLENA_STAGE_ACCUMULATOR_INIT);
    /* steps 1-4 over all rows */
    if (prenorm) plena_moe_residual_setup(c, cfg, &h, &res, &gam, T);
    /* expert-major padding slots read h row T: residual_setup zeroes it with
     * the other padding rows; without it, the section does */
    if (em && !prenorm) plena_moe_true_zero_rows(c, PLENA_STAGE_GATHER, &h, T, 1);

    for (uint32_t b = 0; b < mp->n_blocks && !p->status; b++) {
        const uint32_t r0 = b * mp->t_blk;
        const uint32_t n = T - r0 < mp->t_blk ? T - r0 : mp->t_blk;
        const int last = b + 1 == mp->n_blocks;
        struct plena_tensor x = gen_view(&h, r0, V);
        if (mp->n_blocks > 1)
            plena_prog_comment(p, "token block %u: rows %u..%u", b, r0, r0 + n - 1);
        /* preloaded logits: the block's rows of all T tokens' logits */
        struct plena_tensor lgb = pre ? gen_view(&lg, r0 * mp->eb, V) : lg;
        if (device && !pre) {
            if (cfg->router_form == PLENA_ROUTER_DOT)
                plena_moe_router_logits_dot(c, cfg, &x, &wr, &lg, n);
            else
                plena_moe_router_logits_gemm(c, cfg, &x, mp->router_hbm, &lg, n);
            if (cfg->router_bias) plena_moe_router_bias_add(c, cfg, &lg, &rb, n);
        }
        if (device) {
            /* the device expert-major form runs V_TOPK itself, token by token */
            if (!mp->em_dev) {
                enum plena_topk_encoding enc = PLENA_TOPK_ENC_NONE;
                plena_moe_router_select(c, cfg, &R, &lgb, n, mp->w_off, mp->ids_off, &enc);
                info->topk_encoding = enc;
            }
        }
        if (routed) {
            if (mp->pm_refill) pm_refill_block(c, b, n, cfg->k);
            plena_moe_accumulator_init(c, &acc, r0, last ? PR - r0 : n);
            struct pair_tensors pt;
            memset(&pt, 0, sizeof pt);
            pt.x = x;
            pt.acc = gen_view(&acc, r0, V);
            pt.b_gate = &bg;
            pt.b_up = &bu;
            pt.b_down = &bd;
            size_t before = p->n_insns;
            if (em) {
                const struct plena_tensor *bias[3] = {&bg, &bu, &bd};
                if (mp->em_dev)
                    plena_moe_em_dev_block(c, cfg, T, r0, n, &pt.x, &pt.acc, &lgb, bias, &ems, &R,
                                           &wrow, &info->topk_encoding);
                else
                    plena_moe_em_block(c, cfg, &plan, b, &pt.x, &pt.acc, bias, &ems);
                info->pair_form = PLENA_PAIRS_SORTED;
            } else {
                pair_section(c, cfg, &pt, n, r0, info);
            }
            info->routed_static += p->n_insns - before;
        }
        if (shared) {
            struct plena_tensor sv = gen_view(&S, r0, V);
            plena_moe_shared_expert(c, cfg, &x, n, &sv);
            if (gate) {
                size_t before = p->n_insns;
                plena_moe_shared_gate(c, cfg, &x, n, &wg, mp->gate_off, &sv);
                info->gate_static += p->n_insns - before;
            }
            if (routed) {
                struct plena_tensor av = gen_view(&acc, r0, V);
                plena_moe_combine_shared_and_routed(c, &av, &sv, n);
            }
        }
    }
    if (prenorm) plena_moe_residual_add_back(c, routed ? &acc : &S, &res, T);
    if (em) {
        plena_vram_release(c->va, em_mark);
        plena_route_plan_free(&plan);
    }

    if (info->topk_encoding == PLENA_TOPK_ENC_REGISTER) {
        info->topk_packed = (cfg->E << 8) | cfg->k;
        info->topk_rmask = 15;
    } else if (info->topk_encoding == PLENA_TOPK_ENC_RMASK0) {
        info->topk_rmask = 0;
    } else if (info->topk_encoding == PLENA_TOPK_ENC_RMASK1) {
        info->topk_rmask = 1;
    }
    info->vram_peak = c->va->peak;
    memcpy(info->static_count, p->static_count, sizeof info->static_count);
    memcpy(info->dyn_count, p->dyn_count, sizeof info->dyn_count);
    memcpy(info->dyn_op, p->dyn_op, sizeof info->dyn_op);
    return p->status;
}

static int generate_once(const struct plena_moe_cfg *cfg, uint32_t T, struct plena_prog *prog,
                         struct plena_moe_emit_info *info, struct plena_err *err)
{
    plena_prog_init(prog, cfg->m.max_loop, err);
    struct plena_vram va;
    plena_vram_init(&va, &cfg->m);
    struct plena_ctx c;
    memset(&c, 0, sizeof c);
    c.p = prog;
    c.m = &cfg->m;
    c.va = &va;
    c.pair = PLENA_GEN_PAIR_NONE;
    int rc = plena_moe_emit_layer(&c, cfg, T, info);
    info->vram_peak = va.peak;
    plena_vram_fini(&va);
    return rc;
}

/* The expert-major token block is the largest that fits VRAM (em_setup) and
 * whose every static loop stays within MAX_LOOP_INSTRUCTIONS: a T_blk-row
 * loop (the router's rows, RMSNorm, the shared branch) grows with T_blk, so
 * when emission refuses a loop the block is bisected, each try being the
 * generator itself (its static size does not depend on T, so a try is
 * cheap). Pair-major keeps its SRAM-bound blocks, whose loops fit. */
int plena_moe_generate(const struct plena_moe_cfg *cfg, uint32_t T, struct plena_prog *prog,
                       struct plena_moe_emit_info *info, struct plena_err *err)
{
    int rc = generate_once(cfg, T, prog, info, err);
    if (!rc || prog->reason != PLENA_GEN_LOOP || !prog->stable_form || info->map.t_blk < 2)
        return rc;
    struct plena_moe_cfg try = *cfg;
    uint32_t lo = 0, hi = info->map.t_blk; /* hi refused, lo fits (0: none yet) */
    while (hi - lo > 1) {
        try.force_tblk = lo + (hi - lo) / 2;
        plena_prog_free(prog);
        rc = generate_once(&try, T, prog, info, err);
        if (!rc)
            lo = try.force_tblk;
        else if (prog->reason == PLENA_GEN_LOOP)
            hi = try.force_tblk;
        else
            return rc; /* another rule refuses a smaller block: its message */
    }
    if (lo == 0) return rc;
    if (!(rc == 0 && try.force_tblk == lo)) {
        try.force_tblk = lo;
        plena_prog_free(prog);
        rc = generate_once(&try, T, prog, info, err);
    }
    if (!rc && err) plena_err_clear(err);
    return rc;
}

int plena_gen_capacity_check(const struct plena_moe_model *mdl, const struct plena_gen_machine *m,
                             uint32_t T, struct plena_gen_capacity *cap, struct plena_err *err)
{
    struct plena_gen_capacity local;
    if (!cap) cap = &local;
    memset(cap, 0, sizeof *cap);
    struct plena_moe_cfg cfg;
    plena_moe_cfg_from_model(mdl, m, &cfg);
    struct plena_moe_emit_info *info = plena_malloc(sizeof *info);
    if (!info) {
        cap->reason = PLENA_GEN_NOMEM;
        return PLENA_FAIL(err, PLENA_E_NOMEM, "capacity", "out of memory");
    }
    struct plena_prog prog;
    struct plena_err e = {0};
    int rc = plena_moe_generate(&cfg, T, &prog, info, &e);
    cap->vram_limit = m->vram_elems;
    cap->hbm_limit = m->hbm_size;
    cap->insn_limit = UINT32_MAX;
    cap->reason = prog.reason;
    if (rc && prog.reason == PLENA_GEN_VRAM) {
        /* The requirement is the same generator's peak with room to spare. */
        plena_prog_free(&prog);
        struct plena_moe_cfg big = cfg;
        big.m.vram_elems = 1ull << 62;
        int rc2 = plena_moe_generate(&big, T, &prog, info, NULL);
        if (!rc2) cap->vram_need = info->vram_peak;
        if (rc2 || cap->vram_need <= m->vram_elems) {
            if (err) *err = e;
        } else {
            PLENA_FAIL(err, PLENA_E_INPUT, "capacity",
                       "VRAM: %u token(s) need %llu elements (peak of the generator's allocator), "
                       "limit %llu (VECTOR_SRAM_SIZE x VLEN); driven by model.hidden_size %u, "
                       "model.intermediate_size %u, model.shared_intermediate_size %u%s and the "
                       "token count",
                       T, (unsigned long long)cap->vram_need, (unsigned long long)m->vram_elems,
                       mdl->hidden, mdl->moe_inter, mdl->shared_inter,
                       mdl->expert_bias ? ", model.num_experts (expert biases)" : "");
        }
    } else if (rc) {
        if (err) *err = e;
    } else {
        const struct plena_moe_map *mp = &info->map;
        cap->t_blk = mp->t_blk;
        cap->fp_need = mp->fp_used;
        cap->fp_limit = m->fp_depth > cfg.fp_base ? m->fp_depth - cfg.fp_base : 0;
        cap->int_need = mp->int_used;
        cap->int_limit = m->int_depth > cfg.int_base ? m->int_depth - cfg.int_base : 0;
        cap->vram_need = info->vram_peak;
        cap->hbm_need = mp->hbm_end;
        cap->n_insns = prog.n_insns;
        if (cap->n_insns > cap->insn_limit) {
            rc = PLENA_E_INPUT;
            cap->reason = PLENA_GEN_SHAPE;
            PLENA_FAIL(err, PLENA_E_INPUT, "capacity",
                       "instruction count: %u token(s) need %llu instructions (%s pairs), limit "
                       "%llu (32-bit PC); driven by model.top_k %u and the token count",
                       T, (unsigned long long)cap->n_insns, plena_pair_form_name(info->pair_form),
                       (unsigned long long)cap->insn_limit, mdl->top_k);
        }
    }
    plena_prog_free(&prog);
    plena_free(info);
    return rc;
}
