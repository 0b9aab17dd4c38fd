/* Compact records of GPU pods, indexed by namespace. The kube cache owns the
 * records (its transform builds them, its free_record frees them); the store
 * only links them into per-namespace lists, so a pod costs one small
 * allocation here plus the cache's entry. One rwlock guards the index, the
 * namespace table and the interned strings. */
#include "controller/ctl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/hash.h"
#include "common/json_member.h"
#include "quota/claimcheck.h"
#include "quota/pod.h"

#define NS_BUCKETS_MIN 64
#define UID_BUCKETS_MIN 64
#define CTL_MAX_FIELD 1024 /* longest name or uid kept (API limits are lower) */

/* Running pods of one namespace with the same scope facts, summed: every
 * quota matches all of them or none, so a recount reads one entry instead of
 * each pod. */
typedef struct ns_group {
    const char *pc;    /* interned priority class, NULL = none */
    const char *model; /* pinned model (borrowed from the config), NULL = none */
    bool terminating;
    size_t pods;
    int64_t sum[GQ_KEY_COUNT];
} ns_group;

struct ctl_ns {
    gq_hnode node;       /* in the store's namespace table, by name */
    size_t refs;         /* records holding it + 1 while the Namespace object exists */
    bool present;        /* the Namespace object exists */
    json_object *labels; /* metadata.labels, owned; NULL = none */
    ctl_pod *head;       /* linked records */
    size_t n_pods;
    /* Linked pods that are neither terminal nor being deleted are summed in
     * groups; pods being deleted stop counting at a time of their own and are
     * read one by one, as are pods naming shared ResourceClaims (counted
     * once per quota by the recount): n_deleting of them. inexact: a sum would have
     * overflowed or a group could not be allocated: read every pod. */
    ns_group *groups;
    size_t n_groups, cap_groups, n_deleting;
    size_t n_gated; /* linked non-terminal pods queued behind our gate */
    bool inexact;
    char name[];
};

struct ctl_podstore {
    pthread_rwlock_t lock;
    gq_htab nss; /* ctl_ns by name */
    char **pcs;  /* interned priority class names, never freed before the store */
    size_t n_pcs, cap_pcs;
    size_t n_pods;
    /* Linked records with a uid, by uid: reservations are keyed by the pod's
     * uid, and a quota may hold many of them. */
    gq_htab uids;
    size_t bytes; /* allocated for records (the tables' arrays apart) */
};

gq_code ctl_podstore_new(ctl_podstore **out)
{
    ctl_podstore *s = calloc(1, sizeof(*s));
    if (!s)
        return GQ_ENOMEM;
    if (gq_htab_init(&s->nss, NS_BUCKETS_MIN) || gq_htab_init(&s->uids, UID_BUCKETS_MIN) ||
        pthread_rwlock_init(&s->lock, NULL) != 0) {
        gq_htab_free(&s->nss);
        gq_htab_free(&s->uids);
        free(s);
        return GQ_ENOMEM;
    }
    s->bytes = sizeof(*s);
    *out = s;
    return GQ_OK;
}

static void ns_free(ctl_ns *n)
{
    if (!n)
        return;
    json_object_put(n->labels);
    free(n->groups);
    free(n);
}

