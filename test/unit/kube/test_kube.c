/* Unit tests of kube/ without a network: kubeconfig parsing, the watch
 * parser, Status decoding, URLs, backoff, times, and the cache and leader
 * election driven through a fake kube_api. */
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

#define KC GQ_TEST_DATA "/kubeconfig/"

/* ---- kubeconfig ---- */

static void kubeconfig_good_token(void **state)
{
    (void)state;
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "good-token.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://10.0.0.1:6443");
    assert_string_equal(c->namespace_, "gpu-system");
    assert_string_equal(c->token, "abc.def-ghi");
    assert_null(c->token_file);
    assert_null(c->ca_file);
    const char pem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    assert_int_equal(c->ca_data.len, strlen(pem));
    assert_memory_equal(c->ca_data.data, pem, strlen(pem));
    assert_int_equal(c->insecure_skip_tls_verify, 0);
    assert_string_equal(c->source, KC "good-token.yaml");
    kube_config_free(c);

    /* An explicit context overrides current-context; tokenFile is relative
     * to the kubeconfig's directory; namespace defaults to "default". */
    assert_int_equal(kube_config_load_file(KC "good-token.yaml", "dev", &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://other.example:443");
    assert_string_equal(c->namespace_, "default");
    assert_null(c->token);
    assert_string_equal(c->token_file, KC "tokens/dev-token");
    kube_config_free(c);

    c = NULL;
    assert_int_equal(kube_config_load_file(KC "good-token.yaml", "nope", &c, &e), GQ_EINVAL);
    assert_string_equal(e.msg, KC "good-token.yaml:13: context \"nope\" not found");
    assert_null(c);
}

static void kubeconfig_good_files(void **state)
{
    (void)state;
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "good-files.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "http://127.0.0.1:8080");
    assert_string_equal(c->ca_file, KC "certs/ca.crt");
    assert_string_equal(c->cert_file, KC "certs/client.crt");
    assert_string_equal(c->key_file, "/abs/client.key");
    assert_null(c->cert_data.data);
    assert_null(c->token);
    kube_config_free(c);

    assert_int_equal(kube_config_load_file(KC "good-insecure.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://lab:6443");
    assert_int_equal(c->insecure_skip_tls_verify, 1);
    assert_null(c->token);
    assert_null(c->cert_file);
    kube_config_free(c);
}

static void kubeconfig_parse_from_memory(void **state)
{
    (void)state;
    const char y[] = "current-context: x\n"
                     "clusters: [{name: c, cluster: {server: 'https://s'}}]\n"
                     "contexts: [{name: x, context: {cluster: c, user: u, namespace: n1}}]\n"
                     "users: [{name: u, user: {client-certificate-data: QUJD, "
                     "client-key-data: REVG, token: t}}]\n";
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_parse(y, strlen(y), "mem", "/base", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://s");
    assert_string_equal(c->namespace_, "n1");
    assert_int_equal(c->cert_data.len, 3);
    assert_memory_equal(c->cert_data.data, "ABC", 3);
    assert_int_equal(c->key_data.len, 3);
    assert_memory_equal(c->key_data.data, "DEF", 3);
    assert_string_equal(c->token, "t");
    kube_config_free(c);
}

static const struct {
    const char *file;
    gq_code code;
    const char *msg; /* after "<path>:" */
} bad_kubeconfigs[] = {
    {"bad-base64.yaml", GQ_EINVAL, "6: \"certificate-authority-data\" is not valid base64"},
    {"bad-both-ca.yaml", GQ_EINVAL,
     "7: both \"certificate-authority\" and \"certificate-authority-data\" are set"},
    {"bad-cert-without-key.yaml", GQ_EINVAL,
     "14: user \"u\": client certificate and key must be given together"},
    {"bad-cluster-not-found.yaml", GQ_EINVAL, "9: cluster \"missing\" not found"},
    {"bad-clusters-type.yaml", GQ_EINVAL, "6: \"clusters\" must be a sequence"},
    {"bad-context-not-found.yaml", GQ_EINVAL, "9: context \"b\" not found"},
    {"bad-empty.yaml", GQ_EINVAL, "1: empty kubeconfig"},
    {"bad-exec.yaml", GQ_EUNSUPPORTED,
     "14: user \"eks\": \"exec\" credential plugins are not supported; use a token, tokenFile or "
     "client certificate"},
    {"bad-insecure-type.yaml", GQ_EINVAL,
     "6: \"insecure-skip-tls-verify\" must be a boolean (true or false)"},
    {"bad-no-current-context.yaml", GQ_EINVAL, "1: current-context is not set"},
    {"bad-no-server.yaml", GQ_EINVAL, "5: cluster \"a\" has no server"},
    {"bad-root-type.yaml", GQ_EINVAL, "1: kubeconfig must be a mapping"},
    {"bad-server-scheme.yaml", GQ_EINVAL,
     "5: server \"10.0.0.1:6443\" must start with https:// or http://"},
    {"bad-syntax.yaml", GQ_EINVAL,
     "5: did not find expected ',' or '}' (while parsing a flow mapping started at line 4)"},
    {"bad-token-type.yaml", GQ_EINVAL, "14: \"token\" must be a string"},
    {"bad-user-not-found.yaml", GQ_EINVAL, "10: user \"nobody\" not found"},
};

static void kubeconfig_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_kubeconfigs) / sizeof(bad_kubeconfigs[0]); i++) {
        char path[512], want[1024];
        snprintf(path, sizeof(path), KC "%s", bad_kubeconfigs[i].file);
        snprintf(want, sizeof(want), "%s:%s", path, bad_kubeconfigs[i].msg);
        kube_config *c = NULL;
        gq_err e;
        gq_err_clear(&e);
        gq_code rc = kube_config_load_file(path, NULL, &c, &e);
        if (rc != bad_kubeconfigs[i].code || strcmp(e.msg, want) != 0)
            fail_msg("%s: got %d \"%s\", want %d \"%s\"", bad_kubeconfigs[i].file, rc, e.msg,
                     bad_kubeconfigs[i].code, want);
        assert_null(c);
    }
}

