/* Writing rules of docs/formats.md "Conventions", docs/replay.md "Identity" kept in replay/ (the
 * JSON text and numbers are tested in common/test_json.c): SHA-256 of a
 * canonical object (expected digests
 * computed outside plena with `printf '%s' TEXT | sha256sum`), volatile keys
 * at every depth, RFC 4180 CSV and the torn-tail JSONL append. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "replay/jsonw.h"
#include "common/test_support.h"

/* Canonical text through the replay name (the writer itself is tested in
 * common/test_json.c). */
static char *render(const json_t *v)
{
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = plena_replay_json_canonical(&b, v);
    assert_int_equal(rc, 0);
    plena_buf_append(&b, "", 1);
    return b.data;
}

static void test_canonical_sha256(void **state)
{
    (void)state;
    char hex[65];
    /* canonical '{"a":[1,2],"b":1}' (sha256sum of that text) */
    json_t *v = json_loads("{ \"b\" : 1, \"a\" : [ 1, 2 ] }", 0, NULL);
    assert_int_equal(plena_replay_json_sha256(v, 0, hex, NULL), 0);
    assert_string_equal(hex, "94a786c3662bc7beeb598efa7d8cb58d7bea25d6c275ea9785a0230ff1f8c2ba");
    json_decref(v);
    /* escapes: only " \ and control characters; numbers shortest:
     * '{"k":"a\"b\\c\u0001","n":[0.1,1e+21,1.5,2,-3]}' */
    v = json_pack("{s:s,s:[f,f,f,f,i]}", "k", "a\"b\\c\x01", "n", 0.1, 1e21, 1.5, 2.0, -3);
    char *c = render(v);
    assert_string_equal(c, "{\"k\":\"a\\\"b\\\\c\\u0001\",\"n\":[0.1,1e+21,1.5,2,-3]}");
    plena_free(c);
    assert_int_equal(plena_replay_json_sha256(v, 0, hex, NULL), 0);
    assert_string_equal(hex, "0d88aa01ef3e2e086d45aad5f8d99ea73f674446ea30159f339177ac605aea7d");
    json_decref(v);
}

/* The names docs/replay.md "Volatile keys" lists (the backquoted words
 * between "src/replay/jsonw.c`:" and "`plena_replay_strip_volatile`"), into
 * names[] (at most max); their count. The document is checked against the
 * one table here, so the test keeps no third copy of the list. */
static size_t doc_volatile_keys(char names[][64], size_t max)
{
    char *doc = NULL;
    size_t len = 0;
    assert_int_equal(plena_file_read_all(PLENA_SOURCE_DIR "/docs/replay.md", &doc, &len, NULL), 0);
    const char *sec = strstr(doc, "## Volatile keys");
    assert_non_null(sec);
    const char *p = strstr(sec, "src/replay/jsonw.c`:");
    assert_non_null(p);
    p += strlen("src/replay/jsonw.c`:");
    const char *end = strstr(p, "`plena_replay_strip_volatile`");
    assert_non_null(end);
    size_t n = 0;
    while ((p = strchr(p, '`')) && p < end) {
        const char *q = strchr(p + 1, '`');
        assert_non_null(q);
        assert_true(n < max && (size_t)(q - p - 1) < 64);
        memcpy(names[n], p + 1, (size_t)(q - p - 1));
        names[n++][q - p - 1] = 0;
        p = q + 1;
    }
    plena_free(doc);
    return n;
}

static void test_volatile_keys(void **state)
{
    (void)state;
    /* the table and docs/replay.md "Volatile keys" name the same keys */
    char names[64][64];
    const size_t n = doc_volatile_keys(names, 64);
    assert_int_equal(n, plena_replay_n_volatile_keys);
    for (size_t i = 0; i < n; i++) {
        assert_true(plena_replay_is_volatile_key(names[i]));
        for (size_t j = 0; j < i; j++) /* distinct: n of them cover the table */
            assert_string_not_equal(names[i], names[j]);
    }
    assert_false(plena_replay_is_volatile_key("passed"));
    assert_false(plena_replay_is_volatile_key("fingerprint"));

    json_t *a =
        json_loads("{\"x\":1,\"host_seconds\":3.5,\"run\":{\"cwd\":\"/a\",\"y\":[{\"worker\""
                   ":1,\"z\":2}]},\"gate\":{\"passed\":true,\"decided_at_utc\":\"t1\"}}",
                   0, NULL);
    json_t *b = json_loads("{\"x\":1,\"host_seconds\":9,\"run\":{\"cwd\":\"/b\",\"y\":[{\"worker\""
                           ":7,\"z\":2}]},\"gate\":{\"passed\":true,\"decided_at_utc\":\"t2\"}}",
                           0, NULL);
    char ha[65], hb[65], hraw[65];
    assert_int_equal(plena_replay_json_sha256(a, 1, ha, NULL), 0);
    assert_int_equal(plena_replay_json_sha256(b, 1, hb, NULL), 0);
    assert_string_equal(ha, hb);
    assert_int_equal(plena_replay_json_sha256(a, 0, hraw, NULL), 0);
    assert_string_not_equal(ha, hraw);
    /* the source object is untouched by hashing */
    assert_non_null(json_object_get(a, "host_seconds"));
    plena_replay_strip_volatile(a);
    char *c = render(a);
    assert_string_equal(c, "{\"gate\":{\"passed\":true},\"run\":{\"y\":[{\"z\":2}]},\"x\":1}");
    plena_free(c);
    json_decref(a);
    json_decref(b);
}

