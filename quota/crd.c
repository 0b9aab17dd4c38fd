/* gpuquota custom resources: bounded parsers. */
#include "quota/crd.h"
#include "common/json_member.h"
#include "common/strutil.h"
#include "quota/field.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of o's value among names[0..n), which it must equal exactly. */
static gq_code parse_enum(json_object *o, const char *field, const char *const *names, size_t n,
                          size_t *out, gq_err *err)
{
    const char *s = NULL;
    gq_code rc = gq_field_string(o, field, &s, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return GQ_OK;
        }
    return gq_err_set(err, GQ_EINVAL, "%s: unsupported value \"%.64s\": must be %s or %s", field, s,
                      names[0], n > 1 ? names[1] : names[0]);
}

/* --- selectors ----------------------------------------------------------- */

static void sel_req_dispose(gq_sel_req *r)
{
    free(r->key);
    gq_strv_free(r->values, r->n_values);
    memset(r, 0, sizeof(*r));
}

static void sel_reqs_free(gq_sel_req *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        sel_req_dispose(&v[i]);
    free(v);
}

static gq_code parse_op(json_object *o, const char *field, gq_sel_op *out, gq_err *err)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist"};
    const char *s = NULL;
    gq_code rc = gq_field_string(o, field, &s, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (strcmp(s, ops[i]) == 0) {
            *out = (gq_sel_op)i;
            return GQ_OK;
        }
    }
    return gq_err_set(err, GQ_EINVAL,
                      "%s: unsupported operator \"%.64s\"; supported: In, NotIn, Exists, "
                      "DoesNotExist",
                      field, s);
}

/* One requirement: key_field is "key" (label selector) or "scopeName". */
static gq_code parse_sel_req(json_object *o, const char *field, const char *key_field,
                             gq_sel_req *out, gq_err *err)
{
    char f[192];
    gq_sel_req r = {0};
    gq_code rc = gq_field_object(o, field, err);
    if (rc)
        return rc;
    snprintf(f, sizeof(f), "%s.%s", field, key_field);
    rc = gq_field_dup_string(gq_json_member(o, key_field), f, &r.key, err);
    if (rc)
        goto out;
    if (!r.key[0]) {
        rc = gq_err_set(err, GQ_EINVAL, "%s: must not be empty", f);
        goto out;
    }
    snprintf(f, sizeof(f), "%s.operator", field);
    rc = parse_op(gq_json_member(o, "operator"), f, &r.op, err);
    if (rc)
        goto out;
    snprintf(f, sizeof(f), "%s.values", field);
    json_object *vals = gq_json_member(o, "values");
    if (vals) {
        rc = gq_field_dup_strings(vals, f, GQ_CRD_MAX_VALUES, &r.values, &r.n_values, err);
        if (rc)
            goto out;
    }
    /* Same rule as metav1.LabelSelector and ScopedResourceSelectorRequirement. */
    if ((r.op == GQ_OP_IN || r.op == GQ_OP_NOT_IN) && r.n_values == 0) {
        rc = gq_err_set(err, GQ_EINVAL, "%s: must be specified when `operator` is 'In' or 'NotIn'",
                        f);
        goto out;
    }
    if ((r.op == GQ_OP_EXISTS || r.op == GQ_OP_DOES_NOT_EXIST) && r.n_values != 0) {
        rc =
            gq_err_set(err, GQ_EINVAL,
                       "%s: may not be specified when `operator` is 'Exists' or 'DoesNotExist'", f);
        goto out;
    }
    *out = r;
    return GQ_OK;
out:
    sel_req_dispose(&r);
    return rc;
}

static gq_code parse_sel_reqs(json_object *arr, const char *field, const char *key_field,
                              gq_sel_req **out, size_t *n_out, gq_err *err)
{
    size_t n = 0;
    gq_code rc = gq_field_array(arr, field, GQ_CRD_MAX_EXPRESSIONS, &n, err);
    if (rc)
        return rc;
    gq_sel_req *v = n ? calloc(n, sizeof(*v)) : NULL;
    if (n && !v)
        return gq_err_set(err, GQ_ENOMEM, "%s: out of memory", field);
    for (size_t i = 0; i < n; i++) {
        char f[128];
        snprintf(f, sizeof(f), "%s[%zu]", field, i);
        rc = parse_sel_req(json_object_array_get_idx(arr, i), f, key_field, &v[i], err);
        if (rc) {
            sel_reqs_free(v, i);
            return rc;
        }
    }
    *out = v;
    *n_out = n;
    return GQ_OK;
}

