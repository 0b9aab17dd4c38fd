#include "webhook/validate.h"

#include "quota/podqueue.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gq_log.h"
#include "common/hash.h"
#include "quota/podcost.h"
#include "quota/policy.h"
#include "common/json_member.h"
#include "webhook/mutation.h"

#define SLOT_BUCKETS 256
#define BACKOFF_CAP_MS 100
#define TAMPER_PREFIX "gpuquota.io/"
#define TAMPER_MSG "changing gpuquota.io/ labels and annotations is reserved to gpuquota"

/* ---- group commit state --------------------------------------------------- */

typedef enum op_kind {
    OP_CHARGE = 0,
    OP_RELEASE = 1, /* remove this admission's reservation (rollback) */
} op_kind;

/* One admission waiting on one quota. Inputs are borrowed from the admitting
 * thread, which blocks until `done`. */
typedef struct pending {
    struct pending *next;
    op_kind op;
    const gq_pod_facts *facts;
    json_object *ns_labels;
    const gq_amounts *charge;
    const gq_reservation *resv; /* keyed by the pod's uid, else the admission uid */
    const gq_reservation *alt;  /* keyed by the admission uid; NULL when resv is */
    const gq_reservation *used; /* the one this charge holds (for rollback) */
    /* Shared ResourceClaims the pod names: their records (claim set), and
     * which of them this charge added (for rollback). charge includes them;
     * resv holds the pod's own part. */
    const gq_reservation *claims;
    size_t n_claims;
    bool claim_added[GQ_POD_MAX_CLAIMS];
    bool done, leader;
    bool final;   /* decided for good (denied or failed) in an earlier round */
    gq_code rc;   /* GQ_OK charged/allowed, GQ_EDENIED, or a store error */
    bool limited; /* the quota governs the pod (a reservation is or was there) */
    bool added;   /* this call wrote the reservation */
    gq_err err;
} pending;

/* All admissions of one process against one quota. */
typedef struct slot {
    struct slot *next;
    gq_quota_kind kind;
    char *ns; /* NULL for tenants */
    char *name;
    bool busy; /* a leader is working */
    pending *head, *tail;
    /* The object our last write stored (or our last fresh read), used in
     * place of the next read; owned by whoever leads the slot. */
    json_object *last;
    /* Whether rounds on `last` tend to land: when other replicas write the
     * same quota they mostly fail, and a failed round costs a write. Below
     * zero, rounds read fresh; every fresh round earns one point back. */
    int last_score;
    pthread_cond_t cv;
} slot;

struct wh_validator {
    const gq_config *cfg;
    wh_store store;
    int64_t ttl;
    char *trusted[WH_TRUSTED_USERS_MAX];
    size_t n_trusted;
    unsigned max_retries, max_batch, backoff_ms, budget_ms;
    int64_t (*now)(void *ud);
    void *now_ud;
    wh_audit *audit;
    wh_metrics *metrics;
    pthread_mutex_t mu;
    slot *buckets[SLOT_BUCKETS];
    atomic_uint_fast64_t batches, conflicts, charged;
};

