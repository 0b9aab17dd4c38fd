/* Pod GPU cost: one row per pod file in test/data/pods/, with the
 * configuration it is evaluated under and the exact expected charge or the
 * exact error message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quota/config.h"
#include "quota/podcost.h"

#define MI ((int64_t)1 << 20)
#define GI ((int64_t)1 << 30)
#define EI ((int64_t)1 << 60)

typedef struct pc_case {
    const char *file;          /* test/data/pods/FILE.json */
    const char *backend;       /* NULL: the default (aliyun) */
    int64_t unit;              /* 0: the default (1Gi) */
    const char *default_model; /* NULL: none */
    gq_code rc;
    /* on success */
    int64_t gpu_memory, gpus, gpu_pods;
    const char *model;
    bool pinned;
    size_t n_ctrs;
    /* the first GPU container */
    const char *name0;
    gq_form form0;
    int64_t ctr_gpus0, mem0, charged0;
    /* on error: exact message, or a prefix when it ends with '*' */
    const char *msg;
} pc_case;

#define OK(f, be, unit, dm, mem, gpus, pods, model, pinned, n, name, form, g0, m0, c0)             \
    {                                                                                              \
        f, be, unit, dm, GQ_OK, mem, gpus, pods, model, pinned, n, name, form, g0, m0, c0, NULL    \
    }
#define ERR(f, be, unit, dm, rc, msg)                                                              \
    {                                                                                              \
        f, be, unit, dm, rc, 0, 0, 0, NULL, false, 0, NULL, GQ_FORM_NONE, 0, 0, 0, msg             \
    }

#define NEEDS_MODEL                                                                                \
    "needs a GPU model to turn into memory: pin one with pod annotation gpuquota.io/gpu-model or " \
    "set defaultModel in the configuration"
#define FRACTION_RULE                                                                              \
    "is not valid: a GPU fraction must be in (0, 1] (for example \"0.5\" or \"500m\"); ask for "   \
    "whole GPUs as an integer"
#define COUNT_RULE "is not valid: the number of GPUs must be a whole number from 1 to 1024"

