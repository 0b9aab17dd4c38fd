#include "quota/podqueue.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_member.h"
#include "common/strutil.h"
#include "quota/podcost.h"
#include "quota/rewrite.h"

static json_object *member(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static json_object *gates_of(json_object *pod)
{
    json_object *g = member(member(pod, "spec"), "schedulingGates");
    return g && json_object_is_type(g, json_type_array) ? g : NULL;
}

size_t gq_pod_gate_count(json_object *pod)
{
    json_object *g = gates_of(pod);
    return g ? json_object_array_length(g) : 0;
}

int gq_pod_named_gate_index(json_object *pod, const char *gate)
{
    json_object *g = gates_of(pod);
    size_t n = g ? json_object_array_length(g) : 0;
    if (n > GQ_QUEUE_MAX_GATES)
        n = GQ_QUEUE_MAX_GATES;
    for (size_t i = 0; i < n; i++) {
        json_object *name = member(json_object_array_get_idx(g, i), "name");
        if (name && json_object_is_type(name, json_type_string) &&
            !strcmp(json_object_get_string(name), gate))
            return (int)i;
    }
    return -1;
}

int gq_pod_gate_index(json_object *pod)
{
    return gq_pod_named_gate_index(pod, GQ_QUEUE_GATE);
}

gq_code gq_pod_group_parse(json_object *pod, gq_pod_group *out, gq_err *err)
{
    json_object *meta = member(pod, "metadata");
    json_object *label = member(member(meta, "labels"), GQ_POD_GROUP_LABEL);
    json_object *size = member(member(meta, "annotations"), GQ_POD_GROUP_SIZE_ANNOTATION);
    gq_pod_group g;
    memset(&g, 0, sizeof(g));
    if (!label && !size) {
        *out = g;
        return GQ_OK;
    }
    if (!label || !json_object_is_type(label, json_type_string))
        return gq_err_set(err, GQ_EINVAL,
                          "annotation " GQ_POD_GROUP_SIZE_ANNOTATION
                          " needs label " GQ_POD_GROUP_LABEL " naming the group");
    const char *name = json_object_get_string(label);
    size_t len = (size_t)json_object_get_string_len(label);
    if (!len || len > GQ_POD_GROUP_NAME_MAX || strlen(name) != len)
        return gq_err_set(err, GQ_EINVAL,
                          "label " GQ_POD_GROUP_LABEL ": must name the group in 1 to %d characters",
                          GQ_POD_GROUP_NAME_MAX);
    if (!size || !json_object_is_type(size, json_type_string))
        return gq_err_set(err, GQ_EINVAL,
                          "pod group %.63s: annotation " GQ_POD_GROUP_SIZE_ANNOTATION
                          " is required: the number of pods admitted together, e.g. \"4\"",
                          name);
    const char *s = json_object_get_string(size);
    int64_t v = 0;
    size_t i = 0;
    for (; s[i] >= '0' && s[i] <= '9' && i < 5; i++)
        v = v * 10 + (s[i] - '0');
    if (!i || s[i] || v < 1 || v > GQ_POD_GROUP_MAX)
        return gq_err_set(err, GQ_EINVAL,
                          "pod group %.63s: annotation " GQ_POD_GROUP_SIZE_ANNOTATION
                          " \"%.32s\": must be a whole number from 1 to %d",
                          name, s, GQ_POD_GROUP_MAX);
    g.present = true;
    memcpy(g.name, name, len + 1);
    g.size = v;
    *out = g;
    return GQ_OK;
}

bool gq_queue_applies(const gq_quota *const *qs, size_t n, const gq_pod_facts *pod,
                      json_object *ns_labels, const gq_amounts *charge)
{
    for (size_t i = 0; i < n; i++)
        if (qs[i]->when_exceeded == GQ_WHEN_QUEUE && gq_quota_limits(qs[i], charge) &&
            gq_quota_matches(qs[i], pod, ns_labels))
            return true;
    return false;
}

/* What a group of members asks of key k: the first member's charge and
 * every other one's own part; INT64_MAX when that overflows. */
static int64_t group_need(const gq_amounts *charge, const gq_amounts *own, int64_t members, int k)
{
    int64_t rest, need;
    if (__builtin_mul_overflow(own->v[k], members - 1, &rest) ||
        __builtin_add_overflow(charge->v[k], rest, &need))
        return INT64_MAX;
    return need;
}

/* What a pod, or a group of pods, asks of a quota: the charge of its first
 * member, the own part of every other one. */
typedef struct group_ask {
    const gq_amounts *charge, *own;
    int64_t members;
    const char *group; /* NULL: one pod */
} group_ask;

/* The ask against one set of limits of q: spec.hard (model NULL) or
 * spec.models.<model>. */
static gq_code ever_fits_limits(const gq_quota *q, const char *model, const gq_amounts *hard,
                                const group_ask *a, gq_err *err)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!hard->set[k] || a->charge->v[k] <= 0)
            continue;
        int64_t need = group_need(a->charge, a->own, a->members, k);
        if (need <= hard->v[k])
            continue;
        gq_amounts am = *a->charge, h = *hard;
        char asked[GQ_QUANTITY_STR_MAX], lim[GQ_QUANTITY_STR_MAX];
        am.v[k] = need;
        gq_amount_format(&am, (gq_qkey)k, asked);
        gq_amount_format(&h, (gq_qkey)k, lim);
        const char *qk = q->kind == GQ_QUOTA_TENANT ? "tenant quota" : "quota";
        const char *m = model ? model : "", *sl = model ? "/" : "";
        const char *key = gq_qkey_name((gq_qkey)k);
        if (a->group)
            return gq_err_set(err, GQ_EDENIED,
                              "pod group %s of %lld pods asks for %s%s%s=%s, more than %s %s "
                              "allows at all (%s%s%s=%s): it would wait forever",
                              a->group, (long long)a->members, m, sl, key, asked, qk, q->name, m,
                              sl, key, lim);
        return gq_err_set(err, GQ_EDENIED,
                          "pod asks for %s%s%s=%s, more than %s %s allows at all (%s%s%s=%s): it "
                          "would wait forever",
                          m, sl, key, asked, qk, q->name, m, sl, key, lim);
    }
    return GQ_OK;
}

