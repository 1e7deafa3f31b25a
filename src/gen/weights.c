/* The synthetic test weights of a build (docs/lowering.md "Checking a
 * build"; docs/design.md "Weight generation: jumped streams"): each tensor
 * is one stream of the shared PRNG, and its MX image is what the host
 * encoder makes of it. The fused path draws and encodes row by row from
 * jumped copies of the stream; the values-then-encode path stays as its
 * definition. */
#include "gen/weights.h"

#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "num/prng.h"

uint64_t plena_moe_mx_bytes(uint32_t K_p, uint32_t N_p)
{
    const uint64_t ne = (uint64_t)K_p * N_p;
    return ne + ne / PLENA_MOE_MX_BLOCK;
}

static void derive(struct plena_prng *g, uint64_t seed, unsigned role, uint32_t expert)
{
    const uint64_t words[3] = {PLENA_PRNG_TAG_WEIGHTS, role, expert};
    plena_prng_derive(g, seed, words, 3);
}

static double scale_of(uint32_t fan_in)
{
    return 1.0 / sqrt((double)(fan_in ? fan_in : 1));
}

void plena_moe_weights_values(enum plena_weights_mode weights, uint64_t seed, unsigned role,
                              uint32_t expert, uint32_t K, uint32_t N, uint32_t fan_in, float *out)
{
    const size_t n = (size_t)K * N;
    if (weights == PLENA_WEIGHTS_ZERO) {
        memset(out, 0, n * sizeof *out);
        return;
    }
    struct plena_prng g;
    derive(&g, seed, role, expert);
    const double a = scale_of(fan_in);
    if (weights == PLENA_WEIGHTS_REPRESENTABLE) {
        /* docs/lowering.md "Checking a build": {-1,-0.5,-0.25,0,0.25,0.5,1} x 2^round(log2 a):
         * exact in MX and BF16 */
        static const float set[7] = {-1.0f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 1.0f};
        const float p = ldexpf(1.0f, (int)floor(log2(a) + 0.5));
        for (size_t i = 0; i < n; i++)
            out[i] = set[plena_prng_bounded(&g, 7)] * p;
        return;
    }
    plena_prng_sym_f32(&g, a, n, out);
}

/* Row r of the image from the padded row values (N_p of them). */
static void encode_row(enum plena_mx_mode mode, const float *row, uint32_t r, uint32_t K_p,
                       uint32_t N_p, uint8_t *bytes)
{
    const uint64_t ne = (uint64_t)K_p * N_p;
    plena_num_mx_encode_row(mode, PLENA_MX_HOST, row, N_p, PLENA_MOE_MX_BLOCK,
                            bytes + (uint64_t)r * N_p,
                            bytes + ne + (uint64_t)r * (N_p / PLENA_MOE_MX_BLOCK));
}

int plena_moe_encode_mx(enum plena_mx_mode mode, const float *v, uint32_t K, uint32_t N,
                        uint32_t K_p, uint32_t N_p, uint8_t *bytes)
{
    float *row = plena_calloc(N_p ? N_p : 1, sizeof *row);
    if (!row) return PLENA_E_NOMEM;
    for (uint32_t r = 0; r < K_p; r++) {
        memset(row, 0, (size_t)N_p * sizeof *row);
        if (r < K) memcpy(row, v + (size_t)r * N, (size_t)N * sizeof *row);
        encode_row(mode, row, r, K_p, N_p, bytes);
    }
    plena_free(row);
    return 0;
}

int plena_moe_weights_mx_ref(enum plena_weights_mode weights, uint64_t seed, unsigned role,
                             uint32_t expert, uint32_t K, uint32_t N, uint32_t fan_in,
                             enum plena_mx_mode mode, uint32_t K_p, uint32_t N_p, uint8_t *bytes)
{
    float *v = plena_malloc(((size_t)K * N + 1) * sizeof *v);
    if (!v) return PLENA_E_NOMEM;
    plena_moe_weights_values(weights, seed, role, expert, K, N, fan_in, v);
    int rc = plena_moe_encode_mx(mode, v, K, N, K_p, N_p, bytes);
    plena_free(v);
    return rc;
}

/* The fused path: with R = K / 8, lane j of a plena_prng_x8 starts j R N
 * draws into the stream (plena_prng_advance), so one x8 step draws rows
 * r, R + r, ..., 7R + r at once; rows 8R .. K-1 continue lane 7's
 * stream, and the padding rows K .. K_p-1 are zero rows. Each row is drawn
 * into a padded row buffer (its columns N .. N_p-1 stay zero) and encoded
 * at once, so the [K][N] values never exist. */
