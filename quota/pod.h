/* A pod, decoded once: what it costs and counts against quotas, and every
 * fact the webhooks, the recount, the queue, the offline store and the CLI
 * need of it. The one place that decides how far a pod is believed.
 *
 * A pod is met twice (gq_pod_scope):
 * - under admission (/mutate, /validate, gpuquota admit, kubectl gpuquota
 *   explain): the object as sent, every request form (GQ_TRUST_REQUEST),
 *   priced within the namespace's GPULimitRanges; its admission record is
 *   what /validate checks against this price, never believed;
 * - once it exists (the controller's cache, the offline store, gpuquota
 *   queue): the charge was fixed at admission (quota/record.h), so a pod
 *   carrying gpuquota's admission record counts what the record says, in
 *   the scope it records, against the model it records; it is priced again
 *   only for what the record does not hold (its shared DRA claims, a queued
 *   pod's other models), from its container resources and gpuquota's
 *   records (GQ_TRUST_RECORDS), never from a request annotation or
 *   managedFields. A pod gpuquota never admitted counts what its container
 *   resources ask (GQ_TRUST_SPEC). */
#ifndef GQ_POD_H
#define GQ_POD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "quota/podcost.h"
#include "quota/podqueue.h"
#include "quota/policy.h"
#include "common/gq_error.h"

typedef struct gq_pod {
    /* namespace_ and priority_class borrowed from the JSON and the ns given;
     * terminating as admitted (the record's scope, else the live spec);
     * terminal from status.phase; model the catalog name it counts against
     * (borrowed from the config; NULL: every model a quota limits). */
    gq_pod_facts facts;
    gq_amounts charge;  /* what it counts while it counts (gq_pod_counts) */
    bool recorded;      /* charge, model and scope come from its admission record */
    int64_t delete_at;  /* gq_pod_deletion_deadline: 0 when not being deleted */
    int gate_index;     /* gq_pod_gate_index: -1 when it is not queued */
    gq_pod_group group; /* present false also when the group is malformed */
    int32_t priority;   /* spec.priority, clamped to int32 */
    int64_t created_us; /* metadata.creationTimestamp; 0 when absent or malformed */
    /* A queued pod accepting several models: each with its charge (charge
     * above is the first's, as it counts until the controller chooses). */
    size_t n_choices;
    const gq_model *choices[GQ_MAX_MODEL_CHOICES];
    gq_amounts choice_charge[GQ_MAX_MODEL_CHOICES];
    /* Its price, container by container, with the shared ResourceClaims it
     * names (cost.shared, charged once per quota however many pods name
     * them: gq_claims_once; included in charge). Under admission the whole
     * price; for an existing pod what was priced again (empty when only its
     * record could be read). */
    gq_pod_cost cost;
} gq_pod;

/* Where a pod is met (see the top of this file). */
typedef struct gq_pod_scope {
    const char *ns; /* borrowed; NULL: the pod's own metadata.namespace */
    bool admission; /* under admission: the object as sent, every request form */
    /* Under admission, the namespace's GPULimitRanges (borrowed; NULL/0 when
     * not read): a whole GPU of unknown model costs the largest model they
     * all allow (gq_cost_scope). */
    const gq_limit_range *const *lrs;
    size_t n_lrs;
} gq_pod_scope;

void gq_pod_init(gq_pod *p);
void gq_pod_dispose(gq_pod *p);

/* Decode pod (borrowed; it must outlive *out, whose facts borrow from it)
 * as met in scope. Under admission (a CREATE) the charge is the price and
 * the pod is never terminal, whatever status the client sent: kube-apiserver
 * sets it to Pending before the validating webhooks run. An existing pod whose
 * record was written counts it: a recorded pod whose pricing fails now (the
 * configuration changed since) counts its record, never zero. Errors: of
 * the pricing (gq_pod_cost_compute; for an existing pod only when it was
 * never admitted), of the facts (GQ_EINVAL for a wrong type) and GQ_ENOMEM.
 * *out is replaced only on success (what it held disposed); on error it is
 * left as it was. */
gq_code gq_pod_decode(const gq_config *cfg, json_object *pod, const gq_pod_scope *scope,
                      gq_pod *out, gq_err *err) GQ_WUR;

#endif
