/* kube/kube_cache.c driven through a fake kube_api: list, watch and relist,
 * relists when history goes back, after repeated failures and when behind,
 * freshness only while the watch is established, and a cache without a
 * transform. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"

/* ---- cache over a fake API ---- */

typedef struct fake_api {
    pthread_mutex_t mu;
    json_object *lists[4]; /* answer of list call n (the last one repeats) */
    const char *list_rvs[4];
    int nlists;
    const char **scripts; /* per watch call: events separated by '\n'; NULL ends */
    int watch_calls, list_calls, idle;
    gq_code script_end[8]; /* what each scripted watch returns */
    char last_watch_rv[32];
    const char *probe_rvs[8]; /* resourceVersion of each "?limit=1" GET (the last repeats) */
    int probes;
} fake_api;

/* GET PATH?limit=1: a one-item list carrying the server's resourceVersion. */
static gq_code fake_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    fake_api *f = ctx;
    char buf[128];
    assert_non_null(strstr(path, "?limit=1"));
    pthread_mutex_lock(&f->mu);
    int k = f->probes++;
    while (k > 0 && !f->probe_rvs[k])
        k--;
    snprintf(buf, sizeof(buf),
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"%s\"},"
             "\"items\":[]}",
             f->probe_rvs[k] ? f->probe_rvs[k] : "1");
    pthread_mutex_unlock(&f->mu);
    *out = json_tokener_parse(buf);
    return *out ? GQ_OK : gq_err_oom(err);
}

static gq_code fake_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                         void *ud, char **rv_out, gq_err *err)
{
    fake_api *f = ctx;
    pthread_mutex_lock(&f->mu);
    int k = f->list_calls < f->nlists ? f->list_calls : f->nlists - 1;
    json_object *items = json_object_get(f->lists[k]);
    char *rv = strdup(f->list_rvs[k]);
    f->list_calls++;
    pthread_mutex_unlock(&f->mu);
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < json_object_array_length(items) && !rc; i++)
        rc = fn(ud, json_object_array_get_idx(items, i), err);
    json_object_put(items);
    if (!rc)
        *rv_out = rv;
    else
        free(rv);
    return rc;
}

static gq_code fake_watch(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                          void *ud, gq_err *err)
{
    fake_api *f = ctx;
    pthread_mutex_lock(&f->mu);
    int n = f->watch_calls++;
    const char *script = f->scripts[n];
    gq_code end = n < 8 ? f->script_end[n] : GQ_OK;
    snprintf(f->last_watch_rv, sizeof(f->last_watch_rv), "%s", o->resource_version);
    if (!script) { /* stay on the terminator */
        f->watch_calls--;
        f->idle++;
    }
    pthread_mutex_unlock(&f->mu);
    assert_int_equal(o->allow_bookmarks, 1);
    assert_true(o->timeout_seconds >= 300 && o->timeout_seconds < 600);
    if (!script) { /* nothing more: idle until stopped, like a quiet watch */
        while (!atomic_load(o->stop))
            usleep(1000);
        return GQ_OK;
    }
    kube_watch_parser *p;
    gq_code rc = kube_watch_parser_new(0, fn, ud, &p);
    if (!rc)
        rc = kube_watch_parser_feed(p, script, strlen(script), err);
    if (!rc)
        rc = kube_watch_parser_finish(p, err);
    kube_watch_parser_free(p);
    if (!rc && end)
        rc = gq_err_set(err, end, "scripted failure");
    return rc;
}

typedef struct cb_log {
    pthread_mutex_t mu;
    char text[4096];
    size_t len;
} cb_log;

static void cb_append(cb_log *l, const char *what, const char *ns, const char *name,
                      const char *detail)
{
    pthread_mutex_lock(&l->mu);
    int w = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s %s/%s%s%s;", what, ns, name,
                     detail ? " " : "", detail ? detail : "");
    if (w > 0)
        l->len += (size_t)w;
    pthread_mutex_unlock(&l->mu);
}

/* Records are "name@rv" strings made by the transform. */
static gq_code tr(void *ud, json_object *obj, void **rec, gq_err *err)
{
    json_object *m, *n, *rv;
    json_object_object_get_ex(obj, "metadata", &m);
    json_object_object_get_ex(m, "name", &n);
    json_object_object_get_ex(m, "resourceVersion", &rv);
    if (!strcmp(json_object_get_string(n), "skipme")) {
        *rec = NULL;
        return GQ_OK;
    }
    char buf[128];
    snprintf(buf, sizeof(buf), "%s@%s", json_object_get_string(n), json_object_get_string(rv));
    *rec = strdup(buf);
    return *rec ? GQ_OK : GQ_ENOMEM;
}

