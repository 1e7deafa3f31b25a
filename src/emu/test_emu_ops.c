/* Semantics tests per opcode group (docs/machine.md "Matrix unit", "Vector
 * unit", "Scalar unit" and "Traps"): scalar int and FP, vector element-wise
 * ops with masks and their NaN/-0 rules, V_SHFT_V, reductions, S_MAP_V_FP,
 * matrix ops and write-outs, and the fast matrix kernel against the scalar
 * reference. Expected values are hand-computed or computed by independent
 * loops in the test. */
#include "emu/test_util.h"
#include "emu/emu_internal.h"

#include <math.h>

static void test_int_ops(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 5);
    I(&p, S_LUI_INT, 2, 0, 0xFFFFF);  /* 0xFFFFF000 */
    I(&p, S_ADDI_INT, 2, 2, 0xFFF);   /* 0xFFFFFFFF */
    I(&p, S_ADDI_INT, 3, 2, 1);       /* wraps to 0 */
    R(&p, S_SUB_INT, 4, 0, 1);        /* 0 - 5 */
    R(&p, S_MUL_INT, 5, 2, 2);        /* (2^32-1)^2 mod 2^32 = 1 */
    I(&p, S_LUI_INT, 6, 0, 0x3FFFFF); /* only imm bits 0..19 survive */
    R(&p, S_ADD_INT, 7, 2, 1);        /* 0xFFFFFFFF + 5 = 4 */
    I(&p, S_ST_INT, 1, 0, 7);         /* INT[7] = 5 */
    I(&p, S_LD_INT, 8, 0, 7);
    I(&p, S_ADDI_INT, 9, 0, 262143);
    tu_ok(e, &p);
    assert_int_equal(plena_emu_gp_get(e, 1), 5);
    assert_int_equal(plena_emu_gp_get(e, 2), 0xFFFFFFFFu);
    assert_int_equal(plena_emu_gp_get(e, 3), 0);
    assert_int_equal(plena_emu_gp_get(e, 4), 0xFFFFFFFBu);
    assert_int_equal(plena_emu_gp_get(e, 5), 1);
    assert_int_equal(plena_emu_gp_get(e, 6), 0xFFFFF000u);
    assert_int_equal(plena_emu_gp_get(e, 7), 4);
    assert_int_equal(plena_emu_intsram_get(e, 7), 5);
    assert_int_equal(plena_emu_gp_get(e, 8), 5);
    assert_int_equal(plena_emu_gp_get(e, 9), 262143);
    plena_emu_free(e);
}

