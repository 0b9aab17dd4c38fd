/* kubectl's flags for `kubectl gpuquota` and the client they select. */
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "plugin.h"

const char gq_kflags_usage[] =
    "kubectl flags:\n"
    "  --kubeconfig FILE      the kubeconfig (default: $KUBECONFIG's first file, in-cluster,\n"
    "                         then ~/.kube/config)\n"
    "  --context NAME         the kubeconfig context (default: its current-context)\n"
    "  -n, --namespace NS     the namespace (default: the context's, else \"default\")\n"
    "  -A, --all-namespaces   every namespace\n"
    "  -o, --output FORMAT    table (default), json or yaml\n";

/* Flag name in a, with its value either joined ("--context=x") or in the
 * next argument. Returns the value or NULL when a is not that flag. */
static const char *flag_value(const char *a, const char *name, int argc, char **argv, int *i,
                              bool *missing)
{
    size_t n = strlen(name);
    if (strncmp(a, name, n))
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

int gq_kflags_take(gq_kflags *f, int argc, char **argv, int *i, gq_err *err)
{
    const char *a = argv[*i], *v;
    bool missing = false;
    if (!strcmp(a, "-A") || !strcmp(a, "--all-namespaces")) {
        f->all_namespaces = true;
        return 1;
    }
    if ((v = flag_value(a, "--kubeconfig", argc, argv, i, &missing))) {
        f->kubeconfig = v;
        return 1;
    }
    if ((v = flag_value(a, "--context", argc, argv, i, &missing))) {
        f->context = v;
        return 1;
    }
    if ((v = flag_value(a, "--namespace", argc, argv, i, &missing)) ||
        (!missing && (v = flag_value(a, "-n", argc, argv, i, &missing)))) {
        if (!v[0])
            return -(int)gq_err_set(err, GQ_EINVAL, "%s: the namespace must not be empty", a);
        f->namespace_ = v;
        return 1;
    }
    if ((v = flag_value(a, "--output", argc, argv, i, &missing)) ||
        (!missing && (v = flag_value(a, "-o", argc, argv, i, &missing)))) {
        if (!strcmp(v, "json"))
            f->output = GQ_OUT_JSON;
        else if (!strcmp(v, "yaml"))
            f->output = GQ_OUT_YAML;
        else if (!strcmp(v, "table") || !strcmp(v, "wide"))
            f->output = GQ_OUT_TABLE;
        else
            return -(int)gq_err_set(err, GQ_EINVAL,
                                    "unable to match a printer suitable for the output format "
                                    "\"%s\", the allowed formats are: json,table,yaml",
                                    v);
        return 1;
    }
    if (missing)
        return -(int)gq_err_set(err, GQ_EINVAL, "flag needs an argument: %s", a);
    return 0;
}

gq_code gq_check_namespace(const char *what, const char *ns, gq_err *err)
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

gq_code gq_kflags_client(const gq_kflags *f, kube_client **client, char **ns, gq_err *err)
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
    if ((rc =
             gq_check_namespace("namespace", f->namespace_ ? f->namespace_ : cfg->namespace_, err)))
        goto out;
    n = strdup(f->namespace_ ? f->namespace_ : cfg->namespace_);
    if (!n) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
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

void gq_print_doc(FILE *out, gq_out_fmt fmt, json_object *v)
{
    if (fmt == GQ_OUT_YAML)
        gq_render_yaml(out, v);
    else
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(v, JSON_C_TO_STRING_PRETTY |
                                                      JSON_C_TO_STRING_SPACED |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
}
