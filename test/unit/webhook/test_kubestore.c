/* The webhook's store over the Kubernetes API (webhook/kubestore.c) driven
 * through a fake kube_api: which quotas, limit ranges and namespace labels
 * come from the informer caches and which are read live, so that a quota
 * that exists is never missed because a cache is stale. The fake's watches
 * deliver nothing after their first bookmark, as a watch would before an
 * event arrives; "down" watches fail at once, as while kube-apiserver
 * restarts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <unistd.h>

#include "quota/podqueue.h"
#include "webhook/kubestore.h"

enum { R_QUOTA, R_TENANT, R_LIMITRANGE, R_NAMESPACE, R_COUNT };

static const char *const resources[R_COUNT] = {"gpuquotas", "gputenantquotas", "gpulimitranges",
                                               "namespaces"};

typedef struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_object *objs[R_COUNT];  /* what the server holds */
    int down[R_COUNT];           /* watches fail (an open one ends) */
    int opened[R_COUNT];         /* watches accepted and past their bookmark */
    int live[R_COUNT];           /* live reads: LISTs that ask no resourceVersion, GETs */
    char live_ns[R_COUNT][64];   /* namespace of the last live read */
    gq_code fail_live;           /* live reads fail with this */
    int hold_live;               /* live reads wait while set */
    int held;                    /* live reads waiting */
    json_object *event[R_COUNT]; /* an event the open watch delivers */
    kube_event_type event_type[R_COUNT];
    int delivered[R_COUNT]; /* events the cache has taken */
} fake;

/* "/apis/gpuquota.io/v1alpha1/namespaces/NS/gpuquotas", "/api/v1/namespaces/NS",
 * "/apis/gpuquota.io/v1alpha1/gputenantquotas": the resource, and the
 * namespace in ns ("" when none). */
static int parse_path(const char *path, char *ns, size_t cap, int *named)
{
    const char *p = strncmp(path, WH_GQ_PATH "/", strlen(WH_GQ_PATH) + 1)
                        ? path + strlen("/api/v1/")
                        : path + strlen(WH_GQ_PATH) + 1;
    ns[0] = '\0';
    *named = 0;
    if (!strncmp(p, "namespaces/", 11)) {
        const char *s = p + 11, *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        snprintf(ns, cap, "%.*s", (int)n, s);
        if (!slash) {
            *named = 1;
            return R_NAMESPACE;
        }
        p = slash + 1;
    }
    for (int r = 0; r < R_COUNT; r++)
        if (!strncmp(p, resources[r], strlen(resources[r])))
            return r;
    fail_msg("unexpected path %s", path);
    return -1;
}

static const char *meta(json_object *o, const char *key)
{
    json_object *m, *v;
    if (!json_object_object_get_ex(o, "metadata", &m) || !json_object_object_get_ex(m, key, &v))
        return "";
    return json_object_get_string(v);
}

/* A private copy: json-c reference counts are not atomic. */
static json_object *copy(json_object *o)
{
    return json_tokener_parse(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

/* Wait while the test holds live reads; then the code they answer. */
static gq_code live_gate(fake *f, int r, const char *ns, gq_err *err)
{
    pthread_mutex_lock(&f->mu);
    f->live[r]++;
    snprintf(f->live_ns[r], sizeof(f->live_ns[r]), "%s", ns);
    f->held++;
    pthread_cond_broadcast(&f->cv);
    while (f->hold_live)
        pthread_cond_wait(&f->cv, &f->mu);
    f->held--;
    gq_code rc = f->fail_live;
    pthread_mutex_unlock(&f->mu);
    return rc ? gq_err_set(err, rc, "LIST %s: HTTP 503 Service Unavailable", resources[r]) : GQ_OK;
}

static gq_code f_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                      void *ud, char **rv_out, gq_err *err)
{
    fake *f = ctx;
    char ns[64];
    int named, r = parse_path(path, ns, sizeof(ns), &named);
    gq_code rc = GQ_OK;
    (void)o;
    /* What the server holds when the request arrives. */
    pthread_mutex_lock(&f->mu);
    json_object *items = copy(f->objs[r]);
    pthread_mutex_unlock(&f->mu);
    if (!rv_out && (rc = live_gate(f, r, ns, err))) {
        json_object_put(items);
        return rc;
    }
    for (size_t i = 0; i < json_object_array_length(items) && !rc; i++) {
        json_object *it = json_object_array_get_idx(items, i);
        if (!ns[0] || !strcmp(meta(it, "namespace"), ns))
            rc = fn(ud, it, err);
    }
    json_object_put(items);
    if (!rc && rv_out && !(*rv_out = strdup("10")))
        rc = gq_err_oom(err);
    return rc;
}

static gq_code f_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    fake *f = ctx;
    char ns[64];
    int named;
    if (strstr(path, "?limit=1")) { /* a cache asking the server's resourceVersion */
        *out = json_tokener_parse("{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}");
        return GQ_OK;
    }
    int r = parse_path(path, ns, sizeof(ns), &named);
    assert_int_equal(r, R_NAMESPACE);
    assert_true(named);
    gq_code rc = live_gate(f, r, ns, err);
    if (rc)
        return rc;
    *out = NULL;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < json_object_array_length(f->objs[r]) && !*out; i++)
        if (!strcmp(meta(json_object_array_get_idx(f->objs[r], i), "name"), ns))
            *out = copy(json_object_array_get_idx(f->objs[r], i));
    pthread_mutex_unlock(&f->mu);
    return *out ? GQ_OK : gq_err_set(err, GQ_ENOTFOUND, "namespaces \"%s\" not found", ns);
}

