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
#include "common/fifo.h"
#include "common/hash.h"
#include "common/htab.h"
#include "quota/admission.h"
#include "quota/tamper.h"
#include "quota/claimcheck.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/policy.h"
#include "quota/record.h"
#include "common/json_member.h"
#include "webhook/escrow.h"
#include "webhook/mutation.h"

#define SLOT_BUCKETS 256 /* initial; the slot table doubles past one slot a bucket */
#define BACKOFF_CAP_MS 100

/* ---- group commit state --------------------------------------------------- */

typedef enum op_kind {
    OP_CHARGE = 0,
    OP_RELEASE = 1, /* remove this admission's reservation (rollback) */
} op_kind;

typedef struct admission admission;

/* One admission's charge (or rollback) of one quota. Inputs are borrowed
 * from the admission that owns it, which lives until it is answered. */
typedef struct pending {
    gq_qnode node;        /* on its slot's queue */
    struct pending *next; /* on the list of expired charges (take_expired) */
    admission *owner;
    op_kind op;
    double deadline; /* monotonic s: a charge still queued then fails; 0: none */
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
    bool final; /* decided for good (denied or failed) in an earlier round */
    /* A denial put off while other replicas' escrow settles (escrow_settling):
     * the pending goes round again after DEFER_STEP_MS, until defer_until
     * (monotonic s; 0: not put off yet). */
    bool deferred;
    double defer_until;
    gq_code rc;   /* GQ_OK charged/allowed, GQ_EDENIED, or a store error */
    bool limited; /* the quota governs the pod (a reservation is or was there) */
    bool added;   /* this call wrote the reservation */
    gq_err err;
} pending;

/* All admissions of one process against one quota. */
typedef struct slot {
    gq_hnode node;  /* in v->slots, by slot_hash */
    gq_qnode ready; /* on v->ready */
    gq_quota_kind kind;
    char *ns; /* NULL for tenants */
    char *name;
    bool busy;     /* on the ready list, or a charger is running it */
    gq_fifo queue; /* pendings, oldest first */
    /* The object our last write stored (or our last fresh read), used in
     * place of the next read; owned by the charger running the slot. */
    json_object *last;
    /* Whether rounds on `last` tend to land: when other replicas write the
     * same quota they mostly fail, and a failed round costs a write. Below
     * zero, rounds read fresh; every fresh round earns one point back. */
    int last_score;
    wh_escrow esc; /* this replica's escrow of the quota's room (webhook/escrow.h) */
} slot;

struct wh_validator {
    const gq_config *cfg;
    wh_store store;
    int64_t ttl;
    char *trusted[WH_TRUSTED_USERS_MAX];
    size_t n_trusted;
    unsigned max_retries, max_batch, backoff_ms, budget_ms, max_queued;
    int64_t (*now)(void *ud);
    void *now_ud;
    wh_audit *audit;
    wh_metrics *metrics;
    wh_review_limits review_limits;
    pthread_mutex_t mu;  /* slots, their queues, the ready list, queued, stopping */
    pthread_cond_t work; /* a slot is ready, or the validator stops */
    gq_htab slots;
    gq_fifo ready; /* slots with queued work, oldest first */
    /* Admissions waiting for their name check (name_check), oldest first. */
    gq_fifo lookups;
    size_t queued;     /* charges waiting in queues (not yet in a batch) */
    double next_sweep; /* when chargers next look for expired charges */
    bool stopping;
    pthread_t chargers[WH_CHARGERS_MAX];
    unsigned n_chargers, started;
    atomic_uint_fast64_t batches, conflicts, charged, largest_batch;
    /* Escrow: pods' worth a hold covers (0: off), this process's identity,
     * when chargers next look for holds to give back, and how many slots
     * hold one or have pods admitted on one not written yet. */
    unsigned escrow_pods;
    wh_escrow_id eid;
    double next_escrow_sweep;
    size_t n_escrows;
    atomic_uint_fast64_t escrow_admitted, escrow_holds, escrow_deferred;
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

static void *charger_main(void *arg);

static gq_code validator_copy_opts(wh_validator *v, const wh_validate_opts *o, gq_err *err)
{
    static const char *const defaults[] = {WH_TRUSTED_WEBHOOK, WH_TRUSTED_CONTROLLER};
    v->ttl = o->reservation_ttl_s ? o->reservation_ttl_s : WH_RESERVATION_TTL_DEFAULT;
    v->max_retries = o->max_retries ? o->max_retries : WH_CHARGE_RETRIES_DEFAULT;
    v->max_batch = o->max_batch ? o->max_batch : WH_BATCH_MAX_DEFAULT;
    v->backoff_ms = o->backoff_ms ? o->backoff_ms : 2;
    v->budget_ms = o->budget_ms ? o->budget_ms : WH_CHARGE_BUDGET_MS_DEFAULT;
    v->max_queued = o->max_queued ? o->max_queued : WH_QUEUE_MAX_DEFAULT;
    v->n_chargers = o->inline_charges ? 0 : o->chargers ? o->chargers : WH_CHARGERS_DEFAULT;
    v->now = o->now;
    v->now_ud = o->now_ud;
    v->audit = o->audit;
    v->metrics = o->metrics;
    v->review_limits = o->review_limits;
    v->escrow_pods = v->n_chargers ? o->escrow_pods : 0;
    gq_code rc = v->escrow_pods ? wh_escrow_id_new(&v->eid, err) : GQ_OK;
    if (rc)
        return rc;
    const char *const *users = o->trusted_users ? o->trusted_users : defaults;
    size_t n = o->trusted_users ? o->n_trusted_users : 2;
    for (size_t i = 0; i < n; i++) {
        if (!(v->trusted[i] = strdup(users[i] ? users[i] : "")))
            return gq_err_oom(err);
        v->n_trusted++;
    }
    return GQ_OK;
}

gq_code wh_validator_new(const gq_config *cfg, const wh_store *store, const wh_validate_opts *o,
                         wh_validator **out, gq_err *err)
{
    wh_validate_opts none;
    memset(&none, 0, sizeof(none));
    if (!o)
        o = &none;
    if (!cfg || !store || !store->list || !store->namespace_labels || !store->get_quota ||
        !store->update_status)
        return gq_err_set(err, GQ_EINVAL, "validator needs a config and a complete store");
    if (o->reservation_ttl_s < 0)
        return gq_err_set(err, GQ_EINVAL, "reservation TTL must not be negative");
    if (o->n_trusted_users > WH_TRUSTED_USERS_MAX)
        return gq_err_set(err, GQ_ELIMIT, "at most %d trusted users", WH_TRUSTED_USERS_MAX);
    if (o->chargers > WH_CHARGERS_MAX)
        return gq_err_set(err, GQ_ELIMIT, "at most %d charger threads", WH_CHARGERS_MAX);
    if (o->escrow_pods > WH_ESCROW_PODS_MAX)
        return gq_err_set(err, GQ_ELIMIT, "an escrow covers at most %d pods", WH_ESCROW_PODS_MAX);
    wh_validator *v = calloc(1, sizeof(*v));
    if (!v)
        return gq_err_oom(err);
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->work, NULL);
    v->cfg = cfg;
    v->store = *store;
    gq_code rc = validator_copy_opts(v, o, err);
    if (!rc && gq_htab_init(&v->slots, SLOT_BUCKETS))
        rc = gq_err_oom(err);
    for (; !rc && v->started < v->n_chargers; v->started++)
        if (pthread_create(&v->chargers[v->started], NULL, charger_main, v))
            rc = gq_err_set(err, GQ_ENOMEM, "cannot start the charger threads");
    if (rc) {
        wh_validator_free(v);
        return rc;
    }
    *out = v;
    return GQ_OK;
}

static void escrow_give_back(wh_validator *v, slot *s);

/* Chargers finish every queued charge and rollback, and give every hold
 * back, before they exit. */
static void chargers_stop(wh_validator *v)
{
    pthread_mutex_lock(&v->mu);
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &v->slots); v->started && n;
         n = gq_htab_iter_next(&it))
        escrow_give_back(v, GQ_HTAB_ENTRY(n, slot, node));
    v->stopping = true;
    pthread_cond_broadcast(&v->work);
    pthread_mutex_unlock(&v->mu);
    for (unsigned i = 0; i < v->started; i++)
        pthread_join(v->chargers[i], NULL);
    v->started = 0;
}

