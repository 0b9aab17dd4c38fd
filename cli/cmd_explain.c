/* gpuquota explain (kubectl gpuquota explain -f pod.yaml): what a pod would
 * cost (quota/'s pricing function), which GPUQuotas, GPUTenantQuotas and
 * GPULimitRanges govern it, whether it would be admitted now, and if not
 * what would have to change.
 *
 * Admission is decided by the cluster, not here: the pod is created with
 * dryRun=All, so every admission webhook (gpuquota's included, which
 * evaluates dry runs without charging) and every built-in check runs and
 * nothing is stored. The cost and the quota table explain that decision; the
 * suggestions come from the same quota and limit-range objects. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "quota/config.h"
#include "quota/crd.h"
#include "common/buf.h"
#include "kube/kube.h"
#include "webhook/mutation.h"
#include "cli/plugin.h"
#include "common/json_member.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/policy.h"
#include "quota/quantity.h"
#include "webhook/review.h"
#include "common/yamljson.h"

const char cli_cmd_explain_summary[] =
    "what a pod would cost, which quotas govern it, whether it would be admitted";

#define EXPLAIN_MAX_OBJECTS 10000

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kubectl gpuquota explain -f POD.yaml [-n NS] [-o table|json|yaml]\n"
            "                                [--kubeconfig F] [--context C] [--config FILE]\n"
            "                                [--gpuquota-namespace NS]\n"
            "\n"
            "What the pod in POD.yaml (- for stdin) would cost in GPU quota, the GPUQuotas,\n"
            "GPUTenantQuotas and GPULimitRanges that govern it, whether it would be admitted\n"
            "now (a server-side dry run: the cluster's admission webhooks decide, nothing is\n"
            "created or charged), and if not, what would have to change.\n"
            "\n"
            "  -f, --filename FILE       the pod (YAML or JSON)\n"
            "  --config FILE             price with this gpuquota configuration instead of\n"
            "                            the cluster's (ConfigMap gpuquota-config)\n"
            "  --gpuquota-namespace NS   where gpuquota is installed (default:\n"
            "                            $GPUQUOTA_NAMESPACE, else gpuquota-system)\n"
            "\n%s"
            "\nexit status: 0 admitted, 1 not admitted, 2 bad input or the cluster unreachable\n",
            cli_kflags_usage);
}

static json_object *bytes_json(int64_t v)
{
    char buf[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(v, buf);
    return json_object_new_string(buf);
}

/* ---- the cluster's configuration ------------------------------------------- */

/* ---- the server dry run ---------------------------------------------------- */

typedef struct dry_run {
    bool admitted;
    long http;           /* HTTP status of a refusal */
    char message[512];   /* the API server's message */
    json_object *stored; /* the pod as it would be stored (mutated) */
} dry_run;

/* The message kube_client gives a refused request: "POST path: HTTP 403
 * Forbidden: text". Split it into the status and the server's text. */
static void split_refusal(const char *msg, dry_run *d)
{
    const char *h = strstr(msg, ": HTTP ");
    d->http = 0;
    if (h) {
        char *end;
        d->http = strtol(h + 7, &end, 10);
        const char *t = strstr(end, ": ");
        snprintf(d->message, sizeof(d->message), "%s", t ? t + 2 : end);
    } else {
        snprintf(d->message, sizeof(d->message), "%s", msg);
    }
}

static gq_code server_dry_run(kube_client *c, const char *ns, json_object *pod, dry_run *d,
                              gq_err *err)
{
    char path[320];
    gq_err e;
    gq_err_clear(&e);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods?dryRun=All", ns);
    gq_code rc = kube_create(c, path, pod, NULL, &d->stored, &e);
    if (!rc) {
        d->admitted = true;
        return GQ_OK;
    }
    /* Unreachable or unauthenticated: no decision to explain. */
    if (rc == GQ_EIO || rc == GQ_ETIMEOUT || rc == GQ_ETLS || rc == GQ_EUNAUTHORIZED ||
        rc == GQ_ENOMEM) {
        *err = e;
        return rc;
    }
    split_refusal(e.msg, d);
    return GQ_OK;
}

/* ---- the rewrite of a refused pod ------------------------------------------ */

/* The namespace's GPULimitRanges as the mutating webhook reads them (no
 * quotas: the cluster's dry run decides those). */
