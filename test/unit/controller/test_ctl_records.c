/* The controller's pod records (controller/podstore.c): the fields a record
 * keeps, the admission record as the charge, deletion and refused pods, and
 * the bytes a record costs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_fixture.h"

/* --- records ---------------------------------------------------------------- */

static void test_record_fields(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec ps = {
        .ns = "team-a", .name = "p1", .mem = "10Gi", .ann = "k-1", .pc = "high", .deadline = 60};
    ctl_pod *p = add_pod(s, &ps);
    assert_non_null(p);
    assert_string_equal(ctl_pod_name(p), "p1");
    assert_string_equal(ctl_pod_uid(p), "uid-p1");
    assert_string_equal(ctl_pod_namespace(p), "team-a");
    /* Found by uid, in its namespace only; the annotation is no key. */
    assert_true(ctl_podstore_has_uid(s, "team-a", "uid-p1"));
    assert_false(ctl_podstore_has_uid(s, "team-b", "uid-p1"));
    assert_false(ctl_podstore_has_uid(s, "team-a", "k-1"));
    assert_string_equal(p->priority_class, "high");
    assert_true(p->terminating);
    assert_false(p->terminal);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 10 * GI);
    assert_int_equal(p->charge[GQ_KEY_GPU_PODS], 1);
    assert_int_equal(p->charge[GQ_KEY_GPUS], 0);
    assert_int_equal(p->delete_at, 0);

    /* A second pod shares the interned namespace and priority class. */
    pod_spec ps2 = {.ns = "team-a", .name = "p2", .whole = 2, .pc = "high"};
    ctl_pod *p2 = add_pod(s, &ps2);
    assert_ptr_equal(p2->ns, p->ns);
    assert_ptr_equal(p2->priority_class, p->priority_class);
    assert_int_equal(p2->charge[GQ_KEY_GPUS], 2);
    /* A GPU is never free: no model known, so two of the catalog's largest
     * (h200, 141Gi), as the webhooks charged it. */
    assert_int_equal(p2->charge[GQ_KEY_GPU_MEMORY], 2 * 141 * GI);
    assert_false(ctl_pod_same(p, p2));
    assert_true(ctl_pod_same(p, p));
    assert_true(ctl_pod_same(NULL, NULL));
    assert_false(ctl_pod_same(p, NULL));

    /* CPU-only pods are not kept. */
    pod_spec cpu = {.ns = "team-a", .name = "cpu"};
    assert_null(add_pod(s, &cpu));
    assert_int_equal(ctl_podstore_pod_count(s), 2);
    assert_int_equal(ctl_podstore_ns_pod_count(s, "team-a"), 2);
    assert_int_equal(ctl_podstore_ns_pod_count(s, "other"), 0);

    /* The same pod recreated under the same name is another pod. */
    pod_spec again = ps;
    again.uid = "uid-p1-again";
    ctl_pod *p3 = add_pod(s, &again);
    assert_false(ctl_pod_same(p, p3));
    assert_true(ctl_podstore_has_uid(s, "team-a", "uid-p1-again"));
    ctl_pod_free(s, p3);
    assert_false(ctl_podstore_has_uid(s, "team-a", "uid-p1-again"));

    ctl_podstore_unlink(s, p);
    assert_int_equal(ctl_podstore_ns_pod_count(s, "team-a"), 1);
    assert_false(ctl_podstore_has_uid(s, "team-a", "uid-p1"));
    ctl_pod_free(s, p);
    ctl_pod_free(s, p2); /* still linked: free unlinks */
    assert_int_equal(ctl_podstore_pod_count(s), 0);
    ctl_podstore_free(s);
}

static json_object *fixture_pod(const char *file)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/pods/%s.json", GQ_TEST_DATA, file);
    json_object *pod = json_object_from_file(path);
    assert_non_null(pod);
    return pod;
}

static void set_ann(json_object *pod, const char *key, const char *val)
{
    json_object *ann =
        json_object_object_get(json_object_object_get(pod, "metadata"), "annotations");
    assert_non_null(ann);
    json_object_object_add(ann, key, json_object_new_string(val));
}

