#include "webhook/kubestore.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json_member.h"
#include "common/strutil.h"
#include "common/hash.h"
#include "quota/crd.h"
#include "quota/podqueue.h"

/* The caches; the first three are the kinds wh_store.list lists. */
enum {
    C_QUOTA = WH_LIST_QUOTAS,
    C_TENANT = WH_LIST_TENANT_QUOTAS,
    C_LIMITRANGE = WH_LIST_LIMIT_RANGES,
    C_NAMESPACE,
    C_COUNT
};

static const char *const cache_paths[C_COUNT] = {
    WH_GQ_PATH "/gpuquotas",
    WH_GQ_PATH "/gputenantquotas",
    WH_GQ_PATH "/gpulimitranges",
    "/api/v1/namespaces",
};

/* Longest namespace name: a DNS label. */
#define NS_MAX 63

/* How long a live read waits for the one of the same scope already under
 * way before it goes out beside it: coalescing must not stack one API
 * timeout on another inside kube-apiserver's webhook timeout. */
#define LIVE_WAIT_MS 500

/* How long a live read that found no GPUQuota in a namespace (no
 * GPUTenantQuota at all) stands in for the next ones, as Kubernetes'
 * ResourceQuota admission keeps its live lookups (liveTTL, 30 s, in
 * k8s.io/apiserver's resourcequota/resource_access.go): without it every
 * GPU pod of a namespace without quotas made a LIST per webhook call while
 * holding a server thread. docs/validating-webhook.md, "Empty scope". */
#define EMPTY_TTL_MS 30000L

/* Scopes whose live read came back empty: direct-mapped, so a collision
 * costs one more live read, never a wrong answer for another scope. */
#define EMPTY_SLOTS 1024

/* Records as a store read collects them (from a cache or a live read). */
typedef struct collect {
    const char *ns; /* NULL: every record */
    char **texts;
    size_t n, cap;
    bool oom;
} collect;

/* One read from the API server, shared by the admissions that asked for the
 * same scope before it was sent. */
typedef struct live_read {
    struct live_read *next;
    int which;
    char ns[NS_MAX + 1]; /* "" for cluster-scoped GPUTenantQuotas */
    bool sent, done;
    unsigned refs;
    gq_code rc;
    gq_err err;
    collect got; /* the records, as the cache keeps them */
} live_read;

struct wh_kubestore {
    const kube_api *api;
    kube_cache *caches[C_COUNT];
    pthread_mutex_t live_mu;
    pthread_cond_t live_cv; /* a live read was sent or finished */
    live_read *live;        /* reads waiting to be sent or under way */
    wh_metrics *metrics;    /* per-quota gauges to drop with their quota */
    long empty_ttl_ms;      /* EMPTY_TTL_MS; 0: every empty scope is read live */
    wh_want_fn want;        /* a GPUQuota asks for escrowed room back; NULL: nobody told */
    void *want_ud;
    struct empty_scope { /* under live_mu */
        int which;
        char ns[NS_MAX + 1];
        int64_t until_ms; /* monotonic; 0: unused */
    } empty[EMPTY_SLOTS];
};

static int namespaces_marker; /* to_text's ud for Namespace objects */

/* Records are compact JSON text: json-c objects are not safe to share
 * between threads (reference counts are not atomic), text is, and every
 * reader parses its own private tree. Lists only select which quotas govern
 * a pod, so records keep metadata and spec and drop status but its
 * queuedPods count (maxQueuedPods): reservations would make every admission
 * parse every other admission's record (the charging path reads status
 * fresh anyway). For the same reason metadata
 * drops managedFields and kubectl's last-applied-configuration annotation,
 * which nothing here reads: a GPUTenantQuota's managedFields name every
 * namespace of its status, and were most of what each admission parsed of
 * every tenant in the cluster. Namespaces keep their labels. */
#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

/* Copy member key of src into dst (both objects; absent: nothing). */
static bool keep_member(json_object *dst, json_object *src, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(src, key, &v))
        return true;
    if (json_object_object_add(dst, key, json_object_get(v))) {
        json_object_put(v);
        return false;
    }
    return true;
}