static void test_fp_ops(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    const uint16_t pre[] = {0x3F80, 0x4000, 0x7FC0, 0x8000, 0x4080, 0xBF80};
    for (unsigned i = 0; i < 6; i++)
        plena_emu_fpsram_set(e, i, pre[i]);
    struct tu_prog p = {.n = 0};
    I(&p, S_LD_FP, 1, 0, 0); /* 1 */
    I(&p, S_LD_FP, 2, 0, 1); /* 2 */
    I(&p, S_LD_FP, 3, 0, 2); /* NaN */
    I(&p, S_LD_FP, 6, 0, 3); /* -0 */
    I(&p, S_LD_FP, 4, 0, 4); /* 4 */
    I(&p, S_LD_FP, 5, 0, 5); /* -1 */
    unsigned slot = 10;
#define FPOP(op, a, b)                                                                             \
    do {                                                                                           \
        R(&p, op, 7, a, b);                                                                        \
        I(&p, S_ST_FP, 7, 0, slot++);                                                              \
    } while (0)
    FPOP(S_ADD_FP, 1, 2);  /* 10: 3 */
    FPOP(S_SUB_FP, 1, 2);  /* 11: -1 */
    FPOP(S_MUL_FP, 2, 4);  /* 12: 8 */
    FPOP(S_MAX_FP, 3, 1);  /* 13: x NaN -> y = 1 */
    FPOP(S_MAX_FP, 1, 3);  /* 14: y NaN -> x = 1 */
    FPOP(S_MAX_FP, 6, 0);  /* 15: -0 vs +0 -> x = -0 */
    FPOP(S_RECI_FP, 4, 0); /* 16: 0.25 */
    FPOP(S_SQRT_FP, 4, 0); /* 17: 2 */
    FPOP(S_SQRT_FP, 5, 0); /* 18: NaN */
    FPOP(S_EXP_FP, 0, 0);  /* 19: exp(0) = 1 */
    FPOP(S_RECI_FP, 6, 0); /* 20: 1/-0 = -Inf */
    /* f0 destination: complete no-ops, even with invalid source fields */
    tu_emit(&p, PLENA_OP_S_ADD_FP, 0, 9, 12, 0, 0, 0);
    tu_emit(&p, PLENA_OP_S_EXP_FP, 0, 15, 0, 0, 0, 0);
    LI(&p, 9, 1); /* misaligned VRAM address: not validated for f0 */
    tu_emit(&p, PLENA_OP_V_RED_SUM, 0, 9, 0, 0, 0, 0);
    tu_emit(&p, PLENA_OP_V_RED_MAX, 0, 9, 0, 0, 0, 0);
    I(&p, S_ST_FP, 0, 0, slot++); /* 21: f0 still +0 */
    I(&p, S_LD_FP, 0, 0, 1);      /* S_LD_FP does write f0 */
    I(&p, S_ST_FP, 0, 0, slot++); /* 22: 2 */
    tu_ok(e, &p);
    const uint16_t want[] = {0x4040, 0xBF80, 0x4100, 0x3F80, 0x3F80, 0x8000, 0x3E80,
                             0x4000, 0x7FC0, 0x3F80, 0xFF80, 0x0000, 0x4000};
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(plena_emu_fpsram_get(e, 10 + i), want[i]);
    assert_int_equal(plena_emu_fp_get(e, 0), 0x4000);
    plena_emu_free(e);
}

static void test_fp_bad_operand(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 1);
    tu_emit(&p, PLENA_OP_S_ADD_FP, 1, 8, 2, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_BAD_OPERAND, 1);
    p.n = 0;
    tu_emit(&p, PLENA_OP_S_LD_FP, 9, 0, 0, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_BAD_OPERAND, 0);
    p.n = 0;
    tu_emit(&p, PLENA_OP_V_ADD_VF, 0, 0, 8, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_BAD_OPERAND, 0);
    plena_emu_free(e);
}

/* Rows used below: row 1 = a[i] = i, row 2 = b[i] = 2. */
static void setup_rows(struct plena_emu *e)
{
    for (unsigned i = 0; i < 64; i++) {
        tu_vset(e, 64 + i, (float)i);
        tu_vset(e, 128 + i, 2.0f);
    }
}

