/* Informer-style cache of one resource: list (paged), then watch from the
 * list's resourceVersion on a thread of its own; relist whenever the watch
 * cannot resume (410; 504 "Too large resource version"; the server's
 * history went back; repeated failures), reconnect with backoff on other
 * failures. Readers take a read lock; only the cache thread writes, so
 * callbacks can run with the lock released. Whether the contents are
 * current (a watch established) is kept apart from whether they were ever
 * listed: kube_cache_fresh, kube_cache_synced. */
#include "kube/kube_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/gq_log.h"
#include "common/hash.h"
#include "common/htab.h"
#include "common/json_member.h"

typedef struct entry {
    gq_hnode node; /* in the cache's table by key_hash */
    char *ns;      /* points into key storage */
    char *name;    /* points into key storage */
    char *rv;
    void *rec;
    unsigned mark; /* relist generation that last saw it */
    char key[];    /* "ns\0name\0" */
} entry;

struct kube_cache {
    const kube_api *api;
    kube_cache_opts o;
    char *path, *label_selector, *field_selector;

    pthread_rwlock_t lock;
    gq_htab tab; /* entries by key_hash */
    char rv[128];
    kube_cache_stats stats;

    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
    int synced;
    /* Monotonic ms from which the cache counts as fresh (kube_cache_fresh);
     * 0 while no watch is established. Only the cache thread writes it. */
    _Atomic int64_t fresh_from;

    atomic_int stop;
    int wake_fd; /* readable once stop is set: wakes the watch (-1: none) */
    pthread_t thread;
    int started;
    unsigned gen;
    unsigned seed;
    unsigned watch_failures; /* failed watches in a row, none with events */
};

/* Consecutive failed watches after which the cache relists instead of
 * watching again: a watch that keeps failing may be one that cannot
 * resume from where it was. */
#define WATCH_FAILURES_RELIST 3

/* kube-apiserver's message for a watch or list from a resourceVersion it
 * has not reached (apiserver storage.NewTooLargeResourceVersionError). */
#define TOO_LARGE_RV "Too large resource version"

/* A resourceVersion as kube-apiserver issues them (an etcd revision, in
 * decimal); 0 when it is not one, so it is never compared. */