void wh_validator_free(wh_validator *v)
{
    if (!v)
        return;
    chargers_stop(v);
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &v->slots); n; n = gq_htab_iter_next(&it)) {
        slot *s = GQ_HTAB_ENTRY(n, slot, node);
        json_object_put(s->last);
        wh_escrow_dispose(&s->esc);
        free(s->ns);
        free(s->name);
        free(s);
    }
    gq_htab_free(&v->slots);
    for (size_t i = 0; i < v->n_trusted; i++)
        free(v->trusted[i]);
    pthread_cond_destroy(&v->work);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

void wh_validate_get_stats(wh_validator *v, wh_validate_stats *out)
{
    out->batches = atomic_load(&v->batches);
    out->conflicts = atomic_load(&v->conflicts);
    out->charged = atomic_load(&v->charged);
    out->largest_batch = atomic_load(&v->largest_batch);
    out->escrow_admitted = atomic_load(&v->escrow_admitted);
    out->escrow_holds = atomic_load(&v->escrow_holds);
    out->escrow_deferred = atomic_load(&v->escrow_deferred);
}

static uint64_t slot_hash(gq_quota_kind kind, const char *ns, const char *name)
{
    return gq_fnv1a_key(ns, name) ^ (uint64_t)kind;
}

/* The slot of one quota, created on first use. Slots live as long as the
 * validator: one small record per quota ever charged. Call with v->mu held. */
static slot *slot_get(wh_validator *v, gq_quota_kind kind, const char *ns, const char *name)
{
    uint64_t h = slot_hash(kind, ns, name);
    for (gq_hnode *n = gq_htab_first(&v->slots, h); n; n = gq_htab_next(n)) {
        slot *s = GQ_HTAB_ENTRY(n, slot, node);
        if (s->kind == kind && !strcmp(s->name, name) && !strcmp(s->ns ? s->ns : "", ns ? ns : ""))
            return s;
    }
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
    gq_htab_insert(&v->slots, &s->node, h);
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
    if (gq_quota_charges_claim(c->q, uid))
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
    claims_ctx cx = {q, batch, i};
    gq_admission_charge_for(p->resv, p->claims, p->n_claims, claim_charged, &cx, out, fresh);
}

/* Forget what a round decided tentatively for p. A release's claim_added is
 * not tentative: it names the claim records its admission added, which the
 * release must take out (cleared, they stayed until they expired). */
static void clear_tentative(pending *p)
{
    p->added = false;
    p->deferred = false;
    if (p->op != OP_RELEASE)
        memset(p->claim_added, 0, sizeof(p->claim_added));
}

/* Deny every pending of the batch not decided yet (fail closed): the store
 * could not be read or written, or the quota kept changing. */
static void fail_undecided_closed(pending **batch, size_t n, gq_code rc, const gq_err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (batch[i]->final)
            continue;
        batch[i]->final = true;
        batch[i]->rc = rc;
        clear_tentative(batch[i]);
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
/* How one round of a batch ended. */
typedef enum round_outcome {
    ROUND_DONE,     /* every pending of the batch is decided */
    ROUND_CONFLICT, /* the write met 409: back off, then go round again */
    /* The round worked on the remembered object, which was outdated or
     * would refuse: go round again at once on a fresh read. */
    ROUND_STALE,
} round_outcome;

/* Reset what a round decided tentatively. */
static void undo_round(pending **batch, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!batch[i]->final) {
            batch[i]->rc = GQ_OK;
            clear_tentative(batch[i]);
        }
}

/* What one round evaluates against: the quota as read, parsed, with the
 * usage (status plus live reservations) carried forward as charges land,
 * and the status the round writes, typed. */
typedef struct round_view {
    json_object *obj;   /* the whole object as read; written back with st as its status */
    gq_quota_status st; /* the status as read, then with the round's charges and rollbacks */
    gq_quota *q;        /* spec, and the status as read (live reservations only) */
    gq_amounts in_use;
    gq_model_limit *mview; /* q->models with used = in use (names borrowed) */
    bool fresh;            /* obj is a fresh read: only then may a charge be refused */
    int64_t now;
    /* Escrow: the slot's ledger and our identity (esc NULL: escrow off),
     * whether the round changed the status for it (flushed our hold, took
     * one, asked for room), and the hold it took. */
    const wh_escrow *esc;
    const wh_escrow_id *eid;
    bool esc_changed;
    bool took;
    gq_amounts hold;
    bool hold_limited[GQ_KEY_COUNT];
    const gq_amounts *unit; /* the charge of a pod the round admitted: the hold's unit */
    bool refused;           /* a pod of the round was denied or put off: no hold */
} round_view;

static void round_view_dispose(round_view *rv)
{
    free(rv->mview);
    gq_quota_free(rv->q);
    gq_quota_status_dispose(&rv->st);
    json_object_put(rv->obj);
}

/* The read of a round: the object our last write returned when the slot
 * remembers one (a write based on it fails with 409 if anybody else wrote
 * since), else a fresh GET. */
static gq_code round_read(wh_validator *v, slot *s, round_view *rv, gq_err *e)
{
    rv->fresh = !s->last || s->last_score < 0;
    if (!rv->fresh) {
        rv->obj = s->last;
        s->last = NULL;
        return GQ_OK;
    }
    json_object_put(s->last);
    s->last = NULL;
    if (s->last_score < 0)
        s->last_score++;
    return v->store.get_quota(v->store.ctx, s->kind, s->ns, s->name, &rv->obj, e);
}

/* Parse what round_read read: decode its status dropping corrupt and
 * expired records, so one bad record cannot pin the quota
 * (docs/quota-semantics.md); parse the spec; sum usage. */
static gq_code round_parse(round_view *rv, gq_err *e)
{
    gq_code rc;
    json_object *status = NULL;
    json_object_object_get_ex(rv->obj, "status", &status);
    if ((rc = gq_quota_status_decode(status, GQ_STATUS_CHARGE, &rv->st, e)))
        return rc;
    gq_quota_status_drop_expired(&rv->st, rv->now);
    if (rv->esc && (rc = wh_escrow_flush(rv->esc, rv->eid, &rv->st, &rv->esc_changed, e)))
        return rc;
    if ((rc = gq_quota_parse_spec(rv->obj, &rv->q, e)) ||
        (rc = gq_quota_set_status(rv->q, &rv->st, e)) ||
        (rc = gq_quota_in_use(rv->q, rv->now, NULL, &rv->in_use, e)))
        return rc;
    if (rv->q->n_models && !(rv->mview = calloc(rv->q->n_models, sizeof(*rv->mview))))
        return gq_err_oom(e);
    for (size_t i = 0; i < rv->q->n_models; i++) {
        rv->mview[i] = rv->q->models[i];
        if ((rc = gq_quota_model_in_use(rv->q, &rv->q->models[i], rv->now, NULL, &rv->mview[i].used,
                                        e)))
            return rc;
    }
    return GQ_OK;
}

/* Remove what p's rollback names from the status; true when it changed. */
static bool release_pending(round_view *rv, const pending *p)
{
    bool changed = gq_quota_status_remove_reservation(&rv->st, p->resv->key);
    for (size_t k = 0; k < p->n_claims; k++)
        if (p->claim_added[k] && gq_quota_status_remove_reservation(&rv->st, p->claims[k].key))
            changed = true;
    return changed;
}

/* Whether batch[i] fits the quota as it stands after the charges before
 * it: p->rc says (GQ_OK, GQ_EDENIED, GQ_EEXISTS...), *charge is what it
 * adds, fresh_claim which shared claims it charges first. Returns
 * KEY_SAME_POD when it holds its reservation already. */
static key_state evaluate_pending(round_view *rv, pending **batch, size_t i, gq_amounts *charge,
                                  bool fresh_claim[GQ_POD_MAX_CLAIMS])
{
    pending *p = batch[i];
    p->used = p->resv;
    key_state ks = key_holder(rv->q, batch, i, p->used);
    if (ks == KEY_OTHER_POD && p->alt) {
        p->used = p->alt;
        ks = key_holder(rv->q, batch, i, p->used);
    }
    if (ks == KEY_SAME_POD)
        return ks;
    p->rc = ks == KEY_OTHER_POD ? gq_err_set(&p->err, GQ_EEXISTS,
                                             "reservation %s is held by another pod", p->used->key)
                                : GQ_OK;
    gq_quota view = *rv->q;
    view.used = rv->in_use;
    view.reservations = NULL;
    view.n_reservations = 0;
    view.models = rv->mview;
    const gq_quota *one = &view;
    size_t idx, n_idx = 0;
    *charge = *p->charge;
    if (p->n_claims)
        claims_charge(rv->q, batch, i, p, charge, fresh_claim);
    if (!p->rc)
        p->rc = gq_quota_evaluate(
            &(gq_quota_snapshot){.quotas = &one, .n = 1, .ns_labels = p->ns_labels, .now = rv->now},
            p->facts, charge, &idx, &n_idx, &p->err);
    p->limited = !p->rc && n_idx == 1;
    return ks;
}