static void label_selector_dispose(gq_label_selector *s)
{
    gq_strv_free(s->match_keys, s->n_match);
    gq_strv_free(s->match_values, s->n_match);
    sel_reqs_free(s->exprs, s->n_exprs);
    memset(s, 0, sizeof(*s));
}

static gq_code parse_label_selector(json_object *o, const char *field, gq_label_selector *out,
                                    gq_err *err)
{
    gq_label_selector s = {.present = true};
    char f[192];
    gq_code rc = gq_field_object(o, field, err);
    if (rc)
        return rc;
    json_object *ml = gq_json_member(o, "matchLabels");
    if (ml) {
        snprintf(f, sizeof(f), "%s.matchLabels", field);
        rc = gq_field_object(ml, f, err);
        if (rc)
            goto out;
        size_t n = (size_t)json_object_object_length(ml);
        if (n > GQ_CRD_MAX_EXPRESSIONS) {
            rc = gq_err_set(err, GQ_ELIMIT, "%s: more than %d labels", f, GQ_CRD_MAX_EXPRESSIONS);
            goto out;
        }
        if (n) {
            s.match_keys = calloc(n, sizeof(char *));
            s.match_values = calloc(n, sizeof(char *));
            if (!s.match_keys || !s.match_values) {
                rc = gq_err_set(err, GQ_ENOMEM, "%s: out of memory", f);
                goto out;
            }
        }
        json_object_object_foreach(ml, key, val)
        {
            char vf[288];
            snprintf(vf, sizeof(vf), "%s.%.64s", f, key);
            if (strlen(key) > GQ_CRD_MAX_STRING) {
                rc = gq_err_set(err, GQ_ELIMIT, "%s: key too long", f);
                goto out;
            }
            s.match_keys[s.n_match] = strdup(key);
            if (!s.match_keys[s.n_match]) {
                rc = gq_err_set(err, GQ_ENOMEM, "%s: out of memory", f);
                goto out;
            }
            /* Count the key now so dispose frees it if the value fails. */
            rc = gq_field_dup_string(val, vf, &s.match_values[s.n_match], err);
            s.n_match++;
            if (rc)
                goto out;
        }
    }
    json_object *me = gq_json_member(o, "matchExpressions");
    if (me) {
        snprintf(f, sizeof(f), "%s.matchExpressions", field);
        rc = parse_sel_reqs(me, f, "key", &s.exprs, &s.n_exprs, err);
        if (rc)
            goto out;
    }
    *out = s;
    return GQ_OK;
out:
    label_selector_dispose(&s);
    return rc;
}

/* --- quotas ------------------------------------------------------------- */

static void quota_reservations_free(gq_quota *q)
{
    for (size_t i = 0; i < q->n_reservations; i++)
        gq_reservation_dispose(&q->reservations[i]);
    free(q->reservations);
    q->reservations = NULL;
    q->n_reservations = 0;
}

void gq_quota_free(gq_quota *q)
{
    if (!q)
        return;
    free(q->name);
    free(q->namespace_);
    free(q->cohort);
    sel_reqs_free(q->scope_exprs, q->n_scope_exprs);
    gq_strv_free(q->namespaces, q->n_namespaces);
    label_selector_dispose(&q->ns_selector);
    quota_reservations_free(q);
    for (size_t i = 0; i < q->n_models; i++)
        free(q->models[i].name);
    free(q->models);
    free(q);
}

gq_code gq_quota_list_append(gq_quota ***qs, size_t *n, json_object *arr, size_t *skipped,
                             gq_err *err)
{
    size_t add =
        arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    if (!add)
        return GQ_OK;
    if (*n > SIZE_MAX / sizeof(**qs) - add)
        return gq_err_oom(err);
    gq_quota **grown = realloc(*qs, (*n + add) * sizeof(*grown));
    if (!grown)
        return gq_err_oom(err);
    *qs = grown;
    for (size_t i = 0; i < add; i++) {
        json_object *o = json_object_array_get_idx(arr, i);
        gq_code rc = gq_quota_parse(o, &grown[*n], skipped ? NULL : err);
        if (rc == GQ_ENOMEM)
            return gq_err_oom(err);
        if (rc && skipped) {
            (*skipped)++;
            continue;
        }
        if (rc) {
            const char *name = gq_json_meta_string(o, "name"),
                       *kind = gq_json_get_string(o, "kind");
            gq_err_prefix(err, "%s %s", kind ? kind : "quota", name ? name : "(unnamed)");
            return rc;
        }
        (*n)++;
    }
    return GQ_OK;
}

void gq_quota_list_free(gq_quota **qs, size_t n)
{
    for (size_t i = 0; qs && i < n; i++)
        gq_quota_free(qs[i]);
    free(qs);
}

