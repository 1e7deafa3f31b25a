/* The synthetic test weights of a build (docs/lowering.md "Checking a
 * build"): values of a role / expert stream and their MXFP8 image. Internal
 * to gen/ (build.c) and its tests; not installed. */
#ifndef PLENA_GEN_WEIGHTS_H
#define PLENA_GEN_WEIGHTS_H

#include <stdint.h>

#include "gen/build.h"
#include "num/num.h"

/* Bytes of the MXFP8 image of [K_p][N_p]: the codes, then one scale per
 * block of PLENA_MOE_MX_BLOCK. */
uint64_t plena_moe_mx_bytes(uint32_t K_p, uint32_t N_p);

/* Logical tensor [K][N] (row-major) of role/expert: element i is draw i
 * of the stream derive(seed, WEIGHTS, role, expert), scaled by
 * a = 1/sqrt(fan_in) (the definition; one draw after another). */
void plena_moe_weights_values(enum plena_weights_mode weights, uint64_t seed, unsigned role,
                              uint32_t expert, uint32_t K, uint32_t N, uint32_t fan_in, float *out);

/* MXFP8 [K_p, N_p] into bytes (plena_moe_mx_bytes of them) from logical
 * [K][N] v, zero padded, host encoder, block 8. PLENA_E_NOMEM or 0. */
int plena_moe_encode_mx(enum plena_mx_mode mode, const float *v, uint32_t K, uint32_t N,
                        uint32_t K_p, uint32_t N_p, uint8_t *bytes);

/* plena_moe_encode_mx of plena_moe_weights_values, without the [K][N]
 * array: rows are drawn eight streams at a time (four without AVX-512F)
 * from jumped copies of the stream and encoded as they are made (the same
 * bytes). PLENA_E_NOMEM or 0. */
int plena_moe_weights_mx(enum plena_weights_mode weights, uint64_t seed, unsigned role,
                         uint32_t expert, uint32_t K, uint32_t N, uint32_t fan_in,
                         enum plena_mx_mode mode, uint32_t K_p, uint32_t N_p, uint8_t *bytes);
/* The same by values then encoding (the definition; tests). */
int plena_moe_weights_mx_ref(enum plena_weights_mode weights, uint64_t seed, unsigned role,
                             uint32_t expert, uint32_t K, uint32_t N, uint32_t fan_in,
                             enum plena_mx_mode mode, uint32_t K_p, uint32_t N_p, uint8_t *bytes);

/* Rows 0, K/2 and K-1 of the RANDOM tensor's image, drawn and encoded
 * afresh (3/K of the cost of the whole), compared with those rows of
 * bytes: *match 1 when all three agree. The weight cache's check that an
 * entry is what this generator makes (docs/design.md "Weight cache").
 * PLENA_E_NOMEM or 0. */
int plena_moe_weights_mx_spot_check(uint64_t seed, unsigned role, uint32_t expert, uint32_t K,
                                    uint32_t N, uint32_t fan_in, enum plena_mx_mode mode,
                                    uint32_t K_p, uint32_t N_p, const uint8_t *bytes, int *match);

#endif
