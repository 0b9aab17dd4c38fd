/* The HTTP side of the client: a pool of curl easy handles (each keeps its
 * keep-alive connection across requests) sharing DNS and TLS sessions through
 * one CURLSH, bearer tokens re-read from file or from a credential plugin,
 * Status decoding, retries,
 * paginated lists and streamed watches. */
#include "kube/kube_exec.h"

#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/gq_log.h"
#include "common/jsonutil.h"

#define DEFAULT_MAX_BODY ((size_t)64 << 20)
#define ERROR_BODY_MAX ((size_t)64 << 10)
#define TOKEN_MAX ((size_t)64 << 10)

struct kube_client {
    kube_config *cfg;
    kube_client_opts o;
    CURLSH *share;
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_mu;
    CURL **pool;
    unsigned npool;
    pthread_mutex_t tok_mu;
    char *token;          /* current bearer token (file-backed or static) */
    int64_t token_at;     /* kube_mono_ms of the last file read */
    kube_exec_auth *exec; /* the user's credential plugin, or NULL */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
    struct kube_client *c = ud;
    if ((unsigned)data < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&c->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
    struct kube_client *c = ud;
    if ((unsigned)data < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&c->share_mu[data]);
}

static gq_code read_token(const char *path, char **out, gq_err *err)
{
    char *buf;
    size_t len;
    gq_code rc = kube_read_file(path, TOKEN_MAX, &buf, &len, err);
    if (rc)
        return rc;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e) {
            free(buf);
            return gq_err_set(err, GQ_EINVAL, "%s: token contains invalid characters", path);
        }
    }
    *out = buf;
    return GQ_OK;
}

/* Copy of the current token (NULL when none); re-reads the file when stale
 * or when force is set. A failed re-read keeps the previous token. */
static gq_code current_token(kube_client *c, int force, char **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    pthread_mutex_lock(&c->tok_mu);
    if (c->cfg->token_file &&
        (force || !c->token || kube_mono_ms() - c->token_at >= c->o.token_reread_ms)) {
        char *t = NULL;
        gq_err e;
        gq_err_clear(&e);
        rc = read_token(c->cfg->token_file, &t, &e);
        if (rc == GQ_OK) {
            free(c->token);
            c->token = t;
            c->token_at = kube_mono_ms();
        } else if (c->token) {
            GQ_WARN("kube: keeping the previous token: %s", e.msg);
            rc = GQ_OK;
        } else {
            if (err)
                *err = e;
            goto out;
        }
    }
    *out = NULL;
    if (c->token && !(*out = strdup(c->token)))
        rc = gq_err_oom(err);
out:
    pthread_mutex_unlock(&c->tok_mu);
    return rc;
}

/* The credential of one request (token and/or client certificate, owned):
 * the plugin's when the user has one, else the token or token file's. */
static gq_code current_cred(kube_client *c, kube_exec_cred *out, gq_err *err)
{
    memset(out, 0, sizeof(*out));
    if (c->exec)
        return kube_exec_auth_get(c->exec, out, err);
    return current_token(c, 0, &out->token, err);
}

/* After a 401: whether a new credential may help (a token file or a plugin). */
static int can_reauth(const kube_client *c)
{
    return c->cfg->token_file || c->exec;
}

/* After a 401 to cred: re-read the token file or re-run the plugin (unless
 * another request already replaced the credential). */
static gq_code reauth(kube_client *c, const kube_exec_cred *cred, gq_err *err)
{
    if (c->exec)
        return kube_exec_auth_refresh(c->exec, cred->gen, err);
    char *t = NULL;
    gq_code rc = current_token(c, 1, &t, err);
    free(t);
    return rc;
}

/* The caller's options with every unset one given its default. */
static void opts_with_defaults(kube_client *c, const kube_client_opts *opts)
{
    if (opts)
        c->o = *opts;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = 30000;
    if (c->o.connect_timeout_ms <= 0)
        c->o.connect_timeout_ms = 10000;
    if (!c->o.max_body)
        c->o.max_body = DEFAULT_MAX_BODY;
    if (!c->o.pool_size)
        c->o.pool_size = 32;
    if (c->o.token_reread_ms <= 0)
        c->o.token_reread_ms = 60000;
    if (!c->o.user_agent)
        c->o.user_agent = "gpuquota";
}

/* DNS answers and TLS sessions shared by every handle of the client. */
static gq_code share_init(kube_client *c, gq_err *err)
{
    c->share = curl_share_init();
    if (!c->share)
        return gq_err_oom(err);
    curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return GQ_OK;
}

