#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "webhook/audit.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/daemon.h"
#include "quota/config.h"
#include "common/gq_log.h"
#include "common/heap.h"
#include "common/strutil.h"
#include "kube/kube.h"
#include "webhook/escrow.h"
#include "webhook/kubestore.h"
#include "webhook/metrics.h"
#include "webhook/mutate_http.h"
#include "http/server.h"
#include "webhook/validate.h"

const char cli_cmd_webhook_summary[] = "run the admission webhook HTTPS server";

#define DRAIN_DEFAULT_S 20 /* inside the default 30 s terminationGracePeriodSeconds */

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota webhook --tls-cert FILE --tls-key FILE [--listen [HOST]:PORT]\n"
               "                        [--config FILE] [--kubeconfig FILE] [--threads N]\n"
               "                        [--drain-seconds N] [--shutdown-delay-seconds N]\n"
               "                        [--reservation-ttl DURATION]\n"
               "                        [--trusted-user NAME]... [--max-body-memory SIZE]\n"
               "                        [--max-decoded-memory SIZE]\n"
               "                        [--read-timeout DURATION] [--max-connections N]\n"
               "                        [--max-connections-per-ip N] [--max-batch N]\n"
               "                        [--escrow-pods N]\n"
               "                        [--client-ca FILE [--client-cn NAME]...]\n"
               "\n"
               "Serves /mutate and /validate over HTTPS (TLS 1.2+), plus /healthz, /readyz\n"
               "and /metrics. --listen defaults to :8443 (all addresses); port 0 picks a\n"
               "free port, logged as \"listening on HOST:PORT\". The certificate files are\n"
               "re-read when they change. SIGTERM/SIGINT: /readyz turns 503 and every reply\n"
               "closes its connection; for --shutdown-delay-seconds (default 0; the shipped\n"
               "manifests set 5) new connections are still served, so none fails while the\n"
               "Service's endpoints drop the pod (a second signal ends the delay); then the\n"
               "listener closes and requests in flight get up to --drain-seconds (20).\n"
               "SIGHUP reopens the audit log.\n"
               "\n"
               "/validate charges GPUQuotas and GPUTenantQuotas through the API server named\n"
               "by --kubeconfig (else the in-cluster configuration); without either it is\n"
               "not served. /readyz turns ready once the quota caches have synced.\n"
               "/mutate applies GPULimitRange defaults from the same caches (none without a\n"
               "cluster). Both webhooks write the audit log of the configuration.\n"
               "--reservation-ttl (default 2m; 90s, 2m, 1h or seconds) is how long a charge\n"
               "holds before the controller has counted the pod. --trusted-user (repeatable)\n"
               "replaces the identities allowed to change gpuquota.io/ labels, annotations\n"
               "and gates of pods and the pins of ResourceClaims (default: gpuquota's\n"
               "webhook and controller accounts in the namespace it runs in: $POD_NAMESPACE,\n"
               "else the in-cluster service account's, else gpuquota-system).\n"
               "--max-batch N (default 256) is how many charges against one quota one\n"
               "status write may carry (group commit); 1 writes each charge on its own.\n"
               "--escrow-pods N (default 0: off; at most 256): a replica holds up to N pods'\n"
               "worth of a Deny GPUQuota's free room, taken in the charge's own write, and\n"
               "admits later pods against it with no write each (docs/validating-webhook.md,\n"
               "Escrow).\n"
               "\n"
               "Abuse limits: request bodies buffered at once share --max-body-memory\n"
               "(default 32Mi; a request that would exceed it gets 503 with Retry-After at\n"
               "once); each body is at most 3 MiB (413). The reviews being decided share\n"
               "--max-decoded-memory (default 32Mi) for their decoded JSON, which costs\n"
               "many times its text: past it a review gets 503 with Retry-After; one that\n"
               "alone would take half of it (a GPU pod's with the copies its decision\n"
               "makes) is denied. The TLS handshake, and each request, must arrive whole\n"
               "within --read-timeout (default 10s) or the connection is closed. At most\n"
               "--max-connections (1024) connections, and at most --max-connections-per-ip\n"
               "from one peer address (256, or a quarter of --max-connections when that is\n"
               "less). Without --threads, one server thread per CPU, at most 8.\n"
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
static gq_code audit_setup(const gq_config *cfg, http_metrics *metrics, wh_audit **out, gq_err *err)
{
    wh_audit *a = NULL;
    gq_code rc = wh_audit_open(&cfg->audit, &a, err);
    if (rc)
        return rc;
    /* Request handlers only queue records; a writer thread does the I/O. */
    if (wh_audit_start_writer(a))
        GQ_WARN("audit log: no writer thread; request handlers write records themselves");
    if ((rc = http_metrics_add_external_counter(
             metrics, "gpuquota_audit_write_errors_total",
             "Audit records that could not be written (each is also logged).", audit_errors, a)) ||
        (rc = http_metrics_add_external_counter(metrics, "gpuquota_audit_records_total",
                                                "Audit records written.", audit_records, a))) {
        wh_audit_close(a);
        return gq_err_set(err, rc, "audit metrics: %s", gq_strerror(rc));
    }
    *out = a;
    return GQ_OK;
}

