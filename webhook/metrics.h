/* Prometheus metrics registry for the shells (webhook now, controller later).
 *
 * Every series is known in advance or lives in a small mutex-protected table,
 * so recording on the request path is a handful of relaxed atomic adds and
 * never allocates. wh_metrics_render writes text exposition format 0.0.4.
 *
 * Families:
 *   gpuquota_admission_requests_total{webhook,operation,decision}   counter
 *   gpuquota_admission_duration_seconds{webhook}                    histogram
 *   gpuquota_http_errors_total{code}                                counter
 *   gpuquota_quota_used{namespace,quota,resource}                   gauge
 *   gpuquota_quota_hard{namespace,quota,resource}                   gauge
 *   gpuquota_build_info{version}                                    gauge (1)
 * plus counters and gauges kept by other components
 * (wh_metrics_add_external_counter, wh_metrics_add_external_gauge).
 * All functions are thread-safe. */
#ifndef WH_METRICS_H
#define WH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"

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

/* New registry; version is copied into gpuquota_build_info. Caller owns *out
 * (wh_metrics_free). GQ_ENOMEM only. */
gq_code wh_metrics_new(const char *version, wh_metrics **out) GQ_WUR;
void wh_metrics_free(wh_metrics *m);

/* Count one admission and its latency. operation is the AdmissionReview
 * operation ("CREATE", "UPDATE", "DELETE", "CONNECT"); anything else,
 * including NULL, is counted as "OTHER" so untrusted text never becomes a
 * label. Out-of-range enums are ignored. m may be NULL (no-op). */
void wh_metrics_observe_admission(wh_metrics *m, wh_webhook hook, const char *operation,
                                  wh_decision decision, double seconds);

/* Count one HTTP error response by status; statuses outside the tracked set
 * (400, 401, 403, 404, 405, 408, 413, 415, 429, 500, 503) count as "other".
 * m may be NULL. */
void wh_metrics_inc_http_error(wh_metrics *m, int status);

/* Set one quota gauge. namespace is "" for cluster-scoped (tenant) quotas.
 * Strings are copied. GQ_EINVAL for NULL strings, GQ_ELIMIT when the table
 * is full, GQ_ENOMEM. */
gq_code wh_metrics_set_quota(wh_metrics *m, wh_quota_field field, const char *ns, const char *quota,
                             const char *resource, double value) GQ_WUR;

/* Drop every series of one quota (it was deleted). m may be NULL. */
void wh_metrics_forget_quota(wh_metrics *m, const char *ns, const char *quota);

/* Most counters and gauges kept elsewhere that the registry renders (below). */
#define WH_METRICS_MAX_EXTERNAL 16

/* Render a counter that another component keeps (for example the audit
 * writer's gpuquota_audit_write_errors_total) as its own family: read(ctx)
 * is called at every scrape. name and help must have static storage; name
 * must be a valid metric name ending in _total (at most 64 bytes; help at
 * most 100). GQ_EINVAL for a bad name or help,
 * GQ_ELIMIT beyond WH_METRICS_MAX_EXTERNAL. */
gq_code wh_metrics_add_external_counter(wh_metrics *m, const char *name, const char *help,
                                        uint64_t (*read)(const void *ctx), const void *ctx) GQ_WUR;

/* The same for a gauge that another component keeps (for example the
 * server's gpuquota_tls_certificate_expiry_timestamp_seconds); the name
 * must not end in _total. Same errors. */
gq_code wh_metrics_add_external_gauge(wh_metrics *m, const char *name, const char *help,
                                      double (*read)(const void *ctx), const void *ctx) GQ_WUR;

/* Render all families in exposition format 0.0.4 into a heap buffer the
 * caller frees with free(). GQ_ENOMEM only. */
gq_code wh_metrics_render(wh_metrics *m, char **out, size_t *out_len) GQ_WUR;

/* Content-Type of the rendered text. */
#define WH_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