static void test_vector_elementwise(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    setup_rows(e);
    plena_emu_fpsram_set(e, 0, 0x4040); /* 3 */
    plena_emu_fpsram_set(e, 1, 0x7FC0); /* NaN */
    struct tu_prog p = {.n = 0};
    I(&p, S_LD_FP, 1, 0, 0);
    I(&p, S_LD_FP, 3, 0, 1);
    LI(&p, 1, 64);
    LI(&p, 2, 128);
    const enum plena_op ops[] = {PLENA_OP_V_ADD_VV, PLENA_OP_V_SUB_VV, PLENA_OP_V_MUL_VV,
                                 PLENA_OP_V_ADD_VF, PLENA_OP_V_SUB_VF, PLENA_OP_V_SUB_VF,
                                 PLENA_OP_V_MUL_VF, PLENA_OP_V_MAX_VF, PLENA_OP_V_MIN_VF};
    for (unsigned k = 0; k < 9; k++) {
        LI(&p, 3, 64 * (10 + k));
        int vf = k >= 3;
        tu_emit(&p, ops[k], 3, 1, vf ? 1 : 2, 0, k == 5 ? 1 : 0, 0);
    }
    /* masked: heads 0 and 2 active */
    LI(&p, 4, 5);
    R(&p, C_SET_V_MASK_REG, 4, 0, 0);
    LI(&p, 3, 64 * 19);
    RM(&p, V_ADD_VF, 3, 1, 1, 1);
    /* NaN scalar propagates through V_MAX_VF */
    LI(&p, 3, 64 * 20);
    R(&p, V_MAX_VF, 3, 1, 3);
    tu_ok(e, &p);
    for (unsigned i = 0; i < 64; i++) {
        float a = (float)i;
        assert_int_equal(plena_emu_vram_get(e, 64 * 10 + i), B(a + 2));
        assert_int_equal(plena_emu_vram_get(e, 64 * 11 + i), B(a - 2));
        assert_int_equal(plena_emu_vram_get(e, 64 * 12 + i), B(a * 2));
        assert_int_equal(plena_emu_vram_get(e, 64 * 13 + i), B(a + 3));
        assert_int_equal(plena_emu_vram_get(e, 64 * 14 + i), B(a - 3));
        if (i != 3) assert_int_equal(plena_emu_vram_get(e, 64 * 15 + i), B(3 - a));
        assert_int_equal(plena_emu_vram_get(e, 64 * 16 + i), B(a * 3));
        assert_int_equal(plena_emu_vram_get(e, 64 * 17 + i), B(i < 3 ? 3 : a));
        assert_int_equal(plena_emu_vram_get(e, 64 * 18 + i), B(i > 3 ? 3 : a));
        int active = (i / 16) == 0 || (i / 16) == 2;
        assert_int_equal(plena_emu_vram_get(e, 64 * 19 + i), B(active ? a + 3 : a));
        assert_int_equal(plena_emu_vram_get(e, 64 * 20 + i), 0x7FC0);
    }
    assert_int_equal(plena_emu_vram_get(e, 64 * 15 + 3), 0x8000); /* -(3 - 3) = -0.0 */
    plena_emu_free(e);
}

static void test_vector_special(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    /* row 3: exp inputs; row 4: reciprocal inputs; row 5: mul-by-zero inputs */
    const float ex[] = {0.0f, 100.0f, -100.0f, NAN};
    const float rc[] = {0.0f, -0.0f, 4.0f, 0.5f};
    const float mz[] = {NAN, INFINITY, -2.0f, 1.0f};
    for (unsigned i = 0; i < 4; i++) {
        tu_vset(e, 192 + i, ex[i]);
        tu_vset(e, 256 + i, rc[i]);
        tu_vset(e, 320 + i, mz[i]);
    }
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 192);
    LI(&p, 2, 64 * 30);
    R(&p, V_EXP_V, 2, 1, 0);
    LI(&p, 4, 2); /* only head 1 active */
    R(&p, C_SET_V_MASK_REG, 4, 0, 0);
    LI(&p, 2, 64 * 31);
    RM(&p, V_EXP_V, 2, 1, 0, 3); /* any non-zero rmask selects V_MASK */
    LI(&p, 1, 256);
    LI(&p, 2, 64 * 32);
    R(&p, V_RECI_V, 2, 1, 0);
    LI(&p, 1, 320);
    LI(&p, 2, 64 * 33);
    R(&p, V_MUL_VF, 2, 1, 0); /* times f0 = +0 */
    tu_ok(e, &p);
    const uint16_t w_exp[] = {0x3F80, 0x7EF9, 0x0000, 0x7FC0};  /* exp(88) = 0x7EF9 in BF16 */
    const uint16_t w_mexp[] = {0x0000, 0x42B0, 0xC2B0, 0x7FC0}; /* inactive: clamp(a) */
    const uint16_t w_rc[] = {0x7F80, 0xFF80, 0x3E80, 0x4000};
    const uint16_t w_mz[] = {0x7FC0, 0x7FC0, 0x8000, 0x0000};
    for (unsigned i = 0; i < 4; i++) {
        if (i != 2) assert_int_equal(plena_emu_vram_get(e, 64 * 30 + i), w_exp[i]);
        assert_int_equal(plena_emu_vram_get(e, 64 * 31 + i), w_mexp[i]);
        assert_int_equal(plena_emu_vram_get(e, 64 * 32 + i), w_rc[i]);
        assert_int_equal(plena_emu_vram_get(e, 64 * 33 + i), w_mz[i]);
    }
    /* exp(-88) = 6.05e-39 is an f32 subnormal; BF16 keeps 0x0042 */
    assert_int_equal(plena_emu_vram_get(e, 64 * 30 + 2), B((float)exp(-88.0)));
    /* lanes of head 1 in the masked row are active: exp(0) = 1 */
    assert_int_equal(plena_emu_vram_get(e, 64 * 31 + 16), 0x3F80);
    plena_emu_free(e);
}