static int64_t now_s(const wh_validator *v)
{
    return v->now ? v->now(v->now_ud) : (int64_t)time(NULL);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

gq_code wh_validator_new(const gq_config *cfg, const wh_store *store, const wh_validate_opts *o,
                         wh_validator **out, gq_err *err)
{
    static const char *const defaults[] = {WH_TRUSTED_WEBHOOK, WH_TRUSTED_CONTROLLER};
    wh_validate_opts none;
    memset(&none, 0, sizeof(none));
    if (!o)
        o = &none;
    if (!cfg || !store || !store->list_quotas || !store->list_tenant_quotas ||
        !store->list_limit_ranges || !store->namespace_labels || !store->get_quota ||
        !store->update_status)
        return gq_err_set(err, GQ_EINVAL, "validator needs a config and a complete store");
    if (o->reservation_ttl_s < 0)
        return gq_err_set(err, GQ_EINVAL, "reservation TTL must not be negative");
    if (o->n_trusted_users > WH_TRUSTED_USERS_MAX)
        return gq_err_set(err, GQ_ELIMIT, "at most %d trusted users", WH_TRUSTED_USERS_MAX);
    wh_validator *v = calloc(1, sizeof(*v));
    if (!v)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    v->cfg = cfg;
    v->store = *store;
    v->ttl = o->reservation_ttl_s ? o->reservation_ttl_s : WH_RESERVATION_TTL_DEFAULT;
    v->max_retries = o->max_retries ? o->max_retries : WH_CHARGE_RETRIES_DEFAULT;
    v->max_batch = o->max_batch ? o->max_batch : WH_BATCH_MAX_DEFAULT;
    v->backoff_ms = o->backoff_ms ? o->backoff_ms : 2;
    v->budget_ms = o->budget_ms ? o->budget_ms : WH_CHARGE_BUDGET_MS_DEFAULT;
    v->now = o->now;
    v->now_ud = o->now_ud;
    v->audit = o->audit;
    v->metrics = o->metrics;
    const char *const *users = o->trusted_users ? o->trusted_users : defaults;
    size_t n = o->trusted_users ? o->n_trusted_users : 2;
    for (size_t i = 0; i < n; i++) {
        if (!(v->trusted[i] = strdup(users[i] ? users[i] : ""))) {
            wh_validator_free(v);
            return gq_err_set(err, GQ_ENOMEM, "out of memory");
        }
        v->n_trusted++;
    }
    pthread_mutex_init(&v->mu, NULL);
    *out = v;
    return GQ_OK;
}

void wh_validator_free(wh_validator *v)
{
    if (!v)
        return;
    for (size_t b = 0; b < SLOT_BUCKETS; b++) {
        slot *s = v->buckets[b];
        while (s) {
            slot *next = s->next;
            pthread_cond_destroy(&s->cv);
            json_object_put(s->last);
            free(s->ns);
            free(s->name);
            free(s);
            s = next;
        }
    }
    for (size_t i = 0; i < v->n_trusted; i++)
        free(v->trusted[i]);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

void wh_validate_get_stats(wh_validator *v, wh_validate_stats *out)
{
    out->batches = atomic_load(&v->batches);
    out->conflicts = atomic_load(&v->conflicts);
    out->charged = atomic_load(&v->charged);
}

static unsigned slot_hash(gq_quota_kind kind, const char *ns, const char *name)
{
    return (unsigned)((gq_fnv1a_key(ns, name) ^ (uint64_t)kind) % SLOT_BUCKETS);
}

/* The slot of one quota, created on first use. Slots live as long as the
 * validator: one small record per quota ever charged. Call with v->mu held. */
static slot *slot_get(wh_validator *v, gq_quota_kind kind, const char *ns, const char *name)
{
    unsigned h = slot_hash(kind, ns, name);
    for (slot *s = v->buckets[h]; s; s = s->next)
        if (s->kind == kind && !strcmp(s->name, name) && !strcmp(s->ns ? s->ns : "", ns ? ns : ""))
            return s;
    slot *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->kind = kind;
    s->name = strdup(name);
    s->ns = ns ? strdup(ns) : NULL;
    if (!s->name || (ns && !s->ns)) {
        free(s->name);
        free(s->ns);
        free(s);
        return NULL;
    }
    pthread_cond_init(&s->cv, NULL);
    s->next = v->buckets[h];
    v->buckets[h] = s;
    return s;
}

/* ---- one round of a batch -------------------------------------------------- */

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Jittered exponential backoff after a conflict: [base/2, base*3/2) with base
 * doubling per attempt, capped, so replicas that collided spread out. */
static unsigned backoff_delay(const wh_validator *v, unsigned attempt, unsigned *seed)
{
    unsigned base = v->backoff_ms;
    for (unsigned i = 0; i < attempt && base < BACKOFF_CAP_MS; i++)
        base *= 2;
    if (base > BACKOFF_CAP_MS)
        base = BACKOFF_CAP_MS;
    return base / 2 + (unsigned)rand_r(seed) % (base ? base : 1);
}

typedef enum key_state {
    KEY_FREE = 0,
    KEY_SAME_POD, /* this pod holds it already: a retried admission */
    KEY_OTHER_POD,
} key_state;

static bool same_pod(const gq_reservation *a, const gq_reservation *b)
{
    return !strcmp(a->namespace_, b->namespace_) && !strcmp(a->pod, b->pod);
}

/* Who holds r's key: a live reservation of q, or a charge made earlier in
 * this batch. The key alone is not enough: kube-apiserver gives every pod a
 * fresh uid, but a review that did not come from it (posted to /validate
 * directly, or an offline admission of a pod copied from a running one) may
 * carry another pod's uid, and must not ride on that pod's charge (the
 * validating webhook sees the generated name, so different pods differ). */
static key_state key_holder(const gq_quota *q, pending **batch, size_t i, const gq_reservation *r)
{
    for (size_t k = 0; k < q->n_reservations; k++)
        if (!strcmp(q->reservations[k].key, r->key))
            return same_pod(&q->reservations[k], r) ? KEY_SAME_POD : KEY_OTHER_POD;
    for (size_t j = 0; j < i; j++)
        if (batch[j]->added && !strcmp(batch[j]->used->key, r->key))
            return same_pod(batch[j]->used, r) ? KEY_SAME_POD : KEY_OTHER_POD;
    return KEY_FREE;
}

/* Remove the reservation with key from status.reservations; true when found. */
static bool status_remove(json_object *status, const char *key)
{
    json_object *arr, *k;
    if (!json_object_object_get_ex(status, "reservations", &arr) ||
        !json_object_is_type(arr, json_type_array))
        return false;
    size_t n = json_object_array_length(arr);
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(arr, i);
        if (json_object_object_get_ex(r, "key", &k) && json_object_is_type(k, json_type_string) &&
            !strcmp(json_object_get_string(k), key)) {
            json_object_array_del_idx(arr, i, 1);
            return true;
        }
    }
    return false;
}

/* Whether a quota charges the shared claim uid: a claim record of q (live,
 * or counted by the controller), or one an earlier charge of this batch
 * added. */
typedef struct claims_ctx {
    const gq_quota *q;
    pending **batch;
    size_t i;
} claims_ctx;

static bool claim_charged(void *ud, const char *uid)
{
    const claims_ctx *c = ud;
    for (size_t k = 0; c->q && k < c->q->n_reservations; k++)
        if (c->q->reservations[k].claim && !strcmp(c->q->reservations[k].key, uid))
            return true;
    for (size_t j = 0; j < c->i; j++)
        for (size_t k = 0; k < c->batch[j]->n_claims; k++)
            if (c->batch[j]->claim_added[k] && !strcmp(c->batch[j]->claims[k].key, uid))
                return true;
    return false;
}

/* What p adds to q: its own part (p->resv) plus the shared claims q does not
 * charge yet (gq_claims_once); fresh[k] tells which of p->claims those are. */
static void claims_charge(const gq_quota *q, pending **batch, size_t i, const pending *p,
                          gq_amounts *out, bool fresh[GQ_POD_MAX_CLAIMS])
{
    gq_shared_claim sc[GQ_POD_MAX_CLAIMS];
    gq_claim_ref refs[GQ_POD_MAX_CLAIMS];
    claims_ctx cx = {q, batch, i};
    size_t n = p->n_claims < GQ_POD_MAX_CLAIMS ? p->n_claims : GQ_POD_MAX_CLAIMS;
    *out = p->resv->amounts;
    for (size_t k = 0; k < n; k++) {
        const gq_reservation *r = &p->claims[k];
        memset(&sc[k], 0, sizeof(sc[k]));
        snprintf(sc[k].uid, sizeof(sc[k].uid), "%s", r->key);
        sc[k].memory = r->amounts.v[GQ_KEY_GPU_MEMORY];
        sc[k].gpus = r->amounts.v[GQ_KEY_GPUS];
        refs[k] = (gq_claim_ref){&sc[k], k};
        fresh[k] = false;
    }
    size_t kept = gq_claims_once(refs, n, claim_charged, &cx);
    for (size_t k = 0; k < kept; k++) {
        const gq_amounts *a = &p->claims[refs[k].owner].amounts;
        fresh[refs[k].owner] = true;
        for (int key = 0; key < GQ_KEY_COUNT; key++)
            if (__builtin_add_overflow(out->v[key], a->v[key], &out->v[key]))
                out->v[key] = INT64_MAX;
    }
}

static void fail_open_pendings(pending **batch, size_t n, gq_code rc, const gq_err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (batch[i]->final)
            continue;
        batch[i]->final = true;
        batch[i]->rc = rc;
        batch[i]->added = false;
        memset(batch[i]->claim_added, 0, sizeof(batch[i]->claim_added));
        batch[i]->err = *e;
    }
}

static void publish_gauges(wh_validator *v, const gq_quota *q, const gq_amounts *in_use)
{
    if (!v->metrics)
        return;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!q->hard.set[k])
            continue;
        const char *ns = q->namespace_ ? q->namespace_ : "";
        const char *key = gq_qkey_name((gq_qkey)k);
        /* A full gauge table only loses the gauge, never the decision. */
        if (wh_metrics_set_quota(v->metrics, WH_QUOTA_USED, ns, q->name, key,
                                 (double)in_use->v[k]) ||
            wh_metrics_set_quota(v->metrics, WH_QUOTA_HARD, ns, q->name, key, (double)q->hard.v[k]))
            return;
    }
}

/* Returned by a round that worked on the remembered object and must be
 * repeated on a fresh read (it was outdated, or it would deny). */
#define ROUND_STALE GQ_EGONE

/* Reset what a round decided tentatively. */
static void undo_round(pending **batch, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!batch[i]->final) {
            batch[i]->added = false, batch[i]->rc = GQ_OK;
            memset(batch[i]->claim_added, 0, sizeof(batch[i]->claim_added));
        }
}

/* Evaluate the batch on one read and write it back. The read is the object
 * our last write returned when the slot remembers one (a write based on it
 * fails with 409 if anybody else wrote since), else a fresh GET; denials are
 * only decided on a fresh read. Returns GQ_OK when every pending is decided,
 * GQ_ECONFLICT to go round again, ROUND_STALE to go round again at once. */
