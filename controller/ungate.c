/* The queue admitter (docs/queueing.md): on the leader, one pass at a time
 * reads the queued pods and the quotas governing them, plans which can be
 * admitted now (gq_queue_plan), charges them in the quotas' statuses and
 * ungates them, and says in an Event why the others wait. */
#include "controller/ctl_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gq_log.h"
#include "common/hash.h"
#include "common/json_member.h"
#include "controller/fanout.h"
#include "quota/record.h"

/* A reservation the controller writes for a queued pod lives this long: the
 * ungate follows at once, and one whose ungate never came (a crash and no
 * new leader) frees the quota afterwards. */
#define CTL_QUEUE_RESERVATION_TTL_S 120

_Static_assert(CTL_UNGATE_INFLIGHT_MAX <= CTL_FANOUT_MAX, "ctl_fanout keeps that many in flight");

void ctl_ungate_kick(ctl_controller *c)
{
    if (ctl_workqueue_add(c->queue, ADMIT_KEY))
        GQ_ERROR("%s: cannot queue: out of memory", ADMIT_KEY);
}

/* One quota governing queued pods, as the informer's cache (or our own
 * last write of it) shows it. */
typedef struct aquota {
    json_object *obj;   /* as read; its status becomes st's at the write */
    gq_quota_status st; /* obj's status with the pass's charges, once decoded */
    bool decoded;       /* st holds obj's status */
    gq_quota *q;
    char key[KEY_MAX];
    char path[700];
    char *cache_rv; /* the resourceVersion the cache showed (NULL: listed live) */
    uint64_t ns_h;  /* gq_fnv1a of its namespace (a GPUQuota's) */
    bool dirty;     /* reservations added, or a reconcile's status handed over: write */
    gq_code rc;     /* how its write went */
} aquota;

typedef struct admit_ctx {
    ctl_controller *c;
    json_object *objs; /* array of quota objects (copies from the caches) */
    json_object *nss;  /* {namespace: null} of the queued pods; NULL: every one */
} admit_ctx;

/* Copy a cached quota into objs: a GPUTenantQuota always, a GPUQuota only
 * in a namespace with queued pods (it governs none elsewhere). A pass runs
 * at every change of any pod or quota; copying every quota of the cluster
 * each time was most of its cost while one namespace's pods waited. */
static int collect_quota_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    (void)name;
    admit_ctx *a = ud;
    json_object *copy = NULL;
    if (ns && ns[0] && a->nss && !json_object_object_get_ex(a->nss, ns, NULL))
        return 0;
    if (json_object_deep_copy((json_object *)rec, &copy, NULL) == 0 &&
        json_object_array_add(a->objs, copy))
        json_object_put(copy);
    return 0;
}

/* "exceeded quota: NAME, requested: ..., used: ..., limited: ..." for the
 * keys of q that in_use + need would pass: Kubernetes' quota wording. The
 * limits are spec.hard (model_limit < 0) or spec.models.<m> (keys printed
 * "m/gpu-memory", as /validate prints them); in_use is the planner's for
 * those limits. */
static void no_room_message(const gq_quota *q, int model_limit, const gq_queue_quota *pq,
                            const gq_amounts *need, const char *group, char *buf, size_t cap)
{
    char req[256] = "", used[256] = "", lim[256] = "";
    bool per_model = model_limit >= 0 && (size_t)model_limit < q->n_models;
    const gq_amounts *hard = per_model ? &q->models[model_limit].hard : &q->hard;
    const gq_amounts *in_use = per_model ? &pq->model_in_use[model_limit] : &pq->in_use;
    const char *m = per_model ? q->models[model_limit].name : "", *sl = per_model ? "/" : "";
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t sum;
        if (!hard->set[k] || need->v[k] <= 0)
            continue;
        if (!__builtin_add_overflow(in_use->v[k], need->v[k], &sum) && sum <= hard->v[k])
            continue;
        char a[GQ_QUANTITY_STR_MAX], b[GQ_QUANTITY_STR_MAX], h[GQ_QUANTITY_STR_MAX];
        gq_amount_format(need, (gq_qkey)k, a);
        gq_amount_format(in_use, (gq_qkey)k, b);
        gq_amount_format(hard, (gq_qkey)k, h);
        const char *name = gq_qkey_name((gq_qkey)k);
        size_t l;
        l = strlen(req);
        snprintf(req + l, sizeof req - l, "%s%s%s%s=%s", l ? "," : "", m, sl, name, a);
        l = strlen(used);
        snprintf(used + l, sizeof used - l, "%s%s%s%s=%s", l ? "," : "", m, sl, name, b);
        l = strlen(lim);
        snprintf(lim + l, sizeof lim - l, "%s%s%s%s=%s", l ? "," : "", m, sl, name, h);
    }
    const char *g = group ? "pod group " : "", *gn = group ? group : "",
               *gw = group ? " waits: " : "", *kind = q->kind == GQ_QUOTA_TENANT ? "tenant " : "";
    if (req[0]) {
        snprintf(buf, cap, "%s%s%sexceeded %squota: %s, requested: %s, used: %s, limited: %s", g,
                 gn, gw, kind, q->name, req, used, lim);
        return;
    }
    /* Within hard on every key: what it may use is lent to its cohort. */
    snprintf(buf, cap,
             "%s%s%s%squota %s has room within its hard, but its cohort%s%s lends it to members "
             "that borrow it now; %s",
             g, gn, gw, kind, q->name, q->cohort ? " " : "", q->cohort ? q->cohort : "",
             q->reclaim == GQ_RECLAIM_NEVER
                 ? "it waits until their pods end (reclaimWithinCohort: Never)"
                 : "reclaim takes it back from them");
}

/* Whether why a queued pod waits changed since it was last said (why: the
 * state and the quota, not the figures of the message), remembering it:
 * an Event goes once per reason, so usage moving under a long queue does
 * not post an Event for every pod in it. */
static bool why_changed(ctl_controller *c, const ctl_queued *p, const char *why)
{
    pthread_mutex_lock(&c->mu);
    json_object *old = NULL;
    bool same = json_object_object_get_ex(c->q_events, p->uid, &old) &&
                !strcmp(json_object_get_string(old), why);
    if (!same)
        json_object_object_add(c->q_events, p->uid, json_object_new_string(why));
    pthread_mutex_unlock(&c->mu);
    return !same;
}

