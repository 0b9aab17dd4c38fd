/* Bounded JSON parsing from memory, shared by every reader of untrusted JSON
 * (AdmissionReview bodies, JSON Patch text, objects given to `admit`). */
#ifndef GQ_JSONUTIL_H
#define GQ_JSONUTIL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "common/gq_error.h"

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

#define GQ_JSON_MAX_SKIPS 64    /* patterns given to gq_json_parse_pruned */
#define GQ_JSON_SKIP_SEGMENTS 8 /* segments in one pattern */

/* gq_json_parse that leaves out subtrees the caller never reads. A member
 * or array element whose path matches one of skip[0..n_skip) is checked
 * exactly like the rest of the text (syntax, finite numbers, depth) but not
 * built, and is absent from *out. A pattern is segments separated by '/',
 * "*" matching any member name or array index:
 * "request/object/spec/containers/STAR/env" (STAR being "*") leaves out the
 * env of every container, keeping the containers and their positions.
 * GQ_EINVAL for more than GQ_JSON_MAX_SKIPS patterns or a pattern of more
 * than GQ_JSON_SKIP_SEGMENTS segments; otherwise as gq_json_parse. */
gq_code gq_json_parse_pruned(const char *buf, size_t len, int max_depth, const char *const *skip,
                             size_t n_skip, json_object **out, gq_err *err) GQ_WUR;

/* The memory that the decoded trees alive at once may hold together. A
 * tree's json-c objects cost far more than its text: an empty object, 2
 * bytes of text, is 800 bytes of hash table, so the body limits alone do
 * not bound a server's memory. Zero it and set cap; one is shared by every
 * parse whose trees must fit together. */
typedef struct gq_json_budget {
    _Atomic size_t used;
    size_t cap;
} gq_json_budget;

/* Called with one element of a streamed array (see gq_json_opts.each_member):
 * elem is borrowed and freed when the call returns; root is the top-level
 * object as built so far (the members that came before the array). A non-OK
 * return stops the parse with that code. */
typedef gq_code (*gq_json_each_fn)(void *ud, json_object *root, json_object *elem, gq_err *err);

typedef struct gq_json_opts {
    int max_depth;           /* as gq_json_parse */
    const char *const *skip; /* as gq_json_parse_pruned; n_skip of them */
    size_t n_skip;
    size_t max_tree;        /* one tree's bytes at most; 0: no cap */
    gq_json_budget *budget; /* NULL: none */
    /* Optional: the elements of the top-level object's array member named
     * each_member go to each_fn one by one as soon as each is parsed, and
     * are not kept (*out holds that member as an empty array), so a list of
     * thousands of objects is never a tree at once. Elements handed over
     * stay handed over if the text turns out wrong after them. Their bytes
     * count towards max_tree and the budget as if kept. */
    const char *each_member;
    gq_json_each_fn each_fn;
    void *each_ud;
} gq_json_opts;

/* gq_json_parse_pruned, counting the memory of what it builds as it builds
 * it (an estimate from the json-c objects made, within about 10 % of what
 * glibc counts for the shapes of a pod): more than o->max_tree bytes fails
 * with GQ_ELIMIT; with a budget, the bytes are taken from it as the tree
 * grows and the parse fails with GQ_EBUSY when the trees alive together
 * would pass its cap. On success *charged is what was taken from the
 * budget (0 without one): give it back with gq_json_budget_return once
 * the tree is freed. On failure nothing stays taken. */
gq_code gq_json_parse_with(const char *buf, size_t len, const gq_json_opts *o, json_object **out,
                           size_t *charged, gq_err *err) GQ_WUR;
void gq_json_budget_return(gq_json_budget *b, size_t n);
/* Take n more bytes from b for what a tree's owner builds from it (copies):
 * false, taking nothing, when the trees alive would pass its cap. */
bool gq_json_budget_take(gq_json_budget *b, size_t n) GQ_WUR;

/* Compact JSON text of v ("/" not escaped), borrowed from v: valid until v is
 * changed or freed. Never NULL ("null" for a NULL v). */
const char *gq_json_compact(json_object *v);

/* Compact JSON text of v as a private copy. Caller frees *out with free();
 * *out_len excludes the NUL. */
gq_code gq_json_to_text(json_object *v, char **out, size_t *out_len) GQ_WUR;

#endif
