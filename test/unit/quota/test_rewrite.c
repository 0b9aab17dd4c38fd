/* The GPU request rewrite: every backend x every input form, affinity merge,
 * schedulerName, missing parents, GPULimitRange defaults and reinvocation.
 * Every case proves three things with the JSON Patch applier: the patch
 * applies to the pod as sent, the patched pod costs exactly what the
 * original did, and rewriting the patched pod yields an empty patch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/admission_testutil.h"
#include "quota/config.h"
#include "quota/jsonpatch.h"
#include "common/jsonutil.h"
#include "quota/podcost.h"
#include "quota/rewrite.h"

#define GI ((int64_t)1 << 30)

static json_object *parse(const char *s)
{
    json_object *v = NULL;
    gq_err err;
    if (gq_json_parse(s, strlen(s), 0, &v, &err))
        fail_msg("bad test JSON: %s: %s", err.msg, s);
    return v;
}

static gq_config *config(gq_backend backend, const char *scheduler)
{
    gq_config *cfg = NULL;
    gq_err err;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    cfg->backend = backend;
    if (scheduler) {
        free(cfg->scheduler_name);
        cfg->scheduler_name = strdup(scheduler);
    }
    return cfg;
}

/* What one rewrite produced, after the proofs. */
typedef struct outcome {
    gq_code rc;
    gq_err err;
    json_object *patched; /* the pod with the patch applied */
    char *patch;          /* patch text */
    gq_rewrite rw;
} outcome;

static void outcome_dispose(outcome *o)
{
    json_object_put(o->patched);
    free(o->patch);
    gq_rewrite_dispose(&o->rw);
}

/* Rewrite pod (cost computed on charged, the pod with defaults applied, or
 * on pod itself) and prove the three properties. */
static void run(const gq_config *cfg, json_object *pod, json_object *charged,
                const gq_rewrite_opts *opts, outcome *o)
{
    memset(o, 0, sizeof(*o));
    gq_rewrite_init(&o->rw);
    gq_pod_cost cost, after;
    gq_pod_cost_init(&cost);
    gq_pod_cost_init(&after);
    gq_err err;
    o->rc = gq_pod_cost_compute(cfg, charged ? charged : pod, &cost, &o->err);
    if (o->rc)
        return;
    o->rc = gq_rewrite_pod(cfg, pod, &cost, opts, &o->rw, &o->err);
    if (o->rc) {
        gq_pod_cost_dispose(&cost);
        return;
    }
    size_t len;
    assert_int_equal(gq_patch_to_text(o->rw.patch, &o->patch, &len), GQ_OK);
    /* 1. The patch applies to the pod exactly as sent. */
    if (gq_patch_apply(pod, gq_patch_json(o->rw.patch), &o->patched, &err))
        fail_msg("patch does not apply: %s\npatch: %s", err.msg, o->patch);
    /* 2. The rewritten pod costs what the original did. */
    if (gq_pod_cost_compute(cfg, o->patched, &after, &err))
        fail_msg("patched pod has no cost: %s\npod: %s", err.msg, gq_json_compact(o->patched));
    assert_int_equal(after.gpu_memory, cost.gpu_memory);
    assert_int_equal(after.gpus, cost.gpus);
    assert_int_equal(after.gpu_pods, cost.gpu_pods);
    /* 3. Reinvocation: rewriting the rewritten pod changes nothing. */
    gq_rewrite again;
    gq_rewrite_init(&again);
    gq_rewrite_opts o2 = {0};
    assert_int_equal(gq_rewrite_pod(cfg, o->patched, &after, &o2, &again, &err), GQ_OK);
    if (gq_patch_len(again.patch) != 0) {
        char *t = NULL;
        assert_int_equal(gq_patch_to_text(again.patch, &t, &len), GQ_OK);
        fail_msg("second rewrite not empty: %s", t);
    }
    assert_int_equal(again.n_warnings, 0);
    assert_null(again.changes); /* an empty patch changes nothing to audit */
    assert_string_equal(again.charged, o->rw.charged);
    gq_rewrite_dispose(&again);
    gq_pod_cost_dispose(&after);
    gq_pod_cost_dispose(&cost);
}

/* run() for a one-off pod: config and pod (owned) are freed before return;
 * the outcome keeps what the assertions need. */
static void run_pod(gq_backend backend, const char *scheduler, json_object *pod, outcome *o)
{
    gq_config *cfg = config(backend, scheduler);
    gq_rewrite_opts opts = {0};
    run(cfg, pod, NULL, &opts, o);
    json_object_put(pod);
    gq_config_free(cfg);
}

