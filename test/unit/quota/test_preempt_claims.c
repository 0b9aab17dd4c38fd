/* Preemption and reclaim of pods that share a DRA ResourceClaim
 * (quota/preempt.h): the pods naming one claim are one candidate, evicted
 * whole, freeing the claim once; with pod groups the union goes together;
 * a leaving pod frees a claim only when no pod staying names it. Amounts
 * are GiB of gpu-memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "quota/preempt.h"
#include "support/queue_fixtures.h"

static const size_t Q0[] = {0}, Q1[] = {1};

static gq_amounts mem(int64_t gib)
{
    return queue_mem(gib);
}

/* A claim of gib GiB on one GPU. */
static gq_shared_claim claim(const char *uid, int64_t gib)
{
    gq_shared_claim c;
    memset(&c, 0, sizeof(c));
    snprintf(c.uid, sizeof c.uid, "%s", uid);
    snprintf(c.name, sizeof c.name, "%s", uid);
    c.gpus = 0;
    c.memory = gib * GI;
    return c;
}

/* An admitted pod of quota 0 whose own part is own_gib, naming claim c
 * (NULL: none): its charge is both. */
static gq_preempt_pod pod(const char *uid, int32_t prio, int64_t admitted, int64_t own_gib,
                          const gq_shared_claim *c)
{
    gq_amounts charge = mem(own_gib);
    if (c)
        charge.v[GQ_KEY_GPU_MEMORY] += c->memory;
    charge.v[GQ_KEY_GPU_PODS] = 1;
    return (gq_preempt_pod){.uid = uid,
                            .priority = prio,
                            .created_us = admitted,
                            .admitted_us = admitted,
                            .charge = charge,
                            .quotas = Q0,
                            .n_quotas = 1,
                            .claims = c,
                            .n_claims = c ? 1 : 0};
}

static gq_queue_entry preemptor(int64_t gib, const size_t *qs)
{
    return (gq_queue_entry){.uid = "new",
                            .priority = 10,
                            .created_us = 500,
                            .charge = mem(gib),
                            .quotas = qs,
                            .n_quotas = 1};
}

/* Plan ask and check its code and victims (uids, comma-joined, in
 * eviction order). */
static void expect(const gq_preempt_ask *ask, gq_code want, const char *victims)
{
    size_t v[16], nv = 99;
    char got[128] = "";
    gq_err err;
    gq_err_clear(&err);
    assert_true(ask->n_pods <= 16);
    assert_int_equal(gq_preempt_plan(ask, v, &nv, &err), want);
    for (size_t i = 0; i < nv; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "",
                 ask->pods[v[i]].uid);
    assert_string_equal(got, victims);
}

/* The ask of preemptor e against the one quota pq, for pods[0..n). */
static gq_preempt_ask within(const gq_queue_entry *e, const gq_queue_quota *pq,
                             const gq_preempt_pod *pods, size_t n)
{
    return (gq_preempt_ask){
        .members = e, .n_members = 1, .quotas = pq, .nq = 1, .pods = pods, .n_pods = n};
}

/* One plan of a table: the preemptor asking gib, and what it gets. */
typedef struct step {
    int64_t gib;
    gq_code want;
    const char *victims;
} step;

/* Plan ask for each step of t[0..n), the preemptor e asking its gib. */
static void steps(const gq_preempt_ask *ask, gq_queue_entry *e, const step *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e->charge = mem(t[i].gib);
        expect(ask, t[i].want, t[i].victims);
    }
}

/* pq[0..2): lender l and borrower b of cohort co, nothing in use; b may
 * borrow limit_gib. */
static void lend_to(gq_queue_quota pq[2], gq_queue_cohort *co, gq_quota *l, gq_quota *b,
                    int64_t limit_gib)
{
    b->borrowing_limit.set[GQ_KEY_GPU_MEMORY] = true;
    b->borrowing_limit.v[GQ_KEY_GPU_MEMORY] = limit_gib * GI;
    pq[0] = (gq_queue_quota){.q = l, .in_use = mem(0), .cohort = co};
    pq[1] = (gq_queue_quota){.q = b, .in_use = mem(0), .cohort = co};
}

