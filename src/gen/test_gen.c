/* Tests of the program builder and the MoE lowering (docs/lowering.md).
 * Expected values come from the spec's tables and hand computation, never
 * from running the generator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "gen/moe.h"
#include "num/num.h"
#include "common/test_support.h"

static struct plena_gen_machine machine(uint32_t blen)
{
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    m.blen = blen;
    return m;
}

struct env {
    struct plena_prog p;
    struct plena_vram va;
    struct plena_ctx c;
    struct plena_gen_machine m;
    struct plena_moe_map map;
    struct plena_err err;
};

static void env_init(struct env *e, uint32_t blen)
{
    memset(e, 0, sizeof *e);
    e->m = machine(blen);
    plena_prog_init(&e->p, e->m.max_loop, &e->err);
    plena_vram_init(&e->va, &e->m);
    e->c.p = &e->p;
    e->c.m = &e->m;
    e->c.va = &e->va;
    e->c.map = &e->map;
    e->c.pair = PLENA_GEN_PAIR_NONE;
    e->map.fp_base = 0;
    e->map.off_one = 64;
}

static void env_fini(struct env *e)
{
    plena_prog_free(&e->p);
    plena_vram_fini(&e->va);
}

static char *render(const struct plena_prog *p)
{
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_prog_render_asm(p, &b), 0);
    plena_buf_append(&b, "", 1);
    return b.data;
}

/* ---- builder ---- */

static void test_render_markers(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, 4);
    plena_prog_header(&e.p, "plena moe preset=x T=1 E=0 k=0");
    plena_prog_comment(&e.p, "first");
    plena_emit_li(&e.c, PLENA_STAGE_GATHER, 1, 5);
    plena_emit_li(&e.c, PLENA_STAGE_GATHER, 2, 6);
    plena_prog_comment(&e.p, "intro a");
    plena_prog_comment(&e.p, "intro b");
    plena_emit(&e.c, PLENA_STAGE_SCATTER_COMBINE, PLENA_OP_V_ADD_VV, 1, 1, 2, 0, 0, 0);
    e.c.pair = 7;
    plena_emit(&e.c, PLENA_STAGE_SCATTER_COMBINE, PLENA_OP_C_SET_ADDR_REG, 3, 0, 2, 0, 0, 0);
    e.c.pair = PLENA_GEN_PAIR_NONE;
    plena_emit(&e.c, PLENA_STAGE_SCATTER_COMBINE, PLENA_OP_H_PREFETCH_M, 1, 2, 3, 1, 0, 0);
    char *s = render(&e.p);
    const char *want = "; plena moe preset=x T=1 E=0 k=0\n"
                       "; @stage=gather\n"
                       "; first\n"
                       "S_ADDI_INT gp1, gp0, 5\n"
                       "S_ADDI_INT gp2, gp0, 6\n"
                       "; @stage=scatter_combine\n"
                       "; intro a\n"
                       "; intro b\n"
                       "V_ADD_VV gp1, gp1, gp2\n"
                       "; @stage=scatter_combine @pair=7\n"
                       "C_SET_ADDR_REG a3, gp0, gp2\n"
                       "; @stage=scatter_combine @pair=none\n"
                       "H_PREFETCH_M gp1, gp2, a3, 1\n";
    assert_string_equal(s, want);
    /* rendering is a pure function of the items */
    char *s2 = render(&e.p);
    assert_string_equal(s, s2);
    plena_free(s);
    plena_free(s2);
    env_fini(&e);
}

static void test_comment_rules(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, 4);
    assert_int_equal(plena_prog_comment(&e.p, "bad @stage=gather"), PLENA_E_INPUT);
    assert_int_equal(e.p.reason, PLENA_GEN_COMMENT);
    env_fini(&e);
    env_init(&e, 4);
    assert_int_equal(plena_prog_comment(&e.p, "two\nlines"), PLENA_E_INPUT);
    assert_int_equal(e.p.reason, PLENA_GEN_COMMENT);
    env_fini(&e);
}

static size_t n_insn(const struct plena_prog *p)
{
    return p->n_insns;
}

/* plena_emit(op rd, rs1, imm) on a fresh program must fail with reason why;
 * returns the number of instructions the program holds afterwards. */
static size_t emit_rejected(enum plena_op op, unsigned rd, unsigned rs1, uint32_t imm,
                            enum plena_gen_reason why)
{
    struct env e;
    env_init(&e, 4);
    assert_int_equal(plena_emit(&e.c, PLENA_STAGE_OTHER, op, rd, rs1, 0, 0, 0, imm), PLENA_E_INPUT);
    assert_int_equal(e.p.reason, why);
    size_t n = n_insn(&e.p);
    env_fini(&e);
    return n;
}

