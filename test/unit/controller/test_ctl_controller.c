/* The running controller over a fake kube_api (no sockets): initial sync,
 * status writes, the one re-read after a 409, Events, invalid specs, the
 * queue admitter's charge after a 409 and the metrics text. JSON is written with single quotes and
 * converted. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ctl_fake.h"

#include "controller/ctl.h"
#include "controller/ctl_run.h"

static void fake_init(fake *f)
{
    fake_setup(f,
               "[{'metadata':{'name':'p1','namespace':'a','resourceVersion':'1'},'spec':{"
               "'containers':[{'name':'c','resources':{'limits':{'gpuquota.io/gpu-memory':"
               "'8Gi'}}}]}},{'metadata':{'name':'p2','namespace':'a','resourceVersion':'1'},"
               "'spec':{'containers':[{'name':'c','resources':{'limits':{'gpuquota.io/"
               "gpu-memory':'4Gi'}}}]}},{'metadata':{'name':'bad','namespace':'a',"
               "'resourceVersion':'1'},'spec':{'containers':[{'name':'c','resources':{'limits':"
               "{'nvidia.com/gpu':'1.5'}}}]}}]",
               "[{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
               "'q','namespace':'a','uid':'u-q','generation':1,'resourceVersion':'1'},'spec':"
               "{'hard':{'gpu-memory':'10Gi'}}},{'apiVersion':'gpuquota.io/v1alpha1','kind':"
               "'GPUQuota','metadata':{'name':'broken','namespace':'a','resourceVersion':'1'},"
               "'spec':{'hard':{'gpu-memory':'-1'}}}]",
               "[{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{"
               "'name':'t','generation':1,'resourceVersion':'1'},'spec':{'namespaceSelector':"
               "{'matchLabels':{'team':'ml'}},'hard':{'gpu-pods':5}}}]",
               "[{'metadata':{'name':'a','labels':{'team':'ml'},'resourceVersion':'1'}}]");
}

static void test_sync_write_event(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    f.conflicts = 1; /* the first write meets a 409: re-read once, write again */
    run(&f, &c, &cfg, &api);
    wait_writes(&f, 3); /* q, t and broken (whose spec is invalid) */
    /* broken may be reconciled twice (events from both caches): at least once */
    wait_metric_min(c, "gpuquota_controller_reconciles_total{result=\"invalid\"}", 1);
    assert_true(ctl_controller_synced(c));
    assert_true(ctl_controller_is_leader(c));
    assert_int_equal(ctl_controller_tracked_pods(c), 2); /* "bad" cannot be priced */
    pthread_mutex_lock(&f.mu);
    assert_true(f.gets >= 1);
    json_object *q = find_quota(&f, "/x/gpuquotas/q"), *st;
    json_object_object_get_ex(q, "status", &st);
    assert_string_equal(jstr(st, "used", "gpu-memory"), "12Gi");
    assert_string_equal(jstr(st, "hard", "gpu-memory"), "10Gi");
    json_object *t = find_quota(&f, "/x/gputenantquotas/t"), *tst;
    json_object_object_get_ex(t, "status", &tst);
    assert_string_equal(jstr(tst, "used", "gpu-pods"), "2");
    /* Exceeded turned True: one Warning Event on the quota. */
    assert_int_equal(f.events, 2);
    json_object *ev = NULL;
    assert_true(json_object_object_get_ex(f.events_by_reason, "Exceeded", &ev));
    assert_string_equal(jstr(ev, "type", NULL), "Warning");
    assert_string_equal(jstr(ev, "involvedObject", "name"), "q");
    assert_string_equal(jstr(ev, "involvedObject", "uid"), "u-q");
    assert_string_equal(jstr(ev, "metadata", "namespace"), "a");
    assert_string_equal(jstr(ev, "message", NULL),
                        "used exceeds hard for gpu-memory (used 12Gi, hard 10Gi)");
    /* The invalid quota says so: its status and a Warning Event. (It used
     * to be left without status, reported only in the log.) */
    const char *why =
        "spec.hard.gpu-memory: invalid value \"-1\": must be greater than or equal to 0";
    assert_true(json_object_object_get_ex(f.events_by_reason, "InvalidSpec", &ev));
    assert_string_equal(jstr(ev, "type", NULL), "Warning");
    assert_string_equal(jstr(ev, "involvedObject", "name"), "broken");
    assert_string_equal(jstr(ev, "message", NULL), why);
    json_object *b = find_quota(&f, "/x/gpuquotas/broken"), *bst, *conds;
    json_object_object_get_ex(b, "status", &bst);
    assert_true(json_object_object_get_ex(bst, "conditions", &conds));
    json_object *ready = json_object_array_get_idx(conds, 0);
    assert_string_equal(jstr(ready, "type", NULL), "Ready");
    assert_string_equal(jstr(ready, "status", NULL), "False");
    assert_string_equal(jstr(ready, "reason", NULL), "InvalidSpec");
    assert_string_equal(jstr(ready, "message", NULL), why);
    pthread_mutex_unlock(&f.mu);

    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ctl_controller_metrics(c, &text, &len), GQ_OK);
    assert_non_null(strstr(text, "gpuquota_controller_reconciles_total{result=\"conflict\"} 1\n"));
    assert_non_null(strstr(text, "gpuquota_controller_status_writes_total 3\n"));
    assert_non_null(strstr(text, "gpuquota_controller_events_total 2\n"));
    assert_non_null(strstr(text, "gpuquota_controller_pod_cost_errors_total 1\n"));
    assert_non_null(strstr(text, "gpuquota_controller_tracked_pods 2\n"));
    assert_non_null(strstr(text, "gpuquota_controller_leader 1\n"));
    assert_non_null(
        strstr(text, "gpuquota_quota_used{namespace=\"a\",quota=\"q\",resource=\"gpu-memory\"} "
                     "12884901888\n"));
    assert_non_null(
        strstr(text, "gpuquota_quota_hard{namespace=\"\",quota=\"t\",resource=\"gpu-pods\"} 5\n"));
    assert_null(strstr(text, "quota=\"broken\""));
    free(text);
    ctl_controller_stop(c);
    ctl_controller_stop(c); /* idempotent */
    ctl_controller_free(c);
    gq_config_free(cfg);
    fake_dispose(&f);
}

