/* The shared JSON parser: strict RFC 8259, finite numbers, depth caps,
 * exact error messages, json-c trees equal to json-c's own parse, and
 * pruning of subtrees by path patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quota/jsonpatch.h"
#include "common/jsonutil.h"

static json_object *jsonc(const char *text)
{
    json_tokener *tok = json_tokener_new();
    /* The NUL ends a bare top-level number for json-c. */
    json_object *v = json_tokener_parse_ex(tok, text, (int)strlen(text) + 1);
    assert_int_equal(json_tokener_get_error(tok), json_tokener_success);
    json_tokener_free(tok);
    return v;
}

static void valid_documents_equal_jsonc(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "{}",
        "[]",
        " {\"a\" : [1, -2, 3.5, -0.25e2, 1E3, true, false, null, \"x\"] }\n",
        "{\"nested\":{\"deeper\":{\"list\":[[],[{}],[[1]]]}}}",
        "{\"dup\":1,\"dup\":2}",
        "\"top-level string\"",
        "42",
        "-0",
        "{\"esc\":\"quote\\\" backslash\\\\ slash\\/ \\b\\f\\n\\r\\t tab\"}",
        "{\"uni\":\"\\u00e9\\u4e2d\\ud83d\\ude00\"}",
        "{\"\\u006bey\":\"escaped key\"}",
        "{\"big\":9223372036854775807,\"small\":-9223372036854775808}",
        "{\"raw utf-8\":\"caf\xc3\xa9\"}",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_object *ours = (json_object *)0x1, *theirs = jsonc(docs[i]);
        gq_err err;
        if (gq_json_parse(docs[i], strlen(docs[i]), 0, &ours, &err))
            fail_msg("%s: %s", docs[i], err.msg);
        if (!gq_json_equal(ours, theirs))
            fail_msg("%s: %s != %s", docs[i], gq_json_compact(ours), gq_json_compact(theirs));
        json_object_put(ours);
        json_object_put(theirs);
    }
}

static void values_and_types(void **state)
{
    (void)state;
    json_object *v = NULL;
    gq_err err;
    const char *t = "[9223372036854775808,18446744073709551616,0.1,1e2,-9223372036854775809]";
    assert_int_equal(gq_json_parse(t, strlen(t), 0, &v, &err), GQ_OK);
    /* Above INT64_MAX: unsigned; beyond 64 bits or negative beyond: double. */
    assert_int_equal(json_object_get_type(json_object_array_get_idx(v, 0)), json_type_int);
    assert_true(json_object_get_uint64(json_object_array_get_idx(v, 0)) == 9223372036854775808ULL);
    assert_int_equal(json_object_get_type(json_object_array_get_idx(v, 1)), json_type_double);
    assert_int_equal(json_object_get_type(json_object_array_get_idx(v, 4)), json_type_double);
    /* Numbers print as written. */
    assert_string_equal(gq_json_compact(v), "[9223372036854775808,18446744073709551616,0.1,1e2,"
                                            "-9223372036854775809]");
    json_object_put(v);
    /* A lone surrogate becomes U+FFFD; a string may hold NUL. */
    t = "[\"a\\ud800b\",\"\\udc00\",\"x\\u0000y\"]";
    assert_int_equal(gq_json_parse(t, strlen(t), 0, &v, &err), GQ_OK);
    assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "a\xef\xbf\xbd"
                                                                                 "b");
    assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 1)), "\xef\xbf\xbd");
    assert_int_equal(json_object_get_string_len(json_object_array_get_idx(v, 2)), 3);
    json_object_put(v);
    v = (json_object *)0x1;
    assert_int_equal(gq_json_parse("null", 4, 0, &v, &err), GQ_OK);
    assert_null(v);
}

