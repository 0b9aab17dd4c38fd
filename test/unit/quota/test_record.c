/* The admission record (quota/record.h) and the pod that exists, decoded
 * once (quota/pod.h): the record's text round trip, its refusals, the
 * legacy line, and what a decoded pod counts whatever its tenant changed
 * after admission. JSON is written with single quotes for readability. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "quota/pod.h"
#include "quota/record.h"

#define GI (1024LL * 1024 * 1024)

static gq_config *g_cfg;

static int setup(void **state)
{
    (void)state;
    gq_err err;
    return gq_config_default(&g_cfg, &err) == GQ_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gq_config_free(g_cfg);
    return 0;
}

static void record_round_trip(void **state)
{
    (void)state;
    static const struct {
        int64_t mem, gpus;
        const char *model;
        bool terminating;
        const char *text;
    } t[] = {
        {20 * GI, 0, "a100-80gb", false,
         "{\"charge\":{\"gpu-memory\":\"20Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\"},\"model\":"
         "\"a100-80gb\",\"scope\":\"NotTerminating\"}"},
        {640 * GI, 8, NULL, true,
         "{\"charge\":{\"gpu-memory\":\"640Gi\",\"gpu-pods\":\"1\",\"gpus\":\"8\"},\"scope\":"
         "\"Terminating\"}"},
        {1536LL * 1024 * 1024, 0, "", false,
         "{\"charge\":{\"gpu-memory\":\"1536Mi\",\"gpu-pods\":\"1\",\"gpus\":\"0\"},\"scope\":"
         "\"NotTerminating\"}"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        gq_pod_cost cost;
        gq_pod_cost_init(&cost);
        cost.gpu_memory = t[i].mem;
        cost.gpus = t[i].gpus;
        cost.gpu_pods = 1;
        gq_pod_record r, back;
        char text[GQ_RECORD_MAX];
        gq_pod_record_make(&cost, t[i].model, t[i].terminating, &r);
        gq_pod_record_format(&r, text);
        assert_string_equal(text, t[i].text);
        gq_err err;
        assert_int_equal(gq_pod_record_parse(text, strlen(text), &back, &err), GQ_OK);
        assert_true(gq_pod_record_equal(&r, &back));
        assert_false(back.legacy);
    }
    /* A model name longer than a record holds is recorded as none. */
    gq_pod_cost cost;
    gq_pod_cost_init(&cost);
    gq_pod_record r;
    char longname[100];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    gq_pod_record_make(&cost, longname, false, &r);
    assert_string_equal(r.model, "");
    /* Unknown members are ignored: a later version may add some. */
    const char *later = "{'charge':{'gpu-memory':'1Gi','gpu-pods':'1','gpus':'0'},'scope':"
                        "'NotTerminating','claims':[]}";
    json_object *o = J(later);
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    assert_int_equal(gq_pod_record_parse(s, strlen(s), &r, NULL), GQ_OK);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], GI);
    json_object_put(o);
}

static void record_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        gq_code rc;
        const char *msg;
    } t[] = {
        {"", GQ_EINVAL, "empty"},
        {"[]", GQ_EINVAL, "must be a JSON object"},
        {"{'scope':'NotTerminating'}", GQ_EINVAL, "charge: required"},
        {"{'charge':{'gpu-memory':'1Gi','gpus':'0'},'scope':'NotTerminating'}", GQ_EINVAL,
         "every quota key is required"},
        {"{'charge':{'gpu-memory':'-1Gi','gpu-pods':'1','gpus':'0'},'scope':'NotTerminating'}",
         GQ_EINVAL, "gpu-memory"},
        {"{'charge':{'gpu-memory':'1Gi','gpu-pods':'1','gpus':'0','cpu':'1'},'scope':"
         "'NotTerminating'}",
         GQ_EINVAL, "cpu"},
        {"{'charge':{'gpu-memory':'1Gi','gpu-pods':'1','gpus':'0'}}", GQ_EINVAL, "scope: required"},
        {"{'charge':{'gpu-memory':'1Gi','gpu-pods':'1','gpus':'0'},'scope':'Sometimes'}", GQ_EINVAL,
         "neither NotTerminating nor Terminating"},
        {"{'charge':{'gpu-memory':'1Gi','gpu-pods':'1','gpus':'0'},'scope':'Terminating',"
         "'model':7}",
         GQ_EINVAL, "model: must be a string"},
        {"{'charge':{'gpu-memory':'1Gi','gpu-pods':'1','gpus':'0'},'scope':'Terminating',"
         "'model':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}",
         GQ_EINVAL, "model: longer than"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char text[GQ_RECORD_MAX];
        snprintf(text, sizeof(text), "%s", t[i].text);
        for (char *p = text; *p; p++)
            if (*p == '\'')
                *p = '"';
        gq_pod_record r;
        memset(&r, 0x5a, sizeof(r));
        gq_pod_record before = r;
        gq_err err;
        gq_err_clear(&err);
        assert_int_equal(gq_pod_record_parse(text, strlen(text), &r, &err), t[i].rc);
        if (!strstr(err.msg, t[i].msg))
            fail_msg("%s: message [%s] lacks [%s]", t[i].text, err.msg, t[i].msg);
        assert_memory_equal(&r, &before, sizeof(r)); /* written only on success */
    }
    /* Past the cap: refused before parsing. */
    char big[GQ_RECORD_MAX + 2];
    memset(big, ' ', sizeof(big));
    gq_pod_record r;
    assert_int_equal(gq_pod_record_parse(big, sizeof(big), &r, NULL), GQ_ELIMIT);
}

