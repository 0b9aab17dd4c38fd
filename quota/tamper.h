/* What only gpuquota may change on the objects it keeps records on
 * (design.md, "The charge is fixed at admission"): the gpuquota.io/ labels
 * and annotations of a pod or ResourceClaim, a pod's scheduling gates
 * gpuquota.io/quota and gpuquota.io/claims, and a claim's finalizer
 * gpuquota.io/charged-claim. The verdicts /validate gives an UPDATE by
 * anyone gpuquota does not trust, and `gpuquota admit` gives offline.
 * Pure: no I/O. */
#ifndef GQ_TAMPER_H
#define GQ_TAMPER_H

#include <json-c/json.h>

#include "quota/admission.h"

/* The users trusted to change gpuquota's records unless a webhook is told
 * otherwise: the service accounts of its webhook and its controller as
 * deploy/ makes them. */
#define GQ_TRUSTED_WEBHOOK "system:serviceaccount:gpuquota-system:gpuquota-webhook"
#define GQ_TRUSTED_CONTROLLER "system:serviceaccount:gpuquota-system:gpuquota-controller"

/* A pod UPDATE (or pods/status write) from old_pod to new_pod (borrowed)
 * by an untrusted user: denied (Kubernetes' 403 wording) when it adds or
 * removes one of gpuquota's scheduling gates or changes a gpuquota.io/
 * label or annotation; *v is allowed otherwise. */
void gq_tamper_pod_update(json_object *old_pod, json_object *new_pod, gq_verdict *v);

/* A ResourceClaim CREATE (old_claim NULL) or UPDATE by an untrusted user:
 * denied when it adds or removes gpuquota's finalizer or changes a
 * gpuquota.io/ label or annotation; *v is allowed otherwise. */
void gq_tamper_claim_write(json_object *old_claim, json_object *new_claim, gq_verdict *v);

#endif
