/* Queueing instead of denying (docs/queueing.md): the scheduling gate, pod
 * groups, the order of a queue and which queued pods can be admitted now.
 * Pure: inputs are parsed objects and numbers, the caller (the controller)
 * reads the API server and writes the decisions. */
#ifndef GQ_PODQUEUE_H
#define GQ_PODQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/crd.h"
#include "common/gq_error.h"
#include "quota/config.h"
#include "quota/policy.h"

/* The scheduling gate gpuquota adds at creation and only its controller
 * removes. */
#define GQ_QUEUE_GATE "gpuquota.io/quota"
/* Pod groups: admitted all or nothing. */
#define GQ_POD_GROUP_LABEL "gpuquota.io/pod-group"
#define GQ_POD_GROUP_SIZE_ANNOTATION "gpuquota.io/pod-group-size"
#define GQ_POD_GROUP_MAX 4096 /* largest pod-group-size accepted */
#define GQ_POD_GROUP_NAME_MAX 63
#define GQ_QUEUE_MAX_GATES 256 /* spec.schedulingGates entries read */

/* Index of GQ_QUEUE_GATE in pod's spec.schedulingGates, -1 when absent (or
 * past the first GQ_QUEUE_MAX_GATES entries, which no valid pod has). */
int gq_pod_gate_index(json_object *pod);
/* The same for any gate name. */
int gq_pod_named_gate_index(json_object *pod, const char *gate);
/* Number of entries of spec.schedulingGates (0 when absent or malformed). */
size_t gq_pod_gate_count(json_object *pod);

/* A pod's group, from label GQ_POD_GROUP_LABEL and annotation
 * GQ_POD_GROUP_SIZE_ANNOTATION. present false: the pod is not in a group. */
typedef struct gq_pod_group {
    bool present;
    char name[GQ_POD_GROUP_NAME_MAX + 1];
    int64_t size; /* 1..GQ_POD_GROUP_MAX */
} gq_pod_group;

/* Read pod's group. GQ_EINVAL with a message naming the label or the
 * annotation when one is given without the other, the name is empty or too
 * long, or the size is not a whole number in 1..GQ_POD_GROUP_MAX. */
gq_code gq_pod_group_parse(json_object *pod, gq_pod_group *out, gq_err *err) GQ_WUR;

/* Whether a pod with facts and charge is queued rather than denied: some
 * quota among qs[0..n) governs it (gq_quota_matches), limits a key it
 * charges and has whenExceeded Queue. */
bool gq_queue_applies(const gq_quota *const *qs, size_t n, const gq_pod_facts *pod,
                      json_object *ns_labels, const gq_amounts *charge);

/* A queued pod (or a group of `members` such pods) that could never be
 * admitted. The first member pays charge; each other one pays own, the
 * charge without the shared ResourceClaims the pod names (gq_charge_own),
 * since a quota charges a shared claim once however many members name it
 * (own NULL: charge). Refused when charge + own x (members - 1) is above q's
 * hard for some key, or above the limits of a model q lists in spec.models that the pod
 * is charged against (model: the one it is pinned to, gq_pod_facts.model;
 * NULL: every listed model, as gq_quota_evaluate charges it). GQ_EDENIED
 * with the message in err, e.g.
 *   "pod group train of 4 pods asks for gpu-memory=64Gi, more than quota
 *    team-a allows at all (gpu-memory=48Gi); it would wait forever"
 *   "pod asks for a100-80gb/gpu-memory=40Gi, more than quota team-a allows
 *    at all (a100-80gb/gpu-memory=32Gi): it would wait forever" */
gq_code gq_queue_check_ever_fits(const gq_quota *q, const char *model, const gq_amounts *charge,
                                 const gq_amounts *own, int64_t members, const char *group,
                                 gq_err *err) GQ_WUR;

