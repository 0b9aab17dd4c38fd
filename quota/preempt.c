#include "quota/preempt.h"

#include <stdlib.h>
#include <string.h>

/* A candidate: one pod, or every member of one group. */
typedef struct cand {
    size_t first; /* index in the working order of pods (byg) */
    size_t len;
    int32_t priority;    /* the highest of its members */
    int64_t admitted_us; /* the latest of its members */
    const char *key;     /* uid, or group key */
    bool group;
    bool ok;     /* a candidate under every blocking quota */
    bool within; /* every member a candidate under withinQuota alone */
    /* A borrower the preemptor reclaims: some member marked as borrowing
     * from its cohort (a group is evicted whole, so a member admitted
     * within the share shields none admitted above it), and every member
     * movable. Taken first, and only while it still borrows. */
    bool borrow;
    bool movable;
} cand;

typedef struct work {
    const gq_preempt_ask *ask;
    gq_queue_quota *q;        /* copies whose in_use the victims lower */
    gq_queue_cohort *cohorts; /* copies of their cohorts, q[i].cohort pointing here */
    bool *blocking;           /* by quota */
    size_t *byg;              /* pod indices, groups together */
    cand *c;
    size_t nc;
    size_t *taken; /* candidate indices, in the order taken */
    size_t n_taken;
    bool reclaim_blocked; /* a blocking quota may be relieved by reclaim */
} work;

static void work_free(work *w)
{
    free(w->q);
    free(w->cohorts);
    free(w->blocking);
    free(w->byg);
    free(w->c);
    free(w->taken);
}

/* Whether the preemptor fits every quota it charges in w->q; *out. */
static gq_code all_fit(const work *w, bool *out)
{
    const gq_preempt_ask *a = w->ask;
    *out = true;
    for (size_t m = 0; m < a->n_members && *out; m++)
        for (size_t j = 0; j < a->members[m].n_quotas && *out; j++) {
            gq_code rc = gq_queue_unit_fits(a->members, a->n_members, a->option, w->q,
                                            a->members[m].quotas[j], out);
            if (rc)
                return rc;
        }
    return GQ_OK;
}

static void amounts_move(gq_amounts *to, const gq_amounts *a, int sign)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t d = sign * a->v[k];
        if (__builtin_add_overflow(to->v[k], d, &to->v[k]))
            to->v[k] = sign > 0 ? INT64_MAX : 0;
    }
}

/* in_use less the room pods leaving will free, never below 0. */
static void amounts_less_leaving(gq_amounts *in_use, const gq_amounts *leaving)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t l = leaving->v[k] > 0 ? leaving->v[k] : 0;
        in_use->v[k] = l < in_use->v[k] ? in_use->v[k] - l : 0;
    }
}

/* Take a pod's charge out of the quotas it counts in (sign -1), or put it
 * back (+1): spec.hard's use (and its cohort's free capacity), and that of
 * every model limit it counts against (its model's, or every one when it
 * has none). */
static void pod_move(work *w, const gq_preempt_pod *p, int sign)
{
    for (size_t j = 0; j < p->n_quotas; j++) {
        gq_queue_quota *pq = &w->q[p->quotas[j]];
        gq_queue_quota_move(pq, &p->charge, sign);
        for (size_t mi = 0; mi < pq->q->n_models && mi < GQ_CRD_MAX_QUOTA_MODELS; mi++)
            if (!p->model || !strcmp(p->model, pq->q->models[mi].name))
                amounts_move(&pq->model_in_use[mi], &p->charge, sign);
    }
}

static void cand_move(work *w, const cand *c, int sign)
{
    for (size_t i = 0; i < c->len; i++)
        pod_move(w, &w->ask->pods[w->byg[c->first + i]], sign);
}

/* Whether pod p may be evicted for member m under policy. */
static bool member_allows(gq_preempt_policy policy, const gq_queue_entry *m,
                          const gq_preempt_pod *p)
{
    switch (policy) {
    case GQ_PREEMPT_LOWER_PRIORITY:
        return p->priority < m->priority;
    case GQ_PREEMPT_LOWER_OR_NEWER:
        return p->priority < m->priority ||
               (p->priority == m->priority && p->created_us > m->created_us);
    case GQ_PREEMPT_NEVER:
    default:
        return false;
    }
}

/* Whether pod p may be evicted for the preemptor under policy: for every
 * member of it. A group stands in line at its first (highest) member's
 * place, but the room it takes is every member's: were it to preempt at
 * its leader's priority, one high member would let low ones evict pods of
 * a priority above theirs. */
