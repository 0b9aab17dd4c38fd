/* The pure reconcile (controller/reconcile.c): the recount by scope, the
 * status it writes and when it writes nothing, exceeded transitions,
 * reservations, tenants and namespace membership, usage by model, folds
 * that wait, claim records and an invalid spec's status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_fixture.h"
#include "support/status_sum.h"

/* --- recount ------------------------------------------------------------------- */

typedef struct scope_case {
    const char *spec; /* quota spec */
    int64_t mem_gi;   /* expected used gpu-memory in Gi */
    int64_t pods;     /* expected used gpu-pods */
} scope_case;

static void test_recount_scopes(void **state)
{
    (void)state;
    /* Pods: 1Gi plain, 2Gi terminating, 4Gi priority high, 8Gi priority low,
     * 16Gi Succeeded, 32Gi Failed, 64Gi deleted past grace, 128Gi deleting
     * within grace, and one in another namespace. */
    static const pod_spec pods[] = {
        {.ns = "a", .name = "plain", .mem = "1Gi"},
        {.ns = "a", .name = "term", .mem = "2Gi", .deadline = 30},
        {.ns = "a", .name = "high", .mem = "4Gi", .pc = "high"},
        {.ns = "a", .name = "low", .mem = "8Gi", .pc = "low"},
        {.ns = "a", .name = "ok", .mem = "16Gi", .phase = "Succeeded"},
        {.ns = "a", .name = "bad", .mem = "32Gi", .phase = "Failed"},
        {.ns = "a", .name = "gone", .mem = "64Gi", .deleted = "2026-11-21T15:00:00Z", .grace = 30},
        {.ns = "a", .name = "going", .mem = "128Gi", .deleted = NOW_S, .grace = 30},
        {.ns = "b", .name = "elsewhere", .mem = "256Gi"},
        {.ns = "a", .name = "cpu"},
    };
    static const scope_case cases[] = {
        {"{'hard':{'gpu-memory':'1Ti','gpu-pods':100}}", 1 + 2 + 4 + 8 + 128, 5},
        {"{'hard':{'gpu-memory':'1Ti'},'scopes':['Terminating']}", 2, 0},
        {"{'hard':{'gpu-memory':'1Ti'},'scopes':['NotTerminating']}", 1 + 4 + 8 + 128, 0},
        {"{'hard':{'gpu-memory':'1Ti'},'scopeSelector':{'matchExpressions':[{'scopeName':"
         "'PriorityClass','operator':'In','values':['high']}]}}",
         4, 0},
        {"{'hard':{'gpu-memory':'1Ti'},'scopeSelector':{'matchExpressions':[{'scopeName':"
         "'PriorityClass','operator':'NotIn','values':['high']}]}}",
         1 + 2 + 8 + 128, 0},
        {"{'hard':{'gpu-memory':'1Ti'},'scopeSelector':{'matchExpressions':[{'scopeName':"
         "'PriorityClass','operator':'Exists'}]}}",
         4 + 8, 0},
        {"{'hard':{'gpu-memory':'1Ti'},'scopeSelector':{'matchExpressions':[{'scopeName':"
         "'PriorityClass','operator':'DoesNotExist'}]}}",
         1 + 2 + 128, 0},
        {"{'hard':{'gpu-memory':'1Ti'},'scopes':['NotTerminating'],'scopeSelector':{"
         "'matchExpressions':[{'scopeName':'PriorityClass','operator':'DoesNotExist'}]}}",
         1 + 128, 0},
    };
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
        add_pod(s, &pods[i]);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *q = quota_json("a", "q", cases[i].spec, NULL);
        ctl_result r;
        ctl_result_init(&r);
        reconcile(s, q, NOW, &r);
        if (r.fig.used.v[GQ_KEY_GPU_MEMORY] != cases[i].mem_gi * GI)
            fail_msg("case %zu: used %lld Gi, want %lld Gi", i,
                     (long long)(r.fig.used.v[GQ_KEY_GPU_MEMORY] / GI), (long long)cases[i].mem_gi);
        assert_int_equal(r.fig.used.v[GQ_KEY_GPU_PODS], cases[i].pods);
        /* used carries only the keys of spec.hard */
        assert_int_equal(r.fig.used.set[GQ_KEY_GPU_PODS], i == 0);
        assert_false(r.fig.used.set[GQ_KEY_GPUS]);
        assert_true(r.changed);
        ctl_result_dispose(&r);
        json_object_put(q);
    }
    ctl_podstore_free(s);
}

static void test_status_shape_and_noop(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec ps = {.ns = "a", .name = "p", .mem = "8Gi"};
    add_pod(s, &ps);
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'64G','gpus':2}}", NULL);
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    assert_true(r.changed);
    assert_false(r.exceeded);
    assert_false(r.became_exceeded);
    const char *want =
        "{ \"hard\": { \"gpu-memory\": \"64G\", \"gpus\": \"2\" }, \"used\": { \"gpu-memory\": "
        "\"8Gi\", \"gpus\": \"0\" }, \"observedGeneration\": 3, \"conditions\": [ { \"type\": "
        "\"Ready\", \"status\": \"True\", \"observedGeneration\": 3, \"lastTransitionTime\": "
        "\"2026-11-21T15:06:05Z\", \"reason\": \"Reconciled\", \"message\": \"usage recounted "
        "from pods\" }, { \"type\": \"Exceeded\", \"status\": \"False\", \"observedGeneration\": "
        "3, \"lastTransitionTime\": \"2026-11-21T15:06:05Z\", \"reason\": \"WithinLimits\", "
        "\"message\": \"\" } ] }";
    assert_string_equal(json_object_to_json_string_ext(r.status, JSON_C_TO_STRING_SPACED), want);

    /* Written back, the next reconcile (later) changes nothing. */
    json_object_object_add(q, "status", json_object_get(r.status));
    ctl_result r2;
    ctl_result_init(&r2);
    reconcile(s, q, NOW + 100, &r2);
    assert_false(r2.changed);
    assert_string_equal(json_object_to_json_string(r2.status),
                        json_object_to_json_string(r.status));
    ctl_result_dispose(&r2);
    ctl_result_dispose(&r);
    json_object_put(q);

    /* An invalid spec is an error; a corrupt status is simply rewritten. */
    json_object *badq = quota_json("a", "q", "{'hard':{'gpu-memory':'-1'}}", NULL);
    gq_err err;
    assert_int_equal(ctl_podstore_reconcile(s, badq, NOW, &r, &err), GQ_EINVAL);
    assert_null(r.status);
    json_object_put(badq);
    json_object *corrupt = quota_json("a", "q", "{'hard':{'gpus':1}}",
                                      "{'used':'lots','reservations':7,'conditions':{}}");
    reconcile(s, corrupt, NOW, &r);
    assert_true(r.changed);
    assert_string_equal(status_str(&r, "used", "gpus"), "0");
    assert_int_equal(r.dropped, 1);
    ctl_result_dispose(&r);
    json_object_put(corrupt);
    ctl_podstore_free(s);
}

