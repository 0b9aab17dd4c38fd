/* The pod CREATE decision (quota/admission.h), driven as the webhook
 * drives it but with the snapshot written here: what it asks for and in
 * which order, what it decides on each answer, the reservations it builds,
 * and that a decision made is made. JSON is written with single quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "quota/admission.h"
#include "quota/podqueue.h"

#define GI (1024LL * 1024 * 1024)
#define NOW 1800000000
#define NS "team-a"

static gq_config *g_cfg;

static int setup(void **state)
{
    (void)state;
    return gq_config_default(&g_cfg, NULL) == GQ_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gq_config_free(g_cfg);
    return 0;
}

/* A pod asking for mem of gpuquota.io/gpu-memory (NULL: no GPU), with
 * extra metadata and spec members. */
static json_object *pod(const char *mem, const char *meta, const char *spec)
{
    char buf[4096], res[128] = "{}";
    if (mem)
        snprintf(res, sizeof(res), "{'limits':{'gpuquota.io/gpu-memory':'%s'}}", mem);
    snprintf(buf, sizeof(buf),
             "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'train-1','namespace':'" NS
             "','uid':'pod-uid-1'%s},'spec':{'containers':[{'name':'c','image':'x',"
             "'resources':%s}]%s}}",
             meta ? meta : "", res, spec ? spec : "");
    return J(buf);
}

static json_object *quota(const char *name, const char *hard, const char *spec, const char *status)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'%s',"
             "'namespace':'" NS "'},'spec':{'hard':%s%s}%s}",
             name, hard, spec ? spec : "", status ? status : "");
    return J(buf);
}

static json_object *list1(json_object *o)
{
    json_object *a = json_object_new_array();
    assert_non_null(a);
    if (o)
        assert_int_equal(json_object_array_add(a, o), 0);
    return a;
}

static void start(gq_admission *a, json_object *p)
{
    gq_admission_init(
        a, &(gq_admission_in){.pod = p, .ns = NS, .request_uid = "req-1", .now = NOW, .ttl = 60});
}

/* One call; asserts it returns GQ_OK and asks for exactly `need`. */
static void step(gq_admission *a, unsigned need)
{
    gq_err e;
    gq_err_clear(&e);
    assert_int_equal(gq_admission_decide(g_cfg, a, &e), GQ_OK);
    assert_int_equal(a->need, need);
}

static void give_limit_ranges(gq_admission *a, json_object *arr)
{
    a->snap.limit_ranges = arr;
    a->snap.read |= GQ_NEED_LIMIT_RANGES;
}

static void give_quotas(gq_admission *a, json_object *quotas)
{
    a->snap.quotas = quotas;
    a->snap.tenant_quotas = json_object_new_array();
    a->snap.read |= GQ_NEED_QUOTAS;
}

/* The decision is made: denied, its message holding text. */
static void denied_with(const gq_admission *a, const char *text)
{
    assert_int_equal(a->need, 0);
    assert_false(a->verdict.allowed);
    if (!strstr(a->verdict.message, text))
        fail_msg("denied with \"%s\", not \"%s\"", a->verdict.message, text);
}

/* A Deny quota "a-deny" (64Gi) and a Queue quota "b-queue" (16Gi). */
static json_object *deny_and_queue_quotas(void)
{
    json_object *qs = json_object_new_array();
    json_object_array_add(qs, quota("a-deny", "{'gpu-memory':'64Gi'}", NULL, NULL));
    json_object_array_add(
        qs, quota("b-queue", "{'gpu-memory':'16Gi'}", ",'whenExceeded':'Queue'", NULL));
    return qs;
}

/* Start a decision on p and answer its first two asks: no GPULimitRanges,
 * then quotas (owned by the decision from here). */
static void through_quotas(gq_admission *a, json_object *p, json_object *quotas)
{
    start(a, p);
    step(a, GQ_NEED_LIMIT_RANGES);
    give_limit_ranges(a, NULL);
    step(a, GQ_NEED_QUOTAS);
    give_quotas(a, quotas);
}