gq_code gq_queue_check_ever_fits(const gq_quota *q, const char *model, const gq_amounts *charge,
                                 const gq_amounts *own, int64_t members, const char *group,
                                 gq_err *err)
{
    group_ask a = {charge, own ? own : charge, members < 1 ? 1 : members, group};
    gq_code rc = ever_fits_limits(q, NULL, &q->hard, &a, err);
    /* A pinned pod meets its model's limits; an unpinned one every model's. */
    for (size_t i = 0; !rc && i < q->n_models; i++)
        if (!model || !strcmp(model, q->models[i].name))
            rc = ever_fits_limits(q, q->models[i].name, &q->models[i].hard, &a, err);
    return rc;
}

int gq_queue_entry_cmp(const gq_queue_entry *a, const gq_queue_entry *b)
{
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    if (a->created_us != b->created_us)
        return a->created_us < b->created_us ? -1 : 1;
    return strcmp(a->uid ? a->uid : "", b->uid ? b->uid : "");
}

/* qsort over indices needs the array: passed through a file-local pointer
 * would be a global, so sort (index, entry pointer) pairs instead. */
typedef struct ref {
    const gq_queue_entry *e;
    size_t i;
    size_t rank;
} ref;

static int ref_order_cmp(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    /* A preemptor whose room is held goes first: the room is its own. */
    if (x->e->held != y->e->held)
        return x->e->held ? -1 : 1;
    int c = gq_queue_entry_cmp(x->e, y->e);
    return c ? c : (x->i < y->i ? -1 : x->i > y->i);
}

static int ref_group_cmp(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    int c = strcmp(x->e->group, y->e->group);
    return c ? c : (x->rank < y->rank ? -1 : x->rank > y->rank);
}

/* What quota q lends of key k at in_use: its unused share, at most its
 * lendingLimit. */
static int64_t lendable(const gq_quota *q, int k, int64_t in_use)
{
    int64_t unused = in_use < q->hard.v[k] ? q->hard.v[k] - in_use : 0;
    if (q->lending_limit.set[k] && q->lending_limit.v[k] < unused)
        unused = q->lending_limit.v[k] < 0 ? 0 : q->lending_limit.v[k];
    return unused;
}

static int64_t above(int64_t in_use, int64_t hard)
{
    return in_use > hard ? in_use - hard : 0;
}

void gq_queue_cohort_add(gq_queue_cohort *co, const gq_quota *q, const gq_amounts *in_use)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!q->hard.set[k])
            continue;
        int64_t d = lendable(q, k, in_use->v[k]) - above(in_use->v[k], q->hard.v[k]);
        co->free.set[k] = co->lendable.set[k] = true;
        if (__builtin_add_overflow(co->free.v[k], d, &co->free.v[k]))
            co->free.v[k] = d > 0 ? INT64_MAX : INT64_MIN;
        if (__builtin_add_overflow(co->lendable.v[k], lendable(q, k, 0), &co->lendable.v[k]))
            co->lendable.v[k] = INT64_MAX;
    }
}

int64_t gq_queue_cohort_room(const gq_queue_cohort *co, int k)
{
    const gq_queue_quota *t = co->up;
    int64_t lift = 0, room;
    if (t && t->cohort && t->q->hard.set[k] && t->q->borrowing_limit.set[k]) {
        int64_t over = above(t->in_use.v[k], t->q->hard.v[k]);
        int64_t more = t->q->borrowing_limit.v[k] - over, up_free = t->cohort->free.v[k];
        if (up_free < more)
            more = up_free;
        if (__builtin_add_overflow(over, more > 0 ? more : 0, &lift))
            lift = INT64_MAX;
    }
    if (__builtin_add_overflow(co->free.v[k], lift, &room))
        room = INT64_MAX;
    return room;
}

/* What admitting need into pq takes of key k from its cohort's free
 * capacity: what it borrows more, and what it lends less. */
static int64_t cohort_take(const gq_queue_quota *pq, int k, int64_t need)
{
    int64_t before = pq->in_use.v[k], after;
    if (__builtin_add_overflow(before, need, &after))
        return INT64_MAX;
    const gq_quota *q = pq->q;
    return above(after, q->hard.v[k]) - above(before, q->hard.v[k]) + lendable(q, k, before) -
           lendable(q, k, after);
}

/* Whether pq has room for need on every key of its hard: within hard, or
 * above it by what its borrowingLimit and its cohort allow. *borrows (may
 * be NULL) tells whether it would go above hard. */
static bool quota_room(const gq_queue_quota *pq, const gq_amounts *need, bool *borrows)
{
    const gq_quota *q = pq->q;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t after;
        if (!q->hard.set[k] || need->v[k] <= 0)
            continue;
        if (__builtin_add_overflow(pq->in_use.v[k], need->v[k], &after))
            return false;
        if (after <= q->hard.v[k]) {
            /* Within its share; a member of a cohort must not lend less
             * than its borrowers hold (the cohort would pass what its
             * members hold): it reclaims first. */
            int64_t take = pq->cohort ? cohort_take(pq, k, need->v[k]) : 0;
            if (take > 0 && take > gq_queue_cohort_room(pq->cohort, k))
                return false;
            continue;
        }
        if (!pq->cohort || !q->borrowing_limit.set[k] ||
            after - q->hard.v[k] > q->borrowing_limit.v[k] ||
            cohort_take(pq, k, need->v[k]) > gq_queue_cohort_room(pq->cohort, k))
            return false;
        if (borrows)
            *borrows = true;
    }
    return true;
}

/* in_use + need <= hard for every key of hard. */
static bool fits(const gq_amounts *hard, const gq_amounts *in_use, const gq_amounts *need)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t sum;
        if (!hard->set[k] || need->v[k] <= 0)
            continue;
        if (__builtin_add_overflow(in_use->v[k], need->v[k], &sum) || sum > hard->v[k])
            return false;
    }
    return true;
}

static void amounts_add(gq_amounts *to, const gq_amounts *a)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (__builtin_add_overflow(to->v[k], a->v[k], &to->v[k]))
            to->v[k] = INT64_MAX;
}

static void amounts_zero(gq_amounts *a)
{
    memset(a, 0, sizeof(*a));
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        a->set[k] = true;
    a->fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
}

/* The members of one unit: a pod alone, or a group's members in byg. */
typedef struct unit {
    const gq_queue_entry *alone;
    const ref *members;
    size_t len;
} unit;

