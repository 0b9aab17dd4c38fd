/* The running controller's small shared pieces (ctl_run.h): clocks, keys
 * and paths, per-quota state, requeues and Events. controller.c and admit.c
 * both use them; they call neither. */
#include "controller/ctl_run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gq_log.h"
#include "common/hash.h"
#include "common/json_member.h"
#include "common/rfc3339.h"

const double ctl_wait_bounds[W_BUCKETS] = {0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400};

int64_t ctl_wall_now(ctl_controller *c)
{
    return c->o.now ? c->o.now(c->o.clock_ud) : (int64_t)time(NULL);
}

int64_t ctl_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

bool ctl_quota_path(char *path, size_t cap, const char *ns, const char *name)
{
    int n = ns[0] ? snprintf(path, cap, API_GQ "/namespaces/%s/gpuquotas/%s", ns, name)
                  : snprintf(path, cap, API_GQ "/gputenantquotas/%s", name);
    return n > 0 && (size_t)n < cap;
}

bool ctl_make_key(char key[KEY_MAX], char kind, const char *ns, const char *name)
{
    int n = kind == 'q' || kind == 'c' ? snprintf(key, KEY_MAX, "%c/%s/%s", kind, ns, name)
            : kind == 'u'              ? snprintf(key, KEY_MAX, "u/%s", ns)
                                       : snprintf(key, KEY_MAX, "t/%s", name);
    return n > 0 && n < KEY_MAX;
}

kstate *ctl_ks_get(ctl_controller *c, const char *key, bool create)
{
    kstate *k = GQ_HTAB_FIND_NAMED(&c->ks, kstate, node, key, key);
    if (k || !create)
        return k;
    if ((k = GQ_HTAB_ADD_NAMED(&c->ks, kstate, node, key, key, NULL)))
        http_histogram_init(&k->wait, ctl_wait_bounds, W_BUCKETS);
    return k;
}