/* Add p's reservation (and the claims this quota does not charge yet,
 * once each, in the same write) to the status and its charge to the
 * running usage. On failure nothing of p stays in the status. */
static void reserve_pending(round_view *rv, pending *p, const gq_amounts *charge,
                            const bool fresh_claim[GQ_POD_MAX_CLAIMS])
{
    bool added = false;
    gq_amounts next = rv->in_use;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (__builtin_add_overflow(next.v[k], charge->v[k], &next.v[k]))
            p->rc = gq_err_set(&p->err, GQ_ERANGE, "quota %s: %s overflows", rv->q->name,
                               gq_qkey_name((gq_qkey)k));
    if (!p->rc)
        p->rc = gq_quota_status_add_reservation(&rv->st, p->used, &added, &p->err);
    for (size_t k = 0; !p->rc && added && k < p->n_claims; k++)
        if (fresh_claim[k])
            p->rc = gq_quota_status_add_reservation(&rv->st, &p->claims[k], &p->claim_added[k],
                                                    &p->err);
    if (p->rc) {
        if (added)
            release_pending(rv, p);
        memset(p->claim_added, 0, sizeof(p->claim_added));
        return;
    }
    rv->in_use = next;
    for (size_t j = 0; j < rv->q->n_models; j++) {
        /* An unpinned pod counts against every model (gq_quota_evaluate). */
        if (p->facts->model && strcmp(p->facts->model, rv->mview[j].name))
            continue;
        gq_amounts *mu = &rv->mview[j].used;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (__builtin_add_overflow(mu->v[k], charge->v[k], &mu->v[k]))
                mu->v[k] = INT64_MAX;
    }
    p->added = added;
}

/* ---- escrow in a round (webhook/escrow.h) ----------------------------------- */

/* How long a denial is put off at most while other replicas' escrow
 * settles, and how often it is tried again meanwhile. */
#define DEFER_MAX_S 3.0
/* Holds still there this long (s) after our want was written: their
 * holders are gone (a replica killed), and the holds wait for their
 * expiry, not our denials. */
#define HOLDERS_GONE_S 2
#define DEFER_STEP_MS 20

/* Add our want (a request to holders to give their room back) to the
 * round's status; a want that cannot be added is only a slower answer. */
static void escrow_want(round_view *rv)
{
    gq_reservation w =
        wh_escrow_record(rv->eid, GQ_ESCROW_WANT, rv->q->namespace_ ? rv->q->namespace_ : "", NULL,
                         rv->now + WH_ESCROW_WANT_TTL_S);
    bool added = false;
    gq_err e;
    if (!gq_quota_status_add_reservation(&rv->st, &w, &added, &e) && added)
        rv->esc_changed = true;
}

/* Whether charge would be refused on some key of q's hard even if
 * settling freed `freed` (per key) of the usage in_use. */
static bool refused_anyway(const gq_quota *q, const gq_amounts *in_use, const int64_t *freed,
                           const gq_amounts *charge)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!q->hard.set[k])
            continue;
        int64_t least = in_use->v[k] - (freed[k] < in_use->v[k] ? freed[k] : in_use->v[k]), need;
        if (__builtin_add_overflow(least, charge->v[k], &need) || need > q->hard.v[k])
            return true;
    }
    return false;
}

static bool above_hard(const gq_quota *q, const gq_amounts *in_use)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (q->hard.set[k] && in_use->v[k] > q->hard.v[k])
            return true;
    return false;
}

/* Whether the denial of p (charging charge) on this fresh read waits for
 * escrow to settle: another replica holds room here (it is asked to give
 * it back: our want), or pods admitted on a hold were written after the
 * controller last counted, so that the status may charge them twice (the
 * controller's next write settles them). Not when the pod would not fit
 * even if all of that were freed, nor past p's deferral time, nor for holds
 * whose holders did not answer our want within HOLDERS_GONE_S. */
static bool escrow_defers(round_view *rv, pending *p, const gq_amounts *charge)
{
    if (!rv->eid)
        return false;
    wh_escrow_others o;
    wh_escrow_others_of(&rv->st, rv->eid, rv->now, &o);
    bool holders_gone = o.my_want && o.my_want - WH_ESCROW_WANT_TTL_S + HOLDERS_GONE_S < rv->now;
    bool holds = o.holds && !holders_gone;
    if (!holds && !o.admitted)
        return false;
    int64_t freed[GQ_KEY_COUNT];
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (__builtin_add_overflow(o.unsettled[k], holds ? o.held[k] : 0, &freed[k]))
            freed[k] = INT64_MAX;
    /* Refused however it settles: denied now, unless the usage is above
     * hard, which only pods charged twice can make it (nothing is admitted
     * past hard): then the message would name a usage nobody has. */
    if (refused_anyway(rv->q, &rv->in_use, freed, charge) && !above_hard(rv->q, &rv->in_use))
        return false;
    double mono = mono_s();
    if (!p->defer_until) {
        p->defer_until = mono + DEFER_MAX_S;
        if (p->deadline && p->deadline - 0.1 < p->defer_until)
            p->defer_until = p->deadline - 0.1;
    }
    if (mono >= p->defer_until)
        return false;
    if (!o.my_want)
        escrow_want(rv); /* holders give back; the controller writes without its fold wait */
    return true;
}

/* After the round's charges: take a hold when the round admitted a pod
 * (its charge is the unit) and denied none, on a Deny GPUQuota, nobody
 * asks for room, and the room wh_escrow_size allows covers at least
 * WH_ESCROW_PODS_MIN such pods. */
static void escrow_take(const wh_validator *v, round_view *rv, bool no_take)
{
    if (!rv->esc || no_take || !rv->unit || rv->refused || rv->q->kind != GQ_QUOTA_NAMESPACED ||
        rv->q->when_exceeded != GQ_WHEN_DENY)
        return;
    wh_escrow_others o;
    wh_escrow_others_of(&rv->st, rv->eid, rv->now, &o);
    if (o.want || !wh_escrow_size(rv->q, &rv->in_use, rv->mview, rv->unit, v->escrow_pods,
                                  &rv->hold, rv->hold_limited))
        return;
    gq_reservation h =
        wh_escrow_record(rv->eid, GQ_ESCROW_HOLD, rv->q->namespace_, &rv->hold, rv->now + v->ttl);
    bool added = false;
    gq_err e;
    if (!gq_quota_status_add_reservation(&rv->st, &h, &added, &e) && added)
        rv->took = rv->esc_changed = true;
}

/* The round landed (written, or nothing to write): what was on the ledger
 * is in the status now, and our hold is the one the round took, if any. */
static void escrow_landed(wh_validator *v, slot *s, const round_view *rv)
{
    if (!rv->esc)
        return;
    pthread_mutex_lock(&v->mu);
    wh_escrow *e = &s->esc;
    for (size_t i = 0; i < e->n_local; i++)
        gq_reservation_dispose(&e->local[i]);
    e->n_local = 0;
    e->held = rv->took;
    e->give_back = false;
    if (rv->took) {
        e->amount = rv->hold;
        memcpy(e->limited, rv->hold_limited, sizeof(e->limited));
        e->expires = rv->now + v->ttl;
        e->generation = rv->q->generation;
        memcpy(e->uid, rv->q->uid, sizeof(e->uid));
        e->last_use = mono_s();
        atomic_fetch_add(&v->escrow_holds, 1);
        wh_metrics_count_escrow(v->metrics, WH_ESCROW_HELD);
    }
    pthread_mutex_unlock(&v->mu);
}

/* The quota is gone, and with it the hold and what was admitted on it. */
static void escrow_gone(wh_validator *v, slot *s)
{
    pthread_mutex_lock(&v->mu);
    wh_escrow_dispose(&s->esc);
    pthread_mutex_unlock(&v->mu);
}

/* Evaluate every undecided pending of the batch in arrival order against
 * the running usage, adding the admitted ones to the status. A refusal on
 * a remembered object makes the round stale (only a fresh read refuses);
 * on a fresh read it is final: a denial stays a denial. */