static void test_exceeded_transitions(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec a = {.ns = "a", .name = "p1", .mem = "40Gi"};
    pod_spec b = {.ns = "a", .name = "p2", .mem = "32Gi", .whole = 0};
    /* 3 whole GPUs of unknown model: 3 x 141Gi (h200, the catalog's largest) */
    pod_spec c = {.ns = "a", .name = "p3", .whole = 3};
    add_pod(s, &a);
    add_pod(s, &b);
    add_pod(s, &c);
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'512Gi','gpus':4}}", NULL);
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    assert_false(r.exceeded);
    json_object_object_add(q, "status", json_object_get(r.status));

    /* hard lowered below used: Exceeded True naming both keys, once. */
    json_object *spec;
    json_object_object_get_ex(q, "spec", &spec);
    json_object_object_add(spec, "hard", J("{'gpu-memory':'256Gi','gpus':2}"));
    reconcile(s, q, NOW + 10, &r);
    assert_true(r.changed);
    assert_true(r.exceeded);
    assert_true(r.became_exceeded);
    assert_string_equal(r.message,
                        "used exceeds hard for gpu-memory (used 495Gi, hard 256Gi), gpus "
                        "(used 3, hard 2)");
    json_object *conds, *ex;
    json_object_object_get_ex(r.status, "conditions", &conds);
    ex = json_object_array_get_idx(conds, 1);
    assert_string_equal(json_object_get_string(json_object_object_get(ex, "status")), "True");
    assert_string_equal(json_object_get_string(json_object_object_get(ex, "reason")), "Exceeded");
    assert_string_equal(json_object_get_string(json_object_object_get(ex, "lastTransitionTime")),
                        "2026-11-21T15:06:15Z");
    /* Ready did not transition: its time stays. */
    assert_string_equal(json_object_get_string(json_object_object_get(
                            json_object_array_get_idx(conds, 0), "lastTransitionTime")),
                        NOW_S);
    json_object_object_add(q, "status", json_object_get(r.status));

    /* Still exceeded later: no new transition, no new Event. */
    reconcile(s, q, NOW + 20, &r);
    assert_false(r.changed);
    assert_true(r.exceeded);
    assert_false(r.became_exceeded);

    /* hard raised: cleared, with a new transition time. */
    json_object_object_add(spec, "hard", J("{'gpu-memory':'495Gi','gpus':3}"));
    reconcile(s, q, NOW + 30, &r);
    assert_true(r.changed);
    assert_false(r.exceeded);
    assert_string_equal(r.message, "");
    json_object_object_get_ex(r.status, "conditions", &conds);
    ex = json_object_array_get_idx(conds, 1);
    assert_string_equal(json_object_get_string(json_object_object_get(ex, "status")), "False");
    assert_string_equal(json_object_get_string(json_object_object_get(ex, "lastTransitionTime")),
                        "2026-11-21T15:06:35Z");
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* --- reservations ------------------------------------------------------------ */

static void test_reservations(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec seen = {.ns = "a", .name = "seen", .mem = "8Gi", .uid = "k-seen"};
    pod_spec done = {.ns = "a", .name = "done", .mem = "8Gi", .uid = "k-done", .phase = "Failed"};
    /* A pod carrying a reservation key as an annotation is not its holder:
     * only the uid matches (users may write annotations at CREATE). */
    pod_spec ann = {.ns = "a", .name = "ann", .mem = "8Gi", .ann = "k-wait"};
    add_pod(s, &seen);
    add_pod(s, &done);
    add_pod(s, &ann);
#define RES(k, ns, exp)                                                                            \
    "{'key':'" k "','namespace':'" ns "','pod':'p','gpu-memory':'8Gi','gpus':'0','gpu-pods':'1',"  \
    "'expires':'" exp "'}"
    const char *status = "{'reservations':[" RES("k-seen", "a", "2026-11-21T15:07:00Z") "," RES(
        "k-wait", "a",
        "2026-11-21T15:07:00Z") "," RES("k-done", "a",
                                        "2026-11-21T15:07:00Z") "," RES("k-old", "a",
                                                                        "2026-11-21T15:06:"
                                                                        "05Z") "," RES("k-"
                                                                                       "oth"
                                                                                       "er-"
                                                                                       "ns",
                                                                                       "b",
                                                                                       "202"
                                                                                       "6-"
                                                                                       "11-"
                                                                                       "21T"
                                                                                       "15:"
                                                                                       "06:"
                                                                                       "30"
                                                                                       "Z") ",{'"
                                                                                            "key':'"
                                                                                            "broken"
                                                                                            "'}]}";
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'64Gi'}}", status);
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    /* kept: k-wait (pod not seen yet), k-other-ns (no such pod in b);
     * dropped: k-seen and k-done (pods seen, terminal or not), k-old
     * (expires == now has lapsed), broken (unparsable). */
    assert_int_equal(r.kept, 2);
    assert_int_equal(r.dropped, 4);
    assert_int_equal(r.next_expiry, NOW + 25);
    json_object *res;
    assert_true(json_object_object_get_ex(r.status, "reservations", &res));
    assert_int_equal(json_object_array_length(res), 2);
    assert_string_equal(
        json_object_get_string(json_object_object_get(json_object_array_get_idx(res, 0), "key")),
        "k-wait");
    assert_string_equal(
        json_object_get_string(json_object_object_get(json_object_array_get_idx(res, 1), "key")),
        "k-other-ns");
    /* used counts only the running pods; reservations are not part of used. */
    assert_string_equal(status_str(&r, "used", "gpu-memory"), "16Gi");
    json_object_object_add(q, "status", json_object_get(r.status));

    /* After both expire the array disappears. */
    reconcile(s, q, NOW + 60, &r);
    assert_true(r.changed);
    assert_int_equal(r.kept, 0);
    assert_int_equal(r.next_expiry, 0);
    assert_false(json_object_object_get_ex(r.status, "reservations", NULL));
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* Escrow records of the webhooks (docs/validating-webhook.md, "Escrow"): a
 * replica's hold and want are kept until they expire (no pod has their
 * key); a pod admitted on a hold is dropped once seen, and kept as a plain
 * record while not (used does not count it: the mark that it might be
 * charged twice goes). */
