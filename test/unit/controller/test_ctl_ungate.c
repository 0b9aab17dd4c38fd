/* The queue admitter's charges (controller/ungate_charge.c): a DRA
 * ResourceClaim shared by queued pods is charged once per quota, as
 * /validate charges it, and a claim the quota charges already costs a
 * queued pod nothing more in the plan. JSON is written with single quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "controller/ctl_int.h"

#define GI (1024LL * 1024 * 1024)
#define NOW 1795273565LL /* 2026-11-21T15:06:05Z */
#define LATER "2026-11-21T15:08:00Z"
#define EARLIER "2026-11-21T15:00:00Z"

static json_object *quota_obj(const char *reservations)
{
    char buf[2048];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
             "'namespace':'a'},'spec':{'hard':{'gpu-memory':'160Gi','gpus':'2','gpu-pods':'10'}},"
             "'status':{'used':{'gpu-memory':'0','gpus':'0','gpu-pods':'0'},"
             "'reservations':[%s]}}",
             reservations);
    return J(buf);
}

static gq_quota *parse(json_object *obj)
{
    gq_quota *q = NULL;
    gq_err err;
    assert_int_equal(gq_quota_parse(obj, &q, &err), GQ_OK);
    return q;
}

/* ctl_ungate_charge on the status of quota object obj, as the queue
 * admitter charges it: decoded, charged, encoded back into obj. */
static gq_code charge(json_object *obj, const gq_quota *q, const ctl_admitted *p, bool *added,
                      gq_err *err)
{
    gq_quota_status st;
    assert_int_equal(
        gq_quota_status_decode(json_object_object_get(obj, "status"), GQ_STATUS_CHARGE, &st, err),
        GQ_OK);
    gq_code rc = ctl_ungate_charge(&st, q, p, NOW, added, err);
    json_object_object_add(obj, "status", gq_quota_status_encode(&st));
    gq_quota_status_dispose(&st);
    return rc;
}

/* A claim of two GPUs of 80Gi, named "pair". */
static gq_shared_claim pair_claim(void)
{
    gq_shared_claim c = {.gpus = 2, .memory = 160 * GI, .model = NULL};
    snprintf(c.uid, sizeof(c.uid), "claim-pair");
    snprintf(c.name, sizeof(c.name), "pair");
    return c;
}

/* A pod whose whole charge is the claim (gpu-pods 1). */
static ctl_admitted pod_on(const char *name, const char *uid, const gq_shared_claim *c)
{
    ctl_admitted p;
    memset(&p, 0, sizeof(p));
    p.ns = "a";
    p.name = name;
    p.uid = uid;
    p.charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        p.charge.set[k] = true;
    p.charge.v[GQ_KEY_GPU_MEMORY] = c->memory;
    p.charge.v[GQ_KEY_GPUS] = c->gpus;
    p.charge.v[GQ_KEY_GPU_PODS] = 1;
    p.claims = c;
    p.n_claims = 1;
    p.expires = NOW + 120;
    return p;
}

/* What the quota object's status now holds in use (used + live records). */
static gq_amounts in_use(json_object *obj)
{
    gq_quota *q = parse(obj);
    gq_amounts a;
    gq_err err;
    assert_int_equal(gq_quota_in_use(q, NOW, NULL, &a, &err), GQ_OK);
    gq_quota_free(q);
    return a;
}

/* "key[:claim]" of every record of status.reservations, in order. */
static void record_keys(json_object *obj, char *buf, size_t cap)
{
    json_object *st = NULL, *arr = NULL;
    buf[0] = '\0';
    assert_true(json_object_object_get_ex(obj, "status", &st));
    assert_true(json_object_object_get_ex(st, "reservations", &arr));
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *it = json_object_array_get_idx(arr, i), *k = NULL;
        assert_true(json_object_object_get_ex(it, "key", &k));
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s%s", len ? " " : "", json_object_get_string(k),
                 json_object_object_get_ex(it, "claim", NULL) ? ":claim" : "");
    }
}

/* Two queued pods naming one claim, both admitted in one pass: the claim is
 * charged once (one claim record), each pod's reservation holds its own
 * part (gpu-pods 1) and names the claim. */
