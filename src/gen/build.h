/* MoE build directory (docs/lowering.md "Memory ABI", "Model presets" and "Checking a build";
 * docs/replay.md "Pipeline" for random weights): generates the layer
 * program, stages every ABI tensor (HBM weights through the host MX encoder,
 * BF16 VRAM preload, fp16 FP SRAM image, INT SRAM image) and writes the build
 * directory atomically (hbm.bin as a sparse file). It does not run the
 * program or compare results (check.h does). */
#ifndef PLENA_GEN_BUILD_H
#define PLENA_GEN_BUILD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../gen/moe.h"
#include "../num/num.h"
#include "../settings/settings.h"

/* Weight roles of derive(weight_seed, 2, role, expert_id): 0-6 are those of
 * docs/replay.md "Pipeline"; 7-13 are plena's choice for tensors that section
 * does not name (router weight and bias, expert biases, the router's
 * selection bias). */
enum plena_moe_role {
    PLENA_ROLE_GATE = 0,
    PLENA_ROLE_UP = 1,
    PLENA_ROLE_DOWN = 2,
    PLENA_ROLE_SHARED_GATE = 3,
    PLENA_ROLE_SHARED_UP = 4,
    PLENA_ROLE_SHARED_DOWN = 5,
    PLENA_ROLE_SHARED_SIGMOID = 6,
    PLENA_ROLE_ROUTER = 7,
    PLENA_ROLE_ROUTER_BIAS = 8,
    PLENA_ROLE_BIAS_GATE = 10,
    PLENA_ROLE_BIAS_UP = 11,
    PLENA_ROLE_BIAS_DOWN = 12,
    PLENA_ROLE_ROUTER_SEL_BIAS = 13
};

struct plena_moe_build;
struct plena_moe_build_opts {
    struct plena_moe_cfg cfg; /* from plena_moe_build_opts_init; tests override fields */
    uint32_t T;
    /* FIXED routing: [T*k] ids and binary32 weights (pair order t*k+j) */
    const uint32_t *fixed_ids;
    const float *fixed_w;
    enum plena_weights_mode weights;
    uint64_t weight_seed;
    enum plena_input_mode input;
    uint64_t input_seed;
    /* tests: h scaled by 2^input_scale_log2 (<= 0) so the residual stays
     * below the layer output (docs/lowering.md "Checking a build": ||residual|| <= ||y64||) */
    int input_scale_log2;
    /* tests (docs/lowering.md "Checking a build"): router weights built so every token's top-(k+1)
     * logits are 0.125 apart (times the normalised input), all negative, with the top id E-1-d for
     * direction d = t mod 4 (so ids >= E/2 are selected); h rows carry +1 at column d and 0 at the
     * other direction columns. */
    int router_gaps;
    /* DEVICE routing with preloaded logits (replay, gen/router_logits.h):
     * [T*E] router logits staged into the VRAM tensor `logits` instead of
     * router weights (the builder sets cfg.router_logits_preloaded; the
     * selection bias is staged as zeros). fixed_ids, when also given, names
     * the experts the logits reach: only those are materialised. */
    const float *router_logits;
    enum plena_mx_mode mx_mode;
    const char *out_dir; /* NULL: staged in memory only */
    int program_only;    /* write program.asm, program.mem, layout.json only */
    uint32_t threads;    /* > 1: an eager build's routed expert matrices generated on
                          * that many threads (common/pool.c; the same bytes) */
    int lazy_experts;    /* routed expert weights lazy at any size (else above
                          * PLENA_MOE_LAZY_EXPERT_BYTES): for callers that do not
                          * read them back (plena moe without --check), and tests */
    /* a directory of generated weight matrices (docs/design.md "Weight
     * cache"; created when missing): RANDOM matrices are read from it when
     * an entry passes the spot check, else generated and stored there; the
     * same bytes either way. NULL: none */
    const char *weight_cache;
    int regions_in_memory; /* tests: with out_dir, the regions in anonymous memory and
                            * hbm.bin written from them (the path of a file system that
                            * cannot map the temporary); else they are generated straight
                            * into a shared mapping of hbm.bin's temporary (docs/design.md
                            * "Eager regions in hbm.bin's mapping") */
    /* set by a signal handler (may be NULL): polled between the phases,
     * before each lazy matrix the exact HBM fit count generates, and while
     * hbm.bin is written; a set flag ends the build with
     * PLENA_E_INTERRUPTED, files already renamed kept, hbm.bin's temporary removed */
    const volatile sig_atomic_t *stop;
    /* DEVICE routing: the experts the device will reach, so that only those
     * are materialised (docs/lowering.md "Checking a build"). Called once the
     * inputs, the router and the SRAM images are staged and before any expert
     * is; fills ids[T*k] (pair order) with the routing the program computes
     * and sets present[e] = 1 (present[E] is zeroed) for each expert in it.
     * The ids are kept as b->device_ids, so later readers of the build's
     * routing (plena_verify_routing_ids) do not run the router again. NULL:
     * every expert is materialised. gen/ has no router of its own to run:
     * verify/ provides plena_verify_reachable_experts (the bit-exact
     * reference router). */
    int (*reachable_experts)(const struct plena_moe_build *b, uint8_t *present, uint32_t *ids,
                             struct plena_err *err);
};