static void test_legalisation(void **state)
{
    (void)state;
    struct env e;
    /* one instruction: v < 2^18 one S_ADDI_INT; 2^18 exactly LUI only (low 12 bits zero) */
    static const struct {
        uint32_t v;
        enum plena_op op;
        uint32_t imm;
    } li1[2] = {{262143, PLENA_OP_S_ADDI_INT, 262143}, {262144, PLENA_OP_S_LUI_INT, 64}};
    for (int i = 0; i < 2; i++) {
        env_init(&e, 4);
        assert_int_equal(plena_emit_li(&e.c, PLENA_STAGE_OTHER, 3, li1[i].v), 0);
        assert_int_equal(n_insn(&e.p), 1);
        assert_int_equal(e.p.items[0].insn.op, li1[i].op);
        assert_int_equal(e.p.items[0].insn.imm, li1[i].imm);
        env_fini(&e);
    }
    /* docs/machine.md "C_SET_TOPK_REG and V_TOPK": 4194056 = LUI 1023 + ADDI 3848 */
    env_init(&e, 4);
    assert_int_equal(plena_emit_li(&e.c, PLENA_STAGE_OTHER, 4, 4194056), 0);
    assert_int_equal(n_insn(&e.p), 2);
    assert_int_equal(e.p.items[0].insn.imm, 1023);
    assert_int_equal(e.p.items[1].insn.op, PLENA_OP_S_ADDI_INT);
    assert_int_equal(e.p.items[1].insn.rs1, 4);
    assert_int_equal(e.p.items[1].insn.imm, 3848);
    env_fini(&e);
    /* >= 2^32 */
    env_init(&e, 4);
    assert_int_equal(plena_emit_li(&e.c, PLENA_STAGE_OTHER, 4, 1ull << 32), PLENA_E_INPUT);
    assert_int_equal(e.p.reason, PLENA_GEN_IMM);
    env_fini(&e);
    /* addi: rd != rs large: li rd; add rd, rs, rd */
    env_init(&e, 4);
    assert_int_equal(plena_emit_addi(&e.c, PLENA_STAGE_OTHER, 2, 3, 300000, 0), 0);
    assert_int_equal(n_insn(&e.p), 3);
    assert_int_equal(e.p.items[2].insn.op, PLENA_OP_S_ADD_INT);
    assert_int_equal(e.p.items[2].insn.rs1, 3);
    assert_int_equal(e.p.items[2].insn.rs2, 2);
    env_fini(&e);
    /* rd == rs large without scratch */
    env_init(&e, 4);
    assert_int_equal(plena_emit_addi(&e.c, PLENA_STAGE_OTHER, 2, 2, 300000, 0), PLENA_E_INPUT);
    assert_int_equal(e.p.reason, PLENA_GEN_IMM);
    env_fini(&e);
    env_init(&e, 4);
    assert_int_equal(plena_emit_addi(&e.c, PLENA_STAGE_OTHER, 2, 2, 300000, 5), 0);
    assert_int_equal(e.p.items[n_insn(&e.p) - 1].insn.rs2, 5);
    env_fini(&e);
    /* imm18 memory offset too large, zero-trip loop, gp0/f0 writes */
    emit_rejected(PLENA_OP_S_LD_INT, 1, 0, 1u << 18, PLENA_GEN_IMM);
    emit_rejected(PLENA_OP_C_LOOP_START, 1, 0, 0, PLENA_GEN_IMM);
    emit_rejected(PLENA_OP_S_ADDI_INT, 0, 0, 1, PLENA_GEN_REGS);
    assert_int_equal(emit_rejected(PLENA_OP_S_LD_FP, 0, 1, 1, PLENA_GEN_REGS), 0);
}

static void test_regs_take(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, 4);
    e.c.live.gp = (1u << 1) | (1u << 3);
    uint8_t r[4];
    assert_int_equal(plena_regs_take(&e.c, 2, 1, 1, r), 0);
    assert_int_equal(r[0], 2);
    assert_int_equal(r[1], 4);
    assert_int_equal(r[2], 1);
    assert_int_equal(r[3], 0);
    e.c.live.gp = 0xFFFE;
    assert_int_equal(plena_regs_take(&e.c, 1, 0, 0, r), PLENA_E_INPUT);
    assert_int_equal(e.p.reason, PLENA_GEN_REGS);
    env_fini(&e);
}

static void test_vram_allocator(void **state)
{
    (void)state;
    struct plena_gen_machine m = machine(4);
    struct plena_vram va;
    plena_vram_init(&va, &m);
    struct plena_tensor a, b, c, d;
    /* [5, 64] -> prow 8, one 4096-element granule */
    assert_int_equal(plena_vram_alloc(&va, 5, 64, "a", &a, NULL), 0);
    assert_int_equal(a.prow, 8);
    assert_int_equal(a.pcol, 64);
    assert_int_equal(a.base, 0);
    assert_int_equal(plena_vram_alloc(&va, 0, 100, "b", &b, NULL), 0);
    assert_int_equal(b.prow, 4);
    assert_int_equal(b.pcol, 128);
    assert_int_equal(b.base, 4096);
    assert_int_equal(plena_vram_alloc(&va, 128, 64, "c", &c, NULL), 0);
    assert_int_equal(c.base, 8192);
    plena_vram_free(&va, &b);
    /* best fit reuses b's hole */
    assert_int_equal(plena_vram_alloc(&va, 1, 64, "d", &d, NULL), 0);
    assert_int_equal(d.base, 4096);
    uint32_t mk = plena_vram_mark(&va);
    struct plena_tensor x, y;
    plena_vram_alloc(&va, 1, 64, "x", &x, NULL);
    plena_vram_alloc(&va, 1, 64, "y", &y, NULL);
    plena_vram_release(&va, mk);
    assert_int_equal(plena_vram_live_elems(&va), 4 * 4096);
    plena_vram_free(&va, &c);
    plena_vram_free(&va, &d);
    plena_vram_free(&va, &a);
    assert_int_equal(va.top, 0);
    assert_int_equal(va.n_free, 0);
    /* capacity */
    struct plena_gen_machine small = m;
    small.vram_elems = 8192;
    struct plena_vram vb;
    plena_vram_init(&vb, &small);
    assert_int_equal(plena_vram_alloc(&vb, 64, 64, "one", &a, NULL), 0);
    assert_int_equal(plena_vram_alloc(&vb, 64, 64, "two", &b, NULL), 0);
    struct plena_err err;
    plena_err_clear(&err);
    assert_int_equal(plena_vram_alloc(&vb, 1, 64, "three", &c, &err), PLENA_E_INPUT);
    assert_int_equal(err.code, PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "three"));
    /* the settings key that sizes VRAM */
    assert_non_null(strstr(err.msg, "capacity 8192 (VECTOR_SRAM_SIZE x VLEN)"));
    plena_vram_fini(&vb);
    plena_vram_fini(&va);
}

