/* Preemption inside a quota (docs/queueing.md, "Preemption"), on the
 * leader, after the queue planner: the first waiting pod (in the queue's
 * order) that a quota allowing preemption keeps out gets its victims from
 * gq_preempt_plan (quota/preempt.h); each is marked with the condition
 * DisruptionTarget and evicted through the Eviction API, so disruption
 * budgets hold; the preemptor is nominated, and the planner holds its room
 * (gq_queue_entry.held) until it is admitted. One preemptor a pass: the
 * pass runs again at once, with the victims leaving. */
#include "controller/ctl_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gq_log.h"
#include "common/json_member.h"
#include "common/rfc3339.h"
#include "quota/preempt.h"

/* A nominated preemptor's room is held this long, and a victim counts as
 * leaving this long after its eviction; a refused eviction spares its pod
 * this long; a preemptor for which nobody may be evicted is passed over
 * this long, so that the next ones get their turn. */
#define NOMINATED_TTL_S 120
#define EVICTING_TTL_S 120
#define REFUSED_TTL_S 30
#define NO_VICTIMS_TTL_S 10

/* Preemptors tried in one pass, at most: each costs a plan over every pod
 * that counts in the quotas of the queue. */
#define TRIES_PER_PASS 32

#define PREEMPT_REASON "PreemptedByGPUQuota"

/* When uid's mark in set (a {uid: expiry} map, c->mu held) expires, or 0
 * when it is not marked at now; expired entries go. */
static int64_t marked_until_locked(json_object *set, const char *uid, int64_t now)
{
    json_object *v = NULL;
    if (!set || !json_object_object_get_ex(set, uid, &v))
        return 0;
    int64_t until = json_object_get_int64(v);
    if (until > now)
        return until;
    json_object_object_del(set, uid);
    return 0;
}

static int64_t marked_until(ctl_controller *c, json_object *set, const char *uid, int64_t now)
{
    pthread_mutex_lock(&c->mu);
    int64_t until = marked_until_locked(set, uid, now);
    pthread_mutex_unlock(&c->mu);
    return until;
}

static bool marked(ctl_controller *c, json_object *set, const char *uid, int64_t now)
{
    return marked_until(c, set, uid, now) != 0;
}

/* *again_ms = ms when that is sooner (0: not asked yet). */
static void again_in(long *again_ms, long ms)
{
    if (ms > 0 && (!*again_ms || ms < *again_ms))
        *again_ms = ms;
}

static void mark(ctl_controller *c, json_object *set, const char *uid, int64_t until)
{
    pthread_mutex_lock(&c->mu);
    if (set)
        json_object_object_add(set, uid, json_object_new_int64(until));
    pthread_mutex_unlock(&c->mu);
}

bool ctl_preempt_held(ctl_controller *c, const char *uid, int64_t now)
{
    return marked(c, c->nominated, uid, now);
}

void ctl_preempt_forget(ctl_controller *c, const char *uid)
{
    pthread_mutex_lock(&c->mu);
    if (c->nominated)
        json_object_object_del(c->nominated, uid);
    pthread_mutex_unlock(&c->mu);
}

/* Whether one of entry i's quotas, a member of a cohort (its GPUQuota in
 * its tenant's, its GPUTenantQuota in a cohort of tenants), may reclaim
 * what that cohort lent. */
static bool may_reclaim(const ctl_preempt_in *in, size_t i)
{
    const gq_queue_entry *e = &in->ents[i];
    for (size_t j = 0; j < e->n_quotas; j++) {
        const gq_queue_quota *pq = &in->pq[e->quotas[j]];
        if (pq->cohort && pq->q->reclaim != GQ_RECLAIM_NEVER)
            return true;
    }
    return false;
}

/* Drop the expired entries of set (c->mu held): most uids are never
 * looked up again (a victim gone, a preemptor deleted while it waited). */
static void sweep_locked(json_object *set, int64_t now)
{
    struct lh_table *t = set ? json_object_get_object(set) : NULL;
    for (struct lh_entry *e = t ? t->head : NULL, *next; e; e = next) {
        next = e->next;
        if (json_object_get_int64((json_object *)lh_entry_v(e)) <= now)
            lh_table_delete_entry(t, e);
    }
}

