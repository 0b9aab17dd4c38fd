/* Fuzz the kubeconfig parser (libyaml document walk, base64, path joins). */
#include <stdint.h>

#include "kube/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kube_config *cfg = NULL;
    gq_err err;
    if (kube_config_parse((const char *)data, size, "fuzz", "/base", NULL, &cfg, &err) == GQ_OK)
        kube_config_free(cfg);
    return 0;
}
