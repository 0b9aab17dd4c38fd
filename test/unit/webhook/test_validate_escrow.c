/* The escrow of /validate (docs/validating-webhook.md, "Escrow"): a hold
 * taken in a charge's own write, pods admitted on it with no write, written
 * when it is given back; several replicas over one store never admit past
 * hard, a denial waits for other replicas' holds and for records the
 * controller has not settled, and a hold whose holder is gone does not
 * hold denials up for long. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "validate_fixture.h"

#define REPLICAS 3

/* Replicas over one store, told of wants as the informer caches tell them:
 * after every status write that holds a want. */
typedef struct cluster {
    fx *f;
    wh_store inner; /* the faultstore's table */
    wh_validator *r[REPLICAS];
    unsigned n;
    pthread_mutex_t mu;
} cluster;

static cluster the_cluster;

static bool holds_want(json_object *obj)
{
    json_object *st, *arr;
    if (!json_object_object_get_ex(obj, "status", &st) ||
        !json_object_object_get_ex(st, "reservations", &arr))
        return false;
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *e;
        if (json_object_object_get_ex(json_object_array_get_idx(arr, i), "escrow", &e) &&
            !strcmp(json_object_get_string(e), "want"))
            return true;
    }
    return false;
}

static gq_code informed_update(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                               json_object *obj, json_object **out, gq_err *err)
{
    cluster *c = ctx;
    gq_code rc = c->inner.update_status(c->inner.ctx, kind, ns, name, obj, out, err);
    if (!rc && ns && holds_want(obj)) {
        pthread_mutex_lock(&c->mu);
        for (unsigned i = 0; i < c->n; i++)
            wh_validator_escrow_wanted(c->r[i], ns, name);
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

static gq_code pass_list(void *ctx, wh_list_kind kind, const char *ns, json_object **out,
                         gq_err *err)
{
    cluster *c = ctx;
    return c->inner.list(c->inner.ctx, kind, ns, out, err);
}

static gq_code pass_labels(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    cluster *c = ctx;
    return c->inner.namespace_labels(c->inner.ctx, ns, out, err);
}

static gq_code pass_get(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                        json_object **out, gq_err *err)
{
    cluster *c = ctx;
    return c->inner.get_quota(c->inner.ctx, kind, ns, name, out, err);
}

static wh_validator *replica(cluster *c, unsigned pods)
{
    wh_store st = {.ctx = c,
                   .list = pass_list,
                   .namespace_labels = pass_labels,
                   .get_quota = pass_get,
                   .update_status = informed_update};
    wh_validate_opts o = {.now = fixed_now, .escrow_pods = pods};
    wh_validator *v = NULL;
    assert_int_equal(wh_validator_new(c->f->cfg, &st, &o, &v, NULL), GQ_OK);
    pthread_mutex_lock(&c->mu);
    c->r[c->n++] = v;
    pthread_mutex_unlock(&c->mu);
    return v;
}

static int cl_setup(void **state)
{
    setup(state);
    fx *f = *state;
    memset(&the_cluster, 0, sizeof(the_cluster));
    the_cluster.f = f;
    the_cluster.inner = f->store;
    pthread_mutex_init(&the_cluster.mu, NULL);
    return 0;
}

static int cl_teardown(void **state)
{
    for (unsigned i = 0; i < the_cluster.n; i++)
        wh_validator_free(the_cluster.r[i]);
    the_cluster.n = 0;
    pthread_mutex_destroy(&the_cluster.mu);
    return teardown(state);
}

/* Decide a 1Gi pod (or mem) on validator v. */
static wh_validate_result decide_on(fx *f, wh_validator *v, const char *uid, const char *mem)
{
    fx on = *f; /* threads decide on several replicas at once */
    on.v = v;
    return decide(&on, uid, NS_A, mem);
}

/* decide_on, timed: the seconds it took. */
static double timed_decide(fx *f, wh_validator *v, const char *uid, const char *mem,
                           wh_validate_result *r)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *r = decide_on(f, v, uid, mem);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static uint64_t writes(fx *f)
{
    faultstore_stats s;
    faultstore_get_stats(f->fs, &s);
    return s.updates;
}

/* The escrow records of the stored quota: holds, wants, admitted pods and
 * the rest (pods' own reservations). */
typedef struct tally {
    size_t hold, want, admitted, plain;
} tally;

static tally count_records(fx *f)
{
    tally t = {0};
    size_t n = n_reservations(f, "GPUQuota", NS_A, "q");
    for (size_t i = 0; i < n; i++) {
        json_object *r = reservation(f, NS_A, "q", i), *e;
        const char *kind =
            json_object_object_get_ex(r, "escrow", &e) ? json_object_get_string(e) : "";
        if (!strcmp(kind, "hold"))
            t.hold++;
        else if (!strcmp(kind, "want"))
            t.want++;
        else if (!strcmp(kind, "admitted"))
            t.admitted++;
        else
            t.plain++;
        json_object_put(r);
    }
    return t;
}

/* Quota q of NS_A, hard gpu-memory HARD, whose status says used USED and
 * holds one escrow record of KIND (hold, want, admitted) keyed KEY. */
static void quota_holding(fx *f, const char *hard, const char *used, const char *key,
                          const char *mem, const char *kind)
{
    char h[64], st[1024];
    snprintf(h, sizeof(h), "{\"gpu-memory\":\"%s\"}", hard);
    snprintf(st, sizeof(st),
             "#,\"status\":{\"used\":{\"gpu-memory\":\"%s\"},\"reservations\":[{\"key\":"
             "\"%s\",\"namespace\":\"team-a\",\"pod\":\"x\",\"gpu-memory\":\"%s\",\"gpus\":"
             "\"0\",\"gpu-pods\":\"0\",\"expires\":\"2027-01-15T08:02:00Z\",\"escrow\":\"%s\"}]}",
             used, key, mem, kind);
    quota(f, NS_A, "q", h, st);
}

/* The first charge writes the pod and a hold of 8 pods; the next 8 are
 * admitted with no write; the tenth writes them (admitted), itself and a
 * new hold in one update. */
static void admits_on_the_hold_without_writes(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\",\"gpu-pods\":100}", NULL);
    wh_validator *v = replica(&the_cluster, 8);
    assert_true(decide_on(f, v, "p-0", "1Gi").allowed);
    assert_int_equal(writes(f), 1);
    tally t = count_records(f);
    assert_int_equal(t.hold, 1);
    assert_int_equal(t.plain, 1);
    json_object *h = reservation(f, NS_A, "q", 1);
    assert_string_equal(sget(h, "gpu-memory"), "8Gi");
    assert_string_equal(sget(h, "gpu-pods"), "8");
    assert_string_equal(sget(h, "expires"), "2027-01-15T08:02:00Z"); /* NOW + the TTL */
    assert_int_equal(strncmp(sget(h, "key"), "escrow-", 7), 0);
    json_object_put(h);
    char uid[16];
    for (int i = 1; i <= 8; i++) {
        snprintf(uid, sizeof(uid), "p-%d", i);
        wh_validate_result r = decide_on(f, v, uid, "1Gi");
        assert_true(r.allowed);
        assert_int_equal(r.n_charged, 1);
        assert_string_equal(r.reservation_key, uid);
    }
    assert_int_equal(writes(f), 1);
    assert_true(decide_on(f, v, "p-9", "1Gi").allowed);
    assert_int_equal(writes(f), 2);
    t = count_records(f);
    assert_int_equal(t.admitted, 8);
    assert_int_equal(t.plain, 2);
    assert_int_equal(t.hold, 1);
    wh_validate_stats s;
    wh_validate_get_stats(v, &s);
    assert_int_equal(s.escrow_admitted, 8);
    assert_int_equal(s.escrow_holds, 2);
}

/* A hold is at most a quarter of the room left, in whole pods, and leaves
 * half of hard free: none below two pods, none once the quota is half used. */
static void hold_is_a_quarter_of_the_first_half(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"16Gi\"}", NULL);
    wh_validator *v = replica(&the_cluster, 64);
    assert_true(decide_on(f, v, "p-0", "1Gi").allowed); /* 15Gi left: a hold of 3 */
    json_object *h = reservation(f, NS_A, "q", 1);
    assert_string_equal(sget(h, "gpu-memory"), "3Gi");
    json_object_put(h);
    char uid[16];
    for (int i = 1; i <= 3; i++) {
        snprintf(uid, sizeof(uid), "p-%d", i);
        assert_true(decide_on(f, v, uid, "1Gi").allowed);
    }
    assert_int_equal(writes(f), 1);
    /* 5Gi used after p-4: 11 left, 3 of them beyond half of hard: 2 pods. */
    assert_true(decide_on(f, v, "p-4", "1Gi").allowed);
    assert_int_equal(writes(f), 2);
    h = reservation(f, NS_A, "q", 5);
    assert_string_equal(sget(h, "escrow"), "hold");
    assert_string_equal(sget(h, "gpu-memory"), "2Gi");
    json_object_put(h);
    for (int i = 5; i <= 15; i++) { /* half used from p-7 on: no hold */
        snprintf(uid, sizeof(uid), "p-%d", i);
        assert_true(decide_on(f, v, uid, "1Gi").allowed);
    }
    assert_int_equal(count_records(f).hold, 0);
    assert_int_equal(writes(f), 2 + 9);
    wh_validate_result r = decide_on(f, v, "p-16", "1Gi");
    assert_false(r.allowed);
    assert_string_equal(r.message, "exceeded quota: q, requested: gpu-memory=1Gi, used: "
                                   "gpu-memory=16Gi, limited: gpu-memory=16Gi");
}