static round_outcome round_evaluate(round_view *rv, pending **batch, size_t n, bool *changed)
{
    for (size_t i = 0; i < n; i++) {
        pending *p = batch[i];
        if (p->final)
            continue;
        p->rc = GQ_OK;
        clear_tentative(p);
        if (p->op == OP_RELEASE) {
            *changed = release_pending(rv, p) || *changed;
            continue;
        }
        gq_amounts charge;
        bool fresh_claim[GQ_POD_MAX_CLAIMS] = {false};
        if (evaluate_pending(rv, batch, i, &charge, fresh_claim) == KEY_SAME_POD) {
            p->limited = true; /* charged already (a retried admission): not twice */
            continue;
        }
        if (!p->rc && p->limited)
            reserve_pending(rv, p, &charge, fresh_claim);
        if (p->added && !p->n_claims)
            rv->unit = p->charge;
        rv->refused = rv->refused || p->rc == GQ_EDENIED;
        if (p->rc == GQ_EDENIED && rv->fresh && escrow_defers(rv, p, &charge)) {
            p->deferred = true;
            p->rc = GQ_OK;
            continue;
        }
        if (p->rc && !rv->fresh)
            return ROUND_STALE;
        if (p->rc)
            p->final = true;
        *changed = *changed || p->added;
    }
    return ROUND_DONE;
}

/* Write the round's status back (encoded into the object read),
 * conditional on the resourceVersion read. The stored object is remembered
 * for the next round. */
static round_outcome round_write(wh_validator *v, slot *s, round_view *rv, pending **batch,
                                 size_t n, gq_code *rc, gq_err *e)
{
    json_object *stored = NULL, *status = gq_quota_status_encode(&rv->st);
    if (!status || json_object_object_add(rv->obj, "status", status)) {
        json_object_put(status);
        *rc = gq_err_oom(e);
        return ROUND_DONE;
    }
    atomic_fetch_add(&v->batches, 1);
    *rc = v->store.update_status(v->store.ctx, s->kind, s->ns, s->name, rv->obj, &stored, e);
    if (*rc == GQ_ECONFLICT) {
        atomic_fetch_add(&v->conflicts, 1);
        if (!rv->fresh)
            s->last_score = -4;
        return rv->fresh ? ROUND_CONFLICT : ROUND_STALE;
    }
    if (*rc)
        return ROUND_DONE;
    for (size_t i = 0; i < n; i++)
        if (!batch[i]->final && batch[i]->added)
            atomic_fetch_add(&v->charged, 1);
    s->last = stored;
    return ROUND_DONE;
}

/* The quota was deleted since the cache listed it: it governs nothing. */
static void round_quota_gone(pending **batch, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!batch[i]->final)
            batch[i]->rc = GQ_OK, batch[i]->limited = false, batch[i]->added = false;
}

/* One round: read, evaluate every pending, write one status update. A
 * store error fails the undecided pendings closed, unless the round worked
 * on the remembered object, which may be what is wrong (then it is stale). */
static round_outcome batch_round(wh_validator *v, slot *s, pending **batch, size_t n, bool no_take)
{
    round_view rv = {.now = now_s(v)};
    if (v->escrow_pods)
        rv.esc = &s->esc, rv.eid = &v->eid;
    gq_quota_status_init(&rv.st);
    round_outcome out = ROUND_DONE;
    bool changed = false;
    gq_err e;
    gq_err_clear(&e);
    gq_code rc = round_read(v, s, &rv, &e);
    if (rc == GQ_ENOTFOUND) {
        round_quota_gone(batch, n);
        escrow_gone(v, s);
        return ROUND_DONE;
    }
    if (!rc && !(rc = round_parse(&rv, &e)))
        out = round_evaluate(&rv, batch, n, &changed);
    if (!rc && out == ROUND_DONE)
        escrow_take(v, &rv, no_take);
    changed = changed || rv.esc_changed;
    if (!rc && out == ROUND_DONE && changed)
        out = round_write(v, s, &rv, batch, n, &rc, &e);
    else if (!rc && out == ROUND_DONE) {
        s->last = rv.obj; /* unchanged: as good as a read */
        rv.obj = NULL;
    }
    if (!rc && out == ROUND_DONE) {
        publish_gauges(v, rv.q, &rv.in_use);
        escrow_landed(v, s, &rv);
    }
    if (rc && out == ROUND_DONE && !rv.fresh && rc != GQ_ENOMEM)
        out = ROUND_STALE;
    else if (rc && out == ROUND_DONE)
        fail_undecided_closed(batch, n, rc, &e);
    if (out != ROUND_DONE)
        undo_round(batch, n);
    round_view_dispose(&rv);
    return out;
}

/* Move queued charges into the batch (up to cap); returns the new size. */
static size_t batch_take(wh_validator *v, slot *s, pending **batch, size_t n, size_t cap)
{
    pthread_mutex_lock(&v->mu);
    while (s->queue.head && n < cap) {
        gq_qnode *q = gq_fifo_pop(&s->queue);
        pending *p = GQ_FIFO_ENTRY(q, pending, node);
        if (p->op == OP_CHARGE)
            v->queued--;
        batch[n++] = p;
    }
    pthread_mutex_unlock(&v->mu);
    return n;
}

/* Decide the batch, going round again after conflicts. Charges that queued
 * meanwhile join the retry (after the older ones, so arrival order holds)
 * rather than wait for the whole retry chain and then a round of their own.
 * Returns the final batch size. */
static size_t batch_run(wh_validator *v, slot *s, pending **batch, size_t n, size_t cap,
                        bool no_take)
{
    unsigned seed = (unsigned)(uintptr_t)batch ^ (unsigned)time(NULL);
    double deadline = mono_s() + v->budget_ms / 1000.0;
    unsigned attempt = 0;
    for (;; attempt++) {
        round_outcome out;
        /* A stale round leaves no remembered object, so the next is fresh. */
        while ((out = batch_round(v, s, batch, n, no_take)) == ROUND_STALE) {
        }
        if (out == ROUND_DONE)
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
    fail_undecided_closed(batch, n, GQ_ECONFLICT, &e);
    return n;
}

/* ---- chargers: the threads that run the group commit ------------------------ */

static void pending_settled(pending *p);
static admission *lookup_pop(wh_validator *v);
static void name_check(admission *a);

static void ready_push(wh_validator *v, slot *s)
{
    gq_fifo_push(&v->ready, &s->ready);
    pthread_cond_signal(&v->work);
}

static slot *ready_pop(wh_validator *v)
{
    gq_qnode *n = gq_fifo_pop(&v->ready);
    return GQ_FIFO_ENTRY(n, slot, ready);
}

/* Decide p on the escrow of its quota q (slot s) in memory, when no round
 * runs on s (v->mu held): a charge without shared claims that the hold of a
 * Deny GPUQuota covers is admitted; the rollback of a pod admitted on the
 * hold and not written yet takes it off. True when p is decided so. */
static bool escrow_local(wh_validator *v, slot *s, const gq_quota *q, pending *p)
{
    if (!v->escrow_pods || s->busy || (!s->esc.held && !s->esc.n_local))
        return false;
    if (p->op == OP_RELEASE) {
        if (!wh_escrow_release(&s->esc, p->resv->key))
            return false;
        p->rc = GQ_OK;
        return true;
    }
    wh_escrow_clock t = {now_s(v), v->ttl, mono_s()};
    if (q->kind != GQ_QUOTA_NAMESPACED || q->when_exceeded != GQ_WHEN_DENY || p->n_claims ||
        !wh_escrow_admit(&s->esc, q, p->resv, p->charge, &t))
        return false;
    p->rc = GQ_OK;
    p->used = p->resv;
    p->limited = p->added = true;
    atomic_fetch_add(&v->escrow_admitted, 1);
    wh_metrics_count_escrow(v->metrics, WH_ESCROW_ADMITTED);
    return true;
}

/* Queue p for the group commit of quota q; an idle slot goes on the ready
 * list for a charger. True when queued (a charger settles p); false when p
 * is settled already: decided on the quota's escrow (escrow_local), or a
 * charge refused (p->rc set) because the queues are full (overload: fail
 * closed at once rather than time out) or the validator stops; a rollback
 * is never refused. */
static bool slot_enqueue(wh_validator *v, const gq_quota *q, pending *p)
{
    pthread_mutex_lock(&v->mu);
    slot *s = NULL;
    gq_code rc = GQ_OK;
    if (p->op == OP_CHARGE && v->stopping)
        rc = gq_err_set(&p->err, GQ_EUNSUPPORTED, "this gpuquota webhook is shutting down");
    else if (!(s = slot_get(v, q->kind, q->namespace_, q->name)))
        rc = gq_err_oom(&p->err);
    else if (escrow_local(v, s, q, p)) {
        pthread_mutex_unlock(&v->mu);
        return false;
    } else if (p->op == OP_CHARGE && v->queued >= v->max_queued)
        rc = gq_err_set(&p->err, GQ_ELIMIT,
                        "the webhook is overloaded (%zu charges waiting); retry later", v->queued);
    if (!rc) {
        gq_fifo_push(&s->queue, &p->node);
        v->queued += p->op == OP_CHARGE;
        if (!s->busy) {
            s->busy = true;
            ready_push(v, s);
        }
    }
    pthread_mutex_unlock(&v->mu);
    if (rc)
        p->rc = rc, p->final = true;
    return !rc;
}

/* Unlink from every queue the charges whose deadline has passed (linked
 * through next): they are answered now, not after the rounds ahead of
 * them. Call with v->mu held. */
static pending *take_expired(wh_validator *v, double now)
{
    pending *out = NULL;
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &v->slots); n; n = gq_htab_iter_next(&it)) {
        slot *s = GQ_HTAB_ENTRY(n, slot, node);
        gq_fifo keep = {0};
        gq_qnode *q;
        while ((q = gq_fifo_pop(&s->queue))) {
            pending *p = GQ_FIFO_ENTRY(q, pending, node);
            if (p->op != OP_CHARGE || !p->deadline || p->deadline > now) {
                gq_fifo_push(&keep, q);
                continue;
            }
            v->queued--;
            p->next = out;
            out = p;
        }
        s->queue = keep;
    }
    return out;
}