static gq_code batch_round(wh_validator *v, slot *s, pending **batch, size_t n)
{
    json_object *obj = NULL, *status = NULL, *stored = NULL;
    gq_quota *q = NULL;
    gq_model_limit *mview = NULL; /* q->models with used = in use (names borrowed) */
    gq_err e;
    gq_code rc;
    bool changed = false, fresh = !s->last || s->last_score < 0;
    int64_t now = now_s(v);
    gq_err_clear(&e);

    if (fresh) {
        json_object_put(s->last);
        s->last = NULL;
        if (s->last_score < 0)
            s->last_score++;
    }

    if (!fresh) {
        obj = s->last;
        s->last = NULL;
        rc = GQ_OK;
    } else {
        rc = v->store.get_quota(v->store.ctx, s->kind, s->ns, s->name, &obj, &e);
    }
    if (rc == GQ_ENOTFOUND) {
        /* Deleted since the cache listed it: it governs nothing any more. */
        for (size_t i = 0; i < n; i++)
            if (!batch[i]->final)
                batch[i]->rc = GQ_OK, batch[i]->limited = false, batch[i]->added = false;
        rc = GQ_OK;
        goto out;
    }
    if (rc)
        goto fail_all;
    if (!json_object_object_get_ex(obj, "status", &status) ||
        !json_object_is_type(status, json_type_object)) {
        status = json_object_new_object();
        if (!status || json_object_object_add(obj, "status", status)) {
            json_object_put(status);
            rc = gq_err_set(&e, GQ_ENOMEM, "out of memory");
            goto fail_all;
        }
    }
    /* Expired records go with the next write; corrupt ones too, so one bad
     * record cannot pin the quota (docs/quota-semantics.md). */
    if ((rc = gq_status_drop_expired(status, now, NULL, &e)) || (rc = gq_quota_parse(obj, &q, &e)))
        goto fail_all;
    gq_amounts in_use;
    if ((rc = gq_quota_in_use(q, now, NULL, &in_use, &e)))
        goto fail_all;
    /* Per-model usage the same way: status plus live reservations, carried
     * forward as the batch charges. */
    if (q->n_models && !(mview = calloc(q->n_models, sizeof(*mview)))) {
        rc = gq_err_set(&e, GQ_ENOMEM, "out of memory");
        goto fail_all;
    }
    for (size_t i = 0; i < q->n_models; i++) {
        mview[i] = q->models[i];
        if ((rc = gq_quota_model_in_use(q, &q->models[i], now, NULL, &mview[i].used, &e)))
            goto fail_all;
    }

    for (size_t i = 0; i < n; i++) {
        pending *p = batch[i];
        if (p->final)
            continue;
        p->added = false;
        p->rc = GQ_OK;
        memset(p->claim_added, 0, sizeof(p->claim_added));
        if (p->op == OP_RELEASE) {
            if (status_remove(status, p->resv->key))
                changed = true;
            for (size_t k = 0; k < p->n_claims; k++)
                if (p->claim_added[k] && status_remove(status, p->claims[k].key))
                    changed = true;
            continue;
        }
        p->used = p->resv;
        key_state ks = key_holder(q, batch, i, p->used);
        if (ks == KEY_OTHER_POD && p->alt) {
            p->used = p->alt;
            ks = key_holder(q, batch, i, p->used);
        }
        if (ks == KEY_SAME_POD) {
            /* Charged already (a retried admission): not twice. */
            p->limited = true;
            continue;
        }
        if (ks == KEY_OTHER_POD)
            p->rc = gq_err_set(&p->err, GQ_EEXISTS, "reservation %s is held by another pod",
                               p->used->key);
        else
            p->rc = GQ_OK;
        gq_quota view = *q;
        view.used = in_use;
        view.reservations = NULL;
        view.n_reservations = 0;
        view.models = mview;
        const gq_quota *one = &view;
        size_t idx, n_idx = 0;
        gq_amounts charge = *p->charge;
        bool fresh_claim[GQ_POD_MAX_CLAIMS] = {false};
        if (p->n_claims)
            claims_charge(q, batch, i, p, &charge, fresh_claim);
        if (!p->rc)
            p->rc = gq_quota_evaluate(&one, 1, p->facts, p->ns_labels, &charge, false, now, NULL,
                                      &idx, &n_idx, &p->err);
        if (p->rc && !fresh) {
            /* Only a fresh read may refuse. */
            undo_round(batch, n);
            rc = ROUND_STALE;
            goto out;
        }
        if (p->rc) {
            p->final = true; /* a denial stays a denial */
            continue;
        }
        p->limited = n_idx == 1;
        if (!p->limited)
            continue;
        bool added = false;
        gq_amounts next = in_use;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (__builtin_add_overflow(next.v[k], charge.v[k], &next.v[k]))
                p->rc = gq_err_set(&p->err, GQ_ERANGE, "quota %s: %s overflows", q->name,
                                   gq_qkey_name((gq_qkey)k));
        if (!p->rc)
            p->rc = gq_status_add_reservation(status, p->used, &added, &p->err);
        /* The claims this quota does not charge yet, once each, in the same
         * write: a conflicting writer re-reads and finds them charged. */
        for (size_t k = 0; !p->rc && added && k < p->n_claims; k++)
            if (fresh_claim[k])
                p->rc =
                    gq_status_add_reservation(status, &p->claims[k], &p->claim_added[k], &p->err);
        if (p->rc && added) {
            /* Nothing of a failed charge may ride on the others' write. */
            status_remove(status, p->used->key);
            for (size_t k = 0; k < p->n_claims; k++)
                if (p->claim_added[k])
                    status_remove(status, p->claims[k].key);
            memset(p->claim_added, 0, sizeof(p->claim_added));
            added = false;
        }
        if (p->rc && !fresh) {
            undo_round(batch, n);
            rc = ROUND_STALE;
            goto out;
        }
        if (p->rc) {
            p->final = true;
            continue;
        }
        in_use = next;
        for (size_t j = 0; j < q->n_models; j++) {
            /* An unpinned pod counts against every model (gq_quota_evaluate). */
            if (p->facts->model && strcmp(p->facts->model, mview[j].name))
                continue;
            gq_amounts *mu = &mview[j].used;
            for (int k = 0; k < GQ_KEY_COUNT; k++)
                if (__builtin_add_overflow(mu->v[k], charge.v[k], &mu->v[k]))
                    mu->v[k] = INT64_MAX;
        }
        p->added = added;
        changed = changed || added;
    }
    if (changed) {
        atomic_fetch_add(&v->batches, 1);
        rc = v->store.update_status(v->store.ctx, s->kind, s->ns, s->name, obj, &stored, &e);
        if (rc == GQ_ECONFLICT) {
            atomic_fetch_add(&v->conflicts, 1);
            undo_round(batch, n);
            if (!fresh) {
                s->last_score = -4;
                rc = ROUND_STALE;
            }
            goto out;
        }
        if (rc)
            goto fail_all;
        for (size_t i = 0; i < n; i++)
            if (!batch[i]->final && batch[i]->added)
                atomic_fetch_add(&v->charged, 1);
        s->last = stored;
    } else {
        s->last = obj; /* unchanged: as good as a read */
        obj = NULL;
    }
    publish_gauges(v, q, &in_use);
    rc = GQ_OK;
    goto out;
fail_all:
    if (!fresh && rc != GQ_ENOMEM) {
        /* The remembered object may be what is wrong: read it afresh. */
        undo_round(batch, n);
        rc = ROUND_STALE;
        goto out;
    }
    fail_open_pendings(batch, n, rc, &e);
    rc = GQ_OK;
out:
    free(mview);
    gq_quota_free(q);
    json_object_put(obj);
    return rc;
}

/* Move queued charges into the batch (up to cap); returns the new size. */
static size_t batch_take(wh_validator *v, slot *s, pending **batch, size_t n, size_t cap)
{
    pthread_mutex_lock(&v->mu);
    while (s->head && n < cap) {
        batch[n++] = s->head;
        s->head = s->head->next;
    }
    if (!s->head)
        s->tail = NULL;
    pthread_mutex_unlock(&v->mu);
    return n;
}

/* Decide the batch, going round again after conflicts. Charges that queued
 * meanwhile join the retry (after the older ones, so arrival order holds)
 * rather than wait for the whole retry chain and then a round of their own.
 * Returns the final batch size. */
static size_t batch_run(wh_validator *v, slot *s, pending **batch, size_t n, size_t cap)
{
    unsigned seed = (unsigned)(uintptr_t)batch ^ (unsigned)time(NULL);
    double deadline = mono_s() + v->budget_ms / 1000.0;
    unsigned attempt = 0;
    for (;; attempt++) {
        gq_code rc;
        /* A stale round leaves no remembered object, so the next is fresh. */
        while ((rc = batch_round(v, s, batch, n)) == ROUND_STALE) {
        }
        if (rc != GQ_ECONFLICT)
            return n;
        unsigned delay = backoff_delay(v, attempt, &seed);
        /* Give up in time for our denial to reach the API server, rather
         * than let its webhook call time out. */
        if (attempt + 1 >= v->max_retries || mono_s() + delay / 1000.0 > deadline)
            break;
        sleep_ms(delay);
        n = batch_take(v, s, batch, n, cap);
    }
    gq_err e;
    gq_err_set(&e, GQ_ECONFLICT, "the quota kept changing (%u conflicting update%s in a row)",
               attempt + 1, attempt ? "s" : "");
    fail_open_pendings(batch, n, GQ_ECONFLICT, &e);
    return n;
}

