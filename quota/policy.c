/* GPULimitRange and quota decisions (see docs/quota-semantics.md). */
#include "quota/policy.h"
#include "common/buf.h"
#include "common/json_member.h"
#include "common/rfc3339.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A denial message (or the list of allowed models in one) being built.
 * gq_err keeps only its first GQ_ERR_MSG_MAX - 1 bytes, and a violation
 * its first 199; the longest single piece appended is one model's whole
 * denial (under 1 KiB). Any cap well past those keeps the same bytes as
 * the cut message shows, and 64 KiB also bounds what a long list of
 * quotas or models costs: past it, the text that fit is used. */
#define POLICY_MSG_MAX ((size_t)64 << 10)

/* Deny with lead and the text built in b, which is disposed: the text that
 * fit when the cap was reached, GQ_ENOMEM when memory ran out. */
static gq_code deny_with(gq_buf *b, const char *lead, gq_err *err)
{
    gq_code rc = b->err == GQ_ENOMEM
                     ? gq_err_oom(err)
                     : gq_err_set(err, GQ_EDENIED, "%s%s", lead, b->data ? b->data : "");
    gq_buf_dispose(b);
    return rc;
}

/* --- pod facts and charge ------------------------------------------------ */

gq_code gq_pod_deletion_deadline(json_object *pod, int64_t *out, gq_err *err)
{
    json_object *meta = gq_json_member(pod, "metadata");
    const char *ts = gq_json_get_string(meta, "deletionTimestamp");
    json_object *g = gq_json_member(meta, "deletionGracePeriodSeconds");
    int64_t t = 0, grace = 0;
    *out = 0;
    if (!ts)
        return GQ_OK;
    gq_code rc = gq_time_parse_rfc3339(ts, &t, err);
    if (rc)
        return rc;
    if (g && json_object_is_type(g, json_type_int))
        grace = json_object_get_int64(g);
    if (grace < 0 || grace > INT32_MAX)
        grace = 0;
    *out = t + grace > 0 ? t + grace : 1;
    return GQ_OK;
}

bool gq_pod_counts(bool terminal, int64_t delete_at, int64_t now)
{
    return !terminal && !(delete_at && now > delete_at);
}

gq_code gq_pod_facts_from_json(json_object *pod, const char *ns, gq_pod_facts *out, gq_err *err)
{
    if (!pod || !json_object_is_type(pod, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "pod: must be an object");
    gq_pod_facts f = {.namespace_ = ns};
    json_object *spec = gq_json_member(pod, "spec");
    json_object *pc = gq_json_member(spec, "priorityClassName");
    if (pc) {
        if (!json_object_is_type(pc, json_type_string))
            return gq_err_set(err, GQ_EINVAL, "spec.priorityClassName: must be a string");
        f.priority_class = json_object_get_string(pc);
    }
    json_object *ads = gq_json_member(spec, "activeDeadlineSeconds");
    if (ads) {
        if (!json_object_is_type(ads, json_type_int))
            return gq_err_set(err, GQ_EINVAL, "spec.activeDeadlineSeconds: must be an integer");
        /* Kubernetes' Terminating scope: activeDeadlineSeconds set and >= 0. */
        f.terminating = json_object_get_int64(ads) >= 0;
    }
    *out = f;
    return GQ_OK;
}

bool gq_pod_resource_claims(json_object *pod, gq_pod_claim *out)
{
    static const char *const refs[] = {"resourceClaimName", "resourceClaimTemplateName"};
    json_object *claims = gq_json_member(gq_json_member(pod, "spec"), "resourceClaims");
    size_t n = json_object_is_type(claims, json_type_array) ? json_object_array_length(claims) : 0;
    if (!n)
        return false;
    if (!out)
        return true;
    memset(out, 0, sizeof(*out));
    out->n = n;
    json_object *first = json_object_array_get_idx(claims, 0),
                *name = gq_json_member(first, "name");
    if (json_object_is_type(name, json_type_string))
        snprintf(out->name, sizeof(out->name), "%s", json_object_get_string(name));
    json_object *holders[] = {first, gq_json_member(first, "source")};
    for (size_t h = 0; h < 2 && !out->field; h++) {
        for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
            json_object *v = gq_json_member(holders[h], refs[i]);
            if (json_object_is_type(v, json_type_string)) {
                out->field = refs[i];
                snprintf(out->ref, sizeof(out->ref), "%s", json_object_get_string(v));
                break;
            }
        }
    }
    return true;
}