static const pc_case cases[] = {
    /* gpuquota.io/gpu-memory, rounded to what each backend reserves */
    OK("memory-10gi", NULL, 0, NULL, 10 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY, 1,
       10 * GI, 10 * GI),
    OK("memory-number", NULL, 0, NULL, GI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY, 1, GI, GI),
    OK("memory-1536mi", NULL, 0, NULL, 2 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY, 1,
       1536 * MI, 2 * GI),
    OK("memory-1536mi", "hami", 0, NULL, 1536 * MI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY, 1,
       1536 * MI, 1536 * MI),
    OK("memory-1536mi", "aliyun", 512 * MI, NULL, 1536 * MI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_MEMORY, 1, 1536 * MI, 1536 * MI),
    OK("memory-1g-decimal", "hami", 0, NULL, 954 * MI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY,
       1, 1000000000, 954 * MI),
    OK("memory-1g-decimal", "volcano", 0, NULL, 954 * MI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_MEMORY, 1, 1000000000, 954 * MI),
    OK("memory-1g-decimal", NULL, 0, NULL, GI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY, 1,
       1000000000, GI),
    OK("memory-x2", "hami", 0, NULL, 20 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY, 2,
       10 * GI, 10 * GI),
    ERR("memory-x2", NULL, 0, NULL, GQ_EUNSUPPORTED,
        "container \"main\": gpuquota.io/gpu-memory: the aliyun backend cannot split a container "
        "over several GPUs; ask for one slice or use whole GPUs"),
    OK("memory-x2-a100", "volcano", 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "main",
       GQ_FORM_MEMORY, 2, 10 * GI, 10 * GI),
    OK("timeslicing-x2", "timeslicing", 0, NULL, 4 * GI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_MEMORY, 2, 1536 * MI, 2 * GI),
    ERR("memory-fraction-count", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/gpu \"0.5\" " COUNT_RULE),
    /* A10 (24Gi) and A100 (40Gi) are told apart exactly */
    ERR("memory-too-big-a10", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory \"30Gi\" is more memory than one a10 GPU has "
        "(24Gi)"),
    OK("memory-40gi-a100", NULL, 0, NULL, 40 * GI, 0, 1, "a100-40gb", true, 1, "main",
       GQ_FORM_MEMORY, 1, 40 * GI, 40 * GI),
    /* zero of any GPU resource or request annotation asks for no GPU, as in
     * Kubernetes */
    OK("memory-zero", NULL, 0, NULL, 0, 0, 0, NULL, false, 0, NULL, GQ_FORM_NONE, 0, 0, 0),
    OK("zero-every-form", NULL, 0, NULL, 0, 0, 0, NULL, false, 0, NULL, GQ_FORM_NONE, 0, 0, 0),
    OK("zero-every-form", "timeslicing", 0, "a10", 0, 0, 0, "a10", false, 0, NULL, GQ_FORM_NONE, 0,
       0, 0),
    OK("zero-annotations", NULL, 0, NULL, 0, 0, 0, "a100-40gb", true, 0, NULL, GQ_FORM_NONE, 0, 0,
       0),
    OK("zero-gpu-with-memory", NULL, 0, NULL, 10 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_MEMORY,
       1, 10 * GI, 10 * GI),
    OK("zero-gpu-with-annotation", NULL, 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "main",
       GQ_FORM_ANN_FRACTION, 1, 20 * GI, 20 * GI),
    OK("zero-annotation-with-whole", NULL, 0, NULL, 32 * GI, 2, 1, "t4", true, 1, "main",
       GQ_FORM_WHOLE, 2, 16 * GI, 16 * GI),
    ERR("memory-negative", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory \"-1Gi\" is not valid: GPU memory must be "
        "positive (for example \"10Gi\")"),
    ERR("memory-overflow", NULL, 0, NULL, GQ_ERANGE,
        "container \"main\": gpuquota.io/gpu-memory: quantity \"8Ei\" is out of range*"),
    ERR("memory-overflow-exp", NULL, 0, NULL, GQ_ERANGE,
        "container \"main\": gpuquota.io/gpu-memory \"1e19\" is too large"),
    ERR("memory-sum-overflow", NULL, 0, NULL, GQ_ERANGE,
        "container \"b\": GPU memory of the pod overflows"),
    ERR("memory-bad-quantity", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory \"10GB\" is not a valid quantity: *"),
    ERR("memory-bool", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory must be a quantity (a string such as \"10Gi\" "
        "or a number)"),
    ERR("requests-limits-differ", NULL, 0, NULL, GQ_EINVAL,
        "container \"trainer\": nvidia.com/gpu requests \"1\" and limits \"2\" differ: Kubernetes "
        "requires requests to equal limits for extended resources (set only limits)"),
    OK("requests-limits-same-spelling", NULL, 0, NULL, GI, 0, 1, NULL, false, 1, "trainer",
       GQ_FORM_MEMORY, 1, GI, GI),
    /* fractional nvidia.com/gpu and model resolution */
    OK("fraction-a100-ann", NULL, 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "trainer",
       GQ_FORM_FRACTION, 1, 20 * GI, 20 * GI),
    OK("fraction-500m-a10-selector", NULL, 0, NULL, 12 * GI, 0, 1, "a10", true, 1, "trainer",
       GQ_FORM_FRACTION, 1, 12 * GI, 12 * GI),
    OK("fraction-a100-selector", NULL, 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "trainer",
       GQ_FORM_FRACTION, 1, 20 * GI, 20 * GI),
    OK("fraction-number-default", NULL, 0, "a100-80gb", 20 * GI, 0, 1, "a100-80gb", false, 1,
       "trainer", GQ_FORM_FRACTION, 1, 20 * GI, 20 * GI),
    OK("fraction-third-a10", NULL, 0, NULL, 8 * GI, 0, 1, "a10", true, 1, "trainer",
       GQ_FORM_FRACTION, 1, 8581344658, 8 * GI),
    OK("fraction-third-a10", "hami", 0, NULL, 8184 * MI, 0, 1, "a10", true, 1, "trainer",
       GQ_FORM_FRACTION, 1, 8581344658, 8184 * MI),
    ERR("fraction-no-model", NULL, 0, NULL, GQ_EINVAL,
        "container \"trainer\": nvidia.com/gpu \"0.5\" " NEEDS_MODEL),
    ERR("fraction-1.5", NULL, 0, NULL, GQ_EINVAL,
        "container \"trainer\": nvidia.com/gpu \"1.5\" " FRACTION_RULE),
    OK("gpu-zero", NULL, 0, NULL, 0, 0, 0, NULL, false, 0, NULL, GQ_FORM_NONE, 0, 0, 0),
    ERR("gpu-negative", NULL, 0, NULL, GQ_EINVAL,
        "container \"trainer\": nvidia.com/gpu \"-1\" " FRACTION_RULE),
    ERR("gpu-too-many", NULL, 0, NULL, GQ_EINVAL,
        "container \"trainer\": nvidia.com/gpu \"100k\" " COUNT_RULE),
    ERR("unknown-model", NULL, 0, NULL, GQ_ENOTFOUND,
        "pod annotation gpuquota.io/gpu-model \"a100\" is not a known GPU model; known models: t4, "
        "v100-16gb, v100-32gb, a10, a30, a100-40gb, a100-80gb, l4, l40s, h100-80gb, h200"),
    ERR("selector-unknown-product", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/gpu \"0.5\" " NEEDS_MODEL),
    OK("selector-unknown-product", NULL, 0, "a10", 12 * GI, 0, 1, "a10", false, 1, "main",
       GQ_FORM_FRACTION, 1, 12 * GI, 12 * GI),
    OK("affinity-pin", NULL, 0, "l4", 20 * GI, 0, 1, "a100-40gb", true, 1, "main", GQ_FORM_FRACTION,
       1, 20 * GI, 20 * GI),
    OK("affinity-mixed", NULL, 0, "l4", 12 * GI, 0, 1, "l4", false, 1, "main", GQ_FORM_FRACTION, 1,
       12 * GI, 12 * GI),
    OK("ann-over-selector", NULL, 0, NULL, 40 * GI, 0, 1, "h100-80gb", true, 1, "main",
       GQ_FORM_FRACTION, 1, 40 * GI, 40 * GI),
    /* whole GPUs */
    /* a GPU is never free: without a model, whole GPUs cost the catalog's
     * largest (h200, 141Gi) */
    OK("whole-2", NULL, 0, NULL, 282 * GI, 2, 1, NULL, false, 1, "trainer", GQ_FORM_WHOLE, 2,
       141 * GI, 141 * GI),
    OK("whole-2", NULL, 0, "t4", 32 * GI, 2, 1, "t4", false, 1, "trainer", GQ_FORM_WHOLE, 2,
       16 * GI, 16 * GI),
    OK("whole-t4-product-ann", NULL, 0, NULL, 16 * GI, 1, 1, "t4", true, 1, "trainer",
       GQ_FORM_WHOLE, 1, 16 * GI, 16 * GI),
    OK("whole-requests-only", NULL, 0, NULL, 24 * GI, 1, 1, "l4", true, 1, "trainer", GQ_FORM_WHOLE,
       1, 24 * GI, 24 * GI),
    /* HAMi */
    OK("hami-memory", NULL, 0, NULL, 10 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_HAMI_MEMORY, 1,
       10 * GI, 10 * GI),
    OK("hami-memory-x2", "hami", 0, NULL, 20 * GI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_HAMI_MEMORY, 2, 10 * GI, 10 * GI),
    OK("hami-percent", NULL, 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "main",
       GQ_FORM_HAMI_PERCENT, 1, 20 * GI, 20 * GI),
    ERR("hami-percent-101", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/gpumem-percentage \"101\" is not valid: a percentage of "
        "GPU memory must be a whole number from 1 to 100"),
    ERR("hami-percent-no-model", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/gpumem-percentage \"50\" " NEEDS_MODEL),
    ERR("conflict-forms", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory and nvidia.com/gpumem both ask for GPU memory; "
        "use one form"),
    /* pod annotations (gpuquota.io and KAI) */
    OK("ann-fraction", NULL, 0, NULL, 10 * GI, 0, 1, "a100-40gb", true, 1, "main",
       GQ_FORM_ANN_FRACTION, 1, 10 * GI, 10 * GI),
    OK("ann-memory-container", NULL, 0, NULL, 8 * GI, 0, 1, NULL, false, 1, "infer",
       GQ_FORM_ANN_MEMORY, 1, 8 * GI, 8 * GI),
    OK("kai-fraction", NULL, 0, "l4", 12 * GI, 0, 1, "l4", false, 1, "main", GQ_FORM_KAI_FRACTION,
       1, 12 * GI, 12 * GI),
    ERR("kai-fraction", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": pod annotation gpu-fraction \"0.5\" " NEEDS_MODEL),
    OK("kai-memory", NULL, 0, NULL, 4 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_KAI_MEMORY, 1,
       4 * GI, 4 * GI),
    ERR("ann-conflict", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": pod annotation gpuquota.io/gpu-fraction conflicts with the GPU "
        "request "
        "in the container's resources; use one of them"),
    ERR("ann-two-forms", NULL, 0, NULL, GQ_EINVAL,
        "pod annotations gpuquota.io/gpu-fraction and gpu-memory both ask for a GPU; use only one"),
    ERR("ann-missing-container", NULL, 0, NULL, GQ_EINVAL,
        "pod annotation gpuquota.io/gpu-container names container \"nope\", which the pod does not "
        "have"),
    ERR("ann-not-string", NULL, 0, NULL, GQ_EINVAL,
        "metadata.annotations[\"gpuquota.io/gpu-fraction\"] must be a string"),
    OK("managed-aliyun-with-ann", NULL, 0, NULL, 10 * GI, 0, 1, "a100-40gb", true, 1, "main",
       GQ_FORM_BACKEND, 1, 10 * GI, 10 * GI),
    ERR("unmanaged-aliyun-with-ann", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": pod annotation gpuquota.io/gpu-fraction conflicts with the GPU "
        "request "
        "in the container's resources; use one of them"),
    /* gpuquota's records are read back only where gpuquota wrote them: what
     * the pod's author wrote (metadata.managedFields lists it) never sets
     * the charge; 4 time-sliced A100 80GB are 4 whole cards */
    OK("forged-shared-requests", "timeslicing", 0, NULL, 320 * GI, 0, 1, "a100-80gb", true, 1,
       "main", GQ_FORM_BACKEND, 4, 80 * GI, 80 * GI),
    OK("forged-shared-requests-unlabelled", "timeslicing", 0, NULL, 320 * GI, 0, 1, "a100-80gb",
       true, 1, "main", GQ_FORM_BACKEND, 4, 80 * GI, 80 * GI),
    OK("rewritten-shared", "timeslicing", 0, NULL, 4 * GI, 0, 1, "a100-80gb", true, 1, "main",
       GQ_FORM_BACKEND, 4, GI, GI),
    ERR("forged-managed-aliyun-with-ann", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": pod annotation gpuquota.io/gpu-fraction conflicts with the GPU "
        "request in the container's resources; use one of them"),
    /* backend output resources cost what they reserve */
    OK("backend-aliyun", NULL, 0, NULL, 10 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_BACKEND, 1,
       10 * GI, 10 * GI),
    OK("backend-aliyun", "hami", 512 * MI, NULL, 5 * GI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_BACKEND, 1, 5 * GI, 5 * GI),
    ERR("backend-aliyun-fraction", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": aliyun.com/gpu-mem \"1.5\" is not valid: it counts memory units and "
        "must be a positive whole number"),
    OK("backend-volcano", NULL, 0, NULL, 20 * GI, 0, 1, NULL, false, 1, "main", GQ_FORM_BACKEND, 2,
       10 * GI, 10 * GI),
    OK("backend-volcano-number-only", NULL, 0, NULL, 24 * GI, 0, 1, "a10", true, 1, "main",
       GQ_FORM_BACKEND, 1, 24 * GI, 24 * GI),
    OK("backend-mig", NULL, 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "main", GQ_FORM_BACKEND,
       2, 10 * GI, 10 * GI),
    OK("backend-mig-no-model", NULL, 0, NULL, 20 * GI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_BACKEND, 1, 20 * GI, 20 * GI),
    ERR("backend-mig-unknown", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/mig-9g.99gb \"1\": unknown MIG profile \"9g.99gb\" for GPU "
        "model a100-40gb"),
    ERR("backend-mig-two", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/mig-1g.10gb and nvidia.com/mig-2g.20gb: ask for one MIG "
        "profile per container"),
    OK("backend-shared-recorded", NULL, 0, NULL, 20 * GI, 0, 1, NULL, false, 1, "main",
       GQ_FORM_BACKEND, 1, 20 * GI, 20 * GI),
    OK("backend-shared-whole-card", NULL, 0, NULL, 24 * GI, 0, 1, "a10", true, 1, "main",
       GQ_FORM_BACKEND, 1, 24 * GI, 24 * GI),
    OK("backend-shared-malformed", NULL, 0, NULL, 48 * GI, 0, 1, "a10", true, 1, "main",
       GQ_FORM_BACKEND, 2, 24 * GI, 24 * GI),
    ERR("backend-shared-no-model", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/gpu.shared \"1\" " NEEDS_MODEL),
    ERR("backend-with-gpu", NULL, 0, NULL, GQ_EINVAL,
        "container \"main\": nvidia.com/gpu cannot be combined with aliyun.com/gpu-mem"),
    /* the mig backend charges the smallest profile that holds the request */
    OK("mig-input", "mig", 0, NULL, 20 * GI, 0, 1, "a100-40gb", true, 1, "main", GQ_FORM_MEMORY, 1,
       12 * GI, 20 * GI),
    ERR("mig-input-no-model", "mig", 0, NULL, GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory \"12Gi\": the mig backend needs a GPU model "
        "with MIG profiles; pin one with pod annotation gpuquota.io/gpu-model"),
    ERR("mig-input-no-model", "mig", 0, "l4", GQ_EINVAL,
        "container \"main\": gpuquota.io/gpu-memory \"12Gi\": the mig backend needs a GPU model "
        "with MIG profiles; pin one with pod annotation gpuquota.io/gpu-model"),
    /* effective request: init containers, sidecars, overhead */
    OK("sidecar-before-init", NULL, 0, NULL, 32 * GI, 0, 1, NULL, false, 4, "proxy", GQ_FORM_MEMORY,
       1, 2 * GI, 2 * GI),
    OK("init-before-sidecar", NULL, 0, NULL, 30 * GI, 0, 1, NULL, false, 4, "warmup",
       GQ_FORM_MEMORY, 1, 30 * GI, 30 * GI),
    OK("init-small", NULL, 0, NULL, 10 * GI, 0, 1, NULL, false, 2, "prep", GQ_FORM_MEMORY, 1,
       4 * GI, 4 * GI),
    OK("init-whole-gpus", NULL, 0, NULL, 4 * 141 * GI, 4, 1, NULL, false, 2, "prep", GQ_FORM_WHOLE,
       4, 141 * GI, 141 * GI),
    OK("overhead", NULL, 0, NULL, 11 * GI, 0, 1, NULL, false, 1, "app", GQ_FORM_MEMORY, 1, 10 * GI,
       10 * GI),
    OK("overhead-cpu-only", NULL, 0, NULL, 0, 0, 0, NULL, false, 0, NULL, GQ_FORM_NONE, 0, 0, 0),
    ERR("overhead-negative", NULL, 0, NULL, GQ_EINVAL,
        "spec.overhead[\"gpuquota.io/gpu-memory\"] \"-1Gi\" must not be negative"),
    OK("cpu-only", NULL, 0, "a10", 0, 0, 0, "a10", false, 0, NULL, GQ_FORM_NONE, 0, 0, 0),
    /* shapes */
    ERR("containers-not-array", NULL, 0, NULL, GQ_EINVAL, "spec.containers must be an array"),
    ERR("limits-not-object", NULL, 0, NULL, GQ_EINVAL,
        "spec.containers[0].resources.limits must be an object"),
    ERR("container-no-name", NULL, 0, NULL, GQ_EINVAL, "spec.containers[0].name is required"),
    ERR("no-spec", NULL, 0, NULL, GQ_EINVAL, "spec is required"),
    /* the container cap is for GPU pods: a pod asking for no GPU is never
     * refused for its size */
    OK("too-many-containers", NULL, 0, NULL, 0, 0, 0, NULL, false, 0, NULL, GQ_FORM_NONE, 0, 0, 0),
    ERR("too-many-containers-gpu", NULL, 0, NULL, GQ_EINVAL,
        "container \"c256\" asks for a GPU and the pod has 257 containers (app and init); a pod "
        "that uses a GPU may have at most 256"),
    ERR("restart-policy-not-string", NULL, 0, NULL, GQ_EINVAL,
        "spec.initContainers[0].restartPolicy must be a string"),
};

static gq_config *make_config(const pc_case *c)
{
    gq_config *cfg = NULL;
    gq_err err;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    if (c->backend)
        assert_int_equal(gq_backend_parse(c->backend, &cfg->backend), GQ_OK);
    if (c->unit)
        cfg->memory_unit = c->unit;
    if (c->default_model) {
        free(cfg->default_model);
        cfg->default_model = strdup(c->default_model);
        assert_non_null(cfg->default_model);
    }
    return cfg;
}

static json_object *load_pod(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/pods/%s.json", GQ_TEST_DATA, name);
    json_object *pod = json_object_from_file(path);
    if (!pod)
        fail_msg("cannot read %s", path);
    return pod;
}

static void check_case(const pc_case *c, json_object *pod)
{
    gq_config *cfg = make_config(c);
    gq_pod_cost cost;
    gq_err err;
    gq_err_clear(&err);
    gq_pod_cost_init(&cost);
    gq_code rc = gq_pod_cost_compute(cfg, pod, &cost, &err);
    if (rc != c->rc)
        fail_msg("%s: rc %d, want %d (%s)", c->file, rc, c->rc, err.msg);
    if (rc) {
        size_t n = strlen(c->msg);
        if (n && c->msg[n - 1] == '*') {
            if (strncmp(err.msg, c->msg, n - 1))
                fail_msg("%s: message\n  got  %s\n  want %s", c->file, err.msg, c->msg);
        } else if (strcmp(err.msg, c->msg)) {
            fail_msg("%s: message\n  got  %s\n  want %s", c->file, err.msg, c->msg);
        }
        assert_null(cost.ctrs);
        assert_int_equal(cost.n_ctrs, 0);
    } else {
        if (cost.gpu_memory != c->gpu_memory || cost.gpus != c->gpus ||
            cost.gpu_pods != c->gpu_pods || cost.n_ctrs != c->n_ctrs)
            fail_msg("%s: got gpu-memory %lld gpus %lld gpu-pods %lld ctrs %zu", c->file,
                     (long long)cost.gpu_memory, (long long)cost.gpus, (long long)cost.gpu_pods,
                     cost.n_ctrs);
        if (c->model) {
            assert_non_null(cost.model);
            assert_string_equal(cost.model->name, c->model);
        } else {
            assert_null(cost.model);
        }
        assert_int_equal(cost.model_pinned, c->pinned);
        if (c->n_ctrs) {
            const gq_ctr_cost *k = &cost.ctrs[0];
            assert_string_equal(k->name, c->name0);
            if (k->form != c->form0 || k->gpus != c->ctr_gpus0 || k->memory_per_gpu != c->mem0 ||
                k->charged_per_gpu != c->charged0)
                fail_msg("%s: container %s form %s gpus %lld memory %lld charged %lld", c->file,
                         k->name, gq_form_name(k->form), (long long)k->gpus,
                         (long long)k->memory_per_gpu, (long long)k->charged_per_gpu);
            assert_int_equal(k->exclusive, c->form0 == GQ_FORM_WHOLE);
        }
    }
    gq_pod_cost_dispose(&cost);
    gq_config_free(cfg);
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *pod = load_pod(cases[i].file);
        check_case(&cases[i], pod);
        json_object_put(pod);
    }
}

