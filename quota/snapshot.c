#include "quota/snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/json_member.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/podqueue.h"
#include "quota/policy.h"

static const char *const kind_names[GQ_SNAP_KINDS] = {GQ_KIND_GPUQUOTA, GQ_KIND_GPUTENANTQUOTA,
                                                      GQ_KIND_GPULIMITRANGE, "Namespace"};

typedef struct entry {
    gq_snapshot_kind kind;
    char *ns; /* NULL for cluster-scoped kinds */
    char *name;
    json_object *obj;
} entry;

struct gq_snapshot {
    entry *e;
    size_t n, cap;
    uint64_t rv; /* the last resourceVersion given */
};

gq_code gq_snapshot_new(gq_snapshot **out, gq_err *err)
{
    gq_snapshot *m = calloc(1, sizeof(*m));
    if (!m)
        return gq_err_oom(err);
    m->rv = 1000;
    *out = m;
    return GQ_OK;
}

void gq_snapshot_free(gq_snapshot *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].ns);
        free(m->e[i].name);
        json_object_put(m->e[i].obj);
    }
    free(m->e);
    free(m);
}

static int kind_of(const char *kind)
{
    for (int k = 0; k < GQ_SNAP_KINDS; k++)
        if (kind && !strcmp(kind, kind_names[k]))
            return k;
    return -1;
}

static json_object *copy(json_object *o)
{
    json_object *c = NULL;
    if (json_object_deep_copy(o, &c, NULL))
        return NULL;
    return c;
}

static entry *find(const gq_snapshot *m, gq_snapshot_kind kind, const char *ns, const char *name)
{
    for (size_t i = 0; i < m->n; i++) {
        entry *e = &m->e[i];
        if (e->kind == kind && !strcmp(e->name, name) && !strcmp(e->ns ? e->ns : "", ns ? ns : ""))
            return e;
    }
    return NULL;
}

static gq_snapshot_kind quota_kind(gq_quota_kind kind)
{
    return kind == GQ_QUOTA_TENANT ? GQ_SNAP_TENANT : GQ_SNAP_QUOTA;
}

/* Stamp a fresh resourceVersion on obj. */
static gq_code stamp(gq_snapshot *m, json_object *obj)
{
    char buf[32];
    json_object *meta = gq_json_member(obj, "metadata");
    snprintf(buf, sizeof(buf), "%" PRIu64, ++m->rv);
    json_object *s = json_object_new_string(buf);
    if (!s || json_object_object_add(meta, "resourceVersion", s)) {
        json_object_put(s);
        return GQ_ENOMEM;
    }
    return GQ_OK;
}

/* A new entry for object c (taken on success) of kind k named ns/name;
 * GQ_ENOMEM or GQ_OK. */
static gq_code append_entry(gq_snapshot *m, gq_snapshot_kind k, const char *ns, const char *name,
                            json_object *c)
{
    entry *grown = gq_grow(m->e, &m->cap, m->n, sizeof(*grown), 16);
    if (!grown)
        return GQ_ENOMEM;
    m->e = grown;
    entry *ne = &m->e[m->n];
    ne->kind = k;
    ne->name = strdup(name);
    ne->ns = ns ? strdup(ns) : NULL;
    if (!ne->name || (ns && !ne->ns)) {
        free(ne->name);
        free(ne->ns);
        return GQ_ENOMEM;
    }
    ne->obj = c;
    m->n++;
    return GQ_OK;
}

/* c (taken on success) into m as kind k named ns/name, replacing what
 * has that name. */
static gq_code put(gq_snapshot *m, gq_snapshot_kind k, const char *ns, const char *name,
                   json_object *c, gq_err *err)
{
    gq_code rc = stamp(m, c);
    entry *e = rc ? NULL : find(m, k, ns, name);
    if (rc)
        return gq_err_oom(err);
    if (e) {
        json_object_put(e->obj);
        e->obj = c;
        return GQ_OK;
    }
    if (m->n >= GQ_SNAPSHOT_MAX_OBJECTS)
        return gq_err_set(err, GQ_ELIMIT, "more than %d objects", GQ_SNAPSHOT_MAX_OBJECTS);
    if ((rc = append_entry(m, k, ns, name, c)))
        return gq_err_oom(err);
    return GQ_OK;
}