/* Accepted, one bookmark, then nothing until stopped or taken down. */
static gq_code f_watch(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                       void *ud, gq_err *err)
{
    fake *f = ctx;
    char ns[64];
    int named, r = parse_path(path, ns, sizeof(ns), &named);
    pthread_mutex_lock(&f->mu);
    int down = f->down[r];
    pthread_mutex_unlock(&f->mu);
    if (down)
        return gq_err_set(err, GQ_EIO, "WATCH %s: connection refused", path);
    o->on_open(ud);
    json_object *bm =
        json_tokener_parse("{\"kind\":\"X\",\"metadata\":{\"resourceVersion\":\"10\"}}");
    gq_code rc = fn(ud, KUBE_EVENT_BOOKMARK, bm, err);
    json_object_put(bm);
    if (rc)
        return rc;
    pthread_mutex_lock(&f->mu);
    f->opened[r]++;
    pthread_cond_broadcast(&f->cv);
    while (!atomic_load(o->stop) && !f->down[r]) {
        json_object *ev = f->event[r];
        kube_event_type type = f->event_type[r];
        f->event[r] = NULL;
        pthread_mutex_unlock(&f->mu);
        rc = ev ? fn(ud, type, ev, err) : GQ_OK;
        json_object_put(ev);
        if (rc)
            return rc;
        usleep(1000);
        pthread_mutex_lock(&f->mu);
        if (ev) {
            f->delivered[r]++;
            pthread_cond_broadcast(&f->cv);
        }
    }
    down = f->down[r];
    pthread_mutex_unlock(&f->mu);
    return down ? gq_err_set(err, GQ_EIO, "WATCH %s: connection reset", path) : GQ_OK;
}

static void add(fake *f, int r, const char *ns, const char *name, const char *labels)
{
    static const char *const kinds[R_COUNT] = {"GPUQuota", "GPUTenantQuota", "GPULimitRange",
                                               "Namespace"};
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{%s%s%s\"name\":\"%s\","
             "\"resourceVersion\":\"5\",\"labels\":%s},\"spec\":{}}",
             r == R_NAMESPACE ? "v1" : "gpuquota.io/v1alpha1", kinds[r],
             ns ? "\"namespace\":\"" : "", ns ? ns : "", ns ? "\"," : "", name,
             labels ? labels : "{}");
    json_object *o = json_tokener_parse(buf);
    assert_non_null(o);
    pthread_mutex_lock(&f->mu);
    json_object_array_add(f->objs[r], o);
    pthread_mutex_unlock(&f->mu);
}

/* The open watch of r delivers an event of type for the object named name
 * (the last one of that name the server holds); returns once the cache has
 * taken it. DELETED also removes the object from the server. */