/* The shared fixture: the Job controller creating a pod with 8 whole H100s
 * pinned by a gpu.product nodeSelector. */
static void test_admission_review_fixture(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/admissionreview-pod-create.json", GQ_TEST_DATA);
    json_object *review = json_object_from_file(path), *req, *pod;
    assert_non_null(review);
    assert_true(json_object_object_get_ex(review, "request", &req));
    assert_true(json_object_object_get_ex(req, "object", &pod));
    pc_case c = OK("admissionreview-pod-create", NULL, 0, NULL, 640 * GI, 8, 1, "h100-80gb", true,
                   1, "trainer", GQ_FORM_WHOLE, 8, 80 * GI, 80 * GI);
    check_case(&c, pod);
    json_object_put(review);
}

static void test_original_and_kinds(void **state)
{
    (void)state;
    pc_case c = {.file = "sidecar-before-init"};
    gq_config *cfg = make_config(&c);
    json_object *pod = load_pod("sidecar-before-init");
    gq_pod_cost cost;
    gq_err err;
    gq_pod_cost_init(&cost);
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_OK);
    assert_int_equal(cost.n_ctrs, 4);
    const char *names[] = {"proxy", "warmup", "app", "app2"};
    gq_ctr_kind kinds[] = {GQ_CTR_SIDECAR, GQ_CTR_INIT, GQ_CTR_APP, GQ_CTR_APP};
    size_t idx[] = {0, 1, 0, 1};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(cost.ctrs[i].name, names[i]);
        assert_int_equal(cost.ctrs[i].kind, kinds[i]);
        assert_int_equal(cost.ctrs[i].index, idx[i]);
    }
    assert_string_equal(cost.ctrs[0].original, "gpuquota.io/gpu-memory=2Gi");
    /* computing again into a filled result replaces it */
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_OK);
    assert_int_equal(cost.n_ctrs, 4);
    /* an error empties it */
    json_object *bad = load_pod("fraction-1.5");
    assert_int_equal(gq_pod_cost_compute(cfg, bad, &cost, &err), GQ_EINVAL);
    assert_null(cost.ctrs);
    assert_int_equal(cost.n_ctrs, 0);
    assert_int_equal(cost.gpu_memory, 0);
    assert_null(cost.model);
    json_object_put(bad);
    gq_pod_cost_dispose(&cost);
    gq_pod_cost_dispose(&cost);
    gq_pod_cost_dispose(NULL);
    json_object_put(pod);

    pod = load_pod("memory-x2-a100");
    cfg->backend = GQ_BACKEND_HAMI;
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_OK);
    assert_string_equal(cost.ctrs[0].original, "gpuquota.io/gpu-memory=10Gi,nvidia.com/gpu=2");
    gq_pod_cost_dispose(&cost);
    json_object_put(pod);

    pod = load_pod("fraction-number-default");
    free(cfg->default_model);
    cfg->default_model = strdup("a10");
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_OK);
    assert_string_equal(cost.ctrs[0].original, "nvidia.com/gpu=0.25");
    gq_pod_cost_dispose(&cost);
    json_object_put(pod);
    gq_config_free(cfg);
}