/* Run p through the quota's group commit and wait for its result. */
static gq_code slot_submit(wh_validator *v, gq_quota_kind kind, const char *ns, const char *name,
                           pending *p)
{
    pthread_mutex_lock(&v->mu);
    slot *s = slot_get(v, kind, ns, name);
    if (!s) {
        pthread_mutex_unlock(&v->mu);
        return GQ_ENOMEM;
    }
    p->next = NULL;
    if (s->tail)
        s->tail->next = p;
    else
        s->head = p;
    s->tail = p;
    if (!s->busy) {
        s->busy = true;
        p->leader = true;
    }
    while (!p->done && !p->leader)
        pthread_cond_wait(&s->cv, &v->mu);
    if (!p->done) {
        /* Lead: take the queue's head (p is its first entry) up to max_batch. */
        pending *stack[64], **batch = malloc(v->max_batch * sizeof(*batch));
        size_t cap = v->max_batch, n = 0;
        if (!batch) { /* still make progress, in smaller batches */
            batch = stack;
            cap = cap < 64 ? cap : 64;
        }
        pthread_mutex_unlock(&v->mu);
        n = batch_take(v, s, batch, n, cap);
        n = batch_run(v, s, batch, n, cap);
        pthread_mutex_lock(&v->mu);
        for (size_t i = 0; i < n; i++)
            batch[i]->done = true;
        if (s->head)
            s->head->leader = true;
        else
            s->busy = false;
        pthread_cond_broadcast(&s->cv);
        if (batch != stack)
            free(batch);
    }
    pthread_mutex_unlock(&v->mu);
    return GQ_OK;
}

/* ---- the decision ---------------------------------------------------------- */

typedef struct decision {
    wh_validate_result *r;
    json_object *quotas; /* audit: quotas charged or exceeded */
} decision;

static void deny(wh_validate_result *r, gq_code code, const char *fmt, ...) GQ_PRINTF(3, 4);
static void deny(wh_validate_result *r, gq_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof(r->message), fmt, ap);
    va_end(ap);
    r->allowed = false;
    r->code = code;
}

static const char *kind_name(gq_quota_kind k)
{
    return k == GQ_QUOTA_TENANT ? GQ_KIND_GPUTENANTQUOTA : GQ_KIND_GPUQUOTA;
}

/* Parsed quotas (namespaced, then tenants) of one admission. */
typedef struct quota_set {
    gq_quota **q;
    size_t n;
} quota_set;

static void quota_set_dispose(quota_set *s)
{
    wh_quotas_free(s->q, s->n);
    s->q = NULL;
    s->n = 0;
}

/* Append the parsed items of arr (a JSON array from the store) to s. A
 * malformed object fails the admission (fail closed): it names the object. */
static gq_code quota_set_add(quota_set *s, json_object *arr, gq_err *err)
{
    return wh_quotas_append(&s->q, &s->n, arr, err);
}

/* Append {"kind","namespace","name"} of q to the audit record's quotas. An
 * allocation failure only loses the audit detail. */
static void audit_quota(json_object *quotas, const gq_quota *q)
{
    json_object *j = json_object_new_object();
    if (!j)
        return;
    json_object_object_add(j, "kind", json_object_new_string(kind_name(q->kind)));
    if (q->namespace_)
        json_object_object_add(j, "namespace", json_object_new_string(q->namespace_));
    json_object_object_add(j, "name", json_object_new_string(q->name));
    if (json_object_array_add(quotas, j))
        json_object_put(j);
}

static void charged_add(wh_validate_result *r, json_object *quotas, const gq_quota *q)
{
    size_t len = strlen(r->charged);
    snprintf(r->charged + len, sizeof(r->charged) - len, "%s%s %s%s%s", len ? ", " : "",
             kind_name(q->kind), q->namespace_ ? q->namespace_ : "", q->namespace_ ? "/" : "",
             q->name);
    r->n_charged++;
    audit_quota(quotas, q);
}

/* After a denial the audit record names the quota exceeded, not the ones
 * charged before it (those charges were given back). */
static void audit_exceeded(decision *d, const gq_quota *q)
{
    size_t n = json_object_array_length(d->quotas);
    if (n)
        json_object_array_del_idx(d->quotas, 0, n);
    audit_quota(d->quotas, q);
}

static void quota_label(const gq_quota *q, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", q->namespace_ ? q->namespace_ : "", q->namespace_ ? "/" : "",
             q->name);
}

/* Dry run: evaluate every quota to charge on a fresh read; write nothing. */
static gq_code dry_run_check(wh_validator *v, gq_quota *const *to_charge, size_t n,
                             const gq_pod_facts *facts, json_object *ns_labels,
                             const gq_reservation *resv, const gq_reservation *claims,
                             size_t n_claims, decision *d)
{
    const char *key = resv->key;
    for (size_t i = 0; i < n; i++) {
        const gq_quota *cq = to_charge[i];
        json_object *obj = NULL;
        gq_quota *fresh = NULL;
        gq_err e;
        char label[2 * GQ_CRD_MAX_STRING];
        gq_err_clear(&e);
        quota_label(cq, label, sizeof(label));
        gq_code rc = v->store.get_quota(v->store.ctx, cq->kind, cq->namespace_, cq->name, &obj, &e);
        if (rc == GQ_ENOTFOUND)
            continue;
        if (!rc)
            rc = gq_quota_parse(obj, &fresh, &e);
        json_object_put(obj);
        if (rc == GQ_ENOMEM)
            return rc;
        if (rc) {
            deny(d->r, rc, "gpuquota could not reach the API server to check quota %s: %s", label,
                 e.msg);
            return GQ_OK;
        }
        const gq_quota *one = fresh;
        size_t idx, n_idx = 0;
        pending p = {.resv = resv, .claims = claims, .n_claims = n_claims};
        gq_amounts charge;
        bool fresh_claim[GQ_POD_MAX_CLAIMS];
        claims_charge(fresh, NULL, 0, &p, &charge, fresh_claim);
        rc = gq_quota_evaluate(&one, 1, facts, ns_labels, &charge, false, now_s(v), key, &idx,
                               &n_idx, &e);
        gq_quota_free(fresh);
        if (rc == GQ_EDENIED) {
            deny(d->r, GQ_EDENIED, "%s", e.msg);
            d->r->n_charged = 0;
            d->r->charged[0] = '\0';
            audit_exceeded(d, cq);
            return GQ_OK;
        }
        if (rc == GQ_ENOMEM)
            return rc;
        if (rc) {
            deny(d->r, rc, "gpuquota could not evaluate quota %s: %s", label, e.msg);
            return GQ_OK;
        }
        if (n_idx)
            charged_add(d->r, d->quotas, cq);
    }
    return GQ_OK;
}

/* Charge every quota in order through its group commit; on a denial or an
 * error give back what this admission added (best effort: reservations
 * expire anyway). */