static bool allows(gq_preempt_policy policy, const gq_preempt_ask *a, const gq_preempt_pod *p)
{
    for (size_t m = 0; m < a->n_members; m++)
        if (!member_allows(policy, &a->members[m], p))
            return false;
    return a->n_members > 0;
}

/* Whether a blocking quota may be relieved by reclaim: the preemptor's own
 * (its cohort's) or a GPUTenantQuota, while the preemptor reclaims. */
static bool reclaims_in(const work *w, size_t qi)
{
    const gq_preempt_ask *a = w->ask;
    const gq_queue_quota *pq = &a->quotas[qi];
    return a->reclaim != GQ_RECLAIM_NEVER && a->cohort &&
           (pq->cohort == a->cohort || pq->q->kind == GQ_QUOTA_TENANT);
}

/* Whether p, as a reclaim victim, is below the preemptor: under Any
 * always; under LowerPriority below every member. */
static bool reclaim_lower(const work *w, const gq_preempt_pod *p)
{
    const gq_preempt_ask *a = w->ask;
    if (a->reclaim == GQ_RECLAIM_ANY)
        return true;
    for (size_t m = 0; m < a->n_members; m++)
        if (p->priority >= a->members[m].priority)
            return false;
    return a->n_members > 0;
}

/* Whether p is marked as having borrowed from the preemptor's cohort. */
static bool marked_in_cohort(const work *w, const gq_preempt_pod *p)
{
    const gq_preempt_ask *a = w->ask;
    /* A pod borrowed in the cohort of the quota it charges first, or, where
     * that cohort's tenant borrows in a cohort of tenants, in that one. */
    bool same = p->cohort &&
                (p->cohort == a->cohort || (p->cohort->up && p->cohort->up->cohort == a->cohort));
    return p->borrowing && a->cohort && same && a->reclaim != GQ_RECLAIM_NEVER;
}

/* Whether p may go with its group as a reclaim victim: not spared nor
 * leaving, and below the preemptor as the policy asks. A borrowing group
 * is worth its highest member, marked or not. */
static bool movable(const work *w, const gq_preempt_pod *p)
{
    return !p->spared && !p->leaving && reclaim_lower(w, p);
}

/* Whether marked pod p still borrows: a quota it counts in that is a
 * member of the preemptor's cohort is above hard, as the victims taken so
 * far leave it, on a key p charges. The mark says only that p was admitted
 * above hard; pods within the share that end leave marked pods within it,
 * and those borrow nothing (Kueue reclaims only from a ClusterQueue that
 * borrows, as far as it does). */
static bool still_borrows(const work *w, const gq_preempt_pod *p)
{
    for (size_t j = 0; marked_in_cohort(w, p) && j < p->n_quotas; j++) {
        size_t qi = p->quotas[j];
        const gq_queue_quota *pq = &w->q[qi];
        if (w->ask->quotas[qi].cohort != w->ask->cohort)
            continue;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (p->charge.v[k] > 0 && pq->q->hard.set[k] && pq->in_use.v[k] > pq->q->hard.v[k])
                return true;
    }
    return false;
}

/* Whether candidate c may be taken as the victims so far leave the quotas:
 * under withinQuota, or as a borrower that still borrows (some member). */
static bool takeable(const work *w, const cand *c)
{
    if (!c->ok)
        return false;
    if (c->within)
        return true;
    for (size_t i = 0; i < c->len; i++)
        if (still_borrows(w, &w->ask->pods[w->byg[c->first + i]]))
            return true;
    return false;
}

/* Whether pod p is a candidate under withinQuota: not spared nor leaving,
 * counts in a blocking quota and every blocking quota it counts in allows. */
static bool pod_within(const work *w, const gq_preempt_pod *p)
{
    bool useful = false;
    if (p->spared || p->leaving)
        return false;
    for (size_t j = 0; j < p->n_quotas; j++) {
        if (!w->blocking[p->quotas[j]])
            continue;
        if (!allows(w->q[p->quotas[j]].q->within_quota, w->ask, p))
            return false;
        useful = true;
    }
    return useful;
}

/* The blocking quotas; GQ_ENOTFOUND when one of them never preempts (or
 * none blocks: *none). */
