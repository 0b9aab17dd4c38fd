/* Cohorts for the admission pass (docs/queueing.md, "Borrowing"): the
 * GPUQuotas of the namespaces one GPUTenantQuota covers lend each other
 * what they leave unused, and GPUTenantQuotas naming the same spec.cohort
 * lend each other what they leave unused of their hard. For each tenant
 * one of whose members may borrow (spec.borrowingLimit), what the members
 * lend less what they borrow is summed over every member, from the pass's
 * fresh reads for the quotas it charges and from the cache for the others;
 * the pass's quotas point at their cohort, and the other members are kept
 * for preemption (reclaim).
 *
 * And a quota's cohort for its status (borrowed, lent): its members as
 * cached, the quota itself at its recount (for a tenant naming spec.cohort,
 * the tenants naming it); when a member's spec or usage changes, the others
 * and their tenant are reconciled again. */
#include "controller/ctl_run.h"

#include <stdio.h>
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
        return 0; /* a tenant of no cohort of tenants: c->tv has its spec; go on */
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

/* --- a quota's cohort, for its status (reconcile.c) ----------------------- */

void ctl_cohort_view_dispose(ctl_cohort_view *v)
{
    free(v->m);
    gq_quota_list_free(v->owned, v->n_owned);
    gq_quota_free(v->tenant);
    memset(v, 0, sizeof(*v));
}

/* The namespaces of the cached GPUQuotas that may borrow (spec.
 * borrowingLimit), and every cached GPUQuota (objs) when asked. */
typedef struct scan {
    json_object *borrower_ns; /* object: namespace -> true */
    json_object *objs;        /* NULL: not collected */
} scan;

static int scan_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    scan *s = ud;
    (void)name;
    json_object *o = (json_object *)rec;
    if (gq_json_member(gq_json_member(o, "spec"), "borrowingLimit"))
        json_object_object_add(s->borrower_ns, ns, json_object_new_boolean(1));
    if (s->objs)
        json_object_array_add(s->objs, json_object_get(o));
    return 0;
}

/* Whether tenant t covers a namespace of borrower_ns. */
static bool has_borrower(ctl_controller *c, const gq_quota *t, json_object *borrower_ns)
{
    json_object_object_foreach(borrower_ns, ns, v)
    {
        (void)v;
        if (ctl_podstore_covers(c->store, t, ns))
            return true;
    }
    return false;
}

/* The name of the cohort of ns/name (ns "": the tenant name): the first
 * tenant (the controller's order, as the admission pass takes it) covering
 * ns that has a borrower; the tenant itself when it has one. "" when none.
 * c->mu held. */
static void cohort_name(ctl_controller *c, const char *ns, const char *name,
                        json_object *borrower_ns, char out[300])
{
    out[0] = '\0';
    for (size_t t = 0; t < c->n_tenants; t++) {
        const tenant_ent *te = &c->tv[t];
        bool mine = ns[0] ? ctl_podstore_covers(c->store, te->q, ns) : !strcmp(te->name, name);
        if (mine && has_borrower(c, te->q, borrower_ns)) {
            snprintf(out, 300, "%s", te->name);
            return;
        }
    }
}

static void tenant_copy_fn(void *ud, const void *rec)
{
    gq_err e;
    if (ctl_quota_parse_spec((json_object *)rec, (gq_quota **)ud, &e))
        *(gq_quota **)ud = NULL; /* invalid: no cohort */
}

static int member_cmp(const void *a, const void *b)
{
    const gq_quota *x = ((const gq_cohort_member *)a)->q, *y = ((const gq_cohort_member *)b)->q;
    int d = strcmp(x->namespace_, y->namespace_);
    return d ? d : strcmp(x->name, y->name);
}

/* v's members: the GPUQuotas of objs the tenant covers, sorted; self is
 * ns/name's place (n when absent). */