static gq_code charge_all(wh_validator *v, gq_quota *const *to_charge, size_t n,
                          const gq_pod_facts *facts, json_object *ns_labels,
                          const gq_amounts *charge, const gq_reservation *resv,
                          const gq_reservation *alt, const gq_reservation *claims, size_t n_claims,
                          decision *d)
{
    gq_code rc = GQ_OK;
    pending *ps = calloc(n ? n : 1, sizeof(*ps));
    size_t done = 0;
    if (!ps)
        return GQ_ENOMEM;
    for (; done < n; done++) {
        const gq_quota *cq = to_charge[done];
        pending *p = &ps[done];
        char label[2 * GQ_CRD_MAX_STRING];
        p->op = OP_CHARGE;
        p->facts = facts;
        p->ns_labels = ns_labels;
        p->charge = charge;
        p->resv = resv;
        p->alt = alt;
        p->claims = claims;
        p->n_claims = n_claims;
        gq_err_clear(&p->err);
        if ((rc = slot_submit(v, cq->kind, cq->namespace_, cq->name, p)))
            break;
        if (p->rc == GQ_OK) {
            if (p->limited && !d->r->n_charged)
                snprintf(d->r->reservation_key, sizeof(d->r->reservation_key), "%s", p->used->key);
            if (p->limited)
                charged_add(d->r, d->quotas, cq);
            continue;
        }
        quota_label(cq, label, sizeof(label));
        if (p->rc == GQ_EDENIED) {
            deny(d->r, GQ_EDENIED, "%s", p->err.msg);
            audit_exceeded(d, cq);
        } else if (p->rc == GQ_ENOMEM)
            rc = GQ_ENOMEM;
        else if (p->rc == GQ_ECONFLICT || p->rc == GQ_EEXISTS)
            deny(d->r, p->rc, "gpuquota could not charge quota %s: %s", label, p->err.msg);
        else
            deny(d->r, p->rc, "gpuquota could not reach the API server to charge quota %s: %s",
                 label, p->err.msg);
        break;
    }
    if (done < n) {
        for (size_t i = 0; i < done; i++) {
            if (!ps[i].added)
                continue;
            pending rel;
            memset(&rel, 0, sizeof(rel));
            rel.op = OP_RELEASE;
            rel.resv = ps[i].used;
            rel.claims = claims;
            rel.n_claims = n_claims;
            memcpy(rel.claim_added, ps[i].claim_added, sizeof(rel.claim_added));
            const gq_quota *cq = to_charge[i];
            if (slot_submit(v, cq->kind, cq->namespace_, cq->name, &rel) || rel.rc)
                GQ_WARN("could not release reservation %s of quota %s: %s", rel.resv->key, cq->name,
                        rel.rc ? rel.err.msg : "out of memory");
        }
        d->r->n_charged = 0;
        d->r->charged[0] = '\0';
        size_t nq = json_object_array_length(d->quotas);
        if (d->r->code != GQ_EDENIED && nq)
            json_object_array_del_idx(d->quotas, 0, nq); /* given back */
    }
    free(ps);
    return rc;
}

/* A copy of r under another key. */
static gq_code reservation_rekey(const gq_reservation *r, const char *key, gq_reservation *out,
                                 gq_err *err)
{
    gq_reservation c = *r;
    c.key = strdup(key);
    c.namespace_ = strdup(r->namespace_);
    c.pod = strdup(r->pod);
    c.model = r->model ? strdup(r->model) : NULL;
    c.claims = NULL;
    c.n_claims = 0;
    bool ok = c.key && c.namespace_ && c.pod && (!r->model || c.model);
    if (ok && r->n_claims && !(c.claims = calloc(r->n_claims, sizeof(*c.claims))))
        ok = false;
    for (size_t i = 0; ok && i < r->n_claims; i++, c.n_claims++)
        ok = (c.claims[i] = strdup(r->claims[i])) != NULL;
    if (!ok) {
        gq_reservation_dispose(&c);
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    }
    *out = c;
    return GQ_OK;
}

/* A policy outcome: anything but out-of-memory becomes a denial carrying
 * e's message; returns what the caller should return. */
static gq_code settle(wh_validate_result *r, gq_code rc, const gq_err *e)
{
    if (rc == GQ_ENOMEM)
        return rc;
    deny(r, GQ_EDENIED, "%s", e->msg);
    return GQ_OK;
}

/* Which quotas to charge, in check order, and requireQuota, from the specs
 * alone: a view with no usage and unbounded limits never exceeds, so this
 * only selects; the fresh reads decide. idx has room for qs->n. */
static gq_code select_quotas(const wh_validator *v, const quota_set *qs, const gq_pod_facts *facts,
                             json_object *ns_labels, const gq_amounts *charge, size_t *idx,
                             size_t *n_idx, gq_err *e)
{
    gq_quota *view_store = qs->n ? calloc(qs->n, sizeof(*view_store)) : NULL;
    const gq_quota **views = qs->n ? calloc(qs->n, sizeof(*views)) : NULL;
    gq_model_limit *mstore = NULL;
    size_t n_m = 0, at = 0;
    gq_code rc = GQ_ENOMEM;
    for (size_t i = 0; i < qs->n; i++)
        n_m += qs->q[i]->n_models;
    if (n_m && !(mstore = calloc(n_m, sizeof(*mstore))))
        goto out;
    if (qs->n && (!view_store || !views))
        goto out;
    for (size_t i = 0; i < qs->n; i++) {
        view_store[i] = *qs->q[i];
        memset(&view_store[i].used, 0, sizeof(view_store[i].used));
        view_store[i].reservations = NULL;
        view_store[i].n_reservations = 0;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (view_store[i].hard.set[k])
                view_store[i].hard.v[k] = INT64_MAX;
        /* Per-model limits never refuse here either: only which quotas
         * govern the pod is asked. */
        view_store[i].models = n_m ? &mstore[at] : NULL;
        for (size_t m = 0; m < qs->q[i]->n_models; m++, at++) {
            mstore[at] = qs->q[i]->models[m];
            memset(&mstore[at].used, 0, sizeof(mstore[at].used));
            for (int k = 0; k < GQ_KEY_COUNT; k++)
                if (mstore[at].hard.set[k])
                    mstore[at].hard.v[k] = INT64_MAX;
        }
        views[i] = &view_store[i];
    }
    rc = gq_quota_evaluate(views, qs->n, facts, ns_labels, charge, v->cfg->require_quota, now_s(v),
                           NULL, idx, n_idx, e);
out:
    if (rc == GQ_ENOMEM)
        gq_err_set(e, GQ_ENOMEM, "out of memory");
    free(views);
    free(view_store);
    free(mstore);
    return rc;
}

/* The quota objects an admission reads from the caches, once. */
typedef struct quota_view {
    bool loaded;
    json_object *ns_labels, *q_arr, *t_arr;
    quota_set qs;
} quota_view;

static void quota_view_dispose(quota_view *qv)
{
    quota_set_dispose(&qv->qs);
    json_object_put(qv->t_arr);
    json_object_put(qv->q_arr);
    json_object_put(qv->ns_labels);
}

/* Read the namespace's labels, its GPUQuotas and every GPUTenantQuota into
 * qv (once). A store error or an object that does not parse is a denial
 * (fail closed): it is put in r and *decided set. */
static gq_code quota_view_load(wh_validator *v, const char *ns, quota_view *qv,
                               wh_validate_result *r, bool *decided)
{
    gq_err e;
    gq_code rc;
    gq_err_clear(&e);
    *decided = false;
    if (qv->loaded)
        return GQ_OK;
    if ((rc = v->store.namespace_labels(v->store.ctx, ns, &qv->ns_labels, &e)) ||
        (rc = v->store.list_quotas(v->store.ctx, ns, &qv->q_arr, &e)) ||
        (rc = v->store.list_tenant_quotas(v->store.ctx, &qv->t_arr, &e))) {
        if (rc == GQ_ENOMEM)
            return rc;
        deny(r, rc, "gpuquota could not reach the API server to read the quotas of %s: %s", ns,
             e.msg);
        *decided = true;
        return GQ_OK;
    }
    if ((rc = quota_set_add(&qv->qs, qv->q_arr, &e)) ||
        (rc = quota_set_add(&qv->qs, qv->t_arr, &e))) {
        if (rc == GQ_ENOMEM)
            return rc;
        deny(r, rc, "gpuquota could not read quota: %s", e.msg);
        *decided = true;
        return GQ_OK;
    }
    qv->loaded = true;
    return GQ_OK;
}