/* Defaults: cfg from the model and machine, random weights and input, seeds 42. */
void plena_moe_build_opts_init(struct plena_moe_build_opts *o, const struct plena_moe_model *mdl,
                               const struct plena_gen_machine *m, uint32_t T);
/* Machine geometry from settings (MLEN, VLEN, BLEN, SRAM sizes, loop budget). */
void plena_gen_machine_from_settings(const struct plena_settings *s, struct plena_gen_machine *m);

/* The files of a build directory (build_files.def). */
enum plena_build_file {
#define PLENA_BUILD_FILE(id, name, writer, what) PLENA_BUILD_FILE_##id,
#include "../gen/build_files.def"
#undef PLENA_BUILD_FILE
    PLENA_BUILD_FILE_COUNT
};
/* "hbm.bin" for PLENA_BUILD_FILE_HBM; NULL outside the table. */
const char *plena_build_file_name(enum plena_build_file f);
/* dir/name of file f into buf; PLENA_E_OUTPUT naming dir when it does not fit. */
int plena_build_file_path(const char *dir, enum plena_build_file f, char *buf, size_t n,
                          struct plena_err *err);

struct plena_hbm_region {
    uint64_t base, n;
    uint8_t *bytes;  /* NULL: a lazy routed-expert matrix, generated on demand
                      * (plena_moe_build_region_bytes) */
    uint32_t expert; /* routed expert regions: the expert and its matrix (0 gate, 1 up, 2 down) */
    uint8_t matrix;
    uint8_t in_map; /* bytes point into the build's mapping of hbm.bin's temporary (not freed) */
};

/* Routed expert weights above this many bytes of MX are not held by the
 * build: each matrix is generated again when its bytes are needed (written
 * to hbm.bin, decoded by the check), so a deepseek-v3 layer at T = 256
 * (12.7 GB of expert weights) never holds them all (docs/design.md "Lazy
 * routed expert weights"). */
#define PLENA_MOE_LAZY_EXPERT_BYTES ((uint64_t)4 << 30)

/* Scratch for plena_moe_build_region_bytes (zero-initialise; plena_moe_scratch_free). */
struct plena_moe_scratch {
    uint8_t *bytes;
    size_t cap_bytes;
};
void plena_moe_scratch_free(struct plena_moe_scratch *s);

struct plena_moe_build {
    struct plena_moe_cfg cfg;
    uint32_t T;
    struct plena_prog prog;
    struct plena_moe_emit_info info;
    uint32_t *words;
    size_t n_words;
    /* staged images */
    struct plena_hbm_region *hbm;
    size_t n_hbm, cap_hbm;
    uint64_t hbm_size;          /* apparent size of hbm.bin (= map.hbm_end) */
    uint64_t hbm_bytes_written; /* bytes actually pwritten (non-zero 4 KiB chunks) */
    uint16_t *fp16;             /* fp_sram.bin entries */
    uint32_t n_fp;
    uint32_t *ints; /* int_sram.bin entries */
    uint32_t n_int;
    uint16_t *vram; /* vram_preload.bin (BF16 bits), n_vram elements from address 0 */
    uint64_t n_vram;
    uint8_t *present;     /* [E]: expert materialised in the tables */
    uint32_t *device_ids; /* [T*k] DEVICE routing's ids from reachable_experts, or NULL */
    uint32_t *fixed_ids;
    float *fixed_w32; /* binary32 route weights as given */
    int gate_shift;   /* m of the 2^-m shared gate scaling (-1: no gate) */
    enum plena_mx_mode mx_mode;
    enum plena_weights_mode weights;
    uint64_t weight_seed; /* what lazy regions are generated from */
    int lazy_experts;     /* the routed experts' regions are lazy */
    /* the weight cache's directory (NULL: none) and what the build did with
     * it: PLENA_MOE_CACHE_* counts of matrices (updated by the generating
     * threads; a count array, so a const build's lazy regeneration counts) */
    char *weight_cache;
    uint64_t *cache_counts;
    /* a reopened build (plena_replay_build_load_images): its lazy regions
     * are read from this hbm.bin (image_fd, open until plena_moe_build_free)
     * when their bytes are needed instead of generated, so the check decodes
     * the bytes the emulator loaded without holding them all; NULL: none */
    char *image_path;
    int image_fd;
    enum plena_input_mode input;
    /* with out_dir: hbm.bin's temporary (hbm_tmp, renamed by the writer;
     * NULL once renamed) mapped shared at hbm_map, where the eager regions
     * are generated (plena_hbm_region.in_map) and stay, valid until
     * plena_moe_build_free (which removes a temporary never renamed); NULL:
     * the regions are in anonymous memory */
    uint8_t *hbm_map;
    int hbm_map_fd;
    char *hbm_tmp;
    /* the output directory and how many of its trailing levels the mapping
     * created: removed again (when empty) with a temporary never renamed, so
     * a refused build leaves no directory behind, as before */
    char *hbm_dir;
    int hbm_dir_levels;
};

