/* Lending in a cohort: the attribution rule of quota/lending.h. */
#include "quota/lending.h"

#include <stdlib.h>
#include <string.h>

#include "quota/podqueue.h"

__extension__ typedef unsigned __int128 u128;

bool gq_quota_may_borrow(const gq_quota *q)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (q->borrowing_limit.set[k])
            return true;
    return false;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A member's remainder of its pro rata share. */
typedef struct remainder {
    u128 rem;
    size_t i;
} remainder;

/* One key of the cohort: each member's lendable and borrowed amount, and
 * the scratch of the remainders. */
typedef struct key_pass {
    const gq_cohort_member *m;
    size_t n;
    int k;
    gq_cohort_share *out;
    int64_t *lendable; /* per member */
    remainder *rem;    /* per member, then sorted: largest remainder first */
} key_pass;

/* lendable and borrowed of member i on key k, through the planner's own
 * sum: gq_queue_cohort_add adds lendable - above, one of them 0. */
static void member_key(const gq_cohort_member *mi, int k, int64_t *lendable, int64_t *above)
{
    gq_queue_cohort one;
    memset(&one, 0, sizeof(one));
    gq_queue_cohort_add(&one, mi->q, &mi->used);
    int64_t d = one.free.v[k];
    *lendable = d > 0 ? d : 0;
    *above = d < 0 ? (d == INT64_MIN ? INT64_MAX : -d) : 0;
}

static int by_remainder(const void *a, const void *b)
{
    const remainder *x = a, *y = b;
    if (x->rem != y->rem)
        return x->rem > y->rem ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* qsort is not stable */
}

/* T shared out in member order, each at most its lendable (the fallback). */
static void share_in_order(key_pass *p, u128 t)
{
    for (size_t i = 0; i < p->n; i++) {
        u128 give = (u128)p->lendable[i] < t ? (u128)p->lendable[i] : t;
        p->out[i].lent.v[p->k] = (int64_t)give;
        t -= give;
    }
}

/* T (units of g) shared out pro rata of lendable (L in all, in units). */
static void share_pro_rata(key_pass *p, uint64_t t, uint64_t l, uint64_t g)
{
    uint64_t given = 0;
    for (size_t i = 0; i < p->n; i++) {
        u128 prod = (u128)t * ((uint64_t)p->lendable[i] / g);
        uint64_t units = (uint64_t)(prod / l);
        p->rem[i] = (remainder){prod % l, i};
        p->out[i].lent.v[p->k] = (int64_t)(units * g);
        given += units;
    }
    qsort(p->rem, p->n, sizeof(*p->rem), by_remainder);
    for (size_t j = 0; given < t && j < p->n; j++, given++)
        p->out[p->rem[j].i].lent.v[p->k] += (int64_t)g;
}

/* Key k of every member: borrowed, lendable, then lent. */
static void lend_key(key_pass *p)
{
    int k = p->k;
    u128 b = 0, l = 0;
    uint64_t g = k == GQ_KEY_GPU_MEMORY ? (uint64_t)1 << 30 : 1; /* 1Gi, or one */
    for (size_t i = 0; i < p->n; i++) {
        const gq_quota *q = p->m[i].q;
        int64_t above;
        p->lendable[i] = 0;
        if (!q->hard.set[k])
            continue;
        member_key(&p->m[i], k, &p->lendable[i], &above);
        p->out[i].lent.set[k] = true;
        if (p->out[i].borrows) {
            p->out[i].borrowed.set[k] = true;
            p->out[i].borrowed.v[k] = above;
            b += (uint64_t)above;
            g = gcd(g, (uint64_t)above);
        }
        l += (uint64_t)p->lendable[i];
        g = gcd(g, (uint64_t)p->lendable[i]);
    }
    u128 t = b < l ? b : l;
    if (!t)
        return;
    if (l > INT64_MAX)
        share_in_order(p, t);
    else
        share_pro_rata(p, (uint64_t)(t / g), (uint64_t)(l / g), g);
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t s;
    return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}

static void sum_shares(const gq_cohort_share *out, size_t n, gq_cohort_share *total)
{
    memset(total, 0, sizeof(*total));
    gq_amounts_clear(&total->borrowed);
    gq_amounts_clear(&total->lent);
    for (size_t i = 0; i < n; i++) {
        total->borrows = total->borrows || out[i].borrows;
        for (int k = 0; k < GQ_KEY_COUNT; k++) {
            if (out[i].borrowed.set[k]) {
                total->borrowed.set[k] = true;
                total->borrowed.v[k] = sat_add(total->borrowed.v[k], out[i].borrowed.v[k]);
            }
            if (out[i].lent.set[k]) {
                total->lent.set[k] = true;
                total->lent.v[k] = sat_add(total->lent.v[k], out[i].lent.v[k]);
            }
        }
    }
}

gq_code gq_cohort_lending(const gq_cohort_member *m, size_t n, gq_cohort_share *out,
                          gq_cohort_share *total, gq_err *err)
{
    key_pass p = {.m = m, .n = n, .out = out};
    if (n &&
        (!(p.lendable = calloc(n, sizeof(*p.lendable))) || !(p.rem = calloc(n, sizeof(*p.rem))))) {
        free(p.lendable);
        free(p.rem);
        return gq_err_oom(err);
    }
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        gq_amounts_clear(&out[i].borrowed);
        gq_amounts_clear(&out[i].lent);
        out[i].borrows = gq_quota_may_borrow(m[i].q);
    }
    for (p.k = 0; p.k < GQ_KEY_COUNT; p.k++)
        lend_key(&p);
    if (total)
        sum_shares(out, n, total);
    free(p.lendable);
    free(p.rem);
    return GQ_OK;
}
