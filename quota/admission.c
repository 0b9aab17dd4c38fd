#include "quota/admission.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_member.h"
#include "quota/podcost.h"
#include "quota/podqueue.h"
#include "quota/policy.h"
#include "quota/record.h"

void gq_verdict_vdeny(gq_verdict *v, gq_code code, const char *fmt, va_list ap)
{
    vsnprintf(v->message, sizeof(v->message), fmt, ap);
    v->allowed = false;
    v->code = code;
}

void gq_verdict_deny(gq_verdict *v, gq_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_verdict_vdeny(v, code, fmt, ap);
    va_end(ap);
}

void gq_admission_deny(gq_admission *a, gq_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_verdict_vdeny(&a->verdict, code, fmt, ap);
    va_end(ap);
    a->need = 0;
    a->done = true;
}

const char *gq_quota_kind_name(gq_quota_kind k)
{
    return k == GQ_QUOTA_TENANT ? GQ_KIND_GPUTENANTQUOTA : GQ_KIND_GPUQUOTA;
}

void gq_quota_label(const gq_quota *q, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", q->namespace_ ? q->namespace_ : "", q->namespace_ ? "/" : "",
             q->name);
}

/* ---- the state of one decision ------------------------------------------ */

void gq_admission_init(gq_admission *a, const gq_admission_in *in)
{
    memset(a, 0, sizeof(*a));
    a->in = *in;
    a->verdict.allowed = true;
    gq_pod_init(&a->pod);
}

/* What one model choice decided: gone before the next is decided. */
static void choice_dispose(gq_admission *a)
{
    for (size_t i = 0; i < a->n_claims; i++)
        gq_reservation_dispose(&a->claims[i]);
    free(a->claims);
    a->claims = NULL;
    a->n_claims = 0;
    if (a->have_alt)
        gq_reservation_dispose(&a->alt);
    if (a->have_resv)
        gq_reservation_dispose(&a->resv);
    memset(&a->resv, 0, sizeof(a->resv));
    memset(&a->alt, 0, sizeof(a->alt));
    a->have_resv = a->have_alt = false;
    free(a->to_charge);
    a->to_charge = NULL;
    a->n_charge = 0;
    a->must_charge = false;
    gq_pod_dispose(&a->pod);
    gq_pod_init(&a->pod);
    json_object_put(a->choice_pod);
    a->choice_pod = NULL;
    a->decoded = a->lrs_checked = a->selected = a->group_checked = false;
    a->fresh_next = 0;
}

void gq_admission_dispose(gq_admission *a)
{
    choice_dispose(a);
    gq_pod_dispose(&a->pod);
    gq_limit_range_list_free(a->lrs, a->n_lrs);
    for (size_t i = 0; a->snap.fresh && i < a->n_set; i++)
        json_object_put(a->snap.fresh[i]);
    free(a->snap.fresh);
    free(a->snap.fresh_read);
    gq_quota_list_free(a->set, a->n_set);
    json_object_put(a->snap.limit_ranges);
    json_object_put(a->snap.ns_labels);
    json_object_put(a->snap.quotas);
    json_object_put(a->snap.tenant_quotas);
    json_object_put(a->snap.group_pods);
    memset(a, 0, sizeof(*a));
}

/* A policy outcome: anything but out-of-memory becomes a denial carrying
 * e's message; returns what the caller should return. */
static gq_code settle(gq_admission *a, gq_code rc, const gq_err *e)
{
    if (rc == GQ_ENOMEM)
        return rc;
    gq_admission_deny(a, GQ_EDENIED, "%s", e->msg);
    return GQ_OK;
}

/* ---- reading the snapshot -------------------------------------------------- */

/* Whether what is asked has been read; when not, it is asked for. */
static bool have(gq_admission *a, unsigned what)
{
    if ((a->snap.read & what) == what)
        return true;
    a->need |= what & ~a->snap.read;
    return false;
}

/* The snapshot's GPULimitRanges, parsed once; one that does not parse
 * denies (fail closed). false when not read yet or decided. */
