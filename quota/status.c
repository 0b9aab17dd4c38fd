/* A quota's status, typed: the reservation records, the one decoder and
 * the one encoder of the status, and the operations on it. */
#include "quota/status.h"
#include "common/grow.h"
#include "common/json_member.h"
#include "quota/field.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- writing JSON --------------------------------------------------------- */

/* Add v (owned; NULL: out of memory) to o as key with json-c's flags;
 * false when it cannot be. */
static bool put_as(json_object *o, const char *key, json_object *v, unsigned flags)
{
    if (!v)
        return false;
    if (json_object_object_add_ex(o, key, v, flags)) {
        json_object_put(v);
        return false;
    }
    return true;
}

/* put_as for a literal key that o does not have yet: neither looked up
 * nor copied (every object the encoder writes is new). */
static bool put(json_object *o, const char *key, json_object *v)
{
    return put_as(o, key, v, JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_ADD_CONSTANT_KEY);
}

static bool put_str(json_object *o, const char *key, const char *val)
{
    return put(o, key, json_object_new_string(val ? val : ""));
}

/* Append v (owned; NULL: out of memory) to array a; false when it cannot be. */
static bool push(json_object *a, json_object *v)
{
    if (!v)
        return false;
    if (json_object_array_add(a, v)) {
        json_object_put(v);
        return false;
    }
    return true;
}

/* --- a reservation ---------------------------------------------------------- */

void gq_reservation_dispose(gq_reservation *r)
{
    if (!r)
        return;
    free(r->key);
    free(r->namespace_);
    free(r->pod);
    free(r->model);
    gq_strv_free(r->claims, r->n_claims);
    memset(r, 0, sizeof(*r));
}

/* A reservation's flags (claim, counted: a counted record is a claim's;
 * borrowing: a pod's or a claim's) and the uids of the claims it names. */
static gq_code reservation_claims(json_object *obj, const char *field, gq_reservation *r,
                                  gq_err *err)
{
    static const char *const flags[] = {"claim", "counted", "borrowing"};
    bool *to[] = {&r->claim, &r->counted, &r->borrowing};
    for (int i = 0; i < 3; i++) {
        json_object *b = gq_json_member(obj, flags[i]);
        if (b && !json_object_is_type(b, json_type_boolean))
            return gq_err_set(err, GQ_EINVAL, "%s.%s: must be true or false", field, flags[i]);
        *to[i] = b && json_object_get_boolean(b);
    }
    if (r->counted && !r->claim)
        return gq_err_set(err, GQ_EINVAL, "%s.counted: only a claim record is counted", field);
    json_object *cl = gq_json_member(obj, "claims");
    if (!cl)
        return GQ_OK;
    size_t n = json_object_is_type(cl, json_type_array) ? json_object_array_length(cl) : 0;
    if (!json_object_is_type(cl, json_type_array) || n > GQ_RESERVATION_MAX_CLAIMS)
        return gq_err_set(err, GQ_EINVAL, "%s.claims: must be a list of at most %d claim uids",
                          field, GQ_RESERVATION_MAX_CLAIMS);
    if (n && !(r->claims = calloc(n, sizeof(*r->claims))))
        return gq_err_oom(err);
    for (size_t i = 0; i < n; i++) {
        json_object *u = json_object_array_get_idx(cl, i);
        if (!json_object_is_type(u, json_type_string) || !json_object_get_string_len(u) ||
            json_object_get_string_len(u) > GQ_RESERVATION_MAX_CLAIM_UID)
            return gq_err_set(err, GQ_EINVAL,
                              "%s.claims[%zu]: must be a claim uid of 1 to %d characters", field, i,
                              GQ_RESERVATION_MAX_CLAIM_UID);
        if (!(r->claims[i] = strdup(json_object_get_string(u))))
            return gq_err_oom(err);
        r->n_claims++;
    }
    return GQ_OK;
}

static const char *const escrow_names[] = {NULL, "hold", "want", "admitted"};

/* A reservation's escrow member (absent: none): a replica's hold, a want,
 * or a pod admitted on a hold; only a pod's record may be the last, and
 * the first two are no claim's and no pod's. */
static gq_code reservation_escrow(json_object *obj, const char *field, gq_reservation *r,
                                  gq_err *err)
{
    json_object *e = gq_json_member(obj, "escrow");
    if (!e)
        return GQ_OK;
    const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : "";
    for (int k = GQ_ESCROW_HOLD; k <= GQ_ESCROW_ADMITTED; k++)
        if (!strcmp(s, escrow_names[k]))
            r->escrow = (gq_escrow_kind)k;
    if (!r->escrow)
        return gq_err_set(err, GQ_EINVAL, "%s.escrow: must be hold, want or admitted", field);
    if (r->claim)
        return gq_err_set(err, GQ_EINVAL, "%s.escrow: a claim's record is no escrow", field);
    if (r->escrow != GQ_ESCROW_ADMITTED && (r->borrowing || r->n_claims))
        return gq_err_set(err, GQ_EINVAL, "%s.escrow: a %s names no claim and borrows nothing",
                          field, escrow_names[r->escrow]);
    return GQ_OK;
}

