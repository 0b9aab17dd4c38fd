/* /mutate as the HTTP layer sees it, without sockets: wh_mutate_handle
 * through http_server_dispatch (routing, content type, size checks and the
 * handler), with a real audit file, a metrics registry and a fake
 * GPULimitRange source. Every answer is checked exactly: HTTP status, body,
 * counters and the audit record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/admission_testutil.h"
#include "webhook/audit.h"
#include "quota/config.h"
#include "quota/jsonpatch.h"
#include "common/jsonutil.h"
#include "webhook/metrics.h"
#include "webhook/mutate_http.h"
#include "http/server.h"

/* A fake GPULimitRange source: answers `answer` (JSON text, parsed per
 * call) or fails with `fail`, and counts calls. */
typedef struct fake_source {
    const char *answer; /* NULL: answers NULL (no limit ranges) */
    gq_code fail;
    unsigned calls;
    char last_ns[64];
} fake_source;

/* GPULimitRanges only: no quotas. */
static gq_code fake_list(void *ctx, wh_list_kind kind, const char *ns, json_object **out,
                         gq_err *err)
{
    fake_source *f = ctx;
    if (kind != WH_LIST_LIMIT_RANGES) {
        *out = NULL;
        return GQ_OK;
    }
    f->calls++;
    snprintf(f->last_ns, sizeof(f->last_ns), "%s", ns);
    if (f->fail)
        return gq_err_set(err, f->fail, "cache of GPULimitRanges not synced");
    *out = NULL;
    if (f->answer && gq_json_parse(f->answer, strlen(f->answer), 0, out, err))
        fail_msg("bad fake answer");
    return GQ_OK;
}

typedef struct env {
    char dir[64], path[96];
    gq_config *cfg;
    http_metrics *registry;
    wh_metrics *metrics;
    wh_audit *audit;
    http_server *srv;
    wh_mutate_ctx mc;
    fake_source src;
    wh_store store; /* its limit ranges from src */
} env;

static int setup(void **state)
{
    env *e = calloc(1, sizeof(*e));
    gq_err err;
    snprintf(e->dir, sizeof(e->dir), "/tmp/gq-mutate-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->path, sizeof(e->path), "%s/audit.log", e->dir);
    gq_audit_config ac = {.path = e->path};
    assert_int_equal(gq_config_default(&e->cfg, &err), GQ_OK);
    assert_int_equal(http_metrics_new("t", &e->registry), GQ_OK);
    assert_int_equal(wh_metrics_new(e->registry, &e->metrics), GQ_OK);
    assert_int_equal(wh_audit_open(&ac, &e->audit, &err), GQ_OK);
    http_server_options so = {
        .listen = "127.0.0.1:0", .insecure_plain_http = true, .metrics = e->registry};
    assert_int_equal(http_server_new(&so, &e->srv, &err), GQ_OK);
    e->store = (wh_store){.ctx = &e->src, .list = fake_list};
    e->mc = (wh_mutate_ctx){
        .cfg = e->cfg, .store = &e->store, .audit = e->audit, .metrics = e->metrics};
    assert_int_equal(http_server_add_handler(e->srv, "/mutate", HTTP_ROUTE_POST_JSON,
                                             wh_mutate_handle, &e->mc, &err),
                     GQ_OK);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env *e = *state;
    http_server_free(e->srv);
    wh_audit_close(e->audit);
    wh_metrics_free(e->metrics);
    http_metrics_free(e->registry);
    gq_config_free(e->cfg);
    unlink(e->path);
    rmdir(e->dir);
    free(e);
    return 0;
}

/* POST body to /mutate; resp must be disposed by the caller. */
static void post(env *e, const char *body, const char *content_type, http_response *resp)
{
    http_request req = {.method = "POST",
                        .path = "/mutate",
                        .timeout = "10s",
                        .content_type = content_type,
                        .body = body,
                        .body_len = strlen(body),
                        .remote_addr = "127.0.0.1:1"};
    http_response_init(resp);
    http_server_dispatch(e->srv, &req, resp);
}

/* The fixture with a JSON Patch applied ("" = as is), as compact text. */
static char *fixture(const char *variant)
{
    json_object *fx = at_load_json("admissionreview-pod-create.json"), *doc = fx;
    gq_err err;
    if (variant[0] && gq_patch_apply_text(fx, variant, strlen(variant), &doc, &err))
        fail_msg("variant: %s", err.msg);
    char *text = NULL;
    size_t len;
    assert_int_equal(gq_json_to_text(doc, &text, &len), GQ_OK);
    if (doc != fx)
        json_object_put(doc);
    json_object_put(fx);
    return text;
}

/* The audit file's lines so far (each a JSON object); caller puts. */
static json_object *audit_lines(env *e)
{
    size_t len = 0;
    FILE *f = fopen(e->path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    len = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    json_object *arr = json_object_new_array();
    for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl); /* whole lines only */
        json_object *o = NULL;
        gq_err err;
        assert_int_equal(gq_json_parse(line, (size_t)(nl - line), 0, &o, &err), GQ_OK);
        json_object_array_add(arr, o);
    }
    free(buf);
    return arr;
}

