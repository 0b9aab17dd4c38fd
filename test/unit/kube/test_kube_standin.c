/* Integration tests of kube/ against the kube-apiserver stand-in: every verb,
 * pagination, watch, the cache, leader election, token rotation (token files
 * and credential plugins), TLS and the stand-in's fault injection. Usage:
 * test_kube_standin STANDIN_BINARY (exits 77, "skipped", when the binary
 * does not exist). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "support/standin_proc.h"

#define TLS GQ_TEST_DATA "/tls/"

static const char *standin_bin;
static standin_proc plain;
static char token_path[256];
static kube_client *cli;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static kube_client *client_for(const char *server, const char *token_file, const char *ca_file)
{
    kube_config cfg = {.server = (char *)server,
                       .namespace_ = "default",
                       .token_file = (char *)token_file,
                       .ca_file = (char *)ca_file};
    kube_client *c = NULL;
    gq_err e;
    gq_code rc = kube_client_new(&cfg, NULL, &c, &e);
    if (rc)
        fail_msg("kube_client_new: %s", e.msg);
    return c;
}

static int create_namespaces(kube_client *c);

static int group_setup(void **state)
{
    snprintf(token_path, sizeof(token_path), "/tmp/kube-standin-token-%d", (int)getpid());
    write_file(token_path, "token-one\n");
    const char *extra[] = {"--token-file", token_path, NULL};
    if (standin_start(&plain, standin_bin, extra, 0) != 0)
        return -1;
    cli = client_for(plain.url, token_path, NULL);
    return create_namespaces(cli);
}

static int group_teardown(void **state)
{
    kube_client_free(cli);
    standin_stop(&plain);
    unlink(token_path);
    return 0;
}

static void post_fault(const char *json)
{
    json_object *body = json_tokener_parse(json);
    assert_non_null(body);
    gq_err e;
    gq_code rc = kube_create(cli, "/standin/faults", body, NULL, NULL, &e);
    json_object_put(body);
    if (rc)
        fail_msg("POST /standin/faults %s: %s", json, e.msg);
}

/* Clear faults (objects stay: each test uses namespaces of its own). */
static int reset_standin(void **state)
{
    gq_err e;
    json_object *body = json_object_new_object();
    gq_code rc = kube_create(cli, "/standin/reset", body, NULL, NULL, &e);
    json_object_put(body);
    return rc ? -1 : 0;
}

static int create_namespaces(kube_client *c)
{
    static const char *const names[] = {"verbs", "faults", "tok",   "many",       "w",
                                        "wc",    "cache",  "bench", "gpu-system", "fresh"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"%s\"}}", names[i]);
        json_object *ns = json_tokener_parse(buf);
        gq_err e;
        gq_code rc = kube_create(c, "/api/v1/namespaces", ns, NULL, NULL, &e);
        json_object_put(ns);
        if (rc && rc != GQ_EEXISTS)
            return -1;
    }
    return 0;
}

static json_object *make_pod(const char *ns, const char *name, const char *app)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"%s\",\"labels\":{\"app\":\"%s\"}},\"spec\":{\"containers\":"
             "[{\"name\":\"c\",\"image\":\"busybox\"}]}}",
             name, ns, app);
    return json_tokener_parse(buf);
}

static const char *str_at(json_object *o, const char *a, const char *b)
{
    json_object *v;
    if (!json_object_object_get_ex(o, a, &v) || (b && !json_object_object_get_ex(v, b, &v)))
        return NULL;
    return json_object_get_string(v);
}

static gq_code create_pod(kube_client *c, const char *ns, const char *name, const char *app,
                          gq_err *e)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
    json_object *p = make_pod(ns, name, app);
    gq_code rc = kube_create(c, path, p, NULL, NULL, e);
    json_object_put(p);
    return rc;
}

/* ---- verbs ---- */

static void verbs_round_trip(void **state)
{
    gq_err e;
    json_object *obj = NULL, *got = NULL, *out = NULL;
    const char *coll = "/api/v1/namespaces/verbs/pods", *path = "/api/v1/namespaces/verbs/pods/p1";

    obj = make_pod("verbs", "p1", "web");
    assert_int_equal(kube_create(cli, coll, obj, NULL, &out, &e), GQ_OK);
    assert_string_equal(str_at(out, "metadata", "name"), "p1");
    assert_non_null(str_at(out, "metadata", "resourceVersion"));
    json_object_put(out);
    /* A second create is AlreadyExists, distinct from a conflict. */
    assert_int_equal(kube_create(cli, coll, obj, NULL, NULL, &e), GQ_EEXISTS);
    json_object_put(obj);

    assert_int_equal(kube_get(cli, path, NULL, &got, &e), GQ_OK);
    char rv[64];
    snprintf(rv, sizeof(rv), "%s", str_at(got, "metadata", "resourceVersion"));

    /* PUT with the current resourceVersion succeeds and bumps it. */
    json_object *labels;
    json_object_object_get_ex(json_object_object_get(got, "metadata"), "labels", &labels);
    json_object_object_add(labels, "tier", json_object_new_string("gold"));
    assert_int_equal(kube_update(cli, path, got, NULL, &out, &e), GQ_OK);
    assert_string_not_equal(str_at(out, "metadata", "resourceVersion"), rv);
    json_object_put(out);
    /* The same stale body again: 409 Conflict. */
    assert_int_equal(kube_update(cli, path, got, NULL, NULL, &e), GQ_ECONFLICT);
    assert_non_null(strstr(e.msg, "PUT /api/v1/namespaces/verbs/pods/p1: HTTP 409 Conflict"));
    json_object_put(got);

    /* Status subresource with resourceVersion. */
    assert_int_equal(kube_get(cli, path, NULL, &got, &e), GQ_OK);
    json_object_object_add(got, "status",
                           json_tokener_parse("{\"phase\":\"Running\",\"podIP\":\"10.0.0.9\"}"));
    assert_int_equal(kube_update_status(cli, path, got, NULL, &out, &e), GQ_OK);
    assert_string_equal(str_at(out, "status", "phase"), "Running");
    json_object_put(out);
    assert_int_equal(kube_update_status(cli, path, got, NULL, NULL, &e), GQ_ECONFLICT);
    json_object_put(got);

    /* JSON merge patch: null deletes a key, other keys merge. */
    json_object *patch =
        json_tokener_parse("{\"metadata\":{\"labels\":{\"tier\":null,\"team\":\"a\"}}}");
    assert_int_equal(kube_patch_merge(cli, path, patch, NULL, &out, &e), GQ_OK);
    json_object_put(patch);
    json_object *l = json_object_object_get(json_object_object_get(out, "metadata"), "labels");
    assert_string_equal(json_object_get_string(json_object_object_get(l, "team")), "a");
    assert_string_equal(json_object_get_string(json_object_object_get(l, "app")), "web");
    assert_null(json_object_object_get(l, "tier"));
    json_object_put(out);

    assert_int_equal(kube_delete(cli, path, NULL, &e), GQ_OK);
    assert_int_equal(kube_get(cli, path, NULL, &got, &e), GQ_ENOTFOUND);
    assert_int_equal(kube_delete(cli, path, NULL, &e), GQ_ENOTFOUND);
    assert_non_null(strstr(e.msg, "HTTP 404 NotFound"));
}

