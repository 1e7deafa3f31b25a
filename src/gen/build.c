/* MoE build directory writer
 * (docs/lowering.md "Memory ABI", "Model presets" and "Checking a build";
 * docs/replay.md "Pipeline"): test data generation, staging of every ABI
 * tensor into in-memory images, and the atomic directory writer (sparse
 * hbm.bin). Only experts the routing can reach are materialised (FIXED: the
 * selected ones; DEVICE: all). It never runs the emulator. */
#define _GNU_SOURCE /* fallocate: reserving and punching hbm.bin's blocks */
#include "gen/build.h"
#include "gen/route_plan.h"
#include "gen/weight_cache.h"
#include "gen/weights.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/pool.h"
#include "common/fileio.h"
#include "model/trace_model.h"
#include "isa/program.h"
#include "num/prng.h"

static uint32_t rup32(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a * a;
}

void plena_gen_machine_from_settings(const struct plena_settings *s, struct plena_gen_machine *m)
{
    plena_gen_machine_default(m);
    m->mlen = s->mlen;
    m->vlen = s->vlen;
    m->blen = s->blen;
    m->hlen = s->hlen;
    m->vram_elems = s->vector_sram_size * s->vlen;
    m->mram_tiles = s->matrix_sram_size / s->mlen;
    m->fp_depth = s->fp_sram_depth;
    m->int_depth = s->int_sram_depth;
    m->max_loop = s->max_loop_instructions;
    m->p_m = s->hbm_m_prefetch_amount;
    m->p_v = s->hbm_v_prefetch_amount;
    m->hbm_size = s->hbm_size;
}

void plena_moe_build_opts_init(struct plena_moe_build_opts *o, const struct plena_moe_model *mdl,
                               const struct plena_gen_machine *m, uint32_t T)
{
    memset(o, 0, sizeof *o);
    plena_moe_cfg_from_model(mdl, m, &o->cfg);
    o->T = T;
    o->weights = PLENA_WEIGHTS_RANDOM;
    o->weight_seed = 42;
    o->input = PLENA_INPUT_RANDOM;
    o->input_seed = 42;
    o->mx_mode = PLENA_MX_PLENA;
}

const struct plena_hbm_region *plena_moe_build_region(const struct plena_moe_build *b,
                                                      uint64_t base)
{
    for (size_t i = 0; i < b->n_hbm; i++)
        if (b->hbm[i].base == base) return &b->hbm[i];
    return NULL;
}

/* ---- routing: the choice of `plena moe --routing` and the generators ---- */

int plena_moe_build_check_model(const struct plena_moe_model *m, const struct plena_gen_machine *gm,
                                struct plena_err *err)
{
    char where[160];
    snprintf(where, sizeof where, "model %s", m->name);
    if (m->num_experts && m->top_k > m->num_experts)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "top_k %u exceeds num_experts %u", m->top_k,
                          m->num_experts);
    if (m->hidden % gm->mlen)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "hidden size %u is not a multiple of MLEN %u",
                          m->hidden, gm->mlen);
    return plena_model_validate(m, gm->mlen, err);
}

int plena_moe_routing_is_keyword(const char *routing)
{
    return !strcmp(routing, "device") || !strcmp(routing, "balanced") || !strcmp(routing, "random");
}

int plena_moe_build_routing(struct plena_moe_build_opts *o, const struct plena_moe_model *m,
                            const char *routing, uint64_t seed, uint32_t **ids, float **w,
                            struct plena_err *err)
{
    struct plena_moe_cfg *cfg = &o->cfg;
    if (cfg->routing == PLENA_ROUTING_NONE) return 0;
    if (!routing) routing = cfg->routing == PLENA_ROUTING_DEVICE ? "device" : "balanced";
    if (!strcmp(routing, "device")) {
        if (cfg->routing == PLENA_ROUTING_FIXED) {
            char where[160];
            snprintf(where, sizeof where, "model %s", m->name);
            if (!plena_moe_router_on_device(&m->router))
                return PLENA_FAIL(err, PLENA_E_INPUT, where,
                                  "its router (%s scores%s%s) has no device form: a capacity "
                                  "needs every token's choice first (docs/lowering.md "
                                  "\"Routers\"); use --routing balanced|random|FILE",
                                  plena_router_score_name(m->router.score),
                                  m->router.n_group > 1 ? ", group-limited" : "",
                                  m->router.capacity != PLENA_CAPACITY_NONE ? ", capacity" : "");
            cfg->routing = PLENA_ROUTING_DEVICE;
        }
        return 0;
    }
    cfg->routing = PLENA_ROUTING_FIXED;
    if (plena_moe_routing_is_keyword(routing)) {
        const size_t n = (size_t)o->T * cfg->k;
        *ids = plena_malloc(n * sizeof **ids);
        *w = plena_malloc(n * sizeof **w);
        if (!*ids || !*w) return PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory");
        if (!strcmp(routing, "balanced"))
            plena_moe_routing_balanced(o->T, cfg->E, cfg->k, *ids, *w);
        else
            plena_moe_routing_random(o->T, cfg->E, cfg->k, seed, *ids, *w);
        /* the weights the model's router would give (docs/lowering.md
         * "Routing"): groups, normalisation, scaling, capacity drops */
        int rc = plena_router_synth(&m->router, o->T, cfg->E, cfg->k, *ids, *w, err);
        if (rc) return rc;
    }
    o->fixed_ids = *ids;
    o->fixed_w = *w;
    return 0;
}

void plena_moe_routing_balanced(uint32_t T, uint32_t E, uint32_t k, uint32_t *ids, float *w)
{
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t j = 0; j < k; j++) {
            ids[t * k + j] = (uint32_t)(((uint64_t)t * k + j) % E);
            w[t * k + j] = 1.0f / (float)k;
        }
}

void plena_moe_routing_random(uint32_t T, uint32_t E, uint32_t k, uint64_t seed, uint32_t *ids,
                              float *w)
{
    uint32_t *perm = plena_malloc((size_t)E * sizeof *perm);
    for (uint32_t t = 0; t < T; t++) {
        struct plena_prng g;
        const uint64_t words[3] = {PLENA_PRNG_TAG_ROUTING, 0, t};
        plena_prng_derive(&g, seed, words, 3);
        for (uint32_t e = 0; e < E; e++)
            perm[e] = e;
        if (perm) plena_prng_shuffle_u32(&g, perm, E);
        double sc[256], sum = 0;
        for (uint32_t j = 0; j < k && j < 256; j++) {
            sc[j] = exp(plena_prng_uniform(&g));
            sum += sc[j];
        }
        for (uint32_t j = 0; j < k; j++) {
            ids[t * k + j] = perm ? perm[j] : j;
            w[t * k + j] = j < 256 ? (float)(sc[j] / sum) : 0.0f;
        }
    }
    plena_free(perm);
}

/* ---- value generation (gen/weights.c) ---- */

static void gen_values(const struct plena_moe_build_opts *o, unsigned role, uint32_t expert,
                       uint32_t K, uint32_t N, uint32_t fan_in, float *out)
{
    plena_moe_weights_values(o->weights, o->weight_seed, role, expert, K, N, fan_in, out);
}

/* ---- staging ---- */

/* A mapped region's bytes moved to memory of its own (they stay in the
 * file too), so that a later region written over them by write_hbm does
 * not change what the region holds. */
static int evict_region(struct plena_hbm_region *r)
{
    uint8_t *p = plena_malloc(r->n ? (size_t)r->n : 1);
    if (!p) return PLENA_E_NOMEM;
    memcpy(p, r->bytes, (size_t)r->n);
    r->bytes = p;
    r->in_map = 0;
    return 0;
}

/* A new region entry (bytes NULL); NULL when out of memory. A mapped
 * region it overlaps is evicted first (write_hbm will write the new one
 * over it). */
static struct plena_hbm_region *new_region(struct plena_moe_build *b, uint64_t base, uint64_t n)
{
    for (size_t i = 0; b->hbm_map && i < b->n_hbm; i++) {
        struct plena_hbm_region *r = &b->hbm[i];
        if (r->in_map && base < r->base + r->n && r->base < base + n && evict_region(r))
            return NULL;
    }
    if (b->n_hbm == b->cap_hbm) {
        size_t nc = b->cap_hbm ? 2 * b->cap_hbm : 16;
        struct plena_hbm_region *r = plena_realloc(b->hbm, nc * sizeof *r);
        if (!r) return NULL;
        b->hbm = r;
        b->cap_hbm = nc;
    }
    struct plena_hbm_region *r = &b->hbm[b->n_hbm++];
    memset(r, 0, sizeof *r);
    r->base = base;
    r->n = n;
    return r;
}

/* The n bytes at base inside the mapping of hbm.bin's temporary (zero:
 * the file there is a hole), or NULL when the region lives in
 * memory: no mapping, outside the file, overlapping a region staged earlier
 * (write_hbm writes regions in order, the later one's non-zero chunks over
 * the earlier one's, so both are buffers of their own, as before), or its
 * blocks not reserved. The reservation (fallocate) is what makes the
 * mapping safe: a store into a hole the file system cannot allocate raises
 * SIGBUS instead of returning an error; a region that cannot be reserved (no
 * space, a file system without fallocate) goes through pwrite, whose errors
 * are reported. */
