/* The running controller: four informer caches feed the store and the work
 * queue; workers reconcile one quota at a time and write its status through
 * the /status subresource with the resourceVersion they read (409: requeue
 * with backoff). Level-triggered: every reconcile recounts from the store,
 * so a missed event is repaired by the next one or by the periodic resync. */
#include "controller/ctl_run.h"

#include <errno.h>
#if defined(__GLIBC__)
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gq_log.h"
#include "common/heap.h"
#include "common/json_member.h"
#include "common/hash.h"

/* After the initial list the pages parsed and freed one after another sit in
 * glibc's arenas and would stay resident for the life of the process; the
 * controller gives them back once, when its caches have synced
 * (gq_heap_trim). */

static const double hist_bounds[N_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1,    2.5};
static const char *const result_names[RES_COUNT] = {"success", "conflict", "error", "invalid"};

static void render_metrics(void *ctx, http_expo *e);

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* --- keys ------------------------------------------------------------------ */

static gq_code enqueue(ctl_controller *c, char kind, const char *ns, const char *name, long delay)
{
    char key[KEY_MAX];
    if (!ctl_make_key(key, kind, ns, name))
        return GQ_ELIMIT;
    return ctl_workqueue_add_after(c->queue, key, delay);
}

typedef struct ns_match {
    ctl_controller *c;
    const char *ns; /* NULL: every quota */
    long delay;
} ns_match;

static int enqueue_quota_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    ns_match *m = ud;
    if (!m->ns || !strcmp(ns, m->ns))
        (void)enqueue(m->c, 'q', ns, name, m->delay);
    return 0;
}

/* Every GPUQuota of ns and every tenant covering ns (ns NULL: all). */
static void enqueue_ns(ctl_controller *c, const char *ns, long delay)
{
    ns_match m = {c, ns, delay};
    kube_cache_foreach(c->quotas, enqueue_quota_fn, &m);
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_tenants; i++)
        if (!ns || ctl_podstore_covers(c->store, c->tv[i].q, ns))
            (void)enqueue(c, 't', "", c->tv[i].name, delay);
    pthread_mutex_unlock(&c->mu);
}

static void enqueue_tenants(ctl_controller *c)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_tenants; i++)
        (void)enqueue(c, 't', "", c->tv[i].name, 0);
    pthread_mutex_unlock(&c->mu);
}

/* --- pod cache ------------------------------------------------------------- */

/* Pods per list page. Per-page costs (a request, a body buffer grown from
 * scratch, a burst of frees) made the 500 that client-go's reflector asks
 * for cost the initial sync of 100k pods 5.9-7.2 s of CPU against 4.7-5.7 s
 * at 2000; 2000 pods of 15 KB (managedFields included) still fit the
 * client's 64 MiB response cap with room to spare. */
#define POD_PAGE 2000u

/* What of a listed pod no part of its record reads (ctl_pod_from_json, the
 * pod's price and facts in quota/): checked as the list is parsed, never
 * built. Most of a real pod's objects are these (its service-account
 * volume and mounts, default tolerations, status conditions and container
 * statuses); resources, annotations, labels, gates, affinity, claims,
 * priority and phase are kept. */
#define POD_CONTAINER_PRUNE(kind)                                                                  \
    "spec/" kind "/*/env", "spec/" kind "/*/envFrom", "spec/" kind "/*/volumeMounts",              \
        "spec/" kind "/*/volumeDevices", "spec/" kind "/*/ports", "spec/" kind "/*/livenessProbe", \
        "spec/" kind "/*/readinessProbe", "spec/" kind "/*/startupProbe",                          \
        "spec/" kind "/*/lifecycle", "spec/" kind "/*/securityContext", "spec/" kind "/*/command", \
        "spec/" kind "/*/args"
static const char *const pod_prune[] = {
    POD_CONTAINER_PRUNE("containers"),
    POD_CONTAINER_PRUNE("initContainers"),
    "spec/ephemeralContainers",
    "spec/volumes",
    "spec/tolerations",
    "spec/securityContext",
    "spec/hostAliases",
    "spec/readinessGates",
    "spec/topologySpreadConstraints",
    "status/conditions",
    "status/containerStatuses",
    "status/initContainerStatuses",
    "status/ephemeralContainerStatuses",
    "status/podIPs",
    "status/hostIPs",
};

static gq_code pod_transform(void *ud, json_object *obj, void **rec, gq_err *err)
{
    ctl_controller *c = ud;
    ctl_pod *p = NULL;
    gq_err e;
    gq_err_clear(&e);
    gq_code rc = ctl_pod_from_json(c->store, c->o.cfg, obj, &p, &e);
    if (rc == GQ_ENOMEM)
        return gq_err_set(err, rc, "%s", e.msg);
    if (rc) {
        /* The webhook denies such pods; one that exists anyway (created
         * before install, or the config changed) cannot be priced. */
        json_object *meta = gq_json_member(obj, "metadata");
        atomic_fetch_add(&c->cost_errors, 1);
        GQ_WARN("pod %s/%s not counted: %s", gq_json_get_string(meta, "namespace"),
                gq_json_get_string(meta, "name"), e.msg);
        p = NULL;
    }
    *rec = p;
    return GQ_OK;
}

static void pod_free(void *ud, void *rec)
{
    ctl_controller *c = ud;
    ctl_pod_free(c->store, rec);
}

static void pod_changed(ctl_controller *c, const char *ns, const ctl_pod *p)
{
    if (!atomic_load(&c->synced))
        return;
    enqueue_ns(c, ns, 0);
    ctl_ungate_kick(c);
    /* A pod being deleted stops counting at its grace deadline; no event
     * marks that moment, so ask for a reconcile then. */
    if (p && p->delete_at && !p->terminal) {
        int64_t in = p->delete_at + 1 - ctl_wall_now(c);
        if (in > 0)
            enqueue_ns(c, ns, (long)(in > 86400 ? 86400 : in) * 1000);
    }
}

/* The claims check (claims.c): a pod behind gpuquota.io/claims has its
 * claims checked whenever it changes (its template's claim is made, say);
 * claims pinned for a pod may be unpinned once it is bound, done or gone. */
static void claims_changed(ctl_controller *c, const char *ns, const char *name, const ctl_pod *old,
                           const ctl_pod *now)
{
    if (now && now->claims_gated)
        (void)enqueue(c, 'c', ns, name, 0);
    bool was = old && old->dra, is = now && now->dra;
    if ((was || is) && old &&
        (!now || old->bound != now->bound || old->terminal != now->terminal ||
         old->delete_at != now->delete_at))
        (void)enqueue(c, 'u', ns, "", 0);
}

static void pod_add(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    ctl_podstore_link(c->store, (ctl_pod *)rec);
    claims_changed(c, ns, name, NULL, rec);
    pod_changed(c, ns, rec);
}

static void pod_update(void *ud, const char *ns, const char *name, const void *old_rec,
                       const void *new_rec)
{
    ctl_controller *c = ud;
    ctl_podstore_replace(c->store, (ctl_pod *)old_rec, (ctl_pod *)new_rec);
    claims_changed(c, ns, name, old_rec, new_rec);
    if (!ctl_pod_same(old_rec, new_rec))
        pod_changed(c, ns, new_rec);
}

/* Pods seen deleted are remembered GONE_KEEP_MS, at most GONE_MAX at a
 * time: a reservation of such a pod is abandoned at once (find_abandoned),
 * rather than after the grace that covers a pod not seen yet. Beyond
 * GONE_MAX the oldest are forgotten: their reservations wait out the grace
 * as before. */
#define GONE_KEEP_MS (5 * 60 * 1000)
#define GONE_MAX 65536

/* Remember that the pod with uid is gone (c->mu held). */
static void gone_note(ctl_controller *c, const char *uid, int64_t now_ms)
{
    if (json_object_object_length(c->gone) >= GONE_MAX) {
        json_object *keep = json_object_new_object();
        int64_t cut = now_ms - GONE_KEEP_MS;
        if (!keep)
            return;
        json_object_object_foreach(c->gone, k, v)
        {
            if (json_object_get_int64(v) > cut)
                json_object_object_add(keep, k, json_object_get(v));
        }
        if (json_object_object_length(keep) >= GONE_MAX / 2) { /* a burst: start again */
            json_object_put(keep);
            keep = json_object_new_object();
        }
        json_object_put(c->gone);
        c->gone = keep;
        if (!keep)
            return;
    }
    json_object_object_add(c->gone, uid, json_object_new_int64(now_ms));
}