static gq_limit_range *limit_range(const char *limits)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPULimitRange\","
             "\"metadata\":{\"name\":\"lr\",\"namespace\":\"team-a\"},\"spec\":{\"limits\":%s}}",
             limits);
    json_object *o = json_tokener_parse(text);
    gq_limit_range *lr = NULL;
    gq_err err;
    assert_non_null(o);
    if (gq_limit_range_parse(o, &lr, &err))
        fail_msg("limit range: %s", err.msg);
    json_object_put(o);
    return lr;
}

/* Whole GPUs of unknown model cost the largest model the namespace may use:
 * the one every allowedModels list names, else the catalog's largest. */
static void test_unknown_model_priced_in_scope(void **state)
{
    (void)state;
    static const struct {
        const char *lr1, *lr2; /* spec.limits of up to two GPULimitRanges */
        const char *model;     /* what two whole GPUs are charged as */
        int64_t gib;           /* per GPU */
    } t[] = {
        {NULL, NULL, "h200", 141},
        {"[{\"type\":\"Container\",\"allowedModels\":[\"t4\",\"A10\"]}]", NULL, "a10", 24},
        {"[{\"type\":\"Container\",\"allowedModels\":[\"a10\",\"l4\",\"a100-80gb\"]}]",
         "[{\"type\":\"Pod\",\"allowedModels\":[\"t4\",\"l4\"]},{\"type\":\"Container\","
         "\"maxGPUs\":8}]",
         "l4", 24},
        /* nothing passes every list: the pod is refused by them anyway */
        {"[{\"type\":\"Container\",\"allowedModels\":[\"t4\"]}]",
         "[{\"type\":\"Container\",\"allowedModels\":[\"l4\"]}]", "h200", 141},
        {"[{\"type\":\"Container\",\"maxGPUs\":8}]", NULL, "h200", 141},
    };
    pc_case c = {.file = "whole-2"};
    gq_config *cfg = make_config(&c);
    json_object *pod = load_pod("whole-2"), *pinned = load_pod("whole-t4-product-ann");
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        gq_limit_range *lrs[2] = {t[i].lr1 ? limit_range(t[i].lr1) : NULL,
                                  t[i].lr2 ? limit_range(t[i].lr2) : NULL};
        gq_cost_scope scope = {(const gq_limit_range *const *)lrs,
                               t[i].lr2   ? 2
                               : t[i].lr1 ? 1
                                          : 0,
                               GQ_TRUST_REQUEST};
        gq_pod_cost cost;
        gq_err err;
        gq_pod_cost_init(&cost);
        assert_int_equal(gq_pod_cost_compute_in(cfg, pod, &scope, &cost, &err), GQ_OK);
        assert_true(cost.priced_unknown);
        assert_null(cost.model);
        assert_non_null(cost.ctrs[0].priced_as);
        assert_string_equal(cost.ctrs[0].priced_as->name, t[i].model);
        assert_int_equal(cost.ctrs[0].charged_per_gpu, t[i].gib * GI);
        assert_int_equal(cost.gpu_memory, 2 * t[i].gib * GI);
        assert_int_equal(cost.gpus, 2);
        /* a pinned model is what it is */
        assert_int_equal(gq_pod_cost_compute_in(cfg, pinned, &scope, &cost, &err), GQ_OK);
        assert_false(cost.priced_unknown);
        assert_null(cost.ctrs[0].priced_as);
        assert_int_equal(cost.gpu_memory, 16 * GI);
        gq_pod_cost_dispose(&cost);
        gq_limit_range_free(lrs[0]);
        gq_limit_range_free(lrs[1]);
    }
    json_object_put(pinned);
    json_object_put(pod);
    gq_config_free(cfg);
}

