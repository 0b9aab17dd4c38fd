/* GPULimitRange and quota policy (DESIGN.md §4): pure decisions over parsed
 * custom resources (crd.h) and a pod's cost (podcost.h). The current time is
 * always a parameter. Semantics are written down in docs/quota-semantics.md. */
#ifndef GQ_POLICY_H
#define GQ_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/crd.h"
#include "common/gq_error.h"
#include "quota/podcost.h"

/* What quota matching reads from a pod. Strings are borrowed. */
typedef struct gq_pod_facts {
    const char *namespace_;
    const char *priority_class; /* spec.priorityClassName; NULL or "" = none */
    bool terminating;           /* spec.activeDeadlineSeconds >= 0 */
    bool terminal;              /* status.phase Succeeded/Failed: charges nothing */
    const char *model;          /* catalog name of the model the pod is pinned to (gq_pod_model);
                                   NULL = none: charged against every model a quota limits */
} gq_pod_facts;

/* The catalog name the pod is pinned to, for gq_pod_facts.model: cost's
 * model when the pod named it (annotation or gpu.product selector), else
 * NULL. Borrowed from the config cost was computed with. */
const char *gq_pod_model(const gq_pod_cost *cost);

/* Fill namespace_ (ns, borrowed: the admission request's namespace, since a
 * pod being created may not carry one), priority_class and terminating from
 * pod (borrowed, must outlive *out). terminal is left false: the caller sets
 * it from gq_pod_is_terminal(). GQ_EINVAL when pod is not an object or a
 * field has the wrong type. */
gq_code gq_pod_facts_from_json(json_object *pod, const char *ns, gq_pod_facts *out,
                               gq_err *err) GQ_WUR;

/* When pod stops counting against quota while it still exists:
 * metadata.deletionTimestamp + deletionGracePeriodSeconds in Unix seconds
 * (a negative or absurd grace counts as 0), 0 when the pod is not being
 * deleted. GQ_EINVAL when deletionTimestamp is not an RFC 3339 time. */
gq_code gq_pod_deletion_deadline(json_object *pod, int64_t *out, gq_err *err) GQ_WUR;

/* Whether a pod counts against quota at now (Unix seconds): Kubernetes'
 * rule (QuotaV1Pod in pkg/quota/v1/evaluator/core/pods.go) — not terminal
 * (Succeeded/Failed), and not past its deletion deadline (delete_at from
 * gq_pod_deletion_deadline; 0: not being deleted). A pod that counts and is
 * gated by gpuquota.io/quota counts as queued, not used (docs/queueing.md):
 * that split is the caller's, by gq_usage_pod.queued. The controller's
 * recount and `gpuquota admit --state` both decide by this one function. */
bool gq_pod_counts(bool terminal, int64_t delete_at, int64_t now);

/* A pod's first DRA claim (spec.resourceClaims[0], resource.k8s.io), as a
 * message names it. */
typedef struct gq_pod_claim {
    size_t n;          /* entries in spec.resourceClaims */
    char name[64];     /* the first one's name in the pod ("" when absent) */
    const char *field; /* "resourceClaimName", "resourceClaimTemplateName" or NULL */
    char ref[254];     /* the ResourceClaim or ResourceClaimTemplate it names */
} gq_pod_claim;

/* Whether pod asks for devices through DRA: spec.resourceClaims is a
 * non-empty array. *out (may be NULL) then describes the first entry, read
 * from its resourceClaimName / resourceClaimTemplateName (or, as before
 * Kubernetes 1.31, from its source): /validate names it when the claims
 * could not be priced. */
bool gq_pod_resource_claims(json_object *pod, gq_pod_claim *out);

/* The pod's charge per quota key (all keys set): gpu-memory, gpus and
 * gpu-pods of cost, or all zero for a terminal pod. */
void gq_charge_from_cost(const gq_pod_cost *cost, bool terminal, gq_amounts *out);

/* metav1.LabelSelector semantics over labels (a JSON object of strings, may
 * be NULL). A selector that is not present matches nothing; `{}` matches
 * everything. */
bool gq_label_selector_matches(const gq_label_selector *s, json_object *labels);

/* Whether quota q covers namespace ns (labels ns_labels, may be NULL),
 * scopes aside: a GPUQuota its own namespace; a GPUTenantQuota a namespace
 * listed in spec.namespaces OR one whose labels match spec.namespaceSelector.
 * The controller uses it to map pod and namespace events to tenants. */
bool gq_quota_covers_namespace(const gq_quota *q, const char *ns, json_object *ns_labels);

/* Whether quota q governs the pod: a GPUQuota when it is in the pod's
 * namespace and its scopes and scopeSelector match; a GPUTenantQuota when the
 * namespace is listed in spec.namespaces OR ns_labels match
 * spec.namespaceSelector (scopes apply as well). */
bool gq_quota_matches(const gq_quota *q, const gq_pod_facts *pod, json_object *ns_labels);

/* Whether q limits, in spec.hard or in the limits of a model of
 * spec.models, a key that charge charges (> 0): only such quotas are
 * charged for a pod. */
