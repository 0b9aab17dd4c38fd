/* What the running controller's tests share: a fake kube_api (no sockets)
 * over JSON arrays of pods, GPUQuotas, GPUTenantQuotas and namespaces. It
 * lists once and its watches bring nothing; a status write checks the
 * resourceVersion it carries as kube-apiserver does (409 when stale) and
 * bumps it; a pod's JSON Patch is applied to the stored pod (a failed test
 * operation answers 422 and changes nothing). Faults can be injected (409s
 * and 500s on status writes, any code on a pod's PATCHes, a delay on every
 * GET, status write and PATCH), and every PATCH is logged with the order in
 * which it began and ended. JSON is written with ' for ". Include after
 * <cmocka.h>. */
#ifndef GQ_TEST_CTL_FAKE_H
#define GQ_TEST_CTL_FAKE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/testjson.h"

#include "controller/ctl.h"
#include "quota/jsonpatch.h"

#define NOW 1795273565LL /* 2026-11-21T15:06:05Z */

/* The verbs whose calls in flight the fake counts. */
enum { FAKE_GET, FAKE_STATUS, FAKE_PATCH, FAKE_VERBS };

#define FAKE_PAID_MAX 8
/* The resourceVersions of pods the fake changes: FAKE_RV0 + f->seq, above
 * any the test data holds. */
#define FAKE_RV0 1000000L

typedef struct fake {
    pthread_mutex_t mu;
    json_object *pods, *quotas, *tenants, *nss; /* arrays */
    int conflicts;                              /* status writes to refuse with 409 */
    int charge_conflicts; /* of the writes that hold a reservation, how many to refuse */
    int charge_errors;    /* of those (after the conflicts), how many to answer 500 */
    int writes, gets, events, patches, queued_events;
    char last_patch_path[256];
    json_object *last_status;      /* body of the last accepted status write */
    json_object *events_by_reason; /* {reason: the last Event with it} */
    char last_write_path[256];
    long delay_ms; /* every quota or pod GET, status write and PATCH takes this long */
    /* {pod name: [HTTP code, ...]}: the next PATCHes of that pod are
     * answered these codes, in turn, without being applied. */
    json_object *patch_faults;
    /* {pod name: gate name}: just before the next PATCH of that pod, the
     * gate is put first among its schedulingGates (someone else's change),
     * so a PATCH made for the gates as they were fails its test. */
    json_object *gate_moves;
    /* One entry per PATCH: {'pod', 'start', 'end', 'code'}: start and end
     * are numbers from one counter, so a PATCH whose start is above
     * another's end began after that one was answered. */
    json_object *patch_log;
    long seq;
    int in_flight[FAKE_VERBS], max_in_flight[FAKE_VERBS];
    /* The paths of the quotas that must hold a live reservation of a pod
     * (keyed by its uid) whenever its PATCH begins; unpaid counts the
     * PATCHes that began without one. */
    const char *paid[FAKE_PAID_MAX];
    size_t n_paid;
    int unpaid;
    unsigned ungate_inflight;  /* for run(): ctl_controller_opts.ungate_inflight */
    long reservation_grace_ms; /* for run(): ctl_controller_opts.reservation_grace_ms */
    /* Whether the pod watch brings every change of a stored pod (a pod's
     * resourceVersion moves with each PATCH applied); else watches bring
     * nothing. */
    bool watch_pods;
    /* Pods the pod watch brings as deleted, once (fake_delete_pod). */
    json_object *deleted;
    /* Whether the GPUQuota watch brings each new resourceVersion of a stored
     * GPUQuota (a status write, or a test's charge_status). Those versions
     * are below the lists' (FAKE_RV0): the cache takes the event for history
     * gone back and relists, which hands the change on as an update all the
     * same. */
    bool watch_quotas;
    /* {quota path: {reservation key: how many accepted status writes added
     * it}}, and how many accepted writes held one key twice. */
    json_object *adds;
    int dup_keys;
    bool quotas_live_only;          /* GPUQuotas only in a namespace's list, never the caches' */
    const char *refuse_charge_once; /* the first charge written to a path ending so: a 409 */
    json_object *last_patch;        /* body of the last pod JSON Patch */
    int status_gets;                /* GETs of a quota (not of a pod) */
    int refused_409;                /* status writes answered 409 */
    int get_errors;                 /* quota GETs to answer 500 */
    /* A status (JSON with ' for ") put into the stored quota at
     * after_list_path, its resourceVersion moved on, just after the first
     * list of its kind is answered: a write the informer's cache has not
     * seen (a webhook's charge). */
    const char *after_list, *after_list_path;
} fake;