/* A reservation's key (not empty), namespace and pod. */
static gq_code reservation_names(json_object *obj, const char *field, gq_reservation *r,
                                 gq_err *err)
{
    char f[192];
    gq_field_join(f, sizeof(f), field, "key");
    gq_code rc = gq_field_dup_string(gq_json_member(obj, "key"), f, &r->key, err);
    if (rc)
        return rc;
    if (!r->key[0])
        return gq_err_set(err, GQ_EINVAL, "%s: must not be empty", f);
    gq_field_join(f, sizeof(f), field, "namespace");
    if ((rc = gq_field_dup_string(gq_json_member(obj, "namespace"), f, &r->namespace_, err)))
        return rc;
    gq_field_join(f, sizeof(f), field, "pod");
    return gq_field_dup_string(gq_json_member(obj, "pod"), f, &r->pod, err);
}

/* A reservation's amount of every quota key, each required. */
static gq_code reservation_amounts(json_object *obj, const char *field, gq_amounts *a, gq_err *err)
{
    char f[192];
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        gq_field_join(f, sizeof(f), field, gq_qkey_name((gq_qkey)k));
        json_object *v = gq_json_member(obj, gq_qkey_name((gq_qkey)k));
        if (!v)
            return gq_err_set(err, GQ_EINVAL, "%s: required", f);
        gq_code rc = gq_amount_parse(v, f, &a->v[k], &a->fmt[k], err);
        if (rc)
            return rc;
        a->set[k] = true;
    }
    return GQ_OK;
}

/* A reservation's expiry time and its model, if it names one. */
static gq_code reservation_expiry_model(json_object *obj, const char *field, gq_reservation *r,
                                        gq_err *err)
{
    char f[192];
    const char *exp;
    gq_field_join(f, sizeof(f), field, "expires");
    gq_code rc = gq_field_string(gq_json_member(obj, "expires"), f, &exp, err);
    if (rc)
        return rc;
    if ((rc = gq_time_parse_rfc3339(exp, &r->expires, err))) {
        gq_err_prefix(err, "%s", f);
        return rc;
    }
    json_object *m = gq_json_member(obj, "model");
    if (!m)
        return GQ_OK;
    gq_field_join(f, sizeof(f), field, "model");
    if ((rc = gq_field_dup_string(m, f, &r->model, err)))
        return rc;
    if (!r->model[0] || strlen(r->model) > GQ_CRD_MAX_MODEL_NAME)
        return gq_err_set(err, GQ_EINVAL, "%s: must be a model name of 1 to %d characters", f,
                          GQ_CRD_MAX_MODEL_NAME);
    return GQ_OK;
}

gq_code gq_reservation_parse(json_object *obj, const char *field, gq_reservation *out, gq_err *err)
{
    gq_reservation r = {0};
    if (!field)
        field = "reservation";
    gq_code rc = gq_field_object(obj, field, err);
    if (rc)
        return rc;
    gq_amounts_clear(&r.amounts);
    if ((rc = reservation_names(obj, field, &r, err)) ||
        (rc = reservation_amounts(obj, field, &r.amounts, err)) ||
        (rc = reservation_expiry_model(obj, field, &r, err)) ||
        (rc = reservation_claims(obj, field, &r, err)) ||
        (rc = reservation_escrow(obj, field, &r, err))) {
        gq_reservation_dispose(&r);
        return rc;
    }
    *out = r;
    return GQ_OK;
}

json_object *gq_reservation_to_json(const gq_reservation *r)
{
    json_object *o = json_object_new_object();
    char buf[GQ_QUANTITY_STR_MAX];
    char t[GQ_RFC3339_MAX];
    if (!o)
        return NULL;
    if (!put_str(o, "key", r->key) || !put_str(o, "namespace", r->namespace_) ||
        !put_str(o, "pod", r->pod))
        goto fail;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        /* An unset key is a zero charge; write it so the record is complete. */
        gq_amounts a = r->amounts;
        if (!a.set[k]) {
            a.v[k] = 0;
            a.fmt[k] = GQ_QFMT_DECIMAL_SI;
        }
        gq_amount_format(&a, (gq_qkey)k, buf);
        if (!put_str(o, gq_qkey_name((gq_qkey)k), buf))
            goto fail;
    }
    gq_time_format_rfc3339(r->expires, t);
    if (!put_str(o, "expires", t) || (r->model && !put_str(o, "model", r->model)) ||
        (r->claim && !put(o, "claim", json_object_new_boolean(1))) ||
        (r->counted && !put(o, "counted", json_object_new_boolean(1))) ||
        (r->borrowing && !put(o, "borrowing", json_object_new_boolean(1))) ||
        (r->escrow && !put_str(o, "escrow", escrow_names[r->escrow])))
        goto fail;
    if (r->n_claims) {
        json_object *a = json_object_new_array_ext((int)r->n_claims);
        if (!put(o, "claims", a))
            goto fail;
        for (size_t i = 0; i < r->n_claims; i++)
            if (!push(a, json_object_new_string(r->claims[i])))
                goto fail;
    }
    return o;
