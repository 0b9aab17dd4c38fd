#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "webhook/metrics.h"

/* The webhook's families are one source of the shells' registry: each test
 * renders the registry they are registered on. */
static http_metrics *registry;

static wh_metrics *open_metrics(const char *version)
{
    wh_metrics *m = NULL;
    assert_int_equal(http_metrics_new(version, &registry), GQ_OK);
    assert_int_equal(wh_metrics_new(registry, &m), GQ_OK);
    return m;
}

static void close_metrics(wh_metrics *m)
{
    wh_metrics_free(m);
    http_metrics_free(registry);
    registry = NULL;
}

static char *render(wh_metrics *m)
{
    char *text = NULL;
    size_t len = 0;
    (void)m;
    assert_int_equal(http_metrics_render(registry, &text, &len), GQ_OK);
    assert_int_equal(len, strlen(text));
    return text;
}

#define HIST_HEAD                                                                                  \
    "# HELP gpuquota_admission_duration_seconds Time to answer an admission review, from full "    \
    "body to response.\n"                                                                          \
    "# TYPE gpuquota_admission_duration_seconds histogram\n"

#define EMPTY_HIST(w)                                                                              \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.0001\"} 0\n"              \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.00025\"} 0\n"             \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.0005\"} 0\n"              \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.001\"} 0\n"               \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.0025\"} 0\n"              \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.005\"} 0\n"               \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.01\"} 0\n"                \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.025\"} 0\n"               \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.05\"} 0\n"                \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.1\"} 0\n"                 \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"0.25\"} 0\n"                \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"1\"} 0\n"                   \
    "gpuquota_admission_duration_seconds_bucket{webhook=\"" w "\",le=\"+Inf\"} 0\n"                \
    "gpuquota_admission_duration_seconds_sum{webhook=\"" w "\"} 0\n"                               \
    "gpuquota_admission_duration_seconds_count{webhook=\"" w "\"} 0\n"

#define REQ_HEAD                                                                                   \
    "# HELP gpuquota_admission_requests_total Admission reviews answered, by webhook, operation "  \
    "and decision.\n"                                                                              \
    "# TYPE gpuquota_admission_requests_total counter\n"
#define ERR_HEAD                                                                                   \
    "# HELP gpuquota_http_errors_total HTTP error responses sent by the server, by status "        \
    "code.\n"                                                                                      \
    "# TYPE gpuquota_http_errors_total counter\n"
#define USED_HEAD                                                                                  \
    "# HELP gpuquota_quota_used GPU quota usage by quota and resource (bytes for gpu-memory, "     \
    "counts otherwise).\n"                                                                         \
    "# TYPE gpuquota_quota_used gauge\n"
#define HARD_HEAD                                                                                  \
    "# HELP gpuquota_quota_hard GPU quota hard limit by quota and resource (bytes for "            \
    "gpu-memory, counts otherwise).\n"                                                             \
    "# TYPE gpuquota_quota_hard gauge\n"
#define BUILD(v)                                                                                   \
    "# HELP gpuquota_build_info Build information; the value is always 1.\n"                       \
    "# TYPE gpuquota_build_info gauge\n"                                                           \
    "gpuquota_build_info{version=\"" v "\"} 1\n"

static void empty_registry(void **state)
{
    (void)state;
    wh_metrics *m = open_metrics("0.1.0");
    char *text = render(m);
    assert_string_equal(text, REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate")
                                  USED_HEAD HARD_HEAD ERR_HEAD BUILD("0.1.0"));
    free(text);
    close_metrics(m);
}

/* The escrow family shows once something happened, one series per event
 * seen; out-of-range events and a NULL registry count nothing. */
static void escrow_events(void **state)
{
    (void)state;
    wh_metrics *m = open_metrics("0.1.0");
    wh_metrics_count_escrow(NULL, WH_ESCROW_ADMITTED);
    wh_metrics_count_escrow(m, WH_ESCROW_EVENT_COUNT_);
    char *text = render(m);
    assert_null(strstr(text, "gpuquota_escrow_events_total"));
    free(text);
    wh_metrics_count_escrow(m, WH_ESCROW_ADMITTED);
    wh_metrics_count_escrow(m, WH_ESCROW_ADMITTED);
    wh_metrics_count_escrow(m, WH_ESCROW_DEFERRED);
    text = render(m);
    assert_non_null(strstr(text, "# TYPE gpuquota_escrow_events_total counter\n"
                                 "gpuquota_escrow_events_total{event=\"admitted\"} 2\n"
                                 "gpuquota_escrow_events_total{event=\"deferred\"} 1\n# HELP"));
    free(text);
    close_metrics(m);
}