static gq_code list_lrs(void *ctx, wh_list_kind kind, const char *ns, json_object **out,
                        gq_err *err)
{
    const cli_objs *lrs = ctx;
    json_object *arr = json_object_new_array();
    (void)ns; /* listed in the pod's namespace already */
    if (!arr)
        return gq_err_oom(err);
    for (size_t i = 0; kind == WH_LIST_LIMIT_RANGES && i < lrs->n; i++)
        if (json_object_array_add(arr, json_object_get(lrs->v[i]))) {
            json_object_put(lrs->v[i]);
            json_object_put(arr);
            return gq_err_oom(err);
        }
    *out = arr;
    return GQ_OK;
}

/* A refused pod as the mutating webhook would have rewritten it (the dry run
 * returns no object): the webhook's own decision, wh_mutate_review_store, over
 * the namespace's GPULimitRanges, its patch applied, so that a whole GPU
 * turned into a GPULimitRange's default slice is priced as that slice.
 * *out is NULL when the mutating webhook itself refuses the pod. */
static gq_code rewrite_offline(const gq_config *cfg, json_object *pod, const char *ns,
                               const cli_objs *lrs, json_object **out, gq_err *err)
{
    json_object *copy = NULL, *review = NULL, *patch = NULL, *made = NULL;
    wh_review_request req;
    wh_review_response resp;
    wh_mutate_info info;
    wh_store src = {.ctx = (void *)lrs, .list = list_lrs};
    bool have_req = false, have_resp = false;
    gq_code rc;
    *out = NULL;
    wh_mutate_info_init(&info);
    if (json_object_deep_copy(pod, &copy, NULL))
        return gq_err_oom(err);
    if ((rc = wh_pod_record_author(copy, "kubectl-gpuquota", err)) ||
        (rc = wh_review_for_pod_create(copy, ns, "kubectl-gpuquota-explain", "kubectl-gpuquota",
                                       &review, err)))
        goto out;
    rc = wh_review_decode_json(review, &req, err); /* takes review */
    review = NULL;
    if (rc)
        goto out;
    have_req = true;
    if ((rc = wh_mutate_review_store(cfg, &req, &src, &resp, &info, err)))
        goto out;
    have_resp = true;
    if (!(rc = wh_mutate_result(&req, &resp, &patch, &made, err)))
        *out = made;
out:
    json_object_put(patch);
    if (have_resp)
        wh_review_response_dispose(&resp);
    wh_mutate_info_dispose(&info);
    if (have_req)
        wh_review_request_dispose(&req);
    json_object_put(review);
    json_object_put(copy);
    return rc;
}

/* ---- governing objects ----------------------------------------------------- */

typedef struct governing {
    gq_quota **quotas; /* those matching the pod */
    size_t n_quotas;
    gq_limit_range **lrs;
    size_t n_lrs;
} governing;

static void governing_dispose(governing *g)
{
    for (size_t i = 0; i < g->n_quotas; i++)
        gq_quota_free(g->quotas[i]);
    for (size_t i = 0; i < g->n_lrs; i++)
        gq_limit_range_free(g->lrs[i]);
    free(g->quotas);
    free(g->lrs);
}

/* One suggestion or note: names (253 bytes each), quantities and a quota
 * message (GQ_ERR_MSG_MAX) fill a few KiB at most. */
#define EXPLAIN_LINE_MAX ((size_t)64 << 10)

/* Append a formatted line to the array s (suggestions, notes). */
static void add_line(json_object *s, const char *fmt, ...) GQ_PRINTF(2, 3);
static void add_line(json_object *s, const char *fmt, ...)
{
    gq_buf b;
    gq_buf_init(&b, EXPLAIN_LINE_MAX);
    va_list ap;
    va_start(ap, fmt);
    gq_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    json_object_array_add(s, json_object_new_string(b.data ? b.data : ""));
    gq_buf_dispose(&b);
}

/* ---- the report ------------------------------------------------------------ */

