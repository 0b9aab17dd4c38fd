/* gpuquota queue: every queue of GPUQuotas and GPUTenantQuotas in order,
 * read from the API server (quota objects, pods, namespace labels) through
 * kube/. The order and the charge come from the functions the controller
 * uses (gq_queue_entry_cmp, gq_pod_decode): what is printed is what
 * the controller will do. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/plugin.h"
#include "quota/config.h"
#include "kube/kube.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/podqueue.h"

const char cli_cmd_queue_summary[] = "list queued pods per quota, in the order they will start";

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota queue [-n NAMESPACE] [-o table|json] [--kubeconfig FILE]\n"
               "                      [--config FILE] [--gpuquota-namespace NS]\n"
               "\n"
               "Lists every GPUQuota and GPUTenantQuota that has pods waiting behind the\n"
               "scheduling gate gpuquota.io/quota, and the pods in the order they will start\n"
               "(priority, then age): position, charge, priority, pod group and age.\n"
               "  -n, --namespace NS   only queues of pods in NS (default: every namespace)\n"
               "  -o, --output FORMAT  table (default) or json\n"
               "  --kubeconfig FILE    kubeconfig (default: $KUBECONFIG, else in-cluster)\n"
               "  --config FILE        price pods with this gpuquota configuration instead of\n"
               "                       the cluster's (ConfigMap gpuquota-config; the embedded\n"
               "                       default when it cannot be read, said on stderr)\n"
               "  --gpuquota-namespace NS  where gpuquota is installed (default:\n"
               "                       $GPUQUOTA_NAMESPACE, else gpuquota-system)\n"
               "Exit 0, 1 when the API server cannot be read, 2 on bad usage.\n");
}

typedef struct qpod {
    json_object *pod; /* borrowed from the pod list */
    const char *ns, *name, *uid;
    gq_pod_facts facts;
    gq_amounts charge;
    gq_pod_group group;
    gq_queue_entry e;
} qpod;

typedef struct collect {
    json_object *arr;
} collect;

static gq_code keep_item(void *ud, json_object *item, gq_err *err)
{
    collect *c = ud;
    if (json_object_array_add(c->arr, json_object_get(item))) {
        json_object_put(item);
        return gq_err_oom(err);
    }
    return GQ_OK;
}

static gq_code list_all(kube_client *kc, const char *path, json_object **out, gq_err *err)
{
    collect c = {json_object_new_array()};
    if (!c.arr)
        return gq_err_oom(err);
    gq_code rc = kube_list(kc, path, NULL, keep_item, &c, NULL, err);
    if (rc) {
        json_object_put(c.arr);
        return rc;
    }
    *out = c.arr;
    return GQ_OK;
}

static const char *str_at(json_object *o, const char *a, const char *b)
{
    json_object *x = NULL, *y = NULL;
    if (!json_object_object_get_ex(o, a, &x) || !json_object_object_get_ex(x, b, &y) ||
        !json_object_is_type(y, json_type_string))
        return NULL;
    return json_object_get_string(y);
}

static json_object *ns_labels(json_object *nss, const char *ns)
{
    for (size_t i = 0; i < json_object_array_length(nss); i++) {
        json_object *n = json_object_array_get_idx(nss, i), *m = NULL, *l = NULL;
        const char *name = str_at(n, "metadata", "name");
        if (name && !strcmp(name, ns) && json_object_object_get_ex(n, "metadata", &m) &&
            json_object_object_get_ex(m, "labels", &l))
            return l;
    }
    return NULL;
}

static int ref_cmp(const void *a, const void *b)
{
    const qpod *x = *(const qpod *const *)a, *y = *(const qpod *const *)b;
    return gq_queue_entry_cmp(&x->e, &y->e);
}

static void age_text(int64_t s, char *buf, size_t cap)
{
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, cap, "%" PRId64 "s", s);
    else if (s < 7200)
        snprintf(buf, cap, "%" PRId64 "m", s / 60);
    else if (s < 172800)
        snprintf(buf, cap, "%" PRId64 "h", s / 3600);
    else
        snprintf(buf, cap, "%" PRId64 "d", s / 86400);
}

static const char *strategy_name(const gq_quota *q)
{
    return q->strategy == GQ_QUEUE_STRICT ? "StrictFIFO" : "BestEffortFIFO";
}

/* The pods of pods[0..n) quota q charges, in queue order, into line;
 * returns how many. */
