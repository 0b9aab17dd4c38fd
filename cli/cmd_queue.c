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
#include "quota/config.h"
#include "kube/kube.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/podqueue.h"

const char gq_cmd_queue_summary[] = "list queued pods per quota, in the order they will start";

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota queue [-n NAMESPACE] [-o table|json] [--kubeconfig FILE]\n"
               "                      [--config FILE]\n"
               "\n"
               "Lists every GPUQuota and GPUTenantQuota that has pods waiting behind the\n"
               "scheduling gate gpuquota.io/quota, and the pods in the order they will start\n"
               "(priority, then age): position, charge, priority, pod group and age.\n"
               "  -n, --namespace NS   only queues of pods in NS (default: every namespace)\n"
               "  -o, --output FORMAT  table (default) or json\n"
               "  --kubeconfig FILE    kubeconfig (default: $KUBECONFIG, else in-cluster)\n"
               "  --config FILE        gpuquota configuration that prices pods (the webhook's)\n"
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

/* Print the queues of quotas over pods; returns GQ_ENOMEM or GQ_OK. */
static gq_code print_queues(gq_quota **qs, size_t nq, qpod *pods, size_t n, json_object *nss,
                            bool json, int64_t now)
{
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
    for (size_t j = 0; j < nq; j++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (gq_quota_limits(qs[j], &pods[i].charge) &&
                gq_quota_matches(qs[j], &pods[i].facts, ns_labels(nss, pods[i].ns)))
                line[m++] = &pods[i];
        if (!m)
            continue;
        qsort(line, m, sizeof(*line), ref_cmp);
        char qname[300];
        snprintf(qname, sizeof qname, "%s%s%s%s",
                 qs[j]->kind == GQ_QUOTA_TENANT ? "GPUTenantQuota " : "GPUQuota ",
                 qs[j]->namespace_ ? qs[j]->namespace_ : "", qs[j]->namespace_ ? "/" : "",
                 qs[j]->name);
        json_object *jq = NULL, *jp = NULL;
        if (json) {
            jq = json_object_new_object();
            jp = json_object_new_array();
            if (!jq || !jp || json_object_array_add(out, jq)) {
                json_object_put(jq);
                json_object_put(jp);
                json_object_put(out);
                free(line);
                return GQ_ENOMEM;
            }
            json_object_object_add(jq, "kind",
                                   json_object_new_string(qs[j]->kind == GQ_QUOTA_TENANT
                                                              ? GQ_KIND_GPUTENANTQUOTA
                                                              : GQ_KIND_GPUQUOTA));
            if (qs[j]->namespace_)
                json_object_object_add(jq, "namespace", json_object_new_string(qs[j]->namespace_));
            json_object_object_add(jq, "name", json_object_new_string(qs[j]->name));
            json_object_object_add(
                jq, "whenExceeded",
                json_object_new_string(qs[j]->when_exceeded == GQ_WHEN_QUEUE ? "Queue" : "Deny"));
            json_object_object_add(jq, "queueingStrategy",
                                   json_object_new_string(strategy_name(qs[j])));
            json_object_object_add(jq, "hard", gq_amounts_to_json(&qs[j]->hard));
            json_object_object_add(jq, "used", gq_amounts_to_json(&qs[j]->used));
            json_object_object_add(jq, "pods", jp);
        }
        for (size_t i = 0; i < m; i++) {
            qpod *p = line[i];
            char mem[GQ_QUANTITY_STR_MAX], age[32], pod[300];
            int64_t age_s = p->e.created_us ? now - p->e.created_us / 1000000 : 0;
            gq_amount_format(&p->charge, GQ_KEY_GPU_MEMORY, mem);
            age_text(age_s, age, sizeof age);
            if (!json) {
                snprintf(pod, sizeof pod, "%s/%s", p->ns, p->name);
                printf("%-32s %-14s %4zu  %-40s %8" PRId32 " %10s %-20s %s\n", i ? "" : qname,
                       i ? "" : strategy_name(qs[j]), i + 1, pod, p->e.priority, mem,
                       p->group.present ? p->group.name : "-", age);
                continue;
            }
            json_object *o = json_object_new_object();
            if (!o || json_object_array_add(jp, o)) {
                json_object_put(o);
                json_object_put(out);
                free(line);
                return GQ_ENOMEM;
            }
            json_object_object_add(o, "position", json_object_new_int64((int64_t)i + 1));
            json_object_object_add(o, "namespace", json_object_new_string(p->ns));
            json_object_object_add(o, "name", json_object_new_string(p->name));
            json_object_object_add(o, "uid", json_object_new_string(p->uid));
            json_object_object_add(o, "priority", json_object_new_int(p->e.priority));
            json_object_object_add(o, "charge", gq_amounts_to_json(&p->charge));
            if (p->group.present) {
                json_object_object_add(o, "podGroup", json_object_new_string(p->group.name));
                json_object_object_add(o, "podGroupSize", json_object_new_int64(p->group.size));
            }
            json_object_object_add(o, "ageSeconds", json_object_new_int64(age_s));
        }
    }
    if (json) {
        json_object *doc = json_object_new_object();
        if (!doc) {
            json_object_put(out);
            free(line);
            return GQ_ENOMEM;
        }
        json_object_object_add(doc, "queues", out);
        printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(doc);
    }
    free(line);
    return GQ_OK;
}

