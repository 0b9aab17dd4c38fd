/* The /validate decision on queued pods: maxQueuedPods caps a quota's
 * queue, and the members of a pod group agree on the group's size. */
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

/* ---- the caches hold quota specs, not usage --------------------------------- */

/* webhook/kubestore.c keeps, of a cached quota, its spec and
 * status.queuedPods only: these lists do the same over the in-memory store,
 * so that a decision read from the caches cannot see usage. */
static wh_store full;

static void keep_spec(json_object *arr)
{
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
        json_object *q = json_object_array_get_idx(arr, i), *st, *qp = NULL;
        if (!json_object_object_get_ex(q, "status", &st))
            continue;
        if (json_object_object_get_ex(st, "queuedPods", &qp))
            json_object_get(qp);
        json_object_object_del(q, "status");
        if (qp) {
            json_object *ns = json_object_new_object();
            json_object_object_add(ns, "queuedPods", qp);
            json_object_object_add(q, "status", ns);
        }
    }
}

static gq_code list_specs(void *ctx, wh_list_kind kind, const char *ns, json_object **out,
                          gq_err *err)
{
    gq_code rc = full.list(ctx, kind, ns, out, err);
    if (!rc && kind != WH_LIST_LIMIT_RANGES)
        keep_spec(*out);
    return rc;
}

static void spec_caches(fx *f)
{
    full = f->store;
    f->store.list = list_specs;
    fx_validator(f, NULL);
}

#define GATE ",\"schedulingGates\":[{\"name\":\"gpuquota.io/quota\"}]"

/* A tenant's own gate gpuquota.io/quota, on a pod no Queue quota governs
 * (a Deny quota only, or none), is refused: it would hold the pod in the
 * controller's memory uncharged, with no queue and so no maxQueuedPods to
 * cap it. Without the gate the pod is decided as ever. */
static void test_own_gate_without_queue_quota(void **state)
{
    fx *f = *state;
    char pod[2048];
    spec_caches(f);
    quota(f, NS_A, "team", "{\"gpu-memory\":\"64Gi\"}", NULL); /* Deny */
    pod_json(pod, sizeof(pod), NS_A, "8Gi", "", GATE);
    wh_validate_result r = decide_ex(f, "u-gated", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_EDENIED);
    assert_string_equal(r.message,
                        "the scheduling gate gpuquota.io/quota queues a pod only where a quota "
                        "with whenExceeded: Queue governs it, and none governs this pod in "
                        "namespace team-a: remove the gate (gpuquota adds it when a Queue quota "
                        "governs the pod)");
    pod_json(pod, sizeof(pod), "other", "8Gi", "", GATE); /* no quota at all */
    r = decide_ex(f, "u-none", "other", pod, NULL, NULL);
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "none governs this pod in namespace other"));
    assert_true(decide(f, "u-plain", NS_A, "8Gi").allowed);
    /* A pod group's members too: the group waits only under a Queue quota. */
    pod_json(pod, sizeof(pod), NS_A, "8Gi",
             ",\"labels\":{\"gpuquota.io/pod-group\":\"g\"},\"annotations\":{\"gpuquota.io/"
             "pod-group-size\":\"8\"}",
             GATE);
    r = decide_ex(f, "u-member", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "scheduling gate gpuquota.io/quota"));
}

/* A queued pod needs room now in every Deny quota that governs it, judged
 * on a fresh read: the caches hold specs, and a full Deny quota looked empty
 * (a full tenant quota let pods queue that it should refuse). */
static void test_queued_deny_quota_read_fresh(void **state)
{
    fx *f = *state;
    char pod[2048];
    spec_caches(f);
    quota(f, NS_A, "queue", "{\"gpu-memory\":\"64Gi\"}", ",\"whenExceeded\":\"Queue\"");
    quota(f, NS_A, "cap", "{\"gpu-memory\":\"8Gi\"}",
          "#,\"status\":{\"used\":{\"gpu-memory\":\"8Gi\"}}");
    pod_json(pod, sizeof(pod), NS_A, "1Gi", "", GATE);
    wh_validate_result r = decide_ex(f, "u-full", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_int_equal(r.code, GQ_EDENIED);
    assert_string_equal(r.message, "exceeded quota: cap, requested: gpu-memory=1Gi, used: "
                                   "gpu-memory=8Gi, limited: gpu-memory=8Gi");
    /* With room in the Deny quota the pod queues (nothing charged). */
    quota(f, NS_A, "cap", "{\"gpu-memory\":\"8Gi\"}",
          "#,\"status\":{\"used\":{\"gpu-memory\":\"4Gi\"}}");
    r = decide_ex(f, "u-room", NS_A, pod, NULL, NULL);
    assert_true(r.allowed);
    assert_int_equal(n_reservations(f, "GPUQuota", NS_A, "cap"), 0);
    /* A read that fails denies (fail closed), as an error. */
    faultstore_set_faults(
        f->fs, &(faultstore_faults){.fail = GQ_EHTTP, .fail_ops = FS_GET, .fail_count = 1});
    r = decide_ex(f, "u-down", NS_A, pod, NULL, NULL);
    assert_false(r.allowed);
    assert_int_not_equal(r.code, GQ_EDENIED);
    assert_non_null(strstr(r.message, "could not reach the API server to check quota"));
}

int main(void)
{
    gq_log_set_level(GQ_LOG_WARN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_queue_cap),
        T(test_group_size_disagreement),
        T(test_own_gate_without_queue_quota),
        T(test_queued_deny_quota_read_fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