static const gq_queue_entry *unit_member(const unit *u, size_t m)
{
    return u->alone ? u->alone : u->members[m].e;
}

/* What member me owes under option o: its charge and the model it is
 * charged as. false when it has a choice of models but no option o. */
static bool member_terms(const gq_queue_entry *me, size_t o, const gq_amounts **charge,
                         const char **model)
{
    if (!me->n_options) {
        *charge = &me->charge;
        *model = me->model;
        return true;
    }
    if (o >= me->n_options)
        return false;
    *charge = &me->options[o].charge;
    *model = me->options[o].model;
    return true;
}

/* What unit u, on option o, has yet to pay quota qi: against spec.hard
 * (model NULL), or against the limits of model `model` (the members pinned
 * to it or to none). false when a member has no option o. */
static bool unit_need(const unit *u, size_t o, size_t qi, const char *model, gq_amounts *need)
{
    amounts_zero(need);
    for (size_t m = 0; m < u->len; m++) {
        const gq_queue_entry *me = unit_member(u, m);
        const gq_amounts *charge;
        const char *mm;
        if (!member_terms(me, o, &charge, &mm))
            return false;
        if (model && mm && strcmp(model, mm))
            continue;
        for (size_t j = 0; j < me->n_quotas; j++)
            if (me->quotas[j] == qi && !(me->paid && me->paid[j]))
                amounts_add(need, charge);
    }
    return true;
}

/* The first limit a unit found without room: the quota (SIZE_MAX: none
 * yet), its model limit (-1: spec.hard) and what the unit needs there. */
typedef struct shortfall {
    size_t quota;
    int model;
    gq_amounts need;
} shortfall;

/* Whether u on option o fits every quota of touched[0..nt); when not, and
 * short->quota is still unset, the first limit without room. false also
 * when a member has no option o (*valid false). */
static bool unit_fits(const unit *u, size_t o, const gq_queue_quota *quotas, const size_t *touched,
                      size_t nt, bool *valid, shortfall *short_)
{
    gq_amounts need;
    *valid = true;
    for (size_t t = 0; t < nt; t++) {
        const gq_queue_quota *pq = &quotas[touched[t]];
        if (!unit_need(u, o, touched[t], NULL, &need)) {
            *valid = false;
            return false;
        }
        int bad = quota_room(pq, &need, NULL) ? -2 : -1;
        size_t nm =
            pq->q->n_models < GQ_CRD_MAX_QUOTA_MODELS ? pq->q->n_models : GQ_CRD_MAX_QUOTA_MODELS;
        for (size_t mi = 0; bad == -2 && mi < nm; mi++) {
            const gq_model_limit *ml = &pq->q->models[mi];
            if (unit_need(u, o, touched[t], ml->name, &need) &&
                !fits(&ml->hard, &pq->model_in_use[mi], &need))
                bad = (int)mi;
        }
        if (bad == -2)
            continue;
        if (short_->quota == SIZE_MAX) {
            short_->quota = touched[t];
            short_->model = bad;
            unit_need(u, o, touched[t], bad >= 0 ? pq->q->models[bad].name : NULL, &short_->need);
        }
        return false;
    }
    return true;
}

void gq_queue_quota_move(gq_queue_quota *pq, const gq_amounts *charge, int sign)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t d = sign < 0 ? -charge->v[k] : charge->v[k];
        if (pq->cohort && pq->q->hard.set[k] && d &&
            __builtin_sub_overflow(pq->cohort->free.v[k], cohort_take(pq, k, d),
                                   &pq->cohort->free.v[k]))
            pq->cohort->free.v[k] = d > 0 ? INT64_MIN : INT64_MAX;
        if (__builtin_add_overflow(pq->in_use.v[k], d, &pq->in_use.v[k]))
            pq->in_use.v[k] = d > 0 ? INT64_MAX : 0;
    }
}

/* Whether u on option o goes above hard in a quota it touches. */
static bool unit_borrows(const unit *u, size_t o, const gq_queue_quota *quotas,
                         const size_t *touched, size_t nt)
{
    gq_amounts need;
    bool borrows = false;
    for (size_t t = 0; t < nt && !borrows; t++)
        if (unit_need(u, o, touched[t], NULL, &need))
            (void)quota_room(&quotas[touched[t]], &need, &borrows);
    return borrows;
}

/* Add need to in_use, less what leaving (NULL: nothing) holds of it,
 * which it uses up. */
/* need less what leaving (NULL: nothing) holds of it, which it uses up. */
static void take_leaving(gq_amounts *need, gq_amounts *leaving)
{
    for (int k = 0; leaving && k < GQ_KEY_COUNT; k++)
        if (need->v[k] > 0 && leaving->v[k] > 0) {
            int64_t take = need->v[k] < leaving->v[k] ? need->v[k] : leaving->v[k];
            leaving->v[k] -= take;
            need->v[k] -= take;
        }
}

/* Add what u owes on option o to the quotas it touches (and take what it
 * borrows, or lends less, from their cohorts). A hold (held) takes first
 * the room pods already leaving will free there, and adds only the rest. */
static void unit_charge(const unit *u, size_t o, gq_queue_quota *quotas, const size_t *touched,
                        size_t nt, bool held)
{
    gq_amounts need;
    for (size_t t = 0; t < nt; t++) {
        gq_queue_quota *pq = &quotas[touched[t]];
        if (unit_need(u, o, touched[t], NULL, &need)) {
            take_leaving(&need, held ? &pq->leaving : NULL);
            gq_queue_quota_move(pq, &need, +1);
        }
        for (size_t mi = 0; mi < pq->q->n_models && mi < GQ_CRD_MAX_QUOTA_MODELS; mi++)
            if (unit_need(u, o, touched[t], pq->q->models[mi].name, &need)) {
                take_leaving(&need, held ? &pq->model_leaving[mi] : NULL);
                amounts_add(&pq->model_in_use[mi], &need);
            }
    }
}

void gq_queue_quota_leaving(gq_queue_quota *q, const gq_amounts *charge, const char *model)
{
    amounts_add(&q->leaving, charge);
    for (size_t mi = 0; mi < q->q->n_models && mi < GQ_CRD_MAX_QUOTA_MODELS; mi++)
        if (!model || !strcmp(model, q->q->models[mi].name))
            amounts_add(&q->model_leaving[mi], charge);
}

