/* Any JSON (or YAML) document as a pod, under every backend, with and without
 * a default model: gq_pod_cost_compute must return a code, never crash or
 * leak, and on success the charge must be consistent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/config.h"
#include "quota/podcost.h"
#include "common/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const gq_config *cfg, json_object *pod)
{
    gq_pod_cost cost;
    gq_err err;
    gq_pod_cost_init(&cost);
    if (gq_pod_cost_compute(cfg, pod, &cost, &err) == GQ_OK) {
        if (cost.gpu_memory < 0 || cost.gpus < 0 || cost.gpu_pods < 0 || cost.gpu_pods > 1 ||
            (cost.n_ctrs > 0) != (cost.gpu_pods == 1))
            abort();
        for (size_t i = 0; i < cost.n_ctrs; i++)
            /* a GPU is never free, whole ones included */
            if (cost.ctrs[i].gpus < 1 || cost.ctrs[i].charged_per_gpu <= 0 ||
                (!cost.ctrs[i].exclusive &&
                 cost.ctrs[i].charged_per_gpu < cost.ctrs[i].memory_per_gpu))
                abort();
    } else if (cost.ctrs || cost.n_ctrs || err.msg[0] == '\0') {
        abort();
    }
    gq_pod_cost_dispose(&cost);
    (void)gq_pod_is_terminal(pod);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const gq_backend backends[] = {GQ_BACKEND_ALIYUN, GQ_BACKEND_HAMI, GQ_BACKEND_VOLCANO,
                                          GQ_BACKEND_MIG, GQ_BACKEND_TIMESLICING};
    json_object **docs = NULL;
    size_t n = 0;
    gq_config *cfg = NULL;
    gq_err err;
    if (gq_yaml_load((const char *)data, size, "fuzz", &docs, &n, &err) != GQ_OK)
        return 0;
    if (gq_config_default(&cfg, &err) != GQ_OK)
        abort();
    for (size_t d = 0; d < n; d++)
        for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
            cfg->backend = backends[b];
            free(cfg->default_model);
            cfg->default_model = NULL;
            check(cfg, docs[d]);
            cfg->default_model = strdup("a100-40gb");
            check(cfg, docs[d]);
        }
    gq_config_free(cfg);
    gq_yaml_docs_free(docs, n);
    return 0;
}
