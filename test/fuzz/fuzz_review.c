/* Fuzz the AdmissionReview decoder, then push whatever decoded through the
 * response encoder with the request's own strings as warnings and message. */
#include <stdint.h>
#include <stdlib.h>

#include "review.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wh_review_request req;
    gq_err err;
    if (wh_review_decode((const char *)data, size, &req, &err) != GQ_OK)
        return 0;
    wh_review_response resp;
    if (wh_review_response_init(&resp, req.version, req.uid) == GQ_OK) {
        gq_code rc = wh_review_response_add_warning(&resp, req.name);
        rc |= wh_review_response_add_warning(&resp, req.username);
        for (size_t i = 0; i < req.n_groups; i++)
            if (wh_review_response_set_audit(&resp, req.groups[i], req.namespace) == GQ_OK &&
                !wh_audit_key_valid(req.groups[i]))
                abort();
        if (req.dry_run)
            rc |= wh_review_response_deny(&resp, 403, "Forbidden", req.sub_resource);
        if (rc != GQ_OK && rc != GQ_ENOMEM)
            abort();
        char *out = NULL;
        size_t len = 0;
        if (wh_review_encode(&resp, &out, &len) == GQ_OK)
            free(out);
        wh_review_response_dispose(&resp);
    }
    wh_review_request_dispose(&req);
    return 0;
}