void ctl_podstore_free(ctl_podstore *s)
{
    if (!s)
        return;
    gq_htab_iter it;
    for (gq_hnode *x = gq_htab_iter_first(&it, &s->nss); x; x = gq_htab_iter_next(&it)) {
        ctl_ns *n = GQ_HTAB_ENTRY(x, ctl_ns, node);
        for (ctl_pod *p = n->head, *pn; p; p = pn) {
            pn = p->next;
            free(p);
        }
        ns_free(n);
    }
    for (size_t i = 0; i < s->n_pcs; i++)
        free(s->pcs[i]);
    free(s->pcs);
    gq_htab_free(&s->nss);
    gq_htab_free(&s->uids);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

static ctl_ns *ns_find(ctl_podstore *s, const char *name)
{
    return GQ_HTAB_FIND_NAMED(&s->nss, ctl_ns, node, name, name);
}

/* The namespace entry for name with one more reference; write lock held. */
static ctl_ns *ns_ref(ctl_podstore *s, const char *name)
{
    ctl_ns *n = ns_find(s, name);
    if (n) {
        n->refs++;
        return n;
    }
    size_t bytes;
    if (!(n = GQ_HTAB_ADD_NAMED(&s->nss, ctl_ns, node, name, name, &bytes)))
        return NULL;
    n->refs = 1;
    s->bytes += bytes;
    return n;
}

/* Drop one reference; the entry goes with the last. Write lock held. */
static void ns_unref(ctl_podstore *s, ctl_ns *n)
{
    if (!n || --n->refs > 0)
        return;
    gq_htab_remove(&s->nss, &n->node);
    s->bytes -= sizeof(*n) + strlen(n->name) + 1;
    ns_free(n);
}

/* Interned copy of a priority class name; write lock held. There are few
 * PriorityClass objects in a cluster, so a linear table is enough. */
static const char *pc_intern(ctl_podstore *s, const char *pc)
{
    for (size_t i = 0; i < s->n_pcs; i++)
        if (!strcmp(s->pcs[i], pc))
            return s->pcs[i];
    if (s->n_pcs == s->cap_pcs) {
        size_t nc = s->cap_pcs ? s->cap_pcs * 2 : 8;
        char **np = realloc(s->pcs, nc * sizeof(*np));
        if (!np)
            return NULL;
        s->pcs = np;
        s->cap_pcs = nc;
    }
    char *c = strdup(pc);
    if (!c)
        return NULL;
    s->bytes += strlen(pc) + 1;
    s->pcs[s->n_pcs++] = c;
    return c;
}

const char *ctl_pod_name(const ctl_pod *p)
{
    return p->data;
}

const char *ctl_pod_uid(const ctl_pod *p)
{
    return p->data + p->uid_off;
}

const char *ctl_pod_group(const ctl_pod *p)
{
    return p->data + p->group_off;
}

const char *ctl_pod_namespace(const ctl_pod *p)
{
    return p->ns->name;
}

bool ctl_pod_counts(const ctl_pod *p, int64_t now)
{
    return !p->gated && gq_pod_counts(p->terminal, p->delete_at, now);
}

static bool claims_same(const ctl_pod *a, const ctl_pod *b)
{
    if (a->n_claims != b->n_claims)
        return false;
    for (size_t i = 0; i < a->n_claims; i++) {
        const gq_shared_claim *x = &a->claims[i], *y = &b->claims[i];
        if (strcmp(x->uid, y->uid) || strcmp(x->name, y->name) || x->gpus != y->gpus ||
            x->memory != y->memory || x->model != y->model)
            return false;
    }
    return true;
}

bool ctl_pod_same(const ctl_pod *a, const ctl_pod *b)
{
    if (!a || !b)
        return a == b;
    return a->ns == b->ns && a->priority_class == b->priority_class &&
           !memcmp(a->charge, b->charge, sizeof(a->charge)) && a->delete_at == b->delete_at &&
           a->terminal == b->terminal && a->terminating == b->terminating && a->model == b->model &&
           a->gated == b->gated && a->gate_idx == b->gate_idx && a->priority == b->priority &&
           a->group_size == b->group_size && !strcmp(ctl_pod_uid(a), ctl_pod_uid(b)) &&
           !strcmp(ctl_pod_group(a), ctl_pod_group(b)) && !a->choices == !b->choices &&
           (!a->choices || !memcmp(a->choices, b->choices, sizeof(*a->choices))) &&
           claims_same(a, b);
}

/* The choices of a queued pod accepting several models; NULL when it
 * accepts one (*oom false) or on allocation failure (*oom true). */
static ctl_choices *choices_of(const gq_pod *gp, bool *oom)
{
    ctl_choices *ch = NULL;
    *oom = false;
    if (!gp->n_choices)
        return NULL;
    if (!(ch = calloc(1, sizeof(*ch)))) {
        *oom = true;
        return NULL;
    }
    ch->n = gp->n_choices;
    for (size_t i = 0; i < gp->n_choices; i++) {
        ch->model[i] = gp->choices[i];
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            ch->charge[i][k] = gp->choice_charge[i].v[k];
    }
    return ch;
}

/* The record's fields from the decoded pod (its strings and claims aside). */
static void fill_record(ctl_pod *p, const gq_pod *gp, json_object *pod, bool dra)
{
    const char *node = gq_json_get_string(gq_json_member(pod, "spec"), "nodeName");
    p->group_size = gp->group.present ? (int32_t)gp->group.size : 0;
    p->gated = gp->gate_index >= 0;
    p->claims_gated = gq_pod_named_gate_index(pod, GQ_CLAIMS_GATE) >= 0;
    const char *borrowing =
        gq_json_get_string(gq_json_meta_object(pod, "annotations"), GQ_ANN_BORROWING);
    p->borrowing = borrowing && !strcmp(borrowing, "true");
    p->dra = dra;
    p->bound = node && node[0];
    p->gate_idx = (int16_t)(gp->gate_index >= 0 ? gp->gate_index : 0);
    p->priority = gp->priority;
    p->created_us = gp->created_us;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        p->charge[k] = gp->charge.v[k];
    p->delete_at = gp->delete_at;
    p->terminal = gp->facts.terminal;
    p->terminating = gp->facts.terminating;
    p->model = gp->facts.model;
}

/* Link p to its interned namespace and priority class and count its bytes
 * (sz) in the store; false on allocation failure (p then holds nothing). */
static bool store_intern(ctl_podstore *s, ctl_pod *p, const char *ns, const char *pc, size_t sz)
{
    pthread_rwlock_wrlock(&s->lock);
    p->ns = ns_ref(s, ns);
    if (p->ns && pc && pc[0] && !(p->priority_class = pc_intern(s, pc))) {
        ns_unref(s, p->ns);
        p->ns = NULL;
    }
    if (p->ns)
        s->bytes += sz;
    pthread_rwlock_unlock(&s->lock);
    return p->ns != NULL;
}

/* A record holding the pod's name, uid and group name; *sz is its size.
 * NULL on allocation failure. */
static ctl_pod *pod_new(const gq_pod *gp, const char *name, const char *uid, size_t *sz)
{
    const char *gname = gp->group.present ? gp->group.name : "";
    size_t nl = strlen(name), ul = strlen(uid), gl = strlen(gname);
    ctl_pod *p;
    *sz = sizeof(*p) + nl + 1 + ul + 1 + gl + 1;
    if (!(p = calloc(1, *sz)))
        return NULL;
    memcpy(p->data, name, nl + 1);
    p->uid_off = (uint16_t)(nl + 1);
    memcpy(p->data + p->uid_off, uid, ul + 1);
    p->group_off = (uint16_t)(p->uid_off + ul + 1);
    memcpy(p->data + p->group_off, gname, gl + 1);
    return p;
}

/* The record's model choices and shared claims, their bytes added to *sz;
 * false on allocation failure. */
static bool take_choices_and_claims(ctl_pod *p, const gq_pod *gp, size_t *sz)
{
    bool oom;
    if (!(p->choices = choices_of(gp, &oom)) && oom)
        return false;
    if (p->choices)
        *sz += sizeof(*p->choices);
    if (gp->cost.n_shared) {
        /* Counted once per quota however many pods name them: the recount
         * reads these pods one by one (gq_quota_recount). */
        if (!(p->claims = malloc(gp->cost.n_shared * sizeof(*p->claims))))
            return false;
        memcpy(p->claims, gp->cost.shared, gp->cost.n_shared * sizeof(*p->claims));
        p->n_claims = (uint16_t)gp->cost.n_shared;
        *sz += gp->cost.n_shared * sizeof(*p->claims);
    }
    return true;
}

gq_code ctl_pod_from_json(ctl_podstore *s, const gq_config *cfg, json_object *pod, ctl_pod **out,
                          gq_err *err)
{
    gq_code rc;
    gq_pod gp;
    ctl_pod *p = NULL;
    json_object *meta = gq_json_member(pod, "metadata");
    const char *name = gq_json_get_string(meta, "name"),
               *ns = gq_json_get_string(meta, "namespace");
    const char *uid = gq_json_get_string(meta, "uid");
    size_t sz;

    gq_pod_init(&gp);
    if (!name || !name[0] || !ns || !ns[0]) {
        *out = NULL;
        return GQ_OK;
    }
    if ((rc = gq_pod_decode(cfg, pod, &(gq_pod_scope){.ns = ns}, &gp, err)))
        goto out;
    bool dra = gq_json_get_string(gq_json_meta_object(pod, "annotations"), GQ_ANN_CLAIMS) &&
               gq_json_get_array(gq_json_member(pod, "spec"), "resourceClaims");
    if (gp.charge.v[GQ_KEY_GPU_PODS] == 0 && !dra) { /* no GPU: nothing to keep */
        *out = NULL;
        goto out;
    }
    if (!uid)
        uid = "";
    if (strlen(name) > CTL_MAX_FIELD || strlen(uid) > CTL_MAX_FIELD) {
        rc = gq_err_set(err, GQ_ELIMIT, "pod %s/%.64s: name or uid too long", ns, name);
        goto out;
    }
    if (!(p = pod_new(&gp, name, uid, &sz)) || !take_choices_and_claims(p, &gp, &sz)) {
        rc = gq_err_oom(err);
        goto out;
    }
    fill_record(p, &gp, pod, dra);
    if (!store_intern(s, p, ns, gp.facts.priority_class, sz)) {
        rc = gq_err_oom(err);
        goto out;
    }
    *out = p;
    p = NULL;
out:
    if (p) {
        free(p->choices);
        free(p->claims);
    }
    free(p);
    gq_pod_dispose(&gp);
    return rc;
}

/* Add (sign 1) or remove (sign -1) p from its namespace's sums. Write lock
 * held. */
static void group_update(ctl_ns *n, const ctl_pod *p, int sign)
{
    if (p->terminal)
        return;
    if (p->gated) { /* queued: read one by one, never summed */
        n->n_gated += sign > 0 ? 1 : (size_t)-1;
        return;
    }
    if (p->delete_at || p->n_claims) {
        n->n_deleting += sign > 0 ? 1 : (size_t)-1;
        return;
    }
    if (n->inexact)
        return;
    ns_group *g = NULL;
    for (size_t i = 0; i < n->n_groups && !g; i++)
        if (n->groups[i].pc == p->priority_class && n->groups[i].terminating == p->terminating &&
            n->groups[i].model == p->model)
            g = &n->groups[i];
    if (!g && sign > 0) {
        if (n->n_groups == n->cap_groups) {
            size_t nc = n->cap_groups ? n->cap_groups * 2 : 2;
            ns_group *ng = realloc(n->groups, nc * sizeof(*ng));
            if (!ng) {
                n->inexact = true;
                return;
            }
            n->groups = ng;
            n->cap_groups = nc;
        }
        g = &n->groups[n->n_groups++];
        memset(g, 0, sizeof(*g));
        g->pc = p->priority_class;
        g->model = p->model;
        g->terminating = p->terminating;
    }
    if (!g) { /* removing a pod no group holds: sums were inexact before */
        n->inexact = true;
        return;
    }
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t d = sign > 0 ? p->charge[k] : -p->charge[k];
        if (__builtin_add_overflow(g->sum[k], d, &g->sum[k]))
            n->inexact = true;
    }
    g->pods += sign > 0 ? 1 : (size_t)-1;
    if (g->pods == 0)
        *g = n->groups[--n->n_groups];
}

