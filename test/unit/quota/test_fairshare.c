/* Borrowing across tenants (a cohort of GPUTenantQuotas) and fair sharing
 * between borrowers in the queue planner (quota/podqueue.h;
 * docs/queueing.md, "Borrowing and reclaim"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/queue_fixtures.h"

#include "quota/podqueue.h"
#include "quota/preempt.h"

static gq_quota *Q(const char *kind, const char *name, const char *spec)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'%s','metadata':{'name':'%s',"
             "'namespace':'a'},'spec':{'whenExceeded':'Queue',%s%s}}",
             kind, name, spec, strcmp(kind, "GPUTenantQuota") ? "" : ",'namespaces':['a']");
    return queue_quota_parse(buf);
}

static gq_amounts mem(int64_t gi)
{
    return queue_mem(gi);
}

static gq_queue_entry ent(const char *uid, int64_t created, int64_t gi, const size_t *qs, size_t nq)
{
    return queue_entry(uid, created, gi, qs, nq);
}

static int64_t used_gi(const gq_queue_quota *pq)
{
    return pq->in_use.v[GQ_KEY_GPU_MEMORY] / GI;
}

/* co as the cohort of pq[0..n), at their in_use. */
static void cohort_fill(gq_queue_cohort *co, const gq_queue_quota *pq, size_t n)
{
    memset(co, 0, sizeof(*co));
    for (size_t i = 0; i < n; i++)
        gq_queue_cohort_add(co, pq[i].q, &pq[i].in_use);
}

/* Two tenants of one cohort: the busy one borrows the idle one's unused
 * hard up to its own borrowingLimit; the idle one's pod, within its hard,
 * then waits (it reclaims) rather than pass what the cohort holds; without
 * spec.cohort (no cohort) nothing is borrowed. */
