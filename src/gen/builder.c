/* Program builder: items, rendering, legalisation, registers, loops, VRAM and
 * HBM placement (docs/lowering.md "Builder"). Rendering is a pure
 * function of the item array; appends are amortised O(1), so emission is
 * linear in program size. No MoE knowledge lives here. */
#include "gen/builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"

void plena_gen_machine_default(struct plena_gen_machine *m)
{
    memset(m, 0, sizeof *m);
    m->mlen = 64;
    m->vlen = 64;
    m->blen = 4;
    m->hlen = 16;
    m->vram_elems = 4194304ull * 64;
    m->mram_tiles = 4096 / 64;
    m->fp_depth = 1024;
    m->int_depth = 1024;
    m->max_loop = 100000;
    m->p_m = 64;
    m->p_v = 4;
    m->hbm_size = 17179869184ull;
}

void plena_prog_init(struct plena_prog *p, uint32_t max_loop, struct plena_err *err)
{
    memset(p, 0, sizeof *p);
    plena_buf_init(&p->text);
    plena_buf_init(&p->header);
    p->mult = 1;
    p->max_loop = max_loop;
    p->err = err;
}

void plena_prog_free(struct plena_prog *p)
{
    if (!p) return;
    plena_free(p->items);
    plena_buf_free(&p->text);
    plena_buf_free(&p->header);
    p->items = NULL;
    p->n_items = p->cap_items = 0;
}

int plena_prog_fail(struct plena_prog *p, enum plena_gen_reason reason, const char *fmt, ...)
{
    if (p->status) return p->status;
    p->status = reason == PLENA_GEN_NOMEM ? PLENA_E_NOMEM : PLENA_E_INPUT;
    p->reason = reason;
    va_list ap;
    va_start(ap, fmt);
    plena_err_vset(p->err, p->status, __FILE__, __LINE__, "generator", fmt, ap);
    va_end(ap);
    return p->status;
}

static struct plena_item *push(struct plena_prog *p)
{
    if (p->n_items >= PLENA_GEN_MAX_ITEMS) {
        plena_prog_fail(p, PLENA_GEN_SHAPE,
                        "the program exceeds %u instructions and comments, the generator's "
                        "limit (host memory); expert-major keeps a layer's size independent of T",
                        PLENA_GEN_MAX_ITEMS);
        return NULL;
    }
    if (plena_grow((void **)&p->items, &p->cap_items, p->n_items + 1, sizeof *p->items)) {
        plena_prog_fail(p, PLENA_GEN_NOMEM, "out of memory appending item %zu", p->n_items);
        return NULL;
    }
    struct plena_item *it = &p->items[p->n_items++];
    memset(it, 0, sizeof *it);
    it->pair = PLENA_GEN_PAIR_NONE;
    return it;
}

static int writes_gp(unsigned op)
{
    switch (op) {
    case PLENA_OP_S_ADD_INT:
    case PLENA_OP_S_ADDI_INT:
    case PLENA_OP_S_SUB_INT:
    case PLENA_OP_S_MUL_INT:
    case PLENA_OP_S_LUI_INT:
    case PLENA_OP_S_LD_INT:
    case PLENA_OP_C_LOOP_START:
    case PLENA_OP_C_LOOP_END: return 1;
    default: return 0;
    }
}

static int writes_fp(unsigned op)
{
    switch (op) {
    case PLENA_OP_S_ADD_FP:
    case PLENA_OP_S_SUB_FP:
    case PLENA_OP_S_MAX_FP:
    case PLENA_OP_S_MUL_FP:
    case PLENA_OP_S_EXP_FP:
    case PLENA_OP_S_RECI_FP:
    case PLENA_OP_S_SQRT_FP:
    case PLENA_OP_S_LD_FP:
    case PLENA_OP_V_RED_SUM:
    case PLENA_OP_V_RED_MAX: return 1;
    default: return 0;
    }
}

