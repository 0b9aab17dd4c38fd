/* The status of a GPUQuota or GPUTenantQuota, typed: everything gpuquota
 * writes there (DESIGN.md §4, deploy/crds/generate.py quota_status), one
 * bounded decoder from the JSON the API server holds, and one encoder, the
 * only code that builds a status object. Whoever changes a status (the
 * webhook's charges and rollbacks, the controller's recount and queue
 * admissions, the offline store) decodes it once, works on the typed value
 * with the operations below, and encodes it once for the write.
 *
 * JSON form (members absent when gpuquota has nothing to say):
 *   {"hard": {...}, "used": {...}, "borrowed": {...}, "lent": {...},
 *    "usedByModel": {"h100-80gb": {...}},
 *    "namespaces": [{"namespace": "a", "used": {...}}],   (tenants)
 *    "queued": {...}, "queuedPods": 3, "reservations": [...],
 *    "observedGeneration": 4, "conditions": [{"type": "Ready", ...}]}
 *
 * Pure: no clocks (now is a parameter), no I/O. Strings are owned by the
 * value that holds them. */
#ifndef GQ_STATUS_H
#define GQ_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "common/rfc3339.h" /* the times of reservations and conditions */
#include "quota/amounts.h"
#include "quota/field.h" /* the caps */

/* --- a reservation ---------------------------------------------------------- */

/* What a reservation is to the escrow of webhook replicas (gq_reservation
 * escrow). */
typedef enum gq_escrow_kind {
    GQ_ESCROW_NONE = 0,
    GQ_ESCROW_HOLD,
    GQ_ESCROW_WANT,
    GQ_ESCROW_ADMITTED,
} gq_escrow_kind;

/* One admission's charge held in a quota's status until the controller has
 * counted the pod. The key is the pod's metadata.uid: kube-apiserver
 * assigns it (and the generated name) before validating admission, and the
 * controller finds the stored pod by it. JSON form:
 *   {"key": "...", "namespace": "ns", "pod": "name-or-generateName",
 *    "gpu-memory": "16Gi", "gpus": "0", "gpu-pods": "1",
 *    "expires": "2026-01-01T00:00:00Z"} */
typedef struct gq_reservation {
    char *key;
    char *namespace_;
    char *pod;
    gq_amounts amounts; /* all three keys set */
    int64_t expires;    /* Unix seconds */
    char *model;        /* catalog model the pod is pinned to ("model" in JSON); NULL: none */
    /* A ResourceClaim shared by pods ("claim": true): key is the claim's uid,
     * pod its name, amounts its devices (gpu-pods 0); charged once per quota
     * however many pods name it (docs/models-and-dra.md). counted
     * ("counted": true, written by the controller only): status.used holds
     * it, so it adds nothing to what is in use and never expires; it records
     * that the quota charges the claim, and goes when no counted pod names
     * it any more. */
    bool claim;
    bool counted;
    /* A queued pod's reservation that the controller's admission pass wrote
     * for capacity its quota borrows ("borrowing": true): whichever pass
     * ungates the pod, on whichever replica, marks it gpuquota.io/borrowing
     * (reclaim takes such pods), even when it finds the pod paid already.
     * On a claim record: the claim was charged on borrowed capacity (by a
     * pass admitting a borrowing pod naming it), kept while the claim is
     * charged, counted or not; every pod naming the claim is then a
     * borrower, so that deleting the pod that was marked keeps nothing
     * borrowed out of reclaim. */
    bool borrowing;
    /* Room a webhook replica holds in escrow ("escrow" in JSON;
     * docs/validating-webhook.md, "Escrow"): GQ_ESCROW_HOLD is free room a
     * replica took to admit against without writing (key "escrow-" and the
     * replica's nonce), GQ_ESCROW_WANT a replica's request that holders
     * give their room back (all amounts 0), GQ_ESCROW_ADMITTED a pod's
     * reservation written when the hold it was admitted on was given back.
     * Counted like any reservation; the controller keeps the first two
     * until they expire (no pod has their key). */
    gq_escrow_kind escrow;
    /* A pod's reservation: the uids of the shared ResourceClaims the pod
     * names ("claims" in JSON; at most GQ_RESERVATION_MAX_CLAIMS). While the
     * controller keeps the reservation (its pod not seen yet) it keeps those
     * claims charged, even when no counted pod names them any more. */
    char **claims;
    size_t n_claims;
} gq_reservation;

#define GQ_RESERVATION_MAX_CLAIMS 32
#define GQ_RESERVATION_MAX_CLAIM_UID 128

/* Parse one reservation record; field names it in messages (NULL:
 * "reservation"). Caller disposes *out with gq_reservation_dispose. */
gq_code gq_reservation_parse(json_object *obj, const char *field, gq_reservation *out,
                             gq_err *err) GQ_WUR;
void gq_reservation_dispose(gq_reservation *r);