static void sweep(ctl_controller *c, int64_t now)
{
    pthread_mutex_lock(&c->mu);
    sweep_locked(c->nominated, now);
    sweep_locked(c->evicting, now);
    sweep_locked(c->evict_refused, now);
    sweep_locked(c->no_victims, now);
    pthread_mutex_unlock(&c->mu);
}

/* Mark every queued member of entry who's unit (who alone, or its group)
 * in set until then: a group is nominated, or passed over, whole. */
static void mark_unit(ctl_controller *c, json_object *set, const ctl_preempt_in *in, size_t who,
                      int64_t until)
{
    const char *g = in->ents[who].group;
    for (size_t j = 0; j < in->n; j++)
        if (j == who || (g && in->ents[j].group && !strcmp(g, in->ents[j].group)))
            mark(c, set, in->ents[j].uid, until);
}

/* The first waiting unit, in the queue's order, that a quota allowing
 * preemption keeps out, that is not nominated already and that was not
 * found lately to have nobody to evict: the index of its first entry, or
 * SIZE_MAX. A unit passed over for that is tried again once its turn
 * comes back: *again_ms then. */
static size_t next_preemptor(ctl_controller *c, const ctl_preempt_in *in, long *again_ms)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < in->n; i++) {
        const gq_queue_decision *d = &in->dec[i];
        if (d->state != GQ_QSTATE_NO_ROOM || d->quota >= in->nq ||
            (in->pq[d->quota].q->within_quota == GQ_PREEMPT_NEVER && !may_reclaim(in, i)) ||
            ctl_preempt_held(c, in->ents[i].uid, in->now))
            continue;
        int64_t until = marked_until(c, c->no_victims, in->ents[i].uid, in->now);
        if (until) {
            again_in(again_ms, (long)(until - in->now) * 1000 + 50);
            continue;
        }
        if (best == SIZE_MAX || d->position < in->dec[best].position)
            best = i;
    }
    return best;
}

/* The entries of i's unit (i alone, or the queued members of its group),
 * copied contiguous into *out (caller frees). */
static gq_code unit_members(const ctl_preempt_in *in, size_t i, gq_queue_entry **out, size_t *n)
{
    const char *g = in->ents[i].group;
    *n = 0;
    if (!(*out = calloc(in->n, sizeof(**out))))
        return GQ_ENOMEM;
    for (size_t j = 0; j < in->n; j++)
        if (j == i || (g && in->ents[j].group && !strcmp(g, in->ents[j].group)))
            (*out)[(*n)++] = in->ents[j];
    return GQ_OK;
}

/* What one preemption works on: the admitted pods (as the store holds
 * them) and their planner view. */
typedef struct preemption {
    ctl_controller *c;
    const ctl_preempt_in *in;
    size_t who;             /* the preemptor's entry */
    gq_queue_quota *quotas; /* the pass's, then its cohorts' other members */
    size_t nq;
    ctl_running *run;
    size_t n_run;
    gq_preempt_pod *pods; /* parallel to run */
    bool *allowed;        /* parallel to run: a dry-run eviction passed in this pass */
    size_t *victims, n_victims;
    const char *quota; /* the quota that kept it out, for messages */
    bool reclaims;     /* the plan may take borrowers of the preemptor's cohort */
    gq_err err;
} preemption;

static void preemption_dispose(preemption *p)
{
    free(p->quotas);
    ctl_running_free(p->run, p->n_run);
    free(p->pods);
    free(p->victims);
    free(p->allowed);
}

/* Whether running pod r is leaving: being deleted, or evicted here lately
 * (its deletion may not have reached the pod cache yet). */
static bool run_leaving(ctl_controller *c, const ctl_running *r, int64_t now)
{
    return r->leaving || marked(c, c->evicting, r->uid, now);
}

/* The pods that count in the quotas of pq[0..nq) as the pod cache holds
 * them (ctl_podstore_running); the caller frees *run. */
static gq_code running_in(ctl_controller *c, const gq_queue_quota *pq, size_t nq, int64_t now,
                          ctl_running **run, size_t *n_run)
{
    const gq_quota **qs = calloc(nq ? nq : 1, sizeof(*qs));
    if (!qs)
        return GQ_ENOMEM;
    for (size_t j = 0; j < nq; j++)
        qs[j] = pq[j].q;
    gq_code rc = ctl_podstore_running(c->store, qs, nq, now, run, n_run);
    free(qs);
    return rc;
}