/* Add to dst a reference to each member of src but skip (src may be NULL). */
static bool copy_members(json_object *dst, json_object *src, const char *skip)
{
    if (!json_object_is_type(src, json_type_object))
        return true;
    json_object_object_foreach(src, key, val)
    {
        if (!strcmp(key, skip))
            continue;
        if (json_object_object_add(dst, key, json_object_get(val))) {
            json_object_put(val);
            return false;
        }
    }
    return true;
}

/* obj's metadata without what no reader needs (a new object; NULL: out of
 * memory). A metadata that is not an object is kept as it is, for the
 * parsers to refuse. */
static json_object *lean_metadata(json_object *meta)
{
    if (!json_object_is_type(meta, json_type_object))
        return json_object_get(meta);
    json_object *lean = json_object_new_object(), *ann = NULL, *kept;
    if (!lean || !copy_members(lean, meta, "managedFields"))
        goto oom;
    if (json_object_object_get_ex(meta, "annotations", &ann) &&
        json_object_is_type(ann, json_type_object) &&
        json_object_object_get_ex(ann, LAST_APPLIED, NULL)) {
        if (!(kept = json_object_new_object()) || !copy_members(kept, ann, LAST_APPLIED) ||
            json_object_object_add(lean, "annotations", kept)) {
            json_object_put(kept);
            goto oom;
        }
    }
    return lean;
oom:
    json_object_put(lean);
    return NULL;
}

/* Of a quota's status the one count /validate reads from a list:
 * queuedPods, for maxQueuedPods (a new status object; nothing when absent). */
static bool keep_queued_pods(json_object *dst, json_object *obj)
{
    json_object *st = gq_json_member(obj, "status"), *lean;
    if (!st || !json_object_object_get_ex(st, "queuedPods", NULL))
        return true;
    if (!(lean = json_object_new_object()) || !keep_member(lean, st, "queuedPods") ||
        json_object_object_add(dst, "status", lean)) {
        json_object_put(lean);
        return false;
    }
    return true;
}

/* Tell the want hook about a GPUQuota that asks for escrowed room back
 * (ks NULL: a live read, which tells nobody; the cache's event will). */
static void note_want(wh_kubestore *ks, json_object *obj)
{
    json_object *list = gq_json_member(gq_json_member(obj, "status"), "reservations");
    /* only GPUQuotas hold namespaced wants */
    if (!ks || !ks->want || !gq_reservations_json_live(list, GQ_ESCROW_WANT, (int64_t)time(NULL)))
        return;
    json_object *meta = gq_json_member(obj, "metadata");
    const char *ns = gq_json_get_string(meta, "namespace"),
               *name = gq_json_get_string(meta, "name");
    if (ns && name)
        ks->want(ks->want_ud, ns, name);
}

static gq_code to_text(void *ud, json_object *obj, void **rec, gq_err *err)
{
    static const char *const keep[] = {"apiVersion", "kind", "spec"};
    json_object *src = NULL, *meta;
    const char *text = "{}";
    bool built = false;
    if (ud == &namespaces_marker) {
        if (json_object_object_get_ex(obj, "metadata", &meta))
            json_object_object_get_ex(meta, "labels", &src);
    } else if ((src = json_object_new_object())) {
        built = true;
        note_want(ud, obj);
        bool ok = true;
        for (size_t i = 0; ok && i < sizeof(keep) / sizeof(keep[0]); i++)
            ok = keep_member(src, obj, keep[i]);
        if (ok && json_object_object_get_ex(obj, "metadata", &meta)) {
            json_object *lean = lean_metadata(meta);
            ok = lean && !json_object_object_add(src, "metadata", lean);
            if (!ok)
                json_object_put(lean);
        }
        ok = ok && keep_queued_pods(src, obj);
        if (!ok) {
            json_object_put(src);
            return gq_err_oom(err);
        }
    } else {
        return gq_err_oom(err);
    }
    if (src)
        text = json_object_to_json_string_ext(src, JSON_C_TO_STRING_PLAIN);
    *rec = text ? strdup(text) : NULL;
    if (built)
        json_object_put(src);
    if (!*rec)
        return gq_err_oom(err);
    return GQ_OK;
}

static void free_text(void *ud, void *rec)
{
    (void)ud;
    free(rec);
}

/* A GPUQuota or GPUTenantQuota is gone (a DELETED event, or missing from a
 * relist): its gauges go with it, or every replica would export the last
 * values of a quota that no longer exists until it restarts. */