/* One queued pod, for the planner. Strings are borrowed. */
typedef struct gq_queue_entry {
    const char *uid;
    const char *group;     /* NULL: alone; else a key unique in the cluster ("ns/name") */
    int64_t group_size;    /* the pod's gpuquota.io/pod-group-size */
    int64_t group_running; /* members of its group already admitted and not ended */
    int32_t priority;      /* spec.priority */
    int64_t created_us;    /* metadata.creationTimestamp, Unix microseconds */
    gq_amounts charge;     /* gq_charge_from_cost */
    const char *model;     /* the model it is pinned to (gq_pod_facts.model); NULL: charged
                              against every model a quota lists in spec.models */
    /* A choice of models (gpuquota.io/gpu-model: a,b): options[0..n_options)
     * in order of preference, each priced on its model; the first with which
     * the pod (its group) fits is admitted, and charge and model above are
     * then ignored. n_options 0: no choice, charge and model hold. */
    const gq_model_option *options;
    size_t n_options;
    const size_t *quotas; /* indices of the quotas to charge (gq_quota_limits and matching) */
    const bool *paid;     /* parallel: already holds a reservation in that quota */
    size_t n_quotas;
    /* A preemptor whose victims are leaving (quota/preempt.h): its unit is
     * decided first, and when it does not fit, the room it needs (on its
     * first option) is held for it all the same, so no other pod takes
     * what the evictions free. */
    bool held;
} gq_queue_entry;

/* A cohort: the GPUQuotas of the namespaces one GPUTenantQuota covers,
 * which lend each other what they leave unused (docs/queueing.md,
 * "Borrowing"). free: what the members' unused shares lend (each at most
 * its lendingLimit), less what members use above their hard, per key,
 * summed by the caller over every member (those the planner charges and the
 * others). The planner lowers it as it admits. */
typedef struct gq_queue_cohort {
    gq_amounts free;
    /* What the members lend at most (each its hard, at most its
     * lendingLimit), summed by gq_queue_cohort_add: the denominator of a
     * borrower's dominant share (fair sharing). */
    gq_amounts lendable;
    /* The quota of the GPUTenantQuota whose GPUQuotas this cohort holds,
     * when that tenant itself lends and borrows in a cohort of tenants
     * (spec.cohort): its members may borrow, beyond what they lend each
     * other, what the tenant has borrowed and may still borrow there
     * (gq_queue_cohort_room). NULL: none. */
    const struct gq_queue_quota *up;
} gq_queue_cohort;

/* Add member q of cohort co, at in_use: what it lends (its unused share,
 * at most its lendingLimit) less what it uses above hard, per key its hard
 * sets. */
void gq_queue_cohort_add(gq_queue_cohort *co, const gq_quota *q, const gq_amounts *in_use);

/* A quota the planner charges. */
struct gq_queue_quota;
/* What co's members may still take of key k: its free capacity and, when
 * its tenant borrows in a cohort of tenants (co->up), what the tenant uses
 * above its hard plus what it may still borrow there (at most its
 * borrowingLimit and that cohort's free capacity). Saturating. */
int64_t gq_queue_cohort_room(const gq_queue_cohort *co, int k);

typedef struct gq_queue_quota {
    const gq_quota *q; /* hard, strategy, name, borrowing and lending limits (borrowed) */
    /* Its cohort (the caller's, shared by its members); NULL: none. A
     * GPUQuota with a cohort and spec.borrowingLimit may go above hard on
     * a key the limit sets, by at most the limit and what the cohort has
     * free. */
    gq_queue_cohort *cohort;
    gq_amounts in_use; /* used + live reservations (paid charges included);
                          the planner adds what it admits */
    /* Parallel to q->models: usedByModel + live reservations for that model
     * or for no model (gq_quota_model_in_use); the planner adds what it
     * admits. */
    gq_amounts model_in_use[GQ_CRD_MAX_QUOTA_MODELS];
    /* What of in_use (model_in_use) pods already leaving (being deleted or
     * evicted) hold: room that frees itself (gq_queue_quota_leaving). A
     * held unit takes it first and holds only the rest; the planner lowers
     * it by what holds took, so it ends as the room no hold claims. */
    gq_amounts leaving;
    gq_amounts model_leaving[GQ_CRD_MAX_QUOTA_MODELS];
} gq_queue_quota;

/* Count in q->leaving a pod that counts in q and is leaving: its charge,
 * and in model_leaving for every model of q it counts against (model, or
 * every one when model is NULL). */
void gq_queue_quota_leaving(gq_queue_quota *q, const gq_amounts *charge, const char *model);

