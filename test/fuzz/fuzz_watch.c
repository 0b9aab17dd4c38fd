/* Fuzz the watch stream parser: the input is split into chunks whose sizes
 * come from the data itself, so line reassembly across feeds is exercised. */
#include <stdint.h>
#include <string.h>

#include "kube/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gq_code on_event(void *ud, kube_event_type type, json_object *obj, gq_err *err)
{
    kube_status st;
    if (type == KUBE_EVENT_ERROR && kube_status_from_json(obj, &st) == GQ_OK)
        (*(size_t *)ud) += strlen(st.message);
    (*(size_t *)ud)++;
    return GQ_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] % 17 + 1, seen = 0;
    data++;
    size--;
    kube_watch_parser *p;
    if (kube_watch_parser_new(4096, on_event, &seen, &p) != GQ_OK)
        return 0;
    gq_err err;
    gq_code rc = GQ_OK;
    for (size_t off = 0; off < size && !rc; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        rc = kube_watch_parser_feed(p, (const char *)data + off, n, &err);
    }
    if (!rc)
        rc = kube_watch_parser_finish(p, &err);
    kube_watch_parser_free(p);
    return 0;
}