/* Value at a path of dotted/indexed segments ("spec", "containers", "0"). */
static json_object *at(json_object *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg && v;
         seg = strtok_r(NULL, ".", &save)) {
        if (json_object_is_type(v, json_type_array)) {
            v = json_object_array_get_idx(v, (size_t)strtoul(seg, NULL, 10));
        } else {
            json_object *n = NULL;
            /* Keys with dots are written with '|' for '.' in paths. */
            for (char *c = seg; *c; c++)
                if (*c == '|')
                    *c = '.';
            if (!json_object_object_get_ex(v, seg, &n))
                return NULL;
            v = n;
        }
    }
    return v;
}

/* The GPU resources of a resource map, as compact JSON. */
static void gpu_subset(json_object *map, char *buf, size_t cap)
{
    json_object *o = json_object_new_object();
    if (map) {
        json_object_object_foreach(map, k, v)
        {
            if (gq_is_gpu_resource(k))
                json_object_object_add(o, k, json_object_get(v));
        }
    }
    snprintf(buf, cap, "%s", gq_json_compact(o));
    json_object_put(o);
}

/* ---- every backend x every input form ------------------------------------ */

typedef struct form_case {
    const char *name;
    const char *annotations; /* extra pod annotations (JSON members) */
    const char *resources;   /* container resources JSON, or NULL for none */
} form_case;

static const form_case forms[] = {
    {"memory", "",
     "{\"limits\":{\"cpu\":\"2\",\"gpuquota.io/gpu-memory\":\"10Gi\"},"
     "\"requests\":{\"cpu\":\"1\",\"gpuquota.io/gpu-memory\":\"10Gi\"}}"},
    {"fraction", "",
     "{\"limits\":{\"nvidia.com/gpu\":\"0.5\"},\"requests\":{\"nvidia.com/gpu\":"
     "\"0.5\"}}"},
    {"ann-fraction", ",\"gpuquota.io/gpu-fraction\":\"0.25\"", NULL},
    {"ann-memory", ",\"gpuquota.io/gpu-memory\":\"8Gi\"", "{}"},
    {"hami-memory", "", "{\"limits\":{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"10240\"}}"},
    {"hami-percent", "", "{\"limits\":{\"nvidia.com/gpumem-percentage\":\"25\"}}"},
    {"kai-fraction", ",\"gpu-fraction\":\"0.5\"",
     "{\"limits\":{\"cpu\":\"1\"},\"requests\":{\"cpu\":\"1\"}}"},
    {"kai-memory", ",\"gpu-memory\":\"4096\"", "{\"requests\":{\"cpu\":\"1\"}}"},
    {"whole", "",
     "{\"limits\":{\"nvidia.com/gpu\":\"2\"},\"requests\":{\"nvidia.com/gpu\":\"2\"}}"},
    {"multi", "", "{\"limits\":{\"nvidia.com/gpu\":\"2\",\"gpuquota.io/gpu-memory\":\"10Gi\"}}"},
};

#define N_FORMS (sizeof(forms) / sizeof(forms[0]))
#define N_BACKENDS 5

/* Expected GPU resources in limits per backend (aliyun, hami, volcano, mig,
 * timeslicing); NULL = the rewrite is refused. Model a100-40gb (40Gi),
 * memoryUnit 1Gi. */
