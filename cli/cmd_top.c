/* gpuquota top (kubectl gpuquota top): GPU quota usage per namespace and
 * tenant, read from the GPUQuota and GPUTenantQuota objects. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "quota/crd.h"
#include "kube/kube.h"
#include "cli/plugin.h"
#include "common/json_member.h"
#include "quota/policy.h"

const char cli_cmd_top_summary[] = "GPU quota usage per namespace and tenant, with bars";

#define TOP_MAX_OBJECTS 100000

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kubectl gpuquota top [-n NS | -A] [-o table|json|yaml] [--kubeconfig F]\n"
            "                            [--context C] [--no-tenants]\n"
            "\n"
            "Used, reserved (admitted pods the controller has not counted yet), queued and\n"
            "hard GPU quota of the GPUQuotas of a namespace (-n, default the context's) or of\n"
            "every namespace (-A), and of the GPUTenantQuotas covering them, with each\n"
            "tenant's namespaces and, when the status carries them, its GPU models.\n"
            "HARD is the nominal share; where quotas borrow from each other (a\n"
            "GPUTenantQuota as cohort), BORROWED and LENT say what each uses above its\n"
            "share and what of its unused share others use now.\n"
            "\n"
            "  --no-tenants           leave GPUTenantQuotas out\n"
            "\n%s",
            cli_kflags_usage);
}

/* The labels of namespace ns, or NULL when they cannot be read (a user
 * without "get namespaces" then sees the tenants that list ns by name). */
static json_object *namespace_labels(kube_client *c, const char *ns, json_object **hold)
{
    char path[320];
    json_object *obj = NULL, *meta, *labels;
    gq_err e;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s", ns);
    if (kube_get(c, path, NULL, &obj, &e))
        return NULL;
    *hold = obj;
    if (json_object_object_get_ex(obj, "metadata", &meta) &&
        json_object_object_get_ex(meta, "labels", &labels))
        return labels;
    return NULL;
}

/* Keep only the tenants covering ns (GPUQuotas were listed in ns). */
static void keep_covering(cli_objs *o, const char *ns, json_object *labels)
{
    size_t k = 0;
    for (size_t i = 0; i < o->n; i++) {
        gq_quota *q = NULL;
        gq_err e;
        bool keep = true;
        if (!gq_quota_parse(o->v[i], &q, &e)) {
            keep = q->kind != GQ_QUOTA_TENANT || gq_quota_covers_namespace(q, ns, labels);
            gq_quota_free(q);
        }
        if (keep)
            o->v[k++] = o->v[i];
        else
            json_object_put(o->v[i]);
    }
    o->n = k;
}

/* The GPUTenantQuotas into o: with a namespace, those that cover it (its
 * labels read into *ns_obj). A user allowed to read GPUQuotas but not
 * cluster-scoped tenants still sees their namespace: the tenants are left
 * out with a warning. */
static gq_code list_tenants(kube_client *c, const cli_kflags *f, const char *ns, cli_objs *o,
                            json_object **ns_obj, gq_err *err)
{
    size_t before = o->n;
    if (kube_list(c, "/apis/gpuquota.io/v1alpha1/gputenantquotas", NULL, cli_objs_collect, o, NULL,
                  err)) {
        if (err->code != GQ_EHTTP && err->code != GQ_ENOTFOUND)
            return err->code;
        fprintf(stderr, "kubectl gpuquota top: tenants left out: %s\n", err->msg);
        gq_err_clear(err);
        while (o->n > before)
            json_object_put(o->v[--o->n]);
    } else if (!f->all_namespaces) {
        keep_covering(o, ns, namespace_labels(c, ns, ns_obj));
    }
    return GQ_OK;
}

int cli_cmd_top(int argc, char **argv)
{
    cli_kflags f = {0};
    bool no_tenants = false;
    gq_err err;
    kube_client *c = NULL;
    char *ns = NULL, path[320];
    cli_objs o = {.max = TOP_MAX_OBJECTS};
    json_object *report = NULL, *ns_obj = NULL;
    int status = CLI_EXIT_USAGE;
    gq_err_clear(&err);
    cli_opt opts[CLI_KFLAGS_N + 1];
    cli_kflags_opts(&f, opts);
    opts[CLI_KFLAGS_N] =
        (cli_opt){.name = "--no-tenants", .kind = CLI_OPT_FLAG, .dst = &no_tenants};
    int parsed =
        cli_parse_or_exit(&(cli_cmd){"top", opts, CLI_KFLAGS_N + 1, usage}, argc, argv, NULL, NULL);
    if (parsed >= 0)
        return parsed;
    if (f.all_namespaces && f.namespace_) {
        gq_err_set(&err, GQ_EINVAL, "-A and -n are mutually exclusive");
        goto fail;
    }
    status = CLI_EXIT_DENIED;
    if (cli_kflags_client(&f, &c, &ns, &err))
        goto fail;
    if (f.all_namespaces)
        snprintf(path, sizeof(path), "/apis/gpuquota.io/v1alpha1/gpuquotas");
    else
        snprintf(path, sizeof(path), "/apis/gpuquota.io/v1alpha1/namespaces/%s/gpuquotas", ns);
    if (kube_list(c, path, NULL, cli_objs_collect, &o, NULL, &err))
        goto fail;
    if (!no_tenants && list_tenants(c, &f, ns, &o, &ns_obj, &err))
        goto fail;
    if (cli_top_report(o.v, o.n, (int64_t)time(NULL), &report, &err))
        goto fail;
    if (f.output == CLI_OUT_TABLE)
        cli_render_top_table(stdout, report);
    else
        cli_print_doc(stdout, f.output, report);
    status = CLI_EXIT_OK;
    goto out;
fail:
    fprintf(stderr, "kubectl gpuquota top: %s\n", err.msg);
out:
    json_object_put(report);
    json_object_put(ns_obj);
    cli_objs_dispose(&o);
    free(ns);
    kube_client_free(c);
    return status;
}