static bool limit_ranges(gq_admission *a, gq_code *rc)
{
    gq_err e;
    gq_err_clear(&e);
    if (!have(a, GQ_NEED_LIMIT_RANGES))
        return false;
    json_object *arr = a->snap.limit_ranges;
    if (a->lrs || !json_object_is_type(arr, json_type_array))
        return true; /* parsed, or none */
    size_t bad;
    if (!(*rc = gq_limit_range_list_parse(arr, &a->lrs, &a->n_lrs, &bad, &e)))
        return true;
    if (*rc == GQ_ENOMEM)
        return false;
    const char *name = gq_json_meta_string(json_object_array_get_idx(arr, bad), "name");
    gq_admission_deny(a, *rc, "GPULimitRange %s is invalid: %s", name ? name : "(unnamed)", e.msg);
    *rc = GQ_OK;
    return false;
}

/* The snapshot's quotas, parsed once; one that does not parse denies
 * (fail closed). false when not read yet or decided. */
static bool quota_set(gq_admission *a, gq_code *rc)
{
    gq_err e;
    gq_err_clear(&e);
    if (!have(a, GQ_NEED_QUOTAS))
        return false;
    if (a->snap.fresh)
        return true;
    if ((*rc = gq_quota_list_append(&a->set, &a->n_set, a->snap.quotas, NULL, &e)) ||
        (*rc = gq_quota_list_append(&a->set, &a->n_set, a->snap.tenant_quotas, NULL, &e))) {
        if (*rc == GQ_ENOMEM)
            return false;
        gq_admission_deny(a, *rc, "gpuquota could not read quota: %s", e.msg);
        *rc = GQ_OK;
        return false;
    }
    size_t n = a->n_set ? a->n_set : 1;
    if (!(a->snap.fresh = calloc(n, sizeof(*a->snap.fresh))) ||
        !(a->snap.fresh_read = calloc(n, sizeof(*a->snap.fresh_read)))) {
        *rc = GQ_ENOMEM;
        return false;
    }
    return true;
}

/* ---- the steps --------------------------------------------------------------- */

/* DRA claims gpuquota could not price (a ResourceClaim or template that does
 * not exist or could not be priced, a pod the mutating webhook did not see): in a
 * namespace any gpuquota quota governs (a GPUQuota of it, a GPUTenantQuota
 * covering it, or requireQuota), such a pod would get devices unseen, so it
 * is denied. */
static void deny_unseen_claims(const gq_config *cfg, gq_admission *a, const gq_pod_claim *claim)
{
    char by[GQ_CRD_MAX_STRING * 2 + 32] = "", label[GQ_CRD_MAX_STRING * 2 + 2];
    const char *ns = a->in.ns;
    for (size_t i = 0; i < a->n_set && !by[0]; i++) {
        const gq_quota *q = a->set[i];
        if (!gq_quota_covers_namespace(q, ns, a->snap.ns_labels))
            continue;
        gq_quota_label(q, label, sizeof(label));
        snprintf(by, sizeof(by), "%s %s", gq_quota_kind_name(q->kind), label);
    }
    if (!by[0] && cfg->require_quota)
        snprintf(by, sizeof(by), "requireQuota");
    if (!by[0])
        return;
    char ref[300] = "";
    if (claim->field)
        snprintf(ref, sizeof(ref), " (%s \"%s\")", claim->field, claim->ref);
    gq_admission_deny(
        a, GQ_EDENIED,
        "spec.resourceClaims[0] \"%s\"%s: gpuquota cannot tell which GPUs the pod's DRA claims "
        "hold, so namespace %s, governed by %s, does not admit it; ask for GPUs through a "
        "ResourceClaimTemplate or a ResourceClaim that exists when the pod is created, with a "
        "count of devices (the warnings say which could not be priced), or in the container's "
        "resources",
        claim->name, ref, ns, by);
}

/* The pod decoded under admission (gq_pod_decode): its price and charge;
 * DRA claims that could not be priced deny it where a quota governs
 * (deny_unseen_claims). false when decided or waiting for the quotas. */
static bool price_pod(const gq_config *cfg, gq_admission *a, json_object *pod, gq_code *rc)
{
    gq_pod_claim claim;
    gq_err e;
    gq_err_clear(&e);
    if (!a->decoded) {
        if ((*rc = gq_pod_decode(cfg, pod, &(gq_pod_scope){.ns = a->in.ns, .admission = true},
                                 &a->pod, &e))) {
            *rc = settle(a, *rc, &e);
            return false;
        }
        a->decoded = true;
    }
    if (a->pod.cost.claims_unpriced && gq_pod_resource_claims(pod, &claim)) {
        if (!quota_set(a, rc))
            return false;
        deny_unseen_claims(cfg, a, &claim);
    }
    return a->verdict.allowed;
}

