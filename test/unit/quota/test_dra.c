/* DRA claim pricing (quota/dra.h) and the pod cost of DRA claims recorded
 * by gpuquota (GQ_ANN_CLAIMS, quota/podcost.h). Table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quota/config.h"
#include "quota/dra.h"
#include "common/jsonutil.h"
#include "quota/podcost.h"

#define GI (1024LL * 1024 * 1024)

static json_object *parse(const char *text)
{
    json_object *o = NULL;
    gq_err err;
    if (gq_json_parse(text, strlen(text), 32, &o, &err))
        fail_msg("bad test JSON: %s (%s)", err.msg, text);
    return o;
}

static gq_config *config(void)
{
    gq_config *cfg = NULL;
    gq_err err;
    const char *yaml = "deviceClasses:\n"
                       "  - {name: gpu.nvidia.com}\n"
                       "  - {name: h100.example.com, model: h100-80gb}\n";
    assert_int_equal(gq_config_parse(yaml, strlen(yaml), "t.yaml", &cfg, &err), GQ_OK);
    return cfg;
}

/* The DeviceClasses of the test cluster outside deviceClasses, read as the
 * webhook reads them (gq_device_class_kind). */
static const char *const test_classes[] = {
    "{\"metadata\":{\"name\":\"nic.example.com\"},\"spec\":{\"selectors\":[{\"cel\":{"
    "\"expression\":\"device.driver == 'nic.example.com'\"}}]}}",
    "{\"metadata\":{\"name\":\"mig.nvidia.com\"},\"spec\":{\"selectors\":[{\"cel\":{"
    "\"expression\":\"device.driver == \\\"gpu.nvidia.com\\\" && "
    "device.attributes[\\\"gpu.nvidia.com\\\"].type == \\\"mig\\\"\"}}]}}",
    "{\"metadata\":{\"name\":\"any.example.com\"},\"spec\":{}}",
    "{\"metadata\":{\"name\":\"either.example.com\"},\"spec\":{\"selectors\":[{\"cel\":{"
    "\"expression\":\"device.driver == 'nic.example.com' || device.driver == "
    "'gpu.nvidia.com'\"}}]}}",
};

static gq_config *g_lookup_cfg;

static gq_class_kind test_class_kind(void *ctx, const char *name)
{
    (void)ctx;
    for (size_t i = 0; i < sizeof(test_classes) / sizeof(test_classes[0]); i++) {
        json_object *dc = json_tokener_parse(test_classes[i]);
        assert_non_null(dc);
        const char *n = json_object_get_string(
            json_object_object_get(json_object_object_get(dc, "metadata"), "name"));
        gq_class_kind k =
            !strcmp(n, name) ? gq_device_class_kind(g_lookup_cfg, dc) : GQ_CLASS_UNKNOWN;
        bool found = !strcmp(n, name);
        json_object_put(dc);
        if (found)
            return k;
    }
    return gq_device_class_kind(g_lookup_cfg, NULL); /* no such class */
}

static const gq_class_lookup test_lookup = {NULL, test_class_kind};

#define REQ(body) "{\"devices\":{\"requests\":[" body "]}}"
#define SEL(prod)                                                                                  \
    "\"selectors\":[{\"cel\":{\"expression\":\"device.attributes[\\\"gpu.nvidia.com\\\"]"          \
    ".productName == \\\"" prod "\\\"\"}}]"