static uint64_t rv_num(const char *rv)
{
    uint64_t v = 0;
    if (!rv || !*rv)
        return 0;
    for (const char *p = rv; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    return v;
}

/* Whether rv is older than the last one the cache saw: the server's
 * history went back (etcd restored, control plane rebuilt). Only the cache
 * thread writes c->rv, so it reads it without the lock. */
static int rv_went_back(const kube_cache *c, const char *rv)
{
    uint64_t mine = rv_num(c->rv), theirs = rv_num(rv);
    return mine && theirs && theirs < mine;
}

static uint64_t key_hash(const char *ns, const char *name)
{
    return gq_fnv1a_key(ns, name);
}

static void free_rec(kube_cache *c, void *rec)
{
    if (!rec)
        return;
    if (c->o.transform) {
        if (c->o.free_record)
            c->o.free_record(c->o.ud, rec);
    } else {
        json_object_put(rec);
    }
}

static void entry_free(kube_cache *c, entry *e)
{
    if (!e)
        return;
    free_rec(c, e->rec);
    free(e->rv);
    free(e);
}

static entry *find(kube_cache *c, const char *ns, const char *name, uint64_t h)
{
    for (gq_hnode *n = gq_htab_first(&c->tab, h); n; n = gq_htab_next(n)) {
        entry *e = GQ_HTAB_ENTRY(n, entry, node);
        if (!strcmp(e->ns, ns) && !strcmp(e->name, name))
            return e;
    }
    return NULL;
}

static void set_rv(kube_cache *c, const char *rv)
{
    if (!rv)
        return;
    pthread_rwlock_wrlock(&c->lock);
    size_t n = strlen(rv);
    if (n < sizeof(c->rv))
        memcpy(c->rv, rv, n + 1);
    pthread_rwlock_unlock(&c->lock);
}

static void count_stat(kube_cache *c, unsigned long *field)
{
    pthread_rwlock_wrlock(&c->lock);
    (*field)++;
    pthread_rwlock_unlock(&c->lock);
}

static void remove_key(kube_cache *c, const char *ns, const char *name)
{
    pthread_rwlock_wrlock(&c->lock);
    entry *e = find(c, ns, name, key_hash(ns, name));
    if (e)
        gq_htab_remove(&c->tab, &e->node);
    pthread_rwlock_unlock(&c->lock);
    if (e && c->o.on_delete)
        c->o.on_delete(c->o.ud, e->ns, e->name, e->rec);
    entry_free(c, e);
}

/* Whether ns/name is cached at resourceVersion rv already; if so, the
 * current relist has seen it. */
static int seen_unchanged(kube_cache *c, const char *ns, const char *name, uint64_t h,
                          const char *rv)
{
    pthread_rwlock_rdlock(&c->lock);
    entry *e = find(c, ns, name, h);
    int unchanged = e && e->rv && rv && !strcmp(e->rv, rv);
    if (unchanged)
        e->mark = c->gen; /* only the cache thread writes marks */
    pthread_rwlock_unlock(&c->lock);
    return unchanged;
}

/* A new entry for ns/name that takes over rv and rec; NULL when out of
 * memory, leaving both to the caller. */
static entry *entry_new(kube_cache *c, const char *ns, const char *name, char *rv, void *rec)
{
    size_t nl = strlen(ns), ml = strlen(name);
    entry *ne = malloc(sizeof(*ne) + nl + ml + 2);
    if (!ne)
        return NULL;
    memcpy(ne->key, ns, nl + 1);
    memcpy(ne->key + nl + 1, name, ml + 1);
    ne->ns = ne->key;
    ne->name = ne->key + nl + 1;
    ne->rv = rv;
    ne->rec = rec;
    ne->mark = c->gen;
    return ne;
}

/* Put ne in the table (taking it over), in place of any entry for the same
 * key; runs on_add/on_update after releasing the lock. */
static void install(kube_cache *c, entry *ne, uint64_t h)
{
    pthread_rwlock_wrlock(&c->lock);
    entry *old = find(c, ne->ns, ne->name, h);
    if (old)
        gq_htab_replace(&c->tab, &old->node, &ne->node);
    else
        gq_htab_insert(&c->tab, &ne->node, h);
    pthread_rwlock_unlock(&c->lock);
    if (old && c->o.on_update)
        c->o.on_update(c->o.ud, ne->ns, ne->name, old->rec, ne->rec);
    else if (!old && c->o.on_add)
        c->o.on_add(c->o.ud, ne->ns, ne->name, ne->rec);
    entry_free(c, old);
}

/* Insert or replace obj; runs on_add/on_update after releasing the lock. */
static gq_code upsert(kube_cache *c, json_object *obj, gq_err *err)
{
    gq_code rc = GQ_OK;
    const char *ns = gq_json_meta_string(obj, "namespace"),
               *name = gq_json_meta_string(obj, "name");
    const char *rv = gq_json_meta_string(obj, "resourceVersion");
    void *rec = NULL;
    char *nrv = NULL;
    if (!ns)
        ns = "";
    if (!name || !name[0]) {
        GQ_WARN("kube cache %s: object without metadata.name ignored", c->path);
        return GQ_OK;
    }
    uint64_t h = key_hash(ns, name);
    if (rv && !(nrv = strdup(rv)))
        return gq_err_oom(err);
    if (seen_unchanged(c, ns, name, h, rv)) {
        free(nrv);
        return GQ_OK;
    }

    if (c->o.transform) {
        rc = c->o.transform(c->o.ud, obj, &rec, err);
        if (rc)
            goto out;
        if (!rec) { /* the transform skips this object: drop any old copy */
            remove_key(c, ns, name);
            goto out;
        }
    } else {
        rec = json_object_get(obj);
    }
    entry *ne = entry_new(c, ns, name, nrv, rec);
    if (!ne) {
        rc = gq_err_oom(err);
        goto out;
    }
    nrv = NULL;
    rec = NULL;
    install(c, ne, h);
out:
    free_rec(c, rec);
    free(nrv);
    return rc;
}

static gq_code list_item(void *ud, json_object *item, gq_err *err)
{
    kube_cache *c = ud;
    if (atomic_load(&c->stop))
        return gq_err_set(err, GQ_ETIMEOUT, "cache stopping");
    return upsert(c, item, err);
}

/* Objects not seen by the latest list vanished while we were not watching. */
static void sweep(kube_cache *c)
{
    gq_hnode *gone = NULL; /* removed entries, linked through their nodes */
    gq_htab_iter it;
    pthread_rwlock_wrlock(&c->lock);
    for (gq_hnode *n = gq_htab_iter_first(&it, &c->tab); n; n = gq_htab_iter_next(&it)) {
        if (GQ_HTAB_ENTRY(n, entry, node)->mark != c->gen) {
            gq_htab_remove(&c->tab, n);
            n->next = gone;
            gone = n;
        }
    }
    pthread_rwlock_unlock(&c->lock);
    while (gone) {
        entry *e = GQ_HTAB_ENTRY(gone, entry, node);
        gone = gone->next;
        if (c->o.on_delete)
            c->o.on_delete(c->o.ud, e->ns, e->name, e->rec);
        entry_free(c, e);
    }
}

/* The server's history went back, or a watch cannot resume from where the
 * cache is: its contents are not current. Until the relist the caller does
 * next, the cache is not synced (nor fresh), and resourceVersions
 * no longer tell whether an object changed (the new history reuses them),
 * so the relist applies every object again. */
static void history_lost(kube_cache *c, const char *why)
{
    GQ_WARN("kube cache %s: %s; relisting", c->path, why);
    gq_htab_iter it;
    pthread_rwlock_wrlock(&c->lock);
    for (gq_hnode *n = gq_htab_iter_first(&it, &c->tab); n; n = gq_htab_iter_next(&it)) {
        entry *e = GQ_HTAB_ENTRY(n, entry, node);
        free(e->rv);
        e->rv = NULL;
    }
    c->rv[0] = '\0'; /* nothing to compare the relist's version with */
    c->stats.resets++;
    pthread_rwlock_unlock(&c->lock);
    pthread_mutex_lock(&c->sync_mu);
    c->synced = 0;
    pthread_mutex_unlock(&c->sync_mu);
}

/* Whether the server is behind the cache: its current resourceVersion (a
 * one-item list, read from etcd) is older than the last one the cache saw.
 * Asked before a watch resumes after a failure or a window end: after etcd
 * is restored kube-apiserver may accept a watch from a revision it has not
 * reached and send nothing until it gets there. An error answers "no". */
static int server_behind(kube_cache *c, char *server_rv, size_t cap)
{
    char path[1024];
    json_object *list = NULL;
    gq_err e;
    gq_err_clear(&e);
    if (!c->api->get || snprintf(path, sizeof path, "%s?limit=1", c->path) >= (int)sizeof path ||
        c->api->get(c->api->ctx, path, &list, &e) != GQ_OK)
        return 0;
    const char *rv = gq_json_meta_string(list, "resourceVersion");
    int behind = rv && rv_went_back(c, rv);
    if (behind)
        snprintf(server_rv, cap, "%s", rv);
    json_object_put(list);
    return behind;
}

static gq_code do_list(kube_cache *c, gq_err *err)
{
    char *rv = NULL;
    kube_list_opts lo = {.label_selector = c->label_selector,
                         .field_selector = c->field_selector,
                         .page_size = c->o.page_size,
                         .prune = c->o.prune,
                         .n_prune = c->o.n_prune};
    gq_code rc;
    for (int pass = 0;; pass++) {
        c->gen++;
        count_stat(c, &c->stats.lists);
        rc = c->api->list(c->api->ctx, c->path, &lo, list_item, c, &rv, err);
        if (rc) {
            free(rv);
            return rc;
        }
        if (pass || !rv_went_back(c, rv))
            break;
        /* This list may have kept objects whose resourceVersion the new
         * history happens to reuse: list once more, applying everything. */
        char why[sizeof c->rv + 128];
        snprintf(why, sizeof why, "a list returned resourceVersion %s, older than %s", rv, c->rv);
        history_lost(c, why);
        free(rv);
        rv = NULL;
    }
    sweep(c);
    set_rv(c, rv); /* the list's version stands, older or not */
    free(rv);
    pthread_mutex_lock(&c->sync_mu);
    c->synced = 1;
    pthread_cond_broadcast(&c->sync_cv);
    pthread_mutex_unlock(&c->sync_mu);
    return GQ_OK;
}

typedef struct watch_state {
    kube_cache *c;
    unsigned long events;
    int lost;        /* the server's history went back: relist as for history_lost */
    int64_t started; /* kube_mono_ms when the watch began */
} watch_state;

/* The watch is established: the cache is fresh delay_ms from now, or
 * earlier if it already was to be. */
static void fresh_after(kube_cache *c, int64_t delay_ms)
{
    int64_t at = kube_mono_ms() + delay_ms, cur = atomic_load(&c->fresh_from);
    if (!cur || at < cur)
        atomic_store(&c->fresh_from, at > 0 ? at : 1);
}

/* The server accepted the watch; an error answer would follow at once, so
 * wait a little (or for the first event) before counting on it. */
static void on_open(void *ud)
{
    fresh_after(((watch_state *)ud)->c, KUBE_CACHE_SETTLE_MS);
}

static gq_code on_event(void *ud, kube_event_type type, json_object *obj, gq_err *err)
{
    watch_state *ws = ud;
    kube_cache *c = ws->c;
    gq_code rc = GQ_OK;
    ws->events++;
    if (type != KUBE_EVENT_ERROR && rv_went_back(c, gq_json_meta_string(obj, "resourceVersion"))) {
        ws->lost = 1;
        return gq_err_set(err, GQ_EGONE,
                          "watch %s: resourceVersion %s is older than %s: the server's history "
                          "went back",
                          c->path, gq_json_meta_string(obj, "resourceVersion"), c->rv);
    }
    switch (type) {
    case KUBE_EVENT_ADDED:
    case KUBE_EVENT_MODIFIED:
        rc = upsert(c, obj, err);
        break;
    case KUBE_EVENT_DELETED: {
        const char *ns = gq_json_meta_string(obj, "namespace"),
                   *name = gq_json_meta_string(obj, "name");
        if (name)
            remove_key(c, ns ? ns : "", name);
        break;
    }
    case KUBE_EVENT_BOOKMARK:
        break;
    case KUBE_EVENT_ERROR: {
        kube_status st;
        if (kube_status_from_json(obj, &st) != GQ_OK)
            return gq_err_set(err, GQ_EHTTP, "watch %s: ERROR event without a Status", c->path);
        if (st.code == 504 && strstr(st.message, TOO_LARGE_RV)) {
            /* The server has not reached our resourceVersion: it lost
             * history we saw. Waiting cannot help (the new history may
             * reach that number with other objects). */
            ws->lost = 1;
            return gq_err_set(err, GQ_EGONE, "watch %s: ERROR %d %s: %s", c->path, st.code,
                              st.reason, st.message);
        }
        return gq_err_set(err, kube_http_code(st.code ? st.code : 500, st.reason),
                          "watch %s: ERROR %d %s: %s", c->path, st.code, st.reason, st.message);
    }
    }
    if (!rc) {
        set_rv(c, gq_json_meta_string(obj, "resourceVersion"));
        fresh_after(c, 0); /* an event: the watch is no error answer */
    }
    return rc;
}

/* Count a relist the watch loop decided on. */
static void relist_next(kube_cache *c)
{
    pthread_rwlock_wrlock(&c->lock);
    c->stats.relists++;
    c->stats.watches_since_relist = 0;
    pthread_rwlock_unlock(&c->lock);
}

/* List (relisting), backing off after a failure. Whether the cache is now
 * listed and may watch. */
static int list_once(kube_cache *c, kube_backoff *bo)
{
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = do_list(c, &err);
    if (atomic_load(&c->stop))
        return 0;
    if (rc) {
        long d = kube_backoff_next(bo, rand_r(&c->seed) / ((double)RAND_MAX + 1));
        GQ_WARN("kube cache %s: list failed (%s), retrying in %ld ms", c->path, err.msg, d);
        kube_sleep_ms(d, &c->stop);
        return 0;
    }
    c->watch_failures = 0;
    kube_backoff_reset(bo);
    return 1;
}

/* One watch from resourceVersion rv, until it ends or the cache stops. */
static gq_code watch_from(kube_cache *c, const char *rv, watch_state *ws, gq_err *err)
{
    /* Spread watch restarts over time like client-go: timeout in [T, 2T). */
    long t = c->o.watch_timeout_seconds;
    kube_watch_opts wo = {.label_selector = c->label_selector,
                          .field_selector = c->field_selector,
                          .resource_version = rv,
                          .allow_bookmarks = 1,
                          .timeout_seconds = t + (long)(rand_r(&c->seed) % (unsigned)t),
                          .stop = &c->stop,
                          .wake_fd = &c->wake_fd,
                          .on_open = on_open};
    pthread_rwlock_wrlock(&c->lock);
    c->stats.watches++;
    c->stats.watches_since_relist++;
    pthread_rwlock_unlock(&c->lock);
    gq_code rc = c->api->watch(c->api->ctx, c->path, &wo, on_event, ws, err);
    /* Whatever ended the watch, changes from now on go unseen until the
     * next one is established. */
    atomic_store(&c->fresh_from, 0);
    return rc;
}

/* Whether the server's history went back behind the cache; if so the
 * cache relists. */
static int server_went_back(kube_cache *c)
{
    char server_rv[64];
    if (!server_behind(c, server_rv, sizeof server_rv))
        return 0;
    char why[sizeof c->rv + 128];
    snprintf(why, sizeof why, "the server is at resourceVersion %s, older than %s", server_rv,
             c->rv);
    history_lost(c, why);
    relist_next(c);
    return 1;
}

/* After a watch that did not end in 410 Gone: back off after a failure.
 * Whether the cache must relist rather than resume. */
static int relist_after(kube_cache *c, kube_backoff *bo, gq_code rc, const watch_state *ws,
                        const char *why)
{
    if (ws->events) {
        kube_backoff_reset(bo);
        c->watch_failures = 0;
    }
    int normal_end = rc == GQ_OK && (ws->events || kube_mono_ms() - ws->started >= 1000);
    if (!normal_end) {
        long d = kube_backoff_next(bo, rand_r(&c->seed) / ((double)RAND_MAX + 1));
        if (rc)
            GQ_WARN("kube cache %s: watch failed (%s), reconnecting in %ld ms", c->path, why, d);
        kube_sleep_ms(d, &c->stop);
        if (atomic_load(&c->stop))
            return 0;
        if (!ws->events && ++c->watch_failures >= WATCH_FAILURES_RELIST) {
            GQ_INFO("kube cache %s: %u watches failed in a row, relisting", c->path,
                    c->watch_failures);
            relist_next(c);
            return 1;
        }
    }
    /* Resume, unless the server's history went back meanwhile (the
     * control plane restarted from an older state: its watch from our
     * resourceVersion might just wait, silently). Asked after a failure,
     * and after a window that brought nothing, not even a bookmark. */
    return (!normal_end || !ws->events) && server_went_back(c);
}

static void *cache_main(void *arg)
{
    kube_cache *c = arg;
    kube_backoff bo;
    kube_backoff_init(&bo, c->o.backoff_min_ms, c->o.backoff_max_ms);
    int need_list = 1;
    while (!atomic_load(&c->stop)) {
        if (need_list) {
            if (!list_once(c, &bo))
                continue;
            need_list = 0;
        }
        gq_err err;
        gq_err_clear(&err);
        char rv[sizeof(c->rv)];
        kube_cache_resource_version(c, rv, sizeof(rv));
        watch_state ws = {.c = c, .started = kube_mono_ms()};
        gq_code rc = watch_from(c, rv, &ws, &err);
        if (atomic_load(&c->stop))
            break;
        /* A 504 "Too large resource version" may also come as the answer
         * to the watch request itself. */
        if (rc == GQ_EHTTP && strstr(err.msg, TOO_LARGE_RV))
            ws.lost = 1, rc = GQ_EGONE;
        if (rc == GQ_EGONE) {
            if (ws.lost)
                history_lost(c, err.msg);
            else
                GQ_INFO("kube cache %s: resourceVersion %s gone, relisting", c->path, rv);
            relist_next(c);
            need_list = 1;
            continue;
        }
        need_list = relist_after(c, &bo, rc, &ws, err.msg);
    }
    return NULL;
}

void kube_cache_free(kube_cache *c)
{
    if (!c)
        return;
    kube_cache_stop(c);
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &c->tab); n; n = gq_htab_iter_next(&it))
        entry_free(c, GQ_HTAB_ENTRY(n, entry, node));
    gq_htab_free(&c->tab);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->sync_mu);
    pthread_cond_destroy(&c->sync_cv);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    free(c->path);
    free(c->label_selector);
    free(c->field_selector);
    free(c);
}

