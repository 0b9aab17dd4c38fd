/* The object store: a sorted array of (resource, namespace, name) -> object
 * plus a bounded ring of change events for watches. Everything here runs
 * under the one store lock. */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

typedef struct entry {
    char *key; /* "skey/ns/name" ("skey//name" when cluster-scoped): etcd's key
                  layout, so lists come out in the order kube-apiserver returns */
    json_object *obj;
    /* obj serialised without kind/apiVersion, made by the first list that
     * shows it: stored objects are never mutated (a write replaces the
     * entry's object and drops this), so a list page is a concatenation. */
    char *text;
    size_t text_len;
} entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static entry *g_entries;
static size_t g_n, g_cap;
static uint64_t g_rv;
static st_event *g_ring;
static size_t g_ring_cap, g_ring_head, g_ring_len;
static uint64_t g_evicted_rv; /* highest rv dropped from the ring */
/* A saved state (etcd backup): keys and object references (stored objects
 * are never mutated, so sharing them is safe) and the revision. */
static entry *g_snap;
static size_t g_snap_n;
static uint64_t g_snap_rv;
static int g_have_snap;
static unsigned long g_epoch; /* bumped by every restore */

void st_init(size_t history)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
    g_ring_cap = history ? history : 1;
    g_ring = calloc(g_ring_cap, sizeof *g_ring);
    if (!g_ring)
        abort();
    g_rv = 1;
}

static void event_dispose(st_event *e)
{
    free(e->skey);
    free(e->ns);
    json_object_put(e->obj);
    json_object_put(e->prev);
    memset(e, 0, sizeof *e);
}

static void entries_free(entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].text);
        json_object_put(v[i].obj);
    }
    free(v);
}

/* A copy of v[0..n) sharing the objects (NULL on OOM, or for n == 0). */
static entry *entries_copy(const entry *v, size_t n)
{
    entry *c = n ? calloc(n, sizeof *c) : NULL;
    for (size_t i = 0; c && i < n; i++) {
        c[i].key = strdup(v[i].key);
        c[i].obj = json_object_get(v[i].obj);
        if (!c[i].key) {
            entries_free(c, i + 1);
            return NULL;
        }
    }
    return c;
}

void st_shutdown(void)
{
    entries_free(g_entries, g_n);
    g_entries = NULL;
    g_n = g_cap = 0;
    entries_free(g_snap, g_snap_n);
    g_snap = NULL;
    g_snap_n = 0;
    for (size_t i = 0; i < g_ring_len; i++)
        event_dispose(&g_ring[(g_ring_head + i) % g_ring_cap]);
    free(g_ring);
    g_ring = NULL;
}

int st_snapshot(void)
{
    entry *c = entries_copy(g_entries, g_n);
    if (g_n && !c)
        return -1;
    entries_free(g_snap, g_snap_n);
    g_snap = c;
    g_snap_n = g_n;
    g_snap_rv = g_rv;
    g_have_snap = 1;
    return 0;
}

int st_restore(void)
{
    if (!g_have_snap)
        return 1;
    entry *c = entries_copy(g_snap, g_snap_n);
    if (g_snap_n && !c)
        return -1;
    entries_free(g_entries, g_n);
    g_entries = c;
    g_n = g_cap = g_snap_n;
    g_rv = g_snap_rv;
    /* The history the watchers read is gone with the old state. */
    for (size_t i = 0; i < g_ring_len; i++)
        event_dispose(&g_ring[(g_ring_head + i) % g_ring_cap]);
    g_ring_head = g_ring_len = 0;
    g_evicted_rv = 0;
    g_epoch++;
    pthread_cond_broadcast(&g_cv);
    return 0;
}

unsigned long st_epoch(void)
{
    return g_epoch;
}

void st_lock(void)
{
    pthread_mutex_lock(&g_mu);
}

void st_unlock(void)
{
    pthread_mutex_unlock(&g_mu);
}

uint64_t st_rv(void)
{
    return g_rv;
}

uint64_t st_next_rv(void)
{
    return ++g_rv;
}

static char *make_key(const char *skey, const char *ns, const char *name)
{
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    gq_buf_puts(&b, skey);
    gq_buf_add(&b, "/", 1);
    gq_buf_puts(&b, ns ? ns : "");
    if (name) {
        gq_buf_add(&b, "/", 1);
        gq_buf_puts(&b, name);
    }
    return si_buf_take(&b);
}

