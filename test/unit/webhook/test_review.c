/* AdmissionReview codec: decoding the shared fixture and its malformed
 * variants, response encoding exactly as kube-apiserver reads it, and the
 * sanitising of warnings, messages and audit annotation keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/admission_testutil.h"
#include "common/base64.h"
#include "quota/jsonpatch.h"
#include "common/jsonutil.h"
#include "webhook/review.h"

/* Who asks what of which object: the request's identity as decoded. */
static void assert_request(const wh_review_request *r, wh_review_version version, const char *uid,
                           const char *ns, const char *name, const char *sub_resource,
                           const char *username, wh_operation op)
{
    assert_int_equal(r->version, version);
    assert_string_equal(r->uid, uid);
    assert_string_equal(r->namespace, ns);
    assert_string_equal(r->name, name);
    assert_string_equal(r->sub_resource, sub_resource);
    assert_string_equal(r->username, username);
    assert_int_equal(r->operation, op);
}

static void decode_fixture(void **state)
{
    (void)state;
    size_t len;
    char *body = at_read_data("admissionreview-pod-create.json", &len);
    wh_review_request r;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(wh_review_decode(body, len, &r, &err), GQ_OK);
    assert_request(&r, WH_REVIEW_V1, "b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64", "ml-research", "", "",
                   "system:serviceaccount:kube-system:job-controller", WH_OP_CREATE);
    assert_string_equal(r.kind_group, "");
    assert_string_equal(r.kind_version, "v1");
    assert_string_equal(r.kind, "Pod");
    assert_string_equal(r.resource_group, "");
    assert_string_equal(r.resource_version, "v1");
    assert_string_equal(r.resource, "pods");
    assert_string_equal(wh_operation_name(r.operation), "CREATE");
    assert_int_equal(r.n_groups, 3);
    assert_string_equal(r.groups[0], "system:serviceaccounts");
    assert_string_equal(r.groups[2], "system:authenticated");
    assert_non_null(r.object);
    json_object *spec = NULL;
    assert_true(json_object_object_get_ex(r.object, "spec", &spec));
    assert_null(r.old_object);
    assert_false(r.dry_run);
    wh_review_request_dispose(&r);
    wh_review_request_dispose(&r); /* idempotent */
    wh_review_request_dispose(NULL);
    free(body);
}

/* A malformed variant: a JSON Patch applied to the fixture (or raw text). */
typedef struct bad_case {
    const char *name;
    const char *patch; /* applied to the fixture; NULL: raw is the whole body */
    const char *raw;
    gq_code code;
    const char *msg; /* exact error message */
} bad_case;

