/* xoshiro256** with SplitMix64 derivation, bounded draws, shuffle and
 * fnv1a64 exactly as docs/numerics.md "Pseudo-random numbers" defines them; the
 * known answers of that section are the unit tests. Deliberately no
 * floating point except uniform()'s exact scaling. */
#include "num/prng.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

uint64_t plena_splitmix_mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

void plena_prng_set_state(struct plena_prng *g, const uint64_t s[4])
{
    for (int i = 0; i < 4; i++)
        g->s[i] = s[i];
    /* xoshiro never leaves the all-zero state, so it must never enter it. */
    if ((g->s[0] | g->s[1] | g->s[2] | g->s[3]) == 0) g->s[0] = 1;
}

void plena_prng_derive(struct plena_prng *g, uint64_t seed, const uint64_t *words, size_t n)
{
    uint64_t h = seed;
    for (size_t i = 0; i < n; i++)
        h = plena_splitmix_mix((h ^ words[i]) + GOLDEN);
    uint64_t s = h, st[4];
    for (int i = 0; i < 4; i++) {
        s += GOLDEN;
        st[i] = plena_splitmix_mix(s);
    }
    plena_prng_set_state(g, st);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t plena_prng_next(struct plena_prng *g)
{
    uint64_t *s = g->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double plena_prng_uniform(struct plena_prng *g)
{
    return (double)(plena_prng_next(g) >> 11) * 0x1p-53;
}

uint64_t plena_prng_bounded(struct plena_prng *g, uint64_t n)
{
    if (n == 0) return 0;
    uint64_t rem = (0 - n) % n; /* (2^64 - n) mod n */
    uint64_t limit = UINT64_MAX - rem;
    uint64_t r;
    do {
        r = plena_prng_next(g);
    } while (r > limit);
    return r % n;
}

void plena_prng_shuffle_u32(struct plena_prng *g, uint32_t *a, size_t n)
{
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)plena_prng_bounded(g, (uint64_t)i + 1);
        uint32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

uint64_t plena_fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
