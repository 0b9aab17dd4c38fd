/* What the queue admitter charges a quota for a queued pod it admits: the
 * pod's reservation and, once per quota, the shared ResourceClaims it names,
 * by the rule /validate charges them (gq_claims_once; docs/models-and-dra.md,
 * "DRA claims"). Pure: quotas and their typed statuses are the caller's. */
#include "controller/ctl_int.h"

#include <string.h>

/* q's claim record of uid, counted or live at now; NULL: none. */
static const gq_reservation *claim_record(const gq_quota *q, const char *uid, int64_t now)
{
    for (size_t r = 0; q && r < q->n_reservations; r++) {
        const gq_reservation *res = &q->reservations[r];
        if (res->claim && !strcmp(res->key, uid) && (res->counted || res->expires > now))
            return res;
    }
    return NULL;
}

bool ctl_quota_charges_claim(const gq_quota *q, const char *uid, int64_t now)
{
    return claim_record(q, uid, now) != NULL;
}

bool ctl_quota_claim_borrowed(const gq_quota *q, const char *uid, int64_t now)
{
    const gq_reservation *r = claim_record(q, uid, now);
    return r && r->borrowing;
}

void ctl_plan_charge(const gq_amounts *charge, const gq_shared_claim *claims, size_t n_claims,
                     const gq_quota *const *qs, size_t nq, int64_t now, gq_amounts *out)
{
    gq_shared_claim held[GQ_POD_MAX_CLAIMS];
    size_t n_held = 0;
    for (size_t k = 0; nq && k < n_claims && n_held < GQ_POD_MAX_CLAIMS; k++) {
        bool everywhere = true;
        for (size_t j = 0; j < nq && everywhere; j++)
            everywhere = ctl_quota_charges_claim(qs[j], claims[k].uid, now);
        if (everywhere)
            held[n_held++] = claims[k];
    }
    gq_charge_own(charge, held, n_held, out);
}

/* status's claim record keyed uid (one an earlier admission of this pass
 * added, or as read); NULL: none. */
static gq_reservation *status_claim(const gq_quota_status *status, const char *uid)
{
    for (size_t i = 0; i < status->n_reservations; i++)
        if (status->reservations[i].claim && !strcmp(status->reservations[i].key, uid))
            return &status->reservations[i];
    return NULL;
}

static bool status_has_claim(const gq_quota_status *status, const char *uid)
{
    return status_claim(status, uid) != NULL;
}

typedef struct claim_seen {
    const gq_quota *q;
    const gq_quota_status *status;
    int64_t now;
} claim_seen;

static bool claim_charged(void *ud, const char *uid)
{
    const claim_seen *cs = ud;
    return ctl_quota_charges_claim(cs->q, uid, cs->now) || status_has_claim(cs->status, uid);
}

/* Append r to status; *added when it was not there. */
static gq_code add_record(gq_quota_status *status, const gq_reservation *r, bool *added,
                          gq_err *err)
{
    bool now_added = false;
    gq_code rc = gq_quota_status_add_reservation(status, r, &now_added, err);
    if (!rc && now_added)
        *added = true;
    return rc;
}

gq_code ctl_ungate_charge(gq_quota_status *status, const gq_quota *q, const ctl_admitted *p,
                          int64_t now, bool *added, gq_err *err)
{
    size_t n = p->n_claims < GQ_POD_MAX_CLAIMS ? p->n_claims : GQ_POD_MAX_CLAIMS;
    gq_claim_ref refs[GQ_POD_MAX_CLAIMS];
    char *uids[GQ_POD_MAX_CLAIMS];
    gq_reservation r = {.key = (char *)p->uid,
                        .namespace_ = (char *)p->ns,
                        .pod = (char *)p->name,
                        .expires = p->expires,
                        .model = (char *)p->model,
                        .claims = uids,
                        .n_claims = n,
                        .borrowing = p->borrowing};
    /* The pod's reservation holds its own part and names its claims: the
     * reconcile keeps them charged until it has seen the pod. */
    gq_charge_own(&p->charge, p->claims, n, &r.amounts);
    for (size_t k = 0; k < n; k++) {
        uids[k] = (char *)p->claims[k].uid;
        refs[k] = (gq_claim_ref){&p->claims[k], k};
    }
    /* A lapsed record keyed like a new one would keep the new one out. */
    gq_quota_status_drop_expired(status, now);
    gq_code rc = add_record(status, &r, added, err);
    if (rc)
        return rc;
    claim_seen cs = {q, status, now};
    size_t fresh = gq_claims_once(refs, n, claim_charged, &cs);
    for (size_t k = 0; k < fresh && !rc; k++) {
        const gq_shared_claim *sc = refs[k].claim;
        gq_reservation c = {.key = (char *)sc->uid,
                            .namespace_ = (char *)p->ns,
                            .pod = (char *)sc->name,
                            .expires = p->expires,
                            .model = sc->model ? (char *)sc->model->name : NULL,
                            .claim = true};
        gq_claim_amounts(sc, &c.amounts);
        rc = add_record(status, &c, added, err);
    }
    /* A borrowing pod borrows the claims charged with it, whichever pod of
     * the pass wrote their records first. */
    for (size_t k = 0; !rc && p->borrowing && k < n; k++) {
        gq_reservation *c = status_claim(status, p->claims[k].uid);
        if (c && !c->borrowing && !ctl_quota_charges_claim(q, c->key, now)) {
            c->borrowing = true;
            *added = true;
        }
    }
    return rc;
}
