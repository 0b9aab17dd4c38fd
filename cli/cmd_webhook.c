#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "config.h"
#include "gq_log.h"
#include "metrics.h"
#include "server.h"

const char gq_cmd_webhook_summary[] = "run the admission webhook HTTPS server";

#define CONFIG_MAX ((size_t)1 << 20)
#define DRAIN_DEFAULT_S 20 /* inside the default 30 s terminationGracePeriodSeconds */

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota webhook --tls-cert FILE --tls-key FILE [--listen [HOST]:PORT]\n"
               "                        [--config FILE] [--kubeconfig FILE] [--threads N]\n"
               "                        [--drain-seconds N]\n"
               "\n"
               "Serves /mutate and /validate over HTTPS (TLS 1.2+), plus /healthz, /readyz\n"
               "and /metrics. --listen defaults to :8443 (all addresses); port 0 picks a\n"
               "free port, logged as \"listening on HOST:PORT\". The certificate files are\n"
               "re-read when they change. SIGTERM/SIGINT: /readyz turns 503, the listener\n"
               "closes, requests in flight get up to --drain-seconds (20) to finish.\n"
               "SIGHUP reopens the audit log.\n");
}

static gq_code load_config(const char *path, gq_config **out, gq_err *err)
{
    gq_code rc;
    char *buf = NULL;
    size_t len = 0;
    if (!path)
        return gq_config_default(out, err);
    rc = gq_cli_read_file(path, CONFIG_MAX, &buf, &len, err);
    if (!rc)
        rc = gq_config_parse(buf, len, path, out, err);
    free(buf);
    return rc;
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    wh_server_options so = {.listen = ":8443", .version = GQ_VERSION};
    const char *config_path = NULL, *kubeconfig = NULL;
    long threads = 0, drain_s = DRAIN_DEFAULT_S;
    gq_config *cfg = NULL;
    wh_metrics *metrics = NULL;
    wh_server *srv = NULL;
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
    so.threads = (unsigned)threads;

    if (load_config(config_path, &cfg, &err) || wh_metrics_new(GQ_VERSION, &metrics) ||
        (so.metrics = metrics, wh_server_new(&so, &srv, &err)))
        goto fail;

    /* ---- admission handlers ------------------------------------------
     * /mutate and /validate are registered here, before the server starts:
     *   wh_server_add_handler(srv, "/mutate", WH_ROUTE_POST_JSON,
     *                         wh_handle_mutate, &admission_ctx, &err);
     *   wh_server_add_handler(srv, "/validate", WH_ROUTE_POST_JSON,
     *                         wh_handle_validate, &admission_ctx, &err);
     * with admission_ctx holding cfg, metrics and (with --kubeconfig) the
     * kube client and caches. Readiness below waits for those caches. */
    (void)kubeconfig;

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
    wh_server_set_ready(srv, true); /* no caches yet: ready as soon as we serve */

    int sig = 0;
    for (;;) {
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            break;
        /* SLOT: wh_audit_request_reopen(audit) once the admission handlers
         * open the audit log. */
        GQ_INFO("received SIGHUP");
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
    wh_server_free(srv);
    wh_metrics_free(metrics);
    gq_config_free(cfg);
    return exit_code;
}
