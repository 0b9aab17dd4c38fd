#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "audit.h"
#include "cli.h"
#include "cli_args.h"
#include "config.h"
#include "gq_log.h"
#include "kube.h"
#include "kubestore.h"
#include "metrics.h"
#include "mutate_http.h"
#include "server.h"
#include "validate.h"

const char gq_cmd_webhook_summary[] = "run the admission webhook HTTPS server";

#define DRAIN_DEFAULT_S 20 /* inside the default 30 s terminationGracePeriodSeconds */

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota webhook --tls-cert FILE --tls-key FILE [--listen [HOST]:PORT]\n"
               "                        [--config FILE] [--kubeconfig FILE] [--threads N]\n"
               "                        [--drain-seconds N] [--reservation-ttl DURATION]\n"
               "                        [--trusted-user NAME]... [--max-body-memory SIZE]\n"
               "                        [--read-timeout DURATION] [--max-connections N]\n"
               "                        [--max-connections-per-ip N]\n"
               "                        [--client-ca FILE [--client-cn NAME]...]\n"
               "\n"
               "Serves /mutate and /validate over HTTPS (TLS 1.2+), plus /healthz, /readyz\n"
               "and /metrics. --listen defaults to :8443 (all addresses); port 0 picks a\n"
               "free port, logged as \"listening on HOST:PORT\". The certificate files are\n"
               "re-read when they change. SIGTERM/SIGINT: /readyz turns 503, the listener\n"
               "closes, requests in flight get up to --drain-seconds (20) to finish.\n"
               "SIGHUP reopens the audit log.\n"
               "\n"
               "/validate charges GPUQuotas and GPUTenantQuotas through the API server named\n"
               "by --kubeconfig (else the in-cluster configuration); without either it is\n"
               "not served. /readyz turns ready once the quota caches have synced.\n"
               "/mutate applies GPULimitRange defaults from the same caches (none without a\n"
               "cluster). Both webhooks write the audit log of the configuration.\n"
               "--reservation-ttl (default 2m; 90s, 2m, 1h or seconds) is how long a charge\n"
               "holds before the controller has counted the pod. --trusted-user (repeatable)\n"
               "replaces the identities allowed to change gpuquota.io/ labels and\n"
               "annotations of pods (default: gpuquota's webhook and controller accounts).\n"
               "\n"
               "Abuse limits: request bodies buffered at once share --max-body-memory\n"
               "(default 32Mi; a request that would exceed it gets 503 with Retry-After at\n"
               "once); each body is at most 3 MiB (413). A request, TLS handshake included,\n"
               "must arrive whole within --read-timeout (default 10s) or its connection is\n"
               "closed. At most --max-connections (1024) connections, and at most\n"
               "--max-connections-per-ip from one peer address (256, or a quarter of\n"
               "--max-connections when that is less).\n"
               "--client-ca FILE (PEM bundle, reloaded with the certificate): /mutate and\n"
               "/validate then answer 403 unless the client presents a certificate from\n"
               "it (clientAuth) whose subject CN is one of --client-cn (repeatable; any CN\n"
               "when none is given). /healthz, /readyz and /metrics need none.\n");
}

/* The host part for the "listening on" line: what was asked, or the
 * wildcard when the host was left out. */
static void listen_host(const char *listen, char *buf, size_t cap)
{
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : 0;
    if (n == 0) {
        snprintf(buf, cap, "[::]");
        return;
    }
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, listen, n);
    buf[n] = '\0';
}

/* A repeatable option's value, kept in list (at most max of them). */
static gq_code append_arg(const char *opt, const char **list, size_t *n, size_t max,
                          const char *value, gq_err *err)
{
    if (*n == max)
        return gq_err_set(err, GQ_ELIMIT, "at most %zu %s", max, opt);
    list[(*n)++] = value;
    return GQ_OK;
}

/* Every connection is a descriptor: raise the soft open-file limit to what
 * max_connections needs (plus the API client, the audit log, the
 * listener), within the hard limit. */
static void raise_nofile(unsigned max_connections)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_connections + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < want)
        GQ_WARN("the open-file limit (%ju) is below --max-connections + 64 (%ju): connections "
                "past it are refused",
                (uintmax_t)rl.rlim_cur, (uintmax_t)want);
}

/* ---- the audit log and /mutate ------------------------------------------ */

static uint64_t audit_errors(const void *a)
{
    return wh_audit_errors(a);
}

static uint64_t audit_records(const void *a)
{
    return wh_audit_records(a);
}

/* Open the audit log of the config (both webhooks write to it), move its
 * writing to a thread and export its counters in /metrics. */