static const bad_case bad_cases[] = {
    {"missing uid", "[{\"op\":\"remove\",\"path\":\"/request/uid\"}]", NULL, GQ_EINVAL,
     "request.uid is missing or empty"},
    {"empty uid", "[{\"op\":\"replace\",\"path\":\"/request/uid\",\"value\":\"\"}]", NULL,
     GQ_EINVAL, "request.uid is missing or empty"},
    {"uid number", "[{\"op\":\"replace\",\"path\":\"/request/uid\",\"value\":7}]", NULL, GQ_EINVAL,
     "request.uid must be a string"},
    {"uid too long",
     "[{\"op\":\"replace\",\"path\":\"/request/"
     "uid\",\"value\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaa\"}]",
     NULL, GQ_EINVAL, "request.uid is longer than 128 bytes"},
    {"wrong kind", "[{\"op\":\"replace\",\"path\":\"/kind\",\"value\":\"Pod\"}]", NULL, GQ_EINVAL,
     "kind \"Pod\" is not AdmissionReview"},
    {"missing kind", "[{\"op\":\"remove\",\"path\":\"/kind\"}]", NULL, GQ_EINVAL,
     "kind \"\" is not AdmissionReview"},
    {"wrong apiVersion", "[{\"op\":\"replace\",\"path\":\"/apiVersion\",\"value\":\"v1\"}]", NULL,
     GQ_EINVAL, "apiVersion \"v1\" is not admission.k8s.io/v1 (or v1beta1)"},
    {"apiVersion not a string", "[{\"op\":\"replace\",\"path\":\"/apiVersion\",\"value\":[]}]",
     NULL, GQ_EINVAL, "apiVersion must be a string"},
    {"missing request", "[{\"op\":\"remove\",\"path\":\"/request\"}]", NULL, GQ_EINVAL,
     "request is missing"},
    {"null request", "[{\"op\":\"replace\",\"path\":\"/request\",\"value\":null}]", NULL, GQ_EINVAL,
     "request is missing"},
    {"request string", "[{\"op\":\"replace\",\"path\":\"/request\",\"value\":\"x\"}]", NULL,
     GQ_EINVAL, "request must be an object"},
    {"kind not object", "[{\"op\":\"replace\",\"path\":\"/request/kind\",\"value\":\"Pod\"}]", NULL,
     GQ_EINVAL, "request.kind must be an object"},
    {"kind.kind missing", "[{\"op\":\"remove\",\"path\":\"/request/kind/kind\"}]", NULL, GQ_EINVAL,
     "request.kind.kind is missing"},
    {"resource missing", "[{\"op\":\"remove\",\"path\":\"/request/resource\"}]", NULL, GQ_EINVAL,
     "request.resource.resource is missing"},
    {"resource group number",
     "[{\"op\":\"replace\",\"path\":\"/request/resource/group\",\"value\":1}]", NULL, GQ_EINVAL,
     "request.resource.group must be a string"},
    {"namespace number", "[{\"op\":\"replace\",\"path\":\"/request/namespace\",\"value\":1}]", NULL,
     GQ_EINVAL, "request.namespace must be a string"},
    {"unknown operation",
     "[{\"op\":\"replace\",\"path\":\"/request/operation\",\"value\":\"PATCH\"}]", NULL, GQ_EINVAL,
     "request.operation \"PATCH\" is not CREATE, UPDATE, DELETE or CONNECT"},
    {"missing operation", "[{\"op\":\"remove\",\"path\":\"/request/operation\"}]", NULL, GQ_EINVAL,
     "request.operation \"\" is not CREATE, UPDATE, DELETE or CONNECT"},
    {"userInfo array", "[{\"op\":\"replace\",\"path\":\"/request/userInfo\",\"value\":[]}]", NULL,
     GQ_EINVAL, "request.userInfo must be an object"},
    {"groups object", "[{\"op\":\"replace\",\"path\":\"/request/userInfo/groups\",\"value\":{}}]",
     NULL, GQ_EINVAL, "request.userInfo.groups must be an array"},
    {"group number", "[{\"op\":\"add\",\"path\":\"/request/userInfo/groups/1\",\"value\":5}]", NULL,
     GQ_EINVAL, "request.userInfo.groups[1] must be a string"},
    {"object array", "[{\"op\":\"replace\",\"path\":\"/request/object\",\"value\":[]}]", NULL,
     GQ_EINVAL, "request.object must be an object"},
    {"oldObject string", "[{\"op\":\"replace\",\"path\":\"/request/oldObject\",\"value\":\"\"}]",
     NULL, GQ_EINVAL, "request.oldObject must be an object"},
    {"dryRun string", "[{\"op\":\"replace\",\"path\":\"/request/dryRun\",\"value\":\"true\"}]",
     NULL, GQ_EINVAL, "request.dryRun must be a boolean"},
    {"not json", NULL, "hello", GQ_EINVAL, "JSON syntax error at byte 0: unexpected character"},
    {"empty body", NULL, "", GQ_EINVAL, "empty JSON text"},
    {"top-level array", NULL, "[]", GQ_EINVAL, "an AdmissionReview must be a JSON object"},
    {"trailing garbage", NULL, "{\"apiVersion\":\"admission.k8s.io/v1\"} {}", GQ_EINVAL,
     "JSON syntax error at byte 37: unexpected character"},
    {"truncated", NULL, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":", GQ_EINVAL,
     "JSON text ends early (after 43 bytes)"},
};

static void decode_malformed(void **state)
{
    (void)state;
    size_t len;
    char *body = at_read_data("admissionreview-pod-create.json", &len);
    json_object *fixture = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(body, len, 0, &fixture, &err), GQ_OK);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const bad_case *c = &bad_cases[i];
        const char *text = c->raw;
        json_object *variant = NULL;
        if (c->patch) {
            if (gq_patch_apply_text(fixture, c->patch, strlen(c->patch), &variant, &err))
                fail_msg("%s: patch: %s", c->name, err.msg);
            text = gq_json_compact(variant);
        }
        wh_review_request r;
        memset(&r, 0x5a, sizeof(r));
        gq_err_clear(&err);
        gq_code rc = wh_review_decode(text, strlen(text), &r, &err);
        if (rc != c->code)
            fail_msg("%s: code %d (%s), want %d", c->name, rc, err.msg, c->code);
        if (strcmp(err.msg, c->msg) != 0)
            fail_msg("%s: message \"%s\", want \"%s\"", c->name, err.msg, c->msg);
        assert_int_equal(r.n_groups, 0x5a5a5a5a5a5a5a5aULL); /* untouched */
        json_object_put(variant);
    }
    json_object_put(fixture);
    free(body);
}