static void test_shift(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    setup_rows(e);
    for (unsigned i = 0; i < 64; i++)
        tu_vset(e, 64 * 41 + i, 9.0f);
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 64);
    LI(&p, 2, 64 * 40);
    LI(&p, 3, 2);
    RM(&p, V_SHFT_V, 2, 1, 3, 1); /* rs3 ignored: never masked */
    LI(&p, 2, 64 * 41);
    LI(&p, 3, 64);
    R(&p, V_SHFT_V, 2, 1, 3);
    tu_ok(e, &p);
    for (unsigned i = 0; i < 64; i++) {
        assert_int_equal(plena_emu_vram_get(e, 64 * 40 + i), i < 2 ? 0 : B((float)(i - 2)));
        assert_int_equal(plena_emu_vram_get(e, 64 * 41 + i), 0);
    }
    plena_emu_free(e);
}

static void test_reductions(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    setup_rows(e);
    tu_vset(e, 192 + 5, NAN);
    plena_emu_fpsram_set(e, 0, 0x4040); /* 3 */
    plena_emu_fpsram_set(e, 1, 0x4000); /* 2 */
    plena_emu_fpsram_set(e, 2, 0x7FC0); /* NaN */
    plena_emu_fpsram_set(e, 3, 0x4080); /* 4 */
    struct tu_prog p = {.n = 0};
    for (unsigned r = 1; r <= 4; r++)
        I(&p, S_LD_FP, r, 0, r - 1);
    I(&p, S_LD_FP, 5, 0, 0);
    LI(&p, 1, 64);
    LI(&p, 2, 128);
    LI(&p, 3, 192);
    R(&p, V_RED_SUM, 1, 1, 0);     /* 3 + 2016 = 2019 -> BF16 2016 */
    RM(&p, V_RED_SUM, 5, 1, 0, 1); /* mask has no effect (deviation 6 fixed) */
    R(&p, V_RED_MAX, 2, 1, 0);     /* max(2, 63) = 63 */
    R(&p, V_RED_MAX, 3, 2, 0);     /* F NaN -> m = 2 */
    R(&p, V_RED_MAX, 4, 3, 0);     /* row has NaN -> unchanged 4 */
    tu_ok(e, &p);
    assert_int_equal(plena_emu_fp_get(e, 1), 0x44FC);
    assert_int_equal(plena_emu_fp_get(e, 5), 0x44FC);
    assert_int_equal(plena_emu_fp_get(e, 2), 0x427C);
    assert_int_equal(plena_emu_fp_get(e, 3), 0x4000);
    assert_int_equal(plena_emu_fp_get(e, 4), 0x4080);
    plena_emu_free(e);
}

