/* gpuquota custom resources (DESIGN.md §4): GPUQuota, GPUTenantQuota and
 * GPULimitRange of gpuquota.io/v1alpha1, parsed from json-c objects into
 * plain structs. A quota's status, and the reservation records the
 * validating webhook keeps there, are typed in quota/status.h.
 *
 * Parsers are bounded (caps in quota/field.h) and report errors naming the
 * field, e.g. "spec.hard.gpu-memory: ...". Parsed structs own all their
 * strings; free them with the matching _free function. Nothing here
 * allocates a json-c object. */
#ifndef GQ_CRD_H
#define GQ_CRD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "common/rfc3339.h" /* the times of reservations */
#include "quota/amounts.h"
#include "quota/field.h" /* the caps on lists and strings */
#include "quota/status.h"

#define GQ_API_GROUP "gpuquota.io"
#define GQ_API_VERSION "gpuquota.io/v1alpha1"
#define GQ_KIND_GPUQUOTA "GPUQuota"
#define GQ_KIND_GPUTENANTQUOTA "GPUTenantQuota"
#define GQ_KIND_GPULIMITRANGE "GPULimitRange"

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

/* A GPUQuota or GPUTenantQuota: its spec, and the fields of its status
 * policy reads (used, models[].used, queued_pods, reservations), taken from
 * the typed status (quota/status.h) as it was read. */
typedef struct gq_quota {
    gq_quota_kind kind;
    char *name;
    char *namespace_; /* GPUQuota only; NULL for tenants */
    int64_t generation;
    char uid[GQ_CRD_UID_MAX + 1]; /* metadata.uid; "" when absent (or longer) */
    gq_amounts hard;              /* spec.hard: what is enforced */
    unsigned scopes;              /* GQ_SCOPE_* bits; 0 = no scope */
    gq_sel_req *scope_exprs;      /* spec.scopeSelector.matchExpressions (PriorityClass) */
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
    /* spec.cohort (GPUTenantQuota; a DNS-1123 label): tenants naming the
     * same cohort lend and borrow among themselves under the two limits
     * above. NULL: none. */
    char *cohort;
    /* spec.fairSharing.weight in thousandths (Kueue's meaning, default 1 =
     * 1000): borrowers of a cohort with the lowest dominant share divided
     * by it are served first; 0: served last. */
    int64_t fair_weight_milli;
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
 * spec.namespaces or spec.namespaceSelector. status is optional, decoded by
 * gq_quota_status_decode (GQ_STATUS_POLICY: anything in what admissions
 * count that does not decode fails). obj is borrowed. Caller owns *out
 * (gq_quota_free). */
gq_code gq_quota_parse(json_object *obj, gq_quota **out, gq_err *err) GQ_WUR;

/* gq_quota_parse leaving the status out (used, reservations and the rest
 * empty): what a writer of the status needs, which must not be stopped by
 * a corrupt one. */
gq_code gq_quota_parse_spec(json_object *obj, gq_quota **out, gq_err *err) GQ_WUR;

/* Make q's status fields (used, the used of each model, queued_pods,
 * reservations) those of st, copied; st is borrowed. GQ_ENOMEM leaves q as
 * it was. */
gq_code gq_quota_set_status(gq_quota *q, const gq_quota_status *st, gq_err *err) GQ_WUR;
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

/* Parse the GPULimitRanges of a list (a JSON array as a store lists them;
 * NULL: none), the one parser /mutate and /validate read them with. On
 * success *out (NULL when *n_out is 0) is the caller's
 * (gq_limit_range_list_free). GQ_EINVAL when arr is not an array, or an
 * item does not parse (err says why); GQ_ENOMEM. *bad (bad may be NULL)
 * is then the index of the item that failed, SIZE_MAX for no item.
 * Nothing is returned on failure. */
gq_code gq_limit_range_list_parse(json_object *arr, gq_limit_range ***out, size_t *n_out,
                                  size_t *bad, gq_err *err) GQ_WUR;
/* Free what gq_limit_range_list_parse returned; NULL is accepted. */
void gq_limit_range_list_free(gq_limit_range **lrs, size_t n);

#endif