/* Post the Event (reason Queued) saying why p waits. */
static void queued_event(ctl_controller *c, const ctl_queued *p, const char *msg, int64_t now)
{
    json_object *obj = json_object_new_object(), *meta = json_object_new_object();
    if (obj && meta && !json_object_object_add(obj, "metadata", meta)) {
        json_object_object_add(meta, "uid", json_object_new_string(p->uid));
        ctl_post_event(c, obj, &(ctl_about){"v1", "Pod", p->ns, p->name}, "Queued", msg, now);
    } else {
        json_object_put(meta);
    }
    json_object_put(obj);
}

void ctl_wait_observe(ctl_controller *c, const char *qkey, double s);

/* Remove the gate from p with one JSON Patch (gq_queue_ungate_patch). When
 * the patch's tests fail (the gates moved), read the pod and try again at
 * the gate's new place; a pod whose gate is gone needs nothing. */
static gq_code ungate(ctl_controller *c, const ctl_queued *p, gq_err *err)
{
    char path[700];
    int idx = p->gate_idx;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", p->ns, p->name);
    if (!c->o.api->patch_json)
        return gq_err_set(err, GQ_EINVAL, "the API seam cannot patch pods");
    for (int attempt = 0; attempt < 3; attempt++) {
        json_object *patch = NULL, *cur = NULL;
        gq_code rc = GQ_OK;
        if (p->pin) {
            /* The model chosen is pinned in the same patch; the pin is
             * computed on the pod as stored (its uid is tested). */
            rc = c->o.api->get(c->o.api->ctx, path, &cur, err);
            if (!rc) {
                gq_queue_pin pin = {c->o.cfg, cur, p->pin, gq_pod_stored_trust(cur)};
                int now_idx = gq_pod_gate_index(cur);
                if (now_idx < 0) {
                    json_object_put(cur);
                    return GQ_OK; /* ungated already */
                }
                idx = now_idx;
                rc = gq_queue_ungate_patch(p->uid, idx, &pin, &patch, err);
            }
            json_object_put(cur);
        } else {
            rc = gq_queue_ungate_patch(p->uid, idx, NULL, &patch, err);
        }
        if (rc || (p->borrowing && (rc = gq_queue_mark_borrowing(patch, err)))) {
            json_object_put(patch);
            return rc;
        }
        rc = c->o.api->patch_json(c->o.api->ctx, path, patch, NULL, err);
        json_object_put(patch);
        if (rc == GQ_OK || rc == GQ_ENOTFOUND)
            return rc;
        GQ_DEBUG("queue: ungating pod %s/%s at gate %d: %s", p->ns, p->name, idx, err->msg);
        json_object *pod = NULL;
        gq_err e2;
        gq_err_clear(&e2);
        gq_code g = c->o.api->get(c->o.api->ctx, path, &pod, &e2);
        if (g == GQ_ENOTFOUND)
            return GQ_ENOTFOUND;
        if (g) {
            json_object_put(pod);
            return rc;
        }
        const char *uid = gq_json_meta_string(pod, "uid");
        int now_idx = gq_pod_gate_index(pod);
        bool same = uid && !strcmp(uid, p->uid);
        json_object_put(pod);
        if (!same)
            return GQ_ENOTFOUND; /* another pod under the name now */
        if (now_idx < 0)
            return GQ_OK; /* ungated already */
        idx = now_idx;
    }
    gq_err_prefix(err, "the gates of pod %s/%s keep changing", p->ns, p->name);
    return err->code ? err->code : GQ_ECONFLICT;
}

/* Whether a pod the plan left waiting names a shared ResourceClaim that a
 * pod it admitted names too: the claim is charged now, and the waiting pod
 * owes less than it was planned at. */
static bool claims_charged_for_waiting(const ctl_queued *pods, const gq_queue_decision *dec,
                                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dec[i].state != GQ_QSTATE_NO_ROOM || !pods[i].n_claims)
            continue;
        for (size_t j = 0; j < n; j++) {
            if (dec[j].state != GQ_QSTATE_ADMIT)
                continue;
            for (size_t a = 0; a < pods[i].n_claims; a++)
                for (size_t b = 0; b < pods[j].n_claims; b++)
                    if (!strcmp(pods[i].claims[a].uid, pods[j].claims[b].uid))
                        return true;
        }
    }
    return false;
}

static void aquotas_free(aquota *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        json_object_put(v[i].obj);
        free(v[i].cache_rv);
        gq_quota_status_dispose(&v[i].st);
        gq_quota_free(v[i].q);
    }
    free(v);
}

/* An admitted pod in the order of the ungates: its unit's priority and
 * place (a group stands in line at its first member's, whose priority is
 * the group's highest), then its own place. */
typedef struct ungate_job {
    size_t i;          /* into pods */
    const char *ns;    /* its namespace */
    const char *group; /* "ns/name"; NULL: alone */
    int32_t priority;  /* of its unit */
    size_t unit_pos;   /* of its unit: 1-based place in the order */
    size_t pos;        /* its own */
    size_t order;      /* its place among the pods of its priority */
    size_t run;        /* the order of the first pod of its run (ungate_runs) */
    gq_code rc;        /* how its ungate went */
} ungate_job;

/* Everything one admission pass reads and decides. */
typedef struct admit_pass {
    ctl_controller *c;
    int64_t now;
    ctl_queued *pods; /* the queued pods, not ungated here already */
    size_t n;
    uint64_t *ns_h;       /* parallel to pods: gq_fnv1a of each one's namespace */
    json_object *running; /* {"ns/group": members running} */
    json_object *objs;    /* quota objects copied from the caches, then those listed live */
    size_t n_cached;      /* how many of objs came from the caches */
    aquota *qs;           /* the quotas governing queued pods, read fresh */
    gq_queue_quota *pq;   /* parallel to qs: what the planner charges */
    size_t nq;
    gq_queue_entry *ents; /* parallel to pods */
    gq_queue_decision *dec;
    size_t *qidx;           /* per entry, stride slots: indices into qs */
    bool *paid;             /* parallel to qidx */
    size_t stride;          /* nq (at least 1): slots of qidx and paid per entry */
    gq_model_option *popts; /* per entry, GQ_MAX_MODEL_CHOICES: options priced for the plan */
    const gq_quota **eq;    /* scratch: the quotas of one entry */
    size_t *slots;          /* scratch: indices into qs (stride of them) */
    ungate_job *jobs;       /* scratch: the admitted pods (n at most) */
    size_t *due;            /* scratch: the waiting pods whose Event is due (n at most) */
    unsigned width;         /* requests in flight at once (ctl_fanout) */
    ctl_cohorts co;         /* borrowing: the cohorts of pq (cohort.c) */
    bool leaving_known;     /* pq's leaving counted: a preemptor is held */
    gq_err err;
} admit_pass;

