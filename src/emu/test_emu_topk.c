/* V_TOPK and C_SET_TOPK_REG (docs/machine.md "C_SET_TOPK_REG and V_TOPK"): a
 * worked example with the dump bytes of docs/formats.md "Dumps", policies
 * 0/1/15 for several shapes, ties, NaN logits, and every trap of the pair.
 * Expected ids are chosen by hand; expected weights follow the documented
 * formula computed here in f32. */
#include "emu/test_util.h"

#include <math.h>

/* Step 3 of V_TOPK (docs/machine.md "C_SET_TOPK_REG and V_TOPK") for the
 * selected values v[0..k) in rank order. */
static void softmax_ref(const float *v, unsigned k, uint16_t *out)
{
    float ex[256], D = 0.0f;
    for (unsigned j = 0; j < k; j++) {
        float d = v[j] - v[0];
        ex[j] = (float)exp((double)d);
        D = j == 0 ? ex[0] : D + ex[j];
    }
    for (unsigned j = 0; j < k; j++)
        out[j] = B(isfinite(D) && D > 0 ? ex[j] / D : 0.0f);
}

/* Program: [optional packed TOPK load] V_TOPK gp1 (fp base), gp2 (logits),
 * gp3 (int base), policy. */
static struct plena_emu_result run_topk(struct plena_emu *e, uint32_t packed, unsigned policy,
                                        uint32_t fp_base, uint32_t vaddr, uint32_t int_base)
{
    struct tu_prog p = {.n = 0};
    if (packed) {
        if (packed < (1u << 18)) {
            LI(&p, 4, packed);
        } else {
            I(&p, S_LUI_INT, 4, 0, packed >> 12);
            I(&p, S_ADDI_INT, 4, 4, packed & 0xFFF);
        }
        R(&p, C_SET_TOPK_REG, 4, 0, 0);
    }
    LI(&p, 1, fp_base);
    LI(&p, 2, vaddr);
    LI(&p, 3, int_base);
    RM(&p, V_TOPK, 1, 2, 3, policy);
    return tu_run(e, &p);
}

static void check_topk(struct plena_emu *e, uint32_t fp_base, uint32_t int_base,
                       const uint32_t *ids, const float *vals, unsigned k)
{
    uint16_t w[256];
    softmax_ref(vals, k, w);
    for (unsigned j = 0; j < k; j++) {
        assert_int_equal(plena_emu_intsram_get(e, int_base + j), ids[j]);
        assert_int_equal(plena_emu_fpsram_get(e, fp_base + j), w[j]);
    }
}

static void test_worked_example(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    const float row[8] = {0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.0f, -0.0f, 0.0f};
    for (unsigned i = 0; i < 64; i++)
        tu_vset(e, i, i < 8 ? row[i] : 99.0f); /* lanes 8..63 are not read */
    struct plena_emu_result r = run_topk(e, 2051, 15, 10, 0, 12);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    assert_int_equal(plena_emu_fpsram_get(e, 10), 0x3ED8);
    assert_int_equal(plena_emu_fpsram_get(e, 11), 0x3ED8);
    assert_int_equal(plena_emu_fpsram_get(e, 12), 0x3E1F);
    assert_int_equal(plena_emu_intsram_get(e, 12), 1);
    assert_int_equal(plena_emu_intsram_get(e, 13), 3);
    assert_int_equal(plena_emu_intsram_get(e, 14), 5);
    char *dir = tu_tmpdir();
    assert_int_equal(plena_emu_write_dumps(e, dir, PLENA_DUMP_FPSRAM | PLENA_DUMP_INTSRAM, NULL),
                     0);
    size_t n;
    uint8_t *fp = tu_read(dir, "fpsram_dump.bin", &n);
    assert_int_equal(n, 2048);
    const uint8_t wfp[] = {0xD8, 0x3E, 0xD8, 0x3E, 0x1F, 0x3E};
    assert_memory_equal(fp + 20, wfp, 6);
    uint8_t *in = tu_read(dir, "intsram_dump.bin", &n);
    assert_int_equal(n, 4096);
    const uint8_t win[] = {1, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0};
    assert_memory_equal(in + 48, win, 12);
    free(fp);
    free(in);
    tu_rmrf(dir);
    free(dir);
    plena_emu_free(e);
}