/* The stored status of the quota at path, as text (caller frees). */
static char *stored_status(fake *f, const char *path)
{
    pthread_mutex_lock(&f->mu);
    json_object *st = NULL;
    json_object_object_get_ex(find_quota(f, path), "status", &st);
    char *text = strdup(st ? json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN) : "");
    pthread_mutex_unlock(&f->mu);
    return text;
}

/* Replace the stored status of the quota at path; writes counted from 0. */
static void set_status(fake *f, const char *path, const char *status)
{
    pthread_mutex_lock(&f->mu);
    json_object_object_add(find_quota(f, path), "status", json_tokener_parse(status));
    f->writes = 0;
    pthread_mutex_unlock(&f->mu);
}

/* Store, as the status of the quota at path, status text counted with
 * used.gpu-memory set to used and reservations set to the one record
 * reservation (JSON with ' for "): a pod's charge not folded yet. Writes
 * counted from 0. Returns the status stored, as text (caller frees). */
static char *set_unfolded(fake *f, const char *path, const char *counted, const char *used,
                          const char *reservation)
{
    json_object *st = json_tokener_parse(counted), *u, *res = json_object_new_array();
    assert_true(json_object_object_get_ex(st, "used", &u));
    json_object_object_add(u, "gpu-memory", json_object_new_string(used));
    json_object_array_add(res, J(reservation));
    json_object_object_add(st, "reservations", res);
    char *text = strdup(json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN));
    json_object_put(st);
    assert_non_null(text);
    set_status(f, path, text);
    return text;
}

/* A cohort: a/q borrows 2Gi above its hard (its cached status says so), b/l
 * lends them; each status and the tenant's say it, and so do the gauges.
 * Preemption counters are there, at 0, by reason and by quota. */
static void test_cohort_status_and_metrics(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    json_object_put(f.quotas);
    json_object_put(f.tenants);
    json_object_put(f.nss);
    f.quotas = J("[{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                 "'q','namespace':'a','generation':1,'resourceVersion':'1'},'spec':{'hard':{"
                 "'gpu-memory':'10Gi'},'borrowingLimit':{'gpu-memory':'10Gi'}},'status':{'used':"
                 "{'gpu-memory':'12Gi'}}},{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota',"
                 "'metadata':{'name':'l','namespace':'b','generation':1,'resourceVersion':'1'},"
                 "'spec':{'hard':{'gpu-memory':'16Gi'}}}]");
    f.tenants = J("[{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{"
                  "'name':'t','generation':1,'resourceVersion':'1'},'spec':{'namespaces':['a','b'],"
                  "'hard':{'gpu-memory':'32Gi'}}}]");
    f.nss = J("[{'metadata':{'name':'a','resourceVersion':'1'}},"
              "{'metadata':{'name':'b','resourceVersion':'1'}}]");
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api);
    wait_metric(c, "gpuquota_quota_lent{namespace=\"\",quota=\"t\",resource=\"gpu-memory\"} "
                   "2147483648\n");
    wait_metric(c, "gpuquota_quota_lent{namespace=\"b\",quota=\"l\",resource=\"gpu-memory\"} "
                   "2147483648\n");
    wait_metric(c, "gpuquota_quota_borrowed{namespace=\"a\",quota=\"q\",resource=\"gpu-memory\"} "
                   "2147483648\n");
    char *st = stored_status(&f, "/x/gpuquotas/l");
    assert_non_null(strstr(st, "\"lent\":{\"gpu-memory\":\"2Gi\"}"));
    assert_null(strstr(st, "borrowed")); /* it cannot borrow */
    free(st);
    st = stored_status(&f, "/x/gpuquotas/q");
    assert_non_null(
        strstr(st, "\"borrowed\":{\"gpu-memory\":\"2Gi\"},\"lent\":{\"gpu-memory\":\"0\"}"));
    free(st);
    st = stored_status(&f, "/x/gputenantquotas/t");
    assert_non_null(
        strstr(st, "\"borrowed\":{\"gpu-memory\":\"2Gi\"},\"lent\":{\"gpu-memory\":\"2Gi\"}"));
    free(st);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ctl_controller_metrics(c, &text, &len), GQ_OK);
    assert_non_null(strstr(text, "gpuquota_preemptions_total{reason=\"WithinQuota\"} 0\n"));
    assert_non_null(strstr(text, "gpuquota_preemptions_total{reason=\"Reclaim\"} 0\n"));
    assert_non_null(strstr(text, "gpuquota_preemption_victims_total{namespace=\"b\",quota=\"l\","
                                 "reason=\"Reclaim\"} 0\n"));
    assert_null(strstr(text, "gpuquota_quota_borrowed{namespace=\"b\"")); /* l cannot borrow */
    free(text);
    stop(c, cfg);
    fake_dispose(&f);
}

