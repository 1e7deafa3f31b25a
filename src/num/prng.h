/* plena's one pseudo-random generator (docs/numerics.md "Pseudo-random numbers"):
 * xoshiro256** seeded through SplitMix64's mixer, plus fnv1a64 for turning
 * strings into derive words. Integer-only, so streams are identical on every
 * machine. No global state: every caller owns its struct plena_prng. */
#ifndef PLENA_NUM_PRNG_H
#define PLENA_NUM_PRNG_H

#include <stddef.h>
#include <stdint.h>

struct plena_prng {
    uint64_t s[4];
};

/* Derive tags: the first word after the seed. */
enum {
    PLENA_PRNG_TAG_ROUTING = 1,
    PLENA_PRNG_TAG_WEIGHTS = 2,
    PLENA_PRNG_TAG_ACTIVATIONS = 3,
    PLENA_PRNG_TAG_SELECTION = 4,
    PLENA_PRNG_TAG_TINY_CHECKPOINT = 5,
    PLENA_PRNG_TAG_HOT_SET = 6
};

/* SplitMix64 finaliser mix(z). */
uint64_t plena_splitmix_mix(uint64_t z);
/* derive(seed, words[0..n-1]); words may be NULL when n == 0. */
void plena_prng_derive(struct plena_prng *g, uint64_t seed, const uint64_t *words, size_t n);
/* Raw state (tests and checkpoints); an all-zero state is replaced by {1,0,0,0}. */
void plena_prng_set_state(struct plena_prng *g, const uint64_t s[4]);
uint64_t plena_prng_next(struct plena_prng *g);
/* (next() >> 11) * 2^-53, in [0, 1). */
double plena_prng_uniform(struct plena_prng *g);
/* Unbiased integer in [0, n) by rejection; n == 0 returns 0 without drawing. */
uint64_t plena_prng_bounded(struct plena_prng *g, uint64_t n);
/* Jumping ahead: xoshiro256's transition M is linear over GF(2), so the
 * state after d draws is sum_i c_i M^i s for c(x) = x^d mod P(x), P the
 * characteristic polynomial of M. plena_prng_jump applies c given as its
 * 256 coefficients (bit i of poly[i / 64] for x^i; the published xoshiro256
 * JUMP constant is c for d = 2^128): 256 next() calls of work. */
void plena_prng_jump(struct plena_prng *g, const uint64_t poly[4]);
/* g as after d next() calls, in (d mod 256) + 256 popcount(d >> 8) of them. */
void plena_prng_advance(struct plena_prng *g, uint64_t d);
/* out[i] = (float)((2.0 * uniform(g) - 1.0) * a) for i < n, in draw order:
 * uniform in [-a, a) rounded to f32 (the weight generator's values). */
void plena_prng_sym_f32(struct plena_prng *g, double a, size_t n, float *out);
/* Four independent streams advanced together (AVX2 when the host has it):
 * lane j's n values go to out[j], exactly as plena_prng_sym_f32 on
 * lane[j] would write them, and each lane ends as it would. */
struct plena_prng_x4 {
    struct plena_prng lane[4];
};
void plena_prng_x4_sym_f32(struct plena_prng_x4 *x, double a, size_t n, float *const out[4]);
/* The scalar definition of plena_prng_x4_sym_f32 (tests). */
void plena_prng_x4_sym_f32_ref(struct plena_prng_x4 *x, double a, size_t n, float *const out[4]);
/* Eight streams advanced together (AVX-512F when the host has it, else as
 * two plena_prng_x4): lane j of half h is stream 4 h + j; its n values go to
 * out[4 h + j], exactly as plena_prng_sym_f32 on that lane would write
 * them, and each lane ends as it would. */
struct plena_prng_x8 {
    struct plena_prng_x4 half[2];
};
void plena_prng_x8_sym_f32(struct plena_prng_x8 *x, double a, size_t n, float *const out[8]);
/* The scalar definition of plena_prng_x8_sym_f32 (tests). */
void plena_prng_x8_sym_f32_ref(struct plena_prng_x8 *x, double a, size_t n, float *const out[8]);
/* Fisher-Yates from the top: for i = n-1 .. 1, swap a[i] and a[bounded(i+1)]. */
void plena_prng_shuffle_u32(struct plena_prng *g, uint32_t *a, size_t n);
/* FNV-1a 64-bit over n bytes. */
uint64_t plena_fnv1a64(const void *data, size_t n);

#endif
