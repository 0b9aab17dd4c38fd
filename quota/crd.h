/* gpuquota custom resources (DESIGN.md §4): GPUQuota, GPUTenantQuota and
 * GPULimitRange of gpuquota.io/v1alpha1, parsed from json-c objects into plain
 * structs, plus the reservation records the validating webhook keeps in a
 * quota's status.
 *
 * Parsers are bounded (caps below) and report errors naming the field, e.g.
 * "spec.hard.gpu-memory: ...". Parsed structs own all their strings; free them
 * with the matching _free function. Nothing here allocates a json-c object
 * except the status helpers, which edit the caller's object in place. */
#ifndef GQ_CRD_H
#define GQ_CRD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "quota/quantity.h"
#include "common/rfc3339.h" /* the times of reservations */

#define GQ_API_GROUP "gpuquota.io"
#define GQ_API_VERSION "gpuquota.io/v1alpha1"
#define GQ_KIND_GPUQUOTA "GPUQuota"
#define GQ_KIND_GPUTENANTQUOTA "GPUTenantQuota"
#define GQ_KIND_GPULIMITRANGE "GPULimitRange"

/* Caps on untrusted lists and strings. */
#define GQ_CRD_MAX_NAMESPACES 4096    /* GPUTenantQuota spec.namespaces */
#define GQ_CRD_MAX_EXPRESSIONS 64     /* matchExpressions, matchLabels */
#define GQ_CRD_MAX_VALUES 256         /* values of one expression */
#define GQ_CRD_MAX_LIMITS 64          /* GPULimitRange spec.limits */
#define GQ_CRD_MAX_MODELS 64          /* allowedModels */
#define GQ_CRD_MAX_RESERVATIONS 65536 /* status.reservations */
#define GQ_CRD_MAX_STRING 1024        /* any single string */
#define GQ_CRD_MAX_QUOTA_MODELS 32    /* GPUQuota / GPUTenantQuota spec.models */
#define GQ_CRD_MAX_MODEL_NAME 63      /* a catalog model name in spec.models */

/* Quota keys, in Kubernetes' sorted (byte) order so messages list them sorted. */
typedef enum gq_qkey {
    GQ_KEY_GPU_MEMORY = 0, /* "gpu-memory": bytes */
    GQ_KEY_GPU_PODS = 1,   /* "gpu-pods": pods using any GPU */
    GQ_KEY_GPUS = 2,       /* "gpus": whole exclusive GPUs */
    GQ_KEY_COUNT
} gq_qkey;

/* "gpu-memory", "gpu-pods", "gpus"; NULL for an out-of-range key. */
const char *gq_qkey_name(gq_qkey k);

/* A ResourceList over the quota keys. A key not `set` is absent (in `hard`:
 * unlimited). Values are whole numbers >= 0. fmt remembers the format a value
 * was written in, so "limited: gpu-memory=64G" prints the way it was written. */
typedef struct gq_amounts {
    int64_t v[GQ_KEY_COUNT];
    bool set[GQ_KEY_COUNT];
    gq_qformat fmt[GQ_KEY_COUNT];
} gq_amounts;

/* Parse a ResourceList object of quota keys (values: quantity strings or JSON
 * integers). field names the object in messages ("spec.hard"). Unknown keys,
 * negative and fractional values fail. Writes *out only on success. */
gq_code gq_amounts_parse(json_object *obj, const char *field, gq_amounts *out, gq_err *err) GQ_WUR;

/* Canonical text of one value: bytes in binary SI for gpu-memory (unless it
 * was written in another format), plain integers for the counts. */
void gq_amount_format(const gq_amounts *a, gq_qkey k, char buf[GQ_QUANTITY_STR_MAX]);

/* A new JSON object with the set keys as canonical quantity strings. Caller
 * owns the result (json_object_put); NULL on allocation failure. */
json_object *gq_amounts_to_json(const gq_amounts *a);

/* Label-selector operators (metav1.LabelSelector, ResourceQuota scopeSelector). */
typedef enum gq_sel_op {
    GQ_OP_IN = 0,
    GQ_OP_NOT_IN,
    GQ_OP_EXISTS,
    GQ_OP_DOES_NOT_EXIST,
} gq_sel_op;

typedef struct gq_sel_req {
    char *key; /* label key; "PriorityClass" in a scopeSelector */
    gq_sel_op op;
    char **values;
    size_t n_values;
} gq_sel_req;

/* metav1.LabelSelector. `present` false: no selector given (matches nothing);
 * present with no terms: `{}` (matches everything). */
typedef struct gq_label_selector {
    bool present;
    char **match_keys; /* matchLabels, parallel arrays */
    char **match_values;
    size_t n_match;
    gq_sel_req *exprs;
    size_t n_exprs;
} gq_label_selector;