/* A status write that would only fold a reservation into used waits (up to
 * a second) to go with later changes; the reservation charges the pod
 * meanwhile. A write that lowers usage goes at once. */
/* However many Events are due at once, the controller posts at most 100
 * and then 10 a second; the rest are counted as dropped. */
static void test_events_rate_limited(void **state)
{
    (void)state;
    enum { N = 300 };
    fake f;
    fake_init(&f);
    gq_config *cfg;
    gq_err err;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    kube_api api = fake_api(&f);
    ctl_controller_opts o = {.api = &api,
                             .cfg = cfg,
                             .workers = 1,
                             .now = fixed_now,
                             .identity = "test",
                             .metrics = registry};
    ctl_controller *c;
    assert_int_equal(ctl_controller_new(&o, &c, &err), GQ_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) {
        json_object *obj = J("{'metadata':{'uid':'u-p'}}");
        ctl_post_event(c, obj, &(ctl_about){"v1", "Pod", "a", "p"}, "Queued", "why", NOW);
        json_object_put(obj);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ctl_controller_metrics(c, &text, &len), GQ_OK);
    const char *a = strstr(text, "\ngpuquota_controller_events_total "),
               *b = strstr(text, "\ngpuquota_controller_events_dropped_total ");
    assert_non_null(a);
    assert_non_null(b);
    unsigned long posted = strtoul(a + strlen("\ngpuquota_controller_events_total "), NULL, 10);
    unsigned long dropped =
        strtoul(b + strlen("\ngpuquota_controller_events_dropped_total "), NULL, 10);
    free(text);
    assert_int_equal(posted + dropped, N);
    assert_int_equal(f.events, (int)posted);
    if (posted < 100 || (double)posted > 100 + 10 * s + 1)
        fail_msg("%lu Events posted in %.3f s", posted, s);
    ctl_controller_free(c);
    gq_config_free(cfg);
    fake_dispose(&f);
}

#define P1                                                                                         \
    "{'metadata':{'name':'p1','namespace':'a','uid':'u1','resourceVersion':'1'},'spec':{"          \
    "'containers':[{'name':'c','resources':{'limits':{'gpuquota.io/gpu-memory':'8Gi'}}}]}}"
#define P2                                                                                         \
    "{'metadata':{'name':'p2','namespace':'a','uid':'u2','resourceVersion':'1'},'spec':{"          \
    "'containers':[{'name':'c','resources':{'limits':{'gpuquota.io/gpu-memory':'4Gi'}}}]}}"
#define P1_P2 "[" P1 "," P2 "]"
/* p2's reservation (4Gi), as a webhook leaves it. */
#define U2                                                                                         \
    "{'key':'u2','namespace':'a','pod':'p2','gpu-memory':'4Gi','gpus':'0','gpu-pods':'1',"         \
    "'expires':'2026-11-21T15:07:05Z'}"

/* Eight reservations of pods the controller has not seen, into res. */
static void add_unseen(json_object *res)
{
    for (int i = 0; i < 8; i++) {
        char r[256];
        snprintf(r, sizeof r,
                 "{'key':'ux%d','namespace':'a','pod':'x%d','gpu-memory':'1Gi','gpus':'0',"
                 "'gpu-pods':'1','expires':'2026-11-21T15:07:05Z'}",
                 i, i);
        json_object_array_add(res, J(r));
    }
}

/* run() over f, and see its first write put off as a fold. */
static void run_fold_put_off(fake *f, ctl_controller **c, gq_config **cfg, kube_api *api)
{
    run(f, c, cfg, api);
    wait_metric_min(*c, "gpuquota_controller_folds_deferred_total", 1);
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->writes, 0); /* put off */
    pthread_mutex_unlock(&f->mu);
}

/* f holds pods (JSON with ' for "), GPUQuota a/q (hard 100Gi, no status)
 * and no tenant. */
static void fold_fixture(fake *f, const char *pods)
{
    json_object_put(f->pods);
    json_object_put(f->quotas);
    json_object_put(f->tenants);
    f->pods = J(pods);
    f->quotas = J("[{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                  "'q','namespace':'a','uid':'u-q','generation':1,'resourceVersion':'1'},'spec':"
                  "{'hard':{'gpu-memory':'100Gi'}}}]");
    f->tenants = json_object_new_array();
}