static void errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        gq_code rc;
        const char *msg;
    } cases[] = {
        {"", GQ_EINVAL, "empty JSON text"},
        {"hello", GQ_EINVAL, "JSON syntax error at byte 0: unexpected character"},
        {"{} {}", GQ_EINVAL, "JSON syntax error at byte 3: unexpected character"},
        {"{\"a\":", GQ_EINVAL, "JSON text ends early (after 5 bytes)"},
        {"{\"a\"", GQ_EINVAL, "JSON text ends early (after 4 bytes)"},
        {"[1,", GQ_EINVAL, "JSON text ends early (after 3 bytes)"},
        {"\"abc", GQ_EINVAL, "JSON text ends early (after 4 bytes)"},
        {"tru", GQ_EINVAL, "JSON text ends early (after 3 bytes)"},
        {"[truth]", GQ_EINVAL, "JSON syntax error at byte 4: boolean expected"},
        {"not json", GQ_EINVAL, "JSON syntax error at byte 1: null expected"},
        {"[fals]", GQ_EINVAL, "JSON syntax error at byte 5: boolean expected"},
        {"{\"a\" 1}", GQ_EINVAL, "JSON syntax error at byte 5: expected ':'"},
        {"{\"a\":1 \"b\":2}", GQ_EINVAL, "JSON syntax error at byte 7: expected ',' or '}'"},
        {"[1 2]", GQ_EINVAL, "JSON syntax error at byte 3: expected ',' or ']'"},
        {"{1:2}", GQ_EINVAL, "JSON syntax error at byte 1: expected a member name"},
        {"{\"a\":1,}", GQ_EINVAL, "JSON syntax error at byte 7: expected a member name"},
        {"[1,]", GQ_EINVAL, "JSON syntax error at byte 3: unexpected character"},
        {"[01]", GQ_EINVAL, "JSON syntax error at byte 2: expected ',' or ']'"},
        {"[1.]", GQ_EINVAL, "JSON syntax error at byte 3: invalid number"},
        {"[1e]", GQ_EINVAL, "JSON syntax error at byte 3: invalid number"},
        {"[-]", GQ_EINVAL, "JSON syntax error at byte 2: invalid number"},
        {"[+1]", GQ_EINVAL, "JSON syntax error at byte 1: unexpected character"},
        {"[\"a\tb\"]", GQ_EINVAL, "JSON syntax error at byte 3: control character in string"},
        {"[\"\\x\"]", GQ_EINVAL, "JSON syntax error at byte 2: invalid escape"},
        {"[\"\\u12G4\"]", GQ_EINVAL, "JSON syntax error at byte 2: invalid \\u escape"},
        {"[\"\\u12\"]", GQ_EINVAL, "JSON syntax error at byte 2: invalid \\u escape"},
        {"NaN", GQ_EINVAL, "JSON numbers must be finite (no NaN or Infinity)"},
        {"[-Infinity]", GQ_EINVAL, "JSON numbers must be finite (no NaN or Infinity)"},
        {"[1e999]", GQ_EINVAL, "JSON numbers must be finite (no NaN or Infinity)"},
        {"[[[[1]]]]", GQ_ELIMIT, "JSON nests deeper than 3 levels"},
        {"{\"a\":{\"b\":{\"c\":{}}}}", GQ_ELIMIT, "JSON nests deeper than 3 levels"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *v = (json_object *)0x1;
        gq_err err;
        gq_code rc = gq_json_parse(cases[i].text, strlen(cases[i].text), 3, &v, &err);
        if (rc != cases[i].rc || strcmp(err.msg, cases[i].msg))
            fail_msg("%s: %d %s", cases[i].text, rc, err.msg);
        assert_ptr_equal(v, (json_object *)0x1);
    }
}

