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
#include <dirent.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "gen/build.h"
#include "gen/weight_cache.h"
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

/* The regions of build b are pairwise disjoint (the memory ABI's tensors
 * do not overlap: what lets eager regions live in hbm.bin's mapping). */
static void assert_disjoint(const struct plena_moe_build *b)
{
    for (size_t i = 0; i < b->n_hbm; i++)
        for (size_t j = i + 1; j < b->n_hbm; j++) {
            const struct plena_hbm_region *x = &b->hbm[i], *y = &b->hbm[j];
            assert_false(x->base < y->base + y->n && y->base < x->base + x->n);
        }
}

/* One build of a preset for the hbm.bin tests (routing NULL: the preset's
 * default; hbm_size 0: the machine's); returns plena_moe_build_run's code,
 * b to be freed by the caller either way. */
struct build_req {
    const char *model, *routing;
    uint32_t T;
    enum plena_weights_mode weights;
    const char *out_dir;
    int in_memory;
    uint64_t hbm_size;
    const char *weight_cache;
    uint32_t threads;
    int lazy;
    enum plena_mx_mode mx_mode; /* 0: PLENA */
};

static int build_req_run(const struct build_req *q, struct plena_moe_build *b,
                         struct plena_err *err)
{
    struct plena_gen_machine m;
    plena_gen_machine_default(&m);
    const struct plena_moe_model *mdl = plena_model_preset_find(q->model);
    assert_non_null(mdl);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, mdl, &m, q->T);
    o.weights = q->weights;
    o.out_dir = q->out_dir;
    o.regions_in_memory = q->in_memory;
    o.weight_cache = q->weight_cache;
    o.threads = q->threads;
    o.lazy_experts = q->lazy;
    o.mx_mode = q->mx_mode;
    if (q->hbm_size) o.cfg.m.hbm_size = q->hbm_size;
    plena_err_clear(err);
    uint32_t *ids = NULL;
    float *w = NULL;
    assert_int_equal(plena_moe_build_routing(&o, mdl, q->routing, 3, &ids, &w, err), 0);
    int rc = plena_moe_build_run(&o, b, err); /* the build copies the routing */
    plena_free(ids);
    plena_free(w);
    return rc;
}

/* The written file holds every region at its base and zeros elsewhere,
 * exactly the non-zero 4 KiB chunks of the regions count as written (zero
 * weights leave whole code chunks zero between non-zero ones), and the
 * file is the same whether the eager regions were generated into hbm.bin's
 * mapping (the default with a directory) or in memory and pwritten; zero
 * pages are holes either way (docs/design.md "Eager regions in hbm.bin's
 * mapping"). */
static void test_hbm_file(void **state)
{
    (void)state;
    char dir[256], sub[300], path[400];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "gen_hbm"), 0);
    static const enum plena_weights_mode modes[] = {PLENA_WEIGHTS_RANDOM, PLENA_WEIGHTS_ZERO};
    /* a tiny preset (regions of a few KB) and one whose regions span many pages */
    static const char *const models[] = {"tiny-route-128x8", "deepseek-v2-lite-mini"};
    for (int i = 0; i < 8; i++) {
        const int in_memory = i / 2 % 2;
        snprintf(sub, sizeof sub, "%s/b%d", dir, i);
        const struct build_req q = {models[i / 4], "random", 16, modes[i % 2],  sub, in_memory, 0,
                                    NULL,          1,        0,  PLENA_MX_PLENA};
        struct plena_err err;
        struct plena_moe_build b;
        assert_int_equal(build_req_run(&q, &b, &err), 0);
        /* the path asked for was taken: every region in the mapping, or none */
        assert_int_equal(b.hbm_map == NULL, in_memory);
        assert_null(b.hbm_tmp);
        for (size_t r = 0; r < b.n_hbm; r++)
            assert_int_equal(b.hbm[r].in_map, !in_memory);
        assert_disjoint(&b);
        assert_int_equal(plena_test_dir_count(sub, ".tmp."), 0);
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
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        if (modes[i % 2] == PLENA_WEIGHTS_ZERO) {
            assert_true(zero_chunks > 0);
            /* the zero pages are holes: allocated are at most the written
             * chunks, the partial pages at the regions' ends and the file
             * system's own slack */
            assert_true((uint64_t)st.st_blocks * 512 <= written + 2 * 4096 * b.n_hbm + 65536);
        }
        /* the same bytes as the other path's build of the same mode */
        if (in_memory) {
            char other[400], *od = NULL;
            size_t ol = 0;
            snprintf(other, sizeof other, "%s/b%d/hbm.bin", dir, i - 2);
            assert_int_equal(plena_file_read_all(other, &od, &ol, &err), 0);
            assert_int_equal(ol, len);
            assert_memory_equal(od, data, len);
            plena_free(od);
        }
        plena_free(want);
        plena_free(data);
        plena_moe_build_free(&b);
    }
    assert_int_equal(plena_test_rmtree(dir), 0);
}