/* ctl_pod_from_json of pod, which must be kept. */
static ctl_pod *stored(ctl_podstore *s, json_object *pod)
{
    ctl_pod *p = NULL;
    gq_err err;
    gq_err_clear(&err);
    if (ctl_pod_from_json(s, g_cfg, pod, &p, &err) != GQ_OK)
        fail_msg("ctl_pod_from_json: %s", err.msg);
    assert_non_null(p);
    return p;
}

/* The charge was fixed at admission: a pod carrying gpuquota's admission
 * record counts what the record says, in its scope, against its model,
 * whatever its tenant changes afterwards; a pod gpuquota never admitted
 * counts its container resources alone. Each change below is one a user
 * with the edit role may make to a running pod. */
static void test_record_is_the_charge(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    static const char rec4[] = "{\"charge\":{\"gpu-memory\":\"4Gi\",\"gpu-pods\":\"1\",\"gpus\":"
                               "\"0\"},\"model\":\"a100-80gb\",\"scope\":\"NotTerminating\"}";
    /* Admitted: 4 time-sliced replicas with 1Gi each recorded. */
    json_object *pod = fixture_pod("rewritten-shared");
    set_ann(pod, GQ_ANN_ADMISSION, rec4);
    ctl_pod *p = stored(s, pod);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * GI);
    assert_string_equal(p->model, "a100-80gb");
    assert_false(p->terminating);
    ctl_pod_free(s, p);

    /* Request annotations written after admission, malformed or two at
     * once, change nothing (they made the pod uncountable before). */
    set_ann(pod, "gpu-fraction", "garbage");
    p = stored(s, pod);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * GI);
    ctl_pod_free(s, p);
    set_ann(pod, "gpu-fraction", "0.5");
    set_ann(pod, "gpu-memory", "100");
    p = stored(s, pod);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * GI);
    ctl_pod_free(s, p);

    /* managedFields claiming gpuquota's records for the tenant change
     * nothing (they made gpuquota disown its records before). */
    json_object *mf = J("[{'manager':'kubectl','operation':'Update','fieldsV1':{'f:metadata':{"
                        "'f:labels':{'f:gpuquota.io/managed':{}},'f:annotations':{"
                        "'f:gpuquota.io/gpu-requests':{},'f:gpuquota.io/gpu-claims':{}}}}}]");
    json_object_object_add(json_object_object_get(pod, "metadata"), "managedFields", mf);
    p = stored(s, pod);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * GI);
    ctl_pod_free(s, p);

    /* activeDeadlineSeconds added after admission: still NotTerminating. */
    json_object_object_add(json_object_object_get(pod, "spec"), "activeDeadlineSeconds",
                           json_object_new_int64(315360000));
    p = stored(s, pod);
    assert_false(p->terminating);
    ctl_pod_free(s, p);

    /* A record the configuration no longer prices (the resources say 1.5
     * GPUs) still counts its record, never zero. */
    json_object *odd = J("{'metadata':{'name':'odd','namespace':'a','annotations':{}},'spec':{"
                         "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpu':"
                         "'1.5'}}}]}}");
    set_ann(odd, GQ_ANN_ADMISSION, rec4);
    p = stored(s, odd);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * GI);
    ctl_pod_free(s, p);
    json_object_put(odd);

    /* An older version's charged line counts for the pods it admitted. */
    json_object *old = fixture_pod("rewritten-shared");
    set_ann(old, GQ_ANN_CHARGED, "gpu-memory=4Gi,gpus=0,gpu-pods=1");
    p = stored(s, old);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * GI);
    assert_string_equal(p->model, "a100-80gb");
    ctl_pod_free(s, p);
    json_object_put(old);

    /* Never admitted: the resources alone, whatever the annotations say;
     * time-sliced replicas of no model known are whole cards of the
     * largest (h200, 141Gi). */
    json_object *raw = fixture_pod("forged-shared-requests");
    p = stored(s, raw);
    assert_int_equal(p->charge[GQ_KEY_GPU_MEMORY], 4 * 141 * GI);
    assert_null(p->model);
    ctl_pod_free(s, p);
    json_object_put(raw);

    /* A CPU-only pod annotated with a request afterwards holds no GPU: it
     * is not counted (it was charged 1Ti before). */
    json_object *cpu = J("{'metadata':{'name':'cpu','namespace':'a','annotations':{"
                         "'gpu-memory':'1048576'}},'spec':{'containers':[{'name':'c'}]}}");
    ctl_pod *none = (ctl_pod *)1;
    gq_err err;
    assert_int_equal(ctl_pod_from_json(s, g_cfg, cpu, &none, &err), GQ_OK);
    assert_null(none);
    json_object_put(cpu);

    json_object_put(pod);
    ctl_podstore_free(s);
}