/* Whether the watch saw the pod with uid deleted within GONE_KEEP_MS. */
static bool gone_seen(ctl_controller *c, const char *uid, int64_t now_ms)
{
    json_object *t = NULL;
    pthread_mutex_lock(&c->mu);
    bool gone = c->gone && json_object_object_get_ex(c->gone, uid, &t) &&
                now_ms - json_object_get_int64(t) < GONE_KEEP_MS;
    pthread_mutex_unlock(&c->mu);
    return gone;
}

static void pod_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    pthread_mutex_lock(&c->mu);
    if (c->gone)
        gone_note(c, ctl_pod_uid(rec), ctl_mono_us() / 1000);
    pthread_mutex_unlock(&c->mu);
    ctl_podstore_unlink(c->store, (ctl_pod *)rec);
    claims_changed(c, ns, name, rec, NULL);
    pod_changed(c, ns, NULL);
}

/* --- quota caches ---------------------------------------------------------- */

static void quota_event(void *ud, const char *ns, const char *name, const void *rec)
{
    (void)enqueue(ud, 'q', ns, name, 0);
    if (atomic_load(&((ctl_controller *)ud)->synced))
        ctl_ungate_kick(ud);
}

/* A GPUQuota came or went: its cohort's lending changes. */
static void quota_add_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    quota_event(ud, ns, name, rec);
    if (atomic_load(&((ctl_controller *)ud)->synced))
        ctl_cohort_touch(ud, ns);
}

static bool own_echo(ctl_controller *c, char kind, const char *ns, const char *name,
                     const void *obj);

/* A quota or tenant changed in the cache, our own status write coming
 * back (own_echo) included: the admission pass reads both from the caches,
 * so only now does it see the usage a write lowered or the queue it
 * recorded. Kicking it at the write instead would let it plan on the status
 * before the write, and nothing would kick it again. */
static void pass_kick(ctl_controller *c)
{
    if (atomic_load(&c->synced))
        ctl_ungate_kick(c);
}

/* Whether member key of o and of n differ. */
static bool member_differs(const void *o, const void *n, const char *outer, const char *key)
{
    json_object *a = gq_json_member((json_object *)o, outer),
                *b = gq_json_member((json_object *)n, outer);
    if (key) {
        a = gq_json_member(a, key);
        b = gq_json_member(b, key);
    }
    return !json_object_equal(a, b);
}

static void charge_seen(ctl_controller *c, char kind, const char *ns, const char *name);

static void quota_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    /* What the quota lends or borrows depends on its spec and status.used:
     * the other members of its cohort are looked at again, our own write
     * coming back included (the others read it from this cache). */
    if (atomic_load(&((ctl_controller *)ud)->synced) &&
        (member_differs(o, n, "spec", NULL) || member_differs(o, n, "status", "used")))
        ctl_cohort_touch(ud, ns);
    if (own_echo(ud, 'q', ns, name, n)) {
        pass_kick(ud);
        return;
    }
    if (member_differs(o, n, "status", "reservations"))
        charge_seen(ud, 'q', ns, name);
    quota_event(ud, ns, name, n);
}

static void tenant_forget(ctl_controller *c, const char *name)
{
    for (size_t i = 0; i < c->n_tenants; i++)
        if (!strcmp(c->tv[i].name, name)) {
            free(c->tv[i].name);
            gq_quota_free(c->tv[i].q);
            c->tv[i] = c->tv[--c->n_tenants];
            return;
        }
}

/* Keep the parsed spec of every tenant to map namespaces to tenants. */
static void tenant_set(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    gq_quota *q = NULL;
    gq_err err;
    char *nm = strdup(name);
    if (!nm || ctl_quota_parse_spec((json_object *)rec, &q, &err)) {
        if (nm)
            GQ_WARN("GPUTenantQuota %s: %s", name, err.msg);
        free(nm);
        nm = NULL;
    }
    pthread_mutex_lock(&c->mu);
    tenant_forget(c, name);
    if (nm && c->n_tenants == c->cap_tenants) {
        size_t ncap = c->cap_tenants ? c->cap_tenants * 2 : 16;
        tenant_ent *nv = realloc(c->tv, ncap * sizeof(*nv));
        if (nv) {
            c->tv = nv;
            c->cap_tenants = ncap;
        }
    }
    if (nm && c->n_tenants < c->cap_tenants) {
        c->tv[c->n_tenants].name = nm;
        c->tv[c->n_tenants++].q = q;
        nm = NULL;
        q = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(nm);
    gq_quota_free(q);
    (void)enqueue(c, 't', "", name, 0);
    if (atomic_load(&c->synced)) /* which GPUQuotas form a cohort may change */
        ctl_cohort_touch(c, NULL);
}

/* A tenant came: the other tenants of its cohort lend or borrow anew. */
static void tenant_add(void *ud, const char *ns, const char *name, const void *rec)
{
    tenant_set(ud, ns, name, rec);
    if (atomic_load(&((ctl_controller *)ud)->synced))
        ctl_cohort_touch_tenants(ud, rec, name);
    pass_kick(ud);
}

static void tenant_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    /* In a cohort of tenants, as quota_update for a GPUQuota's cohort: the
     * cohort it left and the one it joined, our own write included. */
    if (atomic_load(&((ctl_controller *)ud)->synced) &&
        (member_differs(o, n, "spec", NULL) || member_differs(o, n, "status", "used"))) {
        ctl_cohort_touch_tenants(ud, o, name);
        if (member_differs(o, n, "spec", "cohort"))
            ctl_cohort_touch_tenants(ud, n, name);
    }
    if (!own_echo(ud, 't', ns, name, n)) {
        if (member_differs(o, n, "status", "reservations"))
            charge_seen(ud, 't', ns, name);
        tenant_set(ud, ns, name, n);
    }
    pass_kick(ud);
}

static void tenant_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    pthread_mutex_lock(&c->mu);
    tenant_forget(c, name);
    pthread_mutex_unlock(&c->mu);
    (void)enqueue(c, 't', "", name, 0);
    if (atomic_load(&c->synced)) {
        ctl_cohort_touch(c, NULL);
        ctl_cohort_touch_tenants(c, rec, name);
    }
    pass_kick(c); /* pods it kept out may fit now */
}

/* --- namespace cache: the record is a copy of metadata.labels -------------- */

static gq_code ns_transform(void *ud, json_object *obj, void **rec, gq_err *err)
{
    json_object *labels = gq_json_member(gq_json_member(obj, "metadata"), "labels"), *copy = NULL;
    if (labels && json_object_is_type(labels, json_type_object)) {
        if (json_object_deep_copy(labels, &copy, NULL) != 0)
            return gq_err_oom(err);
    } else if (!(copy = json_object_new_object())) {
        return gq_err_oom(err);
    }
    *rec = copy;
    return GQ_OK;
}

static void ns_free_rec(void *ud, void *rec)
{
    json_object_put(rec);
}

static void ns_set(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    bool changed = false;
    if (ctl_podstore_set_namespace(c->store, name, (json_object *)rec, &changed) != GQ_OK)
        GQ_ERROR("namespace %s: out of memory", name);
    if (changed && atomic_load(&c->synced))
        enqueue_tenants(c);
}

static void ns_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    ns_set(ud, ns, name, n);
}

static void ns_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    ctl_podstore_delete_namespace(c->store, name);
    if (atomic_load(&c->synced))
        enqueue_tenants(c);
}

/* --- per-quota state ------------------------------------------------------- */

static void ks_free(kstate *k)
{
    if (!k)
        return;
    free(k->written_rv);
    free(k->sent_rv);
    json_object_put(k->written);
    json_object_put(k->handoff);
    free(k->handoff_rv);
    json_object_put(k->first_seen);
    free(k->ns);
    free(k->name);
    free(k);
}

