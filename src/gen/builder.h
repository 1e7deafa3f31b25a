/* Program builder of the MoE generator (docs/lowering.md "Builder"):
 * append-only instruction/comment items, ASM rendering with stage markers,
 * immediate legalisation, register clobber sets, the VRAM allocator and
 * static SRAM/HBM placement and hardware loops within the loop budget. It
 * holds no "current stage": every append takes an explicit enum plena_stage.
 * It does not know what a MoE layer is (moe.h). */
#ifndef PLENA_GEN_BUILDER_H
#define PLENA_GEN_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/fileio.h"
#include "../isa/isa.h"
#include "../isa/program.h"
#include "../isa/stages.h"

/* The builder's "no pair" value for its own items: generated pair ids stay
 * far below it (the generator stops at 2^27 items), so a sentinel is safe
 * here; labels read back from text carry an explicit has_pair instead. */
#define PLENA_GEN_PAIR_NONE UINT32_MAX

/* Builder functions and emitters return an enum plena_status: PLENA_E_INPUT
 * for a configuration the generator cannot lower, PLENA_E_NOMEM. Which rule
 * refused is the program's `reason` (and a capacity check's), so tests and
 * callers can tell the cases apart without a second code space. */
enum plena_gen_reason {
    PLENA_GEN_NO_REASON = 0,
    PLENA_GEN_IMM,    /* immediate cannot be legalised */
    PLENA_GEN_STAGE,  /* stage outside a polymorphic emitter's allowed mask */
    PLENA_GEN_REGS,   /* out of registers, or a write to gp0/f0 */
    PLENA_GEN_VRAM,   /* VRAM capacity exceeded */
    PLENA_GEN_SRAM,   /* FP/INT SRAM region does not fit (T_blk < 1) */
    PLENA_GEN_TOPK,   /* invalid (E, k) */
    PLENA_GEN_LOOP,   /* loop budget / nesting */
    PLENA_GEN_SHAPE,  /* unsupported shape or configuration; instruction count */
    PLENA_GEN_NOMEM,  /* out of memory (status PLENA_E_NOMEM) */
    PLENA_GEN_COMMENT /* comment with a newline or "@stage=" */
};

/* Machine geometry the generator needs (filled from struct plena_settings by
 * the caller; plena_gen_machine_default() gives the reference values). */
struct plena_gen_machine {
    uint32_t mlen, vlen, blen;
    uint32_t hlen;       /* HLEN: lanes per head of the vector mask (V_MASK bit h) */
    uint64_t vram_elems; /* VECTOR_SRAM_SIZE * VLEN */
    uint32_t mram_tiles; /* MATRIX_SRAM_SIZE / MLEN */
    uint32_t fp_depth, int_depth;
    uint32_t max_loop; /* MAX_LOOP_INSTRUCTIONS */
    uint32_t p_m, p_v; /* HBM_M/V_Prefetch_Amount */
    uint64_t hbm_size;
};
void plena_gen_machine_default(struct plena_gen_machine *m);

#define PLENA_GEN_MAX_LOOP_DEPTH 8
/* Items (instructions and comments) of one program at most: about 3 GB of
 * host memory; pair-major's unrolled pairs reach it first (docs/lowering.md
 * "Static size"). */
#define PLENA_GEN_MAX_ITEMS (1u << 27)

enum plena_item_kind { PLENA_ITEM_INSN = 0, PLENA_ITEM_COMMENT = 1 };

struct plena_item {
    uint8_t kind;
    uint8_t stage; /* enum plena_stage (instructions only) */
    uint32_t pair; /* static pair id or PLENA_GEN_PAIR_NONE */
    struct plena_insn insn;
    uint32_t comment; /* offset of the NUL-terminated text in prog->text */
};

