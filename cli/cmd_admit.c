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
#include "jsonpatch.h"
#include "memstore.h"
#include "mutation.h"
#include "podcost.h"
#include "quantity.h"
#include "review.h"
#include "validate.h"
#include "yamljson.h"

const char gq_cmd_admit_summary[] =
    "evaluate a pod or AdmissionReview offline and print its GPU charge";

#define INPUT_MAX ((size_t)GQ_YAML_MAX_BYTES)
#define CONFIG_MAX ((size_t)1 << 20)

#define STATE_FILES_MAX 64

typedef struct admit_opts {
    const char *config; /* NULL: embedded default */
    bool json;
    const char *file;
    const char *state[STATE_FILES_MAX]; /* --state files (quotas, limit ranges, namespaces, pods) */
    size_t n_state;
} admit_opts;

/* The outcome of evaluating one pod. */
typedef struct admit_result {
    const char *ns, *name; /* borrowed from the pod; may be NULL */
    bool allowed;
    gq_pod_cost cost;
    gq_err err;           /* the denial when !allowed */
    bool validated;       /* the validating decision ran */
    wh_validate_result v; /* its outcome */
} admit_result;

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota admit [--config FILE] [--state FILE]... [-o text|json] FILE\n"
               "\n"
               "FILE holds a Pod or an AdmissionReview (YAML or JSON; - for stdin).\n"
               "Prints each GPU-using container, the GPU model and the pod's charge.\n"
               "--state files hold the cluster the pod is admitted into: GPUQuota,\n"
               "GPUTenantQuota, GPULimitRange, Namespace and Pod objects (or Lists); pods\n"
               "count toward quota usage. The pod then goes through the validating\n"
               "webhook's decision: limit ranges, quotas, requireQuota, tamper checks.\n"
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
        } else if (!strcmp(a, "--state") && i + 1 < argc) {
            if (o->n_state == STATE_FILES_MAX)
                goto bad;
            o->state[o->n_state++] = argv[++i];
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

/* ---- the validating decision against --state ------------------------------ */

#define ADMIT_USER "gpuquota-admit"

/* Every document of the --state files into ms (pods count toward usage). */
static gq_code load_state(const gq_config *cfg, const admit_opts *o, wh_memstore *ms, gq_err *err)
{
    json_object **docs[STATE_FILES_MAX] = {NULL}, **flat = NULL;
    size_t n_docs[STATE_FILES_MAX] = {0}, n_flat = 0;
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < o->n_state && !rc; i++) {
        char *buf = NULL;
        size_t len = 0;
        rc = gq_cli_read_file(o->state[i], INPUT_MAX, &buf, &len, err);
        if (!rc)
            rc = gq_yaml_load(buf, len, o->state[i], &docs[i], &n_docs[i], err);
        free(buf);
        n_flat += n_docs[i];
    }
    if (!rc && n_flat && !(flat = calloc(n_flat, sizeof(*flat))))
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
    if (!rc) {
        size_t k = 0;
        for (size_t i = 0; i < o->n_state; i++)
            for (size_t j = 0; j < n_docs[i]; j++)
                flat[k++] = docs[i][j];
        if ((rc = wh_memstore_load_state(ms, cfg, flat, n_flat, err)))
            gq_err_prefix(err, "--state");
    }
    free(flat);
    for (size_t i = 0; i < o->n_state; i++)
        gq_yaml_docs_free(docs[i], n_docs[i]);
    return rc;
}

/* A decoded AdmissionReview for doc: doc itself when it is one, else a pod
 * CREATE of pod by user gpuquota-admit. */
static gq_code decode_review(json_object *doc, json_object *pod, wh_review_request *out,
                             gq_err *err)
{
    json_object *rv = NULL;
    const char *kind = str_member(doc, "kind");
    if (kind && !strcmp(kind, "AdmissionReview")) {
        rv = json_object_get(doc);
    } else {
        json_object *meta = NULL;
        json_object_object_get_ex(pod, "metadata", &meta);
        const char *ns = str_member(meta, "namespace");
        const char *name = str_member(meta, "name");
        char text[1024];
        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                 "\"request\":{\"uid\":\"" ADMIT_USER "\",\"kind\":{\"group\":\"\",\"version\":"
                 "\"v1\",\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\","
                 "\"resource\":\"pods\"},\"operation\":\"CREATE\",\"userInfo\":{\"username\":"
                 "\"" ADMIT_USER "\"}}}");
        json_object *req;
        if (!(rv = json_tokener_parse(text)) || !json_object_object_get_ex(rv, "request", &req) ||
            json_object_object_add(req, "namespace",
                                   json_object_new_string(ns && ns[0] ? ns : "default")) ||
            (name && json_object_object_add(req, "name", json_object_new_string(name))) ||
            json_object_object_add(req, "object", json_object_get(pod))) {
            json_object_put(rv);
            return gq_err_set(err, GQ_ENOMEM, "out of memory");
        }
    }
    const char *text = json_object_to_json_string_ext(rv, JSON_C_TO_STRING_PLAIN);
    gq_code rc = text ? wh_review_decode(text, strlen(text), out, err)
                      : gq_err_set(err, GQ_ENOMEM, "out of memory");
    json_object_put(rv);
    return rc;
}