/* gq_queue_plan's working state: the entries in admission order, the group
 * members by group, each unit's members, and per quota the marks of the
 * unit being decided, whether a strict queue is blocked, how many wait. */
typedef struct plan {
    const gq_queue_entry *entries;
    size_t n;
    gq_queue_quota *quotas;
    gq_queue_decision *out;
    ref *order, *byg;
    size_t *unit_start, *unit_len, *leader_of; /* by entry index */
    size_t *touched;                           /* quotas the unit charges, nt of them */
    bool *blocked, *is_touched, *is_short;     /* by quota index */
    int64_t *waiting;                          /* by quota index */
    /* Fair sharing (fairshare below): units set aside because they borrow
     * (def, by leader entry), the cohort members (lines) whose order a
     * set-aside unit holds (marked), and, for the second phase, each
     * line's set-aside units in order (fifo[fifo_start[q]..fifo_start[q+1]),
     * cursor[q] its first undecided one). */
    bool phase2;
    bool *def, *marked;
    size_t *fifo, *fifo_start, *cursor;
    size_t *lines, n_lines; /* the quotas whose line holds a set-aside unit */
    size_t *scratch;        /* a count, then up to nq quota indices */
    struct fair_item *heap; /* candidates by (share, position), lazily refreshed */
    size_t n_heap, cap_heap;
} plan;

/* A candidate of the second phase: a unit and its weighted share when it
 * was pushed (a share only grows as the pass admits, so a popped item whose
 * share has grown is pushed again, and the first whose share holds is the
 * least). */
typedef struct fair_item {
    int64_t share;
    size_t position, unit;
} fair_item;

static void plan_free(plan *p)
{
    free(p->order);
    free(p->byg);
    free(p->unit_start);
    free(p->unit_len);
    free(p->leader_of);
    free(p->touched);
    free(p->blocked);
    free(p->is_touched);
    free(p->is_short);
    free(p->waiting);
    free(p->def);
    free(p->marked);
    free(p->fifo);
    free(p->fifo_start);
    free(p->cursor);
    free(p->lines);
    free(p->scratch);
    free(p->heap);
}

static bool plan_alloc(plan *p, size_t n, size_t nq)
{
    size_t q = nq ? nq : 1;
    p->order = calloc(n, sizeof(*p->order));
    p->byg = calloc(n, sizeof(*p->byg));
    p->unit_start = calloc(n, sizeof(*p->unit_start));
    p->unit_len = calloc(n, sizeof(*p->unit_len));
    p->leader_of = calloc(n, sizeof(*p->leader_of));
    p->touched = calloc(q, sizeof(*p->touched));
    p->blocked = calloc(q, sizeof(*p->blocked));
    p->is_touched = calloc(q, sizeof(*p->is_touched));
    p->is_short = calloc(q, sizeof(*p->is_short));
    p->waiting = calloc(q, sizeof(*p->waiting));
    p->def = calloc(n, sizeof(*p->def));
    p->marked = calloc(q, sizeof(*p->marked));
    p->fifo = calloc(1, sizeof(*p->fifo)); /* sized in fair_lines */
    p->fifo_start = calloc(q + 1, sizeof(*p->fifo_start));
    p->cursor = calloc(q, sizeof(*p->cursor));
    p->lines = calloc(q, sizeof(*p->lines));
    p->scratch = calloc(q + 1, sizeof(*p->scratch));
    return p->order && p->byg && p->unit_start && p->unit_len && p->leader_of && p->touched &&
           p->blocked && p->is_touched && p->is_short && p->waiting && p->def && p->marked &&
           p->fifo && p->fifo_start && p->cursor && p->lines && p->scratch;
}

/* Admission order (priority, then age), each entry a unit of itself. */
static void plan_order(plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        p->order[i] = (ref){&p->entries[i], i, 0};
    qsort(p->order, p->n, sizeof(*p->order), ref_order_cmp);
    for (size_t r = 0; r < p->n; r++) {
        size_t i = p->order[r].i;
        p->order[r].rank = r;
        memset(&p->out[i], 0, sizeof(p->out[0]));
        p->out[i].position = r + 1;
        p->out[i].model_limit = -1;
        p->leader_of[i] = i;
        p->unit_len[i] = 1;
    }
}

/* Groups: members sorted by group then rank; the first is the leader,
 * byg[unit_start..+unit_len) lists the members. A group of mismatched
 * sizes or missing members waits as a whole. */
static void plan_groups(plan *p)
{
    size_t ng = 0;
    gq_queue_decision *out = p->out;
    const ref *byg = p->byg;
    for (size_t r = 0; r < p->n; r++)
        if (p->order[r].e->group)
            p->byg[ng++] = p->order[r];
    qsort(p->byg, ng, sizeof(*p->byg), ref_group_cmp);
    for (size_t a = 0; a < ng;) {
        size_t b = a + 1;
        while (b < ng && !strcmp(byg[a].e->group, byg[b].e->group))
            b++;
        size_t leader = byg[a].i;
        bool mismatch = false;
        for (size_t m = a; m < b; m++) {
            if (byg[m].e->group_size != byg[a].e->group_size)
                mismatch = true;
            p->leader_of[byg[m].i] = leader;
            out[byg[m].i].members = (int64_t)(b - a);
        }
        p->unit_start[leader] = a; /* offset of the members in byg */
        p->unit_len[leader] = b - a;
        int64_t have =
            (int64_t)(b - a) + (byg[a].e->group_running > 0 ? byg[a].e->group_running : 0);
        for (size_t m = a; m < b; m++) {
            if (mismatch)
                out[byg[m].i].state = GQ_QSTATE_GROUP_MISMATCH;
            else if (have < byg[a].e->group_size)
                out[byg[m].i].state = GQ_QSTATE_WAIT_MEMBERS;
            else
                out[byg[m].i].state = GQ_QSTATE_ADMIT; /* decided below */
        }
        a = b;
    }
}

/* Mark the quotas unit u charges in p->touched (*nt of them); *behind_q the
 * first a strict queue blocks (*behind), *unpaid when a member is not paid
 * for in one of them, *n_try the most options a member has. */
