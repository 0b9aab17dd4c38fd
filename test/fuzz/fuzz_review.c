/* Fuzz the AdmissionReview decoder and the /mutate decision behind it.
 * Whatever decodes goes through wh_mutate_review under each backend; every
 * patch it answers with must apply to the object as sent and leave the
 * pod's cost unchanged, and the response must encode. */
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "jsonpatch.h"
#include "mutation.h"
#include "podcost.h"
#include "review.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_patch(const gq_config *cfg, const wh_review_request *req,
                        const wh_review_response *resp)
{
    json_object *patched = NULL;
    gq_err err;
    if (!resp->patch)
        return;
    if (gq_patch_apply_text(req->object, resp->patch, resp->patch_len, &patched, &err))
        abort(); /* we answered with a patch that does not apply */
    gq_pod_cost a, b;
    gq_pod_cost_init(&a);
    gq_pod_cost_init(&b);
    if (gq_pod_cost_compute(cfg, req->object, &a, &err) ||
        gq_pod_cost_compute(cfg, patched, &b, &err) || a.gpu_memory != b.gpu_memory ||
        a.gpus != b.gpus || a.gpu_pods != b.gpu_pods)
        abort(); /* the rewrite changed what the pod costs */
    gq_pod_cost_dispose(&a);
    gq_pod_cost_dispose(&b);
    json_object_put(patched);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gq_config *cfg;
    gq_err err;
    if (!cfg && gq_config_default(&cfg, &err))
        abort();
    wh_review_request req;
    if (wh_review_decode((const char *)data, size, &req, &err) != GQ_OK)
        return 0;
    for (int b = GQ_BACKEND_ALIYUN; b <= GQ_BACKEND_TIMESLICING; b++) {
        cfg->backend = (gq_backend)b;
        wh_review_response resp;
        if (wh_mutate_review(cfg, &req, NULL, 0, &resp, &err) != GQ_OK)
            continue;
        check_patch(cfg, &req, &resp);
        gq_code rc = wh_review_response_add_warning(&resp, req.username);
        for (size_t i = 0; i < req.n_groups && !rc; i++)
            if (wh_review_response_set_audit(&resp, req.groups[i], req.name) == GQ_OK &&
                !wh_audit_key_valid(req.groups[i]))
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
