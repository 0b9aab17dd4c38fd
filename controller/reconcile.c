/* The desired status of one quota: pure (time is a parameter, pods and the
 * "seen" oracle are inputs). Usage is recounted by gq_quota_recount, so the
 * controller and the webhook share one definition of what matches. The
 * current status is decoded once (GQ_STATUS_SALVAGE: a corrupt one never
 * stops the repair), the desired one is built typed and encoded once. */
#include "controller/ctl_int.h"
#include "common/grow.h"
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

gq_code ctl_quota_parse_spec(json_object *quota, gq_quota **out, gq_err *err)
{
    if (!quota || !json_object_is_type(quota, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "quota must be an object");
    return gq_quota_parse_spec(quota, out, err);
}

/* Parse quota's spec with status in place of its own (NULL: none), as
 * admissions parse a quota. */
static gq_code parse_with_status(json_object *quota, json_object *status, gq_quota **out,
                                 gq_err *err)
{
    gq_quota_status st;
    gq_quota *q = NULL;
    gq_code rc = ctl_quota_parse_spec(quota, &q, err);
    if (!rc && !(rc = gq_quota_status_decode(status, GQ_STATUS_POLICY, &st, err))) {
        rc = gq_quota_set_status(q, &st, err);
        gq_quota_status_dispose(&st);
    }
    if (rc) {
        gq_quota_free(q);
        return rc;
    }
    *out = q;
    return GQ_OK;
}

/* The observedGeneration written for metadata.generation: never below 0,
 * as metav1.Condition requires and the status decoder checks (the API
 * server sets generation from 1; a negative one is bad input). */
static int64_t observed(int64_t generation)
{
    return generation > 0 ? generation : 0;
}

/* metav1.Condition; lastTransitionTime moves only when status changes. Its
 * strings are borrowed (gq_quota_status_set_conditions copies them). */
static gq_condition condition(const gq_quota_status *cur, const char *type, bool value,
                              const char *reason, const char *message, int64_t generation,
                              int64_t now)
{
    const char *st = value ? "True" : "False";
    const gq_condition *old = gq_quota_status_condition(cur, type);
    bool keep = old && old->has_last_transition && !strcmp(old->status, st);
    return (gq_condition){.type = (char *)type,
                          .status = (char *)st,
                          .has_observed_generation = true,
                          .observed_generation = observed(generation),
                          .has_last_transition = true,
                          .last_transition = keep ? old->last_transition : now,
                          .reason = (char *)reason,
                          .message = (char *)message};
}

/* --- the reservations kept ------------------------------------------------ */

/* A shared claim that the reservation of a pod not seen yet names, and the
 * latest expiry among such reservations. */
typedef struct held_claim {
    const char *uid; /* borrowed from the reservation */
    int64_t expires;
} held_claim;

/* A record's key and where it is, to find the records that share a key. */
typedef struct keyed {
    const char *key;
    size_t at;
} keyed;

/* Which reservations of the current status (live ones) stay. */
typedef struct keep_pass {
    gq_quota_status *cur;
    const gq_usage *u;
    const ctl_counted *in;
    bool *keep;       /* per record of cur */
    held_claim *held; /* sorted by uid, one per uid */
    size_t n_held;
    keyed *order; /* scratch, per record */
} keep_pass;

static int held_cmp(const void *a, const void *b)
{
    return strcmp(((const held_claim *)a)->uid, ((const held_claim *)b)->uid);
}

static int claim_key_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const gq_reservation *)elem)->key);
}

/* The pods' reservations: keep[i] unless the pod was seen (usage counts
 * it); held gets, for each shared claim an unseen pod's reservation lists,
 * the latest expiry among them. A claim's record is kept so far. */
static gq_code claims_held_by_unseen(keep_pass *kp, gq_err *err)
{
    const gq_quota_status *cur = kp->cur;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < cur->n_reservations; i++) {
        const gq_reservation *r = &cur->reservations[i];
        kp->keep[i] =
            r->claim || !(kp->in->seen && kp->in->seen(kp->in->seen_ud, r->namespace_, r->key));
        for (size_t k = 0; !r->claim && kp->keep[i] && k < r->n_claims; k++) {
            held_claim *h = gq_grow(kp->held, &cap, n, sizeof(*h), 8);
            if (!h)
                return gq_err_oom(err);
            kp->held = h;
            h[n++] = (held_claim){r->claims[k], r->expires};
        }
    }
    if (n)
        qsort(kp->held, n, sizeof(*kp->held), held_cmp);
    kp->n_held = 0;
    for (size_t i = 0; i < n; i++) { /* one per uid, the latest expiry */
        held_claim *last = kp->n_held ? &kp->held[kp->n_held - 1] : NULL;
        if (last && !strcmp(last->uid, kp->held[i].uid)) {
            if (kp->held[i].expires > last->expires)
                last->expires = kp->held[i].expires;
            continue;
        }
        kp->held[kp->n_held++] = kp->held[i];
    }
    return GQ_OK;
}