gq_code gq_snapshot_apply(gq_snapshot *m, json_object *obj, gq_err *err)
{
    const char *kname = gq_json_get_string(obj, "kind");
    int k = kind_of(kname);
    json_object *meta = gq_json_member(obj, "metadata");
    const char *name = gq_json_get_string(meta, "name");
    const char *ns = gq_json_get_string(meta, "namespace");
    if (k < 0)
        return gq_err_set(err, GQ_EINVAL, "kind %s cannot be stored", kname ? kname : "(none)");
    if (!name || !name[0])
        return gq_err_set(err, GQ_EINVAL, "%s without metadata.name", kname);
    bool namespaced = k == GQ_SNAP_QUOTA || k == GQ_SNAP_LIMITRANGE;
    if (namespaced && (!ns || !ns[0]))
        return gq_err_set(err, GQ_EINVAL, "%s %s without metadata.namespace", kname, name);
    json_object *c = copy(obj);
    if (!c)
        return gq_err_oom(err);
    gq_code rc = put(m, (gq_snapshot_kind)k, namespaced ? ns : NULL, name, c, err);
    if (rc)
        json_object_put(c);
    return rc;
}

/* A copy of the object of kind k named ns/name: GQ_ENOTFOUND, GQ_ENOMEM or
 * GQ_OK. */
static gq_code get_copy(const gq_snapshot *m, gq_snapshot_kind k, const char *ns, const char *name,
                        json_object **out, gq_err *err)
{
    entry *e = find(m, k, ns, name);
    json_object *c = e ? copy(e->obj) : NULL;
    if (!e)
        return gq_err_set(err, GQ_ENOTFOUND, "%s %s not found", kind_names[k], name);
    if (!c)
        return gq_err_oom(err);
    *out = c;
    return GQ_OK;
}

gq_code gq_snapshot_get(const gq_snapshot *m, const char *kind, const char *ns, const char *name,
                        json_object **out, gq_err *err)
{
    int k = kind_of(kind);
    if (k < 0 || !name)
        return gq_err_set(err, GQ_EINVAL, "unknown kind %s", kind ? kind : "(none)");
    return get_copy(m, (gq_snapshot_kind)k, ns, name, out, err);
}

gq_code gq_snapshot_get_quota(const gq_snapshot *m, gq_quota_kind kind, const char *ns,
                              const char *name, json_object **out, gq_err *err)
{
    return get_copy(m, quota_kind(kind), ns, name, out, err);
}

gq_code gq_snapshot_list(const gq_snapshot *m, gq_snapshot_kind kind, const char *ns,
                         json_object **out, gq_err *err)
{
    json_object *arr = json_object_new_array();
    if (!arr)
        return gq_err_oom(err);
    if (kind == GQ_SNAP_TENANT)
        ns = NULL;
    for (size_t i = 0; i < m->n; i++) {
        entry *e = &m->e[i];
        if (e->kind != kind || (ns && strcmp(e->ns, ns)))
            continue;
        json_object *c = copy(e->obj);
        if (!c || json_object_array_add(arr, c)) {
            json_object_put(c);
            json_object_put(arr);
            return gq_err_oom(err);
        }
    }
    *out = arr;
    return GQ_OK;
}

gq_code gq_snapshot_namespace_labels(const gq_snapshot *m, const char *ns, json_object **out,
                                     gq_err *err)
{
    json_object *c = NULL;
    entry *e = find(m, GQ_SNAP_NAMESPACE, NULL, ns);
    json_object *labels = e ? gq_json_member(gq_json_member(e->obj, "metadata"), "labels") : NULL;
    if (labels && !(c = copy(labels)))
        return gq_err_oom(err);
    *out = c;
    return GQ_OK;
}