/* *out = a deep copy of r (caller disposes it). GQ_ENOMEM. */
gq_code gq_reservation_copy(const gq_reservation *r, gq_reservation *out, gq_err *err) GQ_WUR;

/* A new JSON object for r (caller owns it); NULL on allocation failure. */
json_object *gq_reservation_to_json(const gq_reservation *r);

/* Which reservations a sum counts (gq_reservations_sum). */
typedef struct gq_live_filter {
    int64_t now;          /* only those live at now (expires > now) and not counted */
    const char *skip_key; /* not the one with this key (a pod's own); NULL: none skipped */
    /* Set: only those recorded for this model and those of unpinned pods
     * (charged against every model); NULL: all. */
    const char *model;
    const char *what; /* names the total in an overflow message */
} gq_live_filter;

/* base plus the amounts of the reservations r[0..n) that f selects; every
 * key of *out is set. GQ_ERANGE ("WHAT: gpu-memory overflows") when a sum
 * does not fit. */
gq_code gq_reservations_sum(const gq_amounts *base, const gq_reservation *r, size_t n,
                            const gq_live_filter *f, gq_amounts *out, gq_err *err) GQ_WUR;

/* --- the status ------------------------------------------------------------- */

/* A usage and what it is of: a model (status.usedByModel.<name>, a catalog
 * model name of 1 to GQ_CRD_MAX_MODEL_NAME bytes) or a member namespace of
 * a GPUTenantQuota (status.namespaces[]). */
typedef struct gq_named_usage {
    char *name;
    gq_amounts used;
} gq_named_usage;

/* status.conditions[]: a metav1.Condition. */
typedef struct gq_condition {
    char *type;   /* "Ready", "Exceeded" */
    char *status; /* "True", "False" or "Unknown" */
    bool has_observed_generation;
    int64_t observed_generation;
    bool has_last_transition;
    int64_t last_transition; /* lastTransitionTime, Unix seconds */
    char *reason;            /* NULL: absent */
    char *message;           /* NULL: absent */
} gq_condition;

#define GQ_STATUS_MAX_CONDITIONS 16      /* the CRD's maxItems */
#define GQ_STATUS_MAX_CONDITION_TYPE 316 /* the CRD's maxLength of type */
#define GQ_STATUS_MAX_MESSAGE 32768      /* of a condition's reason or message */

/* How much of a status gq_quota_status_decode must understand. The members
 * admissions count are status.used, usedByModel, queuedPods and
 * reservations; the others (hard, borrowed, lent, namespaces, queued,
 * observedGeneration, conditions) only report, and an item or member of them that does not
 * decode is left out in every mode (the next write drops it).
 *
 * GQ_STATUS_POLICY is what policy reads (gq_quota_parse): only the members
 * admissions count are decoded, and anything in them that does not decode
 * fails, so a corrupt status never passes for a smaller usage; a status
 * that is no object fails too.
 *
 * GQ_STATUS_CHARGE is a writer that charges (the webhook's group commit,
 * the controller's queue admissions): every member is decoded; a
 * reservation that does not decode is dropped and counted in `dropped`,
 * never pinning quota; anything else admissions count fails as in
 * GQ_STATUS_POLICY. A status that is no object is an empty one.
 *
 * GQ_STATUS_SALVAGE is the controller's recount, which rewrites the status
 * and must never be stopped by a corrupt one: whatever does not decode is
 * left out, and a reservations member that is no list (or a list past the
 * cap) holds nothing and counts as dropped. It fails only when out of
 * memory. */
typedef enum gq_status_mode {
    GQ_STATUS_POLICY = 0,
    GQ_STATUS_CHARGE = 1,
    GQ_STATUS_SALVAGE = 2,
} gq_status_mode;

/* A quota's status. Each member is written only when its has_ flag is set,
 * so a status decoded and encoded again says what it said: a Deny quota's
 * status gains no "queued", an empty reservations list stays an empty list. */
typedef struct gq_quota_status {
    bool has_hard, has_used, has_used_by_model, has_namespaces, has_queued, has_queued_pods,
        has_reservations, has_observed_generation, has_conditions, has_borrowed, has_lent;
    gq_amounts hard;     /* spec.hard as last enforced */
    gq_amounts used;     /* recounted from pods (absent keys: 0) */
    gq_amounts borrowed; /* a GPUQuota that may borrow: used above hard (keys of hard);
                            a cohort's GPUTenantQuota: what its GPUQuotas borrow */
    gq_amounts lent;     /* a member of a cohort: what of its unused share others borrow now
                            (gq_cohort_lending, quota/lending.h); its GPUTenantQuota: the sum */
    gq_named_usage *used_by_model; /* in the order written */
    size_t n_used_by_model;
    gq_named_usage *namespaces; /* tenants: sorted by namespace */
    size_t n_namespaces;
    gq_amounts queued;   /* what pods waiting behind the gate would charge */
    int64_t queued_pods; /* >= 0 */
    gq_reservation *reservations;
    size_t n_reservations;
    size_t cap_reservations; /* room allocated: the operations' business */
    int64_t observed_generation;
    gq_condition *conditions;
    size_t n_conditions;
    /* What gq_quota_status_decode left out of reservations: one for each
     * record that did not decode, or one for a member that is no list. */
    size_t dropped;
} gq_quota_status;