static void test_escrow_records(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec seen = {.ns = "a", .name = "seen", .mem = "8Gi", .uid = "k-seen"};
    add_pod(s, &seen);
#define ESC(k, kind)                                                                               \
    "{'key':'" k "','namespace':'a','pod':'p','gpu-memory':'8Gi','gpus':'0','gpu-pods':'1',"       \
    "'expires':'2026-11-21T15:07:00Z','escrow':'" kind "'}"
    const char *status = "{'reservations':[" ESC("escrow-1", "hold") "," ESC(
        "want-2", "want") "," ESC("k-seen", "admitted") "," ESC("k-wait", "admitted") "]}";
#undef ESC
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'64Gi'}}", status);
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    assert_true(r.changed);
    assert_int_equal(r.kept, 3);
    assert_int_equal(r.dropped, 1);
    json_object *res;
    assert_true(json_object_object_get_ex(r.status, "reservations", &res));
    assert_int_equal(json_object_array_length(res), 3);
    static const char *const keys[] = {"escrow-1", "want-2", "k-wait"};
    static const char *const kinds[] = {"hold", "want", NULL};
    for (size_t i = 0; i < 3; i++) {
        json_object *one = json_object_array_get_idx(res, i), *e = NULL;
        assert_string_equal(json_object_get_string(json_object_object_get(one, "key")), keys[i]);
        json_object_object_get_ex(one, "escrow", &e);
        if (kinds[i])
            assert_string_equal(json_object_get_string(e), kinds[i]);
        else
            assert_null(e);
    }
    assert_string_equal(status_str(&r, "used", "gpu-memory"), "8Gi");
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* status.reservations is an atomic list, so kube-apiserver lets a key in
 * twice. Until the controller writes, both records are charged (more, never
 * less); its reconcile keeps the first and drops the repeat. */
static void test_reservation_keys_unique(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
#define RES1(k, exp)                                                                               \
    "{'key':'" k "','namespace':'a','pod':'p','gpu-memory':'8Gi','gpus':'0','gpu-pods':'1',"       \
    "'expires':'" exp "'}"
    const char *status = "{'reservations':[" RES1("k-1", "2026-11-21T15:07:00Z") "," RES1(
        "k-2", "2026-11-21T15:07:00Z") "," RES1("k-1", "2026-11-21T15:08:00Z") "]}";
#undef RES1
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'64Gi'}}", status);
    gq_amounts sum;
    gq_err err = {0};
    assert_int_equal(status_sum(json_object_object_get(q, "status"), NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 24 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 3);

    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    assert_true(r.changed);
    assert_int_equal(r.kept, 2);
    assert_int_equal(r.dropped, 1);
    assert_int_equal(r.next_expiry, NOW + 55); /* the first k-1's, not the repeat's */
    json_object *res;
    assert_true(json_object_object_get_ex(r.status, "reservations", &res));
    assert_int_equal(json_object_array_length(res), 2);
    const char *keys[] = {"k-1", "k-2"};
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(json_object_get_string(
                                json_object_object_get(json_object_array_get_idx(res, i), "key")),
                            keys[i]);
    assert_int_equal(status_sum(r.status, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 16 * GI);

    /* Written back, it holds: nothing more to do. */
    json_object_object_add(q, "status", json_object_get(r.status));
    reconcile(s, q, NOW, &r);
    assert_false(r.changed);
    assert_int_equal(r.kept, 2);
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* --- tenants ------------------------------------------------------------------ */

static gq_code setns(ctl_podstore *s, const char *ns, const char *labels, bool *changed)
{
    json_object *l = J(labels);
    gq_code rc = ctl_podstore_set_namespace(s, ns, l, changed);
    json_object_put(l);
    return rc;
}

static void test_tenant_membership(void **state)
{
    (void)state;
    ctl_podstore *s;
    gq_err err;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    bool changed;
    assert_int_equal(setns(s, "ml-b", "{'team':'ml'}", &changed), GQ_OK);
    assert_true(changed);
    assert_int_equal(setns(s, "ml-a", "{'team':'ml'}", &changed), GQ_OK);
    assert_int_equal(setns(s, "web", "{'team':'web'}", &changed), GQ_OK);
    assert_int_equal(ctl_podstore_set_namespace(s, "listed", NULL, &changed), GQ_OK);
    static const pod_spec pods[] = {
        {.ns = "ml-b", .name = "b1", .mem = "4Gi"},
        {.ns = "ml-a", .name = "a1", .mem = "2Gi"},
        {.ns = "ml-a", .name = "a2", .mem = "1Gi"},
        {.ns = "web", .name = "w1", .mem = "8Gi"},
        {.ns = "listed", .name = "l1", .mem = "16Gi"},
        {.ns = "nolabels", .name = "n1", .mem = "32Gi"},
    };
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
        add_pod(s, &pods[i]);
    json_object *t =
        tenant_json("ml", "{'namespaceSelector':{'matchLabels':{'team':'ml'}},"
                          "'namespaces':['listed'],'hard':{'gpu-memory':'1Ti','gpu-pods':10}}");
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, t, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], 23 * GI);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_PODS], 4);
    json_object *nss;
    assert_true(json_object_object_get_ex(r.status, "namespaces", &nss));
    assert_string_equal(json_object_to_json_string_ext(nss, JSON_C_TO_STRING_PLAIN),
                        "[{\"namespace\":\"listed\",\"used\":{\"gpu-memory\":\"16Gi\",\"gpu-pods\":"
                        "\"1\"}},{\"namespace\":\"ml-a\",\"used\":{\"gpu-memory\":\"3Gi\",\"gpu-"
                        "pods\":\"2\"}},{\"namespace\":\"ml-b\",\"used\":{\"gpu-memory\":\"4Gi\","
                        "\"gpu-pods\":\"1\"}}]");

    /* Relabel web into ml and ml-b out of it: usage moves. */
    json_object *web = tenant_json("web", "{'namespaceSelector':{'matchLabels':{'team':'web'}},"
                                          "'hard':{'gpu-memory':'1Ti'}}");
    assert_int_equal(setns(s, "web", "{'team':'ml'}", &changed), GQ_OK);
    assert_true(changed);
    assert_int_equal(setns(s, "ml-b", "{'team':'web'}", &changed), GQ_OK);
    assert_int_equal(setns(s, "ml-b", "{'team':'web'}", &changed), GQ_OK);
    assert_false(changed);
    reconcile(s, t, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], (16 + 3 + 8) * GI);
    reconcile(s, web, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    assert_true(json_object_object_get_ex(r.status, "namespaces", &nss));
    assert_int_equal(json_object_array_length(nss), 1);

    /* Namespace deleted: labels gone, so the selector no longer matches. */
    ctl_podstore_delete_namespace(s, "ml-b");
    reconcile(s, web, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], 0);
    assert_true(json_object_object_get_ex(r.status, "namespaces", &nss));
    assert_int_equal(json_object_array_length(nss), 0);
    assert_int_equal(ctl_podstore_ns_pod_count(s, "ml-b"), 1);

    /* An empty selector {} matches every namespace. */
    json_object *all = tenant_json("all", "{'namespaceSelector':{},'hard':{'gpu-pods':100}}");
    reconcile(s, all, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_PODS], 6);
    ctl_result_dispose(&r);

    /* A tenant without members is invalid. */
    json_object *bad = tenant_json("bad", "{'hard':{'gpu-pods':1}}");
    assert_int_equal(ctl_podstore_reconcile(s, bad, NOW, &r, &err), GQ_EINVAL);
    json_object_put(bad);
    json_object_put(all);
    json_object_put(web);
    json_object_put(t);
    ctl_podstore_free(s);
}

