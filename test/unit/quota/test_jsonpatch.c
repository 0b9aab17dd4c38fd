/* JSON Patch builder and applier: RFC 6902 appendix A, RFC 6901 escaping,
 * and every error path of the applier. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "quota/jsonpatch.h"
#include "common/jsonutil.h"

static json_object *parse(const char *s)
{
    json_object *v = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(s, strlen(s), 0, &v, &err), GQ_OK);
    return v;
}

typedef struct apply_case {
    const char *name;
    const char *doc;
    const char *patch;
    const char *expect; /* NULL: the patch must fail */
    gq_code code;       /* expected error code when expect is NULL */
    const char *msg;    /* substring of the error message when expect is NULL */
} apply_case;

static const apply_case apply_cases[] = {
    /* RFC 6902 appendix A */
    {"A.1 add object member", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     GQ_OK, NULL},
    {"A.2 add array element", "{\"foo\":[\"bar\",\"baz\"]}",
     "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
     "{\"foo\":[\"bar\",\"qux\",\"baz\"]}", GQ_OK, NULL},
    {"A.3 remove object member", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     "[{\"op\":\"remove\",\"path\":\"/baz\"}]", "{\"foo\":\"bar\"}", GQ_OK, NULL},
    {"A.4 remove array element", "{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
     "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", "{\"foo\":[\"bar\",\"baz\"]}", GQ_OK, NULL},
    {"A.5 replace", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
     "{\"baz\":\"boo\",\"foo\":\"bar\"}", GQ_OK, NULL},
    {"A.6 move value",
     "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
     "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
     "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}", GQ_OK, NULL},
    {"A.7 move array element", "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
     "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
     "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}", GQ_OK, NULL},
    {"A.8 test success", "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},{\"op\":\"test\",\"path\":\"/foo/1\","
     "\"value\":2}]",
     "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}", GQ_OK, NULL},
    {"A.9 test failure", "{\"baz\":\"qux\"}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", NULL, GQ_EINVAL,
     "operation 0: test failed at \"/baz\""},
    {"A.10 add nested member object", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
     "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}", GQ_OK, NULL},
    {"A.11 ignore unrecognized members", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
     "{\"foo\":\"bar\",\"baz\":\"qux\"}", GQ_OK, NULL},
    {"A.12 add to a nonexistent target", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", NULL, GQ_EINVAL,
     "operation 0: path \"/baz/bat\": parent does not exist"},
    /* json-c keeps the last duplicate member, so this is a remove of a
     * missing member: an error either way, as the RFC requires. */
    {"A.13 invalid patch document", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"op\":\"remove\"}]", NULL, GQ_EINVAL,
     "does not exist"},
    {"A.14 ~ escape ordering", "{\"/\":9,\"~1\":10}",
     "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]", "{\"/\":9,\"~1\":10}", GQ_OK, NULL},
    {"A.15 string is not a number", "{\"/\":9,\"~1\":10}",
     "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]", NULL, GQ_EINVAL, "test failed"},
    {"A.16 add an array value", "{\"foo\":[\"bar\"]}",
     "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
     "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}", GQ_OK, NULL},
    /* RFC 6901 escapes */
    {"escaped slash", "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}",
     "[{\"op\":\"replace\",\"path\":\"/limits/nvidia.com~1gpu\",\"value\":\"2\"}]",
     "{\"limits\":{\"nvidia.com/gpu\":\"2\"}}", GQ_OK, NULL},
    {"empty key", "{\"\":1}", "[{\"op\":\"replace\",\"path\":\"/\",\"value\":2}]", "{\"\":2}",
     GQ_OK, NULL},
    {"bad escape", "{}", "[{\"op\":\"add\",\"path\":\"/a~2\",\"value\":1}]", NULL, GQ_EINVAL,
     "\"~\" must be followed by 0 or 1"},
    {"trailing tilde", "{}", "[{\"op\":\"add\",\"path\":\"/a~\",\"value\":1}]", NULL, GQ_EINVAL,
     "must be followed by 0 or 1"},
    {"path without slash", "{}", "[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]", NULL, GQ_EINVAL,
     "must start with \"/\""},
    /* arrays */
    {"add at end index", "[1,2]", "[{\"op\":\"add\",\"path\":\"/2\",\"value\":3}]", "[1,2,3]",
     GQ_OK, NULL},
    {"add at front", "[1,2]", "[{\"op\":\"add\",\"path\":\"/0\",\"value\":0}]", "[0,1,2]", GQ_OK,
     NULL},
    {"add past end", "[1,2]", "[{\"op\":\"add\",\"path\":\"/3\",\"value\":3}]", NULL, GQ_EINVAL,
     "array index out of range (length 2)"},
    {"add leading zero index", "[1,2]", "[{\"op\":\"add\",\"path\":\"/01\",\"value\":3}]", NULL,
     GQ_EINVAL, "out of range"},
    {"add negative index", "[1,2]", "[{\"op\":\"add\",\"path\":\"/-1\",\"value\":3}]", NULL,
     GQ_EINVAL, "out of range"},
    {"add huge index", "[1]",
     "[{\"op\":\"add\",\"path\":\"/99999999999999999999999\",\"value\":3}]", NULL, GQ_EINVAL,
     "out of range"},
    {"remove dash", "[1,2]", "[{\"op\":\"remove\",\"path\":\"/-\"}]", NULL, GQ_EINVAL,
     "does not exist"},
    {"replace past end", "[1,2]", "[{\"op\":\"replace\",\"path\":\"/2\",\"value\":3}]", NULL,
     GQ_EINVAL, "\"/2\" does not exist"},
    {"replace array element", "[1,2]", "[{\"op\":\"replace\",\"path\":\"/1\",\"value\":9}]",
     "[1,9]", GQ_OK, NULL},
    {"walk through array", "{\"a\":[{\"b\":1}]}",
     "[{\"op\":\"add\",\"path\":\"/a/0/c\",\"value\":2}]", "{\"a\":[{\"b\":1,\"c\":2}]}", GQ_OK,
     NULL},
    {"walk past array end", "{\"a\":[]}", "[{\"op\":\"add\",\"path\":\"/a/0/c\",\"value\":2}]",
     NULL, GQ_EINVAL, "parent does not exist"},
    {"walk through scalar", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":2}]", NULL,
     GQ_EINVAL, "parent does not exist"},
    {"walk through null", "{\"a\":null}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":2}]", NULL,
     GQ_EINVAL, "parent does not exist"},
    /* members */
    {"add replaces existing member", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":2}]",
     "{\"a\":2}", GQ_OK, NULL},
    {"add null", "{}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":null}]", "{\"a\":null}", GQ_OK,
     NULL},
    {"remove missing member", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/b\"}]", NULL, GQ_EINVAL,
     "operation 0: path \"/b\" does not exist"},
    {"replace missing member", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":1}]",
     NULL, GQ_EINVAL, "\"/b\" does not exist"},
    {"test missing member", "{}", "[{\"op\":\"test\",\"path\":\"/b\",\"value\":null}]", NULL,
     GQ_EINVAL, "does not exist"},
    {"remove null member", "{\"a\":null}", "[{\"op\":\"remove\",\"path\":\"/a\"}]", "{}", GQ_OK,
     NULL},
    /* root */
    {"add root", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"\",\"value\":[1]}]", "[1]", GQ_OK, NULL},
    {"replace root", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]",
     "{\"b\":2}", GQ_OK, NULL},
    {"remove root", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]", NULL, GQ_EINVAL,
     "cannot remove the whole document"},
    {"test root", "{\"a\":[1,{\"b\":true}]}",
     "[{\"op\":\"test\",\"path\":\"\",\"value\":{\"a\":[1,{\"b\":true}]}}]",
     "{\"a\":[1,{\"b\":true}]}", GQ_OK, NULL},
    /* copy and move */
    {"copy", "{\"a\":{\"x\":1},\"b\":{}}",
     "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b/c\"},"
     "{\"op\":\"add\",\"path\":\"/a/y\",\"value\":2}]",
     "{\"a\":{\"x\":1,\"y\":2},\"b\":{\"c\":{\"x\":1}}}", GQ_OK, NULL},
    {"copy missing from", "{}", "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"}]", NULL,
     GQ_EINVAL, "\"/a\" does not exist"},
    {"move into own child", "{\"a\":{\"b\":{}}}",
     "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b/c\"}]", NULL, GQ_EINVAL,
     "into its own child"},
    {"move to itself", "{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]",
     "{\"a\":1}", GQ_OK, NULL},
    {"move missing parent restores nothing", "{\"a\":1}",
     "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/x/y\"}]", NULL, GQ_EINVAL,
     "parent does not exist"},
    {"move without from", "{\"a\":1}", "[{\"op\":\"move\",\"path\":\"/b\"}]", NULL, GQ_EINVAL,
     "\"move\" needs a \"from\""},
    /* test equality */
    {"test int equals double", "{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1.0}]",
     "{\"a\":1}", GQ_OK, NULL},
    {"test int differs from double", "{\"a\":1}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1.5}]", NULL, GQ_EINVAL, "test failed"},
    {"test big unsigned ints differ", "{\"a\":9223372036854775807}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":9223372036854775808}]", NULL, GQ_EINVAL,
     "test failed"},
    {"test object member order", "{\"a\":{\"x\":1,\"y\":2}}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"y\":2,\"x\":1}}]", "{\"a\":{\"x\":1,\"y\":2}}",
     GQ_OK, NULL},
    {"test object extra member", "{\"a\":{\"x\":1}}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"x\":1,\"y\":2}}]", NULL, GQ_EINVAL,
     "test failed"},
    {"test array order", "{\"a\":[1,2]}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":[2,1]}]",
     NULL, GQ_EINVAL, "test failed"},
    {"test null", "{\"a\":null}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":null}]",
     "{\"a\":null}", GQ_OK, NULL},
    {"test bool vs int", "{\"a\":true}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1}]", NULL,
     GQ_EINVAL, "test failed"},
    /* malformed operations; the failed patch is atomic */
    {"not an array", "{}", "{\"op\":\"add\"}", NULL, GQ_EINVAL, "must be a JSON array"},
    {"operation not an object", "{}", "[1]", NULL, GQ_EINVAL, "operation 0 is not an object"},
    {"missing op", "{}", "[{\"path\":\"/a\"}]", NULL, GQ_EINVAL, "missing string member \"op\""},
    {"op not a string", "{}", "[{\"op\":1,\"path\":\"/a\"}]", NULL, GQ_EINVAL,
     "missing string member \"op\""},
    {"unknown op", "{}", "[{\"op\":\"merge\",\"path\":\"/a\"}]", NULL, GQ_EINVAL,
     "unknown op \"merge\""},
    {"missing path", "{}", "[{\"op\":\"remove\"}]", NULL, GQ_EINVAL, "missing member \"path\""},
    {"path not a string", "{}", "[{\"op\":\"remove\",\"path\":5}]", NULL, GQ_EINVAL,
     "\"path\" must be a string"},
    {"add without value", "{}", "[{\"op\":\"add\",\"path\":\"/a\"}]", NULL, GQ_EINVAL,
     "\"add\" needs a \"value\""},
    {"second op fails", "{\"a\":1}",
     "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2},{\"op\":\"remove\",\"path\":\"/c\"}]", NULL,
     GQ_EINVAL, "operation 1: path \"/c\" does not exist"},
    {"nul in path", "{}", "[{\"op\":\"add\",\"path\":\"/a\\u0000b\",\"value\":1}]", NULL, GQ_EINVAL,
     "contains a NUL character"},
};