static gq_code find_blocking(work *w, bool *none, gq_err *err)
{
    const gq_preempt_ask *a = w->ask;
    *none = true;
    for (size_t m = 0; m < a->n_members; m++)
        for (size_t j = 0; j < a->members[m].n_quotas; j++) {
            size_t qi = a->members[m].quotas[j];
            bool fits;
            if (qi >= a->nq)
                return gq_err_set(err, GQ_EINVAL, "quota index %zu out of range", qi);
            gq_code rc = gq_queue_unit_fits(a->members, a->n_members, a->option, w->q, qi, &fits);
            if (rc)
                return gq_err_oom(err);
            if (fits || w->blocking[qi])
                continue;
            w->blocking[qi] = true;
            *none = false;
            if (reclaims_in(w, qi)) {
                w->reclaim_blocked = true;
                continue;
            }
            if (w->q[qi].q->within_quota == GQ_PREEMPT_NEVER)
                return gq_err_set(err, GQ_ENOTFOUND,
                                  "quota %s has no room and never preempts (preemption.withinQuota "
                                  "Never)",
                                  w->q[qi].q->name);
        }
    return GQ_OK;
}

/* Pod indices with each group's members together (groups by key, in pod
 * order otherwise), for qsort over an index array without a global. */
typedef struct gref {
    const gq_preempt_pod *p;
    size_t i;
} gref;

static int gref_cmp(const void *x, const void *y)
{
    const gref *a = x, *b = y;
    const char *ka = a->p->group ? a->p->group : a->p->uid,
               *kb = b->p->group ? b->p->group : b->p->uid;
    int c = strcmp(ka ? ka : "", kb ? kb : "");
    return c ? c : (a->i < b->i ? -1 : a->i > b->i);
}