/* DRA claims gpuquota could not price (a ResourceClaim or template that does
 * not exist or could not be priced, a pod the mutating webhook did not see): in a
 * namespace any gpuquota quota governs (a GPUQuota of it, a GPUTenantQuota
 * covering it, or requireQuota), such a pod would get devices unseen, so it
 * is denied. */
static void deny_unseen_claims(const wh_validator *v, const char *ns, const quota_view *qv,
                               const gq_pod_claim *claim, wh_validate_result *r)
{
    char by[GQ_CRD_MAX_STRING * 2 + 32] = "", label[GQ_CRD_MAX_STRING * 2 + 2];
    for (size_t i = 0; i < qv->qs.n && !by[0]; i++) {
        const gq_quota *q = qv->qs.q[i];
        if (!gq_quota_covers_namespace(q, ns, qv->ns_labels))
            continue;
        quota_label(q, label, sizeof(label));
        snprintf(by, sizeof(by), "%s %s", kind_name(q->kind), label);
    }
    if (!by[0] && v->cfg->require_quota)
        snprintf(by, sizeof(by), "requireQuota");
    if (!by[0])
        return;
    char ref[300] = "";
    if (claim->field)
        snprintf(ref, sizeof(ref), " (%s \"%s\")", claim->field, claim->ref);
    deny(r, GQ_EDENIED,
         "spec.resourceClaims[0] \"%s\"%s: gpuquota cannot tell which GPUs the pod's DRA claims "
         "hold, so namespace %s, governed by %s, does not admit it; ask for GPUs through a "
         "ResourceClaimTemplate or a ResourceClaim that exists when the pod is created, with a "
         "count of devices (the warnings say which could not be priced), or in the container's "
         "resources",
         claim->name, ref, ns, by);
}

/* Deny a new member of group g whose size differs from that of a member
 * that exists and counts (gq_pod_counts), naming the first such member
 * (docs/queueing.md, "Pod groups"). The list is a fresh read, not a lock:
 * two disagreeing members created at once may both pass, and the
 * controller holds that group. A failed list denies (fail closed). */
static gq_code check_group_members(const wh_store *st, const char *ns, const gq_pod_group *g,
                                   int64_t now, wh_validate_result *r)
{
    json_object *arr = NULL;
    gq_err e;
    gq_err_clear(&e);
    if (!st->list_group_pods)
        return GQ_OK;
    gq_code rc = st->list_group_pods(st->ctx, ns, g->name, &arr, &e);
    if (rc == GQ_ENOMEM)
        return rc;
    if (rc) {
        deny(r, rc,
             "gpuquota could not reach the API server to list the members of pod group %s: %s",
             g->name, e.msg);
        return GQ_OK;
    }
    size_t n = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *pod = json_object_array_get_idx(arr, i);
        gq_pod_group other;
        int64_t delete_at = 0;
        if (gq_pod_group_parse(pod, &other, &e) || !other.present || strcmp(other.name, g->name) ||
            other.size == g->size || gq_pod_deletion_deadline(pod, &delete_at, &e) ||
            !gq_pod_counts(gq_pod_is_terminal(pod), delete_at, now))
            continue;
        const char *name = gq_json_get_string(gq_json_member(pod, "metadata"), "name");
        deny(r, GQ_EDENIED,
             "pod group %s: this pod says " GQ_POD_GROUP_SIZE_ANNOTATION "=%lld but member %.253s "
             "says %lld; members of a group must agree on its size",
             g->name, (long long)g->size, name ? name : "(unnamed)", (long long)other.size);
        break;
    }
    json_object_put(arr);
    return GQ_OK;
}

/* A pod created behind the gate gpuquota.io/quota (docs/queueing.md): its
 * group must be well formed and agree with its members on its size, it (its
 * whole group) must fit every quota
 * governing it at all, and a Deny quota among them must have room now, as
 * for any pod. Nothing is charged: the controller charges every governing
 * quota when it ungates the pod. */
static gq_code decide_queued(const wh_store *st, const char *ns, json_object *pod,
                             gq_quota *const *to_charge, size_t n, const gq_pod_facts *facts,
                             json_object *ns_labels, const gq_amounts *charge, int64_t now,
                             wh_validate_result *r)
{
    gq_pod_group g;
    gq_err e;
    gq_err_clear(&e);
    if (gq_pod_group_parse(pod, &g, &e) != GQ_OK) {
        deny(r, GQ_EDENIED, "%s", e.msg);
        return GQ_OK;
    }
    for (size_t i = 0; i < n; i++) {
        const gq_quota *q = to_charge[i];
        if (gq_queue_check_ever_fits(q, facts->model, charge, g.present ? g.size : 1,
                                     g.present ? g.name : NULL, &e) != GQ_OK) {
            deny(r, GQ_EDENIED, "%s", e.msg);
            return GQ_OK;
        }
    }
    if (g.present) {
        gq_code rc = check_group_members(st, ns, &g, now, r);
        if (rc || !r->allowed)
            return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const gq_quota *one = to_charge[i];
        size_t idx, n_idx = 0;
        if (one->when_exceeded != GQ_WHEN_DENY)
            continue;
        gq_code rc = gq_quota_evaluate(&one, 1, facts, ns_labels, charge, false, now, NULL, &idx,
                                       &n_idx, &e);
        if (rc == GQ_ENOMEM)
            return rc;
        if (rc) {
            deny(r, rc, "%s", e.msg);
            return GQ_OK;
        }
    }
    return GQ_OK;
}

