/* kube/kube_util.c: Status decoding, the HTTP codes mapped to errors, URL
 * building, the backoff sequence and MicroTime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"

/* ---- Status, HTTP codes, URLs ---- */

static void status_decoding(void **state)
{
    (void)state;
    kube_status st;
    const char conflict[] =
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
        "\"message\":\"Operation cannot be fulfilled on gpuquotas.gpuquota.io \\\"q\\\": the "
        "object has been modified\",\"reason\":\"Conflict\",\"details\":{\"name\":\"q\"},"
        "\"code\":409}";
    assert_int_equal(kube_status_decode(conflict, strlen(conflict), &st), GQ_OK);
    assert_int_equal(st.code, 409);
    assert_string_equal(st.reason, "Conflict");
    assert_string_equal(st.message, "Operation cannot be fulfilled on gpuquotas.gpuquota.io "
                                    "\"q\": the object has been modified");

    const char bare[] = "{\"kind\":\"Status\"}";
    assert_int_equal(kube_status_decode(bare, strlen(bare), &st), GQ_OK);
    assert_int_equal(st.code, 0);
    assert_string_equal(st.reason, "");
    assert_string_equal(st.message, "");

    const char *bad[] = {"", "{", "[]", "{\"kind\":\"Pod\"}", "{\"kind\":1}", "<html>"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(kube_status_decode(bad[i], strlen(bad[i]), &st), GQ_EINVAL);

    /* Long messages are truncated, never overflowed; odd types ignored. */
    char big[2048];
    int n = snprintf(big, sizeof(big), "{\"kind\":\"Status\",\"code\":\"x\",\"message\":\"");
    memset(big + n, 'm', 1000);
    snprintf(big + n + 1000, sizeof(big) - (size_t)n - 1000, "\"}");
    assert_int_equal(kube_status_decode(big, strlen(big), &st), GQ_OK);
    assert_int_equal(st.code, 0);
    assert_int_equal(strlen(st.message), sizeof(st.message) - 1);
}

static void http_code_mapping(void **state)
{
    (void)state;
    static const struct {
        long status;
        const char *reason;
        gq_code code;
    } t[] = {
        {200, NULL, GQ_OK},
        {201, NULL, GQ_OK},
        {401, NULL, GQ_EUNAUTHORIZED},
        {403, "Forbidden", GQ_EHTTP},
        {404, "NotFound", GQ_ENOTFOUND},
        {409, "Conflict", GQ_ECONFLICT},
        {409, "AlreadyExists", GQ_EEXISTS},
        {409, NULL, GQ_ECONFLICT},
        {410, "Expired", GQ_EGONE},
        {422, "Invalid", GQ_EHTTP},
        {429, NULL, GQ_EHTTP},
        {500, NULL, GQ_EHTTP},
        {504, NULL, GQ_EHTTP},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        assert_int_equal(kube_http_code(t[i].status, t[i].reason), t[i].code);
}

static void url_building(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        kube_query q[4];
        size_t nq;
        const char *want;
    } t[] = {
        {"/api/v1/pods", {{0}}, 0, "https://s:6443/api/v1/pods"},
        {"/api/v1/pods",
         {{"labelSelector", "app in (a,b),tier!=x"}, {"limit", "500"}},
         2,
         "https://s:6443/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dx&limit=500"},
        {"/api/v1/pods",
         {{"continue", "eyJ2IjoibWV0YS5rOHMuaW8vdjEi+/="},
          {"fieldSelector", NULL},
          {"resourceVersion", ""},
          {"x", "~._-"}},
         4,
         "https://s:6443/api/v1/pods?continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEi%2B%2F%3D&x=~._-"},
        {"/api/v1/pods?watch=true",
         {{"a", "\xc3\xa9&"}},
         1,
         "https://s:6443/api/v1/pods?watch=true&a=%C3%A9%26"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char *url = NULL;
        assert_int_equal(kube_build_url("https://s:6443", t[i].path, t[i].q, t[i].nq, &url), GQ_OK);
        assert_string_equal(url, t[i].want);
        free(url);
    }
}

/* ---- backoff and time ---- */

static void backoff_sequence(void **state)
{
    (void)state;
    kube_backoff b;
    kube_backoff_init(&b, 0, 0);
    /* Without jitter: 0.8 s doubling up to the 30 s cap. */
    static const long plain[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        assert_int_equal(kube_backoff_next(&b, 0.0), plain[i]);
    kube_backoff_reset(&b);
    assert_int_equal(kube_backoff_next(&b, 0.0), 800);
    /* With maximal jitter: base + base/4 below the cap, spread under it at the cap. */
    kube_backoff_reset(&b);
    static const long jit[] = {999, 1999, 3999, 7999, 15999, 22500, 22500};
    for (size_t i = 0; i < sizeof(jit) / sizeof(jit[0]); i++) {
        long d = kube_backoff_next(&b, 0.9999999);
        assert_in_range(d, jit[i] - 1, jit[i] + 1);
    }
    /* Bounds hold for any jitter value, forever. */
    unsigned seed = 1;
    kube_backoff_reset(&b);
    for (int i = 0; i < 1000; i++) {
        long d = kube_backoff_next(&b, rand_r(&seed) / ((double)RAND_MAX + 1));
        assert_in_range(d, 800, 30000);
    }
    /* Out-of-range jitter is treated as none; a custom range is honoured. */
    kube_backoff_init(&b, 100, 250);
    assert_int_equal(kube_backoff_next(&b, 5.0), 100);
    assert_int_equal(kube_backoff_next(&b, -1.0), 200);
    assert_int_equal(kube_backoff_next(&b, 0.0), 250);
}

static void micro_time(void **state)
{
    (void)state;
    char buf[28];
    kube_format_micro_time(1795791732123456LL, buf);
    assert_string_equal(buf, "2026-11-27T15:02:12.123456Z");
    kube_format_micro_time(0, buf);
    assert_string_equal(buf, "1970-01-01T00:00:00.000000Z");
    int64_t us;
    assert_int_equal(kube_parse_time("2026-11-27T15:02:12.123456Z", &us), GQ_OK);
    assert_int_equal(us, 1795791732123456LL);
    assert_int_equal(kube_parse_time("2026-11-27T15:02:12Z", &us), GQ_OK);
    assert_int_equal(us, 1795791732000000LL);
    assert_int_equal(kube_parse_time("2026-11-27T17:02:12.5+02:00", &us), GQ_OK);
    assert_int_equal(us, 1795791732500000LL);
    const char *bad[] = {"",
                         "2026-11-27",
                         "2026-11-27T15:02:12",
                         "2026-13-27T15:02:12Z",
                         "2026-11-27T15:02:12.Z",
                         "2026-11-27T15:02:12Zjunk",
                         "2026-11-27 15:02:12Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(kube_parse_time(bad[i], &us), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_decoding), cmocka_unit_test(http_code_mapping),
        cmocka_unit_test(url_building),    cmocka_unit_test(backoff_sequence),
        cmocka_unit_test(micro_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
