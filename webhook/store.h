/* The quota store seam of both webhooks: where /validate reads quotas,
 * limit ranges, namespaces, claims and pods and writes the charges, and
 * /mutate reads the limit ranges, quotas and claims it rewrites a pod by.
 * Two implementations: the informer caches and live reads of the API server
 * (webhook/kubestore.h) and an offline snapshot (webhook/memstore.h). */
#ifndef WH_STORE_H
#define WH_STORE_H

#include <json-c/json.h>

#include "common/gq_error.h"
#include "quota/crd.h"

/* What wh_store.list lists. */
typedef enum wh_list_kind {
    WH_LIST_QUOTAS = 0,    /* the GPUQuotas of a namespace */
    WH_LIST_TENANT_QUOTAS, /* every GPUTenantQuota */
    WH_LIST_LIMIT_RANGES,  /* the GPULimitRanges of a namespace */
} wh_list_kind;

/* The quota store seam. Every returned object is a new, private tree the
 * caller owns (json_object_put): implementations never share a json-c object
 * between threads. Errors: GQ_ECONFLICT (update_status with a stale
 * resourceVersion), GQ_ENOTFOUND (get_quota: the quota is gone), anything
 * else means the store could not be reached. All functions may be called
 * from many threads at once. */
typedef struct wh_store {
    void *ctx;
    /* The objects of one kind (wh_list_kind) as a JSON array of objects:
     * those of namespace ns, or every GPUTenantQuota (ns is then ignored).
     * kind is one of the enum's values. */
    gq_code (*list)(void *ctx, wh_list_kind kind, const char *ns, json_object **out, gq_err *err);
    /* metadata.labels of Namespace ns (an object; NULL with GQ_OK when the
     * namespace is unknown or has no labels). */
    gq_code (*namespace_labels)(void *ctx, const char *ns, json_object **out, gq_err *err);
    /* A fresh read of one quota (ns NULL for a GPUTenantQuota), carrying
     * metadata.resourceVersion. */
    gq_code (*get_quota)(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                         json_object **out, gq_err *err);
    /* Replace the status of the quota with obj's (a whole object as read by
     * get_quota, borrowed), conditional on obj's metadata.resourceVersion.
     * On success *out (when out is not NULL) is the object as stored, with
     * its new resourceVersion (NULL when the store cannot tell). */
    gq_code (*update_status)(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                             json_object *obj, json_object **out, gq_err *err);
    /* A fresh read of ResourceClaimTemplate ns/name (resource.k8s.io/v1);
     * GQ_ENOTFOUND when it does not exist. May be NULL (no cluster). */
    gq_code (*get_claim_template)(void *ctx, const char *ns, const char *name, json_object **out,
                                  gq_err *err);
    /* A fresh read of ResourceClaim ns/name (resource.k8s.io/v1), as
     * get_claim_template. May be NULL (no cluster). */
    gq_code (*get_claim)(void *ctx, const char *ns, const char *name, json_object **out,
                         gq_err *err);
    /* A fresh read of pod ns/name; GQ_ENOTFOUND when there is none. May be
     * NULL (no cluster): a create naming a pod that exists is then charged
     * until its reservation expires. */
    gq_code (*get_pod)(void *ctx, const char *ns, const char *name, json_object **out, gq_err *err);
    /* A fresh read of DeviceClass name (resource.k8s.io/v1, cluster-scoped),
     * as get_claim_template. May be NULL (no cluster). */
    gq_code (*get_device_class)(void *ctx, const char *name, json_object **out, gq_err *err);
    /* A fresh list of the pods of namespace ns labelled gpuquota.io/pod-group
     * = group, as a JSON array (each pod may be trimmed to its metadata and
     * status.phase). May be NULL (no cluster): members are then not compared
     * at creation, and the controller holds a group that disagrees. */
    gq_code (*list_group_pods)(void *ctx, const char *ns, const char *group, json_object **out,
                               gq_err *err);
} wh_store;

#endif
