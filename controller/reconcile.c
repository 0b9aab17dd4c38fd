/* The desired status of one quota: pure (time is a parameter, pods and the
 * "seen" oracle are inputs). Usage is recounted by gq_quota_recount, so the
 * controller and the webhook share one definition of what matches. */
#include "controller/ctl_int.h"
#include "common/json_member.h"
#include "quota/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_result_init(ctl_result *r)
{
    memset(r, 0, sizeof(*r));
}

void ctl_result_dispose(ctl_result *r)
{
    if (!r)
        return;
    json_object_put(r->status);
    ctl_result_init(r);
}

/* Add a reference to v (NULL: nothing) to obj as key; false when out of memory. */
static bool add_ref(json_object *obj, const char *key, json_object *v)
{
    if (!v || !json_object_object_add(obj, key, json_object_get(v)))
        return true;
    json_object_put(v);
    return false;
}

/* Parse quota's apiVersion, kind, metadata and spec with status in place of
 * its own (NULL: none), as admissions parse a quota. */
static gq_code parse_with_status(json_object *quota, json_object *status, gq_quota **out,
                                 gq_err *err)
{
    static const char *const keep[] = {"apiVersion", "kind", "metadata", "spec"};
    if (!quota || !json_object_is_type(quota, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "quota must be an object");
    json_object *shallow = json_object_new_object();
    bool ok = shallow != NULL;
    for (size_t i = 0; ok && i < sizeof(keep) / sizeof(keep[0]); i++)
        ok = add_ref(shallow, keep[i], gq_json_member(quota, keep[i]));
    ok = ok && add_ref(shallow, "status", status);
    gq_code rc = ok ? gq_quota_parse(shallow, out, err) : gq_err_oom(err);
    json_object_put(shallow);
    return rc;
}

gq_code ctl_quota_parse_spec(json_object *quota, gq_quota **out, gq_err *err)
{
    return parse_with_status(quota, NULL, out, err);
}

static int add_owned(json_object *obj, const char *key, json_object *val)
{
    if (!val)
        return -1;
    if (json_object_object_add(obj, key, val)) {
        json_object_put(val);
        return -1;
    }
    return 0;
}

/* The current condition of this type in status, or NULL. */
static json_object *find_condition(json_object *status, const char *type)
{
    json_object *conds = gq_json_member(status, "conditions");
    if (!conds || !json_object_is_type(conds, json_type_array))
        return NULL;
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        const char *t = gq_json_get_string(c, "type");
        if (t && !strcmp(t, type))
            return c;
    }
    return NULL;
}

/* metav1.Condition; lastTransitionTime moves only when status changes. */
static json_object *condition(json_object *cur_status, const char *type, bool value,
                              const char *reason, const char *message, int64_t generation,
                              int64_t now)
{
    const char *st = value ? "True" : "False";
    json_object *old = find_condition(cur_status, type);
    const char *old_st = gq_json_get_string(old, "status");
    const char *old_ltt = gq_json_get_string(old, "lastTransitionTime");
    char ltt[GQ_RFC3339_MAX];
    if (old_st && old_ltt && !strcmp(old_st, st) && strlen(old_ltt) < sizeof(ltt))
        memcpy(ltt, old_ltt, strlen(old_ltt) + 1);
    else
        gq_time_format_rfc3339(now, ltt);
    json_object *c = json_object_new_object();
    if (!c || add_owned(c, "type", json_object_new_string(type)) ||
        add_owned(c, "status", json_object_new_string(st)) ||
        add_owned(c, "observedGeneration", json_object_new_int64(generation)) ||
        add_owned(c, "lastTransitionTime", json_object_new_string(ltt)) ||
        add_owned(c, "reason", json_object_new_string(reason)) ||
        add_owned(c, "message", json_object_new_string(message))) {
        json_object_put(c);
        return NULL;
    }
    return c;
}

static int claim_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const gq_reservation *)elem)->key);
}

/* Reservations to keep: live at now (gq_status_drop_expired also drops
 * corrupt records) and whose pod has not been seen; then the shared claims
 * the recount counted (u->claims) as counted claim records. A claim's
 * record from /validate gives way to the counted one once a counted pod
 * names the claim. A claim no counted pod names stays charged, as a live
 * record, while a kept pod reservation names it (its pod not seen yet),
 * until the latest of those expires; else a counted record goes (the claim
 * is freed) and an uncounted one lives until it expires. */
