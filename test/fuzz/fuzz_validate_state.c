/* Fuzz `gpuquota admit --state` input and the validating decision over it:
 * the bytes are YAML/JSON documents loaded into the in-memory store (quotas,
 * tenants, limit ranges, namespaces, pods counted into usage); a fixed GPU
 * pod is then admitted twice (the second time as a retry) and a tampering
 * update is checked. Whatever the state, the decision must be reached
 * without a crash, and a retried admission must not be charged twice. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "webhook/memstore.h"
#include "webhook/validate.h"
#include "common/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char review_fmt[] =
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
    "\"uid\":\"fuzz\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
    "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
    "\"namespace\":\"team-a\",\"operation\":\"%s\",\"userInfo\":{\"username\":\"u\"},"
    "\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
    "\"namespace\":\"team-a\",\"labels\":{\"gpuquota.io/managed\":\"%s\"}},\"spec\":{"
    "\"priorityClassName\":\"high\",\"containers\":[{\"name\":\"c\",\"image\":\"x\","
    "\"resources\":{\"limits\":{\"gpuquota.io/gpu-memory\":\"8Gi\"}}}]}},"
    "\"oldObject\":%s}}";

static void decide(wh_validator *v, const char *op, const char *label, const char *old,
                   wh_validate_result *res)
{
    char body[2048];
    wh_review_request req;
    wh_review_response resp;
    gq_err err;
    snprintf(body, sizeof(body), review_fmt, op, label, old);
    if (wh_review_decode(body, strlen(body), &req, &err))
        abort();
    if (wh_validate_review(v, &req, &resp, res, &err) == GQ_OK)
        wh_review_response_dispose(&resp);
    wh_review_request_dispose(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gq_config *cfg = NULL;
    wh_memstore *ms = NULL;
    wh_validator *v = NULL;
    json_object **docs = NULL;
    size_t n = 0;
    gq_err err;
    wh_store st;
    if (size > (1u << 18) || gq_config_default(&cfg, &err))
        goto out;
    if (gq_yaml_load((const char *)data, size, "fuzz", &docs, &n, &err) ||
        wh_memstore_new(&ms, &err) || wh_memstore_load_state(ms, cfg, docs, n, 1764072000, &err))
        goto out;
    wh_memstore_store(ms, &st);
    if (wh_validator_new(cfg, &st, NULL, &v, &err))
        goto out;
    wh_validate_result a, b;
    decide(v, "CREATE", "true", "null", &a);
    decide(v, "CREATE", "true", "null", &b);
    if (a.allowed && a.n_charged && (!b.allowed || b.n_charged != a.n_charged))
        abort(); /* a retry is charged once and decided alike */
    decide(v, "UPDATE", "false",
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}", &a);
    if (a.allowed)
        abort(); /* the label changed: always refused */
out:
    wh_validator_free(v);
    wh_memstore_free(ms);
    gq_yaml_docs_free(docs, n);
    gq_config_free(cfg);
    return 0;
}