/* Index of the first entry with key >= k. */
static size_t lower_bound(const char *k)
{
    size_t lo = 0, hi = g_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(g_entries[mid].key, k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

json_object *st_get(const char *skey, const char *ns, const char *name)
{
    char *k = make_key(skey, ns, name);
    if (!k)
        return NULL;
    size_t i = lower_bound(k);
    json_object *o = (i < g_n && !strcmp(g_entries[i].key, k)) ? g_entries[i].obj : NULL;
    free(k);
    return o;
}

static void record(int type, const char *skey, const char *ns, json_object *obj, json_object *prev,
                   uint64_t rv)
{
    if (g_ring_len == g_ring_cap) {
        st_event *old = &g_ring[g_ring_head];
        g_evicted_rv = old->rv;
        event_dispose(old);
        g_ring_head = (g_ring_head + 1) % g_ring_cap;
        g_ring_len--;
    }
    st_event *e = &g_ring[(g_ring_head + g_ring_len) % g_ring_cap];
    e->rv = rv;
    e->type = type;
    e->skey = strdup(skey);
    e->ns = strdup(ns ? ns : "");
    e->obj = json_object_get(obj);
    e->prev = json_object_get(prev);
    if (!e->skey || !e->ns) {
        /* Losing an event would silently break watchers; the test tool has no
         * better answer to OOM than stopping. */
        abort();
    }
    g_ring_len++;
    pthread_cond_broadcast(&g_cv);
}

gq_code st_put(const char *skey, const char *ns, const char *name, json_object *obj, uint64_t rv)
{
    char *k = make_key(skey, ns, name);
    if (!k) {
        json_object_put(obj);
        return GQ_ENOMEM;
    }
    size_t i = lower_bound(k);
    if (i < g_n && !strcmp(g_entries[i].key, k)) {
        free(k);
        json_object *prev = g_entries[i].obj;
        g_entries[i].obj = obj;
        free(g_entries[i].text);
        g_entries[i].text = NULL;
        g_entries[i].text_len = 0;
        record(EV_MODIFIED, skey, ns, obj, prev, rv);
        json_object_put(prev);
        return GQ_OK;
    }
    if (g_n == g_cap) {
        size_t nc = g_cap ? g_cap * 2 : 64;
        entry *ne = realloc(g_entries, nc * sizeof *ne);
        if (!ne) {
            free(k);
            json_object_put(obj);
            return GQ_ENOMEM;
        }
        g_entries = ne;
        g_cap = nc;
    }
    memmove(&g_entries[i + 1], &g_entries[i], (g_n - i) * sizeof *g_entries);
    g_entries[i].key = k;
    g_entries[i].obj = obj;
    g_entries[i].text = NULL;
    g_entries[i].text_len = 0;
    g_n++;
    record(EV_ADDED, skey, ns, obj, NULL, rv);
    return GQ_OK;
}

void st_del(const char *skey, const char *ns, const char *name, uint64_t rv)
{
    char *k = make_key(skey, ns, name);
    if (!k)
        return;
    size_t i = lower_bound(k);
    int found = i < g_n && !strcmp(g_entries[i].key, k);
    free(k);
    if (!found)
        return;
    json_object *gone = g_entries[i].obj;
    free(g_entries[i].key);
    free(g_entries[i].text);
    memmove(&g_entries[i], &g_entries[i + 1], (g_n - i - 1) * sizeof *g_entries);
    g_n--;
    /* The DELETED event carries the object as of the deletion revision. */
    json_object *copy = NULL;
    if (json_object_deep_copy(gone, &copy, NULL) == 0) {
        json_object *md = si_obj(copy, "metadata");
        char rvs[32];
        snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)rv);
        if (md)
            json_object_object_add(md, "resourceVersion", json_object_new_string(rvs));
        record(EV_DELETED, skey, ns, copy, NULL, rv);
        json_object_put(copy);
    } else {
        record(EV_DELETED, skey, ns, gone, NULL, rv);
    }
    json_object_put(gone);
}

void st_each(const char *skey, const char *ns, st_visit_fn fn, void *ctx)
{
    st_each_after(skey, ns, NULL, NULL, fn, ctx);
}

/* The index range [*first, *end) of the entries st_each_after visits.
 * Returns -1 on OOM. */