/* The pods' reservations of copy (n records): drops[i] when the pod was
 * seen (usage counts it); held gets, for each shared claim an unseen pod's
 * reservation lists, the latest expiry among them (uid -> Unix s). */
static gq_code claims_held_by_unseen(json_object *copy, ctl_seen_fn seen, void *ud, bool *drops,
                                     json_object *held, gq_err *err)
{
    size_t n = json_object_array_length(copy);
    for (size_t i = 0; i < n; i++) {
        gq_reservation r;
        if (gq_reservation_parse(json_object_array_get_idx(copy, i), NULL, &r, NULL) != GQ_OK) {
            drops[i] = true; /* unreachable: drop_expired removed the unparsable */
            continue;
        }
        if (!r.claim && !(drops[i] = seen && seen(ud, r.namespace_, r.key))) {
            for (size_t k = 0; k < r.n_claims; k++) {
                json_object *h = NULL;
                if (json_object_object_get_ex(held, r.claims[k], &h) &&
                    json_object_get_int64(h) >= r.expires)
                    continue;
                json_object *e = json_object_new_int64(r.expires);
                if (!e || json_object_object_add(held, r.claims[k], e)) {
                    json_object_put(e);
                    gq_reservation_dispose(&r);
                    return gq_err_oom(err);
                }
            }
        }
        gq_reservation_dispose(&r);
    }
    return GQ_OK;
}

/* What becomes of claim record r (item, its JSON): *drop when the recount
 * counts the claim (its counted record takes the place) or when it was
 * counted and no pod names it any more (freed); when only unseen pods
 * (held) name it, it stays live until the latest of their expiries (*exp,
 * written into item). */
static gq_code keep_claim_record(json_object *item, const gq_reservation *r, const gq_usage *u,
                                 json_object *held, bool *drop, int64_t *exp, gq_err *err)
{
    json_object *h = NULL;
    if (u->n_claims && bsearch(r->key, u->claims, u->n_claims, sizeof(*u->claims), claim_key_cmp)) {
        *drop = true; /* the counted record below takes its place */
        return GQ_OK;
    }
    if (!json_object_object_get_ex(held, r->key, &h)) {
        *drop = r->counted; /* counted before, named by none now: freed */
        return GQ_OK;
    }
    /* No counted pod names it, a pod not seen yet does: it stays charged
     * (live) as long as that pod's reservation. */
    *exp = json_object_get_int64(h) > *exp ? json_object_get_int64(h) : *exp;
    char t[GQ_RFC3339_MAX];
    gq_time_format_rfc3339(*exp, t);
    json_object *e = json_object_new_string(t);
    if (!e || json_object_object_add(item, "expires", e)) {
        json_object_put(e);
        return gq_err_oom(err);
    }
    json_object_object_del(item, "counted");
    return GQ_OK;
}

/* *copy = a copy of the reservations array arr without the lapsed records,
 * held in tmp (under "reservations"). */
static gq_code live_copy(json_object *arr, int64_t now, json_object *tmp, json_object **copy,
                         gq_err *err)
{
    json_object *c = NULL;
    if (json_object_deep_copy(arr, &c, NULL) != 0 ||
        json_object_object_add(tmp, "reservations", c)) {
        json_object_put(c);
        return gq_err_oom(err);
    }
    gq_code rc = gq_status_drop_expired(tmp, now, NULL, err);
    if (!rc)
        *copy = gq_json_member(tmp, "reservations");
    return rc;
}

/* Append the counted record of every shared claim the recount counted. */
static gq_code append_counted_claims(json_object *kept, const gq_usage *u, gq_err *err)
{
    for (size_t i = 0; i < u->n_claims; i++) {
        json_object *c = gq_reservation_to_json(&u->claims[i]);
        if (!c || json_object_array_add(kept, c)) {
            json_object_put(c);
            return gq_err_oom(err);
        }
    }
    return GQ_OK;
}

/* Append to kept the records of copy that stay (drops[i]: its pod was seen)
 * and note the earliest expiry among them in res->next_expiry. A key that
 * a record already kept has is dropped: status.reservations is an atomic
 * list, so kube-apiserver does not keep keys unique; every writer adds a key
 * at most once, and this repairs a status that has one twice anyway (until
 * then both are charged: more, never less). keys is the set of keys kept. */
/* The reservations kept so far: the claims held (uid -> latest expiry), the
 * keys kept, and the records. */
typedef struct kept_set {
    json_object *held, *keys, *kept;
} kept_set;