/* Pods are summed per namespace and scope facts; sums that would overflow
 * fall back to reading each pod, and the recount reports the overflow. */
static void test_group_sums(void **state)
{
    (void)state;
    ctl_podstore *s;
    gq_err err;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec a = {.ns = "a", .name = "a1", .mem = "4Ei"};
    pod_spec b = {.ns = "a", .name = "a2", .mem = "4Ei"};
    pod_spec c = {.ns = "b", .name = "b1", .mem = "1Gi"};
    ctl_pod *pa = add_pod(s, &a);
    ctl_pod *pb = add_pod(s, &b);
    add_pod(s, &c);
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'1Ti'}}", NULL);
    ctl_result r;
    ctl_result_init(&r);
    assert_int_equal(ctl_podstore_reconcile(s, q, NOW, &r, &err), GQ_ERANGE);
    /* One of them gone: exact again (read pod by pod from now on). */
    ctl_podstore_unlink(s, pb);
    ctl_pod_free(s, pb);
    reconcile(s, q, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], 4LL << 60);
    /* Replacing a record moves its charge: Running -> Succeeded. */
    pod_spec a_done = a;
    a_done.phase = "Succeeded";
    json_object *o = pod_json(&a_done);
    ctl_pod *pd = NULL;
    assert_int_equal(ctl_pod_from_json(s, g_cfg, o, &pd, &err), GQ_OK);
    json_object_put(o);
    ctl_podstore_replace(s, pa, pd);
    ctl_pod_free(s, pa);
    reconcile(s, q, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], 0);
    json_object *qb = quota_json("b", "q", "{'hard':{'gpu-memory':'1Ti'}}", NULL);
    reconcile(s, qb, NOW, &r);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], GI);
    ctl_result_dispose(&r);
    json_object_put(qb);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* The pure entry point, with caller-made pod views and a seen oracle. */
static bool seen_all(void *ud, const char *ns, const char *key)
{
    (void)ud;
    (void)ns;
    (void)key;
    return true;
}

static bool seen_none(void *ud, const char *ns, const char *key)
{
    (*(int *)ud)++;
    return false;
}

/* Usage per model: pods pinned to a model count for it, unpinned pods for
 * every model the quota lists; a model over its limit is Exceeded. */