fail:
    json_object_put(o);
    return NULL;
}

bool gq_reservations_json_live(json_object *list, gq_escrow_kind kind, int64_t now)
{
    size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(list, i);
        const char *e = gq_json_get_string(r, "escrow"), *at = gq_json_get_string(r, "expires");
        int64_t exp;
        if (kind > GQ_ESCROW_NONE && kind <= GQ_ESCROW_ADMITTED && e &&
            !strcmp(e, escrow_names[kind]) && at && !gq_time_parse_rfc3339(at, &exp, NULL) &&
            exp > now)
            return true;
    }
    return false;
}

gq_code gq_reservation_copy(const gq_reservation *r, gq_reservation *out, gq_err *err)
{
    gq_reservation c = *r;
    c.key = c.namespace_ = c.pod = c.model = NULL;
    c.claims = NULL;
    c.n_claims = 0;
    bool ok = (c.key = strdup(r->key)) && (c.namespace_ = strdup(r->namespace_)) &&
              (c.pod = strdup(r->pod)) && (!r->model || (c.model = strdup(r->model))) &&
              (!r->n_claims || (c.claims = calloc(r->n_claims, sizeof(*c.claims))));
    while (ok && c.n_claims < r->n_claims && (c.claims[c.n_claims] = strdup(r->claims[c.n_claims])))
        c.n_claims++;
    if (!ok || c.n_claims < r->n_claims) {
        gq_reservation_dispose(&c);
        return gq_err_oom(err);
    }
    *out = c;
    return GQ_OK;
}

gq_code gq_reservations_sum(const gq_amounts *base, const gq_reservation *r, size_t n,
                            const gq_live_filter *f, gq_amounts *out, gq_err *err)
{
    gq_amounts a;
    gq_amounts_clear(&a);
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        a.set[k] = true;
        if (base->set[k])
            a.v[k] = base->v[k];
    }
    for (size_t i = 0; i < n; i++) {
        if (r[i].expires <= f->now || r[i].counted ||
            (f->skip_key && !strcmp(r[i].key, f->skip_key)) ||
            (f->model && r[i].model && strcmp(r[i].model, f->model)))
            continue;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (r[i].amounts.set[k] && __builtin_add_overflow(a.v[k], r[i].amounts.v[k], &a.v[k]))
                return gq_err_set(err, GQ_ERANGE, "%s: %s overflows", f->what,
                                  gq_qkey_name((gq_qkey)k));
    }
    *out = a;
    return GQ_OK;
}

/* --- the status: memory ------------------------------------------------------ */

void gq_quota_status_init(gq_quota_status *st)
{
    memset(st, 0, sizeof(*st));
    gq_amounts_clear(&st->hard);
    gq_amounts_clear(&st->used);
    gq_amounts_clear(&st->queued);
    gq_amounts_clear(&st->borrowed);
    gq_amounts_clear(&st->lent);
}

static void condition_dispose(gq_condition *c)
{
    free(c->type);
    free(c->status);
    free(c->reason);
    free(c->message);
    memset(c, 0, sizeof(*c));
}

static void named_free(gq_named_usage *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].name);
    free(v);
}

static void conditions_free(gq_condition *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        condition_dispose(&v[i]);
    free(v);
}

static void reservations_free(gq_reservation *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        gq_reservation_dispose(&v[i]);
    free(v);
}

void gq_quota_status_dispose(gq_quota_status *st)
{
    if (!st)
        return;
    named_free(st->used_by_model, st->n_used_by_model);
    named_free(st->namespaces, st->n_namespaces);
    reservations_free(st->reservations, st->n_reservations);
    conditions_free(st->conditions, st->n_conditions);
    gq_quota_status_init(st);
}

/* --- the status: decoding ------------------------------------------------------ */

/* A member admissions count that did not decode (rc): in GQ_STATUS_SALVAGE
 * it is left out; running out of memory fails in every mode. */