typedef enum gq_queue_state {
    GQ_QSTATE_ADMIT = 0,      /* charge it (the unpaid quotas) and ungate */
    GQ_QSTATE_NO_ROOM,        /* quota `quota` has no room for it (its group) now */
    GQ_QSTATE_BEHIND_HEAD,    /* a StrictFIFO quota (`quota`) waits for a pod ahead */
    GQ_QSTATE_WAIT_MEMBERS,   /* its group has fewer than size members */
    GQ_QSTATE_GROUP_MISMATCH, /* members of its group disagree on the size */
} gq_queue_state;

typedef struct gq_queue_decision {
    gq_queue_state state;
    size_t quota;    /* NO_ROOM / BEHIND_HEAD: index into the quotas */
    int model_limit; /* NO_ROOM: -1 when spec.hard has no room, else the index in
                        quotas[quota].q->models of the model whose limits have none */
    size_t option;   /* ADMIT: index of the entry's option admitted (n_options > 0);
                        NO_ROOM: the first option's reason is reported */
    size_t position; /* 1-based place in the cluster-wide order */
    int64_t ahead;   /* BEHIND_HEAD: pods ahead of it in `quota` that wait */
    int64_t members; /* groups: queued members seen (running ones excluded) */
    gq_amounts need; /* NO_ROOM: what the pod or group needs of `quota` */
    bool borrowing;  /* ADMIT: some quota it charges goes above hard (it borrows) */
} gq_queue_decision;

/* Order of queues: higher spec.priority first, then earlier creation, then
 * uid (so every replica decides alike). qsort-style. */
int gq_queue_entry_cmp(const gq_queue_entry *a, const gq_queue_entry *b);

/* Decide which of entries[0..n) can be admitted now, in order. Units are
 * single pods and complete groups (queued members + group_running >= size;
 * a group stands in line at its first member's place). A unit is admitted
 * when, for every quota it charges and every key of that quota's hard, in_use
 * + what the unit has not yet paid <= hard, and likewise for every model the
 * quota lists in spec.models: model_in_use + what its unpaid members pinned
 * to that model or to none owe <= the model's limits; admitting adds that to
 * in_use and model_in_use. Members with a choice of models are tried on
 * their first option, then their second..., all members of a group on the
 * same option index (a member with fewer options ends the trial).
 * A unit that does not fit blocks every StrictFIFO quota it charges: later
 * units charging such a quota wait (BEHIND_HEAD); under BestEffortFIFO they
 * may pass. A unit that has paid everything (a charge written before a
 * failover) is admitted whatever blocks. Incomplete and mismatched groups
 * wait without blocking anyone. A held unit (gq_queue_entry.held) is
 * decided before every other (the room freed for it is its own), and when
 * it does not fit adds what it needs on its first option to in_use all the
 * same, less the room of pods already leaving (leaving, which it uses up):
 * that room is counted in in_use until they are gone, and counting it
 * again for the hold would keep it from everyone for as long as they take
 * to go.
 * out[0..n) receives one decision per entry.
 * GQ_ENOMEM, or GQ_EINVAL for an entry naming a quota index >= nq. */
gq_code gq_queue_plan(const gq_queue_entry *entries, size_t n, gq_queue_quota *quotas, size_t nq,
                      gq_queue_decision *out, gq_err *err) GQ_WUR;

/* Whether a unit, members[0..n) (one pod, or the queued members of a
 * group), on option `option` (0 for members without a choice), fits quota
 * quotas[qi] now, by the planner's rule (gq_queue_plan): in_use + what the
 * members have not paid there, for every key of its hard and every model
 * it limits. *out false also when a member has no such option. GQ_ENOMEM. */
gq_code gq_queue_unit_fits(const gq_queue_entry *members, size_t n, size_t option,
                           const gq_queue_quota *quotas, size_t qi, bool *out) GQ_WUR;

/* A deep copy of pod (borrowed) with annotation gpuquota.io/gpu-model =
 * model (metadata.annotations must exist). Caller owns *out. GQ_ENOMEM,
 * GQ_EINVAL when the pod has no annotations object. */
gq_code gq_pod_with_model(json_object *pod, const char *model, json_object **out,
                          gq_err *err) GQ_WUR;