int plena_moe_weights_mx(enum plena_weights_mode weights, uint64_t seed, unsigned role,
                         uint32_t expert, uint32_t K, uint32_t N, uint32_t fan_in,
                         enum plena_mx_mode mode, uint32_t K_p, uint32_t N_p, uint8_t *bytes)
{
    if (weights == PLENA_WEIGHTS_REPRESENTABLE) /* rejection draws: no fixed stride */
        return plena_moe_weights_mx_ref(weights, seed, role, expert, K, N, fan_in, mode, K_p, N_p,
                                        bytes);
    float *rows = plena_calloc(8 * (size_t)N_p + 1, sizeof *rows);
    if (!rows) return PLENA_E_NOMEM;
    uint32_t r0 = 0; /* first row not yet encoded */
    if (weights == PLENA_WEIGHTS_RANDOM) {
        const double a = scale_of(fan_in);
        const uint32_t R = K / 8;
        struct plena_prng_x8 x;
        struct plena_prng *lane[8];
        float *row[8];
        for (int j = 0; j < 8; j++) {
            lane[j] = &x.half[j / 4].lane[j % 4];
            row[j] = rows + (size_t)j * N_p;
        }
        derive(lane[0], seed, role, expert);
        for (int j = 1; j < 8; j++) {
            *lane[j] = *lane[j - 1];
            plena_prng_advance(lane[j], (uint64_t)R * N);
        }
        for (uint32_t r = 0; r < R; r++) {
            plena_prng_x8_sym_f32(&x, a, N, row);
            for (uint32_t j = 0; j < 8; j++)
                encode_row(mode, row[j], j * R + r, K_p, N_p, bytes);
        }
        for (r0 = 8 * R; r0 < K; r0++) {
            plena_prng_sym_f32(lane[7], a, N, rows);
            encode_row(mode, rows, r0, K_p, N_p, bytes);
        }
        memset(rows, 0, (size_t)N_p * sizeof *rows);
    }
    for (; r0 < K_p; r0++) /* zero weights, then the padding rows */
        encode_row(mode, rows, r0, K_p, N_p, bytes);
    plena_free(rows);
    return 0;
}

/* Row r of the RANDOM tensor's image, freshly drawn (the stream advanced r N
 * draws) and encoded, against the image's row r. */
static int row_matches(uint64_t seed, unsigned role, uint32_t expert, uint32_t r, uint32_t N,
                       uint32_t fan_in, enum plena_mx_mode mode, uint32_t K_p, uint32_t N_p,
                       const uint8_t *bytes, float *row, uint8_t *codes)
{
    struct plena_prng g;
    derive(&g, seed, role, expert);
    plena_prng_advance(&g, (uint64_t)r * N);
    memset(row, 0, (size_t)N_p * sizeof *row);
    plena_prng_sym_f32(&g, scale_of(fan_in), N, row);
    encode_row(mode, row, 0, 1, N_p, codes); /* a one-row image: its codes, then its scales */
    const uint64_t ne = (uint64_t)K_p * N_p;
    return !memcmp(codes, bytes + (uint64_t)r * N_p, N_p) &&
           !memcmp(codes + N_p, bytes + ne + (uint64_t)r * (N_p / PLENA_MOE_MX_BLOCK),
                   N_p / PLENA_MOE_MX_BLOCK);
}

int plena_moe_weights_mx_spot_check(uint64_t seed, unsigned role, uint32_t expert, uint32_t K,
                                    uint32_t N, uint32_t fan_in, enum plena_mx_mode mode,
                                    uint32_t K_p, uint32_t N_p, const uint8_t *bytes, int *match)
{
    *match = 1;
    if (!K || !N) return 0;
    float *row = plena_malloc(((size_t)N_p + 1) * sizeof *row);
    uint8_t *codes = plena_malloc((size_t)N_p + N_p / PLENA_MOE_MX_BLOCK + 1);
    if (!row || !codes) {
        plena_free(row);
        plena_free(codes);
        return PLENA_E_NOMEM;
    }
    const uint32_t rows[3] = {0, K / 2, K - 1};
    for (int i = 0; i < 3 && *match; i++)
        *match =
            row_matches(seed, role, expert, rows[i], N, fan_in, mode, K_p, N_p, bytes, row, codes);
    plena_free(row);
    plena_free(codes);
    return 0;
}