struct plena_prog {
    struct plena_item *items;
    size_t n_items, cap_items;
    struct plena_buf text; /* comment text pool */
    size_t n_insns;
    /* header comments (rendered first, before any item) */
    struct plena_buf header;
    /* per-stage static and predicted dynamic counts; per-opcode dynamic */
    uint64_t static_count[PLENA_STAGE_COUNT];
    uint64_t dyn_count[PLENA_STAGE_COUNT];
    uint64_t dyn_op[64];
    uint64_t dyn_total;
    /* loop stack: multiplicity of the current insertion point */
    uint64_t mult;
    struct {
        uint8_t reg;
        uint32_t n;
        int active;
        int live;    /* trip count read from a register at run time */
        uint8_t nm1; /* live: the register that held n - 1 */
        uint64_t outer_mult;
        uint64_t dyn_at_start; /* dyn_total when the body began */
    } loops[PLENA_GEN_MAX_LOOP_DEPTH];
    unsigned n_loops;
    uint32_t max_loop;            /* budget (0 = unchecked) */
    enum plena_status status;     /* first failure (sticky): later appends are ignored */
    enum plena_gen_reason reason; /* the rule behind status */
    struct plena_err *err;
    int no_markers; /* test fault NO_MARKERS */
    /* T-independent instruction forms (the expert-major lowering, docs/lowering.md
     * "Static size"): every plena_emit_li is S_LUI_INT + S_ADDI_INT and no loop
     * of trip count 1 is elided, so which form an instruction takes never
     * depends on a size that moves with T (a tensor's row pitch, a count). */
    int stable_form;
};

void plena_prog_init(struct plena_prog *p, uint32_t max_loop, struct plena_err *err);
void plena_prog_free(struct plena_prog *p);
/* Records a failure (first one wins): reason, and in the error record
 * PLENA_E_NOMEM for PLENA_GEN_NOMEM, else PLENA_E_INPUT. Returns p->status. */