/* ---- many threads charging one object (the webhook's pattern) ---- */

static void *charge_thread(void *arg)
{
    const char *path = "/api/v1/namespaces/verbs/pods/counter";
    for (int i = 0; i < 25; i++) {
        for (;;) { /* read, modify, write with resourceVersion; re-read on 409 */
            gq_err e;
            json_object *obj = NULL;
            if (kube_get(cli, path, NULL, &obj, &e) != GQ_OK)
                return (void *)1;
            json_object *st = json_object_object_get(obj, "status");
            const char *m = st ? str_at(obj, "status", "message") : NULL;
            long n = m ? strtol(m, NULL, 10) : 0;
            char buf[32];
            snprintf(buf, sizeof(buf), "%ld", n + 1);
            json_object *nst = json_object_new_object();
            json_object_object_add(nst, "message", json_object_new_string(buf));
            json_object_object_add(obj, "status", nst);
            gq_code rc = kube_update_status(cli, path, obj, NULL, NULL, &e);
            json_object_put(obj);
            if (rc == GQ_OK)
                break;
            if (rc != GQ_ECONFLICT)
                return (void *)2;
        }
    }
    return NULL;
}

static void concurrent_status_writes_lose_nothing(void **state)
{
    gq_err e;
    assert_int_equal(create_pod(cli, "verbs", "counter", "x", &e), GQ_OK);
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, charge_thread, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    json_object *obj = NULL;
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/verbs/pods/counter", NULL, &obj, &e), GQ_OK);
    assert_string_equal(str_at(obj, "status", "message"), "200");
    json_object_put(obj);
}

/* ---- faults: retries, conflicts ---- */

static void retry_after_500_only_when_asked(void **state)
{
    gq_err e;
    json_object *got = NULL;
    gq_err_clear(&e);
    assert_int_equal(create_pod(cli, "faults", "r1", "x", &e), GQ_OK);
    post_fault("{\"fail\":{\"count\":2,\"code\":500,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/faults/pods\"}}");
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/faults/pods/r1", NULL, &got, &e), GQ_EHTTP);
    assert_non_null(strstr(e.msg, "HTTP 500"));
    kube_call_opts retry = {.retries = 3, .retry_delay_ms = 10};
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/faults/pods/r1", &retry, &got, &e), GQ_OK);
    assert_string_equal(str_at(got, "metadata", "name"), "r1");
    json_object_put(got);

    /* Retries run out. */
    post_fault("{\"fail\":{\"count\":5,\"code\":503,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/faults/pods\"}}");
    kube_call_opts two = {.retries = 2, .retry_delay_ms = 10};
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/faults/pods/r1", &two, &got, &e), GQ_EHTTP);
    assert_non_null(strstr(e.msg, "HTTP 503"));
    /* 404 is never retried. */
    kube_call_opts many = {.retries = 5, .retry_delay_ms = 1000};
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/faults/pods/none", &many, &got, &e),
                     GQ_ENOTFOUND);
}

static void conflict_status_injected(void **state)
{
    gq_err e;
    json_object *got = NULL;
    assert_int_equal(create_pod(cli, "faults", "c1", "x", &e), GQ_OK);
    const char *path = "/api/v1/namespaces/faults/pods/c1";
    assert_int_equal(kube_get(cli, path, NULL, &got, &e), GQ_OK);
    post_fault("{\"conflictStatus\":1}");
    assert_int_equal(kube_update_status(cli, path, got, NULL, NULL, &e), GQ_ECONFLICT);
    assert_int_equal(kube_update_status(cli, path, got, NULL, NULL, &e), GQ_OK);
    json_object_put(got);
}

static void latency_and_timeout(void **state)
{
    gq_err e;
    json_object *got = NULL;
    assert_int_equal(create_pod(cli, "faults", "t1", "x", &e), GQ_OK);
    post_fault("{\"latencyMs\":400}");
    kube_call_opts quick = {.timeout_ms = 100};
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/faults/pods/t1", &quick, &got, &e),
                     GQ_ETIMEOUT);
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/faults/pods/t1", NULL, &got, &e), GQ_OK);
    json_object_put(got);
}

/* ---- list ---- */

typedef struct counter {
    size_t n;
    size_t web;
} counter;

static gq_code count_item(void *ud, json_object *item, gq_err *err)
{
    counter *c = ud;
    c->n++;
    const char *app = NULL;
    json_object *m, *l, *a;
    if (json_object_object_get_ex(item, "metadata", &m) &&
        json_object_object_get_ex(m, "labels", &l) && json_object_object_get_ex(l, "app", &a))
        app = json_object_get_string(a);
    if (app && !strcmp(app, "web"))
        c->web++;
    return GQ_OK;
}

typedef struct creator {
    int from, to;
    const char *ns;
} creator;

static void *create_range(void *arg)
{
    creator *cr = arg;
    for (int i = cr->from; i < cr->to; i++) {
        char name[32];
        gq_err e;
        snprintf(name, sizeof(name), "pod-%05d", i);
        if (create_pod(cli, cr->ns, name, i % 3 == 0 ? "web" : "db", &e) != GQ_OK)
            return (void *)1;
    }
    return NULL;
}