static void test_fold_waits(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    fold_fixture(&f, P1_P2);
    const char *path = "/x/gpuquotas/q";
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api); /* both pods counted */
    wait_writes(&f, 1);
    stop(c, cfg);
    char *counted = stored_status(&f, path);
    assert_non_null(strstr(counted, "\"used\":{\"gpu-memory\":\"12Gi\"}"));

    /* p2's charge still a reservation, as the webhook left it. */
    char *buf = set_unfolded(&f, path, counted, "8Gi", U2);
    run_fold_put_off(&f, &c, &cfg, &api);
    wait_writes(&f, 1); /* then written */
    char *after = stored_status(&f, path);
    assert_string_equal(after, counted);
    free(after);
    stop(c, cfg);

    /* The same fold on a status holding many reservations (pods the
     * controller has not seen yet besides p2's): nobody else has charged
     * the quota while this replica watched, as while the queue drains into
     * it after the admission pass's charge, so the write waits as well. */
    json_object *st = json_tokener_parse(buf), *res;
    free(buf);
    assert_true(json_object_object_get_ex(st, "reservations", &res));
    add_unseen(res);
    char many[4096];
    snprintf(many, sizeof many, "%s", json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN));
    json_object_put(st);
    set_status(&f, path, many);
    run_fold_put_off(&f, &c, &cfg, &api);
    wait_writes(&f, 1);
    after = stored_status(&f, path);
    assert_non_null(strstr(after, "\"used\":{\"gpu-memory\":\"12Gi\"}"));
    assert_null(strstr(after, "\"key\":\"u2\""));
    free(after);
    stop(c, cfg);

    /* p2 gone while the status still counts it: written at once. */
    set_status(&f, path, counted);
    pthread_mutex_lock(&f.mu);
    json_object_array_del_idx(f.pods, 1, 1);
    pthread_mutex_unlock(&f.mu);
    run(&f, &c, &cfg, &api);
    wait_writes(&f, 1);
    after = stored_status(&f, path);
    assert_non_null(strstr(after, "\"used\":{\"gpu-memory\":\"8Gi\"}"));
    wait_metric(c, "gpuquota_controller_folds_deferred_total 0\n");
    free(after);
    stop(c, cfg);
    free(counted);
    fake_dispose(&f);
}

/* A status written by someone else, as a webhook's charge is: the stored
 * status of the quota at path replaced, its resourceVersion moved on. */
static void charge_status(fake *f, const char *path, const char *status)
{
    pthread_mutex_lock(&f->mu);
    json_object *q = find_quota(f, path), *meta;
    json_object_object_add(q, "status", json_tokener_parse(status));
    assert_true(json_object_object_get_ex(q, "metadata", &meta));
    char rv[32];
    snprintf(rv, sizeof rv, "%ld", strtol(jstr(q, "metadata", "resourceVersion"), NULL, 10) + 1);
    json_object_object_add(meta, "resourceVersion", json_object_new_string(rv));
    pthread_mutex_unlock(&f->mu);
}

/* While webhooks charge a quota whose status holds many reservations, a
 * fold does not wait: each of their writes would carry the folds put off
 * (controller.c, fold_wait_ms). The fold that test_fold_waits puts off on
 * a quiet quota is written at once after a charge the watch brings. */
static void test_fold_after_charge(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    fold_fixture(&f, "[" P2 "]");
    f.watch_quotas = true;
    const char *path = "/x/gpuquotas/q";
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api);
    wait_writes(&f, 1); /* p2 counted */
    char *counted = stored_status(&f, path);
    json_object *st = json_tokener_parse(counted), *used;
    assert_true(json_object_object_get_ex(st, "used", &used));
    json_object_object_add(used, "gpu-memory", json_object_new_string("0"));
    json_object *res = json_object_new_array();
    json_object_array_add(res, J(U2));
    add_unseen(res);
    json_object_object_add(st, "reservations", res);
    pthread_mutex_lock(&f.mu);
    f.writes = 0;
    pthread_mutex_unlock(&f.mu);
    charge_status(&f, path, json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN));
    json_object_put(st);
    wait_writes(&f, 1); /* the fold of u2, at once */
    char *after = stored_status(&f, path);
    assert_non_null(strstr(after, "\"used\":{\"gpu-memory\":\"4Gi\"}"));
    assert_null(strstr(after, "\"key\":\"u2\""));
    wait_metric(c, "gpuquota_controller_folds_deferred_total 0\n");
    free(after);
    free(counted);
    stop(c, cfg);
    fake_dispose(&f);
}

/* A pod deleted while its reservation's fold waits: the watch saw it go,
 * so its reservation is dropped at once and its room freed, not kept for
 * the grace that covers a pod not seen yet (well over the seconds this
 * test allows). */
static void test_gone_pod_reservation(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    fold_fixture(&f, P1_P2);
    f.watch_pods = true;
    f.reservation_grace_ms = 600000;
    const char *path = "/x/gpuquotas/q";
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api);
    wait_writes(&f, 1); /* both counted */
    stop(c, cfg);
    char *counted = stored_status(&f, path);
    free(set_unfolded(&f, path, counted, "8Gi", U2));
    run(&f, &c, &cfg, &api);
    wait_metric_min(c, "gpuquota_controller_folds_deferred_total", 1);
    fake_delete_pod(&f, "p2");
    wait_writes(&f, 1);
    char *after = stored_status(&f, path);
    assert_non_null(strstr(after, "\"used\":{\"gpu-memory\":\"8Gi\"}"));
    assert_null(strstr(after, "\"key\":\"u2\""));
    free(after);
    free(counted);
    stop(c, cfg);
    fake_dispose(&f);
}