static inline json_object *fake_collection(fake *f, const char *path)
{
    if (strstr(path, "gputenantquotas"))
        return f->tenants;
    if (strstr(path, "gpuquotas"))
        return f->quotas;
    if (strstr(path, "namespaces") && !strstr(path, "/pods"))
        return f->nss;
    return f->pods;
}

static inline void fake_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0)
        ;
}

/* Counts a call of verb v in flight (f->mu held); its number. */
static inline long fake_begin(fake *f, int v)
{
    if (++f->in_flight[v] > f->max_in_flight[v])
        f->max_in_flight[v] = f->in_flight[v];
    return ++f->seq;
}

/* Waits the fake's delay with the lock released (f->mu held on entry and
 * on return). */
static inline void fake_delay(fake *f)
{
    long ms = f->delay_ms;
    pthread_mutex_unlock(&f->mu);
    fake_sleep_ms(ms);
    pthread_mutex_lock(&f->mu);
}

static inline json_object *find_quota(fake *f, const char *path);

static inline gq_code fake_list(void *ctx, const char *path, const kube_list_opts *o,
                                kube_item_fn fn, void *ud, char **rv_out, gq_err *err)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    json_object *arr = fake_collection(f, path), *copy = NULL;
    if (f->quotas_live_only && arr == f->quotas && !strstr(path, "/namespaces/"))
        copy = json_object_new_array();
    else
        json_object_deep_copy(arr, &copy, NULL);
    long rv = FAKE_RV0 + f->seq;
    json_object *changed = f->after_list ? find_quota(f, f->after_list_path) : NULL;
    if (changed && arr == fake_collection(f, f->after_list_path)) {
        json_object *meta = NULL;
        json_object_object_add(changed, "status", J(f->after_list));
        if (json_object_object_get_ex(changed, "metadata", &meta))
            json_object_object_add(meta, "resourceVersion", json_object_new_string("2"));
        f->after_list = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < json_object_array_length(copy) && !rc; i++)
        rc = fn(ud, json_object_array_get_idx(copy, i), err);
    json_object_put(copy);
    char text[32];
    snprintf(text, sizeof text, "%ld", rv);
    if (!rc && rv_out)
        *rv_out = strdup(text);
    return rc;
}

static inline const char *jstr(json_object *o, const char *a, const char *b);

/* The numeric resourceVersion of obj (0 when absent). */
static inline long fake_rv(json_object *obj)
{
    const char *rv = jstr(obj, "metadata", "resourceVersion");
    return rv ? strtol(rv, NULL, 10) : 0;
}

static inline int fake_rv_cmp(const void *a, const void *b)
{
    long x = fake_rv(*(json_object *const *)a), y = fake_rv(*(json_object *const *)b);
    return (x > y) - (x < y);
}

/* Copies of the stored pods changed after resourceVersion *since, oldest
 * change first; *since moves to the newest (f->mu held). */
static inline json_object *fake_changed_pods(fake *f, long *since)
{
    json_object *out = json_object_new_array();
    for (size_t i = 0; i < json_object_array_length(f->pods); i++) {
        json_object *p = json_object_array_get_idx(f->pods, i), *copy = NULL;
        if (fake_rv(p) <= *since)
            continue;
        json_object_deep_copy(p, &copy, NULL);
        json_object_array_add(out, copy);
    }
    json_object_array_sort(out, fake_rv_cmp);
    size_t n = json_object_array_length(out);
    if (n)
        *since = fake_rv(json_object_array_get_idx(out, n - 1));
    return out;
}

/* Copies of the stored GPUQuotas whose resourceVersion differs from the one
 * seen ({"ns/name": rv}) notes, which then holds theirs (f->mu held). */