static gq_code view_members(ctl_controller *c, json_object *objs, const char *ns, const char *name,
                            ctl_cohort_view *v)
{
    size_t skipped = 0;
    gq_err e;
    json_object *mine = json_object_new_array();
    if (!mine)
        return GQ_ENOMEM;
    /* Only the members are parsed (status and all): not every quota. */
    for (size_t i = 0; i < json_object_array_length(objs); i++) {
        json_object *o = json_object_array_get_idx(objs, i);
        const char *qns = gq_json_meta_string(o, "namespace");
        if (qns && ctl_podstore_covers(c->store, v->tenant, qns))
            json_object_array_add(mine, json_object_get(o));
    }
    gq_code rc = gq_quota_list_append(&v->owned, &v->n_owned, mine, &skipped, &e);
    json_object_put(mine);
    if (rc || !v->n_owned)
        return rc;
    if (!(v->m = calloc(v->n_owned, sizeof(*v->m))))
        return GQ_ENOMEM;
    for (size_t i = 0; i < v->n_owned; i++) {
        const gq_quota *q = v->owned[i];
        if (q->kind == GQ_QUOTA_NAMESPACED &&
            ctl_podstore_covers(c->store, v->tenant, q->namespace_))
            v->m[v->n++] = (gq_cohort_member){.q = q, .used = q->used};
    }
    if (v->n > 1)
        qsort(v->m, v->n, sizeof(*v->m), member_cmp);
    v->self = v->n;
    for (size_t i = 0; ns[0] && i < v->n; i++)
        if (!strcmp(v->m[i].q->namespace_, ns) && !strcmp(v->m[i].q->name, name))
            v->self = i;
    return GQ_OK;
}

/* The cached GPUTenantQuotas naming spec.cohort cohort. */
typedef struct peer_scan {
    const char *cohort;
    json_object *objs;
} peer_scan;

static const char *cohort_of(const json_object *o)
{
    json_object *co = gq_json_member(gq_json_member((json_object *)o, "spec"), "cohort");
    return json_object_is_type(co, json_type_string) ? json_object_get_string(co) : NULL;
}

static int peer_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    peer_scan *s = ud;
    const char *co = cohort_of(rec);
    (void)ns;
    (void)name;
    if (co && !strcmp(co, s->cohort))
        json_object_array_add(s->objs, json_object_get((json_object *)rec));
    return 0;
}

static int tenant_cmp(const void *a, const void *b)
{
    return strcmp(((const gq_cohort_member *)a)->q->name, ((const gq_cohort_member *)b)->q->name);
}

/* v of tenant name in the cohort of tenants cohort: every cached tenant
 * naming it, sorted by name, name's place self; empty when name is not
 * among them (its cached spec does not parse). */
static gq_code tenant_view(ctl_controller *c, const char *cohort, const char *name,
                           ctl_cohort_view *v)
{
    peer_scan s = {cohort, json_object_new_array()};
    size_t skipped = 0;
    gq_err e;
    gq_code rc = s.objs ? GQ_OK : GQ_ENOMEM;
    if (!rc)
        kube_cache_foreach(c->tenants, peer_fn, &s);
    if (!rc)
        rc = gq_quota_list_append(&v->owned, &v->n_owned, s.objs, &skipped, &e);
    json_object_put(s.objs);
    if (rc || !v->n_owned)
        return rc;
    if (!(v->m = calloc(v->n_owned, sizeof(*v->m))))
        return GQ_ENOMEM;
    for (size_t i = 0; i < v->n_owned; i++)
        v->m[v->n++] = (gq_cohort_member){.q = v->owned[i], .used = v->owned[i]->used};
    if (v->n > 1)
        qsort(v->m, v->n, sizeof(*v->m), tenant_cmp);
    v->self = v->n;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->m[i].q->name, name))
            v->self = i;
    if (v->self == v->n)
        v->n = 0; /* not a member: no cohort (n == self would mean the sums) */
    return GQ_OK;
}

/* The spec.cohort of tenant name as the controller keeps it, into out
 * ("" when none). */
static void tenant_cohort(ctl_controller *c, const char *name, char out[300])
{
    out[0] = '\0';
    pthread_mutex_lock(&c->mu);
    for (size_t t = 0; t < c->n_tenants; t++)
        if (!strcmp(c->tv[t].name, name) && c->tv[t].q && c->tv[t].q->cohort)
            snprintf(out, 300, "%s", c->tv[t].q->cohort);
    pthread_mutex_unlock(&c->mu);
}