/* How a step of the pass went. */
typedef enum pass_step {
    STEP_OK,     /* go on */
    STEP_DONE,   /* nothing (more) to do */
    STEP_STALE,  /* a quota changed under us (409): again, on fresh reads */
    STEP_FAILED, /* an error: again, after backoff */
} pass_step;

static void pass_dispose(admit_pass *a)
{
    ctl_cohorts_dispose(&a->co);
    aquotas_free(a->qs, a->nq);
    free(a->ents);
    free(a->dec);
    free(a->qidx);
    free(a->paid);
    free(a->pq);
    free(a->popts);
    free(a->eq);
    free(a->slots);
    free(a->jobs);
    free(a->due);
    free(a->ns_h);
    ctl_queued_free(a->pods, a->n);
    json_object_put(a->running);
    json_object_put(a->objs);
}

/* Read, under the lock: pods ungated by this replica whose change the cache
 * has not shown yet are charged and done (dropped from pods); forget the
 * ones it has shown, and the event reasons of pods no longer queued.
 * Returns how many pods remain. */
static size_t drop_ungated(ctl_controller *c, ctl_queued *pods, size_t n)
{
    pthread_mutex_lock(&c->mu);
    json_object *still = json_object_new_object();
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *t = NULL;
        if (json_object_object_get_ex(c->ungated, pods[i].uid, &t)) {
            if (still)
                json_object_object_add(still, pods[i].uid, json_object_get(t));
            ctl_queued_dispose(&pods[i]);
            continue;
        }
        pods[keep++] = pods[i];
    }
    if (still) {
        json_object_put(c->ungated);
        c->ungated = still;
    }
    /* The reasons kept are rebuilt only when some belong to pods no
     * longer queued: with a long queue, most passes have none to forget. */
    size_t said = 0;
    for (size_t i = 0; i < keep; i++)
        said += json_object_object_get_ex(c->q_events, pods[i].uid, NULL);
    json_object *ev =
        said < (size_t)json_object_object_length(c->q_events) ? json_object_new_object() : NULL;
    for (size_t i = 0; ev && i < keep; i++) {
        json_object *t = NULL;
        if (json_object_object_get_ex(c->q_events, pods[i].uid, &t))
            json_object_object_add(ev, pods[i].uid, json_object_get(t));
    }
    if (ev) {
        json_object_put(c->q_events);
        c->q_events = ev;
    }
    pthread_mutex_unlock(&c->mu);
    return keep;
}

/* How long a live list that found no GPUQuota in a namespace stands in for
 * the next passes, as the webhooks' live reads of an empty scope do
 * (webhook/kubestore.c, EMPTY_TTL_MS) and Kubernetes' ResourceQuota
 * admission (liveTTL). */
#define QUOTA_EMPTY_TTL_S 30

typedef struct live_add {
    json_object *objs;
    size_t n;
} live_add;

static gq_code live_add_fn(void *ud, json_object *item, gq_err *err)
{
    live_add *l = ud;
    if (json_object_array_add(l->objs, json_object_get(item))) {
        json_object_put(item);
        return gq_err_oom(err);
    }
    l->n++;
    return GQ_OK;
}

/* Whether a live list found ns without GPUQuota less than the TTL ago. */
static bool empty_known(ctl_controller *c, const char *ns, int64_t now)
{
    pthread_mutex_lock(&c->mu);
    json_object *until = gq_json_member(c->quota_empty, ns);
    bool known = until && json_object_get_int64(until) > now;
    pthread_mutex_unlock(&c->mu);
    return known;
}

static void note_empty(ctl_controller *c, const char *ns, int64_t until)
{
    pthread_mutex_lock(&c->mu);
    if (json_object_object_length(c->quota_empty) > 4096) { /* bounded: forget one */
        json_object_object_foreach(c->quota_empty, k, v)
        {
            (void)v;
            json_object_object_del(c->quota_empty, k);
            break;
        }
    }
    json_object_object_add(c->quota_empty, ns, json_object_new_int64(until));
    pthread_mutex_unlock(&c->mu);
}

/* Read: the GPUQuotas of the queued pods' namespaces that the cache holds
 * none of, and the GPUTenantQuotas when it holds none at all, live. A
 * quota created just before its pods (its watch event still on its way)
 * must govern them from the first pass, as the webhooks' live reads make it
 * govern their admission: planned without it, they would be admitted on
 * their tenant's room alone, above its hard and not marked as borrowing. A
 * scope found empty (key "": the tenants) is not listed again for
 * QUOTA_EMPTY_TTL_S; a failed list fails the pass. */
static pass_step read_uncached(admit_pass *a)
{
    ctl_controller *c = a->c;
    json_object *done = json_object_new_object();
    if (!done || !c->o.api->list) {
        json_object_put(done);
        return done ? STEP_OK : STEP_FAILED;
    }
    for (size_t j = 0; j < json_object_array_length(a->objs); j++) {
        const char *ns = gq_json_meta_string(json_object_array_get_idx(a->objs, j), "namespace");
        json_object_object_add(done, ns ? ns : "", NULL); /* "": some tenant is cached */
    }
    pass_step st = STEP_OK;
    for (size_t i = 0; i <= a->n && st == STEP_OK; i++) {
        /* Each pod's namespace, then "": the tenants, when none is cached. */
        const char *ns = i < a->n ? a->pods[i].ns : "";
        char path[600];
        if (json_object_object_get_ex(done, ns, NULL) || empty_known(c, ns, a->now))
            continue;
        json_object_object_add(done, ns, NULL);
        if (ns[0])
            snprintf(path, sizeof path, API_GQ "/namespaces/%s/gpuquotas", ns);
        else
            snprintf(path, sizeof path, API_GQ "/gputenantquotas");
        live_add l = {a->objs, 0};
        if (c->o.api->list(c->o.api->ctx, path, NULL, live_add_fn, &l, NULL, &a->err)) {
            GQ_WARN("queue: listing %s: %s", path, a->err.msg);
            st = STEP_FAILED;
        } else if (!l.n) {
            note_empty(c, ns, a->now + QUOTA_EMPTY_TTL_S);
        }
    }
    json_object_put(done);
    return st;
}

/* Read: the queued pods and the cached quota objects (and those of the
 * pods' namespaces the cache does not hold yet); the pass's arrays. */