static void test_bad_options(void **state)
{
    (void)state;
    ctl_controller *c = NULL;
    gq_err err;
    ctl_controller_opts o = {0};
    assert_int_equal(ctl_controller_new(&o, &c, &err), GQ_EINVAL);
    assert_int_equal(ctl_controller_new(NULL, &c, &err), GQ_EINVAL);
    assert_null(c);
    ctl_controller_free(NULL);
}

/* The pods: one, b/w (uid-w), queued behind gpuquota.io/quota, asking mem;
 * annotated as /mutate leaves every GPU pod (the ungate may add a mark). */
static json_object *queued_w(const char *mem)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "[{'metadata':{'name':'w','namespace':'b','uid':'uid-w','resourceVersion':'1',"
             "'creationTimestamp':'2026-11-21T15:00:00Z','annotations':{}},'spec':{'"
             "schedulingGates':[{'name':"
             "'gpuquota.io/quota'}],'containers':[{'name':'c','resources':{'limits':{"
             "'gpuquota.io/gpu-memory':'%s'}}}]}}]",
             mem);
    return J(buf);
}

/* f with pod w (4Gi) queued in namespace b under GPUQuota qb (10Gi, Queue). */
static void fake_queue_b(fake *f)
{
    fake_init(f);
    json_object_put(f->pods);
    f->pods = queued_w("4Gi");
    json_object_array_add(
        f->quotas, J("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{"
                     "'name':'qb','namespace':'b','uid':'u-qb','generation':1,'resourceVersion':"
                     "'1'},'spec':{'hard':{'gpu-memory':'10Gi'},'whenExceeded':'Queue'}}"));
    json_object_array_add(f->nss, J("{'metadata':{'name':'b','resourceVersion':'1'}}"));
}

/* Pod w was ungated and the quota at path holds its reservation. */
static void assert_charges_w(fake *f, const char *path)
{
    pthread_mutex_lock(&f->mu);
    assert_string_equal(f->last_patch_path, "/api/v1/namespaces/b/pods/w");
    json_object *q = find_quota(f, path), *st, *res;
    assert_true(json_object_object_get_ex(q, "status", &st));
    assert_true(json_object_object_get_ex(st, "reservations", &res));
    assert_non_null(strstr(json_object_to_json_string(res), "uid-w"));
    pthread_mutex_unlock(&f->mu);
}

/* Add GPUTenantQuotas to what f lists (each the text after "metadata":{
 * ... up to the object's last brace), and namespaces b and i. */
static void add_tenants(fake *f, const char *const *tenants, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{"
                 "'generation':1,'resourceVersion':'1',%s}}",
                 tenants[i]);
        json_object_array_add(f->tenants, J(buf));
    }
    json_object_array_add(f->nss, J("{'metadata':{'name':'b','resourceVersion':'1'}}"));
    json_object_array_add(f->nss, J("{'metadata':{'name':'i','resourceVersion':'1'}}"));
}

/* A controller run on f until it admitted one queued pod, charged in the
 * quota at path (assert_charges_w), then stopped. */
static void admit_once(fake *f, const char *path)
{
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(f, &c, &cfg, &api);
    wait_metric(c, "gpuquota_queue_admitted_total 1\n");
    assert_charges_w(f, path);
    stop(c, cfg);
}

/* The queue admitter (controller/ungate.c) when its charge meets a 409: the
 * pass ends without ungating, runs again on fresh reads, writes the charge
 * once and ungates the pod once. */
static void test_queue_admit_after_conflict(void **state)
{
    (void)state;
    fake f;
    fake_queue_b(&f);
    f.charge_conflicts = 1; /* the admitter's first charge meets a 409 */
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api);
    wait_metric(c, "gpuquota_queue_admitted_total 1\n");
    struct timespec settle = {0, 300000000}; /* more passes would ungate it again */
    nanosleep(&settle, NULL);
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.charge_conflicts, 0);
    assert_int_equal(f.patches, 1);
    assert_string_equal(f.last_patch_path, "/api/v1/namespaces/b/pods/w");
    json_object *q = find_quota(&f, "/x/gpuquotas/qb"), *st, *res;
    assert_true(json_object_object_get_ex(q, "status", &st));
    assert_true(json_object_object_get_ex(st, "reservations", &res));
    int held = 0;
    for (size_t i = 0; i < json_object_array_length(res); i++)
        held += strstr(json_object_to_json_string(json_object_array_get_idx(res, i)), "uid-w") != 0;
    assert_int_equal(held, 1); /* charged once, though the first write was refused */
    pthread_mutex_unlock(&f.mu);
    wait_metric(c, "gpuquota_queue_admitted_total 1\n");
    ctl_controller_stop(c);
    ctl_controller_free(c);
    gq_config_free(cfg);
    fake_dispose(&f);
}

