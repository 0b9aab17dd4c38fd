/* The webhook's metrics: its families, rendered through the shells' one
 * registry (http/metrics.h) as one of its sources.
 *
 * Every series is known in advance or lives in a small mutex-protected table,
 * so recording on the request path is a handful of relaxed atomic adds and
 * never allocates.
 *
 * Families:
 *   gpuquota_admission_requests_total{webhook,operation,decision}   counter
 *   gpuquota_admission_duration_seconds{webhook}                    histogram
 *   gpuquota_quota_used{namespace,quota,resource}                   gauge
 *   gpuquota_quota_hard{namespace,quota,resource}                   gauge
 * All functions are thread-safe. */
#ifndef WH_METRICS_H
#define WH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"
#include "http/metrics.h"

typedef struct wh_metrics wh_metrics;

typedef enum wh_webhook {
    WH_WEBHOOK_MUTATE = 0,
    WH_WEBHOOK_VALIDATE,
    WH_WEBHOOK_COUNT_
} wh_webhook;

typedef enum wh_decision {
    WH_DECISION_ALLOWED = 0,
    WH_DECISION_DENIED,
    WH_DECISION_ERROR, /* the request could not be evaluated (bad review, internal error) */
    WH_DECISION_COUNT_
} wh_decision;

/* What the escrow of /validate did (docs/validating-webhook.md, "Escrow"). */
typedef enum wh_escrow_event {
    WH_ESCROW_ADMITTED = 0, /* a charge admitted on a hold, with no write */
    WH_ESCROW_HELD,         /* a hold taken */
    WH_ESCROW_DEFERRED,     /* a denial put off one step while escrow settled */
    WH_ESCROW_EVENT_COUNT_
} wh_escrow_event;

typedef enum wh_quota_field {
    WH_QUOTA_USED = 0,
    WH_QUOTA_HARD,
} wh_quota_field;

/* Upper bounds (seconds) of the admission latency histogram, +Inf excluded. */
#define WH_METRICS_N_BUCKETS 12
extern const double wh_metrics_buckets[WH_METRICS_N_BUCKETS];

/* Most distinct quota gauge series kept; further new series are refused
 * (GQ_ELIMIT) so a cluster with runaway quotas cannot grow the process. */
#define WH_METRICS_MAX_GAUGES 4096

/* The webhook's families, rendered by registry, which must outlive them
 * (wh_metrics_free takes them out of it). Caller owns *out. GQ_ENOMEM, or
 * GQ_ELIMIT when the registry has no room for another source. */
gq_code wh_metrics_new(http_metrics *registry, wh_metrics **out) GQ_WUR;
void wh_metrics_free(wh_metrics *m);

/* Count one admission and its latency. operation is the AdmissionReview
 * operation ("CREATE", "UPDATE", "DELETE", "CONNECT"); anything else,
 * including NULL, is counted as "OTHER" so untrusted text never becomes a
 * label. Out-of-range enums are ignored. m may be NULL (no-op). */
void wh_metrics_observe_admission(wh_metrics *m, wh_webhook hook, const char *operation,
                                  wh_decision decision, double seconds);

/* Set one quota gauge. namespace is "" for cluster-scoped (tenant) quotas.
 * Strings are copied. GQ_EINVAL for NULL strings, GQ_ELIMIT when the table
 * is full, GQ_ENOMEM. */
gq_code wh_metrics_set_quota(wh_metrics *m, wh_quota_field field, const char *ns, const char *quota,
                             const char *resource, double value) GQ_WUR;

/* Drop every series of one quota (it was deleted). m may be NULL. */
void wh_metrics_forget_quota(wh_metrics *m, const char *ns, const char *quota);

/* Count one escrow event (NULL m: nothing). */
void wh_metrics_count_escrow(wh_metrics *m, wh_escrow_event ev);

#endif
