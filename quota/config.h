/* gpuquota configuration (DESIGN.md §5): the model, the embedded default, and
 * the GPU model catalog.
 *
 * A configuration is immutable once built; every string and array in it is
 * owned by the gq_config and freed by gq_config_free. Lookups return borrowed
 * pointers valid for the life of the config. */
#ifndef GQ_CONFIG_H
#define GQ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quota/model.h"
#include "common/gq_error.h"

typedef enum gq_backend {
    GQ_BACKEND_ALIYUN = 0, /* default: aliyun.com/gpu-mem units */
    GQ_BACKEND_HAMI,
    GQ_BACKEND_VOLCANO,
    GQ_BACKEND_MIG,
    GQ_BACKEND_TIMESLICING,
} gq_backend;

/* "aliyun", "hami", ...; NULL for an unknown value. */
const char *gq_backend_name(gq_backend b);
/* GQ_EINVAL for an unknown name. */
gq_code gq_backend_parse(const char *name, gq_backend *out) GQ_WUR;

typedef struct gq_audit_config {
    char *path;       /* NULL/"" = audit records go to stderr */
    int64_t max_size; /* bytes before rotation */
    int max_files;    /* rotated files kept */
} gq_audit_config;

/* A DRA DeviceClass whose devices are GPUs (config `deviceClasses`). */
typedef struct gq_device_class {
    char *name;  /* DeviceClass metadata.name, e.g. "gpu.nvidia.com" */
    char *model; /* catalog name its devices are; NULL: read from the claim's
                    selectors, else priced as the largest model */
} gq_device_class;

#define GQ_DEFAULT_GPU_DEVICE_CLASS "gpu.nvidia.com" /* NVIDIA's DRA driver */

/* maxQueuedPods when the configuration does not say. */
#define GQ_MAX_QUEUED_PODS_DEFAULT 1000

typedef struct gq_config {
    gq_backend backend;
    int64_t memory_unit;  /* bytes; > 0 */
    char *scheduler_name; /* NULL = leave schedulerName alone */
    char *default_model;  /* catalog name; NULL = none */
    gq_model *models;
    size_t n_models;
    bool require_quota;
    /* Pods one Queue quota may hold in its queue (maxQueuedPods): /validate
     * refuses one more while status.queuedPods is at it. The controller
     * holds every queued pod in memory, and one tenant's stream of them
     * would otherwise stop the queues of all (docs/queueing.md). */
    int max_queued_pods;
    char **exempt_namespaces;
    size_t n_exempt_namespaces;
    gq_audit_config audit;
    gq_device_class *device_classes; /* default: gpu.nvidia.com, model from selectors */
    size_t n_device_classes;
    /* DRA drivers whose devices are GPUs (default: gpu.nvidia.com): a
     * DeviceClass outside device_classes whose selectors pin one of them
     * (device.driver == "...") is priced as GPUs too (quota/dra.h). */
    char **gpu_drivers;
    size_t n_gpu_drivers;
} gq_config;

/* The deviceClasses entry named name, NULL when its devices are not GPUs. */
const gq_device_class *gq_config_find_device_class(const gq_config *cfg, const char *name);

/* The embedded default configuration (backend aliyun, memoryUnit 1Gi, the
 * built-in catalog). Caller owns *out. */
gq_code gq_config_default(gq_config **out, gq_err *err) GQ_WUR;

/* Parse YAML from memory. filename is used only in messages, which have the
 * form "file:line: message". Keys absent from the document keep their
 * embedded defaults; `models` entries replace built-in models of the same
 * name and add new ones. Unknown keys, wrong types and bad values fail.
 * Caller owns *out; on error *out is untouched. */
gq_code gq_config_parse(const char *buf, size_t len, const char *filename, gq_config **out,
                        gq_err *err) GQ_WUR;

/* Render cfg as YAML that gq_config_parse accepts (round trip). Caller frees
 * *out with free(). GQ_EINVAL for an unknown backend, GQ_ENOMEM, GQ_ELIMIT
 * past 8 MiB (eight times the longest configuration any reader takes). */
gq_code gq_config_to_yaml(const gq_config *cfg, char **out, size_t *out_len, gq_err *err) GQ_WUR;

void gq_config_free(gq_config *cfg);

/* Find a model by catalog name or by one of its GFD product strings. Exact
 * match on the whole string (catalog names compare case-insensitively,
 * product strings exactly): "A10" never matches an A100. NULL if none. */
const gq_model *gq_config_find_model(const gq_config *cfg, const char *name);

/* The default model, or NULL when the config names none. */
const gq_model *gq_config_default_model(const gq_config *cfg);

/* True when driver is listed in gpuDrivers. */
bool gq_config_is_gpu_driver(const gq_config *cfg, const char *driver, size_t len);

/* True when ns is listed in exemptNamespaces. */
bool gq_config_is_exempt(const gq_config *cfg, const char *ns);

#endif
