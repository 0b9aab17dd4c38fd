#include "http/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the exposition writer ---- */

void http_expo_family(http_expo *e, const char *name, const char *type, const char *help)
{
    gq_buf_printf(&e->text, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values escape backslash, double quote and newline (format 0.0.4). */
static void label_value(gq_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            gq_buf_add(b, "\\\\", 2);
        else if (*s == '"')
            gq_buf_add(b, "\\\"", 2);
        else if (*s == '\n')
            gq_buf_add(b, "\\n", 2);
        else
            gq_buf_add(b, s, 1);
    }
}

/* name{a="x",b="y",extra="v"} with the trailing space before the value;
 * extra (the histogram's le) may be NULL. */
static void series(gq_buf *b, const char *name, const char *suffix, const http_label *labels,
                   size_t n, const http_label *extra)
{
    gq_buf_puts(b, name);
    gq_buf_puts(b, suffix);
    if (n || extra) {
        gq_buf_puts(b, "{");
        for (size_t i = 0; i < n + (extra != NULL); i++) {
            const http_label *l = i < n ? &labels[i] : extra;
            gq_buf_printf(b, "%s%s=\"", i ? "," : "", l->name);
            label_value(b, l->value ? l->value : "");
            gq_buf_puts(b, "\"");
        }
        gq_buf_puts(b, "}");
    }
    gq_buf_puts(b, " ");
}

/* The shortest text that reads back as the same double, into tmp; integral
 * values up to 2^53 print without exponent so byte counts stay readable. */
static const char *number_text(double v, char tmp[40])
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    if (v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double)(int64_t)v) {
        snprintf(tmp, 40, "%.0f", v);
        return tmp;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, 40, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    return tmp;
}

static void number(gq_buf *b, double v)
{
    char tmp[40];
    gq_buf_puts(b, number_text(v, tmp));
}

void http_expo_uint(http_expo *e, const char *name, const http_label *labels, size_t n_labels,
                    uint64_t value)
{
    series(&e->text, name, "", labels, n_labels, NULL);
    gq_buf_printf(&e->text, "%ju\n", (uintmax_t)value);
}

void http_expo_double(http_expo *e, const char *name, const http_label *labels, size_t n_labels,
                      double value)
{
    series(&e->text, name, "", labels, n_labels, NULL);
    number(&e->text, value);
    gq_buf_puts(&e->text, "\n");
}

void http_histogram_init(http_histogram *h, const double *bounds, size_t n_bounds)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->n_bounds = n_bounds > HTTP_HISTOGRAM_MAX_BOUNDS ? HTTP_HISTOGRAM_MAX_BOUNDS : n_bounds;
}

void http_histogram_observe(http_histogram *h, double seconds)
{
    if (!(seconds >= 0)) /* also catches NaN */
        seconds = 0;
    size_t b = 0;
    while (b < h->n_bounds && seconds > h->bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    double ns = seconds > 3600 ? 3600e9 : seconds * 1e9;
    atomic_fetch_add_explicit(&h->sum_ns, (uint_fast64_t)(ns + 0.5), memory_order_relaxed);
}

static uint_fast64_t load(const atomic_uint_fast64_t *a)
{
    return atomic_load_explicit((atomic_uint_fast64_t *)a, memory_order_relaxed);
}

uint64_t http_histogram_count(const http_histogram *h)
{
    return load(&h->count);
}

void http_expo_histogram(http_expo *e, const char *name, const http_label *labels, size_t n_labels,
                         const http_histogram *h)
{
    gq_buf *b = &e->text;
    /* Read count first and clamp the cumulative sum to it, so a scrape
     * racing observations never shows +Inf above _count. */
    uint_fast64_t count = load(&h->count), cum = 0;
    for (size_t i = 0; i <= h->n_bounds; i++) {
        char tmp[40];
        const char *le = i < h->n_bounds ? number_text(h->bounds[i], tmp) : "+Inf";
        cum += load(&h->bucket[i]);
        if (cum > count)
            cum = count;
        series(b, name, "_bucket", labels, n_labels, &(http_label){"le", le});
        gq_buf_printf(b, "%ju\n", (uintmax_t)(i < h->n_bounds ? cum : count));
    }
    series(b, name, "_sum", labels, n_labels, NULL);
    number(b, (double)load(&h->sum_ns) / 1e9);
    gq_buf_puts(b, "\n");
    series(b, name, "_count", labels, n_labels, NULL);
    gq_buf_printf(b, "%ju\n", (uintmax_t)count);
}

/* ---- the registry ---- */

#define N_CODES 12
static const int error_codes[N_CODES - 1] = {400, 401, 403, 404, 405, 408, 413, 415, 429, 500, 503};

typedef struct external {
    const char *name, *help;
    uint64_t (*read)(const void *ctx);     /* a counter, or */
    double (*read_gauge)(const void *ctx); /* a gauge */
    const void *ctx;
} external;

typedef struct source {
    http_metrics_source_fn fn;
    void *ctx;
} source;

struct http_metrics {
    char *version;
    atomic_uint_fast64_t http_errors[N_CODES];
    pthread_mutex_t lock; /* guards the tables below */
    source sources[HTTP_METRICS_MAX_SOURCES];
    size_t n_sources;
    external ext[HTTP_METRICS_MAX_EXTERNAL];
    size_t n_ext;
};

gq_code http_metrics_new(const char *version, http_metrics **out)
{
    http_metrics *m = calloc(1, sizeof(*m));
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

void http_metrics_free(http_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->version);
    free(m);
}

gq_code http_metrics_add_source(http_metrics *m, http_metrics_source_fn fn, void *ctx)
{
    gq_code rc = GQ_OK;
    if (!m || !fn)
        return GQ_EINVAL;
    pthread_mutex_lock(&m->lock);
    if (m->n_sources == HTTP_METRICS_MAX_SOURCES)
        rc = GQ_ELIMIT;
    else
        m->sources[m->n_sources++] = (source){fn, ctx};
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void http_metrics_remove_source(http_metrics *m, http_metrics_source_fn fn, void *ctx)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n_sources; i++)
        if (m->sources[i].fn == fn && m->sources[i].ctx == ctx) {
            memmove(&m->sources[i], &m->sources[i + 1],
                    (m->n_sources - i - 1) * sizeof(m->sources[0]));
            m->n_sources--;
            break;
        }
    pthread_mutex_unlock(&m->lock);
}