static uint8_t *map_region_bytes(struct plena_moe_build *b, uint64_t base, uint64_t n)
{
    if (!b->hbm_map || n == 0 || base > b->hbm_size || n > b->hbm_size - base) return NULL;
    for (size_t i = 0; i < b->n_hbm; i++) {
        const struct plena_hbm_region *r = &b->hbm[i];
        if (base < r->base + r->n && r->base < base + n) return NULL;
    }
    const uint64_t lo = base & ~(uint64_t)4095;
    if (fallocate(b->hbm_map_fd, FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(base + n - lo)) != 0)
        return NULL;
    return b->hbm_map + base;
}

static int add_region(struct plena_moe_build *b, uint64_t base, uint64_t n, uint8_t **bytes)
{
    uint8_t *p = map_region_bytes(b, base, n);
    const int in_map = p != NULL;
    if (!p && !(p = plena_calloc(n ? n : 1, 1))) return PLENA_E_NOMEM;
    struct plena_hbm_region *r = new_region(b, base, n);
    if (!r) {
        if (!in_map) plena_free(p);
        return PLENA_E_NOMEM;
    }
    r->bytes = p;
    r->in_map = (uint8_t)in_map;
    *bytes = p;
    return 0;
}

static int stage_mx(struct plena_moe_build *b, uint64_t base, const float *v, uint32_t K,
                    uint32_t N, uint32_t K_p, uint32_t N_p)
{
    uint8_t *bytes;
    if (add_region(b, base, plena_moe_mx_bytes(K_p, N_p), &bytes)) return PLENA_E_NOMEM;
    return plena_moe_encode_mx(b->mx_mode, v, K, N, K_p, N_p, bytes);
}

static int fail_nomem(struct plena_err *err)
{
    return PLENA_FAIL(err, PLENA_E_NOMEM, "plena_moe_build", "out of memory");
}

static void count_cache(const struct plena_moe_build *b, int what)
{
    __atomic_fetch_add(&b->cache_counts[what], 1, __ATOMIC_RELAXED);
}

/* The generated tensor role/expert [K][N] as MXFP8 [K_p, N_p] into bytes:
 * with a weight cache, a RANDOM matrix comes from its entry when the entry
 * passes the spot check (three rows drawn afresh), else it is generated and
 * stored (docs/design.md "Weight cache"); the bytes are the generator's
 * either way. Safe on the fill threads: each writes only its own bytes and
 * entry. */
static int gen_matrix(const struct plena_moe_build *b, unsigned role, uint32_t expert, uint32_t K,
                      uint32_t N, uint32_t fan_in, uint32_t K_p, uint32_t N_p, uint8_t *bytes,
                      struct plena_err *err)
{
    const int cached = b->weight_cache && b->weights == PLENA_WEIGHTS_RANDOM;
    const uint64_t n = plena_moe_mx_bytes(K_p, N_p);
    const struct plena_weight_key k = {b->weight_seed,       role, expert, K, N, fan_in,
                                       (uint32_t)b->mx_mode, K_p,  N_p};
    int rc;
    if (cached) {
        int hit = 0, match = 0;
        if ((rc = plena_weight_cache_load(b->weight_cache, &k, bytes, n, &hit, err))) return rc;
        if (hit && plena_moe_weights_mx_spot_check(b->weight_seed, role, expert, K, N, fan_in,
                                                   b->mx_mode, K_p, N_p, bytes, &match))
            return fail_nomem(err);
        if (hit && match) {
            count_cache(b, PLENA_MOE_CACHE_HITS);
            return 0;
        }
        if (hit) count_cache(b, PLENA_MOE_CACHE_STALE);
    }
    if (plena_moe_weights_mx(b->weights, b->weight_seed, role, expert, K, N, fan_in, b->mx_mode,
                             K_p, N_p, bytes))
        return fail_nomem(err);
    if (!cached) return 0;
    if ((rc = plena_weight_cache_store(b->weight_cache, &k, bytes, n, err))) return rc;
    count_cache(b, PLENA_MOE_CACHE_STORED);
    return 0;
}

/* The generated tensor role/expert [K][N] as MXFP8 [K_p, N_p] at base. */
static int stage_gen_mx(struct plena_moe_build *b, uint64_t base, unsigned role, uint32_t expert,
                        uint32_t K, uint32_t N, uint32_t fan_in, uint32_t K_p, uint32_t N_p,
                        struct plena_err *err)
{
    uint8_t *bytes;
    if (add_region(b, base, plena_moe_mx_bytes(K_p, N_p), &bytes)) return fail_nomem(err);
    return gen_matrix(b, role, expert, K, N, fan_in, K_p, N_p, bytes, err);
}

/* ---- lazy routed expert matrices (docs/design.md "Lazy routed expert weights") ---- */

static const unsigned expert_roles[3] = {PLENA_ROLE_GATE, PLENA_ROLE_UP, PLENA_ROLE_DOWN};

/* Matrix q's logical and padded shape: gate/up [H][I], down [I][H]. */
static void expert_shape(const struct plena_moe_build *b, unsigned q, uint32_t *K, uint32_t *N,
                         uint32_t *K_p, uint32_t *N_p)
{
    const struct plena_moe_map *mp = &b->info.map;
    *K = q < 2 ? b->cfg.H : b->cfg.I;
    *N = q < 2 ? b->cfg.I : b->cfg.H;
    *K_p = q < 2 ? mp->H_p : mp->I_p;
    *N_p = q < 2 ? mp->I_p : mp->H_p;
}

void plena_moe_scratch_free(struct plena_moe_scratch *s)
{
    plena_free(s->bytes);
    memset(s, 0, sizeof *s);
}

int plena_moe_build_region_bytes(const struct plena_moe_build *b, const struct plena_hbm_region *r,
                                 struct plena_moe_scratch *s, const uint8_t **bytes,
                                 struct plena_err *err)
{
    *bytes = r->bytes;
    if (r->bytes) return 0;
    if (plena_grow((void **)&s->bytes, &s->cap_bytes, (size_t)r->n, 1))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "build",
                          "out of memory for a %llu-byte expert matrix", (unsigned long long)r->n);
    if (b->image_path) {
        int rc =
            plena_fd_read_range(b->image_fd, b->image_path, r->base, s->bytes, (size_t)r->n, err);
        if (rc) return rc;
    } else {
        uint32_t K, N, K_p, N_p;
        expert_shape(b, r->matrix, &K, &N, &K_p, &N_p);
        /* the bytes stage_experts would have staged */
        int rc =
            gen_matrix(b, expert_roles[r->matrix], r->expert, K, N, K, K_p, N_p, s->bytes, err);
        if (rc) return rc;
    }
    *bytes = s->bytes;
    return 0;
}

/* VRAM element address of logical (r, col) of tensor t (docs/lowering.md "Memory ABI"). */
static uint64_t vaddr(const struct plena_tensor *t, uint32_t r, uint32_t col, uint32_t V)
{
    return t->base + (uint64_t)(col / V) * t->prow * V + (uint64_t)r * V + col % V;
}

static int vram_need(struct plena_moe_build *b, const struct plena_tensor *t, uint32_t V)
{
    uint64_t end = t->base + (uint64_t)(t->pcol / V) * t->prow * V;
    if (end <= b->n_vram) return 0;
    uint16_t *nv = plena_realloc(b->vram, end * sizeof *nv);
    if (!nv) return PLENA_E_NOMEM;
    memset(nv + b->n_vram, 0, (end - b->n_vram) * sizeof *nv);
    b->vram = nv;
    b->n_vram = end;
    return 0;
}

/* Logical [rows][cols] floats into VRAM tensor t as BF16 (RNE). */
static int stage_vram(struct plena_moe_build *b, const struct plena_tensor *t, const float *v,
                      uint32_t rows, uint32_t cols, uint32_t V)
{
    if (!t || vram_need(b, t, V)) return PLENA_E_NOMEM;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++)
            b->vram[vaddr(t, r, c, V)] = plena_num_bf16_from_f32(v[(size_t)r * cols + c]);
    return 0;
}

/* RMSNorm of the staged BF16 rows in double (gate scaling only; the exact
 * device values do not matter for choosing m). */
static void xnorm64(const struct plena_moe_build *b, const struct plena_tensor *h, uint32_t t,
                    uint32_t H, uint32_t V, double *x)
{
    double ss = 0;
    for (uint32_t c = 0; c < H; c++) {
        x[c] = plena_num_bf16_to_f32(b->vram[vaddr(h, t, c, V)]);
        ss += x[c] * x[c];
    }
    double m = 1.0 / sqrt(ss / H + b->cfg.eps);
    for (uint32_t c = 0; c < H; c++)
        x[c] *= m;
}

static uint64_t route_addr(const void *ctx, int q, uint32_t e)
{
    return plena_moe_expert_base(ctx, q, e);
}