/* The kstate of a table node, NULL for none. */
static kstate *ks_of(gq_hnode *n)
{
    return n ? GQ_HTAB_ENTRY(n, kstate, node) : NULL;
}

static void ks_drop(ctl_controller *c, const char *key)
{
    pthread_mutex_lock(&c->mu);
    kstate *k = ctl_ks_get(c, key, false);
    if (k) {
        gq_htab_remove(&c->ks, &k->node);
        ks_free(k);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Whether obj is exactly the version our last status write produced: the
 * watch echoing our own write needs no reconcile. */
static bool own_echo(ctl_controller *c, char kind, const char *ns, const char *name,
                     const void *obj)
{
    char key[KEY_MAX];
    const char *rv = gq_json_meta_string((json_object *)obj, "resourceVersion");
    if (!rv || !ctl_make_key(key, kind, ns, name))
        return false;
    pthread_mutex_lock(&c->mu);
    kstate *k = ctl_ks_get(c, key, false);
    bool echo = k && k->written_rv && !strcmp(k->written_rv, rv);
    pthread_mutex_unlock(&c->mu);
    return echo;
}

/* Another writer (a webhook's charge, the admission pass) changed the
 * reservations of a quota (kind 'q') or tenant ('t'): for a while its folds
 * wait only while it holds few (fold_wait_ms). */
static void charge_seen(ctl_controller *c, char kind, const char *ns, const char *name)
{
    char key[KEY_MAX];
    if (!ctl_make_key(key, kind, ns, name))
        return;
    pthread_mutex_lock(&c->mu);
    kstate *k = ctl_ks_get(c, key, true);
    if (k)
        k->charged_ms = ctl_mono_us() / 1000;
    pthread_mutex_unlock(&c->mu);
}

/* --- reconcile ------------------------------------------------------------- */

static void copy_fn(void *ud, const void *rec)
{
    json_object *copy = NULL;
    if (json_object_deep_copy((json_object *)rec, &copy, NULL) == 0)
        *(json_object **)ud = copy;
}

static void observe(ctl_controller *c, int result, int64_t us)
{
    atomic_fetch_add(&c->results[result], 1);
    http_histogram_observe(&c->reconcile_duration, (double)us / 1e6);
}

/* --- abandoned reservations ---------------------------------------------- */

/* Whether the pod a reservation names is missing on the API server (a
 * quorum read): absent, or another pod under its name. Errors count as "not
 * known missing" and are retried. */
static bool pod_missing(ctl_controller *c, const gq_reservation *r)
{
    char path[700];
    json_object *pod = NULL;
    gq_err err;
    gq_err_clear(&err);
    if (!r->pod[0])
        return true;
    if (snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", r->namespace_, r->pod) >=
        (int)sizeof path)
        return true; /* no such name can exist */
    gq_code rc = c->o.api->get(c->o.api->ctx, path, &pod, &err);
    if (rc == GQ_ENOTFOUND)
        return true;
    if (rc) {
        GQ_DEBUG("reservation %s: cannot read pod %s/%s: %s", r->key, r->namespace_, r->pod,
                 err.msg);
        return false;
    }
    const char *uid = gq_json_get_string(gq_json_member(pod, "metadata"), "uid");
    bool other = !uid || strcmp(uid, r->key) != 0;
    json_object_put(pod);
    return other;
}

/* How long an unseen reservation waits before its pod is looked for: the
 * options' grace, else ctl_admission_bound_ms over the cluster's validating
 * webhooks, read at most once a minute and only while some reservation
 * waits (a controller at rest sends no request for it). */
static long abandon_grace_ms(ctl_controller *c)
{
    if (!c->grace_dynamic)
        return c->o.reservation_grace_ms;
    int64_t now = ctl_mono_us() / 1000;
    pthread_mutex_lock(&c->mu);
    bool stale = !c->grace_read_ms || now - c->grace_read_ms > 60000;
    if (stale)
        c->grace_read_ms = now;
    long grace = c->grace_ms ? c->grace_ms : CTL_RESERVATION_GRACE_MS;
    pthread_mutex_unlock(&c->mu);
    if (!stale)
        return grace;
    json_object *configs = json_object_new_array();
    gq_err err;
    gq_err_clear(&err);
    kube_list_opts lo = {.page_size = 100};
    if (configs &&
        c->o.api->list(c->o.api->ctx,
                       "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", &lo,
                       ctl_keep_item, configs, NULL, &err) == GQ_OK) {
        grace = ctl_admission_bound_ms(configs, "gpuquota");
    } else {
        grace = CTL_RESERVATION_GRACE_MS;
        GQ_DEBUG("cannot read the validating webhooks (%s): waiting %ld ms for unseen pods",
                 err.msg, grace);
    }
    json_object_put(configs);
    pthread_mutex_lock(&c->mu);
    c->grace_ms = grace;
    pthread_mutex_unlock(&c->mu);
    return grace;
}

/* For reservation r, first seen at first, of a pod the controller has not
 * seen: -1 to drop it, else the ms until it is looked at again (0: never).
 * *grace (-1: not read yet) is read when needed. A pod the watch saw
 * deleted is gone for good (uids are never reused): no grace, no read. */
static long abandon_wait(ctl_controller *c, const gq_reservation *r, int64_t first, int64_t now_ms,
                         long *grace)
{
    if (gone_seen(c, r->key, now_ms)) {
        GQ_DEBUG("dropping reservation %s: pod %s/%s was deleted", r->key, r->namespace_, r->pod);
        return -1;
    }
    if (*grace < 0)
        *grace = abandon_grace_ms(c);
    long wait = (long)(first + *grace - now_ms);
    if (wait > 0)
        return wait;
    if (!pod_missing(c, r))
        return 1000; /* on the API server but not in our cache yet: look again */
    GQ_INFO("dropping reservation %s: pod %s/%s did not appear within %ld ms", r->key,
            r->namespace_, r->pod, *grace);
    return -1;
}

/* The reservations of quota (its current object) whose pods the controller
 * has not seen and that have been known longer than the grace period while
 * their pods are not on the API server either, or whose pods the watch saw
 * deleted: *drop gets their keys (NULL
 * when none). *recheck_ms (0: nothing to watch) is when the next one comes of
 * age. Records when each unseen reservation was first seen. */
static void find_abandoned(ctl_controller *c, const char *key, json_object *quota,
                           json_object **drop, long *recheck_ms)
{
    gq_quota_status st; /* corrupt records and members left out: the reconcile drops them */
    json_object *seen_now = json_object_new_object(), *old = NULL;
    int64_t now_ms = ctl_mono_us() / 1000;
    long grace = -1; /* read when an unseen reservation needs it */
    *drop = NULL;
    *recheck_ms = 0;
    if (!seen_now || gq_quota_status_decode(gq_json_member(quota, "status"), GQ_STATUS_SALVAGE, &st,
                                            NULL) != GQ_OK) {
        json_object_put(seen_now);
        return;
    }
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, true);
    if (ks)
        old = json_object_get(ks->first_seen);
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < st.n_reservations; i++) {
        const gq_reservation r = st.reservations[i];
        /* counted: the reconcile drops it; a shared claim's record names no
         * pod: it goes when counted, or when it expires; nor does a webhook
         * replica's escrow hold or want (their "pod" is the replica): they
         * go when they expire, which is what keeps a hold safe */
        if (r.claim || r.escrow == GQ_ESCROW_HOLD || r.escrow == GQ_ESCROW_WANT ||
            ctl_podstore_has_uid(c->store, r.namespace_, r.key))
            continue;
        json_object *t = NULL;
        int64_t first =
            json_object_object_get_ex(old, r.key, &t) ? json_object_get_int64(t) : now_ms;
        json_object_object_add(seen_now, r.key, json_object_new_int64(first));
        long wait = abandon_wait(c, &r, first, now_ms, &grace);
        if (wait < 0) {
            if (!*drop)
                *drop = json_object_new_object();
            if (*drop)
                json_object_object_add(*drop, r.key, json_object_new_boolean(1));
        } else if (wait > 0 && (!*recheck_ms || wait < *recheck_ms)) {
            *recheck_ms = wait;
        }
    }
    gq_quota_status_dispose(&st);
    json_object_put(old);
    pthread_mutex_lock(&c->mu);
    ks = ctl_ks_get(c, key, false);
    if (ks) {
        json_object_put(ks->first_seen);
        ks->first_seen = seen_now;
        seen_now = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    json_object_put(seen_now);
}

/* The quota a work-queue key names. */
typedef struct quota_ref {
    const char *kind; /* GQ_KIND_GPUQUOTA or GQ_KIND_GPUTENANTQUOTA */
    kube_cache *cache;
    char ns[300], name[300], path[700];
    const char *sep; /* "/" between ns and name in messages, "" for tenants */
} quota_ref;

/* An Event about the quota r names. */
static void post_event(ctl_controller *c, json_object *obj, const quota_ref *r, const char *reason,
                       const char *message, int64_t now)
{
    ctl_about about = {GQ_API_VERSION, r->kind, r->ns, r->name};
    ctl_post_event(c, obj, &about, reason, message, now);
}

/* Read: the kind, names and API path of a quota's key; false for any other
 * key. */
static bool quota_ref_parse(ctl_controller *c, const char *key, quota_ref *r)
{
    memset(r, 0, sizeof(*r));
    if (key[0] == 'q' && sscanf(key, "q/%299[^/]/%299s", r->ns, r->name) == 2) {
        r->kind = GQ_KIND_GPUQUOTA;
        r->cache = c->quotas;
    } else if (key[0] == 't' && sscanf(key, "t/%299s", r->name) == 1) {
        r->kind = GQ_KIND_GPUTENANTQUOTA;
        r->cache = c->tenants;
    } else {
        return false;
    }
    r->sep = r->ns[0] ? "/" : "";
    return ctl_quota_path(r->path, sizeof r->path, r->ns, r->name);
}

/* How reading a quota from the cache went. */
typedef enum quota_read {
    QUOTA_READ,    /* *out holds a copy */
    QUOTA_DELETED, /* not in the cache: deleted */
    QUOTA_NO_COPY, /* out of memory */
} quota_read;

/* Read: a copy of the quota from the cache. Our last write may not have
 * reached the cache yet: when the cache still holds the version we wrote
 * over, continue from what the write returned instead of provoking a
 * certain 409. */
static quota_read quota_read_cached(ctl_controller *c, const char *key, const quota_ref *r,
                                    json_object **out)
{
    json_object *obj = NULL;
    *out = NULL;
    if (kube_cache_get(r->cache, r->ns, r->name, copy_fn, &obj) == GQ_ENOTFOUND)
        return QUOTA_DELETED;
    if (!obj)
        return QUOTA_NO_COPY;
    *out = ctl_quota_newest(c, key, obj);
    return QUOTA_READ;
}

/* One reconcile of a quota's key: the quota as read (a fresh read after a
 * first 409), the reservations it drops as abandoned (NULL: none), the time
 * it is reconciled at, and the status it should have. */
typedef struct quota_pass {
    const char *key;
    const quota_ref *r;
    json_object *obj;
    json_object *drop;
    bool drop_counted; /* drop was counted when this version was handed over */
    int64_t now;
    ctl_result res;
} quota_pass;

/* Evaluate: the status quota should have. An invalid spec is said in the
 * status (Ready False, InvalidSpec) and an Event, not only in the log: the
 * webhook denies every GPU pod this quota governs until the spec is fixed. */
static gq_code quota_evaluate(ctl_controller *c, quota_pass *p, gq_err *err)
{
    const quota_ref *r = p->r;
    ctl_cohort_view v;
    gq_code rc = ctl_cohort_view_of(c, r->ns, r->name, &v);
    if (rc) {
        GQ_ERROR("%s %s%s%s: cohort: out of memory", r->kind, r->ns, r->sep, r->name);
        return gq_err_oom(err);
    }
    ctl_reconcile_ctx x = {p->drop, {v.m, v.n, v.self}};
    rc = ctl_podstore_reconcile_with(c->store, p->obj, &x, p->now, &p->res, err);
    ctl_cohort_view_dispose(&v);
    if (rc == GQ_EINVAL) {
        GQ_WARN("%s %s%s%s: %s", r->kind, r->ns, r->sep, r->name, err->msg);
        char why[GQ_ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err->msg);
        rc = ctl_reconcile_invalid(p->obj, why, p->now, &p->res, err);
    }
    if (rc)
        GQ_ERROR("%s %s%s%s: %s", r->kind, r->ns, r->sep, r->name, err->msg);
    return rc;
}

/* How a status write went. */
typedef enum status_write {
    STATUS_WRITTEN, /* the API server took it */
    STATUS_STALE,   /* 409: someone (a webhook adding a reservation) wrote first */
    STATUS_GONE,    /* the quota was deleted meanwhile */
    STATUS_FAILED,  /* any other error (in err) */
} status_write;

/* After a write: remember what it was based on and what it produced (the
 * next read and the watch echo use both), and raise the Events the new
 * status calls for. */
static void status_written(ctl_controller *c, const quota_pass *p, char *sent_rv,
                           json_object *written)
{
    const quota_ref *r = p->r;
    const ctl_result *res = &p->res;
    atomic_fetch_add(&c->writes, 1); /* its echo kicks the admission pass (pass_kick) */
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, p->key, true);
    if (ks) {
        const char *wrv = gq_json_meta_string(written, "resourceVersion");
        ks->fold_since_ms = 0;
        free(ks->written_rv);
        ks->written_rv = wrv ? strdup(wrv) : NULL;
    }
    pthread_mutex_unlock(&c->mu);
    ctl_quota_remember(c, p->key, sent_rv, written);
    if (res->became_exceeded) {
        GQ_WARN("%s %s%s%s exceeded: %s", r->kind, r->ns, r->sep, r->name, res->message);
        post_event(c, p->obj, r, "Exceeded", res->message, p->now);
    }
    if (res->became_invalid)
        post_event(c, p->obj, r, CTL_REASON_INVALID, res->message, p->now);
}

