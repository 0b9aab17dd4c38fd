/* The /validate decision (DESIGN.md §4, §8): GPULimitRange validation,
 * GPUQuota and GPUTenantQuota charging, and the tamper check on pod updates.
 *
 * Quota state is reached through a small seam (wh_store): lists come from
 * informer caches in production, while every quota that is charged is read
 * fresh and written back with the resourceVersion that was read, so any
 * number of webhook replicas never admit past spec.hard. Inside one process
 * concurrent admissions against the same quota are coalesced (group commit):
 * a charge is queued on its quota, and a charger thread reads the quota,
 * evaluates every queued charge in arrival order, writes one status update
 * holding all admitted reservations and lets each admission go on (its next
 * quota, a rollback, or its answer); on 409 the whole batch re-reads and
 * re-evaluates. A denial is never turned into an allow. No server thread
 * waits for a charge (wh_validate_handle_async). Rules are in
 * docs/validating-webhook.md. */
#ifndef WH_VALIDATE_H
#define WH_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "webhook/audit.h"
#include "quota/config.h"
#include "quota/admission.h"
#include "quota/crd.h"
#include "quota/tamper.h"
#include "common/gq_error.h"
#include "webhook/metrics.h"
#include "webhook/review.h"
#include "http/server.h"
#include "webhook/store.h"

/* Identities allowed to change gpuquota.io/ labels and annotations of pods
 * when no --trusted-user is given. */
#define WH_TRUSTED_WEBHOOK GQ_TRUSTED_WEBHOOK
#define WH_TRUSTED_CONTROLLER GQ_TRUSTED_CONTROLLER

#define WH_RESERVATION_TTL_DEFAULT GQ_RESERVATION_TTL_DEFAULT
#define WH_CHARGE_RETRIES_DEFAULT 32 /* re-reads after 409 before giving up */
#define WH_BATCH_MAX_DEFAULT 256     /* charges coalesced into one status write */
#define WH_CHARGE_BUDGET_MS_DEFAULT                                                                \
    7000 /* conflict retries stop after this long: inside                                          \
            kube-apiserver's default 10 s webhook timeout */
#define WH_TRUSTED_USERS_MAX 16
/* Threads that run the group commit; they mostly wait on the API server. */
#define WH_CHARGERS_DEFAULT 4
#define WH_CHARGERS_MAX 64
/* Charges waiting (not yet in a batch) across all quotas; past it a charge
 * is refused at once (fail closed) rather than left to time out. */
#define WH_QUEUE_MAX_DEFAULT 4096

typedef struct wh_validate_opts {
    int64_t reservation_ttl_s;        /* 0: WH_RESERVATION_TTL_DEFAULT */
    const char *const *trusted_users; /* NULL: the two defaults above; copied */
    size_t n_trusted_users;           /* <= WH_TRUSTED_USERS_MAX */
    unsigned max_retries;             /* 0: WH_CHARGE_RETRIES_DEFAULT */
    unsigned max_batch;               /* 0: WH_BATCH_MAX_DEFAULT; 1 disables coalescing */
    unsigned backoff_ms;              /* first conflict backoff (jittered, doubles); 0: 2 */
    unsigned budget_ms;               /* retry time budget; 0: WH_CHARGE_BUDGET_MS_DEFAULT */
    unsigned chargers;                /* 0: WH_CHARGERS_DEFAULT; at most WH_CHARGERS_MAX */
    /* No charger threads at all: the caller of wh_validate_review (and of
     * the HTTP handlers, the asynchronous one answering at once) runs its
     * own charges, name check and rollbacks on its thread (tests that
     * charge one pod at a time). */
    bool inline_charges;
    unsigned max_queued; /* 0: WH_QUEUE_MAX_DEFAULT */
    /* Wall clock in Unix seconds; NULL: time(). Tests pin it. */
    int64_t (*now)(void *ud);
    void *now_ud;
    wh_audit *audit;     /* borrowed; NULL: no audit records */
    wh_metrics *metrics; /* borrowed; NULL: nothing counted */
    /* The decoded reviews' memory, shared with /mutate's (budget borrowed;
     * zero: unbounded); /validate answers 413 and 503 as /mutate does. */
    wh_review_limits review_limits;
    /* Escrow (docs/validating-webhook.md, "Escrow"): the most pods' worth
     * of a Deny GPUQuota's free room this replica holds to admit against
     * without a write each; 0: none (every charge is written). Needs
     * charger threads; at most WH_ESCROW_PODS_MAX. */
    unsigned escrow_pods;
} wh_validate_opts;