gq_code kube_client_new(const kube_config *cfg, const kube_client_opts *opts, kube_client **out,
                        gq_err *err)
{
    gq_code rc;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return gq_err_set(err, GQ_EIO, "curl_global_init: %s", curl_easy_strerror(global_rc));
    if (!cfg || !cfg->server)
        return gq_err_set(err, GQ_EINVAL, "kube client: configuration has no server");
#if LIBCURL_VERSION_NUM < 0x074d00 /* CURLOPT_CAINFO_BLOB arrived in 7.77.0 */
    if (cfg->ca_data.data || cfg->cert_data.data || cfg->key_data.data)
        return gq_err_set(err, GQ_EUNSUPPORTED,
                          "kube client: libcurl %s cannot take certificate data in memory; use "
                          "certificate-authority / client-certificate / client-key files",
                          LIBCURL_VERSION);
#endif
    kube_client *c = calloc(1, sizeof(*c));
    if (!c)
        return gq_err_oom(err);
    opts_with_defaults(c, opts);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->share_mu[i], NULL);
    pthread_mutex_init(&c->pool_mu, NULL);
    pthread_mutex_init(&c->tok_mu, NULL);
    c->pool = calloc(c->o.pool_size, sizeof(*c->pool));
    rc = kube_config_copy(cfg, &c->cfg);
    if (rc || !c->pool || !(c->o.user_agent = strdup(c->o.user_agent))) {
        rc = gq_err_oom(err);
        goto out;
    }
    if (c->cfg->token && !(c->token = strdup(c->cfg->token))) {
        rc = gq_err_oom(err);
        goto out;
    }
    rc = share_init(c, err);
    if (rc)
        goto out;
    if (c->cfg->token_file) {
        char *t = NULL;
        rc = current_token(c, 1, &t, err);
        free(t);
        if (rc)
            goto out;
    }
    /* As in client-go, a plugin only when no other credential is given; it
     * first runs with the first request. */
    if (c->cfg->exec && !c->cfg->token && !c->cfg->token_file && !c->cfg->cert_file &&
        !c->cfg->cert_data.data && (rc = kube_exec_auth_new(c->cfg, NULL, &c->exec, err)))
        goto out;
    *out = c;
    c = NULL;
out:
    kube_client_free(c);
    return rc;
}

void kube_client_free(kube_client *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    free(c->pool);
    if (c->share)
        curl_share_cleanup(c->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&c->share_mu[i]);
    pthread_mutex_destroy(&c->pool_mu);
    pthread_mutex_destroy(&c->tok_mu);
    free(c->token);
    kube_exec_auth_free(c->exec);
    free((char *)c->o.user_agent);
    kube_config_free(c->cfg);
    free(c);
}

const char *kube_client_namespace(const kube_client *c)
{
    return c->cfg->namespace_;
}

static CURL *handle_acquire(kube_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->pool_mu);
    if (c->npool)
        h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->pool_mu);
    if (h)
        curl_easy_reset(h); /* keeps the live connection */
    else
        h = curl_easy_init();
    return h;
}

static void handle_release(kube_client *c, CURL *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&c->pool_mu);
    if (c->npool < c->o.pool_size) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->pool_mu);
    curl_easy_cleanup(h);
}

/* Every new connection: a peer that stops acknowledging is given up after
 * KUBE_DEAD_PEER_MS (kube.h), keepalive probes included. A failure to set
 * it leaves the connection with keepalive alone. */
static int dead_peer_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    (void)ud;
    unsigned int ms = (unsigned int)KUBE_DEAD_PEER_MS;
    if (purpose == CURLSOCKTYPE_IPCXN &&
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms) != 0)
        GQ_DEBUG("TCP_USER_TIMEOUT not set: %s", strerror(errno));
    return CURL_SOCKOPT_OK;
}

/* The kubeconfig's trust and client identity, from files or from memory;
 * a client certificate from a credential plugin (copied: the credential
 * is the request's). */
static void set_tls(CURL *h, const kube_config *cfg, const kube_exec_cred *cred)
{
    if (cfg->insecure_skip_tls_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cfg->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_file);
    if (cfg->cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->cert_file);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (cfg->key_file) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->key_file);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
