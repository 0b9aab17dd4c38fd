#include "kubestore.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crd.h"

enum { C_QUOTA = 0, C_TENANT, C_LIMITRANGE, C_NAMESPACE, C_COUNT };

static const char *const cache_paths[C_COUNT] = {
    WH_GQ_PATH "/gpuquotas",
    WH_GQ_PATH "/gputenantquotas",
    WH_GQ_PATH "/gpulimitranges",
    "/api/v1/namespaces",
};

struct wh_kubestore {
    const kube_api *api;
    kube_cache *caches[C_COUNT];
};

/* Records are compact JSON text: json-c objects are not safe to share
 * between threads (reference counts are not atomic), text is, and every
 * reader parses its own private tree. Lists only select which quotas govern
 * a pod, so records keep metadata and spec and drop status: reservations
 * would make every admission parse every other admission's record (the
 * charging path reads status fresh anyway). Namespaces keep their labels. */
static gq_code to_text(void *ud, json_object *obj, void **rec, gq_err *err)
{
    static const char *const keep[] = {"apiVersion", "kind", "metadata", "spec"};
    json_object *src = NULL, *meta, *v;
    const char *text = "{}";
    bool built = false;
    if (ud) { /* namespaces */
        if (json_object_object_get_ex(obj, "metadata", &meta))
            json_object_object_get_ex(meta, "labels", &src);
    } else if ((src = json_object_new_object())) {
        built = true;
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
            if (json_object_object_get_ex(obj, keep[i], &v) &&
                json_object_object_add(src, keep[i], json_object_get(v))) {
                json_object_put(v);
                json_object_put(src);
                return gq_err_set(err, GQ_ENOMEM, "out of memory");
            }
    } else {
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    }
    if (src)
        text = json_object_to_json_string_ext(src, JSON_C_TO_STRING_PLAIN);
    *rec = text ? strdup(text) : NULL;
    if (built)
        json_object_put(src);
    if (!*rec)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    return GQ_OK;
}

static void free_text(void *ud, void *rec)
{
    (void)ud;
    free(rec);
}

gq_code wh_kubestore_new(const kube_api *api, wh_kubestore **out, gq_err *err)
{
    static int namespaces_marker;
    wh_kubestore *ks = calloc(1, sizeof(*ks));
    if (!ks)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    ks->api = api;
    for (int i = 0; i < C_COUNT; i++) {
        kube_cache_opts o = {
            .path = cache_paths[i],
            .transform = to_text,
            .free_record = free_text,
            .ud = i == C_NAMESPACE ? &namespaces_marker : NULL,
        };
        gq_code rc = kube_cache_new(api, &o, &ks->caches[i], err);
        if (rc) {
            wh_kubestore_free(ks);
            return rc;
        }
    }
    *out = ks;
    return GQ_OK;
}

gq_code wh_kubestore_start(wh_kubestore *ks, gq_err *err)
{
    for (int i = 0; i < C_COUNT; i++) {
        gq_code rc = kube_cache_start(ks->caches[i], err);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

bool wh_kubestore_synced(wh_kubestore *ks)
{
    for (int i = 0; i < C_COUNT; i++)
        if (!kube_cache_synced(ks->caches[i]))
            return false;
    return true;
}

void wh_kubestore_free(wh_kubestore *ks)
{
    if (!ks)
        return;
    for (int i = 0; i < C_COUNT; i++) {
        if (ks->caches[i])
            kube_cache_stop(ks->caches[i]);
        kube_cache_free(ks->caches[i]);
    }
    free(ks);
}

/* ---- lists from the caches -------------------------------------------------- */

typedef struct collect {
    const char *ns; /* NULL: every record */
    char **texts;
    size_t n, cap;
    bool oom;
} collect;

static int collect_fn(void *ud, const char *ns, const char *name, const void *rec)
{
    collect *c = ud;
    (void)name;
    if (c->ns && strcmp(ns ? ns : "", c->ns))
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        char **grown = realloc(c->texts, cap * sizeof(*grown));
        if (!grown) {
            c->oom = true;
            return 1;
        }
        c->texts = grown;
        c->cap = cap;
    }
    if (!(c->texts[c->n] = strdup(rec))) {
        c->oom = true;
        return 1;
    }
    c->n++;
    return 0;
}

static gq_code list_cache(wh_kubestore *ks, int which, const char *ns, json_object **out,
                          gq_err *err)
{
    collect c = {ns, NULL, 0, 0, false};
    gq_code rc = GQ_OK;
    json_object *arr = NULL;
    if (!kube_cache_synced(ks->caches[which])) {
        /* Never decide on a cache that has not seen the cluster yet. */
        return gq_err_set(err, GQ_EIO, "the %s cache has not synced", cache_paths[which]);
    }
    /* Copy under the cache's read lock, parse outside it. */
    kube_cache_foreach(ks->caches[which], collect_fn, &c);
    if (c.oom || !(arr = json_object_new_array())) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c.n; i++) {
        json_object *o = json_tokener_parse(c.texts[i]);
        if (!o || json_object_array_add(arr, o)) {
            json_object_put(o);
            rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
            goto out;
        }
    }
    *out = arr;
    arr = NULL;
out:
    json_object_put(arr);
    for (size_t i = 0; i < c.n; i++)
        free(c.texts[i]);
    free(c.texts);
    return rc;
}