static gq_code tolerate(gq_code rc, gq_status_mode mode, gq_err *err)
{
    if (rc == GQ_ENOMEM)
        return gq_err_oom(err);
    return mode == GQ_STATUS_SALVAGE ? GQ_OK : rc;
}

/* status.KEY, a ResourceList of quota keys. */
static gq_code decode_amounts(json_object *status, const char *key, bool *has, gq_amounts *out,
                              gq_err *err)
{
    char f[32];
    json_object *v = gq_json_member(status, key);
    if (!v)
        return GQ_OK;
    snprintf(f, sizeof f, "status.%s", key);
    gq_code rc = gq_amounts_parse(v, f, out, err);
    if (!rc)
        *has = true;
    return rc;
}

/* One entry of status.usedByModel into *m. */
static gq_code decode_model(const char *name, json_object *val, gq_named_usage *m, gq_err *err)
{
    char f[GQ_CRD_MAX_MODEL_NAME + 32];
    size_t len = strlen(name);
    if (!len || len > GQ_CRD_MAX_MODEL_NAME)
        return gq_err_set(err, GQ_EINVAL,
                          "status.usedByModel: \"%.64s\" is not a model name of 1 to %d "
                          "characters",
                          name, GQ_CRD_MAX_MODEL_NAME);
    snprintf(f, sizeof f, "status.usedByModel.%s", name);
    gq_code rc = gq_amounts_parse(val, f, &m->used, err);
    if (!rc && !(m->name = strdup(name)))
        rc = gq_err_oom(err);
    return rc;
}

static gq_code decode_models(json_object *status, gq_quota_status *st, gq_err *err)
{
    json_object *bm = gq_json_member(status, "usedByModel");
    if (!bm)
        return GQ_OK;
    gq_code rc = gq_field_object(bm, "status.usedByModel", err);
    if (rc)
        return rc;
    size_t n = (size_t)json_object_object_length(bm), k = 0;
    if (n > GQ_CRD_MAX_QUOTA_MODELS)
        return gq_err_set(err, GQ_ELIMIT, "status.usedByModel: more than %d models",
                          GQ_CRD_MAX_QUOTA_MODELS);
    gq_named_usage *v = n ? calloc(n, sizeof(*v)) : NULL;
    if (n && !v)
        return gq_err_oom(err);
    json_object_object_foreach(bm, key, val)
    {
        if ((rc = decode_model(key, val, &v[k], err))) {
            named_free(v, k + 1);
            return rc;
        }
        k++;
    }
    st->used_by_model = v;
    st->n_used_by_model = k;
    st->has_used_by_model = true;
    return GQ_OK;
}

static gq_code decode_queued_pods(json_object *status, gq_quota_status *st, gq_err *err)
{
    json_object *qp = gq_json_member(status, "queuedPods");
    if (!qp)
        return GQ_OK;
    if (!json_object_is_type(qp, json_type_int) || json_object_get_int64(qp) < 0)
        return gq_err_set(err, GQ_EINVAL, "status.queuedPods: must be a non-negative integer");
    st->queued_pods = json_object_get_int64(qp);
    st->has_queued_pods = true;
    return GQ_OK;
}

/* f = "status.reservations[I]", without printf: one per record read. */
static const char *record_field(char f[48], size_t i)
{
    static const char pre[] = "status.reservations[";
    char d[24];
    size_t n = 0, at = sizeof pre - 1;
    do {
        d[n++] = (char)('0' + i % 10);
        i /= 10;
    } while (i);
    memcpy(f, pre, at);
    while (n)
        f[at++] = d[--n];
    f[at++] = ']';
    f[at] = '\0';
    return f;
}

/* status.reservations: in GQ_STATUS_POLICY every record must decode;
 * else one that does not is dropped and counted. */
static gq_code decode_records(json_object *arr, size_t n, gq_status_mode mode, gq_quota_status *st,
                              gq_err *err)
{
    gq_reservation *v = n ? calloc(n, sizeof(*v)) : NULL;
    size_t k = 0;
    if (n && !v)
        return gq_err_oom(err);
    for (size_t i = 0; i < n; i++) {
        char f[48];
        gq_code rc = gq_reservation_parse(json_object_array_get_idx(arr, i), record_field(f, i),
                                          &v[k], mode == GQ_STATUS_POLICY ? err : NULL);
        if (rc && (rc == GQ_ENOMEM || mode == GQ_STATUS_POLICY)) {
            reservations_free(v, k);
            return rc == GQ_ENOMEM ? gq_err_oom(err) : rc;
        }
        if (rc)
            st->dropped++;
        else
            k++;
    }
    st->reservations = v;
    st->n_reservations = k;
    st->cap_reservations = n;
    st->has_reservations = true;
    return GQ_OK;
}