/* An empty status: no member. */
void gq_quota_status_init(gq_quota_status *st);

/* Free what st holds and leave it empty; NULL is a no-op. */
void gq_quota_status_dispose(gq_quota_status *st);

/* Decode a quota's status object (borrowed; NULL: no status, an empty
 * one) into *out, as mode says. Bounded: at most GQ_CRD_MAX_RESERVATIONS
 * reservations, GQ_CRD_MAX_QUOTA_MODELS models, GQ_CRD_MAX_NAMESPACES
 * namespaces and GQ_STATUS_MAX_CONDITIONS conditions; strings capped.
 * Errors name the field ("status.reservations[3].expires: ..."). *out is
 * written on success only (caller disposes it). */
gq_code gq_quota_status_decode(json_object *status, gq_status_mode mode, gq_quota_status *out,
                               gq_err *err) GQ_WUR;

/* The status object for st: the members whose has_ flag is set, in the
 * order hard, used, borrowed, lent, usedByModel, namespaces, queued, queuedPods,
 * reservations, observedGeneration, conditions, quantities in canonical
 * form. The same value always encodes to the same bytes, and the result
 * decodes (GQ_STATUS_CHARGE, nothing dropped) to a value that encodes to
 * them again. Caller owns the result; NULL when out of memory. */
json_object *gq_quota_status_encode(const gq_quota_status *st);

/* --- operations --------------------------------------------------------------- */

/* Append a copy of r to the reservations (creating the list) unless one
 * with the same key is there: then nothing changes and *added (may be
 * NULL) is false. GQ_ELIMIT when the list holds GQ_CRD_MAX_RESERVATIONS. */
gq_code gq_quota_status_add_reservation(gq_quota_status *st, const gq_reservation *r, bool *added,
                                        gq_err *err) GQ_WUR;

/* Remove the first reservation keyed key (a rollback of what a charge
 * added); true when there was one. The list stays, empty or not. */
bool gq_quota_status_remove_reservation(gq_quota_status *st, const char *key);

/* Keep the reservations i with keep[i] (in order), dispose of the others;
 * returns how many went. */
size_t gq_quota_status_keep(gq_quota_status *st, const bool *keep);

/* Remove the reservations whose expiry is at or before now (counted claim
 * records never expire: the controller removes them); returns how many
 * went. */
size_t gq_quota_status_drop_expired(gq_quota_status *st, int64_t now);

/* status.used plus every reservation live at now (expires > now) and not
 * counted, per key; every key of *out set. GQ_ERANGE ("status: gpus
 * overflows") on overflow. */
gq_code gq_quota_status_sum(const gq_quota_status *st, int64_t now, gq_amounts *out,
                            gq_err *err) GQ_WUR;

/* Whether list (a status's "reservations" as JSON; anything else: false)
 * holds a live escrow record of kind (expiring after now): a want a webhook
 * replica waits on, a hold. Read from the JSON itself, for the callers that
 * must not decode a status on every event. */
bool gq_reservations_json_live(json_object *list, gq_escrow_kind kind, int64_t now);

/* The reservation keyed key, borrowed; NULL when none. */
const gq_reservation *gq_quota_status_find(const gq_quota_status *st, const char *key);

/* The usage of model in status.usedByModel, borrowed; NULL when none. */
const gq_amounts *gq_quota_status_model_used(const gq_quota_status *st, const char *model);

/* The condition of this type, borrowed; NULL when none. */
const gq_condition *gq_quota_status_condition(const gq_quota_status *st, const char *type);

/* Replace the conditions with copies of v[0..n) (v may point into st's
 * own). GQ_ELIMIT past GQ_STATUS_MAX_CONDITIONS. */
gq_code gq_quota_status_set_conditions(gq_quota_status *st, const gq_condition *v, size_t n,
                                       gq_err *err) GQ_WUR;

/* Replace status.usedByModel with copies of v[0..n). */
gq_code gq_quota_status_set_models(gq_quota_status *st, const gq_named_usage *v, size_t n,
                                   gq_err *err) GQ_WUR;

/* Replace status.namespaces with copies of v[0..n) (n may be 0: an empty
 * list). */
gq_code gq_quota_status_set_namespaces(gq_quota_status *st, const gq_named_usage *v, size_t n,
                                       gq_err *err) GQ_WUR;

/* dst's reservations become src's (dst's own disposed of), with src's
 * has_reservations; src is left with none. */
void gq_quota_status_take_reservations(gq_quota_status *dst, gq_quota_status *src);

#endif