static void test_cross_tenant(void **state)
{
    (void)state;
    gq_quota *busy = Q("GPUTenantQuota", "busy",
                       "'hard':{'gpu-memory':'16Gi'},'cohort':'pool','borrowingLimit':{'gpu-"
                       "memory':'16Gi'}");
    gq_quota *idle = Q("GPUTenantQuota", "idle",
                       "'hard':{'gpu-memory':'32Gi'},'cohort':'pool','lendingLimit':{'gpu-"
                       "memory':'24Gi'}");
    static const size_t qb[] = {0}, qi[] = {1};
    gq_queue_entry e[] = {ent("b1", 1, 8, qb, 1), ent("b2", 2, 8, qb, 1), ent("b3", 3, 8, qb, 1),
                          ent("i1", 4, 24, qi, 1)};
    gq_queue_cohort co;
    memset(&co, 0, sizeof(co));
    gq_queue_quota pq[2] = {{.q = busy, .in_use = mem(16), .cohort = &co},
                            {.q = idle, .in_use = mem(0), .cohort = &co}};
    gq_queue_cohort_add(&co, busy, &pq[0].in_use);
    gq_queue_cohort_add(&co, idle, &pq[1].in_use);
    assert_int_equal(co.free.v[GQ_KEY_GPU_MEMORY], 24 * GI); /* at most its lendingLimit */
    assert_int_equal(co.lendable.v[GQ_KEY_GPU_MEMORY], 40 * GI);
    gq_queue_decision out[4];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 3, pq, 2, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_true(out[0].borrowing);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[2].state, GQ_QSTATE_NO_ROOM); /* 16 + 16 = hard + borrowingLimit */
    assert_int_equal(out[2].quota, 0);
    assert_int_equal(used_gi(&pq[0]), 32);
    assert_int_equal(co.free.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    /* The idle tenant's 24Gi within its hard would lend 16Gi less, and the
     * cohort has 8Gi: it waits, and may reclaim. */
    assert_int_equal(gq_queue_plan(&e[3], 1, pq, 2, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[0].quota, 1);
    /* In one pass, the pod within its hard goes before the borrowers. */
    pq[0].in_use = mem(16);
    cohort_fill(&co, pq, 2);
    assert_int_equal(gq_queue_plan(e, 4, pq, 2, out, &err), GQ_OK);
    assert_int_equal(out[3].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM); /* 24 - 16 = 8Gi lent */
    assert_int_equal(co.free.v[GQ_KEY_GPU_MEMORY], 0);
    /* Without a cohort: the busy tenant never goes above its hard. */
    gq_queue_quota alone = {.q = busy, .in_use = mem(16)};
    assert_int_equal(gq_queue_plan(e, 1, &alone, 1, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_false(out[0].borrowing);
    gq_quota_free(busy);
    gq_quota_free(idle);
}

/* A GPUQuota borrows first what its tenant's other GPUQuotas leave unused,
 * then what its tenant borrows from the other tenants of the cohort: never
 * more than the tenant's hard + borrowingLimit, nor its own limit. */
static void test_gpuquota_through_tenant(void **state)
{
    (void)state;
    gq_quota *g1 =
        Q("GPUQuota", "g1", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'48Gi'}");
    gq_quota *g2 = Q("GPUQuota", "g2", "'hard':{'gpu-memory':'16Gi'}");
    gq_quota *t = Q("GPUTenantQuota", "t",
                    "'hard':{'gpu-memory':'32Gi'},'cohort':'pool','borrowingLimit':{'gpu-memory':"
                    "'16Gi'}");
    gq_quota *u = Q("GPUTenantQuota", "u", "'hard':{'gpu-memory':'32Gi'},'cohort':'pool'");
    static const size_t q1[] = {0, 2}, q2[] = {1, 2};
    gq_queue_entry e[] = {ent("a", 1, 8, q1, 2), ent("b", 2, 8, q1, 2), ent("c", 3, 8, q1, 2),
                          ent("d", 4, 8, q1, 2), ent("e", 5, 8, q1, 2), ent("g2", 6, 8, q2, 2)};
    gq_queue_cohort inner, outer;
    memset(&inner, 0, sizeof(inner));
    memset(&outer, 0, sizeof(outer));
    gq_queue_quota pq[4] = {{.q = g1, .in_use = mem(16), .cohort = &inner},
                            {.q = g2, .in_use = mem(0), .cohort = &inner},
                            {.q = t, .in_use = mem(16), .cohort = &outer},
                            {.q = u, .in_use = mem(0), .cohort = &outer}};
    for (int i = 0; i < 2; i++)
        gq_queue_cohort_add(&inner, pq[i].q, &pq[i].in_use);
    for (int i = 2; i < 4; i++)
        gq_queue_cohort_add(&outer, pq[i].q, &pq[i].in_use);
    /* Without the tenant's cohort: g2's 16Gi only. */
    assert_int_equal(gq_queue_cohort_room(&inner, GQ_KEY_GPU_MEMORY), 16 * GI);
    inner.up = &pq[2];
    assert_int_equal(gq_queue_cohort_room(&inner, GQ_KEY_GPU_MEMORY), 32 * GI);
    gq_queue_decision out[6];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 5, pq, 4, out, &err), GQ_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(out[i].state, GQ_QSTATE_ADMIT);
        assert_true(out[i].borrowing);
    }
    /* g1 at 48: the tenant at 48 = 32 + its borrowingLimit of 16. */
    assert_int_equal(out[4].state, GQ_QSTATE_NO_ROOM);
    /* g1's cohort has nothing left: g2 lends 16, g1 holds 32 above its
     * hard, its tenant's 16 borrowed are spent. */
    assert_int_equal(out[4].quota, 0);
    assert_int_equal(gq_queue_cohort_room(&inner, GQ_KEY_GPU_MEMORY), 0);
    assert_int_equal(used_gi(&pq[0]), 48);
    assert_int_equal(used_gi(&pq[2]), 48);
    assert_int_equal(outer.free.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    /* g2's pod within its own hard: its tenant can borrow no more. */
    assert_int_equal(gq_queue_plan(&e[5], 1, pq, 4, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[0].quota, 1);
    gq_quota_free(g1);
    gq_quota_free(g2);
    gq_quota_free(t);
    gq_quota_free(u);
}

/* Per-model limits hold for borrowed capacity: the cohort has room and the
 * borrowingLimit too, but the model's limit of spec.models stops the pods
 * pinned to it (and those pinned to no model, charged against it). */
static void test_borrowed_model_limits(void **state)
{
    (void)state;
    gq_quota *b = Q("GPUQuota", "b",
                    "'hard':{'gpu-memory':'8Gi'},'borrowingLimit':{'gpu-memory':'32Gi'},"
                    "'models':{'a100-80gb':{'gpu-memory':'16Gi'}}");
    gq_quota *l = Q("GPUQuota", "l", "'hard':{'gpu-memory':'32Gi'}");
    static const size_t qb[] = {0};
    gq_queue_entry e[] = {ent("p1", 1, 8, qb, 1), ent("p2", 2, 8, qb, 1), ent("p3", 3, 8, qb, 1),
                          ent("none", 4, 4, qb, 1), ent("h100", 5, 8, qb, 1)};
    e[0].model = e[1].model = e[2].model = "a100-80gb";
    e[4].model = "h100-80gb";
    gq_queue_cohort co;
    memset(&co, 0, sizeof(co));
    gq_queue_quota pq[2] = {{.q = b, .in_use = mem(0), .cohort = &co},
                            {.q = l, .in_use = mem(0), .cohort = &co}};
    gq_queue_cohort_add(&co, b, &pq[0].in_use);
    gq_queue_cohort_add(&co, l, &pq[1].in_use);
    gq_queue_decision out[5];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 5, pq, 2, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_false(out[0].borrowing);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_true(out[1].borrowing);
    assert_int_equal(out[2].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[2].model_limit, 0); /* a100-80gb's 16Gi, borrowed or not */
    assert_int_equal(out[3].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[3].model_limit, 0);
    assert_int_equal(out[4].state, GQ_QSTATE_ADMIT); /* a model b does not list */
    assert_true(out[4].borrowing);
    assert_int_equal(used_gi(&pq[0]), 24);
    gq_quota_free(b);
    gq_quota_free(l);
}

/* Fair sharing: borrowers of weights 1 and 3 competing for a cohort's
 * 16Gi end with 4Gi and 12Gi, whoever stands first in line; pods within
 * their own share go before every borrower, in their order. */
static void test_fair_weights(void **state)
{
    (void)state;
    gq_quota *a =
        Q("GPUQuota", "a", "'hard':{'gpu-memory':'4Gi'},'borrowingLimit':{'gpu-memory':'16Gi'}");
    gq_quota *b = Q("GPUQuota", "b",
                    "'hard':{'gpu-memory':'4Gi'},'borrowingLimit':{'gpu-memory':'16Gi'},"
                    "'fairSharing':{'weight':3}");
    gq_quota *l = Q("GPUQuota", "l",
                    "'hard':{'gpu-memory':'16Gi'},'lendingLimit':{'gpu-memory':"
                    "'8Gi'}");
    static const size_t qa[] = {0}, qb[] = {1}, ql[] = {2};
    gq_queue_entry e[41];
    char uid[41][8];
    for (int i = 0; i < 20; i++) { /* a's twenty 1Gi pods first, then b's */
        snprintf(uid[i], sizeof uid[i], "a%02d", i);
        snprintf(uid[20 + i], sizeof uid[i], "b%02d", i);
        e[i] = ent(uid[i], 1 + i, 1, qa, 1);
        e[20 + i] = ent(uid[20 + i], 100 + i, 1, qb, 1);
    }
    /* The lender's own pod comes last: within its share, it goes first. */
    snprintf(uid[40], sizeof uid[40], "l");
    e[40] = ent(uid[40], 1000, 8, ql, 1);
    gq_queue_cohort co;
    gq_queue_quota pq[3] = {{.q = a, .in_use = mem(0), .cohort = &co},
                            {.q = b, .in_use = mem(0), .cohort = &co},
                            {.q = l, .in_use = mem(0), .cohort = &co}};
    cohort_fill(&co, pq, 3);
    /* Lendable: 4 + 4 + 8 = 16Gi. l's 8Gi pod leaves 8Gi unused, all it
     * lends anyway; a's and b's own 4Gi lend 8Gi less: 8Gi to share. */
    gq_queue_decision out[41];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 41, pq, 3, out, &err), GQ_OK);
    assert_int_equal(out[40].state, GQ_QSTATE_ADMIT);
    assert_false(out[40].borrowing);
    /* Each has its own 4Gi; they share the 8Gi left 1:3. */
    int64_t ba = used_gi(&pq[0]) - 4, bb = used_gi(&pq[1]) - 4;
    assert_int_equal(ba + bb, 8);
    assert_int_equal(ba, 2);
    assert_int_equal(bb, 6);
    /* Inside one quota the order holds: a's admitted pods are its first. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(out[i].state, i < 6 ? GQ_QSTATE_ADMIT : GQ_QSTATE_NO_ROOM);
    for (int i = 0; i < 20; i++)
        assert_int_equal(out[20 + i].state, i < 10 ? GQ_QSTATE_ADMIT : GQ_QSTATE_NO_ROOM);
    gq_quota_free(a);
    gq_quota_free(b);
    gq_quota_free(l);
}

/* Weight 0 is served after every other borrower (Kueue); a StrictFIFO
 * borrower that finds no room holds its own line; a held preemptor is
 * decided first and never set aside. */
static void test_fair_zero_and_strict(void **state)
{
    (void)state;
    gq_quota *z = Q("GPUQuota", "z",
                    "'hard':{'gpu-memory':'1Gi'},'borrowingLimit':{'gpu-memory':'16Gi'},"
                    "'fairSharing':{'weight':0}");
    gq_quota *s = Q("GPUQuota", "s",
                    "'hard':{'gpu-memory':'1Gi'},'borrowingLimit':{'gpu-memory':'16Gi'},"
                    "'queueingStrategy':'StrictFIFO'");
    gq_quota *l = Q("GPUQuota", "l", "'hard':{'gpu-memory':'6Gi'}");
    static const size_t qz[] = {0}, qs[] = {1};
    gq_queue_entry e[] = {ent("z1", 1, 4, qz, 1), ent("s-big", 2, 8, qs, 1),
                          ent("s-small", 3, 2, qs, 1), ent("z2", 4, 1, qz, 1)};
    gq_queue_cohort co;
    gq_queue_quota pq[3] = {{.q = z, .in_use = mem(1), .cohort = &co},
                            {.q = s, .in_use = mem(1), .cohort = &co},
                            {.q = l, .in_use = mem(0), .cohort = &co}};
    cohort_fill(&co, pq, 3);
    gq_queue_decision out[4];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 4, pq, 3, out, &err), GQ_OK);
    /* s-big does not fit (6Gi free): s's line is held, s-small waits
     * behind it; z, weight 0, then takes what is left in its order. */
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[2].state, GQ_QSTATE_BEHIND_HEAD);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[3].state, GQ_QSTATE_ADMIT);
    /* With room for s-small only: weight 1 before weight 0, though z1
     * stands first in the cluster's order. */
    gq_queue_entry f[] = {ent("z1", 1, 2, qz, 1), ent("s1", 2, 2, qs, 1)};
    gq_queue_cohort c2;
    gq_queue_quota p2[3] = {{.q = z, .in_use = mem(1), .cohort = &c2},
                            {.q = s, .in_use = mem(1), .cohort = &c2},
                            {.q = l, .in_use = mem(4), .cohort = &c2}};
    cohort_fill(&c2, p2, 3);
    assert_int_equal(gq_queue_plan(f, 2, p2, 3, out, &err), GQ_OK);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    /* A held preemptor borrowing is decided first, not set aside. */
    f[0].held = true;
    p2[0].in_use = p2[1].in_use = mem(1);
    p2[2].in_use = mem(4);
    cohort_fill(&c2, p2, 3);
    assert_int_equal(gq_queue_plan(f, 2, p2, 3, out, &err), GQ_OK);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM);
    gq_quota_free(z);
    gq_quota_free(s);
    gq_quota_free(l);
}