static void list_paginates(void **state)
{
    /* 3000 pods created from four threads through one client. */
    pthread_t th[4];
    creator cr[4];
    for (int i = 0; i < 4; i++) {
        cr[i] = (creator){i * 750, (i + 1) * 750, "many"};
        assert_int_equal(pthread_create(&th[i], NULL, create_range, &cr[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    counter c = {0};
    char *rv = NULL;
    gq_err e;
    kube_list_opts lo = {.page_size = 128};
    assert_int_equal(kube_list(cli, "/api/v1/namespaces/many/pods", &lo, count_item, &c, &rv, &e),
                     GQ_OK);
    assert_int_equal(c.n, 3000);
    assert_int_equal(c.web, 1000);
    assert_non_null(rv);
    assert_true(rv[0] != '\0');
    free(rv);

    counter w = {0};
    kube_list_opts sel = {.label_selector = "app=web", .page_size = 300};
    assert_int_equal(kube_list(cli, "/api/v1/namespaces/many/pods", &sel, count_item, &w, NULL, &e),
                     GQ_OK);
    assert_int_equal(w.n, 1000);
    assert_int_equal(w.web, 1000);

    /* A failure on a later page surfaces (and would be retried if asked). */
    counter f = {0};
    post_fault("{\"fail\":{\"count\":1,\"code\":500,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/many/pods\"}}");
    assert_int_equal(kube_list(cli, "/api/v1/namespaces/many/pods", &lo, count_item, &f, NULL, &e),
                     GQ_EHTTP);
    kube_call_opts retry = {.retries = 2, .retry_delay_ms = 10};
    kube_list_opts lr = {.page_size = 1000, .call = &retry};
    counter g = {0};
    post_fault("{\"fail\":{\"count\":1,\"code\":500,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/many/pods\"}}");
    assert_int_equal(kube_list(cli, "/api/v1/namespaces/many/pods", &lr, count_item, &g, NULL, &e),
                     GQ_OK);
    assert_int_equal(g.n, 3000);
}

/* Items in list order, with a fault posted or a stop asked at one of them. */
typedef struct ordered {
    size_t n, fault_at, stop_at;
    char last[64];
    int out_of_order;
    int with_image, with_name, with_labels; /* containers[0].image, .name; metadata.labels */
} ordered;

static void count_fields(ordered *o, json_object *item)
{
    json_object *spec, *cs, *c0, *v, *m;
    if (json_object_object_get_ex(item, "spec", &spec) &&
        json_object_object_get_ex(spec, "containers", &cs) &&
        (c0 = json_object_array_get_idx(cs, 0))) {
        o->with_image += json_object_object_get_ex(c0, "image", &v);
        o->with_name += json_object_object_get_ex(c0, "name", &v);
    }
    o->with_labels += json_object_object_get_ex(item, "metadata", &m) &&
                      json_object_object_get_ex(m, "labels", &v);
}

static gq_code order_item(void *ud, json_object *item, gq_err *err)
{
    ordered *o = ud;
    json_object *m, *nm;
    const char *name =
        json_object_object_get_ex(item, "metadata", &m) && json_object_object_get_ex(m, "name", &nm)
            ? json_object_get_string(nm)
            : "";
    if (o->n && strcmp(o->last, name) >= 0)
        o->out_of_order++;
    snprintf(o->last, sizeof o->last, "%s", name);
    if (o->n == o->stop_at)
        return gq_err_set(err, GQ_ECONFLICT, "stopped by the caller at %zu", o->n);
    if (o->n == o->fault_at)
        post_fault("{\"fail\":{\"count\":1,\"code\":500,\"method\":\"GET\","
                   "\"pathPrefix\":\"/api/v1/namespaces/many/pods\"}}");
    count_fields(o, item);
    o->n++;
    return GQ_OK;
}

/* The next page is fetched while this one's items go to the caller: items
 * keep the list's order; the caller's error stops the list as it is, with
 * a page in flight; a page fetched in advance that fails fails the list.
 * Runs after list_paginates (3000 pods in "many"). */
static void list_fetches_ahead(void **state)
{
    (void)state;
    static const char *const prune[] = {"spec/containers/*/image", "status"};
    kube_list_opts lo = {.page_size = 128}, lp = {.page_size = 128, .prune = prune, .n_prune = 2};
    /* Posted while page 2 is handed over (item 255), the fault fails page 3
     * (already asked for, or asked just after) or page 4, and the list. */
    struct {
        const kube_list_opts *o;
        size_t fault_at, stop_at;
        gq_code rc;
        size_t min_n, max_n;
        int images; /* items whose container kept its image */
    } cases[] = {
        {&lo, SIZE_MAX, SIZE_MAX, GQ_OK, 3000, 3000, 3000},
        /* What the caller prunes is left out of every item, and only that. */
        {&lp, SIZE_MAX, SIZE_MAX, GQ_OK, 3000, 3000, 0},
        {&lo, SIZE_MAX, 300, GQ_ECONFLICT, 300, 300, 300},
        {&lo, 255, SIZE_MAX, GQ_EHTTP, 256, 384, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gq_err e;
        ordered o = {.fault_at = cases[i].fault_at, .stop_at = cases[i].stop_at};
        assert_int_equal(
            kube_list(cli, "/api/v1/namespaces/many/pods", cases[i].o, order_item, &o, NULL, &e),
            cases[i].rc);
        assert_true(o.n >= cases[i].min_n && o.n <= cases[i].max_n);
        assert_int_equal(o.out_of_order, 0);
        assert_int_equal(o.with_name, (int)o.n);
        assert_int_equal(o.with_labels, (int)o.n);
        if (cases[i].images >= 0)
            assert_int_equal(o.with_image, cases[i].images);
        if (cases[i].rc == GQ_ECONFLICT)
            assert_string_equal(e.msg, "stopped by the caller at 300");
    }
}

/* ---- watch ---- */

typedef struct wlog {
    pthread_mutex_t mu;
    char text[8192];
    size_t len;
    int n;
    char last_rv[64];
    int opens;     /* on_open calls */
    int n_at_open; /* events before the (last) on_open */
} wlog;

static void wlog_open(void *ud)
{
    wlog *l = ud;
    pthread_mutex_lock(&l->mu);
    l->opens++;
    l->n_at_open = l->n;
    pthread_mutex_unlock(&l->mu);
}

static int wlog_opens(wlog *l)
{
    pthread_mutex_lock(&l->mu);
    int n = l->opens;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static gq_code wlog_event(void *ud, kube_event_type t, json_object *obj, gq_err *err)
{
    wlog *l = ud;
    pthread_mutex_lock(&l->mu);
    if (t == KUBE_EVENT_BOOKMARK) { /* periodic: only its resourceVersion matters */
        snprintf(l->last_rv, sizeof(l->last_rv), "%s", str_at(obj, "metadata", "resourceVersion"));
        pthread_mutex_unlock(&l->mu);
        return GQ_OK;
    }
    const char *name = str_at(obj, "metadata", "name");
    const char *rv = str_at(obj, "metadata", "resourceVersion");
    int w = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s %s;", kube_event_type_name(t),
                     t == KUBE_EVENT_ERROR ? str_at(obj, "reason", NULL)
                     : name                ? name
                                           : "-");
    if (w > 0 && (size_t)w < sizeof(l->text) - l->len)
        l->len += (size_t)w;
    if (rv)
        snprintf(l->last_rv, sizeof(l->last_rv), "%s", rv);
    l->n++;
    pthread_mutex_unlock(&l->mu);
    return GQ_OK;
}

typedef struct watcher {
    pthread_t th;
    const char *path;
    kube_watch_opts o;
    atomic_int stop;
    wlog log;
    gq_code rc;
    gq_err err;
} watcher;

static void *watch_thread(void *arg)
{
    watcher *w = arg;
    w->rc = kube_watch(cli, w->path, &w->o, wlog_event, &w->log, &w->err);
    return NULL;
}

static void watcher_start(watcher *w, const char *path, const char *rv)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->log.mu, NULL);
    w->path = path;
    w->o.resource_version = rv;
    w->o.allow_bookmarks = 1;
    w->o.stop = &w->stop;
    w->o.on_open = wlog_open;
    assert_int_equal(pthread_create(&w->th, NULL, watch_thread, w), 0);
}

/* Poll (5 s at most) until the watch has its response headers. */
static int wait_open(watcher *w)
{
    for (int i = 0; i < 5000 && !wlog_opens(&w->log); i++)
        usleep(1000);
    return wlog_opens(&w->log);
}

static int wait_events(watcher *w, int n, long ms)
{
    for (long i = 0; i < ms; i++) {
        pthread_mutex_lock(&w->log.mu);
        int got = w->log.n;
        pthread_mutex_unlock(&w->log.mu);
        if (got >= n)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void list_rv(const char *path, char *rv, size_t cap)
{
    counter c = {0};
    char *r = NULL;
    gq_err e;
    assert_int_equal(kube_list(cli, path, NULL, count_item, &c, &r, &e), GQ_OK);
    snprintf(rv, cap, "%s", r);
    free(r);
}

static void watch_events_and_stop(void **state)
{
    gq_err e;
    char rv[64];
    const char *coll = "/api/v1/namespaces/w/pods";
    list_rv(coll, rv, sizeof(rv));
    watcher w;
    watcher_start(&w, coll, rv);
    assert_true(wait_open(&w));
    assert_int_equal(create_pod(cli, "w", "a", "x", &e), GQ_OK);
    json_object *patch = json_tokener_parse("{\"metadata\":{\"labels\":{\"v\":\"2\"}}}");
    assert_int_equal(kube_patch_merge(cli, "/api/v1/namespaces/w/pods/a", patch, NULL, NULL, &e),
                     GQ_OK);
    json_object_put(patch);
    assert_int_equal(kube_delete(cli, "/api/v1/namespaces/w/pods/a", NULL, &e), GQ_OK);
    assert_true(wait_events(&w, 3, 5000));
    atomic_store(&w.stop, 1);
    pthread_join(w.th, NULL);
    assert_int_equal(w.rc, GQ_OK);
    pthread_mutex_lock(&w.log.mu);
    assert_string_equal(w.log.text, "ADDED a;MODIFIED a;DELETED a;");
    /* on_open came once, before any event. */
    assert_int_equal(w.log.opens, 1);
    assert_int_equal(w.log.n_at_open, 0);
    pthread_mutex_unlock(&w.log.mu);

    /* A quiet watch (no events, no bookmarks) is known to be open from the
     * response headers alone. */
    watcher q;
    list_rv(coll, rv, sizeof(rv));
    memset(&q, 0, sizeof(q));
    pthread_mutex_init(&q.log.mu, NULL);
    q.path = coll;
    q.o = (kube_watch_opts){.resource_version = rv, .stop = &q.stop, .on_open = wlog_open};
    assert_int_equal(pthread_create(&q.th, NULL, watch_thread, &q), 0);
    assert_int_equal(wait_open(&q), 1);
    atomic_store(&q.stop, 1);
    pthread_join(q.th, NULL);
    assert_int_equal(q.rc, GQ_OK);
    assert_int_equal(q.log.n, 0);
}

static void watch_cut_and_gone(void **state)
{
    gq_err e;
    char rv[64];
    const char *coll = "/api/v1/namespaces/wc/pods";
    list_rv(coll, rv, sizeof(rv));
    /* The stream is cut after two events: the watch ends with an I/O error. */
    post_fault("{\"cutWatchAfter\":2}");
    watcher w;
    watcher_start(&w, coll, rv);
    assert_true(wait_open(&w));
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c%d", i);
        assert_int_equal(create_pod(cli, "wc", name, "x", &e), GQ_OK);
    }
    pthread_join(w.th, NULL);
    assert_int_equal(w.log.n, 2);
    assert_true(w.rc == GQ_EIO || w.rc == GQ_OK);

    /* watchGone: the stream carries an ERROR 410 Status event, handed to
     * the caller like any other event. */
    post_fault("{\"cutWatchAfter\":0}");
    post_fault("{\"watchGone\":1}");
    watcher g;
    watcher_start(&g, coll, rv);
    assert_true(wait_events(&g, 1, 5000));
    atomic_store(&g.stop, 1);
    pthread_join(g.th, NULL);
    assert_int_equal(g.rc, GQ_OK);
    assert_string_equal(g.log.text, "ERROR Expired;");
    assert_int_equal(g.log.opens, 1); /* the 200 came first: see KUBE_CACHE_SETTLE_MS */

    /* HTTP 410 answering the watch request itself: GQ_EGONE. */
    post_fault("{\"fail\":{\"count\":1,\"code\":410,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/wc/pods\"}}");
    watcher h;
    watcher_start(&h, coll, rv);
    pthread_join(h.th, NULL);
    assert_int_equal(h.rc, GQ_EGONE);
    assert_non_null(strstr(h.err.msg, "HTTP 410 Expired"));
    assert_int_equal(h.log.opens, 0); /* refused: never open */
}

static void watch_timeout_and_body_cap(void **state)
{
    gq_err e;
    /* timeoutSeconds: the server ends the stream, a clean GQ_OK. */
    kube_watch_opts o = {.timeout_seconds = 1};
    wlog l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    time_t t0 = time(NULL);
    assert_int_equal(kube_watch(cli, "/api/v1/namespaces/w/pods", &o, wlog_event, &l, &e), GQ_OK);
    assert_true(time(NULL) - t0 <= 3);

    /* A list page beyond the client's cap is asked again half as long, down
     * to one object: large objects cannot stop a list (pods of 1.5 MiB in
     * pages of 2000 once made the controller's initial list fail forever). */
    kube_config cfg = {.server = plain.url, .namespace_ = "default", .token_file = token_path};
    kube_client_opts co = {.max_body = 4096};
    kube_client *small;
    assert_int_equal(kube_client_new(&cfg, &co, &small, &e), GQ_OK);
    counter c = {0};
    kube_list_opts lo = {.page_size = 500};
    assert_int_equal(
        kube_list(small, "/api/v1/namespaces/many/pods", &lo, count_item, &c, NULL, &e), GQ_OK);
    assert_int_equal(c.n, 3000);
    /* One object beyond the cap fails with GQ_ELIMIT, not a crash. */
    kube_client_opts to = {.max_body = 100};
    kube_client *tiny;
    assert_int_equal(kube_client_new(&cfg, &to, &tiny, &e), GQ_OK);
    counter c1 = {0};
    assert_int_equal(
        kube_list(tiny, "/api/v1/namespaces/many/pods", &lo, count_item, &c1, NULL, &e), GQ_ELIMIT);
    assert_string_equal(e.msg, "GET /api/v1/namespaces/many/pods: response larger than 100 bytes");
    assert_int_equal(c1.n, 0);
    kube_client_free(tiny);
    /* A watch event larger than max_line is refused the same way. */
    kube_watch_opts big = {.max_line = 64, .resource_version = "1"};
    assert_int_equal(kube_watch(small, "/api/v1/namespaces/many/pods", &big, wlog_event, &l, &e),
                     GQ_ELIMIT);
    kube_client_free(small);
}

/* ---- cache ---- */

typedef struct cache_cb {
    atomic_int adds, updates, deletes;
} cache_cb;

static void cc_add(void *ud, const char *ns, const char *name, const void *rec)
{
    atomic_fetch_add(&((cache_cb *)ud)->adds, 1);
}

static void cc_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    atomic_fetch_add(&((cache_cb *)ud)->updates, 1);
}

static void cc_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    atomic_fetch_add(&((cache_cb *)ud)->deletes, 1);
}

static int wait_int(atomic_int *v, int want, long ms)
{
    for (long i = 0; i < ms; i++) {
        if (atomic_load(v) == want)
            return 1;
        usleep(1000);
    }
    return 0;
}

static int wait_count(kube_cache *c, size_t want, long ms)
{
    for (long i = 0; i < ms; i++) {
        if (kube_cache_count(c) == want)
            return 1;
        usleep(1000);
    }
    return 0;
}

/* Wait until relists reach want and a watch has started after the last one
 * (so the relist's list is done). One read of the counters decides: polling
 * two separate moments raced with a fast relist on a loaded machine. */
static int wait_stats(kube_cache *c, unsigned long want, long ms)
{
    for (long i = 0; i < ms; i++) {
        kube_cache_stats st;
        kube_cache_get_stats(c, &st);
        if (st.relists >= want && st.watches_since_relist > 0)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void cache_sync_events_relist_reconnect(void **state)
{
    gq_err e;
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "k%d", i);
        assert_int_equal(create_pod(cli, "cache", name, "x", &e), GQ_OK);
    }
    kube_api api;
    kube_client_api(cli, &api);
    cache_cb cb = {0};
    kube_cache_opts o = {.path = "/api/v1/namespaces/cache/pods",
                         .page_size = 2,
                         .backoff_min_ms = 50,
                         .backoff_max_ms = 200,
                         .on_add = cc_add,
                         .on_update = cc_update,
                         .on_delete = cc_delete,
                         .ud = &cb};
    kube_cache *c;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);
    assert_int_equal(kube_cache_count(c), 5);
    assert_int_equal(atomic_load(&cb.adds), 5);

    /* Live events. */
    assert_int_equal(create_pod(cli, "cache", "k5", "x", &e), GQ_OK);
    assert_int_equal(kube_delete(cli, "/api/v1/namespaces/cache/pods/k0", NULL, &e), GQ_OK);
    assert_true(wait_int(&cb.adds, 6, 5000));
    assert_true(wait_int(&cb.deletes, 1, 5000));
    assert_int_equal(kube_cache_count(c), 5);
    assert_int_equal(kube_cache_get(c, "cache", "k0", NULL, NULL), GQ_ENOTFOUND);
    assert_int_equal(kube_cache_get(c, "cache", "k5", NULL, NULL), GQ_OK);

    /* Every watch stream is cut after one event: the cache reconnects from
     * its resourceVersion and misses nothing. */
    post_fault("{\"cutWatchAfter\":1}");
    assert_int_equal(create_pod(cli, "cache", "k6", "x", &e), GQ_OK);
    assert_int_equal(create_pod(cli, "cache", "k7", "x", &e), GQ_OK);
    assert_true(wait_count(c, 7, 5000));
    assert_int_equal(atomic_load(&cb.adds), 8);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 0);
    assert_true(st.watches >= 2); /* one per cut; the last may still be starting */

    /* In-stream ERROR 410 on the next watch (after the cut): relist. */
    post_fault("{\"watchGone\":1}");
    assert_int_equal(create_pod(cli, "cache", "k8", "x", &e), GQ_OK);
    assert_true(wait_stats(c, 1, 5000));
    assert_true(wait_count(c, 8, 5000));

    /* HTTP 410 answering a watch request: relist too. Lists go to the same
     * path, so arm the fault only once the relist is done (the next watch
     * has started); the cut then ends that watch. */
    post_fault("{\"fail\":{\"count\":1,\"code\":410,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/cache/pods\"}}");
    assert_int_equal(create_pod(cli, "cache", "k9", "x", &e), GQ_OK);
    assert_true(wait_stats(c, 2, 5000));
    assert_true(wait_count(c, 9, 5000));
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 2);
    post_fault("{\"cutWatchAfter\":0}");
    /* Updates and deletes keep flowing after all that. */
    json_object *patch = json_tokener_parse("{\"metadata\":{\"labels\":{\"v\":\"2\"}}}");
    int before = atomic_load(&cb.updates);
    assert_int_equal(
        kube_patch_merge(cli, "/api/v1/namespaces/cache/pods/k9", patch, NULL, NULL, &e), GQ_OK);
    json_object_put(patch);
    assert_true(wait_int(&cb.updates, before + 1, 5000));
    assert_int_equal(kube_cache_count(c), 9);
    kube_cache_stop(c);
    kube_cache_free(c);
}

