/* gpuquota controller (DESIGN.md §1, §4): keeps GPUQuota and GPUTenantQuota
 * status in sync with the pods of the cluster.
 *
 * Pieces, each usable alone:
 *   ctl_pod / ctl_podstore  compact records of GPU pods, indexed by namespace,
 *                        plus namespace labels (what tenant selectors read)
 *   ctl_reconcile        the pure status computation for one quota
 *   ctl_workqueue            de-duplicating work queue with per-key backoff
 *   ctl_controller       the running controller over the kube_api seam
 *
 * Pod charges come from gq_pod_cost_compute only (quota/podcost.h); usage is
 * summed by gq_quota_recount (quota/policy.h). Decisions are written down in
 * docs/controller.md. */
#ifndef CTL_H
#define CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "quota/crd.h"
#include "quota/lending.h"
#include "common/gq_error.h"
#include "common/htab.h"
#include "http/metrics.h"
#include "kube/kube.h"
#include "quota/policy.h"

/* ------------------------------------------------------------------------ */
/* Compact pod records                                                       */

typedef struct ctl_podstore ctl_podstore;
typedef struct ctl_ns ctl_ns;

/* One GPU pod as the controller keeps it (~100 bytes plus its strings).
 * Pods without a GPU are never recorded. Read-only for users; the store links
 * it into its namespace's list. */
/* A queued pod that accepts several models (gpuquota.io/gpu-model: a,b):
 * each model and the pod's charge on it, in order of preference. */
typedef struct ctl_choices {
    size_t n;
    const gq_model *model[GQ_MAX_MODEL_CHOICES]; /* borrowed from the config */
    int64_t charge[GQ_MAX_MODEL_CHOICES][GQ_KEY_COUNT];
} ctl_choices;

typedef struct ctl_pod {
    struct ctl_pod *prev, *next;  /* namespace list (store lock) */
    gq_hnode unode;               /* in the store's uid index (store lock) */
    ctl_ns *ns;                   /* interned namespace, holds a reference */
    const char *priority_class;   /* interned spec.priorityClassName; NULL = none */
    const char *model;            /* gq_pod_model, borrowed from the config; NULL = none */
    int64_t charge[GQ_KEY_COUNT]; /* gq_charge_from_cost of the running pod */
    int64_t delete_at;            /* deletionTimestamp + grace (Unix s); 0 = not deleting */
    bool terminal;                /* phase Succeeded or Failed */
    bool terminating;             /* spec.activeDeadlineSeconds set (scope Terminating) */
    bool linked;                  /* in its namespace's list */
    bool gated;                   /* carries the gate gpuquota.io/quota: queued, not counted */
    bool claims_gated;            /* carries gpuquota.io/claims: its claims are to be checked */
    bool dra;                     /* gpuquota recorded DRA claims for it (may pin them) */
    bool bound;                   /* spec.nodeName is set */
    bool borrowing;               /* annotation gpuquota.io/borrowing: admitted on borrowed room */
    int16_t gate_idx;             /* its index in spec.schedulingGates (gated only) */
    int32_t priority;             /* spec.priority */
    int32_t group_size;           /* gpuquota.io/pod-group-size; 0: not in a group */
    int64_t created_us;           /* metadata.creationTimestamp (Unix microseconds) */
    ctl_choices *choices;         /* gated and accepting several models; else NULL */
    uint16_t uid_off;             /* offset of the uid into data */
    uint16_t group_off;           /* offset of the group name into data ("" none) */
    uint16_t n_claims;            /* shared ResourceClaims it names (gq_pod_cost.shared) */
    gq_shared_claim *claims;      /* owned; NULL when none */
    char data[];                  /* "name\0uid\0group\0" */
} ctl_pod;

/* Strings of a record (borrowed from it). */
const char *ctl_pod_name(const ctl_pod *p);
const char *ctl_pod_uid(const ctl_pod *p);
const char *ctl_pod_namespace(const ctl_pod *p);
/* gpuquota.io/pod-group of the pod, "" when it is in no group. */
const char *ctl_pod_group(const ctl_pod *p);

