/* SHA-256 (FIPS 180-4), implemented in-tree for trace, settings and result
 * hashes (docs/replay.md "Identity"). One-shot and incremental
 * APIs; digests as 32 bytes or 64 lowercase hex characters plus NUL.
 * Deliberately no HMAC, no other SHA-2 widths. */
#ifndef PLENA_COMMON_SHA256_H
#define PLENA_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct plena_sha256 {
    uint32_t h[8];
    uint64_t n_bytes; /* total message length so far */
    uint8_t buf[64];
    size_t n_buf; /* bytes pending in buf (< 64) */
};

void plena_sha256_init(struct plena_sha256 *ctx);
void plena_sha256_update(struct plena_sha256 *ctx, const void *data, size_t n);
/* Writes the digest; ctx must be re-initialised before reuse. */
void plena_sha256_final(struct plena_sha256 *ctx, uint8_t out[32]);

void plena_sha256(const void *data, size_t n, uint8_t out[32]);
/* Lowercase hex of a digest, NUL-terminated. */
void plena_sha256_to_hex(const uint8_t digest[32], char out[65]);
/* One-shot digest of data, as lowercase hex. */
void plena_sha256_hex(const void *data, size_t n, char out[65]);

#endif
