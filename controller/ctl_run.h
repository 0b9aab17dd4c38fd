/* Private to controller.c and admit.c: the running controller's state and
 * the pieces of it the queue admitter shares. */
#ifndef CTL_RUN_H
#define CTL_RUN_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/htab.h"
#include "controller/ctl_int.h"
#include "http/metrics.h"
#include "kube/kube.h"

#define API_GQ "/apis/gpuquota.io/v1alpha1"
#define KS_BUCKETS 1024 /* initial; the kstate table doubles past one a bucket */
#define N_BUCKETS 12

#define W_BUCKETS 10

/* Per-quota state kept between reconciles, keyed like the queue. */
typedef struct kstate {
    gq_hnode node;         /* in the controller's kstate table, by key */
    char *sent_rv;         /* the resourceVersion `written` is newer than */
    char *written_rv;      /* resourceVersion our last reconcile's write produced */
    json_object *written;  /* a newer version than the cache's sent_rv: what the API
                              server returned for our last write, or read after a 409 */
    ctl_quota_figures fig; /* its figures at its last reconcile */
    bool gauges;
    /* Pods of this quota evicted by preemption, by reason (CTL_PREEMPT_*). */
    uint64_t victims[2];
    http_histogram wait; /* seconds queued pods waited (ungated) */
    /* When this replica first saw each reservation of the quota whose pod
     * it has not seen: {key: monotonic ms}. */
    json_object *first_seen;
    int64_t fold_since_ms; /* monotonic: a fold-only write first put off; 0: none waits */
    int64_t charged_ms;    /* monotonic: another writer last changed its reservations */
    /* A reconcile's status handed to the admission pass to write with the
     * charges it plans on it (the whole object, at the resourceVersion it
     * applies to; NULL: none), and the resourceVersion of the last one
     * handed over: a reconcile hands over a version once, then writes. */
    json_object *handoff;
    char *handoff_rv;
    char *ns; /* "" for tenants */
    char *name;
    char key[];
} kstate;

typedef struct tenant_ent {
    char *name;
    gq_quota *q;
} tenant_ent;

enum { RES_OK, RES_CONFLICT, RES_ERROR, RES_INVALID, RES_COUNT };

/* Why pods were preempted, Kueue's reasons under gpuquota's names
 * (docs/controller.md): inside the preemptor's quota (Kueue's
 * InClusterQueue), or reclaimed from a borrower of its cohort
 * (InCohortReclaim...). */
enum { CTL_PREEMPT_WITHIN_QUOTA, CTL_PREEMPT_RECLAIM, CTL_PREEMPT_REASONS };

struct ctl_controller {
    ctl_controller_opts o;
    char *lease_ns, *lease_name, *identity;
    ctl_podstore *store;
    ctl_workqueue *queue;
    kube_cache *pods, *quotas, *tenants, *nss;
    kube_leader_elect *le;
    pthread_t *threads;
    unsigned n_threads;
    pthread_t resync;
    bool resync_started, started, stopped;
    atomic_int stop, leading, synced;

    pthread_mutex_t mu; /* tenants, kstates */
    tenant_ent *tv;
    size_t n_tenants, cap_tenants;
    gq_htab ks; /* kstate by key */

    atomic_ulong results[RES_COUNT], writes, events, cost_errors, abandoned, folds_deferred,
        handoffs;
    atomic_ulong events_dropped;
    atomic_ulong claims_refused, claims_pinned, claims_unpinned; /* claims.c */
    /* The abandoned-reservation grace read from the cluster (mu): 0 until
     * read; when it was read (monotonic ms). Fixed when the options set it. */
    bool grace_dynamic;
    long grace_ms;
    int64_t grace_read_ms;
    /* Events posted: a token bucket (ctl_post_event; mu). */
    double ev_tokens;
    uint64_t ev_refilled_us;
    atomic_ulong q_charges, q_ungated;
    json_object *ungated;  /* {uid: true}: ungated here, not yet seen ungated (mu) */
    json_object *gone;     /* {uid: monotonic ms}: pods the watch saw deleted (mu) */
    json_object *q_events; /* {uid: message}: why each queued pod was said to wait (mu) */
    /* Preemption (preempt.c), each {uid: expiry, Unix s} (mu): preemptors
     * whose room is held, victims evicted, victims whose eviction a
     * disruption budget refused, preemptors for which nobody could be
     * evicted (they wait their turn again). */
    json_object *nominated, *evicting, *evict_refused, *no_victims;
    /* Namespaces of queued pods where a live list found no GPUQuota ("":
     * no GPUTenantQuota at all) (ungate.c, read_uncached): {namespace:
     * until, Unix s} (mu). */
    json_object *quota_empty;
    atomic_ulong preemptions[CTL_PREEMPT_REASONS], evictions_refused;
    http_histogram reconcile_duration; /* seconds */
    http_histogram pass_cpu;           /* the thread's CPU seconds per admission pass */
};