json_object *ctl_quota_newest(ctl_controller *c, const char *key, json_object *cached)
{
    if (!cached)
        return NULL;
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, false);
    const char *rv = gq_json_meta_string(cached, "resourceVersion");
    if (ks && ks->written) {
        json_object *w = NULL;
        if (rv && ks->sent_rv && !strcmp(rv, ks->sent_rv)) {
            if (json_object_deep_copy(ks->written, &w, NULL) == 0) {
                json_object_put(cached);
                cached = w;
            }
        } else {
            /* The cache moved on: it holds that version or a later one. */
            json_object_put(ks->written);
            ks->written = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return cached;
}

void ctl_quota_remember(ctl_controller *c, const char *key, char *older_rv, json_object *obj)
{
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, true);
    if (ks) {
        free(ks->sent_rv);
        json_object_put(ks->written);
        ks->sent_rv = older_rv;
        ks->written = obj;
        older_rv = NULL;
        obj = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(older_rv);
    json_object_put(obj);
}

int ctl_quota_handoff(ctl_controller *c, const char *key, json_object *obj)
{
    const char *rv = gq_json_meta_string(obj, "resourceVersion");
    int taken = 0;
    pthread_mutex_lock(&c->mu);
    kstate *ks = rv ? ctl_ks_get(c, key, true) : NULL;
    char *copy = NULL;
    if (ks && ks->handoff_rv && !strcmp(ks->handoff_rv, rv)) {
        taken = -1;
    } else if (ks && (copy = strdup(rv))) {
        free(ks->handoff_rv);
        json_object_put(ks->handoff);
        ks->handoff_rv = copy;
        ks->handoff = obj;
        taken = 1;
    }
    pthread_mutex_unlock(&c->mu);
    if (taken <= 0)
        json_object_put(obj);
    return taken;
}

json_object *ctl_quota_take_handoff(ctl_controller *c, const char *key, const char *rv)
{
    json_object *out = NULL;
    pthread_mutex_lock(&c->mu);
    kstate *ks = ctl_ks_get(c, key, false);
    if (ks && ks->handoff) {
        const char *hrv = gq_json_meta_string(ks->handoff, "resourceVersion");
        if (rv && hrv && !strcmp(rv, hrv))
            out = ks->handoff;
        else
            json_object_put(ks->handoff);
        ks->handoff = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

/* core/v1 Event on the quota (namespace "default" for cluster-scoped
 * tenants, as Kubernetes does). Best effort: failures are logged. */
/* At most CTL_EVENT_BURST Events at once and CTL_EVENT_RATE a second after
 * that, whatever the cluster does: Events are for people, and a controller
 * that posts one per pod per change must not be turned into a load on
 * kube-apiserver and etcd (client-go's recorder rate-limits likewise). */
#define CTL_EVENT_BURST 100
#define CTL_EVENT_RATE 10.0

static bool event_token(ctl_controller *c)
{
    uint64_t now = ctl_mono_us();
    pthread_mutex_lock(&c->mu);
    if (!c->ev_refilled_us) {
        c->ev_tokens = CTL_EVENT_BURST;
    } else {
        c->ev_tokens += (double)(now - c->ev_refilled_us) / 1e6 * CTL_EVENT_RATE;
        if (c->ev_tokens > CTL_EVENT_BURST)
            c->ev_tokens = CTL_EVENT_BURST;
    }
    c->ev_refilled_us = now;
    bool ok = c->ev_tokens >= 1;
    if (ok)
        c->ev_tokens -= 1;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void ctl_post_event(ctl_controller *c, json_object *obj, const ctl_about *about, const char *reason,
                    const char *message, int64_t now)
{
    const char *api_version = about->api_version, *kind = about->kind, *ns = about->ns,
               *name = about->name;
    if (!event_token(c)) {
        atomic_fetch_add(&c->events_dropped, 1);
        return;
    }
    char ts[GQ_RFC3339_MAX], evname[320], path[320];
    const char *evns = ns[0] ? ns : "default";
    json_object *meta = gq_json_member(obj, "metadata");
    gq_time_format_rfc3339(now, ts);
    snprintf(evname, sizeof evname, "%.240s.%" PRIx64, name, (uint64_t)ctl_mono_us() * 1000);
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

/* The queue only fails on out-of-memory; the periodic resync recovers. */
void ctl_backoff(ctl_controller *c, const char *key)
{
    if (ctl_workqueue_add_rate_limited(c->queue, key, NULL))
        GQ_ERROR("%s: cannot requeue: out of memory", key);
}

void ctl_requeue_after(ctl_controller *c, const char *key, long ms)
{
    if (ctl_workqueue_add_after(c->queue, key, ms))
        GQ_ERROR("%s: cannot requeue: out of memory", key);
}

void ctl_wait_observe(ctl_controller *c, const char *qkey, double s)
{
    pthread_mutex_lock(&c->mu);
    kstate *k = ctl_ks_get(c, qkey, true);
    if (k)
        http_histogram_observe(&k->wait, s);
    pthread_mutex_unlock(&c->mu);
}

/* Whether list (a JSON array of strings) holds one of a or b. */
static bool lists(json_object *list, const char *a, const char *b)
{
    size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(list, i));
        if (v && (!strcmp(v, a) || (b && !strcmp(v, b))))
            return true;
    }
    return false;
}

/* Whether a webhook's rules may send it a pod CREATE. */
static bool sees_pod_create(json_object *hook)
{
    json_object *rules = gq_json_get_array(hook, "rules");
    size_t n = rules ? json_object_array_length(rules) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        if (lists(gq_json_member(r, "apiGroups"), "", "*") &&
            lists(gq_json_member(r, "operations"), "CREATE", "*") &&
            (lists(gq_json_member(r, "resources"), "pods", "*") ||
             lists(gq_json_member(r, "resources"), "*/*", NULL)))
            return true;
    }
    return false;
}

long ctl_admission_bound_ms(json_object *configs, const char *own)
{
    long longest = 0;
    size_t n =
        json_object_is_type(configs, json_type_array) ? json_object_array_length(configs) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *cfg = json_object_array_get_idx(configs, i);
        const char *name = gq_json_meta_string(cfg, "name");
        json_object *hooks = gq_json_get_array(cfg, "webhooks");
        if (name && own && !strcmp(name, own))
            continue;
        for (size_t j = 0; hooks && j < json_object_array_length(hooks); j++) {
            json_object *h = json_object_array_get_idx(hooks, j);
            json_object *t = gq_json_get_typed(h, "timeoutSeconds", json_type_int);
            long secs = t ? (long)json_object_get_int64(t) : 10;
            if (secs < 1 || secs > 30)
                secs = 30; /* kube-apiserver allows 1..30 */
            if (sees_pod_create(h) && secs * 1000 > longest)
                longest = secs * 1000;
        }
    }
    return longest + CTL_ADMISSION_SLACK_MS;
}

gq_code ctl_keep_item(void *ud, json_object *item, gq_err *err)
{
    if (json_object_array_add(ud, json_object_get(item))) {
        json_object_put(item);
        return gq_err_oom(err);
    }
    return GQ_OK;
}
