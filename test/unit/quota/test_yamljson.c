/* YAML -> json-c: every scalar rule, the JSON fast path, and every error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/yamljson.h"

typedef struct y_case {
    const char *in;
    gq_code rc;
    const char *want; /* documents as compact JSON, one per line; or the exact error */
} y_case;

static const y_case cases[] = {
    /* YAML 1.2 core schema for plain scalars; quoted scalars stay strings */
    {"a: 1\nb: true\nc: ~\nd: 1.5\ne: \"1\"\nf: '2'\ng: hello\n", GQ_OK,
     "{\"a\":1,\"b\":true,\"c\":null,\"d\":1.5,\"e\":\"1\",\"f\":\"2\",\"g\":\"hello\"}"},
    {"- 007\n- +5\n- -3\n- 0x1F\n- 0o17\n", GQ_OK, "[7,5,-3,31,15]"},
    {"- 1e3\n- .5\n- 1.\n- -2.5E-3\n- 0.50\n", GQ_OK, "[1e3,0.5,1.0,-2.5E-3,0.50]"},
    {"- null\n- Null\n- NULL\n- ~\n-\n", GQ_OK, "[null,null,null,null,null]"},
    {"- True\n- FALSE\n- yes\n- off\n- 0x\n- 1e\n- 1_000\n", GQ_OK,
     "[true,false,\"yes\",\"off\",\"0x\",\"1e\",\"1_000\"]"},
    {"big: 99999999999999999999\n", GQ_OK, "{\"big\":99999999999999999999}"},
    {"1: a\ntrue: b\n~: c\n", GQ_OK, "{\"1\":\"a\",\"true\":\"b\",\"~\":\"c\"}"},
    {"a: !!str 123\nb: ! 12\nc: !!int 12\n", GQ_OK, "{\"a\":\"123\",\"b\":\"12\",\"c\":12}"},
    {"a: \"x\\ty\"\nb: |\n  line\n", GQ_OK, "{\"a\":\"x\\ty\",\"b\":\"line\\n\"}"},
    {"nvidia.com/gpu: 1\ngpuquota.io/gpu-memory: 10Gi\n", GQ_OK,
     "{\"nvidia.com/gpu\":1,\"gpuquota.io/gpu-memory\":\"10Gi\"}"},
    {"a: {b: [1, {c: d}]}\n", GQ_OK, "{\"a\":{\"b\":[1,{\"c\":\"d\"}]}}"},
    /* documents: several, empty ones skipped */
    {"a: 1\n---\nb: 2\n", GQ_OK, "{\"a\":1}\n{\"b\":2}"},
    {"---\n---\n# only a comment\n---\na: 1\n...\n", GQ_OK, "{\"a\":1}"},
    {"", GQ_OK, ""},
    {"--- 5\n--- text\n", GQ_OK, "5\n\"text\""},
    /* JSON keeps numbers as written */
    {"  {\"a\": 1.50, \"b\": [1, 2e2], \"c\": \"x\"}\n", GQ_OK,
     "{\"a\":1.50,\"b\":[1,2e2],\"c\":\"x\"}"},
    /* json-c would take NaN; YAML reads it as a plain string */
    {"{\"a\": NaN, \"b\": [Infinity]}", GQ_OK, "{\"a\":\"NaN\",\"b\":[\"Infinity\"]}"},
    {"{\"a\": 1}\n{\"b\": 2}", GQ_EINVAL, "t.yaml:2: did not find expected <document start>"},
    /* rejected */
    {"a: &x 1\nb: *x\n", GQ_EINVAL, "t.yaml:1: anchors (&name) are not supported"},
    {"a: 1\nb: *x\n", GQ_EINVAL, "t.yaml:2: aliases (*name) are not supported"},
    {"a:\n  b: &anchor\n    c: 1\n", GQ_EINVAL, "t.yaml:2: anchors (&name) are not supported"},
    {"a: 1\nb: 2\na: 3\n", GQ_EINVAL, "t.yaml:3: duplicate mapping key \"a\""},
    {"? [a]\n: 1\n", GQ_EINVAL, "t.yaml:1: mapping keys must be scalars"},
    {"? {a: 1}\n: 1\n", GQ_EINVAL, "t.yaml:1: mapping keys must be scalars"},
    {"\"a\\0b\": 1\n", GQ_EINVAL, "t.yaml:1: a mapping key contains a NUL character"},
    {"a: .inf\n", GQ_EINVAL, "t.yaml:1: infinity and NaN cannot be represented in JSON"},
    {"a: -.Inf\n", GQ_EINVAL, "t.yaml:1: infinity and NaN cannot be represented in JSON"},
    {"a: .nan\n", GQ_EINVAL, "t.yaml:1: infinity and NaN cannot be represented in JSON"},
    {"a: 1e999\n", GQ_EINVAL, "t.yaml:1: number too large"},
    {"a: 0x10000000000000000\n", GQ_EINVAL, "t.yaml:1: integer too large"},
    {"a: [1, 2\n", GQ_EINVAL,
     "t.yaml:2: did not find expected ',' or ']' while parsing a flow sequence"},
    {"a:\n\tb: 1\n", GQ_EINVAL,
     "t.yaml:2: found character that cannot start any token while scanning for the next token"},
    {"a: b: c\n", GQ_EINVAL, "t.yaml:1: mapping values are not allowed in this context"},
};

