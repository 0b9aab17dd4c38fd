/* The mutation: turn a pod's GPU requests into the configured backend's
 * resources (DESIGN.md §3) and record what was done, as a JSON Patch.
 *
 * Pure: the pod and its cost go in, a patch and warnings come out. The cost
 * is gq_pod_cost_compute's (of the pod with any GPULimitRange defaults
 * applied, see gq_pod_apply_defaults), so the rewritten pod costs exactly
 * what the original did. See docs/rewrite.md. */
#ifndef GQ_REWRITE_H
#define GQ_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "common/gq_error.h"
#include "quota/jsonpatch.h"
#include "quota/podcost.h"
#include "quota/policy.h"
#include "quota/record.h"

/* Annotations the rewrite writes (GQ_ANN_REQUESTS is in podcost.h,
 * GQ_ANN_CHARGED and GQ_ANN_ADMISSION in record.h). */
#define GQ_ANN_ORIGINAL "gpuquota.io/original-request"

#define GQ_REWRITE_WARNING_MAX 120 /* bytes of one warning */
#define GQ_REWRITE_WARNINGS 32     /* warnings kept; later ones are counted */

typedef struct gq_rewrite_opts {
    const gq_ctr_default *defaults; /* GPULimitRange defaults the cost includes; may be NULL */
    size_t n_defaults;
    /* The model gpuquota chose for a pod that accepts several (or that a
     * GPULimitRange's allowedModels pins): the cost is priced on it
     * (cost->model); the patch writes annotation gpuquota.io/gpu-model =
     * chosen->name and gpuquota.io/gpu-model-choices = choices (the list
     * chosen from, as the pod gave it) and pins the node affinity. NULL: the
     * pod's own pin, if any. */
    const gq_model *chosen;
    const char *choices;
    /* The pod accepts several models and waits behind the scheduling gate
     * gpuquota.io/quota: the model is chosen when the controller ungates it
     * (gq_queue_ungate_patch), so the patch pins none (the cost is priced on
     * the first model accepted). */
    bool model_deferred;
    /* The GQ_ANN_CLAIMS record of the pod's DRA claims (the cost includes
     * them): written with label gpuquota.io/managed, also for a pod whose
     * containers ask for no GPU. NULL: none. */
    const char *claims;
} gq_rewrite_opts;

/* The result. Caller-owned: gq_rewrite_init before, gq_rewrite_dispose after. */
typedef struct gq_rewrite {
    gq_patch *patch; /* never NULL after success; empty when nothing changes */
    char warnings[GQ_REWRITE_WARNINGS][GQ_REWRITE_WARNING_MAX + 1];
    size_t n_warnings;
    size_t dropped_warnings;
    char charged[128]; /* "gpu-memory=20Gi,gpus=0,gpu-pods=1"; "" for a pod without GPUs */
    /* For audit records (owned; freed by gq_rewrite_dispose). originals:
     * the original GPU request of every GPU container, as the
     * gpuquota.io/original-request annotation writes it,
     * {"trainer":{"nvidia.com/gpu":"0.5"}}; NULL for a pod without GPUs.
     * changes: what the patch does, {"containers":{"trainer":
     * {"aliyun.com/gpu-mem":"20"}},"gpuModel":"a100-40gb","schedulerName":
     * "s","operations":7} with only the parts that apply; NULL when the patch
     * is empty. */
    json_object *originals;
    json_object *changes;
} gq_rewrite;

void gq_rewrite_init(gq_rewrite *r);
void gq_rewrite_dispose(gq_rewrite *r);

/* A deep copy of pod (borrowed) in which each defaulted container (kind and
 * index of defaults[i]) carries limits["gpuquota.io/gpu-memory"] =
 * memory_per_gpu next to its nvidia.com/gpu: N: the pod the defaults turn
 * it into, whose cost the rewrite charges. Caller owns *out. GQ_EINVAL when a
 * default names a container the pod does not have. */
gq_code gq_pod_apply_defaults(json_object *pod, const gq_ctr_default *defaults, size_t n,
                              json_object **out, gq_err *err) GQ_WUR;

/* Build the patch that rewrites pod (borrowed; the object exactly as sent)
 * whose cost under cfg is cost. Per GPU container in cost: GPU request keys
 * in resources.limits and resources.requests become the backend's resources
 * (whole exclusive GPUs and containers already in a backend's form are left
 * alone); a pod annotation gpuquota.io/gpu-model becomes required node
 * affinity merged into every nodeSelectorTerm; schedulerName is set when the
 * pod has none or default-scheduler; label gpuquota.io/managed and the
 * gpu-requests, original-request and charged annotations are
 * written. Only differences are emitted, so a rewritten pod yields an empty
 * patch, as does a pod without GPUs. On success *out (initialised) holds the
 * patch and one warning per container rewritten; on error *out is untouched.
 * GQ_EUNSUPPORTED when the backend cannot serve a request (podcost normally
 * rejects those first), GQ_ENOMEM, GQ_ELIMIT. */
gq_code gq_rewrite_pod(const gq_config *cfg, json_object *pod, const gq_pod_cost *cost,
                       const gq_rewrite_opts *opts, gq_rewrite *out, gq_err *err) GQ_WUR;

/* True for a resource name that asks for GPU memory or devices in any form
 * gpuquota reads (input vocabulary and every backend's output). */
bool gq_is_gpu_resource(const char *name);

#endif
