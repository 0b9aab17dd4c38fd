/* An UPDATE of a pod gpuquota rewrote, sent again as its author wrote it:
 * `kubectl apply` (client- or server-side) of an unchanged manifest, a
 * GitOps tool's re-apply, an image bump. The manifest still asks for the
 * GPU in the form gpuquota replaced at CREATE (nvidia.com/gpu "250m", a
 * list of GPU models), so kube-apiserver would refuse the update ("pod
 * updates may not change fields") or the tamper check would. The mutating
 * webhook normalises such an UPDATE back to what is stored, exactly: where
 * the new pod differs from the old one only by the request forms gpuquota
 * recorded replacing (gpuquota.io/original-request) and by the model list it
 * recorded choosing from (gpuquota.io/gpu-model-choices), the patch puts the
 * stored values back. Anything else — another amount, another model — is
 * left alone, and refused as before. Pure: no I/O. */
#ifndef GQ_UPDATE_H
#define GQ_UPDATE_H

#include <json-c/json.h>

#include "quota/jsonpatch.h"
#include "common/gq_error.h"

/* The JSON Patch (against new_pod) that restores what old_pod stores,
 * into *out (caller frees; NULL when there is nothing to restore, or when
 * the difference is not only gpuquota's own rewrite). old_pod and new_pod
 * are borrowed. GQ_ENOMEM only: a pod that does not have the expected shape
 * is left alone (NULL). */
gq_code gq_update_restore(json_object *old_pod, json_object *new_pod, gq_patch **out,
                          gq_err *err) GQ_WUR;

#endif
