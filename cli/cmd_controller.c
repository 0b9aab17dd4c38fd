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
#include "cli/daemon.h"
#include "quota/config.h"
#include "controller/ctl.h"
#include "common/gq_log.h"
#include "kube/kube.h"
#include "http/server.h"

const char cli_cmd_controller_summary[] =
    "reconcile GPUQuota and GPUTenantQuota status from the pods of the cluster";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuquota controller [--kubeconfig FILE] [--config FILE] [--leader-elect]\n"
            "                           [--lease-namespace NS] [--lease-name NAME]\n"
            "                           [--metrics-listen [HOST]:PORT] [--resync DURATION]\n"
            "                           [--workers N] [--ungate-inflight N]\n"
            "                           [--reservation-grace DURATION]\n"
            "\n"
            "Recounts quota usage from pods, writes status (used, reservations, conditions),\n"
            "expires reservations and records an Exceeded event when usage passes hard.\n"
            "  --kubeconfig FILE        kubeconfig (default: $KUBECONFIG, else in-cluster)\n"
            "  --config FILE            gpuquota configuration (prices pods; default built in)\n"
            "  --leader-elect           reconcile only while holding a coordination.k8s.io Lease\n"
            "  --lease-namespace NS     namespace of the Lease (default: the one it runs in,\n"
            "                           $POD_NAMESPACE, else the in-cluster service account's,\n"
            "                           else gpuquota-system)\n"
            "  --lease-name NAME        name of the Lease (gpuquota-controller)\n"
            "  --metrics-listen ADDR    plain-HTTP /metrics, /healthz, /readyz (:8080)\n"
            "  --resync DURATION        full resync period, e.g. 30s, 5m (5m)\n"
            "  --workers N              reconcile threads (8)\n"
            "  --ungate-inflight N      requests the admission pass of queued pods keeps in\n"
            "                           flight at once: charges, ungates, Events (48)\n"
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
        if (cli_parse_long(opt, num, 0, 86400000L / units[i].ms, &v, NULL))
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
    long workers, ungate_inflight, resync_ms, reservation_grace_ms;
} controller_args;

/* argv into *a. -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, void *args)
{
    controller_args *a = args;
    memset(a, 0, sizeof(*a));
    a->metrics_listen = ":8080";
    a->workers = CTL_WORKERS;
    a->ungate_inflight = CTL_UNGATE_INFLIGHT;
    a->resync_ms = 300000;
    const cli_opt opts[] = {
        {.name = "--kubeconfig", .kind = CLI_OPT_STRING, .dst = &a->kubeconfig},
        {.name = "--config", .kind = CLI_OPT_STRING, .dst = &a->config_path},
        {.name = "--leader-elect", .kind = CLI_OPT_FLAG, .dst = &a->leader_elect},
        {.name = "--lease-namespace", .kind = CLI_OPT_STRING, .dst = &a->lease_namespace},
        {.name = "--lease-name", .kind = CLI_OPT_STRING, .dst = &a->lease_name},
        {.name = "--metrics-listen", .kind = CLI_OPT_STRING, .dst = &a->metrics_listen},
        {.name = "--resync", .kind = CLI_OPT_FN, .dst = &a->resync_ms, .fn = parse_duration_ms},
        {.name = "--workers", .kind = CLI_OPT_LONG, .dst = &a->workers, .min = 1, .max = 64},
        {.name = "--ungate-inflight",
         .kind = CLI_OPT_LONG,
         .dst = &a->ungate_inflight,
         .min = 1,
         .max = CTL_UNGATE_INFLIGHT_MAX},
        {.name = "--reservation-grace",
         .kind = CLI_OPT_FN,
         .dst = &a->reservation_grace_ms,
         .fn = parse_duration_ms},
    };
    return cli_parse_or_exit(&(cli_cmd){"controller", opts, sizeof(opts) / sizeof(opts[0]), usage},
                             argc, argv, NULL, NULL);
}

/* The running controller: what it set up and frees at the end. */
typedef struct controller_run {
    http_server_options so;
    gq_config *cfg;
    kube_config *kc;
    kube_client *client;
    kube_api api;
    http_metrics *registry; /* the controller's families and the server's */
    ctl_controller *ctl;
    http_server *srv;
} controller_run;

