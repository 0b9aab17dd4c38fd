#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base64.h"
#include "certs/certs.h"
#include "certs/certs_inject.h"
#include "cli/certs_secrets.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "common/rfc3339.h"
#include "common/strutil.h"

const char cli_cmd_certs_summary[] =
    "generate, rotate, inspect webhook TLS certificates and inject the caBundle";

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota certs generate --service S --namespace NS --out DIR\n"
               "                               [--days N (365)] [--ca-days N (3650)]\n"
               "                               [--san NAME_OR_IP]... [--rotate]\n"
               "       gpuquota certs inspect FILE... [--warn-days N (30)]\n"
               "       gpuquota certs inject --ca FILE [--kubeconfig F] [--name N (gpuquota)]\n"
               "                             [--dry-run]\n"
               "       gpuquota certs reconcile --namespace NS --work DIR [--inject]\n"
               "                                [--days N (365)] [--ca-days N (3650)]\n"
               "                                [--renew-days N (30)] [--kubeconfig F]\n"
               "                                [--live-bundle BASE64]\n"
               "       gpuquota certs delete --namespace NS [--kubeconfig F]\n"
               "\n"
               "generate writes ca.crt, ca.key, tls.crt, tls.key into DIR, reusing a valid CA\n"
               "already there so the webhooks' caBundle stays the same; --rotate renews only\n"
               "the serving pair and fails if DIR has no usable CA.\n"
               "inspect exits 1 when a certificate has expired, is not yet valid, or expires\n"
               "within --warn-days.\n"
               "inject sets clientConfig.caBundle of every webhook of the Mutating- and\n"
               "ValidatingWebhookConfiguration named N to the CA certificates in FILE (each\n"
               "must be a CA); exit 1 on API errors or when neither configuration exists.\n"
               "reconcile is the Helm chart's certificate step: from Secrets\n"
               "gpuquota-webhook-ca and gpuquota-webhook-tls in NS, renew the serving pair\n"
               "when it or the CA expires within --renew-days, keep every unexpired CA\n"
               "trusted so far in the bundle (with no bundle yet, --live-bundle: what the\n"
               "live configurations trust), inject it (--inject) and write both Secrets.\n"
               "delete removes both Secrets.\n");
}

static int cmd_generate(int argc, char **argv)
{
    certs_options o = {.days = 365, .ca_days = 3650};
    const char *sans[CERTS_MAX_SANS];
    cli_list san_list = {sans, 0, CERTS_MAX_SANS};
    long days = o.days, ca_days = o.ca_days;
    gq_err err;
    gq_err_clear(&err);
    const cli_opt opts[] = {
        {.name = "--service", .kind = CLI_OPT_STRING, .dst = &o.service},
        {.name = "--namespace", .kind = CLI_OPT_STRING, .dst = &o.ns},
        {.name = "--out", .kind = CLI_OPT_STRING, .dst = &o.out_dir},
        {.name = "--days", .kind = CLI_OPT_LONG, .dst = &days, .min = 1, .max = 36500},
        {.name = "--ca-days", .kind = CLI_OPT_LONG, .dst = &ca_days, .min = 1, .max = 36500},
        {.name = "--san", .kind = CLI_OPT_LIST, .dst = &san_list},
        {.name = "--rotate", .kind = CLI_OPT_FLAG, .dst = &o.rotate},
    };
    int prc =
        cli_parse_or_exit(&(cli_cmd){"certs generate", opts, sizeof(opts) / sizeof(opts[0]), usage},
                          argc, argv, NULL, NULL);
    if (prc >= 0)
        return prc;
    o.days = (int)days;
    o.ca_days = (int)ca_days;
    o.n_extra_sans = san_list.n;
    if (!o.service || !o.ns || !o.out_dir) {
        gq_err_set(&err, GQ_EINVAL, "--service, --namespace and --out are required");
        goto bad;
    }
    o.extra_sans = sans;
    o.now = time(NULL);
    certs_result res;
    if (certs_generate(&o, &res, &err))
        goto bad;
    char until[GQ_RFC3339_MAX];
    gq_time_format_rfc3339(res.not_after, until);
    printf("%s %s/ca.crt\n", res.ca_created ? "created CA" : "reused CA", o.out_dir);
    printf("wrote %s/tls.crt and tls.key for %s.%s.svc, valid until %s\n", o.out_dir, o.service,
           o.ns, until);
    if (res.ca_created)
        printf("the caBundle changed: run gpuquota certs inject --ca %s/ca.crt\n", o.out_dir);
    return CLI_EXIT_OK;
bad:
    fprintf(stderr, "gpuquota certs generate: %s\n", err.msg);
    return CLI_EXIT_USAGE;
}

