/* Table-driven unit tests of the kube-standin building blocks: selectors,
 * patches, base64, ages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "standin/standin.h"

static json_object *J(const char *s)
{
    json_object *o = json_tokener_parse(s);
    assert_non_null(o);
    return o;
}

static const char *const pod_json =
    "{\"metadata\":{\"name\":\"web\",\"namespace\":\"team-a\","
    "\"labels\":{\"app\":\"x\",\"tier\":\"gold\",\"n\":\"5\"}},"
    "\"spec\":{\"nodeName\":\"node-1\",\"hostNetwork\":true},\"status\":{\"phase\":\"Running\"}}";

static void label_selectors(void **state)
{
    (void)state;
    static const struct {
        const char *sel;
        int match;
    } cases[] = {
        {"", 1},
        {"app=x", 1},
        {"app==x", 1},
        {"app = x", 1},
        {"app=y", 0},
        {"app!=y", 1},
        {"missing!=y", 1},
        {"app!=x", 0},
        {"app in (a, x)", 1},
        {"app in (a,b)", 0},
        {"app notin (a,b)", 1},
        {"missing notin (a)", 1},
        {"app notin (x)", 0},
        {"app", 1},
        {"missing", 0},
        {"!missing", 1},
        {"!app", 0},
        {"app=x,tier=gold", 1},
        {"app=x,tier=silver", 0},
        {"app=x, tier in (gold), !missing", 1},
        {"n>4", 1},
        {"n<5", 0},
        {"app=", 0},
    };
    json_object *pod = J(pod_json);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        selector *s = NULL;
        gq_err err = {0};
        assert_int_equal(sel_parse_labels(cases[i].sel, &s, &err), GQ_OK);
        if (sel_match_labels(s, pod) != cases[i].match)
            fail_msg("selector \"%s\" should %smatch", cases[i].sel, cases[i].match ? "" : "not ");
        sel_free(s);
    }
    json_object_put(pod);
}

static void label_selector_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {"app in (a", "app in a", "app=x,", "=x",
                                      "app ~ x",   "app=x y",  "n>"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        selector *s = NULL;
        gq_err err = {0};
        if (sel_parse_labels(bad[i], &s, &err) == GQ_OK)
            fail_msg("\"%s\" should be rejected", bad[i]);
        assert_null(s);
        assert_true(err.msg[0] != '\0');
    }
    char *huge = malloc(SI_SEL_MAX + 2);
    assert_non_null(huge);
    memset(huge, 'a', SI_SEL_MAX + 1);
    huge[SI_SEL_MAX + 1] = '\0';
    selector *s = NULL;
    gq_err err = {0};
    assert_int_equal(sel_parse_labels(huge, &s, &err), GQ_ELIMIT);
    free(huge);
}

static void field_selectors(void **state)
{
    (void)state;
    rtype pods;
    st_lock();
    assert_int_equal(rtype_lookup("", "v1", "pods", &pods), 0);
    st_unlock();
    static const struct {
        const char *sel;
        gq_code rc;
        int match;
    } cases[] = {
        {"metadata.name=web", GQ_OK, 1},
        {"metadata.name==web", GQ_OK, 1},
        {"metadata.name!=web", GQ_OK, 0},
        {"metadata.namespace=team-a,status.phase=Running", GQ_OK, 1},
        {"status.phase=Pending", GQ_OK, 0},
        {"spec.nodeName=node-1", GQ_OK, 1},
        {"spec.hostNetwork=true", GQ_OK, 1},
        {"status.podIP=", GQ_OK, 1}, /* absent reads as "" */
        {"spec.containers=x", GQ_EINVAL, 0},
        {"metadata.name", GQ_EINVAL, 0},
    };
    json_object *pod = J(pod_json);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        selector *s = NULL;
        gq_err err = {0};
        gq_code rc = sel_parse_fields(cases[i].sel, &pods, &s, &err);
        if (rc != cases[i].rc)
            fail_msg("\"%s\": rc %d, want %d (%s)", cases[i].sel, rc, cases[i].rc, err.msg);
        if (!rc && sel_match_fields(s, pod) != cases[i].match)
            fail_msg("field selector \"%s\" should %smatch", cases[i].sel,
                     cases[i].match ? "" : "not ");
        sel_free(s);
    }
    selector *s = NULL;
    gq_err err = {0};
    assert_int_equal(sel_parse_fields("spec.containers=x", &pods, &s, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "field label not supported: spec.containers");
    json_object_put(pod);
}