static gq_code decode_reservations(json_object *status, gq_status_mode mode, gq_quota_status *st,
                                   gq_err *err)
{
    json_object *arr = gq_json_member(status, "reservations");
    size_t n = 0;
    if (!arr)
        return GQ_OK;
    gq_code rc = gq_field_array(arr, "status.reservations", GQ_CRD_MAX_RESERVATIONS, &n,
                                mode == GQ_STATUS_SALVAGE ? NULL : err);
    if (rc && mode == GQ_STATUS_SALVAGE) { /* corrupt: it holds nothing */
        st->dropped = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 1;
        return GQ_OK;
    }
    return rc ? rc : decode_records(arr, n, mode, st, err);
}

/* A string member of at most cap bytes without NUL bytes, copied into *out;
 * NULL when absent. GQ_EINVAL for anything else. */
static gq_code opt_string(json_object *o, const char *key, size_t cap, char **out)
{
    json_object *v = gq_json_member(o, key);
    *out = NULL;
    if (!v)
        return GQ_OK;
    if (!json_object_is_type(v, json_type_string))
        return GQ_EINVAL;
    size_t len = (size_t)json_object_get_string_len(v);
    const char *s = json_object_get_string(v);
    if (len > cap || strlen(s) != len)
        return GQ_EINVAL;
    return (*out = strdup(s)) ? GQ_OK : GQ_ENOMEM;
}

/* metav1.Condition's state. */
static bool condition_state(const char *s)
{
    return s && (!strcmp(s, "True") || !strcmp(s, "False") || !strcmp(s, "Unknown"));
}

/* A condition's observedGeneration (>= 0) and lastTransitionTime, where
 * given. */
static gq_code condition_times(json_object *o, gq_condition *c)
{
    json_object *g = gq_json_member(o, "observedGeneration");
    json_object *t = gq_json_member(o, "lastTransitionTime");
    const char *ts;
    if (g && (!json_object_is_type(g, json_type_int) || json_object_get_int64(g) < 0))
        return GQ_EINVAL;
    if (t && (gq_field_string(t, "lastTransitionTime", &ts, NULL) ||
              gq_time_parse_rfc3339(ts, &c->last_transition, NULL)))
        return GQ_EINVAL;
    c->has_observed_generation = g != NULL;
    c->observed_generation = g ? json_object_get_int64(g) : 0;
    c->has_last_transition = t != NULL;
    return GQ_OK;
}

/* One condition into *item (a gq_condition): GQ_EINVAL when it does not
 * decode (it is left out). */
static gq_code decode_condition(json_object *o, void *item)
{
    gq_condition *out = item;
    gq_condition c = {0};
    gq_code rc = json_object_is_type(o, json_type_object) ? GQ_OK : GQ_EINVAL;
    if (!rc)
        rc = opt_string(o, "type", GQ_STATUS_MAX_CONDITION_TYPE, &c.type);
    if (!rc)
        rc = opt_string(o, "status", GQ_STATUS_MAX_CONDITION_TYPE, &c.status);
    if (!rc && (!c.type || !c.type[0] || !condition_state(c.status)))
        rc = GQ_EINVAL;
    if (!rc)
        rc = opt_string(o, "reason", GQ_STATUS_MAX_MESSAGE, &c.reason);
    if (!rc)
        rc = opt_string(o, "message", GQ_STATUS_MAX_MESSAGE, &c.message);
    if (!rc)
        rc = condition_times(o, &c);
    if (rc) {
        condition_dispose(&c);
        return rc;
    }
    *out = c;
    return GQ_OK;
}

/* One item of status.namespaces into *item (a gq_named_usage): GQ_EINVAL
 * when it does not decode. */
static gq_code decode_ns(json_object *o, void *item)
{
    gq_named_usage *out = item;
    const char *ns = NULL;
    json_object *u = gq_json_member(o, "used");
    gq_amounts_clear(&out->used);
    if (gq_field_object(o, "namespace", NULL) ||
        gq_field_string(gq_json_member(o, "namespace"), "namespace", &ns, NULL) || !ns[0] ||
        (u && gq_amounts_parse(u, "used", &out->used, NULL)))
        return GQ_EINVAL;
    return (out->name = strdup(ns)) ? GQ_OK : GQ_ENOMEM;
}

/* A list member that only reports: its items, each decoded by decode
 * (GQ_EINVAL leaves one out), the whole left out when it is no list or is
 * longer than cap. */
typedef struct report_list {
    const char *member;
    size_t cap, size;
    gq_code (*decode)(json_object *o, void *item);
    void (*free_items)(void *v, size_t n);
} report_list;

static void free_conditions(void *v, size_t n)
{
    conditions_free(v, n);
}

static void free_named(void *v, size_t n)
{
    named_free(v, n);
}

