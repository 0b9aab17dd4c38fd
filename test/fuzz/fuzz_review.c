/* Fuzz the AdmissionReview decoder and the /mutate decision behind it.
 * Whatever decodes goes through wh_mutate_review under each backend; every
 * patch it answers with must apply to the object as sent and leave the
 * pod's cost unchanged, and the response must encode. The lean decoder
 * (what /mutate uses) must accept exactly what the full one accepts and
 * lead to byte-identical answers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/config.h"
#include "quota/jsonpatch.h"
#include "webhook/mutation.h"
#include "quota/podcost.h"
#include "webhook/review.h"

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

/* The two answers encode to the same bytes. */
static void same_answer(const wh_review_response *a, const wh_review_response *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    if (wh_review_encode(a, &x, &nx) != GQ_OK || wh_review_encode(b, &y, &ny) != GQ_OK ||
        nx != ny || memcmp(x, y, nx))
        abort();
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gq_config *cfg;
    gq_err err;
    if (!cfg && gq_config_default(&cfg, &err))
        abort();
    wh_review_request req, lean;
    gq_code full_rc = wh_review_decode((const char *)data, size, &req, &err);
    gq_code lean_rc = wh_review_decode_lean((const char *)data, size, &lean, &err);
    if ((full_rc == GQ_OK) != (lean_rc == GQ_OK))
        abort(); /* the lean decoder accepts something else */
    if (full_rc != GQ_OK)
        return 0;
    for (int b = GQ_BACKEND_ALIYUN; b <= GQ_BACKEND_TIMESLICING; b++) {
        cfg->backend = (gq_backend)b;
        wh_review_response resp, lresp;
        gq_code rc1 = wh_mutate_review(cfg, &req, NULL, 0, &resp, &err);
        gq_code rc2 = wh_mutate_review(cfg, &lean, NULL, 0, &lresp, &err);
        if (rc1 != rc2)
            abort();
        if (rc1 != GQ_OK)
            continue;
        same_answer(&resp, &lresp);
        wh_review_response_dispose(&lresp);
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
    wh_review_request_dispose(&lean);
    return 0;
}
