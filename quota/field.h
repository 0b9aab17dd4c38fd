/* Bounded readers of the fields of a custom resource (quota/crd.h) and
 * of its status (quota/status.h): each checks a json-c value's type and
 * size and names the field in its error ("spec.hard: must be an object,
 * got array"), so every CRD parser reports a bad value the same way.
 *
 * Also the caps on untrusted lists and strings those parsers apply. */
#ifndef GQ_FIELD_H
#define GQ_FIELD_H

#include <stddef.h>

#include <json-c/json.h>

#include "common/gq_error.h"

/* Caps on untrusted lists and strings. */
#define GQ_CRD_MAX_NAMESPACES 4096    /* GPUTenantQuota spec.namespaces */
#define GQ_CRD_MAX_EXPRESSIONS 64     /* matchExpressions, matchLabels */
#define GQ_CRD_MAX_VALUES 256         /* values of one expression */
#define GQ_CRD_MAX_LIMITS 64          /* GPULimitRange spec.limits */
#define GQ_CRD_MAX_MODELS 64          /* allowedModels */
#define GQ_CRD_MAX_RESERVATIONS 65536 /* status.reservations */
#define GQ_CRD_MAX_STRING 1024        /* any single string */
#define GQ_CRD_UID_MAX 63             /* metadata.uid kept (Kubernetes: 36) */
#define GQ_CRD_MAX_QUOTA_MODELS 32    /* GPUQuota / GPUTenantQuota spec.models */
#define GQ_CRD_MAX_MODEL_NAME 63      /* a catalog model name in spec.models */

/* The JSON type of o as json-c names it; "null" for NULL. */
const char *gq_field_type_name(json_object *o);

/* *out = the string value of o, borrowed: o must be a JSON string of at
 * most GQ_CRD_MAX_STRING bytes without NUL bytes (GQ_EINVAL, GQ_ELIMIT). */
gq_code gq_field_string(json_object *o, const char *field, const char **out, gq_err *err) GQ_WUR;

/* gq_field_string, copied: the caller frees *out. */
gq_code gq_field_dup_string(json_object *o, const char *field, char **out, gq_err *err) GQ_WUR;

/* GQ_OK when o is a JSON object, else GQ_EINVAL. */
gq_code gq_field_object(json_object *o, const char *field, gq_err *err) GQ_WUR;

/* *n = the length of array o, which must hold at most cap items (GQ_EINVAL,
 * GQ_ELIMIT). */
gq_code gq_field_array(json_object *o, const char *field, size_t cap, size_t *n,
                       gq_err *err) GQ_WUR;

/* *out, *n_out = copies of the strings of array arr (at most cap, each as
 * gq_field_string); an empty array yields NULL, 0. Free with gq_strv_free. */
gq_code gq_field_dup_strings(json_object *arr, const char *field, size_t cap, char ***out,
                             size_t *n_out, gq_err *err) GQ_WUR;

/* buf = "BASE.NAME" (cut to cap - 1 bytes; cap >= 1): the name of a member for a
 * message, built without printf, since a parser names every member it
 * reads and only a failing one is ever printed. Returns buf. */
const char *gq_field_join(char *buf, size_t cap, const char *base, const char *name);

/* Free v[0..n) and v; NULL is a no-op. */
void gq_strv_free(char **v, size_t n);

#endif