static const report_list conditions_list = {"conditions", GQ_STATUS_MAX_CONDITIONS,
                                            sizeof(gq_condition), decode_condition,
                                            free_conditions};
static const report_list namespaces_list = {"namespaces", GQ_CRD_MAX_NAMESPACES,
                                            sizeof(gq_named_usage), decode_ns, free_named};

/* *out, *n_out: the items of l in status; *has when the member is there.
 * Fails only when out of memory. */
static gq_code decode_list(json_object *status, const report_list *l, void **out, size_t *n_out,
                           bool *has)
{
    json_object *arr = gq_json_member(status, l->member);
    size_t n = 0, k = 0;
    if (!arr || gq_field_array(arr, l->member, l->cap, &n, NULL))
        return GQ_OK;
    char *v = n ? calloc(n, l->size) : NULL;
    if (n && !v)
        return GQ_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        gq_code rc = l->decode(json_object_array_get_idx(arr, i), v + k * l->size);
        if (rc == GQ_ENOMEM) {
            l->free_items(v, k);
            return rc;
        }
        k += rc == GQ_OK;
    }
    *out = v;
    *n_out = k;
    *has = true;
    return GQ_OK;
}

/* The members admissions count: used, usedByModel, queuedPods and
 * reservations, in that order (the first error is the one reported). */
static gq_code decode_counted(json_object *status, gq_status_mode mode, gq_quota_status *st,
                              gq_err *err)
{
    gq_err *e = mode == GQ_STATUS_SALVAGE ? NULL : err;
    gq_code rc;
    if ((rc = tolerate(decode_amounts(status, "used", &st->has_used, &st->used, e), mode, err)) ||
        (rc = tolerate(decode_models(status, st, e), mode, err)) ||
        (rc = tolerate(decode_queued_pods(status, st, e), mode, err)))
        return rc;
    return decode_reservations(status, mode, st, err);
}

/* The members that only report, each left out when it does not decode. */
static gq_code decode_report(json_object *status, gq_quota_status *st, gq_err *err)
{
    json_object *g = gq_json_get_typed(status, "observedGeneration", json_type_int);
    (void)decode_amounts(status, "hard", &st->has_hard, &st->hard, NULL);
    (void)decode_amounts(status, "queued", &st->has_queued, &st->queued, NULL);
    (void)decode_amounts(status, "borrowed", &st->has_borrowed, &st->borrowed, NULL);
    (void)decode_amounts(status, "lent", &st->has_lent, &st->lent, NULL);
    st->has_observed_generation = g != NULL;
    st->observed_generation = g ? json_object_get_int64(g) : 0;
    void *v = NULL;
    if (decode_list(status, &namespaces_list, &v, &st->n_namespaces, &st->has_namespaces))
        return gq_err_oom(err);
    st->namespaces = v;
    v = NULL;
    if (decode_list(status, &conditions_list, &v, &st->n_conditions, &st->has_conditions))
        return gq_err_oom(err);
    st->conditions = v;
    return GQ_OK;
}

gq_code gq_quota_status_decode(json_object *status, gq_status_mode mode, gq_quota_status *out,
                               gq_err *err)
{
    gq_quota_status st;
    gq_quota_status_init(&st);
    if (status && !json_object_is_type(status, json_type_object)) {
        if (mode == GQ_STATUS_POLICY)
            return gq_field_object(status, "status", err);
        status = NULL; /* ours to rewrite: as good as none */
    }
    gq_code rc = status ? decode_counted(status, mode, &st, err) : GQ_OK;
    if (!rc && status && mode != GQ_STATUS_POLICY)
        rc = decode_report(status, &st, err);
    if (rc) {
        gq_quota_status_dispose(&st);
        return rc;
    }
    *out = st;
    return GQ_OK;
}

/* --- the status: encoding ------------------------------------------------------ */

static json_object *models_to_json(const gq_quota_status *st)
{
    json_object *o = json_object_new_object();
    for (size_t i = 0; o && i < st->n_used_by_model; i++)
        if (!put_as(o, st->used_by_model[i].name, gq_amounts_to_json(&st->used_by_model[i].used),
                    0)) {
            json_object_put(o);
            return NULL;
        }
    return o;
}

static json_object *reservation_item(const void *v, size_t i)
{
    return gq_reservation_to_json(&((const gq_reservation *)v)[i]);
}

static json_object *ns_item(const void *v, size_t i)
{
    const gq_named_usage *u = &((const gq_named_usage *)v)[i];
    json_object *o = json_object_new_object();
    if (o && put_str(o, "namespace", u->name) && put(o, "used", gq_amounts_to_json(&u->used)))
        return o;
    json_object_put(o);
    return NULL;
}