static const struct claim_case {
    const char *spec;
    gq_code rc;
    int64_t gpus, mem_gi;
    const char *model; /* NULL: none */
    const char *msg;   /* fragment of the error */
} claim_cases[] = {
    /* a class with a model: count devices of it */
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"h100.example.com\",\"count\":2}}"),
     GQ_OK, 2, 160, "h100-80gb", NULL},
    /* the model from the product a selector names (product or catalog name) */
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"," SEL(
         "NVIDIA-L4") "}}"),
     GQ_OK, 1, 24, "l4", NULL},
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"selectors\":[{"
         "\"cel\":{\"expression\":\"  "
         "device.attributes['gpu.nvidia.com'].productName=='a10'\"}}]}}"),
     GQ_OK, 1, 24, "a10", NULL},
    /* unknown model: priced as the largest of the catalog (h200, 141Gi) */
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}"), GQ_OK, 1, 141,
     NULL, NULL},
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"selectors\":[{"
         "\"cel\":{\"expression\":\"device.attributes['gpu.nvidia.com'].productName.startsWith('"
         "NVIDIA')\"}}]}}"),
     GQ_OK, 1, 141, NULL, NULL},
    /* a capacity request for memory is what each device costs */
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"h100.example.com\",\"count\":3,"
         "\"capacity\":{\"requests\":{\"memory\":\"10Gi\"}}}}"),
     GQ_OK, 3, 30, "h100-80gb", NULL},
    /* not a GPU class (its selector pins another driver): nothing */
    {REQ("{\"name\":\"n\",\"exactly\":{\"deviceClassName\":\"nic.example.com\",\"count\":4}}"),
     GQ_OK, 0, 0, NULL, NULL},
    /* a class outside deviceClasses that pins a GPU driver: GPUs (MIG
     * devices of no known size cost the largest model's memory) */
    {REQ("{\"name\":\"m\",\"exactly\":{\"deviceClassName\":\"mig.nvidia.com\",\"count\":4}}"),
     GQ_OK, 4, 4 * 141, NULL, NULL},
    /* a class that pins no driver: its request's own selector decides */
    {REQ("{\"name\":\"a\",\"exactly\":{\"deviceClassName\":\"any.example.com\",\"selectors\""
         ":[{\"cel\":{\"expression\":\"device.driver=='gpu.nvidia.com'\"}}]}}"),
     GQ_OK, 1, 141, NULL, NULL},
    /* otherwise gpuquota cannot tell: unpriced */
    {REQ("{\"name\":\"a\",\"exactly\":{\"deviceClassName\":\"any.example.com\"}}"), GQ_EUNSUPPORTED,
     0, 0, NULL,
     "request \"a\" asks for devices of DeviceClass any.example.com, and gpuquota cannot tell"},
    {REQ("{\"name\":\"e\",\"exactly\":{\"deviceClassName\":\"either.example.com\"}}"),
     GQ_EUNSUPPORTED, 0, 0, NULL, "cannot tell whether they are GPUs"},
    {REQ("{\"name\":\"x\",\"exactly\":{\"deviceClassName\":\"no-such.example.com\"}}"),
     GQ_EUNSUPPORTED, 0, 0, NULL, "DeviceClass no-such.example.com"},
    /* several requests add up; mixed models leave no single model */
    {REQ("{\"name\":\"a\",\"exactly\":{\"deviceClassName\":\"h100.example.com\"}},{\"name\":"
         "\"b\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"," SEL("NVIDIA-L4") "}}"),
     GQ_OK, 2, 104, NULL, NULL},
    /* firstAvailable: the dearest alternative */
    {REQ("{\"name\":\"f\",\"firstAvailable\":[{\"name\":\"small\",\"deviceClassName\":\"gpu."
         "nvidia.com\"," SEL("NVIDIA-L4") "},{\"name\":\"big\",\"deviceClassName\":\"h100."
                                          "example.com\",\"count\":2}]}"),
     GQ_OK, 2, 160, NULL, NULL},
    /* ...on each key apart: 7 H100s (560Gi) first, 4 of unknown model
     * (priced as the largest, 4 x 141Gi) second; the scheduler may pick
     * either, so 7 devices and 564Gi are charged (the whole price of one
     * alternative let 7 devices run charged 4) */
    {REQ("{\"name\":\"f\",\"firstAvailable\":[{\"name\":\"seven\",\"deviceClassName\":"
         "\"h100.example.com\",\"count\":7},{\"name\":\"four\",\"deviceClassName\":\"gpu."
         "nvidia.com\",\"count\":4}]}"),
     GQ_OK, 7, 564, NULL, NULL},
    /* the pre-v1 shape */
    {REQ("{\"name\":\"g\",\"deviceClassName\":\"h100.example.com\"}"), GQ_OK, 1, 80, "h100-80gb",
     NULL},
    /* refused */
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"allocationMode\":"
         "\"All\"}}"),
     GQ_EUNSUPPORTED, 0, 0, NULL,
     "request \"g\" asks for all devices of GPU class gpu.nvidia.com (allocationMode All)"},
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":0}}"),
     GQ_EINVAL, 0, 0, NULL, "count must be 1 to 128"},
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":129}}"),
     GQ_EINVAL, 0, 0, NULL, "count must be 1 to 128"},
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":7}}"), GQ_EINVAL, 0, 0, NULL,
     "deviceClassName must be a string"},
    {REQ("{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"capacity\":{"
         "\"requests\":{\"memory\":\"-1Gi\"}}}}"),
     GQ_EINVAL, 0, 0, NULL, "capacity.requests.memory must be a positive quantity"},
    {"{\"devices\":{\"requests\":{}}}", GQ_EINVAL, 0, 0, NULL,
     "spec.devices.requests must be a list"},
    {"[]", GQ_EINVAL, 0, 0, NULL, "spec must be an object"},
};