int plena_prog_insn(struct plena_prog *p, enum plena_stage stage, uint32_t pair,
                    const struct plena_insn *in)
{
    if (p->status) return p->status;
    const struct plena_op_info *info = plena_isa_info(in->op);
    if (!info->valid || (unsigned)stage >= PLENA_STAGE_COUNT)
        return plena_prog_fail(p, PLENA_GEN_SHAPE, "invalid opcode %u or stage %d", in->op,
                               (int)stage);
    if (in->rd == 0 && writes_gp(in->op))
        return plena_prog_fail(p, PLENA_GEN_REGS, "%s writes gp0 (treated as constant 0)",
                               info->name);
    if (in->rd == 0 && writes_fp(in->op))
        return plena_prog_fail(p, PLENA_GEN_REGS, "%s writes f0 (treated as constant 0.0)",
                               info->name);
    if (info->cls == PLENA_CLASS_I18 && in->imm > PLENA_IMM18_MAX)
        return plena_prog_fail(p, PLENA_GEN_IMM, "%s immediate %u exceeds imm18", info->name,
                               in->imm);
    if (info->cls == PLENA_CLASS_I22 && in->imm > PLENA_IMM22_MAX)
        return plena_prog_fail(p, PLENA_GEN_IMM, "%s immediate %u exceeds imm22", info->name,
                               in->imm);
    if (in->op == PLENA_OP_C_LOOP_START && in->imm == 0)
        return plena_prog_fail(p, PLENA_GEN_IMM, "C_LOOP_START with a zero trip count");
    struct plena_item *it = push(p);
    if (!it) return p->status;
    it->kind = PLENA_ITEM_INSN;
    it->stage = (uint8_t)stage;
    it->pair = pair;
    it->insn = *in;
    p->n_insns++;
    p->static_count[stage]++;
    p->dyn_count[stage] += p->mult;
    p->dyn_op[in->op & 63] += p->mult;
    p->dyn_total += p->mult;
    return 0;
}

static int check_comment(struct plena_prog *p, const char *s)
{
    if (strchr(s, '\n') || strchr(s, '\r') || strstr(s, "@stage="))
        return plena_prog_fail(p, PLENA_GEN_COMMENT,
                               "comment contains a newline or '@stage=': \"%.60s\"", s);
    return 0;
}

/* A comment item (header 0) or a header line (1): formatted, checked by
 * check_comment (header lines may carry the @routed_lowering marker, never
 * @stage=) and stored. */
static int add_comment(struct plena_prog *p, int header, const char *fmt, va_list ap)
{
    if (p->status) return p->status;
    char tmp[512];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (check_comment(p, tmp)) return p->status;
    if (header) {
        if (plena_buf_printf(&p->header, "; %s\n", tmp))
            return plena_prog_fail(p, PLENA_GEN_NOMEM, "out of memory (header)");
        return 0;
    }
    size_t off = p->text.len;
    if (plena_buf_append(&p->text, tmp, strlen(tmp) + 1))
        return plena_prog_fail(p, PLENA_GEN_NOMEM, "out of memory (comment)");
    struct plena_item *it = push(p);
    if (!it) return p->status;
    it->kind = PLENA_ITEM_COMMENT;
    it->comment = (uint32_t)off;
    return 0;
}

int plena_prog_comment(struct plena_prog *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = add_comment(p, 0, fmt, ap);
    va_end(ap);
    return rc;
}

