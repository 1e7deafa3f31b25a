/* SHA-256 against the FIPS 180-4 / NIST example vectors, and the incremental
 * API against the one-shot one at every split point of a 3-block message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/sha256.h"
#include "common/test_support.h"

static void check(const char *msg, const char *want)
{
    char hex[65];
    plena_sha256_hex(msg, strlen(msg), hex);
    assert_string_equal(hex, want);
}

static void test_vectors(void **state)
{
    (void)state;
    check("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopq"
          "rlmnopqrsmnopqrstnopqrstu",
          "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state)
{
    (void)state;
    static char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    struct plena_sha256 ctx;
    plena_sha256_init(&ctx);
    for (int i = 0; i < 1000; i++)
        plena_sha256_update(&ctx, chunk, sizeof chunk);
    uint8_t d[32];
    char hex[65];
    plena_sha256_final(&ctx, d);
    plena_sha256_to_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_incremental_splits(void **state)
{
    (void)state;
    uint8_t msg[150], whole[32], part[32];
    for (int i = 0; i < 150; i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    for (size_t len = 0; len <= sizeof msg; len++) {
        plena_sha256(msg, len, whole);
        for (size_t cut = 0; cut <= len; cut += 1 + len / 16) {
            struct plena_sha256 ctx;
            plena_sha256_init(&ctx);
            plena_sha256_update(&ctx, msg, cut);
            plena_sha256_update(&ctx, msg + cut, len - cut);
            plena_sha256_final(&ctx, part);
            assert_memory_equal(whole, part, 32);
        }
    }
    /* padding boundary lengths 55, 56, 63, 64 (one vs two final blocks) */
    char m56[57];
    memset(m56, 'a', 56);
    m56[56] = 0;
    check(m56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_vectors),
    cmocka_unit_test(test_million_a),
    cmocka_unit_test(test_incremental_splits),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
