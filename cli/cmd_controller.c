/* gpuquota controller: keeps GPUQuota / GPUTenantQuota status in sync with
 * the pods of the cluster (controller/ctl.h); /metrics, /healthz and /readyz
 * over plain HTTP. */
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
#include "http/server.h"

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
            "  --workers N              reconcile threads (8)\n"
            "  --reservation-grace D    drop a reservation whose pod has not appeared this long\n"
            "                           after it was first seen (default: the longest timeout\n"
            "                           of the other validating webhooks that see pod creates,\n"
            "                           plus 5s; 35s when they cannot be read)\n"
            "SIGTERM/SIGINT: stop reconciling, release the Lease, exit.\n");
}

/* A Go-style duration with one unit: "500ms", "30s", "5m", "1h" (a bare
 * number is seconds). Between 1 s and 24 h. */
static gq_code parse_duration_ms(const char *opt, const char *s, void *dst, gq_err *err)
{
    long *out = dst;
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

/* What the command line asks for (strings borrowed from argv). */
typedef struct controller_args {
    const char *config_path, *kubeconfig, *metrics_listen;
    bool leader_elect;
    const char *lease_namespace, *lease_name;
    long workers, resync_ms, reservation_grace_ms;
} controller_args;

/* argv into *a. -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, controller_args *a)
{
    memset(a, 0, sizeof(*a));
    a->metrics_listen = ":8080";
    a->workers = CTL_WORKERS;
    a->resync_ms = 300000;
    const gq_cli_opt opts[] = {
        {.name = "--kubeconfig", .kind = GQ_OPT_STRING, .dst = &a->kubeconfig},
        {.name = "--config", .kind = GQ_OPT_STRING, .dst = &a->config_path},
        {.name = "--leader-elect", .kind = GQ_OPT_FLAG, .dst = &a->leader_elect},
        {.name = "--lease-namespace", .kind = GQ_OPT_STRING, .dst = &a->lease_namespace},
        {.name = "--lease-name", .kind = GQ_OPT_STRING, .dst = &a->lease_name},
        {.name = "--metrics-listen", .kind = GQ_OPT_STRING, .dst = &a->metrics_listen},
        {.name = "--resync", .kind = GQ_OPT_FN, .dst = &a->resync_ms, .fn = parse_duration_ms},
        {.name = "--workers", .kind = GQ_OPT_LONG, .dst = &a->workers, .min = 1, .max = 64},
        {.name = "--reservation-grace",
         .kind = GQ_OPT_FN,
         .dst = &a->reservation_grace_ms,
         .fn = parse_duration_ms},
    };
    return gq_cli_parse_or_exit("controller", argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                                NULL, NULL, usage);
}

int gq_cmd_controller(int argc, char **argv)
{
    controller_args a;
    ctl_controller_opts co = {0};
    wh_server_options so = {.insecure_plain_http = true, .threads = 1, .version = GQ_VERSION};
    gq_config *cfg = NULL;
    kube_config *kc = NULL;
    kube_client *client = NULL;
    kube_api api;
    ctl_controller *ctl = NULL;
    http_metrics *registry = NULL;
    wh_server *srv = NULL;
    gq_err err;
    int exit_code;
    sigset_t sigs;

    gq_log_init();
    gq_err_clear(&err);
    if ((exit_code = parse_args(argc, argv, &a)) >= 0)
        return exit_code;
    const char *config_path = a.config_path, *kubeconfig = a.kubeconfig;
    long workers = a.workers, resync_ms = a.resync_ms;
    so.listen = a.metrics_listen;
    co.leader_elect = a.leader_elect;
    co.lease_namespace = a.lease_namespace;
    co.lease_name = a.lease_name;
    co.reservation_grace_ms = a.reservation_grace_ms;

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
    if (http_metrics_new(GQ_VERSION, &registry))
        goto fail;
    co.metrics = so.metrics = registry;
    if (ctl_controller_new(&co, &ctl, &err) || wh_server_new(&so, &srv, &err) ||
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

fail:
    GQ_ERROR("%s", err.msg[0] ? err.msg : "out of memory");
    exit_code = 1;
out:
    wh_server_free(srv);
    ctl_controller_free(ctl);
    http_metrics_free(registry);
    kube_client_free(client);
    kube_config_free(kc);
    gq_config_free(cfg);
    return exit_code;
}