/* The expert-major routing region (route_plan.h) of ids/w: the same plan the
 * generator emitted against. The weights are the fp16 halves pair-major's
 * FP SRAM image would hold. out has map.route_bytes bytes. */
static int em_tables(const struct plena_moe_build *b, const uint32_t *ids, const float *w32,
                     uint8_t *out, struct plena_err *err)
{
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_map *mp = &b->info.map;
    struct plena_route_plan plan;
    int rc = plena_route_plan_build(&plan, b->T, cfg->k, cfg->E, mp->t_blk, cfg->m.blen,
                                    cfg->m.vlen, mp->em_max_tiles, ids, err);
    if (rc) return rc;
    if (plan.region_bytes != mp->route_bytes) {
        plena_route_plan_free(&plan);
        return PLENA_FAIL(err, PLENA_E_INPUT, "routing tables",
                          "the routing's tables have %llu bytes, the program's %llu (a routing "
                          "other than the one the program was generated for)",
                          (unsigned long long)plan.region_bytes,
                          (unsigned long long)mp->route_bytes);
    }
    const size_t np = (size_t)b->T * cfg->k;
    uint16_t *w16 = plena_malloc((np ? np : 1) * sizeof *w16);
    if (!w16) {
        plena_route_plan_free(&plan);
        return fail_nomem(err);
    }
    for (size_t i = 0; i < np; i++)
        w16[i] = plena_num_fp16_from_f32(w32[i]);
    plena_route_plan_tables(&plan, w16, cfg->placement == PLENA_ROUTE_INPUT, b->T, route_addr, mp,
                            out);
    plena_free(w16);
    plena_route_plan_free(&plan);
    return 0;
}

/* Pair-major fixed routing beyond the SRAMs: each block's ids (u32) and
 * weights (fp16 image halves), whole 64-byte records per block, at the
 * offsets of the map (pm_ids_stride, pm_w_base, pm_w_stride). */
static void pm_tables(const struct plena_moe_build *b, const uint32_t *ids, const float *w32,
                      uint8_t *out)
{
    const struct plena_moe_map *mp = &b->info.map;
    const uint32_t k = b->cfg.k;
    memset(out, 0, mp->route_bytes);
    for (uint32_t p = 0; p < b->T * k; p++) {
        const uint32_t blk = p / (mp->t_blk * k), i = p % (mp->t_blk * k);
        uint8_t *id = out + blk * mp->pm_ids_stride + 4ull * i;
        const uint32_t v = ids[p];
        id[0] = (uint8_t)v;
        id[1] = (uint8_t)(v >> 8);
        id[2] = (uint8_t)(v >> 16);
        id[3] = (uint8_t)(v >> 24);
        uint8_t *w = out + mp->pm_w_base + blk * mp->pm_w_stride + 2ull * i;
        const uint16_t h = plena_num_fp16_from_f32(w32[p]);
        w[0] = (uint8_t)h;
        w[1] = (uint8_t)(h >> 8);
    }
}

int plena_moe_build_route_image(const struct plena_moe_build *b, const uint32_t *ids,
                                const float *w32, struct plena_moe_route_image *img,
                                struct plena_err *err)
{
    memset(img, 0, sizeof *img);
    const struct plena_moe_map *mp = &b->info.map;
    const size_t np = (size_t)b->T * b->cfg.k;
    if (b->cfg.routing != PLENA_ROUTING_FIXED)
        return PLENA_FAIL(err, PLENA_E_INPUT, "routing image", "the layer has no fixed routing");
    const int em = b->info.routed_lowering == PLENA_LOWERING_EXPERT_MAJOR;
    img->file = em || mp->pm_refill ? PLENA_BUILD_FILE_HBM : PLENA_BUILD_FILE_INT_SRAM;
    img->offset =
        img->file == PLENA_BUILD_FILE_HBM ? mp->route_hbm : 4ull * (mp->int_base + mp->ids_off);
    img->n = img->file == PLENA_BUILD_FILE_HBM ? mp->route_bytes : 4 * np;
    img->bytes = plena_malloc(img->n ? img->n : 1);
    if (!img->bytes) return fail_nomem(err);
    if (em) {
        int rc = em_tables(b, ids, w32, img->bytes, err);
        if (rc) {
            plena_free(img->bytes);
            img->bytes = NULL;
        }
        return rc;
    }
    if (mp->pm_refill) {
        pm_tables(b, ids, w32, img->bytes);
        return 0;
    }
    for (size_t p = 0; p < np; p++) /* the INT SRAM image: the ids as u32 */
        for (int q = 0; q < 4; q++)
            img->bytes[4 * p + q] = (uint8_t)(ids[p] >> (8 * q));
    return 0;
}

/* The HBM region of the fixed routing (expert-major tables, pair-major
 * refill records) from the build's own ids. */
static int stage_route_region(struct plena_moe_build *b, struct plena_err *err)
{
    struct plena_moe_route_image img;
    int rc = plena_moe_build_route_image(b, b->fixed_ids, b->fixed_w32, &img, err);
    if (rc) return rc;
    uint8_t *bytes = NULL;
    if (add_region(b, img.offset, img.n, &bytes)) {
        plena_free(img.bytes);
        return fail_nomem(err);
    }
    memcpy(bytes, img.bytes, img.n);
    plena_free(img.bytes);
    return 0;
}

/* The selection bias's synthetic values (docs/lowering.md "Routers"):
 * uniform in [-a, a], a = 2^-5 for sigmoid scores (about 0.5 +- 0.15 with
 * random router weights) and 1 / (4E) for softmax probabilities (about 1/E),
 * so the bias moves some selections without deciding them all. */
static void sel_bias_values(const struct plena_moe_build_opts *o, float *out)
{
    const struct plena_moe_cfg *cfg = &o->cfg;
    struct plena_prng g;
    const uint64_t words[3] = {PLENA_PRNG_TAG_WEIGHTS, PLENA_ROLE_ROUTER_SEL_BIAS, 0};
    plena_prng_derive(&g, o->weight_seed, words, 3);
    const double a =
        cfg->router.score == PLENA_SCORE_SIGMOID ? 1.0 / 32.0 : 1.0 / (4.0 * (double)cfg->E);
    for (uint32_t e = 0; e < cfg->E; e++)
        out[e] = plena_num_round_bf16((float)((2.0 * plena_prng_uniform(&g) - 1.0) * a));
}

/* The device router's VRAM constants (router.c, gen/emit.h struct
 * gen_router), each [rows, VLEN] with expert id = row % eb x VLEN + lane:
 * router_pad 0 below E and -inf beyond; router_sel_bias the selection bias;
 * router_eye row e x eb + r one at lane e of row e / VLEN; per group g,
 * router_group_mask 0 on its lanes and -inf elsewhere, router_group_ind 1
 * and 0. tmp: scratch of at least eb x VLEN floats. */
static int stage_router_consts(const struct plena_moe_build_opts *o, struct plena_moe_build *b,
                               float *tmp)
{
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_emit_info *info = &b->info;
    const uint32_t V = cfg->m.vlen, E = cfg->E, eb = info->map.eb;
    const uint32_t G = cfg->router.n_group > 1 ? cfg->router.n_group : 1, per = E / G;
    const struct plena_tensor *t;
    int rc;
    if ((t = plena_moe_abi_find(info, "router_pad"))) {
        for (uint32_t i = 0; i < eb * V; i++)
            tmp[i] = i < E ? 0.0f : -INFINITY;
        if ((rc = stage_vram(b, t, tmp, eb, V, V))) return rc;
    }
    if ((t = plena_moe_abi_find(info, "router_sel_bias"))) {
        memset(tmp, 0, (size_t)eb * V * sizeof *tmp);
        if (!o->router_logits) sel_bias_values(o, tmp); /* preloaded logits: zero */
        if ((rc = stage_vram(b, t, tmp, eb, V, V))) return rc;
    }
    if ((t = plena_moe_abi_find(info, "router_eye"))) {
        if ((rc = vram_need(b, t, V))) return rc;
        for (uint32_t e = 0; e < E; e++)
            b->vram[vaddr(t, e * eb + e / V, e % V, V)] = plena_num_bf16_from_f32(1.0f);
    }
    const struct plena_tensor *tm = plena_moe_abi_find(info, "router_group_mask"),
                              *ti = plena_moe_abi_find(info, "router_group_ind");
    if (tm && ti) {
        if ((rc = vram_need(b, tm, V)) || (rc = vram_need(b, ti, V))) return rc;
        for (uint32_t g = 0; g < G; g++)
            for (uint32_t i = 0; i < eb * V; i++) {
                const int in = i < E && i / per == g;
                b->vram[vaddr(tm, g * eb + i / V, i % V, V)] =
                    plena_num_bf16_from_f32(in ? 0.0f : -INFINITY);
                b->vram[vaddr(ti, g * eb + i / V, i % V, V)] =
                    plena_num_bf16_from_f32(in ? 1.0f : 0.0f);
            }
    }
    return 0;
}

