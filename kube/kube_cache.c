/* Informer-style cache of one resource: list (paged), then watch from the
 * list's resourceVersion on a thread of its own; relist on 410, reconnect
 * with backoff on other failures. Readers take a read lock; only the cache
 * thread writes, so callbacks can run with the lock released. */
#include "kube_int.h"

#include <pthread.h>
#include <stdlib.h>
#ifdef __GLIBC__
#endif
#include <string.h>

#include "gq_log.h"

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    char *ns;   /* points into key storage */
    char *name; /* points into key storage */
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
    entry **buckets;
    size_t nbuckets, count;
    char rv[128];
    kube_cache_stats stats;

    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
    int synced;

    atomic_int stop;
    pthread_t thread;
    int started;
    unsigned gen;
    unsigned seed;
};

static uint64_t key_hash(const char *ns, const char *name)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)ns; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h = (h ^ '/') * 1099511628211ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
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

static entry *find(kube_cache *c, const char *ns, const char *name, uint64_t h, entry ***link)
{
    entry **pp = &c->buckets[h & (c->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->hash == h && !strcmp((*pp)->ns, ns) && !strcmp((*pp)->name, name)) {
            if (link)
                *link = pp;
            return *pp;
        }
    }
    if (link)
        *link = pp;
    return NULL;
}

/* Double the table when it gets full; on allocation failure keep the
 * current one (longer chains, still correct). Called with the write lock. */