static void test_usage_by_model(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec pods[] = {
        {.ns = "a", .name = "h1", .mem = "8Gi", .model = "h100-80gb"},
        {.ns = "a", .name = "h2", .mem = "8Gi", .model = "h100-80gb"},
        {.ns = "a", .name = "u", .mem = "4Gi"},
        {.ns = "a", .name = "t", .mem = "2Gi", .model = "a10"},
        {.ns = "a", .name = "done", .mem = "30Gi", .model = "h100-80gb", .phase = "Succeeded"},
    };
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
        add_pod(s, &pods[i]);
    json_object *q =
        quota_json("a", "q",
                   "{'hard':{'gpu-memory':'100Gi'},'models':{'h100-80gb':{'gpu-memory':'16Gi'},"
                   "'a10':{'gpu-pods':'5'}}}",
                   NULL);
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    json_object *bm = NULL;
    assert_true(json_object_object_get_ex(r.status, "usedByModel", &bm));
    assert_string_equal(json_object_to_json_string_ext(bm, JSON_C_TO_STRING_PLAIN),
                        "{\"a10\":{\"gpu-pods\":\"2\"},\"h100-80gb\":{\"gpu-memory\":\"20Gi\"}}");
    assert_string_equal(status_str(&r, "used", "gpu-memory"), "22Gi");
    assert_true(r.exceeded);
    assert_string_equal(r.message,
                        "used exceeds hard for h100-80gb/gpu-memory (used 20Gi, hard 16Gi)");
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* A deep copy of q whose status says `used` and usedByModel.h100-80gb of
 * gpu-memory, with reservations (a JSON array in test quotes) in place of
 * its own. */
static json_object *with_status(json_object *q, const char *used, const char *by_model,
                                const char *reservations)
{
    json_object *c = NULL, *st, *u, *bm, *m;
    assert_int_equal(json_object_deep_copy(q, &c, NULL), 0);
    assert_true(json_object_object_get_ex(c, "status", &st));
    assert_true(json_object_object_get_ex(st, "used", &u));
    json_object_object_add(u, "gpu-memory", json_object_new_string(used));
    assert_true(json_object_object_get_ex(st, "usedByModel", &bm));
    assert_true(json_object_object_get_ex(bm, "h100-80gb", &m));
    json_object_object_add(m, "gpu-memory", json_object_new_string(by_model));
    if (reservations)
        json_object_object_add(st, "reservations", J(reservations));
    return c;
}

#define RESM(k, mem, exp)                                                                          \
    "{'key':'" k "','namespace':'a','pod':'p','gpu-memory':'" mem "','gpus':'0','gpu-pods':'1',"   \
    "'expires':'" exp "','model':'h100-80gb'}"

/* Store *s with pods h1 (8Gi, h100-80gb) and u (4Gi, no model) of
 * namespace a; returns quota q of a (100Gi, 64Gi on h100-80gb) with the
 * status *r (initialised here) has for them: 12Gi, and 12Gi on h100-80gb (u
 * names no model, so it counts against each). */
static json_object *counted_h1_u(ctl_podstore **s, ctl_result *r)
{
    assert_int_equal(ctl_podstore_new(s), GQ_OK);
    pod_spec pods[] = {
        {.ns = "a", .name = "h1", .mem = "8Gi", .model = "h100-80gb", .uid = "k-h1"},
        {.ns = "a", .name = "u", .mem = "4Gi", .uid = "k-u"},
    };
    for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
        add_pod(*s, &pods[i]);
    json_object *q = quota_json(
        "a", "q", "{'hard':{'gpu-memory':'100Gi'},'models':{'h100-80gb':{'gpu-memory':'64Gi'}}}",
        NULL);
    ctl_result_init(r);
    reconcile(*s, q, NOW, r);
    json_object_object_add(q, "status", json_object_get(r->status));
    return q;
}

/* ctl_fold_only of quota and next, each with the queue members of the JSON
 * objects a and b added to its status (copies). */
static bool fold_with_queue(json_object *quota, json_object *next, const char *a, const char *b)
{
    json_object *qc = NULL, *nc = NULL, *st;
    assert_int_equal(json_object_deep_copy(quota, &qc, NULL), 0);
    assert_int_equal(json_object_deep_copy(next, &nc, NULL), 0);
    assert_true(json_object_object_get_ex(qc, "status", &st));
    json_object *ja = J(a), *jb = J(b);
    json_object_object_foreach(ja, ka, va) json_object_object_add(st, ka, json_object_get(va));
    json_object_object_foreach(jb, kb, vb) json_object_object_add(nc, kb, json_object_get(vb));
    bool fold = ctl_fold_only(qc, nc, NOW, NOW + 2);
    json_object_put(ja);
    json_object_put(jb);
    json_object_put(qc);
    json_object_put(nc);
    return fold;
}

/* A fold, reservations whose pods are now counted moving into used (and
 * usedByModel), changes nothing an admission counts, so its write may wait
 * (controller.c), and so may a queue that falls with it; a reservation that
 * lapses before the horizon, usage that goes down, a model's usage that does
 * not follow, a queue that grows, or any other member that changes, may
 * not. */
static void test_fold_only(void **state)
{
    (void)state;
    ctl_podstore *s;
    ctl_result r;
    json_object *q = counted_h1_u(&s, &r);
    assert_string_equal(status_str(&r, "used", "gpu-memory"), "12Gi");

    /* Before the controller saw h1, its charge was a reservation. */
    json_object *before =
        with_status(q, "4Gi", "4Gi", "[" RESM("k-h1", "8Gi", "2026-11-21T15:07:05Z") "]");
    reconcile(s, before, NOW, &r);
    assert_true(r.changed);
    assert_int_equal(r.dropped, 1);
    assert_true(ctl_fold_only(before, r.status, NOW, NOW + 2));
    /* The current status no longer charges it by the horizon: write now. */
    assert_false(ctl_fold_only(before, r.status, NOW, NOW + 60));
    /* A next status whose model usage did not take the charge. */
    json_object *next = NULL, *bm, *m;
    assert_int_equal(json_object_deep_copy(r.status, &next, NULL), 0);
    assert_true(json_object_object_get_ex(next, "usedByModel", &bm));
    assert_true(json_object_object_get_ex(bm, "h100-80gb", &m));
    json_object_object_add(m, "gpu-memory", json_object_new_string("4Gi"));
    assert_false(ctl_fold_only(before, next, NOW, NOW + 2));
    json_object_put(next);
    next = NULL;
    /* Any other member that changes: a condition's message. */
    json_object *conds;
    assert_int_equal(json_object_deep_copy(r.status, &next, NULL), 0);
    assert_true(json_object_object_get_ex(next, "conditions", &conds));
    json_object_object_add(json_object_array_get_idx(conds, 0), "message",
                           json_object_new_string("something else"));
    assert_false(ctl_fold_only(before, next, NOW, NOW + 2));
    json_object_put(next);
    /* The queue it reports may fall with a fold (pods left it), never rise. */
    assert_true(fold_with_queue(before, r.status, "{'queued':{'gpu-memory':'16Gi'},'queuedPods':2}",
                                "{'queued':{'gpu-memory':'8Gi'},'queuedPods':1}"));
    assert_true(
        fold_with_queue(before, r.status, "{'queued':{'gpu-memory':'16Gi'},'queuedPods':2}", "{}"));
    assert_false(fold_with_queue(before, r.status, "{'queued':{'gpu-memory':'8Gi'},'queuedPods':1}",
                                 "{'queued':{'gpu-memory':'8Gi'},'queuedPods':2}"));
    assert_false(fold_with_queue(before, r.status, "{'queued':{'gpu-memory':'8Gi'},'queuedPods':2}",
                                 "{'queued':{'gpu-memory':'16Gi'},'queuedPods':1}"));
    assert_false(fold_with_queue(before, r.status, "{}", "{'queued':{'gpus':'1'},'queuedPods':0}"));
    assert_false(fold_with_queue(before, r.status, "{'queuedPods':'two'}", "{}"));
    json_object_put(before);

    /* h1 admitted on a webhook's escrow hold: no reservation of its own, the
     * hold charges it. Counting it may wait while the live holds cover the
     * rise (8Gi here), not when they do not, nor once they lapse. */
#define HOLD(mem, exp)                                                                             \
    "{'key':'escrow-1','namespace':'a','pod':'wh','gpu-memory':'" mem "','gpus':'0',"              \
    "'gpu-pods':'0','expires':'" exp "','escrow':'hold'}"
    before = with_status(q, "4Gi", "4Gi", "[" HOLD("16Gi", "2026-11-21T15:07:05Z") "]");
    reconcile(s, before, NOW, &r);
    assert_int_equal(r.dropped, 0);
    assert_true(ctl_fold_only(before, r.status, NOW, NOW + 2));
    assert_false(ctl_fold_only(before, r.status, NOW, NOW + 60));
    json_object_put(before);
    before = with_status(q, "4Gi", "4Gi", "[" HOLD("4Gi", "2026-11-21T15:07:05Z") "]");
    reconcile(s, before, NOW, &r);
    assert_false(ctl_fold_only(before, r.status, NOW, NOW + 2));
    json_object_put(before);
#undef HOLD

    /* Usage goes down (a pod went away): the write may not wait. */
    before = with_status(q, "20Gi", "12Gi", NULL);
    reconcile(s, before, NOW, &r);
    assert_true(r.changed);
    assert_false(ctl_fold_only(before, r.status, NOW, NOW + 2));
    json_object_put(before);
    /* No status, or one that does not parse: no. */
    json_object *bare = quota_json("a", "q", "{'hard':{'gpu-memory':'100Gi'}}", NULL);
    assert_false(ctl_fold_only(bare, r.status, NOW, NOW + 2));
    json_object_put(bare);
    before = with_status(q, "lots", "4Gi", NULL);
    assert_false(ctl_fold_only(before, r.status, NOW, NOW + 2));
    json_object_put(before);
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* ctl_room_freed: what admissions count falls in the next status, in all
 * or for a model, or it does not. */
static void test_room_freed(void **state)
{
    (void)state;
    ctl_podstore *s;
    ctl_result r;
    json_object *q = counted_h1_u(&s, &r);
    assert_false(ctl_room_freed(q, r.status, NOW)); /* the same */
    const struct {
        const char *used, *by_model, *reservations;
        bool freed;
    } cases[] = {
        {"20Gi", "16Gi", NULL, true}, /* a pod ended: both fall */
        {"12Gi", "16Gi", NULL, true}, /* only the model's falls */
        {"20Gi", "12Gi", NULL, true}, /* only the total falls */
        {"4Gi", "4Gi", "[" RESM("k-h1", "8Gi", "2026-11-21T15:07:05Z") "]", false}, /* a fold */
        {"8Gi", "8Gi", NULL, false},  /* a pod appeared: usage rises */
        {"lots", "8Gi", NULL, false}, /* does not parse */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *before =
            with_status(q, cases[i].used, cases[i].by_model, cases[i].reservations);
        reconcile(s, before, NOW, &r);
        assert_int_equal(ctl_room_freed(before, r.status, NOW), cases[i].freed);
        json_object_put(before);
    }
    json_object *bare = quota_json("a", "q", "{'hard':{'gpu-memory':'100Gi'}}", NULL);
    assert_false(ctl_room_freed(bare, r.status, NOW)); /* no status yet */
    json_object_put(bare);
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

/* A running pod of namespace "a" as the recount sees it. */
static gq_usage_pod usage_pod(int64_t mem, int64_t gpus)
{
    gq_usage_pod p;
    memset(&p, 0, sizeof(p));
    p.facts.namespace_ = "a";
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        p.charge.set[k] = true;
    p.charge.v[GQ_KEY_GPU_MEMORY] = mem;
    p.charge.v[GQ_KEY_GPUS] = gpus;
    p.charge.v[GQ_KEY_GPU_PODS] = 1;
    return p;
}

static void test_reconcile_pure(void **state)
{
    (void)state;
    gq_usage_pod pods[2] = {usage_pod(GI, 0), usage_pod(2 * GI, 0)};
    pods[1].facts.terminal = true;
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'1Gi'}}",
                                "{'reservations':[" RES("k", "a", "2026-11-21T15:07:00Z") "]}");
    ctl_result r;
    ctl_result_init(&r);
    int calls = 0;
    gq_err err;
    assert_int_equal(
        ctl_reconcile(q, &(ctl_counted){pods, 2, seen_none, &calls, NOW, {0}}, &r, &err), GQ_OK);
    assert_int_equal(calls, 1);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_MEMORY], GI);
    assert_false(r.exceeded); /* equality is within limits */
    assert_int_equal(r.kept, 1);
    ctl_result_dispose(&r);
    assert_int_equal(ctl_reconcile(NULL, &(ctl_counted){pods, 2, NULL, NULL, NOW, {0}}, &r, &err),
                     GQ_EINVAL);
    json_object_put(q);
}