/* A pod larger than what is left of the hold goes through a round, which
 * gives the hold's room back first: it fits, though the hold alone did not
 * leave room for it. */
static void round_reuses_what_the_hold_left(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"20Gi\"}", NULL);
    wh_validator *v = replica(&the_cluster, 64);
    assert_true(decide_on(f, v, "p-0", "2Gi").allowed); /* 18Gi left: a hold of 2 pods (4Gi) */
    assert_true(decide_on(f, v, "p-1", "2Gi").allowed); /* on the hold */
    assert_int_equal(writes(f), 1);
    wh_validate_result r = decide_on(f, v, "p-2", "16Gi"); /* 2 + 2 + 16 = 20, not 2 + 4 + 16 */
    assert_true(r.allowed);
    assert_false(decide_on(f, v, "p-3", "1Gi").allowed);
}

/* A pod whose second quota denies gives its charge on the hold back in
 * memory: nothing of it is ever written. */
static void rollback_on_the_hold(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
             "\"metadata\":{\"name\":\"t\"},\"spec\":{\"namespaces\":[\"team-a\"],"
             "\"hard\":{\"gpu-memory\":\"2Gi\"}}}");
    wh_validator *v = replica(&the_cluster, 8);
    assert_true(decide_on(f, v, "p-0", "1Gi").allowed);
    assert_true(decide_on(f, v, "p-1", "1Gi").allowed); /* on the hold, then the tenant */
    uint64_t w = writes(f);
    wh_validate_result r = decide_on(f, v, "p-2", "1Gi");
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "quota: t, requested"));
    wh_validator_free(v); /* gives the hold back: writes p-1 as admitted, not p-2 */
    the_cluster.n = 0;
    assert_true(writes(f) > w);
    tally t = count_records(f);
    assert_int_equal(t.hold, 0);
    assert_int_equal(t.admitted, 1);
    json_object *p1 = reservation(f, NS_A, "q", 1);
    assert_string_equal(sget(p1, "key"), "p-1");
    assert_string_equal(sget(p1, "escrow"), "admitted");
    json_object_put(p1);
}

