/* The only file that includes libmicrohttpd (and GnuTLS, which MHD uses). */
#include "http/server.h"
#include "common/strutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "common/json_escape.h"
#include "common/rfc3339.h"
#include "common/gq_log.h"
#include "http/metrics.h"

#define HTTP_MAX_ROUTES 16
#define HTTP_MAX_PATH 64
#define HTTP_MAX_CERT_FILE ((size_t)1 << 20) /* a PEM chain is a few KB */
#define HTTP_MAX_CHAIN 16
#define HTTP_SWEEP_MS 250 /* how often connections are checked against the read deadline */
/* A connection is reclaimed (closed to make room when the server is full)
 * only after this long idle or receiving. */
#define HTTP_RECLAIM_MIN_AGE_MS 500
#define HTTP_LISTEN_BACKLOG 1024

/* ---------------------------------------------------------------- responses */

void http_response_init(http_response *resp)
{
    memset(resp, 0, sizeof(*resp));
}

void http_response_dispose(http_response *resp)
{
    if (!resp)
        return;
    free(resp->body);
    http_response_init(resp);
}

void http_response_take_body(http_response *resp, int status, const char *content_type, char *body,
                             size_t len)
{
    free(resp->body);
    resp->status = status;
    resp->content_type = content_type;
    resp->body = body;
    resp->body_len = body ? len : 0;
}

gq_code http_response_set_body(http_response *resp, int status, const char *content_type,
                               const char *data, size_t len)
{
    if (len == SIZE_MAX)
        return GQ_ERANGE;
    char *copy = malloc(len + 1);
    if (!copy)
        return GQ_ENOMEM;
    if (len)
        memcpy(copy, data, len);
    copy[len] = '\0';
    http_response_take_body(resp, status, content_type, copy, len);
    return GQ_OK;
}

gq_code http_response_add_header(http_response *resp, const char *name, const char *value)
{
    if (resp->n_headers >= HTTP_MAX_HEADERS)
        return GQ_ELIMIT;
    http_header *h = &resp->headers[resp->n_headers++];
    gq_copy_trunc(h->name, sizeof(h->name), name);
    gq_copy_trunc(h->value, sizeof(h->value), value);
    return GQ_OK;
}

void http_response_error(http_response *resp, int status, const char *fmt, ...)
{
    char msg[sizeof(resp->error)];
    char json[sizeof(resp->error) * 6 + 64];
    size_t len = 0;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Sanitise once: the same text goes to the client and to the log. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    gq_copy_trunc(resp->error, sizeof(resp->error), msg);

    len = (size_t)snprintf(json, sizeof(json), "{\"code\":%d,\"message\":\"", status);
    gq_json_escape_into(json, sizeof(json) - 3, &len, msg);
    memcpy(json + len, "\"}", 3);
    len += 2;
    if (http_response_set_body(resp, status, "application/json", json, len) != GQ_OK) {
        /* Out of memory: the status alone still tells the client. */
        http_response_take_body(resp, status, NULL, NULL, 0);
    }
}

/* ------------------------------------------------------------ certificates */

/* One certificate chain + key (and the client CA bundle, reloaded with
 * them). Connections hold a reference from accept to close, so a reload
 * never frees what a handshake in progress is using. */
typedef struct http_creds {
    atomic_uint refs;
    gnutls_pcert_st pcerts[HTTP_MAX_CHAIN];
    unsigned n_pcerts;
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t client_ca; /* NULL without client certificates */
    time_t not_before, not_after;       /* of the leaf */
} http_creds;

typedef struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool valid;
} file_sig;

typedef struct route {
    char path[HTTP_MAX_PATH];
    http_route_kind kind;
    http_handler_fn fn;
    http_async_handler_fn afn; /* instead of fn for an asynchronous handler */
    void *ctx;
} route;

/* An answer an asynchronous handler gives later. Two references: the
 * handler's (dropped by http_deferred_finish) and the server's (dropped when
 * the server has taken the answer, or the request ended without it). */
struct http_deferred {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* answered: http_server_dispatch waits on it */
    atomic_int refs;
    bool answered;  /* resp holds the answer */
    bool suspended; /* the connection waits suspended, on srv->suspended */
    http_response resp;
    struct MHD_Connection *conn; /* NULL under http_server_dispatch */
    struct http_deferred *prev, *next;
};

/* Where a connection stands with respect to the read deadline. */
typedef enum conn_phase {
    CONN_RECEIVING, /* a request (or the TLS handshake) is arriving: the clock runs */
    CONN_SERVING,   /* the request arrived whole; handler and reply under way */
    CONN_IDLE,      /* keep-alive between requests: only the idle timeout applies */
} conn_phase;

/* One accepted connection: MHD's socket context. The phase fields are
 * shared with the sweeper (under lock); auth belongs to the connection's
 * thread. */
typedef struct http_conn {
    struct http_conn *prev, *next; /* srv->conns, guarded by srv->conns_lock */
    http_creds *creds;             /* referenced until close; NULL for plain HTTP */
    int fd;
    char peer[INET6_ADDRSTRLEN + 16];
    size_t addr_len; /* of peer's address, without the port */
    unsigned daemon; /* index in srv->daemons; n_daemons when unknown */
    pthread_mutex_t lock;
    conn_phase phase;
    int64_t since_ms;   /* when the phase began (RECEIVING: the request) */
    bool have_baseline; /* CONN_IDLE: bytes received when first seen idle */
    uint64_t baseline;
    bool dropped;
    bool corked;     /* TCP_CORK set for the reply under way (conn_cork) */
    bool handshaken; /* the client's TLS Finished arrived (handshake_done) */
    int auth;        /* client certificate: 0 not checked yet, 1 accepted, -1 rejected */
    char auth_error[128];
} http_conn;

struct http_server {
    char *listen;
    char *cert_file;
    char *key_file;
    char *client_ca_file;
    char *client_cns[HTTP_MAX_CLIENT_CNS];
    size_t n_client_cns;
    char *version;
    unsigned threads;
    unsigned idle_timeout_s;
    unsigned read_timeout_s;
    unsigned max_connections, max_connections_per_ip;
    size_t max_body;
    size_t max_body_memory;
    unsigned reload_interval_ms;
    bool plain;
    http_metrics *metrics;

    atomic_size_t body_bytes;           /* reserved by the bodies in flight */
    atomic_uint_fast64_t read_timeouts; /* connections closed at the read deadline */
    atomic_uint_fast64_t reclaimed;     /* connections closed to make room (reclaim) */
    atomic_uint_fast64_t connections;   /* connections accepted (one TLS handshake each) */
    atomic_llong cert_not_after;        /* of the serving certificate, for /metrics */

    pthread_mutex_t conns_lock; /* guards the list and each entry's life */
    http_conn *conns;

    /* Connections suspended for an asynchronous answer; taken before a
     * http_deferred's own lock. */
    pthread_mutex_t deferred_lock;
    http_deferred *suspended;

    pthread_mutex_t msg_lock; /* guards start_msg */
    bool capture_msg;         /* MHD_start_daemon is running: keep its last message */
    char start_msg[200];

    route routes[HTTP_MAX_ROUTES];
    size_t n_routes;

    /* One daemon per server thread, each on its own SO_REUSEPORT listening
     * socket (http_server_start). */
    struct MHD_Daemon **daemons;
    unsigned n_daemons;
    unsigned port;
    atomic_bool ready;
    atomic_bool draining;
    atomic_uint in_flight;

    pthread_mutex_t creds_lock; /* guards creds (the pointer and its refs++) */
    http_creds *creds;
    pthread_mutex_t reload_lock; /* serialises reloads; guards the signatures */
    file_sig cert_sig, key_sig, ca_sig;

    pthread_t housekeeping_thread;
    bool housekeeping_running;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    bool stop_housekeeping;
};

static void creds_release(http_creds *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    for (unsigned i = 0; i < c->n_pcerts; i++)
        gnutls_pcert_deinit(&c->pcerts[i]);
    gnutls_privkey_deinit(c->key);
    if (c->client_ca)
        gnutls_x509_trust_list_deinit(c->client_ca, 1);
    free(c);
}

static http_creds *creds_acquire(http_server *srv)
{
    pthread_mutex_lock(&srv->creds_lock);
    http_creds *c = srv->creds;
    if (c)
        atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&srv->creds_lock);
    return c;
}

