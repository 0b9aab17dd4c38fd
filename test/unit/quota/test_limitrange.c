/* GPULimitRanges (quota/policy.h): a pod's containers and the pod validated
 * against min, max, ratio and allowed models (table), and the defaults that
 * fill a container that asks for nothing (table). */
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
    {"a long model list is cut where the message is",
     {GLR("l", "{'type':'Pod','allowedModels':['model-00-with-a-long-name','model-01-with-a-long-"
               "name','model-02-with-a-long-name','model-03-with-a-long-name','model-04-with-a-"
               "long-name','model-05-with-a-long-name','model-06-with-a-long-name','model-07-"
               "with-a-long-name','model-08-with-a-long-name','model-09-with-a-long-name','model-"
               "10-with-a-long-name','model-11-with-a-long-name']}")},
     {{GQ_CTR_APP, 1, 4, GQ_FORM_MEMORY}},
     1,
     0,
     "t4",
     "GPU model \"t4\" is not allowed in namespace \"x\"; allowed: model-00-with-a-long-name, "
     "model-01-with-a-long-name, model-02-with-a-long-name, model-03-with-a-long-name, "
     "model-04-with-a-long-name, model-0"},
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

/* A list of GPULimitRanges parses whole or not at all, and says which item
 * failed. */
static void test_lr_list(void **state)
{
    (void)state;
    gq_limit_range **lrs = (gq_limit_range **)1;
    size_t n = 7, bad = 0;
    gq_err e;
    assert_int_equal(gq_limit_range_list_parse(NULL, &lrs, &n, &bad, &e), GQ_OK);
    assert_null(lrs);
    assert_int_equal(n, 0);
    json_object *two = J("[" GLR("a", "{'type':'Container','max':{'gpu-memory':'8Gi'}}") "," GLR(
        "b", "{'type':'Pod','max':{'gpu-memory':'16Gi'}}") "]");
    assert_int_equal(gq_limit_range_list_parse(two, &lrs, &n, &bad, &e), GQ_OK);
    assert_int_equal(n, 2);
    assert_string_equal(lrs[0]->name, "a");
    assert_string_equal(lrs[1]->name, "b");
    gq_limit_range_list_free(lrs, n);
    json_object_put(two);
    json_object *broken = J("[" GLR("a", "{'type':'Container'}") "," GLR(
        "b", "{'type':'Container','max':{'gpu-memory':'x'}}") "]");
    lrs = NULL;
    n = 7;
    assert_int_equal(gq_limit_range_list_parse(broken, &lrs, &n, &bad, &e), GQ_EINVAL);
    assert_int_equal(bad, 1);
    assert_null(lrs);
    assert_int_equal(n, 7);
    json_object_put(broken);
    json_object *obj = J("{'a':1}");
    assert_int_equal(gq_limit_range_list_parse(obj, &lrs, &n, &bad, &e), GQ_EINVAL);
    assert_int_equal(bad, SIZE_MAX);
    json_object_put(obj);
    gq_limit_range_list_free(NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_table),
        cmocka_unit_test(test_defaults_table),
        cmocka_unit_test(test_lr_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