static void admissions_counters_and_histogram(void **state)
{
    (void)state;
    wh_metrics *m = open_metrics("1.2.3");
    /* Boundaries: a value equal to an upper bound falls in that bucket. */
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, "CREATE", WH_DECISION_ALLOWED, 0.0001);
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, "CREATE", WH_DECISION_ALLOWED, 0.0003);
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, "bogus\"op", WH_DECISION_ERROR, 2.0);
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, NULL, WH_DECISION_DENIED, -1.0);
    wh_metrics_observe_admission(m, WH_WEBHOOK_COUNT_, "CREATE", WH_DECISION_ALLOWED, 0.1);
    wh_metrics_observe_admission(m, WH_WEBHOOK_VALIDATE, "UPDATE", WH_DECISION_COUNT_, 0.1);
    wh_metrics_observe_admission(NULL, WH_WEBHOOK_VALIDATE, "UPDATE", WH_DECISION_DENIED, 0.1);
    http_metrics_inc_http_error(registry, 413);
    http_metrics_inc_http_error(registry, 413);
    http_metrics_inc_http_error(registry, 418);
    http_metrics_inc_http_error(NULL, 413);
    char *text = render(m);
    const char *want = REQ_HEAD
        "gpuquota_admission_requests_total{webhook=\"mutate\",operation=\"CREATE\","
        "decision=\"allowed\"} 2\n"
        "gpuquota_admission_requests_total{webhook=\"mutate\",operation=\"OTHER\","
        "decision=\"denied\"} 1\n"
        "gpuquota_admission_requests_total{webhook=\"mutate\",operation=\"OTHER\","
        "decision=\"error\"} 1\n" HIST_HEAD
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.0001\"} 2\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.00025\"} 2\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.0005\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.001\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.0025\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.005\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.01\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.025\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.05\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.1\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"0.25\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"1\"} 3\n"
        "gpuquota_admission_duration_seconds_bucket{webhook=\"mutate\",le=\"+Inf\"} 4\n"
        "gpuquota_admission_duration_seconds_sum{webhook=\"mutate\"} 2.0004\n"
        "gpuquota_admission_duration_seconds_count{webhook=\"mutate\"} 4\n" EMPTY_HIST("validate")
            USED_HEAD HARD_HEAD ERR_HEAD
        "gpuquota_http_errors_total{code=\"413\"} 2\n"
        "gpuquota_http_errors_total{code=\"other\"} 1\n" BUILD("1.2.3");
    assert_string_equal(text, want);
    free(text);
    close_metrics(m);
}

static void quota_gauges_sorted_and_escaped(void **state)
{
    (void)state;
    wh_metrics *m = open_metrics("v\"1\\\n");
    wh_metrics_forget_quota(m, "team-a", "gq"); /* no gauge yet: no-op */
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_HARD, "team-b", "gq", "gpus", 4), GQ_OK);
    assert_int_equal(
        wh_metrics_set_quota(m, WH_QUOTA_USED, "team-a", "gq", "gpu-memory", 53687091200.0), GQ_OK);
    assert_int_equal(
        wh_metrics_set_quota(m, WH_QUOTA_HARD, "team-a", "gq", "gpu-memory", 68719476736.0), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "", "we\"ird\\q\n", "gpu-pods", 0.5),
                     GQ_OK);
    /* Overwrite keeps one series. */
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_HARD, "team-b", "gq", "gpus", 8), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_HARD, "team-c", "gq", "gpus", 1), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_HARD, NULL, "gq", "gpus", 1), GQ_EINVAL);
    assert_int_equal(wh_metrics_set_quota(m, (wh_quota_field)7, "a", "gq", "gpus", 1), GQ_EINVAL);
    wh_metrics_forget_quota(m, "team-c", "gq");
    wh_metrics_forget_quota(m, "team-z", "gq"); /* absent: no-op */
    wh_metrics_forget_quota(NULL, "team-z", "gq");
    char *text = render(m);
    const char *want = REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate") USED_HEAD
        "gpuquota_quota_used{namespace=\"\",quota=\"we\\\"ird\\\\q\\n\",resource=\"gpu-pods\"} "
        "0.5\n"
        "gpuquota_quota_used{namespace=\"team-a\",quota=\"gq\",resource=\"gpu-memory\"} "
        "53687091200\n" HARD_HEAD
        "gpuquota_quota_hard{namespace=\"team-a\",quota=\"gq\",resource=\"gpu-memory\"} "
        "68719476736\n"
        "gpuquota_quota_hard{namespace=\"team-b\",quota=\"gq\",resource=\"gpus\"} 8\n" ERR_HEAD
            BUILD("v\\\"1\\\\\\n");
    assert_string_equal(text, want);
    free(text);
    close_metrics(m);
}