static void test_hbm_window(void **state)
{
    (void)state;
    struct plena_hbm_alloc h = {(1ull << 32) - 128, 64};
    /* a table of 1 KiB would straddle the 4 GiB boundary: moved */
    assert_int_equal(plena_hbm_place(&h, 1024, 1), 1ull << 32);
    struct plena_hbm_alloc h2 = {(1ull << 32) - 128, 64};
    assert_int_equal(plena_hbm_place(&h2, 1024, 0), (1ull << 32) - 128);
}

/* ---- emitters ---- */

static void test_polymorphic_stage_masks(void **state)
{
    (void)state;
    struct env e;
    env_init(&e, 4);
    struct plena_tensor x;
    assert_int_equal(plena_vram_alloc(&e.va, 4, 64, "x", &x, NULL), 0);
    /* allowed masks of docs/lowering.md "Builder" */
    const unsigned zero = 1u << PLENA_STAGE_RESIDUAL_SETUP | 1u << PLENA_STAGE_ACCUMULATOR_INIT |
                          1u << PLENA_STAGE_GATHER | 1u << PLENA_STAGE_SHARED_EXPERT_PROJECTION;
    const unsigned copy =
        1u << PLENA_STAGE_RESIDUAL_SETUP | 1u << PLENA_STAGE_GATHER | 1u << PLENA_STAGE_ROUTER_TOPK;
    const unsigned res = 1u << PLENA_STAGE_RESIDUAL_SETUP;
    const unsigned act =
        1u << PLENA_STAGE_EXPERT_ACTIVATION | 1u << PLENA_STAGE_SHARED_EXPERT_ACTIVATION;
    const unsigned bc =
        1u << PLENA_STAGE_EXPERT_ROUTE_WEIGHT | 1u << PLENA_STAGE_SHARED_EXPERT_GATE;
    const unsigned proj = 1u << PLENA_STAGE_ROUTER_TOPK | 1u << PLENA_STAGE_EXPERT_WEIGHT_PREFETCH |
                          1u << PLENA_STAGE_EXPERT_PROJECTION |
                          1u << PLENA_STAGE_SHARED_EXPERT_PROJECTION;
    for (int s = 0; s < PLENA_STAGE_COUNT; s++) {
        enum plena_stage st = (enum plena_stage)s;
        for (int which = 0; which < 8; which++) {
            struct env f;
            env_init(&f, 4);
            f.c.va = &e.va;
            int rc = 0;
            unsigned mask = 0;
            switch (which) {
            case 0: rc = plena_moe_true_zero_rows(&f.c, st, &x, 0, 4), mask = zero; break;
            case 1: rc = plena_moe_fp_zero_row_init(&f.c, st), mask = zero; break;
            case 2: rc = plena_emit_copy_rows(&f.c, st, &x, 0, &x, 0, 1), mask = copy; break;
            case 3: rc = plena_emit_rmsnorm_rows(&f.c, st, &x, 1, 69, 70), mask = res; break;
            case 4: rc = plena_emit_mul_rows_by_row(&f.c, st, &x, 1, &x), mask = res; break;
            case 5:
                rc = plena_moe_expert_activation(&f.c, st, PLENA_ACT_STANDARD_SWIGLU, &x, &x, &x, 1,
                                                 64),
                mask = act;
                break;
            case 6:
                rc = plena_moe_broadcast_row_weights(&f.c, st, &x, 0, 1, 0, 100, 1), mask = bc;
                break;
            case 7: {
                struct plena_proj_stages ps = {st, st, st};
                struct plena_proj pj = {.x = &x,
                                        .rows = 1,
                                        .w_base = 0,
                                        .K_p = 64,
                                        .N_p = 64,
                                        .y = &x,
                                        .chunk_tiles = 4};
                rc = plena_emit_projection(&f.c, &ps, &pj);
                mask = proj;
                break;
            }
            }
            if (mask >> s & 1) {
                assert_int_equal(rc, 0);
                assert_true(f.p.n_insns > 0);
                for (size_t i = 0; i < f.p.n_items; i++)
                    if (f.p.items[i].kind == PLENA_ITEM_INSN)
                        assert_int_equal(f.p.items[i].stage, s);
            } else {
                assert_int_equal(rc, PLENA_E_INPUT);
                assert_int_equal(f.p.reason, PLENA_GEN_STAGE);
                assert_int_equal(f.p.n_items, 0);
            }
            f.c.va = &f.va;
            env_fini(&f);
        }
    }
    env_fini(&e);
}

/* ---- layer ---- */

static void cfg_for(const char *name, uint32_t blen, struct plena_moe_cfg *cfg)
{
    const struct plena_moe_model *m = plena_model_preset_find(name);
    assert_non_null(m);
    struct plena_gen_machine gm = machine(blen);
    plena_moe_cfg_from_model(m, &gm, cfg);
}