const gq_model_limit *gq_quota_model_limit(const gq_quota *q, const char *model)
{
    for (size_t i = 0; model && i < q->n_models; i++)
        if (!strcmp(q->models[i].name, model))
            return &q->models[i];
    return NULL;
}

static int model_limit_cmp(const void *a, const void *b)
{
    return strcmp(((const gq_model_limit *)a)->name, ((const gq_model_limit *)b)->name);
}

/* A model name as spec.models keys it: lower-case letters, digits, '-', '.'
 * and '_', 1..GQ_CRD_MAX_MODEL_NAME long (the catalog's names and every name
 * a config may add). */
static bool model_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > GQ_CRD_MAX_MODEL_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
            return false;
    }
    return true;
}

/* spec.models: {name: {gpu-memory, gpus, gpu-pods}}. */
static gq_code parse_quota_models(json_object *o, gq_quota *q, gq_err *err)
{
    gq_code rc = gq_field_object(o, "spec.models", err);
    if (rc)
        return rc;
    size_t n = (size_t)json_object_object_length(o);
    if (n > GQ_CRD_MAX_QUOTA_MODELS)
        return gq_err_set(err, GQ_ELIMIT, "spec.models: more than %d models",
                          GQ_CRD_MAX_QUOTA_MODELS);
    if (!n)
        return GQ_OK;
    if (!(q->models = calloc(n, sizeof(*q->models))))
        return gq_err_oom(err);
    json_object_object_foreach(o, key, val)
    {
        char f[GQ_CRD_MAX_MODEL_NAME + 32];
        if (!model_name_ok(key))
            return gq_err_set(err, GQ_EINVAL,
                              "spec.models: \"%.64s\" is not a model name (lower-case letters, "
                              "digits, '-', '.', '_'; at most %d characters)",
                              key, GQ_CRD_MAX_MODEL_NAME);
        snprintf(f, sizeof(f), "spec.models.%s", key);
        gq_model_limit *m = &q->models[q->n_models];
        gq_amounts_clear(&m->used);
        if ((rc = gq_amounts_parse(val, f, &m->hard, err)))
            return rc;
        if (!(m->name = strdup(key)))
            return gq_err_oom(err);
        q->n_models++;
    }
    qsort(q->models, q->n_models, sizeof(*q->models), model_limit_cmp);
    return GQ_OK;
}

/* What parse_meta reads of an object: its kind's index in the kinds it
 * was given, and metadata name (not empty), namespace (NULL when absent),
 * generation (0 when absent) and uid. The caller owns name and ns. */
typedef struct crd_meta {
    size_t kind;
    char *name, *ns;
    int64_t generation;
    char uid[GQ_CRD_UID_MAX + 1]; /* "" when absent or longer */
} crd_meta;

/* apiVersion ours and kind one of kinds: *kind_idx its index. */
static gq_code parse_type(json_object *obj, const char *const *kinds, size_t n_kinds,
                          size_t *kind_idx, gq_err *err)
{
    const char *s = NULL;
    gq_code rc = gq_field_string(gq_json_member(obj, "apiVersion"), "apiVersion", &s, err);
    if (rc)
        return rc;
    if (strcmp(s, GQ_API_VERSION) != 0)
        return gq_err_set(err, GQ_EINVAL, "apiVersion: must be %s, got \"%.64s\"", GQ_API_VERSION,
                          s);
    rc = gq_field_string(gq_json_member(obj, "kind"), "kind", &s, err);
    if (rc)
        return rc;
    for (size_t k = 0; k < n_kinds; k++) {
        if (strcmp(s, kinds[k]) == 0) {
            *kind_idx = k;
            return GQ_OK;
        }
    }
    return gq_err_set(err, GQ_EINVAL, "kind: unexpected kind \"%.64s\"", s);
}

/* apiVersion, kind (one of kinds), metadata.name, metadata.namespace,
 * metadata.generation; *m written only on success. */