/* Whether running pod r names a shared claim that a quota it counts in
 * (of pq) charges on borrowed capacity: it holds what was borrowed, though
 * the pod marked for it may be gone. */
static bool rides_borrowed_claim(const ctl_running *r, const gq_queue_quota *pq, int64_t now)
{
    for (size_t j = 0; j < r->n_quotas; j++)
        for (size_t k = 0; k < r->n_claims; k++)
            if (ctl_quota_claim_borrowed(pq[r->quotas[j]].q, r->claims[k].uid, now))
                return true;
    return false;
}

/* The planner's view of the running pods run[0..n) that count in pq (the
 * cohorts left to the caller); the caller frees *out. */
static gq_code plan_pods(ctl_controller *c, const ctl_running *run, size_t n,
                         const gq_queue_quota *pq, int64_t now, gq_preempt_pod **out)
{
    if (!(*out = calloc(n ? n : 1, sizeof(**out))))
        return GQ_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const ctl_running *r = &run[i];
        (*out)[i] = (gq_preempt_pod){
            .uid = r->uid,
            .group = r->group,
            .priority = r->priority,
            .created_us = r->created_us,
            .admitted_us = r->created_us,
            .charge = r->charge,
            .model = r->model,
            .quotas = r->quotas,
            .n_quotas = r->n_quotas,
            .spared = marked(c, c->evict_refused, r->uid, now),
            .leaving = run_leaving(c, r, now),
            .borrowing = r->borrowing || rides_borrowed_claim(r, pq, now),
            .claims = r->claims,
            .n_claims = r->n_claims,
        };
    }
    return GQ_OK;
}

bool ctl_preempt_leaving(ctl_controller *c, const gq_queue_entry *ents, size_t n,
                         gq_queue_quota *pq, size_t nq, int64_t now)
{
    ctl_running *run = NULL;
    gq_preempt_pod *pods = NULL;
    size_t n_run = 0, i = 0;
    while (i < n && !ents[i].held)
        i++;
    if (i == n || running_in(c, pq, nq, now, &run, &n_run))
        return false;
    bool ok =
        !plan_pods(c, run, n_run, pq, now, &pods) && !gq_preempt_leaving(pods, n_run, pq, nq, 0);
    free(pods);
    ctl_running_free(run, n_run);
    return ok;
}

/* The quotas preemption sees: the pass's, then the members of its cohorts
 * it does not charge (a borrower reclaimed from may be one). */
static gq_code all_quotas(preemption *p)
{
    const ctl_preempt_in *in = p->in;
    size_t extra = in->cohorts ? in->cohorts->n_extra : 0;
    p->nq = in->nq + extra;
    if (!(p->quotas = calloc(p->nq ? p->nq : 1, sizeof(*p->quotas))))
        return GQ_ENOMEM;
    if (in->nq)
        memcpy(p->quotas, in->pq, in->nq * sizeof(*p->quotas));
    if (extra)
        memcpy(p->quotas + in->nq, in->cohorts->extra, extra * sizeof(*p->quotas));
    return GQ_OK;
}

/* The cohort a running pod borrowed from: that of the first quota it
 * counts in that has one. */
static const gq_queue_cohort *cohort_of(const preemption *p, const gq_preempt_pod *r)
{
    for (size_t j = 0; r->borrowing && j < r->n_quotas; j++)
        if (p->quotas[r->quotas[j]].cohort)
            return p->quotas[r->quotas[j]].cohort;
    return NULL;
}

static gq_code read_running(preemption *p)
{
    const ctl_preempt_in *in = p->in;
    gq_code rc = all_quotas(p);
    if (!rc)
        rc = running_in(p->c, p->quotas, p->nq, in->now, &p->run, &p->n_run);
    if (rc)
        return rc;
    size_t n = p->n_run ? p->n_run : 1;
    p->victims = calloc(n, sizeof(*p->victims));
    p->allowed = calloc(n, sizeof(*p->allowed));
    if (!p->victims || !p->allowed ||
        plan_pods(p->c, p->run, p->n_run, p->quotas, in->now, &p->pods))
        return GQ_ENOMEM;
    for (size_t i = 0; i < p->n_run; i++)
        p->pods[i].cohort = cohort_of(p, &p->pods[i]);
    /* The room of the pods leaving: the pass counted it in its own quotas
     * when it held a preemptor, never in the other members of its cohorts. */
    return gq_preempt_leaving(p->pods, p->n_run, p->quotas, p->nq, in->leaving_known ? in->nq : 0);
}