static void forget_gauges(void *ud, const char *ns, const char *name, const void *rec)
{
    wh_kubestore *ks = ud;
    (void)rec;
    wh_metrics_forget_quota(ks->metrics, ns ? ns : "", name);
}

gq_code wh_kubestore_new(const kube_api *api, wh_kubestore **out, gq_err *err)
{
    wh_kubestore *ks = calloc(1, sizeof(*ks));
    pthread_condattr_t ca;
    if (!ks)
        return gq_err_oom(err);
    ks->api = api;
    ks->empty_ttl_ms = EMPTY_TTL_MS;
    pthread_mutex_init(&ks->live_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ks->live_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < C_COUNT; i++) {
        kube_cache_opts o = {
            .path = cache_paths[i],
            .transform = to_text,
            .free_record = free_text,
            .on_delete = i == C_QUOTA || i == C_TENANT ? forget_gauges : NULL,
            .ud = i == C_NAMESPACE ? (void *)&namespaces_marker : ks,
        };
        gq_code rc = kube_cache_new(api, &o, &ks->caches[i], err);
        if (rc) {
            wh_kubestore_free(ks);
            return rc;
        }
    }
    *out = ks;
    return GQ_OK;
}

void wh_kubestore_set_metrics(wh_kubestore *ks, wh_metrics *m)
{
    ks->metrics = m;
}

void wh_kubestore_set_want_hook(wh_kubestore *ks, wh_want_fn fn, void *ud)
{
    ks->want = fn;
    ks->want_ud = ud;
}

gq_code wh_kubestore_start(wh_kubestore *ks, gq_err *err)
{
    for (int i = 0; i < C_COUNT; i++) {
        gq_code rc = kube_cache_start(ks->caches[i], err);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

bool wh_kubestore_synced(wh_kubestore *ks)
{
    for (int i = 0; i < C_COUNT; i++)
        if (!kube_cache_synced(ks->caches[i]))
            return false;
    return true;
}

void wh_kubestore_free(wh_kubestore *ks)
{
    if (!ks)
        return;
    for (int i = 0; i < C_COUNT; i++) {
        if (ks->caches[i])
            kube_cache_stop(ks->caches[i]);
        kube_cache_free(ks->caches[i]);
    }
    pthread_mutex_destroy(&ks->live_mu);
    pthread_cond_destroy(&ks->live_cv);
    free(ks);
}

/* ---- records: from the caches, or live -------------------------------------- */

/* Take ownership of text (NULL: out of memory). */
static bool collect_take(collect *c, char *text)
{
    if (text && c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        char **grown = realloc(c->texts, cap * sizeof(*grown));
        if (!grown) {
            free(text);
            text = NULL;
        } else {
            c->texts = grown;
            c->cap = cap;
        }
    }
    if (!text) {
        c->oom = true;
        return false;
    }
    c->texts[c->n++] = text;
    return true;
}

static void collect_dispose(collect *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->texts[i]);
    free(c->texts);
}

static int collect_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    collect *c = ud;
    (void)name;
    if (c->ns && strcmp(ns ? ns : "", c->ns))
        return 0;
    return collect_take(c, strdup(rec)) ? 0 : 1;
}

/* A fresh array of the records (each reader parses its own tree). */
static gq_code records_array(const collect *c, json_object **out, gq_err *err)
{
    json_object *arr = json_object_new_array();
    if (!arr)
        return gq_err_oom(err);
    for (size_t i = 0; i < c->n; i++) {
        json_object *o = json_tokener_parse(c->texts[i]);
        if (!o || json_object_array_add(arr, o)) {
            json_object_put(o);
            json_object_put(arr);
            return gq_err_oom(err);
        }
    }
    *out = arr;
    return GQ_OK;
}

/* Kubernetes namespace names are DNS labels; nothing else can hold a quota,
 * and nothing else may go into a request path. */
static bool dns_label(const char *s)
{
    return gq_is_dns_label(s);
}

static gq_code live_item(void *ud, json_object *item, gq_err *err)
{
    live_read *r = ud;
    void *rec = NULL;
    gq_code rc = to_text(r->which == C_NAMESPACE ? &namespaces_marker : NULL, item, &rec, err);
    if (!rc && !collect_take(&r->got, rec))
        rc = gq_err_oom(err);
    return rc;
}

