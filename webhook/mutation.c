#include "webhook/mutation.h"

#include <stdlib.h>
#include <string.h>

#include "quota/podcost.h"
#include "quota/policy.h"
#include "quota/rewrite.h"

static bool is_pod_create(const wh_review_request *req)
{
    return req->operation == WH_OP_CREATE && !strcmp(req->kind_group, "") &&
           !strcmp(req->kind, "Pod") && !strcmp(req->resource, "pods") && !req->sub_resource[0];
}

/* Fill resp from the rewrite: patch, warnings, auditAnnotations. */
static gq_code answer(const gq_config *cfg, const gq_pod_cost *cost, const gq_rewrite *rw,
                      wh_review_response *resp)
{
    gq_code rc;
    char *text = NULL;
    size_t len = 0;
    if ((rc = gq_patch_to_text(rw->patch, &text, &len)))
        return rc;
    rc = wh_review_response_set_patch(resp, text, len);
    free(text);
    if (rc)
        return rc;
    for (size_t i = 0; i < rw->n_warnings; i++)
        if ((rc = wh_review_response_add_warning(resp, rw->warnings[i])))
            return rc;
    resp->dropped_warnings += rw->dropped_warnings;
    if (!cost->gpu_pods)
        return GQ_OK;
    if ((rc = wh_review_response_set_audit(resp, "charged", rw->charged)) ||
        (rc = wh_review_response_set_audit(resp, "backend", gq_backend_name(cfg->backend))))
        return rc;
    if (cost->model)
        rc = wh_review_response_set_audit(resp, "gpu-model", cost->model->name);
    return rc;
}

void wh_mutate_info_init(wh_mutate_info *info)
{
    memset(info, 0, sizeof(*info));
}

void wh_mutate_info_dispose(wh_mutate_info *info)
{
    if (!info)
        return;
    json_object_put(info->request);
    json_object_put(info->rewrite);
    wh_mutate_info_init(info);
}

bool wh_mutate_applies(const gq_config *cfg, const wh_review_request *req)
{
    return is_pod_create(req) && req->object && !gq_config_is_exempt(cfg, req->namespace);
}

gq_code wh_limit_ranges_fetch(const wh_limit_range_source *src, const char *ns,
                              gq_limit_range ***out, size_t *n_out, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *arr = NULL;
    gq_limit_range **lrs = NULL;
    size_t n = 0;
    if (!src || !src->list)
        goto done;
    if ((rc = src->list(src->ctx, ns, &arr, err))) {
        gq_err_prefix(err, "cannot read the GPULimitRanges of %s", ns);
        return rc;
    }
    if (arr && !json_object_is_type(arr, json_type_array)) {
        rc = gq_err_set(err, GQ_EINVAL, "GPULimitRanges of %s: not a list", ns);
        goto out;
    }
    n = arr ? json_object_array_length(arr) : 0;
    if (n && !(lrs = calloc(n, sizeof(*lrs)))) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = gq_limit_range_parse(json_object_array_get_idx(arr, i), &lrs[i], err))) {
            gq_err_prefix(err, "GPULimitRange %zu of namespace %s", i, ns);
            goto out;
        }
    }
done:
    *out = lrs;
    *n_out = n;
    lrs = NULL;
out:
    wh_limit_ranges_free(lrs, n);
    json_object_put(arr);
    return rc;
}

void wh_limit_ranges_free(gq_limit_range **lrs, size_t n)
{
    for (size_t i = 0; lrs && i < n; i++)
        gq_limit_range_free(lrs[i]);
    free(lrs);
}

gq_code wh_mutate_review(const gq_config *cfg, const wh_review_request *req,
                         const gq_limit_range *const *lrs, size_t n_lrs, wh_review_response *resp,
                         gq_err *err)
{
    return wh_mutate_review_info(cfg, req, lrs, n_lrs, resp, NULL, err);
}

/* Where a decision gets the namespace's GPULimitRanges: given (lrs), or
 * read from src once the pod turns out to ask for a GPU. */
typedef struct lr_input {
    const gq_limit_range *const *lrs;
    size_t n_lrs;
    const wh_limit_range_source *src;
    gq_limit_range **fetched; /* owned: what src returned */
} lr_input;

static gq_code mutate(const gq_config *cfg, const wh_review_request *req, lr_input *in,
                      wh_review_response *resp, wh_mutate_info *info, gq_err *err);

gq_code wh_mutate_review_info(const gq_config *cfg, const wh_review_request *req,
                              const gq_limit_range *const *lrs, size_t n_lrs,
                              wh_review_response *resp, wh_mutate_info *info, gq_err *err)
{
    lr_input in = {lrs, n_lrs, NULL, NULL};
    return mutate(cfg, req, &in, resp, info, err);
}