static void claim_table(void **state)
{
    (void)state;
    gq_config *cfg = config();
    for (size_t i = 0; i < sizeof(claim_cases) / sizeof(claim_cases[0]); i++) {
        const struct claim_case *c = &claim_cases[i];
        json_object *spec = parse(c->spec);
        gq_claim_cost cc = {-1, -1, NULL};
        gq_err err;
        gq_err_clear(&err);
        g_lookup_cfg = cfg;
        gq_code rc =
            gq_claim_spec_cost(cfg, spec, &test_lookup, "ResourceClaimTemplate \"t\"", &cc, &err);
        json_object_put(spec);
        if (rc != c->rc)
            fail_msg("case %zu: rc %d (%s), want %d", i, rc, err.msg, c->rc);
        if (rc) {
            if (!strstr(err.msg, c->msg) || strncmp(err.msg, "ResourceClaimTemplate \"t\": ", 27))
                fail_msg("case %zu: message \"%s\", want \"%s\"", i, err.msg, c->msg);
            assert_int_equal(cc.gpus, -1); /* untouched */
            continue;
        }
        if (cc.gpus != c->gpus || cc.gpu_memory != c->mem_gi * GI)
            fail_msg("case %zu: %lld GPUs %lld bytes, want %lld, %lld Gi", i, (long long)cc.gpus,
                     (long long)cc.gpu_memory, (long long)c->gpus, (long long)c->mem_gi);
        if (c->model)
            assert_string_equal(cc.model ? cc.model->name : "(none)", c->model);
        else
            assert_null(cc.model);
    }
    /* bounds */
    char big[8192];
    size_t len = (size_t)snprintf(big, sizeof(big), "{\"devices\":{\"requests\":[");
    for (int i = 0; i < GQ_DRA_MAX_REQUESTS + 1; i++)
        len += (size_t)snprintf(big + len, sizeof(big) - len,
                                "%s{\"name\":\"r%d\",\"exactly\":{\"deviceClassName\":\"x\"}}",
                                i ? "," : "", i);
    snprintf(big + len, sizeof(big) - len, "]}}");
    json_object *spec = parse(big);
    gq_claim_cost cc;
    gq_err err;
    assert_int_equal(gq_claim_spec_cost(cfg, spec, NULL, "c", &cc, &err), GQ_ELIMIT);
    json_object_put(spec);
    gq_config_free(cfg);
}