/* Write lock held. */
static void uid_index(ctl_podstore *s, ctl_pod *p, bool add)
{
    const char *uid = ctl_pod_uid(p);
    if (!uid[0])
        return;
    if (add)
        gq_htab_insert(&s->uids, &p->unode, gq_fnv1a(uid));
    else
        gq_htab_remove(&s->uids, &p->unode);
}

/* The first linked record with uid in namespace ns, NULL if none. Read lock
 * held. A uid in another namespace does not count: a reservation names the
 * namespace its pod was admitted to. */
static const ctl_pod *find_uid_locked(ctl_podstore *s, const char *ns, const char *uid)
{
    if (!ns || !uid || !uid[0])
        return NULL;
    for (gq_hnode *x = gq_htab_first(&s->uids, gq_fnv1a(uid)); x; x = gq_htab_next(x)) {
        const ctl_pod *p = GQ_HTAB_ENTRY(x, ctl_pod, unode);
        if (!strcmp(ctl_pod_uid(p), uid) && !strcmp(p->ns->name, ns))
            return p;
    }
    return NULL;
}

/* Write lock held. */
static void unlink_locked(ctl_podstore *s, ctl_pod *p)
{
    if (!p || !p->linked)
        return;
    uid_index(s, p, false);
    group_update(p->ns, p, -1);
    if (p->prev)
        p->prev->next = p->next;
    else
        p->ns->head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->linked = false;
    p->ns->n_pods--;
    s->n_pods--;
}