static pass_step read_queue(admit_pass *a)
{
    ctl_controller *c = a->c;
    if (!(a->objs = json_object_new_array()) ||
        ctl_podstore_queued(c->store, a->now, &a->pods, &a->n, &a->running))
        return STEP_FAILED;
    a->n = drop_ungated(c, a->pods, a->n);
    if (!a->n)
        return STEP_DONE;
    admit_ctx ac = {c, a->objs, json_object_new_object()};
    for (size_t i = 0; ac.nss && i < a->n; i++)
        json_object_object_add(ac.nss, a->pods[i].ns, NULL);
    kube_cache_foreach(c->quotas, collect_quota_fn, &ac);
    kube_cache_foreach(c->tenants, collect_quota_fn, &ac);
    json_object_put(ac.nss);
    a->n_cached = json_object_array_length(a->objs);
    if (read_uncached(a) != STEP_OK)
        return STEP_FAILED;
    size_t nobj = json_object_array_length(a->objs), cap = nobj ? nobj : 1;
    a->qs = calloc(cap, sizeof(*a->qs));
    a->pq = calloc(cap, sizeof(*a->pq));
    a->eq = calloc(cap, sizeof(*a->eq));
    a->slots = calloc(cap, sizeof(*a->slots));
    a->jobs = calloc(a->n, sizeof(*a->jobs));
    a->due = calloc(a->n, sizeof(*a->due));
    a->ents = calloc(a->n, sizeof(*a->ents));
    a->dec = calloc(a->n, sizeof(*a->dec));
    a->popts = calloc(a->n * GQ_MAX_MODEL_CHOICES, sizeof(*a->popts));
    a->ns_h = malloc(a->n * sizeof(*a->ns_h));
    bool ok = a->qs && a->pq && a->eq && a->slots && a->jobs && a->due && a->ents && a->dec &&
              a->popts && a->ns_h;
    for (size_t i = 0; ok && i < a->n; i++)
        a->ns_h[i] = gq_fnv1a(a->pods[i].ns);
    return ok ? STEP_OK : STEP_FAILED;
}

/* Whether q (of namespace hash q_ns_h) limits and matches queued pod i. A
 * GPUQuota of another namespace is ruled out first, by the hashes, before
 * the store's lock: with many quotas and many queued pods, most pairs are
 * that. */
static bool governs(const admit_pass *a, const gq_quota *q, uint64_t q_ns_h, size_t i)
{
    const ctl_queued *p = &a->pods[i];
    if (q->kind == GQ_QUOTA_NAMESPACED &&
        (!q->namespace_ || q_ns_h != a->ns_h[i] || strcmp(q->namespace_, p->ns)))
        return false;
    gq_pod_facts f = {p->ns, p->priority_class, p->terminating, false, p->model};
    return gq_quota_limits(q, &p->charge) && ctl_podstore_matches(a->c->store, q, &f);
}

/* Whether q (a cached spec) limits and matches some queued pod. */
static bool governs_queued(const admit_pass *a, const gq_quota *q)
{
    uint64_t h = q->namespace_ ? gq_fnv1a(q->namespace_) : 0;
    for (size_t i = 0; i < a->n; i++)
        if (governs(a, q, h, i))
            return true;
    return false;
}

/* Read: quota q (the spec of obj) into qs[nq]: obj as the informer's cache
 * shows it (cached), or as our own last write of it or a read after a 409
 * left it while the cache has not caught up (ctl_quota_newest); as listed
 * live when the cache held none; with the status a reconcile handed over
 * for that version (ctl_quota_handoff: a pod ended), written by this pass
 * whatever it admits. Its status is what the plan counts and its
 * resourceVersion what the charge is written against: a stale one costs a
 * 409 and a re-read, never a charge the status read does not allow
 * (docs/queueing.md, "Life of a queued pod"). */
static pass_step read_quota(admit_pass *a, json_object *obj, bool cached, const gq_quota *q)
{
    ctl_controller *c = a->c;
    aquota *aq = &a->qs[a->nq];
    bool tenant = q->kind == GQ_QUOTA_TENANT;
    const char *ns = tenant ? "" : q->namespace_;
    ctl_make_key(aq->key, tenant ? 't' : 'q', ns, q->name);
    ctl_quota_path(aq->path, sizeof aq->path, ns, q->name);
    aq->ns_h = gq_fnv1a(ns);
    const char *rv = gq_json_meta_string(obj, "resourceVersion");
    if (cached && rv && !(aq->cache_rv = strdup(rv)))
        return STEP_FAILED;
    aq->obj = cached ? ctl_quota_newest(c, aq->key, json_object_get(obj)) : json_object_get(obj);
    json_object *handed =
        cached ? ctl_quota_take_handoff(c, aq->key, gq_json_meta_string(aq->obj, "resourceVersion"))
               : NULL;
    if (handed) {
        json_object_put(aq->obj);
        aq->obj = handed;
        aq->dirty = true;
    }
    if (gq_quota_parse(aq->obj, &aq->q, &a->err) != GQ_OK) {
        GQ_WARN("queue: cannot read %s: %s", aq->path, a->err.msg);
        json_object_put(aq->obj);
        aq->obj = NULL;
        free(aq->cache_rv);
        aq->cache_rv = NULL;
        return STEP_FAILED;
    }
    gq_queue_quota *pq = &a->pq[a->nq++];
    bool bad = gq_quota_in_use(aq->q, a->now, NULL, &pq->in_use, &a->err) != GQ_OK;
    for (size_t m = 0; !bad && m < aq->q->n_models && m < GQ_CRD_MAX_QUOTA_MODELS; m++)
        bad = gq_quota_model_in_use(aq->q, &aq->q->models[m], a->now, NULL, &pq->model_in_use[m],
                                    &a->err) != GQ_OK;
    if (bad)
        return STEP_FAILED;
    pq->q = aq->q;
    return STEP_OK;
}

/* Read: which quotas govern which queued pods, on the cached specs (the
 * first n_cached objects; the rest were listed live); then room for each
 * entry's quotas (nq slots each). */
static pass_step read_quotas(admit_pass *a)
{
    size_t nobj = json_object_array_length(a->objs);
    for (size_t j = 0; j < nobj; j++) {
        gq_quota *q = NULL;
        json_object *obj = json_object_array_get_idx(a->objs, j);
        if (ctl_quota_parse_spec(obj, &q, &a->err) != GQ_OK)
            continue; /* invalid spec: its reconcile reports it; it charges nothing */
        pass_step st = governs_queued(a, q) ? read_quota(a, obj, j < a->n_cached, q) : STEP_OK;
        gq_quota_free(q);
        if (st != STEP_OK)
            return st;
    }
    a->stride = a->nq ? a->nq : 1;
    a->qidx = calloc(a->n * a->stride, sizeof(*a->qidx));
    a->paid = calloc(a->n * a->stride, sizeof(*a->paid));
    return a->qidx && a->paid ? STEP_OK : STEP_FAILED;
}

