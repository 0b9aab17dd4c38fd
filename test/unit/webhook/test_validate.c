/* The /validate decision over the in-memory store: quota charging (fresh
 * reads, reservations, conflicts, rollback, dry run, idempotency, group
 * commit under many threads), GPULimitRange, requireQuota, fail-closed store
 * errors, the tamper check on pod updates and gpuquota's scheduling gates.
 * DRA claims, the HTTP seam and pod-group sizes have files of their own
 * (test_validate_claims.c, test_validate_http.c, test_validate_queue.c). */
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

/* ---- concurrency -------------------------------------------------------------- */

static void run_concurrent(fx *f, unsigned conflict_every, unsigned latency_us)
{
    quota(f, NS_A, "q", "{\"gpu-memory\":\"10Gi\",\"gpu-pods\":100}", NULL);
    faultstore_faults fl = {.conflict_every = conflict_every, .latency_us = latency_us};
    assert_int_equal(decide_concurrently(f, &f->v, 1, 200, "1Gi", &fl), 10);
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

/* Threads of this process (/proc/self/status). */
static long thread_count(void)
{
    char line[256];
    long n = -1;
    FILE *fp = fopen("/proc/self/status", "r");
    assert_non_null(fp);
    while (fgets(line, sizeof(line), fp))
        if (!strncmp(line, "Threads:", 8))
            n = strtol(line + 8, NULL, 10);
    fclose(fp);
    return n;
}

/* inline_charges: no thread is started, and
 * the caller's own thread charges, checks the name, denies at the limit and
 * rolls back a charge a later quota refuses, exactly as the chargers do. */
static void test_inline_charges(void **state)
{
    fx *f = *state;
    wh_validator_free(f->v);
    f->v = NULL;
    long before = thread_count();
    f->store.get_pod = fake_get_pod;
    fx_validator(f, &(wh_validate_opts){.inline_charges = true});
    assert_int_equal(thread_count(), before);
    quota(f, NS_A, "a-big", "{\"gpu-memory\":\"64Gi\"}", NULL);
    quota(f, NS_A, "b-small", "{\"gpu-memory\":\"16Gi\"}", NULL);
    wh_validate_result r = decide(f, "u1", NS_A, "16Gi");
    assert_true(r.allowed);
    assert_string_equal(r.charged, "GPUQuota team-a/a-big, GPUQuota team-a/b-small");
    r = decide(f, "u2", NS_A, "8Gi"); /* a-big has room, b-small not: a-big's charge rolled back */
    assert_false(r.allowed);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "a-big"), 1);
    char pod[2048];
    snprintf(pod, sizeof(pod),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"taken\","
             "\"namespace\":\"" NS_A "\"},\"spec\":{\"containers\":[{\"name\":\"c\","
             "\"resources\":{\"limits\":{\"gpuquota.io/gpu-memory\":\"1Gi\"}}}]}}");
    r = decide_ex(f, "u3", NS_A, pod, NULL, NULL);
    assert_int_equal(r.code, GQ_EEXISTS);
    assert_int_equal(thread_count(), before);
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
        T(test_unknown_model_whole_gpus),
        T(test_zero_asks_for_no_gpu),
        T(test_large_pod_without_gpu),
        T(test_tamper),
        T(test_gates_are_gpuquotas),
        T(test_concurrent_exactly_ten),
        T(test_concurrent_exactly_ten_with_conflicts),
        T(test_concurrent_no_coalescing),
        T(test_inline_charges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