static void link_locked(ctl_podstore *s, ctl_pod *p)
{
    if (!p || p->linked)
        return;
    p->prev = NULL;
    p->next = p->ns->head;
    if (p->next)
        p->next->prev = p;
    p->ns->head = p;
    p->linked = true;
    uid_index(s, p, true);
    group_update(p->ns, p, 1);
    p->ns->n_pods++;
    s->n_pods++;
}

static size_t pod_size(const ctl_pod *p)
{
    return sizeof(*p) + strlen(ctl_pod_name(p)) + 1 + strlen(ctl_pod_uid(p)) + 1 +
           strlen(ctl_pod_group(p)) + 1 + (p->choices ? sizeof(*p->choices) : 0) +
           p->n_claims * sizeof(*p->claims);
}

void ctl_pod_free(ctl_podstore *s, ctl_pod *p)
{
    if (!p)
        return;
    pthread_rwlock_wrlock(&s->lock);
    unlink_locked(s, p);
    s->bytes -= pod_size(p);
    ns_unref(s, p->ns);
    pthread_rwlock_unlock(&s->lock);
    free(p->choices);
    free(p->claims);
    free(p);
}

void ctl_podstore_link(ctl_podstore *s, ctl_pod *p)
{
    ctl_podstore_replace(s, NULL, p);
}