static void deliver(fake *f, int r, kube_event_type type, const char *name)
{
    pthread_mutex_lock(&f->mu);
    size_t n = json_object_array_length(f->objs[r]), i = n;
    while (i > 0 && strcmp(meta(json_object_array_get_idx(f->objs[r], i - 1), "name"), name))
        i--;
    assert_true(i > 0);
    static int rv = 10; /* after the lists' "10" */
    char text[16];
    json_object *ev = copy(json_object_array_get_idx(f->objs[r], i - 1)), *m;
    assert_true(json_object_object_get_ex(ev, "metadata", &m));
    snprintf(text, sizeof(text), "%d", ++rv);
    json_object_object_add(m, "resourceVersion", json_object_new_string(text));
    f->event[r] = ev;
    f->event_type[r] = type;
    if (type == KUBE_EVENT_DELETED)
        json_object_array_del_idx(f->objs[r], i - 1, 1);
    for (int before = f->delivered[r]; f->delivered[r] == before;)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void set_down(fake *f, int r, int down)
{
    pthread_mutex_lock(&f->mu);
    f->down[r] = down;
    pthread_mutex_unlock(&f->mu);
}

static int live(fake *f, int r)
{
    pthread_mutex_lock(&f->mu);
    int n = f->live[r];
    pthread_mutex_unlock(&f->mu);
    return n;
}

typedef struct env {
    fake f;
    kube_api api;
    wh_kubestore *ks;
    wh_store st;
    http_metrics *registry;
    wh_metrics *m;
} env;

/* A started store over a fake holding: GPUQuota a/q1, Namespaces a
 * (team=x) and b. Watches of the resources in down[] fail from the start;
 * the others are established before this returns. */
static env *env_start(const int down[R_COUNT])
{
    env *v = calloc(1, sizeof(*v));
    gq_err e;
    assert_non_null(v);
    pthread_mutex_init(&v->f.mu, NULL);
    pthread_cond_init(&v->f.cv, NULL);
    for (int r = 0; r < R_COUNT; r++) {
        v->f.objs[r] = json_object_new_array();
        v->f.down[r] = down[r];
    }
    add(&v->f, R_QUOTA, "a", "q1", NULL);
    add(&v->f, R_NAMESPACE, NULL, "a", "{\"team\":\"x\"}");
    add(&v->f, R_NAMESPACE, NULL, "b", NULL);
    v->api = (kube_api){.ctx = &v->f, .get = f_get, .list = f_list, .watch = f_watch};
    assert_int_equal(wh_kubestore_new(&v->api, &v->ks, &e), GQ_OK);
    assert_int_equal(http_metrics_new("test", &v->registry), GQ_OK);
    assert_int_equal(wh_metrics_new(v->registry, &v->m), GQ_OK);
    wh_kubestore_set_metrics(v->ks, v->m);
    assert_int_equal(wh_kubestore_start(v->ks, &e), GQ_OK);
    wh_kubestore_store(v->ks, &v->st);
    for (int i = 0; i < 5000 && !wh_kubestore_synced(v->ks); i++)
        usleep(1000);
    assert_true(wh_kubestore_synced(v->ks));
    pthread_mutex_lock(&v->f.mu);
    for (int r = 0; r < R_COUNT; r++)
        while (!down[r] && !v->f.opened[r])
            pthread_cond_wait(&v->f.cv, &v->f.mu);
    pthread_mutex_unlock(&v->f.mu);
    return v;
}

static void env_stop(env *v)
{
    wh_kubestore_free(v->ks);
    wh_metrics_free(v->m);
    http_metrics_free(v->registry);
    for (int r = 0; r < R_COUNT; r++) {
        json_object_put(v->f.objs[r]);
        json_object_put(v->f.event[r]);
    }
    pthread_mutex_destroy(&v->f.mu);
    pthread_cond_destroy(&v->f.cv);
    free(v);
}

/* The names in arr, sorted, comma-separated. */
static const char *names(json_object *arr, char *buf, size_t cap)
{
    const char *v[16];
    size_t n = json_object_array_length(arr);
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++)
        v[i] = meta(json_object_array_get_idx(arr, i), "name");
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
            const char *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? "," : "", v[i]);
    return buf;
}

/* The names the store lists for resource r (GPUQuotas or GPULimitRanges of
 * ns, every GPUTenantQuota), sorted, comma-separated. */
static const char *listed(env *v, int r, const char *ns, char *buf, size_t cap)
{
    json_object *arr = NULL;
    gq_err e;
    wh_list_kind k = r == R_QUOTA    ? WH_LIST_QUOTAS
                     : r == R_TENANT ? WH_LIST_TENANT_QUOTAS
                                     : WH_LIST_LIMIT_RANGES;
    gq_code rc = v->st.list(v->st.ctx, k, ns, &arr, &e);
    if (rc)
        fail_msg("list: %s", e.msg);
    names(arr, buf, cap);
    json_object_put(arr);
    return buf;
}

/* The labels of ns as JSON text, "null" when none. */
static const char *labels(env *v, const char *ns, char *buf, size_t cap)
{
    json_object *o = NULL;
    gq_err e;
    if (v->st.namespace_labels(v->st.ctx, ns, &o, &e))
        fail_msg("labels: %s", e.msg);
    snprintf(buf, cap, "%s",
             o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "null");
    json_object_put(o);
    return buf;
}

/* Established watches: the caches answer. Where a cache holds no GPUQuota
 * for the namespace (no GPUTenantQuota at all) it is asked live, so a quota
 * whose watch event has not arrived yet is enforced all the same; a scope
 * that has quotas, and limit ranges, wait for their watch events. */