static inline json_object *fake_changed_quotas(fake *f, json_object *seen)
{
    json_object *out = json_object_new_array();
    for (size_t i = 0; i < json_object_array_length(f->quotas); i++) {
        json_object *q = json_object_array_get_idx(f->quotas, i), *had = NULL, *copy = NULL;
        char key[256];
        const char *rv = jstr(q, "metadata", "resourceVersion");
        snprintf(key, sizeof key, "%s/%s", jstr(q, "metadata", "namespace"),
                 jstr(q, "metadata", "name"));
        if (!rv || (json_object_object_get_ex(seen, key, &had) &&
                    !strcmp(json_object_get_string(had), rv)))
            continue;
        json_object_object_add(seen, key, json_object_new_string(rv));
        json_object_deep_copy(q, &copy, NULL);
        json_object_array_add(out, copy);
    }
    return out;
}

static inline gq_code fake_watch(void *ctx, const char *path, const kube_watch_opts *o,
                                 kube_event_fn fn, void *ud, gq_err *err)
{
    fake *f = ctx;
    bool pods = f->watch_pods && strstr(path, "/pods");
    bool quotas = f->watch_quotas && strstr(path, "/gpuquotas");
    long since = o->resource_version ? strtol(o->resource_version, NULL, 10) : 0;
    gq_code rc = GQ_OK;
    json_object *seen = json_object_new_object();
    if (quotas) { /* what the list brought */
        pthread_mutex_lock(&f->mu);
        json_object_put(fake_changed_quotas(f, seen));
        pthread_mutex_unlock(&f->mu);
    }
    while (!rc && !atomic_load(o->stop)) {
        if (quotas) {
            pthread_mutex_lock(&f->mu);
            json_object *changed = fake_changed_quotas(f, seen);
            pthread_mutex_unlock(&f->mu);
            for (size_t i = 0; !rc && i < json_object_array_length(changed); i++)
                rc = fn(ud, KUBE_EVENT_MODIFIED, json_object_array_get_idx(changed, i), err);
            json_object_put(changed);
        }
        if (pods) {
            pthread_mutex_lock(&f->mu);
            json_object *changed = fake_changed_pods(f, &since), *gone = f->deleted;
            f->deleted = NULL;
            pthread_mutex_unlock(&f->mu);
            for (size_t i = 0; !rc && i < json_object_array_length(changed); i++)
                rc = fn(ud, KUBE_EVENT_MODIFIED, json_object_array_get_idx(changed, i), err);
            for (size_t i = 0; !rc && gone && i < json_object_array_length(gone); i++)
                rc = fn(ud, KUBE_EVENT_DELETED, json_object_array_get_idx(gone, i), err);
            json_object_put(changed);
            json_object_put(gone);
        }
        fake_sleep_ms(5);
    }
    json_object_put(seen);
    return rc;
}

/* Delete the stored pod named name (its watch, with watch_pods, brings
 * the deletion). */
static inline void fake_delete_pod(fake *f, const char *name)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < json_object_array_length(f->pods); i++) {
        json_object *p = json_object_array_get_idx(f->pods, i), *meta = NULL, *n = NULL;
        if (!json_object_object_get_ex(p, "metadata", &meta) ||
            !json_object_object_get_ex(meta, "name", &n) || strcmp(json_object_get_string(n), name))
            continue;
        if (!f->deleted)
            f->deleted = json_object_new_array();
        json_object_array_add(f->deleted, json_object_get(p));
        json_object_array_del_idx(f->pods, i, 1);
        break;
    }
    pthread_mutex_unlock(&f->mu);
}

static inline const char *jstr(json_object *o, const char *a, const char *b)
{
    json_object *x, *y;
    if (!json_object_object_get_ex(o, a, &x))
        return NULL;
    if (!b)
        return json_object_get_string(x);
    return json_object_object_get_ex(x, b, &y) ? json_object_get_string(y) : NULL;
}

/* The stored quota at path: the GPUTenantQuota or GPUQuota named by its
 * last segment, the GPUQuota in the namespace the path names (any when it
 * names none). */
static inline json_object *find_quota(fake *f, const char *path)
{
    const char *name = strrchr(path, '/') + 1, *at = strstr(path, "/namespaces/");
    char ns[128] = "";
    if (at && sscanf(at, "/namespaces/%127[^/]", ns) != 1)
        return NULL;
    json_object *arr = strstr(path, "gputenantquotas") ? f->tenants : f->quotas;
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *q = json_object_array_get_idx(arr, i);
        const char *qns = jstr(q, "metadata", "namespace");
        if (!strcmp(jstr(q, "metadata", "name"), name) && (!ns[0] || (qns && !strcmp(qns, ns))))
            return q;
    }
    return NULL;
}