/* GPULimitRanges first: a pod they reject never holds quota. Whole GPUs of
 * unknown model cost the largest model the namespace allows, which only its
 * GPULimitRanges tell. false when decided or waiting. */
static bool check_limit_ranges(const gq_config *cfg, gq_admission *a, json_object *pod, gq_code *rc)
{
    gq_err e;
    gq_err_clear(&e);
    if (a->lrs_checked)
        return true;
    if (!limit_ranges(a, rc))
        return false;
    const gq_limit_range *const *lrs = (const gq_limit_range *const *)a->lrs;
    gq_pod_scope scope = {.ns = a->in.ns, .admission = true, .lrs = lrs, .n_lrs = a->n_lrs};
    if (a->pod.cost.priced_unknown && a->n_lrs &&
        (*rc = gq_pod_decode(cfg, pod, &scope, &a->pod, &e))) {
        *rc = settle(a, *rc, &e);
        return false;
    }
    if ((*rc = gq_limit_validate(&a->pod.cost, a->in.ns, lrs, a->n_lrs, &e))) {
        *rc = settle(a, *rc, &e);
        return false;
    }
    a->lrs_checked = true;
    return true;
}

/* The quotas of the set as specs alone: no usage, no reservations and
 * every limit (per-model ones too) unbounded, so that evaluating them only
 * selects which quotas govern a pod. */
typedef struct spec_views {
    gq_quota *store;
    const gq_quota **v; /* v[i] = &store[i] */
    gq_model_limit *models;
} spec_views;

static void spec_views_dispose(spec_views *sv)
{
    free(sv->v);
    free(sv->store);
    free(sv->models);
}

static void unbounded(gq_amounts *hard)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (hard->set[k])
            hard->v[k] = INT64_MAX;
}

/* GQ_ENOMEM or GQ_OK; sv is disposed of either way by the caller. */
static gq_code spec_views_init(spec_views *sv, gq_quota *const *qs, size_t n)
{
    size_t n_m = 0, at = 0;
    memset(sv, 0, sizeof(*sv));
    sv->store = n ? calloc(n, sizeof(*sv->store)) : NULL;
    sv->v = n ? calloc(n, sizeof(*sv->v)) : NULL;
    for (size_t i = 0; i < n; i++)
        n_m += qs[i]->n_models;
    if ((n_m && !(sv->models = calloc(n_m, sizeof(*sv->models)))) || (n && (!sv->store || !sv->v)))
        return GQ_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        gq_quota *q = &sv->store[i];
        *q = *qs[i];
        memset(&q->used, 0, sizeof(q->used));
        q->reservations = NULL;
        q->n_reservations = 0;
        unbounded(&q->hard);
        /* Per-model limits never refuse here either: only which quotas
         * govern the pod is asked. */
        q->models = n_m ? &sv->models[at] : NULL;
        for (size_t m = 0; m < qs[i]->n_models; m++, at++) {
            gq_model_limit *ml = &sv->models[at];
            *ml = qs[i]->models[m];
            memset(&ml->used, 0, sizeof(ml->used));
            unbounded(&ml->hard);
        }
        sv->v[i] = q;
    }
    return GQ_OK;
}

/* Which quotas of the set govern the pod, in check order, and
 * requireQuota, from the specs alone: a view with no usage and unbounded
 * limits never exceeds, so this only selects; the fresh reads decide.
 * false when decided or waiting. */
static bool select_governing(const gq_config *cfg, gq_admission *a, gq_code *rc)
{
    gq_err e;
    gq_err_clear(&e);
    if (a->selected)
        return true;
    if (!quota_set(a, rc))
        return false;
    size_t *idx = a->n_set ? calloc(a->n_set, sizeof(*idx)) : NULL;
    spec_views sv;
    *rc = spec_views_init(&sv, a->set, a->n_set);
    if (!*rc && a->n_set && (!idx || !(a->to_charge = calloc(a->n_set, sizeof(*a->to_charge)))))
        *rc = GQ_ENOMEM;
    if (!*rc) {
        gq_quota_snapshot s = {.quotas = sv.v,
                               .n = a->n_set,
                               .ns_labels = a->snap.ns_labels,
                               .require_quota = cfg->require_quota,
                               .now = a->in.now};
        *rc = gq_quota_evaluate(&s, &a->pod.facts, &a->pod.charge, idx, &a->n_charge, &e);
    }
    spec_views_dispose(&sv);
    for (size_t i = 0; !*rc && i < a->n_charge; i++)
        a->to_charge[i] = a->set[idx[i]];
    free(idx);
    if (*rc) {
        if (*rc == GQ_ENOMEM)
            gq_err_oom(&e);
        *rc = settle(a, *rc, &e);
        return false;
    }
    a->selected = true;
    return true;
}

