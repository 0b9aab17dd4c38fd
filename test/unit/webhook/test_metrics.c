#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "webhook/metrics.h"

static char *render(wh_metrics *m)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(wh_metrics_render(m, &text, &len), GQ_OK);
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
    wh_metrics *m = NULL;
    assert_int_equal(wh_metrics_new("0.1.0", &m), GQ_OK);
    char *text = render(m);
    assert_string_equal(text, REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate")
                                  ERR_HEAD USED_HEAD HARD_HEAD BUILD("0.1.0"));
    free(text);
    wh_metrics_free(m);
}

static void admissions_counters_and_histogram(void **state)
{
    (void)state;
    wh_metrics *m = NULL;
    assert_int_equal(wh_metrics_new("1.2.3", &m), GQ_OK);
    /* Boundaries: a value equal to an upper bound falls in that bucket. */
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, "CREATE", WH_DECISION_ALLOWED, 0.0001);
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, "CREATE", WH_DECISION_ALLOWED, 0.0003);
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, "bogus\"op", WH_DECISION_ERROR, 2.0);
    wh_metrics_observe_admission(m, WH_WEBHOOK_MUTATE, NULL, WH_DECISION_DENIED, -1.0);
    wh_metrics_observe_admission(m, WH_WEBHOOK_COUNT_, "CREATE", WH_DECISION_ALLOWED, 0.1);
    wh_metrics_observe_admission(m, WH_WEBHOOK_VALIDATE, "UPDATE", WH_DECISION_COUNT_, 0.1);
    wh_metrics_observe_admission(NULL, WH_WEBHOOK_VALIDATE, "UPDATE", WH_DECISION_DENIED, 0.1);
    wh_metrics_inc_http_error(m, 413);
    wh_metrics_inc_http_error(m, 413);
    wh_metrics_inc_http_error(m, 418);
    wh_metrics_inc_http_error(NULL, 413);
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
            ERR_HEAD
        "gpuquota_http_errors_total{code=\"413\"} 2\n"
        "gpuquota_http_errors_total{code=\"other\"} 1\n" USED_HEAD HARD_HEAD BUILD("1.2.3");
    assert_string_equal(text, want);
    free(text);
    wh_metrics_free(m);
}

static void quota_gauges_sorted_and_escaped(void **state)
{
    (void)state;
    wh_metrics *m = NULL;
    assert_int_equal(wh_metrics_new("v\"1\\\n", &m), GQ_OK);
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
    const char *want =
        REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate") ERR_HEAD USED_HEAD
        "gpuquota_quota_used{namespace=\"\",quota=\"we\\\"ird\\\\q\\n\",resource=\"gpu-pods\"} "
        "0.5\n"
        "gpuquota_quota_used{namespace=\"team-a\",quota=\"gq\",resource=\"gpu-memory\"} "
        "53687091200\n" HARD_HEAD
        "gpuquota_quota_hard{namespace=\"team-a\",quota=\"gq\",resource=\"gpu-memory\"} "
        "68719476736\n"
        "gpuquota_quota_hard{namespace=\"team-b\",quota=\"gq\",resource=\"gpus\"} 8\n" BUILD(
            "v\\\"1\\\\\\n");
    assert_string_equal(text, want);
    free(text);
    wh_metrics_free(m);
}

static void gauge_table_is_bounded(void **state)
{
    (void)state;
    wh_metrics *m = NULL;
    char name[32];
    assert_int_equal(wh_metrics_new("x", &m), GQ_OK);
    for (int i = 0; i < WH_METRICS_MAX_GAUGES; i++) {
        snprintf(name, sizeof(name), "q%05d", i);
        assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "ns", name, "gpus", i), GQ_OK);
    }
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "ns", "one-more", "gpus", 1),
                     GQ_ELIMIT);
    /* Updating an existing series still works when full. */
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_HARD, "ns", "q00000", "gpus", 2), GQ_OK);
    wh_metrics_free(m);
    wh_metrics_free(NULL);
}

static void special_values(void **state)
{
    (void)state;
    wh_metrics *m = NULL;
    assert_int_equal(wh_metrics_new("x", &m), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "a", "q", "r1", 1.0 / 0.0), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "a", "q", "r2", 0.1), GQ_OK);
    assert_int_equal(wh_metrics_set_quota(m, WH_QUOTA_USED, "a", "q", "r3", 1e20), GQ_OK);
    char *text = render(m);
    assert_non_null(strstr(text, "resource=\"r1\"} +Inf\n"));
    assert_non_null(strstr(text, "resource=\"r2\"} 0.1\n"));
    assert_non_null(strstr(text, "resource=\"r3\"} 1e+20\n"));
    free(text);
    wh_metrics_free(m);
}

