/* common/: the leaf modules every layer shares (typed JSON members, FNV-1a,
 * RFC 3339 parsing and formatting, JSON string escaping). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"
#include "common/json_escape.h"
#include "common/json_member.h"
#include "common/buf.h"
#include "common/jsonutil.h"
#include "common/rfc3339.h"

static json_object *tree(const char *text)
{
    json_object *o = NULL;
    assert_int_equal(gq_json_parse(text, strlen(text), GQ_JSON_DEFAULT_DEPTH, &o, NULL), GQ_OK);
    return o;
}

static void json_members(void **state)
{
    (void)state;
    json_object *o = tree("{\"s\":\"x\",\"n\":1,\"z\":null,\"o\":{\"k\":\"v\"},\"a\":[1],"
                          "\"metadata\":{\"name\":\"p\",\"labels\":{\"l\":\"1\"}}}");
    assert_string_equal(gq_json_get_string(o, "s"), "x");
    assert_null(gq_json_get_string(o, "n")); /* another type */
    assert_null(gq_json_get_string(o, "z")); /* null */
    assert_null(gq_json_get_string(o, "missing"));
    assert_null(gq_json_get_string(NULL, "s"));
    assert_null(gq_json_get_string(gq_json_member(o, "a"), "s")); /* not an object */
    assert_non_null(gq_json_member(o, "n"));
    assert_null(gq_json_member(o, "z"));
    assert_string_equal(gq_json_get_string(gq_json_get_object(o, "o"), "k"), "v");
    assert_null(gq_json_get_object(o, "a"));
    assert_int_equal(json_object_array_length(gq_json_get_array(o, "a")), 1);
    assert_null(gq_json_get_array(o, "o"));
    assert_non_null(gq_json_get_typed(o, "n", json_type_int));
    assert_null(gq_json_get_typed(o, "n", json_type_double));
    assert_string_equal(gq_json_meta_string(o, "name"), "p");
    assert_null(gq_json_meta_string(o, "namespace"));
    assert_string_equal(gq_json_get_string(gq_json_meta_object(o, "labels"), "l"), "1");
    assert_null(gq_json_meta_object(o, "name"));

    char *s = NULL;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_json_dup_string(o, "s", &s, &err), GQ_OK);
    assert_string_equal(s, "x");
    free(s);
    assert_int_equal(gq_json_dup_string(o, "z", &s, &err), GQ_OK);
    assert_null(s);
    assert_int_equal(gq_json_dup_string(o, "n", &s, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "n: not a string");
    json_object_put(o);
}

static void fnv1a(void **state)
{
    (void)state;
    /* Reference values of 64-bit FNV-1a. */
    assert_true(gq_fnv1a("") == 0xcbf29ce484222325ULL);
    assert_true(gq_fnv1a("a") == 0xaf63dc4c8601ec8cULL);
    assert_true(gq_fnv1a("foobar") == 0x85944171f73967e8ULL);
    assert_true(gq_fnv1a_key("ns", "name") == gq_fnv1a("ns/name"));
    assert_true(gq_fnv1a_key(NULL, "name") == gq_fnv1a("/name"));
    assert_true(gq_fnv1a_add(gq_fnv1a("foo"), "bar") == gq_fnv1a("foobar"));
}

static void rfc3339_format(void **state)
{
    (void)state;
    char buf[GQ_RFC3339_MAX];
    gq_time_format_rfc3339(0, buf);
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    gq_time_format_rfc3339(1795791732, buf);
    assert_string_equal(buf, "2026-11-27T15:02:12Z");
    gq_time_format_rfc3339_frac(1795791732123456LL, 6, buf);
    assert_string_equal(buf, "2026-11-27T15:02:12.123456Z");
    gq_time_format_rfc3339_frac(1795791732123456LL, 3, buf);
    assert_string_equal(buf, "2026-11-27T15:02:12.123Z");
    gq_time_format_rfc3339_frac(1795791732123456LL, 0, buf);
    assert_string_equal(buf, "2026-11-27T15:02:12Z");
    gq_time_format_rfc3339_frac(-1, 6, buf); /* rounds down, never a negative fraction */
    assert_string_equal(buf, "1969-12-31T23:59:59.999999Z");
    gq_time_format_rfc3339(INT64_MAX, buf); /* clamped to what RFC 3339 can say */
    assert_string_equal(buf, "9999-12-31T23:59:59Z");

    /* What is formatted parses back. */
    int64_t us = 0;
    gq_time_format_rfc3339_frac(1795791732123456LL, 6, buf);
    assert_int_equal(gq_time_parse_rfc3339_us(buf, &us, NULL), GQ_OK);
    assert_int_equal(us, 1795791732123456LL);
}