static gq_code parse_meta(json_object *obj, const char *const *kinds, size_t n_kinds, crd_meta *m,
                          gq_err *err)
{
    crd_meta r = {0};
    gq_code rc = gq_field_object(obj, "object", err);
    if (rc || (rc = parse_type(obj, kinds, n_kinds, &r.kind, err)))
        return rc;
    json_object *meta = gq_json_member(obj, "metadata");
    rc = gq_field_object(meta, "metadata", err);
    if (rc)
        return rc;
    rc = gq_field_dup_string(gq_json_member(meta, "name"), "metadata.name", &r.name, err);
    if (rc)
        return rc;
    if (!r.name[0]) {
        rc = gq_err_set(err, GQ_EINVAL, "metadata.name: must not be empty");
        goto fail;
    }
    json_object *nso = gq_json_member(meta, "namespace");
    if (nso && (rc = gq_field_dup_string(nso, "metadata.namespace", &r.ns, err)))
        goto fail;
    json_object *g = gq_json_member(meta, "generation");
    if (g) {
        if (!json_object_is_type(g, json_type_int)) {
            rc = gq_err_set(err, GQ_EINVAL, "metadata.generation: must be an integer");
            goto fail;
        }
        r.generation = json_object_get_int64(g);
    }
    json_object *u = gq_json_member(meta, "uid");
    if (json_object_is_type(u, json_type_string) && json_object_get_string_len(u) <= GQ_CRD_UID_MAX)
        memcpy(r.uid, json_object_get_string(u), (size_t)json_object_get_string_len(u) + 1);
    *m = r;
    return GQ_OK;
fail:
    free(r.name);
    free(r.ns);
    return rc;
}

static gq_code parse_scopes(json_object *arr, unsigned *out, gq_err *err)
{
    size_t n = 0;
    unsigned bits = 0;
    gq_code rc = gq_field_array(arr, "spec.scopes", GQ_CRD_MAX_VALUES, &n, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        char f[64];
        const char *s = NULL;
        snprintf(f, sizeof(f), "spec.scopes[%zu]", i);
        rc = gq_field_string(json_object_array_get_idx(arr, i), f, &s, err);
        if (rc)
            return rc;
        if (strcmp(s, "Terminating") == 0)
            bits |= GQ_SCOPE_TERMINATING;
        else if (strcmp(s, "NotTerminating") == 0)
            bits |= GQ_SCOPE_NOT_TERMINATING;
        else
            return gq_err_set(err, GQ_EINVAL,
                              "%s: unsupported scope \"%.64s\"; supported: Terminating, "
                              "NotTerminating",
                              f, s);
    }
    if (bits == (GQ_SCOPE_TERMINATING | GQ_SCOPE_NOT_TERMINATING))
        return gq_err_set(err, GQ_EINVAL,
                          "spec.scopes: conflicting scopes Terminating and NotTerminating");
    *out = bits;
    return GQ_OK;
}

static gq_code parse_scope_selector(json_object *o, gq_quota *q, gq_err *err)
{
    gq_code rc = gq_field_object(o, "spec.scopeSelector", err);
    if (rc)
        return rc;
    json_object *me = gq_json_member(o, "matchExpressions");
    if (!me)
        return GQ_OK;
    rc = parse_sel_reqs(me, "spec.scopeSelector.matchExpressions", "scopeName", &q->scope_exprs,
                        &q->n_scope_exprs, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < q->n_scope_exprs; i++)
        if (strcmp(q->scope_exprs[i].key, "PriorityClass") != 0)
            return gq_err_set(err, GQ_EINVAL,
                              "spec.scopeSelector.matchExpressions[%zu].scopeName: unsupported "
                              "scope \"%.64s\"; supported: PriorityClass",
                              i, q->scope_exprs[i].key);
    return GQ_OK;
}

/* q's status as policy reads it, from st: used, the usage of each model
 * spec.models limits (a model the spec dropped limits nothing), queuedPods
 * (absent: 0). */
static void status_scalars(gq_quota *q, const gq_quota_status *st)
{
    q->used = st->used;
    q->queued_pods = st->queued_pods;
    for (size_t i = 0; i < q->n_models; i++) {
        const gq_amounts *u = gq_quota_status_model_used(st, q->models[i].name);
        if (u)
            q->models[i].used = *u;
        else
            gq_amounts_clear(&q->models[i].used);
    }
}

gq_code gq_quota_set_status(gq_quota *q, const gq_quota_status *st, gq_err *err)
{
    gq_reservation *v = st->n_reservations ? calloc(st->n_reservations, sizeof(*v)) : NULL;
    size_t n = 0;
    if (st->n_reservations && !v)
        return gq_err_oom(err);
    for (; n < st->n_reservations; n++) {
        gq_code rc = gq_reservation_copy(&st->reservations[n], &v[n], err);
        if (rc) {
            while (n)
                gq_reservation_dispose(&v[--n]);
            free(v);
            return rc;
        }
    }
    quota_reservations_free(q);
    q->reservations = v;
    q->n_reservations = n;
    status_scalars(q, st);
    return GQ_OK;
}

/* gq_quota_set_status that moves st's reservations into q (st keeps the
 * rest, for the caller to dispose). */
