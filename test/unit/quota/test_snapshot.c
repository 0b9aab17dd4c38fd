/* The in-memory snapshot (quota/snapshot.h): objects kept by kind and
 * name, resourceVersions, conditional status writes, and the offline
 * verdict gq_snapshot_decide reaches on it (the dry run of /validate).
 * JSON is written with single quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "quota/snapshot.h"

#define NOW 1800000000

/* The group's state is the default configuration. */
static int with_config(void **state)
{
    gq_config *c = NULL;
    if (gq_config_default(&c, NULL) != GQ_OK)
        return -1;
    *state = c;
    return 0;
}

static int without_config(void **state)
{
    gq_config_free(*state);
    return 0;
}

#define QUOTA(name, ns, hard)                                                                      \
    "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'" name             \
    "','namespace':'" ns "'},'spec':{'hard':{'gpu-memory':'" hard "'}}}"
#define TENANT(name, hard)                                                                         \
    "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{'name':'" name       \
    "'},'spec':{'namespaces':['team-a'],'hard':{'gpu-memory':'" hard "'}}}"
#define POD(name, mem)                                                                             \
    "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'" name "','namespace':'team-a',"          \
    "'uid':'uid-" name "'},'spec':{'containers':[{'name':'c','image':'x','resources':{"            \
    "'limits':{'gpuquota.io/gpu-memory':'" mem "'}}}]}}"

static gq_snapshot *state(const gq_config *cfg, const char *const *docs, size_t n)
{
    gq_snapshot *s = NULL;
    json_object *o[8];
    gq_err e;
    assert_true(n <= 8);
    assert_int_equal(gq_snapshot_new(&s, &e), GQ_OK);
    for (size_t i = 0; i < n; i++)
        o[i] = J(docs[i]);
    if (gq_snapshot_load_state(s, cfg, o, n, NOW, &e))
        fail_msg("state: %s", e.msg);
    for (size_t i = 0; i < n; i++)
        json_object_put(o[i]);
    return s;
}

typedef struct counted {
    char names[256];
} counted;

static void on_counted(void *ud, const gq_quota *q)
{
    counted *c = ud;
    size_t len = strlen(c->names);
    snprintf(c->names + len, sizeof(c->names) - len, "%s%s", len ? "," : "", q->name);
}

/* The verdict on a pod asking for mem in team-a, and the quotas counted. */
static gq_verdict decide(const gq_config *cfg, const gq_snapshot *s, const char *pod_json,
                         counted *c)
{
    gq_admission a;
    gq_err e;
    json_object *p = J(pod_json);
    gq_admission_init(&a, &(gq_admission_in){.pod = p,
                                             .ns = "team-a",
                                             .request_uid = "req-1",
                                             .now = NOW,
                                             .ttl = GQ_RESERVATION_TTL_DEFAULT});
    memset(c, 0, sizeof(*c));
    assert_int_equal(gq_snapshot_decide(cfg, s, &a, on_counted, c, &e), GQ_OK);
    gq_verdict v = a.verdict;
    gq_admission_dispose(&a);
    json_object_put(p);
    return v;
}

/* Pods of the state count toward the quotas; a pod that fits every quota
 * is allowed and counted by each, in check order; one that does not is
 * denied with Kubernetes' words; a pod asking for no GPU reads nothing. */
static void decide_on_state(void **st)
{
    const gq_config *cfg = *st;
    const char *docs[] = {QUOTA("team", "team-a", "64Gi"), TENANT("ml", "100Gi"),
                          POD("running", "48Gi")};
    gq_snapshot *s = state(cfg, docs, 3);
    counted c;
    gq_verdict v = decide(cfg, s, POD("fits", "16Gi"), &c);
    assert_true(v.allowed);
    assert_string_equal(c.names, "team,ml");
    v = decide(cfg, s, POD("big", "24Gi"), &c);
    assert_false(v.allowed);
    assert_int_equal(v.code, GQ_EDENIED);
    assert_string_equal(v.message, "exceeded quota: team, requested: gpu-memory=24Gi, used: "
                                   "gpu-memory=48Gi, limited: gpu-memory=64Gi");
    v = decide(cfg, s,
               "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'cpu','namespace':"
               "'team-a'},'spec':{'containers':[{'name':'c','image':'x'}]}}",
               &c);
    assert_true(v.allowed);
    assert_string_equal(c.names, "");
    gq_snapshot_free(s);
}

/* Objects by kind and name; each write gets a new resourceVersion, and a
 * status write on a stale one is a conflict, as the API server's is. */
static void objects_and_status(void **st)
{
    (void)st;
    gq_snapshot *s = NULL;
    gq_err e;
    json_object *q = J(QUOTA("team", "team-a", "8Gi")), *got = NULL, *stored = NULL, *arr = NULL;
    assert_int_equal(gq_snapshot_new(&s, &e), GQ_OK);
    assert_int_equal(gq_snapshot_apply(s, q, &e), GQ_OK);
    assert_int_equal(gq_snapshot_get(s, "GPUQuota", "team-b", "team", &got, &e), GQ_ENOTFOUND);
    assert_int_equal(gq_snapshot_get(s, "Secret", "team-a", "team", &got, &e), GQ_EINVAL);
    assert_int_equal(gq_snapshot_get_quota(s, GQ_QUOTA_NAMESPACED, "team-a", "team", &got, &e),
                     GQ_OK);
    assert_int_equal(gq_snapshot_list(s, GQ_SNAP_QUOTA, "team-a", &arr, &e), GQ_OK);
    assert_int_equal(json_object_array_length(arr), 1);
    json_object_put(arr);
    json_object_object_add(got, "status", J("{'used':{'gpu-memory':'1Gi'}}"));
    assert_int_equal(
        gq_snapshot_update_status(s, GQ_QUOTA_NAMESPACED, "team-a", "team", got, &stored, &e),
        GQ_OK);
    assert_non_null(json_object_object_get(stored, "status"));
    /* got's resourceVersion is now stale */
    assert_int_equal(
        gq_snapshot_update_status(s, GQ_QUOTA_NAMESPACED, "team-a", "team", got, NULL, &e),
        GQ_ECONFLICT);
    assert_int_equal(gq_snapshot_update_status(s, GQ_QUOTA_TENANT, NULL, "team", stored, NULL, &e),
                     GQ_ENOTFOUND);
    json_object_put(stored);
    json_object_put(got);
    json_object_put(q);
    json_object *bad = J("{'kind':'GPUQuota','metadata':{'name':'x'}}");
    assert_int_equal(gq_snapshot_apply(s, bad, &e), GQ_EINVAL);
    json_object_put(bad);
    gq_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decide_on_state),
        cmocka_unit_test(objects_and_status),
    };
    return cmocka_run_group_tests(tests, with_config, without_config);
}
