/* Amounts of the quota keys (gpu-memory, gpu-pods, gpus): the ResourceList
 * of a quota's spec.hard and of every usage and charge in its status
 * (quota/crd.h, quota/status.h), parsed, formatted and written as JSON. */
#ifndef GQ_AMOUNTS_H
#define GQ_AMOUNTS_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "quota/quantity.h"

/* Quota keys, in Kubernetes' sorted (byte) order so messages list them sorted. */
typedef enum gq_qkey {
    GQ_KEY_GPU_MEMORY = 0, /* "gpu-memory": bytes */
    GQ_KEY_GPU_PODS = 1,   /* "gpu-pods": pods using any GPU */
    GQ_KEY_GPUS = 2,       /* "gpus": whole exclusive GPUs */
    GQ_KEY_COUNT
} gq_qkey;

/* "gpu-memory", "gpu-pods", "gpus"; NULL for an out-of-range key. */
const char *gq_qkey_name(gq_qkey k);

/* A ResourceList over the quota keys. A key not `set` is absent (in `hard`:
 * unlimited). Values are whole numbers >= 0. fmt remembers the format a value
 * was written in, so "limited: gpu-memory=64G" prints the way it was written. */
typedef struct gq_amounts {
    int64_t v[GQ_KEY_COUNT];
    bool set[GQ_KEY_COUNT];
    gq_qformat fmt[GQ_KEY_COUNT];
} gq_amounts;

/* No key set; gpu-memory formats in binary SI, as the amounts we compute
 * ourselves print (like the charge). */
void gq_amounts_clear(gq_amounts *a);

/* Parse a ResourceList object of quota keys (values: quantity strings or JSON
 * integers). field names the object in messages ("spec.hard"). Unknown keys,
 * negative and fractional values fail. Writes *out only on success. */
gq_code gq_amounts_parse(json_object *obj, const char *field, gq_amounts *out, gq_err *err) GQ_WUR;

/* gq_amounts_parse allowing only the keys of the bit set allowed (bit k for
 * gq_qkey k; another key fails naming the ones supported). */
gq_code gq_amounts_parse_keys(json_object *obj, const char *field, unsigned allowed,
                              gq_amounts *out, gq_err *err) GQ_WUR;

/* One value (a quantity string or a JSON integer), whole and >= 0: *out and
 * the format it was written in, *fmt. field names it in messages. */
gq_code gq_amount_parse(json_object *val, const char *field, int64_t *out, gq_qformat *fmt,
                        gq_err *err) GQ_WUR;

/* Canonical text of one value: bytes in binary SI for gpu-memory (unless it
 * was written in another format), plain integers for the counts. */
void gq_amount_format(const gq_amounts *a, gq_qkey k, char buf[GQ_QUANTITY_STR_MAX]);

/* A new JSON object with the set keys as canonical quantity strings. Caller
 * owns the result (json_object_put); NULL on allocation failure. */
json_object *gq_amounts_to_json(const gq_amounts *a);

#endif