#if LIBCURL_VERSION_NUM >= 0x074d00 /* checked in kube_client_new otherwise */
    /* CURL_BLOB_NOCOPY: the config outlives every transfer of the client. */
    if (cfg->ca_data.data) {
        struct curl_blob b = {cfg->ca_data.data, cfg->ca_data.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    }
    if (cfg->cert_data.data) {
        struct curl_blob b = {cfg->cert_data.data, cfg->cert_data.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (cfg->key_data.data) {
        struct curl_blob b = {cfg->key_data.data, cfg->key_data.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (cred && cred->cert.data && cred->key.data) {
        struct curl_blob cb = {cred->cert.data, cred->cert.len, CURL_BLOB_COPY};
        struct curl_blob kb = {cred->key.data, cred->key.len, CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
#endif
}

/* Accept, Content-Type (ctype NULL: none) and Authorization (token NULL:
 * none); NULL when out of memory. */
static struct curl_slist *request_headers(const char *token, const char *ctype)
{
    struct curl_slist *l = curl_slist_append(NULL, "Accept: application/json");
    if (l && ctype) {
        char line[96];
        snprintf(line, sizeof(line), "Content-Type: %s", ctype);
        struct curl_slist *n = curl_slist_append(l, line);
        l = n ? n : (curl_slist_free_all(l), NULL);
    }
    if (l && token) {
        gq_buf b;
        gq_buf_init(&b, TOKEN_MAX + 64);
        struct curl_slist *n = NULL;
        if (!gq_buf_puts(&b, "Authorization: Bearer ") && !gq_buf_puts(&b, token))
            n = curl_slist_append(l, b.data);
        gq_buf_dispose(&b);
        l = n ? n : (curl_slist_free_all(l), NULL);
    }
    return l;
}

/* Options shared by every request: URL, TLS material, auth, headers. */
static gq_code setup_handle(kube_client *c, CURL *h, const char *url, const kube_exec_cred *cred,
                            struct curl_slist **hdrs, const char *ctype, gq_err *err)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SHARE, c->share);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->o.user_agent);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, KUBE_KEEPALIVE_IDLE_S);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, KUBE_KEEPALIVE_INTVL_S);
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, dead_peer_sockopt);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    set_tls(h, c->cfg, cred);
    struct curl_slist *l = request_headers(cred ? cred->token : NULL, ctype);
    if (!l)
        return gq_err_oom(err);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
    *hdrs = l;
    return GQ_OK;
}

static gq_code curl_code(CURLcode cc)
{
    switch (cc) {
    case CURLE_OK:
        return GQ_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return GQ_ETIMEOUT;
    case CURLE_OUT_OF_MEMORY:
        return GQ_ENOMEM;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
        return GQ_ETLS;
    default:
        return GQ_EIO;
    }
}

/* Fill err for a non-2xx response, decoding a Status body when there is one. */
static gq_code http_error(const char *method, const char *path, long status, const gq_buf *body,
                          gq_err *err)
{
    kube_status st;
    int have = body->len && kube_status_decode(body->data, body->len, &st) == GQ_OK;
    gq_code rc = kube_http_code(status, have ? st.reason : NULL);
    if (have)
        return gq_err_set(err, rc, "%s %s: HTTP %ld %s: %s", method, path, status, st.reason,
                          st.message);
    return gq_err_set(err, rc, "%s %s: HTTP %ld", method, path, status);
}

typedef struct body_sink {
    gq_buf *b;
    gq_code rc; /* why the write stopped: GQ_ELIMIT or GQ_ENOMEM */
} body_sink;

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    body_sink *s = ud;
    size_t n = size * nmemb;
    s->rc = gq_buf_add(s->b, ptr, n);
    return s->rc ? 0 : n;
}

static int retryable(gq_code rc, long status)
{
    if (rc == GQ_EIO || rc == GQ_ETIMEOUT)
        return 1;
    return rc == GQ_EHTTP && (status >= 500 || status == 429);
}

/* One HTTP request to the API server: method and path, the query (nq
 * parameters), the body and its content type (NULL: none). */
typedef struct http_call {
    const char *method, *path;
    const kube_query *q;
    size_t nq;
    const char *body, *ctype;
} http_call;

/* One attempt of a request: the handle it runs on, its URL and credential,
 * its timeout, and the HTTP status it got (0: none). */
typedef struct attempt {
    CURL *h;
    const char *url;
    const kube_exec_cred *cred;
    long timeout_ms;
    long status;
} attempt;

/* Run one attempt; the answer's body is in *resp whatever the status. */
static gq_code attempt_once(kube_client *c, const http_call *call, attempt *a, gq_buf *resp,
                            gq_err *err)
{
    const char *method = call->method, *path = call->path, *body = call->body;
    CURL *h = a->h;
    struct curl_slist *hdrs = NULL;
    curl_easy_reset(h);
    gq_code rc = setup_handle(c, h, a->url, a->cred, &hdrs, call->ctype, err);
    if (rc)
        return rc;
    gq_buf_dispose(resp); /* an earlier attempt's failure is not this one's */
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "GET"))
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, a->timeout_ms);
    body_sink sink = {resp, GQ_OK};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(hdrs);
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
        return a->status >= 200 && a->status < 300 ? GQ_OK
                                                   : http_error(method, path, a->status, resp, err);
    }
    if (cc == CURLE_WRITE_ERROR && resp->len + CURL_MAX_WRITE_SIZE >= resp->max)
        return gq_err_set(err, GQ_ELIMIT, "%s %s: response larger than %zu bytes", method, path,
                          resp->max);
    return gq_err_set(err, curl_code(cc), "%s %s: %s", method, path, curl_easy_strerror(cc));
}

/* One request with token refresh on 401 and the caller's retries. On
 * success the 2xx body is in *resp (caller disposes it). */
