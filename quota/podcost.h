/* What a pod costs in GPU terms — the one pure function every part of
 * gpuquota calls (mutating webhook, validating webhook, controller, admit).
 *
 * Input is a Pod as Kubernetes JSON (json-c). The function reads every GPU
 * request form of DESIGN.md §3 — including the backend output resources a
 * rewritten pod carries, so a pod costs the same before and after mutation —
 * and computes the charge:
 *   effective = max(sum(app containers) + sum(sidecars),
 *                   max_i(init_i + sum(sidecars declared before init_i)))
 *               + pod overhead,
 * for each of gpu-memory (bytes, each slice rounded up to whole memory units
 * of the config) and gpus (whole exclusive GPUs); gpu-pods is 1 when any
 * container uses a GPU. */
#ifndef GQ_PODCOST_H
#define GQ_PODCOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "quota/crd.h"
#include "common/gq_error.h"

/* Well-known names. */
#define GQ_RES_GPU_MEMORY "gpuquota.io/gpu-memory"
#define GQ_RES_NVIDIA_GPU "nvidia.com/gpu"
#define GQ_ANN_GPU_FRACTION "gpuquota.io/gpu-fraction"
#define GQ_ANN_GPU_MEMORY "gpuquota.io/gpu-memory"
#define GQ_ANN_GPU_MODEL "gpuquota.io/gpu-model"
#define GQ_ANN_EXCLUSIVE "gpuquota.io/exclusive"
#define GQ_LABEL_MANAGED "gpuquota.io/managed"
#define GQ_LABEL_GPU_PRODUCT "nvidia.com/gpu.product"
/* Pod annotation naming the container the pod-level request forms apply to
 * (default: the first app container). */
#define GQ_ANN_GPU_CONTAINER "gpuquota.io/gpu-container"
/* Pod annotation written by the mutating webhook: the request per shared
 * container as charged, {"CONTAINER":{"gpus":N,"memory":"20Gi"}}. Read back
 * for backends whose resources do not carry the memory (timeslicing), and
 * only when gpuquota wrote it (gq_pod_managed, gq_pod_user_set). */
#define GQ_ANN_REQUESTS "gpuquota.io/gpu-requests"
/* Pod annotation written by the mutating webhook for a pod with DRA claims:
 * the GPU devices of each spec.resourceClaims entry, by entry name,
 * {"gpu":{"gpus":2,"memory":"160Gi","model":"a100-80gb"}} ("model" when
 * known). An entry naming a ResourceClaim directly (resourceClaimName) adds
 * "claim" (its name) and "uid" (its metadata.uid): such a claim may be
 * shared by pods and is charged once per quota (gq_claims_once). Read back only when gpuquota wrote
 * it (gq_pod_managed and not gq_pod_user_set), like GQ_ANN_REQUESTS. */
#define GQ_ANN_CLAIMS "gpuquota.io/gpu-claims"
/* Most spec.resourceClaims entries gpuquota prices. */
#define GQ_POD_MAX_CLAIMS 32
/* Longest ResourceClaim uid a GQ_ANN_CLAIMS entry may carry (Kubernetes
 * writes 36-character UUIDs). */
#define GQ_CLAIM_UID_MAX 128
/* KAI scheduler style pod annotations (fraction of one GPU; MiB). */
#define GQ_ANN_KAI_FRACTION "gpu-fraction"
#define GQ_ANN_KAI_MEMORY "gpu-memory"
/* Input and backend output resources. */
#define GQ_RES_HAMI_MEMORY "nvidia.com/gpumem"
#define GQ_RES_HAMI_PERCENT "nvidia.com/gpumem-percentage"
#define GQ_RES_ALIYUN_MEM "aliyun.com/gpu-mem"
#define GQ_RES_VOLCANO_NUMBER "volcano.sh/vgpu-number"
#define GQ_RES_VOLCANO_MEMORY "volcano.sh/vgpu-memory"
#define GQ_RES_MIG_PREFIX "nvidia.com/mig-"
#define GQ_RES_SHARED_GPU "nvidia.com/gpu.shared"
/* Most containers (app + init) a pod that uses a GPU may have; a pod that
 * asks for no GPU is never refused for its size. */
#define GQ_POD_MAX_CONTAINERS 256

typedef enum gq_ctr_kind {
    GQ_CTR_APP = 0,     /* spec.containers[i] */
    GQ_CTR_INIT = 1,    /* spec.initContainers[i] */
    GQ_CTR_SIDECAR = 2, /* spec.initContainers[i] with restartPolicy: Always */
} gq_ctr_kind;

