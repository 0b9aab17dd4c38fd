/* The /validate decision over the in-memory store: quota charging (fresh
 * reads, reservations, conflicts, rollback, dry run, idempotency, group
 * commit under many threads), GPULimitRange, requireQuota, fail-closed store
 * errors and the tamper check on pod updates. */
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

#include "support/admission_testutil.h"
#include "common/gq_log.h"
#include "support/faultstore.h"
#include "quota/record.h"
#include "webhook/memstore.h"
#include "webhook/validate.h"

#define NOW 1800000000
#define NS_A "team-a"
#define USER "alice"

static int64_t fixed_now(void *ud)
{
    (void)ud;
    return NOW;
}

typedef struct fx {
    gq_config *cfg;
    wh_memstore *ms;
    faultstore *fs; /* over ms */
    wh_store store; /* fs's table */
    wh_validator *v;
} fx;

static void fx_validator(fx *f, const wh_validate_opts *o)
{
    wh_validate_opts d;
    memset(&d, 0, sizeof(d));
    if (!o)
        o = &d;
    wh_validate_opts opts = *o;
    if (!opts.now)
        opts.now = fixed_now;
    wh_validator_free(f->v);
    f->v = NULL;
    assert_int_equal(wh_validator_new(f->cfg, &f->store, &opts, &f->v, NULL), GQ_OK);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(gq_config_default(&f->cfg, NULL), GQ_OK);
    assert_int_equal(faultstore_over_memstore(&f->ms, &f->fs, &f->store), GQ_OK);
    fx_validator(f, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    wh_validator_free(f->v);
    faultstore_free(f->fs);
    wh_memstore_free(f->ms);
    gq_config_free(f->cfg);
    free(f);
    return 0;
}

static void apply(fx *f, const char *json)
{
    json_object *o = json_tokener_parse(json);
    assert_non_null(o);
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = wh_memstore_apply(f->ms, o, &err);
    if (rc)
        fail_msg("apply: %s", err.msg);
    json_object_put(o);
}

/* A GPUQuota in ns with hard (a JSON object body) and optional status. */
static void quota(fx *f, const char *ns, const char *name, const char *hard, const char *extra)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\","
             "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{\"hard\":%s%s}%s}",
             name, ns, hard, extra && extra[0] == ',' ? extra : "",
             extra && extra[0] == '#' ? extra + 1 : "");
    apply(f, buf);
}

static void namespace_(fx *f, const char *name, const char *labels)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":%s}}",
             name, labels);
    apply(f, buf);
}

/* Pod JSON with one container asking for gpuquota.io/gpu-memory mem (or no
 * GPU when mem is NULL); extra_meta / extra_spec are appended verbatim. */
static void pod_json(char *buf, size_t cap, const char *ns, const char *mem, const char *extra_meta,
                     const char *extra_spec)
{
    char res[128] = "{}";
    if (mem)
        snprintf(res, sizeof(res), "{\"limits\":{\"gpuquota.io/gpu-memory\":\"%s\"}}", mem);
    snprintf(buf, cap,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"train-\","
             "\"namespace\":\"%s\"%s},\"spec\":{\"containers\":[{\"name\":\"trainer\","
             "\"image\":\"x\",\"resources\":%s}]%s}}",
             ns, extra_meta ? extra_meta : "", res, extra_spec ? extra_spec : "");
}

typedef struct rv_opts {
    const char *op;
    const char *user;
    const char *old;
    bool dry_run;
    const char *sub; /* subResource, NULL for none */
    bool claim;      /* a resource.k8s.io/v1 ResourceClaim, not a pod */
} rv_opts;

/* Decode an AdmissionReview for pod (JSON text) and decide it. */
static wh_validate_result decide_ex(fx *f, const char *uid, const char *ns, const char *pod,
                                    const rv_opts *o, wh_review_response *resp_out)
{
    rv_opts d = {"CREATE", USER, NULL, false, NULL, false};
    if (!o)
        o = &d;
    size_t body_max = 4096 + strlen(pod) + (o->old ? strlen(o->old) : 0);
    char *body = malloc(body_max);
    assert_non_null(body);
    snprintf(body, body_max,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
             "\"uid\":\"%s\",\"kind\":{\"group\":\"%s\",\"version\":\"v1\",\"kind\":\"%s\"},"
             "\"resource\":{\"group\":\"%s\",\"version\":\"v1\",\"resource\":\"%s\"},"
             "\"namespace\":\"%s\",\"operation\":\"%s\",\"userInfo\":{\"username\":\"%s\"},"
             "\"object\":%s,\"oldObject\":%s,\"dryRun\":%s%s%s%s}}",
             uid, o->claim ? "resource.k8s.io" : "", o->claim ? "ResourceClaim" : "Pod",
             o->claim ? "resource.k8s.io" : "", o->claim ? "resourceclaims" : "pods", ns, o->op,
             o->user ? o->user : USER, pod, o->old ? o->old : "null", o->dry_run ? "true" : "false",
             o->sub ? ",\"subResource\":\"" : "", o->sub ? o->sub : "", o->sub ? "\"" : "");
    wh_review_request req;
    wh_review_response resp;
    wh_validate_result r;
    gq_err err;
    gq_err_clear(&err);
    if (wh_review_decode(body, strlen(body), &req, &err))
        fail_msg("decode: %s", err.msg);
    assert_int_equal(wh_validate_review(f->v, &req, &resp, &r, &err), GQ_OK);
    assert_int_equal(resp.allowed, r.allowed);
    if (!r.allowed) {
        bool exists = r.code == GQ_EEXISTS;
        assert_int_equal(resp.code, exists ? 409 : 403);
        assert_string_equal(resp.reason, exists ? "AlreadyExists" : "Forbidden");
        assert_string_equal(resp.message, r.message);
    }
    if (resp_out)
        *resp_out = resp;
    else
        wh_review_response_dispose(&resp);
    wh_review_request_dispose(&req);
    free(body);
    return r;
}

static wh_validate_result decide(fx *f, const char *uid, const char *ns, const char *mem)
{
    char pod[2048];
    pod_json(pod, sizeof(pod), ns, mem, NULL, NULL);
    return decide_ex(f, uid, ns, pod, NULL, NULL);
}

/* Reservations of a stored quota, as an array borrowed from *holder. */
static size_t n_reservations(fx *f, const char *kind, const char *ns, const char *name)
{
    json_object *o = NULL, *st, *arr;
    assert_int_equal(wh_memstore_get(f->ms, kind, ns, name, &o, NULL), GQ_OK);
    size_t n = 0;
    if (json_object_object_get_ex(o, "status", &st) &&
        json_object_object_get_ex(st, "reservations", &arr))
        n = json_object_array_length(arr);
    json_object_put(o);
    return n;
}

static json_object *reservation(fx *f, const char *ns, const char *name, size_t i)
{
    json_object *o = NULL, *st, *arr;
    assert_int_equal(wh_memstore_get(f->ms, "GPUQuota", ns, name, &o, NULL), GQ_OK);
    assert_true(json_object_object_get_ex(o, "status", &st));
    assert_true(json_object_object_get_ex(st, "reservations", &arr));
    json_object *r = json_object_get(json_object_array_get_idx(arr, i));
    json_object_put(o);
    return r;
}

static const char *sget(json_object *o, const char *k)
{
    json_object *v;
    assert_true(json_object_object_get_ex(o, k, &v));
    return json_object_get_string(v);
}

/* ---- tests ------------------------------------------------------------------ */

/* The admission record gpuquota's mutating webhook writes is what the
 * recount believes for the pod's whole life, so /validate admits a pod only
 * when its record is exactly this decision's charge: none on a pod that
 * uses no GPU, no record of another charge, model or scope, no older
 * version's charged line alone. */
