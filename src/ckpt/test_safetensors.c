/* The safetensors reader against hand-built files: exact BF16/F16/F32
 * values, every header check (truncation, oversize header, bad JSON,
 * unknown dtype, negative/overflowing shape, size mismatch, offsets past the
 * end, overlap, duplicates, metadata), the checkpoint directory with and
 * without the index file, shape checks and the fingerprint's byte layout
 * (recomputed here from the documented layout). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "common/alloc.h"
#include "common/sha256.h"
#include "common/test_support.h"

/* A safetensors file: 8-byte LE length, the header text, the data bytes. */
static size_t build(uint8_t *out, const char *header, const uint8_t *data, size_t n_data)
{
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(n >> (8 * i));
    memcpy(out + 8, header, n);
    if (n_data) memcpy(out + 8 + n, data, n_data);
    return 8 + n + n_data;
}

static const uint8_t data16[16] = {0x80, 0x3f, 0x00, 0xc0, /* BF16 1, -2 */
                                   0x00, 0x3c, 0x01, 0x00, /* F16 1, 2^-24 */
                                   0x00, 0x00, 0x80, 0x3f, /* F32 1 */
                                   0x01, 0x00, 0x00, 0x00 /* F32 smallest subnormal */};

static void test_values(void **state)
{
    (void)state;
    uint8_t f[1024];
    size_t len = build(f,
                       "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                       "\"b\":{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[4,8]},"
                       "\"__metadata__\":{\"format\":\"pt\"},"
                       "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                       "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[16,16]}}   ",
                       data16, 16);
    /* a scalar with shape [] has one element: the last entry is 4 bytes short */
    struct plena_st_header h;
    struct plena_err err = {0};
    assert_int_equal(plena_st_parse(f, len, "t.safetensors", &h, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "'s': 1 elements of F32 need 4 bytes, data_offsets span 0"));
    len = build(f,
                "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[4,8]},"
                "\"__metadata__\":{\"format\":\"pt\"},"
                "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[16,16]}}   ",
                data16, 16);
    plena_err_clear(&err);
    assert_int_equal(plena_st_parse(f, len, "t.safetensors", &h, &err), 0);
    assert_int_equal(h.n_tensors, 4);
    assert_string_equal(h.tensors[0].name, "a");
    assert_string_equal(h.tensors[3].name, "z");
    assert_int_equal(h.tensors[1].ndim, 2);
    assert_int_equal(h.tensors[3].count, 0);
    float v[2];
    plena_st_to_f32(&h.tensors[0], v);
    assert_true(v[0] == 1.0f && v[1] == -2.0f);
    plena_st_to_f32(&h.tensors[1], v);
    assert_true(v[0] == 1.0f && v[1] == 0x1p-24f);
    plena_st_to_f32(&h.tensors[2], v);
    assert_true(v[0] == 1.0f && v[1] == 0x1p-149f);
    plena_st_header_free(&h);
}

struct bad {
    const char *header;
    size_t n_data; /* data bytes after the header */
    const char *msg;
};