/* The configuration and a client of the API server. */
static gq_code connect_cluster(controller_run *r, const controller_args *a, gq_err *err)
{
    gq_code rc;
    if ((rc = cli_load_config(a->config_path, &r->cfg, err)) ||
        (rc = kube_config_load_default(a->kubeconfig, NULL, &r->kc, err)) ||
        (rc = kube_client_new(r->kc, NULL, &r->client, err)))
        return rc;
    kube_client_api(r->client, &r->api);
    return GQ_OK;
}

/* The controller, and the server of its /metrics, /healthz and /readyz. */
static gq_code start(controller_run *r, const controller_args *a, gq_err *err)
{
    gq_code rc;
    const char *lease_ns = a->lease_namespace;
    if (!lease_ns && (rc = cli_own_namespace(r->kc, &lease_ns, err)))
        return rc;
    ctl_controller_opts co = {.leader_elect = a->leader_elect,
                              .lease_namespace = lease_ns,
                              .lease_name = a->lease_name,
                              .reservation_grace_ms = a->reservation_grace_ms,
                              .api = &r->api,
                              .cfg = r->cfg,
                              .workers = (unsigned)a->workers,
                              .ungate_inflight = (unsigned)a->ungate_inflight,
                              .resync_ms = a->resync_ms};
    if ((rc = http_metrics_new(GQ_VERSION, &r->registry)))
        return gq_err_oom(err);
    co.metrics = r->so.metrics = r->registry;
    if ((rc = ctl_controller_new(&co, &r->ctl, err)) ||
        (rc = http_server_new(&r->so, &r->srv, err)) || (rc = http_server_start(r->srv, err)))
        return rc;
    GQ_INFO("metrics listening on port %u", http_server_port(r->srv));
    if ((rc = ctl_controller_start(r->ctl, err)))
        return rc;
    GQ_INFO("controller started (API server %s%s)", r->kc->server,
            a->leader_elect ? ", leader election on" : "");
    return GQ_OK;
}

/* Connected to the cluster, the controller started and its server listening. */
static gq_code start_all(void *run, const void *args, gq_err *err)
{
    controller_run *r = run;
    const controller_args *a = args;
    r->so = (http_server_options){.insecure_plain_http = true,
                                  .threads = 1,
                                  .version = GQ_VERSION,
                                  .listen = a->metrics_listen};
    gq_code rc = connect_cluster(r, a, err);
    return rc ? rc : start(r, a, err);
}

/* Ready while the controller's caches are synced, until SIGTERM or SIGINT;
 * then stop reconciling and serving. */
static void run_until_stopped(void *run, const void *args, const sigset_t *sigs)
{
    controller_run *r = run;
    int sig = 0;
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 200 * 1000000L};
    (void)args;
    for (;;) {
        sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT)
            break;
        bool synced = ctl_controller_synced(r->ctl);
        if (http_server_is_ready(r->srv) != synced)
            http_server_set_ready(r->srv, synced);
    }
    GQ_INFO("received %s: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    http_server_set_ready(r->srv, false);
    ctl_controller_stop(r->ctl);
    http_server_stop(r->srv, 1000);
    GQ_INFO("stopped");
}

static void teardown(void *run)
{
    controller_run *r = run;
    http_server_free(r->srv);
    ctl_controller_free(r->ctl);
    http_metrics_free(r->registry);
    kube_client_free(r->client);
    kube_config_free(r->kc);
    gq_config_free(r->cfg);
}

static const cli_daemon controller_steps = {
    .parse = parse_args, .start = start_all, .serve = run_until_stopped, .teardown = teardown};

int cli_cmd_controller(int argc, char **argv)
{
    controller_args a;
    controller_run r;
    return cli_daemon_main(&controller_steps, &a, &r, sizeof(r), argc, argv);
}