void gq_charge_from_cost(const gq_pod_cost *cost, bool terminal, gq_amounts *out)
{
    memset(out, 0, sizeof(*out));
    out->fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        out->set[k] = true;
    if (terminal || !cost)
        return;
    out->v[GQ_KEY_GPU_MEMORY] = cost->gpu_memory;
    out->v[GQ_KEY_GPUS] = cost->gpus;
    out->v[GQ_KEY_GPU_PODS] = cost->gpu_pods;
}

static bool charges_anything(const gq_amounts *c)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (c->set[k] && c->v[k] > 0)
            return true;
    return false;
}

gq_code gq_reservation_for_pod(json_object *pod, const char *ns, const char *request_uid,
                               const gq_amounts *charge, int64_t expires, gq_reservation *out,
                               gq_err *err)
{
    json_object *meta = gq_json_member(pod, "metadata");
    const char *key = gq_json_get_string(meta, "uid");
    const char *name = gq_json_get_string(meta, "name");
    gq_reservation r = {.expires = expires, .amounts = *charge};
    if (!key || !key[0])
        key = request_uid;
    if (!key || !key[0])
        return gq_err_set(err, GQ_EINVAL,
                          "reservation: the pod has no metadata.uid and the "
                          "request no uid");
    if (strlen(key) > GQ_CRD_MAX_STRING)
        return gq_err_set(err, GQ_ELIMIT, "reservation: key longer than %d bytes",
                          GQ_CRD_MAX_STRING);
    if (!name || !name[0])
        name = gq_json_get_string(meta, "generateName");
    r.key = strdup(key);
    r.namespace_ = strdup(ns ? ns : "");
    r.pod = strdup(name ? name : "");
    if (!r.key || !r.namespace_ || !r.pod) {
        gq_reservation_dispose(&r);
        return gq_err_set(err, GQ_ENOMEM, "reservation: out of memory");
    }
    *out = r;
    return GQ_OK;
}

/* --- matching ------------------------------------------------------------- */

static bool in_values(const gq_sel_req *r, const char *v)
{
    for (size_t i = 0; i < r->n_values; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

/* One requirement against a value that is present (val != NULL) or absent. */
static bool req_matches(const gq_sel_req *r, const char *val)
{
    switch (r->op) {
    case GQ_OP_IN:
        return val && in_values(r, val);
    case GQ_OP_NOT_IN:
        return !val || !in_values(r, val);
    case GQ_OP_EXISTS:
        return val != NULL;
    case GQ_OP_DOES_NOT_EXIST:
        return val == NULL;
    }
    return false;
}

bool gq_label_selector_matches(const gq_label_selector *s, json_object *labels)
{
    if (!s || !s->present)
        return false;
    for (size_t i = 0; i < s->n_match; i++) {
        const char *v = gq_json_get_string(labels, s->match_keys[i]);
        if (!v || strcmp(v, s->match_values[i]) != 0)
            return false;
    }
    for (size_t i = 0; i < s->n_exprs; i++)
        if (!req_matches(&s->exprs[i], gq_json_get_string(labels, s->exprs[i].key)))
            return false;
    return true;
}

static bool scopes_match(const gq_quota *q, const gq_pod_facts *pod)
{
    if ((q->scopes & GQ_SCOPE_TERMINATING) && !pod->terminating)
        return false;
    if ((q->scopes & GQ_SCOPE_NOT_TERMINATING) && pod->terminating)
        return false;
    /* Only PriorityClass is accepted by the parser. As in ResourceQuota, an
     * empty priorityClassName is no value at all: DoesNotExist and NotIn
     * match such pods, In and Exists do not. */
    const char *pc = pod->priority_class && pod->priority_class[0] ? pod->priority_class : NULL;
    for (size_t i = 0; i < q->n_scope_exprs; i++)
        if (!req_matches(&q->scope_exprs[i], pc))
            return false;
    return true;
}

bool gq_quota_covers_namespace(const gq_quota *q, const char *ns, json_object *ns_labels)
{
    if (!q || !ns)
        return false;
    if (q->kind == GQ_QUOTA_NAMESPACED)
        return q->namespace_ && strcmp(q->namespace_, ns) == 0;
    for (size_t i = 0; i < q->n_namespaces; i++)
        if (strcmp(q->namespaces[i], ns) == 0)
            return true;
    return gq_label_selector_matches(&q->ns_selector, ns_labels);
}

bool gq_quota_matches(const gq_quota *q, const gq_pod_facts *pod, json_object *ns_labels)
{
    if (!q || !pod || !gq_quota_covers_namespace(q, pod->namespace_, ns_labels))
        return false;
    return scopes_match(q, pod);
}

bool gq_quota_limits(const gq_quota *q, const gq_amounts *charge)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (charge->v[k] <= 0)
            continue;
        if (q->hard.set[k])
            return true;
        /* A quota limiting models only still limits the pods it governs. */
        for (size_t m = 0; m < q->n_models; m++)
            if (q->models[m].hard.set[k])
                return true;
    }
    return false;
}