static gq_code keep_records(json_object *copy, const bool *drops, const gq_usage *u,
                            const kept_set *ks, ctl_result *res, gq_err *err)
{
    json_object *held = ks->held, *keys = ks->keys, *kept = ks->kept;
    gq_code rc;
    for (size_t i = 0; i < json_object_array_length(copy); i++) {
        json_object *item = json_object_array_get_idx(copy, i);
        gq_reservation r;
        if (drops[i] || gq_reservation_parse(item, NULL, &r, NULL) != GQ_OK)
            continue;
        if (json_object_object_get_ex(keys, r.key, NULL)) {
            gq_reservation_dispose(&r);
            continue;
        }
        bool drop = false;
        int64_t exp = r.expires;
        if (r.claim && (rc = keep_claim_record(item, &r, u, held, &drop, &exp, err))) {
            gq_reservation_dispose(&r);
            return rc;
        }
        if (!drop && json_object_object_add(keys, r.key, NULL)) {
            gq_reservation_dispose(&r);
            return gq_err_oom(err);
        }
        gq_reservation_dispose(&r);
        if (drop)
            continue;
        if (json_object_array_add(kept, json_object_get(item))) {
            json_object_put(item);
            return gq_err_oom(err);
        }
        if (!res->next_expiry || exp < res->next_expiry)
            res->next_expiry = exp;
    }
    return GQ_OK;
}

static gq_code keep_reservations(json_object *cur_status, const gq_usage *u, const ctl_counted *in,
                                 json_object **out, ctl_result *res, gq_err *err)
{
    json_object *arr = gq_json_member(cur_status, "reservations");
    json_object *tmp = NULL, *kept = NULL, *held = NULL, *keys = NULL;
    bool *drops = NULL;
    size_t total = 0;
    gq_code rc = GQ_OK;
    *out = NULL;
    if (!arr && !u->n_claims)
        return GQ_OK;
    if (json_object_is_type(arr, json_type_array))
        total = json_object_array_length(arr);
    tmp = json_object_new_object();
    kept = json_object_new_array();
    if (!tmp || !kept) {
        rc = gq_err_oom(err);
        goto out;
    }
    if (!arr)
        goto claims;
    if (!json_object_is_type(arr, json_type_array)) { /* corrupt: nothing to keep */
        res->dropped = 1;
        goto claims;
    }
    json_object *copy = NULL;
    rc = live_copy(arr, in->now, tmp, &copy, err);
    if (rc)
        goto out;
    size_t n = json_object_array_length(copy);
    /* First the pods' reservations: which stay, and the shared claims those
     * hold (uid -> latest expiry). */
    if (n && (!(drops = calloc(n, sizeof(*drops))) || !(held = json_object_new_object()) ||
              !(keys = json_object_new_object()))) {
        rc = gq_err_oom(err);
        goto out;
    }
    rc = claims_held_by_unseen(copy, in->seen, in->seen_ud, drops, held, err);
    if (rc)
        goto out;
    rc = keep_records(copy, drops, u, &(kept_set){held, keys, kept}, res, err);
    if (rc)
        goto out;
    res->kept = json_object_array_length(kept);
    res->dropped = total - res->kept;
claims:
    rc = append_counted_claims(kept, u, err);
    if (rc)
        goto out;
    *out = kept;
    kept = NULL;
out:
    free(drops);
    json_object_put(held);
    json_object_put(keys);
    json_object_put(kept);
    json_object_put(tmp);
    return rc;
}

/* "gpu-memory (used 72Gi, hard 64Gi), gpus (used 3, hard 2)" for the keys
 * where used > hard, then "h100-80gb/gpus (used 3, hard 2)" for each model
 * of spec.models; returns whether there was any. */
static bool exceeded_message(const gq_quota *q, const gq_usage *u, char *buf, size_t cap)
{
    size_t len = 0;
    bool any = false;
    buf[0] = '\0';
    for (size_t m = 0; m <= q->n_models; m++) {
        const gq_amounts *used = m ? &u->by_model[m - 1] : &u->used;
        const gq_amounts *hard = m ? &q->models[m - 1].hard : &q->hard;
        if (m && m > u->n_by_model)
            break;
        for (int k = 0; k < GQ_KEY_COUNT; k++) {
            if (!hard->set[k] || used->v[k] <= hard->v[k])
                continue;
            char uv[GQ_QUANTITY_STR_MAX], hv[GQ_QUANTITY_STR_MAX];
            gq_amount_format(used, (gq_qkey)k, uv);
            gq_amount_format(hard, (gq_qkey)k, hv);
            int w = snprintf(buf + len, cap - len, "%s%s%s%s (used %s, hard %s)",
                             any ? ", " : "used exceeds hard for ", m ? q->models[m - 1].name : "",
                             m ? "/" : "", gq_qkey_name((gq_qkey)k), uv, hv);
            if (w > 0)
                len = (size_t)w >= cap - len ? cap - 1 : len + (size_t)w;
            any = true;
        }
    }
    return any;
}