gq_code kube_cache_new(const kube_api *api, const kube_cache_opts *o, kube_cache **out, gq_err *err)
{
    if (!api || !o || !o->path || o->path[0] != '/')
        return gq_err_set(err, GQ_EINVAL, "kube cache: an API and a collection path are required");
    kube_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return gq_err_oom(err);
    /* Without one (-1), a stop waits for the watch's next progress tick. */
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->api = api;
    c->o = *o;
    if (c->o.watch_timeout_seconds <= 0)
        c->o.watch_timeout_seconds = 300;
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->sync_mu, NULL);
    pthread_cond_init(&c->sync_cv, NULL);
    gq_code trc = gq_htab_init(&c->tab, 1024);
    c->path = strdup(o->path);
    c->label_selector = o->label_selector ? strdup(o->label_selector) : NULL;
    c->field_selector = o->field_selector ? strdup(o->field_selector) : NULL;
    c->seed = (unsigned)kube_mono_ms() ^ (unsigned)(uintptr_t)c;
    if (trc || !c->path || (o->label_selector && !c->label_selector) ||
        (o->field_selector && !c->field_selector)) {
        kube_cache_free(c);
        return gq_err_oom(err);
    }
    *out = c;
    return GQ_OK;
}

gq_code kube_cache_start(kube_cache *c, gq_err *err)
{
    if (c->started)
        return gq_err_set(err, GQ_EINVAL, "kube cache %s: already started", c->path);
    atomic_store(&c->stop, 0);
    if (pthread_create(&c->thread, NULL, cache_main, c) != 0)
        return gq_err_set(err, GQ_ENOMEM, "kube cache %s: cannot start thread", c->path);
    c->started = 1;
    return GQ_OK;
}