static gq_code read_small_file(const char *path, gnutls_datum_t *out, gq_err *err)
{
    gq_code rc = GQ_OK;
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t len = 0;
    if (!f)
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
    buf = malloc(HTTP_MAX_CERT_FILE + 1);
    if (!buf) {
        rc = gq_err_set(err, GQ_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    len = fread(buf, 1, HTTP_MAX_CERT_FILE + 1, f);
    if (ferror(f)) {
        rc = gq_err_set(err, GQ_EIO, "%s: read failed", path);
        goto out;
    }
    if (len > HTTP_MAX_CERT_FILE) {
        rc = gq_err_set(err, GQ_ELIMIT, "%s: larger than %zu bytes", path, HTTP_MAX_CERT_FILE);
        goto out;
    }
    out->data = buf;
    out->size = (unsigned)len;
    buf = NULL;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* DER of a public key, for comparing the certificate's key with the private
 * key's. Caller frees out->data with gnutls_free. */
static int pubkey_der(gnutls_pubkey_t pk, gnutls_datum_t *out)
{
    return gnutls_pubkey_export2(pk, GNUTLS_X509_FMT_DER, out);
}

/* The validity period of the leaf, for warnings and /metrics. */
static gq_code leaf_validity(http_creds *c, const char *cert_file, gq_err *err)
{
    gnutls_x509_crt_t crt = NULL;
    int ret;
    if ((ret = gnutls_x509_crt_init(&crt)) < 0 ||
        (ret = gnutls_x509_crt_import(crt, &c->pcerts[0].cert, GNUTLS_X509_FMT_DER)) < 0) {
        gnutls_x509_crt_deinit(crt);
        return gq_err_set(err, GQ_ETLS, "%s: cannot read the certificate (%s)", cert_file,
                          gnutls_strerror(ret));
    }
    c->not_before = gnutls_x509_crt_get_activation_time(crt);
    c->not_after = gnutls_x509_crt_get_expiration_time(crt);
    gnutls_x509_crt_deinit(crt);
    return GQ_OK;
}

/* The client CA bundle as a trust list (caller deinits with
 * gnutls_x509_trust_list_deinit(list, 1)). */
static gq_code client_ca_load(const char *path, gnutls_x509_trust_list_t *out, gq_err *err)
{
    gnutls_datum_t pem = {NULL, 0};
    gnutls_x509_trust_list_t tl = NULL;
    gq_code rc = read_small_file(path, &pem, err);
    if (rc)
        return rc;
    int ret = gnutls_x509_trust_list_init(&tl, 0);
    if (ret >= 0)
        ret = gnutls_x509_trust_list_add_trust_mem(tl, &pem, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
    if (ret <= 0) {
        rc = gq_err_set(err, GQ_ETLS, "%s: no usable PEM CA certificate (%s)", path,
                        ret < 0 ? gnutls_strerror(ret) : "none found");
        if (tl)
            gnutls_x509_trust_list_deinit(tl, 1);
    } else {
        *out = tl;
    }
    free(pem.data);
    return rc;
}

/* A certificate whose key does not match would fail every handshake. */
static gq_code key_matches_cert(const http_creds *c, const char *cert_file, const char *key_file,
                                gq_err *err)
{
    gq_code rc = GQ_OK;
    gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
    gnutls_pubkey_t kpub = NULL;
    int ret;
    if ((ret = gnutls_pubkey_init(&kpub)) < 0 ||
        (ret = gnutls_pubkey_import_privkey(kpub, c->key, 0, 0)) < 0 ||
        (ret = pubkey_der(kpub, &a)) < 0 || (ret = pubkey_der(c->pcerts[0].pubkey, &b)) < 0)
        rc = gq_err_set(err, GQ_ETLS, "%s: cannot compare keys (%s)", key_file,
                        gnutls_strerror(ret));
    else if (a.size != b.size || memcmp(a.data, b.data, a.size))
        rc = gq_err_set(err, GQ_ETLS, "%s does not match the private key in %s", cert_file,
                        key_file);
    gnutls_free(a.data);
    gnutls_free(b.data);
    gnutls_pubkey_deinit(kpub);
    return rc;
}

static gq_code creds_load(const char *cert_file, const char *key_file, const char *client_ca_file,
                          http_creds **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    gnutls_datum_t cert = {NULL, 0}, key = {NULL, 0};
    int ret;
    http_creds *c = calloc(1, sizeof(*c));
    if (!c)
        return gq_err_oom(err);
    atomic_init(&c->refs, 1);

    rc = read_small_file(cert_file, &cert, err);
    if (rc)
        goto out;
    rc = read_small_file(key_file, &key, err);
    if (rc)
        goto out;
    c->n_pcerts = HTTP_MAX_CHAIN;
    ret = gnutls_pcert_list_import_x509_raw(c->pcerts, &c->n_pcerts, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (ret < 0 || c->n_pcerts == 0) {
        c->n_pcerts = 0;
        rc = gq_err_set(err, GQ_ETLS, "%s: no usable PEM certificate (%s)", cert_file,
                        ret < 0 ? gnutls_strerror(ret) : "empty");
        goto out;
    }
    if ((ret = gnutls_privkey_init(&c->key)) < 0 ||
        (ret = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        rc = gq_err_set(err, GQ_ETLS, "%s: no usable PEM private key (%s)", key_file,
                        gnutls_strerror(ret));
        goto out;
    }
    if ((rc = key_matches_cert(c, cert_file, key_file, err)) ||
        (rc = leaf_validity(c, cert_file, err)) ||
        (client_ca_file && (rc = client_ca_load(client_ca_file, &c->client_ca, err))))
        goto out;
    *out = c;
    c = NULL;
out:
    if (key.data)
        gnutls_memset(key.data, 0, key.size);
    free(key.data);
    free(cert.data);
    creds_release(c);
    return rc;
}

static file_sig sig_of(const char *path)
{
    file_sig s = {0};
    struct stat st;
    if (stat(path, &st) == 0) { /* follows the ..data symlinks of Secret volumes */
        s.dev = st.st_dev;
        s.ino = st.st_ino;
        s.size = st.st_size;
        s.mtime = st.st_mtim;
        s.valid = true;
    }
    return s;
}

static bool sig_equal(const file_sig *a, const file_sig *b)
{
    return a->valid == b->valid && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Say what was loaded; warn when clients will refuse it. Start and every
 * reload. */
static void log_validity(const http_server *srv, const http_creds *c, bool reload)
{
    char nb[GQ_RFC3339_MAX], na[GQ_RFC3339_MAX];
    time_t now = time(NULL);
    gq_time_format_rfc3339(c->not_before, nb);
    gq_time_format_rfc3339(c->not_after, na);
    GQ_INFO("%s TLS certificate from %s (notBefore %s, notAfter %s)",
            reload ? "reloaded" : "loaded", srv->cert_file, nb, na);
    if (now < c->not_before || now > c->not_after)
        GQ_WARN("TLS certificate %s %s (notBefore %s, notAfter %s): clients will refuse it",
                srv->cert_file, now < c->not_before ? "is not valid yet" : "has expired", nb, na);
}

gq_code http_server_reload_certs(http_server *srv, gq_err *err)
{
    gq_code rc = GQ_OK;
    http_creds *fresh = NULL, *old = NULL;
    if (srv->plain)
        return GQ_OK;
    pthread_mutex_lock(&srv->reload_lock);
    file_sig cs = sig_of(srv->cert_file), ks = sig_of(srv->key_file);
    file_sig as = srv->client_ca_file ? sig_of(srv->client_ca_file) : (file_sig){0};
    /* At start always load: missing files must fail, not match the empty
     * signatures of "never loaded". */
    if (srv->creds && sig_equal(&cs, &srv->cert_sig) && sig_equal(&ks, &srv->key_sig) &&
        sig_equal(&as, &srv->ca_sig))
        goto out;
    /* Remember the signatures even when loading fails: a broken pair is
     * reported once, and the next change (e.g. the second file of a
     * non-atomic update landing) triggers a new attempt. */
    srv->cert_sig = cs;
    srv->key_sig = ks;
    srv->ca_sig = as;
    rc = creds_load(srv->cert_file, srv->key_file, srv->client_ca_file, &fresh, err);
    if (rc) {
        if (srv->creds) /* at start-up the caller reports it */
            GQ_ERROR("certificate reload failed, keeping the previous certificate: %s",
                     err ? err->msg : gq_strerror(rc));
        goto out;
    }
    log_validity(srv, fresh, srv->creds != NULL);
    atomic_store(&srv->cert_not_after, (long long)fresh->not_after);
    pthread_mutex_lock(&srv->creds_lock);
    old = srv->creds;
    srv->creds = fresh;
    pthread_mutex_unlock(&srv->creds_lock);
    creds_release(old);
out:
    pthread_mutex_unlock(&srv->reload_lock);
    return rc;
}

/* --------------------------------------------------------- connections */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "127.0.0.1:54321" or "[::1]:54321"; "" for other families. */
static void sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN];
    buf[0] = '\0';
    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)sa;
        if (inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host)))
            snprintf(buf, cap, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        if (inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)))
            snprintf(buf, cap, "[%s]:%u", host, ntohs(in6->sin6_port));
    }
}

static void format_addr(struct MHD_Connection *conn, char *buf, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    sockaddr_text(ci ? ci->client_addr : NULL, buf, cap);
}

static http_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static bool tcp_bytes_received(int fd, uint64_t *out);

/* GnuTLS calls this after each handshake message; the client's Finished
 * ends its part of the handshake. From then until the first request's
 * bytes arrive the connection is idle, as between keep-alive requests: Go
 * clients such as kube-apiserver keep a connection they dialled and then
 * did not need in their pool, and closing it at the read deadline fails
 * the first request later sent on it with EOF, which Go does not retry on
 * a connection never used. The baseline is the bytes TLS has read so far
 * (received less still queued): whatever follows the handshake, even in
 * the same segment, starts the request's clock at the next sweep. */