/* A pod accepting choices[0..n) (gq_pod_model_choices): opts[i] = the model
 * and the charge of the pod priced on it (gq_pod_cost_compute_in of
 * gq_pod_with_model, believing as much of the pod as trust says; a fraction
 * is memory of that model). Errors of the pricing, prefixed with the model.
 * opts has room for n. */
gq_code gq_queue_price_choices(const gq_config *cfg, json_object *pod, gq_pod_trust trust,
                               const gq_model *const *choices, size_t n, gq_model_option *opts,
                               gq_err *err) GQ_WUR;

/* Whether a pod accepting choices[0..n), priced as cost on the first of
 * them, may leave the choice to the controller (a Queue quota gates it).
 * Its container resources are written at creation, before the model is
 * chosen, and cannot change afterwards, so the backend's device request must
 * be the same whichever model is chosen: GQ_EDENIED with the message in err
 * when a container asks a share of a GPU relative to its memory (fraction,
 * HAMI percentage, KAI fraction) among models of different memory on a
 * backend whose resources hold memory (aliyun, hami, volcano), or a shared
 * slice on the mig backend (profiles are per model). Whole GPUs and
 * memory amounts pass. */
gq_code gq_queue_check_deferred_choice(const gq_config *cfg, const gq_pod_cost *cost,
                                       const gq_model *const *choices, size_t n,
                                       gq_err *err) GQ_WUR;

/* The model an ungate pins a pod that accepted several to: what the patch
 * also writes, in the same operation as the gate's removal. */
typedef struct gq_queue_pin {
    const gq_config *cfg;
    json_object *pod;      /* the pod as stored (borrowed): gpu-model holds the list */
    const gq_model *model; /* the model chosen */
    gq_pod_trust trust;    /* how far to believe pod (gq_pod_stored_trust) */
} gq_queue_pin;

/* The JSON Patch (RFC 6902) that ungates a pod: test metadata.uid == uid,
 * test spec.schedulingGates[gate_index].name == GQ_QUEUE_GATE, remove that
 * entry. The tests make the patch fail (and nothing change) when the pod
 * was replaced or its gates moved, so it can never drop someone else's gate
 * or ungate twice. Every ungate is built here: with pin, the operations
 * between the tests and the removal pin the pod to pin->model as the
 * mutating webhook pins a choice under Deny (gq_rewrite_pod with chosen):
 * annotation gpuquota.io/gpu-model = the model, gpuquota.io/gpu-model-choices
 * = the list, gpuquota.io/charged priced on the model, and required node
 * affinity on nvidia.com/gpu.product added to every nodeSelectorTerm, which
 * kube-apiserver allows on a gated pod (only additions to the terms'
 * matchExpressions, or new affinity where there was none). Caller owns
 * *out. GQ_ENOMEM; pricing and rewrite errors in err. */
gq_code gq_queue_ungate_patch(const char *uid, int gate_index, const gq_queue_pin *pin,
                              json_object **out, gq_err *err) GQ_WUR;
/* Annotation gpuquota.io/borrowing: "true" (GQ_ANN_BORROWING), on a pod
 * admitted on capacity its quota borrowed: added to an ungate patch (from
 * gq_queue_ungate_patch) before the gate's removal, so that both land
 * together. The pod must carry annotations (gpuquota's record). GQ_ENOMEM,
 * GQ_EINVAL for a patch that is not an array. */
gq_code gq_queue_mark_borrowing(json_object *patch, gq_err *err) GQ_WUR;
#define GQ_ANN_BORROWING "gpuquota.io/borrowing"

/* Move what a pod counts into (sign +1) or out of (sign -1) pq: its
 * in_use and, for a quota with a cohort, the cohort's free capacity (what
 * the quota borrows more or less, and lends less or more), per key of
 * charge its hard sets. Model usage is the caller's. */
void gq_queue_quota_move(gq_queue_quota *pq, const gq_amounts *charge, int sign);

/* The same patch for any gate (no pin): tests uid and the gate's name at
 * gate_index, removes it. */
gq_code gq_pod_ungate_patch(const char *uid, int gate_index, const char *gate, json_object **out,
                            gq_err *err) GQ_WUR;

#endif