/* Quota scopes, a bit set. */
#define GQ_SCOPE_TERMINATING 1u
#define GQ_SCOPE_NOT_TERMINATING 2u

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
    /* A pod's reservation: the uids of the shared ResourceClaims the pod
     * names ("claims" in JSON; at most GQ_RESERVATION_MAX_CLAIMS). While the
     * controller keeps the reservation (its pod not seen yet) it keeps those
     * claims charged, even when no counted pod names them any more. */
    char **claims;
    size_t n_claims;
} gq_reservation;

#define GQ_RESERVATION_MAX_CLAIMS 32
#define GQ_RESERVATION_MAX_CLAIM_UID 128

typedef enum gq_quota_kind {
    GQ_QUOTA_NAMESPACED = 0, /* GPUQuota */
    GQ_QUOTA_TENANT = 1,     /* GPUTenantQuota */
} gq_quota_kind;

/* One entry of spec.models: limits on the pods pinned to one catalog model,
 * beside (never instead of) spec.hard. JSON: spec.models.<name> = {same keys
 * as hard}; status.usedByModel.<name> = {same keys as used}. */
typedef struct gq_model_limit {
    char *name;      /* catalog model name (a map key, <= GQ_CRD_MAX_MODEL_NAME) */
    gq_amounts hard; /* spec.models.<name> */
    gq_amounts used; /* status.usedByModel.<name> (absent keys: 0) */
} gq_model_limit;

/* spec.whenExceeded: what happens to a pod that does not fit (docs/queueing.md). */
typedef enum gq_when_exceeded {
    GQ_WHEN_DENY = 0,  /* "Deny" (the default): refused at creation */
    GQ_WHEN_QUEUE = 1, /* "Queue": waits behind the scheduling gate GQ_QUEUE_GATE */
} gq_when_exceeded;

/* spec.queueingStrategy (Kueue's names). */
typedef enum gq_queue_strategy {
    GQ_QUEUE_BEST_EFFORT = 0, /* "BestEffortFIFO" (the default): a pod that fits may pass */
    GQ_QUEUE_STRICT = 1,      /* "StrictFIFO": the head of the line waits, nobody passes */
} gq_queue_strategy;

/* spec.preemption.withinQuota (Kueue's names; docs/queueing.md): which
 * pods the quota's queued pods may evict to fit. */
typedef enum gq_preempt_policy {
    GQ_PREEMPT_NEVER = 0,          /* "Never" (the default) */
    GQ_PREEMPT_LOWER_PRIORITY = 1, /* "LowerPriority" */
    GQ_PREEMPT_LOWER_OR_NEWER = 2, /* "LowerOrNewerEqualPriority" */
} gq_preempt_policy;

/* spec.preemption.reclaimWithinCohort (Kueue's names): which pods of other
 * quotas of its cohort, admitted on capacity they borrowed, a queued pod
 * within its quota's nominal share may evict. */
typedef enum gq_reclaim_policy {
    GQ_RECLAIM_NEVER = 0,          /* "Never" (the default) */
    GQ_RECLAIM_LOWER_PRIORITY = 1, /* "LowerPriority" */
    GQ_RECLAIM_ANY = 2,            /* "Any" */
} gq_reclaim_policy;

/* A GPUQuota or GPUTenantQuota, spec and the status fields policy needs. */
typedef struct gq_quota {
    gq_quota_kind kind;
    char *name;
    char *namespace_; /* GPUQuota only; NULL for tenants */
    int64_t generation;
    gq_amounts hard;         /* spec.hard: what is enforced */
    unsigned scopes;         /* GQ_SCOPE_* bits; 0 = no scope */
    gq_sel_req *scope_exprs; /* spec.scopeSelector.matchExpressions (PriorityClass) */
    size_t n_scope_exprs;
    char **namespaces; /* GPUTenantQuota spec.namespaces */
    size_t n_namespaces;
    gq_label_selector ns_selector;  /* GPUTenantQuota spec.namespaceSelector */
    gq_when_exceeded when_exceeded; /* spec.whenExceeded */
    gq_queue_strategy strategy;     /* spec.queueingStrategy */
    gq_preempt_policy within_quota; /* spec.preemption.withinQuota */
    gq_reclaim_policy reclaim;      /* spec.preemption.reclaimWithinCohort */
    /* Borrowing (GPUQuota; docs/queueing.md): how far above hard it may go
     * on what the other quotas of its cohort (the GPUTenantQuota covering
     * its namespace) leave unused, per key (a key unset: never above hard;
     * none set: it never borrows), and how much of its unused share it
     * lends (a key unset: all of it). */
    gq_amounts borrowing_limit, lending_limit;
    gq_amounts used;              /* status.used (absent keys: 0) */
    gq_reservation *reservations; /* status.reservations */
    size_t n_reservations;
    int64_t queued_pods;    /* status.queuedPods (0 when absent) */
    gq_model_limit *models; /* spec.models, sorted by name */
    size_t n_models;
} gq_quota;