static void test_admission_record_checked(void **state)
{
    fx *f = *state;
    char pod[2048], meta[512];
    quota(f, NS_A, "team-a", "{\"gpu-memory\":\"64Gi\"}", NULL);
    static const char good[] =
        "{\\\"charge\\\":{\\\"gpu-memory\\\":\\\"16Gi\\\",\\\"gpu-pods\\\":"
        "\\\"1\\\",\\\"gpus\\\":\\\"0\\\"},\\\"scope\\\":\\\"NotTerminating\\\"}";
    static const struct {
        const char *mem, *ann, *spec, *msg; /* msg NULL: allowed */
    } t[] = {
        {"16Gi", NULL, NULL, NULL}, /* no record: the mutating webhook was not called */
        {"16Gi", good, NULL, NULL},
        {"16Gi",
         "{\\\"charge\\\":{\\\"gpu-memory\\\":\\\"1Gi\\\",\\\"gpu-pods\\\":\\\"1\\\",\\\"gpus\\\":"
         "\\\"0\\\"},\\\"scope\\\":\\\"NotTerminating\\\"}",
         NULL, "must read {\"charge\":{\"gpu-memory\":\"16Gi\""},
        /* the right charge in the wrong scope */
        {"16Gi", good, ",\"activeDeadlineSeconds\":60", "\"scope\":\"Terminating\"}"},
        /* pinned to a model the record does not name */
        {"16Gi", good, ",\"nodeSelector\":{\"nvidia.com/gpu.product\":\"NVIDIA-A10\"}",
         "\"model\":\"a10\""},
        {"16Gi", "not json", NULL, "annotation gpuquota.io/admission"},
        {NULL, good, NULL, "this pod asks for no GPU: remove them"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        meta[0] = '\0';
        if (t[i].ann)
            snprintf(meta, sizeof(meta), ",\"annotations\":{\"" GQ_ANN_ADMISSION "\":\"%s\"}",
                     t[i].ann);
        pod_json(pod, sizeof(pod), NS_A, t[i].mem, meta, t[i].spec);
        char uid[32];
        snprintf(uid, sizeof(uid), "uid-rec-%zu", i);
        wh_validate_result r = decide_ex(f, uid, NS_A, pod, NULL, NULL);
        if (!t[i].msg) {
            if (!r.allowed)
                fail_msg("case %zu denied: %s", i, r.message);
            continue;
        }
        assert_false(r.allowed);
        if (!strstr(r.message, t[i].msg))
            fail_msg("case %zu: [%s] lacks [%s]", i, r.message, t[i].msg);
    }
    /* An older version's line alone (its mutating webhook, in a rolling
     * upgrade): accepted when it is this charge, refused otherwise, and on a
     * CPU-only pod. */
    static const struct {
        const char *mem, *line, *msg; /* msg NULL: allowed */
    } lines[] = {
        {"16Gi", "gpu-memory=16Gi,gpus=0,gpu-pods=1", NULL},
        {"16Gi", "gpu-memory=1Gi,gpus=0,gpu-pods=1",
         "annotation gpuquota.io/charged is gpuquota's record of what the pod is charged and must "
         "read gpu-memory=16Gi,gpus=0,gpu-pods=1"},
        {"16Gi", "gpu-memory=16Gi", "annotation gpuquota.io/charged"},
        {NULL, "gpu-memory=16Gi,gpus=0,gpu-pods=1", "this pod asks for no GPU: remove them"},
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        snprintf(meta, sizeof(meta), ",\"annotations\":{\"" GQ_ANN_CHARGED "\":\"%s\"}",
                 lines[i].line);
        pod_json(pod, sizeof(pod), NS_A, lines[i].mem, meta, NULL);
        char uid[32];
        snprintf(uid, sizeof(uid), "uid-line-%zu", i);
        wh_validate_result r = decide_ex(f, uid, NS_A, pod, NULL, NULL);
        if (!lines[i].msg) {
            if (!r.allowed)
                fail_msg("line %zu denied: %s", i, r.message);
            continue;
        }
        assert_false(r.allowed);
        if (!strstr(r.message, lines[i].msg))
            fail_msg("line %zu: [%s] lacks [%s]", i, r.message, lines[i].msg);
    }
}

/* The pods of the fake cluster by name: "taken" exists (uid u-taken). */
static gq_code fake_get_pod(void *ctx, const char *ns, const char *name, json_object **out,
                            gq_err *err)
{
    (void)ctx;
    if (strcmp(ns, NS_A) || strcmp(name, "taken"))
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    *out = json_tokener_parse("{\"metadata\":{\"name\":\"taken\",\"uid\":\"u-taken\"}}");
    return GQ_OK;
}

/* A CREATE naming a pod that exists is refused as AlreadyExists and charges
 * nothing, however often it is repeated (it used to hold a reservation
 * each time until it expired); generateName, the pod's own uid (a retry)
 * and a free name are charged as before. */
static void test_existing_name_not_charged(void **state)
{
    fx *f = *state;
    char pod[2048];
    /* named(NAME, META): a pod named NAME (no generateName) asking 16Gi. */
#define named(name, meta)                                                                          \
    snprintf(pod, sizeof(pod),                                                                     \
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","              \
             "\"namespace\":\"" NS_A "\"%s},\"spec\":{\"containers\":[{\"name\":\"c\","            \
             "\"resources\":{\"limits\":{\"gpuquota.io/gpu-memory\":\"16Gi\"}}}]}}",               \
             name, meta)
    f->store.get_pod = fake_get_pod;
    fx_validator(f, NULL);
    quota(f, NS_A, "team-a", "{\"gpu-memory\":\"64Gi\"}", NULL);
    for (int i = 0; i < 7; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "uid-x%d", i);
        named("taken", "");
        wh_validate_result r = decide_ex(f, uid, NS_A, pod, NULL, NULL);
        assert_false(r.allowed);
        assert_int_equal(r.code, GQ_EEXISTS);
        assert_string_equal(r.message, "pods \"taken\" already exists");
    }
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "team-a"), 0);
    /* The pod itself (its own uid): a retry of the request that made it. */
    named("taken", ",\"uid\":\"u-taken\"");
    assert_true(decide_ex(f, "uid-again", NS_A, pod, NULL, NULL).allowed);
    named("free", "");
    assert_true(decide_ex(f, "uid-free", NS_A, pod, NULL, NULL).allowed);
    /* A generated name is the API server's to retry (RetryGenerateName). */
    pod_json(pod, sizeof(pod), NS_A, "16Gi", ",\"name\":\"taken\"", NULL);
    assert_true(decide_ex(f, "uid-gen", NS_A, pod, NULL, NULL).allowed);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "team-a"), 3);
#undef named
}

static void test_allowed_charges_reservation(void **state)
{
    fx *f = *state;
    wh_review_response resp;
    char pod[2048];
    quota(f, NS_A, "team-a", "{\"gpu-memory\":\"64Gi\",\"gpu-pods\":10}", NULL);
    pod_json(pod, sizeof(pod), NS_A, "16Gi", NULL, NULL);
    wh_validate_result r = decide_ex(f, "uid-1", NS_A, pod, NULL, &resp);
    assert_true(r.allowed);
    assert_int_equal(r.n_charged, 1);
    assert_string_equal(r.charged, "GPUQuota team-a/team-a");
    assert_string_equal(r.reservation_key, "uid-1");
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 16LL << 30);
    assert_int_equal(resp.n_audit, 4);
    assert_string_equal(resp.audit_keys[0], "decision");
    assert_string_equal(resp.audit_values[0], "allowed");
    assert_string_equal(resp.audit_keys[1], "charge");
    assert_string_equal(resp.audit_values[1], "gpu-memory=16Gi,gpus=0,gpu-pods=1");
    assert_string_equal(resp.audit_keys[2], "charged-quotas");
    assert_string_equal(resp.audit_values[2], "GPUQuota team-a/team-a");
    assert_string_equal(resp.audit_keys[3], "reservation");
    assert_string_equal(resp.audit_values[3], "uid-1");
    wh_review_response_dispose(&resp);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "team-a"), 1);
    json_object *res = reservation(f, NS_A, "team-a", 0);
    assert_string_equal(sget(res, "key"), "uid-1");
    assert_string_equal(sget(res, "namespace"), NS_A);
    assert_string_equal(sget(res, "pod"), "train-");
    assert_string_equal(sget(res, "gpu-memory"), "16Gi");
    assert_string_equal(sget(res, "gpu-pods"), "1");
    assert_string_equal(sget(res, "expires"), "2027-01-15T08:02:00Z"); /* NOW + 120 s */
    json_object_put(res);
}

static void test_denied_at_limit(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "team-a", "{\"gpu-memory\":\"64Gi\"}",
          "#,\"status\":{\"used\":{\"gpu-memory\":\"56Gi\"}}");
    wh_validate_result r = decide(f, "uid-1", NS_A, "16Gi");
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_EDENIED);
    assert_string_equal(r.message, "exceeded quota: team-a, requested: gpu-memory=16Gi, used: "
                                   "gpu-memory=56Gi, limited: gpu-memory=64Gi");
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "team-a"), 0);
    /* equality is allowed */
    r = decide(f, "uid-2", NS_A, "8Gi");
    assert_true(r.allowed);
    /* now full: in use counts the live reservation */
    r = decide(f, "uid-3", NS_A, "1Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: team-a, requested: gpu-memory=1Gi, used: "
                                   "gpu-memory=64Gi, limited: gpu-memory=64Gi");
}

static void test_expired_reservations_ignored_and_dropped(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}",
          "#,\"status\":{\"reservations\":[{\"key\":\"old\",\"namespace\":\"team-a\",\"pod\":\"p\","
          "\"gpu-memory\":\"16Gi\",\"gpus\":\"0\",\"gpu-pods\":\"1\","
          "\"expires\":\"2027-01-15T08:00:00Z\"}]}");
    wh_validate_result r = decide(f, "uid-1", NS_A, "16Gi");
    assert_true(r.allowed);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 1);
    json_object *res = reservation(f, NS_A, "q", 0);
    assert_string_equal(sget(res, "key"), "uid-1");
    json_object_put(res);
}