static json_object *cost_json(const gq_config *cfg, const gq_pod_cost *c)
{
    json_object *o = json_object_new_object(), *ctrs = json_object_new_array();
    json_object_object_add(o, "backend", json_object_new_string(gq_backend_name(cfg->backend)));
    json_object_object_add(o, "model", c->model ? json_object_new_string(c->model->name) : NULL);
    json_object_object_add(o, "modelPinned", json_object_new_boolean(c->model_pinned));
    json_object_object_add(o, "gpu-memory", bytes_json(c->gpu_memory));
    json_object_object_add(o, "gpus", json_object_new_int64(c->gpus));
    json_object_object_add(o, "gpu-pods", json_object_new_int64(c->gpu_pods));
    for (size_t i = 0; i < c->n_ctrs; i++) {
        const gq_ctr_cost *k = &c->ctrs[i];
        json_object *j = json_object_new_object();
        json_object_object_add(j, "name", json_object_new_string(k->name));
        json_object_object_add(j, "request", json_object_new_string(k->original));
        json_object_object_add(j, "form", json_object_new_string(gq_form_name(k->form)));
        json_object_object_add(j, "gpus", json_object_new_int64(k->gpus));
        json_object_object_add(j, "exclusive", json_object_new_boolean(k->exclusive));
        json_object_object_add(j, "chargedPerGPU", bytes_json(k->charged_per_gpu));
        json_object_array_add(ctrs, j);
    }
    json_object_object_add(o, "containers", ctrs);
    return o;
}

static void quota_label(const gq_quota *q, char *buf, size_t cap)
{
    if (q->kind == GQ_QUOTA_TENANT)
        snprintf(buf, cap, "GPUTenantQuota %s", q->name);
    else
        snprintf(buf, cap, "GPUQuota %s/%s", q->namespace_, q->name);
}

/* One quota's lines: per key it limits and the pod charges, what is in use,
 * what the pod adds, and whether it fits; suggestions for keys that do not. */
static json_object *quota_json(const gq_quota *q, const gq_amounts *charge, int64_t now,
                               json_object *suggestions)
{
    json_object *o = json_object_new_object(), *res = json_object_new_array();
    gq_amounts in_use;
    gq_err e;
    char label[600];
    quota_label(q, label, sizeof(label));
    if (gq_quota_in_use(q, now, NULL, &in_use, &e))
        in_use = q->used;
    cli_quota_ident(o, q);
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!q->hard.set[k])
            continue;
        int64_t hard = q->hard.v[k], use = in_use.v[k], req = charge->v[k];
        bool fits = req <= 0 || (use <= hard && req <= hard - use);
        char h[GQ_QUANTITY_STR_MAX], u[GQ_QUANTITY_STR_MAX], r[GQ_QUANTITY_STR_MAX],
            a[GQ_QUANTITY_STR_MAX], x[GQ_QUANTITY_STR_MAX];
        int64_t avail = use < hard ? hard - use : 0;
        gq_amount_format(&q->hard, (gq_qkey)k, h);
        cli_fmt_amount(k, use, u);
        cli_fmt_amount(k, req, r);
        cli_fmt_amount(k, avail, a);
        json_object *j = json_object_new_object();
        json_object_object_add(j, "resource", json_object_new_string(gq_qkey_name((gq_qkey)k)));
        json_object_object_add(j, "hard", json_object_new_string(h));
        json_object_object_add(j, "inUse", json_object_new_string(u));
        json_object_object_add(j, "request", json_object_new_string(r));
        json_object_object_add(j, "available", json_object_new_string(a));
        json_object_object_add(j, "fits", json_object_new_boolean(fits));
        json_object_array_add(res, j);
        if (fits)
            continue;
        cli_fmt_amount(k, req - avail, x);
        const char *key = gq_qkey_name((gq_qkey)k);
        if (k == GQ_KEY_GPU_MEMORY && avail > 0)
            add_line(suggestions, "ask for at most %s of gpu-memory (%s has %s left of %s)", a,
                     label, a, h);
        add_line(suggestions,
                 "free %s of %s in %s: %s are in use of %s (delete or finish pods it "
                 "counts)",
                 x, key, label, u, h);
        if (use <= INT64_MAX - req) {
            cli_fmt_amount(k, use + req, x);
            add_line(suggestions, "or have an administrator raise %s spec.hard.%s to %s", label,
                     key, x);
        }
    }
    json_object_object_add(o, "resources", res);
    return o;
}

static bool model_allowed(const gq_limit_item *it, const char *model)
{
    for (size_t i = 0; i < it->n_allowed_models; i++)
        if (model && !strcmp(it->allowed_models[i], model))
            return true;
    return false;
}