/* --- evaluation ------------------------------------------------------------ */

static gq_code add_checked(int64_t *acc, int64_t v, const char *what, gq_qkey k, gq_err *err)
{
    if (__builtin_add_overflow(*acc, v, acc))
        return gq_err_set(err, GQ_ERANGE, "%s: %s overflows", what, gq_qkey_name(k));
    return GQ_OK;
}

/* base plus q's reservations live at now, but skip_key's; when model is
 * set, only those recorded for model and those of unpinned pods (charged
 * against every model). */
static gq_code in_use(const gq_quota *q, const gq_amounts *base, const char *model, int64_t now,
                      const char *skip_key, gq_amounts *out, gq_err *err)
{
    gq_live_filter f = {.now = now, .skip_key = skip_key, .model = model, .what = q->name};
    return gq_reservations_sum(base, q->reservations, q->n_reservations, &f, out, err);
}

gq_code gq_quota_in_use(const gq_quota *q, int64_t now, const char *skip_key, gq_amounts *out,
                        gq_err *err)
{
    return in_use(q, &q->used, NULL, now, skip_key, out, err);
}

gq_code gq_quota_model_in_use(const gq_quota *q, const gq_model_limit *m, int64_t now,
                              const char *skip_key, gq_amounts *out, gq_err *err)
{
    return in_use(q, &m->used, m->name, now, skip_key, out, err);
}

/* GPUQuota before GPUTenantQuota, then by name: a stable, documented order. */
static int check_order_cmp(const void *pa, const void *pb)
{
    const gq_quota *a = *(const gq_quota *const *)pa;
    const gq_quota *b = *(const gq_quota *const *)pb;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* "k=v,k=v" with every key prefixed by "model/" when model is set. */
static void print_list_for(gq_buf *b, const char *model, const gq_amounts *a,
                           const bool mask[GQ_KEY_COUNT])
{
    bool first = true;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!mask[k])
            continue;
        char buf[GQ_QUANTITY_STR_MAX];
        gq_amount_format(a, (gq_qkey)k, buf);
        gq_buf_printf(b, "%s%s%s%s=%s", first ? "" : ",", model ? model : "", model ? "/" : "",
                      gq_qkey_name((gq_qkey)k), buf);
        first = false;
    }
}

/* One set of limits (spec.hard, or spec.models.<model> when model is set)
 * against what is in use. */
static gq_code check_limits(const gq_quota *q, const char *model, const gq_amounts *hard,
                            const gq_amounts *used, const gq_amounts *charge, bool *limits_charge,
                            gq_err *err)
{
    bool exceeded[GQ_KEY_COUNT] = {false};
    bool any = false;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        /* Zero charges are dropped before comparing, as ResourceQuota does:
         * hard 0 blocks only pods that actually charge that key. */
        if (!hard->set[k] || !charge->set[k] || charge->v[k] <= 0)
            continue;
        *limits_charge = true;
        int64_t total = used->v[k];
        if (__builtin_add_overflow(total, charge->v[k], &total) || total > hard->v[k]) {
            exceeded[k] = true;
            any = true;
        }
    }
    if (!any)
        return GQ_OK;
    gq_buf b;
    gq_buf_init(&b, POLICY_MSG_MAX);
    gq_buf_printf(&b,
                  "exceeded %squota: %s, requested: ", q->kind == GQ_QUOTA_TENANT ? "tenant " : "",
                  q->name);
    print_list_for(&b, model, charge, exceeded);
    gq_buf_puts(&b, ", used: ");
    print_list_for(&b, model, used, exceeded);
    gq_buf_puts(&b, ", limited: ");
    print_list_for(&b, model, hard, exceeded);
    return deny_with(&b, "", err);
}

static gq_code check_one(const gq_quota *q, const gq_pod_facts *pod, const gq_amounts *charge,
                         int64_t now, const char *skip_key, bool *limits_charge, gq_err *err)
{
    gq_amounts used;
    gq_code rc = gq_quota_in_use(q, now, skip_key, &used, err);
    if (rc)
        return rc;
    *limits_charge = false;
    if ((rc = check_limits(q, NULL, &q->hard, &used, charge, limits_charge, err)))
        return rc;
    if (!q->n_models)
        return GQ_OK;
    /* A pinned pod: its model's limits, if the quota lists it. An unpinned
     * pod could land on any model, so it is charged against every model's
     * limits: no model's budget can be taken by not naming it. */
    for (size_t i = 0; i < q->n_models; i++) {
        const gq_model_limit *m = &q->models[i];
        if (pod->model && strcmp(pod->model, m->name))
            continue;
        if ((rc = gq_quota_model_in_use(q, m, now, skip_key, &used, err)) ||
            (rc = check_limits(q, m->name, &m->hard, &used, charge, limits_charge, err)))
            return rc;
    }
    return GQ_OK;
}