static gq_code request(kube_client *c, const http_call *call, const kube_call_opts *o, gq_buf *resp,
                       gq_err *err)
{
    const char *method = call->method, *path = call->path;
    gq_code rc;
    char *url = NULL;
    kube_exec_cred cred = {0};
    unsigned retries = o ? o->retries : 0;
    long delay = o && o->retry_delay_ms > 0 ? o->retry_delay_ms : 100;
    attempt a = {.timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : c->o.timeout_ms,
                 .cred = &cred};
    int auth_retried = 0;

    gq_buf_init(resp, c->o.max_body);
    rc = kube_build_url(c->cfg->server, path, call->q, call->nq, &url);
    if (rc) {
        gq_err_set(err, rc, "%s %s: cannot build URL", method, path);
        goto out;
    }
    a.url = url;
    a.h = handle_acquire(c);
    if (!a.h) {
        rc = gq_err_oom(err);
        goto out;
    }
    for (unsigned tries = 0;; tries++) {
        kube_exec_cred_dispose(&cred);
        rc = current_cred(c, &cred, err);
        if (rc)
            goto out;
        a.status = 0;
        rc = attempt_once(c, call, &a, resp, err);
        if (rc == GQ_OK)
            break;
        if (rc == GQ_EUNAUTHORIZED && can_reauth(c) && !auth_retried) {
            /* The token may have been rotated or have expired early: a new
             * one from the file or the plugin, and one more try. */
            auth_retried = 1;
            rc = reauth(c, &cred, err);
            if (rc)
                goto out;
            tries--;
            continue;
        }
        if (tries >= retries || !retryable(rc, a.status))
            goto out;
        GQ_DEBUG("kube: %s %s failed (%s), retrying in %ld ms", method, path, err ? err->msg : "",
                 delay);
        kube_sleep_ms(delay, NULL);
        delay = delay > 15000 ? 30000 : delay * 2;
    }
out:
    handle_release(c, a.h);
    kube_exec_cred_dispose(&cred);
    free(url);
    if (rc)
        gq_buf_dispose(resp);
    return rc;
}

/* The answer's JSON, leaving out the subtrees skip[0..n_skip) names
 * (gq_json_parse_pruned: checked at any depth, never built). */
static gq_code parse_pruned(const char *method, const char *path, const gq_buf *b,
                            const char *const *skip, size_t n_skip, json_object **out, gq_err *err)
{
    json_object *obj = NULL;
    gq_code rc = gq_json_parse_pruned(b->data ? b->data : "", b->len, GQ_JSON_DEFAULT_DEPTH, skip,
                                      n_skip, &obj, err);
    if (rc) {
        gq_err_prefix(err, "%s %s: response", method, path);
        return rc;
    }
    if (!obj || !json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return gq_err_set(err, GQ_EINVAL, "%s %s: response is not a JSON object", method, path);
    }
    *out = obj;
    return GQ_OK;
}

static gq_code parse_json(const char *method, const char *path, const gq_buf *b, json_object **out,
                          gq_err *err)
{
    return parse_pruned(method, path, b, NULL, 0, out, err);
}

/* Request + optional JSON parse of the answer into *out. A body goes as
 * JSON; for PATCH, as a JSON merge patch. */
static gq_code call_json(kube_client *c, const char *method, const char *path, json_object *body,
                         const kube_call_opts *o, json_object **out, gq_err *err)
{
    const char *ctype = !body                      ? NULL
                        : !strcmp(method, "PATCH") ? "application/merge-patch+json"
                                                   : "application/json";
    gq_buf resp;
    const char *text = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : NULL;
    if (body && !text)
        return gq_err_oom(err);
    http_call call = {.method = method, .path = path, .body = text, .ctype = ctype};
    gq_code rc = request(c, &call, o, &resp, err);
    if (rc)
        return rc;
    if (out)
        rc = parse_json(method, path, &resp, out, err);
    gq_buf_dispose(&resp);
    return rc;
}

gq_code kube_get(kube_client *c, const char *path, const kube_call_opts *o, json_object **out,
                 gq_err *err)
{
    return call_json(c, "GET", path, NULL, o, out, err);
}

gq_code kube_create(kube_client *c, const char *path, json_object *body, const kube_call_opts *o,
                    json_object **out, gq_err *err)
{
    return call_json(c, "POST", path, body, o, out, err);
}

gq_code kube_update(kube_client *c, const char *path, json_object *body, const kube_call_opts *o,
                    json_object **out, gq_err *err)
{
    return call_json(c, "PUT", path, body, o, out, err);
}

gq_code kube_update_status(kube_client *c, const char *path, json_object *body,
                           const kube_call_opts *o, json_object **out, gq_err *err)
{
    gq_buf p;
    gq_buf_init(&p, 8192);
    gq_code rc = gq_buf_puts(&p, path);
    if (!rc)
        rc = gq_buf_puts(&p, "/status");
    if (rc) {
        gq_buf_dispose(&p);
        return gq_err_set(err, rc, "%s: path too long", path);
    }
    rc = call_json(c, "PUT", p.data, body, o, out, err);
    gq_buf_dispose(&p);
    return rc;
}