static void settle_expired(pending *p)
{
    while (p) {
        pending *next = p->next;
        p->final = true;
        p->rc = gq_err_set(&p->err, GQ_ETIMEOUT,
                           "the review's timeout ran out while the charge waited its turn");
        pending_settled(p);
        p = next;
    }
}

static const gq_quota *pending_quota(const pending *p);

/* The charges (and rollbacks) that queued while a round ran and that the
 * hold it took covers, oldest first up to the first it does not: taken off
 * the queue and decided on the hold (escrow_local), linked through next for
 * the caller to settle. v->mu held, s not busy. */
static pending *escrow_drain(wh_validator *v, slot *s)
{
    pending *out = NULL, **tail = &out;
    while (s->queue.head) {
        pending *p = GQ_FIFO_ENTRY(s->queue.head, pending, node);
        if (!escrow_local(v, s, pending_quota(p), p))
            break;
        gq_fifo_pop(&s->queue);
        v->queued -= p->op == OP_CHARGE;
        p->next = NULL;
        *tail = p;
        tail = &p->next;
    }
    return out;
}

/* Settle the decided pendings of batch[0..n) and keep the deferred ones
 * (escrow_defers), in order, at its front; returns how many were kept. */
static size_t settle_decided(wh_validator *v, pending **batch, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (batch[i]->deferred && !batch[i]->final) {
            batch[kept++] = batch[i];
            atomic_fetch_add(&v->escrow_deferred, 1);
            wh_metrics_count_escrow(v->metrics, WH_ESCROW_DEFERRED);
        } else
            pending_settled(batch[i]); /* may answer and free its admission */
    }
    return kept;
}

/* Run one ready slot: a batch from its queue through the group commit,
 * then each pending's admission goes on (next quota, rollback or answer).
 * A slot made ready to give its hold back runs a round with no charge. A
 * denial put off while escrow settles goes round again after DEFER_STEP_MS,
 * doubling to 8 times that, with what queued meanwhile; the slot stays busy
 * till then. */
static void run_slot(wh_validator *v, slot *s, pending **batch, size_t cap)
{
    pthread_mutex_lock(&v->mu);
    bool no_take = s->esc.give_back || v->stopping;
    bool due = s->esc.give_back && (s->esc.held || s->esc.n_local);
    pthread_mutex_unlock(&v->mu);
    size_t n = batch_take(v, s, batch, 0, cap);
    unsigned step = 0;
    for (;;) {
        if (n || due)
            n = batch_run(v, s, batch, n, cap, no_take);
        due = false;
        bool deferred = false;
        for (size_t i = 0; i < n && !deferred; i++)
            deferred = batch[i]->deferred && !batch[i]->final;
        if (!deferred)
            break;
        n = settle_decided(v, batch, n);
        sleep_ms(DEFER_STEP_MS << (step < 3 ? step++ : step)); /* 20, 40, 80, 160 ms */
        n = batch_take(v, s, batch, n, cap);
    }
    uint_fast64_t largest = atomic_load(&v->largest_batch);
    while (n > largest && !atomic_compare_exchange_weak(&v->largest_batch, &largest, n)) {
    }
    pthread_mutex_lock(&v->mu);
    s->busy = false;
    pending *on_hold = escrow_drain(v, s);
    if (s->queue.head) {
        s->busy = true;
        ready_push(v, s);
    }
    pthread_mutex_unlock(&v->mu);
    for (size_t i = 0; i < n; i++)
        pending_settled(batch[i]); /* may answer and free its admission */
    while (on_hold) {
        pending *next = on_hold->next;
        pending_settled(on_hold);
        on_hold = next;
    }
}

#define SWEEP_INTERVAL_S 0.02
/* Holds are looked at this often, and given back once unused this long. */
#define ESCROW_SWEEP_S 0.2
#define ESCROW_IDLE_S 5.0

/* Have s give its hold back (and write what was admitted on it) at its
 * next round, now if it is idle. v->mu held. */
static void escrow_give_back(wh_validator *v, slot *s)
{
    if (!s->esc.held && !s->esc.n_local)
        return;
    s->esc.give_back = true;
    if (!s->busy) {
        s->busy = true;
        ready_push(v, s);
    }
}

/* Holds unused for ESCROW_IDLE_S, and ledgers a failed write left, are
 * given back. v->mu held. */
static void escrow_sweep(wh_validator *v, double now)
{
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &v->slots); n; n = gq_htab_iter_next(&it)) {
        slot *s = GQ_HTAB_ENTRY(n, slot, node);
        if (s->esc.give_back || !s->esc.held || now - s->esc.last_use > ESCROW_IDLE_S)
            escrow_give_back(v, s);
    }
}

void wh_validator_escrow_wanted(wh_validator *v, const char *ns, const char *name)
{
    if (!v->escrow_pods || !ns)
        return;
    pthread_mutex_lock(&v->mu);
    uint64_t h = slot_hash(GQ_QUOTA_NAMESPACED, ns, name);
    for (gq_hnode *n = gq_htab_first(&v->slots, h); n; n = gq_htab_next(n)) {
        slot *s = GQ_HTAB_ENTRY(n, slot, node);
        if (s->kind == GQ_QUOTA_NAMESPACED && s->ns && !strcmp(s->ns, ns) && !strcmp(s->name, name))
            escrow_give_back(v, s);
    }
    pthread_mutex_unlock(&v->mu);
}

/* One piece of the chargers' work, when there is one: the charges whose
 * deadline passed, a name check, or a round of a ready slot. Called and
 * returns with v->mu held; false when there was nothing to do. */
static bool work_one(wh_validator *v, pending **batch, size_t cap)
{
    double now = mono_s();
    pending *expired = NULL;
    if (v->escrow_pods && now >= v->next_escrow_sweep) {
        v->next_escrow_sweep = now + ESCROW_SWEEP_S;
        escrow_sweep(v, now);
    }
    if (v->queued && now >= v->next_sweep) {
        v->next_sweep = now + SWEEP_INTERVAL_S;
        expired = take_expired(v, now);
    }
    admission *look = expired ? NULL : lookup_pop(v);
    slot *s = expired || look ? NULL : ready_pop(v);
    if (!expired && !look && !s)
        return false;
    pthread_mutex_unlock(&v->mu);
    if (expired)
        settle_expired(expired);
    else if (look)
        name_check(look);
    else
        run_slot(v, s, batch, cap);
    pthread_mutex_lock(&v->mu);
    return true;
}

/* A batch array of max_batch entries, else (out of memory) the caller's
 * stack of 64, so that charging still makes progress in smaller batches. */
static pending **batch_alloc(const wh_validator *v, pending **stack, size_t *cap)
{
    pending **batch = malloc(v->max_batch * sizeof(*batch));
    *cap = v->max_batch;
    if (!batch) {
        batch = stack;
        *cap = *cap < 64 ? *cap : 64;
    }
    return batch;
}

static void *charger_main(void *arg)
{
    wh_validator *v = arg;
    pending *stack[64];
    size_t cap;
    pending **batch = batch_alloc(v, stack, &cap);
    pthread_mutex_lock(&v->mu);
    for (;;) {
        if (work_one(v, batch, cap))
            continue;
        if (v->stopping)
            break;
        if (!v->queued && !v->escrow_pods) {
            pthread_cond_wait(&v->work, &v->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)((v->queued ? SWEEP_INTERVAL_S : ESCROW_SWEEP_S) * 1e9);
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&v->work, &v->mu, &ts);
    }
    pthread_mutex_unlock(&v->mu);
    if (batch != stack)
        free(batch);
    return NULL;
}

