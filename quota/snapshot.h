/* An in-memory snapshot of the objects an admission reads: GPUQuotas,
 * GPUTenantQuotas, GPULimitRanges and Namespaces, as `gpuquota admit
 * --state` reads them from files and tests build them. The one in-memory
 * snapshot of the project: `gpuquota admit` decides on it directly
 * (gq_snapshot_decide), and webhook/memstore.h serves it behind the
 * webhooks' store seam, with a lock, to /mutate and to the tests of
 * /validate. Status writes are conditional on metadata.resourceVersion
 * exactly as the API server's are. Pure: not thread-safe, no I/O. */
#ifndef GQ_SNAPSHOT_H
#define GQ_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "quota/admission.h"
#include "quota/config.h"
#include "quota/crd.h"

typedef struct gq_snapshot gq_snapshot;

/* The kinds a snapshot holds. */
typedef enum gq_snapshot_kind {
    GQ_SNAP_QUOTA = 0,  /* GPUQuota, namespaced */
    GQ_SNAP_TENANT,     /* GPUTenantQuota, cluster-scoped */
    GQ_SNAP_LIMITRANGE, /* GPULimitRange, namespaced */
    GQ_SNAP_NAMESPACE,  /* Namespace */
    GQ_SNAP_KINDS
} gq_snapshot_kind;

#define GQ_SNAPSHOT_MAX_OBJECTS 100000

/* An empty snapshot. Caller owns *out (gq_snapshot_free). */
gq_code gq_snapshot_new(gq_snapshot **out, gq_err *err) GQ_WUR;
void gq_snapshot_free(gq_snapshot *s);

/* Add or replace (by kind, namespace, name) a GPUQuota, GPUTenantQuota,
 * GPULimitRange or Namespace. obj is copied; the copy gets a new
 * metadata.resourceVersion. GQ_EINVAL for another kind or a missing name
 * (or namespace, for namespaced kinds), GQ_ELIMIT when full. */
gq_code gq_snapshot_apply(gq_snapshot *s, json_object *obj, gq_err *err) GQ_WUR;

/* A copy of one object (caller owns it). kind is "GPUQuota", ...; ns NULL
 * for cluster-scoped kinds. GQ_ENOTFOUND when absent, GQ_EINVAL for an
 * unknown kind. */
gq_code gq_snapshot_get(const gq_snapshot *s, const char *kind, const char *ns, const char *name,
                        json_object **out, gq_err *err) GQ_WUR;

/* A copy of quota ns/name (ns NULL for a GPUTenantQuota): GQ_ENOTFOUND
 * when absent. */
gq_code gq_snapshot_get_quota(const gq_snapshot *s, gq_quota_kind kind, const char *ns,
                              const char *name, json_object **out, gq_err *err) GQ_WUR;

/* Copies of the objects of kind k (GQ_SNAP_QUOTA, _TENANT or _LIMITRANGE)
 * of namespace ns (ignored for tenants) as a new JSON array. */
gq_code gq_snapshot_list(const gq_snapshot *s, gq_snapshot_kind k, const char *ns,
                         json_object **out, gq_err *err) GQ_WUR;

/* A copy of metadata.labels of Namespace ns; NULL with GQ_OK when the
 * namespace is unknown or has no labels. */
gq_code gq_snapshot_namespace_labels(const gq_snapshot *s, const char *ns, json_object **out,
                                     gq_err *err) GQ_WUR;

/* Replace the status of quota ns/name with obj's (borrowed), conditional
 * on obj's metadata.resourceVersion (GQ_ECONFLICT with the API server's
 * words when stale, GQ_ENOTFOUND when absent). On success *out (when out
 * is not NULL) is a copy of the object as stored (NULL when it could not
 * be copied). */
gq_code gq_snapshot_update_status(gq_snapshot *s, gq_quota_kind kind, const char *ns,
                                  const char *name, json_object *obj, json_object **out,
                                  gq_err *err) GQ_WUR;

/* Load the documents of `gpuquota admit --state` files: GPUQuota,
 * GPUTenantQuota, GPULimitRange, Namespace and Pod objects, or Lists of them
 * (items). Pods are not stored: they count toward each quota's status.used
 * through gq_quota_recount, as the controller counts them (tenants also get
 * status.namespaces): by gq_pod_counts at now (Unix seconds), pods gated by
 * gpuquota.io/quota as queued. Call once, with every document. GQ_EINVAL for
 * an unknown kind or a malformed object or pod (the message names it). */
gq_code gq_snapshot_load_state(gq_snapshot *s, const gq_config *cfg, json_object *const *docs,
                               size_t n, int64_t now, gq_err *err) GQ_WUR;

/* The offline verdict on a pod CREATE (a, started with gq_admission_init):
 * gq_admission_decide with every need read from s, then, for an allowed
 * pod that quotas govern, each quota to charge checked on s
 * (gq_admission_check_fresh), writing nothing: the verdict a dry run of
 * /validate gives on a cluster in the state of s. a->verdict holds it;
 * counted (may be NULL) is called, in check order, with each quota to
 * charge that counts the pod (it would hold a reservation) until one
 * denies. GQ_ENOMEM is the only error. */
gq_code gq_snapshot_decide(const gq_config *cfg, const gq_snapshot *s, gq_admission *a,
                           void (*counted)(void *ud, const gq_quota *q), void *ud,
                           gq_err *err) GQ_WUR;

#endif