/* Whether the unit fits quota qi within its nominal share: as if it had
 * no cohort. */
static bool fits_own_share(const preemption *p, const gq_queue_entry *members, size_t n, size_t qi)
{
    gq_queue_quota *alone = calloc(p->nq, sizeof(*alone));
    bool fits = false;
    if (!alone)
        return false;
    memcpy(alone, p->quotas, p->nq * sizeof(*alone));
    alone[qi].cohort = NULL;
    if (gq_queue_unit_fits(members, n, 0, alone, qi, &fits))
        fits = false;
    free(alone);
    return fits;
}

/* The preemptor's quota that reclaims: a member of a cohort (its GPUQuota
 * in its tenant's, its GPUTenantQuota in a cohort of tenants) with a
 * reclaimWithinCohort other than Never, in whose nominal share the unit
 * fits; one whose cohort keeps the unit out now first, then the first. */
static void reclaim_policy(const preemption *p, const gq_queue_entry *members, size_t n,
                           gq_preempt_ask *ask)
{
    const gq_queue_entry *e = &p->in->ents[p->who];
    for (int round = 0; round < 2; round++)
        for (size_t j = 0; j < e->n_quotas; j++) {
            size_t qi = e->quotas[j];
            const gq_queue_quota *pq = &p->quotas[qi];
            bool fits_now = false;
            if (!pq->cohort || pq->q->reclaim == GQ_RECLAIM_NEVER)
                continue;
            if (round == 0 &&
                (gq_queue_unit_fits(members, n, 0, p->quotas, qi, &fits_now) || fits_now))
                continue;
            if (!fits_own_share(p, members, n, qi))
                continue;
            ask->reclaim = pq->q->reclaim;
            ask->cohort = pq->cohort;
            return;
        }
}

/* Plan the victims of entry who's unit. GQ_ENOTFOUND: none would do. */
static gq_code plan_victims(preemption *p)
{
    const ctl_preempt_in *in = p->in;
    gq_queue_entry *members = NULL;
    size_t n_members = 0;
    gq_code rc = unit_members(in, p->who, &members, &n_members);
    if (!rc) {
        gq_preempt_ask ask = {.members = members,
                              .n_members = n_members,
                              .quotas = p->quotas,
                              .nq = p->nq,
                              .pods = p->pods,
                              .n_pods = p->n_run};
        reclaim_policy(p, members, n_members, &ask);
        p->reclaims = ask.reclaim != GQ_RECLAIM_NEVER;
        rc = gq_preempt_plan(&ask, p->victims, &p->n_victims, &p->err);
    }
    free(members);
    return rc;
}

static void pod_path(char *buf, size_t cap, const ctl_running *r, const char *sub)
{
    snprintf(buf, cap, "/api/v1/namespaces/%s/pods/%s%s", r->ns, r->name, sub);
}

/* The Eviction of r (dry_run: only asked whether a budget allows it). */
static gq_code evict(ctl_controller *c, const ctl_running *r, bool dry_run, gq_err *err)
{
    char path[700];
    pod_path(path, sizeof path, r, dry_run ? "/eviction?dryRun=All" : "/eviction");
    json_object *body = json_object_new_object(), *meta = json_object_new_object(),
                *pre = json_object_new_object();
    gq_code rc = GQ_ENOMEM;
    if (body && meta && pre) {
        json_object_object_add(body, "apiVersion", json_object_new_string("policy/v1"));
        json_object_object_add(body, "kind", json_object_new_string("Eviction"));
        json_object_object_add(meta, "name", json_object_new_string(r->name));
        json_object_object_add(meta, "namespace", json_object_new_string(r->ns));
        json_object_object_add(body, "metadata", meta);
        meta = NULL;
        /* The pod evicted is the one chosen, not one made since under its name. */
        json_object_object_add(pre, "uid", json_object_new_string(r->uid));
        json_object *opts = json_object_new_object();
        if (opts) {
            json_object_object_add(opts, "preconditions", pre);
            pre = NULL;
            json_object_object_add(body, "deleteOptions", opts);
        }
        rc = c->o.api->create(c->o.api->ctx, path, body, NULL, err);
    }
    json_object_put(body);
    json_object_put(meta);
    json_object_put(pre);
    return rc;
}