static json_object *condition_item(const void *v, size_t i)
{
    const gq_condition *c = &((const gq_condition *)v)[i];
    char t[GQ_RFC3339_MAX];
    json_object *o = json_object_new_object();
    if (c->has_last_transition)
        gq_time_format_rfc3339(c->last_transition, t);
    if (o && put_str(o, "type", c->type) && put_str(o, "status", c->status) &&
        (!c->has_observed_generation ||
         put(o, "observedGeneration", json_object_new_int64(c->observed_generation))) &&
        (!c->has_last_transition || put_str(o, "lastTransitionTime", t)) &&
        (!c->reason || put_str(o, "reason", c->reason)) &&
        (!c->message || put_str(o, "message", c->message)))
        return o;
    json_object_put(o);
    return NULL;
}

/* A JSON array of item(v, i) for i in [0, n); NULL when out of memory. */
static json_object *array_of(const void *v, size_t n, json_object *(*item)(const void *, size_t))
{
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t i = 0; a && i < n; i++)
        if (!push(a, item(v, i))) {
            json_object_put(a);
            return NULL;
        }
    return a;
}

json_object *gq_quota_status_encode(const gq_quota_status *st)
{
    json_object *o = json_object_new_object();
    if (o && (!st->has_hard || put(o, "hard", gq_amounts_to_json(&st->hard))) &&
        (!st->has_used || put(o, "used", gq_amounts_to_json(&st->used))) &&
        (!st->has_borrowed || put(o, "borrowed", gq_amounts_to_json(&st->borrowed))) &&
        (!st->has_lent || put(o, "lent", gq_amounts_to_json(&st->lent))) &&
        (!st->has_used_by_model || put(o, "usedByModel", models_to_json(st))) &&
        (!st->has_namespaces ||
         put(o, "namespaces", array_of(st->namespaces, st->n_namespaces, ns_item))) &&
        (!st->has_queued || put(o, "queued", gq_amounts_to_json(&st->queued))) &&
        (!st->has_queued_pods || put(o, "queuedPods", json_object_new_int64(st->queued_pods))) &&
        (!st->has_reservations ||
         put(o, "reservations",
             array_of(st->reservations, st->n_reservations, reservation_item))) &&
        (!st->has_observed_generation ||
         put(o, "observedGeneration", json_object_new_int64(st->observed_generation))) &&
        (!st->has_conditions ||
         put(o, "conditions", array_of(st->conditions, st->n_conditions, condition_item))))
        return o;
    json_object_put(o);
    return NULL;
}

/* --- the status: operations ------------------------------------------------------ */

const gq_reservation *gq_quota_status_find(const gq_quota_status *st, const char *key)
{
    for (size_t i = 0; key && i < st->n_reservations; i++)
        if (!strcmp(st->reservations[i].key, key))
            return &st->reservations[i];
    return NULL;
}

gq_code gq_quota_status_add_reservation(gq_quota_status *st, const gq_reservation *r, bool *added,
                                        gq_err *err)
{
    if (gq_quota_status_find(st, r->key)) {
        if (added)
            *added = false;
        return GQ_OK;
    }
    if (st->n_reservations >= GQ_CRD_MAX_RESERVATIONS)
        return gq_err_set(err, GQ_ELIMIT, "status.reservations: more than %d reservations",
                          GQ_CRD_MAX_RESERVATIONS);
    gq_reservation *v =
        gq_grow(st->reservations, &st->cap_reservations, st->n_reservations, sizeof(*v), 8);
    if (!v)
        return gq_err_set(err, GQ_ENOMEM, "status.reservations: out of memory");
    st->reservations = v;
    gq_code rc = gq_reservation_copy(r, &v[st->n_reservations], err);
    if (rc)
        return rc;
    st->n_reservations++;
    st->has_reservations = true;
    if (added)
        *added = true;
    return GQ_OK;
}

/* Keep the reservations for which keep(r, i, ctx) holds, in order; returns
 * how many went. */
static size_t retain(gq_quota_status *st,
                     bool (*keep)(const gq_reservation *, size_t, const void *), const void *ctx)
{
    size_t k = 0, n = st->n_reservations;
    for (size_t i = 0; i < n; i++) {
        if (!keep(&st->reservations[i], i, ctx)) {
            gq_reservation_dispose(&st->reservations[i]);
            continue;
        }
        if (k != i)
            st->reservations[k] = st->reservations[i];
        k++;
    }
    st->n_reservations = k;
    return n - k;
}

static bool keep_flagged(const gq_reservation *r, size_t i, const void *ctx)
{
    (void)r;
    return ((const bool *)ctx)[i];
}

size_t gq_quota_status_keep(gq_quota_status *st, const bool *keep)
{
    return retain(st, keep_flagged, keep);
}