static void selector_forms(void **state)
{
    (void)state;
    static const struct {
        const char *expr, *product; /* product NULL: not the form */
    } cases[] = {
        {"device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA-A10\"", "NVIDIA-A10"},
        {"device.attributes['d'].productName=='x'", "x"},
        {" device.attributes[\"d\"].productName  ==  'H100' ", "H100"},
        {"device.attributes[\"d\"].productName == \"a\" && true", NULL},
        {"device.attributes[\"d\"].productName != \"a\"", NULL},
        {"device.attributes[\"\"].productName == \"a\"", NULL},
        {"device.attributes[\"d\"].productName == \"\"", NULL},
        {"device.attributes[\"d\"].productName == \"a\\\"b\"", NULL},
        {"device.attributes[\"d\"].productName == \"a", NULL},
        {"device.capacity[\"d\"].memory == \"a\"", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = NULL;
        size_t n = 0;
        bool ok = gq_dra_selector_product(cases[i].expr, &p, &n);
        if (ok != (cases[i].product != NULL) ||
            (ok && (n != strlen(cases[i].product) || strncmp(p, cases[i].product, n))))
            fail_msg("case %zu (%s): %d \"%.*s\"", i, cases[i].expr, ok, (int)n, p ? p : "");
    }
}

/* The driver a selector pins: only device.driver == "NAME", alone or as an
 * operand of &&, never inside an alternative or a negation. */
static void driver_forms(void **state)
{
    (void)state;
    static const struct {
        const char *expr, *driver; /* driver NULL: pins none gpuquota reads */
    } cases[] = {
        {"device.driver == \"gpu.nvidia.com\"", "gpu.nvidia.com"},
        {"device.driver=='gpu.nvidia.com'", "gpu.nvidia.com"},
        {"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
         "gpu.nvidia.com"},
        {"device.attributes['x'].y == 1 && device.driver == 'n.example.com'", "n.example.com"},
        {"(device.driver == 'n.example.com')", "n.example.com"},
        {"device.driver == 'a' || device.driver == 'b'", NULL},
        {"!(device.driver == 'a')", NULL},
        {"device.driver != 'a'", NULL},
        {"device.driver.startsWith('gpu')", NULL},
        {"mydevice.driver == 'a'", NULL},
        {"device.driver == ''", NULL},
        {"device.driver == 'a' + 'b'", NULL},
        {"", NULL},
        /* forms that name a driver and are true for others (a tenant's
         * request selector deciding its GPUs are a NIC's) */
        {"(device.driver == 'nic.example.com') == false", NULL},
        {"[].all(x, device.driver == 'nic.example.com')", NULL},
        {"(device.driver == 'nic.example.com') ? false : true", NULL},
        {"device.driver == 'nic.example.com' ? false : true", NULL},
        {"'device.driver == \\'nic\\')' != '' && true", NULL},
        {"device.driver == 'nic.example.com' && true || true", NULL},
        {"true && (device.driver == 'a' || true)", NULL},
        {"size([device.driver == 'a']) > 0", NULL},
        {"((device.driver == 'n.example.com')) && ((true))", "n.example.com"},
        {"(device.driver == 'a') && (device.driver == 'b')", "a"},
        {"device.driver == 'a' && ')' == ')'", "a"},
        {"(device.driver == 'a'", NULL},
        {"device.driver == 'a')", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = NULL;
        size_t n = 0;
        bool ok = gq_dra_selector_driver(cases[i].expr, &p, &n);
        if (ok != (cases[i].driver != NULL) ||
            (ok && (n != strlen(cases[i].driver) || strncmp(p, cases[i].driver, n))))
            fail_msg("case %zu (%s): %d \"%.*s\"", i, cases[i].expr, ok, (int)n, p ? p : "");
    }
}

/* A managed pod (label and records written by gpuquota: no managedFields
 * name them) with claims; ann is the GQ_ANN_CLAIMS text or NULL. */
static void pod_cost(const gq_config *cfg, const char *claims, const char *ann,
                     const char *user_set, gq_pod_cost *out)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"p\",\"labels\":{\"gpuquota.io/managed\":\"true\"},"
             "\"annotations\":{%s%s%s}%s},\"spec\":{\"containers\":[{\"name\":\"c\"}],"
             "\"resourceClaims\":%s}}",
             ann ? "\"gpuquota.io/gpu-claims\":\"" : "", ann ? ann : "", ann ? "\"" : "",
             user_set ? user_set : "", claims);
    json_object *pod = parse(text);
    gq_err err;
    gq_pod_cost_init(out);
    if (gq_pod_cost_compute(cfg, pod, out, &err))
        fail_msg("pod cost: %s", err.msg);
    json_object_put(pod);
}

static void pod_claims(void **state)
{
    (void)state;
    gq_config *cfg = config();
    gq_pod_cost c;
    const char *two = "[{\"name\":\"a\",\"resourceClaimTemplateName\":\"t\"},{\"name\":\"b\","
                      "\"resourceClaimTemplateName\":\"u\"}]";
    /* both recorded: devices and memory added, one model pins the pod */
    pod_cost(
        cfg, two,
        "{\\\"a\\\":{\\\"gpus\\\":2,\\\"memory\\\":\\\"160Gi\\\",\\\"model\\\":\\\"h100-80gb\\\"},"
        "\\\"b\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"80Gi\\\",\\\"model\\\":\\\"h100-80gb\\\"}}",
        NULL, &c);
    assert_false(c.claims_unpriced);
    assert_int_equal(c.gpus, 3);
    assert_int_equal(c.gpu_memory, 240 * GI);
    assert_int_equal(c.gpu_pods, 1);
    assert_int_equal(c.claim_gpus, 3);
    assert_true(c.model_pinned);
    assert_string_equal(c.model->name, "h100-80gb");
    gq_pod_cost_dispose(&c);
    /* one entry without a record: unpriced, the other still counted */
    pod_cost(cfg, two, "{\\\"a\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"24Gi\\\"}}", NULL, &c);
    assert_true(c.claims_unpriced);
    assert_int_equal(c.gpus, 1);
    assert_false(c.model_pinned);
    gq_pod_cost_dispose(&c);
    /* no record, a malformed one, or one the author wrote: unpriced, free of charge
     * here (the validating webhook refuses it where a quota governs) */
    const char *bad[] = {NULL, "{\\\"a\\\":{\\\"gpus\\\":-1,\\\"memory\\\":\\\"1Gi\\\"}}",
                         "{\\\"a\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"1Gi\\\",\\\"model\\\":"
                         "\\\"nope\\\"}}",
                         "not json"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pod_cost(cfg, "[{\"name\":\"a\",\"resourceClaimTemplateName\":\"t\"}]", bad[i], NULL, &c);
        assert_true(c.claims_unpriced);
        assert_int_equal(c.gpus, 0);
        gq_pod_cost_dispose(&c);
    }
    pod_cost(cfg, "[{\"name\":\"a\",\"resourceClaimTemplateName\":\"t\"}]",
             "{\\\"a\\\":{\\\"gpus\\\":0,\\\"memory\\\":\\\"0\\\"}}",
             ",\"managedFields\":[{\"manager\":\"kubectl\",\"fieldsV1\":{\"f:metadata\":{"
             "\"f:annotations\":{\"f:gpuquota.io/gpu-claims\":{}}}}}]",
             &c);
    assert_true(c.claims_unpriced);
    gq_pod_cost_dispose(&c);
    gq_config_free(cfg);
}