/* Read r's scope from the API server: a LIST of the namespace's GPUQuotas or
 * GPULimitRanges, of every GPUTenantQuota, or a GET of the Namespace (404:
 * no record). Quorum reads (no resourceVersion): they see every write made
 * before they were sent. */
static void live_fetch(wh_kubestore *ks, live_read *r)
{
    char path[256];
    gq_err e;
    gq_code rc;
    gq_err_clear(&e);
    if (r->which == C_NAMESPACE) {
        json_object *obj = NULL;
        snprintf(path, sizeof(path), "%s/%s", cache_paths[C_NAMESPACE], r->ns);
        rc = ks->api->get(ks->api->ctx, path, &obj, &e);
        if (rc == GQ_ENOTFOUND)
            rc = GQ_OK; /* unknown namespace: no labels */
        else if (!rc)
            rc = live_item(r, obj, &e);
        json_object_put(obj);
    } else {
        kube_list_opts lo = {0};
        if (r->which == C_TENANT)
            snprintf(path, sizeof(path), "%s", cache_paths[C_TENANT]);
        else /* "/gpuquotas" or "/gpulimitranges" after the group path */
            snprintf(path, sizeof(path), WH_GQ_PATH "/namespaces/%s%s", r->ns,
                     cache_paths[r->which] + strlen(WH_GQ_PATH));
        rc = ks->api->list(ks->api->ctx, path, &lo, live_item, r, NULL, &e);
    }
    if (!rc && r->got.oom)
        rc = gq_err_oom(&e);
    r->rc = rc;
    if (rc)
        r->err = e;
}

static void live_release(wh_kubestore *ks, live_read *r)
{
    pthread_mutex_lock(&ks->live_mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&ks->live_mu);
    if (last) {
        collect_dispose(&r->got);
        free(r);
    }
}

static bool live_same(const live_read *r, int which, const char *ns)
{
    return r->which == which && !strcmp(r->ns, ns);
}

/* A read of scope (which, ns) sent after the caller arrived. Concurrent
 * callers share it: a caller joins a read that has not been sent yet, and a
 * new read waits (up to LIVE_WAIT_MS) for the one under way, gathering the
 * callers that arrive meanwhile. So each scope has about one read in flight,
 * however many admissions ask, and none is answered from a read older than
 * its request. On success *out holds a reference (live_release). */
static gq_code live_read_get(wh_kubestore *ks, int which, const char *ns, live_read **out,
                             gq_err *err)
{
    live_read *r = NULL, *p;
    bool lead = false;
    pthread_mutex_lock(&ks->live_mu);
    for (p = ks->live; p && !r; p = p->next)
        if (!p->sent && live_same(p, which, ns))
            r = p;
    if (!r) {
        if (!(r = calloc(1, sizeof(*r)))) {
            pthread_mutex_unlock(&ks->live_mu);
            return gq_err_oom(err);
        }
        r->which = which;
        snprintf(r->ns, sizeof(r->ns), "%s", ns);
        r->next = ks->live;
        ks->live = r;
        lead = true;
    }
    r->refs++;
    if (lead) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += LIVE_WAIT_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        for (;;) {
            bool busy = false;
            for (p = ks->live; p && !busy; p = p->next)
                busy = p != r && p->sent && live_same(p, which, ns);
            if (!busy || pthread_cond_timedwait(&ks->live_cv, &ks->live_mu, &until))
                break;
        }
        r->sent = true;
        pthread_mutex_unlock(&ks->live_mu);
        live_fetch(ks, r);
        pthread_mutex_lock(&ks->live_mu);
        r->done = true;
        for (live_read **pp = &ks->live; *pp; pp = &(*pp)->next)
            if (*pp == r) {
                *pp = r->next;
                break;
            }
        pthread_cond_broadcast(&ks->live_cv);
    } else {
        while (!r->done)
            pthread_cond_wait(&ks->live_cv, &ks->live_mu);
    }
    pthread_mutex_unlock(&ks->live_mu);
    if (r->rc) {
        gq_code rc = r->rc;
        if (err)
            *err = r->err;
        live_release(ks, r);
        return rc;
    }
    *out = r;
    return GQ_OK;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct empty_scope *empty_slot(wh_kubestore *ks, int which, const char *ns)
{
    uint64_t h = gq_fnv1a_add(GQ_FNV1A_INIT + (uint64_t)which, ns);
    return &ks->empty[h & (EMPTY_SLOTS - 1)];
}

