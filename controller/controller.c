/* The running controller: four informer caches feed the store and the work
 * queue; workers reconcile one quota at a time and write its status through
 * the /status subresource with the resourceVersion they read (409: requeue
 * with backoff). Level-triggered: every reconcile recounts from the store,
 * so a missed event is repaired by the next one or by the periodic resync. */
#include "controller/ctl_int.h"

#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gq_log.h"
#include "common/json_member.h"
#include "common/hash.h"

/* After the initial list the pages parsed and freed one after another sit in
 * glibc's arenas and would stay resident for the life of the process; the
 * controller gives them back once, when its caches have synced. Not under
 * AddressSanitizer, whose allocator replaces glibc's: malloc_trim would walk
 * arenas glibc never set up. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CTL_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CTL_UNDER_ASAN 1
#endif
static void trim_heap(void)
{
#if defined(__GLIBC__) && !defined(CTL_UNDER_ASAN)
    malloc_trim(0);
#endif
}

#define API_GQ "/apis/gpuquota.io/v1alpha1"
#define KS_BUCKETS 1024
#define N_BUCKETS 12

static const double hist_bounds[N_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1,    2.5};

#define W_BUCKETS 10
static const double wait_bounds[W_BUCKETS] = {0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400};

/* A reservation the controller writes for a queued pod lives this long: the
 * ungate follows at once, and one whose ungate never came (a crash and no
 * new leader) frees the quota afterwards. */
#define CTL_QUEUE_RESERVATION_TTL_S 120

/* Per-quota state kept between reconciles, keyed like the queue. */
typedef struct kstate {
    struct kstate *next;
    char *sent_rv;        /* resourceVersion our last write was based on */
    char *written_rv;     /* resourceVersion our last write produced */
    json_object *written; /* what the API server returned for that write */
    gq_amounts used, hard;
    bool gauges;
    int64_t queued_pods;                    /* pods queued behind the gate it governs */
    unsigned long wait_hist[W_BUCKETS + 1]; /* seconds queued pods waited (ungated) */
    double wait_sum;
    /* When this replica first saw each reservation of the quota whose pod
     * it has not seen: {key: monotonic ms}. */
    json_object *first_seen;
    char *ns; /* "" for tenants */
    char *name;
    char key[];
} kstate;

typedef struct tenant_ent {
    char *name;
    gq_quota *q;
} tenant_ent;

enum { RES_OK, RES_CONFLICT, RES_ERROR, RES_INVALID, RES_COUNT };
static const char *const result_names[RES_COUNT] = {"success", "conflict", "error", "invalid"};

struct ctl_controller {
    ctl_controller_opts o;
    char *lease_ns, *lease_name, *identity;
    ctl_store *store;
    ctl_queue *queue;
    kube_cache *pods, *quotas, *tenants, *nss;
    kube_leader_elect *le;
    pthread_t *threads;
    unsigned n_threads;
    pthread_t resync;
    bool resync_started, started, stopped;
    atomic_int stop, leading, synced;

    pthread_mutex_t mu; /* tenants, kstates */
    tenant_ent *tv;
    size_t n_tenants, cap_tenants;
    kstate *ks[KS_BUCKETS];

    atomic_ulong results[RES_COUNT], writes, events, cost_errors, abandoned;
    atomic_ulong q_charges, q_ungated;
    json_object *ungated;  /* {uid: true}: ungated here, not yet seen ungated (mu) */
    json_object *q_events; /* {uid: message}: why each queued pod was said to wait (mu) */
    atomic_ulong hist[N_BUCKETS + 1], hist_sum_us;
};

static int64_t wall_now(ctl_controller *c)
{
    return c->o.now ? c->o.now(c->o.clock_ud) : (int64_t)time(NULL);
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* --- keys ------------------------------------------------------------------ */

#define KEY_MAX 600

/* The queue key of a GPUQuota ('q') or tenant ('t'); false when too long. */
static bool make_key(char key[KEY_MAX], char kind, const char *ns, const char *name)
{
    int n = kind == 'q' ? snprintf(key, KEY_MAX, "q/%s/%s", ns, name)
                        : snprintf(key, KEY_MAX, "t/%s", name);
    return n > 0 && n < KEY_MAX;
}

static gq_code enqueue(ctl_controller *c, char kind, const char *ns, const char *name, long delay)
{
    char key[KEY_MAX];
    if (!make_key(key, kind, ns, name))
        return GQ_ELIMIT;
    return ctl_queue_add_after(c->queue, key, delay);
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
        if (!ns || ctl_store_covers(c->store, c->tv[i].q, ns))
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

static void admit_kick(ctl_controller *c);
static int admit_pass(ctl_controller *c);

/* --- pod cache ------------------------------------------------------------- */

/* Pods per list page. Per-page costs (a request, a body buffer grown from
 * scratch, a burst of frees) made the 500 that client-go's reflector asks
 * for cost the initial sync of 100k pods 5.9-7.2 s of CPU against 4.7-5.7 s
 * at 2000; 2000 pods of 15 KB (managedFields included) still fit the
 * client's 64 MiB response cap with room to spare. */
#define POD_PAGE 2000u

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
    admit_kick(c);
    /* A pod being deleted stops counting at its grace deadline; no event
     * marks that moment, so ask for a reconcile then. */
    if (p && p->delete_at && !p->terminal) {
        int64_t in = p->delete_at + 1 - wall_now(c);
        if (in > 0)
            enqueue_ns(c, ns, (long)(in > 86400 ? 86400 : in) * 1000);
    }
}

static void pod_add(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    ctl_store_link(c->store, (ctl_pod *)rec);
    pod_changed(c, ns, rec);
}

static void pod_update(void *ud, const char *ns, const char *name, const void *old_rec,
                       const void *new_rec)
{
    ctl_controller *c = ud;
    ctl_store_replace(c->store, (ctl_pod *)old_rec, (ctl_pod *)new_rec);
    if (!ctl_pod_same(old_rec, new_rec))
        pod_changed(c, ns, new_rec);
}

static void pod_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    ctl_store_unlink(c->store, (ctl_pod *)rec);
    pod_changed(c, ns, NULL);
}

/* --- quota caches ---------------------------------------------------------- */

static void quota_event(void *ud, const char *ns, const char *name, const void *rec)
{
    (void)enqueue(ud, 'q', ns, name, 0);
    if (atomic_load(&((ctl_controller *)ud)->synced))
        admit_kick(ud);
}

static bool own_echo(ctl_controller *c, char kind, const char *ns, const char *name,
                     const void *obj);

static void quota_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    if (own_echo(ud, 'q', ns, name, n)) /* our own status write coming back */
        return;
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
}

static void tenant_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    if (own_echo(ud, 't', ns, name, n))
        return;
    tenant_set(ud, ns, name, n);
}

static void tenant_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    ctl_controller *c = ud;
    pthread_mutex_lock(&c->mu);
    tenant_forget(c, name);
    pthread_mutex_unlock(&c->mu);
    (void)enqueue(c, 't', "", name, 0);
}