/* A ResourceClaim named directly: its record carries the claim's name and
 * uid, the pod cost lists it as shared (included in the totals); a record
 * naming only one of them, or the author's copy, prices nothing. */
static void pod_shared_claims(void **state)
{
    (void)state;
    gq_config *cfg = config();
    gq_pod_cost c;
    const char *two = "[{\"name\":\"a\",\"resourceClaimName\":\"pair\"},{\"name\":\"b\","
                      "\"resourceClaimTemplateName\":\"u\"}]";
    pod_cost(cfg, two,
             "{\\\"a\\\":{\\\"gpus\\\":2,\\\"memory\\\":\\\"160Gi\\\",\\\"model\\\":"
             "\\\"h100-80gb\\\",\\\"claim\\\":\\\"pair\\\",\\\"uid\\\":\\\"u-1\\\"},"
             "\\\"b\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"80Gi\\\",\\\"model\\\":"
             "\\\"h100-80gb\\\"}}",
             NULL, &c);
    assert_false(c.claims_unpriced);
    assert_int_equal(c.gpus, 3);
    assert_int_equal(c.gpu_memory, 240 * GI);
    assert_int_equal(c.n_shared, 1);
    assert_string_equal(c.shared[0].uid, "u-1");
    assert_string_equal(c.shared[0].name, "pair");
    assert_int_equal(c.shared[0].gpus, 2);
    assert_int_equal(c.shared[0].memory, 160 * GI);
    assert_string_equal(c.shared[0].model->name, "h100-80gb");
    assert_string_equal(c.model->name, "h100-80gb");
    gq_pod_cost_dispose(&c);
    const char *one = "[{\"name\":\"a\",\"resourceClaimName\":\"pair\"}]";
    const char *bad[] = {
        "{\\\"a\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"1Gi\\\",\\\"claim\\\":\\\"pair\\\"}}",
        "{\\\"a\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"1Gi\\\",\\\"uid\\\":\\\"u\\\"}}",
        "{\\\"a\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"1Gi\\\",\\\"claim\\\":\\\"pair\\\","
        "\\\"uid\\\":\\\"\\\"}}",
        "{\\\"a\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"1Gi\\\",\\\"claim\\\":7,"
        "\\\"uid\\\":\\\"u\\\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pod_cost(cfg, one, bad[i], NULL, &c);
        assert_true(c.claims_unpriced);
        assert_int_equal(c.gpus, 0);
        assert_int_equal(c.n_shared, 0);
        gq_pod_cost_dispose(&c);
    }
    /* the author wrote the record: not trusted */
    pod_cost(cfg, one,
             "{\\\"a\\\":{\\\"gpus\\\":0,\\\"memory\\\":\\\"0\\\",\\\"claim\\\":\\\"pair\\\","
             "\\\"uid\\\":\\\"u-1\\\"}}",
             ",\"managedFields\":[{\"manager\":\"kubectl\",\"fieldsV1\":{\"f:metadata\":{"
             "\"f:annotations\":{\"f:gpuquota.io/gpu-claims\":{}}}}}]",
             &c);
    assert_true(c.claims_unpriced);
    assert_int_equal(c.n_shared, 0);
    gq_pod_cost_dispose(&c);
    gq_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_table),       cmocka_unit_test(selector_forms),
        cmocka_unit_test(driver_forms),      cmocka_unit_test(pod_claims),
        cmocka_unit_test(pod_shared_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
