/* Test helpers for the queue planner's tests: a quota parsed from JSON
 * written with ' for " (or the test fails), and amounts of whole GiB of
 * gpu-memory in one pod, and a queued pod. Include after <cmocka.h>. */
#ifndef GQ_QUEUE_FIXTURES_H
#define GQ_QUEUE_FIXTURES_H

#include <stdint.h>
#include <string.h>

#include "quota/crd.h"
#include "quota/podqueue.h"
#include "support/testjson.h"

#define GI (1024LL * 1024 * 1024)

static inline gq_quota *queue_quota_parse(const char *s)
{
    json_object *o = J(s);
    gq_quota *q = NULL;
    gq_err err;
    gq_err_clear(&err);
    if (gq_quota_parse(o, &q, &err))
        fail_msg("quota parse failed: %s (%s)", err.msg, s);
    json_object_put(o);
    return q;
}

static inline gq_amounts queue_mem(int64_t gi)
{
    gq_amounts a;
    memset(&a, 0, sizeof(a));
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        a.set[k] = true;
    a.v[GQ_KEY_GPU_MEMORY] = gi * GI;
    a.v[GQ_KEY_GPU_PODS] = gi ? 1 : 0;
    a.fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
    return a;
}

/* A quota named name with only gpu-memory hard (hard_gi GiB) and
 * preemption.withinQuota policy; its strings are borrowed. */
static inline gq_quota queue_quota_mem(const char *name, int64_t hard_gi, gq_preempt_policy policy)
{
    gq_quota q;
    memset(&q, 0, sizeof(q));
    q.name = (char *)name;
    q.hard.set[GQ_KEY_GPU_MEMORY] = true;
    q.hard.v[GQ_KEY_GPU_MEMORY] = hard_gi * GI;
    q.within_quota = policy;
    return q;
}

/* A queued pod of gi GiB charging quotas qs[0..nq), created at created. */
static inline gq_queue_entry queue_entry(const char *uid, int64_t created, int64_t gi,
                                         const size_t *qs, size_t nq)
{
    gq_queue_entry e;
    memset(&e, 0, sizeof(e));
    e.uid = uid;
    e.created_us = created;
    e.charge = queue_mem(gi);
    e.quotas = qs;
    e.n_quotas = nq;
    return e;
}

#endif
