/* Any bytes: gq_yaml_load must return a code, never crash or leak, and every
 * document it returns must serialise. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_object **docs = NULL;
    size_t n = 0;
    gq_err err;
    if (gq_yaml_load((const char *)data, size, "fuzz", &docs, &n, &err) == GQ_OK) {
        for (size_t i = 0; i < n; i++)
            (void)strlen(json_object_to_json_string_ext(docs[i], JSON_C_TO_STRING_PLAIN));
        gq_yaml_docs_free(docs, n);
    }
    return 0;
}