static int gen(const struct plena_moe_cfg *cfg, uint32_t T, struct plena_prog *p,
               struct plena_moe_emit_info *info)
{
    struct plena_err err;
    plena_err_clear(&err);
    int rc = plena_moe_generate(cfg, T, p, info, &err);
    if (rc) print_error("generate %s T=%u: %s\n", cfg->name, T, err.msg);
    return rc;
}

static void test_every_preset_emits(void **state)
{
    (void)state;
    for (unsigned i = 0; i < plena_model_preset_count(); i++) {
        const struct plena_moe_model *m = plena_model_preset_at(i);
        if (!m->is_tiny) continue;
        struct plena_moe_cfg cfg;
        cfg_for(m->name, 4, &cfg);
        struct plena_prog p;
        struct plena_moe_emit_info info;
        assert_int_equal(gen(&cfg, 4, &p, &info), 0);
        /* no instruction is billed to 'other' */
        assert_int_equal(info.static_count[PLENA_STAGE_OTHER], 0);
        char *s = render(&p);
        char hdr[200];
        snprintf(hdr, sizeof hdr, "; plena moe preset=%s T=4 E=%u k=%u\n", m->name, cfg.E, cfg.k);
        assert_memory_equal(s, hdr, strlen(hdr));
        int has_lowering = strstr(s, "; @routed_lowering=pair_major\n") != NULL;
        assert_int_equal(has_lowering, cfg.routing != PLENA_ROUTING_NONE);
        plena_free(s);
        plena_prog_free(&p);
    }
}

static size_t count_op(const struct plena_prog *p, unsigned op)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_items; i++)
        if (p->items[i].kind == PLENA_ITEM_INSN && p->items[i].insn.op == op) n++;
    return n;
}

/* The program of preset for T = 4 with the top-k register encoding forced. */
static void gen_forced_register(const char *preset, struct plena_prog *p,
                                struct plena_moe_emit_info *info)
{
    struct plena_moe_cfg cfg;
    cfg_for(preset, 4, &cfg);
    cfg.topk_policy = PLENA_TOPK_FORCE_REGISTER;
    assert_int_equal(gen(&cfg, 4, p, info), 0);
}

static void test_topk_encodings(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        enum plena_topk_encoding enc;
        int rmask;
        uint32_t packed;
    } rows[] = {
        {"tiny-route-32x4", PLENA_TOPK_ENC_RMASK0, 0, 0},
        {"tiny-route-128x8", PLENA_TOPK_ENC_RMASK1, 1, 0},
        {"tiny-route-16x1", PLENA_TOPK_ENC_REGISTER, 15, 4097},
        {"tiny-route-60x4", PLENA_TOPK_ENC_REGISTER, 15, 15364},
        {"tiny-route-64x6", PLENA_TOPK_ENC_REGISTER, 15, 16390},
        {"tiny-route-256x8", PLENA_TOPK_ENC_REGISTER, 15, 65544},
    };
    for (unsigned i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct plena_moe_cfg cfg;
        cfg_for(rows[i].name, 4, &cfg);
        struct plena_prog p;
        struct plena_moe_emit_info info;
        assert_int_equal(gen(&cfg, 4, &p, &info), 0);
        assert_int_equal(info.topk_encoding, rows[i].enc);
        assert_int_equal(info.topk_rmask, rows[i].rmask);
        assert_int_equal(info.topk_packed, rows[i].packed);
        uint32_t *w;
        size_t n;
        assert_int_equal(plena_prog_words(&p, &w, &n), 0);
        size_t n_set = 0, n_topk = 0;
        for (size_t j = 0; j < n; j++) {
            if ((w[j] & 0x3F) == 0x38) {
                n_set++;
                /* preceded by the load of the packed value into the same register */
                unsigned rd = (w[j] >> 6) & 15;
                assert_true(j > 0);
                assert_int_equal(w[j - 1], (rows[i].packed << 14) | (0u << 10) | (rd << 6) | 0x22);
            }
            if ((w[j] & 0x3F) == 0x37) {
                n_topk++;
                assert_int_equal((w[j] >> 18) & 15, (unsigned)rows[i].rmask);
            }
        }
        assert_int_equal(n_set, rows[i].rmask == 15 ? info.map.n_blocks : 0);
        assert_int_equal(n_topk, info.map.n_blocks);
        plena_free(w);
        plena_prog_free(&p);
    }
    /* forced register for the rmask shapes */
    struct plena_prog p;
    struct plena_moe_emit_info info;
    gen_forced_register("tiny-route-32x4", &p, &info);
    assert_int_equal(info.topk_packed, 8196);
    plena_prog_free(&p);
    gen_forced_register("tiny-route-128x8", &p, &info);
    assert_int_equal(info.topk_packed, 32776);
    assert_int_equal(count_op(&p, PLENA_OP_C_SET_TOPK_REG), 1);
    plena_prog_free(&p);
    /* fixed routing: no router instructions */
    struct plena_moe_cfg cfg;
    cfg_for("tiny-fixed", 4, &cfg);
    assert_int_equal(gen(&cfg, 4, &p, &info), 0);
    assert_int_equal(info.topk_encoding, PLENA_TOPK_ENC_NONE);
    assert_int_equal(info.static_count[PLENA_STAGE_ROUTER_TOPK], 0);
    assert_int_equal(count_op(&p, PLENA_OP_V_TOPK), 0);
    plena_prog_free(&p);
}

