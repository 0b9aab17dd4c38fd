/* Benchmark baseline: the smallest libmicrohttpd + GnuTLS server that does
 * what a webhook must (read the body; in parse mode parse it with json-c)
 * and answers a canned AdmissionReview: poll(2) with an internal thread pool
 * (one thread per CPU), TURBO, ITC, 120 s idle timeout, backlog 1024, the
 * GnuTLS priority string of webhook/server.c. With --reuseport it takes
 * that server's layout instead (http_server_start): one single-threaded daemon
 * per thread, each on its own SO_REUSEPORT listening socket. Keep the
 * settings in step.
 *
 * usage: bench_baseline_server --mode parse|canned --port N --cert F --key F [--threads N]
 *                              [--reuseport]
 * Prints "listening on 127.0.0.1:PORT" on stdout once serving; SIGTERM or
 * SIGINT stops it. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <microhttpd.h>

#define MAX_BODY ((size_t)3 * 1024 * 1024)

static bool parse_mode;

static const char canned[] =
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{"
    "\"uid\":\"b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64\",\"allowed\":true}}";

typedef struct body {
    char *p;
    size_t len, cap;
} body;

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    body *b = *con_cls;
    if (!b) {
        b = calloc(1, sizeof(*b));
        if (!b)
            return MHD_NO;
        *con_cls = b;
        return MHD_YES;
    }
    if (*size) {
        if (b->len + *size > MAX_BODY)
            return reply(conn, 413, "{\"code\":413}");
        if (b->len + *size + 1 > b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 16384;
            while (cap < b->len + *size + 1)
                cap *= 2;
            char *np = realloc(b->p, cap);
            if (!np)
                return MHD_NO;
            b->p = np;
            b->cap = cap;
        }
        memcpy(b->p + b->len, data, *size);
        b->len += *size;
        *size = 0;
        return MHD_YES;
    }
    if (parse_mode) {
        json_tokener *tok = json_tokener_new();
        json_object *obj = tok ? json_tokener_parse_ex(tok, b->p ? b->p : "", (int)b->len) : NULL;
        bool ok = obj != NULL;
        json_object_put(obj);
        json_tokener_free(tok);
        if (!ok)
            return reply(conn, 400, "{\"code\":400}");
    }
    return reply(conn, 200, canned);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    body *b = *con_cls;
    if (b) {
        free(b->p);
        free(b);
    }
    *con_cls = NULL;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 65536);
    if (buf && fread(buf, 1, 65535, f) == 0) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, 'm'},
        {"port", required_argument, NULL, 'p'},
        {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},
        {"threads", required_argument, NULL, 't'},
        {"reuseport", no_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    bool reuseport = false;
    const char *mode = NULL, *cert_file = NULL, *key_file = NULL;
    unsigned port = 0, threads = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'm')
            mode = optarg;
        else if (c == 'p')
            port = (unsigned)strtoul(optarg, NULL, 10);
        else if (c == 'c')
            cert_file = optarg;
        else if (c == 'k')
            key_file = optarg;
        else if (c == 't')
            threads = (unsigned)strtoul(optarg, NULL, 10);
        else if (c == 'r')
            reuseport = true;
        else
            return 2;
    }
    if (!mode || (strcmp(mode, "parse") && strcmp(mode, "canned")) || !cert_file || !key_file ||
        port > 65535) {
        fprintf(stderr, "usage: bench_baseline_server --mode parse|canned --port N --cert F "
                        "--key F [--threads N] [--reuseport]\n");
        return 2;
    }
    parse_mode = !strcmp(mode, "parse");
    if (!threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    char *cert = slurp(cert_file), *key = slurp(key_file);
    if (!cert || !key) {
        fprintf(stderr, "cannot read %s or %s\n", cert_file, key_file);
        return 1;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    /* one daemon with a pool of THREADS, or THREADS daemons of one thread
     * on the port, the first choosing it when it is 0 */
    unsigned n = reuseport ? threads : 1;
    struct MHD_Daemon **d = calloc(n, sizeof(*d));
    if (!d)
        return 1;
    for (unsigned i = 0; i < n; i++) {
        struct MHD_OptionItem o[] = {
            {MHD_OPTION_CONNECTION_TIMEOUT, 120, NULL},
            {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
            {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, NULL},
            {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"},
            {MHD_OPTION_HTTPS_MEM_CERT, 0, cert},
            {MHD_OPTION_HTTPS_MEM_KEY, 0, key},
            /* libmicrohttpd warns of a pool of one thread */
            reuseport ? (struct MHD_OptionItem){MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL}
                      : (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, threads, NULL},
            {MHD_OPTION_END, 0, NULL},
        };
        d[i] = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_TURBO |
                                    MHD_USE_ERROR_LOG | MHD_USE_TLS,
                                (uint16_t)port, NULL, NULL, handler, NULL, MHD_OPTION_ARRAY, o,
                                MHD_OPTION_END);
        if (!d[i]) {
            fprintf(stderr, "cannot start the server\n");
            return 1;
        }
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d[i], MHD_DAEMON_INFO_BIND_PORT);
        if (di)
            port = di->port;
    }
    printf("listening on 127.0.0.1:%u\n", port);
    fflush(stdout);
    int sig;
    while (sigwait(&sigs, &sig) != 0)
        ;
    for (unsigned i = 0; i < n; i++)
        MHD_stop_daemon(d[i]);
    free(d);
    free(cert);
    free(key);
    return 0;
}