gq_code gq_quota_evaluate(const gq_quota_snapshot *s, const gq_pod_facts *pod,
                          const gq_amounts *charge, size_t *charge_idx, size_t *n_charge,
                          gq_err *err)
{
    const gq_quota *const *quotas = s->quotas;
    size_t n = s->n;
    gq_code rc = GQ_OK;
    size_t n_out = 0, n_matched = 0;
    const gq_quota **order = NULL;
    if (!charges_anything(charge)) {
        /* CPU-only and terminal pods are never limited by GPU quota. */
        *n_charge = 0;
        return GQ_OK;
    }
    if (n) {
        order = malloc(n * sizeof(*order));
        if (!order)
            return gq_err_oom(err);
        memcpy(order, quotas, n * sizeof(*order));
        qsort(order, n, sizeof(*order), check_order_cmp);
    }
    for (size_t i = 0; i < n; i++) {
        if (!gq_quota_matches(order[i], pod, s->ns_labels))
            continue;
        n_matched++;
        bool limits;
        rc = check_one(order[i], pod, charge, s->now, s->reservation_key, &limits, err);
        if (rc)
            goto out;
        if (!limits)
            continue;
        for (size_t j = 0; j < n; j++) {
            if (quotas[j] == order[i]) {
                charge_idx[n_out++] = j;
                break;
            }
        }
    }
    if (s->require_quota && n_matched == 0) {
        gq_buf b;
        bool mask[GQ_KEY_COUNT];
        gq_buf_init(&b, POLICY_MSG_MAX);
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            mask[k] = charge->set[k] && charge->v[k] > 0;
        bool first = true;
        for (int k = 0; k < GQ_KEY_COUNT; k++) {
            if (!mask[k])
                continue;
            gq_buf_printf(&b, "%s%s", first ? "" : ",", gq_qkey_name((gq_qkey)k));
            first = false;
        }
        rc = deny_with(&b, "insufficient quota to consume: ", err);
        goto out;
    }
    *n_charge = n_out;
out:
    free(order);
    return rc;
}

/* --- recount ------------------------------------------------------------------ */

void gq_usage_init(gq_usage *u)
{
    if (!u)
        return;
    memset(u, 0, sizeof(*u));
    u->used.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    u->queued.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
}

void gq_usage_dispose(gq_usage *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->n_ns; i++)
        free(u->ns[i].name);
    free(u->ns);
    for (size_t i = 0; i < u->n_claims; i++)
        gq_reservation_dispose(&u->claims[i]);
    free(u->claims);
    free(u->by_model);
    gq_usage_init(u);
}

static int claim_ref_cmp(const void *pa, const void *pb)
{
    const gq_claim_ref *a = pa, *b = pb;
    int c = strcmp(a->claim->uid, b->claim->uid);
    if (c)
        return c;
    if (a->claim->memory != b->claim->memory)
        return a->claim->memory > b->claim->memory ? -1 : 1;
    if (a->claim->gpus != b->claim->gpus)
        return a->claim->gpus > b->claim->gpus ? -1 : 1;
    return a->owner < b->owner ? -1 : a->owner > b->owner;
}

size_t gq_claims_once(gq_claim_ref *refs, size_t n, bool (*charged)(void *ud, const char *uid),
                      void *ud)
{
    size_t kept = 0;
    if (n > 1)
        qsort(refs, n, sizeof(*refs), claim_ref_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i && !strcmp(refs[i].claim->uid, refs[i - 1].claim->uid))
            continue; /* the same claim: the first of its run was decided */
        if (charged && charged(ud, refs[i].claim->uid))
            continue;
        gq_claim_ref r = refs[i];
        refs[i] = refs[kept];
        refs[kept++] = r;
    }
    return kept;
}

void gq_claim_amounts(const gq_shared_claim *c, gq_amounts *out)
{
    memset(out, 0, sizeof(*out));
    out->fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        out->set[k] = true;
    out->v[GQ_KEY_GPU_MEMORY] = c->memory;
    out->v[GQ_KEY_GPUS] = c->gpus;
}