static void test_fault_topk_shift(void **state)
{
    (void)state;
    struct plena_moe_cfg cfg;
    cfg_for("tiny-route-256x8", 4, &cfg);
    cfg.fault = PLENA_FAULT_TOPK_SHIFT_7;
    struct plena_prog p;
    struct plena_moe_emit_info info;
    assert_int_equal(gen(&cfg, 4, &p, &info), 0);
    uint32_t *w;
    size_t n;
    plena_prog_words(&p, &w, &n);
    int found = 0;
    for (size_t j = 1; j < n; j++)
        if ((w[j] & 0x3F) == 0x38) found = (w[j - 1] >> 14) == 32776;
    assert_true(found);
    plena_free(w);
    plena_prog_free(&p);
}

static void test_static_sizes_constant_in_T(void **state)
{
    (void)state;
    struct plena_moe_cfg cfg;
    struct plena_prog p1, p2;
    struct plena_moe_emit_info i1, i2;
    /* shared gate: T = 1 and T = 512 */
    cfg_for("tiny-qwen2-gated", 4, &cfg);
    assert_int_equal(gen(&cfg, 1, &p1, &i1), 0);
    assert_int_equal(gen(&cfg, 512, &p2, &i2), 0);
    assert_int_equal(i1.map.n_blocks, 1);
    assert_int_equal(i2.map.n_blocks, 1);
    assert_true(i1.gate_static > 0);
    assert_int_equal(i1.gate_static, i2.gate_static);
    assert_int_equal(i1.static_count[PLENA_STAGE_SHARED_EXPERT_GATE],
                     i2.static_count[PLENA_STAGE_SHARED_EXPERT_GATE]);
    plena_prog_free(&p1);
    plena_prog_free(&p2);
    /* routed section, looped form: T = 2 and T = 16 */
    cfg_for("tiny-ds-fused", 4, &cfg);
    assert_int_equal(gen(&cfg, 2, &p1, &i1), 0);
    assert_int_equal(gen(&cfg, 16, &p2, &i2), 0);
    assert_int_equal(i1.pair_form, PLENA_PAIRS_LOOPED);
    assert_int_equal(i1.routed_static, i2.routed_static);
    plena_prog_free(&p1);
    plena_prog_free(&p2);
    /* the unrolled form grows with T */
    cfg.loop_policy = PLENA_LOOPS_UNROLL_PAIRS;
    assert_int_equal(gen(&cfg, 2, &p1, &i1), 0);
    assert_int_equal(gen(&cfg, 4, &p2, &i2), 0);
    assert_int_equal(i1.pair_form, PLENA_PAIRS_UNROLLED);
    assert_true(i2.routed_static > i1.routed_static);
    /* unrolled pairs carry their pair id */
    char *s = render(&p1);
    assert_non_null(strstr(s, "@pair=11\n"));
    assert_null(strstr(s, "@pair=12\n"));
    plena_free(s);
    plena_prog_free(&p1);
    plena_prog_free(&p2);
}

static void test_memory_abi(void **state)
{
    (void)state;
    uint64_t diff[2];
    uint32_t Ts[2] = {2, 16};
    for (int i = 0; i < 2; i++) {
        struct plena_moe_cfg cfg;
        cfg_for("tiny-ds-fused", 4, &cfg);
        struct plena_prog p;
        plena_prog_init(&p, cfg.m.max_loop, NULL);
        struct plena_vram va;
        plena_vram_init(&va, &cfg.m);
        struct plena_ctx c = {.p = &p, .m = &cfg.m, .va = &va, .pair = PLENA_GEN_PAIR_NONE};
        struct plena_moe_emit_info info;
        assert_int_equal(plena_moe_emit_layer(&c, &cfg, Ts[i], &info), 0);
        unsigned n_vram = 0;
        uint64_t abi = 0;
        for (unsigned j = 0; j < info.n_abi; j++)
            if (info.abi[j].space == PLENA_SPACE_VRAM) {
                n_vram++;
                uint64_t e = (uint64_t)info.abi[j].prow * info.abi[j].pcol;
                abi += (e + 4095) / 4096 * 4096;
            }
        assert_int_equal(va.n_live, n_vram);
        assert_int_equal(plena_vram_live_elems(&va), abi);
        assert_int_equal(info.abi_elems, abi);
        diff[i] = info.vram_peak - abi;
        assert_true(diff[i] > 0);
        plena_vram_fini(&va);
        plena_prog_free(&p);
    }
    assert_int_equal(diff[0], diff[1]);
}

/* C1 (docs/lowering.md "Cost accounting"): M_MM / H_PREFETCH_M of routed and shared programs */
static void c1_counts(uint32_t blen, int routed, uint32_t T, uint64_t *mm, uint64_t *pf)
{
    struct plena_moe_cfg cfg;
    cfg_for(routed ? "tiny-fixed" : "tiny-ds-shared", blen, &cfg);
    cfg.m.blen = blen;
    cfg.H = cfg.I = 64;
    if (routed) {
        cfg.k = 2;
        cfg.Is = 0;
    } else {
        cfg.Is = 64;
    }
    struct plena_prog p;
    struct plena_moe_emit_info info;
    assert_int_equal(gen(&cfg, T, &p, &info), 0);
    *mm = info.dyn_op[PLENA_OP_M_MM];
    *pf = info.dyn_op[PLENA_OP_H_PREFETCH_M];
    if (routed) {
        assert_int_equal(*mm, info.dyn_count[PLENA_STAGE_EXPERT_PROJECTION] > 0 ? *mm : 0);
    }
    plena_prog_free(&p);
}