/* --- namespace cache: the record is a copy of metadata.labels -------------- */

static gq_code ns_transform(void *ud, json_object *obj, void **rec, gq_err *err)
{
    json_object *labels = gq_json_member(gq_json_member(obj, "metadata"), "labels"), *copy = NULL;
    if (labels && json_object_is_type(labels, json_type_object)) {
        if (json_object_deep_copy(labels, &copy, NULL) != 0)
            return gq_err_set(err, GQ_ENOMEM, "out of memory");
    } else if (!(copy = json_object_new_object())) {
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
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
    if (ctl_store_set_namespace(c->store, name, (json_object *)rec, &changed) != GQ_OK)
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
    ctl_store_delete_namespace(c->store, name);
    if (atomic_load(&c->synced))
        enqueue_tenants(c);
}

/* --- per-quota state ------------------------------------------------------- */

static kstate *ks_get(ctl_controller *c, const char *key, bool create)
{
    size_t b = (size_t)(gq_fnv1a(key) % KS_BUCKETS);
    for (kstate *k = c->ks[b]; k; k = k->next)
        if (!strcmp(k->key, key))
            return k;
    if (!create)
        return NULL;
    size_t len = strlen(key);
    kstate *k = calloc(1, sizeof(*k) + len + 1);
    if (!k)
        return NULL;
    memcpy(k->key, key, len + 1);
    k->next = c->ks[b];
    c->ks[b] = k;
    return k;
}

static void ks_free(kstate *k)
{
    if (!k)
        return;
    free(k->written_rv);
    free(k->sent_rv);
    json_object_put(k->written);
    json_object_put(k->first_seen);
    free(k->ns);
    free(k->name);
    free(k);
}

static void ks_drop(ctl_controller *c, const char *key)
{
    pthread_mutex_lock(&c->mu);
    for (kstate **pp = &c->ks[gq_fnv1a(key) % KS_BUCKETS]; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->key, key)) {
            kstate *k = *pp;
            *pp = k->next;
            ks_free(k);
            break;
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
    if (!rv || !make_key(key, kind, ns, name))
        return false;
    pthread_mutex_lock(&c->mu);
    kstate *k = ks_get(c, key, false);
    bool echo = k && k->written_rv && !strcmp(k->written_rv, rv);
    pthread_mutex_unlock(&c->mu);
    return echo;
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
    double s = (double)us / 1e6;
    int i = 0;
    while (i < N_BUCKETS && s > hist_bounds[i])
        i++;
    atomic_fetch_add(&c->hist[i], 1);
    atomic_fetch_add(&c->hist_sum_us, (unsigned long)(us > 0 ? us : 0));
}

/* core/v1 Event on the quota (namespace "default" for cluster-scoped
 * tenants, as Kubernetes does). Best effort: failures are logged. */
static void post_event_v(ctl_controller *c, json_object *obj, const char *api_version,
                         const char *kind, const char *ns, const char *name, const char *reason,
                         const char *message, int64_t now)
{
    char ts[GQ_RFC3339_MAX], evname[320], path[320];
    const char *evns = ns[0] ? ns : "default";
    json_object *meta = gq_json_member(obj, "metadata");
    gq_time_format_rfc3339(now, ts);
    snprintf(evname, sizeof evname, "%.240s.%" PRIx64, name, (uint64_t)mono_us() * 1000);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", evns);
    json_object *ev = json_object_new_object(), *m = json_object_new_object(),
                *io = json_object_new_object(), *src = json_object_new_object();
    if (!ev || !m || !io || !src) {
        json_object_put(ev);
        json_object_put(m);
        json_object_put(io);
        json_object_put(src);
        return;
    }
    json_object_object_add(m, "name", json_object_new_string(evname));
    json_object_object_add(m, "namespace", json_object_new_string(evns));
    json_object_object_add(io, "apiVersion", json_object_new_string(api_version));
    json_object_object_add(io, "kind", json_object_new_string(kind));
    json_object_object_add(io, "name", json_object_new_string(name));
    if (ns[0])
        json_object_object_add(io, "namespace", json_object_new_string(ns));
    const char *uid = gq_json_get_string(meta, "uid"),
               *rv = gq_json_meta_string(obj, "resourceVersion");
    if (uid)
        json_object_object_add(io, "uid", json_object_new_string(uid));
    if (rv)
        json_object_object_add(io, "resourceVersion", json_object_new_string(rv));
    json_object_object_add(src, "component", json_object_new_string("gpuquota-controller"));
    json_object_object_add(ev, "apiVersion", json_object_new_string("v1"));
    json_object_object_add(ev, "kind", json_object_new_string("Event"));
    json_object_object_add(ev, "metadata", m);
    json_object_object_add(ev, "involvedObject", io);
    json_object_object_add(ev, "reason", json_object_new_string(reason));
    json_object_object_add(ev, "message", json_object_new_string(message));
    json_object_object_add(ev, "type", json_object_new_string("Warning"));
    json_object_object_add(ev, "source", src);
    json_object_object_add(ev, "firstTimestamp", json_object_new_string(ts));
    json_object_object_add(ev, "lastTimestamp", json_object_new_string(ts));
    json_object_object_add(ev, "count", json_object_new_int(1));
    json_object_object_add(ev, "reportingComponent", json_object_new_string("gpuquota-controller"));
    json_object_object_add(ev, "reportingInstance", json_object_new_string(c->identity));
    gq_err err;
    gq_err_clear(&err);
    if (c->o.api->create(c->o.api->ctx, path, ev, NULL, &err) == GQ_OK)
        atomic_fetch_add(&c->events, 1);
    else
        GQ_WARN("%s %s%s%s: cannot record event: %s", kind, ns, ns[0] ? "/" : "", name, err.msg);
    json_object_put(ev);
}

static void post_event(ctl_controller *c, json_object *obj, const char *kind, const char *ns,
                       const char *name, const char *reason, const char *message, int64_t now)
{
    post_event_v(c, obj, GQ_API_VERSION, kind, ns, name, reason, message, now);
}

/* The queue only fails on out-of-memory; the periodic resync recovers. */
static void backoff(ctl_controller *c, const char *key)
{
    if (ctl_queue_add_rate_limited(c->queue, key, NULL))
        GQ_ERROR("%s: cannot requeue: out of memory", key);
}

static void requeue_after(ctl_controller *c, const char *key, long ms)
{
    if (ctl_queue_add_after(c->queue, key, ms))
        GQ_ERROR("%s: cannot requeue: out of memory", key);
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

/* The reservations of quota (its current object) whose pods the controller
 * has not seen and that have been known longer than the grace period while
 * their pods are not on the API server either: *drop gets their keys (NULL
 * when none). *recheck_ms (0: nothing to watch) is when the next one comes of
 * age. Records when each unseen reservation was first seen. */
static void find_abandoned(ctl_controller *c, const char *key, json_object *quota,
                           json_object **drop, long *recheck_ms)
{
    json_object *arr = gq_json_member(gq_json_member(quota, "status"), "reservations");
    json_object *seen_now = json_object_new_object(), *old = NULL;
    int64_t now_ms = mono_us() / 1000;
    long grace = c->o.reservation_grace_ms;
    *drop = NULL;
    *recheck_ms = 0;
    if (!seen_now)
        return;
    pthread_mutex_lock(&c->mu);
    kstate *ks = ks_get(c, key, true);
    if (ks)
        old = json_object_get(ks->first_seen);
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0;
         arr && json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr);
         i++) {
        gq_reservation r;
        if (gq_reservation_parse(json_object_array_get_idx(arr, i), NULL, &r, NULL) != GQ_OK)
            continue; /* corrupt: the reconcile drops it */
        if (r.claim || ctl_store_has_uid(c->store, r.namespace_, r.key)) {
            /* counted: the reconcile drops it; a shared claim's record names
             * no pod: it goes when counted, or when it expires */
            gq_reservation_dispose(&r);
            continue;
        }
        json_object *t = NULL;
        int64_t first =
            json_object_object_get_ex(old, r.key, &t) ? json_object_get_int64(t) : now_ms;
        json_object_object_add(seen_now, r.key, json_object_new_int64(first));
        long wait = (long)(first + grace - now_ms);
        if (wait <= 0 && pod_missing(c, &r)) {
            if (!*drop)
                *drop = json_object_new_object();
            if (*drop)
                json_object_object_add(*drop, r.key, json_object_new_boolean(1));
            GQ_INFO("dropping reservation %s: pod %s/%s did not appear within %ld ms", r.key,
                    r.namespace_, r.pod, grace);
        } else if (wait <= 0) {
            wait = 1000; /* on the API server but not in our cache yet: look again */
        }
        if (wait > 0 && (!*recheck_ms || wait < *recheck_ms))
            *recheck_ms = wait;
        gq_reservation_dispose(&r);
    }
    json_object_put(old);
    pthread_mutex_lock(&c->mu);
    ks = ks_get(c, key, false);
    if (ks) {
        json_object_put(ks->first_seen);
        ks->first_seen = seen_now;
        seen_now = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    json_object_put(seen_now);
}

/* Reconcile one key; returns how it went (RES_*). */
static int process(ctl_controller *c, const char *key)
{
    char ns[300] = "", name[300] = "", path[700];
    const char *kind;
    kube_cache *cache;
    if (!strcmp(key, "a/queue"))
        return admit_pass(c);
    if (key[0] == 'q' && sscanf(key, "q/%299[^/]/%299s", ns, name) == 2) {
        kind = GQ_KIND_GPUQUOTA;
        cache = c->quotas;
        snprintf(path, sizeof path, API_GQ "/namespaces/%s/gpuquotas/%s", ns, name);
    } else if (key[0] == 't' && sscanf(key, "t/%299s", name) == 1) {
        kind = GQ_KIND_GPUTENANTQUOTA;
        cache = c->tenants;
        snprintf(path, sizeof path, API_GQ "/gputenantquotas/%s", name);
    } else {
        ctl_queue_forget(c->queue, key);
        return RES_INVALID;
    }
    const char *sep = ns[0] ? "/" : "";

    json_object *obj = NULL, *written = NULL;
    if (kube_cache_get(cache, ns, name, copy_fn, &obj) == GQ_ENOTFOUND) {
        ks_drop(c, key); /* deleted: forget its series */
        ctl_queue_forget(c->queue, key);
        return RES_OK;
    }
    if (!obj) {
        backoff(c, key);
        return RES_ERROR;
    }
    /* Our last write may not have reached the cache yet: when the cache still
     * holds the version we wrote over, continue from what the write returned
     * instead of provoking a certain 409. */
    pthread_mutex_lock(&c->mu);
    kstate *ks = ks_get(c, key, false);
    const char *rv = gq_json_meta_string(obj, "resourceVersion");
    if (ks && ks->written) {
        if (rv && ks->sent_rv && !strcmp(rv, ks->sent_rv)) {
            json_object *w = NULL;
            if (json_object_deep_copy(ks->written, &w, NULL) == 0) {
                json_object_put(obj);
                obj = w;
            }
        } else {
            json_object_put(ks->written);
            ks->written = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);

    int result = RES_OK;
    int64_t now = wall_now(c);
    ctl_result res;
    gq_err err;
    json_object *drop = NULL;
    long recheck_ms = 0;
    gq_err_clear(&err);
    ctl_result_init(&res);
    gq_code rc;
    find_abandoned(c, key, obj, &drop, &recheck_ms);
    for (int attempt = 0;; attempt++) {
        rc = ctl_store_reconcile_dropping(c->store, obj, drop, now, &res, &err);
        if (rc == GQ_EINVAL) {
            /* Say so in the status (Ready False, InvalidSpec) and an Event,
             * not only in the log: the webhook denies every GPU pod this
             * quota governs until the spec is fixed. */
            GQ_WARN("%s %s%s%s: %s", kind, ns, sep, name, err.msg);
            char why[GQ_ERR_MSG_MAX];
            snprintf(why, sizeof why, "%s", err.msg);
            rc = ctl_reconcile_invalid(obj, why, now, &res, &err);
        }
        if (rc) {
            GQ_ERROR("%s %s%s%s: %s", kind, ns, sep, name, err.msg);
            backoff(c, key);
            result = RES_ERROR;
            goto out;
        }
        if (!res.changed)
            break;
        char *sent = (rv = gq_json_meta_string(obj, "resourceVersion")) ? strdup(rv) : NULL;
        json_object_object_add(obj, "status", json_object_get(res.status));
        rc = c->o.api->update_status(c->o.api->ctx, path, obj, &written, &err);
        if (rc == GQ_OK) {
            atomic_fetch_add(&c->writes, 1);
            admit_kick(c); /* usage went down, or queued pods changed: maybe room now */
            pthread_mutex_lock(&c->mu);
            ks = ks_get(c, key, true);
            if (ks) {
                const char *wrv = gq_json_meta_string(written, "resourceVersion");
                free(ks->written_rv);
                ks->written_rv = wrv ? strdup(wrv) : NULL;
                free(ks->sent_rv);
                json_object_put(ks->written);
                ks->sent_rv = sent;
                ks->written = written;
                sent = NULL;
                written = NULL;
            }
            pthread_mutex_unlock(&c->mu);
            if (res.became_exceeded) {
                GQ_WARN("%s %s%s%s exceeded: %s", kind, ns, sep, name, res.message);
                post_event(c, obj, kind, ns, name, "Exceeded", res.message, now);
            }
            if (res.became_invalid)
                post_event(c, obj, kind, ns, name, CTL_REASON_INVALID, res.message, now);
        }
        free(sent);
        if (rc == GQ_ECONFLICT && attempt == 0) {
            /* Someone (a webhook adding a reservation) wrote first: re-read
             * once and recompute at once rather than wait for the cache. */
            json_object *fresh = NULL;
            result = RES_CONFLICT;
            if (c->o.api->get(c->o.api->ctx, path, &fresh, &err) == GQ_OK) {
                json_object_put(obj);
                obj = fresh;
                continue;
            }
        }
        if (rc == GQ_ECONFLICT) {
            GQ_DEBUG("%s %s%s%s: conflict, requeued", kind, ns, sep, name);
            backoff(c, key);
            result = RES_CONFLICT;
            goto out;
        }
        if (rc == GQ_ENOTFOUND) {
            ctl_queue_forget(c->queue, key);
            goto out;
        }
        if (rc) {
            GQ_WARN("%s %s%s%s: status write failed: %s", kind, ns, sep, name, err.msg);
            backoff(c, key);
            result = RES_ERROR;
            goto out;
        }
        break;
    }

    if (drop && !res.invalid)
        atomic_fetch_add(&c->abandoned, (unsigned long)json_object_object_length(drop));
    if (res.invalid)
        result = RES_INVALID; /* fixed by a spec change, which requeues */
    pthread_mutex_lock(&c->mu);
    ks = ks_get(c, key, true);
    if (ks && !res.invalid) {
        ks->used = res.used;
        ks->hard = res.hard;
        ks->queued_pods = res.queued_pods;
        ks->gauges = true;
        if (!ks->name) {
            ks->ns = strdup(ns);
            ks->name = strdup(name);
        }
    }
    pthread_mutex_unlock(&c->mu);
    ctl_queue_forget(c->queue, key);
    if (res.next_expiry) { /* drop the reservation when it lapses */
        int64_t in = res.next_expiry - now;
        requeue_after(c, key, (long)(in > 86400 ? 86400 : in) * 1000 + 50);
    }
    if (recheck_ms) /* a reservation whose pod has not appeared comes of age */
        requeue_after(c, key, recheck_ms + 50);
out:
    json_object_put(drop);
    ctl_result_dispose(&res);
    json_object_put(written);
    json_object_put(obj);
    return result;
}

/* --- queue admission (docs/queueing.md) ---------------------------------- */

/* The work-queue key of the admission pass: one pass at a time (the queue
 * never hands a key to two workers), on the leader only. */
#define ADMIT_KEY "a/queue"

static void admit_kick(ctl_controller *c)
{
    if (ctl_queue_add(c->queue, ADMIT_KEY))
        GQ_ERROR("%s: cannot queue: out of memory", ADMIT_KEY);
}

/* One quota governing queued pods, read fresh for the pass. */
typedef struct aquota {
    json_object *obj; /* as read (GET), status edited in place before the write */
    gq_quota *q;
    char key[KEY_MAX];
    char path[700];
    bool dirty; /* reservations added: write */
} aquota;

typedef struct admit_ctx {
    ctl_controller *c;
    json_object *objs; /* array of quota objects (copies from the caches) */
} admit_ctx;

static int collect_quota_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    admit_ctx *a = ud;
    json_object *copy = NULL;
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
    snprintf(buf, cap, "%s%s%sexceeded %squota: %s, requested: %s, used: %s, limited: %s",
             group ? "pod group " : "", group ? group : "", group ? " waits: " : "",
             q->kind == GQ_QUOTA_TENANT ? "tenant " : "", q->name, req, used, lim);
}

/* Post an Event on a queued pod when why it waits changed: once per reason
 * (why: the state and the quota, not the figures of the message), so usage
 * moving under a long queue does not post an Event for every pod in it. */
static void queued_event(ctl_controller *c, const ctl_queued *p, const char *why, const char *msg,
                         int64_t now)
{
    pthread_mutex_lock(&c->mu);
    json_object *old = NULL;
    bool same = json_object_object_get_ex(c->q_events, p->uid, &old) &&
                !strcmp(json_object_get_string(old), why);
    if (!same)
        json_object_object_add(c->q_events, p->uid, json_object_new_string(why));
    pthread_mutex_unlock(&c->mu);
    if (same)
        return;
    json_object *obj = json_object_new_object(), *meta = json_object_new_object();
    if (obj && meta && !json_object_object_add(obj, "metadata", meta)) {
        json_object_object_add(meta, "uid", json_object_new_string(p->uid));
        post_event_v(c, obj, "v1", "Pod", p->ns, p->name, "Queued", msg, now);
    } else {
        json_object_put(meta);
    }
    json_object_put(obj);
}

static void wait_observe(ctl_controller *c, const char *qkey, double s);

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
                gq_queue_pin pin = {c->o.cfg, cur, p->pin};
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
        if (rc)
            return rc;
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
        gq_quota_free(v[i].q);
    }
    free(v);
}