/* The live reservation keyed uid in q, or NULL. */
static const gq_reservation *live_reservation(const gq_quota *q, const char *uid, int64_t now)
{
    for (size_t r = 0; r < q->n_reservations; r++)
        if (!strcmp(q->reservations[r].key, uid) && q->reservations[r].expires > now)
            return &q->reservations[r];
    return NULL;
}

/* Evaluate: the quotas entry i charges (those that limit and match its pod)
 * and whether it holds a reservation in each already. */
static void entry_quotas(admit_pass *a, size_t i)
{
    const ctl_queued *p = &a->pods[i];
    gq_queue_entry *e = &a->ents[i];
    size_t m = 0;
    for (size_t j = 0; j < a->nq; j++) {
        if (!governs(a, a->qs[j].q, a->qs[j].ns_h, i))
            continue;
        a->qidx[i * a->stride + m] = j;
        a->paid[i * a->stride + m] = live_reservation(a->qs[j].q, p->uid, a->now) != NULL;
        a->eq[m++] = a->qs[j].q;
    }
    e->quotas = &a->qidx[i * a->stride];
    e->paid = &a->paid[i * a->stride];
    e->n_quotas = m;
}

/* Evaluate: the options of entry i priced for the plan. One already charged
 * (a reservation carries its model) keeps that model. */
static void entry_options(admit_pass *a, size_t i)
{
    const ctl_queued *p = &a->pods[i];
    gq_queue_entry *e = &a->ents[i];
    gq_model_option *o = &a->popts[i * GQ_MAX_MODEL_CHOICES];
    for (size_t k = 0; k < p->n_opts; k++) {
        o[k].model = p->opts[k].model;
        ctl_plan_charge(&p->opts[k].charge, p->claims, p->n_claims, a->eq, e->n_quotas, a->now,
                        &o[k].charge);
    }
    if (!p->n_opts)
        return;
    e->options = o;
    e->n_options = p->n_opts;
    const char *held = NULL;
    for (size_t j = 0; j < a->nq && !held; j++) {
        const gq_reservation *r = live_reservation(a->qs[j].q, p->uid, a->now);
        held = r ? r->model : NULL;
    }
    for (size_t k = 0; held && k < p->n_opts; k++)
        if (!strcmp(p->opts[k].model, held)) {
            e->options = &o[k];
            e->n_options = 1;
        }
}

/* Evaluate: the planner's entry for queued pod i. */
static void build_entry(admit_pass *a, size_t i)
{
    ctl_queued *p = &a->pods[i];
    gq_queue_entry *e = &a->ents[i];
    e->uid = p->uid;
    e->priority = p->priority;
    e->created_us = p->created_us;
    e->model = p->model;
    e->held = ctl_preempt_held(a->c, p->uid, a->now);
    if (p->group) {
        char gk[600];
        json_object *r = NULL;
        snprintf(gk, sizeof gk, "%s/%s", p->ns, p->group);
        free(p->group);
        p->group = strdup(gk);
        e->group = p->group;
        e->group_size = p->group_size;
        e->group_running =
            json_object_object_get_ex(a->running, gk, &r) ? json_object_get_int64(r) : 0;
    }
    entry_quotas(a, i);
    /* A shared claim its quotas charge already costs it nothing more. */
    ctl_plan_charge(&p->charge, p->claims, p->n_claims, a->eq, e->n_quotas, a->now, &e->charge);
    entry_options(a, i);
}

/* Whether entry i plans shared claim uid: some quota it charges does not
 * charge the claim yet (ctl_plan_charge kept it in). */
static bool plans_claim(const admit_pass *a, size_t i, const char *uid)
{
    const gq_queue_entry *e = &a->ents[i];
    for (size_t m = 0; m < e->n_quotas; m++)
        if (!ctl_quota_charges_claim(a->qs[e->quotas[m]].q, uid, a->now))
            return true;
    return !e->n_quotas;
}

static bool has_paid(const admit_pass *a, size_t i)
{
    for (size_t m = 0; m < a->ents[i].n_quotas; m++)
        if (a->ents[i].paid[m])
            return true;
    return false;
}

static bool names_claim(const ctl_queued *p, const char *uid)
{
    for (size_t k = 0; k < p->n_claims; k++)
        if (!strcmp(p->claims[k].uid, uid))
            return true;
    return false;
}

/* Whether a member of pod i's group before it, unpaid, plans claim uid. */
static bool earlier_member_plans(const admit_pass *a, size_t i, const char *uid)
{
    for (size_t j = 0; j < i; j++)
        if (a->pods[j].group && !strcmp(a->pods[j].group, a->pods[i].group) &&
            names_claim(&a->pods[j], uid) && !has_paid(a, j) && plans_claim(a, j, uid))
            return true;
    return false;
}

/* Members of a pod group are admitted all or nothing, so a shared claim
 * several unpaid members name is planned once, on the first of them (the
 * charges written then hold it once too: ctl_ungate_charge). */
static void group_claims_once(admit_pass *a)
{
    for (size_t i = 0; i < a->n; i++) {
        const ctl_queued *p = &a->pods[i];
        if (!p->group || has_paid(a, i))
            continue;
        for (size_t k = 0; k < p->n_claims; k++) {
            const gq_shared_claim *c = &p->claims[k];
            if (!plans_claim(a, i, c->uid) || !earlier_member_plans(a, i, c->uid))
                continue;
            gq_charge_own(&a->ents[i].charge, c, 1, &a->ents[i].charge);
            for (size_t o = 0; o < p->n_opts; o++) {
                gq_model_option *opt = &a->popts[i * GQ_MAX_MODEL_CHOICES + o];
                gq_charge_own(&opt->charge, c, 1, &opt->charge);
            }
        }
    }
}

/* Evaluate: which queued pods can be admitted now (gq_queue_plan). */
static pass_step plan(admit_pass *a)
{
    for (size_t i = 0; i < a->n; i++)
        build_entry(a, i);
    group_claims_once(a);
    if (ctl_cohorts_attach(a->c, a->pq, a->nq, a->now, &a->co))
        return STEP_FAILED;
    a->leaving_known = ctl_preempt_leaving(a->c, a->ents, a->n, a->pq, a->nq, a->now);
    if (gq_queue_plan(a->ents, a->n, a->pq, a->nq, a->dec, &a->err) != GQ_OK) {
        GQ_ERROR("queue: %s", a->err.msg);
        return STEP_FAILED;
    }
    return STEP_OK;
}

/* Admitted pod i takes the model the planner chose among several: its
 * charge on that model, and the model its ungate pins. */