static void test_c1_cost_counts(void **state)
{
    (void)state;
    uint64_t mm, pf;
    static const uint32_t tok[4] = {1, 4, 16, 64};
    static const uint64_t routed64[4] = {6, 24, 96, 384};
    for (int i = 0; i < 4; i++) {
        c1_counts(64, 1, tok[i], &mm, &pf);
        assert_int_equal(mm, routed64[i]);
        assert_int_equal(pf, routed64[i]);
        c1_counts(64, 0, tok[i], &mm, &pf);
        assert_int_equal(mm, 3);
        assert_int_equal(pf, 3);
    }
    static const uint64_t routed4[3] = {96, 384, 1536}, routed4pf[3] = {6, 24, 96};
    for (int i = 0; i < 3; i++) {
        c1_counts(4, 1, tok[i], &mm, &pf);
        assert_int_equal(mm, routed4[i]);
        assert_int_equal(pf, routed4pf[i]);
    }
    static const uint32_t stok[3] = {1, 8, 64};
    static const uint64_t shared4[3] = {48, 96, 768};
    for (int i = 0; i < 3; i++) {
        c1_counts(4, 0, stok[i], &mm, &pf);
        assert_int_equal(mm, shared4[i]);
        assert_int_equal(pf, 3);
    }
}

static void test_faults_attribution(void **state)
{
    (void)state;
    struct plena_moe_cfg cfg;
    struct plena_prog p;
    struct plena_moe_emit_info info;
    /* A1: an unrouted program bills nothing to routed stages */
    cfg_for("tiny-qwen2-gated", 4, &cfg);
    assert_int_equal(gen(&cfg, 8, &p, &info), 0);
    for (int s = PLENA_STAGE_ROUTER_TOPK; s <= PLENA_STAGE_SCATTER_COMBINE; s++)
        assert_int_equal(info.static_count[s], 0);
    assert_true(info.static_count[PLENA_STAGE_SHARED_EXPERT_GATE] > 0);
    plena_prog_free(&p);
    /* SHARED_AS_ROUTED must make A1 fail */
    cfg.fault = PLENA_FAULT_SHARED_AS_ROUTED;
    assert_int_equal(gen(&cfg, 8, &p, &info), 0);
    assert_true(info.static_count[PLENA_STAGE_EXPERT_PROJECTION] > 0);
    plena_prog_free(&p);
    /* DROP_GATE_MUL removes the broadcast V_MUL_VF of the gate */
    cfg.fault = PLENA_FAULT_NONE;
    assert_int_equal(gen(&cfg, 8, &p, &info), 0);
    uint64_t with = info.static_count[PLENA_STAGE_SHARED_EXPERT_GATE];
    plena_prog_free(&p);
    cfg.fault = PLENA_FAULT_DROP_GATE_MUL;
    assert_int_equal(gen(&cfg, 8, &p, &info), 0);
    assert_true(info.static_count[PLENA_STAGE_SHARED_EXPERT_GATE] < with);
    plena_prog_free(&p);
    /* NO_MARKERS */
    cfg.fault = PLENA_FAULT_NO_MARKERS;
    assert_int_equal(gen(&cfg, 8, &p, &info), 0);
    char *s = render(&p);
    assert_null(strstr(s, "@stage="));
    plena_free(s);
    plena_prog_free(&p);
}

static void test_rejections(void **state)
{
    (void)state;
    struct plena_moe_cfg cfg;
    struct plena_prog p;
    struct plena_moe_emit_info info;
    struct plena_err err;
    cfg_for("tiny-fixed", 4, &cfg);
    plena_err_clear(&err);
    assert_int_equal(plena_moe_generate(&cfg, 0, &p, &info, &err), PLENA_E_INPUT);
    assert_int_equal(p.reason, PLENA_GEN_SHAPE);
    plena_prog_free(&p);
    cfg.k = 17;
    assert_int_equal(plena_moe_generate(&cfg, 4, &p, &info, NULL), PLENA_E_INPUT);
    assert_int_equal(p.reason, PLENA_GEN_TOPK);
    plena_prog_free(&p);
    cfg_for("tiny-fixed", 4, &cfg);
    cfg.H = 96;
    assert_int_equal(plena_moe_generate(&cfg, 4, &p, &info, NULL), PLENA_E_INPUT);
    assert_int_equal(p.reason, PLENA_GEN_SHAPE);
    plena_prog_free(&p);
    /* fixed routing beyond the SRAM capacity streams each block's table from
     * HBM: FP 1024 - 80 leaves 29 records of 32 weights, INT 1008 leaves 63
     * records of 16 ids, so a block holds 464 tokens (29 x 32 / 2) */
    cfg_for("tiny-fixed", 4, &cfg);
    assert_int_equal(plena_moe_generate(&cfg, 600, &p, &info, NULL), 0);
    assert_int_equal(info.map.pm_refill, 1);
    assert_int_equal(info.map.t_blk, 464);
    assert_int_equal(info.map.n_blocks, 2);
    plena_prog_free(&p);
}

static void test_token_blocks(void **state)
{
    (void)state;
    struct plena_moe_cfg cfg;
    cfg_for("tiny-ds-fused", 4, &cfg);
    cfg.force_tblk = 3;
    struct plena_prog p;
    struct plena_moe_emit_info info;
    assert_int_equal(gen(&cfg, 8, &p, &info), 0);
    assert_int_equal(info.map.t_blk, 3);
    assert_int_equal(info.map.n_blocks, 3);
    /* blocks at rows 0, 3, 6 with BLEN-rounded extents 4, 4, 4: rows up to 10 -> 12 */
    assert_int_equal(info.map.phys_rows, 12);
    plena_prog_free(&p);
    /* (128, 8) at 512 tokens: T_blk from the FP map: (1024 - 80) / 8 = 118 */
    cfg_for("tiny-route-128x8", 4, &cfg);
    assert_int_equal(gen(&cfg, 512, &p, &info), 0);
    assert_int_equal(info.map.t_blk, 118);
    assert_int_equal(info.map.n_blocks, 5);
    plena_prog_free(&p);
}