static void gauge_table_is_bounded(void **state)
{
    (void)state;
    char name[32];
    wh_metrics *m = open_metrics("x");
    for (int i = 0; i < WH_METRICS_MAX_GAUGES; i++) {
        snprintf(name, sizeof(name), "q%05d", i);
        assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "ns", name, "gpus", i), GQ_OK);
    }
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "ns", "one-more", "gpus", 1),
                     GQ_ELIMIT);
    /* Updating an existing series still works when full. */
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_HARD, "ns", "q00000", "gpus", 2), GQ_OK);
    close_metrics(m);
    wh_metrics_free(NULL);
}

/* A full gauge table with the longest names Kubernetes allows renders: the
 * scrape's cap (HTTP_SCRAPE_MAX) is far above it. */
static void full_table_renders(void **state)
{
    (void)state;
    wh_metrics *m = open_metrics("v");
    char ns[64], quota[254];
    for (int i = 0; i < WH_METRICS_MAX_GAUGES; i++) {
        snprintf(ns, sizeof(ns), "%063d", i / 2);
        snprintf(quota, sizeof(quota), "%0253d", i);
        for (int f = WH_QUOTA_USED; f <= WH_QUOTA_HARD; f++)
            assert_int_equal(
                wh_metrics_set_quota(m, (wh_quota_field)f, ns, quota, "gpu-memory", 68719476736.0),
                GQ_OK);
    }
    char *text = render(m);
    assert_true(strlen(text) > (size_t)2 * WH_METRICS_MAX_GAUGES * (63 + 253));
    free(text);
    close_metrics(m);
}

static void special_values(void **state)
{
    (void)state;
    wh_metrics *m = open_metrics("x");
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "a", "q", "r1", 1.0 / 0.0), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "a", "q", "r2", 0.1), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "a", "q", "r3", 1e20), GQ_OK);
    char *text = render(m);
    assert_non_null(strstr(text, "resource=\"r1\"} +Inf\n"));
    assert_non_null(strstr(text, "resource=\"r2\"} 0.1\n"));
    assert_non_null(strstr(text, "resource=\"r3\"} 1e+20\n"));
    free(text);
    close_metrics(m);
}

static uint64_t read_counter(const void *ctx)
{
    return *(const uint64_t *)ctx;
}

