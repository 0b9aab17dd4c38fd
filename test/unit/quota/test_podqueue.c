/* Queueing core (quota/podqueue.h): the gate, pod groups, the order of a
 * queue and which queued pods can be admitted now. Table-driven where the
 * cases are alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/queue_fixtures.h"

#include "common/json_member.h"
#include "quota/jsonpatch.h"
#include "quota/podqueue.h"

static gq_quota *Q(const char *s)
{
    return queue_quota_parse(s);
}

static gq_amounts mem(int64_t gi)
{
    return queue_mem(gi);
}

static void test_spec_fields(void **state)
{
    (void)state;
    gq_quota *q = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                    "'q','namespace':'a'},'spec':{'hard':{'gpu-memory':'8Gi'},'whenExceeded':"
                    "'Queue','queueingStrategy':'StrictFIFO','preemption':{'withinQuota':"
                    "'LowerOrNewerEqualPriority'}}}");
    assert_int_equal(q->when_exceeded, GQ_WHEN_QUEUE);
    assert_int_equal(q->strategy, GQ_QUEUE_STRICT);
    assert_int_equal(q->within_quota, GQ_PREEMPT_LOWER_OR_NEWER);
    gq_quota_free(q);
    q = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
          "'namespace':'a'},'spec':{'hard':{'gpu-memory':'8Gi'}}}");
    assert_int_equal(q->when_exceeded, GQ_WHEN_DENY);
    assert_int_equal(q->strategy, GQ_QUEUE_BEST_EFFORT);
    assert_int_equal(q->within_quota, GQ_PREEMPT_NEVER);
    gq_quota_free(q);
    static const char *const bad[] = {
        "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
        "'namespace':'a'},'spec':{'whenExceeded':'queue'}}",
        "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
        "'namespace':'a'},'spec':{'whenExceeded':1}}",
        "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
        "'namespace':'a'},'spec':{'queueingStrategy':'LIFO'}}",
        "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
        "'namespace':'a'},'spec':{'preemption':{'withinQuota':'Always'}}}",
        "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q',"
        "'namespace':'a'},'spec':{'preemption':'LowerPriority'}}",
    };
    static const char *const why[] = {"spec.whenExceeded: unsupported value \"queue\"",
                                      "spec.whenExceeded: must be a string",
                                      "spec.queueingStrategy: unsupported value \"LIFO\"",
                                      "spec.preemption.withinQuota: unsupported value \"Always\"",
                                      "spec.preemption: must be an object"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_object *o = J(bad[i]);
        gq_err err;
        gq_err_clear(&err);
        q = NULL;
        assert_int_equal(gq_quota_parse(o, &q, &err), GQ_EINVAL);
        assert_non_null(strstr(err.msg, why[i]));
        json_object_put(o);
    }
}

static void test_gate_index(void **state)
{
    (void)state;
    static const struct {
        const char *pod;
        int idx;
        size_t count;
    } cases[] = {
        {"{'spec':{}}", -1, 0},
        {"{'spec':{'schedulingGates':[{'name':'gpuquota.io/quota'}]}}", 0, 1},
        {"{'spec':{'schedulingGates':[{'name':'kueue.x-k8s.io/admission'},{'name':'gpuquota.io/"
         "quota'}]}}",
         1, 2},
        {"{'spec':{'schedulingGates':[{'name':'gpuquota.io/quota-x'}]}}", -1, 1},
        {"{'spec':{'schedulingGates':{'name':'gpuquota.io/quota'}}}", -1, 0},
        {"{'spec':{'schedulingGates':[7,{'name':7}]}}", -1, 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *o = J(cases[i].pod);
        assert_int_equal(gq_pod_gate_index(o), cases[i].idx);
        assert_int_equal(gq_pod_gate_count(o), cases[i].count);
        json_object_put(o);
    }
}

static void test_group_parse(void **state)
{
    (void)state;
    static const struct {
        const char *meta;
        gq_code rc;
        const char *name; /* or the message */
        int64_t size;
    } cases[] = {
        {"{}", GQ_OK, "", 0},
        {"{'labels':{'gpuquota.io/pod-group':'train'},'annotations':{'gpuquota.io/"
         "pod-group-size':'4'}}",
         GQ_OK, "train", 4},
        {"{'labels':{'gpuquota.io/pod-group':'train'}}", GQ_EINVAL,
         "pod group train: annotation gpuquota.io/pod-group-size is required", 0},
        {"{'annotations':{'gpuquota.io/pod-group-size':'4'}}", GQ_EINVAL,
         "annotation gpuquota.io/pod-group-size needs label gpuquota.io/pod-group", 0},
        {"{'labels':{'gpuquota.io/pod-group':'t'},'annotations':{'gpuquota.io/pod-group-size':"
         "'0'}}",
         GQ_EINVAL, "must be a whole number from 1 to 4096", 0},
        {"{'labels':{'gpuquota.io/pod-group':'t'},'annotations':{'gpuquota.io/pod-group-size':"
         "'4097'}}",
         GQ_EINVAL, "must be a whole number from 1 to 4096", 0},
        {"{'labels':{'gpuquota.io/pod-group':'t'},'annotations':{'gpuquota.io/pod-group-size':"
         "'99999999999999999999'}}",
         GQ_EINVAL, "must be a whole number from 1 to 4096", 0},
        {"{'labels':{'gpuquota.io/pod-group':'t'},'annotations':{'gpuquota.io/pod-group-size':"
         "'-1'}}",
         GQ_EINVAL, "must be a whole number", 0},
        {"{'labels':{'gpuquota.io/pod-group':'t'},'annotations':{'gpuquota.io/pod-group-size':"
         "'4 '}}",
         GQ_EINVAL, "must be a whole number", 0},
        {"{'labels':{'gpuquota.io/pod-group':''},'annotations':{'gpuquota.io/pod-group-size':"
         "'4'}}",
         GQ_EINVAL, "must name the group", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "{'metadata':%s}", cases[i].meta);
        json_object *o = J(buf);
        gq_pod_group g;
        gq_err err;
        gq_err_clear(&err);
        memset(&g, 0x5a, sizeof(g));
        gq_code rc = gq_pod_group_parse(o, &g, &err);
        assert_int_equal(rc, cases[i].rc);
        if (rc == GQ_OK) {
            assert_int_equal(g.present, cases[i].size > 0);
            assert_string_equal(g.name, cases[i].name);
            assert_int_equal(g.size, cases[i].size);
        } else if (!strstr(err.msg, cases[i].name)) {
            fail_msg("case %zu: [%s] lacks [%s]", i, err.msg, cases[i].name);
        }
        json_object_put(o);
    }
}

