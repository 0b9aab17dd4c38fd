/* What a DRA claim (resource.k8s.io/v1 ResourceClaimSpec) asks of GPUs:
 * pure, bounded parsing of spec.devices.requests against the config's
 * deviceClasses (docs/models-and-dra.md). */
#ifndef GQ_DRA_H
#define GQ_DRA_H

#include <stdint.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "common/gq_error.h"

/* Kubernetes' own bounds (resource.k8s.io validation). */
#define GQ_DRA_MAX_REQUESTS 32      /* spec.devices.requests */
#define GQ_DRA_MAX_SUBREQUESTS 8    /* firstAvailable */
#define GQ_DRA_MAX_SELECTORS 32     /* selectors of one request */
#define GQ_DRA_MAX_COUNT 128        /* devices of one request gpuquota accepts */
#define GQ_DRA_MAX_EXPRESSION 10240 /* bytes of one CEL selector */

/* GPU devices a claim asks for. */
typedef struct gq_claim_cost {
    int64_t gpus;          /* devices of GPU device classes */
    int64_t gpu_memory;    /* bytes: per device the capacity request for memory, else the
                              model's memory, else the largest catalog model's */
    const gq_model *model; /* the one model every GPU device is of; NULL when unknown or
                              mixed (borrowed from the config) */
} gq_claim_cost;

/* Price spec (a ResourceClaimSpec: {"devices":{"requests":[...]}}; borrowed)
 * under cfg. what names the claim in messages ("ResourceClaimTemplate
 * \"x\""). A request counts when its deviceClassName is one of
 * cfg->device_classes: `count` devices (default 1), each of the class's
 * model, else of the model a selector `device.attributes["D"].productName ==
 * "P"` names (P a catalog product or name), else priced as the largest
 * model; memory per device is capacity.requests.memory when given. A
 * firstAvailable request is charged its most expensive alternative.
 * GQ_EUNSUPPORTED for allocationMode All on a GPU class (the count is not
 * known at admission); GQ_EINVAL / GQ_ELIMIT for malformed or oversized
 * input; *out is written only on success. */
gq_code gq_claim_spec_cost(const gq_config *cfg, json_object *spec, const char *what,
                           gq_claim_cost *out, gq_err *err) GQ_WUR;

/* The product a CEL selector names when it has exactly the common form
 *   device.attributes["DOMAIN"].productName == "PRODUCT"
 * (either quote, spaces around ==); *out points into expr (len *n_out).
 * False for anything else: gpuquota does not evaluate CEL. */
bool gq_dra_selector_product(const char *expr, const char **out, size_t *n_out);

#endif