static void test_map_v_fp(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    for (unsigned i = 0; i < 64; i++)
        plena_emu_fpsram_set(e, 100 + i, B(0.5f * (float)i));
    plena_emu_fpsram_set(e, 100, 0x7FC1); /* non-canonical NaN becomes 0x7FC0 */
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 64 * 7);
    LI(&p, 2, 90);
    I(&p, S_MAP_V_FP, 1, 2, 10);
    LI(&p, 2, 961); /* 961 + 64 > 1024 */
    I(&p, S_MAP_V_FP, 1, 2, 0);
    tu_trap(e, &p, PLENA_TRAP_SRAM_OUT_OF_RANGE, 4);
    assert_int_equal(plena_emu_vram_get(e, 64 * 7), 0x7FC0);
    for (unsigned i = 1; i < 64; i++)
        assert_int_equal(plena_emu_vram_get(e, 64 * 7 + i), B(0.5f * (float)i));
    plena_emu_free(e);
}

/* ---------------------------------------------------------------- matrix */

static float tval(unsigned r, unsigned c)
{
    return (float)((int)((r + 2 * c) % 7) - 3);
}
static float xval(unsigned i, unsigned r)
{
    return (float)((int)((r * 3 + i) % 5) - 2);
}

/* Tile 1 (base 4096) = tval; rows 8..11 (address 512) = xval rows 0..3. */
static void setup_matrix(struct plena_emu *e)
{
    for (unsigned r = 0; r < 64; r++)
        for (unsigned c = 0; c < 64; c++)
            plena_emu_mram_set(e, 4096 + r * 64 + c, tval(r, c));
    for (unsigned i = 0; i < 4; i++)
        for (unsigned r = 0; r < 64; r++)
            tu_vset(e, 512 + i * 64 + r, xval(i, r));
}

static void test_m_mm(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    setup_matrix(e);
    tu_vset(e, 64 * 20, 7.0f); /* outside the written lanes: must survive */
    for (unsigned i = 0; i < 4 * 64; i++)
        tu_vset(e, 64 * 30 + i, 1.0f); /* rows 30..33 */
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 4608); /* worked example: tile 1, columns 8..11 */
    LI(&p, 2, 512);
    R(&p, M_MM, 0, 1, 2);
    R(&p, M_MM, 0, 1, 2); /* accumulates: 2x */
    LI(&p, 3, 64 * 20 + 4);
    LI(&p, 4, 2); /* row stride 2: rows 20, 22, 24, 26 */
    I(&p, M_MM_WO, 3, 4, 0);
    LI(&p, 3, 64 * 30);
    I(&p, M_MM_WO, 3, 0, 8); /* rs1 field 0: stride 1; acc was cleared */
    tu_ok(e, &p);
    for (unsigned i = 0; i < 4; i++)
        for (unsigned j = 0; j < 4; j++) {
            int sum = 0;
            for (unsigned r = 0; r < 64; r++)
                sum += (int)xval(i, r) * (int)tval(r, 8 + j);
            assert_int_equal(plena_emu_vram_get(e, 64 * (20 + 2 * i) + 4 + j), B((float)(2 * sum)));
            assert_int_equal(plena_emu_vram_get(e, 64 * (30 + i) + 8 + j), 0);
            assert_int_equal(plena_emu_vram_get(e, 64 * (30 + i) + 12 + j), 0x3F80);
        }
    assert_int_equal(plena_emu_vram_get(e, 64 * 20), B(7.0f));
    assert_int_equal(plena_emu_vram_get(e, 64 * 21 + 4), 0); /* row 21 untouched */
    plena_emu_free(e);
}