int plena_prog_fail(struct plena_prog *p, enum plena_gen_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends one instruction. Rejects writes to gp0/f0 (PLENA_GEN_REGS) and
 * immediates wider than the field (PLENA_GEN_IMM). */
int plena_prog_insn(struct plena_prog *p, enum plena_stage stage, uint32_t pair,
                    const struct plena_insn *in);
int plena_prog_comment(struct plena_prog *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int plena_prog_header(struct plena_prog *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Rendering (pure functions of the items). */
int plena_prog_render_asm(const struct plena_prog *p, struct plena_buf *out);
int plena_prog_words(const struct plena_prog *p, uint32_t **words, size_t *n);

/* ---- registers ---- */
struct plena_regset {
    uint16_t gp;
    uint8_t fp, a;
};

/* ---- VRAM allocator ---- */
enum plena_space {
    PLENA_SPACE_VRAM = 0,
    PLENA_SPACE_HBM = 1,
    PLENA_SPACE_FP = 2,
    PLENA_SPACE_INT = 3
};

struct plena_tensor {
    uint64_t base;
    uint32_t rows, cols, prow, pcol;
    enum plena_space space;
    char name[48];
};

struct plena_vblock {
    uint64_t base, size;
    uint32_t seq;
    char name[48];
};

struct plena_vram {
    uint64_t capacity, granule, top, peak;
    uint32_t blen, vlen;
    struct plena_vblock *freel; /* sorted by base */
    size_t n_free, cap_free;
    struct plena_vblock *live; /* in allocation order */
    size_t n_live, cap_live;
    uint32_t next_seq;
};

void plena_vram_init(struct plena_vram *va, const struct plena_gen_machine *m);
void plena_vram_fini(struct plena_vram *va);
int plena_vram_alloc(struct plena_vram *va, uint32_t rows, uint32_t cols, const char *name,
                     struct plena_tensor *out, struct plena_err *err);
/* Reserves with a caller-chosen physical row count (>= rows, multiple of BLEN). */
int plena_vram_alloc_prow(struct plena_vram *va, uint32_t rows, uint32_t prow, uint32_t cols,
                          const char *name, struct plena_tensor *out, struct plena_err *err);
void plena_vram_free(struct plena_vram *va, const struct plena_tensor *t);
uint32_t plena_vram_mark(const struct plena_vram *va);
void plena_vram_release(struct plena_vram *va, uint32_t mark);
uint64_t plena_vram_live_elems(const struct plena_vram *va);

/* ---- HBM bump allocator (docs/lowering.md "Builder" and "Memory ABI") ---- */
struct plena_hbm_alloc {
    uint64_t top, align;
};
/* Places `bytes`; with `table` set, moves to the next 4 GiB window start when
 * the block would straddle one (unless it is larger than a window). */
uint64_t plena_hbm_place(struct plena_hbm_alloc *h, uint64_t bytes, int table);

/* VRAM element address of row r, column block c (docs/lowering.md "Memory ABI"). */
static inline uint64_t plena_row(const struct plena_tensor *x, uint32_t r, uint32_t c,
                                 uint32_t vlen)
{
    return x->base + (uint64_t)c * x->prow * vlen + (uint64_t)r * vlen;
}

/* ---- emission context ---- */
struct plena_moe_map;

/* Passed to every emitter. The error record lives in the program (p->err);
 * emitters return the program's sticky status. `pair` is the static pair id
 * stamped on appended instructions (PLENA_GEN_PAIR_NONE outside unrolled pairs):
 * a pair, unlike a stage, is a property of the emission site, not of a helper. */
struct plena_ctx {
    struct plena_prog *p;
    struct plena_regset live;
    const struct plena_gen_machine *m;
    const struct plena_moe_map *map;
    struct plena_vram *va;
    uint32_t pair;
};

/* Lowest-numbered free registers (gp1..15, f1..7, a0..7) not in live; adds
 * them to c->live. Callers restore c->live on return (release). out receives
 * n_gp GP numbers, then n_fp FP numbers, then n_a A numbers. */
int plena_regs_take(struct plena_ctx *c, unsigned n_gp, unsigned n_fp, unsigned n_a, uint8_t *out);

/* Generic append: fields by name. */
int plena_emit(struct plena_ctx *c, enum plena_stage stage, enum plena_op op, unsigned rd,
               unsigned rs1, unsigned rs2, unsigned rs3, unsigned funct1, uint32_t imm);
/* Immediate legalisation. scratch 0 = none. */
int plena_emit_li(struct plena_ctx *c, enum plena_stage stage, unsigned rd, uint64_t v);
int plena_emit_addi(struct plena_ctx *c, enum plena_stage stage, unsigned rd, unsigned rs,
                    uint64_t v, unsigned scratch);
/* rd = rs + v for a step that is machine geometry (MLEN, VLEN, BLEN and
 * their products, a weight tile's bytes), never a row pitch: the shortest
 * form, also in the stable form, since it cannot move with T. */
int plena_emit_addi_geom(struct plena_ctx *c, enum plena_stage stage, unsigned rd, unsigned rs,
                         uint64_t v, unsigned scratch);
/* A pointer step inside a loop. plena_step_init, before the loop: in the
 * stable form the step v is loaded into `reg` once (the step is then one
 * S_ADD_INT whatever v is); otherwise nothing is emitted and the step is
 * plena_emit_addi with `reg` as its scratch (the instruction forms of the
 * pair-major lowering, unchanged). */
struct plena_step {
    uint64_t v;
    unsigned reg;
    int in_reg;
};
int plena_step_init(struct plena_ctx *c, enum plena_stage stage, struct plena_step *st, uint64_t v,
                    unsigned reg);
int plena_step_emit(struct plena_ctx *c, enum plena_stage stage, unsigned rd,
                    const struct plena_step *st);
/* Hardware loop of n trips on counter `reg`: n == 1 emits no loop
 * instructions (returns 0), n >= 2 emits C_LOOP_START (returns 1). The body's
 * predicted dynamic counts are multiplied by n; plena_loop_end checks the
 * per-iteration executed count against MAX_LOOP_INSTRUCTIONS. */
int plena_loop_begin(struct plena_ctx *c, enum plena_stage stage, unsigned reg, uint32_t n);
/* Same, but a hardware loop even for n == 1: loops whose trip count scales
 * with T (token loops) keep the program's static size independent of T. */
int plena_loop_begin_t(struct plena_ctx *c, enum plena_stage stage, unsigned reg, uint32_t n);
int plena_loop_end(struct plena_ctx *c, enum plena_stage stage);
/* A hardware loop whose trip count n >= 1 is only known at run time: the
 * caller loads n - 1 into gp_nm1. Emits `C_LOOP_START reg, 1` and, as the
 * first body instruction, `S_ADD_INT reg, reg, gp_nm1`; plena_loop_end
 * emits `S_ADD_INT gp_nm1, gp0, gp0` before the C_LOOP_END. C_LOOP_END
 * jumps back to that first instruction (docs/machine.md "Hardware loops":
 * the counter is read live), so the first iteration raises the counter to n
 * and later ones add 0; the body may use gp_nm1 as scratch. body_mult is the
 * number of times the body runs in the whole program (the prediction of
 * dynamic counts); the loop budget of such a loop is the caller's to keep
 * (its iterations differ), plena_loop_end does not check it. Returns 1. */
int plena_loop_begin_live(struct plena_ctx *c, enum plena_stage stage, unsigned reg,
                          unsigned gp_nm1, uint64_t body_mult);

#endif