/* Register /mutate. store is where the GPULimitRanges of a namespace (and
 * the quotas a choice of GPU models is made by, and that may queue a pod,
 * and the claims it prices) come from: the validating webhook's store (its
 * informer caches) when the webhook runs against a cluster, NULL without. */
static gq_code mutate_setup(wh_mutate_ctx *mc, const gq_config *cfg, const wh_store *store,
                            wh_audit *audit, wh_metrics *metrics, http_server *srv, gq_err *err)
{
    *mc = (wh_mutate_ctx){.cfg = cfg, .store = store, .audit = audit, .metrics = metrics};
    return http_server_add_handler(srv, "/mutate", HTTP_ROUTE_POST_JSON, wh_mutate_handle, mc, err);
}

/* ---- /validate: the quota store over the API server -------------------- */

typedef struct validate_ctx {
    kube_config *kcfg;
    kube_client *client;
    kube_api api;
    wh_kubestore *ks;
    wh_store store;
    wh_validator *v;
    http_server *srv;
    pthread_t ready_thread;
    bool ready_started;
    bool served; /* /validate is registered */
    atomic_int stop;
    char trusted[2][128]; /* gpuquota's accounts in its namespace (no --trusted-user) */
    const char *trusted_v[2];
} validate_ctx;

/* "90s", "2m", "1h" or plain seconds, 1 s .. 1 day. */
static gq_code parse_duration_s(const char *opt, const char *s, void *dst, gq_err *err)
{
    long *out = dst;
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
            http_server_set_ready(vc->srv, true);
            GQ_INFO("quota caches synced: ready");
            return NULL;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Without --trusted-user: gpuquota's own accounts, in the namespace it runs
 * in, so that a release installed elsewhere than gpuquota-system still
 * ungates. */
static gq_code trust_own_accounts(validate_ctx *vc, wh_validate_opts *vo, gq_err *err)
{
    const char *ns;
    gq_code rc = cli_own_namespace(vc->kcfg, &ns, err);
    if (rc)
        return rc;
    snprintf(vc->trusted[0], sizeof vc->trusted[0], "system:serviceaccount:%s:gpuquota-webhook",
             ns);
    snprintf(vc->trusted[1], sizeof vc->trusted[1], "system:serviceaccount:%s:gpuquota-controller",
             ns);
    vc->trusted_v[0] = vc->trusted[0];
    vc->trusted_v[1] = vc->trusted[1];
    vo->trusted_users = vc->trusted_v;
    vo->n_trusted_users = 2;
    GQ_INFO("trusted to change gpuquota's keys, gates and pins: %s, %s", vc->trusted[0],
            vc->trusted[1]);
    return GQ_OK;
}

/* The caches saw a GPUQuota ask for escrowed room back. */
static void validator_wanted(void *ud, const char *ns, const char *name)
{
    wh_validator_escrow_wanted(ud, ns, name);
}

/* Connect to the API server, start the caches and register /validate,
 * auditing into vo->audit (shared with /mutate). vc->served is false (and
 * nothing is set up) when there is no Kubernetes configuration at all. */
static gq_code validate_setup(validate_ctx *vc, const char *kubeconfig, const gq_config *cfg,
                              wh_validate_opts *vo, http_server *srv, gq_err *err)
{
    gq_code rc;
    kube_client_opts co = {
        .timeout_ms = 5000, .connect_timeout_ms = 3000, .user_agent = "gpuquota-webhook"};
    vc->served = false;
    vc->srv = srv;
    rc = kubeconfig ? kube_config_load_file(kubeconfig, NULL, &vc->kcfg, err)
                    : kube_config_load_incluster(NULL, &vc->kcfg, err);
    if (rc == GQ_ENOTFOUND && !kubeconfig) {
        GQ_WARN("no --kubeconfig and not running in a cluster: /validate is not served");
        return GQ_OK;
    }
    if (rc || (rc = kube_client_new(vc->kcfg, &co, &vc->client, err)))
        return rc;
    if (!vo->trusted_users && (rc = trust_own_accounts(vc, vo, err)))
        return rc;
    kube_client_api(vc->client, &vc->api);
    if ((rc = wh_kubestore_new(&vc->api, &vc->ks, err)))
        return rc;
    wh_kubestore_store(vc->ks, &vc->store);
    wh_kubestore_set_metrics(vc->ks, vo->metrics);
    if ((rc = wh_validator_new(cfg, &vc->store, vo, &vc->v, err)))
        return rc;
    wh_kubestore_set_want_hook(vc->ks, validator_wanted, vc->v);
    if ((rc = http_server_add_async_handler(srv, "/validate", HTTP_ROUTE_POST_JSON,
                                            wh_validate_handle_async, vc->v, err)) ||
        (rc = wh_kubestore_start(vc->ks, err)))
        return rc;
    vc->served = true;
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
    wh_validator_free(vc->v);  /* its chargers finish what is queued, on the store */
    wh_kubestore_free(vc->ks); /* stops the caches first */
    kube_client_free(vc->client);
    kube_config_free(vc->kcfg);
}

/* What the command line asks for (strings borrowed from argv). */
typedef struct webhook_args {
    http_server_options so;
    const char *config_path, *kubeconfig;
    long threads, drain_s, delay_s, ttl_s, read_timeout_s, max_conns;
    long max_conns_ip; /* 0: the server's default for max_conns */
    long max_batch;
    long escrow_pods;
    int64_t body_memory, decoded_memory;
    cli_list trusted, client_cns;
    const char *trusted_v[WH_TRUSTED_USERS_MAX];
    const char *client_cns_v[HTTP_MAX_CLIENT_CNS];
} webhook_args;

static gq_code parse_read_timeout(const char *opt, const char *s, void *dst, gq_err *err)
{
    long v = 0;
    gq_code rc = parse_duration_s(opt, s, &v, err);
    if (!rc && v > 300)
        rc = gq_err_set(err, GQ_ERANGE, "%s %s: at most 5m", opt, s);
    if (!rc)
        *(long *)dst = v;
    return rc;
}

static gq_code parse_body_memory(const char *opt, const char *s, void *dst, gq_err *err)
{
    return cli_parse_bytes(opt, s, (int64_t)HTTP_MAX_BODY_DEFAULT, (int64_t)1 << 32, dst, err);
}

/* At least 2 MiB: a review of a pod with a few hundred containers decodes
 * to about half a megabyte. */
static gq_code parse_decoded_memory(const char *opt, const char *s, void *dst, gq_err *err)
{
    return cli_parse_bytes(opt, s, (int64_t)2 << 20, (int64_t)1 << 34, dst, err);
}

/* The shutdown delay: not ready, every reply closing its connection, the
 * listener still open while the endpoints drop this pod (a client that
 * resolved the Service before that must not meet a closed port). SIGHUP
 * still reopens the audit log; a second SIGTERM/SIGINT ends the delay. */
static void shutdown_delay(http_server *srv, wh_audit *audit, const sigset_t *sigs, long delay_s)
{
    struct timespec now, end;
    http_server_begin_drain(srv);
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += delay_s;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t left_ns =
            ((int64_t)end.tv_sec - now.tv_sec) * 1000000000 + (end.tv_nsec - now.tv_nsec);
        if (left_ns <= 0)
            return;
        struct timespec wait = {.tv_sec = (time_t)(left_ns / 1000000000),
                                .tv_nsec = (long)(left_ns % 1000000000)};
        int sig = sigtimedwait(sigs, NULL, &wait);
        if (sig == SIGHUP) {
            wh_audit_request_reopen(audit);
            GQ_INFO("received SIGHUP: the audit log is reopened before the next record");
        } else if (sig == SIGTERM || sig == SIGINT) {
            GQ_INFO("received %s again: ending the shutdown delay",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return;
        }
    }
}

static void args_defaults(webhook_args *a)
{
    memset(a, 0, sizeof(*a));
    a->so = (http_server_options){.listen = ":8443", .version = GQ_VERSION};
    a->drain_s = DRAIN_DEFAULT_S;
    a->ttl_s = WH_RESERVATION_TTL_DEFAULT;
    a->read_timeout_s = HTTP_READ_TIMEOUT_DEFAULT;
    a->max_conns = HTTP_MAX_CONNECTIONS_DEFAULT;
    a->max_batch = WH_BATCH_MAX_DEFAULT;
    a->body_memory = (int64_t)HTTP_MAX_BODY_MEMORY_DEFAULT;
    a->decoded_memory = (int64_t)WH_DECODED_MEMORY_DEFAULT;
    a->trusted = (cli_list){a->trusted_v, 0, WH_TRUSTED_USERS_MAX};
    a->client_cns = (cli_list){a->client_cns_v, 0, HTTP_MAX_CLIENT_CNS};
}

/* What no single option can check: the ones that need each other. */
static gq_code check_args(const webhook_args *a, gq_err *err)
{
    if (!a->so.cert_file || !a->so.key_file)
        return gq_err_set(err, GQ_EINVAL, "--tls-cert and --tls-key are required");
    if (a->client_cns.n && !a->so.client_ca_file)
        return gq_err_set(err, GQ_EINVAL, "--client-cn needs --client-ca");
    if (a->max_conns_ip > a->max_conns)
        return gq_err_set(err, GQ_EINVAL,
                          "--max-connections-per-ip %ld exceeds --max-connections %ld",
                          a->max_conns_ip, a->max_conns);
    return GQ_OK;
}

/* check_args, with the usage when it fails: -1 to go on, else the exit
 * status. */
static int check_or_usage(const webhook_args *a)
{
    gq_err err;
    gq_err_clear(&err);
    if (!check_args(a, &err))
        return -1;
    fprintf(stderr, "gpuquota webhook: %s\n", err.msg);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

/* argv into *a. -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, void *args)
{
    webhook_args *a = args;
    args_defaults(a);
    const cli_opt opts[] = {
        {.name = "--tls-cert", .kind = CLI_OPT_STRING, .dst = &a->so.cert_file},
        {.name = "--tls-key", .kind = CLI_OPT_STRING, .dst = &a->so.key_file},
        {.name = "--listen", .kind = CLI_OPT_STRING, .dst = &a->so.listen},
        {.name = "--config", .kind = CLI_OPT_STRING, .dst = &a->config_path},
        {.name = "--kubeconfig", .kind = CLI_OPT_STRING, .dst = &a->kubeconfig},
        {.name = "--threads", .kind = CLI_OPT_LONG, .dst = &a->threads, .min = 1, .max = 256},
        {.name = "--drain-seconds",
         .kind = CLI_OPT_LONG,
         .dst = &a->drain_s,
         .min = 0,
         .max = 3600},
        {.name = "--shutdown-delay-seconds",
         .kind = CLI_OPT_LONG,
         .dst = &a->delay_s,
         .min = 0,
         .max = 300},
        {.name = "--reservation-ttl", .kind = CLI_OPT_FN, .dst = &a->ttl_s, .fn = parse_duration_s},
        {.name = "--trusted-user", .kind = CLI_OPT_LIST, .dst = &a->trusted},
        {.name = "--max-body-memory",
         .kind = CLI_OPT_FN,
         .dst = &a->body_memory,
         .fn = parse_body_memory},
        {.name = "--max-decoded-memory",
         .kind = CLI_OPT_FN,
         .dst = &a->decoded_memory,
         .fn = parse_decoded_memory},
        {.name = "--read-timeout",
         .kind = CLI_OPT_FN,
         .dst = &a->read_timeout_s,
         .fn = parse_read_timeout},
        {.name = "--max-connections",
         .kind = CLI_OPT_LONG,
         .dst = &a->max_conns,
         .min = 16,
         .max = 1000000},
        {.name = "--max-connections-per-ip",
         .kind = CLI_OPT_LONG,
         .dst = &a->max_conns_ip,
         .min = 1,
         .max = 1000000},
        {.name = "--max-batch", .kind = CLI_OPT_LONG, .dst = &a->max_batch, .min = 1, .max = 4096},
        {.name = "--escrow-pods",
         .kind = CLI_OPT_LONG,
         .dst = &a->escrow_pods,
         .min = 0,
         .max = WH_ESCROW_PODS_MAX},
        {.name = "--client-ca", .kind = CLI_OPT_STRING, .dst = &a->so.client_ca_file},
        {.name = "--client-cn", .kind = CLI_OPT_LIST, .dst = &a->client_cns},
    };
    int rc = cli_parse_or_exit(&(cli_cmd){"webhook", opts, sizeof(opts) / sizeof(opts[0]), usage},
                               argc, argv, NULL, NULL);
    return rc >= 0 ? rc : check_or_usage(a);
}

/* The server's options from the command line. */
static http_server_options server_options(const webhook_args *a)
{
    http_server_options so = a->so;
    so.threads = (unsigned)a->threads;
    so.read_timeout_s = (unsigned)a->read_timeout_s;
    so.max_connections = (unsigned)a->max_conns;
    so.max_connections_per_ip = (unsigned)a->max_conns_ip;
    so.max_body_memory = (size_t)a->body_memory;
    so.n_client_cns = a->client_cns.n;
    so.client_cns = a->client_cns_v;
    return so;
}

/* Serve until SIGTERM or SIGINT (SIGHUP reopens the audit log), then the
 * shutdown delay and the drain. */
static void serve_until_stopped(http_server *srv, wh_audit *audit, const sigset_t *sigs,
                                const webhook_args *a)
{
    int sig = 0;
    for (;;) {
        if (sigwait(sigs, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            break;
        wh_audit_request_reopen(audit);
        GQ_INFO("received SIGHUP: the audit log is reopened before the next record");
    }
    const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    if (a->delay_s > 0) {
        GQ_INFO("received %s: not ready; serving new connections for %ld s more", name, a->delay_s);
        shutdown_delay(srv, audit, sigs, a->delay_s);
    }
    GQ_INFO("received %s: draining for up to %ld s", name, a->drain_s);
    unsigned left = http_server_stop(srv, (unsigned)a->drain_s * 1000u);
    if (left)
        GQ_WARN("stopped with %u request(s) still in flight", left);
    else
        GQ_INFO("stopped");
}

/* The running webhook: what it set up and frees at the end. */
typedef struct webhook_run {
    http_server_options so;
    gq_config *cfg;
    gq_json_budget trees; /* the decoded JSON of the reviews being decided */
    wh_review_limits review_limits;
    http_metrics *registry; /* serves the webhook's families and the server's */
    wh_metrics *metrics;
    http_server *srv;
    wh_audit *audit;
    wh_mutate_ctx mutate_ctx;
    validate_ctx vc;
} webhook_run;

/* Admission handlers, registered before the server starts. Both webhooks
 * write one audit log; /mutate reads GPULimitRanges from the quota store's
 * informer cache when there is a cluster, else none. */
static gq_code add_handlers(webhook_run *w, const webhook_args *a, gq_err *err)
{
    gq_code rc;
    wh_validate_opts vo = {.reservation_ttl_s = a->ttl_s,
                           .trusted_users = a->trusted.n ? a->trusted_v : NULL,
                           .n_trusted_users = a->trusted.n,
                           .max_batch = (unsigned)a->max_batch,
                           .escrow_pods = (unsigned)a->escrow_pods,
                           .metrics = w->metrics,
                           .review_limits = w->review_limits};
    if ((rc = audit_setup(w->cfg, w->registry, &w->audit, err)))
        return rc;
    vo.audit = w->audit;
    if ((rc = validate_setup(&w->vc, a->kubeconfig, w->cfg, &vo, w->srv, err)))
        return rc;
    const wh_store *store = w->vc.served ? &w->vc.store : NULL;
    if ((rc = mutate_setup(&w->mutate_ctx, w->cfg, store, w->audit, w->metrics, w->srv, err)))
        return rc;
    w->mutate_ctx.limits = w->review_limits;
    return GQ_OK;
}

/* The configuration, the metrics, the server and its handlers. */
static gq_code setup(webhook_run *w, const webhook_args *a, gq_err *err)
{
    gq_code rc;
    if ((rc = cli_load_config(a->config_path, &w->cfg, err)))
        return rc;
    if ((rc = http_metrics_new(GQ_VERSION, &w->registry)) ||
        (rc = wh_metrics_new(w->registry, &w->metrics)))
        return rc;
    w->so.metrics = w->registry;
    if ((rc = http_server_new(&w->so, &w->srv, err)))
        return rc;
    return add_handlers(w, a, err);
}

/* Listen, and be ready at once without caches, else once they have synced. */
static gq_code start(webhook_run *w, gq_err *err)
{
    gq_code rc;
    if ((rc = http_server_start(w->srv, err)))
        return rc;
    char host[256];
    listen_host(w->so.listen, host, sizeof(host));
    GQ_INFO("listening on %s:%u", host, http_server_port(w->srv));
    if (!w->vc.served) {
        http_server_set_ready(w->srv, true); /* no caches: ready as soon as we serve */
        return GQ_OK;
    }
    return validate_start_ready(&w->vc, err);
}

/* The process's limits, then everything set up and serving. */
static gq_code start_all(void *run, const void *args, gq_err *err)
{
    webhook_run *w = run;
    const webhook_args *a = args;
    w->so = server_options(a);
    raise_nofile(w->so.max_connections);
    gq_heap_limit_arenas(2); /* a thread's arena keeps what its large requests freed */
    w->trees.cap = (size_t)a->decoded_memory;
    w->review_limits = (wh_review_limits){&w->trees, w->trees.cap / 2};
    gq_code rc = setup(w, a, err);
    return rc ? rc : start(w, err);
}

static void serve(void *run, const void *args, const sigset_t *sigs)
{
    webhook_run *w = run;
    serve_until_stopped(w->srv, w->audit, sigs, args);
}

static void teardown(void *run)
{
    webhook_run *w = run;
    validate_stop_ready(&w->vc);
    http_server_free(w->srv); /* handlers are gone before what they use */
    validate_teardown(&w->vc);
    wh_audit_close(w->audit); /* writes what is still queued */
    wh_metrics_free(w->metrics);
    http_metrics_free(w->registry);
    gq_config_free(w->cfg);
}

/* SIGHUP reopens the audit log: it must never kill the webhook. */
static const cli_daemon webhook_steps = {
    .hup = true, .parse = parse_args, .start = start_all, .serve = serve, .teardown = teardown};

int cli_cmd_webhook(int argc, char **argv)
{
    webhook_args a;
    webhook_run w;
    return cli_daemon_main(&webhook_steps, &a, &w, sizeof(w), argc, argv);
}