static void apply_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(apply_cases) / sizeof(apply_cases[0]); i++) {
        const apply_case *c = &apply_cases[i];
        json_object *doc = parse(c->doc);
        json_object *before = NULL;
        assert_int_equal(json_object_deep_copy(doc, &before, NULL), 0);
        json_object *out = (json_object *)0x1;
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = gq_patch_apply_text(doc, c->patch, strlen(c->patch), &out, &err);
        if (c->expect) {
            if (rc != GQ_OK)
                fail_msg("%s: %s", c->name, err.msg);
            json_object *want = parse(c->expect);
            if (!gq_json_equal(out, want))
                fail_msg("%s: got %s", c->name, gq_json_compact(out));
            json_object_put(want);
            json_object_put(out);
        } else {
            if (rc != c->code)
                fail_msg("%s: code %d, want %d", c->name, rc, c->code);
            if (!strstr(err.msg, c->msg))
                fail_msg("%s: message \"%s\" lacks \"%s\"", c->name, err.msg, c->msg);
            assert_ptr_equal(out, (json_object *)0x1); /* untouched on error */
        }
        /* The input document is never modified. */
        assert_true(gq_json_equal(doc, before));
        json_object_put(before);
        json_object_put(doc);
    }
}

static void apply_syntax_error(void **state)
{
    (void)state;
    json_object *doc = parse("{}"), *out = NULL;
    gq_err err;
    assert_int_equal(gq_patch_apply_text(doc, "[{", 2, &out, &err), GQ_EINVAL);
    assert_int_equal(gq_patch_apply_text(doc, "[] x", 4, &out, &err), GQ_EINVAL);
    assert_non_null(strstr(err.msg, "unexpected character"));
    assert_null(out);
    json_object_put(doc);
}