/* ---- the decision ---------------------------------------------------------- */

typedef struct decision {
    wh_validate_result *r;
    json_object *quotas; /* audit: quotas charged or exceeded */
} decision;

static void deny(wh_validate_result *r, gq_code code, const char *fmt, ...) GQ_PRINTF(3, 4);
/* The verdict into the review's result. */
static void verdict_apply(wh_validate_result *r, const gq_verdict *v)
{
    r->allowed = v->allowed;
    r->code = v->code;
    snprintf(r->message, sizeof(r->message), "%s", v->message);
}

static void deny(wh_validate_result *r, gq_code code, const char *fmt, ...)
{
    gq_verdict v;
    va_list ap;
    va_start(ap, fmt);
    gq_verdict_vdeny(&v, code, fmt, ap);
    va_end(ap);
    verdict_apply(r, &v);
}

static void audit_quota(json_object *quotas, const gq_quota *q)
{
    json_object *j = json_object_new_object();
    if (!j)
        return;
    json_object_object_add(j, "kind", json_object_new_string(gq_quota_kind_name(q->kind)));
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
             gq_quota_kind_name(q->kind), q->namespace_ ? q->namespace_ : "",
             q->namespace_ ? "/" : "", q->name);
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

/* Dry run: evaluate every quota to charge on a fresh read; write nothing. */
static gq_code dry_run_check(wh_validator *v, const gq_admission *c, decision *d)
{
    for (size_t i = 0; i < c->n_charge; i++) {
        const gq_quota *cq = c->to_charge[i];
        json_object *obj = NULL;
        gq_quota *fresh = NULL;
        gq_err e;
        char label[2 * GQ_CRD_MAX_STRING];
        gq_err_clear(&e);
        gq_quota_label(cq, label, sizeof(label));
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
        bool counts = false;
        rc = gq_admission_check_fresh(c, fresh, now_s(v), &counts, &e);
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
        if (counts)
            charged_add(d->r, d->quotas, cq);
    }
    return GQ_OK;
}

/* ---- reading what the decision asks (quota/admission.h) ------------------- */

/* The namespace's GPULimitRanges; a store error denies (fail closed). */
static gq_code read_limit_ranges(const wh_store *st, gq_admission *a)
{
    gq_err e;
    gq_err_clear(&e);
    gq_code rc = st->list(st->ctx, WH_LIST_LIMIT_RANGES, a->in.ns, &a->snap.limit_ranges, &e);
    if (rc && rc != GQ_ENOMEM)
        gq_admission_deny(a, rc,
                          "gpuquota could not reach the API server to read the GPULimitRanges of "
                          "%s: %s",
                          a->in.ns, e.msg);
    a->snap.read |= GQ_NEED_LIMIT_RANGES;
    return rc == GQ_ENOMEM ? rc : GQ_OK;
}

/* The namespace's labels, its GPUQuotas and every GPUTenantQuota, from the
 * caches; a store error denies (fail closed). */
static gq_code read_quotas(const wh_store *st, gq_admission *a)
{
    gq_err e;
    gq_err_clear(&e);
    gq_admission_snapshot *s = &a->snap;
    gq_code rc;
    if ((rc = st->namespace_labels(st->ctx, a->in.ns, &s->ns_labels, &e)) ||
        (rc = st->list(st->ctx, WH_LIST_QUOTAS, a->in.ns, &s->quotas, &e)) ||
        (rc = st->list(st->ctx, WH_LIST_TENANT_QUOTAS, NULL, &s->tenant_quotas, &e))) {
        if (rc == GQ_ENOMEM)
            return rc;
        gq_admission_deny(a, rc,
                          "gpuquota could not reach the API server to read the quotas of %s: %s",
                          a->in.ns, e.msg);
    }
    s->read |= GQ_NEED_QUOTAS;
    return GQ_OK;
}

/* The pods of the pod's group, a fresh list; a failed list denies (fail
 * closed). A store that cannot list them gives none. */
static gq_code read_group_pods(const wh_store *st, gq_admission *a)
{
    gq_err e;
    gq_err_clear(&e);
    gq_code rc = GQ_OK;
    if (st->list_group_pods)
        rc = st->list_group_pods(st->ctx, a->in.ns, a->need_group, &a->snap.group_pods, &e);
    if (rc && rc != GQ_ENOMEM)
        gq_admission_deny(
            a, rc,
            "gpuquota could not reach the API server to list the members of pod group %s: %s",
            a->need_group, e.msg);
    a->snap.read |= GQ_NEED_GROUP_PODS;
    return rc == GQ_ENOMEM ? rc : GQ_OK;
}

/* A fresh read of the quota the decision names; gone is NULL, a failed
 * read denies (fail closed). */
static gq_code read_fresh_quota(const wh_store *st, gq_admission *a)
{
    const gq_quota *q = a->set[a->need_fresh];
    gq_err e;
    gq_err_clear(&e);
    gq_code rc =
        st->get_quota(st->ctx, q->kind, q->namespace_, q->name, &a->snap.fresh[a->need_fresh], &e);
    if (rc == GQ_ENOMEM)
        return rc;
    if (rc && rc != GQ_ENOTFOUND) {
        char label[2 * GQ_CRD_MAX_STRING];
        gq_quota_label(q, label, sizeof(label));
        gq_admission_deny(a, rc, "gpuquota could not reach the API server to check quota %s: %s",
                          label, e.msg);
    }
    a->snap.fresh_read[a->need_fresh] = true;
    return GQ_OK;
}

/* Decide a pod CREATE, reading through the store what the decision asks
 * for, until it is made. */
static gq_code admission_decide(wh_validator *v, gq_admission *a)
{
    const wh_store *st = &v->store;
    gq_err e;
    gq_err_clear(&e);
    gq_code rc;
    while (!(rc = gq_admission_decide(v->cfg, a, &e)) && a->need) {
        if (a->need & GQ_NEED_LIMIT_RANGES)
            rc = read_limit_ranges(st, a);
        else if (a->need & GQ_NEED_QUOTAS)
            rc = read_quotas(st, a);
        else if (a->need & GQ_NEED_GROUP_PODS)
            rc = read_group_pods(st, a);
        else
            rc = read_fresh_quota(st, a);
        if (rc || !a->verdict.allowed)
            break;
    }
    return rc;
}

/* ---- charging: one admission's quotas, in order, through the chargers ------- */

/* One review being decided. Synchronous callers wait for `done`; the HTTP
 * handler's admission answers from whichever thread decides it. */
struct admission {
    wh_validator *v;
    const wh_review_request *req;
    wh_review_request owned; /* the decoded review, when the admission owns it */
    bool owns_req;
    wh_validate_result r;
    decision d;
    double t0, deadline; /* monotonic s; deadline 0: none */
    gq_admission c;      /* the decision (quota/admission.h) */
    bool charging;       /* decided up to the charges, which are the admission's to run */
    bool check_name;     /* named (no generateName): name_check before the charges */
    pending *ps;         /* one charge per quota to charge, in order */
    pending rel;         /* the rollback under way */
    size_t next;         /* charges settled so far; ps[next] is under way */
    size_t rel_i;        /* rollback: next charge to give back */
    gq_code rc;          /* GQ_ENOMEM: no decision could be made */
    gq_qnode lookup;     /* on v's name-check queue */
    void (*done)(admission *a);
    void *ud;
};

static void admission_answer(admission *a);
static void charge_next(admission *a);

/* The quota p charges (or gives back to). */
static const gq_quota *pending_quota(const pending *p)
{
    const admission *a = p->owner;
    return a->c.to_charge[p->op == OP_CHARGE ? a->next : a->rel_i];
}
static void rollback_next(admission *a);

/* Record a charge's outcome in the decision; false when it failed (then
 * the decision is a denial, or a->rc GQ_ENOMEM). */