/* A pod that ends in a quota whose pods wait: the reconcile that frees its
 * room hands the status it wants to the admission pass, which writes it
 * with the next pod's charge; one status write from the end to the ungate,
 * not the reconcile's and then the pass's. qb (4Gi, Queue) is full of
 * running pod r (4Gi), counted in used or, when unfolded, still charged by
 * its reservation (its fold put off, as while a queue drains: the pod ends
 * before it is written, and its reservation is dropped with the status
 * handed over); w (4Gi) waits. */
static void end_to_ungate(bool unfolded)
{
    fake f;
    fake_queue_b(&f);
    const char *path = "/x/gpuquotas/qb";
    json_object *q = find_quota(&f, path), *spec, *hard;
    assert_true(json_object_object_get_ex(q, "spec", &spec));
    assert_true(json_object_object_get_ex(spec, "hard", &hard));
    json_object_object_add(hard, "gpu-memory", json_object_new_string("4Gi"));
    json_object_array_add(
        f.pods, J("{'metadata':{'name':'r','namespace':'b','uid':'uid-r','resourceVersion':'1',"
                  "'creationTimestamp':'2026-11-21T14:00:00Z','annotations':{}},'spec':{"
                  "'nodeName':'n1','containers':[{'name':'c','resources':{'limits':{"
                  "'gpuquota.io/gpu-memory':'4Gi'}}}]}}"));
    f.watch_pods = true;
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api);
    wait_writes(&f, 1); /* r counted, w queued */
    struct timespec settle = {0, 300000000};
    nanosleep(&settle, NULL);
    char *full = stored_status(&f, path);
    assert_non_null(strstr(full, "\"used\":{\"gpu-memory\":\"4Gi\"}"));
    if (unfolded) {
        stop(c, cfg);
        free(set_unfolded(&f, path, full, "0",
                          "{'key':'uid-r','namespace':'b','pod':'r','gpu-memory':'4Gi','gpus':'0',"
                          "'gpu-pods':'1','expires':'2026-11-21T15:07:05Z'}"));
        run_fold_put_off(&f, &c, &cfg, &api);
    }
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.patches, 0);
    f.writes = 0;
    pthread_mutex_unlock(&f.mu);

    fake_delete_pod(&f, "r");
    wait_metric(c, "gpuquota_queue_admitted_total 1\n");
    nanosleep(&settle, NULL); /* past HANDOFF_MS: a write put off would be made by now */
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.writes, 1);
    assert_string_equal(f.last_patch_path, "/api/v1/namespaces/b/pods/w");
    pthread_mutex_unlock(&f.mu);
    char *after = stored_status(&f, path);
    assert_non_null(strstr(after, "\"used\":{\"gpu-memory\":\"0\"}"));
    assert_non_null(strstr(after, "\"key\":\"uid-w\""));
    assert_null(strstr(after, "uid-r"));
    wait_metric(c, "gpuquota_controller_status_handoffs_total 1\n");
    wait_metric(c, unfolded ? "gpuquota_controller_reservations_abandoned_total 1\n"
                            : "gpuquota_controller_reservations_abandoned_total 0\n");
    free(after);
    free(full);
    stop(c, cfg);
    fake_dispose(&f);
}

static void test_end_to_ungate_one_write(void **state)
{
    (void)state;
    end_to_ungate(false);
}

static void test_end_unfolded_to_ungate_one_write(void **state)
{
    (void)state;
    end_to_ungate(true);
}

/* A GPUQuota the controller's cache does not hold yet (created just before
 * its pods, its watch event still on its way) governs the queued pods of
 * its namespace all the same: the pass lists that namespace's quotas live
 * and charges the pod in it. */
static void test_queue_quota_not_cached_yet(void **state)
{
    (void)state;
    fake f;
    fake_queue_b(&f);
    f.quotas_live_only = true;
    admit_once(&f, "/x/gpuquotas/qb");
    fake_dispose(&f);
}

/* A pod planned as borrowing keeps its mark when its charge and its ungate
 * fall in two passes: qb (2Gi, borrowingLimit 8Gi) borrows for a 4Gi pod
 * from qi, both of tenant tb; the first pass charges qb, meets a 409 on tb
 * and ends; the next finds the pod paid in qb (no need there, so its
 * planner sees no borrowing) and still ungates it marked
 * gpuquota.io/borrowing, as qb's reservation says (borrowing: true); so
 * does a new leader after a failover between the two writes. */