/* FIXED routing's ids, before anything is staged from them. */
static int check_fixed_ids(const struct plena_moe_build *b, struct plena_err *err)
{
    const uint32_t E = b->cfg.E, k = b->cfg.k, T = b->T;
    for (uint32_t p = 0; b->cfg.routing == PLENA_ROUTING_FIXED && p < T * k; p++)
        if (b->fixed_ids[p] >= E)
            return PLENA_FAIL(err, PLENA_E_INPUT, "fixed routing",
                              "pair %u (token %u, rank %u): expert id %u >= E = %u", p, p / k,
                              p % k, b->fixed_ids[p], E);
    return 0;
}

/* Which experts the build materialises (b->present): FIXED the selected
 * ones; DEVICE the ones the bit-exact reference router reaches when the
 * caller gave o->reachable_experts (every input it reads is staged by now),
 * else all. */
static int mark_present(const struct plena_moe_build_opts *o, struct plena_moe_build *b,
                        struct plena_err *err)
{
    const uint32_t E = b->cfg.E, k = b->cfg.k, T = b->T;
    b->present = plena_calloc(E, 1);
    if (!b->present) return fail_nomem(err);
    if (b->cfg.routing == PLENA_ROUTING_FIXED) { /* ids checked by check_fixed_ids */
        for (uint32_t p = 0; p < T * k; p++)
            b->present[b->fixed_ids[p]] = 1;
        return 0;
    }
    if (o->router_logits && o->fixed_ids) {
        /* preloaded logits select exactly these (a device that routes
         * elsewhere meets an expert without weights: the check fails) */
        for (uint32_t p = 0; p < T * k; p++)
            if (o->fixed_ids[p] < E) b->present[o->fixed_ids[p]] = 1;
        return 0;
    }
    if (!o->reachable_experts) {
        memset(b->present, 1, E);
        return 0;
    }
    /* kept only once complete: the hook itself reads the routing through
     * plena_verify_routing_ids, which must not see a half-filled copy */
    const size_t np = (size_t)T * k;
    uint32_t *ids = plena_malloc((np ? np : 1) * sizeof *ids);
    if (!ids) return fail_nomem(err);
    int rc = o->reachable_experts(b, b->present, ids, err);
    if (rc)
        plena_free(ids);
    else
        b->device_ids = ids;
    return rc;
}

/* Eager routed expert regions b->hbm[first ..]: their bytes, matrices
 * taken in order by the threads of a pool (each writes only its own
 * region, so the bytes do not depend on the count). */
struct fill_job {
    struct plena_moe_build *b;
    size_t first;
};

static int fill_matrix(void *ctx, uint32_t item, uint32_t part, struct plena_err *err)
{
    (void)part;
    const struct fill_job *j = ctx;
    const struct plena_hbm_region *r = &j->b->hbm[j->first + item];
    uint32_t K, N, K_p, N_p;
    expert_shape(j->b, r->matrix, &K, &N, &K_p, &N_p);
    return gen_matrix(j->b, expert_roles[r->matrix], r->expert, K, N, K, K_p, N_p, r->bytes, err);
}

static int fill_experts(struct plena_moe_build *b, size_t first, uint32_t threads,
                        struct plena_err *err)
{
    struct fill_job j = {b, first};
    struct plena_pool *pool = threads > 1 ? plena_pool_new(threads) : NULL;
    if (threads > 1 && !pool) return fail_nomem(err); /* as the check's pools: no silent 1 thread */
    int rc = plena_pool_for(pool, (uint32_t)(b->n_hbm - first), fill_matrix, &j, err);
    plena_pool_free(pool);
    return rc;
}

/* The routed experts' weights (MX in HBM) and bias tables (VRAM) of the
 * experts in b->present; tmp holds at least max(H, I) floats (a bias row). */
static int stage_experts(const struct plena_moe_build_opts *o, struct plena_moe_build *b,
                         float *tmp, struct plena_err *err)
{
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_map *mp = &b->info.map;
    const struct plena_moe_emit_info *info = &b->info;
    const uint32_t V = cfg->m.vlen, H = cfg->H, I = cfg->I, E = cfg->E;
    uint64_t routed = 0;
    for (uint32_t e = 0; e < E; e++)
        for (unsigned q = 0; q < 3 && b->present[e]; q++) {
            uint32_t K, N, K_p, N_p;
            expert_shape(b, q, &K, &N, &K_p, &N_p);
            routed += plena_moe_mx_bytes(K_p, N_p);
        }
    b->lazy_experts = o->lazy_experts || routed > PLENA_MOE_LAZY_EXPERT_BYTES;
    /* the regions first, in expert order (an eager one with its zeroed
     * bytes), then the eager ones' bytes, on o->threads threads */
    const size_t first = b->n_hbm;
    for (uint32_t e = 0; e < E; e++) {
        if (!b->present[e]) continue;
        for (unsigned q = 0; q < 3; q++) {
            uint32_t K, N, K_p, N_p;
            expert_shape(b, q, &K, &N, &K_p, &N_p);
            uint64_t base = plena_moe_expert_base(mp, (int)q, e);
            uint8_t *bytes;
            if (!b->lazy_experts && add_region(b, base, plena_moe_mx_bytes(K_p, N_p), &bytes))
                return PLENA_E_NOMEM;
            struct plena_hbm_region *r = b->lazy_experts
                                             ? new_region(b, base, plena_moe_mx_bytes(K_p, N_p))
                                             : &b->hbm[b->n_hbm - 1];
            if (!r) return PLENA_E_NOMEM;
            r->expert = e;
            r->matrix = (uint8_t)q;
        }
    }
    int rc = b->lazy_experts ? 0 : fill_experts(b, first, o->threads, err);
    if (rc) return rc;
    if (cfg->expert_bias) {
        static const char *names[3] = {"b_gate", "b_up", "b_down"};
        static const unsigned broles[3] = {PLENA_ROLE_BIAS_GATE, PLENA_ROLE_BIAS_UP,
                                           PLENA_ROLE_BIAS_DOWN};
        for (int q = 0; q < 3; q++) {
            const struct plena_tensor *tb = plena_moe_abi_find(info, names[q]);
            uint32_t N = q < 2 ? I : H, fan = q < 2 ? H : I;
            if (!tb || vram_need(b, tb, V)) return PLENA_E_NOMEM;
            for (uint32_t e = 0; e < E; e++) {
                if (!b->present[e]) continue;
                gen_values(o, broles[q], e, 1, N, fan, tmp);
                for (uint32_t c = 0; c < N; c++)
                    b->vram[vaddr(tb, e, c, V)] = plena_num_bf16_from_f32(tmp[c]);
            }
        }
    }
    return 0;
}

/* Preloaded logits into `logits` (T x eb rows; lanes beyond E 0, as the
 * router GEMM leaves them). */
static int stage_logits(const struct plena_moe_build_opts *o, struct plena_moe_build *b)
{
    const uint32_t V = b->cfg.m.vlen, E = b->cfg.E, eb = b->info.map.eb;
    const struct plena_tensor *t = plena_moe_abi_find(&b->info, "logits");
    if (!t || vram_need(b, t, V)) return PLENA_E_NOMEM;
    for (uint32_t tok = 0; tok < b->T; tok++)
        for (uint32_t i = 0; i < eb * V; i++)
            b->vram[vaddr(t, tok * eb + i / V, i % V, V)] =
                plena_num_bf16_from_f32(i < E ? o->router_logits[(size_t)tok * E + i] : 0.0f);
    return 0;
}

static int stage_all(const struct plena_moe_build_opts *o, struct plena_moe_build *b,
                     struct plena_err *err)
{
    const struct plena_moe_cfg *cfg = &b->cfg;
    const struct plena_moe_map *mp = &b->info.map;
    const uint32_t V = cfg->m.vlen, T = b->T, H = cfg->H, E = cfg->E, k = cfg->k;
    const int routed = cfg->routing != PLENA_ROUTING_NONE;
    const int device = cfg->routing == PLENA_ROUTING_DEVICE;
    const int fixed = cfg->routing == PLENA_ROUTING_FIXED;
    const int em = fixed && b->info.routed_lowering == PLENA_LOWERING_EXPERT_MAJOR;
    const int refill = fixed && b->info.map.pm_refill;
    const int gate = cfg->Is && cfg->gate == PLENA_SHARED_GATE_SIGMOID;
    const struct plena_moe_emit_info *info = &b->info;
    int rc = check_fixed_ids(b, err);
    float *tmp = NULL;
    if (rc) return rc;