void gq_charge_own(const gq_amounts *charge, const gq_shared_claim *c, size_t n, gq_amounts *out)
{
    *out = *charge;
    for (size_t i = 0; i < n; i++) {
        gq_amounts a;
        gq_claim_amounts(&c[i], &a);
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            out->v[k] = out->v[k] > a.v[k] ? out->v[k] - a.v[k] : 0;
    }
}

static int pod_ns_cmp(const void *pa, const void *pb)
{
    const gq_usage_pod *a = *(const gq_usage_pod *const *)pa;
    const gq_usage_pod *b = *(const gq_usage_pod *const *)pb;
    return strcmp(a->facts.namespace_, b->facts.namespace_);
}

/* Whether pods are already in namespace order (equal pointers are equal
 * namespaces without a strcmp). */
static bool sorted_by_ns(const gq_usage_pod **m, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (m[i]->facts.namespace_ != m[i - 1]->facts.namespace_ &&
            strcmp(m[i - 1]->facts.namespace_, m[i]->facts.namespace_) > 0)
            return false;
    return true;
}

static gq_code accumulate(gq_amounts *acc, const gq_quota *q, const gq_amounts *c, gq_err *err)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!acc->set[k] || !c->set[k])
            continue;
        gq_code rc = add_checked(&acc->v[k], c->v[k], q->name, (gq_qkey)k, err);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

/* Add c to the usage of the models a pod with facts f counts against. */
static gq_code accumulate_models(gq_usage *u, const gq_quota *q, const gq_pod_facts *f,
                                 const gq_amounts *c, gq_err *err)
{
    for (size_t j = 0; j < q->n_models; j++) {
        /* Unpinned pods count against every model (gq_quota_evaluate). */
        if (f->model && strcmp(f->model, q->models[j].name))
            continue;
        gq_code rc = accumulate(&u->by_model[j], q, c, err);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

static int ns_usage_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const gq_named_usage *)elem)->name);
}

/* Count each distinct shared claim of refs[0..n) (owners index pods) once:
 * in used, per model, per namespace, and as a counted claim record. */
static gq_code count_claims(gq_usage *u, const gq_quota *q, const gq_usage_pod *pods,
                            gq_claim_ref *refs, size_t n, gq_err *err)
{
    size_t kept = gq_claims_once(refs, n, NULL, NULL);
    if (kept && !(u->claims = calloc(kept, sizeof(*u->claims))))
        return gq_err_oom(err);
    for (size_t i = 0; i < kept; i++) {
        const gq_shared_claim *c = refs[i].claim;
        const gq_usage_pod *p = &pods[refs[i].owner];
        gq_reservation *r = &u->claims[u->n_claims];
        gq_amounts a;
        gq_code rc;
        gq_claim_amounts(c, &a);
        r->key = strdup(c->uid);
        r->namespace_ = strdup(p->facts.namespace_);
        r->pod = strdup(c->name);
        r->model = c->model ? strdup(c->model->name) : NULL;
        r->amounts = a;
        r->claim = r->counted = true;
        u->n_claims++;
        if (!r->key || !r->namespace_ || !r->pod || (c->model && !r->model))
            return gq_err_oom(err);
        if ((rc = accumulate(&u->used, q, &a, err)) ||
            (rc = accumulate_models(u, q, &p->facts, &a, err)))
            return rc;
        gq_named_usage *nu =
            u->n_ns ? bsearch(p->facts.namespace_, u->ns, u->n_ns, sizeof(*u->ns), ns_usage_cmp)
                    : NULL;
        if (nu && (rc = accumulate(&nu->used, q, &a, err)))
            return rc;
    }
    return GQ_OK;
}

/* An empty usage of q: the keys its spec limits, one entry per model. */
static gq_code usage_start(const gq_quota *q, gq_usage *u, gq_err *err)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        u->used.set[k] = u->queued.set[k] = q->hard.set[k];
    if (!q->n_models)
        return GQ_OK;
    if (!(u->by_model = calloc(q->n_models, sizeof(*u->by_model))))
        return gq_err_oom(err);
    u->n_by_model = q->n_models;
    for (size_t i = 0; i < q->n_models; i++) {
        u->by_model[i].fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            u->by_model[i].set[k] = q->models[i].hard.set[k];
    }
    return GQ_OK;
}

/* A growable list of the shared claims the counted pods name. */
typedef struct claim_refs {
    gq_claim_ref *v;
    size_t n, cap;
} claim_refs;

static gq_code claim_refs_add(claim_refs *r, const gq_shared_claim *c, size_t pod, gq_err *err)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 16;
        gq_claim_ref *nr = nc < SIZE_MAX / sizeof(*nr) ? realloc(r->v, nc * sizeof(*nr)) : NULL;
        if (!nr)
            return gq_err_oom(err);
        r->v = nr;
        r->cap = nc;
    }
    r->v[r->n++] = (gq_claim_ref){c, pod};
    return GQ_OK;
}