/* The condition DisruptionTarget on r, as kube-scheduler writes it when it
 * preempts, with gpuquota's reason: a JSON Patch of pods/status that tests
 * the uid. Best effort: a pod that changed or went meanwhile is left be. */
static void mark_target(ctl_controller *c, const ctl_running *r, const char *msg, int64_t now)
{
    char path[700], ts[GQ_RFC3339_MAX];
    json_object *pod = NULL;
    gq_err e;
    gq_err_clear(&e);
    pod_path(path, sizeof path, r, "");
    if (!c->o.api->patch_json || c->o.api->get(c->o.api->ctx, path, &pod, &e))
        return;
    json_object *conds = gq_json_get_array(gq_json_member(pod, "status"), "conditions");
    gq_time_format_rfc3339(now, ts);
    json_object *cond = json_object_new_object(), *patch = json_object_new_array(),
                *test = json_object_new_object(), *add = json_object_new_object();
    if (cond && patch && test && add) {
        json_object_object_add(cond, "type", json_object_new_string("DisruptionTarget"));
        json_object_object_add(cond, "status", json_object_new_string("True"));
        json_object_object_add(cond, "reason", json_object_new_string(PREEMPT_REASON));
        json_object_object_add(cond, "message", json_object_new_string(msg));
        json_object_object_add(cond, "lastTransitionTime", json_object_new_string(ts));
        json_object_object_add(test, "op", json_object_new_string("test"));
        json_object_object_add(test, "path", json_object_new_string("/metadata/uid"));
        json_object_object_add(test, "value", json_object_new_string(r->uid));
        json_object_array_add(patch, test);
        test = NULL;
        json_object *val = cond;
        if (!conds && (val = json_object_new_array()))
            json_object_array_add(val, cond);
        cond = NULL;
        json_object_object_add(add, "op", json_object_new_string("add"));
        json_object_object_add(
            add, "path",
            json_object_new_string(conds ? "/status/conditions/-" : "/status/conditions"));
        json_object_object_add(add, "value", val);
        json_object_array_add(patch, add);
        add = NULL;
        pod_path(path, sizeof path, r, "/status");
        if (c->o.api->patch_json(c->o.api->ctx, path, patch, NULL, &e))
            GQ_DEBUG("preempt: condition on pod %s/%s: %s", r->ns, r->name, e.msg);
    }
    json_object_put(cond);
    json_object_put(patch);
    json_object_put(test);
    json_object_put(add);
    json_object_put(pod);
}

static void pod_event(ctl_controller *c, const char *ns, const char *name, const char *uid,
                      const char *reason, const char *msg, int64_t now)
{
    json_object *obj = json_object_new_object(), *meta = json_object_new_object();
    if (obj && meta && !json_object_object_add(obj, "metadata", meta)) {
        json_object_object_add(meta, "uid", json_object_new_string(uid));
        ctl_post_event(c, obj, &(ctl_about){"v1", "Pod", ns, name}, reason, msg, now);
    } else {
        json_object_put(meta);
    }
    json_object_put(obj);
}

/* Ask whether every victim's disruption budget allows its eviction (a dry
 * run); a victim refused is spared for a while. false when one was. A pod
 * allowed is not asked again in this pass: the plans of the rounds and of
 * the preemptors tried take the same pods again and again, and a tenant
 * who protects every other one with a budget would have each asked once a
 * round of every preemptor tried (up to 96 times a pass). */