static void tr_free(void *ud, void *rec)
{
    free(rec);
}

static void on_add(void *ud, const char *ns, const char *name, const void *rec)
{
    cb_append(ud, "add", ns, name, rec);
}

static void on_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    char d[256];
    snprintf(d, sizeof(d), "%s->%s", (const char *)o, (const char *)n);
    cb_append(ud, "update", ns, name, d);
}

static void on_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    cb_append(ud, "delete", ns, name, rec);
}

static json_object *pod(const char *ns, const char *name, const char *rv)
{
    char buf[256];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"resourceVersion\":\"%s\"}}", ns,
             name, rv);
    return json_tokener_parse(buf);
}

static int wait_for_text(cb_log *l, const char *want)
{
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&l->mu);
        int eq = !strcmp(l->text, want);
        pthread_mutex_unlock(&l->mu);
        if (eq)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void get_copy(void *ud, const void *rec)
{
    snprintf(ud, 64, "%s", (const char *)rec);
}

static int count_ns(void *ud, const char *ns, const char *name, const void *rec)
{
    if (!strcmp(ns, "t"))
        (*(int *)ud)++;
    return 0;
}

static void cache_list_watch_relist(void **state)
{
    (void)state;
    const char *scripts[8] = {
        /* first watch: modify a, delete b, add c, bookmark, then 410 in-stream */
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"a\","
        "\"resourceVersion\":\"11\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"b\","
        "\"resourceVersion\":\"12\"}}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"c\","
        "\"resourceVersion\":\"13\"}}}\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"14\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
        "\"message\":\"too old\"}}\n",
        /* after the relist: a transport failure (reconnect with backoff) */
        "",
        /* then a clean watch with one addition of an object the transform skips */
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"skipme\","
        "\"resourceVersion\":\"31\"}}}\n",
        NULL,
    };
    fake_api f = {.scripts = scripts};
    f.script_end[1] = GQ_EIO;
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    json_object_array_add(f.lists[0], pod("t", "a", "1"));
    json_object_array_add(f.lists[0], pod("t", "b", "2"));
    json_object_array_add(f.lists[0], pod("u", "a", "3"));
    f.list_rvs[0] = "10";
    /* The relist after the 410 sees: a unchanged at 11, c changed, d new,
     * b still gone, u/a vanished. */
    f.lists[1] = json_object_new_array();
    json_object_array_add(f.lists[1], pod("t", "a", "11"));
    json_object_array_add(f.lists[1], pod("t", "c", "20"));
    json_object_array_add(f.lists[1], pod("t", "d", "21"));
    f.list_rvs[1] = "30";
    f.nlists = 2;
    kube_api api = {.ctx = &f, .list = fake_list, .watch = fake_watch};
    cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kube_cache_opts o = {.path = "/api/v1/pods",
                         .backoff_min_ms = 20,
                         .backoff_max_ms = 40,
                         .transform = tr,
                         .free_record = tr_free,
                         .on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .ud = &l};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_synced(c), 0);

    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);
    const char *want = "add t/a a@1;add t/b b@2;add u/a a@3;"
                       "update t/a a@1->a@11;delete t/b b@2;add t/c c@13;"
                       "update t/c c@13->c@20;add t/d d@21;delete u/a a@3;";
    if (!wait_for_text(&l, want))
        fail_msg("callbacks: %s", l.text);
    for (int i = 0; i < 5000 && kube_cache_count(c) != 3; i++)
        usleep(1000);
    /* Wait until the fake is idling on its last (terminator) watch. */
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&f.mu);
        int idle = f.idle >= 1;
        pthread_mutex_unlock(&f.mu);
        if (idle)
            break;
        usleep(1000);
    }
    assert_int_equal(kube_cache_count(c), 3);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 1);
    assert_int_equal(st.lists, 2);
    assert_int_equal(st.watches, 4);
    assert_int_equal(f.list_calls, 2);
    char rv[32];
    kube_cache_resource_version(c, rv, sizeof(rv));
    assert_string_equal(rv, "31");
    assert_string_equal(f.last_watch_rv, "31");
    char got[64] = "";
    assert_int_equal(kube_cache_get(c, "t", "c", get_copy, got), GQ_OK);
    assert_string_equal(got, "c@20");
    assert_int_equal(kube_cache_get(c, "t", "b", get_copy, got), GQ_ENOTFOUND);
    assert_int_equal(kube_cache_get(c, "t", "skipme", get_copy, got), GQ_ENOTFOUND);
    int n = 0;
    kube_cache_foreach(c, count_ns, &n);
    assert_int_equal(n, 3);
    kube_cache_stop(c);
    kube_cache_stop(c); /* idempotent */
    kube_cache_free(c);
    json_object_put(f.lists[0]);
    json_object_put(f.lists[1]);
    pthread_mutex_destroy(&f.mu);
}