    /* ---- VRAM: h, gamma ---- */
    const struct plena_tensor *th = plena_moe_abi_find(info, "h");
    /* tmp: the float scratch of everything staged here through it -- h
     * [T][H], the router [H][E], the router bias / device constants [eb][V],
     * one row of a bias or gate (max(H, I)); the expert and shared-expert
     * matrices are drawn and encoded row by row (gen/weights.c), not here */
    size_t need = (size_t)T * H;
    if (need < (size_t)E * H) need = (size_t)E * H;
    if (need < (size_t)mp->eb * V) need = (size_t)mp->eb * V;
    if (need < (H > cfg->I ? H : cfg->I)) need = H > cfg->I ? H : cfg->I;
    tmp = plena_calloc(need ? need : 1, sizeof *tmp);
    if (!tmp) return fail_nomem(err);
    if (o->input == PLENA_INPUT_RANDOM) {
        struct plena_prng g;
        const uint64_t words[2] = {PLENA_PRNG_TAG_ACTIVATIONS, 0};
        plena_prng_derive(&g, o->input_seed, words, 2);
        const float sc = ldexpf(1.0f, o->input_scale_log2);
        for (size_t i = 0; i < (size_t)T * H; i++)
            tmp[i] = plena_num_round_bf16((float)(2.0 * plena_prng_uniform(&g) - 1.0)) * sc;
        if (o->router_gaps && device)
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t d = 0; d < 4 && d < H; d++)
                    tmp[(size_t)t * H + d] = d == t % 4 ? sc : 0.0f;
    } else {
        memset(tmp, 0, (size_t)T * H * sizeof *tmp);
    }
    if ((rc = stage_vram(b, th, tmp, T, H, V))) goto nomem;
    const struct plena_tensor *tg = plena_moe_abi_find(info, "gamma");
    if (tg) {
        /* RMSNorm weight = 1 (HF init); zero-centred norms stage 1 + 0 */
        for (uint32_t c = 0; c < H; c++)
            tmp[c] = 1.0f;
        if ((rc = stage_vram(b, tg, tmp, 1, H, V))) goto nomem;
    }

    /* ---- router ---- */
    if (device && o->router_logits && (rc = stage_logits(o, b))) goto nomem;
    if (device && !o->router_logits) {
        /* logical [H][E] */
        if (o->router_gaps) {
            memset(tmp, 0, (size_t)H * E * sizeof *tmp);
            uint32_t step = E / (k + 1);
            if (step < 1) step = 1;
            for (uint32_t d = 0; d < 4 && d < H; d++) {
                for (uint32_t e = 0; e < E; e++)
                    tmp[(size_t)d * E + e] = -2.0f;
                for (uint32_t j = 0; j <= k && j < E; j++) {
                    uint32_t id = (uint32_t)(((uint64_t)E - 1 - d % E + (uint64_t)j * step) % E);
                    tmp[(size_t)d * E + id] = -0.125f * (float)(j + 1);
                }
            }
        } else {
            gen_values(o, PLENA_ROLE_ROUTER, 0, H, E, H, tmp);
        }
        if (cfg->router_form == PLENA_ROUTER_DOT) {
            /* VRAM [E, H_p], row e = column e of the logical [H][E] */
            float *tr = plena_malloc((size_t)E * H * sizeof *tr);
            if (!tr) goto nomem;
            for (uint32_t e = 0; e < E; e++)
                for (uint32_t c = 0; c < H; c++)
                    tr[(size_t)e * H + c] = tmp[(size_t)c * E + e];
            rc = stage_vram(b, plena_moe_abi_find(info, "router_w"), tr, E, H, V);
            plena_free(tr);
            if (rc) goto nomem;
        } else {
            if ((rc = stage_mx(b, mp->router_hbm, tmp, H, E, mp->H_p, mp->E_p))) goto nomem;
        }
        if (cfg->router_bias) {
            const struct plena_tensor *tb = plena_moe_abi_find(info, "router_b");
            if (o->router_gaps)
                memset(tmp, 0, (size_t)mp->eb * V * sizeof *tmp);
            else {
                memset(tmp, 0, (size_t)mp->eb * V * sizeof *tmp);
                gen_values(o, PLENA_ROLE_ROUTER_BIAS, 0, 1, E, H, tmp);
            }
            /* [eb, VLEN]: row b holds bias[b*V ..] */
            if ((rc = stage_vram(b, tb, tmp, mp->eb, V, V))) goto nomem;
        }
    }

    if (device && mp->dev_router && (rc = stage_router_consts(o, b, tmp))) goto nomem;

    /* ---- shared experts ---- */
    if (cfg->Is) {
        const uint32_t Is = cfg->Is;
        if ((rc = stage_gen_mx(b, mp->shared[0], PLENA_ROLE_SHARED_GATE, 0, H, Is, H, mp->H_p,
                               mp->Is_p, err)) ||
            (rc = stage_gen_mx(b, mp->shared[1], PLENA_ROLE_SHARED_UP, 0, H, Is, H, mp->H_p,
                               mp->Is_p, err)) ||
            (rc = stage_gen_mx(b, mp->shared[2], PLENA_ROLE_SHARED_DOWN, 0, Is, H, Is, mp->Is_p,
                               mp->H_p, err))) {
            plena_free(tmp);
            return rc;
        }
    }
    b->gate_shift = -1;
    if (gate) {
        gen_values(o, PLENA_ROLE_SHARED_SIGMOID, 0, 1, H, H, tmp);
        double *x = plena_malloc((size_t)H * sizeof *x);
        if (!x) goto nomem;
        double mx = 0;
        for (uint32_t t = 0; t < T; t++) {
            xnorm64(b, th, t, H, V, x);
            double z = 0;
            for (uint32_t c = 0; c < H; c++)
                z += x[c] * (double)plena_num_round_bf16(tmp[c]);
            if (fabs(z) > mx) mx = fabs(z);
        }
        plena_free(x);
        int m = 0;
        while (mx * ldexp(1.0, -m) > 4.0 && m < 60)
            m++;
        b->gate_shift = m;
        for (uint32_t c = 0; c < H; c++)
            tmp[c] = ldexpf(tmp[c], -m);
        if ((rc = stage_vram(b, plena_moe_abi_find(info, "w_g"), tmp, 1, H, V))) goto nomem;
    }

    /* ---- FP SRAM (fp16) ---- */
    b->n_fp = mp->fp_base + mp->fp_used;
    b->fp16 = plena_calloc(b->n_fp ? b->n_fp : 1, sizeof *b->fp16);
    if (!b->fp16) goto nomem;
    {
        uint16_t *f = b->fp16 + mp->fp_base;
        f[mp->off_one] = mp->h_one;
        f[mp->off_na_routed] = mp->h_na_routed;
        f[mp->off_na_shared] = mp->h_na_shared;
        f[mp->off_lp] = mp->h_lp;
        f[mp->off_ln] = mp->h_ln;
        f[mp->off_eps] = mp->h_eps;
        f[mp->off_invh] = mp->h_invh;
        if (mp->dev_router) {
            f[mp->off_minus_one] = mp->h_minus_one;
            f[mp->off_neg_inf] = mp->h_neg_inf;
            f[mp->off_rsf] = mp->h_rsf;
            f[mp->off_reps] = mp->h_reps;
        }
        if (fixed && !em && !refill)
            for (uint32_t p = 0; p < T * k; p++)
                f[mp->w_off + p] = plena_num_fp16_from_f32(b->fixed_w32[p]);
    }
    /* ---- INT SRAM ---- */
    b->n_int = mp->int_base + mp->int_used;
    b->ints = plena_calloc(b->n_int ? b->n_int : 1, sizeof *b->ints);
    if (!b->ints) goto nomem;
    if (fixed && !em && !refill)
        for (uint32_t p = 0; p < T * k; p++)
            b->ints[mp->int_base + mp->ids_off + p] = b->fixed_ids[p];
    if ((refill || em) && (rc = stage_route_region(b, err))) {
        plena_free(tmp);
        return rc;
    }
    if (mp->em_dev) { /* the device sort's count table in HBM, n = 0..T_blk */
        uint8_t *bytes = NULL;
        if (add_region(b, mp->route_hbm, mp->route_bytes, &bytes)) goto nomem;
        plena_route_count_table(mp->t_blk, cfg->m.blen, mp->em_max_tiles, bytes);
    }
    if (mp->windowed && !em)
        for (uint32_t e = 0; e < E; e++)
            b->ints[mp->int_base + mp->wtab_off + e] = e / mp->epw;
    /* the experts last: a device-routed build asks which ones the router
     * reaches, from the staged inputs, router and SRAM images */
    if (routed && ((rc = mark_present(o, b, err)) || (rc = stage_experts(o, b, tmp, err)))) {
        plena_free(tmp);
        return rc == PLENA_E_NOMEM ? fail_nomem(err) : rc;
    }
    plena_free(tmp);
    return 0;
nomem:
    plena_free(tmp);
    return fail_nomem(err);
}

/* ---- build directory file names ---- */

static const char *const build_file_names[] = {
#define PLENA_BUILD_FILE(id, name, writer, what) name,
#include "gen/build_files.def"
#undef PLENA_BUILD_FILE
};
_Static_assert(sizeof build_file_names / sizeof build_file_names[0] == PLENA_BUILD_FILE_COUNT,
               "one name per build_files.def row");

const char *plena_build_file_name(enum plena_build_file f)
{
    return (unsigned)f < PLENA_BUILD_FILE_COUNT ? build_file_names[f] : NULL;
}

