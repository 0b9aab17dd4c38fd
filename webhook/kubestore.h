/* The quota store of a running webhook (wh_store, validate.h) over the
 * Kubernetes API: informer caches of GPUQuotas, GPUTenantQuotas,
 * GPULimitRanges and Namespaces answer the lists while their watches are
 * established; otherwise, and where a cache holds no GPUQuota for the
 * namespace (no GPUTenantQuota at all), the lists are read live, shared by
 * concurrent admissions (docs/validating-webhook.md, Stale caches). A fresh
 * GET and a status PUT with the resourceVersion read do the charging. */
#ifndef WH_KUBESTORE_H
#define WH_KUBESTORE_H

#include <stdbool.h>

#include "common/gq_error.h"
#include "kube/kube.h"
#include "webhook/metrics.h"
#include "webhook/validate.h"

#define WH_GQ_PATH "/apis/gpuquota.io/v1alpha1"

typedef struct wh_kubestore wh_kubestore;

/* A store over api (borrowed; must outlive the store). Caches are created
 * but not started. Caller owns *out (wh_kubestore_free). */
gq_code wh_kubestore_new(const kube_api *api, wh_kubestore **out, gq_err *err) GQ_WUR;

/* The gauges (borrowed; NULL: none) whose per-quota series are dropped when
 * the caches see a GPUQuota or GPUTenantQuota deleted. Call before start. */
void wh_kubestore_set_metrics(wh_kubestore *ks, wh_metrics *m);

/* Called (on a cache's thread) when a GPUQuota's status holds a live want:
 * a replica asks the others for the room they hold in escrow
 * (docs/validating-webhook.md, "Escrow"). */
typedef void (*wh_want_fn)(void *ud, const char *ns, const char *name);

/* Who is told of wants (fn NULL: nobody). Call before start. */
void wh_kubestore_set_want_hook(wh_kubestore *ks, wh_want_fn fn, void *ud);

/* How long (ms) a live read that found a scope empty (no GPUQuota in a
 * namespace, no GPUTenantQuota at all) answers for it while the cache holds
 * none; default 30 s, as Kubernetes' ResourceQuota admission; 0: read live
 * every time. Call before the store is used. */
void wh_kubestore_set_empty_ttl(wh_kubestore *ks, long ms);

/* Start the four list+watch caches. */
gq_code wh_kubestore_start(wh_kubestore *ks, gq_err *err) GQ_WUR;

/* True once every cache has applied its first list (/readyz). Says nothing
 * about whether the watches are up now: the lists read live when not. */
bool wh_kubestore_synced(wh_kubestore *ks);

/* Fill a store table whose calls go to ks. */
void wh_kubestore_store(wh_kubestore *ks, wh_store *out);

/* Stop the caches and free. NULL is accepted. */
void wh_kubestore_free(wh_kubestore *ks);

#endif