static void take_choice(admit_pass *a, size_t i)
{
    ctl_queued *p = &a->pods[i];
    const gq_queue_entry *e = &a->ents[i];
    if (!e->n_options)
        return;
    const gq_model_option *chosen = &e->options[a->dec[i].option];
    size_t at = (size_t)(chosen - &a->popts[i * GQ_MAX_MODEL_CHOICES]);
    p->charge = p->opts[at].charge;
    p->model = chosen->model;
    p->pin = p->model_of[at];
}

/* aq's status, typed: decoded from the object read at its first charge
 * (GQ_STATUS_CHARGE, as /validate reads one it charges). */
static gq_quota_status *status_to_charge(aquota *aq, gq_err *err)
{
    if (!aq->decoded && gq_quota_status_decode(gq_json_member(aq->obj, "status"), GQ_STATUS_CHARGE,
                                               &aq->st, err) != GQ_OK)
        return NULL;
    aq->decoded = true;
    return &aq->st;
}

/* Whether quota aq charges shared claim uid on borrowed capacity: as read,
 * or as this pass's charges left its status. */
static bool claim_borrowed(const admit_pass *a, const aquota *aq, const char *uid)
{
    if (ctl_quota_claim_borrowed(aq->q, uid, a->now))
        return true;
    for (size_t r = 0; aq->decoded && r < aq->st.n_reservations; r++)
        if (aq->st.reservations[r].claim && aq->st.reservations[r].borrowing &&
            !strcmp(aq->st.reservations[r].key, uid))
            return true;
    return false;
}

/* Whether admitted pod i borrows: as the planner says, or as the pass that
 * charged it said in the reservation it wrote (borrowing), in a quota the
 * pod has paid: the planner sees no need there and cannot tell. A pass
 * whose writes ended at a 409 after some of them, and the next pass, or the
 * next leader's, that ungates the pod, agree through the reservation. A pod
 * naming a shared claim that one of its quotas charges on borrowed capacity
 * borrows too, though it adds nothing to the claim's charge: it holds the
 * borrowed claim as the pod first charged for it did, and reclaim must be
 * able to take it once that pod is gone. */
static bool borrows(const admit_pass *a, size_t i)
{
    if (a->dec[i].borrowing)
        return true;
    for (size_t m = 0; m < a->ents[i].n_quotas; m++) {
        const aquota *aq = &a->qs[a->ents[i].quotas[m]];
        const gq_reservation *r =
            a->ents[i].paid[m] ? live_reservation(aq->q, a->pods[i].uid, a->now) : NULL;
        if (r && r->borrowing)
            return true;
        for (size_t k = 0; k < a->pods[i].n_claims; k++)
            if (claim_borrowed(a, aq, a->pods[i].claims[k].uid))
                return true;
    }
    return false;
}

/* Evaluate: every admitted pod's charges into the statuses of the quotas
 * it has not paid yet (ctl_ungate_charge), marking them to write. */
static pass_step charge_admitted(admit_pass *a)
{
    for (size_t i = 0; i < a->n; i++) {
        if (a->dec[i].state != GQ_QSTATE_ADMIT)
            continue;
        take_choice(a, i);
        a->pods[i].borrowing = borrows(a, i);
        const ctl_queued *p = &a->pods[i];
        ctl_admitted ad = {.ns = p->ns,
                           .name = p->name,
                           .uid = p->uid,
                           .model = p->model,
                           .charge = p->charge,
                           .claims = p->claims,
                           .n_claims = p->n_claims,
                           .expires = a->now + CTL_QUEUE_RESERVATION_TTL_S,
                           .borrowing = p->borrowing};
        for (size_t m = 0; m < a->ents[i].n_quotas; m++) {
            if (a->ents[i].paid[m])
                continue;
            aquota *aq = &a->qs[a->ents[i].quotas[m]];
            gq_quota_status *st = status_to_charge(aq, &a->err);
            if (!st || ctl_ungate_charge(st, aq->q, &ad, a->now, &aq->dirty, &a->err) != GQ_OK) {
                GQ_WARN("queue: %s: %s", aq->path, a->err.msg);
                return STEP_FAILED;
            }
        }
    }
    return STEP_OK;
}

/* After a 409 on quota aq: read it again and remember it as newer than the
 * cache's version, so that the next pass plans on it (ctl_quota_newest).
 * Returns GQ_ECONFLICT when it was read again, else the read's error: the
 * pass then runs again after backoff, not at once on the stale cache. */
static gq_code reread_stale(ctl_controller *c, const aquota *aq)
{
    json_object *fresh = NULL;
    gq_err err;
    gq_err_clear(&err);
    const char *rv = aq->cache_rv ? aq->cache_rv : gq_json_meta_string(aq->obj, "resourceVersion");
    char *older = rv ? strdup(rv) : NULL;
    gq_code rc = older ? c->o.api->get(c->o.api->ctx, aq->path, &fresh, &err) : GQ_ENOMEM;
    if (rc == GQ_OK && fresh) {
        ctl_quota_remember(c, aq->key, older, fresh);
        return GQ_ECONFLICT;
    }
    GQ_WARN("queue: reading %s again after a conflict: %s", aq->path, rc ? err.msg : "no object");
    free(older);
    json_object_put(fresh);
    return rc ? rc : GQ_EINVAL;
}

/* Write: the status update of quota slots[k] holding every new charge, with
 * the resourceVersion read (several quotas at once, ctl_fanout). The
 * answer is remembered as the quota's newest version: the cache shows it
 * a little later. */
static void write_charge(void *ud, size_t k)
{
    admit_pass *a = ud;
    ctl_controller *c = a->c;
    aquota *aq = &a->qs[a->slots[k]];
    gq_err err;
    gq_err_clear(&err);
    const char *rv = aq->cache_rv ? aq->cache_rv : gq_json_meta_string(aq->obj, "resourceVersion");
    char *older = rv ? strdup(rv) : NULL;
    json_object *written = NULL;
    aq->rc = c->o.api->update_status(c->o.api->ctx, aq->path, aq->obj, &written, &err);
    if (aq->rc == GQ_OK) {
        atomic_fetch_add(&c->writes, 1);
        if (aq->decoded)
            atomic_fetch_add(&c->q_charges, 1);
        if (older && written) {
            ctl_quota_remember(c, aq->key, older, written);
            older = NULL;
            written = NULL;
        }
    } else if (aq->rc == GQ_ECONFLICT) {
        aq->rc = reread_stale(c, aq);
    } else {
        GQ_WARN("queue: charging %s: %s", aq->path, err.msg);
    }
    free(older);
    json_object_put(written);
}

