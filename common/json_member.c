#include "common/json_member.h"

#include <string.h>

json_object *gq_json_member(json_object *obj, const char *key)
{
    json_object *v = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &v))
        return NULL;
    return v;
}

json_object *gq_json_get_typed(json_object *obj, const char *key, json_type t)
{
    json_object *v = gq_json_member(obj, key);
    return json_object_is_type(v, t) ? v : NULL;
}

const char *gq_json_get_string(json_object *obj, const char *key)
{
    json_object *v = gq_json_get_typed(obj, key, json_type_string);
    return v ? json_object_get_string(v) : NULL;
}

json_object *gq_json_get_object(json_object *obj, const char *key)
{
    return gq_json_get_typed(obj, key, json_type_object);
}

json_object *gq_json_get_array(json_object *obj, const char *key)
{
    return gq_json_get_typed(obj, key, json_type_array);
}

const char *gq_json_meta_string(json_object *obj, const char *key)
{
    return gq_json_get_string(gq_json_get_object(obj, "metadata"), key);
}

json_object *gq_json_meta_object(json_object *obj, const char *key)
{
    return gq_json_get_object(gq_json_get_object(obj, "metadata"), key);
}

gq_code gq_json_dup_string(json_object *obj, const char *key, char **out, gq_err *err)
{
    json_object *v = gq_json_member(obj, key);
    *out = NULL;
    if (!v)
        return GQ_OK;
    if (!json_object_is_type(v, json_type_string))
        return gq_err_set(err, GQ_EINVAL, "%s: not a string", key);
    *out = strndup(json_object_get_string(v), (size_t)json_object_get_string_len(v));
    return *out ? GQ_OK : gq_err_oom(err);
}