/* Whether a live read of the scope found it empty less than empty_ttl_ms ago. */
static bool empty_known(wh_kubestore *ks, int which, const char *ns)
{
    pthread_mutex_lock(&ks->live_mu);
    const struct empty_scope *e = empty_slot(ks, which, ns);
    bool known = e->until_ms && e->which == which && !strcmp(e->ns, ns) && mono_ms() < e->until_ms;
    pthread_mutex_unlock(&ks->live_mu);
    return known;
}

static void empty_note(wh_kubestore *ks, int which, const char *ns, int64_t read_at_ms)
{
    if (ks->empty_ttl_ms <= 0)
        return;
    pthread_mutex_lock(&ks->live_mu);
    struct empty_scope *e = empty_slot(ks, which, ns);
    e->which = which;
    snprintf(e->ns, sizeof(e->ns), "%s", ns);
    e->until_ms = read_at_ms + ks->empty_ttl_ms;
    pthread_mutex_unlock(&ks->live_mu);
}

void wh_kubestore_set_empty_ttl(wh_kubestore *ks, long ms)
{
    ks->empty_ttl_ms = ms > 0 ? ms : 0;
}

/* The GPUQuotas of ns (GPUTenantQuotas: ns NULL; GPULimitRanges) as a new
 * array. From the cache while it is fresh (kube_cache_fresh: its watch is
 * established and caught up); otherwise, and for quotas also when the cache
 * holds none for the scope (a brand-new quota whose watch event is still on
 * its way), read live, unless a live read found the scope empty within the
 * last empty_ttl_ms. A failed live read is returned: the caller fails
 * closed. docs/validating-webhook.md has the reasons and costs. */
static gq_code list_records(wh_kubestore *ks, int which, const char *ns, json_object **out,
                            gq_err *err)
{
    collect c = {ns, NULL, 0, 0, false};
    live_read *r = NULL;
    gq_code rc;
    if (ns && !dns_label(ns)) /* no such namespace can hold anything */
        return records_array(&c, out, err);
    if (kube_cache_fresh(ks->caches[which])) {
        /* Copy under the cache's read lock, parse outside it. */
        kube_cache_foreach(ks->caches[which], collect_fn, &c);
        if (c.oom) {
            collect_dispose(&c);
            return gq_err_oom(err);
        }
        if (c.n || which == C_LIMITRANGE || empty_known(ks, which, ns ? ns : "")) {
            rc = records_array(&c, out, err);
            collect_dispose(&c);
            return rc;
        }
    }
    collect_dispose(&c);
    int64_t read_at = mono_ms();
    if ((rc = live_read_get(ks, which, ns ? ns : "", &r, err)))
        return rc;
    if (!r->got.n)
        empty_note(ks, which, ns ? ns : "", read_at);
    rc = records_array(&r->got, out, err);
    live_release(ks, r);
    return rc;
}

static gq_code ks_list(void *ctx, wh_list_kind kind, const char *ns, json_object **out, gq_err *err)
{
    return list_records(ctx, (int)kind, kind == WH_LIST_TENANT_QUOTAS ? NULL : ns, out, err);
}

typedef struct one_text {
    char *text;
} one_text;

static void copy_one(void *ud, const void *rec)
{
    ((one_text *)ud)->text = strdup(rec);
}

/* The labels of ns: from a fresh cache that has it, else live (a namespace
 * made a moment ago may not have reached the cache yet). */
static gq_code ks_namespace_labels(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    one_text t = {NULL};
    live_read *r = NULL;
    json_object *o;
    if (!dns_label(ns)) {
        *out = NULL; /* no such namespace: no labels */
        return GQ_OK;
    }
    if (kube_cache_fresh(ks->caches[C_NAMESPACE]) &&
        kube_cache_get(ks->caches[C_NAMESPACE], "", ns, copy_one, &t) == GQ_OK) {
        o = t.text ? json_tokener_parse(t.text) : NULL;
        free(t.text);
    } else {
        gq_code rc = live_read_get(ks, C_NAMESPACE, ns, &r, err);
        if (rc)
            return rc;
        if (!r->got.n) {
            live_release(ks, r);
            *out = NULL; /* unknown namespace: no labels */
            return GQ_OK;
        }
        o = json_tokener_parse(r->got.texts[0]);
        live_release(ks, r);
    }
    if (!o)
        return gq_err_oom(err);
    *out = o;
    return GQ_OK;
}