/* Write: one status update per quota holding every new charge, the quotas
 * all at once. No pod is ungated before every write is answered. What was
 * written counts as paid on the next pass. A 409 (someone wrote first:
 * a webhook's charge, a recount) runs the pass again at once on the
 * quota read again; any other failure (that read's included), after
 * backoff. */
static pass_step write_charges(admit_pass *a)
{
    size_t n = 0;
    for (size_t j = 0; j < a->nq; j++) {
        if (!a->qs[j].dirty)
            continue;
        json_object *st = a->qs[j].decoded ? gq_quota_status_encode(&a->qs[j].st) : NULL;
        if (a->qs[j].decoded && (!st || json_object_object_add(a->qs[j].obj, "status", st))) {
            json_object_put(st);
            GQ_WARN("queue: charging %s: out of memory", a->qs[j].path);
            return STEP_FAILED;
        }
        a->slots[n++] = j; /* not decoded: the status handed over, as it is */
    }
    ctl_fanout(n, a->width, write_charge, a);
    pass_step st = STEP_OK;
    for (size_t k = 0; k < n; k++) {
        gq_code rc = a->qs[a->slots[k]].rc;
        if (rc && rc != GQ_ECONFLICT)
            return STEP_FAILED;
        if (rc)
            st = STEP_STALE;
    }
    return st;
}