static int wait_fresh(kube_cache *c, int want, long ms)
{
    for (long i = 0; i < ms; i++) {
        if (kube_cache_fresh(c) == want)
            return 1;
        usleep(1000);
    }
    return 0;
}

/* Fresh while the watch is up; not fresh from the moment it is cut while
 * the reconnects fail (the contents are synced but may miss changes), and
 * fresh again, with what it missed, once it is back. */
static void cache_fresh_follows_the_watch(void **state)
{
    gq_err e;
    kube_api api;
    kube_client_api(cli, &api);
    kube_cache_opts o = {
        .path = "/api/v1/namespaces/fresh/pods", .backoff_min_ms = 50, .backoff_max_ms = 200};
    kube_cache *c;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);
    assert_true(wait_fresh(c, 1, 5000));

    post_fault("{\"fail\":{\"count\":100000,\"code\":503,\"method\":\"GET\","
               "\"pathPrefix\":\"/api/v1/namespaces/fresh/pods\"}}");
    post_fault("{\"cutWatchAfter\":1}");
    assert_int_equal(create_pod(cli, "fresh", "f0", "x", &e), GQ_OK);
    assert_true(wait_fresh(c, 0, 5000));
    post_fault("{\"cutWatchAfter\":0}");
    assert_true(wait_count(c, 1, 5000)); /* the event that cut the stream */
    assert_int_equal(create_pod(cli, "fresh", "f1", "x", &e), GQ_OK);
    for (int i = 0; i < 100; i++) { /* reconnects keep failing: never fresh */
        assert_int_equal(kube_cache_fresh(c), 0);
        usleep(10000);
    }
    assert_int_equal(kube_cache_synced(c), 1);
    assert_int_equal(kube_cache_count(c), 1);

    assert_int_equal(reset_standin(NULL), 0);
    assert_true(wait_fresh(c, 1, 5000));
    assert_true(wait_count(c, 2, 5000));
    kube_cache_stop(c);
    assert_int_equal(kube_cache_fresh(c), 0);
    kube_cache_free(c);
}