static void kubeconfig_missing_file_and_default_order(void **state)
{
    (void)state;
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "absent.yaml", NULL, &c, &e), GQ_EIO);
    assert_string_equal(e.msg, KC "absent.yaml: No such file or directory");

    /* $KUBECONFIG: only the first file of a list is used. */
    setenv("KUBECONFIG", KC "good-insecure.yaml:" KC "good-token.yaml", 1);
    assert_int_equal(kube_config_load_default(NULL, NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://lab:6443");
    kube_config_free(c);
    /* The flag wins over the environment. */
    assert_int_equal(kube_config_load_default(KC "good-files.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "http://127.0.0.1:8080");
    kube_config_free(c);
    unsetenv("KUBECONFIG");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void incluster_config(void **state)
{
    (void)state;
    char dir[] = "/tmp/kube-sa-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char tok[256], ca[256], ns[256], want[512];
    snprintf(tok, sizeof(tok), "%s/token", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(ns, sizeof(ns), "%s/namespace", dir);
    kube_incluster_paths p = {tok, ca, ns};
    kube_config *c = NULL;
    gq_err e;

    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_ENOTFOUND);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_ENOTFOUND);
    snprintf(want, sizeof(want), "in-cluster token file %s is not readable", tok);
    assert_string_equal(e.msg, want);

    write_file(tok, "tok\n");
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://[fd00::1]:443");
    assert_string_equal(c->namespace_, "default");
    assert_string_equal(c->token_file, tok);
    assert_null(c->ca_file);
    assert_string_equal(c->source, "in-cluster");
    kube_config_free(c);

    write_file(ca, "pem");
    write_file(ns, "gpu-system\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://10.96.0.1:443");
    assert_string_equal(c->namespace_, "gpu-system");
    assert_string_equal(c->ca_file, ca);
    kube_config_free(c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unlink(tok);
    unlink(ca);
    unlink(ns);
    rmdir(dir);
}

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

/* ---- cache over a fake API ---- */

typedef struct fake_api {
    pthread_mutex_t mu;
    json_object *lists[4]; /* answer of list call n (the last one repeats) */
    const char *list_rvs[4];
    int nlists;
    const char **scripts; /* per watch call: events separated by '\n'; NULL ends */
    int watch_calls, list_calls, idle;
    gq_code script_end[8]; /* what each scripted watch returns */
    char last_watch_rv[32];
    const char *probe_rvs[8]; /* resourceVersion of each "?limit=1" GET (the last repeats) */
    int probes;
} fake_api;

/* GET PATH?limit=1: a one-item list carrying the server's resourceVersion. */
static gq_code fake_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    fake_api *f = ctx;
    char buf[128];
    assert_non_null(strstr(path, "?limit=1"));
    pthread_mutex_lock(&f->mu);
    int k = f->probes++;
    while (k > 0 && !f->probe_rvs[k])
        k--;
    snprintf(buf, sizeof(buf),
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"%s\"},"
             "\"items\":[]}",
             f->probe_rvs[k] ? f->probe_rvs[k] : "1");
    pthread_mutex_unlock(&f->mu);
    *out = json_tokener_parse(buf);
    return *out ? GQ_OK : gq_err_oom(err);
}

static gq_code fake_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                         void *ud, char **rv_out, gq_err *err)
{
    fake_api *f = ctx;
    pthread_mutex_lock(&f->mu);
    int k = f->list_calls < f->nlists ? f->list_calls : f->nlists - 1;
    json_object *items = json_object_get(f->lists[k]);
    char *rv = strdup(f->list_rvs[k]);
    f->list_calls++;
    pthread_mutex_unlock(&f->mu);
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < json_object_array_length(items) && !rc; i++)
        rc = fn(ud, json_object_array_get_idx(items, i), err);
    json_object_put(items);
    if (!rc)
        *rv_out = rv;
    else
        free(rv);
    return rc;
}

static gq_code fake_watch(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                          void *ud, gq_err *err)
{
    fake_api *f = ctx;
    pthread_mutex_lock(&f->mu);
    int n = f->watch_calls++;
    const char *script = f->scripts[n];
    gq_code end = n < 8 ? f->script_end[n] : GQ_OK;
    snprintf(f->last_watch_rv, sizeof(f->last_watch_rv), "%s", o->resource_version);
    if (!script) { /* stay on the terminator */
        f->watch_calls--;
        f->idle++;
    }
    pthread_mutex_unlock(&f->mu);
    assert_int_equal(o->allow_bookmarks, 1);
    assert_true(o->timeout_seconds >= 300 && o->timeout_seconds < 600);
    if (!script) { /* nothing more: idle until stopped, like a quiet watch */
        while (!atomic_load(o->stop))
            usleep(1000);
        return GQ_OK;
    }
    kube_watch_parser *p;
    gq_code rc = kube_watch_parser_new(0, fn, ud, &p);
    if (!rc)
        rc = kube_watch_parser_feed(p, script, strlen(script), err);
    if (!rc)
        rc = kube_watch_parser_finish(p, err);
    kube_watch_parser_free(p);
    if (!rc && end)
        rc = gq_err_set(err, end, "scripted failure");
    return rc;
}

typedef struct cb_log {
    pthread_mutex_t mu;
    char text[4096];
    size_t len;
} cb_log;

static void cb_append(cb_log *l, const char *what, const char *ns, const char *name,
                      const char *detail)
{
    pthread_mutex_lock(&l->mu);
    int w = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s %s/%s%s%s;", what, ns, name,
                     detail ? " " : "", detail ? detail : "");
    if (w > 0)
        l->len += (size_t)w;
    pthread_mutex_unlock(&l->mu);
}

