/* Tests of the TOML-subset reader (docs/formats.md "Settings file"): every
 * accepted construct with its line/column, every rejection with its exact
 * message, and an allocation-failure sweep over a document using them all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "settings/toml.h"
#include "common/test_support.h"

static struct plena_toml_doc parse_ok(const char *text)
{
    struct plena_toml_doc doc;
    struct plena_err err = {0};
    int rc = plena_toml_parse(text, strlen(text), "t.toml", &doc, &err);
    if (rc) print_error("unexpected: %s: %s\n", err.where, err.msg);
    assert_int_equal(rc, 0);
    assert_non_null(doc.root);
    return doc;
}

/* Parses text expecting a syntax error at where with msg. */
static void parse_bad(const char *text, const char *where, const char *msg)
{
    struct plena_toml_doc doc;
    struct plena_err err = {0};
    int rc = plena_toml_parse(text, strlen(text), "t.toml", &doc, &err);
    assert_int_equal(rc, PLENA_E_INPUT);
    assert_int_equal(err.code, PLENA_E_INPUT);
    assert_null(doc.root);
    if (strcmp(err.where, where) || strcmp(err.msg, msg))
        print_error("input %s -> %s: %s\n", text, err.where, err.msg);
    assert_string_equal(err.where, where);
    assert_string_equal(err.msg, msg);
}

static const struct plena_toml_value *get(const struct plena_toml_doc *d, const char *path)
{
    const struct plena_toml_value *v = plena_toml_get(d->root, path);
    if (!v) print_error("missing %s\n", path);
    assert_non_null(v);
    return v;
}

static int64_t get_int(const struct plena_toml_doc *d, const char *path)
{
    const struct plena_toml_value *v = get(d, path);
    assert_int_equal(v->type, PLENA_TOML_INTEGER);
    return v->i;
}

static void test_tables_and_positions(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("# comment\n"
                                       "top = 1 # trailing\n"
                                       "[a.b.c]\n"
                                       "  x  =  42\n"
                                       "[ a . d ]\n"
                                       "y = 2\n");
    assert_int_equal(get_int(&d, "top"), 1);
    assert_int_equal(get_int(&d, "a.b.c.x"), 42);
    assert_int_equal(get_int(&d, "a.d.y"), 2);
    const struct plena_toml_value *c = get(&d, "a.b.c");
    assert_int_equal(c->type, PLENA_TOML_TABLE);
    assert_int_equal(c->line, 3);
    assert_int_equal(c->col, 1);
    const struct plena_toml_entry *e = plena_toml_find(c, "x");
    assert_non_null(e);
    assert_int_equal(e->line, 4);
    assert_int_equal(e->col, 3);
    assert_int_equal(e->value->line, 4);
    assert_int_equal(e->value->col, 9);
    /* the implicit parent [a] can still be defined once */
    plena_toml_free(&d);
    d = parse_ok("[a.b]\nx = 1\n[a]\ny = 2\n");
    assert_int_equal(get_int(&d, "a.y"), 2);
    assert_int_equal(get(&d, "a")->line, 3);
    assert_null(plena_toml_get(d.root, "a.z"));
    assert_null(plena_toml_get(d.root, "a.y.z"));
    plena_toml_free(&d);
}

static void test_array_of_tables(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("[[x.y]]\na = 1\n[[x.y]]\na = 2\n[x.y.sub]\nb = 3\n");
    const struct plena_toml_value *arr = get(&d, "x.y");
    assert_int_equal(arr->type, PLENA_TOML_ARRAY);
    assert_int_equal(arr->n_entries, 2);
    assert_int_equal(arr->entries[1].value->type, PLENA_TOML_TABLE);
    assert_int_equal(plena_toml_find(arr->entries[1].value, "a")->value->i, 2);
    /* [x.y.sub] goes into the last element */
    assert_non_null(plena_toml_find(arr->entries[1].value, "sub"));
    plena_toml_free(&d);
    parse_bad("a = 1\n[[a]]\n", "t.toml:2:1",
              "syntax: [[a]]: 'a' is already defined and is not an array of tables");
}

static void test_dotted_keys(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("a.b = 1\na . c = 2\nA-b_9 = 3\n");
    assert_int_equal(get_int(&d, "a.b"), 1);
    assert_int_equal(get_int(&d, "a.c"), 2);
    assert_int_equal(get_int(&d, "A-b_9"), 3);
    plena_toml_free(&d);
    parse_bad("a.b = 1\na.b = 2\n", "t.toml:2:3", "syntax: duplicate key 'b'");
    parse_bad("a = 1\na.b = 2\n", "t.toml:2:1", "syntax: key 'a' is already defined");
    parse_bad("[t.s]\nx = 1\n[t]\ns.y = 2\n", "t.toml:4:1", "syntax: key 's' is already defined");
    parse_bad("a.b = 1\n[a]\n", "t.toml:2:1", "syntax: table [a] defined twice");
}