static void test_shared_claim_charged_once(void **state)
{
    (void)state;
    gq_shared_claim c = pair_claim();
    json_object *obj = quota_obj("");
    gq_quota *q = parse(obj);
    json_object *st = NULL;
    assert_true(json_object_object_get_ex(obj, "status", &st));
    ctl_admitted a = pod_on("a", "uid-a", &c), b = pod_on("b", "uid-b", &c);
    gq_err err;
    bool added = false;
    assert_int_equal(charge(obj, q, &a, &added, &err), GQ_OK);
    assert_true(added);
    added = false;
    assert_int_equal(charge(obj, q, &b, &added, &err), GQ_OK);
    assert_true(added);
    char keys[256];
    record_keys(obj, keys, sizeof keys);
    assert_string_equal(keys, "uid-a claim-pair:claim uid-b");
    gq_amounts u = in_use(obj);
    assert_int_equal(u.v[GQ_KEY_GPUS], 2);
    assert_int_equal(u.v[GQ_KEY_GPU_MEMORY], 160 * GI);
    assert_int_equal(u.v[GQ_KEY_GPU_PODS], 2);
    /* the records read back as /validate writes them */
    gq_quota *after = parse(obj);
    assert_int_equal(after->n_reservations, 3);
    for (size_t i = 0; i < after->n_reservations; i++) {
        const gq_reservation *r = &after->reservations[i];
        if (r->claim) {
            assert_string_equal(r->pod, "pair");
            assert_int_equal(r->amounts.v[GQ_KEY_GPU_PODS], 0);
            assert_int_equal(r->expires, NOW + 120);
            continue;
        }
        assert_int_equal(r->amounts.v[GQ_KEY_GPUS], 0);
        assert_int_equal(r->amounts.v[GQ_KEY_GPU_MEMORY], 0);
        assert_int_equal(r->amounts.v[GQ_KEY_GPU_PODS], 1);
        assert_int_equal(r->n_claims, 1);
        assert_string_equal(r->claims[0], "claim-pair");
    }
    gq_quota_free(after);
    gq_quota_free(q);
    json_object_put(obj);
}

/* A claim the quota charges already (counted by the recount, or a live
 * record of an earlier admission) gets no second record; a lapsed record
 * keyed like it is replaced by a live one. */