static void test_csv(void **state)
{
    (void)state;
    struct plena_csv c;
    plena_csv_init(&c);
    const char *cols[] = {"id", "note", "n", "ok", "empty"};
    assert_int_equal(plena_csv_header(&c, cols, 5), 0);
    assert_int_equal(plena_csv_cell_str(&c, "t0"), 0);
    assert_int_equal(plena_csv_cell_str(&c, "a,\"b\"\nc"), 0);
    json_t *r = json_real(0.1), *t = json_true(), *n = json_null();
    assert_int_equal(plena_csv_cell_json(&c, r), 0);
    assert_int_equal(plena_csv_cell_json(&c, t), 0);
    assert_int_equal(plena_csv_cell_json(&c, n), 0);
    assert_int_equal(plena_csv_end_row(&c), 0);
    /* a short row is refused */
    assert_int_equal(plena_csv_cell_str(&c, "x"), 0);
    assert_int_equal(plena_csv_end_row(&c), -1);
    plena_buf_append(&c.buf, "", 1);
    assert_string_equal(c.buf.data, "id,note,n,ok,empty\nt0,\"a,\"\"b\"\"\nc\",0.1,true,\n"
                                    "x");
    json_decref(r);
    json_decref(t);
    json_decref(n);
    plena_csv_free(&c);

    /* zero rows: header only */
    plena_csv_init(&c);
    assert_int_equal(plena_csv_header(&c, cols, 5), 0);
    plena_buf_append(&c.buf, "", 1);
    assert_string_equal(c.buf.data, "id,note,n,ok,empty\n");
    plena_csv_free(&c);
}

/* A fresh directory from the template dir and path = dir/m.jsonl. */
static void jsonl_tmp(char *dir, char *path, size_t n)
{
    assert_non_null(mkdtemp(dir));
    snprintf(path, n, "%s/m.jsonl", dir);
}

static void test_jsonl_torn_tail(void **state)
{
    (void)state;
    char dir[] = "/tmp/plena_jsonw_XXXXXX", path[256];
    jsonl_tmp(dir, path, sizeof path);
    const char *pre = "{\"a\":1}\n{\"a\":2}\n{\"a\":3,\"b";
    assert_int_equal(plena_file_write_atomic(path, pre, strlen(pre), NULL), 0);
    int fd;
    size_t torn = 0;
    assert_int_equal(plena_jsonl_open(path, &fd, &torn, NULL), 0);
    assert_int_equal(torn, strlen("{\"a\":3,\"b"));
    json_t *rec = json_pack("{s:i,s:s}", "z", 4, "a", "x");
    assert_int_equal(plena_jsonl_append(fd, rec, path, NULL), 0);
    close(fd);
    json_decref(rec);
    char *data;
    size_t len;
    assert_int_equal(plena_file_read_all(path, &data, &len, NULL), 0);
    assert_string_equal(data, "{\"a\":1}\n{\"a\":2}\n{\"a\":\"x\",\"z\":4}\n");
    plena_free(data);
    /* a clean file loses nothing; a file with no newline at all is all tail */
    assert_int_equal(plena_jsonl_open(path, &fd, &torn, NULL), 0);
    assert_int_equal(torn, 0);
    close(fd);
    assert_int_equal(plena_file_write_atomic(path, "{\"a\"", 4, NULL), 0);
    assert_int_equal(plena_jsonl_open(path, &fd, &torn, NULL), 0);
    assert_int_equal(torn, 4);
    close(fd);
    unlink(path);
    rmdir(dir);
}

/* A full disk cuts an append short without setting errno; the message must
 * carry the error of the write that failed (here EFBIG from RLIMIT_FSIZE, as
 * ENOSPC on a full disk), not a stale errno ("File exists" before the fix). */
static void test_jsonl_short_append(void **state)
{
    (void)state;
    char dir[] = "/tmp/plena_jsonw_XXXXXX", path[256];
    jsonl_tmp(dir, path, sizeof path);
    int fd;
    assert_int_equal(plena_jsonl_open(path, &fd, NULL, NULL), 0);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4; /* the record is longer: the first write stops at byte 4 */
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    json_t *rec = json_pack("{s:s}", "a", "0123456789");
    struct plena_err err;
    plena_err_clear(&err);
    errno = EEXIST;
    int rc = plena_jsonl_append(fd, rec, path, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    json_decref(rec);
    close(fd);
    assert_int_equal(rc, PLENA_E_OUTPUT);
    assert_non_null(strstr(err.msg, strerror(EFBIG)));
    assert_null(strstr(err.msg, strerror(EEXIST)));
    unlink(path);
    rmdir(dir);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_canonical_sha256),
    cmocka_unit_test(test_volatile_keys),
    cmocka_unit_test(test_csv),
    cmocka_unit_test(test_jsonl_torn_tail),
    cmocka_unit_test(test_jsonl_short_append),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