void ctl_podstore_unlink(ctl_podstore *s, ctl_pod *p)
{
    ctl_podstore_replace(s, p, NULL);
}

void ctl_podstore_replace(ctl_podstore *s, ctl_pod *old, ctl_pod *new_)
{
    pthread_rwlock_wrlock(&s->lock);
    unlink_locked(s, old);
    link_locked(s, new_);
    pthread_rwlock_unlock(&s->lock);
}

gq_code ctl_podstore_set_namespace(ctl_podstore *s, const char *ns, json_object *labels,
                                   bool *changed)
{
    json_object *copy = NULL;
    if (labels && json_object_is_type(labels, json_type_object) &&
        json_object_object_length(labels) > 0 && json_object_deep_copy(labels, &copy, NULL) != 0)
        return GQ_ENOMEM;
    pthread_rwlock_wrlock(&s->lock);
    ctl_ns *n = ns_ref(s, ns);
    if (!n) {
        pthread_rwlock_unlock(&s->lock);
        json_object_put(copy);
        return GQ_ENOMEM;
    }
    bool diff = !json_object_equal(n->labels, copy);
    if (n->present)
        n->refs--; /* the object already held its reference */
    n->present = true;
    json_object_put(n->labels);
    n->labels = copy;
    pthread_rwlock_unlock(&s->lock);
    if (changed)
        *changed = diff;
    return GQ_OK;
}

void ctl_podstore_delete_namespace(ctl_podstore *s, const char *ns)
{
    pthread_rwlock_wrlock(&s->lock);
    ctl_ns *n = ns_find(s, ns);
    if (n && n->present) {
        n->present = false;
        json_object_put(n->labels);
        n->labels = NULL;
        ns_unref(s, n);
    }
    pthread_rwlock_unlock(&s->lock);
}

