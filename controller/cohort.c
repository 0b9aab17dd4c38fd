/* Cohorts for the admission pass (docs/queueing.md, "Borrowing"): the
 * GPUQuotas of the namespaces one GPUTenantQuota covers lend each other
 * what they leave unused, and GPUTenantQuotas naming the same spec.cohort
 * lend each other what they leave unused of their hard. For each tenant one of whose members may
 * borrow (spec.borrowingLimit), what the members lend less what they borrow is summed over every
 * member, from the pass's fresh reads for the quotas it charges and from the cache for the others;
 * the pass's quotas point at their cohort, and the other members are kept for preemption (reclaim).
 */
#include "controller/ctl_run.h"

#include <stdlib.h>
#include <string.h>

#include "common/gq_log.h"
#include "common/grow.h"
#include "common/json_member.h"

void ctl_cohorts_dispose(ctl_cohorts *co)
{
    free(co->v);
    free(co->extra);
    gq_quota_list_free(co->owned, co->n_owned);
    memset(co, 0, sizeof(*co));
}

static bool any_set(const gq_amounts *a)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (a->set[k])
            return true;
    return false;
}

typedef struct collect {
    json_object *objs;
    bool any_borrower;
} collect;

static int collect_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    collect *cl = ud;
    (void)ns;
    (void)name;
    json_object *o = (json_object *)rec, *spec = gq_json_member(o, "spec");
    bool tenant = gq_json_member(spec, "namespaces") || gq_json_member(spec, "namespaceSelector");
    if (tenant && !gq_json_member(spec, "cohort"))
        return 1; /* a tenant of no cohort of tenants: c->tv has its spec */
    if (gq_json_member(spec, "borrowingLimit"))
        cl->any_borrower = true;
    if (!json_object_array_add(cl->objs, json_object_get(o)))
        return 0;
    json_object_put(o);
    return 1;
}

/* The pass's quota that is q (same kind, namespace and name), or SIZE_MAX. */
static size_t in_pass(const gq_queue_quota *pq, size_t nq, const gq_quota *q)
{
    for (size_t j = 0; j < nq; j++) {
        const gq_quota *p = pq[j].q;
        if (p->kind == q->kind && !strcmp(p->name, q->name) &&
            !strcmp(p->namespace_ ? p->namespace_ : "", q->namespace_ ? q->namespace_ : ""))
            return j;
    }
    return SIZE_MAX;
}

/* Add member m of cohort to the pass: in use as the pass read it (and
 * pointed at cohort) or, when the pass does not charge it, as the cache
 * holds it (kept in co->extra). */
static gq_code add_member(gq_quota *m, gq_queue_quota *pq, size_t nq, int64_t now,
                          gq_queue_cohort *cohort, ctl_cohorts *co)
{
    size_t j = in_pass(pq, nq, m);
    gq_queue_quota one = {.q = m};
    gq_err e;
    if (j != SIZE_MAX)
        one.in_use = pq[j].in_use;
    else if (gq_quota_in_use(m, now, NULL, &one.in_use, &e))
        return GQ_OK; /* its status does not parse: it lends nothing */
    gq_queue_cohort_add(cohort, m, &one.in_use);
    if (j != SIZE_MAX) {
        pq[j].cohort = cohort;
        return GQ_OK;
    }
    gq_queue_quota *grown = gq_grow(co->extra, &co->cap_extra, co->n_extra, sizeof(*grown), 8);
    if (!grown)
        return GQ_ENOMEM;
    co->extra = grown;
    one.cohort = cohort;
    co->extra[co->n_extra++] = one;
    return GQ_OK;
}

static bool same_cohort(const gq_quota *a, const gq_quota *b)
{
    return a->kind == GQ_QUOTA_TENANT && b->kind == GQ_QUOTA_TENANT && a->cohort && b->cohort &&
           !strcmp(a->cohort, b->cohort);
}

/* The cohorts of tenants (spec.cohort) one of whose members may borrow:
 * the tenants of the pass point at theirs, the others are kept in extra. */