/* ---- leader election ---- */

static atomic_int started_a, started_b;

static void on_a(void *ud)
{
    atomic_fetch_add(&started_a, 1);
}

static void on_b(void *ud)
{
    atomic_fetch_add(&started_b, 1);
}

static void leader_election_real_api(void **state)
{
    kube_api api;
    kube_client_api(cli, &api);
    kube_leader_elect *a, *b;
    gq_err e;
    kube_leader_opts oa = {.namespace_ = "gpu-system",
                           .name = "gpuquota-controller",
                           .identity = "a",
                           .lease_ms = 10000,
                           .renew_deadline_ms = 6000,
                           .retry_ms = 100,
                           .on_started = on_a};
    kube_leader_opts ob = oa;
    ob.identity = "b";
    ob.on_started = on_b;
    assert_int_equal(kube_leader_elect_new(&api, &oa, &a, &e), GQ_OK);
    assert_int_equal(kube_leader_elect_new(&api, &ob, &b, &e), GQ_OK);
    assert_int_equal(kube_leader_elect_start(a, &e), GQ_OK);
    assert_int_equal(kube_leader_elect_start(b, &e), GQ_OK);
    for (int i = 0; i < 5000 && !kube_leader_elect_is_leader(a) && !kube_leader_elect_is_leader(b);
         i++)
        usleep(1000);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(kube_leader_elect_is_leader(a) + kube_leader_elect_is_leader(b), 1);
        usleep(5000);
    }
    kube_leader_elect *leader = kube_leader_elect_is_leader(a) ? a : b;
    kube_leader_elect *other = leader == a ? b : a;
    json_object *lease = NULL;
    assert_int_equal(kube_get(cli,
                              "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/"
                              "gpuquota-controller",
                              NULL, &lease, &e),
                     GQ_OK);
    assert_string_equal(str_at(lease, "spec", "holderIdentity"), leader == a ? "a" : "b");
    json_object_put(lease);
    /* Release: the other takes over well within the 10 s lease. */
    kube_leader_elect_stop(leader);
    for (int i = 0; i < 3000 && !kube_leader_elect_is_leader(other); i++)
        usleep(1000);
    assert_int_equal(kube_leader_elect_is_leader(other), 1);
    assert_int_equal(atomic_load(&started_a) + atomic_load(&started_b), 2);
    kube_leader_elect_free(a);
    kube_leader_elect_free(b);
}

