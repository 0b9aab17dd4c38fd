/* Fuzz the custom-resource parsers and the typed status: the input is a
 * JSON document tried as GPUQuota/GPUTenantQuota, GPULimitRange and as a
 * quota status (decoded in each mode, worked on, and encoded: what the
 * encoder writes must decode again to the same bytes); the raw bytes are
 * also tried as an RFC 3339 time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/jsonutil.h"
#include "quota/crd.h"
#include "quota/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the encoder writes decodes again, and encodes to the same bytes. */
static void round_trip(const gq_quota_status *st)
{
    json_object *e1 = gq_quota_status_encode(st), *e2 = NULL;
    gq_quota_status back;
    gq_err err;
    if (!e1)
        return;
    if (gq_quota_status_decode(e1, GQ_STATUS_POLICY, &back, &err) == GQ_OK)
        gq_quota_status_dispose(&back);
    else
        abort();
    if (gq_quota_status_decode(e1, GQ_STATUS_CHARGE, &back, &err) != GQ_OK || back.dropped)
        abort();
    if ((e2 = gq_quota_status_encode(&back)) &&
        strcmp(json_object_to_json_string_ext(e1, JSON_C_TO_STRING_PLAIN),
               json_object_to_json_string_ext(e2, JSON_C_TO_STRING_PLAIN)))
        abort();
    json_object_put(e2);
    gq_quota_status_dispose(&back);
    json_object_put(e1);
}

/* The status decoded in each mode and worked on as the writers do: each
 * step may fail on hostile input; none may crash or leak. */
static void status_ops(json_object *st)
{
    static const gq_status_mode modes[] = {GQ_STATUS_POLICY, GQ_STATUS_CHARGE, GQ_STATUS_SALVAGE};
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        gq_quota_status s;
        gq_amounts sum;
        gq_err err;
        bool added;
        gq_reservation r = {.key = "fuzz", .namespace_ = "ns", .pod = "p", .expires = 1795273625};
        if (gq_quota_status_decode(st, modes[m], &s, &err) != GQ_OK)
            continue;
        int failures = 0;
        round_trip(&s);
        failures += gq_quota_status_sum(&s, 1795273565, &sum, &err) != GQ_OK;
        failures += gq_quota_status_add_reservation(&s, &r, &added, &err) != GQ_OK;
        (void)gq_quota_status_drop_expired(&s, 1795273565);
        if (s.n_reservations && !gq_quota_status_remove_reservation(&s, s.reservations[0].key))
            abort();
        failures += gq_quota_status_sum(&s, 1795273565, &sum, &err) != GQ_OK;
        (void)failures;
        round_trip(&s);
        gq_quota_status_dispose(&s);
    }
}

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
    if (st)
        status_ops(st);
    json_object_put(o);
    return 0;
}
