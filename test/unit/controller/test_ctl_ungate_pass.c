/* The admission pass (controller/ungate.c) over the fake kube_api, with its
 * requests several at once: every admitted pod ungated once, only after
 * each quota it charges holds its reservation; the PATCHes in the
 * planner's order, a priority's only once every PATCH of a higher one has
 * been answered; a group whose member's ungate fails keeps its charges and
 * the member is ungated on a later pass; a gate that moved, a pod gone, a
 * charge refused (409, 500); one Event per waiting pod. JSON is written
 * with ' for ". */
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

#define Q_N1 "/apis/gpuquota.io/v1alpha1/namespaces/n1/gpuquotas/q"
#define Q_N2 "/apis/gpuquota.io/v1alpha1/namespaces/n2/gpuquotas/q"
#define Q_N3 "/apis/gpuquota.io/v1alpha1/namespaces/n3/gpuquotas/q"
#define T_ALL "/apis/gpuquota.io/v1alpha1/gputenantquotas/t"

/* A queued pod asking mem of gpuquota.io/gpu-memory, gated by
 * gpuquota.io/quota: namespace ns, uid "uid-NAME", spec.priority prio,
 * created `created` seconds after 14:00:00; in pod group `group` of size
 * `size` when group is not NULL. */
typedef struct qpod {
    const char *ns, *name;
    int prio, created;
    const char *group;
    int size;
    const char *mem; /* NULL: 1Gi */
} qpod;

#define POD(ns, name, prio, t)                                                                     \
    {                                                                                              \
        ns, name, prio, t, NULL, 0, NULL                                                           \
    }
#define MEMBER(ns, name, prio, t, g, size)                                                         \
    {                                                                                              \
        ns, name, prio, t, g, size, NULL                                                           \
    }

static void add_pod(json_object *pods, const qpod *p)
{
    char meta[512] = "", buf[2048];
    if (p->group)
        snprintf(meta, sizeof meta,
                 ",'labels':{'gpuquota.io/pod-group':'%s'},'annotations':{"
                 "'gpuquota.io/pod-group-size':'%d'}",
                 p->group, p->size);
    snprintf(buf, sizeof buf,
             "{'metadata':{'name':'%s','namespace':'%s','uid':'uid-%s','resourceVersion':'1',"
             "'creationTimestamp':'2026-11-21T14:%02d:%02dZ'%s},'spec':{'priority':%d,"
             "'schedulingGates':[{'name':'gpuquota.io/quota'}],'containers':[{'name':'c',"
             "'resources':{'limits':{'gpuquota.io/gpu-memory':'%s'}}}]}}",
             p->name, p->ns, p->name, p->created / 60, p->created % 60, meta, p->prio,
             p->mem ? p->mem : "1Gi");
    json_object_array_add(pods, J(buf));
}

static const char *const NSS[] = {"n1", "n2", "n3"};
static const char *const QUOTAS[] = {Q_N1, Q_N2, Q_N3};

/* A fake holding pods, a Queue GPUQuota q in each of the first n_ns
 * namespaces of NSS (hard: gpu-memory), labelled team=t, and a Queue
 * GPUTenantQuota t over them when tenant; the pod watch on; each PATCH
 * checked against every one of those quotas governing its pod. */
static void fake_with(fake *f, const qpod *pods, size_t n, size_t n_ns, const char *hard,
                      bool tenant)
{
    fake_setup(f, "[]", "[]",
               tenant ? "[{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota',"
                        "'metadata':{'name':'t','uid':'u-t','generation':1,'resourceVersion':"
                        "'1'},'spec':{'namespaceSelector':{'matchLabels':{'team':'t'}},"
                        "'hard':{'gpu-memory':'1000Gi'},'whenExceeded':'Queue'}}]"
                      : "[]",
               "[]");
    for (size_t i = 0; i < n_ns; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf,
                 "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
                 "'namespace':'%s','uid':'u-q-%s','generation':1,'resourceVersion':'1'},'spec':{"
                 "'hard':{'gpu-memory':'%s'},'whenExceeded':'Queue'}}",
                 NSS[i], NSS[i], hard);
        json_object_array_add(f->quotas, J(buf));
        snprintf(buf, sizeof buf,
                 "{'metadata':{'name':'%s','labels':{'team':'t'},'resourceVersion':'1'}}", NSS[i]);
        json_object_array_add(f->nss, J(buf));
        f->paid[f->n_paid++] = QUOTAS[i];
    }
    if (tenant)
        f->paid[f->n_paid++] = T_ALL;
    for (size_t i = 0; i < n; i++)
        add_pod(f->pods, &pods[i]);
    f->watch_pods = true;
}