/* status.conditions for result r of q: Ready True, and Exceeded as r says
 * (lastTransitionTime kept from cur unless a condition's status changes).
 * NULL when out of memory. */
static json_object *status_conditions(json_object *cur, const gq_quota *q, const ctl_result *r,
                                      int64_t now)
{
    json_object *conds = json_object_new_array();
    json_object *c_ready = condition(cur, CTL_COND_READY, true, "Reconciled",
                                     "usage recounted from pods", q->generation, now);
    json_object *c_ex =
        condition(cur, CTL_COND_EXCEEDED, r->exceeded, r->exceeded ? "Exceeded" : "WithinLimits",
                  r->message, q->generation, now);
    if (!conds || !c_ready || !c_ex || json_object_array_add(conds, c_ready)) {
        json_object_put(c_ready);
        json_object_put(c_ex);
        json_object_put(conds);
        return NULL;
    }
    if (json_object_array_add(conds, c_ex)) {
        json_object_put(c_ex);
        json_object_put(conds);
        return NULL;
    }
    return conds;
}

/* The status of q from its recount u: hard and used (by model, by
 * namespace), the queue when shown, the kept reservations (res_arr, NULL:
 * none) and conds; res_arr and conds are borrowed. NULL when out of
 * memory. */
static json_object *status_of(const gq_quota *q, const gq_usage *u, json_object *res_arr,
                              json_object *conds)
{
    /* Quotas that never queue keep the status they always had. */
    bool show_queue = q->when_exceeded == GQ_WHEN_QUEUE || u->queued_pods > 0;
    json_object *st = json_object_new_object();
    if (!st || add_owned(st, "hard", gq_amounts_to_json(&q->hard)) ||
        add_owned(st, "used", gq_amounts_to_json(&u->used)) ||
        (q->n_models && add_owned(st, "usedByModel", gq_usage_by_model_to_json(q, u))) ||
        (q->kind == GQ_QUOTA_TENANT &&
         add_owned(st, "namespaces", gq_usage_namespaces_to_json(u))) ||
        (show_queue && add_owned(st, "queued", gq_amounts_to_json(&u->queued))) ||
        (show_queue && add_owned(st, "queuedPods", json_object_new_int64(u->queued_pods))) ||
        (res_arr && add_owned(st, "reservations", json_object_get(res_arr))) ||
        add_owned(st, "observedGeneration", json_object_new_int64(q->generation)) ||
        add_owned(st, "conditions", json_object_get(conds))) {
        json_object_put(st);
        return NULL;
    }
    return st;
}

/* ctl_reconcile with the spec already parsed (q from ctl_quota_parse_spec of
 * quota). */
static gq_code reconcile_parsed(const gq_quota *q, json_object *quota, const ctl_counted *in,
                                ctl_result *out, gq_err *err)
{
    int64_t now = in->now;
    gq_code rc;
    gq_usage u;
    ctl_result r;
    json_object *cur = gq_json_member(quota, "status"), *kept = NULL;
    gq_usage_init(&u);
    ctl_result_init(&r);
    rc = gq_quota_recount(q, in->pods, in->n, &u, err);
    if (rc)
        goto out;
    rc = keep_reservations(cur, &u, in, &kept, &r, err);
    if (rc)
        goto out;
    r.used = u.used;
    r.hard = q->hard;
    r.exceeded = exceeded_message(q, &u, r.message, sizeof(r.message));
    json_object *old_ex = find_condition(cur, CTL_COND_EXCEEDED);
    const char *old_ex_st = gq_json_get_string(old_ex, "status");
    r.became_exceeded = r.exceeded && !(old_ex_st && !strcmp(old_ex_st, "True"));

    json_object *conds = status_conditions(cur, q, &r, now);
    if (!conds) {
        rc = gq_err_oom(err);
        goto out;
    }
    json_object *res_arr = NULL;
    if (kept && json_object_array_length(kept)) {
        res_arr = kept;
        kept = NULL;
    }
    r.queued_pods = u.queued_pods;
    r.status = status_of(q, &u, res_arr, conds);
    json_object_put(res_arr); /* the status holds them now */
    json_object_put(conds);
    if (!r.status) {
        rc = gq_err_oom(err);
        goto out;
    }
    r.changed = !json_object_equal(r.status, cur);
    ctl_result_dispose(out);
    *out = r;
    ctl_result_init(&r);
out:
    json_object_put(kept);
    ctl_result_dispose(&r);
    gq_usage_dispose(&u);
    return rc;
}