static void test_record_deletion_and_errors(void **state)
{
    (void)state;
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    pod_spec ps = {.ns = "a", .name = "d", .mem = "1Gi", .deleted = NOW_S, .grace = 30};
    ctl_pod *p = add_pod(s, &ps);
    assert_int_equal(p->delete_at, NOW + 30);
    assert_true(ctl_pod_counts(p, NOW + 30));
    assert_false(ctl_pod_counts(p, NOW + 31));
    /* The recount asks for a look once it stops counting: at its deadline
     * it still counts, so the deadline is still ahead; past it, no more. */
    json_object *q = quota_json("a", "q", "{'hard':{'gpu-memory':'10Gi'}}", NULL);
    static const struct {
        int64_t now, next_deadline;
    } at[] = {{NOW, NOW + 30}, {NOW + 30, NOW + 30}, {NOW + 31, 0}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        ctl_result r;
        ctl_result_init(&r);
        reconcile(s, q, at[i].now, &r);
        assert_int_equal(r.next_deadline, at[i].next_deadline);
        ctl_result_dispose(&r);
    }
    json_object_put(q);
    pod_spec done = {.ns = "a", .name = "s", .mem = "1Gi", .phase = "Succeeded"};
    ctl_pod *t = add_pod(s, &done);
    assert_true(t->terminal);
    assert_false(ctl_pod_counts(t, NOW));

    /* A GPU request that cannot be costed is an error, nothing is kept. */
    json_object *bad = J("{'metadata':{'name':'x','namespace':'a'},'spec':{'containers':[{'name':"
                         "'c','resources':{'limits':{'nvidia.com/gpu':'1.5'}}}]}}");
    ctl_pod *rec = (ctl_pod *)1;
    gq_err err;
    assert_int_equal(ctl_pod_from_json(s, g_cfg, bad, &rec, &err), GQ_EINVAL);
    assert_ptr_equal(rec, (ctl_pod *)1);
    json_object_put(bad);
    /* A malformed deletionTimestamp too. */
    pod_spec badts = {.ns = "a", .name = "b", .mem = "1Gi", .deleted = "yesterday"};
    json_object *o = pod_json(&badts);
    assert_int_equal(ctl_pod_from_json(s, g_cfg, o, &rec, &err), GQ_EINVAL);
    json_object_put(o);
    /* Without a name or namespace there is nothing to keep. */
    json_object *anon = J("{'metadata':{},'spec':{'containers':[]}}");
    assert_int_equal(ctl_pod_from_json(s, g_cfg, anon, &rec, &err), GQ_OK);
    assert_null(rec);
    json_object_put(anon);
    ctl_podstore_free(s); /* frees linked records */
}

/* --- memory ------------------------------------------------------------------ */

static void test_memory_per_record(void **state)
{
    (void)state;
    enum { N = 20000 };
    ctl_podstore *s;
    assert_int_equal(ctl_podstore_new(&s), GQ_OK);
    size_t base = ctl_podstore_bytes(s);
    char ns[32], name[64], key[40];
    for (int i = 0; i < N; i++) {
        snprintf(ns, sizeof ns, "team-%03d", i % 200);
        snprintf(name, sizeof name, "train-job-%06d-worker-abcde", i);
        snprintf(key, sizeof key, "0b7a1e54-6f1c-4c8e-9d2a-%012d", i);
        pod_spec ps = {.ns = ns, .name = name, .mem = "8Gi", .uid = key, .pc = "batch"};
        add_pod(s, &ps);
    }
    size_t per = (ctl_podstore_bytes(s) - base) / N;
    /* Allocation sizes plus 16 bytes of malloc overhead per record. */
    print_message("controller store: %zu bytes per pod record (+16 malloc overhead)\n", per);
    assert_true(per + 16 <= 512);
    ctl_podstore_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_fields),
        cmocka_unit_test(test_record_is_the_charge),
        cmocka_unit_test(test_record_deletion_and_errors),
        cmocka_unit_test(test_memory_per_record),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