/* Pod CREATE. Returns GQ_OK when a decision is in d->r (allowed or not). */
static gq_code decide_create_one(wh_validator *v, const wh_review_request *req, decision *d)
{
    wh_validate_result *r = d->r;
    json_object *pod = req->object, *lr_arr = NULL;
    gq_limit_range **lrs = NULL;
    size_t n_lrs = 0, *idx = NULL, n_idx = 0;
    quota_view qv;
    gq_pod_claim claim;
    bool decided = false;
    gq_quota **to_charge = NULL;
    gq_pod_cost cost;
    gq_pod_facts facts;
    gq_reservation resv, alt, *claims = NULL;
    size_t n_claims = 0;
    gq_err e;
    gq_code rc = GQ_OK;
    const char *ns = req->namespace;
    bool have_resv = false, have_alt = false;
    gq_pod_cost_init(&cost);
    gq_err_clear(&e);
    memset(&qv, 0, sizeof(qv));
    memset(&resv, 0, sizeof(resv));
    memset(&alt, 0, sizeof(alt));

    if (!ns[0]) {
        json_object *meta = NULL;
        json_object_object_get_ex(pod, "metadata", &meta);
        ns = gq_json_get_string(meta, "namespace") ? gq_json_get_string(meta, "namespace") : "";
    }
    if (gq_config_is_exempt(v->cfg, ns))
        goto out;
    if ((rc = gq_pod_cost_compute(v->cfg, pod, &cost, &e))) {
        rc = settle(r, rc, &e);
        goto out;
    }
    gq_charge_from_cost(&cost, gq_pod_is_terminal(pod), &r->charge);
    if (cost.claims_unpriced && gq_pod_resource_claims(pod, &claim)) {
        if ((rc = quota_view_load(v, ns, &qv, r, &decided)) || decided)
            goto out;
        deny_unseen_claims(v, ns, &qv, &claim, r);
        if (!r->allowed)
            goto out;
    }
    if (!cost.gpu_pods)
        goto out;

    /* GPULimitRange first: a pod it rejects never holds quota. */
    if ((rc = v->store.list_limit_ranges(v->store.ctx, ns, &lr_arr, &e)))
        goto store_err_lr;
    n_lrs = json_object_array_length(lr_arr);
    if (n_lrs && !(lrs = calloc(n_lrs, sizeof(*lrs)))) {
        rc = GQ_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_lrs; i++) {
        json_object *o = json_object_array_get_idx(lr_arr, i);
        if ((rc = gq_limit_range_parse(o, &lrs[i], &e))) {
            if (rc == GQ_ENOMEM)
                goto out;
            json_object *meta = NULL;
            json_object_object_get_ex(o, "metadata", &meta);
            deny(r, rc, "GPULimitRange %s is invalid: %s",
                 gq_json_get_string(meta, "name") ? gq_json_get_string(meta, "name") : "(unnamed)",
                 e.msg);
            rc = GQ_OK;
            goto out;
        }
    }
    /* Whole GPUs of unknown model cost the largest model the namespace
     * allows, which only its GPULimitRanges tell. */
    gq_cost_scope scope = {(const gq_limit_range *const *)lrs, n_lrs};
    if (cost.priced_unknown && n_lrs) {
        if ((rc = gq_pod_cost_compute_in(v->cfg, pod, &scope, &cost, &e))) {
            rc = settle(r, rc, &e);
            goto out;
        }
        gq_charge_from_cost(&cost, gq_pod_is_terminal(pod), &r->charge);
    }
    if ((rc = gq_limit_validate(&cost, ns, (const gq_limit_range *const *)lrs, n_lrs, &e))) {
        rc = settle(r, rc, &e);
        goto out;
    }

    /* Quotas that govern the pod, from the caches. */
    if ((rc = gq_pod_facts_from_json(pod, ns, &facts, &e))) {
        rc = settle(r, rc, &e);
        goto out;
    }
    facts.terminal = gq_pod_is_terminal(pod);
    facts.model = gq_pod_model(&cost);
    if ((rc = quota_view_load(v, ns, &qv, r, &decided)) || decided)
        goto out;
    quota_set qs = qv.qs;
    json_object *ns_labels = qv.ns_labels;
    if (qs.n &&
        (!(idx = calloc(qs.n, sizeof(*idx))) || !(to_charge = calloc(qs.n, sizeof(*to_charge))))) {
        rc = GQ_ENOMEM;
        goto out;
    }
    if ((rc = select_quotas(v, &qs, &facts, ns_labels, &r->charge, idx, &n_idx, &e))) {
        rc = settle(r, rc, &e);
        goto out;
    }
    for (size_t i = 0; i < n_idx; i++)
        to_charge[i] = qs.q[idx[i]];
    if (gq_pod_gate_index(pod) >= 0) {
        /* Queued: checked in full, charged later by the controller. */
        rc = decide_queued(&v->store, ns, pod, to_charge, n_idx, &facts, ns_labels, &r->charge,
                           now_s(v), r);
        goto out;
    }
    if (!n_idx)
        goto out;

    /* The pod's reservation holds its own part; each shared ResourceClaim
     * has a record of its own, charged once per quota (claims_charge). */
    gq_amounts own;
    gq_charge_own(&r->charge, cost.shared, cost.n_shared, &own);
    if ((rc = gq_reservation_for_pod(pod, ns, req->uid, &own, now_s(v) + v->ttl, &resv, &e)))
        goto out;
    have_resv = true;
    if (cost.n_shared && !r->charge.v[GQ_KEY_GPU_PODS])
        cost.n_shared = 0; /* a terminal pod charges nothing, its claims neither */
    if (cost.n_shared && (!(claims = calloc(cost.n_shared, sizeof(*claims))) ||
                          !(resv.claims = calloc(cost.n_shared, sizeof(*resv.claims))))) {
        rc = GQ_ENOMEM;
        goto out;
    }
    /* The pod's reservation names its claims: the controller keeps them
     * charged until it has seen the pod (docs/validating-webhook.md). */
    for (; resv.n_claims < cost.n_shared; resv.n_claims++)
        if (!(resv.claims[resv.n_claims] = strdup(cost.shared[resv.n_claims].uid))) {
            rc = GQ_ENOMEM;
            goto out;
        }
    for (; n_claims < cost.n_shared; n_claims++) {
        const gq_shared_claim *sc = &cost.shared[n_claims];
        gq_reservation *c = &claims[n_claims];
        gq_claim_amounts(sc, &c->amounts);
        c->expires = resv.expires;
        c->claim = true;
        c->key = strdup(sc->uid);
        c->namespace_ = strdup(ns);
        c->pod = strdup(sc->name);
        c->model = sc->model ? strdup(sc->model->name) : NULL;
        if (!c->key || !c->namespace_ || !c->pod || (sc->model && !c->model)) {
            n_claims++;
            rc = GQ_ENOMEM;
            goto out;
        }
    }
    if (facts.model && !(resv.model = strdup(facts.model))) {
        rc = GQ_ENOMEM;
        goto out;
    }
    if (strcmp(resv.key, req->uid)) {
        /* Keyed by the pod's uid: the request uid is the fallback key for a
         * review whose pod carries another pod's uid. */
        if ((rc = reservation_rekey(&resv, req->uid, &alt, &e)))
            goto out;
        have_alt = true;
    }
    if (req->dry_run) {
        snprintf(r->reservation_key, sizeof(r->reservation_key), "%s", resv.key);
        rc = dry_run_check(v, to_charge, n_idx, &facts, ns_labels, &resv, claims, n_claims, d);
    } else {
        rc = charge_all(v, to_charge, n_idx, &facts, ns_labels, &r->charge, &resv,
                        have_alt ? &alt : NULL, claims, n_claims, d);
    }
    goto out;

store_err_lr:
    if (rc == GQ_ENOMEM)
        goto out;
    deny(r, rc, "gpuquota could not reach the API server to read the GPULimitRanges of %s: %s", ns,
         e.msg);
    rc = GQ_OK;
    goto out;
out:
    for (size_t i = 0; i < n_claims; i++)
        gq_reservation_dispose(&claims[i]);
    free(claims);
    if (have_alt)
        gq_reservation_dispose(&alt);
    if (have_resv)
        gq_reservation_dispose(&resv);
    free(to_charge);
    free(idx);
    quota_view_dispose(&qv);
    for (size_t i = 0; i < n_lrs && lrs; i++)
        gq_limit_range_free(lrs[i]);
    free(lrs);
    json_object_put(lr_arr);
    gq_pod_cost_dispose(&cost);
    return rc;
}

/* Pod CREATE. A gated pod accepting several models (docs/queueing.md, "A
 * choice of models"): the controller chooses among them when it ungates
 * it, and knows nothing of GPULimitRanges, so every model listed must be
 * one the pod could queue for on its own: each is decided as the pod pinned
 * to it, and the first refused denies the pod, naming the model. */
static gq_code decide_create(wh_validator *v, const wh_review_request *req, decision *d)
{
    const gq_model *choices[GQ_MAX_MODEL_CHOICES];
    size_t n = 0;
    gq_err e;
    gq_err_clear(&e);
    if (gq_pod_gate_index(req->object) < 0 ||
        gq_pod_model_choices(v->cfg, req->object, choices, &n, &e) != GQ_OK || !n)
        return decide_create_one(v, req, d); /* a bad list is refused there */
    for (size_t i = 0; i < n; i++) {
        json_object *copy = NULL;
        gq_code rc = gq_pod_with_model(req->object, choices[i]->name, &copy, &e);
        if (rc)
            return rc;
        wh_review_request one = *req;
        one.object = copy;
        rc = decide_create_one(v, &one, d);
        json_object_put(copy);
        if (rc)
            return rc;
        if (!d->r->allowed) {
            char msg[sizeof(d->r->message)];
            snprintf(msg, sizeof(msg), "%s", d->r->message);
            deny(d->r, d->r->code,
                 "GPU model %s of annotation " GQ_ANN_GPU_MODEL " (the controller may choose any "
                 "model listed): %s",
                 choices[i]->name, msg);
            return GQ_OK;
        }
    }
    return GQ_OK;
}

static bool prefixed(const char *key)
{
    return strncmp(key, TAMPER_PREFIX, sizeof(TAMPER_PREFIX) - 1) == 0;
}

/* The first gpuquota.io/ key of a (labels or annotations) that differs in b,
 * or NULL. Called both ways round to catch additions and removals. */