static void test_strings(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("s = \"q\\\" b\\\\ \\b\\t\\n\\f\\r \\u00E9 \\U0001F600\"\n"
                                       "l = 'C:\\path\\no\"esc'\n"
                                       "e = \"\"\n");
    const struct plena_toml_value *s = get(&d, "s");
    assert_int_equal(s->type, PLENA_TOML_STRING);
    const char want[] = "q\" b\\ \b\t\n\f\r \xC3\xA9 \xF0\x9F\x98\x80";
    assert_int_equal(s->str_len, sizeof want - 1);
    assert_memory_equal(s->str, want, sizeof want);
    assert_string_equal(get(&d, "l")->str, "C:\\path\\no\"esc");
    assert_int_equal(get(&d, "e")->str_len, 0);
    plena_toml_free(&d);
    parse_bad("s = \"\"\"x\"\"\"\n", "t.toml:1:5", "syntax: multi-line strings are not supported");
    parse_bad("s = '''x'''\n", "t.toml:1:5", "syntax: multi-line strings are not supported");
    parse_bad("s = \"abc\nx = 1\n", "t.toml:1:5", "syntax: unterminated string");
    parse_bad("s = \"a\\qb\"\n", "t.toml:1:7", "syntax: invalid escape sequence '\\q'");
    parse_bad("s = \"\\u12\"\n", "t.toml:1:6", "syntax: \\u escape needs 4 hex digits");
    parse_bad("s = \"\\uD800\"\n", "t.toml:1:6", "syntax: \\uD800 is not a Unicode scalar value");
    parse_bad("s = \"a\x01\"\n", "t.toml:1:7", "syntax: control character 0x01 in string");
}

static void test_integers(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("a = +17\nb = -17\nc = 1_000_000\nd = 0xDEAD_beef\n"
                                       "e = 0o755\nf = 0b1101\ng = 0\nh = -9223372036854775808\n"
                                       "i = 9223372036854775807\nj = 0x7FFFFFFFFFFFFFFF\n");
    assert_int_equal(get_int(&d, "a"), 17);
    assert_int_equal(get_int(&d, "b"), -17);
    assert_int_equal(get_int(&d, "c"), 1000000);
    assert_int_equal(get_int(&d, "d"), 0xDEADBEEF);
    assert_int_equal(get_int(&d, "e"), 0755);
    assert_int_equal(get_int(&d, "f"), 13);
    assert_int_equal(get_int(&d, "g"), 0);
    assert_true(get_int(&d, "h") == INT64_MIN);
    assert_true(get_int(&d, "i") == INT64_MAX);
    assert_true(get_int(&d, "j") == INT64_MAX);
    plena_toml_free(&d);
    parse_bad("x = 1__0\n", "t.toml:1:5", "syntax: malformed value '1__0'");
    parse_bad("x = 1_\n", "t.toml:1:5", "syntax: malformed value '1_'");
    parse_bad("x = _1\n", "t.toml:1:5", "syntax: malformed value '_1'");
    parse_bad("x = 01\n", "t.toml:1:5", "syntax: malformed value '01'");
    parse_bad("x = 0x\n", "t.toml:1:5", "syntax: malformed number '0x'");
    parse_bad("x = 0b102\n", "t.toml:1:5", "syntax: malformed number '0b102'");
    parse_bad("x = +0x10\n", "t.toml:1:5", "syntax: malformed value '+0x10'");
    parse_bad("x = 9223372036854775808\n", "t.toml:1:5",
              "syntax: integer '9223372036854775808' out of range");
    parse_bad("x = 0x8000000000000000\n", "t.toml:1:5",
              "syntax: integer '0x8000000000000000' out of range");
    parse_bad("x = 12abc\n", "t.toml:1:5", "syntax: malformed value '12abc'");
}