int plena_prog_header(struct plena_prog *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = add_comment(p, 1, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- rendering ---- */

/* Parsed operand form of one opcode (forms.def descriptor): which field
 * feeds each written operand and how it is printed. Parsed once per render
 * call, not per instruction (rendering is on the --program-only hot path). */
enum rfield { RF_RD, RF_RS1, RF_RS2, RF_RS3, RF_FUNCT1, RF_IMM };
struct rform {
    int parsed;
    const char *name;
    size_t name_len;
    unsigned n;
    struct {
        char prefix[3]; /* "gp", "f", "a" or "" */
        uint8_t field, optional;
    } ops[8];
};

static void parse_form(struct rform *r, uint8_t op)
{
    const struct plena_op_info *info = plena_isa_info(op);
    const char *d = plena_form_descriptor(info->form);
    r->parsed = 1;
    r->name = info->name;
    r->name_len = strlen(info->name);
    r->n = 0;
    while (*d && *d != '|' && r->n < 8) {
        while (*d == ' ')
            d++;
        if (!*d || *d == '|') break; /* the first alternative is the canonical form */
        int opt = 0;
        if (*d == '?') {
            opt = 1;
            d++;
        }
        const char *colon = strchr(d, ':');
        size_t kl = (size_t)(colon - d);
        const char *f = colon + 1;
        const char *end = strchr(f, ' ');
        if (!end) end = f + strlen(f);
        if (!(kl == 1 && d[0] == 'X') && !(kl == 2 && !strncmp(d, "XG", 2))) {
            unsigned i = r->n++;
            const char *pre = kl == 1 && d[0] == 'G'   ? "gp"
                              : kl == 1 && d[0] == 'F' ? "f"
                              : kl == 1 && d[0] == 'A' ? "a"
                                                       : "";
            memcpy(r->ops[i].prefix, pre, strlen(pre) + 1);
            r->ops[i].optional = (uint8_t)opt;
            r->ops[i].field = !strncmp(f, "rd", 2)       ? RF_RD
                              : !strncmp(f, "rs1", 3)    ? RF_RS1
                              : !strncmp(f, "rs2", 3)    ? RF_RS2
                              : !strncmp(f, "rs3", 3)    ? RF_RS3
                              : !strncmp(f, "funct1", 6) ? RF_FUNCT1
                                                         : RF_IMM;
        }
        d = end;
    }
}

static unsigned rfield_value(const struct plena_insn *in, unsigned f)
{
    switch (f) {
    case RF_RD: return in->rd;
    case RF_RS1: return in->rs1;
    case RF_RS2: return in->rs2;
    case RF_RS3: return in->rs3;
    case RF_FUNCT1: return in->funct1;
    default: return in->imm;
    }
}

/* Renders one instruction from its operand form. */
static int render_insn(struct plena_buf *b, struct rform *forms, const struct plena_insn *in)
{
    struct rform *r = &forms[in->op & 63];
    if (!r->parsed) parse_form(r, in->op);
    unsigned v[8], last = r->n;
    for (unsigned i = 0; i < r->n; i++)
        v[i] = rfield_value(in, r->ops[i].field);
    /* optional operands are written up to the last non-zero one */
    while (last > 0 && r->ops[last - 1].optional && v[last - 1] == 0)
        last--;
    char line[160], *o = line;
    memcpy(o, r->name, r->name_len);
    o += r->name_len;
    for (unsigned i = 0; i < last; i++) {
        if (i) *o++ = ',';
        *o++ = ' ';
        for (const char *q = r->ops[i].prefix; *q; q++)
            *o++ = *q;
        o += plena_u64_digits(o, v[i]);
    }
    *o++ = '\n';
    return plena_buf_append(b, line, (size_t)(o - line));
}

int plena_prog_render_asm(const struct plena_prog *p, struct plena_buf *out)
{
    plena_buf_append(out, p->header.data ? p->header.data : "", p->header.len);
    struct rform forms[64];
    memset(forms, 0, sizeof forms);
    int have_prev = 0;
    unsigned prev_stage = 0;
    uint32_t prev_pair = PLENA_GEN_PAIR_NONE;
    size_t run_start = 0; /* first comment of the pending run */
    int in_run = 0;
    for (size_t i = 0; i < p->n_items; i++) {
        const struct plena_item *it = &p->items[i];
        if (it->kind == PLENA_ITEM_COMMENT) {
            if (!in_run) {
                in_run = 1;
                run_start = i;
            }
            continue;
        }
        int marker = !have_prev || it->stage != prev_stage || it->pair != prev_pair;
        if (marker && !p->no_markers) {
            plena_buf_printf(out, "; @stage=%s", plena_stage_name((enum plena_stage)it->stage));
            if (it->pair != PLENA_GEN_PAIR_NONE)
                plena_buf_printf(out, " @pair=%u", it->pair);
            else if (have_prev && prev_pair != PLENA_GEN_PAIR_NONE)
                plena_buf_puts(out, " @pair=none");
            plena_buf_puts(out, "\n");
        }
        if (in_run) {
            for (size_t j = run_start; j < i; j++)
                plena_buf_printf(out, "; %s\n", p->text.data + p->items[j].comment);
            in_run = 0;
        }
        render_insn(out, forms, &it->insn);
        have_prev = 1;
        prev_stage = it->stage;
        prev_pair = it->pair;
    }
    if (in_run)
        for (size_t j = run_start; j < p->n_items; j++)
            plena_buf_printf(out, "; %s\n", p->text.data + p->items[j].comment);
    return out->failed ? PLENA_E_NOMEM : 0;
}

int plena_prog_words(const struct plena_prog *p, uint32_t **words, size_t *n)
{
    uint32_t *w = plena_malloc((p->n_insns ? p->n_insns : 1) * sizeof *w);
    if (!w) return PLENA_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < p->n_items; i++)
        if (p->items[i].kind == PLENA_ITEM_INSN) w[k++] = plena_isa_encode(&p->items[i].insn);
    *words = w;
    *n = k;
    return 0;
}

/* ---- emission helpers ---- */

/* Takes the lowest free register in [first, limit) of one register file's
 * live mask; -1 when the file is exhausted. Deterministic by construction. */
static int take_lowest(unsigned *live, unsigned first, unsigned limit)
{
    for (unsigned r = first; r < limit; r++)
        if (!(*live >> r & 1)) {
            *live |= 1u << r;
            return (int)r;
        }
    return -1;
}

int plena_regs_take(struct plena_ctx *c, unsigned n_gp, unsigned n_fp, unsigned n_a, uint8_t *out)
{
    /* gp0 and f0 are constant zero, so GP and FP start at 1; a0 is usable */
    static const struct {
        const char *name;
        unsigned first, limit;
    } files[3] = {{"GP", 1, 16}, {"FP", 1, 8}, {"A", 0, 8}};
    const unsigned want[3] = {n_gp, n_fp, n_a};
    unsigned live[3] = {c->live.gp, c->live.fp, c->live.a};
    unsigned k = 0;
    for (int f = 0; f < 3; f++)
        for (unsigned i = 0; i < want[f]; i++) {
            int r = take_lowest(&live[f], files[f].first, files[f].limit);
            if (r < 0)
                return plena_prog_fail(c->p, PLENA_GEN_REGS, "out of %s registers (%u requested)",
                                       files[f].name, want[f]);
            out[k++] = (uint8_t)r;
        }
    c->live.gp = (uint16_t)live[0];
    c->live.fp = (uint8_t)live[1];
    c->live.a = (uint8_t)live[2];
    return 0;
}

int plena_emit(struct plena_ctx *c, enum plena_stage stage, enum plena_op op, unsigned rd,
               unsigned rs1, unsigned rs2, unsigned rs3, unsigned funct1, uint32_t imm)
{
    struct plena_insn in = {.op = (uint8_t)op,
                            .rd = (uint8_t)rd,
                            .rs1 = (uint8_t)rs1,
                            .rs2 = (uint8_t)rs2,
                            .rs3 = (uint8_t)rs3,
                            .funct1 = (uint8_t)funct1,
                            .imm = imm};
    return plena_prog_insn(c->p, stage, c->pair, &in);
}

int plena_emit_li(struct plena_ctx *c, enum plena_stage stage, unsigned rd, uint64_t v)
{
    if (v >= (1ull << 32))
        return plena_prog_fail(c->p, PLENA_GEN_IMM, "constant %llu does not fit 32 bits",
                               (unsigned long long)v);
    if (v <= PLENA_IMM18_MAX && !c->p->stable_form)
        return plena_emit(c, stage, PLENA_OP_S_ADDI_INT, rd, 0, 0, 0, 0, (uint32_t)v);
    plena_emit(c, stage, PLENA_OP_S_LUI_INT, rd, 0, 0, 0, 0, (uint32_t)(v >> 12));
    if ((v & 0xFFF) || c->p->stable_form)
        plena_emit(c, stage, PLENA_OP_S_ADDI_INT, rd, rd, 0, 0, 0, (uint32_t)(v & 0xFFF));
    return c->p->status;
}

int plena_emit_addi(struct plena_ctx *c, enum plena_stage stage, unsigned rd, unsigned rs,
                    uint64_t v, unsigned scratch)
{
    if (v >= (1ull << 32))
        return plena_prog_fail(c->p, PLENA_GEN_IMM, "constant %llu does not fit 32 bits",
                               (unsigned long long)v);
    /* stable form: the same three instructions whatever v is (a stride is a
     * row pitch, which moves with T) */
    if (v <= PLENA_IMM18_MAX && !(c->p->stable_form && (rd != rs || scratch)))
        return plena_emit(c, stage, PLENA_OP_S_ADDI_INT, rd, rs, 0, 0, 0, (uint32_t)v);
    if (rd != rs) {
        plena_emit_li(c, stage, rd, v);
        return plena_emit(c, stage, PLENA_OP_S_ADD_INT, rd, rs, rd, 0, 0, 0);
    }
    if (scratch == 0)
        return plena_prog_fail(c->p, PLENA_GEN_IMM,
                               "addi gp%u, gp%u, %llu needs a scratch register", rd, rs,
                               (unsigned long long)v);
    plena_emit_li(c, stage, scratch, v);
    return plena_emit(c, stage, PLENA_OP_S_ADD_INT, rd, rs, scratch, 0, 0, 0);
}

int plena_emit_addi_geom(struct plena_ctx *c, enum plena_stage stage, unsigned rd, unsigned rs,
                         uint64_t v, unsigned scratch)
{
    if (v <= PLENA_IMM18_MAX)
        return plena_emit(c, stage, PLENA_OP_S_ADDI_INT, rd, rs, 0, 0, 0, (uint32_t)v);
    return plena_emit_addi(c, stage, rd, rs, v, scratch);
}

int plena_step_init(struct plena_ctx *c, enum plena_stage stage, struct plena_step *st, uint64_t v,
                    unsigned reg)
{
    st->v = v;
    st->reg = reg;
    st->in_reg = c->p->stable_form;
    if (st->in_reg) return plena_emit_li(c, stage, reg, v);
    return c->p->status;
}

int plena_step_emit(struct plena_ctx *c, enum plena_stage stage, unsigned rd,
                    const struct plena_step *st)
{
    if (st->in_reg) return plena_emit(c, stage, PLENA_OP_S_ADD_INT, rd, rd, st->reg, 0, 0, 0);
    return plena_emit_addi(c, stage, rd, rd, st->v, st->reg);
}

static int loop_begin(struct plena_ctx *c, enum plena_stage stage, unsigned reg, uint32_t n,
                      int force)
{
    struct plena_prog *p = c->p;
    if (p->status) return 0;
    if (n == 0) {
        plena_prog_fail(p, PLENA_GEN_IMM, "zero-trip loop requested");
        return 0;
    }
    if (p->n_loops >= PLENA_GEN_MAX_LOOP_DEPTH) {
        plena_prog_fail(p, PLENA_GEN_LOOP, "loop nesting deeper than %d", PLENA_GEN_MAX_LOOP_DEPTH);
        return 0;
    }
    /* stable form: a caller with no counter register (0) knows its count is 1 */
    int active = n >= 2 || force || (p->stable_form && reg != 0);
    if (active) plena_emit(c, stage, PLENA_OP_C_LOOP_START, reg, 0, 0, 0, 0, n);
    unsigned d = p->n_loops++;
    p->loops[d].reg = (uint8_t)reg;
    p->loops[d].n = n;
    p->loops[d].active = active;
    p->loops[d].live = 0;
    p->loops[d].nm1 = 0;
    p->loops[d].outer_mult = p->mult;
    p->loops[d].dyn_at_start = p->dyn_total;
    p->mult *= n;
    return active;
}

int plena_loop_begin(struct plena_ctx *c, enum plena_stage stage, unsigned reg, uint32_t n)
{
    return loop_begin(c, stage, reg, n, 0);
}

int plena_loop_begin_t(struct plena_ctx *c, enum plena_stage stage, unsigned reg, uint32_t n)
{
    return loop_begin(c, stage, reg, n, 1);
}

int plena_loop_begin_live(struct plena_ctx *c, enum plena_stage stage, unsigned reg,
                          unsigned gp_nm1, uint64_t body_mult)
{
    struct plena_prog *p = c->p;
    if (p->status) return 1;
    if (p->n_loops >= PLENA_GEN_MAX_LOOP_DEPTH) {
        plena_prog_fail(p, PLENA_GEN_LOOP, "loop nesting deeper than %d", PLENA_GEN_MAX_LOOP_DEPTH);
        return 1;
    }
    if (reg == 0 || gp_nm1 == 0 || reg == gp_nm1) {
        plena_prog_fail(p, PLENA_GEN_REGS, "live loop needs two distinct registers (gp%u, gp%u)",
                        reg, gp_nm1);
        return 1;
    }
    plena_emit(c, stage, PLENA_OP_C_LOOP_START, reg, 0, 0, 0, 0, 1);
    unsigned d = p->n_loops++;
    p->loops[d].reg = (uint8_t)reg;
    p->loops[d].n = 1;
    p->loops[d].active = 1;
    p->loops[d].live = 1;
    p->loops[d].outer_mult = p->mult;
    p->loops[d].dyn_at_start = p->dyn_total;
    p->loops[d].nm1 = (uint8_t)gp_nm1;
    p->mult = body_mult;
    plena_emit(c, stage, PLENA_OP_S_ADD_INT, reg, reg, gp_nm1, 0, 0, 0);
    return 1;
}

int plena_loop_end(struct plena_ctx *c, enum plena_stage stage)
{
    struct plena_prog *p = c->p;
    if (p->status) return p->status;
    if (p->n_loops == 0) return plena_prog_fail(p, PLENA_GEN_LOOP, "loop end without begin");
    unsigned d = p->n_loops - 1;
    /* a live loop re-runs its first body instruction (counter += gp_nm1) on
     * every iteration: gp_nm1 is zeroed last, so the body may use it */
    if (p->loops[d].live) plena_emit(c, stage, PLENA_OP_S_ADD_INT, p->loops[d].nm1, 0, 0, 0, 0, 0);
    if (p->loops[d].active)
        plena_emit(c, stage, PLENA_OP_C_LOOP_END, p->loops[d].reg, 0, 0, 0, 0, 0);
    /* executed per iteration = body dynamic count / n (C_LOOP_END included) */
    uint64_t per_iter = (p->dyn_total - p->loops[d].dyn_at_start) / p->loops[d].n /
                        (p->loops[d].outer_mult ? p->loops[d].outer_mult : 1);
    if (p->loops[d].active && !p->loops[d].live && p->max_loop && per_iter > p->max_loop)
        return plena_prog_fail(p, PLENA_GEN_LOOP,
                               "loop on gp%u (stage %s) executes %llu instructions per "
                               "iteration, above MAX_LOOP_INSTRUCTIONS %u",
                               p->loops[d].reg, plena_stage_name(stage),
                               (unsigned long long)per_iter, p->max_loop);
    p->mult = p->loops[d].outer_mult;
    p->n_loops--;
    return p->status;
}

/* ---- VRAM allocator ---- */

void plena_vram_init(struct plena_vram *va, const struct plena_gen_machine *m)
{
    memset(va, 0, sizeof *va);
    va->capacity = m->vram_elems;
    va->granule = (uint64_t)m->mlen * m->vlen;
    va->blen = m->blen;
    va->vlen = m->vlen;
}

void plena_vram_fini(struct plena_vram *va)
{
    plena_free(va->freel);
    plena_free(va->live);
    memset(va, 0, sizeof *va);
}

static int free_insert(struct plena_vram *va, uint64_t base, uint64_t size)
{
    /* coalesce with neighbours; keep sorted by base */
    size_t i = 0;
    while (i < va->n_free && va->freel[i].base < base)
        i++;
    if (i > 0 && va->freel[i - 1].base + va->freel[i - 1].size == base) {
        va->freel[i - 1].size += size;
        if (i < va->n_free && va->freel[i - 1].base + va->freel[i - 1].size == va->freel[i].base) {
            va->freel[i - 1].size += va->freel[i].size;
            memmove(&va->freel[i], &va->freel[i + 1], (va->n_free - i - 1) * sizeof *va->freel);
            va->n_free--;
        }
    } else if (i < va->n_free && base + size == va->freel[i].base) {
        va->freel[i].base = base;
        va->freel[i].size += size;
    } else {
        if (plena_grow((void **)&va->freel, &va->cap_free, va->n_free + 1, sizeof *va->freel))
            return -1;
        memmove(&va->freel[i + 1], &va->freel[i], (va->n_free - i) * sizeof *va->freel);
        va->freel[i].base = base;
        va->freel[i].size = size;
        va->n_free++;
    }
    /* a free block touching the bump top returns to the bump region */
    if (va->n_free && va->freel[va->n_free - 1].base + va->freel[va->n_free - 1].size == va->top) {
        va->top = va->freel[va->n_free - 1].base;
        va->n_free--;
    }
    return 0;
}

int plena_vram_alloc_prow(struct plena_vram *va, uint32_t rows, uint32_t prow, uint32_t cols,
                          const char *name, struct plena_tensor *out, struct plena_err *err)
{
    uint32_t pcol = (cols + va->vlen - 1) / va->vlen * va->vlen;
    if (pcol == 0) pcol = va->vlen;
    uint64_t elems = (uint64_t)prow * pcol;
    uint64_t size = (elems + va->granule - 1) / va->granule * va->granule;
    /* best fit: smallest adequate free block, lowest base on ties */
    size_t best = (size_t)-1;
    for (size_t i = 0; i < va->n_free; i++)
        if (va->freel[i].size >= size &&
            (best == (size_t)-1 || va->freel[i].size < va->freel[best].size))
            best = i;
    uint64_t base;
    if (best != (size_t)-1) {
        base = va->freel[best].base;
        va->freel[best].base += size;
        va->freel[best].size -= size;
        if (va->freel[best].size == 0) {
            memmove(&va->freel[best], &va->freel[best + 1],
                    (va->n_free - best - 1) * sizeof *va->freel);
            va->n_free--;
        }
    } else {
        if (va->top + size > va->capacity)
            return PLENA_FAIL(err, PLENA_E_INPUT, name,
                              "VRAM capacity exceeded: tensor '%s' needs %llu elements at %llu, "
                              "capacity %llu (VECTOR_SRAM_SIZE x VLEN)",
                              name, (unsigned long long)size, (unsigned long long)va->top,
                              (unsigned long long)va->capacity);
        base = va->top;
        va->top += size;
        if (va->top > va->peak) va->peak = va->top;
    }
    if (plena_grow((void **)&va->live, &va->cap_live, va->n_live + 1, sizeof *va->live))
        return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory");
    struct plena_vblock *b = &va->live[va->n_live++];
    b->base = base;
    b->size = size;
    b->seq = va->next_seq++;
    snprintf(b->name, sizeof b->name, "%s", name);
    memset(out, 0, sizeof *out);
    out->base = base;
    out->rows = rows;
    out->cols = cols;
    out->prow = prow;
    out->pcol = pcol;
    out->space = PLENA_SPACE_VRAM;
    snprintf(out->name, sizeof out->name, "%s", name);
    return 0;
}

int plena_vram_alloc(struct plena_vram *va, uint32_t rows, uint32_t cols, const char *name,
                     struct plena_tensor *out, struct plena_err *err)
{
    uint32_t r = rows ? rows : 1;
    uint32_t prow = (r + va->blen - 1) / va->blen * va->blen;
    return plena_vram_alloc_prow(va, rows, prow, cols, name, out, err);
}

static void free_at(struct plena_vram *va, size_t i)
{
    uint64_t base = va->live[i].base, size = va->live[i].size;
    memmove(&va->live[i], &va->live[i + 1], (va->n_live - i - 1) * sizeof *va->live);
    va->n_live--;
    free_insert(va, base, size);
}

void plena_vram_free(struct plena_vram *va, const struct plena_tensor *t)
{
    for (size_t i = va->n_live; i-- > 0;)
        if (va->live[i].base == t->base) {
            free_at(va, i);
            return;
        }
}

uint32_t plena_vram_mark(const struct plena_vram *va)
{
    return va->next_seq;
}

void plena_vram_release(struct plena_vram *va, uint32_t mark)
{
    for (size_t i = va->n_live; i-- > 0;)
        if (va->live[i].seq >= mark) free_at(va, i);
}

uint64_t plena_vram_live_elems(const struct plena_vram *va)
{
    uint64_t s = 0;
    for (size_t i = 0; i < va->n_live; i++)
        s += va->live[i].size;
    return s;
}

/* ---- HBM ---- */

uint64_t plena_hbm_place(struct plena_hbm_alloc *h, uint64_t bytes, int table)
{
    const uint64_t win = 1ull << 32;
    uint64_t a = h->align ? h->align : 64;
    uint64_t base = (h->top + a - 1) / a * a;
    if (table && bytes <= win && (base % win) + bytes > win) base = (base / win + 1) * win;
    if (table && bytes > win)
        base = (base + win - 1) / win * win; /* windowed tables start a window */
    h->top = base + bytes;
    return base;
}
