/* Test helper: JSON written with ' for " (so test data reads without
 * escapes), parsed or the test fails. Include after <cmocka.h>. */
#ifndef GQ_TESTJSON_H
#define GQ_TESTJSON_H

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

static inline json_object *J(const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    for (char *p = d; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_object *o = json_tokener_parse(d);
    if (!o)
        fail_msg("bad test JSON: %s", d);
    free(d);
    return o;
}

#endif