static bool budgets_allow(preemption *p)
{
    bool all = true;
    for (size_t v = 0; v < p->n_victims; v++) {
        const ctl_running *r = &p->run[p->victims[v]];
        gq_err e;
        gq_err_clear(&e);
        if (p->allowed[p->victims[v]])
            continue;
        gq_code rc = evict(p->c, r, true, &e);
        p->allowed[p->victims[v]] = rc == GQ_OK || rc == GQ_ENOTFOUND;
        if (p->allowed[p->victims[v]])
            continue;
        GQ_INFO("preempt: pod %s/%s may not be evicted now (%s): another victim is sought", r->ns,
                r->name, e.msg);
        atomic_fetch_add(&p->c->evictions_refused, 1);
        mark(p->c, p->c->evict_refused, r->uid, p->in->now + REFUSED_TTL_S);
        all = false;
    }
    return all;
}

/* Why running pod i is evicted: reclaimed when the preemptor reclaims and
 * it borrowed (marked, or naming a claim charged on borrowed capacity) in a
 * GPUQuota other than the preemptor's own (Kueue's InCohortReclaim); else
 * inside the quota (InClusterQueue). */
static int victim_reason(const preemption *p, size_t i)
{
    const gq_queue_entry *e = &p->in->ents[p->who];
    const ctl_running *r = &p->run[i];
    if (!p->reclaims || !p->pods[i].borrowing)
        return CTL_PREEMPT_WITHIN_QUOTA;
    for (size_t j = 0; j < r->n_quotas; j++)
        for (size_t k = 0; k < e->n_quotas; k++)
            if (r->quotas[j] == e->quotas[k] &&
                p->quotas[r->quotas[j]].q->kind == GQ_QUOTA_NAMESPACED)
                return CTL_PREEMPT_WITHIN_QUOTA;
    return CTL_PREEMPT_RECLAIM;
}

/* Count victim r, for reason, on its quota: the first GPUQuota it counts
 * in, else the first quota (gpuquota_preemption_victims_total). */
static void count_victim(const preemption *p, const ctl_running *r, int reason)
{
    const gq_quota *q = NULL;
    char key[KEY_MAX];
    for (size_t j = 0; j < r->n_quotas && (!q || q->kind != GQ_QUOTA_NAMESPACED); j++)
        if (!q || p->quotas[r->quotas[j]].q->kind == GQ_QUOTA_NAMESPACED)
            q = p->quotas[r->quotas[j]].q;
    const char *ns = q && q->namespace_ ? q->namespace_ : "";
    if (!q || !ctl_make_key(key, ns[0] ? 'q' : 't', ns, q->name))
        return;
    pthread_mutex_lock(&p->c->mu);
    kstate *k = ctl_ks_get(p->c, key, true);
    if (k && !k->name) {
        free(k->ns);
        k->ns = strdup(ns);
        k->name = strdup(q->name);
    }
    if (k && k->ns && k->name)
        k->victims[reason]++;
    pthread_mutex_unlock(&p->c->mu);
}

/* What a victim's condition and Event say: who preempted it, and under
 * which field (why: CTL_PREEMPT_*). */
static void victim_message(const preemption *p, int why, char *msg, size_t cap)
{
    const ctl_queued *who = &p->in->pods[p->who];
    snprintf(msg, cap, "preempted by pod %.253s/%.253s (priority %d) to make room in quota %s (%s)",
             who->ns, who->name, (int)who->priority, p->quota,
             why == CTL_PREEMPT_RECLAIM ? "preemption.reclaimWithinCohort"
                                        : "preemption.withinQuota");
}