static void take_status(gq_quota *q, gq_quota_status *st)
{
    quota_reservations_free(q);
    q->reservations = st->reservations;
    q->n_reservations = st->n_reservations;
    st->reservations = NULL;
    st->n_reservations = st->cap_reservations = 0;
    status_scalars(q, st);
}

/* The object's metadata into q: its kind, and a namespace for a GPUQuota
 * (required) but none for a GPUTenantQuota (cluster-scoped). */
static gq_code parse_quota_meta(json_object *obj, gq_quota *q, gq_err *err)
{
    static const char *const kinds[] = {GQ_KIND_GPUQUOTA, GQ_KIND_GPUTENANTQUOTA};
    crd_meta m;
    gq_code rc = parse_meta(obj, kinds, 2, &m, err);
    if (rc)
        return rc;
    q->name = m.name;
    q->namespace_ = m.ns;
    q->generation = m.generation;
    memcpy(q->uid, m.uid, sizeof(q->uid));
    q->kind = m.kind == 0 ? GQ_QUOTA_NAMESPACED : GQ_QUOTA_TENANT;
    if (q->kind == GQ_QUOTA_NAMESPACED && (!q->namespace_ || !q->namespace_[0]))
        return gq_err_set(err, GQ_EINVAL, "metadata.namespace: required for a GPUQuota");
    if (q->kind == GQ_QUOTA_TENANT) {
        /* Cluster-scoped: a namespace in the object means nothing. */
        free(q->namespace_);
        q->namespace_ = NULL;
    }
    return GQ_OK;
}

/* spec.namespaces and spec.namespaceSelector: a GPUTenantQuota needs one
 * of them, a GPUQuota may have neither. */
static gq_code parse_quota_namespaces(json_object *spec, gq_quota *q, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *nss = gq_json_member(spec, "namespaces");
    json_object *nsel = gq_json_member(spec, "namespaceSelector");
    if (q->kind == GQ_QUOTA_NAMESPACED) {
        if (nss || nsel)
            return gq_err_set(err, GQ_EINVAL, "spec.%s: only valid in a GPUTenantQuota",
                              nss ? "namespaces" : "namespaceSelector");
        return GQ_OK;
    }
    if (!nss && !nsel)
        return gq_err_set(err, GQ_EINVAL,
                          "spec: a GPUTenantQuota needs namespaces or namespaceSelector");
    if (nss && (rc = gq_field_dup_strings(nss, "spec.namespaces", GQ_CRD_MAX_NAMESPACES,
                                          &q->namespaces, &q->n_namespaces, err)))
        return rc;
    if (nsel)
        rc = parse_label_selector(nsel, "spec.namespaceSelector", &q->ns_selector, err);
    return rc;
}

/* spec.preemption.withinQuota, where given (Kueue's names). */
static gq_code parse_quota_preemption(json_object *spec, gq_quota *q, gq_err *err)
{
    static const char *const within[] = {"Never", "LowerPriority", "LowerOrNewerEqualPriority"};
    static const char *const reclaim[] = {"Never", "LowerPriority", "Any"};
    json_object *p = gq_json_member(spec, "preemption"), *v;
    size_t e = 0;
    gq_code rc;
    if (!p)
        return GQ_OK;
    if ((rc = gq_field_object(p, "spec.preemption", err)))
        return rc;
    if ((v = gq_json_member(p, "withinQuota"))) {
        if ((rc = parse_enum(v, "spec.preemption.withinQuota", within, 3, &e, err)))
            return rc;
        q->within_quota = (gq_preempt_policy)e;
    }
    if ((v = gq_json_member(p, "reclaimWithinCohort"))) {
        if ((rc = parse_enum(v, "spec.preemption.reclaimWithinCohort", reclaim, 3, &e, err)))
            return rc;
        q->reclaim = (gq_reclaim_policy)e;
    }
    return GQ_OK;
}

/* spec.whenExceeded, spec.queueingStrategy and spec.preemption, where given. */
static gq_code parse_quota_queueing(json_object *spec, gq_quota *q, gq_err *err)
{
    static const char *const when[] = {"Deny", "Queue"};
    static const char *const strat[] = {"BestEffortFIFO", "StrictFIFO"};
    json_object *v;
    size_t e = 0;
    gq_code rc;
    if ((v = gq_json_member(spec, "whenExceeded"))) {
        if ((rc = parse_enum(v, "spec.whenExceeded", when, 2, &e, err)))
            return rc;
        q->when_exceeded = (gq_when_exceeded)e;
    }
    if ((v = gq_json_member(spec, "queueingStrategy"))) {
        if ((rc = parse_enum(v, "spec.queueingStrategy", strat, 2, &e, err)))
            return rc;
        q->strategy = (gq_queue_strategy)e;
    }
    return parse_quota_preemption(spec, q, err);
}