/* Whether p counts at now: not terminal, not deleted past its grace and not
 * queued behind the gate gpuquota.io/quota. */
bool ctl_pod_counts(const ctl_pod *p, int64_t now);

/* Whether a and b would count the same for every quota (charge, phase,
 * deletion, scope facts) and are the same pod (uid: the reservation key);
 * NULL equals NULL only. */
bool ctl_pod_same(const ctl_pod *a, const ctl_pod *b);

/* Build the record of pod (borrowed JSON) under cfg. *out is NULL when the
 * pod uses no GPU and gpuquota recorded no DRA claims for it (its claims
 * are checked and pinned even when they hold no GPU), or has no
 * name/namespace: nothing to keep. A pod whose
 * GPU request cannot be costed (gq_pod_cost_compute fails) is reported with
 * that error and *out untouched; the caller decides (the controller logs it
 * and keeps nothing). Caller owns *out: ctl_podstore_link it, or ctl_pod_free. */
gq_code ctl_pod_from_json(ctl_podstore *s, const gq_config *cfg, json_object *pod, ctl_pod **out,
                          gq_err *err) GQ_WUR;

/* Unlinks p if still linked, drops its namespace reference, frees it. NULL ok. */
void ctl_pod_free(ctl_podstore *s, ctl_pod *p);

/* ------------------------------------------------------------------------ */
/* The store                                                                 */

gq_code ctl_podstore_new(ctl_podstore **out) GQ_WUR;
/* Frees every record still linked. NULL ok. */
void ctl_podstore_free(ctl_podstore *s);

/* Add p to its namespace's index (idempotent). Thread-safe. */
void ctl_podstore_link(ctl_podstore *s, ctl_pod *p);
/* Remove p from the index (idempotent); p stays valid until ctl_pod_free. */
void ctl_podstore_unlink(ctl_podstore *s, ctl_pod *p);
/* Replace old by new_ in the index (both may be NULL). */
void ctl_podstore_replace(ctl_podstore *s, ctl_pod *old, ctl_pod *new_);

/* Record namespace ns with its metadata.labels (deep-copied; NULL = none).
 * *changed (may be NULL) tells whether the labels differ from before. */
gq_code ctl_podstore_set_namespace(ctl_podstore *s, const char *ns, json_object *labels,
                                   bool *changed) GQ_WUR;
/* The namespace object is gone (its pods may linger until their deletion). */
void ctl_podstore_delete_namespace(ctl_podstore *s, const char *ns);

/* Linked pods in total / in ns. */
size_t ctl_podstore_pod_count(ctl_podstore *s);
size_t ctl_podstore_ns_pod_count(ctl_podstore *s, const char *ns);

/* Call fn for every known namespace (with its labels, borrowed for the call)
 * under the read lock until fn returns non-zero. fn must not call the store. */
void ctl_podstore_foreach_namespace(ctl_podstore *s,
                                    int (*fn)(void *ud, const char *ns, json_object *labels),
                                    void *ud);

/* Whether quota q covers namespace ns given the labels the store holds for
 * it (gq_quota_covers_namespace under the read lock). */
bool ctl_podstore_covers(ctl_podstore *s, const gq_quota *q, const char *ns);

/* Whether a pod in ns whose metadata.uid is uid is recorded (reservations
 * are keyed by the pod's uid). An index lookup, not a scan. */
bool ctl_podstore_has_uid(ctl_podstore *s, const char *ns, const char *uid);

/* A queued pod (gated by gpuquota.io/quota), copied out of the store. */
typedef struct ctl_queued {
    char *ns, *name, *uid;
    char *group;                /* gpuquota.io/pod-group; NULL: none */
    const char *priority_class; /* interned by the store (lives as long as it) */
    const char *model;          /* gq_pod_model, borrowed from the config; NULL = none */
    bool terminating;
    int32_t priority, group_size;
    int64_t created_us;
    int gate_idx;
    gq_amounts charge; /* with choices: on the first model */
    /* Accepting several models: opts[0..n_opts) priced on each, model[i]
     * the catalog entry of opts[i] (borrowed from the config). */
    size_t n_opts;
    gq_model_option opts[GQ_MAX_MODEL_CHOICES];
    const gq_model *model_of[GQ_MAX_MODEL_CHOICES];
    const gq_model *pin; /* set by the admission pass: the model chosen */
    bool borrowing;      /* set by the admission pass: admitted on borrowed capacity */
    /* The ResourceClaims it names directly (owned copy; charged once per
     * quota however many pods name them). */
    gq_shared_claim *claims;
    size_t n_claims;
} ctl_queued;

