/* quota/update.h: an UPDATE re-applying what a pod's author first wrote is
 * normalised back to what gpuquota stored; any other change is left alone.
 * JSON is written with single quotes for readability. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "quota/update.h"

/* The stored pod: rewritten from nvidia.com/gpu 250m (and a sidecar from
 * gpuquota.io/gpu-memory 2Gi) to aliyun.com/gpu-mem, model chosen from a
 * list. */
static const char stored[] =
    "{'metadata':{'name':'p','annotations':{'gpuquota.io/original-request':"
    "'{\\\"main\\\":{\\\"nvidia.com/gpu\\\":\\\"250m\\\"},\\\"side\\\":{"
    "\\\"gpuquota.io/gpu-memory\\\":\\\"2Gi\\\"}}',"
    "'gpuquota.io/gpu-model':'a100-80gb','gpuquota.io/gpu-model-choices':'a100-80gb,h100-80gb'}},"
    "'spec':{'initContainers':[{'name':'side','image':'s:1','restartPolicy':'Always','resources':{"
    "'limits':{'aliyun.com/gpu-mem':'2'},'requests':{'aliyun.com/gpu-mem':'2'}}}],"
    "'containers':[{'name':'main','image':'m:1','resources':{'limits':{'aliyun.com/gpu-mem':'20',"
    "'cpu':'1'},'requests':{'aliyun.com/gpu-mem':'20','cpu':'1'}}}]}}";

/* stored with the text FROM replaced by TO (once), parsed. */
static json_object *edited(const char *from, const char *to)
{
    char buf[4096];
    const char *at = from ? strstr(stored, from) : NULL;
    if (from && !at)
        fail_msg("no [%s] in the stored pod", from);
    if (!from)
        snprintf(buf, sizeof(buf), "%s", stored);
    else
        snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - stored), stored, to, at + strlen(from));
    return J(buf);
}