/* A write that only folds reservations into used (ctl_fold_only) changes
 * nothing an admission counts: the reservations charge those pods until the
 * write lands. On a quota many admissions charge, each of its charges is
 * otherwise followed by a status write of the controller's own, and those
 * writes race the webhook's (409s) and cost kube-apiserver a custom-resource
 * write each. So such a write waits up to FOLD_WAIT_MS from the first one
 * put off, and goes with whatever else has changed by then. While other
 * writers charge the quota (within CHARGED_MS), only a status holding fewer
 * than FOLD_MAX reservations waits: on a quota busy enough to hold more,
 * every webhook write would carry the folds put off, and a bigger status
 * costs kube-apiserver more per write than the controller's writes it saves
 * (measured: docs/performance.md). Once nobody else writes, as while the
 * queue drains into a quota after one charge of the admission pass, every
 * fold may wait: each ungate would otherwise be a status write. */
#define FOLD_WAIT_MS 1000
#define CHARGED_MS 2000
/* Pods a webhook replica admitted on an escrow hold raise used with no
 * reservation to fold: such a write waits too, as long as live holds cover
 * the rise (ctl_fold_only). A write while a replica's escrow want lives
 * does not wait: a denial waits for the admitted records it settles
 * (docs/validating-webhook.md, Escrow). */
#define FOLD_MAX 8

/* How long res's write may still wait (0: write now). */
static long fold_wait_ms(ctl_controller *c, const char *key, json_object *obj,
                         const ctl_result *res, int64_t now)
{
    json_object *held = gq_json_member(gq_json_member(obj, "status"), "reservations");
    size_t n_held = json_object_is_type(held, json_type_array) ? json_object_array_length(held) : 0;
    if (res->invalid ||
        (res->dropped == 0 && !gq_reservations_json_live(held, GQ_ESCROW_HOLD, now)) ||
        gq_reservations_json_live(held, GQ_ESCROW_WANT, now) ||
        !ctl_fold_only(obj, res->status, now, now + FOLD_WAIT_MS / 1000 + 1))
        return 0;
    int64_t t = ctl_mono_us() / 1000;
    long left = 0;
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, true);
    if (ks && n_held >= FOLD_MAX && ks->charged_ms && t - ks->charged_ms < CHARGED_MS)
        ks = NULL; /* write now */
    if (ks) {
        if (!ks->fold_since_ms)
            ks->fold_since_ms = t;
        left = FOLD_WAIT_MS - (long)(t - ks->fold_since_ms);
    }
    pthread_mutex_unlock(&c->mu);
    return left > 0 ? left : 0;
}

