/* kubectl's flags for `kubectl gpuquota` and the client they select. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_args.h"
#include "common/jsonutil.h"
#include "common/json_member.h"
#include "kube/kube.h"
#include "quota/config.h"
#include "cli/plugin.h"

const char cli_kflags_usage[] =
    "kubectl flags:\n"
    "  --kubeconfig FILE      the kubeconfig (default: $KUBECONFIG's first file, in-cluster,\n"
    "                         then ~/.kube/config)\n"
    "  --context NAME         the kubeconfig context (default: its current-context)\n"
    "  -n, --namespace NS     the namespace (default: the context's, else \"default\")\n"
    "  -A, --all-namespaces   every namespace\n"
    "  -o, --output FORMAT    table (default), json or yaml\n";

void cli_kflags_opts(cli_kflags *f, cli_opt *out)
{
    /* Indexes are cli_out_fmt values. */
    static const char *const outputs[] = {"table", "json", "yaml", NULL};
    out[0] = (cli_opt){.name = "--kubeconfig", .kind = CLI_OPT_NONEMPTY, .dst = &f->kubeconfig};
    out[1] = (cli_opt){.name = "--context", .kind = CLI_OPT_NONEMPTY, .dst = &f->context};
    out[2] = (cli_opt){
        .name = "--namespace", .alias = "-n", .kind = CLI_OPT_NONEMPTY, .dst = &f->namespace_};
    out[3] = (cli_opt){
        .name = "--all-namespaces", .alias = "-A", .kind = CLI_OPT_FLAG, .dst = &f->all_namespaces};
    out[4] = (cli_opt){.name = "--output",
                       .alias = "-o",
                       .kind = CLI_OPT_CHOICE,
                       .dst = &f->output,
                       .choices = outputs};
}

gq_code cli_check_namespace(const char *what, const char *ns, gq_err *err)
{
    size_t n = strlen(ns);
    bool ok = n > 0 && n <= 63 && ns[0] != '-' && ns[n - 1] != '-';
    for (size_t i = 0; ok && i < n; i++)
        ok = (ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9') || ns[i] == '-';
    if (!ok)
        return gq_err_set(err, GQ_EINVAL,
                          "%s \"%.80s\" is not a valid namespace name: a lowercase RFC 1123 "
                          "label (at most 63 of a-z, 0-9 and '-', starting and ending with a "
                          "letter or digit)",
                          what, ns);
    return GQ_OK;
}

gq_code cli_gpuquota_namespace(const char *flag, const char **out, gq_err *err)
{
    const char *env = getenv("GPUQUOTA_NAMESPACE");
    const char *what = "--gpuquota-namespace";
    *out = flag;
    if (!flag) {
        what = env && env[0] ? "GPUQUOTA_NAMESPACE" : "the default namespace";
        *out = env && env[0] ? env : CLI_DEFAULT_NAMESPACE;
    }
    return cli_check_namespace(what, *out, err);
}

gq_code cli_kflags_client(const cli_kflags *f, kube_client **client, char **ns, gq_err *err)
{
    kube_config *cfg = NULL;
    kube_client *c = NULL;
    char *n = NULL;
    kube_client_opts o = {.user_agent = "kubectl-gpuquota", .timeout_ms = 30000};
    gq_code rc = kube_config_load_default(f->kubeconfig, f->context, &cfg, err);
    if (rc)
        return rc;
    /* The namespace goes into API paths: a name Kubernetes would accept,
     * nothing else. */
    if ((rc = cli_check_namespace("namespace", f->namespace_ ? f->namespace_ : cfg->namespace_,
                                  err)))
        goto out;
    n = strdup(f->namespace_ ? f->namespace_ : cfg->namespace_);
    if (!n) {
        rc = gq_err_oom(err);
        goto out;
    }
    if ((rc = kube_client_new(cfg, &o, &c, err)))
        goto out;
    *client = c;
    *ns = n;
    n = NULL;
out:
    free(n);
    kube_config_free(cfg);
    return rc;
}

void cli_print_doc(FILE *out, cli_out_fmt fmt, json_object *v)
{
    if (fmt == CLI_OUT_YAML)
        cli_render_yaml(out, v);
    else
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(v, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_SPACED |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
}

gq_code cli_cluster_config(kube_client *c, const char *file, const char *sys_ns, gq_config **out,
                           char *source, size_t cap, gq_err *err)
{
    char path[320];
    json_object *cm = NULL;
    gq_err e;
    if (file) {
        snprintf(source, cap, "%s", file);
        return cli_load_config(file, out, err);
    }
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/gpuquota-config", sys_ns);
    gq_err_clear(&e);
    if (!kube_get(c, path, NULL, &cm, &e)) {
        const char *text = gq_json_get_string(gq_json_member(cm, "data"), "config.yaml");
        if (text && strlen(text) <= CLI_CONFIG_MAX) {
            char name[300];
            snprintf(name, sizeof(name), "configmap %s/gpuquota-config", sys_ns);
            gq_code rc = gq_config_parse(text, strlen(text), name, out, err);
            json_object_put(cm);
            snprintf(source, cap, "%s", name);
            return rc;
        }
        json_object_put(cm);
        gq_err_set(&e, GQ_ENOTFOUND, "no config.yaml in it");
    }
    snprintf(source, cap, "embedded default (configmap %s/gpuquota-config: %.200s)", sys_ns, e.msg);
    return gq_config_default(out, err);
}
