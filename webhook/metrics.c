#include "webhook/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"

const double wh_metrics_buckets[WH_METRICS_N_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
};

static const char *const webhook_names[WH_WEBHOOK_COUNT_] = {"mutate", "validate"};
static const char *const decision_names[WH_DECISION_COUNT_] = {"allowed", "denied", "error"};
#define N_OPS 5
static const char *const op_names[N_OPS] = {"CREATE", "UPDATE", "DELETE", "CONNECT", "OTHER"};
#define N_CODES 12
static const int error_codes[N_CODES - 1] = {400, 401, 403, 404, 405, 408, 413, 415, 429, 500, 503};

typedef struct histogram {
    /* Per-bucket (not cumulative) counts; the last slot is +Inf. Summing at
     * render time keeps observation to two atomic adds. */
    atomic_uint_fast64_t bucket[WH_METRICS_N_BUCKETS + 1];
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_ns; /* integer nanoseconds: no CAS loop on a double */
} histogram;

typedef struct gauge {
    char *ns;
    char *quota;
    char *resource;
    double value[2]; /* indexed by wh_quota_field */
    bool set[2];
} gauge;

typedef struct external {
    const char *name, *help;
    uint64_t (*read)(const void *ctx);     /* a counter, or */
    double (*read_gauge)(const void *ctx); /* a gauge */
    const void *ctx;
} external;

struct wh_metrics {
    char *version;
    atomic_uint_fast64_t requests[WH_WEBHOOK_COUNT_][N_OPS][WH_DECISION_COUNT_];
    histogram latency[WH_WEBHOOK_COUNT_];
    atomic_uint_fast64_t http_errors[N_CODES];
    pthread_mutex_t lock; /* guards gauges */
    gauge *gauges;        /* sorted by (ns, quota, resource) */
    size_t n_gauges, cap_gauges;
    external ext[WH_METRICS_MAX_EXTERNAL]; /* guarded by lock */
    size_t n_ext;
};

