/* overlap.c — the opt-in overlap overlay (docs/timing.md "Overlap overlay"):
 * classifies each executed instruction from its opcode and pre-execution
 * register values and hides queued prefetch time behind later compute in FIFO
 * order. A post-pass estimate: it changes only reported cycles, never state,
 * bytes or stage figures. Write-after-write between compute and a pending
 * prefetch is deliberately not modelled (as upstream). */
#include <string.h>

#include "common/alloc.h"
#include "timing/timing.h"

struct entry {
    uint64_t remaining;
    struct plena_overlap_range write;
};

struct geom {
    uint64_t mlen, vlen, blen, rows_m, rows_v;
};

struct plena_overlap {
    struct geom g;
    uint8_t other[256]; /* opcode -> class "other" (nothing to account: skip classifying) */
    struct entry *q;    /* FIFO: live entries are q[head .. n) */
    size_t head, n, cap;
    uint64_t hidden;
    uint64_t last_hidden; /* hidden by the last observed instruction (plena_overlap_last) */
    uint64_t prefetch_ops, compute_ops, barrier_ops, stalls;
};

static struct geom geom_of(const struct plena_settings *s)
{
    struct geom g = {s->mlen, s->vlen, s->blen, s->hbm_m_prefetch_amount, s->hbm_v_prefetch_amount};
    return g;
}

static struct plena_overlap_range rng(enum plena_overlap_space sp, uint64_t lo, uint64_t len)
{
    struct plena_overlap_range r = {sp, lo, lo + len};
    return r;
}

/* The class from the opcode's isa.def columns: a store to HBM and a
 * loop exit are barriers (FLOW exit), an HBM read into MRAM or VRAM is a
 * prefetch (H_PREFETCH_S fills scalar SRAM for the scalar loads right after
 * it, which the overlay does not track, so it stays serial: "other"), anything
 * that reads MRAM or VRAM or uses an accumulator is compute (all M_* and V_*;
 * S_MAP_V_FP only writes VRAM and stays "other"), the rest is other. Invalid
 * opcodes trap and are never observed. */
static enum plena_overlap_class class_of(unsigned op)
{
    const struct plena_op_info *r = plena_isa_info(op);
    if (r->flow == PLENA_FLOW_TRAP) return PLENA_OVERLAP_OTHER;
    if ((r->writes & PLENA_MASK_HBM) || r->flow == PLENA_FLOW_EXIT) return PLENA_OVERLAP_BARRIER;
    if ((r->reads & PLENA_MASK_HBM) && (r->writes & (PLENA_MASK_MRAM | PLENA_MASK_VRAM)))
        return PLENA_OVERLAP_PREFETCH;
    if ((r->reads & (PLENA_MASK_MRAM | PLENA_MASK_VRAM)) ||
        ((r->reads | r->writes) & PLENA_MASK_ACCUMULATORS))
        return PLENA_OVERLAP_COMPUTE;
    return PLENA_OVERLAP_OTHER;
}

/* The ranges: which register holds each operand and how far it
 * reaches is per-opcode geometry, not a column, so it stays a switch; the
 * spaces come from the READS/WRITES columns (test_timing checks they agree
 * for every opcode). */