static size_t queue_of(const gq_quota *q, qpod *pods, size_t n, json_object *nss, qpod **line)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (gq_quota_limits(q, &pods[i].charge) &&
            gq_quota_matches(q, &pods[i].facts, ns_labels(nss, pods[i].ns)))
            line[m++] = &pods[i];
    if (m)
        qsort(line, m, sizeof(*line), ref_cmp);
    return m;
}

static int64_t pod_age(const qpod *p, int64_t now)
{
    return p->e.created_us ? now - p->e.created_us / 1000000 : 0;
}

/* One queue's table rows: the quota named on its first. */
static void print_queue_text(const gq_quota *q, qpod **line, size_t m, int64_t now)
{
    char qname[300];
    snprintf(qname, sizeof qname, "%s%s%s%s",
             q->kind == GQ_QUOTA_TENANT ? "GPUTenantQuota " : "GPUQuota ",
             q->namespace_ ? q->namespace_ : "", q->namespace_ ? "/" : "", q->name);
    for (size_t i = 0; i < m; i++) {
        qpod *p = line[i];
        char mem[GQ_QUANTITY_STR_MAX], age[32], pod[300];
        gq_amount_format(&p->charge, GQ_KEY_GPU_MEMORY, mem);
        age_text(pod_age(p, now), age, sizeof age);
        snprintf(pod, sizeof pod, "%s/%s", p->ns, p->name);
        printf("%-32s %-14s %4zu  %-40s %8" PRId32 " %10s %-20s %s\n", i ? "" : qname,
               i ? "" : strategy_name(q), i + 1, pod, p->e.priority, mem,
               p->group.present ? p->group.name : "-", age);
    }
}

static void add_quota_fields(json_object *jq, const gq_quota *q)
{
    cli_quota_ident(jq, q);
    json_object_object_add(
        jq, "whenExceeded",
        json_object_new_string(q->when_exceeded == GQ_WHEN_QUEUE ? "Queue" : "Deny"));
    json_object_object_add(jq, "queueingStrategy", json_object_new_string(strategy_name(q)));
    json_object_object_add(jq, "hard", gq_amounts_to_json(&q->hard));
    json_object_object_add(jq, "used", gq_amounts_to_json(&q->used));
}

static void add_pod_fields(json_object *o, const qpod *p, size_t pos, int64_t now)
{
    json_object_object_add(o, "position", json_object_new_int64((int64_t)pos));
    json_object_object_add(o, "namespace", json_object_new_string(p->ns));
    json_object_object_add(o, "name", json_object_new_string(p->name));
    json_object_object_add(o, "uid", json_object_new_string(p->uid));
    json_object_object_add(o, "priority", json_object_new_int(p->e.priority));
    json_object_object_add(o, "charge", gq_amounts_to_json(&p->charge));
    if (p->group.present) {
        json_object_object_add(o, "podGroup", json_object_new_string(p->group.name));
        json_object_object_add(o, "podGroupSize", json_object_new_int64(p->group.size));
    }
    json_object_object_add(o, "ageSeconds", json_object_new_int64(pod_age(p, now)));
}

/* One queue appended to out as {kind, ..., pods}; GQ_ENOMEM or GQ_OK. */
static gq_code add_queue_json(json_object *out, const gq_quota *q, qpod **line, size_t m,
                              int64_t now)
{
    json_object *jq = json_object_new_object(), *jp = json_object_new_array();
    if (!jq || !jp || json_object_array_add(out, jq)) {
        json_object_put(jq);
        json_object_put(jp);
        return GQ_ENOMEM;
    }
    add_quota_fields(jq, q);
    json_object_object_add(jq, "pods", jp);
    for (size_t i = 0; i < m; i++) {
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(jp, o)) {
            json_object_put(o);
            return GQ_ENOMEM;
        }
        add_pod_fields(o, line[i], i + 1, now);
    }
    return GQ_OK;
}

/* {"queues": out} printed; takes out. */
static gq_code print_json_doc(json_object *out)
{
    json_object *doc = json_object_new_object();
    if (!doc) {
        json_object_put(out);
        return GQ_ENOMEM;
    }
    json_object_object_add(doc, "queues", out);
    printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(doc);
    return GQ_OK;
}