/* The spec.models entry of q for model (a catalog name); NULL when q does
 * not limit that model or model is NULL. */
const gq_model_limit *gq_quota_model_limit(const gq_quota *q, const char *model);

/* Parse a GPUQuota or GPUTenantQuota (chosen by `kind`; apiVersion must be
 * gpuquota.io/v1alpha1). A GPUQuota needs metadata.namespace; a tenant needs
 * spec.namespaces or spec.namespaceSelector. status is optional. obj is
 * borrowed. Caller owns *out (gq_quota_free). */
gq_code gq_quota_parse(json_object *obj, gq_quota **out, gq_err *err) GQ_WUR;
void gq_quota_free(gq_quota *q);

/* Parse the quotas of arr (a JSON array of GPUQuota / GPUTenantQuota
 * objects, borrowed) onto (*qs)[0..*n) (grown with realloc). An object
 * that does not parse: with skipped NULL, fails the call with a message
 * naming it (what an admission decides on must all be read: fail closed);
 * else it is skipped and counted in *skipped (a view that shows what it
 * can: the queue planner, `gpuquota queue`). On any error what was
 * appended stays, for gq_quota_list_free. */
gq_code gq_quota_list_append(gq_quota ***qs, size_t *n, json_object *arr, size_t *skipped,
                             gq_err *err) GQ_WUR;
/* Free n quotas and the array that holds them; NULL is accepted. */
void gq_quota_list_free(gq_quota **qs, size_t n);

typedef enum gq_limit_type {
    GQ_LIMIT_CONTAINER = 0,
    GQ_LIMIT_POD = 1,
} gq_limit_type;

/* One spec.limits[] item. min/max/default are maps holding only gpu-memory:
 *   {type: Container, min: {gpu-memory: 2Gi}, max: {gpu-memory: 20Gi},
 *    default: {gpu-memory: 8Gi}, maxGPUs: 2, allowedModels: [a100-40gb]} */
typedef struct gq_limit_item {
    gq_limit_type type;
    bool has_min, has_max, has_default, has_max_gpus;
    gq_amounts min, max, def; /* only GQ_KEY_GPU_MEMORY is ever set */
    int64_t max_gpus;
    char **allowed_models;
    size_t n_allowed_models;
} gq_limit_item;

typedef struct gq_limit_range {
    char *name;
    char *namespace_;
    gq_limit_item *items;
    size_t n_items;
} gq_limit_range;

/* Parse a GPULimitRange. Checks min <= default <= max, default only on
 * type Container. obj is borrowed; caller owns *out (gq_limit_range_free). */
gq_code gq_limit_range_parse(json_object *obj, gq_limit_range **out, gq_err *err) GQ_WUR;
void gq_limit_range_free(gq_limit_range *lr);

/* --- reservations in a status object (json-c, edited in place) ----------- */

/* Parse one reservation record; field names it in messages. Caller disposes
 * *out with gq_reservation_dispose. */
gq_code gq_reservation_parse(json_object *obj, const char *field, gq_reservation *out,
                             gq_err *err) GQ_WUR;
void gq_reservation_dispose(gq_reservation *r);

/* A new JSON object for r (caller owns it); NULL on allocation failure. */
json_object *gq_reservation_to_json(const gq_reservation *r);

/* Append r to status.reservations (creating the array) unless a reservation
 * with the same key is already there: then nothing changes and *added is
 * false. GQ_ELIMIT when the array is full. status is a quota's "status"
 * object, owned by the caller. */
gq_code gq_status_add_reservation(json_object *status, const gq_reservation *r, bool *added,
                                  gq_err *err) GQ_WUR;

/* Remove the reservation with key from status.reservations (a rollback of
 * what a charge added); true when one was there. A status without the
 * array, or with one of another shape, holds none. */
bool gq_status_remove_reservation(json_object *status, const char *key);

/* Remove reservations whose expiry is at or before now (counted claim
 * records never expire: the controller removes them). Records that cannot
 * be parsed are removed too (status is ours; a corrupt record must not pin
 * quota forever). *dropped (may be NULL) gets the count. */
gq_code gq_status_drop_expired(json_object *status, int64_t now, size_t *dropped,
                               gq_err *err) GQ_WUR;

/* status.used plus every reservation still live at now (expires > now), per
 * key. Every key of *out is set. GQ_EINVAL for a malformed status. */
gq_code gq_status_sum(json_object *status, int64_t now, gq_amounts *out, gq_err *err) GQ_WUR;

#endif
