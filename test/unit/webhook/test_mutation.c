/* The /mutate decision end to end without sockets: the shared fixture and
 * variants of it (made with the JSON Patch applier) go through decode ->
 * wh_mutate_review -> encode, and the answers are checked field by field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/admission_testutil.h"
#include "quota/config.h"
#include "quota/crd.h"
#include "quota/jsonpatch.h"
#include "quota/podcost.h"
#include "common/json_member.h"
#include "common/jsonutil.h"
#include "webhook/mutation.h"
#include "webhook/review.h"

static json_object *fixture(void)
{
    return at_load_json("admissionreview-pod-create.json");
}

/* Decode body (an AdmissionReview) and run it through the mutation under
 * cfg, with the limit ranges lrs, or reading through src when given;
 * *patched gets the object with the response's patch applied (NULL when
 * there is none). */
static void review(const gq_config *cfg, const char *body, const gq_limit_range *const *lrs,
                   size_t n_lrs, const wh_store *src, wh_review_response *resp,
                   json_object **patched)
{
    wh_review_request req;
    gq_err err;
    assert_int_equal(wh_review_decode(body, strlen(body), &req, &err), GQ_OK);
    gq_code rc = src ? wh_mutate_review_store(cfg, &req, src, resp, NULL, &err)
                     : wh_mutate_review(cfg, &req, lrs, n_lrs, resp, &err);
    if (rc)
        fail_msg("mutate: %s", err.msg);
    *patched = NULL;
    if (resp->patch && gq_patch_apply_text(req.object, resp->patch, resp->patch_len, patched, &err))
        fail_msg("the response's patch does not apply: %s", err.msg);
    wh_review_request_dispose(&req);
}

/* The fixture with a JSON Patch applied ("" = unchanged), through review. */
static void mutate(const gq_config *cfg, const char *variant, const gq_limit_range *const *lrs,
                   size_t n_lrs, wh_review_response *resp, json_object **patched)
{
    json_object *fx = fixture(), *doc = NULL;
    gq_err err;
    if (variant[0]) {
        if (gq_patch_apply_text(fx, variant, strlen(variant), &doc, &err))
            fail_msg("variant: %s", err.msg);
        json_object_put(fx);
    } else {
        doc = fx;
    }
    review(cfg, gq_json_compact(doc), lrs, n_lrs, NULL, resp, patched);
    json_object_put(doc);
}

static gq_config *config(void)
{
    gq_config *cfg = NULL;
    gq_err err;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    return cfg;
}

/* kube-apiserver reinvokes a webhook with a fresh request uid: on the pod the
 * first call patched, the second call must change nothing. */
static void reinvocation_with_fresh_uid_is_noop(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg, "", NULL, 0, &r, &patched);
    assert_non_null(patched);
    wh_review_response_dispose(&r);
    json_object *fx = fixture(), *req = NULL;
    assert_true(json_object_object_get_ex(fx, "request", &req));
    json_object_object_add(req, "object", patched);
    json_object_object_add(req, "uid", json_object_new_string("2d6c0a9e-reinvoked"));
    const char *body = gq_json_compact(fx);
    wh_review_request rq;
    gq_err err;
    assert_int_equal(wh_review_decode(body, strlen(body), &rq, &err), GQ_OK);
    assert_int_equal(wh_mutate_review(cfg, &rq, NULL, 0, &r, &err), GQ_OK);
    assert_true(r.allowed);
    assert_string_equal(r.uid, "2d6c0a9e-reinvoked");
    if (r.patch)
        fail_msg("reinvocation patched: %.*s", (int)r.patch_len, r.patch);
    wh_review_response_dispose(&r);
    wh_review_request_dispose(&rq);
    json_object_put(fx);
    gq_config_free(cfg);
}

static const char *audit(const wh_review_response *r, const char *key)
{
    for (size_t i = 0; i < r->n_audit; i++)
        if (!strcmp(r->audit_keys[i], key))
            return r->audit_values[i];
    return NULL;
}

static const char *at_str(json_object *v, const char *a, const char *b, const char *c)
{
    json_object *x = v;
    const char *keys[] = {a, b, c};
    for (size_t i = 0; i < 3 && keys[i] && x; i++)
        if (!json_object_object_get_ex(x, keys[i], &x))
            return NULL;
    return json_object_get_string(x);
}

/* A GPULimitRange NAME of the fixture's namespace with spec.limits LIMITS
 * (JSON text); caller frees. */
static gq_limit_range *limit_range(const char *name, const char *limits)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPULimitRange\",\"metadata\":"
             "{\"name\":\"%s\",\"namespace\":\"ml-research\"},\"spec\":{\"limits\":%s}}",
             name, limits);
    json_object *lrj = NULL;
    gq_limit_range *lr = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(text, strlen(text), 0, &lrj, &err), GQ_OK);
    assert_int_equal(gq_limit_range_parse(lrj, &lr, &err), GQ_OK);
    json_object_put(lrj);
    return lr;
}

