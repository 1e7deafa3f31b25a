/* The emulator's fast paths against its scalar reference, bit for bit
 * (docs/numerics.md "BF16" and "Matrix accumulation order",
 * docs/machine.md "Matrix unit" and "Vector unit"): inline BF16 row conversions
 * vs plena_num_bf16_row_* on every BF16 pattern and on f32 tie points; every
 * matrix kernel family vs emu_dot_block_ref on many shapes and special values;
 * and whole random programs of vector and matrix ops run on a machine with
 * ref_paths set and on machines with the generic, AVX2 and AVX-512F kernels,
 * comparing all VRAM, FP registers and FP SRAM. The reference side is the plain
 * definition, never the code under test. */
#include "emu/emu_internal.h"
#include "emu/test_util.h"

#include <math.h>

static uint32_t rng(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static float f32_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* ------------------------------------------------------------- BF16 rows */

static void test_bf16_decode_all(void **state)
{
    (void)state;
    static uint16_t h[65536 + 7];
    static float a[65536 + 7], b[65536 + 7];
    for (uint32_t i = 0; i < 65536 + 7; i++)
        h[i] = (uint16_t)(i * 40503u);
    /* full length, then odd lengths and offsets (chunk tails) */
    size_t lens[] = {65536 + 7, 1, 15, 16, 17, 33};
    for (unsigned k = 0; k < 6; k++) {
        memset(a, 0x55, sizeof a);
        memset(b, 0x55, sizeof b);
        plena_num_bf16_row_to_f32(h + k, a, lens[k]);
        emu_bf16_row_to_f32(h + k, b, lens[k]);
        assert_memory_equal(a, b, sizeof a);
    }
}

static void test_bf16_encode_ties(void **state)
{
    (void)state;
    /* every upper half with the lower halves around the rounding decision:
     * exact, just below, tie, just above, all ones; NaN payloads of both
     * signs and all lengths land in here too (upper 0x7F80.. / 0xFF80..) */
    static const uint32_t low[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
    enum { N = 65536 * 6 };
    static float x[N + 5];
    static uint16_t a[N + 5], b[N + 5];
    for (uint32_t u = 0, n = 0; u < 65536; u++)
        for (unsigned k = 0; k < 6; k++)
            x[n++] = f32_of(u << 16 | low[k]);
    uint32_t s = 99;
    for (unsigned i = N; i < N + 5; i++)
        x[i] = f32_of(rng(&s));
    size_t lens[] = {N + 5, 3, 16, 31};
    for (unsigned k = 0; k < 4; k++) {
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        plena_num_bf16_row_from_f32(x + k, a, lens[k]);
        emu_bf16_row_from_f32(x + k, b, lens[k]);
        assert_memory_equal(a, b, sizeof a);
    }
    /* spot checks worked by hand, independent of num: tie to even, NaN */
    uint16_t o[4];
    float sp[4] = {f32_of(0x3F808000u), f32_of(0x3F818000u), f32_of(0xFFC12345u),
                   f32_of(0x7F7FFFFFu)};
    emu_bf16_row_from_f32(sp, o, 4);
    assert_int_equal(o[0], 0x3F80); /* tie, even kept */
    assert_int_equal(o[1], 0x3F82); /* tie, rounds up to even */
    assert_int_equal(o[2], 0x7FC0); /* any NaN */
    assert_int_equal(o[3], 0x7F80); /* max finite f32 rounds to +Inf */
}

/* -------------------------------------------------------- matrix kernels */

static const uint32_t specials[] = {
    0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
    0x7F800001u, 0x00000001u, 0x807FFFFFu, 0x00400000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
    0x00800000u, 0x3F800000u, 0xBF800001u, 0x5F000000u, 0x1F000000u,
};

/* Mostly finite values with full mantissas (so products round), some huge
 * and tiny ones (overflow, subnormal results), some specials. */
static float rand_f32(uint32_t *s, int specials_pct)
{
    uint32_t r = rng(s);
    if ((int)(r % 100) < specials_pct)
        return f32_of(specials[rng(s) % (sizeof specials / sizeof specials[0])]);
    uint32_t e = (r >> 8) % 16 == 0 ? (rng(s) % 254) + 1 : 120 + rng(s) % 14;
    return f32_of((r & 0x80000000u) | e << 23 | (rng(s) & 0x7FFFFFu));
}

static void check_kernel(int isa, size_t rows, size_t n, size_t cols, size_t ts, uint32_t *s,
                         int specials_pct)
{
    float *x = malloc(sizeof(float) * rows * n);
    float *t = malloc(sizeof(float) * n * ts);
    float *o1 = malloc(sizeof(float) * (rows * cols + 1));
    float *o2 = malloc(sizeof(float) * (rows * cols + 1));
    for (size_t i = 0; i < rows * n; i++)
        x[i] = rand_f32(s, specials_pct);
    for (size_t i = 0; i < n * ts; i++)
        t[i] = rand_f32(s, specials_pct);
    o1[rows * cols] = o2[rows * cols] = 42.0f; /* no write past the block */
    emu_dot_block_ref(x, rows, n, t, ts, cols, o1);
    emu_dot_block_isa(isa, x, rows, n, t, ts, cols, o2);
    /* A NaN's sign and payload are not architectural (every NaN reaching
     * VRAM becomes 0x7FC0, and x86 picks the payload by operand order, which
     * the compiler may commute): canonicalise NaNs, compare all else. */
    for (size_t i = 0; i < rows * cols; i++) {
        if (isnan(o1[i]) && isnan(o2[i])) o1[i] = o2[i] = NAN;
    }
    if (memcmp(o1, o2, sizeof(float) * (rows * cols + 1)))
        fprintf(stderr, "kernel isa %d rows %zu n %zu cols %zu ts %zu differs\n", isa, rows, n,
                cols, ts);
    assert_memory_equal(o1, o2, sizeof(float) * (rows * cols + 1));
    free(x);
    free(t);
    free(o1);
    free(o2);
}

/* Numerics 6: a chain starts with the bare product, never 0 + product, so
 * -0 * 1 summed over any n stays -0 (0x80000000); a kernel that seeds its
 * accumulator with +0 would give +0. Random data almost never has an
 * all-zero chain, hence this fixed case. */
static void check_neg_zero_chain(int isa, size_t rows, size_t n, size_t cols)
{
    float x[64 * 66], t[66 * 8], o[64 * 8];
    for (size_t i = 0; i < rows * n; i++)
        x[i] = -0.0f;
    for (size_t i = 0; i < n * cols; i++)
        t[i] = 1.0f;
    emu_dot_block_isa(isa, x, rows, n, t, cols, cols, o);
    for (size_t i = 0; i < rows * cols; i++) {
        uint32_t b;
        memcpy(&b, &o[i], 4);
        assert_int_equal(b, 0x80000000u);
    }
}

static void test_kernels_vs_ref(void **state)
{
    (void)state;
    static const size_t rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 64};
    static const size_t cols[] = {1, 2, 3, 4, 8, 12, 16, 20, 24, 64};
    /* n 7 and 66: the AVX-512 4x4 kernel's four-step groups plus a tail */
    static const size_t ns[] = {1, 2, 7, 16, 66, 64};
    uint32_t s = 2024;
    for (int isa = EMU_ISA_GENERIC; isa <= EMU_ISA_AVX512; isa++)
        for (unsigned k = 0; k < 6; k++) {
            check_neg_zero_chain(isa, 4, ns[k], 4);
            check_neg_zero_chain(isa, 8, ns[k], 8);
        }
    for (int isa = EMU_ISA_GENERIC; isa <= EMU_ISA_AVX512; isa++)
        for (unsigned a = 0; a < 10; a++)
            for (unsigned c = 0; c < 10; c++)
                for (unsigned k = 0; k < 6; k++) {
                    check_kernel(isa, rows[a], ns[k], cols[c], cols[c] + (a % 3) * 4, &s, 3);
                    if (k == 5) check_kernel(isa, rows[a], ns[k], cols[c], cols[c], &s, 30);
                }
}

/* ------------------------------------------------ whole random programs */

struct geom {
    uint32_t mlen, blen, hlen;
};

enum { VROWS = 1024, SRC_ROWS = 192, TILES = 4 };

static void settings_for(struct plena_settings *s, const struct geom *g)
{
    tu_settings(s);
    s->mlen = s->vlen = g->mlen;
    s->blen = g->blen;
    s->hlen = g->hlen;
    s->broadcast_amount = g->mlen / g->hlen;
    s->matrix_sram_size = TILES * g->mlen;
    s->vector_sram_size = VROWS;
    s->hbm_m_prefetch_amount = g->mlen;
    if (g->mlen % 8) { /* MX block 8 must divide MLEN (these programs use no DMA) */
        struct plena_hbm_type bf16 = {PLENA_HBM_BF16, 0};
        s->hbm_m_weight_type = s->hbm_m_kv_type = s->hbm_v_act_type = s->hbm_v_kv_type = bf16;
    }
}

static uint16_t rand_bf16(uint32_t *s)
{
    static const uint16_t sp[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1,
                                  0x7F81, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F,
                                  0xFF7F, 0x3F80, 0x42B0, 0xC2B0, 0x42B1, 0xC2B1};
    uint32_t r = rng(s);
    if (r % 100 < 12) return sp[rng(s) % (sizeof sp / sizeof sp[0])];
    float v = (float)((int)(rng(s) % 20001) - 10000) / 1999.0f;
    return plena_num_bf16_from_f32(v * ((r >> 8) % 8 == 0 ? 1e30f : 1.0f));
}

static void fill(struct plena_emu *e, const struct geom *g, uint32_t seed)
{
    uint32_t s = seed;
    for (uint64_t i = 0; i < (uint64_t)SRC_ROWS * g->mlen; i++)
        plena_emu_vram_set(e, i, rand_bf16(&s));
    for (uint64_t i = 0; i < (uint64_t)TILES * g->mlen * g->mlen; i++)
        plena_emu_mram_set(e, i, rand_f32(&s, 4));
    for (uint32_t i = 0; i < 256; i++)
        plena_emu_fpsram_set(e, i, rand_bf16(&s));
    /* row 1 and f1 (loaded from FP SRAM 3) equal 1.0: a == f lanes, where
     * V_SUB_VF with rorder must give -0 (not +0) */
    for (uint32_t i = 0; i < g->mlen; i++)
        plena_emu_vram_set(e, (uint64_t)g->mlen + i, 0x3F80);
    plena_emu_fpsram_set(e, 3, 0x3F80);
}

/* A straight-line program of every vector and matrix op with random operands
 * (valid ones: traps are not what this test is about). */
static void build(struct tu_prog *p, const struct geom *g, uint32_t seed, unsigned n_ops)
{
    uint32_t s = seed, L = g->mlen, Bl = g->blen, H = g->hlen;
    p->n = 0;
    for (unsigned f = 1; f < 8; f++)
        I(p, S_LD_FP, f, 0, f * 3);
    LI(p, 9, rng(&s) & 0xFFFF);
    R(p, C_SET_V_MASK_REG, 9, 0, 0);
    for (unsigned k = 0; k < n_ops && p->n < 4000; k++) {
        uint32_t r = rng(&s) % 28;
        uint32_t dst = 128 + rng(&s) % 64, a = rng(&s) % SRC_ROWS, b = rng(&s) % SRC_ROWS;
        if (rng(&s) % 8 == 0) a = 1;
        uint32_t tile = rng(&s) % TILES, fr = rng(&s) % 8, m = rng(&s) % 2;
        LI(p, 1, dst * L);
        LI(p, 2, a * L);
        LI(p, 3, b * L);
        if (r < 10) {
            static const enum plena_op vops[] = {
                PLENA_OP_V_ADD_VV, PLENA_OP_V_SUB_VV, PLENA_OP_V_MUL_VV, PLENA_OP_V_EXP_V,
                PLENA_OP_V_RECI_V, PLENA_OP_V_ADD_VF, PLENA_OP_V_SUB_VF, PLENA_OP_V_MUL_VF,
                PLENA_OP_V_MAX_VF, PLENA_OP_V_MIN_VF};
            enum plena_op op = vops[r];
            unsigned rs2 = r >= 5 ? fr : 3;
            tu_emit(p, op, 1, 2, rs2, m, op == PLENA_OP_V_SUB_VF ? rng(&s) % 2 : 0, 0);
        } else if (r == 10) {
            LI(p, 4, rng(&s) % (L + 3));
            R(p, V_SHFT_V, 1, 2, 4);
        } else if (r == 11 || r == 12) {
            tu_emit(p, r == 11 ? PLENA_OP_V_RED_SUM : PLENA_OP_V_RED_MAX, 1 + fr % 7, 2, 0, m, 0,
                    0);
        } else if (r == 13) {
            LI(p, 5, rng(&s) % (256 - L));
            I(p, S_MAP_V_FP, 1, 5, 0);
        } else if (r == 14) {
            R(p, S_ADD_FP, 1 + fr % 7, fr, (fr + 3) % 8);
        } else if (r < 19) { /* M_MM / M_TMM */
            uint32_t c = (rng(&s) % (L / Bl)) * Bl, v = rng(&s) % (SRC_ROWS - Bl + 1);
            LI(p, 6, tile * L * L + c * L);
            LI(p, 7, v * L);
            if (r < 17)
                R(p, M_MM, 0, 6, 7);
            else
                R(p, M_TMM, 0, 7, 6);
        } else if (r < 21) { /* M_MV / M_TMV */
            uint32_t off = r == 19 ? (rng(&s) % (L / Bl)) * Bl : 0;
            LI(p, 6, tile * L * L + off);
            tu_emit(p, r == 19 ? PLENA_OP_M_MV : PLENA_OP_M_TMV, 0, 6, 3, 0, 0, 0);
        } else if (r < 23) { /* M_BMM / M_BTMM */
            uint32_t h0 = (rng(&s) % (L / H)) * H, v = rng(&s) % (SRC_ROWS - L + 1);
            LI(p, 6, tile * L * L + h0);
            LI(p, 7, v * L);
            tu_emit(p, r == 21 ? PLENA_OP_M_BMM : PLENA_OP_M_BTMM, 0, 6, 7, 0, 0, 0);
        } else if (r < 25) { /* M_BMV / M_BTMV, head offset in G[rd] */
            LI(p, 6, tile * L * L);
            LI(p, 8, (rng(&s) % (L / H)) * H);
            tu_emit(p, r == 23 ? PLENA_OP_M_BMV : PLENA_OP_M_BTMV, 8, 6, 3, 0, 0, 0);
        } else { /* write-outs */
            uint32_t which = rng(&s) % 4;
            if (which == 0) {
                LI(p, 10, (256 + rng(&s) % 64) * L + (rng(&s) % (L / Bl)) * Bl);
                LI(p, 11, 1 + rng(&s) % 3);
                R(p, M_MM_WO, 10, m ? 11 : 0, 0);
            } else if (which == 1) {
                LI(p, 10, (256 + rng(&s) % 64) * L + (rng(&s) % (L / Bl)) * Bl);
                R(p, M_MV_WO, 10, 0, 0);
            } else if (which == 2) {
                LI(p, 10, 512 * L);
                R(p, M_BMM_WO, 10, 0, 0);
            } else {
                LI(p, 10, 400 * L);
                R(p, M_BMV_WO, 10, 0, 0);
            }
        }
    }
    /* drain every accumulator so all of them are compared */
    LI(p, 10, 320 * L);
    R(p, M_MM_WO, 10, 0, 0);
    LI(p, 10, 330 * L);
    R(p, M_MV_WO, 10, 0, 0);
    LI(p, 10, 512 * L);
    R(p, M_BMM_WO, 10, 0, 0);
    LI(p, 10, 400 * L);
    R(p, M_BMV_WO, 10, 0, 0);
}

static void count_obs(void *ctx, const struct plena_emu_event *ev)
{
    (void)ev;
    ++*(uint64_t *)ctx;
}

static void compare_machines(struct plena_emu *a, struct plena_emu *b, const struct geom *g,
                             const char *what)
{
    for (uint64_t i = 0; i < (uint64_t)VROWS * g->mlen; i++) {
        uint16_t x = plena_emu_vram_get(a, i), y = plena_emu_vram_get(b, i);
        if (x != y)
            fprintf(stderr, "%s: MLEN %u BLEN %u: VRAM[%llu] ref 0x%04X fast 0x%04X\n", what,
                    g->mlen, g->blen, (unsigned long long)i, x, y);
        assert_int_equal(x, y);
    }
    for (unsigned f = 0; f < 8; f++)
        assert_int_equal(plena_emu_fp_get(a, f), plena_emu_fp_get(b, f));
    for (uint32_t i = 0; i < 256; i++)
        assert_int_equal(plena_emu_fpsram_get(a, i), plena_emu_fpsram_get(b, i));
}

static void test_programs_fast_vs_ref(void **state)
{
    (void)state;
    static const struct geom geoms[] = {
        {64, 4, 16}, {64, 16, 16}, {64, 64, 16}, {64, 8, 8}, {24, 8, 6}, {20, 4, 5}, {12, 2, 3},
    };
    static struct tu_prog p;
    for (unsigned gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        const struct geom *g = &geoms[gi];
        struct plena_settings s;
        settings_for(&s, g);
        for (uint32_t seed = 1; seed <= 3; seed++) {
            build(&p, g, seed * 7919u + gi, g->blen == 64 ? 60 : 250);
            struct plena_emu *ref = tu_new(&s), *gen = tu_new(&s), *avx = tu_new(&s);
            struct plena_emu *avx2 = tu_new(&s);
            ref->ref_paths = 1;
            gen->kernel_isa = EMU_ISA_GENERIC;
            avx->kernel_isa = emu_host_isa();
            /* the host's best is AVX-512F where it has it: run AVX2 as well */
            avx2->kernel_isa = emu_host_isa() < EMU_ISA_AVX2 ? emu_host_isa() : EMU_ISA_AVX2;
            fill(ref, g, seed);
            fill(gen, g, seed);
            fill(avx, g, seed);
            fill(avx2, g, seed);
            struct plena_emu_result r1 = tu_run(ref, &p), r2 = tu_run(gen, &p);
            struct plena_emu_result r4 = tu_run(avx2, &p);
            assert_int_equal(r4.status, PLENA_RUN_COMPLETED);
            compare_machines(ref, avx2, g, "avx2");
            plena_emu_free(avx2);
            uint64_t seen = 0;
            struct plena_emu_result r3 = tu_run_obs(avx, &p, count_obs, &seen);
            if (r1.status != PLENA_RUN_COMPLETED) fprintf(stderr, "trap: %s\n", r1.trap.detail);
            assert_int_equal(r1.status, PLENA_RUN_COMPLETED);
            assert_int_equal(r2.status, PLENA_RUN_COMPLETED);
            assert_int_equal(r3.status, PLENA_RUN_COMPLETED);
            assert_int_equal(seen, r3.instructions_executed);
            compare_machines(ref, gen, g, "generic");
            compare_machines(ref, avx, g, "host isa");
            plena_emu_free(ref);
            plena_emu_free(gen);
            plena_emu_free(avx);
        }
    }
}

/* M_MM / M_TMM straight into the matrix accumulator, which the program test
 * only sees through BF16 write-outs (those hide a 1-ulp f32 difference):
 * a few instructions per run, then m_acc compared bit for bit between the
 * reference machine and every kernel family. Moderate finite operands with
 * 0.5% specials (few NaNs, so most chains stay comparable), some with
 * all-(-0) X rows and m_acc preset to -0: the accumulation order
 * (docs/numerics.md "Matrix accumulation order") then gives -0, and +0 if a
 * kernel started a chain at 0 + product. MLEN 20 covers MLEN not a multiple
 * of 16. */
static float rand_moderate(uint32_t *s)
{
    uint32_t r = rng(s);
    if (r % 200 == 0) return f32_of(specials[rng(s) % (sizeof specials / sizeof specials[0])]);
    return f32_of((r & 0x80000000u) | (120 + rng(s) % 14) << 23 | (rng(s) & 0x7FFFFFu));
}

/* m_acc of machine b against reference machine a, bit for bit; NaNs compare
 * as one value (their payload inside f32 accumulators is not architectural). */
static void assert_macc_equal(const struct plena_emu *a, const struct plena_emu *b, uint32_t n,
                              const char *what)
{
    for (uint32_t i = 0; i < n; i++) {
        float x = a->m_acc[i], y = b->m_acc[i];
        if (isnan(x) && isnan(y)) continue;
        uint32_t bx, by;
        memcpy(&bx, &x, 4);
        memcpy(&by, &y, 4);
        if (bx != by) fprintf(stderr, "%s: m_acc[%u] ref %g, other %g\n", what, i, x, y);
        assert_int_equal(bx, by);
    }
}

static void test_mm_acc_fast_vs_ref(void **state)
{
    (void)state;
    static const struct geom geoms[] = {{64, 4, 16}, {20, 4, 5}, {64, 16, 16}, {64, 8, 8}};
    static struct tu_prog p;
    for (unsigned gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        const struct geom *g = &geoms[gi];
        uint32_t L = g->mlen, Bl = g->blen;
        struct plena_settings st;
        settings_for(&st, g);
        for (uint32_t seed = 1; seed <= 24; seed++) {
            uint32_t s = seed * 104729u + gi;
            int negz = seed % 4 == 0;
            p.n = 0;
            for (unsigned k = 0; k < 3; k++) {
                uint32_t c = (rng(&s) % (L / Bl)) * Bl, v = rng(&s) % (SRC_ROWS - Bl + 1);
                LI(&p, 6, (rng(&s) % TILES) * L * L + c * L);
                LI(&p, 7, v * L);
                if (rng(&s) % 3)
                    R(&p, M_MM, 0, 6, 7);
                else
                    R(&p, M_TMM, 0, 7, 6);
            }
            struct plena_emu *m[4];
            for (int q = 0; q < 4; q++) {
                m[q] = tu_new(&st);
                uint32_t fs = s;
                for (uint64_t i = 0; i < (uint64_t)SRC_ROWS * L; i++) {
                    uint32_t b;
                    float f = rand_moderate(&fs);
                    memcpy(&b, &f, 4);
                    plena_emu_vram_set(m[q], i, negz ? 0x8000 : (uint16_t)(b >> 16));
                }
                for (uint64_t i = 0; i < (uint64_t)TILES * L * L; i++) {
                    float f = rand_moderate(&fs);
                    plena_emu_mram_set(m[q], i, negz ? fabsf(f) + 1.0f : f);
                }
                for (uint32_t i = 0; i < Bl * Bl; i++)
                    m[q]->m_acc[i] = negz ? -0.0f : 0.0f;
            }
            m[0]->ref_paths = 1;
            m[1]->kernel_isa = EMU_ISA_GENERIC;
            m[2]->kernel_isa = emu_host_isa() < EMU_ISA_AVX2 ? emu_host_isa() : EMU_ISA_AVX2;
            m[3]->kernel_isa = emu_host_isa();
            for (int q = 0; q < 4; q++)
                assert_int_equal(tu_run(m[q], &p).status, PLENA_RUN_COMPLETED);
            if (negz) /* -0 chains stay -0 (NaN ones aside) */
                for (uint32_t i = 0; i < Bl * Bl; i++) {
                    if (isnan(m[0]->m_acc[i])) continue;
                    uint32_t ba;
                    memcpy(&ba, &m[0]->m_acc[i], 4);
                    assert_int_equal(ba, 0x80000000u);
                }
            for (int q = 1; q < 4; q++) {
                char what[96];
                snprintf(what, sizeof what, "machine %d MLEN %u BLEN %u seed %u", q, L, Bl, seed);
                assert_macc_equal(m[0], m[q], Bl * Bl, what);
            }
            for (int q = 0; q < 4; q++)
                plena_emu_free(m[q]);
        }
    }
}

/* ------------------------------------- deferred M_MM (AVX-512F and AVX2) */

/* The deferred path (BLEN 4 on AVX2 and AVX-512F hosts) computes M_MMs in
 * groups and keeps decoded X blocks in a cache. Each program below is run on
 * a ref_paths machine (plain one-at-a-time M_MMs), on the host's best machine
 * and on an AVX2 machine (the same as the best on an AVX2 host; the AVX2
 * kernels on an AVX-512F host), and m_acc plus all VRAM are compared bit for
 * bit. The programs put writes to a pending M_MM's operands, a cache eviction
 * and a trap right where a wrong flush or a stale cache entry would change
 * m_acc. */
/* Operand data of deferred_data. A write-out's element sums 4 x 64 and more
 * products, so the specials rate must stay low for most results to stay
 * finite. DATA_MODERATE: rand_moderate. DATA_WIDE: full mantissas, one in
 * 64 exponents anywhere in the normal range (huge sums, overflow to Inf,
 * subnormal products), one in 2048 values a special (NaN, Inf, subnormal,
 * -0). DATA_NEGZ: every X element -0, T in [1, 2^14) and m_acc -0: a chain
 * that started from 0 + product instead of the bare product would turn -0
 * into +0, which a write-out's 0x8000 shows. DATA_PLAIN: DATA_WIDE without
 * the wide exponents and the specials: with them, almost every write-out of a
 * long sweep is NaN or Inf, which no missing or reordered product changes;
 * here every output is finite and shows one. */
enum { DATA_MODERATE, DATA_WIDE, DATA_NEGZ, DATA_PLAIN };

static float data_value(uint32_t *s, int kind)
{
    if (kind == DATA_MODERATE) return rand_moderate(s);
    uint32_t r = rng(s);
    if (kind == DATA_WIDE && r % 2048 == 0)
        return f32_of(specials[rng(s) % (sizeof specials / sizeof specials[0])]);
    uint32_t e = kind == DATA_WIDE && (r >> 11) % 64 == 0 ? 1 + rng(s) % 254 : 120 + rng(s) % 14;
    uint32_t sign = kind == DATA_NEGZ ? 0 : r & 0x80000000u;
    float f = f32_of(sign | e << 23 | (rng(s) & 0x7FFFFFu));
    return kind == DATA_NEGZ ? 1.0f + f : f;
}

/* deferred_vs_ref with a choice of data; wide: the number of groups each
 * deferring machine must compute as one 4 x 16 tile (mm44_wide, mm42_wide). */
static void deferred_data(const struct tu_prog *p, uint32_t seed, const char *what, int kind,
                          uint64_t wide)
{
    struct plena_settings st;
    tu_settings(&st); /* MLEN 64, BLEN 4, 256 VRAM rows, 4 tiles */
    struct plena_emu *m[3];
    struct plena_emu_result r[3];
    for (int q = 0; q < 3; q++) {
        m[q] = tu_new(&st);
        uint32_t s = seed;
        for (uint64_t i = 0; i < 256 * 64; i++) {
            float f = data_value(&s, kind);
            uint32_t b;
            memcpy(&b, &f, 4);
            plena_emu_vram_set(m[q], i, kind == DATA_NEGZ ? 0x8000 : (uint16_t)(b >> 16));
        }
        for (uint64_t i = 0; i < 4 * 64 * 64; i++)
            plena_emu_mram_set(m[q], i, data_value(&s, kind));
        for (uint32_t i = 0; i < 16; i++)
            m[q]->m_acc[i] = kind == DATA_NEGZ ? -0.0f : 0.0f;
    }
    m[0]->ref_paths = 1;
    int host = emu_host_isa(), defers = host >= EMU_ISA_AVX2;
    m[2]->kernel_isa = host < EMU_ISA_AVX2 ? host : EMU_ISA_AVX2;
    for (int q = 0; q < 3; q++)
        r[q] = tu_run(m[q], p);
    assert_int_equal(m[0]->mm_deferred, 0);
    for (int q = 1; q < 3; q++) {
        char w[96];
        snprintf(w, sizeof w, "%s (machine %d)", what, q);
        /* the machine really took the deferred path where the host has one */
        assert_int_equal(m[q]->mm_deferred, defers);
        assert_int_equal(m[q]->mm_wide_groups, defers ? wide : 0);
        assert_int_equal(r[0].status, r[q].status);
        assert_int_equal(r[0].instructions_executed, r[q].instructions_executed);
        assert_macc_equal(m[0], m[q], 16, w);
        for (uint64_t i = 0; i < 256 * 64; i++) {
            uint16_t a = plena_emu_vram_get(m[0], i), b = plena_emu_vram_get(m[q], i);
            if (a != b) fprintf(stderr, "%s: VRAM[%llu] differs\n", w, (unsigned long long)i);
            assert_int_equal(a, b);
        }
    }
    for (int q = 0; q < 3; q++)
        plena_emu_free(m[q]);
}

static void deferred_vs_ref(const struct tu_prog *p, uint32_t seed, const char *what)
{
    deferred_data(p, seed, what, DATA_MODERATE, 0);
    deferred_data(p, seed, what, DATA_PLAIN, 0);
}

/* M_MM with tile t, column start c, X rows x..x+3 (registers 1 and 2). */
static void mm(struct tu_prog *p, uint32_t t, uint32_t c, uint32_t x)
{
    LI(p, 1, t * 4096 + c * 64);
    LI(p, 2, x * 64);
    R(p, M_MM, 0, 1, 2);
}

static void wo(struct tu_prog *p, uint32_t row)
{
    LI(p, 3, row * 64);
    R(p, M_MM_WO, 3, 0, 0);
}

static void test_mm_deferred_vs_ref(void **state)
{
    (void)state;
    static struct tu_prog p;
    /* a vector write to a pending M_MM's X row, then the same X again (the
     * cached block must be dropped); the run ends with M_MMs pending */
    p.n = 0;
    mm(&p, 0, 0, 8);
    mm(&p, 0, 4, 8);
    LI(&p, 4, 9 * 64);
    LI(&p, 5, 20 * 64);
    R(&p, V_ADD_VV, 4, 4, 5);
    mm(&p, 0, 8, 8);
    wo(&p, 100);
    mm(&p, 1, 0, 8);
    mm(&p, 2, 12, 9);
    deferred_vs_ref(&p, 11, "vector write");
    /* M_MM_WO over X rows that are cached (not pending), then that X again */
    p.n = 0;
    mm(&p, 0, 0, 40);
    wo(&p, 41);
    mm(&p, 0, 0, 40);
    mm(&p, 3, 60, 40);
    wo(&p, 120);
    deferred_vs_ref(&p, 12, "write-out over X");
    /* H_PREFETCH_M over a pending M_MM's tile (zeros from HBM) */
    p.n = 0;
    mm(&p, 1, 0, 16);
    mm(&p, 1, 4, 20);
    LI(&p, 6, 4096);
    R(&p, H_PREFETCH_M, 6, 0, 0);
    mm(&p, 1, 8, 16);
    deferred_vs_ref(&p, 13, "prefetch over T");
    /* eight X blocks fill the cache, then a pending M_MM on the first and a
     * ninth block whose decode evicts the first */
    p.n = 0;
    for (uint32_t b = 0; b < 8; b++) {
        mm(&p, b % 4, 4 * b, 4 * b);
        wo(&p, 200 + b);
    }
    mm(&p, 0, 0, 0);
    mm(&p, 1, 0, 32);
    mm(&p, 2, 0, 0);
    deferred_vs_ref(&p, 14, "eviction");
    /* M_TMM between M_MMs: m_acc must take the products in program order */
    p.n = 0;
    mm(&p, 0, 0, 24);
    LI(&p, 1, 2 * 4096 + 8 * 64);
    LI(&p, 2, 28 * 64);
    R(&p, M_TMM, 0, 2, 1);
    mm(&p, 3, 4, 24);
    R(&p, M_TMM, 0, 2, 1);
    mm(&p, 1, 0, 32);
    deferred_vs_ref(&p, 17, "M_TMM order");
    /* a trap after three M_MMs: they still took effect */
    p.n = 0;
    mm(&p, 0, 0, 60);
    mm(&p, 1, 4, 64);
    mm(&p, 2, 8, 68);
    p.w[p.n++] = 0; /* INVALID_00 */
    deferred_vs_ref(&p, 15, "trap");
    /* a GEMM loop: three K blocks per micro-column (groups of 3), 16
     * micro-columns, two row groups, write-outs in between */
    p.n = 0;
    tu_emit(&p, PLENA_OP_C_LOOP_START, 7, 0, 0, 0, 0, 2);
    LI(&p, 9, 0); /* row-group offset, +4 rows per group */
    LI(&p, 3, 128 * 64);
    LI(&p, 1, 0);
    tu_emit(&p, PLENA_OP_C_LOOP_START, 8, 0, 0, 0, 0, 16);
    for (uint32_t k = 0; k < 3; k++) {
        LI(&p, 2, k * 16 * 64);
        R(&p, S_ADD_INT, 2, 2, 9);
        R(&p, M_MM, 0, 1, 2);
        if (k < 2) I(&p, S_ADDI_INT, 1, 1, 4096);
    }
    R(&p, M_MM_WO, 3, 0, 0);
    I(&p, S_ADDI_INT, 3, 3, 4);
    LI(&p, 10, 2 * 4096 - 256);
    R(&p, S_SUB_INT, 1, 1, 10);
    tu_emit(&p, PLENA_OP_C_LOOP_END, 8, 0, 0, 0, 0, 0);
    I(&p, S_ADDI_INT, 9, 9, 4 * 64);
    tu_emit(&p, PLENA_OP_C_LOOP_END, 7, 0, 0, 0, 0, 0);
    deferred_vs_ref(&p, 16, "gemm loop");
}

/* n M_MMs over adjacent column blocks c0, c0+4, ... of tile t with X rows x. */
static void sweep(struct tu_prog *p, uint32_t t, uint32_t c0, uint32_t n, uint32_t x)
{
    for (uint32_t j = 0; j < n; j++)
        mm(p, t, c0 + 4 * j, x);
}

/* Groups that read one X block over 16 adjacent columns take mm44_wide /
 * mm42_wide (a 4 x 16 register tile); every other group the per-member
 * kernel. Both against ref_paths on moderate values, on wide-exponent values
 * with specials (Inf, NaN, subnormals, overflow), on -0 chains and on finite
 * values without specials. */
static void test_mm_wide_vs_ref(void **state)
{
    (void)state;
    static struct tu_prog p[4];
    static const uint64_t wide[4] = {8, 3, 32, 6};
    /* 0: two row groups, each a full sweep of one tile's 16 column blocks */
    for (uint32_t g = 0; g < 2; g++) {
        sweep(&p[0], 1, 0, 16, 8 + 4 * g);
        wo(&p[0], 100 + 4 * g);
    }
    /* 1: a sweep from column 4 (three full groups, then three pending at the
     * write-out); columns descending; adjacent columns across a tile
     * boundary; the same columns with different X; the same X twice */
    sweep(&p[1], 2, 4, 15, 20);
    wo(&p[1], 120);
    for (uint32_t j = 0; j < 4; j++)
        mm(&p[1], 0, 12 - 4 * j, 24);
    sweep(&p[1], 0, 56, 2, 28);
    sweep(&p[1], 1, 0, 2, 28);
    for (uint32_t j = 0; j < 4; j++)
        mm(&p[1], 3, 4 * j, 4 * j);
    for (uint32_t j = 0; j < 4; j++)
        mm(&p[1], 3, 8, 32);
    wo(&p[1], 124);
    /* 2: the bench's GEMM loop (emu_throughput): per row group a hardware
     * loop over the 16 column blocks, then the write-out */
    tu_emit(&p[2], PLENA_OP_C_LOOP_START, 7, 0, 0, 0, 0, 2);
    LI(&p[2], 3, 128 * 64);
    LI(&p[2], 2, 0);
    tu_emit(&p[2], PLENA_OP_C_LOOP_START, 8, 0, 0, 0, 0, 4);
    LI(&p[2], 1, 0);
    tu_emit(&p[2], PLENA_OP_C_LOOP_START, 9, 0, 0, 0, 0, 16);
    R(&p[2], M_MM, 0, 1, 2);
    I(&p[2], S_ADDI_INT, 1, 1, 4 * 64);
    tu_emit(&p[2], PLENA_OP_C_LOOP_END, 9, 0, 0, 0, 0, 0);
    R(&p[2], M_MM_WO, 3, 0, 0);
    I(&p[2], S_ADDI_INT, 3, 3, 4 * 64);
    I(&p[2], S_ADDI_INT, 2, 2, 4 * 64);
    tu_emit(&p[2], PLENA_OP_C_LOOP_END, 8, 0, 0, 0, 0, 0);
    tu_emit(&p[2], PLENA_OP_C_LOOP_END, 7, 0, 0, 0, 0, 0);
    /* 3: no write-out at the end, so m_acc holds the f32 sums (a BF16
     * write-out hides most single-rounding differences, such as two steps
     * added in the wrong order): six wide groups, then a group of three
     * M_MMs over different X and tiles, pending when the run ends */
    sweep(&p[3], 2, 0, 16, 40);
    sweep(&p[3], 3, 0, 8, 44);
    for (uint32_t j = 0; j < 3; j++)
        mm(&p[3], j, 8, 4 * j);
    static const char *const names[4] = {"wide sweep", "wide mixed", "wide loop", "wide no WO"};
    for (int k = 0; k < 4; k++)
        for (int d = DATA_MODERATE; d <= DATA_PLAIN; d++)
            deferred_data(&p[k], 31 + (uint32_t)(3 * k + d), names[k], d, wide[k]);
}

/* The batching safety set is derived from isa.def; it must equal the list it
 * replaced (the ops GEMM loops issue between M_MMs) and every member other
 * than M_MM must keep pending M_MMs exact: no VRAM/MRAM write, no m_acc. */
static void test_mm_batch_safe_set(void **state)
{
    (void)state;
    static const unsigned want[] = {PLENA_OP_M_MM,         PLENA_OP_S_ADD_INT, PLENA_OP_S_ADDI_INT,
                                    PLENA_OP_S_SUB_INT,    PLENA_OP_S_MUL_INT, PLENA_OP_S_LUI_INT,
                                    PLENA_OP_C_LOOP_START, PLENA_OP_C_LOOP_END};
    for (unsigned op = 0; op <= PLENA_OP_COUNT; op++) {
        int in = 0;
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            in |= want[i] == op;
        if (emu_mm_batch_safe[op] != in) fprintf(stderr, "opcode 0x%02X\n", op);
        assert_int_equal(emu_mm_batch_safe[op], in);
        if (!in || op == PLENA_OP_M_MM) continue;
        const struct plena_op_info *r = plena_isa_info(op);
        assert_int_equal(r->writes & (PLENA_MASK_VRAM | PLENA_MASK_MRAM), 0);
        assert_int_equal((r->reads | r->writes) & PLENA_MASK_MACC, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_decode_all),    cmocka_unit_test(test_bf16_encode_ties),
        cmocka_unit_test(test_kernels_vs_ref),     cmocka_unit_test(test_programs_fast_vs_ref),
        cmocka_unit_test(test_mm_acc_fast_vs_ref), cmocka_unit_test(test_mm_deferred_vs_ref),
        cmocka_unit_test(test_mm_wide_vs_ref),     cmocka_unit_test(test_mm_batch_safe_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