/* pods[0..n) named PREFIX0, PREFIX1, ... (names holds the text), in n1. */
static void numbered(qpod *pods, char (*names)[8], int n, const char *prefix)
{
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%s%d", prefix, i);
        pods[i] = (qpod){"n1", names[i], 0, i, NULL, 0, NULL};
    }
}

/* A controller running over a fake. */
typedef struct running {
    ctl_controller *c;
    gq_config *cfg;
    kube_api api;
} running;

static void settle(void)
{
    fake_sleep_ms(300); /* more passes would ungate or charge again */
}

/* Start a controller over f, requests inflight at once; wait until it
 * ungated `admitted` pods (none: no wait), then a little more. */
static void start(fake *f, running *r, unsigned inflight, int admitted)
{
    f->ungate_inflight = inflight;
    run(f, &r->c, &r->cfg, &r->api);
    if (admitted < 0)
        return;
    char line[64];
    snprintf(line, sizeof line, "gpuquota_queue_admitted_total %d\n", admitted);
    wait_metric(r->c, line);
    settle();
}

static void finish(fake *f, running *r)
{
    stop(r->c, r->cfg);
    fake_dispose(f);
}

/* The log entries of f's PATCHes with answer code (0: any), pod names
 * joined by spaces into buf. */
static void patched(fake *f, int code, char *buf, size_t cap)
{
    buf[0] = '\0';
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; f->patch_log && i < json_object_array_length(f->patch_log); i++) {
        json_object *e = json_object_array_get_idx(f->patch_log, i);
        if (code && atoi(jstr(e, "code", NULL)) != code)
            continue;
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", l ? " " : "", jstr(e, "pod", NULL));
    }
    pthread_mutex_unlock(&f->mu);
}

/* How many PATCHes of pod name were answered code. */
static int patches_of(fake *f, const char *name, int code)
{
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; f->patch_log && i < json_object_array_length(f->patch_log); i++) {
        json_object *e = json_object_array_get_idx(f->patch_log, i);
        n += !strcmp(jstr(e, "pod", NULL), name) && atoi(jstr(e, "code", NULL)) == code;
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The numbers of the log: the latest end among PATCHes of pods whose name
 * starts with prefix, and the earliest start. */
static void span_of(fake *f, const char *prefix, long *first_start, long *last_end)
{
    *first_start = -1;
    *last_end = -1;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; f->patch_log && i < json_object_array_length(f->patch_log); i++) {
        json_object *e = json_object_array_get_idx(f->patch_log, i);
        if (strncmp(jstr(e, "pod", NULL), prefix, strlen(prefix)))
            continue;
        long s = atol(jstr(e, "start", NULL)), en = atol(jstr(e, "end", NULL));
        if (*first_start < 0 || s < *first_start)
            *first_start = s;
        if (en > *last_end)
            *last_end = en;
    }
    pthread_mutex_unlock(&f->mu);
}

static int queued_events(fake *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->queued_events;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The latest start among PATCHes of pods whose name starts with prefix. */
static long last_start(fake *f, const char *prefix)
{
    long last = -1;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; f->patch_log && i < json_object_array_length(f->patch_log); i++) {
        json_object *e = json_object_array_get_idx(f->patch_log, i);
        long s = atol(jstr(e, "start", NULL));
        if (!strncmp(jstr(e, "pod", NULL), prefix, strlen(prefix)) && s > last)
            last = s;
    }
    pthread_mutex_unlock(&f->mu);
    return last;
}

/* The quota at path was charged each uid of uids (space-separated) by
 * exactly one status write, and no other pod; no write held a key twice. */
static void assert_charged_once(fake *f, const char *path, const char *uids)
{
    pthread_mutex_lock(&f->mu);
    json_object *per = NULL;
    assert_int_equal(f->dup_keys, 0);
    assert_true(f->adds && json_object_object_get_ex(f->adds, path, &per));
    size_t want = 0;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", uids);
    for (char *save = NULL, *u = strtok_r(copy, " ", &save); u; u = strtok_r(NULL, " ", &save)) {
        json_object *n = NULL;
        int added = json_object_object_get_ex(per, u, &n) ? json_object_get_int(n) : 0;
        if (added != 1)
            fail_msg("%s was charged %s %d times", path, u, added);
        want++;
    }
    assert_int_equal(json_object_object_length(per), want);
    pthread_mutex_unlock(&f->mu);
}