/* ---- TLS ---- */

static char *b64_file(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "base64 -w0 %s", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = calloc(1, 16384);
    size_t n = fread(buf, 1, 16383, p);
    pclose(p);
    assert_true(n > 0);
    return buf;
}

/* The whole path a user takes: a kubeconfig with -data fields (CA, client
 * certificate and key) and a token file, loaded and used over HTTPS. */
static void tls_kubeconfig_with_data(void **state)
{
    standin_proc s;
    char tok[128], kc[128];
    snprintf(tok, sizeof(tok), "/tmp/kube-tls-token-%d", (int)getpid());
    snprintf(kc, sizeof(kc), "/tmp/kube-tls-config-%d.yaml", (int)getpid());
    write_file(tok, "tls-token");
    const char *extra[] = {
        "--tls-cert", TLS "server.crt", "--tls-key", TLS "server.key", "--token-file", tok, NULL};
    assert_int_equal(standin_start(&s, standin_bin, extra, 1), 0);
    char *ca = b64_file(TLS "ca.crt"), *crt = b64_file(TLS "client.crt"),
         *key = b64_file(TLS "client.key");
    FILE *f = fopen(kc, "w");
    assert_non_null(f);
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster:\n"
            "    server: %s\n    certificate-authority-data: %s\ncontexts:\n- name: t\n"
            "  context: {cluster: t, user: u, namespace: tls}\nusers:\n- name: u\n  user:\n"
            "    client-certificate-data: %s\n    client-key-data: %s\n    tokenFile: %s\n",
            s.url, ca, crt, key, tok);
    fclose(f);
    free(ca);
    free(crt);
    free(key);
    kube_config *cfg = NULL;
    kube_client *c = NULL;
    gq_err e;
    json_object *out = NULL;
    assert_int_equal(kube_config_load_file(kc, NULL, &cfg, &e), GQ_OK);
    assert_int_equal(kube_client_new(cfg, NULL, &c, &e), GQ_OK);
    kube_config_free(cfg);
    assert_string_equal(kube_client_namespace(c), "tls");
    assert_int_equal(kube_get(c, "/api/v1/namespaces/default", NULL, &out, &e), GQ_OK);
    assert_string_equal(str_at(out, "metadata", "name"), "default");
    json_object_put(out);
    kube_client_free(c);
    standin_stop(&s);
    unlink(kc);
    unlink(tok);
}