/* Wait until the fake idles on its terminator watch. */
static void wait_idle(fake_api *f)
{
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&f->mu);
        int idle = f->idle >= 1;
        pthread_mutex_unlock(&f->mu);
        if (idle)
            return;
        usleep(1000);
    }
    fail_msg("the cache never settled on its last watch");
}

/* A started cache over f whose transform and callbacks record into l
 * (api, filled here, must outlive the cache). */
static kube_cache *recording_cache(fake_api *f, kube_api *api, cb_log *l, long backoff_min_ms)
{
    *api = (kube_api){.ctx = f, .list = fake_list, .watch = fake_watch, .get = fake_get};
    kube_cache_opts o = {.path = "/api/v1/pods",
                         .backoff_min_ms = backoff_min_ms,
                         .backoff_max_ms = 2 * backoff_min_ms,
                         .transform = tr,
                         .free_record = tr_free,
                         .on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .ud = l};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    return c;
}

/* The server's history went back (etcd restored, control plane rebuilt):
 * a watch from our resourceVersion gets 504 "Too large resource version",
 * or events older than what we saw, or a list answers an older version.
 * Each time the cache relists and applies every object again, even one
 * whose resourceVersion string is unchanged (the new history reuses the
 * numbers), instead of keeping its old contents forever. */
static void cache_relists_when_history_goes_back(void **state)
{
    (void)state;
    const char *scripts[8] = {
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
        "\"status\":\"Failure\",\"message\":\"Timeout: Too large resource version: 50, current: "
        "20\",\"reason\":\"Timeout\",\"code\":504,\"details\":{\"causes\":[{\"reason\":"
        "\"ResourceVersionTooLarge\",\"message\":\"Too large resource version\"}],"
        "\"retryAfterSeconds\":1}}}\n",
        /* from 20: an addition, then an event older than it */
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"d\","
        "\"resourceVersion\":\"21\"}}}\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"c\","
        "\"resourceVersion\":\"15\"}}}\n",
        /* from 40: 410, and the relist answers an older version */
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
        "\"message\":\"too old\"}}\n",
        NULL,
    };
    fake_api f = {.scripts = scripts};
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    json_object_array_add(f.lists[0], pod("t", "a", "5"));
    json_object_array_add(f.lists[0], pod("t", "b", "6"));
    f.list_rvs[0] = "50";
    f.lists[1] = json_object_new_array();
    json_object_array_add(f.lists[1], pod("t", "a", "5"));
    json_object_array_add(f.lists[1], pod("t", "c", "7"));
    f.list_rvs[1] = "20";
    f.lists[2] = json_object_new_array();
    json_object_array_add(f.lists[2], pod("t", "a", "5"));
    json_object_array_add(f.lists[2], pod("t", "c", "15"));
    f.list_rvs[2] = "40";
    f.lists[3] = json_object_new_array();
    json_object_array_add(f.lists[3], pod("t", "a", "5"));
    f.list_rvs[3] = "35";
    f.nlists = 4;
    f.probe_rvs[0] = "1000";
    kube_api api;
    cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kube_cache *c = recording_cache(&f, &api, &l, 20);
    const char *want = "add t/a a@5;add t/b b@6;"
                       /* 504: a is applied again although its version reads the same */
                       "update t/a a@5->a@5;add t/c c@7;delete t/b b@6;"
                       /* d@21, then c@15 older than 21: relist, everything again */
                       "add t/d d@21;"
                       "update t/a a@5->a@5;update t/c c@7->c@15;delete t/d d@21;"
                       /* 410, then a list at 35, older than 40: a second list
                        * applies everything again (the first kept a as it was) */
                       "update t/a a@5->a@5;delete t/c c@15;";
    if (!wait_for_text(&l, want))
        fail_msg("callbacks: %s", l.text);
    wait_idle(&f);
    assert_int_equal(kube_cache_synced(c), 1);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 3);
    assert_int_equal(st.resets, 3);
    assert_int_equal(f.list_calls, 5);
    assert_string_equal(f.last_watch_rv, "35");
    kube_cache_stop(c);
    kube_cache_free(c);
    for (int i = 0; i < 4; i++)
        json_object_put(f.lists[i]);
    pthread_mutex_destroy(&f.mu);
}

