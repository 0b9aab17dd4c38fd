/* Leader election on a coordination.k8s.io/v1 Lease, following client-go's
 * rules: a lease held by someone else is taken over only after it has not
 * changed for leaseDurationSeconds as observed on OUR clock (no trust in
 * remote clocks), or at once when its holderIdentity is empty (released). */
#include "kube/kube_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gq_log.h"
#include "common/json_member.h"

struct kube_leader_elect {
    const kube_api *api;
    kube_leader_opts o;
    char *ns, *name, *identity;
    char *path, *collection;
    long lease_s;

    char *observed;      /* holder|renewTime|transitions of the last record seen */
    int64_t observed_ms; /* when it last changed, our monotonic clock */
    /* The Lease as our last write of it came back, while we hold it: the
     * next renewal writes it back without reading it first (client-go's
     * fast path), one request instead of two. NULL: read first. */
    json_object *held;

    atomic_int stop;
    atomic_int leader;
    pthread_t thread;
    int started;
    unsigned seed;
    const kube_clock *clock; /* never NULL */
};

static const char *spec_str(json_object *spec, const char *k)
{
    const char *s = gq_json_get_string(spec, k);
    return s ? s : "";
}

static int64_t real_mono_ms(void *ud)
{
    return kube_mono_ms();
}

static int64_t real_wall_us(void *ud)
{
    return kube_wall_us();
}

static int real_sleep_ms(void *ud, long ms, const atomic_int *stop)
{
    return kube_sleep_ms(ms, stop);
}

static const kube_clock real_clock = {real_mono_ms, real_wall_us, real_sleep_ms, NULL};

static int64_t mono_ms(const kube_leader_elect *le)
{
    return le->clock->mono_ms(le->clock->ud);
}

static int sleep_ms(kube_leader_elect *le, long ms)
{
    return le->clock->sleep_ms(le->clock->ud, ms, &le->stop);
}

static int64_t spec_int(json_object *spec, const char *k)
{
    json_object *v;
    if (!spec || !json_object_object_get_ex(spec, k, &v) || !json_object_is_type(v, json_type_int))
        return 0;
    return json_object_get_int64(v);
}

/* Fill spec with our claim. transitions is the new leaseTransitions. */
static gq_code fill_spec(kube_leader_elect *le, json_object *spec, const char *acquire,
                         int64_t transitions, int release)
{
    char now[28];
    kube_format_micro_time(le->clock->wall_us(le->clock->ud), now);
    if (json_object_object_add(spec, "holderIdentity",
                               json_object_new_string(release ? "" : le->identity)) ||
        json_object_object_add(spec, "leaseDurationSeconds",
                               json_object_new_int64(release ? 1 : le->lease_s)) ||
        json_object_object_add(spec, "acquireTime",
                               json_object_new_string(acquire ? acquire : now)) ||
        json_object_object_add(spec, "renewTime", json_object_new_string(now)) ||
        json_object_object_add(spec, "leaseTransitions", json_object_new_int64(transitions)))
        return GQ_ENOMEM;
    return GQ_OK;
}

static gq_code create_lease(kube_leader_elect *le, gq_err *err)
{
    gq_code rc = GQ_ENOMEM;
    json_object *lease = json_object_new_object(), *meta = json_object_new_object(),
                *spec = json_object_new_object();
    if (!lease || !meta || !spec)
        goto oom;
    json_object_object_add(meta, "name", json_object_new_string(le->name));
    json_object_object_add(meta, "namespace", json_object_new_string(le->ns));
    json_object_object_add(lease, "apiVersion", json_object_new_string("coordination.k8s.io/v1"));
    json_object_object_add(lease, "kind", json_object_new_string("Lease"));
    json_object_object_add(lease, "metadata", meta);
    meta = NULL;
    if (fill_spec(le, spec, NULL, 0, 0))
        goto oom;
    json_object_object_add(lease, "spec", spec);
    spec = NULL;
    rc = le->api->create(le->api->ctx, le->collection, lease, NULL, err);
    json_object_put(lease);
    return rc;
oom:
    json_object_put(lease);
    json_object_put(meta);
    json_object_put(spec);
    return gq_err_set(err, rc, "out of memory");
}

/* The lease's spec, added empty when it has none (or not an object). */
static gq_code lease_spec(json_object *lease, json_object **out, gq_err *err)
{
    json_object *spec;
    if (!json_object_object_get_ex(lease, "spec", &spec) ||
        !json_object_is_type(spec, json_type_object)) {
        spec = json_object_new_object();
        if (!spec || json_object_object_add(lease, "spec", spec)) {
            json_object_put(spec);
            return gq_err_oom(err);
        }
    }
    *out = spec;
    return GQ_OK;
}

