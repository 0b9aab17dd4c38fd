#include "quota/podqueue.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"

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

int gq_pod_gate_index(json_object *pod)
{
    json_object *g = gates_of(pod);
    size_t n = g ? json_object_array_length(g) : 0;
    if (n > GQ_QUEUE_MAX_GATES)
        n = GQ_QUEUE_MAX_GATES;
    for (size_t i = 0; i < n; i++) {
        json_object *name = member(json_object_array_get_idx(g, i), "name");
        if (name && json_object_is_type(name, json_type_string) &&
            !strcmp(json_object_get_string(name), GQ_QUEUE_GATE))
            return (int)i;
    }
    return -1;
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

gq_code gq_quota_parse_list(json_object *arr, gq_quota ***qs, size_t *n, size_t *skipped)
{
    size_t len =
        arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    if (!len)
        return GQ_OK;
    if (*n > SIZE_MAX / sizeof(**qs) - len)
        return GQ_ENOMEM;
    gq_quota **nv = realloc(*qs, (*n + len) * sizeof(*nv));
    if (!nv)
        return GQ_ENOMEM;
    *qs = nv;
    for (size_t i = 0; i < len; i++) {
        gq_quota *q = NULL;
        gq_code rc = gq_quota_parse(json_object_array_get_idx(arr, i), &q, NULL);
        if (rc == GQ_ENOMEM)
            return rc;
        if (rc) {
            if (skipped)
                (*skipped)++;
            continue;
        }
        nv[(*n)++] = q;
    }
    return GQ_OK;
}

bool gq_quota_limits(const gq_quota *q, const gq_amounts *charge)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (q->hard.set[k] && charge->v[k] > 0)
            return true;
    return false;
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

gq_code gq_queue_check_ever_fits(const gq_quota *q, const gq_amounts *charge, int64_t members,
                                 const char *group, gq_err *err)
{
    if (members < 1)
        members = 1;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!q->hard.set[k] || charge->v[k] <= 0)
            continue;
        int64_t need;
        if (__builtin_mul_overflow(charge->v[k], members, &need) || need > q->hard.v[k]) {
            gq_amounts a = *charge, h = q->hard;
            char asked[GQ_QUANTITY_STR_MAX], lim[GQ_QUANTITY_STR_MAX];
            a.v[k] = need < 0 ? INT64_MAX : need;
            if (__builtin_mul_overflow(charge->v[k], members, &a.v[k]))
                a.v[k] = INT64_MAX;
            gq_amount_format(&a, (gq_qkey)k, asked);
            gq_amount_format(&h, (gq_qkey)k, lim);
            const char *qk = q->kind == GQ_QUOTA_TENANT ? "tenant quota" : "quota";
            if (group)
                return gq_err_set(err, GQ_EDENIED,
                                  "pod group %s of %lld pods asks for %s=%s, more than %s %s "
                                  "allows at all (%s=%s): it would wait forever",
                                  group, (long long)members, gq_qkey_name((gq_qkey)k), asked, qk,
                                  q->name, gq_qkey_name((gq_qkey)k), lim);
            return gq_err_set(err, GQ_EDENIED,
                              "pod asks for %s=%s, more than %s %s allows at all (%s=%s): it "
                              "would wait forever",
                              gq_qkey_name((gq_qkey)k), asked, qk, q->name,
                              gq_qkey_name((gq_qkey)k), lim);
        }
    }
    return GQ_OK;
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
    int c = gq_queue_entry_cmp(x->e, y->e);
    return c ? c : (x->i < y->i ? -1 : x->i > y->i);
}

static int ref_group_cmp(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    int c = strcmp(x->e->group, y->e->group);
    return c ? c : (x->rank < y->rank ? -1 : x->rank > y->rank);
}

/* in_use + need <= hard for every key of hard. */
static bool fits(const gq_quota *q, const gq_amounts *in_use, const gq_amounts *need)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        int64_t sum;
        if (!q->hard.set[k] || need->v[k] <= 0)
            continue;
        if (__builtin_add_overflow(in_use->v[k], need->v[k], &sum) || sum > q->hard.v[k])
            return false;
    }
    return true;
}