/* One item of a GPULimitRange as the report shows it. */
static json_object *limit_item_json(const gq_limit_item *it)
{
    json_object *j = json_object_new_object();
    json_object_object_add(
        j, "type", json_object_new_string(it->type == GQ_LIMIT_CONTAINER ? "Container" : "Pod"));
    if (it->has_min)
        json_object_object_add(j, "min", bytes_json(it->min.v[GQ_KEY_GPU_MEMORY]));
    if (it->has_max)
        json_object_object_add(j, "max", bytes_json(it->max.v[GQ_KEY_GPU_MEMORY]));
    if (it->has_default)
        json_object_object_add(j, "default", bytes_json(it->def.v[GQ_KEY_GPU_MEMORY]));
    if (it->has_max_gpus)
        json_object_object_add(j, "maxGPUs", json_object_new_int64(it->max_gpus));
    if (it->n_allowed_models) {
        json_object *m = json_object_new_array();
        for (size_t k = 0; k < it->n_allowed_models; k++)
            json_object_array_add(m, json_object_new_string(it->allowed_models[k]));
        json_object_object_add(j, "allowedModels", m);
    }
    return j;
}

/* Suggestions for the containers a Container item's limits refuse: what each
 * limit compares, as gq_limit_validate compares it. */
static void container_suggestions(const gq_limit_item *it, const char *lr_name,
                                  const gq_pod_cost *cost, json_object *suggestions)
{
    char a[GQ_QUANTITY_STR_MAX], b[GQ_QUANTITY_STR_MAX];
    for (size_t c = 0; c < cost->n_ctrs; c++) {
        const gq_ctr_cost *k = &cost->ctrs[c];
        int64_t total = k->charged_per_gpu * k->gpus;
        gq_format_bytes(total, b);
        if (it->has_max && total > it->max.v[GQ_KEY_GPU_MEMORY]) {
            gq_format_bytes(it->max.v[GQ_KEY_GPU_MEMORY], a);
            add_line(suggestions,
                     "ask for at most %s of gpu-memory in container %s (it asks %s; "
                     "GPULimitRange %s)",
                     a, k->name, b, lr_name);
        }
        if (it->has_min && total < it->min.v[GQ_KEY_GPU_MEMORY]) {
            gq_format_bytes(it->min.v[GQ_KEY_GPU_MEMORY], a);
            add_line(suggestions,
                     "ask for at least %s of gpu-memory in container %s (it asks %s; "
                     "GPULimitRange %s)",
                     a, k->name, b, lr_name);
        }
        if (it->has_max_gpus && k->gpus > it->max_gpus)
            add_line(suggestions, "use at most %" PRId64 " GPUs in container %s (GPULimitRange %s)",
                     it->max_gpus, k->name, lr_name);
    }
}