static void plan_touch(plan *p, const unit *u, size_t *nt, size_t *n_try, bool *unpaid,
                       bool *behind, size_t *behind_q)
{
    for (size_t m = 0; m < u->len; m++) {
        const gq_queue_entry *me = unit_member(u, m);
        if (me->n_options > *n_try)
            *n_try = me->n_options;
        for (size_t j = 0; j < me->n_quotas; j++) {
            size_t qi = me->quotas[j];
            if (!p->is_touched[qi]) {
                p->is_touched[qi] = true;
                p->touched[(*nt)++] = qi;
            }
            if (p->blocked[qi] && !*behind) {
                *behind = true;
                *behind_q = qi;
            }
            if (!(me->paid && me->paid[j]))
                *unpaid = true;
        }
    }
}

/* Try unit u's options in turn: *option the first that fits every quota it
 * charges (true), else false with *sf the first option's shortfall and
 * p->is_short marking every quota some option lacks room in. */
static bool plan_fit(plan *p, const unit *u, size_t nt, size_t n_try, size_t *option, shortfall *sf)
{
    for (size_t o = 0; o < n_try; o++) {
        bool valid;
        shortfall so = {.quota = SIZE_MAX, .model = -1};
        amounts_zero(&so.need);
        if (unit_fits(u, o, p->quotas, p->touched, nt, &valid, &so)) {
            *option = o;
            return true;
        }
        if (so.quota != SIZE_MAX) {
            p->is_short[so.quota] = true;
            if (sf->quota == SIZE_MAX)
                *sf = so;
        }
        if (!valid)
            break;
    }
    return false;
}

/* Whether a member of u is a preemptor whose room is held. */
static bool unit_held(const unit *u)
{
    for (size_t m = 0; m < u->len; m++)
        if (unit_member(u, m)->held)
            return true;
    return false;
}

/* The unit led by entry i: the pod, or its group's members in byg. */
static unit unit_at(const plan *p, size_t i)
{
    const gq_queue_entry *e = &p->entries[i];
    if (!e->group)
        return (unit){e, NULL, 1};
    return (unit){NULL, &p->byg[p->unit_start[i]], p->unit_len[i]};
}

static void plan_untouch(plan *p, size_t nt)
{
    for (size_t t = 0; t < nt; t++)
        p->is_touched[p->touched[t]] = p->is_short[p->touched[t]] = false;
}

/* Set aside the unit led by i for the second phase (fair sharing), holding
 * the order of every cohort member it charges. */
static void plan_defer(plan *p, size_t i, size_t nt)
{
    for (size_t t = 0; t < nt; t++)
        if (p->quotas[p->touched[t]].cohort)
            p->marked[p->touched[t]] = true;
    p->def[i] = true;
    plan_untouch(p, nt);
}

/* Whether a quota of touched[0..nt) holds a set-aside unit ahead. */
static bool plan_behind_deferred(const plan *p, size_t nt)
{
    for (size_t t = 0; t < nt; t++)
        if (p->marked[p->touched[t]])
            return true;
    return false;
}

/* Write the decision st of the unit led by i into every member's out. */
static void plan_record(plan *p, size_t i, gq_queue_decision d)
{
    const gq_queue_entry *e = &p->entries[i];
    for (size_t m = 0; m < p->unit_len[i]; m++) {
        gq_queue_decision *o = &p->out[e->group ? p->byg[p->unit_start[i] + m].i : i];
        d.position = o->position;
        d.members = o->members;
        *o = d;
    }
}

/* Decide the unit led by entry i (a pod, or a whole group): admit it with
 * the first option that fits every quota it charges, or say why it waits.
 * A unit that does not fit holds the line of a StrictFIFO quota only where
 * it lacks room itself: a pod that its own namespace's quota holds back
 * never stops the pods of other namespaces under a tenant quota they share
 * (docs/queueing.md). In the first phase a unit that would borrow, or that
 * stands behind one in a cohort member's line, is set aside (plan_defer). */
static void plan_unit(plan *p, size_t i)
{
    unit u = unit_at(p, i);
    size_t nt = 0, n_try = 1, behind_q = 0, len = u.len, option = 0;
    bool unpaid = false, behind = false;
    plan_touch(p, &u, &nt, &n_try, &unpaid, &behind, &behind_q);
    bool may_defer = !p->phase2 && unpaid && !unit_held(&u);
    if (may_defer && plan_behind_deferred(p, nt)) {
        plan_defer(p, i, nt);
        return;
    }
    gq_queue_decision d = {.state = GQ_QSTATE_ADMIT, .model_limit = -1};
    shortfall sf = {.quota = SIZE_MAX, .model = -1};
    amounts_zero(&sf.need);
    if (unpaid && behind) {
        d.state = GQ_QSTATE_BEHIND_HEAD;
        d.quota = behind_q;
        d.ahead = p->waiting[behind_q];
        p->waiting[behind_q] += (int64_t)len; /* in that line too, for the ones behind */
    } else if (unpaid && !plan_fit(p, &u, nt, n_try, &option, &sf)) {
        d.state = GQ_QSTATE_NO_ROOM;
        d.quota = sf.quota == SIZE_MAX ? (nt ? p->touched[0] : 0) : sf.quota;
        d.model_limit = sf.model;
        d.need = sf.need;
        for (size_t t = 0; t < nt; t++) {
            size_t qi = p->touched[t];
            if (!p->is_short[qi])
                continue;
            if (p->quotas[qi].q->strategy == GQ_QUEUE_STRICT)
                p->blocked[qi] = true;
            p->waiting[qi] += (int64_t)len;
        }
    }
    d.option = option;
    d.borrowing = d.state == GQ_QSTATE_ADMIT && unit_borrows(&u, option, p->quotas, p->touched, nt);
    if (may_defer && d.borrowing) {
        plan_defer(p, i, nt);
        return;
    }
    if (d.state == GQ_QSTATE_ADMIT || (d.state == GQ_QSTATE_NO_ROOM && unit_held(&u)))
        unit_charge(&u, option, p->quotas, p->touched, nt, d.state != GQ_QSTATE_ADMIT);
    plan_record(p, i, d);
    plan_untouch(p, nt);
}

/* --- fair sharing between borrowers (docs/queueing.md, "Fair sharing") --- */

