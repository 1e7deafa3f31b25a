/* Generated weights (gen/weights.c): the fused generate-and-encode path
 * against the values-then-encode path it replaced, byte for byte, and the
 * images of whole builds against digests recorded before generation was
 * vectorised (the outputs must never change). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "gen/build.h"
#include "gen/weights.h"
#include "num/prng.h"
#include "common/test_support.h"

/* ---- fused path == values + encode ---- */

static void test_mx_fused(void **state)
{
    (void)state;
    /* K < 4 (no lanes), K % 4 != 0 (a scalar tail), padded rows and
     * columns, a real expert's width */
    static const uint32_t shapes[][4] = {
        {1, 8, 8, 8},     {3, 24, 8, 24},      {4, 8, 4, 8},       {7, 16, 8, 16},
        {64, 40, 64, 48}, {130, 96, 136, 104}, {257, 64, 264, 64}, {96, 2048, 96, 2048},
    };
    static const enum plena_weights_mode modes[] = {PLENA_WEIGHTS_RANDOM, PLENA_WEIGHTS_ZERO,
                                                    PLENA_WEIGHTS_REPRESENTABLE};
    static const enum plena_mx_mode mx[] = {PLENA_MX_PLENA, PLENA_MX_OCP};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
            for (size_t x = 0; x < 2; x++) {
                const uint32_t K = shapes[s][0], N = shapes[s][1], K_p = shapes[s][2],
                               N_p = shapes[s][3];
                const size_t n = (size_t)K_p * N_p + (size_t)K_p * N_p / 8;
                uint8_t *a = plena_malloc(n), *b = plena_malloc(n);
                assert_non_null(a);
                assert_non_null(b);
                memset(a, 0xA5, n);
                memset(b, 0x5A, n);
                const uint32_t fan = (uint32_t)(s % 2 ? K : N);
                assert_int_equal(plena_moe_weights_mx(modes[m], 42 + s, PLENA_ROLE_UP, 3, K, N, fan,
                                                      mx[x], K_p, N_p, a),
                                 0);
                assert_int_equal(plena_moe_weights_mx_ref(modes[m], 42 + s, PLENA_ROLE_UP, 3, K, N,
                                                          fan, mx[x], K_p, N_p, b),
                                 0);
                assert_memory_equal(a, b, n);
                plena_free(a);
                plena_free(b);
            }
}

/* ---- whole builds against recorded digests ---- */

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    return plena_fnv1a64(p, n) ^ (h * 0x100000001b3ull);
}

/* One digest over every HBM region (base, size, bytes: lazy ones
 * generated), the VRAM preload and the SRAM images. */
static uint64_t build_digest(const struct plena_moe_build *b)
{
    uint64_t h = 0;
    struct plena_moe_scratch sc = {0};
    for (size_t i = 0; i < b->n_hbm; i++) {
        const uint8_t *p = NULL;
        assert_int_equal(plena_moe_build_region_bytes(b, &b->hbm[i], &sc, &p, NULL), 0);
        assert_non_null(p);
        h = mix(h, &b->hbm[i].base, sizeof b->hbm[i].base);
        h = mix(h, &b->hbm[i].n, sizeof b->hbm[i].n);
        h = mix(h, p, (size_t)b->hbm[i].n);
    }
    plena_moe_scratch_free(&sc);
    h = mix(h, b->vram, (size_t)b->n_vram * sizeof *b->vram);
    h = mix(h, b->fp16, (size_t)b->n_fp * sizeof *b->fp16);
    return mix(h, b->ints, (size_t)b->n_int * sizeof *b->ints);
}

struct recorded {
    const char *model, *routing; /* routing NULL: the preset's default */
    uint32_t T;
    enum plena_weights_mode weights;
    int lazy; /* 1 lazy regions; -N eager on N threads */
    uint64_t digest;
};

