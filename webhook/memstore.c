#include "webhook/memstore.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct wh_memstore {
    pthread_mutex_t mu;
    gq_snapshot *s;
    bool owns; /* s is the store's own */
};

gq_code wh_memstore_over(gq_snapshot *s, wh_memstore **out, gq_err *err)
{
    wh_memstore *m = calloc(1, sizeof(*m));
    if (!m)
        return gq_err_oom(err);
    pthread_mutex_init(&m->mu, NULL);
    m->s = s;
    *out = m;
    return GQ_OK;
}

gq_code wh_memstore_new(wh_memstore **out, gq_err *err)
{
    gq_snapshot *s = NULL;
    gq_code rc = gq_snapshot_new(&s, err);
    if (!rc && (rc = wh_memstore_over(s, out, err)))
        gq_snapshot_free(s);
    if (!rc)
        (*out)->owns = true;
    return rc;
}

void wh_memstore_free(wh_memstore *m)
{
    if (!m)
        return;
    if (m->owns)
        gq_snapshot_free(m->s);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

gq_code wh_memstore_apply(wh_memstore *m, json_object *obj, gq_err *err)
{
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_apply(m->s, obj, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

gq_code wh_memstore_get(wh_memstore *m, const char *kind, const char *ns, const char *name,
                        json_object **out, gq_err *err)
{
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_get(m->s, kind, ns, name, out, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

gq_code wh_memstore_load_state(wh_memstore *m, const gq_config *cfg, json_object *const *docs,
                               size_t n, int64_t now, gq_err *err)
{
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_load_state(m->s, cfg, docs, n, now, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* The seam's kinds are the snapshot's. */
_Static_assert((int)WH_LIST_QUOTAS == (int)GQ_SNAP_QUOTA &&
                   (int)WH_LIST_TENANT_QUOTAS == (int)GQ_SNAP_TENANT &&
                   (int)WH_LIST_LIMIT_RANGES == (int)GQ_SNAP_LIMITRANGE,
               "wh_list_kind and gq_snapshot_kind differ");

static gq_code ms_list(void *ctx, wh_list_kind kind, const char *ns, json_object **out, gq_err *err)
{
    wh_memstore *m = ctx;
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_list(m->s, (gq_snapshot_kind)kind, ns, out, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static gq_code ms_namespace_labels(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    wh_memstore *m = ctx;
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_namespace_labels(m->s, ns, out, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static gq_code ms_get_quota(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                            json_object **out, gq_err *err)
{
    wh_memstore *m = ctx;
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_get_quota(m->s, kind, ns, name, out, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static gq_code ms_update_status(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                                json_object *obj, json_object **out, gq_err *err)
{
    wh_memstore *m = ctx;
    pthread_mutex_lock(&m->mu);
    gq_code rc = gq_snapshot_update_status(m->s, kind, ns, name, obj, out, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* State files carry no DRA objects, and their pods are counted into the
 * quotas, not kept, so there are no claims, device classes, pods or pod
 * groups to read. */
void wh_memstore_store(wh_memstore *m, wh_store *out)
{
    *out = (wh_store){.ctx = m,
                      .list = ms_list,
                      .namespace_labels = ms_namespace_labels,
                      .get_quota = ms_get_quota,
                      .update_status = ms_update_status};
}