gq_code kube_patch_merge(kube_client *c, const char *path, json_object *patch,
                         const kube_call_opts *o, json_object **out, gq_err *err)
{
    return call_json(c, "PATCH", path, patch, o, out, err);
}

gq_code kube_patch_json(kube_client *c, const char *path, json_object *patch,
                        const kube_call_opts *o, json_object **out, gq_err *err)
{
    /* kube-apiserver's JSON Patch reads a pointer written "\/spec\/..."
     * (json-c's default escaping, valid JSON) as an error: send plain
     * slashes. */
    gq_buf resp;
    const char *text = json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN |
                                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!text)
        return gq_err_oom(err);
    http_call call = {
        .method = "PATCH", .path = path, .body = text, .ctype = "application/json-patch+json"};
    gq_code rc = request(c, &call, o, &resp, err);
    if (rc)
        return rc;
    if (out)
        rc = parse_json("PATCH", path, &resp, out, err);
    gq_buf_dispose(&resp);
    return rc;
}

gq_code kube_delete(kube_client *c, const char *path, const kube_call_opts *o, gq_err *err)
{
    return call_json(c, "DELETE", path, NULL, o, NULL, err);
}

static const char *obj_str(json_object *o, const char *k1, const char *k2)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k1, &v))
        return NULL;
    if (k2 && !json_object_object_get_ex(v, k2, &v))
        return NULL;
    return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* A paged list in progress: where it reads, who takes each item, what the
 * last page said (its resourceVersion, the continue token), and the next
 * page, fetched on a thread of its own while this one's items are decoded:
 * kube-apiserver encodes page k+1 while we decode page k. */
typedef struct list_pages {
    kube_client *c;
    const char *path;
    const kube_list_opts *o;
    kube_item_fn fn;
    void *ud;
    char *rv, *cont;
    unsigned lim;      /* the page size asked; halved for pages too large */
    const char **skip; /* the parse's patterns: managedFields, o->prune */
    char *skip_text;
    size_t n_skip;
    /* The next page's fetch: started once per page (tried), running on th
     * (fetching) for the continue token next_cont, into next/next_rc. */
    int tried, fetching;
    int fn_failed; /* the caller's fn stopped the list: its error as it is */
    pthread_t th;
    char *next_cont;
    gq_buf next;
    gq_code next_rc;
    gq_err next_err;
} list_pages;

/* GET one page (cont NULL: the first) into *resp. A page of large objects
 * (a pod may be 1.5 MiB) is asked again, half as long, down to one object,
 * which always fits. */
static gq_code fetch_page(list_pages *lp, const char *cont, gq_buf *resp, gq_err *err)
{
    const kube_list_opts *o = lp->o;
    for (;;) {
        char limit[24];
        snprintf(limit, sizeof(limit), "%u", lp->lim);
        kube_query q[] = {
            {"labelSelector", o ? o->label_selector : NULL},
            {"fieldSelector", o ? o->field_selector : NULL},
            {"limit", limit},
            {"continue", cont},
            /* resourceVersion only applies to the first page; continue
             * tokens carry the snapshot. */
            {"resourceVersion", !cont && o ? o->resource_version : NULL},
        };
        gq_err re;
        gq_err_clear(&re);
        http_call call = {
            .method = "GET", .path = lp->path, .q = q, .nq = sizeof(q) / sizeof(q[0])};
        gq_code rc = request(lp->c, &call, o ? o->call : NULL, resp, &re);
        if (rc == GQ_ELIMIT && lp->lim > 1 && strstr(re.msg, "response larger than")) {
            lp->lim /= 2;
            continue;
        }
        if (rc && err)
            *err = re;
        return rc;
    }
}

static void *prefetch_main(void *arg)
{
    list_pages *lp = arg;
    gq_err_clear(&lp->next_err);
    lp->next_rc = fetch_page(lp, lp->next_cont, &lp->next, &lp->next_err);
    return NULL;
}

/* Start fetching the page after this one, whose continue token root's
 * metadata holds if it came before the items (as kube-apiserver writes it).
 * Without a token, memory or a thread, the next page is fetched after this
 * one, as before. */
static void prefetch_start(list_pages *lp, json_object *root)
{
    lp->tried = 1;
    const char *next = root ? obj_str(root, "metadata", "continue") : NULL;
    if (!next || !next[0] || !(lp->next_cont = strdup(next)))
        return;
    if (pthread_create(&lp->th, NULL, prefetch_main, lp)) {
        free(lp->next_cont);
        lp->next_cont = NULL;
        return;
    }
    lp->fetching = 1;
}

/* Wait for the page being fetched. */
static void prefetch_join(list_pages *lp)
{
    if (lp->fetching)
        pthread_join(lp->th, NULL);
    lp->fetching = 0;
}

/* One item of the page being parsed: the first starts the next page's
 * fetch; each goes to the caller. */