void http_metrics_inc_http_error(http_metrics *m, int status)
{
    if (!m)
        return;
    size_t i = 0;
    while (i < N_CODES - 1 && error_codes[i] != status)
        i++;
    atomic_fetch_add_explicit(&m->http_errors[i], 1, memory_order_relaxed);
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

static gq_code add_external(http_metrics *m, const external *e)
{
    gq_code rc = GQ_OK;
    if (!m || !e->help || strlen(e->help) > 100 || !metric_name_valid(e->name, e->read != NULL))
        return GQ_EINVAL;
    pthread_mutex_lock(&m->lock);
    if (m->n_ext == HTTP_METRICS_MAX_EXTERNAL)
        rc = GQ_ELIMIT;
    else
        m->ext[m->n_ext++] = *e;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

gq_code http_metrics_add_external_counter(http_metrics *m, const char *name, const char *help,
                                          uint64_t (*read)(const void *ctx), const void *ctx)
{
    if (!read)
        return GQ_EINVAL;
    return add_external(m, &(external){name, help, read, NULL, ctx});
}

gq_code http_metrics_add_external_gauge(http_metrics *m, const char *name, const char *help,
                                        double (*read)(const void *ctx), const void *ctx)
{
    if (!read)
        return GQ_EINVAL;
    return add_external(m, &(external){name, help, NULL, read, ctx});
}

static void render_http_errors(http_metrics *m, http_expo *e)
{
    http_expo_family(e, "gpuquota_http_errors_total", "counter",
                     "HTTP error responses sent by the server, by status code.");
    for (int i = 0; i < N_CODES; i++) {
        uint_fast64_t v = load(&m->http_errors[i]);
        char code[16] = "other";
        if (!v) /* only series that happened, like client_golang vectors */
            continue;
        if (i < N_CODES - 1)
            snprintf(code, sizeof(code), "%d", error_codes[i]);
        http_expo_uint(e, "gpuquota_http_errors_total", &(http_label){"code", code}, 1, v);
    }
}

static void render_externals(http_metrics *m, http_expo *e)
{
    for (size_t i = 0; i < m->n_ext; i++) {
        const external *x = &m->ext[i];
        http_expo_family(e, x->name, x->read ? "counter" : "gauge", x->help);
        if (x->read)
            http_expo_uint(e, x->name, NULL, 0, x->read(x->ctx));
        else
            http_expo_double(e, x->name, NULL, 0, x->read_gauge(x->ctx));
    }
}

gq_code http_metrics_render(http_metrics *m, char **out, size_t *out_len)
{
    http_expo e;
    if (!m)
        return GQ_EINVAL;
    gq_buf_init(&e.text, HTTP_SCRAPE_MAX);
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n_sources; i++)
        m->sources[i].fn(m->sources[i].ctx, &e);
    render_http_errors(m, &e);
    render_externals(m, &e);
    pthread_mutex_unlock(&m->lock);
    http_expo_family(&e, "gpuquota_build_info", "gauge",
                     "Build information; the value is always 1.");
    http_expo_uint(&e, "gpuquota_build_info", &(http_label){"version", m->version}, 1, 1);
    return gq_buf_finish(&e.text, out, out_len);
}