bool gq_quota_limits(const gq_quota *q, const gq_amounts *charge);

/* status.used of q plus its reservations still live at now (expires > now),
 * skipping the reservation whose key is skip_key (may be NULL): that is the
 * pod being evaluated again. All keys of *out are set. GQ_ERANGE on
 * overflow. */
gq_code gq_quota_in_use(const gq_quota *q, int64_t now, const char *skip_key, gq_amounts *out,
                        gq_err *err) GQ_WUR;

/* status.usedByModel.<m->name> of q plus its live reservations for that
 * model or for no model (skip_key as gq_quota_in_use). All keys of *out
 * are set. */
gq_code gq_quota_model_in_use(const gq_quota *q, const gq_model_limit *m, int64_t now,
                              const char *skip_key, gq_amounts *out, gq_err *err) GQ_WUR;

/* What a pod is decided against: the quotas that may govern it, as read
 * (their status and reservations are the snapshot; borrowed), its
 * namespace's labels (borrowed; may be NULL), the configuration's
 * requireQuota, the time, and the pod's own reservation key (may be NULL),
 * never counted against itself. */
typedef struct gq_quota_snapshot {
    const gq_quota *const *quotas;
    size_t n;
    json_object *ns_labels;
    bool require_quota;
    int64_t now;
    const char *reservation_key;
} gq_quota_snapshot;

/* Decide whether a pod with charge (gq_charge_from_cost) fits every matching
 * quota among quotas[0..n). For every matching quota and every key in its
 * spec.hard that the pod charges (> 0): in_use + charge <= hard; and when
 * the quota has spec.models: a pod pinned to a model it lists (pod->model)
 * fits that model's limits as well ("requested: h100-80gb/gpu-memory=40Gi"),
 * and a pod pinned to no model fits every listed model's limits (it could
 * land on any of them; it is counted against each).
 * Quotas are checked GPUQuota first, then GPUTenantQuota, each in name order;
 * the first one exceeded denies with
 *   "exceeded quota: NAME, requested: K=V,..., used: K=V,..., limited: K=V,..."
 * ("exceeded tenant quota: ..." for tenants; only the exceeded keys, sorted).
 * With require_quota, a pod that charges anything and matches no quota is
 * denied with "insufficient quota to consume: K,...".
 * reservation_key (may be NULL) is the pod's own reservation key, never
 * counted against itself. On GQ_OK charge_idx[0..*n_charge) (capacity n)
 * lists, in check order, the quotas to charge: those that match and limit a
 * key the pod charges. GQ_EDENIED with the message in err on denial. */
gq_code gq_quota_evaluate(const gq_quota_snapshot *s, const gq_pod_facts *pod,
                          const gq_amounts *charge, size_t *charge_idx, size_t *n_charge,
                          gq_err *err) GQ_WUR;

/* Build the reservation the validating webhook records for an admitted pod:
 * key = the pod's metadata.uid (kube-apiserver sets it, like the generated
 * name, before validating admission; the controller sees the same uid on the
 * stored pod), else request_uid (offline admission of a pod without a uid);
 * annotations never take part. pod = metadata.name, else
 * metadata.generateName; namespace ns; amounts charge; expiry expires (Unix
 * seconds). Strings are copied: dispose *out with gq_reservation_dispose.
 * GQ_EINVAL when there is neither a pod uid nor a request uid. */
gq_code gq_reservation_for_pod(json_object *pod, const char *ns, const char *request_uid,
                               const gq_amounts *charge, int64_t expires, gq_reservation *out,
                               gq_err *err) GQ_WUR;

/* --- shared ResourceClaims: charged once ---------------------------------- */

/* One pod's naming of a shared claim. */
typedef struct gq_claim_ref {
    const gq_shared_claim *claim; /* borrowed */
    size_t owner;                 /* the caller's index of the pod naming it */
} gq_claim_ref;

/* The one rule by which a quota charges shared ResourceClaims, for the
 * validating webhook (a pod against what a quota charges already) and the
 * controller's recount (every counted pod): sort refs[0..n) by claim uid
 * (for each uid the dearest record first, then the lowest owner: a
 * deterministic choice should records of one claim differ), keep the first
 * ref of each uid for which charged (may be NULL: none is) answers false,
 * and move the kept refs to the front in uid order. Returns how many were
 * kept. Pure; refs is reordered in place. */
size_t gq_claims_once(gq_claim_ref *refs, size_t n, bool (*charged)(void *ud, const char *uid),
                      void *ud);

/* What claim c charges: its devices and memory, gpu-pods 0 (every key set). */
void gq_claim_amounts(const gq_shared_claim *c, gq_amounts *out);

/* charge without the shared claims c[0..n) (each key floored at 0): what the
 * pod itself costs, counted for every pod. */
void gq_charge_own(const gq_amounts *charge, const gq_shared_claim *c, size_t n, gq_amounts *out);

/* --- usage recount (controller) ----------------------------------------- */