/* What becomes of claim record r: dropped when the recount counts the claim
 * (its counted record takes the place) or when it was counted and no pod
 * names it any more (freed); when only unseen pods name it, it stays, live
 * (no longer counted) until the latest of their expiries. */
static bool keep_claim_record(const keep_pass *kp, gq_reservation *r)
{
    const gq_usage *u = kp->u;
    if (u->n_claims && bsearch(r->key, u->claims, u->n_claims, sizeof(*u->claims), claim_key_cmp))
        return false; /* the counted record takes its place */
    const held_claim key = {r->key, 0};
    const held_claim *h =
        kp->n_held ? bsearch(&key, kp->held, kp->n_held, sizeof(key), held_cmp) : NULL;
    if (!h)
        return !r->counted; /* counted before, named by none now: freed */
    /* No counted pod names it, a pod not seen yet does: it stays charged
     * (live) as long as that pod's reservation. */
    if (h->expires > r->expires)
        r->expires = h->expires;
    r->counted = false;
    return true;
}

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* A key that a record kept before has is dropped: status.reservations is an
 * atomic list, so kube-apiserver does not keep keys unique; every writer
 * adds a key at most once, and this repairs a status that has one twice
 * anyway (until then both are charged: more, never less). */
static void keep_keys_once(keep_pass *kp)
{
    size_t n = kp->cur->n_reservations;
    for (size_t i = 0; i < n; i++)
        kp->order[i] = (keyed){kp->cur->reservations[i].key, i};
    if (n > 1)
        qsort(kp->order, n, sizeof(*kp->order), keyed_cmp);
    bool kept = false; /* a record of this key is kept */
    for (size_t i = 0; i < n; i++) {
        size_t at = kp->order[i].at;
        if (i && strcmp(kp->order[i - 1].key, kp->order[i].key))
            kept = false;
        if (kp->keep[at] && kept)
            kp->keep[at] = false;
        kept = kept || kp->keep[at];
    }
}

/* What stays of cur's live reservations (cur is changed to hold only
 * them), and the earliest expiry among them (res->next_expiry). */