/* Run the mutating decision on req (limit-range defaults, rewrite) and, when
 * it patches the pod, decode the review again with the patched object, so
 * the validating decision sees the pod the API server would store. */
static gq_code mutate_first(const gq_config *cfg, const wh_store *st, wh_review_request *req,
                            admit_result *r, gq_err *err)
{
    json_object *arr = NULL, *patched = NULL;
    gq_limit_range **lrs = NULL;
    size_t n = 0;
    wh_review_response resp;
    gq_code rc;
    bool have_resp = false;
    if (!req->object || req->operation != WH_OP_CREATE)
        return GQ_OK;
    if ((rc = st->list_limit_ranges(st->ctx, req->namespace, &arr, err)))
        return rc;
    n = json_object_array_length(arr);
    if (n && !(lrs = calloc(n, sizeof(*lrs)))) {
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = gq_limit_range_parse(json_object_array_get_idx(arr, i), &lrs[i], err)))
            goto out;
    if ((rc = wh_mutate_review(cfg, req, (const gq_limit_range *const *)lrs, n, &resp, err)))
        goto out;
    have_resp = true;
    if (!resp.allowed) {
        r->allowed = false;
        gq_err_set(&r->err, GQ_EDENIED, "%s", resp.message ? resp.message : "denied");
        goto out;
    }
    if (!resp.patch)
        goto out;
    if ((rc = gq_patch_apply_text(req->object, resp.patch, resp.patch_len, &patched, err)))
        goto out;
    json_object *root = json_object_get(req->root), *rq = NULL;
    if (!json_object_object_get_ex(root, "request", &rq) ||
        json_object_object_add(rq, "object", patched)) {
        json_object_put(root);
        rc = gq_err_set(err, GQ_ENOMEM, "out of memory");
        goto out;
    }
    patched = NULL;
    wh_review_request_dispose(req);
    rc = decode_review(root, NULL, req, err);
    json_object_put(root);
out:
    json_object_put(patched);
    if (have_resp)
        wh_review_response_dispose(&resp);
    for (size_t i = 0; lrs && i < n; i++)
        gq_limit_range_free(lrs[i]);
    free(lrs);
    json_object_put(arr);
    return rc;
}

/* The validating webhook's decision on doc against the --state objects.
 * Leaves r->allowed false with the message in r->err on denial. */
static gq_code validate(const gq_config *cfg, const admit_opts *o, json_object *doc,
                        json_object *pod, admit_result *r, gq_err *err)
{
    wh_memstore *ms = NULL;
    wh_validator *v = NULL;
    wh_store st;
    wh_review_request req;
    wh_review_response resp;
    bool have_req = false;
    gq_code rc;
    if ((rc = wh_memstore_new(&ms, err)) || (rc = load_state(cfg, o, ms, err)))
        goto out;
    wh_memstore_store(ms, &st);
    if ((rc = decode_review(doc, pod, &req, err)))
        goto out;
    have_req = true;
    if ((rc = mutate_first(cfg, &st, &req, r, err)) || !r->allowed)
        goto out;
    if ((rc = wh_validator_new(cfg, &st, NULL, &v, err)) ||
        (rc = wh_validate_review(v, &req, &resp, &r->v, err)))
        goto out;
    wh_review_response_dispose(&resp);
    r->validated = true;
    if (!r->v.allowed) {
        r->allowed = false;
        gq_err_set(&r->err, GQ_EDENIED, "%s", r->v.message);
    }
out:
    wh_validator_free(v);
    if (have_req)
        wh_review_request_dispose(&req);
    wh_memstore_free(ms);
    return rc;
}

/* ---- printing ----------------------------------------------------------- */

static const char *kind_name(gq_ctr_kind k)
{
    return k == GQ_CTR_INIT ? "init" : k == GQ_CTR_SIDECAR ? "sidecar" : "app";
}

/* The quotas the validating decision charged, and the reservation key. */
static void print_quotas_text(const admit_result *r)
{
    if (!r->validated)
        return;
    printf("quotas: %s\n", r->v.n_charged ? r->v.charged : "none");
    if (r->v.n_charged)
        printf("reservation: %s\n", r->v.reservation_key);
}

static void add_quotas_json(json_object *o, const admit_result *r)
{
    if (!r->validated)
        return;
    json_object_object_add(o, "quotas",
                           r->v.n_charged ? json_object_new_string(r->v.charged) : NULL);
    json_object_object_add(o, "reservation",
                           r->v.n_charged ? json_object_new_string(r->v.reservation_key) : NULL);
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
    print_quotas_text(r);
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
    add_quotas_json(o, r);
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
    if (r.allowed && validate(cfg, &o, docs[0], pod, &r, &err))
        goto fail;
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