typedef gq_code (*patch_fn)(json_object *, json_object *, json_object **, gq_err *);

/* m: merge patch, j: JSON patch, s: strategic merge patch */
static patch_fn pick(char kind)
{
    return kind == 'm' ? patch_merge : kind == 'j' ? patch_json : patch_strategic;
}

static void patches(void **state)
{
    (void)state;
    static const struct {
        char kind; /* m merge, j json, s strategic */
        const char *target, *patch, *want;
    } cases[] = {
        {'m', "{\"a\":1,\"b\":{\"c\":2,\"d\":3}}", "{\"b\":{\"c\":null,\"e\":4},\"f\":[1]}",
         "{\"a\":1,\"b\":{\"d\":3,\"e\":4},\"f\":[1]}"},
        {'m', "{\"l\":[1,2]}", "{\"l\":[3]}", "{\"l\":[3]}"},
        {'j', "{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/1\",\"value\":9}]",
         "{\"a\":[1,9,2]}"},
        {'j', "{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/-\",\"value\":3}]",
         "{\"a\":[1,2,3]}"},
        {'j', "{\"a\":[1,2,3]}", "[{\"op\":\"replace\",\"path\":\"/a/1\",\"value\":0}]",
         "{\"a\":[1,0,3]}"},
        {'j', "{\"a\":{\"b/c\":1,\"d~e\":2}}",
         "[{\"op\":\"remove\",\"path\":\"/a/b~1c\"},{\"op\":\"copy\",\"from\":\"/a/d~0e\","
         "\"path\":\"/x\"}]",
         "{\"a\":{\"d~e\":2},\"x\":2}"},
        {'j', "{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b\"}]", "{\"b\":1}"},
        {'j', "{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":1}]", "{\"a\":1}"},
        {'s',
         "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":\"E\","
         "\"value\":\"1\"}]}]}}",
         "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"F\",\"value\":\"2\"}]},"
         "{\"name\":\"b\",\"image\":\"y\"}],\"$setElementOrder/containers\":[{\"name\":\"a\"}]}}",
         "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":\"E\","
         "\"value\":\"1\"},{\"name\":\"F\",\"value\":\"2\"}]},{\"name\":\"b\",\"image\":\"y\"}]}}"},
        {'s', "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
         "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}}",
         "{\"spec\":{\"containers\":[{\"name\":\"b\"}]}}"},
        {'s', "{\"metadata\":{\"finalizers\":[\"a\"]}}",
         "{\"metadata\":{\"finalizers\":[\"b\",\"a\"]}}",
         "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}"},
        {'s', "{\"spec\":{\"tolerations\":[{\"key\":\"a\"}]}}",
         "{\"spec\":{\"tolerations\":[{\"key\":\"b\"}]}}",
         "{\"spec\":{\"tolerations\":[{\"key\":\"b\"}]}}"},
        {'s', "{\"m\":{\"a\":1,\"b\":2}}", "{\"m\":{\"$patch\":\"replace\",\"c\":3}}",
         "{\"m\":{\"c\":3}}"},
        /* kubectl apply of a webhook configuration whose URL changed: the
         * entry is merged by name, its rules and failurePolicy stay. */
        {'s',
         "{\"webhooks\":[{\"name\":\"v\",\"clientConfig\":{\"url\":\"a\"},\"rules\":[{"
         "\"operations\":[\"CREATE\"]}],\"failurePolicy\":\"Fail\"}]}",
         "{\"$setElementOrder/webhooks\":[{\"name\":\"v\"}],\"webhooks\":[{\"clientConfig\":{"
         "\"url\":\"b\"},\"name\":\"v\"}]}",
         "{\"webhooks\":[{\"name\":\"v\",\"clientConfig\":{\"url\":\"b\"},\"rules\":[{"
         "\"operations\":[\"CREATE\"]}],\"failurePolicy\":\"Fail\"}]}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        patch_fn fn = pick(cases[i].kind);
        json_object *t = J(cases[i].target), *p = J(cases[i].patch), *want = J(cases[i].want);
        json_object *out = NULL;
        gq_err err = {0};
        if (fn(t, p, &out, &err) != GQ_OK)
            fail_msg("case %zu failed: %s", i, err.msg);
        if (!json_object_equal(out, want))
            fail_msg("case %zu: got %s", i, si_to_json(out));
        /* the target is never modified */
        json_object *again = J(cases[i].target);
        assert_true(json_object_equal(t, again));
        json_object_put(again);
        json_object_put(out);
        json_object_put(t);
        json_object_put(p);
        json_object_put(want);
    }
}