/* Who set a label or annotation, by the pod's managedFields. */
static void test_user_set(void **state)
{
    (void)state;
    json_object *forged = load_pod("forged-shared-requests");
    json_object *rewritten = load_pod("rewritten-shared");
    json_object *bare = load_pod("forged-shared-requests-unlabelled");
    assert_true(gq_pod_user_set(forged, true, GQ_LABEL_MANAGED));
    assert_true(gq_pod_user_set(forged, false, GQ_ANN_REQUESTS));
    assert_false(gq_pod_user_set(forged, true, GQ_ANN_REQUESTS)); /* a label of that name */
    assert_false(gq_pod_user_set(forged, false, "gpuquota.io/charged"));
    assert_false(gq_pod_managed(forged));
    assert_true(gq_pod_user_set(rewritten, false, GQ_ANN_GPU_MODEL));
    assert_false(gq_pod_user_set(rewritten, false, GQ_ANN_REQUESTS));
    assert_false(gq_pod_user_set(rewritten, true, GQ_LABEL_MANAGED));
    assert_true(gq_pod_managed(rewritten));
    /* no history: nothing is known to be the author's; no label: not managed */
    assert_false(gq_pod_user_set(bare, false, GQ_ANN_REQUESTS));
    assert_false(gq_pod_managed(bare));
    assert_false(gq_pod_user_set(NULL, false, GQ_ANN_REQUESTS));
    assert_false(gq_pod_user_set(forged, false, NULL));
    json_object_put(bare);
    json_object_put(rewritten);
    json_object_put(forged);
}