static void pruning(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *skip[4];
        const char *want;
    } cases[] = {
        {"{\"a\":{\"b\":1,\"c\":2},\"d\":3}", {"a/b"}, "{\"a\":{\"c\":2},\"d\":3}"},
        {"{\"a\":{\"b\":1,\"c\":2},\"d\":3}", {"a"}, "{\"d\":3}"},
        {"{\"a\":{\"b\":1,\"c\":2},\"d\":3}", {"*/c"}, "{\"a\":{\"b\":1},\"d\":3}"},
        /* containers keep their positions; one member of each is left out */
        {"{\"cs\":[{\"n\":\"x\",\"env\":[1,2]},{\"n\":\"y\",\"env\":{\"deep\":[[]]}}]}",
         {"cs/*/env"},
         "{\"cs\":[{\"n\":\"x\"},{\"n\":\"y\"}]}"},
        {"{\"cs\":[10,11,12]}", {"cs/1"}, "{\"cs\":[10,12]}"},
        /* a pattern longer than the document, or not matching, changes nothing */
        {"{\"a\":[1]}", {"a/0/b/c", "x"}, "{\"a\":[1]}"},
        /* keys are compared decoded */
        {"{\"k\\u0065y\":1,\"other\":2}", {"key"}, "{\"other\":2}"},
        {"{\"a\":1,\"b\":2,\"c\":3}", {"a", "c"}, "{\"b\":2}"},
        {"[{\"a\":1}]", {"*/a"}, "[{}]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = 0;
        while (n < 4 && cases[i].skip[n])
            n++;
        json_object *v = NULL;
        gq_err err;
        if (gq_json_parse_pruned(cases[i].text, strlen(cases[i].text), 0, cases[i].skip, n, &v,
                                 &err))
            fail_msg("%s: %s", cases[i].text, err.msg);
        assert_string_equal(gq_json_compact(v), cases[i].want);
        json_object_put(v);
    }
    /* Skipped text is still checked. */
    static const char *const skip[] = {"a"};
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"a\":[1,}", "JSON syntax error at byte 8: unexpected character"},
        {"{\"a\":[1e999]}", "JSON numbers must be finite (no NaN or Infinity)"},
        {"{\"a\":\"\x01\"}", "JSON syntax error at byte 6: control character in string"},
        {"{\"b\":[[[[[1]]]]]}", "JSON nests deeper than 4 levels"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_object *v = (json_object *)0x1;
        gq_err err;
        assert_int_not_equal(
            gq_json_parse_pruned(bad[i].text, strlen(bad[i].text), 4, skip, 1, &v, &err), GQ_OK);
        assert_string_equal(err.msg, bad[i].msg);
        assert_ptr_equal(v, (json_object *)0x1);
    }
    /* A pruned subtree is checked without recursion: however deep it nests
     * (a tenant can nest a pod's managedFields hundreds deep), it neither
     * fails the parse nor grows the stack. */
    {
        size_t depth = 100000;
        char *deep = malloc(6 * depth + 32);
        assert_non_null(deep);
        size_t n = (size_t)sprintf(deep, "{\"a\":");
        for (size_t i = 0; i < depth; i++)
            n += (size_t)sprintf(deep + n, "%s", i % 2 ? "[" : "{\"k\":");
        deep[n++] = '1';
        for (size_t i = depth; i-- > 0;)
            deep[n++] = i % 2 ? ']' : '}';
        n += (size_t)sprintf(deep + n, ",\"b\":2}");
        json_object *v = NULL;
        gq_err err;
        assert_int_equal(gq_json_parse_pruned(deep, n, 4, skip, 1, &v, &err), GQ_OK);
        assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), "{\"b\":2}");
        json_object_put(v);
        deep[6] = ','; /* {"a":{, ... broken inside the pruned part: still a syntax error */
        assert_int_not_equal(gq_json_parse_pruned(deep, n, 4, skip, 1, &v, &err), GQ_OK);
        free(deep);
    }
    /* Caps on the patterns. */
    const char *many[GQ_JSON_MAX_SKIPS + 1];
    for (size_t i = 0; i <= GQ_JSON_MAX_SKIPS; i++)
        many[i] = "a";
    json_object *v = (json_object *)0x1;
    gq_err err;
    assert_int_equal(gq_json_parse_pruned("{}", 2, 0, many, GQ_JSON_MAX_SKIPS + 1, &v, &err),
                     GQ_EINVAL);
    const char *longp[] = {"a/b/c/d/e/f/g/h/i"};
    assert_int_equal(gq_json_parse_pruned("{}", 2, 0, longp, 1, &v, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "skip pattern a/b/c/d/e/f/g/h/i: more than 8 segments");
    assert_ptr_equal(v, (json_object *)0x1);
}