static void test_windowed_presets(void **state)
{
    (void)state;
    static const char *names[] = {"kimi-k2", "llama4-maverick", "deepseek-v3"};
    static const int windowed[] = {1, 1, 0};
    for (int i = 0; i < 3; i++) {
        struct plena_moe_cfg cfg;
        cfg_for(names[i], 4, &cfg);
        struct plena_prog p;
        struct plena_moe_emit_info info;
        assert_int_equal(gen(&cfg, 1, &p, &info), 0);
        assert_int_equal(info.map.windowed, windowed[i]);
        if (i == 0) assert_int_equal(info.map.stride, 16515072);
        if (i == 1) assert_int_equal(info.map.stride, 47185920);
        /* no table straddles a window unless windowed */
        for (int q = 0; q < 3; q++) {
            uint64_t b = info.map.table[q];
            if (!windowed[i])
                assert_true((b % (1ull << 32)) + info.map.table_bytes <= (1ull << 32));
            else
                assert_int_equal(b % (1ull << 32), 0);
        }
        plena_prog_free(&p);
    }
}

/* F2 (docs/lowering.md "Layer steps" and "Checking a build"): the fused
 * shared gate/up tensor [H, n*m] is MX encoded in blocks of 8 along a row.
 * With n = 2, m = 12 (tiny-straddle) the block of columns 8..15 holds expert
 * 1's columns 8..11 and expert 2's columns 0..3; with m = 16 no block
 * straddles. Expert 1 carries amax 1.0, expert 2 the value 1.375 * 2^-8
 * (amax 2^8 apart). Per expert, 1.375 * 2^-8 has its own scale 2^-8 and e4m3
 * 1.375 (exact). Fused, the block scale is 2^0, y = 1.375 * 2^-8 = 0.6875 *
 * 2^-7 falls in PLENA-e4m3's subnormal binade: u = 8 * 0.6875 = 5.5, HR(5.5)
 * = 6 (tie to even), decoded 6/8 * 2^-7 = 1.5 * 2^-8. */
static void straddle_row(uint32_t n, uint32_t m, float *fused_dec, float *sep_dec)
{
    float row[64] = {0}, part[64];
    uint8_t codes[64], scales[8];
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t c = 0; c < m; c++)
            row[i * m + c] = i == 0 ? (c % 2 ? -1.0f : 1.0f) : 1.375f * 0x1p-8f;
    plena_num_mx_encode_row(PLENA_MX_PLENA, PLENA_MX_HOST, row, 64, 8, codes, scales);
    plena_num_mx_decode_row(PLENA_MX_PLENA, codes, scales, 64, 8, fused_dec);
    for (uint32_t i = 0; i < n; i++) {
        memset(part, 0, sizeof part);
        memcpy(part, row + i * m, m * sizeof *part);
        plena_num_mx_encode_row(PLENA_MX_PLENA, PLENA_MX_HOST, part, 64, 8, codes, scales);
        float dec[64];
        plena_num_mx_decode_row(PLENA_MX_PLENA, codes, scales, 64, 8, dec);
        memcpy(sep_dec + i * m, dec, m * sizeof *dec);
    }
}

static void test_f2_mx_straddle(void **state)
{
    (void)state;
    const struct plena_moe_model *st = plena_model_preset_find("tiny-straddle");
    assert_non_null(st);
    assert_int_equal(st->n_shared, 2);
    assert_int_equal(st->moe_inter, 12);
    assert_int_equal(st->shared_inter, plena_model_fused_shared_width(2, 12));
    float fused[64], sep[64];
    /* m = 12: expert 2's columns 0..3 share expert 1's block */
    straddle_row(st->n_shared, st->moe_inter, fused, sep);
    for (uint32_t c = 0; c < 24; c++) {
        int straddling = c >= 12 && c < 16;
        float want_sep = c < 12 ? (c % 2 ? -1.0f : 1.0f) : 1.375f * 0x1p-8f;
        assert_true(sep[c] == want_sep);
        assert_true(fused[c] == (straddling ? 1.5f * 0x1p-8f : want_sep));
    }
    /* m = 16 control: blocks align with the experts, fused == separate */
    straddle_row(2, 16, fused, sep);
    assert_memory_equal(fused, sep, 32 * sizeof *fused);
    assert_true(fused[16] == 1.375f * 0x1p-8f);
}

/* plena_gen_capacity_check (docs/lowering.md "Token blocks"): requirements counted by hand
 * from the FP/INT SRAM maps of docs/lowering.md "Memory ABI" (VLEN 64 + 16 constants + T_blk * k
 * route weights; T_blk * k ids + 16 spill slots). */
