/* HTTPS server for the admission webhook: libmicrohttpd with GnuTLS inside.
 *
 * Handlers see a socket-free seam: a http_request in, a http_response out. The
 * server owns routing, method/content-type/size checks, TLS, certificate hot
 * reload, readiness and draining; http_server_dispatch runs the same routing
 * and checks without any socket, so tests drive everything but the wire.
 *
 * Built-in routes: GET /healthz (200 "ok"), GET /readyz (200 while ready,
 * else 503), GET /metrics (when options.metrics is set).
 *
 * Abuse limits (docs/webhook-server.md): bodies in flight share a memory
 * budget (503 + Retry-After past it), a request must arrive whole within a
 * read deadline or its connection is closed, connections are capped in all
 * and per peer address, and client certificates may be required on POST
 * routes. */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/gq_error.h"
#include "http/metrics.h"

#define HTTP_MAX_BODY_DEFAULT ((size_t)3 * 1024 * 1024) /* DESIGN.md §8: 3 MiB */
#define HTTP_IDLE_TIMEOUT_DEFAULT 120 /* seconds; above kube-apiserver's 90 s idle */
/* All request bodies buffered at once, together (DESIGN.md §8): ten
 * maximal reviews, or thousands of typical 5-10 KB ones. */
#define HTTP_MAX_BODY_MEMORY_DEFAULT ((size_t)32 * 1024 * 1024)
/* Server threads without --threads: one per online CPU, at most this many.
 * In a container the CPUs online are the node's (96 on a large node), and a
 * decision takes tens of microseconds: more threads add per-thread malloc
 * arenas, not throughput. */
#define HTTP_THREADS_DEFAULT_MAX 8
/* A request (TLS handshake included for the first one on a connection) must
 * arrive whole within this many seconds; kube-apiserver's webhook timeout
 * is at most 30 s, its requests arrive in milliseconds. */
#define HTTP_READ_TIMEOUT_DEFAULT 10
#define HTTP_MAX_CONNECTIONS_DEFAULT 1024
/* One peer address may hold at most this many connections, so that no
 * single peer can take them all. kube-apiserver is one peer (a few for an
 * HA control plane) and opens one connection per concurrent call. */
#define HTTP_MAX_CONNECTIONS_PER_IP_DEFAULT 256
#define HTTP_MAX_CLIENT_CNS 16
#define HTTP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* One request as a handler sees it. Every pointer is borrowed for the call. */
typedef struct http_request {
    const char *method;       /* "GET", "POST", ... */
    const char *path;         /* without query string */
    const char *timeout;      /* the `timeout` query parameter (e.g. "10s"), or NULL */
    const char *content_type; /* NULL when absent */
    const char *body;         /* NUL-terminated (NUL not counted); "" for no body */
    size_t body_len;
    const char *remote_addr; /* "127.0.0.1:54321", "[::1]:54321" or "" */
    /* When the server requires client certificates (client_ca_file): why
     * this client's was not accepted; NULL when it was, or when none is
     * required. POST routes answer 403 with it. */
    const char *client_rejected;
} http_request;

#define HTTP_MAX_HEADERS 4
typedef struct http_header {
    char name[64];
    char value[256];
} http_header;

/* What a handler fills in. The body is heap memory (malloc) that the server
 * frees after sending; content_type points to a string with static storage. */
typedef struct http_response {
    int status;
    const char *content_type;
    char *body;
    size_t body_len;
    http_header headers[HTTP_MAX_HEADERS];
    size_t n_headers;
    char error[160]; /* for status >= 400: the sanitised reason, for the access log */
    char uid[129];   /* admission uid the error log line carries ("" = none) */
} http_response;

typedef void (*http_handler_fn)(void *ctx, const http_request *req, http_response *resp);

/* A reply that comes later, from any thread (an asynchronous handler). */
typedef struct http_deferred http_deferred;

/* An asynchronous handler: either fills resp and returns false, or keeps
 * `later` and returns true, then answers exactly once through
 * http_deferred_finish, from any thread, possibly before it returns. While
 * the answer is pending the connection is suspended: it holds no server
 * thread. req is only valid during the call. */
typedef bool (*http_async_handler_fn)(void *ctx, const http_request *req, http_response *resp,
                                      http_deferred *later);

/* Hand over the answer (resp's body is taken; resp is reset). When the
 * server has already answered (it stopped, see http_server_stop), the answer
 * is dropped. Either way `later` is no longer the caller's. */
void http_deferred_finish(http_deferred *later, http_response *resp);

/* Zero the response (status 0 = not set). */
void http_response_init(http_response *resp);
/* Free the body and reset. NULL is accepted. */
void http_response_dispose(http_response *resp);
/* Replace the body with a copy of len bytes of data. GQ_ENOMEM leaves resp
 * unchanged. content_type must have static storage. */
gq_code http_response_set_body(http_response *resp, int status, const char *content_type,
                               const char *data, size_t len) GQ_WUR;
/* Take ownership of a malloc'd body (freed on every path). */
void http_response_take_body(http_response *resp, int status, const char *content_type, char *body,
                             size_t len);
/* Add a header (name/value truncated to fit). GQ_ELIMIT when full. */
gq_code http_response_add_header(http_response *resp, const char *name, const char *value) GQ_WUR;

/* The one way to build an error reply: a small JSON body
 *   {"code":413,"message":"..."}
 * with the message sanitised (control characters replaced, truncated). The
 * server counts and logs every status >= 400 exactly once when it sends it,
 * using resp->error. Never fails: on out-of-memory the body is a static
 * fallback. */