/* The index in f->pods of the pod at path /api/v1/namespaces/NS/pods/NAME,
 * or -1. */
static inline int find_pod(fake *f, const char *path)
{
    char ns[128] = "", name[128] = "";
    if (sscanf(path, "/api/v1/namespaces/%127[^/]/pods/%127s", ns, name) != 2)
        return -1;
    for (size_t i = 0; i < json_object_array_length(f->pods); i++) {
        json_object *p = json_object_array_get_idx(f->pods, i);
        if (!strcmp(jstr(p, "metadata", "name"), name) &&
            !strcmp(jstr(p, "metadata", "namespace"), ns))
            return (int)i;
    }
    return -1;
}

static inline gq_code fake_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->gets++;
    fake_begin(f, FAKE_GET);
    if (f->delay_ms)
        fake_delay(f);
    json_object *q = NULL, *copy = NULL;
    if (strstr(path, "/pods/")) {
        int i = find_pod(f, path);
        q = i >= 0 ? json_object_array_get_idx(f->pods, (size_t)i) : NULL;
    } else if (f->get_errors > 0) {
        f->get_errors--;
        f->status_gets++;
        f->in_flight[FAKE_GET]--;
        pthread_mutex_unlock(&f->mu);
        return gq_err_set(err, GQ_EHTTP, "Internal error occurred");
    } else {
        q = find_quota(f, path);
        f->status_gets++;
    }
    if (q)
        json_object_deep_copy(q, &copy, NULL);
    f->in_flight[FAKE_GET]--;
    pthread_mutex_unlock(&f->mu);
    if (!copy)
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    *out = copy;
    return GQ_OK;
}

/* Whether status write body, to stored quota q, is refused: a stale
 * resourceVersion, or a fault injected. */
static inline gq_code fake_refuse(fake *f, const char *path, json_object *q, json_object *body,
                                  gq_err *err)
{
    json_object *st = NULL, *res = NULL;
    json_object_object_get_ex(body, "status", &st);
    bool charges =
        json_object_object_get_ex(st, "reservations", &res) && json_object_array_length(res) > 0;
    const char *once = f->refuse_charge_once;
    size_t rlen = once ? strlen(once) : 0, plen = strlen(path);
    if (charges && rlen && plen >= rlen && !strcmp(path + plen - rlen, once)) {
        f->refuse_charge_once = NULL;
        return gq_err_set(err, GQ_ECONFLICT, "the object has been modified");
    }
    if (f->conflicts > 0 || (charges && f->charge_conflicts > 0)) {
        if (f->conflicts > 0)
            f->conflicts--;
        else
            f->charge_conflicts--;
        return gq_err_set(err, GQ_ECONFLICT, "the object has been modified");
    }
    if (charges && f->charge_errors > 0) {
        f->charge_errors--;
        return gq_err_set(err, GQ_EHTTP, "Internal error occurred");
    }
    if (!q)
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    const char *sent = jstr(body, "metadata", "resourceVersion"),
               *have = jstr(q, "metadata", "resourceVersion");
    if (sent && have && strcmp(sent, have))
        return gq_err_set(err, GQ_ECONFLICT, "the object has been modified");
    return GQ_OK;
}

/* The keys of status's reservations into keys ({key: count}). */
static inline void fake_keys(json_object *status, json_object *keys)
{
    json_object *res = NULL, *n = NULL;
    if (!status || !json_object_object_get_ex(status, "reservations", &res))
        return;
    for (size_t i = 0; i < json_object_array_length(res); i++) {
        const char *k = jstr(json_object_array_get_idx(res, i), "key", NULL);
        if (!k)
            continue;
        int had = json_object_object_get_ex(keys, k, &n) ? json_object_get_int(n) : 0;
        json_object_object_add(keys, k, json_object_new_int(had + 1));
    }
}

/* Count, in f->adds, the reservations status (accepted for quota q at
 * path) adds to what q held, and in f->dup_keys a status holding one key
 * twice (f->mu held). */