/* Within a quota: two pods naming one 8Gi claim hold 8Gi together, not 16;
 * evicting one frees nothing while the other holds the claim. They are one
 * candidate, freeing the claim once: a pod of its own is needed too. */
static void sharers_are_one_candidate_freeing_the_claim_once(void **state)
{
    (void)state;
    gq_quota q = queue_quota_mem("q", 16, GQ_PREEMPT_LOWER_PRIORITY);
    gq_shared_claim x = claim("x", 8);
    gq_preempt_pod pods[] = {pod("solo", 1, 10, 8, NULL), pod("x-1", 1, 20, 0, &x),
                             pod("x-2", 1, 30, 0, &x)};
    /* In use: solo 8 + the claim once 8 (each sharer's own part is 0). */
    gq_queue_quota pq = {.q = &q, .in_use = mem(16)};
    gq_queue_entry e = preemptor(8, Q0);
    gq_preempt_ask ask = within(&e, &pq, pods, 3);
    /* The sharers are the newest: taken first, both, and enough for 8;
     * for 16 solo goes too, the claim counting once. */
    static const step all[] = {{8, GQ_OK, "x-1,x-2"}, {16, GQ_OK, "x-1,x-2,solo"}};
    steps(&ask, &e, all, 2);
    /* A sharer above the preemptor shields the other: solo alone, and when
     * solo is not enough, nothing frees the claim. */
    pods[2].priority = 50;
    static const step shielded[] = {{8, GQ_OK, "solo"}, {16, GQ_ENOTFOUND, ""}};
    steps(&ask, &e, shielded, 2);
}

/* A claim shared by a group member and a pod alone, and another claim by
 * that pod and a second group: all go together, or none does. */
static void sharers_and_groups_go_as_one_union(void **state)
{
    (void)state;
    gq_quota q = queue_quota_mem("q", 32, GQ_PREEMPT_LOWER_PRIORITY);
    gq_shared_claim x = claim("x", 8), y = claim("y", 8);
    gq_shared_claim xy[] = {x, y};
    gq_preempt_pod pods[] = {pod("g-1", 1, 10, 4, NULL),    pod("g-2", 1, 11, 0, &x),
                             pod("bridge", 1, 12, 0, NULL), pod("h-1", 1, 13, 0, &y),
                             pod("h-2", 1, 14, 4, NULL),    pod("other", 2, 1, 8, NULL)};
    pods[0].group = pods[1].group = "ns/g";
    pods[3].group = pods[4].group = "ns/h";
    pods[2].claims = xy;
    pods[2].n_claims = 2;
    pods[2].charge.v[GQ_KEY_GPU_MEMORY] = 16 * GI;
    /* In use: g 4 + x 8 + y 8 + h 4 + other 8 = 32. */
    gq_queue_quota pq = {.q = &q, .in_use = mem(32)};
    gq_queue_entry e = preemptor(24, Q0);
    gq_preempt_ask ask = within(&e, &pq, pods, 6);
    /* The union frees 24 (each claim once): enough for 24, all five go;
     * for 32 other too. */
    static const step all[] = {{24, GQ_OK, "g-1,g-2,bridge,h-1,h-2"},
                               {32, GQ_OK, "g-1,g-2,bridge,h-1,h-2,other"}};
    steps(&ask, &e, all, 2);
    /* One member spared (a budget): no member of the union is a victim. */
    pods[4].spared = true;
    static const step spared[] = {{8, GQ_OK, "other"}, {16, GQ_ENOTFOUND, ""}};
    steps(&ask, &e, spared, 2);
}

/* Reclaim: p1 (marked) and p2 (unmarked) share the borrowed claim; the
 * lender gets its room only by evicting both, and p2 is reclaimed with p1
 * as one borrower. */