static void table(void **state)
{
    (void)state;
    static const struct {
        const char *what, *from, *to;
        const char *patch; /* NULL: left alone */
    } t[] = {
        {"unchanged", NULL, NULL, NULL},
        {"client-side apply of the same manifest: the request is merged back beside ours",
         "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1'},'requests':{'aliyun.com/gpu-mem':'20',"
         "'cpu':'1'}",
         "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1','nvidia.com/gpu':'250m'},'requests':{"
         "'aliyun.com/gpu-mem':'20','cpu':'1','nvidia.com/gpu':'250m'}",
         "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/resources\",\"value\":{\"limits\":{"
         "\"aliyun.com/gpu-mem\":\"20\",\"cpu\":\"1\"},\"requests\":{\"aliyun.com/gpu-mem\":\"20\","
         "\"cpu\":\"1\"}}}]"},
        {"an image bump beside it",
         "'image':'m:1','resources':{'limits':{'aliyun.com/gpu-mem':'20',",
         "'image':'m:2','resources':{'limits':{'nvidia.com/gpu':'0.25','aliyun.com/gpu-mem':'20',",
         "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/resources\",\"value\":{\"limits\":{"
         "\"aliyun.com/gpu-mem\":\"20\",\"cpu\":\"1\"},\"requests\":{\"aliyun.com/gpu-mem\":\"20\","
         "\"cpu\":\"1\"}}}]"},
        {"a replace that drops what gpuquota wrote",
         "'limits':{'aliyun.com/gpu-mem':'2'},'requests':{'aliyun.com/gpu-mem':'2'}",
         "'limits':{'gpuquota.io/gpu-memory':'2Gi'},'requests':{'gpuquota.io/gpu-memory':'2Gi'}",
         "[{\"op\":\"replace\",\"path\":\"/spec/initContainers/0/resources\",\"value\":{\"limits\":"
         "{\"aliyun.com/gpu-mem\":\"2\"},\"requests\":{\"aliyun.com/gpu-mem\":\"2\"}}}]"},
        {"the model list re-applied over the model chosen from it",
         "'gpuquota.io/gpu-model':'a100-80gb'", "'gpuquota.io/gpu-model':'a100-80gb,h100-80gb'",
         "[{\"op\":\"replace\",\"path\":\"/metadata/annotations/gpuquota.io~1gpu-model\","
         "\"value\":\"a100-80gb\"}]"},
        /* left alone: more than a re-apply */
        {"another amount", "'aliyun.com/gpu-mem':'20','cpu':'1'},'requests'",
         "'aliyun.com/gpu-mem':'20','cpu':'1','nvidia.com/gpu':'500m'},'requests'", NULL},
        {"another key", "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1'}",
         "'limits':{'aliyun.com/gpu-mem':'20','cpu':'2'}", NULL},
        {"a GPU resource gpuquota did not replace",
         "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1'}",
         "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1','nvidia.com/gpumem':'100'}", NULL},
        {"what gpuquota wrote, changed", "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1'}",
         "'limits':{'aliyun.com/gpu-mem':'2','cpu':'1','nvidia.com/gpu':'250m'}", NULL},
        {"a CPU resource dropped", "'limits':{'aliyun.com/gpu-mem':'20','cpu':'1'}",
         "'limits':{'aliyun.com/gpu-mem':'20','nvidia.com/gpu':'250m'}", NULL},
        {"another model", "'gpuquota.io/gpu-model':'a100-80gb'",
         "'gpuquota.io/gpu-model':'h100-80gb'", NULL},
        {"containers renamed", "'name':'main'", "'name':'other'", NULL},
    };
    json_object *old = J(stored);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        json_object *now = edited(t[i].from, t[i].to);
        gq_patch *p = (gq_patch *)1;
        gq_err err;
        assert_int_equal(gq_update_restore(old, now, &p, &err), GQ_OK);
        char *text = NULL;
        size_t len = 0;
        if (p)
            assert_int_equal(gq_patch_to_text(p, &text, &len), GQ_OK);
        if (!t[i].patch != !p || (p && strcmp(text, t[i].patch)))
            fail_msg("%s: got %s", t[i].what, text ? text : "(none)");
        if (p) {
            /* The patch applied gives back the stored resources and model. */
            json_object *back = NULL;
            assert_int_equal(gq_patch_apply(now, gq_patch_json(p), &back, &err), GQ_OK);
            json_object *sb = json_object_object_get(back, "spec"),
                        *so = json_object_object_get(old, "spec");
            for (int k = 0; k < 2; k++) {
                const char *list = k ? "containers" : "initContainers";
                json_object *a = json_object_array_get_idx(json_object_object_get(sb, list), 0);
                json_object *b = json_object_array_get_idx(json_object_object_get(so, list), 0);
                assert_true(json_object_equal(json_object_object_get(a, "resources"),
                                              json_object_object_get(b, "resources")));
            }
            json_object_put(back);
        }
        free(text);
        gq_patch_free(p);
        json_object_put(now);
    }
    /* Without gpuquota's record of the original request nothing is undone. */
    json_object *bare = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'main',"
                          "'resources':{'limits':{'aliyun.com/gpu-mem':'20'}}}]}}");
    json_object *again = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'main',"
                           "'resources':{'limits':{'aliyun.com/gpu-mem':'20','nvidia.com/gpu':"
                           "'250m'}}}]}}");
    gq_patch *p = (gq_patch *)1;
    assert_int_equal(gq_update_restore(bare, again, &p, NULL), GQ_OK);
    assert_null(p);
    /* Shapes that are not pods are left alone. */
    assert_int_equal(gq_update_restore(NULL, again, &p, NULL), GQ_OK);
    assert_null(p);
    json_object *odd = J("{'spec':{'containers':{}}}");
    assert_int_equal(gq_update_restore(old, odd, &p, NULL), GQ_OK);
    assert_null(p);
    json_object_put(odd);
    json_object_put(bare);
    json_object_put(again);
    json_object_put(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