static const char *str_at(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v)
        return NULL;
    return json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                    : gq_json_compact(v);
}

static bool metrics_has(env *e, const char *line)
{
    char *text = NULL;
    size_t len;
    assert_int_equal(http_metrics_render(e->registry, &text, &len), GQ_OK);
    bool found = strstr(text, line) != NULL;
    free(text);
    return found;
}

#define UID "b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64"
#define HALF_GPU                                                                                   \
    "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"          \
    "nvidia.com~1gpu\",\"value\":\"0.5\"},{\"op\":\"replace\",\"path\":\"/request/object/spec/"    \
    "containers/0/resources/requests/nvidia.com~1gpu\",\"value\":\"0.5\"}]"

static void allowed_with_patch(void **state)
{
    env *e = *state;
    char *body = fixture(HALF_GPU);
    http_response resp;
    post(e, body, "application/json; charset=utf-8", &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.content_type, "application/json");
    assert_int_equal(resp.body_len, strlen(resp.body));
    /* The answer is exactly the decision's encoding. */
    assert_non_null(strstr(resp.body, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
                                      "\"AdmissionReview\",\"response\":{\"uid\":\"" UID
                                      "\",\"allowed\":true,\"patchType\":\"JSONPatch\""));
    assert_non_null(strstr(resp.body, "\"warnings\":[\"container trainer: nvidia.com/gpu 0.5 on "
                                      "h100-80gb -> aliyun.com/gpu-mem 40\"]"));
    size_t plen = 0;
    char *patch = at_response_patch(resp.body, resp.body_len, &plen);
    assert_non_null(strstr(patch, "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/"
                                  "aliyun.com~1gpu-mem\",\"value\":\"40\"}"));
    free(patch);
    http_response_dispose(&resp);
    free(body);
    /* GPULimitRanges were asked for the request's namespace. */
    assert_int_equal(e->src.calls, 1);
    assert_string_equal(e->src.last_ns, "ml-research");
    assert_true(metrics_has(e, "gpuquota_admission_requests_total{webhook=\"mutate\","
                               "operation=\"CREATE\",decision=\"allowed\"} 1\n"));
    assert_true(
        metrics_has(e, "gpuquota_admission_duration_seconds_count{webhook=\"mutate\"} 1\n"));
    /* One audit record, fields as docs/audit.md says. */
    json_object *lines = audit_lines(e);
    assert_int_equal(json_object_array_length(lines), 1);
    json_object *rec = json_object_array_get_idx(lines, 0);
    assert_string_equal(str_at(rec, "uid"), UID);
    assert_string_equal(str_at(rec, "webhook"), "mutate");
    assert_string_equal(str_at(rec, "operation"), "CREATE");
    assert_string_equal(str_at(rec, "namespace"), "ml-research");
    assert_string_equal(str_at(rec, "name"), "llm-finetune-0-");
    assert_string_equal(str_at(rec, "user"), "system:serviceaccount:kube-system:job-controller");
    assert_string_equal(str_at(rec, "dryRun"), "false");
    assert_string_equal(str_at(rec, "decision"), "allowed");
    assert_null(str_at(rec, "reason"));
    assert_string_equal(str_at(rec, "request"), "{\"trainer\":{\"nvidia.com/gpu\":\"0.5\"}}");
    assert_string_equal(str_at(rec, "rewrite"),
                        "{\"containers\":{\"trainer\":{\"aliyun.com/gpu-mem\":\"40\"}},"
                        "\"operations\":9}");
    assert_string_equal(str_at(rec, "charge"),
                        "{\"gpu-memory\":\"40Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\"}");
    assert_null(str_at(rec, "quotas"));
    assert_non_null(str_at(rec, "latencyMs"));
    json_object_put(lines);
    assert_int_equal(wh_audit_records(e->audit), 1);
}