static void maybe_grow(kube_cache *c)
{
    if (c->count < c->nbuckets || c->nbuckets > SIZE_MAX / 2 / sizeof(entry *))
        return;
    size_t nb = c->nbuckets * 2;
    entry **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (entry *e = c->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = nb;
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

static const char *meta_str(json_object *obj, const char *key)
{
    json_object *m, *v;
    if (!json_object_object_get_ex(obj, "metadata", &m) || !json_object_object_get_ex(m, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static void remove_key(kube_cache *c, const char *ns, const char *name)
{
    entry **link, *e;
    uint64_t h = key_hash(ns, name);
    pthread_rwlock_wrlock(&c->lock);
    e = find(c, ns, name, h, &link);
    if (e) {
        *link = e->next;
        c->count--;
    }
    pthread_rwlock_unlock(&c->lock);
    if (e && c->o.on_delete)
        c->o.on_delete(c->o.ud, e->ns, e->name, e->rec);
    entry_free(c, e);
}

/* Insert or replace obj; runs on_add/on_update after releasing the lock. */
static gq_code upsert(kube_cache *c, json_object *obj, gq_err *err)
{
    gq_code rc = GQ_OK;
    const char *ns = meta_str(obj, "namespace"), *name = meta_str(obj, "name");
    const char *rv = meta_str(obj, "resourceVersion");
    void *rec = NULL;
    entry *ne = NULL;
    char *nrv = NULL;
    if (!ns)
        ns = "";
    if (!name || !name[0]) {
        GQ_WARN("kube cache %s: object without metadata.name ignored", c->path);
        return GQ_OK;
    }
    uint64_t h = key_hash(ns, name);
    if (rv && !(nrv = strdup(rv)))
        return gq_err_set(err, GQ_ENOMEM, "out of memory");

    pthread_rwlock_rdlock(&c->lock);
    entry *e = find(c, ns, name, h, NULL);
    int unchanged = e && e->rv && rv && !strcmp(e->rv, rv);
    if (unchanged)
        e->mark = c->gen; /* only the cache thread writes marks */
    pthread_rwlock_unlock(&c->lock);
    if (unchanged) {
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
    size_t nl = strlen(ns), ml = strlen(name);
    ne = malloc(sizeof(*ne) + nl + ml + 2);
    if (!ne) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(ne->key, ns, nl + 1);
    memcpy(ne->key + nl + 1, name, ml + 1);
    ne->ns = ne->key;
    ne->name = ne->key + nl + 1;
    ne->hash = h;
    ne->rv = nrv;
    ne->rec = rec;
    ne->mark = c->gen;
    nrv = NULL;
    rec = NULL;

    entry **link, *old;
    pthread_rwlock_wrlock(&c->lock);
    old = find(c, ns, name, h, &link);
    if (old) {
        ne->next = old->next;
        *link = ne;
    } else {
        ne->next = *link;
        *link = ne;
        c->count++;
        maybe_grow(c);
    }
    pthread_rwlock_unlock(&c->lock);
    if (old && c->o.on_update)
        c->o.on_update(c->o.ud, ne->ns, ne->name, old->rec, ne->rec);
    else if (!old && c->o.on_add)
        c->o.on_add(c->o.ud, ne->ns, ne->name, ne->rec);
    entry_free(c, old);
    ne = NULL;
out:
    free_rec(c, rec);
    free(nrv);
    free(ne);
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
    entry *gone = NULL;
    pthread_rwlock_wrlock(&c->lock);
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (entry **pp = &c->buckets[i]; *pp;) {
            entry *e = *pp;
            if (e->mark != c->gen) {
                *pp = e->next;
                e->next = gone;
                gone = e;
                c->count--;
            } else {
                pp = &e->next;
            }
        }
    }
    pthread_rwlock_unlock(&c->lock);
    while (gone) {
        entry *e = gone;
        gone = e->next;
        if (c->o.on_delete)
            c->o.on_delete(c->o.ud, e->ns, e->name, e->rec);
        entry_free(c, e);
    }
}

static gq_code do_list(kube_cache *c, gq_err *err)
{
    char *rv = NULL;
    kube_list_opts lo = {.label_selector = c->label_selector,
                         .field_selector = c->field_selector,
                         .page_size = c->o.page_size};
    c->gen++;
    count_stat(c, &c->stats.lists);
    gq_code rc = c->api->list(c->api->ctx, c->path, &lo, list_item, c, &rv, err);
    if (rc) {
        free(rv);
        return rc;
    }
    sweep(c);
    set_rv(c, rv);
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
} watch_state;

static gq_code on_event(void *ud, kube_event_type type, json_object *obj, gq_err *err)
{
    watch_state *ws = ud;
    kube_cache *c = ws->c;
    gq_code rc = GQ_OK;
    ws->events++;
    switch (type) {
    case KUBE_EVENT_ADDED:
    case KUBE_EVENT_MODIFIED:
        rc = upsert(c, obj, err);
        break;
    case KUBE_EVENT_DELETED: {
        const char *ns = meta_str(obj, "namespace"), *name = meta_str(obj, "name");
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
        return gq_err_set(err, kube_http_code(st.code ? st.code : 500, st.reason),
                          "watch %s: ERROR %d %s: %s", c->path, st.code, st.reason, st.message);
    }
    }
    if (!rc)
        set_rv(c, meta_str(obj, "resourceVersion"));
    return rc;
}

static void *cache_main(void *arg)
{
    kube_cache *c = arg;
    kube_backoff bo;
    kube_backoff_init(&bo, c->o.backoff_min_ms, c->o.backoff_max_ms);
    int need_list = 1;
    while (!atomic_load(&c->stop)) {
        gq_err err;
        gq_err_clear(&err);
        if (need_list) {
            gq_code rc = do_list(c, &err);
            if (atomic_load(&c->stop))
                break;
            if (rc) {
                long d = kube_backoff_next(&bo, rand_r(&c->seed) / ((double)RAND_MAX + 1));
                GQ_WARN("kube cache %s: list failed (%s), retrying in %ld ms", c->path, err.msg, d);
                kube_sleep_ms(d, &c->stop);
                continue;
            }
            need_list = 0;
            kube_backoff_reset(&bo);
        }
        char rv[sizeof(c->rv)];
        kube_cache_resource_version(c, rv, sizeof(rv));
        /* Spread watch restarts over time like client-go: timeout in [T, 2T). */
        long t = c->o.watch_timeout_seconds;
        kube_watch_opts wo = {.label_selector = c->label_selector,
                              .field_selector = c->field_selector,
                              .resource_version = rv,
                              .allow_bookmarks = 1,
                              .timeout_seconds = t + (long)(rand_r(&c->seed) % (unsigned)t),
                              .stop = &c->stop};
        watch_state ws = {c, 0};
        int64_t started = kube_mono_ms();
        pthread_rwlock_wrlock(&c->lock);
        c->stats.watches++;
        c->stats.watches_since_relist++;
        pthread_rwlock_unlock(&c->lock);
        gq_code rc = c->api->watch(c->api->ctx, c->path, &wo, on_event, &ws, &err);
        if (atomic_load(&c->stop))
            break;
        if (rc == GQ_EGONE) {
            GQ_INFO("kube cache %s: resourceVersion %s gone, relisting", c->path, rv);
            pthread_rwlock_wrlock(&c->lock);
            c->stats.relists++;
            c->stats.watches_since_relist = 0;
            pthread_rwlock_unlock(&c->lock);
            need_list = 1;
            continue;
        }
        if (ws.events)
            kube_backoff_reset(&bo);
        if (rc == GQ_OK && (ws.events || kube_mono_ms() - started >= 1000))
            continue; /* normal end of a watch window: resume at once */
        long d = kube_backoff_next(&bo, rand_r(&c->seed) / ((double)RAND_MAX + 1));
        if (rc)
            GQ_WARN("kube cache %s: watch failed (%s), reconnecting in %ld ms", c->path, err.msg,
                    d);
        kube_sleep_ms(d, &c->stop);
    }
    return NULL;
}

void kube_cache_free(kube_cache *c)
{
    if (!c)
        return;
    kube_cache_stop(c);
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (entry *e = c->buckets[i], *next; e; e = next) {
            next = e->next;
            entry_free(c, e);
        }
    }
    free(c->buckets);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->sync_mu);
    pthread_cond_destroy(&c->sync_cv);
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
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    c->api = api;
    c->o = *o;
    if (c->o.watch_timeout_seconds <= 0)
        c->o.watch_timeout_seconds = 300;
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->sync_mu, NULL);
    pthread_cond_init(&c->sync_cv, NULL);
    c->nbuckets = 1024;
    c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
    c->path = strdup(o->path);
    c->label_selector = o->label_selector ? strdup(o->label_selector) : NULL;
    c->field_selector = o->field_selector ? strdup(o->field_selector) : NULL;
    c->seed = (unsigned)kube_mono_ms() ^ (unsigned)(uintptr_t)c;
    if (!c->buckets || !c->path || (o->label_selector && !c->label_selector) ||
        (o->field_selector && !c->field_selector)) {
        kube_cache_free(c);
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
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

void kube_cache_stop(kube_cache *c)
{
    if (!c || !c->started)
        return;
    atomic_store(&c->stop, 1);
    pthread_join(c->thread, NULL);
    c->started = 0;
}

int kube_cache_synced(kube_cache *c)
{
    pthread_mutex_lock(&c->sync_mu);
    int s = c->synced;
    pthread_mutex_unlock(&c->sync_mu);
    return s;
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
    size_t n = c->count;
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
    entry *e = find(c, ns, name, key_hash(ns, name), NULL);
    if (e && fn)
        fn(ud, e->rec);
    pthread_rwlock_unlock(&c->lock);
    return e ? GQ_OK : GQ_ENOTFOUND;
}

void kube_cache_foreach(kube_cache *c,
                        int (*fn)(void *ud, const char *ns, const char *name, const void *rec),
                        void *ud)
{
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (entry *e = c->buckets[i]; e; e = e->next) {
            if (fn(ud, e->ns, e->name, e->rec))
                goto out;
        }
    }
out:
    pthread_rwlock_unlock(&c->lock);
}