/* One pod as the controller sees it. */
typedef struct gq_usage_pod {
    gq_pod_facts facts;            /* facts.terminal pods count nothing */
    gq_amounts charge;             /* gq_charge_from_cost (shared claims included) */
    json_object *ns_labels;        /* labels of facts.namespace_ (tenant selectors); borrowed */
    const gq_shared_claim *claims; /* the ResourceClaims it names directly (borrowed) */
    size_t n_claims;
    bool queued; /* waits behind the gate gpuquota.io/quota: counted as queued, not used */
} gq_usage_pod;

/* Result of a recount. Caller-owned: gq_usage_init, then gq_usage_dispose. */
typedef struct gq_usage {
    gq_amounts used;      /* keys of spec.hard only, like ResourceQuota status.used */
    gq_amounts *by_model; /* parallel to q->models: keys of each model's limits */
    size_t n_by_model;
    gq_amounts queued;   /* what queued pods would charge, keys of spec.hard only */
    int64_t queued_pods; /* queued pods the quota would charge */
    gq_named_usage *ns;  /* tenants: namespaces with a charging pod, sorted by name */
    size_t n_ns;
    /* The shared ResourceClaims counted in used, once each, sorted by uid:
     * counted claim records for status.reservations (claim and counted set,
     * expires 0). */
    gq_reservation *claims;
    size_t n_claims;
} gq_usage;

void gq_usage_init(gq_usage *u);
void gq_usage_dispose(gq_usage *u);

/* Sum the charges of the pods q matches, each shared ResourceClaim once
 * (gq_claims_once over the claims the matching pods name). pods are borrowed. *out is disposed
 * and refilled on success. GQ_ERANGE on overflow. */
gq_code gq_quota_recount(const gq_quota *q, const gq_usage_pod *pods, size_t n, gq_usage *out,
                         gq_err *err) GQ_WUR;

/* What the recount u of q (gq_quota_recount) says, into st: status.used,
 * usedByModel over q's spec.models (when it has some) and, for a tenant,
 * namespaces. The other members of st stay as they are. GQ_ENOMEM. */
gq_code gq_usage_to_status(const gq_quota *q, const gq_usage *u, gq_quota_status *st,
                           gq_err *err) GQ_WUR;

/* --- a choice of models ------------------------------------------------------- */

/* One model a pod accepts, with what the pod costs on it. */
typedef struct gq_model_option {
    const char *model; /* catalog name (borrowed) */
    gq_amounts charge; /* gq_charge_from_cost of the pod priced on that model */
} gq_model_option;

/* Choose the model for a pod that accepts opts[0..n) in order of
 * preference: the first whose charge fits every quota among quotas[0..n_q)
 * that governs the pod (gq_quota_evaluate with pod->model set to the
 * option's model, require_quota and reservation_key as there). On GQ_OK
 * *chosen is its index. When none fits, GQ_EDENIED with err saying, per
 * model, why: "no accepted GPU model fits: a100-80gb: exceeded quota: ...;
 * h100-80gb: exceeded quota: ...". GQ_EINVAL for n == 0. Pure: the quotas'
 * state (status and reservations) is the caller's snapshot. */
gq_code gq_model_choose(const gq_model_option *opts, size_t n, const gq_quota_snapshot *s,
                        const gq_pod_facts *pod, size_t *chosen, gq_err *err) GQ_WUR;

/* --- GPULimitRange ---------------------------------------------------------- */

/* The default a container receives. */
typedef struct gq_ctr_default {
    gq_ctr_kind kind;
    size_t index; /* in spec.containers or spec.initContainers */
    char name[64];
    int64_t gpus;            /* N of nvidia.com/gpu: N, turned into N slices */
    int64_t memory_per_gpu;  /* bytes of each slice */
    const char *limit_range; /* borrowed from lrs: the GPULimitRange that supplied it */
} gq_ctr_default;

/* Defaults to apply to pod (borrowed) whose cost is cost: only containers
 * asking for whole GPUs without an amount (form GQ_FORM_WHOLE) in a pod
 * without annotation gpuquota.io/exclusive: "true". The default comes from
 * the first GPULimitRange in name order holding a Container item with a
 * default. *out (caller frees with free(); NULL when *n_out is 0) lists the
 * containers in cost order. */
gq_code gq_limit_defaults(json_object *pod, const gq_pod_cost *cost,
                          const gq_limit_range *const *lrs, size_t n, gq_ctr_default **out,
                          size_t *n_out, gq_err *err) GQ_WUR;

/* Validate a pod's cost against every GPULimitRange of namespace ns:
 * Container min/max compare each GPU container's total charge
 * (gpus x charged_per_gpu), Pod min/max the pod's gpu-memory charge; maxGPUs
 * the GPU devices of a container / held by the pod at once; allowedModels the
 * pod's model. GQ_EDENIED with Kubernetes LimitRange wording; several
 * violations are reported as "[a, b]" as Kubernetes aggregates them. Pods
 * without GPU containers always pass. */
gq_code gq_limit_validate(const gq_pod_cost *cost, const char *ns, const gq_limit_range *const *lrs,
                          size_t n, gq_err *err) GQ_WUR;

#endif
