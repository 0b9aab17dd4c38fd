/* The CRD parsers (quota/crd.h): GPUQuota, GPUTenantQuota and GPULimitRange
 * objects refused with exact messages, their limits, what a good one holds,
 * and the amounts' names and formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_fixtures.h"

/* ------------------------------------------------------------------------ */
/* Parser errors                                                             */

typedef struct parse_case {
    const char *json;
    gq_code want_rc;
    const char *want_msg; /* exact, or prefix when ending in '*' */
} parse_case;

#define QHEAD                                                                                      \
    "{'apiVersion':'gpuquota.io/"                                                                  \
    "v1alpha1','kind':'GPUQuota','metadata':{'name':'q','namespace':'a'},"
#define THEAD                                                                                      \
    "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{'name':'t'},"

static const parse_case quota_parse_cases[] = {
    {"[]", GQ_EINVAL, "object: must be an object, got array"},
    {"{'apiVersion':'v1','kind':'GPUQuota'}", GQ_EINVAL,
     "apiVersion: must be gpuquota.io/v1alpha1, got \"v1\""},
    {"{'apiVersion':'gpuquota.io/v1alpha1','kind':'ResourceQuota'}", GQ_EINVAL,
     "kind: unexpected kind \"ResourceQuota\""},
    {"{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'q'},'spec':{}}",
     GQ_EINVAL, "metadata.namespace: required for a GPUQuota"},
    {"{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':''}}", GQ_EINVAL,
     "metadata.name: must not be empty"},
    {"{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':7}}", GQ_EINVAL,
     "metadata.name: must be a string, got int"},
    {QHEAD "'spec':[]}", GQ_EINVAL, "spec: must be an object, got array"},
    {QHEAD "'spec':{'hard':[]}}", GQ_EINVAL, "spec.hard: must be an object, got array"},
    {QHEAD "'spec':{'hard':{'gpu-memory':'12Gx'}}}", GQ_EINVAL,
     "spec.hard.gpu-memory: invalid quantity \"12Gx\"*"},
    {QHEAD "'spec':{'hard':{'gpus':'-1'}}}", GQ_EINVAL,
     "spec.hard.gpus: invalid value \"-1\": must be greater than or equal to 0"},
    {QHEAD "'spec':{'hard':{'gpus':'1.5'}}}", GQ_EINVAL,
     "spec.hard.gpus: invalid value \"1.5\": must be a whole number"},
    {QHEAD "'spec':{'hard':{'gpu-pods':-3}}}", GQ_EINVAL,
     "spec.hard.gpu-pods: invalid value \"-3\": must be greater than or equal to 0"},
    {QHEAD "'spec':{'hard':{'gpus':1.5}}}", GQ_EINVAL,
     "spec.hard.gpus: must be a quantity string or an integer, got double"},
    {QHEAD "'spec':{'hard':{'cpu':'1'}}}", GQ_EINVAL,
     "spec.hard.cpu: unsupported key; supported: gpu-memory, gpu-pods, gpus"},
    {QHEAD "'spec':{'scopes':['BestEffort']}}", GQ_EINVAL,
     "spec.scopes[0]: unsupported scope \"BestEffort\"; supported: Terminating, NotTerminating"},
    {QHEAD "'spec':{'scopes':['Terminating','NotTerminating']}}", GQ_EINVAL,
     "spec.scopes: conflicting scopes Terminating and NotTerminating"},
    {QHEAD "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'BestEffort','operator':"
           "'Exists'}]}}}",
     GQ_EINVAL,
     "spec.scopeSelector.matchExpressions[0].scopeName: unsupported scope \"BestEffort\"; "
     "supported: PriorityClass"},
    {QHEAD "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':"
           "'Equals','values':['a']}]}}}",
     GQ_EINVAL,
     "spec.scopeSelector.matchExpressions[0].operator: unsupported operator \"Equals\"; "
     "supported: In, NotIn, Exists, DoesNotExist"},
    {QHEAD "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':"
           "'In'}]}}}",
     GQ_EINVAL,
     "spec.scopeSelector.matchExpressions[0].values: must be specified when `operator` is 'In' or "
     "'NotIn'"},
    {QHEAD "'spec':{'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass','operator':"
           "'Exists','values':['x']}]}}}",
     GQ_EINVAL,
     "spec.scopeSelector.matchExpressions[0].values: may not be specified when `operator` is "
     "'Exists' or 'DoesNotExist'"},
    {QHEAD "'spec':{'namespaces':['a']}}", GQ_EINVAL,
     "spec.namespaces: only valid in a GPUTenantQuota"},
    {THEAD "'spec':{'hard':{}}}", GQ_EINVAL,
     "spec: a GPUTenantQuota needs namespaces or namespaceSelector"},
    {THEAD "'spec':{'namespaces':'a'}}", GQ_EINVAL,
     "spec.namespaces: must be an array, got string"},
    {THEAD "'spec':{'namespaces':['a',3]}}", GQ_EINVAL,
     "spec.namespaces[1]: must be a string, got int"},
    {THEAD "'spec':{'namespaceSelector':{'matchLabels':{'team':1}}}}", GQ_EINVAL,
     "spec.namespaceSelector.matchLabels.team: must be a string, got int"},
    {THEAD "'spec':{'namespaceSelector':{'matchExpressions':[{'key':'','operator':'Exists'}]}}}",
     GQ_EINVAL, "spec.namespaceSelector.matchExpressions[0].key: must not be empty"},
    {QHEAD "'spec':{},'status':{'reservations':[{'key':'k','namespace':'a','pod':'p','gpu-memory':"
           "'1Gi','gpus':'0','gpu-pods':'1','expires':'tomorrow'}]}}",
     GQ_EINVAL, "status.reservations[0].expires: invalid RFC 3339 time \"tomorrow\""},
    {QHEAD "'spec':{},'status':{'reservations':[{'key':'k','namespace':'a','pod':'p','gpu-memory':"
           "'1Gi','gpu-pods':'1','expires':'" LIVE "'}]}}",
     GQ_EINVAL, "status.reservations[0].gpus: required"},
    {QHEAD "'spec':{},'status':{'used':{'gpus':'x'}}}", GQ_EINVAL,
     "status.used.gpus: invalid quantity \"x\"*"},
    /* Cross-tenant cohorts and fair sharing. */
    {QHEAD "'spec':{'cohort':'c'}}", GQ_EINVAL, "spec.cohort: only valid in a GPUTenantQuota"},
    {THEAD "'spec':{'namespaces':['a'],'cohort':'Pool_A'}}", GQ_EINVAL,
     "spec.cohort: \"Pool_A\" is not a DNS-1123 label (lower-case letters, digits and '-', "
     "starting and ending with a letter or digit, at most 63 characters)"},
    {THEAD "'spec':{'namespaces':['a'],'cohort':''}}", GQ_EINVAL,
     "spec.cohort: \"\" is not a DNS-1123 label*"},
    {THEAD "'spec':{'namespaces':['a'],'cohort':'-pool'}}", GQ_EINVAL,
     "spec.cohort: \"-pool\" is not a DNS-1123 label*"},
    {THEAD "'spec':{'namespaces':['a'],'cohort':'"
           "a234567890123456789012345678901234567890123456789012345678901234'}}",
     GQ_EINVAL,
     "spec.cohort: \"a23456789012345678901234567890123456789012345678901234567890123\" "
     "is not a DNS-1123 label*"},
    {THEAD "'spec':{'namespaces':['a'],'cohort':7}}", GQ_EINVAL,
     "spec.cohort: must be a string, got int"},
    {QHEAD "'spec':{'fairSharing':[]}}", GQ_EINVAL,
     "spec.fairSharing: must be an object, got array"},
    {QHEAD "'spec':{'fairSharing':{'weight':'-1'}}}", GQ_EINVAL,
     "spec.fairSharing.weight: must be greater than or equal to 0"},
    {QHEAD "'spec':{'fairSharing':{'weight':-2}}}", GQ_EINVAL,
     "spec.fairSharing.weight: must be greater than or equal to 0"},
    {QHEAD "'spec':{'fairSharing':{'weight':'heavy'}}}", GQ_EINVAL,
     "spec.fairSharing.weight: invalid quantity \"heavy\"*"},
    {QHEAD "'spec':{'fairSharing':{'weight':'2G'}}}", GQ_ERANGE,
     "spec.fairSharing.weight: must be at most 1G"},
    {QHEAD "'spec':{'fairSharing':{'weight':1.5}}}", GQ_EINVAL,
     "spec.fairSharing.weight: must be a string, got double"},
};