static bool keep_live(const gq_reservation *r, size_t i, const void *ctx)
{
    (void)i;
    return r->expires > *(const int64_t *)ctx || r->counted;
}

size_t gq_quota_status_drop_expired(gq_quota_status *st, int64_t now)
{
    return retain(st, keep_live, &now);
}

bool gq_quota_status_remove_reservation(gq_quota_status *st, const char *key)
{
    const gq_reservation *r = gq_quota_status_find(st, key);
    if (!r)
        return false;
    size_t i = (size_t)(r - st->reservations);
    gq_reservation_dispose(&st->reservations[i]);
    memmove(&st->reservations[i], &st->reservations[i + 1],
            (st->n_reservations - i - 1) * sizeof(*st->reservations));
    st->n_reservations--;
    return true;
}

gq_code gq_quota_status_sum(const gq_quota_status *st, int64_t now, gq_amounts *out, gq_err *err)
{
    return gq_reservations_sum(&st->used, st->reservations, st->n_reservations,
                               &(gq_live_filter){.now = now, .what = "status"}, out, err);
}

void gq_quota_status_take_reservations(gq_quota_status *dst, gq_quota_status *src)
{
    reservations_free(dst->reservations, dst->n_reservations);
    dst->reservations = src->reservations;
    dst->n_reservations = src->n_reservations;
    dst->cap_reservations = src->cap_reservations;
    dst->has_reservations = src->has_reservations;
    src->reservations = NULL;
    src->n_reservations = src->cap_reservations = 0;
    src->has_reservations = false;
}

const gq_amounts *gq_quota_status_model_used(const gq_quota_status *st, const char *model)
{
    for (size_t i = 0; model && i < st->n_used_by_model; i++)
        if (!strcmp(st->used_by_model[i].name, model))
            return &st->used_by_model[i].used;
    return NULL;
}

const gq_condition *gq_quota_status_condition(const gq_quota_status *st, const char *type)
{
    for (size_t i = 0; type && i < st->n_conditions; i++)
        if (!strcmp(st->conditions[i].type, type))
            return &st->conditions[i];
    return NULL;
}

/* *out = a copy of s (NULL stays NULL); false when out of memory. */
static bool dup_opt(const char *s, char **out)
{
    *out = s ? strdup(s) : NULL;
    return !s || *out;
}

gq_code gq_quota_status_set_conditions(gq_quota_status *st, const gq_condition *v, size_t n,
                                       gq_err *err)
{
    if (n > GQ_STATUS_MAX_CONDITIONS)
        return gq_err_set(err, GQ_ELIMIT, "status.conditions: more than %d conditions",
                          GQ_STATUS_MAX_CONDITIONS);
    gq_condition *c = n ? calloc(n, sizeof(*c)) : NULL;
    bool ok = !n || c;
    for (size_t i = 0; ok && i < n; i++) {
        c[i] = v[i];
        /* Every member is copied (or NULLed) whatever the others did: on a
         * failure conditions_free must not free v's strings. */
        int done = dup_opt(v[i].type, &c[i].type);
        done += dup_opt(v[i].status, &c[i].status);
        done += dup_opt(v[i].reason, &c[i].reason);
        done += dup_opt(v[i].message, &c[i].message);
        ok = done == 4;
    }
    if (!ok) {
        conditions_free(c, n);
        return gq_err_oom(err);
    }
    conditions_free(st->conditions, st->n_conditions);
    st->conditions = c;
    st->n_conditions = n;
    st->has_conditions = true;
    return GQ_OK;
}

/* Replace *dst[0..*n_dst) with copies of v[0..n) and set *has. */
static gq_code set_named(gq_named_usage **dst, size_t *n_dst, bool *has, const gq_named_usage *v,
                         size_t n, gq_err *err)
{
    gq_named_usage *m = n ? calloc(n, sizeof(*m)) : NULL;
    bool ok = !n || m;
    for (size_t i = 0; ok && i < n; i++) {
        m[i].used = v[i].used;
        ok = dup_opt(v[i].name, &m[i].name);
    }
    if (!ok) {
        named_free(m, n);
        return gq_err_oom(err);
    }
    named_free(*dst, *n_dst);
    *dst = m;
    *n_dst = n;
    *has = true;
    return GQ_OK;
}

gq_code gq_quota_status_set_models(gq_quota_status *st, const gq_named_usage *v, size_t n,
                                   gq_err *err)
{
    return set_named(&st->used_by_model, &st->n_used_by_model, &st->has_used_by_model, v, n, err);
}

gq_code gq_quota_status_set_namespaces(gq_quota_status *st, const gq_named_usage *v, size_t n,
                                       gq_err *err)
{
    return set_named(&st->namespaces, &st->n_namespaces, &st->has_namespaces, v, n, err);
}