/* Records are "name@rv" strings made by the transform. */
static gq_code tr(void *ud, json_object *obj, void **rec, gq_err *err)
{
    json_object *m, *n, *rv;
    json_object_object_get_ex(obj, "metadata", &m);
    json_object_object_get_ex(m, "name", &n);
    json_object_object_get_ex(m, "resourceVersion", &rv);
    if (!strcmp(json_object_get_string(n), "skipme")) {
        *rec = NULL;
        return GQ_OK;
    }
    char buf[128];
    snprintf(buf, sizeof(buf), "%s@%s", json_object_get_string(n), json_object_get_string(rv));
    *rec = strdup(buf);
    return *rec ? GQ_OK : GQ_ENOMEM;
}

static void tr_free(void *ud, void *rec)
{
    free(rec);
}

static void on_add(void *ud, const char *ns, const char *name, const void *rec)
{
    cb_append(ud, "add", ns, name, rec);
}

static void on_update(void *ud, const char *ns, const char *name, const void *o, const void *n)
{
    char d[256];
    snprintf(d, sizeof(d), "%s->%s", (const char *)o, (const char *)n);
    cb_append(ud, "update", ns, name, d);
}

static void on_delete(void *ud, const char *ns, const char *name, const void *rec)
{
    cb_append(ud, "delete", ns, name, rec);
}

static json_object *pod(const char *ns, const char *name, const char *rv)
{
    char buf[256];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"resourceVersion\":\"%s\"}}", ns,
             name, rv);
    return json_tokener_parse(buf);
}

static int wait_for_text(cb_log *l, const char *want)
{
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&l->mu);
        int eq = !strcmp(l->text, want);
        pthread_mutex_unlock(&l->mu);
        if (eq)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void get_copy(void *ud, const void *rec)
{
    snprintf(ud, 64, "%s", (const char *)rec);
}

static int count_ns(void *ud, const char *ns, const char *name, const void *rec)
{
    if (!strcmp(ns, "t"))
        (*(int *)ud)++;
    return 0;
}

static void cache_list_watch_relist(void **state)
{
    (void)state;
    const char *scripts[8] = {
        /* first watch: modify a, delete b, add c, bookmark, then 410 in-stream */
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"a\","
        "\"resourceVersion\":\"11\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"b\","
        "\"resourceVersion\":\"12\"}}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"c\","
        "\"resourceVersion\":\"13\"}}}\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"14\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
        "\"message\":\"too old\"}}\n",
        /* after the relist: a transport failure (reconnect with backoff) */
        "",
        /* then a clean watch with one addition of an object the transform skips */
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"skipme\","
        "\"resourceVersion\":\"31\"}}}\n",
        NULL,
    };
    fake_api f = {.scripts = scripts};
    f.script_end[1] = GQ_EIO;
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    json_object_array_add(f.lists[0], pod("t", "a", "1"));
    json_object_array_add(f.lists[0], pod("t", "b", "2"));
    json_object_array_add(f.lists[0], pod("u", "a", "3"));
    f.list_rvs[0] = "10";
    /* The relist after the 410 sees: a unchanged at 11, c changed, d new,
     * b still gone, u/a vanished. */
    f.lists[1] = json_object_new_array();
    json_object_array_add(f.lists[1], pod("t", "a", "11"));
    json_object_array_add(f.lists[1], pod("t", "c", "20"));
    json_object_array_add(f.lists[1], pod("t", "d", "21"));
    f.list_rvs[1] = "30";
    f.nlists = 2;
    kube_api api = {.ctx = &f, .list = fake_list, .watch = fake_watch};
    cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kube_cache_opts o = {.path = "/api/v1/pods",
                         .backoff_min_ms = 20,
                         .backoff_max_ms = 40,
                         .transform = tr,
                         .free_record = tr_free,
                         .on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .ud = &l};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_synced(c), 0);

    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);
    const char *want = "add t/a a@1;add t/b b@2;add u/a a@3;"
                       "update t/a a@1->a@11;delete t/b b@2;add t/c c@13;"
                       "update t/c c@13->c@20;add t/d d@21;delete u/a a@3;";
    if (!wait_for_text(&l, want))
        fail_msg("callbacks: %s", l.text);
    for (int i = 0; i < 5000 && kube_cache_count(c) != 3; i++)
        usleep(1000);
    /* Wait until the fake is idling on its last (terminator) watch. */
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&f.mu);
        int idle = f.idle >= 1;
        pthread_mutex_unlock(&f.mu);
        if (idle)
            break;
        usleep(1000);
    }
    assert_int_equal(kube_cache_count(c), 3);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 1);
    assert_int_equal(st.lists, 2);
    assert_int_equal(st.watches, 4);
    assert_int_equal(f.list_calls, 2);
    char rv[32];
    kube_cache_resource_version(c, rv, sizeof(rv));
    assert_string_equal(rv, "31");
    assert_string_equal(f.last_watch_rv, "31");
    char got[64] = "";
    assert_int_equal(kube_cache_get(c, "t", "c", get_copy, got), GQ_OK);
    assert_string_equal(got, "c@20");
    assert_int_equal(kube_cache_get(c, "t", "b", get_copy, got), GQ_ENOTFOUND);
    assert_int_equal(kube_cache_get(c, "t", "skipme", get_copy, got), GQ_ENOTFOUND);
    int n = 0;
    kube_cache_foreach(c, count_ns, &n);
    assert_int_equal(n, 3);
    kube_cache_stop(c);
    kube_cache_stop(c); /* idempotent */
    kube_cache_free(c);
    json_object_put(f.lists[0]);
    json_object_put(f.lists[1]);
    pthread_mutex_destroy(&f.mu);
}