gq_code wh_metrics_new(const char *version, wh_metrics **out)
{
    wh_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return GQ_ENOMEM;
    m->version = strdup(version ? version : "");
    if (!m->version || pthread_mutex_init(&m->lock, NULL)) {
        free(m->version);
        free(m);
        return GQ_ENOMEM;
    }
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
    for (size_t i = 0; i < m->n_gauges; i++)
        gauge_dispose(&m->gauges[i]);
    free(m->gauges);
    pthread_mutex_destroy(&m->lock);
    free(m->version);
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
    if (!(seconds >= 0)) /* also catches NaN */
        seconds = 0;
    histogram *h = &m->latency[hook];
    size_t b = 0;
    while (b < WH_METRICS_N_BUCKETS && seconds > wh_metrics_buckets[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    /* An hour caps one observation so the nanosecond sum cannot wrap. */
    double ns = seconds > 3600 ? 3600e9 : seconds * 1e9;
    atomic_fetch_add_explicit(&h->sum_ns, (uint_fast64_t)(ns + 0.5), memory_order_relaxed);
}

void wh_metrics_inc_http_error(wh_metrics *m, int status)
{
    if (!m)
        return;
    size_t i = 0;
    while (i < N_CODES - 1 && error_codes[i] != status)
        i++;
    atomic_fetch_add_explicit(&m->http_errors[i], 1, memory_order_relaxed);
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

/* Counters end in _total, gauges must not (Prometheus naming). */
static bool metric_name_valid(const char *name, bool counter)
{
    size_t n = name ? strlen(name) : 0;
    /* Bounded: a metric name is a short identifier. */
    if (n < 7 || n > 64 || counter != !strcmp(name + n - 6, "_total"))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static gq_code add_external(wh_metrics *m, const external *e)
{
    gq_code rc = GQ_OK;
    if (!m || !e->help || strlen(e->help) > 100 || !metric_name_valid(e->name, e->read != NULL))
        return GQ_EINVAL;
    pthread_mutex_lock(&m->lock);
    if (m->n_ext == WH_METRICS_MAX_EXTERNAL)
        rc = GQ_ELIMIT;
    else
        m->ext[m->n_ext++] = *e;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

gq_code wh_metrics_add_external_counter(wh_metrics *m, const char *name, const char *help,
                                        uint64_t (*read)(const void *ctx), const void *ctx)
{
    if (!read)
        return GQ_EINVAL;
    return add_external(m, &(external){name, help, read, NULL, ctx});
}

gq_code wh_metrics_add_external_gauge(wh_metrics *m, const char *name, const char *help,
                                      double (*read)(const void *ctx), const void *ctx)
{
    if (!read)
        return GQ_EINVAL;
    return add_external(m, &(external){name, help, NULL, read, ctx});
}

/* ---- rendering ---- */

/* Label values escape backslash, double quote and newline (format 0.0.4). */
static void sb_label_value(gq_strbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            gq_strbuf_add(b, "\\\\", 2);
        else if (*s == '"')
            gq_strbuf_add(b, "\\\"", 2);
        else if (*s == '\n')
            gq_strbuf_add(b, "\\n", 2);
        else
            gq_strbuf_add(b, s, 1);
    }
}

/* Shortest text that reads back as the same double; integral values up to
 * 2^53 print without exponent so byte counts stay readable. */
static void sb_double(gq_strbuf *b, double v)
{
    char tmp[40];
    if (isnan(v)) {
        gq_strbuf_puts(b, "NaN");
        return;
    }
    if (isinf(v)) {
        gq_strbuf_puts(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double)(int64_t)v) {
        gq_strbuf_printf(b, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    gq_strbuf_puts(b, tmp);
}

static void sb_header(gq_strbuf *b, const char *name, const char *type, const char *help)
{
    gq_strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint_fast64_t load(atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void render_admission(wh_metrics *m, gq_strbuf *b)
{
    sb_header(b, "gpuquota_admission_requests_total", "counter",
              "Admission reviews answered, by webhook, operation and decision.");
    for (int h = 0; h < WH_WEBHOOK_COUNT_; h++)
        for (int o = 0; o < N_OPS; o++)
            for (int d = 0; d < WH_DECISION_COUNT_; d++) {
                uint_fast64_t v = load(&m->requests[h][o][d]);
                if (!v) /* only series that happened, like client_golang vectors */
                    continue;
                gq_strbuf_printf(
                    b,
                    "gpuquota_admission_requests_total{webhook=\"%s\",operation=\"%s\","
                    "decision=\"%s\"} %ju\n",
                    webhook_names[h], op_names[o], decision_names[d], (uintmax_t)v);
            }
    sb_header(b, "gpuquota_admission_duration_seconds", "histogram",
              "Time to answer an admission review, from full body to response.");
    for (int h = 0; h < WH_WEBHOOK_COUNT_; h++) {
        histogram *hg = &m->latency[h];
        /* Read count first and clamp the cumulative sum to it, so a scrape
         * racing observations never shows +Inf above _count. */
        uint_fast64_t count = load(&hg->count), cum = 0;
        for (int i = 0; i <= WH_METRICS_N_BUCKETS; i++) {
            cum += load(&hg->bucket[i]);
            if (cum > count)
                cum = count;
            gq_strbuf_printf(b, "gpuquota_admission_duration_seconds_bucket{webhook=\"%s\",le=\"",
                             webhook_names[h]);
            if (i < WH_METRICS_N_BUCKETS)
                sb_double(b, wh_metrics_buckets[i]);
            else
                gq_strbuf_puts(b, "+Inf");
            gq_strbuf_printf(b, "\"} %ju\n", (uintmax_t)(i < WH_METRICS_N_BUCKETS ? cum : count));
        }
        gq_strbuf_printf(b, "gpuquota_admission_duration_seconds_sum{webhook=\"%s\"} ",
                         webhook_names[h]);
        sb_double(b, (double)load(&hg->sum_ns) / 1e9);
        gq_strbuf_printf(b, "\ngpuquota_admission_duration_seconds_count{webhook=\"%s\"} %ju\n",
                         webhook_names[h], (uintmax_t)count);
    }
}

static void render_http_errors(wh_metrics *m, gq_strbuf *b)
{
    sb_header(b, "gpuquota_http_errors_total", "counter",
              "HTTP error responses sent by the server, by status code.");
    for (int i = 0; i < N_CODES; i++) {
        uint_fast64_t v = load(&m->http_errors[i]);
        if (!v)
            continue;
        if (i < N_CODES - 1)
            gq_strbuf_printf(b, "gpuquota_http_errors_total{code=\"%d\"} %ju\n", error_codes[i],
                             (uintmax_t)v);
        else
            gq_strbuf_printf(b, "gpuquota_http_errors_total{code=\"other\"} %ju\n", (uintmax_t)v);
    }
}

static void render_quota(wh_metrics *m, gq_strbuf *b, wh_quota_field f)
{
    static const char *const names[2] = {"gpuquota_quota_used", "gpuquota_quota_hard"};
    static const char *const helps[2] = {
        "GPU quota usage by quota and resource (bytes for gpu-memory, counts otherwise).",
        "GPU quota hard limit by quota and resource (bytes for gpu-memory, counts otherwise).",
    };
    sb_header(b, names[f], "gauge", helps[f]);
    for (size_t i = 0; i < m->n_gauges; i++) {
        const gauge *g = &m->gauges[i];
        if (!g->set[f])
            continue;
        gq_strbuf_puts(b, names[f]);
        gq_strbuf_puts(b, "{namespace=\"");
        sb_label_value(b, g->ns);
        gq_strbuf_puts(b, "\",quota=\"");
        sb_label_value(b, g->quota);
        gq_strbuf_puts(b, "\",resource=\"");
        sb_label_value(b, g->resource);
        gq_strbuf_puts(b, "\"} ");
        sb_double(b, g->value[f]);
        gq_strbuf_puts(b, "\n");
    }
}

gq_code wh_metrics_render(wh_metrics *m, char **out, size_t *out_len)
{
    gq_strbuf b = {0};
    if (!m)
        return GQ_EINVAL;
    render_admission(m, &b);
    render_http_errors(m, &b);
    pthread_mutex_lock(&m->lock);
    render_quota(m, &b, WH_QUOTA_USED);
    render_quota(m, &b, WH_QUOTA_HARD);
    for (size_t i = 0; i < m->n_ext; i++) {
        const external *e = &m->ext[i];
        sb_header(&b, e->name, e->read ? "counter" : "gauge", e->help);
        if (e->read) {
            gq_strbuf_printf(&b, "%s %ju\n", e->name, (uintmax_t)e->read(e->ctx));
        } else {
            gq_strbuf_printf(&b, "%s ", e->name);
            sb_double(&b, e->read_gauge(e->ctx));
            gq_strbuf_puts(&b, "\n");
        }
    }
    pthread_mutex_unlock(&m->lock);
    sb_header(&b, "gpuquota_build_info", "gauge", "Build information; the value is always 1.");
    gq_strbuf_puts(&b, "gpuquota_build_info{version=\"");
    sb_label_value(&b, m->version);
    gq_strbuf_puts(&b, "\"} 1\n");
    return gq_strbuf_finish(&b, out, out_len);
}