static void check_parse_error(const char *what, gq_code rc, const gq_err *err, gq_code want_rc,
                              const char *want)
{
    if (rc != want_rc)
        fail_msg("%s: rc %d, want %d (%s)", what, rc, want_rc, err->msg);
    size_t wl = strlen(want);
    bool ok =
        want[wl - 1] == '*' ? strncmp(err->msg, want, wl - 1) == 0 : strcmp(err->msg, want) == 0;
    if (!ok)
        fail_msg("%s:\n got  %s\n want %s", what, err->msg, want);
}

static void test_quota_parse_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(quota_parse_cases) / sizeof(quota_parse_cases[0]); i++) {
        json_object *o = J(quota_parse_cases[i].json);
        gq_quota *q = (gq_quota *)0x1;
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = gq_quota_parse(o, &q, &err);
        check_parse_error(quota_parse_cases[i].json, rc, &err, quota_parse_cases[i].want_rc,
                          quota_parse_cases[i].want_msg);
        assert_ptr_equal(q, (gq_quota *)0x1); /* untouched on error */
        json_object_put(o);
    }
}

static void test_quota_parse_limits(void **state)
{
    (void)state;
    /* 65 match expressions: one over the cap. */
    char buf[8192] = THEAD "'spec':{'namespaceSelector':{'matchExpressions':[";
    for (int i = 0; i <= GQ_CRD_MAX_EXPRESSIONS; i++)
        strcat(buf, i ? ",{'key':'k','operator':'Exists'}" : "{'key':'k','operator':'Exists'}");
    strcat(buf, "]}}}");
    json_object *o = J(buf);
    gq_quota *q = NULL;
    gq_err err;
    assert_int_equal(gq_quota_parse(o, &q, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "spec.namespaceSelector.matchExpressions: more than 64 items");
    json_object_put(o);

    /* A string over the cap. */
    char *big = malloc(GQ_CRD_MAX_STRING + 200);
    assert_non_null(big);
    int n = snprintf(big, GQ_CRD_MAX_STRING + 200, THEAD "'spec':{'namespaces':['");
    memset(big + n, 'a', GQ_CRD_MAX_STRING + 1);
    strcpy(big + n + GQ_CRD_MAX_STRING + 1, "']}}");
    o = J(big);
    assert_int_equal(gq_quota_parse(o, &q, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "spec.namespaces[0]: longer than 1024 bytes");
    json_object_put(o);
    free(big);
}

static void test_quota_parse_ok(void **state)
{
    (void)state;
    gq_quota *q = Q(GQ("team-a", "a",
                       "'hard':{'gpu-memory':'64Gi','gpus':4,'gpu-pods':'10'},'scopes':["
                       "'NotTerminating'],'scopeSelector':{'matchExpressions':[{'scopeName':"
                       "'PriorityClass','operator':'In','values':['high']}]}",
                       "'used':{'gpu-memory':'8Gi'},'reservations':[" RES("r", "1Gi", LIVE) "]"));
    assert_int_equal(q->kind, GQ_QUOTA_NAMESPACED);
    assert_string_equal(q->name, "team-a");
    assert_string_equal(q->namespace_, "a");
    assert_int_equal(q->hard.v[GQ_KEY_GPU_MEMORY], 64 * GI);
    assert_int_equal(q->hard.v[GQ_KEY_GPUS], 4);
    assert_int_equal(q->hard.v[GQ_KEY_GPU_PODS], 10);
    assert_int_equal(q->scopes, GQ_SCOPE_NOT_TERMINATING);
    assert_int_equal(q->n_scope_exprs, 1);
    assert_int_equal(q->scope_exprs[0].op, GQ_OP_IN);
    assert_string_equal(q->scope_exprs[0].values[0], "high");
    assert_true(q->used.set[GQ_KEY_GPU_MEMORY]);
    assert_false(q->used.set[GQ_KEY_GPUS]);
    assert_int_equal(q->n_reservations, 1);
    assert_int_equal(q->reservations[0].expires, NOW + 60);
    assert_int_equal(q->reservations[0].amounts.v[GQ_KEY_GPU_MEMORY], GI);
    gq_quota_free(q);

    q = Q(GTQ("t", "'namespaces':['a','b'],'namespaceSelector':{'matchLabels':{'x':'y'}}", ""));
    assert_int_equal(q->kind, GQ_QUOTA_TENANT);
    assert_null(q->namespace_);
    assert_int_equal(q->n_namespaces, 2);
    assert_true(q->ns_selector.present);
    assert_int_equal(q->ns_selector.n_match, 1);
    assert_false(q->hard.set[GQ_KEY_GPU_MEMORY]);
    assert_null(q->cohort);
    assert_int_equal(q->fair_weight_milli, 1000); /* Kueue's default weight, 1 */
    gq_quota_free(q);

    q = Q(GTQ("t",
              "'namespaces':['a'],'cohort':'pool-1','borrowingLimit':{'gpu-memory':'8Gi'},"
              "'lendingLimit':{'gpus':2},'fairSharing':{'weight':'500m'}",
              ""));
    assert_string_equal(q->cohort, "pool-1");
    assert_int_equal(q->borrowing_limit.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_int_equal(q->lending_limit.v[GQ_KEY_GPUS], 2);
    assert_int_equal(q->fair_weight_milli, 500);
    gq_quota_free(q);
    q = Q(GQ("q", "a", "'fairSharing':{'weight':0}", ""));
    assert_int_equal(q->fair_weight_milli, 0);
    gq_quota_free(q);
    q = Q(GQ("q", "a", "'fairSharing':{'weight':'3'}", ""));
    assert_int_equal(q->fair_weight_milli, 3000);
    gq_quota_free(q);
    gq_quota_free(NULL);
}

static const parse_case lr_parse_cases[] = {
    {GLR("l", "{'type':'Node'}"), GQ_EINVAL,
     "spec.limits[0].type: unsupported type \"Node\"; supported: Container, Pod"},
    {GLR("l", "{'max':{'gpu-memory':'1Gi'}}"), GQ_EINVAL,
     "spec.limits[0].type: must be a string, got null"},
    {GLR("l", "{'type':'Container','max':{'gpus':'1'}}"), GQ_EINVAL,
     "spec.limits[0].max.gpus: unsupported key; supported: gpu-memory"},
    {GLR("l", "{'type':'Container','min':{'gpu-memory':'4Gi'},'max':{'gpu-memory':'2Gi'}}"),
     GQ_EINVAL, "spec.limits[0].min.gpu-memory: min value 4Gi is greater than max value 2Gi"},
    {GLR("l", "{'type':'Container','default':{'gpu-memory':'24Gi'},'max':{'gpu-memory':'20Gi'}}"),
     GQ_EINVAL,
     "spec.limits[0].default.gpu-memory: default value 24Gi is greater than max value 20Gi"},
    {GLR("l", "{'type':'Container','default':{'gpu-memory':'1Gi'},'min':{'gpu-memory':'2Gi'}}"),
     GQ_EINVAL, "spec.limits[0].min.gpu-memory: min value 2Gi is greater than default value 1Gi"},
    {GLR("l", "{'type':'Container','default':{'gpu-memory':'0'}}"), GQ_EINVAL,
     "spec.limits[0].default.gpu-memory: must be greater than 0"},
    {GLR("l", "{'type':'Pod','default':{'gpu-memory':'1Gi'}}"), GQ_EINVAL,
     "spec.limits[0].default: may only be set for type Container"},
    {GLR("l", "{'type':'Pod','maxGPUs':-1}"), GQ_EINVAL,
     "spec.limits[0].maxGPUs: must be greater than or equal to 0"},
    {GLR("l", "{'type':'Pod','maxGPUs':'2'}"), GQ_EINVAL,
     "spec.limits[0].maxGPUs: must be an integer, got string"},
    {GLR("l", "{'type':'Pod'},{'type':'Pod','allowedModels':'t4'}"), GQ_EINVAL,
     "spec.limits[1].allowedModels: must be an array, got string"},
    {"{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPULimitRange','metadata':{'name':'l'},'spec':"
     "{}}",
     GQ_EINVAL, "spec.limits: must be an array, got null"},
    {"{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':'l'},'spec':{}}",
     GQ_EINVAL, "kind: unexpected kind \"GPUQuota\""},
};

static void test_lr_parse_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(lr_parse_cases) / sizeof(lr_parse_cases[0]); i++) {
        json_object *o = J(lr_parse_cases[i].json);
        gq_limit_range *lr = NULL;
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = gq_limit_range_parse(o, &lr, &err);
        check_parse_error(lr_parse_cases[i].json, rc, &err, lr_parse_cases[i].want_rc,
                          lr_parse_cases[i].want_msg);
        assert_null(lr);
        json_object_put(o);
    }
}

static void test_amount_names(void **state)
{
    (void)state;
    assert_string_equal(gq_qkey_name(GQ_KEY_GPU_MEMORY), "gpu-memory");
    assert_string_equal(gq_qkey_name(GQ_KEY_GPU_PODS), "gpu-pods");
    assert_string_equal(gq_qkey_name(GQ_KEY_GPUS), "gpus");
    assert_null(gq_qkey_name(GQ_KEY_COUNT));
    gq_amounts a;
    gq_err err;
    json_object *o = J("{'gpu-memory':'1.5Gi','gpus':3,'gpu-pods':'1k'}");
    assert_int_equal(gq_amounts_parse(o, "x", &a, &err), GQ_OK);
    char buf[GQ_QUANTITY_STR_MAX];
    gq_amount_format(&a, GQ_KEY_GPU_MEMORY, buf);
    assert_string_equal(buf, "1536Mi");
    gq_amount_format(&a, GQ_KEY_GPU_PODS, buf);
    assert_string_equal(buf, "1k");
    gq_amount_format(&a, GQ_KEY_GPUS, buf);
    assert_string_equal(buf, "3");
    json_object_put(o);
}

/* A member's name for a message, "BASE.NAME", cut to the buffer. */
static void test_field_join(void **state)
{
    (void)state;
    char f[12];
    assert_string_equal(gq_field_join(f, sizeof f, "status", "used"), "status.used");
    assert_string_equal(gq_field_join(f, sizeof f, "status", "usedByModel"), "status.used");
    assert_string_equal(gq_field_join(f, sizeof f, "reservations", "key"), "reservation");
    assert_string_equal(gq_field_join(f, sizeof f, "", "key"), ".key");
    assert_string_equal(gq_field_join(f, 2, "ab", "c"), "a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_parse_errors), cmocka_unit_test(test_quota_parse_limits),
        cmocka_unit_test(test_quota_parse_ok),     cmocka_unit_test(test_lr_parse_errors),
        cmocka_unit_test(test_amount_names),       cmocka_unit_test(test_field_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