static void test_capacity_check(void **state)
{
    (void)state;
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    struct plena_gen_capacity cap;
    struct plena_err err;
    plena_err_clear(&err);
    const struct plena_moe_model *r128 = plena_model_preset_find("tiny-route-128x8");
    m.fp_depth = 100; /* (100 - 80) / 8 = 2 tokens per block */
    assert_int_equal(plena_gen_capacity_check(r128, &m, 8, &cap, &err), 0);
    assert_int_equal(cap.t_blk, 2);
    assert_int_equal(cap.fp_need, 80 + 2 * 8);
    assert_int_equal(cap.fp_limit, 100);
    assert_int_equal(cap.int_need, 2 * 8 + 16);
    assert_int_equal(cap.int_limit, 1024);
    assert_true(cap.vram_need > 0 && cap.vram_need <= cap.vram_limit);
    assert_true(cap.n_insns > 0 && cap.hbm_need > 0);
    m.fp_depth = 87; /* one token needs 88 */
    assert_int_equal(plena_gen_capacity_check(r128, &m, 8, &cap, &err), PLENA_E_INPUT);
    assert_int_equal(cap.reason, PLENA_GEN_SRAM);
    assert_non_null(strstr(err.msg, "FP SRAM"));
    assert_non_null(strstr(err.msg, "needs 88 entries"));
    assert_non_null(strstr(err.msg, "limit 87"));
    assert_non_null(strstr(err.msg, "model.top_k"));
    /* one expert larger than the 4 GiB HBM window: refused, not a division
     * by zero (65536 x 65536 MX = 4.5 GiB) */
    struct plena_moe_model huge = *r128;
    huge.hidden = 65536;
    huge.moe_inter = 65536;
    plena_gen_machine_default(&m);
    plena_err_clear(&err);
    assert_int_equal(plena_gen_capacity_check(&huge, &m, 1, &cap, &err), PLENA_E_INPUT);
    assert_int_equal(cap.reason, PLENA_GEN_SHAPE);
    assert_non_null(strstr(err.msg, "needs 4831838208 bytes"));
    assert_non_null(strstr(err.msg, "4 GiB HBM window"));
    /* invalid shapes are input errors (exit 3), not failed jobs (they were 1) */
    struct plena_moe_model odd = *r128;
    odd.hidden = 96;
    plena_gen_machine_default(&m);
    assert_int_equal(plena_moe_build_check_model(&odd, &m, NULL), PLENA_E_INPUT);
    odd = *r128;
    odd.top_k = odd.num_experts + 1;
    assert_int_equal(plena_moe_build_check_model(&odd, &m, NULL), PLENA_E_INPUT);
    /* a width past PLENA_MODEL_MAX_WIDTH is refused by the model check */
    huge.moe_inter = PLENA_MODEL_MAX_WIDTH + 1;
    plena_err_clear(&err);
    assert_int_equal(plena_model_validate(&huge, 64, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "moe_intermediate_size 16777217: expected at most 16777216"));
    /* MRAM: at 3 tiles tiny-ksplit's GEMM router re-streams its 5 K tiles of
     * H = 320, and the experts' K chunk of C = 4 tiles is what does not fit */
    plena_gen_machine_default(&m);
    m.mram_tiles = 3;
    plena_err_clear(&err);
    assert_int_equal(
        plena_gen_capacity_check(plena_model_preset_find("tiny-ksplit"), &m, 2, &cap, &err),
        PLENA_E_INPUT);
    assert_int_equal(cap.reason, PLENA_GEN_SHAPE);
    assert_non_null(strstr(err.msg, "MRAM"));
    assert_non_null(strstr(err.msg, "needs 4 tiles"));
    assert_non_null(strstr(err.msg, "limit 3 tiles"));
    assert_non_null(strstr(err.msg, "chunk size C"));
    /* at 1 tile the router cannot re-stream (one resident and one streaming slot at least) */
    m.mram_tiles = 1;
    plena_err_clear(&err);
    assert_int_equal(
        plena_gen_capacity_check(plena_model_preset_find("tiny-ksplit"), &m, 2, &cap, &err),
        PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "needs 5 tiles"));
    assert_non_null(strstr(err.msg, "the router streams all K tiles"));
    /* VRAM: the requirement quoted is the allocator's peak of a fitting run */
    plena_gen_machine_default(&m);
    const struct plena_moe_model *ds = plena_model_preset_find("tiny-ds-shared");
    assert_int_equal(plena_gen_capacity_check(ds, &m, 8, &cap, NULL), 0);
    uint64_t need = cap.vram_need;
    m.vram_elems = need - 1;
    plena_err_clear(&err);
    assert_int_equal(plena_gen_capacity_check(ds, &m, 8, &cap, &err), PLENA_E_INPUT);
    assert_int_equal(cap.reason, PLENA_GEN_VRAM);
    char want[96];
    snprintf(want, sizeof want, "need %llu elements", (unsigned long long)need);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "VRAM"));
    assert_non_null(strstr(err.msg, "model.hidden_size"));
    m.vram_elems = need;
    assert_int_equal(plena_gen_capacity_check(ds, &m, 8, &cap, NULL), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_render_markers),
    cmocka_unit_test(test_comment_rules),
    cmocka_unit_test(test_legalisation),
    cmocka_unit_test(test_regs_take),
    cmocka_unit_test(test_vram_allocator),
    cmocka_unit_test(test_hbm_window),
    cmocka_unit_test(test_polymorphic_stage_masks),
    cmocka_unit_test(test_every_preset_emits),
    cmocka_unit_test(test_topk_encodings),
    cmocka_unit_test(test_fault_topk_shift),
    cmocka_unit_test(test_static_sizes_constant_in_T),
    cmocka_unit_test(test_memory_abi),
    cmocka_unit_test(test_c1_cost_counts),
    cmocka_unit_test(test_faults_attribution),
    cmocka_unit_test(test_rejections),
    cmocka_unit_test(test_token_blocks),
    cmocka_unit_test(test_windowed_presets),
    cmocka_unit_test(test_f2_mx_straddle),
    cmocka_unit_test(test_capacity_check),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