static void test_tenant_across_namespaces(void **state)
{
    fx *f = *state;
    namespace_(f, "ml-a", "{\"team\":\"ml\"}");
    namespace_(f, "ml-b", "{\"team\":\"ml\"}");
    namespace_(f, "web", "{\"team\":\"web\"}");
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
             "\"metadata\":{\"name\":\"ml\"},\"spec\":{\"namespaceSelector\":{\"matchLabels\":"
             "{\"team\":\"ml\"}},\"hard\":{\"gpu-memory\":\"32Gi\"}}}");
    assert_true(decide(f, "a1", "ml-a", "16Gi").allowed);
    wh_validate_result r = decide(f, "b1", "ml-b", "16Gi");
    assert_true(r.allowed);
    assert_string_equal(r.charged, "GPUTenantQuota ml");
    r = decide(f, "a2", "ml-a", "16Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded tenant quota: ml, requested: gpu-memory=16Gi, used: "
                                   "gpu-memory=32Gi, limited: gpu-memory=32Gi");
    /* a namespace outside the tenant is not limited by it */
    r = decide(f, "w1", "web", "16Gi");
    assert_true(r.allowed);
    assert_int_equal(r.n_charged, 0);
    assert_int_equal(n_reservations(f, "GPUTenantQuota", NULL, "ml"), 2);
}

static void test_scopes(void **state)
{
    fx *f = *state;
    char pod[2048];
    quota(f, NS_A, "high", "{\"gpu-memory\":\"8Gi\"}",
          ",\"scopeSelector\":{\"matchExpressions\":[{\"scopeName\":\"PriorityClass\","
          "\"operator\":\"In\",\"values\":[\"high\"]}]}");
    quota(f, NS_A, "batch", "{\"gpu-memory\":\"4Gi\"}", ",\"scopes\":[\"Terminating\"]");
    /* neither scope matches: no quota governs the pod */
    wh_validate_result r = decide(f, "u1", NS_A, "16Gi");
    assert_true(r.allowed);
    assert_int_equal(r.n_charged, 0);
    pod_json(pod, sizeof(pod), NS_A, "16Gi", NULL, ",\"priorityClassName\":\"high\"");
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: high, requested: gpu-memory=16Gi, used: "
                                   "gpu-memory=0, limited: gpu-memory=8Gi");
    pod_json(pod, sizeof(pod), NS_A, "4Gi", NULL, ",\"activeDeadlineSeconds\":60");
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_string_equal(r.charged, "GPUQuota team-a/batch");
}

static void test_dry_run_not_charged(void **state)
{
    fx *f = *state;
    char pod[2048];
    rv_opts dry = {"CREATE", USER, NULL, true, NULL, false};
    wh_review_response resp;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    pod_json(pod, sizeof(pod), NS_A, "16Gi", NULL, NULL);
    wh_validate_result r = decide_ex(f, "d1", NS_A, pod, &dry, &resp);
    assert_true(r.allowed);
    assert_int_equal(resp.n_audit, 3);
    assert_string_equal(resp.audit_keys[2], "checked-quotas");
    assert_string_equal(resp.audit_values[2], "GPUQuota team-a/q");
    wh_review_response_dispose(&resp);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 0);
    faultstore_stats st;
    faultstore_get_stats(f->fs, &st);
    assert_int_equal(st.updates, 0);
    assert_int_equal(st.gets, 1); /* evaluated on a fresh read */
    /* over the limit, a dry run is denied like the real thing */
    assert_true(decide(f, "real", NS_A, "16Gi").allowed);
    pod_json(pod, sizeof(pod), NS_A, "1Gi", NULL, NULL);
    r = decide_ex(f, "d2", NS_A, pod, &dry, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=1Gi, used: "
                                   "gpu-memory=16Gi, limited: gpu-memory=16Gi");
}

static void test_idempotent_retry(void **state)
{
    fx *f = *state;
    char pod[2048];
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    assert_true(decide(f, "same", NS_A, "16Gi").allowed);
    /* the apiserver retries the same review: allowed again, charged once */
    wh_validate_result r = decide(f, "same", NS_A, "16Gi");
    assert_true(r.allowed);
    assert_int_equal(r.n_charged, 1);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 1);
    /* the pod's uid is the key when present (kube-apiserver sets it before
     * validating admission; every call has a fresh request uid) */
    quota(f, "team-b", "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    pod_json(pod, sizeof(pod), "team-b", "16Gi", ",\"name\":\"train-x7k2p\",\"uid\":\"pod-1\"",
             NULL);
    assert_true(decide_ex(f, "x1", "team-b", pod, NULL, NULL).allowed);
    r = decide_ex(f, "x2", "team-b", pod, NULL, NULL);
    assert_true(r.allowed);
    assert_string_equal(r.reservation_key, "pod-1");
    assert_int_equal(n_reservations(f, "GPUQuota", "team-b", "q"), 1);
}

/* A reservation annotation written by a user at CREATE influences nothing:
 * neither the key nor whether the pod is charged. */
static void test_user_reservation_annotation_ignored(void **state)
{
    fx *f = *state;
    char pod[2048];
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    pod_json(pod, sizeof(pod), NS_A, "16Gi",
             ",\"name\":\"a\",\"uid\":\"pod-a\",\"annotations\":{\"gpuquota.io/"
             "reservation\":\"k1\"}",
             NULL);
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_string_equal(r.reservation_key, "pod-a");
    /* another pod naming pod a's key in the annotation is charged on its
     * own, and the quota is full */
    pod_json(pod, sizeof(pod), NS_A, "16Gi",
             ",\"name\":\"b\",\"uid\":\"pod-b\",\"annotations\":{\"gpuquota.io/"
             "reservation\":\"pod-a\"}",
             NULL);
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=16Gi, used: "
                                   "gpu-memory=16Gi, limited: gpu-memory=16Gi");
    /* without a uid (offline admission) the request uid is the key */
    pod_json(pod, sizeof(pod), "team-b", "8Gi",
             ",\"annotations\":{\"gpuquota.io/reservation\":\"k1\"}", NULL);
    quota(f, "team-b", "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    r = decide_ex(f, "u3", "team-b", pod, NULL, NULL);
    assert_true(r.allowed);
    assert_string_equal(r.reservation_key, "u3");
}

/* A review that did not come from kube-apiserver (posted to /validate, or
 * an offline admission of a pod copied from a running one) may carry
 * another pod's uid: the pod must be charged on its own (under the
 * admission uid), never ride on the other pod's charge. */
static void test_copied_pod_uid(void **state)
{
    fx *f = *state;
    char pod[2048];
    const char *ann = ",\"uid\":\"k1\"";
    quota(f, NS_A, "q", "{\"gpu-memory\":\"32Gi\"}", NULL);
    snprintf(pod, sizeof(pod),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"%s},"
             "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
             "{\"gpuquota.io/gpu-memory\":\"16Gi\"}}}]}}",
             ann);
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_string_equal(r.reservation_key, "k1");
    pod[strstr(pod, "\"a\"") - pod + 1] = 'b'; /* the copy: pod b */
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_string_equal(r.reservation_key, "u2");
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 2);
    /* the quota is full now: a third copy is denied */
    pod[strstr(pod, "\"b\"") - pod + 1] = 'c';
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=16Gi, used: "
                                   "gpu-memory=32Gi, limited: gpu-memory=32Gi");
    /* both keys taken by other pods: refused, never shared */
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL); /* re-applied: no reservations */
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);          /* pod c now holds k1 */
    assert_true(r.allowed);
    assert_string_equal(r.reservation_key, "k1");
    assert_true(decide(f, "u5", NS_A, "8Gi").allowed); /* a pod without uid holds u5 */
    pod[strstr(pod, "\"c\"") - pod + 1] = 'd';
    r = decide_ex(f, "u5", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_EEXISTS);
    assert_string_equal(r.message, "gpuquota could not charge quota team-a/q: reservation u5 is "
                                   "held by another pod");
}

/* The object a write returned stands in for the next read, but never
 * refuses: when usage went down meanwhile (the controller counted and
 * dropped reservations), the pod is decided on a fresh read. */
static void test_remembered_object_never_denies(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    assert_true(decide(f, "u1", NS_A, "16Gi").allowed);
    faultstore_stats st;
    faultstore_get_stats(f->fs, &st);
    assert_int_equal(st.gets, 1);
    assert_true(decide(f, "u2", NS_A, NULL).allowed); /* CPU-only: no store traffic */
    /* the pod finished: the quota is empty again (new resourceVersion) */
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    wh_validate_result r = decide(f, "u3", NS_A, "16Gi");
    assert_true(r.allowed);
    faultstore_get_stats(f->fs, &st);
    assert_int_equal(st.gets, 2);    /* the remembered object said full: read again */
    assert_int_equal(st.updates, 2); /* and no write was wasted on it */
    /* next admission starts from the object the write returned: no GET */
    quota(f, "team-b", "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    assert_true(decide(f, "b1", "team-b", "16Gi").allowed);
    assert_true(decide(f, "b2", "team-b", "16Gi").allowed);
    faultstore_get_stats(f->fs, &st);
    assert_int_equal(st.gets, 3);
    assert_int_equal(st.updates, 4);
    assert_int_equal(n_reservations(f, "GPUQuota", "team-b", "q"), 2);
}

static void test_conflict_storm(void **state)
{
    fx *f = *state;
    faultstore_faults fl = {.conflict_every = 2};
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    faultstore_set_faults(f->fs, &fl);
    char uid[32];
    int allowed = 0;
    for (int i = 0; i < 6; i++) {
        snprintf(uid, sizeof(uid), "u%d", i);
        allowed += decide(f, uid, NS_A, "16Gi").allowed;
    }
    assert_int_equal(allowed, 4);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 4);
    faultstore_stats st;
    faultstore_get_stats(f->fs, &st);
    /* writes 2, 4 and 6 are refused, 1, 3, 5 and 7 land */
    assert_int_equal(st.updates, 7);
    assert_int_equal(st.conflicts, 3);
    /* every write refused: gives up after the retries, denies */
    fl.conflict_every = 1;
    faultstore_set_faults(f->fs, &fl);
    wh_validate_opts o = {.max_retries = 4, .budget_ms = 60000};
    fx_validator(f, &o);
    quota(f, "team-b", "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    wh_validate_result r = decide(f, "z", "team-b", "16Gi");
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_ECONFLICT);
    assert_string_equal(r.message, "gpuquota could not charge quota team-b/q: the quota kept "
                                   "changing (4 conflicting updates in a row)");
    /* ... or when the time budget runs out first */
    o = (wh_validate_opts){.max_retries = 1000, .budget_ms = 1, .backoff_ms = 5};
    fx_validator(f, &o);
    r = decide(f, "z2", "team-b", "16Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "gpuquota could not charge quota team-b/q: the quota kept "
                                   "changing (1 conflicting update in a row)");
    faultstore_set_faults(f->fs, NULL);
    assert_int_equal(n_reservations(f, "GPUQuota", "team-b", "q"), 0);
}

