/* The webhook server's handler seam, driven without sockets, its
 * certificate loading/reload rules, and the graceful stop over a socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "certs/certs.h"
#include "http/metrics.h"
#include "http/server.h"

typedef struct fixture {
    char dir[64];
    char cert[128], key[128];
    http_metrics *metrics;
    http_server *srv;
} fixture;

static void gen_certs(const char *dir, const char *svc, bool rotate)
{
    gq_err err;
    const char *sans[] = {"localhost", "127.0.0.1"};
    certs_options o = {.service = svc,
                       .ns = "gq-system",
                       .out_dir = dir,
                       .days = 30,
                       .ca_days = 60,
                       .extra_sans = sans,
                       .n_extra_sans = 2,
                       .rotate = rotate,
                       .now = time(NULL)};
    assert_int_equal(certs_generate(&o, NULL, &err), GQ_OK);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    gq_err err;
    snprintf(f->dir, sizeof(f->dir), "/tmp/gq-test-server-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->cert, sizeof(f->cert), "%s/tls.crt", f->dir);
    snprintf(f->key, sizeof(f->key), "%s/tls.key", f->dir);
    gen_certs(f->dir, "wh", false);
    assert_int_equal(http_metrics_new("test", &f->metrics), GQ_OK);
    http_server_options o = {.listen = "127.0.0.1:0",
                             .cert_file = f->cert,
                             .key_file = f->key,
                             .max_body = 1024,
                             .metrics = f->metrics};
    assert_int_equal(http_server_new(&o, &f->srv, &err), GQ_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    const char *names[] = {"ca.crt", "ca.key", "tls.crt", "tls.key", "other.key"};
    char p[160];
    http_server_free(f->srv);
    http_metrics_free(f->metrics);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A handler that echoes what it saw, so tests can check the seam. */
static void echo(void *ctx, const http_request *req, http_response *resp)
{
    int *calls = ctx;
    char buf[512];
    (*calls)++;
    int n = snprintf(buf, sizeof(buf), "%s %s timeout=%s ct=%s len=%zu body=%s", req->method,
                     req->path, req->timeout ? req->timeout : "-",
                     req->content_type ? req->content_type : "-", req->body_len, req->body);
    size_t len = n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1; /* output may be cut */
    assert_int_equal(http_response_set_body(resp, 200, "text/plain", buf, len), GQ_OK);
    assert_int_equal(http_response_add_header(resp, "X-Echo", "1"), GQ_OK);
}

static void silent(void *ctx, const http_request *req, http_response *resp)
{
    (void)ctx;
    (void)req;
    (void)resp; /* forgets to answer */
}

static const char *header(const http_response *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (!strcmp(r->headers[i].name, name))
            return r->headers[i].value;
    return NULL;
}

typedef struct dispatch_case {
    const char *method, *path, *content_type, *body;
    size_t body_len; /* 0: strlen(body) */
    int status;
    const char *resp_body;
    const char *allow;
    int calls;            /* handler calls expected */
    const char *rejected; /* http_request.client_rejected */
} dispatch_case;