/* The stop's wake-up for the watch in progress (kube_watch_opts.wake_fd):
 * without it the watch notices the stop flag within a second. */
static void wake_signal(kube_cache *c)
{
    uint64_t one = 1;
    if (c->wake_fd >= 0 && write(c->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        GQ_WARN("kube cache %s: cannot wake its watch; it stops within a second", c->path);
}

/* Read the wake-up back once the thread is gone, so that the watches of a
 * restarted cache wait again. */
static void wake_drain(kube_cache *c)
{
    uint64_t n;
    if (c->wake_fd >= 0 && read(c->wake_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        GQ_WARN("kube cache %s: cannot reset its wake-up: %s", c->path, strerror(errno));
}

void kube_cache_stop(kube_cache *c)
{
    if (!c || !c->started)
        return;
    atomic_store(&c->stop, 1);
    wake_signal(c);
    pthread_join(c->thread, NULL);
    wake_drain(c);
    atomic_store(&c->fresh_from, 0);
    c->started = 0;
}

int kube_cache_synced(kube_cache *c)
{
    pthread_mutex_lock(&c->sync_mu);
    int s = c->synced;
    pthread_mutex_unlock(&c->sync_mu);
    return s;
}

int kube_cache_fresh(kube_cache *c)
{
    int64_t from = atomic_load(&c->fresh_from);
    return from && kube_mono_ms() >= from;
}

gq_code kube_cache_wait_synced(kube_cache *c, long timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    gq_code rc = GQ_OK;
    pthread_mutex_lock(&c->sync_mu);
    while (!c->synced) {
        if (pthread_cond_timedwait(&c->sync_cv, &c->sync_mu, &ts) != 0) {
            rc = c->synced ? GQ_OK : GQ_ETIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&c->sync_mu);
    return rc;
}

size_t kube_cache_count(kube_cache *c)
{
    pthread_rwlock_rdlock(&c->lock);
    size_t n = c->tab.count;
    pthread_rwlock_unlock(&c->lock);
    return n;
}

void kube_cache_resource_version(kube_cache *c, char *buf, size_t cap)
{
    if (!cap)
        return;
    pthread_rwlock_rdlock(&c->lock);
    size_t n = strlen(c->rv);
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, c->rv, n);
    buf[n] = '\0';
    pthread_rwlock_unlock(&c->lock);
}

void kube_cache_get_stats(kube_cache *c, kube_cache_stats *out)
{
    pthread_rwlock_rdlock(&c->lock);
    *out = c->stats;
    pthread_rwlock_unlock(&c->lock);
}

gq_code kube_cache_get(kube_cache *c, const char *ns, const char *name,
                       void (*fn)(void *ud, const void *rec), void *ud)
{
    if (!ns)
        ns = "";
    pthread_rwlock_rdlock(&c->lock);
    entry *e = find(c, ns, name, key_hash(ns, name));
    if (e && fn)
        fn(ud, e->rec);
    pthread_rwlock_unlock(&c->lock);
    return e ? GQ_OK : GQ_ENOTFOUND;
}

void kube_cache_foreach(kube_cache *c,
                        int (*fn)(void *ud, const char *ns, const char *name, const void *rec),
                        void *ud)
{
    gq_htab_iter it;
    pthread_rwlock_rdlock(&c->lock);
    for (gq_hnode *n = gq_htab_iter_first(&it, &c->tab); n; n = gq_htab_iter_next(&it)) {
        entry *e = GQ_HTAB_ENTRY(n, entry, node);
        if (fn(ud, e->ns, e->name, e->rec))
            break;
    }
    pthread_rwlock_unlock(&c->lock);
}