/* The admission pass: every queued pod in order, charged and ungated when
 * its quotas have room (gq_queue_plan). Charges are reservations written
 * with the resourceVersion read, as /validate writes them; a 409 ends the
 * pass and runs it again on fresh reads. Reservations written before a
 * conflict or a crash stay and count as paid on the next pass, so nobody is
 * charged twice and a new leader finishes what the last one began. */
static int admit_pass(ctl_controller *c)
{
    int result = RES_OK;
    int64_t now = wall_now(c);
    ctl_queued *pods = NULL;
    size_t n = 0, nq = 0;
    json_object *running = NULL;
    aquota *qs = NULL;
    gq_queue_entry *ents = NULL;
    gq_queue_decision *dec = NULL;
    gq_queue_quota *pq = NULL;
    size_t *qidx = NULL;
    bool *paid = NULL;
    gq_model_option *popts = NULL;
    const gq_quota **eq = NULL;
    bool replan = false;
    admit_ctx ac = {c, json_object_new_array()};
    gq_err err;
    gq_err_clear(&err);
    if (!ac.objs || ctl_store_queued(c->store, now, &pods, &n, &running)) {
        result = RES_ERROR;
        goto out;
    }
    /* Pods ungated by this replica whose change the cache has not shown
     * yet are charged and done; forget the ones it has shown. */
    pthread_mutex_lock(&c->mu);
    json_object *still = json_object_new_object();
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *t = NULL;
        if (json_object_object_get_ex(c->ungated, pods[i].uid, &t)) {
            if (still)
                json_object_object_add(still, pods[i].uid, json_object_get(t));
            free(pods[i].ns);
            free(pods[i].name);
            free(pods[i].uid);
            free(pods[i].group);
            free(pods[i].claims);
            continue;
        }
        pods[keep++] = pods[i];
    }
    n = keep;
    if (still) {
        json_object_put(c->ungated);
        c->ungated = still;
    }
    /* Forget event reasons of pods no longer queued. */
    json_object *ev = json_object_new_object();
    for (size_t i = 0; ev && i < n; i++) {
        json_object *t = NULL;
        if (json_object_object_get_ex(c->q_events, pods[i].uid, &t))
            json_object_object_add(ev, pods[i].uid, json_object_get(t));
    }
    if (ev) {
        json_object_put(c->q_events);
        c->q_events = ev;
    }
    pthread_mutex_unlock(&c->mu);
    if (!n)
        goto out;

    kube_cache_foreach(c->quotas, collect_quota_fn, &ac);
    kube_cache_foreach(c->tenants, collect_quota_fn, &ac);
    size_t nobj = json_object_array_length(ac.objs);
    qs = calloc(nobj ? nobj : 1, sizeof(*qs));
    ents = calloc(n, sizeof(*ents));
    dec = calloc(n, sizeof(*dec));
    qidx = calloc(n * (nobj ? nobj : 1), sizeof(*qidx));
    paid = calloc(n * (nobj ? nobj : 1), sizeof(*paid));
    pq = calloc(nobj ? nobj : 1, sizeof(*pq));
    popts = calloc(n * GQ_MAX_MODEL_CHOICES, sizeof(*popts));
    eq = calloc(nobj ? nobj : 1, sizeof(*eq));
    if (!qs || !ents || !dec || !qidx || !paid || !pq || !popts || !eq) {
        result = RES_ERROR;
        goto out;
    }
    /* Which quotas govern which queued pods, on the cached specs. */
    for (size_t j = 0; j < nobj; j++) {
        json_object *o = json_object_array_get_idx(ac.objs, j);
        gq_quota *q = NULL;
        if (ctl_quota_parse_spec(o, &q, &err) != GQ_OK)
            continue; /* invalid spec: its reconcile reports it; it charges nothing */
        bool governs = false;
        for (size_t i = 0; i < n && !governs; i++) {
            gq_pod_facts f = {pods[i].ns, pods[i].priority_class, pods[i].terminating, false,
                              pods[i].model};
            governs = gq_quota_limits(q, &pods[i].charge) && ctl_store_matches(c->store, q, &f);
        }
        if (!governs) {
            gq_quota_free(q);
            continue;
        }
        aquota *a = &qs[nq];
        bool tenant = q->kind == GQ_QUOTA_TENANT;
        make_key(a->key, tenant ? 't' : 'q', tenant ? "" : q->namespace_, q->name);
        if (tenant)
            snprintf(a->path, sizeof a->path, API_GQ "/gputenantquotas/%s", q->name);
        else
            snprintf(a->path, sizeof a->path, API_GQ "/namespaces/%s/gpuquotas/%s", q->namespace_,
                     q->name);
        gq_quota_free(q);
        /* A fresh read: its status and resourceVersion are what we charge. */
        gq_code rc = c->o.api->get(c->o.api->ctx, a->path, &a->obj, &err);
        if (rc == GQ_ENOTFOUND)
            continue;
        if (rc || !(a->obj) || gq_quota_parse(a->obj, &a->q, &err) != GQ_OK) {
            GQ_WARN("queue: cannot read %s: %s", a->path, err.msg);
            json_object_put(a->obj);
            a->obj = NULL;
            result = RES_ERROR;
            goto out;
        }
        bool bad = gq_quota_in_use(a->q, now, NULL, &pq[nq].in_use, &err) != GQ_OK;
        for (size_t m = 0; !bad && m < a->q->n_models && m < GQ_CRD_MAX_QUOTA_MODELS; m++)
            bad = gq_quota_model_in_use(a->q, &a->q->models[m], now, NULL, &pq[nq].model_in_use[m],
                                        &err) != GQ_OK;
        if (bad) {
            result = RES_ERROR;
            nq++;
            goto out;
        }
        pq[nq].q = a->q;
        nq++;
    }
    for (size_t i = 0; i < n; i++) {
        gq_queue_entry *e = &ents[i];
        gq_pod_facts f = {pods[i].ns, pods[i].priority_class, pods[i].terminating, false,
                          pods[i].model};
        e->uid = pods[i].uid;
        e->priority = pods[i].priority;
        e->created_us = pods[i].created_us;
        e->charge = pods[i].charge;
        e->model = pods[i].model;
        e->quotas = &qidx[i * nobj];
        e->paid = &paid[i * nobj];
        if (pods[i].group) {
            char gk[600];
            json_object *r = NULL;
            snprintf(gk, sizeof gk, "%s/%s", pods[i].ns, pods[i].group);
            free(pods[i].group);
            pods[i].group = strdup(gk);
            e->group = pods[i].group;
            e->group_size = pods[i].group_size;
            e->group_running =
                json_object_object_get_ex(running, gk, &r) ? json_object_get_int64(r) : 0;
        }
        size_t m = 0;
        for (size_t j = 0; j < nq; j++) {
            if (!gq_quota_limits(qs[j].q, &pods[i].charge) ||
                !ctl_store_matches(c->store, qs[j].q, &f))
                continue;
            qidx[i * nobj + m] = j;
            eq[m] = qs[j].q;
            bool has = false;
            for (size_t r = 0; r < qs[j].q->n_reservations && !has; r++)
                has = !strcmp(qs[j].q->reservations[r].key, pods[i].uid) &&
                      qs[j].q->reservations[r].expires > now;
            paid[i * nobj + m] = has;
            m++;
        }
        e->n_quotas = m;
        /* A shared claim its quotas charge already costs it nothing more. */
        ctl_plan_charge(&pods[i].charge, pods[i].claims, pods[i].n_claims, eq, m, now, &e->charge);
        for (size_t o = 0; o < pods[i].n_opts; o++) {
            popts[i * GQ_MAX_MODEL_CHOICES + o].model = pods[i].opts[o].model;
            ctl_plan_charge(&pods[i].opts[o].charge, pods[i].claims, pods[i].n_claims, eq, m, now,
                            &popts[i * GQ_MAX_MODEL_CHOICES + o].charge);
        }
        if (pods[i].n_opts) {
            /* A choice of models: the planner takes the first with room.
             * One already charged (a reservation carries its model) keeps
             * that model. */
            e->options = &popts[i * GQ_MAX_MODEL_CHOICES];
            e->n_options = pods[i].n_opts;
            const char *held = NULL;
            for (size_t j = 0; j < nq && !held; j++)
                for (size_t r = 0; r < qs[j].q->n_reservations && !held; r++)
                    if (!strcmp(qs[j].q->reservations[r].key, pods[i].uid) &&
                        qs[j].q->reservations[r].expires > now)
                        held = qs[j].q->reservations[r].model;
            for (size_t o = 0; held && o < pods[i].n_opts; o++)
                if (!strcmp(pods[i].opts[o].model, held)) {
                    e->options = &popts[i * GQ_MAX_MODEL_CHOICES + o];
                    e->n_options = 1;
                }
        }
    }
    if (gq_queue_plan(ents, n, pq, nq, dec, &err) != GQ_OK) {
        GQ_ERROR("queue: %s", err.msg);
        result = RES_ERROR;
        goto out;
    }
    /* Charge: one status write per quota holding every new reservation. */
    for (size_t i = 0; i < n; i++) {
        if (dec[i].state != GQ_QSTATE_ADMIT)
            continue;
        /* The model chosen among several: its charge, its reservations. */
        const gq_model_option *chosen = ents[i].n_options ? &ents[i].options[dec[i].option] : NULL;
        if (chosen) {
            size_t at = (size_t)(chosen - &popts[i * GQ_MAX_MODEL_CHOICES]);
            pods[i].charge = pods[i].opts[at].charge;
            pods[i].model = chosen->model;
            pods[i].pin = pods[i].model_of[at];
        }
        for (size_t m = 0; m < ents[i].n_quotas; m++) {
            if (ents[i].paid[m])
                continue;
            aquota *a = &qs[ents[i].quotas[m]];
            json_object *st = gq_json_member(a->obj, "status");
            if (!st || !json_object_is_type(st, json_type_object)) {
                st = json_object_new_object();
                json_object_object_add(a->obj, "status", st);
            }
            ctl_admitted ad = {pods[i].ns,       pods[i].name,
                               pods[i].uid,      pods[i].model,
                               pods[i].charge,   pods[i].claims,
                               pods[i].n_claims, now + CTL_QUEUE_RESERVATION_TTL_S};
            bool added = false;
            if (ctl_admit_charge(st, a->q, &ad, now, &added, &err) != GQ_OK) {
                GQ_WARN("queue: %s: %s", a->path, err.msg);
                result = RES_ERROR;
                goto out;
            }
            a->dirty = a->dirty || added;
        }
    }
    for (size_t j = 0; j < nq; j++) {
        if (!qs[j].dirty)
            continue;
        gq_code rc = c->o.api->update_status(c->o.api->ctx, qs[j].path, qs[j].obj, NULL, &err);
        if (rc == GQ_ECONFLICT) {
            /* Someone charged first (a webhook, a reconcile): again, on
             * fresh reads; what was written so far counts as paid. */
            result = RES_CONFLICT;
            goto out;
        }
        if (rc) {
            GQ_WARN("queue: charging %s: %s", qs[j].path, err.msg);
            result = RES_ERROR;
            goto out;
        }
        atomic_fetch_add(&c->writes, 1);
        atomic_fetch_add(&c->q_charges, 1);
    }
    /* A waiting pod naming a claim charged just now is planned again
     * without it. */
    if (claims_charged_for_waiting(pods, dec, n))
        replan = true;
    /* Every admitted pod now holds all its charges: ungate. */
    for (size_t i = 0; i < n; i++) {
        if (dec[i].state != GQ_QSTATE_ADMIT)
            continue;
        gq_code rc = ungate(c, &pods[i], &err);
        if (rc && rc != GQ_ENOTFOUND) {
            GQ_WARN("queue: cannot ungate pod %s/%s: %s", pods[i].ns, pods[i].name, err.msg);
            result = RES_ERROR;
            continue;
        }
        if (rc == GQ_OK) {
            atomic_fetch_add(&c->q_ungated, 1);
            GQ_INFO("queue: admitted pod %s/%s (position %zu)", pods[i].ns, pods[i].name,
                    dec[i].position);
            double waited =
                pods[i].created_us ? (double)(now * 1000000 - pods[i].created_us) / 1e6 : 0;
            for (size_t m = 0; m < ents[i].n_quotas; m++)
                wait_observe(c, qs[ents[i].quotas[m]].key, waited < 0 ? 0 : waited);
        }
        pthread_mutex_lock(&c->mu);
        json_object_object_add(c->ungated, pods[i].uid, json_object_new_boolean(1));
        pthread_mutex_unlock(&c->mu);
    }
    /* Say why the others wait. */
    for (size_t i = 0; i < n; i++) {
        char msg[1024];
        const gq_queue_decision *d = &dec[i];
        switch (d->state) {
        case GQ_QSTATE_ADMIT:
            continue;
        case GQ_QSTATE_NO_ROOM:
            no_room_message(qs[d->quota].q, d->model_limit, &pq[d->quota], &d->need,
                            ents[i].group ? pods[i].group : NULL, msg, sizeof msg);
            break;
        case GQ_QSTATE_BEHIND_HEAD:
            snprintf(msg, sizeof msg,
                     "waiting in line behind %lld pod(s) of %s %s (StrictFIFO) that do not fit yet",
                     (long long)d->ahead,
                     qs[d->quota].q->kind == GQ_QUOTA_TENANT ? "tenant quota" : "quota",
                     qs[d->quota].q->name);
            break;
        case GQ_QSTATE_WAIT_MEMBERS:
            snprintf(msg, sizeof msg,
                     "pod group %s waits for its members: %lld of %lld queued, %lld running",
                     pods[i].group, (long long)d->members, (long long)ents[i].group_size,
                     (long long)ents[i].group_running);
            break;
        case GQ_QSTATE_GROUP_MISMATCH:
            snprintf(msg, sizeof msg,
                     "pod group %s: members disagree on annotation " GQ_POD_GROUP_SIZE_ANNOTATION
                     "; none is admitted until they agree",
                     pods[i].group);
            break;
        }
        char why[KEY_MAX + 64];
        if (d->state == GQ_QSTATE_NO_ROOM || d->state == GQ_QSTATE_BEHIND_HEAD)
            snprintf(why, sizeof why, "%d %s", (int)d->state, qs[d->quota].key);
        else
            snprintf(why, sizeof why, "%d %lld", (int)d->state, (long long)d->members);
        queued_event(c, &pods[i], why, msg, now);
    }