size_t ctl_podstore_pod_count(ctl_podstore *s)
{
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->n_pods;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

size_t ctl_podstore_ns_pod_count(ctl_podstore *s, const char *ns)
{
    pthread_rwlock_rdlock(&s->lock);
    ctl_ns *n = ns_find(s, ns);
    size_t c = n ? n->n_pods : 0;
    pthread_rwlock_unlock(&s->lock);
    return c;
}

size_t ctl_podstore_bytes(ctl_podstore *s)
{
    pthread_rwlock_rdlock(&s->lock);
    size_t b = s->bytes + gq_htab_bytes(&s->nss) + gq_htab_bytes(&s->uids);
    pthread_rwlock_unlock(&s->lock);
    return b;
}

void ctl_podstore_foreach_namespace(ctl_podstore *s,
                                    int (*fn)(void *ud, const char *ns, json_object *labels),
                                    void *ud)
{
    gq_htab_iter it;
    pthread_rwlock_rdlock(&s->lock);
    for (gq_hnode *x = gq_htab_iter_first(&it, &s->nss); x; x = gq_htab_iter_next(&it)) {
        ctl_ns *n = GQ_HTAB_ENTRY(x, ctl_ns, node);
        if (fn(ud, n->name, n->labels))
            break;
    }
    pthread_rwlock_unlock(&s->lock);
}

bool ctl_podstore_covers(ctl_podstore *s, const gq_quota *q, const char *ns)
{
    pthread_rwlock_rdlock(&s->lock);
    ctl_ns *n = ns_find(s, ns);
    bool r = gq_quota_covers_namespace(q, ns, n ? n->labels : NULL);
    pthread_rwlock_unlock(&s->lock);
    return r;
}

bool ctl_podstore_has_uid(ctl_podstore *s, const char *ns, const char *uid)
{
    pthread_rwlock_rdlock(&s->lock);
    bool r = find_uid_locked(s, ns, uid) != NULL;
    pthread_rwlock_unlock(&s->lock);
    return r;
}

/* Read lock held. Whether the pod with uid is recorded and no longer queued
 * behind our gate: only then does usage count it. */
static bool counted_uid_locked(ctl_podstore *s, const char *ns, const char *uid)
{
    const ctl_pod *p = find_uid_locked(s, ns, uid);
    return p && !p->gated;
}

static bool counted_locked(void *ud, const char *ns, const char *uid)
{
    return counted_uid_locked(ud, ns, uid);
}

typedef struct gather {
    gq_usage_pod *v;
    size_t n, cap;
    int64_t next_deadline; /* earliest deletion deadline at or after now; 0: none */
} gather;

static gq_code gather_ns(gather *g, const ctl_ns *n, int64_t now)
{
    size_t need = n->inexact ? n->n_pods : n->n_groups + n->n_deleting + n->n_gated;
    if (need > SIZE_MAX / sizeof(*g->v) - g->n)
        return GQ_ENOMEM;
    if (g->n + need > g->cap) {
        size_t nc = g->cap ? g->cap : 64;
        while (nc < g->n + need)
            nc *= 2;
        gq_usage_pod *nv = realloc(g->v, nc * sizeof(*nv));
        if (!nv)
            return GQ_ENOMEM;
        g->v = nv;
        g->cap = nc;
    }
    if (!n->inexact) {
        for (size_t i = 0; i < n->n_groups; i++) {
            gq_usage_pod *u = &g->v[g->n++];
            memset(u, 0, sizeof(*u));
            u->facts.namespace_ = n->name;
            u->facts.priority_class = n->groups[i].pc;
            u->facts.terminating = n->groups[i].terminating;
            u->facts.model = n->groups[i].model;
            u->ns_labels = n->labels;
            u->charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
            for (int k = 0; k < GQ_KEY_COUNT; k++) {
                u->charge.v[k] = n->groups[i].sum[k];
                u->charge.set[k] = true;
            }
        }
    }
    if (!n->inexact && !n->n_deleting && !n->n_gated)
        return GQ_OK;
    for (const ctl_pod *p = n->head; p; p = p->next) {
        if (!n->inexact && (p->terminal || (!p->delete_at && !p->gated && !p->n_claims)))
            continue; /* summed in a group, or counts nothing */
        /* It counts until now passes delete_at (gq_pod_counts): at
         * delete_at itself it still does, and asks for a look after. */
        if (p->delete_at >= now && !p->terminal &&
            (!g->next_deadline || p->delete_at < g->next_deadline))
            g->next_deadline = p->delete_at;
        gq_usage_pod *u = &g->v[g->n++];
        memset(u, 0, sizeof(*u));
        u->facts.namespace_ = n->name;
        u->facts.priority_class = p->priority_class;
        u->facts.terminating = p->terminating;
        u->facts.model = p->model;
        u->queued = p->gated;
        u->facts.terminal = !gq_pod_counts(p->terminal, p->delete_at, now);
        u->ns_labels = n->labels;
        u->claims = p->claims;
        u->n_claims = p->n_claims;
        u->charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
        for (int k = 0; k < GQ_KEY_COUNT; k++) {
            u->charge.v[k] = p->charge[k];
            u->charge.set[k] = true;
        }
    }
    return GQ_OK;
}

static int ns_name_cmp(const void *a, const void *b)
{
    return strcmp((*(ctl_ns *const *)a)->name, (*(ctl_ns *const *)b)->name);
}

gq_code ctl_podstore_with_quota_pods(ctl_podstore *s, const gq_quota *q, int64_t now,
                                     ctl_podstore_pods_fn fn, void *ud, gq_err *err)
{
    gq_code rc = GQ_OK;
    gather g = {0};
    /* Everything below runs under the read lock: the pod views borrow the
     * store's strings and labels, and fn's work is pure CPU work. */
    pthread_rwlock_rdlock(&s->lock);
    if (q->kind == GQ_QUOTA_NAMESPACED) {
        ctl_ns *n = ns_find(s, q->namespace_);
        if (n)
            rc = gather_ns(&g, n, now);
    } else {
        /* Member namespaces in name order, so the recount needs no sort. */
        ctl_ns **mem = NULL;
        size_t nmem = 0;
        gq_htab_iter it;
        if (s->nss.count && !(mem = malloc(s->nss.count * sizeof(*mem))))
            rc = GQ_ENOMEM;
        for (gq_hnode *x = rc ? NULL : gq_htab_iter_first(&it, &s->nss); x;
             x = gq_htab_iter_next(&it)) {
            ctl_ns *n = GQ_HTAB_ENTRY(x, ctl_ns, node);
            if (n->n_pods && gq_quota_covers_namespace(q, n->name, n->labels))
                mem[nmem++] = n;
        }
        if (nmem)
            qsort(mem, nmem, sizeof(*mem), ns_name_cmp);
        for (size_t i = 0; i < nmem && !rc; i++)
            rc = gather_ns(&g, mem[i], now);
        free(mem);
    }
    if (rc) {
        gq_err_set(err, rc, "out of memory");
    } else {
        ctl_podstore_pods v = {g.v, g.n, counted_locked, s, g.next_deadline};
        rc = fn(ud, &v, err);
    }
    pthread_rwlock_unlock(&s->lock);
    free(g.v);
    return rc;
}

void ctl_queued_dispose(ctl_queued *q)
{
    free(q->ns);
    free(q->name);
    free(q->uid);
    free(q->group);
    free(q->claims);
}

void ctl_queued_free(ctl_queued *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        ctl_queued_dispose(&v[i]);
    free(v);
}

/* {"ns/group": n}: one more member of a group that runs. */
static gq_code count_running(json_object *running, const ctl_pod *p)
{
    char key[600];
    json_object *v = NULL;
    snprintf(key, sizeof key, "%s/%s", p->ns->name, ctl_pod_group(p));
    int64_t n = json_object_object_get_ex(running, key, &v) ? json_object_get_int64(v) : 0;
    return json_object_object_add(running, key, json_object_new_int64(n + 1)) ? GQ_ENOMEM : GQ_OK;
}

/* *q = the queued pod p of namespace ns, copied (strings and claims owned).
 * GQ_ENOMEM leaves what was copied for ctl_queued_dispose. */
static gq_code queued_copy(ctl_queued *q, const ctl_ns *ns, const ctl_pod *p)
{
    gq_code rc = GQ_OK;
    memset(q, 0, sizeof(*q));
    q->ns = strdup(ns->name);
    q->name = strdup(ctl_pod_name(p));
    q->uid = strdup(ctl_pod_uid(p));
    q->group = ctl_pod_group(p)[0] ? strdup(ctl_pod_group(p)) : NULL;
    if (!q->ns || !q->name || !q->uid || (ctl_pod_group(p)[0] && !q->group))
        rc = GQ_ENOMEM;
    q->priority_class = p->priority_class;
    q->model = p->model;
    q->terminating = p->terminating;
    q->priority = p->priority;
    q->group_size = p->group_size;
    q->created_us = p->created_us;
    q->gate_idx = p->gate_idx;
    if (p->n_claims && (q->claims = malloc(p->n_claims * sizeof(*q->claims)))) {
        memcpy(q->claims, p->claims, p->n_claims * sizeof(*q->claims));
        q->n_claims = p->n_claims;
    } else if (p->n_claims) {
        rc = GQ_ENOMEM;
    }
    q->charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        q->charge.v[k] = p->charge[k];
        q->charge.set[k] = true;
    }
    for (size_t c = 0; p->choices && c < p->choices->n; c++) {
        q->model_of[c] = p->choices->model[c];
        q->opts[c].model = p->choices->model[c]->name;
        q->opts[c].charge = q->charge;
        for (int k = 0; k < GQ_KEY_COUNT; k++)
            q->opts[c].charge.v[k] = p->choices->charge[c][k];
        q->n_opts = c + 1;
    }
    return rc;
}

