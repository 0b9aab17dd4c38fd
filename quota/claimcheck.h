/* The claims a pod runs on are the claims it was charged for
 * (docs/models-and-dra.md, "Claims checked before the pod runs").
 *
 * A pod with DRA claims is charged at admission from what its claims were
 * then (GQ_ANN_CLAIMS). A ResourceClaim's spec never changes, but a tenant
 * may delete a claim the pod names and create another under the same name,
 * or replace a template before the pod's claim is made from it. So the
 * mutating webhook holds such pods behind GQ_CLAIMS_GATE, and the
 * controller lifts it only once every claim the record charged exists, is
 * the one charged (the same uid; for a template's claim, owned by the pod
 * and priced no higher than the record), and is pinned: finalizer
 * GQ_CLAIM_FINALIZER keeps it from being deleted and made anew until the
 * pods it was checked for have been bound (the scheduler then reserves it
 * and Kubernetes' own finalizer protects it) or are gone.
 *
 * Pure: the controller reads and writes the objects. */
#ifndef GQ_CLAIMCHECK_H
#define GQ_CLAIMCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "quota/dra.h"
#include "quota/podcost.h"
#include "common/gq_error.h"

/* The scheduling gate on pods whose claims are checked before they run. */
#define GQ_CLAIMS_GATE "gpuquota.io/claims"
/* On a checked ResourceClaim: the finalizer, a label to find it by, and
 * the pods it was checked for ({"pod uid": "pod name"}). */
#define GQ_CLAIM_FINALIZER "gpuquota.io/charged-claim"
#define GQ_CLAIM_PINNED_LABEL "gpuquota.io/pinned"
#define GQ_CLAIM_PINNED_FOR "gpuquota.io/pinned-for"
/* Most pods one claim is pinned for (a shared claim); past it the
 * controller waits for some to be bound. */
#define GQ_CLAIM_MAX_PINS 128

/* One spec.resourceClaims entry gpuquota charged. */
typedef struct gq_claim_use {
    char entry[64];      /* the entry's name */
    char claim[254];     /* the ResourceClaim it uses; "" while not made yet */
    bool generated;      /* made from a template for this pod */
    bool unneeded;       /* the resourceclaim controller made none (nothing to check) */
    gq_shared_claim rec; /* what the record charged (name and uid: named claims) */
} gq_claim_use;

/* The entries of pod's spec.resourceClaims that its GQ_ANN_CLAIMS record
 * charges, into out[0..*n) (at most GQ_POD_MAX_CLAIMS): a claim named
 * directly, or a template's claim as pod.status.resourceClaimStatuses
 * names it once made. *n is 0 when the pod has no record (gpuquota gates
 * only pods it recorded). GQ_EINVAL when the record or an entry is not what
 * gpuquota writes: the pod cannot be checked, so it stays gated. */
gq_code gq_pod_claim_uses(const gq_config *cfg, json_object *pod, gq_claim_use *out, size_t *n,
                          gq_err *err) GQ_WUR;

/* Whether the entries of pod's spec.resourceClaims use distinct claims:
 * claims named directly, and those status.resourceClaimStatuses gives
 * template entries. kube-controller-manager adopts for a template entry an
 * existing claim that names the pod as its controller, which a tenant can
 * arrange for a claim the pod also names directly: kube-scheduler then
 * allocates it, cannot reserve it twice, and its devices stay allocated to
 * no pod. false with why (cap bytes) naming both entries. */
bool gq_pod_claims_distinct(json_object *pod, char *why, size_t cap);

typedef enum gq_claim_verdict {
    GQ_CLAIM_MATCHES = 0, /* the claim charged */
    GQ_CLAIM_WAIT,        /* not made yet: look again when it is */
    GQ_CLAIM_REFUSED,     /* another claim, or one being deleted: the pod stays gated */
} gq_claim_verdict;

/* Whether claim (the live ResourceClaim u names, borrowed; NULL when it
 * does not exist) is the one charged for u of the pod whose uid is
 * pod_uid: a named claim by its uid; a template's claim by its owner (the
 * pod, as controller) and its price (gq_claim_spec_cost with classes: no
 * more GPUs or memory than recorded, and the recorded model when one was).
 * A claim being deleted is refused: the pod could never run on it. why
 * (cap bytes) says what differs. */
gq_claim_verdict gq_claim_verify(const gq_config *cfg, const char *pod_uid, const gq_claim_use *u,
                                 json_object *claim, const gq_class_lookup *classes, char *why,
                                 size_t cap);

/* The pods claim is pinned for: annotation GQ_CLAIM_PINNED_FOR as an
 * object of strings (a new reference; empty when absent or malformed).
 * NULL only when out of memory. */
json_object *gq_claim_pins(json_object *claim);

/* The JSON merge patch (RFC 7386) that leaves claim pinned for exactly
 * pins (uid -> pod name, borrowed): with pins, finalizer
 * GQ_CLAIM_FINALIZER (after the claim's own), label GQ_CLAIM_PINNED_LABEL
 * and annotation GQ_CLAIM_PINNED_FOR; with none, all three removed. It
 * carries the claim's metadata.resourceVersion, so it fails with a
 * conflict (and changes nothing) when the claim changed since it was read,
 * and never applies to another claim of the same name. Caller owns *out.
 * GQ_EINVAL when claim has no resourceVersion; GQ_ENOMEM. */
gq_code gq_claim_pins_patch(json_object *claim, json_object *pins, json_object **out,
                            gq_err *err) GQ_WUR;

#endif
