/* Preemption inside a quota (quota/preempt.h): which admitted pods are
 * evicted for a queued pod or group, in which order, the minimal set, the
 * policies, groups whole, spared pods, and the cases where nothing may be
 * evicted. Amounts are GiB of gpu-memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "quota/preempt.h"
#include "support/queue_fixtures.h"

static gq_amounts mem(int64_t gib)
{
    return queue_mem(gib);
}

/* A quota with only gpu-memory hard, and policy. */
static gq_quota quota(const char *name, int64_t hard_gib, gq_preempt_policy policy)
{
    return queue_quota_mem(name, hard_gib, policy);
}

static const size_t Q0[] = {0}, Q1[] = {1}, Q01[] = {0, 1};

static gq_queue_entry preemptor(int64_t gib, const size_t *qs, size_t nq)
{
    return (gq_queue_entry){.uid = "new",
                            .priority = 10,
                            .created_us = 500,
                            .charge = mem(gib),
                            .quotas = qs,
                            .n_quotas = nq};
}

static gq_preempt_pod pod(const char *uid, int32_t prio, int64_t admitted, int64_t gib)
{
    return (gq_preempt_pod){.uid = uid,
                            .priority = prio,
                            .created_us = admitted,
                            .admitted_us = admitted,
                            .charge = mem(gib),
                            .quotas = Q0,
                            .n_quotas = 1};
}

/* Plan for e against the planner's quotas pq[0..nq) as given; returns
 * the code, the victims' uids joined by ',' in out. */
static gq_code plan_on(const gq_queue_entry *e, size_t n_e, const gq_queue_quota *pq, size_t nq,
                       const gq_preempt_pod *pods, size_t n, char *out, size_t cap)
{
    size_t victims[16], nv = 99;
    gq_err err;
    gq_err_clear(&err);
    gq_preempt_ask ask = {
        .members = e, .n_members = n_e, .quotas = pq, .nq = nq, .pods = pods, .n_pods = n};
    gq_code rc = gq_preempt_plan(&ask, victims, &nv, &err);
    out[0] = '\0';
    for (size_t i = 0; i < nv; i++) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", i ? "," : "", pods[victims[i]].uid);
    }
    if (rc)
        assert_int_equal(nv, 0);
    return rc;
}

/* plan_on against quotas qq, in use (and leaving) as the pods count. */
static gq_code run(const gq_queue_entry *e, size_t n_e, gq_quota *qq, size_t nq,
                   const gq_preempt_pod *pods, size_t n, char *out, size_t cap)
{
    gq_queue_quota pq[4];
    memset(pq, 0, sizeof(pq));
    for (size_t i = 0; i < nq; i++) {
        pq[i].q = &qq[i];
        pq[i].in_use = mem(0);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < pods[i].n_quotas; j++) {
            pq[pods[i].quotas[j]].in_use.v[GQ_KEY_GPU_MEMORY] +=
                pods[i].charge.v[GQ_KEY_GPU_MEMORY];
            if (pods[i].leaving)
                gq_queue_quota_leaving(&pq[pods[i].quotas[j]], &pods[i].charge, pods[i].model);
        }
    return plan_on(e, n_e, pq, nq, pods, n, out, cap);
}

static void fits_already_evicts_nothing(void **state)
{
    (void)state;
    gq_quota q = quota("q", 32, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(8, Q0, 1);
    gq_preempt_pod pods[] = {pod("a", 1, 10, 16)};
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 1, v, sizeof v), GQ_OK);
    assert_string_equal(v, "");
}

static void never_evicts_nothing(void **state)
{
    (void)state;
    gq_quota q = quota("q", 16, GQ_PREEMPT_NEVER);
    gq_queue_entry e = preemptor(8, Q0, 1);
    gq_preempt_pod pods[] = {pod("a", 1, 10, 16)};
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 1, v, sizeof v), GQ_ENOTFOUND);
}