gq_code ctl_cohort_view_of(ctl_controller *c, const char *ns, const char *name, ctl_cohort_view *v)
{
    char cohort[300];
    memset(v, 0, sizeof(*v));
    if (!ns[0])
        tenant_cohort(c, name, cohort);
    if (!ns[0] && cohort[0]) { /* a member of a cohort of tenants */
        gq_code rc = tenant_view(c, cohort, name, v);
        if (rc)
            ctl_cohort_view_dispose(v);
        return rc;
    }
    scan s = {json_object_new_object(), NULL};
    char tenant[300];
    gq_code rc = s.borrower_ns ? GQ_OK : GQ_ENOMEM;
    memset(v, 0, sizeof(*v));
    if (!rc)
        kube_cache_foreach(c->quotas, scan_fn, &s);
    if (rc || !json_object_object_length(s.borrower_ns))
        goto out; /* nobody borrows: no cohort, nothing to scan further */
    pthread_mutex_lock(&c->mu);
    cohort_name(c, ns, name, s.borrower_ns, tenant);
    pthread_mutex_unlock(&c->mu);
    if (!tenant[0])
        goto out;
    if (kube_cache_get(c->tenants, "", tenant, tenant_copy_fn, &v->tenant) || !v->tenant)
        goto out; /* gone meanwhile, or unreadable: no cohort this time */
    if (!(s.objs = json_object_new_array())) {
        rc = GQ_ENOMEM;
        goto out;
    }
    kube_cache_foreach(c->quotas, scan_fn, &s);
    rc = view_members(c, s.objs, ns, name, v);
out:
    json_object_put(s.borrower_ns);
    json_object_put(s.objs);
    if (rc)
        ctl_cohort_view_dispose(v);
    return rc;
}

/* --- who to look at again when a member changes ---------------------------- */

static void touch_key(ctl_controller *c, char kind, const char *ns, const char *name)
{
    char key[KEY_MAX];
    if (ctl_make_key(key, kind, ns, name))
        ctl_requeue_after(c, key, 0);
}

typedef struct peers {
    json_object *keys; /* array of [ns, name] of every cached GPUQuota */
} peers;

/* Stops at the first GPUQuota that may borrow. */
static int borrower_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    (void)ns;
    (void)name;
    return *(bool *)ud =
               gq_json_member(gq_json_member((json_object *)rec, "spec"), "borrowingLimit") != NULL;
}

static int peers_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    peers *p = ud;
    (void)rec;
    json_object *k = json_object_new_array_ext(2);
    if (k) {
        json_object_array_add(k, json_object_new_string(ns));
        json_object_array_add(k, json_object_new_string(name));
        json_object_array_add(p->keys, k);
    }
    return 0;
}

void ctl_cohort_touch(ctl_controller *c, const char *ns)
{
    bool any = false;
    kube_cache_foreach(c->quotas, borrower_fn, &any);
    peers p = {any ? json_object_new_array() : NULL};
    if (!p.keys)
        return; /* nobody borrows: nothing to look at again */
    kube_cache_foreach(c->quotas, peers_fn, &p);
    size_t n = json_object_array_length(p.keys);
    for (size_t i = 0; !ns && i < n; i++) { /* a tenant changed: every member may */
        json_object *k = json_object_array_get_idx(p.keys, i);
        touch_key(c, 'q', json_object_get_string(json_object_array_get_idx(k, 0)),
                  json_object_get_string(json_object_array_get_idx(k, 1)));
    }
    pthread_mutex_lock(&c->mu);
    for (size_t t = 0; t < c->n_tenants; t++) {
        const gq_quota *tq = c->tv[t].q;
        if (ns && !ctl_podstore_covers(c->store, tq, ns))
            continue;
        touch_key(c, 't', "", c->tv[t].name);
        for (size_t i = 0; ns && i < n; i++) {
            json_object *k = json_object_array_get_idx(p.keys, i);
            const char *qns = json_object_get_string(json_object_array_get_idx(k, 0));
            if (ctl_podstore_covers(c->store, tq, qns))
                touch_key(c, 'q', qns, json_object_get_string(json_object_array_get_idx(k, 1)));
        }
    }
    pthread_mutex_unlock(&c->mu);
    json_object_put(p.keys);
}

void ctl_cohort_touch_tenants(ctl_controller *c, const void *obj, const char *self)
{
    const char *co = cohort_of(obj);
    if (!co)
        return;
    pthread_mutex_lock(&c->mu);
    for (size_t t = 0; t < c->n_tenants; t++) {
        const gq_quota *q = c->tv[t].q;
        if (q && q->cohort && !strcmp(q->cohort, co) && strcmp(c->tv[t].name, self))
            touch_key(c, 't', "", c->tv[t].name);
    }
    pthread_mutex_unlock(&c->mu);
}
