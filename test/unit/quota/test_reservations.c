/* Reservation records in a quota's status (quota/status.h, quota/policy.h):
 * added once per key, found for a pod, dropped when expired and summed with
 * used, and an in-use total that overflows. */
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
/* Reservations in status                                                     */

static gq_quota_status decoded(const char *json, gq_status_mode mode)
{
    json_object *o = J(json);
    gq_quota_status st;
    gq_err err;
    gq_err_clear(&err);
    if (gq_quota_status_decode(o, mode, &st, &err))
        fail_msg("decode failed: %s (%s)", err.msg, json);
    json_object_put(o);
    return st;
}

static void test_status_add_reservation(void **state)
{
    (void)state;
    gq_quota_status st = decoded("{'used':{'gpu-memory':'8Gi'}}", GQ_STATUS_CHARGE);
    gq_reservation r = {.key = "uid-1", .namespace_ = "a", .pod = "job-x-", .expires = NOW + 30};
    gq_charge_from_cost(&(gq_pod_cost){.gpu_memory = 16 * GI, .gpus = 0, .gpu_pods = 1}, false,
                        &r.amounts);
    bool added = false;
    gq_err err;
    assert_int_equal(gq_quota_status_add_reservation(&st, &r, &added, &err), GQ_OK);
    assert_true(added);
    json_object *enc = gq_quota_status_encode(&st);
    assert_string_equal(
        json_object_to_json_string_ext(enc, JSON_C_TO_STRING_PLAIN),
        "{\"used\":{\"gpu-memory\":\"8Gi\"},\"reservations\":[{\"key\":\"uid-1\",\"namespace\":"
        "\"a\",\"pod\":\"job-x-\",\"gpu-memory\":\"16Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\","
        "\"expires\":\"2026-11-21T15:06:35Z\"}]}");
    /* Same key again (webhook retry): idempotent, even with other amounts. */
    r.expires = NOW + 999;
    assert_int_equal(gq_quota_status_add_reservation(&st, &r, &added, &err), GQ_OK);
    assert_false(added);
    assert_int_equal(st.n_reservations, 1);

    /* The record round-trips through the parser. */
    json_object *arr = json_object_object_get(enc, "reservations");
    gq_reservation back;
    assert_int_equal(gq_reservation_parse(json_object_array_get_idx(arr, 0), NULL, &back, &err),
                     GQ_OK);
    assert_string_equal(back.key, "uid-1");
    assert_string_equal(back.pod, "job-x-");
    assert_int_equal(back.expires, NOW + 30);
    assert_int_equal(back.amounts.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(back.amounts.v[GQ_KEY_GPU_PODS], 1);
    gq_reservation_dispose(&back);
    gq_reservation_dispose(NULL);
    json_object_put(enc);

    /* Sum: used + the live reservation. */
    gq_amounts sum;
    assert_int_equal(gq_quota_status_sum(&st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 24 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 1);
    assert_int_equal(gq_quota_status_sum(&st, NOW + 30, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 0);
    gq_quota_status_dispose(&st);

    /* A rollback removes what a charge added, by key, and only that. */
    st = decoded("{'reservations':[" RES("a", "1Gi", LIVE) "," RES("uid-1", "1Gi", LIVE) "," RES(
                     "b", "1Gi", LIVE) "]}",
                 GQ_STATUS_CHARGE);
    assert_true(gq_quota_status_remove_reservation(&st, "uid-1"));
    assert_false(gq_quota_status_remove_reservation(&st, "uid-1"));
    assert_false(gq_quota_status_remove_reservation(&st, "7"));
    assert_int_equal(st.n_reservations, 2);
    assert_string_equal(st.reservations[0].key, "a");
    assert_string_equal(st.reservations[1].key, "b");
    gq_quota_status_dispose(&st);
    /* A reservations member that is no list holds none. */
    st = decoded("{'reservations':{'key':'a'}}", GQ_STATUS_SALVAGE);
    assert_false(gq_quota_status_remove_reservation(&st, "a"));
    gq_quota_status_dispose(&st);
    gq_quota_status_init(&st);
    assert_false(gq_quota_status_remove_reservation(&st, "a"));

    /* Wrong shapes: a writer that charges does not charge them. */
    json_object *o = J("{'reservations':{}}");
    assert_int_equal(gq_quota_status_decode(o, GQ_STATUS_CHARGE, &st, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status.reservations: must be an array, got object");
    json_object_put(o);
    o = J("[]");
    assert_int_equal(gq_quota_status_decode(o, GQ_STATUS_POLICY, &st, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status: must be an object, got array");
    json_object_put(o);
}

static void test_reservation_for_pod(void **state)
{
    (void)state;
    gq_amounts charge;
    gq_charge_from_cost(&(gq_pod_cost){.gpu_memory = 2 * GI, .gpu_pods = 1}, false, &charge);
    gq_reservation r;
    gq_err err;
    /* Keyed by the pod's uid (what the validating webhook and the
     * controller both see); an annotation a user wrote plays no part. */
    json_object *p = J("{'metadata':{'name':'job-x7k2p','generateName':'job-','uid':'pod-uid-1',"
                       "'annotations':{'gpuquota.io/reservation':'stamp-1'}}}");
    assert_int_equal(gq_reservation_for_pod(p, "a", "uid-9", &charge, NOW + 60, &r, &err), GQ_OK);
    assert_string_equal(r.key, "pod-uid-1");
    assert_string_equal(r.pod, "job-x7k2p");
    assert_string_equal(r.namespace_, "a");
    assert_int_equal(r.expires, NOW + 60);
    assert_int_equal(r.amounts.v[GQ_KEY_GPU_MEMORY], 2 * GI);
    gq_reservation_dispose(&r);
    json_object_put(p);

    /* No uid (offline admission): the request uid; an annotation still
     * plays no part. */
    p = J("{'metadata':{'generateName':'web-','uid':'','annotations':{'gpuquota.io/"
          "reservation':'stamp-1'}}}");
    assert_int_equal(gq_reservation_for_pod(p, "a", "uid-9", &charge, NOW, &r, &err), GQ_OK);
    assert_string_equal(r.key, "uid-9");
    assert_string_equal(r.pod, "web-");
    gq_reservation_dispose(&r);
    assert_int_equal(gq_reservation_for_pod(p, "a", NULL, &charge, NOW, &r, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "reservation: the pod has no metadata.uid and the request no uid");
    json_object_put(p);
}

static void test_status_drop_and_sum(void **state)
{
    (void)state;
    const char *json =
        "{'used':{'gpu-memory':'10Gi','gpus':2},'reservations':[" RES("a", "4Gi", EXPIRED) "," RES(
            "b", "6Gi", LIVE) ",{'key':'corrupt'}," RES("c", "1Gi", "2026-11-21T15:06:04Z") "]}";
    json_object *o = J(json);
    gq_err err;
    gq_amounts sum;
    gq_quota_status st;
    /* A corrupt record makes the sum fail: never guess a smaller usage. */
    assert_int_equal(gq_quota_status_decode(o, GQ_STATUS_POLICY, &st, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status.reservations[2].namespace: must be a string, got null");
    json_object_put(o);
    /* A writer drops it (counted), then the expired ones. */
    st = decoded(json, GQ_STATUS_CHARGE);
    size_t dropped = st.dropped + gq_quota_status_drop_expired(&st, NOW);
    assert_int_equal(dropped, 3);
    assert_int_equal(st.n_reservations, 1);
    assert_string_equal(st.reservations[0].key, "b");
    assert_int_equal(gq_quota_status_sum(&st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPUS], 2);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 1);
    gq_quota_status_dispose(&st);

    /* No reservations at all. */
    st = decoded("{}", GQ_STATUS_CHARGE);
    assert_int_equal(st.dropped + gq_quota_status_drop_expired(&st, NOW), 0);
    assert_int_equal(gq_quota_status_sum(&st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 0);
    gq_quota_status_dispose(&st);
}

static void test_quota_in_use_overflow(void **state)
{
    (void)state;
    gq_quota *q = Q(GQ("q", "a", HARD64,
                       "'used':{'gpu-memory':'4Ei'},'reservations':[" RES("r", "4Ei", LIVE) "]"));
    gq_amounts a;
    gq_err err;
    assert_int_equal(gq_quota_in_use(q, NOW, NULL, &a, &err), GQ_ERANGE);
    assert_string_equal(err.msg, "q: gpu-memory overflows");
    gq_quota_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_add_reservation),
        cmocka_unit_test(test_reservation_for_pod),
        cmocka_unit_test(test_status_drop_and_sum),
        cmocka_unit_test(test_quota_in_use_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
