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

/* What a DeviceClass's devices are, as far as gpuquota can tell. */
typedef enum gq_class_kind {
    GQ_CLASS_UNKNOWN = 0, /* no selector pins a driver, or the class cannot be read */
    GQ_CLASS_GPU,         /* in deviceClasses, or pins a driver of gpuDrivers */
    GQ_CLASS_OTHER,       /* pins another driver: its devices are not GPUs */
} gq_class_kind;

/* The kind of DeviceClass dc (resource.k8s.io/v1 JSON, borrowed; NULL when
 * it does not exist) under cfg, by its spec.selectors: gpuquota reads a CEL
 * expression that is the common form
 *   device.driver == "NAME"
 * (either quote, spaces around ==, in parentheses or not), or a conjunction
 * with no "||" or "?:" at its top level (they bind looser than "&&") one of
 * whose operands is that form: only then is the expression false for every
 * other driver. The class
 * is GPU when a selector pins a driver of cfg->gpu_drivers, OTHER when the
 * selectors pin only other drivers, else UNKNOWN (a class without such a
 * selector may select any device, GPUs included). A class listed in
 * deviceClasses is GPU whatever it says. */
gq_class_kind gq_device_class_kind(const gq_config *cfg, json_object *dc);

/* The driver an expression pins in the form above: *out points into expr
 * (len *n_out). False when it pins none that gpuquota can read. */
bool gq_dra_selector_driver(const char *expr, const char **out, size_t *n_out);

/* How the shell tells the core what classes outside deviceClasses are
 * (typically a read of the DeviceClass and gq_device_class_kind). */
typedef struct gq_class_lookup {
    void *ctx;
    gq_class_kind (*kind)(void *ctx, const char *class_name);
} gq_class_lookup;

/* Price spec (a ResourceClaimSpec: {"devices":{"requests":[...]}}; borrowed)
 * under cfg. what names the claim in messages ("ResourceClaimTemplate
 * \"x\""). A request counts when its deviceClassName is one of
 * cfg->device_classes, or a class classes says is GPU (or, when classes
 * cannot tell, one of whose own selectors pins a driver of gpuDrivers):
 * `count` devices (default 1), each of the class's model, else of the
 * model a selector `device.attributes["D"].productName == "P"` names (P a
 * catalog product or name), else priced as the largest model; memory per
 * device is capacity.requests.memory when given. A request of a class whose
 * devices are not GPUs costs nothing. A firstAvailable request is charged
 * its most expensive alternative. GQ_EUNSUPPORTED for allocationMode All on
 * a GPU class (the count is not known at admission) and for a class
 * gpuquota cannot tell is a GPU class or not (classes NULL: every class
 * outside deviceClasses); GQ_EINVAL / GQ_ELIMIT for malformed or oversized
 * input; *out is written only on success. */
gq_code gq_claim_spec_cost(const gq_config *cfg, json_object *spec, const gq_class_lookup *classes,
                           const char *what, gq_claim_cost *out, gq_err *err) GQ_WUR;

/* The product a CEL selector names when it has exactly the common form
 *   device.attributes["DOMAIN"].productName == "PRODUCT"
 * (either quote, spaces around ==); *out points into expr (len *n_out).
 * False for anything else: gpuquota does not evaluate CEL. */
bool gq_dra_selector_product(const char *expr, const char **out, size_t *n_out);

#endif
