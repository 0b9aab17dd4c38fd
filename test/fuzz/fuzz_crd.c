/* Fuzz the custom-resource parsers and the status helpers: the input is a
 * JSON document tried as GPUQuota/GPUTenantQuota, GPULimitRange and as a
 * quota status; the raw bytes are also tried as an RFC 3339 time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/jsonutil.h"
#include "quota/crd.h"
#include "quota/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gq_err err;
    char tbuf[64];
    if (size < sizeof(tbuf)) {
        int64_t t;
        memcpy(tbuf, data, size);
        tbuf[size] = '\0';
        if (gq_time_parse_rfc3339(tbuf, &t, &err) == GQ_OK) {
            char out[GQ_RFC3339_MAX];
            gq_time_format_rfc3339(t, out);
        }
    }
    json_object *o = NULL;
    if (size > (1u << 20) || gq_json_parse((const char *)data, size, 64, &o, &err) != GQ_OK)
        return 0;

    gq_quota *q = NULL;
    if (gq_quota_parse(o, &q, &err) == GQ_OK) {
        gq_amounts a;
        if (gq_quota_in_use(q, 1795273565, NULL, &a, &err) == GQ_OK) {
            json_object *j = gq_amounts_to_json(&a);
            json_object_put(j);
        }
        for (size_t i = 0; i < q->n_models; i++)
            if (gq_quota_model_in_use(q, &q->models[i], 1795273565, NULL, &a, &err) == GQ_OK &&
                a.v[GQ_KEY_GPU_MEMORY] < 0)
                abort();
        gq_quota_free(q);
    }
    gq_limit_range *lr = NULL;
    if (gq_limit_range_parse(o, &lr, &err) == GQ_OK)
        gq_limit_range_free(lr);

    json_object *st =
        json_object_is_type(o, json_type_object) ? json_object_object_get(o, "status") : NULL;
    if (st) {
        gq_amounts sum;
        size_t dropped;
        bool added;
        gq_reservation r = {.key = "fuzz", .namespace_ = "ns", .pod = "p", .expires = 1795273625};
        /* Each step may fail on hostile input; none may crash or leak. */
        int failures = 0;
        failures += gq_status_sum(st, 1795273565, &sum, &err) != GQ_OK;
        failures += gq_status_add_reservation(st, &r, &added, &err) != GQ_OK;
        failures += gq_status_drop_expired(st, 1795273565, &dropped, &err) != GQ_OK;
        failures += gq_status_sum(st, 1795273565, &sum, &err) != GQ_OK;
        (void)failures;
    }
    json_object_put(o);
    return 0;
}