/* Shares at or above this are of weight-0 borrowers: served after every
 * other borrower, among themselves by their unweighted share (Kueue). */
#define FAIR_ZERO_WEIGHT (INT64_MAX / 2)

/* pq's weighted dominant share were need added to it: the most, over
 * gpu-memory and gpus, of what it would use above hard, in millionths of
 * what its cohort lends at most (keys the cohort lends nothing of left
 * out), times 1000 over its weight in thousandths, below FAIR_ZERO_WEIGHT.
 * 0 when it would not go above hard; for weight 0, FAIR_ZERO_WEIGHT plus
 * the unweighted share. */
static int64_t weighted_share(const gq_queue_quota *pq, const gq_amounts *need)
{
    static const int keys[] = {GQ_KEY_GPU_MEMORY, GQ_KEY_GPUS};
    __extension__ typedef __int128 i128;
    const gq_quota *q = pq->q;
    i128 drs = 0;
    bool borrows = false;
    for (size_t i = 0; pq->cohort && i < sizeof(keys) / sizeof(keys[0]); i++) {
        int k = keys[i];
        int64_t after;
        if (!q->hard.set[k])
            continue;
        if (__builtin_add_overflow(pq->in_use.v[k], need->v[k] > 0 ? need->v[k] : 0, &after))
            after = INT64_MAX;
        int64_t b = above(after, q->hard.v[k]), l = pq->cohort->lendable.v[k];
        borrows = borrows || b > 0;
        if (b > 0 && l > 0 && (i128)b * 1000000 / l > drs)
            drs = (i128)b * 1000000 / l;
    }
    if (!borrows)
        return 0;
    if (q->fair_weight_milli <= 0)
        return FAIR_ZERO_WEIGHT + (drs < FAIR_ZERO_WEIGHT ? (int64_t)drs : FAIR_ZERO_WEIGHT);
    i128 dws = drs * 1000 / q->fair_weight_milli;
    return dws < FAIR_ZERO_WEIGHT - 1 ? (int64_t)dws : FAIR_ZERO_WEIGHT - 1;
}

/* The share of the unit led by i: the highest weighted share among the
 * cohort members it charges, on its first option. */
static int64_t unit_share(plan *p, size_t i)
{
    unit u = unit_at(p, i);
    size_t nt = 0, n_try = 1, bq = 0;
    bool unpaid = false, behind = false;
    int64_t share = 0;
    gq_amounts need;
    plan_touch(p, &u, &nt, &n_try, &unpaid, &behind, &bq);
    for (size_t t = 0; t < nt; t++) {
        const gq_queue_quota *pq = &p->quotas[p->touched[t]];
        if (!pq->cohort || !unit_need(&u, 0, p->touched[t], NULL, &need))
            continue;
        int64_t s = weighted_share(pq, &need);
        share = s > share ? s : share;
    }
    plan_untouch(p, nt);
    return share;
}

/* The first undecided set-aside unit of line qi, SIZE_MAX when none. */
static size_t fair_head(plan *p, size_t qi)
{
    while (p->cursor[qi] < p->fifo_start[qi + 1] && !p->def[p->fifo[p->cursor[qi]]])
        p->cursor[qi]++;
    return p->cursor[qi] < p->fifo_start[qi + 1] ? p->fifo[p->cursor[qi]] : SIZE_MAX;
}

/* Call fn for every line (cohort member) the unit led by i charges; stop
 * at the first false. Returns whether every call said true. */
static bool fair_each_line(plan *p, size_t i, bool (*fn)(plan *, size_t, size_t, size_t *),
                           size_t *arg)
{
    unit u = unit_at(p, i);
    size_t nt = 0, n_try = 1, bq = 0;
    bool unpaid = false, behind = false, all = true;
    plan_touch(p, &u, &nt, &n_try, &unpaid, &behind, &bq);
    for (size_t t = 0; t < nt && all; t++)
        if (p->quotas[p->touched[t]].cohort)
            all = fn(p, i, p->touched[t], arg);
    plan_untouch(p, nt);
    return all;
}

static bool line_count(plan *p, size_t i, size_t qi, size_t *arg)
{
    (void)p, (void)i, (void)arg;
    p->fifo_start[qi + 1]++;
    return true;
}

static bool line_fill(plan *p, size_t i, size_t qi, size_t *arg)
{
    (void)arg;
    p->fifo[p->cursor[qi]++] = i;
    return true;
}

static bool line_head(plan *p, size_t i, size_t qi, size_t *arg)
{
    (void)arg;
    return fair_head(p, qi) == i;
}

/* Each line's set-aside units in the cluster-wide order. false: out of
 * memory. */
static bool fair_lines(plan *p, size_t nq)
{
    size_t total = 0;
    for (size_t r = 0; r < p->n; r++)
        if (p->def[p->order[r].i])
            fair_each_line(p, p->order[r].i, line_count, NULL);
    for (size_t q = 0; q < nq; q++) {
        if (p->fifo_start[q + 1])
            p->lines[p->n_lines++] = q;
        total += p->fifo_start[q + 1];
        p->fifo_start[q + 1] = total;
        p->cursor[q] = p->fifo_start[q];
    }
    size_t *f = realloc(p->fifo, (total ? total : 1) * sizeof(*f));
    if (!f)
        return false;
    p->fifo = f;
    for (size_t r = 0; r < p->n; r++)
        if (p->def[p->order[r].i])
            fair_each_line(p, p->order[r].i, line_fill, NULL);
    for (size_t q = 0; q < nq; q++)
        p->cursor[q] = p->fifo_start[q];
    return true;
}

static bool item_less(const fair_item *a, const fair_item *b)
{
    return a->share < b->share || (a->share == b->share && a->position < b->position);
}

static bool heap_push(plan *p, fair_item it)
{
    if (p->n_heap == p->cap_heap) {
        size_t cap = p->cap_heap ? p->cap_heap * 2 : 64;
        fair_item *h = cap > p->cap_heap ? realloc(p->heap, cap * sizeof(*h)) : NULL;
        if (!h)
            return false;
        p->heap = h;
        p->cap_heap = cap;
    }
    size_t i = p->n_heap++;
    for (; i && item_less(&it, &p->heap[(i - 1) / 2]); i = (i - 1) / 2)
        p->heap[i] = p->heap[(i - 1) / 2];
    p->heap[i] = it;
    return true;
}