static void tls_with_ca_file_and_data(void **state)
{
    standin_proc s;
    const char *extra[] = {"--tls-cert", TLS "server.crt", "--tls-key", TLS "server.key", NULL};
    assert_int_equal(standin_start(&s, standin_bin, extra, 1), 0);
    gq_err e;
    json_object *out = NULL;
    const char *path = "/api/v1/namespaces/tls/pods/none";

    kube_client *c = client_for(s.url, NULL, TLS "ca.crt");
    assert_int_equal(kube_get(c, path, NULL, &out, &e), GQ_ENOTFOUND);
    kube_client_free(c);

    char *pem = NULL;
    size_t len = 0;
    FILE *f = fopen(TLS "ca.crt", "rb");
    assert_non_null(f);
    pem = malloc(8192);
    len = fread(pem, 1, 8192, f);
    fclose(f);
    kube_config cfg = {.server = s.url, .namespace_ = "default"};
    cfg.ca_data.data = (unsigned char *)pem;
    cfg.ca_data.len = len;
    assert_int_equal(kube_client_new(&cfg, NULL, &c, &e), GQ_OK);
    assert_int_equal(kube_get(c, path, NULL, &out, &e), GQ_ENOTFOUND);
    kube_client_free(c);
    free(pem);

    /* The wrong CA fails verification: GQ_ETLS, and insecure skips it. */
    c = client_for(s.url, NULL, TLS "other-ca.crt");
    assert_int_equal(kube_get(c, path, NULL, &out, &e), GQ_ETLS);
    kube_client_free(c);
    kube_config insecure = {
        .server = s.url, .namespace_ = "default", .insecure_skip_tls_verify = 1};
    assert_int_equal(kube_client_new(&insecure, NULL, &c, &e), GQ_OK);
    assert_int_equal(kube_get(c, path, NULL, &out, &e), GQ_ENOTFOUND);
    kube_client_free(c);
    standin_stop(&s);
}

/* ---- token rotation ---- */

static void token_reread_after_401(void **state)
{
    gq_err e;
    json_object *got = NULL;
    assert_int_equal(create_pod(cli, "tok", "a", "x", &e), GQ_OK);
    /* The server now wants a new token; the client still caches the old one
     * (its periodic re-read is a minute away), gets 401, re-reads, retries. */
    write_file(token_path, "token-two\n");
    assert_int_equal(kube_get(cli, "/api/v1/namespaces/tok/pods/a", NULL, &got, &e), GQ_OK);
    json_object_put(got);
    /* The same for a watch request. */
    write_file(token_path, "token-three\n");
    kube_watch_opts wo = {.timeout_seconds = 1};
    wlog l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(kube_watch(cli, "/api/v1/namespaces/tok/pods", &wo, wlog_event, &l, &e),
                     GQ_OK);
    /* Periodic re-read, seen through a client-side token file that goes
     * stale: after it changes, the client re-reading every 100 ms sends the
     * new (wrong) token, while one on the default minute keeps the cached
     * (right) one. */
    char ctok[300];
    snprintf(ctok, sizeof(ctok), "%s-client", token_path);
    write_file(ctok, "token-three\n");
    kube_config pcfg = {.server = plain.url, .namespace_ = "default", .token_file = ctok};
    kube_client_opts po = {.token_reread_ms = 100};
    kube_client *fast, *slow;
    assert_int_equal(kube_client_new(&pcfg, &po, &fast, &e), GQ_OK);
    assert_int_equal(kube_client_new(&pcfg, NULL, &slow, &e), GQ_OK);
    write_file(ctok, "not-the-token\n");
    gq_code rc = GQ_OK;
    for (int i = 0; i < 500 && rc == GQ_OK; i++) { /* the next read after 100 ms */
        rc = kube_get(fast, "/api/v1/namespaces/tok/pods/a", NULL, &got, &e);
        if (rc == GQ_OK) {
            json_object_put(got);
            usleep(10000);
        }
    }
    assert_int_equal(rc, GQ_EUNAUTHORIZED);
    assert_int_equal(kube_get(slow, "/api/v1/namespaces/tok/pods/a", NULL, &got, &e), GQ_OK);
    json_object_put(got);
    kube_client_free(fast);
    kube_client_free(slow);
    unlink(ctok);
    /* A client with a static wrong token gets 401 surfaced. */
    kube_config cfg = {.server = plain.url, .namespace_ = "default", .token = "wrong"};
    kube_client *bad;
    assert_int_equal(kube_client_new(&cfg, NULL, &bad, &e), GQ_OK);
    assert_int_equal(kube_get(bad, "/api/v1/namespaces/tok/pods/a", NULL, &got, &e),
                     GQ_EUNAUTHORIZED);
    kube_client_free(bad);
}

