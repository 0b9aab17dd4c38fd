/* What the controller core's tests share: a default configuration for the
 * group (setup/teardown), pods built from a pod_spec with the admission
 * record gpuquota writes, stored as records; GPUQuota and GPUTenantQuota
 * objects; the reconcile of one quota. JSON is written with ' for ".
 * Include after <cmocka.h>. */
#ifndef GQ_TEST_CTL_FIXTURE_H
#define GQ_TEST_CTL_FIXTURE_H

#include <stdio.h>

#include "support/testjson.h"

#include "controller/ctl.h"
#include "quota/record.h"

#define GI (1024LL * 1024 * 1024)
#define NOW 1795273565LL /* 2026-11-21T15:06:05Z */
#define NOW_S "2026-11-21T15:06:05Z"

static gq_config *g_cfg;

typedef struct pod_spec {
    const char *ns, *name;
    const char *mem;     /* gpuquota.io/gpu-memory limit; NULL: CPU only */
    int whole;           /* nvidia.com/gpu: N exclusive (when mem is NULL) */
    const char *phase;   /* NULL: Running */
    const char *pc;      /* priorityClassName */
    int deadline;        /* activeDeadlineSeconds when > 0 */
    const char *deleted; /* deletionTimestamp */
    int grace;           /* deletionGracePeriodSeconds */
    const char *uid;     /* metadata.uid (the reservation key); NULL: "uid-NAME" */
    const char *ann;     /* a gpuquota.io/reservation annotation (must be ignored) */
    const char *model;   /* gpuquota.io/gpu-model (not with ann) */
    bool raw;            /* never admitted by gpuquota: no admission record */
} pod_spec;

/* Give pod the admission record gpuquota's mutating webhook writes: what it
 * costs now, pinned as it is pinned, in the scope it is in. */
static inline void admit_record(json_object *pod)
{
    gq_pod_cost cost;
    gq_pod_facts facts;
    gq_pod_record rec;
    gq_err err;
    char text[GQ_RECORD_MAX];
    gq_pod_cost_init(&cost);
    if (gq_pod_cost_compute(g_cfg, pod, &cost, &err) != GQ_OK || !cost.gpu_pods ||
        gq_pod_facts_from_json(pod, "", &facts, &err) != GQ_OK) {
        gq_pod_cost_dispose(&cost);
        return;
    }
    gq_pod_record_make(&cost, gq_pod_model(&cost), facts.terminating, &rec);
    gq_pod_record_format(&rec, text);
    json_object *meta = json_object_object_get(pod, "metadata"), *ann = NULL;
    if (!json_object_object_get_ex(meta, "annotations", &ann)) {
        ann = json_object_new_object();
        json_object_object_add(meta, "annotations", ann);
    }
    json_object_object_add(ann, GQ_ANN_ADMISSION, json_object_new_string(text));
    gq_pod_cost_dispose(&cost);
}

static inline json_object *pod_json(const pod_spec *p)
{
    char buf[2048], res[256] = "{}", meta_extra[512] = "", spec_extra[256] = "";
    if (p->mem)
        snprintf(res, sizeof res, "{'limits':{'gpuquota.io/gpu-memory':'%s'}}", p->mem);
    else if (p->whole)
        snprintf(res, sizeof res, "{'limits':{'nvidia.com/gpu':'%d'}}", p->whole);
    size_t n = 0;
    if (p->uid)
        n += (size_t)snprintf(meta_extra + n, sizeof meta_extra - n, ",'uid':'%s'", p->uid);
    else
        n += (size_t)snprintf(meta_extra + n, sizeof meta_extra - n, ",'uid':'uid-%s'", p->name);
    if (p->ann)
        n += (size_t)snprintf(meta_extra + n, sizeof meta_extra - n,
                              ",'annotations':{'gpuquota.io/reservation':'%s'}", p->ann);
    else if (p->model)
        n += (size_t)snprintf(meta_extra + n, sizeof meta_extra - n,
                              ",'annotations':{'gpuquota.io/gpu-model':'%s'}", p->model);
    if (p->deleted)
        n += (size_t)snprintf(meta_extra + n, sizeof meta_extra - n,
                              ",'deletionTimestamp':'%s','deletionGracePeriodSeconds':%d",
                              p->deleted, p->grace);
    n = 0;
    if (p->pc)
        n += (size_t)snprintf(spec_extra + n, sizeof spec_extra - n, ",'priorityClassName':'%s'",
                              p->pc);
    if (p->deadline)
        n += (size_t)snprintf(spec_extra + n, sizeof spec_extra - n, ",'activeDeadlineSeconds':%d",
                              p->deadline);
    snprintf(buf, sizeof buf,
             "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'%s','namespace':'%s'%s},"
             "'spec':{'containers':[{'name':'c','image':'i','resources':%s}]%s},"
             "'status':{'phase':'%s'}}",
             p->name, p->ns, meta_extra, res, spec_extra, p->phase ? p->phase : "Running");
    json_object *pod = J(buf);
    if (!p->raw)
        admit_record(pod);
    return pod;
}

/* Build, link and return the record (NULL for CPU-only pods). */
static inline ctl_pod *add_pod(ctl_podstore *s, const pod_spec *p)
{
    json_object *o = pod_json(p);
    ctl_pod *rec = (ctl_pod *)1;
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = ctl_pod_from_json(s, g_cfg, o, &rec, &err);
    json_object_put(o);
    if (rc)
        fail_msg("record: %s", err.msg);
    if (rec)
        ctl_podstore_link(s, rec);
    return rec;
}

static inline json_object *quota_json(const char *ns, const char *name, const char *spec,
                                      const char *status)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'%s',"
             "'namespace':'%s','generation':3},'spec':%s%s%s}",
             name, ns, spec, status ? ",'status':" : "", status ? status : "");
    return J(buf);
}

static inline json_object *tenant_json(const char *name, const char *spec)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{'name':"
             "'%s','generation':1},'spec':%s}",
             name, spec);
    return J(buf);
}

static inline void reconcile(ctl_podstore *s, json_object *q, int64_t now, ctl_result *r)
{
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = ctl_podstore_reconcile(s, q, now, r, &err);
    if (rc)
        fail_msg("reconcile: %s", err.msg);
}

static inline const char *status_str(ctl_result *r, const char *a, const char *b)
{
    json_object *x, *y;
    if (!json_object_object_get_ex(r->status, a, &x) || !json_object_object_get_ex(x, b, &y))
        return NULL;
    return json_object_get_string(y);
}

static inline int setup(void **state)
{
    (void)state;
    gq_err err;
    return gq_config_default(&g_cfg, &err) == GQ_OK ? 0 : -1;
}

static inline int teardown(void **state)
{
    (void)state;
    gq_config_free(g_cfg);
    return 0;
}

#endif