static void denied_is_200_with_403_status(void **state)
{
    env *e = *state;
    char *body = fixture("[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/"
                         "resources/limits/nvidia.com~1gpu\",\"value\":\"1.5\"},{\"op\":"
                         "\"remove\",\"path\":\"/request/object/spec/containers/0/resources/"
                         "requests/nvidia.com~1gpu\"}]");
    http_response resp;
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(
        resp.body,
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{"
        "\"uid\":\"" UID "\",\"allowed\":false,\"status\":{\"code\":403,\"reason\":\"Forbidden\","
        "\"message\":\"container \\\"trainer\\\": nvidia.com/gpu \\\"1.5\\\" is not valid: a GPU "
        "fraction must be in (0, 1] (for example \\\"0.5\\\" or \\\"500m\\\"); ask for whole GPUs "
        "as an integer\"}}}");
    http_response_dispose(&resp);
    free(body);
    assert_true(metrics_has(e, "gpuquota_admission_requests_total{webhook=\"mutate\","
                               "operation=\"CREATE\",decision=\"denied\"} 1\n"));
    json_object *lines = audit_lines(e);
    assert_int_equal(json_object_array_length(lines), 1);
    json_object *rec = json_object_array_get_idx(lines, 0);
    assert_string_equal(str_at(rec, "decision"), "denied");
    assert_non_null(strstr(str_at(rec, "reason"), "nvidia.com/gpu \"1.5\" is not valid"));
    assert_null(str_at(rec, "request"));
    assert_null(str_at(rec, "rewrite"));
    assert_null(str_at(rec, "charge"));
    json_object_put(lines);
}

static void untouched_objects(void **state)
{
    env *e = *state;
    static const char *const variants[] = {
        /* CPU-only pod: a decision without GPU fields */
        "[{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
        "nvidia.com~1gpu\"},{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/"
        "resources/requests/nvidia.com~1gpu\"}]",
        /* not a pod: GPULimitRanges are not even looked up */
        "[{\"op\":\"replace\",\"path\":\"/request/resource/resource\",\"value\":\"services\"},"
        "{\"op\":\"replace\",\"path\":\"/request/kind/kind\",\"value\":\"Service\"}]",
        /* exempt namespace */
        "[{\"op\":\"replace\",\"path\":\"/request/namespace\",\"value\":\"kube-system\"}]",
    };
    /* None of them asks for a GPU: the GPULimitRanges are never read. */
    static const unsigned calls[] = {0, 0, 0};
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        char *body = fixture(variants[i]);
        http_response resp;
        post(e, body, "application/json", &resp);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
                                       "\"AdmissionReview\",\"response\":{\"uid\":\"" UID
                                       "\",\"allowed\":true}}");
        http_response_dispose(&resp);
        free(body);
        assert_int_equal(e->src.calls, calls[i]);
    }
    json_object *lines = audit_lines(e);
    assert_int_equal(json_object_array_length(lines), 3);
    for (size_t i = 0; i < 3; i++) {
        json_object *rec = json_object_array_get_idx(lines, i);
        assert_string_equal(str_at(rec, "decision"), "allowed");
        assert_null(str_at(rec, "request"));
        assert_null(str_at(rec, "rewrite"));
        assert_null(str_at(rec, "charge"));
    }
    json_object_put(lines);
}