static int handshake_done(gnutls_session_t ses, unsigned htype, unsigned when, unsigned incoming,
                          const gnutls_datum_t *msg)
{
    (void)htype;
    (void)when;
    (void)msg;
    http_conn *c = incoming ? conn_of(gnutls_session_get_ptr(ses)) : NULL;
    uint64_t bytes;
    int unread = 0;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    if (!c->handshaken && c->phase == CONN_RECEIVING && tcp_bytes_received(c->fd, &bytes) &&
        ioctl(c->fd, FIONREAD, &unread) == 0 && unread >= 0 && (uint64_t)unread <= bytes) {
        c->phase = CONN_IDLE;
        c->since_ms = mono_ms();
        c->baseline = bytes - (uint64_t)unread;
        c->have_baseline = true;
    }
    c->handshaken = true;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* Connection accepted: track it for the read deadline, reference the
 * current credentials and, with client certificates, ask for one. NULL on
 * out-of-memory: a TLS handshake then fails (no certificate to offer), a
 * plain connection goes untracked. */
static http_conn *conn_open(http_server *srv, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    http_conn *c = calloc(1, sizeof(*c));
    if (!c || !fd || pthread_mutex_init(&c->lock, NULL)) {
        free(c);
        return NULL;
    }
    c->fd = fd->connect_fd;
    c->phase = CONN_RECEIVING; /* the first request's clock includes the handshake */
    c->since_ms = mono_ms();
    format_addr(conn, c->peer, sizeof(c->peer));
    const char *colon = strrchr(c->peer, ':');
    c->addr_len = colon ? (size_t)(colon - c->peer) : strlen(c->peer);
    const union MHD_ConnectionInfo *di = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
    c->daemon = srv->n_daemons;
    for (unsigned i = 0; di && i < srv->n_daemons; i++)
        if (srv->daemons[i] == di->daemon)
            c->daemon = i;
    if (!srv->plain) {
        c->creds = creds_acquire(srv);
        const union MHD_ConnectionInfo *ti =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (ti)
            gnutls_handshake_set_hook_function(ti->tls_session, GNUTLS_HANDSHAKE_FINISHED,
                                               GNUTLS_HOOK_POST, handshake_done);
        if (srv->client_ca_file && ti) {
            gnutls_session_t ses = ti->tls_session;
            /* Ask, never require: kubelet probes and scrapers have no
             * certificate (routes decide). Name no CAs: a Go client would
             * withhold a certificate its issuer is not named for, so a CA
             * rotated on one side only would fail without a trace. */
            gnutls_certificate_server_set_request(ses, GNUTLS_CERT_REQUEST);
            gnutls_certificate_send_x509_rdn_sequence(ses, 1);
        }
    }
    pthread_mutex_lock(&srv->conns_lock);
    c->next = srv->conns;
    if (c->next)
        c->next->prev = c;
    srv->conns = c;
    pthread_mutex_unlock(&srv->conns_lock);
    return c;
}

/* MHD calls this before it closes the socket, so the sweeper, which shuts
 * sockets down under conns_lock, never touches a descriptor number that
 * has been reused. */
static void conn_close(http_server *srv, http_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&srv->conns_lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&srv->conns_lock);
    creds_release(c->creds);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Phase changes seen by the connection's thread. RECEIVING only starts a
 * clock from IDLE: the first request's clock runs from accept. */
static void conn_set_phase(http_conn *c, conn_phase phase)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    if (phase != CONN_RECEIVING) {
        if (phase == CONN_IDLE && c->phase != CONN_IDLE)
            c->since_ms = mono_ms();
        c->phase = phase;
        c->have_baseline = false;
    } else if (c->phase == CONN_IDLE) {
        c->phase = phase;
        c->since_ms = mono_ms();
    }
    pthread_mutex_unlock(&c->lock);
}

/* Hold a TLS reply's records until the request completes (see
 * body_response). A failure only costs a packet. */
static void conn_cork(const http_server *srv, http_conn *c)
{
    int on = 1;
    if (!c || srv->plain || c->corked)
        return;
    c->corked = setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)) == 0;
}

static void conn_uncork(http_conn *c)
{
    int off = 0;
    if (!c || !c->corked)
        return;
    c->corked = false;
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
}

/* Bytes the peer has sent on a TCP socket so far (Linux 4.1+). */
static bool tcp_bytes_received(int fd, uint64_t *out)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
        return false;
    *out = ti.tcpi_bytes_received;
    return true;
}

/* One connection against the read deadline (c->lock held). True when it
 * was closed now. */
static bool conn_check(const http_server *srv, http_conn *c, int64_t now)
{
    uint64_t bytes;
    if (c->dropped)
        return false;
    if (c->phase == CONN_IDLE && tcp_bytes_received(c->fd, &bytes)) {
        /* libmicrohttpd says nothing of a request until its headers are
         * complete; bytes arriving after the previous request start the
         * next one's clock, so trickled headers cannot escape it. */
        if (!c->have_baseline) {
            c->baseline = bytes;
            c->have_baseline = true;
        } else if (bytes != c->baseline) {
            c->phase = CONN_RECEIVING;
            c->since_ms = now;
        }
        return false;
    }
    if (c->phase != CONN_RECEIVING || now - c->since_ms < (int64_t)srv->read_timeout_s * 1000)
        return false;
    /* Not close(): the descriptor stays libmicrohttpd's. Its next read
     * sees the end of the stream and it closes the connection as usual. */
    if (shutdown(c->fd, SHUT_RDWR))
        return false;
    c->dropped = true;
    return true;
}

static unsigned limit_share(unsigned total, unsigned n, unsigned i);

/* A candidate for reclaim, and how many connections its address holds on
 * its daemon. */
typedef struct reclaim_cand {
    http_conn *c;
    unsigned addr_conns;
    int64_t since_ms;
} reclaim_cand;

static int by_addr(const void *a, const void *b)
{
    const http_conn *x = ((const reclaim_cand *)a)->c, *y = ((const reclaim_cand *)b)->c;
    size_t n = x->addr_len < y->addr_len ? x->addr_len : y->addr_len;
    int d = memcmp(x->peer, y->peer, n);
    return d ? d : (x->addr_len > y->addr_len) - (x->addr_len < y->addr_len);
}

/* The address holding the most connections first, then the longest in
 * its phase: an attacker's many idle or half-open connections go before
 * kube-apiserver's few, busy ones. */
static int by_victim(const void *a, const void *b)
{
    const reclaim_cand *x = a, *y = b;
    if (x->addr_conns != y->addr_conns)
        return x->addr_conns > y->addr_conns ? -1 : 1;
    return (x->since_ms > y->since_ms) - (x->since_ms < y->since_ms);
}

/* Reclaim on daemon d (conns_lock held) when its connections reach the
 * high-water mark (its share of --max-connections less 1/16): close
 * connections that are idle between requests or still receiving one, at
 * least HTTP_RECLAIM_MIN_AGE_MS in that phase, down to the low-water mark
 * (less 1/8). Never a connection whose request is being served. Without
 * it a full daemon stopped accepting: kube-apiserver's new connections and
 * kubelet's probes waited in the listen backlog behind the flood until
 * read deadlines (half-open) or the 120 s idle timeout (idle keep-alive)
 * freed a slot. Returns how many it closed; *first gets one's peer. */
static unsigned reclaim_daemon(http_server *srv, unsigned d, unsigned held, int64_t now,
                               reclaim_cand *cand, char *first, size_t first_cap)
{
    unsigned limit = limit_share(srv->max_connections, srv->n_daemons, d);
    unsigned margin = limit / 16 ? limit / 16 : 1;
    if (held + margin < limit || limit <= 2 * margin)
        return 0;
    size_t n = 0;
    for (http_conn *c = srv->conns; c; c = c->next) {
        if (c->daemon != d)
            continue;
        pthread_mutex_lock(&c->lock);
        bool idle = c->phase != CONN_SERVING && !c->dropped;
        int64_t since = c->since_ms;
        pthread_mutex_unlock(&c->lock);
        /* every connection of the daemon counts for its address; only
         * those not being served are candidates */
        cand[n++] = (reclaim_cand){c, idle && now - since >= HTTP_RECLAIM_MIN_AGE_MS, since};
    }
    qsort(cand, n, sizeof(*cand), by_addr);
    size_t m = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && !by_addr(&cand[i], &cand[j]); j++) {
        }
        for (size_t k = i; k < j; k++)
            if (cand[k].addr_conns) /* a candidate: keep it, with its address's count */
                cand[m++] = (reclaim_cand){cand[k].c, (unsigned)(j - i), cand[k].since_ms};
    }
    qsort(cand, m, sizeof(*cand), by_victim);
    unsigned want = held - (limit - 2 * margin), closed = 0;
    for (size_t i = 0; i < m && closed < want; i++) {
        http_conn *c = cand[i].c;
        pthread_mutex_lock(&c->lock);
        if (c->phase != CONN_SERVING && !c->dropped && !shutdown(c->fd, SHUT_RDWR)) {
            c->dropped = true;
            if (!closed && first[0] == '\0')
                snprintf(first, first_cap, "%s", c->peer);
            closed++;
        }
        pthread_mutex_unlock(&c->lock);
    }
    return closed;
}

/* Make room on every daemon at its high-water mark (reclaim_daemon). */
static void reclaim(http_server *srv, int64_t now)
{
    unsigned total = 0, closed = 0, nd = srv->n_daemons;
    char first[sizeof(((http_conn *)NULL)->peer)] = "";
    unsigned *held = calloc(nd ? nd : 1, sizeof(*held));
    if (!held)
        return; /* tried again at the next sweep */
    for (http_conn *c = srv->conns; c; c = c->next) {
        if (c->daemon < nd && !c->dropped)
            held[c->daemon]++;
        total++;
    }
    reclaim_cand *cand = NULL;
    for (unsigned d = 0; d < nd; d++) {
        unsigned limit = limit_share(srv->max_connections, srv->n_daemons, d);
        if (held[d] + limit / 16 < limit)
            continue;
        if (!cand && !(cand = malloc((total ? total : 1) * sizeof(*cand))))
            break; /* tried again at the next sweep */
        closed += reclaim_daemon(srv, d, held[d], now, cand, first, sizeof first);
    }
    free(cand);
    free(held);
    if (!closed)
        return;
    atomic_fetch_add(&srv->reclaimed, closed);
    GQ_WARN("connections at the limit: closed %u idle or incomplete connection(s) to make room "
            "(first: %s)",
            closed, first[0] ? first : "unknown peer");
}