/* A change of the quota's spec (a new generation) ends admissions on the
 * hold: the next pod is decided on the new spec. */
static void new_generation_ends_the_hold(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    wh_validator *v = replica(&the_cluster, 8);
    assert_true(decide_on(f, v, "p-0", "1Gi").allowed);
    assert_true(decide_on(f, v, "p-1", "1Gi").allowed);
    json_object *o = NULL, *st;
    assert_int_equal(wh_memstore_get(f->ms, "GPUQuota", NS_A, "q", &o, NULL), GQ_OK);
    assert_true(json_object_object_get_ex(o, "status", &st));
    char buf[8192];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
             "\"name\":\"q\",\"namespace\":\"team-a\",\"generation\":2},\"spec\":{\"hard\":{"
             "\"gpu-memory\":\"2Gi\"}},\"status\":%s}",
             json_object_to_json_string(st));
    json_object_put(o);
    apply(f, buf);
    /* 2 pods in use (one written, one on the hold, whose hold counts 8Gi):
     * nothing fits under 2Gi. */
    wh_validate_result r = decide_on(f, v, "p-2", "1Gi");
    assert_false(r.allowed);
}

/* A quota deleted and made anew under the same name (another uid, its
 * generation 1 again) holds no hold of ours: its pods go through rounds. */