/* Note, on our clock, when the lease's record last changed: a holder's
 * lease expires leaseDurationSeconds after that. */
static gq_code observe(kube_leader_elect *le, json_object *spec, int64_t now, gq_err *err)
{
    char rec[512];
    snprintf(rec, sizeof(rec), "%s|%s|%s|%lld", spec_str(spec, "holderIdentity"),
             spec_str(spec, "renewTime"), spec_str(spec, "acquireTime"),
             (long long)spec_int(spec, "leaseTransitions"));
    if (le->observed && !strcmp(le->observed, rec))
        return GQ_OK;
    char *copy = strdup(rec);
    if (!copy)
        return gq_err_oom(err);
    free(le->observed);
    le->observed = copy;
    le->observed_ms = now;
    return GQ_OK;
}

/* Write lease (ours, spec filled) with its resourceVersion: an optimistic
 * write. On success the answer is kept as le->held unless we released. */
static gq_code write_lease(kube_leader_elect *le, json_object *lease, int release, gq_err *err)
{
    json_object *answer = NULL;
    gq_code rc = le->api->update(le->api->ctx, le->path, lease, &answer, err);
    if (rc == GQ_OK && !release && answer && json_object_is_type(answer, json_type_object)) {
        le->held = answer;
        answer = NULL;
    }
    json_object_put(answer);
    return rc;
}

/* Renew the lease we hold from the object our last write returned. Any
 * failure (a conflict: someone else wrote it) leaves the slow path to read
 * the lease and decide. */
static gq_code renew_held(kube_leader_elect *le, gq_err *err)
{
    json_object *lease = le->held, *spec = NULL;
    le->held = NULL;
    gq_code rc = lease_spec(lease, &spec, err);
    char acquire[64];
    if (!rc) {
        snprintf(acquire, sizeof(acquire), "%s", spec_str(spec, "acquireTime"));
        if (fill_spec(le, spec, acquire[0] ? acquire : NULL, spec_int(spec, "leaseTransitions"), 0))
            rc = gq_err_oom(err);
    }
    if (!rc)
        rc = write_lease(le, lease, 0, err);
    json_object_put(lease);
    return rc;
}

/* One round of client-go's tryAcquireOrRenew (release: give the lease up
 * if we hold it). Returns GQ_OK when we hold (or released) the lease,
 * GQ_EDENIED when another holder's lease is still valid. */
static gq_code try_acquire(kube_leader_elect *le, int release, gq_err *err)
{
    gq_code rc;
    json_object *lease = NULL, *spec = NULL;
    if (le->held && !release && renew_held(le, err) == GQ_OK)
        return GQ_OK;
    json_object_put(le->held);
    le->held = NULL;
    gq_err_clear(err);
    rc = le->api->get(le->api->ctx, le->path, &lease, err);
    if (rc == GQ_ENOTFOUND && !release) {
        rc = create_lease(le, err);
        if (rc == GQ_EEXISTS)
            rc = gq_err_set(err, GQ_EDENIED, "lease created concurrently by another replica");
        return rc;
    }
    if (rc)
        return rc;
    rc = lease_spec(lease, &spec, err);
    if (rc)
        goto out;
    int64_t now = mono_ms(le);
    rc = observe(le, spec, now, err);
    if (rc)
        goto out;
    const char *holder = spec_str(spec, "holderIdentity");
    int64_t dur = spec_int(spec, "leaseDurationSeconds");
    int64_t transitions = spec_int(spec, "leaseTransitions");
    int mine = !strcmp(holder, le->identity);
    if (release && !mine) {
        rc = GQ_OK; /* nothing to give up */
        goto out;
    }
    if (!mine && holder[0] && le->observed_ms + dur * 1000 > now) {
        rc = gq_err_set(err, GQ_EDENIED, "lease %s/%s held by %s", le->ns, le->name, holder);
        goto out;
    }
    char acquire[64];
    snprintf(acquire, sizeof(acquire), "%s", spec_str(spec, "acquireTime"));
    rc = fill_spec(le, spec, mine && !release && acquire[0] ? acquire : NULL,
                   mine ? transitions : transitions + 1, release);
    if (rc) {
        rc = gq_err_set(err, rc, "out of memory");
        goto out;
    }
    /* metadata.resourceVersion from the GET makes this an optimistic write. */
    rc = write_lease(le, lease, release, err);
    if (rc == GQ_ECONFLICT)
        rc = gq_err_set(err, GQ_EDENIED, "lease %s/%s changed concurrently", le->ns, le->name);
out:
    json_object_put(lease);
    return rc;
}

static long jittered(kube_leader_elect *le, long ms)
{
    /* client-go's JitterFactor 1.2: wait in [retry, 2.2 * retry). */
    return ms + (long)((double)ms * 1.2 * (rand_r(&le->seed) / ((double)RAND_MAX + 1)));
}