static bool charge_outcome(admission *a, const pending *p, const gq_quota *cq)
{
    wh_validate_result *r = a->d.r;
    char label[2 * GQ_CRD_MAX_STRING];
    if (p->rc == GQ_OK) {
        if (p->limited && !r->n_charged)
            snprintf(r->reservation_key, sizeof(r->reservation_key), "%s", p->used->key);
        if (p->limited)
            charged_add(r, a->d.quotas, cq);
        return true;
    }
    gq_quota_label(cq, label, sizeof(label));
    if (p->rc == GQ_EDENIED) {
        deny(r, GQ_EDENIED, "%s", p->err.msg);
        audit_exceeded(&a->d, cq);
    } else if (p->rc == GQ_ENOMEM)
        a->rc = GQ_ENOMEM;
    else if (p->rc == GQ_ETIMEOUT || p->rc == GQ_ELIMIT || p->rc == GQ_EUNSUPPORTED)
        deny(r, p->rc, "gpuquota did not charge quota %s: %s", label, p->err.msg);
    else if (p->rc == GQ_ECONFLICT || p->rc == GQ_EEXISTS)
        deny(r, p->rc, "gpuquota could not charge quota %s: %s", label, p->err.msg);
    else
        deny(r, p->rc, "gpuquota could not reach the API server to charge quota %s: %s", label,
             p->err.msg);
    return false;
}

/* A charger (or the enqueuing thread, for a refused charge) reports p. */
static void pending_settled(pending *p)
{
    admission *a = p->owner;
    if (p->op == OP_RELEASE) {
        if (p->rc)
            GQ_WARN("could not release reservation %s of quota %s: %s", p->resv->key,
                    a->c.to_charge[a->rel_i]->name, p->err.msg);
        a->rel_i++;
        rollback_next(a);
        return;
    }
    if (!charge_outcome(a, p, a->c.to_charge[a->next])) {
        rollback_next(a);
        return;
    }
    a->next++;
    charge_next(a);
}

/* Charge the next quota, or answer when every one is charged. */
static void charge_next(admission *a)
{
    gq_admission *c = &a->c;
    if (a->next == c->n_charge) {
        admission_answer(a);
        return;
    }
    pending *p = &a->ps[a->next];
    *p = (pending){.owner = a,
                   .op = OP_CHARGE,
                   .deadline = a->deadline,
                   .facts = &c->pod.facts,
                   .ns_labels = c->snap.ns_labels,
                   .charge = &a->r.charge,
                   .resv = &c->resv,
                   .alt = c->have_alt ? &c->alt : NULL,
                   .claims = c->claims,
                   .n_claims = c->n_claims};
    if (a->deadline && mono_s() >= a->deadline) {
        p->final = true;
        p->rc = gq_err_set(&p->err, GQ_ETIMEOUT, "the review's timeout ran out");
        pending_settled(p);
    } else if (!slot_enqueue(a->v, c->to_charge[a->next], p))
        pending_settled(p);
}

/* A charge failed: give back, one quota after the other, what the charges
 * before it added (best effort: reservations expire anyway), then answer. */
static void rollback_next(admission *a)
{
    while (a->rel_i < a->next && !a->ps[a->rel_i].added)
        a->rel_i++;
    if (a->rel_i == a->next) {
        a->r.n_charged = 0;
        a->r.charged[0] = '\0';
        size_t nq = json_object_array_length(a->d.quotas);
        if (a->r.code != GQ_EDENIED && nq)
            json_object_array_del_idx(a->d.quotas, 0, nq); /* given back */
        admission_answer(a);
        return;
    }
    const pending *ch = &a->ps[a->rel_i];
    pending *rel = &a->rel;
    *rel = (pending){.owner = a,
                     .op = OP_RELEASE,
                     .resv = ch->used,
                     .claims = a->c.claims,
                     .n_claims = a->c.n_claims};
    memcpy(rel->claim_added, ch->claim_added, sizeof(rel->claim_added));
    if (!slot_enqueue(a->v, a->c.to_charge[a->rel_i], rel))
        pending_settled(rel);
}

/* A CREATE that names its pod (no generateName) while a pod of that name
 * exists in the namespace: kube-apiserver will answer AlreadyExists after
 * admission, so charging it would hold quota for nothing until the
 * reservation expires, and a tenant could create an existing name again
 * and again to block a quota it shares. It is refused instead, with
 * Kubernetes' words, and charged nothing. Allowing it uncharged would not
 * do: the pod could be deleted between this read and the storage. A read
 * that fails lets the charges go on (the reservation expires as before).
 * Runs on a charger: a named create is common (StatefulSets, kubectl), and
 * the read must not hold the thread that serves requests. */
static void name_check(admission *a)
{
    json_object *pod = a->req->object, *meta = gq_json_member(pod, "metadata"), *got = NULL;
    const char *name = gq_json_get_string(meta, "name");
    if (a->deadline && mono_s() >= a->deadline) {
        deny(&a->r, GQ_ETIMEOUT, "gpuquota did not charge the pod: the review's timeout ran out");
        admission_answer(a);
        return;
    }
    const wh_store *st = &a->v->store;
    gq_code rc = st->get_pod(st->ctx, a->c.in.ns, name, &got, NULL);
    const char *uid = gq_json_meta_string(got, "uid"), *mine = gq_json_get_string(meta, "uid");
    bool other = rc == GQ_OK && (!uid || !mine || strcmp(uid, mine));
    json_object_put(got);
    if (!other) {
        charge_next(a);
        return;
    }
    deny(&a->r, GQ_EEXISTS, "pods \"%.253s\" already exists", name);
    admission_answer(a);
}

/* Queue a for name_check on a charger; false (a denied) when the
 * validator stops. */
static bool lookup_enqueue(wh_validator *v, admission *a)
{
    pthread_mutex_lock(&v->mu);
    bool ok = !v->stopping;
    if (ok) {
        gq_fifo_push(&v->lookups, &a->lookup);
        pthread_cond_signal(&v->work);
    }
    pthread_mutex_unlock(&v->mu);
    if (!ok)
        deny(&a->r, GQ_EUNSUPPORTED,
             "gpuquota did not charge the pod: "
             "this gpuquota webhook is shutting down");
    return ok;
}

/* The next admission waiting for its name check, or NULL; v->mu held. */
static admission *lookup_pop(wh_validator *v)
{
    gq_qnode *n = gq_fifo_pop(&v->lookups);
    return GQ_FIFO_ENTRY(n, admission, lookup);
}

/* The decision needs charges: start them (the answer comes from a charger). */
static void charging_start(admission *a)
{
    if (!(a->ps = calloc(a->c.n_charge, sizeof(*a->ps)))) {
        a->rc = GQ_ENOMEM;
        admission_answer(a);
        return;
    }
    if (!a->check_name)
        charge_next(a);
    else if (!lookup_enqueue(a->v, a))
        admission_answer(a);
}

static const char *review_namespace(const wh_review_request *req)
{
    if (req->namespace[0])
        return req->namespace;
    const char *ns = gq_json_get_string(gq_json_member(req->object, "metadata"), "namespace");
    return ns ? ns : "";
}

/* Pod CREATE, decided by the core (gq_admission_decide) on what it asks
 * the store for: a pod that is denied, passes uncharged or is queued is
 * decided there; a dry run is checked on fresh reads; else the charges are
 * due (a->charging). */
static gq_code decide_create(admission *a)
{
    const wh_review_request *req = a->req;
    wh_validator *v = a->v;
    gq_admission *c = &a->c;
    wh_validate_result *r = &a->r;
    gq_admission_dispose(c);
    gq_admission_init(c, &(gq_admission_in){.pod = req->object,
                                            .ns = review_namespace(req),
                                            .request_uid = req->uid,
                                            .now = now_s(v),
                                            .ttl = v->ttl});
    gq_code rc = admission_decide(v, c);
    if (c->decoded)
        r->charge = c->pod.charge;
    if (rc)
        return rc;
    if (!c->verdict.allowed)
        verdict_apply(r, &c->verdict);
    if (!c->verdict.allowed || !c->must_charge)
        return GQ_OK;
    if (req->dry_run) {
        snprintf(r->reservation_key, sizeof(r->reservation_key), "%s", c->resv.key);
        return dry_run_check(v, c, &a->d);
    }
    a->charging = true;
    json_object *meta = gq_json_member(req->object, "metadata");
    const char *name = gq_json_get_string(meta, "name"),
               *gen = gq_json_get_string(meta, "generateName");
    a->check_name = v->store.get_pod && name && name[0] && !(gen && gen[0]);
    return GQ_OK;
}

static bool trusted(const wh_validator *v, const char *username)
{
    for (size_t i = 0; i < v->n_trusted; i++)
        if (!strcmp(username, v->trusted[i]))
            return true;
    return false;
}

/* Pod UPDATE (and pods/status): gpuquota's gates, labels and annotations
 * are its own (quota/tamper.h). */
static void decide_update(wh_validator *v, const wh_review_request *req, wh_validate_result *r)
{
    gq_verdict verdict;
    if (trusted(v, req->username))
        return;
    gq_tamper_pod_update(req->old_object, req->object, &verdict);
    if (!verdict.allowed)
        verdict_apply(r, &verdict);
}

