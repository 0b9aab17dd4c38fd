#include "quota/preempt.h"

#include <stdlib.h>
#include <string.h>

/* A candidate: one pod, or every member of one group. */
typedef struct cand {
    size_t first; /* index in the working order of pods (byg) */
    size_t len;
    int32_t priority;    /* the highest of its members */
    int64_t admitted_us; /* the latest of its members */
    const char *key;     /* its first member's uid, or group key */
    bool ok;             /* a candidate under every blocking quota */
    bool within;         /* every member a candidate under withinQuota alone */
    /* A borrower the preemptor reclaims: some member marked as borrowing
     * from its cohort (a group is evicted whole, so a member admitted
     * within the share shields none admitted above it), and every member
     * movable. Taken first, and only while it still borrows. */
    bool borrow;
    bool movable;
    size_t cc_first; /* its claims' charges: w->cc[cc_first..+cc_len) */
    size_t cc_len;
} cand;

/* A shared claim a pod names in one quota it counts in: for what a
 * candidate frees (once per claim and quota, however many of its members
 * name it) and what pods leaving free. */
typedef struct cclaim {
    const gq_shared_claim *claim;
    size_t q;
    const char *model; /* of the pod naming it, as its charge counts */
    size_t cand;       /* the candidate (0 for pods leaving) */
    size_t seq;        /* order made */
    bool leaving;      /* its pod is leaving */
} cclaim;

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
    cclaim *cc;           /* the candidates' claims, by candidate */
    size_t n_cc;
} work;

static void work_free(work *w)
{
    free(w->q);
    free(w->cohorts);
    free(w->blocking);
    free(w->byg);
    free(w->c);
    free(w->taken);
    free(w->cc);
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

/* Take charge out of quota qi (sign -1), or put it back (+1): spec.hard's
 * use (and its cohort's free capacity), and that of every model limit it
 * counts against (model's, or every one when it is NULL). */
static void quota_move(work *w, size_t qi, const gq_amounts *charge, const char *model, int sign)
{
    gq_queue_quota *pq = &w->q[qi];
    gq_queue_quota_move(pq, charge, sign);
    for (size_t mi = 0; mi < pq->q->n_models && mi < GQ_CRD_MAX_QUOTA_MODELS; mi++)
        if (!model || !strcmp(model, pq->q->models[mi].name))
            amounts_move(&pq->model_in_use[mi], charge, sign);
}

/* A candidate's members' own parts (their charges less their shared
 * claims), then each of its claims once per quota. */
static void cand_move(work *w, const cand *c, int sign)
{
    for (size_t i = 0; i < c->len; i++) {
        const gq_preempt_pod *p = &w->ask->pods[w->byg[c->first + i]];
        gq_amounts own;
        gq_charge_own(&p->charge, p->claims, p->n_claims, &own);
        for (size_t j = 0; j < p->n_quotas; j++)
            quota_move(w, p->quotas[j], &own, p->model, sign);
    }
    for (size_t k = 0; k < c->cc_len; k++) {
        const cclaim *cc = &w->cc[c->cc_first + k];
        gq_amounts a;
        gq_claim_amounts(cc->claim, &a);
        quota_move(w, cc->q, &a, cc->model, sign);
    }
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

/* Pods that go together: union-find over pod indices, the root the
 * smallest index of its set. */
static size_t uf_find(size_t *parent, size_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

static void uf_union(size_t *parent, size_t a, size_t b)
{
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a < b)
        parent[b] = a;
    else if (b < a)
        parent[a] = b;
}

/* A pod under a key it shares with the pods it goes with: its group's, or
 * a claim's uid. */
typedef struct podkey {
    const char *key;
    size_t pod;
} podkey;

static int link_cmp(const void *x, const void *y)
{
    const podkey *a = x, *b = y;
    int c = strcmp(a->key, b->key);
    return c ? c : (a->pod > b->pod) - (a->pod < b->pod);
}

/* Join the pods under one key; l[0..n) is sorted. */
static void link_runs(size_t *parent, podkey *l, size_t n)
{
    if (n > 1)
        qsort(l, n, sizeof(*l), link_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(l[i - 1].key, l[i].key))
            uf_union(parent, l[i - 1].pod, l[i].pod);
}

/* The links of the pods: each member of a group under its group, and each
 * pod that stays under each claim it names (a pod leaving goes anyway, and
 * frees its claims when the last pod naming them is gone). */
static gq_code join_pods(const gq_preempt_ask *a, size_t *parent)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_pods; i++) {
        parent[i] = i;
        if (__builtin_add_overflow(n, a->pods[i].n_claims + 1, &n))
            return GQ_ENOMEM;
    }
    podkey *l = n ? calloc(n, sizeof(*l)) : NULL;
    if (n && !l)
        return GQ_ENOMEM;
    size_t ng = 0, nc = 0;
    for (size_t i = 0; i < a->n_pods; i++)
        if (a->pods[i].group)
            l[ng++] = (podkey){a->pods[i].group, i};
    link_runs(parent, l, ng);
    for (size_t i = 0; i < a->n_pods; i++)
        for (size_t k = 0; !a->pods[i].leaving && k < a->pods[i].n_claims; k++)
            l[nc++] = (podkey){a->pods[i].claims[k].uid, i};
    link_runs(parent, l, nc);
    free(l);
    return GQ_OK;
}