/* The largest weight accepted: a dominant share (at most 1000 per mille of
 * the cohort times what a quota may borrow) times 1000 stays far inside
 * int64 when divided by any weight from 0.001 to this. */
#define GQ_FAIR_WEIGHT_MAX_MILLI INT64_C(1000000000000) /* 10^9 */

/* spec.fairSharing.weight: a non-negative quantity (default 1). */
static gq_code parse_fair_sharing(json_object *spec, gq_quota *q, gq_err *err)
{
    json_object *fs = gq_json_member(spec, "fairSharing"), *w;
    const char *s = NULL;
    gq_quantity qt;
    gq_code rc;
    if (!fs)
        return GQ_OK;
    if ((rc = gq_field_object(fs, "spec.fairSharing", err)) || !(w = gq_json_member(fs, "weight")))
        return rc;
    if (json_object_is_type(w, json_type_int)) {
        qt = gq_quantity_from_int64(json_object_get_int64(w), GQ_QFMT_DECIMAL_SI);
    } else if ((rc = gq_field_string(w, "spec.fairSharing.weight", &s, err))) {
        return rc;
    } else if ((rc = gq_quantity_parse(s, strlen(s), &qt, err))) {
        gq_err_prefix(err, "spec.fairSharing.weight");
        return rc;
    }
    int64_t milli;
    if (gq_quantity_is_negative(&qt))
        return gq_err_set(err, GQ_EINVAL,
                          "spec.fairSharing.weight: must be greater than or equal to 0");
    if (gq_quantity_to_milli_ceil(&qt, &milli) || milli > GQ_FAIR_WEIGHT_MAX_MILLI)
        return gq_err_set(err, GQ_ERANGE, "spec.fairSharing.weight: must be at most 1G");
    q->fair_weight_milli = milli;
    return GQ_OK;
}

/* spec.cohort (GPUTenantQuota only): a DNS-1123 label. */
static gq_code parse_cohort(json_object *spec, gq_quota *q, gq_err *err)
{
    json_object *v = gq_json_member(spec, "cohort");
    const char *s = NULL;
    gq_code rc;
    if (!v)
        return GQ_OK;
    if (q->kind != GQ_QUOTA_TENANT)
        return gq_err_set(err, GQ_EINVAL, "spec.cohort: only valid in a GPUTenantQuota");
    if ((rc = gq_field_string(v, "spec.cohort", &s, err)))
        return rc;
    if (!gq_is_dns_label(s))
        return gq_err_set(err, GQ_EINVAL,
                          "spec.cohort: \"%.63s\" is not a DNS-1123 label (lower-case letters, "
                          "digits and '-', starting and ending with a letter or digit, at most "
                          "63 characters)",
                          s);
    if (!(q->cohort = strdup(s)))
        return gq_err_oom(err);
    return GQ_OK;
}

static gq_code parse_quota_spec(json_object *spec, gq_quota *q, gq_err *err)
{
    gq_code rc = gq_field_object(spec, "spec", err);
    if (rc)
        return rc;
    json_object *v;
    if ((v = gq_json_member(spec, "hard")) &&
        (rc = gq_amounts_parse(v, "spec.hard", &q->hard, err)))
        return rc;
    if ((v = gq_json_member(spec, "scopes")) && (rc = parse_scopes(v, &q->scopes, err)))
        return rc;
    if ((v = gq_json_member(spec, "scopeSelector")) && (rc = parse_scope_selector(v, q, err)))
        return rc;
    if ((rc = parse_quota_queueing(spec, q, err)) || (rc = parse_quota_namespaces(spec, q, err)))
        return rc;
    if ((v = gq_json_member(spec, "borrowingLimit")) &&
        (rc = gq_amounts_parse(v, "spec.borrowingLimit", &q->borrowing_limit, err)))
        return rc;
    if ((v = gq_json_member(spec, "lendingLimit")) &&
        (rc = gq_amounts_parse(v, "spec.lendingLimit", &q->lending_limit, err)))
        return rc;
    if ((rc = parse_cohort(spec, q, err)) || (rc = parse_fair_sharing(spec, q, err)))
        return rc;
    if ((v = gq_json_member(spec, "models")))
        rc = parse_quota_models(v, q, err);
    return rc;
}

