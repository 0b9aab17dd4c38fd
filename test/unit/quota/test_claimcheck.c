/* The claims a pod runs on are the claims it was charged for
 * (quota/claimcheck.h): which claims a pod's record charged, the verdict on
 * each live claim (a named claim made again, a template's claim asking more
 * than was charged, one being deleted, one not made yet) and the merge
 * patch that pins and unpins a claim. JSON is written with single quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "common/json_member.h"
#include "quota/claimcheck.h"

static gq_config *g_cfg;

static int setup(void **state)
{
    (void)state;
    gq_err err;
    const char *yaml = "deviceClasses:\n  - {name: gpu.nvidia.com}\n";
    return gq_config_parse(yaml, strlen(yaml), "t.yaml", &g_cfg, &err) == GQ_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gq_config_free(g_cfg);
    return 0;
}

/* A pod (uid pod-1) naming claim "shared" (ResourceClaim c, uid u-c, one
 * H100) and "own" (template t, 2 H100s), with status as given. */
#define RECORD                                                                                     \
    "'{\\'shared\\':{\\'gpus\\':1,\\'memory\\':\\'80Gi\\',\\'model\\':\\'h100-80gb\\',"            \
    "\\'claim\\':\\'c\\',\\'uid\\':\\'u-c\\'},\\'own\\':{\\'gpus\\':2,\\'memory\\':\\'160Gi\\',"   \
    "\\'model\\':\\'h100-80gb\\'}}'"
static json_object *pod(const char *status)
{
    char buf[2048];
    snprintf(buf, sizeof buf,
             "{'metadata':{'name':'p','uid':'pod-1','annotations':{'gpuquota.io/gpu-claims':"
             "%s}},'spec':{'resourceClaims':[{'name':'shared','resourceClaimName':'c'},"
             "{'name':'own','resourceClaimTemplateName':'t'},{'name':'nic',"
             "'resourceClaimTemplateName':'n'}]},'status':%s}",
             RECORD, status);
    return J(buf);
}

#define H100(n)                                                                                    \
    "{'devices':{'requests':[{'name':'g','exactly':{'deviceClassName':'gpu.nvidia.com',"           \
    "'count':" #n ",'selectors':[{'cel':{'expression':'device.attributes[\\'gpu.nvidia.com\\']"    \
    ".productName == \\'NVIDIA-H100-80GB-HBM3\\''}}]}}]}}"

static void uses_follow_the_record(void **state)
{
    (void)state;
    gq_claim_use u[GQ_POD_MAX_CLAIMS];
    size_t n = 99;
    gq_err err;
    json_object *p = pod("{}");
    assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_OK);
    assert_int_equal(n, 2); /* "nic" has no record: nothing charged to check */
    assert_string_equal(u[0].entry, "shared");
    assert_string_equal(u[0].claim, "c");
    assert_false(u[0].generated);
    assert_string_equal(u[0].rec.uid, "u-c");
    assert_string_equal(u[1].entry, "own");
    assert_string_equal(u[1].claim, ""); /* not made yet */
    assert_true(u[1].generated);
    assert_int_equal(u[1].rec.gpus, 2);
    json_object_put(p);

    p = pod("{'resourceClaimStatuses':[{'name':'own','resourceClaimName':'p-own-x1'}]}");
    assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_OK);
    assert_string_equal(u[1].claim, "p-own-x1");
    assert_false(u[1].unneeded);
    json_object_put(p);

    p = pod("{'resourceClaimStatuses':[{'name':'own'}]}"); /* no claim needed */
    assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_OK);
    assert_true(u[1].unneeded);
    json_object_put(p);

    p = J("{'metadata':{'uid':'x'},'spec':{'resourceClaims':[{'name':'a','resourceClaimName':"
          "'c'}]}}");
    assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_OK);
    assert_int_equal(n, 0); /* no record: never gated */
    json_object_put(p);

    /* a record that is not gpuquota's: the pod cannot be checked */
    static const char *const bad[] = {
        "'not json'",
        "'[1]'",
        /* a named claim recorded without its uid */
        "'{\\'a\\':{\\'gpus\\':1,\\'memory\\':\\'80Gi\\'}}'",
        /* an unknown model */
        "'{\\'a\\':{\\'gpus\\':1,\\'memory\\':\\'80Gi\\',\\'model\\':\\'nope\\',\\'claim\\':"
        "\\'c\\',\\'uid\\':\\'u\\'}}'",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf,
                 "{'metadata':{'uid':'x','annotations':{'gpuquota.io/gpu-claims':%s}},"
                 "'spec':{'resourceClaims':[{'name':'a','resourceClaimName':'c'}]}}",
                 bad[i]);
        p = J(buf);
        gq_err_clear(&err);
        assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_EINVAL);
        assert_non_null(strstr(err.msg, "gpu-claims"));
        json_object_put(p);
    }
}