static void test_queue_borrowing_kept_across_passes(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    json_object_put(f.pods);
    f.pods = queued_w("4Gi");
    static const char *const quotas[] = {
        "'name':'qb','namespace':'b'},'spec':{'hard':{'gpu-memory':'2Gi'},'whenExceeded':"
        "'Queue','borrowingLimit':{'gpu-memory':'8Gi'}}",
        "'name':'qi','namespace':'i'},'spec':{'hard':{'gpu-memory':'8Gi'}},'status':{'hard':{"
        "'gpu-memory':'8Gi'},'used':{'gpu-memory':'0'}}",
    };
    for (size_t i = 0; i < 2; i++) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{"
                 "'generation':1,'resourceVersion':'1',%s}",
                 quotas[i]);
        json_object_array_add(f.quotas, J(buf));
    }
    static const char *const tb[] = {"'name':'tb'},'spec':{'namespaces':['b','i'],'hard':{"
                                     "'gpu-memory':'10Gi'},'whenExceeded':'Queue'"};
    add_tenants(&f, tb, 1);
    f.refuse_charge_once = "/gputenantquotas/tb";
    admit_once(&f, "/x/gpuquotas/qb");
    pthread_mutex_lock(&f.mu);
    assert_null(f.refuse_charge_once); /* the 409 came */
    assert_non_null(strstr(json_object_to_json_string(f.last_patch), "gpuquota.io~1borrowing"));
    /* The reservation says so too: what a next leader goes by. */
    assert_non_null(strstr(
        json_object_to_json_string_ext(find_quota(&f, "/x/gpuquotas/qb"), JSON_C_TO_STRING_PLAIN),
        "\"borrowing\":true"));
    pthread_mutex_unlock(&f.mu);

    /* A failover between the two writes: the old leader charged qb and died;
     * a new one (nothing in memory) finds w paid there, charges the tenant
     * and ungates it, marked from qb's reservation. */
    set_status(&f, "/x/gputenantquotas/tb", "{}");
    pthread_mutex_lock(&f.mu);
    json_object_put(f.pods); /* the fake applied the ungate: w waits again, as before it */
    f.pods = queued_w("4Gi");
    json_object_put(f.last_patch);
    f.last_patch = NULL;
    f.patches = 0;
    pthread_mutex_unlock(&f.mu);
    admit_once(&f, "/x/gputenantquotas/tb");
    pthread_mutex_lock(&f.mu);
    assert_non_null(strstr(json_object_to_json_string(f.last_patch), "gpuquota.io~1borrowing"));
    pthread_mutex_unlock(&f.mu);
    fake_dispose(&f);
}

/* A queued pod that fits its tenant's hard but whose cohort lends that room
 * to a borrower waits, and its Queued Event says so (it used to say
 * "requested: , used: , limited: " with nothing in them). */
static void test_queue_waits_for_lent_room(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    json_object_put(f.pods);
    f.pods = J("[{'metadata':{'name':'r','namespace':'b','uid':'uid-r','resourceVersion':'1'},"
               "'spec':{'containers':[{'name':'c','resources':{'limits':{'gpuquota.io/"
               "gpu-memory':'8Gi'}}}]},'status':{'phase':'Running'}},{'metadata':{'name':'w',"
               "'namespace':'i','uid':'uid-w','resourceVersion':'1','creationTimestamp':"
               "'2026-11-21T15:00:00Z'},'spec':{'schedulingGates':[{'name':'gpuquota.io/quota'}],"
               "'containers':[{'name':'c','resources':{'limits':{'gpuquota.io/gpu-memory':"
               "'4Gi'}}}]}}]");
    const char *tenants[] = {
        "'name':'busy'},'spec':{'namespaces':['b'],'hard':{'gpu-memory':'4Gi'},'cohort':'pool',"
        "'borrowingLimit':{'gpu-memory':'4Gi'}},'status':{'used':{'gpu-memory':'8Gi'}",
        "'name':'idle'},'spec':{'namespaces':['i'],'hard':{'gpu-memory':'4Gi'},'whenExceeded':"
        "'Queue','cohort':'pool'",
    };
    add_tenants(&f, tenants, sizeof(tenants) / sizeof(tenants[0]));
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
    run(&f, &c, &cfg, &api);
    json_object *ev = NULL;
    for (int i = 0; i < 500 && !ev; i++) {
        pthread_mutex_lock(&f.mu);
        json_object *e = NULL;
        if (json_object_object_get_ex(f.events_by_reason, "Queued", &e))
            json_object_deep_copy(e, &ev, NULL);
        pthread_mutex_unlock(&f.mu);
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    assert_non_null(ev);
    assert_string_equal(jstr(ev, "involvedObject", "name"), "w");
    assert_string_equal(jstr(ev, "message", NULL),
                        "tenant quota idle has room within its hard, but its cohort pool lends it "
                        "to members that borrow it now; it waits until their pods end "
                        "(reclaimWithinCohort: Never)");
    json_object_put(ev);
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.patches, 0); /* still gated */
    pthread_mutex_unlock(&f.mu);
    stop(c, cfg);
    fake_dispose(&f);
}

/* A cohort of tenants in the admission pass (controller/cohort.c): tenant
 * busy (hard 4Gi, borrowingLimit 4Gi) admits a 6Gi queued pod on what
 * tenant idle of its cohort leaves unused, whatever tenants of no cohort
 * the cache holds beside them (each is passed over, not the end of the
 * walk). */