/* The queued pods that count at now (not terminal, not being deleted), in
 * no particular order; *running gets {"ns/group": members running} for the
 * groups of pods that are no longer queued. Caller frees with
 * ctl_queued_free and json_object_put. GQ_ENOMEM. */
gq_code ctl_podstore_queued(ctl_podstore *s, int64_t now, ctl_queued **out, size_t *n,
                            json_object **running) GQ_WUR;
void ctl_queued_free(ctl_queued *v, size_t n);
/* Free the strings and claims of one queued pod (not q itself). */
void ctl_queued_dispose(ctl_queued *q);

/* A GPU pod that counts (admitted: neither gated nor ended), copied out of
 * the store for preemption (controller/preempt.c), with the quotas of a
 * list it counts in. */
typedef struct ctl_running {
    char *ns, *name, *uid;
    char *group; /* "ns/group"; NULL: none */
    int32_t priority;
    int64_t created_us;
    const char *model; /* borrowed from the config; NULL: none */
    gq_amounts charge;
    bool leaving;            /* being deleted: it frees its charge soon */
    bool borrowing;          /* admitted on capacity its quota borrowed */
    size_t *quotas;          /* indices into the list given */
    size_t n_quotas;         /* 0: not copied (it counts in none of them) */
    gq_shared_claim *claims; /* the ResourceClaims it names directly (in charge) */
    size_t n_claims;
} ctl_running;

/* The pods that count at now in some of qs[0..nq) (matching and limited by
 * it), with which. Caller frees with ctl_running_free. GQ_ENOMEM. */
gq_code ctl_podstore_running(ctl_podstore *s, const gq_quota *const *qs, size_t nq, int64_t now,
                             ctl_running **out, size_t *n) GQ_WUR;
void ctl_running_free(ctl_running *v, size_t n);

/* gq_quota_matches with the labels the store holds for f's namespace. */
bool ctl_podstore_matches(ctl_podstore *s, const gq_quota *q, const gq_pod_facts *f);

/* Bytes the store holds for its records, namespace entries and interned
 * strings, counted from the sizes it allocated (malloc overhead and the small
 * per-namespace sums excluded). */
size_t ctl_podstore_bytes(ctl_podstore *s);

/* Whether the reservation keyed key in namespace ns is done with: its pod
 * (metadata.uid == key) has been seen, so usage counts it. */
typedef bool (*ctl_seen_fn)(void *ud, const char *ns, const char *key);

/* A quota's cohort (docs/queueing.md, "Borrowing and reclaim"), for
 * status.borrowed and status.lent: its members m[0..n) sorted by namespace
 * and name (borrowed), and for a member its own place, self (its used
 * there is replaced by the reconcile's recount, its spec by the one
 * reconciled): a GPUQuota, or a GPUTenantQuota in a cohort of tenants
 * (spec.cohort; its members are the tenants). A tenant with self == n is
 * the cohort of its GPUQuotas m[0..n). n == 0: in no cohort. */
typedef struct ctl_cohort_in {
    const gq_cohort_member *m;
    size_t n;
    size_t self;
} ctl_cohort_in;

/* What a quota is reconciled against: the pods it governs (n of them), who
 * says whether a reservation's pod has been seen (seen, with seen_ud), the
 * time, and its cohort (zero: none). */
typedef struct ctl_counted {
    const gq_usage_pod *pods;
    size_t n;
    ctl_seen_fn seen;
    void *seen_ud;
    int64_t now;
    ctl_cohort_in cohort;
} ctl_counted;

/* The pods a quota may count, as the store holds them: borrowed, valid only
 * during the callback they are handed to. */