typedef struct wh_validator wh_validator;

/* A validator over cfg and store (both borrowed; they must outlive it),
 * with its charger threads running. Options are copied. Freeing it lets
 * the chargers finish what is queued, then joins them. Caller owns *out (wh_validator_free).
 * GQ_EINVAL for bad options, GQ_ENOMEM. */
gq_code wh_validator_new(const gq_config *cfg, const wh_store *store, const wh_validate_opts *o,
                         wh_validator **out, gq_err *err) GQ_WUR;
void wh_validator_free(wh_validator *v);

#define WH_CHARGED_MAX 512

/* What a decision did, for callers that print it (gpuquota admit) and tests. */
typedef struct wh_validate_result {
    bool allowed;
    gq_code code;                 /* GQ_OK allowed, GQ_EDENIED policy, else fail-closed error */
    char message[GQ_ERR_MSG_MAX]; /* the deny message; "" when allowed */
    gq_amounts charge;            /* the pod's charge (all keys set; zero when not a pod) */
    size_t n_charged;             /* quotas that now hold (or already held) a reservation */
    char charged[WH_CHARGED_MAX]; /* "GPUQuota team-a/q, GPUTenantQuota ml" */
    char reservation_key[GQ_CRD_MAX_STRING];
} wh_validate_result;

/* Decide req (a decoded AdmissionReview) and build the response in resp,
 * which must be uninitialised; on success the caller disposes it. Pod
 * CREATE: exempt namespaces pass; an invalid GPU request is denied with
 * gq_pod_cost_compute's message; CPU-only pods pass; GPULimitRanges must
 * pass; then every matching quota is charged on a fresh read (dry run:
 * evaluated, never written). Pod UPDATE: a change to any gpuquota.io/ label
 * or annotation by an untrusted user is denied. Everything else passes.
 * Denials answer 403 Forbidden; store errors deny too (fail closed). res
 * (may be NULL) receives the details. One audit record and one metrics
 * observation per call when configured. Errors (GQ_ENOMEM) leave resp
 * untouched. */
gq_code wh_validate_review(wh_validator *v, const wh_review_request *req, wh_review_response *resp,
                           wh_validate_result *res, gq_err *err) GQ_WUR;

/* The HTTP handler for /validate (http_handler_fn; ctx is the wh_validator):
 * decodes the body, decides, encodes, waiting for the charges. A body that
 * is not a valid AdmissionReview gets 400, an internal error 500. */
void wh_validate_handle(void *ctx, const http_request *req, http_response *resp);

/* The same as an asynchronous handler (http_async_handler_fn): decides up to
 * the charges on the calling thread, queues them, and returns true; the
 * answer is handed to `later` by the thread that decides (often a charger).
 * A charge still queued when four fifths of the review's timeout (the
 * request's ?timeout=, default 10 s) have passed is refused: the review is
 * denied with a message saying so. Returns false with resp filled for a
 * body that does not decode. */
bool wh_validate_handle_async(void *ctx, const http_request *req, http_response *resp,
                              http_deferred *later);

/* The caches saw quota ns/name (ns NULL: a GPUTenantQuota) ask for
 * escrowed room back (a live want of some replica): a hold this replica
 * has there is given back at once. */
void wh_validator_escrow_wanted(wh_validator *v, const char *ns, const char *name);

/* Counters for tests and the benchmark. */
typedef struct wh_validate_stats {
    uint64_t batches;         /* status writes attempted */
    uint64_t conflicts;       /* 409s seen */
    uint64_t charged;         /* reservations written */
    uint64_t largest_batch;   /* most pendings one group-commit batch held */
    uint64_t escrow_admitted; /* charges admitted on a hold, with no write */
    uint64_t escrow_holds;    /* holds taken */
    uint64_t escrow_deferred; /* denials put off while other replicas' escrow settled */
} wh_validate_stats;
void wh_validate_get_stats(wh_validator *v, wh_validate_stats *out);

#endif