static void test_rollback_when_second_denies(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "a-big", "{\"gpu-memory\":\"64Gi\"}", NULL);
    quota(f, NS_A, "b-small", "{\"gpu-memory\":\"8Gi\"}", NULL);
    wh_validate_result r = decide(f, "u1", NS_A, "16Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: b-small, requested: gpu-memory=16Gi, used: "
                                   "gpu-memory=0, limited: gpu-memory=8Gi");
    assert_int_equal(r.n_charged, 0);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "a-big"), 0);
    r = decide(f, "u2", NS_A, "8Gi");
    assert_true(r.allowed);
    assert_string_equal(r.charged, "GPUQuota team-a/a-big, GPUQuota team-a/b-small");
}

/* The rollback gives back the shared claim records the admission added,
 * not only the pod's own reservation (they stayed until they expired, and
 * held the quota's GPUs meanwhile). */
static void test_rollback_releases_claims(void **state)
{
    fx *f = *state;
    char pod[2048];
    quota(f, NS_A, "a-gpus", "{\"gpus\":\"4\"}", NULL);
    quota(f, NS_A, "b-small", "{\"gpu-memory\":\"8Gi\"}", NULL);
    pod_json(pod, sizeof(pod), NS_A, "16Gi",
             ",\"labels\":{\"gpuquota.io/managed\":\"true\"},\"annotations\":{"
             "\"gpuquota.io/gpu-claims\":\"{\\\"gpu\\\":{\\\"gpus\\\":1,\\\"memory\\\":"
             "\\\"80Gi\\\",\\\"claim\\\":\\\"c6\\\",\\\"uid\\\":\\\"u-c6\\\"}}\"}",
             ",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c6\"}]");
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "exceeded quota: b-small"));
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "a-gpus"), 0);
}

static void test_store_down_denies(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    faultstore_faults fl = {.fail = GQ_EIO, .fail_ops = FS_GET};
    faultstore_set_faults(f->fs, &fl);
    wh_validate_result r = decide(f, "u1", NS_A, "16Gi");
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_EIO);
    assert_string_equal(r.message, "gpuquota could not reach the API server to charge quota "
                                   "team-a/q: injected failure: I/O error");
    fl.fail_ops = FS_UPDATE;
    faultstore_set_faults(f->fs, &fl);
    r = decide(f, "u2", NS_A, "16Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "gpuquota could not reach the API server to charge quota "
                                   "team-a/q: injected failure: I/O error");
    fl.fail_ops = FS_LIST;
    faultstore_set_faults(f->fs, &fl);
    r = decide(f, "u3", NS_A, "16Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "gpuquota could not reach the API server to read the "
                                   "GPULimitRanges of team-a: injected failure: I/O error");
    /* a CPU-only pod never touches the store */
    r = decide(f, "u4", NS_A, NULL);
    assert_true(r.allowed);
    faultstore_set_faults(f->fs, NULL);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 0);
}

static void test_limit_range_and_invalid_pod(void **state)
{
    fx *f = *state;
    char pod[2048];
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPULimitRange\",\"metadata\":"
             "{\"name\":\"lr\",\"namespace\":\"team-a\"},\"spec\":{\"limits\":[{\"type\":"
             "\"Container\",\"max\":{\"gpu-memory\":\"20Gi\"}}]}}");
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    wh_validate_result r = decide(f, "u1", NS_A, "24Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message,
                        "maximum gpu-memory usage per Container is 20Gi, but limit is 24Gi");
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 0);
    assert_true(decide(f, "u2", NS_A, "20Gi").allowed);
    snprintf(pod, sizeof(pod),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{"
             "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
             "\"1.5\"}}}]}}");
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message,
                        "container \"c\": nvidia.com/gpu \"1.5\" is not valid: a GPU fraction must "
                        "be in (0, 1] (for example \"0.5\" or \"500m\"); ask for whole GPUs as an "
                        "integer");
}

static void test_exempt_cpu_only_require_quota(void **state)
{
    fx *f = *state;
    f->cfg->require_quota = true;
    wh_validate_result r = decide(f, "u1", NS_A, "16Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "insufficient quota to consume: gpu-memory,gpu-pods");
    assert_true(decide(f, "u2", NS_A, NULL).allowed);
    char **saved = f->cfg->exempt_namespaces;
    size_t n_saved = f->cfg->n_exempt_namespaces;
    char *exempt[] = {"kube-system"};
    f->cfg->exempt_namespaces = exempt;
    f->cfg->n_exempt_namespaces = 1;
    assert_true(decide(f, "u3", "kube-system", "16Gi").allowed);
    f->cfg->exempt_namespaces = saved;
    f->cfg->n_exempt_namespaces = n_saved;
    f->cfg->require_quota = false;
    faultstore_stats st;
    faultstore_get_stats(f->fs, &st);
    assert_int_equal(st.gets, 0);
}

/* gpuquota's records are read back only where gpuquota wrote them: a
 * gpu-requests (and managed label) the pod's author wrote cannot lower the
 * charge of time-sliced GPUs below whole cards. */
static void test_author_records_not_trusted(void **state)
{
    fx *f = *state;
    size_t len;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"100Gi\"}", NULL);
    char *pod = at_read_data("pods/forged-shared-requests.json", &len);
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    free(pod);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=320Gi, used: "
                                   "gpu-memory=0, limited: gpu-memory=100Gi");
    pod = at_read_data("pods/forged-shared-requests-unlabelled.json", &len);
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    free(pod);
    assert_false(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 320LL << 30);
    /* the same record written by gpuquota (the pod's history does not name
     * the author for it) is what the pod reserves */
    pod = at_read_data("pods/rewritten-shared.json", &len);
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    free(pod);
    assert_true(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 4LL << 30);
}

/* DRA claims are not charged yet: where any gpuquota quota governs the
 * namespace, a pod with spec.resourceClaims is denied, naming the claim; in
 * other namespaces it passes. */
static void test_dra_claims(void **state)
{
    fx *f = *state;
    char pod[2048];
    const char *claims = ",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
                         "\"single-gpu\"}]";
#define CLAIM_TAIL(ns, by)                                                                         \
    ": gpuquota cannot tell which GPUs the pod's DRA claims hold, so namespace " ns                \
    ", governed by " by ", does not admit it; ask for GPUs through a ResourceClaimTemplate or a "  \
    "ResourceClaim that exists when the pod is created, with a count of devices (the warnings "    \
    "say which could not be priced), or in the container's resources"
#define CLAIM_MSG(ns, by)                                                                          \
    "spec.resourceClaims[0] \"gpu\" (resourceClaimTemplateName \"single-gpu\")" CLAIM_TAIL(ns, by)
    /* no quota anywhere: passes, charged nothing */
    pod_json(pod, sizeof(pod), NS_A, NULL, NULL, claims);
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_PODS], 0);
    /* requireQuota governs every namespace */
    f->cfg->require_quota = true;
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, CLAIM_MSG("team-a", "requireQuota"));
    f->cfg->require_quota = false;
    /* a GPUQuota of the namespace, whatever it limits; dry runs alike */
    quota(f, NS_A, "q", "{\"gpus\":\"4\"}", NULL);
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, CLAIM_MSG("team-a", "GPUQuota team-a/q"));
    rv_opts dry = {"CREATE", USER, NULL, true, NULL, false};
    assert_false(decide_ex(f, "u4", NS_A, pod, &dry, NULL).allowed);
    /* with a GPU asked as well, the claim is still refused */
    pod_json(pod, sizeof(pod), NS_A, "8Gi", NULL, claims);
    r = decide_ex(f, "u5", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, CLAIM_MSG("team-a", "GPUQuota team-a/q"));
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 0);
    /* a tenant covering the namespace by its labels; the claim as written
     * before Kubernetes 1.31 (source) */
    namespace_(f, "ml-b", "{\"team\":\"ml\"}");
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
             "\"metadata\":{\"name\":\"ml\"},\"spec\":{\"namespaceSelector\":{\"matchLabels\":"
             "{\"team\":\"ml\"}},\"hard\":{\"gpu-memory\":\"64Gi\"}}}");
    pod_json(pod, sizeof(pod), "ml-b", NULL, NULL,
             ",\"resourceClaims\":[{\"name\":\"dev\",\"source\":{\"resourceClaimName\":"
             "\"shared-a100\"}},{\"name\":\"nic\"}]");
    r = decide_ex(f, "u6", "ml-b", pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "spec.resourceClaims[0] \"dev\" (resourceClaimName "
                                   "\"shared-a100\")" CLAIM_TAIL("ml-b", "GPUTenantQuota ml"));
    /* a namespace no quota covers; an empty list is no claim */
    namespace_(f, "web", "{\"team\":\"web\"}");
    pod_json(pod, sizeof(pod), "web", NULL, NULL, claims);
    assert_true(decide_ex(f, "u7", "web", pod, NULL, NULL).allowed);
    pod_json(pod, sizeof(pod), NS_A, NULL, NULL, ",\"resourceClaims\":[]");
    assert_true(decide_ex(f, "u8", NS_A, pod, NULL, NULL).allowed);
    /* the caches cannot be read: fail closed for a pod with claims only */
    faultstore_faults fl = {.fail = GQ_EIO, .fail_ops = FS_LIST};
    faultstore_set_faults(f->fs, &fl);
    pod_json(pod, sizeof(pod), "web", NULL, NULL, claims);
    r = decide_ex(f, "u9", "web", pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "gpuquota could not reach the API server to read the quotas "
                                   "of web: injected failure: I/O error");
    assert_true(decide(f, "u10", "web", NULL).allowed);
    faultstore_set_faults(f->fs, NULL);