/* Lowest priority first, then the most recently admitted. */
static void lowest_priority_then_newest_first(void **state)
{
    (void)state;
    gq_quota q = quota("q", 40, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(16, Q0, 1);
    gq_preempt_pod pods[] = {pod("old-low", 1, 10, 8), pod("high", 5, 5, 16),
                             pod("new-low", 1, 20, 8), pod("equal", 10, 1, 8)};
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 4, v, sizeof v), GQ_OK);
    assert_string_equal(v, "new-low,old-low");
}

/* Taking in order overshoots; the set is then made minimal. */
static void victims_not_needed_are_given_back(void **state)
{
    (void)state;
    gq_quota q = quota("q", 24, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(16, Q0, 1);
    gq_preempt_pod pods[] = {pod("small", 1, 10, 8), pod("big", 2, 10, 16)};
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 2, v, sizeof v), GQ_OK);
    assert_string_equal(v, "big");
}

static void equal_priority_only_when_newer_and_allowed(void **state)
{
    (void)state;
    gq_quota q = quota("q", 16, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(8, Q0, 1);
    gq_preempt_pod pods[] = {pod("older", 10, 100, 8), pod("newer", 10, 900, 8)};
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 2, v, sizeof v), GQ_ENOTFOUND);
    q.within_quota = GQ_PREEMPT_LOWER_OR_NEWER;
    assert_int_equal(run(&e, 1, &q, 1, pods, 2, v, sizeof v), GQ_OK);
    assert_string_equal(v, "newer");
}

/* A group is a victim whole; a spared member keeps its whole group. */
static void groups_go_whole_or_not_at_all(void **state)
{
    (void)state;
    gq_quota q = quota("q", 24, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(8, Q0, 1);
    gq_preempt_pod pods[] = {pod("g-0", 1, 30, 8), pod("alone", 2, 10, 8), pod("g-1", 1, 31, 8)};
    pods[0].group = pods[2].group = "ns/g";
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 3, v, sizeof v), GQ_OK);
    assert_string_equal(v, "g-0,g-1");
    pods[2].spared = true;
    assert_int_equal(run(&e, 1, &q, 1, pods, 3, v, sizeof v), GQ_OK);
    assert_string_equal(v, "alone");
    pods[1].spared = true;
    assert_int_equal(run(&e, 1, &q, 1, pods, 3, v, sizeof v), GQ_ENOTFOUND);
}

/* A second quota that blocks and never preempts: nothing is evicted even
 * where the first would allow it. A pod counting only in a quota that
 * does not block is no candidate. */
static void other_quota_blocking_stops_everything(void **state)
{
    (void)state;
    gq_quota qq[2] = {quota("ns-quota", 16, GQ_PREEMPT_LOWER_PRIORITY),
                      quota("tenant", 16, GQ_PREEMPT_NEVER)};
    gq_queue_entry e = preemptor(8, Q01, 2);
    gq_preempt_pod pods[] = {pod("a", 1, 10, 16)};
    pods[0].quotas = Q01;
    pods[0].n_quotas = 2;
    char v[256];
    assert_int_equal(run(&e, 1, qq, 2, pods, 1, v, sizeof v), GQ_ENOTFOUND);
    /* The tenant has room: only ns-quota blocks, and a frees it. */
    qq[1].hard.v[GQ_KEY_GPU_MEMORY] = 64 * GI;
    assert_int_equal(run(&e, 1, qq, 2, pods, 1, v, sizeof v), GQ_OK);
    assert_string_equal(v, "a");
    /* A pod of another quota only frees nothing the preemptor needs. */
    gq_preempt_pod other[] = {pod("elsewhere", 1, 10, 8), pod("here", 1, 10, 16)};
    other[0].quotas = Q1;
    assert_int_equal(run(&e, 1, qq, 2, other, 2, v, sizeof v), GQ_OK);
    assert_string_equal(v, "here");
}