typedef struct ctl_podstore_pods {
    const gq_usage_pod *pods; /* candidates (terminal and deleted pods marked facts.terminal) */
    size_t n;
    ctl_seen_fn counted; /* whether the pod of that uid is recorded and not queued */
    void *counted_ud;
    /* The earliest deletion deadline at or after now of a pod being
     * deleted there (Unix s; 0: none): it stops counting once it has
     * passed, with no event to say so when its node is gone. */
    int64_t next_deadline;
} ctl_podstore_pods;

typedef gq_code (*ctl_podstore_pods_fn)(void *ud, const ctl_podstore_pods *v, gq_err *err);

/* Call fn once with the candidate pods of q (a GPUQuota: those of its
 * namespace; a GPUTenantQuota: those of the namespaces it covers, in name
 * order) under the store's read lock, and return what fn returns. fn must
 * not call the store. GQ_ENOMEM (fn not called). */
gq_code ctl_podstore_with_quota_pods(ctl_podstore *s, const gq_quota *q, int64_t now,
                                     ctl_podstore_pods_fn fn, void *ud, gq_err *err) GQ_WUR;

/* ------------------------------------------------------------------------ */
/* Reconcile (pure)                                                          */

#define CTL_COND_READY "Ready"
#define CTL_COND_EXCEEDED "Exceeded"
/* Ready's reason (and the Event's) when the spec cannot be parsed. */
#define CTL_REASON_INVALID "InvalidSpec"

/* What a quota's status says after a reconcile, for the metrics. */
typedef struct ctl_quota_figures {
    gq_amounts used, hard;
    bool has_borrowed, has_lent; /* the status reports borrowed, lent: */
    gq_amounts borrowed, lent;
    int64_t queued_pods; /* pods queued behind the gate that the quota governs */
} ctl_quota_figures;

typedef struct ctl_result {
    json_object *status;          /* desired status (owned) */
    bool changed;                 /* differs from the current status: write it */
    bool exceeded;                /* used > hard for some key */
    bool became_exceeded;         /* Exceeded turned True in this reconcile: raise an Event */
    bool invalid;                 /* the spec is invalid (ctl_reconcile_invalid) */
    bool became_invalid;          /* Ready turned False with a new InvalidSpec message */
    char message[GQ_ERR_MSG_MAX]; /* the Exceeded message, or why the spec is invalid */
    ctl_quota_figures fig;        /* for metrics */
    int64_t next_expiry;          /* earliest kept reservation expiry; 0 = none */
    int64_t next_deadline;        /* earliest deletion deadline of a pod it counts; 0 = none */
    size_t kept, dropped;         /* reservations kept / dropped */
} ctl_result;

void ctl_result_init(ctl_result *r);
void ctl_result_dispose(ctl_result *r);

/* Compute the status quota (a GPUQuota or GPUTenantQuota JSON object,
 * borrowed) should have at now, given the candidate pods[0..n) (those of its
 * namespace, or of the tenant's member namespaces; terminal and deleted pods
 * marked facts.terminal; pods are matched again with scopes and selectors):
 *   hard               spec.hard, canonical
 *   used               gq_quota_recount over pods
 *   namespaces         (tenants) per-namespace usage, sorted
 *   borrowed, lent     a member of a cohort (in->cohort): gq_cohort_lending
 *                      over its members, this one at its recount; a tenant
 *                      that is a cohort: the sums over its members
 *   reservations       current ones whose pod has not been seen (seen) and
 *                      that are live at now; corrupt records dropped
 *   observedGeneration metadata.generation
 *   conditions         Ready True; Exceeded True when used > hard for a key
 *                      (message names the keys); lastTransitionTime kept
 *                      unless the status of the condition changes.
 * An invalid spec fails with GQ_EINVAL (the quota stays as it is). *out is
 * disposed and refilled on success. */
gq_code ctl_reconcile(json_object *quota, const ctl_counted *in, ctl_result *out,
                      gq_err *err) GQ_WUR;