static fair_item heap_pop(plan *p)
{
    fair_item top = p->heap[0], last = p->heap[--p->n_heap];
    size_t i = 0, n = p->n_heap;
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && item_less(&p->heap[c + 1], &p->heap[c]))
            c++;
        if (!item_less(&p->heap[c], &last))
            break;
        p->heap[i] = p->heap[c];
    }
    if (n)
        p->heap[i] = last;
    return top;
}

/* Push the head of line qi when it is first in every line it stands in. */
static bool push_head(plan *p, size_t qi, size_t *unused)
{
    (void)unused;
    size_t h = fair_head(p, qi);
    if (h == SIZE_MAX || !fair_each_line(p, h, line_head, NULL))
        return true;
    return heap_push(p, (fair_item){unit_share(p, h), p->out[h].position, h});
}

/* Collect line qi in arg[1..] (arg[0] counts them). */
static bool line_collect(plan *p, size_t i, size_t qi, size_t *arg)
{
    (void)p, (void)i;
    arg[1 + arg[0]++] = qi;
    return true;
}

/* The second phase: among set-aside units first in every line they stand
 * in, decide the one of lowest weighted share (then the earlier in the
 * cluster-wide order), until none is left; after each, the new heads of
 * its lines become candidates. false: out of memory. */
static bool fairshare(plan *p, size_t nq)
{
    if (!fair_lines(p, nq))
        return false;
    p->phase2 = true;
    for (size_t l = 0; l < p->n_lines; l++)
        if (!push_head(p, p->lines[l], NULL))
            return false;
    while (p->n_heap) {
        fair_item it = heap_pop(p);
        if (!p->def[it.unit] || !fair_each_line(p, it.unit, line_head, NULL))
            continue; /* decided, or pushed again once first in every line */
        int64_t now = unit_share(p, it.unit);
        if (now != it.share) {
            it.share = now;
            if (!heap_push(p, it))
                return false;
            continue;
        }
        p->def[it.unit] = false;
        plan_unit(p, it.unit);
        /* Its lines first (pushing a head walks that head's lines too). */
        p->scratch[0] = 0;
        fair_each_line(p, it.unit, line_collect, p->scratch);
        for (size_t l = 0; l < p->scratch[0]; l++)
            if (!push_head(p, p->scratch[1 + l], NULL))
                return false;
    }
    return true;
}

gq_code gq_queue_plan(const gq_queue_entry *entries, size_t n, gq_queue_quota *quotas, size_t nq,
                      gq_queue_decision *out, gq_err *err)
{
    gq_code rc = GQ_OK;
    plan p = {.entries = entries, .n = n, .quotas = quotas, .out = out};
    if (!n)
        return GQ_OK;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < entries[i].n_quotas; j++)
            if (entries[i].quotas[j] >= nq)
                return gq_err_set(err, GQ_EINVAL, "queued pod %s: quota index out of range",
                                  entries[i].uid ? entries[i].uid : "");
    if (!plan_alloc(&p, n, nq)) {
        rc = gq_err_oom(err);
        goto out;
    }
    plan_order(&p);
    plan_groups(&p);
    for (size_t r = 0; r < n; r++) {
        size_t i = p.order[r].i;
        if (entries[i].group && p.leader_of[i] != i)
            continue; /* decided with its leader */
        if (out[i].state != GQ_QSTATE_ADMIT)
            continue; /* incomplete or mismatched group: waits, blocks nobody */
        plan_unit(&p, i);
    }
    if (!fairshare(&p, nq))
        rc = gq_err_oom(err);
out:
    plan_free(&p);
    return rc;
}

gq_code gq_pod_with_model(json_object *pod, const char *model, json_object **out, gq_err *err)
{
    json_object *c = NULL, *meta, *ann, *v = json_object_new_string(model);
    if (!v || json_object_deep_copy(pod, &c, NULL)) {
        json_object_put(v);
        json_object_put(c);
        return gq_err_oom(err);
    }
    if (!json_object_object_get_ex(c, "metadata", &meta) ||
        !json_object_object_get_ex(meta, "annotations", &ann) ||
        !json_object_is_type(ann, json_type_object)) {
        json_object_put(v);
        json_object_put(c);
        return gq_err_set(err, GQ_EINVAL, "pod has no metadata.annotations");
    }
    if (json_object_object_add(ann, GQ_ANN_GPU_MODEL, v)) {
        json_object_put(c);
        return gq_err_oom(err);
    }
    *out = c;
    return GQ_OK;
}

/* The pod priced on model: *cost (initialised by the caller) and *copy (the
 * pod with the model, owned by the caller). */
static gq_code price_on(const gq_config *cfg, json_object *pod, gq_pod_trust trust,
                        const gq_model *model, json_object **copy, gq_pod_cost *cost, gq_err *err)
{
    gq_cost_scope scope = {NULL, 0, trust};
    gq_code rc = gq_pod_with_model(pod, model->name, copy, err);
    if (!rc && (rc = gq_pod_cost_compute_in(cfg, *copy, &scope, cost, err)) != GQ_OK)
        gq_err_prefix(err, "GPU model %s", model->name);
    return rc;
}