/* Close the connections whose request did not arrive whole in time. */
static void sweep_connections(http_server *srv)
{
    unsigned dropped = 0;
    char first[sizeof(((http_conn *)NULL)->peer)] = "";
    int64_t now = mono_ms();
    pthread_mutex_lock(&srv->conns_lock);
    for (http_conn *c = srv->conns; c; c = c->next) {
        pthread_mutex_lock(&c->lock);
        if (conn_check(srv, c, now) && !dropped++)
            memcpy(first, c->peer, sizeof(first));
        pthread_mutex_unlock(&c->lock);
    }
    reclaim(srv, now);
    pthread_mutex_unlock(&srv->conns_lock);
    if (!dropped)
        return;
    atomic_fetch_add(&srv->read_timeouts, dropped);
    /* One line per sweep, however many: slow peers must not flood the log. */
    GQ_WARN("closed %u connection(s) that did not send a whole request within %u s (first: %s)",
            dropped, srv->read_timeout_s, first[0] ? first : "unknown peer");
}

/* Wakes every HTTP_SWEEP_MS to enforce the read deadline, and polls the
 * certificate files every reload_interval_ms. */
static void *housekeeping_main(void *arg)
{
    http_server *srv = arg;
    unsigned tick =
        srv->reload_interval_ms < HTTP_SWEEP_MS ? srv->reload_interval_ms : HTTP_SWEEP_MS;
    int64_t next_reload = mono_ms() + srv->reload_interval_ms;
    pthread_mutex_lock(&srv->stop_lock);
    while (!srv->stop_housekeeping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += tick / 1000;
        ts.tv_nsec += (long)(tick % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->stop_cond, &srv->stop_lock, &ts);
        if (srv->stop_housekeeping)
            break;
        pthread_mutex_unlock(&srv->stop_lock);
        sweep_connections(srv);
        if (!srv->plain && mono_ms() >= next_reload) {
            gq_err err;
            gq_err_clear(&err);
            /* Failures are logged inside and the old certificate stays. */
            bool failed = http_server_reload_certs(srv, &err) != GQ_OK;
            (void)failed;
            next_reload = mono_ms() + srv->reload_interval_ms;
        }
        pthread_mutex_lock(&srv->stop_lock);
    }
    pthread_mutex_unlock(&srv->stop_lock);
    return NULL;
}

/* GnuTLS asks for the certificate during each handshake. MHD sets the
 * session pointer to the connection; the connection's socket context holds
 * the credentials referenced when it was accepted. */
static int cert_callback(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                         gnutls_pcert_st **pcert, unsigned int *pcert_length,
                         gnutls_privkey_t *privkey)
{
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    http_conn *wc = conn ? conn_of(conn) : NULL;
    http_creds *c = wc ? wc->creds : NULL;
    if (!c)
        return -1;
    *pcert = c->pcerts;
    *pcert_length = c->n_pcerts;
    *privkey = c->key;
    return 0;
}

static void notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
    http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add_explicit(&srv->connections, 1, memory_order_relaxed);
        *socket_context = conn_open(srv, conn);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_close(srv, *socket_context);
        *socket_context = NULL;
    }
}

/* ------------------------------------------------------ client certificates */

/* Whether the peer's certificate chains to the client CA with the
 * clientAuth purpose (and its CN is allowed); why not, in why. */
static bool verify_client(const http_server *srv, gnutls_x509_trust_list_t ca, gnutls_session_t ses,
                          char *why, size_t cap)
{
    unsigned n = 0, k = 0, status = 0;
    const gnutls_datum_t *peers = ses ? gnutls_certificate_get_peers(ses, &n) : NULL;
    gnutls_x509_crt_t chain[HTTP_MAX_CHAIN];
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (void *)GNUTLS_KP_TLS_WWW_CLIENT};
    bool ok = false;
    int ret = 0;
    if (!peers || !n) {
        snprintf(why, cap, "none presented");
        return false;
    }
    for (n = n < HTTP_MAX_CHAIN ? n : HTTP_MAX_CHAIN; k < n; k++) {
        if ((ret = gnutls_x509_crt_init(&chain[k])) < 0)
            break;
        if ((ret = gnutls_x509_crt_import(chain[k], &peers[k], GNUTLS_X509_FMT_DER)) < 0) {
            k++;
            break;
        }
    }
    if (ret >= 0)
        ret = gnutls_x509_trust_list_verify_crt2(ca, chain, k, &purpose, 1, 0, &status, NULL);
    if (ret < 0) {
        snprintf(why, cap, "%s", gnutls_strerror(ret));
    } else if (status) {
        gnutls_datum_t txt = {NULL, 0};
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0) >= 0) {
            snprintf(why, cap, "%s", (const char *)txt.data);
            for (size_t n_why = strlen(why); n_why && why[n_why - 1] == ' ';)
                why[--n_why] = '\0'; /* GnuTLS ends each sentence with a space */
        } else
            snprintf(why, cap, "not trusted (status 0x%x)", status);
        gnutls_free(txt.data);
    } else if (srv->n_client_cns) {
        char cn[256];
        size_t len = sizeof(cn);
        if (gnutls_x509_crt_get_dn_by_oid(chain[0], GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &len))
            cn[0] = '\0';
        for (size_t i = 0; i < srv->n_client_cns && !ok; i++)
            ok = !strcmp(cn, srv->client_cns[i]);
        if (!ok)
            snprintf(why, cap, "CN \"%.64s\" is not an allowed client", cn);
    } else {
        ok = true;
    }
    while (k)
        gnutls_x509_crt_deinit(chain[--k]);
    return ok;
}

/* NULL when the client may use POST routes (or nothing is required), else
 * why not. Checked once per connection: its peer certificate cannot change
 * (no renegotiation, no post-handshake authentication is asked). */
static const char *client_rejected(const http_server *srv, struct MHD_Connection *conn,
                                   http_conn *c)
{
    if (!srv->client_ca_file)
        return NULL;
    if (!c || !c->creds || !c->creds->client_ca)
        return "no client CA loaded";
    if (!c->auth) {
        const union MHD_ConnectionInfo *ti =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        c->auth = verify_client(srv, c->creds->client_ca, ti ? ti->tls_session : NULL,
                                c->auth_error, sizeof(c->auth_error))
                      ? 1
                      : -1;
    }
    return c->auth > 0 ? NULL : c->auth_error;
}

/* ------------------------------------------------------------------ server */

static void handle_healthz(void *ctx, const http_request *req, http_response *resp)
{
    if (http_response_set_body(resp, 200, "text/plain; charset=utf-8", "ok", 2))
        http_response_error(resp, 500, "out of memory");
}

static void handle_readyz(void *ctx, const http_request *req, http_response *resp)
{
    http_server *srv = ctx;
    if (!atomic_load(&srv->ready)) {
        /* Not an access error: a plain-text 503 that is not counted. */
        if (http_response_set_body(resp, 503, "text/plain; charset=utf-8", "not ready", 9))
            http_response_error(resp, 500, "out of memory");
        return;
    }
    if (http_response_set_body(resp, 200, "text/plain; charset=utf-8", "ok", 2))
        http_response_error(resp, 500, "out of memory");
}

static void handle_metrics(void *ctx, const http_request *req, http_response *resp)
{
    http_server *srv = ctx;
    char *text = NULL;
    size_t len = 0;
    if (http_metrics_render(srv->metrics, &text, &len)) {
        http_response_error(resp, 500, "out of memory rendering metrics");
        return;
    }
    http_response_take_body(resp, 200, HTTP_METRICS_CONTENT_TYPE, text, len);
}

static double read_cert_expiry(const void *ctx)
{
    return (double)atomic_load(&((http_server *)ctx)->cert_not_after);
}

static double read_body_bytes(const void *ctx)
{
    return (double)atomic_load(&((http_server *)ctx)->body_bytes);
}

static uint64_t read_timeouts(const void *ctx)
{
    return atomic_load(&((http_server *)ctx)->read_timeouts);
}

static uint64_t reclaimed(const void *ctx)
{
    return atomic_load(&((http_server *)ctx)->reclaimed);
}

static uint64_t connections(const void *ctx)
{
    return atomic_load(&((http_server *)ctx)->connections);
}

/* The server's own families. The registry calls back into srv: it must
 * not be rendered after http_server_free (the server serves /metrics). */
static gq_code register_metrics(http_server *srv, gq_err *err)
{
    gq_code rc = GQ_OK;
    if (!srv->metrics)
        return GQ_OK;
    if ((!srv->plain && (rc = http_metrics_add_external_gauge(
                             srv->metrics, "gpuquota_tls_certificate_expiry_timestamp_seconds",
                             "When the serving certificate expires (notAfter), in Unix seconds.",
                             read_cert_expiry, srv))) ||
        (rc = http_metrics_add_external_gauge(srv->metrics, "gpuquota_http_body_bytes_in_flight",
                                              "Bytes of request bodies buffered now (reserved).",
                                              read_body_bytes, srv)) ||
        (rc = http_metrics_add_external_counter(
             srv->metrics, "gpuquota_http_read_timeouts_total",
             "Connections closed because a request did not arrive whole in time.", read_timeouts,
             srv)) ||
        (rc = http_metrics_add_external_counter(
             srv->metrics, "gpuquota_http_connections_reclaimed_total",
             "Idle or incomplete connections closed because the server was at its connection "
             "limit.",
             reclaimed, srv)) ||
        (rc = http_metrics_add_external_counter(srv->metrics, "gpuquota_http_connections_total",
                                                "Connections accepted (a TLS handshake each).",
                                                connections, srv)))
        return gq_err_set(err, rc, "server metrics: %s", gq_strerror(rc));
    return GQ_OK;
}