static gq_claim_verdict verify(const gq_claim_use *u, const char *claim, char *why)
{
    json_object *c = claim ? J(claim) : NULL;
    gq_claim_verdict v = gq_claim_verify(g_cfg, "pod-1", u, c, NULL, why, 512);
    json_object_put(c);
    return v;
}

static void named_claim_by_uid(void **state)
{
    (void)state;
    gq_claim_use u[GQ_POD_MAX_CLAIMS];
    size_t n;
    gq_err err;
    char why[512];
    json_object *p = pod("{}");
    assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_OK);
    json_object_put(p);
    assert_int_equal(verify(&u[0], "{'metadata':{'name':'c','uid':'u-c'},'spec':" H100(1) "}", why),
                     GQ_CLAIM_MATCHES);
    /* made again under its name, asking 8: another uid */
    assert_int_equal(
        verify(&u[0], "{'metadata':{'name':'c','uid':'u-new'},'spec':" H100(8) "}", why),
        GQ_CLAIM_REFUSED);
    assert_non_null(strstr(why, "uid u-new, charged uid u-c"));
    /* even asking the same: not the claim charged (a shared claim's
     * charge is keyed by its uid) */
    assert_int_equal(verify(&u[0], "{'metadata':{'name':'c','uid':'u-2'},'spec':" H100(1) "}", why),
                     GQ_CLAIM_REFUSED);
    assert_int_equal(verify(&u[0], NULL, why), GQ_CLAIM_WAIT); /* deleted: may come back */
    assert_int_equal(verify(&u[0],
                            "{'metadata':{'name':'c','uid':'u-c','deletionTimestamp':"
                            "'2026-01-01T00:00:00Z'},'spec':" H100(1) "}",
                            why),
                     GQ_CLAIM_REFUSED);
    assert_non_null(strstr(why, "being deleted"));
}

static void template_claim_by_owner_and_price(void **state)
{
    (void)state;
    gq_claim_use u[GQ_POD_MAX_CLAIMS];
    size_t n;
    gq_err err;
    char why[512];
    json_object *p = pod("{'resourceClaimStatuses':[{'name':'own','resourceClaimName':'g'}]}");
    assert_int_equal(gq_pod_claim_uses(g_cfg, p, u, &n, &err), GQ_OK);
    json_object_put(p);
#define OWNED(uid) "'ownerReferences':[{'kind':'Pod','name':'p','uid':'" uid "','controller':true}]"
    assert_int_equal(
        verify(&u[1], "{'metadata':{'name':'g','uid':'g1'," OWNED("pod-1") "},'spec':" H100(2) "}",
               why),
        GQ_CLAIM_MATCHES);
    assert_int_equal(
        verify(&u[1], "{'metadata':{'name':'g','uid':'g1'," OWNED("pod-1") "},'spec':" H100(1) "}",
               why),
        GQ_CLAIM_MATCHES); /* less than charged */
    /* the template was replaced before the claim was made: 8 devices */
    assert_int_equal(
        verify(&u[1], "{'metadata':{'name':'g','uid':'g1'," OWNED("pod-1") "},'spec':" H100(8) "}",
               why),
        GQ_CLAIM_REFUSED);
    assert_non_null(strstr(why, "asks 8 GPUs"));
    assert_non_null(strstr(why, "charged 2"));
    /* another model than charged (an A100 is dearer under another quota) */
    assert_int_equal(verify(&u[1],
                            "{'metadata':{'name':'g','uid':'g1'," OWNED(
                                "pod-1") "},'spec':{'devices':{"
                                         "'requests':[{'name':'g','exactly':{'deviceClassName':'"
                                         "gpu.nvidia.com','count':1,"
                                         "'selectors':[{'cel':{'expression':'device.attributes[\\'"
                                         "gpu.nvidia.com\\']"
                                         ".productName == \\'NVIDIA-A100-SXM4-80GB\\''}}]}}]}}}",
                            why),
                     GQ_CLAIM_REFUSED);
    /* a claim of another pod, or of nobody */
    assert_int_equal(
        verify(&u[1], "{'metadata':{'name':'g','uid':'g1'," OWNED("pod-2") "},'spec':" H100(1) "}",
               why),
        GQ_CLAIM_REFUSED);
    assert_non_null(strstr(why, "not the pod's own"));
    assert_int_equal(verify(&u[1], "{'metadata':{'name':'g','uid':'g1'},'spec':" H100(1) "}", why),
                     GQ_CLAIM_REFUSED);
    /* a spec gpuquota cannot price (allocationMode All) */
    assert_int_equal(
        verify(&u[1],
               "{'metadata':{'name':'g','uid':'g1'," OWNED(
                   "pod-1") "},'spec':{'devices':{"
                            "'requests':[{'name':'g','exactly':{'deviceClassName':'gpu.nvidia.com',"
                            "'allocationMode':'All'}}]}}}",
               why),
        GQ_CLAIM_REFUSED);
    assert_non_null(strstr(why, "cannot price"));
#undef OWNED
}