static inline void fake_count_adds(fake *f, const char *path, json_object *q, json_object *status)
{
    json_object *before = json_object_new_object(), *after = json_object_new_object(), *st = NULL;
    if (json_object_object_get_ex(q, "status", &st))
        fake_keys(st, before);
    fake_keys(status, after);
    if (!f->adds)
        f->adds = json_object_new_object();
    json_object *per = NULL;
    if (!json_object_object_get_ex(f->adds, path, &per)) {
        per = json_object_new_object();
        json_object_object_add(f->adds, path, per);
    }
    json_object_object_foreach(after, key, count)
    {
        json_object *n = NULL;
        if (json_object_get_int(count) > 1)
            f->dup_keys++;
        if (json_object_object_get_ex(before, key, NULL))
            continue;
        int had = json_object_object_get_ex(per, key, &n) ? json_object_get_int(n) : 0;
        json_object_object_add(per, key, json_object_new_int(had + 1));
    }
    json_object_put(before);
    json_object_put(after);
}

static inline gq_code fake_update_status(void *ctx, const char *path, json_object *body,
                                         json_object **out, gq_err *err)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    fake_begin(f, FAKE_STATUS);
    if (f->delay_ms)
        fake_delay(f);
    json_object *q = find_quota(f, path), *st = NULL, *meta = NULL;
    gq_code rc = fake_refuse(f, path, q, body, err);
    if (rc == GQ_ECONFLICT)
        f->refused_409++;
    if (rc)
        goto out;
    json_object_object_get_ex(body, "status", &st);
    fake_count_adds(f, path, q, st);
    f->writes++;
    snprintf(f->last_write_path, sizeof f->last_write_path, "%s", path);
    json_object_put(f->last_status);
    f->last_status = NULL; /* json_object_deep_copy writes only to a NULL destination */
    json_object_deep_copy(st, &f->last_status, NULL);
    json_object *copy = NULL;
    json_object_deep_copy(st, &copy, NULL);
    json_object_object_add(q, "status", copy);
    if (json_object_object_get_ex(q, "metadata", &meta)) {
        char rv[32];
        const char *have = jstr(q, "metadata", "resourceVersion");
        snprintf(rv, sizeof rv, "%ld", (have ? strtol(have, NULL, 10) : 0) + 1);
        json_object_object_add(meta, "resourceVersion", json_object_new_string(rv));
    }
    if (out)
        json_object_deep_copy(q, out, NULL);
out:
    f->in_flight[FAKE_STATUS]--;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static inline gq_code fake_create(void *ctx, const char *path, json_object *body, json_object **out,
                                  gq_err *err)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->events++;
    if (!strcmp(jstr(body, "reason", NULL), "Queued"))
        f->queued_events++;
    json_object *copy = NULL, *reason = NULL;
    json_object_deep_copy(body, &copy, NULL);
    json_object_object_get_ex(body, "reason", &reason);
    json_object_object_add(f->events_by_reason, json_object_get_string(reason), copy);
    pthread_mutex_unlock(&f->mu);
    return GQ_OK;
}

/* Whether the quota at path charges the pods of namespace ns: a
 * GPUTenantQuota, or a GPUQuota of ns. */
static inline bool fake_governs(const char *path, const char *ns)
{
    char qns[128] = "";
    const char *at = strstr(path, "/namespaces/");
    return !at || (sscanf(at, "/namespaces/%127[^/]", qns) == 1 && ns && !strcmp(qns, ns));
}

/* Whether quota q's status holds a reservation keyed uid (f->mu held). */
static inline bool fake_holds(json_object *q, const char *uid)
{
    json_object *st = NULL, *res = NULL;
    if (!q || !uid || !json_object_object_get_ex(q, "status", &st) ||
        !json_object_object_get_ex(st, "reservations", &res))
        return false;
    for (size_t i = 0; i < json_object_array_length(res); i++)
        if (!strcmp(jstr(json_object_array_get_idx(res, i), "key", NULL), uid))
            return true;
    return false;
}

/* The next injected answer for a PATCH of pod name, 0 when none (f->mu
 * held). */
static inline int fake_patch_fault(fake *f, const char *name)
{
    json_object *codes = NULL;
    if (!f->patch_faults || !json_object_object_get_ex(f->patch_faults, name, &codes) ||
        !json_object_array_length(codes))
        return 0;
    int code = json_object_get_int(json_object_array_get_idx(codes, 0));
    json_object_array_del_idx(codes, 0, 1);
    return code;
}