static void test_m_tmm_mv_tmv(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    setup_matrix(e);
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 4096 + 4 * 64); /* M_TMM rows 4..7 of the tile */
    LI(&p, 2, 512);
    R(&p, M_TMM, 0, 2, 1); /* rs1 = vram, rs2 = mram */
    LI(&p, 3, 64 * 50);
    I(&p, M_MM_WO, 3, 0, 0);
    LI(&p, 1, 4104); /* M_MV: element-granular column offset 8 */
    R(&p, M_MV, 0, 1, 2);
    LI(&p, 3, 64 * 60);
    I(&p, M_MV_WO, 3, 0, 8);
    LI(&p, 1, 4096);
    R(&p, M_TMV, 0, 1, 2);
    LI(&p, 3, 64 * 61);
    I(&p, M_MV_WO, 3, 0, 0);
    tu_ok(e, &p);
    for (unsigned j = 0; j < 4; j++) {
        for (unsigned i = 0; i < 4; i++) {
            int sum = 0;
            for (unsigned r = 0; r < 64; r++)
                sum += (int)xval(i, r) * (int)tval(4 + j, r);
            assert_int_equal(plena_emu_vram_get(e, 64 * (50 + i) + j), B((float)sum));
        }
        int mv = 0, tmv = 0;
        for (unsigned r = 0; r < 64; r++) {
            mv += (int)xval(0, r) * (int)tval(r, 8 + j);
            tmv += (int)xval(0, r) * (int)tval(j, r);
        }
        assert_int_equal(plena_emu_vram_get(e, 64 * 60 + 8 + j), B((float)mv));
        assert_int_equal(plena_emu_vram_get(e, 64 * 61 + j), B((float)tmv));
    }
    plena_emu_free(e);
}

/* The fixed order: products rounded to f32, summed in increasing index.
 * 2^25 + 1 rounds back to 2^25, so the sequential sum is 0; any other order
 * (reverse, pairwise) gives 1. */
static void test_accumulation_order(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    plena_emu_mram_set(e, 0 * 64, 33554432.0f);
    plena_emu_mram_set(e, 1 * 64, 1.0f);
    plena_emu_mram_set(e, 2 * 64, 33554432.0f);
    tu_vset(e, 0, 1.0f);
    tu_vset(e, 1, 1.0f);
    tu_vset(e, 2, -1.0f);
    struct tu_prog p = {.n = 0};
    R(&p, M_MV, 0, 0, 0);
    LI(&p, 3, 64 * 5);
    I(&p, M_MV_WO, 3, 0, 0);
    tu_ok(e, &p);
    assert_int_equal(plena_emu_vram_get(e, 64 * 5), 0);
    plena_emu_free(e);
}

static float qval(unsigned s, unsigned l)
{
    return (float)((int)((s + l) % 3) - 1);
}
static float kval(unsigned r, unsigned k)
{
    return (float)((int)((r * k + r) % 5) - 2);
}

static void test_broadcast(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    s.vector_sram_size = 1024;
    struct plena_emu *e = tu_new(&s);
    for (unsigned r = 0; r < 64; r++)
        for (unsigned k = 0; k < 64; k++)
            plena_emu_mram_set(e, 4096 + r * 64 + k, kval(r, k));
    for (unsigned sr = 0; sr < 64; sr++)
        for (unsigned l = 0; l < 64; l++)
            tu_vset(e, sr * 64 + l, qval(sr, l));
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 4096 + 16); /* head offset h0 = 16 */
    LI(&p, 2, 0);
    R(&p, M_BMM, 0, 1, 2);
    LI(&p, 3, 64 * 64);
    I(&p, M_BMM_WO, 3, 0, 0); /* rows 64..319 */
    R(&p, M_BTMM, 0, 1, 2);
    LI(&p, 3, 64 * 320);
    I(&p, M_BMM_WO, 3, 0, 0); /* rows 320..575 */
    LI(&p, 4, 16);
    LI(&p, 1, 4096);
    LI(&p, 2, 64 * 3); /* query row s = 3 */
    R(&p, M_BMV, 4, 1, 2);
    LI(&p, 3, 64 * 600);
    I(&p, M_BMV_WO, 3, 0, 0);
    R(&p, M_BTMV, 4, 1, 2);
    LI(&p, 3, 64 * 610);
    I(&p, M_BMV_WO, 3, 0, 0);
    tu_ok(e, &p);
    for (unsigned b = 0; b < 4; b++)
        for (unsigned sr = 0; sr < 64; sr++)
            for (unsigned k = 0; k < 64; k += 7) {
                int inter = 0, contig = 0;
                for (unsigned h = 0; h < 16; h++) {
                    inter += (int)qval(sr, h * 4 + b) * (int)kval(16 + h, k);
                    contig += (int)qval(sr, b * 16 + h) * (int)kval(k, 16 + h);
                }
                assert_int_equal(plena_emu_vram_get(e, 64 * (64 + b * 64 + sr) + k),
                                 B(0.25f * (float)inter));
                assert_int_equal(plena_emu_vram_get(e, 64 * (320 + b * 64 + sr) + k),
                                 B(0.25f * (float)contig));
                if (sr == 3) {
                    assert_int_equal(plena_emu_vram_get(e, 64 * (600 + b) + k),
                                     B(0.25f * (float)inter));
                    assert_int_equal(plena_emu_vram_get(e, 64 * (610 + b) + k),
                                     B(0.25f * (float)contig));
                }
            }
    plena_emu_free(e);
}