/* A namespace name as it may appear in an API path. */
static gq_code parse_ns(const char *name, const char *value, void *dst, gq_err *err)
{
    if (!value[0] || strlen(value) > 253 || strchr(value, '/'))
        return gq_err_set(err, GQ_EINVAL, "%s %s: not a namespace name", name, value);
    *(const char **)dst = value;
    return GQ_OK;
}

int gq_cmd_queue(int argc, char **argv)
{
    static const char *const outputs[] = {"table", "json", NULL};
    const char *ns = NULL, *kubeconfig = NULL, *config = NULL;
    int output = 0, rc = GQ_EXIT_DENIED;
    const gq_cli_opt opts[] = {
        {.name = "--namespace", .alias = "-n", .kind = GQ_OPT_FN, .dst = &ns, .fn = parse_ns},
        {.name = "--output",
         .alias = "-o",
         .kind = GQ_OPT_CHOICE,
         .dst = &output,
         .choices = outputs},
        {.name = "--kubeconfig", .kind = GQ_OPT_NONEMPTY, .dst = &kubeconfig},
        {.name = "--config", .kind = GQ_OPT_NONEMPTY, .dst = &config},
    };
    int parsed = gq_cli_parse_or_exit("queue", argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                                      NULL, NULL, usage);
    if (parsed >= 0)
        return parsed;
    gq_err err;
    gq_err_clear(&err);
    gq_config *cfg = NULL;
    kube_config *kcfg = NULL;
    kube_client *kc = NULL;
    json_object *gqs = NULL, *gtqs = NULL, *podl = NULL, *nss = NULL;
    gq_quota **qs = NULL;
    size_t nq = 0, n = 0;
    qpod *pods = NULL;
    if (gq_cli_load_config(config, &cfg, &err) ||
        kube_config_load_default(kubeconfig, NULL, &kcfg, &err)) {
        fprintf(stderr, "gpuquota queue: %s\n", err.msg);
        rc = GQ_EXIT_USAGE;
        goto out;
    }
    char gpath[400], ppath[400];
    snprintf(gpath, sizeof gpath, "/apis/gpuquota.io/v1alpha1%s%s%sgpuquotas",
             ns ? "/namespaces/" : "", ns ? ns : "", ns ? "/" : "/");
    snprintf(ppath, sizeof ppath, "/api/v1%s%s%spods", ns ? "/namespaces/" : "", ns ? ns : "",
             ns ? "/" : "/");
    if (kube_client_new(kcfg, NULL, &kc, &err) || list_all(kc, gpath, &gqs, &err) ||
        list_all(kc, "/apis/gpuquota.io/v1alpha1/gputenantquotas", &gtqs, &err) ||
        list_all(kc, ppath, &podl, &err) || list_all(kc, "/api/v1/namespaces", &nss, &err)) {
        fprintf(stderr, "gpuquota queue: %s\n", err.msg);
        goto out;
    }
    size_t np = json_object_array_length(podl);
    size_t skipped = 0;
    pods = calloc(np ? np : 1, sizeof(*pods));
    if (!pods || gq_quota_parse_list(gqs, &qs, &nq, &skipped) ||
        gq_quota_parse_list(gtqs, &qs, &nq, &skipped)) {
        fprintf(stderr, "gpuquota queue: out of memory\n");
        goto out;
    }
    if (skipped)
        fprintf(stderr, "gpuquota queue: %zu quota(s) with an invalid spec skipped\n", skipped);
    for (size_t i = 0; i < np; i++) {
        json_object *pod = json_object_array_get_idx(podl, i);
        qpod *p = &pods[n];
        gq_pod gp;
        if (gq_pod_gate_index(pod) < 0)
            continue;
        memset(p, 0, sizeof(*p));
        p->ns = str_at(pod, "metadata", "namespace");
        p->name = str_at(pod, "metadata", "name");
        p->uid = str_at(pod, "metadata", "uid");
        if (!p->ns || !p->name || !p->uid)
            continue;
        /* Decoded as the controller's cache decodes it (a pod accepting
         * several models is priced on the first until it chooses). */
        gq_pod_init(&gp);
        gq_code crc = gq_pod_decode(cfg, pod, &(gq_pod_scope){.ns = p->ns}, &gp, NULL);
        p->charge = gp.charge;
        p->facts = gp.facts;
        p->group = gp.group;
        p->e.priority = gp.priority;
        p->e.created_us = gp.created_us;
        gq_pod_dispose(&gp);
        if (crc)
            continue;
        p->e.uid = p->uid;
        n++;
    }
    if (print_queues(qs, nq, pods, n, nss, output == 1, (int64_t)time(NULL))) {
        fprintf(stderr, "gpuquota queue: out of memory\n");
        goto out;
    }
    rc = GQ_EXIT_OK;
out:
    gq_quota_list_free(qs, nq);
    free(pods);
    json_object_put(gqs);
    json_object_put(gtqs);
    json_object_put(podl);
    json_object_put(nss);
    kube_client_free(kc);
    kube_config_free(kcfg);
    gq_config_free(cfg);
    return rc;
}