/* ---- fresh reads and status writes ----------------------------------------- */

static gq_code quota_path(gq_quota_kind kind, const char *ns, const char *name, char *buf,
                          size_t cap, gq_err *err)
{
    int n = kind == GQ_QUOTA_TENANT
                ? snprintf(buf, cap, WH_GQ_PATH "/gputenantquotas/%s", name)
                : snprintf(buf, cap, WH_GQ_PATH "/namespaces/%s/gpuquotas/%s", ns ? ns : "", name);
    if (n < 0 || (size_t)n >= cap)
        return gq_err_set(err, GQ_ELIMIT, "quota name too long");
    return GQ_OK;
}

static gq_code ks_get_quota(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                            json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[2 * GQ_CRD_MAX_STRING + 128];
    gq_code rc = quota_path(kind, ns, name, path, sizeof(path), err);
    if (!rc)
        rc = ks->api->get(ks->api->ctx, path, out, err);
    return rc;
}

static gq_code ks_update_status(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                                json_object *obj, json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[2 * GQ_CRD_MAX_STRING + 128];
    json_object *resp = NULL;
    gq_code rc = quota_path(kind, ns, name, path, sizeof(path), err);
    if (!rc)
        rc = ks->api->update_status(ks->api->ctx, path, obj, &resp, err);
    if (!rc && out) {
        *out = resp;
        resp = NULL;
    }
    json_object_put(resp);
    return rc;
}

/* GET one namespaced resource.k8s.io/v1 object (kind names it in errors). */
static gq_code ks_get_dra(wh_kubestore *ks, const char *resource, const char *kind, const char *ns,
                          const char *name, json_object **out, gq_err *err)
{
    char path[2 * GQ_CRD_MAX_STRING + 128];
    int n = snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/%s/%s", ns,
                     resource, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return gq_err_set(err, GQ_ELIMIT, "%s name too long", kind);
    return ks->api->get(ks->api->ctx, path, out, err);
}

static gq_code ks_get_claim_template(void *ctx, const char *ns, const char *name, json_object **out,
                                     gq_err *err)
{
    return ks_get_dra(ctx, "resourceclaimtemplates", "ResourceClaimTemplate", ns, name, out, err);
}

static gq_code ks_get_claim(void *ctx, const char *ns, const char *name, json_object **out,
                            gq_err *err)
{
    return ks_get_dra(ctx, "resourceclaims", "ResourceClaim", ns, name, out, err);
}

static gq_code ks_get_pod(void *ctx, const char *ns, const char *name, json_object **out,
                          gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[2 * GQ_CRD_MAX_STRING + 64];
    if (!dns_label(ns))
        return gq_err_set(err, GQ_EINVAL, "invalid namespace name");
    int n = snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return gq_err_set(err, GQ_ELIMIT, "pod name too long");
    return ks->api->get(ks->api->ctx, path, out, err);
}

static gq_code ks_get_device_class(void *ctx, const char *name, json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[GQ_CRD_MAX_STRING + 64];
    int n = snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/deviceclasses/%s", name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return gq_err_set(err, GQ_ELIMIT, "DeviceClass name too long");
    return ks->api->get(ks->api->ctx, path, out, err);
}

/* ---- pod-group members ------------------------------------------------------ */

/* Members kept from one list: more than any valid group has, so a flood of
 * labelled pods cannot make an admission hold them all. */
#define GROUP_PODS_MAX (2 * GQ_POD_GROUP_MAX)
/* Members per page: a pod may carry 256 KiB of annotations, so one page of
 * 20 is at most about 6 MiB of JSON, however members are written. */
#define GROUP_PAGE 20

/* A label value as kube-apiserver validates it (IsValidLabelValue, non-empty
 * here): at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. Checked
 * again before it goes into a labelSelector. */
