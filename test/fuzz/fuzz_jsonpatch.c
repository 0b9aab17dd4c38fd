/* Fuzz the JSON Patch applier. Input: a document and a patch separated by
 * the first NUL byte (no NUL: the document is {} and the input the patch).
 * Every patch that applies must leave the input document unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/jsonpatch.h"
#include "common/jsonutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    json_object *doc = NULL, *copy = NULL, *out = NULL;
    gq_err err;
    const char *ptext = text;
    size_t plen = size;
    if (nul) {
        size_t dlen = (size_t)(nul - text);
        if (gq_json_parse(text, dlen, 0, &doc, &err))
            return 0;
        ptext = nul + 1;
        plen = size - dlen - 1;
    } else {
        doc = json_object_new_object();
    }
    if (doc && json_object_deep_copy(doc, &copy, NULL))
        abort();
    if (gq_patch_apply_text(doc, ptext, plen, &out, &err) == GQ_OK) {
        (void)gq_json_compact(out);
        json_object_put(out);
    }
    if (!gq_json_equal(doc, copy))
        abort();
    json_object_put(copy);
    json_object_put(doc);
    return 0;
}