static void bad_bodies_are_400(void **state)
{
    env *e = *state;
    char deep[300];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 99);
    deep[299] = '\0';
    static const struct {
        const char *variant; /* applied to the fixture; NULL: raw is the body */
        const char *raw;
        const char *message;
    } cases[] = {
        {NULL, "{\"apiVersion\":", NULL},
        {NULL, "", NULL},
        {NULL, NULL, NULL}, /* deep nesting, below */
        {"[{\"op\":\"remove\",\"path\":\"/request/uid\"}]", NULL,
         "request.uid is missing or empty"},
        {"[{\"op\":\"replace\",\"path\":\"/kind\",\"value\":\"Pod\"}]", NULL,
         "kind \\\"Pod\\\" is not AdmissionReview"},
        {"[{\"op\":\"replace\",\"path\":\"/request/operation\",\"value\":\"PATCH\"}]", NULL,
         "request.operation \\\"PATCH\\\" is not CREATE, UPDATE, DELETE or CONNECT"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = cases[i].variant ? fixture(cases[i].variant)
                                      : strdup(cases[i].raw ? cases[i].raw : deep);
        http_response resp;
        post(e, body, "application/json", &resp);
        assert_int_equal(resp.status, 400);
        assert_non_null(strstr(resp.body, "{\"code\":400,\"message\":\""));
        if (cases[i].message) {
            char want[256];
            snprintf(want, sizeof(want), "{\"code\":400,\"message\":\"%s\"}", cases[i].message);
            assert_string_equal(resp.body, want);
        }
        http_response_dispose(&resp);
        free(body);
    }
    /* Counted as errors without an operation; nothing to audit (no uid). */
    assert_true(metrics_has(e, "gpuquota_admission_requests_total{webhook=\"mutate\","
                               "operation=\"OTHER\",decision=\"error\"} 6\n"));
    assert_true(metrics_has(e, "gpuquota_http_errors_total{code=\"400\"} 6\n"));
    assert_int_equal(wh_audit_records(e->audit), 0);
    assert_int_equal(e->src.calls, 0);
}

/* The memory of decoded reviews (--max-decoded-memory): a review whose tree
 * alone would pass the per-review cap is denied with the reason, one that
 * finds the shared budget taken by reviews in flight gets 503 with
 * Retry-After, and each answered review gives back what it took. */
static void decoded_memory_bounded(void **state)
{
    env *e = *state;
    gq_json_budget b = {.cap = 4u << 20};
    e->mc.limits = (wh_review_limits){&b, 4096};
    char *body = fixture("");
    http_response resp;
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200); /* denied as a review, for the user to read */
    assert_non_null(strstr(resp.body, "\"allowed\":false"));
    assert_non_null(strstr(resp.body, "\"uid\":\"b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64\""));
    assert_non_null(strstr(resp.body, "gpuquota cannot decide this Pod: the JSON decodes to more "
                                      "than 4096 bytes of objects"));
    http_response_dispose(&resp);
    assert_int_equal(atomic_load(&b.used), 0);

    e->mc.limits.max_tree = 2u << 20;
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    http_response_dispose(&resp);
    assert_int_equal(atomic_load(&b.used), 0); /* given back with the request */

    atomic_store(&b.used, b.cap - 1024); /* reviews in flight hold nearly all */
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 503);
    assert_non_null(strstr(resp.body, "decoded requests in flight would hold more than 4194304"));
    bool retry = false;
    for (size_t i = 0; i < resp.n_headers; i++)
        retry |=
            !strcmp(resp.headers[i].name, "Retry-After") && !strcmp(resp.headers[i].value, "1");
    assert_true(retry);
    http_response_dispose(&resp);
    assert_int_equal(atomic_load(&b.used), b.cap - 1024);
    e->mc.limits = (wh_review_limits){NULL, 0};
    free(body);
}

static void routing_checks_before_the_handler(void **state)
{
    env *e = *state;
    char *body = fixture("");
    http_response resp;
    post(e, body, "text/plain", &resp);
    assert_int_equal(resp.status, 415);
    http_response_dispose(&resp);
    post(e, body, NULL, &resp);
    assert_int_equal(resp.status, 415);
    http_response_dispose(&resp);
    http_request get = {.method = "GET", .path = "/mutate", .body = "", .remote_addr = ""};
    http_response_init(&resp);
    http_server_dispatch(e->srv, &get, &resp);
    assert_int_equal(resp.status, 405);
    http_response_dispose(&resp);
    free(body);
    assert_int_equal(wh_audit_records(e->audit), 0);
}

