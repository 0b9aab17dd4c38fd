/* Quantity parser: arbitrary bytes must never crash; whatever parses must
 * format to a canonical form that parses back to an equal value (and, for
 * decimal forms, to the same text); the int64 helpers must agree with the
 * value's sign, and q - q must be zero. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gq_quantity q, back;
    gq_err err;
    if (gq_quantity_parse((const char *)data, size, &q, &err) != GQ_OK) {
        if (err.code == GQ_OK || err.msg[0] == '\0' || !memchr(err.msg, '\0', sizeof(err.msg)))
            abort();
        return 0;
    }
    char buf[GQ_QUANTITY_STR_MAX], again[GQ_QUANTITY_STR_MAX];
    gq_quantity_format(&q, buf);
    if (gq_quantity_parse(buf, strlen(buf), &back, NULL) != GQ_OK)
        abort();
    if (gq_quantity_cmp(&q, &back) != 0)
        abort();
    /* Decimal forms are fixed points of parse+format. A binary value printed
     * as plain digits ("62.5Ki" is "64000") re-parses as decimal SI and may
     * then print differently ("64k"), exactly as in Kubernetes. */
    gq_quantity_format(&back, again);
    if (q.format != GQ_QFMT_BINARY_SI && strcmp(buf, again) != 0)
        abort();
    int64_t v, m;
    if (gq_quantity_to_milli_ceil(&q, &m) == GQ_OK) {
        if ((m < 0) != gq_quantity_is_negative(&q) || (m == 0) != gq_quantity_is_zero(&q))
            abort();
    }
    if (gq_quantity_to_int64_ceil(&q, &v) == GQ_OK) {
        if ((v < 0) != gq_quantity_is_negative(&q) || (v == 0) != gq_quantity_is_zero(&q))
            abort();
    }
    /* q - q is exactly zero; q + 0 is q. */
    gq_quantity d, zero = gq_quantity_from_int64(0, GQ_QFMT_DECIMAL_SI);
    if (gq_quantity_sub(&q, &q, &d) != GQ_OK || !gq_quantity_is_zero(&d))
        abort();
    if (gq_quantity_add(&q, &zero, &d) != GQ_OK || gq_quantity_cmp(&d, &q) != 0)
        abort();
    return 0;
}