/* Claim records across a recount: a claim counted pods name gets a counted
 * record (replacing the admission's record); a counted record no counted
 * pod names goes (the claim is freed); an uncounted live one stays until it
 * expires, as its pods may not have been seen yet; pod reservations are
 * untouched. */
#define CLAIM_AT(k, name, exp, extra)                                                              \
    "{'key':'" k "','namespace':'a','pod':'" name "','gpu-memory':'80Gi','gpus':'1',"              \
    "'gpu-pods':'0','expires':'" exp "','claim':true" extra "}"
#define CLAIM(k, name, extra) CLAIM_AT(k, name, "2026-11-21T15:07:00Z", extra)
static void test_reconcile_claim_records(void **state)
{
    (void)state;
    gq_shared_claim shared;
    memset(&shared, 0, sizeof(shared));
    snprintf(shared.uid, sizeof(shared.uid), "u-new");
    snprintf(shared.name, sizeof(shared.name), "new");
    shared.gpus = 1;
    shared.memory = 80 * GI;
    gq_usage_pod pods[2] = {usage_pod(80 * GI, 1), usage_pod(80 * GI, 1)};
    for (int i = 0; i < 2; i++) {
        pods[i].claims = &shared;
        pods[i].n_claims = 1;
    }
    json_object *q = quota_json(
        "a", "q", "{'hard':{'gpus':'4','gpu-pods':'10'}}",
        "{'reservations':[" CLAIM("u-new", "new", "") "," CLAIM(
            "u-gone", "gone",
            ",'counted':true") "," CLAIM("u-wait", "wait",
                                         "") "," RES("k-pod", "a", "2026-11-21T15:07:00Z") "]}");
    ctl_result r;
    ctl_result_init(&r);
    int calls = 0;
    gq_err err;
    assert_int_equal(
        ctl_reconcile(q, &(ctl_counted){pods, 2, seen_none, &calls, NOW, {0}}, &r, &err), GQ_OK);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPUS], 1);
    assert_int_equal(r.fig.used.v[GQ_KEY_GPU_PODS], 2);
    json_object *res = NULL;
    assert_true(json_object_object_get_ex(r.status, "reservations", &res));
    char keys[256] = "";
    for (size_t i = 0; i < json_object_array_length(res); i++) {
        json_object *it = json_object_array_get_idx(res, i), *k, *c;
        json_object_object_get_ex(it, "key", &k);
        size_t len = strlen(keys);
        snprintf(keys + len, sizeof(keys) - len, "%s%s%s", len ? " " : "",
                 json_object_get_string(k),
                 json_object_object_get_ex(it, "counted", &c) ? ":counted" : "");
    }
    assert_string_equal(keys, "u-wait k-pod u-new:counted");
    /* the next recount changes nothing (a counted record stays put) */
    json_object_object_add(q, "status", json_object_get(r.status));
    ctl_result r2;
    ctl_result_init(&r2);
    assert_int_equal(
        ctl_reconcile(q, &(ctl_counted){pods, 2, seen_none, &calls, NOW, {0}}, &r2, &err), GQ_OK);
    assert_false(r2.changed);
    ctl_result_dispose(&r2);
    /* its last pod gone, the claim is freed */
    json_object_object_add(q, "status", json_object_get(r.status));
    ctl_result_init(&r2);
    assert_int_equal(
        ctl_reconcile(q, &(ctl_counted){pods, 0, seen_none, &calls, NOW, {0}}, &r2, &err), GQ_OK);
    assert_int_equal(r2.fig.used.v[GQ_KEY_GPUS], 0);
    res = NULL;
    assert_true(json_object_object_get_ex(r2.status, "reservations", &res));
    assert_int_equal(json_object_array_length(res), 2); /* u-wait, k-pod */
    ctl_result_dispose(&r2);
    /* a pod admitted on the counted claim, not seen yet, when the claim's
     * last counted pod goes: the claim stays charged, live, as long as that
     * pod's reservation; once the pod is seen (or its reservation gone)
     * and no counted pod names it, it is freed */
    json_object_object_add(
        q, "status",
        J("{'reservations':[" CLAIM_AT(
            "u-new", "new", "1970-01-01T00:00:00Z",
            ",'counted':true") ","
                               "{'key':'k-rider','namespace':'a','pod':'r','gpu-memory':'0','gpus':"
                               "'0','gpu-pods':'1',"
                               "'expires':'2026-11-21T15:08:00Z','claims':['u-new']}]}"));
    ctl_result_init(&r2);
    assert_int_equal(
        ctl_reconcile(q, &(ctl_counted){pods, 0, seen_none, &calls, NOW, {0}}, &r2, &err), GQ_OK);
    res = NULL;
    assert_true(json_object_object_get_ex(r2.status, "reservations", &res));
    assert_int_equal(json_object_array_length(res), 2);
    json_object *it = json_object_array_get_idx(res, 0), *v = NULL;
    assert_false(json_object_object_get_ex(it, "counted", NULL));
    assert_true(json_object_object_get_ex(it, "expires", &v));
    assert_string_equal(json_object_get_string(v), "2026-11-21T15:08:00Z");
    json_object_object_add(q, "status", json_object_get(r2.status));
    ctl_result_dispose(&r2);
    ctl_result_init(&r2);
    assert_int_equal(ctl_reconcile(q, &(ctl_counted){pods, 0, seen_all, NULL, NOW, {0}}, &r2, &err),
                     GQ_OK);
    res = NULL;
    assert_true(json_object_object_get_ex(r2.status, "reservations", &res));
    /* the rider seen (and not naming it any more): the live record lives on
     * to its expiry, like any admission's */
    assert_int_equal(json_object_array_length(res), 1);
    ctl_result_dispose(&r2);
    ctl_result_dispose(&r);
    json_object_put(q);
}