/* A tenant's usage per namespace over its counted pods m[0..nm). Sorted
 * once and aggregated in runs: linear in pods after the sort, so a tenant
 * over a thousand namespaces stays cheap. Callers that pass pods grouped by
 * sorted namespace (the controller) skip the sort. */
static gq_code usage_by_namespace(const gq_quota *q, const gq_usage_pod **m, size_t nm, gq_usage *u,
                                  gq_err *err)
{
    if (!sorted_by_ns(m, nm))
        qsort(m, nm, sizeof(*m), pod_ns_cmp);
    if (!(u->ns = calloc(nm, sizeof(*u->ns))))
        return gq_err_oom(err);
    for (size_t i = 0; i < nm; i++) {
        if (u->n_ns == 0 || (m[i]->facts.namespace_ != m[i - 1]->facts.namespace_ &&
                             strcmp(u->ns[u->n_ns - 1].name, m[i]->facts.namespace_) != 0)) {
            gq_named_usage *nu = &u->ns[u->n_ns];
            if (!(nu->name = strdup(m[i]->facts.namespace_)))
                return gq_err_oom(err);
            u->n_ns++;
            nu->used.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
            for (int k = 0; k < GQ_KEY_COUNT; k++)
                nu->used.set[k] = q->hard.set[k];
        }
        gq_amounts own;
        gq_charge_own(&m[i]->charge, m[i]->claims, m[i]->n_claims, &own);
        gq_code rc = accumulate(&u->ns[u->n_ns - 1].used, q, &own, err);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

gq_code gq_quota_recount(const gq_quota *q, const gq_usage_pod *pods, size_t n, gq_usage *out,
                         gq_err *err)
{
    gq_code rc;
    gq_usage u;
    const gq_usage_pod **m = NULL;
    claim_refs refs = {NULL, 0, 0};
    size_t nm = 0;
    gq_usage_init(&u);
    if ((rc = usage_start(q, &u, err)))
        goto out;
    if (n && !(m = malloc(n * sizeof(*m)))) {
        rc = gq_err_oom(err);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const gq_usage_pod *p = &pods[i];
        gq_amounts own;
        if (p->facts.terminal || !charges_anything(&p->charge))
            continue;
        if (!gq_quota_matches(q, &p->facts, p->ns_labels))
            continue;
        if (p->queued) {
            if (!gq_quota_limits(q, &p->charge))
                continue;
            if ((rc = accumulate(&u.queued, q, &p->charge, err)))
                goto out;
            u.queued_pods++;
            continue;
        }
        /* The pod's own part here; its shared claims once each below. */
        gq_charge_own(&p->charge, p->claims, p->n_claims, &own);
        if ((rc = accumulate(&u.used, q, &own, err)) ||
            (rc = accumulate_models(&u, q, &p->facts, &own, err)))
            goto out;
        for (size_t j = 0; j < p->n_claims; j++)
            if ((rc = claim_refs_add(&refs, &p->claims[j], i, err)))
                goto out;
        m[nm++] = p;
    }
    if (q->kind == GQ_QUOTA_TENANT && nm && (rc = usage_by_namespace(q, m, nm, &u, err)))
        goto out;
    if ((rc = count_claims(&u, q, pods, refs.v, refs.n, err)))
        goto out;
    gq_usage_dispose(out);
    *out = u;
    gq_usage_init(&u);
out:
    gq_usage_dispose(&u);
    free(refs.v);
    free(m);
    return rc;
}

gq_code gq_usage_to_status(const gq_quota *q, const gq_usage *u, gq_quota_status *st, gq_err *err)
{
    gq_named_usage m[GQ_CRD_MAX_QUOTA_MODELS];
    size_t n = 0;
    st->has_used = true;
    st->used = u->used;
    /* A GPUQuota that may borrow says how much of what it uses is borrowed. */
    st->has_borrowed = false;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        st->has_borrowed = st->has_borrowed || q->borrowing_limit.set[k];
    if (st->has_borrowed) {
        gq_amounts_clear(&st->borrowed);
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (q->hard.set[k]) {
                st->borrowed.set[k] = true;
                st->borrowed.v[k] = u->used.v[k] > q->hard.v[k] ? u->used.v[k] - q->hard.v[k] : 0;
            }
    }
    for (size_t i = 0; i < q->n_models && i < u->n_by_model && n < GQ_CRD_MAX_QUOTA_MODELS; i++)
        m[n++] = (gq_named_usage){q->models[i].name, u->by_model[i]};
    gq_code rc = q->n_models ? gq_quota_status_set_models(st, m, n, err) : GQ_OK;
    if (!rc && q->kind == GQ_QUOTA_TENANT)
        rc = gq_quota_status_set_namespaces(st, u->ns, u->n_ns, err);
    return rc;
}

gq_code gq_model_choose(const gq_model_option *opts, size_t n, const gq_quota_snapshot *s,
                        const gq_pod_facts *pod, size_t *chosen, gq_err *err)
{
    gq_code rc = GQ_OK;
    size_t *idx = NULL, n_idx = 0;
    gq_buf b;
    gq_buf_init(&b, POLICY_MSG_MAX);
    if (!n)
        return gq_err_set(err, GQ_EINVAL, "no GPU model to choose from");
    if (s->n && !(idx = calloc(s->n, sizeof(*idx))))
        return gq_err_oom(err);
    for (size_t i = 0; i < n; i++) {
        gq_pod_facts f = *pod;
        gq_err e;
        gq_err_clear(&e);
        f.model = opts[i].model;
        rc = gq_quota_evaluate(s, &f, &opts[i].charge, idx, &n_idx, &e);
        if (rc == GQ_OK) {
            *chosen = i;
            goto out;
        }
        if (rc != GQ_EDENIED) {
            gq_err_set(err, rc, "%s", e.msg);
            goto out;
        }
        gq_buf_printf(&b, "%s%s: %s", i ? "; " : "", opts[i].model, e.msg);
    }
    rc = deny_with(&b, "no accepted GPU model fits: ", err);
out:
    gq_buf_dispose(&b);
    free(idx);
    return rc;
}

const char *gq_pod_model(const gq_pod_cost *cost)
{
    return cost->model && cost->model_pinned ? cost->model->name : NULL;
}

/* --- GPULimitRange -------------------------------------------------------------- */

static bool pod_is_exclusive(json_object *pod)
{
    const char *v = gq_json_get_string(
        gq_json_member(gq_json_member(pod, "metadata"), "annotations"), GQ_ANN_EXCLUSIVE);
    return v && strcmp(v, "true") == 0;
}

gq_code gq_limit_defaults(json_object *pod, const gq_pod_cost *cost,
                          const gq_limit_range *const *lrs, size_t n, gq_ctr_default **out,
                          size_t *n_out, gq_err *err)
{
    const gq_limit_range *src = NULL;
    const gq_limit_item *item = NULL;
    gq_ctr_default *v = NULL;
    size_t nv = 0;
    if (cost->n_ctrs == 0 || pod_is_exclusive(pod))
        goto done;
    /* First GPULimitRange in name order with a Container default wins. */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < lrs[i]->n_items; j++) {
            const gq_limit_item *it = &lrs[i]->items[j];
            if (it->type != GQ_LIMIT_CONTAINER || !it->has_default)
                continue;
            if (!src || strcmp(lrs[i]->name, src->name) < 0) {
                src = lrs[i];
                item = it;
            }
            break;
        }
    }
    if (!src)
        goto done;
    for (size_t i = 0; i < cost->n_ctrs; i++) {
        const gq_ctr_cost *c = &cost->ctrs[i];
        if (c->form != GQ_FORM_WHOLE || c->gpus <= 0)
            continue;
        if (!v) {
            v = calloc(cost->n_ctrs, sizeof(*v));
            if (!v)
                return gq_err_oom(err);
        }
        gq_ctr_default *d = &v[nv++];
        d->kind = c->kind;
        d->index = c->index;
        snprintf(d->name, sizeof(d->name), "%s", c->name);
        d->gpus = c->gpus;
        d->memory_per_gpu = item->def.v[GQ_KEY_GPU_MEMORY];
        d->limit_range = src->name;
    }
done:
    *out = v;
    *n_out = nv;
    return GQ_OK;
}