out:
    if (result == RES_CONFLICT || (result == RES_OK && replan))
        requeue_after(c, ADMIT_KEY, 5);
    else if (result == RES_ERROR)
        backoff(c, ADMIT_KEY);
    else
        ctl_queue_forget(c->queue, ADMIT_KEY);
    aquotas_free(qs, nq);
    free(ents);
    free(dec);
    free(qidx);
    free(paid);
    free(pq);
    free(popts);
    free(eq);
    ctl_queued_free(pods, n);
    json_object_put(running);
    json_object_put(ac.objs);
    return result;
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
        gq_code rc = ctl_queue_get(c->queue, 200, &key);
        if (rc == GQ_ETIMEOUT)
            continue;
        if (rc)
            break;
        int64_t t0 = mono_us();
        int r = process(c, key);
        observe(c, r, mono_us() - t0);
        ctl_queue_done(c->queue, key);
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
    trim_heap();
    GQ_INFO("caches synced: %zu GPU pods tracked", ctl_store_pod_count(c->store));
    for (;;) {
        enqueue_ns(c, NULL, 0);
        admit_kick(c);
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
        admit_kick(c);
    }
}

static void on_stopped(void *ud)
{
    ctl_controller *c = ud;
    if (atomic_exchange(&c->leading, 0))
        GQ_INFO("no longer leading");
}