static void reclaim_takes_every_pod_naming_a_borrowed_claim(void **state)
{
    (void)state;
    /* The borrower: its own 16 within hard, and the 16Gi claim above. */
    gq_quota lender = queue_quota_mem("lender", 16, GQ_PREEMPT_NEVER),
             borrower = queue_quota_mem("borrower", 16, GQ_PREEMPT_NEVER);
    gq_queue_cohort co = {.free = mem(0)};
    gq_queue_quota pq[2];
    lend_to(pq, &co, &lender, &borrower, 16);
    pq[1].in_use = mem(32);
    gq_shared_claim x = claim("x", 16);
    gq_preempt_pod pods[] = {pod("own", 1, 5, 16, NULL), pod("p1", 1, 10, 0, &x),
                             pod("p2", 1, 20, 0, &x)};
    for (size_t i = 0; i < 3; i++) {
        pods[i].quotas = Q1;
        pods[i].cohort = &co;
    }
    pods[1].borrowing = true;
    gq_queue_entry e = preemptor(16, Q0);
    gq_preempt_ask ask = within(&e, pq, pods, 3);
    ask.nq = 2;
    ask.reclaim = GQ_RECLAIM_ANY;
    ask.cohort = &co;
    expect(&ask, GQ_OK, "p1,p2");
    /* Two marked sharers free the claim once: 16 needed from a 16Gi claim
     * and an 8Gi borrower means both go, not the two sharers alone as if
     * they freed 32. */
    pods[2].borrowing = true;
    pods[0] = pod("lent", 1, 1, 8, NULL);
    pods[0].quotas = Q1;
    pods[0].cohort = &co;
    pods[0].borrowing = true;
    pq[1].in_use = mem(24 + 16);
    borrower.hard.v[GQ_KEY_GPU_MEMORY] = 8 * GI;
    borrower.borrowing_limit.v[GQ_KEY_GPU_MEMORY] = 32 * GI;
    e.charge = mem(16);
    lender.hard.v[GQ_KEY_GPU_MEMORY] = 32 * GI;
    pq[0].in_use = mem(16);
    expect(&ask, GQ_OK, "p1,p2");
    e.charge = mem(24);
    lender.hard.v[GQ_KEY_GPU_MEMORY] = 40 * GI;
    expect(&ask, GQ_OK, "p1,p2,lent");
}

/* A pod leaving frees its own part now, and a claim only when no pod that
 * stays names it (and once, however many leaving pods name it); a sharer
 * that stays is then a candidate alone, freeing the claim. */
static void leaving_sharers_free_a_claim_once_and_only_when_none_stays(void **state)
{
    (void)state;
    gq_quota q = queue_quota_mem("q", 24, GQ_PREEMPT_LOWER_PRIORITY);
    gq_shared_claim x = claim("x", 8);
    gq_preempt_pod pods[] = {pod("going-1", 1, 10, 2, &x), pod("going-2", 1, 11, 2, &x),
                             pod("stays", 1, 12, 2, &x)};
    pods[0].leaving = pods[1].leaving = true;
    gq_queue_quota pq = {.q = &q, .in_use = mem(14)};
    assert_int_equal(gq_preempt_leaving(pods, 3, &pq, 1, 0), GQ_OK);
    assert_int_equal(pq.leaving.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    /* The sharer that stays goes alone and frees the claim with its part. */
    gq_queue_entry e = preemptor(18, Q0);
    gq_preempt_ask ask = within(&e, &pq, pods, 3);
    expect(&ask, GQ_OK, "stays");
    /* All three leaving: the claim is room once. */
    pods[2].leaving = true;
    memset(&pq.leaving, 0, sizeof pq.leaving);
    assert_int_equal(gq_preempt_leaving(pods, 3, &pq, 1, 0), GQ_OK);
    assert_int_equal(pq.leaving.v[GQ_KEY_GPU_MEMORY], 14 * GI);
    /* Quotas below from are left alone; a bad index is refused. */
    memset(&pq.leaving, 0, sizeof pq.leaving);
    assert_int_equal(gq_preempt_leaving(pods, 3, &pq, 1, 1), GQ_OK);
    assert_int_equal(pq.leaving.v[GQ_KEY_GPU_MEMORY], 0);
    pods[0].quotas = Q1;
    assert_int_equal(gq_preempt_leaving(pods, 3, &pq, 1, 0), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sharers_are_one_candidate_freeing_the_claim_once),
        cmocka_unit_test(sharers_and_groups_go_as_one_union),
        cmocka_unit_test(reclaim_takes_every_pod_naming_a_borrowed_claim),
        cmocka_unit_test(leaving_sharers_free_a_claim_once_and_only_when_none_stays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