/* Only a record that is kept claims its key: a counted claim record no pod
 * names any more is freed, and a live record of the same claim after it is
 * still kept (a status with a key twice; test_reservation_keys_unique). */
static void test_reconcile_claim_key_twice(void **state)
{
    (void)state;
    json_object *q = quota_json(
        "a", "q", "{'hard':{'gpus':'4'}}",
        "{'reservations':[" CLAIM("u-x", "x", ",'counted':true") "," CLAIM("u-x", "x", "") "]}");
    ctl_result r;
    ctl_result_init(&r);
    int calls = 0;
    gq_err err;
    assert_int_equal(
        ctl_reconcile(q, &(ctl_counted){NULL, 0, seen_none, &calls, NOW, {0}}, &r, &err), GQ_OK);
    json_object *res = NULL, *c;
    assert_true(json_object_object_get_ex(r.status, "reservations", &res));
    assert_int_equal(json_object_array_length(res), 1);
    assert_false(json_object_object_get_ex(json_object_array_get_idx(res, 0), "counted", &c));
    assert_int_equal(r.kept, 1);
    ctl_result_dispose(&r);
    json_object_put(q);
}
#undef CLAIM
#undef CLAIM_AT

/* --- invalid spec -------------------------------------------------------------- */

static const char *ready_field(json_object *status, const char *field)
{
    json_object *conds = NULL;
    json_object_object_get_ex(status, "conditions", &conds);
    for (size_t i = 0; conds && i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i), *t, *v;
        if (json_object_object_get_ex(c, "type", &t) &&
            !strcmp(json_object_get_string(t), "Ready") && json_object_object_get_ex(c, field, &v))
            return json_object_get_string(v);
    }
    return NULL;
}

