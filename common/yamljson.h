/* YAML (and JSON) documents from memory into json-c trees, the way kubectl
 * reads manifests: YAML 1.2 core schema for plain scalars (null/~, true/false,
 * integers, floats), quoted scalars and mapping keys are strings, several
 * documents separated by `---`. Anchors and aliases are rejected (they are
 * how "billion laughs" inputs grow), and so are duplicate mapping keys and
 * values JSON cannot hold (.inf, .nan). Depth and size are capped. */
#ifndef GQ_YAMLJSON_H
#define GQ_YAMLJSON_H

#include <stddef.h>

#include <json-c/json.h>

#include "common/gq_error.h"

#define GQ_YAML_MAX_BYTES (4u << 20) /* input size (request bodies are at most 3 MiB) */
#define GQ_YAML_MAX_DEPTH 64         /* nesting of mappings and sequences */
#define GQ_YAML_MAX_DOCS 1024        /* documents in one stream */

/* Parse buf[0..len) into *n_docs documents (*docs, caller frees with
 * gq_yaml_docs_free). Empty documents are skipped, as kubectl does, so
 * *n_docs may be 0. Text starting with '{' is first tried as JSON with
 * json-c, which keeps numbers exactly as written. filename is used only in
 * messages "file:line: message". GQ_EINVAL for malformed input, GQ_ELIMIT
 * beyond a cap, GQ_ENOMEM. On error *docs and *n_docs are untouched. */
gq_code gq_yaml_load(const char *buf, size_t len, const char *filename, json_object ***docs,
                     size_t *n_docs, gq_err *err) GQ_WUR;

/* Release documents from gq_yaml_load; NULL is accepted. */
void gq_yaml_docs_free(json_object **docs, size_t n_docs);

#endif
