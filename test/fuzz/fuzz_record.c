/* Admission record parser: arbitrary bytes must never crash; whatever
 * parses must format to a text that parses back to an equal record, and
 * that text is a fixed point of parse + format. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gq_pod_record r, back, again;
    gq_err err;
    if (gq_pod_record_parse((const char *)data, size, &r, &err) != GQ_OK) {
        if (err.code == GQ_OK || err.msg[0] == '\0' || !memchr(err.msg, '\0', sizeof(err.msg)))
            abort();
        return 0;
    }
    char text[GQ_RECORD_MAX], text2[GQ_RECORD_MAX];
    gq_pod_record_format(&r, text);
    if (gq_pod_record_parse(text, strlen(text), &back, NULL) != GQ_OK ||
        !gq_pod_record_equal(&r, &back))
        abort();
    gq_pod_record_format(&back, text2);
    if (strcmp(text, text2) || gq_pod_record_parse(text2, strlen(text2), &again, NULL) != GQ_OK)
        abort();
    return 0;
}
