#include "webhook/mutation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json_member.h"
#include "common/jsonutil.h"
#include "quota/claimcheck.h"
#include "quota/dra.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/podqueue.h"
#include "quota/policy.h"
#include "quota/rewrite.h"
#include "quota/update.h"

static bool is_pod_create(const wh_review_request *req)
{
    return req->operation == WH_OP_CREATE && !strcmp(req->kind_group, "") &&
           !strcmp(req->kind, "Pod") && !strcmp(req->resource, "pods") && !req->sub_resource[0];
}

static bool is_pod_update(const wh_review_request *req)
{
    return req->operation == WH_OP_UPDATE && !strcmp(req->kind_group, "") &&
           !strcmp(req->kind, "Pod") && !strcmp(req->resource, "pods") && !req->sub_resource[0];
}

/* A pod UPDATE sent as its author first wrote it (a re-apply): what
 * gpuquota rewrote at CREATE is put back (quota/update.h), so the update
 * changes only what may change. */
static gq_code restore_update(const wh_review_request *req, wh_review_response *r, gq_err *err)
{
    gq_patch *p = NULL;
    char *text = NULL;
    size_t len = 0;
    gq_code rc = gq_update_restore(req->old_object, req->object, &p, err);
    if (rc || !p)
        return rc;
    if (!(rc = gq_patch_to_text(p, &text, &len)) &&
        !(rc = wh_review_response_set_patch(r, text, len)))
        rc = wh_review_response_add_warning(
            r, "gpuquota kept the GPU request and model it wrote at creation (pods cannot resize)");
    free(text);
    gq_patch_free(p);
    if (rc)
        gq_err_set(err, rc, "out of memory");
    return rc;
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

gq_code wh_limit_ranges_fetch(const wh_store *src, const char *ns, gq_limit_range ***out,
                              size_t *n_out, gq_err *err)
{
    json_object *arr = NULL;
    size_t bad = SIZE_MAX;
    gq_code rc;
    if (!src || !src->list) {
        *out = NULL;
        *n_out = 0;
        return GQ_OK;
    }
    if ((rc = src->list(src->ctx, WH_LIST_LIMIT_RANGES, ns, &arr, err))) {
        gq_err_prefix(err, "cannot read the GPULimitRanges of %s", ns);
        return rc;
    }
    rc = gq_limit_range_list_parse(arr, out, n_out, &bad, err);
    json_object_put(arr);
    if (rc == GQ_EINVAL && bad == SIZE_MAX)
        gq_err_set(err, GQ_EINVAL, "GPULimitRanges of %s: not a list", ns);
    else if (rc && bad != SIZE_MAX)
        gq_err_prefix(err, "GPULimitRange %zu of namespace %s", bad, ns);
    return rc;
}

gq_code wh_mutate_result(const wh_review_request *req, const wh_review_response *resp,
                         json_object **patch, json_object **pod, gq_err *err)
{
    json_object *p = NULL, *made = NULL;
    gq_code rc = GQ_OK;
    if (resp->patch) {
        if (!(rc = gq_json_parse(resp->patch, resp->patch_len, GQ_JSON_DEFAULT_DEPTH, &p, err)))
            rc = gq_patch_apply(req->object, p, &made, err);
    } else if (!(p = json_object_new_array())) {
        rc = gq_err_oom(err);
    } else if (resp->allowed) {
        made = json_object_get(req->object);
    }
    if (rc) {
        json_object_put(p);
        return rc;
    }
    *patch = p;
    *pod = made;
    return GQ_OK;
}

void wh_limit_ranges_free(gq_limit_range **lrs, size_t n)
{
    gq_limit_range_list_free(lrs, n);
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
    const wh_store *src;
    gq_limit_range **fetched; /* owned: what src returned */
    bool have;                /* lrs is final */
} lr_input;

/* The namespace's GPULimitRanges into in (once). Errors of the source are
 * the caller's (the HTTP layer answers 500). */
static gq_code lr_load(lr_input *in, const char *ns, gq_err *err)
{
    if (in->have)
        return GQ_OK;
    if (in->src) {
        gq_code rc = wh_limit_ranges_fetch(in->src, ns, &in->fetched, &in->n_lrs, err);
        if (rc)
            return rc;
        in->lrs = (const gq_limit_range *const *)in->fetched;
    }
    in->have = true;
    return GQ_OK;
}

/* A pod under admission (quota/pod.h) and what it costs after the
 * namespace's GPULimitRange defaults. Owned by the caller: priced_init,
 * priced_dispose. */
typedef struct priced {
    gq_pod pod0, pod; /* as sent; after defaults (when n_defs) */
    gq_ctr_default *defs;
    size_t n_defs;
    json_object *defaulted;
} priced;

static void priced_init(priced *p)
{
    memset(p, 0, sizeof(*p));
    gq_pod_init(&p->pod0);
    gq_pod_init(&p->pod);
}

static void priced_dispose(priced *p)
{
    json_object_put(p->defaulted);
    free(p->defs);
    gq_pod_dispose(&p->pod);
    gq_pod_dispose(&p->pod0);
    priced_init(p);
}

static const gq_pod *priced_use(const priced *p)
{
    return p->n_defs ? &p->pod : &p->pod0;
}

/* Decode pod under admission in ns (pod0 of a priced, or its defaulted
 * form), within the GPULimitRanges when given. */
static gq_code decode(const gq_config *cfg, json_object *pod, const char *ns,
                      const gq_limit_range *const *lrs, size_t n_lrs, gq_pod *out, gq_err *why)
{
    gq_pod_scope scope = {.ns = ns, .admission = true, .lrs = lrs, .n_lrs = n_lrs};
    return gq_pod_decode(cfg, pod, &scope, out, why);
}

/* Price pod (pod0 decoded already) with the namespace's GPULimitRanges.
 * Defaults are decided on the pod as sent, then charged on the pod they
 * produce, so the rewrite and the validating webhook agree. */
static gq_code price(const gq_config *cfg, json_object *pod, const char *ns,
                     const gq_limit_range *const *lrs, size_t n_lrs, priced *p, gq_err *why)
{
    gq_code rc;
    /* Whole GPUs of unknown model cost the largest model the namespace
     * allows, which only its GPULimitRanges tell. */
    if (p->pod0.cost.priced_unknown && n_lrs &&
        (rc = decode(cfg, pod, ns, lrs, n_lrs, &p->pod0, why)))
        return rc;
    if ((rc = gq_limit_defaults(pod, &p->pod0.cost, lrs, n_lrs, &p->defs, &p->n_defs, why)))
        return rc;
    if (p->n_defs && ((rc = gq_pod_apply_defaults(pod, p->defs, p->n_defs, &p->defaulted, why)) ||
                      (rc = decode(cfg, p->defaulted, ns, lrs, n_lrs, &p->pod, why))))
        return rc;
    return GQ_OK;
}

/* The quotas that may govern a pod of ns, from src (none without it): those
 * covering ns, each read afresh when src can (caches keep no status). */
static gq_code quotas_load(const wh_store *src, const char *ns, gq_quota ***q, size_t *n,
                           json_object **ns_labels, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *qa = NULL, *ta = NULL;
    gq_quota **cached = NULL;
    size_t n_cached = 0;
    if (!src || !src->list || !src->namespace_labels)
        return GQ_OK;
    if ((rc = src->namespace_labels(src->ctx, ns, ns_labels, err)) ||
        (rc = src->list(src->ctx, WH_LIST_QUOTAS, ns, &qa, err)) ||
        (rc = src->list(src->ctx, WH_LIST_TENANT_QUOTAS, NULL, &ta, err))) {
        gq_err_prefix(err, "cannot read the quotas of %s", ns);
        goto out;
    }
    if ((rc = gq_quota_list_append(&cached, &n_cached, qa, NULL, err)) ||
        (rc = gq_quota_list_append(&cached, &n_cached, ta, NULL, err)))
        goto out;
    for (size_t i = 0; i < n_cached; i++) {
        gq_quota *c = cached[i];
        json_object *fresh = NULL, *one = NULL;
        if (!gq_quota_covers_namespace(c, ns, *ns_labels))
            continue;
        if (!src->get_quota) {
            /* No fresh reads: the cached object. */
            gq_quota **grown = realloc(*q, (*n + 1) * sizeof(*grown));
            if (!grown) {
                rc = gq_err_oom(err);
                goto out;
            }
            *q = grown;
            grown[(*n)++] = c;
            cached[i] = NULL;
            continue;
        }
        rc = src->get_quota(src->ctx, c->kind, c->namespace_, c->name, &fresh, err);
        if (rc == GQ_ENOTFOUND) { /* deleted since listed: governs nothing */
            rc = GQ_OK;
            continue;
        }
        if (!rc && (!(one = json_object_new_array()) || json_object_array_add(one, fresh)))
            rc = gq_err_oom(err);
        else if (!rc)
            fresh = NULL; /* one holds it */
        if (!rc)
            rc = gq_quota_list_append(q, n, one, NULL, err);
        json_object_put(one);
        json_object_put(fresh);
        if (rc)
            goto out;
    }
out:
    gq_quota_list_free(cached, n_cached);
    json_object_put(qa);
    json_object_put(ta);
    return rc;
}

/* One pod CREATE under mutation: what the steps of mutate share. */
typedef struct pod_mutation {
    const gq_config *cfg;
    const wh_review_request *req;
    lr_input *in;
    json_object *pod;        /* req->object (borrowed) */
    json_object *priced_pod; /* pod, pinned or claimed: the one priced */
    wh_review_response r;
    priced p;
    gq_rewrite rw;
    gq_err why; /* a denial's reason */
    wh_mutate_info got;
    const gq_model *choices[GQ_MAX_MODEL_CHOICES], *chosen;
    size_t n_choices;
    bool deferred;        /* the controller chooses the model when it ungates */
    json_object *pinned;  /* the pod with the chosen model (owned) */
    json_object *claims;  /* GQ_ANN_CLAIMS record (owned) */
    json_object *claimed; /* the pod with it (owned) */
    char *claims_text;
    gq_code rc;
} pod_mutation;

/* The models of a pod's choices its GPULimitRanges accept, with the charge
 * of each; why the others were refused. */
typedef struct model_options {
    gq_model_option v[GQ_MAX_MODEL_CHOICES];
    size_t n;
    char refused[GQ_ERR_MSG_MAX];
    size_t rlen;
} model_options;

/* The pod priced on each of its choices, in order; the models its
 * GPULimitRanges refuse are left out of o, their reasons kept. */
static gq_code price_choices(const pod_mutation *m, model_options *o, gq_err *err)
{
    const gq_config *cfg = m->cfg;
    const wh_review_request *req = m->req;
    const lr_input *in = m->in;
    gq_code rc;
    for (size_t i = 0; i < m->n_choices; i++) {
        json_object *copy = NULL;
        priced p;
        priced_init(&p);
        gq_err e;
        gq_err_clear(&e);
        if ((rc = gq_pod_with_model(req->object, m->choices[i]->name, &copy, err)))
            return rc;
        rc = decode(cfg, copy, req->namespace, NULL, 0, &p.pod0, &e);
        if (!rc)
            rc = price(cfg, copy, req->namespace, in->lrs, in->n_lrs, &p, &e);
        if (!rc)
            rc = gq_limit_validate(&priced_use(&p)->cost, req->namespace, in->lrs, in->n_lrs, &e);
        if (!rc) {
            o->v[o->n].model = m->choices[i]->name;
            o->v[o->n].charge = priced_use(&p)->charge;
            o->n++;
        } else if (rc != GQ_ENOMEM && o->rlen < sizeof(o->refused)) {
            int w = snprintf(o->refused + o->rlen, sizeof(o->refused) - o->rlen, "%s%s: %s",
                             o->rlen ? "; " : "", m->choices[i]->name, e.msg);
            if (w > 0)
                o->rlen += (size_t)w;
        }
        priced_dispose(&p);
        json_object_put(copy);
        if (rc == GQ_ENOMEM)
            return gq_err_set(err, rc, "out of memory");
    }
    return GQ_OK;
}

/* Of the options, the first whose charge fits every governing quota of the
 * cached state (gq_model_choose), into m->chosen; a denial in m->why. */
static gq_code choose_fitting(pod_mutation *m, const model_options *o, gq_err *err)
{
    const wh_review_request *req = m->req;
    gq_err *why = &m->why;
    size_t at = 0, n_q = 0;
    gq_quota **qs = NULL;
    json_object *ns_labels = NULL;
    gq_code rc;
    if ((rc = quotas_load(m->in->src, req->namespace, &qs, &n_q, &ns_labels, err)))
        goto out;
    gq_pod_facts facts;
    if ((rc = gq_pod_facts_from_json(req->object, req->namespace, &facts, why)))
        goto out;
    facts.terminal = gq_pod_is_terminal(req->object);
    gq_quota_snapshot snap = {.quotas = (const gq_quota *const *)qs,
                              .n = n_q,
                              .ns_labels = ns_labels,
                              .require_quota = m->cfg->require_quota,
                              .now = (int64_t)time(NULL)};
    rc = gq_model_choose(o->v, o->n, &snap, &facts, &at, why);
    if (rc == GQ_OK) {
        for (size_t i = 0; i < m->n_choices; i++)
            if (!strcmp(m->choices[i]->name, o->v[at].model))
                m->chosen = m->choices[i];
    } else if (rc == GQ_ENOMEM) {
        gq_err_set(err, rc, "out of memory");
    } else if (rc == GQ_EDENIED && o->rlen) {
        /* Say why the models the GPULimitRanges refused were not tried. */
        char msg[2 * GQ_ERR_MSG_MAX + 2]; /* gq_err_set cuts it to size */
        snprintf(msg, sizeof(msg), "%s; %s", why->msg, o->refused);
        gq_err_set(why, GQ_EDENIED, "%s", msg);
    }
out:
    gq_quota_list_free(qs, n_q);
    json_object_put(ns_labels);
    return rc;
}

/* A pod accepting choices[0..n) in order of preference: price it on each,
 * drop the models its GPULimitRanges refuse, and choose the first whose
 * charge fits every governing quota of the cached state (gq_model_choose).
 * GQ_OK with *chosen; GQ_EDENIED (or a pricing error) with why; other codes
 * are failures of the source, in err. The validating webhook charges the
 * choice as usual, so a race that fills the model meanwhile is a denial. */
static gq_code choose_model(pod_mutation *m, gq_err *err)
{
    model_options o = {.n = 0};
    gq_code rc = price_choices(m, &o, err);
    if (rc)
        return rc;
    if (!o.n)
        return gq_err_set(&m->why, GQ_EDENIED, "no accepted GPU model fits: %s", o.refused);
    return choose_fitting(m, &o, err);
}

/* gq_class_lookup over src: a fresh read of the DeviceClass; one that
 * cannot be read (or src cannot read classes) is UNKNOWN, so the claim is
 * unpriced and /validate refuses it where a quota governs. */
typedef struct class_reader {
    const gq_config *cfg;
    const wh_store *src;
} class_reader;

static gq_class_kind read_class_kind(void *ctx, const char *name)
{
    const class_reader *cr = ctx;
    json_object *dc = NULL;
    if (!cr->src->get_device_class || cr->src->get_device_class(cr->src->ctx, name, &dc, NULL))
        return GQ_CLASS_UNKNOWN;
    gq_class_kind k = gq_device_class_kind(cr->cfg, dc);
    json_object_put(dc);
    return k;
}

/* Pricing a pod's DRA claims: what each claim's step needs, and the record
 * so far. */
typedef struct claim_pricer {
    const gq_config *cfg;
    const wh_review_request *req;
    const wh_store *src;
    wh_review_response *r;
    gq_class_lookup classes;
    json_object *rec; /* the GQ_ANN_CLAIMS record (owned; NULL until one is priced) */
} claim_pricer;

/* rec[name] = {gpus, memory, model, and for a shared claim its name and
 * uid}; GQ_ENOMEM or GQ_OK. */
static gq_code add_claim_entry(claim_pricer *cp, const char *name, const gq_claim_cost *cc,
                               const char *cname, const char *uid)
{
    char mem[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(cc->gpu_memory, mem);
    json_object *one = json_object_new_object();
    if (!cp->rec)
        cp->rec = json_object_new_object();
    if (!one || !cp->rec || json_object_object_add(one, "gpus", json_object_new_int64(cc->gpus)) ||
        json_object_object_add(one, "memory", json_object_new_string(mem)) ||
        (cc->model &&
         json_object_object_add(one, "model", json_object_new_string(cc->model->name))) ||
        (cname && (json_object_object_add(one, "claim", json_object_new_string(cname)) ||
                   json_object_object_add(one, "uid", json_object_new_string(uid)))) ||
        json_object_object_add(cp->rec, name, one)) {
        json_object_put(one);
        return GQ_ENOMEM;
    }
    return GQ_OK;
}

/* One entry c of spec.resourceClaims: read, priced and recorded, or a
 * warning why it cannot be. Errors (to stop at) are the source's, in err,
 * or GQ_ENOMEM. */
static gq_code price_claim(claim_pricer *cp, json_object *c, gq_err *err)
{
    const wh_store *src = cp->src;
    json_object *obj = NULL, *cspec = NULL;
    const char *name = gq_json_get_string(c, "name"),
               *tname = gq_json_get_string(c, "resourceClaimTemplateName"),
               *cname = gq_json_get_string(c, "resourceClaimName");
    bool shared = !tname && cname;
    const char *kind = shared ? "ResourceClaim" : "ResourceClaimTemplate";
    gq_code (*get)(void *, const char *, const char *, json_object **, gq_err *) =
        shared ? src->get_claim : src->get_claim_template;
    char what[320];
    gq_err e;
    gq_err_clear(&e);
    if (!name || !(tname || cname) || !get)
        return GQ_OK;
    snprintf(what, sizeof(what), "%s \"%.253s\"", kind, shared ? cname : tname);
    gq_code rc = get(src->ctx, cp->req->namespace, shared ? cname : tname, &obj, err);
    if (rc == GQ_ENOTFOUND) {
        /* unpriced; the pod cannot start without it either */
        snprintf(e.msg, sizeof(e.msg),
                 "%s does not exist in namespace %s: gpuquota cannot price the pod's "
                 "claim \"%.63s\"",
                 what, cp->req->namespace, name);
        return wh_review_response_add_warning(cp->r, e.msg);
    }
    if (rc)
        return rc;
    gq_claim_cost cc;
    const char *uid = shared ? gq_json_get_string(gq_json_member(obj, "metadata"), "uid") : NULL;
    json_object_object_get_ex(obj, "spec", &cspec);
    if (!shared)
        json_object_object_get_ex(cspec, "spec", &cspec);
    if (shared && (!uid || !uid[0] || strlen(uid) > GQ_CLAIM_UID_MAX))
        rc = gq_err_set(&e, GQ_EINVAL, "%s: metadata.uid is missing or too long", what);
    else
        rc = gq_claim_spec_cost(cp->cfg, cspec, &cp->classes, what, &cc, &e);
    if (!rc)
        rc = add_claim_entry(cp, name, &cc, shared ? cname : NULL, uid);
    else if (rc != GQ_ENOMEM)
        rc = wh_review_response_add_warning(cp->r, e.msg);
    json_object_put(obj);
    return rc;
}

/* The GPU devices of the pod's DRA claims, read afresh from src: a
 * ResourceClaimTemplate (each pod gets a claim of its own) or a
 * ResourceClaim named directly (may be shared by pods; its entry also
 * records the claim's name and uid, so each quota charges it once). *out is
 * the GQ_ANN_CLAIMS record (NULL when nothing was priced); a claim that
 * cannot be read or priced gets a warning in r and no record, so /validate
 * refuses the pod where a quota governs. Errors of the source other than
 * not-found are returned in err. */
static gq_code price_claims(const gq_config *cfg, const wh_review_request *req, const wh_store *src,
                            wh_review_response *r, json_object **out, gq_err *err)
{
    json_object *spec = NULL, *claims = NULL;
    gq_code rc = GQ_OK;
    *out = NULL;
    if (!src || !json_object_object_get_ex(req->object, "spec", &spec) ||
        !json_object_object_get_ex(spec, "resourceClaims", &claims) ||
        !json_object_is_type(claims, json_type_array))
        return GQ_OK;
    size_t n = json_object_array_length(claims);
    if (!n || n > GQ_POD_MAX_CLAIMS)
        return GQ_OK;
    class_reader cr = {cfg, src};
    claim_pricer cp = {
        .cfg = cfg, .req = req, .src = src, .r = r, .classes = {&cr, read_class_kind}, .rec = NULL};
    for (size_t i = 0; i < n && !rc; i++)
        rc = price_claim(&cp, json_object_array_get_idx(claims, i), err);
    if (rc == GQ_ENOMEM)
        gq_err_set(err, rc, "out of memory");
    if (rc) {
        json_object_put(cp.rec);
        return rc;
    }
    *out = cp.rec;
    return GQ_OK;
}

/* A deep copy of pod carrying what the rewrite will write for its claims:
 * annotation GQ_ANN_CLAIMS = text and label gpuquota.io/managed, so the pod
 * is priced as /validate and the controller will price the rewritten one. */
static gq_code with_claims(json_object *pod, const char *text, json_object **out, gq_err *err)
{
    json_object *c = NULL, *meta, *map;
    if (json_object_deep_copy(pod, &c, NULL) || !json_object_object_get_ex(c, "metadata", &meta))
        goto oom;
    static const char *const maps[] = {"annotations", "labels"};
    for (int i = 0; i < 2; i++) {
        if (!json_object_object_get_ex(meta, maps[i], &map) ||
            !json_object_is_type(map, json_type_object)) {
            if (!(map = json_object_new_object()) || json_object_object_add(meta, maps[i], map))
                goto oom;
        }
        json_object *v = json_object_new_string(i ? "true" : text);
        if (!v || json_object_object_add(map, i ? GQ_LABEL_MANAGED : GQ_ANN_CLAIMS, v))
            goto oom;
    }
    *out = c;
    return GQ_OK;
oom:
    json_object_put(c);
    return gq_err_oom(err);
}

static gq_code mutate(const gq_config *cfg, const wh_review_request *req, lr_input *in,
                      wh_review_response *resp, wh_mutate_info *info, gq_err *err);

gq_code wh_mutate_review_info(const gq_config *cfg, const wh_review_request *req,
                              const gq_limit_range *const *lrs, size_t n_lrs,
                              wh_review_response *resp, wh_mutate_info *info, gq_err *err)
{
    lr_input in = {lrs, n_lrs, NULL, NULL, true};
    return mutate(cfg, req, &in, resp, info, err);
}

gq_code wh_mutate_review_store(const gq_config *cfg, const wh_review_request *req,
                               const wh_store *src, wh_review_response *resp, wh_mutate_info *info,
                               gq_err *err)
{
    lr_input in = {NULL, 0, src, NULL, false};
    gq_code rc = mutate(cfg, req, &in, resp, info, err);
    wh_limit_ranges_free(in.fetched, in.n_lrs);
    return rc;
}

/* Whether pod (charge) is governed by a quota that queues. */
static gq_code pod_queues(const wh_store *qs, const wh_review_request *req, json_object *pod,
                          const gq_amounts *charge, bool *out, gq_err *err)
{
    json_object *a = NULL, *t = NULL, *labels = NULL;
    gq_quota **v = NULL;
    size_t n = 0;
    gq_pod_facts facts;
    gq_code rc;
    *out = false;
    if (!qs || !qs->list)
        return GQ_OK;
    if ((rc = qs->list(qs->ctx, WH_LIST_QUOTAS, req->namespace, &a, err)) ||
        (rc = qs->list(qs->ctx, WH_LIST_TENANT_QUOTAS, NULL, &t, err)) ||
        (qs->namespace_labels &&
         (rc = qs->namespace_labels(qs->ctx, req->namespace, &labels, err)))) {
        gq_err_prefix(err, "cannot read the quotas governing namespace %s", req->namespace);
        goto out;
    }
    size_t skipped = 0; /* /validate denies what an invalid quota governs */
    if ((rc = gq_quota_list_append(&v, &n, a, &skipped, err)) ||
        (rc = gq_quota_list_append(&v, &n, t, &skipped, err)))
        goto out;
    if (n && gq_pod_facts_from_json(pod, req->namespace, &facts, NULL) == GQ_OK)
        *out = gq_queue_applies((const gq_quota *const *)v, n, &facts, labels, charge);
out:
    gq_quota_list_free(v, n);
    json_object_put(a);
    json_object_put(t);
    json_object_put(labels);
    return rc;
}

static bool has_node_name(json_object *pod);

/* Add gates names[0..n) to the patch: after any gates the pod already
 * carries. */
static gq_code add_gates(json_object *pod, const char *const *names, size_t n, gq_patch *patch)
{
    gq_jptr p;
    json_object *spec = NULL, *gates = NULL;
    json_object_object_get_ex(pod, "spec", &spec);
    bool has = spec && json_object_object_get_ex(spec, "schedulingGates", &gates) &&
               json_object_is_type(gates, json_type_array);
    json_object *arr = has ? NULL : json_object_new_array();
    gq_code rc = has || arr ? GQ_OK : GQ_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        json_object *gate = json_object_new_object();
        if (!gate || json_object_object_add(gate, "name", json_object_new_string(names[i]))) {
            json_object_put(gate);
            rc = GQ_ENOMEM;
            break;
        }
        gq_jptr_init(&p);
        gq_jptr_push(&p, "spec");
        gq_jptr_push(&p, "schedulingGates");
        if (has) {
            gq_jptr_push(&p, "-");
            rc = gq_patch_add(patch, &p, gate);
        } else if (json_object_array_add(arr, gate)) {
            json_object_put(gate);
            rc = GQ_ENOMEM;
        }
    }
    if (!rc && arr && n) {
        rc = gq_patch_add(patch, &p, arr);
        arr = NULL;
    }
    json_object_put(arr);
    return rc;
}

/* A pod naming one ResourceClaim under two entries: kube-scheduler
 * allocates it, then cannot reserve it twice for the pod ("Duplicate
 * value"), and the devices stay allocated to a claim no pod holds, charged
 * to no quota. Refused (why set). */
static bool claims_refused(json_object *pod, gq_err *why)
{
    json_object *claims = gq_json_get_array(gq_json_member(pod, "spec"), "resourceClaims");
    size_t n = claims ? json_object_array_length(claims) : 0;
    for (size_t i = 0; i < n && i < GQ_POD_MAX_CLAIMS; i++) {
        json_object *a = json_object_array_get_idx(claims, i);
        const char *name = gq_json_get_string(a, "resourceClaimName");
        for (size_t j = i + 1; name && j < n && j < GQ_POD_MAX_CLAIMS; j++) {
            json_object *b = json_object_array_get_idx(claims, j);
            const char *other = gq_json_get_string(b, "resourceClaimName");
            const char *an = gq_json_get_string(a, "name"), *bn = gq_json_get_string(b, "name");
            if (other && !strcmp(name, other)) {
                gq_err_set(why, GQ_EDENIED,
                           "spec.resourceClaims entries \"%.63s\" and \"%.63s\" name the same "
                           "ResourceClaim \"%.253s\": Kubernetes cannot reserve a claim twice for "
                           "one pod, and would leave its devices allocated to no pod; name it once "
                           "and list the entry in each container's resources.claims",
                           an ? an : "", bn ? bn : "", name);
                return true;
            }
        }
    }
    return false;
}

/* The pod's claims are checked before it runs (quota/claimcheck.h): a pod
 * gpuquota recorded claims for is held behind GQ_CLAIMS_GATE until the
 * controller has checked them. (A pod created on a node, which cannot carry
 * gates, is refused before this.) */
static bool claims_gated(json_object *pod, const char *claims_text)
{
    return claims_text && gq_pod_named_gate_index(pod, GQ_CLAIMS_GATE) < 0;
}

static bool has_node_name(json_object *pod)
{
    json_object *spec = NULL, *nn = NULL;
    return json_object_object_get_ex(pod, "spec", &spec) &&
           json_object_object_get_ex(spec, "nodeName", &nn) &&
           json_object_is_type(nn, json_type_string) && json_object_get_string_len(nn) > 0;
}

/* Where a step leaves the review: go on; deny with m->why (m->rc
 * GQ_ENOMEM: fail); settled (m->rc decides); failed (err set). */
typedef enum step { STEP_ON, STEP_DENY, STEP_SETTLED, STEP_FAILED } step;

static step failed(pod_mutation *m, gq_code rc)
{
    m->rc = rc;
    return STEP_FAILED;
}

/* A pod that accepts several models: choose one now, or leave the choice to
 * the controller (a Queue quota will gate it; it is priced and rewritten on
 * the first model, pinned to none). */
static step pick_model(pod_mutation *m, gq_err *err)
{
    const gq_config *cfg = m->cfg;
    json_object *pod = m->pod;
    if ((m->rc = gq_pod_model_choices(cfg, pod, m->choices, &m->n_choices, &m->why)))
        return STEP_DENY;
    if (!m->n_choices)
        return STEP_ON;
    gq_model_option first;
    bool queues = gq_pod_gate_index(pod) >= 0;
    if (!queues && m->in->src && !has_node_name(pod) &&
        gq_queue_price_choices(cfg, pod, GQ_TRUST_REQUEST, m->choices, 1, &first, &m->why) ==
            GQ_OK) {
        gq_err qerr;
        gq_err_clear(&qerr);
        if (pod_queues(m->in->src, m->req, pod, &first.charge, &queues, &qerr) == GQ_ENOMEM)
            return failed(m, gq_err_oom(err));
    }
    gq_err_clear(&m->why);
    m->deferred = queues;
    if (!queues) {
        gq_code rc;
        if ((rc = lr_load(m->in, m->req->namespace, err)) ||
            ((rc = choose_model(m, err)) && rc != GQ_EDENIED && m->why.code == GQ_OK))
            return failed(m, rc);
        if ((m->rc = rc))
            return STEP_DENY;
    }
    const gq_model *pin = queues ? m->choices[0] : m->chosen;
    gq_code rc = gq_pod_with_model(pod, pin->name, &m->pinned, err);
    if (rc)
        return failed(m, rc);
    m->priced_pod = m->pinned;
    return STEP_ON;
}

/* The pod's DRA claims, priced and recorded on the pod that is priced. */
static step attach_claims(pod_mutation *m, gq_err *err)
{
    gq_code rc;
    if (claims_refused(m->pod, &m->why))
        return STEP_DENY;
    if ((rc = price_claims(m->cfg, m->req, m->in->src, &m->r, &m->claims, err)))
        return failed(m, rc);
    if (m->claims && has_node_name(m->pod)) {
        gq_err_set(&m->why, GQ_EDENIED,
                   "a pod created on a node (spec.nodeName) cannot wait behind the scheduling "
                   "gate " GQ_CLAIMS_GATE " while gpuquota checks that its DRA claims are the ones "
                   "charged, and kube-controller-manager would reserve for it whatever claim bears "
                   "the name then: leave spec.nodeName to the scheduler (use nodeSelector or "
                   "node affinity)");
        return STEP_DENY;
    }
    if (!m->claims)
        return STEP_ON;
    if (!(m->claims_text = strdup(gq_json_compact(m->claims))) ||
        with_claims(m->priced_pod, m->claims_text, &m->claimed, err))
        return failed(m, gq_err_oom(err));
    m->priced_pod = m->claimed;
    return STEP_ON;
}

/* The scheduling gates a rewritten pod gets: the queue's when a Queue quota
 * would refuse it now, the claims check's when it names DRA claims. */
static step gate(pod_mutation *m, const gq_pod *use, gq_err *err)
{
    const char *gates[2];
    size_t n_gates = 0;
    json_object *pod = m->pod;
    if (m->in->src && use->cost.gpu_pods && gq_pod_gate_index(pod) < 0 && !has_node_name(pod)) {
        gq_amounts charge = use->charge;
        bool queues = false;
        /* Quotas that cannot be read leave the pod ungated: /validate then
         * decides as under Deny, and fails closed with a message that says
         * why when it cannot read them either. */
        gq_err qerr;
        gq_err_clear(&qerr);
        if (pod_queues(m->in->src, m->req, pod, &charge, &queues, &qerr) == GQ_ENOMEM)
            return failed(m, gq_err_oom(err));
        if (queues)
            gates[n_gates++] = GQ_QUEUE_GATE;
    }
    if (claims_gated(pod, m->claims_text))
        gates[n_gates++] = GQ_CLAIMS_GATE;
    if (n_gates && (m->rc = add_gates(pod, gates, n_gates, m->rw.patch)))
        return STEP_SETTLED;
    return STEP_ON;
}

/* DRA claims that hold no GPU (a NIC) on a pod that asks for none:
 * recorded as priced, so /validate does not take them for claims it cannot
 * tell. */
static step record_claims(pod_mutation *m)
{
    gq_rewrite_opts co = {.claims = m->claims_text};
    static const char *const gates[] = {GQ_CLAIMS_GATE};
    if ((m->rc = gq_rewrite_pod(m->cfg, m->pod, &m->p.pod0.cost, &co, &m->rw, &m->why)))
        return STEP_DENY;
    if (claims_gated(m->pod, m->claims_text) && (m->rc = add_gates(m->pod, gates, 1, m->rw.patch)))
        return STEP_SETTLED;
    m->rc = answer(m->cfg, &m->p.pod0.cost, &m->rw, &m->r);
    return STEP_SETTLED;
}

/* Price the pod (GPULimitRange defaults included), rewrite it for the
 * backend, gate it, answer. */
static step rewrite(pod_mutation *m, gq_err *err)
{
    const gq_config *cfg = m->cfg;
    const char *ns = m->req->namespace;
    json_object *pod = m->pod;
    priced *p = &m->p;
    gq_code rc;
    if ((m->rc = decode(cfg, m->priced_pod, ns, NULL, 0, &p->pod0, &m->why)) ||
        (m->deferred && (m->rc = gq_queue_check_deferred_choice(cfg, &p->pod0.cost, m->choices,
                                                                m->n_choices, &m->why))))
        return STEP_DENY;
    if (!p->pod0.cost.gpu_pods && m->claims_text)
        return record_claims(m);
    if (!p->pod0.cost.gpu_pods)
        return STEP_SETTLED; /* no GPU: nothing to read, nothing to patch */
    /* Read only for pods that ask for a GPU: a policy that cannot be read
     * then fails closed without touching anyone else's pods. */
    if ((rc = lr_load(m->in, ns, err)))
        return failed(m, rc);
    if ((m->rc = price(cfg, m->priced_pod, ns, m->in->lrs, m->in->n_lrs, p, &m->why)))
        return STEP_DENY;
    /* No reservation annotation: kube-apiserver gives a reinvocation a fresh
     * request uid, so stamping it would never be a no-op. /validate keys the
     * charge by the pod's uid, which mutating webhooks do not see yet. */
    json_object *ann = gq_json_meta_object(pod, "annotations");
    gq_rewrite_opts opts = {.defaults = p->defs,
                            .n_defaults = p->n_defs,
                            .chosen = m->chosen,
                            .choices = m->chosen ? gq_json_get_string(ann, GQ_ANN_GPU_MODEL) : NULL,
                            .claims = m->claims_text,
                            .model_deferred = m->deferred};
    const gq_pod *use = priced_use(p);
    if ((m->rc = gq_rewrite_pod(cfg, pod, &use->cost, &opts, &m->rw, &m->why)))
        return STEP_DENY;
    step s = gate(m, use, err);
    if (s != STEP_ON)
        return s;
    m->rc = answer(cfg, &use->cost, &m->rw, &m->r);
    if (!m->rc && p->n_defs && p->defs[0].limit_range)
        m->rc = wh_review_response_set_audit(&m->r, "gpu-limit-range", p->defs[0].limit_range);
    if (!m->rc && m->chosen)
        m->rc = wh_review_response_set_audit(&m->r, "gpu-model-choices", opts.choices);
    if (!m->rc && use->cost.gpu_pods) {
        m->got.charge = use->charge;
        m->got.has_charge = true;
        m->got.request = m->rw.originals;
        m->got.rewrite = m->rw.changes;
        m->rw.originals = m->rw.changes = NULL;
    }
    return STEP_SETTLED;
}

/* rc of writing the answer, into err when it failed. */
static gq_code settled(gq_code rc, gq_err *err)
{
    if (rc)
        gq_err_set(err, rc, "%s", rc == GQ_ENOMEM ? "out of memory" : gq_strerror(rc));
    return rc;
}

/* A pod CREATE through its steps; the review answered (allowed, patched,
 * or denied) in m->r. GQ_OK when m->r holds the answer. */
static gq_code mutate_create(pod_mutation *m, gq_err *err)
{
    step s = pick_model(m, err);
    if (s == STEP_ON)
        s = attach_claims(m, err);
    if (s == STEP_ON)
        s = rewrite(m, err);
    if (s == STEP_FAILED)
        return m->rc;
    if (s == STEP_DENY && m->rc != GQ_ENOMEM)
        m->rc = wh_review_response_deny(&m->r, 403, "Forbidden", m->why.msg);
    return settled(m->rc, err);
}

static void pod_mutation_dispose(pod_mutation *m)
{
    wh_mutate_info_dispose(&m->got);
    json_object_put(m->pinned);
    json_object_put(m->claimed);
    json_object_put(m->claims);
    free(m->claims_text);
    gq_rewrite_dispose(&m->rw);
    priced_dispose(&m->p);
}

static gq_code mutate(const gq_config *cfg, const wh_review_request *req, lr_input *in,
                      wh_review_response *resp, wh_mutate_info *info, gq_err *err)
{
    gq_code rc;
    pod_mutation m = {.cfg = cfg, .req = req, .in = in, .pod = req->object};
    m.priced_pod = m.pod;
    wh_mutate_info_init(&m.got);
    priced_init(&m.p);
    gq_rewrite_init(&m.rw);
    gq_err_clear(&m.why);

    if ((rc = wh_review_response_init(&m.r, req->version, req->uid)))
        return gq_err_oom(err);
    if (is_pod_update(req) && !gq_config_is_exempt(cfg, req->namespace))
        rc = restore_update(req, &m.r, err);
    else if (!is_pod_create(req) || gq_config_is_exempt(cfg, req->namespace))
        rc = GQ_OK;
    else if (!req->object)
        rc = settled(wh_review_response_deny(&m.r, 400, "BadRequest", "request.object is missing"),
                     err);
    else
        rc = mutate_create(&m, err);
    if (rc) {
        wh_review_response_dispose(&m.r);
    } else {
        *resp = m.r;
        if (info) {
            wh_mutate_info_dispose(info);
            *info = m.got;
            wh_mutate_info_init(&m.got);
        }
    }
    pod_mutation_dispose(&m);
    return rc;
}