/* --- lifecycle -------------------------------------------------------------- */

gq_code ctl_controller_new(const ctl_controller_opts *o, ctl_controller **out, gq_err *err)
{
    gq_code rc = GQ_ENOMEM;
    if (!o || !o->api || !o->cfg)
        return gq_err_set(err, GQ_EINVAL, "controller needs an API and a configuration");
    ctl_controller *c = calloc(1, sizeof(*c));
    if (!c)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    c->o = *o;
    if (!c->o.workers)
        c->o.workers = 2;
    if (c->o.resync_ms <= 0)
        c->o.resync_ms = 300000;
    if (c->o.reservation_grace_ms <= 0)
        c->o.reservation_grace_ms = CTL_RESERVATION_GRACE_MS;
    pthread_mutex_init(&c->mu, NULL);
    c->ungated = json_object_new_object();
    c->q_events = json_object_new_object();
    if (!c->ungated || !c->q_events)
        goto fail;
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
        goto fail;
    ctl_queue_opts qo = {.backoff_min_ms = o->backoff_min_ms, .backoff_max_ms = o->backoff_max_ms};
    if (ctl_store_new(&c->store) || ctl_queue_new(&qo, &c->queue))
        goto fail;
    kube_cache_opts po = {.path = "/api/v1/pods",
                          .page_size = POD_PAGE,
                          .transform = pod_transform,
                          .free_record = pod_free,
                          .on_add = pod_add,
                          .on_update = pod_update,
                          .on_delete = pod_delete,
                          .ud = c};
    kube_cache_opts qopt = {.path = API_GQ "/gpuquotas",
                            .on_add = quota_event,
                            .on_update = quota_update,
                            .on_delete = quota_event,
                            .ud = c};
    kube_cache_opts topt = {.path = API_GQ "/gputenantquotas",
                            .on_add = tenant_set,
                            .on_update = tenant_update,
                            .on_delete = tenant_delete,
                            .ud = c};
    kube_cache_opts nopt = {.path = "/api/v1/namespaces",
                            .transform = ns_transform,
                            .free_record = ns_free_rec,
                            .on_add = ns_set,
                            .on_update = ns_update,
                            .on_delete = ns_delete,
                            .ud = c};
    rc = kube_cache_new(o->api, &po, &c->pods, err);
    if (!rc)
        rc = kube_cache_new(o->api, &qopt, &c->quotas, err);
    if (!rc)
        rc = kube_cache_new(o->api, &topt, &c->tenants, err);
    if (!rc)
        rc = kube_cache_new(o->api, &nopt, &c->nss, err);
    if (rc)
        goto fail;
    if (o->leader_elect) {
        kube_leader_opts lo = {.namespace_ = c->lease_ns,
                               .name = c->lease_name,
                               .identity = c->identity,
                               .lease_ms = o->lease_ms,
                               .renew_deadline_ms = o->renew_deadline_ms,
                               .retry_ms = o->retry_ms,
                               .on_started = on_started,
                               .on_stopped = on_stopped,
                               .ud = c};
        rc = kube_leader_elect_new(o->api, &lo, &c->le, err);
        if (rc)
            goto fail;
    } else {
        atomic_store(&c->leading, 1);
    }
    *out = c;
    return GQ_OK;
fail:
    if (rc == GQ_ENOMEM)
        gq_err_set(err, GQ_ENOMEM, "out of memory");
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
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
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
    ctl_queue_shutdown(c->queue);
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
    ctl_controller_stop(c);
    kube_leader_elect_free(c->le);
    /* Pods first: their records hold namespace references in the store. */
    kube_cache_free(c->pods);
    kube_cache_free(c->quotas);
    kube_cache_free(c->tenants);
    kube_cache_free(c->nss);
    ctl_queue_free(c->queue);
    ctl_store_free(c->store);
    for (size_t i = 0; i < c->n_tenants; i++) {
        free(c->tv[i].name);
        gq_quota_free(c->tv[i].q);
    }
    free(c->tv);
    for (size_t i = 0; i < KS_BUCKETS; i++)
        for (kstate *k = c->ks[i], *n; k; k = n) {
            n = k->next;
            ks_free(k);
        }
    free(c->threads);
    json_object_put(c->ungated);
    json_object_put(c->q_events);
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
    return ctl_store_pod_count(c->store);
}