static void test_claim_charged_before(void **state)
{
    (void)state;
    static const struct {
        const char *record;
        const char *keys;
        int64_t gpus; /* in use after the charge */
    } cases[] = {
        {"{'key':'claim-pair','namespace':'a','pod':'pair','gpu-memory':'160Gi','gpus':'2',"
         "'gpu-pods':'0','expires':'1970-01-01T00:00:00Z','claim':true,'counted':true}",
         "claim-pair:claim uid-a", 0 /* counted in status.used, which the test leaves 0 */},
        {"{'key':'claim-pair','namespace':'a','pod':'pair','gpu-memory':'160Gi','gpus':'2',"
         "'gpu-pods':'0','expires':'" LATER "','claim':true}",
         "claim-pair:claim uid-a", 2},
        {"{'key':'claim-pair','namespace':'a','pod':'pair','gpu-memory':'160Gi','gpus':'2',"
         "'gpu-pods':'0','expires':'" EARLIER "','claim':true}",
         "uid-a claim-pair:claim", 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gq_shared_claim c = pair_claim();
        json_object *obj = quota_obj(cases[i].record), *st = NULL;
        gq_quota *q = parse(obj);
        assert_true(json_object_object_get_ex(obj, "status", &st));
        ctl_admitted a = pod_on("a", "uid-a", &c);
        gq_err err;
        bool added = false;
        assert_int_equal(charge(obj, q, &a, &added, &err), GQ_OK);
        assert_true(added);
        char keys[256];
        record_keys(obj, keys, sizeof keys);
        assert_string_equal(keys, cases[i].keys);
        gq_amounts u = in_use(obj);
        assert_int_equal(u.v[GQ_KEY_GPUS], cases[i].gpus);
        assert_int_equal(u.v[GQ_KEY_GPU_PODS], 1);
        gq_quota_free(q);
        json_object_put(obj);
    }
}

/* The planner's charge: a claim every quota of the pod charges already is
 * left out; one that a single quota does not charge stays in (never less
 * than the pod's due anywhere); no quota, nothing left out. */
static void test_plan_charge(void **state)
{
    (void)state;
    gq_shared_claim c = pair_claim();
    ctl_admitted a = pod_on("a", "uid-a", &c);
    json_object *held_obj = quota_obj(
        "{'key':'claim-pair','namespace':'a','pod':'pair','gpu-memory':'160Gi','gpus':'2',"
        "'gpu-pods':'0','expires':'" LATER "','claim':true}");
    json_object *lapsed_obj = quota_obj(
        "{'key':'claim-pair','namespace':'a','pod':'pair','gpu-memory':'160Gi','gpus':'2',"
        "'gpu-pods':'0','expires':'" EARLIER "','claim':true}");
    json_object *none_obj = quota_obj("");
    gq_quota *held = parse(held_obj), *lapsed = parse(lapsed_obj), *none = parse(none_obj);
    const gq_quota *both_held[2] = {held, held}, *one_not[2] = {held, none}, *old[1] = {lapsed};
    gq_amounts out;
    ctl_plan_charge(&a.charge, &c, 1, both_held, 2, NOW, &out);
    assert_int_equal(out.v[GQ_KEY_GPUS], 0);
    assert_int_equal(out.v[GQ_KEY_GPU_MEMORY], 0);
    assert_int_equal(out.v[GQ_KEY_GPU_PODS], 1);
    ctl_plan_charge(&a.charge, &c, 1, one_not, 2, NOW, &out);
    assert_int_equal(out.v[GQ_KEY_GPUS], 2);
    assert_int_equal(out.v[GQ_KEY_GPU_MEMORY], 160 * GI);
    ctl_plan_charge(&a.charge, &c, 1, old, 1, NOW, &out);
    assert_int_equal(out.v[GQ_KEY_GPUS], 2);
    ctl_plan_charge(&a.charge, &c, 1, NULL, 0, NOW, &out);
    assert_int_equal(out.v[GQ_KEY_GPUS], 2);
    gq_quota_free(held);
    gq_quota_free(lapsed);
    gq_quota_free(none);
    json_object_put(held_obj);
    json_object_put(lapsed_obj);
    json_object_put(none_obj);
}

/* A borrowing pod's claims are charged on borrowed capacity: the records
 * this pass added say so, whichever pod of the pass added them; a record
 * the quota held before the pass (the claim charged earlier, within the
 * share) is left as it was. ctl_quota_claim_borrowed reads the mark of a
 * live or counted record, never of a lapsed one. */
static void test_borrowing_pod_borrows_its_claims(void **state)
{
    (void)state;
    gq_shared_claim c = pair_claim();
    json_object *obj = quota_obj("");
    gq_quota *q = parse(obj);
    ctl_admitted a = pod_on("a", "uid-a", &c), b = pod_on("b", "uid-b", &c);
    b.borrowing = true;
    gq_err err;
    bool added = false;
    assert_int_equal(charge(obj, q, &a, &added, &err), GQ_OK);
    assert_int_equal(charge(obj, q, &b, &added, &err), GQ_OK);
    gq_quota *after = parse(obj);
    assert_true(ctl_quota_claim_borrowed(after, "claim-pair", NOW));
    assert_false(ctl_quota_claim_borrowed(after, "claim-pair", NOW + 121)); /* lapsed */
    assert_false(ctl_quota_claim_borrowed(after, "uid-b", NOW));            /* a pod's */
    gq_quota_free(after);
    gq_quota_free(q);
    json_object_put(obj);

    static const char counted[] =
        "{'key':'claim-pair','namespace':'a','pod':'pair','gpu-memory':'160Gi','gpus':'2',"
        "'gpu-pods':'0','expires':'1970-01-01T00:00:00Z','claim':true,'counted':true}";
    obj = quota_obj(counted);
    q = parse(obj);
    assert_int_equal(charge(obj, q, &b, &added, &err), GQ_OK);
    after = parse(obj);
    assert_false(ctl_quota_claim_borrowed(after, "claim-pair", NOW));
    gq_quota_free(after);
    gq_quota_free(q);
    json_object_put(obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_claim_charged_once),
        cmocka_unit_test(test_claim_charged_before),
        cmocka_unit_test(test_plan_charge),
        cmocka_unit_test(test_borrowing_pod_borrows_its_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