/* The status of a quota whose spec is invalid (why: the parse error,
 * naming the field and the value): the current status with Ready False,
 * reason InvalidSpec, message why, observedGeneration metadata.generation;
 * used, hard and Exceeded as they were; lapsed reservations dropped. An
 * invalid spec is visible in the status, not only in logs (the webhook
 * denies every GPU pod the quota would govern meanwhile). became_invalid
 * when Ready was not already False for the same message (raise an Event).
 * *out is disposed and refilled on success. */
gq_code ctl_reconcile_invalid(json_object *quota, const char *why, int64_t now, ctl_result *out,
                              gq_err *err) GQ_WUR;

/* Whether writing next (a status ctl_reconcile computed for quota) in place
 * of quota's current status changes nothing an admission counts, from now
 * until horizon (Unix seconds, >= now): both say the same in every member
 * but used, usedByModel, namespaces and reservations, and queued and
 * queuedPods, which next may only lower (pods left the queue), and on every key
 * spec.hard limits (and per model of spec.models, every key it limits),
 * used plus the live uncounted reservations, as the validating webhook sums
 * them, is the same in next at now as in the current status at now and at
 * horizon, or higher by no more than the webhooks' escrow holds live in the
 * current status then. That is what a fold is: reservations whose pods the
 * controller now counts move into used, and pods admitted on a hold are
 * counted while the hold still charges them. Such a write may wait (the
 * current status keeps charging those pods, through their reservations or
 * the holds); any other change may not. false when either status does not
 * parse. */
bool ctl_fold_only(json_object *quota, json_object *next, int64_t now, int64_t horizon);

/* Whether status next of quota frees room its current status does not: on
 * some key spec.hard limits, or some key a model of spec.models limits,
 * what admissions count at now (used plus the live uncounted reservations,
 * gq_quota_in_use and gq_quota_model_in_use) is lower in next. false when
 * either status does not parse. */
bool ctl_room_freed(json_object *quota, json_object *next, int64_t now);

/* ctl_reconcile over the store: the candidate pods and seen come from
 * ctl_podstore_with_quota_pods. */
gq_code ctl_podstore_reconcile(ctl_podstore *s, json_object *quota, int64_t now, ctl_result *out,
                               gq_err *err) GQ_WUR;
/* What the running controller adds to a reconcile over the store. */
typedef struct ctl_reconcile_ctx {
    /* Reservations to drop, by key (a JSON object, borrowed; NULL: none):
     * those the controller found abandoned (their pods never appeared). */
    json_object *drop;
    ctl_cohort_in cohort; /* the quota's cohort (ctl_counted) */
} ctl_reconcile_ctx;

/* ctl_podstore_reconcile with what x says (NULL: nothing). */
gq_code ctl_podstore_reconcile_with(ctl_podstore *s, json_object *quota, const ctl_reconcile_ctx *x,
                                    int64_t now, ctl_result *out, gq_err *err) GQ_WUR;

/* ------------------------------------------------------------------------ */
/* Work queue                                                                */

typedef struct ctl_workqueue ctl_workqueue;

typedef struct ctl_workqueue_opts {
    long backoff_min_ms; /* 0: 100 */
    long backoff_max_ms; /* 0: 30000 */
    /* Clock in milliseconds (monotonic); NULL: CLOCK_MONOTONIC. Tests pass a
     * fake one. */
    int64_t (*now_ms)(void *ud);
    void *clock_ud;
} ctl_workqueue_opts;

/* New queue; opts may be NULL. */
gq_code ctl_workqueue_new(const ctl_workqueue_opts *opts, ctl_workqueue **out) GQ_WUR;
/* Frees; waiters must be gone (ctl_workqueue_shutdown first). NULL ok. */
void ctl_workqueue_free(ctl_workqueue *q);

/* Make key ready. A key already waiting is not added twice; a key being
 * processed is queued again when ctl_workqueue_done is called for it. */
gq_code ctl_workqueue_add(ctl_workqueue *q, const char *key) GQ_WUR;
/* Make key ready after delay_ms (an earlier pending time wins). It comes
 * back then even when it is ready or processed meanwhile: a run now does
 * not stand for a run at that time. */