gq_code ctl_podstore_queued(ctl_podstore *s, int64_t now, ctl_queued **out, size_t *n_out,
                            json_object **running_out)
{
    gq_code rc = GQ_OK;
    ctl_queued *v = NULL;
    size_t n = 0, cap = 0;
    json_object *running = json_object_new_object();
    if (!running)
        return GQ_ENOMEM;
    gq_htab_iter it;
    pthread_rwlock_rdlock(&s->lock);
    for (gq_hnode *x = gq_htab_iter_first(&it, &s->nss); x && !rc; x = gq_htab_iter_next(&it)) {
        ctl_ns *ns = GQ_HTAB_ENTRY(x, ctl_ns, node);
        if (!ns->n_gated && !ns->inexact)
            continue;
        for (const ctl_pod *p = ns->head; p && !rc; p = p->next) {
            if (!gq_pod_counts(p->terminal, p->delete_at, now))
                continue;
            if (!p->gated) {
                if (ctl_pod_group(p)[0])
                    rc = count_running(running, p);
                continue;
            }
            if (p->delete_at)
                continue; /* being deleted: leaves the queue */
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                ctl_queued *nv = realloc(v, nc * sizeof(*nv));
                if (!nv) {
                    rc = GQ_ENOMEM;
                    break;
                }
                v = nv;
                cap = nc;
            }
            rc = queued_copy(&v[n++], ns, p);
        }
    }
    pthread_rwlock_unlock(&s->lock);
    if (rc) {
        ctl_queued_free(v, n);
        json_object_put(running);
        return rc;
    }
    *out = v;
    *n_out = n;
    *running_out = running;
    return GQ_OK;
}