gq_code gq_queue_price_choices(const gq_config *cfg, json_object *pod, gq_pod_trust trust,
                               const gq_model *const *choices, size_t n, gq_model_option *opts,
                               gq_err *err)
{
    for (size_t i = 0; i < n; i++) {
        json_object *copy = NULL;
        gq_pod_cost cost;
        gq_pod_cost_init(&cost);
        gq_code rc = price_on(cfg, pod, trust, choices[i], &copy, &cost, err);
        if (!rc) {
            opts[i].model = choices[i]->name;
            gq_charge_from_cost(&cost, gq_pod_is_terminal(pod), &opts[i].charge);
        }
        gq_pod_cost_dispose(&cost);
        json_object_put(copy);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

static gq_code op(json_object *arr, const char *verb, const char *path, json_object *value)
{
    json_object *o = json_object_new_object();
    if (!o || (strcmp(verb, "remove") && !value) ||
        json_object_object_add(o, "op", json_object_new_string(verb)) ||
        json_object_object_add(o, "path", json_object_new_string(path)) ||
        (value && json_object_object_add(o, "value", value)) || json_object_array_add(arr, o)) {
        if (!o)
            json_object_put(value);
        json_object_put(o);
        return GQ_ENOMEM;
    }
    return GQ_OK;
}

/* Append the operations pinning pin->pod to pin->model. */
static gq_code pin_ops(const gq_queue_pin *pin, json_object *arr, gq_err *err)
{
    json_object *copy = NULL;
    gq_pod_cost cost;
    gq_rewrite rw;
    gq_pod_cost_init(&cost);
    gq_rewrite_init(&rw);
    json_object *ann = gq_json_meta_object(pin->pod, "annotations");
    const char *list = ann ? gq_json_get_string(ann, GQ_ANN_GPU_MODEL) : NULL;
    gq_rewrite_opts ro = {.chosen = pin->model, .choices = list};
    gq_code rc = price_on(pin->cfg, pin->pod, pin->trust, pin->model, &copy, &cost, err);
    if (!rc)
        rc = gq_rewrite_pod(pin->cfg, pin->pod, &cost, &ro, &rw, err);
    json_object *ops = rc ? NULL : gq_patch_json(rw.patch);
    for (size_t i = 0; ops && !rc && i < json_object_array_length(ops); i++)
        if (json_object_array_add(arr, json_object_get(json_object_array_get_idx(ops, i))))
            rc = gq_err_oom(err);
    gq_rewrite_dispose(&rw);
    gq_pod_cost_dispose(&cost);
    json_object_put(copy);
    return rc;
}

/* The ungate patch of gate, with pin's operations (when pin is given)
 * between the tests and the removal. */
static gq_code ungate_patch(const char *uid, int gate_index, const char *gate,
                            const gq_queue_pin *pin, json_object **out, gq_err *err)
{
    char path[64], npath[80];
    json_object *arr = json_object_new_array();
    gq_code rc = arr ? GQ_OK : GQ_ENOMEM;
    snprintf(path, sizeof path, "/spec/schedulingGates/%d", gate_index);
    snprintf(npath, sizeof npath, "%s/name", path);
    if (!rc)
        rc = op(arr, "test", "/metadata/uid", json_object_new_string(uid));
    if (!rc)
        rc = op(arr, "test", npath, json_object_new_string(gate));
    if (rc == GQ_ENOMEM)
        gq_err_set(err, rc, "out of memory");
    if (!rc && pin)
        rc = pin_ops(pin, arr, err);
    if (!rc && (rc = op(arr, "remove", path, NULL)))
        gq_err_set(err, rc, "out of memory");
    if (rc) {
        json_object_put(arr);
        return rc;
    }
    *out = arr;
    return GQ_OK;
}

gq_code gq_queue_ungate_patch(const char *uid, int gate_index, const gq_queue_pin *pin,
                              json_object **out, gq_err *err)
{
    return ungate_patch(uid, gate_index, GQ_QUEUE_GATE, pin, out, err);
}

gq_code gq_queue_mark_borrowing(json_object *patch, gq_err *err)
{
    size_t n = json_object_is_type(patch, json_type_array) ? json_object_array_length(patch) : 0;
    if (!n)
        return gq_err_set(err, GQ_EINVAL, "not an ungate patch");
    json_object *last = json_object_get(json_object_array_get_idx(patch, n - 1));
    gq_code rc = json_object_array_del_idx(patch, n - 1, 1) ? GQ_ENOMEM : GQ_OK;
    if (!rc)
        rc = op(patch, "add", "/metadata/annotations/gpuquota.io~1borrowing",
                json_object_new_string("true"));
    if (!rc && json_object_array_add(patch, last))
        rc = GQ_ENOMEM;
    else if (!rc)
        last = NULL;
    json_object_put(last);
    return rc ? gq_err_oom(err) : GQ_OK;
}

gq_code gq_pod_ungate_patch(const char *uid, int gate_index, const char *gate, json_object **out,
                            gq_err *err)
{
    return ungate_patch(uid, gate_index, gate, NULL, out, err);
}

static bool relative_form(gq_form f)
{
    return f == GQ_FORM_FRACTION || f == GQ_FORM_ANN_FRACTION || f == GQ_FORM_HAMI_PERCENT ||
           f == GQ_FORM_KAI_FRACTION;
}

gq_code gq_queue_check_deferred_choice(const gq_config *cfg, const gq_pod_cost *cost,
                                       const gq_model *const *choices, size_t n, gq_err *err)
{
    if (cfg->backend == GQ_BACKEND_TIMESLICING || n < 2)
        return GQ_OK;
    for (size_t i = 0; i < cost->n_ctrs; i++) {
        const gq_ctr_cost *c = &cost->ctrs[i];
        if (c->exclusive)
            continue;
        if (cfg->backend == GQ_BACKEND_MIG)
            return gq_err_set(err, GQ_EDENIED,
                              "container %s asks a GPU slice of a pod that accepts several GPU "
                              "models and waits in a queue: MIG profiles differ by model and the "
                              "request is written before the model is chosen; pin one model",
                              c->name);
        if (!relative_form(c->form))
            continue;
        for (size_t j = 1; j < n; j++)
            if (choices[j]->memory != choices[0]->memory)
                return gq_err_set(
                    err, GQ_EDENIED,
                    "container %s asks %s of a GPU of a pod that accepts models of different "
                    "memory (%s, %s) and waits in a queue: the device request is written before "
                    "the model is chosen; ask an amount (%s) or accept models of one size",
                    c->name, c->original, choices[0]->name, choices[j]->name, GQ_RES_GPU_MEMORY);
    }
    return GQ_OK;
}

gq_code gq_queue_unit_fits(const gq_queue_entry *members, size_t n, size_t option,
                           const gq_queue_quota *quotas, size_t qi, bool *out)
{
    ref one, *refs = n > 1 ? calloc(n, sizeof(*refs)) : &one;
    if (!refs)
        return GQ_ENOMEM;
    for (size_t m = 0; m < n; m++)
        refs[m] = (ref){&members[m], m, m};
    unit u = {.alone = NULL, .members = refs, .len = n};
    bool valid;
    shortfall sf = {.quota = SIZE_MAX};
    *out = unit_fits(&u, option, quotas, &qi, 1, &valid, &sf) && valid;
    if (refs != &one)
        free(refs);
    return GQ_OK;
}
