/* An in-memory quota store behind the wh_store seam (validate.h): the
 * objects `gpuquota admit --state` reads from files, and the fake API server
 * of the validating webhook's unit tests, with injectable conflicts, errors
 * and latency. Status updates are conditional on metadata.resourceVersion
 * exactly as the API server's are. Thread-safe. */
#ifndef WH_MEMSTORE_H
#define WH_MEMSTORE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "config.h"
#include "gq_error.h"
#include "validate.h"

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

#define WH_MS_LIST 1u   /* list_* and namespace_labels */
#define WH_MS_GET 2u    /* get_quota */
#define WH_MS_UPDATE 4u /* update_status */

/* Injected faults; a zeroed struct means none. */
typedef struct wh_memstore_faults {
    /* Every Nth update_status answers GQ_ECONFLICT and bumps the
     * resourceVersion, as if another writer got there first. 0: never. */
    unsigned conflict_every;
    /* When not GQ_OK, store calls fail with this code ("store down"). */
    gq_code fail;
    unsigned fail_ops;   /* with fail: WH_MS_* bits of the calls that fail; 0 = all */
    unsigned fail_count; /* with fail: only the next N calls; 0 = until cleared */
    unsigned latency_us; /* delay before each get_quota and update_status */
} wh_memstore_faults;

void wh_memstore_set_faults(wh_memstore *m, const wh_memstore_faults *f);

typedef struct wh_memstore_stats {
    uint64_t gets;      /* get_quota calls */
    uint64_t updates;   /* update_status calls (including refused ones) */
    uint64_t conflicts; /* GQ_ECONFLICT answers */
} wh_memstore_stats;

void wh_memstore_get_stats(wh_memstore *m, wh_memstore_stats *out);

/* Load the documents of `gpuquota admit --state` files: GPUQuota,
 * GPUTenantQuota, GPULimitRange, Namespace and Pod objects, or Lists of them
 * (items). Pods are not stored: they count toward each quota's status.used
 * through gq_quota_recount, as the controller counts them (tenants also get
 * status.namespaces). Call once, with every document. GQ_EINVAL for an
 * unknown kind or a malformed object or pod (the message names it). */
gq_code wh_memstore_load_state(wh_memstore *m, const gq_config *cfg, json_object *const *docs,
                               size_t n, gq_err *err) GQ_WUR;

#endif