static void cpu_pod_reads_nothing(void **state)
{
    (void)state;
    json_object *p = pod(NULL, NULL, NULL);
    gq_admission a;
    start(&a, p);
    step(&a, 0);
    assert_true(a.verdict.allowed);
    assert_false(a.must_charge);
    /* Made: a second call is refused, never decided twice. */
    gq_err e;
    assert_int_equal(gq_admission_decide(g_cfg, &a, &e), GQ_EINVAL);
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void exempt_namespace_reads_nothing(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, NULL);
    gq_admission a;
    gq_admission_init(
        &a, &(gq_admission_in){.pod = p, .ns = "kube-system", .request_uid = "r", .now = NOW});
    step(&a, 0);
    assert_true(a.verdict.allowed);
    assert_false(a.decoded);
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void gpu_pod_asks_limit_ranges_then_quotas_then_charges(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, NULL);
    gq_admission a;
    start(&a, p);
    step(&a, GQ_NEED_LIMIT_RANGES);
    give_limit_ranges(&a, json_object_new_array());
    step(&a, GQ_NEED_QUOTAS);
    give_quotas(&a, list1(quota("q", "{'gpu-memory':'64Gi'}", NULL, NULL)));
    step(&a, 0);
    assert_true(a.verdict.allowed);
    assert_true(a.must_charge);
    assert_int_equal(a.n_charge, 1);
    assert_string_equal(a.to_charge[0]->name, "q");
    assert_string_equal(a.resv.key, "pod-uid-1");
    assert_string_equal(a.resv.pod, "train-1");
    assert_int_equal(a.resv.amounts.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_int_equal(a.resv.expires, NOW + 60);
    /* The pod's uid differs from the request's: the group commit may
     * rekey under the request uid. */
    assert_true(a.have_alt);
    assert_string_equal(a.alt.key, "req-1");
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void no_quota_allows_uncharged(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, NULL);
    gq_admission a;
    through_quotas(&a, p, json_object_new_array());
    step(&a, 0);
    assert_true(a.verdict.allowed);
    assert_false(a.must_charge);
    assert_int_equal(a.pod.charge.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void limit_range_denies_before_quotas_are_read(void **state)
{
    (void)state;
    json_object *p = pod("24Gi", NULL, NULL);
    gq_admission a;
    start(&a, p);
    step(&a, GQ_NEED_LIMIT_RANGES);
    give_limit_ranges(
        &a, list1(J("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPULimitRange','metadata':"
                    "{'name':'lr','namespace':'" NS "'},'spec':{'limits':[{'type':'Container',"
                    "'max':{'gpu-memory':'20Gi'}}]}}")));
    step(&a, 0);
    assert_false(a.verdict.allowed);
    assert_int_equal(a.verdict.code, GQ_EDENIED);
    assert_non_null(strstr(a.verdict.message, "maximum gpu-memory usage per Container is 20Gi"));
    assert_false(a.snap.read & GQ_NEED_QUOTAS);
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void invalid_objects_deny_naming_them(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, NULL);
    gq_admission a;
    start(&a, p);
    step(&a, GQ_NEED_LIMIT_RANGES);
    give_limit_ranges(&a, list1(J("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPULimitRange',"
                                  "'metadata':{'name':'bad'},'spec':{'limits':'x'}}")));
    step(&a, 0);
    denied_with(&a, "GPULimitRange bad is invalid");
    gq_admission_dispose(&a);

    start(&a, p);
    step(&a, GQ_NEED_LIMIT_RANGES);
    give_limit_ranges(&a, json_object_new_array());
    step(&a, GQ_NEED_QUOTAS);
    give_quotas(&a, list1(quota("broken", "{'gpu-memory':'lots'}", NULL, NULL)));
    step(&a, 0);
    denied_with(&a, "gpuquota could not read quota: GPUQuota broken");
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void caller_denial_ends_the_decision(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, NULL);
    gq_admission a;
    start(&a, p);
    step(&a, GQ_NEED_LIMIT_RANGES);
    gq_admission_deny(&a, GQ_EIO, "could not read %s", "them");
    assert_int_equal(a.need, 0);
    assert_false(a.verdict.allowed);
    assert_string_equal(a.verdict.message, "could not read them");
    gq_err e;
    assert_int_equal(gq_admission_decide(g_cfg, &a, &e), GQ_EINVAL);
    gq_admission_dispose(&a);
    json_object_put(p);
}

#define GATE ",'schedulingGates':[{'name':'gpuquota.io/quota'}]"
#define GROUP(size)                                                                                \
    ",'labels':{'gpuquota.io/pod-group':'g'},'annotations':{'gpuquota.io/pod-group-size':'" size   \
    "'}"

static void queued_pod_without_queue_quota_is_refused(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, GATE);
    gq_admission a;
    through_quotas(&a, p, list1(quota("q", "{'gpu-memory':'64Gi'}", NULL, NULL)));
    step(&a, 0);
    denied_with(&a, "queues a pod only where a quota with");
    gq_admission_dispose(&a);
    json_object_put(p);
}

/* A queued group member: the group's pods are asked for, then a fresh
 * read of each Deny quota, one at a time, in check order. */
static void queued_member_asks_group_then_fresh_deny_quotas(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", GROUP("2"), GATE);
    gq_admission a;
    through_quotas(&a, p, deny_and_queue_quotas());
    step(&a, GQ_NEED_GROUP_PODS);
    assert_string_equal(a.need_group, "g");
    a.snap.group_pods = json_object_new_array();
    a.snap.read |= GQ_NEED_GROUP_PODS;
    step(&a, GQ_NEED_FRESH_QUOTA);
    assert_string_equal(a.set[a.need_fresh]->name, "a-deny");
    /* Fresh: 60Gi of 64Gi used, no room for 8Gi. */
    a.snap.fresh[a.need_fresh] =
        quota("a-deny", "{'gpu-memory':'64Gi'}", NULL, ",'status':{'used':{'gpu-memory':'60Gi'}}");
    a.snap.fresh_read[a.need_fresh] = true;
    step(&a, 0);
    denied_with(&a, "exceeded quota: a-deny");
    assert_false(a.must_charge);
    gq_admission_dispose(&a);
    json_object_put(p);
}

static void queued_member_disagreeing_on_size_is_refused(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", GROUP("2"), GATE);
    gq_admission a;
    through_quotas(&a, p,
                   list1(quota("q", "{'gpu-memory':'64Gi'}", ",'whenExceeded':'Queue'", NULL)));
    step(&a, GQ_NEED_GROUP_PODS);
    json_object *member = pod("8Gi", GROUP("3"), GATE);
    json_object_object_add(json_object_object_get(member, "metadata"), "name",
                           json_object_new_string("other"));
    a.snap.group_pods = list1(member);
    a.snap.read |= GQ_NEED_GROUP_PODS;
    step(&a, 0);
    denied_with(&a, "member other says 3");
    gq_admission_dispose(&a);
    json_object_put(p);
}

/* A gone Deny quota (NULL fresh read) is skipped: the queued pod passes. */
static void queued_pod_passes_when_deny_quota_is_gone(void **state)
{
    (void)state;
    json_object *p = pod("8Gi", NULL, GATE);
    gq_admission a;
    through_quotas(&a, p, deny_and_queue_quotas());
    step(&a, GQ_NEED_FRESH_QUOTA);
    a.snap.fresh_read[a.need_fresh] = true;
    step(&a, 0);
    assert_true(a.verdict.allowed);
    assert_false(a.must_charge); /* the controller charges it when it ungates it */
    gq_admission_dispose(&a);
    json_object_put(p);
}

/* The list parser's two rules (quota/crd.h): fail on a bad object, naming
 * it, or skip and count it. */
static void quota_list_rules(void **state)
{
    (void)state;
    json_object *arr = json_object_new_array();
    json_object_array_add(arr, quota("ok", "{'gpus':'1'}", NULL, NULL));
    json_object_array_add(arr, quota("bad", "{'gpus':'-1x'}", NULL, NULL));
    json_object_array_add(arr, quota("ok2", "{'gpus':'2'}", NULL, NULL));
    gq_quota **qs = NULL;
    size_t n = 0, skipped = 0;
    gq_err e;
    gq_err_clear(&e);
    assert_int_not_equal(gq_quota_list_append(&qs, &n, arr, NULL, &e), GQ_OK);
    assert_int_equal(n, 1);
    assert_non_null(strstr(e.msg, "GPUQuota bad"));
    gq_quota_list_free(qs, n);
    qs = NULL;
    n = 0;
    assert_int_equal(gq_quota_list_append(&qs, &n, arr, &skipped, &e), GQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(skipped, 1);
    assert_string_equal(qs[1]->name, "ok2");
    gq_quota_list_free(qs, n);
    json_object_put(arr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_pod_reads_nothing),
        cmocka_unit_test(exempt_namespace_reads_nothing),
        cmocka_unit_test(gpu_pod_asks_limit_ranges_then_quotas_then_charges),
        cmocka_unit_test(no_quota_allows_uncharged),
        cmocka_unit_test(limit_range_denies_before_quotas_are_read),
        cmocka_unit_test(invalid_objects_deny_naming_them),
        cmocka_unit_test(caller_denial_ends_the_decision),
        cmocka_unit_test(queued_pod_without_queue_quota_is_refused),
        cmocka_unit_test(queued_member_asks_group_then_fresh_deny_quotas),
        cmocka_unit_test(queued_member_disagreeing_on_size_is_refused),
        cmocka_unit_test(queued_pod_passes_when_deny_quota_is_gone),
        cmocka_unit_test(quota_list_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
