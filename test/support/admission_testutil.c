#include "admission_testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/jsonutil.h"

char *at_read_data(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", GQ_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

json_object *at_load_json(const char *name)
{
    size_t len;
    char *text = at_read_data(name, &len);
    json_object *v = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(text, len, 0, &v, &err), GQ_OK);
    free(text);
    return v;
}

char *at_response_patch(const char *review, size_t len, size_t *patch_len)
{
    json_object *doc = NULL, *resp = NULL, *p = NULL, *type = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(review, len, 0, &doc, &err), GQ_OK);
    assert_true(json_object_object_get_ex(doc, "response", &resp));
    assert_true(json_object_object_get_ex(resp, "patchType", &type));
    assert_string_equal(json_object_get_string(type), "JSONPatch");
    assert_true(json_object_object_get_ex(resp, "patch", &p));
    unsigned char *raw = NULL;
    assert_int_equal(gq_base64_decode(json_object_get_string(p),
                                      (size_t)json_object_get_string_len(p), &raw, patch_len),
                     GQ_OK);
    json_object_put(doc);
    return (char *)raw;
}

/* The texts these helpers build: far above the 3 MiB a review may be, so a
 * test can build one over the limit. */
#define AT_TEXT_MAX ((size_t)64 << 20)

char *at_large_pod(const char *ns, size_t n_ctrs, const char *last_limits)
{
    gq_buf b;
    gq_buf_init(&b, AT_TEXT_MAX);
    gq_buf_printf(&b,
                  "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                  "\"big\",\"namespace\":\"%s\"},\"spec\":{\"containers\":[",
                  ns);
    for (size_t i = 0; i < n_ctrs; i++) {
        gq_buf_printf(&b,
                      "%s{\"name\":\"c%zu\",\"image\":\"registry.example/app:1\","
                      "\"env\":[",
                      i ? "," : "", i);
        for (int e = 0; e < 8; e++)
            gq_buf_printf(&b, "%s{\"name\":\"VAR_%d\",\"value\":\"value-%zu-%d\"}", e ? "," : "", e,
                          i, e);
        gq_buf_puts(&b, "],\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"},"
                        "{\"name\":\"cache\",\"mountPath\":\"/cache\"}],\"ports\":[{"
                        "\"containerPort\":8080,\"protocol\":\"TCP\"}],\"readinessProbe\":{"
                        "\"httpGet\":{\"path\":\"/healthz\",\"port\":8080}},"
                        "\"resources\":{\"limits\":{\"cpu\":\"100m\",\"memory\":\"64Mi\"");
        if (last_limits && i + 1 == n_ctrs) {
            gq_buf_puts(&b, ",");
            gq_buf_puts(&b, last_limits);
        }
        gq_buf_puts(&b, "}}}");
    }
    gq_buf_puts(&b, "]}}");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(gq_buf_finish(&b, &text, &len), GQ_OK);
    return text;
}

char *at_pod_create_review(const char *uid, const char *ns, const char *pod)
{
    gq_buf b;
    gq_buf_init(&b, AT_TEXT_MAX);
    gq_buf_printf(&b,
                  "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                  "\"request\":{\"uid\":\"%s\",\"kind\":{\"group\":\"\",\"version\":"
                  "\"v1\",\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":"
                  "\"v1\",\"resource\":\"pods\"},",
                  uid);
    gq_buf_printf(&b,
                  "\"namespace\":\"%s\",\"operation\":\"CREATE\",\"userInfo\":{"
                  "\"username\":\"alice\"},\"object\":",
                  ns);
    gq_buf_puts(&b, pod);
    gq_buf_puts(&b, ",\"oldObject\":null,\"dryRun\":false}}");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(gq_buf_finish(&b, &text, &len), GQ_OK);
    return text;
}