/* The pass plans on the informer's cached quota, never a GET of its own:
 * a quota is read again only after a 409 (by the pass or the reconcile). */
static void assert_read_after_409_only(fake *f)
{
    pthread_mutex_lock(&f->mu);
    if (f->status_gets > f->refused_409)
        fail_msg("%d quota GETs for %d 409s", f->status_gets, f->refused_409);
    pthread_mutex_unlock(&f->mu);
}

/* One request at a time: the PATCHes go exactly in the planner's order —
 * priority first, a group at its first member's place (g-mem, priority 0,
 * goes with g-lead, priority 50), then age — each after the charges. */
static void test_ungates_in_plan_order(void **state)
{
    (void)state;
    static const qpod pods[] = {
        POD("n1", "a0", 0, 0),    POD("n1", "a1", 0, 1),    MEMBER("n1", "g-mem", 0, 2, "g", 2),
        POD("n1", "a2", 0, 3),    POD("n1", "a3", 0, 4),    POD("n1", "h0", 100, 10),
        POD("n1", "h1", 100, 11), POD("n1", "h2", 100, 12), MEMBER("n1", "g-lead", 50, 20, "g", 2),
    };
    fake f;
    running r;
    fake_with(&f, pods, sizeof pods / sizeof pods[0], 1, "100Gi", false);
    start(&f, &r, 1, 9);
    char order[1024];
    patched(&f, 0, order, sizeof order);
    assert_string_equal(order, "h0 h1 h2 g-lead g-mem a0 a1 a2 a3");
    assert_int_equal(f.unpaid, 0);
    assert_int_equal(f.max_in_flight[FAKE_PATCH], 1);
    assert_charged_once(&f, Q_N1,
                        "uid-a0 uid-a1 uid-g-mem uid-a2 uid-a3 uid-h0 uid-h1 uid-h2 uid-g-lead");
    assert_read_after_409_only(&f);
    finish(&f, &r);
}

/* Four requests at a time, every request slow, two namespaces under a
 * tenant quota (three quotas charged at once, the first charge
 * refused with 409): several PATCHes in flight, never more than four; the
 * priority-0 pods only once every priority-100 PATCH has been answered;
 * each pod ungated once, after all its charges. */
static void test_ungates_at_once(void **state)
{
    (void)state;
    enum { N = 24 };
    qpod pods[N];
    char names[N][8];
    numbered(pods, names, N, "l");
    for (int i = 0; i < N; i++) {
        pods[i].ns = NSS[i % 2];
        pods[i].created = N - i;
        if (i < 8) { /* the young ones first */
            names[i][0] = 'h';
            pods[i].prio = 100;
        }
    }
    fake f;
    running r;
    fake_with(&f, pods, N, 2, "100Gi", true);
    f.delay_ms = 25;
    f.charge_conflicts = 1;
    start(&f, &r, 4, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(patches_of(&f, names[i], 200), 1);
    assert_int_equal(f.patches, N);
    assert_int_equal(f.unpaid, 0);
    assert_int_equal(f.charge_conflicts, 0);
    assert_true(f.max_in_flight[FAKE_PATCH] >= 2);
    assert_true(f.max_in_flight[FAKE_PATCH] <= 4);
    assert_true(f.max_in_flight[FAKE_STATUS] >= 2); /* the charges written at once */
    long h_start, h_end, l_start, l_end;
    span_of(&f, "h", &h_start, &h_end);
    span_of(&f, "l", &l_start, &l_end);
    assert_true(l_start > h_end);
    char uids[2][512] = {"", ""}, all[1024];
    for (int i = 0; i < N; i++) {
        size_t l = strlen(uids[i % 2]);
        snprintf(uids[i % 2] + l, sizeof uids[0] - l, " uid-%s", names[i]);
    }
    assert_charged_once(&f, Q_N1, uids[0]);
    assert_charged_once(&f, Q_N2, uids[1]);
    snprintf(all, sizeof all, "%s%s", uids[0], uids[1]);
    assert_charged_once(&f, T_ALL, all);
    assert_read_after_409_only(&f);
    finish(&f, &r);
}

/* Pods of three namespaces, one older than the next in turn: with four
 * requests at a time the PATCHes go namespace by namespace in runs of
 * four, each run where its first pod stands (n1's, then n2's, then n3's),
 * not in the interleaved order of age. */
static void test_ungates_in_runs(void **state)
{
    (void)state;
    enum { N = 12 };
    qpod pods[N];
    char names[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "n%d-%d", i % 3 + 1, i / 3);
        pods[i] = (qpod){NSS[i % 3], names[i], 0, i, NULL, 0, NULL};
    }
    fake f;
    running r;
    fake_with(&f, pods, N, 3, "100Gi", false);
    f.delay_ms = 100;
    start(&f, &r, 4, N);
    long start2, end2, start3, end3;
    span_of(&f, "n2-", &start2, &end2);
    span_of(&f, "n3-", &start3, &end3);
    assert_true(last_start(&f, "n1-") < start2);
    assert_true(last_start(&f, "n2-") < start3);
    assert_int_equal(f.patches, N);
    assert_int_equal(f.unpaid, 0);
    finish(&f, &r);
}