bool ctl_podstore_matches(ctl_podstore *s, const gq_quota *q, const gq_pod_facts *f)
{
    pthread_rwlock_rdlock(&s->lock);
    ctl_ns *n = ns_find(s, f->namespace_);
    bool r = gq_quota_matches(q, f, n ? n->labels : NULL);
    pthread_rwlock_unlock(&s->lock);
    return r;
}

void ctl_running_free(ctl_running *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].ns);
        free(v[i].name);
        free(v[i].uid);
        free(v[i].group);
        free(v[i].quotas);
        free(v[i].claims);
    }
    free(v);
}

/* Into r, pod p of namespace ns when it counts in some of qs (r->n_quotas
 * 0 when in none). GQ_ENOMEM leaves what was copied for ctl_running_free. */
static gq_code running_copy(ctl_running *r, const ctl_ns *ns, const ctl_pod *p,
                            const gq_quota *const *qs, size_t nq)
{
    gq_pod_facts f = {ns->name, p->priority_class, p->terminating, false, p->model};
    memset(r, 0, sizeof(*r));
    r->charge.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        r->charge.v[k] = p->charge[k];
        r->charge.set[k] = true;
    }
    for (size_t j = 0; j < nq; j++) {
        if (!gq_quota_limits(qs[j], &r->charge) || !gq_quota_matches(qs[j], &f, ns->labels))
            continue;
        if (!r->quotas && !(r->quotas = calloc(nq, sizeof(*r->quotas))))
            return GQ_ENOMEM;
        r->quotas[r->n_quotas++] = j;
    }
    if (!r->n_quotas)
        return GQ_OK;
    char gk[600];
    snprintf(gk, sizeof gk, "%s/%s", ns->name, ctl_pod_group(p));
    r->ns = strdup(ns->name);
    r->name = strdup(ctl_pod_name(p));
    r->uid = strdup(ctl_pod_uid(p));
    r->group = ctl_pod_group(p)[0] ? strdup(gk) : NULL;
    r->priority = p->priority;
    r->created_us = p->created_us;
    r->model = p->model;
    r->leaving = p->delete_at != 0;
    r->borrowing = p->borrowing;
    if (p->n_claims && (r->claims = malloc(p->n_claims * sizeof(*r->claims)))) {
        memcpy(r->claims, p->claims, p->n_claims * sizeof(*r->claims));
        r->n_claims = p->n_claims;
    }
    return r->ns && r->name && r->uid && (!ctl_pod_group(p)[0] || r->group) &&
                   r->n_claims == p->n_claims
               ? GQ_OK
               : GQ_ENOMEM;
}

gq_code ctl_podstore_running(ctl_podstore *s, const gq_quota *const *qs, size_t nq, int64_t now,
                             ctl_running **out, size_t *n_out)
{
    gq_code rc = GQ_OK;
    ctl_running *v = NULL;
    size_t n = 0, cap = 0;
    gq_htab_iter it;
    pthread_rwlock_rdlock(&s->lock);
    for (gq_hnode *x = gq_htab_iter_first(&it, &s->nss); x && !rc; x = gq_htab_iter_next(&it)) {
        ctl_ns *ns = GQ_HTAB_ENTRY(x, ctl_ns, node);
        for (const ctl_pod *p = ns->head; p && !rc; p = p->next) {
            if (p->gated || !gq_pod_counts(p->terminal, p->delete_at, now))
                continue;
            ctl_running *grown = gq_grow(v, &cap, n, sizeof(*v), 64);
            if (!grown) {
                rc = GQ_ENOMEM;
                break;
            }
            v = grown;
            rc = running_copy(&v[n], ns, p, qs, nq);
            if (rc || v[n].n_quotas)
                n++;
            else
                free(v[n].quotas);
        }
    }
    pthread_rwlock_unlock(&s->lock);
    if (rc) {
        ctl_running_free(v, n);
        return rc;
    }
    *out = v;
    *n_out = n;
    return GQ_OK;
}