static void fixture_whole_gpus(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg, "", NULL, 0, &r, &patched);
    assert_true(r.allowed);
    assert_string_equal(r.uid, "b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64");
    assert_non_null(patched);
    assert_int_equal(r.n_warnings, 0);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=640Gi,gpus=8,gpu-pods=1");
    assert_string_equal(audit(&r, "backend"), "aliyun");
    assert_string_equal(audit(&r, "gpu-model"), "h100-80gb");
    assert_string_equal(at_str(patched, "metadata", "labels", "gpuquota.io/managed"), "true");
    /* no reservation annotation: the request uid would change with every
     * call, and /validate keys charges by the pod's uid */
    assert_null(at_str(patched, "metadata", "annotations", "gpuquota.io/reservation"));
    /* the response as kube-apiserver receives it */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(wh_review_encode(&r, &text, &len), GQ_OK);
    size_t rlen = 0;
    char *raw = at_response_patch(text, len, &rlen);
    assert_int_equal(rlen, r.patch_len);
    assert_memory_equal(raw, r.patch, rlen);
    free(raw);
    free(text);
    json_object_put(patched);
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

#define HALF_GPU                                                                                   \
    "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"          \
    "nvidia.com~1gpu\",\"value\":\"0.5\"},{\"op\":\"replace\",\"path\":\"/request/object/spec/"    \
    "containers/0/resources/requests/nvidia.com~1gpu\",\"value\":\"0.5\"}"

static void fraction_rewritten(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg, HALF_GPU "]", NULL, 0, &r, &patched);
    assert_true(r.allowed);
    assert_int_equal(r.n_warnings, 1);
    assert_string_equal(
        r.warnings[0],
        "container trainer: nvidia.com/gpu 0.5 on h100-80gb -> aliyun.com/gpu-mem 40");
    json_object *res = NULL;
    json_object *ctr = json_object_array_get_idx(
        json_object_object_get(json_object_object_get(patched, "spec"), "containers"), 0);
    assert_true(json_object_object_get_ex(ctr, "resources", &res));
    assert_string_equal(gq_json_compact(res),
                        "{\"limits\":{\"cpu\":\"48\",\"memory\":\"512Gi\",\"aliyun.com/gpu-mem\":"
                        "\"40\"},\"requests\":{\"cpu\":\"32\",\"memory\":\"480Gi\","
                        "\"aliyun.com/gpu-mem\":\"40\"}}");
    assert_string_equal(audit(&r, "charged"), "gpu-memory=40Gi,gpus=0,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

static void invalid_request_denied(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg,
           "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
           "nvidia.com~1gpu\",\"value\":\"1.5\"}]",
           NULL, 0, &r, &patched);
    assert_false(r.allowed);
    assert_int_equal(r.code, 403);
    assert_string_equal(r.reason, "Forbidden");
    assert_non_null(strstr(r.message, "trainer"));
    assert_non_null(strstr(r.message, "nvidia.com/gpu"));
    assert_non_null(strstr(r.message, "1.5"));
    assert_null(r.patch);
    assert_null(patched);
    assert_int_equal(r.n_audit, 0);
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

static void passed_through_unchanged(void **state)
{
    (void)state;
    static const char *const variants[] = {
        "[{\"op\":\"replace\",\"path\":\"/request/operation\",\"value\":\"UPDATE\"}]",
        "[{\"op\":\"replace\",\"path\":\"/request/namespace\",\"value\":\"kube-system\"}]",
        "[{\"op\":\"add\",\"path\":\"/request/subResource\",\"value\":\"status\"}]",
        "[{\"op\":\"replace\",\"path\":\"/request/resource/resource\",\"value\":\"deployments\"},"
        "{\"op\":\"replace\",\"path\":\"/request/kind/kind\",\"value\":\"Deployment\"}]",
        /* CPU-only pod */
        "[{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
        "nvidia.com~1gpu\"},{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/"
        "resources/requests/nvidia.com~1gpu\"}]",
        /* nvidia.com/gpu: 0 (a chart default) asks for no GPU: no patch, no label */
        "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
        "nvidia.com~1gpu\",\"value\":\"0\"},{\"op\":\"replace\",\"path\":\"/request/object/"
        "spec/containers/0/resources/requests/nvidia.com~1gpu\",\"value\":0}]",
        /* so do aliyun.com/gpu-mem: 0 and a zero request annotation */
        "[{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
        "nvidia.com~1gpu\"},{\"op\":\"remove\",\"path\":\"/request/object/spec/containers/0/"
        "resources/requests/nvidia.com~1gpu\"},{\"op\":\"add\",\"path\":\"/request/object/spec/"
        "containers/0/resources/limits/aliyun.com~1gpu-mem\",\"value\":\"0\"},{\"op\":\"add\","
        "\"path\":\"/request/object/metadata/annotations/gpuquota.io~1gpu-memory\",\"value\":"
        "\"0\"}]",
    };
    gq_config *cfg = config();
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        wh_review_response r;
        json_object *patched = NULL;
        mutate(cfg, variants[i], NULL, 0, &r, &patched);
        assert_true(r.allowed);
        assert_null(r.patch);
        assert_int_equal(r.n_warnings, 0);
        assert_int_equal(r.n_audit, 0);
        wh_review_response_dispose(&r);
    }
    gq_config_free(cfg);
}

static void missing_object_bad_request(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg, "[{\"op\":\"replace\",\"path\":\"/request/object\",\"value\":null}]", NULL, 0, &r,
           &patched);
    assert_false(r.allowed);
    assert_int_equal(r.code, 400);
    assert_string_equal(r.reason, "BadRequest");
    assert_string_equal(r.message, "request.object is missing");
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

