/* The configuration model: embedded defaults, lookups, backend names.
 * YAML parsing and rendering live in config_yaml.c. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "quota/catalog.h"
#include "quota/config.h"

static const char *const backend_names[] = {
    [GQ_BACKEND_ALIYUN] = "aliyun",           [GQ_BACKEND_HAMI] = "hami",
    [GQ_BACKEND_VOLCANO] = "volcano",         [GQ_BACKEND_MIG] = "mig",
    [GQ_BACKEND_TIMESLICING] = "timeslicing",
};

#define N_BACKENDS (sizeof(backend_names) / sizeof(backend_names[0]))

const char *gq_backend_name(gq_backend b)
{
    if ((unsigned)b >= N_BACKENDS)
        return NULL;
    return backend_names[b];
}

gq_code gq_backend_parse(const char *name, gq_backend *out)
{
    if (!name)
        return GQ_EINVAL;
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (!strcmp(name, backend_names[i])) {
            *out = (gq_backend)i;
            return GQ_OK;
        }
    }
    return GQ_EINVAL;
}

void gq_config_free(gq_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->scheduler_name);
    free(cfg->default_model);
    for (size_t i = 0; i < cfg->n_models; i++)
        gq_model_dispose(&cfg->models[i]);
    free(cfg->models);
    for (size_t i = 0; i < cfg->n_exempt_namespaces; i++)
        free(cfg->exempt_namespaces[i]);
    free(cfg->exempt_namespaces);
    for (size_t i = 0; i < cfg->n_gpu_drivers; i++)
        free(cfg->gpu_drivers[i]);
    free(cfg->gpu_drivers);
    free(cfg->audit.path);
    for (size_t i = 0; i < cfg->n_device_classes; i++) {
        free(cfg->device_classes[i].name);
        free(cfg->device_classes[i].model);
    }
    free(cfg->device_classes);
    free(cfg);
}

/* Embedded defaults. defaultModel is deliberately none: charging a pod that
 * names no model against a guessed card would silently miscount memory
 * fractions on every other kind of node, so an operator pins or configures
 * it. */
gq_code gq_config_default(gq_config **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    gq_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return gq_err_set(err, GQ_ENOMEM, "out of memory building the default configuration");
    cfg->backend = GQ_BACKEND_ALIYUN;
    cfg->memory_unit = GQ_GIB;
    cfg->require_quota = false;
    cfg->max_queued_pods = GQ_MAX_QUEUED_PODS_DEFAULT;
    cfg->audit.max_size = 100 * ((int64_t)1 << 20);
    cfg->audit.max_files = 5;
    rc = gq_catalog_models(&cfg->models, &cfg->n_models, err);
    if (rc)
        goto out;
    if (!(cfg->exempt_namespaces = calloc(1, sizeof(char *))) ||
        !(cfg->exempt_namespaces[0] = strdup("kube-system"))) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory building the default configuration");
        goto out;
    }
    cfg->n_exempt_namespaces = 1;
    if (!(cfg->device_classes = calloc(1, sizeof(*cfg->device_classes))) ||
        !(cfg->device_classes[0].name = strdup(GQ_DEFAULT_GPU_DEVICE_CLASS))) {
        rc = gq_err_oom(err);
        goto out;
    }
    cfg->n_device_classes = 1;
    if (!(cfg->gpu_drivers = calloc(1, sizeof(char *))) ||
        !(cfg->gpu_drivers[0] = strdup(GQ_DEFAULT_GPU_DEVICE_CLASS))) {
        rc = gq_err_oom(err);
        goto out;
    }
    cfg->n_gpu_drivers = 1;
    *out = cfg;
    cfg = NULL;
out:
    gq_config_free(cfg);
    return rc;
}

const gq_model *gq_config_find_model(const gq_config *cfg, const char *name)
{
    if (!cfg || !name || !*name)
        return NULL;
    /* Catalog names first: a product string never shadows a model name. */
    for (size_t i = 0; i < cfg->n_models; i++)
        if (!strcasecmp(cfg->models[i].name, name))
            return &cfg->models[i];
    for (size_t i = 0; i < cfg->n_models; i++)
        for (size_t j = 0; j < cfg->models[i].n_products; j++)
            if (!strcmp(cfg->models[i].products[j], name))
                return &cfg->models[i];
    return NULL;
}

const gq_model *gq_config_default_model(const gq_config *cfg)
{
    if (!cfg || !cfg->default_model)
        return NULL;
    return gq_config_find_model(cfg, cfg->default_model);
}

const gq_device_class *gq_config_find_device_class(const gq_config *cfg, const char *name)
{
    for (size_t i = 0; cfg && name && i < cfg->n_device_classes; i++)
        if (!strcmp(cfg->device_classes[i].name, name))
            return &cfg->device_classes[i];
    return NULL;
}

bool gq_config_is_gpu_driver(const gq_config *cfg, const char *driver, size_t len)
{
    for (size_t i = 0; cfg && driver && i < cfg->n_gpu_drivers; i++)
        if (strlen(cfg->gpu_drivers[i]) == len && !memcmp(cfg->gpu_drivers[i], driver, len))
            return true;
    return false;
}

bool gq_config_is_exempt(const gq_config *cfg, const char *ns)
{
    if (!cfg || !ns)
        return false;
    for (size_t i = 0; i < cfg->n_exempt_namespaces; i++)
        if (!strcmp(cfg->exempt_namespaces[i], ns))
            return true;
    return false;
}