/* A client whose kubeconfig user is a credential plugin (a script printing
 * the server's current token, or a fixed one, or failing). */
static kube_client *exec_client(const char *plugin, const char *body)
{
    FILE *f = fopen(plugin, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\necho run >>'%s.runs'\n%s", plugin, body);
    fclose(f);
    assert_int_equal(chmod(plugin, 0755), 0);
    char y[1024];
    snprintf(y, sizeof(y),
             "current-context: x\n"
             "clusters: [{name: c, cluster: {server: '%s'}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
             "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
             "command: '%s', interactiveMode: Never}}}]\n",
             plain.url, plugin);
    kube_config *cfg = NULL;
    kube_client *c = NULL;
    gq_err e;
    if (kube_config_parse(y, strlen(y), "mem", NULL, NULL, &cfg, &e) ||
        kube_client_new(cfg, NULL, &c, &e))
        fail_msg("exec client: %s", e.msg);
    kube_config_free(cfg);
    return c;
}

static int plugin_runs(const char *plugin)
{
    char path[300], line[16];
    snprintf(path, sizeof(path), "%s.runs", plugin);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n++;
    if (f)
        fclose(f);
    return n;
}

/* The plugin runs with the first request and not again while its token is
 * good; a 401 (the server's token rotated) re-runs it and the request or
 * watch is retried once; a plugin that keeps returning a refused token or
 * fails surfaces as GQ_EUNAUTHORIZED or its own error. */
static void exec_plugin_after_401(void **state)
{
    gq_err e;
    json_object *got = NULL;
    char plugin[256], body[512], want[400];
    snprintf(plugin, sizeof(plugin), "/tmp/kube-standin-plugin-%d", (int)getpid());
    snprintf(body, sizeof(body),
             "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
             "\"ExecCredential\",\"status\":{\"token\":\"%%s\"}}' \"$(cat '%s')\"\n",
             token_path);
    kube_client *c = exec_client(plugin, body);
    assert_int_equal(plugin_runs(plugin), 0); /* not before the first request */
    assert_int_equal(create_pod(c, "tok", "ex", "x", &e), GQ_OK);
    assert_int_equal(kube_get(c, "/api/v1/namespaces/tok/pods/ex", NULL, &got, &e), GQ_OK);
    json_object_put(got);
    assert_int_equal(plugin_runs(plugin), 1);
    write_file(token_path, "token-four\n");
    assert_int_equal(kube_get(c, "/api/v1/namespaces/tok/pods/ex", NULL, &got, &e), GQ_OK);
    json_object_put(got);
    assert_int_equal(plugin_runs(plugin), 2);
    write_file(token_path, "token-five\n");
    kube_watch_opts wo = {.timeout_seconds = 1};
    wlog l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(kube_watch(c, "/api/v1/namespaces/tok/pods", &wo, wlog_event, &l, &e), GQ_OK);
    assert_int_equal(plugin_runs(plugin), 3);
    kube_client_free(c);
    snprintf(want, sizeof(want), "%s.runs", plugin);
    unlink(want);

    c = exec_client(plugin, "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                            "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"old\"}}'\n");
    assert_int_equal(kube_get(c, "/api/v1/namespaces/tok/pods/ex", NULL, &got, &e),
                     GQ_EUNAUTHORIZED);
    assert_int_equal(plugin_runs(plugin), 2);
    kube_client_free(c);
    unlink(want);

    c = exec_client(plugin, "exit 2\n");
    assert_int_equal(kube_get(c, "/api/v1/namespaces/tok/pods/ex", NULL, &got, &e), GQ_EIO);
    snprintf(want, sizeof(want), "getting credentials: exec: executable %s failed with exit code 2",
             plugin);
    assert_string_equal(e.msg, want);
    kube_client_free(c);
    unlink(plugin);
    snprintf(want, sizeof(want), "%s.runs", plugin);
    unlink(want);
}

int main(int argc, char **argv)
{
    if (argc < 2 || access(argv[1], X_OK) != 0) {
        fprintf(stderr, "kube-standin not built: skipping\n");
        return 77;
    }
    standin_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(verbs_round_trip, reset_standin),
        cmocka_unit_test_setup(concurrent_status_writes_lose_nothing, reset_standin),
        cmocka_unit_test_setup(retry_after_500_only_when_asked, reset_standin),
        cmocka_unit_test_setup(conflict_status_injected, reset_standin),
        cmocka_unit_test_setup(latency_and_timeout, reset_standin),
        cmocka_unit_test_setup(list_paginates, reset_standin),
        cmocka_unit_test_setup(list_fetches_ahead, reset_standin),
        cmocka_unit_test_setup(watch_events_and_stop, reset_standin),
        cmocka_unit_test_setup(watch_cut_and_gone, reset_standin),
        cmocka_unit_test_setup(cache_sync_events_relist_reconnect, reset_standin),
        cmocka_unit_test_setup(cache_fresh_follows_the_watch, reset_standin),
        cmocka_unit_test_setup(leader_election_real_api, reset_standin),
        cmocka_unit_test(tls_with_ca_file_and_data),
        cmocka_unit_test(tls_kubeconfig_with_data),
        cmocka_unit_test_setup(watch_timeout_and_body_cap, reset_standin),
        /* last: rotates the token file */
        cmocka_unit_test_setup(token_reread_after_401, reset_standin),
        cmocka_unit_test_setup(exec_plugin_after_401, reset_standin),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