/* The suggestion to pick one of an item's allowed models. */
static void model_suggestion(const gq_limit_item *it, const char *lr_name, json_object *suggestions)
{
    char list[600];
    size_t len = 0;
    list[0] = '\0';
    for (size_t k = 0; k < it->n_allowed_models && len < sizeof(list); k++) {
        int w =
            snprintf(list + len, sizeof(list) - len, "%s%s", k ? ", " : "", it->allowed_models[k]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    add_line(suggestions,
             "pick an allowed GPU model with annotation gpuquota.io/gpu-model: %s "
             "(GPULimitRange %s)",
             list, lr_name);
}

/* A GPULimitRange's items, and suggestions for the ones the pod breaks. */
static json_object *limit_range_json(const gq_limit_range *lr, const gq_pod_cost *cost,
                                     json_object *suggestions)
{
    json_object *o = json_object_new_object(), *items = json_object_new_array();
    char a[GQ_QUANTITY_STR_MAX];
    json_object_object_add(o, "name", json_object_new_string(lr->name));
    for (size_t i = 0; i < lr->n_items; i++) {
        const gq_limit_item *it = &lr->items[i];
        bool ctr = it->type == GQ_LIMIT_CONTAINER;
        json_object_array_add(items, limit_item_json(it));
        if (!cost || !cost->n_ctrs)
            continue;
        if (ctr)
            container_suggestions(it, lr->name, cost, suggestions);
        if (!ctr && it->has_max && cost->gpu_memory > it->max.v[GQ_KEY_GPU_MEMORY]) {
            gq_format_bytes(it->max.v[GQ_KEY_GPU_MEMORY], a);
            add_line(suggestions,
                     "ask for at most %s of gpu-memory in the whole pod (GPULimitRange %s)", a,
                     lr->name);
        }
        if (it->n_allowed_models &&
            !model_allowed(it, cost->model_pinned && cost->model ? cost->model->name : NULL))
            model_suggestion(it, lr->name, suggestions);
    }
    json_object_object_add(o, "limits", items);
    return o;
}

/* ---- printing --------------------------------------------------------------- */

static const char *jstr(json_object *o, const char *key, const char *dflt)
{
    const char *s = gq_json_get_string(o, key);
    return s ? s : dflt;
}

static void print_cost(json_object *r)
{
    json_object *cost = gq_json_member(r, "cost");
    if (!cost) {
        printf("Cost:       none: %s\n", jstr(r, "costError", "no GPU asked"));
        return;
    }
    const char *model = jstr(cost, "model", NULL);
    printf("Cost:       gpu-memory=%s gpus=%" PRId64 " gpu-pods=%" PRId64 "%s%s%s\n",
           jstr(cost, "gpu-memory", "0"), json_object_get_int64(gq_json_member(cost, "gpus")),
           json_object_get_int64(gq_json_member(cost, "gpu-pods")), model ? " (model " : "",
           model ? model : "",
           model ? (json_object_get_boolean(gq_json_member(cost, "modelPinned")) ? ", pinned)"
                                                                                 : ", default)")
                 : "");
    json_object *ctrs = gq_json_member(cost, "containers");
    for (size_t i = 0; ctrs && i < json_object_array_length(ctrs); i++) {
        json_object *c = json_object_array_get_idx(ctrs, i);
        printf("            container %s: %s -> %" PRId64 " GPU(s) x %s%s\n", jstr(c, "name", "?"),
               jstr(c, "request", "?"), json_object_get_int64(gq_json_member(c, "gpus")),
               jstr(c, "chargedPerGPU", "?"),
               json_object_get_boolean(gq_json_member(c, "exclusive")) ? " (whole)" : "");
    }
}

static void print_quota(json_object *q)
{
    json_object *res = gq_json_member(q, "resources");
    const char *ns = jstr(q, "namespace", NULL);
    printf("  %s %s%s%s\n", jstr(q, "kind", "?"), ns ? ns : "", ns ? "/" : "",
           jstr(q, "name", "?"));
    for (size_t j = 0; res && j < json_object_array_length(res); j++) {
        json_object *x = json_object_array_get_idx(res, j);
        printf("    %-11s in use %-8s + this pod %-8s of hard %-8s %s\n", jstr(x, "resource", "?"),
               jstr(x, "inUse", "?"), jstr(x, "request", "?"), jstr(x, "hard", "?"),
               json_object_get_boolean(gq_json_member(x, "fits")) ? "fits" : "EXCEEDED");
    }
}

static void print_limit_range(json_object *r, json_object *l)
{
    json_object *items = gq_json_member(l, "limits"), *v;
    printf("  GPULimitRange %s/%s\n", jstr(r, "namespace", "?"), jstr(l, "name", "?"));
    for (size_t j = 0; items && j < json_object_array_length(items); j++) {
        json_object *it = json_object_array_get_idx(items, j);
        printf("    %-9s", jstr(it, "type", "?"));
        static const char *const keys[] = {"min", "default", "max"};
        for (size_t k = 0; k < 3; k++)
            if ((v = gq_json_member(it, keys[k])))
                printf(" %s %s", keys[k], json_object_get_string(v));
        if ((v = gq_json_member(it, "maxGPUs")))
            printf(" maxGPUs %s", json_object_get_string(v));
        if ((v = gq_json_member(it, "allowedModels"))) {
            printf(" allowedModels");
            for (size_t k = 0; k < json_object_array_length(v); k++)
                printf("%s%s", k ? "," : " ",
                       json_object_get_string(json_object_array_get_idx(v, k)));
        }
        printf("\n");
    }
}

static void print_governing(json_object *r)
{
    json_object *quotas = gq_json_member(r, "quotas"), *lrs = gq_json_member(r, "limitRanges");
    size_t nq = quotas ? json_object_array_length(quotas) : 0;
    size_t nl = lrs ? json_object_array_length(lrs) : 0;
    printf("Governed by:%s\n", nq || nl ? "" : " no GPUQuota, GPUTenantQuota or GPULimitRange");
    for (size_t i = 0; i < nq; i++)
        print_quota(json_object_array_get_idx(quotas, i));
    for (size_t i = 0; i < nl; i++)
        print_limit_range(r, json_object_array_get_idx(lrs, i));
}

static void print_text(json_object *r)
{
    printf("Pod:        %s/%s\n", jstr(r, "namespace", "?"), jstr(r, "pod", "?"));
    printf("Config:     %s\n", jstr(r, "config", "?"));
    print_cost(r);
    print_governing(r);
    bool admitted = json_object_get_boolean(gq_json_member(r, "admitted"));
    printf("Admission:  %s (server dry run)\n", admitted ? "would be admitted" : "refused");
    if (!admitted)
        printf("            %s\n", jstr(r, "message", ""));
    json_object *s = gq_json_member(r, "suggestions"), *notes = gq_json_member(r, "notes");
    size_t ns = s ? json_object_array_length(s) : 0;
    if (ns)
        printf("To be admitted:\n");
    for (size_t i = 0; i < ns; i++)
        printf("  - %s\n", json_object_get_string(json_object_array_get_idx(s, i)));
    for (size_t i = 0; notes && i < json_object_array_length(notes); i++)
        printf("Note: %s\n", json_object_get_string(json_object_array_get_idx(notes, i)));
}

/* ---- the command ------------------------------------------------------------ */

/* One run of explain: its options, what it read and what it reports. */
typedef struct explain {
    cli_kflags f;
    const char *file, *config_file, *sys_ns;
    kube_client *c;
    gq_config *cfg;
    char *ns, *buf, source[600];
    size_t len, n_docs;
    json_object **docs, *pod, *meta;
    json_object *report, *suggestions, *notes; /* suggestions and notes held by report */
    json_object *ns_obj, *ns_labels;
    cli_objs quotas, lrs;
    governing g;
    gq_pod gp; /* the pod as priced: quota/pod.h, under admission */
    dry_run d;
} explain;

static void explain_dispose(explain *x)
{
    json_object_put(x->report);
    json_object_put(x->ns_obj);
    json_object_put(x->d.stored);
    governing_dispose(&x->g);
    cli_objs_dispose(&x->quotas);
    cli_objs_dispose(&x->lrs);
    gq_pod_dispose(&x->gp);
    gq_config_free(x->cfg);
    gq_yaml_docs_free(x->docs, x->n_docs);
    free(x->buf);
    free(x->ns);
    kube_client_free(x->c);
}

/* The quotas that govern the pod and the namespace's GPULimitRanges, into
 * x->g; objects that do not parse are noted. */
static gq_code find_governing(explain *x, gq_err *err)
{
    const cli_objs *quotas = &x->quotas, *lrs = &x->lrs;
    governing *g = &x->g;
    gq_pod_facts facts;
    gq_code rc = gq_pod_facts_from_json(x->pod, x->ns, &facts, err);
    if (rc)
        return rc;
    if ((quotas->n && !(g->quotas = calloc(quotas->n, sizeof(*g->quotas)))) ||
        (lrs->n && !(g->lrs = calloc(lrs->n, sizeof(*g->lrs)))))
        return gq_err_oom(err);
    for (size_t i = 0; i < quotas->n; i++) {
        gq_quota *q = NULL;
        gq_err e;
        if (gq_quota_parse(quotas->v[i], &q, &e)) {
            add_line(x->notes, "a quota does not parse: %s", e.msg);
            continue;
        }
        if (gq_quota_matches(q, &facts, x->ns_labels))
            g->quotas[g->n_quotas++] = q;
        else
            gq_quota_free(q);
    }
    for (size_t i = 0; i < lrs->n; i++) {
        gq_limit_range *lr = NULL;
        gq_err e;
        if (gq_limit_range_parse(lrs->v[i], &lr, &e)) {
            add_line(x->notes, "a GPULimitRange does not parse: %s", e.msg);
            continue;
        }
        g->lrs[g->n_lrs++] = lr;
    }
    return GQ_OK;
}

/* The one Pod of -f, in the namespace kubectl's rule gives it (the object's,
 * unless -n says another: an error), named when it has no name. */
static gq_code read_pod(explain *x, gq_err *err)
{
    const char *name = strcmp(x->file, "-") ? x->file : "<stdin>";
    gq_code rc;
    if ((rc = cli_read_file(x->file, GQ_YAML_MAX_BYTES, &x->buf, &x->len, err)) ||
        (rc = gq_yaml_load(x->buf, x->len, name, &x->docs, &x->n_docs, err)))
        return rc;
    json_object *pod = x->n_docs == 1 ? x->docs[0] : NULL;
    const char *kind = gq_json_get_string(pod, "kind");
    if (!pod || !json_object_is_type(pod, json_type_object) || !kind || strcmp(kind, "Pod"))
        return gq_err_set(err, GQ_EINVAL, "%s: expected one Pod", name);
    json_object *meta = gq_json_member(pod, "metadata");
    if (!meta || !json_object_is_type(meta, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "%s: the pod has no metadata", name);
    const char *pod_ns = gq_json_get_string(meta, "namespace");
    if (pod_ns && x->f.namespace_ && strcmp(pod_ns, x->f.namespace_))
        return gq_err_set(err, GQ_EINVAL,
                          "the namespace from the provided object \"%s\" does not match the "
                          "namespace \"%s\". You must pass '--namespace=%s' to perform this "
                          "operation.",
                          pod_ns, x->f.namespace_, pod_ns);
    if (pod_ns && !x->f.namespace_)
        x->f.namespace_ = pod_ns;
    if (!gq_json_get_string(meta, "name") && !gq_json_get_string(meta, "generateName"))
        json_object_object_add(meta, "generateName", json_object_new_string("gpuquota-explain-"));
    x->pod = pod;
    x->meta = meta;
    return GQ_OK;
}

/* The governing objects, read as the user may read them: the namespace's
 * GPUQuotas and GPULimitRanges (an error when they cannot be read), the
 * GPUTenantQuotas and the namespace's labels (a note when they cannot). */
static gq_code read_objects(explain *x, gq_err *err)
{
    char path[320];
    gq_err e;
    gq_code rc;
    snprintf(path, sizeof(path), "/apis/gpuquota.io/v1alpha1/namespaces/%s/gpuquotas", x->ns);
    if ((rc = kube_list(x->c, path, NULL, cli_objs_collect, &x->quotas, NULL, err)))
        return rc;
    if (kube_list(x->c, "/apis/gpuquota.io/v1alpha1/gputenantquotas", NULL, cli_objs_collect,
                  &x->quotas, NULL, &e))
        add_line(x->notes, "GPUTenantQuotas could not be read: %s", e.msg);
    snprintf(path, sizeof(path), "/apis/gpuquota.io/v1alpha1/namespaces/%s/gpulimitranges", x->ns);
    if ((rc = kube_list(x->c, path, NULL, cli_objs_collect, &x->lrs, NULL, err)))
        return rc;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s", x->ns);
    if (!kube_get(x->c, path, NULL, &x->ns_obj, &e))
        x->ns_labels = gq_json_member(gq_json_member(x->ns_obj, "metadata"), "labels");
    else
        add_line(x->notes,
                 "namespace labels could not be read (tenants selecting by label "
                 "are not shown): %s",
                 e.msg);
    return GQ_OK;
}

/* What it costs: the stored pod when admitted (limit-range defaults and the
 * rewrite applied, exactly what is charged), else the pod as the mutating
 * webhook would have rewritten it, else as sent; then each governing quota
 * and limit range against that. */
static void report_price(explain *x)
{
    gq_err e;
    json_object *priced_pod = x->d.admitted ? json_object_get(x->d.stored) : NULL;
    if (!priced_pod && rewrite_offline(x->cfg, x->pod, x->ns, &x->lrs, &priced_pod, &e))
        add_line(x->notes, "the rewrite could not be computed offline: %s", e.msg);
    gq_pod_scope scope = {.ns = x->ns,
                          .admission = true,
                          .lrs = (const gq_limit_range *const *)x->g.lrs,
                          .n_lrs = x->g.n_lrs};
    gq_err cerr;
    bool priced = !gq_pod_decode(x->cfg, priced_pod ? priced_pod : x->pod, &scope, &x->gp, &cerr);
    json_object_put(priced_pod); /* gp.facts are not read after this */
    gq_amounts charge;
    memset(&charge, 0, sizeof(charge));
    if (priced && x->gp.cost.n_ctrs) {
        json_object_object_add(x->report, "cost", cost_json(x->cfg, &x->gp.cost));
        charge = x->gp.charge;
    } else {
        json_object_object_add(
            x->report, "costError",
            json_object_new_string(priced ? "the pod asks for no GPU" : cerr.msg));
        if (!priced && !x->d.admitted)
            add_line(x->suggestions, "fix the GPU request: %s", cerr.msg);
    }
    json_object *qs = json_object_new_array(), *ls = json_object_new_array();
    int64_t now = (int64_t)time(NULL);
    json_object *quota_sugg =
        x->d.admitted ? json_object_new_array() : json_object_get(x->suggestions);
    for (size_t i = 0; i < x->g.n_quotas; i++)
        json_object_array_add(qs, quota_json(x->g.quotas[i], &charge, now, quota_sugg));
    for (size_t i = 0; i < x->g.n_lrs; i++)
        json_object_array_add(
            ls, limit_range_json(x->g.lrs[i], priced ? &x->gp.cost : NULL, quota_sugg));
    json_object_put(quota_sugg);
    json_object_object_add(x->report, "quotas", qs);
    json_object_object_add(x->report, "limitRanges", ls);
}

/* The report's head, holding suggestions and notes from here on so that
 * every exit frees them. */
static void report_start(explain *x)
{
    const char *pod_name = gq_json_get_string(x->meta, "name");
    x->report = json_object_new_object();
    x->suggestions = json_object_new_array();
    x->notes = json_object_new_array();
    json_object_object_add(x->report, "suggestions", x->suggestions);
    json_object_object_add(x->report, "notes", x->notes);
    json_object_object_add(x->report, "namespace", json_object_new_string(x->ns));
    json_object_object_add(
        x->report, "pod",
        json_object_new_string(pod_name ? pod_name : gq_json_get_string(x->meta, "generateName")));
    json_object_object_add(x->report, "config", json_object_new_string(x->source));
}

/* The verdict, then suggestions and notes, read last. */
static void report_end(explain *x)
{
    json_object *report = x->report, *suggestions = x->suggestions, *notes = x->notes;
    json_object_object_add(report, "admitted", json_object_new_boolean(x->d.admitted));
    if (!x->d.admitted) {
        json_object_object_add(report, "code", json_object_new_int64(x->d.http));
        json_object_object_add(report, "message", json_object_new_string(x->d.message));
        if (!json_object_array_length(suggestions))
            add_line(suggestions, "%s",
                     "nothing in the GPU quotas or limit ranges explains the refusal: "
                     "read the message above");
    }
    json_object_get(suggestions);
    json_object_get(notes);
    json_object_object_del(report, "suggestions");
    json_object_object_del(report, "notes");
    json_object_object_add(report, "suggestions", suggestions);
    json_object_object_add(report, "notes", notes);
}

int cli_cmd_explain(int argc, char **argv)
{
    explain x = {.quotas = {.max = EXPLAIN_MAX_OBJECTS}, .lrs = {.max = EXPLAIN_MAX_OBJECTS}};
    gq_err err;
    int status = CLI_EXIT_USAGE;
    gq_pod_init(&x.gp);
    gq_err_clear(&err);
    cli_opt opts[CLI_KFLAGS_N + 3];
    cli_kflags_opts(&x.f, opts);
    opts[CLI_KFLAGS_N] =
        (cli_opt){.name = "--filename", .alias = "-f", .kind = CLI_OPT_NONEMPTY, .dst = &x.file};
    opts[CLI_KFLAGS_N + 1] =
        (cli_opt){.name = "--config", .kind = CLI_OPT_NONEMPTY, .dst = &x.config_file};
    opts[CLI_KFLAGS_N + 2] =
        (cli_opt){.name = "--gpuquota-namespace", .kind = CLI_OPT_NONEMPTY, .dst = &x.sys_ns};
    int parsed = cli_parse_or_exit(&(cli_cmd){"explain", opts, CLI_KFLAGS_N + 3, usage}, argc, argv,
                                   NULL, NULL);
    if (parsed >= 0)
        return parsed;
    if (!x.file || x.f.all_namespaces) {
        fprintf(stderr, "gpuquota explain: %s\n",
                x.file ? "-A does not apply: a pod has one namespace" : "-f POD.yaml is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (read_pod(&x, &err) || cli_gpuquota_namespace(x.sys_ns, &x.sys_ns, &err) ||
        cli_kflags_client(&x.f, &x.c, &x.ns, &err) ||
        cli_cluster_config(x.c, x.config_file, x.sys_ns, &x.cfg, x.source, sizeof(x.source), &err))
        goto fail;
    json_object_object_add(x.meta, "namespace", json_object_new_string(x.ns));
    report_start(&x);
    /* The cluster decides; the governing objects and the price explain it. */
    if (read_objects(&x, &err) || server_dry_run(x.c, x.ns, x.pod, &x.d, &err) ||
        find_governing(&x, &err))
        goto fail;
    report_price(&x);
    report_end(&x);
    if (x.f.output == CLI_OUT_TABLE)
        print_text(x.report);
    else
        cli_print_doc(stdout, x.f.output, x.report);
    status = x.d.admitted ? CLI_EXIT_OK : CLI_EXIT_DENIED;
    goto out;
fail:
    fprintf(stderr, "kubectl gpuquota explain: %s\n", err.msg);
out:
    explain_dispose(&x);
    return status;
}