static void limit_range_default_from_source(void **state)
{
    env *e = *state;
    e->src.answer = "[{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPULimitRange\","
                    "\"metadata\":{\"name\":\"gpu-limits\",\"namespace\":\"ml-research\"},"
                    "\"spec\":{\"limits\":[{\"type\":\"Container\",\"default\":{\"gpu-memory\":"
                    "\"8Gi\"}}]}}]";
    char *body = fixture("[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/"
                         "resources/limits/nvidia.com~1gpu\",\"value\":\"1\"},{\"op\":\"replace\","
                         "\"path\":\"/request/object/spec/containers/0/resources/requests/"
                         "nvidia.com~1gpu\",\"value\":\"1\"}]");
    http_response resp;
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    assert_non_null(strstr(resp.body, "\"gpu-limit-range\":\"gpu-limits\""));
    assert_non_null(strstr(resp.body, "\"charged\":\"gpu-memory=8Gi,gpus=0,gpu-pods=1\""));
    http_response_dispose(&resp);
    free(body);
    json_object *lines = audit_lines(e);
    json_object *rec = json_object_array_get_idx(lines, 0);
    assert_string_equal(str_at(rec, "request"), "{\"trainer\":{\"nvidia.com/gpu\":\"1\"}}");
    assert_string_equal(str_at(rec, "charge"),
                        "{\"gpu-memory\":\"8Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\"}");
    json_object_put(lines);
}

static void source_errors_are_500(void **state)
{
    env *e = *state;
    char *body = fixture("");
    http_response resp;
    /* The source fails: fail closed, with the uid in the log line. */
    e->src.fail = GQ_EIO;
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 500);
    assert_string_equal(resp.body, "{\"code\":500,\"message\":\"cannot read the GPULimitRanges of "
                                   "ml-research: cache of GPULimitRanges not synced\"}");
    assert_string_equal(resp.uid, UID);
    http_response_dispose(&resp);
    /* A GPULimitRange that does not parse is a policy we cannot apply. */
    e->src.fail = GQ_OK;
    e->src.answer = "[{\"metadata\":{\"name\":\"x\",\"namespace\":\"ml-research\"},\"spec\":{"
                    "\"limits\":[{\"type\":\"Node\"}]}}]";
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 500);
    assert_non_null(strstr(resp.body, "GPULimitRange 0 of namespace ml-research: "));
    http_response_dispose(&resp);
    /* A source answering something else than a list. */
    e->src.answer = "{}";
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 500);
    assert_string_equal(resp.body, "{\"code\":500,\"message\":\"GPULimitRanges of ml-research: "
                                   "not a list\"}");
    http_response_dispose(&resp);
    free(body);
    assert_true(metrics_has(e, "gpuquota_admission_requests_total{webhook=\"mutate\","
                               "operation=\"CREATE\",decision=\"error\"} 3\n"));
    json_object *lines = audit_lines(e);
    assert_int_equal(json_object_array_length(lines), 3);
    json_object *rec = json_object_array_get_idx(lines, 0);
    assert_string_equal(str_at(rec, "decision"), "error");
    assert_string_equal(str_at(rec, "reason"),
                        "cannot read the GPULimitRanges of ml-research: cache of GPULimitRanges "
                        "not synced");
    assert_string_equal(str_at(rec, "uid"), UID);
    json_object_put(lines);
}

static void no_source_no_limit_ranges(void **state)
{
    env *e = *state;
    e->mc.store = NULL;
    e->mc.audit = NULL; /* no audit: still answered */
    char *body = fixture(HALF_GPU);
    http_response resp;
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    assert_non_null(strstr(resp.body, "\"allowed\":true"));
    http_response_dispose(&resp);
    free(body);
    assert_int_equal(e->src.calls, 0);
    gq_limit_range **lrs = (gq_limit_range **)0x1;
    size_t n = 7;
    gq_err err;
    assert_int_equal(wh_limit_ranges_fetch(NULL, "ns", &lrs, &n, &err), GQ_OK);
    assert_null(lrs);
    assert_int_equal(n, 0);
    wh_limit_ranges_free(NULL, 0);
}

/* Pods that ask for no GPU pass whatever their size and whatever the state
 * of the policy cache; a GPU pod over a cap is denied with the cap named. */