/* How a container asked for a GPU. */
typedef enum gq_form {
    GQ_FORM_NONE = 0,
    GQ_FORM_MEMORY,       /* limits gpuquota.io/gpu-memory (x nvidia.com/gpu N) */
    GQ_FORM_FRACTION,     /* limits nvidia.com/gpu "0.5" / "500m" */
    GQ_FORM_ANN_FRACTION, /* pod annotation gpuquota.io/gpu-fraction */
    GQ_FORM_ANN_MEMORY,   /* pod annotation gpuquota.io/gpu-memory */
    GQ_FORM_HAMI_MEMORY,  /* limits nvidia.com/gpumem (MiB per GPU) */
    GQ_FORM_HAMI_PERCENT, /* limits nvidia.com/gpumem-percentage */
    GQ_FORM_KAI_FRACTION, /* pod annotation gpu-fraction */
    GQ_FORM_KAI_MEMORY,   /* pod annotation gpu-memory (MiB) */
    GQ_FORM_WHOLE,        /* limits nvidia.com/gpu N (integer): exclusive */
    GQ_FORM_BACKEND,      /* already in a backend's resources (rewritten pod) */
} gq_form;

/* Short stable name of a form ("memory", "fraction", "hami-memory", ...). */
const char *gq_form_name(gq_form f);

/* One container that uses a GPU. */
typedef struct gq_ctr_cost {
    char name[64]; /* container name (DNS label, <= 63) */
    gq_ctr_kind kind;
    size_t index; /* index in spec.containers or spec.initContainers */
    gq_form form;
    bool exclusive;          /* whole GPUs, not a shared slice */
    int64_t gpus;            /* number of GPU devices */
    int64_t memory_per_gpu;  /* bytes asked per GPU (shared: the slice; exclusive: card memory, 0 if
                                unknown) */
    int64_t charged_per_gpu; /* bytes charged per GPU: slice rounded up to memory units */
    const gq_model *priced_as; /* whole GPUs of unknown model: the model they are charged as
                                  (the largest the namespace may use); NULL otherwise */
    char original[160];        /* the request as written, e.g. "nvidia.com/gpu=500m" */
} gq_ctr_cost;

/* A ResourceClaim the pod names directly, as GQ_ANN_CLAIMS records it. */
typedef struct gq_shared_claim {
    char uid[GQ_CLAIM_UID_MAX + 1];
    char name[254];
    int64_t gpus, memory;  /* its GPU devices and their memory (bytes) */
    const gq_model *model; /* borrowed from the config; NULL when unknown or mixed */
} gq_shared_claim;

/* Read one entry of GQ_ANN_CLAIMS (rec, borrowed) into *sc: its devices,
 * memory and model, and for a claim named directly (*shared) its name and
 * uid (both empty otherwise). false when the entry is not what gpuquota
 * writes (a model the config does not know included). */
bool gq_claim_record_read(const gq_config *cfg, json_object *rec, gq_shared_claim *sc,
                          bool *shared);

/* The pod's charge. Caller-owned struct: gq_pod_cost_init before use,
 * gq_pod_cost_dispose after. */
typedef struct gq_pod_cost {
    int64_t gpu_memory;    /* quota key gpu-memory, bytes */
    int64_t gpus;          /* quota key gpus: whole exclusive GPUs */
    int64_t gpu_pods;      /* quota key gpu-pods: 0 or 1 */
    const gq_model *model; /* borrowed from the config; NULL when none applies */
    bool model_pinned;     /* the pod named its model (annotation or gpu.product selector) */
    bool priced_unknown;   /* some container's priced_as is set: the namespace's allowed
                              models can change the charge */
    gq_ctr_cost *ctrs;     /* GPU-using containers only, in spec order (init first) */
    size_t n_ctrs;
    /* DRA: GPU devices of the pod's claims, as gpuquota recorded them
     * (GQ_ANN_CLAIMS) and included in gpus and gpu_memory above. */
    int64_t claim_gpus, claim_memory;
    bool claims_unpriced; /* an entry of spec.resourceClaims has no record gpuquota
                             wrote: its devices are unknown */
    /* The shared ResourceClaims among them (owned; included in claim_gpus and
     * claim_memory, so in gpus and gpu_memory). A quota charges each once
     * however many pods name it: gq_claims_once. */
    gq_shared_claim *shared;
    size_t n_shared;
} gq_pod_cost;

void gq_pod_cost_init(gq_pod_cost *c);
void gq_pod_cost_dispose(gq_pod_cost *c);

/* How much of a pod gq_pod_cost_compute_in believes. */
typedef enum gq_pod_trust {
    /* A pod under admission: every request form, annotations included;
     * gpuquota's own records only where the pod's author did not write them
     * (gq_pod_user_set). */
    GQ_TRUST_REQUEST = 0,
    /* A pod gpuquota admitted (it carries gpuquota's admission record,
     * quota/record.h): its requests live in its container resources, which
     * never change; request annotations are not read (a tenant may edit them
     * after admission), and gpuquota's records (gpuquota.io/ annotations,
     * which only gpuquota may change after admission) are read as written,
     * without asking managedFields, which a tenant may rewrite. */
    GQ_TRUST_RECORDS,
    /* A pod gpuquota never admitted (created before gpuquota, or while its
     * namespace was exempt): container resources and the spec only, no
     * annotation at all. What such a pod holds is what its resources ask of
     * the device plugins. */
    GQ_TRUST_SPEC,
} gq_pod_trust;

