/* The offline quota store behind the wh_store seam (store.h): the one
 * in-memory snapshot (quota/snapshot.h), with a lock, so that the webhooks'
 * code runs on it as on a cluster: `gpuquota admit` mutates over it, and
 * the tests of /validate charge into it. Status updates are conditional on
 * metadata.resourceVersion exactly as the API server's are. Thread-safe.
 * Tests inject conflicts, failures and latency by wrapping its table
 * (test/support/faultstore.h); the product never does. */
#ifndef WH_MEMSTORE_H
#define WH_MEMSTORE_H

#include <stddef.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "quota/config.h"
#include "quota/snapshot.h"
#include "webhook/store.h"

typedef struct wh_memstore wh_memstore;

#define WH_MEMSTORE_MAX_OBJECTS GQ_SNAPSHOT_MAX_OBJECTS

/* An empty store over a snapshot of its own. Caller owns *out
 * (wh_memstore_free). */
gq_code wh_memstore_new(wh_memstore **out, gq_err *err) GQ_WUR;

/* A store over snapshot s, borrowed: it must outlive the store, and while
 * the store is in use it is read and written only through it. */
gq_code wh_memstore_over(gq_snapshot *s, wh_memstore **out, gq_err *err) GQ_WUR;

void wh_memstore_free(wh_memstore *m);

/* gq_snapshot_apply under the store's lock. */
gq_code wh_memstore_apply(wh_memstore *m, json_object *obj, gq_err *err) GQ_WUR;

/* gq_snapshot_get under the store's lock. Not subject to injected faults. */
gq_code wh_memstore_get(wh_memstore *m, const char *kind, const char *ns, const char *name,
                        json_object **out, gq_err *err) GQ_WUR;

/* Fill a store table whose calls go to m. */
void wh_memstore_store(wh_memstore *m, wh_store *out);

/* gq_snapshot_load_state under the store's lock. */
gq_code wh_memstore_load_state(wh_memstore *m, const gq_config *cfg, json_object *const *docs,
                               size_t n, int64_t now, gq_err *err) GQ_WUR;

#endif