static bool label_value(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > GQ_POD_GROUP_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

typedef struct group_pods {
    json_object *arr;
    bool full; /* GROUP_PODS_MAX reached: the list was stopped */
} group_pods;

/* Keep what the member comparison reads: the name, the group label and size
 * annotation, the deletion fields and status.phase. */
static gq_code group_item(void *ud, json_object *item, gq_err *err)
{
    group_pods *g = ud;
    if (json_object_array_length(g->arr) >= GROUP_PODS_MAX) {
        g->full = true;
        return gq_err_set(err, GQ_ELIMIT, "more than %d pods in the group", GROUP_PODS_MAX);
    }
    json_object *meta = NULL, *status = NULL, *labels = NULL, *annots = NULL;
    json_object_object_get_ex(item, "metadata", &meta);
    json_object_object_get_ex(item, "status", &status);
    json_object_object_get_ex(meta, "labels", &labels);
    json_object_object_get_ex(meta, "annotations", &annots);
    json_object *pod = json_object_new_object(), *m = json_object_new_object(),
                *l = json_object_new_object(), *a = json_object_new_object(),
                *st = json_object_new_object();
    bool ok = pod && m && l && a && st && keep_member(m, meta, "name") &&
              keep_member(m, meta, "deletionTimestamp") &&
              keep_member(m, meta, "deletionGracePeriodSeconds") &&
              keep_member(l, labels, GQ_POD_GROUP_LABEL) &&
              keep_member(a, annots, GQ_POD_GROUP_SIZE_ANNOTATION) &&
              keep_member(st, status, "phase") && !json_object_object_add(m, "labels", l);
    if (ok)
        l = NULL;
    ok = ok && !json_object_object_add(m, "annotations", a);
    if (ok)
        a = NULL;
    ok = ok && !json_object_object_add(pod, "metadata", m);
    if (ok)
        m = NULL;
    ok = ok && !json_object_object_add(pod, "status", st);
    if (ok)
        st = NULL;
    ok = ok && !json_object_array_add(g->arr, pod);
    if (ok)
        pod = NULL;
    json_object_put(pod);
    json_object_put(m);
    json_object_put(l);
    json_object_put(a);
    json_object_put(st);
    return ok ? GQ_OK : gq_err_oom(err);
}

/* A quorum LIST of the group's pods (labelSelector on the group label). */
static gq_code ks_list_group_pods(void *ctx, const char *ns, const char *group, json_object **out,
                                  gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[NS_MAX + 32],
        sel[GQ_POD_GROUP_NAME_MAX + sizeof(GQ_POD_GROUP_LABEL) + sizeof(GQ_LABEL_MANAGED) + 8];
    *out = NULL;
    if (!dns_label(ns))
        return gq_err_set(err, GQ_EINVAL, "invalid namespace name");
    if (!label_value(group))
        return gq_err_set(err, GQ_EINVAL,
                          "label " GQ_POD_GROUP_LABEL " \"%.63s\" is not a valid label value",
                          group ? group : "");
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
    /* Members are GPU pods, which gpuquota labels managed (a CPU-only pod
     * cannot wear the label: /validate refuses it), so pods that only carry
     * the group label are never read; small pages bound what one page of
     * large members costs. */
    snprintf(sel, sizeof(sel), GQ_POD_GROUP_LABEL "=%s," GQ_LABEL_MANAGED "=true", group);
    group_pods g = {json_object_new_array(), false};
    if (!g.arr)
        return gq_err_oom(err);
    kube_list_opts lo = {.label_selector = sel, .page_size = GROUP_PAGE};
    gq_code rc = ks->api->list(ks->api->ctx, path, &lo, group_item, &g, NULL, err);
    if (rc == GQ_ELIMIT && g.full) {
        gq_err_clear(err);
        rc = GQ_OK; /* enough members to compare with */
    }
    if (rc) {
        json_object_put(g.arr);
        return rc;
    }
    *out = g.arr;
    return GQ_OK;
}

void wh_kubestore_store(wh_kubestore *ks, wh_store *out)
{
    out->ctx = ks;
    out->list = ks_list;
    out->namespace_labels = ks_namespace_labels;
    out->get_quota = ks_get_quota;
    out->update_status = ks_update_status;
    out->get_claim_template = ks_get_claim_template;
    out->get_claim = ks_get_claim;
    out->get_device_class = ks_get_device_class;
    out->get_pod = ks_get_pod;
    out->list_group_pods = ks_list_group_pods;
}