static void test_not_a_pod(void **state)
{
    (void)state;
    gq_config *cfg = NULL;
    gq_pod_cost cost;
    gq_err err;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    gq_pod_cost_init(&cost);
    json_object *arr = json_object_new_array();
    assert_int_equal(gq_pod_cost_compute(cfg, arr, &cost, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "a pod must be a JSON object");
    assert_int_equal(gq_pod_cost_compute(cfg, NULL, &cost, &err), GQ_EINVAL);
    json_object *pod = json_tokener_parse("{\"spec\":{},\"metadata\":[]}");
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "metadata must be an object");
    json_object_put(pod);
    pod = json_tokener_parse("{\"spec\":{\"containers\":[7]}}");
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "spec.containers[0] must be an object");
    json_object_put(pod);
    pod = json_tokener_parse("{\"spec\":{\"containers\":[]}}");
    assert_int_equal(gq_pod_cost_compute(cfg, pod, &cost, &err), GQ_OK);
    assert_int_equal(cost.gpu_pods, 0);
    json_object_put(pod);
    json_object_put(arr);
    gq_pod_cost_dispose(&cost);
    gq_config_free(cfg);
}

static void test_terminal(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        bool terminal;
    } t[] = {
        {"{\"status\":{\"phase\":\"Succeeded\"}}", true},
        {"{\"status\":{\"phase\":\"Failed\"}}", true},
        {"{\"status\":{\"phase\":\"Running\"}}", false},
        {"{\"status\":{\"phase\":\"Pending\"}}", false},
        {"{\"status\":{\"phase\":7}}", false},
        {"{\"status\":[]}", false},
        {"{}", false},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        json_object *pod = json_tokener_parse(t[i].json);
        assert_non_null(pod);
        assert_int_equal(gq_pod_is_terminal(pod), t[i].terminal);
        json_object_put(pod);
    }
    assert_false(gq_pod_is_terminal(NULL));
}

static void test_form_names(void **state)
{
    (void)state;
    assert_string_equal(gq_form_name(GQ_FORM_MEMORY), "memory");
    assert_string_equal(gq_form_name(GQ_FORM_FRACTION), "fraction");
    assert_string_equal(gq_form_name(GQ_FORM_HAMI_MEMORY), "hami-memory");
    assert_string_equal(gq_form_name(GQ_FORM_KAI_FRACTION), "kai-fraction");
    assert_string_equal(gq_form_name(GQ_FORM_WHOLE), "whole");
    assert_string_equal(gq_form_name(GQ_FORM_BACKEND), "backend");
    assert_string_equal(gq_form_name((gq_form)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_admission_review_fixture),
        cmocka_unit_test(test_original_and_kinds),
        cmocka_unit_test(test_unknown_model_priced_in_scope),
        cmocka_unit_test(test_user_set),
        cmocka_unit_test(test_not_a_pod),
        cmocka_unit_test(test_terminal),
        cmocka_unit_test(test_form_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