int plena_build_file_path(const char *dir, enum plena_build_file f, char *buf, size_t n,
                          struct plena_err *err)
{
    const char *name = plena_build_file_name(f);
    if (!name || plena_path_join(buf, n, dir, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    return 0;
}

/* ---- layout.json ---- */

/* layout.json's `router` (docs/lowering.md "Routers"): the router
 * description in the HF field names (plena_router_to_json), how this build
 * routes (device or fixed, and the device sequence), and the layout tensors
 * holding the selection bias and the logit bias (null: none). Fixed-routing
 * builds hold the final weights (scaling included, 0 for dropped pairs). */
static int layout_router(const struct plena_moe_build *bd, struct plena_buf *b)
{
    const struct plena_moe_cfg *cfg = &bd->cfg;
    const struct plena_moe_emit_info *info = &bd->info;
    json_t *o = plena_router_to_json(&cfg->router, cfg->name);
    struct plena_router_plan pl;
    plena_router_plan(&cfg->router, &pl);
    const int device = cfg->routing == PLENA_ROUTING_DEVICE;
    const struct plena_tensor *sb = plena_moe_abi_find(info, "router_sel_bias"),
                              *lb = plena_moe_abi_find(info, "router_b");
    int bad = !o;
    if (o) {
        bad |= json_object_set_new(o, "routing", json_string(device ? "device" : "fixed"));
        bad |= json_object_set_new(o, "device_lowering",
                                   device ? json_string(plena_router_lowering_name(pl.lowering))
                                          : json_null());
        bad |= json_object_set_new(o, "selection_bias_tensor",
                                   sb ? json_string(sb->name) : json_null());
        bad |=
            json_object_set_new(o, "logit_bias_tensor", lb ? json_string(lb->name) : json_null());
    }
    char *text = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!text) return PLENA_E_NOMEM;
    plena_buf_printf(b, "  \"router\": %s,\n", text);
    free(text);
    return 0;
}

int plena_moe_layout_json(const struct plena_moe_build *bd, struct plena_buf *b)
{
    const struct plena_moe_emit_info *info = &bd->info;
    const struct plena_moe_cfg *cfg = &bd->cfg;
    const struct plena_moe_map *m = &info->map;
    static const char *space[] = {"vram", "hbm", "fp_sram", "int_sram"};
    plena_buf_printf(b, "{\n  \"model\": \"%s\",\n  \"tokens\": %u,\n", cfg->name, bd->T);
    if (cfg->routing != PLENA_ROUTING_NONE && layout_router(bd, b)) return PLENA_E_NOMEM;
    plena_buf_puts(b, "  \"tensors\": [\n");
    for (unsigned i = 0; i < info->n_abi; i++) {
        const struct plena_tensor *t = &info->abi[i];
        plena_buf_printf(b,
                         "    {\"name\": \"%s\", \"space\": \"%s\", \"base\": %llu, \"rows\": %u, "
                         "\"cols\": %u, \"prow\": %u, \"pcol\": %u}%s\n",
                         t->name, space[t->space], (unsigned long long)t->base, t->rows, t->cols,
                         t->prow, t->pcol, i + 1 < info->n_abi ? "," : "");
    }
    plena_buf_printf(b,
                     "  ],\n  \"fp_sram\": {\"fp_base\": %u, \"zero_row\": 0, "
                     "\"one\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"neg_alpha_routed\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"neg_alpha_shared\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"limit_pos\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"limit_neg\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"eps\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"inv_h\": {\"offset\": %u, \"value\": %.9g}, "
                     "\"dot_scratch\": %u, \"w_off\": %u, \"gate_off\": %u, \"used\": %u},\n",
                     m->fp_base, m->off_one, m->c_one, m->off_na_routed, m->c_na_routed,
                     m->off_na_shared, m->c_na_shared, m->off_lp, m->c_lp, m->off_ln, m->c_ln,
                     m->off_eps, m->c_eps, m->off_invh, m->c_invh, m->off_dot, m->w_off,
                     m->gate_off, m->fp_used);
    if (m->dev_router)
        plena_buf_printf(b,
                         "  \"fp_sram_router\": {\"minus_one\": %u, \"neg_inf\": %u, "
                         "\"routed_scaling\": {\"offset\": %u, \"value\": %.9g}, "
                         "\"norm_eps\": {\"offset\": %u, \"value\": %.9g}, \"group_scores\": %u, "
                         "\"group_weights\": %u, \"token_weights\": %u, \"group_ids\": %u},\n",
                         m->off_minus_one, m->off_neg_inf, m->off_rsf, m->c_rsf, m->off_reps,
                         m->c_reps, m->off_grow, m->off_gw, m->off_wreg, m->gsel_off);
    plena_buf_printf(b,
                     "  \"int_sram\": {\"int_base\": %u, \"ids_off\": %u, \"wtab_off\": %u, "
                     "\"spill_off\": %u, \"used\": %u},\n",
                     m->int_base, m->ids_off, m->wtab_off, m->spill_off, m->int_used);
    plena_buf_printf(b,
                     "  \"hbm\": {\"expert_stride\": %llu, \"windowed\": %s, "
                     "\"experts_per_window\": %u, \"end\": %llu, \"materialised_experts\": [",
                     (unsigned long long)m->stride, m->windowed ? "true" : "false", m->epw,
                     (unsigned long long)m->hbm_end);
    int first = 1;
    for (uint32_t e = 0; bd->present && e < cfg->E; e++)
        if (bd->present[e]) {
            plena_buf_printf(b, "%s%u", first ? "" : ", ", e);
            first = 0;
        }
    plena_buf_puts(b, "]},\n  \"emit\": {\"topk_encoding\": {\"encoding\": \"");
    plena_buf_puts(b, plena_topk_encoding_name(info->topk_encoding));
    plena_buf_puts(b, "\", \"rmask\": ");
    if (info->topk_rmask < 0)
        plena_buf_puts(b, "null");
    else
        plena_buf_printf(b, "%d", info->topk_rmask);
    plena_buf_puts(b, ", \"packed\": ");
    if (info->topk_encoding == PLENA_TOPK_ENC_REGISTER)
        plena_buf_printf(b, "%u", info->topk_packed);
    else
        plena_buf_puts(b, "null");
    plena_buf_printf(b,
                     "}, \"routed_lowering\": \"%s\", \"t_blk\": %u, \"n_blocks\": %u, "
                     "\"pair_form\": \"%s\", \"n_pair_insns\": %u, \"vram_peak\": %llu, "
                     "\"abi_elems\": %llu, \"gate_shift\": %d,\n"
                     "    \"stages\": {",
                     plena_lowering_marker(info->routed_lowering), m->t_blk, m->n_blocks,
                     plena_pair_form_name(info->pair_form), info->n_pair_insns,
                     (unsigned long long)info->vram_peak, (unsigned long long)info->abi_elems,
                     bd->gate_shift);
    for (int s = 0; s < PLENA_STAGE_COUNT; s++)
        plena_buf_printf(b, "%s\"%s\": {\"static\": %llu, \"dynamic\": %llu}", s ? ", " : "",
                         plena_stage_name((enum plena_stage)s),
                         (unsigned long long)info->static_count[s],
                         (unsigned long long)info->dyn_count[s]);
    plena_buf_puts(b, "}}\n}\n");
    return b->failed ? PLENA_E_NOMEM : 0;
}

/* ---- writers ---- */

static int write_buf(const char *dir, const char *name, const void *data, size_t n,
                     struct plena_err *err)
{
    char path[4096];
    if (plena_path_join(path, sizeof path, dir, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    return plena_file_write_atomic(path, data, n, err);
}

/* Eight bytes at a time (the byte loop was a third of writing a 680 MB
 * image: GCC does not vectorise a loop that can leave early). */
static int all_zero(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8], acc = 0;
        memcpy(w, p + i, sizeof w);
        for (int j = 0; j < 8; j++)
            acc |= w[j];
        if (acc) return 0;
    }
    for (; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* Non-zero 4 KiB chunks of n bytes at p (the chunks write_hbm writes). */
static uint64_t nonzero_chunk_bytes(const uint8_t *p, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t o = 0; o < n; o += 4096) {
        size_t c = n - o < 4096 ? (size_t)(n - o) : 4096;
        if (!all_zero(p + o, c)) sum += c;
    }
    return sum;
}

static int stopped(const struct plena_moe_build_opts *o)
{
    return o->stop && *o->stop;
}

static int fail_stopped(const struct plena_moe_build_opts *o, struct plena_err *err)
{
    return plena_err_if_stopped(o->stop, "build", err);
}

/* The bytes hbm.bin materialises: its non-zero 4 KiB chunks (the rest of
 * the apparent size is a hole that reads 0); a lazy region counts in full
 * unless `exact` (then it is generated to be counted, polling the stop flag
 * before each lazy region: generating every routed matrix of a large model
 * takes seconds): *bound says whether the sum is an upper bound. */
static int hbm_materialised(const struct plena_moe_build *b, const struct plena_moe_build_opts *o,
                            int exact, uint64_t *sum, int *bound, struct plena_err *err)
{
    struct plena_moe_scratch sc = {0};
    *sum = 0;
    *bound = 0;
    int rc = 0;
    for (size_t i = 0; i < b->n_hbm && !rc; i++) {
        const struct plena_hbm_region *r = &b->hbm[i];
        if (!r->bytes && !exact) {
            *sum += r->n;
            *bound = 1;
            continue;
        }
        if (!r->bytes && (rc = fail_stopped(o, err))) break;
        const uint8_t *p;
        if (!(rc = plena_moe_build_region_bytes(b, r, &sc, &p, err)))
            *sum += nonzero_chunk_bytes(p, r->n);
    }
    plena_moe_scratch_free(&sc);
    return rc;
}

/* An image whose data cannot fit in HBM_SIZE at all is refused before
 * anything is written. A sparse image whose apparent size (the map's end)
 * exceeds HBM_SIZE while its data fit is kept (moe-lowering 2.3: the caller
 * warns; the checks enlarge HBM to the image): docs/design.md "HBM images
 * larger than HBM_SIZE". Lazy regions count in full first; only when that
 * bound does not fit are they generated to be counted exactly. */
static int check_hbm_fits(const struct plena_moe_build *b, const struct plena_moe_build_opts *o,
                          struct plena_err *err)
{
    uint64_t used;
    int bound, rc;
    const uint64_t cap = b->cfg.m.hbm_size;
    if ((rc = hbm_materialised(b, o, 0, &used, &bound, err))) return rc;
    if (used > cap && bound && (rc = hbm_materialised(b, o, 1, &used, &bound, err))) return rc;
    if (used <= cap) return 0;
    return PLENA_FAIL(err, PLENA_E_INPUT, "HBM_SIZE",
                      "model %s needs %llu bytes of HBM data (image of %llu bytes), more than "
                      "HBM_SIZE %llu; raise HBM_SIZE or stage fewer experts",
                      b->cfg.name, (unsigned long long)used, (unsigned long long)b->hbm_size,
                      (unsigned long long)cap);
}

/* hbm.bin's temporary in dir, created 0644 at the apparent size (a hole):
 * its path into tmpp, the descriptor (O_RDWR) into *fd. */
static int create_hbm_tmp(const struct plena_moe_build *b, const char *dir, char *path,
                          size_t path_n, char *tmpp, size_t tmpp_n, int *fd, struct plena_err *err)
{
    if (plena_build_file_path(dir, PLENA_BUILD_FILE_HBM, path, path_n, err)) return PLENA_E_OUTPUT;
    if (plena_file_check_output(path, err)) return PLENA_E_OUTPUT;
    /* the pid in the name lets a later build remove it once this process
     * is gone (plena_file_clean_stale_tmp), e.g. after SIGINT */
    snprintf(tmpp, tmpp_n, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    *fd = mkstemp(tmpp);
    if (*fd < 0) return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot create: %s", strerror(errno));
    /* mkstemp creates 0600; the image is an ordinary result file */
    if (fchmod(*fd, 0644) != 0 || ftruncate(*fd, (off_t)b->hbm_size) != 0) {
        int e = errno;
        close(*fd);
        unlink(tmpp);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot write: %s", strerror(e));
    }
    return 0;
}

/* With an output directory, hbm.bin's temporary is created before staging
 * and mapped shared, so the eager regions are generated straight into the
 * page cache (map_region_bytes) instead of into anonymous memory that
 * write_hbm then copied: at qwen3-30b-a3b width that was 680 MB faulted in
 * and 680 MB copied per build (docs/design.md "Eager regions in hbm.bin's
 * mapping"). A file system that cannot map it leaves the regions in memory:
 * the files are the same either way. */
/* Path p without its last component (trailing slashes dropped first);
 * 0 when nothing is left to strip. */
static int strip_last(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = 0;
    char *s = strrchr(p, '/');
    if (!s || s == p) return 0;
    *s = 0;
    return 1;
}

/* How many trailing levels of dir do not exist (plena_mkdir_p creates them). */
static int missing_levels(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return 0;
    struct stat st;
    int n = 0;
    while (stat(p, &st) != 0) {
        n++;
        if (!strip_last(p)) break;
    }
    return n;
}

/* The levels of b->hbm_dir that open_hbm_map created, removed when empty. */
static void remove_made_dirs(const struct plena_moe_build *b)
{
    char p[4096];
    if (!b->hbm_dir || snprintf(p, sizeof p, "%s", b->hbm_dir) >= (int)sizeof p) return;
    for (int i = 0; i < b->hbm_dir_levels; i++)
        if (rmdir(p) != 0 || !strip_last(p)) break;
}

static int open_hbm_map(struct plena_moe_build *b, const struct plena_moe_build_opts *o,
                        struct plena_err *err)
{
    if (!o->out_dir || o->program_only || o->regions_in_memory || b->hbm_size == 0 ||
        b->hbm_size > SIZE_MAX)
        return 0;
    const int levels = missing_levels(o->out_dir);
    if (!(b->hbm_dir = plena_strdup(o->out_dir))) return fail_nomem(err);
    if (plena_mkdir_p(o->out_dir, err)) return PLENA_E_OUTPUT;
    b->hbm_dir_levels = levels;
    plena_file_clean_stale_tmp(o->out_dir); /* an interrupted earlier build's hbm.bin.tmp.* */
    char path[4096], tmpp[4200];
    int fd, rc = create_hbm_tmp(b, o->out_dir, path, sizeof path, tmpp, sizeof tmpp, &fd, err);
    if (rc) {
        remove_made_dirs(b);
        return rc;
    }
    char *keep = plena_strdup(tmpp);
    void *m = keep ? mmap(NULL, (size_t)b->hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                   : MAP_FAILED;
    if (m == MAP_FAILED) { /* cannot map: write_hbm makes its own temporary */
        close(fd);
        unlink(tmpp);
        plena_free(keep);
        b->hbm_dir_levels = 0; /* the directory is needed anyway */
        return keep ? 0 : fail_nomem(err);
    }
    b->hbm_map = m;
    b->hbm_map_fd = fd;
    b->hbm_tmp = keep;
    return 0;
}

/* The mapped region r is in the file already: count the bytes write_hbm
 * would have written (its non-zero 4 KiB chunks, from the region's base) and
 * give the file's all-zero pages inside it back as holes, as pwriting only
 * the non-zero chunks left them (its blocks were reserved when staged). */
static void settle_mapped_region(struct plena_moe_build *b, const struct plena_hbm_region *r)
{
    b->hbm_bytes_written += nonzero_chunk_bytes(r->bytes, r->n);
    uint64_t p = (r->base + 4095) & ~(uint64_t)4095, hole = UINT64_MAX;
    const uint64_t end = (r->base + r->n) & ~(uint64_t)4095;
    for (; p <= end; p += 4096) {
        const int zero = p < end && all_zero(b->hbm_map + p, 4096);
        if (zero && hole == UINT64_MAX) hole = p;
        if (!zero && hole != UINT64_MAX) {
            /* a failure only leaves the zero blocks allocated: the bytes are the same */
            (void)fallocate(b->hbm_map_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)hole,
                            (off_t)(p - hole));
            hole = UINT64_MAX;
        }
    }
}

/* hbm.bin: the temporary at the apparent size (the build's mapped one, or
 * a new one), the non-zero 4 KiB chunks of each region not in the mapping
 * pwritten, then fsync (which also writes the mapping's dirty pages) and
 * rename over the target. */
static int write_hbm(struct plena_moe_build *b, const struct plena_moe_build_opts *opt,
                     const char *dir, struct plena_err *err)
{
    char path[4096], tmpp[4200];
    int fd;
    if (b->hbm_map) {
        if (plena_build_file_path(dir, PLENA_BUILD_FILE_HBM, path, sizeof path, err))
            return PLENA_E_OUTPUT;
        snprintf(tmpp, sizeof tmpp, "%s", b->hbm_tmp);
        fd = b->hbm_map_fd;
    } else {
        int crc = create_hbm_tmp(b, dir, path, sizeof path, tmpp, sizeof tmpp, &fd, err);
        if (crc) return crc;
    }
    int rc = 0;
    b->hbm_bytes_written = 0;
    int bytes_rc = 0;
    struct plena_moe_scratch sc = {0}; /* a lazy region's bytes, one at a time */
    for (size_t i = 0; i < b->n_hbm && !rc; i++) {
        if (stopped(opt)) {
            rc = 3;
            break;
        }
        const struct plena_hbm_region *r = &b->hbm[i];
        if (r->in_map) {
            settle_mapped_region(b, r);
            continue;
        }
        const uint8_t *bytes;
        if ((bytes_rc = plena_moe_build_region_bytes(b, r, &sc, &bytes, err))) {
            rc = 4;
            break;
        }
        /* runs of non-zero 4 KiB chunks, each one pwrite: large writes
         * let the page cache take large folios (a 4 KiB write each cost
         * about as much as generating its bytes) */
        for (uint64_t o = 0; o < r->n && !rc;) {
            uint64_t end = o;
            while (end < r->n) {
                size_t n = r->n - end < 4096 ? (size_t)(r->n - end) : 4096;
                if (all_zero(bytes + end, n)) break;
                end += n;
            }
            if (end > o && r->base + end > b->hbm_size) {
                rc = 2;
            } else if (end > o) {
                rc = plena_fd_write_all(fd, bytes + o, (size_t)(end - o), (int64_t)(r->base + o))
                         ? 1
                         : 0;
                b->hbm_bytes_written += end - o;
                o = end;
            } else {
                o += 4096; /* a zero chunk: a hole */
            }
        }
    }
    plena_moe_scratch_free(&sc);
    if (!rc && fsync(fd) != 0) rc = 1;
    if (!b->hbm_map && close(fd) != 0 && !rc) rc = 1;
    if (!rc && rename(tmpp, path) != 0) rc = 1;
    if (!rc && b->hbm_map) { /* renamed: the mapping stays, the name is hbm.bin's now */
        plena_free(b->hbm_tmp);
        b->hbm_tmp = NULL;
        /* its pages leave this mapping (they stay in the page cache, clean
         * after the fsync, and come back on a read as minor faults): an
         * emulator that maps hbm.bin next would otherwise have every page
         * counted twice in the process's RSS while it runs */
        (void)madvise(b->hbm_map, (size_t)b->hbm_size, MADV_DONTNEED);
    }
    if (rc) {
        unlink(tmpp);
        if (rc == 2) return PLENA_FAIL(err, PLENA_E_INTERNAL, path, "region beyond image end");
        if (rc == 4) return bytes_rc; /* recorded in err */
        if (rc == 3) return fail_stopped(opt, err);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot write: %s", strerror(errno));
    }
    return 0;
}

/* The n entries of v (uint16_t for width 2, uint32_t for width 4) as the
 * little-endian image file f (docs/formats.md "SRAM and VRAM preload images"). */
static int write_le(const char *dir, enum plena_build_file f, const void *v, size_t n,
                    unsigned width, struct plena_err *err)
{
    uint8_t *buf = plena_malloc(n * width + 1);
    if (!buf) return fail_nomem(err);
    for (size_t i = 0; i < n; i++) {
        uint32_t x = width == 2 ? ((const uint16_t *)v)[i] : ((const uint32_t *)v)[i];
        for (unsigned j = 0; j < width; j++)
            buf[width * i + j] = (uint8_t)(x >> (8 * j));
    }
    int rc = write_buf(dir, plena_build_file_name(f), buf, n * width, err);
    plena_free(buf);
    return rc;
}

static int write_dir(struct plena_moe_build *b, const struct plena_moe_build_opts *o,
                     struct plena_err *err)
{
    const char *dir = o->out_dir;
    if (plena_mkdir_p(dir, err)) return PLENA_E_OUTPUT;
    plena_file_clean_stale_tmp(dir); /* an interrupted earlier build's hbm.bin.tmp.* */
    struct plena_buf t;
    plena_buf_init(&t);
    int rc = plena_prog_render_asm(&b->prog, &t);
    if (rc || t.failed) {
        plena_buf_free(&t);
        return fail_nomem(err);
    }
    rc = write_buf(dir, plena_build_file_name(PLENA_BUILD_FILE_PROGRAM_ASM), t.data, t.len, err);
    plena_buf_free(&t);
    if (rc) return rc;
    char path[4096];
    if (plena_build_file_path(dir, PLENA_BUILD_FILE_PROGRAM_MEM, path, sizeof path, err))
        return PLENA_E_OUTPUT;
    if ((rc = plena_program_write_mem(path, b->words, b->n_words, err))) return rc;
    if (!o->program_only) {
        if ((rc = write_hbm(b, o, dir, err))) return rc;
        if ((rc = write_le(dir, PLENA_BUILD_FILE_FP_SRAM, b->fp16, b->n_fp, 2, err)) ||
            (rc = write_le(dir, PLENA_BUILD_FILE_INT_SRAM, b->ints, b->n_int, 4, err)) ||
            (rc = write_le(dir, PLENA_BUILD_FILE_VRAM_PRELOAD, b->vram, b->n_vram, 2, err)))
            return rc;
    }
    plena_buf_init(&t);
    if (plena_moe_layout_json(b, &t)) {
        plena_buf_free(&t);
        return fail_nomem(err);
    }
    rc = write_buf(dir, plena_build_file_name(PLENA_BUILD_FILE_LAYOUT), t.data, t.len, err);
    plena_buf_free(&t);
    return rc;
}

/* The weight cache's directory, created when missing; one that cannot be
 * used is an output error naming it, as an output directory's would be. */
static int open_weight_cache(struct plena_moe_build *b, const char *dir, struct plena_err *err)
{
    struct stat st;
    if (!*dir) return PLENA_FAIL(err, PLENA_E_OUTPUT, "weight cache", "empty directory name");
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "weight cache: not a directory");
    int rc = plena_mkdir_p(dir, err);
    if (rc) return rc;
    (void)plena_file_clean_stale_tmp(dir); /* what killed writers left */
    return (b->weight_cache = plena_strdup(dir)) ? 0 : fail_nomem(err);
}

int plena_moe_build_run(const struct plena_moe_build_opts *o, struct plena_moe_build *b,
                        struct plena_err *err)
{
    memset(b, 0, sizeof *b);
    b->cfg = o->cfg;
    b->T = o->T;
    b->mx_mode = o->mx_mode;
    b->weights = o->weights;
    b->weight_seed = o->weight_seed;
    b->input = o->input;
    b->gate_shift = -1;
    b->cache_counts = plena_calloc(PLENA_MOE_CACHE_N, sizeof *b->cache_counts);
    if (!b->cache_counts) return fail_nomem(err);
    const struct plena_moe_cfg *cfg = &b->cfg;
    if (o->T == 0) return PLENA_FAIL(err, PLENA_E_INPUT, "tokens", "must be > 0 (got 0)");
    /* the data modes from the one list (model.h): a value outside it would
     * stage some tensors as random and others as zeros */
    char choices[96];
    if (!strcmp(plena_weights_mode_name(o->weights), "?"))
        return PLENA_FAIL(err, PLENA_E_INPUT, "weights", "expected %s, got mode %d",
                          plena_weights_mode_choices(", ", " or ", choices, sizeof choices),
                          (int)o->weights);
    if (!strcmp(plena_input_mode_name(o->input), "?"))
        return PLENA_FAIL(err, PLENA_E_INPUT, "input", "expected %s, got mode %d",
                          plena_input_mode_choices(", ", " or ", choices, sizeof choices),
                          (int)o->input);
    if (cfg->routing == PLENA_ROUTING_FIXED) {
        if (!o->fixed_ids || !o->fixed_w)
            return PLENA_FAIL(err, PLENA_E_INPUT, "routing", "FIXED routing needs ids and weights");
        size_t n = (size_t)o->T * cfg->k;
        b->fixed_ids = plena_malloc(n * sizeof *b->fixed_ids);
        b->fixed_w32 = plena_malloc(n * sizeof *b->fixed_w32);
        if (!b->fixed_ids || !b->fixed_w32) return fail_nomem(err);
        memcpy(b->fixed_ids, o->fixed_ids, n * sizeof *b->fixed_ids);
        memcpy(b->fixed_w32, o->fixed_w, n * sizeof *b->fixed_w32);
        b->cfg.route_ids = b->fixed_ids;
    }
    b->cfg.router_logits_preloaded = cfg->routing == PLENA_ROUTING_DEVICE && o->router_logits;
    int rc = plena_moe_generate(cfg, o->T, &b->prog, &b->info, err);
    if (rc) return rc;
    if (o->weight_cache && !o->program_only && (rc = open_weight_cache(b, o->weight_cache, err)))
        return rc;
    if (plena_prog_words(&b->prog, &b->words, &b->n_words)) return fail_nomem(err);
    b->hbm_size = b->info.map.hbm_end;
    if ((rc = fail_stopped(o, err))) return rc;
    if ((rc = open_hbm_map(b, o, err))) return rc;
    if (!o->program_only && (rc = stage_all(o, b, err))) return rc;
    if (!o->program_only && (rc = check_hbm_fits(b, o, err))) return rc;
    if ((rc = fail_stopped(o, err))) return rc;
    (void)rup32;
    if (o->out_dir && (rc = write_dir(b, o, err))) return rc;
    return 0;
}

void plena_moe_build_free(struct plena_moe_build *b)
{
    plena_prog_free(&b->prog);
    plena_free(b->words);
    for (size_t i = 0; i < b->n_hbm; i++)
        if (!b->hbm[i].in_map) plena_free(b->hbm[i].bytes);
    plena_free(b->hbm);
    if (b->hbm_map) {
        munmap(b->hbm_map, (size_t)b->hbm_size);
        close(b->hbm_map_fd);
        if (b->hbm_tmp) { /* never renamed: a failed or stopped build */
            unlink(b->hbm_tmp);
            remove_made_dirs(b);
        }
        plena_free(b->hbm_tmp);
    }
    plena_free(b->hbm_dir);
    plena_free(b->weight_cache);
    plena_free(b->cache_counts);
    plena_free(b->fp16);
    plena_free(b->ints);
    plena_free(b->vram);
    plena_free(b->present);
    plena_free(b->device_ids);
    plena_free(b->fixed_ids);
    plena_free(b->fixed_w32);
    if (b->image_path) {
        close(b->image_fd);
        plena_free(b->image_path);
    }
    memset(b, 0, sizeof *b);
}