static void no_gpu_no_limits(void **state)
{
    env *e = *state;
    http_response resp;
    /* The GPULimitRange cache is down: a CPU-only pod is not held up. */
    e->src.fail = GQ_EIO;
    char *body =
        fixture("[{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/"
                "resources/limits/nvidia.com~1gpu\"},{\"op\":\"remove\",\"path\":"
                "\"/request/object/spec/containers/0/resources/requests/nvidia.com~1gpu\"}]");
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    assert_non_null(strstr(resp.body, "\"allowed\":true}}"));
    http_response_dispose(&resp);
    free(body);
    e->src.fail = GQ_OK;
    /* 3600 heavy containers (about 2.4 MiB): allowed untouched. */
    char *pod = at_large_pod("ml-research", 3600, NULL);
    body = at_pod_create_review("big-1", "ml-research", pod);
    free(pod);
    assert_true(strlen(body) > 2 * 1024 * 1024 && strlen(body) < 3 * 1024 * 1024);
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.body, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
                                   "\"AdmissionReview\",\"response\":{\"uid\":\"big-1\","
                                   "\"allowed\":true}}");
    http_response_dispose(&resp);
    free(body);
    /* The same pod asking for a GPU in its last container is over the cap. */
    pod = at_large_pod("ml-research", 3600, "\"gpuquota.io/gpu-memory\":\"1Gi\"");
    body = at_pod_create_review("big-2", "ml-research", pod);
    free(pod);
    post(e, body, "application/json", &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.body,
                        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                        "\"response\":{\"uid\":\"big-2\",\"allowed\":false,\"status\":{\"code\":"
                        "403,\"reason\":\"Forbidden\",\"message\":\"container \\\"c3599\\\" asks "
                        "for a GPU and the pod has 3600 containers (app and init); a pod that uses "
                        "a GPU may have at most 256\"}}}");
    http_response_dispose(&resp);
    free(body);
    assert_int_equal(e->src.calls, 0);
}

static void info_of_the_decision(void **state)
{
    env *e = *state;
    char *body = fixture(HALF_GPU);
    wh_review_request rq;
    wh_review_response rs;
    wh_mutate_info info;
    gq_err err;
    wh_mutate_info_init(&info);
    assert_int_equal(wh_review_decode(body, strlen(body), &rq, &err), GQ_OK);
    assert_true(wh_mutate_applies(e->cfg, &rq));
    assert_int_equal(wh_mutate_review_info(e->cfg, &rq, NULL, 0, &rs, &info, &err), GQ_OK);
    assert_true(info.has_charge);
    assert_int_equal(info.charge.v[GQ_KEY_GPU_MEMORY], (int64_t)40 << 30);
    assert_int_equal(info.charge.v[GQ_KEY_GPUS], 0);
    assert_int_equal(info.charge.v[GQ_KEY_GPU_PODS], 1);
    assert_string_equal(gq_json_compact(info.request),
                        "{\"trainer\":{\"nvidia.com/gpu\":\"0.5\"}}");
    wh_review_response_dispose(&rs);
    /* Filling it again replaces what it held (no leak under LSan). */
    assert_int_equal(wh_mutate_review_info(e->cfg, &rq, NULL, 0, &rs, &info, &err), GQ_OK);
    wh_review_response_dispose(&rs);
    wh_mutate_info_dispose(&info);
    wh_mutate_info_dispose(&info);
    wh_mutate_info_dispose(NULL);
    wh_review_request_dispose(&rq);
    free(body);
}

/* The lean decode /mutate uses drops what no decision reads, keeps what
 * they do, and leads to the same answer as the full decode. */
