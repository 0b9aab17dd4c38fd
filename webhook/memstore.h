/* The offline quota store behind the wh_store seam (store.h): the
 * objects `gpuquota admit --state` reads from files. Status updates are
 * conditional on metadata.resourceVersion exactly as the API server's are.
 * Thread-safe. Tests inject conflicts, failures and latency by wrapping its
 * table (test/support/faultstore.h); the product never does. */
#ifndef WH_MEMSTORE_H
#define WH_MEMSTORE_H

#include <stddef.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "common/gq_error.h"
#include "webhook/store.h"

typedef struct wh_memstore wh_memstore;

#define WH_MEMSTORE_MAX_OBJECTS 100000

/* An empty store. Caller owns *out (wh_memstore_free). */
gq_code wh_memstore_new(wh_memstore **out, gq_err *err) GQ_WUR;
void wh_memstore_free(wh_memstore *m);

/* Add or replace (by kind, namespace, name) a GPUQuota, GPUTenantQuota,
 * GPULimitRange or Namespace. obj is copied; the copy gets a new
 * metadata.resourceVersion. GQ_EINVAL for another kind or a missing name
 * (or namespace, for namespaced kinds), GQ_ELIMIT when full. */
gq_code wh_memstore_apply(wh_memstore *m, json_object *obj, gq_err *err) GQ_WUR;

/* A copy of one stored object (caller owns it). kind is "GPUQuota", ...;
 * ns NULL for cluster-scoped kinds. GQ_ENOTFOUND when absent. Not subject
 * to injected faults. */
gq_code wh_memstore_get(wh_memstore *m, const char *kind, const char *ns, const char *name,
                        json_object **out, gq_err *err) GQ_WUR;

/* Fill a store table whose calls go to m. */
void wh_memstore_store(wh_memstore *m, wh_store *out);

/* Load the documents of `gpuquota admit --state` files: GPUQuota,
 * GPUTenantQuota, GPULimitRange, Namespace and Pod objects, or Lists of them
 * (items). Pods are not stored: they count toward each quota's status.used
 * through gq_quota_recount, as the controller counts them (tenants also get
 * status.namespaces): by gq_pod_counts at now (Unix seconds), pods gated by
 * gpuquota.io/quota as queued. Call once, with every document. GQ_EINVAL for
 * an unknown kind or a malformed object or pod (the message names it). */
gq_code wh_memstore_load_state(wh_memstore *m, const gq_config *cfg, json_object *const *docs,
                               size_t n, int64_t now, gq_err *err) GQ_WUR;

#endif
