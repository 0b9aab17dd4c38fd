/* The one Prometheus metrics registry of the shells, and the one writer of
 * the text exposition format (0.0.4).
 *
 * A registry renders, at each scrape: the families of its sources (each
 * shell registers one: the webhook its admission families, the controller
 * its reconcile and queue families), the HTTP server's error counter,
 * counters and gauges that other components keep (read through a callback
 * at each scrape), and gpuquota_build_info. A source writes its families
 * with the http_expo_* writer below, so label escaping, number formatting
 * and histograms are written in one place.
 *
 * Families of the registry itself:
 *   gpuquota_http_errors_total{code}    counter
 *   gpuquota_build_info{version}        gauge (1)
 * All functions are thread-safe. */
#ifndef HTTP_METRICS_H
#define HTTP_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"
#include "common/buf.h"

/* ---- the exposition writer ---- */

/* One scrape's text at most. What grows is the sources' series per quota:
 * the controller writes 26 lines for each (used and hard per resource, queue
 * length, a 16-bucket wait histogram), 11 MiB for 4,096 quotas with 20-byte
 * names and 39 MiB with the longest names Kubernetes allows (63-byte
 * namespace, 253-byte quota). 64 MiB holds that worst case; past it a
 * scrape fails with GQ_ELIMIT instead of growing without bound. */
#define HTTP_SCRAPE_MAX ((size_t)64 << 20)

/* A scrape being written. Errors (over HTTP_SCRAPE_MAX, out of memory) are
 * kept inside and reported once, by http_metrics_render. */
typedef struct http_expo {
    gq_buf text;
} http_expo;

/* One label of a series: value is escaped as the format requires. */
typedef struct http_label {
    const char *name;
    const char *value;
} http_label;

/* "# HELP" and "# TYPE" lines of a family; type is "counter", "gauge" or
 * "histogram". */
void http_expo_family(http_expo *e, const char *name, const char *type, const char *help);
/* One sample: name{labels} value. n_labels may be 0 (labels NULL). */
void http_expo_uint(http_expo *e, const char *name, const http_label *labels, size_t n_labels,
                    uint64_t value);
/* The same for a double: the shortest text that reads back as the same
 * value, integral values up to 2^53 without an exponent, NaN and ±Inf as
 * the format spells them. */
void http_expo_double(http_expo *e, const char *name, const http_label *labels, size_t n_labels,
                      double value);

/* Most upper bounds a histogram has (+Inf excluded). */
#define HTTP_HISTOGRAM_MAX_BOUNDS 16

/* A latency histogram many threads observe into: two relaxed atomic adds
 * per observation, no lock, no allocation. Bounds (seconds, ascending,
 * static storage) are fixed at init. */
typedef struct http_histogram {
    const double *bounds;
    size_t n_bounds;
    /* Per-bucket (not cumulative) counts; slot n_bounds is +Inf. */
    atomic_uint_fast64_t bucket[HTTP_HISTOGRAM_MAX_BOUNDS + 1];
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_ns; /* integer nanoseconds: no CAS loop on a double */
} http_histogram;

/* n_bounds above HTTP_HISTOGRAM_MAX_BOUNDS is cut to it. */
void http_histogram_init(http_histogram *h, const double *bounds, size_t n_bounds);
/* A negative or NaN observation counts as 0; one above an hour as an hour
 * (so that the sum cannot wrap). */
void http_histogram_observe(http_histogram *h, double seconds);
/* Observations so far (count). */
uint64_t http_histogram_count(const http_histogram *h);
/* The series of one histogram: NAME_bucket{labels,le} (cumulative),
 * NAME_sum, NAME_count. A scrape racing observations never shows a bucket
 * above _count. The family line is the caller's (http_expo_family). */
void http_expo_histogram(http_expo *e, const char *name, const http_label *labels, size_t n_labels,
                         const http_histogram *h);

/* ---- the registry ---- */

typedef struct http_metrics http_metrics;

/* A source writes its families at each scrape; it must not call back into
 * the registry. */
typedef void (*http_metrics_source_fn)(void *ctx, http_expo *e);

/* Most sources, and most external counters and gauges, of one registry. */
#define HTTP_METRICS_MAX_SOURCES 4
#define HTTP_METRICS_MAX_EXTERNAL 16

/* New registry; version is copied into gpuquota_build_info. Caller owns
 * *out (http_metrics_free). GQ_ENOMEM only. */
gq_code http_metrics_new(const char *version, http_metrics **out) GQ_WUR;
void http_metrics_free(http_metrics *m);

/* Render fn(ctx)'s families at every scrape, before the registry's own,
 * in the order added. GQ_EINVAL for a NULL fn, GQ_ELIMIT beyond
 * HTTP_METRICS_MAX_SOURCES. */
gq_code http_metrics_add_source(http_metrics *m, http_metrics_source_fn fn, void *ctx) GQ_WUR;
/* Stop rendering fn(ctx); when this returns, no scrape is inside it, so
 * ctx may be freed. Unknown pairs are ignored. */
void http_metrics_remove_source(http_metrics *m, http_metrics_source_fn fn, void *ctx);

/* Count one HTTP error response by status; statuses outside the tracked set
 * (400, 401, 403, 404, 405, 408, 413, 415, 429, 500, 503) count as "other".
 * m may be NULL. */
void http_metrics_inc_http_error(http_metrics *m, int status);

/* Render a counter that another component keeps (for example the audit
 * writer's gpuquota_audit_write_errors_total) as its own family: read(ctx)
 * is called at every scrape. name and help must have static storage; name
 * must be a valid metric name ending in _total (at most 64 bytes; help at
 * most 100). GQ_EINVAL for a bad name or help,
 * GQ_ELIMIT beyond HTTP_METRICS_MAX_EXTERNAL. */
gq_code http_metrics_add_external_counter(http_metrics *m, const char *name, const char *help,
                                          uint64_t (*read)(const void *ctx),
                                          const void *ctx) GQ_WUR;

/* The same for a gauge that another component keeps (for example the
 * server's gpuquota_tls_certificate_expiry_timestamp_seconds); the name
 * must not end in _total. Same errors. */
gq_code http_metrics_add_external_gauge(http_metrics *m, const char *name, const char *help,
                                        double (*read)(const void *ctx), const void *ctx) GQ_WUR;

/* Render every family into a heap buffer the caller frees with free().
 * GQ_ENOMEM only. */
gq_code http_metrics_render(http_metrics *m, char **out, size_t *out_len) GQ_WUR;

/* Content-Type of the rendered text. */
#define HTTP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