gq_code ctl_workqueue_add_after(ctl_workqueue *q, const char *key, long delay_ms) GQ_WUR;
/* Requeue after the key's next backoff delay (min doubling to max per
 * failure); *delay_ms (may be NULL) gets it. */
gq_code ctl_workqueue_add_rate_limited(ctl_workqueue *q, const char *key, long *delay_ms) GQ_WUR;
/* Reset the key's failure count. */
void ctl_workqueue_forget(ctl_workqueue *q, const char *key);
/* Failures recorded for key. */
unsigned ctl_workqueue_failures(ctl_workqueue *q, const char *key);

/* Take the next ready key, waiting up to wait_ms (-1: until one is ready or
 * shutdown). GQ_OK with *key (caller frees) that the caller must hand back
 * with ctl_workqueue_done; GQ_ETIMEOUT when none became ready; GQ_ENOTFOUND after
 * shutdown. */
gq_code ctl_workqueue_get(ctl_workqueue *q, long wait_ms, char **key) GQ_WUR;
void ctl_workqueue_done(ctl_workqueue *q, const char *key);

/* Keys ready now / waiting for a later time. */
size_t ctl_workqueue_len(ctl_workqueue *q);
size_t ctl_workqueue_delayed(ctl_workqueue *q);
/* Wake every waiter; later gets return GQ_ENOTFOUND. */
void ctl_workqueue_shutdown(ctl_workqueue *q);

/* ------------------------------------------------------------------------ */
/* The running controller                                                    */

typedef struct ctl_controller ctl_controller;

typedef struct ctl_controller_opts {
    const kube_api *api;                        /* borrowed; must outlive the controller */
    const gq_config *cfg;                       /* borrowed; prices pods */
    unsigned workers;                           /* reconcile threads; 0: CTL_WORKERS */
    long resync_ms;                             /* full resync period; 0: 300000 */
    bool leader_elect;                          /* reconcile only while holding the Lease */
    const char *lease_namespace;                /* NULL: "gpuquota-system" */
    const char *lease_name;                     /* NULL: "gpuquota-controller" */
    const char *identity;                       /* NULL: "HOSTNAME_PID" */
    long lease_ms, renew_deadline_ms, retry_ms; /* 0: 15000 / 10000 / 2000 */
    long backoff_min_ms, backoff_max_ms;        /* requeue; 0: 100 / 30000 */
    /* How long after the controller first sees a reservation it drops it
     * when its pod is neither in the pod cache nor on the API server (the
     * pod was refused after the webhook charged it, or the review never came
     * from kube-apiserver). 0: from the cluster's other validating webhooks
     * (ctl_admission_bound_ms, read every minute; CTL_RESERVATION_GRACE_MS
     * when they cannot be read). */
    long reservation_grace_ms;
    /* How many requests the admission pass of queued pods keeps in flight
     * at once (its quotas' charges, its ungates and Events;
     * docs/queueing.md, "Order"). 0: CTL_UNGATE_INFLIGHT; at most
     * CTL_UNGATE_INFLIGHT_MAX. */
    unsigned ungate_inflight;
    /* Wall clock in Unix seconds (reservation expiry, conditions); NULL:
     * time(). */
    int64_t (*now)(void *ud);
    void *clock_ud;
    /* The registry the controller's families are rendered by (below);
     * borrowed, must outlive the controller. NULL: none. */
    http_metrics *metrics;
} ctl_controller_opts;

/* kube-apiserver gives a webhook at most 30 s (timeoutSeconds), and
 * validating webhooks run in parallel, so a pod is stored or refused within
 * about 30 s of our charge; 5 s of slack covers the built-in admission and
 * the storage write after it. A reservation's creation is at or before the
 * moment the controller first sees it. */
#define CTL_ADMISSION_BOUND_MS 30000L
#define CTL_ADMISSION_SLACK_MS 5000L
#define CTL_RESERVATION_GRACE_MS (CTL_ADMISSION_BOUND_MS + CTL_ADMISSION_SLACK_MS)

