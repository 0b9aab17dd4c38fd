/* What the policy core's tests share: quotas and limit ranges parsed from
 * JSON written with ' for ", the CRD objects they are written as, reservation
 * records relative to NOW. Include after <cmocka.h>. */
#ifndef GQ_TEST_POLICY_FIXTURES_H
#define GQ_TEST_POLICY_FIXTURES_H

#include "support/testjson.h"

#include "quota/crd.h"
#include "quota/policy.h"

#define GI (1024LL * 1024 * 1024)
#define NOW 1795273565LL /* 2026-11-21T15:06:05Z */

static inline gq_quota *Q(const char *s)
{
    json_object *o = J(s);
    gq_quota *q = NULL;
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = gq_quota_parse(o, &q, &err);
    if (rc)
        fail_msg("quota parse failed: %s (%s)", err.msg, s);
    json_object_put(o);
    return q;
}

static inline gq_limit_range *LR(const char *s)
{
    json_object *o = J(s);
    gq_limit_range *lr = NULL;
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = gq_limit_range_parse(o, &lr, &err);
    if (rc)
        fail_msg("limit range parse failed: %s (%s)", err.msg, s);
    json_object_put(o);
    return lr;
}

/* Member `member` of the status gq_usage_to_status writes for recount u of
 * q, as the encoder writes it (caller puts it). */
static inline json_object *usage_member(const gq_quota *q, const gq_usage *u, const char *member)
{
    gq_quota_status st;
    gq_err err;
    gq_quota_status_init(&st);
    assert_int_equal(gq_usage_to_status(q, u, &st, &err), GQ_OK);
    json_object *o = gq_quota_status_encode(&st), *m = NULL;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, member, &m));
    json_object_get(m);
    json_object_put(o);
    gq_quota_status_dispose(&st);
    return m;
}

#define GQ(name, ns, spec, status)                                                                 \
    "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'" name             \
    "','namespace':'" ns "'},'spec':{" spec "},'status':{" status "}}"
#define GTQ(name, spec, status)                                                                    \
    "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{'name':'" name       \
    "'},'spec':{" spec "},'status':{" status "}}"
#define GLR(name, limits)                                                                          \
    "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPULimitRange','metadata':{'name':'" name        \
    "','namespace':'x'},'spec':{'limits':[" limits "]}}"

/* Reservation records relative to NOW. */
#define RES(key, mem, exp)                                                                         \
    "{'key':'" key "','namespace':'a','pod':'p-','gpu-memory':'" mem                               \
    "','gpus':'0','gpu-pods':'1','expires':'" exp "'}"
#define LIVE "2026-11-21T15:07:05Z"    /* NOW + 60 */
#define EXPIRED "2026-11-21T15:06:05Z" /* == NOW: expired */

#define HARD64 "'hard':{'gpu-memory':'64Gi'}"

#endif