static void test_policy0(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    for (unsigned i = 32; i < 64; i++)
        tu_vset(e, 64 + i, 100.0f); /* E = 32: lanes 32.. are not logits */
    tu_vset(e, 64 + 5, 3.0f);
    tu_vset(e, 64 + 17, 2.0f);
    tu_vset(e, 64 + 30, 1.0f);
    tu_vset(e, 64 + 9, 1.0f); /* tie with 30: lower index first */
    struct plena_emu_result r = run_topk(e, 0, 0, 0, 64, 0);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    const uint32_t ids[] = {5, 17, 9, 30};
    const float v[] = {3, 2, 1, 1};
    check_topk(e, 0, 0, ids, v, 4);
    plena_emu_free(e);
}

static void test_policy1(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    for (unsigned i = 0; i < 128; i++)
        tu_vset(e, 128 + i, -1.0f);
    tu_vset(e, 128 + 100, 5.0f); /* second logit row */
    tu_vset(e, 128 + 3, 4.0f);
    tu_vset(e, 128 + 127, 3.0f);
    struct plena_emu_result r = run_topk(e, 0, 1, 40, 128, 50);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    const uint32_t ids[] = {100, 3, 127, 0, 1, 2, 4, 5};
    const float v[] = {5, 4, 3, -1, -1, -1, -1, -1};
    check_topk(e, 40, 50, ids, v, 8);
    plena_emu_free(e);
}

/* Logit e = value f(e) for e < E; lanes >= E in the last row hold 1000. */
static void shape_case(unsigned E, unsigned k, unsigned top)
{
    struct plena_emu *e = tu_default();
    unsigned rows = (E + 63) / 64;
    for (unsigned i = 0; i < rows * 64; i++)
        tu_vset(e, 640 + i, i < E ? (float)((i * 37) % 23) * 0.25f : 1000.0f);
    tu_vset(e, 640 + top, 8.0f);
    struct plena_emu_result r = run_topk(e, E << 8 | k, 15, 200, 640, 300);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    /* independent ranking: selection by (value desc, index asc) */
    uint32_t ids[256];
    float v[256];
    int used[16384] = {0};
    for (unsigned j = 0; j < k; j++) {
        int best = -1;
        float bv = 0;
        for (unsigned i = 0; i < E; i++) {
            float x = i == top ? 8.0f : (float)((i * 37) % 23) * 0.25f;
            if (!used[i] && (best < 0 || x > bv)) best = (int)i, bv = x;
        }
        used[best] = 1;
        ids[j] = (uint32_t)best;
        v[j] = bv;
    }
    assert_int_equal(ids[0], top);
    check_topk(e, 200, 300, ids, v, k);
    /* nothing beyond k written */
    assert_int_equal(plena_emu_intsram_get(e, 300 + k), 0);
    assert_int_equal(plena_emu_fpsram_get(e, 200 + k), 0);
    plena_emu_free(e);
}

static void test_shapes(void **state)
{
    (void)state;
    shape_case(16, 1, 7);
    shape_case(60, 4, 59);
    shape_case(64, 6, 0);
    shape_case(256, 8, 255); /* four logit rows; expert 255 is row 3 lane 63 */
}

static void test_weight_one_and_ties(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    for (unsigned i = 0; i < 8; i++)
        tu_vset(e, i, 0.5f);
    struct plena_emu_result r = run_topk(e, 8 << 8 | 3, 15, 0, 0, 0);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    for (unsigned j = 0; j < 3; j++) {
        assert_int_equal(plena_emu_intsram_get(e, j), j);
        assert_int_equal(plena_emu_fpsram_get(e, j), 0x3EAB); /* bf16(1/3) */
    }
    /* k = 1: weight exactly 1.0 */
    tu_vset(e, 6, 0.75f);
    r = run_topk(e, 8 << 8 | 1, 15, 0, 0, 0);
    assert_int_equal(plena_emu_intsram_get(e, 0), 6);
    assert_int_equal(plena_emu_fpsram_get(e, 0), 0x3F80);
    plena_emu_free(e);
}

