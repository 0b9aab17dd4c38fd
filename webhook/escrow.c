#include "webhook/escrow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/grow.h"

gq_code wh_escrow_id_new(wh_escrow_id *id, gq_err *err)
{
    unsigned char b[8];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return gq_err_set(err, GQ_EIO, "escrow: no random bytes for the replica's nonce");
    char hex[2 * sizeof(b) + 1];
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
    snprintf(id->hold_key, sizeof(id->hold_key), "escrow-%s", hex);
    snprintf(id->want_key, sizeof(id->want_key), "want-%s", hex);
    if (gethostname(id->holder, sizeof(id->holder)) || !id->holder[0])
        snprintf(id->holder, sizeof(id->holder), "gpuquota-webhook");
    id->holder[sizeof(id->holder) - 1] = '\0';
    return GQ_OK;
}

void wh_escrow_dispose(wh_escrow *e)
{
    for (size_t i = 0; i < e->n_local; i++)
        gq_reservation_dispose(&e->local[i]);
    free(e->local);
    memset(e, 0, sizeof(*e));
}

static bool on_ledger(const wh_escrow *e, const char *key)
{
    for (size_t i = 0; i < e->n_local; i++)
        if (!strcmp(e->local[i].key, key))
            return true;
    return false;
}

/* Whether charge fits what is left of e's hold on every key it limits. */
static bool fits(const wh_escrow *e, const gq_amounts *charge)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!e->limited[k])
            continue;
        int64_t sum = charge->v[k];
        for (size_t i = 0; i < e->n_local; i++)
            if (__builtin_add_overflow(sum, e->local[i].amounts.v[k], &sum))
                return false;
        if (sum > e->amount.v[k])
            return false;
    }
    return true;
}

bool wh_escrow_admit(wh_escrow *e, const gq_quota *q, const gq_reservation *resv,
                     const gq_amounts *charge, const wh_escrow_clock *t)
{
    if (!e->held || e->give_back || q->generation != e->generation || strcmp(q->uid, e->uid) ||
        t->now > e->expires - (t->ttl_s + 1) / 2 || on_ledger(e, resv->key) || !fits(e, charge))
        return false;
    gq_reservation *l = gq_grow(e->local, &e->cap_local, e->n_local, sizeof(*l), 8);
    if (!l)
        return false;
    e->local = l;
    gq_err err;
    if (gq_reservation_copy(resv, &l[e->n_local], &err))
        return false;
    l[e->n_local].amounts = *charge;
    l[e->n_local].escrow = GQ_ESCROW_ADMITTED;
    e->n_local++;
    e->last_use = t->mono;
    return true;
}

bool wh_escrow_release(wh_escrow *e, const char *key)
{
    for (size_t i = 0; i < e->n_local; i++) {
        if (strcmp(e->local[i].key, key))
            continue;
        gq_reservation_dispose(&e->local[i]);
        memmove(&e->local[i], &e->local[i + 1], (e->n_local - i - 1) * sizeof(*e->local));
        e->n_local--;
        return true;
    }
    return false;
}

gq_code wh_escrow_flush(const wh_escrow *e, const wh_escrow_id *id, gq_quota_status *st,
                        bool *changed, gq_err *err)
{
    size_t before = st->n_reservations;
    for (size_t i = 0; i < e->n_local; i++) {
        bool added = false;
        gq_code rc = gq_quota_status_add_reservation(st, &e->local[i], &added, err);
        if (rc) {
            while (st->n_reservations > before) /* what this flush added, last first */
                gq_quota_status_remove_reservation(st,
                                                   st->reservations[st->n_reservations - 1].key);
            return rc;
        }
    }
    bool out = gq_quota_status_remove_reservation(st, id->hold_key);
    if (out || st->n_reservations != before)
        *changed = true;
    return GQ_OK;
}

/* Cut *pods to the whole units of unit that a quarter of the room left
 * (hard - used) holds, and that leave at least half of hard free: a quota
 * more than half used takes no hold, so that it fills up, and denies, on
 * exact charges rather than on holds that replicas must give back first. */
static void cut_to_room(const gq_amounts *hard, const gq_amounts *used, const gq_amounts *unit,
                        unsigned *pods, bool limited[GQ_KEY_COUNT])
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!hard->set[k])
            continue;
        limited[k] = true;
        int64_t room = hard->v[k] > used->v[k] ? hard->v[k] - used->v[k] : 0;
        if (unit->v[k] <= 0)
            continue;
        int64_t spare = room - (hard->v[k] - hard->v[k] / 2); /* room beyond half of hard */
        int64_t take = spare < room / 4 ? spare : room / 4;
        int64_t fit = take > 0 ? take / unit->v[k] : 0;
        if (fit < (int64_t)*pods)
            *pods = (unsigned)fit;
    }
}

bool wh_escrow_size(const gq_quota *q, const gq_amounts *in_use, const gq_model_limit *mview,
                    const gq_amounts *unit, unsigned pods, gq_amounts *out,
                    bool limited[GQ_KEY_COUNT])
{
    if (pods > WH_ESCROW_PODS_MAX)
        pods = WH_ESCROW_PODS_MAX;
    memset(limited, 0, GQ_KEY_COUNT * sizeof(*limited));
    cut_to_room(&q->hard, in_use, unit, &pods, limited);
    for (size_t m = 0; m < q->n_models; m++)
        cut_to_room(&q->models[m].hard, &mview[m].used, unit, &pods, limited);
    if (pods < WH_ESCROW_PODS_MIN)
        return false;
    gq_amounts_clear(out);
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        out->set[k] = true;
        out->fmt[k] = unit->fmt[k];
        out->v[k] = 0;
        if (unit->v[k] > 0 && __builtin_mul_overflow(unit->v[k], (int64_t)pods, &out->v[k]))
            return false; /* only on a key no quota limits */
    }
    return true;
}

static void add_saturating(int64_t sum[GQ_KEY_COUNT], const gq_amounts *a)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (__builtin_add_overflow(sum[k], a->v[k], &sum[k]))
            sum[k] = INT64_MAX;
}

void wh_escrow_others_of(const gq_quota_status *st, const wh_escrow_id *id, int64_t now,
                         wh_escrow_others *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < st->n_reservations; i++) {
        const gq_reservation *r = &st->reservations[i];
        if (r->expires <= now)
            continue;
        if (r->escrow == GQ_ESCROW_ADMITTED) {
            out->admitted = true;
            add_saturating(out->unsettled, &r->amounts);
        } else if (r->escrow == GQ_ESCROW_HOLD && strcmp(r->key, id->hold_key)) {
            out->holds = true;
            add_saturating(out->held, &r->amounts);
        } else if (r->escrow == GQ_ESCROW_WANT && strcmp(r->key, id->want_key))
            out->want = true;
        else if (r->escrow == GQ_ESCROW_WANT)
            out->my_want = r->expires;
    }
}

gq_reservation wh_escrow_record(const wh_escrow_id *id, gq_escrow_kind kind, const char *ns,
                                const gq_amounts *amount, int64_t expires)
{
    gq_reservation r = {0};
    r.key = (char *)(kind == GQ_ESCROW_HOLD ? id->hold_key : id->want_key);
    r.namespace_ = (char *)ns;
    r.pod = (char *)id->holder;
    gq_amounts_clear(&r.amounts);
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        r.amounts.set[k] = true;
        r.amounts.v[k] = kind == GQ_ESCROW_HOLD ? amount->v[k] : 0;
        if (kind == GQ_ESCROW_HOLD)
            r.amounts.fmt[k] = amount->fmt[k];
    }
    r.expires = expires;
    r.escrow = kind;
    return r;
}
