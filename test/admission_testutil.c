#include "admission_testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base64.h"
#include "jsonutil.h"

char *at_read_data(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", GQ_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

json_object *at_load_json(const char *name)
{
    size_t len;
    char *text = at_read_data(name, &len);
    json_object *v = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(text, len, 0, &v, &err), GQ_OK);
    free(text);
    return v;
}

char *at_response_patch(const char *review, size_t len, size_t *patch_len)
{
    json_object *doc = NULL, *resp = NULL, *p = NULL, *type = NULL;
    gq_err err;
    assert_int_equal(gq_json_parse(review, len, 0, &doc, &err), GQ_OK);
    assert_true(json_object_object_get_ex(doc, "response", &resp));
    assert_true(json_object_object_get_ex(resp, "patchType", &type));
    assert_string_equal(json_object_get_string(type), "JSONPatch");
    assert_true(json_object_object_get_ex(resp, "patch", &p));
    unsigned char *raw = NULL;
    assert_int_equal(gq_base64_decode(json_object_get_string(p),
                                      (size_t)json_object_get_string_len(p), &raw, patch_len),
                     GQ_OK);
    json_object_put(doc);
    return (char *)raw;
}