/* Put the gate f->gate_moves names for pod name first among pod's gates,
 * once (f->mu held). */
static inline void fake_move_gate(fake *f, json_object *pod, const char *name)
{
    json_object *gate = NULL, *spec = NULL, *gates = NULL;
    if (!pod || !f->gate_moves || !json_object_object_get_ex(f->gate_moves, name, &gate) ||
        !json_object_object_get_ex(pod, "spec", &spec) ||
        !json_object_object_get_ex(spec, "schedulingGates", &gates))
        return;
    json_object *moved = json_object_new_array(), *g = json_object_new_object();
    json_object_object_add(g, "name", json_object_get(gate));
    json_object_array_add(moved, g);
    for (size_t i = 0; i < json_object_array_length(gates); i++)
        json_object_array_add(moved, json_object_get(json_object_array_get_idx(gates, i)));
    json_object_object_add(spec, "schedulingGates", moved);
    json_object_object_del(f->gate_moves, name);
}

/* Apply patch to the pod at path (f->mu held): 404 when there is none, 422
 * when an operation fails (a test, say), as kube-apiserver answers. */
static inline gq_code fake_apply_patch(fake *f, const char *path, json_object *patch, gq_err *err)
{
    int i = find_pod(f, path);
    if (i < 0)
        return gq_err_set(err, GQ_ENOTFOUND, "pods not found");
    json_object *now = NULL;
    gq_err e;
    if (gq_patch_apply(json_object_array_get_idx(f->pods, (size_t)i), patch, &now, &e) != GQ_OK)
        return gq_err_set(err, GQ_EHTTP, "the server rejected our request: %s", e.msg);
    json_object *meta = NULL;
    if (json_object_object_get_ex(now, "metadata", &meta)) {
        char rv[32];
        snprintf(rv, sizeof rv, "%ld", FAKE_RV0 + ++f->seq);
        json_object_object_add(meta, "resourceVersion", json_object_new_string(rv));
    }
    json_object_array_put_idx(f->pods, (size_t)i, now);
    return GQ_OK;
}

/* A pod's JSON Patch (the queue admitter's ungate): checked against the
 * charges, logged, applied unless a fault is injected. */
static inline gq_code fake_patch_json(void *ctx, const char *path, json_object *patch,
                                      json_object **out, gq_err *err)
{
    fake *f = ctx;
    const char *name = strrchr(path, '/') + 1;
    pthread_mutex_lock(&f->mu);
    f->patches++;
    snprintf(f->last_patch_path, sizeof f->last_patch_path, "%s", path);
    json_object_put(f->last_patch);
    f->last_patch = NULL; /* json_object_deep_copy writes only to a NULL destination */
    json_object_deep_copy(patch, &f->last_patch, NULL);
    long start = fake_begin(f, FAKE_PATCH);
    int at = find_pod(f, path);
    json_object *pod = at >= 0 ? json_object_array_get_idx(f->pods, (size_t)at) : NULL;
    const char *uid = jstr(pod, "metadata", "uid"), *ns = jstr(pod, "metadata", "namespace");
    for (size_t k = 0; k < f->n_paid; k++)
        if (fake_governs(f->paid[k], ns) && !fake_holds(find_quota(f, f->paid[k]), uid))
            f->unpaid++;
    fake_move_gate(f, pod, name);
    int code = fake_patch_fault(f, name);
    if (f->delay_ms)
        fake_delay(f);
    gq_code rc = code == 404   ? gq_err_set(err, GQ_ENOTFOUND, "pods not found")
                 : code == 409 ? gq_err_set(err, GQ_ECONFLICT, "the object has been modified")
                 : code        ? gq_err_set(err, GQ_EHTTP, "injected %d", code)
                               : fake_apply_patch(f, path, patch, err);
    json_object *entry = json_object_new_object();
    json_object_object_add(entry, "pod", json_object_new_string(name));
    json_object_object_add(entry, "start", json_object_new_int64(start));
    json_object_object_add(entry, "end", json_object_new_int64(++f->seq));
    json_object_object_add(entry, "code",
                           json_object_new_int(rc == GQ_OK ? 200
                                               : code      ? code
                                                           : 422));
    if (!f->patch_log)
        f->patch_log = json_object_new_array();
    json_object_array_add(f->patch_log, entry);
    f->in_flight[FAKE_PATCH]--;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static inline int64_t fixed_now(void *ud)
{
    return NOW;
}

/* A fake holding the given arrays (JSON with ' for "). */
static inline void fake_setup(fake *f, const char *pods, const char *quotas, const char *tenants,
                              const char *nss)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    f->pods = J(pods);
    f->quotas = J(quotas);
    f->tenants = J(tenants);
    f->nss = J(nss);
    f->events_by_reason = json_object_new_object();
}