static void limit_range_default_applied(void **state)
{
    (void)state;
    gq_limit_range *lr = limit_range("gpu-limits", "[{\"type\":\"Container\",\"default\":{"
                                                   "\"gpu-memory\":\"8Gi\"}}]");
    const gq_limit_range *lrs[] = {lr};
    gq_config *cfg = config();
    cfg->backend = GQ_BACKEND_HAMI;
    /* One whole GPU becomes one 8Gi slice. */
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg,
           "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
           "nvidia.com~1gpu\",\"value\":\"1\"},{\"op\":\"replace\",\"path\":\"/request/object/spec/"
           "containers/0/resources/requests/nvidia.com~1gpu\",\"value\":\"1\"}]",
           lrs, 1, &r, &patched);
    assert_true(r.allowed);
    assert_string_equal(at_str(patched, "metadata", "annotations", "gpuquota.io/charged"),
                        "gpu-memory=8Gi,gpus=0,gpu-pods=1");
    /* Too long with the GPULimitRange name: that goes to the audit instead. */
    assert_string_equal(r.warnings[0], "container trainer: nvidia.com/gpu 1 (default 8Gi) on "
                                       "h100-80gb -> nvidia.com/gpu 1, nvidia.com/gpumem 8192");
    assert_string_equal(audit(&r, "gpu-limit-range"), "gpu-limits");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    /* pod annotation gpuquota.io/exclusive keeps it whole */
    mutate(cfg,
           "[{\"op\":\"replace\",\"path\":\"/request/object/spec/containers/0/resources/limits/"
           "nvidia.com~1gpu\",\"value\":\"1\"},{\"op\":\"replace\",\"path\":\"/request/object/spec/"
           "containers/0/resources/requests/nvidia.com~1gpu\",\"value\":\"1\"},{\"op\":\"add\","
           "\"path\":\"/request/object/metadata/annotations/gpuquota.io~1exclusive\",\"value\":"
           "\"true\"}]",
           lrs, 1, &r, &patched);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=80Gi,gpus=1,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
    gq_limit_range_free(lr);
}

/* A GPU is never free: whole GPUs of no known model are charged as the
 * largest model the namespace may use, and the answer says so. */