/* plena_moe_build.cache_counts[]: matrices read from the weight cache,
 * generated and stored into it, and entries found stale (another
 * generator's bytes: regenerated and replaced). */
enum { PLENA_MOE_CACHE_HITS, PLENA_MOE_CACHE_STORED, PLENA_MOE_CACHE_STALE, PLENA_MOE_CACHE_N };

/* Builds (and writes when o->out_dir is set). b must be freed with
 * plena_moe_build_free even on failure. */
int plena_moe_build_run(const struct plena_moe_build_opts *o, struct plena_moe_build *b,
                        struct plena_err *err);
void plena_moe_build_free(struct plena_moe_build *b);

/* Where build b keeps its fixed routing, and the bytes that must be there
 * for the routing ids/w32 ([T*k], pair order): `file` (the INT SRAM image for
 * pair-major within the SRAMs: the u32 ids at byte `offset`; hbm.bin for the
 * pair-major refill records and the expert-major tables: the routing region
 * at map.route_hbm) and n bytes (plena_free). The stager writes exactly this
 * image from the build's ids; replay's routing-integrity check compares the
 * written file with the image of the trace's routing. PLENA_E_INPUT for a
 * routing whose expert-major tables would not match the program's size. */
struct plena_moe_route_image {
    enum plena_build_file file;
    uint64_t offset;
    size_t n;
    uint8_t *bytes;
};
int plena_moe_build_route_image(const struct plena_moe_build *b, const uint32_t *ids,
                                const float *w32, struct plena_moe_route_image *img,
                                struct plena_err *err);

/* layout.json text (docs/formats.md "layout.json") into out. */
int plena_moe_layout_json(const struct plena_moe_build *b, struct plena_buf *out);

/* Fixed-routing generators: balanced (ids (t*k+j) mod E, weights 1/k) and
 * random (first k of a shuffle from derive(seed, 1, 0, t), weights a softmax
 * of uniform scores). ids/w hold T*k entries. */
void plena_moe_routing_balanced(uint32_t T, uint32_t E, uint32_t k, uint32_t *ids, float *w);
void plena_moe_routing_random(uint32_t T, uint32_t E, uint32_t k, uint64_t seed, uint32_t *ids,
                              float *w);

/* The checks of `plena moe` before a build: top_k <= num_experts and H a
 * multiple of MLEN (PLENA_E_FAILED, where "model NAME"), then the shape
 * rules of plena_model_validate. */
int plena_moe_build_check_model(const struct plena_moe_model *m, const struct plena_gen_machine *gm,
                                struct plena_err *err);

/* 1 when `routing` is a routing keyword (device, balanced, random), 0 when
 * it names a route trace file. */
int plena_moe_routing_is_keyword(const char *routing);

/* Applies `plena moe --routing` to o (after plena_moe_build_opts_init; a
 * model without routing is left alone). routing NULL is the preset's own
 * path: device, or balanced for a fixed-routing preset. "device" computes
 * the model's router on the device (PLENA_E_INPUT for a router without a
 * device form: a capacity limit); "balanced" and "random" (seeded) generate fixed
 * routing into *ids and *w; a trace file's routing is given in *ids and *w
 * (plena_trace_read_fixed_routing). The routing arrays are o's until the
 * caller frees *ids and *w (plena_free). */
int plena_moe_build_routing(struct plena_moe_build_opts *o, const struct plena_moe_model *m,
                            const char *routing, uint64_t seed, uint32_t **ids, float **w,
                            struct plena_err *err);

/* The staged region starting exactly at base, or NULL. */
const struct plena_hbm_region *plena_moe_build_region(const struct plena_moe_build *b,
                                                      uint64_t base);
/* Region r's bytes (r->n of them) into *bytes: r->bytes, or for a lazy
 * region the matrix read from b->image_path or else generated and encoded
 * into s (valid until s is used again or freed). 0, PLENA_E_NOMEM, or
 * PLENA_E_INPUT when the image cannot be read (short or failing: the message
 * names the file). Thread-safe for distinct scratches. */
int plena_moe_build_region_bytes(const struct plena_moe_build *b, const struct plena_hbm_region *r,
                                 struct plena_moe_scratch *s, const uint8_t **bytes,
                                 struct plena_err *err);

/* HBM element/scale addresses of an MXFP8 [K_p, N_p] tensor at base (docs/lowering.md "Memory
 * ABI"). */
static inline uint64_t plena_mx_scale_base(uint64_t base, uint32_t K_p, uint32_t N_p)
{
    return base + (uint64_t)K_p * N_p;
}

#endif