/* Print the queues of quotas over pods; returns GQ_ENOMEM or GQ_OK. */
static gq_code print_queues(gq_quota **qs, size_t nq, qpod *pods, size_t n, json_object *nss,
                            bool json, int64_t now)
{
    gq_code rc = GQ_OK;
    qpod **line = n ? calloc(n, sizeof(*line)) : NULL;
    json_object *out = json ? json_object_new_array() : NULL;
    if ((n && !line) || (json && !out)) {
        free(line);
        json_object_put(out);
        return GQ_ENOMEM;
    }
    if (!json)
        printf("%-32s %-14s %4s  %-40s %8s %10s %-20s %s\n", "QUOTA", "STRATEGY", "POS", "POD",
               "PRIORITY", "GPU-MEMORY", "GROUP", "AGE");
    for (size_t j = 0; j < nq && !rc; j++) {
        size_t m = queue_of(qs[j], pods, n, nss, line);
        if (!m)
            continue;
        if (json)
            rc = add_queue_json(out, qs[j], line, m, now);
        else
            print_queue_text(qs[j], line, m, now);
    }
    if (!rc && json) {
        rc = print_json_doc(out);
        out = NULL;
    }
    json_object_put(out);
    free(line);
    return rc;
}

/* A namespace name as it may appear in an API path. */
static gq_code parse_ns(const char *name, const char *value, void *dst, gq_err *err)
{
    if (!value[0] || strlen(value) > 253 || strchr(value, '/'))
        return gq_err_set(err, GQ_EINVAL, "%s %s: not a namespace name", name, value);
    *(const char **)dst = value;
    return GQ_OK;
}

typedef struct queue_opts {
    const char *ns; /* NULL: every namespace */
    const char *kubeconfig, *config;
    const char *sys_ns; /* where gpuquota's ConfigMap is */
    int output;         /* 0 table, 1 json */
} queue_opts;

/* What the queues are made of: the objects read and the pods decoded. */
typedef struct queue_view {
    gq_config *cfg;
    kube_config *kcfg;
    kube_client *kc;
    json_object *gqs, *gtqs, *podl, *nss;
    gq_quota **qs;
    size_t nq, n;
    qpod *pods; /* the gated pods that price, pods[0..n) */
} queue_view;

static void queue_view_dispose(queue_view *v)
{
    gq_quota_list_free(v->qs, v->nq);
    free(v->pods);
    json_object_put(v->gqs);
    json_object_put(v->gtqs);
    json_object_put(v->podl);
    json_object_put(v->nss);
    kube_client_free(v->kc);
    kube_config_free(v->kcfg);
    gq_config_free(v->cfg);
}

/* CLI_EXIT_* to exit with, or -1 to go on. */
static int parse_opts(int argc, char **argv, queue_opts *o)
{
    static const char *const outputs[] = {"table", "json", NULL};
    const cli_opt opts[] = {
        {.name = "--namespace", .alias = "-n", .kind = CLI_OPT_FN, .dst = &o->ns, .fn = parse_ns},
        {.name = "--output",
         .alias = "-o",
         .kind = CLI_OPT_CHOICE,
         .dst = &o->output,
         .choices = outputs},
        {.name = "--kubeconfig", .kind = CLI_OPT_NONEMPTY, .dst = &o->kubeconfig},
        {.name = "--config", .kind = CLI_OPT_NONEMPTY, .dst = &o->config},
        {.name = "--gpuquota-namespace", .kind = CLI_OPT_FN, .dst = &o->sys_ns, .fn = parse_ns},
    };
    return cli_parse_or_exit(&(cli_cmd){"queue", opts, sizeof(opts) / sizeof(opts[0]), usage}, argc,
                             argv, NULL, NULL);
}

/* The quotas, gated pods and namespaces, from the API server. */
static gq_code list_objects(const queue_opts *o, queue_view *v, gq_err *err)
{
    const char *ns = o->ns;
    char gpath[400], ppath[400];
    snprintf(gpath, sizeof gpath, "/apis/gpuquota.io/v1alpha1%s%s%sgpuquotas",
             ns ? "/namespaces/" : "", ns ? ns : "", ns ? "/" : "/");
    snprintf(ppath, sizeof ppath, "/api/v1%s%s%spods", ns ? "/namespaces/" : "", ns ? ns : "",
             ns ? "/" : "/");
    gq_code rc;
    if ((rc = list_all(v->kc, gpath, &v->gqs, err)) ||
        (rc = list_all(v->kc, "/apis/gpuquota.io/v1alpha1/gputenantquotas", &v->gtqs, err)) ||
        (rc = list_all(v->kc, ppath, &v->podl, err)) ||
        (rc = list_all(v->kc, "/api/v1/namespaces", &v->nss, err)))
        return rc;
    return GQ_OK;
}