static void quota_made_anew_has_no_hold(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"64Gi\"}", NULL);
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
             "\"name\":\"q\",\"namespace\":\"team-a\",\"uid\":\"u-1\",\"generation\":1},"
             "\"spec\":{\"hard\":{\"gpu-memory\":\"64Gi\"}}}");
    wh_validator *v = replica(&the_cluster, 8);
    assert_true(decide_on(f, v, "p-0", "1Gi").allowed);
    assert_int_equal(count_records(f).hold, 1);
    apply(f, "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
             "\"name\":\"q\",\"namespace\":\"team-a\",\"uid\":\"u-2\",\"generation\":1},"
             "\"spec\":{\"hard\":{\"gpu-memory\":\"2Gi\"}}}");
    assert_true(decide_on(f, v, "p-1", "1Gi").allowed);
    assert_true(decide_on(f, v, "p-2", "1Gi").allowed);
    assert_false(decide_on(f, v, "p-3", "1Gi").allowed);
}

/* ---- replicas --------------------------------------------------------------- */

/* 200 reviews over three replicas with escrow, conflicts injected: exactly
 * hard is admitted (no more: the holds count; no less: denials wait for the
 * holds to come back), and once every hold is given back the status holds
 * one record per admitted pod. */
static void run_replicas(fx *f, unsigned conflict_every)
{
    quota(f, NS_A, "q", "{\"gpu-memory\":\"40Gi\",\"gpu-pods\":100}", NULL);
    wh_validator *v[REPLICAS];
    for (int i = 0; i < REPLICAS; i++)
        v[i] = replica(&the_cluster, 16);
    faultstore_faults fl = {.conflict_every = conflict_every, .latency_us = 200};
    int allowed = decide_concurrently(f, v, REPLICAS, 200, "1Gi", &fl);
    assert_int_equal(allowed, 40);
    for (unsigned i = 0; i < the_cluster.n; i++)
        wh_validator_free(the_cluster.r[i]);
    the_cluster.n = 0;
    tally t = count_records(f);
    assert_int_equal(t.hold, 0);
    assert_int_equal(t.plain + t.admitted, 40);
}

static void replicas_admit_exactly_hard(void **state)
{
    run_replicas(*state, 0);
}

static void replicas_admit_exactly_hard_with_conflicts(void **state)
{
    run_replicas(*state, 3);
}

/* Room another replica holds and does not use: a pod that needs it waits
 * while the holder is asked for it (a want), and is admitted once the
 * holder gave it back. */