static void *leader_main(void *arg)
{
    kube_leader_elect *le = arg;
    while (!atomic_load(&le->stop)) {
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = try_acquire(le, 0, &err);
        if (rc) {
            if (rc != GQ_EDENIED)
                GQ_WARN("leader election %s/%s: %s", le->ns, le->name, err.msg);
            sleep_ms(le, jittered(le, le->o.retry_ms));
            continue;
        }
        GQ_INFO("leader election %s/%s: %s became leader", le->ns, le->name, le->identity);
        atomic_store(&le->leader, 1);
        if (le->o.on_started)
            le->o.on_started(le->o.ud);
        int64_t last_renew = mono_ms(le);
        while (!atomic_load(&le->stop)) {
            if (sleep_ms(le, le->o.retry_ms))
                break;
            gq_err_clear(&err);
            rc = try_acquire(le, 0, &err);
            if (!rc) {
                last_renew = mono_ms(le);
                continue;
            }
            GQ_WARN("leader election %s/%s: renew failed: %s", le->ns, le->name, err.msg);
            if (rc == GQ_EDENIED || mono_ms(le) - last_renew >= le->o.renew_deadline_ms)
                break;
        }
        if (atomic_load(&le->stop))
            break; /* stop() releases and reports */
        GQ_WARN("leader election %s/%s: %s lost the lease", le->ns, le->name, le->identity);
        atomic_store(&le->leader, 0);
        if (le->o.on_stopped)
            le->o.on_stopped(le->o.ud);
    }
    return NULL;
}

void kube_leader_elect_free(kube_leader_elect *le)
{
    if (!le)
        return;
    kube_leader_elect_stop(le);
    free(le->ns);
    free(le->name);
    free(le->identity);
    free(le->path);
    free(le->collection);
    free(le->observed);
    json_object_put(le->held);
    free(le);
}

gq_code kube_leader_elect_new(const kube_api *api, const kube_leader_opts *o,
                              kube_leader_elect **out, gq_err *err)
{
    if (!api || !o || !o->namespace_ || !o->namespace_[0] || !o->name || !o->name[0] ||
        !o->identity || !o->identity[0])
        return gq_err_set(err, GQ_EINVAL,
                          "leader election: namespace, name and identity are required");
    kube_leader_elect *le = calloc(1, sizeof(*le));
    if (!le)
        return gq_err_oom(err);
    le->api = api;
    le->o = *o;
    if (le->o.lease_ms <= 0)
        le->o.lease_ms = 15000;
    if (le->o.renew_deadline_ms <= 0)
        le->o.renew_deadline_ms = 10000;
    if (le->o.retry_ms <= 0)
        le->o.retry_ms = 2000;
    le->lease_s = (le->o.lease_ms + 999) / 1000;
    le->clock = o->clock ? o->clock : &real_clock;
    le->seed = (unsigned)mono_ms(le) ^ (unsigned)(uintptr_t)le;
    le->ns = strdup(o->namespace_);
    le->name = strdup(o->name);
    le->identity = strdup(o->identity);
    size_t n = strlen(o->namespace_) + strlen(o->name) + 64;
    le->collection = malloc(n);
    le->path = malloc(n);
    if (!le->ns || !le->name || !le->identity || !le->collection || !le->path) {
        kube_leader_elect_free(le);
        return gq_err_oom(err);
    }
    snprintf(le->collection, n, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", le->ns);
    snprintf(le->path, n, "%s/%s", le->collection, le->name);
    *out = le;
    return GQ_OK;
}

gq_code kube_leader_elect_start(kube_leader_elect *le, gq_err *err)
{
    if (le->started)
        return gq_err_set(err, GQ_EINVAL, "leader election already started");
    atomic_store(&le->stop, 0);
    if (pthread_create(&le->thread, NULL, leader_main, le) != 0)
        return gq_err_set(err, GQ_ENOMEM, "leader election: cannot start thread");
    le->started = 1;
    return GQ_OK;
}

void kube_leader_elect_stop(kube_leader_elect *le)
{
    if (!le || !le->started)
        return;
    atomic_store(&le->stop, 1);
    pthread_join(le->thread, NULL);
    le->started = 0;
    if (atomic_load(&le->leader)) {
        gq_err err;
        gq_err_clear(&err);
        if (try_acquire(le, 1, &err))
            GQ_WARN("leader election %s/%s: release failed: %s", le->ns, le->name, err.msg);
        atomic_store(&le->leader, 0);
        if (le->o.on_stopped)
            le->o.on_stopped(le->o.ud);
    }
}

int kube_leader_elect_is_leader(kube_leader_elect *le)
{
    return atomic_load(&le->leader);
}