static void apply_limits(void **state)
{
    (void)state;
    json_object *doc = parse("{}"), *out = NULL;
    gq_err err;
    /* Too many operations. */
    json_object *patch = json_object_new_array();
    for (int i = 0; i <= GQ_PATCH_MAX_OPS; i++) {
        json_object *op = parse("{\"op\":\"test\",\"path\":\"\",\"value\":{}}");
        json_object_array_add(patch, op);
    }
    assert_int_equal(gq_patch_apply(doc, patch, &out, &err), GQ_ELIMIT);
    json_object_array_del_idx(patch, 0, 1);
    assert_int_equal(gq_patch_apply(doc, patch, &out, &err), GQ_OK);
    json_object_put(out);
    json_object_put(patch);
    /* A pointer longer than the cap, and one with too many tokens. */
    char text[GQ_JPTR_MAX + 64];
    char ptr[GQ_JPTR_MAX + 8];
    memset(ptr, 'a', sizeof(ptr) - 1);
    ptr[0] = '/';
    ptr[sizeof(ptr) - 1] = '\0';
    snprintf(text, sizeof(text), "[{\"op\":\"remove\",\"path\":\"%s\"}]", ptr);
    assert_int_equal(gq_patch_apply_text(doc, text, strlen(text), &out, &err), GQ_ELIMIT);
    size_t n = 0;
    for (int i = 0; i <= GQ_JPTR_MAX_SEGMENTS; i++) {
        ptr[n++] = '/';
        ptr[n++] = 'a';
    }
    ptr[n] = '\0';
    snprintf(text, sizeof(text), "[{\"op\":\"remove\",\"path\":\"%s\"}]", ptr);
    assert_int_equal(gq_patch_apply_text(doc, text, strlen(text), &out, &err), GQ_ELIMIT);
    assert_non_null(strstr(err.msg, "tokens"));
    json_object_put(doc);
}

