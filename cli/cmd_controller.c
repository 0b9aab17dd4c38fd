/* gpuquota controller: keeps GPUQuota / GPUTenantQuota status in sync with
 * the pods of the cluster (controller/ctl.h); /metrics, /healthz and /readyz
 * over plain HTTP. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "quota/config.h"
#include "controller/ctl.h"
#include "common/gq_log.h"
#include "kube/kube.h"
#include "webhook/server.h"

const char gq_cmd_controller_summary[] =
    "reconcile GPUQuota and GPUTenantQuota status from the pods of the cluster";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuquota controller [--kubeconfig FILE] [--config FILE] [--leader-elect]\n"
            "                           [--lease-namespace NS] [--lease-name NAME]\n"
            "                           [--metrics-listen [HOST]:PORT] [--resync DURATION]\n"
            "                           [--workers N] [--reservation-grace DURATION]\n"
            "\n"
            "Recounts quota usage from pods, writes status (used, reservations, conditions),\n"
            "expires reservations and records an Exceeded event when usage passes hard.\n"
            "  --kubeconfig FILE        kubeconfig (default: $KUBECONFIG, else in-cluster)\n"
            "  --config FILE            gpuquota configuration (prices pods; default built in)\n"
            "  --leader-elect           reconcile only while holding a coordination.k8s.io Lease\n"
            "  --lease-namespace NS     namespace of the Lease (gpuquota-system)\n"
            "  --lease-name NAME        name of the Lease (gpuquota-controller)\n"
            "  --metrics-listen ADDR    plain-HTTP /metrics, /healthz, /readyz (:8080)\n"
            "  --resync DURATION        full resync period, e.g. 30s, 5m (5m)\n"
            "  --workers N              reconcile threads (2)\n"
            "  --reservation-grace D    drop a reservation whose pod has not appeared this long\n"
            "                           after it was first seen (35s: the 30 s webhook timeout\n"
            "                           bound on admission, plus slack)\n"
            "SIGTERM/SIGINT: stop reconciling, release the Lease, exit.\n");
}

/* A Go-style duration with one unit: "500ms", "30s", "5m", "1h" (a bare
 * number is seconds). Between 1 s and 24 h. */
static gq_code parse_duration_ms(const char *opt, const char *s, long *out, gq_err *err)
{
    static const struct {
        const char *suffix;
        long ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1000}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t sl = strlen(units[i].suffix), n = strlen(s);
        if (n <= sl || strcmp(s + n - sl, units[i].suffix) != 0)
            continue;
        char num[32];
        if (n - sl >= sizeof num)
            break;
        memcpy(num, s, n - sl);
        num[n - sl] = '\0';
        long v;
        if (gq_cli_parse_long(opt, num, 0, 86400000L / units[i].ms, &v, NULL))
            continue;
        long ms = v * units[i].ms;
        if (ms < 1000)
            break;
        *out = ms;
        return GQ_OK;
    }
    return gq_err_set(err, GQ_EINVAL, "%s: \"%s\" is not a duration between 1s and 24h", opt, s);
}

static void handle_metrics(void *ctx, const wh_request *req, wh_response *resp)
{
    char *text = NULL;
    size_t len = 0;
    if (ctl_controller_metrics(ctx, &text, &len)) {
        wh_response_error(resp, 500, "out of memory rendering metrics");
        return;
    }
    wh_response_take_body(resp, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

int gq_cmd_controller(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kubeconfig", required_argument, NULL, 'K'},
        {"config", required_argument, NULL, 'f'},
        {"leader-elect", no_argument, NULL, 'L'},
        {"lease-namespace", required_argument, NULL, 'n'},
        {"lease-name", required_argument, NULL, 'N'},
        {"metrics-listen", required_argument, NULL, 'm'},
        {"resync", required_argument, NULL, 'r'},
        {"workers", required_argument, NULL, 'w'},
        {"reservation-grace", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *kubeconfig = NULL;
    ctl_controller_opts co = {0};
    wh_server_options so = {
        .listen = ":8080", .insecure_plain_http = true, .threads = 1, .version = GQ_VERSION};
    long workers = 2, resync_ms = 300000;
    gq_config *cfg = NULL;
    kube_config *kc = NULL;
    kube_client *client = NULL;
    kube_api api;
    ctl_controller *ctl = NULL;
    wh_server *srv = NULL;
    gq_err err;
    int c, exit_code = GQ_EXIT_USAGE;
    sigset_t sigs;

    gq_log_init();
    gq_err_clear(&err);
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'K':
            kubeconfig = optarg;
            break;
        case 'f':
            config_path = optarg;
            break;
        case 'L':
            co.leader_elect = true;
            break;
        case 'n':
            co.lease_namespace = optarg;
            break;
        case 'N':
            co.lease_name = optarg;
            break;
        case 'm':
            so.listen = optarg;
            break;
        case 'r':
            if (parse_duration_ms("--resync", optarg, &resync_ms, &err))
                goto usage_error;
            break;
        case 'w':
            if (gq_cli_parse_long("--workers", optarg, 1, 64, &workers, &err))
                goto usage_error;
            break;
        case 'g':
            if (parse_duration_ms("--reservation-grace", optarg, &co.reservation_grace_ms, &err))
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

    /* Signals are taken synchronously by this thread: block them before any
     * other thread exists so every thread inherits the mask. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (gq_cli_load_config(config_path, &cfg, &err) ||
        kube_config_load_default(kubeconfig, NULL, &kc, &err) ||
        kube_client_new(kc, NULL, &client, &err))
        goto fail;
    kube_client_api(client, &api);
    co.api = &api;
    co.cfg = cfg;
    co.workers = (unsigned)workers;
    co.resync_ms = resync_ms;
    if (ctl_controller_new(&co, &ctl, &err) || wh_server_new(&so, &srv, &err) ||
        wh_server_add_handler(srv, "/metrics", WH_ROUTE_GET, handle_metrics, ctl, &err) ||
        wh_server_start(srv, &err))
        goto fail;
    GQ_INFO("metrics listening on port %u", wh_server_port(srv));
    if (ctl_controller_start(ctl, &err))
        goto fail;
    GQ_INFO("controller started (API server %s%s)", kc->server,
            co.leader_elect ? ", leader election on" : "");

    int sig = 0;
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 200 * 1000000L};
    for (;;) {
        sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT)
            break;
        bool synced = ctl_controller_synced(ctl);
        if (wh_server_is_ready(srv) != synced)
            wh_server_set_ready(srv, synced);
    }
    GQ_INFO("received %s: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    wh_server_set_ready(srv, false);
    ctl_controller_stop(ctl);
    wh_server_stop(srv, 1000);
    GQ_INFO("stopped");
    exit_code = GQ_EXIT_OK;
    goto out;

usage_error:
    fprintf(stderr, "gpuquota controller: %s\n", err.msg);
    usage(stderr);
    goto out;
fail:
    GQ_ERROR("%s", err.msg[0] ? err.msg : "out of memory");
    exit_code = 1;
out:
    ctl_controller_free(ctl);
    wh_server_free(srv);
    kube_client_free(client);
    kube_config_free(kc);
    gq_config_free(cfg);
    return exit_code;
}