/* A build that fails after hbm.bin's temporary was mapped (its data do
 * not fit HBM_SIZE) leaves neither hbm.bin nor the temporary behind, nor
 * the output directory it created; in a directory that existed, only the
 * temporary goes. */
static void test_hbm_map_failed_build(void **state)
{
    (void)state;
    char dir[256], sub[300];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "gen_hbm_fail"), 0);
    for (int existed = 0; existed < 2; existed++) {
        /* two new levels, or the test's own directory */
        snprintf(sub, sizeof sub, existed ? "%s" : "%s/new/b", dir);
        /* HBM_SIZE far below the experts' bytes */
        const struct build_req q = {
            "tiny-route-128x8", "random", 16, PLENA_WEIGHTS_RANDOM, sub, 0, 4096, NULL, 1, 0,
            PLENA_MX_PLENA};
        struct plena_err err;
        struct plena_moe_build b;
        assert_int_equal(build_req_run(&q, &b, &err), PLENA_E_INPUT);
        assert_string_equal(err.where, "HBM_SIZE");
        assert_non_null(b.hbm_map); /* the failure came after the mapping */
        assert_int_equal(plena_test_dir_count(sub, "hbm.bin"), 1); /* the temporary, until freed */
        plena_moe_build_free(&b);
        struct stat st;
        if (existed) {
            assert_int_equal(plena_test_dir_count(sub, "hbm.bin"), 0);
        } else {
            char parent[300];
            snprintf(parent, sizeof parent, "%s/new", dir);
            assert_int_not_equal(stat(parent, &st), 0);
        }
        assert_int_equal(stat(dir, &st), 0);
    }
    assert_int_equal(plena_test_rmtree(dir), 0);
}

/* Every preset's build has disjoint regions (the premise of the mapping)
 * and the same digest with the regions in hbm.bin's mapping as in memory. */
static void test_hbm_map_presets(void **state)
{
    (void)state;
    char dir[256], sub[300];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "gen_hbm_presets"), 0);
    static const char *const models[] = {"tiny-route-32x4", "tiny-gpt-oss",
                                         "tiny-ds-shared",  "tiny-qwen2-gated",
                                         "tiny-straddle",   "deepseek-v2-lite-mini"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        uint64_t d[2];
        for (int in_memory = 0; in_memory < 2; in_memory++) {
            snprintf(sub, sizeof sub, "%s/%s.%d", dir, models[i], in_memory);
            const struct build_req q = {models[i], NULL, 4, PLENA_WEIGHTS_RANDOM, sub, in_memory, 0,
                                        NULL,      1,    0, PLENA_MX_PLENA};
            struct plena_err err;
            struct plena_moe_build b;
            assert_int_equal(build_req_run(&q, &b, &err), 0);
            assert_int_equal(b.hbm_map == NULL, in_memory);
            assert_disjoint(&b);
            d[in_memory] = build_digest(&b);
            plena_moe_build_free(&b);
        }
        assert_int_equal(d[0], d[1]);
    }
    assert_int_equal(plena_test_rmtree(dir), 0);
}

/* ---- the weight cache (docs/design.md "Weight cache") ---- */

/* One deepseek-v2-lite-mini build (routed and shared expert matrices) into
 * out through cache (NULL: none); its hbm.bin into *data, the cache counts
 * into cnt. */
static void cache_build_mx(const char *cache, const char *out, uint32_t threads, int lazy,
                           enum plena_weights_mode mode, enum plena_mx_mode mx, char **data,
                           size_t *len, uint64_t cnt[PLENA_MOE_CACHE_N])
{
    const struct build_req q = {
        "deepseek-v2-lite-mini", "random", 16, mode, out, 0, 0, cache, threads, lazy, mx};
    struct plena_err err;
    struct plena_moe_build b;
    assert_int_equal(build_req_run(&q, &b, &err), 0);
    for (int i = 0; i < PLENA_MOE_CACHE_N; i++)
        cnt[i] = b.cache_counts[i];
    plena_moe_build_free(&b);
    char path[400];
    snprintf(path, sizeof path, "%s/hbm.bin", out);
    assert_int_equal(plena_file_read_all(path, data, len, &err), 0);
}