static gq_code page_item(void *ud, json_object *root, json_object *item, gq_err *err)
{
    list_pages *lp = ud;
    if (!lp->tried)
        prefetch_start(lp, root);
    gq_code rc = lp->fn(lp->ud, item, err);
    lp->fn_failed = rc != GQ_OK;
    return rc;
}

/* The parse's patterns: each item's managedFields (no reader of a list
 * uses them, and any user who may patch an object can nest them hundreds
 * deep, which must not stop a list) and what the caller prunes. */
static gq_code skip_patterns(list_pages *lp, gq_err *err)
{
    static const char prefix[] = "items/*/", managed[] = "items/*/metadata/managedFields";
    size_t n = lp->o ? lp->o->n_prune : 0, text = sizeof managed;
    for (size_t i = 0; i < n; i++)
        text += sizeof prefix + strlen(lp->o->prune[i]);
    lp->skip = calloc(n + 1, sizeof(*lp->skip));
    char *w = lp->skip_text = malloc(text);
    if (!lp->skip || !w)
        return gq_err_oom(err);
    lp->skip[lp->n_skip++] = memcpy(w, managed, sizeof managed);
    w += sizeof managed;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(lp->o->prune[i]) + 1;
        lp->skip[lp->n_skip++] = memcpy(w, prefix, sizeof prefix - 1);
        memcpy(w + sizeof prefix - 1, lp->o->prune[i], len);
        w += sizeof prefix - 1 + len;
    }
    return GQ_OK;
}

/* Parse one page, handing its items to the caller as they are parsed (what
 * skip_patterns names left out), and keep its resourceVersion and continue token (cont NULL: the
 * last page). */
static gq_code take_page(list_pages *lp, const gq_buf *b, gq_err *err)
{
    gq_json_opts jo = {.max_depth = GQ_JSON_DEFAULT_DEPTH,
                       .skip = lp->skip,
                       .n_skip = lp->n_skip,
                       .each_member = "items",
                       .each_fn = page_item,
                       .each_ud = lp};
    json_object *list = NULL, *items;
    size_t charged;
    lp->tried = 0;
    gq_code rc = gq_json_parse_with(b->data ? b->data : "", b->len, &jo, &list, &charged, err);
    if (rc) {
        if (!lp->fn_failed)
            gq_err_prefix(err, "GET %s: response", lp->path);
        return rc;
    }
    if (!list || !json_object_is_type(list, json_type_object)) {
        json_object_put(list);
        return gq_err_set(err, GQ_EINVAL, "GET %s: response is not a JSON object", lp->path);
    }
    if (!json_object_object_get_ex(list, "items", &items) ||
        !(json_object_is_type(items, json_type_array) ||
          json_object_is_type(items, json_type_null))) {
        json_object_put(list);
        return gq_err_set(err, GQ_EINVAL, "GET %s: list has no \"items\" array", lp->path);
    }
    const char *lrv = obj_str(list, "metadata", "resourceVersion");
    const char *next = obj_str(list, "metadata", "continue");
    free(lp->rv);
    free(lp->cont);
    lp->rv = lrv ? strdup(lrv) : NULL;
    lp->cont = next && next[0] ? strdup(next) : NULL;
    int oom = (lrv && !lp->rv) || (next && next[0] && !lp->cont);
    json_object_put(list);
    return oom ? gq_err_oom(err) : GQ_OK;
}

/* The next page: the one fetched while this one was parsed if it was for
 * this continue token, else fetched now. */
static gq_code next_page(list_pages *lp, gq_buf *resp, gq_err *err)
{
    int have = lp->fetching;
    prefetch_join(lp);
    if (have && !strcmp(lp->next_cont, lp->cont)) {
        *resp = lp->next;
        gq_buf_init(&lp->next, 0);
        if (lp->next_rc && err)
            *err = lp->next_err;
        return lp->next_rc;
    }
    gq_buf_dispose(&lp->next);
    return fetch_page(lp, lp->cont, resp, err);
}

gq_code kube_list(kube_client *c, const char *path, const kube_list_opts *o, kube_item_fn fn,
                  void *ud, char **rv_out, gq_err *err)
{
    list_pages lp = {.c = c, .path = path, .o = o, .fn = fn, .ud = ud};
    lp.lim = o && o->page_size ? o->page_size : 500u;
    gq_buf_init(&lp.next, 0);
    gq_buf resp;
    gq_buf_init(&resp, 0);
    gq_code rc = skip_patterns(&lp, err);
    if (!rc)
        rc = fetch_page(&lp, NULL, &resp, err);
    while (!rc) {
        rc = take_page(&lp, &resp, err);
        gq_buf_dispose(&resp);
        if (rc || !lp.cont)
            break;
        rc = next_page(&lp, &resp, err);
        free(lp.next_cont);
        lp.next_cont = NULL;
    }
    prefetch_join(&lp); /* a failed page's prefetch */
    gq_buf_dispose(&lp.next);
    free(lp.next_cont);
    if (!rc && rv_out) {
        *rv_out = lp.rv;
        lp.rv = NULL;
    }
    free(lp.cont);
    free(lp.rv);
    free(lp.skip);
    free(lp.skip_text);
    return rc;
}