static void fresh_caches_answer_and_empty_scopes_read_live(void **state)
{
    (void)state;
    static const int none[R_COUNT];
    env *v = env_start(none);
    char buf[256];
    /* Written after the caches listed; their watches do not deliver them. */
    add(&v->f, R_QUOTA, "a", "q2", NULL);
    add(&v->f, R_QUOTA, "b", "q3", NULL);
    add(&v->f, R_TENANT, NULL, "t1", NULL);
    add(&v->f, R_LIMITRANGE, "b", "l1", NULL);
    add(&v->f, R_NAMESPACE, NULL, "c", "{\"team\":\"y\"}");

    assert_string_equal(listed(v, R_QUOTA, "a", buf, sizeof(buf)), "q1");
    assert_int_equal(live(&v->f, R_QUOTA), 0);
    assert_string_equal(listed(v, R_QUOTA, "b", buf, sizeof(buf)), "q3");
    assert_int_equal(live(&v->f, R_QUOTA), 1);
    assert_string_equal(v->f.live_ns[R_QUOTA], "b");
    assert_string_equal(listed(v, R_TENANT, NULL, buf, sizeof(buf)), "t1");
    assert_int_equal(live(&v->f, R_TENANT), 1);
    assert_string_equal(listed(v, R_LIMITRANGE, "b", buf, sizeof(buf)), "");
    assert_int_equal(live(&v->f, R_LIMITRANGE), 0);

    assert_string_equal(labels(v, "a", buf, sizeof(buf)), "{\"team\":\"x\"}");
    assert_int_equal(live(&v->f, R_NAMESPACE), 0);
    assert_string_equal(labels(v, "c", buf, sizeof(buf)), "{\"team\":\"y\"}");
    assert_int_equal(live(&v->f, R_NAMESPACE), 1);
    assert_string_equal(labels(v, "gone", buf, sizeof(buf)), "null");
    assert_int_equal(live(&v->f, R_NAMESPACE), 2);

    /* Not a namespace name: nothing can live there, nothing is asked. */
    assert_string_equal(listed(v, R_QUOTA, "../x", buf, sizeof(buf)), "");
    assert_string_equal(listed(v, R_QUOTA, "", buf, sizeof(buf)), "");
    assert_string_equal(labels(v, "A/b", buf, sizeof(buf)), "null");
    assert_int_equal(live(&v->f, R_QUOTA), 1);
    assert_int_equal(live(&v->f, R_NAMESPACE), 2);

    /* The GPUQuota watch breaks (kube-apiserver restarts): from then on the
     * namespace's quotas are read live, q2 included, although its cache is
     * synced and still holds q1. */
    set_down(&v->f, R_QUOTA, 1);
    for (int i = 0; i < 5000 && strcmp(listed(v, R_QUOTA, "a", buf, sizeof(buf)), "q1,q2"); i++)
        usleep(1000);
    assert_string_equal(buf, "q1,q2");
    assert_string_equal(v->f.live_ns[R_QUOTA], "a");
    assert_true(wh_kubestore_synced(v->ks));
    env_stop(v);
}

/* A live read that finds a scope empty (no GPUQuota in a namespace, no
 * GPUTenantQuota at all) answers for that scope until its TTL runs out, as
 * Kubernetes' ResourceQuota admission keeps its live lookups; a quota the
 * watch delivers is answered from the cache at once; TTL 0 reads live
 * every time. */
static void empty_scopes_remembered_for_their_ttl(void **state)
{
    (void)state;
    static const int none[R_COUNT];
    env *v = env_start(none);
    char buf[256];
    wh_kubestore_set_empty_ttl(v->ks, 300);
    assert_string_equal(listed(v, R_QUOTA, "b", buf, sizeof(buf)), "");
    assert_string_equal(listed(v, R_TENANT, NULL, buf, sizeof(buf)), "");
    assert_int_equal(live(&v->f, R_QUOTA), 1);
    assert_int_equal(live(&v->f, R_TENANT), 1);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(listed(v, R_QUOTA, "b", buf, sizeof(buf)), "");
        assert_string_equal(listed(v, R_TENANT, NULL, buf, sizeof(buf)), "");
    }
    assert_int_equal(live(&v->f, R_QUOTA), 1);
    assert_int_equal(live(&v->f, R_TENANT), 1);
    /* Another namespace is a scope of its own. */
    assert_string_equal(listed(v, R_QUOTA, "c", buf, sizeof(buf)), "");
    assert_int_equal(live(&v->f, R_QUOTA), 2);
    assert_string_equal(v->f.live_ns[R_QUOTA], "c");
    /* Delivered by the watch: answered from the cache, nothing asked. */
    add(&v->f, R_QUOTA, "b", "q3", NULL);
    deliver(&v->f, R_QUOTA, KUBE_EVENT_ADDED, "q3");
    assert_string_equal(listed(v, R_QUOTA, "b", buf, sizeof(buf)), "q3");
    assert_int_equal(live(&v->f, R_QUOTA), 2);
    /* Not delivered: seen by the first live read after the TTL. */
    add(&v->f, R_TENANT, NULL, "t1", NULL);
    for (int i = 0; i < 5000 && strcmp(listed(v, R_TENANT, NULL, buf, sizeof(buf)), "t1"); i++)
        usleep(1000);
    assert_string_equal(buf, "t1");
    assert_int_equal(live(&v->f, R_TENANT), 2);
    /* TTL 0: every read of an empty scope goes out. */
    wh_kubestore_set_empty_ttl(v->ks, 0);
    assert_string_equal(listed(v, R_QUOTA, "d", buf, sizeof(buf)), "");
    assert_string_equal(listed(v, R_QUOTA, "d", buf, sizeof(buf)), "");
    assert_int_equal(live(&v->f, R_QUOTA), 4);
    env_stop(v);
}

