/* gpuquota admit: evaluate a pod (or the pod inside an AdmissionReview) from
 * a file, offline, and print what it costs. The evaluation is the pure core's
 * gq_pod_cost_compute; this file only reads input and prints results, so the
 * full mutate + validate path can replace the evaluation step later without
 * touching the printing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "config.h"
#include "podcost.h"
#include "quantity.h"
#include "yamljson.h"

const char gq_cmd_admit_summary[] =
    "evaluate a pod or AdmissionReview offline and print its GPU charge";

#define INPUT_MAX ((size_t)GQ_YAML_MAX_BYTES)
#define CONFIG_MAX ((size_t)1 << 20)

typedef struct admit_opts {
    const char *config; /* NULL: embedded default */
    bool json;
    const char *file;
} admit_opts;

/* The outcome of evaluating one pod. */
typedef struct admit_result {
    const char *ns, *name; /* borrowed from the pod; may be NULL */
    bool allowed;
    gq_pod_cost cost;
    gq_err err; /* the denial when !allowed */
} admit_result;

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota admit [--config FILE] [-o text|json] FILE\n"
               "\n"
               "FILE holds a Pod or an AdmissionReview (YAML or JSON; - for stdin).\n"
               "Prints each GPU-using container, the GPU model and the pod's charge.\n"
               "\n"
               "exit status: 0 allowed, 1 denied (invalid GPU request), 2 bad input or usage\n");
}

static int parse_args(int argc, char **argv, admit_opts *o)
{
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--config") && i + 1 < argc) {
            o->config = argv[++i];
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "json"))
                o->json = true;
            else if (strcmp(v, "text"))
                goto bad;
        } else if (a[0] == '-' && a[1] != '\0') {
            goto bad;
        } else if (!o->file) {
            o->file = a;
        } else {
            goto bad;
        }
    }
    if (o->file)
        return 0;
bad:
    usage(stderr);
    return GQ_EXIT_USAGE;
}

