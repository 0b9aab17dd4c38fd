/* Fuzz the kube-standin request handler and its parsers. The first byte picks
 * the target:
 *   'L' label selector      'F' field selector (pods)   'P' protobuf body
 *   'M' merge patch, 'J' JSON patch, 'S' strategic merge patch:
 *        target JSON, NUL, patch JSON
 *   'R' a whole request: "METHOD PATH\n[Content-Type]\nBODY" through api_handle */
#include <stdlib.h>
#include <string.h>

#include "standin/standin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *g_ct;

static const char *no_query(void *ctx, const char *k)
{
    return NULL;
}

static const char *fuzz_header(void *ctx, const char *k)
{
    return strcmp(k, "Content-Type") == 0 ? g_ct : NULL;
}

static void patches(char which, const char *s, size_t n)
{
    const char *nul = memchr(s, '\0', n);
    if (!nul)
        return;
    gq_err err = {0};
    json_object *t = si_parse_json(s, (size_t)(nul - s), &err);
    json_object *p = si_parse_json(nul + 1, n - (size_t)(nul - s) - 1, &err);
    json_object *out = NULL;
    if (t && p) {
        gq_code rc = which == 'M'   ? patch_merge(t, p, &out, &err)
                     : which == 'J' ? patch_json(t, p, &out, &err)
                                    : patch_strategic(t, p, &out, &err);
        if (!rc)
            (void)si_to_json(out);
    }
    json_object_put(out);
    json_object_put(t);
    json_object_put(p);
}

static void request(const char *s, size_t n)
{
    char line[512], ct[128];
    const char *nl = memchr(s, '\n', n);
    if (!nl || (size_t)(nl - s) >= sizeof line)
        return;
    memcpy(line, s, (size_t)(nl - s));
    line[nl - s] = '\0';
    const char *rest = nl + 1;
    size_t left = n - (size_t)(rest - s);
    const char *nl2 = memchr(rest, '\n', left);
    if (!nl2 || (size_t)(nl2 - rest) >= sizeof ct)
        return;
    memcpy(ct, rest, (size_t)(nl2 - rest));
    ct[nl2 - rest] = '\0';
    g_ct = *ct ? ct : NULL;
    char *sp = strchr(line, ' ');
    if (!sp)
        return;
    *sp = '\0';
    sreq rq = {.method = line,
               .path = sp + 1,
               .body = nl2 + 1,
               .body_len = left - (size_t)(nl2 + 1 - rest),
               .query = no_query,
               .header = fuzz_header};
    sresp rs = {0};
    api_handle(&rq, &rs);
    sresp_dispose(&rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        st_init(1000);
        api_bootstrap();
        init = 1;
    }
    if (size < 1)
        return 0;
    char which = (char)data[0];
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    size_t n = size - 1;
    gq_err err = {0};
    if (which == 'L' || which == 'F') {
        selector *sel = NULL;
        rtype t;
        st_lock();
        int have = rtype_lookup("", "v1", "pods", &t) == 0;
        st_unlock();
        if (have && !(which == 'L' ? sel_parse_labels(s, &sel, &err)
                                   : sel_parse_fields(s, &t, &sel, &err))) {
            json_object *o = json_tokener_parse(
                "{\"metadata\":{\"name\":\"a\",\"labels\":{\"app\":\"x\",\"n\":\"5\"}},"
                "\"status\":{\"phase\":\"Running\"}}");
            (void)sel_match_labels(sel, o);
            (void)sel_match_fields(sel, o);
            json_object_put(o);
        }
        sel_free(sel);
    } else if (which == 'P') {
        json_object_put(proto_decode(s, n, &err));
    } else if (which == 'M' || which == 'J' || which == 'S') {
        patches(which, s, n);
    } else if (which == 'R') {
        request(s, n);
    }
    free(s);
    return 0;
}