/* Synced caches whose watches fail: every read is live. */
static void stale_caches_read_live(void **state)
{
    (void)state;
    static const int all[R_COUNT] = {1, 1, 1, 1};
    env *v = env_start(all);
    char buf[256];
    add(&v->f, R_QUOTA, "a", "q2", NULL);
    add(&v->f, R_LIMITRANGE, "a", "l1", NULL);
    add(&v->f, R_TENANT, NULL, "t1", NULL);
    add(&v->f, R_NAMESPACE, NULL, "c", NULL);

    assert_string_equal(listed(v, R_QUOTA, "a", buf, sizeof(buf)), "q1,q2");
    assert_string_equal(listed(v, R_QUOTA, "b", buf, sizeof(buf)), "");
    assert_int_equal(live(&v->f, R_QUOTA), 2);
    assert_string_equal(listed(v, R_LIMITRANGE, "a", buf, sizeof(buf)), "l1");
    assert_int_equal(live(&v->f, R_LIMITRANGE), 1);
    assert_string_equal(listed(v, R_TENANT, NULL, buf, sizeof(buf)), "t1");
    assert_int_equal(live(&v->f, R_TENANT), 1);
    assert_string_equal(labels(v, "a", buf, sizeof(buf)), "{\"team\":\"x\"}");
    assert_string_equal(labels(v, "c", buf, sizeof(buf)), "{}");
    assert_int_equal(live(&v->f, R_NAMESPACE), 2);
    env_stop(v);
}

/* A live read that fails is an error for the caller, which denies: never
 * an empty answer. */
static void failed_live_reads_fail_closed(void **state)
{
    (void)state;
    static const int all[R_COUNT] = {1, 1, 1, 1};
    env *v = env_start(all);
    json_object *o = NULL;
    gq_err e;
    pthread_mutex_lock(&v->f.mu);
    v->f.fail_live = GQ_EHTTP;
    pthread_mutex_unlock(&v->f.mu);
    assert_int_equal(v->st.list(v->st.ctx, WH_LIST_QUOTAS, "a", &o, &e), GQ_EHTTP);
    assert_string_equal(e.msg, "LIST gpuquotas: HTTP 503 Service Unavailable");
    assert_int_equal(v->st.list(v->st.ctx, WH_LIST_TENANT_QUOTAS, NULL, &o, &e), GQ_EHTTP);
    assert_int_equal(v->st.list(v->st.ctx, WH_LIST_LIMIT_RANGES, "a", &o, &e), GQ_EHTTP);
    assert_string_equal(e.msg, "LIST gpulimitranges: HTTP 503 Service Unavailable");
    assert_int_equal(v->st.namespace_labels(v->st.ctx, "a", &o, &e), GQ_EHTTP);
    assert_null(o);
    env_stop(v);
}

/* How many gpuquota_quota_used / _hard series of quota ns/name /metrics
 * shows. */
static int series(env *v, const char *ns, const char *name)
{
    char *text = NULL, label[128];
    size_t len;
    int n = 0;
    assert_int_equal(http_metrics_render(v->registry, &text, &len), GQ_OK);
    snprintf(label, sizeof(label), "{namespace=\"%s\",quota=\"%s\",", ns, name);
    for (const char *p = text; (p = strstr(p, label)); p++)
        n++;
    free(text);
    return n;
}

/* A deleted GPUQuota or GPUTenantQuota takes its gauges with it; the gauges
 * of the quotas that remain stay. */