static gq_code load_config(const char *path, gq_config **out, gq_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    if (!path)
        return gq_config_default(out, err);
    gq_code rc = gq_cli_read_file(path, CONFIG_MAX, &buf, &len, err);
    if (!rc)
        rc = gq_config_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

static const char *str_member(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

/* The pod in doc: the document itself (kind Pod) or request.object of an
 * AdmissionReview. Borrowed. */
static gq_code find_pod(json_object *doc, json_object **pod, gq_err *err)
{
    const char *kind = str_member(doc, "kind");
    json_object *req, *obj;
    if (!json_object_is_type(doc, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "expected a Pod or an AdmissionReview object");
    if (kind && !strcmp(kind, "AdmissionReview")) {
        if (!json_object_object_get_ex(doc, "request", &req) ||
            !json_object_object_get_ex(req, "object", &obj) ||
            !json_object_is_type(obj, json_type_object))
            return gq_err_set(err, GQ_EINVAL, "AdmissionReview has no request.object");
        doc = obj;
        kind = str_member(doc, "kind");
        if (!kind) { /* some senders omit kind in request.object; trust request.kind */
            json_object *rk;
            kind = json_object_object_get_ex(req, "kind", &rk) ? str_member(rk, "kind") : NULL;
        }
    }
    if (!kind || strcmp(kind, "Pod"))
        return gq_err_set(err, GQ_EINVAL, "expected a Pod, found kind %s", kind ? kind : "(none)");
    *pod = doc;
    return GQ_OK;
}

/* Evaluate pod under cfg. Returns GQ_OK when a decision was reached
 * (allowed or denied); other codes mean the evaluation itself failed. */
static gq_code evaluate(const gq_config *cfg, json_object *pod, admit_result *r)
{
    json_object *meta = NULL;
    json_object_object_get_ex(pod, "metadata", &meta);
    r->ns = str_member(meta, "namespace");
    r->name = str_member(meta, "name");
    if (!r->name)
        r->name = str_member(meta, "generateName");
    gq_err_clear(&r->err);
    gq_code rc = gq_pod_cost_compute(cfg, pod, &r->cost, &r->err);
    switch (rc) {
    case GQ_OK:
        r->allowed = true;
        return GQ_OK;
    case GQ_EINVAL:
    case GQ_ERANGE:
    case GQ_ENOTFOUND:
    case GQ_EUNSUPPORTED:
        r->allowed = false;
        return GQ_OK;
    default:
        return rc;
    }
}

/* ---- printing ----------------------------------------------------------- */

static const char *kind_name(gq_ctr_kind k)
{
    return k == GQ_CTR_INIT ? "init" : k == GQ_CTR_SIDECAR ? "sidecar" : "app";
}

static void print_text(const gq_config *cfg, const admit_result *r)
{
    char a[GQ_QUANTITY_STR_MAX], b[GQ_QUANTITY_STR_MAX];
    printf("pod %s%s%s: %s\n", r->ns ? r->ns : "", r->ns ? "/" : "",
           r->name ? r->name : "(unnamed)", r->allowed ? "allowed" : "denied");
    if (!r->allowed) {
        printf("reason: %s\n", r->err.msg);
        return;
    }
    const gq_pod_cost *c = &r->cost;
    gq_format_bytes(cfg->memory_unit, a);
    printf("backend: %s (memory unit %s)\n", gq_backend_name(cfg->backend), a);
    printf("model: %s%s\n", c->model ? c->model->name : "none",
           c->model ? (c->model_pinned ? " (pinned)" : " (default)") : "");
    for (size_t i = 0; i < c->n_ctrs; i++) {
        const gq_ctr_cost *k = &c->ctrs[i];
        if (k->exclusive && !k->memory_per_gpu) {
            snprintf(a, sizeof(a), "whole");
            snprintf(b, sizeof(b), "whole");
        } else {
            gq_format_bytes(k->memory_per_gpu, a);
            gq_format_bytes(k->charged_per_gpu, b);
        }
        printf("container %s (%s): form=%s request=%s gpus=%lld%s memory/gpu=%s charged/gpu=%s\n",
               k->name, kind_name(k->kind), gq_form_name(k->form), k->original, (long long)k->gpus,
               k->exclusive ? " exclusive" : "", a, b);
    }
    gq_format_bytes(c->gpu_memory, a);
    printf("charge: gpu-memory=%s gpus=%lld gpu-pods=%lld\n", a, (long long)c->gpus,
           (long long)c->gpu_pods);
}

static json_object *bytes_json(int64_t v)
{
    char buf[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(v, buf);
    return json_object_new_string(buf);
}

static json_object *result_json(const gq_config *cfg, const admit_result *r)
{
    json_object *o = json_object_new_object(), *pod = json_object_new_object();
    json_object_object_add(o, "allowed", json_object_new_boolean(r->allowed));
    json_object_object_add(pod, "namespace", r->ns ? json_object_new_string(r->ns) : NULL);
    json_object_object_add(pod, "name", r->name ? json_object_new_string(r->name) : NULL);
    json_object_object_add(o, "pod", pod);
    if (!r->allowed) {
        json_object_object_add(o, "reason", json_object_new_string(gq_strerror(r->err.code)));
        json_object_object_add(o, "message", json_object_new_string(r->err.msg));
        return o;
    }
    const gq_pod_cost *c = &r->cost;
    json_object *ctrs = json_object_new_array(), *charge = json_object_new_object();
    json_object_object_add(o, "backend", json_object_new_string(gq_backend_name(cfg->backend)));
    json_object_object_add(o, "memoryUnit", bytes_json(cfg->memory_unit));
    json_object_object_add(o, "model", c->model ? json_object_new_string(c->model->name) : NULL);
    json_object_object_add(o, "modelPinned", json_object_new_boolean(c->model_pinned));
    for (size_t i = 0; i < c->n_ctrs; i++) {
        const gq_ctr_cost *k = &c->ctrs[i];
        json_object *j = json_object_new_object();
        json_object_object_add(j, "name", json_object_new_string(k->name));
        json_object_object_add(j, "kind", json_object_new_string(kind_name(k->kind)));
        json_object_object_add(j, "form", json_object_new_string(gq_form_name(k->form)));
        json_object_object_add(j, "request", json_object_new_string(k->original));
        json_object_object_add(j, "exclusive", json_object_new_boolean(k->exclusive));
        json_object_object_add(j, "gpus", json_object_new_int64(k->gpus));
        json_object_object_add(j, "memoryPerGPU", bytes_json(k->memory_per_gpu));
        json_object_object_add(j, "chargedPerGPU", bytes_json(k->charged_per_gpu));
        json_object_array_add(ctrs, j);
    }
    json_object_object_add(o, "containers", ctrs);
    json_object_object_add(charge, "gpu-memory", bytes_json(c->gpu_memory));
    json_object_object_add(charge, "gpus", json_object_new_int64(c->gpus));
    json_object_object_add(charge, "gpu-pods", json_object_new_int64(c->gpu_pods));
    json_object_object_add(o, "charge", charge);
    return o;
}

static void print_json(const gq_config *cfg, const admit_result *r)
{
    json_object *o = result_json(cfg, r);
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

int gq_cmd_admit(int argc, char **argv)
{
    admit_opts o;
    admit_result r;
    gq_config *cfg = NULL;
    char *buf = NULL;
    size_t len = 0, n_docs = 0;
    json_object **docs = NULL, *pod = NULL;
    gq_err err;
    int status = GQ_EXIT_USAGE;
    int a = parse_args(argc, argv, &o);
    if (a)
        return a < 0 ? GQ_EXIT_OK : a;
    memset(&r, 0, sizeof(r));
    gq_pod_cost_init(&r.cost);
    gq_err_clear(&err);
    const char *name = strcmp(o.file, "-") ? o.file : "<stdin>";
    if (load_config(o.config, &cfg, &err) ||
        gq_cli_read_file(o.file, INPUT_MAX, &buf, &len, &err) ||
        gq_yaml_load(buf, len, name, &docs, &n_docs, &err))
        goto fail;
    if (n_docs != 1) {
        gq_err_set(&err, GQ_EINVAL, "%s: expected one object, found %zu documents", name, n_docs);
        goto fail;
    }
    if (find_pod(docs[0], &pod, &err)) {
        gq_err_prefix(&err, "%s", name);
        goto fail;
    }
    if (evaluate(cfg, pod, &r)) {
        err = r.err;
        goto fail;
    }
    if (o.json)
        print_json(cfg, &r);
    else
        print_text(cfg, &r);
    status = r.allowed ? GQ_EXIT_OK : GQ_EXIT_DENIED;
    goto out;
fail:
    fprintf(stderr, "gpuquota admit: %s\n", err.msg);
out:
    gq_pod_cost_dispose(&r.cost);
    gq_yaml_docs_free(docs, n_docs);
    free(buf);
    gq_config_free(cfg);
    return status;
}