/* Borrowers of weight 0 among themselves: the lower unweighted share
 * first (Kueue), whatever the cluster-wide order. */
static void test_fair_zero_weights(void **state)
{
    (void)state;
    const char *spec = "'hard':{'gpu-memory':'1Gi'},'borrowingLimit':{'gpu-memory':'16Gi'},"
                       "'lendingLimit':{'gpu-memory':0},'fairSharing':{'weight':'0'}";
    gq_quota *za = Q("GPUQuota", "za", spec), *zb = Q("GPUQuota", "zb", spec);
    gq_quota *l = Q("GPUQuota", "l", "'hard':{'gpu-memory':'4Gi'}");
    static const size_t qa[] = {0}, qb[] = {1};
    gq_queue_entry e[] = {ent("za1", 1, 1, qa, 1), ent("zb1", 2, 1, qb, 1)};
    gq_queue_cohort co;
    gq_queue_quota pq[3] = {{.q = za, .in_use = mem(3), .cohort = &co},
                            {.q = zb, .in_use = mem(1), .cohort = &co},
                            {.q = l, .in_use = mem(0), .cohort = &co}};
    cohort_fill(&co, pq, 3);
    assert_int_equal(co.free.v[GQ_KEY_GPU_MEMORY], 2 * GI); /* 4 lent, 2 borrowed by za */
    gq_queue_decision out[2];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 2, pq, 3, out, &err), GQ_OK);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[0].state, GQ_QSTATE_ADMIT);
    gq_queue_entry f[] = {ent("za2", 3, 1, qa, 1), ent("zb2", 4, 1, qb, 1)};
    assert_int_equal(gq_queue_plan(f, 2, pq, 3, out, &err), GQ_OK);
    /* Nothing left for either. */
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    assert_int_equal(out[1].state, GQ_QSTATE_NO_ROOM);
    /* One 1Gi free: zb (1Gi above) goes before za (2Gi above). */
    pq[1].in_use = mem(2);
    pq[0].in_use = mem(3);
    cohort_fill(&co, pq, 3);
    assert_int_equal(co.free.v[GQ_KEY_GPU_MEMORY], GI);
    assert_int_equal(gq_queue_plan(f, 2, pq, 3, out, &err), GQ_OK);
    assert_int_equal(out[1].state, GQ_QSTATE_ADMIT);
    assert_int_equal(out[0].state, GQ_QSTATE_NO_ROOM);
    gq_quota_free(za);
    gq_quota_free(zb);
    gq_quota_free(l);
}