/* Mark, evict and tell: every victim, then the preemptor. */
static void carry_out(preemption *p)
{
    const ctl_preempt_in *in = p->in;
    const ctl_queued *who = &in->pods[p->who];
    char msg[1024], names[700] = "";
    size_t done = 0;
    int reason = CTL_PREEMPT_WITHIN_QUOTA;
    for (size_t v = 0; v < p->n_victims; v++) {
        const ctl_running *r = &p->run[p->victims[v]];
        gq_err e;
        gq_err_clear(&e);
        int why = victim_reason(p, p->victims[v]);
        victim_message(p, why, msg, sizeof msg);
        mark_target(p->c, r, msg, in->now);
        gq_code rc = evict(p->c, r, false, &e);
        if (rc && rc != GQ_ENOTFOUND) {
            GQ_WARN("preempt: evicting pod %s/%s: %s", r->ns, r->name, e.msg);
            atomic_fetch_add(&p->c->evictions_refused, 1);
            mark(p->c, p->c->evict_refused, r->uid, in->now + REFUSED_TTL_S);
            continue;
        }
        mark(p->c, p->c->evicting, r->uid, in->now + EVICTING_TTL_S);
        count_victim(p, r, why);
        if (why == CTL_PREEMPT_RECLAIM)
            reason = why;
        pod_event(p->c, r->ns, r->name, r->uid, "Preempted", msg, in->now);
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s/%s", done++ ? ", " : "", r->ns, r->name);
    }
    mark_unit(p->c, p->c->nominated, in, p->who, in->now + NOMINATED_TTL_S);
    atomic_fetch_add(&p->c->preemptions[reason], 1);
    snprintf(msg, sizeof msg, "evicting %zu pod(s) to make room in quota %s: %s", done, p->quota,
             names);
    pod_event(p->c, who->ns, who->name, who->uid, "Preempting", msg, in->now);
    GQ_INFO("preempt: pod %s/%s %s", who->ns, who->name, msg);
}

/* Whether a pod was spared because a budget refused its eviction. */
static bool any_spared(const preemption *p)
{
    for (size_t i = 0; i < p->n_run; i++)
        if (p->pods[i].spared)
            return true;
    return false;
}

/* Seek victims for p->who's unit and evict them, or nominate it when the
 * pods leaving make its room: *done then, with the pass to run again
 * soon. Otherwise (nobody may be evicted for it) it is passed over for a
 * while, and *again_ms says when a budget's refusal that stood in the way
 * is forgotten. GQ_ENOTFOUND is no error here. */
static gq_code preempt_one(preemption *p, bool *done, long *again_ms)
{
    ctl_controller *c = p->c;
    const ctl_preempt_in *in = p->in;
    gq_code rc = GQ_OK;
    *done = false;
    p->quota = in->pq[in->dec[p->who].quota].q->name;
    for (int round = 0; round < 3; round++) {
        p->n_victims = 0;
        gq_err_clear(&p->err);
        if ((rc = plan_victims(p)))
            break;
        if (!p->n_victims) {
            /* Room once the pods leaving are gone: hold it. */
            mark_unit(c, c->nominated, in, p->who, in->now + NOMINATED_TTL_S);
            *done = true;
            again_in(again_ms, 200);
            return GQ_OK;
        }
        if (!budgets_allow(p)) {
            for (size_t i = 0; i < p->n_run; i++)
                p->pods[i].spared = marked(c, c->evict_refused, p->run[i].uid, in->now);
            continue;
        }
        carry_out(p);
        *done = true;
        again_in(again_ms, 200);
        return GQ_OK;
    }
    if (rc && rc != GQ_ENOTFOUND)
        return rc;
    mark_unit(c, c->no_victims, in, p->who, in->now + NO_VICTIMS_TTL_S);
    /* Nobody may be evicted now because a budget said no: ask again when
     * the refusal is forgotten. */
    if (any_spared(p))
        again_in(again_ms, (REFUSED_TTL_S + 1) * 1000L);
    return GQ_OK;
}

long ctl_preempt(ctl_controller *c, const ctl_preempt_in *in)
{
    preemption p = {.c = c, .in = in};
    long again_ms = 0;
    bool done = false;
    gq_err_clear(&p.err);
    sweep(c, in->now);
    if (next_preemptor(c, in, &again_ms) == SIZE_MAX)
        return again_ms;
    gq_code rc = read_running(&p);
    /* The first waiting pod for which some pods may be evicted: one that
     * has nobody to evict (its pods in reach are all of its priority, or
     * another quota would still keep it out) never stops the next, of its
     * namespace or of another tenant's. */
    for (int tries = 0; !rc && !done; tries++) {
        if ((p.who = next_preemptor(c, in, &again_ms)) == SIZE_MAX)
            break;
        if (tries == TRIES_PER_PASS) {
            again_in(&again_ms, 200); /* the others' turn, in the next pass */
            break;
        }
        rc = preempt_one(&p, &done, &again_ms);
    }
    if (rc)
        GQ_WARN("preempt: %s", p.err.msg[0] ? p.err.msg : gq_strerror(rc));
    preemption_dispose(&p);
    return again_ms;
}