/* Wait until the fake idles on its terminator watch. */
static void wait_idle(fake_api *f)
{
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&f->mu);
        int idle = f->idle >= 1;
        pthread_mutex_unlock(&f->mu);
        if (idle)
            return;
        usleep(1000);
    }
    fail_msg("the cache never settled on its last watch");
}

/* A started cache over f whose transform and callbacks record into l
 * (api, filled here, must outlive the cache). */
static kube_cache *recording_cache(fake_api *f, kube_api *api, cb_log *l, long backoff_min_ms)
{
    *api = (kube_api){.ctx = f, .list = fake_list, .watch = fake_watch, .get = fake_get};
    kube_cache_opts o = {.path = "/api/v1/pods",
                         .backoff_min_ms = backoff_min_ms,
                         .backoff_max_ms = 2 * backoff_min_ms,
                         .transform = tr,
                         .free_record = tr_free,
                         .on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .ud = l};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    return c;
}

/* The server's history went back (etcd restored, control plane rebuilt):
 * a watch from our resourceVersion gets 504 "Too large resource version",
 * or events older than what we saw, or a list answers an older version.
 * Each time the cache relists and applies every object again, even one
 * whose resourceVersion string is unchanged (the new history reuses the
 * numbers), instead of keeping its old contents forever. */
static void cache_relists_when_history_goes_back(void **state)
{
    (void)state;
    const char *scripts[8] = {
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
        "\"status\":\"Failure\",\"message\":\"Timeout: Too large resource version: 50, current: "
        "20\",\"reason\":\"Timeout\",\"code\":504,\"details\":{\"causes\":[{\"reason\":"
        "\"ResourceVersionTooLarge\",\"message\":\"Too large resource version\"}],"
        "\"retryAfterSeconds\":1}}}\n",
        /* from 20: an addition, then an event older than it */
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"d\","
        "\"resourceVersion\":\"21\"}}}\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"namespace\":\"t\",\"name\":\"c\","
        "\"resourceVersion\":\"15\"}}}\n",
        /* from 40: 410, and the relist answers an older version */
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
        "\"message\":\"too old\"}}\n",
        NULL,
    };
    fake_api f = {.scripts = scripts};
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    json_object_array_add(f.lists[0], pod("t", "a", "5"));
    json_object_array_add(f.lists[0], pod("t", "b", "6"));
    f.list_rvs[0] = "50";
    f.lists[1] = json_object_new_array();
    json_object_array_add(f.lists[1], pod("t", "a", "5"));
    json_object_array_add(f.lists[1], pod("t", "c", "7"));
    f.list_rvs[1] = "20";
    f.lists[2] = json_object_new_array();
    json_object_array_add(f.lists[2], pod("t", "a", "5"));
    json_object_array_add(f.lists[2], pod("t", "c", "15"));
    f.list_rvs[2] = "40";
    f.lists[3] = json_object_new_array();
    json_object_array_add(f.lists[3], pod("t", "a", "5"));
    f.list_rvs[3] = "35";
    f.nlists = 4;
    f.probe_rvs[0] = "1000";
    kube_api api;
    cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kube_cache *c = recording_cache(&f, &api, &l, 20);
    const char *want = "add t/a a@5;add t/b b@6;"
                       /* 504: a is applied again although its version reads the same */
                       "update t/a a@5->a@5;add t/c c@7;delete t/b b@6;"
                       /* d@21, then c@15 older than 21: relist, everything again */
                       "add t/d d@21;"
                       "update t/a a@5->a@5;update t/c c@7->c@15;delete t/d d@21;"
                       /* 410, then a list at 35, older than 40: a second list
                        * applies everything again (the first kept a as it was) */
                       "update t/a a@5->a@5;delete t/c c@15;";
    if (!wait_for_text(&l, want))
        fail_msg("callbacks: %s", l.text);
    wait_idle(&f);
    assert_int_equal(kube_cache_synced(c), 1);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 3);
    assert_int_equal(st.resets, 3);
    assert_int_equal(f.list_calls, 5);
    assert_string_equal(f.last_watch_rv, "35");
    kube_cache_stop(c);
    kube_cache_free(c);
    for (int i = 0; i < 4; i++)
        json_object_put(f.lists[i]);
    pthread_mutex_destroy(&f.mu);
}

/* A watch that keeps failing is not resumed forever: after three failures
 * in a row the cache relists. Before resuming after a failure it asks the
 * server's current resourceVersion, and relists when the server is behind
 * it (a restarted control plane may otherwise accept the watch and send
 * nothing until it catches up). */