gq_code gq_quota_parse_spec(json_object *obj, gq_quota **out, gq_err *err)
{
    gq_quota *q = calloc(1, sizeof(*q));
    if (!q)
        return gq_err_oom(err);
    gq_amounts_clear(&q->hard);
    gq_amounts_clear(&q->used);
    gq_amounts_clear(&q->borrowing_limit);
    gq_amounts_clear(&q->lending_limit);
    q->fair_weight_milli = 1000;
    gq_code rc = parse_quota_meta(obj, q, err);
    if (rc || (rc = parse_quota_spec(gq_json_member(obj, "spec"), q, err))) {
        gq_quota_free(q);
        return rc;
    }
    *out = q;
    return GQ_OK;
}

gq_code gq_quota_parse(json_object *obj, gq_quota **out, gq_err *err)
{
    gq_quota *q = NULL;
    gq_quota_status st;
    gq_code rc = gq_quota_parse_spec(obj, &q, err);
    if (rc)
        return rc;
    rc = gq_quota_status_decode(gq_json_member(obj, "status"), GQ_STATUS_POLICY, &st, err);
    if (rc) {
        gq_quota_free(q);
        return rc;
    }
    take_status(q, &st);
    gq_quota_status_dispose(&st);
    *out = q;
    return GQ_OK;
}

/* --- limit ranges -------------------------------------------------------- */

static void limit_item_dispose(gq_limit_item *it)
{
    gq_strv_free(it->allowed_models, it->n_allowed_models);
    memset(it, 0, sizeof(*it));
}

void gq_limit_range_free(gq_limit_range *lr)
{
    if (!lr)
        return;
    free(lr->name);
    free(lr->namespace_);
    for (size_t i = 0; i < lr->n_items; i++)
        limit_item_dispose(&lr->items[i]);
    free(lr->items);
    free(lr);
}

void gq_limit_range_list_free(gq_limit_range **lrs, size_t n)
{
    for (size_t i = 0; lrs && i < n; i++)
        gq_limit_range_free(lrs[i]);
    free(lrs);
}