/* A watch that keeps failing is not resumed forever: after three failures
 * in a row the cache relists. Before resuming after a failure it asks the
 * server's current resourceVersion, and relists when the server is behind
 * it (a restarted control plane may otherwise accept the watch and send
 * nothing until it catches up). */
static void cache_relists_after_repeated_failures_and_when_behind(void **state)
{
    (void)state;
    const char *scripts[8] = {"", "", "", "", NULL};
    fake_api f = {.scripts = scripts};
    for (int i = 0; i < 4; i++)
        f.script_end[i] = GQ_EIO;
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    json_object_array_add(f.lists[0], pod("t", "a", "5"));
    f.list_rvs[0] = "50";
    f.lists[1] = json_object_new_array();
    json_object_array_add(f.lists[1], pod("t", "a", "5"));
    f.list_rvs[1] = "50";
    f.lists[2] = json_object_new_array();
    json_object_array_add(f.lists[2], pod("t", "a", "9"));
    f.list_rvs[2] = "12";
    f.nlists = 3;
    /* two failures: the server is ahead, resume; the third relists; the
     * fourth finds the server at 10, behind 50 */
    f.probe_rvs[0] = "60";
    f.probe_rvs[1] = "60";
    f.probe_rvs[2] = "10";
    kube_api api;
    cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kube_cache *c = recording_cache(&f, &api, &l, 10);
    if (!wait_for_text(&l, "add t/a a@5;update t/a a@5->a@9;"))
        fail_msg("callbacks: %s", l.text);
    wait_idle(&f);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 2);
    assert_int_equal(st.resets, 1);
    assert_int_equal(f.list_calls, 3);
    assert_int_equal(f.probes, 3);
    assert_string_equal(f.last_watch_rv, "12");
    kube_cache_stop(c);
    kube_cache_free(c);
    for (int i = 0; i < 3; i++)
        json_object_put(f.lists[i]);
    pthread_mutex_destroy(&f.mu);
}

/* A watch that the test drives one step at a time: "open" (the server
 * accepted it), an event line, or "end" (the watch returns end_rc). */
typedef struct step_api {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int watches, lists, waiting, acks;
    const char *cmd;
    gq_code end_rc;
} step_api;

static gq_code step_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                         void *ud, char **rv_out, gq_err *err)
{
    step_api *s = ctx;
    pthread_mutex_lock(&s->mu);
    int n = ++s->lists;
    pthread_mutex_unlock(&s->mu);
    *rv_out = strdup(n == 1 ? "10" : "50");
    return *rv_out ? GQ_OK : gq_err_oom(err);
}

static gq_code step_watch(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                          void *ud, gq_err *err)
{
    step_api *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->watches++;
    for (;;) {
        s->waiting = 1;
        pthread_cond_broadcast(&s->cv);
        while (!s->cmd && !atomic_load(o->stop)) {
            pthread_mutex_unlock(&s->mu);
            usleep(1000);
            pthread_mutex_lock(&s->mu);
        }
        const char *cmd = s->cmd;
        s->cmd = NULL;
        s->waiting = 0;
        if (!cmd) { /* stopped */
            pthread_mutex_unlock(&s->mu);
            return GQ_OK;
        }
        gq_code rc = GQ_OK;
        int end = !strcmp(cmd, "end");
        pthread_mutex_unlock(&s->mu);
        if (end) {
            rc = s->end_rc ? gq_err_set(err, s->end_rc, "scripted failure") : GQ_OK;
        } else if (!strcmp(cmd, "open")) {
            o->on_open(ud);
        } else {
            kube_watch_parser *p;
            assert_int_equal(kube_watch_parser_new(0, fn, ud, &p), GQ_OK);
            rc = kube_watch_parser_feed(p, cmd, strlen(cmd), err);
            kube_watch_parser_free(p);
            end = rc != GQ_OK;
        }
        pthread_mutex_lock(&s->mu);
        s->acks++;
        pthread_cond_broadcast(&s->cv);
        if (end) {
            pthread_mutex_unlock(&s->mu);
            return rc;
        }
    }
}