static void cache_relists_after_repeated_failures_and_when_behind(void **state)
{
    (void)state;
    const char *scripts[8] = {"", "", "", "", NULL};
    fake_api f = {.scripts = scripts};
    for (int i = 0; i < 4; i++)
        f.script_end[i] = GQ_EIO;
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    json_object_array_add(f.lists[0], pod("t", "a", "5"));
    f.list_rvs[0] = "50";
    f.lists[1] = json_object_new_array();
    json_object_array_add(f.lists[1], pod("t", "a", "5"));
    f.list_rvs[1] = "50";
    f.lists[2] = json_object_new_array();
    json_object_array_add(f.lists[2], pod("t", "a", "9"));
    f.list_rvs[2] = "12";
    f.nlists = 3;
    /* two failures: the server is ahead, resume; the third relists; the
     * fourth finds the server at 10, behind 50 */
    f.probe_rvs[0] = "60";
    f.probe_rvs[1] = "60";
    f.probe_rvs[2] = "10";
    kube_api api;
    cb_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kube_cache *c = recording_cache(&f, &api, &l, 10);
    if (!wait_for_text(&l, "add t/a a@5;update t/a a@5->a@9;"))
        fail_msg("callbacks: %s", l.text);
    wait_idle(&f);
    kube_cache_stats st;
    kube_cache_get_stats(c, &st);
    assert_int_equal(st.relists, 2);
    assert_int_equal(st.resets, 1);
    assert_int_equal(f.list_calls, 3);
    assert_int_equal(f.probes, 3);
    assert_string_equal(f.last_watch_rv, "12");
    kube_cache_stop(c);
    kube_cache_free(c);
    for (int i = 0; i < 3; i++)
        json_object_put(f.lists[i]);
    pthread_mutex_destroy(&f.mu);
}

/* A watch that the test drives one step at a time: "open" (the server
 * accepted it), an event line, or "end" (the watch returns end_rc). */
typedef struct step_api {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int watches, lists, waiting, acks;
    const char *cmd;
    gq_code end_rc;
} step_api;

static gq_code step_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                         void *ud, char **rv_out, gq_err *err)
{
    step_api *s = ctx;
    pthread_mutex_lock(&s->mu);
    int n = ++s->lists;
    pthread_mutex_unlock(&s->mu);
    *rv_out = strdup(n == 1 ? "10" : "50");
    return *rv_out ? GQ_OK : gq_err_oom(err);
}

static gq_code step_watch(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                          void *ud, gq_err *err)
{
    step_api *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->watches++;
    for (;;) {
        s->waiting = 1;
        pthread_cond_broadcast(&s->cv);
        while (!s->cmd && !atomic_load(o->stop)) {
            pthread_mutex_unlock(&s->mu);
            usleep(1000);
            pthread_mutex_lock(&s->mu);
        }
        const char *cmd = s->cmd;
        s->cmd = NULL;
        s->waiting = 0;
        if (!cmd) { /* stopped */
            pthread_mutex_unlock(&s->mu);
            return GQ_OK;
        }
        gq_code rc = GQ_OK;
        int end = !strcmp(cmd, "end");
        pthread_mutex_unlock(&s->mu);
        if (end) {
            rc = s->end_rc ? gq_err_set(err, s->end_rc, "scripted failure") : GQ_OK;
        } else if (!strcmp(cmd, "open")) {
            o->on_open(ud);
        } else {
            kube_watch_parser *p;
            assert_int_equal(kube_watch_parser_new(0, fn, ud, &p), GQ_OK);
            rc = kube_watch_parser_feed(p, cmd, strlen(cmd), err);
            kube_watch_parser_free(p);
            end = rc != GQ_OK;
        }
        pthread_mutex_lock(&s->mu);
        s->acks++;
        pthread_cond_broadcast(&s->cv);
        if (end) {
            pthread_mutex_unlock(&s->mu);
            return rc;
        }
    }
}

/* Wait until watch number n waits for a command. */
static void step_wait(step_api *s, int n)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < 5000 && !(s->watches == n && s->waiting); i++) {
        pthread_mutex_unlock(&s->mu);
        usleep(1000);
        pthread_mutex_lock(&s->mu);
    }
    int ok = s->watches == n && s->waiting;
    pthread_mutex_unlock(&s->mu);
    if (!ok)
        fail_msg("watch %d never started (at %d)", n, s->watches);
}

/* Give the current watch a command and wait until it has been carried out. */
static void step(step_api *s, const char *cmd)
{
    pthread_mutex_lock(&s->mu);
    int acks = s->acks;
    s->cmd = cmd;
    while (s->acks == acks)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* kube_cache_fresh is true only while a watch is established: not before
 * the server accepts one, not from the moment it ends (through backoff and
 * relist) until the next one is accepted, not once stopped. An event proves
 * the watch at once; a watch that brings none counts after a short settle
 * time, since an error answer (410, 504) comes as an event right after the
 * server accepted it. */
static void cache_fresh_only_while_the_watch_is_established(void **state)
{
    (void)state;
    static const char bookmark[] =
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n";
    static const char bookmark2[] =
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"60\"}}}\n";
    static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                               "\"reason\":\"Expired\",\"message\":\"too old\"}}\n";
    step_api s = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    kube_api api = {.ctx = &s, .list = step_list, .watch = step_watch};
    kube_cache_opts o = {.path = "/api/v1/pods", .backoff_min_ms = 10, .backoff_max_ms = 20};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_fresh(c), 0);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);

    /* Listed, watch requested but not yet accepted: synced, not fresh. */
    step_wait(&s, 1);
    assert_int_equal(kube_cache_fresh(c), 0);
    step(&s, "open");
    step(&s, bookmark);
    assert_int_equal(kube_cache_fresh(c), 1);

    /* The watch fails: not fresh while the cache backs off and reconnects. */
    s.end_rc = GQ_EIO;
    step(&s, "end");
    step_wait(&s, 2);
    assert_int_equal(kube_cache_fresh(c), 0);
    assert_int_equal(kube_cache_synced(c), 1);

    /* Accepted and quiet: fresh once it has stayed open a moment. */
    step(&s, "open");
    int fresh = 0;
    for (int i = 0; i < 5000 && !(fresh = kube_cache_fresh(c)); i++)
        usleep(1000);
    assert_int_equal(fresh, 1);

    /* 410 right after the 200: not fresh through the relist. */
    step(&s, gone);
    step_wait(&s, 3);
    assert_int_equal(kube_cache_fresh(c), 0);
    assert_int_equal(s.lists, 2);
    step(&s, "open");
    step(&s, bookmark2);
    assert_int_equal(kube_cache_fresh(c), 1);

    kube_cache_stop(c);
    assert_int_equal(kube_cache_fresh(c), 0);
    kube_cache_free(c);
}