/* ResourceClaim CREATE and UPDATE: the finalizer, label and annotation
 * that keep a checked claim from being made again (quota/claimcheck.h) are
 * gpuquota's controller's alone to add or remove. A claim created with the
 * finalizer but not the label would never be unpinned: nobody but gpuquota
 * could finish its deletion, nor its namespace's. */
static void decide_claim_update(wh_validator *v, const wh_review_request *req,
                                wh_validate_result *r)
{
    gq_verdict verdict;
    if (trusted(v, req->username) || !req->object)
        return;
    gq_tamper_claim_write(req->old_object, req->object, &verdict);
    if (!verdict.allowed)
        verdict_apply(r, &verdict);
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
    /* kube-apiserver hands the code and reason to the client as they are:
     * AlreadyExists lets clients treat it as the conflict it is. */
    bool exists = r->code == GQ_EEXISTS;
    if (!r->allowed &&
        (rc = wh_review_response_deny(resp, exists ? 409 : 403,
                                      exists ? "AlreadyExists" : "Forbidden", r->message)))
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

static admission *admission_new(wh_validator *v, double deadline)
{
    admission *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->v = v;
    a->t0 = mono_s();
    a->deadline = deadline;
    a->r.allowed = true;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        a->r.charge.set[k] = true;
    a->r.charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    a->d = (decision){&a->r, json_object_new_array()};
    if (!a->d.quotas) {
        free(a);
        return NULL;
    }
    gq_admission_init(&a->c, &(gq_admission_in){.ns = ""});
    return a;
}

static void admission_free(admission *a)
{
    gq_admission_dispose(&a->c);
    free(a->ps);
    json_object_put(a->d.quotas);
    if (a->owns_req)
        wh_review_request_dispose(&a->owned);
    free(a);
}

/* Decided: hand over to whoever waits (a->done may free a). */
static void admission_answer(admission *a)
{
    if (a->r.allowed)
        a->r.code = GQ_OK;
    a->done(a);
}

/* Decide up to the charges on this thread; the charges, when any, go on
 * in the chargers, which answer. */
static void admission_run(admission *a)
{
    const wh_review_request *req = a->req;
    switch (wh_review_target_of(req)) {
    case WH_TARGET_POD_CREATE:
        if (!req->object)
            deny(&a->r, GQ_EDENIED, "request.object is missing");
        else
            a->rc = decide_create(a);
        break;
    case WH_TARGET_POD_UPDATE:
        decide_update(a->v, req, &a->r);
        break;
    case WH_TARGET_CLAIM_WRITE:
        decide_claim_update(a->v, req, &a->r);
        break;
    case WH_TARGET_OTHER:
        break;
    }
    if (!a->rc && a->charging)
        charging_start(a);
    else
        admission_answer(a);
}

/* The review's answer (resp uninitialised; the caller disposes it on
 * GQ_OK), with its audit record and metrics. */
static gq_code admission_review(admission *a, wh_review_response *resp, gq_err *err)
{
    const wh_review_request *req = a->req;
    wh_review_response out;
    gq_code rc = a->rc;
    if (!rc && !(rc = wh_review_response_init(&out, req->version, req->uid)) &&
        (rc = answer(req, &a->r, &out)))
        wh_review_response_dispose(&out);
    if (rc)
        return gq_err_set(err, rc, "%s", rc == GQ_ENOMEM ? "out of memory" : gq_strerror(rc));
    record(a->v, req, &a->r, a->d.quotas, mono_s() - a->t0);
    if (!a->r.allowed)
        GQ_LOG(GQ_LOG_DEBUG, req->uid, "denied %s %s in %s: %s", wh_operation_name(req->operation),
               req->kind, req->namespace, a->r.message);
    *resp = out;
    return GQ_OK;
}

/* A caller that blocks until its admission is answered. */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} waiter;

static void waiter_wake(admission *a)
{
    waiter *w = a->ud;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* A validator without charger threads: the caller does the work its
 * admission queued (and nothing else is queued: there is no other caller)
 * until the admission is answered. false when work ran out first. */
static bool run_inline(wh_validator *v, waiter *w)
{
    bool done = false;
    pending *stack[64];
    size_t cap;
    pending **batch = batch_alloc(v, stack, &cap);
    pthread_mutex_lock(&v->mu);
    for (;;) {
        pthread_mutex_lock(&w->mu);
        done = w->done;
        pthread_mutex_unlock(&w->mu);
        if (done || !work_one(v, batch, cap))
            break;
    }
    pthread_mutex_unlock(&v->mu);
    if (batch != stack)
        free(batch);
    return done;
}

static void admission_run_and_wait(admission *a)
{
    waiter w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    a->done = waiter_wake;
    a->ud = &w;
    admission_run(a);
    if (!a->v->n_chargers && !run_inline(a->v, &w)) {
        /* Nothing left to run and no answer: never expected; answered as
         * an error rather than waited for. */
        GQ_ERROR("validate: an inline admission was left unanswered");
        a->rc = GQ_EINVAL;
        w.done = true;
    }
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

gq_code wh_validate_review(wh_validator *v, const wh_review_request *req, wh_review_response *resp,
                           wh_validate_result *res, gq_err *err)
{
    admission *a = admission_new(v, 0);
    if (!a)
        return gq_err_oom(err);
    a->req = req;
    admission_run_and_wait(a);
    gq_code rc = admission_review(a, resp, err);
    if (!rc && res)
        *res = a->r;
    admission_free(a);
    return rc;
}

/* kube-apiserver's ?timeout= (a Go duration such as "10s" or "1m0s"; its
 * default 10 s when absent or unreadable). A charge still queued at four
 * fifths of it is refused, which leaves the rest for the round under way
 * and the answer. */
static double review_deadline(const char *timeout)
{
    double total = 0;
    const char *p = timeout;
    while (p && *p) {
        char *end;
        double n = strtod(p, &end);
        if (end == p || !(n >= 0))
            break;
        if (!strncmp(end, "ms", 2))
            total += n / 1000, end += 2;
        else if (*end == 's' || *end == 'm' || *end == 'h')
            total += n * (*end == 's' ? 1 : *end == 'm' ? 60 : 3600), end++;
        else
            break;
        p = end;
    }
    if ((p && *p) || !(total > 0 && total <= 3600))
        total = 10;
    return mono_s() + total * 0.8;
}

/* A decoded review in a new admission, or NULL with resp filled. */
static admission *admission_decode(wh_validator *v, const http_request *req, http_response *resp)
{
    gq_err err;
    gq_err_clear(&err);
    admission *a = admission_new(v, review_deadline(req->timeout));
    if (!a) {
        http_response_error(resp, 500, "out of memory");
        return NULL;
    }
    gq_code rc =
        wh_review_decode_within(req->body, req->body_len, &v->review_limits, &a->owned, &err);
    if (rc) {
        admission_free(a);
        wh_metrics_observe_admission(v->metrics, WH_WEBHOOK_VALIDATE, NULL, WH_DECISION_ERROR, 0);
        wh_review_answer_undecoded(req, rc, &err, resp);
        return NULL;
    }
    a->owns_req = true;
    a->req = &a->owned;
    return a;
}

static void admission_http_answer(admission *a, http_response *resp)
{
    wh_review_response rs;
    gq_err err;
    char *text = NULL;
    size_t len = 0;
    gq_err_clear(&err);
    gq_code rc = admission_review(a, &rs, &err);
    if (!rc) {
        rc = wh_review_encode(&rs, &text, &len);
        wh_review_response_dispose(&rs);
    }
    if (rc)
        http_response_error(resp, 500, "%s", err.msg[0] ? err.msg : gq_strerror(rc));
    else
        http_response_take_body(resp, 200, "application/json", text, len);
}

void wh_validate_handle(void *ctx, const http_request *req, http_response *resp)
{
    admission *a = admission_decode(ctx, req, resp);
    if (!a)
        return;
    admission_run_and_wait(a);
    admission_http_answer(a, resp);
    admission_free(a);
}

static void http_done(admission *a)
{
    http_deferred *later = a->ud;
    http_response resp;
    http_response_init(&resp);
    admission_http_answer(a, &resp);
    admission_free(a);
    http_deferred_finish(later, &resp);
}

bool wh_validate_handle_async(void *ctx, const http_request *req, http_response *resp,
                              http_deferred *later)
{
    if (!((wh_validator *)ctx)->n_chargers) { /* inline: nobody else would run it */
        wh_validate_handle(ctx, req, resp);
        return false;
    }
    admission *a = admission_decode(ctx, req, resp);
    if (!a)
        return false;
    a->done = http_done;
    a->ud = later;
    admission_run(a);
    return true;
}