/* A quota whose spec turned invalid says so in its status: Ready False,
 * reason InvalidSpec, the parse error (key and value) as message,
 * observedGeneration of the invalid spec; the last counted usage and the
 * Exceeded condition stay; lapsed reservations go. Once written it is
 * stable (no new write, no new Event) until the message changes. */
static void test_invalid_spec_status(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec p = {.ns = "a", .name = "p", .mem = "8Gi"};
    add_pod(s, &p);
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'64Gi'}}", NULL);
    ctl_result r;
    ctl_result_init(&r);
    reconcile(s, q, NOW, &r);
    json_object_object_add(q, "status", json_object_get(r.status));
    json_object *status = NULL;
    json_object_object_get_ex(q, "status", &status);
    json_object *res = J("[" RES("k-live", "a", "2026-11-21T15:07:00Z") "," RES(
        "k-lapsed", "a", "2026-11-21T15:06:05Z") "]");
    json_object_object_add(status, "reservations", res);
    /* the spec turns invalid: generation 4, a value that is no quantity */
    json_object *spec = J("{'hard':{'gpu-memory':'lots'}}");
    json_object_object_add(q, "spec", spec);
    json_object *md = NULL;
    json_object_object_get_ex(q, "metadata", &md);
    json_object_object_add(md, "generation", json_object_new_int64(4));
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(ctl_podstore_reconcile(s, q, NOW, &r, &err), GQ_EINVAL);
    char why[GQ_ERR_MSG_MAX];
    snprintf(why, sizeof why, "%s", err.msg);
    assert_int_equal(ctl_reconcile_invalid(q, why, NOW + 1, &r, &err), GQ_OK);
    assert_true(r.invalid);
    assert_true(r.became_invalid);
    assert_true(r.changed);
    assert_string_equal(ready_field(r.status, "status"), "False");
    assert_string_equal(ready_field(r.status, "reason"), "InvalidSpec");
    assert_non_null(strstr(ready_field(r.status, "message"),
                           "spec.hard.gpu-memory: invalid quantity \"lots\""));
    assert_string_equal(ready_field(r.status, "observedGeneration"), "4");
    assert_string_equal(ready_field(r.status, "lastTransitionTime"), "2026-11-21T15:06:06Z");
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(r.status, "observedGeneration", &v));
    assert_int_equal(json_object_get_int64(v), 4);
    assert_string_equal(status_str(&r, "used", "gpu-memory"), "8Gi");
    assert_string_equal(status_str(&r, "hard", "gpu-memory"), "64Gi");
    assert_int_equal(r.kept, 1);
    assert_int_equal(r.dropped, 1);
    assert_int_equal(r.next_expiry, NOW + 55);
    json_object *conds = NULL;
    json_object_object_get_ex(r.status, "conditions", &conds);
    assert_int_equal(json_object_array_length(conds), 2); /* Ready and Exceeded (kept) */
    /* written: the next reconcile changes nothing and raises no Event */
    json_object_object_add(q, "status", json_object_get(r.status));
    assert_int_equal(ctl_reconcile_invalid(q, why, NOW + 2, &r, &err), GQ_OK);
    assert_false(r.changed);
    assert_false(r.became_invalid);
    /* fixed: Ready again, from the new generation */
    json_object_object_add(q, "spec", J("{'hard':{'gpu-memory':'64Gi'}}"));
    reconcile(s, q, NOW + 3, &r);
    assert_false(r.invalid);
    assert_string_equal(ready_field(r.status, "status"), "True");
    assert_string_equal(ready_field(r.status, "reason"), "Reconciled");
    assert_string_equal(ready_field(r.status, "observedGeneration"), "4");
    ctl_result_dispose(&r);
    json_object_put(q);
    ctl_podstore_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recount_scopes),
        cmocka_unit_test(test_status_shape_and_noop),
        cmocka_unit_test(test_exceeded_transitions),
        cmocka_unit_test(test_reservations),
        cmocka_unit_test(test_escrow_records),
        cmocka_unit_test(test_reservation_keys_unique),
        cmocka_unit_test(test_fold_only),
        cmocka_unit_test(test_room_freed),
        cmocka_unit_test(test_invalid_spec_status),
        cmocka_unit_test(test_tenant_membership),
        cmocka_unit_test(test_group_sums),
        cmocka_unit_test(test_reconcile_pure),
        cmocka_unit_test(test_reconcile_claim_records),
        cmocka_unit_test(test_reconcile_claim_key_twice),
        cmocka_unit_test(test_usage_by_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