static gq_code keep_live(keep_pass *kp, ctl_result *res, gq_err *err)
{
    gq_quota_status *cur = kp->cur;
    size_t n = cur->n_reservations;
    if (n && (!(kp->keep = calloc(n, sizeof(*kp->keep))) ||
              !(kp->order = calloc(n, sizeof(*kp->order)))))
        return gq_err_oom(err);
    gq_code rc = claims_held_by_unseen(kp, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (kp->keep[i] && cur->reservations[i].claim)
            kp->keep[i] = keep_claim_record(kp, &cur->reservations[i]);
    keep_keys_once(kp);
    gq_quota_status_keep(cur, kp->keep);
    for (size_t i = 0; i < cur->n_reservations; i++)
        if (!res->next_expiry || cur->reservations[i].expires < res->next_expiry)
            res->next_expiry = cur->reservations[i].expires;
    return GQ_OK;
}

/* borrowed[i]: some claim record of cur (live, counted or lapsed) says the
 * charge of the claim u->claims[i] counts is borrowed ("borrowing"); its
 * counted record keeps saying so. A lapsed one counts: the claim has been
 * charged all along, since a counted pod names it. */
static void claims_borrowed(const gq_quota_status *cur, const gq_usage *u, bool *borrowed)
{
    for (size_t i = 0; u->n_claims && i < cur->n_reservations; i++) {
        const gq_reservation *r = &cur->reservations[i];
        const gq_reservation *c =
            r->claim && r->borrowing
                ? bsearch(r->key, u->claims, u->n_claims, sizeof(*u->claims), claim_key_cmp)
                : NULL;
        if (c)
            borrowed[c - u->claims] = true;
    }
}

/* Reservations to keep, into next: those of cur live at now and whose pod
 * has not been seen; then the shared claims the recount counted (u->claims)
 * as counted claim records. A claim's record from /validate gives way to
 * the counted one once a counted pod names the claim. A claim no counted
 * pod names stays charged, as a live record, while a kept pod reservation
 * names it (its pod not seen yet), until the latest of those expires; else
 * a counted record goes (the claim is freed) and an uncounted one lives
 * until it expires. res gets how many were kept and dropped, and the
 * earliest expiry kept. */
static gq_code keep_reservations(gq_quota_status *cur, const gq_usage *u, const ctl_counted *in,
                                 gq_quota_status *next, ctl_result *res, gq_err *err)
{
    keep_pass kp = {.cur = cur, .u = u, .in = in};
    size_t total = cur->dropped + cur->n_reservations; /* as read, corrupt ones too */
    bool *borrowed = calloc(u->n_claims ? u->n_claims : 1, sizeof(*borrowed));
    if (!borrowed)
        return gq_err_oom(err);
    claims_borrowed(cur, u, borrowed);
    gq_quota_status_drop_expired(cur, in->now);
    gq_code rc = keep_live(&kp, res, err);
    free(kp.keep);
    free(kp.order);
    free(kp.held);
    if (!rc) {
        res->kept = cur->n_reservations;
        res->dropped = total - res->kept;
        /* A pod admitted on a webhook's escrow hold whose record is kept
         * here is one this recount did not see: `used` does not hold it, so
         * it is charged once, and the mark that told /validate it might be
         * charged twice goes (docs/validating-webhook.md, "Escrow"). */
        for (size_t i = 0; i < cur->n_reservations; i++)
            if (cur->reservations[i].escrow == GQ_ESCROW_ADMITTED)
                cur->reservations[i].escrow = GQ_ESCROW_NONE;
        gq_quota_status_take_reservations(next, cur);
    }
    for (size_t i = 0; i < u->n_claims && !rc; i++) {
        gq_reservation c = u->claims[i];
        c.borrowing = c.borrowing || borrowed[i];
        rc = gq_quota_status_add_reservation(next, &c, NULL, err);
    }
    free(borrowed);
    next->has_reservations = next->n_reservations > 0;
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

/* status.conditions of next for result r of q: Ready True, and Exceeded as
 * r says (lastTransitionTime kept from cur unless a condition's status
 * changes). */
static gq_code status_conditions(const gq_quota_status *cur, const gq_quota *q, const ctl_result *r,
                                 int64_t now, gq_quota_status *next, gq_err *err)
{
    gq_condition c[2] = {
        condition(cur, CTL_COND_READY, true, "Reconciled", "usage recounted from pods",
                  q->generation, now),
        condition(cur, CTL_COND_EXCEEDED, r->exceeded, r->exceeded ? "Exceeded" : "WithinLimits",
                  r->message, q->generation, now),
    };
    return gq_quota_status_set_conditions(next, c, 2, err);
}

/* status.borrowed and status.lent of q in its cohort (none: nothing), into
 * next and r (for metrics): its own share, at its recount u, when it is a
 * member (a GPUQuota, or a tenant in a cohort of tenants); a tenant that is
 * the cohort of its GPUQuotas, their sums. */
static gq_code cohort_status(const gq_quota *q, const gq_usage *u, const ctl_cohort_in *co,
                             gq_quota_status *next, ctl_result *r, gq_err *err)
{
    bool sums = q->kind == GQ_QUOTA_TENANT && co->self >= co->n;
    if (!co->n || (!sums && co->self >= co->n))
        return GQ_OK;
    gq_cohort_member *m = malloc(co->n * sizeof(*m));
    gq_cohort_share *out = malloc(co->n * sizeof(*out)), total;
    gq_code rc = m && out ? GQ_OK : gq_err_oom(err);
    if (!rc) {
        memcpy(m, co->m, co->n * sizeof(*m));
        if (!sums)
            m[co->self] = (gq_cohort_member){.q = q, .used = u->used};
        rc = gq_cohort_lending(m, co->n, out, &total, err);
    }
    if (!rc) {
        const gq_cohort_share *own = sums ? &total : &out[co->self];
        next->has_lent = true;
        next->lent = own->lent;
        if (sums) { /* a member's own: gq_usage_to_status */
            next->has_borrowed = true;
            next->borrowed = total.borrowed;
        }
        r->fig.has_borrowed = next->has_borrowed;
        r->fig.borrowed = next->borrowed;
        r->fig.has_lent = true;
        r->fig.lent = own->lent;
    }
    free(m);
    free(out);
    return rc;
}

/* The status of q from its recount u, into next: hard and used (by model,
 * by namespace), the queue when shown, observedGeneration. */
static gq_code status_of(const gq_quota *q, const gq_usage *u, gq_quota_status *next, gq_err *err)
{
    /* Quotas that never queue keep the status they always had. */
    bool show_queue = q->when_exceeded == GQ_WHEN_QUEUE || u->queued_pods > 0;
    next->has_hard = true;
    next->hard = q->hard;
    next->has_queued = next->has_queued_pods = show_queue;
    next->queued = u->queued;
    next->queued_pods = u->queued_pods;
    next->has_observed_generation = true;
    next->observed_generation = observed(q->generation);
    return gq_usage_to_status(q, u, next, err);
}

/* The desired status of q from the decoded current one (cur, changed) and
 * its recount u: into r (status, encoded, and what it says). */
static gq_code desired_status(const gq_quota *q, gq_quota_status *cur, const gq_usage *u,
                              const ctl_counted *in, ctl_result *r, gq_err *err)
{
    gq_quota_status next;
    gq_quota_status_init(&next);
    gq_code rc = keep_reservations(cur, u, in, &next, r, err);
    r->fig.used = u->used;
    r->fig.hard = q->hard;
    r->fig.queued_pods = u->queued_pods;
    r->exceeded = exceeded_message(q, u, r->message, sizeof(r->message));
    const gq_condition *old_ex = gq_quota_status_condition(cur, CTL_COND_EXCEEDED);
    r->became_exceeded = r->exceeded && !(old_ex && !strcmp(old_ex->status, "True"));
    if (!rc && !(rc = status_conditions(cur, q, r, in->now, &next, err)) &&
        !(rc = status_of(q, u, &next, err)) &&
        !(rc = cohort_status(q, u, &in->cohort, &next, r, err)) &&
        !(r->status = gq_quota_status_encode(&next)))
        rc = gq_err_oom(err);
    gq_quota_status_dispose(&next);
    return rc;
}

/* ctl_reconcile with the spec already parsed (q from ctl_quota_parse_spec of
 * quota). */
static gq_code reconcile_parsed(const gq_quota *q, json_object *quota, const ctl_counted *in,
                                ctl_result *out, gq_err *err)
{
    gq_usage u;
    ctl_result r;
    gq_quota_status cur;
    json_object *cur_json = gq_json_member(quota, "status");
    gq_usage_init(&u);
    ctl_result_init(&r);
    gq_code rc = gq_quota_status_decode(cur_json, GQ_STATUS_SALVAGE, &cur, err);
    if (rc)
        goto out;
    if (!(rc = gq_quota_recount(q, in->pods, in->n, &u, err)) &&
        !(rc = desired_status(q, &cur, &u, in, &r, err))) {
        r.changed = !json_object_equal(r.status, cur_json);
        ctl_result_dispose(out);
        *out = r;
        ctl_result_init(&r);
    }
    gq_quota_status_dispose(&cur);
out:
    ctl_result_dispose(&r);
    gq_usage_dispose(&u);
    return rc;
}

/* The reservations an invalid quota's status still holds: how many, and
 * when the first uncounted one lapses; an emptied list goes. */
static void note_reservations(gq_quota_status *st, ctl_result *r)
{
    for (size_t i = 0; i < st->n_reservations; i++) {
        const gq_reservation *one = &st->reservations[i];
        if (!one->counted && (!r->next_expiry || one->expires < r->next_expiry))
            r->next_expiry = one->expires;
    }
    r->kept = st->n_reservations;
    if (!r->kept)
        st->has_reservations = false;
}

/* The status of an invalid quota, from its current one st: Ready False with
 * the reason, Exceeded as last computed, observedGeneration generation. */
static gq_code invalid_status(gq_quota_status *st, const char *why, int64_t generation, int64_t now,
                              gq_err *err)
{
    gq_condition c[2] = {
        condition(st, CTL_COND_READY, false, CTL_REASON_INVALID, why, generation, now)};
    const gq_condition *ex = gq_quota_status_condition(st, CTL_COND_EXCEEDED);
    if (ex)
        c[1] = *ex;
    st->has_observed_generation = true;
    st->observed_generation = observed(generation);
    return gq_quota_status_set_conditions(st, c, ex ? 2 : 1, err);
}

gq_code ctl_reconcile_invalid(json_object *quota, const char *why, int64_t now, ctl_result *out,
                              gq_err *err)
{
    ctl_result r;
    gq_quota_status st;
    json_object *cur = gq_json_member(quota, "status");
    json_object *gen = gq_json_member(gq_json_member(quota, "metadata"), "generation");
    int64_t generation =
        gen && json_object_is_type(gen, json_type_int) ? json_object_get_int64(gen) : 0;
    ctl_result_init(&r);
    /* Without a valid spec nothing can be recounted: used, hard and the
     * Exceeded condition stay as last computed; lapsed reservations go. */
    gq_code rc = gq_quota_status_decode(cur, GQ_STATUS_SALVAGE, &st, err);
    if (rc)
        return rc;
    r.dropped = st.dropped + gq_quota_status_drop_expired(&st, now);
    note_reservations(&st, &r);
    snprintf(r.message, sizeof(r.message), "%s", why);
    const gq_condition *old_ready = gq_quota_status_condition(&st, CTL_COND_READY);
    r.invalid = true;
    r.became_invalid =
        !(old_ready && old_ready->reason && !strcmp(old_ready->reason, CTL_REASON_INVALID) &&
          old_ready->message && !strcmp(old_ready->message, r.message));
    if (!(rc = invalid_status(&st, r.message, generation, now, err)) &&
        !(r.status = gq_quota_status_encode(&st)))
        rc = gq_err_oom(err);
    gq_quota_status_dispose(&st);
    if (rc)
        return rc;
    r.changed = !json_object_equal(r.status, cur);
    ctl_result_dispose(out);
    *out = r;
    return GQ_OK;
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
    const ctl_reconcile_ctx *x; /* drop: keys to drop although their pods were not seen */
    const ctl_podstore_pods *v;
    int64_t now;
    ctl_result *out;
} store_reconcile;

static bool seen_or_dropped(void *ud, const char *ns, const char *key)
{
    const store_reconcile *sr = ud;
    return sr->v->counted(sr->v->counted_ud, ns, key) ||
           (sr->x->drop && json_object_object_get_ex(sr->x->drop, key, NULL));
}

static gq_code reconcile_store_pods(void *ud, const ctl_podstore_pods *v, gq_err *err)
{
    store_reconcile *sr = ud;
    sr->v = v;
    ctl_counted in = {v->pods, v->n, seen_or_dropped, sr, sr->now, sr->x->cohort};
    gq_code rc = reconcile_parsed(sr->q, sr->quota, &in, sr->out, err);
    if (!rc)
        sr->out->next_deadline = v->next_deadline;
    return rc;
}

gq_code ctl_podstore_reconcile(ctl_podstore *s, json_object *quota, int64_t now, ctl_result *out,
                               gq_err *err)
{
    return ctl_podstore_reconcile_with(s, quota, NULL, now, out, err);
}

gq_code ctl_podstore_reconcile_with(ctl_podstore *s, json_object *quota, const ctl_reconcile_ctx *x,
                                    int64_t now, ctl_result *out, gq_err *err)
{
    static const ctl_reconcile_ctx none = {0};
    gq_quota *q = NULL;
    gq_code rc = ctl_quota_parse_spec(quota, &q, err);
    if (rc)
        return rc;
    store_reconcile sr = {q, quota, x ? x : &none, NULL, now, out};
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

/* Status members that report the queue: a write may wait when they only
 * fall (queue_fell). */
static bool queue_member(const char *key)
{
    return !strcmp(key, "queued") || !strcmp(key, "queuedPods");
}

/* Every member of a that a fold leaves alone is in b, equal. */
static bool same_rest(json_object *a, json_object *b)
{
    json_object_object_foreach(a, key, val)
    {
        json_object *other = NULL;
        if (fold_member(key) || queue_member(key))
            continue;
        if (!json_object_object_get_ex(b, key, &other) || !json_object_equal(val, other))
            return false;
    }
    return true;
}

/* a and b agree on every key limit limits. */
/* Sum of the escrow holds of q live at t, per key (saturating). */
static void holds_at(const gq_quota *q, int64_t t, gq_amounts *out)
{
    gq_amounts_clear(out);
    for (size_t i = 0; i < q->n_reservations; i++) {
        const gq_reservation *r = &q->reservations[i];
        if (r->escrow != GQ_ESCROW_HOLD || r->expires <= t)
            continue;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            if (__builtin_add_overflow(out->v[k], r->amounts.v[k], &out->v[k]))
                out->v[k] = INT64_MAX;
    }
}

/* On every key limit sets, b is a, or above a by at most held. */
static bool covered(const gq_amounts *limit, const gq_amounts *a, const gq_amounts *b,
                    const gq_amounts *held)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (limit->set[k] && (b->v[k] < a->v[k] || b->v[k] - a->v[k] > held->v[k]))
            return false;
    return true;
}

/* What admissions count in b at tb is what they count in a at ta, on every
 * key they check: in all (gq_quota_in_use, the keys of spec.hard) and per
 * model of spec.models (gq_quota_model_in_use, that model's keys), the
 * validating webhook's own sums; or more, by no more than a's escrow holds
 * live at ta (pods admitted on them, which a charges through the holds).
 * a and b share their spec. */
static bool charge_covered(const gq_quota *a, int64_t ta, const gq_quota *b, int64_t tb)
{
    gq_amounts x, y, held;
    gq_err e;
    holds_at(a, ta, &held);
    if (gq_quota_in_use(a, ta, NULL, &x, &e) || gq_quota_in_use(b, tb, NULL, &y, &e) ||
        !covered(&a->hard, &x, &y, &held) || a->n_models != b->n_models)
        return false;
    for (size_t i = 0; i < a->n_models; i++)
        if (gq_quota_model_in_use(a, &a->models[i], ta, NULL, &x, &e) ||
            gq_quota_model_in_use(b, &b->models[i], tb, NULL, &y, &e) ||
            !covered(&a->models[i].hard, &x, &y, &held))
            return false;
    return true;
}

/* On some key limit sets, b is below a. */
static bool below(const gq_amounts *limit, const gq_amounts *a, const gq_amounts *b)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (limit->set[k] && b->v[k] < a->v[k])
            return true;
    return false;
}

bool ctl_room_freed(json_object *quota, json_object *next, int64_t now)
{
    gq_quota *a = NULL, *b = NULL;
    gq_amounts x, y;
    gq_err e;
    bool freed = false;
    if (parse_with_status(quota, gq_json_member(quota, "status"), &a, &e) ||
        parse_with_status(quota, next, &b, &e) || a->n_models != b->n_models)
        goto out;
    if (!gq_quota_in_use(a, now, NULL, &x, &e) && !gq_quota_in_use(b, now, NULL, &y, &e))
        freed = below(&a->hard, &x, &y);
    for (size_t i = 0; !freed && i < a->n_models; i++)
        freed = !gq_quota_model_in_use(a, &a->models[i], now, NULL, &x, &e) &&
                !gq_quota_model_in_use(b, &b->models[i], now, NULL, &y, &e) &&
                below(&a->models[i].hard, &x, &y);
out:
    gq_quota_free(a);
    gq_quota_free(b);
    return freed;
}

/* status.queued of s (none: nothing queued); false when it does not parse. */
static bool queued_of(json_object *s, gq_amounts *out)
{
    json_object *q = gq_json_member(s, "queued");
    gq_amounts_clear(out);
    return !q || !gq_amounts_parse(q, "status.queued", out, NULL);
}

/* The queue b reports is a's or shorter: queuedPods and every key of
 * queued no higher (absent counts as 0). What only falls there needs no
 * write of its own: pods left the queue (admitted: their reservations
 * charge them; deleted: they charged nothing), and the one reader of the
 * count, the maxQueuedPods cap on queued creates, errs on the side of
 * refusing while the write waits. */
static bool queue_fell(json_object *a, json_object *b)
{
    json_object *pa = gq_json_member(a, "queuedPods"), *pb = gq_json_member(b, "queuedPods");
    gq_amounts qa, qb;
    if ((pa && !json_object_is_type(pa, json_type_int)) ||
        (pb && !json_object_is_type(pb, json_type_int)) ||
        json_object_get_int64(pb) > json_object_get_int64(pa) || !queued_of(a, &qa) ||
        !queued_of(b, &qb))
        return false;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (qb.set[k] && qb.v[k] > (qa.set[k] ? qa.v[k] : 0))
            return false;
    return true;
}

bool ctl_fold_only(json_object *quota, json_object *next, int64_t now, int64_t horizon)
{
    json_object *cur = gq_json_member(quota, "status");
    if (!json_object_is_type(cur, json_type_object) ||
        !json_object_is_type(next, json_type_object) || !same_rest(cur, next) ||
        !same_rest(next, cur) || !queue_fell(cur, next))
        return false;
    gq_quota *c = NULL, *n = NULL;
    gq_err e;
    bool same = !parse_with_status(quota, cur, &c, &e) && !parse_with_status(quota, next, &n, &e) &&
                charge_covered(c, now, n, now) && charge_covered(c, horizon, n, now);
    gq_quota_free(c);
    gq_quota_free(n);
    return same;
}