/* What the pod's namespace and history add to its cost (every member may be
 * NULL/0). */
typedef struct gq_cost_scope {
    /* The namespace's GPULimitRanges (borrowed): a whole GPU of unknown model
     * is charged the largest catalog model that every allowedModels list
     * among them names (the catalog's largest when there are none, or when
     * no model passes them all: such a pod is refused by the GPULimitRange
     * anyway). */
    const gq_limit_range *const *lrs;
    size_t n_lrs;
    gq_pod_trust trust;
} gq_cost_scope;

/* gq_pod_cost_compute within scope (NULL: no GPULimitRanges). */
gq_code gq_pod_cost_compute_in(const gq_config *cfg, json_object *pod, const gq_cost_scope *scope,
                               gq_pod_cost *out, gq_err *err) GQ_WUR;

/* Compute what pod costs under cfg. pod is borrowed. On success *out is
 * filled (previous contents disposed); on error err names the container, the
 * field, the value and the accepted forms, and *out is left empty.
 * GQ_EINVAL for a request that is malformed or out of the accepted range,
 * GQ_ERANGE for unit overflow, GQ_ENOTFOUND for an unknown pinned model,
 * GQ_EUNSUPPORTED for a request the configured backend cannot serve.
 * A GPU is never free: whole GPUs (nvidia.com/gpu: N) of no known model are
 * charged as the largest model of the catalog (gq_pod_cost_compute_in: the
 * largest the namespace may use). */
gq_code gq_pod_cost_compute(const gq_config *cfg, json_object *pod, gq_pod_cost *out,
                            gq_err *err) GQ_WUR;

/* Most models a pod may accept (gq_pod_model_choices). */
#define GQ_MAX_MODEL_CHOICES 8
/* Longest item of such a list, with its terminator. */
#define GQ_MODEL_NAME_TEXT_MAX 128
/* Pod annotation written by the mutating webhook when it chose among
 * several models: the list as the pod gave it, in order of preference
 * (gpuquota.io/gpu-model then holds the model chosen). Never read back. */
#define GQ_ANN_GPU_MODEL_CHOICES "gpuquota.io/gpu-model-choices"

/* The models a pod accepts, when annotation gpuquota.io/gpu-model lists
 * several, comma-separated in order of preference ("a100-80gb,h100-80gb"):
 * out[0..*n_out) (capacity GQ_MAX_MODEL_CHOICES) are catalog models,
 * borrowed from cfg. *n_out is 0 when the annotation is absent or names one
 * model (gq_pod_cost_compute reads that one). Each item is what the single
 * form accepts (catalog name or GFD product). GQ_ENOTFOUND for an unknown
 * model; GQ_EINVAL for an empty or overlong item, a model named twice or
 * more than GQ_MAX_MODEL_CHOICES items. gq_pod_cost_compute refuses a list:
 * the mutating webhook replaces it with the model it chooses. */
gq_code gq_pod_model_choices(const gq_config *cfg, json_object *pod, const gq_model **out,
                             size_t *n_out, gq_err *err) GQ_WUR;

/* Longest label or annotation key: a DNS-subdomain prefix, '/', a name. */
#define GQ_META_KEY_MAX (253 + 1 + 63)

/* Whether the author of pod set metadata.labels[key] (label true) or
 * metadata.annotations[key] itself, by the pod's own history: kube-apiserver
 * lists in metadata.managedFields every field the request set (every field a
 * CREATE sets, whoever else the request says owns it) before mutating
 * admission runs, and lists nowhere what a mutating webhook adds. False when
 * no entry lists it, also when the pod has no managedFields at all (a pod
 * that did not come from kube-apiserver: gpuquota admit records its author
 * as kube-apiserver does, see wh_pod_record_author). */
bool gq_pod_user_set(json_object *pod, bool label, const char *key);

/* Whether gpuquota rewrote pod: label gpuquota.io/managed is "true" and the
 * pod's author did not set it (gq_pod_user_set). Only then are gpuquota's own
 * records on the pod read back: the timeslicing memory of
 * gpuquota.io/gpu-requests (when the author did not set that either), and
 * the container resources winning over a request annotation. */
bool gq_pod_managed(json_object *pod);

/* True when status.phase is Succeeded or Failed: such a pod costs nothing. */
bool gq_pod_is_terminal(json_object *pod);

#endif