static void test_matrix_traps(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    struct plena_emu *e = tu_new(&s);
    struct {
        enum plena_op op;
        unsigned rd;
        uint32_t m, v;
        enum plena_trap_kind k;
    } cases[] = {
        {PLENA_OP_M_MM, 0, 4096 + 4, 0, PLENA_TRAP_MATRIX_OFFSET},   /* not row-granular */
        {PLENA_OP_M_MM, 0, 4096 + 128, 0, PLENA_TRAP_MATRIX_OFFSET}, /* column 2 % BLEN */
        {PLENA_OP_M_MM, 0, 4 * 4096, 0, PLENA_TRAP_MRAM_OUT_OF_RANGE},
        {PLENA_OP_M_MM, 0, 0, 3, PLENA_TRAP_VRAM_MISALIGNED},
        {PLENA_OP_M_MM, 0, 0, 254 * 64, PLENA_TRAP_VRAM_OUT_OF_RANGE},
        {PLENA_OP_M_TMV, 0, 4097, 0, PLENA_TRAP_MRAM_MISALIGNED},
        {PLENA_OP_M_MV, 0, 64, 0, PLENA_TRAP_MATRIX_OFFSET},
        {PLENA_OP_M_MV, 0, 2, 0, PLENA_TRAP_MATRIX_OFFSET},
        {PLENA_OP_M_BMM, 1, 0, 0, PLENA_TRAP_BAD_OPERAND},
        {PLENA_OP_M_BMM, 0, 8, 0, PLENA_TRAP_MATRIX_OFFSET},
        {PLENA_OP_M_BTMM, 0, 64, 0, PLENA_TRAP_MATRIX_OFFSET},
    };
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct tu_prog p = {.n = 0};
        LI(&p, 1, cases[c].m);
        LI(&p, 2, cases[c].v);
        tu_emit(&p, cases[c].op, cases[c].rd, 1, 2, 0, 0, 0);
        tu_trap(e, &p, cases[c].k, 2);
    }
    /* M_MM_WO: vo % BLEN */
    struct tu_prog p = {.n = 0};
    LI(&p, 3, 2);
    I(&p, M_MM_WO, 3, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_MATRIX_OFFSET, 1);
    /* precise trap: the last of four rows is out of range, nothing is written */
    setup_matrix(e);
    p.n = 0;
    LI(&p, 1, 4096);
    LI(&p, 2, 512);
    R(&p, M_MM, 0, 1, 2);
    LI(&p, 3, 64 * 100);
    LI(&p, 4, 52); /* rows 100, 152, 204, 256 */
    I(&p, M_MM_WO, 3, 4, 0);
    tu_trap(e, &p, PLENA_TRAP_VRAM_OUT_OF_RANGE, 5);
    assert_int_equal(plena_emu_vram_get(e, 64 * 100), 0);
    plena_emu_free(e);
    /* geometry: BA * HLEN != MLEN */
    s.broadcast_amount = 2;
    e = tu_new(&s);
    p.n = 0;
    R(&p, M_BMM, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_GEOMETRY, 0);
    p.n = 0;
    I(&p, M_BMV_WO, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_GEOMETRY, 0);
    plena_emu_free(e);
}