void http_response_error(http_response *resp, int status, const char *fmt, ...) GQ_PRINTF(3, 4);

typedef struct http_server http_server;

typedef struct http_server_options {
    const char *listen;      /* "[HOST]:PORT"; ":8443" = all addresses; port 0 = ephemeral */
    const char *cert_file;   /* PEM chain, leaf first */
    const char *key_file;    /* PEM private key */
    unsigned threads;        /* worker threads; 0 = online CPUs, at most HTTP_THREADS_DEFAULT_MAX */
    unsigned idle_timeout_s; /* 0 = HTTP_IDLE_TIMEOUT_DEFAULT */
    size_t max_body;         /* 0 = HTTP_MAX_BODY_DEFAULT */
    size_t max_body_memory;  /* all bodies in flight; 0 = HTTP_MAX_BODY_MEMORY_DEFAULT */
    unsigned read_timeout_s; /* 0 = HTTP_READ_TIMEOUT_DEFAULT */
    unsigned max_connections; /* 0 = HTTP_MAX_CONNECTIONS_DEFAULT */
    /* 0 = HTTP_MAX_CONNECTIONS_PER_IP_DEFAULT or a quarter of max_connections,
     * whichever is less */
    unsigned max_connections_per_ip;
    unsigned reload_interval_ms; /* certificate poll; 0 = 1000 */
    /* Client certificates: with a CA bundle, every TLS handshake asks for a
     * certificate (optionally) and POST routes require one that chains to
     * the bundle with the clientAuth purpose and, when client_cns are
     * given, a subject CN among them; GET routes stay open (probes,
     * scrapes). The bundle is reloaded with the serving pair. */
    const char *client_ca_file;
    const char *const *client_cns; /* at most HTTP_MAX_CLIENT_CNS; copied */
    size_t n_client_cns;
    bool insecure_plain_http; /* tests only: serve plain HTTP, no certificates */
    http_metrics *metrics;    /* borrowed; NULL = no /metrics and no counting */
    const char *version;      /* for logs; may be NULL */
} http_server_options;

typedef enum http_route_kind {
    HTTP_ROUTE_GET = 1, /* GET (and HEAD); no body */
    /* POST with Content-Type application/json; body <= max_body; an
     * authenticated client when client certificates are configured. */
    HTTP_ROUTE_POST_JSON = 2,
} http_route_kind;

/* Create a server (nothing is bound yet); loads and checks the certificate
 * pair (and the client CA bundle) unless insecure_plain_http, and warns when
 * the certificate is expired or not yet valid. With metrics, exports
 * gpuquota_tls_certificate_expiry_timestamp_seconds and the server's abuse
 * counters. Options are copied. GQ_EINVAL for inconsistent limits. Caller
 * owns *out. */
gq_code http_server_new(const http_server_options *opts, http_server **out, gq_err *err) GQ_WUR;

/* Register a handler for an exact path (before http_server_start). ctx is
 * passed back unchanged. GQ_EEXISTS for a duplicate path, GQ_EINVAL after
 * start or for a bad path, GQ_ELIMIT when the table is full. */
gq_code http_server_add_handler(http_server *srv, const char *path, http_route_kind kind,
                                http_handler_fn fn, void *ctx, gq_err *err) GQ_WUR;

/* The same for an asynchronous handler. */
gq_code http_server_add_async_handler(http_server *srv, const char *path, http_route_kind kind,
                                      http_async_handler_fn fn, void *ctx, gq_err *err) GQ_WUR;

/* Bind and start serving. GQ_EINVAL for a bad listen address, GQ_EIO when
 * binding (the message names the address and the system's reason) or
 * starting fails. */
gq_code http_server_start(http_server *srv, gq_err *err) GQ_WUR;

/* Bound port after start (the real one when 0 was asked); 0 before. */
unsigned http_server_port(const http_server *srv);

/* Readiness reported by /readyz; false until set. */
void http_server_set_ready(http_server *srv, bool ready);
bool http_server_is_ready(const http_server *srv);

/* Route one request exactly as the network path does: 404 unknown path, 405
 * wrong method, 403 client not authenticated (POST routes, when client
 * certificates are required), 415 wrong content type, 413 body too large,
 * else the handler (an asynchronous one is waited for).
 * resp must be initialised; it is always filled. Sockets are not needed. */
void http_server_dispatch(http_server *srv, const http_request *req, http_response *resp);

/* Re-read the certificate files now if they changed since the last load
 * (the poll thread calls this). A bad new pair is logged and the old one
 * kept (the error is returned). */
gq_code http_server_reload_certs(http_server *srv, gq_err *err) GQ_WUR;

/* The first step of a graceful stop, for the time endpoints take to drop
 * this server: /readyz turns 503 and every reply from now on carries
 * `Connection: close`, so each kept-alive connection a client sends on is
 * retired after that request. The listener stays open: a connection routed
 * here before the endpoints changed is still served. http_server_stop
 * follows. Idempotent. */
void http_server_begin_drain(http_server *srv);

/* Stop: not ready, stop accepting, wait up to drain_ms for requests in
 * flight to finish (asynchronous ones included), answer those still waiting
 * for an asynchronous handler with 503, then close everything. Idempotent.
 * Returns the number of requests still in flight when the grace ran out. */
unsigned http_server_stop(http_server *srv, unsigned drain_ms);

/* Stops (without grace) if needed and frees. NULL is accepted. */
void http_server_free(http_server *srv);

#endif