static void jptr_escaping(void **state)
{
    (void)state;
    gq_jptr p;
    gq_jptr_init(&p);
    assert_string_equal(p.buf, "");
    gq_jptr_push(&p, "spec");
    gq_jptr_push(&p, "containers");
    gq_jptr_push_index(&p, 12);
    size_t mark = p.len;
    gq_jptr_push(&p, "nvidia.com/gpu");
    assert_string_equal(p.buf, "/spec/containers/12/nvidia.com~1gpu");
    gq_jptr_truncate(&p, mark);
    gq_jptr_push(&p, "a~/b");
    assert_string_equal(p.buf, "/spec/containers/12/a~0~1b");
    gq_jptr_push(&p, "");
    assert_string_equal(p.buf, "/spec/containers/12/a~0~1b/");
    assert_false(p.overflow);
}

static void builder_text_and_roundtrip(void **state)
{
    (void)state;
    gq_patch *p = NULL;
    assert_int_equal(gq_patch_new(&p), GQ_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(gq_patch_to_text(p, &text, &len), GQ_OK);
    assert_string_equal(text, "[]");
    free(text);

    gq_jptr ptr;
    gq_jptr_init(&ptr);
    gq_jptr_push(&ptr, "limits");
    gq_jptr_push(&ptr, "nvidia.com/gpu");
    assert_int_equal(gq_patch_test(p, &ptr, json_object_new_string("500m")), GQ_OK);
    assert_int_equal(gq_patch_remove(p, &ptr), GQ_OK);
    gq_jptr_truncate(&ptr, strlen("/limits"));
    gq_jptr_push(&ptr, "aliyun.com/gpu-mem");
    assert_int_equal(gq_patch_add(p, &ptr, json_object_new_string("20")), GQ_OK);
    assert_int_equal(gq_patch_replace(p, &ptr, json_object_new_string("21")), GQ_OK);
    assert_int_equal(gq_patch_len(p), 4);
    assert_int_equal(gq_patch_to_text(p, &text, &len), GQ_OK);
    assert_string_equal(
        text, "[{\"op\":\"test\",\"path\":\"/limits/nvidia.com~1gpu\",\"value\":\"500m\"},"
              "{\"op\":\"remove\",\"path\":\"/limits/nvidia.com~1gpu\"},"
              "{\"op\":\"add\",\"path\":\"/limits/aliyun.com~1gpu-mem\",\"value\":\"20\"},"
              "{\"op\":\"replace\",\"path\":\"/limits/aliyun.com~1gpu-mem\",\"value\":\"21\"}]");
    assert_int_equal(len, strlen(text));

    json_object *doc = parse("{\"limits\":{\"cpu\":\"1\",\"nvidia.com/gpu\":\"500m\"}}");
    json_object *out = NULL;
    gq_err err;
    assert_int_equal(gq_patch_apply_text(doc, text, len, &out, &err), GQ_OK);
    json_object *want = parse("{\"limits\":{\"cpu\":\"1\",\"aliyun.com/gpu-mem\":\"21\"}}");
    assert_true(gq_json_equal(out, want));
    /* The same patch as a json-c array. */
    json_object *out2 = NULL;
    assert_int_equal(gq_patch_apply(doc, gq_patch_json(p), &out2, &err), GQ_OK);
    assert_true(gq_json_equal(out2, want));
    json_object_put(out2);
    json_object_put(want);
    json_object_put(out);
    json_object_put(doc);
    free(text);
    gq_patch_free(p);
    gq_patch_free(NULL);
}

static void builder_limits(void **state)
{
    (void)state;
    gq_patch *p = NULL;
    assert_int_equal(gq_patch_new(&p), GQ_OK);
    gq_jptr ptr;
    gq_jptr_init(&ptr);
    for (int i = 0; i < GQ_JPTR_MAX; i++)
        gq_jptr_push(&ptr, "~");
    assert_true(ptr.overflow);
    assert_true(ptr.len < GQ_JPTR_MAX);
    assert_int_equal(gq_patch_add(p, &ptr, json_object_new_int(1)), GQ_ELIMIT);
    assert_int_equal(gq_patch_len(p), 0);
    gq_jptr_truncate(&ptr, 0);
    assert_false(ptr.overflow);
    gq_jptr_push(&ptr, "a");
    for (int i = 0; i < GQ_PATCH_MAX_OPS; i++)
        assert_int_equal(gq_patch_remove(p, &ptr), GQ_OK);
    assert_int_equal(gq_patch_replace(p, &ptr, json_object_new_int(1)), GQ_ELIMIT);
    assert_int_equal(gq_patch_len(p), GQ_PATCH_MAX_OPS);
    gq_patch_free(p);
}

static void parse_helper(void **state)
{
    (void)state;
    json_object *v = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse("42", 2, 0, &v, &err), GQ_OK);
    assert_int_equal(json_object_get_int(v), 42);
    json_object_put(v);
    v = (json_object *)0x1;
    assert_int_equal(gq_json_parse("null", 4, 0, &v, &err), GQ_OK);
    assert_null(v);
    assert_int_equal(gq_json_parse(" {\"a\":[]} \n", 11, 0, &v, &err), GQ_OK);
    json_object_put(v);
    v = (json_object *)0x1;
    assert_int_equal(gq_json_parse("", 0, 0, &v, &err), GQ_EINVAL);
    assert_int_equal(gq_json_parse("{\"a\":1,}", 8, 0, &v, &err), GQ_EINVAL);
    /* bytes, not validated: sanitised where they are shown */
    assert_int_equal(gq_json_parse("\"\xff\"", 3, 0, &v, &err), GQ_OK);
    assert_int_equal(json_object_get_string_len(v), 1);
    json_object_put(v);
    v = (json_object *)0x1;
    assert_int_equal(gq_json_parse("[[[1]]]", 7, 3, &v, &err), GQ_OK);
    json_object_put(v);
    v = (json_object *)0x1;
    assert_int_equal(gq_json_parse("[[[[1]]]]", 9, 3, &v, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "JSON nests deeper than 3 levels");
    assert_int_equal(gq_json_parse("{} {}", 5, 0, &v, &err), GQ_EINVAL);
    assert_ptr_equal(v, (json_object *)0x1);
    assert_string_equal(gq_json_compact(NULL), "null");
    /* json-c reads these; JSON has no such numbers. */
    static const char *const nonfinite[] = {"NaN", "[Infinity]", "{\"a\":{\"b\":[-Infinity]}}",
                                            "[1e999]"};
    for (size_t i = 0; i < sizeof(nonfinite) / sizeof(nonfinite[0]); i++) {
        assert_int_equal(gq_json_parse(nonfinite[i], strlen(nonfinite[i]), 0, &v, &err), GQ_EINVAL);
        assert_string_equal(err.msg, "JSON numbers must be finite (no NaN or Infinity)");
    }
    assert_ptr_equal(v, (json_object *)0x1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(apply_table),
        cmocka_unit_test(apply_syntax_error),
        cmocka_unit_test(apply_limits),
        cmocka_unit_test(jptr_escaping),
        cmocka_unit_test(builder_text_and_roundtrip),
        cmocka_unit_test(builder_limits),
        cmocka_unit_test(parse_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