/* How long after gpuquota's validating webhook has charged a pod the API
 * server may still store it: the longest timeoutSeconds (10 when unset) of
 * the other validating webhooks configured that may see a pod CREATE (they
 * run in parallel with gpuquota's, and the storage write waits for all of
 * them), plus CTL_ADMISSION_SLACK_MS for the built-in admission plugins
 * and the write. configs is a JSON array of ValidatingWebhookConfiguration
 * objects (borrowed); those named own are gpuquota's and already answered.
 * A create refused after gpuquota's answer (ResourceQuota, another
 * webhook, an object too large for etcd) leaves a reservation that is
 * dropped this long after it is seen, not at its expiry. */
long ctl_admission_bound_ms(json_object *configs, const char *own);

/* Reconcile threads by default. A worker holds its quota for a status
 * write's round trip to kube-apiserver (12-34 ms measured on a loaded
 * 2-CPU control plane), so writes per second are about workers / round
 * trip; pods spread over many namespaces need one write each. 8 workers
 * halved event -> status p50 at 50 creates + 50 deletes/s against 2
 * (docs/performance.md). */
#define CTL_WORKERS 8u

/* The admission pass's requests in flight (ctl_controller_opts), and the
 * most it may be given. At 16 a drain of 10,000 queued pods waited on the
 * PATCHes' round trips (139 pods/s); at 48 and at 64 it drained 177/s,
 * bound by the CPUs (docs/performance.md). */
#define CTL_UNGATE_INFLIGHT 48u
#define CTL_UNGATE_INFLIGHT_MAX 64u

/* A controller over o->api (options copied). Not started. */
gq_code ctl_controller_new(const ctl_controller_opts *o, ctl_controller **out, gq_err *err) GQ_WUR;
/* Start the caches (pods, GPUQuotas, GPUTenantQuotas, namespaces), the
 * workers and, with leader_elect, the elector. Reconciling begins once every
 * cache has synced (and the Lease is held). */
gq_code ctl_controller_start(ctl_controller *c, gq_err *err) GQ_WUR;
/* Stop workers, release the Lease (when held) and stop the caches.
 * Idempotent. */
void ctl_controller_stop(ctl_controller *c);
void ctl_controller_free(ctl_controller *c);

/* Every cache has done its first list and is current: false again while a
 * cache relists after the API server's history went back. */
bool ctl_controller_synced(ctl_controller *c);
/* Reconciling (leader, or leader election off). */
bool ctl_controller_is_leader(ctl_controller *c);
/* Pods tracked (GPU pods in the store). */
size_t ctl_controller_tracked_pods(ctl_controller *c);

/* The controller's families, rendered by the registry of its options
 * (ctl_controller_opts.metrics) at each scrape:
 *   gpuquota_controller_reconciles_total{result}         counter
 *   gpuquota_controller_reconcile_duration_seconds       histogram
 *   gpuquota_controller_status_writes_total              counter
 *   gpuquota_controller_folds_deferred_total             counter (fold-only writes put off)
 *   gpuquota_controller_status_handoffs_total            counter (writes handed to the pass)
 *   gpuquota_controller_events_total                     counter
 *   gpuquota_controller_pod_cost_errors_total            counter
 *   gpuquota_controller_watches_total{resource}          counter (watch (re)starts)
 *   gpuquota_controller_relists_total{resource}          counter (watch could not resume)
 *   gpuquota_controller_history_resets_total{resource}   counter (server history went back)
 *   gpuquota_controller_queue_depth                      gauge
 *   gpuquota_controller_tracked_pods                     gauge
 *   gpuquota_controller_leader                           gauge
 *   gpuquota_quota_used{namespace,quota,resource}        gauge ("" namespace: tenant)
 *   gpuquota_quota_hard{namespace,quota,resource}        gauge
 *   gpuquota_queue_length{namespace,quota}               gauge (queued pods it governs)
 *   gpuquota_queue_wait_seconds{namespace,quota}         histogram (creation to ungate)
 *   gpuquota_queue_admitted_total                        counter
 *   gpuquota_queue_pass_cpu_seconds                      histogram (thread CPU per admission pass)
 *   gpuquota_claims_refused_total, _pinned_total, _unpinned_total  counters (claims.c) */

#endif