static gq_code ks_list_quotas(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    return list_cache(ctx, C_QUOTA, ns, out, err);
}

static gq_code ks_list_tenants(void *ctx, json_object **out, gq_err *err)
{
    return list_cache(ctx, C_TENANT, NULL, out, err);
}

static gq_code ks_list_limit_ranges(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    return list_cache(ctx, C_LIMITRANGE, ns, out, err);
}

typedef struct one_text {
    char *text;
} one_text;

static void copy_one(void *ud, const void *rec)
{
    ((one_text *)ud)->text = strdup(rec);
}

static gq_code ks_namespace_labels(void *ctx, const char *ns, json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    one_text t = {NULL};
    if (!kube_cache_synced(ks->caches[C_NAMESPACE]))
        return gq_err_set(err, GQ_EIO, "the namespace cache has not synced");
    if (kube_cache_get(ks->caches[C_NAMESPACE], "", ns, copy_one, &t) != GQ_OK) {
        *out = NULL; /* unknown namespace: no labels */
        return GQ_OK;
    }
    json_object *o = t.text ? json_tokener_parse(t.text) : NULL;
    free(t.text);
    if (!o)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    *out = o;
    return GQ_OK;
}

/* ---- fresh reads and status writes ----------------------------------------- */

static gq_code quota_path(gq_quota_kind kind, const char *ns, const char *name, char *buf,
                          size_t cap, gq_err *err)
{
    int n = kind == GQ_QUOTA_TENANT
                ? snprintf(buf, cap, WH_GQ_PATH "/gputenantquotas/%s", name)
                : snprintf(buf, cap, WH_GQ_PATH "/namespaces/%s/gpuquotas/%s", ns ? ns : "", name);
    if (n < 0 || (size_t)n >= cap)
        return gq_err_set(err, GQ_ELIMIT, "quota name too long");
    return GQ_OK;
}

static gq_code ks_get_quota(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                            json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[2 * GQ_CRD_MAX_STRING + 128];
    gq_code rc = quota_path(kind, ns, name, path, sizeof(path), err);
    if (!rc)
        rc = ks->api->get(ks->api->ctx, path, out, err);
    return rc;
}

static gq_code ks_update_status(void *ctx, gq_quota_kind kind, const char *ns, const char *name,
                                json_object *obj, json_object **out, gq_err *err)
{
    wh_kubestore *ks = ctx;
    char path[2 * GQ_CRD_MAX_STRING + 128];
    json_object *resp = NULL;
    gq_code rc = quota_path(kind, ns, name, path, sizeof(path), err);
    if (!rc)
        rc = ks->api->update_status(ks->api->ctx, path, obj, &resp, err);
    if (!rc && out) {
        *out = resp;
        resp = NULL;
    }
    json_object_put(resp);
    return rc;
}

void wh_kubestore_store(wh_kubestore *ks, wh_store *out)
{
    out->ctx = ks;
    out->list_quotas = ks_list_quotas;
    out->list_tenant_quotas = ks_list_tenants;
    out->list_limit_ranges = ks_list_limit_ranges;
    out->namespace_labels = ks_namespace_labels;
    out->get_quota = ks_get_quota;
    out->update_status = ks_update_status;
}
