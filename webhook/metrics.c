#include "webhook/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double wh_metrics_buckets[WH_METRICS_N_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
};

static const char *const webhook_names[WH_WEBHOOK_COUNT_] = {"mutate", "validate"};
static const char *const decision_names[WH_DECISION_COUNT_] = {"allowed", "denied", "error"};
#define N_OPS 5
static const char *const op_names[N_OPS] = {"CREATE", "UPDATE", "DELETE", "CONNECT", "OTHER"};

typedef struct gauge {
    char *ns;
    char *quota;
    char *resource;
    double value[2]; /* indexed by wh_quota_field */
    bool set[2];
} gauge;

struct wh_metrics {
    http_metrics *registry;
    atomic_uint_fast64_t requests[WH_WEBHOOK_COUNT_][N_OPS][WH_DECISION_COUNT_];
    http_histogram latency[WH_WEBHOOK_COUNT_];
    atomic_uint_fast64_t escrow[WH_ESCROW_EVENT_COUNT_];
    pthread_mutex_t lock; /* guards gauges */
    gauge *gauges;        /* sorted by (ns, quota, resource) */
    size_t n_gauges, cap_gauges;
};

static void render(void *ctx, http_expo *e);

gq_code wh_metrics_new(http_metrics *registry, wh_metrics **out)
{
    wh_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return GQ_ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL)) {
        free(m);
        return GQ_ENOMEM;
    }
    for (int h = 0; h < WH_WEBHOOK_COUNT_; h++)
        http_histogram_init(&m->latency[h], wh_metrics_buckets, WH_METRICS_N_BUCKETS);
    gq_code rc = http_metrics_add_source(registry, render, m);
    if (rc) {
        pthread_mutex_destroy(&m->lock);
        free(m);
        return rc;
    }
    m->registry = registry;
    *out = m;
    return GQ_OK;
}

static void gauge_dispose(gauge *g)
{
    free(g->ns);
    free(g->quota);
    free(g->resource);
}