static void dispatch_table(void **state)
{
    fixture *f = *state;
    gq_err err;
    int calls = 0;
    assert_int_equal(
        http_server_add_handler(f->srv, "/echo", HTTP_ROUTE_POST_JSON, echo, &calls, &err), GQ_OK);
    assert_int_equal(http_server_add_handler(f->srv, "/get", HTTP_ROUTE_GET, echo, &calls, &err),
                     GQ_OK);
    assert_int_equal(
        http_server_add_handler(f->srv, "/silent", HTTP_ROUTE_POST_JSON, silent, NULL, &err),
        GQ_OK);
    static const dispatch_case cases[] = {
        {"POST", "/echo", "application/json", "{}", 0, 200,
         "POST /echo timeout=10s ct=application/json len=2 body={}", NULL, 1, NULL},
        {"POST", "/echo", "Application/JSON; charset=utf-8", "[1]", 0, 200,
         "POST /echo timeout=10s ct=Application/JSON; charset=utf-8 len=3 body=[1]", NULL, 1, NULL},
        {"POST", "/echo", "text/plain", "{}", 0, 415,
         "{\"code\":415,\"message\":\"content type text/plain not supported; use "
         "application/json\"}",
         NULL, 0, NULL},
        {"POST", "/echo", "application/jsonx", "{}", 0, 415,
         "{\"code\":415,\"message\":\"content type application/jsonx not supported; use "
         "application/json\"}",
         NULL, 0, NULL},
        {"POST", "/echo", NULL, "{}", 0, 415,
         "{\"code\":415,\"message\":\"content type (none) not supported; use "
         "application/json\"}",
         NULL, 0, NULL},
        {"GET", "/echo", NULL, "", 0, 405,
         "{\"code\":405,\"message\":\"method GET not allowed; use POST\"}", "POST", 0, NULL},
        {"PUT", "/get", "application/json", "{}", 0, 405,
         "{\"code\":405,\"message\":\"method PUT not allowed; use GET\"}", "GET, HEAD", 0, NULL},
        {"POST", "/echo", "application/json", "x", 1025, 413,
         "{\"code\":413,\"message\":\"request body exceeds 1024 bytes\"}", NULL, 0, NULL},
        {"POST", "/echo", "application/json", "x", 1024, 200, NULL, NULL, 1, NULL},
        {"GET", "/missing", NULL, "", 0, 404,
         "{\"code\":404,\"message\":\"no handler for this path\"}", NULL, 0, NULL},
        {"GET", "/healthz", NULL, "", 0, 200, "ok", NULL, 0, NULL},
        {"HEAD", "/healthz", NULL, "", 0, 200, "ok", NULL, 0, NULL},
        {"POST", "/silent", "application/json", "{}", 0, 500,
         "{\"code\":500,\"message\":\"handler for /silent produced no response\"}", NULL, 0, NULL},
        {"GET", "/get", NULL, "", 0, 200, "GET /get timeout=10s ct=- len=0 body=", NULL, 1, NULL},
        /* Client certificates guard POST routes only; before the body checks. */
        {"POST", "/echo", "text/plain", "x", 1025, 403,
         "{\"code\":403,\"message\":\"client certificate not accepted: none presented\"}", NULL, 0,
         "none presented"},
        {"GET", "/get", NULL, "", 0, 200, "GET /get timeout=10s ct=- len=0 body=", NULL, 1,
         "none presented"},
        {"GET", "/echo", NULL, "", 0, 405,
         "{\"code\":405,\"message\":\"method GET not allowed; use POST\"}", "POST", 0,
         "none presented"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const dispatch_case *c = &cases[i];
        char *body = NULL;
        size_t len = c->body_len ? c->body_len : strlen(c->body);
        if (c->body_len) { /* a body of exactly body_len bytes */
            body = malloc(len + 1);
            memset(body, 'x', len);
            body[len] = '\0';
        }
        http_request req = {.method = c->method,
                            .path = c->path,
                            .timeout = "10s",
                            .content_type = c->content_type,
                            .body = body ? body : c->body,
                            .body_len = len,
                            .remote_addr = "127.0.0.1:1",
                            .client_rejected = c->rejected};
        http_response resp;
        http_response_init(&resp);
        calls = 0;
        http_server_dispatch(f->srv, &req, &resp);
        print_message("case %zu: %s %s\n", i, c->method, c->path);
        assert_int_equal(resp.status, c->status);
        if (c->resp_body) {
            assert_non_null(resp.body);
            assert_string_equal(resp.body, c->resp_body);
            assert_int_equal(resp.body_len, strlen(c->resp_body));
        }
        if (c->allow)
            assert_string_equal(header(&resp, "Allow"), c->allow);
        if (c->status == 200 && calls)
            assert_string_equal(header(&resp, "X-Echo"), "1");
        assert_int_equal(calls, c->calls);
        http_response_dispose(&resp);
        free(body);
    }
    /* Every error reply was counted once, by status. */
    char *text = NULL;
    size_t tlen = 0;
    assert_int_equal(http_metrics_render(f->metrics, &text, &tlen), GQ_OK);
    assert_non_null(strstr(text, "gpuquota_http_errors_total{code=\"403\"} 1\n"));
    assert_non_null(strstr(text, "gpuquota_http_errors_total{code=\"404\"} 1\n"));
    assert_non_null(strstr(text, "gpuquota_http_errors_total{code=\"405\"} 3\n"));
    assert_non_null(strstr(text, "gpuquota_http_errors_total{code=\"413\"} 1\n"));
    assert_non_null(strstr(text, "gpuquota_http_errors_total{code=\"415\"} 3\n"));
    assert_non_null(strstr(text, "gpuquota_http_errors_total{code=\"500\"} 1\n"));
    free(text);
}

static void readyz_and_metrics(void **state)
{
    fixture *f = *state;
    http_request req = {.method = "GET", .path = "/readyz", .body = "", .remote_addr = ""};
    http_response resp;
    http_response_init(&resp);
    assert_false(http_server_is_ready(f->srv));
    http_server_dispatch(f->srv, &req, &resp);
    assert_int_equal(resp.status, 503);
    assert_string_equal(resp.body, "not ready");
    http_response_dispose(&resp);

    http_server_set_ready(f->srv, true);
    http_server_dispatch(f->srv, &req, &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.body, "ok");
    http_response_dispose(&resp);

    req.path = "/metrics";
    http_server_dispatch(f->srv, &req, &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.content_type, HTTP_METRICS_CONTENT_TYPE);
    /* A not-ready 503 is a state, not an access error: nothing counted. */
    assert_null(strstr(resp.body, "gpuquota_http_errors_total{"));
    assert_non_null(strstr(resp.body, "gpuquota_build_info{version=\"test\"} 1\n"));
    http_response_dispose(&resp);
}

static void registration_errors(void **state)
{
    fixture *f = *state;
    gq_err err;
    int calls = 0;
    assert_int_equal(
        http_server_add_handler(f->srv, "/healthz", HTTP_ROUTE_GET, echo, &calls, &err),
        GQ_EEXISTS);
    assert_int_equal(http_server_add_handler(f->srv, "nope", HTTP_ROUTE_GET, echo, &calls, &err),
                     GQ_EINVAL);
    assert_int_equal(http_server_add_handler(f->srv, "/x", (http_route_kind)9, echo, &calls, &err),
                     GQ_EINVAL);
    assert_int_equal(http_server_add_handler(f->srv, "/x", HTTP_ROUTE_GET, NULL, &calls, &err),
                     GQ_EINVAL);
    char path[16];
    gq_code rc = GQ_OK;
    for (int i = 0; i < 32 && rc == GQ_OK; i++) {
        snprintf(path, sizeof(path), "/p%d", i);
        rc = http_server_add_handler(f->srv, path, HTTP_ROUTE_GET, echo, &calls, &err);
    }
    assert_int_equal(rc, GQ_ELIMIT);
}

static void error_reply_is_sanitised(void **state)
{
    (void)state;
    http_response resp;
    http_response_init(&resp);
    http_response_error(&resp, 400, "bad \"thing\"\n\x01 here");
    assert_int_equal(resp.status, 400);
    assert_string_equal(resp.content_type, "application/json");
    assert_string_equal(resp.body, "{\"code\":400,\"message\":\"bad \\\"thing\\\"   here\"}");
    assert_string_equal(resp.error, "bad \"thing\"   here");
    http_response_dispose(&resp);
    http_response_dispose(NULL);
    char longmsg[1000];
    memset(longmsg, 'a', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    http_response_error(&resp, 500, "%s", longmsg);
    assert_true(resp.body_len < 300);
    assert_int_equal(strlen(resp.error), sizeof(resp.error) - 1);
    http_response_dispose(&resp);
}

static void new_rejects_bad_options(void **state)
{
    fixture *f = *state;
    gq_err err;
    http_server *s = NULL;
    char other[160];
    http_server_options o = {
        .listen = "127.0.0.1:0", .cert_file = f->cert, .key_file = "/nonexistent"};
    assert_int_equal(http_server_new(&o, &s, &err), GQ_EIO);
    assert_null(s);
    /* Neither file exists: still an error, not a server without a certificate. */
    o.cert_file = "/nonexistent.crt";
    assert_int_equal(http_server_new(&o, &s, &err), GQ_EIO);
    assert_null(s);
    o.cert_file = f->cert;
    o.key_file = NULL;
    assert_int_equal(http_server_new(&o, &s, &err), GQ_EINVAL);
    /* A key that belongs to another certificate. */
    snprintf(other, sizeof(other), "%s/ca.key", f->dir);
    o.key_file = other;
    assert_int_equal(http_server_new(&o, &s, &err), GQ_ETLS);
    assert_non_null(strstr(err.msg, "does not match"));
    /* Not PEM at all. */
    o.cert_file = other;
    o.key_file = f->key;
    assert_int_equal(http_server_new(&o, &s, &err), GQ_ETLS);
    o.listen = NULL;
    assert_int_equal(http_server_new(&o, &s, &err), GQ_EINVAL);
    /* Plain HTTP needs no certificates (test option). */
    http_server_options p = {.listen = "127.0.0.1:0", .insecure_plain_http = true};
    assert_int_equal(http_server_new(&p, &s, &err), GQ_OK);
    http_server_free(s);
    s = NULL;
    /* Limits that contradict each other. */
    static const char *const cns[] = {"kube-apiserver"};
    static const struct {
        http_server_options o;
        gq_code rc;
        const char *msg;
    } bad[] = {
        {{.max_body = 4096, .max_body_memory = 4095}, GQ_EINVAL, "below one body"},
        {{.max_connections = 100, .max_connections_per_ip = 101}, GQ_EINVAL, "exceed"},
        {{.client_cns = cns, .n_client_cns = 1}, GQ_EINVAL, "need a client CA"},
        {{.client_ca_file = "/dev/null"}, GQ_EINVAL, "need TLS"},
        {{.client_ca_file = "/x", .client_cns = cns, .n_client_cns = HTTP_MAX_CLIENT_CNS + 1},
         GQ_ELIMIT,
         "at most"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        http_server_options b = bad[i].o;
        b.listen = "127.0.0.1:0";
        b.insecure_plain_http = true;
        print_message("bad limits %zu\n", i);
        assert_int_equal(http_server_new(&b, &s, &err), bad[i].rc);
        assert_null(s);
        assert_non_null(strstr(err.msg, bad[i].msg));
    }
    /* A client CA file that holds no certificate. */
    o = (http_server_options){.listen = "127.0.0.1:0",
                              .cert_file = f->cert,
                              .key_file = f->key,
                              .client_ca_file = f->key};
    assert_int_equal(http_server_new(&o, &s, &err), GQ_ETLS);
    assert_non_null(strstr(err.msg, "no usable PEM CA certificate"));
}

static void bad_listen_addresses(void **state)
{
    (void)state;
    static const char *const bad[] = {"8443",
                                      "127.0.0.1:",
                                      "127.0.0.1:65536",
                                      "127.0.0.1:8x",
                                      "no.such.host.invalid:1",
                                      ":99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gq_err err;
        http_server *s = NULL;
        http_server_options p = {.listen = bad[i], .insecure_plain_http = true};
        assert_int_equal(http_server_new(&p, &s, &err), GQ_OK);
        print_message("listen %s\n", bad[i]);
        assert_int_equal(http_server_start(s, &err), GQ_EINVAL);
        http_server_free(s);
    }
}

static void start_on_ephemeral_ports(void **state)
{
    (void)state;
    static const char *const good[] = {"127.0.0.1:0", "[::1]:0", "localhost:0"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        gq_err err;
        http_server *s = NULL;
        http_server_options p = {.listen = good[i], .insecure_plain_http = true, .threads = 2};
        assert_int_equal(http_server_new(&p, &s, &err), GQ_OK);
        assert_int_equal(http_server_port(s), 0);
        if (http_server_start(s, &err) != GQ_OK) { /* e.g. no IPv6 in the sandbox */
            print_message("skip %s: %s\n", good[i], err.msg);
            http_server_free(s);
            continue;
        }
        assert_true(http_server_port(s) > 0);
        assert_int_equal(http_server_start(s, &err), GQ_EINVAL); /* twice */
        assert_int_equal(http_server_stop(s, 100), 0);
        assert_int_equal(http_server_stop(s, 100), 0); /* idempotent */
        http_server_free(s);
    }
}

static int connect_local(unsigned port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 5};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* One GET on fd; the reply's head and body in buf (status line first). */
static void get_on(int fd, const char *path, char *buf, size_t cap)
{
    char req[128];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t len = 0;
    const char *end = NULL;
    while (len + 1 < cap) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        assert_true(r > 0);
        len += (size_t)r;
        buf[len] = '\0';
        if ((end = strstr(buf, "\r\n\r\n"))) {
            const char *cl = strstr(buf, "Content-Length: ");
            size_t want = cl ? strtoul(cl + 16, NULL, 10) : 0;
            if (len >= (size_t)(end + 4 - buf) + want)
                return;
        }
    }
    fail_msg("reply larger than %zu bytes", cap);
}

/* The shutdown delay: not ready and every reply closing its connection,
 * while a new connection (routed here before the endpoints changed) is
 * still served; only http_server_stop closes the listener. */
static void drain_keeps_listening_until_stop(void **state)
{
    (void)state;
    gq_err err;
    http_server *s = NULL;
    http_server_options p = {.listen = "127.0.0.1:0", .insecure_plain_http = true, .threads = 2};
    assert_int_equal(http_server_new(&p, &s, &err), GQ_OK);
    assert_int_equal(http_server_start(s, &err), GQ_OK);
    http_server_set_ready(s, true);
    unsigned port = http_server_port(s);
    char buf[2048], one;

    int kept = connect_local(port);
    assert_true(kept >= 0);
    get_on(kept, "/healthz", buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_null(strstr(buf, "Connection: close"));

    http_server_begin_drain(s);
    assert_false(http_server_is_ready(s));
    /* The kept-alive connection is served once more, then retired. */
    get_on(kept, "/healthz", buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_non_null(strstr(buf, "Connection: close"));
    assert_int_equal(read(kept, &one, 1), 0);
    close(kept);

    /* A new connection is accepted and answered: not ready, and closed. */
    int late = connect_local(port);
    assert_true(late >= 0);
    get_on(late, "/readyz", buf, sizeof(buf));
    assert_non_null(strstr(buf, "HTTP/1.1 503"));
    assert_non_null(strstr(buf, "Connection: close"));
    close(late);

    assert_int_equal(http_server_stop(s, 100), 0);
    assert_int_equal(connect_local(port), -1);
    http_server_free(s);
}

/* Binding is ours: one message with the address and the system's reason.
 * With several threads a server's daemons share the port through
 * SO_REUSEPORT; a second server must still be refused, whatever the thread
 * counts of either (the same uid may join a SO_REUSEPORT group). */
static void port_in_use(void **state)
{
    (void)state;
    static const unsigned threads[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 3}};
    for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
        gq_err err;
        http_server *a = NULL, *b = NULL;
        char listen[32], want[96];
        http_server_options o = {
            .listen = "127.0.0.1:0", .insecure_plain_http = true, .threads = threads[i][0]};
        assert_int_equal(http_server_new(&o, &a, &err), GQ_OK);
        assert_int_equal(http_server_start(a, &err), GQ_OK);
        snprintf(listen, sizeof(listen), "127.0.0.1:%u", http_server_port(a));
        o.listen = listen;
        o.threads = threads[i][1];
        assert_int_equal(http_server_new(&o, &b, &err), GQ_OK);
        assert_int_equal(http_server_start(b, &err), GQ_EIO);
        snprintf(want, sizeof(want), "cannot listen on %s: Address already in use", listen);
        assert_string_equal(err.msg, want);
        assert_int_equal(http_server_port(b), 0);
        http_server_free(b);
        /* the port is free again once the first server is gone */
        http_server_free(a);
        assert_int_equal(http_server_new(&o, &b, &err), GQ_OK);
        assert_int_equal(http_server_start(b, &err), GQ_OK);
        assert_int_equal(http_server_port(b), strtoul(strchr(listen, ':') + 1, NULL, 10));
        http_server_free(b);
    }
}

/* An expired certificate still loads (the operator may be mid-rotation),
 * with its expiry exported. */
static void expired_certificate_exported(void **state)
{
    fixture *f = *state;
    gq_err err;
    http_server *s = NULL;
    certs_result res;
    const char *sans[] = {"localhost"};
    certs_options co = {.service = "wh",
                        .ns = "gq-system",
                        .out_dir = f->dir,
                        .days = 1,
                        .ca_days = 60,
                        .extra_sans = sans,
                        .n_extra_sans = 1,
                        .now = time(NULL) - 10 * 86400};
    assert_int_equal(certs_generate(&co, &res, &err), GQ_OK);
    http_server_options o = {
        .listen = "127.0.0.1:0", .cert_file = f->cert, .key_file = f->key, .metrics = f->metrics};
    assert_int_equal(http_server_new(&o, &s, &err), GQ_OK);
    char *text = NULL, line[128];
    size_t len = 0;
    assert_int_equal(http_metrics_render(f->metrics, &text, &len), GQ_OK);
    snprintf(line, sizeof(line), "\ngpuquota_tls_certificate_expiry_timestamp_seconds %lld\n",
             (long long)res.not_after);
    assert_non_null(strstr(text, line));
    assert_non_null(strstr(text, "\ngpuquota_http_body_bytes_in_flight 0\n"));
    assert_non_null(strstr(text, "\ngpuquota_http_read_timeouts_total 0\n"));
    assert_non_null(strstr(text, "\ngpuquota_http_connections_total 0\n"));
    free(text);
    http_server_free(s);
}

static void reload_keeps_old_pair_on_error(void **state)
{
    fixture *f = *state;
    gq_err err;
    char ca_key[160], saved[160], cmd[1024];
    snprintf(ca_key, sizeof(ca_key), "%s/ca.key", f->dir);
    snprintf(saved, sizeof(saved), "%s/other.key", f->dir);
    /* Unchanged files: nothing to do. */
    assert_int_equal(http_server_reload_certs(f->srv, &err), GQ_OK);
    /* Replace tls.key by a key that does not match tls.crt. */
    snprintf(cmd, sizeof(cmd), "cp %s %s && cp %s %s.new && mv %s.new %s", f->key, saved, ca_key,
             f->key, f->key, f->key);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(http_server_reload_certs(f->srv, &err), GQ_ETLS);
    /* Reported once: the same broken files are not retried. */
    assert_int_equal(http_server_reload_certs(f->srv, &err), GQ_OK);
    /* A new matching pair is picked up. */
    gen_certs(f->dir, "wh", true);
    assert_int_equal(http_server_reload_certs(f->srv, &err), GQ_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dispatch_table, setup, teardown),
        cmocka_unit_test_setup_teardown(readyz_and_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(registration_errors, setup, teardown),
        cmocka_unit_test(error_reply_is_sanitised),
        cmocka_unit_test_setup_teardown(new_rejects_bad_options, setup, teardown),
        cmocka_unit_test(bad_listen_addresses),
        cmocka_unit_test(start_on_ephemeral_ports),
        cmocka_unit_test(drain_keeps_listening_until_stop),
        cmocka_unit_test(port_in_use),
        cmocka_unit_test_setup_teardown(expired_certificate_exported, setup, teardown),
        cmocka_unit_test_setup_teardown(reload_keeps_old_pair_on_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