static void cache_build(const char *cache, const char *out, uint32_t threads, int lazy,
                        enum plena_weights_mode mode, char **data, size_t *len,
                        uint64_t cnt[PLENA_MOE_CACHE_N])
{
    cache_build_mx(cache, out, threads, lazy, mode, PLENA_MX_PLENA, data, len, cnt);
}

/* The n-th (sorted) entry of the cache directory, as a path. */
static void cache_entry(const char *cache, int n, char *path, size_t len)
{
    struct dirent **names;
    int k = scandir(cache, &names, NULL, alphasort), seen = 0;
    assert_true(k > 0);
    path[0] = 0;
    for (int i = 0; i < k; i++) {
        if (strstr(names[i]->d_name, ".mx") && seen++ == n)
            snprintf(path, len, "%s/%s", cache, names[i]->d_name);
        free(names[i]);
    }
    free(names);
    assert_true(path[0] != 0);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A cold cache stores every RANDOM matrix and a warm one supplies all of
 * them, eager (one and three threads) or lazy, with hbm.bin the uncached
 * build's; an entry whose bytes differ in a spot-checked row is found
 * stale, regenerated and replaced; a truncated entry and another matrix's
 * entry under this one's name are misses; zero weights never touch the
 * cache; OCP mode has entries of its own; a killed writer's temporary is
 * removed; a cache path that is a
 * file is an output error naming it. */
static void test_weight_cache(void **state)
{
    (void)state;
    char dir[256], cache[300], out[300], path[400];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "gen_wcache"), 0);
    snprintf(cache, sizeof cache, "%s/cache/sub", dir); /* created, parents too */
    char *want = NULL, *got = NULL;
    size_t wl = 0, gl = 0;
    uint64_t c[PLENA_MOE_CACHE_N];
    snprintf(out, sizeof out, "%s/plain", dir);
    cache_build(NULL, out, 1, 0, PLENA_WEIGHTS_RANDOM, &want, &wl, c);
    assert_int_equal(c[PLENA_MOE_CACHE_HITS] + c[PLENA_MOE_CACHE_STORED], 0);

    /* what a killed writer left (its pid cannot be running) goes */
    assert_int_equal(plena_mkdir_p(cache, NULL), 0);
    snprintf(path, sizeof path, "%s/r0-e0-0.mx.tmp.99999999.0", cache);
    assert_int_equal(plena_file_write_atomic(path, "x", 1, NULL), 0);
    snprintf(out, sizeof out, "%s/cold", dir);
    cache_build(cache, out, 1, 0, PLENA_WEIGHTS_RANDOM, &got, &gl, c);
    assert_int_equal(plena_test_dir_count(cache, ".tmp."), 0);
    const uint64_t n = c[PLENA_MOE_CACHE_STORED];
    assert_true(n > 3); /* routed experts' three matrices and the shared ones */
    assert_int_equal(c[PLENA_MOE_CACHE_HITS], 0);
    assert_int_equal(plena_test_dir_count(cache, ".mx"), (int)n);
    assert_int_equal(gl, wl);
    assert_memory_equal(got, want, wl);
    plena_free(got);

    for (int v = 0; v < 3; v++) { /* warm: one thread, three threads, lazy */
        snprintf(out, sizeof out, "%s/warm%d", dir, v);
        cache_build(cache, out, v == 1 ? 3 : 1, v == 2, PLENA_WEIGHTS_RANDOM, &got, &gl, c);
        assert_int_equal(c[PLENA_MOE_CACHE_HITS], n);
        assert_int_equal(c[PLENA_MOE_CACHE_STORED] + c[PLENA_MOE_CACHE_STALE], 0);
        assert_int_equal(gl, wl);
        assert_memory_equal(got, want, wl);
        plena_free(got);
    }

    /* one code byte of row K/2 of the first entry changed: stale */
    cache_entry(cache, 0, path, sizeof path);
    char *e = NULL;
    size_t el = 0;
    struct plena_err err;
    assert_int_equal(plena_file_read_all(path, &e, &el, &err), 0);
    const uint8_t *h = (const uint8_t *)e;
    assert_memory_equal(h, "PLENAWC\n", 8);
    const uint32_t K = le32(h + 32), N_p = le32(h + 52);
    assert_int_equal(el, 128 + plena_moe_mx_bytes(le32(h + 48), N_p));
    e[128 + (size_t)(K / 2) * N_p] ^= 0x11;
    assert_int_equal(plena_file_write_atomic(path, e, el, &err), 0);
    snprintf(out, sizeof out, "%s/stale", dir);
    cache_build(cache, out, 1, 0, PLENA_WEIGHTS_RANDOM, &got, &gl, c);
    assert_int_equal(c[PLENA_MOE_CACHE_STALE], 1);
    assert_int_equal(c[PLENA_MOE_CACHE_STORED], 1);
    assert_int_equal(c[PLENA_MOE_CACHE_HITS], n - 1);
    assert_memory_equal(got, want, wl);
    plena_free(got);
    char *fixed = NULL;
    size_t fl = 0;
    assert_int_equal(plena_file_read_all(path, &fixed, &fl, &err), 0);
    e[128 + (size_t)(K / 2) * N_p] ^= 0x11; /* the entry was replaced by the generator's bytes */
    assert_int_equal(fl, el);
    assert_memory_equal(fixed, e, el);
    plena_free(fixed);

    /* truncated by one byte, then the second entry's file under the first's name: misses */
    assert_int_equal(plena_file_write_atomic(path, e, el - 1, &err), 0);
    char second[400], *s2 = NULL;
    size_t l2 = 0;
    cache_entry(cache, 1, second, sizeof second);
    for (int v = 0; v < 2; v++) {
        if (v) {
            assert_int_equal(plena_file_read_all(second, &s2, &l2, &err), 0);
            assert_int_equal(plena_file_write_atomic(path, s2, l2, &err), 0);
            plena_free(s2);
        }
        snprintf(out, sizeof out, "%s/miss%d", dir, v);
        cache_build(cache, out, 1, 0, PLENA_WEIGHTS_RANDOM, &got, &gl, c);
        assert_int_equal(c[PLENA_MOE_CACHE_STORED], 1);
        assert_int_equal(c[PLENA_MOE_CACHE_HITS], n - 1);
        assert_int_equal(c[PLENA_MOE_CACHE_STALE], 0);
        assert_memory_equal(got, want, wl);
        plena_free(got);
    }
    plena_free(e);
    plena_free(want);

    /* OCP mode: its own entries (the mode is part of the key), the uncached
     * OCP build's bytes cold and warm */
    char *ocp = NULL;
    size_t ol = 0;
    snprintf(out, sizeof out, "%s/ocp_plain", dir);
    cache_build_mx(NULL, out, 1, 0, PLENA_WEIGHTS_RANDOM, PLENA_MX_OCP, &ocp, &ol, c);
    for (int warm = 0; warm < 2; warm++) {
        snprintf(out, sizeof out, "%s/ocp%d", dir, warm);
        cache_build_mx(cache, out, 1, 0, PLENA_WEIGHTS_RANDOM, PLENA_MX_OCP, &got, &gl, c);
        assert_int_equal(c[warm ? PLENA_MOE_CACHE_HITS : PLENA_MOE_CACHE_STORED], n);
        assert_int_equal(c[warm ? PLENA_MOE_CACHE_STORED : PLENA_MOE_CACHE_HITS], 0);
        assert_int_equal(c[PLENA_MOE_CACHE_STALE], 0);
        assert_int_equal(gl, ol);
        assert_memory_equal(got, ocp, ol);
        plena_free(got);
    }
    assert_int_equal(plena_test_dir_count(cache, ".mx"), 2 * (int)n);
    plena_free(ocp);

    /* zero weights: nothing read or stored */
    snprintf(out, sizeof out, "%s/zero", dir);
    cache_build(cache, out, 1, 0, PLENA_WEIGHTS_ZERO, &got, &gl, c);
    assert_int_equal(c[PLENA_MOE_CACHE_HITS] + c[PLENA_MOE_CACHE_STORED], 0);
    assert_int_equal(plena_test_dir_count(cache, ".mx"), 2 * (int)n);
    plena_free(got);

    /* a file where the directory should be */
    snprintf(path, sizeof path, "%s/plain/hbm.bin", dir);
    snprintf(out, sizeof out, "%s/refused", dir);
    const struct build_req q = {
        "deepseek-v2-lite-mini", "random", 16, PLENA_WEIGHTS_RANDOM, out, 0, 0, path, 1, 0,
        PLENA_MX_PLENA};
    struct plena_moe_build b;
    assert_int_equal(build_req_run(&q, &b, &err), PLENA_E_OUTPUT);
    assert_non_null(strstr(err.where, "hbm.bin"));
    assert_non_null(strstr(err.msg, "not a directory"));
    plena_moe_build_free(&b);
    assert_int_equal(plena_test_rmtree(dir), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_weight_cache),
    cmocka_unit_test(test_hbm_file),
    cmocka_unit_test(test_hbm_map_failed_build),
    cmocka_unit_test(test_hbm_map_presets),
    cmocka_unit_test(test_mx_fused),
    cmocka_unit_test(test_recorded_builds),
    cmocka_unit_test(test_bad_data_mode),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
