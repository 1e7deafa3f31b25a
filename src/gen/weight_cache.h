/* The weight cache (docs/design.md "Weight cache", docs/formats.md
 * "Weight cache entries"): a directory of generated MX weight matrices, one
 * file per (seed, role, expert, shape, mode), so the builds of many traces
 * of one model (a campaign's replays) draw and encode each matrix once.
 * Internal to gen/ (build.c) and its tests; not installed. An entry only
 * ever supplies bytes; whether they are this generator's is checked by the
 * caller (plena_moe_weights_mx_spot_check). */
#ifndef PLENA_GEN_WEIGHT_CACHE_H
#define PLENA_GEN_WEIGHT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Changes whenever plena_moe_weights_mx would make other bytes for the same
 * key (test_gen_weights' recorded digests change then too): entries of
 * another revision are never read. */
#define PLENA_WEIGHT_CACHE_REVISION 1u

/* What determines a RANDOM matrix's MX image (plena_moe_weights_mx). */
struct plena_weight_key {
    uint64_t seed;
    uint32_t role, expert;
    uint32_t K, N, fan_in;
    uint32_t mode; /* enum plena_mx_mode */
    uint32_t K_p, N_p;
};

/* The entry's path in dir: "DIR/r<role>-e<expert>-<16 hex digits>.mx", the
 * digits the FNV-1a of the entry's header. -1 when it does not fit. */
int plena_weight_cache_path(const char *dir, const struct plena_weight_key *k, char *buf,
                            size_t len);

/* The n bytes of k's entry into bytes: *hit 1 when dir holds an entry with
 * k's header and exactly n bytes after it; *hit 0 (bytes untouched) when it
 * holds none, or a file of another size or header (a stale entry, which the
 * next store replaces). A file that exists but cannot be opened or read is
 * PLENA_E_OUTPUT naming it. */
int plena_weight_cache_load(const char *dir, const struct plena_weight_key *k, uint8_t *bytes,
                            uint64_t n, int *hit, struct plena_err *err);

/* Writes k's entry atomically (a temporary in dir, fsync, rename over any
 * earlier file of that name): a crash leaves either the old file or the
 * whole new one. PLENA_E_OUTPUT naming the path on failure (the temporary
 * removed). */
int plena_weight_cache_store(const char *dir, const struct plena_weight_key *k,
                             const uint8_t *bytes, uint64_t n, struct plena_err *err);

#endif