static void amounts_zero(gq_amounts *a)
{
    memset(a, 0, sizeof(*a));
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        a->set[k] = true;
    a->fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
}

gq_code gq_queue_plan(const gq_queue_entry *entries, size_t n, gq_queue_quota *quotas, size_t nq,
                      gq_queue_decision *out, gq_err *err)
{
    gq_code rc = GQ_OK;
    ref *order = NULL, *byg = NULL;
    size_t *unit_start = NULL, *unit_len = NULL, *leader_of = NULL, *touched = NULL;
    gq_amounts *need = NULL;
    bool *blocked = NULL, *is_touched = NULL;
    int64_t *waiting = NULL;
    if (!n)
        return GQ_OK;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < entries[i].n_quotas; j++)
            if (entries[i].quotas[j] >= nq)
                return gq_err_set(err, GQ_EINVAL, "queued pod %s: quota index out of range",
                                  entries[i].uid ? entries[i].uid : "");
    order = calloc(n, sizeof(*order));
    byg = calloc(n, sizeof(*byg));
    unit_start = calloc(n, sizeof(*unit_start));
    unit_len = calloc(n, sizeof(*unit_len));
    leader_of = calloc(n, sizeof(*leader_of));
    need = calloc(nq ? nq : 1, sizeof(*need));
    touched = calloc(nq ? nq : 1, sizeof(*touched));
    blocked = calloc(nq ? nq : 1, sizeof(*blocked));
    is_touched = calloc(nq ? nq : 1, sizeof(*is_touched));
    waiting = calloc(nq ? nq : 1, sizeof(*waiting));
    if (!order || !byg || !unit_start || !unit_len || !leader_of || !need || !touched || !blocked ||
        !is_touched || !waiting) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (ref){&entries[i], i, 0};
    qsort(order, n, sizeof(*order), ref_order_cmp);
    for (size_t r = 0; r < n; r++) {
        order[r].rank = r;
        memset(&out[order[r].i], 0, sizeof(out[0]));
        out[order[r].i].position = r + 1;
        leader_of[order[r].i] = order[r].i; /* alone: a unit of itself */
        unit_len[order[r].i] = 1;
    }
    /* Groups: members sorted by group then rank; the first is the leader,
     * byg[unit_start..+unit_len) lists the members. */
    size_t ng = 0;
    for (size_t r = 0; r < n; r++)
        if (order[r].e->group)
            byg[ng++] = order[r];
    qsort(byg, ng, sizeof(*byg), ref_group_cmp);
    for (size_t a = 0; a < ng;) {
        size_t b = a + 1;
        while (b < ng && !strcmp(byg[a].e->group, byg[b].e->group))
            b++;
        size_t leader = byg[a].i;
        bool mismatch = false;
        for (size_t m = a; m < b; m++) {
            if (byg[m].e->group_size != byg[a].e->group_size)
                mismatch = true;
            leader_of[byg[m].i] = leader;
            out[byg[m].i].members = (int64_t)(b - a);
        }
        unit_start[leader] = a; /* offset of the members in byg */
        unit_len[leader] = b - a;
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

    for (size_t r = 0; r < n; r++) {
        size_t i = order[r].i;
        const gq_queue_entry *e = &entries[i];
        bool grouped = e->group != NULL;
        if (grouped && leader_of[i] != i)
            continue; /* decided with its leader */
        if (out[i].state != GQ_QSTATE_ADMIT)
            continue; /* incomplete or mismatched group: waits, blocks nobody */
        size_t first = grouped ? unit_start[i] : 0, len = unit_len[i];
        size_t nt = 0;
        bool unpaid = false, behind = false;
        size_t behind_q = 0;
        for (size_t m = 0; m < len; m++) {
            const gq_queue_entry *me = grouped ? byg[first + m].e : e;
            for (size_t j = 0; j < me->n_quotas; j++) {
                size_t qi = me->quotas[j];
                if (!is_touched[qi]) {
                    is_touched[qi] = true;
                    touched[nt++] = qi;
                    amounts_zero(&need[qi]);
                }
                if (blocked[qi] && !behind) {
                    behind = true;
                    behind_q = qi;
                }
                if (me->paid && me->paid[j])
                    continue;
                unpaid = true;
                for (int k = 0; k < GQ_KEY_COUNT; k++)
                    if (__builtin_add_overflow(need[qi].v[k], me->charge.v[k], &need[qi].v[k]))
                        need[qi].v[k] = INT64_MAX;
            }
        }
        gq_queue_state st = GQ_QSTATE_ADMIT;
        size_t which = 0;
        if (unpaid && behind) {
            st = GQ_QSTATE_BEHIND_HEAD;
            which = behind_q;
        } else if (unpaid) {
            for (size_t t = 0; t < nt; t++)
                if (!fits(quotas[touched[t]].q, &quotas[touched[t]].in_use, &need[touched[t]])) {
                    st = GQ_QSTATE_NO_ROOM;
                    which = touched[t];
                    break;
                }
        }
        if (st == GQ_QSTATE_ADMIT) {
            for (size_t t = 0; t < nt; t++)
                for (int k = 0; k < GQ_KEY_COUNT; k++) {
                    gq_amounts *u = &quotas[touched[t]].in_use;
                    if (__builtin_add_overflow(u->v[k], need[touched[t]].v[k], &u->v[k]))
                        u->v[k] = INT64_MAX;
                }
        } else {
            for (size_t t = 0; t < nt; t++) {
                if (quotas[touched[t]].q->strategy == GQ_QUEUE_STRICT)
                    blocked[touched[t]] = true;
                waiting[touched[t]] += (int64_t)len;
            }
        }
        int64_t ahead = st == GQ_QSTATE_BEHIND_HEAD ? waiting[which] - (int64_t)len : 0;
        for (size_t m = 0; m < len; m++) {
            size_t mi = grouped ? byg[first + m].i : i;
            out[mi].state = st;
            out[mi].quota = which;
            out[mi].ahead = ahead;
            if (st == GQ_QSTATE_NO_ROOM)
                out[mi].need = need[which];
        }
        for (size_t t = 0; t < nt; t++)
            is_touched[touched[t]] = false;
    }
out:
    free(order);
    free(byg);
    free(unit_start);
    free(unit_len);
    free(leader_of);
    free(need);
    free(touched);
    free(blocked);
    free(is_touched);
    free(waiting);
    return rc;
}