gq_code gq_snapshot_update_status(gq_snapshot *m, gq_quota_kind kind, const char *ns,
                                  const char *name, json_object *obj, json_object **out,
                                  gq_err *err)
{
    const char *rv = gq_json_get_string(gq_json_member(obj, "metadata"), "resourceVersion");
    json_object *status = NULL;
    entry *e = find(m, quota_kind(kind), ns, name);
    if (!e)
        return gq_err_set(err, GQ_ENOTFOUND, "%s %s not found", kind_names[quota_kind(kind)], name);
    const char *cur = gq_json_get_string(gq_json_member(e->obj, "metadata"), "resourceVersion");
    if (!rv || !cur || strcmp(rv, cur))
        return gq_err_set(err, GQ_ECONFLICT,
                          "Operation cannot be fulfilled on %s \"%s\": the object has been "
                          "modified; please apply your changes to the latest version and try "
                          "again",
                          kind == GQ_QUOTA_TENANT ? "gputenantquotas.gpuquota.io"
                                                  : "gpuquotas.gpuquota.io",
                          name);
    json_object *src = gq_json_member(obj, "status");
    if (src && !(status = copy(src)))
        return gq_err_oom(err);
    if (status)
        json_object_object_add(e->obj, "status", status);
    else
        json_object_object_del(e->obj, "status");
    if (stamp(m, e->obj))
        return gq_err_oom(err);
    if (out)
        *out = copy(e->obj); /* NULL on allocation failure: the caller reads again */
    return GQ_OK;
}

/* ---- state files ---------------------------------------------------------- */

typedef struct flat {
    json_object **o; /* borrowed */
    size_t n, cap;
} flat;

static gq_code flat_push(flat *f, json_object *o, gq_err *err)
{
    json_object **grown = gq_grow(f->o, &f->cap, f->n, sizeof(*grown), 32);
    if (!grown)
        return gq_err_oom(err);
    f->o = grown;
    f->o[f->n++] = o;
    return GQ_OK;
}