static void test_ever_fits(void **state)
{
    (void)state;
    gq_quota *q = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                    "'team','namespace':'a'},'spec':{'hard':{'gpu-memory':'32Gi'}}}");
    gq_amounts c = mem(8);
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, NULL, 4, "train", &err), GQ_OK);
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, NULL, 5, "train", &err), GQ_EDENIED);
    assert_string_equal(err.msg, "pod group train of 5 pods asks for gpu-memory=40Gi, more than "
                                 "quota team allows at all (gpu-memory=32Gi): it would wait "
                                 "forever");
    c = mem(40);
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, NULL, 1, NULL, &err), GQ_EDENIED);
    assert_string_equal(err.msg, "pod asks for gpu-memory=40Gi, more than quota team allows at "
                                 "all (gpu-memory=32Gi): it would wait forever");
    c.v[GQ_KEY_GPU_MEMORY] = INT64_MAX / 2;
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, NULL, 4096, "huge", &err), GQ_EDENIED);
    gq_quota_free(q);
}

/* Members that name one shared ResourceClaim pay it once between them: a
 * group of 4 asking 4Gi each of their own plus a shared 16Gi claim needs
 * 32Gi, not 4 x 20Gi. */
static void test_ever_fits_shared_claim(void **state)
{
    (void)state;
    gq_quota *q = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                    "'team','namespace':'a'},'spec':{'hard':{'gpu-memory':'32Gi'}}}");
    gq_amounts c = mem(20), own = mem(4);
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, &own, 4, "train", &err), GQ_OK);
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, &own, 5, "train", &err), GQ_EDENIED);
    assert_string_equal(err.msg, "pod group train of 5 pods asks for gpu-memory=36Gi, more than "
                                 "quota team allows at all (gpu-memory=32Gi): it would wait "
                                 "forever");
    /* Without the shared part every member pays the whole charge. */
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, NULL, 2, "train", &err), GQ_EDENIED);
    own.v[GQ_KEY_GPU_MEMORY] = INT64_MAX / 2;
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, &own, 4096, "huge", &err), GQ_EDENIED);
    gq_quota_free(q);
}

/* A planner scenario: quotas (hard gpu-memory in Gi, strict?) with in_use,
 * entries (priority, created, Gi, group, size, running, quotas), expected
 * states. */
typedef struct pe {
    const char *uid;
    int32_t prio;
    int64_t created;
    int64_t gi;
    const char *group;
    int64_t size, running;
    size_t q[2];
    size_t nq;
    bool paid0;
    gq_queue_state want;
} pe;

static gq_quota *hardq(const char *name, int64_t gi, bool strict)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'%s',"
             "'namespace':'a'},'spec':{'hard':{'gpu-memory':'%lldGi'},'whenExceeded':'Queue',"
             "'queueingStrategy':'%s'}}",
             name, (long long)gi, strict ? "StrictFIFO" : "BestEffortFIFO");
    return Q(buf);
}

static void run_plan(gq_quota **qv, const int64_t *in_use_gi, size_t nq, const pe *es, size_t n,
                     gq_queue_decision *out, gq_queue_quota *pq)
{
    gq_queue_entry e[16];
    bool paid[16][2];
    assert_true(n <= 16);
    for (size_t j = 0; j < nq; j++) {
        memset(&pq[j], 0, sizeof(pq[j]));
        pq[j].q = qv[j];
        pq[j].in_use = mem(0);
        pq[j].in_use.v[GQ_KEY_GPU_MEMORY] = in_use_gi[j] * GI;
    }
    for (size_t i = 0; i < n; i++) {
        memset(&e[i], 0, sizeof(e[i]));
        e[i].uid = es[i].uid;
        e[i].priority = es[i].prio;
        e[i].created_us = es[i].created;
        e[i].charge = mem(es[i].gi);
        e[i].group = es[i].group;
        e[i].group_size = es[i].size;
        e[i].group_running = es[i].running;
        e[i].quotas = es[i].q;
        e[i].n_quotas = es[i].nq;
        paid[i][0] = es[i].paid0;
        paid[i][1] = false;
        e[i].paid = paid[i];
    }
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_plan(e, n, pq, nq, out, &err), GQ_OK);
    for (size_t i = 0; i < n; i++)
        if (out[i].state != es[i].want)
            fail_msg("%s: state %d, want %d", es[i].uid, out[i].state, es[i].want);
}