typedef struct watch_ctx {
    CURL *h;
    kube_watch_parser *p;
    long status; /* 0 until the first body byte */
    gq_buf errbody;
    gq_code rc; /* parser or callback failure */
    gq_err perr;
    const atomic_int *stop;
    void (*on_open)(void *ud);
    void *ud;
    int opened;   /* on_open was called */
    int rejected; /* the server answered with a status other than 200 */
} watch_ctx;

/* The blank line that ends a response's headers: a 200 means the server
 * accepted the watch. */
static size_t watch_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    watch_ctx *w = ud;
    size_t n = size * nmemb;
    long status = 0;
    if (w->on_open && !w->opened && (n == 2 || n == 1) && (ptr[0] == '\r' || ptr[0] == '\n') &&
        curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200) {
        w->opened = 1;
        w->on_open(w->ud);
    }
    return n;
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    watch_ctx *w = ud;
    size_t n = size * nmemb;
    if (!w->status)
        curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->status);
    if (w->status != 200) {
        gq_code ignored = gq_buf_add(&w->errbody, ptr, n); /* truncation is fine */
        (void)ignored;
        return n;
    }
    w->rc = kube_watch_parser_feed(w->p, ptr, n, &w->perr);
    return w->rc ? 0 : n;
}

static int watch_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    watch_ctx *w = ud;
    return w->stop && atomic_load(w->stop) ? 1 : 0;
}

static void watch_ctx_init(watch_ctx *w, const kube_watch_opts *o, void *ud)
{
    memset(w, 0, sizeof(*w));
    gq_buf_init(&w->errbody, ERROR_BODY_MAX);
    gq_err_clear(&w->perr);
    w->stop = o ? o->stop : NULL;
    w->on_open = o ? o->on_open : NULL;
    w->ud = ud;
}

static gq_code watch_url(kube_client *c, const char *path, const kube_watch_opts *o, char **url,
                         gq_err *err)
{
    char tmo[24] = "";
    if (o && o->timeout_seconds > 0)
        snprintf(tmo, sizeof(tmo), "%ld", o->timeout_seconds);
    kube_query q[] = {
        {"watch", "true"},
        {"labelSelector", o ? o->label_selector : NULL},
        {"fieldSelector", o ? o->field_selector : NULL},
        {"resourceVersion", o ? o->resource_version : NULL},
        {"allowWatchBookmarks", o && o->allow_bookmarks ? "true" : NULL},
        {"timeoutSeconds", tmo},
    };
    gq_code rc = kube_build_url(c->cfg->server, path, q, sizeof(q) / sizeof(q[0]), url);
    if (rc)
        gq_err_set(err, rc, "WATCH %s: cannot build URL", path);
    return rc;
}

/* The stream's callbacks: body, headers, and the progress tick that
 * notices a stop request. */
static void watch_options(watch_ctx *w, const kube_watch_opts *o)
{
    curl_easy_setopt(w->h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->h, CURLOPT_HEADERFUNCTION, watch_header);
    curl_easy_setopt(w->h, CURLOPT_HEADERDATA, w);
    curl_easy_setopt(w->h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(w->h, CURLOPT_XFERINFOFUNCTION, watch_progress);
    curl_easy_setopt(w->h, CURLOPT_XFERINFODATA, w);
    /* A server-side timeout bounds the stream; keep a client-side net
     * well above it for a silently dead peer. */
    if (o && o->timeout_seconds > 0)
        curl_easy_setopt(w->h, CURLOPT_TIMEOUT_MS, (o->timeout_seconds + 60) * 1000L);
}

/* How a finished stream ended: stopped, a parser or callback failure, a
 * transport error, the server closing it, or an error status (rejected). */
static gq_code watch_outcome(watch_ctx *w, CURLcode cc, const char *path, gq_err *err)
{
    if (!w->status)
        curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->status);
    if (cc == CURLE_ABORTED_BY_CALLBACK && w->stop && atomic_load(w->stop))
        return GQ_OK;
    if (w->rc) {
        if (err)
            *err = w->perr;
        return w->rc;
    }
    if (cc != CURLE_OK)
        return gq_err_set(err, curl_code(cc), "WATCH %s: %s", path, curl_easy_strerror(cc));
    if (w->status == 200)
        return kube_watch_parser_finish(w->p, err);
    w->rejected = 1;
    return http_error("WATCH", path, w->status, &w->errbody, err);
}

/* The transfer's result from the multi handle, once it is done. */
static CURLcode multi_result(CURLM *m, CURLcode dflt)
{
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            return msg->data.result;
    return dflt;
}

/* curl_easy_perform, except that wake_fd turning readable ends the transfer
 * at once (as CURLE_ABORTED_BY_CALLBACK, what the stop flag's progress
 * check returns): a stopping cache need not wait for libcurl's idle tick,
 * once a second, for each of its watches in turn. */