static void cache_without_transform_keeps_json(void **state)
{
    (void)state;
    const char *scripts[1] = {NULL};
    fake_api f = {.scripts = scripts};
    pthread_mutex_init(&f.mu, NULL);
    f.lists[0] = json_object_new_array();
    for (int i = 0; i < 3000; i++) { /* grows the table past its first size */
        char name[32];
        snprintf(name, sizeof(name), "p%d", i);
        json_object_array_add(f.lists[0], pod("ns", name, "5"));
    }
    f.list_rvs[0] = "77";
    f.nlists = 1;
    kube_api api = {.ctx = &f, .list = fake_list, .watch = fake_watch};
    kube_cache_opts o = {.path = "/api/v1/pods"};
    kube_cache *c;
    gq_err e;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_wait_synced(c, 10), GQ_ETIMEOUT); /* not started */
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_EINVAL);
    assert_int_equal(kube_cache_wait_synced(c, 5000), GQ_OK);
    assert_int_equal(kube_cache_synced(c), 1);
    assert_int_equal(kube_cache_count(c), 3000);
    char rv[32];
    kube_cache_resource_version(c, rv, sizeof(rv));
    assert_string_equal(rv, "77");
    kube_cache_free(c); /* stops the thread */
    json_object_put(f.lists[0]);
    pthread_mutex_destroy(&f.mu);

    assert_int_equal(kube_cache_new(&api, &(kube_cache_opts){.path = "pods"}, &c, &e), GQ_EINVAL);
    kube_cache_free(NULL);
}

/* ---- leader election over a fake Lease store ---- */

typedef struct lease_store {
    pthread_mutex_t mu;
    json_object *lease;
    long rv;
    int creates, updates;
} lease_store;

typedef struct lease_client {
    lease_store *s;
    atomic_int down; /* every call fails as if the API server were unreachable */
    atomic_int started, stopped;
} lease_client;

static const char *rv_of(json_object *o)
{
    json_object *m, *v;
    if (!json_object_object_get_ex(o, "metadata", &m) ||
        !json_object_object_get_ex(m, "resourceVersion", &v))
        return "";
    return json_object_get_string(v);
}

static gq_code store_put(lease_store *s, json_object *body)
{
    json_object *copy = NULL, *m;
    if (json_object_deep_copy(body, &copy, NULL) != 0)
        return GQ_ENOMEM;
    char rv[32];
    snprintf(rv, sizeof(rv), "%ld", ++s->rv);
    json_object_object_get_ex(copy, "metadata", &m);
    json_object_object_add(m, "resourceVersion", json_object_new_string(rv));
    json_object_put(s->lease);
    s->lease = copy;
    return GQ_OK;
}

static gq_code lease_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    lease_client *lc = ctx;
    if (atomic_load(&lc->down))
        return gq_err_set(err, GQ_EIO, "down");
    assert_string_equal(path, "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/ctl");
    pthread_mutex_lock(&lc->s->mu);
    gq_code rc = GQ_ENOTFOUND;
    if (lc->s->lease)
        rc = json_object_deep_copy(lc->s->lease, out, NULL) ? GQ_ENOMEM : GQ_OK;
    pthread_mutex_unlock(&lc->s->mu);
    return rc ? gq_err_set(err, rc, "get lease") : GQ_OK;
}

static gq_code lease_create(void *ctx, const char *path, json_object *body, json_object **out,
                            gq_err *err)
{
    lease_client *lc = ctx;
    if (atomic_load(&lc->down))
        return gq_err_set(err, GQ_EIO, "down");
    assert_string_equal(path, "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases");
    pthread_mutex_lock(&lc->s->mu);
    gq_code rc = lc->s->lease ? GQ_EEXISTS : store_put(lc->s, body);
    lc->s->creates += !rc;
    pthread_mutex_unlock(&lc->s->mu);
    return rc ? gq_err_set(err, rc, "create lease") : GQ_OK;
}

static gq_code lease_update(void *ctx, const char *path, json_object *body, json_object **out,
                            gq_err *err)
{
    lease_client *lc = ctx;
    if (atomic_load(&lc->down))
        return gq_err_set(err, GQ_EIO, "down");
    pthread_mutex_lock(&lc->s->mu);
    gq_code rc = strcmp(rv_of(body), rv_of(lc->s->lease)) ? GQ_ECONFLICT : store_put(lc->s, body);
    lc->s->updates += !rc;
    pthread_mutex_unlock(&lc->s->mu);
    return rc ? gq_err_set(err, rc, "update lease") : GQ_OK;
}

static void le_started(void *ud)
{
    atomic_fetch_add(&((lease_client *)ud)->started, 1);
}

static void le_stopped(void *ud)
{
    atomic_fetch_add(&((lease_client *)ud)->stopped, 1);
}

