/* Bounded JSON parsing from memory, shared by every reader of untrusted JSON
 * (AdmissionReview bodies, JSON Patch text, objects given to `admit`). */
#ifndef GQ_JSONUTIL_H
#define GQ_JSONUTIL_H

#include <stddef.h>

#include <json-c/json.h>

#include "gq_error.h"

/* Nesting depth accepted by default. A Pod with managedFields nests about 20
 * levels inside an AdmissionReview; 64 leaves room without letting a hostile
 * body drive deep recursion in json-c or in our walkers. */
#define GQ_JSON_DEFAULT_DEPTH 64

/* Parse exactly one JSON value from buf[0..len) (strict RFC 8259 syntax,
 * finite numbers, nothing but whitespace after the value, nesting at most
 * max_depth). Strings are taken as bytes, as Go's decoder in kube-apiserver
 * takes them (it never sends invalid UTF-8): validating costs a third of the
 * parse, so text shown to users is sanitised where it is written instead.
 * The caller has already capped len. On success the caller owns *out (which
 * may be NULL for the literal `null`, as json-c represents it); on error *out
 * is untouched and err says where the text is wrong. GQ_EINVAL for bad
 * syntax, GQ_ELIMIT for too deep, GQ_ENOMEM. */
gq_code gq_json_parse(const char *buf, size_t len, int max_depth, json_object **out,
                      gq_err *err) GQ_WUR;

/* Compact JSON text of v ("/" not escaped), borrowed from v: valid until v is
 * changed or freed. Never NULL ("null" for a NULL v). */
const char *gq_json_compact(json_object *v);

/* Compact JSON text of v as a private copy. Caller frees *out with free();
 * *out_len excludes the NUL. */
gq_code gq_json_to_text(json_object *v, char **out, size_t *out_len) GQ_WUR;

#endif