static void test_recorded_builds(void **state)
{
    (void)state;
    /* digests of the builds as generated before docs/design.md "Weight
     * generation: jumped streams" (every preset kind: routed MX experts,
     * expert bias, shared experts and gate, MX router, device routing,
     * lazy regions, the three weight modes) */
    static const struct recorded cases[] = {
        {"tiny-route-32x4", "random", 8, PLENA_WEIGHTS_RANDOM, 0, 0x96580c70be4c0a25ull},
        {"tiny-route-32x4", "random", 8, PLENA_WEIGHTS_RANDOM, 1, 0x96580c70be4c0a25ull},
        {"tiny-route-32x4", "random", 8, PLENA_WEIGHTS_ZERO, 0, 0x276fac3f97bf1994ull},
        {"tiny-route-32x4", "random", 8, PLENA_WEIGHTS_REPRESENTABLE, 0, 0x064e20aaf8d830f2ull},
        {"tiny-gpt-oss", "random", 4, PLENA_WEIGHTS_RANDOM, 0, 0x146b93af8f5a7846ull},
        {"tiny-ds-shared", NULL, 4, PLENA_WEIGHTS_RANDOM, 0, 0xf76f5c1517762522ull},
        {"tiny-qwen2-gated", NULL, 4, PLENA_WEIGHTS_RANDOM, 0, 0x0eed13e5d772872aull},
        {"tiny-straddle", NULL, 4, PLENA_WEIGHTS_RANDOM, 0, 0xfeda3f4ad256a5b1ull},
        {"deepseek-v2-lite-mini", "device", 4, PLENA_WEIGHTS_RANDOM, 0, 0x0ab6ba1695f2912aull},
        {"qwen3-30b-a3b", "random", 2, PLENA_WEIGHTS_RANDOM, 0, 0x91d7d11e702702a0ull},
        /* lazy regions of a non-square expert (H != I): the same digest */
        {"qwen3-30b-a3b", "random", 2, PLENA_WEIGHTS_RANDOM, 1, 0x91d7d11e702702a0ull},
        /* the eager matrices on three threads (lazy = -3): the same digest */
        {"qwen3-30b-a3b", "random", 2, PLENA_WEIGHTS_RANDOM, -3, 0x91d7d11e702702a0ull},
        {"tiny-ds-shared", NULL, 4, PLENA_WEIGHTS_RANDOM, -2, 0xf76f5c1517762522ull},
    };
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct recorded *c = &cases[i];
        const struct plena_moe_model *mdl = plena_model_preset_find(c->model);
        assert_non_null(mdl);
        struct plena_moe_build_opts o;
        plena_moe_build_opts_init(&o, mdl, &m, c->T);
        o.weights = c->weights;
        o.lazy_experts = c->lazy > 0;
        o.threads = c->lazy < 0 ? (uint32_t)-c->lazy : 0;
        struct plena_err err;
        plena_err_clear(&err);
        uint32_t *ids = NULL;
        float *w = NULL;
        assert_int_equal(plena_moe_build_routing(&o, mdl, c->routing, 7, &ids, &w, &err), 0);
        struct plena_moe_build b;
        assert_int_equal(plena_moe_build_run(&o, &b, &err), 0);
        const uint64_t d = build_digest(&b);
        if (d != c->digest)
            print_message("%s T=%u weights %d lazy %d: 0x%016llxull\n", c->model, c->T, c->weights,
                          c->lazy, (unsigned long long)d);
        assert_int_equal(d, c->digest);
        plena_moe_build_free(&b);
        plena_free(ids);
        plena_free(w);
    }
}

/* A weights or input mode outside model.h's lists is refused with one
 * message naming the key and the choices (it used to stage the router and
 * shared expert as random and the routed experts as zeros). */
static void test_bad_data_mode(void **state)
{
    (void)state;
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    const struct plena_moe_model *mdl = plena_model_preset_find("tiny-ds-shared");
    assert_non_null(mdl);
    for (int which = 0; which < 2; which++) {
        struct plena_moe_build_opts o;
        plena_moe_build_opts_init(&o, mdl, &m, 4);
        if (which == 0)
            o.weights = (enum plena_weights_mode)7;
        else
            o.input = (enum plena_input_mode)9;
        struct plena_moe_build b;
        struct plena_err err;
        plena_err_clear(&err);
        assert_int_equal(plena_moe_build_run(&o, &b, &err), PLENA_E_INPUT);
        assert_string_equal(err.where, which == 0 ? "weights" : "input");
        assert_non_null(
            strstr(err.msg, which == 0 ? "random, zero or representable" : "random or zeros"));
        plena_moe_build_free(&b);
    }
}

/* ---- hbm.bin: the regions' bytes, zero chunks left as holes ---- */

static int zero4k(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* The written file holds every region at its base and zeros elsewhere,
 * and exactly the non-zero 4 KiB chunks of the regions were written (zero
 * weights leave whole code chunks zero between non-zero ones). */
static void test_hbm_file(void **state)
{
    (void)state;
    char dir[256], sub[300], path[400];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "gen_hbm"), 0);
    static const enum plena_weights_mode modes[] = {PLENA_WEIGHTS_RANDOM, PLENA_WEIGHTS_ZERO};
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    const struct plena_moe_model *mdl = plena_model_preset_find("tiny-route-128x8");
    assert_non_null(mdl);
    for (int i = 0; i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/b%d", dir, i);
        struct plena_moe_build_opts o;
        plena_moe_build_opts_init(&o, mdl, &m, 16);
        o.weights = modes[i];
        o.out_dir = sub;
        struct plena_err err;
        plena_err_clear(&err);
        uint32_t *ids = NULL;
        float *w = NULL;
        assert_int_equal(plena_moe_build_routing(&o, mdl, "random", 3, &ids, &w, &err), 0);
        struct plena_moe_build b;
        assert_int_equal(plena_moe_build_run(&o, &b, &err), 0);
        snprintf(path, sizeof path, "%s/hbm.bin", sub);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(plena_file_read_all(path, &data, &len, &err), 0);
        assert_int_equal(len, b.hbm_size);
        uint8_t *want = plena_calloc(len + 1, 1);
        assert_non_null(want);
        uint64_t written = 0, zero_chunks = 0;
        for (size_t r = 0; r < b.n_hbm; r++) {
            const struct plena_hbm_region *g = &b.hbm[r];
            memcpy(want + g->base, g->bytes, (size_t)g->n);
            for (uint64_t c = 0; c < g->n; c += 4096) {
                const size_t n = g->n - c < 4096 ? (size_t)(g->n - c) : 4096;
                if (zero4k(g->bytes + c, n))
                    zero_chunks++;
                else
                    written += n;
            }
        }
        assert_memory_equal(data, want, len);
        assert_int_equal(b.hbm_bytes_written, written);
        if (modes[i] == PLENA_WEIGHTS_ZERO) assert_true(zero_chunks > 0);
        plena_free(want);
        plena_free(data);
        plena_moe_build_free(&b);
        plena_free(ids);
        plena_free(w);
    }
    assert_int_equal(plena_test_rmtree(dir), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hbm_file),
    cmocka_unit_test(test_mx_fused),
    cmocka_unit_test(test_recorded_builds),
    cmocka_unit_test(test_bad_data_mode),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