static void test_nan_logits(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    tu_vset(e, 0, NAN);
    tu_vset(e, 1, 1.0f);
    tu_vset(e, 2, NAN);
    tu_vset(e, 3, -INFINITY);
    struct plena_emu_result r = run_topk(e, 4 << 8 | 4, 15, 0, 0, 0);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    const uint32_t ids[] = {1, 3, 0, 2};
    const uint16_t w[] = {0x3F80, 0, 0, 0};
    for (unsigned j = 0; j < 4; j++) {
        assert_int_equal(plena_emu_intsram_get(e, j), ids[j]);
        assert_int_equal(plena_emu_fpsram_get(e, j), w[j]);
    }
    /* all selected NaN: D is NaN, every weight 0 */
    plena_emu_fpsram_set(e, 10, 0x3F80);
    r = run_topk(e, 1 << 8 | 1, 15, 10, 0, 10);
    assert_int_equal(plena_emu_intsram_get(e, 10), 0);
    assert_int_equal(plena_emu_fpsram_get(e, 10), 0);
    plena_emu_free(e);
}

static void test_topk_traps(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    struct plena_emu *e = tu_new(&s);
    struct plena_emu_result r = run_topk(e, 0, 15, 0, 0, 0);
    assert_int_equal(r.status, PLENA_RUN_TRAPPED);
    assert_int_equal(r.trap.kind, PLENA_TRAP_TOPK_UNSET);
    assert_int_equal(r.trap.pc, 3);
    assert_non_null(strstr(r.trap.detail, "C_SET_TOPK_REG"));
    r = run_topk(e, 0, 7, 0, 0, 0);
    assert_int_equal(r.trap.kind, PLENA_TRAP_BAD_OPERAND);
    const uint32_t bad[] = {8 << 8 | 0, 4 << 8 | 5, 1, 16384u << 8 | 1};
    for (unsigned i = 0; i < 4; i++) {
        r = run_topk(e, bad[i], 15, 0, 0, 0);
        assert_int_equal(r.status, PLENA_RUN_TRAPPED);
        assert_int_equal(r.trap.kind, PLENA_TRAP_TOPK_VALUE);
        assert_int_equal(r.trap.opcode, PLENA_OP_C_SET_TOPK_REG);
        assert_non_null(strstr(r.trap.detail, "C_SET_TOPK_REG"));
    }
    /* largest legal shape loads through S_LUI_INT + S_ADDI_INT */
    s.vector_sram_size = 512;
    plena_emu_free(e);
    e = tu_new(&s);
    r = run_topk(e, 4194056, 15, 0, 0, 0);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    /* all 2k indices are checked before any write */
    plena_emu_intsram_set(e, 1020, 77);
    r = run_topk(e, 8 << 8 | 8, 15, 0, 0, 1020);
    assert_int_equal(r.trap.kind, PLENA_TRAP_SRAM_OUT_OF_RANGE);
    assert_int_equal(plena_emu_intsram_get(e, 1020), 77);
    plena_emu_fpsram_set(e, 1020, 0x1234);
    r = run_topk(e, 8 << 8 | 8, 15, 1020, 0, 0);
    assert_int_equal(r.trap.kind, PLENA_TRAP_SRAM_OUT_OF_RANGE);
    assert_int_equal(plena_emu_fpsram_get(e, 1020), 0x1234);
    assert_int_equal(plena_emu_intsram_get(e, 0), 0); /* int ids not written either */
    /* logit rows beyond VRAM */
    r = run_topk(e, 128 << 8 | 1, 15, 0, 511 * 64, 0);
    assert_int_equal(r.trap.kind, PLENA_TRAP_VRAM_OUT_OF_RANGE);
    plena_emu_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_policy0),
        cmocka_unit_test(test_policy1),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_weight_one_and_ties),
        cmocka_unit_test(test_nan_logits),
        cmocka_unit_test(test_topk_traps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