/* The cluster's configuration, as `kubectl gpuquota explain` reads it; when
 * the ConfigMap cannot be read, the embedded default, said on stderr. */
static gq_code cluster_config(const queue_opts *o, queue_view *v, gq_err *err)
{
    char source[512];
    const char *sys_ns;
    gq_code rc = cli_gpuquota_namespace(o->sys_ns, &sys_ns, err);
    if (!rc)
        rc = cli_cluster_config(v->kc, NULL, sys_ns, &v->cfg, source, sizeof(source), err);
    if (!rc && !strncmp(source, "embedded default", 16))
        fprintf(stderr, "gpuquota queue: pricing with the %s\n", source);
    return rc;
}

/* The quotas parsed (those with an invalid spec skipped, and counted on
 * stderr) and room for the pods; GQ_ENOMEM or GQ_OK. */
static gq_code parse_quotas(queue_view *v)
{
    size_t np = json_object_array_length(v->podl);
    size_t skipped = 0;
    v->pods = calloc(np ? np : 1, sizeof(*v->pods));
    if (!v->pods || gq_quota_list_append(&v->qs, &v->nq, v->gqs, &skipped, NULL) ||
        gq_quota_list_append(&v->qs, &v->nq, v->gtqs, &skipped, NULL))
        return GQ_ENOMEM;
    if (skipped)
        fprintf(stderr, "gpuquota queue: %zu quota(s) with an invalid spec skipped\n", skipped);
    return GQ_OK;
}

/* Pod p decoded as the controller's cache decodes it (a pod accepting
 * several models is priced on the first until it chooses); false for one
 * that is not queued or does not price. */
static bool decode_qpod(const gq_config *cfg, json_object *pod, qpod *p)
{
    gq_pod gp;
    if (gq_pod_gate_index(pod) < 0)
        return false;
    memset(p, 0, sizeof(*p));
    p->ns = str_at(pod, "metadata", "namespace");
    p->name = str_at(pod, "metadata", "name");
    p->uid = str_at(pod, "metadata", "uid");
    if (!p->ns || !p->name || !p->uid)
        return false;
    gq_pod_init(&gp);
    gq_code crc = gq_pod_decode(cfg, pod, &(gq_pod_scope){.ns = p->ns}, &gp, NULL);
    p->charge = gp.charge;
    p->facts = gp.facts;
    p->group = gp.group;
    p->e.priority = gp.priority;
    p->e.created_us = gp.created_us;
    gq_pod_dispose(&gp);
    if (crc)
        return false;
    p->e.uid = p->uid;
    return true;
}

static void gather_pods(queue_view *v)
{
    size_t np = json_object_array_length(v->podl);
    for (size_t i = 0; i < np; i++)
        if (decode_qpod(v->cfg, json_object_array_get_idx(v->podl, i), &v->pods[v->n]))
            v->n++;
}

int cli_cmd_queue(int argc, char **argv)
{
    queue_opts o = {0};
    int rc = CLI_EXIT_DENIED;
    int parsed = parse_opts(argc, argv, &o);
    if (parsed >= 0)
        return parsed;
    gq_err err;
    gq_err_clear(&err);
    queue_view v;
    memset(&v, 0, sizeof(v));
    if (kube_config_load_default(o.kubeconfig, NULL, &v.kcfg, &err) ||
        (o.config && cli_load_config(o.config, &v.cfg, &err))) {
        fprintf(stderr, "gpuquota queue: %s\n", err.msg);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (kube_client_new(v.kcfg, NULL, &v.kc, &err) || (!v.cfg && cluster_config(&o, &v, &err)) ||
        list_objects(&o, &v, &err)) {
        fprintf(stderr, "gpuquota queue: %s\n", err.msg);
        goto out;
    }
    if (parse_quotas(&v)) {
        fprintf(stderr, "gpuquota queue: out of memory\n");
        goto out;
    }
    gather_pods(&v);
    if (print_queues(v.qs, v.nq, v.pods, v.n, v.nss, o.output == 1, (int64_t)time(NULL))) {
        fprintf(stderr, "gpuquota queue: out of memory\n");
        goto out;
    }
    rc = CLI_EXIT_OK;
out:
    queue_view_dispose(&v);
    return rc;
}