static CURLcode perform_wakeable(CURL *h, const int *wake_fd)
{
    if (!wake_fd || *wake_fd < 0)
        return curl_easy_perform(h);
    CURLM *m = curl_multi_init();
    if (!m)
        return CURLE_OUT_OF_MEMORY;
    if (curl_multi_add_handle(m, h) != CURLM_OK) {
        curl_multi_cleanup(m);
        return CURLE_FAILED_INIT;
    }
    CURLcode cc = CURLE_FAILED_INIT;
    for (int running = 1;;) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        if (!running) {
            cc = multi_result(m, CURLE_FAILED_INIT);
            break;
        }
        struct curl_waitfd wfd = {.fd = *wake_fd, .events = CURL_WAIT_POLLIN};
        if (curl_multi_poll(m, &wfd, 1, 1000, NULL) != CURLM_OK)
            break;
        if (wfd.revents) {
            cc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
    }
    curl_multi_remove_handle(m, h);
    curl_multi_cleanup(m);
    return cc;
}

gq_code kube_watch(kube_client *c, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                   void *ud, gq_err *err)
{
    gq_code rc;
    char *url = NULL;
    kube_exec_cred cred = {0};
    watch_ctx w;
    watch_ctx_init(&w, o, ud);
    rc = watch_url(c, path, o, &url, err);
    if (rc)
        goto out;
    w.h = handle_acquire(c);
    if (!w.h) {
        rc = gq_err_oom(err);
        goto out;
    }
    for (int auth_retried = 0;; auth_retried = 1) {
        struct curl_slist *hdrs = NULL;
        kube_watch_parser_free(w.p);
        w.p = NULL;
        w.status = 0;
        gq_buf_dispose(&w.errbody);
        w.rejected = 0;
        kube_exec_cred_dispose(&cred);
        rc = current_cred(c, &cred, err);
        if (rc)
            goto out;
        rc = kube_watch_parser_new(o ? o->max_line : 0, fn, ud, &w.p);
        if (rc) {
            gq_err_set(err, rc, "out of memory");
            goto out;
        }
        curl_easy_reset(w.h);
        rc = setup_handle(c, w.h, url, &cred, &hdrs, NULL, err);
        if (rc)
            goto out;
        watch_options(&w, o);
        CURLcode cc = perform_wakeable(w.h, o ? o->wake_fd : NULL);
        curl_slist_free_all(hdrs);
        rc = watch_outcome(&w, cc, path, err);
        if (w.rejected && rc == GQ_EUNAUTHORIZED && can_reauth(c) && !auth_retried &&
            (rc = reauth(c, &cred, err)) == GQ_OK)
            continue;
        goto out;
    }
out:
    handle_release(c, w.h);
    kube_watch_parser_free(w.p);
    gq_buf_dispose(&w.errbody);
    kube_exec_cred_dispose(&cred);
    free(url);
    return rc;
}

/* ---- the kube_api table over a real client ---- */

static gq_code api_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    return kube_get(ctx, path, NULL, out, err);
}

static gq_code api_create(void *ctx, const char *path, json_object *body, json_object **out,
                          gq_err *err)
{
    return kube_create(ctx, path, body, NULL, out, err);
}

static gq_code api_update(void *ctx, const char *path, json_object *body, json_object **out,
                          gq_err *err)
{
    return kube_update(ctx, path, body, NULL, out, err);
}

static gq_code api_update_status(void *ctx, const char *path, json_object *body, json_object **out,
                                 gq_err *err)
{
    return kube_update_status(ctx, path, body, NULL, out, err);
}

static gq_code api_patch_merge(void *ctx, const char *path, json_object *patch, json_object **out,
                               gq_err *err)
{
    return kube_patch_merge(ctx, path, patch, NULL, out, err);
}

static gq_code api_patch_json(void *ctx, const char *path, json_object *patch, json_object **out,
                              gq_err *err)
{
    return kube_patch_json(ctx, path, patch, NULL, out, err);
}

static gq_code api_del(void *ctx, const char *path, gq_err *err)
{
    return kube_delete(ctx, path, NULL, err);
}

static gq_code api_list(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn,
                        void *ud, char **rv_out, gq_err *err)
{
    return kube_list(ctx, path, o, fn, ud, rv_out, err);
}

static gq_code api_watch(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                         void *ud, gq_err *err)
{
    return kube_watch(ctx, path, o, fn, ud, err);
}

void kube_client_api(kube_client *c, kube_api *out)
{
    kube_api a = {
        .ctx = c,
        .get = api_get,
        .create = api_create,
        .update = api_update,
        .update_status = api_update_status,
        .patch_merge = api_patch_merge,
        .del = api_del,
        .list = api_list,
        .watch = api_watch,
        .patch_json = api_patch_json,
    };
    *out = a;
}
