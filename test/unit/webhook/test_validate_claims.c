/* The /validate decision on DRA claims: a pod whose claims cannot be priced
 * is denied where a quota governs; a shared claim is charged once, counted
 * by every quota it is in and charged once under concurrent admissions; a
 * checked claim's finalizer, label and annotation are gpuquota's. */
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

int main(void)
{
    gq_log_set_level(GQ_LOG_WARN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_dra_claims),
        T(test_claim_pins_are_gpuquotas),
        T(test_shared_claim_charged_once),
        T(test_shared_claim_concurrent),
        T(test_shared_claim_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