/* Pod indices by the set they go with, then by index. */
typedef struct pref {
    size_t root, i;
} pref;

static int pref_cmp(const void *x, const void *y)
{
    const pref *a = x, *b = y;
    if (a->root != b->root)
        return a->root < b->root ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* w->byg: the pods, those that go together side by side; root[i]: the set
 * of the pod at position i. */
static gq_code order_pods(work *w, size_t *root)
{
    size_t n = w->ask->n_pods;
    size_t *parent = calloc(n, sizeof(*parent));
    pref *o = calloc(n, sizeof(*o));
    gq_code rc = parent && o ? join_pods(w->ask, parent) : GQ_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++)
        o[i] = (pref){uf_find(parent, i), i};
    if (!rc && n > 1)
        qsort(o, n, sizeof(*o), pref_cmp);
    for (size_t i = 0; !rc && i < n; i++)
        w->byg[i] = o[i].i;
    for (size_t i = 0; !rc && i < n; i++)
        root[i] = o[i].root;
    free(parent);
    free(o);
    return rc;
}

static int cclaim_cmp(const void *x, const void *y)
{
    const cclaim *a = x, *b = y;
    if (a->cand != b->cand)
        return a->cand < b->cand ? -1 : 1;
    int c = strcmp(a->claim->uid, b->claim->uid);
    if (c)
        return c;
    if (a->q != b->q)
        return a->q < b->q ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static bool cclaim_same(const cclaim *a, const cclaim *b)
{
    return a->cand == b->cand && a->q == b->q && !strcmp(a->claim->uid, b->claim->uid);
}

/* How many claims in quotas pods[0..n) name, into *total; false when the
 * count overflows. */
static bool count_claims(const gq_preempt_pod *pods, size_t n, size_t *total)
{
    size_t m;
    *total = 0;
    for (size_t i = 0; i < n; i++)
        if (__builtin_mul_overflow(pods[i].n_claims, pods[i].n_quotas, &m) ||
            __builtin_add_overflow(*total, m, total))
            return false;
    return true;
}

/* Append pod p's claims, in each quota it counts in, to l[*n..). */
static void claims_of(const gq_preempt_pod *p, size_t ci, cclaim *l, size_t *n)
{
    for (size_t k = 0; k < p->n_claims; k++)
        for (size_t j = 0; j < p->n_quotas; j++, (*n)++)
            l[*n] = (cclaim){&p->claims[k], p->quotas[j], p->model, ci, *n, p->leaving};
}

/* w->cc: each candidate's claims, once per claim and quota, from the
 * members that stay (a member leaving makes it no candidate). */
static gq_code candidate_claims(work *w)
{
    const gq_preempt_ask *a = w->ask;
    size_t n;
    if (!count_claims(a->pods, a->n_pods, &n))
        return GQ_ENOMEM;
    if (!n)
        return GQ_OK;
    if (!(w->cc = calloc(n, sizeof(*w->cc))))
        return GQ_ENOMEM;
    for (size_t ci = 0; ci < w->nc; ci++)
        for (size_t t = 0; t < w->c[ci].len; t++) {
            const gq_preempt_pod *p = &a->pods[w->byg[w->c[ci].first + t]];
            if (!p->leaving)
                claims_of(p, ci, w->cc, &w->n_cc);
        }
    if (w->n_cc > 1)
        qsort(w->cc, w->n_cc, sizeof(*w->cc), cclaim_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < w->n_cc; i++) {
        const cclaim *x = &w->cc[i];
        if (kept && cclaim_same(&w->cc[kept - 1], x))
            continue;
        if (!w->c[x->cand].cc_len)
            w->c[x->cand].cc_first = kept;
        w->c[x->cand].cc_len++;
        w->cc[kept++] = *x;
    }
    w->n_cc = kept;
    return GQ_OK;
}

/* Add pod p, at position i of the working order in set root, to the
 * candidates: a new one, or the last when p goes with it. */
static void add_to_candidates(work *w, size_t i, size_t root, size_t *last_root)
{
    const gq_preempt_pod *p = &w->ask->pods[w->byg[i]];
    cand *last = w->nc ? &w->c[w->nc - 1] : NULL;
    if (last && *last_root == root) {
        last->len++;
        last->priority = p->priority > last->priority ? p->priority : last->priority;
        last->admitted_us = p->admitted_us > last->admitted_us ? p->admitted_us : last->admitted_us;
        last->within = last->within && pod_within(w, p);
        last->borrow = last->borrow || marked_in_cohort(w, p);
        last->movable = last->movable && movable(w, p);
        return;
    }
    *last_root = root;
    w->c[w->nc++] = (cand){.first = i,
                           .len = 1,
                           .priority = p->priority,
                           .admitted_us = p->admitted_us,
                           .key = p->group ? p->group : p->uid,
                           .within = pod_within(w, p),
                           .borrow = marked_in_cohort(w, p),
                           .movable = movable(w, p)};
}

/* The candidates: each pod alone, or with every pod it goes with (the
 * members of its group, the pods naming a claim it names, and so on). */
static gq_code build_candidates(work *w)
{
    size_t n = w->ask->n_pods, last_root = SIZE_MAX;
    size_t *root = n ? calloc(n, sizeof(*root)) : NULL;
    w->byg = n ? calloc(n, sizeof(*w->byg)) : NULL;
    w->c = n ? calloc(n, sizeof(*w->c)) : NULL;
    w->taken = n ? calloc(n, sizeof(*w->taken)) : NULL;
    gq_code rc = n && (!root || !w->byg || !w->c || !w->taken) ? GQ_ENOMEM : GQ_OK;
    if (!rc && n)
        rc = order_pods(w, root);
    for (size_t i = 0; !rc && i < n; i++)
        add_to_candidates(w, i, root[i], &last_root);
    free(root);
    for (size_t i = 0; i < w->nc; i++) {
        cand *c = &w->c[i];
        c->borrow = c->borrow && c->movable;
        c->ok = c->within || (c->borrow && w->reclaim_blocked);
    }
    return rc ? rc : candidate_claims(w);
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

/* The claims of pods leaving that no pod staying names, once per quota:
 * l[0..total) holds every claim of pods in each quota, sorted. */
static void leaving_claims(const cclaim *l, size_t total, gq_queue_quota *pq, size_t from)
{
    for (size_t i = 0, end; i < total; i = end) {
        bool stays = false;
        for (end = i; end < total && cclaim_same(&l[i], &l[end]); end++)
            stays = stays || !l[end].leaving;
        if (stays || l[i].q < from)
            continue;
        gq_amounts a;
        gq_claim_amounts(l[i].claim, &a);
        gq_queue_quota_leaving(&pq[l[i].q], &a, l[i].model);
    }
}

gq_code gq_preempt_leaving(const gq_preempt_pod *pods, size_t n, gq_queue_quota *pq, size_t nq,
                           size_t from)
{
    size_t total, k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < pods[i].n_quotas; j++)
            if (pods[i].quotas[j] >= nq)
                return GQ_EINVAL;
    if (!count_claims(pods, n, &total))
        return GQ_ENOMEM;
    cclaim *l = total ? calloc(total, sizeof(*l)) : NULL;
    if (total && !l)
        return GQ_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        gq_amounts own;
        claims_of(&pods[i], 0, l, &k);
        if (!pods[i].leaving)
            continue;
        gq_charge_own(&pods[i].charge, pods[i].claims, pods[i].n_claims, &own);
        for (size_t j = 0; j < pods[i].n_quotas; j++)
            if (pods[i].quotas[j] >= from)
                gq_queue_quota_leaving(&pq[pods[i].quotas[j]], &own, pods[i].model);
    }
    if (total > 1)
        qsort(l, total, sizeof(*l), cclaim_cmp);
    leaving_claims(l, total, pq, from);
    free(l);
    return GQ_OK;
}