/* A claim used by two entries (named directly by one, adopted for a
 * template by kube-controller-manager for the other) is refused. */
static void claims_used_once(void **state)
{
    (void)state;
    char why[512] = "";
    json_object *p =
        pod("{'resourceClaimStatuses':[{'name':'own','resourceClaimName':'p-own-x1'}]}");
    assert_true(gq_pod_claims_distinct(p, why, sizeof why));
    json_object_put(p);
    p = pod("{'resourceClaimStatuses':[{'name':'own','resourceClaimName':'c'}]}");
    assert_false(gq_pod_claims_distinct(p, why, sizeof why));
    assert_string_equal(why,
                        "spec.resourceClaims entries \"shared\" and \"own\" use the same "
                        "ResourceClaim c: Kubernetes cannot reserve a claim twice for one pod");
    json_object_put(p);
    /* two template entries given one claim */
    p = J("{'spec':{'resourceClaims':[{'name':'a','resourceClaimTemplateName':'t'},{'name':'b',"
          "'resourceClaimTemplateName':'t'}]},'status':{'resourceClaimStatuses':[{'name':'a',"
          "'resourceClaimName':'g'},{'name':'b','resourceClaimName':'g'}]}}");
    assert_false(gq_pod_claims_distinct(p, why, sizeof why));
    json_object_put(p);
}

static void pins_patch(void **state)
{
    (void)state;
    gq_err err;
    json_object *claim =
        J("{'metadata':{'name':'c','resourceVersion':'42','finalizers':['resource.kubernetes.io/"
          "delete-protection'],'annotations':{'gpuquota.io/pinned-for':'{\\'u1\\':\\'p1\\'}'}}}");
    json_object *pins = gq_claim_pins(claim), *patch = NULL;
    assert_string_equal(json_object_to_json_string_ext(pins, JSON_C_TO_STRING_PLAIN),
                        "{\"u1\":\"p1\"}");
    json_object_object_add(pins, "u2", json_object_new_string("p2"));
    assert_int_equal(gq_claim_pins_patch(claim, pins, &patch, &err), GQ_OK);
    assert_string_equal(
        json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN),
        "{\"metadata\":{\"resourceVersion\":\"42\",\"finalizers\":[\"resource."
        "kubernetes.io\\/delete-protection\",\"gpuquota.io\\/charged-claim\"],"
        "\"labels\":{\"gpuquota.io\\/pinned\":\"true\"},\"annotations\":{"
        "\"gpuquota.io\\/pinned-for\":\"{\\\"u1\\\":\\\"p1\\\",\\\"u2\\\":\\\"p2\\\""
        "}\"}}}");
    json_object_put(patch);
    /* none left: the finalizer goes, label and annotation are removed */
    json_object_put(pins);
    pins = json_object_new_object();
    assert_int_equal(gq_claim_pins_patch(claim, pins, &patch, &err), GQ_OK);
    assert_string_equal(json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN),
                        "{\"metadata\":{\"resourceVersion\":\"42\",\"finalizers\":[\"resource."
                        "kubernetes.io\\/delete-protection\"],\"labels\":{\"gpuquota.io\\/"
                        "pinned\":null},\"annotations\":{\"gpuquota.io\\/pinned-for\":null}}}");
    json_object_put(patch);
    json_object_put(claim);
    /* without a resourceVersion the patch could apply to another claim */
    claim = J("{'metadata':{'name':'c'}}");
    assert_int_equal(gq_claim_pins_patch(claim, pins, &patch, &err), GQ_EINVAL);
    json_object_put(claim);
    /* a malformed annotation reads as no pins */
    claim = J("{'metadata':{'annotations':{'gpuquota.io/pinned-for':'[1,2]'}}}");
    json_object *none = gq_claim_pins(claim);
    assert_int_equal(json_object_object_length(none), 0);
    json_object_put(none);
    json_object_put(claim);
    json_object_put(pins);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uses_follow_the_record),
        cmocka_unit_test(named_claim_by_uid),
        cmocka_unit_test(template_claim_by_owner_and_price),
        cmocka_unit_test(claims_used_once),
        cmocka_unit_test(pins_patch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