static void patch_errors(void **state)
{
    (void)state;
    static const struct {
        char kind;
        const char *target, *patch;
    } cases[] = {
        {'j', "{\"a\":1}", "{\"op\":\"add\"}"},
        {'j', "{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/b\"}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":1}]"},
        {'j', "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/5\",\"value\":1}]"},
        {'j', "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/01\",\"value\":1}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/x/y\",\"value\":1}]"},
        {'j', "{\"a\":{}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b\"}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"frob\",\"path\":\"/a\"}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a\"}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/z\",\"path\":\"/b\"}]"},
        {'j', "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]"},
        {'m', "{\"a\":1}", "[1]"},
        {'s', "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
         "{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        patch_fn fn = pick(cases[i].kind);
        json_object *t = J(cases[i].target), *p = J(cases[i].patch);
        json_object *out = NULL;
        gq_err err = {0};
        if (fn(t, p, &out, &err) == GQ_OK)
            fail_msg("case %zu should fail, got %s", i, si_to_json(out));
        assert_null(out);
        assert_true(err.msg[0] != '\0');
        json_object_put(t);
        json_object_put(p);
    }
}

static void base64(void **state)
{
    (void)state;
    static const struct {
        const char *plain, *std, *url;
    } cases[] = {
        {"", "", ""},
        {"f", "Zg==", "Zg"},
        {"fo", "Zm8=", "Zm8"},
        {"foo", "Zm9v", "Zm9v"},
        {"\xfb\xff", "+/8=", "-_8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = si_b64_encode(cases[i].plain, strlen(cases[i].plain), 0);
        char *u = si_b64_encode(cases[i].plain, strlen(cases[i].plain), 1);
        assert_string_equal(s, cases[i].std);
        assert_string_equal(u, cases[i].url);
        size_t n = 0;
        char *d1 = si_b64_decode(s, &n);
        assert_int_equal(n, strlen(cases[i].plain));
        assert_memory_equal(d1, cases[i].plain, n);
        char *d2 = si_b64_decode(u, &n);
        assert_memory_equal(d2, cases[i].plain, n);
        free(s);
        free(u);
        free(d1);
        free(d2);
    }
    assert_null(si_b64_decode("ab$d", NULL));
}

static void ages(void **state)
{
    (void)state;
    static const struct {
        long long s;
        const char *want;
    } cases[] = {
        {-5, "<invalid>"},
        {-1, "0s"},
        {0, "0s"},
        {119, "119s"},
        {120, "2m"},
        {125, "2m5s"},
        {600, "10m"},
        {179 * 60, "179m"},
        {3 * 3600, "3h"},
        {3 * 3600 + 60, "3h1m"},
        {10 * 3600, "10h"},
        {48 * 3600, "2d"},
        {50 * 3600, "2d2h"},
        {10 * 86400, "10d"},
        {3 * 365 * 86400, "3y"},
        {3 * 365 * 86400 + 86400, "3y1d"},
        {9 * 365 * 86400LL, "9y"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        table_age(cases[i].s, buf, sizeof buf);
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("%lld s: got %s, want %s", cases[i].s, buf, cases[i].want);
    }
}

int main(void)
{
    st_init(100);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(label_selectors),
        cmocka_unit_test(label_selector_errors),
        cmocka_unit_test(field_selectors),
        cmocka_unit_test(patches),
        cmocka_unit_test(patch_errors),
        cmocka_unit_test(base64),
        cmocka_unit_test(ages),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    st_shutdown();
    return rc;
}