/* Limits and client certificate options: defaults filled in, checked. */
static gq_code set_limits(http_server *srv, const http_server_options *o, gq_err *err)
{
    srv->idle_timeout_s = o->idle_timeout_s ? o->idle_timeout_s : HTTP_IDLE_TIMEOUT_DEFAULT;
    srv->read_timeout_s = o->read_timeout_s ? o->read_timeout_s : HTTP_READ_TIMEOUT_DEFAULT;
    srv->max_body = o->max_body ? o->max_body : HTTP_MAX_BODY_DEFAULT;
    srv->max_body_memory = o->max_body_memory ? o->max_body_memory : HTTP_MAX_BODY_MEMORY_DEFAULT;
    srv->max_connections = o->max_connections ? o->max_connections : HTTP_MAX_CONNECTIONS_DEFAULT;
    srv->max_connections_per_ip = o->max_connections_per_ip;
    if (!srv->max_connections_per_ip) {
        unsigned quarter = srv->max_connections / 4 ? srv->max_connections / 4 : 1;
        srv->max_connections_per_ip = quarter < HTTP_MAX_CONNECTIONS_PER_IP_DEFAULT
                                          ? quarter
                                          : HTTP_MAX_CONNECTIONS_PER_IP_DEFAULT;
    }
    srv->reload_interval_ms = o->reload_interval_ms ? o->reload_interval_ms : 1000;
    if (srv->max_body_memory < srv->max_body)
        return gq_err_set(err, GQ_EINVAL,
                          "the memory for request bodies (%zu bytes) is below one body (%zu)",
                          srv->max_body_memory, srv->max_body);
    if (srv->max_connections_per_ip > srv->max_connections)
        return gq_err_set(err, GQ_EINVAL, "connections per IP (%u) exceed all connections (%u)",
                          srv->max_connections_per_ip, srv->max_connections);
    if (o->n_client_cns > HTTP_MAX_CLIENT_CNS)
        return gq_err_set(err, GQ_ELIMIT, "at most %d client CNs", HTTP_MAX_CLIENT_CNS);
    if (o->client_ca_file && o->insecure_plain_http)
        return gq_err_set(err, GQ_EINVAL, "client certificates need TLS");
    if (o->n_client_cns && !o->client_ca_file)
        return gq_err_set(err, GQ_EINVAL, "allowed client CNs need a client CA");
    if (o->client_ca_file && !(srv->client_ca_file = strdup(o->client_ca_file)))
        return gq_err_oom(err);
    for (size_t i = 0; i < o->n_client_cns; i++) {
        if (!(srv->client_cns[i] = strdup(o->client_cns[i])))
            return gq_err_oom(err);
        srv->n_client_cns++;
    }
    return GQ_OK;
}

gq_code http_server_new(const http_server_options *opts, http_server **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    http_server *srv = NULL;
    if (!opts || !opts->listen)
        return gq_err_set(err, GQ_EINVAL, "listen address is required");
    if (!opts->insecure_plain_http && (!opts->cert_file || !opts->key_file))
        return gq_err_set(err, GQ_EINVAL, "a TLS certificate and key are required");
    srv = calloc(1, sizeof(*srv));
    if (!srv)
        return gq_err_oom(err);
    pthread_mutex_init(&srv->creds_lock, NULL);
    pthread_mutex_init(&srv->reload_lock, NULL);
    pthread_mutex_init(&srv->stop_lock, NULL);
    pthread_mutex_init(&srv->conns_lock, NULL);
    pthread_mutex_init(&srv->deferred_lock, NULL);
    pthread_mutex_init(&srv->msg_lock, NULL);
    pthread_cond_init(&srv->stop_cond, NULL);
    srv->plain = opts->insecure_plain_http;
    srv->listen = strdup(opts->listen);
    srv->cert_file = opts->cert_file ? strdup(opts->cert_file) : NULL;
    srv->key_file = opts->key_file ? strdup(opts->key_file) : NULL;
    srv->version = strdup(opts->version ? opts->version : "");
    if (!srv->listen || !srv->version || (opts->cert_file && !srv->cert_file) ||
        (opts->key_file && !srv->key_file)) {
        rc = gq_err_oom(err);
        goto out;
    }
    if (opts->threads) {
        srv->threads = opts->threads;
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        srv->threads =
            n > 0 ? (unsigned)(n < HTTP_THREADS_DEFAULT_MAX ? n : HTTP_THREADS_DEFAULT_MAX) : 1;
    }
    srv->metrics = opts->metrics;
    if ((rc = set_limits(srv, opts, err)))
        goto out;
    rc = http_server_add_handler(srv, "/healthz", HTTP_ROUTE_GET, handle_healthz, srv, err);
    if (!rc)
        rc = http_server_add_handler(srv, "/readyz", HTTP_ROUTE_GET, handle_readyz, srv, err);
    if (!rc && srv->metrics)
        rc = http_server_add_handler(srv, "/metrics", HTTP_ROUTE_GET, handle_metrics, srv, err);
    if (!rc && !srv->plain)
        rc = http_server_reload_certs(srv, err);
    if (!rc)
        rc = register_metrics(srv, err);
    if (rc)
        goto out;
    *out = srv;
    srv = NULL;
out:
    http_server_free(srv);
    return rc;
}

static gq_code add_route(http_server *srv, const char *path, http_route_kind kind,
                         http_handler_fn fn, http_async_handler_fn afn, void *ctx, gq_err *err)
{
    if (srv->n_daemons)
        return gq_err_set(err, GQ_EINVAL, "handlers must be added before the server starts");
    if (!path || path[0] != '/' || strlen(path) >= HTTP_MAX_PATH || (!fn && !afn) ||
        (kind != HTTP_ROUTE_GET && kind != HTTP_ROUTE_POST_JSON))
        return gq_err_set(err, GQ_EINVAL, "bad handler registration for %s",
                          path ? path : "(null)");
    for (size_t i = 0; i < srv->n_routes; i++)
        if (!strcmp(srv->routes[i].path, path))
            return gq_err_set(err, GQ_EEXISTS, "a handler for %s is already registered", path);
    if (srv->n_routes >= HTTP_MAX_ROUTES)
        return gq_err_set(err, GQ_ELIMIT, "too many handlers");
    route *r = &srv->routes[srv->n_routes++];
    gq_copy_trunc(r->path, sizeof(r->path), path);
    r->kind = kind;
    r->fn = fn;
    r->afn = afn;
    r->ctx = ctx;
    return GQ_OK;
}

gq_code http_server_add_handler(http_server *srv, const char *path, http_route_kind kind,
                                http_handler_fn fn, void *ctx, gq_err *err)
{
    return add_route(srv, path, kind, fn, NULL, ctx, err);
}

gq_code http_server_add_async_handler(http_server *srv, const char *path, http_route_kind kind,
                                      http_async_handler_fn fn, void *ctx, gq_err *err)
{
    return add_route(srv, path, kind, NULL, fn, ctx, err);
}

/* ---------------------------------------------------- asynchronous answers */

static http_deferred *deferred_new(struct MHD_Connection *conn)
{
    http_deferred *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    atomic_init(&d->refs, 2);
    http_response_init(&d->resp);
    d->conn = conn;
    return d;
}

static void deferred_unref(http_deferred *d)
{
    if (atomic_fetch_sub(&d->refs, 1) != 1)
        return;
    http_response_dispose(&d->resp);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

void http_deferred_finish(http_deferred *d, http_response *resp)
{
    pthread_mutex_lock(&d->mu);
    if (!d->answered) {
        d->resp = *resp;
        http_response_init(resp);
        d->answered = true;
        /* Safe from any thread; libmicrohttpd's ITC wakes the connection's
         * thread, which calls access_handler again to send it. */
        if (d->suspended)
            MHD_resume_connection(d->conn);
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    http_response_dispose(resp);
    deferred_unref(d);
}

/* The answer, once given (the server's reference is dropped). */
static void deferred_take(http_deferred *d, http_response *resp)
{
    pthread_mutex_lock(&d->mu);
    while (!d->answered)
        pthread_cond_wait(&d->cv, &d->mu);
    *resp = d->resp;
    http_response_init(&d->resp);
    pthread_mutex_unlock(&d->mu);
    deferred_unref(d);
}

/* Run an asynchronous handler; *later is the pending answer when it kept
 * one (NULL when resp holds the answer). */
static void run_async(const route *r, const http_request *req, http_response *resp,
                      struct MHD_Connection *conn, http_deferred **later)
{
    *later = NULL;
    http_deferred *d = deferred_new(conn);
    if (!d) {
        http_response_error(resp, 500, "out of memory");
        return;
    }
    if (r->afn(r->ctx, req, resp, d)) {
        *later = d;
        return;
    }
    deferred_unref(d); /* never kept: both references go */
    deferred_unref(d);
}

unsigned http_server_port(const http_server *srv)
{
    return srv ? srv->port : 0;
}

void http_server_set_ready(http_server *srv, bool ready)
{
    atomic_store(&srv->ready, ready);
}

bool http_server_is_ready(const http_server *srv)
{
    return atomic_load(&((http_server *)srv)->ready);
}

/* "application/json", any case, optionally followed by parameters. */
static bool is_json(const char *ct)
{
    static const char want[] = "application/json";
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, want, sizeof(want) - 1))
        return false;
    ct += sizeof(want) - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

static const route *find_route(const http_server *srv, const char *path)
{
    for (size_t i = 0; i < srv->n_routes; i++)
        if (!strcmp(srv->routes[i].path, path))
            return &srv->routes[i];
    return NULL;
}

/* Everything that can be decided from the request line and headers.
 * body_len is the declared length (SIZE_MAX when unknown). Returns the
 * route, or NULL with resp filled with the error. */
static const route *check_request(const http_server *srv, const char *method, const char *path,
                                  const char *content_type, size_t body_len,
                                  const char *client_rejected, http_response *resp)
{
    const route *r = find_route(srv, path);
    if (!r) {
        http_response_error(resp, 404, "no handler for this path");
        return NULL;
    }
    if (r->kind == HTTP_ROUTE_GET) {
        if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
            http_response_error(resp, 405, "method %.16s not allowed; use GET", method);
            if (http_response_add_header(resp, "Allow", "GET, HEAD"))
                return NULL; /* cannot happen: the error reply has no headers yet */
            return NULL;
        }
        return r;
    }
    if (strcmp(method, "POST")) {
        http_response_error(resp, 405, "method %.16s not allowed; use POST", method);
        if (http_response_add_header(resp, "Allow", "POST"))
            return NULL; /* cannot happen: the error reply has no headers yet */
        return NULL;
    }
    if (client_rejected) {
        http_response_error(resp, 403, "client certificate not accepted: %s", client_rejected);
        return NULL;
    }
    if (!is_json(content_type)) {
        http_response_error(resp, 415, "content type %.64s not supported; use application/json",
                            content_type ? content_type : "(none)");
        return NULL;
    }
    if (body_len != SIZE_MAX && body_len > srv->max_body) {
        http_response_error(resp, 413, "request body exceeds %zu bytes", srv->max_body);
        return NULL;
    }
    return r;
}