static json_object *pod_with(const char *annotations)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{'metadata':{'name':'p','namespace':'a','annotations':%s},'spec':{'containers':"
             "[{'name':'c','resources':{'limits':{'aliyun.com/gpu-mem':'4'}}}]}}",
             annotations);
    return J(buf);
}

/* gq_pod_record_read: the record, else an older version's charged line;
 * either wrong is an error naming its annotation. */
static void record_read_and_legacy(void **state)
{
    (void)state;
    gq_pod_record r;
    gq_err err;
    json_object *none = pod_with("{}");
    assert_int_equal(gq_pod_record_read(none, &r, &err), GQ_ENOTFOUND);
    assert_int_equal(gq_pod_stored_trust(none), GQ_TRUST_SPEC);
    json_object_put(none);

    json_object *legacy = pod_with("{'gpuquota.io/charged':'gpu-memory=4Gi,gpus=0,gpu-pods=1'}");
    assert_int_equal(gq_pod_record_read(legacy, &r, &err), GQ_OK);
    assert_true(r.legacy);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    assert_int_equal(r.charge.v[GQ_KEY_GPU_PODS], 1);
    assert_int_equal(gq_pod_stored_trust(legacy), GQ_TRUST_RECORDS);
    json_object_put(legacy);

    static const char *const bad_lines[] = {
        "gpu-memory=4Gi,gpus=0",
        "gpu-memory=4Gi,gpus=0,gpu-pods=1,gpus=1",
        "gpu-memory=4Gi,gpus=x,gpu-pods=1",
        "gpu-memory,gpus=0,gpu-pods=1",
        "=4Gi,gpus=0,gpu-pods=1",
        "cpu=1,gpu-memory=4Gi,gpus=0,gpu-pods=1",
    };
    for (size_t i = 0; i < sizeof(bad_lines) / sizeof(bad_lines[0]); i++) {
        char ann[256];
        snprintf(ann, sizeof(ann), "{'gpuquota.io/charged':'%s'}", bad_lines[i]);
        json_object *pod = pod_with(ann);
        gq_err_clear(&err);
        if (gq_pod_record_read(pod, &r, &err) == GQ_OK)
            fail_msg("line [%s] was read", bad_lines[i]);
        assert_non_null(strstr(err.msg, "annotation gpuquota.io/charged"));
        assert_int_equal(gq_pod_stored_trust(pod), GQ_TRUST_SPEC);
        json_object_put(pod);
    }
    json_object *bad = pod_with("{'gpuquota.io/admission':'{}'}");
    gq_err_clear(&err);
    assert_int_equal(gq_pod_record_read(bad, &r, &err), GQ_EINVAL);
    assert_non_null(strstr(err.msg, "annotation gpuquota.io/admission"));
    json_object_put(bad);
}

/* A decoded pod counts what its record says, in the scope and against the
 * model it records; a pod without one counts its container resources. */