static inline void fake_dispose(fake *f)
{
    json_object_put(f->pods);
    json_object_put(f->quotas);
    json_object_put(f->tenants);
    json_object_put(f->nss);
    json_object_put(f->last_status);
    json_object_put(f->events_by_reason);
    json_object_put(f->patch_faults);
    json_object_put(f->gate_moves);
    json_object_put(f->adds);
    json_object_put(f->patch_log);
    json_object_put(f->last_patch);
    json_object_put(f->deleted);
    pthread_mutex_destroy(&f->mu);
}

static inline kube_api fake_api(fake *f)
{
    kube_api a = {.ctx = f,
                  .get = fake_get,
                  .create = fake_create,
                  .update_status = fake_update_status,
                  .patch_json = fake_patch_json,
                  .list = fake_list,
                  .watch = fake_watch};
    return a;
}

/* Wait until the fake saw n writes (5 s at most). */
static inline void wait_writes(fake *f, int n)
{
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&f->mu);
        int w = f->writes;
        pthread_mutex_unlock(&f->mu);
        if (w >= n)
            return;
        fake_sleep_ms(10);
    }
    fail_msg("expected %d status writes, saw %d", n, f->writes);
}

/* The registry every controller of these tests renders its families by
 * (one controller at a time). */
static http_metrics *registry;

static inline gq_code ctl_controller_metrics(ctl_controller *c, char **text, size_t *len)
{
    (void)c;
    return http_metrics_render(registry, text, len);
}

/* Wait until the metrics text holds line (10 s at most). */
static inline void wait_metric(ctl_controller *c, const char *line)
{
    for (int i = 0; i < 1000; i++) {
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(ctl_controller_metrics(c, &text, &len), GQ_OK);
        bool found = strstr(text, line) != NULL;
        free(text);
        if (found)
            return;
        fake_sleep_ms(10);
    }
    fail_msg("metrics never showed %s", line);
}

/* Wait until the metrics text holds the unlabelled series name at min or
 * above (10 s at most): a count that may move on past min before a look. */
static inline void wait_metric_min(ctl_controller *c, const char *name, double min)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "\n%s ", name);
    for (int i = 0; i < 1000; i++) {
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(ctl_controller_metrics(c, &text, &len), GQ_OK);
        const char *at = strstr(text, prefix);
        bool found = at && strtod(at + strlen(prefix), NULL) >= min;
        free(text);
        if (found)
            return;
        fake_sleep_ms(10);
    }
    fail_msg("metrics never showed %s at %g or more", name, min);
}

/* A controller over f, started: one reconcile worker, the fixed clock,
 * requeues after 10 ms at first. */
static inline void run(fake *f, ctl_controller **out, gq_config **cfg, kube_api *api)
{
    gq_err err;
    assert_int_equal(gq_config_default(cfg, &err), GQ_OK);
    *api = fake_api(f);
    ctl_controller_opts o = {.api = api,
                             .cfg = *cfg,
                             .workers = 1,
                             .now = fixed_now,
                             .identity = "test",
                             .metrics = registry,
                             .backoff_min_ms = 10,
                             .ungate_inflight = f->ungate_inflight,
                             .reservation_grace_ms = f->reservation_grace_ms};
    assert_int_equal(ctl_controller_new(&o, out, &err), GQ_OK);
    assert_int_equal(ctl_controller_start(*out, &err), GQ_OK);
}

static inline void stop(ctl_controller *c, gq_config *cfg)
{
    ctl_controller_stop(c);
    ctl_controller_free(c);
    gq_config_free(cfg);
}

#endif