static void deleted_quotas_drop_their_gauges(void **state)
{
    (void)state;
    static const int none[R_COUNT];
    env *v = env_start(none);
    add(&v->f, R_TENANT, NULL, "t1", NULL);
    deliver(&v->f, R_TENANT, KUBE_EVENT_ADDED, "t1");
    static const struct {
        const char *ns, *name;
    } quotas[] = {{"a", "q1"}, {"b", "q1"}, {"", "t1"}};
    for (size_t i = 0; i < sizeof(quotas) / sizeof(quotas[0]); i++)
        for (wh_quota_field fld = WH_QUOTA_USED; fld <= WH_QUOTA_HARD; fld++)
            assert_int_equal(
                wh_metrics_set_quota(v->m, fld, quotas[i].ns, quotas[i].name, "gpu-memory", 1024),
                GQ_OK);
    assert_int_equal(series(v, "a", "q1"), 2);
    assert_int_equal(series(v, "", "t1"), 2);

    deliver(&v->f, R_QUOTA, KUBE_EVENT_DELETED, "q1");
    assert_int_equal(series(v, "a", "q1"), 0);
    assert_int_equal(series(v, "b", "q1"), 2);
    assert_int_equal(series(v, "", "t1"), 2);

    deliver(&v->f, R_TENANT, KUBE_EVENT_DELETED, "t1");
    assert_int_equal(series(v, "", "t1"), 0);
    assert_int_equal(series(v, "b", "q1"), 2);
    env_stop(v);
}

typedef struct reader {
    pthread_t th;
    env *v;
    const char *ns;
    char got[64];
} reader;

static atomic_int readers_started; /* read_quotas threads that have begun */

static void *read_quotas(void *arg)
{
    reader *r = arg;
    atomic_fetch_add(&readers_started, 1);
    listed(r->v, R_QUOTA, r->ns, r->got, sizeof(r->got));
    return NULL;
}

/* Admissions that arrive together share a live read: while one is under
 * way, the next gathers everybody who comes meanwhile. None is answered by
 * a read sent before it asked, and scopes are not mixed. */
static void concurrent_live_reads_share_one_request(void **state)
{
    (void)state;
    static const int all[R_COUNT] = {1, 1, 1, 1};
    env *v = env_start(all);
    char buf[64];
    reader rd[33];
    add(&v->f, R_QUOTA, "a", "q2", NULL);
    add(&v->f, R_QUOTA, "b", "q3", NULL);
    pthread_mutex_lock(&v->f.mu);
    v->f.hold_live = 1;
    pthread_mutex_unlock(&v->f.mu);
    /* The first read goes out and is held there. */
    atomic_store(&readers_started, 0);
    rd[0] = (reader){.v = v, .ns = "a"};
    assert_int_equal(pthread_create(&rd[0].th, NULL, read_quotas, &rd[0]), 0);
    pthread_mutex_lock(&v->f.mu);
    while (v->f.held < 1)
        pthread_cond_wait(&v->f.cv, &v->f.mu);
    pthread_mutex_unlock(&v->f.mu);
    /* A quota written now must be seen by everybody who asks from now on. */
    add(&v->f, R_QUOTA, "a", "q4", NULL);
    for (int i = 1; i < 33; i++) {
        rd[i] = (reader){.v = v, .ns = i == 32 ? "b" : "a"};
        assert_int_equal(pthread_create(&rd[i].th, NULL, read_quotas, &rd[i]), 0);
    }
    /* let them queue: all running (thread starts lag on a loaded machine),
     * then time to take the store's lock and join the read that gathers */
    while (atomic_load(&readers_started) < 33)
        usleep(1000);
    usleep(100000);
    pthread_mutex_lock(&v->f.mu);
    v->f.hold_live = 0;
    pthread_cond_broadcast(&v->f.cv);
    pthread_mutex_unlock(&v->f.mu);
    for (int i = 0; i < 33; i++)
        pthread_join(rd[i].th, NULL);
    assert_string_equal(rd[0].got, "q1,q2"); /* sent before q4 was written */
    for (int i = 1; i < 32; i++)
        assert_string_equal(rd[i].got, "q1,q2,q4");
    assert_string_equal(rd[32].got, "q3");
    /* a: the held read and, about, one for the 31 that came meanwhile; b: one */
    int n = live(&v->f, R_QUOTA);
    if (n > 5)
        fail_msg("%d live reads for 32 admissions in 2 namespaces", n);
    assert_string_equal(listed(v, R_QUOTA, "a", buf, sizeof(buf)), "q1,q2,q4");
    env_stop(v);
}

/* ---- pod-group members ---------------------------------------------------- */

static struct {
    unsigned calls;
    char path[128], selector[128];
    unsigned page_size;
    size_t n_items; /* copies of the pod below handed to the caller */
    gq_code fail;
} pods_api;