/* "[{},{},...]" with n empty objects: 2 bytes of text, 800 of tree each. */
static char *empties(size_t n)
{
    char *t = malloc(3 * n + 2);
    assert_non_null(t);
    size_t k = 0;
    t[k++] = '[';
    for (size_t i = 0; i < n; i++) {
        if (i)
            t[k++] = ',';
        t[k++] = '{';
        t[k++] = '}';
    }
    t[k++] = ']';
    t[k] = '\0';
    return t;
}

/* The memory of a tree is counted as it is built: one tree's cap, and a
 * budget shared by trees alive together, taken and given back exactly. */
static void tree_memory(void **state)
{
    (void)state;
    json_object *v = NULL;
    gq_err err;
    size_t charged = 0;
    char *t = empties(1000); /* 3 kB of text, about 800 kB of json-c objects */
    gq_json_opts o = {.max_tree = 400 * 1024};
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &v, &charged, &err), GQ_ELIMIT);
    assert_non_null(strstr(err.msg, "the JSON decodes to more than 409600 bytes of objects"));
    assert_null(v);
    o.max_tree = 0;
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &v, &charged, &err), GQ_OK);
    assert_int_equal(charged, 0); /* no budget, nothing taken */
    json_object_put(v);

    gq_json_budget b = {.cap = 1200 * 1024};
    o.budget = &b;
    json_object *first = NULL, *second = NULL;
    size_t c1 = 0, c2 = 0;
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &first, &c1, &err), GQ_OK);
    assert_true(c1 >= 800 * 1000 && c1 < 900 * 1024);
    assert_int_equal(atomic_load(&b.used), c1);
    /* A second such tree does not fit beside the first: refused, and what
     * it had taken is given back. */
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &second, &c2, &err), GQ_EBUSY);
    assert_non_null(
        strstr(err.msg, "decoded requests in flight would hold more than 1228800 bytes"));
    assert_null(second);
    assert_int_equal(c2, 0);
    assert_int_equal(atomic_load(&b.used), c1);
    /* Small trees still fit, and each takes at least one step of it. */
    const char *small = "{\"a\":[1,\"x\",true]}";
    assert_int_equal(gq_json_parse_with(small, strlen(small), &o, &second, &c2, &err), GQ_OK);
    assert_true(c2 > 0);
    assert_int_equal(atomic_load(&b.used), c1 + c2);
    json_object_put(second);
    gq_json_budget_return(&b, c2);
    json_object_put(first);
    gq_json_budget_return(&b, c1);
    assert_int_equal(atomic_load(&b.used), 0);
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &first, &c1, &err), GQ_OK);
    json_object_put(first);
    gq_json_budget_return(&b, c1);
    /* Pruned subtrees cost nothing: the same text under a skipped member. */
    const char *skip[] = {"a"};
    char *w = malloc(strlen(t) + 16);
    assert_non_null(w);
    sprintf(w, "{\"a\":%s,\"b\":1}", t);
    o = (gq_json_opts){.skip = skip, .n_skip = 1, .max_tree = 4096};
    assert_int_equal(gq_json_parse_with(w, strlen(w), &o, &v, &charged, &err), GQ_OK);
    json_object_put(v);
    free(w);
    free(t);
}

/* What a streamed parse handed over: each element's compact text, and the
 * top-level members seen with it. */
typedef struct seen {
    char text[8][96];
    int n, stop_at;
    bool had_meta;
} seen;