static void want_brings_the_room_back(void **state)
{
    fx *f = *state;
    quota(f, NS_A, "q", "{\"gpu-memory\":\"10Gi\"}", NULL);
    wh_validator *a = replica(&the_cluster, 64), *b = replica(&the_cluster, 64);
    assert_true(decide_on(f, a, "p-0", "1Gi").allowed); /* a holds 2 of the 9 left */
    assert_int_equal(count_records(f).hold, 1);
    assert_true(decide_on(f, b, "p-1", "4Gi").allowed);   /* 1 + 2 (a's) + 4 = 7 */
    wh_validate_result r = decide_on(f, b, "p-2", "4Gi"); /* 11 with a's hold, 9 without */
    assert_true(r.allowed);                               /* a gave its 2 back */
    tally t = count_records(f);
    assert_int_equal(t.hold, 0);
    assert_int_equal(t.want, 1);
    wh_validate_stats s;
    wh_validate_get_stats(b, &s);
    assert_true(s.escrow_deferred >= 1);
}

/* A hold whose holder is gone (its process died; its hold stays until it
 * expires): a denial waits no longer than the deferral's 3 s for it (here
 * the clock stands still, so its holder never counts as gone), and the room
 * it holds is not given to anybody. */
static void dead_holder_delays_denial_briefly(void **state)
{
    fx *f = *state;
    quota_holding(f, "4Gi", "0", "escrow-dead", "2Gi", "hold");
    wh_validator *v = replica(&the_cluster, 8);
    assert_true(decide_on(f, v, "p-0", "2Gi").allowed);
    wh_validate_result r;
    double s = timed_decide(f, v, "p-1", "1Gi", &r);
    assert_false(r.allowed);
    assert_true(s >= 2.9 && s < 5.0);
    assert_int_equal(count_records(f).want, 1);
}

/* Pods admitted on a hold and written after the controller last counted
 * may be counted twice (the controller may have counted the pod): a
 * denial waits for the controller to settle them, then is decided again. */
static void denial_waits_for_admitted_records(void **state)
{
    fx *f = *state;
    quota_holding(f, "2Gi", "1Gi", "p-x", "1Gi", "admitted");
    wh_validator *v = replica(&the_cluster, 8);
    /* The controller counted p-x in used already; it settles the record. */
    pthread_t th;
    fx_worker w = {*f, 7, "1Gi", false};
    w.on.v = v;
    assert_int_equal(pthread_create(&th, NULL, fx_work, &w), 0);
    usleep(200 * 1000);
    quota(f, NS_A, "q", "{\"gpu-memory\":\"2Gi\"}",
          "#,\"status\":{\"used\":{\"gpu-memory\":\"1Gi\"}}");
    pthread_join(th, NULL);
    assert_true(w.allowed); /* 1 + 1 once settled; 1 + 1 + 1 before */
    wh_validate_stats s;
    wh_validate_get_stats(v, &s);
    assert_true(s.escrow_deferred >= 1);
}

/* A denial that settling could not turn (the pod does not fit even if
 * every unsettled record were charged twice) is not put off, as long as
 * the usage it names is not above hard (which only records charged twice
 * can make it). */
static void certain_denial_is_not_put_off(void **state)
{
    fx *f = *state;
    quota_holding(f, "4Gi", "3Gi", "p-x", "1Gi", "admitted");
    wh_validator *v = replica(&the_cluster, 8);
    wh_validate_result r;
    assert_true(timed_decide(f, v, "p-0", "2Gi", &r) < 1.0); /* 4 - 1 + 2 > 4 */
    assert_false(r.allowed);
    assert_non_null(strstr(r.message, "used: gpu-memory=4Gi, limited: gpu-memory=4Gi"));
    wh_validate_stats s;
    wh_validate_get_stats(v, &s);
    assert_int_equal(s.escrow_deferred, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(admits_on_the_hold_without_writes, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(hold_is_a_quarter_of_the_first_half, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(round_reuses_what_the_hold_left, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(rollback_on_the_hold, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(new_generation_ends_the_hold, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(quota_made_anew_has_no_hold, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(replicas_admit_exactly_hard, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(replicas_admit_exactly_hard_with_conflicts, cl_setup,
                                        cl_teardown),
        cmocka_unit_test_setup_teardown(want_brings_the_room_back, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(dead_holder_delays_denial_briefly, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(denial_waits_for_admitted_records, cl_setup, cl_teardown),
        cmocka_unit_test_setup_teardown(certain_denial_is_not_put_off, cl_setup, cl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
