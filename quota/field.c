/* Bounded readers of custom-resource fields. */
#include "quota/field.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gq_field_type_name(json_object *o)
{
    return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

gq_code gq_field_string(json_object *o, const char *field, const char **out, gq_err *err)
{
    if (!o || !json_object_is_type(o, json_type_string))
        return gq_err_set(err, GQ_EINVAL, "%s: must be a string, got %s", field,
                          gq_field_type_name(o));
    size_t len = (size_t)json_object_get_string_len(o);
    const char *s = json_object_get_string(o);
    if (len > GQ_CRD_MAX_STRING)
        return gq_err_set(err, GQ_ELIMIT, "%s: longer than %d bytes", field, GQ_CRD_MAX_STRING);
    if (strlen(s) != len)
        return gq_err_set(err, GQ_EINVAL, "%s: must not contain NUL bytes", field);
    *out = s;
    return GQ_OK;
}

gq_code gq_field_dup_string(json_object *o, const char *field, char **out, gq_err *err)
{
    const char *s = NULL;
    gq_code rc = gq_field_string(o, field, &s, err);
    if (rc)
        return rc;
    char *d = strdup(s);
    if (!d)
        return gq_err_set(err, GQ_ENOMEM, "%s: out of memory", field);
    *out = d;
    return GQ_OK;
}

gq_code gq_field_object(json_object *o, const char *field, gq_err *err)
{
    if (!o || !json_object_is_type(o, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "%s: must be an object, got %s", field,
                          gq_field_type_name(o));
    return GQ_OK;
}

gq_code gq_field_array(json_object *o, const char *field, size_t cap, size_t *n, gq_err *err)
{
    if (!o || !json_object_is_type(o, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "%s: must be an array, got %s", field,
                          gq_field_type_name(o));
    size_t len = json_object_array_length(o);
    if (len > cap)
        return gq_err_set(err, GQ_ELIMIT, "%s: more than %zu items", field, cap);
    *n = len;
    return GQ_OK;
}

const char *gq_field_join(char *buf, size_t cap, const char *base, const char *name)
{
    size_t bl = strnlen(base, cap - 1), nl = 0;
    memcpy(buf, base, bl);
    if (bl + 1 < cap) {
        buf[bl++] = '.';
        nl = strnlen(name, cap - 1 - bl);
        memcpy(buf + bl, name, nl);
    }
    buf[bl + nl] = '\0';
    return buf;
}

void gq_strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

gq_code gq_field_dup_strings(json_object *arr, const char *field, size_t cap, char ***out,
                             size_t *n_out, gq_err *err)
{
    size_t n = 0;
    gq_code rc = gq_field_array(arr, field, cap, &n, err);
    if (rc)
        return rc;
    char **v = n ? calloc(n, sizeof(*v)) : NULL;
    if (n && !v)
        return gq_err_set(err, GQ_ENOMEM, "%s: out of memory", field);
    for (size_t i = 0; i < n; i++) {
        char f[128];
        snprintf(f, sizeof(f), "%s[%zu]", field, i);
        rc = gq_field_dup_string(json_object_array_get_idx(arr, i), f, &v[i], err);
        if (rc) {
            gq_strv_free(v, i);
            return rc;
        }
    }
    *out = v;
    *n_out = n;
    return GQ_OK;
}