static const char *spec_field(lease_store *s, const char *k, char *buf, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    json_object *spec, *v;
    buf[0] = '\0';
    if (s->lease && json_object_object_get_ex(s->lease, "spec", &spec) &&
        json_object_object_get_ex(spec, k, &v))
        snprintf(buf, cap, "%s", json_object_get_string(v));
    pthread_mutex_unlock(&s->mu);
    return buf;
}

/* A clock the test drives: fake time moves only in fake_advance. Elector
 * threads wait in fake_sleep until fake time reaches their deadline, and
 * fake_advance returns once every thread that was due has run and gone back
 * to sleep, so whatever the electors do within a step is over when the test
 * looks: no real time passes between what is asserted. */
#define FAKE_SLEEPERS 4

typedef struct fake_clock {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t now_ms;
    int64_t deadline[FAKE_SLEEPERS]; /* of the threads in fake_sleep; 0: free */
    int threads;                     /* elector threads running */
} fake_clock;

static int64_t fake_mono_ms(void *ud)
{
    fake_clock *fc = ud;
    pthread_mutex_lock(&fc->mu);
    int64_t t = fc->now_ms;
    pthread_mutex_unlock(&fc->mu);
    return t;
}

static int64_t fake_wall_us(void *ud)
{
    return 1795791732000000LL + fake_mono_ms(ud) * 1000;
}

/* Real-time wait for the condition variable: a bound, never a signal. */
static void cv_wait_a_little(fake_clock *fc)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 5 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&fc->cv, &fc->mu, &ts);
}

static int fake_sleep(void *ud, long ms, const atomic_int *stop)
{
    fake_clock *fc = ud;
    pthread_mutex_lock(&fc->mu);
    int slot = 0;
    while (fc->deadline[slot])
        slot++;
    assert_true(slot < FAKE_SLEEPERS);
    int64_t until = fc->now_ms + (ms > 0 ? ms : 1);
    fc->deadline[slot] = until;
    pthread_cond_broadcast(&fc->cv);
    int stopped = 0;
    while (fc->now_ms < until && !(stopped = atomic_load(stop)))
        cv_wait_a_little(fc); /* stop() sets a flag without signalling */
    fc->deadline[slot] = 0;
    pthread_cond_broadcast(&fc->cv);
    pthread_mutex_unlock(&fc->mu);
    return stopped;
}

/* Wait (real time, 5 s at most) until every running thread sleeps with a
 * deadline still ahead. Call with fc->mu held. */
static void settle_locked(fake_clock *fc)
{
    for (int tries = 0; tries < 1000; tries++) {
        int ahead = 0;
        for (int i = 0; i < FAKE_SLEEPERS; i++)
            ahead += fc->deadline[i] > fc->now_ms;
        if (ahead == fc->threads)
            return;
        cv_wait_a_little(fc);
    }
    fail_msg("electors did not settle at fake time %lld", (long long)fc->now_ms);
}

/* One more (or one fewer) elector thread, once it has settled. */
static void fake_threads(fake_clock *fc, int delta)
{
    pthread_mutex_lock(&fc->mu);
    fc->threads += delta;
    settle_locked(fc);
    pthread_mutex_unlock(&fc->mu);
}

static void fake_advance(fake_clock *fc, long ms)
{
    pthread_mutex_lock(&fc->mu);
    fc->now_ms += ms;
    pthread_cond_broadcast(&fc->cv);
    settle_locked(fc);
    pthread_mutex_unlock(&fc->mu);
}

/* Advance in 10 ms steps until le's leadership is want, at most ms; the
 * fake milliseconds it took, or -1. At every step at most one of le[0..2)
 * leads. */
static long advance_until_leader(fake_clock *fc, kube_leader_elect *le[2], int which, int want,
                                 long ms)
{
    for (long t = 0; t <= ms; t += 10) {
        assert_true(kube_leader_elect_is_leader(le[0]) + kube_leader_elect_is_leader(le[1]) <= 1);
        if (kube_leader_elect_is_leader(le[which]) == want)
            return t;
        fake_advance(fc, 10);
    }
    return -1;
}

static void setup_electors(fake_clock *fc, lease_store *s, lease_client lc[2], kube_api api[2],
                           kube_leader_elect *le[2], long lease_ms, long renew_ms)
{
    static const char *ids[2] = {"ctl-a", "ctl-b"};
    static const kube_clock clock_ops = {fake_mono_ms, fake_wall_us, fake_sleep, NULL};
    static kube_clock clock;
    clock = clock_ops;
    clock.ud = fc;
    for (int i = 0; i < 2; i++) {
        lc[i].s = s;
        api[i] = (kube_api){
            .ctx = &lc[i], .get = lease_get, .create = lease_create, .update = lease_update};
        kube_leader_opts o = {.namespace_ = "gpu-system",
                              .name = "ctl",
                              .identity = ids[i],
                              .lease_ms = lease_ms,
                              .renew_deadline_ms = renew_ms,
                              .retry_ms = 50,
                              .on_started = le_started,
                              .on_stopped = le_stopped,
                              .ud = &lc[i],
                              .clock = &clock};
        gq_err e;
        assert_int_equal(kube_leader_elect_new(&api[i], &o, &le[i], &e), GQ_OK);
    }
    /* A first, so it is the leader at once; then B, which must stay a
     * follower. */
    gq_err e;
    assert_int_equal(kube_leader_elect_start(le[0], &e), GQ_OK);
    fake_threads(fc, 1);
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 1);
    assert_int_equal(kube_leader_elect_start(le[1], &e), GQ_OK);
    fake_threads(fc, 1);
}