/* Violations, de-duplicated and joined as Kubernetes' error aggregate does. */
typedef struct violations {
    char msgs[8][200];
    size_t n;
    size_t dropped;
    bool oom; /* a message could not be built */
} violations;

static void viol_add(violations *v, const char *fmt, ...) GQ_PRINTF(2, 3);
static void viol_add(violations *v, const char *fmt, ...)
{
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->msgs[i], m) == 0)
            return;
    if (v->n == sizeof(v->msgs) / sizeof(v->msgs[0])) {
        v->dropped++;
        return;
    }
    memcpy(v->msgs[v->n++], m, sizeof(m));
}

static void mem_checks(violations *v, const gq_limit_item *it, const char *type, int64_t charge)
{
    char lim[GQ_QUANTITY_STR_MAX], obs[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(charge, obs);
    if (it->has_min && charge < it->min.v[GQ_KEY_GPU_MEMORY]) {
        gq_amount_format(&it->min, GQ_KEY_GPU_MEMORY, lim);
        viol_add(v, "minimum gpu-memory usage per %s is %s, but request is %s", type, lim, obs);
    }
    if (it->has_max && charge > it->max.v[GQ_KEY_GPU_MEMORY]) {
        gq_amount_format(&it->max, GQ_KEY_GPU_MEMORY, lim);
        viol_add(v, "maximum gpu-memory usage per %s is %s, but limit is %s", type, lim, obs);
    }
}

static void gpus_check(violations *v, const gq_limit_item *it, const char *type, int64_t gpus)
{
    if (it->has_max_gpus && gpus > it->max_gpus)
        viol_add(v, "maximum gpus per %s is %lld, but limit is %lld", type, (long long)it->max_gpus,
                 (long long)gpus);
}

/* GPU devices the pod holds at once, by the same rule Kubernetes uses for
 * effective requests: app containers and sidecars run together; each init
 * container runs with the sidecars declared before it. */
static int64_t pod_devices(const gq_pod_cost *cost)
{
    int64_t run = 0, sidecars = 0, peak = 0;
    for (size_t i = 0; i < cost->n_ctrs; i++) {
        const gq_ctr_cost *c = &cost->ctrs[i];
        if (c->kind == GQ_CTR_INIT) {
            if (sidecars + c->gpus > peak)
                peak = sidecars + c->gpus;
        } else {
            run += c->gpus;
            if (c->kind == GQ_CTR_SIDECAR)
                sidecars += c->gpus;
        }
    }
    return run > peak ? run : peak;
}

static void model_check(violations *v, const gq_limit_item *it, const gq_pod_cost *cost,
                        const char *ns)
{
    if (it->n_allowed_models == 0)
        return;
    const char *model = cost->model ? cost->model->name : NULL;
    for (size_t i = 0; i < it->n_allowed_models; i++)
        if (model && strcasecmp(model, it->allowed_models[i]) == 0)
            return;
    gq_buf b;
    gq_buf_init(&b, POLICY_MSG_MAX);
    for (size_t i = 0; i < it->n_allowed_models; i++)
        gq_buf_printf(&b, "%s%s", i ? ", " : "", it->allowed_models[i]);
    const char *allowed = b.data ? b.data : "";
    v->oom |= b.err == GQ_ENOMEM;
    if (model)
        viol_add(v, "GPU model \"%s\" is not allowed in namespace \"%s\"; allowed: %s", model, ns,
                 allowed);
    else
        viol_add(v,
                 "GPU model must be set (annotation " GQ_ANN_GPU_MODEL
                 ") in namespace \"%s\"; allowed: %s",
                 ns, allowed);
    gq_buf_dispose(&b);
}

gq_code gq_limit_validate(const gq_pod_cost *cost, const char *ns, const gq_limit_range *const *lrs,
                          size_t n, gq_err *err)
{
    violations v = {.n = 0};
    if (cost->n_ctrs == 0)
        return GQ_OK;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < lrs[i]->n_items; j++) {
            const gq_limit_item *it = &lrs[i]->items[j];
            if (it->type == GQ_LIMIT_CONTAINER) {
                for (size_t c = 0; c < cost->n_ctrs; c++) {
                    const gq_ctr_cost *cc = &cost->ctrs[c];
                    int64_t total;
                    if (__builtin_mul_overflow(cc->gpus, cc->charged_per_gpu, &total))
                        total = INT64_MAX;
                    mem_checks(&v, it, "Container", total);
                    gpus_check(&v, it, "Container", cc->gpus);
                }
            } else {
                mem_checks(&v, it, "Pod", cost->gpu_memory);
                gpus_check(&v, it, "Pod", pod_devices(cost));
            }
            model_check(&v, it, cost, ns);
        }
    }
    if (v.oom)
        return gq_err_oom(err);
    if (v.n == 0)
        return GQ_OK;
    if (v.n == 1)
        return gq_err_set(err, GQ_EDENIED, "%s", v.msgs[0]);
    gq_buf b;
    gq_buf_init(&b, POLICY_MSG_MAX);
    for (size_t i = 0; i < v.n; i++)
        gq_buf_printf(&b, "%s%s", i ? ", " : "[", v.msgs[i]);
    if (v.dropped)
        gq_buf_printf(&b, ", and %zu more", v.dropped);
    gq_buf_puts(&b, "]");
    return deny_with(&b, "", err);
}
