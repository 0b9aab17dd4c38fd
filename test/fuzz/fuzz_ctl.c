/* Fuzz the controller's readers of untrusted objects: the input is a JSON
 * document tried as a pod (compact record, linked into a store) and as a
 * GPUQuota/GPUTenantQuota whose status the reconcile rewrites over that
 * store, then reconciled again from its own output (which must be a no-op). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/jsonutil.h"
#include "controller/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 1795273565

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gq_config *cfg;
    gq_err err;
    if (!cfg && gq_config_default(&cfg, &err) != GQ_OK)
        return 0;
    json_object *o = NULL;
    if (size > (1u << 20) || gq_json_parse((const char *)data, size, 64, &o, &err) != GQ_OK)
        return 0;
    ctl_podstore *s = NULL;
    if (ctl_podstore_new(&s) != GQ_OK) {
        json_object_put(o);
        return 0;
    }
    ctl_pod *p = NULL;
    if (ctl_pod_from_json(s, cfg, o, &p, &err) == GQ_OK && p) {
        ctl_podstore_link(s, p);
        (void)ctl_pod_counts(p, NOW);
        (void)ctl_podstore_has_uid(s, ctl_pod_namespace(p), ctl_pod_uid(p));
    }
    ctl_result r;
    ctl_result_init(&r);
    gq_code rc = ctl_podstore_reconcile(s, o, NOW, &r, &err);
    if (rc == GQ_EINVAL && json_object_is_type(o, json_type_object)) {
        /* an invalid spec: the status that says so must be stable too */
        char why[GQ_ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err.msg);
        if (ctl_reconcile_invalid(o, why, NOW, &r, &err) == GQ_OK) {
            json_object_object_add(o, "status", json_object_get(r.status));
            ctl_result r2;
            ctl_result_init(&r2);
            if (ctl_reconcile_invalid(o, why, NOW, &r2, &err) == GQ_OK &&
                (r2.changed || r2.became_invalid))
                abort();
            ctl_result_dispose(&r2);
        }
    } else if (rc == GQ_OK) {
        json_object_object_add(o, "status", json_object_get(r.status));
        ctl_result r2;
        ctl_result_init(&r2);
        if (ctl_podstore_reconcile(s, o, NOW, &r2, &err) == GQ_OK && r2.changed)
            abort(); /* a written status must reconcile to itself */
        ctl_result_dispose(&r2);
    }
    ctl_result_dispose(&r);
    ctl_podstore_free(s);
    json_object_put(o);
    return 0;
}