/* e[0..2): a group of two 8Gi members of quota 0, named g. */
static void group_of_two(gq_queue_entry e[2], const char *g)
{
    e[0] = e[1] = preemptor(8, Q0, 1);
    e[0].group = e[1].group = g;
    e[0].group_size = e[1].group_size = 2;
}

/* A group preemptor needs room for all its members. */
static void group_preemptor_needs_room_for_all(void **state)
{
    (void)state;
    gq_quota q = quota("q", 32, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e[2];
    group_of_two(e, "ns/train");
    gq_preempt_pod pods[] = {pod("a", 1, 10, 8), pod("b", 1, 20, 8), pod("c", 1, 30, 8),
                             pod("d", 1, 40, 8)};
    char v[256];
    assert_int_equal(run(e, 2, &q, 1, pods, 4, v, sizeof v), GQ_OK);
    assert_string_equal(v, "d,c");
}

/* A group preempts as each of its members: one high member does not let
 * a low one evict pods of a priority between theirs. */
static void group_preempts_as_its_lowest_member(void **state)
{
    (void)state;
    gq_quota q = quota("q", 16, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e[2];
    group_of_two(e, "ns/mixed");
    e[0].priority = 1000;
    e[1].priority = 1;
    gq_preempt_pod pods[] = {pod("mid-a", 500, 10, 8), pod("mid-b", 500, 20, 8)};
    char v[256];
    assert_int_equal(run(e, 2, &q, 1, pods, 2, v, sizeof v), GQ_ENOTFOUND);
    assert_string_equal(v, "");
    /* Below both members: evicted. */
    pods[0].priority = pods[1].priority = 0;
    assert_int_equal(run(e, 2, &q, 1, pods, 2, v, sizeof v), GQ_OK);
    assert_string_equal(v, "mid-b,mid-a");
    /* Equal and newer than the low member, but not newer than every member
     * of that priority: LowerOrNewerEqualPriority spares it. */
    q.within_quota = GQ_PREEMPT_LOWER_OR_NEWER;
    pods[0].priority = pods[1].priority = 1;
    e[0].priority = 1;
    e[0].created_us = 15;
    e[1].created_us = 25;
    assert_int_equal(run(e, 2, &q, 1, pods, 2, v, sizeof v), GQ_ENOTFOUND);
    e[1].created_us = 5;
    pods[0].created_us = 30;
    assert_int_equal(run(e, 2, &q, 1, pods, 2, v, sizeof v), GQ_OK);
    assert_string_equal(v, "mid-b,mid-a");
}

/* Per-model limits: a victim of another model frees nothing there. */
static void model_limits_count(void **state)
{
    (void)state;
    gq_quota q = quota("q", 100, GQ_PREEMPT_LOWER_PRIORITY);
    gq_model_limit ml;
    memset(&ml, 0, sizeof(ml));
    ml.name = "a100-80gb";
    ml.hard.set[GQ_KEY_GPU_MEMORY] = true;
    ml.hard.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    q.models = &ml;
    q.n_models = 1;
    gq_queue_entry e = preemptor(8, Q0, 1);
    e.model = "a100-80gb";
    gq_preempt_pod pods[] = {pod("t4", 1, 50, 8), pod("a100", 2, 10, 16)};
    pods[0].model = "t4";
    pods[1].model = "a100-80gb";
    gq_queue_quota pq = {.q = &q, .in_use = mem(24), .model_in_use = {mem(16)}};
    char v[256];
    assert_int_equal(plan_on(&e, 1, &pq, 1, pods, 2, v, sizeof v), GQ_OK);
    assert_string_equal(v, "a100");
}

/* A pod already leaving is room for the preemptor and no candidate; the
 * room of pods leaving that a held preemptor took already (what is left in
 * gq_queue_quota.leaving) is not the next preemptor's: it seeks victims of
 * its own. */
static void leaving_pods_are_room_not_victims(void **state)
{
    (void)state;
    gq_quota q = quota("q", 24, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(16, Q0, 1);
    gq_preempt_pod pods[] = {pod("going", 1, 50, 8), pod("a", 1, 10, 8), pod("b", 1, 20, 8)};
    pods[0].leaving = true;
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, pods, 3, v, sizeof v), GQ_OK);
    assert_string_equal(v, "b");
    pods[1].leaving = true;
    assert_int_equal(run(&e, 1, &q, 1, pods, 3, v, sizeof v), GQ_OK);
    assert_string_equal(v, "");
    pods[1].leaving = false;
    e.charge = mem(8);
    gq_queue_quota pq = {.q = &q, .in_use = mem(24)};
    gq_queue_quota_leaving(&pq, &pods[0].charge, NULL);
    assert_int_equal(plan_on(&e, 1, &pq, 1, pods, 3, v, sizeof v), GQ_OK);
    assert_string_equal(v, ""); /* going makes the room */
    pq.leaving = mem(0);        /* a hold took it */
    assert_int_equal(plan_on(&e, 1, &pq, 1, pods, 3, v, sizeof v), GQ_OK);
    assert_string_equal(v, "b");
}

/* Quotas pq[0..nq) of cohort co (pq[0] the lender's), and the pods
 * admitted in them. */
typedef struct cohort_world {
    gq_queue_quota *pq;
    size_t nq;
    gq_queue_cohort *co;
    const gq_preempt_pod *pods;
    size_t n;
} cohort_world;

/* The lender's preemptor e reclaims under policy in w: want, and victims
 * (uids, comma-joined). */
static void assert_reclaim_in(const gq_queue_entry *e, const cohort_world *w,
                              gq_reclaim_policy policy, gq_code want, const char *victims)
{
    size_t v[8], nv = 0;
    gq_err err;
    gq_err_clear(&err);
    assert_true(w->n <= 8);
    gq_preempt_ask ask = {.members = e,
                          .n_members = 1,
                          .quotas = w->pq,
                          .nq = w->nq,
                          .pods = w->pods,
                          .n_pods = w->n,
                          .reclaim = policy,
                          .cohort = w->co};
    assert_int_equal(gq_preempt_plan(&ask, v, &nv, &err), want);
    char got[128] = "";
    for (size_t k = 0; k < nv; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", k ? "," : "",
                 w->pods[v[k]].uid);
    assert_string_equal(got, victims);
}

/* The lender's preemptor e reclaims under policy from the four pods of a
 * borrower (pq[1]) in cohort co: want, and victims. */
static void assert_reclaim(const gq_queue_entry *e, gq_queue_quota pq[2], gq_queue_cohort *co,
                           const gq_preempt_pod pods[4], gq_reclaim_policy policy, gq_code want,
                           const char *victims)
{
    cohort_world w = {pq, 2, co, pods, 4};
    assert_reclaim_in(e, &w, policy, want, victims);
}

/* Reclaim: a lender within its share, its cohort lent to a borrower,
 * takes back what borrowers hold - borrowers only, newest first - as its
 * reclaimWithinCohort allows; a borrowing group as its highest member. */
static void reclaim_takes_back_from_borrowers(void **state)
{
    (void)state;
    gq_quota lender = quota("lender", 16, GQ_PREEMPT_NEVER),
             borrower = quota("borrower", 16, GQ_PREEMPT_NEVER);
    borrower.borrowing_limit.set[GQ_KEY_GPU_MEMORY] = true;
    borrower.borrowing_limit.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    /* The borrower uses 32Gi of its 16: the cohort has nothing free. */
    gq_queue_cohort co = {.free = mem(0)};
    gq_queue_quota pq[2] = {{.q = &lender, .in_use = mem(0), .cohort = &co},
                            {.q = &borrower, .in_use = mem(32), .cohort = &co}};
    gq_queue_entry e = preemptor(8, Q0, 1);
    gq_preempt_pod pods[] = {pod("own-1", 1, 5, 8), pod("own-2", 1, 30, 8), pod("lent-1", 1, 10, 8),
                             pod("lent-2", 1, 20, 8)};
    for (size_t i = 0; i < 4; i++) {
        pods[i].quotas = Q1;
        pods[i].cohort = &co;
        pods[i].borrowing = i >= 2;
    }
    static const struct {
        gq_reclaim_policy policy;
        int32_t borrower_priority;
        gq_code want;
        const char *victims;
    } t[] = {
        {GQ_RECLAIM_NEVER, 1, GQ_ENOTFOUND, ""},
        {GQ_RECLAIM_LOWER_PRIORITY, 1, GQ_OK, "lent-2"},
        {GQ_RECLAIM_LOWER_PRIORITY, 50, GQ_ENOTFOUND, ""},
        {GQ_RECLAIM_ANY, 50, GQ_OK, "lent-2"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        for (size_t k = 2; k < 4; k++)
            pods[k].priority = t[i].borrower_priority;
        assert_reclaim(&e, pq, &co, pods, t[i].policy, t[i].want, t[i].victims);
    }
    /* A borrowing group is worth its highest member: one member above the
     * preemptor shields it under LowerPriority (reclaimed whole or not at
     * all); under Any it is reclaimed whole, whatever its members' priorities. */
    e.priority = 100;
    pods[2].priority = 1;
    pods[3].priority = 1000;
    pods[2].group = pods[3].group = "ns/lent";
    assert_reclaim(&e, pq, &co, pods, GQ_RECLAIM_LOWER_PRIORITY, GQ_ENOTFOUND, "");
    assert_reclaim(&e, pq, &co, pods, GQ_RECLAIM_ANY, GQ_OK, "lent-1,lent-2");
}

/* A pod marked borrowing whose quota went back within its share (the
 * pods admitted within it ended) borrows nothing: it is no reclaim victim,
 * whatever its priority and age, and a borrower still above its share is
 * reclaimed instead - at most down to its share. */
static void reclaim_spares_marks_of_members_within_share(void **state)
{
    (void)state;
    static const size_t Q2[] = {2};
    gq_quota l = quota("l", 16, GQ_PREEMPT_NEVER), a = quota("a", 16, GQ_PREEMPT_NEVER),
             c = quota("c", 16, GQ_PREEMPT_NEVER);
    a.borrowing_limit.set[GQ_KEY_GPU_MEMORY] = c.borrowing_limit.set[GQ_KEY_GPU_MEMORY] = true;
    a.borrowing_limit.v[GQ_KEY_GPU_MEMORY] = c.borrowing_limit.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    /* L lends 16, A 8 (it uses 8 of 16), C uses 16 above its 16: 8 free. */
    gq_queue_cohort co = {.free = mem(8)};
    gq_queue_quota pq[3] = {{.q = &l, .in_use = mem(0), .cohort = &co},
                            {.q = &a, .in_use = mem(8), .cohort = &co},
                            {.q = &c, .in_use = mem(32), .cohort = &co}};
    gq_preempt_pod pods[] = {pod("a-stale", 1, 40, 8), pod("c-own", 5, 1, 16),
                             pod("c-lent-1", 5, 10, 8), pod("c-lent-2", 5, 20, 8)};
    pods[0].quotas = Q1;
    for (size_t i = 1; i < 4; i++)
        pods[i].quotas = Q2;
    for (size_t i = 0; i < 4; i++) {
        pods[i].cohort = &co;
        pods[i].borrowing = i != 1;
    }
    gq_queue_entry e = preemptor(16, Q0, 1);
    cohort_world w = {pq, 3, &co, pods, 4};
    assert_reclaim_in(&e, &w, GQ_RECLAIM_ANY, GQ_OK, "c-lent-2");
    /* With no marked pod of C left (C's pods above its share unmarked, as
     * a pod admitted when its hard was larger), A's stale mark still buys
     * nothing: nobody is evicted. */
    co.free = mem(0);
    pq[1].in_use = mem(16);
    pods[0].charge = mem(16);
    pods[2].borrowing = pods[3].borrowing = false;
    assert_reclaim_in(&e, &w, GQ_RECLAIM_ANY, GQ_ENOTFOUND, "");
}

/* A group with one member admitted within its quota's share and one above
 * it (a replacement member admitted while the quota borrowed) is a borrower
 * whole: the unmarked member does not shield it. */
static void reclaim_takes_a_group_with_one_member_marked(void **state)
{
    (void)state;
    static const size_t Q2[] = {2};
    gq_quota l = quota("l", 16, GQ_PREEMPT_NEVER), a = quota("a", 16, GQ_PREEMPT_NEVER),
             c = quota("c", 16, GQ_PREEMPT_NEVER);
    c.borrowing_limit.set[GQ_KEY_GPU_MEMORY] = true;
    c.borrowing_limit.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    /* L lends 16, A nothing (it uses its 16), C uses 16 above its 16. */
    gq_queue_cohort co = {.free = mem(0)};
    gq_queue_quota pq[3] = {{.q = &l, .in_use = mem(0), .cohort = &co},
                            {.q = &a, .in_use = mem(16), .cohort = &co},
                            {.q = &c, .in_use = mem(32), .cohort = &co}};
    gq_preempt_pod pods[] = {pod("c-solo", 1, 30, 16), pod("c-g1", 1, 10, 8),
                             pod("c-g2", 1, 20, 8)};
    for (size_t i = 0; i < 3; i++) {
        pods[i].quotas = Q2;
        pods[i].cohort = &co;
    }
    pods[1].group = pods[2].group = "c/g";
    pods[2].borrowing = true; /* the replacement, admitted above the share */
    gq_queue_entry e = preemptor(16, Q0, 1);
    cohort_world w = {pq, 3, &co, pods, 3};
    assert_reclaim_in(&e, &w, GQ_RECLAIM_ANY, GQ_OK, "c-g1,c-g2");
    /* Under LowerPriority the group is worth its highest member, marked or
     * not: an unmarked member above the preemptor shields it. */
    pods[1].priority = 50;
    assert_reclaim_in(&e, &w, GQ_RECLAIM_LOWER_PRIORITY, GQ_ENOTFOUND, "");
    pods[1].priority = 1;
    assert_reclaim_in(&e, &w, GQ_RECLAIM_LOWER_PRIORITY, GQ_OK, "c-g1,c-g2");
}

static void bad_index_is_refused(void **state)
{
    (void)state;
    gq_quota q = quota("q", 8, GQ_PREEMPT_LOWER_PRIORITY);
    gq_queue_entry e = preemptor(8, Q1, 1);
    char v[256];
    assert_int_equal(run(&e, 1, &q, 1, NULL, 0, v, sizeof v), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fits_already_evicts_nothing),
        cmocka_unit_test(never_evicts_nothing),
        cmocka_unit_test(lowest_priority_then_newest_first),
        cmocka_unit_test(victims_not_needed_are_given_back),
        cmocka_unit_test(equal_priority_only_when_newer_and_allowed),
        cmocka_unit_test(groups_go_whole_or_not_at_all),
        cmocka_unit_test(other_quota_blocking_stops_everything),
        cmocka_unit_test(group_preemptor_needs_room_for_all),
        cmocka_unit_test(group_preempts_as_its_lowest_member),
        cmocka_unit_test(model_limits_count),
        cmocka_unit_test(leaving_pods_are_room_not_victims),
        cmocka_unit_test(reclaim_takes_back_from_borrowers),
        cmocka_unit_test(reclaim_spares_marks_of_members_within_share),
        cmocka_unit_test(reclaim_takes_a_group_with_one_member_marked),
        cmocka_unit_test(bad_index_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
