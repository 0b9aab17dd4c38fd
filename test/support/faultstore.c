#include "faultstore.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct faultstore {
    pthread_mutex_t mu;
    wh_store inner;
    faultstore_faults faults;
    unsigned fail_left;
    faultstore_stats stats;
};

gq_code faultstore_new(const wh_store *inner, faultstore **out, gq_err *err)
{
    faultstore *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return gq_err_oom(err);
    pthread_mutex_init(&fs->mu, NULL);
    fs->inner = *inner;
    *out = fs;
    return GQ_OK;
}

void faultstore_free(faultstore *fs)
{
    if (!fs)
        return;
    pthread_mutex_destroy(&fs->mu);
    free(fs);
}

void faultstore_set_faults(faultstore *fs, const faultstore_faults *f)
{
    pthread_mutex_lock(&fs->mu);
    if (f)
        fs->faults = *f;
    else
        memset(&fs->faults, 0, sizeof(fs->faults));
    fs->fail_left = fs->faults.fail_count;
    pthread_mutex_unlock(&fs->mu);
}

void faultstore_get_stats(faultstore *fs, faultstore_stats *out)
{
    pthread_mutex_lock(&fs->mu);
    *out = fs->stats;
    pthread_mutex_unlock(&fs->mu);
}

/* The injected failure for this call, if any. Call with fs->mu held. */
static gq_code injected(faultstore *fs, unsigned op, gq_err *err)
{
    if (fs->faults.fail == GQ_OK || (fs->faults.fail_ops && !(fs->faults.fail_ops & op)))
        return GQ_OK;
    if (fs->faults.fail_count) {
        if (!fs->fail_left)
            return GQ_OK;
        fs->fail_left--;
    }
    return gq_err_set(err, fs->faults.fail, "injected failure: %s", gq_strerror(fs->faults.fail));
}

static gq_code check(faultstore *fs, unsigned op, gq_err *err)
{
    pthread_mutex_lock(&fs->mu);
    gq_code rc = injected(fs, op, err);
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

static void delay(faultstore *fs)
{
    pthread_mutex_lock(&fs->mu);
    unsigned us = fs->faults.latency_us;
    pthread_mutex_unlock(&fs->mu);
    if (!us)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static gq_code fs_list(void *ctx, wh_list_kind kind, const char *ns, json_object **out, gq_err *err)
{
    faultstore *fs = ctx;
    gq_code rc = check(fs, FS_LIST, err);
    return rc ? rc : fs->inner.list(fs->inner.ctx, kind, ns, out, err);
}

static gq_code fs_namespace_labels(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    faultstore *fs = ctx;
    gq_code rc = check(fs, FS_LIST, err);
    return rc ? rc : fs->inner.namespace_labels(fs->inner.ctx, ns, out, err);
}

static gq_code fs_get_quota(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                            json_object **out, gq_err *err)
{
    faultstore *fs = ctx;
    delay(fs);
    pthread_mutex_lock(&fs->mu);
    fs->stats.gets++;
    gq_code rc = injected(fs, FS_GET, err);
    pthread_mutex_unlock(&fs->mu);
    return rc ? rc : fs->inner.get_quota(fs->inner.ctx, kind, ns, name, out, err);
}

/* Another writer's update: the object written back as it is. */
static gq_code race(faultstore *fs, gq_quota_kind kind, const char *ns, const char *name,
                    gq_err *err)
{
    json_object *cur = NULL;
    gq_code rc = fs->inner.get_quota(fs->inner.ctx, kind, ns, name, &cur, err);
    if (!rc)
        rc = fs->inner.update_status(fs->inner.ctx, kind, ns, name, cur, NULL, err);
    json_object_put(cur);
    return rc;
}

static gq_code fs_update_status(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                                json_object *obj, json_object **out, gq_err *err)
{
    faultstore *fs = ctx;
    delay(fs);
    pthread_mutex_lock(&fs->mu);
    fs->stats.updates++;
    gq_code rc = injected(fs, FS_UPDATE, err);
    bool conflict =
        !rc && fs->faults.conflict_every && fs->stats.updates % fs->faults.conflict_every == 0;
    pthread_mutex_unlock(&fs->mu);
    if (!rc && conflict)
        rc = race(fs, kind, ns, name, err);
    if (!rc)
        rc = fs->inner.update_status(fs->inner.ctx, kind, ns, name, obj, out, err);
    if (rc == GQ_ECONFLICT) {
        pthread_mutex_lock(&fs->mu);
        fs->stats.conflicts++;
        pthread_mutex_unlock(&fs->mu);
    }
    return rc;
}

void faultstore_table(faultstore *fs, wh_store *out)
{
    out->ctx = fs;
    out->list = fs_list;
    out->namespace_labels = fs_namespace_labels;
    out->get_quota = fs_get_quota;
    out->update_status = fs_update_status;
    out->get_claim_template = NULL; /* faults are injected into charging only */
    out->get_claim = NULL;
    out->get_device_class = NULL;
    out->get_pod = NULL;
    out->list_group_pods = NULL;
}

gq_code faultstore_over_memstore(wh_memstore **ms, faultstore **fs, wh_store *table)
{
    wh_store offline;
    gq_code rc = wh_memstore_new(ms, NULL);
    if (rc)
        return rc;
    wh_memstore_store(*ms, &offline);
    if ((rc = faultstore_new(&offline, fs, NULL))) {
        wh_memstore_free(*ms);
        *ms = NULL;
        return rc;
    }
    faultstore_table(*fs, table);
    return GQ_OK;
}