static void test_bad_headers(void **state)
{
    (void)state;
    static const struct bad cases[] = {
        {"[1,2]", 0, "header JSON must be an object"},
        {"{\"a\":", 0, "header JSON:"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "duplicate"},
        {"{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
         "unknown or unsupported dtype 'I64'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
         "shape[0] must be a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
         "element count overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
         "byte size overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
         "3 elements of F32 need 12 bytes, data_offsets span 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 8,
         "end 16 is past the end of the data (8 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "'a' [0, 8) and 'b' [4, 12) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 8, "begin 4 > end 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 8, "data_offsets must"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
         "unknown key 'x'"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype must be a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":7,\"data_offsets\":[0,4]}}", 4,
         "shape must be an array"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__.k must be a string"},
        {"{\"a\":[]}", 0, "'a': expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t f[1024] = {0};
        size_t len = build(f, cases[i].header, f + 600, cases[i].n_data);
        struct plena_st_header h;
        struct plena_err err = {0};
        int rc = plena_st_parse(f, len, "x.safetensors", &h, &err);
        if (rc != PLENA_E_INPUT || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: rc %d, message '%s', expected '%s'", i, rc, err.msg, cases[i].msg);
        assert_string_equal(err.where, "x.safetensors");
    }
}

static void test_bad_length(void **state)
{
    (void)state;
    uint8_t f[64] = {0};
    struct plena_st_header h;
    struct plena_err err = {0};
    assert_int_equal(plena_st_parse(f, 7, "x", &h, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "too short"));
    /* header length 2 + 100 MiB */
    uint64_t n = PLENA_ST_MAX_HEADER + 1ull;
    for (int i = 0; i < 8; i++)
        f[i] = (uint8_t)(n >> (8 * i));
    plena_err_clear(&err);
    assert_int_equal(plena_st_parse(f, sizeof f, "x", &h, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "exceeds 100 MiB"));
    /* truncated: the header claims 40 bytes, 20 follow */
    f[0] = 40;
    for (int i = 1; i < 8; i++)
        f[i] = 0;
    plena_err_clear(&err);
    assert_int_equal(plena_st_parse(f, 28, "x", &h, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "header length 40 but only 20 bytes follow"));
    /* a length with the top bit set must not wrap around */
    for (int i = 0; i < 8; i++)
        f[i] = 0xff;
    plena_err_clear(&err);
    assert_int_equal(plena_st_parse(f, sizeof f, "x", &h, &err), PLENA_E_INPUT);
}

static void write_st(const char *dir, const char *name, const char *header, const uint8_t *data,
                     size_t n)
{
    uint8_t f[2048];
    size_t len = build(f, header, data, n);
    plena_test_write_file(dir, name, f, len);
}

static void put_u64(struct plena_sha256 *s, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    plena_sha256_update(s, b, 8);
}

static const char cfg[] = "{\"model_type\":\"x\"}\n";
static const char h1[] = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}";
static const char h2[] = "{\"v\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}";

/* The documented layout: u64le(len config) config, then per file in name
 * order u64le(len name) name u64le(size) u64le(N) header. */
static void expected_fingerprint(char out[65])
{
    struct plena_sha256 s;
    plena_sha256_init(&s);
    put_u64(&s, strlen(cfg));
    plena_sha256_update(&s, cfg, strlen(cfg));
    const char *names[2] = {"a.safetensors", "b.safetensors"}, *hs[2] = {h1, h2};
    for (int i = 0; i < 2; i++) {
        put_u64(&s, strlen(names[i]));
        plena_sha256_update(&s, names[i], strlen(names[i]));
        put_u64(&s, 8 + strlen(hs[i]) + 4);
        put_u64(&s, strlen(hs[i]));
        plena_sha256_update(&s, hs[i], strlen(hs[i]));
    }
    uint8_t d[32];
    plena_sha256_final(&s, d);
    plena_sha256_to_hex(d, out);
}

static void test_directory(void **state)
{
    (void)state;
    char dir[256];
    assert_int_equal(plena_test_mkdtemp(dir, sizeof dir, "ckpt"), 0);
    plena_test_write_text(dir, "config.json", cfg);
    write_st(dir, "b.safetensors", h2, data16 + 8, 4);
    write_st(dir, "a.safetensors", h1, data16, 4);
    struct plena_ckpt c;
    struct plena_err err = {0};
    assert_int_equal(plena_ckpt_open(dir, &c, &err), 0);
    assert_int_equal(c.n_files, 2);
    assert_string_equal(c.files[0].name, "a.safetensors");
    char want[65];
    expected_fingerprint(want);
    assert_string_equal(c.fingerprint, want);
    float *v;
    const uint64_t s2[1] = {2}, s11[2] = {1, 1}, s3[1] = {3};
    assert_int_equal(plena_ckpt_load(&c, "w", 1, s2, &v, &err), 0);
    assert_true(v[0] == 1.0f && v[1] == -2.0f);
    plena_free(v);
    assert_int_equal(plena_ckpt_load(&c, "v", 2, s11, &v, &err), 0);
    assert_true(v[0] == 1.0f);
    plena_free(v);
    assert_int_equal(plena_ckpt_load(&c, "w", 1, s3, &v, &err), PLENA_E_INPUT);
    assert_string_equal(err.msg, "tensor 'w' has shape [2], config.json implies [3]");
    assert_string_equal(err.where, "a.safetensors");
    plena_err_clear(&err);
    assert_int_equal(plena_ckpt_load(&c, "nope", 1, s3, &v, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "tensor 'nope' is missing"));
    plena_ckpt_close(&c);

    /* the same tensor in two files */
    write_st(dir, "c.safetensors", h1, data16, 4);
    plena_err_clear(&err);
    assert_int_equal(plena_ckpt_open(dir, &c, &err), PLENA_E_INPUT);
    assert_string_equal(err.msg, "tensor 'w' is in both a.safetensors and c.safetensors");

    /* with an index, only the files it names are read, and each tensor must
     * be where it says */
    plena_test_write_text(dir, "model.safetensors.index.json",
                          "{\"metadata\":{},\"weight_map\":{\"w\":\"a.safetensors\","
                          "\"v\":\"b.safetensors\"}}");
    plena_err_clear(&err);
    assert_int_equal(plena_ckpt_open(dir, &c, &err), 0);
    assert_int_equal(c.n_files, 2);
    assert_string_equal(c.fingerprint, want);
    plena_ckpt_close(&c);
    plena_test_write_text(dir, "model.safetensors.index.json",
                          "{\"weight_map\":{\"w\":\"b.safetensors\",\"v\":\"b.safetensors\"}}");
    plena_err_clear(&err);
    assert_int_equal(plena_ckpt_open(dir, &c, &err), PLENA_E_INPUT);
    assert_string_equal(err.msg, "weight_map.w names b.safetensors, but the tensor is not in any "
                                 "file");
    /* a damaged file is reported with its name */
    plena_test_write_text(dir, "model.safetensors.index.json",
                          "{\"weight_map\":{\"w\":\"a.safetensors\"}}");
    write_st(dir, "a.safetensors",
             "{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]}}", data16, 4);
    plena_err_clear(&err);
    assert_int_equal(plena_ckpt_open(dir, &c, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, "a.safetensors");
    assert_non_null(strstr(err.msg, "past the end"));
    plena_test_rmtree(dir);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_values),
    cmocka_unit_test(test_bad_headers),
    cmocka_unit_test(test_bad_length),
    cmocka_unit_test(test_directory),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