static void decode_variants_accepted(void **state)
{
    (void)state;
    /* Minimal v1beta1 review: optional fields absent, null objects. */
    const char *min = "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
                      "\"request\":{\"uid\":\"u1\",\"kind\":{\"kind\":\"Pod\"},\"resource\":{"
                      "\"resource\":\"pods\"},\"subResource\":\"status\",\"name\":\"p\","
                      "\"operation\":\"UPDATE\",\"object\":null,\"oldObject\":{},"
                      "\"dryRun\":true,\"userInfo\":{\"groups\":null}}}";
    wh_review_request r;
    gq_err err;
    assert_int_equal(wh_review_decode(min, strlen(min), &r, &err), GQ_OK);
    assert_request(&r, WH_REVIEW_V1BETA1, "u1", "", "p", "status", "", WH_OP_UPDATE);
    assert_null(r.object);
    assert_non_null(r.old_object);
    assert_true(r.dry_run);
    assert_int_equal(r.n_groups, 0);
    assert_null(r.groups);
    wh_review_request_dispose(&r);
}

static void decode_deep_nesting(void **state)
{
    (void)state;
    /* The object nested 70 arrays deep: over the cap, answered with an error. */
    char body[1024];
    int n = snprintf(body, sizeof(body),
                     "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                     "\"request\":{\"uid\":\"u\",\"object\":{\"x\":");
    for (int i = 0; i < 70; i++)
        body[n++] = '[';
    for (int i = 0; i < 70; i++)
        body[n++] = ']';
    n += snprintf(body + n, sizeof(body) - (size_t)n, "}}}");
    wh_review_request r;
    gq_err err;
    assert_int_equal(wh_review_decode(body, (size_t)n, &r, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "JSON nests deeper than 64 levels");
}

static void encode_allowed_with_patch(void **state)
{
    (void)state;
    wh_review_response r;
    assert_int_equal(wh_review_response_init(&r, WH_REVIEW_V1, "uid-1"), GQ_OK);
    const char *patch = "[{\"op\":\"add\",\"path\":\"/metadata/labels/a\",\"value\":\"b\"}]";
    assert_int_equal(wh_review_response_set_patch(&r, patch, strlen(patch)), GQ_OK);
    assert_int_equal(wh_review_response_add_warning(&r, "container trainer: rewritten"), GQ_OK);
    assert_int_equal(wh_review_response_set_audit(&r, "charged", "gpu-memory=20Gi"), GQ_OK);
    assert_int_equal(wh_review_response_set_audit(&r, "reservation", "uid-1"), GQ_OK);
    assert_int_equal(wh_review_response_set_audit(&r, "charged", "gpu-memory=10Gi"), GQ_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(wh_review_encode(&r, &text, &len), GQ_OK);
    char *b64 = NULL;
    size_t blen = 0;
    assert_int_equal(gq_base64_encode(patch, strlen(patch), &b64, &blen), GQ_OK);
    char want[1024];
    snprintf(want, sizeof(want),
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{"
             "\"uid\":\"uid-1\",\"allowed\":true,\"patchType\":\"JSONPatch\",\"patch\":\"%s\","
             "\"warnings\":[\"container trainer: rewritten\"],\"auditAnnotations\":{"
             "\"charged\":\"gpu-memory=10Gi\",\"reservation\":\"uid-1\"}}}",
             b64);
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));
    /* The patch decodes back to the exact text. */
    size_t rlen = 0;
    char *raw = at_response_patch(text, len, &rlen);
    assert_string_equal(raw, patch);
    assert_int_equal(rlen, strlen(patch));
    free(raw);
    free(b64);
    free(text);
    wh_review_response_dispose(&r);
    wh_review_response_dispose(NULL);
}

static void encode_allowed_plain_and_v1beta1(void **state)
{
    (void)state;
    wh_review_response r;
    assert_int_equal(wh_review_response_init(&r, WH_REVIEW_V1BETA1, "u\"2"), GQ_OK);
    /* An empty patch is no patch: no patchType either. */
    assert_int_equal(wh_review_response_set_patch(&r, "[]", 2), GQ_OK);
    assert_null(r.patch);
    assert_int_equal(wh_review_response_add_warning(&r, ""), GQ_OK);
    assert_int_equal(r.n_warnings, 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(wh_review_encode(&r, &text, &len), GQ_OK);
    assert_string_equal(text, "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":"
                              "\"AdmissionReview\",\"response\":{\"uid\":\"u\\\"2\","
                              "\"allowed\":true}}");
    free(text);
    wh_review_response_dispose(&r);
}

static void encode_denied(void **state)
{
    (void)state;
    wh_review_response r;
    assert_int_equal(wh_review_response_init(&r, WH_REVIEW_V1, "u3"), GQ_OK);
    assert_int_equal(wh_review_response_set_patch(&r, "[{}]", 4), GQ_OK);
    assert_int_equal(
        wh_review_response_deny(&r, 403, "Forbidden",
                                "exceeded quota: team-a, requested: gpu-memory=16Gi,\nused: "
                                "gpu-memory=56Gi, limited: gpu-memory=64Gi\x01"),
        GQ_OK);
    assert_null(r.patch);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(wh_review_encode(&r, &text, &len), GQ_OK);
    assert_string_equal(
        text, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{"
              "\"uid\":\"u3\",\"allowed\":false,\"status\":{\"code\":403,\"reason\":\"Forbidden\","
              "\"message\":\"exceeded quota: team-a, requested: gpu-memory=16Gi, used: "
              "gpu-memory=56Gi, limited: gpu-memory=64Gi \"}}}");
    free(text);
    /* A message over the cap is cut. */
    char big[WH_MESSAGE_MAX * 2];
    memset(big, 'm', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(wh_review_response_deny(&r, 403, "Forbidden", big), GQ_OK);
    assert_int_equal(strlen(r.message), WH_MESSAGE_MAX);
    wh_review_response_dispose(&r);
}

static void warnings_sanitised_and_capped(void **state)
{
    (void)state;
    wh_review_response r;
    assert_int_equal(wh_review_response_init(&r, WH_REVIEW_V1, "u4"), GQ_OK);
    /* 118 ASCII bytes then a 3-byte character: cut before it, at 118. */
    char text[256];
    memset(text, 'w', 118);
    memcpy(text + 118, "\xe2\x82\xac tail", 9);
    assert_int_equal(wh_review_response_add_warning(&r, text), GQ_OK);
    assert_int_equal(strlen(r.warnings[0]), 118);
    /* Controls (C0, DEL, C1) become spaces; invalid UTF-8 becomes "?". */
    assert_int_equal(wh_review_response_add_warning(&r, "a\tb\x7f"
                                                        "c\xc2\x85"
                                                        "d\xff"
                                                        "e\xc0\xaf"
                                                        "f\xed\xa0\x80g\xe2\x82\xac"),
                     GQ_OK);
    assert_string_equal(r.warnings[1], "a b c d?e??f???g\xe2\x82\xac");
    for (int i = 2; i < WH_WARNINGS_MAX + 3; i++)
        assert_int_equal(wh_review_response_add_warning(&r, "more"), GQ_OK);
    assert_int_equal(r.n_warnings, WH_WARNINGS_MAX);
    assert_int_equal(r.dropped_warnings, 3);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(wh_review_encode(&r, &out, &len), GQ_OK);
    assert_non_null(strstr(out, "\"more\",\"4 more warnings not shown\"]"));
    free(out);
    wh_review_response_dispose(&r);
}

static void audit_keys(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        bool ok;
    } keys[] = {
        {"charged", true},
        {"gpu-memory.requested_bytes", true},
        {"A", true},
        {"a1", true},
        {"gpuquota.io/charged", false},
        {"", false},
        {"-a", false},
        {"a-", false},
        {".a", false},
        {"a b", false},
        {"a:b", false},
        {"012345678901234567890123456789012345678901234567890123456789012", true},
        {"0123456789012345678901234567890123456789012345678901234567890123", false},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (wh_audit_key_valid(keys[i].key) != keys[i].ok)
            fail_msg("key \"%s\"", keys[i].key);
    assert_false(wh_audit_key_valid(NULL));

    wh_review_response r;
    assert_int_equal(wh_review_response_init(&r, WH_REVIEW_V1, "u5"), GQ_OK);
    assert_int_equal(wh_review_response_set_audit(&r, "gpuquota.io/x", "v"), GQ_EINVAL);
    char big[WH_AUDIT_VALUE_MAX + 2];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(wh_review_response_set_audit(&r, "big", big), GQ_ELIMIT);
    char key[16];
    for (int i = 0; i < WH_AUDIT_MAX; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(wh_review_response_set_audit(&r, key, "v"), GQ_OK);
    }
    assert_int_equal(wh_review_response_set_audit(&r, "one-more", "v"), GQ_ELIMIT);
    assert_int_equal(wh_review_response_set_audit(&r, "k0", "w"), GQ_OK);
    assert_string_equal(r.audit_values[0], "w");
    assert_int_equal(r.n_audit, WH_AUDIT_MAX);
    wh_review_response_dispose(&r);
}

/* A patch as long as a whole 3 MiB review, with every other member at its
 * cap, encodes; only a patch past WH_RESPONSE_MAX (as base64) is refused. */
static void encode_largest_response(void **state)
{
    (void)state;
    size_t n = (size_t)3 << 20;
    char *patch = malloc(n + 1);
    assert_non_null(patch);
    memset(patch, 'x', n);
    patch[n] = '\0';
    wh_review_response r;
    assert_int_equal(wh_review_response_init(&r, WH_REVIEW_V1, "u6"), GQ_OK);
    assert_int_equal(wh_review_response_set_patch(&r, patch, n), GQ_OK);
    char text[WH_AUDIT_VALUE_MAX + 1], key[16];
    memset(text, '"', sizeof(text) - 1); /* each one escaped to two bytes */
    text[sizeof(text) - 1] = '\0';
    for (int i = 0; i < WH_AUDIT_MAX; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(wh_review_response_set_audit(&r, key, text), GQ_OK);
    }
    text[WH_WARNING_MAX] = '\0';
    for (int i = 0; i < WH_WARNINGS_MAX; i++)
        assert_int_equal(wh_review_response_add_warning(&r, text), GQ_OK);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(wh_review_encode(&r, &out, &len), GQ_OK);
    assert_true(len > n / 3 * 4 + 2 * WH_AUDIT_MAX * WH_AUDIT_VALUE_MAX);
    free(out);
    free(patch);

    n = WH_RESPONSE_MAX / 4 * 3 + 1;
    patch = malloc(n);
    assert_non_null(patch);
    memset(patch, 'x', n);
    assert_int_equal(wh_review_response_set_patch(&r, patch, n), GQ_OK);
    out = NULL;
    assert_int_equal(wh_review_encode(&r, &out, &len), GQ_ELIMIT);
    assert_null(out);
    free(patch);
    wh_review_response_dispose(&r);
}

static void sanitize_edges(void **state)
{
    (void)state;
    char buf[4];
    assert_int_equal(wh_sanitize_text("abcdef", buf, sizeof(buf)), 3);
    assert_string_equal(buf, "abc");
    assert_int_equal(wh_sanitize_text("a\xc3\xa9", buf, 3), 1); /* é does not fit */
    assert_string_equal(buf, "a");
    assert_int_equal(wh_sanitize_text(NULL, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    assert_int_equal(wh_sanitize_text("\xf4\x90\x80\x80", buf, sizeof(buf)), 3);
    assert_string_equal(buf, "???"); /* above U+10FFFF: each byte replaced */
    assert_int_equal(wh_sanitize_text("x", buf, 0), 0);
}

static void base64_vectors(void **state)
{
    (void)state;
    /* RFC 4648 §10 test vectors. */
    static const char *const vec[][2] = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
    };
    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        char *enc = NULL;
        size_t n = 0;
        assert_int_equal(gq_base64_encode(vec[i][0], strlen(vec[i][0]), &enc, &n), GQ_OK);
        assert_string_equal(enc, vec[i][1]);
        assert_int_equal(n, strlen(vec[i][1]));
        unsigned char *dec = NULL;
        assert_int_equal(gq_base64_decode(enc, n, &dec, &n), GQ_OK);
        assert_int_equal(n, strlen(vec[i][0]));
        assert_memory_equal(dec, vec[i][0], n);
        free(dec);
        free(enc);
    }
    unsigned char bin[3] = {0xfb, 0xff, 0x00};
    char *enc = NULL;
    size_t n;
    assert_int_equal(gq_base64_encode(bin, 3, &enc, &n), GQ_OK);
    assert_string_equal(enc, "+/8A");
    free(enc);
    static const char *const bad[] = {
        "Zg=", "Zg=a", "Z===", "Zh==", "Zm9=v", "Zm-v", "Zm9v\n", "=Zm9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned char *dec = (unsigned char *)0x1;
        if (gq_base64_decode(bad[i], strlen(bad[i]), &dec, &n) != GQ_EINVAL)
            fail_msg("decoded \"%s\"", bad[i]);
        assert_ptr_equal(dec, (unsigned char *)0x1);
    }
}

/* The review `gpuquota admit` wraps a pod in: exactly what kube-apiserver
 * sends for a pod CREATE, and it decodes like one. */
static void review_for_pod_create(void **state)
{
    (void)state;
    static const struct {
        const char *pod, *ns, *want_ns, *want_name;
    } cases[] = {
        {"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}}", NULL, "ml", "p"},
        {"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}}", "other", "other", "p"},
        {"{\"metadata\":{\"generateName\":\"job-\"}}", NULL, "default", ""},
        {"{}", "", "default", ""},
    };
    gq_err err;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *pod = NULL, *rv = NULL;
        assert_int_equal(gq_json_parse(cases[i].pod, strlen(cases[i].pod), 8, &pod, &err), GQ_OK);
        assert_int_equal(wh_review_for_pod_create(pod, cases[i].ns, "u-1", "me", &rv, &err), GQ_OK);
        if (i == 0)
            assert_string_equal(
                gq_json_compact(rv),
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
                "\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
                "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
                "\"requestKind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
                "\"requestResource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
                "\"name\":\"p\",\"namespace\":\"ml\",\"operation\":\"CREATE\",\"userInfo\":{"
                "\"username\":\"me\"},\"object\":{\"metadata\":{\"name\":\"p\",\"namespace\":"
                "\"ml\"}},\"oldObject\":null,\"dryRun\":false,\"options\":{\"apiVersion\":"
                "\"meta.k8s.io/v1\",\"kind\":\"CreateOptions\"}}}");
        wh_review_request r;
        assert_int_equal(wh_review_decode_json(rv, &r, &err), GQ_OK);
        assert_string_equal(r.uid, "u-1");
        assert_string_equal(r.namespace, cases[i].want_ns);
        assert_string_equal(r.name, cases[i].want_name);
        assert_string_equal(r.username, "me");
        assert_int_equal(r.operation, WH_OP_CREATE);
        assert_ptr_equal(r.object, pod); /* referenced, not copied */
        wh_review_request_dispose(&r);
        json_object_put(pod);
    }
    json_object *arr = json_object_new_array(), *rv = (json_object *)0x1;
    assert_int_equal(wh_review_for_pod_create(arr, NULL, "u", "me", &rv, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "a Pod must be a JSON object");
    json_object *obj = json_object_new_object();
    assert_int_equal(wh_review_for_pod_create(obj, NULL, "", "me", &rv, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "request.uid must not be empty");
    assert_ptr_equal(rv, (json_object *)0x1);
    /* decode_json takes the tree even when it refuses it. */
    wh_review_request r;
    assert_int_equal(wh_review_decode_json(arr, &r, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "an AdmissionReview must be a JSON object");
    assert_int_equal(wh_review_decode_json(obj, &r, &err), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_fixture),
        cmocka_unit_test(decode_malformed),
        cmocka_unit_test(decode_variants_accepted),
        cmocka_unit_test(decode_deep_nesting),
        cmocka_unit_test(encode_allowed_with_patch),
        cmocka_unit_test(encode_allowed_plain_and_v1beta1),
        cmocka_unit_test(encode_denied),
        cmocka_unit_test(warnings_sanitised_and_capped),
        cmocka_unit_test(audit_keys),
        cmocka_unit_test(encode_largest_response),
        cmocka_unit_test(sanitize_edges),
        cmocka_unit_test(base64_vectors),
        cmocka_unit_test(review_for_pod_create),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