static const char *const expect[N_FORMS][N_BACKENDS] = {
    /* memory 10Gi */
    {"{\"aliyun.com/gpu-mem\":\"10\"}",
     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"10240\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"10240\"}",
     "{\"nvidia.com/mig-1g.10gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* fraction 0.5 = 20Gi */
    {"{\"aliyun.com/gpu-mem\":\"20\"}",
     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"20480\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"20480\"}",
     "{\"nvidia.com/mig-3g.20gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* annotation fraction 0.25 = 10Gi */
    {"{\"aliyun.com/gpu-mem\":\"10\"}",
     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"10240\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"10240\"}",
     "{\"nvidia.com/mig-1g.10gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* annotation memory 8Gi */
    {"{\"aliyun.com/gpu-mem\":\"8\"}", "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"8192\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"8192\"}",
     "{\"nvidia.com/mig-1g.10gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* HAMi gpumem 10240 MiB */
    {"{\"aliyun.com/gpu-mem\":\"10\"}",
     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"10240\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"10240\"}",
     "{\"nvidia.com/mig-1g.10gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* HAMi percentage 25 = 10Gi */
    {"{\"aliyun.com/gpu-mem\":\"10\"}",
     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"10240\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"10240\"}",
     "{\"nvidia.com/mig-1g.10gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* KAI fraction 0.5 = 20Gi */
    {"{\"aliyun.com/gpu-mem\":\"20\"}",
     "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"20480\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"20480\"}",
     "{\"nvidia.com/mig-3g.20gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* KAI memory 4096 MiB */
    {"{\"aliyun.com/gpu-mem\":\"4\"}", "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"4096\"}",
     "{\"volcano.sh/vgpu-number\":\"1\",\"volcano.sh/vgpu-memory\":\"4096\"}",
     "{\"nvidia.com/mig-1g.5gb\":\"1\"}", "{\"nvidia.com/gpu.shared\":\"1\"}"},
    /* whole GPUs: untouched everywhere */
    {"{\"nvidia.com/gpu\":\"2\"}", "{\"nvidia.com/gpu\":\"2\"}", "{\"nvidia.com/gpu\":\"2\"}",
     "{\"nvidia.com/gpu\":\"2\"}", "{\"nvidia.com/gpu\":\"2\"}"},
    /* 2 x 10Gi: aliyun cannot split a container over GPUs */
    {NULL, "{\"nvidia.com/gpu\":\"2\",\"nvidia.com/gpumem\":\"10240\"}",
     "{\"volcano.sh/vgpu-number\":\"2\",\"volcano.sh/vgpu-memory\":\"10240\"}",
     "{\"nvidia.com/mig-1g.10gb\":\"2\"}", "{\"nvidia.com/gpu.shared\":\"2\"}"},
};

static json_object *form_pod(const form_case *f)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"p-\","
             "\"namespace\":\"ml\",\"labels\":{\"team\":\"nlp\"},\"annotations\":{"
             "\"gpuquota.io/gpu-model\":\"a100-40gb\"%s}},\"spec\":{\"containers\":[{\"name\":"
             "\"trainer\",\"image\":\"pytorch\"%s%s}]}}",
             f->annotations, f->resources ? ",\"resources\":" : "",
             f->resources ? f->resources : "");
    return parse(text);
}

static void every_backend_every_form(void **state)
{
    (void)state;
    static const gq_backend backends[N_BACKENDS] = {GQ_BACKEND_ALIYUN, GQ_BACKEND_HAMI,
                                                    GQ_BACKEND_VOLCANO, GQ_BACKEND_MIG,
                                                    GQ_BACKEND_TIMESLICING};
    for (size_t b = 0; b < N_BACKENDS; b++) {
        gq_config *cfg = config(backends[b], NULL);
        for (size_t f = 0; f < N_FORMS; f++) {
            json_object *pod = form_pod(&forms[f]);
            gq_rewrite_opts opts = {0};
            outcome o;
            run(cfg, pod, NULL, &opts, &o);
            const char *want = expect[f][b];
            if (!want) {
                if (o.rc != GQ_EUNSUPPORTED)
                    fail_msg("%s/%s: rc %d, want unsupported", gq_backend_name(backends[b]),
                             forms[f].name, o.rc);
                assert_non_null(strstr(o.err.msg, "cannot split a container"));
            } else {
                if (o.rc)
                    fail_msg("%s/%s: %s", gq_backend_name(backends[b]), forms[f].name, o.err.msg);
                char got[256];
                json_object *res = at(o.patched, "spec.containers.0.resources");
                gpu_subset(at(res, "limits"), got, sizeof(got));
                if (strcmp(got, want) != 0)
                    fail_msg("%s/%s: limits %s, want %s", gq_backend_name(backends[b]),
                             forms[f].name, got, want);
                /* requests mirror limits wherever a requests map exists */
                json_object *orig_req = at(pod, "spec.containers.0.resources.requests");
                if (orig_req) {
                    gpu_subset(at(res, "requests"), got, sizeof(got));
                    if (strcmp(got, want) != 0)
                        fail_msg("%s/%s: requests %s, want %s", gq_backend_name(backends[b]),
                                 forms[f].name, got, want);
                }
                /* non-GPU resources survive */
                json_object *cpu = at(res, "limits.cpu");
                json_object *ocpu = at(pod, "spec.containers.0.resources.limits.cpu");
                assert_true(gq_json_equal(cpu, ocpu));
                assert_string_equal(
                    json_object_get_string(at(o.patched, "metadata.labels.gpuquota|io/managed")),
                    "true");
                assert_string_equal(json_object_get_string(at(o.patched, "metadata.labels.team")),
                                    "nlp");
                bool whole = !strcmp(forms[f].name, "whole");
                /* one warning per rewritten container (+1 for timeslicing) */
                size_t warns = whole ? 0 : backends[b] == GQ_BACKEND_TIMESLICING ? 2 : 1;
                if (backends[b] == GQ_BACKEND_HAMI && (!strcmp(forms[f].name, "hami-memory")))
                    warns = 0; /* already the backend's own form */
                if (o.rw.n_warnings != warns)
                    fail_msg("%s/%s: %zu warnings, want %zu", gq_backend_name(backends[b]),
                             forms[f].name, o.rw.n_warnings, warns);
                for (size_t w = 0; w < o.rw.n_warnings; w++)
                    assert_true(strlen(o.rw.warnings[w]) <= GQ_REWRITE_WARNING_MAX);
            }
            outcome_dispose(&o);
            json_object_put(pod);
        }
        gq_config_free(cfg);
    }
}

/* ---- exact patches ---------------------------------------------------------- */

static void exact_patch_aliyun_fraction(void **state)
{
    (void)state;
    outcome o;
    run_pod(GQ_BACKEND_ALIYUN, "gpu-scheduler", form_pod(&forms[1]), &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(
        o.patch,
        "[{\"op\":\"remove\",\"path\":\"/spec/containers/0/resources/limits/nvidia.com~1gpu\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/aliyun.com~1gpu-mem\","
        "\"value\":\"20\"},"
        "{\"op\":\"remove\",\"path\":\"/spec/containers/0/resources/requests/nvidia.com~1gpu\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests/aliyun.com~1gpu-mem\","
        "\"value\":\"20\"},"
        "{\"op\":\"add\",\"path\":\"/spec/affinity\",\"value\":{\"nodeAffinity\":{"
        "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{"
        "\"matchExpressions\":[{\"key\":\"nvidia.com/gpu.product\",\"operator\":\"In\","
        "\"values\":[\"NVIDIA-A100-SXM4-40GB\",\"NVIDIA-A100-PCIE-40GB\",\"A100-SXM4-40GB\","
        "\"A100-PCIE-40GB\"]}]}]}}}},"
        "{\"op\":\"add\",\"path\":\"/spec/schedulerName\",\"value\":\"gpu-scheduler\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/labels/gpuquota.io~1managed\",\"value\":\"true\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1gpu-requests\","
        "\"value\":\"{\\\"trainer\\\":{\\\"gpus\\\":1,\\\"memory\\\":\\\"20Gi\\\"}}\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1original-request\","
        "\"value\":\"{\\\"trainer\\\":{\\\"nvidia.com/gpu\\\":\\\"0.5\\\"}}\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1charged\","
        "\"value\":\"gpu-memory=20Gi,gpus=0,gpu-pods=1\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1admission\","
        "\"value\":\"{\\\"charge\\\":{\\\"gpu-memory\\\":\\\"20Gi\\\",\\\"gpu-pods\\\":"
        "\\\"1\\\",\\\"gpus\\\":\\\"0\\\"},\\\"model\\\":\\\"a100-40gb\\\",\\\"scope\\\":"
        "\\\"NotTerminating\\\"}\"}]");
    assert_int_equal(o.rw.n_warnings, 1);
    assert_string_equal(
        o.rw.warnings[0],
        "container trainer: nvidia.com/gpu 0.5 on a100-40gb -> aliyun.com/gpu-mem 20");
    assert_string_equal(o.rw.charged, "gpu-memory=20Gi,gpus=0,gpu-pods=1");
    /* The audit view of the same rewrite. */
    assert_string_equal(gq_json_compact(o.rw.originals),
                        "{\"trainer\":{\"nvidia.com/gpu\":\"0.5\"}}");
    assert_string_equal(gq_json_compact(o.rw.changes),
                        "{\"containers\":{\"trainer\":{\"aliyun.com/gpu-mem\":\"20\"}},"
                        "\"gpuModel\":\"a100-40gb\",\"schedulerName\":\"gpu-scheduler\","
                        "\"operations\":11}");
    outcome_dispose(&o);
}

static void timeslicing_warns_and_records(void **state)
{
    (void)state;
    outcome o;
    run_pod(GQ_BACKEND_TIMESLICING, NULL, form_pod(&forms[0]), &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_int_equal(o.rw.n_warnings, 2);
    assert_string_equal(o.rw.warnings[0], "container trainer: gpuquota.io/gpu-memory 10Gi on "
                                          "a100-40gb -> nvidia.com/gpu.shared 1");
    assert_string_equal(o.rw.warnings[1], "timeslicing: GPU memory is accounted, not isolated; a "
                                          "container can use more than it asked for");
    /* podcost reads the memory back from this annotation */
    assert_string_equal(
        json_object_get_string(at(o.patched, "metadata.annotations.gpuquota|io/gpu-requests")),
        "{\"trainer\":{\"gpus\":1,\"memory\":\"10Gi\"}}");
    outcome_dispose(&o);
}

static void cpu_only_pod_no_patch(void **state)
{
    (void)state;
    outcome o;
    run_pod(GQ_BACKEND_ALIYUN, "gpu-scheduler",
            parse("{\"metadata\":{\"annotations\":{\"gpuquota.io/gpu-model\":\"t4\"}},"
                  "\"spec\":{\"containers\":[{\"name\":\"web\",\"resources\":{"
                  "\"limits\":{\"cpu\":\"1\"}}}]}}"),
            &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(o.patch, "[]");
    assert_int_equal(o.rw.n_warnings, 0);
    assert_string_equal(o.rw.charged, "");
    assert_null(o.rw.originals);
    assert_null(o.rw.changes);
    outcome_dispose(&o);
}

static void whole_gpus_only_recorded(void **state)
{
    (void)state;
    /* The shared fixture's pod: 8 whole H100s, pinned by nodeSelector. */
    json_object *review = at_load_json("admissionreview-pod-create.json");
    json_object *pod = json_object_get(at(review, "request.object"));
    json_object_put(review);
    gq_config *cfg = config(GQ_BACKEND_ALIYUN, "gpu-scheduler");
    gq_rewrite_opts opts = {0};
    outcome o;
    run(cfg, pod, NULL, &opts, &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(
        o.patch,
        "[{\"op\":\"add\",\"path\":\"/spec/schedulerName\",\"value\":\"gpu-scheduler\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/labels/gpuquota.io~1managed\",\"value\":\"true\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1original-request\","
        "\"value\":\"{\\\"trainer\\\":{\\\"nvidia.com/gpu\\\":\\\"8\\\"}}\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1charged\","
        "\"value\":\"gpu-memory=640Gi,gpus=8,gpu-pods=1\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/gpuquota.io~1admission\","
        "\"value\":\"{\\\"charge\\\":{\\\"gpu-memory\\\":\\\"640Gi\\\",\\\"gpu-pods\\\":"
        "\\\"1\\\",\\\"gpus\\\":\\\"8\\\"},\\\"model\\\":\\\"h100-80gb\\\",\\\"scope\\\":"
        "\\\"NotTerminating\\\"}\"}]");
    assert_int_equal(o.rw.n_warnings, 0);
    assert_string_equal(gq_json_compact(o.rw.originals),
                        "{\"trainer\":{\"nvidia.com/gpu\":\"8\"}}");
    /* Whole GPUs keep their resources: no "containers" in the summary. */
    assert_string_equal(gq_json_compact(o.rw.changes),
                        "{\"schedulerName\":\"gpu-scheduler\",\"operations\":5}");
    outcome_dispose(&o);
    json_object_put(pod);
    gq_config_free(cfg);
}

/* ---- missing parents ---------------------------------------------------------- */

static void missing_parents_created_whole(void **state)
{
    (void)state;
    gq_config *cfg = config(GQ_BACKEND_ALIYUN, NULL);
    /* No metadata at all; annotation form impossible, so a resource form. */
    json_object *pod = parse("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                             "\"limits\":{\"gpuquota.io/gpu-memory\":\"3Gi\"}}}]}}");
    outcome o;
    run(cfg, pod, NULL, NULL, &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(
        o.patch,
        "[{\"op\":\"remove\",\"path\":\"/spec/containers/0/resources/limits/"
        "gpuquota.io~1gpu-memory\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/aliyun.com~1gpu-mem\","
        "\"value\":\"3\"},"
        "{\"op\":\"add\",\"path\":\"/metadata\",\"value\":{\"labels\":{\"gpuquota.io/managed\":"
        "\"true\"},\"annotations\":{\"gpuquota.io/gpu-requests\":\"{\\\"c\\\":{\\\"gpus\\\":1,"
        "\\\"memory\\\":\\\"3Gi\\\"}}\",\"gpuquota.io/original-request\":\"{\\\"c\\\":{"
        "\\\"gpuquota.io/gpu-memory\\\":\\\"3Gi\\\"}}\",\"gpuquota.io/charged\":"
        "\"gpu-memory=3Gi,gpus=0,gpu-pods=1\",\"gpuquota.io/admission\":\"{\\\"charge\\\":{"
        "\\\"gpu-memory\\\":\\\"3Gi\\\",\\\"gpu-pods\\\":\\\"1\\\",\\\"gpus\\\":\\\"0\\\"},"
        "\\\"scope\\\":\\\"NotTerminating\\\"}\"}}}]");
    outcome_dispose(&o);
    json_object_put(pod);

    /* metadata without labels/annotations maps; container without resources
     * (annotation form): each map is added whole. */
    pod = parse("{\"metadata\":{\"name\":\"p\",\"annotations\":null},\"spec\":{\"containers\":[{"
                "\"name\":\"c\"}]}}");
    json_object_object_add(at(pod, "metadata"), "annotations",
                           parse("{\"gpuquota.io/gpu-memory\":\"2Gi\"}"));
    run(cfg, pod, NULL, NULL, &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_non_null(strstr(o.patch, "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources\","
                                    "\"value\":{\"limits\":{\"aliyun.com/gpu-mem\":\"2\"}}}"));
    assert_non_null(strstr(o.patch, "{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{"
                                    "\"gpuquota.io/managed\":\"true\"}}"));
    assert_string_equal(
        json_object_get_string(at(o.patched, "metadata.annotations.gpuquota|io/original-request")),
        "{\"c\":{\"gpuquota.io/gpu-memory\":\"2Gi\"}}");
    outcome_dispose(&o);
    json_object_put(pod);

    /* resources present, limits absent, requests present: limits added whole,
     * requests edited in place. */
    pod =
        parse("{\"metadata\":{\"labels\":{},\"annotations\":{\"gpuquota.io/gpu-memory\":\"1Gi\"}},"
              "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":"
              "\"1\"}}}]}}");
    run(cfg, pod, NULL, NULL, &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(gq_json_compact(at(o.patched, "spec.containers.0.resources")),
                        "{\"requests\":{\"cpu\":\"1\",\"aliyun.com/gpu-mem\":\"1\"},\"limits\":{"
                        "\"aliyun.com/gpu-mem\":\"1\"}}");
    outcome_dispose(&o);
    json_object_put(pod);
    gq_config_free(cfg);
}

/* ---- init containers and sidecars -------------------------------------------------- */

static void init_containers_and_sidecars(void **state)
{
    (void)state;
    outcome o;
    run_pod(
        GQ_BACKEND_HAMI, NULL,
        parse(
            "{\"metadata\":{\"annotations\":{\"gpuquota.io/gpu-model\":\"a100-80gb\"}},"
            "\"spec\":{\"initContainers\":[{\"name\":\"warm\",\"resources\":{\"limits\":{"
            "\"gpuquota.io/"
            "gpu-memory\":\"30Gi\"}}},{\"name\":\"proxy\",\"restartPolicy\":\"Always\","
            "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"100m\"}}}],\"containers\":[{\"name\":"
            "\"cpu\"},{\"name\":\"main\",\"resources\":{\"limits\":{\"gpuquota.io/gpu-memory\":"
            "\"20Gi\"}}}]}}"),
        &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(gq_json_compact(at(o.patched, "spec.initContainers.0.resources.limits")),
                        "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"30720\"}");
    /* 0.1 x 80Gi = 8Gi (8192 MiB) */
    assert_string_equal(gq_json_compact(at(o.patched, "spec.initContainers.1.resources.limits")),
                        "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"8192\"}");
    assert_string_equal(gq_json_compact(at(o.patched, "spec.containers.1.resources.limits")),
                        "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"20480\"}");
    assert_null(at(o.patched, "spec.containers.0.resources"));
    assert_int_equal(o.rw.n_warnings, 3);
    assert_string_equal(o.rw.warnings[1], "container proxy: nvidia.com/gpu 100m on a100-80gb -> "
                                          "nvidia.com/gpu 1, nvidia.com/gpumem 8192");
    /* max(8Gi + 20Gi, 30Gi + 0, 8Gi) = 30Gi */
    assert_string_equal(o.rw.charged, "gpu-memory=30Gi,gpus=0,gpu-pods=1");
    outcome_dispose(&o);
}

/* ---- affinity merge ------------------------------------------------------------------- */

#define PIN_T4 "{\"key\":\"nvidia.com/gpu.product\",\"operator\":\"In\",\"values\":[\"Tesla-T4\"]}"

typedef struct aff_case {
    const char *name;
    const char *affinity; /* spec.affinity member text, or "" for none */
    const char *want;     /* spec.affinity after the patch */
} aff_case;

static const aff_case aff_cases[] = {
    {"none", "",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"null", ",\"affinity\":null",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"pod affinity kept",
     ",\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[]}}",
     "{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[]},"
     "\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"preferred kept",
     ",\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"
     "\"weight\":1,\"preference\":{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
     "\"values\":[\"a\"]}]}}]}}",
     "{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":1,"
     "\"preference\":{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":["
     "\"a\"]}]}}],\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{"
     "\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"required without terms",
     ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{}}}",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"empty terms",
     ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[]}}}",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"every ORed term",
     ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
     "\"values\":[\"a\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
     "\"values\":[\"n1\"]}]}]}}}",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
     "\"values\":[\"a\"]}," PIN_T4 "]},{\"matchFields\":[{\"key\":\"metadata.name\","
     "\"operator\":\"In\",\"values\":[\"n1\"]}],\"matchExpressions\":[" PIN_T4 "]}]}}}"},
    {"already pinned in one term",
     ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]},{\"matchExpressions\":[]}]}}}",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
     "\"nodeSelectorTerms\":[{\"matchExpressions\":[" PIN_T4 "]},{\"matchExpressions\":[" PIN_T4
     "]}]}}}"},
};

static void affinity_merge(void **state)
{
    (void)state;
    gq_config *cfg = config(GQ_BACKEND_ALIYUN, NULL);
    for (size_t i = 0; i < sizeof(aff_cases) / sizeof(aff_cases[0]); i++) {
        const aff_case *c = &aff_cases[i];
        char text[2048];
        snprintf(text, sizeof(text),
                 "{\"metadata\":{\"annotations\":{\"gpuquota.io/gpu-model\":\"t4\"}},\"spec\":{"
                 "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
                 "\"0.5\"}}}]%s}}",
                 c->affinity);
        json_object *pod = parse(text);
        outcome o;
        run(cfg, pod, NULL, NULL, &o);
        if (o.rc)
            fail_msg("%s: %s", c->name, o.err.msg);
        const char *got = gq_json_compact(at(o.patched, "spec.affinity"));
        if (strcmp(got, c->want) != 0)
            fail_msg("%s: affinity %s\nwant %s", c->name, got, c->want);
        assert_string_equal(json_object_get_string(at(o.patched, "spec.containers.0.resources."
                                                                 "limits.aliyun|com/gpu-mem")),
                            "8");
        outcome_dispose(&o);
        json_object_put(pod);
    }
    gq_config_free(cfg);
}

/* ---- schedulerName ------------------------------------------------------------------------ */

static void scheduler_name(void **state)
{
    (void)state;
    static const struct {
        const char *config; /* NULL: config names none */
        const char *pod;    /* "" member text for none */
        const char *want;   /* resulting spec.schedulerName, NULL for absent */
    } cases[] = {
        {"hami-scheduler", "", "hami-scheduler"},
        {"hami-scheduler", ",\"schedulerName\":\"default-scheduler\"", "hami-scheduler"},
        {"hami-scheduler", ",\"schedulerName\":\"\"", "hami-scheduler"},
        {"hami-scheduler", ",\"schedulerName\":\"volcano\"", "volcano"},
        {"hami-scheduler", ",\"schedulerName\":\"hami-scheduler\"", "hami-scheduler"},
        {NULL, ",\"schedulerName\":\"default-scheduler\"", "default-scheduler"},
        {NULL, "", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gq_config *cfg = config(GQ_BACKEND_HAMI, cases[i].config);
        char text[512];
        snprintf(text, sizeof(text),
                 "{\"metadata\":{},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                 "\"limits\":{\"gpuquota.io/gpu-memory\":\"1Gi\"}}}]%s}}",
                 cases[i].pod);
        json_object *pod = parse(text);
        outcome o;
        run(cfg, pod, NULL, NULL, &o);
        assert_int_equal(o.rc, GQ_OK);
        json_object *s = at(o.patched, "spec.schedulerName");
        if (cases[i].want)
            assert_string_equal(json_object_get_string(s), cases[i].want);
        else
            assert_null(s);
        outcome_dispose(&o);
        json_object_put(pod);
        gq_config_free(cfg);
    }
}

/* ---- GPULimitRange defaults ------------------------------------------------------------- */

static void limit_range_default(void **state)
{
    (void)state;
    gq_config *cfg = config(GQ_BACKEND_ALIYUN, NULL);
    json_object *pod = parse("{\"metadata\":{\"annotations\":{\"gpuquota.io/gpu-model\":"
                             "\"a10\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                             "\"limits\":{\"nvidia.com/gpu\":\"1\"},\"requests\":{"
                             "\"nvidia.com/gpu\":\"1\"}}}]}}");
    gq_ctr_default d = {.kind = GQ_CTR_APP,
                        .index = 0,
                        .name = "c",
                        .gpus = 1,
                        .memory_per_gpu = 6 * GI,
                        .limit_range = "gpu-defaults"};
    json_object *defaulted = NULL;
    gq_err err;
    assert_int_equal(gq_pod_apply_defaults(pod, &d, 1, &defaulted, &err), GQ_OK);
    assert_string_equal(
        json_object_get_string(at(defaulted, "spec.containers.0.resources.limits.gpuquota|io/"
                                             "gpu-memory")),
        "6Gi");
    assert_null(at(pod, "spec.containers.0.resources.limits.gpuquota|io/gpu-memory"));
    gq_rewrite_opts opts = {.defaults = &d, .n_defaults = 1};
    outcome o;
    run(cfg, pod, defaulted, &opts, &o);
    assert_int_equal(o.rc, GQ_OK);
    assert_string_equal(gq_json_compact(at(o.patched, "spec.containers.0.resources")),
                        "{\"limits\":{\"aliyun.com/gpu-mem\":\"6\"},\"requests\":{"
                        "\"aliyun.com/gpu-mem\":\"6\"}}");
    assert_string_equal(o.rw.warnings[0], "container c: nvidia.com/gpu 1 (default 6Gi from "
                                          "GPULimitRange gpu-defaults) on a10 -> "
                                          "aliyun.com/gpu-mem 6");
    assert_string_equal(o.rw.charged, "gpu-memory=6Gi,gpus=0,gpu-pods=1");
    outcome_dispose(&o);
    json_object_put(defaulted);

    /* A default naming a container the pod does not have. */
    d.index = 3;
    defaulted = NULL;
    assert_int_equal(gq_pod_apply_defaults(pod, &d, 1, &defaulted, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "GPULimitRange default for container \"c\": spec.containers[3] "
                                 "has no resources.limits");
    assert_null(defaulted);
    json_object_put(pod);
    gq_config_free(cfg);
}

/* ---- reinvocation of a pod rewritten earlier ---------------------------------------------- */

static void managed_pod_keeps_history(void **state)
{
    (void)state;
    gq_config *cfg = config(GQ_BACKEND_ALIYUN, NULL);
    json_object *pod = form_pod(&forms[1]);
    gq_rewrite_opts opts = {0};
    outcome o;
    run(cfg, pod, NULL, &opts, &o);
    assert_int_equal(o.rc, GQ_OK);
    /* A copy of the rewritten pod created again under a new admission:
     * nothing changes; the original request stays history. */
    gq_pod_cost cost;
    gq_pod_cost_init(&cost);
    gq_err err;
    assert_int_equal(gq_pod_cost_compute(cfg, o.patched, &cost, &err), GQ_OK);
    assert_int_equal(cost.ctrs[0].form, GQ_FORM_BACKEND);
    gq_rewrite rw;
    gq_rewrite_init(&rw);
    gq_rewrite_opts again = {0};
    assert_int_equal(gq_rewrite_pod(cfg, o.patched, &cost, &again, &rw, &err), GQ_OK);
    char *text = NULL;
    size_t len;
    assert_int_equal(gq_patch_to_text(rw.patch, &text, &len), GQ_OK);
    assert_string_equal(text, "[]");
    assert_null(rw.changes);
    /* The request as this admission sees it: already the backend's form. */
    assert_string_equal(gq_json_compact(rw.originals),
                        "{\"trainer\":{\"aliyun.com/gpu-mem\":\"20\"}}");
    free(text);
    gq_rewrite_dispose(&rw);
    gq_pod_cost_dispose(&cost);
    outcome_dispose(&o);
    json_object_put(pod);
    gq_config_free(cfg);
}

static void gpu_resource_names(void **state)
{
    (void)state;
    assert_true(gq_is_gpu_resource("nvidia.com/gpu"));
    assert_true(gq_is_gpu_resource("gpuquota.io/gpu-memory"));
    assert_true(gq_is_gpu_resource("nvidia.com/mig-1g.10gb"));
    assert_true(gq_is_gpu_resource("nvidia.com/gpu.shared"));
    assert_true(gq_is_gpu_resource("volcano.sh/vgpu-memory"));
    assert_false(gq_is_gpu_resource("nvidia.com/mig-"));
    assert_false(gq_is_gpu_resource("nvidia.com/gpucores"));
    assert_false(gq_is_gpu_resource("cpu"));
    assert_false(gq_is_gpu_resource(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_backend_every_form),
        cmocka_unit_test(exact_patch_aliyun_fraction),
        cmocka_unit_test(timeslicing_warns_and_records),
        cmocka_unit_test(cpu_only_pod_no_patch),
        cmocka_unit_test(whole_gpus_only_recorded),
        cmocka_unit_test(missing_parents_created_whole),
        cmocka_unit_test(init_containers_and_sidecars),
        cmocka_unit_test(affinity_merge),
        cmocka_unit_test(scheduler_name),
        cmocka_unit_test(limit_range_default),
        cmocka_unit_test(managed_pod_keeps_history),
        cmocka_unit_test(gpu_resource_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