static gq_code audit_setup(const gq_config *cfg, wh_metrics *metrics, wh_audit **out, gq_err *err)
{
    wh_audit *a = NULL;
    gq_code rc = wh_audit_open(&cfg->audit, &a, err);
    if (rc)
        return rc;
    /* Request handlers only queue records; a writer thread does the I/O. */
    if (wh_audit_start_writer(a))
        GQ_WARN("audit log: no writer thread; request handlers write records themselves");
    if ((rc = wh_metrics_add_external_counter(
             metrics, "gpuquota_audit_write_errors_total",
             "Audit records that could not be written (each is also logged).", audit_errors, a)) ||
        (rc = wh_metrics_add_external_counter(metrics, "gpuquota_audit_records_total",
                                              "Audit records written.", audit_records, a))) {
        wh_audit_close(a);
        return gq_err_set(err, rc, "audit metrics: %s", gq_strerror(rc));
    }
    *out = a;
    return GQ_OK;
}

/* Register /mutate. limit_ranges is where the GPULimitRanges of a namespace
 * come from, qsrc the quotas that may queue a pod: the informer caches of
 * the validating webhook's store when the webhook runs against a cluster,
 * none without one. */
static gq_code mutate_setup(wh_mutate_ctx *mc, const gq_config *cfg, wh_limit_range_source lr,
                            wh_queue_source qsrc, wh_audit *audit, wh_metrics *metrics,
                            wh_server *srv, gq_err *err)
{
    *mc = (wh_mutate_ctx){
        .cfg = cfg, .limit_ranges = lr, .queue = qsrc, .audit = audit, .metrics = metrics};
    return wh_server_add_handler(srv, "/mutate", WH_ROUTE_POST_JSON, wh_mutate_handle, mc, err);
}

/* ---- /validate: the quota store over the API server -------------------- */

typedef struct validate_ctx {
    kube_config *kcfg;
    kube_client *client;
    kube_api api;
    wh_kubestore *ks;
    wh_store store;
    wh_validator *v;
    wh_server *srv;
    pthread_t ready_thread;
    bool ready_started;
    atomic_int stop;
} validate_ctx;

/* "90s", "2m", "1h" or plain seconds, 1 s .. 1 day. */
static gq_code parse_duration_s(const char *opt, const char *s, long *out, gq_err *err)
{
    char num[16];
    size_t n = strlen(s);
    long mult = 1, v;
    if (n && strchr("smh", s[n - 1])) {
        mult = s[n - 1] == 's' ? 1 : s[n - 1] == 'm' ? 60 : 3600;
        n--;
    }
    if (!n || n >= sizeof(num) || strspn(s, "0123456789") != n)
        return gq_err_set(err, GQ_EINVAL, "%s %s: expected a duration such as 90s, 2m or 1h", opt,
                          s);
    memcpy(num, s, n);
    num[n] = '\0';
    v = strtol(num, NULL, 10); /* at most 15 digits: no overflow */
    if (v < 1 || v > 86400 / mult)
        return gq_err_set(err, GQ_ERANGE, "%s %s: must be between 1s and 24h", opt, s);
    *out = v * mult;
    return GQ_OK;
}