/* A group of three whose member m1's PATCH fails three times (500): the
 * pass ungates the others and fails; the next one finds m1 charged and
 * ungates it, charging nobody twice. */
static void test_group_member_ungate_fails(void **state)
{
    (void)state;
    static const qpod pods[] = {
        MEMBER("n1", "m0", 0, 0, "g", 3),
        MEMBER("n1", "m1", 0, 1, "g", 3),
        MEMBER("n1", "m2", 0, 2, "g", 3),
        POD("n1", "s0", 0, 3),
        POD("n1", "s1", 0, 4),
    };
    fake f;
    running r;
    fake_with(&f, pods, 5, 1, "100Gi", false);
    f.delay_ms = 5;
    f.patch_faults = J("{'m1':[500,500,500]}");
    start(&f, &r, 4, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(patches_of(&f, pods[i].name, 200), 1);
    assert_int_equal(patches_of(&f, "m1", 500), 3);
    assert_int_equal(f.patches, 8);
    assert_int_equal(f.unpaid, 0);
    assert_charged_once(&f, Q_N1, "uid-m0 uid-m1 uid-m2 uid-s0 uid-s1");
    finish(&f, &r);
}

/* A pod whose gates moved before its PATCH (someone's gate put first: the
 * PATCH's test fails) is read and ungated at the gate's new place, the
 * other gate left; a pod deleted meanwhile (404) is done with; a 409 is
 * tried again after a read. */
static void test_gate_moved_pod_gone(void **state)
{
    (void)state;
    static const qpod pods[] = {POD("n1", "moved", 0, 0), POD("n1", "gone", 0, 1),
                                POD("n1", "busy", 0, 2), POD("n1", "plain", 0, 3)};
    fake f;
    running r;
    fake_with(&f, pods, 4, 1, "100Gi", false);
    f.gate_moves = J("{'moved':'example.com/other'}");
    f.patch_faults = J("{'gone':[404],'busy':[409]}");
    start(&f, &r, 4, 3);
    assert_int_equal(patches_of(&f, "moved", 422), 1);
    assert_int_equal(patches_of(&f, "moved", 200), 1);
    assert_int_equal(patches_of(&f, "gone", 404), 1);
    assert_int_equal(patches_of(&f, "busy", 409), 1);
    assert_int_equal(patches_of(&f, "busy", 200), 1);
    assert_int_equal(patches_of(&f, "plain", 200), 1);
    assert_int_equal(f.patches, 6);
    assert_int_equal(f.unpaid, 0);
    pthread_mutex_lock(&f.mu);
    json_object *moved = json_object_array_get_idx(f.pods, 0), *spec, *gates;
    assert_true(json_object_object_get_ex(moved, "spec", &spec));
    assert_true(json_object_object_get_ex(spec, "schedulingGates", &gates));
    assert_int_equal(json_object_array_length(gates), 1);
    assert_string_equal(jstr(json_object_array_get_idx(gates, 0), "name", NULL),
                        "example.com/other");
    pthread_mutex_unlock(&f.mu);
    finish(&f, &r);
}

/* A charge answered 500: no pod is ungated on that pass; the pass runs again
 * after backoff, charges and ungates each pod once. */
static void test_charge_refused(void **state)
{
    (void)state;
    qpod pods[3];
    char names[3][8];
    numbered(pods, names, 3, "p");
    fake f;
    running r;
    fake_with(&f, pods, 3, 1, "100Gi", false);
    f.charge_errors = 1;
    start(&f, &r, 4, 3);
    assert_int_equal(f.charge_errors, 0);
    assert_int_equal(f.patches, 3);
    assert_int_equal(f.unpaid, 0);
    assert_charged_once(&f, Q_N1, "uid-p0 uid-p1 uid-p2");
    assert_read_after_409_only(&f);
    finish(&f, &r);
}

/* A charge answered 409 whose quota cannot be read again (500): the pass
 * runs again after backoff, not at once on the stale cache, and charges
 * and ungates each pod once. */
static void test_conflict_reread_fails(void **state)
{
    (void)state;
    qpod pods[2];
    char names[2][8];
    numbered(pods, names, 2, "p");
    fake f;
    running r;
    fake_with(&f, pods, 2, 1, "100Gi", false);
    f.charge_conflicts = 1;
    f.get_errors = 1;
    start(&f, &r, 4, 2);
    assert_int_equal(f.charge_conflicts, 0);
    assert_int_equal(f.get_errors, 0);
    assert_int_equal(f.patches, 2);
    assert_int_equal(f.unpaid, 0);
    assert_charged_once(&f, Q_N1, "uid-p0 uid-p1");
    finish(&f, &r);
}

/* Six pods that do not fit, their Events posted several at once: one each,
 * and none again on later passes while the reason holds. */
static void test_events_once(void **state)
{
    (void)state;
    qpod pods[6];
    char names[6][8];
    numbered(pods, names, 6, "w");
    for (int i = 0; i < 6; i++)
        pods[i].mem = "2Gi";
    fake f;
    running r;
    fake_with(&f, pods, 6, 1, "1Gi", false);
    f.delay_ms = 5;
    start(&f, &r, 4, -1);
    for (int i = 0; i < 500 && queued_events(&f) < 6; i++)
        fake_sleep_ms(10);
    for (int i = 0; i < 3; i++) {
        ctl_ungate_kick(r.c);
        settle();
    }
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.queued_events, 6);
    assert_int_equal(f.patches, 0);
    json_object *ev = NULL;
    assert_true(json_object_object_get_ex(f.events_by_reason, "Queued", &ev));
    assert_string_equal(jstr(ev, "message", NULL),
                        "exceeded quota: q, requested: gpu-memory=2Gi, used: gpu-memory=0, "
                        "limited: gpu-memory=1Gi");
    pthread_mutex_unlock(&f.mu);
    finish(&f, &r);
}