static void check_answer(const route *r, http_response *resp)
{
    if (resp->status < 100 || resp->status > 599) {
        http_response_dispose(resp);
        http_response_error(resp, 500, "handler for %s produced no response", r->path);
    }
}

static void run_handler(const route *r, const http_request *req, http_response *resp)
{
    http_deferred *later = NULL;
    if (r->afn)
        run_async(r, req, resp, NULL, &later);
    else
        r->fn(r->ctx, req, resp);
    if (later)
        deferred_take(later, resp);
    check_answer(r, resp);
}

/* The one place where error replies are counted and logged. */
static void account(http_server *srv, const http_request *req, const http_response *resp)
{
    if (resp->status < 400 || (resp->status == 503 && !resp->error[0]))
        return;
    http_metrics_inc_http_error(srv->metrics, resp->status);
    GQ_LOG(resp->status >= 500 ? GQ_LOG_ERROR : GQ_LOG_WARN, resp->uid[0] ? resp->uid : NULL,
           "HTTP %d for %.16s %.64s from %s: %s", resp->status, req->method, req->path,
           req->remote_addr ? req->remote_addr : "", resp->error[0] ? resp->error : "error");
}

void http_server_dispatch(http_server *srv, const http_request *req, http_response *resp)
{
    const route *r = check_request(srv, req->method, req->path, req->content_type, req->body_len,
                                   req->client_rejected, resp);
    if (r)
        run_handler(r, req, resp);
    account(srv, req, resp);
}

/* -------------------------------------------------------------- MHD glue */

typedef struct req_state {
    const route *route;
    http_deferred *later; /* suspended for an asynchronous answer */
    char *body;
    size_t len, cap;
    size_t reserved; /* bytes of the body budget held */
    bool fixed;      /* length declared: reserved whole at the first call */
    bool too_large;
    bool over_budget;
} req_state;

/* Reserve n bytes of the memory all bodies in flight share; false when it
 * would run over. */
static bool budget_take(http_server *srv, size_t n)
{
    size_t cur = atomic_load_explicit(&srv->body_bytes, memory_order_relaxed);
    do {
        if (n > srv->max_body_memory - cur)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&srv->body_bytes, &cur, cur + n,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

static void body_free(http_server *srv, req_state *st)
{
    free(st->body);
    atomic_fetch_sub_explicit(&srv->body_bytes, st->reserved, memory_order_relaxed);
    st->body = NULL;
    st->len = st->cap = st->reserved = 0;
}

/* Room for n more bytes and a NUL. A declared length was reserved whole;
 * chunked bodies reserve as they grow. GQ_ELIMIT when the budget is spent. */
static gq_code body_grow(http_server *srv, req_state *st, size_t n)
{
    size_t cap = st->cap ? st->cap : 16384;
    size_t most = (st->fixed ? st->reserved : srv->max_body) + 1;
    while (cap < st->len + n + 1)
        cap *= 2;
    if (cap > most)
        cap = most;
    if (!st->fixed && cap > st->reserved) {
        if (!budget_take(srv, cap - st->reserved))
            return GQ_ELIMIT;
        st->reserved = cap;
    }
    char *nb = realloc(st->body, cap);
    if (!nb)
        return GQ_ENOMEM;
    st->body = nb;
    st->cap = cap;
    return GQ_OK;
}

/* The one reply for a spent body budget: the server is full, not the
 * client at fault; a recent kube-apiserver retries a 503 that carries
 * Retry-After within the webhook's timeout. */
static void error_busy(const http_server *srv, http_response *resp)
{
    http_response_error(resp, 503, "request bodies in flight would exceed %zu bytes; retry",
                        srv->max_body_memory);
    if (http_response_add_header(resp, "Retry-After", "1"))
        return; /* cannot happen: the error reply has no headers yet */
}

/* Over TLS a reply goes out in one TCP segment, as it would in one
 * sendmsg over plain HTTP. libmicrohttpd 0.9.75 writes the headers and the
 * body as two TLS records and pushes the headers of a body of 1400 bytes or
 * more (most /mutate answers with a patch) on their own: one more packet
 * through the kernel, one more wake-up and read for the client, and an ACK
 * back, per request. So the socket is corked (TCP_CORK) before the reply is
 * queued and uncorked when libmicrohttpd says the request is complete (all
 * of it handed to the kernel); the kernel sends whole segments meanwhile
 * and never holds a corked tail longer than 200 ms. The body is given as a
 * reader: libmicrohttpd then does not set TCP_NODELAY between headers and
 * body, which would push the headers out under the cork. */
#define HTTP_REPLY_BLOCK ((size_t)64 * 1024)

static ssize_t body_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    /* max never runs past the body: libmicrohttpd passes at most the
     * declared size less pos. */
    memcpy(buf, (const char *)cls + pos, max);
    return (ssize_t)max;
}

static struct MHD_Response *body_response(const http_server *srv, char *body, size_t len)
{
    if (srv->plain || !len) /* plain: libmicrohttpd sends headers and body in one sendmsg */
        return MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    return MHD_create_response_from_callback(len, len < HTTP_REPLY_BLOCK ? len : HTTP_REPLY_BLOCK,
                                             body_reader, body, free);
}

/* Count/log errors, hand the response to MHD and dispose resp. The request
 * has arrived (or will not be read): its read deadline stops. */
static enum MHD_Result reply(http_server *srv, struct MHD_Connection *conn, const http_request *req,
                             http_response *resp)
{
    struct MHD_Response *r;
    enum MHD_Result ret = MHD_NO;
    http_conn *c = conn_of(conn);
    conn_set_phase(c, CONN_SERVING);
    conn_cork(srv, c);
    account(srv, req, resp);
    if (resp->body) {
        r = body_response(srv, resp->body, resp->body_len);
        if (r)
            resp->body = NULL; /* MHD frees it now */
    } else {
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!r)
        goto out;
    if (resp->content_type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    for (size_t i = 0; i < resp->n_headers; i++)
        MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
    if (atomic_load_explicit(&srv->draining, memory_order_relaxed))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
out:
    http_response_dispose(resp);
    return ret;
}

static size_t parse_content_length(const char *s)
{
    size_t v = 0;
    if (!s || !*s)
        return SIZE_MAX;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return SIZE_MAX - 1; /* malformed: MHD rejects it before us; treat as huge */
        if (v > (SIZE_MAX - 2 - (size_t)(*s - '0')) / 10)
            return SIZE_MAX - 1;
        v = v * 10 + (size_t)(*s - '0');
    }
    return v;
}

/* First call of a request (headers complete): every check, then the body
 * budget. Returns the new state, or NULL with resp filled (an error) or
 * left at status 0 (out of memory). */
static req_state *request_begin(http_server *srv, struct MHD_Connection *conn, const char *method,
                                const char *url, http_request *req, http_response *resp)
{
    http_conn *c = conn_of(conn);
    conn_set_phase(c, CONN_RECEIVING);
    req->content_type =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t declared = parse_content_length(cl);
    const route *r = find_route(srv, url);
    req->client_rejected =
        r && r->kind == HTTP_ROUTE_POST_JSON ? client_rejected(srv, conn, c) : NULL;
    r = check_request(srv, method, url, req->content_type, declared, req->client_rejected, resp);
    if (!r)
        return NULL;
    bool fixed = r->kind == HTTP_ROUTE_POST_JSON && declared != SIZE_MAX && declared > 0;
    /* A declared length is reserved whole before a byte of it is read, so
     * a refusal is immediate and the reservation bounds the buffer. */
    if (fixed && !budget_take(srv, declared)) {
        error_busy(srv, resp);
        return NULL;
    }
    req_state *st = calloc(1, sizeof(*st));
    if (st && fixed) {
        /* One allocation of the declared size: no copies as it grows.
         * Pages the client never fills are never touched, so announcing
         * 3 MiB and sending nothing still costs little memory. */
        st->fixed = true;
        st->reserved = declared;
        st->cap = declared + 1;
        st->body = malloc(st->cap);
    }
    if (!st || (fixed && !st->body)) {
        if (fixed)
            atomic_fetch_sub_explicit(&srv->body_bytes, declared, memory_order_relaxed);
        free(st);
        return NULL;
    }
    st->route = r;
    return st;
}

/* A chunk of the body: buffered, or discarded once the request is known
 * to fail (413, 503), which is then answered at the end. */
static enum MHD_Result request_data(http_server *srv, req_state *st, const char *data, size_t n)
{
    if (st->too_large || st->over_budget || st->route->kind == HTTP_ROUTE_GET)
        return MHD_YES; /* GET bodies are ignored */
    if (n > srv->max_body - st->len) {
        st->too_large = true;
        body_free(srv, st);
        return MHD_YES;
    }
    if (st->len + n + 1 > st->cap) {
        gq_code rc = body_grow(srv, st, n);
        if (rc == GQ_ELIMIT) {
            st->over_budget = true;
            body_free(srv, st);
            return MHD_YES;
        }
        if (rc)
            return MHD_NO;
    }
    memcpy(st->body + st->len, data, n);
    st->len += n;
    return MHD_YES;
}

static void suspended_unlink(http_server *srv, http_deferred *d)
{
    if (d->prev)
        d->prev->next = d->next;
    else
        srv->suspended = d->next;
    if (d->next)
        d->next->prev = d->prev;
    d->prev = d->next = NULL;
}

/* The asynchronous handler kept its answer: send it now if it is already
 * there, else suspend the connection (no thread waits for it) until
 * http_deferred_finish resumes it. The read deadline stops here. */
static enum MHD_Result await_answer(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                    http_deferred *d, const http_request *req, http_response *resp)
{
    conn_set_phase(conn_of(conn), CONN_SERVING);
    pthread_mutex_lock(&srv->deferred_lock);
    pthread_mutex_lock(&d->mu);
    bool ready = d->answered;
    if (ready) {
        *resp = d->resp;
        http_response_init(&d->resp);
    } else {
        MHD_suspend_connection(conn);
        d->suspended = true;
        d->next = srv->suspended;
        if (d->next)
            d->next->prev = d;
        srv->suspended = d;
        st->later = d;
    }
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&srv->deferred_lock);
    if (!ready)
        return MHD_YES;
    deferred_unref(d);
    check_answer(st->route, resp);
    return reply(srv, conn, req, resp);
}