/* Documents with Lists expanded (one level, as kubectl writes them). */
static gq_code flatten(json_object *const *docs, size_t n, flat *f, gq_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const char *kind = gq_json_get_string(docs[i], "kind");
        if (!json_object_is_type(docs[i], json_type_object))
            return gq_err_set(err, GQ_EINVAL, "document %zu is not an object", i + 1);
        size_t kl = kind ? strlen(kind) : 0;
        if (!kind || (kl >= 4 && !strcmp(kind + kl - 4, "List"))) {
            json_object *items = gq_json_member(docs[i], "items");
            if (!kind || !json_object_is_type(items, json_type_array))
                return gq_err_set(err, GQ_EINVAL, "document %zu has no kind", i + 1);
            for (size_t j = 0; j < json_object_array_length(items); j++) {
                json_object *it = json_object_array_get_idx(items, j);
                if (!json_object_is_type(it, json_type_object))
                    return gq_err_set(err, GQ_EINVAL, "%s item %zu is not an object", kind, j);
                gq_code rc = flat_push(f, it, err);
                if (rc)
                    return rc;
            }
            continue;
        }
        gq_code rc = flat_push(f, docs[i], err);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

static const char *obj_ns(json_object *o)
{
    const char *ns = gq_json_get_string(gq_json_member(o, "metadata"), "namespace");
    return ns && ns[0] ? ns : "default";
}

static const char *obj_name(json_object *o)
{
    const char *n = gq_json_get_string(gq_json_member(o, "metadata"), "name");
    if (!n)
        n = gq_json_get_string(gq_json_member(o, "metadata"), "generateName");
    return n ? n : "(unnamed)";
}

static json_object *ns_labels_of(const flat *f, const char *ns)
{
    for (size_t i = 0; i < f->n; i++) {
        const char *kind = gq_json_get_string(f->o[i], "kind");
        if (kind && !strcmp(kind, "Namespace") && !strcmp(obj_name(f->o[i]), ns))
            return gq_json_member(gq_json_member(f->o[i], "metadata"), "labels");
    }
    return NULL;
}

/* A copy of quota object qo with status.used (and, for tenants,
 * status.namespaces; for per-model limits, status.usedByModel) recounted
 * from pods. */
static gq_code recounted(json_object *qo, const gq_usage_pod *pods, size_t n_pods,
                         json_object **out, gq_err *err)
{
    gq_quota *q = NULL;
    gq_usage u;
    gq_quota_status st;
    json_object *c = NULL, *status = NULL;
    gq_usage_init(&u);
    gq_quota_status_init(&st);
    gq_code rc = gq_quota_parse(qo, &q, err);
    if (!rc)
        rc = gq_quota_recount(q, pods, n_pods, &u, err);
    if (rc) {
        gq_err_prefix(err, "%s %s", gq_json_get_string(qo, "kind"), obj_name(qo));
        goto out;
    }
    if ((rc = gq_quota_status_decode(gq_json_member(qo, "status"), GQ_STATUS_CHARGE, &st, err)) ||
        (rc = gq_usage_to_status(q, &u, &st, err)))
        goto out;
    rc = GQ_ENOMEM;
    if (!(c = copy(qo)) || !(status = gq_quota_status_encode(&st)))
        goto out;
    if (json_object_object_add(c, "status", status)) {
        json_object_put(status);
        goto out;
    }
    *out = c;
    c = NULL;
    rc = GQ_OK;
out:
    if (rc == GQ_ENOMEM)
        gq_err_oom(err);
    json_object_put(c);
    gq_quota_status_dispose(&st);
    gq_usage_dispose(&u);
    gq_quota_free(q);
    return rc;
}

/* The Pods of f, decoded into pods[0..*n_pods) as they count at now. */
static gq_code decode_pods(const gq_config *cfg, const flat *f, int64_t now, gq_usage_pod *pods,
                           size_t *n_pods, gq_err *err)
{
    gq_code rc = GQ_OK;
    gq_pod gp;
    gq_pod_init(&gp);
    for (size_t i = 0; i < f->n; i++) {
        json_object *o = f->o[i];
        const char *kind = gq_json_get_string(o, "kind");
        if (!kind || strcmp(kind, "Pod"))
            continue;
        gq_usage_pod *p = &pods[*n_pods];
        const char *ns = obj_ns(o);
        if ((rc = gq_pod_decode(cfg, o, &(gq_pod_scope){.ns = ns}, &gp, err))) {
            gq_err_prefix(err, "Pod %s/%s", ns, obj_name(o));
            break;
        }
        p->facts = gp.facts;
        p->facts.terminal = !gq_pod_counts(gp.facts.terminal, gp.delete_at, now);
        p->queued = gp.gate_index >= 0;
        p->charge = gp.charge;
        if (p->facts.terminal)
            gq_charge_from_cost(NULL, true, &p->charge);
        p->ns_labels = ns_labels_of(f, ns);
        (*n_pods)++;
    }
    gq_pod_dispose(&gp);
    return rc;
}

/* Object o (not a Pod) into the store: a GPULimitRange checked, a quota
 * with its usage recounted from pods[0..n_pods). */
static gq_code store_object(gq_snapshot *m, json_object *o, const gq_usage_pod *pods, size_t n_pods,
                            gq_err *err)
{
    json_object *c = NULL;
    const char *kind = gq_json_get_string(o, "kind");
    int k = kind_of(kind);
    gq_code rc;
    if (k < 0)
        return gq_err_set(err, GQ_EINVAL, "%s %s: kind cannot be used as state",
                          kind ? kind : "(no kind)", obj_name(o));
    if (k == GQ_SNAP_LIMITRANGE) {
        gq_limit_range *lr = NULL;
        rc = gq_limit_range_parse(o, &lr, err);
        gq_limit_range_free(lr);
        if (rc) {
            gq_err_prefix(err, "%s %s", kind, obj_name(o));
            return rc;
        }
    }
    if ((k == GQ_SNAP_QUOTA || k == GQ_SNAP_TENANT) && (rc = recounted(o, pods, n_pods, &c, err)))
        return rc;
    rc = gq_snapshot_apply(m, c ? c : o, err);
    json_object_put(c);
    return rc;
}

gq_code gq_snapshot_load_state(gq_snapshot *m, const gq_config *cfg, json_object *const *docs,
                               size_t n, int64_t now, gq_err *err)
{
    flat f = {NULL, 0, 0};
    gq_usage_pod *pods = NULL;
    size_t n_pods = 0;
    gq_code rc = flatten(docs, n, &f, err);
    if (rc)
        goto out;
    if (f.n && !(pods = calloc(f.n, sizeof(*pods)))) {
        rc = gq_err_oom(err);
        goto out;
    }
    if ((rc = decode_pods(cfg, &f, now, pods, &n_pods, err)))
        goto out;
    for (size_t i = 0; i < f.n && !rc; i++) {
        const char *kind = gq_json_get_string(f.o[i], "kind");
        if (!kind || strcmp(kind, "Pod"))
            rc = store_object(m, f.o[i], pods, n_pods, err);
    }
out:
    free(pods);
    free(f.o);
    return rc;
}

/* ---- the offline verdict ------------------------------------------------------ */

/* Read what a asks for from m. Only memory can fail here. */
static gq_code answer(const gq_snapshot *m, gq_admission *a, gq_err *err)
{
    gq_admission_snapshot *s = &a->snap;
    gq_code rc = GQ_OK;
    if (a->need & GQ_NEED_LIMIT_RANGES) {
        rc = gq_snapshot_list(m, GQ_SNAP_LIMITRANGE, a->in.ns, &s->limit_ranges, err);
        s->read |= GQ_NEED_LIMIT_RANGES;
    } else if (a->need & GQ_NEED_QUOTAS) {
        if (!(rc = gq_snapshot_namespace_labels(m, a->in.ns, &s->ns_labels, err)) &&
            !(rc = gq_snapshot_list(m, GQ_SNAP_QUOTA, a->in.ns, &s->quotas, err)))
            rc = gq_snapshot_list(m, GQ_SNAP_TENANT, NULL, &s->tenant_quotas, err);
        s->read |= GQ_NEED_QUOTAS;
    } else if (a->need & GQ_NEED_GROUP_PODS) {
        s->read |= GQ_NEED_GROUP_PODS; /* a snapshot holds no pods: no members */
    } else {
        const gq_quota *q = a->set[a->need_fresh];
        rc = gq_snapshot_get_quota(m, q->kind, q->namespace_, q->name, &s->fresh[a->need_fresh],
                                   err);
        if (rc == GQ_ENOTFOUND) {
            gq_err_clear(err);
            rc = GQ_OK; /* gone: NULL */
        }
        s->fresh_read[a->need_fresh] = true;
    }
    return rc;
}

/* Check quota cq (to charge) of a on m; false when it denies. */
static bool check_one(const gq_snapshot *m, gq_admission *a, const gq_quota *cq, bool *counts,
                      gq_code *rc)
{
    gq_quota *fresh = NULL;
    gq_err e;
    char label[2 * GQ_CRD_MAX_STRING];
    gq_err_clear(&e);
    entry *en = find(m, quota_kind(cq->kind), cq->namespace_, cq->name);
    *counts = false;
    if (!en)
        return true; /* gone: nothing to charge */
    *rc = gq_quota_parse(en->obj, &fresh, &e);
    if (!*rc)
        *rc = gq_admission_check_fresh(a, fresh, a->in.now, counts, &e);
    gq_quota_free(fresh);
    if (*rc == GQ_OK || *rc == GQ_ENOMEM)
        return *rc == GQ_OK;
    gq_quota_label(cq, label, sizeof(label));
    if (*rc == GQ_EDENIED)
        gq_admission_deny(a, GQ_EDENIED, "%s", e.msg);
    else
        gq_admission_deny(a, *rc, "gpuquota could not evaluate quota %s: %s", label, e.msg);
    *rc = GQ_OK;
    return false;
}

gq_code gq_snapshot_decide(const gq_config *cfg, const gq_snapshot *m, gq_admission *a,
                           void (*counted)(void *ud, const gq_quota *q), void *ud, gq_err *err)
{
    gq_code rc;
    while (!(rc = gq_admission_decide(cfg, a, err)) && a->need)
        if ((rc = answer(m, a, err)))
            return rc;
    if (rc || !a->verdict.allowed || !a->must_charge)
        return rc;
    for (size_t i = 0; i < a->n_charge; i++) {
        bool counts;
        if (!check_one(m, a, a->to_charge[i], &counts, &rc))
            return rc == GQ_ENOMEM ? gq_err_oom(err) : GQ_OK;
        if (counts && counted)
            counted(ud, a->to_charge[i]);
    }
    return GQ_OK;
}