/* A denial for an admission record that is not the one gpuquota wrote for
 * this charge (want), in the words of the record's form. */
static void deny_record(gq_admission *a, gq_pod_record *want, const gq_pod_record *have, gq_code rc,
                        const gq_err *e)
{
    char text[GQ_RECORD_MAX];
    if (!rc && have->legacy) {
        char mem[GQ_QUANTITY_STR_MAX], g[GQ_QUANTITY_STR_MAX], p[GQ_QUANTITY_STR_MAX];
        gq_amount_format(&want->charge, GQ_KEY_GPU_MEMORY, mem);
        gq_amount_format(&want->charge, GQ_KEY_GPUS, g);
        gq_amount_format(&want->charge, GQ_KEY_GPU_PODS, p);
        gq_admission_deny(
            a, GQ_EDENIED,
            "annotation " GQ_ANN_CHARGED " is gpuquota's record of what the pod is charged and "
            "must read gpu-memory=%s,gpus=%s,gpu-pods=%s: it is written by gpuquota's mutating "
            "webhook only",
            mem, g, p);
        return;
    }
    gq_pod_record_format(want, text);
    gq_admission_deny(
        a, GQ_EDENIED,
        "annotation " GQ_ANN_ADMISSION " is gpuquota's record of what the pod is charged and "
        "must read %s%s%s: it is written by gpuquota's mutating webhook only (was the pod "
        "changed by a webhook called after gpuquota's, or the annotation copied from another "
        "pod?)",
        text, rc ? "; " : "", rc ? e->msg : "");
}

/* The admission record on the pod (quota/record.h) is what the recount
 * believes for as long as the pod lives, so it must be exactly what this
 * decision charges: a pod that uses no GPU carries none, and a GPU pod's
 * is the one gpuquota computes now (a later mutating webhook may not change
 * it, nor may its author write one). A GPU pod without a record did not go
 * through gpuquota's mutating webhook: it is decided on its request as
 * before and counted on its container resources (GQ_TRUST_SPEC).
 * false when denied. */
static bool record_matches(gq_admission *a, json_object *pod)
{
    gq_pod_record want, have;
    gq_err e;
    gq_err_clear(&e);
    if (!a->pod.cost.gpu_pods &&
        gq_json_member(gq_json_meta_object(pod, "labels"), GQ_LABEL_MANAGED) &&
        !gq_pod_managed(pod)) {
        /* Pod-group members are listed by this label: a CPU-only pod may not
         * wear it to be read with them (and it means gpuquota rewrote it). */
        gq_admission_deny(a, GQ_EDENIED,
                          "label " GQ_LABEL_MANAGED " is written by gpuquota only, on pods it "
                          "rewrote; this pod asks for no GPU: remove the label");
        return false;
    }
    gq_code rc = gq_pod_record_read(pod, &have, &e);
    if (rc == GQ_ENOTFOUND)
        return true;
    if (!a->pod.cost.gpu_pods) {
        gq_admission_deny(a, GQ_EDENIED,
                          "annotations " GQ_ANN_ADMISSION " and " GQ_ANN_CHARGED " are gpuquota's "
                          "record of what a GPU pod is charged, written by its mutating webhook "
                          "only; this pod asks for no GPU: remove them");
        return false;
    }
    gq_pod_record_make(&a->pod.cost, a->pod.facts.model, a->pod.facts.terminating, &want);
    if (!rc && have.legacy) {
        /* Only an older mutating webhook writes the line alone (a rolling
         * upgrade): it records the charge only, which must be this one. */
        want.model[0] = '\0';
        want.terminating = false;
        want.legacy = true;
    }
    if (!rc && gq_pod_record_equal(&want, &have))
        return true;
    deny_record(a, &want, &have, rc, &e);
    return false;
}

/* ---- a queued pod ------------------------------------------------------------ */