#undef CLAIM_MSG
}

/* A managed pod naming ResourceClaim claim (uid, gpus devices of 80Gi) as
 * the mutating webhook records it. */
static void shared_pod(char *buf, size_t cap, const char *claim, const char *uid, int gpus)
{
    char meta[512], spec[160];
    snprintf(meta, sizeof(meta),
             ",\"labels\":{\"gpuquota.io/managed\":\"true\"},\"annotations\":{"
             "\"gpuquota.io/gpu-claims\":\"{\\\"gpu\\\":{\\\"gpus\\\":%d,\\\"memory\\\":"
             "\\\"%dGi\\\",\\\"claim\\\":\\\"%s\\\",\\\"uid\\\":\\\"%s\\\"}}\"}",
             gpus, gpus * 80, claim, uid);
    snprintf(spec, sizeof(spec),
             ",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":"
             "\"%s\"}]",
             claim);
    pod_json(buf, cap, NS_A, NULL, meta, spec);
}

/* Whether quota ns/name holds a claim record for uid, and how many. */
static size_t claim_records(fx *f, const char *ns, const char *name, const char *uid)
{
    size_t found = 0, n = n_reservations(f, "GPUQuota", ns, name);
    for (size_t i = 0; i < n; i++) {
        json_object *r = reservation(f, ns, name, i), *c = NULL;
        if (json_object_object_get_ex(r, "claim", &c) && json_object_get_boolean(c) &&
            !strcmp(sget(r, "key"), uid))
            found++;
        json_object_put(r);
    }
    return found;
}

/* A ResourceClaim named by several pods is charged once per quota; every
 * pod counts in gpu-pods; a denial gives the claim's charge back. */
static void test_shared_claim_charged_once(void **state)
{
    fx *f = *state;
    char pod[4096];
    quota(f, NS_A, "q", "{\"gpus\":\"3\",\"gpu-memory\":\"240Gi\",\"gpu-pods\":10}", NULL);
    quota(f, NS_A, "r", "{\"gpu-pods\":3}", NULL);
    shared_pod(pod, sizeof(pod), "pair", "u-pair", 2);
    wh_validate_result r = decide_ex(f, "s1", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPUS], 2);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 2);
    assert_int_equal(claim_records(f, NS_A, "q", "u-pair"), 1);
    json_object *own = reservation(f, NS_A, "q", 0);
    assert_string_equal(sget(own, "key"), "s1");
    assert_string_equal(sget(own, "gpus"), "0"); /* the claim's devices are in its record */
    assert_string_equal(sget(own, "gpu-pods"), "1");
    json_object_put(own);
    json_object *rec = reservation(f, NS_A, "q", 1);
    assert_string_equal(sget(rec, "pod"), "pair");
    assert_string_equal(sget(rec, "gpus"), "2");
    assert_string_equal(sget(rec, "gpu-memory"), "160Gi");
    assert_string_equal(sget(rec, "gpu-pods"), "0");
    json_object_put(rec);
    /* a second pod naming it adds itself only, even where the claim would
     * not fit again */
    assert_true(decide_ex(f, "s2", NS_A, pod, NULL, NULL).allowed);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 3);
    assert_int_equal(claim_records(f, NS_A, "q", "u-pair"), 1);
    /* another claim past spec.hard is denied */
    shared_pod(pod, sizeof(pod), "two", "u-two", 2);
    r = decide_ex(f, "s3", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=160Gi,gpus=2, used: "
                                   "gpu-memory=160Gi,gpus=2, limited: gpu-memory=240Gi,gpus=3");
    /* one that fits q is charged there, then refused by r (gpu-pods): its
     * claim record goes back with the pod's reservation */
    assert_true(decide_ex(f, "s4", NS_A, pod, NULL, NULL).allowed == false);
    shared_pod(pod, sizeof(pod), "one", "u-one", 1);
    assert_true(decide_ex(f, "s5", NS_A, pod, NULL, NULL).allowed); /* r: 3 of 3 */
    assert_int_equal(claim_records(f, NS_A, "q", "u-one"), 1);
    shared_pod(pod, sizeof(pod), "pair", "u-pair", 2);
    r = decide_ex(f, "s6", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: r, requested: gpu-pods=1, used: gpu-pods=3, "
                                   "limited: gpu-pods=3");
    assert_int_equal(claim_records(f, NS_A, "q", "u-pair"), 1); /* not this admission's */
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 5);
    quota(f, NS_A, "r", "{\"gpu-pods\":10}", NULL);
    shared_pod(pod, sizeof(pod), "more", "u-more", 1);
    quota(f, NS_A, "s", "{\"gpus\":\"0\"}", NULL);
    r = decide_ex(f, "s7", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_int_equal(claim_records(f, NS_A, "q", "u-more"), 0); /* given back */
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 5);
}

/* A pod naming a claim the controller counts (a counted record) adds its
 * pod count only; its reservation names the claim, which keeps the claim
 * charged until the controller has seen the pod (test_ctl); the claim is
 * never charged twice. */
static void test_shared_claim_counted(void **state)
{
    fx *f = *state;
    char pod[4096];
    quota(f, NS_A, "q", "{\"gpus\":\"2\",\"gpu-pods\":10}",
          "#,\"status\":{\"used\":{\"gpus\":\"2\",\"gpu-pods\":\"1\"},\"reservations\":[{"
          "\"key\":\"u-pair\",\"namespace\":\"team-a\",\"pod\":\"pair\",\"gpu-memory\":"
          "\"160Gi\",\"gpus\":\"2\",\"gpu-pods\":\"0\",\"expires\":\"1970-01-01T00:00:00Z\","
          "\"claim\":true,\"counted\":true}]}");
    shared_pod(pod, sizeof(pod), "pair", "u-pair", 2);
    assert_true(decide_ex(f, "k1", NS_A, pod, NULL, NULL).allowed);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 2);
    assert_int_equal(claim_records(f, NS_A, "q", "u-pair"), 1);
    json_object *rec = reservation(f, NS_A, "q", 0), *own = reservation(f, NS_A, "q", 1), *v;
    assert_true(json_object_object_get_ex(rec, "counted", &v) && json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(own, "claims", &v));
    assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), "[\"u-pair\"]");
    json_object_put(rec);
    json_object_put(own);
    /* once: another claim sees it in used only */
    shared_pod(pod, sizeof(pod), "one", "u-one", 1);
    wh_validate_result r = decide_ex(f, "k2", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpus=1, used: gpus=2, limited: "
                                   "gpus=2");
    shared_pod(pod, sizeof(pod), "pair", "u-pair", 2);
    assert_true(decide_ex(f, "k3", NS_A, pod, NULL, NULL).allowed);
    assert_int_equal(claim_records(f, NS_A, "q", "u-pair"), 1);
}

typedef struct claim_worker {
    fx *f;
    int i;
    bool allowed;
} claim_worker;

static void *claim_work(void *arg)
{
    claim_worker *w = arg;
    char uid[32], pod[4096];
    snprintf(uid, sizeof(uid), "cw-%d", w->i);
    shared_pod(pod, sizeof(pod), "race", "u-race", 1);
    w->allowed = decide_ex(w->f, uid, NS_A, pod, NULL, NULL).allowed;
    return NULL;
}

/* Concurrent admissions naming one new claim, with write conflicts: the
 * claim is charged once, so all fit a quota with room for it once. */