/* The queue key of a GPUQuota ('q') or tenant ('t'). */
#define KEY_MAX 600

/* The work-queue key of the admission pass: one pass at a time (the queue
 * never hands a key to two workers), on the leader only. */
#define ADMIT_KEY "a/queue"

/* Upper bounds (seconds) of the queue wait histogram's buckets. */
extern const double ctl_wait_bounds[W_BUCKETS];

/* Wall clock (Unix seconds): the options' clock, else time(). */
int64_t ctl_wall_now(ctl_controller *c);
/* Monotonic clock, microseconds. */
int64_t ctl_mono_us(void);
/* The per-quota state of key (c->mu held); created when create (NULL when
 * out of memory), else NULL when there is none. */
kstate *ctl_ks_get(ctl_controller *c, const char *key, bool create);
/* key = the queue key of kind 'q' (GPUQuota ns/name), 't' (tenant name),
 * 'c' (the claims of pod ns/name to check) or 'u' (the claims of ns to
 * unpin; "" every namespace); false when too long. */
bool ctl_make_key(char key[KEY_MAX], char kind, const char *ns, const char *name);
/* path = the API path of GPUQuota ns/name, or of GPUTenantQuota name when
 * ns is empty; false when it does not fit in cap. */
bool ctl_quota_path(char *path, size_t cap, const char *ns, const char *name);
/* The newest version of quota key known here, from cached (a copy of the
 * cache's object, taken): cached itself, or a copy of what
 * ctl_quota_remember kept while the cache still shows the resourceVersion
 * that was newer than. NULL only when cached is. Caller owns it. */
json_object *ctl_quota_newest(ctl_controller *c, const char *key, json_object *cached);
/* Remember obj (taken; a status write's answer, or a read after a 409) as
 * newer than the cache's version older_rv (taken) of quota key, so that the
 * next read of the quota does not start from what the cache still shows
 * and meet a certain 409. */
void ctl_quota_remember(ctl_controller *c, const char *key, char *older_rv, json_object *obj);
/* Hand obj (taken: quota key at the resourceVersion it applies to, with the
 * status a reconcile wants) to the admission pass. Returns > 0 when handed
 * over; else obj is dropped and the reconcile writes itself: < 0 when that
 * version was handed over before, 0 when out of memory. */
int ctl_quota_handoff(ctl_controller *c, const char *key, json_object *obj);
/* The object handed over for quota key if it applies to resourceVersion rv
 * (caller owns it), else NULL; either way no longer handed over. */
json_object *ctl_quota_take_handoff(ctl_controller *c, const char *key, const char *rv);
/* Requeue key after its next backoff delay / after ms. */
void ctl_backoff(ctl_controller *c, const char *key);
void ctl_requeue_after(ctl_controller *c, const char *key, long ms);
/* The object an Event is about (its involvedObject): apiVersion, kind,
 * namespace ("" for a cluster-scoped one) and name. */
typedef struct ctl_about {
    const char *api_version, *kind, *ns, *name;
} ctl_about;

/* Post an Event (reason, message) about obj, as about names it, at now;
 * failures are logged, never returned. */
void ctl_post_event(ctl_controller *c, json_object *obj, const ctl_about *about, const char *reason,
                    const char *message, int64_t now);
/* A kube_item_fn that appends each listed item (a new reference) to ud, a
 * JSON array: for lists small enough to hold whole. */
gq_code ctl_keep_item(void *ud, json_object *item, gq_err *err);
/* Count s seconds of queueing in the wait histogram of quota key qkey. */
void ctl_wait_observe(ctl_controller *c, const char *qkey, double s);

/* --- the queue admitter (admit.c) --- */

/* Ask for an admission pass. */
void ctl_ungate_kick(ctl_controller *c);
/* One admission pass: every queued pod in order, charged and ungated when
 * its quotas have room (docs/queueing.md). Returns RES_*; requeues itself. */
int ctl_ungate_pass(ctl_controller *c);

/* --- cohorts: borrowing between the GPUQuotas of a tenant (cohort.c) --- */

/* The cohorts of one admission pass: v[0..n) (one per GPUTenantQuota one
 * of whose GPUQuotas may borrow, and one per spec.cohort one of whose
 * GPUTenantQuotas may borrow), the cached quotas parsed (owned), and the
 * members the pass does not charge (extra, pointing at their cohort). */
typedef struct ctl_cohorts {
    gq_queue_cohort *v;
    size_t n;
    gq_quota **owned;
    size_t n_owned;
    gq_queue_quota *extra;
    size_t n_extra, cap_extra;
} ctl_cohorts;

