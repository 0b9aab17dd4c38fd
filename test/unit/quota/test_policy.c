/* Policy core: CRD parsers, reservations, quota matching and evaluation,
 * GPULimitRange defaults and validation. Table-driven; JSON in the tables is
 * written with single quotes for readability and converted before parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "quota/crd.h"
#include "quota/policy.h"

#define GI (1024LL * 1024 * 1024)
#define NOW 1795273565LL /* 2026-11-21T15:06:05Z */

static gq_quota *Q(const char *s)
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

static gq_limit_range *LR(const char *s)
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

/* ------------------------------------------------------------------------ */
/* Quota evaluation table                                                     */

typedef struct eval_case {
    const char *what;
    const char *quotas[3];
    const char *ns;
    const char *priority_class;
    bool terminating;
    const char *ns_labels;
    int64_t mem_gi, gpus, pods;
    bool terminal;
    bool require_quota;
    const char *reservation_key;
    gq_code want_rc;
    const char *want_msg;
    const char *want_charged; /* names joined by ',' */
} eval_case;

#define HARD64 "'hard':{'gpu-memory':'64Gi'}"

static const eval_case eval_cases[] = {
    {"fits under hard",
     {GQ("team-a", "a", HARD64, "'used':{'gpu-memory':'40Gi'}")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     "team-a"},
    {"equality allowed",
     {GQ("team-a", "a", HARD64, "'used':{'gpu-memory':'48Gi'}")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     "team-a"},
    {"exceeded exact message",
     {GQ("team-a", "a", HARD64, "'used':{'gpu-memory':'56Gi'}")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: team-a, requested: gpu-memory=16Gi, used: gpu-memory=56Gi, limited: "
     "gpu-memory=64Gi",
     NULL},
    {"enforced from spec.hard before any status",
     {GQ("q", "a", "'hard':{'gpu-memory':'8Gi'}", "")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpu-memory=16Gi, used: gpu-memory=0, limited: gpu-memory=8Gi",
     NULL},
    {"missing key is unlimited",
     {GQ("q", "a", "'hard':{'gpus':2}", "")},
     "a",
     NULL,
     false,
     NULL,
     100,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"explicit 0 blocks",
     {GQ("q", "a", "'hard':{'gpus':'0'}", "")},
     "a",
     NULL,
     false,
     NULL,
     0,
     1,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpus=1, used: gpus=0, limited: gpus=0",
     NULL},
    {"explicit 0 does not block a pod charging 0 of it",
     {GQ("q", "a", "'hard':{'gpus':'0','gpu-memory':'10Gi'}", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     "q"},
    {"terminal pod is free",
     {GQ("q", "a", "'hard':{'gpus':'0','gpu-memory':'0','gpu-pods':'0'}", "")},
     "a",
     NULL,
     false,
     NULL,
     16,
     1,
     1,
     true,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"live reservation counted",
     {GQ("team-a", "a", HARD64,
         "'used':{'gpu-memory':'40Gi'},'reservations':[" RES("r1", "16Gi", LIVE) "]")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: team-a, requested: gpu-memory=16Gi, used: gpu-memory=56Gi, limited: "
     "gpu-memory=64Gi",
     NULL},
    {"expired reservation not counted",
     {GQ("team-a", "a", HARD64,
         "'used':{'gpu-memory':'40Gi'},'reservations':[" RES("r1", "16Gi", EXPIRED) "]")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     "team-a"},
    {"own reservation not counted twice",
     {GQ("team-a", "a", HARD64,
         "'used':{'gpu-memory':'40Gi'},'reservations':[" RES("uid-1", "16Gi", LIVE) "]")},
     "a",
     NULL,
     false,
     NULL,
     16,
     0,
     1,
     false,
     false,
     "uid-1",
     GQ_OK,
     NULL,
     "team-a"},
    {"several keys exceeded, sorted, only exceeded ones",
     {GQ("q", "a", "'hard':{'gpus':1,'gpu-memory':'64Gi','gpu-pods':10}",
         "'used':{'gpu-memory':'60Gi','gpus':'1','gpu-pods':'2'}")},
     "a",
     NULL,
     false,
     NULL,
     8,
     1,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpu-memory=8Gi,gpus=1, used: gpu-memory=60Gi,gpus=1, "
     "limited: gpu-memory=64Gi,gpus=1",
     NULL},
    {"gpu-pods exceeded",
     {GQ("q", "a", "'hard':{'gpu-pods':2}", "'used':{'gpu-pods':2}")},
     "a",
     NULL,
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpu-pods=1, used: gpu-pods=2, limited: gpu-pods=2",
     NULL},
    {"limited printed as written",
     {GQ("q", "a", "'hard':{'gpu-memory':'64G'}", "")},
     "a",
     NULL,
     false,
     NULL,
     64,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpu-memory=64Gi, used: gpu-memory=0, limited: gpu-memory=64G",
     NULL},
    {"used already over hard, key not charged",
     {GQ("q", "a", "'hard':{'gpus':1,'gpu-memory':'64Gi'}", "'used':{'gpus':3}")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     "q"},
    {"quota of another namespace",
     {GQ("q", "b", "'hard':{'gpu-memory':'0'}", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"Terminating scope matches a pod with a deadline",
     {GQ("q", "a", "'hard':{'gpu-memory':'0'},'scopes':['Terminating']", "")},
     "a",
     NULL,
     true,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpu-memory=8Gi, used: gpu-memory=0, limited: gpu-memory=0",
     NULL},
    {"Terminating scope skips a pod without deadline",
     {GQ("q", "a", "'hard':{'gpu-memory':'0'},'scopes':['Terminating']", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"NotTerminating scope matches a pod without deadline",
     {GQ("q", "a", "'hard':{'gpu-pods':'0'},'scopes':['NotTerminating']", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     "exceeded quota: q, requested: gpu-pods=1, used: gpu-pods=0, limited: gpu-pods=0",
     NULL},
    {"NotTerminating scope skips a pod with a deadline",
     {GQ("q", "a", "'hard':{'gpu-pods':'0'},'scopes':['NotTerminating']", "")},
     "a",
     NULL,
     true,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
#define PCSEL(op, vals)                                                                            \
    "'hard':{'gpu-pods':'0'},'scopeSelector':{'matchExpressions':[{'scopeName':'PriorityClass',"   \
    "'operator':'" op "'" vals "}]}"
#define DENY_PODS "exceeded quota: q, requested: gpu-pods=1, used: gpu-pods=0, limited: gpu-pods=0"
    {"PriorityClass In matches",
     {GQ("q", "a", PCSEL("In", ",'values':['high','mid']"), "")},
     "a",
     "high",
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     DENY_PODS,
     NULL},
    {"PriorityClass In other class",
     {GQ("q", "a", PCSEL("In", ",'values':['high']"), "")},
     "a",
     "low",
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"PriorityClass In without class",
     {GQ("q", "a", PCSEL("In", ",'values':['high']"), "")},
     "a",
     NULL,
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"PriorityClass NotIn without class",
     {GQ("q", "a", PCSEL("NotIn", ",'values':['high']"), "")},
     "a",
     NULL,
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     DENY_PODS,
     NULL},
    {"PriorityClass NotIn listed class",
     {GQ("q", "a", PCSEL("NotIn", ",'values':['high']"), "")},
     "a",
     "high",
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"PriorityClass Exists with class",
     {GQ("q", "a", PCSEL("Exists", ""), "")},
     "a",
     "low",
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     DENY_PODS,
     NULL},
    {"PriorityClass Exists without class",
     {GQ("q", "a", PCSEL("Exists", ""), "")},
     "a",
     "",
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"PriorityClass DoesNotExist without class",
     {GQ("q", "a", PCSEL("DoesNotExist", ""), "")},
     "a",
     NULL,
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     DENY_PODS,
     NULL},
    {"PriorityClass DoesNotExist with class",
     {GQ("q", "a", PCSEL("DoesNotExist", ""), "")},
     "a",
     "low",
     false,
     NULL,
     1,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
#define TDENY                                                                                      \
    "exceeded tenant quota: t, requested: gpu-memory=8Gi, used: gpu-memory=4Gi, limited: "         \
    "gpu-memory=10Gi"
#define THARD "'hard':{'gpu-memory':'10Gi'}"
#define TUSED "'used':{'gpu-memory':'4Gi'}"
    {"tenant by namespace list",
     {GTQ("t", THARD ",'namespaces':['z','a']", TUSED)},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant list without the namespace",
     {GTQ("t", THARD ",'namespaces':['z']", TUSED)},
     "a",
     NULL,
     false,
     "{'team':'ml'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"tenant by matchLabels",
     {GTQ("t", THARD ",'namespaceSelector':{'matchLabels':{'team':'ml'}}", TUSED)},
     "a",
     NULL,
     false,
     "{'team':'ml','env':'prod'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant matchLabels value differs",
     {GTQ("t", THARD ",'namespaceSelector':{'matchLabels':{'team':'ml'}}", TUSED)},
     "a",
     NULL,
     false,
     "{'team':'web'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
#define NSEL(op, vals)                                                                             \
    THARD ",'namespaceSelector':{'matchExpressions':[{'key':'team','operator':'" op "'" vals "}]}"
    {"tenant expression In",
     {GTQ("t", NSEL("In", ",'values':['ml','ai']"), TUSED)},
     "a",
     NULL,
     false,
     "{'team':'ai'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant expression In, label missing",
     {GTQ("t", NSEL("In", ",'values':['ml']"), TUSED)},
     "a",
     NULL,
     false,
     "{}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"tenant expression NotIn, label missing",
     {GTQ("t", NSEL("NotIn", ",'values':['ml']"), TUSED)},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant expression NotIn, listed",
     {GTQ("t", NSEL("NotIn", ",'values':['ml']"), TUSED)},
     "a",
     NULL,
     false,
     "{'team':'ml'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"tenant expression Exists",
     {GTQ("t", NSEL("Exists", ""), TUSED)},
     "a",
     NULL,
     false,
     "{'team':''}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant expression Exists, missing",
     {GTQ("t", NSEL("Exists", ""), TUSED)},
     "a",
     NULL,
     false,
     "{'x':'y'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"tenant expression DoesNotExist",
     {GTQ("t", NSEL("DoesNotExist", ""), TUSED)},
     "a",
     NULL,
     false,
     "{'x':'y'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant expression DoesNotExist, present",
     {GTQ("t", NSEL("DoesNotExist", ""), TUSED)},
     "a",
     NULL,
     false,
     "{'team':'ml'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"tenant empty selector matches every namespace",
     {GTQ("t", THARD ",'namespaceSelector':{}", TUSED)},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant: list misses, selector matches",
     {GTQ("t", THARD ",'namespaces':['z'],'namespaceSelector':{'matchLabels':{'team':'ml'}}",
          TUSED)},
     "a",
     NULL,
     false,
     "{'team':'ml'}",
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"tenant scopes apply",
     {GTQ("t", THARD ",'namespaces':['a'],'scopes':['Terminating']", TUSED)},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"namespace quota checked before tenant quota",
     {GTQ("t", THARD ",'namespaces':['a']", TUSED), GQ("q", "a", "'hard':{'gpu-pods':'0'}", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     DENY_PODS,
     NULL},
    {"namespace quota allows, tenant denies",
     {GTQ("t", THARD ",'namespaces':['a']", TUSED), GQ("q", "a", HARD64, "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_EDENIED,
     TDENY,
     NULL},
    {"every matching quota charged, in check order",
     {GTQ("t2", THARD ",'namespaces':['a']", ""), GQ("q", "a", HARD64, ""),
      GTQ("t1", THARD ",'namespaces':['a']", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     false,
     NULL,
     GQ_OK,
     NULL,
     "q,t1,t2"},
    {"requireQuota without any quota",
     {NULL},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     true,
     NULL,
     GQ_EDENIED,
     "insufficient quota to consume: gpu-memory,gpu-pods",
     NULL},
    {"requireQuota lists every charged key",
     {GQ("q", "b", HARD64, "")},
     "a",
     NULL,
     false,
     NULL,
     0,
     2,
     1,
     false,
     true,
     NULL,
     GQ_EDENIED,
     "insufficient quota to consume: gpu-pods,gpus",
     NULL},
    {"requireQuota with a matching quota",
     {GQ("q", "a", "'hard':{'gpus':4}", "")},
     "a",
     NULL,
     false,
     NULL,
     8,
     0,
     1,
     false,
     true,
     NULL,
     GQ_OK,
     NULL,
     ""},
    {"requireQuota does not touch CPU pods",
     {NULL},
     "a",
     NULL,
     false,
     NULL,
     0,
     0,
     0,
     false,
     true,
     NULL,
     GQ_OK,
     NULL,
     ""},
};

static void test_eval_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(eval_cases) / sizeof(eval_cases[0]); i++) {
        const eval_case *c = &eval_cases[i];
        const gq_quota *qs[3];
        gq_quota *owned[3] = {NULL, NULL, NULL};
        size_t n = 0;
        for (; n < 3 && c->quotas[n]; n++)
            qs[n] = owned[n] = Q(c->quotas[n]);
        json_object *labels = c->ns_labels ? J(c->ns_labels) : NULL;
        gq_pod_facts facts = {.namespace_ = c->ns,
                              .priority_class = c->priority_class,
                              .terminating = c->terminating,
                              .terminal = c->terminal};
        gq_pod_cost cost = {.gpu_memory = c->mem_gi * GI, .gpus = c->gpus, .gpu_pods = c->pods};
        gq_amounts charge;
        gq_charge_from_cost(&cost, c->terminal, &charge);
        size_t idx[3], n_idx = 99;
        gq_err err;
        gq_err_clear(&err);
        gq_quota_snapshot snap = {.quotas = qs,
                                  .n = n,
                                  .ns_labels = labels,
                                  .require_quota = c->require_quota,
                                  .now = NOW,
                                  .reservation_key = c->reservation_key};
        gq_code rc = gq_quota_evaluate(&snap, &facts, &charge, idx, &n_idx, &err);
        if (rc != c->want_rc)
            fail_msg("case '%s': rc %d, want %d (%s)", c->what, rc, c->want_rc, err.msg);
        if (c->want_msg && strcmp(err.msg, c->want_msg) != 0)
            fail_msg("case '%s':\n got  %s\n want %s", c->what, err.msg, c->want_msg);
        if (c->want_charged) {
            char names[128] = "";
            for (size_t j = 0; j < n_idx; j++) {
                if (j)
                    strcat(names, ",");
                strcat(names, qs[idx[j]]->name);
            }
            if (strcmp(names, c->want_charged) != 0)
                fail_msg("case '%s': charged '%s', want '%s'", c->what, names, c->want_charged);
        } else {
            assert_int_equal(n_idx, 99); /* untouched on denial */
        }
        json_object_put(labels);
        for (size_t j = 0; j < n; j++)
            gq_quota_free(owned[j]);
    }
}

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

/* ------------------------------------------------------------------------ */
/* GPULimitRange validation                                                   */

typedef struct ctr_spec {
    gq_ctr_kind kind;
    int64_t gpus;
    int64_t per_gpu_gi;
    gq_form form;
} ctr_spec;

typedef struct lr_case {
    const char *what;
    const char *lrs[2];
    ctr_spec ctrs[4];
    size_t n_ctrs;
    int64_t pod_mem_gi; /* 0: sum of the containers */
    const char *model;
    const char *want; /* NULL: allowed */
} lr_case;

#define CMAX20 "{'type':'Container','max':{'gpu-memory':'20Gi'}}"
#define MODELS "{'type':'Pod','allowedModels':['a100-40gb','a100-80gb']}"

static const lr_case lr_cases[] = {
    {"container max exceeded",
     {GLR("l", CMAX20)},
     {{GQ_CTR_APP, 1, 24, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "maximum gpu-memory usage per Container is 20Gi, but limit is 24Gi"},
    {"container max equality allowed",
     {GLR("l", CMAX20)},
     {{GQ_CTR_APP, 1, 20, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     NULL},
    {"container max compares the container total",
     {GLR("l", CMAX20)},
     {{GQ_CTR_APP, 2, 12, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "maximum gpu-memory usage per Container is 20Gi, but limit is 24Gi"},
    {"container min",
     {GLR("l", "{'type':'Container','min':{'gpu-memory':'2Gi'}}")},
     {{GQ_CTR_APP, 1, 1, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "minimum gpu-memory usage per Container is 2Gi, but request is 1Gi"},
    {"container limits apply to init containers",
     {GLR("l", CMAX20)},
     {{GQ_CTR_INIT, 1, 30, GQ_FORM_MEMORY}, {GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     2,
     30,
     NULL,
     "maximum gpu-memory usage per Container is 20Gi, but limit is 30Gi"},
    {"pod max",
     {GLR("l", "{'type':'Pod','max':{'gpu-memory':'40Gi'}}")},
     {{GQ_CTR_APP, 1, 24, GQ_FORM_MEMORY}, {GQ_CTR_APP, 1, 24, GQ_FORM_MEMORY}},
     2,
     0,
     NULL,
     "maximum gpu-memory usage per Pod is 40Gi, but limit is 48Gi"},
    {"pod min",
     {GLR("l", "{'type':'Pod','min':{'gpu-memory':'8Gi'}}")},
     {{GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "minimum gpu-memory usage per Pod is 8Gi, but request is 4Gi"},
    {"container maxGPUs",
     {GLR("l", "{'type':'Container','maxGPUs':2}")},
     {{GQ_CTR_APP, 4, 80, GQ_FORM_WHOLE}},
     1,
     0,
     NULL,
     "maximum gpus per Container is 2, but limit is 4"},
    {"pod maxGPUs sums app containers",
     {GLR("l", "{'type':'Pod','maxGPUs':3}")},
     {{GQ_CTR_APP, 2, 4, GQ_FORM_MEMORY}, {GQ_CTR_APP, 2, 4, GQ_FORM_MEMORY}},
     2,
     0,
     NULL,
     "maximum gpus per Pod is 3, but limit is 4"},
    {"pod maxGPUs: init runs alone with earlier sidecars",
     {GLR("l", "{'type':'Pod','maxGPUs':4}")},
     {{GQ_CTR_SIDECAR, 1, 4, GQ_FORM_MEMORY},
      {GQ_CTR_INIT, 3, 4, GQ_FORM_MEMORY},
      {GQ_CTR_APP, 2, 4, GQ_FORM_MEMORY}},
     3,
     12,
     NULL,
     NULL},
    {"pod maxGPUs: init peak exceeds",
     {GLR("l", "{'type':'Pod','maxGPUs':3}")},
     {{GQ_CTR_SIDECAR, 1, 4, GQ_FORM_MEMORY},
      {GQ_CTR_INIT, 3, 4, GQ_FORM_MEMORY},
      {GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     3,
     16,
     NULL,
     "maximum gpus per Pod is 3, but limit is 4"},
    {"model not allowed",
     {GLR("l", MODELS)},
     {{GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     1,
     0,
     "t4",
     "GPU model \"t4\" is not allowed in namespace \"x\"; allowed: a100-40gb, a100-80gb"},
    {"model allowed, any case",
     {GLR("l", MODELS)},
     {{GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     1,
     0,
     "A100-80GB",
     NULL},
    {"no model with a model list",
     {GLR("l", MODELS)},
     {{GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "GPU model must be set (annotation gpuquota.io/gpu-model) in namespace \"x\"; allowed: "
     "a100-40gb, a100-80gb"},
    {"CPU-only pod passes every limit",
     {GLR("l", "{'type':'Pod','min':{'gpu-memory':'8Gi'}}," MODELS)},
     {{GQ_CTR_APP, 0, 0, GQ_FORM_NONE}},
     0,
     0,
     NULL,
     NULL},
    {"every limit range applies",
     {GLR("a", CMAX20), GLR("b", "{'type':'Container','maxGPUs':1}")},
     {{GQ_CTR_APP, 2, 12, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "[maximum gpu-memory usage per Container is 20Gi, but limit is 24Gi, maximum gpus per "
     "Container is 1, but limit is 2]"},
    {"identical violations reported once",
     {GLR("a", CMAX20), GLR("b", CMAX20)},
     {{GQ_CTR_APP, 1, 24, GQ_FORM_MEMORY}},
     1,
     0,
     NULL,
     "maximum gpu-memory usage per Container is 20Gi, but limit is 24Gi"},
};

static void build_cost(gq_pod_cost *cost, gq_ctr_cost *ctrs, const ctr_spec *spec, size_t n,
                       int64_t pod_mem_gi, gq_model *model, const char *model_name)
{
    memset(cost, 0, sizeof(*cost));
    int64_t sum = 0;
    size_t n_init = 0, n_app = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&ctrs[i], 0, sizeof(ctrs[i]));
        snprintf(ctrs[i].name, sizeof(ctrs[i].name), "c%zu", i);
        ctrs[i].kind = spec[i].kind;
        ctrs[i].index = spec[i].kind == GQ_CTR_APP ? n_app++ : n_init++;
        ctrs[i].form = spec[i].form;
        ctrs[i].exclusive = spec[i].form == GQ_FORM_WHOLE;
        ctrs[i].gpus = spec[i].gpus;
        ctrs[i].memory_per_gpu = spec[i].per_gpu_gi * GI;
        ctrs[i].charged_per_gpu = spec[i].per_gpu_gi * GI;
        sum += spec[i].gpus * spec[i].per_gpu_gi * GI;
    }
    cost->ctrs = ctrs;
    cost->n_ctrs = n;
    cost->gpu_memory = pod_mem_gi ? pod_mem_gi * GI : sum;
    cost->gpu_pods = n ? 1 : 0;
    if (model_name) {
        model->name = (char *)model_name;
        cost->model = model;
    }
}

static void test_lr_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(lr_cases) / sizeof(lr_cases[0]); i++) {
        const lr_case *c = &lr_cases[i];
        gq_limit_range *lrs[2] = {NULL, NULL};
        size_t n = 0;
        for (; n < 2 && c->lrs[n]; n++)
            lrs[n] = LR(c->lrs[n]);
        gq_ctr_cost ctrs[4];
        gq_model model = {0};
        gq_pod_cost cost;
        build_cost(&cost, ctrs, c->ctrs, c->n_ctrs, c->pod_mem_gi, &model, c->model);
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = gq_limit_validate(&cost, "x", (const gq_limit_range *const *)lrs, n, &err);
        if (c->want) {
            if (rc != GQ_EDENIED || strcmp(err.msg, c->want) != 0)
                fail_msg("case '%s': rc %d\n got  %s\n want %s", c->what, rc, err.msg, c->want);
        } else if (rc != GQ_OK) {
            fail_msg("case '%s': rc %d (%s), want allowed", c->what, rc, err.msg);
        }
        for (size_t j = 0; j < n; j++)
            gq_limit_range_free(lrs[j]);
    }
}

/* ------------------------------------------------------------------------ */
/* GPULimitRange defaults                                                      */

typedef struct def_case {
    const char *what;
    const char *lrs[2];
    const char *pod;
    ctr_spec ctrs[3];
    size_t n_ctrs;
    size_t want_n;
    int64_t want_gi;
    const char *want_lr;
} def_case;

#define DEF8 "{'type':'Container','default':{'gpu-memory':'8Gi'}}"
#define POD_PLAIN "{'metadata':{'name':'p'}}"

static const def_case def_cases[] = {
    {"whole GPU container gets the default",
     {GLR("l", DEF8)},
     POD_PLAIN,
     {{GQ_CTR_APP, 2, 0, GQ_FORM_WHOLE}},
     1,
     1,
     8,
     "l"},
    {"exclusive annotation keeps whole GPUs",
     {GLR("l", DEF8)},
     "{'metadata':{'annotations':{'gpuquota.io/exclusive':'true'}}}",
     {{GQ_CTR_APP, 2, 0, GQ_FORM_WHOLE}},
     1,
     0,
     0,
     NULL},
    {"exclusive annotation other than true",
     {GLR("l", DEF8)},
     "{'metadata':{'annotations':{'gpuquota.io/exclusive':'yes'}}}",
     {{GQ_CTR_APP, 1, 0, GQ_FORM_WHOLE}},
     1,
     1,
     8,
     "l"},
    {"container with an amount keeps it",
     {GLR("l", DEF8)},
     POD_PLAIN,
     {{GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}, {GQ_CTR_APP, 1, 0, GQ_FORM_FRACTION}},
     2,
     0,
     0,
     NULL},
    {"CPU-only pod gets nothing", {GLR("l", DEF8)}, POD_PLAIN, {{0}}, 0, 0, 0, NULL},
    {"first limit range by name wins",
     {GLR("b-range", DEF8), GLR("a-range", "{'type':'Container','default':{'gpu-memory':'4Gi'}}")},
     POD_PLAIN,
     {{GQ_CTR_APP, 1, 0, GQ_FORM_WHOLE}},
     1,
     1,
     4,
     "a-range"},
    {"max alone never becomes a default",
     {GLR("l", CMAX20)},
     POD_PLAIN,
     {{GQ_CTR_APP, 1, 0, GQ_FORM_WHOLE}},
     1,
     0,
     0,
     NULL},
    {"only whole containers of a mixed pod",
     {GLR("l", "{'type':'Pod','maxGPUs':8}," DEF8)},
     POD_PLAIN,
     {{GQ_CTR_INIT, 1, 0, GQ_FORM_WHOLE},
      {GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY},
      {GQ_CTR_APP, 3, 0, GQ_FORM_WHOLE}},
     3,
     2,
     8,
     "l"},
};

static void test_defaults_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(def_cases) / sizeof(def_cases[0]); i++) {
        const def_case *c = &def_cases[i];
        gq_limit_range *lrs[2] = {NULL, NULL};
        size_t n = 0;
        for (; n < 2 && c->lrs[n]; n++)
            lrs[n] = LR(c->lrs[n]);
        gq_ctr_cost ctrs[3];
        gq_model model = {0};
        gq_pod_cost cost;
        build_cost(&cost, ctrs, c->ctrs, c->n_ctrs, 0, &model, NULL);
        json_object *pod = J(c->pod);
        gq_ctr_default *d = NULL;
        size_t nd = 99;
        gq_err err;
        assert_int_equal(
            gq_limit_defaults(pod, &cost, (const gq_limit_range *const *)lrs, n, &d, &nd, &err),
            GQ_OK);
        if (nd != c->want_n)
            fail_msg("case '%s': %zu defaults, want %zu", c->what, nd, c->want_n);
        size_t k = 0;
        for (size_t j = 0; j < nd; j++) {
            while (ctrs[k].form != GQ_FORM_WHOLE)
                k++;
            assert_int_equal(d[j].kind, ctrs[k].kind);
            assert_int_equal(d[j].index, ctrs[k].index);
            assert_string_equal(d[j].name, ctrs[k].name);
            assert_int_equal(d[j].gpus, ctrs[k].gpus);
            assert_int_equal(d[j].memory_per_gpu, c->want_gi * GI);
            assert_string_equal(d[j].limit_range, c->want_lr);
            k++;
        }
        if (nd == 0)
            assert_null(d);
        free(d);
        json_object_put(pod);
        for (size_t j = 0; j < n; j++)
            gq_limit_range_free(lrs[j]);
    }
}

/* ------------------------------------------------------------------------ */
/* Reservations in status                                                     */

static void test_status_add_reservation(void **state)
{
    (void)state;
    json_object *st = J("{'used':{'gpu-memory':'8Gi'}}");
    gq_reservation r = {.key = "uid-1", .namespace_ = "a", .pod = "job-x-", .expires = NOW + 30};
    gq_charge_from_cost(&(gq_pod_cost){.gpu_memory = 16 * GI, .gpus = 0, .gpu_pods = 1}, false,
                        &r.amounts);
    bool added = false;
    gq_err err;
    assert_int_equal(gq_status_add_reservation(st, &r, &added, &err), GQ_OK);
    assert_true(added);
    assert_string_equal(
        json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN),
        "{\"used\":{\"gpu-memory\":\"8Gi\"},\"reservations\":[{\"key\":\"uid-1\",\"namespace\":"
        "\"a\",\"pod\":\"job-x-\",\"gpu-memory\":\"16Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\","
        "\"expires\":\"2026-11-21T15:06:35Z\"}]}");
    /* Same key again (webhook retry): idempotent, even with other amounts. */
    r.expires = NOW + 999;
    assert_int_equal(gq_status_add_reservation(st, &r, &added, &err), GQ_OK);
    assert_false(added);
    json_object *arr = json_object_object_get(st, "reservations");
    assert_int_equal(json_object_array_length(arr), 1);

    /* The record round-trips through the parser. */
    gq_reservation back;
    assert_int_equal(gq_reservation_parse(json_object_array_get_idx(arr, 0), NULL, &back, &err),
                     GQ_OK);
    assert_string_equal(back.key, "uid-1");
    assert_string_equal(back.pod, "job-x-");
    assert_int_equal(back.expires, NOW + 30);
    assert_int_equal(back.amounts.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(back.amounts.v[GQ_KEY_GPU_PODS], 1);
    gq_reservation_dispose(&back);
    gq_reservation_dispose(NULL);

    /* Sum: used + the live reservation. */
    gq_amounts sum;
    assert_int_equal(gq_status_sum(st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 24 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 1);
    assert_int_equal(gq_status_sum(st, NOW + 30, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 0);
    json_object_put(st);

    /* Wrong shapes. */
    st = J("{'reservations':{}}");
    assert_int_equal(gq_status_add_reservation(st, &r, &added, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status.reservations: must be an array, got object");
    json_object_put(st);
    st = J("[]");
    assert_int_equal(gq_status_add_reservation(st, &r, &added, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status: must be an object, got array");
    json_object_put(st);
}

static void test_reservation_for_pod(void **state)
{
    (void)state;
    gq_amounts charge;
    gq_charge_from_cost(&(gq_pod_cost){.gpu_memory = 2 * GI, .gpu_pods = 1}, false, &charge);
    gq_reservation r;
    gq_err err;
    /* Keyed by the pod's uid (what the validating webhook and the
     * controller both see); an annotation a user wrote plays no part. */
    json_object *p = J("{'metadata':{'name':'job-x7k2p','generateName':'job-','uid':'pod-uid-1',"
                       "'annotations':{'gpuquota.io/reservation':'stamp-1'}}}");
    assert_int_equal(gq_reservation_for_pod(p, "a", "uid-9", &charge, NOW + 60, &r, &err), GQ_OK);
    assert_string_equal(r.key, "pod-uid-1");
    assert_string_equal(r.pod, "job-x7k2p");
    assert_string_equal(r.namespace_, "a");
    assert_int_equal(r.expires, NOW + 60);
    assert_int_equal(r.amounts.v[GQ_KEY_GPU_MEMORY], 2 * GI);
    gq_reservation_dispose(&r);
    json_object_put(p);

    /* No uid (offline admission): the request uid; an annotation still
     * plays no part. */
    p = J("{'metadata':{'generateName':'web-','uid':'','annotations':{'gpuquota.io/"
          "reservation':'stamp-1'}}}");
    assert_int_equal(gq_reservation_for_pod(p, "a", "uid-9", &charge, NOW, &r, &err), GQ_OK);
    assert_string_equal(r.key, "uid-9");
    assert_string_equal(r.pod, "web-");
    gq_reservation_dispose(&r);
    assert_int_equal(gq_reservation_for_pod(p, "a", NULL, &charge, NOW, &r, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "reservation: the pod has no metadata.uid and the request no uid");
    json_object_put(p);
}

static void test_status_drop_and_sum(void **state)
{
    (void)state;
    json_object *st = J(
        "{'used':{'gpu-memory':'10Gi','gpus':2},'reservations':[" RES("a", "4Gi", EXPIRED) "," RES(
            "b", "6Gi", LIVE) ",{'key':'corrupt'}," RES("c", "1Gi", "2026-11-21T15:06:04Z") "]}");
    gq_err err;
    gq_amounts sum;
    /* A corrupt record makes the sum fail: never guess a smaller usage. */
    assert_int_equal(gq_status_sum(st, NOW, &sum, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status.reservations[2].namespace: must be a string, got null");
    size_t dropped = 0;
    assert_int_equal(gq_status_drop_expired(st, NOW, &dropped, &err), GQ_OK);
    assert_int_equal(dropped, 3);
    json_object *arr = json_object_object_get(st, "reservations");
    assert_int_equal(json_object_array_length(arr), 1);
    assert_string_equal(
        json_object_get_string(json_object_object_get(json_object_array_get_idx(arr, 0), "key")),
        "b");
    assert_int_equal(gq_status_sum(st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPUS], 2);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 1);
    json_object_put(st);

    /* No reservations at all. */
    st = J("{}");
    assert_int_equal(gq_status_drop_expired(st, NOW, &dropped, &err), GQ_OK);
    assert_int_equal(dropped, 0);
    assert_int_equal(gq_status_sum(st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 0);
    json_object_put(st);
}

static void test_quota_in_use_overflow(void **state)
{
    (void)state;
    gq_quota *q = Q(GQ("q", "a", HARD64,
                       "'used':{'gpu-memory':'4Ei'},'reservations':[" RES("r", "4Ei", LIVE) "]"));
    gq_amounts a;
    gq_err err;
    assert_int_equal(gq_quota_in_use(q, NOW, NULL, &a, &err), GQ_ERANGE);
    assert_string_equal(err.msg, "q: gpu-memory overflows");
    gq_quota_free(q);
}

/* ------------------------------------------------------------------------ */
/* Recount                                                                     */

static gq_usage_pod upod(const char *ns, int64_t mem_gi, int64_t gpus, bool terminal,
                         json_object *labels)
{
    gq_usage_pod p = {.facts = {.namespace_ = ns, .terminal = terminal}, .ns_labels = labels};
    gq_pod_cost c = {.gpu_memory = mem_gi * GI, .gpus = gpus, .gpu_pods = 1};
    gq_charge_from_cost(&c, terminal, &p.charge);
    return p;
}

static void test_recount(void **state)
{
    (void)state;
    json_object *ml = J("{'team':'ml'}");
    gq_usage_pod pods[] = {
        upod("a", 8, 0, false, ml), upod("b", 16, 1, false, ml),   upod("a", 4, 0, false, ml),
        upod("a", 32, 0, true, ml), upod("c", 64, 0, false, NULL), upod("b", 2, 0, false, ml),
    };
    size_t n = sizeof(pods) / sizeof(pods[0]);
    gq_err err;
    gq_usage u;
    gq_usage_init(&u);

    gq_quota *q = Q(GQ("q", "a", "'hard':{'gpu-memory':'64Gi','gpu-pods':10}", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], 12 * GI);
    assert_int_equal(u.used.v[GQ_KEY_GPU_PODS], 2);
    assert_false(u.used.set[GQ_KEY_GPUS]); /* only keys of hard */
    assert_int_equal(u.n_ns, 0);
    json_object *j = gq_amounts_to_json(&u.used);
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "{\"gpu-memory\":\"12Gi\",\"gpu-pods\":\"2\"}");
    json_object_put(j);
    gq_quota_free(q);

    q = Q(GTQ("t",
              "'hard':{'gpu-memory':'1Ti','gpus':8},'namespaceSelector':{'matchLabels':{"
              "'team':'ml'}}",
              ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], 30 * GI);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 1);
    assert_int_equal(u.n_ns, 2);
    j = gq_usage_namespaces_to_json(&u);
    assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                        "[{\"namespace\":\"a\",\"used\":{\"gpu-memory\":\"12Gi\",\"gpus\":\"0\"}},"
                        "{\"namespace\":\"b\",\"used\":{\"gpu-memory\":\"18Gi\",\"gpus\":\"1\"}}]");
    json_object_put(j);
    gq_quota_free(q);

    /* Recount over nothing empties the previous result. */
    q = Q(GTQ("t", "'hard':{'gpus':8},'namespaces':['z']", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 0);
    assert_true(u.used.set[GQ_KEY_GPUS]);
    assert_int_equal(u.n_ns, 0);
    gq_quota_free(q);
    gq_usage_dispose(&u);
    gq_usage_dispose(NULL);
    json_object_put(ml);
}

/* Shared ResourceClaims: each counts once per quota however many counted
 * pods name it, in any order; every pod still counts in gpu-pods. */
static gq_shared_claim sclaim(const char *uid, const char *name, int64_t gpus, int64_t mem_gi)
{
    gq_shared_claim c;
    memset(&c, 0, sizeof(c));
    snprintf(c.uid, sizeof(c.uid), "%s", uid);
    snprintf(c.name, sizeof(c.name), "%s", name);
    c.gpus = gpus;
    c.memory = mem_gi * GI;
    return c;
}

static void test_recount_shared_claims(void **state)
{
    (void)state;
    gq_shared_claim pair = sclaim("u-pair", "pair", 2, 160), solo = sclaim("u-solo", "solo", 1, 80);
    gq_shared_claim both[] = {pair, solo};
    /* pods' charges include their claims (gq_pod_cost_compute), plus 8Gi of
     * their own on the third */
    gq_usage_pod pods[] = {
        upod("a", 160, 2, false, NULL), upod("a", 160, 2, false, NULL),
        upod("a", 248, 3, false, NULL), upod("a", 160, 2, true, NULL),
        upod("b", 16, 1, false, NULL),
    };
    pods[0].claims = pods[1].claims = pods[3].claims = &pair;
    pods[0].n_claims = pods[1].n_claims = pods[3].n_claims = 1;
    pods[2].claims = both;
    pods[2].n_claims = 2;
    size_t n = sizeof(pods) / sizeof(pods[0]);
    gq_err err;
    gq_usage u;
    gq_usage_init(&u);
    gq_quota *q = Q(GQ("q", "a", "'hard':{'gpu-memory':'1Ti','gpus':8,'gpu-pods':10}", ""));
    int64_t want_mem = (160 + 80 + 8) * GI;
    for (int order = 0; order < 2; order++) {
        if (order) { /* reversed: the same result */
            for (size_t i = 0; i < n / 2; i++) {
                gq_usage_pod t = pods[i];
                pods[i] = pods[n - 1 - i];
                pods[n - 1 - i] = t;
            }
        }
        assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
        assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], want_mem);
        assert_int_equal(u.used.v[GQ_KEY_GPUS], 3);
        assert_int_equal(u.used.v[GQ_KEY_GPU_PODS], 3);
        assert_int_equal(u.n_claims, 2);
        assert_string_equal(u.claims[0].key, "u-pair");
        assert_string_equal(u.claims[0].pod, "pair");
        assert_true(u.claims[0].claim && u.claims[0].counted);
        assert_int_equal(u.claims[0].amounts.v[GQ_KEY_GPU_MEMORY], 160 * GI);
        assert_int_equal(u.claims[0].amounts.v[GQ_KEY_GPU_PODS], 0);
        assert_string_equal(u.claims[1].key, "u-solo");
        json_object *rec = gq_reservation_to_json(&u.claims[1]);
        assert_string_equal(
            json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN),
            "{\"key\":\"u-solo\",\"namespace\":\"a\",\"pod\":\"solo\","
            "\"gpu-memory\":\"80Gi\",\"gpu-pods\":\"0\",\"gpus\":\"1\","
            "\"expires\":\"1970-01-01T00:00:00Z\",\"claim\":true,\"counted\":true}");
        /* it parses back as written, and adds nothing to what is in use */
        gq_reservation back;
        assert_int_equal(gq_reservation_parse(rec, NULL, &back, &err), GQ_OK);
        assert_true(back.claim && back.counted);
        gq_reservation_dispose(&back);
        json_object_put(rec);
    }
    gq_quota_free(q);
    /* a tenant over both namespaces: the claims count in their namespace */
    q = Q(GTQ("t", "'hard':{'gpus':8},'namespaces':['a','b']", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 4);
    assert_int_equal(u.n_ns, 2);
    assert_int_equal(u.ns[0].used.v[GQ_KEY_GPUS], 3);
    assert_int_equal(u.ns[1].used.v[GQ_KEY_GPUS], 1);
    gq_quota_free(q);
    /* only terminal pods name the claims: freed */
    for (size_t i = 0; i < n; i++)
        if (pods[i].n_claims)
            pods[i].facts.terminal = true;
    q = Q(GQ("q", "a", "'hard':{'gpus':8}", ""));
    assert_int_equal(gq_quota_recount(q, pods, n, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPUS], 0);
    assert_int_equal(u.n_claims, 0);
    gq_quota_free(q);
    gq_usage_dispose(&u);
}

/* gq_claims_once: one ref per uid (the dearest record), none of those
 * already charged, in uid order. */
static bool charged_b(void *ud, const char *uid)
{
    (void)ud;
    return !strcmp(uid, "b");
}

static void test_claims_once(void **state)
{
    (void)state;
    gq_shared_claim c[] = {sclaim("c", "c", 1, 80), sclaim("a", "a", 1, 24),
                           sclaim("b", "b", 1, 80), sclaim("a", "a", 1, 80)};
    gq_claim_ref refs[4];
    for (size_t i = 0; i < 4; i++)
        refs[i] = (gq_claim_ref){&c[i], i};
    assert_int_equal(gq_claims_once(refs, 4, NULL, NULL), 3);
    assert_string_equal(refs[0].claim->uid, "a");
    assert_int_equal(refs[0].owner, 3); /* the dearest record of "a" */
    assert_string_equal(refs[1].claim->uid, "b");
    assert_string_equal(refs[2].claim->uid, "c");
    for (size_t i = 0; i < 4; i++)
        refs[i] = (gq_claim_ref){&c[i], i};
    assert_int_equal(gq_claims_once(refs, 4, charged_b, NULL), 2);
    assert_string_equal(refs[0].claim->uid, "a");
    assert_string_equal(refs[1].claim->uid, "c");
    assert_int_equal(gq_claims_once(refs, 0, NULL, NULL), 0);
    /* the pod's own part: its charge without its shared claims, floored */
    gq_amounts charge, own;
    gq_pod_cost pc = {.gpu_memory = 100 * GI, .gpus = 2, .gpu_pods = 1};
    gq_charge_from_cost(&pc, false, &charge);
    gq_charge_own(&charge, c, 2, &own);
    assert_int_equal(own.v[GQ_KEY_GPU_MEMORY], 0); /* 100Gi less 104Gi: floored */
    assert_int_equal(own.v[GQ_KEY_GPUS], 0);
    assert_int_equal(own.v[GQ_KEY_GPU_PODS], 1);
    gq_charge_own(&charge, &c[1], 1, &own);
    assert_int_equal(own.v[GQ_KEY_GPU_MEMORY], 76 * GI);
    assert_int_equal(own.v[GQ_KEY_GPUS], 1);
}

/* ------------------------------------------------------------------------ */
/* Pod facts, RFC 3339                                                          */

static void test_pod_facts(void **state)
{
    (void)state;
    gq_pod_facts f;
    gq_err err;
    json_object *p = J("{'spec':{'priorityClassName':'high','activeDeadlineSeconds':0}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_OK);
    assert_string_equal(f.namespace_, "a");
    assert_string_equal(f.priority_class, "high");
    assert_true(f.terminating);
    assert_false(f.terminal);
    json_object_put(p);
    p = J("{'spec':{'activeDeadlineSeconds':-1}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_OK);
    assert_false(f.terminating);
    assert_null(f.priority_class);
    json_object_put(p);
    p = J("{'spec':{'activeDeadlineSeconds':'10'}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "spec.activeDeadlineSeconds: must be an integer");
    json_object_put(p);
    p = J("{'spec':{'priorityClassName':1}}");
    assert_int_equal(gq_pod_facts_from_json(p, "a", &f, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "spec.priorityClassName: must be a string");
    json_object_put(p);
    assert_int_equal(gq_pod_facts_from_json(NULL, "a", &f, &err), GQ_EINVAL);
}

static void test_rfc3339(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t t;
    } ok[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2026-11-21T15:06:05Z", NOW},
        {"2026-11-21t15:06:05.999999999z", NOW},
        {"2026-11-21T16:06:05+01:00", NOW},
        {"2026-11-21T14:36:05-00:30", NOW},
        {"2024-02-29T23:59:59Z", 1709251199},
        {"1969-12-31T23:00:00Z", -3600},
        {"1969-12-31T23:59:59.5Z", -1}, /* floor, not toward zero */
    };
    static const char *const bad[] = {
        "",
        "tomorrow",
        "2026-11-21 15:06:05Z",
        "2026-11-21T15:06:05",
        "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-11-21T24:00:00Z",
        "2026-11-21T15:06:05.Z",
        "2026-11-21T15:06:05Zjunk",
        "2026-11-21T15:06:05+0100",
    };
    gq_err err;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t t = 42;
        if (gq_time_parse_rfc3339(ok[i].s, &t, &err) != GQ_OK || t != ok[i].t)
            fail_msg("%s: got %lld (%s)", ok[i].s, (long long)t, err.msg);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t t = 42;
        if (gq_time_parse_rfc3339(bad[i], &t, &err) != GQ_EINVAL || t != 42)
            fail_msg("%s: accepted", bad[i]);
    }
    /* Microseconds: the sixth fraction digit kept, later ones truncated. */
    int64_t us = 0;
    assert_int_equal(gq_time_parse_rfc3339_us("2026-11-21T15:06:05.1234567Z", &us, &err), GQ_OK);
    assert_int_equal(us, NOW * 1000000 + 123456);
    assert_int_equal(gq_time_parse_rfc3339_us("1969-12-31T23:59:59.5Z", &us, &err), GQ_OK);
    assert_int_equal(us, -500000);
    char buf[GQ_RFC3339_MAX];
    gq_time_format_rfc3339(NOW, buf);
    assert_string_equal(buf, "2026-11-21T15:06:05Z");
    gq_time_format_rfc3339(-3600, buf);
    assert_string_equal(buf, "1969-12-31T23:00:00Z");
    gq_time_format_rfc3339(INT64_MAX, buf);
    assert_string_equal(buf, "9999-12-31T23:59:59Z");
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

/* Namespace coverage, scopes aside (the controller's event mapping). */
static void test_quota_covers_namespace(void **state)
{
    (void)state;
    gq_quota *gq = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota','metadata':{'name':"
                     "'q','namespace':'a'},'spec':{'hard':{'gpus':1},'scopes':['Terminating']}}");
    gq_quota *t = Q("{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUTenantQuota','metadata':{"
                    "'name':'t'},'spec':{'namespaces':['listed'],'namespaceSelector':{"
                    "'matchLabels':{'team':'ml'}},'hard':{'gpus':1}}}");
    json_object *ml = J("{'team':'ml'}"), *web = J("{'team':'web'}");
    assert_true(gq_quota_covers_namespace(gq, "a", NULL));
    assert_false(gq_quota_covers_namespace(gq, "b", ml));
    assert_true(gq_quota_covers_namespace(t, "listed", NULL));
    assert_true(gq_quota_covers_namespace(t, "x", ml));
    assert_false(gq_quota_covers_namespace(t, "x", web));
    assert_false(gq_quota_covers_namespace(t, "x", NULL));
    assert_false(gq_quota_covers_namespace(NULL, "x", ml));
    assert_false(gq_quota_covers_namespace(t, NULL, ml));
    json_object_put(ml);
    json_object_put(web);
    gq_quota_free(gq);
    gq_quota_free(t);
}

/* --- per-model limits and a choice of models --------------------------------- */

#define MGQ(name, spec, status) GQ(name, "a", spec, status)
#define MGTQ(name, spec, status) GTQ(name, "'namespaces':['a']," spec, status)
#define LATER "2026-11-21T16:00:00Z"
#define EARLIER "2026-11-21T14:00:00Z"

static gq_code parse_q(const char *s, gq_quota **q, gq_err *err)
{
    json_object *o = J(s);
    gq_err_clear(err);
    gq_code rc = gq_quota_parse(o, q, err);
    json_object_put(o);
    return rc;
}

#define RESV(key, mem, model, exp)                                                                 \
    "{'key':'" key "','namespace':'a','pod':'p','gpu-memory':'" mem "','gpus':'0','gpu-pods':'1'," \
    "'expires':'" exp "'" model "}"

static gq_amounts charge_gi(int64_t gi)
{
    gq_pod_cost c = {.gpu_memory = gi * GI, .gpu_pods = 1};
    gq_amounts a;
    gq_charge_from_cost(&c, false, &a);
    return a;
}

static void test_parse_models(void **state)
{
    (void)state;
    gq_quota *q = Q(MGQ("q",
                        "'hard':{'gpu-memory':'64Gi'},'models':{'h100-80gb':{'gpu-memory':'40Gi',"
                        "'gpu-pods':2},'a10-24gb':{'gpus':1}}",
                        "'usedByModel':{'h100-80gb':{'gpu-memory':'8Gi'},'gone':{'gpus':3}}"));
    assert_int_equal(q->n_models, 2);
    assert_string_equal(q->models[0].name, "a10-24gb"); /* sorted */
    assert_true(q->models[0].hard.set[GQ_KEY_GPUS]);
    assert_false(q->models[0].hard.set[GQ_KEY_GPU_MEMORY]);
    assert_string_equal(q->models[1].name, "h100-80gb");
    assert_int_equal(q->models[1].hard.v[GQ_KEY_GPU_MEMORY], 40 * GI);
    assert_int_equal(q->models[1].used.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_ptr_equal(gq_quota_model_limit(q, "h100-80gb"), &q->models[1]);
    assert_null(gq_quota_model_limit(q, "gone"));
    assert_null(gq_quota_model_limit(q, NULL));
    gq_quota_free(q);

    static const struct {
        const char *json;
        gq_code rc;
        const char *msg;
    } bad[] = {
        {MGQ("q", "'models':[]", ""), GQ_EINVAL, "spec.models: must be an object, got array"},
        {MGQ("q", "'models':{'H100':{'gpus':1}}", ""), GQ_EINVAL,
         "spec.models: \"H100\" is not a model name"},
        {MGQ("q", "'models':{'':{'gpus':1}}", ""), GQ_EINVAL, "spec.models: \"\" is not a"},
        {MGQ("q", "'models':{'h100-80gb':{'gpus':'-1'}}", ""), GQ_EINVAL,
         "spec.models.h100-80gb.gpus"},
        {MGQ("q", "'models':{'h100-80gb':{'cpu':1}}", ""), GQ_EINVAL, "spec.models.h100-80gb"},
        {MGQ("q", "'models':{'h100-80gb':{'gpus':1}}", "'usedByModel':{'h100-80gb':{'gpus':'x'}}"),
         GQ_EINVAL, "status.usedByModel.h100-80gb.gpus"},
        {MGQ("q", "", "'reservations':[" RESV("k", "1Gi", ",'model':''", LATER) "]"), GQ_EINVAL,
         "status.reservations[0].model: must be a model name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gq_err err;
        q = NULL;
        gq_code rc = parse_q(bad[i].json, &q, &err);
        if (rc != bad[i].rc || !strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: rc %d msg \"%s\", want %d \"%s\"", i, rc, err.msg, bad[i].rc,
                     bad[i].msg);
        assert_null(q);
    }

    /* Bounded: 33 models are refused. */
    char buf[4096];
    size_t len = (size_t)snprintf(buf, sizeof(buf), "%s",
                                  "{'apiVersion':'gpuquota.io/v1alpha1','kind':'GPUQuota',"
                                  "'metadata':{'name':'q','namespace':'a'},'spec':{'models':{");
    for (int i = 0; i < GQ_CRD_MAX_QUOTA_MODELS + 1; i++)
        len +=
            (size_t)snprintf(buf + len, sizeof(buf) - len, "%s'm%d':{'gpus':1}", i ? "," : "", i);
    snprintf(buf + len, sizeof(buf) - len, "}}}");
    gq_err err;
    q = NULL;
    assert_int_equal(parse_q(buf, &q, &err), GQ_ELIMIT);
    assert_non_null(strstr(err.msg, "spec.models: more than 32 models"));
}

static gq_code eval_model(const gq_quota *q, const char *model, int64_t gi, size_t *n_charge,
                          gq_err *err)
{
    gq_pod_facts f = {.namespace_ = "a", .model = model};
    gq_amounts c = charge_gi(gi);
    size_t idx[1];
    gq_err_clear(err);
    return gq_quota_evaluate(&(gq_quota_snapshot){.quotas = &q, .n = 1, .now = NOW}, &f, &c, idx,
                             n_charge, err);
}

static void test_evaluate_models(void **state)
{
    (void)state;
    gq_err err;
    size_t n = 0;
    /* 24Gi of h100 in use: 8Gi in status, 16Gi reserved; an a10 reservation
     * and an expired h100 one count for the model nothing. */
    gq_quota *q = Q(
        MGQ("team-a", "'hard':{'gpu-memory':'100Gi'},'models':{'h100-80gb':{'gpu-memory':'40Gi'}}",
            "'used':{'gpu-memory':'20Gi'},'usedByModel':{'h100-80gb':{'gpu-memory':'8Gi'}},"
            "'reservations':[" RESV("r1", "16Gi", ",'model':'h100-80gb'", LATER) "," RESV(
                "r2", "4Gi", ",'model':'a10-24gb'",
                LATER) "," RESV("r3", "30Gi", ",'model':'h100-80gb'", EARLIER) "]"));
    gq_amounts used;
    assert_int_equal(gq_quota_model_in_use(q, &q->models[0], NOW, NULL, &used, &err), GQ_OK);
    assert_int_equal(used.v[GQ_KEY_GPU_MEMORY], 24 * GI);
    assert_int_equal(gq_quota_model_in_use(q, &q->models[0], NOW, "r1", &used, &err), GQ_OK);
    assert_int_equal(used.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    gq_quota *u = Q(MGQ("u", "'models':{'h100-80gb':{'gpus':1},'a10-24gb':{'gpus':1}}",
                        "'reservations':[" RESV("r1", "3Gi", "", LATER) "]"));
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(gq_quota_model_in_use(u, &u->models[i], NOW, NULL, &used, &err), GQ_OK);
        assert_int_equal(used.v[GQ_KEY_GPU_MEMORY], 3 * GI); /* unpinned: every model */
    }
    gq_quota_free(u);

    /* Up to the limit (equality allowed), then denied naming the model. */
    assert_int_equal(eval_model(q, "h100-80gb", 16, &n, &err), GQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(eval_model(q, "h100-80gb", 17, &n, &err), GQ_EDENIED);
    assert_string_equal(err.msg, "exceeded quota: team-a, requested: h100-80gb/gpu-memory=17Gi, "
                                 "used: h100-80gb/gpu-memory=24Gi, limited: "
                                 "h100-80gb/gpu-memory=40Gi");
    /* A model the quota does not list: only spec.hard (40Gi in use of 100Gi). */
    assert_int_equal(eval_model(q, "a10-24gb", 60, &n, &err), GQ_OK);
    assert_int_equal(eval_model(q, "a10-24gb", 61, &n, &err), GQ_EDENIED);
    assert_string_equal(err.msg, "exceeded quota: team-a, requested: gpu-memory=61Gi, used: "
                                 "gpu-memory=40Gi, limited: gpu-memory=100Gi");
    /* The general limit is checked first. */
    assert_int_equal(eval_model(q, "h100-80gb", 61, &n, &err), GQ_EDENIED);
    assert_non_null(strstr(err.msg, "requested: gpu-memory=61Gi"));
    /* Unpinned: it could land on an h100, so the h100 limit holds for it. */
    assert_int_equal(eval_model(q, NULL, 16, &n, &err), GQ_OK);
    assert_int_equal(eval_model(q, NULL, 17, &n, &err), GQ_EDENIED);
    assert_string_equal(err.msg, "exceeded quota: team-a, requested: h100-80gb/gpu-memory=17Gi, "
                                 "used: h100-80gb/gpu-memory=24Gi, limited: "
                                 "h100-80gb/gpu-memory=40Gi");
    /* A CPU-only pod is never touched. */
    gq_pod_facts f = {.namespace_ = "a"};
    gq_amounts zero = charge_gi(0);
    zero.v[GQ_KEY_GPU_PODS] = 0;
    size_t idx[1];
    assert_int_equal(
        gq_quota_evaluate(
            &(gq_quota_snapshot){.quotas = (const gq_quota *const *)&q, .n = 1, .now = NOW}, &f,
            &zero, idx, &n, &err),
        GQ_OK);
    assert_int_equal(n, 0);
    gq_quota_free(q);

    /* A quota that limits only a model charges the pods of that model only. */
    q = Q(MGTQ("tenant", "'models':{'h100-80gb':{'gpu-pods':'1'}}", ""));
    assert_int_equal(eval_model(q, "a10-24gb", 8, &n, &err), GQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(eval_model(q, "h100-80gb", 8, &n, &err), GQ_OK);
    assert_int_equal(n, 1);
    gq_quota_free(q);
    q = Q(MGTQ("tenant", "'models':{'h100-80gb':{'gpu-pods':'1'}}",
               "'usedByModel':{'h100-80gb':{'gpu-pods':'1'}}"));
    assert_int_equal(eval_model(q, "h100-80gb", 8, &n, &err), GQ_EDENIED);
    assert_string_equal(err.msg, "exceeded tenant quota: tenant, requested: h100-80gb/gpu-pods=1, "
                                 "used: h100-80gb/gpu-pods=1, limited: h100-80gb/gpu-pods=1");
    gq_quota_free(q);
}

static void test_reservation_model_round_trip(void **state)
{
    (void)state;
    gq_reservation r = {0}, back = {0};
    gq_err err;
    r.key = "k";
    r.namespace_ = "a";
    r.pod = "p";
    r.amounts = charge_gi(4);
    r.expires = NOW;
    r.model = "h100-80gb";
    json_object *o = gq_reservation_to_json(&r);
    assert_non_null(o);
    assert_int_equal(gq_reservation_parse(o, NULL, &back, &err), GQ_OK);
    assert_string_equal(back.model, "h100-80gb");
    gq_reservation_dispose(&back);
    json_object_put(o);
    r.model = NULL;
    o = gq_reservation_to_json(&r);
    assert_false(json_object_object_get_ex(o, "model", NULL));
    assert_int_equal(gq_reservation_parse(o, NULL, &back, &err), GQ_OK);
    assert_null(back.model);
    gq_reservation_dispose(&back);
    json_object_put(o);
}

static void test_recount_by_model(void **state)
{
    (void)state;
    gq_quota *q = Q(MGQ("q",
                        "'hard':{'gpu-memory':'100Gi'},'models':{'h100-80gb':{'gpu-memory':'40Gi'},"
                        "'a100-80gb':{'gpu-pods':'4'}}",
                        ""));
    gq_usage_pod pods[4];
    const char *models[] = {"h100-80gb", "a100-80gb", "h100-80gb", NULL};
    for (int i = 0; i < 4; i++) {
        memset(&pods[i], 0, sizeof(pods[i]));
        pods[i].facts.namespace_ = "a";
        pods[i].facts.model = models[i];
        pods[i].charge = charge_gi(10 + i);
    }
    pods[2].facts.terminal = true;
    gq_usage u;
    gq_err err;
    gq_usage_init(&u);
    assert_int_equal(gq_quota_recount(q, pods, 4, &u, &err), GQ_OK);
    assert_int_equal(u.used.v[GQ_KEY_GPU_MEMORY], (10 + 11 + 13) * GI);
    assert_int_equal(u.n_by_model, 2);
    /* models[0] is a100-80gb (sorted): only gpu-pods is limited, only it is
     * set. The unpinned pod (13Gi) counts against both models. */
    assert_true(u.by_model[0].set[GQ_KEY_GPU_PODS]);
    assert_false(u.by_model[0].set[GQ_KEY_GPU_MEMORY]);
    assert_int_equal(u.by_model[0].v[GQ_KEY_GPU_PODS], 2);
    assert_int_equal(u.by_model[1].v[GQ_KEY_GPU_MEMORY], 23 * GI);
    json_object *o = gq_usage_by_model_to_json(q, &u);
    assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                        "{\"a100-80gb\":{\"gpu-pods\":\"2\"},"
                        "\"h100-80gb\":{\"gpu-memory\":\"23Gi\"}}");
    json_object_put(o);
    gq_usage_dispose(&u);
    gq_quota_free(q);
}

static void test_choose(void **state)
{
    (void)state;
    gq_quota *qs[2];
    qs[0] = Q(MGQ("team-a",
                  "'hard':{'gpu-memory':'100Gi'},'models':{'a100-80gb':{'gpu-memory':"
                  "'40Gi'},'h100-80gb':{'gpu-memory':'40Gi'}}",
                  "'usedByModel':{'a100-80gb':{'gpu-memory':'32Gi'}}"));
    qs[1] = Q(MGTQ("org", "'models':{'h100-80gb':{'gpu-pods':'2'}}",
                   "'usedByModel':{'h100-80gb':{'gpu-pods':'1'}}"));
    const gq_quota *const *quotas = (const gq_quota *const *)qs;
    const gq_quota_snapshot both = {.quotas = quotas, .n = 2, .now = NOW},
                            none = {.quotas = quotas, .now = NOW},
                            none_required = {.quotas = quotas, .require_quota = true, .now = NOW};
    gq_pod_facts f = {.namespace_ = "a"};
    gq_model_option opts[] = {{"a100-80gb", charge_gi(8)}, {"h100-80gb", charge_gi(8)}};
    size_t chosen = 99;
    gq_err err;
    gq_err_clear(&err);

    /* The first preference fits exactly (32 + 8 = 40). */
    assert_int_equal(gq_model_choose(opts, 2, &both, &f, &chosen, &err), GQ_OK);
    assert_int_equal(chosen, 0);
    /* It no longer fits: the second, which both quotas allow. */
    opts[0].charge = charge_gi(9);
    assert_int_equal(gq_model_choose(opts, 2, &both, &f, &chosen, &err), GQ_OK);
    assert_int_equal(chosen, 1);
    /* The charge depends on the model (a fraction of a bigger card). */
    opts[1].charge = charge_gi(41);
    assert_int_equal(gq_model_choose(opts, 2, &both, &f, &chosen, &err), GQ_EDENIED);
    assert_string_equal(err.msg,
                        "no accepted GPU model fits: a100-80gb: exceeded quota: team-a, requested: "
                        "a100-80gb/gpu-memory=9Gi, used: a100-80gb/gpu-memory=32Gi, limited: "
                        "a100-80gb/gpu-memory=40Gi; h100-80gb: exceeded quota: team-a, requested: "
                        "h100-80gb/gpu-memory=41Gi, used: h100-80gb/gpu-memory=0, limited: "
                        "h100-80gb/gpu-memory=40Gi");
    assert_int_equal(chosen, 1); /* untouched on denial */
    /* The tenant's model limit counts too. */
    gq_quota_free(qs[1]);
    qs[1] = Q(MGTQ("org", "'models':{'h100-80gb':{'gpu-pods':'1'}}",
                   "'usedByModel':{'h100-80gb':{'gpu-pods':'1'}}"));
    opts[1].charge = charge_gi(8);
    assert_int_equal(gq_model_choose(opts, 2, &both, &f, &chosen, &err), GQ_EDENIED);
    assert_non_null(strstr(err.msg, "h100-80gb: exceeded tenant quota: org"));
    /* No quota at all: the first preference; with requireQuota, none. */
    assert_int_equal(gq_model_choose(opts, 2, &none, &f, &chosen, &err), GQ_OK);
    assert_int_equal(chosen, 0);
    assert_int_equal(gq_model_choose(opts, 2, &none_required, &f, &chosen, &err), GQ_EDENIED);
    assert_int_equal(gq_model_choose(opts, 0, &both, &f, &chosen, &err), GQ_EINVAL);
    gq_quota_free(qs[0]);
    gq_quota_free(qs[1]);
}

/* Kubernetes' counting rule, and the deletion deadline it reads. */
static void test_pod_counts(void **state)
{
    (void)state;
    int64_t at = -1;
    gq_err e;
    json_object *p = J("{'metadata':{'name':'p'}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_OK);
    assert_int_equal(at, 0);
    json_object_put(p);
    p = J("{'metadata':{'deletionTimestamp':'2026-11-21T15:06:05Z',"
          "'deletionGracePeriodSeconds':30}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_OK);
    assert_int_equal(at, NOW + 30);
    json_object_put(p);
    /* A negative grace is no grace; a bad time is an error naming nothing
     * else of the pod. */
    p = J("{'metadata':{'deletionTimestamp':'2026-11-21T15:06:05Z',"
          "'deletionGracePeriodSeconds':-5}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_OK);
    assert_int_equal(at, NOW);
    json_object_put(p);
    p = J("{'metadata':{'deletionTimestamp':'yesterday'}}");
    assert_int_equal(gq_pod_deletion_deadline(p, &at, &e), GQ_EINVAL);
    json_object_put(p);

    assert_true(gq_pod_counts(false, 0, NOW));
    assert_false(gq_pod_counts(true, 0, NOW));
    /* Counted through the grace period, up to and including its last second. */
    assert_true(gq_pod_counts(false, NOW + 30, NOW));
    assert_true(gq_pod_counts(false, NOW + 30, NOW + 30));
    assert_false(gq_pod_counts(false, NOW + 30, NOW + 31));
    assert_false(gq_pod_counts(true, NOW + 30, NOW));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_table),
        cmocka_unit_test(test_quota_covers_namespace),
        cmocka_unit_test(test_quota_parse_errors),
        cmocka_unit_test(test_quota_parse_limits),
        cmocka_unit_test(test_quota_parse_ok),
        cmocka_unit_test(test_lr_parse_errors),
        cmocka_unit_test(test_lr_table),
        cmocka_unit_test(test_defaults_table),
        cmocka_unit_test(test_status_add_reservation),
        cmocka_unit_test(test_reservation_for_pod),
        cmocka_unit_test(test_status_drop_and_sum),
        cmocka_unit_test(test_quota_in_use_overflow),
        cmocka_unit_test(test_recount),
        cmocka_unit_test(test_recount_shared_claims),
        cmocka_unit_test(test_claims_once),
        cmocka_unit_test(test_pod_facts),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_amount_names),
        cmocka_unit_test(test_parse_models),
        cmocka_unit_test(test_evaluate_models),
        cmocka_unit_test(test_reservation_model_round_trip),
        cmocka_unit_test(test_recount_by_model),
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_pod_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