/* Nothing waits to be written for key any more. */
static void fold_done(ctl_controller *c, const char *key)
{
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, false);
    if (ks)
        ks->fold_since_ms = 0;
    pthread_mutex_unlock(&c->mu);
}

/* A reconcile that frees room (a pod ended) in a quota whose pods wait
 * hands the status it wants to the admission pass instead of writing it:
 * the pass plans on that status and writes it with the charges of the pods
 * it admits, so from a pod's end to the next one's ungate there is one
 * status write, not two in a row (docs/queueing.md, "Life of a queued
 * pod"). The pass writes it even when it admits nothing. The key is looked
 * at again after HANDOFF_MS: if the pass has not written that version by
 * then, the reconcile writes it itself (a version is handed over once).
 * Nothing else may wait so: an invalid spec or an Exceeded Event is written
 * here. Reservations dropped as abandoned (their pods gone) go with the
 * status handed over and are counted then, not again by the write that
 * follows a hand-over the pass did not take up. */
#define HANDOFF_MS 200
static bool hand_over(ctl_controller *c, quota_pass *p)
{
    const ctl_result *res = &p->res;
    json_object *obj = NULL, *st = NULL;
    if (res->invalid || res->became_exceeded || res->became_invalid ||
        json_object_get_int64(gq_json_member(res->status, "queuedPods")) <= 0 ||
        !ctl_room_freed(p->obj, res->status, p->now))
        return false;
    if (json_object_deep_copy(p->obj, &obj, NULL) ||
        json_object_deep_copy(res->status, &st, NULL) ||
        json_object_object_add(obj, "status", st)) {
        json_object_put(st);
        json_object_put(obj);
        return false;
    }
    int handed = ctl_quota_handoff(c, p->key, obj);
    if (handed < 0)
        p->drop_counted = true;
    if (handed <= 0)
        return false;
    atomic_fetch_add(&c->handoffs, 1);
    ctl_ungate_kick(c);
    ctl_requeue_after(c, p->key, HANDOFF_MS);
    return true;
}

/* Write: the pass's status through /status with the resourceVersion of
 * its read. */
static status_write quota_write_status(ctl_controller *c, const quota_pass *p, gq_err *err)
{
    const char *rv = gq_json_meta_string(p->obj, "resourceVersion");
    char *sent = rv ? strdup(rv) : NULL;
    json_object *written = NULL;
    json_object_object_add(p->obj, "status", json_object_get(p->res.status));
    gq_code rc = c->o.api->update_status(c->o.api->ctx, p->r->path, p->obj, &written, err);
    if (rc == GQ_OK) {
        status_written(c, p, sent, written);
        return STATUS_WRITTEN;
    }
    free(sent);
    json_object_put(written);
    if (rc == GQ_ECONFLICT)
        return STATUS_STALE;
    return rc == GQ_ENOTFOUND ? STATUS_GONE : STATUS_FAILED;
}