/* The connection was resumed: its answer is there. */
static enum MHD_Result send_answer(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                   const http_request *req, http_response *resp)
{
    http_deferred *d = st->later;
    st->later = NULL;
    pthread_mutex_lock(&srv->deferred_lock);
    suspended_unlink(srv, d);
    pthread_mutex_unlock(&srv->deferred_lock);
    deferred_take(d, resp);
    check_answer(st->route, resp);
    return reply(srv, conn, req, resp);
}

/* The whole body has arrived: answer it, now or (asynchronous handler)
 * once the handler gives its answer. */
static enum MHD_Result request_end(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                   http_request *req)
{
    http_response resp;
    http_response_init(&resp);
    req->content_type =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    req->timeout = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "timeout");
    if (st->too_large) {
        http_response_error(&resp, 413, "request body exceeds %zu bytes", srv->max_body);
    } else if (st->over_budget) {
        error_busy(srv, &resp);
    } else {
        if (st->body)
            st->body[st->len] = '\0';
        req->body = st->body ? st->body : "";
        req->body_len = st->len;
        if (st->route->afn) {
            http_deferred *later = NULL;
            run_async(st->route, req, &resp, conn, &later);
            if (later)
                return await_answer(srv, conn, st, later, req, &resp);
            check_answer(st->route, &resp);
        } else {
            run_handler(st->route, req, &resp);
        }
    }
    return reply(srv, conn, req, &resp);
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    http_server *srv = cls;
    req_state *st = *con_cls;
    http_response resp;
    char remote[INET6_ADDRSTRLEN + 16];
    http_request req = {.method = method, .path = url, .body = "", .remote_addr = remote};

    if (!st) {
        atomic_fetch_add_explicit(&srv->in_flight, 1, memory_order_relaxed);
        http_response_init(&resp);
        st = request_begin(srv, conn, method, url, &req, &resp);
        if (!st && !resp.status)
            return MHD_NO; /* out of memory */
        if (!st) {
            /* Errors are answered at once; an unread body makes MHD close
             * the connection after the reply. Successful requests, GET
             * included, are answered only after MHD's last call: a reply
             * queued on the first call of a keep-alive request is held back
             * by libmicrohttpd 0.9.75 for ~40 ms (measured: 150 vs 30k req/s). */
            format_addr(conn, remote, sizeof(remote));
            return reply(srv, conn, &req, &resp);
        }
        *con_cls = st;
        return MHD_YES;
    }

    if (st->later) {
        http_response_init(&resp);
        format_addr(conn, remote, sizeof(remote));
        return send_answer(srv, conn, st, &req, &resp);
    }

    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return request_data(srv, st, upload_data, n);
    }

    /* Whole body received. */
    format_addr(conn, remote, sizeof(remote));
    return request_end(srv, conn, st, &req);
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    http_server *srv = cls;
    req_state *st = *con_cls;
    if (st && st->later) { /* ended without its answer (the daemon stopped) */
        pthread_mutex_lock(&srv->deferred_lock);
        suspended_unlink(srv, st->later);
        pthread_mutex_unlock(&srv->deferred_lock);
        deferred_unref(st->later);
    }
    if (st) {
        body_free(srv, st);
        free(st);
        *con_cls = NULL;
    }
    http_conn *c = conn_of(conn);
    conn_uncork(c);
    conn_set_phase(c, CONN_IDLE);
    atomic_fetch_sub_explicit(&srv->in_flight, 1, memory_order_relaxed);
}

/* libmicrohttpd's messages are per-connection noise a peer controls (each
 * refused or failed connection logs one), so they go to debug. While the
 * daemon starts, the last one is kept for our own error line. */
static void GQ_PRINTF(2, 0) mhd_logger(void *cls, const char *fmt, va_list ap)
{
    http_server *srv = cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    pthread_mutex_lock(&srv->msg_lock);
    if (srv->capture_msg)
        gq_copy_trunc(srv->start_msg, sizeof(srv->start_msg), msg);
    pthread_mutex_unlock(&srv->msg_lock);
    GQ_DEBUG("http: %s", msg);
}

/* The port of an IPv4 or IPv6 address; false for another family. */
static bool sockaddr_set_port(struct sockaddr_storage *ss, unsigned port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)(void *)ss)->sin_port = htons((uint16_t)port);
    else if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons((uint16_t)port);
    else
        return false;
    return true;
}

/* "[HOST]:PORT" -> socket address. An empty host means every address (dual
 * stack). */
static gq_code parse_listen(const char *listen, struct sockaddr_storage *ss, bool *any, gq_err *err)
{
    gq_code rc = GQ_OK;
    char host[256];
    struct addrinfo hints = {0}, *res = NULL;
    const char *colon = strrchr(listen, ':');
    if (!colon || !colon[1])
        return gq_err_set(err, GQ_EINVAL, "listen address %s: expected [HOST]:PORT", listen);
    unsigned long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || port > 65535)
            return gq_err_set(err, GQ_EINVAL, "listen address %s: bad port", listen);
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port > 65535)
        return gq_err_set(err, GQ_EINVAL, "listen address %s: bad port", listen);
    size_t hl = (size_t)(colon - listen);
    const char *h = listen;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return gq_err_set(err, GQ_EINVAL, "listen address %s: host too long", listen);
    memcpy(host, h, hl);
    host[hl] = '\0';
    memset(ss, 0, sizeof(*ss));
    *any = hl == 0;
    if (*any) {
        struct sockaddr_in6 *in6 = (void *)ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        in6->sin6_port = htons((uint16_t)port);
        return GQ_OK;
    }
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(host, NULL, &hints, &res);
    if (gai || !res)
        return gq_err_set(err, GQ_EINVAL, "listen address %s: %s", listen, gai_strerror(gai));
    if (res->ai_addrlen > sizeof(*ss)) {
        rc = gq_err_set(err, GQ_EINVAL, "listen address %s: unsupported family", listen);
        goto out;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    if (!sockaddr_set_port(ss, port))
        rc = gq_err_set(err, GQ_EINVAL, "listen address %s: unsupported family", listen);
out:
    freeaddrinfo(res);
    return rc;
}

/* Bind and listen ourselves: a failure is then one clear line (address,
 * port, the system's reason) rather than libmicrohttpd's "Failed to bind
 * to port 0" followed by ours. */
typedef enum {
    LISTEN_ALONE,  /* the port is this socket's alone */
    LISTEN_SHARED, /* SO_REUSEPORT: one of the server's group on the port */
    BIND_ONLY,     /* bound, not listening: does the port take a socket of its own? */
} listen_mode;

static gq_code bind_listener(const struct sockaddr_storage *ss, bool any, listen_mode mode,
                             int *out, gq_err *err)
{
    int one = 1, v6only = any ? 0 : 1, fd;
    char addr[INET6_ADDRSTRLEN + 16];
    socklen_t len =
        ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    sockaddr_text((const struct sockaddr *)ss, addr, sizeof(addr));
    fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return gq_err_set(err, GQ_EIO, "cannot listen on %s: %s", addr, strerror(errno));
    /* A restart must not wait for the previous process's TIME_WAIT sockets;
     * an empty host serves IPv4 too (mapped addresses). */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        (mode == LISTEN_SHARED && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one))) ||
        (ss->ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only))) ||
        bind(fd, (const struct sockaddr *)ss, len) ||
        (mode != BIND_ONLY && listen(fd, HTTP_LISTEN_BACKLOG))) {
        int e = errno;
        close(fd);
        return gq_err_set(err, GQ_EIO, "cannot listen on %s: %s", addr, strerror(e));
    }
    *out = fd;
    return GQ_OK;
}

/* The port of an IPv4 or IPv6 address (sockaddr_set_port's reverse). */
static unsigned sockaddr_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
}

static unsigned bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len))
        return 0;
    return sockaddr_port(&ss);
}

/* The listening sockets, one per daemon. One daemon listens alone, as any
 * server does. Several share the port through SO_REUSEPORT, and the kernel
 * spreads new connections over them by address and port. Before they bind, a
 * socket without SO_REUSEPORT is bound to the port and closed: a port that
 * another process listens on, even another gpuquota sharing it the same way,
 * is refused then ("Address already in use") instead of shared. A port of 0
 * is the kernel's choice of a free one, which the first socket takes and the
 * others join. */