/* A pod group borrows all or nothing, weighed with every member's charge:
 * B's first pod (a quarter of the cohort) goes before A's group of two (a
 * half); then the group, at a half as B's second, goes first by order. */
static void test_fair_group(void **state)
{
    (void)state;
    const char *spec = "'hard':{'gpu-memory':'0'},'borrowingLimit':{'gpu-memory':'16Gi'}";
    gq_quota *a = Q("GPUQuota", "a", spec), *b = Q("GPUQuota", "b", spec);
    gq_quota *l = Q("GPUQuota", "l", "'hard':{'gpu-memory':'4Gi'}");
    static const size_t qa[] = {0}, qb[] = {1};
    gq_queue_entry e[] = {ent("g0", 1, 1, qa, 1), ent("g1", 2, 1, qa, 1), ent("b1", 3, 1, qb, 1),
                          ent("b2", 4, 1, qb, 1), ent("b3", 5, 1, qb, 1), ent("b4", 6, 1, qb, 1)};
    e[0].group = e[1].group = "ns/g";
    e[0].group_size = e[1].group_size = 2;
    gq_queue_cohort co;
    gq_queue_quota pq[3] = {{.q = a, .in_use = mem(0), .cohort = &co},
                            {.q = b, .in_use = mem(0), .cohort = &co},
                            {.q = l, .in_use = mem(0), .cohort = &co}};
    cohort_fill(&co, pq, 3);
    gq_queue_decision out[6];
    gq_err err;
    assert_int_equal(gq_queue_plan(e, 6, pq, 3, out, &err), GQ_OK);
    static const gq_queue_state want[] = {GQ_QSTATE_ADMIT, GQ_QSTATE_ADMIT,   GQ_QSTATE_ADMIT,
                                          GQ_QSTATE_ADMIT, GQ_QSTATE_NO_ROOM, GQ_QSTATE_NO_ROOM};
    for (int i = 0; i < 6; i++)
        assert_int_equal(out[i].state, want[i]);
    assert_true(out[0].borrowing && out[1].borrowing);
    assert_int_equal(used_gi(&pq[0]), 2);
    assert_int_equal(used_gi(&pq[1]), 2);
    gq_quota_free(a);
    gq_quota_free(b);
    gq_quota_free(l);
}