static gq_code build_tenant_cohorts(gq_queue_quota *pq, size_t nq, int64_t now, ctl_cohorts *co)
{
    for (size_t i = 0; i < co->n_owned; i++) {
        gq_quota *t = co->owned[i];
        bool first = true, borrows = false;
        for (size_t k = 0; k < co->n_owned && first; k++)
            first = k >= i || !same_cohort(co->owned[k], t);
        for (size_t k = i; k < co->n_owned && first && !borrows; k++)
            borrows = same_cohort(co->owned[k], t) && any_set(&co->owned[k]->borrowing_limit);
        if (!t->cohort || !first || !borrows)
            continue;
        gq_queue_cohort *cohort = &co->v[co->n++];
        memset(cohort, 0, sizeof(*cohort));
        for (size_t k = i; k < co->n_owned; k++) {
            gq_code rc = same_cohort(co->owned[k], t)
                             ? add_member(co->owned[k], pq, nq, now, cohort, co)
                             : GQ_OK;
            if (rc)
                return rc;
        }
    }
    return GQ_OK;
}

/* Cohort t of tenant tq over the cached GPUQuotas: its free capacity, its
 * members in the pass pointed at it, the others kept in co->extra. false
 * when no member borrows (no cohort). */
static gq_code build_one(ctl_controller *c, const gq_quota *tq, gq_queue_quota *pq, size_t nq,
                         int64_t now, ctl_cohorts *co, bool *made)
{
    gq_queue_cohort *cohort = &co->v[co->n];
    bool borrows = false;
    *made = false;
    memset(cohort, 0, sizeof(*cohort));
    for (size_t i = 0; i < co->n_owned && !borrows; i++)
        borrows = co->owned[i]->kind == GQ_QUOTA_NAMESPACED &&
                  ctl_podstore_covers(c->store, tq, co->owned[i]->namespace_) &&
                  any_set(&co->owned[i]->borrowing_limit);
    if (!borrows)
        return GQ_OK;
    for (size_t i = 0; i < co->n_owned; i++) {
        gq_quota *m = co->owned[i];
        if (m->kind != GQ_QUOTA_NAMESPACED || !ctl_podstore_covers(c->store, tq, m->namespace_))
            continue;
        size_t j = in_pass(pq, nq, m);
        if (j != SIZE_MAX && pq[j].cohort)
            continue; /* a member of an earlier tenant's cohort */
        gq_code rc = add_member(m, pq, nq, now, cohort, co);
        if (rc)
            return rc;
    }
    /* Its tenant borrowing in a cohort of tenants lends its members more. */
    size_t t = in_pass(pq, nq, tq);
    if (t != SIZE_MAX && pq[t].cohort)
        cohort->up = &pq[t];
    co->n++;
    *made = true;
    return GQ_OK;
}

gq_code ctl_cohorts_attach(ctl_controller *c, gq_queue_quota *pq, size_t nq, int64_t now,
                           ctl_cohorts *co)
{
    collect cl = {json_object_new_array(), false};
    gq_code rc = cl.objs ? GQ_OK : GQ_ENOMEM;
    memset(co, 0, sizeof(*co));
    if (!rc) {
        kube_cache_foreach(c->quotas, collect_fn, &cl);
        kube_cache_foreach(c->tenants, collect_fn, &cl);
    }
    if (rc || !cl.any_borrower) {
        json_object_put(cl.objs);
        return rc;
    }
    gq_err e;
    size_t skipped = 0;
    rc = gq_quota_list_append(&co->owned, &co->n_owned, cl.objs, &skipped, &e);
    json_object_put(cl.objs);
    pthread_mutex_lock(&c->mu);
    /* One cohort per tenant at most, and one per cohort of tenants. */
    if (!rc && !(co->v = calloc(c->n_tenants + co->n_owned + 1, sizeof(*co->v))))
        rc = GQ_ENOMEM;
    if (!rc)
        rc = build_tenant_cohorts(pq, nq, now, co);
    for (size_t t = 0; !rc && t < c->n_tenants; t++) {
        bool made;
        rc = build_one(c, c->tv[t].q, pq, nq, now, co, &made);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc)
        GQ_WARN("queue: cohorts: out of memory");
    return rc;
}