json_object *gq_queue_ungate_patch(const char *uid, int gate_index)
{
    char path[64];
    json_object *arr = json_object_new_array();
    json_object *t1 = json_object_new_object(), *t2 = json_object_new_object(),
                *rm = json_object_new_object();
    if (!arr || !t1 || !t2 || !rm)
        goto fail;
    snprintf(path, sizeof path, "/spec/schedulingGates/%d", gate_index);
    json_object_object_add(t1, "op", json_object_new_string("test"));
    json_object_object_add(t1, "path", json_object_new_string("/metadata/uid"));
    json_object_object_add(t1, "value", json_object_new_string(uid));
    json_object_array_add(arr, t1);
    t1 = NULL;
    char npath[80];
    snprintf(npath, sizeof npath, "%s/name", path);
    json_object_object_add(t2, "op", json_object_new_string("test"));
    json_object_object_add(t2, "path", json_object_new_string(npath));
    json_object_object_add(t2, "value", json_object_new_string(GQ_QUEUE_GATE));
    json_object_array_add(arr, t2);
    t2 = NULL;
    json_object_object_add(rm, "op", json_object_new_string("remove"));
    json_object_object_add(rm, "path", json_object_new_string(path));
    json_object_array_add(arr, rm);
    return arr;
fail:
    json_object_put(arr);
    json_object_put(t1);
    json_object_put(t2);
    json_object_put(rm);
    return NULL;
}