static void test_floats_and_booleans(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("a = 3.25\nb = -0.5e3\nc = 1e6\nd = 6.626E-34\n"
                                       "e = inf\nf = -inf\ng = nan\nh = +nan\ni = 1_0.0_5\n"
                                       "t = true\nu = false\n");
    assert_true(get(&d, "a")->type == PLENA_TOML_FLOAT && get(&d, "a")->f == 3.25);
    assert_true(get(&d, "b")->f == -500.0);
    assert_true(get(&d, "c")->f == 1e6);
    assert_true(get(&d, "d")->f == 6.626e-34);
    assert_true(isinf(get(&d, "e")->f) && get(&d, "e")->f > 0);
    assert_true(isinf(get(&d, "f")->f) && get(&d, "f")->f < 0);
    assert_true(isnan(get(&d, "g")->f));
    assert_true(isnan(get(&d, "h")->f));
    assert_true(get(&d, "i")->f == 10.05);
    assert_true(get(&d, "t")->type == PLENA_TOML_BOOLEAN && get(&d, "t")->b == 1);
    assert_true(get(&d, "u")->type == PLENA_TOML_BOOLEAN && get(&d, "u")->b == 0);
    plena_toml_free(&d);
    parse_bad("x = 1.\n", "t.toml:1:5", "syntax: malformed value '1.'");
    parse_bad("x = .5\n", "t.toml:1:5", "syntax: malformed value '.5'");
    parse_bad("x = 1e\n", "t.toml:1:5", "syntax: malformed value '1e'");
    parse_bad("x = truex\n", "t.toml:1:5", "syntax: malformed value 'truex'");
    parse_bad("x = True\n", "t.toml:1:5", "syntax: malformed value 'True'");
}

static void test_arrays(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("a = [1, 2, 3]\n"
                                       "b = [\n  1, # one\n  \"two\",\n  [3, 4],\n]\n"
                                       "c = []\nd = 5\n");
    const struct plena_toml_value *a = get(&d, "a");
    assert_int_equal(a->type, PLENA_TOML_ARRAY);
    assert_int_equal(a->n_entries, 3);
    assert_int_equal(a->entries[2].value->i, 3);
    const struct plena_toml_value *b = get(&d, "b");
    assert_int_equal(b->n_entries, 3);
    assert_int_equal(b->entries[1].value->type, PLENA_TOML_STRING);
    assert_int_equal(b->entries[1].line, 4);
    assert_int_equal(b->entries[2].value->n_entries, 2);
    assert_int_equal(get(&d, "c")->n_entries, 0);
    /* lines after a multi-line array are counted right */
    assert_int_equal(plena_toml_find(d.root, "d")->line, 8);
    plena_toml_free(&d);
    parse_bad("a = [1 2]\n", "t.toml:1:8", "syntax: expected ',' or ']' in array, found '2'");
    parse_bad("a = [1,\n", "t.toml:1:5", "syntax: unterminated array");
    parse_bad("a = [,]\n", "t.toml:1:6", "syntax: expected a value, found ','");
}

static void test_inline_tables(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("p = { x = 1, y.z = \"s\", w = [1,\n 2] }\nq = {}\n");
    assert_int_equal(get_int(&d, "p.x"), 1);
    assert_string_equal(get(&d, "p.y.z")->str, "s");
    assert_int_equal(get(&d, "p.w")->n_entries, 2);
    assert_int_equal(get(&d, "q")->type, PLENA_TOML_TABLE);
    plena_toml_free(&d);
    parse_bad("p = { x = 1,\n y = 2 }\n", "t.toml:1:13",
              "syntax: expected a key, found end of line");
    parse_bad("p = { x = 1\n}\n", "t.toml:1:5",
              "syntax: inline table must be closed on the same line");
    parse_bad("p = { x = 1, }\n", "t.toml:1:14", "syntax: trailing comma in inline table");
    parse_bad("p = { x = 1, x = 2 }\n", "t.toml:1:14", "syntax: duplicate key 'x'");
    parse_bad("p = { x = 1 }\n[p]\n", "t.toml:2:1", "syntax: table [p] defined twice");
    parse_bad("p = { x = 1 }\np.y = 2\n", "t.toml:2:1", "syntax: key 'p' is already defined");
}

