#include "jsonutil.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* json-c accepts NaN, Infinity and overflowing exponents (1e999), none of
 * which is JSON: nothing downstream may see a value it cannot write back.
 * Recursion depth is bounded by the parser's depth cap. */
static bool has_nonfinite(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_double:
        return !isfinite(json_object_get_double(v));
    case json_type_array:
        for (size_t i = 0, n = json_object_array_length(v); i < n; i++)
            if (has_nonfinite(json_object_array_get_idx(v, i)))
                return true;
        return false;
    case json_type_object: {
        json_object_object_foreach(v, k, m)
        {
            (void)k;
            if (has_nonfinite(m))
                return true;
        }
        return false;
    }
    default:
        return false;
    }
}

gq_code gq_json_parse(const char *buf, size_t len, int max_depth, json_object **out, gq_err *err)
{
    if (!buf || len == 0)
        return gq_err_set(err, GQ_EINVAL, "empty JSON text");
    if (len > INT_MAX)
        return gq_err_set(err, GQ_ELIMIT, "JSON text of %zu bytes is too large", len);
    if (max_depth < 1 || max_depth > 10000)
        max_depth = GQ_JSON_DEFAULT_DEPTH;
    /* json-c counts the value inside the innermost container as a level too. */
    json_tokener *tok = json_tokener_new_ex(max_depth + 1);
    if (!tok)
        return gq_err_set(err, GQ_ENOMEM, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    gq_code rc = GQ_OK;
    json_object *v = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    if (je == json_tokener_continue) {
        end = len;
        /* A bare top-level number is only complete at end of input: feed the
         * terminator json-c waits for. */
        v = json_tokener_parse_ex(tok, "", 1);
        je = json_tokener_get_error(tok);
        if (je != json_tokener_success) {
            rc = gq_err_set(err, GQ_EINVAL, "JSON text ends early (after %zu bytes)", len);
            goto out;
        }
    }
    if (je == json_tokener_error_depth) {
        rc = gq_err_set(err, GQ_ELIMIT, "JSON nests deeper than %d levels", max_depth);
        goto out;
    }
    if (je != json_tokener_success) {
        rc = gq_err_set(err, GQ_EINVAL, "JSON syntax error at byte %zu: %s",
                        json_tokener_get_parse_end(tok), json_tokener_error_desc(je));
        goto out;
    }
    for (; end < len; end++) {
        char c = buf[end];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            json_object_put(v);
            rc = gq_err_set(err, GQ_EINVAL, "JSON syntax error at byte %zu: trailing data", end);
            goto out;
        }
    }
    if (has_nonfinite(v)) {
        json_object_put(v);
        rc = gq_err_set(err, GQ_EINVAL, "JSON numbers must be finite (no NaN or Infinity)");
        goto out;
    }
    *out = v;
out:
    json_tokener_free(tok);
    return rc;
}

const char *gq_json_compact(json_object *v)
{
    return json_object_to_json_string_ext(v,
                                          JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

gq_code gq_json_to_text(json_object *v, char **out, size_t *out_len)
{
    size_t n = 0;
    const char *s = json_object_to_json_string_length(
        v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    char *copy = s ? malloc(n + 1) : NULL;
    if (!copy)
        return GQ_ENOMEM;
    memcpy(copy, s, n + 1);
    *out = copy;
    *out_len = n;
    return GQ_OK;
}