static void classify(const struct geom *g, const struct plena_emu_event *ev,
                     struct plena_overlap_class_info *ci)
{
    const enum plena_overlap_space M = PLENA_OVERLAP_MATRIX, V = PLENA_OVERLAP_VECTOR;
    const struct plena_op_info *r = plena_isa_info(ev->op);
    uint64_t m2 = g->mlen * g->mlen;
    uint64_t rd = ev->g_rd, rs1 = ev->g_rs1, rs2 = ev->g_rs2;
#define TILE(x) ((x) - ((x) % m2))
    memset(ci, 0, sizeof *ci);
    ci->cls = class_of(ev->op);
    if (ci->cls == PLENA_OVERLAP_PREFETCH) {
        /* the prefetched rows: P_M rows of MLEN into MRAM or P_V rows of VLEN into VRAM */
        ci->write = r->writes & PLENA_MASK_MRAM ? rng(M, rd, g->mlen * g->rows_m)
                                                : rng(V, rd, g->vlen * g->rows_v);
        return;
    }
    if (ci->cls != PLENA_OVERLAP_COMPUTE || !(r->reads & (PLENA_MASK_MRAM | PLENA_MASK_VRAM)))
        return; /* M_*_WO: compute without reads */
    switch ((enum plena_op)ev->op) {
    case PLENA_OP_M_MM:
        ci->reads[0] = rng(M, TILE(rs1), m2);
        ci->reads[1] = rng(V, rs2, g->mlen * g->blen);
        ci->n_reads = 2;
        break;
    case PLENA_OP_M_BMM:
    case PLENA_OP_M_BTMM:
        ci->reads[0] = rng(M, TILE(rs1), m2);
        ci->reads[1] = rng(V, rs2, m2);
        ci->n_reads = 2;
        break;
    case PLENA_OP_M_TMM:
        /* deviation from upstream: the matrix operand is rs2 and starts at its tile */
        ci->reads[0] = rng(V, rs1, g->mlen * g->blen);
        ci->reads[1] = rng(M, TILE(rs2), m2);
        ci->n_reads = 2;
        break;
    case PLENA_OP_M_MV:
    case PLENA_OP_M_TMV:
        ci->reads[0] = rng(M, TILE(rs1), m2);
        ci->reads[1] = rng(V, rs2, g->vlen);
        ci->n_reads = 2;
        break;
    case PLENA_OP_M_BMV:
    case PLENA_OP_M_BTMV: {
        uint64_t a = rs1 + rd;
        ci->reads[0] = rng(M, TILE(a), m2);
        ci->reads[1] = rng(V, rs2, g->vlen);
        ci->n_reads = 2;
        break;
    }
    case PLENA_OP_V_ADD_VV:
    case PLENA_OP_V_SUB_VV:
    case PLENA_OP_V_MUL_VV:
        ci->reads[0] = rng(V, rs1, g->vlen);
        ci->reads[1] = rng(V, rs2, g->vlen);
        ci->n_reads = 2;
        break;
    case PLENA_OP_V_TOPK: {
        uint64_t e = ev->topk_experts;
        ci->reads[0] = rng(V, rs1, (e / g->vlen + (e % g->vlen != 0)) * g->vlen);
        ci->n_reads = 1;
        break;
    }
    default: /* every other V_*: one row at G[rs1] */
        ci->reads[0] = rng(V, rs1, g->vlen);
        ci->n_reads = 1;
        break;
    }
#undef TILE
}

void plena_overlap_classify(const struct plena_settings *s, const struct plena_emu_event *ev,
                            struct plena_overlap_class_info *ci)
{
    struct geom g = geom_of(s);
    classify(&g, ev, ci);
}

int plena_overlap_new(const struct plena_settings *s, struct plena_overlap **out,
                      struct plena_err *err)
{
    *out = NULL;
    if (s->mlen == 0 || s->vlen == 0)
        return PLENA_FAIL(err, PLENA_E_INPUT, "CONFIG.MLEN",
                          "overlap overlay needs MLEN and VLEN >= 1 (found %u, %u)", s->mlen,
                          s->vlen);
    struct plena_overlap *o = plena_calloc(1, sizeof *o);
    if (!o) return PLENA_FAIL(err, PLENA_E_NOMEM, "overlap", "out of memory");
    o->g = geom_of(s);
    /* the class depends on the opcode alone; only the ranges read registers */
    for (unsigned op = 0; op < 256; op++)
        o->other[op] = class_of(op) == PLENA_OVERLAP_OTHER;
    *out = o;
    return 0;
}

void plena_overlap_free(struct plena_overlap *o)
{
    if (!o) return;
    plena_free(o->q);
    plena_free(o);
}