/* --- metrics ---------------------------------------------------------------- */

static void wait_observe(ctl_controller *c, const char *qkey, double s)
{
    pthread_mutex_lock(&c->mu);
    kstate *k = ks_get(c, qkey, true);
    if (k) {
        int i = 0;
        while (i < W_BUCKETS && s > wait_bounds[i])
            i++;
        k->wait_hist[i]++;
        k->wait_sum += s;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Queue families: length gauge and wait-time histogram per quota. mu held. */
static void queue_series(ctl_controller *c, FILE *f)
{
    fprintf(f, "# HELP gpuquota_queue_length Pods queued behind the gate gpuquota.io/quota that "
               "the quota governs.\n# TYPE gpuquota_queue_length gauge\n");
    for (size_t i = 0; i < KS_BUCKETS; i++)
        for (kstate *k = c->ks[i]; k; k = k->next)
            if (k->gauges && k->name && k->ns)
                fprintf(f, "gpuquota_queue_length{namespace=\"%s\",quota=\"%s\"} %" PRId64 "\n",
                        k->ns, k->name, k->queued_pods);
    fprintf(f, "# HELP gpuquota_queue_wait_seconds Time from creation to ungate of queued pods "
               "the quota charged.\n# TYPE gpuquota_queue_wait_seconds histogram\n");
    for (size_t i = 0; i < KS_BUCKETS; i++)
        for (kstate *k = c->ks[i]; k; k = k->next) {
            unsigned long cum = 0;
            if (!k->name || !k->ns)
                continue;
            for (int b = 0; b <= W_BUCKETS; b++)
                cum += k->wait_hist[b];
            if (!cum)
                continue;
            cum = 0;
            for (int b = 0; b <= W_BUCKETS; b++) {
                cum += k->wait_hist[b];
                if (b < W_BUCKETS)
                    fprintf(f,
                            "gpuquota_queue_wait_seconds_bucket{namespace=\"%s\",quota=\"%s\","
                            "le=\"%g\"} %lu\n",
                            k->ns, k->name, wait_bounds[b], cum);
                else
                    fprintf(f,
                            "gpuquota_queue_wait_seconds_bucket{namespace=\"%s\",quota=\"%s\","
                            "le=\"+Inf\"} %lu\n",
                            k->ns, k->name, cum);
            }
            fprintf(f, "gpuquota_queue_wait_seconds_sum{namespace=\"%s\",quota=\"%s\"} %.6f\n",
                    k->ns, k->name, k->wait_sum);
            fprintf(f, "gpuquota_queue_wait_seconds_count{namespace=\"%s\",quota=\"%s\"} %lu\n",
                    k->ns, k->name, cum);
        }
}

static unsigned long ld(atomic_ulong *v)
{
    return atomic_load(v);
}

static void quota_series(FILE *f, const char *family, const kstate *k, const gq_amounts *a)
{
    for (int i = 0; i < GQ_KEY_COUNT; i++)
        if (k->hard.set[i])
            fprintf(f, "%s{namespace=\"%s\",quota=\"%s\",resource=\"%s\"} %" PRId64 "\n", family,
                    k->ns, k->name, gq_qkey_name((gq_qkey)i), a->v[i]);
}

gq_code ctl_controller_metrics(ctl_controller *c, char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return GQ_ENOMEM;
    fprintf(f, "# HELP gpuquota_controller_reconciles_total Quota reconciles by result.\n"
               "# TYPE gpuquota_controller_reconciles_total counter\n");
    for (int i = 0; i < RES_COUNT; i++)
        fprintf(f, "gpuquota_controller_reconciles_total{result=\"%s\"} %lu\n", result_names[i],
                ld(&c->results[i]));
    fprintf(f, "# HELP gpuquota_controller_reconcile_duration_seconds Time to reconcile one "
               "quota, status write included.\n"
               "# TYPE gpuquota_controller_reconcile_duration_seconds histogram\n");
    unsigned long cum = 0;
    for (int i = 0; i <= N_BUCKETS; i++) {
        cum += ld(&c->hist[i]);
        if (i < N_BUCKETS)
            fprintf(f, "gpuquota_controller_reconcile_duration_seconds_bucket{le=\"%g\"} %lu\n",
                    hist_bounds[i], cum);
        else
            fprintf(f, "gpuquota_controller_reconcile_duration_seconds_bucket{le=\"+Inf\"} %lu\n",
                    cum);
    }
    fprintf(f, "gpuquota_controller_reconcile_duration_seconds_sum %.6f\n",
            (double)ld(&c->hist_sum_us) / 1e6);
    fprintf(f, "gpuquota_controller_reconcile_duration_seconds_count %lu\n", cum);
    fprintf(f,
            "# HELP gpuquota_controller_status_writes_total Status subresource writes that "
            "succeeded.\n# TYPE gpuquota_controller_status_writes_total counter\n"
            "gpuquota_controller_status_writes_total %lu\n"
            "# HELP gpuquota_controller_events_total Exceeded events recorded.\n"
            "# TYPE gpuquota_controller_events_total counter\n"
            "gpuquota_controller_events_total %lu\n"
            "# HELP gpuquota_controller_pod_cost_errors_total Pods whose GPU request could not "
            "be priced (not counted).\n# TYPE gpuquota_controller_pod_cost_errors_total counter\n"
            "gpuquota_controller_pod_cost_errors_total %lu\n"
            "# HELP gpuquota_controller_reservations_abandoned_total Reservations dropped because "
            "their pods never appeared.\n"
            "# TYPE gpuquota_controller_reservations_abandoned_total counter\n"
            "gpuquota_controller_reservations_abandoned_total %lu\n",
            ld(&c->writes), ld(&c->events), ld(&c->cost_errors), ld(&c->abandoned));
    static const char *const names[] = {"pods", "gpuquotas", "gputenantquotas", "namespaces"};
    kube_cache *caches[] = {c->pods, c->quotas, c->tenants, c->nss};
    kube_cache_stats st[4];
    for (int i = 0; i < 4; i++)
        kube_cache_get_stats(caches[i], &st[i]);
    fprintf(f, "# HELP gpuquota_controller_watches_total Watch requests started (restarts "
               "included).\n# TYPE gpuquota_controller_watches_total counter\n");
    for (int i = 0; i < 4; i++)
        fprintf(f, "gpuquota_controller_watches_total{resource=\"%s\"} %lu\n", names[i],
                st[i].watches);
    fprintf(f, "# HELP gpuquota_controller_relists_total Relists because a watch could not "
               "resume.\n# TYPE gpuquota_controller_relists_total counter\n");
    for (int i = 0; i < 4; i++)
        fprintf(f, "gpuquota_controller_relists_total{resource=\"%s\"} %lu\n", names[i],
                st[i].relists);
    fprintf(f, "# HELP gpuquota_controller_history_resets_total Full relists because the API "
               "server's history went back.\n"
               "# TYPE gpuquota_controller_history_resets_total counter\n");
    for (int i = 0; i < 4; i++)
        fprintf(f, "gpuquota_controller_history_resets_total{resource=\"%s\"} %lu\n", names[i],
                st[i].resets);
    /* A watch that stays broken (RBAC, API server trouble) leaves the
     * controller counting from a stale picture: alerts key on this. */
    fprintf(f, "# HELP gpuquota_controller_informer_synced 1 while the resource's cache is "
               "listed and its watch established.\n"
               "# TYPE gpuquota_controller_informer_synced gauge\n");
    for (int i = 0; i < 4; i++)
        fprintf(f, "gpuquota_controller_informer_synced{resource=\"%s\"} %d\n", names[i],
                kube_cache_fresh(caches[i]) ? 1 : 0);
    fprintf(f,
            "# HELP gpuquota_controller_queue_depth Quotas waiting to be reconciled.\n"
            "# TYPE gpuquota_controller_queue_depth gauge\n"
            "gpuquota_controller_queue_depth %zu\n"
            "# HELP gpuquota_controller_tracked_pods GPU pods held in memory.\n"
            "# TYPE gpuquota_controller_tracked_pods gauge\n"
            "gpuquota_controller_tracked_pods %zu\n"
            "# HELP gpuquota_controller_leader 1 while this replica reconciles.\n"
            "# TYPE gpuquota_controller_leader gauge\n"
            "gpuquota_controller_leader %d\n",
            ctl_queue_len(c->queue), ctl_store_pod_count(c->store),
            ctl_controller_is_leader(c) ? 1 : 0);
    fprintf(f, "# HELP gpuquota_quota_used Usage recounted from pods.\n"
               "# TYPE gpuquota_quota_used gauge\n");
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < KS_BUCKETS; i++)
        for (kstate *k = c->ks[i]; k; k = k->next)
            if (k->gauges && k->name && k->ns)
                quota_series(f, "gpuquota_quota_used", k, &k->used);
    fprintf(f, "# HELP gpuquota_quota_hard spec.hard of the quota.\n"
               "# TYPE gpuquota_quota_hard gauge\n");
    for (size_t i = 0; i < KS_BUCKETS; i++)
        for (kstate *k = c->ks[i]; k; k = k->next)
            if (k->gauges && k->name && k->ns)
                quota_series(f, "gpuquota_quota_hard", k, &k->hard);
    queue_series(c, f);
    pthread_mutex_unlock(&c->mu);
    fprintf(f,
            "# HELP gpuquota_queue_admitted_total Queued pods charged and ungated.\n"
            "# TYPE gpuquota_queue_admitted_total counter\n"
            "gpuquota_queue_admitted_total %lu\n",
            ld(&c->q_ungated));
    if (fclose(f) != 0) {
        free(buf);
        return GQ_ENOMEM;
    }
    *out = buf;
    *len = n;
    return GQ_OK;
}