static void test_shared_claim_concurrent(void **state)
{
    enum { N = 40 };
    fx *f = *state;
    static claim_worker ws[N];
    static pthread_t th[N];
    quota(f, NS_A, "q", "{\"gpus\":\"1\",\"gpu-pods\":100}", NULL);
    faultstore_faults fl = {.conflict_every = 2, .latency_us = 100};
    faultstore_set_faults(f->fs, &fl);
    for (int i = 0; i < N; i++) {
        ws[i] = (claim_worker){f, i, false};
        assert_int_equal(pthread_create(&th[i], NULL, claim_work, &ws[i]), 0);
    }
    int allowed = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        allowed += ws[i].allowed;
    }
    faultstore_set_faults(f->fs, NULL);
    assert_int_equal(allowed, N);
    assert_int_equal(claim_records(f, NS_A, "q", "u-race"), 1);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), N + 1);
}

/* A GPU is never free: a quota on gpu-memory alone limits whole GPUs of
 * unknown model, charged as the largest model the namespace may use. */
static void test_unknown_model_whole_gpus(void **state)
{
    fx *f = *state;
    char pod[2048];
    quota(f, NS_A, "q", "{\"gpu-memory\":\"300Gi\"}", NULL);
    snprintf(pod, sizeof(pod),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"w\","
             "\"namespace\":\"%s\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}",
             NS_A);
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 282LL << 30);
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=282Gi, used: "
                                   "gpu-memory=282Gi, limited: gpu-memory=300Gi");
    /* with allowedModels the largest allowed model prices it (and the
     * GPULimitRange wants a model named) */
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPULimitRange\",\"metadata\":"
             "{\"name\":\"lr\",\"namespace\":\"team-a\"},\"spec\":{\"limits\":[{\"type\":"
             "\"Container\",\"allowedModels\":[\"t4\",\"l4\"]}]}}");
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 48LL << 30);
    assert_string_equal(r.message, "GPU model must be set (annotation gpuquota.io/gpu-model) in "
                                   "namespace \"team-a\"; allowed: t4, l4");
}

/* Zero of any GPU resource or request annotation asks for no GPU (a chart's
 * nvidia.com/gpu: 0): allowed, charged nothing, the store never asked,
 * even where requireQuota and an explicit 0 would refuse any GPU pod. */
static void test_zero_asks_for_no_gpu(void **state)
{
    fx *f = *state;
    static const struct {
        const char *meta, *res;
    } pods[] = {
        {"", "{\"limits\":{\"nvidia.com/gpu\":\"0\"},\"requests\":{\"nvidia.com/gpu\":0}}"},
        {"", "{\"limits\":{\"gpuquota.io/gpu-memory\":\"0\"}}"},
        {"", "{\"limits\":{\"aliyun.com/gpu-mem\":0}}"},
        {"", "{\"limits\":{\"nvidia.com/gpumem\":\"0\",\"nvidia.com/gpu\":\"0\"}}"},
        {"", "{\"limits\":{\"volcano.sh/vgpu-number\":\"0\"}}"},
        {",\"annotations\":{\"gpuquota.io/gpu-memory\":\"0\"}", "{}"},
        {",\"annotations\":{\"gpuquota.io/gpu-fraction\":\"0\",\"gpu-fraction\":\"0\"}", "{}"},
    };
    f->cfg->require_quota = true;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"0\",\"gpu-pods\":\"0\"}", NULL);
    faultstore_faults fl = {.fail = GQ_EIO};
    faultstore_set_faults(f->fs, &fl);
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
        char pod[2048];
        snprintf(pod, sizeof(pod),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"z\","
                 "\"namespace\":\"%s\"%s},\"spec\":{\"containers\":[{\"name\":\"c\","
                 "\"image\":\"x\",\"resources\":%s}]}}",
                 NS_A, pods[i].meta, pods[i].res);
        wh_validate_result r = decide_ex(f, "u", NS_A, pod, NULL, NULL);
        if (!r.allowed)
            fail_msg("pod %zu: %s", i, r.message);
        assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 0);
        assert_int_equal(r.charge.v[GQ_KEY_GPU_PODS], 0);
        assert_int_equal(r.n_charged, 0);
    }
    /* a GPU next to the zero is still charged (and here refused) */
    faultstore_set_faults(f->fs, NULL);
    assert_false(decide(f, "u2", NS_A, "1Gi").allowed);
    f->cfg->require_quota = false;
}

/* A pod that asks for no GPU passes however large it is, without a look at
 * the store; the same pod asking for a GPU is denied naming the cap. */
static void test_large_pod_without_gpu(void **state)
{
    fx *f = *state;
    f->cfg->require_quota = true;
    faultstore_faults fl = {.fail = GQ_EIO, .fail_ops = FS_GET | FS_UPDATE | FS_LIST};
    faultstore_set_faults(f->fs, &fl);
    char *pod = at_large_pod(NS_A, 3600, NULL);
    wh_validate_result r = decide_ex(f, "u1", NS_A, pod, NULL, NULL);
    free(pod);
    assert_true(r.allowed);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_PODS], 0);
    pod = at_large_pod(NS_A, 3600, "\"nvidia.com/gpu\":\"1\"");
    r = decide_ex(f, "u2", NS_A, pod, NULL, NULL);
    free(pod);
    assert_false(r.allowed);
    assert_string_equal(r.message, "container \"c3599\" asks for a GPU and the pod has 3600 "
                                   "containers (app and init); a pod that uses a GPU may have at "
                                   "most 256");
    faultstore_set_faults(f->fs, NULL);
    f->cfg->require_quota = false;
}

