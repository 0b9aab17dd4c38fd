/* The /mutate decision, socket-free: a decoded AdmissionReview in, a full
 * AdmissionReview response out (allowed or denied, patch, warnings,
 * auditAnnotations). The HTTP handler and `gpuquota admit` both call it. */
#ifndef WH_MUTATION_H
#define WH_MUTATION_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "quota/config.h"
#include "quota/crd.h"
#include "common/gq_error.h"
#include "webhook/review.h"
#include "webhook/store.h"

/* Decide the mutation of req under cfg. lrs (borrowed, n_lrs entries, may be
 * NULL) are the GPULimitRanges of the request's namespace: their Container
 * default turns whole-GPU requests into slices. Pods are rewritten on CREATE
 * only (resources are immutable afterwards); other kinds, operations,
 * subresources and exempt namespaces are allowed unchanged. A pod whose GPU
 * request is invalid is denied (403 Forbidden, the message names container,
 * field and accepted forms); a CREATE without an object is denied with 400.
 * resp must be uninitialised; on success the caller disposes it. Errors
 * (GQ_ENOMEM) leave resp untouched: the HTTP layer answers 500. */
gq_code wh_mutate_review(const gq_config *cfg, const wh_review_request *req,
                         const gq_limit_range *const *lrs, size_t n_lrs, wh_review_response *resp,
                         gq_err *err) GQ_WUR;

/* What a decision did, for the audit record (docs/audit.md) and for
 * `gpuquota admit`. Caller-owned: zero it (or wh_mutate_info_init), then
 * wh_mutate_info_dispose. */
typedef struct wh_mutate_info {
    json_object *request; /* original GPU requests per container, {"trainer":
                             {"nvidia.com/gpu":"0.5"}}; NULL for no GPU (owned) */
    json_object *rewrite; /* what the patch changes (gq_rewrite.changes); NULL for no patch */
    gq_amounts charge;    /* the pod's charge; valid when has_charge */
    bool has_charge;      /* a pod that uses a GPU was allowed */
} wh_mutate_info;

void wh_mutate_info_init(wh_mutate_info *info);
void wh_mutate_info_dispose(wh_mutate_info *info);

/* wh_mutate_review that also fills info (may be NULL; disposed and refilled
 * on success, untouched on error). */
gq_code wh_mutate_review_info(const gq_config *cfg, const wh_review_request *req,
                              const gq_limit_range *const *lrs, size_t n_lrs,
                              wh_review_response *resp, wh_mutate_info *info, gq_err *err) GQ_WUR;

/* True when req is one the mutation may rewrite (a pod CREATE with an object
 * outside the exempt namespaces): only then are its GPULimitRanges needed. */
bool wh_mutate_applies(const gq_config *cfg, const wh_review_request *req);

/* wh_mutate_review_info with the GPULimitRanges of the request's namespace
 * read from store (NULL, or without list: none; its other
 * members are each optional: the quota state a pod accepting several GPU
 * models is placed by, fresh quota reads, the claims and device classes
 * DRA requests are priced by), and only for a pod that
 * asks for a GPU: pods that ask for none never wait on a policy cache or
 * fail on a policy object that does not parse. Errors of the source (and an
 * object that does not parse) are returned like GQ_ENOMEM: resp untouched,
 * err says why, the HTTP layer answers 500 and the failure policy decides.
 *
 * With store's quota functions it also adds the scheduling gate
 * gpuquota.io/quota at CREATE to a GPU pod that a quota governs with
 * whenExceeded Queue (docs/queueing.md). The gate is added once (a
 * reinvocation finds it and adds nothing) and never to a pod with
 * spec.nodeName, which kube-apiserver refuses to gate: such a pod is charged
 * at admission as under Deny. When the quotas cannot be read the pod is left
 * ungated: /validate then decides as under Deny (and fails closed with its
 * own message when it cannot read them either). */
gq_code wh_mutate_review_store(const gq_config *cfg, const wh_review_request *req,
                               const wh_store *store, wh_review_response *resp,
                               wh_mutate_info *info, gq_err *err) GQ_WUR;

/* What the mutation answered in resp does to req's object, as the API
 * server applies it: *patch the decoded JSON Patch (an empty array for
 * none) and *pod the object it makes (the object itself, held, when there
 * is no patch; NULL when resp denies or req has no object). Both are the
 * caller's (json_object_put). GQ_ENOMEM, or the patch's own errors. */
gq_code wh_mutate_result(const wh_review_request *req, const wh_review_response *resp,
                         json_object **patch, json_object **pod, gq_err *err) GQ_WUR;

/* The parsed GPULimitRanges of ns from store (NULL, or without
 * list: none). On success *out (NULL when *n_out is 0) is the caller's, freed with
 * wh_limit_ranges_free. An object that does not parse fails the call
 * (GQ_EINVAL naming it): the webhook fails closed on a policy it cannot
 * read. Errors of the source are passed on. */
gq_code wh_limit_ranges_fetch(const wh_store *store, const char *ns, gq_limit_range ***out,
                              size_t *n_out, gq_err *err) GQ_WUR;

/* Free what wh_limit_ranges_fetch returned; NULL is accepted. */
void wh_limit_ranges_free(gq_limit_range **lrs, size_t n);

#endif