/* Mark the server ready once the caches have synced (/readyz). */
static void *ready_watch(void *arg)
{
    validate_ctx *vc = arg;
    while (!atomic_load(&vc->stop)) {
        if (wh_kubestore_synced(vc->ks)) {
            wh_server_set_ready(vc->srv, true);
            GQ_INFO("quota caches synced: ready");
            return NULL;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Connect to the API server, start the caches and register /validate,
 * auditing into audit (shared with /mutate). *served is false (and nothing
 * is set up) when there is no Kubernetes configuration at all. */
static gq_code validate_setup(validate_ctx *vc, const char *kubeconfig, const gq_config *cfg,
                              wh_audit *audit, wh_validate_opts *vo, wh_server *srv, bool *served,
                              gq_err *err)
{
    gq_code rc;
    kube_client_opts co = {
        .timeout_ms = 5000, .connect_timeout_ms = 3000, .user_agent = "gpuquota-webhook"};
    *served = false;
    vc->srv = srv;
    rc = kubeconfig ? kube_config_load_file(kubeconfig, NULL, &vc->kcfg, err)
                    : kube_config_load_incluster(NULL, &vc->kcfg, err);
    if (rc == GQ_ENOTFOUND && !kubeconfig) {
        GQ_WARN("no --kubeconfig and not running in a cluster: /validate is not served");
        return GQ_OK;
    }
    if (rc || (rc = kube_client_new(vc->kcfg, &co, &vc->client, err)))
        return rc;
    kube_client_api(vc->client, &vc->api);
    if ((rc = wh_kubestore_new(&vc->api, &vc->ks, err)))
        return rc;
    wh_kubestore_store(vc->ks, &vc->store);
    vo->audit = audit;
    if ((rc = wh_validator_new(cfg, &vc->store, vo, &vc->v, err)) ||
        (rc = wh_server_add_handler(srv, "/validate", WH_ROUTE_POST_JSON, wh_validate_handle, vc->v,
                                    err)) ||
        (rc = wh_kubestore_start(vc->ks, err)))
        return rc;
    *served = true;
    return GQ_OK;
}

static gq_code validate_start_ready(validate_ctx *vc, gq_err *err)
{
    if (pthread_create(&vc->ready_thread, NULL, ready_watch, vc))
        return gq_err_set(err, GQ_ENOMEM, "cannot start the readiness thread");
    vc->ready_started = true;
    return GQ_OK;
}

/* Before the server goes: the readiness thread touches it. */
static void validate_stop_ready(validate_ctx *vc)
{
    atomic_store(&vc->stop, 1);
    if (vc->ready_started)
        pthread_join(vc->ready_thread, NULL);
    vc->ready_started = false;
}

static void validate_teardown(validate_ctx *vc)
{
    validate_stop_ready(vc);
    wh_kubestore_free(vc->ks); /* stops the caches first */
    wh_validator_free(vc->v);
    kube_client_free(vc->client);
    kube_config_free(vc->kcfg);
}

int gq_cmd_webhook(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"tls-cert", required_argument, NULL, 'c'},
        {"tls-key", required_argument, NULL, 'k'},
        {"listen", required_argument, NULL, 'l'},
        {"config", required_argument, NULL, 'f'},
        {"kubeconfig", required_argument, NULL, 'K'},
        {"threads", required_argument, NULL, 't'},
        {"drain-seconds", required_argument, NULL, 'd'},
        {"reservation-ttl", required_argument, NULL, 'r'},
        {"trusted-user", required_argument, NULL, 'u'},
        {"max-body-memory", required_argument, NULL, 'M'},
        {"read-timeout", required_argument, NULL, 'T'},
        {"max-connections", required_argument, NULL, 'C'},
        {"max-connections-per-ip", required_argument, NULL, 'P'},
        {"client-ca", required_argument, NULL, 'A'},
        {"client-cn", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    wh_server_options so = {.listen = ":8443", .version = GQ_VERSION};
    const char *config_path = NULL, *kubeconfig = NULL;
    long threads = 0, drain_s = DRAIN_DEFAULT_S, ttl_s = WH_RESERVATION_TTL_DEFAULT;
    long read_timeout_s = WH_READ_TIMEOUT_DEFAULT, max_conns = WH_MAX_CONNECTIONS_DEFAULT,
         max_conns_ip = 0; /* 0: the server's default for max_conns */
    int64_t body_memory = (int64_t)WH_MAX_BODY_MEMORY_DEFAULT;
    const char *trusted[WH_TRUSTED_USERS_MAX];
    size_t n_trusted = 0;
    const char *client_cns[WH_MAX_CLIENT_CNS];
    validate_ctx vc;
    bool validating = false;
    memset(&vc, 0, sizeof(vc));
    gq_config *cfg = NULL;
    wh_metrics *metrics = NULL;
    wh_server *srv = NULL;
    wh_audit *audit = NULL;
    wh_mutate_ctx mutate_ctx;
    gq_err err;
    int c, exit_code = GQ_EXIT_USAGE;
    sigset_t sigs;

    gq_log_init();
    gq_err_clear(&err);
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            so.cert_file = optarg;
            break;
        case 'k':
            so.key_file = optarg;
            break;
        case 'l':
            so.listen = optarg;
            break;
        case 'f':
            config_path = optarg;
            break;
        case 'K':
            kubeconfig = optarg;
            break;
        case 't':
            if (gq_cli_parse_long("--threads", optarg, 1, 256, &threads, &err))
                goto usage_error;
            break;
        case 'd':
            if (gq_cli_parse_long("--drain-seconds", optarg, 0, 3600, &drain_s, &err))
                goto usage_error;
            break;
        case 'r':
            if (parse_duration_s("--reservation-ttl", optarg, &ttl_s, &err))
                goto usage_error;
            break;
        case 'u':
            if (append_arg("--trusted-user", trusted, &n_trusted, WH_TRUSTED_USERS_MAX, optarg,
                           &err))
                goto usage_error;
            break;
        case 'M':
            if (gq_cli_parse_bytes("--max-body-memory", optarg, (int64_t)WH_MAX_BODY_DEFAULT,
                                   (int64_t)1 << 32, &body_memory, &err))
                goto usage_error;
            break;
        case 'T':
            if (parse_duration_s("--read-timeout", optarg, &read_timeout_s, &err))
                goto usage_error;
            if (read_timeout_s > 300) {
                gq_err_set(&err, GQ_ERANGE, "--read-timeout %s: at most 5m", optarg);
                goto usage_error;
            }
            break;
        case 'C':
            if (gq_cli_parse_long("--max-connections", optarg, 16, 1000000, &max_conns, &err))
                goto usage_error;
            break;
        case 'P':
            if (gq_cli_parse_long("--max-connections-per-ip", optarg, 1, 1000000, &max_conns_ip,
                                  &err))
                goto usage_error;
            break;
        case 'A':
            so.client_ca_file = optarg;
            break;
        case 'N':
            if (append_arg("--client-cn", client_cns, &so.n_client_cns, WH_MAX_CLIENT_CNS, optarg,
                           &err))
                goto usage_error;
            break;
        case 'h':
            usage(stdout);
            return GQ_EXIT_OK;
        default:
            usage(stderr);
            return GQ_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        gq_err_set(&err, GQ_EINVAL, "unexpected argument %s", argv[optind]);
        goto usage_error;
    }
    if (!so.cert_file || !so.key_file) {
        gq_err_set(&err, GQ_EINVAL, "--tls-cert and --tls-key are required");
        goto usage_error;
    }
    if (so.n_client_cns && !so.client_ca_file) {
        gq_err_set(&err, GQ_EINVAL, "--client-cn needs --client-ca");
        goto usage_error;
    }
    if (max_conns_ip > max_conns) {
        gq_err_set(&err, GQ_EINVAL, "--max-connections-per-ip %ld exceeds --max-connections %ld",
                   max_conns_ip, max_conns);
        goto usage_error;
    }
    so.threads = (unsigned)threads;
    so.read_timeout_s = (unsigned)read_timeout_s;
    so.max_connections = (unsigned)max_conns;
    so.max_connections_per_ip = (unsigned)max_conns_ip;
    so.max_body_memory = (size_t)body_memory;
    so.client_cns = client_cns;
    raise_nofile(so.max_connections);

    if (gq_cli_load_config(config_path, &cfg, &err) || wh_metrics_new(GQ_VERSION, &metrics) ||
        (so.metrics = metrics, wh_server_new(&so, &srv, &err)))
        goto fail;

    /* Admission handlers, registered before the server starts. Both
     * webhooks write one audit log; /mutate reads GPULimitRanges from the
     * quota store's informer cache when there is a cluster, else none. */
    wh_validate_opts vo = {.reservation_ttl_s = ttl_s,
                           .trusted_users = n_trusted ? trusted : NULL,
                           .n_trusted_users = n_trusted,
                           .metrics = metrics};
    if (audit_setup(cfg, metrics, &audit, &err) ||
        validate_setup(&vc, kubeconfig, cfg, audit, &vo, srv, &validating, &err))
        goto fail;
    wh_limit_range_source lr = {NULL, NULL};
    wh_queue_source qsrc = {NULL, NULL, NULL, NULL};
    if (validating) {
        lr = (wh_limit_range_source){vc.store.ctx, vc.store.list_limit_ranges};
        qsrc = (wh_queue_source){vc.store.ctx, vc.store.list_quotas, vc.store.list_tenant_quotas,
                                 vc.store.namespace_labels};
    }
    if (mutate_setup(&mutate_ctx, cfg, lr, qsrc, audit, metrics, srv, &err))
        goto fail;

    /* Signals are taken synchronously by this thread: block them before the
     * server's threads exist so every thread inherits the mask. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP); /* reopen the audit log; must never kill us */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (wh_server_start(srv, &err))
        goto fail;
    char host[256];
    listen_host(so.listen, host, sizeof(host));
    GQ_INFO("listening on %s:%u", host, wh_server_port(srv));
    if (!validating)
        wh_server_set_ready(srv, true); /* no caches: ready as soon as we serve */
    else if (validate_start_ready(&vc, &err))
        goto fail;

    int sig = 0;
    for (;;) {
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            break;
        wh_audit_request_reopen(audit);
        GQ_INFO("received SIGHUP: the audit log is reopened before the next record");
    }
    GQ_INFO("received %s: draining for up to %ld s", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            drain_s);
    unsigned left = wh_server_stop(srv, (unsigned)drain_s * 1000u);
    if (left)
        GQ_WARN("stopped with %u request(s) still in flight", left);
    else
        GQ_INFO("stopped");
    exit_code = GQ_EXIT_OK;
    goto out;

usage_error:
    fprintf(stderr, "gpuquota webhook: %s\n", err.msg);
    usage(stderr);
    goto out;
fail:
    GQ_ERROR("%s", err.msg[0] ? err.msg : "out of memory");
    exit_code = 1;
out:
    validate_stop_ready(&vc);
    wh_server_free(srv); /* handlers are gone before what they use */
    validate_teardown(&vc);
    wh_audit_close(audit); /* writes what is still queued */
    wh_metrics_free(metrics);
    gq_config_free(cfg);
    return exit_code;
}