static void test_tamper(void **state)
{
    fx *f = *state;
    char old[2048], now[2048];
    static const struct {
        const char *old_meta, *new_meta, *user;
        bool allowed;
        const char *msg;
    } cases[] = {
        {"", ",\"labels\":{\"gpuquota.io/managed\":\"true\"}", USER, false,
         "changing gpuquota.io/ labels and annotations is reserved to gpuquota (label "
         "gpuquota.io/managed)"},
        {",\"annotations\":{\"gpuquota.io/reservation\":\"k\"}", ",\"annotations\":{}", USER, false,
         "changing gpuquota.io/ labels and annotations is reserved to gpuquota (annotation "
         "gpuquota.io/reservation)"},
        {",\"annotations\":{\"gpuquota.io/gpu-memory\":\"8Gi\"}",
         ",\"annotations\":{\"gpuquota.io/gpu-memory\":\"1Gi\"}", USER, false,
         "changing gpuquota.io/ labels and annotations is reserved to gpuquota (annotation "
         "gpuquota.io/gpu-memory)"},
        {",\"labels\":{\"gpuquota.io/managed\":\"true\"}", "", USER, false,
         "changing gpuquota.io/ labels and annotations is reserved to gpuquota (label "
         "gpuquota.io/managed)"},
        {"", ",\"labels\":{\"app\":\"x\"},\"annotations\":{\"example.com/gpuquota.io\":\"x\"}",
         USER, true, ""},
        {",\"labels\":{\"gpuquota.io/managed\":\"true\"}",
         ",\"labels\":{\"gpuquota.io/managed\":\"true\",\"app\":\"y\"}", USER, true, ""},
        {"", ",\"labels\":{\"gpuquota.io/managed\":\"true\"}", WH_TRUSTED_WEBHOOK, true, ""},
        {",\"annotations\":{\"gpuquota.io/reservation\":\"k\"}", "", WH_TRUSTED_CONTROLLER, true,
         ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pod_json(old, sizeof(old), NS_A, "8Gi", cases[i].old_meta, NULL);
        pod_json(now, sizeof(now), NS_A, "8Gi", cases[i].new_meta, NULL);
        rv_opts o = {"UPDATE", cases[i].user, old, false, NULL, false};
        wh_validate_result r = decide_ex(f, "t", NS_A, now, &o, NULL);
        assert_int_equal(r.allowed, cases[i].allowed);
        assert_string_equal(r.message, cases[i].msg);
    }
    /* --trusted-user replaces the defaults */
    const char *users[] = {"bob"};
    wh_validate_opts vo = {.trusted_users = users, .n_trusted_users = 1};
    fx_validator(f, &vo);
    pod_json(old, sizeof(old), NS_A, "8Gi", "", NULL);
    pod_json(now, sizeof(now), NS_A, "8Gi", ",\"labels\":{\"gpuquota.io/managed\":\"true\"}", NULL);
    rv_opts bob = {"UPDATE", "bob", old, false, NULL, false};
    assert_true(decide_ex(f, "t", NS_A, now, &bob, NULL).allowed);
    rv_opts wh = {"UPDATE", WH_TRUSTED_WEBHOOK, old, false, NULL, false};
    assert_false(decide_ex(f, "t", NS_A, now, &wh, NULL).allowed);
    /* DELETE is never checked */
    rv_opts del = {"DELETE", USER, old, false, NULL, false};
    assert_true(decide_ex(f, "t", NS_A, "null", &del, NULL).allowed);
    /* pods/status can carry metadata changes too; other subresources not */
    rv_opts st = {"UPDATE", USER, old, false, "status", false};
    assert_false(decide_ex(f, "t", NS_A, now, &st, NULL).allowed);
    rv_opts eph = {"UPDATE", USER, old, false, "ephemeralcontainers", false};
    assert_true(decide_ex(f, "t", NS_A, now, &eph, NULL).allowed);
    /* a CREATE on a subresource (binding, eviction) is not a pod creation */
    rv_opts bind = {"CREATE", USER, NULL, false, "binding", false};
    assert_true(decide_ex(f, "t", NS_A, now, &bind, NULL).allowed);
}

/* gpuquota's gates come off by its controller only: the queue's, and the
 * one that holds a pod until its DRA claims are checked. */
static void test_gates_are_gpuquotas(void **state)
{
    fx *f = *state;
    char old[2048], now[2048];
    static const struct {
        const char *old_gates, *new_gates, *user;
        const char *msg; /* NULL: allowed */
    } cases[] = {
        {"[{\"name\":\"gpuquota.io/claims\"}]", "[]", USER,
         "the scheduling gate gpuquota.io/claims is removed by gpuquota only: the pod waits until "
         "gpuquota has checked that its DRA claims are the ones charged (kubectl describe pod "
         "shows why it waits)"},
        {"[{\"name\":\"gpuquota.io/quota\"},{\"name\":\"gpuquota.io/claims\"}]",
         "[{\"name\":\"gpuquota.io/claims\"}]", USER,
         "the scheduling gate gpuquota.io/quota is removed by gpuquota only: the pod waits for "
         "quota (kubectl get gq,gtq shows the queue)"},
        {"[{\"name\":\"mine\"},{\"name\":\"gpuquota.io/claims\"}]",
         "[{\"name\":\"gpuquota.io/claims\"}]", USER, NULL}, /* the author's own gate */
        {"[{\"name\":\"gpuquota.io/claims\"}]", "[]", WH_TRUSTED_CONTROLLER, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char og[256], ng[256];
        snprintf(og, sizeof og, ",\"schedulingGates\":%s", cases[i].old_gates);
        snprintf(ng, sizeof ng, ",\"schedulingGates\":%s", cases[i].new_gates);
        pod_json(old, sizeof(old), NS_A, "8Gi", "", og);
        pod_json(now, sizeof(now), NS_A, "8Gi", "", ng);
        rv_opts o = {"UPDATE", cases[i].user, old, false, NULL, false};
        wh_validate_result r = decide_ex(f, "t", NS_A, now, &o, NULL);
        assert_int_equal(r.allowed, cases[i].msg == NULL);
        assert_string_equal(r.message, cases[i].msg ? cases[i].msg : "");
    }
}

/* A checked ResourceClaim's finalizer, label and annotation are
 * gpuquota's: a tenant who could remove them could delete the claim and
 * make it again with more devices before the pod is bound. */
static void test_claim_pins_are_gpuquotas(void **state)
{
    fx *f = *state;
    char old[1024], now[1024];
#define CLAIM(buf, meta)                                                                           \
    snprintf(buf, sizeof buf,                                                                      \
             "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{"    \
             "\"name\":\"c\",\"namespace\":\"" NS_A "\"%s},\"spec\":{}}",                          \
             meta)
    static const struct {
        const char *old_meta, *new_meta, *user;
        const char *msg; /* NULL: allowed */
    } cases[] = {
        {",\"finalizers\":[\"gpuquota.io/charged-claim\"]", ",\"finalizers\":[]", USER,
         "the finalizer gpuquota.io/charged-claim is removed by gpuquota only: it keeps the claim "
         "a "
         "pod was checked against from being deleted and made again until the pod is bound or "
         "gone"},
        {"", ",\"finalizers\":[\"gpuquota.io/charged-claim\"]", USER,
         "the finalizer gpuquota.io/charged-claim is added by gpuquota only: it keeps the claim a "
         "pod was checked against from being deleted and made again until the pod is bound or "
         "gone"},
        {",\"annotations\":{\"gpuquota.io/pinned-for\":\"{}\"}", ",\"annotations\":{}", USER,
         "changing gpuquota.io/ labels and annotations is reserved to gpuquota (annotation "
         "gpuquota.io/pinned-for)"},
        {",\"labels\":{\"gpuquota.io/pinned\":\"true\"}", "", USER,
         "changing gpuquota.io/ labels and annotations is reserved to gpuquota (label "
         "gpuquota.io/pinned)"},
        /* other finalizers and keys are the tenant's */
        {",\"finalizers\":[\"gpuquota.io/charged-claim\",\"x/y\"]",
         ",\"finalizers\":[\"gpuquota.io/charged-claim\"],\"labels\":{\"app\":\"a\"}", USER, NULL},
        {",\"finalizers\":[\"gpuquota.io/charged-claim\"]", ",\"finalizers\":[]",
         WH_TRUSTED_CONTROLLER, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CLAIM(old, cases[i].old_meta);
        CLAIM(now, cases[i].new_meta);
        rv_opts o = {"UPDATE", cases[i].user, old, false, NULL, true};
        wh_validate_result r = decide_ex(f, "t", NS_A, now, &o, NULL);
        assert_int_equal(r.allowed, cases[i].msg == NULL);
        assert_string_equal(r.message, cases[i].msg ? cases[i].msg : "");
    }
    /* a claim's creation and deletion are the tenant's, but not with
     * gpuquota's pin: a claim created with the finalizer and without the
     * label would never be unpinned, nor its namespace deleted */
    CLAIM(now, "");
    rv_opts create = {"CREATE", USER, NULL, false, NULL, true};
    assert_true(decide_ex(f, "t", NS_A, now, &create, NULL).allowed);
    CLAIM(now, ",\"finalizers\":[\"gpuquota.io/charged-claim\"]");
    wh_validate_result r = decide_ex(f, "t", NS_A, now, &create, NULL);
    assert_false(r.allowed);
    assert_non_null(
        strstr(r.message, "the finalizer gpuquota.io/charged-claim is added by gpuquota only"));
    CLAIM(now, ",\"labels\":{\"gpuquota.io/pinned\":\"true\"}");
    assert_false(decide_ex(f, "t", NS_A, now, &create, NULL).allowed);
    rv_opts ctl = {"CREATE", WH_TRUSTED_CONTROLLER, NULL, false, NULL, true};
    assert_true(decide_ex(f, "t", NS_A, now, &ctl, NULL).allowed);
#undef CLAIM
}

/* ---- concurrency -------------------------------------------------------------- */

typedef struct worker {
    fx *f;
    int i;
    bool allowed;
    const char *ns;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char uid[32];
    snprintf(uid, sizeof(uid), "c-%d", w->i);
    wh_validate_result r = decide(w->f, uid, w->ns, "1Gi");
    w->allowed = r.allowed;
    if (!r.allowed && strncmp(r.message, "exceeded quota: q,", 18))
        fprintf(stderr, "unexpected denial: %s\n", r.message);
    return NULL;
}

static void run_concurrent(fx *f, unsigned conflict_every, unsigned latency_us)
{
    enum { N = 200 };
    static worker ws[N];
    static pthread_t th[N];
    quota(f, NS_A, "q", "{\"gpu-memory\":\"10Gi\",\"gpu-pods\":100}", NULL);
    faultstore_faults fl = {.conflict_every = conflict_every, .latency_us = latency_us};
    faultstore_set_faults(f->fs, &fl);
    for (int i = 0; i < N; i++) {
        ws[i] = (worker){f, i, false, NS_A};
        assert_int_equal(pthread_create(&th[i], NULL, work, &ws[i]), 0);
    }
    int allowed = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        allowed += ws[i].allowed;
    }
    faultstore_set_faults(f->fs, NULL);
    assert_int_equal(allowed, 10);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "q"), 10);
    wh_validate_stats vs;
    wh_validate_get_stats(f->v, &vs);
    assert_int_equal(vs.charged, 10);
}

static void test_concurrent_exactly_ten(void **state)
{
    run_concurrent(*state, 0, 200);
}

static void test_concurrent_exactly_ten_with_conflicts(void **state)
{
    run_concurrent(*state, 2, 100);
}

static void test_concurrent_no_coalescing(void **state)
{
    fx *f = *state;
    wh_validate_opts o = {.max_batch = 1, .max_retries = 1000};
    fx_validator(f, &o);
    run_concurrent(f, 3, 0);
}

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
    wh_request rq = {.method = "POST",
                     .path = "/validate",
                     .content_type = "application/json",
                     .body = body,
                     .body_len = strlen(body),
                     .remote_addr = ""};
    wh_response rs;
    wh_response_init(&rs);
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
    wh_response_dispose(&rs);
    rq.body = "{\"kind\":\"AdmissionReview\"}";
    rq.body_len = strlen(rq.body);
    wh_response_init(&rs);
    wh_validate_handle(f->v, &rq, &rs);
    assert_int_equal(rs.status, 400);
    wh_response_dispose(&rs);
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
    wh_metrics *m = NULL;
    assert_int_equal(wh_audit_open(&ac, &audit, NULL), GQ_OK);
    assert_int_equal(wh_metrics_new("test", &m), GQ_OK);
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
    assert_int_equal(wh_metrics_render(m, &text, &len), GQ_OK);
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

/* ---- pod-group members agree on the size ---------------------------------- */