static gq_code take_elem(void *ud, json_object *root, json_object *elem, gq_err *err)
{
    seen *s = ud;
    if (s->n == s->stop_at)
        return gq_err_set(err, GQ_ECONFLICT, "stopped at %d", s->n);
    json_object *m;
    s->had_meta = json_object_object_get_ex(root, "metadata", &m);
    snprintf(s->text[s->n++ % 8], sizeof s->text[0], "%s", gq_json_compact(elem));
    return GQ_OK;
}

/* The elements of the top-level array member each_member go to each_fn one
 * by one, pruned as the patterns say, with the members before them; they
 * are left out of the tree; nothing else streams. */
static void streaming(void **state)
{
    (void)state;
    const char *skip[] = {"items/*/m/f"};
    const char *t =
        "{\"kind\":\"L\",\"metadata\":{\"continue\":\"c\"},\"items\":[{\"a\":1,\"m\":"
        "{\"f\":[[[1]]],\"g\":2}},[\"x\",{\"items\":[3]}],null,7],\"tail\":{\"items\":[4]}}";
    seen s = {.stop_at = -1};
    gq_json_opts o = {
        .skip = skip, .n_skip = 1, .each_member = "items", .each_fn = take_elem, .each_ud = &s};
    json_object *v = NULL;
    size_t charged;
    gq_err err;
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &v, &charged, &err), GQ_OK);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.text[0], "{\"a\":1,\"m\":{\"g\":2}}");
    assert_string_equal(s.text[1], "[\"x\",{\"items\":[3]}]");
    assert_string_equal(s.text[2], "null");
    assert_string_equal(s.text[3], "7");
    assert_true(s.had_meta);
    assert_string_equal(gq_json_compact(v),
                        "{\"kind\":\"L\",\"metadata\":{\"continue\":\"c\"},\"items\":[],\"tail\":{"
                        "\"items\":[4]}}");
    json_object_put(v);

    /* A member of that name that is no array, or nested deeper, is kept. */
    const char *u = "{\"items\":{\"items\":[1]},\"x\":[{\"items\":[2]}]}";
    s = (seen){.stop_at = -1};
    assert_int_equal(gq_json_parse_with(u, strlen(u), &o, &v, &charged, &err), GQ_OK);
    assert_int_equal(s.n, 0);
    assert_string_equal(gq_json_compact(v), u);
    json_object_put(v);
    const char *nul = "{\"items\":null}";
    assert_int_equal(gq_json_parse_with(nul, strlen(nul), &o, &v, &charged, &err), GQ_OK);
    assert_int_equal(s.n, 0);
    json_object_put(v);

    /* The callback's error stops the parse, with its code and text. */
    s = (seen){.stop_at = 1};
    v = NULL;
    assert_int_equal(gq_json_parse_with(t, strlen(t), &o, &v, &charged, &err), GQ_ECONFLICT);
    assert_string_equal(err.msg, "stopped at 1");
    assert_null(v);
    /* Bad text after some elements: they stay handed over, the parse fails. */
    const char *bad = "{\"items\":[1,2,}";
    s = (seen){.stop_at = -1};
    assert_int_equal(gq_json_parse_with(bad, strlen(bad), &o, &v, &charged, &err), GQ_EINVAL);
    assert_int_equal(s.n, 2);
    assert_false(s.had_meta);
    assert_null(v);
    /* A top-level array never streams. */
    const char *arr = "[{\"items\":[1]}]";
    assert_int_equal(gq_json_parse_with(arr, strlen(arr), &o, &v, &charged, &err), GQ_OK);
    assert_int_equal(s.n, 2);
    assert_string_equal(gq_json_compact(v), arr);
    json_object_put(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_documents_equal_jsonc),
        cmocka_unit_test(values_and_types),
        cmocka_unit_test(errors),
        cmocka_unit_test(pruning),
        cmocka_unit_test(tree_memory),
        cmocka_unit_test(streaming),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