gq_code gq_limit_range_list_parse(json_object *arr, gq_limit_range ***out, size_t *n_out,
                                  size_t *bad, gq_err *err)
{
    size_t n = 0, i = 0;
    gq_limit_range **lrs = NULL;
    gq_code rc = GQ_OK;
    if (bad)
        *bad = SIZE_MAX;
    if (arr && !json_object_is_type(arr, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "not a list");
    n = arr ? json_object_array_length(arr) : 0;
    if (n && !(lrs = calloc(n, sizeof(*lrs))))
        return gq_err_oom(err);
    for (; i < n && !rc; i++)
        rc = gq_limit_range_parse(json_object_array_get_idx(arr, i), &lrs[i], err);
    if (rc) {
        if (bad)
            *bad = i - 1;
        gq_limit_range_list_free(lrs, n);
        return rc;
    }
    *out = lrs;
    *n_out = n;
    return GQ_OK;
}

static gq_code parse_mem_map(json_object *it, const char *key, const char *field, bool *has,
                             gq_amounts *out, gq_err *err)
{
    char f[96];
    json_object *v = gq_json_member(it, key);
    if (!v)
        return GQ_OK;
    snprintf(f, sizeof(f), "%s.%s", field, key);
    gq_code rc = gq_amounts_parse_keys(v, f, 1u << GQ_KEY_GPU_MEMORY, out, err);
    if (rc)
        return rc;
    *has = out->set[GQ_KEY_GPU_MEMORY];
    return GQ_OK;
}

/* Kubernetes LimitRange validation wording: "min value 4Gi is greater than max value 2Gi". */
static gq_code check_order(const gq_amounts *lo, const char *lo_name, const gq_amounts *hi,
                           const char *hi_name, const char *field, gq_err *err)
{
    if (lo->v[GQ_KEY_GPU_MEMORY] <= hi->v[GQ_KEY_GPU_MEMORY])
        return GQ_OK;
    char a[GQ_QUANTITY_STR_MAX], b[GQ_QUANTITY_STR_MAX];
    gq_amount_format(lo, GQ_KEY_GPU_MEMORY, a);
    gq_amount_format(hi, GQ_KEY_GPU_MEMORY, b);
    return gq_err_set(err, GQ_EINVAL, "%s.%s.gpu-memory: %s value %s is greater than %s value %s",
                      field, lo_name, lo_name, a, hi_name, b);
}

/* The type of a limit: Container or Pod. */
static gq_code parse_limit_type(json_object *o, const char *field, gq_limit_type *type, gq_err *err)
{
    char f[96];
    const char *s = NULL;
    snprintf(f, sizeof(f), "%s.type", field);
    gq_code rc = gq_field_string(gq_json_member(o, "type"), f, &s, err);
    if (rc)
        return rc;
    if (strcmp(s, "Container") == 0)
        *type = GQ_LIMIT_CONTAINER;
    else if (strcmp(s, "Pod") == 0)
        *type = GQ_LIMIT_POD;
    else
        return gq_err_set(err, GQ_EINVAL,
                          "%s: unsupported type \"%.64s\"; supported: Container, Pod", f, s);
    return GQ_OK;
}

/* min, max and default gpu-memory, in order; a default only for a
 * container, and above 0. */
static gq_code parse_limit_memory(json_object *o, const char *field, gq_limit_item *it, gq_err *err)
{
    gq_code rc;
    if ((rc = parse_mem_map(o, "min", field, &it->has_min, &it->min, err)) ||
        (rc = parse_mem_map(o, "max", field, &it->has_max, &it->max, err)) ||
        (rc = parse_mem_map(o, "default", field, &it->has_default, &it->def, err)))
        return rc;
    if (it->has_default && it->type != GQ_LIMIT_CONTAINER)
        return gq_err_set(err, GQ_EINVAL, "%s.default: may only be set for type Container", field);
    if (it->has_min && it->has_max &&
        (rc = check_order(&it->min, "min", &it->max, "max", field, err)))
        return rc;
    if (it->has_min && it->has_default &&
        (rc = check_order(&it->min, "min", &it->def, "default", field, err)))
        return rc;
    if (it->has_default && it->has_max &&
        (rc = check_order(&it->def, "default", &it->max, "max", field, err)))
        return rc;
    if (it->has_default && it->def.v[GQ_KEY_GPU_MEMORY] == 0)
        return gq_err_set(err, GQ_EINVAL, "%s.default.gpu-memory: must be greater than 0", field);
    return GQ_OK;
}

static gq_code parse_limit_item(json_object *o, const char *field, gq_limit_item *out, gq_err *err)
{
    gq_limit_item it = {0};
    char f[96];
    gq_code rc = gq_field_object(o, field, err);
    if (rc || (rc = parse_limit_type(o, field, &it.type, err)))
        return rc;
    if ((rc = parse_limit_memory(o, field, &it, err)))
        goto out;
    json_object *mg = gq_json_member(o, "maxGPUs");
    if (mg) {
        snprintf(f, sizeof(f), "%s.maxGPUs", field);
        if (!json_object_is_type(mg, json_type_int)) {
            rc = gq_err_set(err, GQ_EINVAL, "%s: must be an integer, got %s", f,
                            gq_field_type_name(mg));
            goto out;
        }
        it.max_gpus = json_object_get_int64(mg);
        if (it.max_gpus < 0) {
            rc = gq_err_set(err, GQ_EINVAL, "%s: must be greater than or equal to 0", f);
            goto out;
        }
        it.has_max_gpus = true;
    }
    json_object *am = gq_json_member(o, "allowedModels");
    if (am) {
        snprintf(f, sizeof(f), "%s.allowedModels", field);
        rc = gq_field_dup_strings(am, f, GQ_CRD_MAX_MODELS, &it.allowed_models,
                                  &it.n_allowed_models, err);
        if (rc)
            goto out;
    }
    *out = it;
    return GQ_OK;
out:
    limit_item_dispose(&it);
    return rc;
}

gq_code gq_limit_range_parse(json_object *obj, gq_limit_range **out, gq_err *err)
{
    static const char *const kinds[] = {GQ_KIND_GPULIMITRANGE};
    size_t n = 0;
    crd_meta m;
    gq_limit_range *lr = calloc(1, sizeof(*lr));
    if (!lr)
        return gq_err_oom(err);
    gq_code rc = parse_meta(obj, kinds, 1, &m, err);
    if (rc)
        goto out;
    lr->name = m.name;
    lr->namespace_ = m.ns;
    json_object *spec = gq_json_member(obj, "spec");
    rc = gq_field_object(spec, "spec", err);
    if (rc)
        goto out;
    json_object *limits = gq_json_member(spec, "limits");
    rc = gq_field_array(limits, "spec.limits", GQ_CRD_MAX_LIMITS, &n, err);
    if (rc)
        goto out;
    lr->items = n ? calloc(n, sizeof(*lr->items)) : NULL;
    if (n && !lr->items) {
        rc = gq_err_set(err, GQ_ENOMEM, "spec.limits: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof(f), "spec.limits[%zu]", i);
        rc = parse_limit_item(json_object_array_get_idx(limits, i), f, &lr->items[i], err);
        if (rc)
            goto out;
        lr->n_items++;
    }
    *out = lr;
    lr = NULL;
out:
    gq_limit_range_free(lr);
    return rc;
}