static void test_queue_cohort_of_tenants(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    json_object_put(f.pods);
    f.pods = queued_w("6Gi");
    const char *tenants[] = {
        "'name':'plain-1'},'spec':{'namespaces':['p1'],'hard':{'gpu-memory':'1Gi'}",
        "'name':'busy'},'spec':{'namespaces':['b'],'hard':{'gpu-memory':'4Gi'},'whenExceeded':"
        "'Queue','cohort':'pool','borrowingLimit':{'gpu-memory':'4Gi'}",
        "'name':'plain-2'},'spec':{'namespaces':['p2'],'hard':{'gpu-memory':'1Gi'}",
        "'name':'idle'},'spec':{'namespaces':['i'],'hard':{'gpu-memory':'8Gi'},'cohort':'pool'",
        "'name':'plain-3'},'spec':{'namespaces':['p3'],'hard':{'gpu-memory':'1Gi'}",
    };
    add_tenants(&f, tenants, sizeof(tenants) / sizeof(tenants[0]));
    admit_once(&f, "/x/gputenantquotas/busy");
    fake_dispose(&f);
}

/* A pod of namespace b naming ResourceClaim x (one H100, uid-x) as
 * gpuquota records it: running (r), or queued behind gpuquota.io/quota. */
static void add_claim_pod(json_object *pods, const char *name, bool queued)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{'metadata':{'name':'%s','namespace':'b','uid':'uid-%s','resourceVersion':'1',"
             "'creationTimestamp':'2026-11-21T15:00:00Z','labels':{'gpuquota.io/managed':"
             "'true'},'annotations':{'gpuquota.io/admission':'{\\'charge\\':{\\'gpu-memory\\':"
             "\\'80Gi\\',\\'gpu-pods\\':\\'1\\',\\'gpus\\':\\'1\\'},\\'model\\':"
             "\\'h100-80gb\\',\\'scope\\':\\'NotTerminating\\'}','gpuquota.io/"
             "gpu-claims':'{\\'gpu\\':{\\'gpus\\':1,"
             "\\'memory\\':\\'80Gi\\',\\'model\\':\\'h100-80gb\\',\\'claim\\':"
             "\\'x\\',\\'uid\\':\\'uid-x\\'}}'}},'spec':{%s'resourceClaims':[{'name':"
             "'gpu','resourceClaimName':'x'}],'containers':[{'name':'c'}]}%s}",
             name, name, queued ? "'schedulingGates':[{'name':'gpuquota.io/quota'}]," : "",
             queued ? "" : ",'status':{'phase':'Running'}");
    json_object_array_add(pods, J(buf));
}

/* The escape through a shared claim: the pod first charged for claim x was
 * admitted on borrowed capacity and is gone; r, unmarked, still names x,
 * and qb's record of x says its charge is borrowed. The recount keeps that
 * on the counted record, and a queued pod naming x is ungated marked
 * gpuquota.io/borrowing, though it adds nothing to the claim's charge. */
static void test_queue_marks_pod_riding_borrowed_claim(void **state)
{
    (void)state;
    fake f;
    fake_init(&f);
    json_object_put(f.pods);
    f.pods = json_object_new_array();
    add_claim_pod(f.pods, "r", false);
    add_claim_pod(f.pods, "w", true);
    json_object_array_add(
        f.quotas,
        J("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'qb',"
          "'namespace':'b','uid':'u-qb','generation':1,'resourceVersion':'1'},'spec':{'hard':{"
          "'gpu-memory':'200Gi'},'whenExceeded':'Queue'},'status':{'used':{'gpu-memory':'80Gi'},"
          "'reservations':[{'key':'uid-x','namespace':'b','pod':'x','gpu-memory':'80Gi','gpus':"
          "'1','gpu-pods':'0','expires':'1970-01-01T00:00:00Z','model':'h100-80gb','claim':true,"
          "'counted':true,'borrowing':true}]}}"));
    json_object_array_add(f.nss, J("{'metadata':{'name':'b','resourceVersion':'1'}}"));
    admit_once(&f, "/x/gpuquotas/qb");
    pthread_mutex_lock(&f.mu);
    assert_non_null(strstr(json_object_to_json_string(f.last_patch), "gpuquota.io~1borrowing"));
    const char *qb =
        json_object_to_json_string_ext(find_quota(&f, "/x/gpuquotas/qb"), JSON_C_TO_STRING_PLAIN);
    assert_non_null(strstr(qb, "\"claim\":true,\"counted\":true,\"borrowing\":true"));
    pthread_mutex_unlock(&f.mu);
    fake_dispose(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_cohort_of_tenants),
        cmocka_unit_test(test_sync_write_event),
        cmocka_unit_test(test_events_rate_limited),
        cmocka_unit_test(test_fold_waits),
        cmocka_unit_test(test_fold_after_charge),
        cmocka_unit_test(test_gone_pod_reservation),
        cmocka_unit_test(test_queue_admit_after_conflict),
        cmocka_unit_test(test_end_to_ungate_one_write),
        cmocka_unit_test(test_end_unfolded_to_ungate_one_write),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_cohort_status_and_metrics),
        cmocka_unit_test(test_queue_quota_not_cached_yet),
        cmocka_unit_test(test_queue_borrowing_kept_across_passes),
        cmocka_unit_test(test_queue_waits_for_lent_room),
        cmocka_unit_test(test_queue_marks_pod_riding_borrowed_claim),
    };
    if (http_metrics_new("test", &registry))
        return 1;
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    http_metrics_free(registry);
    return failed;
}