/* The gate gpuquota.io/quota queues a pod where a Queue quota governs it
 * (gpuquota's mutating webhook adds it then); on any other pod it is a
 * tenant's own, which would hold the pod in the controller's memory with no
 * queue to cap it: refused. A queued pod is refused as well while a Queue
 * GPUQuota governing it holds maxQueuedPods already (status.queuedPods, as
 * the controller last counted it): the controller keeps every queued pod
 * in memory, and one tenant's endless stream of them would stop every
 * queue (docs/queueing.md). Not a GPUTenantQuota's count: its queue is its
 * namespaces' together, and one tenant's pods would then refuse the
 * others'. false when denied. */
static bool queue_admits(const gq_config *cfg, gq_admission *a)
{
    bool queue = false;
    for (size_t i = 0; i < a->n_charge; i++)
        queue = queue || a->to_charge[i]->when_exceeded == GQ_WHEN_QUEUE;
    if (!queue) {
        gq_admission_deny(
            a, GQ_EDENIED,
            "the scheduling gate gpuquota.io/quota queues a pod only where a quota with "
            "whenExceeded: Queue governs it, and none governs this pod in namespace %s: remove the "
            "gate (gpuquota adds it when a Queue quota governs the pod)",
            a->in.ns);
        return false;
    }
    for (size_t i = 0; i < a->n_charge; i++) {
        const gq_quota *q = a->to_charge[i];
        if (q->kind != GQ_QUOTA_NAMESPACED || q->when_exceeded != GQ_WHEN_QUEUE ||
            q->queued_pods < cfg->max_queued_pods)
            continue;
        gq_admission_deny(
            a, GQ_EDENIED,
            "quota %s/%s already holds %lld queued pods, the most the configuration allows "
            "(maxQueuedPods %d): wait for some to be admitted or deleted",
            q->namespace_, q->name, (long long)q->queued_pods, cfg->max_queued_pods);
        return false;
    }
    return true;
}

/* Deny a new member of group g whose size differs from that of a member
 * that exists and counts (gq_pod_counts), naming the first such member
 * (docs/queueing.md, "Pod groups"). The list is a fresh read, not a lock:
 * two disagreeing members created at once may both pass, and the
 * controller holds that group. false when denied or waiting. */
static bool group_agrees(gq_admission *a, const gq_pod_group *g)
{
    if (a->group_checked)
        return true;
    if (!have(a, GQ_NEED_GROUP_PODS)) {
        snprintf(a->need_group, sizeof(a->need_group), "%s", g->name);
        return false;
    }
    json_object *arr = a->snap.group_pods;
    size_t n = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    gq_err e;
    for (size_t i = 0; i < n; i++) {
        json_object *pod = json_object_array_get_idx(arr, i);
        gq_pod_group other;
        int64_t delete_at = 0;
        if (gq_pod_group_parse(pod, &other, &e) || !other.present || strcmp(other.name, g->name) ||
            other.size == g->size || gq_pod_deletion_deadline(pod, &delete_at, &e) ||
            !gq_pod_counts(gq_pod_is_terminal(pod), delete_at, a->in.now))
            continue;
        const char *name = gq_json_meta_string(pod, "name");
        gq_admission_deny(a, GQ_EDENIED,
                          "pod group %s: this pod says " GQ_POD_GROUP_SIZE_ANNOTATION
                          "=%lld but member %.253s says %lld; members of a group must agree on "
                          "its size",
                          g->name, (long long)g->size, name ? name : "(unnamed)",
                          (long long)other.size);
        return false;
    }
    a->group_checked = true;
    return true;
}

/* A Deny quota governing a queued pod must have room for it now, as for any
 * pod; judged on a fresh read of the quota, since the caches hold its spec
 * alone (no usage, no reservations). A quota gone meanwhile is skipped.
 * false when denied or waiting. */
