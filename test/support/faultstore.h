/* A fault-injecting store for tests: wraps any wh_store table (usually the
 * offline store, webhook/memstore.h) and injects conflicts, failures and
 * latency, counting the calls it passes on. Thread-safe. */
#ifndef GQ_TEST_FAULTSTORE_H
#define GQ_TEST_FAULTSTORE_H

#include <stdint.h>

#include "common/gq_error.h"
#include "webhook/memstore.h"
#include "webhook/validate.h"

typedef struct faultstore faultstore;

/* A store that passes every call to inner (copied; inner->ctx must outlive
 * the faultstore). Caller owns *out (faultstore_free). GQ_ENOMEM. */
gq_code faultstore_new(const wh_store *inner, faultstore **out, gq_err *err) GQ_WUR;
void faultstore_free(faultstore *fs);

/* Fill a store table whose calls go through fs. */
void faultstore_table(faultstore *fs, wh_store *out);

/* The usual test store: a fresh offline store (*ms) wrapped by a faultstore
 * (*fs), whose table is *table. Free *fs before *ms. */
gq_code faultstore_over_memstore(wh_memstore **ms, faultstore **fs, wh_store *table) GQ_WUR;

#define FS_LIST 1u   /* list_* and namespace_labels */
#define FS_GET 2u    /* get_quota */
#define FS_UPDATE 4u /* update_status */

/* Injected faults; a zeroed struct means none. */
typedef struct faultstore_faults {
    /* Every Nth update_status answers GQ_ECONFLICT because another writer got
     * there first: the object is written back unchanged through the inner
     * store (a new resourceVersion) before the caller's update is passed on.
     * 0: never. */
    unsigned conflict_every;
    /* When not GQ_OK, store calls fail with this code ("store down"). */
    gq_code fail;
    unsigned fail_ops;   /* with fail: FS_* bits of the calls that fail; 0 = all */
    unsigned fail_count; /* with fail: only the next N calls; 0 = until cleared */
    unsigned latency_us; /* delay before each get_quota and update_status */
} faultstore_faults;

/* Replace the faults (NULL: none). */
void faultstore_set_faults(faultstore *fs, const faultstore_faults *f);

typedef struct faultstore_stats {
    uint64_t gets;      /* get_quota calls */
    uint64_t updates;   /* update_status calls (including refused ones) */
    uint64_t conflicts; /* GQ_ECONFLICT answers */
} faultstore_stats;

void faultstore_get_stats(faultstore *fs, faultstore_stats *out);

#endif