static int range(const char *skey, const char *ns, const char *after_ns, const char *after_name,
                 size_t *first, size_t *end)
{
    /* Keys under skey (and ns) start with the prefix "skey/" or "skey/ns/";
     * the range ends before the prefix with its final '/' raised to '0'. */
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    gq_buf_puts(&b, skey);
    gq_buf_add(&b, "/", 1);
    if (ns) {
        gq_buf_puts(&b, ns);
        gq_buf_add(&b, "/", 1);
    }
    char *prefix = si_buf_take(&b);
    if (!prefix)
        return -1;
    size_t i = lower_bound(prefix);
    prefix[strlen(prefix) - 1] = '0';
    size_t e = lower_bound(prefix);
    free(prefix);
    if (after_name) {
        /* Seek past the last item of the previous page: paging stays linear
         * and follows the store's own order. */
        char *ak = make_key(skey, after_ns, after_name);
        if (!ak)
            return -1;
        size_t j = lower_bound(ak);
        if (j < g_n && !strcmp(g_entries[j].key, ak))
            j++;
        free(ak);
        if (j > i)
            i = j;
    }
    *first = i;
    *end = i < e ? e : i;
    return 0;
}

/* Split entry i's key into its namespace (copied to nsbuf) and name. */
static const char *key_parts(size_t i, const char *skey, char nsbuf[SI_NAME_MAX + 2])
{
    const char *rest = g_entries[i].key + strlen(skey) + 1;
    const char *sep = strchr(rest, '/');
    if (!sep)
        return NULL;
    size_t nl = (size_t)(sep - rest);
    if (nl >= SI_NAME_MAX + 2)
        return NULL;
    memcpy(nsbuf, rest, nl);
    nsbuf[nl] = '\0';
    return sep + 1;
}

void st_each_after(const char *skey, const char *ns, const char *after_ns, const char *after_name,
                   st_visit_fn fn, void *ctx)
{
    size_t i, end;
    if (range(skey, ns, after_ns, after_name, &i, &end))
        return;
    for (; i < end; i++) {
        char nsbuf[SI_NAME_MAX + 2];
        const char *name = key_parts(i, skey, nsbuf);
        if (name && fn(ctx, nsbuf, name, g_entries[i].obj))
            break;
    }
}

/* The entry's list-item text, serialised on first use; NULL on OOM. */
static const char *entry_text(entry *e, size_t *len)
{
    if (!e->text) {
        json_object *shallow = json_object_new_object();
        if (!shallow)
            return NULL;
        /* A shallow object sharing the children: nothing is copied, and the
         * stored object itself is left untouched. */
        json_object_object_foreach(e->obj, k, v)
        {
            if (strcmp(k, "kind") && strcmp(k, "apiVersion") &&
                json_object_object_add(shallow, k, json_object_get(v))) {
                json_object_put(v);
                json_object_put(shallow);
                return NULL;
            }
        }
        size_t n = 0;
        const char *t = json_object_to_json_string_length(
            shallow, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
        e->text = t ? strndup(t, n) : NULL;
        e->text_len = e->text ? n : 0;
        json_object_put(shallow);
        if (!e->text)
            return NULL;
    }
    *len = e->text_len;
    return e->text;
}

size_t st_page(const char *skey, const char *ns, const char *after_ns, const char *after_name,
               size_t want, st_page_fn fn, void *ctx, int *oom)
{
    size_t i, end;
    *oom = 0;
    if (range(skey, ns, after_ns, after_name, &i, &end)) {
        *oom = 1;
        return 0;
    }
    size_t total = end - i;
    for (; i < end && want; i++) {
        size_t len = 0;
        const char *text = entry_text(&g_entries[i], &len);
        if (!text) {
            *oom = 1;
            return 0;
        }
        if (fn(ctx, g_entries[i].obj, text, len))
            want--;
    }
    return total;
}

size_t st_events_since(uint64_t since, const st_event **out, size_t max, int *expired)
{
    *expired = since < g_evicted_rv;
    if (*expired)
        return 0;
    /* Binary search the ring for the first event with rv > since. */
    size_t lo = 0, hi = g_ring_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_ring[(g_ring_head + mid) % g_ring_cap].rv <= since)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t n = 0;
    for (size_t i = lo; i < g_ring_len && n < max; i++)
        out[n++] = &g_ring[(g_ring_head + i) % g_ring_cap];
    return n;
}

void st_wait(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g_cv, &g_mu, &ts);
}

uint64_t st_history_start(void)
{
    return g_evicted_rv;
}

void st_broadcast(void)
{
    pthread_cond_broadcast(&g_cv);
}