int plena_overlap_prefetch(struct plena_overlap *o, uint64_t duration_ps,
                           const struct plena_overlap_range *write)
{
    o->prefetch_ops++;
    if (duration_ps == 0) return 0;
    if (o->head > 0 && o->n == o->cap) {
        /* compact before growing: the FIFO's dead prefix is reusable */
        memmove(o->q, o->q + o->head, (o->n - o->head) * sizeof *o->q);
        o->n -= o->head;
        o->head = 0;
    }
    if (plena_grow((void **)&o->q, &o->cap, o->n + 1, sizeof *o->q) != 0) return PLENA_E_NOMEM;
    o->q[o->n].remaining = duration_ps;
    o->q[o->n].write = *write;
    o->n++;
    return 0;
}

void plena_overlap_barrier(struct plena_overlap *o)
{
    o->head = o->n = 0; /* dropped entries' time stays exposed */
    o->barrier_ops++;
}

static int intersects(const struct plena_overlap_range *a, const struct plena_overlap_range *b)
{
    return a->space == b->space && a->lo < b->hi && b->lo < a->hi;
}

void plena_overlap_compute(struct plena_overlap *o, uint64_t duration_ps,
                           const struct plena_overlap_range *reads, size_t n_reads)
{
    /* dependent prefetches stall: their remaining time is exposed */
    size_t w = o->head;
    for (size_t i = o->head; i < o->n; i++) {
        int dep = 0;
        for (size_t k = 0; k < n_reads && !dep; k++)
            dep = intersects(&o->q[i].write, &reads[k]);
        if (dep)
            o->stalls++;
        else
            o->q[w++] = o->q[i];
    }
    o->n = w;
    uint64_t budget = duration_ps;
    while (budget > 0 && o->head < o->n) {
        struct entry *e = &o->q[o->head];
        uint64_t x = e->remaining < budget ? e->remaining : budget;
        o->hidden += x;
        e->remaining -= x;
        budget -= x;
        if (e->remaining == 0) o->head++;
    }
    if (o->head == o->n) o->head = o->n = 0;
    o->compute_ops++;
}

void plena_overlap_observe(struct plena_overlap *o, const struct plena_emu_event *ev,
                           uint64_t duration_ps)
{
    uint64_t before = o->hidden;
    o->last_hidden = 0;
    if (o->other[ev->op]) return;
    struct plena_overlap_class_info ci;
    classify(&o->g, ev, &ci);
    switch (ci.cls) {
    case PLENA_OVERLAP_PREFETCH: (void)plena_overlap_prefetch(o, duration_ps, &ci.write); break;
    case PLENA_OVERLAP_BARRIER: plena_overlap_barrier(o); break;
    case PLENA_OVERLAP_COMPUTE: plena_overlap_compute(o, duration_ps, ci.reads, ci.n_reads); break;
    case PLENA_OVERLAP_OTHER: break;
    }
    o->last_hidden = o->hidden - before;
}

void plena_overlap_last(const struct plena_overlap *o, uint64_t *hidden_ps, uint64_t *pending)
{
    *hidden_ps = o->last_hidden;
    *pending = o->n - o->head;
}

void plena_overlap_report(const struct plena_overlap *o, uint64_t serial_total_ps,
                          uint64_t clock_period_ps, struct plena_overlap_report *r)
{
    uint64_t pending = 0;
    for (size_t i = o->head; i < o->n; i++)
        pending += o->q[i].remaining;
    uint64_t hidden = o->hidden;
    memset(r, 0, sizeof *r);
    r->serial_picos = serial_total_ps;
    r->hidden_prefetch_picos = hidden;
    r->adjusted_picos = serial_total_ps - (hidden < serial_total_ps ? hidden : serial_total_ps);
    r->serial_cycles = plena_ps_to_cycles(r->serial_picos, clock_period_ps);
    r->adjusted_cycles = plena_ps_to_cycles(r->adjusted_picos, clock_period_ps);
    r->hidden_prefetch_cycles = r->serial_cycles - r->adjusted_cycles;
    r->pending_prefetch_picos = pending;
    r->pending_prefetch_cycles = plena_ps_to_cycles(pending, clock_period_ps);
    r->prefetch_ops = o->prefetch_ops;
    r->compute_ops = o->compute_ops;
    r->barrier_ops = o->barrier_ops;
    r->dependent_prefetch_stalls = o->stalls;
}