static gq_code build_candidates(work *w)
{
    const gq_preempt_ask *a = w->ask;
    size_t n = a->n_pods;
    gref *g = n ? calloc(n, sizeof(*g)) : NULL;
    w->byg = n ? calloc(n, sizeof(*w->byg)) : NULL;
    w->c = n ? calloc(n, sizeof(*w->c)) : NULL;
    w->taken = n ? calloc(n, sizeof(*w->taken)) : NULL;
    if (n && (!g || !w->byg || !w->c || !w->taken)) {
        free(g);
        return GQ_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        g[i] = (gref){&a->pods[i], i};
    if (n > 1)
        qsort(g, n, sizeof(*g), gref_cmp);
    for (size_t i = 0; i < n; i++) {
        const gq_preempt_pod *p = g[i].p;
        w->byg[i] = g[i].i;
        cand *last = w->nc ? &w->c[w->nc - 1] : NULL;
        if (last && p->group && last->group && !strcmp(last->key, p->group)) {
            last->len++;
            last->priority = p->priority > last->priority ? p->priority : last->priority;
            last->admitted_us =
                p->admitted_us > last->admitted_us ? p->admitted_us : last->admitted_us;
            last->within = last->within && pod_within(w, p);
            last->borrow = last->borrow || marked_in_cohort(w, p);
            last->movable = last->movable && movable(w, p);
            continue;
        }
        w->c[w->nc++] = (cand){.first = i,
                               .len = 1,
                               .priority = p->priority,
                               .admitted_us = p->admitted_us,
                               .key = p->group ? p->group : p->uid,
                               .group = p->group != NULL,
                               .within = pod_within(w, p),
                               .borrow = marked_in_cohort(w, p),
                               .movable = movable(w, p)};
    }
    for (size_t i = 0; i < w->nc; i++) {
        cand *c = &w->c[i];
        c->borrow = c->borrow && c->movable;
        c->ok = c->within || (c->borrow && w->reclaim_blocked);
    }
    free(g);
    return GQ_OK;
}

/* Candidates' order: lowest priority first, then most recently admitted,
 * then key; over indices into w->c. */
typedef struct cref {
    const cand *c;
    size_t i;
} cref;

static int cref_cmp(const void *x, const void *y)
{
    const cand *a = ((const cref *)x)->c, *b = ((const cref *)y)->c;
    if (a->borrow != b->borrow)
        return a->borrow ? -1 : 1;
    if (a->priority != b->priority)
        return a->priority < b->priority ? -1 : 1;
    if (a->admitted_us != b->admitted_us)
        return a->admitted_us > b->admitted_us ? -1 : 1;
    return strcmp(a->key ? a->key : "", b->key ? b->key : "");
}

/* Take candidates in order until the preemptor fits; *fits. */
static gq_code take(work *w, bool *fits)
{
    cref *order = w->nc ? calloc(w->nc, sizeof(*order)) : NULL;
    if (w->nc && !order)
        return GQ_ENOMEM;
    for (size_t i = 0; i < w->nc; i++)
        order[i] = (cref){&w->c[i], i};
    if (w->nc > 1)
        qsort(order, w->nc, sizeof(*order), cref_cmp);
    gq_code rc = all_fit(w, fits);
    for (size_t i = 0; !rc && !*fits && i < w->nc; i++) {
        if (!takeable(w, order[i].c))
            continue;
        cand_move(w, order[i].c, -1);
        w->taken[w->n_taken++] = order[i].i;
        rc = all_fit(w, fits);
    }
    free(order);
    return rc;
}

/* Give back, last taken first, every victim the fit does not need. */
static gq_code minimise(work *w)
{
    for (size_t t = w->n_taken; t-- > 0;) {
        const cand *c = &w->c[w->taken[t]];
        bool fits;
        cand_move(w, c, +1);
        gq_code rc = all_fit(w, &fits);
        if (rc)
            return rc;
        if (!fits) {
            cand_move(w, c, -1);
            continue;
        }
        memmove(&w->taken[t], &w->taken[t + 1], (w->n_taken - t - 1) * sizeof(*w->taken));
        w->n_taken--;
    }
    return GQ_OK;
}

static gq_code plan(work *w, size_t *victims, size_t *n_victims, gq_err *err)
{
    bool none, fits;
    gq_code rc = find_blocking(w, &none, err);
    if (rc || none)
        return rc;
    if ((rc = build_candidates(w)) || (rc = take(w, &fits)))
        return gq_err_oom(err);
    if (!fits)
        return gq_err_set(err, GQ_ENOTFOUND,
                          "evicting every pod the preemption policy allows would not make room");
    if ((rc = minimise(w)))
        return gq_err_oom(err);
    for (size_t t = 0; t < w->n_taken; t++) {
        const cand *c = &w->c[w->taken[t]];
        for (size_t i = 0; i < c->len; i++)
            victims[(*n_victims)++] = w->byg[c->first + i];
    }
    return GQ_OK;
}

/* The plan works on copies: the quotas' cohorts too (each copied once,
 * shared by the copies of its members as by the originals). */
static gq_code copy_cohorts(work *w)
{
    size_t nq = w->ask->nq;
    if (!nq || !(w->cohorts = calloc(nq, sizeof(*w->cohorts))))
        return nq ? GQ_ENOMEM : GQ_OK;
    for (size_t i = 0; i < nq; i++) {
        const gq_queue_cohort *orig = w->ask->quotas[i].cohort;
        if (!orig)
            continue;
        size_t first = 0;
        while (w->ask->quotas[first].cohort != orig)
            first++;
        if (first == i)
            w->cohorts[i] = *orig;
        w->q[i].cohort = &w->cohorts[first];
    }
    /* A cohort's tenant quota (up) is read in the copies too. */
    for (size_t i = 0; i < nq; i++)
        for (size_t j = 0; w->cohorts[i].up && j < nq; j++)
            if (w->cohorts[i].up == &w->ask->quotas[j]) {
                w->cohorts[i].up = &w->q[j];
                break;
            }
    return GQ_OK;
}

gq_code gq_preempt_plan(const gq_preempt_ask *ask, size_t *victims, size_t *n_victims, gq_err *err)
{
    work w = {.ask = ask};
    *n_victims = 0;
    for (size_t i = 0; i < ask->n_pods; i++)
        for (size_t j = 0; j < ask->pods[i].n_quotas; j++)
            if (ask->pods[i].quotas[j] >= ask->nq)
                return gq_err_set(err, GQ_EINVAL, "quota index %zu out of range",
                                  ask->pods[i].quotas[j]);
    w.q = ask->nq ? calloc(ask->nq, sizeof(*w.q)) : NULL;
    w.blocking = ask->nq ? calloc(ask->nq, sizeof(*w.blocking)) : NULL;
    if (ask->nq && (!w.q || !w.blocking)) {
        work_free(&w);
        return gq_err_oom(err);
    }
    if (ask->nq)
        memcpy(w.q, ask->quotas, ask->nq * sizeof(*w.q));
    if (copy_cohorts(&w)) {
        work_free(&w);
        return gq_err_oom(err);
    }
    /* The room pods already leaving will free, less what held preemptors
     * have taken of it (for a quota with a cohort, what it borrows less and
     * lends more once they are gone). */
    for (size_t j = 0; j < ask->nq; j++) {
        gq_queue_quota *pq = &w.q[j];
        gq_amounts gone = pq->leaving;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            gone.v[k] = gone.v[k] < 0                 ? 0
                        : gone.v[k] < pq->in_use.v[k] ? gone.v[k]
                                                      : pq->in_use.v[k];
        gq_queue_quota_move(pq, &gone, -1);
        for (size_t mi = 0; mi < pq->q->n_models && mi < GQ_CRD_MAX_QUOTA_MODELS; mi++)
            amounts_less_leaving(&pq->model_in_use[mi], &pq->model_leaving[mi]);
    }
    gq_code rc = plan(&w, victims, n_victims, err);
    if (rc)
        *n_victims = 0;
    work_free(&w);
    return rc;
}