static void test_plan_order(void **state)
{
    (void)state;
    gq_quota *q = hardq("team", 8, false);
    gq_queue_decision out[4];
    gq_queue_quota pq[1];
    int64_t used[] = {0};
    /* Room for one: the high-priority pod wins over an older low one; among
     * equals the older wins; among equal times the smaller uid. */
    pe a[] = {
        {"low-old", 10, 100, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"high", 1000, 200, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
        {"low-new", 10, 300, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
    };
    run_plan(&q, used, 1, a, 3, out, pq);
    assert_int_equal(out[1].position, 1);
    assert_int_equal(out[0].position, 2);
    assert_int_equal(out[2].position, 3);
    assert_int_equal(pq[0].in_use.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_int_equal(out[0].need.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    pe b[] = {
        {"b", 10, 100, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"a", 10, 100, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
    };
    run_plan(&q, used, 1, b, 2, out, pq);
    gq_queue_entry x = {.uid = "x", .priority = 5, .created_us = 1};
    gq_queue_entry y = {.uid = "y", .priority = 5, .created_us = 2};
    assert_true(gq_queue_entry_cmp(&x, &y) < 0);
    assert_true(gq_queue_entry_cmp(&y, &x) > 0);
    assert_int_equal(gq_queue_entry_cmp(&x, &x), 0);
    gq_quota_free(q);
}

static void test_plan_strategies(void **state)
{
    (void)state;
    gq_queue_decision out[4];
    gq_queue_quota pq[1];
    int64_t used[] = {4};
    pe es[] = {
        {"big", 0, 100, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"small", 0, 200, 4, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
    };
    gq_quota *best = hardq("team", 10, false);
    run_plan(&best, used, 1, es, 2, out, pq);
    gq_quota *strict = hardq("team", 10, true);
    es[1].want = GQ_QSTATE_BEHIND_HEAD;
    run_plan(&strict, used, 1, es, 2, out, pq);
    assert_int_equal(out[1].ahead, 1);
    assert_int_equal(pq[0].in_use.v[GQ_KEY_GPU_MEMORY], 4 * GI); /* nothing admitted */
    /* A pod that paid before a failover is admitted whatever blocks. */
    es[1].paid0 = true;
    es[1].want = GQ_QSTATE_ADMIT;
    run_plan(&strict, used, 1, es, 2, out, pq);
    assert_int_equal(pq[0].in_use.v[GQ_KEY_GPU_MEMORY], 4 * GI); /* paid: counted already */
    gq_quota_free(best);
    gq_quota_free(strict);
}

/* A held preemptor that does not fit keeps its room: the smaller pod
 * behind it, which would fit under BestEffortFIFO, waits; and it is
 * decided first, even before a pod that comes earlier in the queue's
 * order. */
static void test_plan_held(void **state)
{
    (void)state;
    gq_quota *q = hardq("team", 10, false);
    static const size_t q0[] = {0};
    gq_queue_entry e[2] = {
        {.uid = "preemptor",
         .priority = 1000,
         .created_us = 200,
         .charge = mem(8),
         .quotas = q0,
         .n_quotas = 1},
        {.uid = "small",
         .priority = 0,
         .created_us = 100,
         .charge = mem(4),
         .quotas = q0,
         .n_quotas = 1},
    };
    for (int held = 0; held < 2; held++) {
        gq_queue_quota pq = {.q = q, .in_use = mem(4)};
        gq_queue_decision out[2];
        gq_err err;
        e[0].held = held;
        assert_int_equal(gq_queue_plan(e, 2, &pq, 1, out, &err), GQ_OK);
        assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
        assert_int_equal(out[1].state, held ? GQ_QSTATE_NO_ROOM : GQ_QSTATE_ADMIT);
        assert_int_equal(pq.in_use.v[GQ_KEY_GPU_MEMORY], (held ? 12 : 8) * GI);
    }
    /* The room pods already leaving will free is the preemptor's as they go:
     * its hold takes that first and holds only the rest (here nothing), or
     * a pod leaving for as long as its grace period lasts would count
     * twice: in use, and held. */
    gq_queue_quota pq = {.q = q, .in_use = mem(8), .leaving = mem(8)};
    gq_queue_decision out[2];
    gq_err err;
    q->hard.v[GQ_KEY_GPU_MEMORY] = 12 * GI;
    e[0].held = true;
    assert_int_equal(gq_queue_plan(e, 2, &pq, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(pq.in_use.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    assert_int_equal(pq.leaving.v[GQ_KEY_GPU_MEMORY], 0);
    /* Room free now that the preemptor needs beyond the leaving pods is
     * held: 4Gi leaving, 4Gi free. */
    pq = (gq_queue_quota){.q = q, .in_use = mem(8), .leaving = mem(4)};
    assert_int_equal(gq_queue_plan(e, 2, &pq, 1, out, &err), GQ_OK);
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(pq.in_use.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    /* Room for 8Gi: an older pod of higher priority would take it, but the
     * held preemptor decides first. */
    gq_queue_entry f[2] = {e[0], e[1]};
    f[1].priority = 5000;
    f[1].charge = mem(8);
    f[0].held = true;
    gq_queue_quota room = {.q = q, .in_use = mem(2)};
    gq_queue_decision fo[2];
    gq_err ferr;
    assert_int_equal(gq_queue_plan(f, 2, &room, 1, fo, &ferr), GQ_OK);
    assert_int_equal(fo[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(fo[1].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(fo[0].position, 1);
    gq_quota_free(q);
}

/* Borrowing: a quota with a borrowingLimit goes above hard on what its
 * cohort has free, up to the limit; a lender admitting within its share
 * lends less; without a limit, or beyond it, the pod waits. */
static void test_plan_borrowing(void **state)
{
    (void)state;
    gq_quota *a = hardq("borrower", 16, false), *b = hardq("lender", 16, false);
    a->borrowing_limit.set[GQ_KEY_GPU_MEMORY] = true;
    a->borrowing_limit.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    static const size_t qa[] = {0}, qb[] = {1};
    gq_queue_entry e[4] = {
        {.uid = "a1", .created_us = 1, .charge = mem(8), .quotas = qa, .n_quotas = 1},
        {.uid = "a2", .created_us = 3, .charge = mem(8), .quotas = qa, .n_quotas = 1},
        {.uid = "b1", .created_us = 2, .charge = mem(4), .quotas = qb, .n_quotas = 1},
        {.uid = "a3", .created_us = 4, .charge = mem(8), .quotas = qa, .n_quotas = 1},
    };
    /* b lends its 16Gi unused: the cohort has 16Gi free. */
    gq_queue_cohort co = {.free = mem(16)};
    gq_queue_quota pq[2] = {{.q = a, .in_use = mem(16), .cohort = &co},
                            {.q = b, .in_use = mem(0), .cohort = &co}};
    gq_queue_decision out[4];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 4, pq, 2, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_true(out[0].borrowing);
    /* b1 within its share lends 4Gi less: 16 - 8 - 4 = 4Gi left, not 8. */
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[2].state, GQ_QSTATE_ADMIT);
    assert_false(out[2].borrowing);
    assert_int_equal(out[3].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(co.free.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    /* Up to the limit, not beyond: with 40Gi free, 16Gi is all a borrows. */
    gq_queue_cohort big = {.free = mem(40)};
    gq_queue_quota pa = {.q = a, .in_use = mem(16), .cohort = &big};
    gq_queue_entry ea[3] = {e[0], e[1], e[3]};
    assert_int_equal(gq_queue_plan(ea, 3, &pa, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[2].state, GQ_QSTATE_NO_ROOM);
    /* No borrowingLimit: never above hard, whatever the cohort has. */
    gq_queue_quota pb = {.q = b, .in_use = mem(16), .cohort = &big};
    gq_queue_entry eb = e[2];
    eb.quotas = qa;
    assert_int_equal(gq_queue_plan(&eb, 1, &pb, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    gq_quota_free(a);
    gq_quota_free(b);
}

static void test_plan_two_quotas(void **state)
{
    (void)state;
    /* Every quota a pod charges must have room; a strict quota blocks only
     * pods that charge it, and only where its head lacks room: "both" is
     * short in the tenant quota, not in the strict namespace quota, so
     * "ns-only" still gets in. */
    gq_quota *qv[2] = {hardq("ns-quota", 16, true), hardq("tenant", 12, false)};
    gq_queue_decision out[4];
    gq_queue_quota pq[2];
    int64_t used[] = {0, 8};
    pe es[] = {
        {"both", 0, 100, 8, NULL, 0, 0, {0, 1}, 2, false, GQ_QSTATE_NO_ROOM},
        {"ns-only", 0, 200, 4, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
        {"tenant-only", 0, 300, 4, NULL, 0, 0, {1}, 1, false, GQ_QSTATE_ADMIT},
    };
    run_plan(qv, used, 2, es, 3, out, pq);
    assert_int_equal(out[0].quota, 1); /* the tenant is what lacks room */
    assert_int_equal(pq[0].in_use.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    assert_int_equal(pq[1].in_use.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    /* Short in the strict quota itself: that line is held. */
    used[0] = 12;
    es[1].want = GQ_QSTATE_BEHIND_HEAD;
    run_plan(qv, used, 2, es, 3, out, pq);
    assert_int_equal(out[0].quota, 0);
    assert_int_equal(out[1].quota, 0);
    assert_int_equal(out[1].ahead, 1);
    gq_quota_free(qv[0]);
    gq_quota_free(qv[1]);
}

/* A tenant's pod that its own namespace quota holds back does not hold the
 * line of a StrictFIFO tenant quota it shares with other namespaces: one
 * tenant could otherwise stop every other tenant's pods while the shared
 * quota has room. A pod held behind a line (BEHIND_HEAD) holds no other. */
static void test_plan_strict_shared_not_held_by_own_quota(void **state)
{
    (void)state;
    /* 0: tenant A's namespace quota (best effort), 1: the shared strict
     * tenant quota, 2: tenant B's namespace quota (strict). */
    gq_quota *qv[3] = {hardq("qa", 8, false), hardq("shared", 32, true), hardq("qb", 16, true)};
    gq_queue_decision out[4];
    gq_queue_quota pq[3];
    int64_t used[] = {8, 8, 0};
    pe es[] = {
        {"a2", 0, 100, 8, NULL, 0, 0, {0, 1}, 2, false, GQ_QSTATE_NO_ROOM},
        {"b1", 0, 200, 4, NULL, 0, 0, {2, 1}, 2, false, GQ_QSTATE_ADMIT},
    };
    run_plan(qv, used, 3, es, 2, out, pq);
    assert_int_equal(out[0].quota, 0); /* a2 waits for its own quota */
    assert_int_equal(pq[1].in_use.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    assert_int_equal(pq[2].in_use.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    /* The same with A's quota strict too: a3 waits behind a2 in qa, and
     * neither holds the shared line. */
    gq_quota *qs = hardq("qa", 8, true);
    gq_quota *qv2[3] = {qs, qv[1], qv[2]};
    pe es2[] = {
        {"a2", 0, 100, 8, NULL, 0, 0, {0, 1}, 2, false, GQ_QSTATE_NO_ROOM},
        {"a3", 0, 150, 1, NULL, 0, 0, {0, 1}, 2, false, GQ_QSTATE_BEHIND_HEAD},
        {"b1", 0, 200, 4, NULL, 0, 0, {2, 1}, 2, false, GQ_QSTATE_ADMIT},
    };
    run_plan(qv2, used, 3, es2, 3, out, pq);
    assert_int_equal(out[1].quota, 0);
    assert_int_equal(out[1].ahead, 1);
    assert_int_equal(pq[1].in_use.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    /* Short in the shared quota itself: it holds the shared line, for B too. */
    int64_t full[] = {0, 28, 0};
    es[0].want = GQ_QSTATE_NO_ROOM;
    es[1].want = GQ_QSTATE_BEHIND_HEAD;
    run_plan(qv, full, 3, es, 2, out, pq);
    assert_int_equal(out[0].quota, 1);
    assert_int_equal(out[1].quota, 1);
    gq_quota_free(qs);
    for (size_t j = 0; j < 3; j++)
        gq_quota_free(qv[j]);
}

static void test_plan_groups(void **state)
{
    (void)state;
    gq_quota *q = hardq("team", 32, false);
    gq_queue_decision out[8];
    gq_queue_quota pq[1];
    int64_t used[] = {8};
    /* 3 of 4 members: waits and blocks nobody (a later single pod passes
     * even under StrictFIFO). */
    gq_quota *sq = hardq("team", 32, true);
    pe three[] = {
        {"t0", 0, 100, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_WAIT_MEMBERS},
        {"t1", 0, 101, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_WAIT_MEMBERS},
        {"t2", 0, 102, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_WAIT_MEMBERS},
        {"solo", 0, 200, 8, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
    };
    run_plan(&sq, used, 1, three, 4, out, pq);
    assert_int_equal(out[0].members, 3);
    /* 4 of 4 that do not fit together (8 used + 32 > 32): all wait. */
    pe four[] = {
        {"t0", 0, 100, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"t1", 0, 101, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"t2", 0, 102, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"t3", 0, 103, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
    };
    run_plan(&q, used, 1, four, 4, out, pq);
    assert_int_equal(out[0].need.v[GQ_KEY_GPU_MEMORY], 32 * GI);
    /* Room frees: all 4 together. */
    int64_t none[] = {0};
    for (int i = 0; i < 4; i++)
        four[i].want = GQ_QSTATE_ADMIT;
    run_plan(&q, none, 1, four, 4, out, pq);
    assert_int_equal(pq[0].in_use.v[GQ_KEY_GPU_MEMORY], 32 * GI);
    /* Disagreeing sizes: nobody is admitted. */
    pe mismatch[] = {
        {"t0", 0, 100, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_GROUP_MISMATCH},
        {"t1", 0, 101, 8, "a/train", 3, 0, {0}, 1, false, GQ_QSTATE_GROUP_MISMATCH},
        {"t2", 0, 102, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_GROUP_MISMATCH},
        {"t3", 0, 103, 8, "a/train", 4, 0, {0}, 1, false, GQ_QSTATE_GROUP_MISMATCH},
    };
    run_plan(&q, none, 1, mismatch, 4, out, pq);
    /* A replacement member while the other 3 run: admitted alone. Same
     * group names in two namespaces are two groups. */
    pe repl[] = {
        {"r", 0, 100, 8, "a/train", 4, 3, {0}, 1, false, GQ_QSTATE_ADMIT},
        {"other", 0, 101, 8, "b/train", 4, 0, {0}, 1, false, GQ_QSTATE_WAIT_MEMBERS},
    };
    run_plan(&q, used, 1, repl, 2, out, pq);
    /* A group stands in line at its first member's place: a high-priority
     * member pulls the group ahead of a single pod. */
    pe lead[] = {
        {"solo", 5, 50, 16, NULL, 0, 0, {0}, 1, false, GQ_QSTATE_NO_ROOM},
        {"g0", 9, 100, 8, "a/g", 2, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
        {"g1", 0, 101, 8, "a/g", 2, 0, {0}, 1, false, GQ_QSTATE_ADMIT},
    };
    int64_t u16[] = {16};
    run_plan(&q, u16, 1, lead, 3, out, pq);
    gq_quota_free(q);
    gq_quota_free(sq);
}

static gq_quota *modelq(const char *models)
{
    char buf[768];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'team',"
             "'namespace':'a'},'spec':{'hard':{'gpu-memory':'200Gi'},'whenExceeded':'Queue',"
             "'models':{%s}}}",
             models);
    return Q(buf);
}

static void test_ever_fits_model(void **state)
{
    (void)state;
    gq_quota *q = modelq("'a100-80gb':{'gpu-memory':'32Gi'}");
    gq_amounts c = mem(40);
    gq_quota *models_only =
        Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'m',"
          "'namespace':'a'},'spec':{'whenExceeded':'Queue','models':{'a100-80gb':{'gpus':'1'}}}}");
    gq_amounts g = mem(8);
    assert_false(gq_quota_limits(models_only, &g)); /* no gpus asked */
    g.v[GQ_KEY_GPUS] = 1;
    assert_true(gq_quota_limits(models_only, &g)); /* a model's limit binds */
    gq_quota_free(models_only);
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_check_ever_fits(q, "a100-80gb", &c, NULL, 1, NULL, &err), GQ_EDENIED);
    assert_string_equal(err.msg, "pod asks for a100-80gb/gpu-memory=40Gi, more than quota team "
                                 "allows at all (a100-80gb/gpu-memory=32Gi): it would wait "
                                 "forever");
    /* A model the quota does not list: spec.hard alone. */
    assert_int_equal(gq_queue_check_ever_fits(q, "h100-80gb", &c, NULL, 1, NULL, &err), GQ_OK);
    /* Unpinned: against every listed model. */
    assert_int_equal(gq_queue_check_ever_fits(q, NULL, &c, NULL, 1, NULL, &err), GQ_EDENIED);
    c = mem(16);
    assert_int_equal(gq_queue_check_ever_fits(q, "a100-80gb", &c, NULL, 2, "g", &err), GQ_OK);
    assert_int_equal(gq_queue_check_ever_fits(q, "a100-80gb", &c, NULL, 3, "g", &err), GQ_EDENIED);
    assert_string_equal(err.msg, "pod group g of 3 pods asks for a100-80gb/gpu-memory=48Gi, more "
                                 "than quota team allows at all (a100-80gb/gpu-memory=32Gi): it "
                                 "would wait forever");
    gq_quota_free(q);
}

static gq_queue_entry ment(const char *uid, int64_t created, int64_t gi, const char *model,
                           const size_t *q0)
{
    gq_queue_entry e = queue_entry(uid, created, gi, q0, 1);
    e.model = model;
    return e;
}

static void test_plan_model_limits(void **state)
{
    (void)state;
    /* spec.hard has room for all; a100-80gb's limit is what the planner
     * must hold: pinned pods count against their model, unpinned ones
     * against every listed model, other models against spec.hard alone. */
    gq_quota *q = modelq("'a100-80gb':{'gpu-memory':'80Gi'}");
    static const size_t q0[1] = {0};
    gq_queue_quota pq;
    memset(&pq, 0, sizeof(pq));
    pq.q = q;
    pq.in_use = mem(0);
    pq.in_use.v[GQ_KEY_GPU_MEMORY] = 64 * GI;
    pq.model_in_use[0] = mem(0);
    pq.model_in_use[0].v[GQ_KEY_GPU_MEMORY] = 64 * GI;
    gq_queue_entry e[5] = {
        ment("a100-big", 1, 24, "a100-80gb", q0), ment("h100", 2, 24, "h100-80gb", q0),
        ment("unpinned", 3, 8, NULL, q0),         ment("unpinned-big", 4, 16, NULL, q0),
        ment("a100-last", 5, 8, "a100-80gb", q0),
    };
    gq_queue_decision out[5];
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_plan(e, 5, &pq, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[0].model_limit, 0);
    assert_int_equal(out[0].need.v[GQ_KEY_GPU_MEMORY], 24 * GI);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[2].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[3].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[3].model_limit, 0);
    assert_int_equal(out[4].state, GQ_QSTATE_ADMIT);
    assert_int_equal(pq.model_in_use[0].v[GQ_KEY_GPU_MEMORY], 80 * GI);
    assert_int_equal(pq.in_use.v[GQ_KEY_GPU_MEMORY], (64 + 24 + 8 + 8) * GI);
    /* spec.hard itself still holds: model_limit -1. */
    pq.in_use.v[GQ_KEY_GPU_MEMORY] = 200 * GI;
    gq_queue_entry h = ment("h100-2", 6, 8, "h100-80gb", q0);
    assert_int_equal(gq_queue_plan(&h, 1, &pq, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[0].model_limit, -1);
    gq_quota_free(q);
}

static void test_plan_model_choice(void **state)
{
    (void)state;
    /* a100-80gb is full: a pod accepting a100 then h100 is admitted on
     * h100 (option 1), priced as that option; the next, which fits neither,
     * waits and reports its first choice's limit. */
    gq_quota *q = modelq("'h100-80gb':{'gpu-memory':'16Gi'},'a100-80gb':{'gpu-memory':'16Gi'}");
    static const size_t q0[1] = {0};
    gq_queue_quota pq;
    memset(&pq, 0, sizeof(pq));
    pq.q = q;
    pq.in_use = mem(0);
    pq.in_use.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    pq.model_in_use[0] = pq.in_use; /* a100-80gb (models sorted by name) */
    pq.model_in_use[1] = mem(0);    /* h100-80gb */
    gq_model_option two[2] = {{"a100-80gb", mem(8)}, {"h100-80gb", mem(10)}};
    gq_queue_entry e[2] = {ment("first", 1, 0, NULL, q0), ment("second", 2, 0, NULL, q0)};
    e[0].options = two;
    e[0].n_options = 2;
    e[1].options = two;
    e[1].n_options = 2;
    gq_queue_decision out[2];
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_plan(e, 2, &pq, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[0].option, 1);
    assert_int_equal(pq.model_in_use[1].v[GQ_KEY_GPU_MEMORY], 10 * GI);
    assert_int_equal(pq.model_in_use[0].v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[1].model_limit, 0);
    assert_int_equal(out[1].need.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    /* A group tries its members on the same option: 2 x 8Gi fits h100's
     * 16Gi only when nothing else holds it. */
    pq.model_in_use[1] = mem(0);
    gq_model_option eight[2] = {{"a100-80gb", mem(8)}, {"h100-80gb", mem(8)}};
    gq_queue_entry g[2] = {ment("g1", 3, 0, NULL, q0), ment("g2", 4, 0, NULL, q0)};
    for (int i = 0; i < 2; i++) {
        g[i].options = eight;
        g[i].n_options = 2;
        g[i].group = "a/train";
        g[i].group_size = 2;
    }
    assert_int_equal(gq_queue_plan(g, 2, &pq, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[0].option, 1);
    assert_int_equal(out[1].option, 1);
    assert_int_equal(pq.model_in_use[1].v[GQ_KEY_GPU_MEMORY], 16 * GI);
    gq_quota_free(q);
}

static void test_plan_bad_index(void **state)
{
    (void)state;
    size_t qi = 3;
    gq_queue_entry e = {.uid = "x", .quotas = &qi, .n_quotas = 1};
    gq_queue_decision d;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_plan(&e, 1, NULL, 0, &d, &err), GQ_EINVAL);
    assert_int_equal(gq_queue_plan(NULL, 0, NULL, 0, NULL, &err), GQ_OK);
}

static void test_ungate_patch(void **state)
{
    (void)state;
    json_object *p = NULL;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_queue_ungate_patch("u-1", 2, NULL, &p, &err), GQ_OK);
    assert_string_equal(
        json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
        "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"u-1\"},"
        "{\"op\":\"test\",\"path\":\"/spec/schedulingGates/2/name\",\"value\":"
        "\"gpuquota.io/quota\"},"
        "{\"op\":\"remove\",\"path\":\"/spec/schedulingGates/2\"}]");
    json_object_put(p);
}

/* A pod that accepts two models, queued: priced on each (a fraction is
 * memory of that model), and pinned to the chosen one in the ungate patch,
 * whose affinity only narrows what the pod had (kube-apiserver's rule for
 * gated pods: matchExpressions appended to every existing term). */
/* What may wait for the controller's choice of model: the device request is
 * written at creation, so it must not depend on the model. */
static void test_deferred_choice(void **state)
{
    (void)state;
    gq_config *cfg = NULL;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    const gq_model *mixed[2] = {gq_config_find_model(cfg, "a100-80gb"),
                                gq_config_find_model(cfg, "l4")};
    const gq_model *same[2] = {gq_config_find_model(cfg, "a100-80gb"),
                               gq_config_find_model(cfg, "h100-80gb")};
    assert_non_null(mixed[0]);
    assert_non_null(mixed[1]);
    assert_non_null(same[1]);
    gq_ctr_cost ctr = {.name = "c", .form = GQ_FORM_FRACTION, .gpus = 1};
    gq_pod_cost cost = {.ctrs = &ctr, .n_ctrs = 1, .gpu_pods = 1};
    /* A fraction among models of one size, or one model: passes. */
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, same, 2, &err), GQ_OK);
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, mixed, 1, &err), GQ_OK);
    /* Among sizes: refused, naming the container and both models. */
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, mixed, 2, &err), GQ_EDENIED);
    assert_non_null(strstr(err.msg, "container c asks"));
    assert_non_null(strstr(err.msg, "(a100-80gb, l4)"));
    /* An amount, or whole GPUs, is the same request on every model. */
    ctr.form = GQ_FORM_MEMORY;
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, mixed, 2, &err), GQ_OK);
    ctr.form = GQ_FORM_WHOLE;
    ctr.exclusive = true;
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, mixed, 2, &err), GQ_OK);
    /* mig: a slice is a profile of one model, whatever its form. */
    cfg->backend = GQ_BACKEND_MIG;
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, same, 2, &err), GQ_OK);
    ctr.exclusive = false;
    ctr.form = GQ_FORM_MEMORY;
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, same, 2, &err), GQ_EDENIED);
    assert_non_null(strstr(err.msg, "MIG profiles differ by model"));
    /* timeslicing accounts memory without a device request for it. */
    cfg->backend = GQ_BACKEND_TIMESLICING;
    ctr.form = GQ_FORM_FRACTION;
    assert_int_equal(gq_queue_check_deferred_choice(cfg, &cost, mixed, 2, &err), GQ_OK);
    gq_config_free(cfg);
}

static void test_ungate_pin(void **state)
{
    (void)state;
    gq_config *cfg = NULL;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    json_object *pod = J(
        "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'p','namespace':'a','uid':'u-9',"
        "'annotations':{'gpuquota.io/gpu-model':'l4,h100-80gb','gpuquota.io/gpu-fraction':'0.5'}},"
        "'spec':{'schedulingGates':[{'name':'other'},{'name':'gpuquota.io/quota'}],"
        "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{"
        "'nodeSelectorTerms':[{'matchExpressions':[{'key':'zone','operator':'In','values':['a']}]},"
        "{'matchFields':[{'key':'metadata.name','operator':'In','values':['n1']}]}]}}},"
        "'containers':[{'name':'c','image':'i'}]}}");
    const gq_model *choices[GQ_MAX_MODEL_CHOICES];
    size_t n = 0;
    assert_int_equal(gq_pod_model_choices(cfg, pod, choices, &n, &err), GQ_OK);
    assert_int_equal(n, 2);
    gq_model_option opts[2];
    if (gq_queue_price_choices(cfg, pod, GQ_TRUST_REQUEST, choices, n, opts, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(opts[0].model, "l4");
    assert_int_equal(opts[0].charge.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    assert_string_equal(opts[1].model, "h100-80gb");
    assert_int_equal(opts[1].charge.v[GQ_KEY_GPU_MEMORY], 40 * GI);

    gq_queue_pin pin = {cfg, pod, choices[1], GQ_TRUST_REQUEST};
    json_object *patch = NULL, *after = NULL;
    assert_int_equal(gq_queue_ungate_patch("u-9", 1, &pin, &patch, &err), GQ_OK);
    assert_int_equal(gq_patch_apply(pod, patch, &after, &err), GQ_OK);
    json_object *meta = gq_json_member(after, "metadata");
    json_object *ann = gq_json_member(meta, "annotations");
    assert_string_equal(gq_json_get_string(ann, "gpuquota.io/gpu-model"), "h100-80gb");
    assert_string_equal(gq_json_get_string(ann, "gpuquota.io/gpu-model-choices"), "l4,h100-80gb");
    json_object *spec = gq_json_member(after, "spec");
    assert_string_equal(json_object_to_json_string_ext(gq_json_member(spec, "schedulingGates"),
                                                       JSON_C_TO_STRING_PLAIN),
                        "[{\"name\":\"other\"}]");
    json_object *terms = gq_json_member(
        gq_json_member(gq_json_member(gq_json_member(spec, "affinity"), "nodeAffinity"),
                       "requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeSelectorTerms");
    assert_int_equal(json_object_array_length(terms), 2);
    for (size_t t = 0; t < 2; t++) {
        json_object *ex = gq_json_member(json_object_array_get_idx(terms, t), "matchExpressions");
        size_t l = json_object_array_length(ex);
        assert_int_equal(l, t == 0 ? 2 : 1); /* appended after what was there */
        json_object *pin_e = json_object_array_get_idx(ex, l - 1);
        assert_string_equal(gq_json_get_string(pin_e, "key"), "nvidia.com/gpu.product");
        const char *v0 =
            json_object_get_string(json_object_array_get_idx(gq_json_member(pin_e, "values"), 0));
        assert_non_null(strstr(v0, "H100"));
    }
    /* The tests come first and the removal last: a moved gate or another
     * pod under the name changes nothing. */
    assert_string_equal(gq_json_get_string(json_object_array_get_idx(patch, 0), "op"), "test");
    assert_string_equal(
        gq_json_get_string(json_object_array_get_idx(patch, json_object_array_length(patch) - 1),
                           "op"),
        "remove");
    json_object_put(after);
    json_object_put(patch);
    json_object_put(pod);
    gq_config_free(cfg);
}

static void test_applies(void **state)
{
    (void)state;
    gq_quota *deny = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                       "'d','namespace':'a'},'spec':{'hard':{'gpu-memory':'8Gi'}}}");
    gq_quota *queue = hardq("q", 8, false);
    gq_quota *pods_only =
        Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
          "'p','namespace':'a'},'spec':{'hard':{'gpus':'1'},'whenExceeded':'Queue'}}");
    gq_pod_facts f = {"a", NULL, false, false, NULL};
    gq_amounts c = mem(4);
    const gq_quota *one[] = {deny};
    const gq_quota *two[] = {deny, queue};
    const gq_quota *p[] = {pods_only};
    assert_false(gq_queue_applies(one, 1, &f, NULL, &c));
    assert_true(gq_queue_applies(two, 2, &f, NULL, &c));
    /* A Queue quota that limits nothing the pod charges does not queue it. */
    assert_false(gq_queue_applies(p, 1, &f, NULL, &c));
    gq_pod_facts other = {"b", NULL, false, false, NULL};
    assert_false(gq_queue_applies(two, 2, &other, NULL, &c));
    gq_quota_free(deny);
    gq_quota_free(queue);
    gq_quota_free(pods_only);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_fields),
        cmocka_unit_test(test_gate_index),
        cmocka_unit_test(test_group_parse),
        cmocka_unit_test(test_ever_fits),
        cmocka_unit_test(test_ever_fits_shared_claim),
        cmocka_unit_test(test_ever_fits_model),
        cmocka_unit_test(test_plan_model_limits),
        cmocka_unit_test(test_plan_model_choice),
        cmocka_unit_test(test_ungate_pin),
        cmocka_unit_test(test_deferred_choice),
        cmocka_unit_test(test_plan_order),
        cmocka_unit_test(test_plan_strategies),
        cmocka_unit_test(test_plan_held),
        cmocka_unit_test(test_plan_borrowing),
        cmocka_unit_test(test_plan_two_quotas),
        cmocka_unit_test(test_plan_strict_shared_not_held_by_own_quota),
        cmocka_unit_test(test_plan_groups),
        cmocka_unit_test(test_plan_bad_index),
        cmocka_unit_test(test_ungate_patch),
        cmocka_unit_test(test_applies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