gq_code wh_mutate_review_src(const gq_config *cfg, const wh_review_request *req,
                             const wh_limit_range_source *src, wh_review_response *resp,
                             wh_mutate_info *info, gq_err *err)
{
    lr_input in = {NULL, 0, src, NULL};
    gq_code rc = mutate(cfg, req, &in, resp, info, err);
    wh_limit_ranges_free(in.fetched, in.n_lrs);
    return rc;
}

static gq_code mutate(const gq_config *cfg, const wh_review_request *req, lr_input *in,
                      wh_review_response *resp, wh_mutate_info *info, gq_err *err)
{
    gq_code rc;
    wh_review_response r;
    gq_pod_cost cost0, cost;
    gq_rewrite rw;
    gq_ctr_default *defs = NULL;
    size_t n_defs = 0;
    json_object *defaulted = NULL;
    gq_err why;
    wh_mutate_info got;
    wh_mutate_info_init(&got);
    gq_pod_cost_init(&cost0);
    gq_pod_cost_init(&cost);
    gq_rewrite_init(&rw);
    gq_err_clear(&why);

    if ((rc = wh_review_response_init(&r, req->version, req->uid)))
        return gq_err_set(err, rc, "out of memory");
    if (!is_pod_create(req) || gq_config_is_exempt(cfg, req->namespace))
        goto done;
    if (!req->object) {
        rc = wh_review_response_deny(&r, 400, "BadRequest", "request.object is missing");
        goto settle;
    }
    /* Defaults are decided on the pod as sent, then charged on the pod they
     * produce, so the rewrite and the validating webhook agree. */
    json_object *pod = req->object;
    if ((rc = gq_pod_cost_compute(cfg, pod, &cost0, &why)))
        goto deny;
    if (!cost0.gpu_pods)
        goto settle; /* no GPU: nothing to read, nothing to patch */
    if (in->src) {
        /* Read only for pods that ask for a GPU: a policy that cannot be
         * read then fails closed without touching anyone else's pods. */
        rc = wh_limit_ranges_fetch(in->src, req->namespace, &in->fetched, &in->n_lrs, err);
        if (rc) {
            wh_review_response_dispose(&r);
            goto out;
        }
        in->lrs = (const gq_limit_range *const *)in->fetched;
    }
    const gq_limit_range *const *lrs = in->lrs;
    size_t n_lrs = in->n_lrs;
    gq_cost_scope scope = {lrs, n_lrs};
    /* Whole GPUs of unknown model cost the largest model the namespace
     * allows, which only its GPULimitRanges tell. */
    if (cost0.priced_unknown && n_lrs &&
        (rc = gq_pod_cost_compute_in(cfg, pod, &scope, &cost0, &why)))
        goto deny;
    if ((rc = gq_limit_defaults(pod, &cost0, lrs, n_lrs, &defs, &n_defs, &why)))
        goto deny;
    if (n_defs) {
        if ((rc = gq_pod_apply_defaults(pod, defs, n_defs, &defaulted, &why)) ||
            (rc = gq_pod_cost_compute_in(cfg, defaulted, &scope, &cost, &why)))
            goto deny;
    }
    /* No reservation annotation: kube-apiserver gives a reinvocation a fresh
     * request uid, so stamping it would never be a no-op. /validate keys the
     * charge by the pod's uid, which mutating webhooks do not see yet. */
    gq_rewrite_opts opts = {.defaults = defs, .n_defaults = n_defs};
    const gq_pod_cost *use = n_defs ? &cost : &cost0;
    if ((rc = gq_rewrite_pod(cfg, pod, use, &opts, &rw, &why)))
        goto deny;
    rc = answer(cfg, use, &rw, &r);
    if (!rc && n_defs && defs[0].limit_range)
        rc = wh_review_response_set_audit(&r, "gpu-limit-range", defs[0].limit_range);
    if (!rc && use->gpu_pods) {
        gq_charge_from_cost(use, gq_pod_is_terminal(pod), &got.charge);
        got.has_charge = true;
        got.request = rw.originals;
        got.rewrite = rw.changes;
        rw.originals = rw.changes = NULL;
    }
    goto settle;
deny:
    if (rc == GQ_ENOMEM)
        goto settle;
    rc = wh_review_response_deny(&r, 403, "Forbidden", why.msg);
settle:
    if (rc) {
        gq_err_set(err, rc, "%s", rc == GQ_ENOMEM ? "out of memory" : gq_strerror(rc));
        wh_review_response_dispose(&r);
        goto out;
    }
done:
    *resp = r;
    if (info) {
        wh_mutate_info_dispose(info);
        *info = got;
        wh_mutate_info_init(&got);
    }
    rc = GQ_OK;
out:
    wh_mutate_info_dispose(&got);
    json_object_put(defaulted);
    free(defs);
    gq_rewrite_dispose(&rw);
    gq_pod_cost_dispose(&cost);
    gq_pod_cost_dispose(&cost0);
    return rc;
}