/* The reservations an invalid quota's status still holds: how many, and
 * when the first uncounted one lapses; an emptied list goes. */
static void note_reservations(json_object *st, ctl_result *r)
{
    json_object *res = gq_json_member(st, "reservations");
    for (size_t i = 0; res && i < json_object_array_length(res); i++) {
        gq_reservation one;
        if (gq_reservation_parse(json_object_array_get_idx(res, i), NULL, &one, NULL) != GQ_OK)
            continue;
        if (!one.counted && (!r->next_expiry || one.expires < r->next_expiry))
            r->next_expiry = one.expires;
        gq_reservation_dispose(&one);
    }
    r->kept = res ? json_object_array_length(res) : 0;
    if (res && !r->kept)
        json_object_object_del(st, "reservations");
}

/* status.conditions of an invalid quota: Ready False with the reason, and
 * Exceeded as last computed. NULL when out of memory. */
static json_object *invalid_conditions(json_object *cur, const char *why, int64_t generation,
                                       int64_t now)
{
    json_object *conds = json_object_new_array();
    json_object *ready =
        condition(cur, CTL_COND_READY, false, CTL_REASON_INVALID, why, generation, now);
    if (!conds || !ready || json_object_array_add(conds, ready)) {
        json_object_put(ready);
        json_object_put(conds);
        return NULL;
    }
    json_object *ex = find_condition(cur, CTL_COND_EXCEEDED);
    if (ex && json_object_array_add(conds, json_object_get(ex))) {
        json_object_put(ex);
        json_object_put(conds);
        return NULL;
    }
    return conds;
}

gq_code ctl_reconcile_invalid(json_object *quota, const char *why, int64_t now, ctl_result *out,
                              gq_err *err)
{
    ctl_result r;
    json_object *cur = gq_json_member(quota, "status"), *st = NULL;
    json_object *gen = gq_json_member(gq_json_member(quota, "metadata"), "generation");
    int64_t generation =
        gen && json_object_is_type(gen, json_type_int) ? json_object_get_int64(gen) : 0;
    ctl_result_init(&r);
    if (cur && json_object_is_type(cur, json_type_object)) {
        if (json_object_deep_copy(cur, &st, NULL) != 0)
            goto oom;
    } else if (!(st = json_object_new_object())) {
        goto oom;
    }
    /* Without a valid spec nothing can be recounted: used, hard and the
     * Exceeded condition stay as last computed; lapsed reservations go. */
    size_t dropped = 0;
    gq_code rc = gq_status_drop_expired(st, now, &dropped, err);
    if (rc) {
        json_object_put(st);
        return rc;
    }
    note_reservations(st, &r);
    r.dropped = dropped;
    snprintf(r.message, sizeof(r.message), "%s", why);
    json_object *old_ready = find_condition(cur, CTL_COND_READY);
    const char *old_reason = gq_json_get_string(old_ready, "reason");
    const char *old_msg = gq_json_get_string(old_ready, "message");
    r.invalid = true;
    r.became_invalid = !(old_reason && !strcmp(old_reason, CTL_REASON_INVALID) && old_msg &&
                         !strcmp(old_msg, r.message));
    json_object *conds = invalid_conditions(cur, r.message, generation, now);
    if (!conds || add_owned(st, "conditions", conds) ||
        add_owned(st, "observedGeneration", json_object_new_int64(generation))) {
        json_object_put(st);
        goto oom;
    }
    r.status = st;
    r.changed = !json_object_equal(st, cur);
    ctl_result_dispose(out);
    *out = r;
    return GQ_OK;
oom:
    return gq_err_oom(err);
}

gq_code ctl_reconcile(json_object *quota, const ctl_counted *in, ctl_result *out, gq_err *err)
{
    gq_quota *q = NULL;
    gq_code rc = ctl_quota_parse_spec(quota, &q, err);
    if (rc)
        return rc;
    rc = reconcile_parsed(q, quota, in, out, err);
    gq_quota_free(q);
    return rc;
}

