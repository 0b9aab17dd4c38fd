/* The /mutate decision, socket-free: a decoded AdmissionReview in, a full
 * AdmissionReview response out (allowed or denied, patch, warnings,
 * auditAnnotations). The HTTP handler and `gpuquota admit` both call it. */
#ifndef WH_MUTATION_H
#define WH_MUTATION_H

#include <stddef.h>

#include "config.h"
#include "crd.h"
#include "gq_error.h"
#include "review.h"

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

#endif
