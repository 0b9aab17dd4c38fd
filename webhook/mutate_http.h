/* /mutate over HTTP: a thin adapter around the decision (mutation.h).
 *
 * body -> wh_review_decode_lean -> wh_mutate_review_store (which reads the
 * GPULimitRanges of the namespace for GPU pods only) -> wh_review_encode ->
 * 200. Per decision: one
 * metrics observation and one audit record. No policy lives here. */
#ifndef WH_MUTATE_HTTP_H
#define WH_MUTATE_HTTP_H

#include "webhook/audit.h"
#include "quota/config.h"
#include "webhook/metrics.h"
#include "webhook/mutation.h"
#include "http/server.h"

/* Everything the handler reads; caller-owned, borrowed by the server for as
 * long as the route is registered (it must outlive http_server_stop). */
typedef struct wh_mutate_ctx {
    const gq_config *cfg;
    const wh_store *store;   /* borrowed; NULL: no cluster (no limit ranges, quotas, claims) */
    wh_audit *audit;         /* NULL: no audit records */
    wh_metrics *metrics;     /* NULL: nothing counted */
    wh_review_limits limits; /* the decoded review's memory (zero: unbounded) */
} wh_mutate_ctx;

/* The handler (http_handler_fn; ctx is a wh_mutate_ctx). Answers:
 *   200 with the AdmissionReview response (allowed, or denied with 403 in
 *       response.status) for every request that could be decided;
 *   400 for a body that is not an AdmissionReview (malformed JSON, nesting
 *       beyond WH_REVIEW_MAX_DEPTH, missing request.uid, ...): no decision,
 *       counted as webhook mutate, operation OTHER, decision error;
 *       400 too for a review whose decoded tree would pass limits.max_tree;
 *   503 (Retry-After: 1) when the trees of the reviews in flight would pass
 *       limits.budget's cap: counted as the 400s are;
 *   500 when a decided request could not be answered (limit ranges
 *       unreadable, out of memory): counted, audited (decision "error") and
 *       logged with the uid; the API server then applies the failure policy.
 * The ?timeout= query parameter kube-apiserver appends is accepted and not
 * needed: a decision takes microseconds and waits for nothing. */
void wh_mutate_handle(void *ctx, const http_request *req, http_response *resp);

#endif