/* A reconcile over the store's pods: the quota, the keys found abandoned
 * and where the result goes. */
typedef struct store_reconcile {
    const gq_quota *q;
    json_object *quota;
    json_object *drop; /* keys to drop although their pods were not seen */
    const ctl_podstore_pods *v;
    int64_t now;
    ctl_result *out;
} store_reconcile;

static bool seen_or_dropped(void *ud, const char *ns, const char *key)
{
    const store_reconcile *sr = ud;
    return sr->v->counted(sr->v->counted_ud, ns, key) ||
           (sr->drop && json_object_object_get_ex(sr->drop, key, NULL));
}

static gq_code reconcile_store_pods(void *ud, const ctl_podstore_pods *v, gq_err *err)
{
    store_reconcile *sr = ud;
    sr->v = v;
    ctl_counted in = {v->pods, v->n, seen_or_dropped, sr, sr->now};
    return reconcile_parsed(sr->q, sr->quota, &in, sr->out, err);
}

gq_code ctl_podstore_reconcile(ctl_podstore *s, json_object *quota, int64_t now, ctl_result *out,
                               gq_err *err)
{
    return ctl_podstore_reconcile_dropping(s, quota, NULL, now, out, err);
}

gq_code ctl_podstore_reconcile_dropping(ctl_podstore *s, json_object *quota, json_object *drop,
                                        int64_t now, ctl_result *out, gq_err *err)
{
    gq_quota *q = NULL;
    gq_code rc = ctl_quota_parse_spec(quota, &q, err);
    if (rc)
        return rc;
    store_reconcile sr = {q, quota, drop, NULL, now, out};
    rc = ctl_podstore_with_quota_pods(s, q, now, reconcile_store_pods, &sr, err);
    gq_quota_free(q);
    return rc;
}

/* ---- folds ---------------------------------------------------------------- */

/* Status members a fold changes; every other one must stay the same. */
static bool fold_member(const char *key)
{
    static const char *const fold[] = {"used", "usedByModel", "namespaces", "reservations"};
    for (size_t i = 0; i < sizeof(fold) / sizeof(fold[0]); i++)
        if (!strcmp(key, fold[i]))
            return true;
    return false;
}

/* Every member of a that a fold leaves alone is in b, equal. */
static bool same_rest(json_object *a, json_object *b)
{
    json_object_object_foreach(a, key, val)
    {
        json_object *other = NULL;
        if (fold_member(key))
            continue;
        if (!json_object_object_get_ex(b, key, &other) || !json_object_equal(val, other))
            return false;
    }
    return true;
}

/* a and b agree on every key limit limits. */
static bool same_limited(const gq_amounts *limit, const gq_amounts *a, const gq_amounts *b)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (limit->set[k] && a->v[k] != b->v[k])
            return false;
    return true;
}

/* What admissions count in a at ta is what they count in b at tb, on every
 * key they check: in all (gq_quota_in_use, the keys of spec.hard) and per
 * model of spec.models (gq_quota_model_in_use, that model's keys), the
 * validating webhook's own sums. a and b share their spec. */
static bool same_charge(const gq_quota *a, int64_t ta, const gq_quota *b, int64_t tb)
{
    gq_amounts x, y;
    gq_err e;
    if (gq_quota_in_use(a, ta, NULL, &x, &e) || gq_quota_in_use(b, tb, NULL, &y, &e) ||
        !same_limited(&a->hard, &x, &y) || a->n_models != b->n_models)
        return false;
    for (size_t i = 0; i < a->n_models; i++)
        if (gq_quota_model_in_use(a, &a->models[i], ta, NULL, &x, &e) ||
            gq_quota_model_in_use(b, &b->models[i], tb, NULL, &y, &e) ||
            !same_limited(&a->models[i].hard, &x, &y))
            return false;
    return true;
}

bool ctl_fold_only(json_object *quota, json_object *next, int64_t now, int64_t horizon)
{
    json_object *cur = gq_json_member(quota, "status");
    if (!json_object_is_type(cur, json_type_object) ||
        !json_object_is_type(next, json_type_object) || !same_rest(cur, next) ||
        !same_rest(next, cur))
        return false;
    gq_quota *c = NULL, *n = NULL;
    gq_err e;
    bool same = !parse_with_status(quota, cur, &c, &e) && !parse_with_status(quota, next, &n, &e) &&
                same_charge(c, now, n, now) && same_charge(c, horizon, n, now);
    gq_quota_free(c);
    gq_quota_free(n);
    return same;
}