static bool deny_quotas_have_room(gq_admission *a, gq_code *rc)
{
    for (; a->fresh_next < a->n_charge; a->fresh_next++) {
        const gq_quota *q = a->to_charge[a->fresh_next];
        if (q->when_exceeded != GQ_WHEN_DENY)
            continue;
        size_t at = 0;
        while (a->set[at] != q)
            at++;
        if (!a->snap.fresh_read[at]) {
            a->need |= GQ_NEED_FRESH_QUOTA;
            a->need_fresh = at;
            return false;
        }
        if (!a->snap.fresh[at])
            continue;
        gq_quota *fresh = NULL;
        size_t idx, n_idx = 0;
        gq_err e;
        gq_err_clear(&e);
        char label[2 * GQ_CRD_MAX_STRING];
        if ((*rc = gq_quota_parse(a->snap.fresh[at], &fresh, &e))) {
            if (*rc == GQ_ENOMEM)
                return false;
            gq_quota_label(q, label, sizeof(label));
            gq_admission_deny(a, *rc,
                              "gpuquota could not reach the API server to check quota %s: %s",
                              label, e.msg);
            *rc = GQ_OK;
            return false;
        }
        const gq_quota *one = fresh;
        gq_quota_snapshot s = {
            .quotas = &one, .n = 1, .ns_labels = a->snap.ns_labels, .now = a->in.now};
        *rc = gq_quota_evaluate(&s, &a->pod.facts, &a->pod.charge, &idx, &n_idx, &e);
        gq_quota_free(fresh);
        if (*rc == GQ_ENOMEM)
            return false;
        if (*rc) {
            gq_admission_deny(a, *rc, "%s", e.msg);
            *rc = GQ_OK;
            return false;
        }
    }
    return true;
}

/* A pod created behind the gate gpuquota.io/quota (docs/queueing.md): a
 * Queue quota must govern it, within its queue cap; its group must be well
 * formed and agree with its members on its size; it (its whole group) must
 * fit every quota governing it at all, and a Deny quota among them must
 * have room now, as for any pod. Nothing is charged: the controller
 * charges every governing quota when it ungates the pod. */
static gq_code decide_queued(const gq_config *cfg, gq_admission *a, json_object *pod)
{
    gq_pod_group g;
    gq_amounts own;
    gq_err e;
    gq_code rc = GQ_OK;
    gq_err_clear(&e);
    if (!queue_admits(cfg, a))
        return GQ_OK;
    if (gq_pod_group_parse(pod, &g, &e) != GQ_OK) {
        gq_admission_deny(a, GQ_EDENIED, "%s", e.msg);
        return GQ_OK;
    }
    gq_charge_own(&a->pod.charge, a->pod.cost.shared, a->pod.cost.n_shared, &own);
    for (size_t i = 0; i < a->n_charge; i++) {
        if (gq_queue_check_ever_fits(a->to_charge[i], a->pod.facts.model, &a->pod.charge, &own,
                                     g.present ? g.size : 1, g.present ? g.name : NULL,
                                     &e) != GQ_OK) {
            gq_admission_deny(a, GQ_EDENIED, "%s", e.msg);
            return GQ_OK;
        }
    }
    if ((!g.present || group_agrees(a, &g)) && a->verdict.allowed)
        (void)deny_quotas_have_room(a, &rc);
    return rc;
}

/* ---- what an admitted pod writes ------------------------------------------------ */

/* A copy of r under another key. */
static gq_code reservation_rekey(const gq_reservation *r, const char *key, gq_reservation *out,
                                 gq_err *err)
{
    gq_reservation c = *r;
    c.key = strdup(key);
    c.namespace_ = strdup(r->namespace_);
    c.pod = strdup(r->pod);
    c.model = r->model ? strdup(r->model) : NULL;
    c.claims = NULL;
    c.n_claims = 0;
    bool ok = c.key && c.namespace_ && c.pod && (!r->model || c.model);
    if (ok && r->n_claims && !(c.claims = calloc(r->n_claims, sizeof(*c.claims))))
        ok = false;
    for (size_t i = 0; ok && i < r->n_claims; i++, c.n_claims++)
        ok = (c.claims[i] = strdup(r->claims[i])) != NULL;
    if (!ok) {
        gq_reservation_dispose(&c);
        return gq_err_oom(err);
    }
    *out = c;
    return GQ_OK;
}

/* The records of the shared ResourceClaims the pod names, charged once per
 * quota; the pod's reservation names them too: the controller keeps them
 * charged until it has seen the pod (docs/validating-webhook.md). */