/* Point the pass's quotas pq[0..nq) (in use as read fresh) at their
 * cohorts, built in *co; nothing when no GPUQuota may borrow. A GPUQuota
 * whose namespace several tenants cover is of the first of them with a
 * borrower. GQ_ENOMEM. */
gq_code ctl_cohorts_attach(ctl_controller *c, gq_queue_quota *pq, size_t nq, int64_t now,
                           ctl_cohorts *co) GQ_WUR;
void ctl_cohorts_dispose(ctl_cohorts *co);

/* A quota's cohort for its status (ctl_cohort_in): the cached GPUQuotas
 * parsed (owned, with their status.used), the members among them (m, n,
 * sorted), the quota's place (self; n when absent) and the tenant (owned). */
typedef struct ctl_cohort_view {
    gq_quota **owned;
    size_t n_owned;
    gq_cohort_member *m;
    size_t n, self;
    gq_quota *tenant;
} ctl_cohort_view;

/* The cohort of GPUQuota ns/name, or of GPUTenantQuota name (ns ""), into
 * *v: for a tenant naming spec.cohort, the tenants naming it (self its
 * place; v->tenant NULL); else empty when no GPUQuota may borrow or the
 * quota is in no cohort (a GPUQuota whose namespace several tenants cover
 * is of the first of them with a borrower, as in ctl_cohorts_attach).
 * GQ_ENOMEM (v empty). */
gq_code ctl_cohort_view_of(ctl_controller *c, const char *ns, const char *name,
                           ctl_cohort_view *v) GQ_WUR;
void ctl_cohort_view_dispose(ctl_cohort_view *v);

/* A member of namespace ns changed what it lends or borrows (spec,
 * status.used, or it came or went): reconcile again every tenant covering
 * ns and every GPUQuota those cover; ns NULL (a tenant changed): every
 * tenant and every GPUQuota. Nothing when no GPUQuota may borrow. */
void ctl_cohort_touch(ctl_controller *c, const char *ns);

/* The tenants other than self naming the spec.cohort of GPUTenantQuota obj
 * (none: nothing) are reconciled again: what each lends or borrows in that
 * cohort of tenants depends on the others' spec and status.used. */
void ctl_cohort_touch_tenants(ctl_controller *c, const void *obj, const char *self);

/* --- preemption inside a quota (preempt.c; quota/preempt.h) --- */

/* What the admission pass planned, for preemption: the entries, their
 * decisions and queued pods (parallel, n), and the quotas as the plan left
 * them (what it admitted and held added). */
typedef struct ctl_preempt_in {
    const gq_queue_entry *ents;
    const gq_queue_decision *dec;
    const ctl_queued *pods;
    size_t n;
    const gq_queue_quota *pq;
    size_t nq;
    const ctl_cohorts *cohorts; /* the members of the pass's cohorts it does not charge */
    int64_t now;
    bool leaving_known; /* pq's leaving was counted (ctl_preempt_leaving) */
} ctl_preempt_in;

/* Before the plan: when an entry of ents[0..n) is a held preemptor, count
 * in pq[0..nq)'s leaving what the pods leaving there hold (the room its
 * hold takes first, gq_queue_plan) and return true; false when none is
 * held (nothing counted). */
bool ctl_preempt_leaving(ctl_controller *c, const gq_queue_entry *ents, size_t n,
                         gq_queue_quota *pq, size_t nq, int64_t now);

/* Evict for the first waiting pod that a quota allowing preemption keeps
 * out and for which some pods may be evicted, or nominate it when the pods
 * leaving make its room; one for which nobody may be evicted is passed
 * over (and not tried again for a while), so that it never stops those
 * behind it. Returns when the pass should run again (ms; 0: when something
 * changes): soon after either, or when more waiting pods than one pass
 * tries are still to be tried, or once a budget's refusal that left nobody
 * to evict is forgotten. */
long ctl_preempt(ctl_controller *c, const ctl_preempt_in *in);
/* Whether queued pod uid is a nominated preemptor: its room is held. */
bool ctl_preempt_held(ctl_controller *c, const char *uid, int64_t now);
/* Pod uid was admitted: no longer a preemptor. */
void ctl_preempt_forget(ctl_controller *c, const char *uid);

/* --- the claims check (claims.c; quota/claimcheck.h) --- */

/* Check the claims of pod ns/name (key 'c'): every claim its record
 * charged must be the one charged; each is pinned, then the pod's gate
 * GQ_CLAIMS_GATE is lifted. A claim not made yet requeues the key; a claim
 * that is not the one charged leaves the pod gated with a Warning Event.
 * Returns RES_*. */
int ctl_claims_check(ctl_controller *c, const char *ns, const char *name);
/* Unpin the claims of ns ("" every namespace; key 'u') whose pods are all
 * bound with the claim reserved for them, done or gone. Returns RES_*. */
int ctl_claims_unpin(ctl_controller *c, const char *ns);

#endif