static const char *changed_key(json_object *a, json_object *b)
{
    if (!a)
        return NULL;
    json_object_object_foreach(a, key, val)
    {
        if (!prefixed(key))
            continue;
        json_object *other = NULL;
        if (!b || !json_object_object_get_ex(b, key, &other) || !json_object_equal(val, other))
            return key;
    }
    return NULL;
}

static void decide_update(wh_validator *v, const wh_review_request *req, wh_validate_result *r)
{
    for (size_t i = 0; i < v->n_trusted; i++)
        if (!strcmp(req->username, v->trusted[i]))
            return;
    /* Only gpuquota's controller ungates: a pod without its charge must not
     * reach the scheduler. Kubernetes refuses to add gates after creation;
     * adding ours is refused here as well, whatever the API server does. */
    bool had = gq_pod_gate_index(req->old_object) >= 0, has = gq_pod_gate_index(req->object) >= 0;
    if (had != has) {
        deny(r, GQ_EDENIED,
             "the scheduling gate " GQ_QUEUE_GATE " is %s by gpuquota only: the pod waits for "
             "quota (kubectl get gq,gtq shows the queue)",
             had ? "removed" : "added");
        return;
    }
    static const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        json_object *now = gq_json_meta_object(req->object, maps[i]);
        json_object *old = gq_json_meta_object(req->old_object, maps[i]);
        const char *k = changed_key(now, old);
        if (!k)
            k = changed_key(old, now);
        if (k) {
            deny(r, GQ_EDENIED, TAMPER_MSG " (%s %s)", i ? "annotation" : "label", k);
            return;
        }
    }
}

static bool is_pod(const wh_review_request *req)
{
    return !req->kind_group[0] && !strcmp(req->kind, "Pod") && !strcmp(req->resource, "pods");
}

static json_object *charge_json(const wh_validate_result *r)
{
    return gq_amounts_to_json(&r->charge);
}

static void charge_text(const wh_validate_result *r, char *buf, size_t cap)
{
    char mem[GQ_QUANTITY_STR_MAX], gpus[GQ_QUANTITY_STR_MAX], pods[GQ_QUANTITY_STR_MAX];
    gq_amount_format(&r->charge, GQ_KEY_GPU_MEMORY, mem);
    gq_amount_format(&r->charge, GQ_KEY_GPUS, gpus);
    gq_amount_format(&r->charge, GQ_KEY_GPU_PODS, pods);
    snprintf(buf, cap, "gpu-memory=%s,gpus=%s,gpu-pods=%s", mem, gpus, pods);
}

static gq_code answer(const wh_review_request *req, const wh_validate_result *r,
                      wh_review_response *resp)
{
    gq_code rc;
    if (!r->allowed && (rc = wh_review_response_deny(resp, 403, "Forbidden", r->message)))
        return rc;
    if ((rc = wh_review_response_set_audit(resp, "decision", r->allowed ? "allowed" : "denied")))
        return rc;
    if (r->charge.v[GQ_KEY_GPU_PODS] > 0) {
        char buf[4 * GQ_QUANTITY_STR_MAX];
        charge_text(r, buf, sizeof(buf));
        if ((rc = wh_review_response_set_audit(resp, "charge", buf)))
            return rc;
    }
    if (r->n_charged && (rc = wh_review_response_set_audit(
                             resp, req->dry_run ? "checked-quotas" : "charged-quotas", r->charged)))
        return rc;
    if (r->n_charged && r->reservation_key[0] && !req->dry_run)
        rc = wh_review_response_set_audit(resp, "reservation", r->reservation_key);
    return rc;
}

static void record(wh_validator *v, const wh_review_request *req, const wh_validate_result *r,
                   json_object *quotas, double latency_s)
{
    wh_decision dec = r->allowed              ? WH_DECISION_ALLOWED
                      : r->code == GQ_EDENIED ? WH_DECISION_DENIED
                                              : WH_DECISION_ERROR;
    wh_metrics_observe_admission(v->metrics, WH_WEBHOOK_VALIDATE, wh_operation_name(req->operation),
                                 dec, latency_s);
    if (!v->audit)
        return;
    json_object *charge = r->charge.v[GQ_KEY_GPU_PODS] > 0 ? charge_json(r) : NULL;
    wh_audit_record rec;
    wh_audit_record_init(&rec, req, "validate");
    rec.decision = r->allowed ? "allowed" : r->code == GQ_EDENIED ? "denied" : "error";
    rec.reason = r->allowed ? NULL : r->message;
    rec.charge = charge;
    rec.quotas = quotas && json_object_array_length(quotas) ? quotas : NULL;
    rec.latency_ms = latency_s * 1000.0;
    /* The writer counts and logs its own failures; the decision stands. */
    if (wh_audit_write(v->audit, &rec))
        GQ_LOG(GQ_LOG_DEBUG, req->uid, "audit record not written");
    json_object_put(charge);
}

gq_code wh_validate_review(wh_validator *v, const wh_review_request *req, wh_review_response *resp,
                           wh_validate_result *res, gq_err *err)
{
    wh_validate_result r;
    wh_review_response out;
    double t0 = mono_s();
    gq_code rc;
    memset(&r, 0, sizeof(r));
    r.allowed = true;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        r.charge.set[k] = true;
    r.charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    decision d = {&r, json_object_new_array()};
    if (!d.quotas)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");

    /* pods/status writes keep the stored spec but may change labels and
     * annotations (the pod status strategy resets only spec and owner
     * references), so they get the tamper check too. */
    if (is_pod(req) && req->operation == WH_OP_CREATE && !req->sub_resource[0]) {
        if (!req->object)
            deny(&r, GQ_EDENIED, "request.object is missing");
        else if ((rc = decide_create(v, req, &d)))
            goto fail;
    } else if (is_pod(req) && req->operation == WH_OP_UPDATE &&
               (!req->sub_resource[0] || !strcmp(req->sub_resource, "status"))) {
        decide_update(v, req, &r);
    }
    if (r.allowed)
        r.code = GQ_OK;
    if ((rc = wh_review_response_init(&out, req->version, req->uid)))
        goto fail;
    if ((rc = answer(req, &r, &out))) {
        wh_review_response_dispose(&out);
        goto fail;
    }
    record(v, req, &r, d.quotas, mono_s() - t0);
    json_object_put(d.quotas);
    if (!r.allowed)
        GQ_LOG(GQ_LOG_DEBUG, req->uid, "denied %s %s in %s: %s", wh_operation_name(req->operation),
               req->kind, req->namespace, r.message);
    *resp = out;
    if (res)
        *res = r;
    return GQ_OK;
fail:
    json_object_put(d.quotas);
    return gq_err_set(err, rc, "%s", rc == GQ_ENOMEM ? "out of memory" : gq_strerror(rc));
}

void wh_validate_handle(void *ctx, const wh_request *req, wh_response *resp)
{
    wh_validator *v = ctx;
    wh_review_request rq;
    wh_review_response rs;
    gq_err err;
    char *text = NULL;
    size_t len = 0;
    gq_err_clear(&err);
    gq_code rc = wh_review_decode(req->body, req->body_len, &rq, &err);
    if (rc) {
        wh_metrics_observe_admission(v->metrics, WH_WEBHOOK_VALIDATE, NULL, WH_DECISION_ERROR, 0);
        wh_response_error(resp, rc == GQ_ENOMEM ? 500 : 400, "%s", err.msg);
        return;
    }
    rc = wh_validate_review(v, &rq, &rs, NULL, &err);
    if (!rc) {
        rc = wh_review_encode(&rs, &text, &len);
        wh_review_response_dispose(&rs);
    }
    wh_review_request_dispose(&rq);
    if (rc) {
        wh_response_error(resp, 500, "%s", err.msg[0] ? err.msg : gq_strerror(rc));
        return;
    }
    wh_response_take_body(resp, 200, "application/json", text, len);
}