static gq_code build_claim_records(gq_admission *a)
{
    size_t n = a->pod.cost.n_shared;
    if (n && (!(a->claims = calloc(n, sizeof(*a->claims))) ||
              !(a->resv.claims = calloc(n, sizeof(*a->resv.claims)))))
        return GQ_ENOMEM;
    for (; a->resv.n_claims < n; a->resv.n_claims++)
        if (!(a->resv.claims[a->resv.n_claims] = strdup(a->pod.cost.shared[a->resv.n_claims].uid)))
            return GQ_ENOMEM;
    for (; a->n_claims < n; a->n_claims++) {
        const gq_shared_claim *sc = &a->pod.cost.shared[a->n_claims];
        gq_reservation *rec = &a->claims[a->n_claims];
        gq_claim_amounts(sc, &rec->amounts);
        rec->expires = a->resv.expires;
        rec->claim = true;
        rec->key = strdup(sc->uid);
        rec->namespace_ = strdup(a->in.ns);
        rec->pod = strdup(sc->name);
        rec->model = sc->model ? strdup(sc->model->name) : NULL;
        if (!rec->key || !rec->namespace_ || !rec->pod || (sc->model && !rec->model)) {
            a->n_claims++;
            return GQ_ENOMEM;
        }
    }
    return GQ_OK;
}

/* The reservation that holds the pod's own part (keyed by the pod's uid;
 * the request uid is the fallback key for a review whose pod carries
 * another pod's uid), and one record per shared claim. */
static gq_code build_reservations(gq_admission *a, json_object *pod, gq_err *err)
{
    gq_amounts own;
    gq_code rc;
    gq_charge_own(&a->pod.charge, a->pod.cost.shared, a->pod.cost.n_shared, &own);
    if ((rc = gq_reservation_for_pod(pod, a->in.ns, a->in.request_uid, &own, a->in.now + a->in.ttl,
                                     &a->resv, err)))
        return rc;
    a->have_resv = true;
    if (a->pod.cost.n_shared && !a->pod.charge.v[GQ_KEY_GPU_PODS])
        a->pod.cost.n_shared = 0; /* a terminal pod charges nothing, its claims neither */
    if ((rc = build_claim_records(a)))
        return gq_err_oom(err);
    if (a->pod.facts.model && !(a->resv.model = strdup(a->pod.facts.model)))
        return gq_err_oom(err);
    if (strcmp(a->resv.key, a->in.request_uid)) {
        if ((rc = reservation_rekey(&a->resv, a->in.request_uid, &a->alt, err)))
            return rc;
        a->have_alt = true;
    }
    return GQ_OK;
}

/* ---- the decision -------------------------------------------------------------- */

/* The pod (one model choice of it) up to the charges: price, limit ranges,
 * governing quotas, record; a queued pod is decided in full here; else,
 * with quotas to charge, must_charge and the reservations. */
static gq_code decide_one(const gq_config *cfg, gq_admission *a, json_object *pod, bool record)
{
    gq_code rc = GQ_OK;
    gq_err e;
    gq_err_clear(&e);
    if (!price_pod(cfg, a, pod, &rc))
        return rc;
    if (!a->pod.cost.gpu_pods) {
        (void)record_matches(a, pod);
        return GQ_OK;
    }
    if (!check_limit_ranges(cfg, a, pod, &rc) || !select_governing(cfg, a, &rc) ||
        (record && !record_matches(a, pod)))
        return rc;
    if (a->pod.gate_index >= 0)
        return decide_queued(cfg, a, pod);
    if (!a->n_charge)
        return GQ_OK;
    if ((rc = build_reservations(a, pod, &e)))
        return settle(a, rc, &e);
    a->must_charge = true;
    return GQ_OK;
}

/* A gated pod accepting several models (docs/queueing.md, "A choice of
 * models"): the controller chooses among them when it ungates it, and knows
 * nothing of GPULimitRanges, so every model listed must be one the pod
 * could queue for on its own: each is decided as the pod pinned to it
 * (gated: nothing to charge), and the first refused denies the pod, naming
 * the model. */
static gq_code decide_choices(const gq_config *cfg, gq_admission *a, const gq_model *const *choices,
                              size_t n, gq_err *err)
{
    for (; a->choice < n; a->choice++) {
        gq_code rc;
        if (!a->choice_pod &&
            (rc = gq_pod_with_model(a->in.pod, choices[a->choice]->name, &a->choice_pod, err)))
            return rc;
        rc = decide_one(cfg, a, a->choice_pod, a->choice == 0);
        if (rc || a->need)
            return rc;
        if (!a->verdict.allowed) {
            char msg[sizeof(a->verdict.message)];
            snprintf(msg, sizeof(msg), "%s", a->verdict.message);
            gq_admission_deny(a, a->verdict.code,
                              "GPU model %s of annotation " GQ_ANN_GPU_MODEL " (the controller "
                              "may choose any model listed): %s",
                              choices[a->choice]->name, msg);
            return GQ_OK;
        }
        if (a->choice + 1 < n)
            choice_dispose(a);
    }
    return GQ_OK;
}

