/* kube-standin: the HTTP(S) adapter (libmicrohttpd) and the command line. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "standin.h"

#define TOKEN_MAX 16384

static const char *g_token_file;

typedef struct conn {
    gq_buf body;
    int too_big;
} conn;

typedef struct lookup_ctx {
    struct MHD_Connection *c;
} lookup_ctx;

static const char *lookup_query(void *ctx, const char *k)
{
    return MHD_lookup_connection_value(((lookup_ctx *)ctx)->c, MHD_GET_ARGUMENT_KIND, k);
}

static const char *lookup_header(void *ctx, const char *k)
{
    return MHD_lookup_connection_value(((lookup_ctx *)ctx)->c, MHD_HEADER_KIND, k);
}

/* Read the token file afresh (so tests can rotate it); NULL on error. */
static char *read_token(void)
{
    FILE *f = fopen(g_token_file, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(TOKEN_MAX + 1);
    size_t n = buf ? fread(buf, 1, TOKEN_MAX, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = '\0';
    while (n &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    size_t s = strspn(buf, " \t\r\n");
    memmove(buf, buf + s, n - s + 1);
    return buf;
}

static int authorized(struct MHD_Connection *c)
{
    if (!g_token_file)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char *tok = read_token();
    int ok = 0;
    if (tok && *tok && h && !strncmp(h, "Bearer ", 7)) {
        const char *given = h + 7;
        size_t a = strlen(given), b = strlen(tok);
        unsigned diff = (unsigned)(a != b);
        for (size_t i = 0; i < a && i < b; i++)
            diff |= (unsigned)(given[i] ^ tok[i]);
        ok = !diff;
    }
    free(tok);
    return ok;
}

static ssize_t watch_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    long n = watch_read(cls, buf, max);
    if (n < 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return (ssize_t)n;
}

static void watch_free_cb(void *cls)
{
    watch_free(cls);
}

static enum MHD_Result send_resp(struct MHD_Connection *c, sresp *rs)
{
    struct MHD_Response *r;
    if (rs->watch) {
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, watch_cb, rs->watch,
                                              watch_free_cb);
        if (!r)
            return MHD_NO;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        watch_set_fd(rs->watch, ci ? ci->connect_fd : -1);
        rs->watch = NULL; /* MHD owns it now */
    } else {
        const char *body = rs->body ? rs->body : "";
        r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_FREE);
        if (!r)
            return MHD_NO;
        rs->body = NULL;
    }
    MHD_add_response_header(r, "Content-Type",
                            rs->content_type ? rs->content_type : "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-cache, private");
    for (int i = 0; i < rs->n_warnings; i++)
        MHD_add_response_header(r, "Warning", rs->warnings[i]);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)(rs->code ? rs->code : 500), r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    conn *cc = *con_cls;
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        if (!cc)
            return MHD_NO;
        gq_buf_init(&cc->body, SI_BODY_MAX);
        *con_cls = cc;
        return MHD_YES;
    }
    if (*upload_size) {
        if (gq_buf_add(&cc->body, upload, *upload_size) == GQ_ELIMIT)
            cc->too_big = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    sresp rs = {0};
    if (strncmp(url, "/standin/", 9) != 0 && !authorized(c)) {
        api_status(&rs, 401, "Unauthorized", "Unauthorized", NULL, NULL, NULL);
    } else if (cc->too_big) {
        api_status(&rs, 413, "RequestEntityTooLarge", "the request body was too large", NULL, NULL,
                   NULL);
    } else if (cc->body.err) {
        api_status(&rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
    } else {
        lookup_ctx lc = {c};
        sreq rq = {.method = method,
                   .path = url,
                   .body = cc->body.data,
                   .body_len = cc->body.len,
                   .query = lookup_query,
                   .header = lookup_header,
                   .ctx = &lc};
        api_handle(&rq, &rs);
    }
    enum MHD_Result ret = send_resp(c, &rs);
    sresp_dispose(&rs);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    conn *cc = *con_cls;
    if (cc) {
        gq_buf_dispose(&cc->body);
        free(cc);
        *con_cls = NULL;
    }
}

/* What slurp reads at most: it stops after the chunk that passes 1 MiB. */
#define SLURP_MAX ((size_t)1 << 20 | 4096)

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    gq_buf b;
    gq_buf_init(&b, SLURP_MAX);
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0 && b.len < 1024 * 1024)
        gq_buf_add(&b, tmp, n);
    fclose(f);
    return si_buf_take(&b);
}

static void usage(void)
{
    fprintf(stderr, "usage: kube-standin --port N [--tls-cert F --tls-key F] [--token-file F] "
                    "[--history N] [--service HOST:PORT]\n");
}

static int parse_num(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long port = -1, history = 100000;
    const char *cert = NULL, *key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--port")) {
            if (parse_num(v, 0, 65535, &port)) {
                usage();
                return 2;
            }
        } else if (!strcmp(a, "--history")) {
            if (parse_num(v, 1, 100000000, &history)) {
                usage();
                return 2;
            }
        } else if (!strcmp(a, "--tls-cert")) {
            cert = v;
        } else if (!strcmp(a, "--tls-key")) {
            key = v;
        } else if (!strcmp(a, "--token-file")) {
            g_token_file = v;
        } else if (!strcmp(a, "--service")) {
            admit_set_service(v);
        } else {
            usage();
            return 2;
        }
        i++;
    }
    if (port < 0 || (!cert != !key)) {
        usage();
        return 2;
    }
    char *cert_pem = NULL, *key_pem = NULL;
    if (cert) {
        cert_pem = slurp(cert);
        key_pem = slurp(key);
        if (!cert_pem || !key_pem) {
            fprintf(stderr, "kube-standin: cannot read --tls-cert/--tls-key\n");
            return 1;
        }
    }
    admit_global_init();
    st_init((size_t)history);
    api_bootstrap(); /* default and kube-system, as every cluster has */

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_POLL;
    if (cert)
        flags |= MHD_USE_TLS;
    struct MHD_Daemon *d;
    if (cert)
        d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_HTTPS_MEM_CERT,
                             cert_pem, MHD_OPTION_HTTPS_MEM_KEY, key_pem, MHD_OPTION_END);
    else
        d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "kube-standin: cannot listen on 127.0.0.1:%ld\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on 127.0.0.1:%u\n", di ? (unsigned)di->port : (unsigned)port);
    fflush(stdout);

    int sig = 0;
    do {
        sigwait(&set, &sig);
    } while (sig == SIGPIPE);
    atomic_store(&g_stopping, 1);
    st_lock();
    st_broadcast();
    st_unlock();
    MHD_stop_daemon(d);
    st_shutdown();
    admit_global_cleanup();
    free(cert_pem);
    free(key_pem);
    return 0;
}
