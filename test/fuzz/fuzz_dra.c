/* Fuzz DRA claim pricing: the input is tried as a ResourceClaimSpec (and
 * as a pod carrying a gpuquota.io/gpu-claims record, through the one cost
 * function); the raw bytes are also tried as a CEL selector. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "quota/dra.h"
#include "quota/podcost.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gq_config *cfg;
    gq_err err;
    if (!cfg && gq_config_default(&cfg, &err))
        return 0;
    if (size > (1u << 20))
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *p;
    size_t n;
    (void)gq_dra_selector_product(text, &p, &n);
    json_tokener *tok = json_tokener_new_ex(64);
    json_object *o = tok ? json_tokener_parse_ex(tok, text, (int)size) : NULL;
    json_tokener_free(tok);
    if (o) {
        gq_claim_cost cc;
        if (gq_claim_spec_cost(cfg, o, NULL, "fuzz", &cc, &err) == GQ_OK && cc.gpus < 0)
            abort(); /* never negative */
        /* the same bytes as the record on a managed pod with two claims */
        json_object *pod = json_tokener_parse(
            "{\"metadata\":{\"labels\":{\"gpuquota.io/managed\":\"true\"},\"annotations\":{}},"
            "\"spec\":{\"containers\":[{\"name\":\"c\"}],\"resourceClaims\":[{\"name\":\"a\"},"
            "{\"name\":\"b\"}]}}");
        json_object *meta, *ann;
        if (pod && json_object_object_get_ex(pod, "metadata", &meta) &&
            json_object_object_get_ex(meta, "annotations", &ann)) {
            json_object_object_add(ann, GQ_ANN_CLAIMS, json_object_new_string(text));
            gq_pod_cost c;
            gq_pod_cost_init(&c);
            if (gq_pod_cost_compute(cfg, pod, &c, &err) == GQ_OK)
                gq_pod_cost_dispose(&c);
        }
        json_object_put(pod);
        json_object_put(o);
    }
    free(text);
    return 0;
}