gq_code gq_admission_decide(const gq_config *cfg, gq_admission *a, gq_err *err)
{
    const gq_model *choices[GQ_MAX_MODEL_CHOICES];
    size_t n = 0;
    gq_err e;
    gq_err_clear(&e);
    if (a->done)
        return gq_err_set(err, GQ_EINVAL, "the admission is decided already");
    a->need = 0;
    gq_code rc = GQ_OK;
    if (!a->verdict.allowed || gq_config_is_exempt(cfg, a->in.ns)) {
        a->done = true;
        return GQ_OK;
    }
    if (gq_pod_gate_index(a->in.pod) < 0 ||
        gq_pod_model_choices(cfg, a->in.pod, choices, &n, &e) != GQ_OK || !n)
        rc = decide_one(cfg, a, a->in.pod, true); /* a bad list is refused there */
    else
        rc = decide_choices(cfg, a, choices, n, err);
    if (rc == GQ_ENOMEM)
        return gq_err_oom(err);
    a->done = !rc && !a->need;
    return rc;
}

/* ---- a quota to charge, checked on a fresh read ------------------------------ */

bool gq_quota_charges_claim(const gq_quota *q, const char *uid)
{
    for (size_t k = 0; q && k < q->n_reservations; k++)
        if (q->reservations[k].claim && !strcmp(q->reservations[k].key, uid))
            return true;
    return false;
}

void gq_admission_charge_for(const gq_reservation *resv, const gq_reservation *claims,
                             size_t n_claims, bool (*charged)(void *ud, const char *uid), void *ud,
                             gq_amounts *out, bool fresh[GQ_POD_MAX_CLAIMS])
{
    gq_shared_claim sc[GQ_POD_MAX_CLAIMS];
    gq_claim_ref refs[GQ_POD_MAX_CLAIMS];
    size_t n = n_claims < GQ_POD_MAX_CLAIMS ? n_claims : GQ_POD_MAX_CLAIMS;
    *out = resv->amounts;
    for (size_t k = 0; k < n; k++) {
        const gq_reservation *r = &claims[k];
        memset(&sc[k], 0, sizeof(sc[k]));
        snprintf(sc[k].uid, sizeof(sc[k].uid), "%s", r->key);
        sc[k].memory = r->amounts.v[GQ_KEY_GPU_MEMORY];
        sc[k].gpus = r->amounts.v[GQ_KEY_GPUS];
        refs[k] = (gq_claim_ref){&sc[k], k};
        fresh[k] = false;
    }
    size_t kept = gq_claims_once(refs, n, charged, ud);
    for (size_t k = 0; k < kept; k++) {
        const gq_amounts *a = &claims[refs[k].owner].amounts;
        fresh[refs[k].owner] = true;
        for (int key = 0; key < GQ_KEY_COUNT; key++)
            if (__builtin_add_overflow(out->v[key], a->v[key], &out->v[key]))
                out->v[key] = INT64_MAX;
    }
}

static bool quota_charged(void *ud, const char *uid)
{
    return gq_quota_charges_claim(ud, uid);
}

gq_code gq_admission_check_fresh(const gq_admission *a, const gq_quota *fresh, int64_t now,
                                 bool *counts, gq_err *err)
{
    gq_amounts charge;
    bool fresh_claim[GQ_POD_MAX_CLAIMS];
    const gq_quota *one = fresh;
    size_t idx, n_idx = 0;
    gq_admission_charge_for(&a->resv, a->claims, a->n_claims, quota_charged, (void *)fresh, &charge,
                            fresh_claim);
    gq_quota_snapshot snap = {.quotas = &one,
                              .n = 1,
                              .ns_labels = a->snap.ns_labels,
                              .now = now,
                              .reservation_key = a->resv.key};
    gq_code rc = gq_quota_evaluate(&snap, &a->pod.facts, &charge, &idx, &n_idx, err);
    if (!rc)
        *counts = n_idx > 0;
    return rc;
}