/* Wait until watch number n waits for a command. */
static void step_wait(step_api *s, int n)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < 5000 && !(s->watches == n && s->waiting); i++) {
        pthread_mutex_unlock(&s->mu);
        usleep(1000);
        pthread_mutex_lock(&s->mu);
    }
    int ok = s->watches == n && s->waiting;
    pthread_mutex_unlock(&s->mu);
    if (!ok)
        fail_msg("watch %d never started (at %d)", n, s->watches);
}

/* Give the current watch a command and wait until it has been carried out. */
static void step(step_api *s, const char *cmd)
{
    pthread_mutex_lock(&s->mu);
    int acks = s->acks;
    s->cmd = cmd;
    while (s->acks == acks)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* kube_cache_fresh is true only while a watch is established: not before
 * the server accepts one, not from the moment it ends (through backoff and
 * relist) until the next one is accepted, not once stopped. An event proves
 * the watch at once; a watch that brings none counts after a short settle
 * time, since an error answer (410, 504) comes as an event right after the
 * server accepted it. */
static void cache_fresh_only_while_the_watch_is_established(void **state)
{
    (void)state;
    static const char bookmark[] =
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n";
    static const char bookmark2[] =
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"60\"}}}\n";
    static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                               "\"reason\":\"Expired\",\"message\":\"too old\"}}\n";
    step_api s = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    kube_api api = {.ctx = &s, .list = step_list, .watch = step_watch};
    kube_cache_opts o = {.path = "/api/v1/pods", .backoff_min_ms = 10, .backoff_max_ms = 20};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_fresh(c), 0);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);

    /* Listed, watch requested but not yet accepted: synced, not fresh. */
    step_wait(&s, 1);
    assert_int_equal(kube_cache_fresh(c), 0);
    step(&s, "open");
    step(&s, bookmark);
    assert_int_equal(kube_cache_fresh(c), 1);

    /* The watch fails: not fresh while the cache backs off and reconnects. */
    s.end_rc = GQ_EIO;
    step(&s, "end");
    step_wait(&s, 2);
    assert_int_equal(kube_cache_fresh(c), 0);
    assert_int_equal(kube_cache_synced(c), 1);

    /* Accepted and quiet: fresh once it has stayed open a moment. */
    step(&s, "open");
    int fresh = 0;
    for (int i = 0; i < 5000 && !(fresh = kube_cache_fresh(c)); i++)
        usleep(1000);
    assert_int_equal(fresh, 1);

    /* 410 right after the 200: not fresh through the relist. */
    step(&s, gone);
    step_wait(&s, 3);
    assert_int_equal(kube_cache_fresh(c), 0);
    assert_int_equal(s.lists, 2);
    step(&s, "open");
    step(&s, bookmark2);
    assert_int_equal(kube_cache_fresh(c), 1);

    kube_cache_stop(c);
    assert_int_equal(kube_cache_fresh(c), 0);
    kube_cache_free(c);
}

static void cache_without_transform_keeps_json(void **state)
{
    (void)state;
    const char *scripts[1] = {NULL};
    fake_api f = {.scripts = scripts};
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    for (int i = 0; i < 3000; i++) { /* grows the table past its first size */
        char name[32];
        snprintf(name, sizeof(name), "p%d", i);
        json_object_array_add(f.lists[0], pod("ns", name, "5"));
    }
    f.list_rvs[0] = "77";
    f.nlists = 1;
    kube_api api = {.ctx = &f, .list = fake_list, .watch = fake_watch};
    kube_cache_opts o = {.path = "/api/v1/pods"};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 10), GQ_ETIMEOUT); /* not started */
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_EINVAL);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);
    assert_int_equal(kube_cache_synced(c), 1);
    assert_int_equal(kube_cache_count(c), 3000);
    char rv[32];
    kube_cache_resource_version(c, rv, sizeof(rv));
    assert_string_equal(rv, "77");
    kube_cache_free(c); /* stops the thread */
    json_object_put(f.lists[0]);
    pthread_mutex_destroy(&f.mu);

    assert_int_equal(kube_cache_new(&api, &(kube_cache_opts){.path = "pods"}, &c, &e), GQ_EINVAL);
    kube_cache_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cache_list_watch_relist),
        cmocka_unit_test(cache_relists_when_history_goes_back),
        cmocka_unit_test(cache_relists_after_repeated_failures_and_when_behind),
        cmocka_unit_test(cache_without_transform_keeps_json),
        cmocka_unit_test(cache_fresh_only_while_the_watch_is_established),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