/* Reclaim across tenants: the idle tenant's pod, within its hard, evicts
 * the busy tenant's pod that borrowed (through its GPUQuota's cohort, whose
 * tenant borrows in the cohort of tenants), not the one within its share;
 * a tenant that says Never reclaims nothing. */
static void test_reclaim_across_tenants(void **state)
{
    (void)state;
    gq_quota *g =
        Q("GPUQuota", "g", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'16Gi'}");
    gq_quota *busy = Q("GPUTenantQuota", "busy",
                       "'hard':{'gpu-memory':'16Gi'},'cohort':'pool','borrowingLimit':{'gpu-"
                       "memory':'16Gi'}");
    gq_quota *idle = Q("GPUTenantQuota", "idle",
                       "'hard':{'gpu-memory':'16Gi'},'cohort':'pool','preemption':{"
                       "'reclaimWithinCohort':'Any'}");
    gq_queue_cohort inner, outer;
    memset(&inner, 0, sizeof(inner));
    memset(&outer, 0, sizeof(outer));
    gq_queue_quota pq[3] = {{.q = g, .in_use = mem(32), .cohort = &inner},
                            {.q = busy, .in_use = mem(32), .cohort = &outer},
                            {.q = idle, .in_use = mem(0), .cohort = &outer}};
    gq_queue_cohort_add(&inner, g, &pq[0].in_use);
    inner.up = &pq[1];
    for (int i = 1; i < 3; i++)
        gq_queue_cohort_add(&outer, pq[i].q, &pq[i].in_use);
    static const size_t qg[] = {0, 1}, qi[] = {2};
    gq_queue_entry me = ent("lender", 10, 8, qi, 1);
    me.priority = 0;
    gq_preempt_pod pods[2] = {
        {.uid = "own", .priority = 100, .charge = mem(16), .quotas = qg, .n_quotas = 2},
        {.uid = "borrowed",
         .priority = 100,
         .created_us = 5,
         .charge = mem(16),
         .quotas = qg,
         .n_quotas = 2,
         .borrowing = true,
         .cohort = &inner},
    };
    gq_preempt_ask ask = {.members = &me,
                          .n_members = 1,
                          .quotas = pq,
                          .nq = 3,
                          .pods = pods,
                          .n_pods = 2,
                          .reclaim = GQ_RECLAIM_ANY,
                          .cohort = &outer};
    size_t victims[2], nv = 9;
    gq_err err;
    assert_int_equal(gq_preempt_plan(&ask, victims, &nv, &err), GQ_OK);
    assert_int_equal(nv, 1);
    assert_int_equal(victims[0], 1);
    ask.reclaim = GQ_RECLAIM_NEVER;
    assert_int_equal(gq_preempt_plan(&ask, victims, &nv, &err), GQ_ENOTFOUND);
    assert_int_equal(nv, 0);
    /* LowerPriority: the borrower's priority is higher: nobody. */
    ask.reclaim = GQ_RECLAIM_LOWER_PRIORITY;
    assert_int_equal(gq_preempt_plan(&ask, victims, &nv, &err), GQ_ENOTFOUND);
    gq_quota_free(g);
    gq_quota_free(busy);
    gq_quota_free(idle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_tenant),
        cmocka_unit_test(test_gpuquota_through_tenant),
        cmocka_unit_test(test_borrowed_model_limits),
        cmocka_unit_test(test_fair_weights),
        cmocka_unit_test(test_fair_zero_and_strict),
        cmocka_unit_test(test_fair_zero_weights),
        cmocka_unit_test(test_fair_group),
        cmocka_unit_test(test_reclaim_across_tenants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