static void decode_counts_the_record(void **state)
{
    (void)state;
    gq_pod p;
    gq_err err;
    gq_pod_init(&p);
    /* Recorded 8Gi pinned to h100, NotTerminating; since then the tenant
     * added a KAI request, a deadline and managedFields owning our keys. */
    json_object *pod =
        J("{'metadata':{'name':'p','namespace':'a','creationTimestamp':'2026-11-21T15:06:05Z',"
          "'labels':{'gpuquota.io/managed':'true'},'annotations':{'gpuquota.io/gpu-model':"
          "'h100-80gb','gpu-memory':'1048576'},'managedFields':[{'manager':'kubectl','fieldsV1':{"
          "'f:metadata':{"
          "'f:annotations':{'f:gpuquota.io/admission':{},'f:gpuquota.io/gpu-model':{}}}}}]},"
          "'spec':{'activeDeadlineSeconds':5,'priority':7,'containers':[{'name':'c','resources':"
          "{'limits':{'aliyun.com/gpu-mem':'8'}}}]}}");
    json_object_object_add(
        json_object_object_get(json_object_object_get(pod, "metadata"), "annotations"),
        GQ_ANN_ADMISSION,
        json_object_new_string("{\"charge\":{\"gpu-memory\":\"8Gi\",\"gpu-pods\":\"1\","
                               "\"gpus\":\"0\"},\"model\":\"h100-80gb\",\"scope\":"
                               "\"NotTerminating\"}"));
    assert_int_equal(gq_pod_decode(g_cfg, pod, &(gq_pod_scope){0}, &p, &err), GQ_OK);
    assert_true(p.recorded);
    assert_int_equal(p.charge.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_string_equal(p.facts.model, "h100-80gb");
    assert_false(p.facts.terminating);
    assert_string_equal(p.facts.namespace_, "a");
    assert_int_equal(p.priority, 7);
    assert_int_equal(p.gate_index, -1);
    assert_true(p.created_us > 0);
    json_object_put(pod);

    /* Never admitted: container resources only (aliyun units of 1Gi), no
     * annotation believed, the live scope. */
    pod = J("{'metadata':{'name':'p','namespace':'a','annotations':{'gpuquota.io/gpu-model':"
            "'h100-80gb','gpu-memory':'1048576'}},'spec':{'activeDeadlineSeconds':5,"
            "'containers':[{'name':'c','resources':{'limits':{'aliyun.com/gpu-mem':'3'}}}]}}");
    assert_int_equal(gq_pod_decode(g_cfg, pod, &(gq_pod_scope){.ns = "b"}, &p, &err), GQ_OK);
    assert_false(p.recorded);
    assert_int_equal(p.charge.v[GQ_KEY_GPU_MEMORY], 3 * GI);
    assert_null(p.facts.model);
    assert_true(p.facts.terminating);
    assert_string_equal(p.facts.namespace_, "b");
    json_object_put(pod);

    /* CPU-only, a request annotation written afterwards: counts nothing. */
    pod = J("{'metadata':{'name':'p','namespace':'a','annotations':{'gpu-memory':'1048576',"
            "'gpu-fraction':'1'}},'spec':{'containers':[{'name':'c'}]}}");
    assert_int_equal(gq_pod_decode(g_cfg, pod, &(gq_pod_scope){0}, &p, &err), GQ_OK);
    assert_int_equal(p.charge.v[GQ_KEY_GPU_PODS], 0);
    assert_int_equal(p.charge.v[GQ_KEY_GPU_MEMORY], 0);
    json_object_put(pod);

    /* Under admission: every request form, never terminal whatever status
     * the client sent (kube-apiserver makes it Pending before /validate). */
    pod = J("{'metadata':{'name':'p','namespace':'a','annotations':{'gpu-memory':'4096'}},"
            "'spec':{'containers':[{'name':'c'}]},'status':{'phase':'Succeeded'}}");
    assert_int_equal(
        gq_pod_decode(g_cfg, pod, &(gq_pod_scope){.ns = "a", .admission = true}, &p, &err), GQ_OK);
    assert_false(p.recorded);
    assert_false(p.facts.terminal);
    assert_int_equal(p.charge.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    assert_int_equal(p.charge.v[GQ_KEY_GPU_PODS], 1);
    assert_int_equal(p.cost.n_ctrs, 1);
    json_object_put(pod);
    /* A request it cannot price and a wrong type among the facts: the
     * pricing error is the one given. */
    pod = J("{'metadata':{'name':'p','namespace':'a'},'spec':{'activeDeadlineSeconds':'60',"
            "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpu':'1.5'}}}]}}");
    assert_int_equal(
        gq_pod_decode(g_cfg, pod, &(gq_pod_scope){.ns = "a", .admission = true}, &p, &err),
        GQ_EINVAL);
    assert_non_null(strstr(err.msg, "nvidia.com/gpu"));
    json_object_put(pod);

    /* Never admitted and not priceable: an error, *out untouched. */
    pod = J("{'metadata':{'name':'p','namespace':'a'},'spec':{'containers':[{'name':'c',"
            "'resources':{'limits':{'nvidia.com/gpu':'1.5'}}}]}}");
    gq_pod before = p;
    assert_int_equal(gq_pod_decode(g_cfg, pod, &(gq_pod_scope){0}, &p, &err), GQ_EINVAL);
    assert_memory_equal(&p, &before, sizeof(p));
    json_object_put(pod);
    gq_pod_dispose(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(record_round_trip),
        cmocka_unit_test(record_refusals),
        cmocka_unit_test(record_read_and_legacy),
        cmocka_unit_test(decode_counts_the_record),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
