/* Typed members of json-c objects: the one set of getters every layer uses
 * instead of a private json_object_object_get_ex + type check. Borrowed
 * results live as long as the object. */
#ifndef GQ_JSON_MEMBER_H
#define GQ_JSON_MEMBER_H

#include <json-c/json.h>

#include "common/gq_error.h"

/* Member key of obj, borrowed; NULL when obj is not an object (NULL
 * included) or key is absent. A member that is JSON null is NULL too. */
json_object *gq_json_member(json_object *obj, const char *key);

/* Member key of obj when it has JSON type t, borrowed; else NULL. */
json_object *gq_json_get_typed(json_object *obj, const char *key, json_type t);

/* Typed members, borrowed. NULL when obj is not an object, or key is
 * absent, null or of another type. */
const char *gq_json_get_string(json_object *obj, const char *key);
json_object *gq_json_get_object(json_object *obj, const char *key);
json_object *gq_json_get_array(json_object *obj, const char *key);

/* metadata.KEY of a Kubernetes object as a string or an object (labels,
 * annotations), borrowed, or NULL. */
const char *gq_json_meta_string(json_object *obj, const char *key);
json_object *gq_json_meta_object(json_object *obj, const char *key);

/* *out = an owned copy of string member key (caller frees), NULL when absent
 * or null. GQ_EINVAL ("KEY: not a string") for another type; GQ_ENOMEM. */
gq_code gq_json_dup_string(json_object *obj, const char *key, char **out, gq_err *err) GQ_WUR;

#endif