static char *docs_text(json_object **docs, size_t n)
{
    size_t cap = 1, len = 0;
    char *s = calloc(1, 1);
    for (size_t i = 0; i < n; i++) {
        const char *t = json_object_to_json_string_ext(docs[i], JSON_C_TO_STRING_PLAIN |
                                                                    JSON_C_TO_STRING_NOSLASHESCAPE);
        size_t tl = strlen(t);
        cap += tl + 1;
        s = realloc(s, cap);
        if (i)
            s[len++] = '\n';
        memcpy(s + len, t, tl + 1);
        len += tl;
    }
    return s;
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const y_case *c = &cases[i];
        json_object **docs = NULL;
        size_t n = 0;
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = gq_yaml_load(c->in, strlen(c->in), "t.yaml", &docs, &n, &err);
        if (rc != c->rc)
            fail_msg("case %zu: rc %d want %d (%s)", i, rc, c->rc, err.msg);
        if (rc) {
            if (strcmp(err.msg, c->want))
                fail_msg("case %zu:\n  got  %s\n  want %s", i, err.msg, c->want);
            assert_null(docs);
            continue;
        }
        char *got = docs_text(docs, n);
        if (strcmp(got, c->want))
            fail_msg("case %zu:\n  got  %s\n  want %s", i, got, c->want);
        free(got);
        gq_yaml_docs_free(docs, n);
    }
}

/* A NUL inside a quoted value is kept (json-c strings carry a length). */
static void test_nul_in_value(void **state)
{
    (void)state;
    const char in[] = "a: \"x\\0y\"\n";
    json_object **docs = NULL, *v;
    size_t n = 0;
    gq_err err;
    assert_int_equal(gq_yaml_load(in, sizeof(in) - 1, "t", &docs, &n, &err), GQ_OK);
    assert_int_equal(n, 1);
    assert_true(json_object_object_get_ex(docs[0], "a", &v));
    assert_int_equal(json_object_get_string_len(v), 3);
    assert_memory_equal(json_object_get_string(v), "x\0y", 3);
    gq_yaml_docs_free(docs, n);
}

static void expect_limit(const char *in, size_t len, const char *msg)
{
    json_object **docs = NULL;
    size_t n = 0;
    gq_err err;
    assert_int_equal(gq_yaml_load(in, len, "big.yaml", &docs, &n, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, msg);
    assert_null(docs);
}

static void test_limits(void **state)
{
    (void)state;
    char deep[2 * (GQ_YAML_MAX_DEPTH + 1) + 1];
    for (int i = 0; i <= GQ_YAML_MAX_DEPTH; i++) {
        deep[i] = '[';
        deep[GQ_YAML_MAX_DEPTH + 1 + i] = ']';
    }
    deep[sizeof(deep) - 1] = '\0';
    expect_limit(deep, strlen(deep), "big.yaml:1: nesting too deep");
    /* as JSON too: the fast path gives up and the YAML path reports it */
    char json[8 * (GQ_YAML_MAX_DEPTH + 1) + 2];
    size_t jl = 0;
    for (int i = 0; i <= GQ_YAML_MAX_DEPTH; i++) {
        memcpy(json + jl, "{\"a\":", 5);
        jl += 5;
    }
    json[jl++] = '1';
    for (int i = 0; i <= GQ_YAML_MAX_DEPTH; i++)
        json[jl++] = '}';
    expect_limit(json, jl, "big.yaml:1: nesting too deep");
    /* exactly the cap is fine */
    char ok[2 * GQ_YAML_MAX_DEPTH + 1];
    for (int i = 0; i < GQ_YAML_MAX_DEPTH; i++) {
        ok[i] = '[';
        ok[GQ_YAML_MAX_DEPTH + i] = ']';
    }
    ok[sizeof(ok) - 1] = '\0';
    json_object **docs = NULL;
    size_t n = 0;
    gq_err err;
    assert_int_equal(gq_yaml_load(ok, strlen(ok), "t", &docs, &n, &err), GQ_OK);
    gq_yaml_docs_free(docs, n);

    size_t big = (size_t)GQ_YAML_MAX_BYTES + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, ' ', big);
    expect_limit(buf, big, "big.yaml: larger than 4194304 bytes");

    /* many documents */
    size_t per = strlen("a: 1\n---\n"), nd = GQ_YAML_MAX_DOCS + 1;
    for (size_t i = 0; i < nd; i++)
        memcpy(buf + i * per, "a: 1\n---\n", per);
    expect_limit(buf, nd * per, "big.yaml:2048: too many documents");

    /* many nodes in one small document */
    size_t items = (1u << 18) + 1, len = 0;
    buf[len++] = '[';
    for (size_t i = 0; i < items; i++) {
        buf[len++] = '0';
        buf[len++] = ',';
    }
    buf[len - 1] = ']';
    expect_limit(buf, len, "big.yaml:1: too many nodes");
    free(buf);
}

static void test_bad_args(void **state)
{
    (void)state;
    json_object **docs = NULL;
    size_t n = 0;
    gq_err err;
    assert_int_equal(gq_yaml_load(NULL, 0, NULL, &docs, &n, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "<input>: no input");
    gq_yaml_docs_free(NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_nul_in_value),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