static int job_group_cmp(const void *x, const void *y)
{
    const ungate_job *a = x, *b = y;
    int c = strcmp(a->group, b->group);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static int job_order_cmp(const void *x, const void *y)
{
    const ungate_job *a = x, *b = y;
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    if (a->unit_pos != b->unit_pos)
        return a->unit_pos < b->unit_pos ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* jobs[0..n) = the pods the plan admitted, in the planner's order of
 * units; returns n. */
static size_t ungate_order(admit_pass *a)
{
    size_t na = 0, ng = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (a->dec[i].state != GQ_QSTATE_ADMIT)
            continue;
        na++;
        if (a->pods[i].group)
            ng++;
    }
    ungate_job *v = a->jobs;
    size_t g = 0, alone = ng; /* the members of groups first */
    for (size_t i = 0; i < a->n; i++) {
        if (a->dec[i].state != GQ_QSTATE_ADMIT)
            continue;
        const ctl_queued *p = &a->pods[i];
        size_t pos = a->dec[i].position;
        v[p->group ? g++ : alone++] = (ungate_job){.i = i,
                                                   .ns = p->ns,
                                                   .group = p->group,
                                                   .priority = p->priority,
                                                   .unit_pos = pos,
                                                   .pos = pos};
    }
    qsort(v, ng, sizeof(*v), job_group_cmp);
    for (size_t s = 0, e; s < ng; s = e) {
        for (e = s + 1; e < ng && !strcmp(v[e].group, v[s].group); e++)
            ;
        for (size_t m = s + 1; m < e; m++) {
            v[m].unit_pos = v[s].pos;
            v[m].priority = v[s].priority;
        }
    }
    qsort(v, na, sizeof(*v), job_order_cmp);
    return na;
}

static int job_ns_cmp(const void *x, const void *y)
{
    const ungate_job *a = x, *b = y;
    int c = strcmp(a->ns, b->ns);
    return c ? c : (a->order > b->order) - (a->order < b->order);
}

static int job_run_cmp(const void *x, const void *y)
{
    const ungate_job *a = x, *b = y;
    if (a->run != b->run)
        return a->run < b->run ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* jobs[0..n), the pods of one priority in the planner's order, into runs:
 * the pods of one namespace, up to width of them (a pod group whole), each
 * run placed where its first pod stands. The ungates of a run are in
 * flight together, so the reconcile of the namespace's quotas folds them
 * in a status write or two rather than one each; with the namespaces'
 * runs interleaved by age, a long drain moves every namespace along.
 * Width 1 leaves the planner's order as it is. */
static void ungate_runs(ungate_job *jobs, size_t n, size_t width)
{
    for (size_t k = 0; k < n; k++)
        jobs[k].order = k;
    qsort(jobs, n, sizeof(*jobs), job_ns_cmp);
    for (size_t s = 0, e; s < n; s = e) {
        size_t run = jobs[s].order, len = 0;
        for (e = s; e < n && !strcmp(jobs[e].ns, jobs[s].ns); e++, len++) {
            if (len >= width && jobs[e].unit_pos != jobs[e - 1].unit_pos) {
                run = jobs[e].order;
                len = 0;
            }
            jobs[e].run = run;
        }
    }
    qsort(jobs, n, sizeof(*jobs), job_run_cmp);
}

/* Admitted pods of one priority, ungated several at once. */
typedef struct ungate_wave {
    admit_pass *a;
    ungate_job *jobs;
} ungate_wave;

/* Ungate jobs[k] of a wave (ctl_fanout): the metrics and the log of an
 * ungate, and the pod remembered as ungated unless its PATCH failed. */
static void ungate_one(void *ud, size_t k)
{
    ungate_wave *w = ud;
    admit_pass *a = w->a;
    ctl_controller *c = a->c;
    ungate_job *j = &w->jobs[k];
    const ctl_queued *p = &a->pods[j->i];
    gq_err err;
    gq_err_clear(&err);
    j->rc = ungate(c, p, &err);
    if (j->rc && j->rc != GQ_ENOTFOUND) {
        GQ_WARN("queue: cannot ungate pod %s/%s: %s", p->ns, p->name, err.msg);
        return;
    }
    if (j->rc == GQ_OK) {
        atomic_fetch_add(&c->q_ungated, 1);
        GQ_INFO("queue: admitted pod %s/%s (position %zu)", p->ns, p->name, j->pos);
        double waited = p->created_us ? (double)(a->now * 1000000 - p->created_us) / 1e6 : 0;
        for (size_t m = 0; m < a->ents[j->i].n_quotas; m++)
            ctl_wait_observe(c, a->qs[a->ents[j->i].quotas[m]].key, waited < 0 ? 0 : waited);
    }
    pthread_mutex_lock(&c->mu);
    json_object_object_add(c->ungated, p->uid, json_object_new_boolean(1));
    pthread_mutex_unlock(&c->mu);
    ctl_preempt_forget(c, p->uid);
}

/* Write: every admitted pod now holds all its charges: ungate it. The
 * PATCHes go up to width at once, one priority at a time: a pod's is sent
 * only once every admitted pod of higher priority has had its answer; within
 * a priority, in runs by namespace (ungate_runs; docs/queueing.md, "Order").
 * A pod that cannot be ungated fails the pass, after the others. */
static pass_step ungate_admitted(admit_pass *a)
{
    size_t n = ungate_order(a);
    ungate_job *jobs = a->jobs;
    for (size_t s = 0, e; s < n; s = e) {
        for (e = s + 1; e < n && jobs[e].priority == jobs[s].priority; e++)
            ;
        ungate_runs(&jobs[s], e - s, a->width);
        ungate_wave w = {a, &jobs[s]};
        ctl_fanout(e - s, a->width, ungate_one, &w);
    }
    pass_step st = STEP_OK;
    for (size_t k = 0; k < n; k++)
        if (jobs[k].rc && jobs[k].rc != GQ_ENOTFOUND)
            st = STEP_FAILED;
    return st;
}

/* Why waiting pod i waits, in words. */
static void waiting_message(const admit_pass *a, size_t i, char *msg, size_t cap)
{
    const gq_queue_decision *d = &a->dec[i];
    const ctl_queued *p = &a->pods[i];
    const gq_quota *q = d->quota < a->nq ? a->qs[d->quota].q : NULL;
    switch (d->state) {
    case GQ_QSTATE_ADMIT:
        break;
    case GQ_QSTATE_NO_ROOM:
        no_room_message(q, d->model_limit, &a->pq[d->quota], &d->need,
                        a->ents[i].group ? p->group : NULL, msg, cap);
        break;
    case GQ_QSTATE_BEHIND_HEAD:
        snprintf(msg, cap,
                 "waiting in line behind %lld pod(s) of %s %s (StrictFIFO) that do not fit yet",
                 (long long)d->ahead, q->kind == GQ_QUOTA_TENANT ? "tenant quota" : "quota",
                 q->name);
        break;
    case GQ_QSTATE_WAIT_MEMBERS:
        snprintf(msg, cap, "pod group %s waits for its members: %lld of %lld queued, %lld running",
                 p->group, (long long)d->members, (long long)a->ents[i].group_size,
                 (long long)a->ents[i].group_running);
        break;
    case GQ_QSTATE_GROUP_MISMATCH:
        snprintf(msg, cap,
                 "pod group %s: members disagree on annotation " GQ_POD_GROUP_SIZE_ANNOTATION
                 "; none is admitted until they agree",
                 p->group);
        break;
    }
}

/* Why waiting pod i waits, as a reason that changes only with the state and
 * the quota. No counts: members arriving one by one would otherwise make
 * every waiting member post an Event per arrival (a group of n, n^2). */
static void waiting_why(const admit_pass *a, size_t i, char *why, size_t cap)
{
    const gq_queue_decision *d = &a->dec[i];
    const ctl_queued *p = &a->pods[i];
    if (d->state == GQ_QSTATE_NO_ROOM || d->state == GQ_QSTATE_BEHIND_HEAD)
        snprintf(why, cap, "%d %s", (int)d->state, a->qs[d->quota].key);
    else
        snprintf(why, cap, "%d %.253s", (int)d->state, p->group ? p->group : "");
}

/* The waiting pods whose Event is due. */
typedef struct why_due {
    const admit_pass *a;
    const size_t *i; /* indices into pods */
} why_due;

/* Write: the Event on the k-th pod due (ctl_fanout). */
static void say_why(void *ud, size_t k)
{
    const why_due *d = ud;
    char msg[1024];
    waiting_message(d->a, d->i[k], msg, sizeof msg);
    queued_event(d->a->c, &d->a->pods[d->i[k]], msg, d->a->now);
}

/* Write: an Event on each waiting pod saying why, when that changed; the
 * Events several at once. */
static void say_why_waiting(admit_pass *a)
{
    size_t *due = a->due, n = 0;
    for (size_t i = 0; i < a->n; i++) {
        char why[KEY_MAX + 64];
        if (a->dec[i].state == GQ_QSTATE_ADMIT)
            continue;
        waiting_why(a, i, why, sizeof why);
        if (why_changed(a->c, &a->pods[i], why))
            due[n++] = i;
    }
    why_due d = {a, due};
    ctl_fanout(n, a->width, say_why, &d);
}

/* The admission pass: every queued pod in order, charged and ungated when
 * its quotas have room (gq_queue_plan). Charges are reservations written
 * with the resourceVersion read, as /validate writes them; a 409 ends the
 * pass and runs it again on fresh reads. Reservations written before a
 * conflict or a crash stay and count as paid on the next pass, so nobody is
 * charged twice and a new leader finishes what the last one began. */
static int run_pass(ctl_controller *c)
{
    unsigned width = c->o.ungate_inflight ? c->o.ungate_inflight : CTL_UNGATE_INFLIGHT;
    width = width < CTL_UNGATE_INFLIGHT_MAX ? width : CTL_UNGATE_INFLIGHT_MAX;
    admit_pass a = {.c = c, .now = ctl_wall_now(c), .width = width};
    bool replan = false;
    long again_ms = 0; /* preemption: run again then */
    gq_err_clear(&a.err);
    pass_step st = read_queue(&a);
    if (st == STEP_OK)
        st = read_quotas(&a);
    if (st == STEP_OK)
        st = plan(&a);
    if (st == STEP_OK)
        st = charge_admitted(&a);
    if (st == STEP_OK)
        st = write_charges(&a);
    if (st == STEP_OK) {
        /* A waiting pod naming a claim charged just now is planned again
         * without it. */
        replan = claims_charged_for_waiting(a.pods, a.dec, a.n);
        st = ungate_admitted(&a);
        say_why_waiting(&a);
        ctl_preempt_in pi = {a.ents, a.dec, a.pods, a.n, a.pq, a.nq, &a.co, a.now, a.leaving_known};
        again_ms = st == STEP_OK ? ctl_preempt(c, &pi) : 0;
    }
    if (st == STEP_STALE || ((st == STEP_OK || st == STEP_DONE) && replan))
        ctl_requeue_after(c, ADMIT_KEY, 5);
    else if (again_ms && st == STEP_OK)
        ctl_requeue_after(c, ADMIT_KEY, again_ms);
    else if (st == STEP_FAILED)
        ctl_backoff(c, ADMIT_KEY);
    else
        ctl_workqueue_forget(c->queue, ADMIT_KEY);
    pass_dispose(&a);
    return st == STEP_STALE ? RES_CONFLICT : st == STEP_FAILED ? RES_ERROR : RES_OK;
}

/* The thread's CPU time, seconds (0 when the clock cannot be read). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? 0 : (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* run_pass, its thread's CPU time observed (gpuquota_queue_pass_cpu_seconds). */
int ctl_ungate_pass(ctl_controller *c)
{
    double t0 = thread_cpu_s();
    int rc = run_pass(c);
    double used = thread_cpu_s() - t0;
    http_histogram_observe(&c->pass_cpu, used > 0 ? used : 0);
    return rc;
}