static void leader_one_leader_and_release(void **state)
{
    (void)state;
    lease_store s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    lease_client lc[2] = {{0}};
    kube_api api[2];
    kube_leader_elect *le[2];
    fake_clock fc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    setup_electors(&fc, &s, lc, api, le, 5000, 3000);
    /* For 300 ms, exactly one leader at every step, renewing every 50 ms. */
    for (int i = 0; i < 30; i++) {
        assert_int_equal(kube_leader_elect_is_leader(le[0]) + kube_leader_elect_is_leader(le[1]),
                         1);
        fake_advance(&fc, 10);
    }
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 1);
    assert_int_equal(atomic_load(&lc[0].started), 1);
    assert_int_equal(atomic_load(&lc[1].started), 0);
    assert_int_equal(s.creates, 1);
    assert_int_equal(s.updates, 6); /* at 50, 100, ... 300 ms */
    char buf[64];
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "ctl-a");
    assert_string_equal(spec_field(&s, "leaseDurationSeconds", buf, sizeof(buf)), "5");
    assert_string_equal(spec_field(&s, "leaseTransitions", buf, sizeof(buf)), "0");
    /* renewTime is the fake wall clock at the last renewal, as MicroTime. */
    assert_string_equal(spec_field(&s, "renewTime", buf, sizeof(buf)),
                        "2026-11-27T15:02:12.300000Z");
    int64_t us;
    assert_int_equal(kube_parse_time(buf, &us), GQ_OK);

    /* Release: the other replica takes over at its next retry (at most
     * 2.2 x 50 ms with jitter), long before the 5 s lease would expire. */
    kube_leader_elect_stop(le[0]);
    fake_threads(&fc, -1);
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 0);
    assert_int_equal(atomic_load(&lc[0].stopped), 1);
    long took = advance_until_leader(&fc, le, 1, 1, 200);
    assert_true(took >= 0 && took <= 110);
    assert_int_equal(atomic_load(&lc[1].started), 1);
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "ctl-b");
    assert_string_equal(spec_field(&s, "leaseTransitions", buf, sizeof(buf)), "1");
    kube_leader_elect_stop(le[1]);
    fake_threads(&fc, -1);
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "");
    assert_string_equal(spec_field(&s, "leaseDurationSeconds", buf, sizeof(buf)), "1");
    assert_int_equal(atomic_load(&lc[1].stopped), 1);
    kube_leader_elect_free(le[0]);
    kube_leader_elect_free(le[1]);
    json_object_put(s.lease);
}

static void leader_takeover_after_expiry(void **state)
{
    (void)state;
    lease_store s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    lease_client lc[2] = {{0}};
    kube_api api[2];
    kube_leader_elect *le[2];
    fake_clock fc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    setup_electors(&fc, &s, lc, api, le, 1000, 600);
    assert_int_equal(advance_until_leader(&fc, le, 1, 1, 200), -1); /* B stays a follower */
    /* A loses the API server: it steps down once its last renewal (at most
     * 50 ms ago) is 600 ms old; B takes over once the lease has not moved
     * for its 1 s, as B observed it (B looks every 50..110 ms). */
    atomic_store(&lc[0].down, 1);
    long down = advance_until_leader(&fc, le, 0, 0, 2000);
    assert_true(down >= 550 && down <= 650);
    assert_int_equal(atomic_load(&lc[0].stopped), 1);
    assert_int_equal(kube_leader_elect_is_leader(le[1]), 0);
    long over = advance_until_leader(&fc, le, 1, 1, 2000);
    assert_true(over >= 0);
    over += down;
    assert_true(over >= 900 && over <= 1170);
    /* A's API server comes back: A finds B renewing and stays a follower. */
    atomic_store(&lc[0].down, 0);
    assert_int_equal(advance_until_leader(&fc, le, 0, 1, 300), -1);
    assert_int_equal(kube_leader_elect_is_leader(le[1]), 1);
    char buf[64];
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "ctl-b");
    kube_leader_elect_stop(le[0]);
    kube_leader_elect_stop(le[1]);
    kube_leader_elect_free(le[0]);
    kube_leader_elect_free(le[1]);
    json_object_put(s.lease);

    kube_leader_opts bad = {.namespace_ = "ns", .name = "x"};
    gq_err e;
    assert_int_equal(kube_leader_elect_new(&api[0], &bad, &le[0], &e), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kubeconfig_good_token),
        cmocka_unit_test(kubeconfig_good_files),
        cmocka_unit_test(kubeconfig_parse_from_memory),
        cmocka_unit_test(kubeconfig_bad_files),
        cmocka_unit_test(kubeconfig_missing_file_and_default_order),
        cmocka_unit_test(incluster_config),
        cmocka_unit_test(watch_parser_whole_and_bytewise),
        cmocka_unit_test(watch_parser_trailing_event_without_newline),
        cmocka_unit_test(watch_parser_errors),
        cmocka_unit_test(status_decoding),
        cmocka_unit_test(http_code_mapping),
        cmocka_unit_test(url_building),
        cmocka_unit_test(backoff_sequence),
        cmocka_unit_test(micro_time),
        cmocka_unit_test(cache_list_watch_relist),
        cmocka_unit_test(cache_relists_when_history_goes_back),
        cmocka_unit_test(cache_relists_after_repeated_failures_and_when_behind),
        cmocka_unit_test(cache_without_transform_keeps_json),
        cmocka_unit_test(cache_fresh_only_while_the_watch_is_established),
        cmocka_unit_test(leader_one_leader_and_release),
        cmocka_unit_test(leader_takeover_after_expiry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