static void unknown_model_whole_gpus_charged(void **state)
{
    (void)state;
    static const char *const unpinned =
        "[{\"op\":\"remove\",\"path\":\"/request/object/spec/nodeSelector/"
        "nvidia.com~1gpu.product\"}]";
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate(cfg, unpinned, NULL, 0, &r, &patched);
    assert_true(r.allowed);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=1128Gi,gpus=8,gpu-pods=1");
    assert_int_equal(r.n_warnings, 1);
    assert_string_equal(r.warnings[0], "container trainer: 8 whole GPU(s) of unknown model "
                                       "charged as h200 (141Gi each); pin one with "
                                       "gpuquota.io/gpu-model");
    assert_string_equal(at_str(patched, "metadata", "annotations", "gpuquota.io/charged"),
                        "gpu-memory=1128Gi,gpus=8,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    /* the namespace allows A100s only: the largest of those */
    gq_limit_range *lr = limit_range("models", "[{\"type\":\"Container\",\"allowedModels\":["
                                               "\"a100-40gb\",\"a100-80gb\"]}]");
    const gq_limit_range *lrs[] = {lr};
    mutate(cfg, unpinned, lrs, 1, &r, &patched);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=640Gi,gpus=8,gpu-pods=1");
    assert_string_equal(r.warnings[0], "container trainer: 8 whole GPU(s) of unknown model "
                                       "charged as a100-80gb (80Gi each); pin one with "
                                       "gpuquota.io/gpu-model");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    gq_limit_range_free(lr);
    gq_config_free(cfg);
}

/* Decide the pod CREATE of pod (JSON text) under cfg, reading through src
 * when given; *patched gets the pod with the answer's patch applied (NULL
 * when there is none). */
static void mutate_pod(const gq_config *cfg, const char *pod, const wh_store *src,
                       wh_review_response *resp, json_object **patched)
{
    char *body = at_pod_create_review("u-1", "team-a", pod);
    review(cfg, body, NULL, 0, src, resp, patched);
    free(body);
}

/* No gpuquota.io label or annotation its author wrote changes what a pod is
 * charged: gpuquota's records are replaced, and a second invocation on the
 * rewritten pod (whose history still names its author) changes nothing. */
static void author_records_replaced(void **state)
{
    (void)state;
    gq_config *cfg = config();
    cfg->backend = GQ_BACKEND_TIMESLICING;
    size_t len;
    char *pod = at_read_data("pods/forged-shared-requests.json", &len);
    wh_review_response r;
    json_object *patched = NULL;
    mutate_pod(cfg, pod, NULL, &r, &patched);
    free(pod);
    assert_true(r.allowed);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=320Gi,gpus=0,gpu-pods=1");
    assert_string_equal(at_str(patched, "metadata", "annotations", "gpuquota.io/gpu-requests"),
                        "{\"main\":{\"gpus\":4,\"memory\":\"80Gi\"}}");
    assert_string_equal(at_str(patched, "metadata", "annotations", "gpuquota.io/charged"),
                        "gpu-memory=320Gi,gpus=0,gpu-pods=1");
    wh_review_response_dispose(&r);
    /* reinvoked on what it made: nothing left to change */
    char *again = strdup(gq_json_compact(patched));
    json_object_put(patched);
    mutate_pod(cfg, again, NULL, &r, &patched);
    free(again);
    assert_true(r.allowed);
    assert_null(r.patch);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=320Gi,gpus=0,gpu-pods=1");
    wh_review_response_dispose(&r);
    /* the author's original-request and charged are replaced too, and a
     * gpu-requests with no shared container to describe is removed */
    mutate_pod(cfg,
               "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"w\","
               "\"annotations\":{\"gpuquota.io/gpu-model\":\"t4\",\"gpuquota.io/gpu-requests\":"
               "\"{}\",\"gpuquota.io/original-request\":\"{}\",\"gpuquota.io/charged\":\"none\"},"
               "\"labels\":{\"gpuquota.io/managed\":\"true\"},\"managedFields\":[{\"manager\":"
               "\"kubectl\",\"operation\":\"Update\",\"fieldsV1\":{\"f:metadata\":{"
               "\"f:labels\":{\"f:gpuquota.io/managed\":{}},\"f:annotations\":{"
               "\"f:gpuquota.io/gpu-model\":{},\"f:gpuquota.io/gpu-requests\":{},"
               "\"f:gpuquota.io/original-request\":{},\"f:gpuquota.io/charged\":{}}}}}]},"
               "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
               "\"nvidia.com/gpu\":\"1\"}}}]}}",
               NULL, &r, &patched);
    assert_null(at_str(patched, "metadata", "annotations", "gpuquota.io/gpu-requests"));
    assert_string_equal(at_str(patched, "metadata", "annotations", "gpuquota.io/original-request"),
                        "{\"c\":{\"nvidia.com/gpu\":\"1\"}}");
    assert_string_equal(at_str(patched, "metadata", "annotations", "gpuquota.io/charged"),
                        "gpu-memory=16Gi,gpus=1,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    /* what gpuquota wrote stands, and is left as it is */
    pod = at_read_data("pods/rewritten-shared.json", &len);
    mutate_pod(cfg, pod, NULL, &r, &patched);
    free(pod);
    assert_string_equal(audit(&r, "charged"), "gpu-memory=4Gi,gpus=0,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

/* ---- a choice of models ---------------------------------------------------- */

/* A source with the GPUQuotas of team-a (JSON array text) and nothing else. */
typedef struct fake_quotas {
    const char *quotas;
} fake_quotas;

static gq_code fq_list(void *ctx, wh_list_kind kind, const char *ns, json_object **out, gq_err *err)
{
    const fake_quotas *f = ctx;
    if (kind != WH_LIST_QUOTAS || strcmp(ns, "team-a")) {
        *out = json_object_new_array();
        return GQ_OK;
    }
    return gq_json_parse(f->quotas, strlen(f->quotas), 0, out, err);
}

static gq_code fq_labels(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    (void)ctx;
    (void)ns;
    (void)err;
    *out = NULL;
    return GQ_OK;
}

#define CHOICE_QUOTA(a100_used)                                                                    \
    "[{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{\"name\":"      \
    "\"team\",\"namespace\":\"team-a\"},\"spec\":{\"hard\":{\"gpu-memory\":\"200Gi\"},"            \
    "\"models\":{\"a100-80gb\":{\"gpu-memory\":\"40Gi\"},\"l4\":{\"gpu-memory\":\"12Gi\"}}},"      \
    "\"status\":{\"usedByModel\":{\"a100-80gb\":{\"gpu-memory\":\"" a100_used "\"}}}}]"

/* A pod asking for half a GPU of whichever model in models fits. */
static char *choice_review(const char *models)
{
    char pod[1024];
    snprintf(pod, sizeof(pod),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"c\",\"namespace\":"
             "\"team-a\",\"annotations\":{\"gpuquota.io/gpu-model\":\"%s\"}},\"spec\":{"
             "\"containers\":[{\"name\":\"main\",\"image\":\"x\",\"resources\":{\"limits\":"
             "{\"nvidia.com/gpu\":\"500m\"}}}]}}",
             models);
    return at_pod_create_review("u-choice", "team-a", pod);
}

static void mutate_choice(const gq_config *cfg, const char *models, const char *quotas,
                          wh_review_response *resp, json_object **patched)
{
    fake_quotas fq = {quotas};
    wh_store src = {.ctx = &fq, .list = quotas ? fq_list : NULL, .namespace_labels = fq_labels};
    char *body = choice_review(models);
    review(cfg, body, NULL, 0, &src, resp, patched);
    free(body);
}

/* Under Queue the controller chooses when it ungates: /mutate gates the pod
 * and leaves the list, pinning no affinity, even when no model has room. */
static void choice_of_models_queued(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;
    mutate_choice(cfg, "a100-80gb,h100-80gb",
                  "[{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
                  "\"name\":\"team\",\"namespace\":\"team-a\"},\"spec\":{\"hard\":{\"gpu-memory\":"
                  "\"200Gi\"},\"whenExceeded\":\"Queue\",\"models\":{\"a100-80gb\":{\"gpu-memory\":"
                  "\"40Gi\"},\"l4\":{\"gpu-memory\":\"12Gi\"}}},\"status\":{\"usedByModel\":{"
                  "\"a100-80gb\":{\"gpu-memory\":\"40Gi\"},\"l4\":{\"gpu-memory\":\"12Gi\"}}}}]",
                  &r, &patched);
    assert_true(r.allowed);
    assert_non_null(patched);
    json_object *meta = json_object_object_get(patched, "metadata");
    json_object *spec = json_object_object_get(patched, "spec");
    assert_string_equal(at_str(meta, "annotations", "gpuquota.io/gpu-model", NULL),
                        "a100-80gb,h100-80gb");
    assert_null(at_str(meta, "annotations", "gpuquota.io/gpu-model-choices", NULL));
    assert_null(json_object_object_get(spec, "affinity"));
    assert_string_equal(gq_json_compact(json_object_object_get(spec, "schedulingGates")),
                        "[{\"name\":\"gpuquota.io/quota\"}]");
    /* Priced on the first model until the controller chooses. */
    assert_string_equal(audit(&r, "charged"), "gpu-memory=40Gi,gpus=0,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);

    /* Half a GPU among models of different memory cannot wait for the
     * controller's choice: the device request is written now. */
    patched = NULL;
    mutate_choice(cfg, "a100-80gb,l4",
                  "[{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
                  "\"name\":\"team\",\"namespace\":\"team-a\"},\"spec\":{\"hard\":{\"gpu-memory\":"
                  "\"200Gi\"},\"whenExceeded\":\"Queue\"}}]",
                  &r, &patched);
    assert_false(r.allowed);
    assert_null(patched);
    assert_non_null(strstr(r.message, "accepts models of different memory (a100-80gb, l4) and "
                                      "waits in a queue"));
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

static void choice_of_models(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_review_response r;
    json_object *patched = NULL;

    /* a100 has 8Gi of its 40Gi left: half an a100 (40Gi) does not fit, half
     * an l4 (12Gi) fits its 12Gi exactly. */
    mutate_choice(cfg, "a100-80gb,l4", CHOICE_QUOTA("32Gi"), &r, &patched);
    assert_true(r.allowed);
    assert_non_null(patched);
    json_object *meta = json_object_object_get(patched, "metadata");
    assert_string_equal(at_str(meta, "annotations", "gpuquota.io/gpu-model", NULL), "l4");
    assert_string_equal(at_str(meta, "annotations", "gpuquota.io/gpu-model-choices", NULL),
                        "a100-80gb,l4");
    assert_string_equal(audit(&r, "gpu-model"), "l4");
    assert_string_equal(audit(&r, "gpu-model-choices"), "a100-80gb,l4");
    assert_string_equal(audit(&r, "charged"), "gpu-memory=12Gi,gpus=0,gpu-pods=1");
    json_object *aff = json_object_object_get(json_object_object_get(patched, "spec"), "affinity");
    assert_non_null(aff);
    assert_non_null(strstr(gq_json_compact(aff), "{\"key\":\"nvidia.com/gpu.product\",\"operator\":"
                                                 "\"In\",\"values\":[\"NVIDIA-L4\"]}"));
    /* A second invocation on the patched pod is a no-op. */
    const char *again = gq_json_compact(patched);
    char *body = at_pod_create_review("u-again", "team-a", again);
    wh_review_request rq;
    wh_review_response r2;
    gq_err err;
    assert_int_equal(wh_review_decode(body, strlen(body), &rq, &err), GQ_OK);
    free(body);
    assert_int_equal(wh_mutate_review(cfg, &rq, NULL, 0, &r2, &err), GQ_OK);
    assert_true(r2.allowed);
    assert_null(r2.patch);
    wh_review_request_dispose(&rq);
    wh_review_response_dispose(&r2);
    json_object_put(patched);
    wh_review_response_dispose(&r);

    /* Room on the first preference: it is chosen. */
    mutate_choice(cfg, "a100-80gb,l4", CHOICE_QUOTA("0"), &r, &patched);
    assert_true(r.allowed);
    assert_string_equal(audit(&r, "gpu-model"), "a100-80gb");
    assert_string_equal(audit(&r, "charged"), "gpu-memory=40Gi,gpus=0,gpu-pods=1");
    json_object_put(patched);
    wh_review_response_dispose(&r);

    /* No quota state at all: the first preference. */
    mutate_choice(cfg, "l4,a100-80gb", NULL, &r, &patched);
    assert_true(r.allowed);
    assert_string_equal(audit(&r, "gpu-model"), "l4");
    json_object_put(patched);
    wh_review_response_dispose(&r);

    /* Neither fits: denied, saying why for each. */
    mutate_choice(cfg, "a100-80gb,h100-80gb,l4",
                  "[{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
                  "\"name\":\"team\",\"namespace\":\"team-a\"},\"spec\":{\"hard\":{\"gpu-memory\":"
                  "\"10Gi\"}}}]",
                  &r, &patched);
    assert_false(r.allowed);
    assert_int_equal(r.code, 403);
    assert_string_equal(r.message,
                        "no accepted GPU model fits: a100-80gb: exceeded quota: team, requested: "
                        "gpu-memory=40Gi, used: gpu-memory=0, limited: gpu-memory=10Gi; "
                        "h100-80gb: exceeded quota: team, requested: gpu-memory=40Gi, used: "
                        "gpu-memory=0, limited: gpu-memory=10Gi; l4: exceeded quota: team, "
                        "requested: gpu-memory=12Gi, used: gpu-memory=0, limited: "
                        "gpu-memory=10Gi");
    wh_review_response_dispose(&r);

    /* Bad lists are refused before anything is read. */
    static const struct {
        const char *models, *msg;
    } bad[] = {
        {"a100-80gb,nope",
         "pod annotation gpuquota.io/gpu-model \"nope\" is not a known GPU model"},
        {"a100-80gb,,l4", "each item must be a GPU model name"},
        {"l4,NVIDIA-L4", "names model l4 twice"},
        {"t4,a10,a30,l4,l40s,h200,a100-40gb,a100-80gb,h100-80gb", "at most 8 models"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mutate_choice(cfg, bad[i].models, CHOICE_QUOTA("0"), &r, &patched);
        assert_false(r.allowed);
        if (!strstr(r.message, bad[i].msg))
            fail_msg("%s: got \"%s\"", bad[i].models, r.message);
        wh_review_response_dispose(&r);
    }
    gq_config_free(cfg);
}

/* ---- DRA claims ------------------------------------------------------------ */

static gq_code fq_template(void *ctx, const char *ns, const char *name, json_object **out,
                           gq_err *err)
{
    (void)ctx;
    if (strcmp(ns, "team-a") || strcmp(name, "one-h100"))
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    const char *t =
        "{\"spec\":{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{"
        "\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2,\"selectors\":[{\"cel\":{"
        "\"expression\":\"device.attributes[\\\"gpu.nvidia.com\\\"].productName == "
        "\\\"NVIDIA-H100-80GB-HBM3\\\"\"}}]}}]}}}}";
    return gq_json_parse(t, strlen(t), 0, out, err);
}

static void dra_claims_recorded(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_store src = {.get_claim_template = fq_template};
    const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"d\","
                      "\"namespace\":\"team-a\",\"managedFields\":[{\"manager\":\"kubectl\","
                      "\"operation\":\"Update\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
                      "\"f:spec\":{}}}]},\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\","
                      "\"resourceClaimTemplateName\":\"one-h100\"},{\"name\":\"other\","
                      "\"resourceClaimTemplateName\":\"missing\"}],\"containers\":[{\"name\":"
                      "\"main\",\"image\":\"x\"}]}}";
    wh_review_response r;
    json_object *patched = NULL;
    gq_err err;
    mutate_pod(cfg, pod, &src, &r, &patched);
    assert_true(r.allowed);
    assert_non_null(r.patch);
    assert_non_null(patched);
    json_object *meta = json_object_object_get(patched, "metadata");
    assert_string_equal(at_str(meta, "annotations", "gpuquota.io/gpu-claims", NULL),
                        "{\"gpu\":{\"gpus\":2,\"memory\":\"160Gi\",\"model\":\"h100-80gb\"}}");
    assert_string_equal(at_str(meta, "labels", "gpuquota.io/managed", NULL), "true");
    assert_string_equal(audit(&r, "charged"), "gpu-memory=160Gi,gpus=2,gpu-pods=1");
    /* held until the controller has checked the claim made from the
     * template is the one charged */
    assert_string_equal(
        gq_json_compact(gq_json_member(gq_json_member(patched, "spec"), "schedulingGates")),
        "[{\"name\":\"gpuquota.io/claims\"}]");
    /* The rewritten pod costs the same to everyone who reads it; the claim
     * without a template stays unpriced. */
    gq_pod_cost c;
    gq_pod_cost_init(&c);
    assert_int_equal(gq_pod_cost_compute(cfg, patched, &c, &err), GQ_OK);
    assert_int_equal(c.gpus, 2);
    assert_int_equal(c.gpu_memory, 160LL << 30);
    assert_true(c.claims_unpriced);
    gq_pod_cost_dispose(&c);
    json_object_put(patched);
    wh_review_response_dispose(&r);
    gq_config_free(cfg);
}

/* Templates of a NIC and of MIG devices, and their DeviceClasses. */
static gq_code fq_dev_template(void *ctx, const char *ns, const char *name, json_object **out,
                               gq_err *err)
{
    (void)ctx;
    (void)ns;
    const char *cls = !strcmp(name, "nic")   ? "nic.example.com"
                      : !strcmp(name, "mig") ? "mig.nvidia.com"
                                             : "any.example.com";
    char t[512];
    snprintf(t, sizeof(t),
             "{\"spec\":{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"d\",\"exactly\":{"
             "\"deviceClassName\":\"%s\",\"count\":2}}]}}}}",
             cls);
    return gq_json_parse(t, strlen(t), 0, out, err);
}

static gq_code fq_device_class(void *ctx, const char *name, json_object **out, gq_err *err)
{
    (void)ctx;
    const char *drv = !strcmp(name, "nic.example.com")  ? "nic.example.com"
                      : !strcmp(name, "mig.nvidia.com") ? "gpu.nvidia.com"
                                                        : NULL;
    if (!drv && strcmp(name, "any.example.com"))
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    char t[512];
    snprintf(t, sizeof(t),
             "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"selectors\":[{\"cel\":{"
             "\"expression\":\"device.driver == '%s'\"}}]}}",
             name, drv ? drv : "");
    return gq_json_parse(t, strlen(t), 0, out, err);
}

/* Devices of a class outside deviceClasses are priced by the driver its
 * DeviceClass pins: a NIC costs nothing (and is recorded, so /validate
 * sees it priced), MIG devices of the GPU driver are GPUs; a class whose
 * driver gpuquota cannot tell leaves the claim unpriced. */
static void dra_classes_by_driver(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_store src = {.get_claim_template = fq_dev_template, .get_device_class = fq_device_class};
    static const struct {
        const char *tmpl, *record; /* record NULL: none written */
        bool unpriced;
    } t[] = {
        {"nic", "{\"c\":{\"gpus\":0,\"memory\":\"0\"}}", false},
        {"mig", "{\"c\":{\"gpus\":2,\"memory\":\"282Gi\"}}", false},
        {"any", NULL, true},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char pod[512];
        snprintf(pod, sizeof(pod),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"d\","
                 "\"namespace\":\"team-a\"},\"spec\":{\"resourceClaims\":[{\"name\":\"c\","
                 "\"resourceClaimTemplateName\":\"%s\"}],\"containers\":[{\"name\":\"main\","
                 "\"image\":\"x\"}]}}",
                 t[i].tmpl);
        wh_review_response r;
        json_object *patched = NULL;
        gq_err err;
        mutate_pod(cfg, pod, &src, &r, &patched);
        assert_true(r.allowed);
        if (!patched) /* nothing to write */
            assert_int_equal(gq_json_parse(pod, strlen(pod), 0, &patched, &err), GQ_OK);
        json_object *meta = json_object_object_get(patched, "metadata");
        const char *rec = at_str(meta, "annotations", "gpuquota.io/gpu-claims", NULL);
        if (t[i].record)
            assert_string_equal(rec, t[i].record);
        else
            assert_null(rec);
        /* no admission record on a pod whose claims hold no GPU */
        if (i == 0)
            assert_null(at_str(meta, "annotations", "gpuquota.io/admission", NULL));
        /* every claim recorded is checked before the pod runs, a NIC's too
         * (it could be made again as GPUs) */
        json_object *gates = gq_json_member(gq_json_member(patched, "spec"), "schedulingGates");
        if (t[i].record)
            assert_string_equal(gq_json_compact(gates), "[{\"name\":\"gpuquota.io/claims\"}]");
        else
            assert_null(gates);
        gq_pod_cost c;
        gq_pod_cost_init(&c);
        if (gq_pod_cost_compute(cfg, patched, &c, &err) != GQ_OK)
            fail_msg("%s: %s", t[i].tmpl, err.msg);
        assert_int_equal(c.claims_unpriced, t[i].unpriced);
        assert_int_equal(c.gpu_pods, i == 1);
        gq_pod_cost_dispose(&c);
        json_object_put(patched);
        wh_review_response_dispose(&r);
    }
    gq_config_free(cfg);
}

static gq_code fq_claim(void *ctx, const char *ns, const char *name, json_object **out, gq_err *err)
{
    (void)ctx;
    const char *t = NULL;
    if (!strcmp(ns, "team-a") && !strcmp(name, "pair"))
        t = "{\"metadata\":{\"name\":\"pair\",\"uid\":\"0f1e-pair\"},\"spec\":{\"devices\":{"
            "\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":"
            "\"gpu.nvidia.com\",\"count\":2,\"capacity\":{\"requests\":{\"memory\":\"40Gi\"}}}}]}}"
            "}";
    else if (!strcmp(ns, "team-a") && !strcmp(name, "no-uid"))
        t = "{\"metadata\":{\"name\":\"no-uid\"},\"spec\":{\"devices\":{\"requests\":[]}}}";
    if (!t)
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    return gq_json_parse(t, strlen(t), 0, out, err);
}

/* A ResourceClaim named directly is read, priced like a template and
 * recorded with its name and uid; one that does not exist, or has no uid,
 * gets a warning and no record. */
static void dra_shared_claim_recorded(void **state)
{
    (void)state;
    gq_config *cfg = config();
    wh_store src = {.get_claim = fq_claim};
    const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"d\","
                      "\"namespace\":\"team-a\"},\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\","
                      "\"resourceClaimName\":\"pair\"},{\"name\":\"gone\",\"resourceClaimName\":"
                      "\"missing\"},{\"name\":\"odd\",\"resourceClaimName\":\"no-uid\"}],"
                      "\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}}";
    wh_review_response r;
    json_object *patched = NULL;
    gq_err err;
    mutate_pod(cfg, pod, &src, &r, &patched);
    assert_true(r.allowed);
    assert_int_equal(r.n_warnings, 2);
    assert_string_equal(r.warnings[0], "ResourceClaim \"missing\" does not exist in namespace "
                                       "team-a: gpuquota cannot price the pod's claim \"gone\"");
    assert_string_equal(r.warnings[1],
                        "ResourceClaim \"no-uid\": metadata.uid is missing or too long");
    assert_non_null(patched);
    json_object *meta = json_object_object_get(patched, "metadata");
    assert_string_equal(at_str(meta, "annotations", "gpuquota.io/gpu-claims", NULL),
                        "{\"gpu\":{\"gpus\":2,\"memory\":\"80Gi\",\"claim\":\"pair\","
                        "\"uid\":\"0f1e-pair\"}}");
    gq_pod_cost c;
    gq_pod_cost_init(&c);
    assert_int_equal(gq_pod_cost_compute(cfg, patched, &c, &err), GQ_OK);
    assert_int_equal(c.gpus, 2);
    assert_int_equal(c.n_shared, 1);
    assert_string_equal(c.shared[0].uid, "0f1e-pair");
    assert_true(c.claims_unpriced); /* the two without a record */
    gq_pod_cost_dispose(&c);
    json_object_put(patched);
    wh_review_response_dispose(&r);

    /* A gate of the author's is kept, gpuquota's goes after it. A pod
     * created on its node cannot carry the gate: refused; so is one naming
     * a claim twice (Kubernetes cannot reserve it twice, and its devices
     * would stay allocated to no pod). */
    static const struct {
        const char *spec, *claims, *gates, *denied;
    } g[] = {
        {"\"schedulingGates\":[{\"name\":\"mine\"}],",
         "{\"name\":\"gpu\",\"resourceClaimName\":\"pair\"}",
         "[{\"name\":\"mine\"},{\"name\":\"gpuquota.io/claims\"}]", NULL},
        {"\"nodeName\":\"n1\",", "{\"name\":\"gpu\",\"resourceClaimName\":\"pair\"}", NULL,
         "a pod created on a node (spec.nodeName) cannot wait behind the scheduling gate "
         "gpuquota.io/claims"},
        {"",
         "{\"name\":\"a\",\"resourceClaimName\":\"pair\"},{\"name\":\"b\","
         "\"resourceClaimName\":\"pair\"}",
         NULL,
         "spec.resourceClaims entries \"a\" and \"b\" name the same ResourceClaim \"pair\": "
         "Kubernetes cannot reserve a claim twice for one pod"},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        char one[1024];
        snprintf(one, sizeof one,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"d\","
                 "\"namespace\":\"team-a\"},\"spec\":{%s\"resourceClaims\":[%s],\"containers\":"
                 "[{\"name\":\"main\",\"image\":\"x\"}]}}",
                 g[i].spec, g[i].claims);
        patched = NULL;
        mutate_pod(cfg, one, &src, &r, &patched);
        if (g[i].denied) {
            assert_false(r.allowed);
            assert_non_null(strstr(r.message, g[i].denied));
        } else {
            assert_true(r.allowed);
            assert_string_equal(
                gq_json_compact(gq_json_member(gq_json_member(patched, "spec"), "schedulingGates")),
                g[i].gates);
        }
        json_object_put(patched);
        wh_review_response_dispose(&r);
    }
    gq_config_free(cfg);
}

/* wh_mutate_result: the response's patch applied to the object, the object
 * itself without a patch, no object for a denial; a patch that does not
 * apply is an error. */
static void mutate_result(void **state)
{
    (void)state;
    char *body = at_pod_create_review(
        "u-result", "team-a",
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"r\","
        "\"namespace\":\"team-a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
    wh_review_request req;
    gq_err err;
    assert_int_equal(wh_review_decode(body, strlen(body), &req, &err), GQ_OK);
    char add[] = "[{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"a\":\"b\"}}]";
    char bad[] = "[{\"op\":\"remove\",\"path\":\"/metadata/nope\"}]";
    wh_review_response resp;
    memset(&resp, 0, sizeof(resp));
    json_object *patch = NULL, *pod = NULL;
    resp.allowed = true;
    resp.patch = add;
    resp.patch_len = strlen(add);
    assert_int_equal(wh_mutate_result(&req, &resp, &patch, &pod, &err), GQ_OK);
    assert_int_equal(json_object_array_length(patch), 1);
    assert_string_equal(gq_json_get_string(gq_json_meta_object(pod, "labels"), "a"), "b");
    assert_null(gq_json_meta_object(req.object, "labels"));
    json_object_put(patch);
    json_object_put(pod);
    resp.patch = NULL;
    resp.patch_len = 0;
    assert_int_equal(wh_mutate_result(&req, &resp, &patch, &pod, &err), GQ_OK);
    assert_int_equal(json_object_array_length(patch), 0);
    assert_ptr_equal(pod, req.object);
    json_object_put(patch);
    json_object_put(pod);
    resp.allowed = false;
    assert_int_equal(wh_mutate_result(&req, &resp, &patch, &pod, &err), GQ_OK);
    assert_null(pod);
    json_object_put(patch);
    resp.allowed = true;
    resp.patch = bad;
    resp.patch_len = strlen(bad);
    patch = pod = NULL;
    assert_int_not_equal(wh_mutate_result(&req, &resp, &patch, &pod, &err), GQ_OK);
    assert_null(patch);
    assert_null(pod);
    wh_review_request_dispose(&req);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixture_whole_gpus),
        cmocka_unit_test(fraction_rewritten),
        cmocka_unit_test(invalid_request_denied),
        cmocka_unit_test(passed_through_unchanged),
        cmocka_unit_test(missing_object_bad_request),
        cmocka_unit_test(limit_range_default_applied),
        cmocka_unit_test(reinvocation_with_fresh_uid_is_noop),
        cmocka_unit_test(unknown_model_whole_gpus_charged),
        cmocka_unit_test(author_records_replaced),
        cmocka_unit_test(choice_of_models),
        cmocka_unit_test(choice_of_models_queued),
        cmocka_unit_test(dra_claims_recorded),
        cmocka_unit_test(dra_classes_by_driver),
        cmocka_unit_test(dra_shared_claim_recorded),
        cmocka_unit_test(mutate_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