static void lean_decode_same_answer(void **state)
{
    env *e = *state;
    /* HALF_GPU with the managed label and its record set by kubectl, as a
     * tenant would forge it: only managedFields says it was not us. */
    static const char forged[] =
        "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
        "nvidia.com~1gpu\",\"value\":\"0.5\"},{\"op\":\"replace\",\"path\":\"/request/object/"
        "spec/containers/0/resources/requests/nvidia.com~1gpu\",\"value\":\"0.5\"},"
        "{\"op\":\"add\",\"path\":\"/request/object/metadata/labels/gpuquota.io~1managed\","
        "\"value\":\"true\"},{\"op\":\"add\",\"path\":\"/request/object/metadata/"
        "managedFields/-\",\"value\":{\"manager\":\"kubectl\",\"operation\":\"Update\","
        "\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{"
        "\"f:labels\":{\"f:gpuquota.io/managed\":{}}}}}}]";
    static const char *const variants[] = {"", HALF_GPU, forged};
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        char *body = fixture(variants[i]);
        wh_review_request full, lean;
        gq_err err;
        assert_int_equal(wh_review_decode(body, strlen(body), &full, &err), GQ_OK);
        assert_int_equal(wh_review_decode_lean(body, strlen(body), &lean, &err), GQ_OK);
        json_object *meta = NULL, *v = NULL, *spec = NULL, *ctr = NULL, *user = NULL;
        assert_true(json_object_object_get_ex(lean.object, "metadata", &meta));
        /* of managedFields only who set labels and annotations is kept */
        assert_true(json_object_object_get_ex(meta, "managedFields", &v));
        json_object *fields = json_object_object_get(json_object_array_get_idx(v, 0), "fieldsV1");
        assert_true(json_object_object_get_ex(fields, "f:metadata", &v));
        assert_true(json_object_object_get_ex(v, "f:labels", &v));
        assert_true(json_object_object_get_ex(v, "f:team", &v));
        v = json_object_object_get(fields, "f:metadata");
        assert_true(json_object_object_get_ex(v, "f:annotations", &v));
        v = json_object_object_get(fields, "f:metadata");
        assert_false(json_object_object_get_ex(v, "f:finalizers", &v));
        assert_false(json_object_object_get_ex(fields, "f:spec", &v));
        v = json_object_array_get_idx(json_object_object_get(meta, "managedFields"), 0);
        assert_false(json_object_object_get_ex(v, "manager", &v));
        /* /validate reads a ResourceClaim's owners and finalizers */
        assert_true(json_object_object_get_ex(meta, "ownerReferences", &v));
        assert_false(json_object_object_get_ex(json_object_object_get(lean.root, "request"),
                                               "requestKind", &v));
        assert_true(json_object_object_get_ex(meta, "labels", &v));
        assert_true(json_object_object_get_ex(meta, "annotations", &v));
        assert_true(json_object_object_get_ex(lean.object, "spec", &spec));
        assert_false(json_object_object_get_ex(spec, "volumes", &v));
        assert_false(json_object_object_get_ex(spec, "tolerations", &v));
        assert_false(json_object_object_get_ex(spec, "securityContext", &v));
        assert_true(json_object_object_get_ex(spec, "nodeSelector", &v));
        ctr = json_object_array_get_idx(json_object_object_get(spec, "containers"), 0);
        assert_false(json_object_object_get_ex(ctr, "env", &v));
        assert_false(json_object_object_get_ex(ctr, "volumeMounts", &v));
        assert_false(json_object_object_get_ex(ctr, "command", &v));
        assert_true(json_object_object_get_ex(ctr, "resources", &v));
        assert_true(json_object_object_get_ex(ctr, "name", &v));
        assert_true(json_object_object_get_ex(json_object_object_get(full.root, "request"),
                                              "userInfo", &user));
        assert_true(json_object_object_get_ex(user, "extra", &v));
        assert_string_equal(lean.username, full.username);
        assert_int_equal(lean.n_groups, 3);
        wh_review_response a, b;
        assert_int_equal(wh_mutate_review(e->cfg, &full, NULL, 0, &a, &err), GQ_OK);
        assert_int_equal(wh_mutate_review(e->cfg, &lean, NULL, 0, &b, &err), GQ_OK);
        char *ta = NULL, *tb = NULL;
        size_t na, nb;
        assert_int_equal(wh_review_encode(&a, &ta, &na), GQ_OK);
        assert_int_equal(wh_review_encode(&b, &tb, &nb), GQ_OK);
        assert_string_equal(ta, tb);
        free(ta);
        free(tb);
        wh_review_response_dispose(&a);
        wh_review_response_dispose(&b);
        wh_review_request_dispose(&full);
        wh_review_request_dispose(&lean);
        free(body);
    }
    /* Refused alike, with the same message. */
    static const char *const bad[] = {
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"object\":{\"metadata\":{\"managedFields\":[1e999]}}}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        wh_review_request r;
        gq_err e1, e2;
        assert_int_equal(wh_review_decode(bad[i], strlen(bad[i]), &r, &e1), GQ_EINVAL);
        assert_int_equal(wh_review_decode_lean(bad[i], strlen(bad[i]), &r, &e2), GQ_EINVAL);
        assert_string_equal(e1.msg, e2.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(allowed_with_patch, setup, teardown),
        cmocka_unit_test_setup_teardown(denied_is_200_with_403_status, setup, teardown),
        cmocka_unit_test_setup_teardown(untouched_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_bodies_are_400, setup, teardown),
        cmocka_unit_test_setup_teardown(decoded_memory_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(routing_checks_before_the_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(limit_range_default_from_source, setup, teardown),
        cmocka_unit_test_setup_teardown(source_errors_are_500, setup, teardown),
        cmocka_unit_test_setup_teardown(no_source_no_limit_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(no_gpu_no_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(info_of_the_decision, setup, teardown),
        cmocka_unit_test_setup_teardown(lean_decode_same_answer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