/* The store's list of a group's pods: members (a JSON array text) or an
 * error; records what it was asked. */
static struct {
    const char *members;
    gq_code fail;
    unsigned calls;
    char ns[64], group[64];
} group_list;

static gq_code list_group_pods(void *ctx, const char *ns, const char *group, json_object **out,
                               gq_err *err)
{
    (void)ctx;
    group_list.calls++;
    snprintf(group_list.ns, sizeof(group_list.ns), "%s", ns);
    snprintf(group_list.group, sizeof(group_list.group), "%s", group);
    if (group_list.fail)
        return gq_err_set(err, group_list.fail, "GET /api/v1/namespaces/%s/pods: HTTP 503", ns);
    *out = json_tokener_parse(group_list.members);
    return *out ? GQ_OK : gq_err_oom(err);
}

#define MEMBER(name, size, extra_meta, phase)                                                      \
    "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"gpuquota.io/pod-group\":\"train\"},"       \
    "\"annotations\":{\"gpuquota.io/pod-group-size\":\"" size "\"}" extra_meta "},"                \
    "\"status\":{\"phase\":\"" phase "\"}}"

static wh_validate_result decide_member(fx *f, const char *uid, const char *size)
{
    char meta[256], pod[2048];
    snprintf(meta, sizeof(meta),
             ",\"labels\":{\"gpuquota.io/pod-group\":\"train\"},\"annotations\":{\"gpuquota.io/"
             "pod-group-size\":\"%s\"}",
             size);
    pod_json(pod, sizeof(pod), NS_A, "8Gi", meta,
             ",\"schedulingGates\":[{\"name\":\"gpuquota.io/quota\"}]");
    return decide_ex(f, uid, NS_A, pod, NULL, NULL);
}

/* maxQueuedPods: a queued pod is refused while a Queue quota governing it
 * holds that many (status.queuedPods, as the controller last counted), so
 * one tenant cannot fill the controller's memory with queued pods; below
 * the cap, and for a pod that does not queue, nothing changes. */
static void test_queue_cap(void **state)
{
    fx *f = *state;
    char q[1024], pod[2048];
    const char *gate = ",\"schedulingGates\":[{\"name\":\"gpuquota.io/quota\"}]";
    f->cfg->max_queued_pods = 3;
    for (int held = 2; held <= 3; held++) {
        snprintf(q, sizeof(q),
                 "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":"
                 "{\"name\":\"team\",\"namespace\":\"%s\"},\"spec\":{\"hard\":{\"gpu-memory\":"
                 "\"64Gi\"},\"whenExceeded\":\"Queue\"},\"status\":{\"queuedPods\":%d}}",
                 NS_A, held);
        apply(f, q);
        pod_json(pod, sizeof(pod), NS_A, "8Gi", "", gate);
        wh_validate_result r = decide_ex(f, held == 2 ? "u-below" : "u-at", NS_A, pod, NULL, NULL);
        if (held == 2) {
            assert_true(r.allowed);
            continue;
        }
        assert_false(r.allowed);
        assert_int_equal(r.code, GQ_EDENIED);
        assert_string_equal(r.message,
                            "quota team-a/team already holds 3 queued pods, the most the "
                            "configuration allows (maxQueuedPods 3): wait for some to "
                            "be admitted or deleted");
        /* A pod that fits is admitted (charged) as ever: the cap is on the queue. */
        pod_json(pod, sizeof(pod), NS_A, "8Gi", "", "");
        r = decide_ex(f, "u-fits", NS_A, pod, NULL, NULL);
        assert_true(r.allowed);
    }
    /* A corrupt count is refused as any corrupt status is. */
    wh_validate_result r;
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":"
             "{\"name\":\"team\",\"namespace\":\"" NS_A "\"},\"spec\":{\"hard\":{\"gpu-memory\":"
             "\"64Gi\"},\"whenExceeded\":\"Queue\"},\"status\":{\"queuedPods\":-1}}");
    pod_json(pod, sizeof(pod), NS_A, "8Gi", "", gate);
    r = decide_ex(f, "u-bad", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "status.queuedPods: must be a non-negative integer"));
}

static void test_group_size_disagreement(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "team", "{\"gpu-memory\":\"64Gi\"}", ",\"whenExceeded\":\"Queue\"");
    memset(&group_list, 0, sizeof(group_list));

    /* A store without the member: the controller alone holds the group. */
    group_list.members = "[" MEMBER("train-0", "3", "", "Pending") "]";
    wh_validate_result r = decide_member(f, "u0", "4");
    assert_true(r.allowed);
    assert_int_equal(group_list.calls, 0);

    f->store.list_group_pods = list_group_pods;
    fx_validator(f, NULL);
    r = decide_member(f, "u1", "4");
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_EDENIED);
    assert_string_equal(r.message, "pod group train: this pod says gpuquota.io/pod-group-size=4 "
                                   "but member train-0 says 3; members of a group must agree on "
                                   "its size");
    assert_int_equal(group_list.calls, 1);
    assert_string_equal(group_list.ns, NS_A);
    assert_string_equal(group_list.group, "train");
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "team"), 0);

    /* A member that agrees is admitted to the queue; so is the first one. */
    r = decide_member(f, "u2", "3");
    assert_true(r.allowed);
    group_list.members = "[]";
    r = decide_member(f, "u3", "4");
    assert_true(r.allowed);

    /* The first member that disagrees is named, whatever agrees before it. */
    group_list.members =
        "[" MEMBER("train-0", "4", "", "Running") "," MEMBER("train-1", "2", "", "Pending") "]";
    r = decide_member(f, "u4", "4");
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "but member train-1 says 2"));

    /* Members that no longer count (ended, or past their deletion) and pods
     * whose group does not parse are no members. */
    group_list.members =
        "[" MEMBER("done", "2", "", "Succeeded") "," MEMBER("failed", "2", "", "Failed") "," MEMBER(
            "leaving", "2",
            ",\"deletionTimestamp\":\"2026-01-01T00:00:"
            "00Z\",\"deletionGracePeriodSeconds\":0",
            "Running") "," MEMBER("bad", "two", "", "Running") "]";
    r = decide_member(f, "u5", "4");
    assert_true(r.allowed);
    /* ... but one still within its grace period does. */
    group_list.members = "[" MEMBER(
        "stopping", "2",
        ",\"deletionTimestamp\":\"2027-01-15T08:00:00Z\",\"deletionGracePeriodSeconds\":30",
        "Running") "]";
    r = decide_member(f, "u6", "4");
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "but member stopping says 2"));

    /* A pod outside any group is not listed, nor a member created without
     * the gate (charged at once, as any pod). */
    unsigned calls = group_list.calls;
    r = decide(f, "u7", NS_A, "8Gi");
    char pod[2048];
    pod_json(pod, sizeof(pod), NS_A, "8Gi",
             ",\"labels\":{\"gpuquota.io/pod-group\":\"train\"},\"annotations\":{\"gpuquota.io/"
             "pod-group-size\":\"4\"}",
             NULL);
    r = decide_ex(f, "u7b", NS_A, pod, NULL, NULL);
    assert_int_equal(group_list.calls, calls);

    /* A list that fails denies: fail closed, as an error. */
    group_list.members = "[]";
    group_list.fail = GQ_EHTTP;
    r = decide_member(f, "u8", "4");
    assert_false(r.allowed);
    assert_int_not_equal(r.code, GQ_EDENIED);
    assert_string_equal(r.message, "gpuquota could not reach the API server to list the members "
                                   "of pod group train: GET /api/v1/namespaces/team-a/pods: HTTP "
                                   "503");
}

int main(void)
{
    gq_log_set_level(GQ_LOG_WARN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_allowed_charges_reservation),
        T(test_admission_record_checked),
        T(test_existing_name_not_charged),
        T(test_denied_at_limit),
        T(test_expired_reservations_ignored_and_dropped),
        T(test_tenant_across_namespaces),
        T(test_scopes),
        T(test_dry_run_not_charged),
        T(test_idempotent_retry),
        T(test_user_reservation_annotation_ignored),
        T(test_copied_pod_uid),
        T(test_remembered_object_never_denies),
        T(test_conflict_storm),
        T(test_rollback_when_second_denies),
        T(test_rollback_releases_claims),
        T(test_store_down_denies),
        T(test_limit_range_and_invalid_pod),
        T(test_exempt_cpu_only_require_quota),
        T(test_author_records_not_trusted),
        T(test_dra_claims),
        T(test_unknown_model_whole_gpus),
        T(test_zero_asks_for_no_gpu),
        T(test_large_pod_without_gpu),
        T(test_tamper),
        T(test_gates_are_gpuquotas),
        T(test_claim_pins_are_gpuquotas),
        T(test_concurrent_exactly_ten),
        T(test_concurrent_exactly_ten_with_conflicts),
        T(test_concurrent_no_coalescing),
        T(test_shared_claim_charged_once),
        T(test_shared_claim_concurrent),
        T(test_shared_claim_counted),
        T(test_handler),
        T(test_audit_and_metrics),
        T(test_bad_options),
        T(test_memstore_errors),
        T(test_queue_cap),
        T(test_group_size_disagreement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