static gq_code pods_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                         void *ud, char **rv_out, gq_err *err)
{
    (void)ctx;
    assert_null(rv_out); /* a quorum read */
    pods_api.calls++;
    snprintf(pods_api.path, sizeof(pods_api.path), "%s", path);
    snprintf(pods_api.selector, sizeof(pods_api.selector), "%s",
             o && o->label_selector ? o->label_selector : "");
    pods_api.page_size = o ? o->page_size : 0;
    if (pods_api.fail)
        return gq_err_set(err, pods_api.fail, "LIST pods: HTTP 403 Forbidden");
    json_object *pod = json_tokener_parse(
        "{\"metadata\":{\"name\":\"train-0\",\"namespace\":\"a\",\"uid\":\"u\","
        "\"labels\":{\"gpuquota.io/pod-group\":\"train\",\"app\":\"x\"},"
        "\"annotations\":{\"gpuquota.io/pod-group-size\":\"3\",\"note\":\"y\"},"
        "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\",\"deletionGracePeriodSeconds\":30},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]},"
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\"}}");
    assert_non_null(pod);
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < pods_api.n_items && !rc; i++)
        rc = fn(ud, pod, err);
    json_object_put(pod);
    return rc;
}

static void group_pods_listed_by_label(void **state)
{
    (void)state;
    kube_api api = {.list = pods_list};
    wh_kubestore *ks = NULL;
    wh_store st;
    gq_err e;
    json_object *arr = NULL;
    assert_int_equal(wh_kubestore_new(&api, &ks, &e), GQ_OK);
    wh_kubestore_store(ks, &st);
    assert_non_null(st.list_group_pods);
    memset(&pods_api, 0, sizeof(pods_api));

    /* One LIST of the group's GPU pods (gpuquota labels them managed), in
     * small pages; each pod trimmed to what the comparison reads. */
    pods_api.n_items = 2;
    assert_int_equal(st.list_group_pods(st.ctx, "a", "train", &arr, &e), GQ_OK);
    assert_string_equal(pods_api.path, "/api/v1/namespaces/a/pods");
    assert_string_equal(pods_api.selector, "gpuquota.io/pod-group=train,gpuquota.io/managed=true");
    assert_int_equal(pods_api.page_size, 20);
    assert_int_equal(json_object_array_length(arr), 2);
    assert_string_equal(
        json_object_to_json_string_ext(json_object_array_get_idx(arr, 0),
                                       JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
        "{\"metadata\":{\"name\":\"train-0\",\"deletionTimestamp\":\"2026-01-"
        "01T00:00:00Z\",\"deletionGracePeriodSeconds\":30,\"labels\":{"
        "\"gpuquota.io/pod-group\":\"train\"},\"annotations\":{\"gpuquota.io/"
        "pod-group-size\":\"3\"}},\"status\":{\"phase\":\"Running\"}}");
    json_object_put(arr);

    /* Bounded: a flood of labelled pods is cut, not held whole. */
    pods_api.n_items = 3 * GQ_POD_GROUP_MAX;
    arr = NULL;
    assert_int_equal(st.list_group_pods(st.ctx, "a", "train", &arr, &e), GQ_OK);
    assert_int_equal(json_object_array_length(arr), 2 * GQ_POD_GROUP_MAX);
    json_object_put(arr);

    /* Nothing that is not a label value (or a namespace name) goes into
     * the request. */
    static const char *const bad[] = {"",     "a b", "a,b", "x=y",  "-x", "x-",
                                      "a!=b", "a/b", "ä",   "a\nb", "x)"};
    unsigned calls = pods_api.calls;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        arr = NULL;
        assert_int_equal(st.list_group_pods(st.ctx, "a", bad[i], &arr, &e), GQ_EINVAL);
        assert_null(arr);
    }
    char longv[GQ_POD_GROUP_NAME_MAX + 2];
    memset(longv, 'a', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    assert_int_equal(st.list_group_pods(st.ctx, "a", longv, &arr, &e), GQ_EINVAL);
    longv[GQ_POD_GROUP_NAME_MAX] = '\0';
    assert_int_equal(st.list_group_pods(st.ctx, "A/b", "train", &arr, &e), GQ_EINVAL);
    assert_int_equal(pods_api.calls, calls);
    pods_api.n_items = 0;
    assert_int_equal(st.list_group_pods(st.ctx, "a", "A.b_c-9", &arr, &e), GQ_OK);
    assert_string_equal(pods_api.selector,
                        "gpuquota.io/pod-group=A.b_c-9,gpuquota.io/managed=true");
    json_object_put(arr);
    arr = NULL;
    assert_int_equal(st.list_group_pods(st.ctx, "a", longv, &arr, &e), GQ_OK);
    json_object_put(arr);

    /* A failed LIST is the caller's error (it denies: fail closed). */
    pods_api.fail = GQ_EHTTP;
    arr = NULL;
    assert_int_equal(st.list_group_pods(st.ctx, "a", "train", &arr, &e), GQ_EHTTP);
    assert_null(arr);
    assert_string_equal(e.msg, "LIST pods: HTTP 403 Forbidden");
    wh_kubestore_free(ks);
}

/* The one GPUTenantQuota the store lists, as compact JSON text. */
static const char *tenant_text(env *v, char *buf, size_t cap)
{
    json_object *arr = NULL;
    gq_err e;
    if (v->st.list(v->st.ctx, WH_LIST_TENANT_QUOTAS, NULL, &arr, &e))
        fail_msg("list: %s", e.msg);
    assert_int_equal(json_object_array_length(arr), 1);
    snprintf(
        buf, cap, "%s",
        json_object_to_json_string_ext(json_object_array_get_idx(arr, 0),
                                       JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(arr);
    return buf;
}

/* The record records_leave_out_what_nothing_reads expects, at resourceVersion rv. */
static const char *lean_t1(char *buf, size_t cap, const char *rv)
{
    snprintf(
        buf, cap,
        "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
        "\"spec\":{\"namespaces\":[\"a\"],\"hard\":{\"gpu-memory\":\"8Gi\"}},"
        "\"metadata\":{\"name\":\"t1\",\"uid\":\"u1\",\"resourceVersion\":\"%s\",\"generation\":2,"
        "\"labels\":{\"a\":\"b\"},\"annotations\":{\"note\":\"x\"}}}",
        rv);
    return buf;
}

/* Records keep what the quota parsers read and drop what every admission
 * would otherwise parse for nothing: status, metadata.managedFields (a
 * GPUTenantQuota's names every namespace of its status) and kubectl's
 * last-applied-configuration annotation; other annotations stay. The same
 * from a live read and from the cache. */
static void records_leave_out_what_nothing_reads(void **state)
{
    (void)state;
    static const int none[R_COUNT];
    env *v = env_start(none);
    char buf[1024];
    json_object *o = json_tokener_parse(
        "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
        "\"metadata\":{\"name\":\"t1\",\"uid\":\"u1\",\"resourceVersion\":\"5\",\"generation\":2,"
        "\"labels\":{\"a\":\"b\"},\"annotations\":{\"kubectl.kubernetes.io/"
        "last-applied-configuration\":\"{\\\"kind\\\":\\\"GPUTenantQuota\\\"}\",\"note\":\"x\"},"
        "\"managedFields\":[{\"manager\":\"gpuquota\",\"fieldsV1\":{\"f:status\":{}}}]},"
        "\"spec\":{\"namespaces\":[\"a\"],\"hard\":{\"gpu-memory\":\"8Gi\"}},"
        "\"status\":{\"used\":{\"gpu-memory\":\"1Gi\"},\"namespaces\":[{\"namespace\":\"a\"}]}}");
    assert_non_null(o);
    pthread_mutex_lock(&v->f.mu);
    json_object_array_add(v->f.objs[R_TENANT], o);
    pthread_mutex_unlock(&v->f.mu);
    char exp[1024];
    assert_string_equal(tenant_text(v, buf, sizeof(buf)), lean_t1(exp, sizeof(exp), "5"));
    assert_int_equal(live(&v->f, R_TENANT), 1);
    deliver(&v->f, R_TENANT, KUBE_EVENT_ADDED, "t1");
    const char *rv = strstr(tenant_text(v, buf, sizeof(buf)), "\"resourceVersion\":\"");
    assert_non_null(rv);
    assert_int_equal(live(&v->f, R_TENANT), 1); /* from the cache now */
    char got_rv[16];
    assert_int_equal(sscanf(rv, "\"resourceVersion\":\"%15[0-9]\"", got_rv), 1);
    assert_string_equal(buf, lean_t1(exp, sizeof(exp), got_rv));
    env_stop(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fresh_caches_answer_and_empty_scopes_read_live),
        cmocka_unit_test(empty_scopes_remembered_for_their_ttl),
        cmocka_unit_test(stale_caches_read_live),
        cmocka_unit_test(failed_live_reads_fail_closed),
        cmocka_unit_test(concurrent_live_reads_share_one_request),
        cmocka_unit_test(group_pods_listed_by_label),
        cmocka_unit_test(deleted_quotas_drop_their_gauges),
        cmocka_unit_test(records_leave_out_what_nothing_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