static uint64_t read_counter(const void *ctx)
{
    return *(const uint64_t *)ctx;
}

static void external_counters(void **state)
{
    (void)state;
    wh_metrics *m = NULL;
    uint64_t a = 3, b = 0;
    assert_int_equal(wh_metrics_new("0.1.0", &m), GQ_OK);
    assert_int_equal(wh_metrics_add_external_counter(m, "gpuquota_audit_write_errors_total",
                                                     "Audit records not written.", read_counter,
                                                     &a),
                     GQ_OK);
    assert_int_equal(wh_metrics_add_external_counter(m, "gpuquota_audit_records_total",
                                                     "Audit records written.", read_counter, &b),
                     GQ_OK);
    a = 7; /* read at scrape time */
    char *text = render(m);
    assert_string_equal(text, REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate")
                                  ERR_HEAD USED_HEAD HARD_HEAD
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
        assert_int_equal(wh_metrics_add_external_counter(m, bad[i], "h", read_counter, &a),
                         GQ_EINVAL);
    assert_int_equal(wh_metrics_add_external_counter(m, NULL, "h", read_counter, &a), GQ_EINVAL);
    assert_int_equal(wh_metrics_add_external_counter(m, "ok_total", NULL, read_counter, &a),
                     GQ_EINVAL);
    assert_int_equal(wh_metrics_add_external_counter(m, "ok_total", "h", NULL, &a), GQ_EINVAL);
    for (size_t i = 2; i < WH_METRICS_MAX_EXTERNAL; i++)
        assert_int_equal(wh_metrics_add_external_counter(m, "ok_total", "h", read_counter, &a),
                         GQ_OK);
    assert_int_equal(wh_metrics_add_external_counter(m, "ok_total", "h", read_counter, &a),
                     GQ_ELIMIT);
    wh_metrics_free(m);
}

static double read_gauge(const void *ctx)
{
    return *(const double *)ctx;
}

static void external_gauges(void **state)
{
    (void)state;
    wh_metrics *m = NULL;
    double expiry = 1767225600.0, half = 0.5;
    assert_int_equal(wh_metrics_new("0.1.0", &m), GQ_OK);
    assert_int_equal(
        wh_metrics_add_external_gauge(m, "gpuquota_tls_certificate_expiry_timestamp_seconds",
                                      "When the serving certificate expires.", read_gauge, &expiry),
        GQ_OK);
    assert_int_equal(
        wh_metrics_add_external_gauge(m, "gpuquota_half", "A fraction.", read_gauge, &half), GQ_OK);
    char *text = render(m);
    assert_string_equal(text, REQ_HEAD HIST_HEAD EMPTY_HIST("mutate") EMPTY_HIST("validate")
                                  ERR_HEAD USED_HEAD HARD_HEAD
                        "# HELP gpuquota_tls_certificate_expiry_timestamp_seconds When the serving "
                        "certificate expires.\n"
                        "# TYPE gpuquota_tls_certificate_expiry_timestamp_seconds gauge\n"
                        "gpuquota_tls_certificate_expiry_timestamp_seconds 1767225600\n"
                        "# HELP gpuquota_half A fraction.\n"
                        "# TYPE gpuquota_half gauge\n"
                        "gpuquota_half 0.5\n" BUILD("0.1.0"));
    free(text);
    /* A gauge named like a counter, or no reader, is refused. */
    assert_int_equal(wh_metrics_add_external_gauge(m, "gpuquota_x_total", "h", read_gauge, &half),
                     GQ_EINVAL);
    assert_int_equal(wh_metrics_add_external_gauge(m, "gpuquota_x", "h", NULL, &half), GQ_EINVAL);
    wh_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_registry),
        cmocka_unit_test(admissions_counters_and_histogram),
        cmocka_unit_test(quota_gauges_sorted_and_escaped),
        cmocka_unit_test(gauge_table_is_bounded),
        cmocka_unit_test(special_values),
        cmocka_unit_test(external_counters),
        cmocka_unit_test(external_gauges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