static void test_rejections(void **state)
{
    (void)state;
    parse_bad("\"a\" = 1\n", "t.toml:1:1", "syntax: quoted keys are not supported");
    parse_bad("a.'b' = 1\n", "t.toml:1:3", "syntax: quoted keys are not supported");
    parse_bad("[\"a\"]\n", "t.toml:1:2", "syntax: quoted keys are not supported");
    parse_bad("d = 1979-05-27\n", "t.toml:1:5", "syntax: date/time values are not supported");
    parse_bad("d = 1979-05-27T07:32:00Z\n", "t.toml:1:5",
              "syntax: date/time values are not supported");
    parse_bad("t = 07:32:00\n", "t.toml:1:5", "syntax: date/time values are not supported");
    parse_bad("x = 1\ny = 2\nx = 3\n", "t.toml:3:1", "syntax: duplicate key 'x'");
    parse_bad("[a]\nx = 1\n\n[a]\n", "t.toml:4:1", "syntax: table [a] defined twice");
    parse_bad("[a.b]\n[a.b]\n", "t.toml:2:1", "syntax: table [a.b] defined twice");
    parse_bad("x = 1\n[x]\n", "t.toml:2:1", "syntax: [x]: key 'x' is already defined as a value");
    parse_bad("x 1\n", "t.toml:1:3", "syntax: expected '=' after key 'x', found '1'");
    parse_bad("x =\n", "t.toml:1:4", "syntax: expected a value, found end of line");
    parse_bad("x = 1 2\n", "t.toml:1:7", "syntax: expected end of line, found '2'");
    parse_bad("[a\n", "t.toml:1:3", "syntax: expected ']' to close table header");
    parse_bad("[[a]\n", "t.toml:1:4", "syntax: expected ']]' to close table header");
    parse_bad("[]\n", "t.toml:1:2", "syntax: expected a key, found ']'");
    parse_bad("x = 1\n\x01 = 2\n", "t.toml:2:1", "syntax: expected a key, found '\x01'");
    parse_bad("a = \"x\" # ok\n\nb = @\n", "t.toml:3:5", "syntax: expected a value, found '@'");
    const char nul[] = "a = 1\nb\0 = 2\n";
    struct plena_toml_doc doc;
    struct plena_err err = {0};
    assert_int_equal(plena_toml_parse(nul, sizeof nul - 1, "t.toml", &doc, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, "t.toml:2:2");
    assert_string_equal(err.msg, "syntax: NUL byte in file");
}

static void test_crlf_and_value_api(void **state)
{
    (void)state;
    struct plena_toml_doc d = parse_ok("a = 1\r\n[t]\r\nb = \"x\"\r\n");
    assert_int_equal(get_int(&d, "a"), 1);
    assert_string_equal(get(&d, "t.b")->str, "x");
    assert_int_equal(plena_toml_find(get(&d, "t"), "b")->line, 3);
    plena_toml_free(&d);
    struct plena_toml_value *v;
    struct plena_err err = {0};
    assert_int_equal(plena_toml_parse_value("0x40", 4, "--set", &v, &err), 0);
    assert_int_equal(v->type, PLENA_TOML_INTEGER);
    assert_int_equal(v->i, 64);
    plena_toml_value_free(v);
    assert_int_equal(plena_toml_parse_value("1 2", 3, "--set", &v, &err), PLENA_E_INPUT);
    assert_string_equal(err.where, "--set:1:3");
    assert_string_equal(err.msg, "syntax: unexpected text after the value");
    assert_string_equal(plena_toml_type_name(PLENA_TOML_INTEGER), "integer");
    assert_string_equal(plena_toml_type_name(PLENA_TOML_STRING), "string");
    assert_string_equal(plena_toml_type_name(PLENA_TOML_BOOLEAN), "boolean");
}

/* Every allocation failure is reported as PLENA_E_NOMEM without leaks (ASan). */
static void test_alloc_failures(void **state)
{
    (void)state;
    const char *text = "[a.b]\nx = \"s\"\ny = [1, [2], {q = 1}]\n[[c]]\nz.w = 1.5\n";
    int ok = 0;
    for (long n = 0; n < 200 && !ok; n++) {
        struct plena_toml_doc doc;
        struct plena_err err = {0};
        plena_alloc_fail_after(n);
        int rc = plena_toml_parse(text, strlen(text), "t.toml", &doc, &err);
        plena_alloc_fail_reset();
        if (rc == 0) {
            ok = 1;
            plena_toml_free(&doc);
        } else {
            assert_int_equal(rc, PLENA_E_NOMEM);
            assert_null(doc.root);
        }
    }
    assert_true(ok);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tables_and_positions),
    cmocka_unit_test(test_array_of_tables),
    cmocka_unit_test(test_dotted_keys),
    cmocka_unit_test(test_strings),
    cmocka_unit_test(test_integers),
    cmocka_unit_test(test_floats_and_booleans),
    cmocka_unit_test(test_arrays),
    cmocka_unit_test(test_inline_tables),
    cmocka_unit_test(test_rejections),
    cmocka_unit_test(test_crlf_and_value_api),
    cmocka_unit_test(test_alloc_failures),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
