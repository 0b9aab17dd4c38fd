/* The /validate decision through its seams: the HTTP handler, the audit
 * records and metrics it writes, options refused at construction, and the
 * in-memory store's errors. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/gq_log.h"

#include "validate_fixture.h"

/* ---- HTTP seam ------------------------------------------------------------------- */

static void test_handler(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"8Gi\"}", NULL);
    char pod[2048], body[8192];
    pod_json(pod, sizeof(pod), NS_A, "16Gi", NULL, NULL);
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
             "\"uid\":\"h1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
             "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
             "\"namespace\":\"team-a\",\"operation\":\"CREATE\",\"userInfo\":{\"username\":\"u\"},"
             "\"object\":%s}}",
             pod);
    http_request rq = {.method = "POST",
                       .path = "/validate",
                       .content_type = "application/json",
                       .body = body,
                       .body_len = strlen(body),
                       .remote_addr = ""};
    http_response rs;
    http_response_init(&rs);
    wh_validate_handle(f->v, &rq, &rs);
    assert_int_equal(rs.status, 200);
    json_object *o = json_tokener_parse(rs.body);
    assert_non_null(o);
    json_object *resp, *st, *v;
    assert_true(json_object_object_get_ex(o, "response", &resp));
    assert_true(json_object_object_get_ex(resp, "allowed", &v));
    assert_false(json_object_get_boolean(v));
    assert_string_equal(sget(resp, "uid"), "h1");
    assert_true(json_object_object_get_ex(resp, "status", &st));
    assert_true(json_object_object_get_ex(st, "code", &v));
    assert_int_equal(json_object_get_int(v), 403);
    assert_string_equal(sget(st, "reason"), "Forbidden");
    assert_string_equal(sget(st, "message"), "exceeded quota: q, requested: gpu-memory=16Gi, "
                                             "used: gpu-memory=0, limited: gpu-memory=8Gi");
    json_object_put(o);
    http_response_dispose(&rs);
    rq.body = "{\"kind\":\"AdmissionReview\"}";
    rq.body_len = strlen(rq.body);
    http_response_init(&rs);
    wh_validate_handle(f->v, &rq, &rs);
    assert_int_equal(rs.status, 400);
    http_response_dispose(&rs);
}

static void test_audit_and_metrics(void **state)
{
    fx *f = *state;
    char path[] = "/tmp/gq-validate-audit.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    gq_audit_config ac = {.path = path, .max_size = 1 << 20, .max_files = 1};
    wh_audit *audit = NULL;
    http_metrics *registry = NULL;
    wh_metrics *m = NULL;
    assert_int_equal(wh_audit_open(&ac, &audit, NULL), GQ_OK);
    assert_int_equal(http_metrics_new("test", &registry), GQ_OK);
    assert_int_equal(wh_metrics_new(registry, &m), GQ_OK);
    wh_validate_opts o = {.audit = audit, .metrics = m};
    fx_validator(f, &o);
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    assert_true(decide(f, "a1", NS_A, "16Gi").allowed);
    assert_false(decide(f, "a2", NS_A, "8Gi").allowed);
    assert_int_equal(wh_audit_records(audit), 2);
    char *text = NULL, buf[8192];
    size_t len = 0;
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    len = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[len] = '\0';
    fclose(fp);
    char *second = strchr(buf, '\n');
    assert_non_null(second);
    *second++ = '\0';
    assert_non_null(strstr(buf, "\"uid\":\"a1\""));
    assert_non_null(strstr(buf, "\"webhook\":\"validate\""));
    assert_non_null(strstr(buf, "\"decision\":\"allowed\""));
    assert_non_null(strstr(
        buf, "\"quotas\":[{\"kind\":\"GPUQuota\",\"namespace\":\"team-a\",\"name\":\"q\"}]"));
    assert_non_null(strstr(second, "\"decision\":\"denied\""));
    assert_non_null(strstr(second, "exceeded quota: q, requested: gpu-memory=8Gi"));
    assert_non_null(strstr(
        second, "\"quotas\":[{\"kind\":\"GPUQuota\",\"namespace\":\"team-a\",\"name\":\"q\"}]"));
    assert_int_equal(http_metrics_render(registry, &text, &len), GQ_OK);
    assert_non_null(strstr(text, "gpuquota_admission_requests_total{webhook=\"validate\","
                                 "operation=\"CREATE\",decision=\"allowed\"} 1"));
    assert_non_null(strstr(text, "gpuquota_admission_requests_total{webhook=\"validate\","
                                 "operation=\"CREATE\",decision=\"denied\"} 1"));
    assert_non_null(strstr(text, "gpuquota_quota_used{namespace=\"team-a\",quota=\"q\","
                                 "resource=\"gpu-memory\"} 17179869184"));
    free(text);
    wh_validator_free(f->v);
    f->v = NULL;
    wh_metrics_free(m);
    http_metrics_free(registry);
    wh_audit_close(audit);
    unlink(path);
}

static void test_bad_options(void **state)
{
    fx *f = *state;
    wh_validator *v = NULL;
    gq_err err;
    wh_validate_opts o = {.reservation_ttl_s = -1};
    assert_int_equal(wh_validator_new(f->cfg, &f->store, &o, &v, &err), GQ_EINVAL);
    wh_store empty;
    memset(&empty, 0, sizeof(empty));
    assert_int_equal(wh_validator_new(f->cfg, &empty, NULL, &v, &err), GQ_EINVAL);
    o = (wh_validate_opts){.n_trusted_users = WH_TRUSTED_USERS_MAX + 1, .trusted_users = NULL};
    const char *u[1] = {"x"};
    o.trusted_users = u;
    assert_int_equal(wh_validator_new(f->cfg, &f->store, &o, &v, &err), GQ_ELIMIT);
    assert_null(v);
    wh_validator_free(NULL);
}

static void test_memstore_errors(void **state)
{
    fx *f = *state;
    gq_err err;
    json_object *o = json_tokener_parse("{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"}}");
    assert_int_equal(wh_memstore_apply(f->ms, o, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "kind ConfigMap cannot be stored");
    json_object_put(o);
    o = json_tokener_parse("{\"kind\":\"GPUQuota\",\"metadata\":{\"name\":\"x\"}}");
    assert_int_equal(wh_memstore_apply(f->ms, o, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "GPUQuota x without metadata.namespace");
    json_object_put(o);
    o = json_tokener_parse("{\"kind\":\"Namespace\",\"metadata\":{}}");
    assert_int_equal(wh_memstore_apply(f->ms, o, &err), GQ_EINVAL);
    json_object_put(o);
    assert_int_equal(wh_memstore_get(f->ms, "GPUQuota", "a", "nope", &o, &err), GQ_ENOTFOUND);
    wh_memstore_free(NULL);
}

int main(void)
{
    gq_log_set_level(GQ_LOG_WARN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_handler),
        T(test_audit_and_metrics),
        T(test_bad_options),
        T(test_memstore_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