/* One certificate of file (its index in the file, -1 when it holds one);
 * false when it is not valid now or expires within warn_days. */
static bool print_cert(const char *file, long index, const certs_info *ci, time_t now,
                       long warn_days)
{
    char nb[GQ_RFC3339_MAX], na[GQ_RFC3339_MAX];
    const char *status = "ok";
    long left = certs_days_left(ci, now);
    gq_time_format_rfc3339(ci->not_before, nb);
    gq_time_format_rfc3339(ci->not_after, na);
    if (ci->not_after <= now)
        status = "EXPIRED";
    else if (ci->not_before > now)
        status = "NOT YET VALID";
    else if (difftime(ci->not_after, now) < (double)warn_days * 86400)
        status = "EXPIRES SOON";
    printf("%s", file);
    if (index >= 0)
        printf(" [%ld]", index);
    printf(":\n  subject:    %s\n  issuer:     %s\n  CA:         %s\n"
           "  SANs:       %s\n  not before: %s\n  not after:  %s\n"
           "  days left:  %ld\n  status:     %s\n",
           ci->subject, ci->issuer, ci->is_ca ? "yes" : "no", ci->sans[0] ? ci->sans : "(none)", nb,
           na, left, status);
    return !strcmp(status, "ok");
}

static int cmd_inspect(int argc, char **argv)
{
    long warn_days = 30;
    gq_err err;
    int rc = CLI_EXIT_OK;
    gq_err_clear(&err);
    const cli_opt opts[] = {
        {.name = "--warn-days", .kind = CLI_OPT_LONG, .dst = &warn_days, .min = 0, .max = 36500},
    };
    const char **files = calloc((size_t)argc, sizeof(*files));
    size_t n_files = 0;
    if (!files) {
        fprintf(stderr, "gpuquota certs inspect: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    int prc =
        cli_parse_or_exit(&(cli_cmd){"certs inspect", opts, sizeof(opts) / sizeof(opts[0]), usage},
                          argc, argv, files, &n_files);
    if (prc < 0 && !n_files) {
        fprintf(stderr, "gpuquota certs inspect: at least one FILE is required\n");
        prc = CLI_EXIT_USAGE;
    }
    if (prc >= 0) {
        free(files);
        return prc;
    }
    time_t now = time(NULL);
    for (size_t i = 0; i < n_files; i++) {
        certs_info *list = NULL;
        size_t n = 0;
        if (certs_inspect_file(files[i], &list, &n, &err)) {
            fprintf(stderr, "gpuquota certs inspect: %s\n", err.msg);
            free(files);
            return CLI_EXIT_USAGE;
        }
        for (size_t k = 0; k < n; k++)
            if (!print_cert(files[i], n > 1 ? (long)k : -1, &list[k], now, warn_days))
                rc = CLI_EXIT_DENIED;
        free(list);
    }
    free(files);
    return rc;
}

static const struct {
    const char *resource; /* admissionregistration.k8s.io/v1 plural */
    const char *kind;     /* what the output lines call it (kubectl's lower-case kind) */
} inject_targets[] = {
    {"mutatingwebhookconfigurations", "mutatingwebhookconfiguration"},
    {"validatingwebhookconfigurations", "validatingwebhookconfiguration"},
};

/* The line for one configuration; false when it was not found. */
static bool print_injected(const char *kind, const char *name, const certs_inject_result *r)
{
    const char *plural = r->webhooks == 1 ? "" : "s";
    switch (r->state) {
    case CERTS_INJECT_NOT_FOUND:
        printf("%s/%s: not found, skipped\n", kind, name);
        return false;
    case CERTS_INJECT_UNCHANGED:
        printf("%s/%s: caBundle unchanged (%zu webhook%s)\n", kind, name, r->webhooks, plural);
        break;
    case CERTS_INJECT_WOULD_UPDATE:
        printf("%s/%s: caBundle would be updated (%zu of %zu webhook%s) (dry run)\n", kind, name,
               r->changed, r->webhooks, plural);
        break;
    case CERTS_INJECT_UPDATED:
        printf("%s/%s: caBundle updated (%zu webhook%s)", kind, name, r->webhooks, plural);
        if (r->conflicts)
            printf(" after %u conflict%s", r->conflicts, r->conflicts == 1 ? "" : "s");
        printf("\n");
        break;
    }
    return true;
}

/* Inject the bundle into both configurations and print one line for each.
 * Returns the exit status. */
static int inject_all(const char *kubeconfig, const char *name, const char *b64, bool dry_run)
{
    kube_config *kc = NULL;
    kube_client *client = NULL;
    kube_api api;
    gq_err err;
    size_t found = 0;
    int rc = CLI_EXIT_OK;
    gq_err_clear(&err);
    /* A kubeconfig that cannot be used is bad input; failures talking to
     * the API server are exit 1. */
    if (kube_config_load_default(kubeconfig, NULL, &kc, &err)) {
        rc = CLI_EXIT_USAGE;
        goto fail;
    }
    if (kube_client_new(kc, NULL, &client, &err)) {
        rc = CLI_EXIT_DENIED;
        goto fail;
    }
    kube_client_api(client, &api);
    for (size_t i = 0; i < sizeof(inject_targets) / sizeof(inject_targets[0]); i++) {
        const char *kind = inject_targets[i].kind;
        certs_inject_result r;
        if (certs_inject_config(&api, inject_targets[i].resource, name, b64, dry_run, &r, &err)) {
            fprintf(stderr, "gpuquota certs inject: %s/%s: %s\n", kind, name, err.msg);
            rc = CLI_EXIT_DENIED;
            continue;
        }
        if (print_injected(kind, name, &r))
            found++;
    }
    if (found == 0 && rc == CLI_EXIT_OK) {
        fprintf(stderr,
                "gpuquota certs inject: neither mutatingwebhookconfiguration/%s nor "
                "validatingwebhookconfiguration/%s exists\n",
                name, name);
        rc = CLI_EXIT_DENIED;
    }
    goto out;
fail:
    fprintf(stderr, "gpuquota certs inject: %s\n", err.msg);
out:
    kube_client_free(client);
    kube_config_free(kc);
    return rc;
}

static int cmd_inject(int argc, char **argv)
{
    const char *ca = NULL, *kubeconfig = NULL, *name = "gpuquota";
    bool dry_run = false;
    char *pem = NULL, *b64 = NULL;
    size_t pem_len = 0, b64_len = 0;
    gq_err err;
    int rc = CLI_EXIT_USAGE;
    gq_err_clear(&err);
    const cli_opt opts[] = {
        {.name = "--ca", .kind = CLI_OPT_STRING, .dst = &ca},
        {.name = "--kubeconfig", .kind = CLI_OPT_STRING, .dst = &kubeconfig},
        {.name = "--name", .kind = CLI_OPT_STRING, .dst = &name},
        {.name = "--dry-run", .kind = CLI_OPT_FLAG, .dst = &dry_run},
    };
    int prc =
        cli_parse_or_exit(&(cli_cmd){"certs inject", opts, sizeof(opts) / sizeof(opts[0]), usage},
                          argc, argv, NULL, NULL);
    if (prc >= 0)
        return prc;
    if (!ca) {
        gq_err_set(&err, GQ_EINVAL, "--ca is required");
        goto bad;
    }
    if (!certs_inject_valid_name(name)) {
        gq_err_set(&err, GQ_EINVAL, "--name \"%s\" is not a valid object name", name);
        goto bad;
    }
    if (certs_ca_bundle_pem(ca, &pem, &pem_len, &err))
        goto bad;
    if (gq_base64_encode(pem, pem_len, &b64, &b64_len)) {
        gq_err_oom(&err);
        goto bad;
    }
    rc = inject_all(kubeconfig, name, b64, dry_run);
    goto out;
bad:
    fprintf(stderr, "gpuquota certs inject: %s\n", err.msg);
out:
    free(pem);
    free(b64);
    return rc;
}

typedef struct inject_ctx {
    const char *kubeconfig, *name;
} inject_ctx;

static gq_code inject_work(void *ud, const char *work, gq_err *err)
{
    inject_ctx *ic = ud;
    char path[4096], *pem = NULL, *b64 = NULL;
    size_t pem_len = 0, b64_len = 0;
    snprintf(path, sizeof path, "%s/bundle.crt", work);
    gq_code rc = certs_ca_bundle_pem(path, &pem, &pem_len, err);
    if (!rc && gq_base64_encode(pem, pem_len, &b64, &b64_len))
        rc = gq_err_oom(err);
    if (!rc && inject_all(ic->kubeconfig, ic->name, b64, false) != CLI_EXIT_OK)
        rc = gq_err_set(err, GQ_EIO, "the caBundle could not be injected");
    free(pem);
    free(b64);
    return rc;
}

/* A client for --kubeconfig, else $KUBECONFIG, else in-cluster. */
static gq_code certs_client(const char *kubeconfig, kube_config **kc, kube_client **client,
                            kube_api *api, gq_err *err)
{
    gq_code rc = kube_config_load_default(kubeconfig, NULL, kc, err);
    if (!rc && !(rc = kube_client_new(*kc, NULL, client, err)))
        kube_client_api(*client, api);
    return rc;
}

static int cmd_reconcile(int argc, char **argv)
{
    const char *ns = NULL, *work = NULL, *kubeconfig = NULL, *live = NULL;
    long days = 365, ca_days = 3650, renew_days = 30;
    bool inject = false;
    gq_err err;
    gq_err_clear(&err);
    const cli_opt opts[] = {
        {.name = "--namespace", .kind = CLI_OPT_STRING, .dst = &ns},
        {.name = "--work", .kind = CLI_OPT_STRING, .dst = &work},
        {.name = "--kubeconfig", .kind = CLI_OPT_STRING, .dst = &kubeconfig},
        {.name = "--days", .kind = CLI_OPT_LONG, .dst = &days, .min = 1, .max = 36500},
        {.name = "--ca-days", .kind = CLI_OPT_LONG, .dst = &ca_days, .min = 1, .max = 36500},
        {.name = "--renew-days", .kind = CLI_OPT_LONG, .dst = &renew_days, .min = 0, .max = 36500},
        {.name = "--inject", .kind = CLI_OPT_FLAG, .dst = &inject},
        {.name = "--live-bundle", .kind = CLI_OPT_STRING, .dst = &live},
    };
    int prc = cli_parse_or_exit(
        &(cli_cmd){"certs reconcile", opts, sizeof(opts) / sizeof(opts[0]), usage}, argc, argv,
        NULL, NULL);
    if (prc >= 0)
        return prc;
    if (!ns || !work || !gq_is_dns_label(ns)) {
        fprintf(stderr, "gpuquota certs reconcile: --namespace (a namespace name) and --work are "
                        "required\n");
        return CLI_EXIT_USAGE;
    }
    kube_config *kc = NULL;
    kube_client *client = NULL;
    kube_api api;
    inject_ctx ic = {kubeconfig, "gpuquota"};
    cli_certs_plan p = {.ns = ns,
                        .service = "gpuquota-webhook",
                        .live_bundle = live,
                        .work = work,
                        .days = (int)days,
                        .ca_days = (int)ca_days,
                        .renew_days = renew_days,
                        .now = time(NULL),
                        .inject = inject ? inject_work : NULL,
                        .inject_ud = &ic};
    bool renewed = false;
    gq_code rc = certs_client(kubeconfig, &kc, &client, &api, &err);
    if (!rc)
        rc = cli_certs_reconcile(&api, &p, &renewed, &err);
    kube_client_free(client);
    kube_config_free(kc);
    if (rc) {
        fprintf(stderr, "gpuquota certs reconcile: %s\n", err.msg);
        return CLI_EXIT_DENIED;
    }
    printf("certs: %s; Secrets %s/gpuquota-webhook-ca and gpuquota-webhook-tls written%s\n",
           renewed ? "the serving pair was renewed"
                   : "the serving certificate and the CA are valid beyond --renew-days; kept",
           ns, inject ? " after the caBundle" : "");
    return CLI_EXIT_OK;
}

static int cmd_delete(int argc, char **argv)
{
    const char *ns = NULL, *kubeconfig = NULL;
    gq_err err;
    gq_err_clear(&err);
    const cli_opt opts[] = {
        {.name = "--namespace", .kind = CLI_OPT_STRING, .dst = &ns},
        {.name = "--kubeconfig", .kind = CLI_OPT_STRING, .dst = &kubeconfig},
    };
    int prc =
        cli_parse_or_exit(&(cli_cmd){"certs delete", opts, sizeof(opts) / sizeof(opts[0]), usage},
                          argc, argv, NULL, NULL);
    if (prc >= 0)
        return prc;
    if (!ns || !gq_is_dns_label(ns)) {
        fprintf(stderr, "gpuquota certs delete: --namespace (a namespace name) is required\n");
        return CLI_EXIT_USAGE;
    }
    kube_config *kc = NULL;
    kube_client *client = NULL;
    kube_api api;
    gq_code rc = certs_client(kubeconfig, &kc, &client, &api, &err);
    if (!rc)
        rc = cli_certs_delete(&api, ns, &err);
    kube_client_free(client);
    kube_config_free(kc);
    if (rc) {
        fprintf(stderr, "gpuquota certs delete: %s\n", err.msg);
        return CLI_EXIT_DENIED;
    }
    printf("certs: Secrets %s/gpuquota-webhook-ca and gpuquota-webhook-tls deleted\n", ns);
    return CLI_EXIT_OK;
}

int cli_cmd_certs(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "generate"))
        return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "inspect"))
        return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(argv[1], "inject"))
        return cmd_inject(argc - 1, argv + 1);
    if (!strcmp(argv[1], "reconcile"))
        return cmd_reconcile(argc - 1, argv + 1);
    if (!strcmp(argv[1], "delete"))
        return cmd_delete(argc - 1, argv + 1);
    fprintf(stderr, "gpuquota certs: unknown action '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