/* Keep the figures of a reconcile for the metrics. */
static void quota_gauges(ctl_controller *c, const char *key, const quota_ref *r,
                         const ctl_result *res)
{
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, true);
    if (ks && !res->invalid) {
        ks->fig = res->fig;
        ks->gauges = true;
        if (!ks->name) {
            ks->ns = strdup(r->ns);
            ks->name = strdup(r->name);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Evaluate and write until the status holds, re-reading at once on a first
 * 409 rather than waiting for the cache (p->obj is then the fresh read).
 * Returns whether the status now holds: *result stays RES_OK, or is
 * RES_CONFLICT when a 409 came first. Otherwise the key was requeued with
 * backoff (or forgotten: the quota is gone) and *result says why. */
static bool quota_sync(ctl_controller *c, quota_pass *p, int *result)
{
    const char *key = p->key;
    const quota_ref *r = p->r;
    gq_err err;
    gq_err_clear(&err);
    for (int attempt = 0;; attempt++) {
        if (quota_evaluate(c, p, &err)) {
            GQ_WARN("%s %s%s%s: reconcile failed, requeued: %s", r->kind, r->ns, r->sep, r->name,
                    err.msg[0] ? err.msg : "out of memory");
            ctl_backoff(c, key);
            *result = RES_ERROR;
            return false;
        }
        if (!p->res.changed) {
            fold_done(c, key);
            return true;
        }
        long wait = fold_wait_ms(c, key, p->obj, &p->res, p->now);
        if (wait > 0) { /* the current status holds meanwhile */
            atomic_fetch_add(&c->folds_deferred, 1);
            ctl_requeue_after(c, key, wait);
            return true;
        }
        if (attempt == 0 && hand_over(c, p))
            return true;
        switch (quota_write_status(c, p, &err)) {
        case STATUS_WRITTEN:
            return true;
        case STATUS_GONE:
            ctl_workqueue_forget(c->queue, key);
            return false;
        case STATUS_STALE: {
            json_object *fresh = NULL;
            *result = RES_CONFLICT;
            if (attempt == 0 && c->o.api->get(c->o.api->ctx, r->path, &fresh, &err) == GQ_OK) {
                json_object_put(p->obj);
                p->obj = fresh;
                continue;
            }
            GQ_DEBUG("%s %s%s%s: conflict, requeued", r->kind, r->ns, r->sep, r->name);
            ctl_backoff(c, key);
            return false;
        }
        case STATUS_FAILED:
            GQ_WARN("%s %s%s%s: status write failed: %s", r->kind, r->ns, r->sep, r->name, err.msg);
            ctl_backoff(c, key);
            *result = RES_ERROR;
            return false;
        }
    }
}

/* Write down what a reconcile whose status holds leaves behind: counters,
 * gauges, and when to look again. */
static void quota_synced(ctl_controller *c, const quota_pass *p, long recheck_ms)
{
    const char *key = p->key;
    const ctl_result *res = &p->res;
    if (p->drop && !res->invalid && !p->drop_counted)
        atomic_fetch_add(&c->abandoned, (unsigned long)json_object_object_length(p->drop));
    quota_gauges(c, key, p->r, res);
    ctl_workqueue_forget(c->queue, key);
    if (res->next_expiry) { /* drop the reservation when it lapses */
        int64_t in = res->next_expiry - p->now;
        ctl_requeue_after(c, key, (long)(in > 86400 ? 86400 : in) * 1000 + 50);
    }
    if (recheck_ms) /* a reservation whose pod has not appeared comes of age */
        ctl_requeue_after(c, key, recheck_ms + 50);
    if (res->next_deadline) { /* a pod being deleted stops counting then */
        int64_t in = res->next_deadline - p->now;
        ctl_requeue_after(c, key, (long)(in > 86400 ? 86400 : in) * 1000 + 1050);
    }
}

/* Reconcile one quota's key; returns how it went (RES_*). */
static int process_quota(ctl_controller *c, const char *key)
{
    quota_ref r;
    quota_pass p = {.key = key, .r = &r};
    if (!quota_ref_parse(c, key, &r)) {
        ctl_workqueue_forget(c->queue, key);
        return RES_INVALID;
    }
    switch (quota_read_cached(c, key, &r, &p.obj)) {
    case QUOTA_DELETED:
        ks_drop(c, key); /* deleted: forget its series */
        ctl_workqueue_forget(c->queue, key);
        return RES_OK;
    case QUOTA_NO_COPY:
        ctl_backoff(c, key);
        return RES_ERROR;
    case QUOTA_READ:
        break;
    }
    p.now = ctl_wall_now(c);
    long recheck_ms = 0;
    int result = RES_OK;
    ctl_result_init(&p.res);
    find_abandoned(c, key, p.obj, &p.drop, &recheck_ms);
    if (quota_sync(c, &p, &result)) {
        if (p.res.invalid)
            result = RES_INVALID; /* fixed by a spec change, which requeues */
        quota_synced(c, &p, recheck_ms);
    }
    json_object_put(p.drop);
    ctl_result_dispose(&p.res);
    json_object_put(p.obj);
    return result;
}

/* Reconcile one key; returns how it went (RES_*). */
static int process(ctl_controller *c, const char *key)
{
    if (!strcmp(key, ADMIT_KEY))
        return ctl_ungate_pass(c);
    if (key[0] == 'u' && key[1] == '/')
        return ctl_claims_unpin(c, key + 2);
    if (key[0] == 'c' && key[1] == '/') {
        char ns[KEY_MAX];
        const char *slash = strchr(key + 2, '/');
        size_t len = slash ? (size_t)(slash - key - 2) : 0;
        if (!slash || len >= sizeof ns)
            return RES_INVALID;
        memcpy(ns, key + 2, len);
        ns[len] = '\0';
        return ctl_claims_check(c, ns, slash + 1);
    }
    return process_quota(c, key);
}

static void *worker(void *arg)
{
    ctl_controller *c = arg;
    while (!atomic_load(&c->stop)) {
        if (!atomic_load(&c->synced) || !atomic_load(&c->leading)) {
            sleep_ms(50);
            continue;
        }
        char *key = NULL;
        gq_code rc = ctl_workqueue_get(c->queue, 200, &key);
        if (rc == GQ_ETIMEOUT)
            continue;
        if (rc)
            break;
        int64_t t0 = ctl_mono_us();
        int r = process(c, key);
        observe(c, r, ctl_mono_us() - t0);
        ctl_workqueue_done(c->queue, key);
        free(key);
    }
    return NULL;
}

/* Waits for the caches, then enqueues everything once per resync period. */
static void *resync_loop(void *arg)
{
    ctl_controller *c = arg;
    kube_cache *all[] = {c->nss, c->pods, c->quotas, c->tenants};
    for (size_t i = 0; i < 4 && !atomic_load(&c->stop);) {
        if (kube_cache_wait_synced(all[i], 200) == GQ_OK)
            i++;
    }
    if (atomic_load(&c->stop))
        return NULL;
    atomic_store(&c->synced, 1);
    gq_heap_trim();
    GQ_INFO("caches synced: %zu GPU pods tracked", ctl_podstore_pod_count(c->store));
    for (;;) {
        enqueue_ns(c, NULL, 0);
        ctl_ungate_kick(c);
        (void)enqueue(c, 'u', "", "", 0); /* pins whose pod events were missed */
        for (long waited = 0; waited < c->o.resync_ms; waited += 100) {
            if (atomic_load(&c->stop))
                return NULL;
            sleep_ms(100);
        }
    }
}

static void on_started(void *ud)
{
    ctl_controller *c = ud;
    GQ_INFO("leading: reconciling as %s", c->identity);
    atomic_store(&c->leading, 1);
    if (atomic_load(&c->synced)) {
        enqueue_ns(c, NULL, 0);
        ctl_ungate_kick(c);
    }
}

static void on_stopped(void *ud)
{
    ctl_controller *c = ud;
    if (atomic_exchange(&c->leading, 0))
        GQ_INFO("no longer leading");
}

/* --- lifecycle -------------------------------------------------------------- */

/* The informer caches: pods, GPUQuotas, GPUTenantQuotas, namespaces, each
 * with its options (ud set when it is made) and where it is kept. */
typedef struct cache_def {
    kube_cache_opts opts;
    size_t field; /* offset of its kube_cache * in ctl_controller */
} cache_def;

static const cache_def cache_defs[] = {
    {{.path = "/api/v1/pods",
      .page_size = POD_PAGE,
      .prune = pod_prune,
      .n_prune = sizeof(pod_prune) / sizeof(pod_prune[0]),
      .transform = pod_transform,
      .free_record = pod_free,
      .on_add = pod_add,
      .on_update = pod_update,
      .on_delete = pod_delete},
     offsetof(ctl_controller, pods)},
    {{.path = API_GQ "/gpuquotas",
      .on_add = quota_add_delete,
      .on_update = quota_update,
      .on_delete = quota_add_delete},
     offsetof(ctl_controller, quotas)},
    {{.path = API_GQ "/gputenantquotas",
      .on_add = tenant_add,
      .on_update = tenant_update,
      .on_delete = tenant_delete},
     offsetof(ctl_controller, tenants)},
    {{.path = "/api/v1/namespaces",
      .transform = ns_transform,
      .free_record = ns_free_rec,
      .on_add = ns_set,
      .on_update = ns_update,
      .on_delete = ns_delete},
     offsetof(ctl_controller, nss)},
};

static gq_code new_caches(ctl_controller *c, gq_err *err)
{
    gq_code rc = GQ_OK;
    for (size_t i = 0; !rc && i < sizeof cache_defs / sizeof cache_defs[0]; i++) {
        kube_cache_opts o = cache_defs[i].opts;
        o.ud = c;
        rc = kube_cache_new(c->o.api, &o, (kube_cache **)((char *)c + cache_defs[i].field), err);
    }
    return rc;
}

/* Leader election: the identity (HOSTNAME_PID unless given) and the Lease;
 * without leader_elect the controller leads from the start. */
static gq_code new_leader(ctl_controller *c, gq_err *err)
{
    const ctl_controller_opts *o = &c->o;
    char host[128] = "gpuquota", id[200];
    if (!o->identity) {
        if (gethostname(host, sizeof host) != 0)
            snprintf(host, sizeof host, "gpuquota");
        host[sizeof host - 1] = '\0';
        snprintf(id, sizeof id, "%s_%ld", host, (long)getpid());
    }
    c->identity = strdup(o->identity ? o->identity : id);
    c->lease_ns = strdup(o->lease_namespace ? o->lease_namespace : "gpuquota-system");
    c->lease_name = strdup(o->lease_name ? o->lease_name : "gpuquota-controller");
    if (!c->identity || !c->lease_ns || !c->lease_name)
        return GQ_ENOMEM;
    if (!o->leader_elect) {
        atomic_store(&c->leading, 1);
        return GQ_OK;
    }
    kube_leader_opts lo = {.namespace_ = c->lease_ns,
                           .name = c->lease_name,
                           .identity = c->identity,
                           .lease_ms = o->lease_ms,
                           .renew_deadline_ms = o->renew_deadline_ms,
                           .retry_ms = o->retry_ms,
                           .on_started = on_started,
                           .on_stopped = on_stopped,
                           .ud = c};
    return kube_leader_elect_new(o->api, &lo, &c->le, err);
}

gq_code ctl_controller_new(const ctl_controller_opts *o, ctl_controller **out, gq_err *err)
{
    gq_code rc = GQ_ENOMEM;
    if (!o || !o->api || !o->cfg)
        return gq_err_set(err, GQ_EINVAL, "controller needs an API and a configuration");
    ctl_controller *c = calloc(1, sizeof(*c));
    if (!c)
        return gq_err_oom(err);
    c->o = *o;
    if (!c->o.workers)
        c->o.workers = CTL_WORKERS;
    if (c->o.resync_ms <= 0)
        c->o.resync_ms = 300000;
    c->grace_dynamic = c->o.reservation_grace_ms <= 0;
    if (c->o.reservation_grace_ms <= 0)
        c->o.reservation_grace_ms = CTL_RESERVATION_GRACE_MS;
    pthread_mutex_init(&c->mu, NULL);
    http_histogram_init(&c->reconcile_duration, hist_bounds, N_BUCKETS);
    http_histogram_init(&c->pass_cpu, hist_bounds, N_BUCKETS);
    c->ungated = json_object_new_object();
    c->gone = json_object_new_object();
    c->q_events = json_object_new_object();
    c->nominated = json_object_new_object();
    c->evicting = json_object_new_object();
    c->evict_refused = json_object_new_object();
    c->no_victims = json_object_new_object();
    c->quota_empty = json_object_new_object();
    if (!c->ungated || !c->gone || !c->q_events || !c->quota_empty ||
        gq_htab_init(&c->ks, KS_BUCKETS))
        goto fail;
    ctl_workqueue_opts qo = {.backoff_min_ms = o->backoff_min_ms,
                             .backoff_max_ms = o->backoff_max_ms};
    if (ctl_podstore_new(&c->store) || ctl_workqueue_new(&qo, &c->queue))
        goto fail;
    /* The elector after the caches, as before: its callbacks reach them. */
    rc = new_caches(c, err);
    if (!rc)
        rc = new_leader(c, err);
    if (!rc && o->metrics && (rc = http_metrics_add_source(o->metrics, render_metrics, c)))
        gq_err_set(err, rc, "controller metrics: %s", gq_strerror(rc));
    if (rc)
        goto fail;
    *out = c;
    return GQ_OK;
fail:
    if (rc == GQ_ENOMEM)
        gq_err_oom(err);
    ctl_controller_free(c);
    return rc;
}

gq_code ctl_controller_start(ctl_controller *c, gq_err *err)
{
    gq_code rc;
    if (c->started)
        return gq_err_set(err, GQ_EINVAL, "controller already started");
    c->started = true;
    /* Namespaces first so tenant selectors see labels as pods arrive. */
    kube_cache *all[] = {c->nss, c->quotas, c->tenants, c->pods};
    for (size_t i = 0; i < 4; i++) {
        rc = kube_cache_start(all[i], err);
        if (rc)
            return rc;
    }
    c->threads = calloc(c->o.workers, sizeof(*c->threads));
    if (!c->threads)
        return gq_err_oom(err);
    for (; c->n_threads < c->o.workers; c->n_threads++)
        if (pthread_create(&c->threads[c->n_threads], NULL, worker, c) != 0)
            return gq_err_set(err, GQ_ENOMEM, "cannot start a worker thread");
    if (pthread_create(&c->resync, NULL, resync_loop, c) != 0)
        return gq_err_set(err, GQ_ENOMEM, "cannot start the resync thread");
    c->resync_started = true;
    if (c->le)
        return kube_leader_elect_start(c->le, err);
    return GQ_OK;
}

void ctl_controller_stop(ctl_controller *c)
{
    if (!c || c->stopped)
        return;
    c->stopped = true;
    atomic_store(&c->stop, 1);
    ctl_workqueue_shutdown(c->queue);
    for (unsigned i = 0; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    c->n_threads = 0;
    if (c->resync_started)
        pthread_join(c->resync, NULL);
    c->resync_started = false;
    /* Workers are gone: releasing the Lease now lets the next replica start
     * without two writers overlapping. */
    kube_leader_elect_stop(c->le);
    kube_cache_stop(c->pods);
    kube_cache_stop(c->quotas);
    kube_cache_stop(c->tenants);
    kube_cache_stop(c->nss);
}

void ctl_controller_free(ctl_controller *c)
{
    if (!c)
        return;
    http_metrics_remove_source(c->o.metrics, render_metrics, c);
    ctl_controller_stop(c);
    kube_leader_elect_free(c->le);
    /* Pods first: their records hold namespace references in the store. */
    kube_cache_free(c->pods);
    kube_cache_free(c->quotas);
    kube_cache_free(c->tenants);
    kube_cache_free(c->nss);
    ctl_workqueue_free(c->queue);
    ctl_podstore_free(c->store);
    for (size_t i = 0; i < c->n_tenants; i++) {
        free(c->tv[i].name);
        gq_quota_free(c->tv[i].q);
    }
    free(c->tv);
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &c->ks); n; n = gq_htab_iter_next(&it))
        ks_free(GQ_HTAB_ENTRY(n, kstate, node));
    gq_htab_free(&c->ks);
    free(c->threads);
    json_object_put(c->ungated);
    json_object_put(c->gone);
    json_object_put(c->q_events);
    json_object_put(c->nominated);
    json_object_put(c->evicting);
    json_object_put(c->evict_refused);
    json_object_put(c->no_victims);
    json_object_put(c->quota_empty);
    free(c->identity);
    free(c->lease_ns);
    free(c->lease_name);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

bool ctl_controller_synced(ctl_controller *c)
{
    /* A cache whose server lost history is not synced until it relisted. */
    return atomic_load(&c->synced) != 0 && kube_cache_synced(c->pods) &&
           kube_cache_synced(c->quotas) && kube_cache_synced(c->tenants) &&
           kube_cache_synced(c->nss);
}

bool ctl_controller_is_leader(ctl_controller *c)
{
    return atomic_load(&c->leading) != 0;
}

size_t ctl_controller_tracked_pods(ctl_controller *c)
{
    return ctl_podstore_pod_count(c->store);
}

/* --- metrics ---------------------------------------------------------------- */

/* Queue families: length gauge and wait-time histogram per quota. mu held. */
static void queue_series(ctl_controller *c, http_expo *e)
{
    gq_htab_iter it;
    http_expo_family(e, "gpuquota_queue_length", "gauge",
                     "Pods queued behind the gate gpuquota.io/quota that the quota governs.");
    for (kstate *k = ks_of(gq_htab_iter_first(&it, &c->ks)); k; k = ks_of(gq_htab_iter_next(&it)))
        if (k->gauges && k->name && k->ns)
            http_expo_double(e, "gpuquota_queue_length",
                             (http_label[]){{"namespace", k->ns}, {"quota", k->name}}, 2,
                             (double)k->fig.queued_pods);
    http_expo_family(e, "gpuquota_queue_wait_seconds", "histogram",
                     "Time from creation to ungate of queued pods the quota charged.");
    for (kstate *k = ks_of(gq_htab_iter_first(&it, &c->ks)); k; k = ks_of(gq_htab_iter_next(&it)))
        if (k->name && k->ns && http_histogram_count(&k->wait))
            http_expo_histogram(e, "gpuquota_queue_wait_seconds",
                                (http_label[]){{"namespace", k->ns}, {"quota", k->name}}, 2,
                                &k->wait);
}

static uint64_t ld(atomic_ulong *v)
{
    return atomic_load(v);
}

static void quota_series(http_expo *e, const char *family, const kstate *k, const gq_amounts *a)
{
    for (int i = 0; i < GQ_KEY_COUNT; i++)
        if (k->fig.hard.set[i]) {
            http_label l[] = {
                {"namespace", k->ns}, {"quota", k->name}, {"resource", gq_qkey_name((gq_qkey)i)}};
            http_expo_double(e, family, l, 3, (double)a->v[i]);
        }
}

/* One family with a series per informer cache. */
static void cache_family(http_expo *e, const char *family, const char *type, const char *help,
                         const uint64_t v[4])
{
    static const char *const names[] = {"pods", "gpuquotas", "gputenantquotas", "namespaces"};
    http_expo_family(e, family, type, help);
    for (int i = 0; i < 4; i++)
        http_expo_uint(e, family, &(http_label){"resource", names[i]}, 1, v[i]);
}

/* The families of the four informer caches. */
static void cache_series(ctl_controller *c, http_expo *e)
{
    kube_cache *caches[] = {c->pods, c->quotas, c->tenants, c->nss};
    uint64_t watches[4], relists[4], resets[4], synced[4];
    for (int i = 0; i < 4; i++) {
        kube_cache_stats st;
        kube_cache_get_stats(caches[i], &st);
        watches[i] = st.watches;
        relists[i] = st.relists;
        resets[i] = st.resets;
        synced[i] = kube_cache_fresh(caches[i]) ? 1 : 0;
    }
    cache_family(e, "gpuquota_controller_watches_total", "counter",
                 "Watch requests started (restarts included).", watches);
    cache_family(e, "gpuquota_controller_relists_total", "counter",
                 "Relists because a watch could not resume.", relists);
    cache_family(e, "gpuquota_controller_history_resets_total", "counter",
                 "Full relists because the API server's history went back.", resets);
    /* A watch that stays broken (RBAC, API server trouble) leaves the
     * controller counting from a stale picture: alerts key on this. */
    cache_family(e, "gpuquota_controller_informer_synced", "gauge",
                 "1 while the resource's cache is listed and its watch established.", synced);
}

/* A family of what quotas borrow or lend: the keys their status reports
 * (c->mu held). */
static void lending_series(ctl_controller *c, http_expo *e, const char *family, const char *help,
                           bool borrowed)
{
    gq_htab_iter it;
    http_expo_family(e, family, "gauge", help);
    for (kstate *k = ks_of(gq_htab_iter_first(&it, &c->ks)); k; k = ks_of(gq_htab_iter_next(&it))) {
        const gq_amounts *a = borrowed ? &k->fig.borrowed : &k->fig.lent;
        if (!k->gauges || !k->name || !k->ns || !(borrowed ? k->fig.has_borrowed : k->fig.has_lent))
            continue;
        for (int i = 0; i < GQ_KEY_COUNT; i++)
            if (a->set[i]) {
                http_label l[] = {{"namespace", k->ns},
                                  {"quota", k->name},
                                  {"resource", gq_qkey_name((gq_qkey)i)}};
                http_expo_double(e, family, l, 3, (double)a->v[i]);
            }
    }
}

static const char *const preempt_reasons[CTL_PREEMPT_REASONS] = {"WithinQuota", "Reclaim"};

/* Preemptions by reason, and their victims by quota and reason (c->mu
 * held). */
static void preemption_series(ctl_controller *c, http_expo *e)
{
    gq_htab_iter it;
    http_expo_family(e, "gpuquota_preemptions_total", "counter",
                     "Queued pods (or pod groups) for which pods were evicted, by reason: "
                     "WithinQuota (preemption.withinQuota) or Reclaim (reclaimWithinCohort).");
    for (int r = 0; r < CTL_PREEMPT_REASONS; r++)
        http_expo_uint(e, "gpuquota_preemptions_total", &(http_label){"reason", preempt_reasons[r]},
                       1, ld(&c->preemptions[r]));
    http_expo_family(e, "gpuquota_preemption_victims_total", "counter",
                     "Pods evicted to make room for a preemptor, by the quota they counted in "
                     "and reason.");
    /* Every quota reconciled has both series, 0 until a pod of it is
     * evicted, so that a rule's rate sees the first eviction. */
    for (kstate *k = ks_of(gq_htab_iter_first(&it, &c->ks)); k; k = ks_of(gq_htab_iter_next(&it)))
        for (int r = 0; k->name && k->ns && r < CTL_PREEMPT_REASONS; r++)
            if (k->gauges || k->victims[0] || k->victims[1]) {
                http_label l[] = {
                    {"namespace", k->ns}, {"quota", k->name}, {"reason", preempt_reasons[r]}};
                http_expo_uint(e, "gpuquota_preemption_victims_total", l, 3, k->victims[r]);
            }
}

/* gpuquota_quota_used and gpuquota_quota_hard of every quota reconciled,
 * and what those in a cohort borrow and lend (c->mu held). */
static void quota_gauge_series(ctl_controller *c, http_expo *e)
{
    gq_htab_iter it;
    lending_series(c, e, "gpuquota_quota_borrowed",
                   "What the quota uses above hard, borrowed in its cohort (status.borrowed).",
                   true);
    lending_series(c, e, "gpuquota_quota_lent",
                   "What of the quota's unused share its cohort's borrowers use (status.lent).",
                   false);
    http_expo_family(e, "gpuquota_quota_used", "gauge", "Usage recounted from pods.");
    for (kstate *k = ks_of(gq_htab_iter_first(&it, &c->ks)); k; k = ks_of(gq_htab_iter_next(&it)))
        if (k->gauges && k->name && k->ns)
            quota_series(e, "gpuquota_quota_used", k, &k->fig.used);
    http_expo_family(e, "gpuquota_quota_hard", "gauge", "spec.hard of the quota.");
    for (kstate *k = ks_of(gq_htab_iter_first(&it, &c->ks)); k; k = ks_of(gq_htab_iter_next(&it)))
        if (k->gauges && k->name && k->ns)
            quota_series(e, "gpuquota_quota_hard", k, &k->fig.hard);
}

/* A family of one series without labels. */
static void single(http_expo *e, const char *type, const char *name, const char *help, uint64_t v)
{
    http_expo_family(e, name, type, help);
    http_expo_uint(e, name, NULL, 0, v);
}

/* Counters of the controller without labels: where each is kept. */
typedef struct counter_def {
    const char *name, *help;
    size_t offset; /* of an atomic_ulong in ctl_controller */
} counter_def;

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define COUNTER(name, help, field)                                                                 \
    {                                                                                              \
        name, help, offsetof(ctl_controller, field)                                                \
    }

static const counter_def reconcile_counters[] = {
    COUNTER("gpuquota_controller_status_writes_total", "Status subresource writes that succeeded.",
            writes),
    COUNTER("gpuquota_controller_events_total", "Events recorded (Exceeded, InvalidSpec, Queued).",
            events),
    COUNTER("gpuquota_controller_events_dropped_total",
            "Events not posted because more were due than the rate limit allows (100 at once, "
            "10 a second).",
            events_dropped),
    COUNTER("gpuquota_controller_pod_cost_errors_total",
            "Pods whose GPU request could not be priced (not counted).", cost_errors),
    COUNTER("gpuquota_controller_reservations_abandoned_total",
            "Reservations dropped because their pods never appeared.", abandoned),
    COUNTER("gpuquota_controller_folds_deferred_total",
            "Status writes that only folded reservations into used, put off to go with later "
            "changes.",
            folds_deferred),
    COUNTER("gpuquota_controller_status_handoffs_total",
            "Status writes that free room for queued pods, handed to the admission pass to go "
            "with its charges.",
            handoffs),
};

static const counter_def queue_counters[] = {
    COUNTER("gpuquota_queue_admitted_total", "Queued pods charged and ungated.", q_ungated),
    COUNTER("gpuquota_preemption_evictions_refused_total",
            "Evictions a disruption budget (or the API server) refused; another victim is sought.",
            evictions_refused),
    COUNTER("gpuquota_claims_refused_total",
            "Pods left gated because a DRA claim is not the one charged at admission.",
            claims_refused),
    COUNTER("gpuquota_claims_pinned_total", "Pins written on checked ResourceClaims.",
            claims_pinned),
    COUNTER("gpuquota_claims_unpinned_total", "ResourceClaims whose last pin was lifted.",
            claims_unpinned),
};

static void render_counters(ctl_controller *c, http_expo *e, const counter_def *defs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        single(e, "counter", defs[i].name, defs[i].help,
               ld((atomic_ulong *)((char *)c + defs[i].offset)));
}

/* The reconcile loop's own counters and its duration histogram. */
static void reconcile_series(ctl_controller *c, http_expo *e)
{
    http_expo_family(e, "gpuquota_controller_reconciles_total", "counter",
                     "Quota reconciles by result.");
    for (int i = 0; i < RES_COUNT; i++)
        http_expo_uint(e, "gpuquota_controller_reconciles_total",
                       &(http_label){"result", result_names[i]}, 1, ld(&c->results[i]));
    http_expo_family(e, "gpuquota_controller_reconcile_duration_seconds", "histogram",
                     "Time to reconcile one quota, status write included.");
    http_expo_histogram(e, "gpuquota_controller_reconcile_duration_seconds", NULL, 0,
                        &c->reconcile_duration);
    render_counters(c, e, reconcile_counters, ARRAY_LEN(reconcile_counters));
}

/* The controller's families, a source of the shells' metrics registry. */
static void render_metrics(void *ctx, http_expo *e)
{
    ctl_controller *c = ctx;
    reconcile_series(c, e);
    cache_series(c, e);
    single(e, "gauge", "gpuquota_controller_queue_depth", "Quotas waiting to be reconciled.",
           ctl_workqueue_len(c->queue));
    single(e, "gauge", "gpuquota_controller_tracked_pods", "GPU pods held in memory.",
           ctl_podstore_pod_count(c->store));
    single(e, "gauge", "gpuquota_controller_leader", "1 while this replica reconciles.",
           ctl_controller_is_leader(c) ? 1 : 0);
    pthread_mutex_lock(&c->mu);
    quota_gauge_series(c, e);
    queue_series(c, e);
    preemption_series(c, e);
    pthread_mutex_unlock(&c->mu);
    http_expo_family(e, "gpuquota_queue_pass_cpu_seconds", "histogram",
                     "CPU time of one admission pass on the thread that ran it: reads, plan, "
                     "charges, ungates and preemption.");
    http_expo_histogram(e, "gpuquota_queue_pass_cpu_seconds", NULL, 0, &c->pass_cpu);
    render_counters(c, e, queue_counters, ARRAY_LEN(queue_counters));
}