static gq_code open_listeners(struct sockaddr_storage *ss, bool any, int *fds, unsigned n,
                              unsigned *port, gq_err *err)
{
    gq_code rc = GQ_OK;
    unsigned i = 0;
    int probe;
    if (n > 1 && sockaddr_port(ss) != 0) {
        if ((rc = bind_listener(ss, any, BIND_ONLY, &probe, err)))
            return rc;
        close(probe);
    }
    for (; i < n; i++) {
        if ((rc = bind_listener(ss, any, n > 1 ? LISTEN_SHARED : LISTEN_ALONE, &fds[i], err)))
            break;
        if (i == 0) {
            *port = bound_port(fds[0]);
            (void)sockaddr_set_port(ss, *port);
        }
    }
    if (rc)
        while (i--)
            close(fds[i]);
    return rc;
}

/* Daemon I's share of a server-wide limit over N daemons, as libmicrohttpd
 * splits its connection limit over a thread pool; at least one. */
static unsigned limit_share(unsigned total, unsigned n, unsigned i)
{
    unsigned share = total / n + (i < total % n);
    return share ? share : 1;
}

/* Stops the daemons started so far. */
static void stop_daemons(http_server *srv)
{
    for (unsigned i = 0; i < srv->n_daemons; i++)
        MHD_stop_daemon(srv->daemons[i]);
    free(srv->daemons);
    srv->daemons = NULL;
    srv->n_daemons = 0;
}

/* poll(2) in an internal thread, not epoll: libmicrohttpd 0.9.75 in epoll
 * mode retries a TLS handshake whose peer sent part of a record in a loop,
 * so every connection part way through its handshake held a server thread
 * at 100 % (server_abuse.sh, "quiet"), a client slow to answer the
 * ServerHello (kube-apiserver on a busy node) as much as an attacker. TURBO
 * does opportunistic reads/writes (fewer polls on keep-alive connections).
 * ITC is required by MHD_quiesce_daemon for draining and wakes a connection
 * resumed from another thread (asynchronous answers). The bench baseline
 * (test/bench/baseline_server.c) uses the same settings. */
static unsigned daemon_flags(const http_server *srv, const struct sockaddr_storage *ss)
{
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_TURBO |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (ss->ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (!srv->plain)
        flags |= MHD_USE_TLS;
    return flags;
}

/* Daemon i of n, on the listening socket fd; NULL when libmicrohttpd
 * refuses (its message is in srv->start_msg while capture_msg is set). */
static struct MHD_Daemon *start_daemon(http_server *srv, unsigned flags, int fd, unsigned n,
                                       unsigned i)
{
    struct MHD_OptionItem o[16];
    size_t k = 0;
    /* The logger goes first so MHD never prints through its own. */
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_logger, srv};
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, srv->idle_timeout_s, NULL};
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                     limit_share(srv->max_connections, n, i), NULL};
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                     limit_share(srv->max_connections_per_ip, n, i), NULL};
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_completed, srv};
    o[k++] =
        (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_connection, srv};
    if (!srv->plain) {
        o[k++] =
            (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)HTTP_TLS_PRIORITIES};
        o[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)cert_callback};
    }
    o[k++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return MHD_start_daemon(flags, 0, NULL, NULL, access_handler, srv, MHD_OPTION_ARRAY, o,
                            MHD_OPTION_END);
}

static void capture_start_messages(http_server *srv, bool on)
{
    pthread_mutex_lock(&srv->msg_lock);
    srv->capture_msg = on;
    if (on)
        srv->start_msg[0] = '\0';
    pthread_mutex_unlock(&srv->msg_lock);
}

/* A daemon on each of the n sockets of fds. On failure the sockets of the
 * daemons not started are closed, and the message says why. */
static gq_code start_daemons(http_server *srv, const struct sockaddr_storage *ss, const int *fds,
                             unsigned n, gq_err *err)
{
    unsigned flags = daemon_flags(srv, ss), i;
    capture_start_messages(srv, true);
    for (i = 0; i < n; i++) {
        if (!(srv->daemons[i] = start_daemon(srv, flags, fds[i], n, i)))
            break;
        srv->n_daemons++;
    }
    capture_start_messages(srv, false);
    if (i == n)
        return GQ_OK;
    /* The failed daemon's socket is not closed here: libmicrohttpd closes it
     * on some of its failure paths, and closing twice could close another's.
     * The daemons started close theirs. */
    for (unsigned j = i + 1; j < n; j++)
        close(fds[j]);
    return gq_err_set(err, GQ_EIO, "cannot serve on %s: %s", srv->listen,
                      srv->start_msg[0] ? srv->start_msg : "libmicrohttpd failed to start");
}

/* One libmicrohttpd daemon per server thread, each with one internal thread
 * and its own listening socket, rather than one daemon with a thread pool:
 * in a pool every thread polls the one listening socket, and (measured in
 * epoll mode) the thread that wakes first accepts up to ten connections in a
 * row, so a burst of connections (kube-apiserver opens them in bursts as its
 * calls in flight grow) can all land on one thread while the others idle.
 * The connection limits are split over the daemons as libmicrohttpd splits
 * them over its pool (docs/webhook-server.md). */
gq_code http_server_start(http_server *srv, gq_err *err)
{
    gq_code rc = GQ_OK;
    struct sockaddr_storage ss;
    bool any = false;
    int *fds = NULL;
    unsigned n = srv->threads < srv->max_connections ? srv->threads : srv->max_connections;
    gq_err_clear(err);
    if (srv->n_daemons)
        return gq_err_set(err, GQ_EINVAL, "server already started");
    if ((rc = parse_listen(srv->listen, &ss, &any, err)))
        return rc;
    fds = calloc(n, sizeof(*fds));
    srv->daemons = calloc(n, sizeof(*srv->daemons));
    if (!fds || !srv->daemons)
        rc = gq_err_oom(err);
    if (!rc)
        rc = open_listeners(&ss, any, fds, n, &srv->port, err);
    if (!rc)
        rc = start_daemons(srv, &ss, fds, n, err);
    if (rc) {
        stop_daemons(srv);
        srv->port = 0;
    } else {
        srv->stop_housekeeping = false;
        if (pthread_create(&srv->housekeeping_thread, NULL, housekeeping_main, srv) == 0)
            srv->housekeeping_running = true;
        else
            GQ_ERROR("cannot start the housekeeping thread; certificate reload and the read "
                     "deadline are disabled");
    }
    free(fds);
    return rc;
}

static void stop_housekeeping_thread(http_server *srv)
{
    if (!srv->housekeeping_running)
        return;
    pthread_mutex_lock(&srv->stop_lock);
    srv->stop_housekeeping = true;
    pthread_cond_signal(&srv->stop_cond);
    pthread_mutex_unlock(&srv->stop_lock);
    pthread_join(srv->housekeeping_thread, NULL);
    srv->housekeeping_running = false;
}

/* libmicrohttpd must not be stopped with a connection suspended: answer
 * every one still waiting with 503 (kube-apiserver retries elsewhere or
 * fails closed), resume it, and give the server threads a moment to send
 * the answers. The handler's own answer, when it comes, is dropped. */
static void answer_suspended(http_server *srv)
{
    pthread_mutex_lock(&srv->deferred_lock);
    for (http_deferred *d = srv->suspended; d; d = d->next) {
        pthread_mutex_lock(&d->mu);
        if (!d->answered) {
            http_response_error(&d->resp, 503, "the webhook is shutting down; retry");
            d->answered = true;
            MHD_resume_connection(d->conn);
        }
        pthread_mutex_unlock(&d->mu);
    }
    pthread_mutex_unlock(&srv->deferred_lock);
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&srv->deferred_lock);
        bool empty = !srv->suspended;
        pthread_mutex_unlock(&srv->deferred_lock);
        if (empty)
            break;
        nanosleep(&tick, NULL);
    }
}

void http_server_begin_drain(http_server *srv)
{
    atomic_store(&srv->ready, false);
    atomic_store(&srv->draining, true);
}

unsigned http_server_stop(http_server *srv, unsigned drain_ms)
{
    unsigned left = 0;
    if (!srv)
        return 0;
    http_server_begin_drain(srv);
    if (srv->n_daemons) {
        for (unsigned i = 0; i < srv->n_daemons; i++) {
            MHD_socket fd = MHD_quiesce_daemon(srv->daemons[i]);
            if (fd != MHD_INVALID_SOCKET)
                close(fd);
        }
        struct timespec tick = {0, 10 * 1000 * 1000};
        int64_t start = mono_ms();
        while ((left = atomic_load(&srv->in_flight)) && mono_ms() - start < (int64_t)drain_ms)
            nanosleep(&tick, NULL);
        answer_suspended(srv);
        stop_daemons(srv);
    }
    stop_housekeeping_thread(srv);
    return left;
}

void http_server_free(http_server *srv)
{
    if (!srv)
        return;
    (void)http_server_stop(srv, 0);
    creds_release(srv->creds);
    pthread_cond_destroy(&srv->stop_cond);
    pthread_mutex_destroy(&srv->stop_lock);
    pthread_mutex_destroy(&srv->reload_lock);
    pthread_mutex_destroy(&srv->creds_lock);
    pthread_mutex_destroy(&srv->conns_lock);
    pthread_mutex_destroy(&srv->deferred_lock);
    pthread_mutex_destroy(&srv->msg_lock);
    free(srv->listen);
    free(srv->cert_file);
    free(srv->key_file);
    free(srv->client_ca_file);
    for (size_t i = 0; i < srv->n_client_cns; i++)
        free(srv->client_cns[i]);
    free(srv->version);
    free(srv);
}