void wh_metrics_free(wh_metrics *m)
{
    if (!m)
        return;
    http_metrics_remove_source(m->registry, render, m);
    for (size_t i = 0; i < m->n_gauges; i++)
        gauge_dispose(&m->gauges[i]);
    free(m->gauges);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static int op_index(const char *op)
{
    for (int i = 0; op && i < N_OPS - 1; i++)
        if (!strcmp(op, op_names[i]))
            return i;
    return N_OPS - 1;
}

void wh_metrics_observe_admission(wh_metrics *m, wh_webhook hook, const char *operation,
                                  wh_decision decision, double seconds)
{
    if (!m || (unsigned)hook >= WH_WEBHOOK_COUNT_ || (unsigned)decision >= WH_DECISION_COUNT_)
        return;
    atomic_fetch_add_explicit(&m->requests[hook][op_index(operation)][decision], 1,
                              memory_order_relaxed);
    http_histogram_observe(&m->latency[hook], seconds);
}

static int gauge_cmp(const gauge *g, const char *ns, const char *quota, const char *resource)
{
    int c = strcmp(g->ns, ns);
    if (!c)
        c = strcmp(g->quota, quota);
    if (!c && resource)
        c = strcmp(g->resource, resource);
    return c;
}

/* Index of the first gauge not less than the key (binary search). */
static size_t gauge_lower_bound(const wh_metrics *m, const char *ns, const char *quota,
                                const char *resource)
{
    size_t lo = 0, hi = m->n_gauges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (gauge_cmp(&m->gauges[mid], ns, quota, resource) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

gq_code wh_metrics_set_quota(wh_metrics *m, wh_quota_field field, const char *ns, const char *quota,
                             const char *resource, double value)
{
    gq_code rc = GQ_OK;
    gauge g = {0};
    if (!m || !ns || !quota || !resource || (field != WH_QUOTA_USED && field != WH_QUOTA_HARD))
        return GQ_EINVAL;
    pthread_mutex_lock(&m->lock);
    size_t i = gauge_lower_bound(m, ns, quota, resource);
    if (i < m->n_gauges && !gauge_cmp(&m->gauges[i], ns, quota, resource)) {
        m->gauges[i].value[field] = value;
        m->gauges[i].set[field] = true;
        goto out;
    }
    if (m->n_gauges >= WH_METRICS_MAX_GAUGES) {
        rc = GQ_ELIMIT;
        goto out;
    }
    if (m->n_gauges == m->cap_gauges) {
        size_t cap = m->cap_gauges ? m->cap_gauges * 2 : 16;
        gauge *ng = realloc(m->gauges, cap * sizeof(*ng));
        if (!ng) {
            rc = GQ_ENOMEM;
            goto out;
        }
        m->gauges = ng;
        m->cap_gauges = cap;
    }
    g.ns = strdup(ns);
    g.quota = strdup(quota);
    g.resource = strdup(resource);
    if (!g.ns || !g.quota || !g.resource) {
        gauge_dispose(&g);
        rc = GQ_ENOMEM;
        goto out;
    }
    g.value[field] = value;
    g.set[field] = true;
    memmove(&m->gauges[i + 1], &m->gauges[i], (m->n_gauges - i) * sizeof(gauge));
    m->gauges[i] = g;
    m->n_gauges++;
out:
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void wh_metrics_forget_quota(wh_metrics *m, const char *ns, const char *quota)
{
    if (!m || !ns || !quota)
        return;
    pthread_mutex_lock(&m->lock);
    size_t i = gauge_lower_bound(m, ns, quota, NULL), j = i;
    while (j < m->n_gauges && !gauge_cmp(&m->gauges[j], ns, quota, NULL))
        gauge_dispose(&m->gauges[j++]);
    if (j > i) { /* none: the table may not even be allocated yet */
        memmove(&m->gauges[i], &m->gauges[j], (m->n_gauges - j) * sizeof(gauge));
        m->n_gauges -= j - i;
    }
    pthread_mutex_unlock(&m->lock);
}

void wh_metrics_count_escrow(wh_metrics *m, wh_escrow_event ev)
{
    if (m && ev >= 0 && ev < WH_ESCROW_EVENT_COUNT_)
        atomic_fetch_add_explicit(&m->escrow[ev], 1, memory_order_relaxed);
}

/* ---- rendering, at each scrape of the registry ---- */

static void render_admission(wh_metrics *m, http_expo *e)
{
    http_expo_family(e, "gpuquota_admission_requests_total", "counter",
                     "Admission reviews answered, by webhook, operation and decision.");
    for (int h = 0; h < WH_WEBHOOK_COUNT_; h++)
        for (int o = 0; o < N_OPS; o++)
            for (int d = 0; d < WH_DECISION_COUNT_; d++) {
                uint_fast64_t v = atomic_load_explicit(&m->requests[h][o][d], memory_order_relaxed);
                if (!v) /* only series that happened, like client_golang vectors */
                    continue;
                http_label l[] = {{"webhook", webhook_names[h]},
                                  {"operation", op_names[o]},
                                  {"decision", decision_names[d]}};
                http_expo_uint(e, "gpuquota_admission_requests_total", l, 3, v);
            }
    http_expo_family(e, "gpuquota_admission_duration_seconds", "histogram",
                     "Time to answer an admission review, from full body to response.");
    for (int h = 0; h < WH_WEBHOOK_COUNT_; h++)
        http_expo_histogram(e, "gpuquota_admission_duration_seconds",
                            &(http_label){"webhook", webhook_names[h]}, 1, &m->latency[h]);
}

static void render_quota(wh_metrics *m, http_expo *e, wh_quota_field f)
{
    static const char *const names[2] = {"gpuquota_quota_used", "gpuquota_quota_hard"};
    static const char *const helps[2] = {
        "GPU quota usage by quota and resource (bytes for gpu-memory, counts otherwise).",
        "GPU quota hard limit by quota and resource (bytes for gpu-memory, counts otherwise).",
    };
    http_expo_family(e, names[f], "gauge", helps[f]);
    for (size_t i = 0; i < m->n_gauges; i++) {
        const gauge *g = &m->gauges[i];
        http_label l[] = {{"namespace", g->ns}, {"quota", g->quota}, {"resource", g->resource}};
        if (g->set[f])
            http_expo_double(e, names[f], l, 3, g->value[f]);
    }
}

static void render_escrow(wh_metrics *m, http_expo *e)
{
    static const char *const events[WH_ESCROW_EVENT_COUNT_] = {"admitted", "held", "deferred"};
    uint_fast64_t any = 0;
    for (int i = 0; i < WH_ESCROW_EVENT_COUNT_; i++)
        any |= atomic_load_explicit(&m->escrow[i], memory_order_relaxed);
    if (!any) /* escrow off, or nothing yet: no family, as a vector without series */
        return;
    http_expo_family(e, "gpuquota_escrow_events_total", "counter",
                     "Escrow of /validate: charges admitted on a hold with no write (admitted), "
                     "holds taken (held), denials put off a step while escrow settled "
                     "(deferred).");
    for (int i = 0; i < WH_ESCROW_EVENT_COUNT_; i++) {
        uint_fast64_t v = atomic_load_explicit(&m->escrow[i], memory_order_relaxed);
        if (v)
            http_expo_uint(e, "gpuquota_escrow_events_total", &(http_label){"event", events[i]}, 1,
                           v);
    }
}

static void render(void *ctx, http_expo *e)
{
    wh_metrics *m = ctx;
    render_admission(m, e);
    render_escrow(m, e);
    pthread_mutex_lock(&m->lock);
    render_quota(m, e, WH_QUOTA_USED);
    render_quota(m, e, WH_QUOTA_HARD);
    pthread_mutex_unlock(&m->lock);
}
