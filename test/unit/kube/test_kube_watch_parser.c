/* kube/kube_watch_parser.c: a watch stream parsed whole and byte by byte,
 * a last event without its newline, and the streams refused. */
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

/* ---- watch parser ---- */

typedef struct ev_log {
    char text[4096];
    size_t len;
    int fail_at; /* callback fails on this event number (1-based), 0 never */
    int n;
} ev_log;

static gq_code log_event(void *ud, kube_event_type t, json_object *obj, gq_err *err)
{
    ev_log *l = ud;
    l->n++;
    if (l->fail_at && l->n == l->fail_at)
        return gq_err_set(err, GQ_EDENIED, "callback refused event %d", l->n);
    json_object *m, *name = NULL, *rv = NULL;
    if (json_object_object_get_ex(obj, "metadata", &m)) {
        json_object_object_get_ex(m, "name", &name);
        json_object_object_get_ex(m, "resourceVersion", &rv);
    }
    int w =
        snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s %s %s;", kube_event_type_name(t),
                 name ? json_object_get_string(name) : "-", rv ? json_object_get_string(rv) : "-");
    if (w > 0)
        l->len += (size_t)w;
    return GQ_OK;
}

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"10\"}}}\n"
    "\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\","
    "\"labels\":{\"x\":\"line\\nbreak\"}}}}\r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"13\"}}}"
    "\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
    "\"message\":\"too old resource version\"}}\n";
static const char stream_want[] = "ADDED a 10;MODIFIED a 11;BOOKMARK - 12;DELETED a 13;ERROR - -;";

static void watch_parser_whole_and_bytewise(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        ev_log l;
        memset(&l, 0, sizeof(l));
        kube_watch_parser *p;
        gq_err e;
        assert_int_equal(kube_watch_parser_new(0, log_event, &l, &p), GQ_OK);
        size_t n = strlen(stream);
        if (mode == 0) {
            assert_int_equal(kube_watch_parser_feed(p, stream, n, &e), GQ_OK);
        } else if (mode == 1) {
            for (size_t i = 0; i < n; i++)
                assert_int_equal(kube_watch_parser_feed(p, stream + i, 1, &e), GQ_OK);
        } else {
            unsigned seed = 7;
            for (int round = 0; round < 200; round++) {
                ev_log l2;
                memset(&l2, 0, sizeof(l2));
                kube_watch_parser *p2;
                assert_int_equal(kube_watch_parser_new(0, log_event, &l2, &p2), GQ_OK);
                for (size_t i = 0; i < n;) {
                    size_t k = 1 + (size_t)rand_r(&seed) % 97;
                    if (k > n - i)
                        k = n - i;
                    assert_int_equal(kube_watch_parser_feed(p2, stream + i, k, &e), GQ_OK);
                    i += k;
                }
                assert_int_equal(kube_watch_parser_finish(p2, &e), GQ_OK);
                assert_string_equal(l2.text, stream_want);
                kube_watch_parser_free(p2);
            }
            assert_int_equal(kube_watch_parser_feed(p, stream, n, &e), GQ_OK);
        }
        assert_int_equal(kube_watch_parser_finish(p, &e), GQ_OK);
        assert_string_equal(l.text, stream_want);
        kube_watch_parser_free(p);
    }
}

static void watch_parser_trailing_event_without_newline(void **state)
{
    (void)state;
    ev_log l;
    memset(&l, 0, sizeof(l));
    kube_watch_parser *p;
    gq_err e;
    const char s[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"z\"}}}";
    assert_int_equal(kube_watch_parser_new(0, log_event, &l, &p), GQ_OK);
    assert_int_equal(kube_watch_parser_feed(p, s, strlen(s), &e), GQ_OK);
    assert_string_equal(l.text, "");
    assert_int_equal(kube_watch_parser_finish(p, &e), GQ_OK);
    assert_string_equal(l.text, "ADDED z -;");
    kube_watch_parser_free(p);
}

static const struct {
    const char *input;
    size_t max_line;
    int fail_at;
    gq_code code;
    const char *msg;
    const char *events; /* delivered before the failure */
} watch_bad[] = {
    {"{\"type\":\"ADDED\",\"object\":{}}\nnot json\n", 0, 0, GQ_EINVAL,
     "watch event: JSON syntax error at byte 1: null expected", "ADDED - -;"},
    {"{\"type\":\"ADDED\",\"object\":{}} trailing\n", 0, 0, GQ_EINVAL,
     "watch event: JSON syntax error at byte 29: unexpected character", ""},
    {"{\"type\":\"ADDED\",\"object\":{\n", 0, 0, GQ_EINVAL,
     "watch event: JSON text ends early (after 26 bytes)", ""},
    {"{\"type\":\"ADDED\",\"object\":{\"n\":NaN}}\n", 0, 0, GQ_EINVAL,
     "watch event: JSON numbers must be finite (no NaN or Infinity)", ""},
    {"{\"type\":\"ADDED\",\"object\":{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
     "[[[[["
     "[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}\n",
     0, 0, GQ_ELIMIT, "watch event: JSON nests deeper than 64 levels", ""},
    {"[1,2]\n", 0, 0, GQ_EINVAL, "watch event: not an object", ""},
    {"{\"type\":\"RENAMED\",\"object\":{}}\n", 0, 0, GQ_EINVAL,
     "watch event: missing or unknown \"type\"", ""},
    {"{\"type\":7,\"object\":{}}\n", 0, 0, GQ_EINVAL, "watch event: missing or unknown \"type\"",
     ""},
    {"{\"type\":\"DELETED\"}\n", 0, 0, GQ_EINVAL, "watch event DELETED: missing \"object\"", ""},
    {"{\"type\":\"DELETED\",\"object\":\"x\"}\n", 0, 0, GQ_EINVAL,
     "watch event DELETED: missing \"object\"", ""},
    {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"long\"}}}\n", 32, 0, GQ_ELIMIT,
     "watch event longer than 32 bytes", ""},
    {"{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{}}\n", 0, 2, GQ_EDENIED,
     "callback refused event 2", "ADDED - -;"},
};

static void watch_parser_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(watch_bad) / sizeof(watch_bad[0]); i++) {
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            ev_log l;
            memset(&l, 0, sizeof(l));
            l.fail_at = watch_bad[i].fail_at;
            kube_watch_parser *p;
            gq_err e;
            gq_err_clear(&e);
            assert_int_equal(kube_watch_parser_new(watch_bad[i].max_line, log_event, &l, &p),
                             GQ_OK);
            const char *s = watch_bad[i].input;
            size_t n = strlen(s);
            gq_code rc = GQ_OK;
            if (bytewise) {
                for (size_t k = 0; k < n && !rc; k++)
                    rc = kube_watch_parser_feed(p, s + k, 1, &e);
            } else {
                rc = kube_watch_parser_feed(p, s, n, &e);
            }
            if (rc != watch_bad[i].code || strcmp(e.msg, watch_bad[i].msg) != 0)
                fail_msg("case %zu bytewise %d: got %d \"%s\"", i, bytewise, rc, e.msg);
            assert_string_equal(l.text, watch_bad[i].events);
            /* Sticky: the parser refuses more input with the same code. */
            assert_int_equal(kube_watch_parser_feed(p, "\n", 1, &e), watch_bad[i].code);
            assert_int_equal(kube_watch_parser_finish(p, &e), watch_bad[i].code);
            kube_watch_parser_free(p);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(watch_parser_whole_and_bytewise),
        cmocka_unit_test(watch_parser_trailing_event_without_newline),
        cmocka_unit_test(watch_parser_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