/* The vectorised kernel must equal the scalar definition bit for bit. */
static void test_kernel_fast_vs_ref(void **state)
{
    (void)state;
    static float x[16 * 64], t[64 * 80], o1[16 * 80], o2[16 * 80];
    uint32_t seed = 12345;
    for (unsigned i = 0; i < sizeof x / sizeof x[0]; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = F(B((float)((int)(seed >> 8) % 20001 - 10000) / 997.0f));
    }
    for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = (float)((int)(seed >> 8) % 200001 - 100000) / 7919.0f;
    }
    const size_t cols[] = {1, 4, 5, 8, 16, 64};
    for (unsigned c = 0; c < 6; c++)
        for (size_t rows = 1; rows <= 16; rows *= 4) {
            emu_dot_block_ref(x, rows, 64, t, 80, cols[c], o1);
            emu_dot_block_fast(x, rows, 64, t, 80, cols[c], o2);
            assert_memory_equal(o1, o2, rows * cols[c] * sizeof(float));
        }
}

/* Run limits (plena_emu_set_limits): a runaway program (nested loops of
 * 4M x 30000 iterations, each inside MAX_LOOP_INSTRUCTIONS) stops as a trap
 * at exactly the instruction limit, at the first check after the stop flag,
 * and at the first check after the deadline; a later run without limits is
 * unaffected. It ran without any bound before. */
static void test_run_limits(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    I(&p, C_LOOP_START, 2, 0, 4000000);
    I(&p, C_LOOP_START, 3, 0, 30000);
    LI(&p, 1, 1);
    R(&p, C_LOOP_END, 3, 0, 0);
    R(&p, C_LOOP_END, 2, 0, 0);
    plena_emu_set_limits(e, 1000, 0, NULL);
    struct plena_emu_result r = tu_run(e, &p);
    assert_int_equal(r.status, PLENA_RUN_TRAPPED);
    assert_int_equal(r.trap.kind, PLENA_TRAP_INSTRUCTION_LIMIT);
    assert_int_equal(r.instructions_executed, 1000);
    assert_non_null(strstr(r.trap.detail, "--max-instructions"));
    volatile sig_atomic_t stop = 1;
    plena_emu_set_limits(e, 0, 0, &stop);
    r = tu_run(e, &p);
    assert_int_equal(r.trap.kind, PLENA_TRAP_INTERRUPTED);
    assert_int_equal(r.instructions_executed, 1u << 16); /* the first check */
    plena_emu_set_limits(e, 0, 1e-9, NULL);
    r = tu_run(e, &p);
    assert_int_equal(r.trap.kind, PLENA_TRAP_TIME_LIMIT);
    assert_int_equal(r.instructions_executed, 1u << 16);
    /* no limits: a short program completes */
    plena_emu_set_limits(e, 0, 0, NULL);
    struct tu_prog q = {.n = 0};
    I(&q, C_LOOP_START, 2, 0, 3);
    LI(&q, 1, 1);
    R(&q, C_LOOP_END, 2, 0, 0);
    tu_ok(e, &q);
    plena_emu_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_ops),
        cmocka_unit_test(test_fp_ops),
        cmocka_unit_test(test_fp_bad_operand),
        cmocka_unit_test(test_vector_elementwise),
        cmocka_unit_test(test_vector_special),
        cmocka_unit_test(test_shift),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_map_v_fp),
        cmocka_unit_test(test_m_mm),
        cmocka_unit_test(test_m_tmm_mv_tmv),
        cmocka_unit_test(test_accumulation_order),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_matrix_traps),
        cmocka_unit_test(test_kernel_fast_vs_ref),
        cmocka_unit_test(test_run_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