#define NOW 1795273565LL /* 2026-11-21T15:06:05Z */

static void rfc3339_parse(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t t;
    } ok[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2026-11-21T15:06:05Z", NOW},
        {"2026-11-21t15:06:05.999999999z", NOW},
        {"2026-11-21T16:06:05+01:00", NOW},
        {"2026-11-21T14:36:05-00:30", NOW},
        {"2024-02-29T23:59:59Z", 1709251199},
        {"1969-12-31T23:00:00Z", -3600},
        {"1969-12-31T23:59:59.5Z", -1}, /* floor, not toward zero */
    };
    static const char *const bad[] = {
        "",
        "tomorrow",
        "2026-11-21 15:06:05Z",
        "2026-11-21T15:06:05",
        "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-11-21T24:00:00Z",
        "2026-11-21T15:06:05.Z",
        "2026-11-21T15:06:05Zjunk",
        "2026-11-21T15:06:05+0100",
    };
    gq_err err;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t t = 42;
        if (gq_time_parse_rfc3339(ok[i].s, &t, &err) != GQ_OK || t != ok[i].t)
            fail_msg("%s: got %lld (%s)", ok[i].s, (long long)t, err.msg);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t t = 42;
        if (gq_time_parse_rfc3339(bad[i], &t, &err) != GQ_EINVAL || t != 42)
            fail_msg("%s: accepted", bad[i]);
    }
    /* Microseconds: the sixth fraction digit kept, later ones truncated. */
    int64_t us = 0;
    assert_int_equal(gq_time_parse_rfc3339_us("2026-11-21T15:06:05.1234567Z", &us, &err), GQ_OK);
    assert_int_equal(us, NOW * 1000000 + 123456);
    assert_int_equal(gq_time_parse_rfc3339_us("1969-12-31T23:59:59.5Z", &us, &err), GQ_OK);
    assert_int_equal(us, -500000);
    char buf[GQ_RFC3339_MAX];
    gq_time_format_rfc3339(NOW, buf);
    assert_string_equal(buf, "2026-11-21T15:06:05Z");
    gq_time_format_rfc3339(-3600, buf);
    assert_string_equal(buf, "1969-12-31T23:00:00Z");
    gq_time_format_rfc3339(INT64_MAX, buf);
    assert_string_equal(buf, "9999-12-31T23:59:59Z");
}

static void json_escape(void **state)
{
    (void)state;
    static const struct {
        unsigned char c;
        const char *want; /* "" when the byte stands as itself */
    } cases[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\b', "\\b"},     {'\f', "\\f"},     {'\n', "\\n"},
                 {'\r', "\\r"}, {'\t', "\\t"},  {0x01, "\\u0001"}, {0x1f, "\\u001f"}, {'/', ""},
                 {0x7f, ""},    {0xc3, ""},     {'a', ""}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[GQ_JSON_ESCAPE_MAX];
        size_t n = gq_json_escape_byte(cases[i].c, out);
        assert_int_equal(n, strlen(cases[i].want));
        assert_memory_equal(out, cases[i].want, n);
    }
    /* The log's escaper also hides DEL; both agree with json-c elsewhere. */
    char buf[64];
    size_t len = 0;
    gq_json_escape_into(buf, sizeof(buf), &len, "a\r\x7f/");
    assert_string_equal(buf, "a\\r\\u007f/");
    gq_buf b;
    gq_buf_init(&b, 64);
    gq_buf_json_string(&b, "a\r\x7f/\"");
    char *text = NULL;
    size_t tl = 0;
    assert_int_equal(gq_buf_finish(&b, &text, &tl), GQ_OK);
    json_object *s = json_object_new_string("a\r\x7f/\"");
    assert_string_equal(text, json_object_to_json_string_ext(
                                  s, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(s);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_members),   cmocka_unit_test(fnv1a),
        cmocka_unit_test(rfc3339_format), cmocka_unit_test(rfc3339_parse),
        cmocka_unit_test(json_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