/* The cache shows a quota with room that a webhook has just filled: 8Gi
 * of 10Gi reserved for another pod, in a write the cache has not seen. The
 * 4Gi pod planned on the cache is never charged nor ungated: its charge is
 * written against the cached resourceVersion and refused (409), the quota
 * is read again, and the pass planned again on what was read says it
 * does not fit, in the Event too. */
static void test_stale_cache_never_admits(void **state)
{
    (void)state;
    qpod pods[1] = {POD("n1", "w", 0, 0)};
    pods[0].mem = "4Gi";
    fake f;
    running r;
    fake_with(&f, pods, 1, 1, "10Gi", false);
    f.after_list_path = Q_N1;
    f.after_list = "{'reservations':[{'key':'uid-other','namespace':'n1','pod':'other',"
                   "'gpu-memory':'8Gi','gpus':'0','gpu-pods':'1','expires':"
                   "'2026-11-21T15:10:05Z'}]}";
    start(&f, &r, 4, -1);
    for (int i = 0; i < 500 && queued_events(&f) < 1; i++)
        fake_sleep_ms(10);
    for (int i = 0; i < 3; i++) {
        ctl_ungate_kick(r.c);
        settle();
    }
    pthread_mutex_lock(&f.mu);
    assert_int_equal(f.patches, 0);
    assert_true(f.refused_409 >= 1);
    json_object *per = NULL;
    assert_false(f.adds && json_object_object_get_ex(f.adds, Q_N1, &per) &&
                 json_object_object_get_ex(per, "uid-w", NULL));
    json_object *ev = NULL;
    assert_true(json_object_object_get_ex(f.events_by_reason, "Queued", &ev));
    assert_string_equal(jstr(ev, "message", NULL),
                        "exceeded quota: q, requested: gpu-memory=4Gi, used: gpu-memory=8Gi, "
                        "limited: gpu-memory=10Gi");
    assert_int_equal(f.queued_events, 1);
    pthread_mutex_unlock(&f.mu);
    assert_read_after_409_only(&f);
    finish(&f, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ungates_in_plan_order),
        cmocka_unit_test(test_ungates_at_once),
        cmocka_unit_test(test_ungates_in_runs),
        cmocka_unit_test(test_group_member_ungate_fails),
        cmocka_unit_test(test_gate_moved_pod_gone),
        cmocka_unit_test(test_charge_refused),
        cmocka_unit_test(test_events_once),
        cmocka_unit_test(test_stale_cache_never_admits),
        cmocka_unit_test(test_conflict_reread_fails),
    };
    if (http_metrics_new("test", &registry))
        return 1;
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    http_metrics_free(registry);
    return failed;
}
