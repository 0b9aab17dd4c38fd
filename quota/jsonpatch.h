/* JSON Patch (RFC 6902) over JSON Pointers (RFC 6901): a builder for the
 * patches the mutating webhook returns and an exact applier that proves every
 * patch applies to the object as it was sent (tests, `gpuquota admit`).
 *
 * Pure: in-memory json-c objects only. */
#ifndef GQ_JSONPATCH_H
#define GQ_JSONPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "common/gq_error.h"

/* Hard caps on what the applier accepts (a patch is untrusted input when it
 * comes from a file). */
#define GQ_JPTR_MAX 1024        /* bytes of one JSON Pointer, with its NUL */
#define GQ_JPTR_MAX_SEGMENTS 64 /* reference tokens in one pointer */
#define GQ_PATCH_MAX_OPS 4096   /* operations in one patch */

/* ---- JSON Pointer building (RFC 6901) ---- */

/* A pointer under construction: caller-owned, no heap. Escaping and overflow
 * are handled by the push functions; an overflow is sticky and reported by
 * gq_patch_* when the pointer is used. */
typedef struct gq_jptr {
    char buf[GQ_JPTR_MAX];
    size_t len;
    bool overflow;
} gq_jptr;

/* Start at the document root (""). */
void gq_jptr_init(gq_jptr *p);
/* Append "/" and seg escaped ("~" -> "~0", "/" -> "~1"): "nvidia.com/gpu"
 * becomes "nvidia.com~1gpu". */
void gq_jptr_push(gq_jptr *p, const char *seg);
/* Append "/" and a decimal array index. */
void gq_jptr_push_index(gq_jptr *p, size_t index);
/* Cut back to an earlier length (a saved p->len), to reuse a prefix. */
void gq_jptr_truncate(gq_jptr *p, size_t len);

/* ---- Patch builder ---- */

typedef struct gq_patch gq_patch;

/* An empty patch. Caller frees with gq_patch_free. */
gq_code gq_patch_new(gq_patch **out) GQ_WUR;
void gq_patch_free(gq_patch *p);

/* Append one operation. path is the pointer built with gq_jptr. add, replace
 * and test take ownership of value in every case (also on error), as json-c's
 * own adders do; value may be NULL for JSON null. GQ_ELIMIT when the pointer
 * overflowed or the patch holds GQ_PATCH_MAX_OPS operations already. */
gq_code gq_patch_add(gq_patch *p, const gq_jptr *path, json_object *value) GQ_WUR;
gq_code gq_patch_replace(gq_patch *p, const gq_jptr *path, json_object *value) GQ_WUR;
gq_code gq_patch_test(gq_patch *p, const gq_jptr *path, json_object *value) GQ_WUR;
gq_code gq_patch_remove(gq_patch *p, const gq_jptr *path) GQ_WUR;

/* Number of operations so far. */
size_t gq_patch_len(const gq_patch *p);

/* The operations as a JSON array, borrowed from p. */
json_object *gq_patch_json(const gq_patch *p);

/* Compact JSON text of the patch ("[]" when empty), "/" not escaped. Caller
 * frees *out with free(); *out_len excludes the NUL. */
gq_code gq_patch_to_text(const gq_patch *p, char **out, size_t *out_len) GQ_WUR;

/* ---- Applier (RFC 6902 §4, §5) ---- */

/* Apply patch (a JSON array of operation objects; borrowed) to a deep copy of
 * doc (borrowed, unchanged) and hand the result to the caller in *out.
 * Operations apply in order and the whole patch is atomic: on any error *out
 * is untouched. Exactly RFC 6902: add to an array index in [0, len] or "-",
 * add under a missing parent is an error, remove/replace/test/move/copy need
 * an existing target, move never into its own child, test compares values
 * (numbers by value, objects regardless of member order). Errors are
 * GQ_EINVAL naming the operation index and the path, GQ_ELIMIT for caps. */
gq_code gq_patch_apply(json_object *doc, json_object *patch, json_object **out, gq_err *err) GQ_WUR;

/* Same, with the patch given as JSON text (parsed with a depth cap). */
gq_code gq_patch_apply_text(json_object *doc, const char *text, size_t len, json_object **out,
                            gq_err *err) GQ_WUR;

/* RFC 6902 §4.6 equality of two JSON values (NULL is JSON null). */
bool gq_json_equal(json_object *a, json_object *b);

#endif