static void external_counters(void **state)
{
    (void)state;
    uint64_t a = 3, b = 0;
    wh_metrics *m = open_metrics("0.1.0");
    assert_int_equal(
        http_metrics_add_external_counter(registry, "gpuquota_audit_write_errors_total",
                                          "Audit records not written.", read_counter, &a),
        GQ_OK);
    assert_int_equal(http_metrics_add_external_counter(registry, "gpuquota_audit_records_total",
                                                       "Audit records written.", read_counter, &b),
                     GQ_OK);
    a = 7; /* read at scrape time */
    char *text = render(m);
    assert_string_equal(text, REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate")
                                  USED_HEAD HARD_HEAD ERR_HEAD
                        "# HELP gpuquota_audit_write_errors_total Audit records not written.\n"
                        "# TYPE gpuquota_audit_write_errors_total counter\n"
                        "gpuquota_audit_write_errors_total 7\n"
                        "# HELP gpuquota_audit_records_total Audit records written.\n"
                        "# TYPE gpuquota_audit_records_total counter\n"
                        "gpuquota_audit_records_total 0\n" BUILD("0.1.0"));
    free(text);
    static const char *const bad[] = {
        "",          "_total",
        "errors",    "9lives_total",
        "a-b_total", "gpuquota_a_name_that_is_far_too_long_for_the_header_buffers_total"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(http_metrics_add_external_counter(registry, bad[i], "h", read_counter, &a),
                         GQ_EINVAL);
    assert_int_equal(http_metrics_add_external_counter(registry, NULL, "h", read_counter, &a),
                     GQ_EINVAL);
    assert_int_equal(
        http_metrics_add_external_counter(registry, "ok_total", NULL, read_counter, &a), GQ_EINVAL);
    assert_int_equal(http_metrics_add_external_counter(registry, "ok_total", "h", NULL, &a),
                     GQ_EINVAL);
    for (size_t i = 2; i < HTTP_METRICS_MAX_EXTERNAL; i++)
        assert_int_equal(
            http_metrics_add_external_counter(registry, "ok_total", "h", read_counter, &a), GQ_OK);
    assert_int_equal(http_metrics_add_external_counter(registry, "ok_total", "h", read_counter, &a),
                     GQ_ELIMIT);
    close_metrics(m);
}

static double read_gauge(const void *ctx)
{
    return *(const double *)ctx;
}

static void external_gauges(void **state)
{
    (void)state;
    double expiry = 1767225600.0, half = 0.5;
    wh_metrics *m = open_metrics("0.1.0");
    assert_int_equal(http_metrics_add_external_gauge(
                         registry, "gpuquota_tls_certificate_expiry_timestamp_seconds",
                         "When the serving certificate expires.", read_gauge, &expiry),
                     GQ_OK);
    assert_int_equal(http_metrics_add_external_gauge(registry, "gpuquota_half", "A fraction.",
                                                     read_gauge, &half),
                     GQ_OK);
    char *text = render(m);
    assert_string_equal(text, REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate")
                                  USED_HEAD HARD_HEAD ERR_HEAD
                        "# HELP gpuquota_tls_certificate_expiry_timestamp_seconds When the serving "
                        "certificate expires.\n"
                        "# TYPE gpuquota_tls_certificate_expiry_timestamp_seconds gauge\n"
                        "gpuquota_tls_certificate_expiry_timestamp_seconds 1767225600\n"
                        "# HELP gpuquota_half A fraction.\n"
                        "# TYPE gpuquota_half gauge\n"
                        "gpuquota_half 0.5\n" BUILD("0.1.0"));
    free(text);
    /* A gauge named like a counter, or no reader, is refused. */
    assert_int_equal(
        http_metrics_add_external_gauge(registry, "gpuquota_x_total", "h", read_gauge, &half),
        GQ_EINVAL);
    assert_int_equal(http_metrics_add_external_gauge(registry, "gpuquota_x", "h", NULL, &half),
                     GQ_EINVAL);
    close_metrics(m);
}

static void source_a(void *ctx, http_expo *e)
{
    (void)ctx;
    http_expo_family(e, "gpuquota_a", "gauge", "A.");
    http_expo_double(e, "gpuquota_a", NULL, 0, 1.5);
}

static void source_hist(void *ctx, http_expo *e)
{
    http_expo_family(e, "gpuquota_h_seconds", "histogram", "H.");
    http_expo_histogram(e, "gpuquota_h_seconds", NULL, 0, ctx);
}

/* Sources render first, in the order added, and not once removed; an
 * unlabelled histogram; the table's bound. */
static void registry_sources(void **state)
{
    (void)state;
    static const double bounds[] = {0.5, 1};
    http_histogram h;
    http_histogram_init(&h, bounds, 2);
    http_histogram_observe(&h, 0.25);
    http_histogram_observe(&h, 0.0 / 0.0); /* NaN: 0 */
    http_histogram_observe(&h, 2);
    assert_int_equal(http_histogram_count(&h), 3);
    assert_int_equal(http_metrics_new("9", &registry), GQ_OK);
    assert_int_equal(http_metrics_add_source(registry, source_a, NULL), GQ_OK);
    assert_int_equal(http_metrics_add_source(registry, source_hist, &h), GQ_OK);
    char *text = render(NULL);
    assert_string_equal(text, "# HELP gpuquota_a A.\n# TYPE gpuquota_a gauge\ngpuquota_a 1.5\n"
                              "# HELP gpuquota_h_seconds H.\n# TYPE gpuquota_h_seconds histogram\n"
                              "gpuquota_h_seconds_bucket{le=\"0.5\"} 2\n"
                              "gpuquota_h_seconds_bucket{le=\"1\"} 2\n"
                              "gpuquota_h_seconds_bucket{le=\"+Inf\"} 3\n"
                              "gpuquota_h_seconds_sum 2.25\n"
                              "gpuquota_h_seconds_count 3\n" ERR_HEAD BUILD("9"));
    free(text);
    http_metrics_remove_source(registry, source_a, NULL);
    http_metrics_remove_source(registry, source_a, NULL); /* gone: no-op */
    text = render(NULL);
    assert_null(strstr(text, "gpuquota_a"));
    assert_non_null(strstr(text, "gpuquota_h_seconds_count 3\n"));
    free(text);
    assert_int_equal(http_metrics_add_source(registry, NULL, NULL), GQ_EINVAL);
    for (size_t i = 1; i < HTTP_METRICS_MAX_SOURCES; i++)
        assert_int_equal(http_metrics_add_source(registry, source_a, NULL), GQ_OK);
    assert_int_equal(http_metrics_add_source(registry, source_a, NULL), GQ_ELIMIT);
    http_metrics_free(registry);
    registry = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_registry),
        cmocka_unit_test(escrow_events),
        cmocka_unit_test(admissions_counters_and_histogram),
        cmocka_unit_test(quota_gauges_sorted_and_escaped),
        cmocka_unit_test(gauge_table_is_bounded),
        cmocka_unit_test(full_table_renders),
        cmocka_unit_test(special_values),
        cmocka_unit_test(external_counters),
        cmocka_unit_test(external_gauges),
        cmocka_unit_test(registry_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
