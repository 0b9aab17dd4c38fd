/* What a quota's pods use (quota/policy.h): the recount from pods, shared
 * claims counted once, the pod facts the matching reads, and Kubernetes'
 * counting rule with the deletion deadline it reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_fixtures.h"

/* ------------------------------------------------------------------------ */
/* Recount                                                                     */

static gq_usage_pod upod(const char *ns, int64_t mem_gi, int64_t gpus, bool terminal,
                         json_object *labels)
{
    gq_usage_pod p = {.facts = {.namespace_ = ns, .terminal = terminal}, .ns_labels = labels};
    gq_pod_cost c = {.gpu_memory = mem_gi * GI, .gpus = gpus, .gpu_pods = 1};
    gq_charge_from_cost(&c, terminal, &p.charge);
    return p;
}

static void test_recount(void **state)
{
    (void)state;
    json_object *ml = J("{'team':'ml'}");
    gq_usage_pod pods[] = {
        upod("a", 8, 0, false, ml), upod("b", 16, 1, false, ml),   upod("a", 4, 0, false, ml),
        upod("a", 32, 0, true, ml), upod("c", 64, 0, false, NULL), upod("b", 2, 0, false, ml),
    };
    size_t n = sizeof(pods) / sizeof(pods[0]);
    gq_err err;
    gq_usage u;
    gq_usage_init(&u);

    gq_quota *q = Q(GQ("q", "a", "'hard':{'gpu-memory':'64Gi','gpu-pods':10}", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    assert_int_equal(u.used.v[GQ_KEY_GPU_PODS], 2);
    assert_false(u.used.set[GQ_KEY_GPUS]); /* only keys of hard */
    assert_int_equal(u.n_ns, 0);
    json_object *j = gq_amounts_to_json(&u.used);
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "{\"gpu-memory\":\"12Gi\",\"gpu-pods\":\"2\"}");
    json_object_put(j);
    gq_quota_free(q);

    /* A quota that may borrow says what it uses above hard; others do not. */
    q = Q(GQ("q", "a",
             "'hard':{'gpu-memory':'8Gi','gpu-pods':10},'borrowingLimit':{'gpu-memory':'8Gi'}",
             ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    j = usage_member(q, &u, "borrowed");
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "{\"gpu-memory\":\"4Gi\",\"gpu-pods\":\"0\"}");
    json_object_put(j);
    gq_quota_free(q);

    q = Q(GTQ("t",
              "'hard':{'gpu-memory':'1Ti','gpus':8},'namespaceSelector':{'matchLabels':{"
              "'team':'ml'}}",
              ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], 30 * GI);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 1);
    assert_int_equal(u.n_ns, 2);
    j = usage_member(q, &u, "namespaces");
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "[{\"namespace\":\"a\",\"used\":{\"gpu-memory\":\"12Gi\",\"gpus\":\"0\"}},"
                        "{\"namespace\":\"b\",\"used\":{\"gpu-memory\":\"18Gi\",\"gpus\":\"1\"}}]");
    json_object_put(j);
    gq_quota_free(q);

    /* Recount over nothing empties the previous result. */
    q = Q(GTQ("t", "'hard':{'gpus':8},'namespaces':['z']", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 0);
    assert_true(u.used.set[GQ_KEY_GPUS]);
    assert_int_equal(u.n_ns, 0);
    gq_quota_free(q);
    gq_usage_dispose(&u);
    gq_usage_dispose(NULL);
    json_object_put(ml);
}

/* Shared ResourceClaims: each counts once per quota however many counted
 * pods name it, in any order; every pod still counts in gpu-pods. */
static gq_shared_claim sclaim(const char *uid, const char *name, int64_t gpus, int64_t mem_gi)
{
    gq_shared_claim c;
    memset(&c, 0, sizeof(c));
    snprintf(c.uid, sizeof(c.uid), "%s", uid);
    snprintf(c.name, sizeof(c.name), "%s", name);
    c.gpus = gpus;
    c.memory = mem_gi * GI;
    return c;
}

static void test_recount_shared_claims(void **state)
{
    (void)state;
    gq_shared_claim pair = sclaim("u-pair", "pair", 2, 160), solo = sclaim("u-solo", "solo", 1, 80);
    gq_shared_claim both[] = {pair, solo};
    /* pods' charges include their claims (gq_pod_cost_compute), plus 8Gi of
     * their own on the third */
    gq_usage_pod pods[] = {
        upod("a", 160, 2, false, NULL), upod("a", 160, 2, false, NULL),
        upod("a", 248, 3, false, NULL), upod("a", 160, 2, true, NULL),
        upod("b", 16, 1, false, NULL),
    };
    pods[0].claims = pods[1].claims = pods[3].claims = &pair;
    pods[0].n_claims = pods[1].n_claims = pods[3].n_claims = 1;
    pods[2].claims = both;
    pods[2].n_claims = 2;
    size_t n = sizeof(pods) / sizeof(pods[0]);
    gq_err err;
    gq_usage u;
    gq_usage_init(&u);
    gq_quota *q = Q(GQ("q", "a", "'hard':{'gpu-memory':'1Ti','gpus':8,'gpu-pods':10}", ""));
    int64_t want_mem = (160 + 80 + 8) * GI;
    for (int order = 0; order < 2; order++) {
        if (order) { /* reversed: the same result */
            for (size_t i = 0; i < n / 2; i++) {
                gq_usage_pod t = pods[i];
                pods[i] = pods[n - 1 - i];
                pods[n - 1 - i] = t;
            }
        }
        assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
        assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], want_mem);
        assert_int_equal(u.used.v[GQ_KEY_GPUS], 3);
        assert_int_equal(u.used.v[GQ_KEY_GPU_PODS], 3);
        assert_int_equal(u.n_claims, 2);
        assert_string_equal(u.claims[0].key, "u-pair");
        assert_string_equal(u.claims[0].pod, "pair");
        assert_true(u.claims[0].claim && u.claims[0].counted);
        assert_int_equal(u.claims[0].amounts.v[GQ_KEY_GPU_MEMORY], 160 * GI);
        assert_int_equal(u.claims[0].amounts.v[GQ_KEY_GPU_PODS], 0);
        assert_string_equal(u.claims[1].key, "u-solo");
        json_object *rec = gq_reservation_to_json(&u.claims[1]);
        assert_string_equal(
            json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN),
            "{\"key\":\"u-solo\",\"namespace\":\"a\",\"pod\":\"solo\","
            "\"gpu-memory\":\"80Gi\",\"gpu-pods\":\"0\",\"gpus\":\"1\","
            "\"expires\":\"1970-01-01T00:00:00Z\",\"claim\":true,\"counted\":true}");
        /* it parses back as written, and adds nothing to what is in use */
        gq_reservation back;
        assert_int_equal(gq_reservation_parse(rec, NULL, &back, &err), GQ_OK);
        assert_true(back.claim && back.counted);
        gq_reservation_dispose(&back);
        json_object_put(rec);
    }
    gq_quota_free(q);
    /* a tenant over both namespaces: the claims count in their namespace */
    q = Q(GTQ("t", "'hard':{'gpus':8},'namespaces':['a','b']", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 4);
    assert_int_equal(u.n_ns, 2);
    assert_int_equal(u.ns[0].used.v[GQ_KEY_GPUS], 3);
    assert_int_equal(u.ns[1].used.v[GQ_KEY_GPUS], 1);
    gq_quota_free(q);
    /* only terminal pods name the claims: freed */
    for (size_t i = 0; i < n; i++)
        if (pods[i].n_claims)
            pods[i].facts.terminal = true;
    q = Q(GQ("q", "a", "'hard':{'gpus':8}", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 0);
    assert_int_equal(u.n_claims, 0);
    gq_quota_free(q);
    gq_usage_dispose(&u);
}

/* gq_claims_once: one ref per uid (the dearest record), none of those
 * already charged, in uid order. */
static bool charged_b(void *ud, const char *uid)
{
    (void)ud;
    return !strcmp(uid, "b");
}

static void test_claims_once(void **state)
{
    (void)state;
    gq_shared_claim c[] = {sclaim("c", "c", 1, 80), sclaim("a", "a", 1, 24),
                           sclaim("b", "b", 1, 80), sclaim("a", "a", 1, 80)};
    gq_claim_ref refs[4];
    for (size_t i = 0; i < 4; i++)
        refs[i] = (gq_claim_ref){&c[i], i};
    assert_int_equal(gq_claims_once(refs, 4, NULL, NULL), 3);
    assert_string_equal(refs[0].claim->uid, "a");
    assert_int_equal(refs[0].owner, 3); /* the dearest record of "a" */
    assert_string_equal(refs[1].claim->uid, "b");
    assert_string_equal(refs[2].claim->uid, "c");
    for (size_t i = 0; i < 4; i++)
        refs[i] = (gq_claim_ref){&c[i], i};
    assert_int_equal(gq_claims_once(refs, 4, charged_b, NULL), 2);
    assert_string_equal(refs[0].claim->uid, "a");
    assert_string_equal(refs[1].claim->uid, "c");
    assert_int_equal(gq_claims_once(refs, 0, NULL, NULL), 0);
    /* the pod's own part: its charge without its shared claims, floored */
    gq_amounts charge, own;
    gq_pod_cost pc = {.gpu_memory = 100 * GI, .gpus = 2, .gpu_pods = 1};
    gq_charge_from_cost(&pc, false, &charge);
    gq_charge_own(&charge, c, 2, &own);
    assert_int_equal(own.v[GQ_KEY_GPU_MEMORY], 0); /* 100Gi less 104Gi: floored */
    assert_int_equal(own.v[GQ_KEY_GPUS], 0);
    assert_int_equal(own.v[GQ_KEY_GPU_PODS], 1);
    gq_charge_own(&charge, &c[1], 1, &own);
    assert_int_equal(own.v[GQ_KEY_GPU_MEMORY], 76 * GI);
    assert_int_equal(own.v[GQ_KEY_GPUS], 1);
}

/* ------------------------------------------------------------------------ */
/* Pod facts                                                                    */

static void test_pod_facts(void **state)
{
    (void)state;
    gq_pod_facts f;
    gq_err err;
    json_object *p = J("{'spec':{'priorityClassName':'high','activeDeadlineSeconds':0}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_OK);
    assert_string_equal(f.namespace_, "a");
    assert_string_equal(f.priority_class, "high");
    assert_true(f.terminating);
    assert_false(f.terminal);
    json_object_put(p);
    p = J("{'spec':{'activeDeadlineSeconds':-1}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_OK);
    assert_false(f.terminating);
    assert_null(f.priority_class);
    json_object_put(p);
    p = J("{'spec':{'activeDeadlineSeconds':'10'}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "spec.activeDeadlineSeconds: must be an integer");
    json_object_put(p);
    p = J("{'spec':{'priorityClassName':1}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "spec.priorityClassName: must be a string");
    json_object_put(p);
    assert_int_equal(gq_pod_facts_from_json(NULL, "a", &f, &err), GQ_EINVAL);
}

/* Kubernetes' counting rule, and the deletion deadline it reads. */
static void test_pod_counts(void **state)
{
    (void)state;
    int64_t at = -1;
    gq_err e;
    json_object *p = J("{'metadata':{'name':'p'}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_OK);
    assert_int_equal(at, 0);
    json_object_put(p);
    p = J("{'metadata':{'deletionTimestamp':'2026-11-21T15:06:05Z',"
          "'deletionGracePeriodSeconds':30}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_OK);
    assert_int_equal(at, NOW + 30);
    json_object_put(p);
    /* A negative grace is no grace; a bad time is an error naming nothing
     * else of the pod. */
    p = J("{'metadata':{'deletionTimestamp':'2026-11-21T15:06:05Z',"
          "'deletionGracePeriodSeconds':-5}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_OK);
    assert_int_equal(at, NOW);
    json_object_put(p);
    p = J("{'metadata':{'deletionTimestamp':'yesterday'}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_EINVAL);
    json_object_put(p);

    assert_true(gq_pod_counts(false, 0, NOW));
    assert_false(gq_pod_counts(true, 0, NOW));
    /* Counted through the grace period, up to and including its last second. */
    assert_true(gq_pod_counts(false, NOW + 30, NOW));
    assert_true(gq_pod_counts(false, NOW + 30, NOW + 30));
    assert_false(gq_pod_counts(false, NOW + 30, NOW + 31));
    assert_false(gq_pod_counts(true, NOW + 30, NOW));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recount),     cmocka_unit_test(test_recount_shared_claims),
        cmocka_unit_test(test_claims_once), cmocka_unit_test(test_pod_facts),
        cmocka_unit_test(test_pod_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
