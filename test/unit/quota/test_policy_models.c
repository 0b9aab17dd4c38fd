/* Per-model limits and a choice of models (quota/policy.h): parsing them,
 * evaluating a pod of a model, the model kept in a reservation, the recount
 * by model and choosing the model a pod runs on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_fixtures.h"

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
    json_object *o = usage_member(q, &u, "usedByModel");
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
    /* Many refusals: the message is cut at the error's size, every byte
     * before the cut as the whole text has it. */
    gq_model_option many[6];
    char whole[2048] = "no accepted GPU model fits: ";
    for (size_t i = 0; i < 6; i++) {
        many[i] = (gq_model_option){"a100-80gb", charge_gi(41)};
        snprintf(whole + strlen(whole), sizeof(whole) - strlen(whole),
                 "%sa100-80gb: exceeded quota: team-a, requested: a100-80gb/gpu-memory=41Gi, "
                 "used: a100-80gb/gpu-memory=32Gi, limited: a100-80gb/gpu-memory=40Gi",
                 i ? "; " : "");
    }
    assert_int_equal(gq_model_choose(many, 6, &both, &f, &chosen, &err), GQ_EDENIED);
    assert_int_equal(strlen(err.msg), GQ_ERR_MSG_MAX - 1);
    assert_memory_equal(err.msg, whole, GQ_ERR_MSG_MAX - 1);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_models),
        cmocka_unit_test(test_evaluate_models),
        cmocka_unit_test(test_reservation_model_round_trip),
        cmocka_unit_test(test_recount_by_model),
        cmocka_unit_test(test_choose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
